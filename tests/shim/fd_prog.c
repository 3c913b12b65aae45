/*
 * Programs for the trace fd's tests (fd_test.py): each mode uses file
 * descriptors the way a program may (dup2 onto any number, close them all,
 * lower its limit, fork from threads and exec) while the shim records, and
 * prints only what must be the same with and without the shim.
 *
 *   fd_prog showfd TRACEDIR          the fds open into TRACEDIR ("trace fds: N ...")
 *   fd_prog dup2 DIR T RAISE N [HOT] with T threads alive (0: none; parked
 *                                    until after the dup2, or recording all
 *                                    along with HOT 1) the program (RAISE 1:
 *                                    its soft limit raised to the hard one
 *                                    first) dup2s its own file onto N, locks,
 *                                    writes 2000 lines through N
 *   fd_prog closeall DIR T           T threads record; the program closes
 *                                    every fd (close_range), locks, and takes
 *                                    3..200 with files of its own
 *   fd_prog rlimit DIR LOW           lowers both limits to LOW; counts the fds
 *                                    it can open; locks; forks a child that locks
 *   fd_prog forkexec DIR N T         T threads record; N forks, each locks and
 *                                    execs "fd_prog child DIR I"
 *   fd_prog child DIR I              the exec'd child: locks, notes its trace fds
 *
 * The recording threads make trace lines without taking any fd number (a
 * blocking flock of a number never opened: EBADF at once, and the shim still
 * writes its lock_start and lock_end; even an open that fails takes the
 * lowest free number for an instant), so closing or replacing fds under them
 * cannot disturb the program's own numbers.
 * Every failure is counted and printed ("errors N"); the exit status is 0
 * only when nothing was unexpected.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *self_exe;
static char dir[PATH_MAX]; /* the work directory, absolute */

/* The fds of this process open on a file under tdir, into out (link targets into links). */
static int trace_fds(const char *tdir, int *out, char links[][PATH_MAX], int cap)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0, self = d ? dirfd(d) : -1;
    struct dirent *e;
    size_t tl = strlen(tdir);
    while (d && (e = readdir(d)) && n < cap) {
        char p[64], t[PATH_MAX];
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == self)
            continue;
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(p, t, sizeof t - 1);
        if (k <= 0)
            continue;
        t[k] = 0;
        if (!strncmp(t, tdir, tl) && t[tl] == '/') {
            out[n] = fd;
            if (links)
                strcpy(links[n], t);
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static int mode_showfd(const char *tdir)
{
    int fds[16];
    int n = trace_fds(tdir, fds, NULL, 16);
    printf("trace fds:");
    for (int i = 0; i < n; i++)
        printf(" %d", fds[i]);
    printf(n ? "\n" : " none\n");
    return 0;
}

/* ---- recording threads ---- */

/* A number no mode ever opens: a blocking flock on it fails at once (EBADF),
 * and the shim still records the call (lock_start, lock_end). */
#define NO_FD 9999

static atomic_int go, stop;

static void *recorder(void *arg)
{
    (void)arg;
    /* 50 us apart: the trace stays far below its 16 MiB cap */
    struct timespec pause = {0, 50 * 1000}, park = {0, 100 * 1000};
    while (!atomic_load(&go))
        nanosleep(&park, NULL); /* parked: alive, recording nothing */
    long n = 0;
    while (!atomic_load(&stop) || n < 100) {
        if (flock(NO_FD, LOCK_EX) == 0 || errno != EBADF)
            return (void *)-1L;
        n++;
        nanosleep(&pause, NULL);
    }
    return (void *)n;
}

/* T recording threads; parked (alive, silent) until release_recorders() unless hot. */
static int start_recorders(pthread_t *th, int t, int hot)
{
    atomic_store(&go, hot);
    for (int k = 0; k < t; k++)
        if (pthread_create(&th[k], NULL, recorder, (void *)(long)k) != 0)
            return -1;
    if (hot) {
        struct timespec ts = {0, 20 * 1000 * 1000}; /* let them run a little */
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void release_recorders(void)
{
    atomic_store(&go, 1);
}

/* Each thread makes at least 100 calls after its release, then stops. */
static int stop_recorders(pthread_t *th, int t)
{
    int errors = 0;
    atomic_store(&go, 1);
    atomic_store(&stop, 1);
    for (int k = 0; k < t; k++) {
        void *r;
        pthread_join(th[k], &r);
        if ((long)r <= 0)
            errors++; /* a flock that did not fail with EBADF */
    }
    atomic_store(&stop, 0);
    return errors;
}

/* One event the shim records: an exclusive create and its unlink. */
static int lock_event(const char *name)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0)
        return 1;
    close(fd);
    return unlink(p) != 0;
}

static int check_file(const char *name, const char *fmt, int n)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return 1;
    int bad = 0;
    char line[128], want[64];
    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof want, fmt, i);
        if (!fgets(line, sizeof line, f) || strcmp(line, want))
            bad++;
    }
    if (fgets(line, sizeof line, f))
        bad++; /* something after the program's lines */
    fclose(f);
    return bad;
}

