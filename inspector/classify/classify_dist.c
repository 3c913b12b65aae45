/*
 * The distributed rules: rendezvous_wait, p2p_mismatch and collective_wait,
 * over the rank processes' key threads (groups.h) and their waits (waits.h).
 * culprit_ranks follow docs/design.md: the missing ranks; the ranks on a
 * waits-for cycle or the peer that never answers; the ranks absent from the
 * collective or in another one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "classify/groups.h"
#include "model/util.h"
#include "classify/waits.h"
#include "classify/waitsfor.h"

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
    if (r->p->frozen == 1)
        snprintf(where, sizeof where, "frozen (cgroup freezer)");
    else if (r->p->state == 'T' || r->p->state == 't' || waits_in(r, "stopped"))
        snprintf(where, sizeof where, "stopped (state T)");
    else {
        char at[240];
        hdx_thread_where(r->t, at, sizeof at);
        snprintf(where, sizeof where, "in %s", at);
    }
    char who[160];
    hdx_evidence_who(j->ev, r->p, 0, 0, who, sizeof who);
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
            hdx_thread_where(b ? b->t : NULL, where, sizeof where);
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


/* ---- the waits-for graph (waitsfor.h): process groups known ---------------- */

/* "rank 5 (TP 1 of TP group 4-5, PP stage 1, DP 1)", or "rank 5 (pid 7)" without roles. */
static void who_at(const hdx_evidence *ev, const hdx_wf_rank *r, char *buf, size_t size)
{
    char coords[256];
    hdx_rank_coords(ev, r->rank, coords, sizeof coords);
    if (coords[0])
        snprintf(buf, size, "rank %d (%s)", r->rank, coords);
    else if (r->p)
        hdx_evidence_who(ev, r->p, 0, 0, buf, size);
    else
        snprintf(buf, size, "rank %d", r->rank);
}

static const char *call_op(const hdx_waitsfor *g, long call)
{
    return call >= 0 ? g->calls[call].op : "a collective";
}

static int call_group(const hdx_waitsfor *g, long call)
{
    return call >= 0 ? g->calls[call].pgroup : HDX_UNKNOWN;
}

/* What a root rank does instead: "it sleeps in skip_and_sleep (w.py:12)". */
static void doing(const hdx_waitsfor *g, const hdx_wf_rank *r, char *buf, size_t size)
{
    char where[256];
    hdx_thread_where(r->t, where, sizeof where);
    switch (r->state) {
    case HDX_WF_ASLEEP:
        snprintf(buf, size, "it %s in %s", r->t && r->t->wait && !strcmp(r->t->wait, "sleep") ? "sleeps" : "is blocked",
                 where);
        break;
    case HDX_WF_COMPUTING:
        snprintf(buf, size, "it is computing in %s (its CPU time grows: it may only be slow)", where);
        break;
    case HDX_WF_BUILDING:
        if (r->tool)
            snprintf(buf, size, "it runs a build: %s (pid %d) has run %.0f s%s", hdx_process_name(r->tool), r->tool->pid,
                     r->tool->age_s, r->working ? ", using CPU" : ", idle");
        else
            snprintf(buf, size, "it runs a build in %s", where);
        break;
    case HDX_WF_STOPPED: snprintf(buf, size, "it is stopped (state T)"); break;
    case HDX_WF_FROZEN:
        snprintf(buf, size, "it is frozen by its cgroup's freezer (a suspended job): thaw it, and it goes on");
        break;
    case HDX_WF_DSTATE: snprintf(buf, size, "it is in uninterruptible sleep (state D) in %s", where); break;
    case HDX_WF_GONE: snprintf(buf, size, "its process is gone (it exited or was killed)"); break;
    case HDX_WF_MISSING:
        snprintf(buf, size, "no process of it is among those inspected: it died, or runs on another host%s",
                 g->world_size > 0 ? "" : " (world size unknown)");
        break;
    case HDX_WF_UNKNOWN_PEER:
        snprintf(buf, size, "it waits itself in %s for a peer that could not be read", r->op ? r->op : "a call");
        break;
    default: snprintf(buf, size, "it is in %s", where); break;
    }
}

/* One clause of the chain: the ranks that wait in the same kind of call, op and role. */
typedef struct clause {
    size_t first;    /* index in g->ranks of its first rank */
    int depth;       /* the least hops from the root among its ranks */
    int in_root;     /* 1: the call the root never joined */
    size_t size;     /* its group's size (the world: the largest) */
} clause;

