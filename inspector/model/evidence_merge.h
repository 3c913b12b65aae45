/*
 * The merge of evidence from several inputs (hosts' snapshots, reports, traces) into one:
 * what `hangdx analyze` of many files, `hangdx slurm` of many nodes and a core file's
 * evidence join with. It needs nothing but the model.
 */
#ifndef HDX_EVIDENCE_MERGE_H
#define HDX_EVIDENCE_MERGE_H

#include "model/evidence.h"

/*
 * Move everything of src into dst, and leave src empty (the caller still frees it with
 * hdx_evidence_free). Both are the caller's; nothing of src is borrowed afterwards but
 * through dst (src's pool is absorbed into dst's). The merge is associative:
 *  - processes are appended. The same rank in two rank processes of
 *    different hosts is an error (-EEXIST) naming both (host and pid); src's
 *    is_rank_process is set first (hdx_mark_rank_processes), so launchers
 *    that carry a scheduler's task number do not count. The same pid on
 *    the same host: the one with threads (a snapshot) replaces one without
 *    (a trace's); two with threads are the same host given twice (-EEXIST);
 *  - locks with the same path are one lock (a shared build directory seen
 *    from several hosts): waiters are joined; src's facts join the lock's
 *    (hdx_lock.seen), to be judged later; without facts the recorded state
 *    is the strongest (held > stale > free) with its holder; a known creator wins;
 *  - process groups with the same name are one; the same name with other ranks
 *    is an error (-EEXIST);
 *  - notes are joined, each once;
 *  - job logs' facts are appended, and their ranks (hdx_log_rank), but for a rank that
 *    dst's logs tell of already: dst's stays;
 *  - an empty dst (no processes, locks, samples or host) takes src's host,
 *    time and sampling settings; otherwise host stays only when both agree,
 *    taken_at is the earliest, and samples, interval_ms and build_timeout_s
 *    are the smallest that any sampled input had (samples 0 = none).
 * Returns 0, or:
 *   -EINVAL  dst or src is NULL;
 *   -EEXIST  a conflict named above;
 *   -ENOMEM.
 * On an error dst and src are left as they were, but for an -ENOMEM while joining one
 * lock's facts from two inputs (late, after processes moved): both are then still valid
 * to free. *err (when err is not NULL) is set to NULL, or on -EEXIST to a heap message
 * for a person, which the caller frees. dst->live is never changed.
 */
int hdx_evidence_merge(hdx_evidence *dst, hdx_evidence *src, char **err);

#endif
