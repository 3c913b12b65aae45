/*
 * The distributed rules: rendezvous_wait, p2p_mismatch and collective_wait,
 * over the rank processes' key threads (groups.h) and their waits (waits.h).
 * culprit_ranks follow design.md: the missing ranks; the ranks on a
 * waits-for cycle or the peer that never answers; the ranks absent from the
 * collective or in another one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_impl.h"
#include "groups.h"
#include "util.h"
#include "waits.h"

typedef struct rank_view {
    const hdx_process *p;
    const hdx_thread *t; /* key thread, may be NULL */
    const char *wait;    /* its wait label, or NULL */
} rank_view;

typedef struct job {
    const hdx_evidence *ev;
    rank_view *r;
    size_t n;
    int world_size;   /* the largest WORLD_SIZE seen, HDX_UNKNOWN */
    size_t *by_rank;  /* indices into r, sorted by rank (ranks are unique in r) */
} job;

static int waits_in(const rank_view *r, const char *wait)
{
    return r->wait && !strcmp(r->wait, wait);
}

/* Binary search of by_rank: 8192 ranks make a linear search per rank quadratic. */
static const rank_view *find_rank(const job *j, int rank)
{
    size_t lo = 0, hi = j->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int have = j->r[j->by_rank[mid]].p->rank;
        if (have == rank)
            return &j->r[j->by_rank[mid]];
        if (have < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const rank_view *sort_base;

/* By rank, then by position: the first process of a rank sorts first. */
static int cmp_by_rank(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int rx = sort_base[x].p->rank, ry = sort_base[y].p->rank;
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return (x > y) - (x < y);
}

/* Keep the first process of each rank, in evidence order, and index them by rank. */
static int index_ranks(job *j)
{
    size_t *idx = malloc((j->n ? j->n : 1) * sizeof *idx);
    char *dup = calloc(j->n ? j->n : 1, 1);
    if (!idx || !dup) {
        free(idx);
        free(dup);
        return -ENOMEM;
    }
    for (size_t i = 0; i < j->n; i++)
        idx[i] = i;
    sort_base = j->r;
    qsort(idx, j->n, sizeof *idx, cmp_by_rank);
    for (size_t i = 1; i < j->n; i++)
        dup[idx[i]] = j->r[idx[i]].p->rank == j->r[idx[i - 1]].p->rank;
    size_t n = 0;
    for (size_t i = 0; i < j->n; i++)
        if (!dup[i])
            j->r[n++] = j->r[i];
    free(dup);
    j->n = n;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    sort_base = j->r;
    qsort(idx, n, sizeof *idx, cmp_by_rank);
    j->by_rank = idx;
    return 0;
}

/* The ranks in [0, world size) that no process shows; into v->missing_ranks. */
static int missing_ranks(const job *j, hdx_verdict *v)
{
    for (int r = 0; j->world_size > 0 && r < j->world_size && r < (1 << 20); r++)
        if (!find_rank(j, r) && hdx_cls_add_int(&v->missing_ranks, &v->n_missing_ranks, r))
            return -ENOMEM;
    return 0;
}

static const char *env_of(const job *j, const char *name)
{
    for (size_t i = 0; i < j->n; i++) {
        const char *s = hdx_process_env(j->r[i].p, name);
        if (s)
            return s;
    }
    return NULL;
}

/* Where a rank that is not in the wait is: "rank 2 (pid 7) is in load_dataset (w.py:6)". */
static size_t tell_where(const job *j, const rank_view *r, char *buf, size_t size)
{
    char where[256];
    if (r->p->state == 'T' || r->p->state == 't' || waits_in(r, "stopped"))
        snprintf(where, sizeof where, "stopped (state T)");
    else {
        char at[240];
        hdx_cls_where(r->t, at, sizeof at);
        snprintf(where, sizeof where, "in %s", at);
    }
    char who[160];
    hdx_cls_who(j->ev, r->p, 0, 0, who, sizeof who);
    int n = snprintf(buf, size, "%s is %s", who, where);
    return n < 0 ? 0 : (size_t)n;
}

/* t waits in NCCL's communicator initialisation: a native frame of ncclCommInitRank
 * (ncclCommInitRankFunc, pncclCommInitRankConfig...). */
static int in_nccl_init(const hdx_thread *t)
{
    for (size_t i = 0; t && i < t->n_frames; i++)
        if (t->frames[i].kind == HDX_FRAME_NATIVE && t->frames[i].function &&
            strstr(t->frames[i].function, "ncclCommInitRank"))
            return 1;
    return 0;
}

/* The torch.distributed call the user made that t waits under: the outermost frame of
 * the innermost run of distributed_c10d.py frames ("all_reduce", "init_process_group"
 * above _new_process_group_helper), or NULL. Borrowed. */
static const char *c10d_call(const hdx_thread *t)
{
    const char *call = NULL;
    for (size_t i = 0; t && i < t->n_frames; i++) {
        const hdx_frame *f = &t->frames[i];
        if (f->kind != HDX_FRAME_PYTHON)
            continue;
        size_t len = f->file ? strlen(f->file) : 0;
        if (f->function && len >= 19 && !strcmp(f->file + len - 19, "distributed_c10d.py"))
            call = f->function;
        else if (call)
            break;
    }
    return call;
}

static int verdict_rendezvous(const job *j, hdx_verdict *v)
{
    int *waiting = NULL;
    size_t n_waiting = 0;
    char elsewhere[1024] = "";
    size_t used = 0;
    /* The ranks that wait, and the ranks present but elsewhere: those never arrive either. */
    for (size_t i = 0; i < j->n; i++) {
        const rank_view *r = &j->r[i];
        if (waits_in(r, HDX_WAIT_RENDEZVOUS)) {
            if (hdx_cls_add_int(&waiting, &n_waiting, r->p->rank))
                goto nomem;
            continue;
        }
        if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, r->p->rank) || hdx_cls_add_pid(v, r->p->pid))
            goto nomem;
        if (used + 2 < sizeof elsewhere) {
            used += (size_t)snprintf(elsewhere + used, sizeof elsewhere - used, "; ");
            used += tell_where(j, r, elsewhere + used, sizeof elsewhere - used);
        }
    }
    if (missing_ranks(j, v))
        goto nomem;
    for (size_t i = 0; i < v->n_missing_ranks; i++)
        if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, v->missing_ranks[i]))
            goto nomem;
    const char *addr = env_of(j, "MASTER_ADDR"), *port = env_of(j, "MASTER_PORT");
    char store[200], have[256], miss[256];
    const rank_view *first = NULL; /* a waiting rank, for what it waits in */
    for (size_t i = 0; i < j->n && !first; i++)
        if (waits_in(&j->r[i], HDX_WAIT_RENDEZVOUS))
            first = &j->r[i];
    const char *op = first && first->t->wait_op ? first->t->wait_op : "init";
    /* NCCL's communicator set-up (at init_process_group with a device_id, else at the first
     * collective): named as such, with the call it runs under. */
    int nccl = first && in_nccl_init(first->t);
    const char *call = nccl ? c10d_call(first->t) : NULL;
    char what[120];
    if (nccl)
        snprintf(what, sizeof what, "ncclCommInitRank%s%s", call ? ", under " : "", call ? call : "");
    else
        snprintf(what, sizeof what, "%s", op);
    if (addr || port)
        snprintf(store, sizeof store, "%s, store %s:%s", what, addr ? addr : "?", port ? port : "?");
    else
        snprintf(store, sizeof store, "%s, store address unknown: no MASTER_ADDR/MASTER_PORT", what);
    hdx_format_ranges_of(waiting, n_waiting, have, sizeof have);
    hdx_format_ranges_of(v->missing_ranks, v->n_missing_ranks, miss, sizeof miss);
    v->cls = HDX_CLASS_RENDEZVOUS_WAIT;
    v->confidence = v->n_culprit_ranks ? HDX_CONF_HIGH : HDX_CONF_LOW;
    char missing[400] = "";
    if (v->n_missing_ranks)
        snprintf(missing, sizeof missing, "; rank%s %s of world size %d never arrived", v->n_missing_ranks == 1 ? "" : "s",
                 miss, j->world_size);
    int rc = hdx_cls_set_text(&v->summary, "rank%s %s wait%s in %s (%s)%s%s%s", n_waiting == 1 ? "" : "s", have,
                              n_waiting == 1 ? "s" : "",
                              nccl ? "NCCL communicator initialisation" : "process-group initialisation", store,
                              missing, elsewhere,
                              v->n_culprit_ranks ? ""
                                                 : "; no rank is missing or elsewhere here: ranks on other hosts are "
                                                   "not seen (give their snapshots)");
    size_t n_elsewhere = v->n_culprit_ranks - v->n_missing_ranks; /* culprits: elsewhere, then missing */
    if (rc)
        ;
    else if (!v->n_missing_ranks && n_elsewhere) /* every rank started: the fix is where they are */
        rc = hdx_cls_set_text(&v->remedy, "look at why %s not join %s %s: %s",
                              n_elsewhere == 1 ? "that rank does" : "those ranks do", call ? call : op,
                              nccl && call && strcmp(call, "init_process_group")
                                  ? "(the group's first collective, which sets up the NCCL communicator)"
                                  : "with the others",
                              elsewhere + 2);
    else if (!v->n_culprit_ranks)
        rc = hdx_cls_set_text(&v->remedy, "give the snapshots of every host (hangdx analyze snap-*.json) to see "
                                          "which ranks never arrived");
    else
        rc = hdx_cls_set_text(&v->remedy,
                              "start the missing ranks, or fix the launch so that WORLD_SIZE (nodes × processes per "
                              "node, or TP×PP×DP) matches what is started; %sfor a rank that crashed at start-up",
                              n_elsewhere ? "look at the ranks that are elsewhere, and " : "look ");
    free(waiting);
    return rc ? rc : 1;
