/*
 * Other tools' stack dumps (foreign.h): what the five formats share. Which format a text is
 * (the sniffing), the dispatch of its lines, by launcher prefix, to the format's line parser
 * (pyspy.c, gdb.c, eustack.c, faulthandler.c; pyspy_json.c reads the JSON whole; build.c
 * holds the parser's state they build on), and one finishing pass that gives every process
 * its rank, its main thread first and, for gdb, its merged stacks.
 *
 * Sources of the formats: py-spy's src/dump.rs and src/stack_trace.rs (the text and JSON it
 * prints), gdb 13 and eu-stack (elfutils 0.188) as Debian 12 prints them, CPython's
 * Tools/gdb/libpython.py (py-bt) and Python/traceback.c (faulthandler's dump_traceback).
 */
#include "formats/foreign.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/foreign/internal.h"
#include "model/util.h"

const char *hdx_foreign_format_name(enum hdx_foreign_format f)
{
    switch (f) {
    case HDX_FOREIGN_PYSPY: return "py-spy dump";
    case HDX_FOREIGN_PYSPY_JSON: return "py-spy dump --json";
    case HDX_FOREIGN_GDB: return "gdb";
    case HDX_FOREIGN_EUSTACK: return "eu-stack";
    case HDX_FOREIGN_FAULTHANDLER: return "faulthandler";
    case HDX_FOREIGN_FLIGHT_RECORDER: return "Flight Recorder";
    default: return "none";
    }
}


/* The launcher prefix of a line (hdx_launcher_prefix): "[rank3]:" and Slurm's "3: " give rank 3;
 * "[default0]:" (any word then digits) gives local rank 0. Returns the length of the prefix, 0
 * when none. */
static size_t line_prefix(const char *s, int *rank, int *local)
{
    *rank = *local = HDX_UNKNOWN;
    size_t wl = 0, at = 0, nd = 0, len = hdx_launcher_prefix(s, &wl, &at, &nd);
    const char *p = s + at;
    int n = len ? take_int(&p) : -1;
    if (n < 0)
        return 0;
    if (wl == 0 || (wl == 4 && !strncmp(s + at - wl, "rank", 4)))
        *rank = n;
    else
        *local = n;
    return len; /* the line's own text follows as it was, indentation included */
}

/* Iterate lines of text: each is copied, NUL-terminated and cut at HDX_FOREIGN_MAX_LINE. */
typedef struct lines {
    const char *text;
    size_t len, at, lineno;
    char *buf;
} lines;

static const char *next_line(lines *it)
{
    if (it->at >= it->len)
        return NULL;
    const char *s = it->text + it->at;
    const char *nl = memchr(s, '\n', it->len - it->at);
    size_t n = nl ? (size_t)(nl - s) : it->len - it->at;
    it->at += n + (nl ? 1 : 0);
    it->lineno++;
    size_t keep = n < HDX_FOREIGN_MAX_LINE ? n : HDX_FOREIGN_MAX_LINE;
    memcpy(it->buf, s, keep);
    it->buf[keep] = 0;
    if (keep && it->buf[keep - 1] == '\r')
        it->buf[keep - 1] = 0;
    return it->buf;
}

/* ---- sniffing ------------------------------------------------------------ */

/* What one line (prefix stripped) suggests. */
enum hint { H_NONE, H_PYSPY_PROC, H_PYSPY_PYTHON, H_GDB_THREAD, H_GDB_PYBT, H_EU_PID, H_EU_TID, H_EU_FRAME,
            H_FH_HEADER, H_FH_FILE, H_FH_TIMEOUT };

