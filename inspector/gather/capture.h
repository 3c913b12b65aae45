/*
 * Live capture, shared by inspect and snapshot: discover the processes, read
 * /proc, traces, stacks (native + Python, with locals) and the locks they
 * wait on, over N samples. No classification.
 *
 * Stage rule: gather may include model, native, python, formats. (docs/design.md "Stages")
 */
#ifndef HDX_CAPTURE_H
#define HDX_CAPTURE_H

#include <stddef.h>

#include "model/evidence.h"

/* "JOBID.STEPID" of a hangdx that collects through srun from inside a step of
 * the job it collects (hangdx inspect --slurm-job run in the allocation): that
 * step's tasks are no ranks either. Set by the collector for the nodes. */
#define HDX_SLURM_COLLECTOR_ENV "HANGDX_SLURM_COLLECTOR"

typedef struct hdx_capture_options {
    const int *pids;       /* processes asked for; each is taken with its descendants */
    size_t n_pids;
    int all;               /* also every rank process on this host (hdx_proc_find_ranks);
                              inside a Slurm step (SLURM_JOB_ID set in hangdx's environment)
                              only that job's, without the collecting steps: hangdx's own
                              SLURM_STEP_ID and the step named by HDX_SLURM_COLLECTOR_ENV */
    const char *trace_dir; /* the shim's traces, or NULL: the processes' HANGDX_TRACE_DIR */
    int samples;           /* >= 1 */
    int interval_ms;
    int native_lines;      /* native frames with file:line (DWARF read); 0: function names only */
} hdx_capture_options;

/*
 * Capture into ev (from hdx_evidence_new). A rank process brings its sibling
 * ranks (the other rank processes under its parent); a lock holder brings its
 * descendants (its build). Each missing or unreadable pid gets a note. Busy vs
 * stuck: CPU time across the samples, and whether the main thread's stack
 * moved between the first and the last (set on each process).
 * *failures (may be NULL) counts processes whose stacks could not be read,
 * and those that exited during the capture (each noted "process N exited
 * while being inspected", alive set to 0, kept as last seen). Returns 0 (check ev->n_procs: nothing may have been found), or -ENOMEM.
 */
int hdx_capture(hdx_evidence *ev, const hdx_capture_options *o, int *failures);

#endif
