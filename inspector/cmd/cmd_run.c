/*
 * hangdx run [--hang-timeout SEC [--on-hang report|kill [--kill-grace SEC[,SEC]]]] [-d DIR] -- COMMAND...:
 * run COMMAND with the lock-tracing shim preloaded, tracing into DIR, and pass
 * its exit status through (gather/supervise.h starts, watches and ends the job;
 * here: the command line, the trace directory, and the verdict that decides). The job gets hangdx's fds and process group as
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
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "classify/classify.h"
#include "cmd/cmd.h"
#include "gather/capture.h"
#include "gather/supervise.h"
#include "hangdx/report.h"
#include "model/outfile.h"
#include "model/util.h"
#include "report/report.h"
#include "report/words.h"

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
            "The exit status is COMMAND's own, or 124 when --on-hang kill ended it. When a\n"
            "signal N killed COMMAND, hangdx dies of signal N too, after its report and\n"
            "clean-up (a shell sees 128+N, and a script stops at a Ctrl-C as without run;\n"
            "hangdx dumps no core of its own). COMMAND stays in hangdx's process group: a\n"
            "signal to that group (Ctrl-C, kill -- -PGID) reaches it from the kernel, once;\n"
            "SIGINT, SIGTERM and SIGHUP sent to hangdx alone are passed on to it, once.\n\n"
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
                hdx_say(stderr, "hangdx run: --hang-timeout %s: give seconds, from 1 to 2592000 "
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
                hdx_say(stderr, "hangdx run: --on-hang %s: say 'report' or 'kill'\n", optarg);
                return -1;
            }
            has_on_hang = 1;
            break;
        case 'g':
            if (parse_grace(optarg, o->kill_grace) != 0) {
                hdx_say(stderr, "hangdx run: --kill-grace %s: give seconds from 0 to %.0f, one value for "
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
            hdx_say(stderr, "\n");
            usage(stderr);
            return -1;
        }
    }
    if (optind >= argc) {
        hdx_say(stderr, "hangdx run: no command given — put it after '--', e.g. "
                        "'hangdx run -d traces -- python train.py'\n");
        return -1;
    }
    if (has_on_hang && o->hang_timeout == 0) {
        hdx_say(stderr, "hangdx run: --on-hang needs --hang-timeout SEC, e.g. "
                        "'hangdx run --hang-timeout 600 --on-hang kill -- python train.py'\n");
        return -1;
    }
    if (has_grace && !o->on_hang_kill) {
        hdx_say(stderr, "hangdx run: --kill-grace needs --on-hang kill, e.g. 'hangdx run --hang-timeout 600 "
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
    /* A link to a directory of ours is followed only when it is ours or root's, as an output
     * is (model/outfile.h): another user's would send traces and reports where they chose.
     * Before the mkdir: that would make the directory where the link points. */
    if (hdx_outfile_foreign_link(dir)) {
        hdx_say(stderr, "hangdx run: trace directory %s, or a directory on its way, is a symbolic link that another user owns — "
                        "give the directory it names, or choose another -d DIR\n", dir);
        return -1;
    }
    if (mkdir(dir, 0700) == 0) {
        *created = 1;
    } else if (errno != EEXIST) {
        hdx_say(stderr, "hangdx run: cannot create trace directory %s: %s — "
                        "create its parent or choose another -d DIR\n", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        hdx_say(stderr, "hangdx run: %s is not a directory — choose another -d DIR\n", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        struct passwd *pw = getpwuid(st.st_uid);
        hdx_say(stderr,
                "hangdx run: trace directory %s belongs to %s (uid %u), not to you — traces "
                "there could be read or forged by that user; choose another -d DIR\n",
                dir, pw ? pw->pw_name : "another user", (unsigned)st.st_uid);
        return -1;
    }
    /* The same rule as the reader (traces.c): a directory others can write into without the
     * sticky bit lets them forge, replace or rename traces; hangdx would not read it. */
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        hdx_say(stderr,
                "hangdx run: trace directory %s is writable by %s (mode %04o) — others could forge "
                "or replace traces there, and hangdx would not read them; run 'chmod 700 %s' or "
                "choose another -d DIR\n",
                dir, st.st_mode & S_IWOTH ? "everyone" : "its group", (unsigned)(st.st_mode & 07777), dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        hdx_say(stderr, "hangdx run: cannot write into trace directory %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    if (!realpath(dir, abs) || strlen(abs) >= size) {
        hdx_say(stderr, "hangdx run: cannot resolve %s: %s\n", dir, strerror(errno));
        if (*created)
            rmdir(dir);
        return -1;
    }
    if (dir == def)
        hdx_say(stderr, "hangdx: tracing into %s/\n", abs);
    return 0;
}

/* The shim beside this binary: <bindir>/HDX_SHIM_FROM_BIN, where cmake --install put it (../lib,
 * or a package's directory of its own), else <bindir>/../lib as in the build tree. */
#ifndef HDX_SHIM_FROM_BIN
#define HDX_SHIM_FROM_BIN "../lib"
#endif
static int find_shim(char *out, size_t size)
{
    static const char *const dirs[] = {HDX_SHIM_FROM_BIN, "../lib"};
    char guess[PATH_MAX], first[PATH_MAX];
    int first_errno = 0;
    for (size_t i = 0;; i++) {
        snprintf(guess, sizeof guess, "%s/%s/libhangdx-preload.so", hdx_self_dir(), dirs[i]);
        if (realpath(guess, out) && access(out, R_OK) == 0)
            break;
        if (i == 0) {
            snprintf(first, sizeof first, "%s", guess);
            first_errno = errno;
        }
        if (i + 1 == sizeof dirs / sizeof dirs[0]) {
            hdx_say(stderr, "hangdx run: the shim is missing: %s (%s) — build the 'hangdx-preload' "
                            "target or reinstall hangdx\n", first, strerror(first_errno));
            return -1;
        }
    }
    (void)size;
    /* ld.so splits LD_PRELOAD at spaces and colons. */
    if (strpbrk(out, " :")) {
        hdx_say(stderr, "hangdx run: the shim's path %s has a space or colon, which LD_PRELOAD "
                        "cannot carry — install hangdx under another directory\n", out);
        return -1;
    }
    return 0;
}

/* The job's exit status as run's: its own, or 128+N when signal N ended it (what run exits
 * with when it cannot die of that signal itself, die_of_signal). */
static int exit_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return HDX_EXIT_FAILURE;
}

/*
 * The job died of signal sig: run dies of it too, after its report and clean-up, so that its
 * caller sees what it would have seen without run (a shell script stops at a Ctrl-C, Python's
 * returncode is -sig; README "hangdx run", exit status). The default disposition comes back and
 * the signal is unblocked first (main.c handles SIGINT, SIGTERM, SIGHUP, SIGQUIT). run never
 * dumps a core of its own (a core signal: SIGQUIT, SIGSEGV, SIGABRT...): its core is not the
 * job's, and one named "core" would replace the job's in the same directory; the caller's
 * status then lacks the core flag even where the job dumped one. Returns only when the signal
 * did not end run (it cannot then, e.g. one its parent had ignored for it before exec: none
 * of the fatal ones); the caller exits 128+sig.
 */
static void die_of_signal(int sig)
{
    fflush(NULL);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* a core_pattern pipe may not heed RLIMIT_CORE */
    struct sigaction dfl = {0};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
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
        hdx_say(stderr, "hangdx: not ending the job: %s; next check after %.0f s more without progress\n",
                found->spare, sec);
        hang_root_clear(pending);
        return 0;
    }
    if (pending->set && hang_root_same(pending, found)) {
        hdx_say(stderr, "hangdx: the same hang as at the last capture, with no progress since\n");
        return 1;
    }
    hdx_say(stderr, "hangdx: --on-hang kill: %sthe job ends if the next capture, after %.0f s more without "
                    "progress, finds this hang again\n",
            pending->set ? "not the hang that the last capture found; " : "", sec);
    struct hang_root t = *pending;
    *pending = *found;
    *found = t;
    return 0;
}

