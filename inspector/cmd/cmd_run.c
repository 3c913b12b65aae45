/*
 * hangdx run [--hang-timeout SEC [--on-hang report|kill [--kill-grace SEC[,SEC]]]] [-d DIR] -- COMMAND...:
 * run COMMAND with the lock-tracing shim preloaded, tracing into DIR, and pass
 * its exit status through. The job gets hangdx's fds and process group as
 * they are: nothing of its output passes through hangdx, and a hangdx that
 * dies leaves it running as it was. With --hang-timeout, watch the job
 * (watch.h: bytes written, CPU time, trace events, Python stacks read without
 * a stop) and capture, classify and report it into DIR when nothing moved for
 * SEC seconds. CPU time whose Python stacks stayed put is confirmed
 * by the capture: a verdict of not_hung is progress, and no report.
 *
 * --on-hang kill never makes the hang it reports: it ends the job only on a
 * verdict of medium or high confidence whose root does no work, once a second
 * capture SEC later (no progress between) names the same root, and then as a
 * Ctrl-C would (SIGINT first, so that `finally` blocks run), after the report
 * is written.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gather/capture.h"
#include "classify/classify.h"
#include "cmd/cmd.h"
#include "model/util.h"
#include "hangdx/report.h"
#include "hangdx/trace.h"
#include "report/report.h"
#include "native/stacks.h"
#include "gather/proc.h"
#include "gather/watch.h"

#define TICK_S 1.0        /* between two looks at the job */
#define CPU_WINDOW_S 3.0  /* CPU growth is summed over this long (or SEC when shorter) */
#define CPU_SHARE 0.05    /* of one core: what a hung job's pollers stay well below */
#define KILL_GRACE_S 10.0 /* default wait after SIGINT, and again after SIGTERM */
#define KILL_GRACE_MAX_S 86400.0

