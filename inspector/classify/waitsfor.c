#include "classify/waitsfor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "classify/groups.h"
#include "model/util.h"
#include "classify/waits.h"

const char *hdx_wf_kind_name(enum hdx_wf_kind k)
{
    static const char *const names[] = {"none", "collective", "p2p", "rendezvous", "build_lock"};
    return (unsigned)k <= HDX_WF_BUILD_LOCK ? names[k] : "none";
}

const char *hdx_wf_state_name(enum hdx_wf_state s)
{
    static const char *const names[] = {"waiting",    "asleep", "computing", "building",    "stopped", "frozen",
                                        "in D state", "gone",   "missing",   "unknown peer"};
    return (unsigned)s <= HDX_WF_UNKNOWN_PEER ? names[s] : "waiting";
}

void hdx_waitsfor_free(hdx_waitsfor *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_calls; i++) {
        free(g->calls[i].absent);
        free(g->calls[i].node_upto);
    }
    for (size_t i = 0; i < g->n_roots; i++)
        free(g->roots[i].ranks);
    free(g->calls);
    free(g->roots);
    free(g->ranks);
    free(g->world_ranks);
    memset(g, 0, sizeof *g);
}

static int cmp_rank(const void *a, const void *b)
{
    const hdx_wf_rank *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The index of the node that holds rank (g->ranks sorted and disjoint), or -1. */
static long rank_index(const hdx_waitsfor *g, int rank)
{
    size_t lo = 0, hi = g->n_ranks; /* the first node past rank: lo */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->ranks[mid].rank <= rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && g->ranks[lo - 1].last >= rank ? (long)lo - 1 : -1;
}

const hdx_wf_rank *hdx_waitsfor_rank(const hdx_waitsfor *g, int rank)
{
    long i = rank_index(g, rank);
    return i < 0 ? NULL : &g->ranks[i];
}

size_t hdx_wf_call_nodes(const hdx_wf_call *c)
{
    return c->node_upto ? c->node_upto[c->n_absent] : 0;
}

int hdx_wf_call_waits_for(const hdx_wf_call *c, int rank)
{
    size_t lo = 0, hi = c->n_absent; /* the first range past rank: lo */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->absent[mid].lo <= rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && c->absent[lo - 1].hi >= rank;
}

/* The index in g->ranks of the k-th node call c waits for, or -1 past the last. */
static long call_node_index(const hdx_waitsfor *g, const hdx_wf_call *c, size_t k)
{
    if (k >= hdx_wf_call_nodes(c))
        return -1;
    size_t lo = 0, hi = c->n_absent; /* the range that holds it: the last j with node_upto[j] <= k */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->node_upto[mid] <= k)
            lo = mid;
        else
            hi = mid;
    }
    return rank_index(g, c->absent[lo].lo) + (long)(k - c->node_upto[lo]);
}

const hdx_wf_rank *hdx_wf_call_node(const hdx_waitsfor *g, const hdx_wf_call *c, size_t k)
{
    long i = call_node_index(g, c, k);
    return i < 0 ? NULL : &g->ranks[i];
}

/* ---- process groups ------------------------------------------------------ */

static int default_group(const hdx_evidence *ev)
{
    for (size_t i = 0; i < ev->n_pgroups; i++)
        if (ev->pgroups[i].is_default)
            return (int)i;
    return HDX_UNKNOWN;
}

static int group_index(const hdx_evidence *ev, const char *name)
{
    const hdx_pgroup *pg = hdx_evidence_find_pgroup(ev, name);
    return pg ? (int)(pg - ev->pgroups) : HDX_UNKNOWN;
}

/* ---- what one rank waits on ---------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* *out = f's rank-sized int local `name` when it has one; 1 then, else 0 (*out unchanged). */
static int int_local(const hdx_frame *f, const char *name, int *out)
{
    int v = hdx_wait_rank_local(f, name);
    if (v == HDX_UNKNOWN)
        return 0;
    *out = v;
    return 1;
}

/*
 * The group of the call at frame f: its `group` local (None: the default group).
 * 1 when read, with *pg the index (HDX_UNKNOWN: the default group, not among the groups).
 */
static int frame_group(const hdx_evidence *ev, const hdx_frame *f, int *pg)
{
    const hdx_local *v = f ? hdx_frame_local(f, "group") : NULL;
    if (!v)
        return 0;
    if (v->kind == HDX_VAL_NONE) {
        *pg = default_group(ev);
        return 1;
    }
    if (!v->pg)
        return 0;
    *pg = group_index(ev, v->pg);
    return *pg != HDX_UNKNOWN;
}

/* The group of t's wait: the wait frame's `group`, else the nearest distributed_c10d
 * frame outward that has one. 1 when read. */
static int wait_group(const hdx_evidence *ev, const hdx_thread *t, int *pg)
{
    size_t from = t->wait_frame >= 0 ? (size_t)t->wait_frame : 0;
    for (size_t i = from; i < t->n_frames; i++) {
        const hdx_frame *f = &t->frames[i];
        if (f->kind == HDX_FRAME_PYTHON && (i == from || ends_with(f->file, "distributed_c10d.py")) &&
            frame_group(ev, f, pg))
            return 1;
    }
    return 0;
}

/* A global rank from a group rank of group pg, or HDX_UNKNOWN. */
static int global_of(const hdx_evidence *ev, int pg, int group_rank)
{
    if (pg < 0 || group_rank < 0 || (size_t)group_rank >= ev->pgroups[pg].n_ranks)
        return HDX_UNKNOWN;
    return ev->pgroups[pg].ranks[group_rank];
}

static void add_op(hdx_wf_rank *r, int send, int peer, int tag)
{
    if (r->n_ops == HDX_WF_MAX_OPS)
        return;
    r->ops[r->n_ops++] = (hdx_wf_op){send, peer, tag, 0, HDX_UNKNOWN};
}

