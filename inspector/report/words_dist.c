/*
 * The words of the distributed findings (classify_dist.c): rendezvous, p2p, the
 * collective ones and the waits-for graph (docs/design.md "Findings"). The places
 * of the ranks the facts name (where each one is, what a root rank does) are read
 * here from the evidence and the verdict's graph; nothing here decides.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/groups.h"
#include "classify/waits.h"
#include "classify/waitsfor.h"
#include "model/util.h"
#include "report/words_impl.h"

/* The process of rank as the distributed rules see the ranks: the first live rank process
 * with it, in evidence order; NULL when none was inspected. Borrowed. */
static const hdx_process *rank_process(const hdx_evidence *ev, int rank)
{
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        if (p->is_rank_process && p->alive != 0 && p->rank == rank)
            return p;
    }
    return NULL;
}

static int waits_in(const hdx_thread *t, const char *wait)
{
    return t && t->wait && !strcmp(t->wait, wait);
}

/* Where rank (a live rank the facts name) is, into buf: "rank 2 (pid 7) is in load_dataset
 * (w.py:6)"; with other_collective, a rank in a collective is "in another collective,
 * broadcast". Returns the length it needed (as snprintf). */
static size_t tell_rank(const hdx_evidence *ev, int rank, int other_collective, char *buf, size_t size)
{
    const hdx_process *p = rank_process(ev, rank);
    const hdx_thread *t = hdx_key_thread(p);
    char where[256];
    if (other_collective && waits_in(t, HDX_WAIT_COLLECTIVE))
        return (size_t)snprintf(buf, size, "rank %d is in another collective, %s", rank,
                                t->wait_op ? t->wait_op : "a collective");
    if (p->frozen == 1)
        snprintf(where, sizeof where, "frozen (cgroup freezer)");
    else if (p->state == 'T' || p->state == 't' || waits_in(t, "stopped"))
        snprintf(where, sizeof where, "stopped (state T)");
    else {
        char at[240];
        hdx_thread_where(t, at, sizeof at);
        snprintf(where, sizeof where, "in %s", at);
    }
    char who[160];
    hdx_evidence_who(ev, p, 0, 0, who, sizeof who);
    int n = snprintf(buf, size, "%s is %s", who, where);
    return n < 0 ? 0 : (size_t)n;
}

/* ---- rendezvous ------------------------------------------------------------ */

/* v's missing ranks as ranges into buf, and, where the verdict names only the first
 * HDX_RANKS_NAMED of them (classify_impl.h), how many there are: "2-65537... (16777213 in all)". */
static void missing_text(const hdx_verdict *v, char *buf, size_t size)
{
    hdx_format_ranges_of(v->missing_ranks, v->n_missing_ranks, buf, size);
    size_t used = strlen(buf);
    if (v->missing_count > 0 && (size_t)v->missing_count > v->n_missing_ranks && used + 40 < size)
        snprintf(buf + used, size - used, "%s (%d in all)", strstr(buf, "...") ? "" : "...", v->missing_count);
}

