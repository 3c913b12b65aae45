/*
 * Progress of a running job, for `hangdx run --hang-timeout`: the CPU time of
 * every process under hangdx (the job's tree, orphans that hangdx adopted as
 * child subreaper included) and new events in the shim's trace files. The
 * job's output is the third signal; cmd_run.c passes it through and notes it.
 *
 * A hung job is not silent: gloo and NCCL poll in background threads, a
 * FileBaton waiter wakes ten times a second, and the shim repeats a "wait"
 * line while a wait goes on. So CPU counts only when the tree used at least a
 * share of one core over the last window, and "wait" lines never count.
 */
#ifndef HDX_WATCH_H
#define HDX_WATCH_H

#include <stddef.h>

typedef struct hdx_watch hdx_watch;

/* Progress kinds, as a mask (hdx_watch_tick). */
#define HDX_WATCH_CPU 1   /* the tree's CPU time grew by >= cpu_share of a core over the window */
#define HDX_WATCH_TRACE 2 /* a trace file got an event other than "wait" */

/*
 * A watch over the descendants of the calling process, reading the trace
 * files (*.jsonl) of trace_dir (may be NULL: no trace signal). window_s: how
 * far back CPU growth is summed (> 0); cpu_share: the part of one core that
 * counts as progress (0.05 = 5%). Caller frees with hdx_watch_free. NULL on
 * ENOMEM.
 */
hdx_watch *hdx_watch_new(const char *trace_dir, double window_s, double cpu_share);

/* Accepts NULL. */
void hdx_watch_free(hdx_watch *w);

/*
 * Take one sample at monotonic time now_s (seconds) and return the progress
 * kinds seen since the last one (0: none). The first call takes the baseline
 * and counts the CPU the tree used before it.
 */
int hdx_watch_tick(hdx_watch *w, double now_s);

/*
 * Forget the CPU history: the next tick counts only what was used after this
 * call (after a capture, whose ptrace stops the job's threads and must not
 * look like its progress). Trace offsets are kept.
 */
void hdx_watch_rebase(hdx_watch *w);

/*
 * The live (not zombie) descendants of the calling process, itself excluded,
 * ancestors before descendants. *pids is a heap array the caller frees (NULL
 * when *n is 0). 0 or a negative errno.
 */
int hdx_watch_job_pids(int **pids, size_t *n);

#endif
