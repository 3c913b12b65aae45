/*
 * hdx_load_inputs (inputs.h): each input recognised by its content, read by its format's
 * loader, and merged into one evidence set.
 */
#include "formats/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
    INPUT_LOG_DIR,
    INPUT_FRAMES
};

/* The bounds of a walk of a directory of logs: deep enough for torchrun's
 * D/<run_id>_<hash>/attempt_<n>/<local_rank>/stdout.log under a few levels of the user's own,
 * and files enough for 1024 nodes of 8 ranks' stdout and stderr. */
#define WALK_DEPTH 8
#define WALK_FILES 20000

/* One entry met in a walk of a directory of logs. */
struct walked {
    char *path;      /* heap */
    int regular;     /* a regular file (else: what stat said, in mode) */
    unsigned mode;
    int attempt;     /* n of an attempt_<n> directory above it, -1 none */
    size_t root_len; /* the length of the path up to that attempt_<n> (its run directory) */
    int local_rank;  /* the <local_rank> directory right below attempt_<n>, -1 none */
    int task_id;     /* a Slurm %t in the name (siblings differ by it alone), -1 none */
};

struct walk {
    struct walked *e;
    size_t n;
    size_t seen;              /* entries met, directories too: what WALK_FILES bounds */
    int cut_depth, cut_files; /* the walk stopped at a bound */
};

/*
 * One call of hdx_load_inputs: what it loads ahead and what it keeps.
 * The snapshot and frames files named in paths are loaded ahead on every CPU (snapshot.h's
 * batch): each file is parsed alone, so 16 384 hosts' files load in parallel, and the merge
 * stays in the order of paths, as does the first error.
 */
struct loader {
    hdx_log_patterns *patterns;  /* loaded at the first text input that is not a snapshot (logs.h) */
    hdx_snapshot_batch *batch;
    int *kind_of;                /* per index of paths: what recognise() found it is, or -1 not yet */
    int *batch_at;               /* per index of paths: its file's place in the batch, or -1 */
    hdx_load_result *res;        /* the caller's: what was left out */
    struct walk walk;            /* the directory of logs recognise() walked last */
    struct log_dump {
        char *path; /* heap */
        int rank;   /* the one rank of the log's lines, HDX_UNKNOWN */
    } *dumps;                    /* logs with a stack dump, read after every other input */
    size_t n_dumps, n_snapshots, n_logs;
    char *head;                  /* HEAD_BYTES for the sniffers (recognise), once one is needed */
};

#define HEAD_BYTES 65536 /* what the sniffers of a file's head look at, at most */

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

/* How many *.json files directly in dir are snapshots or reports (what makes dir a snapshot
 * directory), or -errno when dir is unreadable. */
static int snapshot_files(const char *dir)
{
    struct dirent **des = NULL;
    int n = scandir(dir, &des, json_name, alphasort), found = 0;
    if (n < 0)
        return -errno;
    for (int i = 0; i < n; i++) {
        char *p = found >= 0 ? hdx_asprintf("%s/%s", dir, des[i]->d_name) : NULL;
        enum hdx_snapshot_kind kind = p ? hdx_snapshot_sniff(p) : HDX_INPUT_NOT_JSON;
        if (!p)
            found = -ENOMEM;
        else if (kind == HDX_INPUT_SNAPSHOT || kind == HDX_INPUT_REPORT)
            found++;
        free(p);
        free(des[i]);
    }
    free(des);
    return found;
}

static void walk_clear(struct walk *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].path);
    free(w->e);
    memset(w, 0, sizeof *w);
}

/* n of a path component "attempt_<n>" (torch elastic's restart count), else -1. */
static int attempt_of(const char *c, size_t len)
{
    if (len < 9 || strncmp(c, "attempt_", 8))
        return -1;
    long v = 0;
    for (size_t i = 8; i < len; i++) {
        if (c[i] < '0' || c[i] > '9' || (v = v * 10 + (c[i] - '0')) > 1000000)
            return -1;
    }
    return (int)v;
}

/* The number a component of only digits names, else -1. */
static int number_of(const char *c, size_t len)
{
    long v = 0;
    if (!len || len > 7)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (c[i] < '0' || c[i] > '9')
            return -1;
        v = v * 10 + (c[i] - '0');
    }
    return (int)v;
}

/* Where a file sits in torchrun's --log-dir layout, from the components of its path from rel_at
 * on: <run_id>_<hash>/attempt_<n>/<local_rank>/stdout.log. */
static void place_in_layout(struct walked *e, size_t rel_at)
{
    const char *p = e->path + rel_at;
    e->attempt = e->local_rank = -1;
    while (*p) {
        const char *end = strchr(p, '/');
        if (!end)
            break; /* the file's own name */
        int a = attempt_of(p, (size_t)(end - p));
        if (a >= 0) {
            const char *next = end + 1, *nend = strchr(next, '/');
            e->attempt = a;
            e->root_len = p > e->path ? (size_t)(p - e->path) - 1 : 0;
            e->local_rank = nend ? number_of(next, (size_t)(nend - next)) : -1;
        }
        p = end + 1;
    }
}