static int cmp_clause(const void *a, const void *b)
{
    const clause *x = a, *y = b;
    if (x->in_root != y->in_root)
        return y->in_root - x->in_root;
    if (x->depth != y->depth)
        return x->depth - y->depth;
    return (x->size > y->size) - (x->size < y->size);
}

static int same_clause(const hdx_evidence *ev, const hdx_wf_rank *a, const hdx_wf_rank *b)
{
    const char *ra = a->pgroup >= 0 ? ev->pgroups[a->pgroup].role : NULL;
    const char *rb = b->pgroup >= 0 ? ev->pgroups[b->pgroup].role : NULL;
    if (b->kind != a->kind || !!a->op != !!b->op || (a->op && strcmp(a->op, b->op)))
        return 0;
    return ra ? rb && !strcmp(ra, rb) : b->pgroup == a->pgroup;
}

/* " on DP groups 4,6 and 5,7", " on the world group", or "" (p2p). */
static void groups_text(const hdx_evidence *ev, const hdx_wf_rank *a, const int *groups, size_t ng, char *buf,
                        size_t size)
{
    const char *role = a->pgroup >= 0 ? ev->pgroups[a->pgroup].role : NULL;
    buf[0] = 0;
    if (a->kind == HDX_WF_P2P)
        return;
    if (!role || ng == 1) {
        char gt[256];
        hdx_pgroup_text(ev, groups[0], gt, sizeof gt);
        snprintf(buf, size, " on %s%s", gt, ng > 1 ? " and others" : "");
        return;
    }
    size_t used = (size_t)snprintf(buf, size, " on %s groups ", hdx_pgroup_role_label(role));
    for (size_t x = 0; x < ng && x < 4 && used < size; x++) {
        char r[128];
        hdx_format_ranges_of(ev->pgroups[groups[x]].ranks, ev->pgroups[groups[x]].n_ranks, r, sizeof r);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", x == 0 ? "" : x + 1 == ng || x == 3 ? " and " : ", ",
                                 r);
    }
    if (ng > 4 && used < size)
        snprintf(buf + used, size - used, " (%zu groups)", ng);
}

/* What waits on root ri, one clause per kind of call: "rank 4 waits for it in all_gather
 * on TP group 4-5; ranks 6,7 wait in all_reduce on DP groups 4,6 and 5,7; ...". The call
 * the root never joined first, then the nearest, then the smallest groups. */
static int chain_text(FILE *out, const hdx_waitsfor *g, size_t ri)
{
    const hdx_evidence *ev = g->ev;
    const hdx_wf_root *root = &g->roots[ri];
    size_t n = g->n_ranks ? g->n_ranks : 1, nc = 0;
    char *done = calloc(n, 1);
    int *ranks = malloc(n * sizeof *ranks), *groups = malloc(n * sizeof *groups);
    clause *cl = malloc(n * sizeof *cl);
    int rc = -ENOMEM;
    if (!done || !ranks || !groups || !cl)
        goto out;
    for (size_t i = 0; i < g->n_ranks; i++) {
        const hdx_wf_rank *a = &g->ranks[i];
        if (done[i] || a->root != (int)ri || a->depth <= 0)
            continue;
        clause *c = &cl[nc++];
        *c = (clause){i, a->depth, 0, a->pgroup >= 0 ? ev->pgroups[a->pgroup].n_ranks : (size_t)-1};
        for (size_t k = i; k < g->n_ranks; k++) {
            const hdx_wf_rank *b = &g->ranks[k];
            if (done[k] || b->root != (int)ri || b->depth <= 0 || !same_clause(ev, a, b))
                continue;
            done[k] = 1;
            c->in_root |= root->call >= 0 && b->call == root->call;
            if (b->depth < c->depth)
                c->depth = b->depth;
        }
    }
    qsort(cl, nc, sizeof *cl, cmp_clause);
    for (size_t c = 0; c < nc; c++) {
        const hdx_wf_rank *a = &g->ranks[cl[c].first];
        size_t nr = 0, ng = 0;
        for (size_t k = cl[c].first; k < g->n_ranks; k++) {
            const hdx_wf_rank *b = &g->ranks[k];
            if (b->root != (int)ri || b->depth <= 0 || !same_clause(ev, a, b))
                continue;
            ranks[nr++] = b->rank;
            int seen = 0;
            for (size_t x = 0; x < ng; x++)
                seen |= groups[x] == b->pgroup;
            if (!seen)
                groups[ng++] = b->pgroup;
        }
        char list[256], gtext[512];
        hdx_format_ranges_of(ranks, nr, list, sizeof list);
        groups_text(ev, a, groups, ng, gtext, sizeof gtext);
        fprintf(out, "; rank%s %s wait%s%s in %s%s", nr == 1 ? "" : "s", list, nr == 1 ? "s" : "",
                cl[c].in_root ? " for it" : "", a->op ? a->op : hdx_wf_kind_name(a->kind), gtext);
    }
    rc = 0;
out:
    free(done);
    free(ranks);
    free(groups);
    free(cl);
    return rc;
}

