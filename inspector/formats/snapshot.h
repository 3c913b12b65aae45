/*
 * hangdx.snapshot/2: the evidence of one host on disk (docs/design.md "Formats"),
 * written by `hangdx snapshot` and read back by `hangdx analyze`, which also
 * reads hangdx.snapshot/1 (the earlier format: users' saved files) and
 * hangdx.report/2 and /1 objects through the same loader (their processes and locks
 * carry nearly the same fields; docs/formats.md "Reports"). cJSON for everything.
 *
 * The object (every key always present; unknown values are null):
 *   { "schema": "hangdx.snapshot/2", "host", "taken_at": RFC 3339 with ns,
 *     "samples", "interval_ms", "build_timeout_s",
 *     "strings": [ "..." ],      every function, file and module name of the
 *                                frames, once each (in order of first use);
 *     "frames": [ entry... ],    every distinct frame, once (in order of first use):
 *        entry = [kind, function, file, line, module, offset, pc, locals]
 *          kind      0 native, 1 python;
 *          function, file, module: an index into "strings", or null;
 *          line      the source line, 0 when unknown;
 *          offset, pc: integers (pc relative to the module's load bias, and the
 *                    absolute pc), or "0x.." text when beyond 2^53;
 *          locals    null, or {name: value} as a /1 frame's "locals";
 *     "processes": [ { "pid", "ppid", "host", "rank", "local_rank", "world_size",
 *                      "cmdline": [...], "env": {allowed names only}, "exe", "cwd",
 *                      "state", "start_ticks", "age_s", "cpu_ms_first", "cpu_ms",
 *                      "window_ms", "progressing", "stack_changed", "asked" (given by
 *                      PID: its job is judged; absent: false), "stopped_us",
 *                      "max_stop_us", "alive",
 *                      "read_error" (positive errno or null), "python",
 *                      "threads": [ { "tid", "name", "state", "wchan", "syscall"
 *                                     (name, "running" or null), "syscall_nr",
 *                                     "syscall_args": ["0x..." x6], "cpu_ms",
 *                                     "stack_error", "polled_path", "wait", "wait_op",
 *                                     "peer", "wait_frame" (these three and "wait"
 *                                     are classify's; a snapshot has them null),
 *                                     "frames": [index into "frames"...] | null,
 *                                     "unmerged",
 *                                     "python_frames": [index...] | null } ] } ],
 *     "locks": [ { "path", "kind", "state", "exists", "mtime", "holder_pid",
 *                  "holder_host", "created_by": {"pid","rank","alive","at"} | null,
 *                  "source",
 *                  "waiters": [ {"pid","tid","rank","since","how","host"} ] } ],
 *     "notes": [ "..." ] }
 *   A local is a JSON null, bool, number or string; an object of another type
 *   is {"type": name}; an int beyond ±2^53 is {"int": "decimal"}; a float that
 *   a JSON number would not give back exactly (integral, inf, nan) is
 *   {"float": "repr"}. Native frames keep module and offset, with the symbols
 *   already resolved on the node that took the snapshot.
 *
 * Why tables: the ranks of a host run the same code, so their stacks repeat
 * the same frames, and a frame object repeats its names. The synthetic 8-rank
 * hosts of scripts/benchmarks/gen-synthetic-job (10 threads × 40 frames each) take 49 KB each
 * as /2 against 634 KB as /1, and load without a string copy per frame (analyze
 * of 8192 ranks: BENCHMARKS.md).
 *
 * hangdx.snapshot/1 is the same object without "strings" and "frames", with
 * each thread's "frames" and "python_frames" as arrays of frame objects:
 *   frame = { "kind", "function", "file", "line", "module", "offset": "0x..",
 *             "pc": "0x..", "locals": {name: value} | null }
 * and without "holder_host" and waiters' "host" (the snapshot's own host).
 * Reports hangdx.report/1 (and /2 --full) write their processes' frames as these objects;
 * a /2 report's thread names its stack class ("stack", an index into "stacks", each class's
 * "frames" and "python_frames" indexes into the report's "frames" table, as /2's), and its
 * "logs" carry the job logs' facts and ranks (evidence_json.h, hdx_logs_json).
 *
 * hangdx.snapshot/3, what `snapshot --frames` sends the Slurm collector
 * (hdx_snapshot_json_reduced; docs/formats.md "Snapshots"), is /2 with each thread's stack
 * named by its class ("stack": an index into "stacks", as a /2 report's; pc null), and each
 * process and thread a row: an array of its /2 object's values in the order of
 * "process_keys" and "thread_keys". The loader expands it into the same evidence as /2's
 * (but the pcs).
 *
 * Frames read by the loader are pooled (evidence.h, hdx_frame.pooled): their
 * strings and locals are interned in a pool, one copy per input, or one per loader thread
 * when the inputs are loaded with a share (hdx_snapshot_share).
 *
 * Evidence → JSON → evidence → JSON gives the same JSON. Environment variables
 * outside HDX_TRACE_ENV_NAMES are never written, and are dropped on reading.
 * A holder or waiter with no host is written with the evidence's host.
 *
 * Stage rule: formats may include model, native, python. (docs/design.md "Stages")
 */
