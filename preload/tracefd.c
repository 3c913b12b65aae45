/*
 * The trace file's descriptor: which number it gets, and when the shim may
 * take one at all.
 *
 * open() hands out the lowest free number and dup2() may target any number
 * below the soft RLIMIT_NOFILE, so a descriptor the shim opens, even for an
 * instant, can be the one another thread of the program is about to be given
 * or to dup2() onto (tests/shim/fd_race.c). The shim therefore opens its file
 * only while the process has one thread (the constructor at load, the fork
 * child, a reopen that finds one thread) with every signal blocked (no
 * handler runs, and none can start a thread), and moves it at once to a
 * number the program is unlikely ever to use (hdx_fd_place), closing the low
 * one before anything else can run. Raw system calls only.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's struct rlimit64 (prlimit64). */
struct hdx_rlim {
    uint64_t cur, max;
};

static int nofile_get(struct hdx_rlim *r)
{
    return syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, r) == 0 ? 0 : -1;
}

static int nofile_set(const struct hdx_rlim *r)
{
    return syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, r, NULL) == 0 ? 0 : -1;
}

static int dup_from(int fd, int base)
{
    return (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, base);
}

static int dup_onto(int fd, int target)
{
    return (int)syscall(SYS_dup3, fd, target, O_CLOEXEC) == target ? target : -1;
}

int hdx_threads(void)
{
    /* procfs counts a process's threads in the link count of its task
     * directory (2 + threads): a stat, no descriptor needed. */
    struct stat st;
    if (syscall(SYS_newfstatat, AT_FDCWD, "/proc/self/task", &st, 0) != 0 || st.st_nlink < 3)
        return -1;
    return (int)(st.st_nlink - 2);
}

uint64_t hdx_sig_block(void)
{
    uint64_t all = ~(uint64_t)0, old = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof all);
    return old;
}

void hdx_sig_restore(uint64_t old)
{
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
}

int hdx_fd_place(int low, int reuse)
{
    int e = errno, fd = -1;
    struct hdx_rlim lim;
    if (nofile_get(&lim) != 0)
        goto done;
    uint64_t soft = lim.cur;
    if (soft <= HDX_FD_HIGH && lim.max > soft) {
        /* Past the limit: open() and dup2() of the program can never hand
         * out or target such a number while its limit stays where it is.
         * The limit is widened only while the descriptor is made (one
         * thread, signals blocked: nothing else can see it). */
        struct hdx_rlim wide = {soft + HDX_FD_ROOM < lim.max ? soft + HDX_FD_ROOM : lim.max,
                                lim.max};
        if (nofile_set(&wide) == 0) {
            if (reuse >= 0 && (uint64_t)reuse >= soft && (uint64_t)reuse < wide.cur)
                fd = dup_onto(low, reuse);
            if (fd < 0)
                fd = dup_from(low, (int)soft);
            if (nofile_set(&lim) != 0)
                nofile_set(&lim); /* lowering the soft limit cannot fail; one retry */
        }
    }
    if (fd < 0) {
        /* Below the limit: the top of min(soft, HDX_FD_HIGH), or the first
         * free number of the HDX_FD_TRIES below it. */
        int top = soft < HDX_FD_HIGH ? (int)soft : HDX_FD_HIGH;
        int lo = top - HDX_FD_TRIES > 3 ? top - HDX_FD_TRIES : 3;
        if (reuse >= lo && (uint64_t)reuse < soft)
            fd = dup_onto(low, reuse);
        for (int base = top - 1; fd < 0 && base >= lo; base--)
            fd = dup_from(low, base);
        if (fd < 0 && low >= lo) {
            fd = low; /* the lowest free number is itself at the top (opened O_CLOEXEC) */
            low = -1;
        }
    }
done:
    if (low >= 0)
        syscall(SYS_close, low);
    if (reuse >= 0 && reuse != fd)
        syscall(SYS_close, reuse);
    errno = e;
    return fd;
}