nomem:
    free(waiting);
    return -ENOMEM;
}

/* ---- p2p: the waits-for graph ------------------------------------------- */

static const char *p2p_verb(const rank_view *r)
{
    if (waits_in(r, HDX_WAIT_P2P_SEND))
        return "sends to";
    if (waits_in(r, HDX_WAIT_P2P_RECV))
        return "receives from";
    return "exchanges with";
}

static int verdict_p2p(const job *j, hdx_verdict *v)
{
    char text[1024] = "";
    size_t used = 0;
    int unknown_peers = 0;
    for (size_t i = 0; i < j->n; i++) {
        const rank_view *a = &j->r[i];
        if (!hdx_wait_is_p2p(a->wait))
            continue;
        int peer = a->t->wait_peer;
        if (peer == HDX_UNKNOWN) {
            unknown_peers++;
            continue;
        }
        /* Follow the waits-for edges from a: a cycle back to a names all on it. */
        int cycle[64], len = 0, at = a->p->rank, closed = 0;
        for (const rank_view *r = a; r && hdx_wait_is_p2p(r->wait) && r->t->wait_peer != HDX_UNKNOWN && len < 64;) {
            cycle[len++] = r->p->rank;
            at = r->t->wait_peer;
            if (at == a->p->rank) {
                closed = 1;
                break;
            }
            r = find_rank(j, at);
        }
        if (closed) {
            int known = 0;
            for (int k = 0; k < len; k++)
                for (size_t c = 0; c < v->n_culprit_ranks; c++)
                    known |= v->culprit_ranks[c] == cycle[k];
            if (known)
                continue; /* this cycle is told already */
            used += (size_t)snprintf(text + used, sizeof text - used, "%swaits-for cycle ", used ? "; " : "");
            for (int k = 0; k < len && used < sizeof text; k++) {
                const rank_view *r = find_rank(j, cycle[k]);
                if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, cycle[k]) ||
                    hdx_cls_add_pid(v, r->p->pid))
                    return -ENOMEM;
                used += (size_t)snprintf(text + used, sizeof text - used, "%srank %d %s rank %d", k ? ", " : "",
                                         cycle[k], p2p_verb(r), r->t->wait_peer);
            }
            continue;
        }
        /* No cycle: the edge a → peer is unanswered when the peer does not wait on a. */
        const rank_view *b = find_rank(j, peer);
        if (b && hdx_wait_is_p2p(b->wait) && b->t->wait_peer == a->p->rank)
            continue; /* they wait on each other: a cycle told from either side */
        if (used < sizeof text) {
            char where[256];
            hdx_cls_where(b ? b->t : NULL, where, sizeof where);
            used += (size_t)snprintf(text + used, sizeof text - used, "%srank %d %s rank %d, which %s%s",
                                     used ? "; " : "", a->p->rank, p2p_verb(a), peer,
                                     b ? "never answers: it is in " : "is not among the inspected processes",
                                     b ? where : "");
        }
        if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, peer))
            return -ENOMEM;
        if (b && hdx_cls_add_pid(v, b->p->pid))
            return -ENOMEM;
    }
    v->cls = HDX_CLASS_P2P_MISMATCH;
    v->confidence = v->n_culprit_ranks ? HDX_CONF_HIGH : HDX_CONF_LOW;
    if (unknown_peers && used < sizeof text)
        snprintf(text + used, sizeof text - used,
                 "%s%d wait%s with an unknown peer (no src/dst/peer local could be read: a batched op, or an "
                 "input without locals)",
                 used ? "; " : "", unknown_peers, unknown_peers == 1 ? "" : "s");
    if (hdx_cls_set_text(&v->summary, "pipeline send/recv that cannot match: %s", text))
        return -ENOMEM;
    if (hdx_cls_set_text(&v->remedy, "make each send meet a recv on its peer in the same order on both stages "
                                     "(both stages receiving first, or both sending first with blocking sends, "
                                     "deadlocks); check the pipeline schedule and the peer ranks"))
        return -ENOMEM;
    return 1;
}