#ifndef HDX_SNAPSHOT_H
#define HDX_SNAPSHOT_H

#include <stddef.h>

#include "model/evidence.h"
#include "model/evidence_json.h"  /* the writer: hdx_snapshot_json, hdx_snapshot_process_json ... */
#include "model/evidence_merge.h" /* hdx_evidence_merge, which the loader joins each input with */

struct cJSON;

/* Limits of the reader: an input beyond them is refused with a message. */
#define HDX_SNAPSHOT_MAX_BYTES (256u * 1024 * 1024) /* file size */
#define HDX_SNAPSHOT_MAX_ITEMS 1000000               /* entries of any one array or object */
#define HDX_SNAPSHOT_MAX_DEPTH 64                    /* JSON nesting */

/* What a JSON text is, from its "schema". */
enum hdx_snapshot_kind {
    HDX_INPUT_NOT_JSON = 0,  /* not a JSON object with a "schema" string */
    HDX_INPUT_SNAPSHOT,      /* hangdx.snapshot/3, /2 or /1 */
    HDX_INPUT_REPORT,        /* hangdx.report/2 or /1 */
    HDX_INPUT_OTHER_SCHEMA,  /* a JSON object with another or no "schema" in its first 4 KiB */
};

/*
 * What the documents loaded one after another in one thread share (snapshot_read.c): the
 * pool their frames borrow from (evidence.h, hdx_frame.pooled and hdx_thread.shared_frames),
 * with their strings, locals objects and stack classes' frames interned across documents —
 * the hosts of a job repeat them, so 16 384 hosts' snapshots keep one copy each, not one per
 * host (docs/design.md "Loading many files").
 *  - hdx_snapshot_share_new: an empty share. NULL on ENOMEM.
 *  - hdx_snapshot_share_end: hands what the share holds to keep's pool (keep->pool made from
 *    it when keep has none), which every evidence loaded with the share must have been merged
 *    into, and frees the share. keep NULL frees it all: only when no evidence loaded with it
 *    is left. Accepts NULL. Never fails.
 * Not thread-safe: one thread at a time loads with a share.
 */
typedef struct hdx_snapshot_share hdx_snapshot_share;
hdx_snapshot_share *hdx_snapshot_share_new(void);
void hdx_snapshot_share_end(hdx_snapshot_share *s, hdx_evidence *keep);

/* ---- the file (snapshot_file.c) ------------------------------------------------- */

/*
 * Write hdx_snapshot_json(ev) to path (created or truncated; written to a
 * temporary file in the same directory and renamed, so a reader never sees
 * half a snapshot), or to stdout when path is NULL or "-". ev is borrowed.
 * Returns 0, or -EINVAL (ev NULL), -ENOMEM, -EIO (a short write), or the
 * negative errno of fopen, fclose or rename; on error the temporary file is gone
 * and path is as it was.
 */
