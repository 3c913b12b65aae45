/*
 * The shim's start: the table of real functions, the process state (pid,
 * trace file), the header line, and the fork child's new file.
 */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

struct hdx_real hdx_real;
atomic_int hdx_on;

/* Thread-local: 1 while this thread is inside the shim (or inside dlsym for it), and
 * 1 + the index of the pool buffer it holds (0: none). Initial-exec, 8 bytes of static
 * TLS in all: a preloaded library's static TLS is carved from every thread's stack. */
static __thread int in_shim __attribute__((tls_model("initial-exec")));
static __thread int held __attribute__((tls_model("initial-exec")));

/* The pid the state belongs to; a vfork child sees its parent's value. */
static atomic_int cached_pid;
/* The trace file: its identity (recorded when it was created), its path and
 * the shim's one descriptor of it. The descriptor is opened only while the
 * process has one thread, with signals blocked, and moved at once to a high
 * number (tracefd.c: past the soft RLIMIT_NOFILE where the hard limit allows,
 * else near the top, never above HDX_FD_HIGH): a low number, even for an
 * instant, may be the one another thread is about to get from open() or to
 * dup2() onto; bash saves and restores close-on-exec fds as its own, scripts
 * use 9, 100, 200. Every line checks that it is still the file (fstat);
 * close-on-exec, so a new image opens its own. */
static dev_t trace_dev;
static ino_t trace_ino;
static atomic_int trace_fd = -1;
static char trace_dir_path[PATH_MAX];
static char trace_name[NAME_MAX + 1];
static char trace_host[sizeof ((struct utsname *)0)->nodename]; /* uname's nodename */
static char trace_path[PATH_MAX + NAME_MAX + 2];
/* 1 after a write failed or was cut short (disk full): nothing more is written,
 * so a torn line stays the file's last one. */
static atomic_int trace_dead;

void *hdx_resolve(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (p || in_shim)
        return p; /* a call from inside dlsym itself: the caller falls back */
    in_shim = 1;
    p = dlsym(RTLD_NEXT, name);
    in_shim = 0;
    if (p)
        __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return p;
}

#define RESOLVE(name) hdx_resolve((void **)&hdx_real.name, #name)

static void resolve_all(void)
{
    RESOLVE(open); RESOLVE(open64); RESOLVE(openat); RESOLVE(openat64);
    RESOLVE(creat); RESOLVE(creat64); RESOLVE(__open_2); RESOLVE(__open64_2);
    RESOLVE(__openat_2); RESOLVE(__openat64_2);
    RESOLVE(stat); RESOLVE(stat64); RESOLVE(lstat); RESOLVE(lstat64);
    RESOLVE(fstatat); RESOLVE(fstatat64); RESOLVE(statx);
    RESOLVE(__xstat); RESOLVE(__xstat64); RESOLVE(__lxstat); RESOLVE(__lxstat64);
    RESOLVE(__fxstatat); RESOLVE(__fxstatat64);
    RESOLVE(flock); RESOLVE(fcntl); RESOLVE(fcntl64); RESOLVE(lockf); RESOLVE(lockf64);
    RESOLVE(unlink); RESOLVE(unlinkat); RESOLVE(rename); RESOLVE(renameat);
    RESOLVE(renameat2);
    RESOLVE(fork); RESOLVE(posix_spawn); RESOLVE(posix_spawnp);
    RESOLVE(exit); RESOLVE(_exit); RESOLVE(_Exit);
}

static pid_t raw_getpid(void)
{
    return (pid_t)syscall(SYS_getpid);
}

int hdx_busy(void)
{
    return in_shim;
}

struct hdx_buf *hdx_enter(void)
{
    /* Checked before anything is written: a vfork child shares our memory. */
    if (atomic_load_explicit(&cached_pid, memory_order_relaxed) != raw_getpid())
        return NULL;
    if (in_shim)
        return NULL;
    in_shim = 1;
    int i = hdx_pool_get();
    if (i < 0) {
        atomic_fetch_add_explicit(&hdx_dropped, 1, memory_order_relaxed);
        in_shim = 0;
        return NULL;
    }
    held = i + 1; /* before the buffer is written: a fork child keeps it (hdx_after_fork_child) */
    return hdx_pool_buf(i);
}

