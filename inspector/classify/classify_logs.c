/*
 * The log rules: a verdict from job logs (logs.h) when no stack decided.
 * Strong facts decide alone; weak ones only raise a question that the
 * verdict answers from other evidence or states as unchecked. The root cause
 * wins, here as live, so the rules run in this order:
 *  1. a parallel-configuration error → config_error (the setting, the two values, the fix);
 *  2. ranks that time out waiting for a rank whose last lines are a
 *     cpp_extension build → build_lock, that rank (Megatron's fused kernels);
 *  3. a store-based barrier timeout → rendezvous_wait, missing_count (and the
 *     missing ranks when the Added-key lines tell who arrived);
 *  4. NCCL watchdog SeqNum N on some ranks, last enqueued < N on others →
 *     collective_wait, those others; the desync report; the DETAIL mismatch;
 *  5. gloo send/recv timeouts, peers from the call sites → p2p_mismatch;
 *  6. a user pattern's class; torch elastic's failures; otherwise unknown.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "model/util.h"
#include "classify/waitsfor.h"

#define RANKS_TEXT 256

static int is(const hdx_log_fact *f, const char *name) { return !strcmp(f->pattern, name); }

static int has_stacks(const hdx_evidence *ev)
{
    for (size_t i = 0; i < ev->n_procs; i++)
        for (size_t k = 0; k < ev->procs[i].n_threads; k++)
            if (ev->procs[i].threads[k].n_frames)
                return 1;
    return 0;
}

static int set_culprits(hdx_verdict *v, const int *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, r[i]))
            return -ENOMEM;
    return 0;
}

/* Parse "0, 2, 5" into ranks. */
static int parse_rank_list(const char *s, int **out, size_t *n)
{
    while (s && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) {
            s++;
            continue;
        }
        if (hdx_cls_add_int(out, n, (int)v))
            return -ENOMEM;
        s = end;
    }
    return 0;
}

/* The last value of a Megatron argument, or NULL. */
static const char *megatron_arg(const hdx_evidence *ev, const char *name)
{
    const char *v = NULL;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        const char *s = is(f, "megatron_argument") ? hdx_log_fact_field(f, "setting") : NULL;
        if (s && !strcmp(s, name))
            v = hdx_log_fact_field(f, "value");
    }
    return v;
}

static long arg_long(const hdx_evidence *ev, const char *name)
{
    const char *s = megatron_arg(ev, name);
    char *end;
    long v = s ? strtol(s, &end, 10) : -1;
    return s && end != s ? v : -1;
}

/* The first all-gather that timed out, as " ; its symptom: ..." or "". */
static void allgather_symptom(const hdx_evidence *ev, char *buf, size_t size)
{
    buf[0] = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        const char *op = hdx_log_fact_field(f, "op");
        if ((is(f, "nccl_watchdog_timeout") || is(f, "nccl_watchdog_timeout_old")) && op && strcasestr(op, "allgather")) {
            snprintf(buf, size, "; its symptom: rank %d timed out in %s (SeqNum=%s)", f->rank, op,
                     hdx_log_fact_field(f, "seq") ? hdx_log_fact_field(f, "seq") : "?");
            return;
        }
    }
}

/* 1 (decided) for 0, else the error. */
static int decided(int rc) { return rc < 0 ? rc : 1; }