/* The role group of `role` that holds rank, or HDX_UNKNOWN. */
static int role_group(const hdx_evidence *ev, const char *role, int rank)
{
    for (size_t i = 0; i < ev->n_pgroups; i++)
        if (ev->pgroups[i].role && !strcmp(ev->pgroups[i].role, role) && hdx_pgroup_rank_of(&ev->pgroups[i], rank) >= 0)
            return (int)i;
    return HDX_UNKNOWN;
}

/*
 * Megatron's pipeline exchange (megatron/core/pipeline_parallel/p2p_communication.py
 * _communicate): its locals say which of the four transfers it makes (tensor_send_next,
 * tensor_send_prev not None; recv_prev, recv_next True); the peers are its next_rank and
 * prev_rank locals, or (releases without them) the rank's neighbours in its pipeline
 * group (pp_group, else the "pp" role group), wrapping around as
 * get_pipeline_model_parallel_next_rank/prev_rank do.
 */
static void megatron_ops(const hdx_evidence *ev, hdx_wf_rank *r)
{
    size_t at = 0;
    const hdx_frame *f = hdx_thread_find_python(r->t, "_communicate", "p2p_communication.py", &at);
    if (!f)
        return;
    /* its pp_group, next_rank and prev_rank locals where the release has them */
    int pg = HDX_UNKNOWN, next = HDX_UNKNOWN, prev = HDX_UNKNOWN;
    const hdx_local *v = hdx_frame_local(f, "pp_group");
    if (v && v->pg)
        pg = group_index(ev, v->pg);
    if (pg == HDX_UNKNOWN)
        pg = role_group(ev, "pp", r->rank);
    int i = pg >= 0 ? hdx_pgroup_rank_of(&ev->pgroups[pg], r->rank) : -1;
    if (i >= 0) {
        const hdx_pgroup *g = &ev->pgroups[pg];
        int n = (int)g->n_ranks;
        next = g->ranks[(i + 1) % n];
        prev = g->ranks[(i + n - 1) % n];
    }
    int_local(f, "next_rank", &next);
    int_local(f, "prev_rank", &prev);
    if (next == HDX_UNKNOWN || prev == HDX_UNKNOWN)
        return;
    r->pgroup = pg;
    r->op = f->function;
    if ((v = hdx_frame_local(f, "tensor_send_next")) && v->kind != HDX_VAL_NONE)
        add_op(r, 1, next, 0);
    if ((v = hdx_frame_local(f, "tensor_send_prev")) && v->kind != HDX_VAL_NONE)
        add_op(r, 1, prev, 0);
    if ((v = hdx_frame_local(f, "recv_prev")) && v->kind == HDX_VAL_BOOL && v->i)
        add_op(r, 0, prev, 0);
    if ((v = hdx_frame_local(f, "recv_next")) && v->kind == HDX_VAL_BOOL && v->i)
        add_op(r, 0, next, 0);
}

/* send/recv of distributed_c10d, and isend/irecv followed by wait: one op. */
static void plain_op(const hdx_evidence *ev, hdx_wf_rank *r)
{
    const hdx_thread *t = r->t;
    int send = !strcmp(t->wait, HDX_WAIT_P2P_SEND);
    int peer = t->wait_peer, tag = HDX_UNKNOWN, pg = HDX_UNKNOWN;
    const hdx_frame *f = t->wait_frame >= 0 ? &t->frames[t->wait_frame] : NULL;
    if (f && f->kind == HDX_FRAME_PYTHON) {
        int gr;
        frame_group(ev, f, &pg);
        int_local(f, "tag", &tag);
        /* torch >= 2.6: a group rank instead of the global one */
        if (peer == HDX_UNKNOWN && int_local(f, send ? "group_dst" : "group_src", &gr))
            peer = global_of(ev, pg, gr);
    }
    if (t->wait_pg)
        pg = group_index(ev, t->wait_pg);
    r->pgroup = pg;
    if (!strcmp(t->wait, HDX_WAIT_P2P) && peer == HDX_UNKNOWN)
        return; /* an exchange whose direction and peer are unknown */
    add_op(r, send, peer, tag);
}

/* Stopped by a signal or frozen by the cgroup freezer: it waits on whoever did it. */
static int is_stopped(const hdx_process *p, const hdx_thread *t)
{
    return p->state == 'T' || p->state == 't' || p->frozen == 1 || (t && t->wait && !strcmp(t->wait, "stopped"));
}

/* The rank of the process holding the lock r's process waits on, or HDX_UNKNOWN. */
static int lock_holder_rank(const hdx_evidence *ev, const hdx_process *p)
{
    for (size_t i = 0; i < ev->n_locks; i++) {
        const hdx_lock *l = &ev->locks[i];
        for (size_t k = 0; k < l->n_waiters; k++)
            if (hdx_evidence_find_waiter(ev, &l->waiters[k]) == p) {
                hdx_lock_judgement j;
                hdx_lock_judge(ev, l, &j);
                const hdx_process *h = hdx_evidence_find_process_on(ev, j.holder_host, j.holder_pid);
                return h && h->rank >= 0 && h != p ? h->rank : HDX_UNKNOWN;
            }
    }
    return HDX_UNKNOWN;
}

