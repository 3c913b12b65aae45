/*
 * Stress programs for the preload shim. Each mode does real work
 * with the calls the shim wraps and prints a deterministic result: what it
 * read back, checksums, counts, its children's exit statuses, in a fixed
 * order. stress_test.py runs each mode with and without the shim and compares
 * stdout, stderr and the exit status byte for byte.
 *
 *   shim_stress threads DIR T N      T threads: exclusive opens, flock, fcntl
 *                                    locks, a shared counter, forks
 *   shim_stress forkexec DIR N       N forks from a program whose threads
 *                                    spin in wrapped calls; most children exec
 *   shim_stress vfork DIR N          N vfork children that open and stat
 *                                    before they exec (odd) or _exit (even)
 *   shim_stress spawnchain DIR D W   a posix_spawn tree D deep, W wide, each
 *                                    child's output through a pipe, signal
 *                                    attributes and process groups (as ninja)
 *   shim_stress closefds DIR         close every fd, the trace fd included;
 *                                    reuse every number; lock, fork, spawn
 *   shim_stress signals DIR N        a 200 us SIGALRM whose handler opens,
 *                                    stats, flocks, unlinks, while 3 threads
 *                                    do the same N times
 *   shim_stress fill DIR N           N locks; "phase 1" on stdout; waits (30 s at
 *                                    most) for DIR/go; 20 more locks
 *   shim_stress child DIR I          one exec'd child of forkexec
 *   shim_stress errno                errno at main() (C: 0)
 *
 * Every failure is counted and printed ("errors N"), never hidden; the exit
 * status is 0 only when nothing was unexpected.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *self_exe; /* for exec: /proc/self/exe resolved at start */

/* FNV-1a, 32 bit: the checksum printed for data read back. */
static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}
#define FNV0 2166136261u

/* Read a whole (small) file; returns its length or -1. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == cap)
            break;
    }
    close(fd);
    return (ssize_t)n;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t r = write(fd, s, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        s += r, n -= (size_t)r;
    }
    return 0;
}

/* ---------------------------------------------------------------- threads */

struct tharg {
    int k, n;
    int errors;
    int statuses[64];
    int nchildren;
};

static int thread_err(struct tharg *a, const char *what, int i)
{
    fprintf(stderr, "thread %d iteration %d: %s: %s\n", a->k, i, what, strerror(errno));
    return ++a->errors;
}

/* Read-modify-write of the decimal counter in fd, under the caller's lock. */
static int bump(int fd)
{
    char buf[32] = {0};
    ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
    if (r < 0)
        return -1;
    long v = strtol(buf, NULL, 10) + 1;
    int n = snprintf(buf, sizeof buf, "%ld\n", v);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
        return -1;
    return 0;
}