static int words_rendezvous(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    char have[256], miss[256], what[120], store[200], missing[400] = "", elsewhere[1024] = "";
    size_t n_waiting = hdx_words_ranks(v, "waiting", have, sizeof have), used = 0;
    const hdx_fact *el = hdx_verdict_fact(v, "elsewhere");
    size_t n_elsewhere = el ? el->n_ints : 0;
    for (size_t i = 0; i < n_elsewhere && used + 2 < sizeof elsewhere; i++) {
        used += (size_t)snprintf(elsewhere + used, sizeof elsewhere - used, "; ");
        used += tell_rank(ev, el->ints[i], 0, elsewhere + used, sizeof elsewhere - used);
    }
    const char *op = hdx_verdict_text(v, "op"), *call = hdx_verdict_text(v, "call");
    const char *addr = hdx_verdict_text(v, "master_addr"), *port = hdx_verdict_text(v, "master_port");
    int nccl = hdx_verdict_num(v, "nccl", 0) == 1;
    op = op ? op : "init";
    if (nccl)
        snprintf(what, sizeof what, "ncclCommInitRank%s%s", call ? ", under " : "", call ? call : "");
    else
        snprintf(what, sizeof what, "%s", op);
    if (addr || port)
        snprintf(store, sizeof store, "%s, store %s:%s", what, addr ? addr : "?", port ? port : "?");
    else
        snprintf(store, sizeof store, "%s, store address unknown: no MASTER_ADDR/MASTER_PORT", what);
    missing_text(v, miss, sizeof miss);
    if (v->n_missing_ranks)
        snprintf(missing, sizeof missing, "; rank%s %s of world size %lld never arrived",
                 hdx_words_noun_s(v->n_missing_ranks), miss, hdx_verdict_num(v, "world_size", HDX_UNKNOWN));
    if (hdx_words_set(&w->summary, "rank%s %s wait%s in %s (%s)%s%s%s", hdx_words_noun_s(n_waiting), have,
                      hdx_words_verb_s(n_waiting),
                      nccl ? "NCCL communicator initialisation" : "process-group initialisation", store, missing,
                      elsewhere,
                      v->n_culprit_ranks ? ""
                                         : "; no rank is missing or elsewhere here: ranks on other hosts are not seen "
                                           "(give their snapshots)"))
        return -ENOMEM;
    if (!v->n_missing_ranks && n_elsewhere) /* every rank started: the fix is where they are */
        return hdx_words_set(&w->remedy, "look at why %s not join %s %s: %s",
                             n_elsewhere == 1 ? "that rank does" : "those ranks do", call ? call : op,
                             nccl && call && strcmp(call, "init_process_group")
                                 ? "(the group's first collective, which sets up the NCCL communicator)"
                                 : "with the others",
                             elsewhere + 2);
    if (!v->n_culprit_ranks)
        return hdx_words_set(&w->remedy, "give the snapshots of every host (hangdx analyze snap-*.json) to see "
                                         "which ranks never arrived");
    return hdx_words_set(&w->remedy,
                         "start the missing ranks, or fix the launch so that WORLD_SIZE (nodes × processes per "
                         "node, or TP×PP×DP) matches what is started; %sfor a rank that crashed at start-up",
                         n_elsewhere ? "look at the ranks that are elsewhere, and " : "look ");
}

/* ---- p2p without process groups -------------------------------------------- */

static const char *p2p_verb(int sends)
{
    return sends == 1 ? "sends to" : sends == 0 ? "receives from" : "exchanges with";
}

static int words_p2p(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    const hdx_fact *edges = hdx_verdict_fact(v, "edges"), *sends = hdx_verdict_fact(v, "sends");
    const hdx_fact *cycle = hdx_verdict_fact(v, "cycle");
    size_t n = edges && sends && cycle ? sends->n_ints : 0;
    long long unknown_peers = hdx_verdict_num(v, "unknown_peers", 0);
    char text[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof text; i++) {
        int from = edges->ints[2 * i], to = edges->ints[2 * i + 1], c = cycle->ints[i];
        int starts = c && (i == 0 || cycle->ints[i - 1] != c); /* the first edge of a cycle */
        if (starts)
            used += (size_t)snprintf(text + used, sizeof text - used, "%swaits-for cycle ", used ? "; " : "");
        if (used >= sizeof text)
            break;
        if (c) {
            used += (size_t)snprintf(text + used, sizeof text - used, "%srank %d %s rank %d", starts ? "" : ", ",
                                     from, p2p_verb(sends->ints[i]), to);
            continue;
        }
        const hdx_process *b = rank_process(ev, to);
        char where[256];
        hdx_thread_where(b ? hdx_key_thread(b) : NULL, where, sizeof where);
        used += (size_t)snprintf(text + used, sizeof text - used, "%srank %d %s rank %d, which %s%s", used ? "; " : "",
                                 from, p2p_verb(sends->ints[i]), to,
                                 b ? "never answers: it is in " : "is not among the inspected processes",
                                 b ? where : "");
    }
    if (!used && unknown_peers) /* no edge known: nothing says the transfers cannot match */
        return hdx_words_set(&w->summary, "%lld send/recv wait%s whose peer could not be read (no src/dst/peer "
                             "local: a batched op, or an input without locals): whether the transfers can match is "
                             "not known", unknown_peers, unknown_peers == 1 ? "" : "s") ||
                       hdx_words_set(&w->remedy, "read the peers: hangdx inspect the waiting ranks while the job "
                                     "hangs (it reads the src/dst locals of their Python frames), or give a "
                                     "snapshot taken that way")
                   ? -ENOMEM
                   : 0;
    if (unknown_peers && used < sizeof text)
        snprintf(text + used, sizeof text - used,
                 "%s%lld wait%s with an unknown peer (no src/dst/peer local could be read: a batched op, or an "
                 "input without locals)",
                 used ? "; " : "", unknown_peers, unknown_peers == 1 ? "" : "s");
    if (hdx_words_set(&w->summary, "pipeline send/recv that cannot match: %s", text))
        return -ENOMEM;
    return hdx_words_set(&w->remedy, "make each send meet a recv on its peer in the same order on both stages "
                                     "(both stages receiving first, or both sending first with blocking sends, "
                                     "deadlocks); check the pipeline schedule and the peer ranks");
}