/*
 * Capture the job and classify it; unless the verdict is not_hung, write DIR/report.{txt,json}
 * and say the verdict on stderr. q (the supervisor's): the job's processes, and cpu_busy: the
 * job was silent but used CPU, and n_python of its processes had a Python stack that did not
 * move (0: none could be read), so the capture decides whether that CPU was work or a spinning
 * wait. Returns 1 when a hang was reported (or could not be written), 0 when the verdict is
 * not_hung (no report: the job makes progress), -1 when the job's processes ended during the
 * capture. On 1, *root (cleared here first; the caller clears it after) holds the hang's root;
 * its spare is set when no report could be written (nothing may end a job whose hang is not on
 * record).
 */
/* dir: the trace directory, as it is shown; held: the same directory as /proc/self/fd/N of the
 * fd run holds, which the reports are written through (another user who swaps dir for a link
 * meanwhile, in a directory they can write, does not choose where they go). */
static int check_job(const char *dir, const char *held, const hdx_supervise_quiet *q, struct hang_root *root)
{
    int failures = 0, ret = 1, rc;
    const int *pids = q->pids;
    size_t n = q->n_pids;
    double quiet_s = q->quiet_s;
    hdx_evidence *ev = NULL;
    hdx_verdict v = {0};
    char *summary = NULL, *remedy = NULL;
    struct hang_root r = {0};
    char txt[PATH_MAX + 32], txt_io[64], json_io[64];
    hang_root_clear(root);
    if (q->cpu_busy)
        hdx_say(stderr, "hangdx: no progress for %.0f s (no output, no trace event, %s), but the job uses "
                        "CPU; capturing its %zu process%s to tell work from a spinning wait...\n",
                quiet_s, q->n_python ? "no Python stack moved" : "no Python stack could be read", n,
                n == 1 ? "" : "es");
    else
        hdx_say(stderr, "hangdx: no progress for %.0f s; capturing the job's %zu process%s...\n",
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
        hdx_say(stderr, "hangdx: the job's processes ended during the capture; no report\n");
        ret = -1;
        goto out;
    }
    if ((rc = hdx_verdict_words(ev, &v, &summary, &remedy)))
        goto fail;
    if (v.cls == HDX_CLASS_NOT_HUNG) {
        hdx_say(stderr, "hangdx: not_hung: %s; no report, next check after %.0f s more without progress\n",
                summary ? summary : "(no summary)", quiet_s);
        ret = 0;
        goto out;
    }
    if ((rc = hang_root_of(&v, &r)))
        goto fail;
    snprintf(txt, sizeof txt, "%s/report.txt", dir);
    snprintf(txt_io, sizeof txt_io, "%s/report.txt", held);
    snprintf(json_io, sizeof json_io, "%s/report.json", held);
    /* Each file appears whole (model/outfile.h: a reader waiting for report.json never sees
     * half of it, and a link planted in a sticky DIR is replaced, not written through). */
    if ((rc = hdx_report_write(ev, &v, NULL, txt_io)) ||
        (rc = hdx_report_write(ev, &v, &(hdx_report_options){HDX_REPORT_JSON, HDX_TREE_AUTO, 0, NULL}, json_io)))
        goto fail;
    /* The summary points at what follows it in a report ("read the stack groups below"): on
     * stderr nothing follows, so it points at the report file instead. */
    const char *sum = summary ? summary : "(no summary)";
    size_t sl = strlen(sum), bl = strlen(" below");
    if (sl > bl && !strcmp(sum + sl - bl, " below"))
        hdx_say(stderr, "hangdx: %s: %.*s in %s\n", hdx_class_name(v.cls), (int)(sl - bl), sum, txt);
    else
        hdx_say(stderr, "hangdx: %s: %s\n", hdx_class_name(v.cls), sum);
    hdx_say(stderr, "hangdx: report in %s (and report.json)%s\n", txt,
            failures ? "; some processes could not be read" : "");
    *root = r;
    memset(&r, 0, sizeof r);
    goto out;
fail:
    hdx_say(stderr, "hangdx: cannot report the hang into %s: %s\n", dir, strerror(-rc));
    root->spare = "its hang could not be reported";
out:
    hang_root_clear(&r);
    free(summary);
    free(remedy);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
    return ret;
}

