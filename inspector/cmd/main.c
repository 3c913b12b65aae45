/* hangdx: the command table. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "hangdx/report.h"
#include "model/util.h"
#include "native/stacks.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    {"run", hdx_cmd_run, "run a command with the lock-tracing shim preloaded"},
    {"inspect", hdx_cmd_inspect, "attach to hung processes and say why they hang"},
    {"snapshot", hdx_cmd_snapshot, "capture what inspect sees, unclassified, as a file for analyze"},
    {"analyze", hdx_cmd_analyze, "the same verdict from snapshots and trace directories, after the job is gone"},
    {"locks", hdx_cmd_locks, "list build-directory lock files and their state"},
    {"dump", hdx_cmd_dump, "show every thread as merged Python and native stacks"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: hangdx COMMAND [OPTIONS] [ARGS]\n\n"
               "hangdx tells why a distributed training job is hung, and proves it.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\nexamples:\n"
               "  hangdx run -d traces/ -- torchrun --nproc_per_node 8 pretrain.py\n"
               "  hangdx inspect 4123             # a hung rank or its launcher\n"
               "  hangdx snapshot --all -o snap-$(hostname).json\n"
               "  hangdx analyze snap-*.json traces/  # after the job is gone\n"
               "  hangdx locks -d traces/ --clean-stale   # delete what the trace proves stale\n"
               "  hangdx dump --locals 4123        # every thread, Python and native\n\n"
               "'hangdx COMMAND --help' tells more about each.\n");
}

static void on_fatal_signal(int sig)
{
    /* Never leave a target stopped or traced because hangdx was interrupted. */
    hdx_stacks_emergency_detach();
    /* Then die of the signal (status 128+sig in a shell: 130 for SIGINT, 143 for SIGTERM). */
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGQUIT";
    char msg[128];
    size_t n = 0;
    for (const char *parts[] = {"\nhangdx: interrupted by ", name, ": let go of every thread it held; exiting\n", NULL},
                    **q = parts; *q; q++)
        for (const char *c = *q; *c && n < sizeof msg; c++)
            msg[n++] = *c;
    ssize_t w = write(STDERR_FILENO, msg, n);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Ctrl-Z (SIGTSTP): a stopped hangdx must not keep a thread of the job stopped with it.
 * Let go of everything, then stop; after SIGCONT the capture goes on with what it still
 * holds (a thread let go of reads as one that could not be sampled). */
static void on_stop_signal(int sig)
{
    (void)sig;
    int saved = errno;
    hdx_stacks_emergency_detach();
    static const char msg[] = "\nhangdx: stopped (SIGTSTP): let go of every thread it held first\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    kill(getpid(), SIGSTOP);
    errno = saved;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return HDX_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return HDX_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("hangdx %s\n", HDX_VERSION);
        return HDX_EXIT_OK;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    /* One handler at a time: a second signal waits until the first has let go of everything. */
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&sa.sa_mask, sigs[i]);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTSTP, &sa, NULL);

    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    hdx_say(stderr, "hangdx: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return HDX_EXIT_USAGE;
}
