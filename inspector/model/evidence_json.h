/*
 * Evidence to JSON: the objects of hangdx.snapshot/2 and /3 (formats/snapshot.h describes the
 * format, and writes and reads the file) that a report's "processes" and "locks" carry
 * too, so that analyze of a report decides as the snapshot would. cJSON; no I/O.
 * Environment variables outside HDX_TRACE_ENV_NAMES are never written. A holder or
 * waiter with no host is written with the evidence's host.
 */
#ifndef HDX_EVIDENCE_JSON_H
#define HDX_EVIDENCE_JSON_H

#include "model/evidence.h"

struct cJSON;

/* One process with its threads, frames and locals, as in a snapshot and in a report's
 * "processes" (a report carries the same, so that analyze of a report decides as the
 * snapshot would). Caller frees with cJSON_Delete. NULL on ENOMEM. */
struct cJSON *hdx_snapshot_process_json(const hdx_process *p);

/*
 * The same object for cJSON_Print only, faster for many ranks: frames loaded from a
 * snapshot (pooled) are printed once per distinct frame and kept in c, and each
 * thread's "frames" and "python_frames" hold them as raw items, indented as cJSON_Print
 * of this process object (at the top level) would indent the frame objects; other
 * frames stay objects. cJSON_Print of the result is byte for byte cJSON_Print of
 * hdx_snapshot_process_json(p) (printed unformatted, or nested deeper, it would not
 * be). The result borrows texts from c: delete it before hdx_frame_text_cache_free.
 * c NULL: plain hdx_snapshot_process_json. The cache's keys are the frames' pointers:
 * use one cache while the evidence does not change, and free it then. It stops
 * growing at 64 MiB of text. NULL on ENOMEM.
 */
typedef struct hdx_frame_text_cache hdx_frame_text_cache;
hdx_frame_text_cache *hdx_frame_text_cache_new(void); /* NULL on ENOMEM */
void hdx_frame_text_cache_free(hdx_frame_text_cache *c); /* accepts NULL */
struct cJSON *hdx_snapshot_process_json_printed(const hdx_process *p, hdx_frame_text_cache *c);

/*
 * The stack classes of hangdx.report/2 (docs/formats.md "Reports"): each distinct thread
 * stack once, with the ranks whose processes have a thread in it, and the "strings" and
 * "frames" tables (as hangdx.snapshot/2's, but every frame's pc null: under ASLR each
 * process has its own pcs, and equal stacks of a job would not be one class).
 *  - hdx_stack_table_new: an empty table; free it with hdx_stack_table_free (accepts NULL).
 *    NULL with errno ENOMEM.
 *  - hdx_stack_table_class: the index of t's class (t borrowed, and kept: its frames must
 *    not change while s lives; its frames and python_frames, equal frame for equal frame,
 *    but for their pc), added when new; with count, t is one more
 *    thread of it, and rank (HDX_UNKNOWN: a process of no rank) one of its ranks (count 0:
 *    only the index). -1 on ENOMEM.
 *  - hdx_stack_table_count: each thread of p one more of its class (added when new), and p's
 *    rank one of its ranks, as hdx_stack_table_class with count. 0 or -ENOMEM.
 *  - hdx_stack_table_process_json: p as hdx_snapshot_process_json writes it, each thread's
 *    "frames" and "python_frames" replaced by "stack", its class's index. p's threads must
 *    have been counted (hdx_stack_table_count); s is then only read, so that threads may make
 *    the objects of different processes at once (each with its own cJSON arena, if any:
 *    model/json_arena.h). Caller frees with cJSON_Delete. NULL on ENOMEM, or for a thread
 *    not counted.
 *  - hdx_stack_table_take: add "strings", "frames" and "stacks" (each class
 *    {"frames", "python_frames", "ranks": hdx_json_ranges, "threads": count}) to the object o,
 *    whose ranges are spaced for o's print (formatted: cJSON_Print, else unformatted); the
 *    table gives them up (o owns them) and takes no more threads. 0 or -ENOMEM (then o may
 *    hold part of them).
 */
