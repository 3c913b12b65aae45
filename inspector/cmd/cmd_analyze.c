/*
 * hangdx analyze: the verdict from captured evidence, after the job is gone.
 * Each input is recognised by its content: a trace directory (hangdx.trace/1),
 * a snapshot (hangdx.snapshot/2, or the earlier /1), a report (hangdx.report/2 or /1) or an ELF core
 * file of a hung rank (core.h), in any mix.
 * Every input adds to one evidence set (formats/inputs.h), which is then classified and
 * reported exactly as inspect does. Locks from snapshots and reports keep the state
 * their host saw when they were taken; only the others are resolved here.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify.h"
#include "cmd/cmd.h"
#include "formats/inputs.h"
#include "gather/locks.h"
#include "gather/proc.h" /* hdx_proc_trace_host */
#include "hangdx/report.h" /* exit statuses */
#include "model/util.h"
#include "cmd/cli.h"
#include "report/html.h"
#include "report/report.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx analyze [--json [--full] [--schema 1|2]|--format FMT] [--tree|--no-tree]\n"
            "                      [--html FILE] [-o FILE] INPUT...\n\n"
            "Give the verdict of a hang from what it left behind, after the job is gone. Each\n"
            "INPUT is recognised by its content:\n"
            "  - a snapshot file written by 'hangdx snapshot' (hangdx.snapshot/2 or /1), one per host;\n"
            "  - a report written by 'hangdx analyze --json' or 'inspect --json' (hangdx.report/2\n"
            "    or /1);\n"
            "  - another tool's stack dump of a rank: py-spy dump (text or --json), gdb\n"
            "    'thread apply all bt' (and py-bt), eu-stack -p, or Python faulthandler output\n"
            "    (a job log whose lines carry [rankN]: prefixes holds several ranks; a dump\n"
            "    without a prefix in a log whose lines are all one rank's is that rank's);\n"
            "  - a trace directory written by 'hangdx run' (one <host>-<pid>.jsonl per process),\n"
            "    with the report.json that 'run --hang-timeout' wrote into it, if any;\n"
            "  - a directory of snapshot files (*.json), such as 'hangdx snapshot --slurm-job -o DIR'\n"
            "    writes, one per node: a *.json file in it that is not a usable snapshot (empty,\n"
            "    cut short, not JSON) is named on stderr and in the notes and left out, and the\n"
            "    rest is analyzed (exit status 1); files not named *.json are not read (a note\n"
            "    counts them); saved reports in it are read only when none of its snapshots\n"
            "    is usable (beside them, a note names each);\n"
            "  - the output of 'hangdx snapshot --all --frames' of any number of nodes, mixed\n"
            "    line by line and prefixed as pdsh does ('node7: ...'); a node whose snapshot is\n"
            "    incomplete there is named on stderr and in the notes, and the verdict is from the\n"
            "    other nodes (exit status 1);\n"
            "  - a job log: a combined launcher log ([rank3]: or [default0]: prefixes, torchrun's\n"
            "    failure summary) or one file per rank, read with the patterns of\n"
            "    share/hangdx/patterns/logs.json (add your own in a file named by HANGDX_PATTERNS);\n"
            "  - an ELF core file of a hung rank (gcore PID, or a kernel core), read with the\n"
            "    executable and libraries of this machine (their build ids are checked).\n"
            "All inputs are merged into one job and one verdict; the same rank on two hosts is\n"
            "an error.\n\n"
            HDX_CLI_REPORT_HELP
            "  -o, --output FILE   write the report to FILE instead of stdout\n\n"
            "examples:\n"
            "  hangdx analyze traces/\n"
            "  hangdx analyze snap-node1.json snap-node2.json traces/\n"
            "  hangdx analyze --json pyspy-rank0.txt pyspy-rank1.txt pyspy-rank2.txt\n"
            "  hangdx analyze core.4123 traces/\n"
            "  hangdx analyze /tmp/hang-1234/              # snapshot --slurm-job -o /tmp/hang-1234/\n"
            "  hangdx analyze job.log                      # a launcher's combined log\n"
            "  hangdx analyze --json -o report.json traces/\n"
            "  hangdx analyze --format speedscope -o hang.speedscope.json /tmp/hang-1234/\n"
            "  hangdx analyze --format collapsed snap-*.json | flamegraph.pl > hang.svg\n"
            "  hangdx analyze --format dot snap-*.json | dot -Tsvg > waits-for.svg\n\n"
            "exit status: 0 report produced, 1 partial (a report from what could be read: a file\n"
            "of a snapshot directory, or a node of a --frames file, was left out; stderr and the\n"
            "notes say which), 2 failure (an input given by name could not be read), 64 usage error.\n");
}