static void *thread_body(void *p)
{
    struct tharg *a = p;
    char lock[64], data[64], baton[64];
    snprintf(lock, sizeof lock, "t%d.lock", a->k);
    snprintf(data, sizeof data, "t%d.data", a->k);
    snprintf(baton, sizeof baton, "t%d.baton", a->k);
    int shared = open("shared.counter", O_RDWR | O_CLOEXEC);
    int dfd = open(data, O_CREAT | O_TRUNC | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
    if (shared < 0 || dfd < 0)
        thread_err(a, "open", -1);
    for (int i = 0; i < a->n; i++) {
        struct stat st;
        /* a FileBaton of its own: create, a second create is EEXIST, stat polls, unlink */
        int fd = open(lock, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0)
            thread_err(a, "O_EXCL create", i);
        if (open(lock, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600) >= 0 || errno != EEXIST)
            thread_err(a, "second O_EXCL create not EEXIST", i);
        if (stat(lock, &st) != 0 || lstat(lock, &st) != 0)
            thread_err(a, "stat of the lock", i);
        /* the shared counter under a blocking flock, a non-blocking one tried first */
        if (flock(shared, LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK)
                thread_err(a, "flock LOCK_NB", i);
            if (flock(shared, LOCK_EX) != 0)
                thread_err(a, "flock LOCK_EX", i);
        }
        if (bump(shared) != 0)
            thread_err(a, "counter", i);
        if (flock(shared, LOCK_UN) != 0)
            thread_err(a, "flock LOCK_UN", i);
        /* a POSIX record lock on its own data file, then a record */
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(dfd, F_SETLKW, &fl) != 0)
            thread_err(a, "F_SETLKW", i);
        char rec[64];
        int len = snprintf(rec, sizeof rec, "thread %d record %d\n", a->k, i);
        if (write_all(dfd, rec, (size_t)len) != 0)
            thread_err(a, "write", i);
        fl.l_type = F_UNLCK;
        if (fcntl(dfd, F_SETLK, &fl) != 0)
            thread_err(a, "F_SETLK unlock", i);
        /* every 16th iteration: a child that takes a baton and a flock, and exits */
        if (i % 16 == 0 && a->nchildren < 64) {
            pid_t c = fork();
            if (c == 0) {
                int b = open(baton, O_CREAT | O_EXCL | O_WRONLY, 0600);
                int ok = b >= 0 && flock(b, LOCK_EX) == 0 && write(b, "x", 1) == 1 &&
                         unlink(baton) == 0;
                _exit(ok ? 10 + (a->k + i) % 7 : 1);
            }
            int ws = -1;
            if (c < 0 || waitpid(c, &ws, 0) != c)
                thread_err(a, "fork/waitpid", i);
            a->statuses[a->nchildren++] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        }
        if (close(fd) != 0 || unlink(lock) != 0)
            thread_err(a, "close/unlink of the lock", i);
        if (stat(lock, &st) == 0 || errno != ENOENT)
            thread_err(a, "lock still there", i);
    }
    close(dfd);
    close(shared);
    return NULL;
}

static int mode_threads(int t, int n)
{
    int fd = open("shared.counter", O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0 || write(fd, "0\n", 2) != 2)
        return perror("shared.counter"), 1;
    close(fd);
    struct tharg args[32];
    pthread_t th[32];
    if (t > 32)
        t = 32;
    for (int k = 0; k < t; k++) {
        args[k] = (struct tharg){.k = k, .n = n};
        if (pthread_create(&th[k], NULL, thread_body, &args[k]) != 0)
            return perror("pthread_create"), 1;
    }
    int errors = 0;
    for (int k = 0; k < t; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < t; k++) {
        char path[64], buf[1 << 16];
        snprintf(path, sizeof path, "t%d.data", k);
        ssize_t len = slurp(path, buf, sizeof buf);
        printf("thread %d: data %zd bytes fnv %08x, children", k, len,
               len < 0 ? 0 : fnv(FNV0, buf, (size_t)len));
        for (int c = 0; c < args[k].nchildren; c++)
            printf(" %d", args[k].statuses[c]);
        printf("\n");
        errors += args[k].errors;
    }
    char buf[64];
    ssize_t len = slurp("shared.counter", buf, sizeof buf - 1);
    buf[len > 0 ? len : 0] = 0;
    printf("shared counter %s", buf);
    printf("errors %d\n", errors);
    return errors != 0;
}

/* --------------------------------------------------------------- forkexec */

static atomic_int spin_stop;

static void *spinner(void *p)
{
    int k = (int)(intptr_t)p;
    char lock[32];
    snprintf(lock, sizeof lock, "spin%d.lock", k);
    long errors = 0;
    while (!atomic_load(&spin_stop)) {
        struct stat st;
        int fd = open(lock, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0 || stat(lock, &st) != 0 || flock(fd, LOCK_EX) != 0)
            errors++;
        if (fd >= 0)
            close(fd);
        if (unlink(lock) != 0)
            errors++;
    }
    return (void *)errors;
}

/* The exec'd child: a baton, a flock, a file with its number; exit 20 + i % 5. */
static int mode_child(int i)
{
    char p[64];
    snprintf(p, sizeof p, "child%d.out", i);
    int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0)
        return 2;
    char line[64];
    int n = snprintf(line, sizeof line, "child %d pid-independent\n", i);
    if (write_all(fd, line, (size_t)n) != 0)
        return 3;
    close(fd);
    return 20 + i % 5;
}

