/*
 * hangdx snapshot: the capture of inspect (hdx_capture: /proc, native and
 * Python stacks with locals, the locks waited on, CPU samples) without
 * classifying, written as hangdx.snapshot/1 for `hangdx analyze` to decide
 * later, anywhere.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "cmd.h"
#include "hangdx/report.h"
#include "proc.h"
#include "snapshot.h"
#include "util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx snapshot [-o FILE] [-d TRACEDIR] [--samples N] [--interval MS]\n"
            "                       [--build-timeout SEC] (PID... | --all)\n\n"
            "Capture what 'hangdx inspect' sees of each PID and its descendants (native and\n"
            "Python stacks with locals, /proc, the locks they wait on, CPU samples) without\n"
            "classifying, as one hangdx.snapshot/1 file for this host. 'hangdx analyze' gives\n"
            "the verdict later from the snapshots of every host, after the job is gone.\n"
            "Only the environment variables of the design's list leave the host.\n\n"
            "  -o, --output FILE   write the snapshot to FILE (default: stdout)\n"
            "  -d, --trace-dir DIR the shim's trace directory (default: the HANGDX_TRACE_DIR\n"
            "                      of the processes, when they run under hangdx run)\n"
            "  --all               every rank process on this host (RANK, LOCAL_RANK,\n"
            "                      SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK set)\n"
            "  --samples N         samples to take (default 2)\n"
            "  --interval MS       time between samples (default 250)\n"
            "  --build-timeout SEC recorded for analyze's compile_stall rule (default 1800)\n\n"
            "examples:\n"
            "  hangdx snapshot -o snap.json 4123\n"
            "  hangdx snapshot --all -o snap-$(hostname).json\n"
            "  srun --overlap --jobid 1234 --ntasks-per-node 1 \\\n"
            "      sh -c 'hangdx snapshot --all -o snap-$(hostname).json'\n"
            "  hangdx analyze snap-*.json traces/\n\n"
            "exit status: 0 snapshot written, 1 partial (some processes unreadable), 2 failure,\n"
            "64 usage error.\n");
}

static int parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* The parent of pid from /proc/PID/stat, or 0. */
static int parent_of(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    char *buf = hdx_read_file(path, 4096, NULL);
    const char *close = buf ? strrchr(buf, ')') : NULL;
    int ppid = 0;
    if (!close || sscanf(close + 1, " %*c %d", &ppid) != 1)
        ppid = 0;
    free(buf);
    return ppid;
}

/* Drop hangdx's own ancestors from pids (the shell or srun step that runs
 * `snapshot --all` has the rank variables of its step but is no rank). */
static void drop_ancestors(int *pids, size_t *n)
{
    int chain[64];
    size_t nc = 0;
    for (int p = getppid(); p > 1 && nc < 64; p = parent_of(p))
        chain[nc++] = p;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        int mine = 0;
        for (size_t j = 0; j < nc && !mine; j++)
            mine = pids[i] == chain[j];
        if (!mine)
            pids[k++] = pids[i];
    }
    *n = k;
}