/* ---- collectives ----------------------------------------------------------- */

static const char *op_of(const rank_view *r)
{
    return r->t && r->t->wait_op ? r->t->wait_op : "a collective";
}

/* The host waits for the GPU (cudaStreamSynchronize, cuEventSynchronize... in waits.c). */
static int is_gpu_wait(const char *op)
{
    return op && !strncmp(op, "cu", 2) && strstr(op, "Synchronize");
}

static int verdict_collective(const job *j, hdx_verdict *v)
{
    /* The collective most ranks wait in; on a tie, the one met first. One pass that
     * counts each distinct op (there are few), not a count per rank: 8192 ranks. */
    const char *major = NULL;
    struct op_count {
        const char *op;
        size_t n;
    } *ops = NULL;
    size_t n_ops = 0, best = 0;
    for (size_t i = 0; i < j->n; i++) {
        if (!waits_in(&j->r[i], HDX_WAIT_COLLECTIVE))
            continue;
        const char *op = op_of(&j->r[i]);
        size_t k = 0;
        while (k < n_ops && strcmp(ops[k].op, op) != 0)
            k++;
        if (k == n_ops) {
            struct op_count *c = hdx_append((void **)&ops, &n_ops, sizeof *c);
            if (!c) {
                free(ops);
                return -ENOMEM;
            }
            c->op = op;
        }
        ops[k].n++;
    }
    for (size_t k = 0; k < n_ops; k++)
        if (ops[k].n > best) {
            best = ops[k].n;
            major = ops[k].op;
        }
    free(ops);
    int *in = NULL;
    size_t n_in = 0;
    char culprits[1024] = "";
    size_t used = 0;
    int all_locked = 1, any_busy = 0;
    for (size_t i = 0; i < j->n; i++) {
        const rank_view *r = &j->r[i];
        if (waits_in(r, HDX_WAIT_COLLECTIVE) && !strcmp(op_of(r), major)) {
            if (hdx_cls_add_int(&in, &n_in, r->p->rank))
                goto nomem;
            continue;
        }
        if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, r->p->rank) ||
            hdx_cls_add_pid(v, r->p->pid))
            goto nomem;
        all_locked &= waits_in(r, HDX_WAIT_BUILD_LOCK);
        any_busy |= r->p->progressing == 1;
        if (used + 2 >= sizeof culprits)
            continue;
        if (used)
            used += (size_t)snprintf(culprits + used, sizeof culprits - used, "; ");
        if (waits_in(r, HDX_WAIT_COLLECTIVE))
            used += (size_t)snprintf(culprits + used, sizeof culprits - used,
                                     "rank %d is in another collective, %s", r->p->rank, op_of(r));
        else
            used += tell_where(j, r, culprits + used, sizeof culprits - used);
    }
    int locked = all_locked && v->n_culprit_ranks; /* every culprit waits on a build lock */
    if (missing_ranks(j, v))
        goto nomem;
    char waiting[256];
    hdx_format_ranges_of(in, n_in, waiting, sizeof waiting);
    int rc;
    if (v->n_culprit_ranks) {
        v->cls = locked ? HDX_CLASS_BUILD_LOCK : HDX_CLASS_COLLECTIVE_WAIT;
        v->confidence = any_busy ? HDX_CONF_MEDIUM : HDX_CONF_HIGH;
        rc = hdx_cls_set_text(&v->summary, "rank%s %s wait%s in %s; %s%s", n_in == 1 ? "" : "s", waiting,
                              n_in == 1 ? "s" : "", major, culprits,
                              any_busy ? " (still computing: it may only be slow)" : "");
    } else if (v->n_missing_ranks) {
        for (size_t i = 0; i < v->n_missing_ranks; i++)
            if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, v->missing_ranks[i]))
                goto nomem;
        char miss[256];
        hdx_format_ranges_of(v->missing_ranks, v->n_missing_ranks, miss, sizeof miss);
        v->cls = HDX_CLASS_COLLECTIVE_WAIT;
        v->confidence = HDX_CONF_MEDIUM;
        rc = hdx_cls_set_text(&v->summary, "rank%s %s wait%s in %s; rank%s %s of world size %d %s not among the "
                                           "inspected processes (another host, or gone): inspect every rank's pid, "
                                           "the launcher's, or use --all, and give other hosts' snapshots",
                              n_in == 1 ? "" : "s", waiting, n_in == 1 ? "s" : "", major,
                              v->n_missing_ranks == 1 ? "" : "s", miss, j->world_size,
                              v->n_missing_ranks == 1 ? "is" : "are");
    } else {
        /* No rank is elsewhere or missing: with the whole world size here, what does not
         * finish is on the GPU or the wire; without a world size, a rank may be on another host. */
        int whole = j->world_size > 0 && n_in >= (size_t)j->world_size;
        const char *ranks = n_in == 1 ? "rank" : "ranks";
        v->cls = HDX_CLASS_COLLECTIVE_WAIT;
        v->confidence = HDX_CONF_LOW;
        if (whole && is_gpu_wait(major))
            rc = hdx_cls_set_text(&v->summary, "%s %s (world size %d, all here) wait%s in %s: the GPU work %s waits "
                                               "for (the collective's kernel, or one queued before it) does not finish",
                                  ranks, waiting, j->world_size, n_in == 1 ? "s" : "", major,
                                  n_in == 1 ? "it" : "each");
        else if (whole)
            rc = hdx_cls_set_text(&v->summary, "%s %s (world size %d, all here) wait%s in %s and none is elsewhere: "
                                               "the network or a GPU may be stuck",
                                  ranks, waiting, j->world_size, n_in == 1 ? "s" : "", major);
        else
            rc = hdx_cls_set_text(&v->summary, "%s %s wait%s in %s and none is missing here: a rank on another "
                                               "host, the network or a GPU may be stuck",
                                  ranks, waiting, n_in == 1 ? "s" : "", major);
        if (!rc)
            rc = hdx_cls_set_text(&v->remedy,
                                  "%slook at the GPU: nvidia-smi (a GPU busy with a kernel that never ends), the "
                                  "kernels queued before the collective, NCCL_DEBUG=INFO for the collective's "
                                  "transport, and the network between nodes",
                                  whole ? "" : "give every host's snapshot (hangdx analyze snap-*.json); then ");
    }
    if (!rc && !v->remedy)
        rc = hdx_cls_set_text(&v->remedy, locked ? "see why the culprit ranks wait on a build lock (hangdx inspect them)"
                                                     : "look at the culprit ranks where they are: a skipped or "
                                                       "reordered collective, an uneven loop, or a rank stopped "
                                                       "or stuck elsewhere");
    free(in);
    return rc ? rc : 1;
