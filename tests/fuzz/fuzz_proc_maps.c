/* libFuzzer target: /proc/PID/maps text (hdx_maps_parse). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "python/python.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = hdx_fuzz_cstring(data, size); /* the parser takes a C string */
    if (!text)
        return 0;
    hdx_map *maps = NULL;
    size_t n = 0;
    if (hdx_maps_parse(text, &maps, &n) == 0)
        for (size_t i = 0; i < n; i++)
            if (maps[i].path && !maps[i].path[0])
                abort(); /* a kept path is never empty: no path is NULL */
    hdx_maps_free(maps, n);
    free(text);
    return 0;
}
