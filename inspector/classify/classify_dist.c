/*
 * The distributed rules: rendezvous_wait, p2p_mismatch and collective_wait,
 * over the rank processes' key threads (groups.h) and their waits (waits.h).
 * culprit_ranks follow docs/design.md: the missing ranks; the ranks on a
 * waits-for cycle or the peer that never answers; the ranks absent from the
 * collective or in another one. The rules decide: each sets the verdict's
 * finding and facts (docs/design.md "Findings"), and report/words_dist.c words them.
 */
#include <errno.h>
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

/* The ranks in [0, world size) that no process shows, into v->missing_ranks: the gaps between
 * the ranks shown (by_rank), so that the work grows with the ranks read, not with the world size
 * claimed. At most HDX_RANKS_NAMED are named; past it v->missing_count is how many there are.
 * 0 or -ENOMEM. */
static int missing_ranks(const job *j, hdx_verdict *v)
{
    long long next = 0, count = 0; /* the first rank not yet placed; the ranks missing */
    for (size_t i = 0; j->world_size > 0 && i <= j->n && next < j->world_size; i++) {
        long long upto = i < j->n ? j->r[j->by_rank[i]].p->rank : j->world_size; /* the gap: [next, upto) */
        upto = upto < j->world_size ? upto : j->world_size;
        for (long long r = next; r < upto && v->n_missing_ranks < HDX_RANKS_NAMED; r++)
            if (hdx_cls_append_int(&v->missing_ranks, &v->n_missing_ranks, (int)r))
                return -ENOMEM;
        count += upto > next ? upto - next : 0;
        next = upto + 1 > next ? upto + 1 : next;
    }
    if (count > (long long)v->n_missing_ranks)
        v->missing_count = (int)count;
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

/* The fact "world_size", when known. 0 or -ENOMEM. */
static int set_world_size(const job *j, hdx_verdict *v)
{
    return j->world_size > 0 ? hdx_verdict_set_num(v, "world_size", j->world_size) : 0;
}

/* The facts of what the first waiting rank f waits in: its op, and NCCL's communicator
 * set-up (at init_process_group with a device_id, else at the first collective) with
 * the call it runs under. */
static int rendezvous_call(const rank_view *f, hdx_verdict *v)
{
    int nccl = in_nccl_init(f->t);
    if (hdx_verdict_set_text(v, "op", f->t->wait_op) || hdx_verdict_set_num(v, "nccl", nccl) ||
        (nccl && hdx_verdict_set_text(v, "call", c10d_call(f->t))))
        return -ENOMEM;
    return 0;
}

static int verdict_rendezvous(const job *j, hdx_verdict *v)
{
    int *waiting = NULL, *elsewhere = NULL;
    size_t n_waiting = 0, n_elsewhere = 0;
    const rank_view *first = NULL; /* the first rank that waits, for what it waits in */
    int rc = -ENOMEM;
    /* The ranks that wait, and the ranks present but elsewhere: those never arrive either. */
    for (size_t i = 0; i < j->n; i++) {
        const rank_view *r = &j->r[i];
        if (waits_in(r, HDX_WAIT_RENDEZVOUS)) {
            first = first ? first : r;
            if (hdx_cls_append_int(&waiting, &n_waiting, r->p->rank))
                goto out;
            continue;
        }
        if (hdx_cls_append_int(&elsewhere, &n_elsewhere, r->p->rank) ||
            hdx_cls_append_int(&v->culprit_ranks, &v->n_culprit_ranks, r->p->rank) || hdx_cls_add_pid(v, r->p->pid))
            goto out;
    }
    if (missing_ranks(j, v))
        goto out;
    for (size_t i = 0; i < v->n_missing_ranks; i++) /* none of them is here */
        if (hdx_cls_append_int(&v->culprit_ranks, &v->n_culprit_ranks, v->missing_ranks[i]))
            goto out;
    v->cls = HDX_CLASS_RENDEZVOUS_WAIT;
    v->finding = HDX_FIND_RENDEZVOUS;
    v->confidence = v->n_culprit_ranks ? HDX_CONF_HIGH : HDX_CONF_LOW;
    if (hdx_verdict_set_ints(v, "waiting", waiting, n_waiting) ||
        hdx_verdict_set_ints(v, "elsewhere", elsewhere, n_elsewhere) ||
        set_world_size(j, v) || (first && rendezvous_call(first, v)) ||
        hdx_verdict_set_text(v, "master_addr", env_of(j, "MASTER_ADDR")) ||
        hdx_verdict_set_text(v, "master_port", env_of(j, "MASTER_PORT")))
        goto out;
    rc = 1;
out:
    free(waiting);
    free(elsewhere);
    return rc;
}

/* ---- p2p without process groups -------------------------------------------- */

/* The direction of r's p2p wait: 1 it sends, 0 it receives, -1 it exchanges (unknown). */
static int p2p_sends(const rank_view *r)
{
    return waits_in(r, HDX_WAIT_P2P_SEND) ? 1 : waits_in(r, HDX_WAIT_P2P_RECV) ? 0 : -1;
}

/* One edge of a p2p verdict, in the order told: a rank's wait on its peer. */
typedef struct p2p_edge {
    int from, to;
    int sends; /* p2p_sends of from */
    int cycle; /* the waits-for cycle it is on, numbered from 1, or 0 when the peer never answers */
} p2p_edge;

static int add_edge(p2p_edge **e, size_t *n, const rank_view *r, int cycle)
{
    p2p_edge *x = hdx_append((void **)e, n, sizeof *x);
    if (!x)
        return -ENOMEM;
    *x = (p2p_edge){r->p->rank, r->t->wait_peer, p2p_sends(r), cycle};
    return 0;
}

/* The edges as v's facts: "edges" (from, to, from, to...), "sends" and "cycle" (one per edge). */
static int set_edges(hdx_verdict *v, const p2p_edge *e, size_t n)
{
    int *ints = malloc((4 * n + 1) * sizeof *ints);
    if (!ints)
        return -ENOMEM;
    int *ends = ints, *sends = ints + 2 * n, *cycle = ints + 3 * n;
    for (size_t i = 0; i < n; i++) {
        ends[2 * i] = e[i].from;
        ends[2 * i + 1] = e[i].to;
        sends[i] = e[i].sends;
        cycle[i] = e[i].cycle;
    }
    int rc = hdx_verdict_set_ints(v, "edges", ends, 2 * n) || hdx_verdict_set_ints(v, "sends", sends, n) ||
                     hdx_verdict_set_ints(v, "cycle", cycle, n)
                 ? -ENOMEM
                 : 0;
    free(ints);
    return rc;
}

/* Each waits-for cycle once (the first rank on it met in evidence order starts it), and
 * each edge a → peer that the peer does not answer, in evidence order. */
static int p2p_walk(const job *j, hdx_verdict *v, p2p_edge **e, size_t *n_e, int *unknown_peers)
{
    int cycles = 0;
    for (size_t i = 0; i < j->n; i++) {
        const rank_view *a = &j->r[i];
        if (!hdx_wait_is_p2p(a->wait))
            continue;
        int peer = a->t->wait_peer;
        if (peer == HDX_UNKNOWN) {
            (*unknown_peers)++;
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
            cycles++;
            for (int k = 0; k < len; k++) {
                const rank_view *r = find_rank(j, cycle[k]);
                if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, cycle[k]) ||
                    hdx_cls_add_pid(v, r->p->pid) || add_edge(e, n_e, r, cycles))
                    return -ENOMEM;
            }
            continue;
        }
        /* No cycle: the edge a → peer is unanswered when the peer does not wait on a. */
        const rank_view *b = find_rank(j, peer);
        if (b && hdx_wait_is_p2p(b->wait) && b->t->wait_peer == a->p->rank)
            continue; /* they wait on each other: a cycle told from either side */
        if (add_edge(e, n_e, a, 0) || hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, peer) ||
            (b && hdx_cls_add_pid(v, b->p->pid)))
            return -ENOMEM;
    }
    return 0;
}

