/*
 * hangdx inspect: discover → read /proc → find the locks waited on →
 * sample (CPU time, native stacks) → classify → report.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "cmd.h"
#include "hangdx/report.h"
#include "hangdx/trace.h"
#include "locks.h"
#include "proc.h"
#include "report.h"
#include "sample.h"
#include "traces.h"
#include "util.h"

/* Bound of the syscall watch of a polling thread, ms (style.md: well under a second). */
#define WATCH_MS 400

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx inspect [--json] [-o FILE] [-d TRACEDIR] [--samples N] [--interval MS]\n"
            "                      [--build-timeout SEC] PID...\n\n"
            "Attach to each PID and its descendants, read their native and Python stacks and\n"
            "/proc, find the locks they wait on, and say why they hang: the verdict first,\n"
            "then the evidence.\n\n"
            "  --json              print the hangdx.report/1 JSON object on stdout\n"
            "  -o, --output FILE   write the report to FILE instead of stdout\n"
            "  -d, --trace-dir DIR the shim's trace directory (default: the HANGDX_TRACE_DIR\n"
            "                      of the inspected processes, when they run under hangdx run)\n"
            "  --samples N         samples to take (default 2); busy vs stuck comes from CPU\n"
            "                      time between samples\n"
            "  --interval MS       time between samples (default 250)\n"
            "  --build-timeout SEC a build holding its lock longer is a compile_stall (default 1800)\n\n"
            "examples:\n"
            "  hangdx inspect 4123                   # a hung rank, or its launcher\n"
            "  hangdx inspect --json -o report.json $(pgrep -f pretrain.py)\n"
            "  hangdx inspect -d traces/ --samples 4 --interval 500 4123\n\n"
            "exit status: 0 report produced, 1 partial (some processes unreadable), 2 failure,\n"
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

/* Read pid (and nothing else) into ev unless it is there already. */
static int add_process(hdx_evidence *ev, int pid)
{
    if (hdx_evidence_find_process(ev, pid))
        return 0;
    hdx_process *p = hdx_evidence_add_process(ev);
    if (!p)
        return -ENOMEM;
    int64_t t0 = hdx_mono_ns();
    int rc = hdx_proc_read(p, pid);
    if (rc == -ESRCH) {
        hdx_process_clear(p);
        ev->n_procs--;
        return rc;
    }
    /* Until the last sample, window_ms holds the time of the first one. */
    p->window_ms = t0 / 1000000;
    return rc;
}

/* The processes behind lock holders that were not asked for, with their descendants
 * (a holder's ninja and compilers tell a running build from a stuck one). */
static int add_lock_holders(hdx_evidence *ev)
{
    for (size_t i = 0; i < ev->n_locks; i++) {
        int holder = ev->locks[i].holder_pid;
        if (holder <= 0 || hdx_evidence_find_process(ev, holder))
            continue;
        int *pids = NULL;
        size_t n = 0;
        if (hdx_proc_descendants(&holder, 1, &pids, &n) != 0)
            continue;
        for (size_t j = 0; j < n; j++)
            if (add_process(ev, pids[j]) == -ENOMEM) {
                free(pids);
                return -ENOMEM;
            }
        free(pids);
    }
    return 0;
}

/* -d, else the first HANGDX_TRACE_DIR among the processes' environments. */
static int load_traces(hdx_evidence *ev, const char *dir)
{
    char *found = NULL;
    for (size_t i = 0; !dir && i < ev->n_procs; i++)
        if ((found = hdx_proc_getenv(ev->procs[i].pid, HDX_TRACE_DIR_ENV)))
            dir = found;
    if (!dir)
        return 0; /* the lock resolver says what no trace leaves unknown */
    hdx_trace_set *set = NULL;
    char *err = NULL;
    int rc = hdx_trace_load_dir(dir, &set, &err);
    if (rc == 0) {
        rc = hdx_trace_to_evidence(set, ev, 0);
    } else {
        hdx_evidence_note(ev, "traces not read: %s", err ? err : strerror(-rc));
        rc = 0;
    }
    free(err);
    free(found);
    hdx_trace_set_free(set);
    return rc;
}

/* Merged native and Python stacks, with locals, of the live processes from
 * index `from` on; returns how many could not be read. */
static int take_stacks(hdx_evidence *ev, size_t from)
{
    int failures = 0;
    for (size_t i = from; i < ev->n_procs; i++)
        if (ev->procs[i].alive != 0 &&
            hdx_sample_stacks(&ev->procs[i], ev, HDX_SAMPLE_PYTHON | HDX_SAMPLE_LOCALS) != 0)
            failures++;
    return failures;
}

