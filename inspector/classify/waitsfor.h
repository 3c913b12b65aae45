/*
 * The waits-for graph of a job (docs/design.md "The waits-for graph"): one node
 * per rank read (gone ones included), one per range of ranks that no input shows
 * (missing), and one per distributed call in progress (a collective on one
 * process group, or the rendezvous).
 *  - A rank in a collective on group G waits, through the call's node, for
 *    every member of G that is not in the same call on G; a member in another
 *    collective on G is a mismatch. Where the input recorded each call's sequence
 *    number and tensors (a Flight Recorder dump), the same call is also the same
 *    number and the same sizes and dtypes.
 *  - A rank in send/recv waits for its peer unless the peer is in the matching
 *    call (direction, peer and tag).
 *  - A rank in the rendezvous waits for the ranks of the world that are not.
 *  - A build-lock waiter waits for the rank that holds the lock.
 * The roots are the strongly connected components that wait for nothing
 * outside themselves and that someone waits on: a rank that waits for nothing
 * known (asleep, computing, building, stopped, in D state, gone, missing), a
 * call every member is in (it does not finish), or a cycle. In a cycle, a rank
 * that waits in a collective on a strictly larger group than the one a member
 * of the cycle waits for it on has moved on past that group's call: it alone
 * is the culprit.
 *
 * Pure: reads the evidence (labels set by hdx_evidence_label), no I/O.
 */
#ifndef HDX_WAITSFOR_H
#define HDX_WAITSFOR_H

#include <stddef.h>

#include "model/evidence.h"

enum hdx_wf_kind {
    HDX_WF_NONE = 0,   /* waits in no distributed call */
    HDX_WF_COLLECTIVE,
    HDX_WF_P2P,
    HDX_WF_RENDEZVOUS,
    HDX_WF_BUILD_LOCK,
};

/* What a root rank is doing instead of waiting. */
enum hdx_wf_state {
    HDX_WF_WAITING = 0, /* not a root: waits for someone */
    HDX_WF_ASLEEP,      /* in a sleep, or blocked elsewhere without CPU */
    HDX_WF_COMPUTING,   /* its CPU time grows */
    HDX_WF_BUILDING,    /* runs a build (ninja, compilers under it, or cpp_extension frames) */
    HDX_WF_STOPPED,     /* state T */
    HDX_WF_FROZEN,      /* its cgroup is frozen (the cgroup freezer: a suspended job) */
    HDX_WF_DSTATE,      /* uninterruptible sleep */
    HDX_WF_GONE,        /* its process exited */
    HDX_WF_MISSING,     /* no process of this rank was inspected */
    HDX_WF_UNKNOWN_PEER, /* waits, but for nobody known (a peer that could not be read) */
};

/* One point-to-point operation a rank waits on. */
typedef struct hdx_wf_op {
    int send;    /* 1 send, 0 recv */
    int peer;    /* global rank, or HDX_UNKNOWN (a recv from any source) */
    int tag;     /* HDX_UNKNOWN when not read */
    int matched; /* 1 the peer is in the matching call */
    int peer_tag; /* the tag of the peer's call in the other direction when only the tags differ, else HDX_UNKNOWN */
} hdx_wf_op;

#define HDX_WF_MAX_OPS 4

/* Ranks lo..hi, both in: a set of ranks is held as sorted, disjoint ranges of them, so that a
 * world that claims millions of ranks costs one range, not a node or an entry per rank
 * (docs/design.md "The waits-for graph"). */
typedef struct hdx_wf_range {
    int lo, hi;
} hdx_wf_range;