/* Every entry below dir, depth first in name order, into w; not into directories that are
 * symbolic links (no loops), nor deeper than WALK_DEPTH, nor past WALK_FILES entries
 * (directories count: a tree of empty directories is bounded too).
 * 0, or -errno with *err (only dir itself unreadable, or -ENOMEM). */
static int walk_dir(struct walk *w, const char *dir, size_t rel_at, int depth, char **err)
{
    struct dirent **des = NULL;
    int n = scandir(dir, &des, NULL, alphasort), r = 0;
    if (n < 0) {
        int e = errno;
        if (depth > 0)
            return 0; /* a subdirectory that cannot be read: its files are not there to be named */
        *err = hdx_asprintf("%s: cannot read: %s", dir, strerror(e));
        return -e;
    }
    for (int i = 0; i < n; i++) {
        const char *base = des[i]->d_name;
        struct stat st;
        char *path = NULL;
        if (r < 0 || !strcmp(base, ".") || !strcmp(base, "..")) {
        } else if (w->seen++ >= WALK_FILES) {
            w->cut_files = 1;
        } else if (!(path = hdx_asprintf("%s/%s", dir, base))) {
            r = -ENOMEM;
        } else if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (depth + 1 >= WALK_DEPTH)
                w->cut_depth = 1;
            else
                r = walk_dir(w, path, rel_at, depth + 1, err);
        } else {
            int ok = stat(path, &st) == 0; /* a link to a file is read; a dangling one is left out */
            struct walked *e = ok && S_ISDIR(st.st_mode) ? NULL : hdx_append((void **)&w->e, &w->n, sizeof *e);
            if (!ok || !S_ISDIR(st.st_mode)) {
                if (!e) {
                    r = -ENOMEM;
                } else {
                    e->path = path;
                    path = NULL;
                    e->regular = ok && S_ISREG(st.st_mode);
                    e->mode = ok ? st.st_mode : 0;
                    e->task_id = -1;
                    place_in_layout(e, rel_at);
                }
            }
        }
        free(path);
        free(des[i]);
    }
    free(des);
    return r;
}

/* The file name of path with its last run of digits cut out (the stem Slurm's %t leaves), and
 * that number in *num; NULL when the name has none, or names a rank itself (logs.c reads it). */
static char *task_stem(const char *path, int *num)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *d = NULL, *de = NULL;
    for (const char *p = base; *p; p++)
        if (*p >= '0' && *p <= '9' && (p == base || p[-1] < '0' || p[-1] > '9')) {
            d = p;
            for (de = p; *de >= '0' && *de <= '9'; de++)
                ;
        }
    for (const char *p = base; *p; p++)
        if (!strncasecmp(p, "rank", 4))
            return NULL;
    if (!d || (*num = number_of(d, (size_t)(de - d))) < 0)
        return NULL;
    return hdx_asprintf("%.*s#%s", (int)(d - path), path, de);
}

static int stem_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Slurm's %t in names: files of one directory whose names differ only by their last number
 * (out-0.log, out-1.log; job-1234-3.out) have that number as their task id. 0 or -ENOMEM. */
static int find_task_ids(struct walk *w)
{
    char **stems = calloc(w->n ? w->n : 1, sizeof *stems);
    int *nums = calloc(w->n ? w->n : 1, sizeof *nums);
    char **sorted = calloc(w->n ? w->n : 1, sizeof *sorted);
    int r = stems && nums && sorted ? 0 : -ENOMEM;
    size_t ns = 0;
    for (size_t i = 0; !r && i < w->n; i++)
        if (w->e[i].regular && w->e[i].attempt < 0 && (stems[i] = task_stem(w->e[i].path, &nums[i])))
            sorted[ns++] = stems[i];
    if (!r)
        qsort(sorted, ns, sizeof *sorted, stem_cmp);
    for (size_t i = 0; !r && i < w->n; i++) {
        if (!stems[i])
            continue;
        char **hit = bsearch(&stems[i], sorted, ns, sizeof *sorted, stem_cmp);
        size_t k = hit ? (size_t)(hit - sorted) : ns;
        int siblings = (k > 0 && !strcmp(sorted[k - 1], stems[i])) ||
                       (k + 1 < ns && !strcmp(sorted[k + 1], stems[i]));
        if (siblings)
            w->e[i].task_id = nums[i];
    }
    for (size_t i = 0; stems && i < w->n; i++)
        free(stems[i]);
    free(stems);
    free(nums);
    free(sorted);
    return r;
}

/* Is the regular file path a job log or another tool's stack dump (what makes a directory one
 * of logs)? */
