/*
 * The state of a build lock, judged from the facts a host recorded of it
 * (docs/design.md "Build locks"). Pure: reads the evidence, no I/O.
 */
#include "classify/classify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Was pid alive when the facts were taken? A pid the facts do not name was not. */
static int fact_alive(const hdx_lock_facts *f, int pid)
{
    for (size_t i = 0; i < f->n_pids; i++)
        if (f->pids[i].pid == pid)
            return f->pids[i].alive == 1;
    return 0;
}

static int is_waiter(const hdx_lock *l, int pid)
{
    for (size_t i = 0; i < l->n_waiters; i++)
        if (l->waiters[i].pid == pid)
            return 1;
    return 0;
}

/* A live process that has the file open (by the facts f) and does not wait on it (the
 * creator first), or HDX_UNKNOWN. */
static int find_opener(const hdx_lock *l, const hdx_lock_facts *f)
{
    int holder = HDX_UNKNOWN;
    for (size_t i = 0; i < f->n_openers; i++) {
        int pid = f->openers[i];
        if (is_waiter(l, pid))
            continue;
        if (l->has_creator && pid == l->creator_pid)
            return pid;
        if (holder == HDX_UNKNOWN)
            holder = pid;
    }
    return holder;
}

/* l judged from one host's facts f (taken on host, NULL: the lock's own). */
static void judge_facts(const hdx_evidence *ev, const hdx_lock *l, const hdx_lock_facts *f, const char *host,
                        hdx_lock_judgement *out)
{
    memset(out, 0, sizeof *out);
    out->kind = l->kind;
    out->holder_pid = HDX_UNKNOWN;
    out->holder_host = host;
    out->creator_alive = l->creator_alive;
    if (l->has_creator && out->creator_alive == HDX_UNKNOWN) {
        const hdx_process *p = hdx_evidence_find_process(ev, l->creator_pid);
        if (p)
            out->creator_alive = p->alive;
    }
    if (!f->looked) { /* an older snapshot or report decided it: its decision stands */
        out->state = l->state;
        out->holder_pid = l->holder_pid;
        out->unchecked = l->unchecked;
        /* a file gone when it was judged stale: only a trace's proof decides that (a saved report) */
        out->deleted = l->state == HDX_LOCK_STALE && l->exists == 0;
        return;
    }
    out->from_facts = 1;

    if (l->exists == 1) {
        int kernel_line = 0;
        for (size_t i = 0; i < f->n_rows; i++) {
            const hdx_lock_row *row = &f->rows[i];
            if (row->blocking)
                continue;
            kernel_line = 1;
            if (out->kind == HDX_LOCK_BATON && !l->has_creator)
                out->kind = row->kind; /* found by name; the kernel says what it is */
            if (row->pid > 0 && fact_alive(f, row->pid) && out->holder_pid == HDX_UNKNOWN)
                out->holder_pid = row->pid;
        }
        if (out->holder_pid == HDX_UNKNOWN && (out->kind == HDX_LOCK_BATON || kernel_line) && f->openers_read) {
            out->holder_pid = find_opener(l, f);
            /* a holder may hide among the processes that could not be read */
            out->unchecked = out->holder_pid == HDX_UNKNOWN ? f->unreadable : 0;
        }
    }

    if (out->holder_pid != HDX_UNKNOWN) {
        out->state = HDX_LOCK_HELD;
    } else if (l->exists == 0) {
        /* No file now. After the job, its trace still proves a baton stale: the creator took
         * it, never released it and is gone, and waiters polled it until their trace ended.
         * Deleted since (the remedy was run): the trace keeps what it proved. Without all
         * of these (nobody waited, a creator alive or unknown, a live look) it is free. */
        if (!f->live && out->kind == HDX_LOCK_BATON && l->has_creator && out->creator_alive == 0 &&
            l->n_waiters > 0) {
            out->state = HDX_LOCK_STALE;
            out->deleted = 1;
        } else {
            out->state = HDX_LOCK_FREE;
        }
    } else if (out->kind != HDX_LOCK_BATON) {
        /* A kernel lock nobody holds now. After the job is gone, the trace still tells
         * who held it while the others waited. */
        if (!f->live && l->has_creator && l->n_waiters > 0) {
            out->state = HDX_LOCK_HELD;
            out->holder_pid = l->creator_pid;
            out->holder_from_trace = 1;
        } else {
            out->state = HDX_LOCK_FREE;
        }
    } else if (l->has_creator && out->creator_alive == 1) {
        /* The creator lives on: it may still release the baton. Never call that stale. */
        out->state = HDX_LOCK_HELD;
        out->holder_pid = l->creator_pid;
    } else {
        out->state = HDX_LOCK_STALE;
        out->creator_unknown = !l->has_creator;
    }
}


/* How much a judgement says: held, then stale, then free. */
static int strength(enum hdx_lock_state s)
{
    return s == HDX_LOCK_HELD ? 2 : s == HDX_LOCK_STALE ? 1 : 0;
}

int hdx_lock_judge(const hdx_evidence *ev, const hdx_lock *l, hdx_lock_judgement *out)
{
    if (!ev || !l || !out)
        return -EINVAL;
    /* A file that several hosts saw (a shared build directory): the host that saw it held
     * wins, then stale, then free; at equal state, the one that names a holder. */
    judge_facts(ev, l, &l->facts, l->holder_host, out);
    for (size_t i = 0; i < l->n_seen; i++) {
        hdx_lock_judgement other;
        judge_facts(ev, l, &l->seen[i].facts, l->seen[i].host, &other);
        if (strength(other.state) > strength(out->state) ||
            (other.state == out->state && out->holder_pid == HDX_UNKNOWN && other.holder_pid != HDX_UNKNOWN))
            *out = other;
    }
    return 0;
}

int hdx_lock_judge_all(const hdx_evidence *ev, hdx_lock_judgement **out)
{
    if (!ev || !out)
        return -EINVAL;
    *out = NULL;
    if (!ev->n_locks)
        return 0;
    hdx_lock_judgement *js = calloc(ev->n_locks, sizeof *js);
    if (!js)
        return -ENOMEM;
    for (size_t i = 0; i < ev->n_locks; i++)
        hdx_lock_judge(ev, &ev->locks[i], &js[i]);
    *out = js;
    return 0;
}