static void describe_wait(const hdx_evidence *ev, hdx_waitsfor *g, hdx_wf_rank *r)
{
    const hdx_thread *t = r->t;
    r->pgroup = HDX_UNKNOWN;
    r->call = -1;
    r->lock_holder = HDX_UNKNOWN;
    r->moved_on_from = -1;
    r->root = -1;
    r->depth = -1;
    r->seq = HDX_UNKNOWN;
    if (!r->p || r->p->alive == 0 || !t || !t->wait || is_stopped(r->p, t))
        return;
    if (t->wait_pg) { /* recorded by the input (evidence.h) */
        r->seq = t->wait_seq;
        r->sig = t->wait_sig;
    }
    if (!strcmp(t->wait, HDX_WAIT_COLLECTIVE)) {
        r->kind = HDX_WF_COLLECTIVE;
        r->op = t->wait_op;
        int recorded = t->wait_pg && (r->pgroup = group_index(ev, t->wait_pg)) != HDX_UNKNOWN;
        if (!recorded && !wait_group(ev, t, &r->pgroup)) {
            r->pgroup = default_group(ev);
            r->group_guessed = 1;
            g->n_guessed++;
        }
    } else if (!strcmp(t->wait, HDX_WAIT_RENDEZVOUS)) {
        r->kind = HDX_WF_RENDEZVOUS;
        r->op = t->wait_op;
        r->pgroup = default_group(ev);
    } else if (hdx_wait_is_p2p(t->wait)) {
        r->kind = HDX_WF_P2P;
        r->op = t->wait_op;
        megatron_ops(ev, r);
        if (!r->n_ops)
            plain_op(ev, r);
    } else if (!strcmp(t->wait, HDX_WAIT_BUILD_LOCK)) {
        r->kind = HDX_WF_BUILD_LOCK;
        r->lock_holder = lock_holder_rank(ev, r->p);
    }
    g->n_waiting += r->kind != HDX_WF_NONE;
}

/* ---- calls ----------------------------------------------------------------- */

static long find_call(const hdx_waitsfor *g, const hdx_wf_rank *r, const char *op)
{
    for (size_t i = 0; i < g->n_calls; i++) {
        const hdx_wf_call *c = &g->calls[i];
        if (c->kind == r->kind && c->pgroup == r->pgroup &&
            (r->kind == HDX_WF_RENDEZVOUS ||
             (!strcmp(c->op, op) && c->seq == r->seq && !!c->sig == !!r->sig && (!c->sig || !strcmp(c->sig, r->sig)))))
            return (long)i;
    }
    return -1;
}

/* Put each collective or rendezvous rank into its call. The calls are few (one per
 * group and op in progress); the search is linear in them. */
static int make_calls(hdx_waitsfor *g)
{
    for (size_t i = 0; i < g->n_ranks; i++) {
        hdx_wf_rank *r = &g->ranks[i];
        if (r->kind != HDX_WF_COLLECTIVE && r->kind != HDX_WF_RENDEZVOUS)
            continue;
        const char *op = r->op ? r->op : "a collective";
        long c = find_call(g, r, op);
        if (c < 0) {
            hdx_wf_call *nc = hdx_append((void **)&g->calls, &g->n_calls, sizeof *nc);
            if (!nc)
                return -ENOMEM;
            nc->kind = r->kind;
            nc->op = op;
            nc->pgroup = r->pgroup;
            nc->seq = r->seq;
            nc->sig = r->sig;
            c = (long)g->n_calls - 1;
        }
        r->call = c;
        g->calls[c].n_in++;
    }
    return 0;
}

/* Add ranks lo..hi (lo <= hi, above every range c has) to c's absent ranges, joined to the last
 * one when they touch. 0 or -ENOMEM. */
static int add_absent(hdx_wf_call *c, int lo, int hi)
{
    c->n_absent_ranks += (size_t)(hi - lo) + 1;
    if (c->n_absent && c->absent[c->n_absent - 1].hi + 1 == lo) {
        c->absent[c->n_absent - 1].hi = hi;
        return 0;
    }
    hdx_wf_range *slot = hdx_append((void **)&c->absent, &c->n_absent, sizeof *slot);
    if (!slot)
        return -ENOMEM;
    *slot = (hdx_wf_range){lo, hi};
    return 0;
}

/* Is node b (a rank a process or a wait shows) a member of call c's group in another collective
 * on it? */
static int mismatched(const hdx_wf_call *c, const hdx_wf_rank *b)
{
    return c->kind == HDX_WF_COLLECTIVE && b->kind == HDX_WF_COLLECTIVE && b->pgroup == c->pgroup;
}

/*
 * The members of call c's group that are not in it, as ranges: of a group, its ranks; of the
 * world (its group unknown), [0, world size) less the ranks in c, walking the ranks shown, not
 * the world; else the world's ranks known. Runs before the missing nodes are added (each node
 * one rank). O(members · log ranks + ranks). 0 or -ENOMEM.
 */
static int fill_absent(const hdx_evidence *ev, hdx_waitsfor *g, hdx_wf_call *c, long ci)
{
    if (c->pgroup < 0 && g->world_size > 0) {
        int next = 0; /* the first world rank not yet placed */
        for (size_t i = 0; i < g->n_ranks && g->ranks[i].rank < g->world_size; i++) {
            const hdx_wf_rank *b = &g->ranks[i];
            if (b->call != ci)
                continue;
            if (b->rank > next && add_absent(c, next, b->rank - 1))
                return -ENOMEM;
            next = b->rank + 1;
        }
        if (next < g->world_size && add_absent(c, next, g->world_size - 1))
            return -ENOMEM;
        for (size_t i = 0; i < g->n_ranks && g->ranks[i].rank < g->world_size; i++)
            c->n_mismatch += g->ranks[i].call != ci && mismatched(c, &g->ranks[i]);
        return 0;
    }
    const int *members = c->pgroup >= 0 ? ev->pgroups[c->pgroup].ranks : g->world_ranks;
    size_t n = c->pgroup >= 0 ? ev->pgroups[c->pgroup].n_ranks : g->n_world_ranks;
    int *sorted = malloc((n ? n : 1) * sizeof *sorted); /* a group's ranks are in group-rank order */
    if (!sorted)
        return -ENOMEM;
    if (n)
        memcpy(sorted, members, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, hdx_cmp_int);
    int rc = 0;
    for (size_t k = 0; !rc && k < n; k++) {
        int m = sorted[k];
        if (m < 0 || (k && m == sorted[k - 1]))
            continue;
        long at = rank_index(g, m);
        const hdx_wf_rank *b = at >= 0 ? &g->ranks[at] : NULL;
        if (b && b->call == ci)
            continue;
        c->n_mismatch += b && mismatched(c, b);
        rc = add_absent(c, m, m);
    }
    free(sorted);
    return rc;
}

