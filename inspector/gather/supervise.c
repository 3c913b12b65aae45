/*
 * hdx_supervise (supervise.h): the job started, its signals passed on once, its progress
 * watched, and, when the caller says so, the job ended. Moved here from `hangdx run`, whose
 * command-line pieces stay in cmd/cmd_run.c.
 */
#include "gather/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gather/proc.h"
#include "gather/watch.h"
#include "hangdx/trace.h"
#include "model/procstat.h"
#include "model/util.h"
#include "native/stacks.h"

#define TICK_S 1.0        /* between two looks at the job */
#define SHIM_CHECK_S 30   /* how long into the job check_shim looks, every second */
#define CPU_WINDOW_S 3.0  /* CPU growth is summed over this long (or the hang timeout when shorter) */
#define CPU_SHARE 0.05    /* of one core: what a hung job's pollers stay well below */

static FILE *say_to; /* hdx_supervise_options.say */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* What the supervisor does to the job, for the person (o->say). */
static void say(const char *fmt, ...)
{
    if (!say_to)
        return;
    va_list ap;
    va_start(ap, fmt);
    hdx_vsay(say_to, fmt, ap); /* the command's name and a process's are the job's text */
    va_end(ap);
}

int hdx_supervise_preload(const char *shim, const char *trace_dir)
{
    const char *old = getenv("LD_PRELOAD");
    size_t n = strlen(shim) + (old ? strlen(old) : 0) + 2;
    char *v = malloc(n);
    if (!v)
        return -ENOMEM;
    if (old && *old)
        snprintf(v, n, "%s:%s", shim, old);
    else
        snprintf(v, n, "%s", shim);
    int rc = setenv("LD_PRELOAD", v, 1) || setenv(HDX_TRACE_DIR_ENV, trace_dir, 1) ? -errno : 0;
    free(v);
    return rc;
}

/* ------------------------------------------------------------ signals */

/*
 * SIGINT, SIGTERM and SIGHUP reach the job once. The job stays in hangdx's
 * process group (so a terminal, a shell's job control and a launcher's
 * `kill -- -PGID` see it where they put hangdx), and a signal that the kernel
 * delivered to that group has reached the job already: hangdx must not pass it
 * on. A signal sent to hangdx alone (kill PID, a launcher's terminate) must be.
 * Nothing in siginfo tells the two apart (both are SI_USER from the same
 * sender), so a witness does: a child of hangdx's, in its process group, that
 * holds these signals blocked and reads them from a signalfd. Every one that
 * hangdx gets goes to the witness (a write from the handler); the witness
 * passes it on to the job only when it did not get the same signal, from the
 * same sender, itself (a group signal) within WITNESS_WAIT_MS. A signal sent
 * to one thread (tgkill) or queued (sigqueue) has one target: at once. The
 * witness dies with hangdx (PR_SET_PDEATHSIG) and holds none of its fds but
 * its own; it is no part of the job (never watched, captured or killed).
 */
#define WITNESS_WAIT_MS 50 /* a group kill queues on every member within microseconds */
#define WITNESS_KEEP_NS 1000000000LL /* a signal the witness got, kept to match hangdx's */
#define WITNESS_SLOTS 32

static const int relayed[] = {SIGINT, SIGTERM, SIGHUP};
#define N_RELAYED (sizeof relayed / sizeof relayed[0])

/* A signal as hangdx (or the witness) got it. */
struct relay {
    int sig, code, pid, pad;
    long long t_ns; /* CLOCK_MONOTONIC */
};

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t witness_fd = -1; /* hangdx's end of the pipe to the witness */
static pid_t witness_pid;                     /* 0: none */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Tell the witness; without one, pass the signal on unless a terminal sent it (the job, in our
 * foreground process group, has it already). */
static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    struct relay r = {sig, si ? si->si_code : SI_USER, si ? si->si_pid : 0, 0, now_ns()};
    int fd = witness_fd;
    if ((fd < 0 || write(fd, &r, sizeof r) != (ssize_t)sizeof r) && child_pid > 0 && r.code != SI_KERNEL)
        kill(child_pid, sig);
    errno = saved;
}