/* One rank of a cycle: "rank 0 sends to rank 1 (tag 1; rank 1 receives with tag 2)" or
 * "rank 0 in all_reduce on group 1 (ranks 0,1) waits for rank 1". */
static void cycle_edge(FILE *out, const hdx_waitsfor *g, const hdx_wf_rank *a, const hdx_wf_root *root, int *tags)
{
    if (a->kind == HDX_WF_P2P) {
        for (size_t k = 0; k < a->n_ops; k++) {
            const hdx_wf_op *o = &a->ops[k];
            if (o->matched)
                continue;
            if (o->peer_tag != HDX_UNKNOWN) {
                *tags = 1;
                if (!o->send)
                    continue; /* told from the sender's side */
                fprintf(out, ", rank %d %s rank %d with tag %d but rank %d %s with tag %d", a->rank,
                        o->send ? "sends to" : "receives from", o->peer, o->tag, o->peer,
                        o->send ? "receives" : "sends", o->peer_tag);
            } else {
                fprintf(out, ", rank %d %s rank %d (%s)", a->rank, o->send ? "sends to" : "receives from", o->peer,
                        a->op ? a->op : "p2p");
            }
        }
        return;
    }
    char gt[256], list[256];
    hdx_pgroup_text(g->ev, call_group(g, a->call), gt, sizeof gt);
    const hdx_wf_call *c = a->call >= 0 ? &g->calls[a->call] : NULL;
    int in[64];
    size_t n = 0;
    for (size_t k = 0; c && k < c->n_absent && n < 64; k++)
        for (size_t x = 0; x < root->n_ranks; x++)
            if (root->ranks[x] == c->absent[k])
                in[n++] = c->absent[k];
    hdx_format_ranges_of(in, n, list, sizeof list);
    fprintf(out, ", rank %d in %s on %s waits for %s %s", a->rank, a->op ? a->op : "a collective", gt,
            n == 1 ? "rank" : "ranks", list);
}

static int set_group(hdx_verdict *v, const hdx_evidence *ev, int pg)
{
    free(v->group);
    v->group = NULL;
    return pg >= 0 && !(v->group = strdup(ev->pgroups[pg].name)) ? -ENOMEM : 0;
}

/* The group of a p2p wait on a root rank: the first waiter's. */
static int p2p_group_of(const hdx_waitsfor *g, int rank)
{
    for (size_t i = 0; i < g->n_ranks; i++)
        for (size_t k = 0; g->ranks[i].kind == HDX_WF_P2P && k < g->ranks[i].n_ops; k++)
            if (g->ranks[i].ops[k].peer == rank && !g->ranks[i].ops[k].matched)
                return g->ranks[i].pgroup;
    return HDX_UNKNOWN;
}

