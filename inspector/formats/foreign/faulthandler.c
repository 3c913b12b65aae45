/*
 * Python faulthandler tracebacks (foreign.h): CPython's Python/traceback.c (dump_traceback),
 * several dumps and processes in one job log; a later dump of one stream replaces the earlier.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign/internal.h"
#include "model/util.h"

int hdx_foreign_faulthandler_line(parser *P, stream *s, const char *line)
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
            if ((rc = hdx_foreign_new_process(P, s, HDX_UNKNOWN)) < 0)
                return rc;
            s->new_dump = 0;
        }
        if ((rc = hdx_foreign_new_thread(P, s, HDX_UNKNOWN, *ident ? ident : NULL)) < 0)
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
        hdx_frame *f = hdx_foreign_add_frame(P, s, 0, &rc);
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
