/* hdx_syswatch on a real Python polling a FileBaton-style lock with
 * os.path.exists + time.sleep, and the native stack of that Python. */
#include <sys/stat.h>

#include "live_util.h"
#include "gather/proc.h"
#include "native/stacks.h"
#include "gather/syswatch.h"

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
    (void)sig;
    hdx_stacks_emergency_detach();
    got_term = 1;
}

static const char script[] =
    "import os, sys, time\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "while True:\n"
    "    os.path.exists('build/lock')\n"
    "    time.sleep(0.1)\n"
    "    sys.stdout.write('.'); sys.stdout.flush()\n";

int main(int argc, char **argv)
{
    const char *py = argc > 1 ? argv[1] : "/usr/bin/python3";
    if (access(py, X_OK) != 0) {
        fprintf(stderr, "skip: %s is not installed\n", py);
        return 77;
    }
    char dir[] = "/tmp/hdx-live-syswatch-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char real[4096];
    if (!realpath(dir, real))
        return 1;
    char *want = hdx_asprintf("%s/build/lock", real);
    char *pargv[] = {(char *)py, "-c", (char *)script, NULL};
    char *penv[] = {"PATH=/usr/bin:/bin", "RANK=0", NULL};
    struct live_proc lp;
    if (live_spawn(&lp, pargv, penv, dir) < 0)
        return 1;
    char line[64];
    if (live_read_line(lp.out, line, sizeof line, 20000) < 0) {
        fprintf(stderr, "FAIL: python did not start\n");
        live_kill(&lp);
        return 1;
    }
    hdx_sleep_ms(150);

    /* --- the watch --- */
    hdx_syswatch_hit *hits = NULL;
    size_t n = 0;
    int64_t t0 = hdx_mono_ns();
    int r = hdx_syswatch(lp.pid, lp.pid, 500, &hits, &n);
    double took = (double)(hdx_mono_ns() - t0) / 1e6;
    CHECK(r == 0, "hdx_syswatch = %d", r);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "watched path: %s (use %d)\n", hits[i].path, hits[i].use);
        found |= strcmp(hits[i].path, want) == 0 && hits[i].use == HDX_WATCH_STAT;
    }
    hdx_syswatch_free(hits, n);
    fprintf(stderr, "watch took %.1f ms, %zu path(s)\n", took, n);
    CHECK(found, "%s among the watched paths", want);
    CHECK(took < 400, "the watch ends after one poll round (0.1 s sleeps), not at its 500 ms bound: %.1f ms", took);
    CHECK(live_untraced(lp.pid) == 0, "python untraced and not stopped after the watch");
    live_drain(lp.out, 0);
    CHECK(live_drain(lp.out, 3000) > 0, "python keeps looping after the watch");

    /* a signal to hangdx in the middle of a watch: the handler's emergency
     * detach lets the thread go while the watcher itself lives on */
    pid_t w = fork();
    if (w == 0) {
        struct sigaction sa = {0};
        sa.sa_handler = on_term;
        sigaction(SIGTERM, &sa, NULL);
        /* each watch ends after one 0.1 s poll round: watch again and again */
        while (!got_term) {
            hdx_syswatch_hit *wh = NULL;
            size_t wn = 0;
            hdx_syswatch(lp.pid, lp.pid, 5000, &wh, &wn);
            hdx_syswatch_free(wh, wn);
        }
        int ok = got_term && live_untraced(lp.pid) == 0;
        hdx_sleep_ms(300); /* still alive, still not tracing */
        ok = ok && live_untraced(lp.pid) == 0;
        _exit(ok ? 0 : 1);
    }
    hdx_sleep_ms(300);
    kill(w, SIGTERM);
    int wst;
    waitpid(w, &wst, 0);
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "emergency detach (status %d)", wst);
    CHECK(live_untraced(lp.pid) == 0, "python untraced after the emergency detach");
    live_drain(lp.out, 0);
    CHECK(live_drain(lp.out, 3000) > 0, "python keeps looping after the emergency detach");

    /* a watch of a thread that does not exist */
    r = hdx_syswatch(lp.pid, 0x3ffffff0, 100, &hits, &n);
    CHECK(r == -ESRCH && n == 0, "missing thread: %d", r);

    /* --- the native stack of the same Python --- */
    hdx_evidence *ev = hdx_evidence_new();
    hdx_process *p = hdx_evidence_add_process(ev);
    CHECK(hdx_proc_read(p, lp.pid) == 0, "read python");
    /* sample until the main thread is caught sleeping (it is, ~all the time) */
    const hdx_thread *mt = NULL;
    for (int k = 0; k < 20; k++) {
        CHECK(hdx_stacks_sample(p, ev, 1000) == 0, "stacks of python");
        mt = &p->threads[0];
        if (live_frame(mt, "time_sleep") || live_frame(mt, "clock_nanosleep") ||
            live_frame(mt, "__GI___clock_nanosleep"))
            break;
    }
    live_print_stack(mt);
    char dbg[256];
    snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id");
    int has_time_sleep = live_frame(mt, "time_sleep") != NULL;
    fprintf(stderr, "python debug symbols: %s\n",
            has_time_sleep ? "used (time_sleep resolved; /usr/lib/debug, package python3.11-dbg)"
                           : "absent (only exported names resolved)");
    CHECK(has_time_sleep || live_frame(mt, "clock_nanosleep") ||
              live_frame(mt, "__GI___clock_nanosleep"),
          "time_sleep or clock_nanosleep");
    CHECK(live_frame(mt, "_PyEval_EvalFrameDefault"), "_PyEval_EvalFrameDefault");
    fprintf(stderr, "stopped_us over the samples: %lld\n", (long long)p->stopped_us);
    CHECK(live_untraced(lp.pid) == 0, "python untraced after the stacks");
    live_drain(lp.out, 0);
    CHECK(live_drain(lp.out, 3000) > 0, "python keeps looping after the stacks");

    /* --- how long a sleep has left: the looping Python sleeps 0.1 s at a time, a
     * time.sleep(100) has about 100 s left, coreutils' relative sleep is unknown --- */
    int64_t left = -2;
    for (int k = 0; k < 50 && left < 0; k++) { /* caught in its sleep, not in a write */
        left = hdx_sleep_left_ns(lp.pid, lp.pid);
        hdx_sleep_ms(20);
    }
    fprintf(stderr, "time.sleep(0.1) loop: %.1f ms left\n", (double)left / 1e6);
    CHECK(left >= 0 && left <= 100000000, "a 0.1 s sleep has 0..100 ms left: %lld ns", (long long)left);
    char *sargv[] = {(char *)py, "-c", "import sys, time; print('ready', flush=True); time.sleep(100)", NULL};
    char *rargv[] = {"/bin/sleep", "100", NULL};
    struct live_proc sp, rp;
    CHECK(live_spawn(&sp, sargv, penv, dir) == 0 && live_read_line(sp.out, line, sizeof line, 20000) >= 0,
          "the sleeping python started");
    CHECK(live_spawn(&rp, rargv, penv, dir) == 0, "sleep 100 started");
    hdx_sleep_ms(300);
    left = hdx_sleep_left_ns(sp.pid, sp.pid);
    fprintf(stderr, "time.sleep(100): %.3f s left\n", (double)left / 1e9);
    CHECK(left > 90000000000LL && left <= 100000000000LL, "time.sleep(100) has 90..100 s left: %lld ns",
          (long long)left);
    left = hdx_sleep_left_ns(rp.pid, rp.pid);
    CHECK(left == -1, "a relative sleep (coreutils sleep) has no deadline: %lld", (long long)left);
    live_kill(&sp);
    live_kill(&rp);

    hdx_evidence_free(ev);
    live_kill(&lp);
    rmdir(dir);
    free(want);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        fprintf(stderr, "ok\n");
    hdx_stacks_forget();
    return failures ? 1 : 0;
}
