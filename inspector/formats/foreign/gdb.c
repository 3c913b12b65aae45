/*
 * gdb `thread apply all bt`, with or without `thread apply all py-bt` (foreign.h), as gdb 13
 * on Debian 12 prints them and CPython's Tools/gdb/libpython.py (py-bt); and the merge of the
 * py-bt frames into the native stack at the end.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign/internal.h"
#include "model/util.h"
#include "python/merge.h"

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

int hdx_foreign_gdb_line(parser *P, stream *s, const char *line)
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
                return hdx_foreign_fail(P, -EBADMSG, "a gdb thread line without its LWP: \"%.80s\"", line);
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
            rc = hdx_foreign_new_thread(P, s, tid, name);
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
        if (!thread_of(P, s) && (rc = hdx_foreign_new_thread(P, s, HDX_UNKNOWN, NULL)) < 0) /* py-bt alone */
            return rc;
        s->py = 1;
        return 0;
    }
    if (line[0] == '#' && isdigit((unsigned char)line[1])) {
        if (!thread_of(P, s)) { /* a plain "bt" of one thread, without a header */
            if ((rc = hdx_foreign_new_thread(P, s, HDX_UNKNOWN, NULL)) < 0)
                return rc;
        }
        hdx_frame *f = hdx_foreign_add_frame(P, s, 0, &rc);
        return f ? gdb_frame(f, line) : rc;
    }
    if (s->py && starts(line, "  File \"")) {
        /* py-bt: '  File "/x.py", line 12, in leaf' */
        const char *file = line + 8, *endq = strstr(file, "\", line ");
        if (!endq)
            return hdx_foreign_fail(P, -EBADMSG, "a py-bt line that is not 'File \"...\", line N, in f': \"%.80s\"",
                                    line);
        const char *q = endq + 8;
        int n = take_int(&q);
        if (n < 0 || !starts(q, ", in "))
            return hdx_foreign_fail(P, -EBADMSG, "a py-bt line that is not 'File \"...\", line N, in f': \"%.80s\"",
                                    line);
        hdx_frame *f = hdx_foreign_add_frame(P, s, 1, &rc);
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

/* gdb: the py-bt frames into the native stack at its eval-loop frames, as live capture merges. */
int hdx_foreign_gdb_merge(hdx_thread *t)
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
