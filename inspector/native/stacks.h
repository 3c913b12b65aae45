/*
 * Native stacks of live threads: a thread that waits in the kernel is read
 * without a stop (its stack and instruction pointers from /proc); the others
 * are stopped (PTRACE_SEIZE + PTRACE_INTERRUPT) for their registers and a copy
 * of their stack, and let go; then unwind with libunwind from the copy and
 * symbolize (symbols.h).
 *
 * Stage rule: native may include model. (docs/design.md "Stages")
 */
#ifndef HDX_STACKS_H
#define HDX_STACKS_H

#include "model/evidence.h"

/*
 * Take the native stack of every thread of p (already filled by
 * hdx_proc_read). A thread in state S or D that waits in the kernel (its
 * /proc/PID/task/TID/syscall gives the call, its arguments and the user sp
 * and pc) is not stopped: its stack is copied from sp and unwound from pc, sp
 * and the call's argument registers, with the other registers as the unwind
 * tables recover them (and a frame-pointer function's rbp from its prologue);
 * it counts when /proc shows the same wait afterwards (same call, arguments,
 * sp, pc, state, context-switch counts and CPU time: it did not run) and the
 * unwind reached the outermost frame sanely (every pc executable, sp never
 * going down). Otherwise, and for a thread that runs, is stopped by job
 * control or is traced by another tracer: seize, interrupt, wait for the
 * stop (at most timeout_ms), take the registers and a copy of the stack,
 * detach, then unwind from the copy while the thread runs again. Threads in
 * uninterruptible sleep ('D') that cannot be read so share one wait of
 * timeout_ms (from the start of the call) to leave it and are not seized
 * while they stay there; such a
 * thread, or one that does not stop in time, gets stack_error = -ETIMEDOUT. Threads that ended get -ESRCH quietly.
 * No thread is left stopped or traced on any path, including signals to
 * hangdx (see hdx_stacks_emergency_detach). The one exception the kernel
 * forces: a thread that enters 'D' between the seize and the stop cannot be
 * detached until it stops; it stays seized (running) until the next call
 * to this function or hdx_syswatch, or until hangdx exits, when the
 * kernel detaches it. Frames are symbolized after every thread is detached;
 * they replace frames from an earlier call. Adds to p->stopped_us the total
 * microseconds threads were stopped (interrupt to detach; known, 0, when
 * every thread was read without a stop), and to p->n_stopped the number of
 * threads interrupted. Notes what failed
 * into ev: ptrace not permitted (with the uids, or kernel.yama.ptrace_scope,
 * and what to do), "PID n is traced by PID m (name)", did not stop (state
 * and wchan).
 * Returns 0, or a negative errno when no thread could be read
 * (-EPERM: not permitted, -EBUSY: another tracer, -ETIMEDOUT, -ESRCH gone).
 */
int hdx_stacks_sample(hdx_process *p, hdx_evidence *ev, int timeout_ms);

/*
 * Whether hdx_stacks_sample() gives native frames their source file and line
 * (DWARF, through the debug files in /usr/lib/debug): 1 (the default) or 0,
 * function names only, without reading any DWARF (symbols.h,
 * hdx_symcache_new). Takes effect for the symbol cache made after it: set it
 * before a capture, or after hdx_stacks_forget().
 */
void hdx_stacks_set_native_lines(int on);

/*
 * 1: stop every thread for its stack, as hangdx did before it read waiting
 * threads without a stop; 0 (the default): stop only the threads that must be.
 * For tests and benchmarks (the before and after of one run).
 */
void hdx_stacks_set_always_stop(int on);

/*
 * Free the symbolizers that hdx_stacks_sample() keeps per process (pid and
 * start time) so that the samples of one capture read each process's symbols
 * once, and the symbol cache they share (symbols.h: each binary's symbols and
 * DWARF read once for all the processes that map it), and let go of the
 * threads that stopped since (hdx_stacks_release_orphans).
 * Call when a capture is over.
 */
void hdx_stacks_forget(void);

/*
 * Let go of the threads that an earlier sample could not detach (they entered
 * uninterruptible sleep between the seize and the stop, and stay seized until
 * they stop): those that have stopped since are detached, those that ended
 * forgotten. Cheap when there are none; a long-lived hangdx (run
 * --hang-timeout) calls it on every tick, so that such a thread never stays
 * stopped. Returns how many remain seized.
 */
int hdx_stacks_release_orphans(void);

/*
 * Detach from every thread hangdx is tracing right now. Async-signal-safe;
 * installed by main() for SIGINT/SIGTERM/SIGHUP so a target is never left
 * stopped when hangdx is interrupted.
 */
void hdx_stacks_emergency_detach(void);

/* ---- Facts of a live thread that the stack readers need (proc(5)) ---- */

/* Task tid of pid's pid in its innermost pid namespace (the last NSpid field of its
 * status, proc(5)), or HDX_UNKNOWN when unreadable. */
int hdx_proc_ns_pid(int pid, int tid);

/* The real uid of pid (the first Uid of /proc/PID/status, readable by anyone), or -1. */
int hdx_proc_uid(int pid);

#endif