static int config_rule(const hdx_evidence *ev, hdx_verdict *v)
{
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (f->strength != HDX_LOG_STRONG || strncmp(f->pattern, "config_", 7))
            continue;
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        for (size_t k = 0; k < ev->n_log_facts; k++)
            if (!strcmp(ev->log_facts[k].pattern, f->pattern) && ev->log_facts[k].rank >= 0 &&
                hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, ev->log_facts[k].rank))
                return -ENOMEM;
        const char *fix = hdx_log_fact_field(f, "fix");
        if (is(f, "config_world_not_divisible")) {
            long long w = hdx_log_fact_int(f, "world_size", 0), tp = hdx_log_fact_int(f, "tp", 0),
                      pp = hdx_log_fact_int(f, "pp", 0);
            if (hdx_cls_set_text(&v->summary,
                                 "configuration error: TPxPPxDP cannot equal the world size: world size %lld is not "
                                 "divisible by tensor-parallel size %lld x pipeline-parallel size %lld = %lld (%s:%ld)",
                                 w, tp, pp, tp * pp, f->file, f->line))
                return -ENOMEM;
        } else if (is(f, "config_duplicate_gpu")) {
            long long other = hdx_log_fact_int(f, "other_rank", HDX_UNKNOWN);
            if (other >= 0 && other <= INT_MAX && hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, (int)other))
                return -ENOMEM;
            if (hdx_cls_set_text(&v->summary,
                                 "configuration error: ranks %s and %s of one NCCL communicator are both on CUDA device "
                                 "(bus id) %s; NCCL refuses them at communicator init, and ranks that got past it wait "
                                 "for them (%s:%ld)",
                                 hdx_log_fact_field(f, "rank"), hdx_log_fact_field(f, "other_rank"),
                                 hdx_log_fact_field(f, "device"), f->file, f->line))
                return -ENOMEM;
        } else {
            const char *la = hdx_log_fact_field(f, "value_a_label"), *lb = hdx_log_fact_field(f, "value_b_label");
            if (hdx_cls_set_text(&v->summary, "configuration error: %s is %s in %s but %s in %s (%s:%ld: %s)",
                                 hdx_log_fact_field(f, "setting") ? hdx_log_fact_field(f, "setting") : "a setting",
                                 hdx_log_fact_field(f, "value_a"), la ? la : "one place", hdx_log_fact_field(f, "value_b"),
                                 lb ? lb : "another", f->file, f->line, f->text))
                return -ENOMEM;
        }
        return decided(hdx_cls_set_text(&v->remedy, "%s", fix ? fix : "make the two values agree"));
    }
    /* Megatron's printed layout: TP x PP x CP x DP must be the world size. */
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (!is(f, "megatron_parallel_sizes"))
            continue;
        long long w = hdx_log_fact_int(f, "world_size", 0), dp = hdx_log_fact_int(f, "dp", 0),
                  tp = hdx_log_fact_int(f, "tp", 0), pp = hdx_log_fact_int(f, "pp", 0), cp = hdx_log_fact_int(f, "cp", 1);
        if (w <= 0 || tp * pp * cp * dp == w)
            continue;
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        if (hdx_cls_set_text(&v->summary,
                             "configuration error: TPxPPxDP != world size: tensor-parallel %lld x pipeline-parallel %lld "
                             "x context-parallel %lld x data-parallel %lld = %lld, but the world size is %lld (%s:%ld)",
                             tp, pp, cp, dp, tp * pp * cp * dp, w, f->file, f->line))
            return -ENOMEM;
        return decided(hdx_cls_set_text(&v->remedy, "launch TPxPPxCPxDP = %lld processes, or choose parallel sizes whose "
                                "product is the world size %lld", tp * pp * cp * dp, w));
    }
    /* Megatron's printed arguments. */
    long seq = arg_long(ev, "seq_length"), tp = arg_long(ev, "tensor_model_parallel_size");
    const char *sp = megatron_arg(ev, "sequence_parallel");
    if (sp && !strcmp(sp, "True") && seq > 0 && tp > 0 && seq % tp) {
        char symptom[200];
        allgather_symptom(ev, symptom, sizeof symptom);
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        if (hdx_cls_set_text(&v->summary,
                             "configuration error: with sequence parallelism the sequence length must be divisible by "
                             "the tensor-parallel size, but seq_length is %ld and tensor_model_parallel_size is %ld "
                             "(%ld %% %ld = %ld)%s",
                             seq, tp, seq, tp, seq % tp, symptom))
            return -ENOMEM;
        return decided(hdx_cls_set_text(&v->remedy, "choose a seq_length divisible by %ld (e.g. %ld), or a tensor-parallel "
                                "size that divides %ld, or turn off --sequence-parallel", tp, (seq / tp + 1) * tp, seq));
    }
    long w = arg_long(ev, "world_size"), pp = arg_long(ev, "pipeline_model_parallel_size"),
         dp = arg_long(ev, "data_parallel_size"), cp = arg_long(ev, "context_parallel_size");
    if (cp < 1)
        cp = 1;
    if (w > 0 && tp > 0 && pp > 0 && dp > 0 && tp * pp * cp * dp != w) {
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        if (hdx_cls_set_text(&v->summary, "configuration error: TPxPPxDP != world size: %ld x %ld x %ld x %ld = %ld, "
                             "but world_size is %ld", tp, pp, cp, dp, tp * pp * cp * dp, w))
            return -ENOMEM;
        return decided(hdx_cls_set_text(&v->remedy, "make tensor x pipeline x context x data parallel sizes multiply to the "
                                "world size %ld", w));
    }
    return 0;
}

typedef struct seqs {
    long long n;       /* the highest SeqNum a watchdog timed out on, HDX_UNKNOWN */
    const char *op;
    int *waiting;      /* ranks that timed out on it */
    size_t n_waiting;
    int *behind;       /* ranks whose last enqueued work is below it */
    size_t n_behind;
    int *silent;       /* ranks the logs know that said nothing of it */
    size_t n_silent;
} seqs;

static void seqs_free(seqs *s)
{
    free(s->waiting);
    free(s->behind);
    free(s->silent);
}

