/* libFuzzer target: /proc/PID/stat text (hdx_stat_parse). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gather/proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = hdx_fuzz_cstring(data, size); /* the parser takes a C string */
    if (!text)
        return 0;
    hdx_stat st;
    int rc = hdx_stat_parse(text, &st);
    if (rc != 0 && rc != -EIO)
        abort();
    if (rc == 0 && (st.last < 2 || st.last > HDX_STAT_FIELDS || strlen(st.comm) >= sizeof st.comm))
        abort(); /* the fields counted are proc(5)'s; comm is always terminated */
    free(text);
    return 0;
}