static int log_like(struct loader *l, const char *path)
{
    char *err = NULL;
    int r = sniff_log(l, path, &err);
    free(err);
    return r > 0 || hdx_foreign_sniff_file(path) != HDX_FOREIGN_NONE;
}

/* Walk dir into l->walk; the number of its files that are logs (log_like), or -errno with *err. */
static int walk_logs(struct loader *l, const char *dir, char **err)
{
    walk_clear(&l->walk);
    /* the whole path is looked at: DIR may be an attempt_<n> directory itself */
    int r = walk_dir(&l->walk, dir, 0, 0, err), logs = 0;
    if (r == 0)
        r = find_task_ids(&l->walk);
    for (size_t i = 0; r == 0 && i < l->walk.n; i++) {
        const struct walked *e = &l->walk.e[i];
        size_t len = strlen(e->path);
        if (e->regular && !(len > 5 && !strcmp(e->path + len - 5, ".json")) && log_like(l, e->path))
            logs++;
    }
    return r < 0 ? r : logs;
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
        int logs = walk_logs(l, path, err);
        if (logs < 0)
            return logs;
        if (logs > 0) {
            *kind = INPUT_LOG_DIR; /* per-rank logs: torchrun --log-dir, Slurm %t files (and snapshots) */
            return 0;
        }
        if (snapshot_files(path) > 0) {
            /* e.g. what 'hangdx snapshot --slurm-job -o DIR' wrote, or saved reports alone */
            *kind = INPUT_SNAPSHOT_DIR;
            return 0;
        }
        *err = hdx_asprintf("%s: not a hangdx trace directory (no <host>-<pid>%s files; 'hangdx run -d %s -- ...' "
                            "writes one), nor a directory of snapshots or of job logs: no file below it holds a "
                            "snapshot or a line hangdx knows",
                            path, HDX_TRACE_SUFFIX, path);
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
    /* The first 64 KiB, read once for the sniffers that look at a file's head: 16 384 nodes'
     * files were opened and read four times each, 0.7 s before the first was loaded. */
    if (!l->head && !(l->head = malloc(HEAD_BYTES))) {
        *err = hdx_asprintf("%s: out of memory", path);
        return -ENOMEM;
    }
    ssize_t got = hdx_read_head(path, l->head, HEAD_BYTES);
    if (got < 0) {
        int e = errno;
        *err = hdx_asprintf("%s: cannot read it: %s%s", path, strerror(e),
                            e == EACCES ? ": run hangdx as a user who may read it, or copy it where it can" : "");
        return -e;
    }
    size_t n = (size_t)got;
    if (hdx_core_sniff(l->head, n)) {
        *kind = INPUT_CORE;
        return 0;
    }
    if (hdx_foreign_flight_recorder_sniff(l->head, n)) {
        *kind = INPUT_FOREIGN; /* a Flight Recorder dump, whose JSON form is no snapshot (foreign.h) */
        return 0;
    }
    if (hdx_snapshot_sniff_head(l->head, n) != HDX_INPUT_NOT_JSON) {
        *kind = INPUT_SNAPSHOT; /* the loader refuses a schema it does not know, by name */
        return 0;
    }
    if (hdx_frames_sniff(l->head, n)) {
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
                              "lines it knows (share/hangdx/patterns/logs.json), ELF core files, py-spy, gdb, "
                              "eu-stack or faulthandler dumps, and torch's NCCL Flight Recorder dumps",
                              path);
    return -EINVAL;
}

/* one, loaded from path with result r (0, or -errno with *err set), into ev (one is freed).
 * 0 or -errno with *err naming the file. */
static int add_loaded(hdx_evidence *ev, const char *path, hdx_evidence *one, int r, char **err)
{
    char *merr = NULL;
    if (r == 0 && (r = hdx_evidence_merge(ev, one, &merr)) < 0)
        *err = hdx_asprintf("%s: %s", path, merr ? merr : strerror(-r));
    free(merr);
    hdx_evidence_free(one);
    return r;
}

/* Recognise the regular files of paths, and load the snapshot and frames files among them
 * ahead, each from when it is recognised (none when memory is short: each is then loaded in
 * its turn). threads: at most this many; 0, one per CPU up to 8. */
