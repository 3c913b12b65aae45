/*
 * hangdx analyze: the verdict from captured evidence, after the job is gone.
 * Each input is recognised by its content: a trace directory (hangdx.trace/1),
 * a snapshot (hangdx.snapshot/2, or the earlier /1), a report (hangdx.report/1) or an ELF core
 * file of a hung rank (core.h), in any mix.
 * Every input adds to one evidence set, which is then classified and reported
 * exactly as inspect does. Locks from snapshots and reports keep the state
 * their host saw when they were taken; only the others are resolved here.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify/classify.h"
#include "formats/core.h"
#include "cmd/cmd.h"
#include "formats/foreign.h"
#include "hangdx/report.h"
#include "hangdx/trace.h"
#include "gather/locks.h"
#include "gather/proc.h" /* hdx_proc_trace_host */
#include "formats/logs.h"
#include "report/report.h"
#include "gather/slurm.h"
#include "formats/snapshot.h"
#include "formats/traces.h"
#include "model/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx analyze [--json] [-o FILE] INPUT...\n\n"
            "Give the verdict of a hang from what it left behind, after the job is gone. Each\n"
            "INPUT is recognised by its content:\n"
            "  - a snapshot file written by 'hangdx snapshot' (hangdx.snapshot/2 or /1), one per host;\n"
            "  - a report written by 'hangdx inspect --json' (hangdx.report/1);\n"
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
            "    counts them);\n"
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
            "  --json              print the hangdx.report/1 JSON object on stdout\n"
            "  -o, --output FILE   write the report to FILE instead of stdout\n\n"
            "examples:\n"
            "  hangdx analyze traces/\n"
            "  hangdx analyze snap-node1.json snap-node2.json traces/\n"
            "  hangdx analyze --json pyspy-rank0.txt pyspy-rank1.txt pyspy-rank2.txt\n"
            "  hangdx analyze core.4123 traces/\n"
            "  hangdx analyze /tmp/hang-1234/              # snapshot --slurm-job -o /tmp/hang-1234/\n"
            "  hangdx analyze job.log                      # a launcher's combined log\n"
            "  hangdx analyze --json -o report.json traces/\n\n"
            "exit status: 0 report produced, 1 partial (a report from what could be read: a file\n"
            "of a snapshot directory, or a node of a --frames file, was left out; stderr and the\n"
            "notes say which), 2 failure (an input given by name could not be read), 64 usage error.\n");
}

enum input_kind {
    INPUT_TRACE_DIR,
    INPUT_SNAPSHOT,
    INPUT_FOREIGN,
    INPUT_CORE,
    INPUT_LOG,
    INPUT_SNAPSHOT_DIR,
    INPUT_FRAMES
};

/* The log patterns, loaded at the first text input that is not a snapshot (logs.h). */
static hdx_log_patterns *log_patterns;

/* Is path a job log? 1, 0, or -errno with *err (the patterns could not be loaded). */
static int sniff_log(const char *path, char **err)
{
    if (!log_patterns) {
        int r = hdx_log_patterns_load_default(NULL, &log_patterns, err);
        if (r < 0)
            return r;
    }
    return hdx_log_sniff(log_patterns, path) > 0;
}

static int json_name(const struct dirent *de)
{
    size_t l = strlen(de->d_name);
    return l > 5 && !strcmp(de->d_name + l - 5, ".json");
}

/* How many *.json files directly in dir are snapshots (what makes dir a snapshot directory),
 * or -errno when dir is unreadable. */
static int snapshot_files(const char *dir)
{
    struct dirent **des = NULL;
    int n = scandir(dir, &des, json_name, alphasort), found = 0;
    if (n < 0)
        return -errno;
    for (int i = 0; i < n; i++) {
        char *p = found >= 0 ? hdx_asprintf("%s/%s", dir, des[i]->d_name) : NULL;
        if (!p)
            found = -ENOMEM;
        else if (hdx_snapshot_sniff(p) == HDX_INPUT_SNAPSHOT)
            found++;
        free(p);
        free(des[i]);
    }
    free(des);
    return found;
}

