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
 *
 * The bound (trace.h, "lock_count"): after HDX_TRACE_LOCK_FULL blocking
 * calls on one path, a blocking call first tries the lock without waiting
 * (LOCK_NB, F_SETLK, F_OFD_SETLK, F_TLOCK): taken at once, it is only
 * counted (a lock_count line at most once a second, and at exit); not taken,
 * it is recorded in full (lock_start, the real blocking call, lock_end), so a
 * call that hangs always shows. For a result the try changes nothing: taken,
 * the blocking call would have taken it too; not taken, the blocking call is
 * made as without the shim and its result returned.
 */
#include "shim.h"
#include "hangdx/fnv.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
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
    struct hdx_buf *b = hdx_enter();
    if (!b)
        return -1;
    int known = hdx_fd_path(fd, b->path, sizeof b->path) == 0;
    struct hdx_w *w = &b->w;
    hdx_w_event(w, HDX_EV_LOCK_START);
    hdx_w_kint(w, "fd", fd);
    hdx_w_kstr(w, "op", op_names[how]);
    hdx_w_kstr(w, "cmd", cmd);
    hdx_w_kpath(w, "path", known ? b->path : NULL);
    hdx_w_emit(w);
    hdx_leave();
    return 0;
}

static void lock_end(int fd, enum hdx_how how, int rc, int e)
{
    struct hdx_buf *b = hdx_enter();
    if (!b)
        return;
    int known = hdx_fd_path(fd, b->path, sizeof b->path) == 0;
    struct hdx_w *w = &b->w;
    hdx_w_event(w, HDX_EV_LOCK_END);
    hdx_w_kint(w, "fd", fd);
    hdx_w_kstr(w, "op", op_names[how]);
    hdx_w_kint(w, "rc", rc);
    hdx_w_kint(w, "errno", rc < 0 ? e : 0);
    hdx_w_kpath(w, "path", known ? b->path : NULL);
    hdx_w_emit(w);
    hdx_leave();
}

/* ---- the per-path count of blocking calls (the bound) ---- */

#define COUNT_SLOTS 64

struct count_slot {
    atomic_ullong key;     /* hash of the path, 0: free */
    atomic_llong calls;    /* blocking calls on this path so far */
    atomic_llong pending;  /* counted, not yet written */
    atomic_llong since;    /* first counted call not yet written (ns) */
    atomic_llong last;     /* when the last lock_count line was written (ns) */
    enum hdx_how how;
    char path[HDX_LOCK_PATH_MAX_COUNT];
};

static struct count_slot counts[COUNT_SLOTS];

static uint64_t hash64(const char *s)
{
    uint64_t h = hdx_fnv1a(s, strlen(s), HDX_FNV1A_OFFSET_BASIS);
    return h ? h : 1;
}

/* The slot of path (claimed when new), or -1: table full or path too long. */
static int count_slot(const char *path, enum hdx_how how)
{
    size_t len = strlen(path);
    if (len >= HDX_LOCK_PATH_MAX_COUNT)
        return -1;
    uint64_t h = hash64(path) ^ (uint64_t)how;
    h = h ? h : 1;
    for (int i = 0, k = (int)(h % COUNT_SLOTS); i < COUNT_SLOTS; i++, k = (k + 1) % COUNT_SLOTS) {
        struct count_slot *c = &counts[k];
        unsigned long long cur = atomic_load(&c->key);
        if (cur == h)
            return strcmp(c->path, path) == 0 ? k : -1; /* a hash collision: not counted */
        if (cur == 0) {
            /* Claim: the path is copied first, then the key published; a
             * racing thread that loses re-reads the key. */
            unsigned long long zero = 0;
            if (atomic_load(&c->calls) == 0 && atomic_compare_exchange_strong(&c->key, &zero, ~0ull)) {
                memcpy(c->path, path, len + 1);
                c->how = how;
                atomic_store(&c->key, h);
                return k;
            }
            if (atomic_load(&c->key) == h)
                return strcmp(c->path, path) == 0 ? k : -1;
        }
    }
    return -1;
}

/* Write slot k's pending count (if any) in b; must be inside the shim. */
static void count_flush(struct hdx_buf *b, int k, int64_t now)
{
    struct count_slot *c = &counts[k];
    long long n = atomic_exchange(&c->pending, 0);
    if (n <= 0)
        return;
    long long since = atomic_exchange(&c->since, 0);
    atomic_store(&c->last, now);
    struct hdx_w *w = &b->w;
    hdx_w_event(w, HDX_EV_LOCK_COUNT);
    hdx_w_kpath(w, "path", c->path);
    hdx_w_kstr(w, "op", op_names[c->how]);
    hdx_w_kint(w, "count", n);
    hdx_w_kint(w, "since", since ? since : now);
    hdx_w_emit(w);
}

void hdx_lock_counts_flush(struct hdx_buf *b)
{
    int64_t now = hdx_now_ns();
    for (int k = 0; k < COUNT_SLOTS; k++) {
        unsigned long long key = atomic_load(&counts[k].key);
        if (key && key != ~0ull)
            count_flush(b, k, now);
    }
}

void hdx_lock_counts_reset(void)
{
    memset(counts, 0, sizeof counts); /* a fork child: only this thread lives */
}

/*
 * Before a blocking call on fd: -1 to record it in full; else the count slot,
 * and the caller tries the lock without waiting first.
 */
static int over_bound(int fd, enum hdx_how how)
{
    struct hdx_buf *b = hdx_enter();
    if (!b)
        return -1;
    int k = -1;
    if (hdx_fd_path(fd, b->path, sizeof b->path) == 0 && (k = count_slot(b->path, how)) >= 0 &&
        atomic_fetch_add(&counts[k].calls, 1) < HDX_TRACE_LOCK_FULL)
        k = -1;
    hdx_leave();
    return k;
}

/* A call taken at once past the bound: count it, write the count when due. */
static void counted(int k)
{
    struct count_slot *c = &counts[k];
    int64_t now = hdx_now_ns();
    long long zero = 0;
    atomic_compare_exchange_strong(&c->since, &zero, now);
    atomic_fetch_add(&c->pending, 1);
    struct hdx_buf *b;
    if (now - atomic_load(&c->last) >= 1000000000ll && (b = hdx_enter())) {
        count_flush(b, k, now);
        hdx_leave();
    }
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
    int k = over_bound(fd, HDX_HOW_FLOCK);
    if (k >= 0) {
        if (fn(fd, op | LOCK_NB) == 0) {
            counted(k);
            errno = e0;
            return 0;
        }
    }
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
    int k = over_bound(fd, how);
    if (k >= 0) {
        if (fn(fd, how == HDX_HOW_OFD ? F_OFD_SETLK : F_SETLK, arg) == 0) {
            counted(k);
            errno = e0;
            return 0;
        }
    }
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
    int k = over_bound(fd, HDX_HOW_LOCKF);
    if (k >= 0) {
        if (fn(fd, F_TLOCK, len) == 0) {
            counted(k);
            errno = e0;
            return 0;
        }
    }
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
