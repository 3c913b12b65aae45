/*
 * The words of the log findings (classify_logs.c) (docs/design.md "Findings"). A rank's last
 * log line comes from the evidence (hdx_evidence_log_rank); all else from the facts.
 */
#include <stdio.h>
#include <string.h>

#include "classify/waitsfor.h"
#include "report/words_impl.h"

#define RANKS_TEXT 256

/* The file of the log line that decided (fact "file"); its number is fact "line". */
static const char *file(const hdx_verdict *v) { return hdx_words_text(v, "file", "?"); }

static long long line(const hdx_verdict *v) { return hdx_verdict_num(v, "line", 0); }

/* The op of the collective the watchdogs timed out on, or dflt. */
static const char *op_or(const hdx_verdict *v, const char *dflt)
{
    const char *op = hdx_verdict_text(v, "op");
    return op ? op : dflt;
}

static int words_config(const hdx_verdict *v, hdx_words *w)
{
    const char *fix = hdx_verdict_text(v, "fix");
    int rc;
    if (v->finding == HDX_FIND_LOG_CONFIG_WORLD_NOT_DIVISIBLE) {
        long long tp = hdx_verdict_num(v, "tp", HDX_UNKNOWN), pp = hdx_verdict_num(v, "pp", HDX_UNKNOWN),
                  cp = hdx_verdict_num(v, "cp", HDX_UNKNOWN), model = hdx_verdict_num(v, "model_size", HDX_UNKNOWN);
        char by[200];
        if (tp > 0 && pp > 0 && model > 0)
            snprintf(by, sizeof by, "tensor-parallel size %lld x pipeline-parallel size %lld%s%.0lld = %lld", tp, pp,
                     cp > 0 ? " x context-parallel size " : "", cp > 0 ? cp : 0, model);
        else if (model > 0)
            snprintf(by, sizeof by, "the model-parallel size %lld (TP x PP x CP, and the encoder's)", model);
        else if (tp > 0 && hdx_verdict_num(v, "pp_unprinted", 0))
            snprintf(by, sizeof by, "tensor-parallel size %lld x the pipeline-parallel size (this Megatron's "
                     "message does not print it)", tp);
        else
            snprintf(by, sizeof by, "tensor-parallel size %lld", tp);
        rc = hdx_words_set(&w->summary,
                           "configuration error: TPxPPxDP cannot equal the world size: world size %lld is not "
                           "divisible by %s (%s:%lld)",
                           hdx_verdict_num(v, "world_size", 0), by, file(v), line(v));
    } else if (v->finding == HDX_FIND_LOG_CONFIG_DUPLICATE_GPU) {
        rc = hdx_words_set(&w->summary,
                           "configuration error: ranks %lld and %lld of one NCCL communicator are both on CUDA "
                           "device (bus id) %s; NCCL refuses them at communicator init, and ranks that got past it "
                           "wait for them (%s:%lld)",
                           hdx_verdict_num(v, "rank", HDX_UNKNOWN), hdx_verdict_num(v, "other_rank", HDX_UNKNOWN),
                           hdx_words_text(v, "device", "?"), file(v), line(v));
    } else {
        const char *setting = hdx_verdict_text(v, "setting"), *la = hdx_verdict_text(v, "value_a_label"),
                   *lb = hdx_verdict_text(v, "value_b_label");
        rc = hdx_words_set(&w->summary, "configuration error: %s is %s in %s but %s in %s (%s:%lld: %s)",
                           setting ? setting : "a setting", hdx_words_text(v, "value_a", "?"), la ? la : "one place",
                           hdx_words_text(v, "value_b", "?"), lb ? lb : "another", file(v), line(v),
                           hdx_words_text(v, "text", ""));
    }
    return rc ? rc : hdx_words_set(&w->remedy, "%s", fix ? fix : "make the two values agree");
}