nomem:
    free(in);
    return -ENOMEM;
}

int hdx_cls_distributed(const hdx_evidence *ev, hdx_verdict *v)
{
    job j = {ev, NULL, 0, HDX_UNKNOWN, NULL};
    int rc = 0;
    size_t n_rdzv = 0, n_p2p = 0, n_coll = 0;
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        if (!p->is_rank_process || p->alive == 0)
            continue;
        rank_view *r = hdx_append((void **)&j.r, &j.n, sizeof *r);
        if (!r) {
            free(j.r);
            return -ENOMEM;
        }
        r->p = p;
        r->t = hdx_key_thread(p);
        r->wait = r->t ? r->t->wait : NULL;
    }
    if (index_ranks(&j) < 0) { /* the first process of each rank only */
        free(j.r);
        return -ENOMEM;
    }
    for (size_t i = 0; i < j.n; i++) {
        const rank_view *r = &j.r[i];
        if (r->p->world_size > j.world_size)
            j.world_size = r->p->world_size;
        n_rdzv += waits_in(r, HDX_WAIT_RENDEZVOUS);
        n_p2p += hdx_wait_is_p2p(r->wait);
        n_coll += waits_in(r, HDX_WAIT_COLLECTIVE);
    }
    if (n_rdzv)
        rc = verdict_rendezvous(&j, v);
    else if (n_p2p)
        rc = verdict_p2p(&j, v);
    else if (n_coll)
        rc = verdict_collective(&j, v);
    free(j.by_rank);
    free(j.r);
    return rc;
}