/* What path holds, from its content. 0 with *kind, or -errno with *err. */
static int recognise(const char *path, enum input_kind *kind, char **err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        *err = e == ENOENT ? hdx_asprintf("%s: no such file or directory", path)
                           : hdx_asprintf("%s: %s", path, strerror(e));
        return -e;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            int e = errno;
            *err = hdx_asprintf("%s: cannot read: %s", path, strerror(e));
            return -e;
        }
        struct dirent *de;
        size_t slen = strlen(HDX_TRACE_SUFFIX);
        int traces = 0;
        while (!traces && (de = readdir(d))) {
            size_t l = strlen(de->d_name);
            traces = l > slen && strcmp(de->d_name + l - slen, HDX_TRACE_SUFFIX) == 0;
        }
        closedir(d);
        if (traces) {
            *kind = INPUT_TRACE_DIR;
            return 0;
        }
        if (snapshot_files(path) > 0) {
            *kind = INPUT_SNAPSHOT_DIR; /* e.g. what 'hangdx snapshot --slurm-job -o DIR' wrote */
            return 0;
        }
        *err = hdx_asprintf("%s: not a hangdx trace directory (no <host>-<pid>%s files); 'hangdx run -d %s -- ...' "
                            "writes one. For a directory of per-rank logs or dumps, give its files: %s/*",
                            path, HDX_TRACE_SUFFIX, path, path);
        return -ENOENT;
    }
    if (hdx_core_sniff(path)) {
        *kind = INPUT_CORE;
        return 0;
    }
    if (hdx_snapshot_sniff(path) != HDX_INPUT_NOT_JSON) {
        *kind = INPUT_SNAPSHOT; /* the loader refuses a schema it does not know, by name */
        return 0;
    }
    if (hdx_frames_sniff(path)) {
        *kind = INPUT_FRAMES; /* snapshot --frames output of one or many nodes (slurm.h) */
        return 0;
    }
    int lr = sniff_log(path, err); /* a missing pattern file matters only when nothing else fits */
    if (lr > 0) {
        *kind = INPUT_LOG; /* a job log (logs.h); a stack dump in it is read too */
        return 0;
    }
    if (hdx_foreign_sniff_file(path) != HDX_FOREIGN_NONE) {
        free(*err);
        *err = NULL;
        *kind = INPUT_FOREIGN; /* py-spy, gdb, eu-stack or faulthandler text (foreign.h) */
        return 0;
    }
    if (lr < 0)
        return lr; /* *err says the log patterns are missing */
    *err = st.st_size == 0
               ? hdx_asprintf("%s: the file is empty", path)
               : hdx_asprintf("%s: hangdx does not know what this is; analyze reads 'hangdx snapshot' files, "
                              "'hangdx inspect --json' reports, trace directories of 'hangdx run', job logs with "
                              "lines it knows (share/hangdx/patterns/logs.json), ELF core files, and py-spy, gdb, "
                              "eu-stack or faulthandler dumps",
                              path);
    return -EINVAL;
}

/* A snapshot or report file into ev (or, with text, the snapshot of len bytes
 * that path held).
 * 0 or -errno with *err naming the file. */
static int add_loaded(hdx_evidence *ev, const char *path, hdx_evidence *one, int r,
                      char **err);

static int add_snapshot_text(hdx_evidence *ev, const char *path, const char *text, size_t len, char **err)
{
    hdx_evidence *one = hdx_evidence_new();
    if (!one)
        return -ENOMEM;
    int r = text ? hdx_snapshot_load_text(text, len, path, one, err) : hdx_snapshot_load(path, one, err);
    return add_loaded(ev, path, one, r, err);
}

/* one, loaded from path with result r, into ev (one is freed). */
static int add_loaded(hdx_evidence *ev, const char *path, hdx_evidence *one, int r,
                      char **err)
{
    char *merr = NULL;
    if (r == 0 && (r = hdx_snapshot_merge(ev, one, &merr)) < 0)
        *err = hdx_asprintf("%s: %s", path, merr ? merr : strerror(-r));
    free(merr);
    hdx_evidence_free(one);
    return r;
}

static int add_snapshot(hdx_evidence *ev, const char *path, char **err)
{
    return add_snapshot_text(ev, path, NULL, 0, err);
}

/*
 * The snapshot files named on the command line, loaded ahead on every CPU (snapshot.h's
 * batch): each file is parsed alone, so 1024 hosts' files load in parallel, and the
 * merge stays in the order of the command line, as does the first error.
 */
static hdx_snapshot_batch *batch;
static int *batch_at; /* per argv index: its file's place in the batch, or -1 */
static const char **batch_paths;