/* Does b answer op o of rank a? Sets o->peer_tag when only the tags differ. */
static int answers(const hdx_wf_rank *a, hdx_wf_op *o, const hdx_wf_rank *b)
{
    if (!b || b->kind != HDX_WF_P2P)
        return 0;
    for (size_t k = 0; k < b->n_ops; k++) {
        const hdx_wf_op *q = &b->ops[k];
        if (q->send == o->send || (q->peer != a->rank && !(q->peer == HDX_UNKNOWN && !q->send)))
            continue;
        if (o->tag != HDX_UNKNOWN && q->tag != HDX_UNKNOWN && o->tag != q->tag) {
            o->peer_tag = q->tag;
            continue;
        }
        return 1;
    }
    return 0;
}

static void match_p2p(hdx_waitsfor *g)
{
    for (size_t i = 0; i < g->n_ranks; i++) {
        hdx_wf_rank *a = &g->ranks[i];
        for (size_t k = 0; a->kind == HDX_WF_P2P && k < a->n_ops; k++) {
            hdx_wf_op *o = &a->ops[k];
            if (o->peer != HDX_UNKNOWN) {
                long b = rank_index(g, o->peer);
                o->matched = answers(a, o, b >= 0 ? &g->ranks[b] : NULL);
                continue;
            }
            /* a recv from any source: answered by any send to a */
            for (size_t j = 0; j < g->n_ranks && !o->matched; j++)
                o->matched = j != i && answers(a, o, &g->ranks[j]);
        }
    }
}

/* ---- the graph: rank nodes 0..n_ranks-1, call nodes after ------------------ */

/* The k-th successor of node v, or -1 past the last. */
static long succ(const hdx_waitsfor *g, size_t v, size_t k)
{
    if (v >= g->n_ranks) {
        return call_node_index(g, &g->calls[v - g->n_ranks], k);
    }
    const hdx_wf_rank *r = &g->ranks[v];
    if (r->call >= 0)
        return k == 0 ? (long)g->n_ranks + r->call : -1;
    if (r->kind == HDX_WF_BUILD_LOCK)
        return k == 0 && r->lock_holder != HDX_UNKNOWN ? rank_index(g, r->lock_holder) : -1;
    for (size_t i = 0; i < r->n_ops; i++) {
        if (r->ops[i].matched || r->ops[i].peer == HDX_UNKNOWN)
            continue;
        if (k-- == 0)
            return rank_index(g, r->ops[i].peer);
    }
    return -1;
}

/* Tarjan's strongly connected components, iteratively: comp[v] for every node. */
static int components(const hdx_waitsfor *g, size_t n, long *comp, size_t *n_comp)
{
    long *index = malloc(n * sizeof *index), *low = malloc(n * sizeof *low);
    size_t *stack = malloc(n * sizeof *stack), *work = malloc(n * sizeof *work), *next = malloc(n * sizeof *next);
    char *on = calloc(n, 1);
    if (!index || !low || !stack || !work || !next || !on) {
        free(index), free(low), free(stack), free(work), free(next), free(on);
        return -ENOMEM;
    }
    for (size_t v = 0; v < n; v++)
        index[v] = -1;
    long counter = 0;
    size_t sp = 0, wp = 0;
    *n_comp = 0;
    for (size_t s = 0; s < n; s++) {
        if (index[s] >= 0)
            continue;
        work[wp] = s;
        next[wp++] = 0;
        index[s] = low[s] = counter++;
        stack[sp++] = s;
        on[s] = 1;
        while (wp) {
            size_t v = work[wp - 1];
            long w = succ(g, v, next[wp - 1]++);
            if (w >= 0) {
                if (index[w] < 0) {
                    index[w] = low[w] = counter++;
                    stack[sp++] = (size_t)w;
                    on[w] = 1;
                    work[wp] = (size_t)w;
                    next[wp++] = 0;
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            wp--;
            if (wp && low[v] < low[work[wp - 1]])
                low[work[wp - 1]] = low[v];
            if (low[v] == index[v]) {
                size_t x;
                do {
                    x = stack[--sp];
                    on[x] = 0;
                    comp[x] = (long)*n_comp;
                } while (x != v);
                (*n_comp)++;
            }
        }
    }
    free(index), free(low), free(stack), free(work), free(next), free(on);
    return 0;
}

/* ---- what a root rank does --------------------------------------------------- */

/* A program a build runs: ninja, make, the compilers, assembler and linker. */
static int is_build_tool(const char *name)
{
    static const char *const tools[] = {"ninja", "make",  "cmake", "cc1",   "cc1plus", "c++", "g++", "gcc",
                                        "cc",    "clang", "nvcc",  "cicc",  "ptxas",   "as",  "ld",  "collect2"};
    const char *dash = strrchr(name, '-'); /* x86_64-linux-gnu-g++-12: the tool is g++ */
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        size_t n = strlen(tools[i]);
        if (!strncmp(name, tools[i], n) && (!name[n] || name[n] == '-'))
            return 1;
        if (dash && dash > name) { /* the word before the version */
            const char *start = dash;
            while (start > name && start[-1] != '-')
                start--;
            if ((size_t)(dash - start) == n && !strncmp(start, tools[i], n))
                return 1;
        }
    }
    return 0;
}

/* p runs a build: cpp_extension's build frames, or a build tool among its live
 * descendants. *busy: the build (p or a tool) uses CPU. */
static int builds(const hdx_evidence *ev, const hdx_process *p, int *busy, const hdx_process **tool)
{
    size_t at = 0;
    const hdx_thread *main_thread = p->n_threads ? &p->threads[0] : NULL;
    int found = main_thread && (hdx_thread_find_python(main_thread, "_run_ninja_build", "cpp_extension.py", &at) ||
                                (at = 0, hdx_thread_find_python(main_thread, "_jit_compile", "cpp_extension.py", &at)));
    *busy = p->progressing == 1;
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *c = &ev->procs[i];
        if (c == p || c->alive == 0 || !is_build_tool(hdx_process_name(c)) || !hdx_process_descendant_depth(ev, c, p))
            continue;
        found = 1;
        *busy |= c->progressing == 1;
        if (!*tool || c->age_s > (*tool)->age_s)
            *tool = c;
    }
    return found;
}