typedef struct hdx_wf_rank {
    int rank;               /* its (first) rank */
    int last;               /* its last rank: a node of missing ranks (p NULL, no input shows any of
                               them) holds the range rank..last; rank itself for every other node */
    const hdx_process *p;   /* borrowed; NULL when missing */
    const hdx_thread *t;    /* its key thread, or NULL */
    enum hdx_wf_kind kind;
    const char *op;         /* the call: "all_gather", "recv", "_communicate" (borrowed), or NULL */
    int pgroup;             /* index in ev->pgroups of the call's group, HDX_UNKNOWN */
    int group_guessed;      /* 1 when the group could not be read and the default group was taken */
    long long seq;          /* the call's sequence number on its group where the input recorded it
                               (a Flight Recorder dump: hdx_thread.wait_seq), HDX_UNKNOWN */
    const char *sig;        /* its sizes and dtypes, recorded the same way (borrowed), or NULL */
    long call;              /* index in calls (collective, rendezvous), -1 */
    hdx_wf_op ops[HDX_WF_MAX_OPS]; /* p2p */
    size_t n_ops;
    int lock_holder;        /* build lock: the holder's rank, HDX_UNKNOWN */
    enum hdx_wf_state state; /* set for the ranks of the roots */
    int working;            /* root: it computes, or its build's processes use CPU */
    const hdx_process *tool; /* BUILDING: its oldest live build tool (ninja, a compiler), or NULL */
    int culprit;            /* 1 a culprit (a root, or the one that moved on in a cycle) */
    int moved_on_from;      /* culprit that moved on: the call (index in calls) it left behind, -1 */
    int root;               /* index of the root it belongs to or leads to first (BFS), -1 none */
    int depth;              /* hops from that root (0: in it), -1 */
} hdx_wf_rank;

typedef struct hdx_wf_call {
    enum hdx_wf_kind kind;  /* collective or rendezvous */
    const char *op;         /* borrowed */
    int pgroup;             /* HDX_UNKNOWN: the world taken as the group */
    long long seq;          /* its sequence number on the group, HDX_UNKNOWN: ranks at other numbers
                               are in other calls */
    const char *sig;        /* its sizes and dtypes (borrowed), or NULL: ranks whose tensors differ
                               are in other calls, a mismatch */
    size_t n_in;            /* ranks in it */
    hdx_wf_range *absent;   /* the members it waits for, as ranges (heap), ascending, disjoint and
                               apart (no two adjacent) */
    size_t n_absent;        /* ranges in absent */
    size_t n_absent_ranks;  /* ranks in them */
    size_t n_mismatch;      /* of those, members in another collective on the same group */
    size_t *node_upto;      /* (heap, n_absent + 1) node_upto[j]: the graph's nodes that absent[0..j)
                               cover (each node lies wholly inside one range or outside all);
                               read through hdx_wf_call_nodes and hdx_wf_call_node */
} hdx_wf_call;

enum hdx_wf_root_kind {
    HDX_WF_ROOT_RANK,      /* one rank that waits for nothing known */
    HDX_WF_ROOT_CALL,      /* a call every member is in, which does not finish */
    HDX_WF_ROOT_CYCLE,     /* ranks that wait on each other */
    HDX_WF_ROOT_MISMATCH,  /* members of one group in different collectives on it */
    HDX_WF_ROOT_MOVED_ON,  /* a cycle whose culprit left a call of a smaller group behind */
};

typedef struct hdx_wf_root {
    enum hdx_wf_root_kind kind;
    int *ranks;            /* the first rank of each node of the component (heap), ascending; a
                              ROOT_RANK of missing ranks holds one, the node's rank (its range ends
                              at hdx_waitsfor_rank(g, ranks[0])->last) */
    size_t n_ranks;
    long call;             /* ROOT_CALL: the call; else the call through which it is waited on, -1 */
    int p2p;               /* 1 when a p2p wait is on it (cycle) or the only waits into it are p2p */
    int rendezvous;        /* 1 when a rendezvous waits on it */
    size_t n_waiting;      /* ranks that wait on it, directly or not */
} hdx_wf_root;

typedef struct hdx_waitsfor {
    const hdx_evidence *ev;
    hdx_wf_rank *ranks;    /* the rank nodes by rank, ascending and disjoint: one per rank a process
                              shows, one per range of missing ranks (rank..last; split where a call's
                              absent ranges begin or end), so their count grows with the ranks read
                              and the calls, never with a claimed world size */
    size_t n_ranks;        /* nodes in ranks (not ranks: a node of missing ranks holds many) */
    hdx_wf_call *calls;
    size_t n_calls;
    hdx_wf_root *roots;    /* most telling first: rendezvous, cycles and mismatches, ranks, calls */
    size_t n_roots;
    int world_size;        /* HDX_UNKNOWN; at most HDX_WORLD_SIZE_TAKEN (classify_impl.h) */
    int *world_ranks;      /* with world_size unknown, the world's members known (heap, ascending), or NULL */
    size_t n_world_ranks;
    size_t n_waiting;      /* ranks in a distributed wait */
    size_t n_guessed;      /* waits whose group was not read */
} hdx_waitsfor;

