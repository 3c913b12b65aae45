/*
 * libFuzzer target: the pickle reader that runs nothing (hdx_pickle_read), then the same bytes
 * as a Flight Recorder dump of rank 1 (the pickle, or its JSON form), classified and reported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign.h"
#include "formats/pickle.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *tree = NULL;
    hdx_pickle_error e;
    if (hdx_pickle_read(data, size, &tree, &e) == 0)
        cJSON_Delete(tree);
    char *text = malloc(size ? size : 1); /* exact size: not NUL-terminated */
    hdx_evidence *ev = hdx_evidence_new();
    if (text && ev) {
        memcpy(text, data, size);
        char *err = NULL;
        /* named as torch names a dump: the prefix, then the rank */
        if (hdx_foreign_load_text(text, size, HDX_FOREIGN_FLIGHT_RECORDER, "nccl_trace_rank_1", ev, &err) == 0)
            hdx_fuzz_classify(ev);
        free(err);
    }
    hdx_evidence_free(ev);
    free(text);
    return 0;
}