static void witness_pass(int pidfd, pid_t job, int sig)
{
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
        return;
    if (pidfd >= 0 && errno == ESRCH)
        return; /* the job is gone (reaped: its pid may be another process's now) */
#endif
    (void)pidfd;
    kill(job, sig);
}

/* Close every fd but keep[0..n) (ascending). */
static void close_all_but(const int *keep, size_t n)
{
    unsigned lo = 0;
    for (size_t i = 0; i <= n; i++) {
        unsigned hi = i < n ? (unsigned)keep[i] : ~0U;
        if (hi > lo) {
#ifdef SYS_close_range
            if (syscall(SYS_close_range, lo, hi - 1, 0) == 0) {
                lo = hi + 1;
                continue;
            }
#endif
            for (unsigned fd = lo; fd < hi && fd < 4096; fd++)
                close((int)fd);
        }
        lo = hi + 1;
    }
}

/*
 * Blank this process's copy of the environment block that it was exec'd with (proc(5): fields
 * 50 and 51 of /proc/self/stat, env_start and env_end; /proc/PID/environ reads those bytes of
 * its memory). The witness is a fork of hangdx, whose environment carries the job's rank
 * variables when a launcher set them: a capture that takes the sibling ranks under a rank's
 * parent, or `inspect --all`, would take the witness for a rank.
 */
static void blank_environ_block(void)
{
    hdx_stat st; /* hdx_stat_read allocates nothing: fit for this fork */
    if (hdx_stat_read("/proc/self/stat", &st) < 0)
        return;
    unsigned long long start = st.f[50], end = st.f[51];
    if (start && end > start && end - start < (64u << 20))
        memset((void *)(uintptr_t)start, 0, (size_t)(end - start));
}

/* The witness's life: never returns. rd: the pipe from hangdx; pidfd: the job's (or -1). */
static void witness_main(int rd, int pidfd, pid_t job, pid_t hangdx)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != hangdx)
        _exit(0);
    prctl(PR_SET_NAME, "hangdx-witness", 0, 0, 0);
    blank_environ_block();
    /* Ctrl-Z and Ctrl-\ are hangdx's and the job's business; it never writes anywhere. */
    static const int ign[] = {SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE};
    for (size_t i = 0; i < sizeof ign / sizeof ign[0]; i++)
        signal(ign[i], SIG_IGN);
    signal(SIGCHLD, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < N_RELAYED; i++)
        sigaddset(&set, relayed[i]);
    sigprocmask(SIG_BLOCK, &set, NULL); /* blocked since before the fork already */
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    int keep[3] = {rd, pidfd, sfd}, nk = 0;
    for (int i = 0; i < 3; i++)
        if (keep[i] >= 0)
            keep[nk++] = keep[i];
    for (int i = 1; i < nk; i++) /* ascending */
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    close_all_but(keep, (size_t)nk);
    fcntl(rd, F_SETFL, O_NONBLOCK); /* reads drain the pipe, then the signalfd is looked at */

    struct relay asked[WITNESS_SLOTS], seen[WITNESS_SLOTS];
    size_t na = 0, ns = 0;
    int open_rd = 1;
    while (open_rd || na) {
        long long now = now_ns(), next = -1;
        for (size_t i = 0; i < na; i++) {
            long long d = asked[i].t_ns + WITNESS_WAIT_MS * 1000000LL;
            if (next < 0 || d < next)
                next = d;
        }
        int timeout = next < 0 ? -1 : next <= now ? 0 : (int)((next - now) / 1000000LL) + 1;
        struct pollfd pf[2] = {{.fd = open_rd ? rd : -1, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(pf, 2, timeout) < 0 && errno != EINTR)
            _exit(1);
        /* What hangdx got, then what we got: a group signal queued on us before hangdx's
         * handler could tell us of it, so it is in the signalfd when we look there after. */
        while (open_rd && na < WITNESS_SLOTS) {
            ssize_t n = read(rd, &asked[na], sizeof asked[na]);
            if (n == (ssize_t)sizeof asked[na])
                na++;
            else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                open_rd = 0; /* hangdx is done (or gone) */
            else if (n < 0 && errno == EINTR)
                continue;
            else
                break;
        }
        struct signalfd_siginfo fi;
        now = now_ns();
        while (sfd >= 0 && read(sfd, &fi, sizeof fi) == (ssize_t)sizeof fi) {
            if (ns == WITNESS_SLOTS)
                memmove(seen, seen + 1, --ns * sizeof *seen);
            seen[ns++] = (struct relay){(int)fi.ssi_signo, fi.ssi_code, (int)fi.ssi_pid, 0, now};
        }
        size_t k = 0;
        for (size_t i = 0; i < na; i++) {
            struct relay *a = &asked[i];
            int mine_only = a->code == SI_TKILL || a->code == SI_QUEUE, matched = 0;
            for (size_t j = 0; !mine_only && j < ns && !matched; j++)
                if (seen[j].sig == a->sig && seen[j].code == a->code && seen[j].pid == a->pid &&
                    seen[j].t_ns >= a->t_ns - WITNESS_KEEP_NS) {
                    memmove(seen + j, seen + j + 1, (--ns - j) * sizeof *seen);
                    matched = 1; /* the group got it: the job has it from the kernel */
                }
            if (matched)
                continue;
            if (mine_only || now >= a->t_ns + WITNESS_WAIT_MS * 1000000LL || sfd < 0)
                witness_pass(pidfd, job, a->sig);
            else
                asked[k++] = *a; /* not yet: the group kill may still be queuing */
        }
        na = k;
        k = 0;
        for (size_t j = 0; j < ns; j++)
            if (seen[j].t_ns >= now - WITNESS_KEEP_NS)
                seen[k++] = seen[j];
        ns = k;
    }
    _exit(0);
}

