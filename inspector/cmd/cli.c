#include "cmd/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify/classify.h"
#include "classify/groups.h" /* hdx_key_thread */
#include "gather/capture.h"
#include "hangdx/report.h"
#include "gather/slurm.h"
#include "model/outfile.h"
#include "model/util.h"

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
    case 'N': o->native_lines = 1; return 1;
    case 'J':
        o->slurm = 1;
        o->slurm_job = arg; /* NULL: the next word, or SLURM_JOB_ID (hdx_cli_capture_pids) */
        return 1;
    case 's':
        if (!hdx_parse_long(arg, 1, 100, &o->samples))
            return 1;
        hdx_say(stderr, "hangdx %s: --samples wants a number from 1 to 100, not '%s'\n", cmd, arg);
        return -1;
    case 'i':
        if (!hdx_parse_long(arg, 1, 60000, &o->interval_ms))
            return 1;
        hdx_say(stderr, "hangdx %s: --interval wants milliseconds from 1 to 60000, not '%s'\n", cmd, arg);
        return -1;
    case 'b':
        if (!hdx_parse_long(arg, 1, 7 * 86400, &o->build_timeout))
            return 1;
        hdx_say(stderr, "hangdx %s: --build-timeout wants seconds from 1 to 604800, not '%s'\n", cmd, arg);
        return -1;
    default: return 0;
    }
}

/* 1 (printed) when an earlier option set a setting to cur, another value than v and than its
 * default dflt: "--json --format dot", "--tree --no-tree". */
static int conflict(const char *cmd, int cur, int dflt, int v, const char *what)
{
    if (cur == dflt || cur == v)
        return 0;
    hdx_say(stderr, "hangdx %s: two options ask for different %s: give one\n", cmd, what);
    return 1;
}

int hdx_cli_once(const char *cmd, const char *flag, const char **dst, const char *arg)
{
    if (*dst) {
        hdx_say(stderr, "hangdx %s: %s given twice (%s, %s): give one\n", cmd, flag, *dst, arg);
        return -1;
    }
    *dst = arg;
    return 0;
}

#define FORMATS "report formats (--json, --format)"
#define TREES "stack trees (--tree, --no-tree)"

int hdx_cli_report_option(const char *cmd, int c, const char *arg, hdx_report_options *o)
{
    enum hdx_report_format format;
    switch (c) {
    case 'j':
        if (conflict(cmd, o->format, HDX_REPORT_TEXT, HDX_REPORT_JSON, FORMATS))
            return -1;
        o->format = HDX_REPORT_JSON;
        return 1;
    case 'T':
    case 'U':
        if (conflict(cmd, o->tree, HDX_TREE_AUTO, c == 'T', TREES))
            return -1;
        o->tree = c == 'T';
        return 1;
    case 'L': o->flags |= HDX_REPORT_FULL; return 1;
    case 'H': return hdx_cli_once(cmd, "--html", &o->html, arg) ? -1 : 1;
    case 'S':
        if (strcmp(arg, "1") && strcmp(arg, "2")) {
            hdx_say(stderr, "hangdx %s: --schema %s: give 1 (hangdx.report/1) or 2 (hangdx.report/2)\n", cmd, arg);
            return -1;
        }
        o->flags = (o->flags & ~HDX_REPORT_V1) | (!strcmp(arg, "1") ? HDX_REPORT_V1 : 0);
        return 1;
    case 'F':
        if (!hdx_report_format_parse(arg, &format)) {
            if (conflict(cmd, o->format, HDX_REPORT_TEXT, format, FORMATS))
                return -1;
            o->format = format;
            return 1;
        }
        hdx_say(stderr, "hangdx %s: --format wants text, json, speedscope, collapsed or dot, not '%s'\n", cmd, arg);
        return -1;
    default: return 0;
    }
}

int hdx_cli_report_check(const char *cmd, const hdx_report_options *o)
{
    if (o->flags && o->format != HDX_REPORT_JSON) {
        hdx_say(stderr, "hangdx %s: --full and --schema shape the JSON report: add --json\n", cmd);
        return -1;
    }
    if (o->tree != HDX_TREE_AUTO && o->format != HDX_REPORT_TEXT) {
        hdx_say(stderr, "hangdx %s: --tree and --no-tree shape the text report (the JSON report holds the stack "
                        "classes, --format dot always draws the tree): leave them out, or drop --json/--format\n",
                cmd);
        return -1;
    }
    if ((o->flags & HDX_REPORT_FULL) && (o->flags & HDX_REPORT_V1)) {
        hdx_say(stderr, "hangdx %s: --full is of hangdx.report/2 (a /1 report always holds every frame)\n", cmd);
        return -1;
    }
    return 0;
}