static void batch_start(struct loader *l, char *const *paths, size_t n_paths, int threads)
{
    if (!n_paths || !(l->kind_of = malloc(n_paths * sizeof *l->kind_of)) ||
        !(l->batch_at = malloc(n_paths * sizeof *l->batch_at)))
        return;
    l->batch = hdx_snapshot_batch_new(n_paths, hdx_cpus(threads));
    for (size_t i = 0; i < n_paths; i++) {
        struct stat st;
        enum input_kind kind;
        char *err = NULL;
        l->kind_of[i] = l->batch_at[i] = -1;
        /* A directory is recognised in its turn: recognise() walks it into l->walk. */
        if (stat(paths[i], &st) != 0 || !S_ISREG(st.st_mode) || recognise(l, paths[i], &kind, &err) < 0) {
            free(err); /* said in its turn */
            continue;
        }
        l->kind_of[i] = (int)kind;
        long at = kind == INPUT_SNAPSHOT || kind == INPUT_FRAMES
                      ? hdx_snapshot_batch_add(l->batch, paths[i], kind == INPUT_FRAMES)
                      : -1;
        l->batch_at[i] = at < 0 ? -1 : (int)at;
    }
    hdx_snapshot_batch_close(l->batch);
}

/* l's memory freed, what the batch loaded ending into ev (which its evidences went into). */
static void loader_clear(struct loader *l, hdx_evidence *ev)
{
    hdx_snapshot_batch_free(l->batch, ev);
    free(l->kind_of);
    free(l->batch_at);
    free(l->head);
    hdx_log_patterns_free(l->patterns);
    walk_clear(&l->walk);
    for (size_t i = 0; i < l->n_dumps; i++)
        free(l->dumps[i].path);
    free(l->dumps);
    memset(l, 0, sizeof *l);
}

/* What the file at path gave (a frames file when frames): from the batch when it holds it
 * (at, its place there; -1 none), else loaded here. 0 or -ENOMEM; out as hdx_loaded_file_load's. */
static int loaded_file(struct loader *l, const char *path, int frames, int at, hdx_loaded_file *out)
{
    return l->batch && at >= 0 ? hdx_snapshot_batch_take(l->batch, (size_t)at, out)
                               : hdx_loaded_file_load(path, frames, NULL, out) == -ENOMEM ? -ENOMEM : 0;
}