/* ---- collectives without process groups ------------------------------------ */

static int words_collective(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    char waiting[256], miss[256];
    size_t n_in = hdx_words_ranks(v, "waiting", waiting, sizeof waiting);
    const char *op = hdx_words_text(v, "op", "a collective"), *ranks = n_in == 1 ? "rank" : "ranks";
    long long world_size = hdx_verdict_num(v, "world_size", HDX_UNKNOWN);
    int rc;
    switch (v->finding) {
    case HDX_FIND_COLLECTIVE_ELSEWHERE: {
        char culprits[1024] = "";
        size_t used = 0;
        for (size_t i = 0; i < v->n_culprit_ranks && used + 2 < sizeof culprits; i++) {
            if (used)
                used += (size_t)snprintf(culprits + used, sizeof culprits - used, "; ");
            used += tell_rank(ev, v->culprit_ranks[i], 1, culprits + used, sizeof culprits - used);
        }
        if (hdx_words_set(&w->summary, "rank%s %s wait%s in %s; %s%s", hdx_words_noun_s(n_in), waiting,
                          hdx_words_verb_s(n_in), op, culprits,
                          hdx_verdict_num(v, "busy", 0) ? " (still computing: it may only be slow)" : ""))
            return -ENOMEM;
        if (hdx_verdict_num(v, "locked", 0))
            return hdx_words_set(&w->remedy, "see why the culprit ranks wait on a build lock (hangdx inspect them)");
        break;
    }
    case HDX_FIND_COLLECTIVE_MISSING:
        missing_text(v, miss, sizeof miss);
        if (hdx_words_set(&w->summary, "rank%s %s wait%s in %s; rank%s %s of world size %lld %s not among the "
                                       "inspected processes (another host, or gone): inspect every rank's pid, "
                                       "the launcher's, or use --all, and give other hosts' snapshots",
                          hdx_words_noun_s(n_in), waiting, hdx_words_verb_s(n_in), op,
                          hdx_words_noun_s(v->n_missing_ranks), miss, world_size,
                          v->n_missing_ranks == 1 ? "is" : "are"))
            return -ENOMEM;
        break;
    default:
        if (v->finding == HDX_FIND_COLLECTIVE_GPU)
            rc = hdx_words_set(&w->summary, "%s %s (world size %lld, all here) wait%s in %s: the GPU work %s waits "
                                            "for (the collective's kernel, or one queued before it) does not finish",
                               ranks, waiting, world_size, hdx_words_verb_s(n_in), op, n_in == 1 ? "it" : "each");
        else if (v->finding == HDX_FIND_COLLECTIVE_STUCK)
            rc = hdx_words_set(&w->summary, "%s %s (world size %lld, all here) wait%s in %s and none is elsewhere: "
                                            "the network or a GPU may be stuck",
                               ranks, waiting, world_size, hdx_words_verb_s(n_in), op);
        else
            rc = hdx_words_set(&w->summary, "%s %s wait%s in %s and none is missing here: a rank on another "
                                            "host, the network or a GPU may be stuck",
                               ranks, waiting, hdx_words_verb_s(n_in), op);
        return rc ? rc
                  : hdx_words_set(&w->remedy,
                                  "%slook at the GPU: nvidia-smi (a GPU busy with a kernel that never ends), the "
                                  "kernels queued before the collective, NCCL_DEBUG=INFO for the collective's "
                                  "transport, and the network between nodes",
                                  v->finding == HDX_FIND_COLLECTIVE_UNSEEN
                                      ? "give every host's snapshot (hangdx analyze snap-*.json); then "
                                      : "");
    }
    return hdx_words_set(&w->remedy, "look at the culprit ranks where they are: a skipped or reordered collective, "
                                     "an uneven loop, or a rank stopped or stuck elsewhere");
}