static int seqs_of(const hdx_evidence *ev, seqs *s)
{
    memset(s, 0, sizeof *s);
    s->n = HDX_UNKNOWN;
    const char *pg = NULL; /* the group of the work compared: sequence numbers count per group */
    for (size_t i = 0; i < ev->n_log_ranks; i++)
        if (ev->log_ranks[i].seq_timed_out > s->n) {
            s->n = ev->log_ranks[i].seq_timed_out;
            s->op = ev->log_ranks[i].timed_out_op;
            pg = ev->log_ranks[i].seq_pg;
        }
    if (s->n == HDX_UNKNOWN)
        return 0;
    for (size_t i = 0; i < ev->n_log_ranks; i++) {
        const hdx_log_rank *r = &ev->log_ranks[i];
        int rc = 0;
        int other_group = (r->seq_pg == NULL) != (pg == NULL) || (pg && strcmp(pg, r->seq_pg));
        if (other_group && (r->seq_timed_out != HDX_UNKNOWN || r->seq_enqueued != HDX_UNKNOWN))
            continue; /* its numbers count another group's work */
        if (r->seq_enqueued != HDX_UNKNOWN && r->seq_enqueued < s->n)
            rc = hdx_cls_add_int(&s->behind, &s->n_behind, r->rank);
        else if (r->seq_timed_out == s->n)
            rc = hdx_cls_add_int(&s->waiting, &s->n_waiting, r->rank);
        else if (r->seq_timed_out == HDX_UNKNOWN && r->seq_enqueued == HDX_UNKNOWN)
            rc = hdx_cls_add_int(&s->silent, &s->n_silent, r->rank);
        if (rc)
            return -ENOMEM;
    }
    return 0;
}

static int is_build_line(const char *pattern)
{
    return pattern && (!strcmp(pattern, "cpp_extension_emit") || !strcmp(pattern, "cpp_extension_building") ||
                       !strcmp(pattern, "cpp_extension_allowing_ninja"));
}

static int build_rule(const hdx_evidence *ev, const seqs *s, hdx_verdict *v)
{
    if (!s->n_waiting)
        return 0;
    int *builders = NULL;
    size_t nb = 0;
    const int *cand[2] = {s->behind, s->silent};
    size_t ncand[2] = {s->n_behind, s->n_silent};
    for (int c = 0; c < 2; c++)
        for (size_t i = 0; i < ncand[c]; i++) {
            const hdx_log_rank *r = hdx_evidence_log_rank(ev, cand[c][i]);
            if (r && is_build_line(r->last_pattern) && hdx_cls_add_int(&builders, &nb, r->rank)) {
                free(builders);
                return -ENOMEM;
            }
        }
    if (!nb) {
        free(builders);
        return 0;
    }
    const char *dir = NULL, *ext = NULL;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (f->rank != builders[0])
            continue;
        if (is(f, "cpp_extension_emit"))
            dir = hdx_log_fact_field(f, "build_dir");
        else if (is(f, "cpp_extension_building"))
            ext = hdx_log_fact_field(f, "extension");
    }
    const hdx_log_rank *r = hdx_evidence_log_rank(ev, builders[0]);
    char b[RANKS_TEXT], w[RANKS_TEXT];
    hdx_format_ranges_of(builders, nb, b, sizeof b);
    hdx_format_ranges_of(s->waiting, s->n_waiting, w, sizeof w);
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->confidence = HDX_CONF_MEDIUM;
    int rc = set_culprits(v, builders, nb);
    if (!rc)
        rc = hdx_cls_set_text(&v->summary,
                              "rank %s stopped in a JIT kernel build%s%s%s%s and logged nothing after (last line %s:%ld: "
                              "\"%s\"); ranks %s timed out waiting for it in %s SeqNum=%lld. The build directory's lock "
                              "(%s/lock) is stale or its build is stuck: the logs cannot tell which",
                              b, ext ? " of " : "", ext ? ext : "", dir ? " in " : "", dir ? dir : "",
                              r->file ? r->file : "?", r->last_line_no, r->last_line ? r->last_line : "?", w, s->op ? s->op : "a collective", s->n,
                              dir ? dir : "<build dir>");
    if (!rc)
        rc = hdx_cls_set_text(&v->remedy,
                              "check that no build runs on any node that shares %s (ninja, the compiler); if none does, "
                              "the lock is stale: rm %s/lock and relaunch; if one runs and makes no progress, it is a "
                              "compile stall (lower MAX_JOBS when the OOM killer ended a compiler)",
                              dir ? dir : "the build directory", dir ? dir : "<build dir>");
    free(builders);
    return rc < 0 ? rc : 1;
}