int hdx_cmd_snapshot(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},   {"trace-dir", required_argument, NULL, 'd'},
        {"samples", required_argument, NULL, 's'},  {"interval", required_argument, NULL, 'i'},
        {"build-timeout", required_argument, NULL, 'b'}, {"all", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    const char *out = NULL, *trace_dir = NULL;
    long samples = 2, interval = 250, build_timeout = 1800;
    int all = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'd': trace_dir = optarg; break;
        case 'a': all = 1; break;
        case 's':
            if (parse_int(optarg, 1, 100, &samples)) {
                fprintf(stderr, "hangdx snapshot: --samples wants a number from 1 to 100, not '%s'\n", optarg);
                return HDX_EXIT_USAGE;
            }
            break;
        case 'i':
            if (parse_int(optarg, 1, 60000, &interval)) {
                fprintf(stderr, "hangdx snapshot: --interval wants milliseconds from 1 to 60000, not '%s'\n",
                        optarg);
                return HDX_EXIT_USAGE;
            }
            break;
        case 'b':
            if (parse_int(optarg, 1, 7 * 86400, &build_timeout)) {
                fprintf(stderr, "hangdx snapshot: --build-timeout wants seconds, not '%s'\n", optarg);
                return HDX_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return HDX_EXIT_OK;
        default: usage(stderr); return HDX_EXIT_USAGE;
        }
    }
    if (all == (optind < argc)) {
        fprintf(stderr, all ? "hangdx snapshot: give PIDs or --all, not both\n\n"
                            : "hangdx snapshot: no PID given (or --all for every rank on this host)\n\n");
        usage(stderr);
        return HDX_EXIT_USAGE;
    }

    int status = HDX_EXIT_FAILURE;
    int *given = NULL;
    size_t n_given = 0;
    hdx_evidence *ev = NULL;
    if (all) {
        int r = hdx_proc_find_ranks(&given, &n_given);
        if (r < 0) {
            fprintf(stderr, "hangdx snapshot: cannot scan /proc for rank processes: %s\n", strerror(-r));
            goto out;
        }
        drop_ancestors(given, &n_given);
        if (!n_given) {
            fprintf(stderr, "hangdx snapshot: no rank process on this host (none has RANK, LOCAL_RANK, SLURM_PROCID, "
                            "OMPI_COMM_WORLD_RANK or PMI_RANK set, or they belong to another user)\n");
            goto out;
        }
    } else {
        n_given = (size_t)(argc - optind);
        if (!(given = calloc(n_given, sizeof *given)))
            goto out;
        for (size_t i = 0; i < n_given; i++) {
            long v;
            if (parse_int(argv[optind + (int)i], 1, 1 << 22, &v)) {
                fprintf(stderr, "hangdx snapshot: '%s' is not a process id\n", argv[optind + (int)i]);
                status = HDX_EXIT_USAGE;
                goto out;
            }
            given[i] = (int)v;
        }
    }

    if (!(ev = hdx_evidence_new()))
        goto nomem;
    ev->build_timeout_s = build_timeout;
    /* --all is done here, not by hdx_capture's own `all`: hangdx's ancestors are dropped first. */
    hdx_capture_options co = {given, n_given, 0, trace_dir, (int)samples, (int)interval};
    fprintf(stderr, "hangdx: capturing %s, %ld sample%s %ld ms apart...\n",
            all ? "every rank on this host" : "the given processes", samples, samples == 1 ? "" : "s", interval);
    int failures = 0, r = hdx_capture(ev, &co, &failures);
    if (r < 0) {
        fprintf(stderr, "hangdx snapshot: capture failed: %s\n", strerror(-r));
        goto out;
    }
    for (size_t i = 0; !all && i < ev->n_notes; i++)
        if (!strncmp(ev->notes[i], "no process ", 11))
            fprintf(stderr, "hangdx snapshot: %s — check the PID (ps -ef | grep python)\n", ev->notes[i]);
    if (!ev->n_procs) {
        fprintf(stderr, "hangdx snapshot: nothing to capture\n");
        goto out;
    }
    int rc = hdx_snapshot_write(ev, out);
    if (rc) {
        fprintf(stderr, "hangdx snapshot: cannot write the snapshot to %s: %s\n", out ? out : "stdout",
                strerror(-rc));
        goto out;
    }
    if (out)
        fprintf(stderr, "hangdx: snapshot of %zu process%s written to %s; 'hangdx analyze %s' gives the verdict\n",
                ev->n_procs, ev->n_procs == 1 ? "" : "es", out, out);
    int partial = failures > 0;
    for (size_t i = 0; i < ev->n_procs; i++)
        partial |= ev->procs[i].read_error != 0 && ev->procs[i].read_error != -ESRCH;
    status = partial ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
    goto out;
nomem:
    fprintf(stderr, "hangdx snapshot: out of memory\n");
out:
    free(given);
    hdx_evidence_free(ev);
    return status;
}
