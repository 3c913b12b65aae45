#include "gather/syswatch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gather/proc.h"
#include "native/ptrace_registry.h"
#include "model/util.h"

#define MAX_PATHS 256
#define SETTLE_MS 1000 /* how long the final stop may take before giving up */

/* Which argument holds the path (and which the dirfd, -1 none), or for lock
 * calls the fd (path_arg -1), x86-64. */
struct path_call {
    long nr;
    int dirfd_arg;
    int path_arg;
    enum hdx_syswatch_use use;
};

static const struct path_call path_calls[] = {
    {SYS_stat, -1, 0, HDX_WATCH_STAT},       {SYS_lstat, -1, 0, HDX_WATCH_STAT},
    {SYS_access, -1, 0, HDX_WATCH_STAT},     {SYS_newfstatat, 0, 1, HDX_WATCH_STAT},
    {SYS_statx, 0, 1, HDX_WATCH_STAT},       {SYS_faccessat, 0, 1, HDX_WATCH_STAT},
    {SYS_open, -1, 0, HDX_WATCH_OPEN},       {SYS_creat, -1, 0, HDX_WATCH_OPEN},
    {SYS_openat, 0, 1, HDX_WATCH_OPEN},      {SYS_flock, 0, -1, HDX_WATCH_LOCK_TRY},
    {SYS_fcntl, 0, -1, HDX_WATCH_LOCK_TRY},
#ifdef SYS_faccessat2
    {SYS_faccessat2, 0, 1, HDX_WATCH_STAT},
#endif
#ifdef SYS_openat2
    {SYS_openat2, 0, 1, HDX_WATCH_OPEN},
#endif
};

/* fcntl commands that take a lock (fcntl(2)). */
static int is_lock_cmd(uint64_t cmd)
{
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW;
}

/* The path behind fd of pid, or NULL (sockets, pipes and the like). */
static char *fd_path(int pid, int fd)
{
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/%d/fd/%d", pid, fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return NULL;
    path[n] = 0;
    return path[0] == '/' ? strdup(path) : NULL;
}

static const struct path_call *find_call(long nr)
{
    for (size_t i = 0; i < sizeof path_calls / sizeof path_calls[0]; i++)
        if (path_calls[i].nr == nr)
            return &path_calls[i];
    return NULL;
}

/* Read a NUL-terminated string from the target, page by page so a string
 * near the end of a mapping still reads; /proc/PID/mem as the fallback. */
static int read_string(int pid, uint64_t addr, char *buf, size_t size)
{
    size_t got = 0;
    while (got < size - 1) {
        uint64_t a = addr + got;
        size_t chunk = 4096 - (a & 4095);
        if (chunk > size - 1 - got)
            chunk = size - 1 - got;
        struct iovec l = {buf + got, chunk}, r = {(void *)(uintptr_t)a, chunk};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            char path[64];
            snprintf(path, sizeof path, "/proc/%d/mem", pid);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                return -1;
            n = pread(fd, buf + got, chunk, (off_t)a);
            close(fd);
            if (n <= 0)
                return -1;
        }
        if (memchr(buf + got, 0, (size_t)n))
            return 0;
        got += (size_t)n;
    }
    buf[size - 1] = 0;
    return -1; /* longer than PATH_MAX */
}

/* Join base and rel, dropping "." components and doubled slashes. */
static char *join_path(const char *base, const char *rel)
{
    char *s = hdx_asprintf("%s/%s", base, rel);
    if (!s)
        return NULL;
    char *w = s;
    for (const char *r = s; *r;) {
        if (r[0] == '/' && (r[1] == '/' || (r[1] == '.' && (r[2] == '/' || !r[2])))) {
            r += r[1] == '/' ? 1 : 2;
            continue;
        }
        *w++ = *r++;
    }
    if (w == s)
        *w++ = '/';
    *w = 0;
    return s;
}