static enum hint hint_of(const char *s)
{
    const char *p;
    if (starts(s, "Process ")) {
        p = s + 8;
        if (take_int(&p) >= 0 && *p == ':')
            return H_PYSPY_PROC;
    }
    if (starts(s, "Python v") && strchr(s, '('))
        return H_PYSPY_PYTHON;
    if (starts(s, "Thread ")) {
        p = s + 7;
        if (take_int(&p) >= 0 && starts(p, " (") && (strstr(p, "(LWP ") || strstr(p, "(Thread ")))
            return H_GDB_THREAD;
        if (is_hex_token(s + 7) && strstr(s, "(most recent call first):"))
            return H_FH_HEADER;
    }
    if (starts(s, "Current thread 0x") && strstr(s, "(most recent call first):"))
        return H_FH_HEADER;
    if (!strcmp(s, "Stack (most recent call first):"))
        return H_FH_HEADER;
    if (!strcmp(s, "Traceback (most recent call first):"))
        return H_GDB_PYBT;
    if (starts(s, "PID ")) {
        p = s + 4;
        if (take_int(&p) >= 0 && starts(p, " - "))
            return H_EU_PID;
    }
    if (starts(s, "TID ")) {
        p = s + 4;
        if (take_int(&p) >= 0 && !strcmp(p, ":"))
            return H_EU_TID;
    }
    if (s[0] == '#') {
        p = s + 1;
        if (take_int(&p) >= 0 && *p == ' ') {
            while (*p == ' ')
                p++;
            if (is_hex_token(p) && !strstr(p, " in "))
                return H_EU_FRAME;
        }
    }
    if (starts(s, "  File \"") && strstr(s, "\", line ") && strstr(s, " in ") && !strstr(s, ", in "))
        return H_FH_FILE;
    if (starts(s, "Timeout (") && ends(s, ")!"))
        return H_FH_TIMEOUT;
    return H_NONE;
}

/* py-spy's --json (an array of thread objects) when text opens like one: HDX_FOREIGN_PYSPY_JSON,
 * or HDX_FOREIGN_NONE for another array; -1 when text is no array. */
static int sniff_array(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len && isspace((unsigned char)text[i]))
        i++;
    if (!(i + 1 < len && text[i] == '[' && (text[i + 1] == '{' || isspace((unsigned char)text[i + 1]) ||
                                            text[i + 1] == ']')))
        return -1;
    size_t look = len - i < 8192 ? len - i : 8192;
    if (memmem(text + i, look, "\"thread_id\"", 11) && memmem(text + i, look, "\"frames\"", 8))
        return HDX_FOREIGN_PYSPY_JSON;
    return HDX_FOREIGN_NONE;
}

/* Count what each line of text[0..len) suggests into seen (indexed by enum hint). 0 or -ENOMEM. */
static int count_hints(const char *text, size_t len, int *seen)
{
    char *buf = malloc(HDX_FOREIGN_MAX_LINE + 1);
    if (!buf)
        return -ENOMEM;
    lines it = {text, len, 0, 0, buf};
    const char *s;
    while ((s = next_line(&it))) {
        int r, l;
        s += line_prefix(s, &r, &l);
        seen[hint_of(s)]++;
    }
    free(buf);
    return 0;
}

/* The format the lines' hints (count_hints) point to. */
static enum hdx_foreign_format format_of(const int *seen)
{
    if (seen[H_PYSPY_PROC] && seen[H_PYSPY_PYTHON])
        return HDX_FOREIGN_PYSPY;
    if (seen[H_GDB_THREAD])
        return HDX_FOREIGN_GDB;
    if (seen[H_EU_PID] || (seen[H_EU_TID] && seen[H_EU_FRAME]))
        return HDX_FOREIGN_EUSTACK;
    if (seen[H_FH_HEADER] && seen[H_FH_FILE])
        return HDX_FOREIGN_FAULTHANDLER;
    if (seen[H_GDB_PYBT]) /* py-bt alone, without thread headers */
        return HDX_FOREIGN_GDB;
    return HDX_FOREIGN_NONE;
}

enum hdx_foreign_format hdx_foreign_sniff(const char *text, size_t len)
{
    if (!text)
        return HDX_FOREIGN_NONE;
    if (len > HDX_FOREIGN_MAX_BYTES)
        len = HDX_FOREIGN_MAX_BYTES;
    if (hdx_foreign_flight_recorder_sniff(text, len))
        return HDX_FOREIGN_FLIGHT_RECORDER;
    int array = sniff_array(text, len), seen[H_FH_TIMEOUT + 1] = {0};
    if (array >= 0)
        return (enum hdx_foreign_format)array;
    return count_hints(text, len, seen) ? HDX_FOREIGN_NONE : format_of(seen);
}

