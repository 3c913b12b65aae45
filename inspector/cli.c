#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "hangdx/report.h"
#include "util.h"

void hdx_cli_capture_init(hdx_cli_capture *o)
{
    memset(o, 0, sizeof *o);
    o->samples = 2;
    o->interval_ms = 250;
    o->build_timeout = 1800;
}

void hdx_cli_capture_clear(hdx_cli_capture *o)
{
    free(o->pids);
    o->pids = NULL;
    o->n_pids = 0;
}

int hdx_cli_capture_option(const char *cmd, int c, const char *arg, hdx_cli_capture *o)
{
    switch (c) {
    case 'd': o->trace_dir = arg; return 1;
    case 'a': o->all = 1; return 1;
    case 's':
        if (!hdx_parse_long(arg, 1, 100, &o->samples))
            return 1;
        fprintf(stderr, "hangdx %s: --samples wants a number from 1 to 100, not '%s'\n", cmd, arg);
        return -1;
    case 'i':
        if (!hdx_parse_long(arg, 1, 60000, &o->interval_ms))
            return 1;
        fprintf(stderr, "hangdx %s: --interval wants milliseconds from 1 to 60000, not '%s'\n", cmd, arg);
        return -1;
    case 'b':
        if (!hdx_parse_long(arg, 1, 7 * 86400, &o->build_timeout))
            return 1;
        fprintf(stderr, "hangdx %s: --build-timeout wants seconds from 1 to 604800, not '%s'\n", cmd, arg);
        return -1;
    default: return 0;
    }
}

int hdx_cli_capture_pids(const char *cmd, int argc, char **argv, hdx_cli_capture *o)
{
    if (argc <= 0 && !o->all) {
        fprintf(stderr, "hangdx %s: no PID given (or --all for every rank on this host); see 'hangdx %s --help'\n",
                cmd, cmd);
        return -1;
    }
    if (argc > 0 && !(o->pids = calloc((size_t)argc, sizeof *o->pids))) {
        fprintf(stderr, "hangdx %s: out of memory\n", cmd);
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        long v;
        if (hdx_parse_long(argv[i], 1, 1 << 22, &v)) {
            fprintf(stderr, "hangdx %s: '%s' is not a process id\n", cmd, argv[i]);
            return -1;
        }
        o->pids[o->n_pids++] = (int)v;
    }
    return 0;
}

int hdx_cli_capture_run(const char *cmd, hdx_evidence *ev, const hdx_cli_capture *o, int *failures)
{
    hdx_capture_options co = {o->pids, o->n_pids, o->all, o->trace_dir, (int)o->samples, (int)o->interval_ms};
    ev->build_timeout_s = o->build_timeout;
    fprintf(stderr, "hangdx %s: looking at %s%s, %ld sample%s %ld ms apart...\n", cmd,
            o->n_pids ? "the given processes" : "", o->all ? (o->n_pids ? " and every rank on this host" : "every rank on this host") : "",
            o->samples, o->samples == 1 ? "" : "s", o->interval_ms);
    int rc = hdx_capture(ev, &co, failures);
    if (rc) {
        fprintf(stderr, "hangdx %s: capture failed: %s\n", cmd, strerror(-rc));
        return -1;
    }
    for (size_t i = 0; i < ev->n_notes; i++)
        if (!strncmp(ev->notes[i], "no process ", 11))
            fprintf(stderr, "hangdx %s: %s — check the PID (ps -ef | grep python)\n", cmd, ev->notes[i]);
    if (!ev->n_procs) {
        fprintf(stderr, "hangdx %s: nothing to look at%s\n", cmd,
                o->all ? ": no rank process on this host (none has RANK, LOCAL_RANK, SLURM_PROCID, "
                         "OMPI_COMM_WORLD_RANK or PMI_RANK set, or they belong to another user)"
                       : "");
        return -1;
    }
    return 0;
}

int hdx_cli_capture_status(const hdx_evidence *ev, int failures)
{
    int partial = failures > 0;
    for (size_t i = 0; i < ev->n_procs; i++)
        partial |= ev->procs[i].read_error != 0 && ev->procs[i].read_error != -ESRCH;
    return partial ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
}
