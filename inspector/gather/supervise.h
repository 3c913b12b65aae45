/*
 * Supervising a job that hangdx starts (`hangdx run`): fork and exec it with hangdx's fds and
 * process group as they are, pass on the signals sent to hangdx alone (once: a witness process
 * tells them from the group's, see supervise.c), and with a hang timeout watch its progress
 * (watch.h: bytes written, trace events, Python stacks that move) and, after that long
 * without progress, ask the caller what to do: the caller captures, classifies and decides
 * (gather computes no verdict); the supervisor only carries out what it is told, ending the
 * job as a Ctrl-C would when told to.
 * Safety: a signal reaches the job once; a thread a capture left stopped is released at the
 * next tick (hdx_stacks_release_orphans); the job never depends on hangdx staying alive (the
 * witness dies with hangdx, and nothing of the job's output passes through hangdx).
 * One supervision per process at a time: the signal handlers keep the job's pid in statics.
 */
#ifndef HDX_SUPERVISE_H
#define HDX_SUPERVISE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* What the caller's check tells the supervisor to do after a quiet spell. */
typedef enum hdx_supervise_action {
    HDX_SUPERVISE_RECHECK, /* no hang to act on now: ask again after as long again without progress */
    HDX_SUPERVISE_HOLD,    /* a hang was reported: ask again only after progress resumed and stopped */
    HDX_SUPERVISE_END,     /* end the job (SIGINT, SIGTERM, SIGKILL; kill_grace) and return */
} hdx_supervise_action;

/* The quiet spell the check is asked about; everything borrowed for the call. */
typedef struct hdx_supervise_quiet {
    const int *pids;  /* the job's processes now (the witness left out), n_pids >= 1 */
    size_t n_pids;
    double quiet_s;   /* seconds without progress */
    int cpu_busy;     /* silent, but the job used CPU (watch.h's HDX_WATCH_CPU) */
    size_t n_python;  /* processes whose Python stack was read and did not move (0: none read) */
    int progressed;   /* the job made progress since the check was last asked (or ever) */
} hdx_supervise_quiet;

typedef hdx_supervise_action (*hdx_supervise_check_fn)(void *ctx, const hdx_supervise_quiet *q);

typedef struct hdx_supervise_options {
    char *const *command;   /* NULL-terminated argv of the job (execvp'd), borrowed */
    const char *trace_dir;  /* the shim's trace directory, which the watch reads */
    double hang_timeout;    /* seconds without progress before check is asked; 0: no watch */
    double kill_grace[2];   /* HDX_SUPERVISE_END: s from SIGINT to SIGTERM, and SIGTERM to SIGKILL */
    hdx_supervise_check_fn check; /* with hang_timeout: what to do after a quiet spell */
    void *ctx;              /* check's */
    FILE *say;              /* where the supervisor says what it does to the job (run: stderr);
                               NULL: nowhere */
} hdx_supervise_options;

typedef struct hdx_supervise_result {
    pid_t pid;   /* the job's (0 when it did not start) */
    int status;  /* its wait status (waitpid), once it ended */
    int ended;   /* 1 when it was ended here (HDX_SUPERVISE_END) */
} hdx_supervise_result;

/*
 * Put the shim into this process's environment, so that the job inherits it: LD_PRELOAD
 * gets shim (an absolute path without spaces or colons) in front of what it held, and
 * HANGDX_TRACE_DIR (hangdx/trace.h) becomes trace_dir. 0, or a negative errno.
 */
int hdx_supervise_preload(const char *shim, const char *trace_dir);

/*
 * Start the job and supervise it until it ends (or, told HDX_SUPERVISE_END, until it was
 * ended), reaping every process of it (hangdx becomes a child subreaper when it watches).
 * Signal dispositions and the mask are restored for the job; afterwards SIGINT, SIGTERM,
 * SIGHUP (passed on) and SIGPIPE (ignored) stay as the supervision set them.
 * Fills *r (the caller's). Returns 0 once the job is over; or a negative errno: the job could
 * not be started (r->pid 0: fork failed; a failed exec is the job's exit status 127 or 126,
 * said on the job's stderr), or it could no longer be waited for (r->pid set).
 */
int hdx_supervise(const hdx_supervise_options *o, hdx_supervise_result *r);

#endif
