/*
 * Progress of a running job, for `hangdx run --hang-timeout`: the CPU time of
 * every process under hangdx (the job's tree, orphans that hangdx adopted as
 * child subreaper included), the bytes those processes wrote (proc(5)
 * /proc/PID/io wchar, less what the shim wrote into its trace files), new
 * events in the shim's trace files, and whether a process's main thread moved
 * in Python. Nothing of this is in the job's way: its output goes where it was
 * sent, not through hangdx.
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
#define HDX_WATCH_OUTPUT 8 /* the tree wrote bytes (wchar) beyond the shim's trace lines */

/*
 * A watch over the descendants of the calling process, reading the trace
 * files (*.jsonl) of trace_dir (may be NULL: no trace signal). helper: a child
 * of the caller that is not part of the job (run's signal witness), never
 * counted; 0 when there is none. window_s: how far back CPU growth is summed
 * (> 0); cpu_share: the part of one core that counts as progress (0.05 = 5%).
 * Caller frees with hdx_watch_free. NULL on ENOMEM.
 */
hdx_watch *hdx_watch_new(const char *trace_dir, int helper, double window_s, double cpu_share);

/* Accepts NULL. */
void hdx_watch_free(hdx_watch *w);

/*
 * Take one sample at monotonic time now_s (seconds) and return the progress
 * kinds seen since the last one (0: none). The first call takes the baseline
 * and counts the CPU the tree used before it (its bytes written are only the
 * baseline).
 *
 * HDX_WATCH_OUTPUT: the sum over the tree of what each process wrote since
 * the last sample (/proc/PID/io wchar: every write(2), writev(2), pwrite(2)
 * and sendfile(2), to any fd: a terminal, a pipe, a file, a socket; not
 * send(2), sendto(2), sendmsg(2), splice(2), not stores into a shared
 * mapping) is larger
 * than what the trace files grew by meanwhile (the shim's own lines, read
 * before and after the tree, so that a line written while the tree is read is
 * never taken for output). A process seen for the first time counts with all
 * it wrote; a child's bytes that its parent took on when it reaped it
 * (wait(2) adds them to the parent's counter) count once. A process whose
 * /proc/PID/io may not be read (another user's, not dumpable) counts nothing.
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
 * The live (not zombie) descendants of the calling process, itself and skip
 * (a helper of the caller's, as hdx_watch_new's; 0: none) excluded, ancestors
 * before descendants. *pids is a heap array the caller frees (NULL when *n is
 * 0). 0 or a negative errno.
 */
int hdx_watch_job_pids(int skip, int **pids, size_t *n);

#endif
