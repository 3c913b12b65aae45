/*
 * A job whose threads all wait in system calls that a ptrace stop breaks with
 * EINTR (from /work/shared/findings/inspect-eintr.c): for the no-stop stack
 * test (test_nostop.py).
 *   eintr_target [busy]
 * One thread each, named as the call, blocked with a long timeout (1 hour)
 * in a function of its own (noinline, so that it is a frame of its own):
 *   "epoll"   wait_epoll:        epoll_wait(2) on a pipe that never fills
 *   "accept"  wait_accept:       accept(2) on a listening socket with SO_RCVTIMEO
 *   "recv"    wait_recv:         recv(2) on a socketpair with SO_RCVTIMEO
 *   "sigtw"   wait_sigtimedwait: sigtimedwait(2) for a SIGUSR2 nobody sends
 *   "semop"   wait_semop:        semtimedop(2) on a System V semaphore at 0
 * A call that returns is counted (EINTR or not) and made again. No signal
 * handler is installed: an EINTR can only come from a ptrace stop. With "busy",
 * one more thread ("busy") spins in spin_busy() and never waits.
 * The main thread prints "ready TID..." (the waiting threads, in the order
 * above) once every thread is in its call, then waits in wait_stdin() (read(2)
 * of stdin, which a stop does not break: it restarts). At "count" it prints
 * "NAME calls=N eintr=E" per call and "total eintr=E" and goes on waiting; at
 * EOF or "stop" it prints the same and exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define LONG_S 3600
#define N_WAIT 5

static const char *names[N_WAIT] = {"epoll", "accept", "recv", "sigtw", "semop"};
static atomic_long calls[N_WAIT], eintrs[N_WAIT];
static atomic_int tids[N_WAIT];
static int pfd[2], sv[2], lsock, semid;

static void count(int i, long r)
{
    atomic_fetch_add(&calls[i], 1);
    if (r < 0 && errno == EINTR)
        atomic_fetch_add(&eintrs[i], 1);
}

__attribute__((noinline)) void wait_epoll(int ep)
{
    struct epoll_event ev;
    long r = epoll_wait(ep, &ev, 1, LONG_S * 1000);
    count(0, r);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void wait_accept(void)
{
    long r = accept(lsock, NULL, NULL);
    count(1, r);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void wait_recv(void)
{
    char c;
    long r = recv(sv[0], &c, 1, 0);
    count(2, r);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void wait_sigtimedwait(const sigset_t *set)
{
    struct timespec ts = {LONG_S, 0};
    long r = sigtimedwait(set, NULL, &ts);
    count(3, r);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void wait_semop(void)
{
    struct sembuf b = {0, -1, 0};
    struct timespec ts = {LONG_S, 0};
    long r = semtimedop(semid, &b, 1, &ts);
    count(4, r);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void spin_busy(void)
{
    for (volatile unsigned long k = 0;; k++)
        ;
}

static void *thread_main(void *arg)
{
    int i = (int)(long)arg;
    atomic_store(&tids[i], (int)syscall(SYS_gettid));
    struct timeval tv = {LONG_S, 0};
    if (i == 0) {
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN};
        epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev);
        for (;;)
            wait_epoll(ep);
    } else if (i == 1) {
        setsockopt(lsock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (;;)
            wait_accept();
    } else if (i == 2) {
        setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (;;)
            wait_recv();
    } else if (i == 3) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGUSR2);
        for (;;)
            wait_sigtimedwait(&s);
    } else {
        for (;;)
            wait_semop();
    }
    return NULL;
}

static void *busy_main(void *arg)
{
    (void)arg;
    spin_busy();
    return NULL;
}

/* The syscall number thread tid is blocked in, -1 running or unknown. */
static long in_syscall(int tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long nr = -1;
    if (!fgets(buf, sizeof buf, f) || sscanf(buf, "%ld", &nr) != 1)
        nr = -1;
    fclose(f);
    return nr;
}

/* One "NAME calls=N eintr=E" line per call, then main's and the total. */
static void print_counts(long main_eintr)
{
    long total = main_eintr;
    for (int i = 0; i < N_WAIT; i++) {
        printf("%s calls=%ld eintr=%ld\n", names[i], atomic_load(&calls[i]), atomic_load(&eintrs[i]));
        total += atomic_load(&eintrs[i]);
    }
    printf("main eintr=%ld\n", main_eintr);
    printf("total eintr=%ld\n", total);
    fflush(stdout);
}

__attribute__((noinline)) long wait_stdin(char *buf, size_t n)
{
    long r = read(0, buf, n);
    __asm__ volatile("" ::: "memory");
    return r;
}

int main(int argc, char **argv)
{
    int busy = argc > 1 && strcmp(argv[1], "busy") == 0;
    /* SIGUSR2 blocked in every thread, so that sigtimedwait waits for it */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    if (pipe(pfd) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return 1;
    lsock = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (lsock < 0 || bind(lsock, (void *)&sa, sizeof sa) < 0 || listen(lsock, 1) < 0)
        return 1;
    semid = semget(IPC_PRIVATE, 1, 0600);
    if (semid < 0)
        return 1;
    static const long want[N_WAIT] = {SYS_epoll_wait, SYS_accept, SYS_recvfrom, SYS_rt_sigtimedwait,
                                      SYS_semtimedop};
    for (long i = 0; i < N_WAIT; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, thread_main, (void *)i) != 0)
            return 1;
        pthread_setname_np(t, names[i]);
    }
    if (busy) {
        pthread_t t;
        if (pthread_create(&t, NULL, busy_main, NULL) != 0)
            return 1;
        pthread_setname_np(t, "busy");
    }
    /* every thread in its call (epoll_wait may be epoll_pwait in a newer libc) */
    for (int k = 0; k < 1000; k++) {
        int in = 0;
        for (int i = 0; i < N_WAIT; i++) {
            int tid = atomic_load(&tids[i]);
            long nr = tid ? in_syscall(tid) : -1;
            in += nr == want[i] || (i == 0 && (nr == SYS_epoll_pwait || nr == SYS_epoll_pwait2));
        }
        if (in == N_WAIT)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    printf("ready");
    for (int i = 0; i < N_WAIT; i++)
        printf(" %d", atomic_load(&tids[i]));
    printf("\n");
    fflush(stdout);
    char buf[64];
    long main_eintr = 0;
    for (;;) {
        long n = wait_stdin(buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            main_eintr++;
            continue;
        }
        int counting = n > 0 && memmem(buf, (size_t)n, "count", 5);
        if (!counting && n > 0 && !memmem(buf, (size_t)n, "stop", 4))
            continue;
        print_counts(main_eintr);
        if (!counting)
            break;
    }
    semctl(semid, 0, IPC_RMID);
    return 0;
}
