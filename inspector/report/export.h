/*
 * The exports of the stack tree and the waits-for graph, for other tools to draw
 * (docs/design.md "The stack tree and the exports"; `analyze --format` and `inspect --format`).
 * Each writes one whole document to f from the verdict (NULL: none) and the tree (report/tree.h).
 */
#ifndef HDX_EXPORT_H
#define HDX_EXPORT_H

#include <stdio.h>

#include "classify/classify.h"
#include "model/evidence.h"
#include "report/tree.h"

/*
 * speedscope's file format (https://www.speedscope.app/file-format-schema.json): one "sampled"
 * profile per equivalence class of t (the members whose stack ends at one branch: the same
 * key-thread stack), named "ranks RANGES (N ranks)" and, when they are culprits of v, "culprit";
 * each profile has one sample, its stack as indexes into shared.frames, outermost first, of
 * weight N (unit "none"). activeProfileIndex is the first class of culprits, else 0. Written
 * with cJSON. 0, -ENOMEM or -EIO.
 */
int hdx_export_speedscope(FILE *f, const hdx_verdict *v, const hdx_tree *t);

/*
 * Folded stacks, as flamegraph.pl reads them: one line per equivalence class of t, its frames
 * outermost first joined by ';' (hdx_tree_frame_label, a ';' in a name written as ','), a space
 * and the number of its members. 0 or -EIO.
 */
int hdx_export_collapsed(FILE *f, const hdx_tree *t);

/*
 * Graphviz: one digraph "hangdx" with two clusters. cluster_waits_for is v's waits-for graph
 * (classify/waitsfor.h), or, when v has none, the graph of ev built here (hdx_waitsfor_build:
 * every collective on the world group where no group was read): a node "rN" per rank that
 * waits or is a culprit of v (culprit_ranks), and per rank that one
 * of them waits for; a node "cN" per call in progress (a collective on a group, the rendezvous);
 * an edge rank -> call for each rank in a call, call -> rank for each member it waits for, and
 * rank -> rank for a send/recv waiting on its peer and a build-lock waiter waiting on the
 * holder. Culprits are filled and drawn with a double border, and so is a call every member
 * is in (a root). cluster_stack_tree is t: a node "tN" per branch (its members, then its frames),
 * an edge from each branch to its children, branches of culprits only filled. ev must be the
 * evidence v was classified from. 0, -ENOMEM or -EIO.
 */
int hdx_export_dot(FILE *f, const hdx_evidence *ev, const hdx_verdict *v, const hdx_tree *t);

#endif
