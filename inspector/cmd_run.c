/*
 * hangdx run [-d DIR] -- COMMAND...: run COMMAND with the lock-tracing shim
 * preloaded, tracing into DIR, and pass its exit status through.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "hangdx/report.h"
#include "hangdx/trace.h"

struct run_opts {
    const char *trace_dir; /* -d, or NULL for ./hangdx-<date>-<time>/ */
    char **command;        /* NULL-terminated, borrowed from argv */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx run [-d DIR] -- COMMAND [ARGS...]\n\n"
            "Run COMMAND with the hangdx shim (libhangdx-preload.so) preloaded. Every process of\n"
            "the job (the launcher, each rank, ninja, the compilers) records its build-lock and\n"
            "process activity into DIR/<host>-<pid>.jsonl; 'hangdx inspect' and 'hangdx analyze'\n"
            "read those traces to name the holder of a lock that ranks wait on.\n\n"
            "options:\n"
            "  -d, --trace-dir DIR   trace directory (created 0700; default ./hangdx-<date>-<time>/)\n"
            "  -h, --help            this text\n\n"
            "The exit status is COMMAND's own (128+N when a signal N killed it). SIGINT, SIGTERM\n"
            "and SIGHUP sent to hangdx are passed on to COMMAND.\n\n"
            "examples:\n"
            "  hangdx run -d traces/ -- torchrun --nproc-per-node 8 pretrain.py --tp 2\n"
            "  srun hangdx run -d /shared/traces/$SLURM_JOB_ID -- python train.py\n"
            "  hangdx run -- python -c 'import my_ext'   # traces into ./hangdx-<date>-<time>/\n");
}

static int parse(int argc, char **argv, struct run_opts *o)
{
    static const struct option longopts[] = {
        {"trace-dir", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    optind = 1;
    int c;
    /* "+": stop at the first non-option, so COMMAND's own options stay its own. */
    while ((c = getopt_long(argc, argv, "+d:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o->trace_dir = optarg;
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
    o->command = argv + optind;
    return 0;
}

/* Create (0700) or accept the trace directory; its absolute path into abs. */
static int prepare_trace_dir(const char *dir, char *abs, size_t size)
{
    char def[64];
    if (!dir) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(def, sizeof def, "hangdx-%Y%m%d-%H%M%S", &tm);
        dir = def;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "hangdx run: cannot create trace directory %s: %s — "
                        "create its parent or choose another -d DIR\n", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "hangdx run: %s is not a directory — choose another -d DIR\n", dir);
        return -1;
    }
    if (st.st_uid != getuid()) {
        struct passwd *pw = getpwuid(st.st_uid);
        fprintf(stderr,
                "hangdx run: trace directory %s belongs to %s (uid %u), not to you — traces "
                "there could be read or forged by that user; choose another -d DIR\n",
                dir, pw ? pw->pw_name : "another user", (unsigned)st.st_uid);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "hangdx run: cannot write into trace directory %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    if (!realpath(dir, abs) || strlen(abs) >= size) {
        fprintf(stderr, "hangdx run: cannot resolve %s: %s\n", dir, strerror(errno));
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

static volatile sig_atomic_t child_pid;

/* Pass the signal on, unless the terminal sent it: the child, in the same
 * foreground process group, has it already (SI_KERNEL), and a second ^C
 * would interrupt its cleanup. */
static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (child_pid > 0 && !(si && si->si_code == SI_KERNEL))
        kill(child_pid, sig);
}

static int run_child(char **command)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {0};
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    struct sigaction old[3];
    sigset_t block, saved;
    sigemptyset(&block);
    for (size_t i = 0; i < 3; i++)
        sigaddset(&block, sigs[i]);
    /* No signal between fork and the handlers knowing the child. */
    sigprocmask(SIG_BLOCK, &block, &saved);
    for (size_t i = 0; i < 3; i++)
        sigaction(sigs[i], &sa, &old[i]);

    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "hangdx run: cannot start %s: %s\n", command[0], strerror(errno));
        sigprocmask(SIG_SETMASK, &saved, NULL);
        return HDX_EXIT_FAILURE;
    }
    if (pid == 0) {
        for (size_t i = 0; i < 3; i++)
            sigaction(sigs[i], &old[i], NULL);
        signal(SIGQUIT, SIG_DFL);
        sigprocmask(SIG_SETMASK, &saved, NULL);
        execvp(command[0], command);
        int e = errno;
        fprintf(stderr, "hangdx run: cannot run %s: %s\n", command[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &saved, NULL);

    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "hangdx run: lost track of %s (pid %d): %s\n", command[0], (int)pid,
                    strerror(errno));
            return HDX_EXIT_FAILURE;
        }
    }
    child_pid = 0;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return HDX_EXIT_FAILURE;
}

int hdx_cmd_run(int argc, char **argv)
{
    struct run_opts o;
    char dir[PATH_MAX], shim[PATH_MAX];
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? HDX_EXIT_OK : HDX_EXIT_USAGE;
    if (find_shim(shim, sizeof shim) != 0 || prepare_trace_dir(o.trace_dir, dir, sizeof dir) != 0)
        return HDX_EXIT_FAILURE;
    if (set_env(shim, dir) != 0) {
        fprintf(stderr, "hangdx run: cannot set LD_PRELOAD: %s\n", strerror(errno));
        return HDX_EXIT_FAILURE;
    }
    return run_child(o.command);
}
