/*
 * A short, bounded watch of one thread's system calls (style.md allows it
 * where a wait's object is invisible otherwise): which paths is a thread
 * polling with stat(), or trying to lock without blocking?
 */
#ifndef HDX_SYSWATCH_H
#define HDX_SYSWATCH_H

#include <stddef.h>

/* What a watched thread did to one path. */
enum hdx_syswatch_use {
    HDX_WATCH_STAT,      /* stat, lstat, newfstatat, statx, access, faccessat* */
    HDX_WATCH_OPEN,      /* open, openat, openat2, creat */
    HDX_WATCH_LOCK_TRY,  /* flock() or fcntl(F_SETLK/F_SETLKW/F_OFD_SETLK*) on an fd of it */
};

typedef struct hdx_syswatch_hit {
    char *path; /* absolute (see below); heap */
    enum hdx_syswatch_use use;
} hdx_syswatch_hit;

/*
 * Trace thread tid of process pid for at most ms milliseconds (PTRACE_SEIZE,
 * then syscall-enter stops) and collect the paths passed to stat-family
 * calls and opens, and the files behind the fds of lock calls (flock, and
 * fcntl's lock commands: a filelock-style loop retries LOCK_NB).
 * Relative paths are resolved against /proc/PID/cwd, or the dirfd's path
 * (/proc/PID/fd/N). The thread is detached on every path and never left
 * stopped. *hits is a heap array (each path and use once), freed with
 * hdx_syswatch_free(). Paths are made absolute lexically (no symlinks resolved; "." and
 * doubled slashes dropped). The same registry as stacks.c records the
 * thread, so hdx_stacks_emergency_detach() lets it go too. Returns 0
 * (possibly with *n == 0; also when the thread exits during the watch) or a
 * negative errno (-EPERM when ptrace is not permitted, -ESRCH gone, -EBUSY
 * another tracer is attached, -ETIMEDOUT it did not stop within ms, e.g. in
 * uninterruptible sleep).
 */
int hdx_syswatch(int pid, int tid, int ms, hdx_syswatch_hit **hits, size_t *n);

/* Free what hdx_syswatch() returned. Accepts NULL. */
void hdx_syswatch_free(hdx_syswatch_hit *hits, size_t n);

#endif