static enum hdx_wf_state root_state(const hdx_evidence *ev, hdx_wf_rank *r)
{
    const hdx_process *p = r->p;
    int *working = &r->working;
    if (!p)
        return HDX_WF_MISSING;
    if (p->alive == 0)
        return HDX_WF_GONE;
    if (p->frozen == 1)
        return HDX_WF_FROZEN;
    if (is_stopped(p, r->t))
        return HDX_WF_STOPPED;
    if (p->state == 'D' || (r->t && r->t->state == 'D'))
        return HDX_WF_DSTATE;
    if (builds(ev, p, working, &r->tool))
        return HDX_WF_BUILDING;
    if (p->progressing == 1 && r->kind == HDX_WF_NONE) {
        *working = 1;
        return HDX_WF_COMPUTING;
    }
    return r->kind != HDX_WF_NONE ? HDX_WF_UNKNOWN_PEER : HDX_WF_ASLEEP;
}

/* ---- roots ----------------------------------------------------------------- */

/* Is group b strictly larger than group a and holds all of a's ranks? (HDX_UNKNOWN: the world.) */
static int strictly_wider(const hdx_evidence *ev, int b, int a)
{
    if (a == b || a < 0)
        return 0;
    const hdx_pgroup *ga = &ev->pgroups[a];
    if (b < 0 || ev->pgroups[b].is_default)
        return !ga->is_default;
    const hdx_pgroup *gb = &ev->pgroups[b];
    if (gb->n_ranks <= ga->n_ranks)
        return 0;
    for (size_t i = 0; i < ga->n_ranks; i++)
        if (hdx_pgroup_rank_of(&ev->pgroups[b], ga->ranks[i]) < 0)
            return 0;
    return 1;
}

static int add_root_rank(hdx_wf_root *root, int rank)
{
    int *slot = hdx_append((void **)&root->ranks, &root->n_ranks, sizeof *slot);
    if (!slot)
        return -ENOMEM;
    *slot = rank;
    return 0;
}

static int root_priority(const hdx_waitsfor *g, const hdx_wf_root *r)
{
    if (r->rendezvous)
        return 0;
    if (r->kind == HDX_WF_ROOT_CALL)
        return 5;
    if (r->kind != HDX_WF_ROOT_RANK)
        return 1;
    const hdx_wf_rank *x = hdx_waitsfor_rank(g, r->ranks[0]);
    if (x->state == HDX_WF_UNKNOWN_PEER)
        return 3;
    return x->state == HDX_WF_COMPUTING || x->state == HDX_WF_BUILDING ? 4 : 2;
}

static const hdx_waitsfor *sort_graph;

static int cmp_root(const void *a, const void *b)
{
    int x = root_priority(sort_graph, a), y = root_priority(sort_graph, b);
    if (x != y)
        return x - y;
    const hdx_wf_root *p = a, *q = b;
    return (p->ranks ? p->ranks[0] : -1) - (q->ranks ? q->ranks[0] : -1);
}

/*
 * A mismatch on one group: when one call on it holds more of its members than any other,
 * the members in the other calls are the culprits and root->call becomes that call (the
 * one they did not join); on a tie every member in a call on it stays one.
 */
static int minority(hdx_waitsfor *g, const size_t *nodes, size_t n, hdx_wf_root *root)
{
    int pg = g->calls[root->call].pgroup;
    long best = -1;
    int tie = 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i] < g->n_ranks)
            continue;
        long ci = (long)(nodes[i] - g->n_ranks);
        if (g->calls[ci].pgroup != pg)
            continue;
        if (best < 0 || g->calls[ci].n_in > g->calls[best].n_in) {
            best = ci;
            tie = 0;
        } else if (g->calls[ci].n_in == g->calls[best].n_in) {
            tie = 1;
        }
    }
    root->p2p = 0;
    if (tie || best < 0)
        return 0;
    root->call = best;
    root->n_ranks = 0;
    for (size_t i = 0; i < n; i++) {
        hdx_wf_rank *r = nodes[i] < g->n_ranks ? &g->ranks[nodes[i]] : NULL;
        if (!r)
            continue;
        r->culprit = r->call >= 0 && r->call != best && g->calls[r->call].pgroup == pg;
        if (r->culprit && add_root_rank(root, r->rank))
            return -ENOMEM;
    }
    return 0;
}

