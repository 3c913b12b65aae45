/*
 * libFuzzer target: a job log (hdx_log_load, which only takes a path: the
 * input goes through a memfd) against the built-in patterns, loaded once
 * from the source tree (HDX_FUZZ_PATTERNS); then classified and reported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "formats/logs.h"

static hdx_log_patterns *patterns;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *err = NULL;
    if (hdx_log_patterns_load_file(HDX_FUZZ_PATTERNS, &patterns, &err) < 0) {
        fprintf(stderr, "fuzz_logs: %s\n", err ? err : "cannot load the patterns");
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = hdx_fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    hdx_evidence *ev = hdx_evidence_new();
    char *err = NULL;
    if (ev && hdx_log_load(patterns, path, ev, &err) == 0)
        hdx_fuzz_classify(ev);
    free(err);
    hdx_evidence_free(ev);
    close(fd);
    return 0;
}