void hdx_leave(void)
{
    int i = held - 1;
    held = 0;
    hdx_pool_put(i);
    in_shim = 0;
}

/* ---- small helpers used by the writer ---- */

int64_t hdx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

pid_t hdx_gettid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

size_t hdx_itoa(int64_t v, char *out)
{
    char tmp[24];
    size_t n = 0, k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = tmp[--n];
    out[k] = 0;
    return k;
}

/* ---- the trace file ---- */

/* Output bytes allowed to each of the header's cwd and exe. */
#define HDX_HEADER_PATH_MAX 1024

/* 1 when fd is the shim's trace file (its stat into *st). */
static int is_trace_fd(int fd, struct stat *st)
{
    return fd >= 0 && syscall(SYS_fstat, fd, st) == 0 && S_ISREG(st->st_mode) &&
           st->st_dev == trace_dev && st->st_ino == trace_ino;
}

/*
 * Create (0600) trace_name in trace_dir_path, remember its identity and its
 * full path, and keep it open as trace_fd (hdx_fd_place; reuse: the shim's
 * previous trace fd, checked, or -1). Refuses, with -1 and nothing created, a
 * trace directory that another user owns (that user could read, forge or
 * redirect our traces: trace.h), and a file that is not a regular file of
 * ours with one link (docs/design.md "Writing outputs safely"). Raw system
 * calls only; one thread, signals blocked: this runs in the
 * constructor and the fork child.
 */
static int create_trace_file(int reuse)
{
    uid_t me = (uid_t)syscall(SYS_geteuid);
    struct stat st;
    atomic_store(&trace_fd, -1);
    int dfd = (int)syscall(SYS_openat, AT_FDCWD, trace_dir_path,
                        O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        goto fail;
    if (syscall(SYS_fstat, dfd, &st) != 0 || st.st_uid != me) {
        syscall(SYS_close, dfd);
        goto fail;
    }
    /* O_NONBLOCK: a FIFO at that name would block the open until a reader came
     * (then refused below as no regular file); it changes nothing for a file. */
    int fd = (int)syscall(SYS_openat, dfd, trace_name,
                          O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                          0600);
    syscall(SYS_close, dfd);
    if (fd < 0)
        goto fail;
    /* One link only: a hard link planted at the trace's name to a file of ours (where
     * fs.protected_hardlinks is off) would have the trace appended to that file. */
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != me || st.st_nlink != 1) {
        syscall(SYS_close, fd);
        goto fail;
    }
    /* The program's umask may have taken bits off: the file is exactly 0600. */
    if ((st.st_mode & 07777) != 0600)
        syscall(SYS_fchmod, fd, 0600);
    size_t dl = strlen(trace_dir_path), nl = strlen(trace_name);
    if (dl + 1 + nl >= sizeof trace_path) {
        syscall(SYS_close, fd);
        goto fail;
    }
    memcpy(trace_path, trace_dir_path, dl);
    trace_path[dl] = '/';
    memcpy(trace_path + dl + 1, trace_name, nl + 1);
    trace_dev = st.st_dev;
    trace_ino = st.st_ino;
    fd = hdx_fd_place(fd, reuse);
    if (fd < 0)
        return -1; /* no high number free: quiet */
    atomic_store(&trace_fd, fd);
    return 0;
fail:
    if (reuse >= 0)
        syscall(SYS_close, reuse); /* the shim's own: nothing to keep it for */
    return -1;
}

/*
 * The trace fd was closed or replaced by the program: open the file again,
 * only while this process has one thread (signals blocked, so that no
 * handler runs nor starts one), and only the very file created. The old
 * number is the program's now: left alone. Returns the new fd, or -1.
 */