static int words_megatron(const hdx_verdict *v, hdx_words *w)
{
    long long world = hdx_verdict_num(v, "world_size", 0), tp = hdx_verdict_num(v, "tp", 0),
              pp = hdx_verdict_num(v, "pp", 0), cp = hdx_verdict_num(v, "cp", 1), dp = hdx_verdict_num(v, "dp", 0);
    int rc;
    if (v->finding == HDX_FIND_LOG_PARALLEL_SIZES) {
        rc = hdx_words_set(&w->summary,
                           "configuration error: TPxPPxDP != world size: tensor-parallel %lld x pipeline-parallel "
                           "%lld x context-parallel %lld x data-parallel %lld = %lld, but the world size is %lld "
                           "(%s:%lld)",
                           tp, pp, cp, dp, tp * pp * cp * dp, world, file(v), line(v));
        return rc ? rc : hdx_words_set(&w->remedy, "launch TPxPPxCPxDP = %lld processes, or choose parallel sizes "
                                       "whose product is the world size %lld", tp * pp * cp * dp, world);
    }
    if (v->finding == HDX_FIND_LOG_PARALLEL_ARGS) {
        rc = hdx_words_set(&w->summary, "configuration error: TPxPPxDP != world size: %lld x %lld x %lld x %lld = "
                           "%lld, but world_size is %lld", tp, pp, cp, dp, tp * pp * cp * dp, world);
        return rc ? rc : hdx_words_set(&w->remedy, "make tensor x pipeline x context x data parallel sizes multiply "
                                       "to the world size %lld", world);
    }
    long long seq = hdx_verdict_num(v, "seq_length", 0);
    const char *at = hdx_verdict_text(v, "file");
    if (tp <= 0 || seq <= 0) {
        /* the assertion alone: the message prints neither size */
        char a[RANKS_TEXT];
        size_t na = hdx_words_ranks(v, "asserted", a, sizeof a);
        if (!at)
            return 0;
        rc = hdx_words_set(&w->summary,
                           "configuration error: with sequence parallelism a tensor's first dimension (the sequence) "
                           "must be divisible by the tensor-parallel size, and Megatron's first forward pass found "
                           "one that is not%s%s%s%s (%s:%lld: %s)",
                           na ? " on rank" : "", na ? hdx_words_noun_s(na) : "", na ? " " : "", na ? a : "", at,
                           line(v), hdx_words_text(v, "text", ""));
        return rc ? rc : hdx_words_set(&w->remedy, "choose a --seq-length divisible by --tensor-model-parallel-size"
                                       "%s, or turn off --sequence-parallel", tp > 0 ? "" : " (the arguments are not "
                                       "in the log: check the launch command)");
    }
    char symptom[200] = "", n[24] = "?";
    const char *op = hdx_verdict_text(v, "symptom_op");
    if (op) {
        long long at = hdx_verdict_num(v, "symptom_seq", HDX_UNKNOWN);
        if (at != HDX_UNKNOWN)
            snprintf(n, sizeof n, "%lld", at);
        snprintf(symptom, sizeof symptom, "; its symptom: rank %lld timed out in %s (SeqNum=%s)",
                 hdx_verdict_num(v, "symptom_rank", HDX_UNKNOWN), op, n);
    }
    rc = hdx_words_set(&w->summary,
                       "configuration error: with sequence parallelism the sequence length must be divisible by the "
                       "tensor-parallel size, but seq_length is %lld and tensor_model_parallel_size is %lld (%lld %% "
                       "%lld = %lld)%s",
                       seq, tp, seq, tp, seq % tp, symptom);
    return rc ? rc : hdx_words_set(&w->remedy, "choose a seq_length divisible by %lld (e.g. %lld), or a "
                                   "tensor-parallel size that divides %lld, or turn off --sequence-parallel",
                                   tp, (seq / tp + 1) * tp, seq);
}

static int words_build_lock(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    const hdx_fact *building = hdx_verdict_fact(v, "building");
    const hdx_log_rank *r = building && building->n_ints ? hdx_evidence_log_rank(ev, building->ints[0]) : NULL;
    if (!r)
        return 0;
    char b[RANKS_TEXT], wt[RANKS_TEXT];
    size_t nb = hdx_words_ranks(v, "building", b, sizeof b), nw = hdx_words_ranks(v, "waiting", wt, sizeof wt);
    const char *dir = hdx_verdict_text(v, "build_dir"), *ext = hdx_verdict_text(v, "extension");
    int rc = hdx_words_set(&w->summary,
                           "rank%s %s stopped in a JIT kernel build%s%s%s%s and logged nothing after (last line "
                           "%s:%ld: \"%s\"); rank%s %s timed out waiting for it in %s SeqNum=%lld. The build "
                           "directory's lock (%s/lock) is stale or its build is stuck: the logs cannot tell which",
                           hdx_words_noun_s(nb), b, ext ? " of " : "", ext ? ext : "", dir ? " in " : "", dir ? dir : "",
                           r->file ? r->file : "?", r->last_line_no, r->last_line ? r->last_line : "?",
                           hdx_words_noun_s(nw), wt,
                           op_or(v, "a collective"), hdx_verdict_num(v, "seq", HDX_UNKNOWN), dir ? dir : "<build dir>");
    return rc ? rc : hdx_words_set(&w->remedy,
                                   "check that no build runs on any node that shares %s (ninja, the compiler); if "
                                   "none does, the lock is stale: rm %s/lock and relaunch; if one runs and makes no "
                                   "progress, it is a compile stall (lower MAX_JOBS when the OOM killer ended a "
                                   "compiler)",
                                   dir ? dir : "the build directory", dir ? dir : "<build dir>");
}

