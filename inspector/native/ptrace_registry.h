/*
 * Private to stacks.c and syswatch.c: the threads hangdx has seized right
 * now, so that every one of them is let go on any path, including a signal
 * to hangdx (hdx_stacks_emergency_detach), and the bounded waits ptrace
 * stops need. Not thread-safe: hangdx traces from one thread (ptrace requests
 * must come from the thread that seized).
 *
 * Life of a seized thread: hdx_ptrace_seize -> PTRACE_INTERRUPT ->
 * hdx_ptrace_wait_stop -> (registers, memory, hdx_ptrace_resume for
 * PTRACE_SYSCALL loops) -> hdx_ptrace_detach from a stop, or
 * hdx_ptrace_release from anywhere.
 */
#ifndef HDX_PTRACE_REGISTRY_H
#define HDX_PTRACE_REGISTRY_H

/*
 * Seize tid of pid (PTRACE_SEIZE with options) and record it. 0, or a
 * negative errno: -EPERM not permitted, -EBUSY another tracer holds it (its
 * pid in *tracer, which may be NULL), -ESRCH gone, -ENOSPC when too many
 * threads are recorded already.
 */
int hdx_ptrace_seize(int pid, int tid, unsigned long options, int *tracer);

/*
 * Wait for the seized tid to report a stop, at most timeout_ms (waitpid
 * WNOHANG polled with short sleeps). Returns 1 stopped (*status filled; a
 * signal-delivery-stop's signal is remembered and handed back by the next
 * resume or detach), 0 not stopped in time, -ESRCH when it exited (it is
 * forgotten then). Signals to hangdx are held off from the collection of a
 * stop until its signal is remembered, so that hdx_ptrace_detach_all in a
 * handler hands it back too.
 */
int hdx_ptrace_wait_stop(int tid, int timeout_ms, int *status);

/*
 * Resume a stopped tid with request (PTRACE_SYSCALL, PTRACE_CONT), handing
 * back the remembered signal. 0 or a negative errno.
 */
int hdx_ptrace_resume(int tid, int request);

/* Let go of a stopped tid (PTRACE_DETACH, handing back the remembered
 * signal) and forget it. 0 or a negative errno; forgotten in every case. */
int hdx_ptrace_detach(int tid);

/*
 * Let go of a seized tid that may be running: interrupt it, wait up to
 * timeout_ms for the stop, detach. When it does not stop in time
 * (uninterruptible sleep) it stays recorded as an orphan, with the interrupt
 * pending: hdx_ptrace_sweep() and hdx_ptrace_detach_all() retry, and the
 * kernel detaches it at the latest when hangdx exits.
 * 0, -ETIMEDOUT (left as an orphan), or another negative errno.
 */
int hdx_ptrace_release(int tid, int timeout_ms);

/* Detach orphans that have stopped since; forget the ones that exited.
 * Returns how many remain recorded. */
int hdx_ptrace_sweep(void);

/* Detach every recorded thread. Async-signal-safe: raw system calls and, for
 * a thread that is running, a bounded wait of about 20 ms. */
void hdx_ptrace_detach_all(void);

/* TracerPid of a thread from /proc/PID/task/TID/status: 0 none, -1 unknown. */
int hdx_ptrace_tracer_of(int pid, int tid);

#endif