static int store_rule(const hdx_evidence *ev, hdx_verdict *v)
{
    const hdx_log_fact *t = NULL;
    for (size_t i = 0; i < ev->n_log_facts && !t; i++)
        if (is(&ev->log_facts[i], "store_barrier_timeout"))
            t = &ev->log_facts[i];
    if (!t)
        return 0;
    long long world = hdx_log_fact_int(t, "world_size", HDX_UNKNOWN), count = hdx_log_fact_int(t, "worker_count", HDX_UNKNOWN);
    const char *key = hdx_log_fact_field(t, "key");
    int *present = NULL;
    size_t np = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        const char *k = hdx_log_fact_field(f, "key");
        if (is(f, "store_barrier_added_key") && k && key && !strcmp(k, key) && f->rank >= 0 &&
            hdx_cls_add_int(&present, &np, f->rank)) {
            free(present);
            return -ENOMEM;
        }
    }
    v->cls = HDX_CLASS_RENDEZVOUS_WAIT;
    v->confidence = HDX_CONF_HIGH;
    if (world > 0 && count >= 0 && world > count)
        v->missing_count = (int)(world - count);
    int rc = 0;
    char p[RANKS_TEXT] = "", m[RANKS_TEXT] = "";
    if (np && world > 0 && (long long)np == count) {
        for (int r = 0; r < world && !rc; r++) {
            int here = 0;
            for (size_t k = 0; k < np; k++)
                here |= present[k] == r;
            if (!here)
                rc = hdx_cls_add_int(&v->missing_ranks, &v->n_missing_ranks, r);
        }
        if (!rc)
            rc = set_culprits(v, v->missing_ranks, v->n_missing_ranks);
        hdx_format_ranges_of(present, np, p, sizeof p);
        hdx_format_ranges_of(v->missing_ranks, v->n_missing_ranks, m, sizeof m);
    }
    if (!rc)
        rc = hdx_cls_set_text(&v->summary,
                              "process-group initialisation timed out in the store-based barrier (%s): %lld of world_size "
                              "%lld ranks arrived, %lld missing%s%s%s%s (%s:%ld)",
                              key ? key : "?", count, world, world - count, np ? "; present: ranks " : "", p,
                              m[0] ? "; missing: rank " : " (the log does not say which)", m, t->file, t->line);
    if (!rc)
        rc = hdx_cls_set_text(&v->remedy, "find why %s never reached init_process_group (crashed at start, not "
                              "launched, or WORLD_SIZE larger than the processes launched) and relaunch",
                              m[0] ? "the missing rank" : "the missing ranks");
    free(present);
    return rc < 0 ? rc : 1;
}

/* The world size the logs tell (a printed WORLD_SIZE, else NCCL's largest "nranks N" at
 * communicator init), or HDX_UNKNOWN; from (size bytes) says which, for the verdict. */
static long long log_world_size(const hdx_evidence *ev, char *from, size_t size)
{
    long long w = HDX_UNKNOWN, env = HDX_UNKNOWN;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        long long n = is(f, "nccl_comm_init") ? hdx_log_fact_int(f, "nranks", HDX_UNKNOWN)
                      : is(f, "env_world_size") ? hdx_log_fact_int(f, "world_size", HDX_UNKNOWN)
                                                : HDX_UNKNOWN;
        if (n <= 0)
            continue;
        if (is(f, "nccl_comm_init") && n > w)
            w = n;
        else if (is(f, "env_world_size") && n > env)
            env = n;
    }
    if (env > 0)
        snprintf(from, size, "WORLD_SIZE=%lld in the log", env);
    else
        snprintf(from, size, "NCCL's \"nranks %lld\" at communicator init", w);
    return env > 0 ? env : w;
}