static int words_build_unfinished(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    const hdx_fact *building = hdx_verdict_fact(v, "building");
    const hdx_log_rank *r = building && building->n_ints ? hdx_evidence_log_rank(ev, building->ints[0]) : NULL;
    char b[RANKS_TEXT], wt[RANKS_TEXT];
    size_t nb = hdx_words_ranks(v, "building", b, sizeof b), nw = hdx_words_ranks(v, "waiting", wt, sizeof wt);
    if (!r && nw) {
        const char *root = hdx_verdict_text(v, "root");
        int rc = hdx_words_set(&w->summary,
                               "rank%s %s started cpp_extension.load%s%s and logged nothing after, and no rank of the "
                               "job began the build: they wait for a build directory's lock (<root>/<extension>/lock) "
                               "that no rank took, left by an earlier run that was killed (stale) or held by another "
                               "job's build; the logs cannot tell which, nor which extension",
                               hdx_words_noun_s(nw), wt, root ? " under " : "", root ? root : "");
        return rc ? rc : hdx_words_set(&w->remedy,
                                       "look in %s for a directory with a file named lock; if no ninja or compiler "
                                       "runs for it on any node that shares it, remove that lock and relaunch",
                                       root ? root : "the extensions root (TORCH_EXTENSIONS_DIR)");
    }
    if (!r)
        return 0;
    const char *dir = hdx_verdict_text(v, "build_dir"), *ext = hdx_verdict_text(v, "extension");
    char waits[RANKS_TEXT + 80] = "";
    if (nw)
        snprintf(waits, sizeof waits, "; rank%s %s started cpp_extension.load and wait%s for that lock",
                 hdx_words_noun_s(nw), wt, nw == 1 ? "s" : "");
    int rc = hdx_words_set(&w->summary,
                           "rank%s %s began a JIT build%s%s%s%s and logged nothing after (last line %s:%ld: \"%s\"); "
                           "no rank loaded it%s. The build holds the build directory's lock (%s/lock): the build is "
                           "stuck, or its process was killed and left the lock stale; the logs cannot tell which",
                           hdx_words_noun_s(nb), b, ext ? " of " : "", ext ? ext : "", dir ? " in " : "",
                           dir ? dir : "", r->file ? r->file : "?", r->last_line_no, r->last_line ? r->last_line : "?",
                           waits, dir ? dir : "<build dir>");
    return rc ? rc : hdx_words_set(&w->remedy,
                                   "check whether ninja or a compiler still runs for %s on the node of rank %s; if one "
                                   "runs and makes no progress, it is a compile stall (lower MAX_JOBS when the OOM "
                                   "killer ended a compiler); if none does, the lock is stale: rm %s/lock and relaunch",
                                   dir ? dir : "the build directory", b, dir ? dir : "<build dir>");
}

static int words_file_lock(const hdx_verdict *v, hdx_words *w)
{
    char t[RANKS_TEXT];
    size_t n = hdx_words_ranks(v, "timed_out", t, sizeof t);
    const char *path = hdx_verdict_text(v, "lock_path");
    int rc = hdx_words_set(&w->summary,
                           "%s%s%s%s gave up waiting for the file lock %s%s (%s:%lld): another process held it the "
                           "whole time, a build that is stuck, or a holder gone that left it stale (a lock on a "
                           "network filesystem, or filelock's SoftFileLock); the logs cannot tell which",
                           n ? "rank" : "a process", n ? hdx_words_noun_s(n) : "", n ? " " : "", n ? t : "",
                           path ? path : "?",
                           hdx_verdict_num(v, "inductor", 0) ? " (torch inductor's compile-cache lock, "
                                                               "<cache dir>/locks/<key>.lock)" : "",
                           file(v), line(v));
    return rc ? rc : hdx_words_set(&w->remedy,
                                   "find the process that holds %s (hangdx locks on its directory, or fuser/lsof on "
                                   "each node that shares it); if it is a compile that makes no progress, end it; if "
                                   "none holds it, remove the lock file and relaunch; a cache directory per job "
                                   "(TORCHINDUCTOR_CACHE_DIR) keeps jobs from waiting on each other",
                                   path ? path : "the lock file");
}

static int words_store_barrier(const hdx_verdict *v, hdx_words *w)
{
    long long world = hdx_verdict_num(v, "world_size", HDX_UNKNOWN), count = hdx_verdict_num(v, "arrived", HDX_UNKNOWN);
    char p[RANKS_TEXT], m[RANKS_TEXT], arrived[160];
    size_t np = hdx_words_ranks(v, "present", p, sizeof p), nm = hdx_words_ranks(v, "missing", m, sizeof m);
    if (world >= 0 && count >= 0)
        snprintf(arrived, sizeof arrived, "%lld of world_size %lld ranks arrived, %lld missing", count, world,
                 world - count);
    else if (count >= 0)
        snprintf(arrived, sizeof arrived, "%lld ranks arrived (the world size is not in the log)", count);
    else
        snprintf(arrived, sizeof arrived, "not every rank arrived");
    int rc = hdx_words_set(&w->summary,
                           "process-group initialisation timed out in the store-based barrier (%s): %s%s%s%s%s%s%s "
                           "(%s:%lld)",
                           hdx_words_text(v, "key", "?"), arrived, np ? "; present: rank" : "",
                           np ? hdx_words_noun_s(np) : "", np ? " " : "", p,
                           nm ? (nm == 1 ? "; missing: rank " : "; missing: ranks ") : " (the log does not say which)",
                           m, file(v), line(v));
    return rc ? rc : hdx_words_set(&w->remedy, "find why the missing rank%s never reached init_process_group (crashed "
                                   "at start, not launched, or WORLD_SIZE larger than the processes launched) and "
                                   "relaunch",
                                   nm == 1 ? "" : "s");
}

