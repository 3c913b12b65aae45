/*
 * The watch's output signal (watch.h, HDX_WATCH_OUTPUT) on real processes: this program plays
 * hangdx run, its children the job. What each process of the job writes, anywhere, is
 * progress (/proc/PID/io wchar); what the shim writes into the trace files is not, nor are
 * the bytes a parent takes on when it reaps its children (wait(2) adds their wchar to its
 * own), nor what run's helper writes.
 *
 * Each case forks a job that runs for RUN_S seconds while the watch ticks every TICK_US, and
 * checks whether any tick after the baseline saw output.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "hangdx/trace.h"
#include "gather/watch.h"

#define RUN_S 2.5
#define TICK_US 200000

static char trace_dir[64];

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the shim does for one line: open this process's trace file, one write, close. */
static void trace_wait_line(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/host-%d%s", trace_dir, (int)getpid(), HDX_TRACE_SUFFIX);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    static const char line[] = "{\"type\":\"" HDX_EV_WAIT "\",\"t\":1.0,\"tid\":1,\"kind\":\"build_lock\","
                               "\"path\":\"/tmp/x/lock\",\"padding\":\"....................\"}\n";
    ssize_t w = write(fd, line, sizeof line - 1);
    (void)w;
    close(fd);
}

static void write_devnull(size_t n)
{
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    char buf[64] = {0};
    ssize_t w = write(fd, buf, n < sizeof buf ? n : sizeof buf);
    (void)w;
    close(fd);
}

enum job {
    SILENT,        /* sleeps */
    PRINTS,        /* writes 5 bytes to /dev/null every 100 ms */
    WAIT_LINES,    /* writes a shim "wait" line every 20 ms, nothing else */
    CHILD_LINES,   /* forks children that write trace lines only, and reaps them: some live
                      across ticks (seen), some are born and reaped between two (never seen) */
    CHILD_PRINTS,  /* the same, each child also writing 16 bytes to /dev/null */
};

static void child_work(int prints)
{
    trace_wait_line();
    if (prints)
        write_devnull(16);
    trace_wait_line();
}

static void job_main(enum job kind)
{
    double end = mono() + RUN_S + 0.5;
    int n = 0;
    while (mono() < end) {
        switch (kind) {
        case SILENT:
            usleep(100000);
            break;
        case PRINTS:
            write_devnull(5);
            usleep(100000);
            break;
        case WAIT_LINES:
            trace_wait_line();
            usleep(20000);
            break;
        case CHILD_LINES:
        case CHILD_PRINTS: {
            pid_t c = fork();
            if (c == 0) {
                child_work(kind == CHILD_PRINTS);
                if (n % 2) /* lives across a tick after its writes: seen, its bytes counted there */
                    usleep(3 * TICK_US / 2);
                _exit(0);
            }
            n++;
            waitpid(c, NULL, 0);
            usleep(kind == CHILD_PRINTS ? 150000 : 20000);
            break;
        }
        }
    }
    _exit(0);
}

/* Run a job of kind (and, when helper_prints, a helper that prints, passed as helper): how
 * many ticks after the baseline saw output, and whether one saw a trace event. */
static int output_ticks(enum job kind, int helper_prints, int *trace_seen)
{
    pid_t job = fork();
    if (job == 0)
        job_main(kind);
    pid_t helper = 0;
    if (helper_prints && (helper = fork()) == 0)
        job_main(PRINTS);
    hdx_watch *w = hdx_watch_new(trace_dir, helper, 1.0, 0.05);
    CHECK(w != NULL);
    int ticks = 0;
    *trace_seen = 0;
    double end = mono() + RUN_S;
    for (int i = 0; mono() < end; i++) {
        int k = hdx_watch_tick(w, mono());
        if (i > 0 && (k & HDX_WATCH_OUTPUT))
            ticks++;
        if (i > 0 && (k & HDX_WATCH_TRACE))
            *trace_seen = 1;
        usleep(TICK_US);
    }
    if (helper) {
        int *pids = NULL;
        size_t n = 0;
        CHECK(hdx_watch_job_pids(helper, &pids, &n) == 0);
        for (size_t i = 0; i < n; i++)
            CHECK(pids[i] != helper);
        free(pids);
    }
    hdx_watch_free(w);
    kill(job, SIGKILL);
    waitpid(job, NULL, 0);
    if (helper) {
        kill(helper, SIGKILL);
        waitpid(helper, NULL, 0);
    }
    return ticks;
}

int main(void)
{
    snprintf(trace_dir, sizeof trace_dir, "/tmp/hdx-test-output-XXXXXX");
    if (!mkdtemp(trace_dir)) {
        perror("mkdtemp");
        return 1;
    }
    int trace;
    int n = output_ticks(SILENT, 0, &trace);
    printf("silent job: %d ticks with output\n", n);
    CHECK(n == 0);
    n = output_ticks(PRINTS, 0, &trace);
    printf("job writing 5 bytes every 100 ms: %d ticks with output\n", n);
    CHECK(n >= 8);
    n = output_ticks(WAIT_LINES, 0, &trace);
    printf("job writing only shim wait lines: %d ticks with output\n", n);
    CHECK(n == 0);
    CHECK(!trace);
    n = output_ticks(CHILD_LINES, 0, &trace);
    printf("job reaping children that write only trace lines: %d ticks with output\n", n);
    CHECK(n == 0);
    n = output_ticks(CHILD_PRINTS, 0, &trace);
    printf("job reaping children that write 16 bytes each: %d ticks with output\n", n);
    CHECK(n >= 3);
    n = output_ticks(SILENT, 1, &trace);
    printf("silent job beside a helper that prints: %d ticks with output\n", n);
    CHECK(n == 0);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", trace_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", trace_dir);
    return failures ? 1 : 0;
}