/* What --hang-timeout decides on: the last capture's hang and the one to confirm. */
struct run_watch {
    const char *dir, *held; /* check_job's */
    int on_hang_kill;
    double sec;                     /* --hang-timeout */
    struct hang_root found, pending;
};

/* The supervisor's check (supervise.h): capture, classify, report, and decide from the
 * verdict whether the job ends. */
static hdx_supervise_action on_quiet(void *ctx, const hdx_supervise_quiet *q)
{
    struct run_watch *w = ctx;
    if (q->progressed)
        hang_root_clear(&w->pending); /* a hang to confirm needs no progress since */
    int hung = check_job(w->dir, w->held, q, &w->found);
    if (hung == 0) {
        hang_root_clear(&w->pending); /* not_hung is progress; the next check comes SEC from now */
        return HDX_SUPERVISE_RECHECK;
    }
    if (hung < 0 || !w->on_hang_kill)
        return HDX_SUPERVISE_HOLD;
    /* A hang not confirmed yet is checked again SEC from now. */
    return confirm_hang(&w->pending, &w->found, w->sec) ? HDX_SUPERVISE_END : HDX_SUPERVISE_RECHECK;
}

/* Run the job, watched when --hang-timeout says so; run's exit status. *sig: the signal that
 * ended the job (0 when it exited, or --on-hang kill ended it, or it could not be run). */