/* ---- finishing ----------------------------------------------------------------- */

/* The main thread to threads[0]. */
static void main_first(hdx_process *p, enum hdx_foreign_format fmt)
{
    size_t at = p->n_threads;
    for (size_t i = 0; i < p->n_threads && at == p->n_threads; i++) {
        const hdx_thread *t = &p->threads[i];
        if (fmt == HDX_FOREIGN_FAULTHANDLER) {
            if (t->n_frames && t->frames[t->n_frames - 1].function &&
                !strcmp(t->frames[t->n_frames - 1].function, "<module>"))
                at = i;
        } else if ((p->pid != HDX_UNKNOWN && t->tid == p->pid) || (t->name && !strcmp(t->name, "MainThread"))) {
            at = i;
        }
    }
    if (fmt == HDX_FOREIGN_FAULTHANDLER && at == p->n_threads)
        for (size_t i = 0; i < p->n_threads && at == p->n_threads; i++)
            if (p->threads[i].stack_error == 1) /* the "Current thread" */
                at = i;
    if (at == p->n_threads || at == 0)
        return;
    hdx_thread main_thread = p->threads[at];
    memmove(&p->threads[1], &p->threads[0], at * sizeof *p->threads);
    p->threads[0] = main_thread;
}

/* "rank3" (any case, with '-', '_' or nothing before the digits) in the file's base name. */
static int rank_from_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (const char *q = base; *q; q++) {
        if (strncasecmp(q, "rank", 4) != 0)
            continue;
        const char *d = q + 4;
        if (*d == '-' || *d == '_' || *d == '.')
            d++;
        int r = take_int(&d);
        if (r >= 0 && r < (1 << 24))
            return r;
    }
    return HDX_UNKNOWN;
}