/* ---- the waits-for graph (v->graph): process groups known ------------------ */

/* "rank 5 (TP 1 of TP group 4-5, PP stage 1, DP 1)", or "rank 5 (pid 7)" without roles; "ranks 3-99" for
 * a node of missing ranks. */
static void who_at(const hdx_evidence *ev, const hdx_wf_rank *r, char *buf, size_t size)
{
    char coords[256];
    if (r->last > r->rank) { /* a node of missing ranks: its range (waitsfor.h) */
        snprintf(buf, size, "ranks %d-%d", r->rank, r->last);
        return;
    }
    hdx_rank_coords(ev, r->rank, coords, sizeof coords);
    if (coords[0])
        snprintf(buf, size, "rank %d (%s)", r->rank, coords);
    else if (r->p)
        hdx_evidence_who(ev, r->p, 0, 0, buf, size);
    else
        snprintf(buf, size, "rank %d", r->rank);
}

/* "all_reduce", or "all_reduce #7" where the input recorded the call's sequence number (a
 * Flight Recorder dump), into buf. */
static const char *call_op(const hdx_waitsfor *g, long call, char *buf, size_t size)
{
    if (call < 0)
        return "a collective";
    const hdx_wf_call *c = &g->calls[call];
    if (c->seq == HDX_UNKNOWN)
        return c->op;
    snprintf(buf, size, "%s #%lld", c->op, c->seq);
    return buf;
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
        if (r->t && !r->t->n_frames && !r->t->wait) /* e.g. a Flight Recorder dump with nothing unfinished */
            snprintf(buf, size, "it is in no distributed call, and no stack shows where it is");
        else
            snprintf(buf, size, "it %s in %s",
                     r->t && r->t->wait && !strcmp(r->t->wait, "sleep") ? "sleeps" : "is blocked", where);
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
        snprintf(buf, size, "no process of %s is among those inspected: %s, or run%s on another host%s",
                 r->last > r->rank ? "them" : "it", r->last > r->rank ? "they died" : "it died",
                 r->last > r->rank ? "" : "s", g->world_size > 0 ? "" : " (world size unknown)");
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
    for (size_t x = 0; c && x < root->n_ranks && n < 64; x++)
        if (hdx_wf_call_waits_for(c, root->ranks[x]))
            in[n++] = root->ranks[x];
    hdx_format_ranges_of(in, n, list, sizeof list);
    fprintf(out, ", rank %d in %s on %s waits for %s %s", a->rank, a->op ? a->op : "a collective", gt,
            n == 1 ? "rank" : "ranks", list);
}

