/*
 * Processes: fork and posix_spawn{,p} write a spawn event in the parent;
 * the fork child opens its own trace file and writes its header. exit,
 * _exit and _Exit write an exit event. vfork and exec are not wrapped: a
 * new image loads the shim again and writes its own header; in a vfork
 * child hdx_enter() refuses, so nothing shared is written.
 */
#include "shim.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void spawn_event(pid_t child, const char *via, char *const argv[])
{
    struct hdx_buf *b;
    if (!atomic_load_explicit(&hdx_on, memory_order_relaxed) || !(b = hdx_enter()))
        return;
    struct hdx_w *w = &b->w;
    hdx_w_event(w, HDX_EV_SPAWN);
    hdx_w_kint(w, "child", child);
    hdx_w_kstr(w, "via", via);
    hdx_w_kargv(w, "argv", argv);
    hdx_w_emit(w);
    hdx_leave();
}

HDX_EXPORT pid_t fork(void)
{
    __typeof__(hdx_real.fork) fn = REAL(fork);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    pid_t r = fn();
    int e = errno;
    if (r == 0)
        hdx_after_fork_child();
    else if (r > 0)
        spawn_event(r, "fork", NULL);
    errno = e;
    return r;
}

/* posix_spawn and posix_spawnp: the real call, then the child's pid and argv in the trace. */
static int spawn(__typeof__(hdx_real.posix_spawn) fn, pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                 char *const argv[], char *const envp[])
{
    if (!fn)
        return ENOSYS;
    pid_t child;
    int rc = fn(&child, path, fa, attr, argv, envp);
    int e = errno;
    if (rc == 0) {
        if (pid)
            *pid = child;
        spawn_event(child, "posix_spawn", argv);
    }
    errno = e;
    return rc;
}

HDX_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(REAL(posix_spawn), pid, path, fa, attr, argv, envp);
}

HDX_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                            const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(REAL(posix_spawnp), pid, file, fa, attr, argv, envp);
}

/* 1 once this process wrote its exit event (not written in a vfork child). */
static atomic_int exit_written;

/* The exit line: status, or null (status_known 0); with the events dropped, if any. */
static void exit_line(int status, int status_known)
{
    struct hdx_buf *b;
    if (!atomic_load_explicit(&hdx_on, memory_order_relaxed) || !(b = hdx_enter()))
        return;
    if (!atomic_exchange(&exit_written, 1)) {
        hdx_lock_counts_flush(b);
        struct hdx_w *w = &b->w;
        hdx_w_event(w, HDX_EV_EXIT);
        if (status_known)
            hdx_w_kint(w, "status", status);
        else
            hdx_w_raw(w, ",\"status\":null");
        long dropped = atomic_load(&hdx_dropped);
        if (dropped > 0)
            hdx_w_kint(w, "dropped", dropped);
        hdx_w_emit(w);
    }
    hdx_leave();
}

/* Returning from main() calls exit() from inside libc, past the wrapper: the
 * destructor still tells that the image ended, with "status":null. */
__attribute__((destructor)) static void exit_at_return(void)
{
    exit_line(0, 0);
}

HDX_EXPORT void exit(int status)
{
    exit_line(status, 1);
    __typeof__(hdx_real.exit) fn = REAL(exit);
    if (fn)
        fn(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

HDX_EXPORT void _exit(int status)
{
    exit_line(status, 1);
    __typeof__(hdx_real._exit) fn = REAL(_exit);
    if (fn)
        fn(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

HDX_EXPORT void _Exit(int status)
{
    exit_line(status, 1);
    __typeof__(hdx_real._Exit) fn = REAL(_Exit);
    if (fn)
        fn(status);
    for (;;)
        syscall(SYS_exit_group, status);
}
