/*
 * Targets for the hostile-timing tests (tests/system/hostile/test_hostile.py).
 *
 *   hostile_target compute [ROUNDS]
 *     A deterministic computation in three threads, as real programs write
 *     them: "hash" mixes 4096 words a round and writes each round's hash to
 *     a pipe (short writes and EINTR retried), "sum" reads them back (short
 *     reads and EINTR retried) and folds them into a checksum, "signaller"
 *     sends SIGUSR1 to the main thread every 2 ms and waits for the handler's
 *     acknowledgement (a signal lost by a tracer is counted, not waited for).
 *     The main thread polls a stop flag with a 300 ms nanosleep, as a
 *     FileBaton waiter does, so `hangdx inspect` watches its system calls
 *     (for one poll round: up to 300 ms, long enough to signal hangdx then). The handler
 *     has no SA_RESTART: calls really return EINTR. With ROUNDS it stops
 *     after ROUNDS rounds; without, at EOF (or "stop") on stdin, after the
 *     current round. Prints "ready" once running, and at the end
 *     "rounds N checksum HEX signals SENT ACKED LOST".
 *
 *   hostile_target churn
 *     Creates and joins threads without pause (8 alive at a time, each a few
 *     system calls long) until EOF on stdin; each adds its index to a sum.
 *     Prints "ready", then "threads N sum S" (S must be N(N-1)/2).
 *
 *   hostile_target vfork SECONDS
 *     Thread "vforker" vforks a child that sleeps SECONDS and exits: the
 *     thread waits for it in the kernel (wait_for_vfork_done, state D, a
 *     killable sleep that PTRACE_INTERRUPT cannot end). The main thread
 *     sleeps. The child prints "ready VFORKER_TID CHILD_PID" (a raw write:
 *     it shares the parent's memory).
 *
 *   hostile_target suicide [POLL_US]
 *     The main thread polls with nanosleep; thread "sentinel" reads the
 *     TracerPid of every thread of the process every POLL_US (default 200)
 *     microseconds and calls
 *     _exit(3) the moment one is traced: the process ends in the middle of
 *     an inspection. Prints "ready"; exits 0 on EOF on stdin.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop_flag;

/* nanosleep for ms, resumed after EINTR with the time left. */
static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L}, left;
    while (nanosleep(&ts, &left) < 0 && errno == EINTR)
        ts = left;
}

static void say(const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(1, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(1);
        s += w;
        n -= (size_t)w;
    }
}

/* Wait for EOF or "stop" on stdin, then raise stop_flag. */
static void *stdin_watch(void *arg)
{
    (void)arg;
    char buf[64];
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || memmem(buf, (size_t)n, "stop", 4))
            break;
    }
    atomic_store(&stop_flag, 1);
    return NULL;
}

static void start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
    if (pthread_create(t, NULL, fn, arg) != 0)
        abort();
    pthread_setname_np(*t, name);
}

/* ---- compute ------------------------------------------------------------ */

static long rounds_wanted; /* 0: until stdin says stop */
static long rounds_done;
static int pipefd[2];
static uint64_t checksum;
static sem_t ack;
static atomic_long sig_received;
static pthread_t main_thread;
static atomic_int signaller_stop;
static long sig_sent, sig_acked, sig_lost;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&sig_received, 1);
    sem_post(&ack);
}

static void *hash_thread(void *arg)
{
    (void)arg;
    uint64_t h = 1;
    for (long r = 0;; r++) {
        if (rounds_wanted ? r >= rounds_wanted : atomic_load(&stop_flag))
            break;
        for (uint64_t j = 0; j < 4096; j++)
            h = mix(h ^ j ^ (uint64_t)r);
        const char *p = (const char *)&h;
        size_t left = sizeof h;
        while (left) {
            ssize_t w = write(pipefd[1], p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                abort();
            p += w;
            left -= (size_t)w;
        }
        rounds_done = r + 1;
        if (!rounds_wanted && (r & 3) == 3)
            sleep_ms(1); /* paced while the test inspects; the reference run is not */
    }
    close(pipefd[1]);
    return NULL;
}

static void *sum_thread(void *arg)
{
    (void)arg;
    uint64_t v, sum = 0;
    size_t got = 0;
    for (;;) {
        ssize_t n = read(pipefd[0], (char *)&v + got, sizeof v - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            abort();
        if (n == 0)
            break;
        got += (size_t)n;
        if (got == sizeof v) {
            sum = sum * 1000003ULL + v;
            got = 0;
        }
    }
    checksum = sum;
    return NULL;
}

static void *signaller_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&signaller_stop)) {
        pthread_kill(main_thread, SIGUSR1);
        sig_sent++;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 3;
        int r;
        while ((r = sem_timedwait(&ack, &until)) < 0 && errno == EINTR)
            ;
        if (r == 0)
            sig_acked++;
        else
            sig_lost++;
        sleep_ms(2);
    }
    return NULL;
}