static int words_store_clients(const hdx_verdict *v, hdx_words *w)
{
    long long world = hdx_verdict_num(v, "world_size", HDX_UNKNOWN), count = hdx_verdict_num(v, "arrived", HDX_UNKNOWN);
    int rc = hdx_words_set(&w->summary,
                           "process-group initialisation timed out: the job's TCPStore waited %lld s for the ranks to "
                           "connect, and %lld of %lld did, %lld missing; the log does not say which (%s:%lld)",
                           hdx_verdict_num(v, "timeout_s", -1), count, world, world - count, file(v), line(v));
    return rc ? rc : hdx_words_set(&w->remedy, "find why the missing rank%s never connected to MASTER_ADDR:MASTER_PORT "
                                   "(not launched, crashed at start, WORLD_SIZE larger than the processes launched, or "
                                   "the address not reachable from its node) and relaunch",
                                   world - count == 1 ? "" : "s");
}

static int words_seq(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    char wt[RANKS_TEXT], c[RANKS_TEXT];
    size_t nw = hdx_words_ranks(v, "waiting", wt, sizeof wt);
    long long seq = hdx_verdict_num(v, "seq", HDX_UNKNOWN);
    int rc;
    if (v->finding == HDX_FIND_LOG_SEQ_BEHIND) {
        const hdx_fact *behind = hdx_verdict_fact(v, "behind");
        const hdx_log_rank *r = behind && behind->n_ints ? hdx_evidence_log_rank(ev, behind->ints[0]) : NULL;
        if (!r)
            return 0;
        size_t nb = hdx_words_ranks(v, "behind", c, sizeof c);
        const hdx_pgroup *pg = v->group ? hdx_evidence_find_pgroup(ev, v->group) : NULL;
        char on[300] = "";
        if (pg) {
            char gt[256];
            hdx_pgroup_text(ev, (int)(pg - ev->pgroups), gt, sizeof gt);
            snprintf(on, sizeof on, " of %s", gt);
        }
        rc = hdx_words_set(&w->summary,
                           "rank%s %s never joined %s SeqNum=%lld%s: last enqueued NCCL work %lld (NCCL watchdog), "
                           "while rank%s %s timed out waiting in it; rank %d's last line (%s:%ld%s%s): \"%s\"",
                           hdx_words_noun_s(nb), c, op_or(v, "collective"), seq, on, hdx_verdict_num(v, "enqueued", HDX_UNKNOWN),
                           hdx_words_noun_s(nw), wt, r->rank, r->file ? r->file : "?", r->last_line_no,
                           r->last_time ? ", " : "", r->last_time ? r->last_time : "",
                           r->last_line ? r->last_line : "?");
    } else if (v->finding == HDX_FIND_LOG_DESYNC) {
        size_t nd = hdx_words_ranks(v, "desync", c, sizeof c);
        char u[RANKS_TEXT], nj[RANKS_TEXT], what[2 * RANKS_TEXT + 160] = "";
        size_t nu = hdx_words_ranks(v, "unfinished", u, sizeof u), nn = hdx_words_ranks(v, "not_joined", nj, sizeof nj);
        long long lag = hdx_verdict_num(v, "desync_seq", HDX_UNKNOWN);
        if (hdx_verdict_num(v, "never_joined", 0)) {
            snprintf(what, sizeof what, "never joined any collective");
        } else if (nu || nn) {
            int k = 0;
            if (nu)
                k = snprintf(what, sizeof what, "rank%s %s joined collective #%lld but did not finish it",
                             hdx_words_noun_s(nu), u, lag);
            if (nn && k >= 0 && (size_t)k < sizeof what)
                snprintf(what + k, sizeof what - (size_t)k, "%srank%s %s finished collective #%lld but never joined "
                         "#%lld, which the others wait in", nu ? "; " : "", hdx_words_noun_s(nn), nj, lag, lag + 1);
        } else {
            snprintf(what, sizeof what, "joined but did not finish it");
        }
        rc = hdx_words_set(&w->summary, "the NCCL desync report names rank%s %s: %s%s%s%s%s%s", hdx_words_noun_s(nd), c,
                           what, nw ? "; rank" : "", nw ? hdx_words_noun_s(nw) : "", nw ? " " : "",
                           nw ? wt : "", nw ? " timed out waiting" : "");
    } else if (v->finding == HDX_FIND_LOG_SEQ_SILENT) {
        size_t ns = hdx_words_ranks(v, "silent", c, sizeof c);
        rc = hdx_words_set(&w->summary,
                           "rank%s %s timed out in %s SeqNum=%lld; rank%s %s logged no watchdog line for it, so %s "
                           "likely never joined (the logs show no sequence number for %s)",
                           hdx_words_noun_s(nw), wt, op_or(v, "a collective"), seq, hdx_words_noun_s(ns), c,
                           ns == 1 ? "it" : "they", ns == 1 ? "it" : "them");
    } else if (v->finding == HDX_FIND_LOG_SEQ_GPU) {
        long long world = hdx_verdict_num(v, "world_size", HDX_UNKNOWN);
        char from[96];
        if (hdx_verdict_num(v, "world_size_from_env", 0))
            snprintf(from, sizeof from, "WORLD_SIZE=%lld in the log", world);
        else
            snprintf(from, sizeof from, "NCCL's \"nranks %lld\" at communicator init", world);
        rc = hdx_words_set(&w->summary,
                           world == 1 ? "rank%s %s timed out in %s SeqNum=%lld, and the job has no other rank (world "
                                        "size %lld, from %s): the collective's GPU work never finished (a "
                                        "kernel queued before it, or the GPU itself, is stuck)"
                                      : "rank%s %s timed out in %s SeqNum=%lld: every rank of the job (world size "
                                        "%lld, from %s) is waiting in it, so none is missing: the "
                                        "collective's GPU work never finished (a kernel queued before it, the GPU "
                                        "or the network is stuck)",
                           hdx_words_noun_s(nw), wt, op_or(v, "a collective"), seq, world, from);
        return rc ? rc : hdx_words_set(&w->remedy, "look at the GPU side of the ranks: the kernels queued before "
                                       "the collective (CUDA_LAUNCH_BLOCKING=1 names the one that hangs), nvidia-smi, "
                                       "and the kernel log (dmesg: Xid errors); NCCL_DEBUG=INFO for the network");
    } else {
        rc = hdx_words_set(&w->summary,
                           "rank%s %s timed out in %s SeqNum=%lld, and no log line tells which rank never joined it "
                           "(the logs of the other ranks are missing, or they crashed)",
                           hdx_words_noun_s(nw), wt, op_or(v, "a collective"), seq);
    }
    return rc ? rc : hdx_words_set(&w->remedy, "look at what the culprit ranks did instead (their logs, or hangdx "
                                   "inspect while the job hangs): an uneven number of steps, a skipped collective, a "
                                   "crash");
}

