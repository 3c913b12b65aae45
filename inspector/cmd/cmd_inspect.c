/*
 * hangdx inspect: discover → read /proc → find the locks waited on →
 * sample (CPU time, native stacks) → classify → report.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify.h"
#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "hangdx/report.h"
#include "model/util.h"
#include "report/html.h"
#include "report/report.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx inspect [--json [--full] [--schema 1|2]|--format FMT] [--tree|--no-tree]\n"
            "                      [--html FILE] [-o FILE] [-d TRACEDIR] [--samples N] [--interval MS]\n"
            "                      [--build-timeout SEC] [--native-lines]\n"
            "                      (PID...|--all|--slurm-job [JOBID])\n\n"
            "Attach to each PID and its descendants, read their native and Python stacks and\n"
            "/proc, find the locks they wait on, and say why they hang: the verdict first,\n"
            "then the evidence. A PID may be a launcher (torchrun, mpirun, srun, hangdx run)\n"
            "or any rank: a rank brings its sibling ranks.\n\n"
            "  --all               every rank process on this host (hangdx's own excluded);\n"
            "                      inside a Slurm step, only the processes of its job\n"
            "  --slurm-job [JOBID] every node of Slurm job JOBID (default: SLURM_JOB_ID, inside\n"
            "                      an allocation): srun --overlap --jobid JOBID --ntasks-per-node 1\n"
            "                      runs 'hangdx snapshot --all' on each node (this binary's path,\n"
            "                      which must be the same on every node), brings the snapshots\n"
            "                      back through srun's output, and analyzes them together\n"
            HDX_CLI_REPORT_HELP
            "  -o, --output FILE   write the report to FILE instead of stdout\n"
            "  -d, --trace-dir DIR the shim's trace directory (default: the HANGDX_TRACE_DIR\n"
            "                      of the inspected processes, when they run under hangdx run)\n"
            "  --samples N         samples to take (default 2); busy vs stuck comes from CPU\n"
            "                      time between samples\n"
            "  --interval MS       time between samples (default 250)\n"
            "  --build-timeout SEC a build holding its lock longer is a compile_stall (default 1800)\n"
            "  --native-lines      native frames also get their source file:line, from the DWARF\n"
            "                      of the debug files (/usr/lib/debug): slower, about 0.1 s of\n"
            "                      CPU per large binary; without it, function and module+offset\n\n"
            "examples:\n"
            "  hangdx inspect 4123                   # a hung rank, or its launcher\n"
            "  hangdx inspect --all                  # every rank on this host\n"
            "  hangdx inspect --slurm-job 1234       # every node of Slurm job 1234\n"
            "  hangdx inspect --slurm-job --json     # inside the job's allocation\n"
            "  hangdx inspect --json -o report.json $(pgrep -f pretrain.py)\n"
            "  hangdx inspect -d traces/ --samples 4 --interval 500 4123\n"
            "  hangdx inspect --all --format speedscope -o hang.speedscope.json\n\n"
            "exit status: 0 report produced, 1 partial (some processes unreadable), 2 failure,\n"
            "64 usage error.\n");
}

int hdx_cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {
        HDX_CLI_REPORT_OPTIONS,  {"output", required_argument, NULL, 'o'},
        HDX_CLI_CAPTURE_OPTIONS, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, status = HDX_EXIT_USAGE;
    hdx_report_options ro = {HDX_REPORT_TEXT, HDX_TREE_AUTO, 0, NULL};
    const char *out = NULL;
    hdx_cli_capture o;
    hdx_cli_capture_init(&o);
    hdx_evidence *ev = NULL;
    hdx_verdict v = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "jo:d:h", opts, NULL)) != -1) {
        int r = hdx_cli_capture_option("inspect", c, optarg, &o);
        if (!r)
            r = hdx_cli_report_option("inspect", c, optarg, &ro);
        if (r < 0)
            goto out;
        if (r > 0)
            continue;
        switch (c) {
        case 'o':
            if (hdx_cli_once("inspect", "-o", &out, optarg))
                goto out;
            break;
        case 'h': usage(stdout); status = HDX_EXIT_OK; goto out;
        default: usage(stderr); goto out;
        }
    }
    if (hdx_cli_report_check("inspect", &ro) || hdx_cli_capture_pids("inspect", argc - optind, argv + optind, &o))
        goto out;
    status = HDX_EXIT_FAILURE;
    int failures = 0;
    if ((out && hdx_cli_check_output("inspect", "report", "-o", out)) ||
        (ro.html && hdx_cli_check_output("inspect", "HTML report", "--html", ro.html)))
        goto out;
    if (!(ev = hdx_evidence_new()) ||
        (o.slurm ? hdx_cli_slurm_merged("inspect", &o, ev, &failures)
                 : hdx_cli_capture_run("inspect", ev, &o, &failures)) ||
        hdx_evidence_label(ev) || hdx_classify(ev, &v))
        goto out;
    int rc = hdx_report_write(ev, &v, &ro, out);
    if (rc) {
        hdx_say(stderr, "hangdx inspect: cannot write the report to %s: %s\n", out ? out : "stdout", strerror(-rc));
        goto out;
    }
    hdx_cli_export_check("inspect", ev, &ro);
    if (ro.html && (rc = hdx_report_html_write(ev, &v, ro.html))) {
        hdx_say(stderr, "hangdx inspect: cannot write the HTML report to %s: %s\n", ro.html, strerror(-rc));
        goto out;
    }
    status = hdx_cli_capture_status("inspect", ev, failures);
out:
    hdx_cli_capture_clear(&o);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
    return status;
}
