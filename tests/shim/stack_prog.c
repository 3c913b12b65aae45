/*
 * The shim's stack bound (docs/design.md "The shim"): every wrapped call,
 * made where the stack is small, each one recording (a lock path, a trace
 * directory), so that the shim's whole recording path runs.
 *
 *   stack_prog altstack DIR   each call in a SIGUSR1 handler on an 8 KiB
 *                             sigaltstack (SA_ONSTACK), then _exit(0) there
 *   stack_prog thread DIR     each call in a thread of a 16 KiB stack
 *                             (pthread_attr_setstacksize), then _exit(0) there
 *   stack_prog depth DIR      each call in a handler on a 64 KiB alternate
 *                             stack painted with a pattern: prints the bytes
 *                             of it that the call touched
 *
 * DIR becomes the cwd: the calls take relative paths (the shim resolves them).
 * Three cases take paths that cannot be recorded whole (wide: its JSON is longer
 * than a line; deep, deep_busy: its absolute path exceeds PATH_MAX).
 * For each case it prints "case NAME rc=R errno=E" ("child=PID" for fork and
 * spawn) from the main thread after the call; depth prints "depth NAME BYTES".
 * A stack too small for the call is a SIGSEGV (the stacks have guard pages).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "glibc_entries.h"

extern char **environ;

#define ALT_SMALL 8192
#define THREAD_STACK 16384
#define ALT_DEPTH 65536
#define PAINT 0xa5

/* What the current case's action did (set on the small stack, printed after). */
static volatile long rc;
static volatile int err;
static volatile pid_t child;
static volatile int in_child; /* a fork child of the depth mode: measures, then exits */
static int depth;              /* the depth mode */
static int fa, fb;           /* the descriptors that a setup opened for its action */
static struct stat st;
static struct stat64 st64;
static struct statx sx;
static struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

struct kase {
    const char *name;
    void (*setup)(void);
    void (*action)(void);
};

/* ---- setups (on the main stack) ---- */

static void open_lock(const char *name)
{
    int fd = open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        perror(name);
        exit(2);
    }
    close(fd);
}

static void two_fds(const char *name)
{
    fa = open(name, O_CREAT | O_RDWR, 0600);
    fb = open(name, O_RDWR);
    if (fa < 0 || fb < 0) {
        perror(name);
        exit(2);
    }
}

