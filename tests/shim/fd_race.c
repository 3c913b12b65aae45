// The shim's fd race (was /work/shared/findings/shim-fd-race.c; fd_test.py race runs it 100
// times under the shim). Usage: fd_race ITERS DIR; prints one line of counts, all 0 / "yes" / "no"
// when nothing took the program's lowest free number or wrote into its log.
// Thread A: blocking flock on a lock a helper process keeps taking (so A has to wait each time:
// the shim records lock_start/lock_end, each opening+closing the trace file). flock allocates no fd.
// Thread B (main): relies on POSIX "lowest free fd": open("/dev/null") must return LOW; dup2(logfd, LOW) then write.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <errno.h>
static volatile int stop;
static int lockfd;
static long waits;
static int fds[65];
static void *locker(void *a) {
    (void)a;
    while (!stop) { flock(lockfd, LOCK_EX); flock(lockfd, LOCK_UN); waits++; }
    return NULL;
}
int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 200000;
    const char *dir = argc > 2 ? argv[2] : ".";
    char p[512], logp[512];
    snprintf(p, sizeof p, "%s/race2.lock", dir);
    snprintf(logp, sizeof logp, "%s/blog2.txt", dir);
    close(open(p, O_CREAT | O_RDWR, 0644));
    pid_t helper = fork();
    if (helper == 0 && getenv("NOHELPER")) _exit(0);
    if (helper == 0) {
        int h = open(p, O_RDWR);
        for (;;) { flock(h, LOCK_EX); for (volatile int i = 0; i < 2000; i++); flock(h, LOCK_UN); sched_yield(); }
    }
    // fill the shim's 64-slot lock-count table: a 65th path is then always recorded in full
    for (int i = 0; i < 65; i++) { char q[600]; snprintf(q, sizeof q, "%s/c%d.lock", dir, i); fds[i] = open(q, O_CREAT|O_RDWR, 0644); flock(fds[i], LOCK_EX); flock(fds[i], LOCK_UN); }
    lockfd = fds[64];
    int logfd = open(logp, O_CREAT | O_RDWR | O_TRUNC, 0644);
    int low = open("/dev/null", O_RDONLY); close(low);
    pthread_t t; pthread_create(&t, NULL, locker, NULL);
    long wrongfd = 0, dupfail = 0, writefail = 0;
    for (int i = 0; i < iters; i++) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd != low) wrongfd++;
        close(fd);
        if (dup2(logfd, low) != low) dupfail++;
        if (write(low, "B\n", 2) != 2) writefail++;
        close(low);
    }
    stop = 1; pthread_join(t, NULL);
    kill(helper, SIGKILL); waitpid(helper, NULL, 0);
    off_t sz = lseek(logfd, 0, SEEK_END);
    char *buf = malloc(sz + 1); pread(logfd, buf, sz, 0); buf[sz] = 0;
    long bad = 0; for (off_t i = 0; i + 1 < sz; i += 2) if (buf[i] != 'B' || buf[i+1] != '\n') { bad++; }
    printf("iters=%d wrong_lowest_fd=%ld dup2_fail=%ld write_fail=%ld log_ok=%s foreign_bytes_in_log=%s\n",
           iters, wrongfd, dupfail, writefail, sz == (off_t)iters * 2 ? "yes" : "NO", bad ? "YES" : "no");
    fprintf(stderr, "(A flock cycles: %ld, log size %ld)\n", waits, (long)sz);
    if (bad) { char *j = strstr(buf, "{\""); if (j) printf("foreign: %.160s\n", j); }
    return 0;
}
