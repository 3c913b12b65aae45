/*
 * A process with threads parked in known places, for the live tests.
 *   live_target LOCKFILE
 * - forks a child that takes flock(LOCK_EX) on LOCKFILE and sleeps;
 * - thread "sleeper": nanosleep loop inside park_in_sleep();
 * - thread "locker": blocked in flock(LOCK_EX) on LOCKFILE;
 * - thread "busy": spins in the C++ function hdx_test::Spinner::spin(long);
 * - main thread: echoes every byte from stdin to stdout.
 * Prints "ready CHILDPID\n" once everything is in place.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

long hdx_test_spin(long n); /* target_cxx.cpp */

static const char *lock_path;

__attribute__((noinline)) void park_in_sleep(void)
{
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        __asm__ volatile("" ::: "memory");
    }
}

static void *sleeper(void *arg)
{
    (void)arg;
    park_in_sleep();
    return NULL;
}

static void *locker(void *arg)
{
    (void)arg;
    int fd = open(lock_path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX) < 0)
        abort();
    for (;;)
        pause(); /* got it: the holder died */
    return NULL;
}

static void *busy(void *arg)
{
    (void)arg;
    for (;;)
        hdx_test_spin(1000000);
    return NULL;
}

static void start(const char *name, void *(*fn)(void *))
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, NULL) != 0)
        abort();
    pthread_setname_np(t, name);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 64;
    lock_path = argv[1];
    int pfd[2];
    if (pipe(pfd) < 0)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || flock(fd, LOCK_EX) < 0)
            _exit(1);
        if (write(pfd[1], "L", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char c;
    if (read(pfd[0], &c, 1) != 1)
        return 1;
    start("sleeper", sleeper);
    start("locker", locker);
    start("busy", busy);
    printf("ready %d\n", (int)child);
    fflush(stdout);
    for (;;) {
        ssize_t n = read(0, &c, 1);
        if (n == 0)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || write(1, &c, 1) != 1)
            break;
    }
    kill(child, SIGKILL);
    return 0;
}