static void batch_start(int argc, char **argv, int first)
{
    size_t n = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (!(batch_at = malloc((size_t)argc * sizeof *batch_at)) || !(batch_paths = calloc((size_t)argc, sizeof *batch_paths)))
        return;
    for (int i = 0; i < argc; i++) {
        struct stat st;
        batch_at[i] = -1;
        if (i < first || stat(argv[i], &st) != 0 || !S_ISREG(st.st_mode) || hdx_core_sniff(argv[i]) ||
            hdx_snapshot_sniff(argv[i]) == HDX_INPUT_NOT_JSON)
            continue;
        batch_at[i] = (int)n;
        batch_paths[n++] = argv[i];
    }
    if (n >= 2) /* one file gains nothing from a thread */
        batch = hdx_snapshot_batch_start(batch_paths, n, cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus);
}

static void batch_end(void)
{
    hdx_snapshot_batch_free(batch);
    batch = NULL;
    free(batch_at);
    batch_at = NULL;
    free(batch_paths);
    batch_paths = NULL;
}

/* argv[i], a snapshot: from the batch when it holds it. */
static int add_snapshot_arg(hdx_evidence *ev, char **argv, int i, char **err)
{
    if (!batch || !batch_at || batch_at[i] < 0)
        return add_snapshot(ev, argv[i], err);
    hdx_evidence *one = NULL;
    int r = hdx_snapshot_batch_take(batch, (size_t)batch_at[i], &one, err);
    if (r == 0 && !one)
        r = -ENOMEM;
    return add_loaded(ev, argv[i], one, r, err);
}

/* An input that analyze leaves out (a bad file of a snapshot directory, an incomplete node of
 * a frames file): named on stderr and in the notes, and the exit status becomes partial. why
 * may start with name (the loaders' messages do): that is not said twice. 0 or -ENOMEM. */
static int left_out(hdx_evidence *ev, const char *name, const char *why, const char *rest, int *partial)
{
    size_t nl = strlen(name);
    if (!strncmp(why, name, nl) && !strncmp(why + nl, ": ", 2))
        why += nl + 2;
    *partial = 1;
    fprintf(stderr, "hangdx analyze: %s: left out: %s; the verdict is from %s\n", name, why, rest);
    return hdx_evidence_note(ev, "%s: left out: %s; the verdict is from %s", name, why, rest) < 0 ? -ENOMEM : 0;
}

/*
 * One snapshot of a directory or a frames file, after its loader returned lr: loaded (0), it
 * is merged into ev (add_loaded frees *one) and counted in *n_snapshots; -ENOMEM ends the
 * analysis; any other failure leaves *why (from lr when the loader said nothing) for the caller
 * to name the input it leaves out. Returns 1 taken, 0 left out, or a negative errno (*err set
 * by a failed merge).
 */
static int take_loaded(hdx_evidence *ev, const char *name, hdx_evidence **one, int lr, char **why, size_t *n_snapshots, char **err)
{
    if (lr == 0) {
        int r = add_loaded(ev, name, *one, 0, err); /* frees *one */
        *one = NULL;
        (*n_snapshots)++;
        return r < 0 ? r : 1;
    }
    if (lr == -ENOMEM)
        return -ENOMEM;
    if (!*why)
        *why = hdx_asprintf("%s", strerror(-lr));
    return 0;
}

/*
 * Every *.json file directly in dir (by name order) into ev, as 'hangdx snapshot --slurm-job -o
 * DIR' writes them. A *.json file that is not a usable snapshot (empty, not JSON, cut short,
 * another schema) is left out (left_out: stderr, a note, *partial); entries not named *.json are
 * not read, and a note counts them. *n_snapshots counts those taken. 0, or -errno with *err:
 * dir unreadable, no usable snapshot in it, or a merge that fails (the same rank on two hosts).
 */