typedef struct hdx_stack_table hdx_stack_table;
hdx_stack_table *hdx_stack_table_new(void);
void hdx_stack_table_free(hdx_stack_table *s);
long hdx_stack_table_class(hdx_stack_table *s, const hdx_thread *t, int rank, int count);
int hdx_stack_table_count(hdx_stack_table *s, const hdx_process *p);
struct cJSON *hdx_stack_table_process_json(const hdx_stack_table *s, const hdx_process *p);

/*
 * A process object o as hdx_stack_table_process_json makes it (a report's with its "part"
 * added) as a row (docs/formats.md "Snapshots", /3): an array of its values in the order of
 * pkeys, its "threads" rows in the order of tkeys. pkeys and tkeys are arrays of strings;
 * empty, they get o's keys and its threads' (the first row of a document). Takes o (deleted).
 * NULL on ENOMEM, or when o's keys are not those of pkeys and tkeys.
 */
struct cJSON *hdx_process_row(struct cJSON *o, struct cJSON *pkeys, struct cJSON *tkeys);
int hdx_stack_table_take(hdx_stack_table *s, struct cJSON *o, int formatted);

/*
 * What the job logs told (ev->log_facts and ev->log_ranks, model/evidence.h) as
 * hangdx.report/2's "logs" (docs/formats.md "Reports"), so that analyze of a report judges the
 * logs again: {"strings": [...], "facts": [[pattern, proves, class, strength, rank, group_rank,
 * pg, default_pg, in_traceback, traceback, file, line, text, {field: value}]...], "ranks":
 * [{"rank", "file", "line", "last_line", "last_time", "last_pattern", "seqs": [[pg,
 * group_rank, unplaced, timed_out, enqueued, completed, op]...], "exit_cause", "root_cause",
 * "rank_from"}...]}; pattern, proves, class, pg and file (a fact's), file and last_pattern (a
 * rank's) are indexes into "strings", or null. Caller frees with cJSON_Delete. NULL (errno
 * ENOMEM) on failure.
 */
struct cJSON *hdx_logs_json(const hdx_evidence *ev);

/* One lock (docs/design.md's lock object, with exists, mtime and source) judged j (state,
 * kind, holder: classify's hdx_lock_judge; NULL: as l records them), as in a report's
 * "locks" and `hangdx locks --json`. l and j are borrowed. Caller frees with cJSON_Delete.
 * NULL on ENOMEM, or when l is NULL. */
struct cJSON *hdx_snapshot_lock_json(const hdx_lock *l, const hdx_lock_judgement *j);

/*
 * The whole of ev as a hangdx.snapshot/2 object, each lock with its facts and the state it
 * records (hdx_lock.state, holder_pid, unchecked: a caller that judged the locks sets them
 * first, for people and older readers; analyze judges again from the facts). The caller
 * frees it with cJSON_Delete. NULL (errno ENOMEM) on failure.
 */
struct cJSON *hdx_snapshot_json(const hdx_evidence *ev);

/*
 * The whole of ev as a hangdx.snapshot/3 object (docs/formats.md "Snapshots"): what a node
 * sends the Slurm collector, which grows with the node's distinct stacks, not with its
 * threads times their frames. As hdx_snapshot_json, but each thread names its stack's class
 * ("stack", as hangdx.report/2's: hdx_stack_table above, every frame's pc null), the classes
 * are in "stacks" with the "strings" and "frames" tables, and each process and thread is a
 * row: an array of the values of its /2 object, in the order of "process_keys" and
 * "thread_keys". The caller frees it with cJSON_Delete. NULL (errno ENOMEM, or EINVAL for ev
 * NULL) on failure.
 */
struct cJSON *hdx_snapshot_json_reduced(const hdx_evidence *ev);

#endif