static int words_monitored(const hdx_verdict *v, hdx_words *w)
{
    char f[RANKS_TEXT], p[RANKS_TEXT];
    if (!hdx_verdict_fact(v, "failed")) {
        /* the time ran out between two ranks (classify_logs.c monitored_timeout) */
        size_t n = hdx_words_ranks(v, "unchecked", f, sizeof f), np = hdx_words_ranks(v, "processed", p, sizeof p);
        long long late = hdx_verdict_num(v, "late", HDX_UNKNOWN), all = hdx_verdict_num(v, "unchecked_count", 0);
        size_t used = strlen(f);
        if (all > (long long)n && used + 40 < sizeof f) /* only the first HDX_RANKS_NAMED named */
            snprintf(f + used, sizeof f - used, "%s (%lld in all)", strstr(f, "...") ? "" : "...", all);
        char checked[RANKS_TEXT + 120];
        if (!hdx_verdict_fact(v, "processed"))
            snprintf(checked, sizeof checked, "the line naming the ranks it had checked is not in the log");
        else if (!np)
            snprintf(checked, sizeof checked, "it had checked no rank");
        else
            snprintf(checked, sizeof checked, "it had checked rank%s %s, rank %lld answering only as the time ran out",
                     hdx_words_noun_s(np), p, late);
        char rest[RANKS_TEXT + 120], why[RANKS_TEXT + 200], slow[80] = "";
        if (n)
            snprintf(rest, sizeof rest, "not checked: rank%s %s%s", hdx_words_noun_s(n), f,
                     hdx_verdict_fact(v, "world_size") ? "" : " and any rank after it (the world size is not in the logs)");
        else
            snprintf(rest, sizeof rest, "every other rank was checked or logged that it reached the barrier");
        if (late != HDX_UNKNOWN)
            snprintf(slow, sizeof slow, "why rank %lld answered only at the end of the timeout", late);
        if (n)
            snprintf(why, sizeof why, "see whether rank%s %s reached the barrier (%s logs, or hangdx inspect while the "
                     "job hangs)%s%s", hdx_words_noun_s(n), f, n == 1 ? "its" : "their", *slow ? ", and " : "", slow);
        else
            snprintf(why, sizeof why, "see %s", *slow ? slow : "rank 0's log around the barrier");
        int rc = hdx_words_set(&w->summary, "monitored_barrier ran out of its %lld ms on rank 0 of its group (%s:%lld): "
                               "%s; %s", hdx_verdict_num(v, "timeout_ms", HDX_UNKNOWN), file(v), line(v), checked, rest);
        return rc ? rc : hdx_words_set(&w->remedy, "%s; or pass wait_all_ranks=True to monitored_barrier, which checks "
                                       "every rank and names each that did not arrive", why);
    }
    size_t n = hdx_words_ranks(v, "failed", f, sizeof f);
    int rc = hdx_words_set(&w->summary,
                           "monitored_barrier timed out after %lld ms: rank%s %s of its group did not reach it (rank 0 "
                           "of the group reports %s: %s:%lld)",
                           hdx_verdict_num(v, "timeout_ms", HDX_UNKNOWN), hdx_words_noun_s(n), f, n == 1 ? "it" : "them",
                           file(v), line(v));
    return rc ? rc : hdx_words_set(&w->remedy, "look at what rank%s %s did instead (%s logs, or hangdx inspect while "
                                   "the job hangs): a crash, a skipped or extra collective, a slow step; the ranks are "
                                   "those of the group given to monitored_barrier (the world's when none was)",
                                   hdx_words_noun_s(n), f, n == 1 ? "its" : "their");
}

