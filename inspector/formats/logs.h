/*
 * Job logs: a combined launcher log ([rank3]: or [default0]: prefixes,
 * torchrun's failure summary) or one file per rank, read line by line against
 * the patterns of inspector/formats/patterns/logs.json (data, not code: users add
 * their own with HANGDX_PATTERNS). Every match becomes an hdx_log_fact in the
 * evidence; each rank gets an hdx_log_rank summary (last line and its time,
 * the collective sequence numbers reached, the exit cause). classify_logs.c
 * decides from them.
 */
#ifndef HDX_LOGS_H
#define HDX_LOGS_H

#include <stddef.h>

#include "model/evidence.h"

typedef struct hdx_log_patterns hdx_log_patterns;

/* Environment variable naming a user's pattern file, read after the built-in one. */
#define HDX_PATTERNS_ENV "HANGDX_PATTERNS"

/*
 * Load the built-in patterns, found at <dir of exe>/../share/hangdx/patterns/logs.json
 * (the build tree and an installed tree), else in the source tree
 * (HDX_PATTERNS_SRC_DIR), then the file HANGDX_PATTERNS names, if any.
 * exe may be NULL (then /proc/self/exe). On success *out is the caller's
 * (hdx_log_patterns_free). Returns 0, or -errno with *err (heap, caller frees)
 * saying which file and what is wrong.
 */
int hdx_log_patterns_load_default(const char *exe, hdx_log_patterns **out, char **err);

/* Add the patterns of one file (hangdx.patterns/1) to *ps (created when NULL).
 * 0, or -errno with *err naming the file, the pattern and the problem. */
int hdx_log_patterns_load_file(const char *path, hdx_log_patterns **ps, char **err);

void hdx_log_patterns_free(hdx_log_patterns *ps);

/* How many patterns ps holds, and the i-th one's name, regex and example (borrowed). */
size_t hdx_log_patterns_count(const hdx_log_patterns *ps);
const char *hdx_log_pattern_name(const hdx_log_patterns *ps, size_t i);
const char *hdx_log_pattern_example(const hdx_log_patterns *ps, size_t i);

/* Pattern i's POSIX extended regex, borrowed from ps. */
const char *hdx_log_pattern_regex(const hdx_log_patterns *ps, size_t i);

/* 1 when pattern i matches line (a line as it would be after its launcher
 * prefix is removed), else 0. The regex runs only on a line that holds one of the literals
 * every match must hold (taken from the regex when the patterns are loaded): the answer is
 * the regex's, found without running it on most lines of a log (docs/design.md, "Job logs"). */
int hdx_log_pattern_matches(const hdx_log_patterns *ps, size_t i, const char *line);

/*
 * Is path a job log? 1 when a line of its first or its last 64 KiB matches a
 * pattern (NUL bytes end lines), 0 when not, -errno when it cannot be read.
 */
int hdx_log_sniff(const hdx_log_patterns *ps, const char *path);

/*
 * The process groups the job's logs show whole: an NCCL line's "[PG ID n PG GUID m(desc)
 * Rank r]" prefix gives a group and a group rank, the launcher's prefix the global rank;
 * a group every one of whose group ranks 0..max some line places becomes ev->pgroups'
 * group named as the facts name it ("2 (TENSOR_MODEL_PARALLEL_GROUP)"), with the role
 * Megatron's group_desc gives. Call once every log is loaded. 0 or -ENOMEM.
 */
int hdx_log_pgroups(hdx_evidence *ev);

/* The role ("tp", "pp", "dp", "cp", "ep", "mp", ...) of a group whose description is one that
 * Megatron gives its groups (group_desc, torch >= 2.4: "TENSOR_MODEL_PARALLEL_GROUP"), or NULL.
 * Static string. */
const char *hdx_log_role_of_desc(const char *desc);

/*
 * Read the job log at path into ev: one hdx_log_fact per matching line and
 * the per-rank summaries (ev->log_ranks), with notes for what was assumed
 * (a rank from the file name, a group rank that cannot be translated).
 * Returns 0, or -errno with *err (heap, caller frees).
 */
int hdx_log_load(const hdx_log_patterns *ps, const char *path, hdx_evidence *ev, char **err);

/*
 * hdx_log_load, and *only_rank: the one rank that the file's lines belong to (their launcher
 * prefixes, the file name, or an NCCL line's own [Rank n] of the default group), or
 * HDX_UNKNOWN when they name none or several. only_rank may be NULL.
 */
int hdx_log_load_ranked(const hdx_log_patterns *ps, const char *path, hdx_evidence *ev, int *only_rank, char **err);

/* The rank that a log file's place tells (a torchrun --log-dir's <local_rank> directory, a Slurm
 * %t task id in the name; inputs.c finds it), for hdx_log_load_hinted. */
typedef struct hdx_log_hint {
    int rank;        /* HDX_UNKNOWN: none */
    const char *why; /* words for the note ("the Slurm task id in the file name"); borrowed */
    int used;        /* set by the loader: 1 when the file's lines took rank (it had no prefix) */
} hdx_log_hint;

/*
 * hdx_log_load_ranked, with the rank that the file's place tells (hint; NULL: none, as
 * hdx_log_load_ranked). The lines win: a file with launcher prefixes ([rank3]:) takes its
 * ranks from them; a file without any, from a line that says whose file it is (the patterns of
 * scope "file": RANK=3, node rank x LOCAL_WORLD_SIZE + LOCAL_RANK, ...; docs/design.md "Job
 * logs"), else from hint->rank (hint->used set), else from its name, each with a note. Lines
 * whose rank disagrees with the hint's or the name's win, and the note says both.
 */
int hdx_log_load_hinted(const hdx_log_patterns *ps, const char *path, hdx_log_hint *hint, hdx_evidence *ev,
                        int *only_rank, char **err);

#endif
