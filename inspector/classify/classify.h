/*
 * The classifier: evidence in, verdict out. Pure: no I/O, no ptrace, no
 * clock; tested on recorded evidence alone (docs/design.md "Stages").
 *
 * Stage rule: classify may include model. (docs/design.md "Stages")
 */
#ifndef HDX_CLASSIFY_H
#define HDX_CLASSIFY_H

#include <stddef.h>

#include "model/evidence.h"

enum hdx_class {
    HDX_CLASS_BUILD_LOCK,
    HDX_CLASS_COMPILE_STALL,
    HDX_CLASS_COLLECTIVE_WAIT,
    HDX_CLASS_P2P_MISMATCH,
    HDX_CLASS_RENDEZVOUS_WAIT,
    HDX_CLASS_CONFIG_ERROR,
    HDX_CLASS_NOT_HUNG,
    HDX_CLASS_UNKNOWN,
};

enum hdx_confidence { HDX_CONF_LOW, HDX_CONF_MEDIUM, HDX_CONF_HIGH };

typedef struct hdx_verdict {
    enum hdx_class cls;
    char *summary; /* one sentence for a person */
    char *remedy;  /* what to do, or NULL */
    int *culprit_ranks;
    size_t n_culprit_ranks;
    int *culprit_pids;
    size_t n_culprit_pids;
    int *missing_ranks;
    size_t n_missing_ranks;
    int missing_count; /* rendezvous_wait: how many ranks are missing when a log tells the count
                          but maybe not which (report: this, else n_missing_ranks, else null); 0 unknown */
    enum hdx_confidence confidence;
    int culprit_working; /* 1 when a root of the waits-for graph is doing work (a live build whose
                            compilers make progress, a rank that computes): the job may only be
                            slow, and nothing may end it */
    char *group;         /* the name of the process group the hang is in (hdx_pgroup.name), or NULL */
    struct hdx_waitsfor *graph; /* the job's waits-for graph the verdict was read from (waitsfor.h), or
                                   NULL: it borrows from the evidence, which must outlive the verdict */
} hdx_verdict;

/*
 * Classify ev into *v (zeroed by the caller or left from hdx_verdict_clear).
 * Also sets each thread's wait label (hdx_thread.wait) and each process's
 * progressing flag when samples allow. Returns 0 or -ENOMEM.
 */
int hdx_classify(hdx_evidence *ev, hdx_verdict *v);

/* Release what v owns and zero it. Accepts NULL. */
void hdx_verdict_clear(hdx_verdict *v);

/* "build_lock", "compile_stall", ... */
const char *hdx_class_name(enum hdx_class c);

#endif