static int finish(parser *P, hdx_evidence *ev)
{
    hdx_evidence *one = P->one;
    size_t kept = 0;
    int rc;
    for (size_t i = 0; i < one->n_procs; i++) {
        hdx_process *p = &one->procs[i];
        if (P->meta[i].dropped)
            continue;
        kept++;
        for (size_t k = 0; k < p->n_threads; k++) {
            hdx_thread *t = &p->threads[k];
            if (t->n_frames > HDX_FOREIGN_MAX_FRAMES)
                t->n_frames = HDX_FOREIGN_MAX_FRAMES; /* the counted-once overflow */
            if (t->n_py_frames > HDX_FOREIGN_MAX_FRAMES)
                t->n_py_frames = HDX_FOREIGN_MAX_FRAMES;
            if (P->fmt == HDX_FOREIGN_GDB && (rc = hdx_foreign_gdb_merge(t)) < 0)
                return rc;
        }
        main_first(p, P->fmt);
        for (size_t k = 0; k < p->n_threads; k++)
            if (P->fmt == HDX_FOREIGN_FAULTHANDLER)
                p->threads[k].stack_error = 0;
    }
    size_t threads = 0;
    for (size_t i = 0; i < one->n_procs; i++)
        threads += P->meta[i].dropped ? 0 : one->procs[i].n_threads;
    if (!threads)
        return hdx_foreign_fail(P, -EBADMSG, "no stack in this %s output", hdx_foreign_format_name(P->fmt));
    int from_name = rank_from_name(P->name);
    /* A job log whose lines are all one rank's: its one unprefixed dump is that rank's, unless a
     * prefixed dump of the file is already that rank's. */
    size_t unprefixed = 0;
    int log_rank = P->log_rank;
    for (size_t i = 0; i < one->n_procs; i++) {
        if (P->meta[i].dropped)
            continue;
        unprefixed += !P->meta[i].has_prefix;
        if (P->meta[i].rank == log_rank)
            log_rank = HDX_UNKNOWN;
    }
    if (unprefixed != 1)
        log_rank = HDX_UNKNOWN;
    /* Ranks, and the checks, before anything moves into ev. */
    size_t superseded = 0;
    for (size_t i = 0; i < one->n_procs; i++) {
        hdx_process *p = &one->procs[i];
        pmeta *m = &P->meta[i];
        if (m->dropped)
            continue;
        if (m->rank != HDX_UNKNOWN)
            p->rank = m->rank;
        else if (!m->has_prefix && log_rank != HDX_UNKNOWN) {
            p->rank = log_rank;
            m->log_ranked = 1;
        } else if (!m->has_prefix && kept == 1 && from_name != HDX_UNKNOWN)
            p->rank = from_name;
        if (m->local != HDX_UNKNOWN)
            p->local_rank = m->local;
        for (size_t j = 0; p->rank >= 0 && j < i; j++)
            if (!P->meta[j].dropped && one->procs[j].rank == p->rank)
                return hdx_foreign_fail(P, -EEXIST, "rank %d appears twice in this file", p->rank);
        for (size_t j = 0; p->rank >= 0 && j < ev->n_procs && !m->dropped; j++) {
            const hdx_process *q = &ev->procs[j];
            if (q->rank != p->rank)
                continue;
            if (!P->in_log)
                return hdx_foreign_fail(P, -EEXIST,
                                        "rank %d is also in an earlier input (pid %d%s%s); give each rank once",
                                        p->rank, q->pid, q->host ? " on " : "", q->host ? q->host : "");
            /* A traceback printed into the log is the weaker view of a process that another
             * input (a snapshot, a core, a dump of its own) shows: that one is kept. */
            char pid[32] = "";
            if (q->pid >= 0)
                snprintf(pid, sizeof pid, "pid %d", q->pid);
            if (hdx_evidence_note(ev, "%s: the %s dump of rank %d in this log is left out: another input has rank %d "
                                      "(%s%s%s), whose stacks are used", P->name, hdx_foreign_format_name(P->fmt),
                                  p->rank, p->rank, q->pid >= 0 ? pid : "its process", q->host ? " on " : "",
                                  q->host ? q->host : ""))
                return -ENOMEM;
            m->dropped = 1;
            superseded++;
        }
    }
    if (superseded == kept)
        return 0; /* every dump of the log is shown better by another input */
    P->lineno = 0;
    const char *fmt = hdx_foreign_format_name(P->fmt);
    if (hdx_evidence_note(ev, "%s: %s output: stacks only, no CPU time%s", P->name, fmt,
                          P->fmt == HDX_FOREIGN_FAULTHANDLER ? ", no pid or TIDs and no locals (point-to-point "
                                                               "peers cannot be read)"
                          : P->fmt == HDX_FOREIGN_GDB || P->fmt == HDX_FOREIGN_EUSTACK
                              ? " and no Python locals"
                              : ""))
        return -ENOMEM;
    if (P->replaced && hdx_evidence_note(ev, "%s: %d earlier faulthandler dump%s of the same process%s replaced by "
                                             "the later one",
                                         P->name, P->replaced, P->replaced == 1 ? "" : "s",
                                         P->replaced == 1 ? "" : "es"))
        return -ENOMEM;
    for (size_t i = 0; i < one->n_procs; i++) {
        hdx_process *p = &one->procs[i];
        const pmeta *m = &P->meta[i];
        if (m->dropped)
            continue;
        char who[64];
        if (p->pid != HDX_UNKNOWN)
            snprintf(who, sizeof who, "pid %d", p->pid);
        else
            snprintf(who, sizeof who, "process %zu of the file", i + 1);
        int r;
        if (m->rank != HDX_UNKNOWN)
            r = hdx_evidence_note(ev, "%s: %s is rank %d, from its \"[rank%d]:\" line prefix", P->name, who, p->rank,
                                  p->rank);
        else if (m->log_ranked)
            r = hdx_evidence_note(ev, "%s: %s is rank %d, the one rank of the log's lines (the dump itself has no "
                                  "rank prefix)", P->name, who, p->rank);
        else if (p->rank != HDX_UNKNOWN)
            r = hdx_evidence_note(ev, "%s: %s is rank %d, from the file name only", P->name, who, p->rank);
        else
            r = hdx_evidence_note(ev, "%s: %s: rank unknown (no \"[rankN]:\" prefix%s)", P->name, who,
                                  m->local != HDX_UNKNOWN ? "; the \"[nameN]:\" prefix gives the local rank only"
                                  : kept > 1              ? ", several processes in one file"
                                                          : ", no rank in the file name");
        if (r)
            return -ENOMEM;
        if (m->cut && hdx_evidence_note(ev, "%s: %s: %d thread%s cut at %d frames", P->name, who, m->cut,
                                        m->cut == 1 ? "" : "s", HDX_FOREIGN_MAX_FRAMES))
            return -ENOMEM;
    }
    for (size_t i = 0; i < one->n_procs; i++) {
        if (P->meta[i].dropped)
            continue;
        hdx_process *dst = hdx_evidence_add_process(ev);
        if (!dst)
            return -ENOMEM;
        *dst = one->procs[i];
        memset(&one->procs[i], 0, sizeof one->procs[i]);
    }
    return 0;
}