static int seq_rule(const hdx_evidence *ev, const seqs *s, hdx_verdict *v)
{
    int *desync = NULL;
    size_t nd = 0;
    const char *desync_how = NULL;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (is(f, "nccl_desync_never_joined") || is(f, "nccl_desync_unfinished")) {
            if (parse_rank_list(hdx_log_fact_field(f, "ranks"), &desync, &nd)) {
                free(desync);
                return -ENOMEM;
            }
            desync_how = is(f, "nccl_desync_never_joined") ? "never joined any collective" : "joined but did not finish it";
        }
    }
    if (s->n == HDX_UNKNOWN && !nd)
        return 0;
    char w[RANKS_TEXT], c[RANKS_TEXT];
    hdx_format_ranges_of(s->waiting, s->n_waiting, w, sizeof w);
    int rc = 0;
    long long world = HDX_UNKNOWN;
    char world_from[96];
    v->cls = HDX_CLASS_COLLECTIVE_WAIT;
    /* the group of the work compared, where the logs show it whole (hdx_log_pgroups) */
    const hdx_pgroup *pg = NULL;
    for (size_t i = 0; i < ev->n_log_ranks && !pg; i++)
        if (ev->log_ranks[i].seq_timed_out == s->n && ev->log_ranks[i].seq_pg)
            pg = hdx_evidence_find_pgroup(ev, ev->log_ranks[i].seq_pg);
    if (pg && !(v->group = strdup(pg->name)))
        return -ENOMEM;
    char on[300] = "";
    if (pg) {
        char gt[256];
        hdx_pgroup_text(ev, (int)(pg - ev->pgroups), gt, sizeof gt);
        snprintf(on, sizeof on, " of %s", gt);
    }
    if (s->n_behind) {
        v->confidence = HDX_CONF_HIGH;
        hdx_format_ranges_of(s->behind, s->n_behind, c, sizeof c);
        const hdx_log_rank *r = hdx_evidence_log_rank(ev, s->behind[0]);
        rc = set_culprits(v, s->behind, s->n_behind);
        if (!rc)
            rc = hdx_cls_set_text(&v->summary,
                                  "rank%s %s never joined %s SeqNum=%lld%s: last enqueued NCCL work %lld (NCCL watchdog), "
                                  "while rank%s %s timed out waiting in it; rank %d's last line (%s:%ld%s%s): \"%s\"",
                                  s->n_behind == 1 ? "" : "s", c, s->op ? s->op : "collective", s->n, on, r->seq_enqueued,
                                  s->n_waiting == 1 ? "" : "s", w, r->rank, r->file ? r->file : "?", r->last_line_no,
                                  r->last_time ? ", " : "", r->last_time ? r->last_time : "",
                                  r->last_line ? r->last_line : "?");
    } else if (nd) {
        v->confidence = HDX_CONF_HIGH;
        hdx_format_ranges_of(desync, nd, c, sizeof c);
        rc = set_culprits(v, desync, nd);
        if (!rc)
            rc = hdx_cls_set_text(&v->summary, "the NCCL desync report names rank%s %s: %s%s%s%s",
                                  nd == 1 ? "" : "s", c, desync_how, s->n_waiting ? "; ranks " : "",
                                  s->n_waiting ? w : "", s->n_waiting ? " timed out waiting" : "");
    } else if (s->n_silent) {
        v->confidence = HDX_CONF_MEDIUM;
        hdx_format_ranges_of(s->silent, s->n_silent, c, sizeof c);
        rc = set_culprits(v, s->silent, s->n_silent);
        if (!rc)
            rc = hdx_cls_set_text(&v->summary,
                                  "rank%s %s timed out in %s SeqNum=%lld; rank%s %s logged no watchdog line for it, so "
                                  "%s likely never joined (the logs show no sequence number for %s)",
                                  s->n_waiting == 1 ? "" : "s", w, s->op ? s->op : "a collective", s->n,
                                  s->n_silent == 1 ? "" : "s", c, s->n_silent == 1 ? "it" : "they",
                                  s->n_silent == 1 ? "it" : "them");
    } else if ((world = log_world_size(ev, world_from, sizeof world_from)) > 0 && (long long)s->n_waiting >= world) {
        /* Every rank of the job waits in it: no rank to blame, the collective's own work is stuck. */
        v->confidence = HDX_CONF_MEDIUM;
        rc = hdx_cls_set_text(&v->summary,
                              world == 1 ? "rank%s %s timed out in %s SeqNum=%lld, and the job has no other rank (world "
                                           "size %lld, from %s): the collective's GPU work never finished (a "
                                           "kernel queued before it, or the GPU itself, is stuck)"
                                         : "rank%s %s timed out in %s SeqNum=%lld: every rank of the job (world size "
                                           "%lld, from %s) is waiting in it, so none is missing: the "
                                           "collective's GPU work never finished (a kernel queued before it, the GPU "
                                           "or the network is stuck)",
                              s->n_waiting == 1 ? "" : "s", w, s->op ? s->op : "a collective", s->n, world, world_from);
        if (!rc)
            rc = hdx_cls_set_text(&v->remedy, "look at the GPU side of the ranks: the kernels queued before the "
                                  "collective (CUDA_LAUNCH_BLOCKING=1 names the one that hangs), nvidia-smi, and the "
                                  "kernel log (dmesg: Xid errors); NCCL_DEBUG=INFO for the network");
        free(desync);
        return rc < 0 ? rc : 1;
    } else {
        v->confidence = HDX_CONF_LOW;
        rc = hdx_cls_set_text(&v->summary,
                              "rank%s %s timed out in %s SeqNum=%lld, and no log line tells which rank never joined it "
                              "(the logs of the other ranks are missing, or they crashed)",
                              s->n_waiting == 1 ? "" : "s", w, s->op ? s->op : "a collective", s->n);
    }
    if (!rc)
        rc = hdx_cls_set_text(&v->remedy, "look at what the culprit ranks did instead (their logs, or hangdx inspect "
                              "while the job hangs): an uneven number of steps, a skipped collective, a crash");
    free(desync);
    return rc < 0 ? rc : 1;
}