/* The summary of the first root of g, with what waits on it; into out. */
static int graph_summary(const hdx_evidence *ev, const hdx_verdict *v, FILE *out)
{
    const hdx_waitsfor *g = v->graph;
    const hdx_wf_root *root = &g->roots[0];
    const hdx_wf_rank *first = root->n_ranks ? hdx_waitsfor_rank(g, root->ranks[0]) : NULL;
    int pg = (int)hdx_verdict_num(v, "pgroup_index", HDX_UNKNOWN), tags = 0;
    char who[320], what[400], gt[256], list[256], ca[96], cb[96];
    hdx_pgroup_text(ev, pg, gt, sizeof gt);
    hdx_format_ranges_of(root->ranks, root->n_ranks, list, sizeof list);
    switch (root->kind) {
    case HDX_WF_ROOT_RANK:
        who_at(ev, first, who, sizeof who);
        doing(g, first, what, sizeof what);
        if (v->cls == HDX_CLASS_NOT_HUNG)
            fprintf(out, "a build is running: %s builds (%s) while the others wait for it", who, what);
        else if (v->cls == HDX_CLASS_COMPILE_STALL)
            fprintf(out, "%s holds up the job with a build that %s: %s", who,
                    hdx_verdict_num(v, "timed_out", 0) ? "has run past --build-timeout" : "makes no CPU progress", what);
        else if (root->call >= 0)
            fprintf(out, "%s never joined the %s of %s: %s", who, call_op(g, root->call, ca, sizeof ca), gt, what);
        else
            fprintf(out, "%s never answers the send/recv its peer%s wait%s in: %s", who,
                    hdx_words_noun_s(root->n_waiting), hdx_words_verb_s(root->n_waiting), what);
        break;
    case HDX_WF_ROOT_MOVED_ON:
        for (size_t k = 0; k < root->n_ranks; k++) {
            const hdx_wf_rank *r = hdx_waitsfor_rank(g, root->ranks[k]);
            char rg[256];
            who_at(ev, r, who, sizeof who);
            hdx_pgroup_text(ev, call_group(g, r->call), rg, sizeof rg);
            fprintf(out, "%s%s never joined the %s of %s: it went on to %s on %s", k ? "; " : "", who,
                    call_op(g, root->call, ca, sizeof ca), gt, call_op(g, r->call, cb, sizeof cb), rg);
        }
        break;
    case HDX_WF_ROOT_MISMATCH:
        fprintf(out, "the members of %s are in different collectives on it:", gt);
        for (size_t k = 0, told = 0; k < root->n_ranks; k++) {
            const hdx_wf_rank *r = hdx_waitsfor_rank(g, root->ranks[k]);
            if (r->kind == HDX_WF_COLLECTIVE && r->pgroup == pg)
                fprintf(out, "%s rank %d in %s%s%s%s", told++ ? "," : "", r->rank,
                        r->call >= 0 ? call_op(g, r->call, ca, sizeof ca) : r->op ? r->op : "a collective",
                        r->sig ? " (" : "", r->sig ? r->sig : "", r->sig ? ")" : "");
        }
        if (first && first->call != root->call && root->call >= 0) { /* the minority's */
            const char *sig = g->calls[root->call].sig;
            fprintf(out, ", while %zu of its ranks wait in %s%s%s%s", g->calls[root->call].n_in,
                    call_op(g, root->call, ca, sizeof ca), sig ? " (" : "", sig ? sig : "", sig ? ")" : "");
        }
        break;
    case HDX_WF_ROOT_CYCLE: {
        char *etext = NULL;
        size_t elen = 0;
        FILE *e = open_memstream(&etext, &elen);
        if (e) {
            for (size_t k = 0; k < root->n_ranks; k++)
                cycle_edge(e, g, hdx_waitsfor_rank(g, root->ranks[k]), root, &tags);
            fclose(e);
        }
        const char *each = etext && elen > 2 ? etext + 2 : ""; /* without the first ", " */
        if (root->p2p && tags)
            fprintf(out, "pipeline send/recv that cannot match: the tags differ: %s", each);
        else if (root->p2p)
            fprintf(out, "pipeline send/recv that cannot match: ranks %s wait on each other (a waits-for cycle: %s)",
                    list, each);
        else
            fprintf(out, "ranks %s wait on each other in collectives across groups, in opposite orders (a waits-for "
                         "cycle: %s)",
                    list, each);
        free(etext);
        break;
    }
    case HDX_WF_ROOT_CALL:
        fprintf(out, "ranks %s (all of %s) wait in %s and none is elsewhere: the network or a GPU may be stuck", list,
                gt, call_op(g, root->call, ca, sizeof ca));
        break;
    }
    if (chain_text(out, g, 0))
        return -ENOMEM;
    for (size_t i = 1; i < g->n_roots && i < 4; i++) {
        const hdx_wf_rank *x = g->roots[i].n_ranks ? hdx_waitsfor_rank(g, g->roots[i].ranks[0]) : NULL;
        if (x && g->roots[i].n_ranks == 1 && x->last > x->rank) /* a node of missing ranks */
            fprintf(out, "; also rooted at ranks %d-%d (missing)", x->rank, x->last);
        else
            fprintf(out, "; also rooted at rank%s %d%s", hdx_words_noun_s(g->roots[i].n_ranks),
                    g->roots[i].n_ranks ? g->roots[i].ranks[0] : -1, g->roots[i].n_ranks > 1 ? ",..." : "");
    }
    if (g->n_guessed)
        fprintf(out, " (the process group of %zu wait%s could not be read: taken as the world group)", g->n_guessed,
                hdx_words_noun_s(g->n_guessed));
    return 0;
}

