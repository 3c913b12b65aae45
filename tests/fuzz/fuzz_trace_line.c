/* libFuzzer target: one line of a hangdx.trace/1 file (hdx_trace_parse_line). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/traces.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The parser takes (line, len); give it an exact-size copy so ASan sees any overread. */
    char *line = malloc(size ? size : 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    hdx_trace_event ev;
    hdx_trace_image img;
    memset(&ev, 0, sizeof ev);
    memset(&img, 0, sizeof img);
    int r = hdx_trace_parse_line(line, size, &ev, &img);
    if (r == 1)
        hdx_trace_event_clear(&ev);
    else if (r == 2)
        hdx_trace_image_clear(&img);
    free(line);
    return 0;
}
