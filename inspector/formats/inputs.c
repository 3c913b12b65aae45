/*
 * hdx_load_inputs (inputs.h): each input recognised by its content, read by its format's
 * loader, and merged into one evidence set.
 */
#include "formats/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/core.h"
#include "formats/foreign.h"
#include "formats/frames.h"
#include "formats/logs.h"
#include "formats/snapshot.h"
#include "hangdx/trace.h"
#include "model/util.h"

enum input_kind {
    INPUT_TRACE_DIR,
    INPUT_SNAPSHOT,
    INPUT_FOREIGN,
    INPUT_CORE,
    INPUT_LOG,
    INPUT_SNAPSHOT_DIR,
    INPUT_FRAMES
};

/*
 * One call of hdx_load_inputs: what it loads ahead and what it keeps.
 * The snapshot files named in paths are loaded ahead on every CPU (snapshot.h's batch): each
 * file is parsed alone, so 1024 hosts' files load in parallel, and the merge stays in the order
 * of paths, as does the first error.
 */
struct loader {
    hdx_log_patterns *patterns;  /* loaded at the first text input that is not a snapshot (logs.h) */
    hdx_snapshot_batch *batch;
    int *batch_at;               /* per index of paths: its file's place in the batch, or -1 */
    const char **batch_paths;
    hdx_load_result *res;        /* the caller's: what was left out */
};

/* Is path a job log? 1, 0, or -errno with *err (the patterns could not be loaded). */
static int sniff_log(struct loader *l, const char *path, char **err)
{
    if (!l->patterns) {
        int r = hdx_log_patterns_load_default(NULL, &l->patterns, err);
        if (r < 0)
            return r;
    }
    return hdx_log_sniff(l->patterns, path) > 0;
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
static int recognise(struct loader *l, const char *path, enum input_kind *kind, char **err)
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
    if (!S_ISREG(st.st_mode)) {
        /* A FIFO would block the sniffers below (its open waits for a writer, its read for
         * data) and could be read only once; a device may never end. */
        *err = hdx_asprintf("%s: %s, not a regular file: analyze reads files (and reads each more than once); "
                            "save what it carries into a file first (e.g. cat %s > FILE) and give that file",
                            path, hdx_file_kind(st.st_mode), path);
        return -EINVAL;
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
    int lr = sniff_log(l, path, err); /* a missing pattern file matters only when nothing else fits */
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
    if (r == 0 && (r = hdx_evidence_merge(ev, one, &merr)) < 0)
        *err = hdx_asprintf("%s: %s", path, merr ? merr : strerror(-r));
    free(merr);
    hdx_evidence_free(one);
    return r;
}

static int add_snapshot(hdx_evidence *ev, const char *path, char **err)
{
    return add_snapshot_text(ev, path, NULL, 0, err);
}

/* Start loading the snapshot files of paths ahead (none when memory is short: each is then
 * loaded in its turn). threads: at most this many; 0, one per CPU up to 8. */
static void batch_start(struct loader *l, char *const *paths, size_t n_paths, int threads)
{
    size_t n = 0;
    long cpus = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0 && cpus > 8)
        cpus = 8;
    if (!n_paths || !(l->batch_at = malloc(n_paths * sizeof *l->batch_at)) ||
        !(l->batch_paths = calloc(n_paths, sizeof *l->batch_paths)))
        return;
    for (size_t i = 0; i < n_paths; i++) {
        struct stat st;
        l->batch_at[i] = -1;
        if (stat(paths[i], &st) != 0 || !S_ISREG(st.st_mode) || hdx_core_sniff(paths[i]) ||
            hdx_snapshot_sniff(paths[i]) == HDX_INPUT_NOT_JSON)
            continue;
        l->batch_at[i] = (int)n;
        l->batch_paths[n++] = paths[i];
    }
    if (n >= 2) /* one file gains nothing from a thread */
        l->batch = hdx_snapshot_batch_start(l->batch_paths, n, cpus < 1 ? 1 : (int)cpus);
}

static void loader_clear(struct loader *l)
{
    hdx_snapshot_batch_free(l->batch);
    free(l->batch_at);
    free(l->batch_paths);
    hdx_log_patterns_free(l->patterns);
    memset(l, 0, sizeof *l);
}

/* paths[i], a snapshot: from the batch when it holds it. */
static int add_snapshot_arg(struct loader *l, hdx_evidence *ev, char *const *paths, size_t i, char **err)
{
    if (!l->batch || !l->batch_at || l->batch_at[i] < 0)
        return add_snapshot(ev, paths[i], err);
    hdx_evidence *one = NULL;
    int r = hdx_snapshot_batch_take(l->batch, (size_t)l->batch_at[i], &one, err);
    if (r == 0 && !one)
        r = -ENOMEM;
    return add_loaded(ev, paths[i], one, r, err);
}

/* An input that is left out (a bad file of a snapshot directory, an incomplete node of a
 * frames file): named in the notes and in l->res (the caller tells the person). why may start
 * with name (the loaders' messages do): that is not said twice. 0 or -ENOMEM. */
