/*
 * A short, bounded watch of one thread's system calls (style.md allows it
 * where a wait's object is invisible otherwise): which paths is a thread
 * polling with stat(), or trying to lock without blocking?
 */
#ifndef HDX_SYSWATCH_H
#define HDX_SYSWATCH_H

#include <stddef.h>
#include <stdint.h>

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
 * fcntl's lock commands: a filelock-style loop retries LOCK_NB). The watch
 * ends early after one poll round: once the thread, woken from its sleep,
 * has made other calls and enters a sleep (hdx_syswatch_is_sleep) again. A
 * process stopped by job control (state T) is not watched (0, no hits).
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

/*
 * 1 when x86-64 system call nr is a sleep between polls: time.sleep() is
 * clock_nanosleep from CPython 3.11 and select() before; C loops use nanosleep
 * or pselect6. Threads in poll/epoll wait on sockets (gloo, NCCL), not in a
 * lock loop.
 */
int hdx_syswatch_is_sleep(long nr);

/* Free what hdx_syswatch() returned. Accepts NULL. */
void hdx_syswatch_free(hdx_syswatch_hit *hits, size_t n);

/*
 * Nanoseconds until thread tid of process pid wakes from a sleep with a
 * deadline: when its system call now (/proc/PID/task/TID/syscall, proc(5);
 * x86-64) is clock_nanosleep(clock, TIMER_ABSTIME, &deadline, ...) on
 * CLOCK_REALTIME, CLOCK_MONOTONIC or CLOCK_BOOTTIME, as CPython >= 3.11's
 * time.sleep() calls it (Modules/timemodule.c, pysleep: CLOCK_MONOTONIC,
 * TIMER_ABSTIME). The deadline is read from the process's memory and compared
 * with hangdx's own clock; the system call is read again after it and must be
 * the same sleep (a short sleep may have ended meanwhile and its stack slot be
 * reused). A monotonic or boot-time deadline counts only when pid is in
 * hangdx's time namespace (/proc/PID/ns/time). Returns the time left (0 when
 * the deadline has passed), or -1 when it is not known: another system call, a
 * relative sleep (older Pythons' select(), nanosleep), memory, system call or
 * namespace not readable, the sleep changed while being read.
 */
int64_t hdx_sleep_left_ns(int pid, int tid);

#endif