struct run_opts {
    const char *trace_dir; /* -d, or NULL for ./hangdx-<date>-<time>/ */
    double hang_timeout;   /* s; 0: no watch */
    int on_hang_kill;
    double kill_grace[2]; /* s: SIGINT to SIGTERM, SIGTERM to SIGKILL */
    char **command; /* NULL-terminated, borrowed from argv */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx run [--hang-timeout SEC [--on-hang report|kill [--kill-grace SEC[,SEC]]]] [-d DIR]\n"
            "                  -- COMMAND [ARGS...]\n\n"
            "Run COMMAND with the hangdx shim (libhangdx-preload.so) preloaded. Every process of\n"
            "the job (the launcher, each rank, ninja, the compilers) records its build-lock and\n"
            "process activity into DIR/<host>-<pid>.jsonl; 'hangdx inspect' and 'hangdx analyze'\n"
            "read those traces to name the holder of a lock that ranks wait on.\n\n"
            "options:\n"
            "  -d, --trace-dir DIR   trace directory (created 0700; default ./hangdx-<date>-<time>/)\n"
            "  --hang-timeout SEC    watch the job: when none of its processes made progress for\n"
            "                        SEC seconds, capture them all and classify; unless that\n"
            "                        says not_hung, write DIR/report.txt and DIR/report.json and\n"
            "                        print the verdict on stderr\n"
            "  --on-hang report|kill after a report: keep watching (report, the default; a new\n"
            "                        report only after progress resumed and stopped again), or\n"
            "                        end the job and exit 124 (kill; see below)\n"
            "  --kill-grace SEC[,SEC] with --on-hang kill: how long the job has after SIGINT before\n"
            "                        SIGTERM, and after SIGTERM before SIGKILL (one value: both;\n"
            "                        default 10,10)\n"
            "  -h, --help            this text\n\n"
            "Progress is any of: bytes written by a process of the job, anywhere (/proc/PID/io\n"
            "wchar, the shim's trace lines taken off; not send(2) or shared memory), a new trace\n"
            "event other than a lock wait, a process whose main thread's Python stack moved\n"
            "while it used CPU (read from memory, nothing stopped, once a second while the job\n"
            "is silent but busy). CPU time alone (5%% of a core over 3 s) is not: a rank\n"
            "spinning in a GPU or NCCL wait burns a core. After SEC seconds without progress\n"
            "hangdx captures the job; a not_hung verdict counts as progress (no report; the\n"
            "next check SEC later), any other is reported. The job's stdout and stderr are\n"
            "hangdx's own, untouched: nothing passes through hangdx, and a hangdx that dies\n"
            "(kill -9, the OOM killer) leaves the job running as it was. hangdx adopts the\n"
            "processes whose parents exit (child subreaper), so 'kill' ends the whole tree,\n"
            "new sessions included.\n\n"
            "--on-hang kill ends the job only on a verdict of medium or high confidence (low\n"
            "confidence never kills) whose culprit does no work (a build whose compilers\n"
            "progress, a rank still computing: the job may only be slow), and only when a\n"
            "second capture SEC later, with no progress between, finds the same class and\n"
            "the same culprit ranks (pids when ranks are unknown); a different one replaces\n"
            "the first and needs its own confirmation. A hang that may not end the job is\n"
            "reported and captured again SEC later. The report is written first; then the\n"
            "job gets SIGINT, as from Ctrl-C, so that Python's finally blocks run (a\n"
            "FileBaton removes its lock), SIGTERM after the first grace and SIGKILL after\n"
            "the second, each once to its process group (when it has its own) and to each\n"
            "process of the tree outside it, until nothing of it is left.\n\n"
            "The exit status is COMMAND's own (128+N when a signal N killed it), or 124 when\n"
            "--on-hang kill ended it. COMMAND stays in hangdx's process group: a signal to\n"
            "that group (Ctrl-C, kill -- -PGID) reaches it from the kernel, once; SIGINT,\n"
            "SIGTERM and SIGHUP sent to hangdx alone are passed on to it, once.\n\n"
            "examples:\n"
            "  hangdx run -d traces/ -- torchrun --nproc_per_node 8 pretrain.py --tp 2\n"
            "  srun hangdx run -d /shared/traces/$SLURM_JOB_ID -- python train.py\n"
            "  hangdx run -- python -c 'import my_ext'   # traces into ./hangdx-<date>-<time>/\n"
            "  hangdx run --hang-timeout 600 -d hang/ -- torchrun --nproc_per_node 8 train.py\n"
            "  srun hangdx run --hang-timeout 900 --on-hang kill -d /shared/hang/$SLURM_JOB_ID \\\n"
            "       -- python train.py        # the report survives the job\n");
}

/* Seconds, from lo to hi, at the start of s into *v; *end past them. 0 or -1. */
static int seconds_at(const char *s, double lo, double hi, double *v, char **end)
{
    errno = 0;
    *v = strtod(s, end);
    return errno || *end == s || !(*v >= lo && *v <= hi) ? -1 : 0;
}

/* --kill-grace SEC[,SEC] into grace[0] (after SIGINT) and grace[1] (after SIGTERM; the first
 * when one value is given). 0 or -1. */