static void s_none(void) {}
static void s_eexist(void) { open_lock("ee_open"); }
#define STAT_SETUP(n) static void s_##n(void) { open_lock("st_" #n); }
STAT_SETUP(stat) STAT_SETUP(stat64) STAT_SETUP(lstat) STAT_SETUP(lstat64) STAT_SETUP(fstatat)
STAT_SETUP(fstatat64) STAT_SETUP(statx) STAT_SETUP(__xstat) STAT_SETUP(__xstat64)
STAT_SETUP(__lxstat) STAT_SETUP(__lxstat64) STAT_SETUP(__fxstatat) STAT_SETUP(__fxstatat64)
static void s_dirfd(void) { fa = open(".", O_RDONLY | O_DIRECTORY); }
static void s_flock_busy(void) { two_fds("fl_busy"); flock(fa, LOCK_EX); }
static void s_flock_taken(void) { flock(fa, LOCK_UN); } /* after s_flock_busy's case */
static void s_flock_block(void) { two_fds("fl_block"); }
static void s_ofd_busy(void) { two_fds("ofd_busy"); fcntl(fa, F_OFD_SETLK, &fl); }
static void s_ofd64_busy(void) { two_fds("ofd64_busy"); fcntl(fa, F_OFD_SETLK, &fl); }
static void s_posix_w(void) { two_fds("posix_w"); }
static void s_ofd64_w(void) { two_fds("ofd64_w"); }
static void s_lockf_w(void) { two_fds("lockf_w"); }
static void s_lockf64_w(void) { two_fds("lockf64_w"); }
static void s_count(void)
{
    /* Past HDX_TRACE_LOCK_FULL (64) blocking calls on one path, a quick one is counted. */
    two_fds("cnt");
    for (int i = 0; i < 70; i++)
        flock(fa, LOCK_EX), flock(fa, LOCK_UN);
}
static void s_unlink(void) { open_lock("rel_unlink"); }
static void s_unlinkat(void) { open_lock("rel_unlinkat"); }
static void s_rename(void) { open_lock("rel_rename"); }
static void s_renameat(void) { open_lock("rel_renameat"); }
static void s_renameat2(void) { open_lock("rel_renameat2"); }
static void s_fork(void) { fflush(stdout); }
/* A path whose JSON (each byte 0xff is \u00ff, 6 bytes) does not fit in a line. */
#define WIDE 250
static char wide_path[3 * (WIDE + 1) + 8];
static void s_wide(void)
{
    char *p = wide_path;
    for (int d = 0; d < 3; d++) {
        memset(p, 0xff, WIDE);
        p[WIDE] = 0;
        if (mkdir(wide_path, 0700) != 0) {
            perror("mkdir");
            exit(2);
        }
        p[WIDE] = '/';
        p += WIDE + 1;
    }
    memcpy(p, "lock", 5);
}
/* A directory whose absolute path exceeds PATH_MAX (fa holds it). */
static void s_deep(void)
{
    char name[WIDE + 1];
    memset(name, 'd', WIDE);
    name[WIDE] = 0;
    int dfd = open(".", O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 20; i++) {
        int next;
        if (mkdirat(dfd, name, 0700) != 0 || (next = openat(dfd, name, O_RDONLY | O_DIRECTORY)) < 0) {
            perror("mkdirat");
            exit(2);
        }
        close(dfd);
        dfd = next;
    }
    fa = dfd;
}
static void s_deep_busy(void)
{
    int dir = fa;
    fa = openat(dir, "deep_flock", O_CREAT | O_RDWR, 0600);
    fb = openat(dir, "deep_flock", O_RDWR);
    if (fa < 0 || fb < 0) {
        perror("deep_flock");
        exit(2);
    }
    flock(fa, LOCK_EX);
    fa = dir;
}

/* ---- actions (on the small stack) ---- */