/*
 * Build the graph over the rank processes of ev (is_rank_process, not set aside;
 * the first process of each rank) and find its roots. Needs ev->pgroups for the
 * groups (without them every collective is taken on the world, and n_guessed says
 * so). The graph borrows from ev, which must outlive it. *g is filled (the
 * caller frees it with hdx_waitsfor_free, also on failure). O((ranks + group
 * members + calls · ranks) · log ranks): the ranks of a world no process shows are ranges, one
 * node each, whatever the world size claims. Returns 0 or -ENOMEM.
 */
int hdx_waitsfor_build(const hdx_evidence *ev, hdx_waitsfor *g);

/* One rank's wait as the job's logs tell it (classify_logs.c, from the NCCL work counters):
 * in a collective on a process group. */
typedef struct hdx_wf_wait {
    int rank;       /* global rank */
    const char *op; /* the call, e.g. "ALLREDUCE" (borrowed), or NULL */
    int pgroup;     /* index in ev->pgroups of its group, HDX_UNKNOWN: the world of world_size ranks */
} hdx_wf_wait;

/*
 * The same graph built from waits[0..n) instead of ev's processes: each wait's rank is in the
 * collective on its group; a rank without a wait (a member absent from a call) waits for nothing
 * known, and is a root with state HDX_WF_MISSING (no process was inspected; the members no wait
 * names are ranges, one node and one root each). Each rank is given at most once. world_size
 * (HDX_UNKNOWN when not known; at most HDX_WORLD_SIZE_TAKEN, classify_impl.h, are taken) gives
 * the members of the world group, [0, world_size), as one range; when it is unknown,
 * world_ranks[0..n_world_ranks) (copied; NULL when none are known) are its members. Memory and
 * work grow with n and the groups' members, not with world_size. The graph borrows from ev and
 * waits' op strings, which must outlive it; *g is filled (freed with hdx_waitsfor_free, also on
 * failure). Returns 0 or -ENOMEM.
 */
int hdx_waitsfor_build_waits(const hdx_evidence *ev, const hdx_wf_wait *waits, size_t n, int world_size,
                             const int *world_ranks, size_t n_world_ranks, hdx_waitsfor *g);

/* Release what g owns and zero it. Accepts NULL. */
void hdx_waitsfor_free(hdx_waitsfor *g);

/* The node that holds rank (its own, or the range of missing ranks it is in; borrowed from g),
 * or NULL when the graph has none. O(log n). */
const hdx_wf_rank *hdx_waitsfor_rank(const hdx_waitsfor *g, int rank);

/* How many nodes call c of g waits for: the nodes its absent ranges cover (a node of missing
 * ranks counts once, however many ranks it holds; c->n_absent_ranks counts ranks). O(1). */
size_t hdx_wf_call_nodes(const hdx_wf_call *c);

/* 1 when call c waits for rank (among its absent ranges), else 0. O(log c->n_absent). */
int hdx_wf_call_waits_for(const hdx_wf_call *c, int rank);

/* The k-th node (k < hdx_wf_call_nodes(c)) that call c of g waits for, by rank ascending;
 * borrowed from g. O(log n). */
const hdx_wf_rank *hdx_wf_call_node(const hdx_waitsfor *g, const hdx_wf_call *c, size_t k);

/* "collective", "p2p", "rendezvous", "build_lock" or "none". */
const char *hdx_wf_kind_name(enum hdx_wf_kind k);

/* "asleep", "computing", ... for a root rank's state; "waiting" otherwise. */
const char *hdx_wf_state_name(enum hdx_wf_state s);

#endif