static int mode_forkexec(int n)
{
    pthread_t th[6];
    for (int k = 0; k < 6; k++)
        pthread_create(&th[k], NULL, spinner, (void *)(intptr_t)k);
    int errors = 0;
    printf("statuses");
    for (int i = 0; i < n; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        fflush(stdout); /* a child that exits through exit() must not print it again */
        pid_t c = fork();
        if (c == 0) {
            /* async-signal-safe calls only until exec: other threads may have held locks */
            if (i % 10 == 7) {
                int fd = open("noexec.lock", O_CREAT | O_EXCL | O_WRONLY, 0600);
                _exit(fd >= 0 && unlink("noexec.lock") == 0 ? 30 : 31);
            }
            if (i % 10 == 9) {
                char *argv[] = {"missing", NULL};
                execv("/nonexistent/missing", argv);
                _exit(127);
            }
            char *argv[] = {"shim_stress", "child", ".", num, NULL};
            execv(self_exe, argv);
            _exit(126);
        }
        int ws = -1;
        if (c < 0 || waitpid(c, &ws, 0) != c)
            errors++;
        printf(" %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
    }
    printf("\n");
    atomic_store(&spin_stop, 1);
    for (int k = 0; k < 6; k++) {
        void *r;
        pthread_join(th[k], &r);
        errors += (int)(intptr_t)r;
    }
    uint32_t h = FNV0;
    for (int i = 0; i < n; i++) {
        char p[64], buf[256];
        snprintf(p, sizeof p, "child%d.out", i);
        ssize_t len = slurp(p, buf, sizeof buf);
        if (len > 0)
            h = fnv(h, buf, (size_t)len);
    }
    printf("children's files fnv %08x\nerrors %d\n", h, errors);
    return errors != 0;
}

/* ------------------------------------------------------------------ vfork */

/*
 * vfork children that call wrapped functions before they exec or _exit (as
 * Python's subprocess child closes and dups fds): child i creates vf<i>.lock
 * exclusively; odd ones exec the child mode, even ones _exit(60 or 61).
 */
/* One vfork child; a function of its own, so that nothing of the caller's
 * lives across vfork (the child runs on the parent's stack). */
static __attribute__((noinline)) pid_t vfork_one(const char *lock, char *const argv[], int exec)
{
    pid_t c = vfork();
    if (c == 0) {
        int fd = open(lock, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        struct stat st;
        if (fd < 0 || stat(lock, &st) != 0)
            _exit(61);
        if (exec)
            execv(self_exe, argv);
        _exit(60);
    }
    return c;
}

static int mode_vfork(int n)
{
    int errors = 0;
    printf("statuses");
    for (int i = 0; i < n; i++) {
        char num[16], lock[32];
        snprintf(num, sizeof num, "%d", 200 + i);
        snprintf(lock, sizeof lock, "vf%d.lock", i);
        char *argv[] = {"shim_stress", "child", ".", num, NULL};
        fflush(stdout);
        pid_t c = vfork_one(lock, argv, i % 2);
        int ws = -1;
        if (c < 0 || waitpid(c, &ws, 0) != c)
            errors++;
        printf(" %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
    }
    struct stat st;
    int locks = 0;
    for (int i = 0; i < n; i++) {
        char lock[32];
        snprintf(lock, sizeof lock, "vf%d.lock", i);
        locks += stat(lock, &st) == 0;
    }
    printf("\nlock files %d\nerrors %d\n", locks, errors);
    return errors != 0;
}

/* ------------------------------------------------------------- spawnchain */

/*
 * Node ID at depth D spawns W children (posix_spawn and posix_spawnp in
 * turn, all started before any is waited for, as ninja -j does), each with
 * stdout on a pipe, reads their output in order and prints it with its own
 * line. A leaf takes a baton and a flock, and prints its id and a checksum.
 */
static int mode_spawnchain(const char *id, int depth, int width)
{
    if (depth == 0) {
        char p[128];
        snprintf(p, sizeof p, "leaf-%s.lock", id);
        int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        struct stat st;
        int ok = fd >= 0 && flock(fd, LOCK_EX) == 0 && stat(p, &st) == 0 &&
                 write_all(fd, id, strlen(id)) == 0 && close(fd) == 0 && unlink(p) == 0;
        printf("leaf %s ok %d fnv %08x\n", id, ok, fnv(FNV0, id, strlen(id)));
        return ok ? 0 : 1;
    }
    pid_t pids[16];
    int rfd[16], rcs[16], errors = 0;
    if (width > 16)
        width = 16;
    for (int c = 0; c < width; c++) {
        int pfd[2];
        char cid[128], d[16], w[16];
        snprintf(cid, sizeof cid, "%s.%d", id, c);
        snprintf(d, sizeof d, "%d", depth - 1);
        snprintf(w, sizeof w, "%d", width);
        if (pipe2(pfd, O_CLOEXEC) != 0)
            return perror("pipe2"), 1;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        /* the attributes ninja sets: signal mask and defaults, a process group of its own */
        posix_spawnattr_t at;
        sigset_t none, dfl;
        sigemptyset(&none);
        sigemptyset(&dfl);
        sigaddset(&dfl, SIGINT);
        sigaddset(&dfl, SIGTERM);
        sigaddset(&dfl, SIGHUP);
        posix_spawnattr_init(&at);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &dfl);
        posix_spawnattr_setpgroup(&at, 0);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                          (c % 2 ? POSIX_SPAWN_SETPGROUP : 0));
        char *argv[] = {"shim_stress", "spawnchain", ".", d, w, cid, NULL};
        rcs[c] = c % 2 ? posix_spawnp(&pids[c], self_exe, &fa, &at, argv, environ)
                       : posix_spawn(&pids[c], self_exe, &fa, &at, argv, environ);
        posix_spawnattr_destroy(&at);
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[1]);
        rfd[c] = pfd[0];
        if (rcs[c] != 0)
            errors++;
    }
    char out[1 << 16];
    size_t len = 0;
    for (int c = 0; c < width; c++) {
        ssize_t r;
        while (len < sizeof out && ((r = read(rfd[c], out + len, sizeof out - len)) > 0 ||
                                    (r < 0 && errno == EINTR)))
            len += r > 0 ? (size_t)r : 0;
        close(rfd[c]);
        int ws = -1;
        if (rcs[c] != 0 || waitpid(pids[c], &ws, 0) != pids[c] || !WIFEXITED(ws) ||
            WEXITSTATUS(ws) != 0)
            errors++;
    }
    fwrite(out, 1, len, stdout);
    printf("node %s depth %d: %d children, errors %d\n", id, depth, width, errors);
    return errors != 0;
}

