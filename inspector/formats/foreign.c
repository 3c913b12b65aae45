/*
 * Other tools' stack dumps (foreign.h): one line parser per text format, one
 * cJSON reader for py-spy --json, and one finishing pass that gives every
 * process its rank, its main thread first and, for gdb, its merged stacks.
 *
 * Sources of the formats: py-spy's src/dump.rs and src/stack_trace.rs (the
 * text and JSON it prints), gdb 13 and eu-stack (elfutils 0.188) as Debian 12
 * prints them, CPython's Tools/gdb/libpython.py (py-bt) and
 * Python/traceback.c (faulthandler's dump_traceback).
 */
#include "formats/foreign.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "python/merge.h"
#include "model/util.h"

const char *hdx_foreign_format_name(enum hdx_foreign_format f)
{
    switch (f) {
    case HDX_FOREIGN_PYSPY: return "py-spy dump";
    case HDX_FOREIGN_PYSPY_JSON: return "py-spy dump --json";
    case HDX_FOREIGN_GDB: return "gdb";
    case HDX_FOREIGN_EUSTACK: return "eu-stack";
    case HDX_FOREIGN_FAULTHANDLER: return "faulthandler";
    default: return "none";
    }
}

/* ---- small string helpers ---------------------------------------------- */

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* A non-negative decimal int at *s, advancing *s; -1 when none or too large. */
static int take_int(const char **s)
{
    long v = 0;
    const char *p = *s;
    if (!isdigit((unsigned char)*p))
        return -1;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (*p++ - '0');
        if (v > 0x7fffffff)
            return -1;
    }
    *s = p;
    return (int)v;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static void rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
}

/* The launcher prefix of a line: "[rank3]:" gives rank 3; "[default0]:" (any
 * word then digits) gives local rank 0. Returns the length of the prefix, 0
 * when none. */