/* ---- dup2 onto the shim's number ---- */

/*
 * The program's own file dup2'd onto TARGET; then, while T threads are
 * alive (parked, or recording already when HOT), a lock ("during.lock"), 2000
 * lines through TARGET, the threads released; "after.lock" once they are gone.
 */
static int mode_dup2(int t, int raise, int target, int hot)
{
    int errors = 0;
    pthread_t th[16];
    errors += lock_event("before.lock");
    if (raise) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            errors++;
    }
    if (t && start_recorders(th, t, hot) != 0)
        errors++;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/own.txt", dir);
    int own = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    errno = 0;
    int r = dup2(own, target);
    printf("dup2 onto %d: rc %s errno %d\n", target, r == target ? "ok" : "-1", errno);
    close(own);
    errors += lock_event("during.lock");
    int lines = r == target ? 2000 : 0;
    for (int i = 0; i < lines; i++) {
        char l[32];
        int len = snprintf(l, sizeof l, "P%04d\n", i);
        if (write(target, l, (size_t)len) != len)
            errors++;
        if (i == 100)
            release_recorders();
    }
    if (t)
        errors += stop_recorders(th, t);
    if (r == target)
        close(target);
    errors += lock_event("after.lock");
    printf("own file exact: %s\n", check_file("own.txt", "P%04d\n", lines) ? "NO" : "yes");
    printf("errors %d\n", errors);
    return errors != 0;
}

/* ---- close every fd under recording threads ---- */

#define REUSE_HI 200

static int mode_closeall(int t)
{
    int errors = 0;
    pthread_t th[16];
    errors += lock_event("before.lock");
    if (t && start_recorders(th, t, 1) != 0)
        errors++;
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
        errors++;
    errors += lock_event("during.lock"); /* the threads still alive */
    for (int n = 3; n <= REUSE_HI; n++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/own-%d", dir, n);
        int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        if (fd != n)
            errors++;
    }
    for (int round = 0; round < 20; round++)
        for (int n = 3; n <= REUSE_HI; n++) {
            char l[32];
            int len = snprintf(l, sizeof l, "mine %d %d\n", n, round);
            if (write(n, l, (size_t)len) != len)
                errors++;
        }
    for (int n = 3; n <= REUSE_HI; n++)
        close(n);
    if (t)
        errors += stop_recorders(th, t);
    errors += lock_event("after.lock");
    int bad = 0;
    for (int n = 3; n <= REUSE_HI; n++) {
        char name[32], fmt[32];
        snprintf(name, sizeof name, "own-%d", n);
        snprintf(fmt, sizeof fmt, "mine %d %%d\n", n);
        bad += check_file(name, fmt, 20) != 0;
    }
    printf("own files exact: %d of %d\nerrors %d\n", REUSE_HI - 2 - bad, REUSE_HI - 2, errors);
    return errors != 0 || bad;
}

