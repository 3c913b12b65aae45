/*
 * What `hangdx analyze` reads: any mix of files and directories that a hang left behind,
 * each recognised by its content and merged into one evidence set.
 *   - a snapshot (hangdx.snapshot/2 or /1) or a report (hangdx.report/2 or /1): snapshot.h;
 *   - a directory of snapshot files (*.json), as `hangdx snapshot --slurm-job -o DIR` writes;
 *   - a file of frames (frames.h): `hangdx snapshot --all --frames` of many nodes;
 *   - a trace directory of `hangdx run` (traces.h), with the report.json that
 *     `run --hang-timeout` wrote into it, if any;
 *   - a job log (logs.h), and the stack dump in it, if any;
 *   - a directory of per-rank job logs (torchrun --log-dir, of which the last attempt_<n> is
 *     judged; Slurm %t files), snapshots among them: walked to 8 levels and 20000 entries, a
 *     file's rank from its lines, else from its place (docs/formats.md "Directories of job logs");
 *   - another tool's stack dump (foreign.h), or an ELF core file of a hung rank (core.h).
 * Snapshot files named in the list load in parallel; the merge keeps the list's order.
 * Nothing is printed here: what was left out comes back in hdx_load_result.
 */
#ifndef HDX_INPUTS_H
#define HDX_INPUTS_H

#include <stddef.h>

#include "formats/traces.h"
#include "model/evidence.h"

typedef struct hdx_load_options {
    /* Asked what is alive now and which namespaces are foreign, for trace directories
     * (traces.h's hdx_trace_to_evidence; borrowed). NULL: nothing of this machine is
     * consulted. analyze passes gather/proc.h's hdx_proc_trace_host(). */
    const hdx_trace_host *trace_host;
    /* Threads that load snapshot files ahead: 0, one per CPU up to 8. */
    int threads;
} hdx_load_options;

typedef struct hdx_load_result {
    /* One line per input left out, for a person ("NAME: left out: WHY; the verdict is from
     * ..."), in the order they were met; each is in ev's notes too. Heap: hdx_load_result_clear. */
    char **left_out;
    size_t n_left_out;
} hdx_load_result;

/*
 * Load paths[0..n) (borrowed for the call) into ev, which must be fresh from
 * hdx_evidence_new(): ev becomes a post-mortem evidence set (live 0) with the processes,
 * stacks, locks and notes of every input, ev->host the one host of all inputs (NULL when
 * they come from several), and notes on what is missing (no stacks, no CPU samples, lock
 * states as recorded). Locks that only traces brought are not looked at here (the
 * caller may: gather/locks.h's hdx_locks_record_facts).
 * An input that is damaged in part (a bad *.json of a snapshot directory, an incomplete node
 * of a frames file, an unusable report.json of a trace directory) is left out: named in
 * res->left_out (the caller's, zeroed by it; hdx_load_result_clear frees it) and in ev's
 * notes, and the rest is loaded.
 * Returns 0; or -ENOMEM (*err may stay NULL); or another negative errno with *err, a heap
 * message for a person naming the input (the caller frees it): an input that cannot be read
 * or recognised (-ENOENT, -EINVAL, ...), a directory or frames file with nothing usable in it
 * (-ENODATA), or a merge that fails (the same rank on two hosts). On an error ev holds what
 * was loaded before it, and res what was left out before it.
 */
int hdx_load_inputs(char *const *paths, size_t n, const hdx_load_options *o, hdx_evidence *ev,
                    hdx_load_result *res, char **err);

/* Free what res holds and zero it. NULL is fine. */
void hdx_load_result_clear(hdx_load_result *res);

#endif
