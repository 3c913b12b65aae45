/* eu-stack `-p PID` text (foreign.h), as elfutils 0.188 prints it, with or without -m and -s. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign/internal.h"
#include "model/util.h"

int hdx_foreign_eustack_line(parser *P, stream *s, const char *line)
{
    int rc;
    const char *p;
    if (starts(line, "PID ")) {
        p = line + 4;
        int pid = take_int(&p);
        if (pid >= 0 && starts(p, " - "))
            return hdx_foreign_new_process(P, s, pid);
    }
    if (starts(line, "TID ")) {
        p = line + 4;
        int tid = take_int(&p);
        if (tid >= 0 && *p == ':') {
            if ((rc = hdx_foreign_new_thread(P, s, tid, NULL)) < 0)
                return rc;
            if (proc_of(P, s)->pid == HDX_UNKNOWN)
                proc_of(P, s)->pid = tid;
            return 0;
        }
    }
    if (line[0] == '#' && isdigit((unsigned char)line[1])) {
        if (!thread_of(P, s))
            return hdx_foreign_fail(P, -EBADMSG, "a frame line before any \"TID N:\" line");
        p = line + 1;
        (void)take_int(&p);
        while (*p == ' ')
            p++;
        if (!is_hex_token(p))
            return hdx_foreign_fail(P, -EBADMSG, "an eu-stack frame without its address: \"%.80s\"", line);
        hdx_frame *f = hdx_foreign_add_frame(P, s, 0, &rc);
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