static char *resolve(int pid, int tid, const struct path_call *c, const uint64_t *args,
                     const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char link[96], base[PATH_MAX];
    int dirfd = c->dirfd_arg >= 0 ? (int)(int32_t)args[c->dirfd_arg] : AT_FDCWD;
    if (dirfd == AT_FDCWD)
        snprintf(link, sizeof link, "/proc/%d/task/%d/cwd", pid, tid);
    else
        snprintf(link, sizeof link, "/proc/%d/fd/%d", pid, dirfd);
    ssize_t n = readlink(link, base, sizeof base - 1);
    if (n <= 0)
        return NULL;
    base[n] = 0;
    if (base[0] != '/')
        return NULL; /* socket:[...] and the like */
    return join_path(base, path);
}

static int add_hit(hdx_syswatch_hit **hits, size_t *n, char *p, enum hdx_syswatch_use use)
{
    for (size_t i = 0; i < *n; i++)
        if ((*hits)[i].use == use && strcmp((*hits)[i].path, p) == 0) {
            free(p);
            return 0;
        }
    if (*n >= MAX_PATHS) {
        free(p);
        return 0;
    }
    hdx_syswatch_hit *e = hdx_append((void **)hits, n, sizeof *e);
    if (!e) {
        free(p);
        return -ENOMEM;
    }
    e->path = p;
    e->use = use;
    return 0;
}

void hdx_syswatch_free(hdx_syswatch_hit *hits, size_t n)
{
    for (size_t i = 0; hits && i < n; i++)
        free(hits[i].path);
    free(hits);
}

/* At a syscall stop: 1 at an entry (the call's number and args), 2 at an exit (*rval the
 * call's return value), -1 when the registers cannot be read. */
static int syscall_stop(int tid, long *nr, uint64_t args[6], long *rval)
{
    struct __ptrace_syscall_info info;
    long r = ptrace(PTRACE_GET_SYSCALL_INFO, tid, (void *)sizeof info, &info);
    if (r > 0 && info.op == PTRACE_SYSCALL_INFO_ENTRY) {
        *nr = (long)info.entry.nr;
        memcpy(args, info.entry.args, 6 * sizeof args[0]);
        return 1;
    }
    if (r > 0) {
        *rval = (long)info.exit.rval;
        return 2;
    }
    /* Older kernels: at entry x86-64 has rax = -ENOSYS. */
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, 0, &regs) < 0)
        return -1;
    if ((long)regs.rax != -ENOSYS) {
        *rval = (long)regs.rax;
        return 2;
    }
    *nr = (long)regs.orig_rax;
    args[0] = regs.rdi;
    args[1] = regs.rsi;
    args[2] = regs.rdx;
    args[3] = regs.r10;
    args[4] = regs.r8;
    args[5] = regs.r9;
    return 1;
}

int hdx_syswatch(int pid, int tid, int ms, hdx_syswatch_hit **hits, size_t *n)
{
    *hits = NULL;
    *n = 0;
    int rc = 0, status;
    int64_t deadline = hdx_mono_ns() + (int64_t)ms * 1000000;

    hdx_ptrace_sweep();
    /* A process stopped by job control (SIGSTOP, Ctrl-Z) polls nothing, and resuming one of
     * its threads from a signal-delivery stop would let it run on out of its group stop. */
    if (hdx_proc_state(pid) == 'T')
        return 0;
    rc = hdx_ptrace_seize(pid, tid, PTRACE_O_TRACESYSGOOD, NULL);
    if (rc < 0)
        return rc;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0) {
        rc = -errno;
        goto release;
    }
    int w = hdx_ptrace_wait_stop(tid, ms, &status);
    if (w < 0)
        return w; /* exited: forgotten */
    if (w == 0) {
        rc = -ETIMEDOUT;
        goto release;
    }

    /* One poll round: a sleep that ends by its timeout (returns 0, not EINTR), then the next sleep.
     * The call the watch's interrupt broke resumes as restart_syscall (or the sleep again). */
    long nr = -1;
    int slept = 0;
    for (;;) {
        if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP) {
            int sig = WSTOPSIG(status);
            if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
                break; /* group-stop: the process is being stopped; leave it be */
        } else if (WIFSTOPPED(status) && WSTOPSIG(status) == (SIGTRAP | 0x80)) {
            uint64_t args[6];
            long rval = -1;
            int stop = syscall_stop(tid, &nr, args, &rval);
            int sleep_call = hdx_syswatch_is_sleep(nr) || nr == SYS_restart_syscall;
            if (stop == 2 && sleep_call && rval == 0)
                slept = 1;
            if (stop == 1 && sleep_call && slept)
                break; /* woken by its timeout, made its calls, and asleep again */
            const struct path_call *c = stop == 1 ? find_call(nr) : NULL;
            if (c) {
                char path[PATH_MAX], *abs = NULL;
                if (c->use == HDX_WATCH_LOCK_TRY) {
                    if (nr != SYS_fcntl || is_lock_cmd(args[1]))
                        abs = fd_path(pid, (int)args[0]);
                } else if (read_string(pid, args[c->path_arg], path, sizeof path) == 0 && path[0]) {
                    abs = resolve(pid, tid, c, args, path);
                }
                if (abs && (rc = add_hit(hits, n, abs, c->use)) < 0)
                    break;
            }
        }
        if (hdx_mono_ns() >= deadline)
            break;
        if ((rc = hdx_ptrace_resume(tid, PTRACE_SYSCALL)) < 0)
            break;
        int64_t left_ms = (deadline - hdx_mono_ns()) / 1000000;
        w = hdx_ptrace_wait_stop(tid, left_ms > 0 ? (int)left_ms : 0, &status);
        if (w < 0) {
            rc = 0; /* it exited: what we saw stands */
            return rc;
        }
        if (w == 0)
            break; /* deadline while it runs (or sleeps): interrupt below */
    }