void hdx_cli_export_check(const char *cmd, const hdx_evidence *ev, const hdx_report_options *o)
{
    static const char *const names[] = {[HDX_REPORT_SPEEDSCOPE] = "speedscope profile",
                                        [HDX_REPORT_COLLAPSED] = "collapsed export",
                                        [HDX_REPORT_DOT] = "dot graph's stack tree"};
    if (o->format < HDX_REPORT_SPEEDSCOPE || o->format > HDX_REPORT_DOT)
        return;
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_thread *k = hdx_key_thread(&ev->procs[i]);
        if (k && k->n_frames)
            return;
    }
    hdx_say(stderr, "hangdx %s: the %s is empty: no process of the inputs has a stack (job logs and traces "
                    "carry none); give snapshots, cores or stack dumps of the ranks for their stacks\n",
            cmd, names[o->format]);
}

/* --slurm-job: its id from the one word left, or from SLURM_JOB_ID. 0 or -1 (printed). */
static int slurm_job_id(const char *cmd, int argc, char **argv, hdx_cli_capture *o)
{
    if (o->all || argc > 1 || (argc == 1 && o->slurm_job)) {
        hdx_say(stderr, "hangdx %s: --slurm-job takes the rank processes of every node of the job: give it "
                        "no PID and no --all (hangdx %s --slurm-job JOBID)\n", cmd, cmd);
        return -1;
    }
    if (argc == 1)
        o->slurm_job = argv[0];
    if (!o->slurm_job) {
        const char *env = getenv("SLURM_JOB_ID");
        if (!env || !*env) {
            hdx_say(stderr, "hangdx %s: --slurm-job without a job id, outside a Slurm allocation (SLURM_JOB_ID "
                            "is not set): give the id, e.g. 'hangdx %s --slurm-job 1234' (squeue -u $USER "
                            "lists yours)\n", cmd, cmd);
            return -1;
        }
        o->slurm_job = env;
    }
    if (!hdx_slurm_job_id_valid(o->slurm_job)) {
        hdx_say(stderr, "hangdx %s: '%s' is not a Slurm job id (digits, as squeue's JOBID column shows them, "
                        "e.g. 1234 or 1234_7)\n", cmd, o->slurm_job);
        return -1;
    }
    return 0;
}

int hdx_cli_capture_pids(const char *cmd, int argc, char **argv, hdx_cli_capture *o)
{
    if (o->slurm)
        return slurm_job_id(cmd, argc, argv, o);
    if (argc <= 0 && !o->all) {
        hdx_say(stderr, "hangdx %s: no PID given (or --all for every rank on this host); see 'hangdx %s --help'\n",
                cmd, cmd);
        return -1;
    }
    if (argc > 0 && !(o->pids = calloc((size_t)argc, sizeof *o->pids))) {
        hdx_say(stderr, "hangdx %s: out of memory\n", cmd);
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        long v;
        if (hdx_parse_long(argv[i], 1, 1 << 22, &v)) {
            hdx_say(stderr, "hangdx %s: '%s' is not a process id\n", cmd, argv[i]);
            return -1;
        }
        o->pids[o->n_pids++] = (int)v;
    }
    return 0;
}

int hdx_cli_check_output(const char *cmd, const char *what, const char *flag, const char *path)
{
    int e = -hdx_outfile_check(path); /* creates no name ("-" is standard output: model/outfile.h) */
    if (!e)
        return 0;
    if (e == EISDIR) {
        hdx_say(stderr, "hangdx %s: cannot write the %s to %s: it is a directory — give a file in it, "
                        "e.g. %s %s/%s-$(hostname).json\n", cmd, what, path, flag, path, what);
        return -1;
    }
    if (e == EPERM) {
        hdx_say(stderr, "hangdx %s: cannot write the %s to %s: it, or a directory on its way, is a symbolic link that another user owns, "
                        "and hangdx writes through no such link — remove it, or give the file it names "
                        "with %s FILE; nothing was done\n", cmd, what, path, flag);
        return -1;
    }
    hdx_say(stderr, "hangdx %s: cannot write the %s to %s: %s — %s%s FILE; nothing was done\n", cmd, what, path,
            strerror(e),
            e == ENOENT ? "its directory does not exist: create it, or choose another "
            : e == EACCES || e == EROFS ? "it or its directory is not writable: choose another "
                                        : "choose another ", flag);
    return -1;
}