static int load_text(const char *text, size_t len, enum hdx_foreign_format format, const char *name, int log_rank,
                     int in_log, hdx_evidence *ev, char **err);

int hdx_foreign_load_text(const char *text, size_t len, enum hdx_foreign_format format, const char *name,
                          hdx_evidence *ev, char **err)
{
    return load_text(text, len, format, name, HDX_UNKNOWN, 0, ev, err);
}

static int load_text(const char *text, size_t len, enum hdx_foreign_format format, const char *name, int log_rank,
                     int in_log, hdx_evidence *ev, char **err)
{
    if (err)
        *err = NULL;
    if (!name)
        name = "(input)";
    if (len > HDX_FOREIGN_MAX_BYTES) {
        if (err)
            *err = hdx_asprintf("%s: larger than %u MiB: not read", name, HDX_FOREIGN_MAX_BYTES >> 20);
        return -EBADMSG;
    }
    if (format == HDX_FOREIGN_NONE)
        format = hdx_foreign_sniff(text, len);
    if (format == HDX_FOREIGN_NONE) {
        if (err)
            *err = hdx_asprintf("%s: not a stack dump this reader knows (py-spy dump, its --json, gdb "
                                "'thread apply all bt', eu-stack, faulthandler, a Flight Recorder dump)",
                                name);
        return -EINVAL;
    }
    if (format == HDX_FOREIGN_FLIGHT_RECORDER) { /* one rank's record, not lines of stacks */
        int rc = hdx_foreign_flight_recorder(text, len, name, ev, err);
        if (rc == -ENOMEM && err && !*err)
            *err = hdx_asprintf("%s: out of memory", name);
        return rc;
    }
    parser P = {name, format, hdx_evidence_new(), NULL, 0, NULL, 0, 0, err, 0, log_rank, in_log};
    char *buf = malloc(HDX_FOREIGN_MAX_LINE + 1);
    int rc = 0;
    if (!P.one || !buf) {
        rc = -ENOMEM;
        goto out;
    }
    if (format == HDX_FOREIGN_PYSPY_JSON) {
        rc = hdx_foreign_pyspy_json(&P, text, len);
    } else {
        lines it = {text, len, 0, 0, buf};
        const char *line;
        while (rc == 0 && (line = next_line(&it))) {
            P.lineno = it.lineno;
            int rank, local;
            size_t pre = line_prefix(line, &rank, &local);
            stream *s = hdx_foreign_stream_for(&P, rank, local, pre > 0);
            if (!s) {
                rc = P.n_st >= HDX_FOREIGN_MAX_PROCS
                         ? hdx_foreign_fail(&P, -EBADMSG, "more than %d line prefixes", HDX_FOREIGN_MAX_PROCS)
                         : -ENOMEM;
                break;
            }
            line += pre;
            switch (format) {
            case HDX_FOREIGN_PYSPY: rc = hdx_foreign_pyspy_line(&P, s, line); break;
            case HDX_FOREIGN_GDB: rc = hdx_foreign_gdb_line(&P, s, line); break;
            case HDX_FOREIGN_EUSTACK: rc = hdx_foreign_eustack_line(&P, s, line); break;
            case HDX_FOREIGN_FAULTHANDLER: rc = hdx_foreign_faulthandler_line(&P, s, line); break;
            default: rc = -EINVAL; break;
            }
        }
    }
    if (rc == 0) {
        P.lineno = 0;
        rc = finish(&P, ev);
    }
out:
    if (rc == -ENOMEM && err && !*err)
        *err = hdx_asprintf("%s: out of memory", name);
    free(buf);
    free(P.meta);
    free(P.st);
    hdx_evidence_free(P.one);
    return rc;
}

