/*
 * The merge of several inputs' evidence into one (evidence_merge.h): checked first, then
 * moved without copying, with dst's index kept current.
 */
#include "model/evidence_merge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/pool.h"
#include "model/util.h"

/* Make room for more elements of an hdx_append array (its capacity is implied by n). */
static int reserve(void **arr, size_t n, size_t more, size_t elsize)
{
    size_t want = n + more, cap = 4;
    if (!more)
        return 0;
    while (cap < want)
        cap *= 2;
    void *p = realloc(*arr, cap * elsize);
    if (!p)
        return -ENOMEM;
    *arr = p;
    return 0;
}

static int lock_strength(enum hdx_lock_state s)
{
    return s == HDX_LOCK_HELD ? 2 : s == HDX_LOCK_STALE ? 1 : 0;
}

/* The process of dst that src's p is (same pid, same host), or NULL. */
static hdx_process *same_process(const hdx_evidence *dst, const hdx_process *p)
{
    return p->pid == HDX_UNKNOWN ? NULL : hdx_evidence_find_process_on(dst, p->host, p->pid);
}

/* A process of procs[0..n) that has p's rank on another host, or NULL. */
static const hdx_process *rank_elsewhere(const hdx_process *procs, size_t n, const hdx_process *p)
{
    for (size_t i = 0; p->rank >= 0 && p->is_rank_process && i < n; i++)
        if (&procs[i] != p && procs[i].rank == p->rank && procs[i].is_rank_process && procs[i].host && p->host &&
            strcmp(procs[i].host, p->host))
            return &procs[i];
    return NULL;
}