/* The evidence analyzed last, kept to the exit: a job's is millions of small blocks (about
 * 5 KB a rank), and freeing them took 0.5 s of the 5.3 s that the analysis of 131 072 ranks
 * took (BENCHMARKS.md "Analyze of 8192, 32 768 and 131 072 ranks"), for memory that the exit
 * gives back at once. Reachable from here, it is no leak to a leak checker. */
static hdx_evidence *analyzed;

int hdx_cmd_analyze(int argc, char **argv)
{
    static const struct option opts[] = {
        HDX_CLI_REPORT_OPTIONS,
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    hdx_report_options ro = {HDX_REPORT_TEXT, HDX_TREE_AUTO, 0, NULL};
    const char *out = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jo:h", opts, NULL)) != -1) {
        int taken = hdx_cli_report_option("analyze", c, optarg, &ro);
        if (taken < 0)
            return HDX_EXIT_USAGE;
        if (taken)
            continue;
        switch (c) {
        case 'o':
            if (hdx_cli_once("analyze", "-o", &out, optarg))
                return HDX_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return HDX_EXIT_OK;
        default: usage(stderr); return HDX_EXIT_USAGE;
        }
    }
    if (hdx_cli_report_check("analyze", &ro)) {
        usage(stderr);
        return HDX_EXIT_USAGE;
    }
    if (optind >= argc) {
        hdx_say(stderr, "hangdx analyze: no input given\n\n");
        usage(stderr);
        return HDX_EXIT_USAGE;
    }
    char *const *inputs = argv + optind;
    size_t n_inputs = (size_t)(argc - optind);
    if ((out && hdx_cli_check_not_input("analyze", "-o", out, inputs, n_inputs, ro.html)) ||
        (ro.html && hdx_cli_check_not_input("analyze", "--html", ro.html, inputs, n_inputs, NULL)))
        return HDX_EXIT_USAGE;
    if ((out && hdx_cli_check_output("analyze", "report", "-o", out)) ||
        (ro.html && hdx_cli_check_output("analyze", "HTML report", "--html", ro.html)))
        return HDX_EXIT_FAILURE;

    int status = HDX_EXIT_FAILURE, r;
    char *err = NULL;
    hdx_load_result res = {0};
    hdx_load_options lo = {.trace_host = hdx_proc_trace_host()};
    hdx_verdict v;
    memset(&v, 0, sizeof v);
    hdx_evidence *ev = hdx_evidence_new();
    if (!ev)
        goto nomem;
    r = hdx_load_inputs(inputs, n_inputs, &lo, ev, &res, &err);
    for (size_t i = 0; i < res.n_left_out; i++)
        hdx_say(stderr, "hangdx analyze: %s\n", res.left_out[i]);
    if (r < 0)
        goto fail;
    /* The locks only traces brought are looked at here, now; classify judges them all. */
    if ((r = hdx_locks_record_facts(ev, 1)) < 0 || (r = hdx_evidence_label(ev)) < 0 ||
        (r = hdx_classify(ev, &v)) < 0)
        goto nomem;
    if ((r = hdx_report_write(ev, &v, &ro, out)) < 0) {
        hdx_say(stderr, "hangdx analyze: cannot write the report to %s: %s\n", out ? out : "stdout", strerror(-r));
        goto out;
    }
    hdx_cli_export_check("analyze", ev, &ro);
    if (ro.html && (r = hdx_report_html_write(ev, &v, ro.html)) < 0) {
        hdx_say(stderr, "hangdx analyze: cannot write the HTML report to %s: %s\n", ro.html, strerror(-r));
        goto out;
    }
    status = res.n_left_out ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
    goto out;
fail:
    if (r == -ENOMEM)
        goto nomem;
    hdx_say(stderr, "hangdx analyze: %s\n", err ? err : strerror(-r));
    goto out;
nomem:
    hdx_say(stderr, "hangdx analyze: out of memory\n");
out:
    free(err);
    hdx_load_result_clear(&res);
    hdx_verdict_clear(&v);
    hdx_evidence_free(analyzed); /* the one before, in a process that analyzes twice */
    analyzed = ev;
    return status;
}