/* A collective's fingerprint as DETAIL prints it, for a person: "ALLREDUCE (SequenceNumber=9)" from
 * "CollectiveFingerPrint(SequenceNumber=9, OpType=ALLREDUCE, ...)", else its first 120 bytes. */
static void fingerprint(const char *fp, char *buf, size_t size)
{
    const char *op = strstr(fp, "OpType="), *seq = strstr(fp, "SequenceNumber=");
    if (!op) {
        snprintf(buf, size, "%.120s%s", fp, strlen(fp) > 120 ? "..." : "");
        return;
    }
    op += 7;
    int n = (int)strcspn(op, ",)"), m = seq ? (int)strcspn(seq, ",)") : 0;
    snprintf(buf, size, "%.*s%s%.*s%s", n, op, seq ? " (" : "", m, seq ? seq : "", seq ? ")" : "");
}

static int words_detail(const hdx_verdict *v, hdx_words *w)
{
    char op[160], other[160];
    fingerprint(hdx_words_text(v, "op", "?"), op, sizeof op);
    fingerprint(hdx_words_text(v, "other_op", "?"), other, sizeof other);
    char c[RANKS_TEXT];
    size_t n = hdx_words_ranks(v, "odd", c, sizeof c);
    long long best = hdx_verdict_num(v, "messages", 0);
    int rc = hdx_words_set(&w->summary,
                           "TORCH_DISTRIBUTED_DEBUG=DETAIL found ranks in different collectives; rank%s %s, named in "
                           "%lld mismatch message%s, %s the odd one out (e.g. %s:%lld: rank %lld runs %s, rank "
                           "%lld runs %s)",
                           hdx_words_noun_s(n), c, best, hdx_words_noun_s((size_t)best), n == 1 ? "is" : "are",
                           file(v), line(v), hdx_verdict_num(v, "rank", HDX_UNKNOWN), op,
                           hdx_verdict_num(v, "other_rank", HDX_UNKNOWN), other);
    return rc ? rc : hdx_words_set(&w->remedy, "make every rank call the same collectives in the same order: look "
                                   "at the code path that rank %s took", c);
}

/* The p2p waits-for edges (edge_ranks, edge_peers, edge_sends) as "rank 0 waits to receive
 * from 1, ..." into buf (size bytes, at least 64). */
static void edges_text(const hdx_verdict *v, char *buf, size_t size)
{
    const hdx_fact *r = hdx_verdict_fact(v, "edge_ranks"), *p = hdx_verdict_fact(v, "edge_peers"),
                   *s = hdx_verdict_fact(v, "edge_sends");
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; r && p && s && i < r->n_ints && i < p->n_ints && i < s->n_ints && used + 64 < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%srank %d waits to %s %d", i ? ", " : "", r->ints[i],
                                 s->ints[i] ? "send to" : "receive from", p->ints[i]);
}

