/*
 * py-spy `dump` text (foreign.h): one line at a time, with --locals and --native, several
 * processes (--subprocesses) in one file. Source: py-spy's src/dump.rs.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign/internal.h"
#include "model/util.h"

int hdx_foreign_pyspy_line(parser *P, stream *s, const char *line)
{
    int rc;
    const char *p;
    if (starts(line, "Process ")) {
        p = line + 8;
        int pid = take_int(&p);
        if (pid >= 0 && *p == ':') {
            if ((rc = hdx_foreign_new_process(P, s, pid)) < 0)
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
            return hdx_foreign_fail(P, -EBADMSG, "\"Python v...\" before any \"Process PID:\" line");
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
            return hdx_foreign_fail(P, -EBADMSG, "a thread before any \"Process PID:\" line");
        p = line + 7;
        size_t idl = strcspn(p, " ");
        char id[64];
        snprintf(id, sizeof id, "%.*s", (int)(idl < 63 ? idl : 63), p);
        const char *st = p + idl;
        if (!starts(st, " ("))
            return hdx_foreign_fail(P, -EBADMSG, "a thread line without its status: \"%.80s\"", line);
        const char *close = strchr(st, ')');
        if (!close)
            return hdx_foreign_fail(P, -EBADMSG, "a thread line without its status: \"%.80s\"", line);
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
        rc = hdx_foreign_new_thread(P, s, tid, name ? name : id);
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
            return hdx_foreign_fail(P, -EBADMSG, "a local without \"name: value\": \"%.80s\"", line);
        char *name = dupn(v, (size_t)(colon - v));
        if (!name)
            return -ENOMEM;
        rc = hdx_foreign_add_local(&t->frames[t->n_frames - 1], name, colon + 2);
        free(name);
        return rc;
    }
    if (!strcmp(line, "        Arguments:") || !strcmp(line, "        Arguments::") || !strcmp(line, "        Locals:") ||
        !strcmp(line, "        Locals::")) {
        if (!s->in_frame)
            return hdx_foreign_fail(P, -EBADMSG, "locals before any frame");
        return 0;
    }
    if (starts(line, "    ") && line[4] != ' ') { /* a frame: "name (file:line)" or "name (file)" */
        hdx_thread *t = thread_of(P, s);
        const char *v = line + 4;
        const char *open = NULL;
        for (const char *q = v; (q = strstr(q, " (")); q++)
            open = q;
        if ((!t || !open || !ends(v, ")")) && P->in_log) {
            /* in a job log, the dump ends where its lines do: an indented line of the log */
            s->thread = -1;
            s->in_frame = 0;
            return 0;
        }
        if (!t)
            return hdx_foreign_fail(P, -EBADMSG, "a frame line outside any thread: \"%.80s\"", line);
        if (!open || !ends(v, ")"))
            return hdx_foreign_fail(P, -EBADMSG, "a frame line that is not \"function (file:line)\": \"%.80s\"", line);
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
        hdx_frame *f = hdx_foreign_add_frame(P, s, 0, &rc);
        if (!f) {
            free(inside);
            return rc;
        }
        f->function = dupn(v, (size_t)(open - v));
        f->line = lineno;
        if (hdx_foreign_python_file(inside)) {
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
