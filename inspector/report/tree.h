/*
 * The merged stack tree of a job (docs/design.md "The stack tree and the exports"), as LLNL
 * STAT draws it: the key thread of each rank (classify/groups.h hdx_key_thread: the thread the
 * classifier judged by) gives one path of calls from its outermost frame in, and the paths are
 * merged on their common prefixes. Each branch of the tree is a run of frames that the same
 * ranks share, with those ranks; a branch ends where its ranks part (or where some of them
 * stop). The text report, the exports (report/export.h) and any later view read the same tree.
 *
 * Built from the stack groups (hdx_groups_make: one hashing pass over the processes) by
 * inserting each group's path into a trie whose children are found through one hash index
 * keyed by (parent, frame): O(ranks × depth) in all, never a comparison of every pair.
 *
 * Frames are the same as for the groups (hdx_frame_same): the same kind and function, and for
 * Python frames the same file and line.
 */
#ifndef HDX_TREE_H
#define HDX_TREE_H

#include <stddef.h>

#include "classify/classify.h"
#include "model/evidence.h"

/* The text report shows the tree without --tree when the job has more ranks than this. */
#define HDX_TREE_AUTO_RANKS 8

typedef struct hdx_tree_branch {
    const hdx_frame **frames; /* the frames of the branch, outermost first: the array is the tree's,
                                 each frame borrowed from the evidence. The root may have none */
    size_t n_frames;
    int *members;             /* the ranks whose path runs through the branch (pids when the tree is
                                 by_pid), ascending, each once; owned by the tree */
    size_t n_members;
    int *ends;                /* of those, the ones whose stack ends at the branch's last frame
                                 (ascending; a leaf's ends are all its members); owned */
    size_t n_ends;
    size_t n_culprits;        /* members that are culprits of the verdict (culprit_ranks, or
                                 culprit_pids when by_pid) */
    size_t n_culprit_ends;    /* of the ends, those that are culprits */
    long parent;              /* index of the parent branch, -1 for the root */
    size_t *children;         /* indexes of the child branches, most members first, then the one
                                 with the lowest member first; owned */
    size_t n_children;
    size_t level;             /* branches above it: 0 for the root */
} hdx_tree_branch;

typedef struct hdx_tree {
    hdx_tree_branch *branches; /* depth first, parents before their children, children in their
                                  order: branches[0] is the root, whose members are every member */
    size_t n_branches;         /* 0 when no member has a stack */
    int by_pid;                /* 1: no process is a rank process, the members are the processes' pids */
} hdx_tree;

/*
 * Build the tree of ev's live processes that have threads (those hdx_groups_make groups): the
 * rank processes by rank, or, when there is no rank process, every such process by pid. v (may
 * be NULL) gives the culprits counted in n_culprits. *t is filled; the caller frees it with
 * hdx_tree_free, also on failure. The tree borrows frames from ev, which must outlive it.
 * Returns 0 or -ENOMEM.
 */
int hdx_tree_build(const hdx_evidence *ev, const hdx_verdict *v, hdx_tree *t);

/*
 * The whole stack of branch b of t: its frames and those of every branch above it, outermost
 * first, as a heap array of borrowed frames in *out (the caller frees the array; NULL when
 * there are none) and their number in *n. 0, or -ENOMEM (*out NULL).
 */
int hdx_tree_path(const hdx_tree *t, size_t b, const hdx_frame ***out, size_t *n);

/* Release what t owns and zero it. Accepts NULL. */
void hdx_tree_free(hdx_tree *t);

/*
 * The tree's name of frame f, into buf (size bytes, NUL-terminated, cut short when it does not
 * fit): a Python frame "function (file.py:line)" with the file's last component, a native one
 * "function [module]" with the module's last component ("??" for a function without a symbol;
 * no "[...]" when the module is unknown). The text is the process's: escape it before printing
 * it to a terminal (hdx_put_text). Returns buf.
 */
const char *hdx_tree_frame_label(const hdx_frame *f, char *buf, size_t size);

/* "ranks" or "rank" (pids: "processes" or "process") for n members of t. */
const char *hdx_tree_members_noun(const hdx_tree *t, size_t n);

#endif