/* 1 when paths a and b name one file: by device and inode where a exists, else as strings. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0)
        return !strcmp(a, b);
    return stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int hdx_cli_check_not_input(const char *cmd, const char *flag, const char *path, char *const *inputs, size_t n,
                            const char *other)
{
    for (size_t i = 0; i < n; i++)
        if (same_file(path, inputs[i])) {
            hdx_say(stderr, "hangdx %s: %s %s is an input (%s): the report would overwrite it; give another %s FILE\n",
                    cmd, flag, path, inputs[i], flag);
            return -1;
        }
    if (other && same_file(path, other)) {
        hdx_say(stderr, "hangdx %s: -o and --html both name %s: one would overwrite the other; give two files\n",
                cmd, path);
        return -1;
    }
    return 0;
}

int hdx_cli_capture_run(const char *cmd, hdx_evidence *ev, const hdx_cli_capture *o, int *failures)
{
    hdx_capture_options co = {o->pids,    o->n_pids,         o->all,
                              o->trace_dir, (int)o->samples, (int)o->interval_ms,
                              o->native_lines};
    ev->build_timeout_s = o->build_timeout;
    hdx_say(stderr, "hangdx %s: looking at %s%s, ", cmd, o->n_pids ? "the given processes" : "",
            o->all ? (o->n_pids ? " and every rank on this host" : "every rank on this host") : "");
    if (o->samples == 1)
        hdx_say(stderr, "1 sample...\n");
    else
        hdx_say(stderr, "%ld samples %ld ms apart...\n", o->samples, o->interval_ms);
    int rc = hdx_capture(ev, &co, failures);
    if (rc) {
        hdx_say(stderr, "hangdx %s: capture failed: %s\n", cmd, strerror(-rc));
        return -1;
    }
    /* What a snapshot records of each lock besides its facts, for people and older readers
     * (analyze judges again from the facts): the state classify judges now. */
    for (size_t i = 0; i < ev->n_locks; i++) {
        hdx_lock *l = &ev->locks[i];
        hdx_lock_judgement j;
        if (hdx_lock_judge(ev, l, &j) == 0) {
            l->kind = j.kind;
            l->state = j.state;
            l->holder_pid = j.holder_pid;
            l->unchecked = j.unchecked;
        }
    }
    for (size_t i = 0; i < ev->n_notes; i++)
        if (!strncmp(ev->notes[i], "no process ", 11))
            hdx_say(stderr, "hangdx %s: %s — check the PID (ps -ef | grep python)\n", cmd, ev->notes[i]);
        else if (!strncmp(ev->notes[i], "cannot attach to ", 17) || !strncmp(ev->notes[i], "/proc/", 6) ||
                 strstr(ev->notes[i], " exited while being inspected") || strstr(ev->notes[i], " is a kernel thread"))
            hdx_say(stderr, "hangdx %s: %s\n", cmd, ev->notes[i]); /* what is missing, and why */
    if (!ev->n_procs) {
        const char *job = getenv("SLURM_JOB_ID");
        if (o->all && job && *job)
            hdx_say(stderr, "hangdx %s: nothing to look at: no rank process of Slurm job %s on %s (hangdx runs "
                            "in that job, so --all takes only its processes)\n", cmd, job, hdx_hostname());
        else
            hdx_say(stderr, "hangdx %s: nothing to look at%s\n", cmd,
                    o->all ? ": no rank process on this host (none has RANK, LOCAL_RANK, SLURM_PROCID, "
                             "OMPI_COMM_WORLD_RANK or PMI_RANK set, or they belong to another user)"
                           : "");
        return -1;
    }
    return 0;
}

int hdx_cli_capture_status(const char *cmd, const hdx_evidence *ev, int failures)
{
    size_t unread = 0;
    for (size_t i = 0; i < ev->n_procs; i++)
        unread += ev->procs[i].read_error != 0 && ev->procs[i].read_error != -ESRCH;
    if (!failures && !unread)
        return HDX_EXIT_OK;
    hdx_say(stderr, "hangdx %s: partial result (exit status %d):", cmd, HDX_EXIT_PARTIAL);
    for (size_t i = 0, told = 0; i < ev->n_procs && told < 8; i++) {
        const hdx_process *p = &ev->procs[i];
        if (p->read_error != 0 && p->read_error != -ESRCH)
            hdx_say(stderr, "%s pid %d could not be read whole (%s)", told++ ? ";" : "", p->pid, strerror(-p->read_error));
    }
    if (failures)
        hdx_say(stderr, "%s the stacks of %d process%s could not be read", unread ? ";" : "", failures,
                failures == 1 ? "" : "es");
    hdx_say(stderr, "%s — the report's notes say what is missing and why\n", unread > 8 ? "; ..." : "");
    return HDX_EXIT_PARTIAL;
}