static int words_gloo(const hdx_verdict *v, hdx_words *w)
{
    char t[RANKS_TEXT], c[RANKS_TEXT], edges[512];
    size_t nt = hdx_words_ranks(v, "timed_out", t, sizeof t);
    int rc;
    if (v->finding == HDX_FIND_LOG_GLOO_COLLECTIVE) {
        size_t na = hdx_words_ranks(v, "absent", c, sizeof c);
        rc = na ? hdx_words_set(&w->summary, "rank%s %s timed out in a gloo collective; rank%s %s logged no timeout, "
                                "so never joined it", hdx_words_noun_s(nt), t, hdx_words_noun_s(na), c)
                : hdx_words_set(&w->summary, "rank%s %s timed out in a gloo collective; the ranks absent from it are "
                                "not in the logs", hdx_words_noun_s(nt), t);
        return rc ? rc : hdx_words_set(&w->remedy, "look at what %s did instead of the collective (%s logs, or "
                                       "hangdx inspect while the job hangs): a skipped collective, an uneven loop, a "
                                       "crash", na ? "the ranks that logged no timeout" : "the ranks missing from "
                                       "the logs", na ? "their" : "their own");
    }
    edges_text(v, edges, sizeof edges);
    if (v->finding == HDX_FIND_LOG_GLOO_CYCLE) {
        hdx_words_ranks(v, "cycle", c, sizeof c);
        rc = hdx_words_set(&w->summary, "pipeline transfers that cannot match: waits-for cycle %s (%s); gloo timed "
                           "out on rank%s %s", c, edges, hdx_words_noun_s(nt), t);
    } else if (v->finding == HDX_FIND_LOG_GLOO_UNMATCHED) {
        size_t nu = hdx_words_ranks(v, "unanswered", c, sizeof c);
        rc = hdx_words_set(&w->summary, "an unmatched point-to-point transfer: %s; the peer%s %s never answered (gloo "
                           "timed out on rank%s %s)", edges, hdx_words_noun_s(nu), c[0] ? c : "?",
                           hdx_words_noun_s(nt), t);
    } else {
        rc = hdx_words_set(&w->summary, "gloo send/recv timed out on rank%s %s; no call site in the logs names the "
                           "peers", hdx_words_noun_s(nt), t);
    }
    return rc ? rc : hdx_words_set(&w->remedy, "pair every send with a recv on the peer, in an order that cannot "
                                   "block (e.g. even stages send first, odd stages receive first, or "
                                   "batch_isend_irecv)");
}

static int words_exits(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    const hdx_fact *exited = hdx_verdict_fact(v, "exited");
    char causes[600] = "";
    size_t used = 0;
    for (size_t i = 0; exited && i < exited->n_ints && used + 80 < sizeof causes; i++) {
        const hdx_log_rank *r = hdx_evidence_log_rank(ev, exited->ints[i]);
        if (r && r->exit_cause)
            used += (size_t)snprintf(causes + used, sizeof causes - used, "%srank %d: %.100s%s", used ? "; " : "",
                                     r->rank, r->exit_cause, r->root_cause ? " (first observed failure)" : "");
    }
    long long root = hdx_verdict_num(v, "root", -1);
    int rc = hdx_words_set(&w->summary, "the job ended (torch elastic ChildFailedError), no hang rule matched: %s",
                           causes);
    return rc || root < 0 ? rc : hdx_words_set(&w->remedy, "start from rank %lld, the first observed failure: its own "
                                               "log", root);
}

static int words_undecided(const hdx_verdict *v, hdx_words *w)
{
    char r[RANKS_TEXT];
    size_t n = hdx_words_ranks(v, "weak_ranks", r, sizeof r);
    if (!n)
        return hdx_words_set(&w->summary, "the job logs hold no line that decides a hang class");
    return hdx_words_set(&w->summary, "the job logs hold no line that decides a hang class; rank%s %s last logged a "
                         "line that ends more than one kind of hang (%s)", hdx_words_noun_s(n), r,
                         hdx_verdict_num(v, "weak_answered", 0)
                             ? "the notes say what answers it"
                             : "unchecked: no lock, trace or build line tells which; run 'hangdx locks' on the "
                               "fused_kernels/build directory, or 'hangdx inspect' while the job hangs");
}

/* Where a job's logs stop in Megatron's start-up (facts "phase", "kernel_build"), as a clause
 * for any log finding; "" when the facts hold no phase. */
static void phase_clause(const hdx_verdict *v, char *buf, size_t size)
{
    const char *phase = hdx_verdict_text(v, "phase"), *build = hdx_verdict_text(v, "kernel_build");
    if (!phase)
        snprintf(buf, size, "%s", "");
    else if (!strcmp(phase, "training"))
        snprintf(buf, size, "after Megatron's start-up: its last milestone in the logs is 'training ...'");
    else
        snprintf(buf, size, "during Megatron's start-up, after '%s'%s", phase,
                 !build                    ? ""
                 : !strcmp(build, "ran")   ? " (a fused-kernel build ran there)"
                 : !strcmp(build, "none")  ? " (this release builds nothing there: the job waits in the barrier "
                                             "after it, not in a build)"
                                           : " (whether a build runs there cannot be told: Megatron prints no version)");
}

