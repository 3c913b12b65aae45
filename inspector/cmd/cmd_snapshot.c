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
#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "hangdx/report.h"
#include "formats/snapshot.h"
#include "model/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx snapshot [-o FILE] [-d TRACEDIR] [--samples N] [--interval MS]\n"
            "                       [--build-timeout SEC] [--native-lines] [--frames] (PID...|--all)\n"
            "       hangdx snapshot -o DIR [options] --slurm-job [JOBID]\n\n"
            "Capture what 'hangdx inspect' sees of each PID and its descendants (native and\n"
            "Python stacks with locals, /proc, the locks they wait on, CPU samples) without\n"
            "classifying, as one hangdx.snapshot/2 file for this host. 'hangdx analyze' gives\n"
            "the verdict later from the snapshots of every host, after the job is gone.\n"
            "Only the environment variables of the design's list leave the host.\n\n"
            "  -o, --output FILE   write the snapshot to FILE (default: stdout)\n"
            "  -d, --trace-dir DIR the shim's trace directory (default: the HANGDX_TRACE_DIR\n"
            "                      of the processes, when they run under hangdx run)\n"
            "  --all               every rank process on this host (RANK, LOCAL_RANK,\n"
            "                      SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK set); inside\n"
            "                      a Slurm step (SLURM_JOB_ID set), only that job's, without the\n"
            "                      step that runs hangdx\n"
            "  --slurm-job [JOBID] every node of Slurm job JOBID (default: SLURM_JOB_ID, inside\n"
            "                      an allocation), one file per node in DIR (-o, made if missing):\n"
            "                      srun --overlap --jobid JOBID --ntasks-per-node 1 runs\n"
            "                      'hangdx snapshot --all --frames' on each node (this binary's\n"
            "                      path, which must be the same on every node) and the snapshots\n"
            "                      come back through srun's output\n"
            "  --frames            write the snapshot to stdout as short tagged lines that survive\n"
            "                      a launcher mixing the output of many nodes (what --slurm-job\n"
            "                      runs on each node)\n"
            "  --samples N         samples to take (default 2)\n"
            "  --interval MS       time between samples (default 250)\n"
            "  --build-timeout SEC recorded for analyze's compile_stall rule (default 1800)\n"
            "  --native-lines      native frames also get their source file:line, from the DWARF\n"
            "                      of the debug files (/usr/lib/debug): slower, about 0.1 s of\n"
            "                      CPU per large binary; without it, function and module+offset\n\n"
            "examples:\n"
            "  hangdx snapshot -o snap.json 4123\n"
            "  hangdx snapshot --all -o snap-$(hostname).json\n"
            "  srun --overlap --jobid 1234 --ntasks-per-node 1 \\\n"
            "      sh -c 'hangdx snapshot --all -o snap-$(hostname).json'\n"
            "  hangdx analyze snap-*.json traces/\n"
            "  hangdx snapshot --slurm-job 1234 -o snaps/   # snaps/snap-<node>.json, one per node\n"
            "  hangdx analyze snaps/snap-*.json\n\n"
            "exit status: 0 snapshot written, 1 partial (some processes unreadable), 2 failure,\n"
            "64 usage error.\n");
}

int hdx_cmd_snapshot(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, HDX_CLI_CAPTURE_OPTIONS,
        {"frames", no_argument, NULL, 'F'},       {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL;
    int c, status = HDX_EXIT_USAGE, frames = 0;
    hdx_cli_capture o;
    hdx_cli_capture_init(&o);
    hdx_evidence *ev = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:d:h", opts, NULL)) != -1) {
        int r = hdx_cli_capture_option("snapshot", c, optarg, &o);
        if (r < 0)
            goto out;
        if (r > 0)
            continue;
        switch (c) {
        case 'o':
            if (hdx_cli_once("snapshot", "-o", &out, optarg))
                goto out;
            break;
        case 'F': frames = 1; break;
        case 'h': usage(stdout); status = HDX_EXIT_OK; goto out;
        default: usage(stderr); goto out;
        }
    }
    if (hdx_cli_capture_pids("snapshot", argc - optind, argv + optind, &o))
        goto out;
    if (o.slurm) {
        status = hdx_cli_slurm_snapshots("snapshot", &o, out, frames);
        goto out;
    }
    if (frames && out) {
        hdx_say(stderr, "hangdx snapshot: --frames writes to stdout, not to a file: drop -o %s\n", out);
        goto out;
    }
    status = HDX_EXIT_FAILURE;
    if (out && hdx_cli_check_output("snapshot", "snapshot", "-o", out))
        goto out;
    int failures = 0;
    if (!(ev = hdx_evidence_new()) || hdx_cli_capture_run("snapshot", ev, &o, &failures))
        goto out;
    int rc = frames ? hdx_cli_write_frames(ev) : hdx_snapshot_write(ev, out);
    if (rc) {
        hdx_say(stderr, "hangdx snapshot: cannot write the snapshot to %s: %s\n", out ? out : "stdout",
                strerror(-rc));
        goto out;
    }
    if (out)
        hdx_say(stderr, "hangdx: snapshot of %zu process%s written to %s; 'hangdx analyze %s' gives the verdict\n",
                ev->n_procs, ev->n_procs == 1 ? "" : "es", out, out);
    status = hdx_cli_capture_status("snapshot", ev, failures);
out:
    hdx_cli_capture_clear(&o);
    hdx_evidence_free(ev);
    return status;
}
