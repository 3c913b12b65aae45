/*
 * hangdx inspect: discover → read /proc → find the locks waited on →
 * sample (CPU time, native stacks) → classify → report.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "classify.h"
#include "cmd.h"
#include "hangdx/report.h"
#include "report.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx inspect [--json] [-o FILE] [-d TRACEDIR] [--samples N] [--interval MS]\n"
            "                      [--build-timeout SEC] (PID...|--all)\n\n"
            "Attach to each PID and its descendants, read their native and Python stacks and\n"
            "/proc, find the locks they wait on, and say why they hang: the verdict first,\n"
            "then the evidence. A PID may be a launcher (torchrun, mpirun, srun, hangdx run)\n"
            "or any rank: a rank brings its sibling ranks.\n\n"
            "  --all               every rank process on this host (hangdx's own excluded)\n"
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
            "  hangdx inspect --all                  # every rank on this host\n"
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

int hdx_cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},        {"output", required_argument, NULL, 'o'},
        {"trace-dir", required_argument, NULL, 'd'}, {"samples", required_argument, NULL, 's'},
        {"interval", required_argument, NULL, 'i'},  {"build-timeout", required_argument, NULL, 'b'},
        {"all", no_argument, NULL, 'a'},         {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, all = 0;
    const char *out = NULL, *trace_dir = NULL;
    long samples = 2, interval = 250, build_timeout = 1800;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jo:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'a': all = 1; break;
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
    if (optind >= argc && !all) {
        fprintf(stderr, "hangdx inspect: no PID given (or --all)\n\n");
        usage(stderr);
        return HDX_EXIT_USAGE;
    }
    size_t n_given = (size_t)(argc - optind);
    int *given = calloc(n_given + 1, sizeof *given);
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
    if (!ev)
        goto out;
    ev->build_timeout_s = build_timeout;

    hdx_capture_options co = {given, n_given, all, trace_dir, (int)samples, (int)interval};
    fprintf(stderr, "hangdx: inspecting%s%s, %ld sample%s %ld ms apart...\n", n_given ? " the given processes" : "",
            all ? (n_given ? " and every rank on this host" : " every rank on this host") : "", samples,
            samples == 1 ? "" : "s", interval);
    int failures = 0;
    if (hdx_capture(ev, &co, &failures) != 0)
        goto out;
    for (size_t i = 0; i < ev->n_notes; i++)
        if (!strncmp(ev->notes[i], "no process ", 11))
            fprintf(stderr, "hangdx inspect: %s — check the PID (ps -ef | grep python)\n", ev->notes[i]);
    if (!ev->n_procs) {
        fprintf(stderr, "hangdx inspect: nothing to inspect%s\n", all ? ": no rank process on this host" : "");
        goto out;
    }
    if (hdx_classify(ev, &v) != 0)
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
