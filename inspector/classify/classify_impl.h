/*
 * Helpers shared by the classifier's files (classify.c: the driver and the
 * lock rules; classify_dist.c: the distributed rules; classify_logs.c: the log
 * rules; label.c: the label step). Internal; no I/O.
 */
#ifndef HDX_CLASSIFY_IMPL_H
#define HDX_CLASSIFY_IMPL_H

#include <stddef.h>

#include "classify/classify.h"

/* A process is busy when its CPU time grew by at least this share of the
 * sampling window, and by at least HDX_BUSY_CPU_MIN_MS (two clock ticks, so
 * one tick of noise never counts). Waiting ranks use well under 1% (a
 * FileBaton poller, a TCPStore waking every 10 ms); a busy process on a
 * loaded node may get only a few percent of a core. */
#define HDX_BUSY_CPU_SHARE 0.03
#define HDX_BUSY_CPU_MIN_MS 20.0

/* The largest world size the rules take from input (a process's WORLD_SIZE or a snapshot's
 * "world_size", a log's WORLD_SIZE line or its highest rank): the largest rank hangdx takes
 * (2^24 - 1, as the log reader and the snapshot reader bound ranks). The ranks of [0, world size)
 * that no input shows are ranges, in the waits-for graph (waitsfor.h) and wherever a rule walks
 * them, so a claim costs nothing beside the ranks read; a verdict names at most HDX_RANKS_NAMED of
 * them. A larger one is taken as unknown (label.c, with a note; the log rules then take the
 * world's members as the ranks the logs show). */
#define HDX_WORLD_SIZE_TAKEN ((1 << 24) - 1)

/* The most ranks that no input shows a verdict names one by one (its missing_ranks, and the
 * culprit ranks and facts taken from them): past it, missing_count tells how many there are
 * (the report's waits-for graph holds them all, as ranges), so that a world of 16777215 ranks
 * over three read keeps a verdict and its report small. */
#define HDX_RANKS_NAMED (1 << 16)

/* 1 when p made progress, else 0: CPU time across the samples, of its key thread when that
 * waits in a distributed call, else of its threads but the service ones; with one sample a
 * running thread; post-mortem as recorded. Needs the waits labelled (hdx_wait_classify); the label
 * step (label.c) stores it as p->progressing. */
int hdx_cls_progressing(const hdx_evidence *ev, const hdx_process *p);

/* Add v to a heap set of ints (once). 0 or -ENOMEM. Linear in *n: where the caller walks
 * values known to be distinct, hdx_cls_append_int keeps a job of 131 072 ranks linear. */
int hdx_cls_add_int(int **arr, size_t *n, int v);

/* Append v to a heap set of ints that does not hold it yet (the caller walks distinct values,
 * such as the job's ranks: one process each). 0 or -ENOMEM. */
int hdx_cls_append_int(int **arr, size_t *n, int v);

/* Add pid to v's culprit pids, unless it is unknown (a dump without pids). 0 or -ENOMEM. */
int hdx_cls_add_pid(hdx_verdict *v, int pid);

/* Add a note for a person to v->notes (printf format), unless v has it already. 0 or -ENOMEM. */
int hdx_cls_note(hdx_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The distributed rules (3–5 of classify.c): rendezvous_wait, p2p_mismatch,
 * collective_wait over the rank processes. Returns 1 when they decided v,
 * 0 when no rank waits in a distributed call, -ENOMEM.
 */
int hdx_cls_distributed(const hdx_evidence *ev, hdx_verdict *v);

/*
 * The log rules (classify_logs.c), run by hdx_classify after the lock and
 * stack rules. With may_decide (no stack rule decided), a decisive log rule
 * fills v and returns 1; so does a log that decides nothing when no thread
 * has frames (v says the logs decide nothing). Without may_decide it only sets
 * v->logs_alone to what the logs alone would decide, and returns 0. 0 also
 * when the logs decide nothing and stacks are there to judge; -ENOMEM.
 */
int hdx_cls_logs(const hdx_evidence *ev, hdx_verdict *v, int may_decide);

#endif
