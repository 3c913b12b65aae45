/*
 * libFuzzer target: another tool's stack dump (hdx_foreign_load_text, format
 * sniffed), then classified and reported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1); /* exact size: not NUL-terminated */
    hdx_evidence *ev = hdx_evidence_new();
    if (!text || !ev)
        goto out;
    memcpy(text, data, size);
    char *err = NULL;
    /* The name carries a rank, as a dump's file name often does. */
    if (hdx_foreign_load_text(text, size, HDX_FOREIGN_NONE, "dump-rank1.txt", ev, &err) == 0)
        hdx_fuzz_classify(ev);
    free(err);
out:
    hdx_evidence_free(ev);
    free(text);
    return 0;
}