/* Start the witness of the job pid (see above); with signals blocked. Without one (fork failed),
 * the handler passes signals on itself, as before. */
static void start_witness(pid_t job)
{
    int p[2], pidfd = -1;
#ifdef SYS_pidfd_open
    pidfd = (int)syscall(SYS_pidfd_open, job, 0);
#endif
    if (pipe2(p, O_CLOEXEC) != 0) {
        if (pidfd >= 0)
            close(pidfd);
        return;
    }
    pid_t me = getpid(), w = fork();
    if (w == 0)
        witness_main(p[0], pidfd, job, me);
    close(p[0]);
    if (pidfd >= 0)
        close(pidfd);
    if (w < 0) {
        close(p[1]);
        return;
    }
    fcntl(p[1], F_SETFL, O_NONBLOCK); /* the handler never blocks */
    witness_pid = w;
    witness_fd = p[1];
}

/* The job is over: the witness ends (end of its pipe) and is reaped. */
static void stop_witness(void)
{
    int fd = witness_fd;
    witness_fd = -1;
    if (fd >= 0)
        close(fd);
    if (witness_pid > 0)
        while (waitpid(witness_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    witness_pid = 0;
}

static void on_sigchld(int sig)
{
    (void)sig; /* only wakes ppoll */
}

/* The dispositions start_job changed, to restore in the job and afterwards. */
struct job_start {
    sigset_t saved;              /* the mask before */
    struct sigaction old[N_RELAYED], old_pipe, old_chld;
    int watch;                   /* SIGCHLD handled (the watch) */
};

/*
 * Fork and exec command with the job's signals blocked until the witness knows it: the job
 * gets hangdx's fds (stdout and stderr as they are, no pipe between) and signal dispositions as
 * they were. watch: also handle SIGCHLD (wakes the watch's ppoll). Returns the job's pid, or
 * -errno (fork failed); on return, the mask is js->saved with SIGCHLD added when watch.
 */
static pid_t start_job(char *const *command, int watch, struct job_start *js)
{
    struct sigaction sa = {0}, ign = {0}, chld = {0};
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    chld.sa_handler = on_sigchld;
    sigemptyset(&chld.sa_mask);
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < N_RELAYED; i++)
        sigaddset(&block, relayed[i]);
    if (watch)
        sigaddset(&block, SIGCHLD);
    /* No signal between fork and the handlers knowing the child. */
    sigprocmask(SIG_BLOCK, &block, &js->saved);
    js->watch = watch;
    for (size_t i = 0; i < N_RELAYED; i++)
        sigaction(relayed[i], &sa, &js->old[i]);
    if (watch)
        sigaction(SIGCHLD, &chld, &js->old_chld);
    /* A reader of hangdx's stderr that went away must not end hangdx (and so the watch). */
    sigaction(SIGPIPE, &ign, &js->old_pipe);

    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &js->saved, NULL);
        return -e;
    }
    if (pid == 0) {
        for (size_t i = 0; i < N_RELAYED; i++)
            sigaction(relayed[i], &js->old[i], NULL);
        if (watch)
            sigaction(SIGCHLD, &js->old_chld, NULL);
        sigaction(SIGPIPE, &js->old_pipe, NULL);
        signal(SIGQUIT, SIG_DFL);
        sigprocmask(SIG_SETMASK, &js->saved, NULL);
        execvp(command[0], command);
        int e = errno;
        say("hangdx run: cannot run %s: %s\n", command[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    start_witness(pid);
    child_pid = pid;
    sigset_t run = js->saved;
    if (watch)
        sigaddset(&run, SIGCHLD); /* only inside ppoll (no lost wake-up) */
    sigprocmask(SIG_SETMASK, &run, NULL);
    return pid;
}

/* The job, without a watch: waited for, its signals passed on. 0 or -errno (as hdx_supervise). */
/* Whether pid names the shim in its LD_PRELOAD but has not mapped it: ld.so could not open
 * the path in that process's root (a chroot or a container without hangdx's directory), and
 * said so only on the job's stderr. Only a process whose root is not hangdx's is asked: on
 * the host, a setuid or static program ignores LD_PRELOAD by design. */
static int shim_missing(int pid)
{
    char link[64], root[8];
    snprintf(link, sizeof link, "/proc/%d/root", pid);
    ssize_t n = readlink(link, root, sizeof root - 1);
    int other_root = n > 1 || (n == 1 && root[0] != '/');
    if (!other_root && hdx_proc_ns(pid, "mnt") == hdx_proc_ns(0, "mnt"))
        return 0;
    char *preload = hdx_proc_getenv(pid, "LD_PRELOAD");
    int named = preload && strstr(preload, "libhangdx-preload.so") != NULL;
    free(preload);
    if (!named)
        return 0;
    snprintf(link, sizeof link, "/proc/%d/maps", pid);
    char *maps = hdx_read_file(link, 64u << 20, NULL);
    int mapped = maps && strstr(maps, "libhangdx-preload.so") != NULL;
    free(maps);
    return maps && !mapped;
}

/* Say once when a process of the job runs without the shim it was given (shim_missing):
 * nothing it does is traced. Returns 1 once said. */
static int check_shim(void)
{
    int *pids = NULL;
    size_t n = 0;
    int said = 0;
    if (hdx_watch_job_pids(witness_pid, &pids, &n) == 0)
        for (size_t i = 0; i < n && !said; i++)
            if (shim_missing(pids[i])) {
                char path[64];
                snprintf(path, sizeof path, "/proc/%d/comm", pids[i]);
                char *comm = hdx_read_file(path, 64, NULL);
                if (comm)
                    comm[strcspn(comm, "\n")] = 0;
                say("hangdx run: the shim is not loaded in pid %d (%s), which runs in another root (a chroot or a "
                    "container): ld.so could not open its LD_PRELOAD path there (its message is on the job's "
                    "stderr), so nothing it does is traced; make hangdx's directory visible at the same path in "
                    "that root, or run the self-contained hangdx inside it (docs/containers.md)\n",
                    pids[i], comm ? comm : "?");
                free(comm);
                said = 1;
            }
    free(pids);
    return said;
}

static int run_child(const hdx_supervise_options *o, hdx_supervise_result *r)
{
    struct job_start js;
    pid_t pid = start_job(o->command, 0, &js);
    if (pid < 0)
        return (int)pid;
    r->pid = pid;
    /* The first SHIM_CHECK_S, every second: whether the job's processes loaded the shim (check_shim);
     * the job's end is seen within 0.1 s meanwhile. */
    for (int tick = 1, told = 0; tick <= SHIM_CHECK_S * 10 && !told; tick++) {
        pid_t w = waitpid(pid, &r->status, WNOHANG);
        if (w == pid)
            goto done;
        if (w < 0 && errno != EINTR)
            break; /* said below */
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (tick % 10 == 0)
            told = check_shim();
    }
    while (waitpid(pid, &r->status, 0) < 0) {
        if (errno != EINTR) {
            int e = errno;
            child_pid = 0;
            stop_witness();
            return -e;
        }
    }
done:
    child_pid = 0;
    stop_witness();
    return 0;
}

/* ------------------------------------------------------------ the watch */

/* Reap every child that ended (orphans adopted as subreaper too); the job's status into *status
 * when it is among them. 1 when the job ended. */
static int reap(pid_t job, int *status)
{
    int ended = 0, st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (p == job) {
            *status = st;
            ended = 1;
        }
    return ended;
}

/* Send sig once to every process of the job: to the job's process group when it is not ours, and
 * to each descendant of hangdx outside that group (ranks in sessions of their own, compilers in
 * groups of their own). Returns how many processes the job has. */
static size_t signal_job(pid_t job, int sig)
{
    int *pids = NULL;
    size_t n = 0;
    pid_t pg = getpgid(job);
    int group = pg > 0 && pg != getpgrp();
    if (group)
        kill(-pg, sig);
    if (hdx_watch_job_pids(witness_pid, &pids, &n) == 0)
        for (size_t i = 0; i < n; i++)
            if (!group || getpgid(pids[i]) != pg)
                kill(pids[i], sig);
    free(pids);
    return n;
}

/* Reap until nothing of the job is left or the monotonic time is past deadline. Returns how
 * many of its processes are left (1 when they cannot be listed). */
static size_t wait_job_gone(pid_t job, double deadline, int *status, int *ended)
{
    for (;;) {
        *ended |= reap(job, status);
        int *pids = NULL;
        size_t n = 0;
        int rc = hdx_watch_job_pids(witness_pid, &pids, &n);
        free(pids);
        if ((rc == 0 && n == 0) || now_s() >= deadline)
            return rc ? 1 : n;
        usleep(100 * 1000);
    }
}

/*
 * End the job as a Ctrl-C would, so that its finally blocks and exit handlers run (a FileBaton
 * removes its lock): SIGINT; SIGTERM grace[0] s later; SIGKILL grace[1] s after that, until
 * nothing of it is left. Each step comes only while something of the job is left.
 */
static void end_job(pid_t job, const double grace[2], int *status, int *ended)
{
    static const int steps[] = {SIGINT, SIGTERM};
    static const char *const names[] = {"SIGINT", "SIGTERM", "SIGKILL"};
    say("hangdx: ending the job: SIGINT, SIGTERM %.0f s later, SIGKILL %.0f s after that\n", grace[0],
        grace[1]);
    size_t n = 1;
    for (size_t i = 0; i < 3 && n > 0; i++) {
        if (i > 0)
            say("hangdx: %zu process%s of the job left %.0f s after %s; %s\n", n, n == 1 ? "" : "es",
                grace[i - 1], names[i - 1], names[i]);
        if (i < 2) {
            signal_job(job, steps[i]);
            n = wait_job_gone(job, now_s() + grace[i], status, ended);
            continue;
        }
        /* SIGKILL until nothing is left: a process may fork between the listing and its kill. */
        for (int pass = 0; pass < 100 && n > 0; pass++) {
            n = signal_job(job, SIGKILL);
            usleep(50 * 1000);
            *ended |= reap(job, status);
        }
    }
    *ended |= reap(job, status);
}

/* The job, watched (see supervise.h). 0 or -errno (as hdx_supervise). */
static int watch_child(const hdx_supervise_options *o, hdx_supervise_result *r)
{
    /* Orphans of the job (a launcher killed, ranks in new sessions) stay under us: watched,
     * captured, ended and reaped here. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    struct job_start js;
    pid_t pid = start_job(o->command, 1, &js);
    if (pid < 0)
        return (int)pid;
    r->pid = pid;
    sigset_t waitmask = js.saved; /* SIGCHLD open only inside ppoll */
    sigdelset(&waitmask, SIGCHLD);

    double window = o->hang_timeout < CPU_WINDOW_S ? o->hang_timeout : CPU_WINDOW_S;
    hdx_watch *w = hdx_watch_new(o->trace_dir, witness_pid, window, CPU_SHARE);
    if (!w)
        say("hangdx run: out of memory: the job runs unwatched\n");
    double t = now_s(), started = t, last_progress = t, next_tick = t; /* first tick: the baseline */
    int status = 0, ended = 0, reported = 0, killed = 0, progressed = 1, shim_told = 0;
    size_t n_python = 0; /* processes whose Python stacks the last check read */
    while (!(ended |= reap(pid, &status))) {
        double wait = next_tick - now_s();
        struct timespec ts = {0, 0};
        if (wait > 0) {
            ts.tv_sec = (time_t)wait;
            ts.tv_nsec = (long)((wait - (double)ts.tv_sec) * 1e9);
        }
        ppoll(NULL, 0, &ts, &waitmask);
        t = now_s();
        if (!w || t < next_tick)
            continue;
        next_tick = t + TICK_S;
        if (!shim_told && t - started < SHIM_CHECK_S)
            shim_told = check_shim();
        hdx_stacks_release_orphans(); /* a thread a capture could not detach (it was in D) never stays stopped */
        /* Output and trace events are progress. CPU time alone is not (a rank spinning in
         * cuStreamSynchronize uses a whole core): it counts when a main thread's Python stack
         * moved (read without stopping anything), else the caller's capture decides. */
        int seen = hdx_watch_tick(w, t), cpu_busy = (seen & HDX_WATCH_CPU) != 0;
        if (!(seen & (HDX_WATCH_OUTPUT | HDX_WATCH_TRACE)) && cpu_busy && hdx_watch_python(w, t, &n_python) > 0)
            seen |= HDX_WATCH_PYTHON;
        if (seen & (HDX_WATCH_OUTPUT | HDX_WATCH_TRACE | HDX_WATCH_PYTHON)) {
            last_progress = t;
            reported = 0;
            progressed = 1;
        }
        if (reported || t - last_progress < o->hang_timeout)
            continue;
        /* The caller captures, classifies and decides; the job's processes, as they are now. */
        int *pids = NULL;
        size_t n = 0;
        hdx_supervise_action act = HDX_SUPERVISE_HOLD;
        if (hdx_watch_job_pids(witness_pid, &pids, &n) || n == 0) {
            say("hangdx: no progress for %.0f s, but the job's processes are gone\n", t - last_progress);
        } else {
            hdx_supervise_quiet q = {pids, n, t - last_progress, cpu_busy, n_python, progressed};
            progressed = 0;
            act = o->check(o->ctx, &q);
        }
        free(pids);
        if (act == HDX_SUPERVISE_RECHECK) {
            last_progress = now_s(); /* not_hung, or a hang not confirmed yet: asked again after hang_timeout more */
        } else if (act == HDX_SUPERVISE_HOLD) {
            reported = 1;
        } else {
            end_job(pid, o->kill_grace, &status, &ended);
            killed = 1;
            break;
        }
        /* What the capture did (ptrace stops) is not the job's progress. */
        hdx_watch_rebase(w);
        next_tick = now_s() + TICK_S;
    }
    child_pid = 0;
    stop_witness();
    hdx_watch_free(w);
    r->status = status;
    r->ended = killed;
    return 0;
}

int hdx_supervise(const hdx_supervise_options *o, hdx_supervise_result *r)
{
    memset(r, 0, sizeof *r);
    say_to = o->say;
    return o->hang_timeout > 0 && o->check ? watch_child(o, r) : run_child(o, r);
}