/* The file into a heap buffer of at most HDX_FOREIGN_MAX_BYTES (+1 to tell a larger one). */
static char *slurp(const char *path, size_t *len, int *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *e = errno;
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    while (b) {
        if (n == cap) {
            if (cap > HDX_FOREIGN_MAX_BYTES)
                break;
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            *e = errno;
            free(b);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (!b)
        *e = ENOMEM;
    close(fd);
    *len = n;
    return b;
}

static int load_file(const char *path, int log_rank, int in_log, hdx_evidence *ev, char **err)
{
    size_t len = 0;
    int e = 0;
    if (err)
        *err = NULL;
    char *text = slurp(path, &len, &e);
    if (!text) {
        if (err)
            *err = hdx_asprintf("%s: cannot read: %s", path, strerror(e));
        return -e;
    }
    int rc = load_text(text, len, HDX_FOREIGN_NONE, path, log_rank, in_log, ev, err);
    free(text);
    return rc;
}

int hdx_foreign_load(const char *path, hdx_evidence *ev, char **err)
{
    return load_file(path, HDX_UNKNOWN, 0, ev, err);
}

int hdx_foreign_load_log(const char *path, int log_rank, hdx_evidence *ev, char **err)
{
    return load_file(path, log_rank, 1, ev, err);
}

/* The file is read a chunk at a time (its first HDX_FOREIGN_MAX_BYTES, as hdx_foreign_sniff
 * looks at), so that sniffing a job log of gigabytes takes a chunk of memory, not the log. */
#define SNIFF_CHUNK (1u << 20)
enum hdx_foreign_format hdx_foreign_sniff_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        return HDX_FOREIGN_NONE;
    char *buf = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? malloc(SNIFF_CHUNK) : NULL;
    int seen[H_FH_TIMEOUT + 1] = {0}, array = -1, first = 1;
    size_t kept = 0, total = 0; /* kept: the bytes of a line not yet ended, at buf's start */
    ssize_t got;
    while (buf && total < HDX_FOREIGN_MAX_BYTES &&
           (got = read(fd, buf + kept, SNIFF_CHUNK - kept)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        total += (size_t)got;
        size_t n = kept + (size_t)got;
        if (first && hdx_foreign_flight_recorder_sniff(buf, n))
            array = HDX_FOREIGN_FLIGHT_RECORDER;
        if (first && (array >= 0 || (array = sniff_array(buf, n)) >= 0))
            break;
        first = 0;
        const char *nl = memrchr(buf, '\n', n);
        /* a chunk without a line end is one line, cut (as next_line cuts it) */
        size_t whole = nl ? (size_t)(nl - buf) + 1 : n;
        if (count_hints(buf, whole, seen))
            break;
        kept = n - whole;
        memmove(buf, buf + whole, kept);
    }
    if (buf && array < 0 && kept)
        count_hints(buf, kept, seen);
    free(buf);
    close(fd);
    return array >= 0 ? (enum hdx_foreign_format)array : format_of(seen);
}