/* Analyse the component of nodes[0..n) (a sink) into a root, or none. */
static int make_root(const hdx_evidence *ev, hdx_waitsfor *g, const size_t *nodes, size_t n, const long *comp,
                     const char *has_in)
{
    hdx_wf_root root = {HDX_WF_ROOT_RANK, NULL, 0, -1, 0, 0, 0};
    size_t R = g->n_ranks;
    if (n == 1 && nodes[0] >= R) { /* every member is in the call */
        long ci = (long)(nodes[0] - R);
        root.kind = HDX_WF_ROOT_CALL;
        root.call = ci;
        root.rendezvous = g->calls[ci].kind == HDX_WF_RENDEZVOUS;
        for (size_t i = 0; i < R; i++)
            if (g->ranks[i].call == ci && add_root_rank(&root, g->ranks[i].rank))
                return -ENOMEM;
    } else if (n == 1) {
        hdx_wf_rank *r = &g->ranks[nodes[0]];
        if (!has_in[comp[nodes[0]]] && r->kind == HDX_WF_NONE)
            return 0; /* nobody waits on it, and it waits for nobody */
        r->state = root_state(ev, r);
        r->culprit = 1;
        if (add_root_rank(&root, r->rank))
            return -ENOMEM;
    } else {
        for (size_t i = 0; i < n; i++) { /* moved on: it waits on a wider group than it is waited on by */
            if (nodes[i] < R)
                continue;
            long ci = (long)(nodes[i] - R);
            const hdx_wf_call *c = &g->calls[ci];
            for (size_t k = 0; k < hdx_wf_call_nodes(c); k++) {
                long b = call_node_index(g, c, k);
                if ( comp[b] != comp[nodes[i]] || g->ranks[b].call < 0 || g->ranks[b].culprit)
                    continue;
                if (strictly_wider(ev, g->calls[g->ranks[b].call].pgroup, c->pgroup)) {
                    g->ranks[b].culprit = 1;
                    g->ranks[b].moved_on_from = (int)ci;
                    root.kind = HDX_WF_ROOT_MOVED_ON;
                    root.call = ci;
                    if (add_root_rank(&root, g->ranks[b].rank))
                        return -ENOMEM;
                }
            }
        }
        for (size_t i = 0; root.kind != HDX_WF_ROOT_MOVED_ON && i < n; i++) {
            if (nodes[i] >= R) {
                const hdx_wf_call *c = &g->calls[nodes[i] - R];
                if (c->n_mismatch && root.kind != HDX_WF_ROOT_MISMATCH) {
                    root.kind = HDX_WF_ROOT_MISMATCH;
                    root.call = (long)(nodes[i] - R);
                }
                continue;
            }
            g->ranks[nodes[i]].culprit = 1;
            root.p2p |= g->ranks[nodes[i]].kind == HDX_WF_P2P;
            if (add_root_rank(&root, g->ranks[nodes[i]].rank))
                return -ENOMEM;
        }
        if (root.kind == HDX_WF_ROOT_RANK)
            root.kind = HDX_WF_ROOT_CYCLE;
        if (root.kind == HDX_WF_ROOT_MISMATCH && minority(g, nodes, n, &root) < 0) {
            free(root.ranks);
            return -ENOMEM;
        }
    }
    hdx_wf_root *slot = hdx_append((void **)&g->roots, &g->n_roots, sizeof *slot);
    if (!slot) {
        free(root.ranks);
        return -ENOMEM;
    }
    if (root.n_ranks)
        qsort(root.ranks, root.n_ranks, sizeof *root.ranks, hdx_cmp_int);
    *slot = root;
    return 0;
}

/* For each root rank: what waits on it. Calls into it give the group (the smallest
 * first); without a call, only p2p waits do. Linear in the edges: a world of missing ranks
 * makes as many roots. 0 or -ENOMEM. */
static int root_edges(hdx_waitsfor *g, size_t n)
{
    long *root_at = malloc((g->n_ranks ? g->n_ranks : 1) * sizeof *root_at); /* by rank node */
    if (!root_at)
        return -ENOMEM;
    for (size_t v = 0; v < g->n_ranks; v++)
        root_at[v] = -1;
    for (size_t i = 0; i < g->n_roots; i++) {
        long v = g->roots[i].kind == HDX_WF_ROOT_RANK ? rank_index(g, g->roots[i].ranks[0]) : -1;
        if (v >= 0)
            root_at[v] = (long)i; /* a rank is in one component, so in one root */
    }
    for (size_t v = 0; v < n; v++)
        for (size_t k = 0;; k++) {
            long w = succ(g, v, k);
            if (w < 0)
                break;
            if ((size_t)w >= g->n_ranks || !g->ranks[w].culprit || root_at[w] < 0)
                continue;
            hdx_wf_root *r = &g->roots[root_at[w]];
            if (v >= g->n_ranks) {
                const hdx_wf_call *c = &g->calls[v - g->n_ranks];
                r->rendezvous |= c->kind == HDX_WF_RENDEZVOUS;
                size_t size = c->pgroup >= 0 ? g->ev->pgroups[c->pgroup].n_ranks : (size_t)-1;
                size_t have = r->call >= 0 && g->calls[r->call].pgroup >= 0
                                  ? g->ev->pgroups[g->calls[r->call].pgroup].n_ranks
                                  : (size_t)-1;
                if (r->call < 0 || size < have)
                    r->call = (long)(v - g->n_ranks);
            } else {
                r->p2p = 1;
            }
        }
    free(root_at);
    for (size_t i = 0; i < g->n_roots; i++)
        if (g->roots[i].kind == HDX_WF_ROOT_RANK && g->roots[i].call >= 0)
            g->roots[i].p2p = 0;
    return 0;
}

/* Which root each rank waits on, and how many hops away: a 0-1 BFS on the reversed
 * edges from each root in turn (a call node is no hop). */
static int assign_depths(hdx_waitsfor *g, size_t n)
{
    size_t *start = calloc(n + 1, sizeof *start), *pred = NULL, *fill = NULL;
    size_t *deque = malloc(2 * (n + 1) * sizeof *deque);
    long *dist = malloc(n * sizeof *dist);
    int rc = -ENOMEM;
    if (!start || !deque || !dist)
        goto out;
    size_t m = 0;
    for (size_t v = 0; v < n; v++)
        for (size_t k = 0;; k++) {
            long w = succ(g, v, k);
            if (w < 0)
                break;
            start[w]++;
            m++;
        }
    for (size_t v = 0, sum = 0; v <= n; v++) {
        size_t c = v < n ? start[v] : 0;
        start[v] = sum;
        sum += c;
    }
    if (!(pred = malloc((m ? m : 1) * sizeof *pred)) || !(fill = malloc((n ? n : 1) * sizeof *fill)))
        goto out;
    memcpy(fill, start, n * sizeof *fill);
    for (size_t v = 0; v < n; v++)
        for (size_t k = 0;; k++) {
            long w = succ(g, v, k);
            if (w < 0)
                break;
            pred[fill[w]++] = v;
        }
    for (size_t v = 0; v < n; v++)
        dist[v] = -1;
    for (size_t ri = 0; ri < g->n_roots; ri++) {
        hdx_wf_root *root = &g->roots[ri];
        size_t head = n + 1, tail = n + 1;
        if (root->kind == HDX_WF_ROOT_CALL) {
            size_t v = g->n_ranks + (size_t)root->call;
            dist[v] = 0;
            deque[tail++] = v;
        }
        for (size_t k = 0; root->kind != HDX_WF_ROOT_CALL && k < root->n_ranks; k++) {
            long v = rank_index(g, root->ranks[k]);
            if (v >= 0 && dist[v] < 0) {
                dist[v] = 0;
                deque[tail++] = (size_t)v;
            }
        }
        while (head < tail) {
            size_t v = deque[head++];
            if (v < g->n_ranks) {
                g->ranks[v].root = (int)ri;
                g->ranks[v].depth = (int)dist[v];
                root->n_waiting += dist[v] > 0;
            }
            for (size_t e = start[v]; e < start[v + 1]; e++) {
                size_t u = pred[e];
                if (dist[u] >= 0)
                    continue;
                if (u >= g->n_ranks) { /* no hop: to the front */
                    dist[u] = dist[v];
                    deque[--head] = u;
                } else {
                    dist[u] = dist[v] + 1;
                    deque[tail++] = u;
                }
            }
        }
    }
    rc = 0;
out:
    free(start), free(pred), free(fill), free(deque), free(dist);
    return rc;
}