int hdx_evidence_merge(hdx_evidence *dst, hdx_evidence *src, char **err)
{
    if (err)
        *err = NULL;
    if (!dst || !src)
        return -EINVAL;
    /* Lookups in dst by (host, pid) and rank through its index (one pass per merge, not
     * one per process: 1024 hosts' merges were 67 M compares). Without memory for it,
     * the lookups scan. */
    if (!hdx_evidence_indexed(dst))
        hdx_evidence_index(dst);
    /* Check everything first: an error leaves both as they were. A rank twice is an error
     * between ranks' own processes only: srun's torchrun on node k has SLURM_PROCID = k. */
    hdx_mark_rank_processes(src);
    for (size_t i = 0; i < src->n_procs; i++) {
        const hdx_process *p = &src->procs[i], *q;
        if (p->is_rank_process &&
            ((q = hdx_evidence_find_rank_elsewhere(dst, p->rank, p->host)) || (q = rank_elsewhere(src->procs, i, p)))) {
            if (err)
                *err = hdx_asprintf("rank %d is on two hosts: pid %d on %s and pid %d on %s — the inputs come from "
                                    "different jobs, or a rank variable is set wrongly",
                                    p->rank, q->pid, q->host, p->pid, p->host);
            return -EEXIST;
        }
        const hdx_process *d = same_process(dst, p);
        if (d && d->n_threads && p->n_threads) {
            if (err)
                *err = hdx_asprintf("process %d of host %s is in two inputs — give each host's snapshot once",
                                    p->pid, p->host ? p->host : "?");
            return -EEXIST;
        }
    }
    size_t new_groups = 0;
    for (size_t i = 0; i < src->n_pgroups; i++) {
        const hdx_pgroup *s = &src->pgroups[i], *d = hdx_evidence_find_pgroup(dst, s->name);
        if (!d) {
            new_groups++;
        } else if (d->n_ranks != s->n_ranks || memcmp(d->ranks, s->ranks, s->n_ranks * sizeof *s->ranks)) {
            if (err)
                *err = hdx_asprintf("process group %s has other ranks in another input — the inputs come from "
                                    "different jobs", s->name);
            return -EEXIST;
        }
    }
    if (src->pool && !dst->pool && !(dst->pool = hdx_pool_new()))
        return -ENOMEM;
    int indexed = hdx_evidence_indexed(dst);
    size_t n_before = dst->n_procs;
    if (reserve((void **)&dst->procs, dst->n_procs, src->n_procs, sizeof *dst->procs) ||
        reserve((void **)&dst->locks, dst->n_locks, src->n_locks, sizeof *dst->locks) ||
        reserve((void **)&dst->notes, dst->n_notes, src->n_notes, sizeof *dst->notes) ||
        reserve((void **)&dst->pgroups, dst->n_pgroups, new_groups, sizeof *dst->pgroups) ||
        reserve((void **)&dst->log_facts, dst->n_log_facts, src->n_log_facts, sizeof *dst->log_facts) ||
        reserve((void **)&dst->log_ranks, dst->n_log_ranks, src->n_log_ranks, sizeof *dst->log_ranks))
        return -ENOMEM;
    for (size_t i = 0; i < src->n_locks; i++) {
        hdx_lock *d = src->locks[i].path ? hdx_evidence_find_lock(dst, src->locks[i].path) : NULL;
        if (d && reserve((void **)&d->waiters, d->n_waiters, src->locks[i].n_waiters, sizeof *d->waiters))
            return -ENOMEM;
    }
    /* From here on nothing allocates (but the index, which may fail: lookups then scan). */
    hdx_pool_absorb(dst->pool, src->pool); /* src's frames borrow from it */
    if (indexed) /* the same processes, perhaps at a new address */
        indexed = hdx_evidence_index_more(dst, n_before) == 0;

    int empty = !dst->n_procs && !dst->n_locks && !dst->samples && !dst->host;
    if (empty) {
        dst->host = src->host;
        src->host = NULL;
        dst->taken_ns = src->taken_ns;
        dst->samples = src->samples;
        dst->interval_ms = src->interval_ms;
        dst->build_timeout_s = src->build_timeout_s;
    } else {
        if (!dst->host || !src->host || strcmp(dst->host, src->host) != 0) {
            free(dst->host);
            dst->host = NULL;
        }
        if (src->taken_ns != HDX_UNKNOWN && (dst->taken_ns == HDX_UNKNOWN || src->taken_ns < dst->taken_ns))
            dst->taken_ns = src->taken_ns;
        if (src->samples > 0) {
            if (!dst->samples) {
                dst->samples = src->samples;
                dst->interval_ms = src->interval_ms;
                dst->build_timeout_s = src->build_timeout_s;
            } else {
                dst->samples = src->samples < dst->samples ? src->samples : dst->samples;
                dst->interval_ms = src->interval_ms < dst->interval_ms ? src->interval_ms : dst->interval_ms;
                dst->build_timeout_s =
                    src->build_timeout_s < dst->build_timeout_s ? src->build_timeout_s : dst->build_timeout_s;
            }
        }
    }

    /* A report's job logs (src's ranks are each once: only dst's own are looked through). */
    if (src->n_log_facts) /* both arrays may be NULL */
        memcpy(dst->log_facts + dst->n_log_facts, src->log_facts, src->n_log_facts * sizeof *dst->log_facts);
    dst->n_log_facts += src->n_log_facts;
    src->n_log_facts = 0;
    for (size_t i = 0, had = dst->n_log_ranks; i < src->n_log_ranks; i++) {
        if (had && hdx_evidence_log_rank(dst, src->log_ranks[i].rank))
            continue; /* hdx_evidence_free(src) clears it */
        dst->log_ranks[dst->n_log_ranks++] = src->log_ranks[i];
        memset(&src->log_ranks[i], 0, sizeof src->log_ranks[i]);
    }

    for (size_t i = 0; i < src->n_procs; i++) {
        hdx_process *p = &src->procs[i];
        /* dst->procs may have moved (reserve): the index is current when it was before. */
        hdx_process *d = same_process(dst, p);
        if (d && !p->n_threads) {
            hdx_process_clear(p); /* a trace's thin copy of a process already here */
            continue;
        }
        if (d) {
            hdx_process_clear(d); /* the snapshot's process replaces the trace's */
            *d = *p;
            indexed = 0; /* its host or rank may be new */
        } else {
            dst->procs[dst->n_procs++] = *p;
        }
        memset(p, 0, sizeof *p);
        if (indexed)
            indexed = hdx_evidence_index_more(dst, dst->n_procs - 1) == 0;
    }
    src->n_procs = 0;
    if (!indexed)
        hdx_evidence_index(dst);

    for (size_t i = 0; i < src->n_locks; i++) {
        hdx_lock *s = &src->locks[i];
        hdx_lock *d = s->path ? hdx_evidence_find_lock(dst, s->path) : NULL;
        if (!d) {
            dst->locks[dst->n_locks++] = *s;
            memset(s, 0, sizeof *s);
            continue;
        }
        /* One lock file seen from several hosts (a shared build directory). */
        for (size_t k = 0; k < s->n_waiters; k++) {
            hdx_waiter *w = &s->waiters[k];
            int dup = 0;
            for (size_t j = 0; !dup && j < d->n_waiters; j++)
                dup = d->waiters[j].pid == w->pid && d->waiters[j].tid == w->tid && d->waiters[j].rank == w->rank;
            if (dup) {
                free(w->how);
                free(w->host);
            } else {
                d->waiters[d->n_waiters++] = *w;
            }
            w->how = NULL;
            w->host = NULL;
        }
        s->n_waiters = 0;
        /* Facts are judged later (classify's hdx_lock_judge), each host's on their own: src's
         * join the lock's, whole. An older input without facts brings its recorded decision:
         * the host that saw it held wins, then stale, then free. */
        if (s->facts.looked && !d->facts.looked && !d->n_seen) {
            d->facts = s->facts;
            d->recorded = 0;
            free(d->holder_host);
            d->holder_host = s->holder_host;
            s->holder_host = NULL;
        } else if (s->facts.looked) {
            hdx_lock_seen *seen = hdx_append((void **)&d->seen, &d->n_seen, sizeof *seen);
            if (!seen)
                return -ENOMEM;
            seen->facts = s->facts;
            seen->host = s->holder_host;
            s->holder_host = NULL;
        } else if (!d->facts.looked && (lock_strength(s->state) > lock_strength(d->state) ||
                                        (s->state == d->state && d->holder_pid == HDX_UNKNOWN))) {
            d->state = s->state;
            d->holder_pid = s->holder_pid;
            d->unchecked = s->unchecked;
            free(d->holder_host);
            d->holder_host = s->holder_host;
            s->holder_host = NULL;
        }
        memset(&s->facts, 0, sizeof s->facts);
        for (size_t k = 0; k < s->n_seen; k++) { /* src was a merge of several hosts itself */
            hdx_lock_seen *seen = hdx_append((void **)&d->seen, &d->n_seen, sizeof *seen);
            if (!seen)
                return -ENOMEM;
            *seen = s->seen[k];
        }
        free(s->seen);
        s->seen = NULL;
        s->n_seen = 0;
        if (s->exists == 1 || (s->exists == 0 && d->exists == HDX_UNKNOWN))
            d->exists = s->exists;
        if (s->mtime_ns != HDX_UNKNOWN && (d->mtime_ns == HDX_UNKNOWN || s->mtime_ns > d->mtime_ns))
            d->mtime_ns = s->mtime_ns;
        if (!d->has_creator && s->has_creator) {
            d->has_creator = 1;
            d->creator_pid = s->creator_pid;
            d->creator_rank = s->creator_rank;
            d->creator_alive = s->creator_alive;
            d->created_ns = s->created_ns;
        }
        if (!d->source) {
            d->source = s->source;
            s->source = NULL;
        }
        hdx_lock_clear(s);
    }
    src->n_locks = 0;

    for (size_t i = 0; i < src->n_pgroups; i++) { /* each host holds its ranks' groups */
        hdx_pgroup *s = &src->pgroups[i], *d = (hdx_pgroup *)hdx_evidence_find_pgroup(dst, s->name);
        if (!d) {
            dst->pgroups[dst->n_pgroups++] = *s;
            memset(s, 0, sizeof *s);
            continue;
        }
        d->is_default |= s->is_default;
        if (!d->role && !d->is_default) {
            d->role = s->role;
            s->role = NULL;
        }
        if (!d->desc) {
            d->desc = s->desc;
            s->desc = NULL;
        }
        hdx_pgroup_clear(s);
    }
    src->n_pgroups = 0;
    hdx_evidence_index_pgroups(dst);

    for (size_t i = 0; i < src->n_notes; i++) {
        int dup = 0;
        for (size_t j = 0; !dup && j < dst->n_notes; j++)
            dup = !strcmp(dst->notes[j], src->notes[i]);
        if (dup)
            free(src->notes[i]);
        else
            dst->notes[dst->n_notes++] = src->notes[i];
        src->notes[i] = NULL;
    }
    src->n_notes = 0;
    return 0;
}