/* --------------------------------------------------------------- closefds */

#define REUSE_HI 200 /* every number from 3 to this is taken by the program */

/* Events the shim records: an exclusive create, EEXIST, stat polls, a busy
 * non-blocking flock, a blocking flock, a fork, a posix_spawn, an unlink. */
static int lock_activity(const char *tag)
{
    char p[64];
    int errors = 0;
    snprintf(p, sizeof p, "lock-%s", tag);
    int a = open(p, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    int b = open(p, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (a < 0 || b < 0)
        errors++;
    if (open(p, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600) >= 0 || errno != EEXIST)
        errors++;
    for (int i = 0; i < 5; i++)
        if (stat(p, &st) != 0)
            errors++;
    if (flock(a, LOCK_EX) != 0 || flock(b, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
        errors++;
    pid_t c = fork();
    if (c == 0)
        _exit(flock(b, LOCK_SH | LOCK_NB) == 0 ? 50 : 51); /* the same description: 51 */
    int ws = -1;
    if (c < 0 || waitpid(c, &ws, 0) != c || !WIFEXITED(ws) || WEXITSTATUS(ws) != 51)
        errors++;
    pid_t sp;
    char *argv[] = {"true", NULL};
    if (posix_spawnp(&sp, "true", NULL, NULL, argv, environ) != 0 || waitpid(sp, &ws, 0) != sp ||
        ws != 0)
        errors++;
    close(a);
    close(b);
    if (unlink(p) != 0)
        errors++;
    return errors;
}

/* Give every number 3..REUSE_HI a file of the program's own ("own-N"), by
 * dup2 (to exactly that number) or by plain open (the lowest free number). */
static int take_numbers(int by_dup2, const char *phase)
{
    int errors = 0;
    for (int n = 3; n <= REUSE_HI; n++) {
        char p[64];
        snprintf(p, sizeof p, "own-%s-%d", phase, n);
        int fd = open(p, O_CREAT | O_TRUNC | O_RDWR, 0600);
        if (by_dup2 && fd >= 0 && fd != n) {
            if (dup2(fd, n) != n)
                errors++;
            close(fd);
            fd = n;
        }
        if (fd != n) {
            fprintf(stderr, "%s: own-%d got fd %d\n", phase, n, fd);
            errors++;
        }
    }
    return errors;
}

/* Write "mine N" into each number, close them, read the files back. */
static int check_numbers(const char *phase, uint32_t *h)
{
    int errors = 0;
    for (int n = 3; n <= REUSE_HI; n++) {
        char line[64];
        int len = snprintf(line, sizeof line, "%s mine %d\n", phase, n);
        if (write_all(n, line, (size_t)len) != 0)
            errors++;
    }
    for (int n = 3; n <= REUSE_HI; n++)
        close(n);
    for (int n = 3; n <= REUSE_HI; n++) {
        char p[64], buf[256], want[64];
        snprintf(p, sizeof p, "own-%s-%d", phase, n);
        int wl = snprintf(want, sizeof want, "%s mine %d\n", phase, n);
        ssize_t len = slurp(p, buf, sizeof buf);
        if (len != wl || memcmp(buf, want, (size_t)wl)) {
            fprintf(stderr, "%s: own-%d holds %zd bytes, not its line\n", phase, n, len);
            errors++;
        }
        *h = fnv(*h, buf, len > 0 ? (size_t)len : 0);
        unlink(p);
    }
    return errors;
}

static int mode_closefds(void)
{
    int errors = 0;
    uint32_t h = FNV0;
    errors += lock_activity("before");
    /* 1: close_range() over everything above stderr, then dup2 onto each number */
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
        errors++;
    errors += take_numbers(1, "dup2");
    errors += lock_activity("dup2");
    errors += check_numbers("dup2", &h);
    /* 2: close() of every number up to 1023, then plain opens take them in order */
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    errors += take_numbers(0, "open");
    errors += lock_activity("open");
    errors += check_numbers("open", &h);
    /* 3: the numbers stay the program's while it locks again (the shim's file reopened) */
    errors += lock_activity("after");
    printf("own files fnv %08x\nerrors %d\n", h, errors);
    return errors != 0;
}

/* ---------------------------------------------------------------- signals */

static atomic_long handled;
static atomic_long handler_errors;
static int handler_fd = -1; /* opened before the timer: the handler's flock target */

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    struct stat st;
    long n = atomic_fetch_add(&handled, 1);
    char p[32] = "sig.lock";
    int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) /* EEXIST: the handler interrupted itself's owner */
        atomic_fetch_add(&handler_errors, 1);
    if (stat(p, &st) != 0 && errno != ENOENT)
        atomic_fetch_add(&handler_errors, 1);
    if (flock(handler_fd, (n & 1 ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0 && errno != EWOULDBLOCK)
        atomic_fetch_add(&handler_errors, 1);
    flock(handler_fd, LOCK_UN);
    if (fd >= 0) {
        close(fd);
        unlink(p);
    }
    errno = saved;
}

struct sigarg {
    int k, n;
    long counts[8];
};

/* The same calls as the handler, each result and errno checked exactly. */
static void *signal_worker(void *p)
{
    struct sigarg *a = p;
    char lock[32], other[32];
    snprintf(lock, sizeof lock, "w%d.lock", a->k);
    snprintf(other, sizeof other, "w%d.flock", a->k);
    int f1 = open(other, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    int f2 = open(other, O_RDWR | O_CLOEXEC);
    for (int i = 0; i < a->n; i++) {
        struct stat st;
        errno = 12345;
        int fd = open(lock, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        a->counts[0] += fd >= 0 && errno == 12345;
        a->counts[1] += open(lock, O_CREAT | O_EXCL | O_RDONLY, 0600) < 0 && errno == EEXIST;
        errno = 12345;
        a->counts[2] += stat(lock, &st) == 0 && errno == 12345 && st.st_size == 0;
        a->counts[3] += flock(f1, LOCK_EX) == 0;
        a->counts[4] += flock(f2, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
        a->counts[5] += flock(f1, LOCK_UN) == 0;
        a->counts[6] += close(fd) == 0 && unlink(lock) == 0;
        a->counts[7] += stat(lock, &st) < 0 && errno == ENOENT;
    }
    close(f1);
    close(f2);
    return NULL;
}

static int mode_signals(int n)
{
    handler_fd = open("sig.flock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (handler_fd < 0 || sigaction(SIGALRM, &sa, NULL) != 0)
        return perror("set-up"), 1;
    struct itimerval it = {.it_interval = {0, 200}, .it_value = {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct sigarg args[3];
    pthread_t th[2];
    for (int k = 0; k < 3; k++)
        args[k] = (struct sigarg){.k = k, .n = n};
    for (int k = 1; k < 3; k++)
        pthread_create(&th[k - 1], NULL, signal_worker, &args[k]);
    signal_worker(&args[0]);
    for (int k = 1; k < 3; k++)
        pthread_join(th[k - 1], NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    int errors = (int)atomic_load(&handler_errors);
    for (int k = 0; k < 3; k++) {
        printf("worker %d:", k);
        for (int c = 0; c < 8; c++) {
            printf(" %ld", args[k].counts[c]);
            errors += args[k].counts[c] != n;
        }
        printf("\n");
    }
    /* How often the handler ran depends on timing: only that it ran. */
    printf("handler ran: %s\nerrors %d\n", atomic_load(&handled) > 0 ? "yes" : "no", errors);
    return errors != 0 || atomic_load(&handled) == 0;
}

/* ------------------------------------------------------------------- fill */

static int lock_series(const char *prefix, int n)
{
    int errors = 0;
    for (int i = 0; i < n; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s-%d.lock", prefix, i);
        int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0 || close(fd) != 0 || unlink(p) != 0)
            errors++;
    }
    return errors;
}

/* Two series of events with a pause between, for a trace directory that is
 * full during the first and has room again in the second. */
static int mode_fill(int n)
{
    int errors = lock_series("phase1", n);
    printf("phase 1, errors %d\n", errors);
    fflush(stdout);
    struct stat st;
    int waited = 0;
    while (stat("go", &st) != 0 && waited++ < 3000)
        usleep(10000);
    errors += lock_series("phase2", 20);
    printf("phase 2, %s, errors %d\n", waited > 3000 ? "no go" : "go", errors);
    return errors != 0;
}

int main(int argc, char **argv)
{
    int e0 = errno;
    if (argc >= 2 && !strcmp(argv[1], "errno")) {
        printf("errno at main %d\n", e0);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: shim_stress MODE DIR [ARGS]\n");
        return 64;
    }
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return perror("/proc/self/exe"), 2;
    exe[n] = 0;
    self_exe = exe;
    if (chdir(argv[2]) != 0)
        return perror(argv[2]), 2;
    int a3 = argc > 3 ? atoi(argv[3]) : 0, a4 = argc > 4 ? atoi(argv[4]) : 0;
    const char *m = argv[1];
    if (!strcmp(m, "threads"))
        return mode_threads(a3 ? a3 : 8, a4 ? a4 : 200);
    if (!strcmp(m, "forkexec"))
        return mode_forkexec(a3 ? a3 : 40);
    if (!strcmp(m, "vfork"))
        return mode_vfork(a3 ? a3 : 10);
    if (!strcmp(m, "spawnchain"))
        return mode_spawnchain(argc > 5 ? argv[5] : "r", a3, a4);
    if (!strcmp(m, "closefds"))
        return mode_closefds();
    if (!strcmp(m, "signals"))
        return mode_signals(a3 ? a3 : 3000);
    if (!strcmp(m, "fill"))
        return mode_fill(a3 ? a3 : 60);
    if (!strcmp(m, "child"))
        return mode_child(a3);
    return 64;
}