static int add_snapshot_dir(hdx_evidence *ev, const char *dir, size_t *n_snapshots,
                            int *partial, char **err)
{
    struct dirent **des = NULL;
    int n = scandir(dir, &des, NULL, alphasort), r = 0;
    if (n < 0) {
        int e = errno;
        *err = hdx_asprintf("%s: cannot read: %s", dir, strerror(e));
        return -e;
    }
    size_t used = 0, bad = 0, ignored = 0;
    for (int i = 0; i < n; i++) {
        const char *base = des[i]->d_name;
        if (r < 0 || !strcmp(base, ".") || !strcmp(base, "..")) {
            free(des[i]);
            continue;
        }
        if (!json_name(des[i])) {
            ignored++;
            free(des[i]);
            continue;
        }
        char *path = hdx_asprintf("%s/%s", dir, base), *why = NULL;
        free(des[i]);
        hdx_evidence *one = NULL;
        int taken = 0;
        struct stat st;
        if (!path) {
            r = -ENOMEM;
        } else if (stat(path, &st) != 0) {
            why = hdx_asprintf("cannot read it: %s", strerror(errno));
        } else if (!S_ISREG(st.st_mode)) {
            why = hdx_asprintf("not a regular file");
        } else if (st.st_size == 0) {
            why = hdx_asprintf("the file is empty");
        } else if (hdx_snapshot_sniff(path) == HDX_INPUT_NOT_JSON) {
            why = hdx_asprintf("not a hangdx snapshot (not a JSON object with a \"schema\")");
        } else if (!(one = hdx_evidence_new())) {
            r = -ENOMEM;
        } else {
            int lr = hdx_snapshot_load(path, one, &why);
            if ((r = take_loaded(ev, path, &one, lr, &why, n_snapshots, err)) > 0) {
                r = 0;
                taken = 1;
                used++;
            }
        }
        if (r == 0 && why) {
            bad++;
            r = left_out(ev, path, why, "the other snapshots of the directory", partial);
        } else if (r == 0 && !taken) {
            r = -ENOMEM; /* a message that could not be made */
        }
        hdx_evidence_free(one);
        free(why);
        free(path);
    }
    free(des);
    if (r == 0 && !used) {
        *err = hdx_asprintf("%s: none of its %zu *.json file%s is a usable snapshot (see above)", dir, bad,
                            bad == 1 ? "" : "s");
        r = -ENODATA;
    }
    if (r == 0 && ignored &&
        hdx_evidence_note(ev, "%s: %zu entr%s not named *.json not read (a snapshot directory holds *.json files)",
                          dir, ignored, ignored == 1 ? "y" : "ies") < 0)
        r = -ENOMEM;
    return r;
}

/*
 * Every node's snapshot in a file of frames; *n_snapshots counts them. A node whose snapshot is
 * incomplete (its frames end early or came out of order) or unreadable is left out as the live
 * collector does (left_out: stderr, a note, *partial). 0, or -errno with *err: the file
 * unreadable, no complete snapshot in it, or a merge that fails.
 */
static int add_frames(hdx_evidence *ev, const char *path, size_t *n_snapshots,
                      int *partial, char **err)
{
    hdx_frames fr = {0};
    size_t used = 0;
    int r = hdx_frames_read_file(path, HDX_SNAPSHOT_MAX_BYTES, &fr, err);
    for (size_t i = 0; r == 0 && i < fr.n; i++) {
        const hdx_frames_doc *d = &fr.docs[i];
        char *name = hdx_asprintf("%s (%s)", path, d->id), *why = NULL;
        hdx_evidence *one = NULL;
        int taken = 0;
        if (!name || !(one = hdx_evidence_new())) {
            r = -ENOMEM;
        } else if (!d->complete) {
            why = hdx_asprintf("the snapshot is incomplete (%s)",
                               d->broken ? "its frames came out of order, or disagree with their end line"
                                         : "its frames end early: no end line");
        } else {
            int lr = hdx_snapshot_load_text(d->text, d->len, name, one, &why);
            if ((r = take_loaded(ev, name, &one, lr, &why, n_snapshots, err)) > 0) {
                r = 0;
                taken = 1;
                used++;
            }
        }
        if (r == 0 && why)
            r = left_out(ev, name, why, "the other nodes' snapshots: take that node's again", partial);
        else if (r == 0 && !taken)
            r = -ENOMEM; /* a message that could not be made */
        hdx_evidence_free(one);
        free(why);
        free(name);
    }
    if (r == 0 && !used) {
        *err = fr.n ? hdx_asprintf("%s: no node's snapshot in it is complete (%zu left out, see above): take them "
                                   "again", path, fr.n)
                    : hdx_asprintf("%s: no snapshot in its frames", path);
        r = -ENODATA;
    }
    hdx_frames_clear(&fr);
    return r;
}