/* paths[i], a snapshot, into ev. 0 or -errno with *err. */
static int add_snapshot_arg(struct loader *l, hdx_evidence *ev, char *const *paths, size_t i, char **err)
{
    hdx_loaded_file f;
    int r = loaded_file(l, paths[i], 0, l->batch_at ? l->batch_at[i] : -1, &f);
    if (r == 0 && f.n != 1)
        r = -ENOMEM;
    if (r == 0) {
        hdx_loaded_doc *d = &f.docs[0];
        *err = d->err;
        d->err = NULL;
        r = add_loaded(ev, paths[i], d->ev, d->rc, err);
        d->ev = NULL;
    }
    hdx_loaded_file_clear(&f);
    return r;
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

/* The loaded file path of a snapshot directory (add_snapshot_dir) merged into ev (*used
 * counts it), or left out with why and named (*bad counts it). 0 or -errno with *err. */
static int take_dir_file(struct loader *l, hdx_evidence *ev, const char *path, char *why, size_t *used,
                         size_t *bad, size_t *n_snapshots, char **err)
{
    hdx_evidence *one = NULL;
    int r = 0;
    if (!why && !(one = hdx_evidence_new()))
        r = -ENOMEM;
    else if (!why && (r = take_loaded(ev, path, &one, hdx_snapshot_load(path, one, &why), &why, n_snapshots, err)) > 0)
        (*used)++;
    if (r == 0 && why) {
        (*bad)++;
        r = left_out(l, ev, path, why, "the other files of the directory");
    } else if (r == 0) {
        r = -ENOMEM; /* a message that could not be made */
    }
    hdx_evidence_free(one);
    free(why);
    return r < 0 ? r : 0;
}

/*
 * Every *.json file directly in dir (by name order) into ev, as 'hangdx snapshot --slurm-job -o
 * DIR' writes them. A *.json file that is not usable (empty, not JSON, cut short, another
 * schema) is left out (left_out). Reports (hangdx.report/2 or /1) are read only when no
 * snapshot of dir was usable: beside snapshots a note names each, as one made from them would
 * count their processes twice. Entries not named *.json are not read, and a note counts them.
 * *n_snapshots counts the files taken. 0, or -errno with *err: dir unreadable, no usable file in
 * it, or a merge that fails (the same rank on two hosts).
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
    size_t used = 0, bad = 0, ignored = 0, n_reports = 0;
    char **reports = calloc((size_t)n + 1, sizeof *reports); /* their paths, for after the snapshots */
    if (!reports)
        r = -ENOMEM;
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
        struct stat st;
        if (!path) {
            r = -ENOMEM;
            continue;
        } else if (stat(path, &st) != 0) {
            why = hdx_asprintf("cannot read it: %s", strerror(errno));
        } else if (!S_ISREG(st.st_mode)) {
            why = hdx_asprintf("%s, not a regular file: not read", hdx_file_kind(st.st_mode));
        } else if (st.st_size == 0) {
            why = hdx_asprintf("the file is empty");
        } else {
            enum hdx_snapshot_kind kind = hdx_snapshot_sniff(path);
            if (kind == HDX_INPUT_REPORT) {
                reports[n_reports++] = path;
                continue;
            }
            if (kind == HDX_INPUT_NOT_JSON)
                why = hdx_asprintf("not a hangdx snapshot (not a JSON object with a \"schema\")");
        }
        r = take_dir_file(l, ev, path, why, &used, &bad, n_snapshots, err);
        free(path);
    }
    free(des);
    int beside = used > 0; /* the reports are beside usable snapshots: not read */
    for (size_t i = 0; i < n_reports; i++) {
        if (r == 0 && !beside)
            r = take_dir_file(l, ev, reports[i], NULL, &used, &bad, n_snapshots, err);
        else if (r == 0 && hdx_evidence_note(ev, "%s: a report, not read beside the snapshots of its directory (one "
                                                 "made from them would count their processes twice); give it alone "
                                                 "to read it", reports[i]) < 0)
            r = -ENOMEM;
        free(reports[i]);
    }
    free(reports);
    if (r == 0 && !used) {
        *err = hdx_asprintf("%s: none of its %zu *.json file%s is a usable snapshot or report (see above)", dir, bad,
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
static int add_frames(struct loader *l, hdx_evidence *ev, const char *path, int at, size_t *n_snapshots,
                      char **err)
{
    hdx_loaded_file f;
    size_t used = 0;
    int r = loaded_file(l, path, 1, at, &f);
    if (r == 0 && (r = f.rc) < 0) {
        *err = f.err;
        f.err = NULL;
    }
    for (size_t i = 0; r == 0 && i < f.n; i++) {
        hdx_loaded_doc *d = &f.docs[i];
        char *why = NULL;
        int taken = 0;
        if (d->incomplete) {
            why = hdx_asprintf("the snapshot is incomplete (%s)",
                               d->incomplete == 2 ? "its frames came out of order, or disagree with their end line"
                                                  : "its frames end early: no end line");
        } else {
            why = d->err;
            d->err = NULL;
            if ((r = take_loaded(ev, d->name, &d->ev, d->rc, &why, n_snapshots, err)) > 0) {
                r = 0;
                taken = 1;
                used++;
            }
        }
        if (r == 0 && why)
            r = left_out(l, ev, d->name, why, "the other nodes' snapshots: take that node's again");
        else if (r == 0 && !taken)
            r = -ENOMEM; /* a message that could not be made */
        free(why);
    }
    if (r == 0 && !used) {
        *err = f.n ? hdx_asprintf("%s: no node's snapshot in it is complete (%zu left out, see above): take them "
                                  "again", path, f.n)
                   : hdx_asprintf("%s: no snapshot in its frames", path);
        r = -ENODATA;
    }
    hdx_loaded_file_clear(&f);
    return r;
}

/*
 * The job log at path into ev (hint: hdx_log_load_hinted's, may be NULL), and its stack dump,
 * if any, kept for after every other input (so that a rank that a snapshot or a core shows
 * keeps those stacks). 0 or -errno with *err.
 */
static int add_log(struct loader *l, hdx_evidence *ev, const char *path, hdx_log_hint *hint, char **err)
{
    int only_rank = HDX_UNKNOWN;
    int r = hdx_log_load_hinted(l->patterns, path, hint, ev, &only_rank, err);
    l->n_logs++;
    if (r == 0 && hdx_foreign_sniff_file(path) != HDX_FOREIGN_NONE) {
        struct log_dump *slot = hdx_append((void **)&l->dumps, &l->n_dumps, sizeof *slot);
        if (!slot || !(slot->path = strdup(path)))
            return -ENOMEM;
        slot->rank = only_rank;
        l->n_snapshots++;
    }
    return r;
}

/*
 * paths[i], a job log named on the command line: as a file of a directory of logs, its
 * <local_rank> directory in torchrun's --log-dir layout gives its rank when it has no prefix and
 * every such file of paths is of one run (one node). 0 or -errno with *err.
 */
static int add_named_log(struct loader *l, hdx_evidence *ev, char *const *paths, size_t n, size_t i, char **err)
{
    struct walked e = {.path = paths[i]}, o;
    place_in_layout(&e, 0);
    if (e.local_rank < 0)
        return add_log(l, ev, paths[i], NULL, err);
    for (size_t k = 0; k < n; k++) {
        o = (struct walked){.path = paths[k]};
        place_in_layout(&o, 0);
        if (o.local_rank >= 0 && (o.root_len != e.root_len || strncmp(o.path, e.path, e.root_len)))
            return add_log(l, ev, paths[i], NULL, err); /* several runs: local ranks repeat */
    }
    char *why = hdx_asprintf("its torchrun --log-dir directory %.*s (local rank %d, taken as the global rank as "
                             "on one node: the global rank is node rank x nproc_per_node + local rank)",
                             (int)(strrchr(e.path, '/') - e.path), e.path, e.local_rank);
    hdx_log_hint hint = {.rank = e.local_rank, .why = why};
    int r = why ? add_log(l, ev, paths[i], &hint, err) : -ENOMEM;
    free(why);
    return r;
}

/* A short list of names for a note ("a, b and 3 more"), heap; NULL on ENOMEM. */
static char *name_list(char *const *names, size_t n)
{
    char *out = hdx_strdup("");
    for (size_t i = 0; out && i < n && i < 3; i++) {
        char *more = hdx_asprintf("%s%s%s", out, i ? ", " : "", names[i]);
        free(out);
        out = more;
    }
    if (out && n > 3) {
        char *more = hdx_asprintf("%s and %zu more", out, n - 3);
        free(out);
        out = more;
    }
    return out;
}

/* Text, as far as its first 4 KiB tell (no NUL byte in them)? */
static int text_file(const char *path)
{
    char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), text = 0;
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, buf, sizeof buf);
    text = got > 0 && !memchr(buf, 0, (size_t)got);
    close(fd);
    return text;
}