/* The DETAIL mismatch: the rank that the most messages name is the odd one out. */
static int detail_rule(const hdx_evidence *ev, hdx_verdict *v)
{
    int *ranks = NULL, *counts = NULL;
    size_t n = 0, nc = 0;
    const hdx_log_fact *first = NULL;
    int rc = 0;
    for (size_t i = 0; i < ev->n_log_facts && !rc; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (!is(f, "detail_collective_mismatch"))
            continue;
        if (!first)
            first = f;
        long long both[2] = {hdx_log_fact_int(f, "rank", -1), hdx_log_fact_int(f, "other_rank", -1)};
        for (int k = 0; k < 2 && !rc; k++) {
            if (both[k] < 0)
                continue;
            size_t j = 0;
            while (j < n && ranks[j] != both[k])
                j++;
            if (j == n) {
                int *slot = hdx_append((void **)&ranks, &n, sizeof *slot);
                int *cs = hdx_append((void **)&counts, &nc, sizeof *cs);
                if (!slot || !cs) {
                    rc = -ENOMEM;
                    break;
                }
                *slot = (int)both[k];
            }
            counts[j]++;
        }
    }
    if (!first || rc) {
        free(ranks);
        free(counts);
        return rc;
    }
    int best = 0, ties = 0;
    for (size_t j = 0; j < n; j++)
        best = counts[j] > best ? counts[j] : best;
    for (size_t j = 0; j < n && !rc; j++)
        if (counts[j] == best) {
            ties++;
            rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, ranks[j]);
        }
    v->cls = HDX_CLASS_COLLECTIVE_WAIT;
    v->confidence = ties == 1 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
    char c[RANKS_TEXT];
    hdx_format_ranges_of(v->culprit_ranks, v->n_culprit_ranks, c, sizeof c);
    if (!rc)
        rc = hdx_cls_set_text(&v->summary,
                              "TORCH_DISTRIBUTED_DEBUG=DETAIL found ranks in different collectives; rank%s %s, named in "
                              "%d mismatch message%s, %s the odd one out (e.g. %s:%ld: rank %s runs %.120s, rank %s runs "
                              "%.120s)",
                              ties == 1 ? "" : "s", c, best, best == 1 ? "" : "s", ties == 1 ? "is" : "are", first->file,
                              first->line, hdx_log_fact_field(first, "rank"), hdx_log_fact_field(first, "op"),
                              hdx_log_fact_field(first, "other_rank"), hdx_log_fact_field(first, "other_op"));
    if (!rc)
        rc = hdx_cls_set_text(&v->remedy, "make every rank call the same collectives in the same order: look at the "
                              "code path that rank %s took", c);
    free(ranks);
    free(counts);
    return rc < 0 ? rc : 1;
}

typedef struct p2p_edge {
    int rank, peer;
    const char *op;
} p2p_edge;

static int gloo_rule(const hdx_evidence *ev, hdx_verdict *v)
{
    p2p_edge *e = NULL;
    size_t n = 0;
    int *timed = NULL, coll = 0;
    size_t nt = 0;
    int rc = 0;
    for (size_t i = 0; i < ev->n_log_facts && !rc; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (!is(f, "gloo_timeout") || f->rank < 0)
            continue;
        if ((rc = hdx_cls_add_int(&timed, &nt, f->rank)))
            break;
        /* the call sites of the same traceback (or, without one, of the same rank) */
        const hdx_log_fact *site = NULL;
        for (size_t k = 0; k < ev->n_log_facts; k++) {
            const hdx_log_fact *g = &ev->log_facts[k];
            if (g->rank != f->rank || (f->traceback && g->traceback != f->traceback))
                continue;
            if (is(g, "python_p2p_call_site"))
                site = g;
            else if (is(g, "python_collective_call_site"))
                coll = 1;
        }
        if (site) {
            p2p_edge *slot = hdx_append((void **)&e, &n, sizeof *slot);
            if (!slot) {
                rc = -ENOMEM;
                break;
            }
            slot->rank = f->rank;
            slot->peer = (int)hdx_log_fact_int(site, "peer", -1);
            slot->op = hdx_log_fact_field(f, "op");
        }
    }
    if (rc || !nt) {
        free(e);
        free(timed);
        return rc;
    }
    char t[RANKS_TEXT], c[RANKS_TEXT];
    hdx_format_ranges_of(timed, nt, t, sizeof t);
    if (!n && coll) {
        /* The ranks the logs know that did not time out never joined the collective. */
        for (size_t i = 0; i < ev->n_log_ranks && !rc; i++) {
            int r = ev->log_ranks[i].rank, in = 0;
            for (size_t k = 0; k < nt; k++)
                in |= timed[k] == r;
            if (!in)
                rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, r);
        }
        if (rc)
            goto out;
        v->cls = HDX_CLASS_COLLECTIVE_WAIT;
        v->confidence = v->n_culprit_ranks ? HDX_CONF_MEDIUM : HDX_CONF_LOW;
        hdx_format_ranges_of(v->culprit_ranks, v->n_culprit_ranks, c, sizeof c);
        if (v->n_culprit_ranks)
            rc = hdx_cls_set_text(&v->summary, "rank%s %s timed out in a gloo collective; rank%s %s logged no timeout, "
                                  "so never joined it", nt == 1 ? "" : "s", t, v->n_culprit_ranks == 1 ? "" : "s", c);
        else
            rc = hdx_cls_set_text(&v->summary, "rank%s %s timed out in a gloo collective; the ranks absent from it are "
                                  "not in the logs", nt == 1 ? "" : "s", t);
        goto out;
    }
    v->cls = HDX_CLASS_P2P_MISMATCH;
    /* the waits-for graph: each rank waits for one peer; follow it to a cycle */
    char edges[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used + 64 < sizeof edges; i++)
        used += (size_t)snprintf(edges + used, sizeof edges - used, "%srank %d waits to %s %d", i ? ", " : "", e[i].rank,
                                 e[i].op && !strcmp(e[i].op, "send") ? "send to" : "receive from", e[i].peer);
    for (size_t i = 0; i < n && !v->n_culprit_ranks && !rc; i++) {
        int at = e[i].rank;
        for (size_t steps = 0; steps <= n; steps++) {
            size_t k = 0;
            while (k < n && e[k].rank != at)
                k++;
            if (k == n)
                break;
            at = e[k].peer;
            if (at == e[i].rank) { /* a cycle through e[i] */
                int r = e[i].rank;
                do {
                    size_t j = 0;
                    while (j < n && e[j].rank != r)
                        j++;
                    rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, r);
                    r = e[j].peer;
                } while (r != e[i].rank && !rc);
                break;
            }
        }
    }
    if (v->n_culprit_ranks) {
        v->confidence = HDX_CONF_HIGH;
        hdx_format_ranges_of(v->culprit_ranks, v->n_culprit_ranks, c, sizeof c);
        rc = hdx_cls_set_text(&v->summary, "pipeline transfers that cannot match: waits-for cycle %s (%s); gloo timed "
                              "out on rank%s %s", c, edges, nt == 1 ? "" : "s", t);
    } else if (n) {
        for (size_t i = 0; i < n && !rc; i++) {
            int peer_timed = 0;
            for (size_t k = 0; k < nt; k++)
                peer_timed |= timed[k] == e[i].peer;
            if (e[i].peer >= 0 && !peer_timed)
                rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, e[i].peer);
        }
        v->confidence = v->n_culprit_ranks ? HDX_CONF_MEDIUM : HDX_CONF_LOW;
        hdx_format_ranges_of(v->culprit_ranks, v->n_culprit_ranks, c, sizeof c);
        rc = rc ? rc : hdx_cls_set_text(&v->summary, "an unmatched point-to-point transfer: %s; the peer %s never "
                                        "answered (gloo timed out on rank%s %s)", edges, c[0] ? c : "?",
                                        nt == 1 ? "" : "s", t);
    } else {
        v->confidence = HDX_CONF_LOW;
        rc = set_culprits(v, timed, nt);
        rc = rc ? rc : hdx_cls_set_text(&v->summary, "gloo send/recv timed out on rank%s %s; no call site in the logs "
                                        "names the peers", nt == 1 ? "" : "s", t);
    }
    if (!rc)
        rc = hdx_cls_set_text(&v->remedy, "pair every send with a recv on the peer, in an order that cannot block "
                              "(e.g. even stages send first, odd stages receive first, or batch_isend_irecv)");