static int supervise(const struct run_opts *o, const char *dir, const char *held, int *sig)
{
    *sig = 0;
    struct run_watch w = {dir, held, o->on_hang_kill, o->hang_timeout, {0}, {0}};
    hdx_supervise_options so = {o->command, dir, o->hang_timeout, {o->kill_grace[0], o->kill_grace[1]},
                                on_quiet, &w, stderr};
    hdx_supervise_result r;
    int rc = hdx_supervise(&so, &r);
    hang_root_clear(&w.found);
    hang_root_clear(&w.pending);
    if (rc < 0 && !r.pid)
        hdx_say(stderr, "hangdx run: cannot start %s: %s\n", o->command[0], strerror(-rc));
    else if (rc < 0)
        hdx_say(stderr, "hangdx run: lost track of %s (pid %d): %s\n", o->command[0], (int)r.pid,
                strerror(-rc));
    if (rc < 0)
        return HDX_EXIT_FAILURE;
    if (r.ended)
        return HDX_EXIT_TIMEOUT;
    if (WIFSIGNALED(r.status))
        *sig = WTERMSIG(r.status);
    return exit_status(r.status);
}

int hdx_cmd_run(int argc, char **argv)
{
    struct run_opts o;
    char dir[PATH_MAX], shim[PATH_MAX];
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? HDX_EXIT_OK : HDX_EXIT_USAGE;
    int created = 0, sig = 0;
    if (find_shim(shim, sizeof shim) != 0 || prepare_trace_dir(o.trace_dir, dir, sizeof dir, &created) != 0)
        return HDX_EXIT_FAILURE;
    /* The directory checked, held: dir is resolved (realpath), so O_NOFOLLOW refuses a link
     * swapped in since. */
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char held[40];
    snprintf(held, sizeof held, "/proc/self/fd/%d", dfd);
    if (dfd < 0) {
        hdx_say(stderr, "hangdx run: cannot open trace directory %s: %s\n", dir, strerror(errno));
        rc = HDX_EXIT_FAILURE;
    } else if (hdx_supervise_preload(shim, dir) != 0) {
        hdx_say(stderr, "hangdx run: cannot set LD_PRELOAD: %s\n", strerror(errno));
        rc = HDX_EXIT_FAILURE;
    } else {
        rc = supervise(&o, dir, held, &sig);
    }
    if (dfd >= 0)
        close(dfd);
    /* A trace directory that run made and nothing was written into (the command could not
     * start, or no process of it loaded the shim) is not left behind; rmdir removes only an
     * empty one, and never one that was there before. */
    if (created && rmdir(dir) == 0)
        hdx_say(stderr, "hangdx: nothing was traced; removed the empty trace directory %s/\n", dir);
    if (sig)
        die_of_signal(sig);
    return rc;
}
