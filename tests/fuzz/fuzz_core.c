/*
 * libFuzzer target: an ELF core (hdx_core_load, which takes a path: the input
 * goes through a memfd), then classified and reported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats/core.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = hdx_fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    hdx_evidence *ev = hdx_evidence_new();
    char *err = NULL;
    if (ev && hdx_core_load(path, ev, &err) == 0)
        hdx_fuzz_classify(ev);
    free(err);
    hdx_evidence_free(ev);
    close(fd);
    return 0;
}