static int verdict_graph(const hdx_evidence *ev, hdx_waitsfor *g, hdx_verdict *v)
{
    const hdx_wf_root *root = &g->roots[0];
    int all_working = 1;
    for (size_t i = 0; i < g->n_roots; i++) {
        const hdx_wf_root *r = &g->roots[i];
        int working = r->kind == HDX_WF_ROOT_RANK && hdx_waitsfor_rank(g, r->ranks[0])->working;
        all_working &= working;
        if (r->kind == HDX_WF_ROOT_CALL || (working && i > 0 && !all_working))
            continue;
        for (size_t k = 0; k < r->n_ranks; k++) {
            const hdx_wf_rank *x = hdx_waitsfor_rank(g, r->ranks[k]);
            if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, x->rank) ||
                (x->p && hdx_cls_add_pid(v, x->p->pid)))
                return -ENOMEM;
        }
    }
    for (size_t i = 0; i < g->n_ranks; i++)
        if (!g->ranks[i].p && g->ranks[i].rank >= 0 &&
            hdx_cls_add_int(&v->missing_ranks, &v->n_missing_ranks, g->ranks[i].rank))
            return -ENOMEM;

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return -ENOMEM;
    const hdx_wf_rank *first = root->n_ranks ? hdx_waitsfor_rank(g, root->ranks[0]) : NULL;
    char who[320], what[400], gt[256];
    int pg = HDX_UNKNOWN, tags = 0;
    v->confidence = HDX_CONF_HIGH;
    switch (root->kind) {
    case HDX_WF_ROOT_RANK:
        who_at(ev, first, who, sizeof who);
        doing(g, first, what, sizeof what);
        pg = root->call >= 0 ? call_group(g, root->call) : p2p_group_of(g, first->rank);
        hdx_pgroup_text(ev, pg, gt, sizeof gt);
        if (first->state == HDX_WF_BUILDING) {
            double age = first->tool ? first->tool->age_s : -1;
            int timed_out = age >= 0 && ev->build_timeout_s > 0 && age > (double)ev->build_timeout_s;
            v->cls = first->working && !timed_out ? HDX_CLASS_NOT_HUNG : HDX_CLASS_COMPILE_STALL;
            v->culprit_working = first->working;
            if (v->cls == HDX_CLASS_NOT_HUNG) {
                v->n_culprit_ranks = v->n_culprit_pids = 0; /* not_hung names no culprit */
                fprintf(out, "a build is running: %s builds (%s) while the others wait for it", who, what);
            } else {
                fprintf(out, "%s holds up the job with a build that %s: %s", who,
                        timed_out ? "has run past --build-timeout" : "makes no CPU progress", what);
            }
        } else if (root->call >= 0) {
            fprintf(out, "%s never joined the %s of %s: %s", who, call_op(g, root->call), gt, what);
        } else {
            fprintf(out, "%s never answers the send/recv its peer%s wait%s in: %s", who,
                    root->n_waiting == 1 ? "" : "s", root->n_waiting == 1 ? "s" : "", what);
        }
        if (v->cls != HDX_CLASS_NOT_HUNG && v->cls != HDX_CLASS_COMPILE_STALL)
            v->cls = root->p2p ? HDX_CLASS_P2P_MISMATCH : HDX_CLASS_COLLECTIVE_WAIT;
        if (first->state == HDX_WF_COMPUTING) {
            v->culprit_working = 1;
            v->confidence = HDX_CONF_MEDIUM;
        } else if (first->state == HDX_WF_MISSING || first->state == HDX_WF_BUILDING) {
            v->confidence = HDX_CONF_MEDIUM;
        } else if (first->state == HDX_WF_UNKNOWN_PEER) {
            v->confidence = HDX_CONF_LOW;
        }
        if (first->state == HDX_WF_BUILDING && ev->samples >= 2)
            v->confidence = HDX_CONF_HIGH;
        break;
    case HDX_WF_ROOT_MOVED_ON: {
        pg = call_group(g, root->call);
        hdx_pgroup_text(ev, pg, gt, sizeof gt);
        for (size_t k = 0; k < root->n_ranks; k++) {
            const hdx_wf_rank *r = hdx_waitsfor_rank(g, root->ranks[k]);
            char rg[256];
            who_at(ev, r, who, sizeof who);
            hdx_pgroup_text(ev, call_group(g, r->call), rg, sizeof rg);
            fprintf(out, "%s%s never joined the %s of %s: it went on to %s on %s", k ? "; " : "", who,
                    call_op(g, root->call), gt, call_op(g, r->call), rg);
        }
        v->cls = HDX_CLASS_COLLECTIVE_WAIT;
        break;
    }
    case HDX_WF_ROOT_MISMATCH:
        pg = call_group(g, root->call);
        hdx_pgroup_text(ev, pg, gt, sizeof gt);
        fprintf(out, "the members of %s are in different collectives on it:", gt);
        for (size_t k = 0; k < root->n_ranks; k++) {
            const hdx_wf_rank *r = hdx_waitsfor_rank(g, root->ranks[k]);
            if (r->kind == HDX_WF_COLLECTIVE && r->pgroup == pg)
                fprintf(out, "%s rank %d in %s", k ? "," : "", r->rank, r->op ? r->op : "a collective");
        }
        if (root->n_ranks && hdx_waitsfor_rank(g, root->ranks[0])->call != root->call) /* the minority's */
            fprintf(out, ", while %zu of its ranks wait in %s", g->calls[root->call].n_in, call_op(g, root->call));
        v->cls = HDX_CLASS_COLLECTIVE_WAIT;
        break;
    case HDX_WF_ROOT_CYCLE: {
        FILE *edges = out;
        char *etext = NULL;
        size_t elen = 0;
        FILE *e = open_memstream(&etext, &elen);
        if (e) {
            for (size_t k = 0; k < root->n_ranks; k++)
                cycle_edge(e, g, hdx_waitsfor_rank(g, root->ranks[k]), root, &tags);
            fclose(e);
        }
        char list[256];
        hdx_format_ranges_of(root->ranks, root->n_ranks, list, sizeof list);
        pg = first->kind == HDX_WF_P2P ? first->pgroup : call_group(g, first->call);
        const char *each = etext && elen > 2 ? etext + 2 : ""; /* without the first ", " */
        if (root->p2p && tags)
            fprintf(edges, "pipeline send/recv that cannot match: the tags differ: %s", each);
        else if (root->p2p)
            fprintf(edges, "pipeline send/recv that cannot match: ranks %s wait on each other (a waits-for cycle: %s)",
                    list, each);
        else
            fprintf(edges, "ranks %s wait on each other in collectives across groups, in opposite orders (a waits-for "
                           "cycle: %s)",
                    list, each);
        free(etext);
        v->cls = root->p2p ? HDX_CLASS_P2P_MISMATCH : HDX_CLASS_COLLECTIVE_WAIT;
        break;
    }
    case HDX_WF_ROOT_CALL: {
        char list[256];
        hdx_format_ranges_of(root->ranks, root->n_ranks, list, sizeof list);
        pg = call_group(g, root->call);
        hdx_pgroup_text(ev, pg, gt, sizeof gt);
        fprintf(out, "ranks %s (all of %s) wait in %s and none is elsewhere: the network or a GPU may be stuck", list,
                gt, call_op(g, root->call));
        v->cls = HDX_CLASS_COLLECTIVE_WAIT;
        v->confidence = HDX_CONF_LOW;
        break;
    }
    }
    if (chain_text(out, g, 0)) {
        fclose(out);
        free(text);
        return -ENOMEM;
    }
    for (size_t i = 1; i < g->n_roots && i < 4; i++)
        fprintf(out, "; also rooted at rank%s %d%s", g->roots[i].n_ranks == 1 ? "" : "s",
                g->roots[i].n_ranks ? g->roots[i].ranks[0] : -1, g->roots[i].n_ranks > 1 ? ",..." : "");
    if (g->n_guessed) {
        fprintf(out, " (the process group of %zu wait%s could not be read: taken as the world group)", g->n_guessed,
                g->n_guessed == 1 ? "" : "s");
        if (v->confidence > HDX_CONF_LOW)
            v->confidence--;
    }
    if (fclose(out) || !text) {
        free(text);
        return -ENOMEM;
    }
    free(v->summary);
    v->summary = text;
    if (set_group(v, ev, pg))
        return -ENOMEM;
    const char *remedy;
    switch (v->cls) {
    case HDX_CLASS_NOT_HUNG:
        remedy = "wait for the build; hangdx calls it compile_stall after --build-timeout";
        break;
    case HDX_CLASS_COMPILE_STALL:
        remedy = "look at the build's compiler: kill it and the build, then relaunch (a compiler killed by the OOM "
                 "killer calls for a lower MAX_JOBS)";
        break;
    case HDX_CLASS_P2P_MISMATCH:
        remedy = "make each send meet a recv on its peer, with the same tag and in the same order on both stages; check "
                 "the pipeline schedule (the number of microbatches on each stage) and the peer ranks";
        break;
    default:
        remedy = root->kind == HDX_WF_ROOT_CALL
                     ? "look at the GPU: nvidia-smi, the kernels queued before the collective, NCCL_DEBUG=INFO, and the "
                       "network between nodes"
                 : root->kind == HDX_WF_ROOT_CYCLE
                     ? "make every rank call the collectives of its groups in the same order"
                     : "look at the culprit ranks where they are: a skipped or reordered collective of their group, "
                       "an uneven loop, or a rank stopped or stuck elsewhere";
    }
    return hdx_cls_set_text(&v->remedy, "%s", remedy);
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
    if (n_rdzv) {
        rc = verdict_rendezvous(&j, v);
    } else if ((n_p2p || n_coll) && ev->n_pgroups) {
        hdx_waitsfor *g = calloc(1, sizeof *g);
        rc = !g ? -ENOMEM : hdx_waitsfor_build(ev, g);
        v->graph = g;
        if (!rc && g->n_roots)
            rc = verdict_graph(ev, g, v);
        rc = rc < 0 ? rc : g->n_roots ? 1 : 0;
    } else if (n_p2p || n_coll) {
        /* Without the process groups every collective is taken on the world group: a hang
         * in a subgroup then blames the ranks that wait for it too. */
        rc = n_p2p ? verdict_p2p(&j, v) : verdict_collective(&j, v);
        if (rc > 0 && v->confidence > HDX_CONF_LOW)
            v->confidence--;
        if (rc > 0 && hdx_cls_set_text(&v->summary, "%s (process groups not read: every collective taken on the "
                                                     "world group)", v->summary))
            rc = -ENOMEM;
    }
    free(j.by_rank);
    free(j.r);
    return rc;
}
