/*
 * The parser's state that every format's line parser builds on (internal.h): streams per
 * launcher prefix, processes, threads, frames and locals, and the one error of a parse.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign/internal.h"
#include "model/util.h"

int hdx_foreign_fail(parser *P, int code, const char *fmt, ...)
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

stream *hdx_foreign_stream_for(parser *P, int rank, int local, int has_prefix)
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

int hdx_foreign_new_process(parser *P, stream *s, int pid)
{
    if (P->one->n_procs >= HDX_FOREIGN_MAX_PROCS)
        return hdx_foreign_fail(P, -EBADMSG, "more than %d processes", HDX_FOREIGN_MAX_PROCS);
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

int hdx_foreign_new_thread(parser *P, stream *s, int tid, const char *name)
{
    hdx_process *p = proc_of(P, s);
    int r;
    if (!p && (r = hdx_foreign_new_process(P, s, HDX_UNKNOWN)) < 0)
        return r;
    p = proc_of(P, s);
    if (p->n_threads >= HDX_FOREIGN_MAX_THREADS)
        return hdx_foreign_fail(P, -EBADMSG, "more than %d threads in one process", HDX_FOREIGN_MAX_THREADS);
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
hdx_frame *hdx_foreign_add_frame(parser *P, stream *s, int python_side, int *rc)
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

/* ---- py-spy locals and files (text and --json) ------------------------------- */

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

int hdx_foreign_add_local(hdx_frame *f, const char *name, const char *repr)
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

/* A file is Python's when py-spy shows a .py (or Cython .pyx) file, or <frozen ...>, <string>. */
int hdx_foreign_python_file(const char *file)
{
    return ends(file, ".py") || ends(file, ".pyx") || ends(file, ".pyw") || file[0] == '<';
}