int hdx_cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},        {"output", required_argument, NULL, 'o'},
        {"trace-dir", required_argument, NULL, 'd'}, {"samples", required_argument, NULL, 's'},
        {"interval", required_argument, NULL, 'i'},  {"build-timeout", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    int json = 0;
    const char *out = NULL, *trace_dir = NULL;
    long samples = 2, interval = 250, build_timeout = 1800;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jo:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'd': trace_dir = optarg; break;
        case 's':
            if (parse_int(optarg, 1, 100, &samples)) {
                fprintf(stderr, "hangdx inspect: --samples wants a number from 1 to 100, not '%s'\n", optarg);
                return HDX_EXIT_USAGE;
            }
            break;
        case 'i':
            if (parse_int(optarg, 1, 60000, &interval)) {
                fprintf(stderr, "hangdx inspect: --interval wants milliseconds from 1 to 60000, not '%s'\n", optarg);
                return HDX_EXIT_USAGE;
            }
            break;
        case 'b':
            if (parse_int(optarg, 1, 7 * 86400, &build_timeout)) {
                fprintf(stderr, "hangdx inspect: --build-timeout wants seconds, not '%s'\n", optarg);
                return HDX_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return HDX_EXIT_OK;
        default: usage(stderr); return HDX_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "hangdx inspect: no PID given\n\n");
        usage(stderr);
        return HDX_EXIT_USAGE;
    }
    size_t n_given = (size_t)(argc - optind);
    int *given = calloc(n_given, sizeof *given);
    if (!given)
        return HDX_EXIT_FAILURE;
    for (size_t i = 0; i < n_given; i++) {
        long v;
        if (parse_int(argv[optind + (int)i], 1, 1 << 22, &v)) {
            fprintf(stderr, "hangdx inspect: '%s' is not a process id\n", argv[optind + (int)i]);
            free(given);
            return HDX_EXIT_USAGE;
        }
        given[i] = (int)v;
    }

    int status = HDX_EXIT_FAILURE;
    hdx_evidence *ev = hdx_evidence_new();
    hdx_verdict v = {0};
    int *pids = NULL;
    size_t n_pids = 0;
    if (!ev)
        goto out;
    ev->live = 1;
    ev->host = strdup(hdx_hostname());
    ev->samples = (int)samples;
    ev->interval_ms = (int)interval;
    ev->build_timeout_s = build_timeout;

    /* Reading a process is its first sample (hdx_proc_read). */
    for (size_t i = 0; i < n_given; i++) {
        int rc = hdx_proc_descendants(&given[i], 1, &pids, &n_pids);
        if (rc == -ESRCH) {
            fprintf(stderr, "hangdx inspect: no process %d — check the PID (ps -ef | grep python)\n", given[i]);
            continue;
        }
        for (size_t j = 0; rc == 0 && j < n_pids; j++) {
            int r = add_process(ev, pids[j]);
            if (r == -EACCES)
                fprintf(stderr, "hangdx inspect: cannot read /proc/%d — run as the same user or as root\n", pids[j]);
        }
        free(pids);
        pids = NULL;
    }
    if (!ev->n_procs) {
        fprintf(stderr, "hangdx inspect: nothing to inspect\n");
        goto out;
    }
    fprintf(stderr, "hangdx: inspecting %zu process%s, %ld sample%s %ld ms apart...\n", ev->n_procs,
            ev->n_procs == 1 ? "" : "es", samples, samples == 1 ? "" : "s", interval);

    if (load_traces(ev, trace_dir) != 0)
        goto out;
    /* Stacks first: a thread's Python frames can name the lock it waits on. */
    int failures = take_stacks(ev, 0);
    size_t asked = ev->n_procs;
    hdx_locks_options lo = {.watch_ms = WATCH_MS};
    if (hdx_locks_collect(ev, &lo) != 0 || hdx_locks_resolve(ev) != 0 || add_lock_holders(ev) != 0)
        goto out;
    failures += take_stacks(ev, asked);

    for (long s = 2; s <= samples; s++) {
        hdx_sleep_ms((int)interval);
        for (size_t i = 0; i < ev->n_procs; i++)
            if (ev->procs[i].alive != 0)
                hdx_proc_sample(&ev->procs[i]);
    }
    int64_t now_ms = hdx_mono_ns() / 1000000;
    for (size_t i = 0; i < ev->n_procs; i++)
        ev->procs[i].window_ms = samples > 1 ? now_ms - ev->procs[i].window_ms : 0;
    if (hdx_locks_resolve(ev) != 0 || hdx_classify(ev, &v) != 0)
        goto out;
    int rc = hdx_report_write(ev, &v, json, out);
    if (rc) {
        fprintf(stderr, "hangdx inspect: cannot write the report to %s: %s\n", out ? out : "stdout", strerror(-rc));
        goto out;
    }
    int partial = failures > 0;
    for (size_t i = 0; i < ev->n_procs; i++)
        partial |= ev->procs[i].read_error != 0 && ev->procs[i].read_error != -ESRCH;
    status = partial ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
out:
    free(given);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
    return status;
}