static int left_out(struct loader *l, hdx_evidence *ev, const char *name, const char *why, const char *rest)
{
    size_t nl = strlen(name);
    if (!strncmp(why, name, nl) && !strncmp(why + nl, ": ", 2))
        why += nl + 2;
    char *line = hdx_asprintf("%s: left out: %s; the verdict is from %s", name, why, rest), **slot;
    if (!line || !(slot = hdx_append((void **)&l->res->left_out, &l->res->n_left_out, sizeof *slot))) {
        free(line);
        return -ENOMEM;
    }
    *slot = line;
    return hdx_evidence_note(ev, "%s", line) < 0 ? -ENOMEM : 0;
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
 * another schema) is left out (left_out); entries not named *.json are
 * not read, and a note counts them. *n_snapshots counts those taken. 0, or -errno with *err:
 * dir unreadable, no usable snapshot in it, or a merge that fails (the same rank on two hosts).
 */
static int add_snapshot_dir(struct loader *l, hdx_evidence *ev, const char *dir, size_t *n_snapshots,
                            char **err)
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
            why = hdx_asprintf("%s, not a regular file: not read", hdx_file_kind(st.st_mode));
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
            r = left_out(l, ev, path, why, "the other snapshots of the directory");
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
 * collector does (left_out). 0, or -errno with *err: the file
 * unreadable, no complete snapshot in it, or a merge that fails.
 */
static int add_frames(struct loader *l, hdx_evidence *ev, const char *path, size_t *n_snapshots,
                      char **err)
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
            r = left_out(l, ev, name, why, "the other nodes' snapshots: take that node's again");
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
 * merged as a snapshot would be. One that cannot be used is left out (left_out). 0, or -errno with *err (a merge that fails).
 */
static int add_run_report(struct loader *l, hdx_evidence *ev, const char *dir, size_t *n_snapshots,
                          char **err)
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
        r = left_out(l, ev, path, why ? why : "not a usable report", "the traces of the directory");
    else if (r > 0)
        r = 0;
    hdx_evidence_free(one);
    free(why);
    free(path);
    return r;
}

/* The trace directory dir into ev. 0 or -errno with *err. */
static int add_trace_dir(hdx_evidence *ev, const char *dir, const hdx_trace_host *th, char **hosts_seen,
                         char **err)
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
    r = hdx_trace_to_evidence(set, ev, 1, th);
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

void hdx_load_result_clear(hdx_load_result *res)
{
    if (!res)
        return;
    for (size_t i = 0; i < res->n_left_out; i++)
        free(res->left_out[i]);
    free(res->left_out);
    memset(res, 0, sizeof *res);
}

int hdx_load_inputs(char *const *paths, size_t n, const hdx_load_options *o, hdx_evidence *ev,
                    hdx_load_result *res, char **err)
{
    struct loader l = {.res = res};
    struct log_dump {
        const char *path; /* paths' */
        int rank;         /* the one rank of the log's lines, HDX_UNKNOWN */
    } *dumps = NULL;
    size_t n_dumps = 0, n_snapshots = 0, n_logs = 0;
    char *host = NULL;
    int r = 0;
    ev->live = 0;
    ev->samples = 0;
    batch_start(&l, paths, n, o ? o->threads : 0);
    for (size_t i = 0; i < n; i++) {
        enum input_kind kind = INPUT_TRACE_DIR;
        if ((r = recognise(&l, paths[i], &kind, err)) < 0)
            goto out;
        switch (kind) {
        case INPUT_TRACE_DIR:
            if ((r = add_trace_dir(ev, paths[i], o ? o->trace_host : NULL, &host, err)) == 0)
                r = add_run_report(&l, ev, paths[i], &n_snapshots, err);
            break;
        case INPUT_SNAPSHOT:
            r = add_snapshot_arg(&l, ev, paths, i, err);
            n_snapshots++;
            break;
        case INPUT_FRAMES:
            r = add_frames(&l, ev, paths[i], &n_snapshots, err);
            break;
        case INPUT_SNAPSHOT_DIR:
            r = add_snapshot_dir(&l, ev, paths[i], &n_snapshots, err);
            break;
        case INPUT_FOREIGN:
            r = hdx_foreign_load(paths[i], ev, err);
            n_snapshots++; /* stacks, as a snapshot has */
            break;
        case INPUT_CORE:
            r = hdx_core_load(paths[i], ev, err);
            n_snapshots++; /* stacks, as a snapshot has */
            break;
        case INPUT_LOG: {
            int only_rank = HDX_UNKNOWN;
            r = hdx_log_load_ranked(l.patterns, paths[i], ev, &only_rank, err);
            n_logs++;
            if (r == 0 && hdx_foreign_sniff_file(paths[i]) != HDX_FOREIGN_NONE) {
                /* The stack dump in the log: read after every other input (below), so that a
                 * rank that a snapshot or a core shows keeps those stacks. */
                struct log_dump *slot = hdx_append((void **)&dumps, &n_dumps, sizeof *slot);
                if (!slot) {
                    r = -ENOMEM;
                    goto out;
                }
                slot->path = paths[i];
                slot->rank = only_rank;
                n_snapshots++;
            }
            break;
        }
        }
        if (r < 0)
            goto out;
    }
    for (size_t i = 0; i < n_dumps; i++)
        if ((r = hdx_foreign_load_log(dumps[i].path, dumps[i].rank, ev, err)) < 0)
            goto out;
    if (n_logs && hdx_log_pgroups(ev)) {
        r = -ENOMEM;
        goto out;
    }
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
        if (!several && one && !host && !(host = strdup(one))) {
            r = -ENOMEM;
            goto out;
        }
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
out:
    free(dumps);
    free(host);
    loader_clear(&l);
    return r;
}
