/*
 * Kernel locks: flock, the lock commands of fcntl/fcntl64, lockf/lockf64.
 *
 * A blocking call (flock without LOCK_NB, F_SETLKW, F_OFD_SETLKW, lockf
 * F_LOCK) writes lock_start before it and lock_end after it, so a call still
 * blocked shows as a lock_start without its end. A non-blocking attempt that
 * fails because the lock is taken (EWOULDBLOCK/EAGAIN, or EACCES for POSIX
 * locks) counts as a poll of a wait (how "flock", "posix", "ofd", "lockf"),
 * aggregated like the stat polls of a FileBaton: the filelock library
 * retries LOCK_NB every 50 ms. Unlocks and successful non-blocking calls
 * record nothing (the cost of a wrapper is then one comparison).
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <unistd.h>

static int on(void)
{
    return atomic_load_explicit(&hdx_on, memory_order_relaxed) && !hdx_busy();
}

static const char *op_names[HDX_HOW_N] = {[HDX_HOW_FLOCK] = "flock", [HDX_HOW_POSIX] = "posix",
                                          [HDX_HOW_OFD] = "ofd", [HDX_HOW_LOCKF] = "lockf"};

/* lock_start; returns 0 when lock_end must follow. */
static int lock_start(int fd, enum hdx_how how, const char *cmd)
{
    char p[PATH_MAX];
    if (hdx_enter() != 0)
        return -1;
    int known = hdx_fd_path(fd, p, sizeof p) == 0;
    struct hdx_w w;
    hdx_w_event(&w, HDX_EV_LOCK_START);
    hdx_w_kint(&w, "fd", fd);
    hdx_w_kstr(&w, "op", op_names[how]);
    hdx_w_kstr(&w, "cmd", cmd);
    hdx_w_kstr(&w, "path", known ? p : NULL);
    hdx_w_emit(&w);
    hdx_leave();
    return 0;
}

static void lock_end(int fd, enum hdx_how how, int rc, int e)
{
    char p[PATH_MAX];
    if (hdx_enter() != 0)
        return;
    int known = hdx_fd_path(fd, p, sizeof p) == 0;
    struct hdx_w w;
    hdx_w_event(&w, HDX_EV_LOCK_END);
    hdx_w_kint(&w, "fd", fd);
    hdx_w_kstr(&w, "op", op_names[how]);
    hdx_w_kint(&w, "rc", rc);
    hdx_w_kint(&w, "errno", rc < 0 ? e : 0);
    hdx_w_kstr(&w, "path", known ? p : NULL);
    hdx_w_emit(&w);
    hdx_leave();
}

static int busy_errno(int e, enum hdx_how how)
{
    return e == EWOULDBLOCK || e == EAGAIN || (how != HDX_HOW_FLOCK && e == EACCES);
}

/* After a non-blocking attempt: a wait poll on failure, the end of a wait on success. */
static void after_try(int fd, enum hdx_how how, int rc, int e)
{
    if (rc < 0 && busy_errno(e, how))
        hdx_kernel_wait(fd, how);
    else if (rc == 0 && atomic_load_explicit(&hdx_known_kernel, memory_order_relaxed))
        hdx_kernel_taken(fd, how);
}

HDX_EXPORT int flock(int fd, int op)
{
    __typeof__(hdx_real.flock) fn = REAL(flock);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    if ((op & (LOCK_EX | LOCK_SH)) == 0 || !on())
        return fn(fd, op);
    if (op & LOCK_NB) {
        int rc = fn(fd, op);
        int e = errno;
        after_try(fd, HDX_HOW_FLOCK, rc, e);
        errno = e;
        return rc;
    }
    int e0 = errno;
    int traced = lock_start(fd, HDX_HOW_FLOCK, op & LOCK_EX ? "LOCK_EX" : "LOCK_SH") == 0;
    errno = e0;
    int rc = fn(fd, op);
    int e = errno;
    if (traced)
        lock_end(fd, HDX_HOW_FLOCK, rc, e);
    errno = e;
    return rc;
}

/* F_SETLK etc. on a struct flock; F_OFD_* take the same struct. */
static int do_fcntl(int (*fn)(int, int, ...), int fd, int cmd, void *arg)
{
    enum hdx_how how;
    int blocking;
    switch (cmd) {
    case F_SETLK: how = HDX_HOW_POSIX, blocking = 0; break;
    case F_SETLKW: how = HDX_HOW_POSIX, blocking = 1; break;
    case F_OFD_SETLK: how = HDX_HOW_OFD, blocking = 0; break;
    case F_OFD_SETLKW: how = HDX_HOW_OFD, blocking = 1; break;
    default: return fn(fd, cmd, arg);
    }
    const struct flock *fl = arg;
    if (!fl || fl->l_type == F_UNLCK || !on())
        return fn(fd, cmd, arg);
    short type = fl->l_type; /* read before the call: F_SETLK* may not change it, but be safe */
    if (!blocking) {
        int rc = fn(fd, cmd, arg);
        int e = errno;
        after_try(fd, how, rc, e);
        errno = e;
        return rc;
    }
    int e0 = errno;
    int traced = lock_start(fd, how, type == F_WRLCK ? "F_WRLCK" : "F_RDLCK") == 0;
    errno = e0;
    int rc = fn(fd, cmd, arg);
    int e = errno;
    if (traced)
        lock_end(fd, how, rc, e);
    errno = e;
    return rc;
}

/* The third argument, whatever cmd takes (int, pointer or none), goes on as a
 * pointer-sized value: the x86-64 and aarch64 ABIs pass it in a register. */
HDX_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    __typeof__(hdx_real.fcntl) fn = REAL(fcntl);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return do_fcntl(fn, fd, cmd, arg);
}

HDX_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    __typeof__(hdx_real.fcntl64) fn = REAL(fcntl64);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return do_fcntl(fn, fd, cmd, arg);
}

static int do_lockf(int (*fn)(int, int, off_t), int fd, int cmd, off_t len)
{
    if ((cmd != F_LOCK && cmd != F_TLOCK) || !on())
        return fn(fd, cmd, len);
    if (cmd == F_TLOCK) {
        int rc = fn(fd, cmd, len);
        int e = errno;
        after_try(fd, HDX_HOW_LOCKF, rc, e);
        errno = e;
        return rc;
    }
    int e0 = errno;
    int traced = lock_start(fd, HDX_HOW_LOCKF, "F_LOCK") == 0;
    errno = e0;
    int rc = fn(fd, cmd, len);
    int e = errno;
    if (traced)
        lock_end(fd, HDX_HOW_LOCKF, rc, e);
    errno = e;
    return rc;
}

HDX_EXPORT int lockf(int fd, int cmd, off_t len)
{
    __typeof__(hdx_real.lockf) fn = REAL(lockf);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return do_lockf(fn, fd, cmd, len);
}

HDX_EXPORT int lockf64(int fd, int cmd, off_t len)
{
    __typeof__(hdx_real.lockf64) fn = REAL(lockf64);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return do_lockf(fn, fd, cmd, len);
}