static const char *graph_remedy(const hdx_verdict *v)
{
    switch (v->cls) {
    case HDX_CLASS_NOT_HUNG: return "wait for the build; hangdx calls it compile_stall after --build-timeout";
    case HDX_CLASS_COMPILE_STALL:
        return "look at the build's compiler: kill it and the build, then relaunch (a compiler killed by the OOM "
               "killer calls for a lower MAX_JOBS)";
    case HDX_CLASS_P2P_MISMATCH:
        return "make each send meet a recv on its peer, with the same tag and in the same order on both stages; check "
               "the pipeline schedule (the number of microbatches on each stage) and the peer ranks";
    default:
        switch (v->graph->roots[0].kind) {
        case HDX_WF_ROOT_CALL:
            return "look at the GPU: nvidia-smi, the kernels queued before the collective, NCCL_DEBUG=INFO, and the "
                   "network between nodes";
        case HDX_WF_ROOT_CYCLE: return "make every rank call the collectives of its groups in the same order";
        default:
            return "look at the culprit ranks where they are: a skipped or reordered collective of their group, "
                   "an uneven loop, or a rank stopped or stuck elsewhere";
        }
    }
}

static int words_graph(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    if (!v->graph || !v->graph->n_roots) /* not the evidence v was classified from */
        return 0;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return -ENOMEM;
    int rc = graph_summary(ev, v, out);
    if (fclose(out) || !text)
        rc = -ENOMEM;
    if (rc) {
        free(text);
        return rc;
    }
    free(w->summary);
    w->summary = text;
    return hdx_words_set(&w->remedy, "%s", graph_remedy(v));
}

int hdx_words_dist(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    int rc;
    switch (v->finding) {
    case HDX_FIND_RENDEZVOUS: rc = words_rendezvous(ev, v, w); break;
    case HDX_FIND_P2P: rc = words_p2p(ev, v, w); break;
    case HDX_FIND_COLLECTIVE_ELSEWHERE:
    case HDX_FIND_COLLECTIVE_MISSING:
    case HDX_FIND_COLLECTIVE_GPU:
    case HDX_FIND_COLLECTIVE_STUCK:
    case HDX_FIND_COLLECTIVE_UNSEEN: rc = words_collective(ev, v, w); break;
    case HDX_FIND_GRAPH: rc = words_graph(ev, v, w); break;
    default: return 0;
    }
    if (rc == 0 && !w->summary)
        return 0;
    if (!rc && hdx_verdict_num(v, "groups_unread", 0) &&
        hdx_words_set(&w->summary, "%s (process groups not read: %s)", w->summary,
                      v->finding == HDX_FIND_P2P ? "peers taken as global ranks"
                                                 : "every collective taken on the world group"))
        rc = -ENOMEM;
    return rc < 0 ? rc : 1;
}