static int compute(long rounds)
{
    rounds_wanted = rounds;
    main_thread = pthread_self();
    sem_init(&ack, 0, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1; /* no SA_RESTART: system calls see EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    if (pipe(pipefd) < 0)
        return 1;
    /* Only the main thread takes SIGUSR1. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    pthread_t th, ts, tg, tw;
    start(&th, "hash", hash_thread, NULL);
    start(&ts, "sum", sum_thread, NULL);
    start(&tg, "signaller", signaller_thread, NULL);
    if (!rounds)
        start(&tw, "stdin", stdin_watch, NULL);
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    say("ready\n");
    /* The main thread polls, as a FileBaton waiter does. */
    while (rounds ? rounds_done < rounds : !atomic_load(&stop_flag))
        sleep_ms(300);
    pthread_join(th, NULL);
    pthread_join(ts, NULL);
    atomic_store(&signaller_stop, 1);
    pthread_join(tg, NULL);
    char line[160];
    snprintf(line, sizeof line, "rounds %ld checksum %016" PRIx64 " signals %ld %ld %ld received %ld\n",
             rounds_done, checksum, sig_sent, sig_acked, sig_lost, atomic_load(&sig_received));
    say(line);
    return 0;
}

/* ---- churn -------------------------------------------------------------- */

static atomic_long churn_sum;

static void *churn_one(void *arg)
{
    long i = (long)(intptr_t)arg;
    syscall(SYS_getpid);
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
    atomic_fetch_add(&churn_sum, i);
    return NULL;
}

static int churn(void)
{
    pthread_t tw;
    start(&tw, "stdin", stdin_watch, NULL);
    say("ready\n");
    pthread_t ring[8];
    long n = 0;
    while (!atomic_load(&stop_flag)) {
        int slot = (int)(n % 8);
        if (n >= 8)
            pthread_join(ring[slot], NULL);
        if (pthread_create(&ring[slot], NULL, churn_one, (void *)(intptr_t)n) != 0)
            abort();
        n++;
    }
    for (long k = n > 8 ? n - 8 : 0; k < n; k++)
        pthread_join(ring[k % 8], NULL);
    char line[96];
    snprintf(line, sizeof line, "threads %ld sum %ld\n", n, atomic_load(&churn_sum));
    say(line);
    return 0;
}

/* ---- vfork -------------------------------------------------------------- */

static long vfork_seconds;
static char ready_line[64];

static void *vforker(void *arg)
{
    (void)arg;
    for (;;) {
        snprintf(ready_line, sizeof ready_line, "ready %ld ", (long)syscall(SYS_gettid));
        pid_t c = vfork();
        if (c == 0) {
            /* The child shares our memory and stack: raw system calls only. It dies with
             * the vforker (PR_SET_PDEATHSIG), never outliving the test. */
            syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
            char num[16];
            int n = 0;
            long pid = syscall(SYS_getpid);
            char rev[16];
            do {
                rev[n++] = (char)('0' + pid % 10);
                pid /= 10;
            } while (pid);
            for (int k = 0; k < n; k++)
                num[k] = rev[n - 1 - k];
            num[n++] = '\n';
            syscall(SYS_write, 1, ready_line, strlen(ready_line));
            syscall(SYS_write, 1, num, n);
            struct timespec ts = {vfork_seconds, 0};
            syscall(SYS_nanosleep, &ts, NULL);
            _exit(0);
        }
        if (c < 0)
            abort();
        int st;
        while (waitpid(c, &st, 0) < 0 && errno == EINTR)
            ;
        if (atomic_load(&stop_flag))
            return NULL;
    }
}

static int vfork_mode(long seconds)
{
    vfork_seconds = seconds;
    pthread_t t, tw;
    start(&tw, "stdin", stdin_watch, NULL);
    start(&t, "vforker", vforker, NULL);
    while (!atomic_load(&stop_flag))
        sleep_ms(20);
    return 0;
}

/* ---- suicide ------------------------------------------------------------ */

static long sentinel_poll_us = 200;

static void *sentinel(void *arg)
{
    (void)arg;
    char buf[4096];
    for (;;) {
        DIR *d = opendir("/proc/self/task");
        if (!d)
            _exit(4);
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char path[300];
            snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n <= 0)
                continue;
            buf[n] = 0;
            char *t = strstr(buf, "\nTracerPid:");
            if (t && atoi(t + 11) != 0)
                _exit(3); /* traced: end now, in the middle of it */
        }
        closedir(d);
        struct timespec ts = {sentinel_poll_us / 1000000, (sentinel_poll_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
}

static int suicide(void)
{
    pthread_t t, tw;
    start(&tw, "stdin", stdin_watch, NULL);
    start(&t, "sentinel", sentinel, NULL);
    say("ready\n");
    while (!atomic_load(&stop_flag))
        sleep_ms(20);
    return 0;
}

int main(int argc, char **argv)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
    if (argc >= 2 && !strcmp(argv[1], "compute"))
        return compute(argc >= 3 ? atol(argv[2]) : 0);
    if (argc == 2 && !strcmp(argv[1], "churn"))
        return churn();
    if (argc == 3 && !strcmp(argv[1], "vfork"))
        return vfork_mode(atol(argv[2]));
    if ((argc == 2 || argc == 3) && !strcmp(argv[1], "suicide")) {
        if (argc == 3)
            sentinel_poll_us = atol(argv[2]);
        return suicide();
    }
    fprintf(stderr, "usage: hostile_target compute [ROUNDS] | churn | vfork SECONDS | suicide [POLL_US]\n");
    return 64;
}