/* ---- building the graph ---------------------------------------------------- */

/* By rank, then evidence order (the first process of a rank first). */
static int cmp_rank_then_process(const void *a, const void *b)
{
    const hdx_wf_rank *x = a, *y = b;
    if (x->rank != y->rank)
        return (x->rank > y->rank) - (x->rank < y->rank);
    return (x->p > y->p) - (x->p < y->p);
}

/* A node for ranks lo..hi that no process shows. 0 or -ENOMEM. */
static int add_missing_node(hdx_waitsfor *g, int lo, int hi)
{
    hdx_wf_rank *r = hdx_append((void **)&g->ranks, &g->n_ranks, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->rank = lo;
    r->last = hi;
    r->pgroup = HDX_UNKNOWN;
    r->seq = HDX_UNKNOWN;
    r->call = -1;
    r->lock_holder = HDX_UNKNOWN;
    r->moved_on_from = -1;
    r->root = r->depth = -1;
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    const hdx_wf_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/*
 * Every rank a call waits for or a p2p op names that no process has goes into a node of missing
 * ranks: the ranges those name, less the ranks shown, cut where any of them begins or ends, so
 * that each node lies wholly inside or outside each call's absent ranges (succ walks a call's
 * nodes as runs of g->ranks). Then each call's node_upto. Nodes and work grow with the ranges
 * (calls' absent ranges, ops) and the ranks shown, never with the ranks a range holds
 * (docs/design.md "The waits-for graph"). 0 or -ENOMEM.
 */
static int add_missing_ranks(hdx_waitsfor *g)
{
    hdx_wf_range *in = NULL; /* the ranges named */
    size_t n_in = 0, n_cuts = 0, shown = g->n_ranks;
    long long *cuts = NULL;  /* where a range begins, or ends (its hi + 1) */
    int rc = -ENOMEM;
    for (size_t i = 0; i < g->n_calls; i++)
        for (size_t k = 0; k < g->calls[i].n_absent; k++) {
            hdx_wf_range *slot = hdx_append((void **)&in, &n_in, sizeof *slot);
            if (!slot)
                goto out;
            *slot = g->calls[i].absent[k];
        }
    for (size_t i = 0; i < shown; i++)
        for (size_t k = 0; k < g->ranks[i].n_ops; k++) {
            int peer = g->ranks[i].ops[k].peer;
            hdx_wf_range *slot = peer >= 0 ? hdx_append((void **)&in, &n_in, sizeof *slot) : NULL;
            if (peer >= 0 && !slot)
                goto out;
            if (slot)
                *slot = (hdx_wf_range){peer, peer};
        }
    if (n_in && !(cuts = malloc(2 * n_in * sizeof *cuts)))
        goto out;
    for (size_t i = 0; i < n_in; i++) {
        cuts[n_cuts++] = in[i].lo;
        cuts[n_cuts++] = (long long)in[i].hi + 1;
    }
    if (n_in) {
        qsort(in, n_in, sizeof *in, cmp_range);
        qsort(cuts, n_cuts, sizeof *cuts, cmp_ll);
    }
    /* each piece [cuts[i], cuts[i+1]) that a range covers, less the ranks shown */
    size_t u = 0, s = 0;       /* the first range and the first shown rank that may reach it */
    long long reach = -1;      /* the highest rank of in[0..u) */
    for (size_t i = 0; i + 1 < n_cuts; i++) {
        long long lo = cuts[i], hi = cuts[i + 1] - 1;
        if (hi < lo)
            continue;
        while (u < n_in && in[u].lo <= lo) /* ranges begin only at cuts: those up to lo cover it, or end before */
            reach = reach > in[u].hi ? reach : in[u].hi, u++;
        if (reach < hi)
            continue;
        while (s < shown && g->ranks[s].rank < lo)
            s++;
        for (long long from = lo; from <= hi;) {
            long long to = hi;
            if (s < shown && g->ranks[s].rank <= hi)
                to = g->ranks[s].rank - 1;
            if (to >= from && add_missing_node(g, (int)from, (int)to))
                goto out;
            if (to == hi)
                break;
            from = (long long)g->ranks[s++].rank + 1;
        }
    }
    if (g->n_ranks > shown)
        qsort(g->ranks, g->n_ranks, sizeof *g->ranks, cmp_rank);
    for (size_t i = 0; i < g->n_calls; i++) {
        hdx_wf_call *c = &g->calls[i];
        if (!(c->node_upto = malloc((c->n_absent + 1) * sizeof *c->node_upto)))
            goto out;
        c->node_upto[0] = 0;
        for (size_t k = 0; k < c->n_absent; k++) {
            long first = rank_index(g, c->absent[k].lo), last = rank_index(g, c->absent[k].hi);
            c->node_upto[k + 1] = c->node_upto[k] + (size_t)(last - first + 1);
        }
    }
    rc = 0;
out:
    free(in);
    free(cuts);
    return rc;
}

static int collect_ranks(const hdx_evidence *ev, hdx_waitsfor *g)
{
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        if (!p->is_rank_process || p->set_aside || p->rank < 0)
            continue;
        hdx_wf_rank *r = hdx_append((void **)&g->ranks, &g->n_ranks, sizeof *r);
        if (!r)
            return -ENOMEM;
        r->rank = r->last = p->rank;
        r->p = p;
        if (p->world_size > g->world_size)
            g->world_size = p->world_size;
    }
    if (g->n_ranks) /* none: g->ranks is NULL */
        qsort(g->ranks, g->n_ranks, sizeof *g->ranks, cmp_rank_then_process);
    size_t n = 0;
    for (size_t i = 0; i < g->n_ranks; i++)
        if (!n || g->ranks[i].rank != g->ranks[n - 1].rank)
            g->ranks[n++] = g->ranks[i];
    g->n_ranks = n;
    int d = default_group(ev);
    if (d >= 0 && (int)ev->pgroups[d].n_ranks > g->world_size)
        g->world_size = (int)ev->pgroups[d].n_ranks;
    for (size_t i = 0; i < n; i++) {
        g->ranks[i].t = hdx_key_thread(g->ranks[i].p);
        describe_wait(ev, g, &g->ranks[i]);
    }
    return 0;
}

/* The graph over g's rank nodes (each with its wait described): calls, the ranks they wait
 * for, components and roots. 0 or -ENOMEM. */
static int build_graph(const hdx_evidence *ev, hdx_waitsfor *g)
{
    int rc = make_calls(g);
    for (size_t i = 0; !rc && i < g->n_calls; i++)
        rc = fill_absent(ev, g, &g->calls[i], (long)i);
    if (!rc)
        rc = add_missing_ranks(g);
    if (rc)
        return rc;
    match_p2p(g);

    size_t n = g->n_ranks + g->n_calls, n_comp = 0;
    long *comp = malloc((n ? n : 1) * sizeof *comp);
    size_t *order = malloc((n ? n : 1) * sizeof *order), *first = NULL;
    char *out = NULL, *in = NULL;
    if (!comp || !order || (rc = components(g, n, comp, &n_comp)) ||
        !(first = calloc(n_comp + 1, sizeof *first)) || !(out = calloc(n_comp + 1, 1)) ||
        !(in = calloc(n_comp + 1, 1))) {
        rc = rc ? rc : -ENOMEM;
        goto out;
    }
    for (size_t v = 0; v < n; v++)
        for (size_t k = 0;; k++) {
            long w = succ(g, v, k);
            if (w < 0)
                break;
            if (comp[w] != comp[v]) {
                out[comp[v]] = 1;
                in[comp[w]] = 1;
            }
        }
    /* the nodes of each component together: a counting sort by component */
    for (size_t v = 0; v < n; v++)
        first[comp[v] + 1]++;
    for (size_t c = 0; c < n_comp; c++)
        first[c + 1] += first[c];
    {
        size_t *at = malloc((n_comp ? n_comp : 1) * sizeof *at);
        if (!at) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(at, first, n_comp * sizeof *at);
        for (size_t v = 0; v < n; v++)
            order[at[comp[v]]++] = v;
        free(at);
    }
    for (size_t c = 0; !rc && c < n_comp; c++)
        if (!out[c])
            rc = make_root(ev, g, order + first[c], first[c + 1] - first[c], comp, in);
    if (rc)
        goto out;
    if ((rc = root_edges(g, n)))
        goto out;
    sort_graph = g;
    if (g->n_roots) /* none: g->roots is NULL */
        qsort(g->roots, g->n_roots, sizeof *g->roots, cmp_root);
    rc = assign_depths(g, n);
out:
    free(comp), free(order), free(first), free(out), free(in);
    return rc;
}

int hdx_waitsfor_build(const hdx_evidence *ev, hdx_waitsfor *g)
{
    memset(g, 0, sizeof *g);
    g->ev = ev;
    g->world_size = HDX_UNKNOWN;
    int rc = collect_ranks(ev, g);
    return rc ? rc : build_graph(ev, g);
}

int hdx_waitsfor_build_waits(const hdx_evidence *ev, const hdx_wf_wait *waits, size_t n, int world_size,
                             const int *world_ranks, size_t n_world_ranks, hdx_waitsfor *g)
{
    memset(g, 0, sizeof *g);
    g->ev = ev;
    g->world_size = world_size > 0 && world_size <= HDX_WORLD_SIZE_TAKEN ? world_size : HDX_UNKNOWN;
    if (g->world_size == HDX_UNKNOWN && n_world_ranks) {
        if (!(g->world_ranks = malloc(n_world_ranks * sizeof *g->world_ranks)))
            return -ENOMEM;
        memcpy(g->world_ranks, world_ranks, n_world_ranks * sizeof *g->world_ranks);
        qsort(g->world_ranks, n_world_ranks, sizeof *g->world_ranks, hdx_cmp_int);
        g->n_world_ranks = n_world_ranks;
    }
    for (size_t i = 0; i < n; i++) {
        hdx_wf_rank *r = hdx_append((void **)&g->ranks, &g->n_ranks, sizeof *r);
        if (!r)
            return -ENOMEM;
        r->rank = r->last = waits[i].rank;
        r->kind = HDX_WF_COLLECTIVE;
        r->op = waits[i].op;
        r->pgroup = waits[i].pgroup;
        r->call = -1;
        r->lock_holder = HDX_UNKNOWN;
        r->moved_on_from = -1;
        r->root = r->depth = -1;
    }
    if (g->n_ranks)
        qsort(g->ranks, g->n_ranks, sizeof *g->ranks, cmp_rank);
    g->n_waiting = g->n_ranks;
    return build_graph(ev, g);
}
