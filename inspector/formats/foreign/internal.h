/*
 * Inside the reader of other tools' stack dumps (foreign.h); not for use outside
 * inspector/formats/foreign/. foreign.c sniffs the format, cuts the text into lines and gives
 * each line, its launcher prefix stripped, to its format's line parser along with the stream
 * of that prefix; the parsers build processes, threads and frames in the parser's own evidence
 * (parser.one) through the functions below, and foreign.c's finishing pass moves them into the
 * caller's evidence. py-spy --json is read whole (hdx_foreign_pyspy_json).
 *
 * Every function returning int returns 0 or a negative errno-style code (-ENOMEM, or -EBADMSG
 * made by hdx_foreign_fail, which also leaves the message for the caller of foreign.h).
 */
#ifndef HDX_FOREIGN_INTERNAL_H
#define HDX_FOREIGN_INTERNAL_H

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign.h"
#include "model/evidence.h"

/* ---- the parser's state ---------------------------------------------------- */

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

/* The stream's current process and thread (borrowed, in P->one), NULL when none. */
static inline hdx_process *proc_of(parser *P, stream *s)
{
    return s->proc >= 0 ? &P->one->procs[s->proc] : NULL;
}

static inline hdx_thread *thread_of(parser *P, stream *s)
{
    hdx_process *p = proc_of(P, s);
    return p && s->thread >= 0 ? &p->threads[s->thread] : NULL;
}

/* Returns code; the first call also leaves "name:line: what" (or "name: what" after the
 * lines) in *P->err, a heap string for the caller of foreign.h to free. */
int hdx_foreign_fail(parser *P, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The stream of one launcher prefix, made on first use (borrowed from P, valid until the next
 * call). NULL when there are HDX_FOREIGN_MAX_PROCS streams already, or on ENOMEM. */
stream *hdx_foreign_stream_for(parser *P, int rank, int local, int has_prefix);

/* A new process (pid may be HDX_UNKNOWN) becomes s's current one, with no current thread. */
int hdx_foreign_new_process(parser *P, stream *s, int pid);

/* A new thread of s's current process (made when s has none) becomes s's current one; name is
 * copied (NULL: none). -EBADMSG beyond HDX_FOREIGN_MAX_THREADS. */
int hdx_foreign_new_thread(parser *P, stream *s, int tid, const char *name);

/* A zeroed frame appended to s's current thread (Python frames of a gdb py-bt, python_side,
 * go to py_frames until the merge), borrowed. NULL with *rc set: -ENOMEM, or 0 when there is
 * no current thread or it is full (the frame is dropped and the cut counted). */
hdx_frame *hdx_foreign_add_frame(parser *P, stream *s, int python_side, int *rc);

/* A local "name" of py-spy's repr (NULL: unknown) appended to f; past HDX_FOREIGN_MAX_LOCALS
 * it is dropped (0). Copies both. */
int hdx_foreign_add_local(hdx_frame *f, const char *name, const char *repr);

/* 1 when py-spy shows a Python file (.py, .pyx, .pyw, "<frozen ...>", "<string>"), else 0. */
int hdx_foreign_python_file(const char *file);

/* ---- the parsers: one line each (prefix stripped), NUL-terminated ------------ */

int hdx_foreign_pyspy_line(parser *P, stream *s, const char *line);        /* pyspy.c */
int hdx_foreign_gdb_line(parser *P, stream *s, const char *line);          /* gdb.c */
int hdx_foreign_eustack_line(parser *P, stream *s, const char *line);      /* eustack.c */
int hdx_foreign_faulthandler_line(parser *P, stream *s, const char *line); /* faulthandler.c */

/* py-spy --json: the whole text (len bytes), into P->one (pyspy_json.c). */
int hdx_foreign_pyspy_json(parser *P, const char *text, size_t len);

/* Flight Recorder (flight_recorder.c; its sniffer, hdx_foreign_flight_recorder_sniff, is in
 * foreign.h): read the dump into ev, one rank's process and the groups of its pg_config
 * (hdx_foreign_load_text's errors, with *err). */
int hdx_foreign_flight_recorder(const char *text, size_t len, const char *name, hdx_evidence *ev, char **err);

/* gdb, at the finish: t's py-bt frames merged into its native stack at the eval-loop frames,
 * as live capture merges (gdb.c). */
int hdx_foreign_gdb_merge(hdx_thread *t);

/* ---- small string helpers ---------------------------------------------------- */

static inline int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline int ends(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* A non-negative decimal int at *s, advancing *s; -1 when none or too large. */
static inline int take_int(const char **s)
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

/* A heap copy of s's first n bytes, NUL-terminated; NULL on ENOMEM. */
static inline char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static inline void rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
}

/* "0x" and a hex digit at s. */
static inline int is_hex_token(const char *s)
{
    if (s[0] != '0' || s[1] != 'x' || !isxdigit((unsigned char)s[2]))
        return 0;
    return 1;
}

#endif
