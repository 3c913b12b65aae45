/*
 * The verdict's building blocks that every rule file shares (classify_impl.h): class
 * names, clearing a verdict, naming a process or a thread's place for a person, adding
 * culprits and notes. Pure.
 */
#include "classify/classify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "classify/waitsfor.h"
#include "model/util.h"

const char *hdx_class_name(enum hdx_class c)
{
    static const char *const names[] = {
        "build_lock",      "compile_stall", "collective_wait", "p2p_mismatch",
        "rendezvous_wait", "config_error",  "not_hung",        "unknown",
    };
    return (unsigned)c <= HDX_CLASS_UNKNOWN ? names[c] : "unknown";
}


/* How many generations p is below ancestor (1 for a child), or 0 when it is not.
 * Pids repeat across hosts: the parent is looked up on p's host. */
int hdx_cls_descendant_depth(const hdx_evidence *ev, const hdx_process *p, const hdx_process *ancestor)
{
    for (int depth = 1; p && depth <= 64; depth++) {
        if (p->ppid == ancestor->pid && (!p->host || !ancestor->host || !strcmp(p->host, ancestor->host)))
            return depth;
        p = hdx_evidence_find_process_on(ev, p->host, p->ppid);
    }
    return 0;
}

/* "rank 1 (pid 123)", "rank 1" (pid unknown: a dump without pids) or "pid 123";
 * in a multi-host job the pid with its host: "rank 1 (pid 123 on node3)". */
void hdx_cls_who(const hdx_evidence *ev, const hdx_process *p, int pid, int rank, char *buf, size_t size)
{
    const char *host = NULL;
    if (p) {
        pid = p->pid;
        rank = p->rank;
        host = p->host && hdx_evidence_multi_host(ev) ? p->host : NULL;
    }
    if (rank >= 0 && pid > 0)
        snprintf(buf, size, "rank %d (pid %d%s%s)", rank, pid, host ? " on " : "", host ? host : "");
    else if (rank >= 0)
        snprintf(buf, size, "rank %d", rank);
    else
        snprintf(buf, size, "pid %d%s%s", pid, host ? " on " : "", host ? host : "");
}


int hdx_cls_add_int(int **arr, size_t *n, int v)
{
    for (size_t i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return 0;
    int *slot = hdx_append((void **)arr, n, sizeof *slot);
    if (!slot)
        return -ENOMEM;
    *slot = v;
    return 0;
}

int hdx_cls_add_pid(hdx_verdict *v, int pid)
{
    return pid > 0 ? hdx_cls_add_int(&v->culprit_pids, &v->n_culprit_pids, pid) : 0;
}

int hdx_cls_note(hdx_verdict *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = hdx_notes_vadd(&v->notes, &v->n_notes, fmt, ap);
    va_end(ap);
    return r;
}

int hdx_cls_set_text(char **dst, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        return -ENOMEM;
    free(*dst);
    *dst = s;
    return 0;
}

void hdx_cls_where(const hdx_thread *t, char *buf, size_t size)
{
    for (size_t i = 0; t && i < t->n_frames; i++) {
        const hdx_frame *f = &t->frames[i];
        if (f->kind != HDX_FRAME_PYTHON || !f->function)
            continue;
        const char *base = f->file ? strrchr(f->file, '/') : NULL;
        snprintf(buf, size, "%s (%s:%d)", f->function, base ? base + 1 : (f->file ? f->file : "?"), f->line);
        return;
    }
    snprintf(buf, size, "%s", t && t->wait ? t->wait : "an unknown place");
}

void hdx_verdict_clear(hdx_verdict *v)
{
    if (!v)
        return;
    free(v->summary);
    free(v->remedy);
    free(v->culprit_ranks);
    free(v->culprit_pids);
    free(v->missing_ranks);
    free(v->group);
    free(v->locks);
    hdx_waitsfor_free(v->graph);
    free(v->graph);
    for (size_t i = 0; i < v->n_notes; i++)
        free(v->notes[i]);
    free(v->notes);
    memset(v, 0, sizeof *v);
}