static int words_startup(const hdx_verdict *v, hdx_words *w)
{
    char where[400], r[RANKS_TEXT];
    phase_clause(v, where, sizeof where);
    const char *phase = hdx_verdict_text(v, "phase"), *build = hdx_verdict_text(v, "kernel_build");
    size_t n = hdx_words_ranks(v, "stopped", r, sizeof r);
    const char *at = *where ? where : "during Megatron's start-up";
    int rc = n ? hdx_words_set(&w->summary, "the job logs stop %s; rank%s %s last logged that milestone, and no line "
                               "tells which rank holds the others up (%s:%lld)", at, hdx_words_noun_s(n), r, file(v),
                               line(v))
               : hdx_words_set(&w->summary, "the job logs stop %s; no line tells which rank holds the others up "
                               "(%s:%lld)", at, file(v), line(v));
    if (rc)
        return rc;
    if (phase && !strcmp(phase, "compiling and loading fused kernels") && build && !strcmp(build, "none"))
        return hdx_words_set(&w->remedy, "not a fused-kernel build: from 23.08 on Megatron builds nothing after this "
                             "line; rank 0 waits in torch.distributed.barrier for ranks that never joined it: find "
                             "the rank whose own log stops earlier (or run 'hangdx inspect' while the job hangs)");
    if (phase && !strcmp(phase, "compiling and loading fused kernels") && build && !strcmp(build, "unknown"))
        return hdx_words_set(&w->remedy, "the logs cannot tell the release: before 23.08 fused_kernels.load builds on "
                             "rank 0 (a verbose build prints 'Using ... as PyTorch extensions root...' next), from "
                             "23.08 on it builds nothing and the ranks wait in the barrier after it; run 'hangdx locks' "
                             "on megatron/fused_kernels/build, or 'hangdx inspect' while the job hangs");
    if (phase && !strcmp(phase, "initializing torch distributed"))
        return hdx_words_set(&w->remedy, "init_process_group waits for every rank of the world: check that every rank "
                             "started and reaches MASTER_ADDR:MASTER_PORT");
    return hdx_words_set(&w->remedy, "run 'hangdx inspect' while the job hangs to see where each rank waits");
}

int hdx_words_logs(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    int rc;
    switch (v->finding) {
    case HDX_FIND_LOG_CONFIG_MISMATCH:
    case HDX_FIND_LOG_CONFIG_WORLD_NOT_DIVISIBLE:
    case HDX_FIND_LOG_CONFIG_DUPLICATE_GPU:
        rc = words_config(v, w);
        break;
    case HDX_FIND_LOG_PARALLEL_SIZES:
    case HDX_FIND_LOG_SEQUENCE_PARALLEL:
    case HDX_FIND_LOG_PARALLEL_ARGS:
        rc = words_megatron(v, w);
        break;
    case HDX_FIND_LOG_BUILD_LOCK:
        rc = words_build_lock(ev, v, w);
        break;
    case HDX_FIND_LOG_BUILD_UNFINISHED:
        rc = words_build_unfinished(ev, v, w);
        break;
    case HDX_FIND_LOG_FILE_LOCK:
        rc = words_file_lock(v, w);
        break;
    case HDX_FIND_LOG_STORE_BARRIER:
        rc = words_store_barrier(v, w);
        break;
    case HDX_FIND_LOG_STORE_CLIENTS:
        rc = words_store_clients(v, w);
        break;
    case HDX_FIND_LOG_SEQ_BEHIND:
    case HDX_FIND_LOG_DESYNC:
    case HDX_FIND_LOG_SEQ_SILENT:
    case HDX_FIND_LOG_SEQ_GPU:
    case HDX_FIND_LOG_SEQ_UNEXPLAINED:
        rc = words_seq(ev, v, w);
        break;
    case HDX_FIND_LOG_DETAIL_MISMATCH:
        rc = words_detail(v, w);
        break;
    case HDX_FIND_LOG_MONITORED_BARRIER:
        rc = words_monitored(v, w);
        break;
    case HDX_FIND_LOG_GLOO_COLLECTIVE:
    case HDX_FIND_LOG_GLOO_CYCLE:
    case HDX_FIND_LOG_GLOO_UNMATCHED:
    case HDX_FIND_LOG_GLOO_NO_PEERS:
        rc = words_gloo(v, w);
        break;
    case HDX_FIND_LOG_USER_PATTERN:
        rc = hdx_words_set(&w->summary, "the pattern %s (%s) matched %s:%lld: \"%s\"", hdx_words_text(v, "pattern", "?"),
                           hdx_words_text(v, "proves", "?"), file(v), line(v), hdx_words_text(v, "text", ""));
        break;
    case HDX_FIND_LOG_EXITS:
        rc = words_exits(ev, v, w);
        break;
    case HDX_FIND_LOG_STARTUP_PHASE:
        rc = words_startup(v, w);
        break;
    case HDX_FIND_LOG_UNDECIDED:
        rc = words_undecided(v, w);
        break;
    default:
        return 0;
    }
    char where[400];
    phase_clause(v, where, sizeof where);
    if (!rc && w->summary && *where && v->finding != HDX_FIND_LOG_STARTUP_PHASE)
        rc = hdx_words_set(&w->summary, "%s; the logs stop %s", w->summary, where);
    return rc < 0 ? rc : w->summary != NULL; /* a guard that found no fact to word leaves it to the caller */
}
