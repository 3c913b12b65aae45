/*
 * Stack groups across processes, as LLNL STAT does: every process's key
 * thread (the thread that waits on what the verdict is about, else the main
 * thread) gives one path from its outermost frame in; processes whose paths
 * are the same form one equivalence class. Classes come largest first, each
 * with the frame where its path leaves the largest class's.
 */
#ifndef HDX_GROUPS_H
#define HDX_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "model/evidence.h"

typedef struct hdx_group {
    const hdx_process *first; /* the first member (borrowed from the evidence) */
    const hdx_thread *key;    /* its key thread, whose stack all members share (borrowed) */
    int *ranks;               /* members' global ranks (only rank processes: is_rank_process) */
    size_t n_ranks;
    int *pids;                /* all members */
    size_t n_pids;
    /* Index into key->frames (innermost first) of the first frame, from the
     * outermost in, that differs from the largest class's path, or -1 for
     * the largest class itself and for paths that agree throughout. */
    long diverges_at;
} hdx_group;

/* 1 when a and b are the same place in the sense of the groups: the same kind and function
 * (NULL equal to NULL); Python frames also the same file and line. Else 0. */
int hdx_frame_same(const hdx_frame *a, const hdx_frame *b);

/* A hash of what hdx_frame_same compares, continued from h (HDX_FNV1A_OFFSET_BASIS to start):
 * frames that are the same give the same hash. Never fails. */
uint64_t hdx_frame_hash(uint64_t h, const hdx_frame *f);

/* The key thread of p: its first thread whose wait label is set and is not a
 * background one (hdx_wait_is_background), else its main thread; NULL without threads. */
const hdx_thread *hdx_key_thread(const hdx_process *p);

/*
 * Group the live (alive != 0) processes of ev that have threads, those of
 * other jobs (set_aside, hdx_keep_largest_job) left out. *out is a
 * heap array freed with hdx_groups_free. The evidence must outlive the
 * groups. O(processes × frames) with hashing. 0 or -ENOMEM.
 */
int hdx_groups_make(const hdx_evidence *ev, hdx_group **out, size_t *n);

/* Accepts NULL. */
void hdx_groups_free(hdx_group *g, size_t n);

#endif
