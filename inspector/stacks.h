/*
 * Native stacks of live threads: attach (PTRACE_SEIZE + PTRACE_INTERRUPT),
 * unwind with libunwind-ptrace, detach, then symbolize (symbols.h).
 */
#ifndef HDX_STACKS_H
#define HDX_STACKS_H

#include "evidence.h"

/*
 * Take the native stack of every thread of p (already filled by
 * hdx_proc_read). For each thread: seize, interrupt, wait for the stop (at
 * most timeout_ms; a thread in uninterruptible sleep that does not stop in
 * time gets stack_error = -ETIMEDOUT), unwind, detach. No thread is left
 * stopped or traced on any path, including signals to hangdx (see
 * hdx_stacks_emergency_detach). Frames are symbolized after every thread is
 * detached. Adds to p->stopped_us the total microseconds threads were
 * stopped. Notes what failed into ev (ptrace not permitted, ...).
 * Returns 0, or a negative errno when no thread could be read
 * (-EPERM: not permitted).
 */
int hdx_stacks_sample(hdx_process *p, hdx_evidence *ev, int timeout_ms);

/*
 * Detach from every thread hangdx is tracing right now. Async-signal-safe;
 * installed by main() for SIGINT/SIGTERM/SIGHUP so a target is never left
 * stopped when hangdx is interrupted.
 */
void hdx_stacks_emergency_detach(void);

#endif