/* ---- lower the limit below the shim's fd ---- */

static int count_opens(void)
{
    int fds[4096], n = 0;
    while (n < 4096 && (fds[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    int e = errno;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    errno = e;
    return n;
}

static int mode_rlimit(int low)
{
    int errors = 0;
    errors += lock_event("before.lock");
    struct rlimit rl = {(rlim_t)low, (rlim_t)low};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        errors++;
    int n = count_opens();
    printf("limit %d: opened %d, then errno %d\n", low, n, errno);
    errors += lock_event("lowered.lock");
    pid_t c = fork();
    if (c == 0) {
        int e = lock_event("child.lock");
        exit(e ? 1 : 7);
    }
    int ws = -1;
    if (c < 0 || waitpid(c, &ws, 0) != c)
        errors++;
    printf("child status %d\n", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    errors += lock_event("after.lock");
    printf("errors %d\n", errors);
    return errors != 0;
}

/* ---- fork from threads, exec ---- */

/* Writes DIR/NAME: one line "FD TARGET" per fd into the trace dir (none: empty). */
static int note_trace_fds(const char *name)
{
    const char *tdir = getenv("HANGDX_TRACE_DIR");
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        return 1;
    if (tdir) {
        static char links[16][PATH_MAX];
        int fds[16];
        int n = trace_fds(tdir, fds, links, 16);
        for (int i = 0; i < n; i++)
            fprintf(f, "%d %s\n", fds[i], links[i]);
    }
    fclose(f);
    return 0;
}

static int mode_child(int i)
{
    char n[64];
    snprintf(n, sizeof n, "ec%d.lock", i);
    int e = lock_event(n);
    snprintf(n, sizeof n, "exec-%d.fds", i);
    e += note_trace_fds(n);
    return e ? 1 : 20 + i % 5;
}

static int mode_forkexec(int n, int t)
{
    int errors = 0;
    pthread_t th[16];
    if (t && start_recorders(th, t, 1) != 0)
        errors++;
    printf("statuses");
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c == 0) {
            char a[64], b[16];
            snprintf(a, sizeof a, "fc%d.lock", i);
            int e = lock_event(a);
            snprintf(a, sizeof a, "fork-%d.fds", i);
            e += note_trace_fds(a);
            if (e)
                _exit(2);
            snprintf(b, sizeof b, "%d", i);
            execl(self_exe, "fd_prog", "child", dir, b, (char *)NULL);
            _exit(127);
        }
        int ws = -1;
        if (c < 0 || waitpid(c, &ws, 0) != c)
            errors++;
        printf(" %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    }
    printf("\n");
    if (t)
        errors += stop_recorders(th, t);
    printf("errors %d\n", errors);
    return errors != 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3)
        return 64;
    static char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return 2;
    exe[k] = 0;
    self_exe = exe;
    const char *m = argv[1];
    if (!strcmp(m, "showfd"))
        return mode_showfd(argv[2]);
    if (!realpath(argv[2], dir))
        return perror(argv[2]), 2;
    int a3 = argc > 3 ? atoi(argv[3]) : 0, a4 = argc > 4 ? atoi(argv[4]) : 0;
    int a5 = argc > 5 ? atoi(argv[5]) : 0;
    if (!strcmp(m, "dup2"))
        return mode_dup2(a3, a4, a5, argc > 6 && atoi(argv[6]));
    if (!strcmp(m, "closeall"))
        return mode_closeall(a3);
    if (!strcmp(m, "rlimit"))
        return mode_rlimit(a3);
    if (!strcmp(m, "forkexec"))
        return mode_forkexec(a3, a4);
    if (!strcmp(m, "child"))
        return mode_child(a3);
    return 64;
}