static int reopen_trace_file(void)
{
    if (hdx_threads() != 1)
        return -1;
    uint64_t mask = hdx_sig_block();
    int fd = -1;
    /* Checked again with signals blocked: now no thread can be started. */
    if (hdx_threads() == 1) {
        /* O_NONBLOCK as at creation: were the name replaced by a FIFO, the open
         * must not block (it is then refused as no regular file). */
        fd = (int)syscall(SYS_openat, AT_FDCWD, trace_path,
                          O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat st;
        if (fd >= 0 && !is_trace_fd(fd, &st)) {
            /* Not the file we created (replaced behind our back): never write there. */
            syscall(SYS_close, fd);
            fd = -1;
        }
        if (fd >= 0)
            fd = hdx_fd_place(fd, -1);
        if (fd >= 0)
            atomic_store(&trace_fd, fd);
    }
    hdx_sig_restore(mask);
    return fd;
}

/* Go quiet for good: the program runs on. The trace fd, if still the shim's,
 * stays open (closing it could race a program that takes its number). */
static void trace_stop(void)
{
    atomic_store(&trace_dead, 1);
    atomic_store(&hdx_on, 0);
}

void hdx_trace_write(const char *line, size_t len)
{
    if (!atomic_load_explicit(&hdx_on, memory_order_relaxed) ||
        atomic_load_explicit(&trace_dead, memory_order_relaxed))
        return;
    int e = errno;
    struct stat st;
    int fd = atomic_load_explicit(&trace_fd, memory_order_relaxed);
    /* The same inode is the file checked as ours at creation. Any other file
     * at that number (or none) is the program's business: not written to, not
     * closed. */
    if (!is_trace_fd(fd, &st) &&
        ((fd = reopen_trace_file()) < 0 || !is_trace_fd(fd, &st))) {
        trace_stop(); /* closed or replaced while threads run, or the file gone: quiet */
        errno = e;
        return;
    }
    if (st.st_nlink == 0) {
        trace_stop(); /* the file was removed: no one will read it, as when it was opened per line */
        errno = e;
        return;
    }
    char stop[160];
    if (st.st_size + (off_t)len > HDX_TRACE_FILE_MAX - (off_t)sizeof stop) {
        /* The size cap: one last line saying so, then nothing. Threads racing
         * here may each write theirs; the file stays within sizeof stop each. */
        if (atomic_exchange(&trace_dead, 1)) {
            errno = e;
            return;
        }
        atomic_store(&hdx_on, 0);
        size_t n = 0;
        char num[24];
#define PUT(s, k) (memcpy(stop + n, (s), (k)), n += (k))
        PUT("{\"type\":\"" HDX_EV_STOPPED "\",\"t\":", sizeof "{\"type\":\"" HDX_EV_STOPPED "\",\"t\":" - 1);
        size_t k = hdx_itoa(hdx_now_ns(), num);
        PUT(num, k);
        PUT(",\"tid\":", 7);
        k = hdx_itoa(hdx_gettid(), num);
        PUT(num, k);
        PUT(",\"reason\":\"size\",\"bytes\":", 25);
        k = hdx_itoa((int64_t)st.st_size, num);
        PUT(num, k);
        PUT("}\n", 2);
#undef PUT
        line = stop;
        len = n;
    }
    ssize_t r;
    int tries = 0;
    do
        r = syscall(SYS_write, fd, line, len);
    while (r < 0 && errno == EINTR && ++tries < 3);
    if (r != (ssize_t)len)
        trace_stop(); /* a full disk (or a lost file) */
    errno = e;
}

/* ---- the header ---- */

static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n < cap) {
        ssize_t r = syscall(SYS_read, fd, buf + n, cap - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    syscall(SYS_close, fd);
    return (ssize_t)n;
}

/* The inode of a /proc/self/ns/ link ("pid:[4026531836]"), 0 when unreadable. */
static int64_t ns_inode(const char *path)
{
    char link[64];
    ssize_t l = syscall(SYS_readlinkat, AT_FDCWD, path, link, sizeof link - 1);
    const char *d = l > 0 ? memchr(link, '[', (size_t)l) : NULL;
    int64_t ino = 0;
    for (d = d ? d + 1 : NULL; d && d < link + l && *d >= '0' && *d <= '9'; d++)
        ino = ino * 10 + (*d - '0');
    return ino;
}

/* The header line, formatted in b. */
static void write_header(struct hdx_buf *b)
{
    struct hdx_w *w = &b->w;
    char *tmp = b->path; /* scratch: each read below is used before the next */

    hdx_w_begin(w);
    hdx_w_raw(w, "{\"schema\":\"" HDX_TRACE_SCHEMA "\",\"type\":\"" HDX_EV_HEADER "\"");
    hdx_w_kint(w, "t", hdx_now_ns());
    hdx_w_kint(w, "pid", raw_getpid());
    hdx_w_kint(w, "ppid", (pid_t)syscall(SYS_getppid));
    hdx_w_kstr(w, "host", trace_host);

    ssize_t n = read_small("/proc/sys/kernel/random/boot_id", tmp, 64);
    while (n > 0 && (tmp[n - 1] == '\n' || tmp[n - 1] == ' '))
        n--;
    if (hdx_w_key(w, "boot_id", 1) != 0)
        ;
    else if (n > 0)
        hdx_w_strn(w, tmp, (size_t)n);
    else
        hdx_w_raw(w, "null");

    /* The namespaces it runs in (containers): the inodes of /proc/self/ns/pid and
     * /proc/self/ns/mnt ("pid:[4026531836]"), and its trace directory as it sees it, so
     * that a reader on the host can map its pids and paths (include/hangdx/trace.h). */
    static const char *const ns[][2] = {{"pid_ns", "/proc/self/ns/pid"}, {"mnt_ns", "/proc/self/ns/mnt"}};
    for (size_t i = 0; i < 2; i++) {
        int64_t ino = ns_inode(ns[i][1]);
        if (hdx_w_key(w, ns[i][0], 1) != 0)
            continue;
        if (ino > 0)
            hdx_w_int(w, ino);
        else
            hdx_w_raw(w, "null");
    }
    if (hdx_w_key(w, "trace_dir", 1) == 0)
        hdx_w_str(w, trace_dir_path);

    /* start_time: field 22 of /proc/self/stat, counted after the ")" of comm. */
    int64_t start = -1;
    n = read_small("/proc/self/stat", tmp, sizeof b->path - 1);
    if (n > 0) {
        tmp[n] = 0;
        char *p = strrchr(tmp, ')');
        for (int field = 2; p && field < 22; field++) {
            p = strchr(p + 1, ' ');
        }
        if (p)
            start = strtoll(p + 1, NULL, 10);
    }
    if (hdx_w_key(w, "start_time", 1) != 0)
        ;
    else if (start >= 0)
        hdx_w_int(w, start);
    else
        hdx_w_raw(w, "null");

    /* cwd and exe get at most HDX_HEADER_PATH_MAX bytes each, so env fits: one longer is
     * null, never cut. */
    size_t soft = w->soft;
    w->soft = w->len + HDX_HEADER_PATH_MAX;
    hdx_w_kpath(w, "cwd", syscall(SYS_getcwd, tmp, sizeof b->path) > 0 ? tmp : NULL);
    w->soft = w->len + HDX_HEADER_PATH_MAX;
    n = readlink("/proc/self/exe", tmp, sizeof b->path - 1);
    if (n > 0 && n < (ssize_t)sizeof b->path - 1)
        tmp[n] = 0;
    hdx_w_kpath(w, "exe", n > 0 && n < (ssize_t)sizeof b->path - 1 ? tmp : NULL);
    w->soft = soft;

    /* env before argv: only argv may be truncated, never the rank. */
    static const char *const names[] = {HDX_TRACE_ENV_NAMES};
    if (hdx_w_key(w, "env", 1) == 0) {
        hdx_w_raw(w, "{");
        int first = 1;
        for (size_t i = 0; names[i]; i++) {
            const char *v = getenv(names[i]);
            if (!v || hdx_w_key(w, names[i], !first) != 0)
                continue;
            first = 0;
            hdx_w_str(w, v);
        }
        hdx_w_close(w, "}");
    }

    /* argv from /proc/self/cmdline: NUL-separated. */
    n = read_small("/proc/self/cmdline", tmp, sizeof b->path);
    hdx_w_kargz(w, "argv", tmp, n > 0 ? (size_t)n : 0, n == (ssize_t)sizeof b->path);
    hdx_w_emit(w);
}

/*
 * Open this process's own "<host>-<pid>.jsonl" and write its header. dir:
 * HANGDX_TRACE_DIR at the start of the image; a relative one is taken from
 * the cwd then, once, so that a reopen and a fork child use the same
 * directory after a chdir. NULL: the directory already in trace_dir_path
 * (a fork child). reuse: the shim's previous trace fd (checked) or -1; it is
 * taken over or closed. One thread, signals blocked.
 */
static void start_trace(const char *dir, int reuse)
{
    atomic_store(&hdx_on, 0);
    if (dir) {
        size_t dl = strlen(dir), cl = 0;
        trace_dir_path[0] = 0;
        if (!dl)
            goto fail;
        if (dir[0] != '/') {
            if (syscall(SYS_getcwd, trace_dir_path, sizeof trace_dir_path) <= 0)
                goto fail;
            cl = strlen(trace_dir_path);
            trace_dir_path[cl++] = '/';
        }
        if (cl + dl >= sizeof trace_dir_path) {
            trace_dir_path[0] = 0;
            goto fail;
        }
        memcpy(trace_dir_path + cl, dir, dl + 1);
    }
    if (!trace_dir_path[0])
        goto fail;
    /* The header's buffer; meanwhile its path room holds the utsname (390 bytes, off the stack). */
    int i = hdx_pool_get();
    if (i < 0)
        goto fail; /* the constructor or a fork child, where all but one are free: never */
    struct hdx_buf *b = hdx_pool_buf(i);
    struct utsname *un = (struct utsname *)b->path;
    if (uname(un) != 0)
        goto fail_put;
    /* In a pid namespace other than the host's (PROC_PID_INIT_INO, a kernel constant), the
     * pid repeats across containers (every rank pid 1): the name carries the namespace too. */
    char pid[48];
    hdx_itoa(raw_getpid(), pid);
    int64_t pidns = ns_inode("/proc/self/ns/pid");
    if (pidns > 0 && pidns != 0xEFFFFFFCLL) {
        size_t at = strlen(pid);
        memcpy(pid + at, "-ns", 3);
        hdx_itoa(pidns, pid + at + 3);
    }
    size_t hl = strlen(un->nodename), pl = strlen(pid);
    if (hl + pl + sizeof HDX_TRACE_SUFFIX + 1 > sizeof trace_name || hl >= sizeof trace_host)
        goto fail_put;
    memcpy(trace_host, un->nodename, hl + 1);
    char *p = trace_name;
    memcpy(p, un->nodename, hl), p += hl;
    *p++ = '-';
    memcpy(p, pid, pl), p += pl;
    memcpy(p, HDX_TRACE_SUFFIX, sizeof HDX_TRACE_SUFFIX);
    atomic_store(&trace_dead, 0);
    if (create_trace_file(reuse) == 0) {
        atomic_store(&hdx_on, 1);
        write_header(b);
    } /* else missing, read-only or another user's trace dir: quiet (reuse consumed) */
    hdx_pool_put(i);
    return;
fail_put:
    hdx_pool_put(i);
fail:
    atomic_store(&trace_fd, -1);
    if (reuse >= 0)
        syscall(SYS_close, reuse); /* the shim's own: nothing to keep it for */
}

void hdx_after_fork_child(void)
{
    /* Only the forking thread lives on. It is inside the shim when fork() came from a
     * signal handler that interrupted the shim: the buffer it holds stays its own. */
    int e = errno, was = in_shim;
    in_shim = 1;
    atomic_store(&cached_pid, raw_getpid());
    hdx_pool_reset(held - 1);
    hdx_wait_reset_all();
    hdx_lock_counts_reset();
    uint64_t mask = hdx_sig_block(); /* a handler inherited from the parent must not run now */
    /* The parent's trace fd came along: the child's own file takes its number
     * over when it is still the shim's (not closed or dup2'd over by the
     * program before the fork); else that number is left alone. */
    struct stat st;
    int old = atomic_load(&trace_fd);
    start_trace(NULL, is_trace_fd(old, &st) ? old : -1); /* the parent's directory */
    hdx_sig_restore(mask);
    in_shim = was;
    errno = e;
}

__attribute__((constructor)) static void hdx_init(void)
{
    int e = errno; /* C: errno is 0 when main() starts; the shim keeps it so */
    resolve_all(); /* hdx_resolve() guards itself */
    atomic_store(&cached_pid, raw_getpid());
    in_shim = 1;
    uint64_t mask = hdx_sig_block();
    /* At load the process has one thread; were it started in one that has
     * more (another library's constructor made threads), taking even a
     * transient descriptor could race them: quiet. */
    if (hdx_threads() <= 1)
        start_trace(getenv(HDX_TRACE_DIR_ENV), -1);
    hdx_sig_restore(mask);
    in_shim = 0;
    errno = e;
}