static int verdict_p2p(const job *j, hdx_verdict *v)
{
    p2p_edge *e = NULL;
    size_t n_e = 0;
    int unknown_peers = 0;
    int rc = p2p_walk(j, v, &e, &n_e, &unknown_peers);
    v->cls = HDX_CLASS_P2P_MISMATCH;
    v->finding = HDX_FIND_P2P;
    v->confidence = v->n_culprit_ranks ? HDX_CONF_HIGH : HDX_CONF_LOW;
    if (!rc && (set_edges(v, e, n_e) || hdx_verdict_set_num(v, "unknown_peers", unknown_peers)))
        rc = -ENOMEM;
    free(e);
    return rc ? rc : 1;
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

/* The collective most ranks wait in; on a tie, the one met first. One pass that counts
 * each distinct op (there are few), not a count per rank: 8192 ranks. Borrowed from j;
 * NULL on ENOMEM. */
static const char *major_op(const job *j)
{
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
                return NULL;
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
    return major;
}

static int verdict_collective(const job *j, hdx_verdict *v)
{
    const char *major = major_op(j);
    if (!major)
        return -ENOMEM;
    int *in = NULL;
    size_t n_in = 0;
    int all_locked = 1, any_busy = 0, rc = -ENOMEM;
    for (size_t i = 0; i < j->n; i++) {
        const rank_view *r = &j->r[i];
        if (waits_in(r, HDX_WAIT_COLLECTIVE) && !strcmp(op_of(r), major)) {
            if (hdx_cls_append_int(&in, &n_in, r->p->rank))
                goto out;
            continue;
        }
        if (hdx_cls_append_int(&v->culprit_ranks, &v->n_culprit_ranks, r->p->rank) ||
            hdx_cls_add_pid(v, r->p->pid))
            goto out;
        all_locked &= waits_in(r, HDX_WAIT_BUILD_LOCK);
        any_busy |= r->p->progressing == 1;
    }
    int locked = all_locked && v->n_culprit_ranks; /* every culprit waits on a build lock */
    if (missing_ranks(j, v) || hdx_verdict_set_text(v, "op", major) || hdx_verdict_set_ints(v, "waiting", in, n_in) ||
        set_world_size(j, v))
        goto out;
    v->cls = locked ? HDX_CLASS_BUILD_LOCK : HDX_CLASS_COLLECTIVE_WAIT;
    if (v->n_culprit_ranks) {
        v->finding = HDX_FIND_COLLECTIVE_ELSEWHERE;
        v->confidence = any_busy ? HDX_CONF_MEDIUM : HDX_CONF_HIGH;
        if (hdx_verdict_set_num(v, "busy", any_busy) || hdx_verdict_set_num(v, "locked", locked))
            goto out;
    } else if (v->n_missing_ranks) {
        for (size_t i = 0; i < v->n_missing_ranks; i++) /* no culprit yet */
            if (hdx_cls_append_int(&v->culprit_ranks, &v->n_culprit_ranks, v->missing_ranks[i]))
                goto out;
        v->finding = HDX_FIND_COLLECTIVE_MISSING;
        v->confidence = HDX_CONF_MEDIUM;
    } else {
        /* No rank is elsewhere or missing: with the whole world size here, what does not
         * finish is on the GPU or the wire; without a world size, a rank may be on another host. */
        int whole = j->world_size > 0 && n_in >= (size_t)j->world_size;
        v->finding = !whole                ? HDX_FIND_COLLECTIVE_UNSEEN
                     : is_gpu_wait(major) ? HDX_FIND_COLLECTIVE_GPU
                                          : HDX_FIND_COLLECTIVE_STUCK;
        v->confidence = HDX_CONF_LOW;
    }
    rc = 1;
out:
    free(in);
    return rc;
}

/* ---- the waits-for graph (waitsfor.h): process groups known ---------------- */

static int call_group(const hdx_waitsfor *g, long call)
{
    return call >= 0 ? g->calls[call].pgroup : HDX_UNKNOWN;
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

/* The process group the hang is in: the call the first root is waited on through, else
 * (p2p) its first waiter's group; a cycle's first rank's. */
static int root_group(const hdx_waitsfor *g)
{
    const hdx_wf_root *root = &g->roots[0];
    const hdx_wf_rank *first = root->n_ranks ? hdx_waitsfor_rank(g, root->ranks[0]) : NULL;
    switch (root->kind) {
    case HDX_WF_ROOT_RANK: return root->call >= 0 ? call_group(g, root->call) : p2p_group_of(g, first->rank);
    case HDX_WF_ROOT_CYCLE: return first->kind == HDX_WF_P2P ? first->pgroup : call_group(g, first->call);
    default: return call_group(g, root->call);
    }
}

/* The class and confidence of a root rank that waits for nothing known. */
static int verdict_root_rank(const hdx_evidence *ev, const hdx_waitsfor *g, hdx_verdict *v)
{
    const hdx_wf_root *root = &g->roots[0];
    const hdx_wf_rank *first = hdx_waitsfor_rank(g, root->ranks[0]);
    v->cls = root->p2p ? HDX_CLASS_P2P_MISMATCH : HDX_CLASS_COLLECTIVE_WAIT;
    switch (first->state) {
    case HDX_WF_BUILDING: {
        double age = first->tool ? first->tool->age_s : -1;
        int timed_out = age >= 0 && ev->build_timeout_s > 0 && age > (double)ev->build_timeout_s;
        v->cls = first->working && !timed_out ? HDX_CLASS_NOT_HUNG : HDX_CLASS_COMPILE_STALL;
        v->culprit_working = first->working;
        if (v->cls == HDX_CLASS_NOT_HUNG)
            v->n_culprit_ranks = v->n_culprit_pids = 0; /* not_hung names no culprit */
        v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
        return hdx_verdict_set_num(v, "timed_out", timed_out);
    }
    case HDX_WF_COMPUTING:
        v->culprit_working = 1;
        v->confidence = HDX_CONF_MEDIUM;
        break;
    case HDX_WF_MISSING: v->confidence = HDX_CONF_MEDIUM; break;
    case HDX_WF_UNKNOWN_PEER: v->confidence = HDX_CONF_LOW; break;
    default: break;
    }
    return 0;
}

/* Where the input recorded the calls' sequence numbers (a Flight Recorder dump): `seq` and `op`,
 * the call the first root is waited on through (a mismatch: the call most members are in), or
 * `p2p_seq` and `op` of the first send/recv that waits on it unanswered. */
static int recorded_seq(const hdx_waitsfor *g, hdx_verdict *v)
{
    const hdx_wf_root *root = &g->roots[0];
    if (root->call >= 0) {
        const hdx_wf_call *c = &g->calls[root->call];
        if (c->seq == HDX_UNKNOWN)
            return 0;
        return hdx_verdict_set_num(v, "seq", c->seq) || hdx_verdict_set_text(v, "op", c->op) ? -ENOMEM : 0;
    }
    for (size_t i = 0; root->n_ranks && i < g->n_ranks; i++) {
        const hdx_wf_rank *r = &g->ranks[i];
        for (size_t k = 0; r->kind == HDX_WF_P2P && r->seq != HDX_UNKNOWN && k < r->n_ops; k++)
            if (!r->ops[k].matched && r->ops[k].peer == root->ranks[0])
                return hdx_verdict_set_num(v, "p2p_seq", r->seq) ||
                               hdx_verdict_set_text(v, "op", r->op ? r->op : (r->ops[k].send ? "send" : "recv"))
                           ? -ENOMEM
                           : 0;
    }
    return 0;
}

static int verdict_graph(const hdx_evidence *ev, hdx_waitsfor *g, hdx_verdict *v)
{
    const hdx_wf_root *root = &g->roots[0];
    int all_working = 1;
    size_t named = 0; /* culprit ranks named from nodes of missing ranks, HDX_RANKS_NAMED at most (but their first ranks) */
    long long culprits = 0; /* all of them, named or not, told past HDX_RANKS_NAMED */
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
            culprits += (long long)x->last - x->rank + 1;
            /* the rest of a node of missing ranks: in no other root, so appended */
            for (long long m = (long long)x->rank + 1; m <= x->last && ++named < HDX_RANKS_NAMED; m++)
                if (hdx_cls_append_int(&v->culprit_ranks, &v->n_culprit_ranks, (int)m))
                    return -ENOMEM;
        }
    }
    if (named >= HDX_RANKS_NAMED && hdx_verdict_set_num(v, "culprit_count", culprits))
        return -ENOMEM;
    long long missing = 0; /* the nodes of missing ranks, ascending and disjoint (waitsfor.h) */
    for (size_t i = 0; i < g->n_ranks; i++) {
        const hdx_wf_rank *x = &g->ranks[i];
        if (x->p || x->rank < 0)
            continue;
        missing += (long long)x->last - x->rank + 1;
        for (long long m = x->rank; m <= x->last && v->n_missing_ranks < HDX_RANKS_NAMED; m++)
            if (hdx_cls_append_int(&v->missing_ranks, &v->n_missing_ranks, (int)m))
                return -ENOMEM;
    }
    if (missing > (long long)v->n_missing_ranks)
        v->missing_count = (int)missing;
    v->finding = HDX_FIND_GRAPH;
    v->cls = root->kind == HDX_WF_ROOT_CYCLE && root->p2p ? HDX_CLASS_P2P_MISMATCH : HDX_CLASS_COLLECTIVE_WAIT;
    v->confidence = root->kind == HDX_WF_ROOT_CALL ? HDX_CONF_LOW : HDX_CONF_HIGH;
    if (root->kind == HDX_WF_ROOT_RANK && verdict_root_rank(ev, g, v))
        return -ENOMEM;
    if (g->n_guessed && v->confidence > HDX_CONF_LOW)
        v->confidence--;
    int pg = root_group(g);
    if (set_group(v, ev, pg) || hdx_verdict_set_num(v, "pgroup_index", pg))
        return -ENOMEM;
    return recorded_seq(g, v);
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
        if (rc > 0 && hdx_verdict_set_num(v, "groups_unread", 1))
            rc = -ENOMEM;
    }
    free(j.by_rank);
    free(j.r);
    return rc;
}
