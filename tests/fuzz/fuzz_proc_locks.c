/* libFuzzer target: /proc/locks text (hdx_kernel_locks_parse). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "gather/locks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = hdx_fuzz_cstring(data, size); /* the parser takes a C string */
    if (!text)
        return 0;
    hdx_kernel_lock *locks = NULL;
    size_t n = 0;
    (void)hdx_kernel_locks_parse(text, &locks, &n);
    free(locks);
    free(text);
    return 0;
}