out:
    free(e);
    free(timed);
    return rc < 0 ? rc : 1;
}

static int user_rule(const hdx_evidence *ev, hdx_verdict *v)
{
    static const enum hdx_class classes[] = {HDX_CLASS_BUILD_LOCK, HDX_CLASS_COMPILE_STALL, HDX_CLASS_COLLECTIVE_WAIT,
                                             HDX_CLASS_P2P_MISMATCH, HDX_CLASS_RENDEZVOUS_WAIT, HDX_CLASS_CONFIG_ERROR,
                                             HDX_CLASS_NOT_HUNG};
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (f->strength != HDX_LOG_STRONG || !f->cls)
            continue;
        for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
            if (strcmp(hdx_class_name(classes[c]), f->cls))
                continue;
            v->cls = classes[c];
            v->confidence = HDX_CONF_MEDIUM;
            for (size_t k = 0; k < ev->n_log_facts; k++)
                if (!strcmp(ev->log_facts[k].pattern, f->pattern) && ev->log_facts[k].rank >= 0 &&
                    hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, ev->log_facts[k].rank))
                    return -ENOMEM;
            int rc = hdx_cls_set_text(&v->summary, "the pattern %s (%s) matched %s:%ld: \"%s\"", f->pattern, f->proves,
                                      f->file, f->line, f->text);
            return rc < 0 ? rc : 1;
        }
    }
    return 0;
}

static int exits_rule(const hdx_evidence *ev, hdx_verdict *v)
{
    char causes[600] = "";
    size_t used = 0;
    int root = -1;
    for (size_t i = 0; i < ev->n_log_ranks && used + 80 < sizeof causes; i++) {
        const hdx_log_rank *r = &ev->log_ranks[i];
        if (!r->exit_cause)
            continue;
        used += (size_t)snprintf(causes + used, sizeof causes - used, "%srank %d: %.100s%s", used ? "; " : "", r->rank,
                                 r->exit_cause, r->root_cause ? " (first observed failure)" : "");
        if (r->root_cause)
            root = r->rank;
    }
    int elastic = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++)
        elastic |= is(&ev->log_facts[i], "elastic_child_failed");
    if (!used || !elastic)
        return 0;
    v->cls = HDX_CLASS_UNKNOWN;
    v->confidence = HDX_CONF_LOW;
    if (root >= 0 && hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, root))
        return -ENOMEM;
    int rc = hdx_cls_set_text(&v->summary, "the job ended (torch elastic ChildFailedError), no hang rule matched: %s",
                              causes);
    if (!rc && root >= 0)
        rc = hdx_cls_set_text(&v->remedy, "start from rank %d, the first observed failure: its own log", root);
    return rc < 0 ? rc : 1;
}

