/*
 * libFuzzer target: a hangdx.snapshot/2 or /1 or hangdx.report/2 or /1 text
 * (hdx_snapshot_load_text) into a fresh evidence, then classified and
 * rendered as a report: the classifier must survive any loaded evidence.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "formats/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1); /* exact size: not NUL-terminated */
    hdx_evidence *ev = hdx_evidence_new();
    if (!text || !ev)
        goto out;
    memcpy(text, data, size);
    char *err = NULL;
    if (hdx_snapshot_load_text(text, size, "fuzz.json", ev, &err) == 0)
        hdx_fuzz_classify(ev);
    free(err);
out:
    hdx_evidence_free(ev);
    free(text);
    return 0;
}
