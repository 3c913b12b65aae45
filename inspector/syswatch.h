/*
 * A short, bounded watch of one thread's system calls (style.md allows it
 * where a wait's object is invisible otherwise): which paths is a thread
 * polling with stat()?
 */
#ifndef HDX_SYSWATCH_H
#define HDX_SYSWATCH_H

#include <stddef.h>

/*
 * Trace thread tid of process pid for at most ms milliseconds (PTRACE_SEIZE,
 * then syscall-enter stops) and collect the paths passed to stat-family
 * calls (stat, lstat, newfstatat, statx, access, faccessat*) and opens.
 * Relative paths are resolved against /proc/PID/cwd, or the dirfd's path
 * (/proc/PID/fd/N). The thread is detached on every path and never left
 * stopped. *paths is a heap array of heap strings (each once), freed by the
 * caller. Paths are made absolute lexically (no symlinks resolved; "." and
 * doubled slashes dropped). The same registry as stacks.c records the
 * thread, so hdx_stacks_emergency_detach() lets it go too. Returns 0
 * (possibly with *n == 0; also when the thread exits during the watch) or a
 * negative errno (-EPERM when ptrace is not permitted, -ESRCH gone, -EBUSY
 * another tracer is attached, -ETIMEDOUT it did not stop within ms, e.g. in
 * uninterruptible sleep).
 */
int hdx_syswatch_paths(int pid, int tid, int ms, char ***paths, size_t *n);

#endif
