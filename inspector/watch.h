/*
 * Progress of a running job, for `hangdx run --hang-timeout`: the CPU time of
 * every process under hangdx (the job's tree, orphans that hangdx adopted as
 * child subreaper included), new events in the shim's trace files, and
 * whether a process's main thread moved in Python. The job's output is one
 * more signal; cmd_run.c passes it through and notes it.
 *
 * A hung job is not silent: gloo and NCCL poll in background threads, a
 * FileBaton waiter wakes ten times a second, and the shim repeats a "wait"
 * line while a wait goes on. So CPU counts only when the tree used at least a
 * share of one core over the last window, and "wait" lines never count.
 *
 * Nor is CPU time progress by itself: a rank whose host waits for the GPU
 * spins in cuStreamSynchronize at a whole core, and NCCL's bootstrap polls a
 * non-blocking accept. hdx_watch_python tells such a spin (a frozen Python
 * stack) from work (a Python stack that moves), reading memory only.
 */
#ifndef HDX_WATCH_H
#define HDX_WATCH_H

#include <stddef.h>

typedef struct hdx_watch hdx_watch;

/* Progress kinds, as a mask (hdx_watch_tick). */
#define HDX_WATCH_CPU 1   /* the tree's CPU time grew by >= cpu_share of a core over the window */
#define HDX_WATCH_TRACE 2 /* a trace file got an event other than "wait" */
#define HDX_WATCH_PYTHON 4 /* a main thread's Python stack moved while it used CPU (hdx_watch_python) */

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
 * Read the Python stack of the main thread of every live process of the job
 * (as `hangdx dump --python-only` does: process_vm_readv, no thread stopped,
 * no code run in the target) and compare it with the one this watch read
 * last time. A process moved when its main thread's frames (functions, files,
 * lines) differ from the last read and that thread used at least cpu_share of
 * a core since then: a healthy loop moves all the time, a rank spinning in a
 * native wait (cuStreamSynchronize, NCCL's bootstrap) does not, and a
 * FileBaton waiter, whose sleep-and-stat loop moves its frames, uses far less
 * CPU than that. The first read of a process is a baseline only.
 *
 * Attachments (hdx_py_attach) are kept per process and renewed when it execs;
 * a process that is not Python, or may not be read, is not asked again until
 * it execs. now_s: monotonic seconds (as hdx_watch_tick). *n_read (may be
 * NULL): how many processes' Python stacks were read this time (0: none could
 * be, e.g. no Python process, or ptrace access denied).
 *
 * Returns HDX_WATCH_PYTHON when one moved, 0 when none did, or a negative
 * errno (-ENOMEM; or the error of listing the tree).
 */
int hdx_watch_python(hdx_watch *w, double now_s, size_t *n_read);

/*
 * The live (not zombie) descendants of the calling process, itself excluded,
 * ancestors before descendants. *pids is a heap array the caller frees (NULL
 * when *n is 0). 0 or a negative errno.
 */
int hdx_watch_job_pids(int **pids, size_t *n);

#endif