/*
 * The report that 'hangdx run --hang-timeout -d DIR' wrote into its trace directory
 * (DIR/report.json, when there is one): the stacks of the hang, taken while the job lived,
 * merged as a snapshot would be. One that cannot be used is left out (stderr, a note,
 * *partial). 0, or -errno with *err (a merge that fails).
 */
static int add_run_report(hdx_evidence *ev, const char *dir, size_t *n_snapshots,
                          int *partial, char **err)
{
    char *path = hdx_asprintf("%s/report.json", dir), *why = NULL;
    struct stat st;
    if (!path)
        return -ENOMEM;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        free(path);
        return 0;
    }
    hdx_evidence *one = hdx_evidence_new();
    int r = one ? take_loaded(ev, path, &one, hdx_snapshot_load(path, one, &why), &why, n_snapshots,
                              err)
                : -ENOMEM;
    if (r == 0)
        r = left_out(ev, path, why ? why : "not a usable report", "the traces of the directory", partial);
    else if (r > 0)
        r = 0;
    hdx_evidence_free(one);
    free(why);
    free(path);
    return r;
}

/* The trace directory dir into ev. 0 or -errno with *err. */
static int add_trace_dir(hdx_evidence *ev, const char *dir, char **hosts_seen, char **err)
{
    hdx_trace_set *set = NULL;
    int r = hdx_trace_load_dir(dir, &set, err);
    if (r < 0)
        return r;
    if (set->n_images == 0) {
        if (set->n_notes) /* nothing trusted: say why (an untrusted directory or files) */
            *err = hdx_asprintf("%s%s", set->notes[0],
                                set->n_notes > 1 ? " (and other trace files ignored likewise)" : "");
        else
            *err = hdx_asprintf("%s: the trace files hold no process header: nothing to analyze", dir);
        hdx_trace_set_free(set);
        return -ENODATA;
    }
    r = hdx_trace_to_evidence(set, ev, 1, hdx_proc_trace_host());
    /* One host for all traces: the evidence's host. Several: none. */
    for (size_t i = 0; r == 0 && i < set->n_images; i++) {
        const char *h = set->images[i].host;
        if (!h)
            continue;
        if (!*hosts_seen) {
            if (!(*hosts_seen = strdup(h)))
                r = -ENOMEM;
        } else if (strcmp(*hosts_seen, h) != 0 && strcmp(*hosts_seen, "") != 0) {
            free(*hosts_seen);
            if (!(*hosts_seen = strdup("")))
                r = -ENOMEM;
        }
    }
    if (r < 0 && !*err)
        *err = hdx_asprintf("%s: %s", dir, strerror(-r));
    hdx_trace_set_free(set);
    return r;
}