/* The rank that a walked file's place names: its <local_rank> directory when the walk holds one
 * torchrun run (n_ranked_runs), its Slurm task id, or a rank in its name (logs.c); else
 * HDX_UNKNOWN. */
static int rank_place(const struct walked *e, size_t n_ranked_runs)
{
    if (e->local_rank >= 0 && n_ranked_runs == 1)
        return e->local_rank;
    if (e->task_id >= 0)
        return e->task_id;
    const char *base = strrchr(e->path, '/');
    for (const char *p = base ? base + 1 : e->path; *p; p++)
        if (!strncasecmp(p, "rank", 4) && p[4] >= '0' && p[4] <= '9')
            return atoi(p + 4);
    return HDX_UNKNOWN;
}

/* A torchrun run directory (D/<run_id>_<hash>) of a walk, and its last attempt. */
struct run_dir {
    const char *path; /* a walked entry's path, up to len */
    size_t len;
    int last;
    int n_ranked; /* files of the last attempt in a <local_rank> directory */
};

/* Is path a snapshot or a report (a JSON file of hangdx's, not another tool's)? */
static int snapshot_or_report(const char *path)
{
    int k = hdx_snapshot_sniff(path);
    return k == HDX_INPUT_SNAPSHOT || k == HDX_INPUT_REPORT;
}

/* The index in runs of the run directory e is in (below an attempt_<n>), or n when none is. */
static size_t run_of(const struct run_dir *runs, size_t n, const struct walked *e)
{
    size_t k = 0;
    while (e->attempt >= 0 && k < n && !(runs[k].len == e->root_len && !strncmp(runs[k].path, e->path, e->root_len)))
        k++;
    return e->attempt >= 0 ? k : n;
}

/*
 * A directory of per-rank job logs (l->walk, walked by recognise): torchrun --log-dir's
 * <run>/attempt_<n>/<local_rank>/{stdout,stderr}.log, of which only the last attempt of each
 * run is judged; Slurm's %t files (out-0.log, job-1234-3.out); any files whose lines carry
 * launcher prefixes; and snapshots (*.json) among them. A file's rank: its lines' prefixes,
 * else its place (hdx_log_load_hinted). What cannot be read (not a regular file, a snapshot
 * that does not load) is left out (left_out); files of no known kind, empty files and earlier
 * attempts are counted in notes. 0, or -errno with *err.
 */