int hdx_snapshot_write(const hdx_evidence *ev, const char *path);

/*
 * hdx_snapshot_from_json (below) of JSON text of len bytes (need not be
 * NUL-terminated; borrowed), parsed in this thread's cJSON arena (json_arena.h):
 * nothing of the parsed tree stays in ev. Returns what hdx_snapshot_from_json
 * does, and also -EINVAL (text or ev NULL; no message), -EFBIG (over
 * HDX_SNAPSHOT_MAX_BYTES) or -EBADMSG (not JSON, or cut short), with a message in *err.
 */
int hdx_snapshot_load_text(const char *text, size_t len, const char *name, hdx_evidence *ev, char **err);
/* The same with share (NULL: one of its own, ended into ev): ev's new frames borrow from
 * share's pool, so share must end into ev or into what ev is merged into. */
int hdx_snapshot_load_text_shared(const char *text, size_t len, const char *name, hdx_evidence *ev,
                                  hdx_snapshot_share *share, char **err);

/*
 * The same from the file at path (a regular file of at most HDX_SNAPSHOT_MAX_BYTES),
 * which names the input in messages. Returns what hdx_snapshot_load_text does, and
 * also the negative errno of open or fstat, -EINVAL (path or ev NULL, or not a
 * regular file) or -EFBIG, each with its message in *err (heap, the caller's; NULL
 * on success and on -EINVAL for NULL arguments).
 */
int hdx_snapshot_load(const char *path, hdx_evidence *ev, char **err);
/* The same with share, as hdx_snapshot_load_text_shared. */
int hdx_snapshot_load_shared(const char *path, hdx_evidence *ev, hdx_snapshot_share *share, char **err);

/* ---- what a file is (snapshot_sniff.c) ---------------------------------------- */

/*
 * Which kind of input the file at path is, from its first 4 KiB: looks for
 * "schema" without parsing the whole file. Never fails: unreadable content,
 * or content that does not start with '{', is HDX_INPUT_NOT_JSON.
 */
enum hdx_snapshot_kind hdx_snapshot_sniff(const char *path);
/* The same from a file's first n bytes (head; of which the first 4 KiB are looked at). */
enum hdx_snapshot_kind hdx_snapshot_sniff_head(const char *head, size_t n);

/* ---- the reader (snapshot_read.c) -------------------------------------------- */

/*
 * Parse a hangdx.snapshot/3, /2 or /1, or a hangdx.report/2 or /1 object held in root
 * (borrowed: nothing of it stays in ev), into an evidence of its own, and merge
 * that into ev (hdx_evidence_merge). `name` names the input in messages (a file
 * name; NULL: "input"). On error ev is left as it was, and *err (when err is not
 * NULL) gets a heap message for a person naming the input, which the caller frees;
 * on success *err is NULL.
 * Returns 0, or:
 *   -EINVAL           ev is NULL (no message);
 *   -EPROTONOSUPPORT  an unknown schema or version;
 *   -EBADMSG          a malformed object (wrong types, bad values) or beyond
 *                     the reader's limits;
 *   -EEXIST           the merge found the same rank on two hosts, the same process
 *                     twice, or a process group with other ranks;
 *   -ENOMEM.
 * Missing optional fields are taken as unknown. A report's "verdict", "waits_for",
 * "groups" and "ranks" are ignored: analyze classifies again.
 */
int hdx_snapshot_from_json(const struct cJSON *root, const char *name, hdx_evidence *ev, char **err);
/* The same with share, as hdx_snapshot_load_text_shared. */
int hdx_snapshot_from_json_shared(const struct cJSON *root, const char *name, hdx_evidence *ev,
                                  hdx_snapshot_share *share, char **err);

/* Parse an RFC 3339 time ("2026-11-29T18:40:27Z", fractions and offsets
 * allowed) into *ns, ns since the epoch. 0, or -EINVAL (s or ns NULL, not such
 * a time, or one after 2262); *ns is set on success only. */