int hdx_cmd_analyze(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, c;
    const char *out = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jo:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return HDX_EXIT_OK;
        default: usage(stderr); return HDX_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "hangdx analyze: no input given\n\n");
        usage(stderr);
        return HDX_EXIT_USAGE;
    }

    int status = HDX_EXIT_FAILURE, r, partial = 0;
    struct log_dump {
        const char *path; /* argv's */
        int rank;         /* the one rank of the log's lines, HDX_UNKNOWN */
    } *dumps = NULL;
    size_t n_dumps = 0;
    char *err = NULL, *host = NULL;
    size_t n_snapshots = 0, n_logs = 0;
    hdx_verdict v;
    memset(&v, 0, sizeof v);
    hdx_evidence *ev = hdx_evidence_new();
    if (!ev)
        goto nomem;
    ev->live = 0;
    ev->samples = 0;
    batch_start(argc, argv, optind);
    for (int i = optind; i < argc; i++) {
        enum input_kind kind = INPUT_TRACE_DIR;
        if ((r = recognise(argv[i], &kind, &err)) < 0)
            goto fail;
        switch (kind) {
        case INPUT_TRACE_DIR:
            if ((r = add_trace_dir(ev, argv[i], &host, &err)) == 0)
                r = add_run_report(ev, argv[i], &n_snapshots, &partial, &err);
            break;
        case INPUT_SNAPSHOT:
            r = add_snapshot_arg(ev, argv, i, &err);
            n_snapshots++;
            break;
        case INPUT_FRAMES:
            r = add_frames(ev, argv[i], &n_snapshots, &partial, &err);
            break;
        case INPUT_SNAPSHOT_DIR:
            r = add_snapshot_dir(ev, argv[i], &n_snapshots, &partial, &err);
            break;
        case INPUT_FOREIGN:
            r = hdx_foreign_load(argv[i], ev, &err);
            n_snapshots++; /* stacks, as a snapshot has */
            break;
        case INPUT_CORE:
            r = hdx_core_load(argv[i], ev, &err);
            n_snapshots++; /* stacks, as a snapshot has */
            break;
        case INPUT_LOG: {
            int only_rank = HDX_UNKNOWN;
            r = hdx_log_load_ranked(log_patterns, argv[i], ev, &only_rank, &err);
            n_logs++;
            if (r == 0 && hdx_foreign_sniff_file(argv[i]) != HDX_FOREIGN_NONE) {
                /* The stack dump in the log: read after every other input (below), so that a
                 * rank that a snapshot or a core shows keeps those stacks. */
                struct log_dump *slot = hdx_append((void **)&dumps, &n_dumps, sizeof *slot);
                if (!slot)
                    goto nomem;
                slot->path = argv[i];
                slot->rank = only_rank;
                n_snapshots++;
            }
            break;
        }
        }
        if (r < 0)
            goto fail;
    }
    for (size_t i = 0; i < n_dumps; i++)
        if ((r = hdx_foreign_load_log(dumps[i].path, dumps[i].rank, ev, &err)) < 0)
            goto fail;
    if (n_logs && hdx_log_pgroups(ev))
        goto nomem;
    /* One host among all inputs: the evidence's host. Several: none. */
    if (n_snapshots) {
        const char *one = ev->host;
        int several = host && !*host;
        for (size_t i = 0; !several && i < ev->n_procs; i++) {
            const char *h = ev->procs[i].host;
            if (h && !one)
                one = h;
            several = h && strcmp(h, one) != 0;
        }
        if (!several && host && one && strcmp(host, one) != 0)
            several = 1;
        if (!several && one && !host && !(host = strdup(one)))
            goto nomem;
        if (several) {
            free(host);
            host = strdup("");
        }
    }
    free(ev->host);
    ev->host = NULL;
    if (host && *host) {
        ev->host = host;
        host = NULL;
    }
    if (!n_snapshots && n_logs)
        hdx_evidence_note(ev, "no stacks: post-mortem from job logs%s", ev->n_procs ? " and traces" : "");
    else if (!n_snapshots)
        hdx_evidence_note(ev, "no stacks: post-mortem from traces only (collectives, point-to-point and "
                              "rendezvous waits cannot be seen without stacks or logs)");
    int progress_known = 0; /* a report carries each process's progress, not its samples */
    for (size_t i = 0; i < ev->n_procs && !progress_known; i++)
        progress_known = ev->procs[i].progressing != HDX_UNKNOWN;
    if (!ev->samples && !progress_known)
        hdx_evidence_note(ev, "no CPU samples: a running build cannot be told from a stuck one after the fact");
    int kept = 0; /* locks a snapshot or report brought, with their facts or their state */
    for (size_t i = 0; i < ev->n_locks && !kept; i++)
        kept = ev->locks[i].facts.looked || ev->locks[i].recorded;
    if (kept)
        hdx_evidence_note(ev, "lock states as each host saw them when its snapshot was taken; not checked again");
    /* The locks only traces brought are looked at here, now; classify judges them all. */
    if ((r = hdx_locks_record_facts(ev, 1)) < 0 || (r = hdx_evidence_label(ev)) < 0 ||
        (r = hdx_classify(ev, &v)) < 0)
        goto nomem;
    if ((r = hdx_report_write(ev, &v, json, out)) < 0) {
        fprintf(stderr, "hangdx analyze: cannot write the report to %s: %s\n", out ? out : "stdout", strerror(-r));
        goto out;
    }
    status = partial ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
    goto out;
fail:
    if (r == -ENOMEM)
        goto nomem;
    fprintf(stderr, "hangdx analyze: %s\n", err ? err : strerror(-r));
    goto out;
nomem:
    fprintf(stderr, "hangdx analyze: out of memory\n");
out:
    free(dumps);
    free(err);
    free(host);
    batch_end();
    hdx_verdict_clear(&v);
    hdx_log_patterns_free(log_patterns);
    log_patterns = NULL;
    hdx_evidence_free(ev);
    return status;
}