/* The weak Megatron last line: a question, answered from other evidence or left unchecked. */
static int weak_question(const hdx_evidence *ev, hdx_verdict *v, char *buf, size_t size)
{
    buf[0] = 0;
    int *ranks = NULL;
    size_t n = 0;
    for (size_t i = 0; i < ev->n_log_ranks; i++)
        if (ev->log_ranks[i].last_pattern && !strcmp(ev->log_ranks[i].last_pattern, "megatron_params_dtype") &&
            hdx_cls_add_int(&ranks, &n, ev->log_ranks[i].rank)) {
            free(ranks);
            return -ENOMEM;
        }
    if (!n) {
        free(ranks);
        return 0;
    }
    char r[RANKS_TEXT];
    hdx_format_ranges_of(ranks, n, r, sizeof r);
    free(ranks);
    int build = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++)
        build |= !strncmp(ev->log_facts[i].pattern, "cpp_extension_", 14);
    if (ev->n_locks || build)
        snprintf(buf, size, "rank%s %s last logged Megatron's \"using torch.float16 for parameters ...\", which ends "
                 "both a stale fused-kernel lock and unrelated multi-node hangs; answered from the %s",
                 n == 1 ? "" : "s", r, ev->n_locks ? "lock evidence" : "cpp_extension build lines");
    else
        snprintf(buf, size, "rank%s %s last logged Megatron's \"using torch.float16 for parameters ...\", which ends "
                 "both a stale fused-kernel lock and unrelated multi-node hangs; unchecked: no lock, trace or build "
                 "line tells which (run 'hangdx locks' on the fused_kernels/build directory, or 'hangdx inspect' "
                 "while the job hangs)", n == 1 ? "" : "s", r);
    return hdx_cls_note(v, "%s", buf) < 0 ? -ENOMEM : 1;
}

static int decide(const hdx_evidence *ev, hdx_verdict *v)
{
    int r = config_rule(ev, v);
    if (r)
        return r;
    seqs s;
    if ((r = seqs_of(ev, &s)) == 0 && (r = build_rule(ev, &s, v)) == 0 && (r = store_rule(ev, v)) == 0 &&
        (r = seq_rule(ev, &s, v)) == 0 && (r = detail_rule(ev, v)) == 0 && (r = gloo_rule(ev, v)) == 0 &&
        (r = user_rule(ev, v)) == 0)
        r = exits_rule(ev, v);
    seqs_free(&s);
    return r;
}

/* A note per culprit rank: its last log line. */
static int note_culprits(const hdx_evidence *ev, hdx_verdict *v)
{
    for (size_t i = 0; i < v->n_culprit_ranks && i < 16; i++) {
        const hdx_log_rank *r = hdx_evidence_log_rank(ev, v->culprit_ranks[i]);
        if (r && r->last_line && hdx_cls_note(v, "rank %d's last log line (%s:%ld%s%s): %s%s%s", r->rank, r->file,
                                              r->last_line_no, r->last_time ? ", " : "",
                                              r->last_time ? r->last_time : "", r->last_line,
                                              r->exit_cause ? "; it ended with " : "",
                                              r->exit_cause ? r->exit_cause : ""))
            return -ENOMEM;
    }
    return 0;
}

int hdx_cls_logs(const hdx_evidence *ev, hdx_verdict *v, int may_decide)
{
    if (!ev->n_log_facts && !ev->n_log_ranks)
        return 0;
    char question[600];
    int q = weak_question(ev, v, question, sizeof question);
    if (q < 0)
        return q;
    if (!may_decide) {
        hdx_verdict lv;
        memset(&lv, 0, sizeof lv);
        int r = decide(ev, &lv);
        if (r > 0 && hdx_cls_note(v, "the job logs alone would say %s: %s", hdx_class_name(lv.cls), lv.summary))
            r = -ENOMEM;
        hdx_verdict_clear(&lv);
        return r < 0 ? r : 0;
    }
    int r = decide(ev, v);
    if (r < 0)
        return r;
    if (r == 0 && has_stacks(ev))
        return 0;
    if (r == 0) {
        v->cls = HDX_CLASS_UNKNOWN;
        v->confidence = HDX_CONF_LOW;
        if (hdx_cls_set_text(&v->summary, "the job logs hold no line that decides a hang class%s%s",
                             q ? "; " : "", q ? question : ""))
            return -ENOMEM;
    }
    if (note_culprits(ev, v))
        return -ENOMEM;
    return 1;
}