static int add_log_dir(struct loader *l, hdx_evidence *ev, const char *dir, char **err)
{
    struct walk *w = &l->walk;
    struct run_dir *runs = NULL;
    size_t n_runs = 0, n_unknown = 0, n_empty = 0, n_earlier = 0, n_ranked_runs = 0, n_local = 0;
    char **unknown = NULL;
    int r = 0;
    for (size_t i = 0; r == 0 && i < w->n; i++) {
        const struct walked *e = &w->e[i];
        if (e->attempt < 0)
            continue;
        size_t k = run_of(runs, n_runs, e);
        if (k == n_runs) {
            struct run_dir *rd = hdx_append((void **)&runs, &n_runs, sizeof *rd);
            if (!rd) {
                r = -ENOMEM;
                break;
            }
            rd->path = e->path;
            rd->len = e->root_len;
            rd->last = -1;
        }
        if (e->attempt > runs[k].last)
            runs[k].last = e->attempt;
    }
    for (size_t i = 0; r == 0 && i < w->n; i++) {
        const struct walked *e = &w->e[i];
        size_t k = run_of(runs, n_runs, e);
        if (e->local_rank >= 0 && k < n_runs && e->attempt == runs[k].last && !runs[k].n_ranked++)
            n_ranked_runs++;
    }
    /* The restarts, one note per run: the verdict is from the last attempt. */
    for (size_t k = 0; r == 0 && k < n_runs; k++) {
        char **earlier = NULL;
        size_t n_e = 0;
        for (size_t i = 0; r == 0 && i < w->n; i++) {
            const struct walked *e = &w->e[i];
            if (e->attempt < 0 || e->attempt >= runs[k].last || e->root_len != runs[k].len ||
                strncmp(e->path, runs[k].path, runs[k].len))
                continue;
            n_earlier++;
            char *name = hdx_asprintf("attempt_%d", e->attempt);
            int seen = 0;
            for (size_t j = 0; name && j < n_e && !seen; j++)
                seen = !strcmp(earlier[j], name);
            char **slot = name && !seen ? hdx_append((void **)&earlier, &n_e, sizeof *slot) : NULL;
            if (!name || (!seen && !slot))
                r = -ENOMEM;
            else if (!seen)
                *slot = name, name = NULL;
            free(name);
        }
        if (r == 0 && runs[k].last > 0) {
            char *list = n_e ? name_list(earlier, n_e) : hdx_strdup("none of them left files");
            if (!list || hdx_evidence_note(ev, "%.*s: torch elastic restarted the workers %d time%s; the verdict is "
                                           "from attempt_%d; earlier attempts: %s (their files not judged: a "
                                           "restart ends the workers of the attempt before)",
                                           (int)runs[k].len, runs[k].path, runs[k].last,
                                           runs[k].last == 1 ? "" : "s", runs[k].last, list) < 0)
                r = -ENOMEM;
            free(list);
        }
        for (size_t j = 0; j < n_e; j++)
            free(earlier[j]);
        free(earlier);
    }
    if (r == 0 && n_ranked_runs > 1 &&
        hdx_evidence_note(ev, "%s: %zu torchrun log directories (one per node, or per launch) name their files by "
                          "local rank, and the node rank that would make a global rank of it (node rank x "
                          "nproc_per_node + local rank) is not in them: a file of theirs takes its rank from its "
                          "lines only ([rank3]: prefixes, torchrun --log-line-prefix-template)",
                          dir, n_ranked_runs) < 0)
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < w->n; i++) {
        const struct walked *e = &w->e[i];
        size_t k = run_of(runs, n_runs, e);
        if (k < n_runs && e->attempt < runs[k].last)
            continue; /* an earlier attempt: counted in the note above */
        if (!e->regular) {
            char *why = e->mode ? hdx_asprintf("%s, not a regular file: not read", hdx_file_kind(e->mode))
                                : hdx_asprintf("cannot read it: %s", "a dangling link, or not there now");
            r = why ? left_out(l, ev, e->path, why, "the other files of the directory") : -ENOMEM;
            free(why);
            continue;
        }
        enum input_kind kind = INPUT_LOG;
        char *why = NULL;
        size_t n_empty_before = n_empty;
        struct stat st;
        /* a regular file still (recognise walks a directory anew, over l->walk) */
        int rr = stat(e->path, &st) == 0 && S_ISREG(st.st_mode) ? recognise(l, e->path, &kind, &why) : -ESTALE;
        if (rr == -ESTALE) {
            r = left_out(l, ev, e->path, "not a regular file now: not read", "the other files of the directory");
        } else if (rr == -ENOMEM) {
            r = rr;
        } else if (rr < 0 && stat(e->path, &st) == 0 && st.st_size == 0) {
            n_empty++;
        } else if (rr < 0 && rr != -EINVAL) {
            r = left_out(l, ev, e->path, why ? why : strerror(-rr), "the other files of the directory");
            rr = -ESTALE; /* said */
        } else if (rr < 0 && text_file(e->path) && rank_place(e, n_ranked_runs) >= 0) {
            /* a rank's file with no known line (it printed only its progress): its last line is
             * still that rank's last sign of life */
            kind = INPUT_LOG;
            free(why);
            why = NULL;
            rr = 0;
        }
        if (r < 0 || rr == -ESTALE || rr == -ENOMEM || n_empty_before != n_empty) {
            /* said above: left out, counted empty, or out of memory */
        } else if (rr < 0 || (kind == INPUT_SNAPSHOT && !snapshot_or_report(e->path))) {
            /* text of no known line (a rank that printed only its progress), binary data, a JSON file
             * of another tool (torchrun's error.json): counted, not left out */
            char **slot = hdx_append((void **)&unknown, &n_unknown, sizeof *slot);
            if (!slot || !(*slot = strdup(e->path)))
                r = -ENOMEM;
        } else if (kind == INPUT_LOG) {
            hdx_log_hint hint = {.rank = HDX_UNKNOWN};
            char *from = NULL;
            int local = e->local_rank >= 0 && n_ranked_runs == 1;
            if (rank_place(e, n_ranked_runs) == HDX_UNKNOWN) {
                /* no rank from the place: the lines, or the name as logs.c reads it */
            } else if (local) {
                hint.rank = e->local_rank;
                from = hdx_asprintf("its torchrun --log-dir directory %.*s (local rank %d)",
                                    (int)(strrchr(e->path, '/') - e->path), e->path, e->local_rank);
            } else if (e->task_id >= 0) {
                hint.rank = e->task_id;
                from = hdx_asprintf("the Slurm task id (%%t) in the file name, which is the rank under srun");
            }
            hint.why = from;
            if (hint.rank != HDX_UNKNOWN && !from)
                r = -ENOMEM;
            else
                r = add_log(l, ev, e->path, &hint, err);
            if (local && hint.used)
                n_local++;
            free(from);
        } else if (kind == INPUT_SNAPSHOT) {
            hdx_evidence *one = hdx_evidence_new();
            int lr = one ? hdx_snapshot_load(e->path, one, &why) : -ENOMEM;
            r = one ? take_loaded(ev, e->path, &one, lr, &why, &l->n_snapshots, err) : -ENOMEM;
            if (r == 0)
                r = left_out(l, ev, e->path, why ? why : "not a usable snapshot", "the other files of the directory");
            else if (r > 0)
                r = 0;
            hdx_evidence_free(one);
        } else if (kind == INPUT_FOREIGN) {
            r = hdx_foreign_load(e->path, ev, err);
            l->n_snapshots++;
        } else if (kind == INPUT_CORE) {
            r = hdx_core_load(e->path, ev, err);
            l->n_snapshots++;
        } else if (kind == INPUT_FRAMES) {
            r = add_frames(l, ev, e->path, -1, &l->n_snapshots, err);
        }
        free(why);
    }
    for (size_t k = 0; r == 0 && n_local && k < n_runs; k++)
        if (runs[k].n_ranked &&
            hdx_evidence_note(ev, "%.*s: %zu file%s without rank prefixes took %s rank from %s local rank "
                              "directory, a local rank taken as the global rank as on one node (the global rank "
                              "is node rank x nproc_per_node + local rank; torchrun "
                              "--log-line-prefix-template '[rank${rank}]:' puts it in the lines)",
                              (int)runs[k].len, runs[k].path, n_local, n_local == 1 ? "" : "s",
                              n_local == 1 ? "its" : "their", n_local == 1 ? "its" : "their") < 0)
            r = -ENOMEM;
    if (r == 0 && n_unknown) {
        char *list = name_list(unknown, n_unknown);
        if (!list || hdx_evidence_note(ev, "%s: %zu file%s with no line hangdx knows, not taken: %s", dir, n_unknown,
                                       n_unknown == 1 ? "" : "s", list) < 0)
            r = -ENOMEM;
        free(list);
    }
    if (r == 0 && n_empty &&
        hdx_evidence_note(ev, "%s: %zu empty file%s", dir, n_empty, n_empty == 1 ? "" : "s") < 0)
        r = -ENOMEM;
    if (r == 0 && (w->cut_depth || w->cut_files) &&
        hdx_evidence_note(ev, "%s: the walk of the directory stopped at %d %s: files %s were not read; give the "
                          "directory of one job (or of one run, D/<run_id>_<hash>)",
                          dir, w->cut_files ? WALK_FILES : WALK_DEPTH,
                          w->cut_files ? "entries" : "levels of directories",
                          w->cut_files ? "past those" : "deeper down") < 0)
        r = -ENOMEM;
    for (size_t i = 0; i < n_unknown; i++)
        free(unknown[i]);
    free(unknown);
    free(runs);
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
    size_t n_snapshots = 0;
    char *host = NULL;
    int r = 0;
    ev->live = 0;
    ev->samples = 0;
    batch_start(&l, paths, n, o ? o->threads : 0);
    for (size_t i = 0; i < n; i++) {
        enum input_kind kind = INPUT_TRACE_DIR;
        if (l.kind_of && l.kind_of[i] >= 0)
            kind = (enum input_kind)l.kind_of[i];
        else if ((r = recognise(&l, paths[i], &kind, err)) < 0)
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
            r = add_frames(&l, ev, paths[i], l.batch_at ? l.batch_at[i] : -1, &n_snapshots, err);
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
        case INPUT_LOG:
            r = add_named_log(&l, ev, paths, n, i, err);
            break;
        case INPUT_LOG_DIR:
            r = add_log_dir(&l, ev, paths[i], err);
            break;
        }
        if (r < 0)
            goto out;
    }
    n_snapshots += l.n_snapshots;
    for (size_t i = 0; i < l.n_dumps; i++)
        if ((r = hdx_foreign_load_log(l.dumps[i].path, l.dumps[i].rank, ev, err)) < 0)
            goto out;
    size_t n_logs = l.n_logs;
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
    free(host);
    loader_clear(&l, ev);
    return r;
}