int hdx_snapshot_parse_time(const char *s, int64_t *ns);

/* ---- many files at once (snapshot_batch.c) ------------------------------------- */

/* One document of a file: a snapshot or report file, or one node's snapshot of a frames file
 * (frames.h, `hangdx snapshot --frames` output). */
typedef struct hdx_loaded_doc {
    char *name;       /* heap: the file's path; "PATH (ID)" for a node of a frames file */
    hdx_evidence *ev; /* heap, the loaded evidence (the caller's once taken); NULL unless rc is 0 */
    int rc;           /* 0 loaded, or hdx_snapshot_load's negative errno (with err) */
    char *err;        /* heap message when rc < 0 and the loader gave one, else NULL */
    int incomplete;   /* a frames node not loaded: 1 its frames end early (no end line), 2 they
                         came out of order or disagree with their end line; else 0 */
} hdx_loaded_doc;

/* What one file gave: its documents, or why it could not be read at all. */
typedef struct hdx_loaded_file {
    int rc;               /* 0, or a frames file's hdx_frames_read_file error (with err) */
    char *err;            /* heap, or NULL */
    hdx_loaded_doc *docs; /* heap, in the file's order (a snapshot file: one) */
    size_t n;
} hdx_loaded_file;

/*
 * Load the file at path into out (zeroed first): a snapshot or report file (frames 0) as one
 * document, or every node's snapshot of a frames file (frames 1), each into an evidence of
 * its own, with share (NULL: each document one of its own; else as
 * hdx_snapshot_load_text_shared). A document that fails keeps its error in its entry. Returns
 * out->rc, or -ENOMEM when the entries themselves could not be made. Free out with
 * hdx_loaded_file_clear.
 */
int hdx_loaded_file_load(const char *path, int frames, hdx_snapshot_share *share, hdx_loaded_file *out);

/* Free what f holds (evidences not taken too) and zero it. NULL is fine. */
void hdx_loaded_file_clear(hdx_loaded_file *f);

/*
 * Load many files at once with hdx_loaded_file_load, on up to `threads` threads, while the
 * caller goes on finding which files to load (the merge stays the caller's, in its order):
 *  - hdx_snapshot_batch_new: a batch for up to cap files, to load on up to `threads` threads,
 *    as many as the files added once there are two (one file gains nothing from a thread).
 *    NULL with errno ENOMEM. The caller frees it with hdx_snapshot_batch_free.
 *  - hdx_snapshot_batch_add: path (borrowed: it must outlive the batch), a frames file when
 *    frames, to load next: a free thread starts on it at once. Its index in the batch, or
 *    -EINVAL when b is NULL, closed or full.
 *  - hdx_snapshot_batch_close: no more files; the threads end when the last is loaded.
 *  - hdx_snapshot_batch_take: waits for file i and moves what it gave into *out (the
 *    caller's, freed with hdx_loaded_file_clear). 0, -EINVAL when b is NULL or i is not a
 *    file added or file i was taken already, or -ENOMEM. Each file is taken once. Fewer
 *    threads than asked (none at all included) only make take() load in the caller's thread.
 *  - hdx_snapshot_batch_free: stops the threads (files not started are never loaded),
 *    frees what was not taken, and ends the threads' shares into keep
 *    (hdx_snapshot_share_end): the evidences taken borrow from them, so keep is what they
 *    were merged into (NULL: none of them is left). Accepts NULL.
 */
typedef struct hdx_snapshot_batch hdx_snapshot_batch;
hdx_snapshot_batch *hdx_snapshot_batch_new(size_t cap, int threads);
long hdx_snapshot_batch_add(hdx_snapshot_batch *b, const char *path, int frames);
void hdx_snapshot_batch_close(hdx_snapshot_batch *b);
int hdx_snapshot_batch_take(hdx_snapshot_batch *b, size_t i, hdx_loaded_file *out);
void hdx_snapshot_batch_free(hdx_snapshot_batch *b, hdx_evidence *keep);

#endif