release:;
    /* Stopped or running, with a signal to hand back or not: release
     * interrupts if needed, waits for the stop and detaches. */
    int r = hdx_ptrace_release(tid, SETTLE_MS);
    if (rc == 0 && r == -ETIMEDOUT)
        rc = 0; /* the paths stand; the orphan is released later */
    if (rc < 0) {
        hdx_syswatch_free(*hits, *n);
        *hits = NULL;
        *n = 0;
    }
    return rc;
}

int hdx_syswatch_is_sleep(long nr)
{
    return nr == SYS_clock_nanosleep || nr == SYS_nanosleep || nr == SYS_select || nr == SYS_pselect6;
}

/* 1 when pid's clocks are hangdx's: the same time namespace (or no time namespaces). */
static int same_time_namespace(int pid)
{
    char path[64];
    struct stat mine, theirs;
    snprintf(path, sizeof path, "/proc/%d/ns/time", pid);
    if (stat("/proc/self/ns/time", &mine) != 0)
        return errno == ENOENT; /* a kernel without time namespaces (before 5.6) */
    return stat(path, &theirs) == 0 && mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev;
}

int64_t hdx_sleep_left_ns(int pid, int tid)
{
    long nr, nr2;
    uint64_t args[6], args2[6];
    if (hdx_proc_read_syscall(pid, tid, &nr, args) < 0)
        return -1;
    clockid_t clock = (clockid_t)args[0];
    if (nr != SYS_clock_nanosleep || !(args[1] & TIMER_ABSTIME) ||
        (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC && clock != CLOCK_BOOTTIME))
        return -1;
    if (clock != CLOCK_REALTIME && !same_time_namespace(pid))
        return -1;
    struct timespec deadline, now;
    struct iovec l = {&deadline, sizeof deadline}, r = {(void *)(uintptr_t)args[2], sizeof deadline};
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof deadline || deadline.tv_sec < 0 ||
        deadline.tv_nsec < 0 || deadline.tv_nsec >= 1000000000L || clock_gettime(clock, &now) != 0)
        return -1;
    if (hdx_proc_read_syscall(pid, tid, &nr2, args2) < 0 || nr2 != nr || memcmp(args, args2, sizeof args) != 0)
        return -1;
    if (deadline.tv_sec - now.tv_sec > INT64_MAX / 1000000000 - 1)
        return INT64_MAX;
    int64_t left = ((int64_t)deadline.tv_sec - now.tv_sec) * 1000000000 + (deadline.tv_nsec - now.tv_nsec);
    return left > 0 ? left : 0;
}