static int parse_grace(const char *arg, double grace[2])
{
    char *end;
    if (seconds_at(arg, 0, KILL_GRACE_MAX_S, &grace[0], &end))
        return -1;
    grace[1] = grace[0];
    if (*end == ',' && seconds_at(end + 1, 0, KILL_GRACE_MAX_S, &grace[1], &end))
        return -1;
    return *end ? -1 : 0;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
    static const struct option longopts[] = {
        {"trace-dir", required_argument, NULL, 'd'},
        {"hang-timeout", required_argument, NULL, 't'},
        {"on-hang", required_argument, NULL, 'k'},
        {"kill-grace", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->kill_grace[0] = o->kill_grace[1] = KILL_GRACE_S;
    optind = 1;
    int c, has_on_hang = 0, has_grace = 0;
    /* "+": stop at the first non-option, so COMMAND's own options stay its own. */
    while ((c = getopt_long(argc, argv, "+d:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o->trace_dir = optarg;
            break;
        case 't': {
            char *end;
            if (seconds_at(optarg, 1, 30 * 86400.0, &o->hang_timeout, &end) || *end) {
                fprintf(stderr, "hangdx run: --hang-timeout %s: give seconds, from 1 to 2592000 "
                                "(e.g. --hang-timeout 600)\n", optarg);
                return -1;
            }
            break;
        }
        case 'k':
            if (!strcmp(optarg, "kill"))
                o->on_hang_kill = 1;
            else if (!strcmp(optarg, "report"))
                o->on_hang_kill = 0;
            else {
                fprintf(stderr, "hangdx run: --on-hang %s: say 'report' or 'kill'\n", optarg);
                return -1;
            }
            has_on_hang = 1;
            break;
        case 'g':
            if (parse_grace(optarg, o->kill_grace) != 0) {
                fprintf(stderr, "hangdx run: --kill-grace %s: give seconds from 0 to %.0f, one value for "
                                "both waits or two (after SIGINT, after SIGTERM), e.g. --kill-grace 30 or "
                                "--kill-grace 60,10\n", optarg, KILL_GRACE_MAX_S);
                return -1;
            }
            has_grace = 1;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            fprintf(stderr, "\n");
            usage(stderr);
            return -1;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "hangdx run: no command given — put it after '--', e.g. "
                        "'hangdx run -d traces -- python train.py'\n");
        return -1;
    }
    if (has_on_hang && o->hang_timeout == 0) {
        fprintf(stderr, "hangdx run: --on-hang needs --hang-timeout SEC, e.g. "
                        "'hangdx run --hang-timeout 600 --on-hang kill -- python train.py'\n");
        return -1;
    }
    if (has_grace && !o->on_hang_kill) {
        fprintf(stderr, "hangdx run: --kill-grace needs --on-hang kill, e.g. 'hangdx run --hang-timeout 600 "
                        "--on-hang kill --kill-grace 30 -- python train.py'\n");
        return -1;
    }
    o->command = argv + optind;
    return 0;
}

/* Create (0700) or accept the trace directory; its absolute path into abs. *created: 1 when
 * this call made it (then run removes it at the end if nothing was written into it). */
static int prepare_trace_dir(const char *dir, char *abs, size_t size, int *created)
{
    char def[64];
    if (!dir) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(def, sizeof def, "hangdx-%Y%m%d-%H%M%S", &tm);
        dir = def;
    }
    *created = 0;
    if (mkdir(dir, 0700) == 0) {
        *created = 1;
    } else if (errno != EEXIST) {
        fprintf(stderr, "hangdx run: cannot create trace directory %s: %s — "
                        "create its parent or choose another -d DIR\n", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "hangdx run: %s is not a directory — choose another -d DIR\n", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        struct passwd *pw = getpwuid(st.st_uid);
        fprintf(stderr,
                "hangdx run: trace directory %s belongs to %s (uid %u), not to you — traces "
                "there could be read or forged by that user; choose another -d DIR\n",
                dir, pw ? pw->pw_name : "another user", (unsigned)st.st_uid);
        return -1;
    }
    /* The same rule as the reader (traces.c): a directory others can write into without the
     * sticky bit lets them forge, replace or rename traces; hangdx would not read it. */
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        fprintf(stderr,
                "hangdx run: trace directory %s is writable by %s (mode %04o) — others could forge "
                "or replace traces there, and hangdx would not read them; run 'chmod 700 %s' or "
                "choose another -d DIR\n",
                dir, st.st_mode & S_IWOTH ? "everyone" : "its group", (unsigned)(st.st_mode & 07777), dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "hangdx run: cannot write into trace directory %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    if (!realpath(dir, abs) || strlen(abs) >= size) {
        fprintf(stderr, "hangdx run: cannot resolve %s: %s\n", dir, strerror(errno));
        if (*created)
            rmdir(dir);
        return -1;
    }
    if (dir == def)
        fprintf(stderr, "hangdx: tracing into %s/\n", abs);
    return 0;
}

/* The shim next to this binary: <bindir>/../lib/libhangdx-preload.so. */
static int find_shim(char *out, size_t size)
{
    char guess[PATH_MAX];
    snprintf(guess, sizeof guess, "%s/../lib/libhangdx-preload.so", hdx_self_dir());
    if (!realpath(guess, out) || access(out, R_OK) != 0) {
        fprintf(stderr, "hangdx run: the shim is missing: %s (%s) — build the 'hangdx-preload' "
                        "target or reinstall hangdx\n", guess, strerror(errno));
        return -1;
    }
    (void)size;
    /* ld.so splits LD_PRELOAD at spaces and colons. */
    if (strpbrk(out, " :")) {
        fprintf(stderr, "hangdx run: the shim's path %s has a space or colon, which LD_PRELOAD "
                        "cannot carry — install hangdx under another directory\n", out);
        return -1;
    }
    return 0;
}

static int set_env(const char *shim, const char *trace_dir)
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
 * they were. watch: also handle SIGCHLD (wakes the watch's ppoll). Returns the job's pid, or -1
 * (said on stderr); on return, the mask is js->saved with SIGCHLD added when watch.
 */
static pid_t start_job(char **command, int watch, struct job_start *js)
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
        fprintf(stderr, "hangdx run: cannot start %s: %s\n", command[0], strerror(errno));
        sigprocmask(SIG_SETMASK, &js->saved, NULL);
        return -1;
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
        fprintf(stderr, "hangdx run: cannot run %s: %s\n", command[0], strerror(e));
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

/* The job's exit status as run's: its own, or 128+N when signal N ended it. */
static int exit_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return HDX_EXIT_FAILURE;
}

static int run_child(char **command)
{
    struct job_start js;
    pid_t pid = start_job(command, 0, &js);
    if (pid < 0)
        return HDX_EXIT_FAILURE;
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "hangdx run: lost track of %s (pid %d): %s\n", command[0], (int)pid,
                    strerror(errno));
            child_pid = 0;
            stop_witness();
            return HDX_EXIT_FAILURE;
        }
    }
    child_pid = 0;
    stop_witness();
    return exit_status(status);
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

/*
 * What --on-hang kill confirms a hang on: the root of the waits-for graph that a verdict names
 * (its class and culprits), and whether that verdict may end the job at all.
 */
struct hang_root {
    int set; /* 1 once it holds a root (hang_root_of) */
    enum hdx_class cls;
    int *ranks, *pids; /* the culprit ranks and pids, sorted; heap, hang_root_clear frees them */
    size_t n_ranks, n_pids;
    const char *spare; /* why the job may not be ended on this verdict (static text), or NULL */
};

static void hang_root_clear(struct hang_root *r)
{
    free(r->ranks);
    free(r->pids);
    memset(r, 0, sizeof *r);
}

static int by_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A sorted heap copy of a[0..n) into *out (NULL when n is 0). 0 or -ENOMEM. */
static int sorted_copy(const int *a, size_t n, int **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (n == 0)
        return 0;
    if (!(*out = malloc(n * sizeof **out)))
        return -ENOMEM;
    memcpy(*out, a, n * sizeof **out);
    qsort(*out, n, sizeof **out, by_int);
    *n_out = n;
    return 0;
}

/* The root v names into r (which the caller clears). Only a verdict of medium or high confidence
 * whose culprit does no work may end the job. 0 or -ENOMEM. */
static int hang_root_of(const hdx_verdict *v, struct hang_root *r)
{
    r->set = 1;
    r->cls = v->cls;
    r->spare = v->culprit_working                  ? "its culprit is working: the job may only be slow"
               : v->confidence < HDX_CONF_MEDIUM ? "the verdict's confidence is low"
                                                   : NULL;
    if (sorted_copy(v->culprit_ranks, v->n_culprit_ranks, &r->ranks, &r->n_ranks) ||
        sorted_copy(v->culprit_pids, v->n_culprit_pids, &r->pids, &r->n_pids))
        return -ENOMEM;
    return 0;
}

static int same_ints(const int *a, size_t na, const int *b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* 1 when a and b name the same root: the same class and culprit ranks, and, when neither knows
 * a culprit's rank, the same culprit pids. */
static int hang_root_same(const struct hang_root *a, const struct hang_root *b)
{
    return a->cls == b->cls && same_ints(a->ranks, a->n_ranks, b->ranks, b->n_ranks) &&
           (a->n_ranks > 0 || same_ints(a->pids, a->n_pids, b->pids, b->n_pids));
}

/*
 * --on-hang kill, after a capture reported the hang whose root is *found: 1 when it confirms
 * *pending, the root that the capture before found, with no progress since (the caller clears
 * *pending on progress): the job may end. Otherwise 0, said on stderr; *found then becomes
 * *pending (they are swapped), for the next capture to confirm, unless it may not end the job.
 * sec: the time without progress before the next capture.
 */
static int confirm_hang(struct hang_root *pending, struct hang_root *found, double sec)
{
    if (found->spare) {
        fprintf(stderr, "hangdx: not ending the job: %s; next check after %.0f s more without progress\n",
                found->spare, sec);
        hang_root_clear(pending);
        return 0;
    }
    if (pending->set && hang_root_same(pending, found)) {
        fprintf(stderr, "hangdx: the same hang as at the last capture, with no progress since\n");
        return 1;
    }
    fprintf(stderr, "hangdx: --on-hang kill: %sthe job ends if the next capture, after %.0f s more without "
                    "progress, finds this hang again\n",
            pending->set ? "not the hang that the last capture found; " : "", sec);
    struct hang_root t = *pending;
    *pending = *found;
    *found = t;
    return 0;
}

/*
 * Capture the job and classify it; unless the verdict is not_hung, write DIR/report.{txt,json}
 * and say the verdict on stderr. cpu_busy: the job was silent but used CPU, and n_python of its
 * processes had a Python stack that did not move (0: none could be read), so the capture decides
 * whether that CPU was work or a spinning wait. Returns 1 when a hang was reported (or could not
 * be written), 0 when the verdict is not_hung (no report: the job makes progress), -1 when the
 * job's processes are gone. On 1, *root (cleared here first; the caller clears it after) holds
 * the hang's root; its spare is set when no report could be written (nothing may end a job
 * whose hang is not on record).
 */
static int check_job(const char *dir, double quiet_s, int cpu_busy, size_t n_python, struct hang_root *root)
{
    int *pids = NULL, failures = 0, ret = 1;
    size_t n = 0;
    hdx_evidence *ev = NULL;
    hdx_verdict v = {0};
    struct hang_root r = {0};
    char txt[PATH_MAX + 32], json[PATH_MAX + 32], tmp[PATH_MAX + 32];
    hang_root_clear(root);
    int rc = hdx_watch_job_pids(witness_pid, &pids, &n);
    if (rc || n == 0) {
        fprintf(stderr, "hangdx: no progress for %.0f s, but the job's processes are gone\n", quiet_s);
        ret = -1;
        goto out;
    }
    if (cpu_busy)
        fprintf(stderr, "hangdx: no progress for %.0f s (no output, no trace event, %s), but the job uses "
                        "CPU; capturing its %zu process%s to tell work from a spinning wait...\n",
                quiet_s, n_python ? "no Python stack moved" : "no Python stack could be read", n,
                n == 1 ? "" : "es");
    else
        fprintf(stderr, "hangdx: no progress for %.0f s; capturing the job's %zu process%s...\n",
                quiet_s, n, n == 1 ? "" : "es");
    hdx_capture_options co = {pids, n, 0, dir, 2, 250, 0};
    if (!(ev = hdx_evidence_new())) {
        rc = -ENOMEM;
        goto fail;
    }
    ev->build_timeout_s = 1800;
    if ((rc = hdx_capture(ev, &co, &failures)) || (rc = hdx_evidence_label(ev)) ||
        (rc = hdx_classify(ev, &v)))
        goto fail;
    int alive = 0;
    for (size_t i = 0; i < ev->n_procs; i++)
        alive |= ev->procs[i].alive != 0;
    if (!alive) { /* it ended while it was captured: it was not hung */
        fprintf(stderr, "hangdx: the job's processes ended during the capture; no report\n");
        ret = -1;
        goto out;
    }
    if (v.cls == HDX_CLASS_NOT_HUNG) {
        fprintf(stderr, "hangdx: not_hung: %s; no report, next check after %.0f s more without progress\n",
                v.summary ? v.summary : "(no summary)", quiet_s);
        ret = 0;
        goto out;
    }
    if ((rc = hang_root_of(&v, &r)))
        goto fail;
    snprintf(txt, sizeof txt, "%s/report.txt", dir);
    snprintf(json, sizeof json, "%s/report.json", dir);
    /* Each file appears whole (a reader waiting for report.json never sees half of it). */
    snprintf(tmp, sizeof tmp, "%s/.report.txt.tmp", dir);
    if ((rc = hdx_report_write(ev, &v, 0, tmp)) || (rename(tmp, txt) && (rc = -errno)))
        goto fail;
    snprintf(tmp, sizeof tmp, "%s/.report.json.tmp", dir);
    if ((rc = hdx_report_write(ev, &v, 1, tmp)) || (rename(tmp, json) && (rc = -errno)))
        goto fail;
    /* The summary points at what follows it in a report ("read the stack groups below"): on
     * stderr nothing follows, so it points at the report file instead. */
    const char *sum = v.summary ? v.summary : "(no summary)";
    size_t sl = strlen(sum), bl = strlen(" below");
    if (sl > bl && !strcmp(sum + sl - bl, " below"))
        fprintf(stderr, "hangdx: %s: %.*s in %s\n", hdx_class_name(v.cls), (int)(sl - bl), sum, txt);
    else
        fprintf(stderr, "hangdx: %s: %s\n", hdx_class_name(v.cls), sum);
    fprintf(stderr, "hangdx: report in %s (and report.json)%s\n", txt,
            failures ? "; some processes could not be read" : "");
    *root = r;
    memset(&r, 0, sizeof r);
    goto out;
fail:
    fprintf(stderr, "hangdx: cannot report the hang into %s: %s\n", dir, strerror(-rc));
    root->spare = "its hang could not be reported";
out:
    hang_root_clear(&r);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
    free(pids);
    return ret;
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
    fprintf(stderr, "hangdx: ending the job: SIGINT, SIGTERM %.0f s later, SIGKILL %.0f s after that\n",
            grace[0], grace[1]);
    size_t n = 1;
    for (size_t i = 0; i < 3 && n > 0; i++) {
        if (i > 0)
            fprintf(stderr, "hangdx: %zu process%s of the job left %.0f s after %s; %s\n", n, n == 1 ? "" : "es",
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

static int watch_child(const struct run_opts *o, const char *dir)
{
    /* Orphans of the job (a launcher killed, ranks in new sessions) stay under us: watched,
     * captured, ended and reaped here. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    struct job_start js;
    pid_t pid = start_job(o->command, 1, &js);
    if (pid < 0)
        return HDX_EXIT_FAILURE;
    sigset_t waitmask = js.saved; /* SIGCHLD open only inside ppoll */
    sigdelset(&waitmask, SIGCHLD);

    double window = o->hang_timeout < CPU_WINDOW_S ? o->hang_timeout : CPU_WINDOW_S;
    hdx_watch *w = hdx_watch_new(dir, witness_pid, window, CPU_SHARE);
    if (!w)
        fprintf(stderr, "hangdx run: out of memory: the job runs unwatched\n");
    double t = now_s(), last_progress = t, next_tick = t; /* first tick: the baseline */
    int status = 0, ended = 0, reported = 0, killed = 0;
    size_t n_python = 0; /* processes whose Python stacks the last check read */
    struct hang_root found = {0}, pending = {0}; /* the last capture's hang; the one to confirm */
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
        hdx_stacks_release_orphans(); /* a thread a capture could not detach (it was in D) never stays stopped */
        /* Output and trace events are progress. CPU time alone is not (a rank spinning in
         * cuStreamSynchronize uses a whole core): it counts when a main thread's Python stack
         * moved (read without stopping anything), else the capture below decides. */
        int seen = hdx_watch_tick(w, t), cpu_busy = (seen & HDX_WATCH_CPU) != 0;
        if (!(seen & (HDX_WATCH_OUTPUT | HDX_WATCH_TRACE)) && cpu_busy && hdx_watch_python(w, t, &n_python) > 0)
            seen |= HDX_WATCH_PYTHON;
        if (seen & (HDX_WATCH_OUTPUT | HDX_WATCH_TRACE | HDX_WATCH_PYTHON)) {
            last_progress = t;
            reported = 0;
            hang_root_clear(&pending);
        }
        if (reported || t - last_progress < o->hang_timeout)
            continue;
        int hung = check_job(dir, t - last_progress, cpu_busy, n_python, &found);
        if (hung == 0) {
            last_progress = now_s(); /* not_hung: the next check comes SEC from now */
            hang_root_clear(&pending); /* and it is progress */
        } else if (hung < 0 || !o->on_hang_kill) {
            reported = 1;
        } else if (confirm_hang(&pending, &found, o->hang_timeout)) {
            end_job(pid, o->kill_grace, &status, &ended);
            killed = 1;
            break;
        } else {
            last_progress = now_s(); /* a hang not confirmed yet: checked again SEC from now */
        }
        /* What the capture did (ptrace stops) is not the job's progress. */
        hdx_watch_rebase(w);
        next_tick = now_s() + TICK_S;
    }
    child_pid = 0;
    stop_witness();
    hang_root_clear(&found);
    hang_root_clear(&pending);
    hdx_watch_free(w);
    return killed ? HDX_EXIT_TIMEOUT : exit_status(status);
}

int hdx_cmd_run(int argc, char **argv)
{
    struct run_opts o;
    char dir[PATH_MAX], shim[PATH_MAX];
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? HDX_EXIT_OK : HDX_EXIT_USAGE;
    int created = 0;
    if (find_shim(shim, sizeof shim) != 0 || prepare_trace_dir(o.trace_dir, dir, sizeof dir, &created) != 0)
        return HDX_EXIT_FAILURE;
    if (set_env(shim, dir) != 0) {
        fprintf(stderr, "hangdx run: cannot set LD_PRELOAD: %s\n", strerror(errno));
        rc = HDX_EXIT_FAILURE;
    } else {
        rc = o.hang_timeout > 0 ? watch_child(&o, dir) : run_child(o.command);
    }
    /* A trace directory that run made and nothing was written into (the command could not
     * start, or no process of it loaded the shim) is not left behind; rmdir removes only an
     * empty one, and never one that was there before. */
    if (created && rmdir(dir) == 0)
        fprintf(stderr, "hangdx: nothing was traced; removed the empty trace directory %s/\n", dir);
    return rc;
}