#define DO(expr) (errno = 0, rc = (long)(expr), err = errno)
static void a_open(void) { DO(open("acq_open", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_open64(void) { DO(open64("acq_open64", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_openat(void) { DO(openat(AT_FDCWD, "acq_openat", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_openat64(void) { DO(openat64(AT_FDCWD, "acq_openat64", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_openat_dirfd(void) { DO(openat(fa, "acq_dirfd", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_eexist(void) { DO(open("ee_open", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_creat(void) { DO(creat("plain_creat", 0600)); }
static void a_creat64(void) { DO(creat64("plain_creat64", 0600)); }
static void a___open_2(void) { DO(__open_2("plain_creat", O_RDONLY)); }
static void a___open64_2(void) { DO(__open64_2("plain_creat", O_RDONLY)); }
static void a___openat_2(void) { DO(__openat_2(AT_FDCWD, "plain_creat", O_RDONLY)); }
static void a___openat64_2(void) { DO(__openat64_2(AT_FDCWD, "plain_creat", O_RDONLY)); }
static void a_stat(void) { DO(stat("st_stat", &st)); }
static void a_stat64(void) { DO(stat64("st_stat64", &st64)); }
static void a_lstat(void) { DO(lstat("st_lstat", &st)); }
static void a_lstat64(void) { DO(lstat64("st_lstat64", &st64)); }
static void a_fstatat(void) { DO(fstatat(AT_FDCWD, "st_fstatat", &st, 0)); }
static void a_fstatat64(void) { DO(fstatat64(AT_FDCWD, "st_fstatat64", &st64, 0)); }
static void a_statx(void) { DO(statx(AT_FDCWD, "st_statx", 0, STATX_BASIC_STATS, &sx)); }
static void a___xstat(void) { DO(__xstat(1, "st___xstat", &st)); }
static void a___xstat64(void) { DO(__xstat64(1, "st___xstat64", &st64)); }
static void a___lxstat(void) { DO(__lxstat(1, "st___lxstat", &st)); }
static void a___lxstat64(void) { DO(__lxstat64(1, "st___lxstat64", &st64)); }
static void a___fxstatat(void) { DO(__fxstatat(1, AT_FDCWD, "st___fxstatat", &st, 0)); }
static void a___fxstatat64(void) { DO(__fxstatat64(1, AT_FDCWD, "st___fxstatat64", &st64, 0)); }
static void a_flock_busy(void) { DO(flock(fb, LOCK_EX | LOCK_NB)); }
static void a_flock_taken(void) { DO(flock(fb, LOCK_EX | LOCK_NB)); }
static void a_flock_block(void) { DO(flock(fa, LOCK_EX)); }
static void a_ofd_busy(void) { DO(fcntl(fb, F_OFD_SETLK, &fl)); }
static void a_ofd64_busy(void) { DO(fcntl64(fb, F_OFD_SETLK, &fl)); }
static void a_posix_w(void) { DO(fcntl(fa, F_SETLKW, &fl)); }
static void a_ofd64_w(void) { DO(fcntl64(fa, F_OFD_SETLKW, &fl)); }
static void a_lockf_w(void) { DO(lockf(fa, F_LOCK, 0)); }
static void a_lockf64_w(void) { DO(lockf64(fa, F_LOCK, 0)); }
static void a_count(void) { DO(flock(fa, LOCK_EX)); }
static void a_unlink(void) { DO(unlink("./rel_unlink")); }
static void a_unlinkat(void) { DO(unlinkat(AT_FDCWD, "./rel_unlinkat", 0)); }
static void a_rename(void) { DO(rename("./rel_rename", "gone_rename")); }
static void a_renameat(void) { DO(renameat(AT_FDCWD, "./rel_renameat", AT_FDCWD, "gone_renameat")); }
static void a_renameat2(void) { DO(renameat2(AT_FDCWD, "./rel_renameat2", AT_FDCWD, "gone_renameat2", 0)); }
static void a_fork(void)
{
    pid_t p = fork();
    if (p == 0) {
        if (!depth)
            _exit(0); /* its header and exit line are its trace */
        in_child = 1;
        return;
    }
    DO(p);
    child = p;
}
static void a_wide(void) { DO(open(wide_path, O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_deep(void) { DO(openat(fa, "deep_lock", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void a_deep_busy(void) { DO(flock(fb, LOCK_EX | LOCK_NB)); }
static char *spawn_argv[] = {"true", "stack_spawn", NULL};
static void a_posix_spawn(void)
{
    pid_t p = -1;
    DO(posix_spawn(&p, "/bin/true", NULL, NULL, spawn_argv, environ));
    child = p;
}
static void a_posix_spawnp(void)
{
    pid_t p = -1;
    DO(posix_spawnp(&p, "true", NULL, NULL, spawn_argv, environ));
    child = p;
}

#define C(n, s) {#n, s, a_##n}
static const struct kase cases[] = {
    C(open, s_none), C(open64, s_none), C(openat, s_none), C(openat64, s_none),
    C(openat_dirfd, s_dirfd), C(eexist, s_eexist),
    C(creat, s_none), C(creat64, s_none), C(__open_2, s_none), C(__open64_2, s_none),
    C(__openat_2, s_none), C(__openat64_2, s_none),
    C(stat, s_stat), C(stat64, s_stat64), C(lstat, s_lstat), C(lstat64, s_lstat64),
    C(fstatat, s_fstatat), C(fstatat64, s_fstatat64), C(statx, s_statx),
    C(__xstat, s___xstat), C(__xstat64, s___xstat64), C(__lxstat, s___lxstat),
    C(__lxstat64, s___lxstat64), C(__fxstatat, s___fxstatat), C(__fxstatat64, s___fxstatat64),
    C(flock_busy, s_flock_busy), C(flock_taken, s_flock_taken), C(flock_block, s_flock_block),
    C(ofd_busy, s_ofd_busy), C(ofd64_busy, s_ofd64_busy), C(posix_w, s_posix_w),
    C(ofd64_w, s_ofd64_w), C(lockf_w, s_lockf_w), C(lockf64_w, s_lockf64_w), C(count, s_count),
    C(unlink, s_unlink), C(unlinkat, s_unlinkat), C(rename, s_rename), C(renameat, s_renameat),
    C(renameat2, s_renameat2), C(wide, s_wide), C(deep, s_deep), C(deep_busy, s_deep_busy),
    C(fork, s_fork), C(posix_spawn, s_none), C(posix_spawnp, s_none),
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const struct kase *current;
static int final_exit; /* the handler's or thread's last act: _exit(0) (the exit event) */

static void run_current(void)
{
    if (final_exit)
        _exit(0);
    current->action();
}

static void on_usr1(int sig)
{
    (void)sig;
    run_current();
}

static void *thread_main(void *arg)
{
    (void)arg;
    run_current();
    return NULL;
}

/* A region of size bytes with a PROT_NONE guard page below it (stacks grow down). */
static char *guarded(size_t size)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, size + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED || mprotect(m, (size_t)pg, PROT_NONE) != 0) {
        perror("mmap");
        exit(2);
    }
    return m + pg;
}

static void report(const struct kase *k)
{
    printf("case %s rc=%ld errno=%d", k->name, rc, err);
    if (child > 0)
        printf(" child=%d", (int)child);
    printf("\n");
    fflush(stdout);
    if (child > 0)
        waitpid(child, NULL, 0);
    child = 0;
}

static size_t touched(const char *stack, size_t size)
{
    size_t i = 0;
    while (i < size && (unsigned char)stack[i] == PAINT)
        i++;
    return size - i;
}

int main(int argc, char **argv)
{
    if (argc != 3 || chdir(argv[2]) != 0) {
        fprintf(stderr, "usage: stack_prog altstack|thread|depth DIR\n");
        return 2;
    }
    const char *mode = argv[1];
    depth = strcmp(mode, "depth") == 0;
    int thread = strcmp(mode, "thread") == 0;
    if (!depth && !thread && strcmp(mode, "altstack") != 0) {
        fprintf(stderr, "stack_prog: unknown mode %s\n", mode);
        return 2;
    }
    size_t alt = depth ? ALT_DEPTH : ALT_SMALL;
    char *stack = guarded(alt);
    stack_t ss = {.ss_sp = stack, .ss_size = alt};
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) {
        perror("sigaltstack");
        return 2;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (pthread_attr_setstacksize(&at, THREAD_STACK) != 0) {
        fprintf(stderr, "stack_prog: a %d-byte thread stack refused\n", THREAD_STACK);
        return 2;
    }
    for (size_t i = 0; i <= N_CASES; i++) {
        final_exit = i == N_CASES;
        if (final_exit && depth)
            break;
        current = &cases[final_exit ? 0 : i];
        current->setup();
        if (depth)
            memset(stack, PAINT, alt);
        if (thread) {
            pthread_t t;
            int e = pthread_create(&t, &at, thread_main, NULL);
            if (e != 0) {
                fprintf(stderr, "stack_prog: pthread_create: %s\n", strerror(e));
                return 2;
            }
            pthread_join(t, NULL);
        } else {
            raise(SIGUSR1);
        }
        if (in_child) {
            /* The fork child (depth): its header was written on the alternate stack. */
            char line[64];
            int n = snprintf(line, sizeof line, "depth fork_child %zu\n", touched(stack, alt));
            if (write(1, line, (size_t)n) != n)
                _exit(3);
            _exit(0);
        }
        if (depth)
            printf("depth %s %zu\n", current->name, touched(stack, alt));
        report(current);
    }
    return 0;
}