static size_t line_prefix(const char *s, int *rank, int *local)
{
    *rank = *local = HDX_UNKNOWN;
    if (s[0] != '[')
        return 0;
    const char *p = s + 1, *w = p;
    while (isalpha((unsigned char)*p) || *p == '_')
        p++;
    if (p == w)
        return 0;
    int n = take_int(&p);
    if (n < 0 || p[0] != ']' || p[1] != ':')
        return 0;
    size_t wl = 0;
    while (isalpha((unsigned char)w[wl]) || w[wl] == '_')
        wl++;
    if (wl == 4 && !strncmp(w, "rank", 4))
        *rank = n;
    else
        *local = n;
    return (size_t)(p + 2 - s); /* the line's own text follows as it was, indentation included */
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

static int is_hex_token(const char *s)
{
    if (s[0] != '0' || s[1] != 'x' || !isxdigit((unsigned char)s[2]))
        return 0;
    return 1;
}

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

enum hdx_foreign_format hdx_foreign_sniff(const char *text, size_t len)
{
    if (!text)
        return HDX_FOREIGN_NONE;
    if (len > HDX_FOREIGN_MAX_BYTES)
        len = HDX_FOREIGN_MAX_BYTES;
    size_t i = 0;
    while (i < len && isspace((unsigned char)text[i]))
        i++;
    if (i < len && text[i] == '[' && i + 1 < len && (text[i + 1] == '{' || isspace((unsigned char)text[i + 1]) ||
                                                      text[i + 1] == ']')) {
        size_t look = len - i < 8192 ? len - i : 8192;
        if (memmem(text + i, look, "\"thread_id\"", 11) && memmem(text + i, look, "\"frames\"", 8))
            return HDX_FOREIGN_PYSPY_JSON;
        return HDX_FOREIGN_NONE;
    }
    char *buf = malloc(HDX_FOREIGN_MAX_LINE + 1);
    if (!buf)
        return HDX_FOREIGN_NONE;
    lines it = {text, len, 0, 0, buf};
    int seen[H_FH_TIMEOUT + 1] = {0};
    const char *s;
    while ((s = next_line(&it))) {
        int r, l;
        s += line_prefix(s, &r, &l);
        seen[hint_of(s)]++;
    }
    free(buf);
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

/* ---- the parser's state --------------------------------------------------- */

typedef struct stream { /* the lines of one launcher prefix */
    int rank, local;    /* from the prefix, HDX_UNKNOWN */
    int has_prefix;
    long proc;          /* index in P->one->procs, -1 none */
    long thread;        /* index in that process's threads, -1 none */
    int in_frame;       /* py-spy: locals may follow the last frame */
    int py;             /* gdb: in a py-bt section of the current thread */
    int new_dump;       /* faulthandler: the next header starts a new dump */
} stream;

typedef struct pmeta {
    int rank, local, has_prefix; /* of the stream that made it */
    int dropped;                 /* faulthandler: a later dump of the same stream replaced it */
    int log_ranked;              /* its rank is the one rank of the job log's lines */
    int cut;                     /* threads whose frames were cut at the limit */
} pmeta;

typedef struct parser {
    const char *name;
    enum hdx_foreign_format fmt;
    hdx_evidence *one;
    pmeta *meta; /* parallel to one->procs */
    size_t n_meta;
    stream *st;
    size_t n_st;
    size_t lineno;
    char **err;
    int replaced; /* faulthandler dumps replaced by a later one */
    int log_rank; /* a job log's one rank (hdx_foreign_load_log), HDX_UNKNOWN */
    int in_log;   /* a dump inside a job log: a rank that ev has already leaves it out */
} parser;

static int fail(parser *P, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *P, int code, const char *fmt, ...)
{
    if (P->err && !*P->err) {
        char what[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        *P->err = P->lineno ? hdx_asprintf("%s:%zu: %s", P->name, P->lineno, what)
                            : hdx_asprintf("%s: %s", P->name, what);
    }
    return code;
}

static stream *stream_for(parser *P, int rank, int local, int has_prefix)
{
    for (size_t i = 0; i < P->n_st; i++)
        if (P->st[i].rank == rank && P->st[i].local == local && P->st[i].has_prefix == has_prefix)
            return &P->st[i];
    if (P->n_st >= HDX_FOREIGN_MAX_PROCS)
        return NULL;
    stream *s = hdx_append((void **)&P->st, &P->n_st, sizeof *s);
    if (!s)
        return NULL;
    s->rank = rank;
    s->local = local;
    s->has_prefix = has_prefix;
    s->proc = s->thread = -1;
    return s;
}

static hdx_process *proc_of(parser *P, stream *s)
{
    return s->proc >= 0 ? &P->one->procs[s->proc] : NULL;
}

static hdx_thread *thread_of(parser *P, stream *s)
{
    hdx_process *p = proc_of(P, s);
    return p && s->thread >= 0 ? &p->threads[s->thread] : NULL;
}

static int new_process(parser *P, stream *s, int pid)
{
    if (P->one->n_procs >= HDX_FOREIGN_MAX_PROCS)
        return fail(P, -EBADMSG, "more than %d processes", HDX_FOREIGN_MAX_PROCS);
    hdx_process *p = hdx_evidence_add_process(P->one);
    pmeta *m = p ? hdx_append((void **)&P->meta, &P->n_meta, sizeof *m) : NULL;
    if (!m)
        return -ENOMEM;
    p->pid = pid;
    m->rank = s->rank;
    m->local = s->local;
    m->has_prefix = s->has_prefix;
    s->proc = (long)(P->one->n_procs - 1);
    s->thread = -1;
    s->in_frame = s->py = 0;
    return 0;
}

static int new_thread(parser *P, stream *s, int tid, const char *name)
{
    hdx_process *p = proc_of(P, s);
    int r;
    if (!p && (r = new_process(P, s, HDX_UNKNOWN)) < 0)
        return r;
    p = proc_of(P, s);
    if (p->n_threads >= HDX_FOREIGN_MAX_THREADS)
        return fail(P, -EBADMSG, "more than %d threads in one process", HDX_FOREIGN_MAX_THREADS);
    hdx_thread *t = hdx_process_add_thread(p);
    if (!t)
        return -ENOMEM;
    t->tid = tid;
    t->syscall = HDX_SYSCALL_UNKNOWN;
    if (name && !(t->name = strdup(name)))
        return -ENOMEM;
    s->thread = (long)(p->n_threads - 1);
    s->in_frame = s->py = 0;
    return 0;
}

/* A frame appended to the current thread (Python frames of a gdb py-bt go to
 * py_frames until the merge); NULL with *rc set: -ENOMEM, or 0 when the
 * thread is full (the frame is dropped and the cut counted). */
static hdx_frame *add_frame(parser *P, stream *s, int python_side, int *rc)
{
    hdx_thread *t = thread_of(P, s);
    *rc = 0;
    if (!t)
        return NULL;
    size_t *n = python_side ? &t->n_py_frames : &t->n_frames;
    if (*n >= HDX_FOREIGN_MAX_FRAMES) {
        if (*n == HDX_FOREIGN_MAX_FRAMES) {
            P->meta[s->proc].cut++;
            (*n)++; /* counted once; the extra count is removed at the end */
        }
        return NULL;
    }
    hdx_frame *f;
    if (python_side) {
        f = hdx_append((void **)&t->py_frames, &t->n_py_frames, sizeof *f);
        if (f)
            memset(f, 0, sizeof *f);
    } else {
        f = hdx_thread_add_frame(t);
    }
    if (!f)
        *rc = -ENOMEM;
    return f;
}

/* ---- py-spy locals --------------------------------------------------------- */

/* py-spy's repr of a local (python_data_access.rs format_variable): ints,
 * floats, bools, None and quoted strings in full; "<Type at 0x...>" else. */
static int set_value(hdx_local *v, const char *repr)
{
    char *end;
    if (!repr || !strcmp(repr, "?")) {
        v->kind = HDX_VAL_OTHER;
        return (v->s = strdup("?")) ? 0 : -ENOMEM;
    }
    if (!strcmp(repr, "None")) {
        v->kind = HDX_VAL_NONE;
        return 0;
    }
    if (!strcmp(repr, "True") || !strcmp(repr, "False")) {
        v->kind = HDX_VAL_BOOL;
        v->i = repr[0] == 'T';
        return 0;
    }
    if (*repr) {
        errno = 0;
        long long i = strtoll(repr, &end, 10);
        if (!*end && errno == 0) {
            v->kind = HDX_VAL_INT;
            v->i = i;
            return 0;
        }
        double d = strtod(repr, &end);
        if (!*end && (isdigit((unsigned char)repr[0]) || repr[0] == '-' || repr[0] == '.')) {
            v->kind = HDX_VAL_FLOAT;
            v->f = d;
            return 0;
        }
    }
    size_t n = strlen(repr);
    if (n >= 2 && (repr[0] == '"' || repr[0] == '\'') && repr[n - 1] == repr[0]) {
        v->kind = HDX_VAL_STR;
        return (v->s = dupn(repr + 1, n - 2)) ? 0 : -ENOMEM;
    }
    v->kind = HDX_VAL_OTHER;
    if (repr[0] == '<') {
        const char *e = strstr(repr, " at 0x");
        if (!e)
            e = repr + strcspn(repr, " >");
        return (v->s = dupn(repr + 1, (size_t)(e - repr - 1))) ? 0 : -ENOMEM;
    }
    return (v->s = dupn(repr, n < 64 ? n : 64)) ? 0 : -ENOMEM;
}

static int add_local(hdx_frame *f, const char *name, const char *repr)
{
    if (f->n_locals >= HDX_FOREIGN_MAX_LOCALS)
        return 0;
    hdx_local *v = hdx_append((void **)&f->locals, &f->n_locals, sizeof *v);
    if (!v)
        return -ENOMEM;
    memset(v, 0, sizeof *v);
    if (!(v->name = strdup(name)))
        return -ENOMEM;
    return set_value(v, repr);
}

/* ---- py-spy dump text ------------------------------------------------------- */

/* A file is Python's when py-spy shows a .py (or Cython .pyx) file, or <frozen ...>, <string>. */
static int python_file(const char *file)
{
    return ends(file, ".py") || ends(file, ".pyx") || ends(file, ".pyw") || file[0] == '<';
}

static int pyspy_line(parser *P, stream *s, const char *line)
{
    int rc;
    const char *p;
    if (starts(line, "Process ")) {
        p = line + 8;
        int pid = take_int(&p);
        if (pid >= 0 && *p == ':') {
            if ((rc = new_process(P, s, pid)) < 0)
                return rc;
            hdx_process *proc = proc_of(P, s);
            p++;
            while (*p == ' ')
                p++;
            /* The command line, joined by spaces: split it back (arguments with spaces are lost). */
            while (*p) {
                size_t n = strcspn(p, " ");
                char **slot = hdx_append((void **)&proc->cmdline, &proc->n_cmdline, sizeof *slot);
                if (!slot || !(*slot = dupn(p, n)))
                    return -ENOMEM;
                p += n;
                while (*p == ' ')
                    p++;
            }
            return 0;
        }
    }
    if (starts(line, "Parent Process ")) {
        p = line + 15;
        int ppid = take_int(&p);
        if (ppid >= 0 && proc_of(P, s))
            proc_of(P, s)->ppid = ppid;
        return 0;
    }
    if (starts(line, "Python v")) {
        hdx_process *proc = proc_of(P, s);
        if (!proc)
            return fail(P, -EBADMSG, "\"Python v...\" before any \"Process PID:\" line");
        /* "Python v3.11.2 (/usr/bin/python3.11)" -> "3.11 /usr/bin/python3.11", as live capture says. */
        const char *v = line + 8, *open = strchr(v, '(');
        const char *dot = strchr(v, '.'), *dot2 = dot ? strchr(dot + 1, '.') : NULL;
        size_t vl = strcspn(v, " ");
        if (dot2 && (size_t)(dot2 - v) < vl)
            vl = (size_t)(dot2 - v);
        char *exe = NULL;
        if (open) {
            exe = strdup(open + 1);
            if (exe && ends(exe, ")"))
                exe[strlen(exe) - 1] = 0;
        }
        free(proc->python);
        proc->python = hdx_asprintf("%.*s %s", (int)vl, v, exe ? exe : "?");
        if (exe && !proc->exe)
            proc->exe = exe;
        else
            free(exe);
        return proc->python ? 0 : -ENOMEM;
    }
    if (starts(line, "Thread ")) {
        if (!proc_of(P, s))
            return fail(P, -EBADMSG, "a thread before any \"Process PID:\" line");
        p = line + 7;
        size_t idl = strcspn(p, " ");
        char id[64];
        snprintf(id, sizeof id, "%.*s", (int)(idl < 63 ? idl : 63), p);
        const char *st = p + idl;
        if (!starts(st, " ("))
            return fail(P, -EBADMSG, "a thread line without its status: \"%.80s\"", line);
        const char *close = strchr(st, ')');
        if (!close)
            return fail(P, -EBADMSG, "a thread line without its status: \"%.80s\"", line);
        char status[32];
        snprintf(status, sizeof status, "%.*s", (int)(close - st - 2 < 31 ? close - st - 2 : 31), st + 2);
        char *name = NULL;
        if (starts(close, "): \"")) {
            name = strdup(close + 4);
            if (name && ends(name, "\""))
                name[strlen(name) - 1] = 0;
            if (!name)
                return -ENOMEM;
        }
        const char *q = id;
        int tid = take_int(&q);
        if (*q)
            tid = HDX_UNKNOWN; /* "0x7F..": a pthread id, py-spy had no native thread id */
        rc = new_thread(P, s, tid, name ? name : id);
        free(name);
        if (rc < 0)
            return rc;
        /* py-spy's "idle" means it found the thread waiting (a known blocking call). */
        thread_of(P, s)->state = !strcmp(status, "idle") ? 'S' : starts(status, "active") ? 'R' : 0;
        return 0;
    }
    if (starts(line, "            ") && s->in_frame) { /* a local: "name: repr" */
        hdx_thread *t = thread_of(P, s);
        const char *v = line + 12, *colon = strstr(v, ": ");
        if (!colon)
            return fail(P, -EBADMSG, "a local without \"name: value\": \"%.80s\"", line);
        char *name = dupn(v, (size_t)(colon - v));
        if (!name)
            return -ENOMEM;
        rc = add_local(&t->frames[t->n_frames - 1], name, colon + 2);
        free(name);
        return rc;
    }
    if (!strcmp(line, "        Arguments:") || !strcmp(line, "        Arguments::") || !strcmp(line, "        Locals:") ||
        !strcmp(line, "        Locals::")) {
        if (!s->in_frame)
            return fail(P, -EBADMSG, "locals before any frame");
        return 0;
    }
    if (starts(line, "    ") && line[4] != ' ') { /* a frame: "name (file:line)" or "name (file)" */
        hdx_thread *t = thread_of(P, s);
        if (!t)
            return fail(P, -EBADMSG, "a frame line outside any thread: \"%.80s\"", line);
        const char *v = line + 4;
        const char *open = NULL;
        for (const char *q = v; (q = strstr(q, " (")); q++)
            open = q;
        if (!open || !ends(v, ")"))
            return fail(P, -EBADMSG, "a frame line that is not \"function (file:line)\": \"%.80s\"", line);
        char *inside = dupn(open + 2, strlen(open + 2) - 1);
        if (!inside)
            return -ENOMEM;
        int lineno = 0;
        char *colon = strrchr(inside, ':');
        if (colon && colon[1]) {
            const char *q = colon + 1;
            int n = take_int(&q);
            if (n >= 0 && !*q) {
                lineno = n;
                *colon = 0;
            }
        }
        s->in_frame = 0;
        hdx_frame *f = add_frame(P, s, 0, &rc);
        if (!f) {
            free(inside);
            return rc;
        }
        f->function = dupn(v, (size_t)(open - v));
        f->line = lineno;
        if (python_file(inside)) {
            f->kind = HDX_FRAME_PYTHON;
            f->file = inside;
        } else {
            f->kind = HDX_FRAME_NATIVE; /* --native: a source file with a line, else the module */
            if (lineno)
                f->file = inside;
            else
                f->module = inside;
            if (f->function && starts(f->function, "0x") && !strchr(f->function, ' ')) {
                f->pc = strtoull(f->function, NULL, 16);
                free(f->function);
                f->function = NULL;
            }
        }
        s->in_frame = 1;
        return 0;
    }
    return 0; /* blank lines, py-spy's own messages */
}

/* ---- gdb ------------------------------------------------------------------ */

/* "#3  0x00007f.. in name (args) at file.c:57" or "... () from /lib/x.so", innermost first. */
static int gdb_frame(hdx_frame *f, const char *line)
{
    const char *p = line + 1;
    (void)take_int(&p);
    while (*p == ' ')
        p++;
    f->kind = HDX_FRAME_NATIVE;
    if (is_hex_token(p)) {
        f->pc = strtoull(p, (char **)&p, 16);
        if (starts(p, " in "))
            p += 4;
    }
    char *rest = strdup(p);
    if (!rest)
        return -ENOMEM;
    rtrim(rest);
    char *from = strstr(rest, ") from ");
    if (from && !strchr(from + 7, ' ')) {
        if (!(f->module = strdup(from + 7))) {
            free(rest);
            return -ENOMEM;
        }
        from[1] = 0;
    } else {
        char *at = NULL;
        for (char *q = rest; (q = strstr(q, ") at ")); q++)
            at = q;
        if (at && !strchr(at + 5, ' ')) {
            char *colon = strrchr(at + 5, ':');
            const char *q = colon ? colon + 1 : NULL;
            int n = q ? take_int(&q) : -1;
            if (n >= 0 && !*q) {
                f->line = n;
                *colon = 0;
                if (!(f->file = strdup(at + 5))) {
                    free(rest);
                    return -ENOMEM;
                }
                at[1] = 0;
            }
        }
    }
    /* The name ends at the first " (" outside parentheses and angle brackets. */
    size_t end = strlen(rest);
    int paren = 0, angle = 0;
    for (size_t i = 0; rest[i]; i++) {
        char c = rest[i];
        if (c == ' ' && rest[i + 1] == '(' && !paren && !angle) {
            end = i;
            break;
        }
        if (c == '(')
            paren++;
        else if (c == ')' && paren)
            paren--;
        else if (c == '<' && !(i >= 8 && !strncmp(rest + i - 8, "operator", 8)))
            angle++;
        else if (c == '>' && angle)
            angle--;
    }
    rest[end] = 0;
    if (strcmp(rest, "??") != 0 && *rest)
        f->function = strdup(rest);
    free(rest);
    return f->function || !*p || !strncmp(p, "??", 2) ? 0 : (errno == ENOMEM ? -ENOMEM : 0);
}

static hdx_thread *find_tid(hdx_process *p, int tid, long *at)
{
    for (size_t i = 0; p && tid != HDX_UNKNOWN && i < p->n_threads; i++)
        if (p->threads[i].tid == tid) {
            *at = (long)i;
            return &p->threads[i];
        }
    return NULL;
}

static int gdb_line(parser *P, stream *s, const char *line)
{
    int rc;
    const char *p;
    if (starts(line, "Thread ")) {
        p = line + 7;
        int num = take_int(&p);
        if (num >= 0 && starts(p, " (")) {
            /* "Thread 3 (Thread 0x7f.. (LWP 1235) "name"):", "Thread 1 (LWP 1234):", "Thread 1 (process 1234):" */
            const char *lwp = strstr(p, "(LWP "), *proc = strstr(p, "(process ");
            const char *q = lwp ? lwp + 5 : proc ? proc + 9 : NULL;
            int tid = q ? take_int(&q) : -1;
            if (tid < 0)
                return fail(P, -EBADMSG, "a gdb thread line without its LWP: \"%.80s\"", line);
            char *name = NULL;
            const char *quote = strchr(q, '"');
            if (quote) {
                const char *close = strrchr(quote + 1, '"');
                if (close && !(name = dupn(quote + 1, (size_t)(close - quote - 1))))
                    return -ENOMEM;
            }
            long at;
            hdx_process *proc_now = proc_of(P, s);
            if (find_tid(proc_now, tid, &at)) { /* its py-bt section, after the bt */
                s->thread = at;
                s->py = 0;
                free(name);
                return 0;
            }
            rc = new_thread(P, s, tid, name);
            free(name);
            if (rc < 0)
                return rc;
            if (num == 1 && proc_of(P, s)->pid == HDX_UNKNOWN)
                proc_of(P, s)->pid = tid; /* gdb's thread 1 is the process's first thread */
            return 0;
        }
    }
    if (starts(line, "[Inferior ")) { /* "[Inferior 1 (process 18043) detached]": this process ends */
        const char *q = strstr(line, "(process ");
        hdx_process *proc = proc_of(P, s);
        if (q && proc) {
            q += 9;
            int pid = take_int(&q);
            if (pid >= 0)
                proc->pid = pid;
        }
        s->proc = s->thread = -1;
        return 0;
    }
    if (!strcmp(line, "Traceback (most recent call first):")) {
        if (!thread_of(P, s) && (rc = new_thread(P, s, HDX_UNKNOWN, NULL)) < 0) /* py-bt alone */
            return rc;
        s->py = 1;
        return 0;
    }
    if (line[0] == '#' && isdigit((unsigned char)line[1])) {
        if (!thread_of(P, s)) { /* a plain "bt" of one thread, without a header */
            if ((rc = new_thread(P, s, HDX_UNKNOWN, NULL)) < 0)
                return rc;
        }
        hdx_frame *f = add_frame(P, s, 0, &rc);
        return f ? gdb_frame(f, line) : rc;
    }
    if (s->py && starts(line, "  File \"")) {
        /* py-bt: '  File "/x.py", line 12, in leaf' */
        const char *file = line + 8, *endq = strstr(file, "\", line ");
        if (!endq)
            return fail(P, -EBADMSG, "a py-bt line that is not 'File \"...\", line N, in f': \"%.80s\"", line);
        const char *q = endq + 8;
        int n = take_int(&q);
        if (n < 0 || !starts(q, ", in "))
            return fail(P, -EBADMSG, "a py-bt line that is not 'File \"...\", line N, in f': \"%.80s\"", line);
        hdx_frame *f = add_frame(P, s, 1, &rc);
        if (!f)
            return rc;
        f->kind = HDX_FRAME_PYTHON;
        f->line = n;
        f->file = dupn(file, (size_t)(endq - file));
        f->function = strdup(q + 5);
        return f->file && f->function ? 0 : -ENOMEM;
    }
    return 0; /* source lines, "<built-in method ...>", gdb's own messages */
}

/* ---- eu-stack ----------------------------------------------------------------- */

static int eustack_line(parser *P, stream *s, const char *line)
{
    int rc;
    const char *p;
    if (starts(line, "PID ")) {
        p = line + 4;
        int pid = take_int(&p);
        if (pid >= 0 && starts(p, " - "))
            return new_process(P, s, pid);
    }
    if (starts(line, "TID ")) {
        p = line + 4;
        int tid = take_int(&p);
        if (tid >= 0 && *p == ':') {
            if ((rc = new_thread(P, s, tid, NULL)) < 0)
                return rc;
            if (proc_of(P, s)->pid == HDX_UNKNOWN)
                proc_of(P, s)->pid = tid;
            return 0;
        }
    }
    if (line[0] == '#' && isdigit((unsigned char)line[1])) {
        if (!thread_of(P, s))
            return fail(P, -EBADMSG, "a frame line before any \"TID N:\" line");
        p = line + 1;
        (void)take_int(&p);
        while (*p == ' ')
            p++;
        if (!is_hex_token(p))
            return fail(P, -EBADMSG, "an eu-stack frame without its address: \"%.80s\"", line);
        hdx_frame *f = add_frame(P, s, 0, &rc);
        if (!f)
            return rc;
        f->kind = HDX_FRAME_NATIVE;
        f->pc = strtoull(p, (char **)&p, 16);
        while (*p == ' ')
            p++;
        char *rest = strdup(p);
        if (!rest)
            return -ENOMEM;
        rtrim(rest);
        char *dash = NULL;
        if (starts(rest, "- "))
            dash = rest;
        for (char *q = rest; (q = strstr(q, " - ")); q++)
            dash = q;
        if (dash) {
            const char *mod = dash + (dash == rest && rest[0] == '-' ? 2 : 3);
            if (*mod && !(f->module = strdup(mod))) {
                free(rest);
                return -ENOMEM;
            }
            *dash = 0;
        }
        rtrim(rest);
        if (*rest)
            f->function = rest;
        else
            free(rest);
        return 0;
    }
    if (starts(line, "    ") && thread_of(P, s) && thread_of(P, s)->n_frames) { /* -s: "    file.c:71:10" */
        hdx_thread *t = thread_of(P, s);
        hdx_frame *f = &t->frames[t->n_frames - 1];
        if (f->file)
            return 0;
        char *src = strdup(line + 4);
        if (!src)
            return -ENOMEM;
        for (int k = 0; k < 2; k++) { /* ":line:column" or ":line" */
            char *colon = strrchr(src, ':');
            const char *q = colon ? colon + 1 : NULL;
            int n = q ? take_int(&q) : -1;
            if (n < 0 || *q)
                break;
            f->line = n;
            *colon = 0;
        }
        f->file = src;
        return 0;
    }
    return 0;
}

/* ---- faulthandler ---------------------------------------------------------- */

static int fh_line(parser *P, stream *s, const char *line)
{
    int rc;
    if (starts(line, "Timeout (") || starts(line, "Fatal Python error")) {
        s->new_dump = 1;
        return 0;
    }
    const char *id = NULL;
    int current = 0;
    if (starts(line, "Thread 0x") && strstr(line, "(most recent call first):"))
        id = line + 7;
    else if (starts(line, "Current thread 0x") && strstr(line, "(most recent call first):"))
        id = line + 15, current = 1;
    else if (!strcmp(line, "Stack (most recent call first):"))
        id = "", current = 1;
    if (id) {
        char ident[32];
        size_t n = strcspn(id, " ");
        snprintf(ident, sizeof ident, "%.*s", (int)(n < 31 ? n : 31), id);
        hdx_process *p = proc_of(P, s);
        int repeat = 0;
        for (size_t i = 0; p && *ident && i < p->n_threads; i++)
            repeat |= p->threads[i].name && !strcmp(p->threads[i].name, ident);
        if (!p || s->new_dump || repeat) {
            if (p) { /* a later dump of the same stream: the hang as it stands is the last one */
                P->meta[s->proc].dropped = 1;
                P->replaced++;
            }
            if ((rc = new_process(P, s, HDX_UNKNOWN)) < 0)
                return rc;
            s->new_dump = 0;
        }
        if ((rc = new_thread(P, s, HDX_UNKNOWN, *ident ? ident : NULL)) < 0)
            return rc;
        thread_of(P, s)->stack_error = current; /* borrowed for "current thread" until the finish */
        return 0;
    }
    if (starts(line, "  File \"")) {
        /* '  File "/x.py", line 12 in leaf' */
        if (!thread_of(P, s))
            return 0; /* a Python traceback of another kind in a log: not ours */
        const char *file = line + 8, *endq = strstr(file, "\", line ");
        if (!endq)
            return 0;
        const char *q = endq + 8;
        int n = take_int(&q);
        if (n < 0 || !starts(q, " in "))
            return 0;
        hdx_frame *f = add_frame(P, s, 0, &rc);
        if (!f)
            return rc;
        f->kind = HDX_FRAME_PYTHON;
        f->line = n;
        f->file = dupn(file, (size_t)(endq - file));
        f->function = strdup(q + 4);
        return f->file && f->function ? 0 : -ENOMEM;
    }
    return 0;
}

/* ---- py-spy --json ------------------------------------------------------------ */

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jint(const cJSON *o, const char *key, long long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < -9e15 || v->valuedouble > 9e15)
        return 0;
    *out = (long long)v->valuedouble;
    return 1;
}

static int pyspy_json(parser *P, const char *text, size_t len)
{
    cJSON *root = cJSON_ParseWithLength(text, len);
    int rc = 0;
    if (!root)
        return fail(P, -EBADMSG, "not valid JSON (py-spy dump --json prints an array of threads)");
    if (!cJSON_IsArray(root)) {
        rc = fail(P, -EBADMSG, "not a JSON array of threads, as py-spy dump --json prints");
        goto out;
    }
    stream *s = stream_for(P, HDX_UNKNOWN, HDX_UNKNOWN, 0);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    int ti = 0;
    const cJSON *th;
    cJSON_ArrayForEach(th, root) {
        if (!cJSON_IsObject(th)) {
            rc = fail(P, -EBADMSG, "thread %d: not an object", ti);
            goto out;
        }
        const cJSON *frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
        if (!cJSON_IsArray(frames)) {
            rc = fail(P, -EBADMSG, "thread %d: no \"frames\" array", ti);
            goto out;
        }
        long long pid = HDX_UNKNOWN, tid = HDX_UNKNOWN, pyid = 0;
        if (!jint(th, "pid", &pid) || pid <= 0 || pid > 0x7fffffff)
            pid = HDX_UNKNOWN;
        if (!jint(th, "os_thread_id", &tid) || tid <= 0 || tid > 0x7fffffff)
            tid = HDX_UNKNOWN;
        (void)jint(th, "thread_id", &pyid);
        /* A process per pid (py-spy fills each thread's pid); threads of an unknown pid join the current one. */
        hdx_process *p = proc_of(P, s);
        if (!p || (pid != HDX_UNKNOWN && p->pid != (int)pid)) {
            p = NULL;
            for (size_t i = 0; i < P->one->n_procs; i++)
                if (P->one->procs[i].pid == (int)pid && pid != HDX_UNKNOWN) {
                    s->proc = (long)i;
                    p = &P->one->procs[i];
                }
            if (!p && (rc = new_process(P, s, (int)pid)) < 0)
                goto out;
        }
        const char *name = jstr(th, "thread_name");
        char hex[32];
        snprintf(hex, sizeof hex, "%#llx", (unsigned long long)pyid);
        if ((rc = new_thread(P, s, (int)tid, name ? name : hex)) < 0)
            goto out;
        const cJSON *active = cJSON_GetObjectItemCaseSensitive(th, "active");
        thread_of(P, s)->state = cJSON_IsBool(active) ? (cJSON_IsTrue(active) ? 'R' : 'S') : 0;
        int fi = 0;
        const cJSON *fr;
        cJSON_ArrayForEach(fr, frames) {
            const char *fname = jstr(fr, "name"), *file = jstr(fr, "filename"), *module = jstr(fr, "module");
            if (!cJSON_IsObject(fr) || !fname) {
                rc = fail(P, -EBADMSG, "thread %d, frame %d: not an object with a \"name\"", ti, fi);
                goto out;
            }
            long long line = 0;
            (void)jint(fr, "line", &line);
            hdx_frame *f = add_frame(P, s, 0, &rc);
            if (!f) {
                if (rc < 0)
                    goto out;
                break;
            }
            /* py-spy sets "module" on native frames (--native) only. */
            f->kind = module || (file && !python_file(file)) ? HDX_FRAME_NATIVE : HDX_FRAME_PYTHON;
            f->line = line > 0 && line < 0x7fffffff ? (int)line : 0;
            if (!(f->function = strdup(fname)) || (file && *file && !(f->file = strdup(file))) ||
                (module && !(f->module = strdup(module)))) {
                rc = -ENOMEM;
                goto out;
            }
            if (f->kind == HDX_FRAME_NATIVE && f->file && f->module && !strcmp(f->file, f->module) && !f->line) {
                free(f->file); /* no source: py-spy repeats the module as the file */
                f->file = NULL;
            }
            const cJSON *locals = cJSON_GetObjectItemCaseSensitive(fr, "locals"), *lv;
            if (cJSON_IsArray(locals)) {
                cJSON_ArrayForEach(lv, locals) {
                    const char *lname = jstr(lv, "name");
                    if (lname && (rc = add_local(f, lname, jstr(lv, "repr"))) < 0)
                        goto out;
                }
            }
            fi++;
        }
        ti++;
    }
    if (!ti)
        rc = fail(P, -EBADMSG, "an empty array: py-spy found no thread");
out:
    cJSON_Delete(root);
    return rc;
}

/* ---- finishing ----------------------------------------------------------------- */

/* gdb: the py-bt frames into the native stack at its eval-loop frames, as live capture merges. */
static int gdb_merge(hdx_thread *t)
{
    if (!t->n_py_frames)
        return 0;
    hdx_frame *py = t->py_frames;
    size_t n_py = t->n_py_frames, evals = 0;
    t->py_frames = NULL;
    t->n_py_frames = 0;
    for (size_t i = 0; i < t->n_frames; i++)
        evals += hdx_is_eval_frame(t->frames[i].function) != 0;
    unsigned char *entry = calloc(n_py, 1);
    if (!entry) {
        hdx_frames_free(py, n_py);
        return -ENOMEM;
    }
    /* py-bt does not say where one eval-loop activation ends: with as many
     * activations as frames (≤ 3.10) each frame is one; with one (3.11+ runs
     * nested Python calls in one activation) it holds them all. Otherwise the
     * stacks are kept apart, as live capture does when the counts differ. */
    if (evals == n_py)
        memset(entry, 1, n_py);
    else if (evals == 1)
        entry[n_py - 1] = 1;
    int rc = hdx_merge_stacks(t, py, n_py, entry);
    free(entry);
    return rc;
}

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
            if (P->fmt == HDX_FOREIGN_GDB && (rc = gdb_merge(t)) < 0)
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
        return fail(P, -EBADMSG, "no stack in this %s output", hdx_foreign_format_name(P->fmt));
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
                return fail(P, -EEXIST, "rank %d appears twice in this file", p->rank);
        for (size_t j = 0; p->rank >= 0 && j < ev->n_procs && !m->dropped; j++) {
            const hdx_process *q = &ev->procs[j];
            if (q->rank != p->rank)
                continue;
            if (!P->in_log)
                return fail(P, -EEXIST, "rank %d is also in an earlier input (pid %d%s%s); give each rank once",
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
                                "'thread apply all bt', eu-stack, faulthandler)",
                                name);
        return -EINVAL;
    }
    parser P = {name, format, hdx_evidence_new(), NULL, 0, NULL, 0, 0, err, 0, log_rank, in_log};
    char *buf = malloc(HDX_FOREIGN_MAX_LINE + 1);
    int rc = 0;
    if (!P.one || !buf) {
        rc = -ENOMEM;
        goto out;
    }
    if (format == HDX_FOREIGN_PYSPY_JSON) {
        rc = pyspy_json(&P, text, len);
    } else {
        lines it = {text, len, 0, 0, buf};
        const char *line;
        while (rc == 0 && (line = next_line(&it))) {
            P.lineno = it.lineno;
            int rank, local;
            size_t pre = line_prefix(line, &rank, &local);
            stream *s = stream_for(&P, rank, local, pre > 0);
            if (!s) {
                rc = P.n_st >= HDX_FOREIGN_MAX_PROCS ? fail(&P, -EBADMSG, "more than %d line prefixes",
                                                            HDX_FOREIGN_MAX_PROCS)
                                                     : -ENOMEM;
                break;
            }
            line += pre;
            switch (format) {
            case HDX_FOREIGN_PYSPY: rc = pyspy_line(&P, s, line); break;
            case HDX_FOREIGN_GDB: rc = gdb_line(&P, s, line); break;
            case HDX_FOREIGN_EUSTACK: rc = eustack_line(&P, s, line); break;
            case HDX_FOREIGN_FAULTHANDLER: rc = fh_line(&P, s, line); break;
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

enum hdx_foreign_format hdx_foreign_sniff_file(const char *path)
{
    size_t len = 0;
    int e = 0;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return HDX_FOREIGN_NONE;
    char *text = slurp(path, &len, &e);
    if (!text)
        return HDX_FOREIGN_NONE;
    enum hdx_foreign_format f = hdx_foreign_sniff(text, len);
    free(text);
    return f;
}
