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
 *  6. a user pattern's class; torch elastic's failures;
 *  7. with no stack, the phase of Megatron's start-up where the logs stop (weak milestones:
 *     low confidence, never build_lock); otherwise unknown.
 * A decided verdict carries the phase as a fact when the logs show a milestone.
 * Each outcome is a finding (HDX_FIND_LOG_*) with the facts its words need
 * (docs/design.md "Findings"); report/words_logs.c words them.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "classify/waitsfor.h"
#include "model/util.h"

#define RANKS_TEXT 256

static int is(const hdx_log_fact *f, const char *name) { return !strcmp(f->pattern, name); }

/* What a log verdict rests on: the lines its rule cites, by strength and rank. The rule's
 * confidence is then held to what they allow (allowed; docs/design.md "Confidence of a log
 * verdict"). A rule cites only on the path where it decides. */
typedef struct basis {
    size_t strong, weak; /* the lines cited of each strength */
    int rank;            /* the rank of the first cited line of a known rank, HDX_UNKNOWN */
    int ranks;           /* the known ranks among them: 0, 1, or 2 for two or more */
} basis;

static void cite(basis *b, enum hdx_log_strength strength, int rank)
{
    if (strength == HDX_LOG_STRONG)
        b->strong++;
    else
        b->weak++;
    if (rank < 0 || b->ranks == 2 || (b->ranks == 1 && rank == b->rank))
        return;
    if (!b->ranks++)
        b->rank = rank;
}

static void cite_fact(basis *b, const hdx_log_fact *f) { cite(b, f->strength, f->rank); }

/* The highest confidence the cited lines allow: any with a strong line, or with weak lines of
 * two ranks or more (they agree); medium with weak lines of one rank; low with one weak line,
 * or none. */
static enum hdx_confidence allowed(const basis *b)
{
    if (b->strong || b->ranks == 2)
        return HDX_CONF_HIGH;
    return b->weak > 1 ? HDX_CONF_MEDIUM : HDX_CONF_LOW;
}

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

/* The line of the last value of a Megatron argument, or NULL. */
static const hdx_log_fact *megatron_arg_line(const hdx_evidence *ev, const char *name)
{
    const hdx_log_fact *last = NULL;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        const char *s = is(f, "megatron_argument") ? hdx_log_fact_field(f, "setting") : NULL;
        if (s && !strcmp(s, name))
            last = f;
    }
    return last;
}

/* The last value of a Megatron argument, or NULL. */
static const char *megatron_arg(const hdx_evidence *ev, const char *name)
{
    const hdx_log_fact *f = megatron_arg_line(ev, name);
    return f ? hdx_log_fact_field(f, "value") : NULL;
}

/* Cite the lines of the Megatron arguments names[0..n) that the logs print. */
static void cite_args(const hdx_evidence *ev, basis *b, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const hdx_log_fact *f = megatron_arg_line(ev, names[i]);
        if (f)
            cite_fact(b, f);
    }
}

static long arg_long(const hdx_evidence *ev, const char *name)
{
    const char *s = megatron_arg(ev, name);
    char *end;
    long v = s ? strtol(s, &end, 10) : -1;
    return s && end != s ? v : -1;
}

/* The first log fact from index `from` on whose pattern is name, or, with prefix, starts with
 * name; NULL when there is none. */
static const hdx_log_fact *find_fact(const hdx_evidence *ev, size_t from, const char *name, int prefix)
{
    size_t len = strlen(name);
    for (size_t i = from; i < ev->n_log_facts; i++)
        if (prefix ? !strncmp(ev->log_facts[i].pattern, name, len) : is(&ev->log_facts[i], name))
            return &ev->log_facts[i];
    return NULL;
}

/* The first all-gather that a watchdog timed out on, or NULL. */
static const hdx_log_fact *allgather_symptom(const hdx_evidence *ev)
{
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        const char *op = hdx_log_fact_field(f, "op");
        if ((is(f, "nccl_watchdog_timeout") || is(f, "nccl_watchdog_timeout_old")) && op && strcasestr(op, "allgather"))
            return f;
    }
    return NULL;
}

/* 1 (decided) for 0, else the error. */
static int decided(int rc) { return rc < 0 ? rc : 1; }

/* The log line that decided, as facts: file, line (its number) and text. 0 or -ENOMEM. */
static int set_line(hdx_verdict *v, const hdx_log_fact *f)
{
    int rc = hdx_verdict_set_text(v, "file", f->file);
    if (!rc)
        rc = hdx_verdict_set_num(v, "line", f->line);
    return rc ? rc : hdx_verdict_set_text(v, "text", f->text);
}

/* Set the nums of facts names[0..n) to nums[0..n). 0 or -ENOMEM. */
static int set_nums(hdx_verdict *v, const char *const *names, const long long *nums, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (hdx_verdict_set_num(v, names[i], nums[i]))
            return -ENOMEM;
    return 0;
}

/* Megatron's world-size check, in the wording of its release (the config_world_not_divisible*
 * patterns): the world size, the sizes the message prints (tp, pp, cp), and the model-parallel
 * size that does not divide it (model_size: printed, the encoder's plus the decoder's, or TP x
 * PP x CP when the message prints them all). A size the message does not print is no fact.
 * 0 or -ENOMEM. */
static int world_not_divisible(const hdx_log_fact *f, hdx_verdict *v)
{
    static const char *const names[] = {"world_size", "tp", "pp", "cp"};
    long long n[4], model = hdx_log_fact_int(f, "model_size", HDX_UNKNOWN);
    for (size_t k = 0; k < 4; k++) {
        n[k] = hdx_log_fact_int(f, names[k], HDX_UNKNOWN);
        if (n[k] != HDX_UNKNOWN && hdx_verdict_set_num(v, names[k], n[k]))
            return -ENOMEM;
    }
    long long enc = hdx_log_fact_int(f, "encoder_model_size", HDX_UNKNOWN),
              dec = hdx_log_fact_int(f, "decoder_model_size", HDX_UNKNOWN);
    if (model == HDX_UNKNOWN && enc != HDX_UNKNOWN && dec != HDX_UNKNOWN)
        model = enc + dec;
    if (model == HDX_UNKNOWN && n[1] > 0 && n[2] > 0)
        model = n[1] * n[2] * (n[3] > 0 ? n[3] : 1);
    v->finding = HDX_FIND_LOG_CONFIG_WORLD_NOT_DIVISIBLE;
    /* 2021-2023: two {} for three values, so no pipeline-parallel size in the message */
    if (is(f, "config_world_not_divisible_mp") && hdx_verdict_set_num(v, "pp_unprinted", 1))
        return -ENOMEM;
    return model == HDX_UNKNOWN ? 0 : hdx_verdict_set_num(v, "model_size", model);
}

/* A configuration error that a log line states (a strong config_* pattern): its
 * setting and values, facts of the verdict. */
static int config_line(const hdx_log_fact *f, hdx_verdict *v)
{
    int rc = set_line(v, f);
    if (!rc)
        rc = hdx_verdict_set_text(v, "fix", hdx_log_fact_field(f, "fix"));
    if (rc)
        return rc;
    if (!strncmp(f->pattern, "config_world_not_divisible", 26))
        return world_not_divisible(f, v);
    if (is(f, "config_duplicate_gpu")) {
        long long other = hdx_log_fact_int(f, "other_rank", HDX_UNKNOWN);
        if (other >= 0 && other <= INT_MAX && hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, (int)other))
            return -ENOMEM;
        v->finding = HDX_FIND_LOG_CONFIG_DUPLICATE_GPU;
        rc = hdx_verdict_set_num(v, "rank", hdx_log_fact_int(f, "rank", HDX_UNKNOWN));
        if (!rc)
            rc = hdx_verdict_set_num(v, "other_rank", other);
        return rc ? rc : hdx_verdict_set_text(v, "device", hdx_log_fact_field(f, "device"));
    }
    static const char *const names[] = {"setting", "value_a", "value_a_label", "value_b", "value_b_label"};
    v->finding = HDX_FIND_LOG_CONFIG_MISMATCH;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (hdx_verdict_set_text(v, names[k], hdx_log_fact_field(f, names[k])))
            return -ENOMEM;
    return 0;
}

static int config_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    static const char *const sizes[] = {"world_size", "tp", "pp", "cp", "dp"};
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (f->strength != HDX_LOG_STRONG || strncmp(f->pattern, "config_", 7))
            continue;
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        for (size_t k = 0; k < ev->n_log_facts; k++)
            if (!strcmp(ev->log_facts[k].pattern, f->pattern)) {
                cite_fact(b, &ev->log_facts[k]);
                if (ev->log_facts[k].rank >= 0 &&
                    hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, ev->log_facts[k].rank))
                    return -ENOMEM;
            }
        return decided(config_line(f, v));
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
        long long nums[] = {w, tp, pp, cp, dp};
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        v->finding = HDX_FIND_LOG_PARALLEL_SIZES;
        cite_fact(b, f);
        int rc = set_nums(v, sizes, nums, 5);
        return decided(rc ? rc : set_line(v, f));
    }
    /* Megatron's printed arguments. */
    long seq = arg_long(ev, "seq_length"), tp = arg_long(ev, "tensor_model_parallel_size");
    const char *sp = megatron_arg(ev, "sequence_parallel");
    /* mappings.py's assertion on the tensor-parallel ranks */
    const hdx_log_fact *sp_assert = find_fact(ev, 0, "megatron_sp_first_dim", 0);
    if ((sp && !strcmp(sp, "True") && seq > 0 && tp > 0 && seq % tp) || sp_assert) {
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        v->finding = HDX_FIND_LOG_SEQUENCE_PARALLEL;
        static const char *const sp_args[] = {"seq_length", "tensor_model_parallel_size", "sequence_parallel"};
        cite_args(ev, b, sp_args, 3);
        const hdx_log_fact *symptom = allgather_symptom(ev);
        int rc = 0;
        for (size_t k = 0; sp_assert && k < ev->n_log_facts && !rc; k++)
            if (is(&ev->log_facts[k], "megatron_sp_first_dim")) {
                cite_fact(b, &ev->log_facts[k]);
                if (ev->log_facts[k].rank >= 0)
                    rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, ev->log_facts[k].rank);
            }
        if (!rc && sp_assert && !(rc = set_line(v, sp_assert)))
            rc = hdx_verdict_set_ints(v, "asserted", v->culprit_ranks, v->n_culprit_ranks);
        if (!rc && seq > 0)
            rc = hdx_verdict_set_num(v, "seq_length", seq);
        if (!rc && tp > 0)
            rc = hdx_verdict_set_num(v, "tp", tp);
        if (!rc && symptom && !(rc = hdx_verdict_set_num(v, "symptom_rank", symptom->rank)) &&
            !(rc = hdx_verdict_set_text(v, "symptom_op", hdx_log_fact_field(symptom, "op"))))
            rc = hdx_verdict_set_num(v, "symptom_seq", hdx_log_fact_int(symptom, "seq", HDX_UNKNOWN));
        return decided(rc);
    }
    long w = arg_long(ev, "world_size"), pp = arg_long(ev, "pipeline_model_parallel_size"),
         dp = arg_long(ev, "data_parallel_size"), cp = arg_long(ev, "context_parallel_size");
    if (cp < 1)
        cp = 1;
    if (w > 0 && tp > 0 && pp > 0 && dp > 0 && tp * pp * cp * dp != w) {
        v->cls = HDX_CLASS_CONFIG_ERROR;
        v->confidence = HDX_CONF_HIGH;
        v->finding = HDX_FIND_LOG_PARALLEL_ARGS;
        static const char *const args[] = {"world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
                                           "context_parallel_size", "data_parallel_size"};
        cite_args(ev, b, args, 5);
        long long nums[] = {w, tp, pp, cp, dp};
        return decided(set_nums(v, sizes, nums, 5));
    }
    return 0;
}

/* The NCCL work counters of one process group, compared across the ranks that logged them
 * (docs/design.md "Job logs"). */
typedef struct seq_group {
    const char *pg;    /* as the counters name it (hdx_log_seq.pg); NULL the default group */
    long long n;       /* the highest work a watchdog of the group timed out on, HDX_UNKNOWN */
    const char *op;
    int *waiting;      /* ranks that timed out on it */
    size_t n_waiting;
    int *behind;       /* ranks whose last enqueued work of the group is below it */
    size_t n_behind;
    int several;       /* two global ranks at one group rank: the name is several groups' */
} seq_group;

typedef struct seqs {
    long long n;       /* the work the culprits' group waits in (the highest timed out), HDX_UNKNOWN */
    const char *op;
    const char *pg;    /* that group, as the counters name it */
    const int *waiting; /* ranks that timed out on it (borrowed from groups) */
    size_t n_waiting;
    int *behind;       /* the culprits: ranks behind in a group, which the graph finds waiting on nobody */
    size_t n_behind;
    long long enqueued; /* the first culprit's last enqueued work of pg, HDX_UNKNOWN */
    int *silent;       /* ranks the logs know that logged no counters */
    size_t n_silent;
    seq_group *groups;
    size_t n_groups;
    hdx_waitsfor *graph; /* the waits-for graph of the counters (heap), or NULL; seq_rule hands it on */
} seqs;

static void seqs_free(seqs *s)
{
    for (size_t i = 0; i < s->n_groups; i++) {
        free(s->groups[i].waiting);
        free(s->groups[i].behind);
    }
    free(s->groups);
    free(s->behind);
    free(s->silent);
    hdx_waitsfor_free(s->graph);
    free(s->graph);
}

/* Rank r's counters of group pg into *out, 1 when it logged any. The default group's (pg NULL)
 * are its lines of the default group and its bare "[Rank n]" lines whose n is its rank. */
static int counters_of(const hdx_log_rank *r, const char *pg, hdx_log_seq *out)
{
    int any = 0;
    out->timed_out = out->enqueued = out->completed = HDX_UNKNOWN;
    out->op = NULL;
    out->group_rank = HDX_UNKNOWN;
    for (size_t i = 0; i < r->n_seqs; i++) {
        const hdx_log_seq *q = &r->seqs[i];
        if (q->unplaced ? pg || q->group_rank != r->rank : !hdx_str_same(q->pg, pg))
            continue;
        any = 1;
        if (out->timed_out == HDX_UNKNOWN)
            out->timed_out = q->timed_out;
        if (out->enqueued == HDX_UNKNOWN) {
            out->enqueued = q->enqueued;
            out->completed = q->completed;
        }
        if (!out->op)
            out->op = q->op;
        if (out->group_rank == HDX_UNKNOWN)
            out->group_rank = q->group_rank;
    }
    return any;
}

/* The group named pg in s->groups, made at the first. NULL on ENOMEM. */
static seq_group *group_of(seqs *s, const char *pg)
{
    for (size_t i = 0; i < s->n_groups; i++)
        if (hdx_str_same(s->groups[i].pg, pg))
            return &s->groups[i];
    seq_group *g = hdx_append((void **)&s->groups, &s->n_groups, sizeof *g);
    if (g) {
        g->pg = pg;
        g->n = HDX_UNKNOWN;
    }
    return g;
}

/* Each group's counters compared: the highest work timed out, who waits in it, who is behind. */
static int compare_groups(const hdx_evidence *ev, seqs *s)
{
    for (size_t i = 0; i < ev->n_log_ranks; i++)
        for (size_t k = 0; k < ev->log_ranks[i].n_seqs; k++) {
            const hdx_log_seq *q = &ev->log_ranks[i].seqs[k];
            if (!q->unplaced || q->group_rank == ev->log_ranks[i].rank) {
                if (!group_of(s, q->unplaced ? NULL : q->pg))
                    return -ENOMEM;
            }
        }
    for (size_t gi = 0; gi < s->n_groups; gi++) {
        seq_group *g = &s->groups[gi];
        hdx_log_seq c;
        for (size_t i = 0; i < ev->n_log_ranks; i++)
            if (counters_of(&ev->log_ranks[i], g->pg, &c) && c.timed_out > g->n) {
                g->n = c.timed_out;
                g->op = c.op;
            }
        /* torch 2.2 and 2.3 number the groups per rank ("[PG 1 Rank 0]" on two tensor-parallel
         * groups): a number whose group rank two global ranks claim names several groups */
        for (size_t i = 0; g->pg && i < ev->n_log_ranks && !g->several; i++) {
            hdx_log_seq a, b;
            if (!counters_of(&ev->log_ranks[i], g->pg, &a) || a.group_rank < 0)
                continue;
            for (size_t k = i + 1; k < ev->n_log_ranks && !g->several; k++)
                g->several = counters_of(&ev->log_ranks[k], g->pg, &b) && b.group_rank == a.group_rank;
        }
        if (g->n == HDX_UNKNOWN || g->several)
            continue;
        for (size_t i = 0; i < ev->n_log_ranks; i++) {
            const hdx_log_rank *r = &ev->log_ranks[i];
            int rc = 0;
            if (!counters_of(r, g->pg, &c))
                continue;
            if (c.enqueued != HDX_UNKNOWN && c.enqueued < g->n)
                rc = hdx_cls_add_int(&g->behind, &g->n_behind, r->rank);
            else if (c.timed_out == g->n)
                rc = hdx_cls_add_int(&g->waiting, &g->n_waiting, r->rank);
            if (rc)
                return -ENOMEM;
        }
    }
    return 0;
}

/* The process group of counters named pg, as an index into ev->pgroups (the logs show it whole:
 * hdx_log_pgroups), the default group for NULL, else HDX_UNKNOWN: not known (*world: 1 for the
 * default group not known, taken as the world). */
static int pgroup_of(const hdx_evidence *ev, const char *pg, int *world)
{
    *world = 0;
    const hdx_pgroup *g = pg ? hdx_evidence_find_pgroup(ev, pg) : NULL;
    for (size_t i = 0; !pg && !g && i < ev->n_pgroups; i++)
        if (ev->pgroups[i].is_default)
            g = &ev->pgroups[i];
    *world = !pg && !g;
    return g ? (int)(g - ev->pgroups) : HDX_UNKNOWN;
}

static long long log_world_size(const hdx_evidence *ev, int *from_env);

/*
 * The waits-for graph of the counters (waitsfor.h, as the live path builds it from stacks): each
 * rank that timed out on a group's highest work waits in that collective on that group, and so
 * waits for the members not in it, the ranks behind among them. The ranks behind that wait for
 * nobody known are the culprits: a rank behind in one group because it waits in another
 * group's collective is not. Only groups whose members the logs show take part (and the
 * default group, taken as the world when its members are not shown). 0 or -ENOMEM.
 */
static int counters_graph(const hdx_evidence *ev, seqs *s)
{
    hdx_wf_wait *waits = NULL;
    size_t n = 0;
    int world = HDX_UNKNOWN, rc = 0, from_env = 0;
    for (size_t i = 0; i < ev->n_log_ranks; i++)
        if (ev->log_ranks[i].rank >= world)
            world = ev->log_ranks[i].rank + 1;
    long long w = log_world_size(ev, &from_env);
    if (w > world && w <= INT_MAX)
        world = (int)w;
    for (size_t gi = 0; gi < s->n_groups && !rc; gi++) {
        const seq_group *g = &s->groups[gi];
        int as_world, pg = pgroup_of(ev, g->pg, &as_world);
        if (g->n == HDX_UNKNOWN || g->several || (pg == HDX_UNKNOWN && !as_world))
            continue;
        for (size_t k = 0; k < g->n_waiting && !rc; k++) {
            int dup = 0;
            for (size_t j = 0; j < n; j++)
                dup |= waits[j].rank == g->waiting[k]; /* a rank waits in its first group's call */
            hdx_wf_wait *slot = dup ? NULL : hdx_append((void **)&waits, &n, sizeof *slot);
            if (!dup && !slot)
                rc = -ENOMEM;
            else if (slot)
                *slot = (hdx_wf_wait){g->waiting[k], g->op, pg};
        }
    }
    /* A world larger than the rules take (a rank 16777215 in a prefix, a claimed WORLD_SIZE):
     * its members are the ranks the logs show (hdx_waitsfor_build_waits). */
    int *shown = NULL;
    size_t n_shown = 0;
    if (!rc && n && world > HDX_WORLD_SIZE_TAKEN) {
        world = HDX_UNKNOWN;
        if (!(shown = malloc((ev->n_log_ranks ? ev->n_log_ranks : 1) * sizeof *shown)))
            rc = -ENOMEM;
        for (size_t i = 0; shown && i < ev->n_log_ranks; i++)
            if (ev->log_ranks[i].rank >= 0)
                shown[n_shown++] = ev->log_ranks[i].rank;
    }
    if (!rc && n && !(s->graph = calloc(1, sizeof *s->graph)))
        rc = -ENOMEM;
    if (!rc && n)
        rc = hdx_waitsfor_build_waits(ev, waits, n, world, shown, n_shown, s->graph);
    free(shown);
    free(waits);
    return rc;
}

/* Is rank a culprit of the counters: behind, and waiting for nobody known in the graph? */
static int counters_culprit(const seqs *s, int rank)
{
    const hdx_wf_rank *r = s->graph ? hdx_waitsfor_rank(s->graph, rank) : NULL;
    return !r || r->culprit;
}

static int seqs_of(const hdx_evidence *ev, seqs *s)
{
    memset(s, 0, sizeof *s);
    s->n = s->enqueued = HDX_UNKNOWN;
    int rc = compare_groups(ev, s);
    size_t behind = 0;
    for (size_t gi = 0; gi < s->n_groups; gi++)
        behind += s->groups[gi].n_behind;
    if (!rc && behind)
        rc = counters_graph(ev, s);
    /* the group decided: of those where a culprit is behind, the one with the most ranks waiting
     * (the first such in the logs on a tie), else the one with the highest work timed out */
    const seq_group *main = NULL;
    for (size_t gi = 0; !rc && gi < s->n_groups; gi++) {
        const seq_group *g = &s->groups[gi];
        for (size_t k = 0; k < g->n_behind && !rc; k++) {
            if (!counters_culprit(s, g->behind[k]))
                continue;
            if (!main || g->n_waiting > main->n_waiting)
                main = g;
            int known = 0;
            for (size_t j = 0; j < s->n_behind; j++)
                known |= s->behind[j] == g->behind[k];
            if (!known)
                rc = hdx_cls_add_int(&s->behind, &s->n_behind, g->behind[k]);
        }
    }
    for (size_t gi = 0; !main && gi < s->n_groups; gi++)
        if (s->groups[gi].n > (main ? main->n : HDX_UNKNOWN))
            main = &s->groups[gi];
    if (main) {
        s->n = main->n;
        s->op = main->op;
        s->pg = main->pg;
        s->waiting = main->waiting;
        s->n_waiting = main->n_waiting;
        hdx_log_seq c;
        for (size_t k = 0; k < main->n_behind && s->enqueued == HDX_UNKNOWN; k++)
            if (counters_culprit(s, main->behind[k]) &&
                counters_of(hdx_evidence_log_rank(ev, main->behind[k]), main->pg, &c))
                s->enqueued = c.enqueued;
    }
    for (size_t i = 0; !rc && s->n != HDX_UNKNOWN && i < ev->n_log_ranks; i++)
        if (!ev->log_ranks[i].n_seqs)
            rc = hdx_cls_add_int(&s->silent, &s->n_silent, ev->log_ranks[i].rank);
    return rc;
}

static int is_build_line(const char *pattern)
{
    return pattern && (!strcmp(pattern, "cpp_extension_emit") || !strcmp(pattern, "cpp_extension_building") ||
                       !strcmp(pattern, "cpp_extension_allowing_ninja"));
}

/* 1 when r is among the n ranks of rs. */
static int has_rank(const int *rs, size_t n, int r)
{
    for (size_t i = 0; i < n; i++)
        if (rs[i] == r)
            return 1;
    return 0;
}

/*
 * The ranks of [from, to) that neither a[0..na) nor b[0..nb) holds, appended to *out (ascending,
 * each once; at most HDX_RANKS_NAMED of them, classify_impl.h), and how many there are in *count
 * (NULL: not wanted):
 * the ranks of a world that the lines read do not show. The gaps between the ranks shown, from a
 * sorted copy, so that the work grows with the lines read, not with the world (to may be
 * HDX_WORLD_SIZE_TAKEN). 0 or -ENOMEM.
 */
static int ranks_not_in(long long from, long long to, const int *a, size_t na, const int *b, size_t nb, int **out,
                        size_t *n_out, long long *count)
{
    int *s = malloc((na + nb + 1) * sizeof *s);
    if (!s)
        return -ENOMEM;
    if (na) /* a or b may be NULL when empty */
        memcpy(s, a, na * sizeof *s);
    if (nb)
        memcpy(s + na, b, nb * sizeof *s);
    qsort(s, na + nb, sizeof *s, hdx_cmp_int);
    int rc = 0;
    long long next = from, total = 0; /* the first rank not yet placed; the ranks not in */
    for (size_t i = 0; !rc && i <= na + nb && next < to; i++) {
        long long upto = i < na + nb && s[i] < to ? s[i] : to; /* the gap: [next, upto) */
        for (long long r = next; !rc && r < upto && *n_out < HDX_RANKS_NAMED; r++)
            rc = hdx_cls_append_int(out, n_out, (int)r);
        total += upto > next ? upto - next : 0;
        next = upto + 1 > next ? upto + 1 : next;
    }
    if (count)
        *count = total;
    free(s);
    return rc;
}

/* Cite the build lines (and the starts of cpp_extension.load) of the ranks builders[0..n). */
static void cite_builds(const hdx_evidence *ev, basis *b, const int *builders, size_t n)
{
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if ((is_build_line(f->pattern) || is(f, "cpp_extension_root")) && has_rank(builders, n, f->rank))
            cite_fact(b, f);
    }
}

/* The facts of the collective the watchdogs timed out on: its SeqNum, op, and the ranks
 * that waited in it. 0 or -ENOMEM. */
static int set_seq_facts(hdx_verdict *v, const seqs *s)
{
    int rc = hdx_verdict_set_num(v, "seq", s->n);
    if (!rc)
        rc = hdx_verdict_set_text(v, "op", s->op);
    if (!rc)
        rc = hdx_verdict_set_ints(v, "waiting", s->waiting, s->n_waiting);
    return rc;
}

/* Cite one line of strength on each of ranks[0..n): the watchdog timeouts of the waiting ranks
 * (strong), the last lines of ranks (weak: a line proves little for being a rank's last, its
 * log may have been cut). */
static void cite_ranks(basis *b, enum hdx_log_strength strength, const int *ranks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cite(b, strength, ranks[i]);
}

static int build_rule(const hdx_evidence *ev, const seqs *s, hdx_verdict *v, basis *b)
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
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->confidence = HDX_CONF_MEDIUM;
    v->finding = HDX_FIND_LOG_BUILD_LOCK;
    cite_ranks(b, HDX_LOG_STRONG, s->waiting, s->n_waiting);
    cite_builds(ev, b, builders, nb);
    int rc = set_culprits(v, builders, nb);
    if (!rc)
        rc = hdx_verdict_set_ints(v, "building", builders, nb);
    if (!rc)
        rc = set_seq_facts(v, s);
    if (!rc)
        rc = hdx_verdict_set_text(v, "build_dir", dir);
    if (!rc)
        rc = hdx_verdict_set_text(v, "extension", ext);
    free(builders);
    return decided(rc);
}

/* Did any rank load extension ext (any extension, for NULL): cpp_extension's "Loading extension
 * module", DeepSpeed's "Time to load ... op"? */
static int loaded_by_any(const hdx_evidence *ev, const char *ext)
{
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        const char *e = hdx_log_fact_field(f, "extension");
        if ((is(f, "cpp_extension_loading") || is(f, "deepspeed_op_loaded")) && (!ext || (e && !strcmp(e, ext))))
            return 1;
    }
    return 0;
}

/* A JIT build that no rank finished, in a log without a watchdog timeout (the job hangs
 * until killed): ranks whose last line is a cpp_extension build line (DeepSpeed's op
 * builder, Megatron's fused kernels), and the ranks whose last line is the start of
 * cpp_extension.load, which wait for the build directory's lock. */
static int build_unfinished_rule(const hdx_evidence *ev, const seqs *s, hdx_verdict *v, basis *b)
{
    if (s->n != HDX_UNKNOWN)
        return 0;
    int *builders = NULL, *waiting = NULL;
    size_t nb = 0, nw = 0;
    int rc = 0;
    for (size_t i = 0; i < ev->n_log_ranks && !rc; i++) {
        const hdx_log_rank *r = &ev->log_ranks[i];
        if (is_build_line(r->last_pattern))
            rc = hdx_cls_add_int(&builders, &nb, r->rank);
        else if (r->last_pattern && !strcmp(r->last_pattern, "cpp_extension_root"))
            rc = hdx_cls_add_int(&waiting, &nw, r->rank);
    }
    if (rc || (!nb && !nw))
        goto out;
    if (!nb) {
        /* every rank stopped at the start of cpp_extension.load and none began a build: they wait
         * for a lock that no rank of this job took (an earlier run's, or another job's) */
        const char *root = NULL;
        for (size_t i = 0; i < ev->n_log_facts; i++) {
            const hdx_log_fact *f = &ev->log_facts[i];
            if (!strncmp(f->pattern, "cpp_extension_", 14) && !is(f, "cpp_extension_root"))
                goto out; /* a build or a load: not this */
            if (is(f, "deepspeed_op_loaded"))
                goto out;
            if (is(f, "cpp_extension_root") && !root)
                root = hdx_log_fact_field(f, "root");
        }
        v->cls = HDX_CLASS_BUILD_LOCK;
        v->confidence = HDX_CONF_LOW; /* a log cut short during a build elsewhere reads the same */
        v->finding = HDX_FIND_LOG_BUILD_UNFINISHED;
        cite_ranks(b, HDX_LOG_WEAK, waiting, nw);
        rc = hdx_verdict_set_ints(v, "waiting", waiting, nw);
        if (!rc)
            rc = hdx_verdict_set_text(v, "root", root);
        if (!rc)
            rc = 1;
        goto out;
    }
    const char *dir = NULL, *ext = NULL, *root = NULL;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (f->rank != builders[0])
            continue;
        if (is(f, "cpp_extension_emit"))
            dir = hdx_log_fact_field(f, "build_dir");
        else if (is(f, "cpp_extension_building"))
            ext = hdx_log_fact_field(f, "extension");
        else if (is(f, "cpp_extension_root"))
            root = hdx_log_fact_field(f, "root");
    }
    if (loaded_by_any(ev, ext))
        goto out; /* another rank loaded what it built: the build ended, whatever its log shows */
    char *joined = !dir && root && ext ? hdx_asprintf("%s/%s", root, ext) : NULL;
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->confidence = HDX_CONF_MEDIUM;
    v->finding = HDX_FIND_LOG_BUILD_UNFINISHED;
    cite_builds(ev, b, builders, nb);
    cite_ranks(b, HDX_LOG_WEAK, waiting, nw);
    rc = set_culprits(v, builders, nb);
    if (!rc)
        rc = hdx_verdict_set_ints(v, "building", builders, nb);
    if (!rc && nw)
        rc = hdx_verdict_set_ints(v, "waiting", waiting, nw);
    if (!rc)
        rc = hdx_verdict_set_text(v, "build_dir", dir ? dir : joined);
    if (!rc)
        rc = hdx_verdict_set_text(v, "extension", ext);
    free(joined);
    if (!rc)
        rc = 1;
out:
    free(builders);
    free(waiting);
    return rc;
}

/* The filelock package's Timeout: a lock (torch inductor's <cache>/locks/<key>.lock, or any
 * other) that another process held past the timeout. */
static int file_lock_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    const hdx_log_fact *t = NULL;
    int *timed = NULL;
    size_t n = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (!is(f, "filelock_timeout"))
            continue;
        cite_fact(b, f);
        if (!t)
            t = f;
        if (f->rank >= 0 && hdx_cls_add_int(&timed, &n, f->rank)) {
            free(timed);
            return -ENOMEM;
        }
    }
    if (!t)
        return 0;
    const char *path = hdx_log_fact_field(t, "lock_path");
    size_t len = path ? strlen(path) : 0;
    int inductor = path && strstr(path, "/locks/") && len > 5 && !strcmp(path + len - 5, ".lock");
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->confidence = HDX_CONF_MEDIUM;
    v->finding = HDX_FIND_LOG_FILE_LOCK;
    int rc = hdx_verdict_set_ints(v, "timed_out", timed, n);
    if (!rc)
        rc = hdx_verdict_set_text(v, "lock_path", path);
    if (!rc)
        rc = hdx_verdict_set_num(v, "inductor", inductor);
    if (!rc)
        rc = set_line(v, t);
    free(timed);
    return decided(rc);
}

/* A rendezvous that timed out, as its line t counts it (fields world_size and worker_count):
 * rendezvous_wait of finding fd, with the line, the world size, the ranks that arrived and how
 * many are missing. 0 or -ENOMEM. */
static int rendezvous_timeout(const hdx_log_fact *t, enum hdx_finding fd, hdx_verdict *v, basis *b)
{
    long long world = hdx_log_fact_int(t, "world_size", HDX_UNKNOWN), count = hdx_log_fact_int(t, "worker_count", HDX_UNKNOWN);
    v->cls = HDX_CLASS_RENDEZVOUS_WAIT;
    v->confidence = HDX_CONF_HIGH;
    v->finding = fd;
    cite_fact(b, t);
    if (world > 0 && count >= 0 && world > count)
        v->missing_count = (int)(world - count);
    int rc = set_line(v, t);
    if (!rc && world >= 0)
        rc = hdx_verdict_set_num(v, "world_size", world);
    if (!rc && count >= 0)
        rc = hdx_verdict_set_num(v, "arrived", count);
    return rc;
}

/* TCPStore's server waited for its clients (the ranks) to connect, and only some did: the
 * ranks missing never reached init_process_group, or could not reach MASTER_ADDR:MASTER_PORT. */
static int store_clients_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    const hdx_log_fact *t = find_fact(ev, 0, "tcpstore_clients_timeout", 0);
    if (!t)
        return 0;
    int rc = rendezvous_timeout(t, HDX_FIND_LOG_STORE_CLIENTS, v, b);
    if (!rc)
        rc = hdx_verdict_set_num(v, "timeout_s", hdx_log_fact_int(t, "timeout_s", HDX_UNKNOWN));
    return decided(rc);
}

/* The store-based barrier of process-group initialisation timed out (torch 1.x's and 2.x's
 * wordings, patterns store_barrier_timeout*); the Added-key lines tell who arrived. */
static int store_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    const hdx_log_fact *t = find_fact(ev, 0, "store_barrier_timeout", 1);
    if (!t)
        return store_clients_rule(ev, v, b);
    long long world = hdx_log_fact_int(t, "world_size", HDX_UNKNOWN), count = hdx_log_fact_int(t, "worker_count", HDX_UNKNOWN);
    const char *key = hdx_log_fact_field(t, "key");
    int *present = NULL;
    size_t np = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        const char *k = hdx_log_fact_field(f, "key");
        if (!is(f, "store_barrier_added_key") || !k || !key || strcmp(k, key))
            continue;
        cite_fact(b, f);
        if (f->rank >= 0 && hdx_cls_add_int(&present, &np, f->rank)) {
            free(present);
            return -ENOMEM;
        }
    }
    int rc = rendezvous_timeout(t, HDX_FIND_LOG_STORE_BARRIER, v, b);
    if (!rc && np && world > 0 && world <= HDX_WORLD_SIZE_TAKEN && (long long)np == count) {
        /* the Added-key lines tell who arrived: the others are missing (a world larger than the
         * rules take is not enumerated, and at most HDX_RANKS_NAMED are named: the count of
         * missing ranks says how many) */
        rc = ranks_not_in(0, world, present, np, NULL, 0, &v->missing_ranks, &v->n_missing_ranks, NULL);
        if (!rc)
            rc = set_culprits(v, v->missing_ranks, v->n_missing_ranks);
        if (!rc)
            rc = hdx_verdict_set_ints(v, "present", present, np);
        if (!rc)
            rc = hdx_verdict_set_ints(v, "missing", v->missing_ranks, v->n_missing_ranks);
    }
    if (!rc)
        rc = hdx_verdict_set_text(v, "key", key);
    free(present);
    return decided(rc);
}

/* The world size the logs tell (a printed WORLD_SIZE, else NCCL's largest "nranks N" at
 * communicator init), or HDX_UNKNOWN; *from_env says whether WORLD_SIZE told it. */
static long long log_world_size(const hdx_evidence *ev, int *from_env)
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
    *from_env = env > 0;
    return env > 0 ? env : w;
}

static int seq_rule(const hdx_evidence *ev, seqs *s, hdx_verdict *v, basis *b)
{
    int *desync = NULL, *unfinished = NULL, *not_joined = NULL;
    size_t nd = 0, nu = 0, nn = 0;
    int never_joined = 0;
    long long lag_seq = HDX_UNKNOWN;
    int rc = 0;
    for (size_t i = 0; i < ev->n_log_facts && !rc; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        /* the report's three forms (TraceUtils.h): never joined any collective; joined
         * collective #lag but did not finish it; finished #lag, did not join #lag + 1 */
        if (is(f, "nccl_desync_never_joined") || is(f, "nccl_desync_unfinished") || is(f, "nccl_desync_not_joined")) {
            const char *ranks = hdx_log_fact_field(f, "ranks");
            rc = parse_rank_list(ranks, &desync, &nd);
            if (!rc && is(f, "nccl_desync_unfinished"))
                rc = parse_rank_list(ranks, &unfinished, &nu);
            if (!rc && is(f, "nccl_desync_not_joined"))
                rc = parse_rank_list(ranks, &not_joined, &nn);
            if (!is(f, "nccl_desync_never_joined"))
                lag_seq = hdx_log_fact_int(f, "seq", HDX_UNKNOWN);
            cite_fact(b, f); /* the rule decides when there is a report */
            never_joined = is(f, "nccl_desync_never_joined");
        }
    }
    if (rc || (s->n == HDX_UNKNOWN && !nd))
        goto out;
    long long world = HDX_UNKNOWN;
    int from_env = 0;
    v->cls = HDX_CLASS_COLLECTIVE_WAIT;
    /* the group of the work compared, where the logs show it whole (hdx_log_pgroups) */
    const hdx_pgroup *pg = s->pg ? hdx_evidence_find_pgroup(ev, s->pg) : NULL;
    rc = pg && !(v->group = strdup(pg->name)) ? -ENOMEM : set_seq_facts(v, s);
    if (rc)
        goto out;
    cite_ranks(b, HDX_LOG_STRONG, s->waiting, s->n_waiting);
    if (s->n_behind) {
        v->confidence = HDX_CONF_HIGH;
        v->finding = HDX_FIND_LOG_SEQ_BEHIND;
        rc = set_culprits(v, s->behind, s->n_behind);
        if (!rc)
            rc = hdx_verdict_set_ints(v, "behind", s->behind, s->n_behind);
        if (!rc && s->enqueued != HDX_UNKNOWN)
            rc = hdx_verdict_set_num(v, "enqueued", s->enqueued);
        v->graph = s->graph; /* the report's waits_for */
        s->graph = NULL;
    } else if (nd) {
        v->confidence = HDX_CONF_HIGH;
        v->finding = HDX_FIND_LOG_DESYNC;
        rc = set_culprits(v, desync, nd);
        if (!rc)
            rc = hdx_verdict_set_ints(v, "desync", desync, nd);
        if (!rc)
            rc = hdx_verdict_set_num(v, "never_joined", never_joined);
        if (!rc && nu)
            rc = hdx_verdict_set_ints(v, "unfinished", unfinished, nu);
        if (!rc && nn)
            rc = hdx_verdict_set_ints(v, "not_joined", not_joined, nn);
        if (!rc && lag_seq != HDX_UNKNOWN && !never_joined)
            rc = hdx_verdict_set_num(v, "desync_seq", lag_seq);
    } else if (s->n_silent) {
        v->confidence = HDX_CONF_MEDIUM;
        v->finding = HDX_FIND_LOG_SEQ_SILENT;
        rc = set_culprits(v, s->silent, s->n_silent);
        if (!rc)
            rc = hdx_verdict_set_ints(v, "silent", s->silent, s->n_silent);
    } else if ((world = log_world_size(ev, &from_env)) > 0 && (long long)s->n_waiting >= world) {
        /* Every rank of the job waits in it: no rank to blame, the collective's own work is stuck. */
        v->confidence = HDX_CONF_MEDIUM;
        v->finding = HDX_FIND_LOG_SEQ_GPU;
        rc = hdx_verdict_set_num(v, "world_size", world);
        if (!rc)
            rc = hdx_verdict_set_num(v, "world_size_from_env", from_env);
    } else {
        v->confidence = HDX_CONF_LOW;
        v->finding = HDX_FIND_LOG_SEQ_UNEXPLAINED;
    }
out:
    free(desync);
    free(unfinished);
    free(not_joined);
    if (rc || (s->n == HDX_UNKNOWN && !nd))
        return rc;
    return decided(rc);
}

/*
 * monitored_barrier ran out of its time between two ranks (ProcessGroupGloo.cpp
 * checkRemainingTime; docs/design.md "Job logs"): rank 0 of its group checks ranks 1, 2, ... in
 * order, and the line after "timed out in monitoredBarrier" names those it had checked. The last
 * of them answered only as the time ran out; the ranks after it were not checked: culprits,
 * at low confidence (they may have arrived), less those that logged that they reached it.
 */
static int monitored_timeout(const hdx_evidence *ev, size_t at, hdx_verdict *v, basis *b)
{
    const hdx_log_fact *t = &ev->log_facts[at], *next = NULL;
    int *processed = NULL, *reached = NULL, *unchecked = NULL;
    size_t np = 0, nr = 0, nu = 0;
    long long n_unchecked = 0;
    int rc = 0;
    for (size_t i = 0; i < ev->n_log_facts && !rc; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (is(f, "monitored_barrier_reached"))
            rc = hdx_cls_add_int(&reached, &nr, (int)hdx_log_fact_int(f, "rank", -1));
        else if (!next && (is(f, "monitored_barrier_processed") || is(f, "monitored_barrier_none_processed")) &&
                 f->line == t->line + 1 && f->rank == t->rank && !strcmp(f->file, t->file))
            next = f;
    }
    if (!rc && next)
        rc = parse_rank_list(hdx_log_fact_field(next, "processed"), &processed, &np);
    int last = 0;
    for (size_t i = 0; i < np; i++)
        last = processed[i] > last ? processed[i] : last;
    int from_env = 0;
    long long world = log_world_size(ev, &from_env);
    if (world > HDX_WORLD_SIZE_TAKEN)
        world = 0; /* more than the rules take: not known */
    /* the ranks after the last checked one: up to the world size, or the next one */
    if (!rc && next)
        rc = ranks_not_in((long long)last + 1, world > 0 ? world : (long long)last + 2, processed, np, reached, nr,
                          &unchecked, &nu, &n_unchecked);
    v->cls = HDX_CLASS_COLLECTIVE_WAIT;
    v->confidence = HDX_CONF_LOW;
    v->finding = HDX_FIND_LOG_MONITORED_BARRIER;
    cite_fact(b, t);
    if (next)
        cite_fact(b, next);
    if (!rc)
        rc = set_culprits(v, unchecked, nu);
    if (!rc && next)
        rc = hdx_verdict_set_ints(v, "processed", processed, np);
    if (!rc && next)
        rc = hdx_verdict_set_ints(v, "unchecked", unchecked, nu);
    if (!rc && next && n_unchecked > (long long)nu) /* more than HDX_RANKS_NAMED: how many */
        rc = hdx_verdict_set_num(v, "unchecked_count", n_unchecked);
    if (!rc && np)
        rc = hdx_verdict_set_num(v, "late", last);
    if (!rc && next && world > 0)
        rc = hdx_verdict_set_num(v, "world_size", world);
    if (!rc)
        rc = hdx_verdict_set_num(v, "timeout_ms", hdx_log_fact_int(t, "timeout_ms", HDX_UNKNOWN));
    if (!rc)
        rc = set_line(v, t);
    free(processed);
    free(reached);
    free(unchecked);
    return decided(rc);
}

/* monitored_barrier's timeout: rank 0 of its group names the ranks that did not reach it, or
 * says that its time ran out between two ranks (monitored_timeout). */
static int monitored_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    const hdx_log_fact *t = NULL;
    size_t out = SIZE_MAX;
    int *failed = NULL;
    size_t n = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (is(f, "monitored_barrier_timed_out") && out == SIZE_MAX)
            out = i;
        if (!is(f, "monitored_barrier_failed"))
            continue;
        cite_fact(b, f); /* the rule decides when there is one */
        if (!t)
            t = f;
        if (parse_rank_list(hdx_log_fact_field(f, "ranks"), &failed, &n)) {
            free(failed);
            return -ENOMEM;
        }
    }
    if (!t)
        return out == SIZE_MAX ? 0 : monitored_timeout(ev, out, v, b);
    v->cls = HDX_CLASS_COLLECTIVE_WAIT;
    v->confidence = HDX_CONF_HIGH;
    v->finding = HDX_FIND_LOG_MONITORED_BARRIER;
    int rc = set_culprits(v, failed, n);
    if (!rc)
        rc = hdx_verdict_set_ints(v, "failed", failed, n);
    if (!rc)
        rc = hdx_verdict_set_num(v, "timeout_ms", hdx_log_fact_int(t, "timeout_ms", HDX_UNKNOWN));
    if (!rc)
        rc = set_line(v, t);
    free(failed);
    return decided(rc);
}

/* The DETAIL mismatch: the rank that the most messages name is the odd one out. */
static int detail_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    int *ranks = NULL, *counts = NULL;
    size_t n = 0, nc = 0;
    const hdx_log_fact *first = NULL;
    int rc = 0;
    for (size_t i = 0; i < ev->n_log_facts && !rc; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (!is(f, "detail_collective_mismatch"))
            continue;
        cite_fact(b, f); /* the rule decides when there is one */
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
    v->finding = HDX_FIND_LOG_DETAIL_MISMATCH;
    if (!rc)
        rc = hdx_verdict_set_ints(v, "odd", v->culprit_ranks, v->n_culprit_ranks);
    if (!rc)
        rc = hdx_verdict_set_num(v, "messages", best);
    if (!rc)
        rc = set_line(v, first);
    if (!rc)
        rc = hdx_verdict_set_num(v, "rank", hdx_log_fact_int(first, "rank", HDX_UNKNOWN));
    if (!rc)
        rc = hdx_verdict_set_text(v, "op", hdx_log_fact_field(first, "op"));
    if (!rc)
        rc = hdx_verdict_set_num(v, "other_rank", hdx_log_fact_int(first, "other_rank", HDX_UNKNOWN));
    if (!rc)
        rc = hdx_verdict_set_text(v, "other_op", hdx_log_fact_field(first, "other_op"));
    free(ranks);
    free(counts);
    return decided(rc);
}

typedef struct p2p_edge {
    int rank, peer;
    const char *op;
} p2p_edge;

/* The edges as three facts in step: edge_ranks[i] waits to send to (edge_sends[i] 1) or
 * to receive from (0) edge_peers[i]. 0 or -ENOMEM. */
static int set_edges(hdx_verdict *v, const p2p_edge *e, size_t n)
{
    size_t size = (n ? n : 1) * sizeof(int);
    int *cols[3] = {malloc(size), malloc(size), malloc(size)};
    int rc = cols[0] && cols[1] && cols[2] ? 0 : -ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        cols[0][i] = e[i].rank;
        cols[1][i] = e[i].peer;
        cols[2][i] = e[i].op && !strcmp(e[i].op, "send");
    }
    if (!rc)
        rc = hdx_verdict_set_ints(v, "edge_ranks", cols[0], n);
    if (!rc)
        rc = hdx_verdict_set_ints(v, "edge_peers", cols[1], n);
    if (!rc)
        rc = hdx_verdict_set_ints(v, "edge_sends", cols[2], n);
    for (int c = 0; c < 3; c++)
        free(cols[c]);
    return rc;
}

static int gloo_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
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
        cite_fact(b, f); /* the rule decides when there is one */
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
    if ((rc = hdx_verdict_set_ints(v, "timed_out", timed, nt)))
        goto out;
    if (!n && coll) {
        /* The ranks the logs know that did not time out never joined the collective. */
        for (size_t i = 0; i < ev->n_log_ranks && !rc; i++) {
            int r = ev->log_ranks[i].rank, in = 0;
            for (size_t k = 0; k < nt; k++)
                in |= timed[k] == r;
            if (!in)
                rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, r);
        }
        v->cls = HDX_CLASS_COLLECTIVE_WAIT;
        v->confidence = v->n_culprit_ranks ? HDX_CONF_MEDIUM : HDX_CONF_LOW;
        v->finding = HDX_FIND_LOG_GLOO_COLLECTIVE;
        if (!rc)
            rc = hdx_verdict_set_ints(v, "absent", v->culprit_ranks, v->n_culprit_ranks);
        goto out;
    }
    v->cls = HDX_CLASS_P2P_MISMATCH;
    /* the waits-for graph: each rank waits for one peer; follow it to a cycle */
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
        v->finding = HDX_FIND_LOG_GLOO_CYCLE;
        rc = rc ? rc : hdx_verdict_set_ints(v, "cycle", v->culprit_ranks, v->n_culprit_ranks);
    } else if (n) {
        for (size_t i = 0; i < n && !rc; i++) {
            int peer_timed = 0;
            for (size_t k = 0; k < nt; k++)
                peer_timed |= timed[k] == e[i].peer;
            if (e[i].peer >= 0 && !peer_timed)
                rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, e[i].peer);
        }
        v->confidence = v->n_culprit_ranks ? HDX_CONF_MEDIUM : HDX_CONF_LOW;
        v->finding = HDX_FIND_LOG_GLOO_UNMATCHED;
        rc = rc ? rc : hdx_verdict_set_ints(v, "unanswered", v->culprit_ranks, v->n_culprit_ranks);
    } else {
        v->confidence = HDX_CONF_LOW;
        v->finding = HDX_FIND_LOG_GLOO_NO_PEERS;
        rc = set_culprits(v, timed, nt);
    }
    if (!rc && n)
        rc = set_edges(v, e, n);
out:
    free(e);
    free(timed);
    return decided(rc);
}

static int user_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
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
                if (!strcmp(ev->log_facts[k].pattern, f->pattern)) {
                    cite_fact(b, &ev->log_facts[k]);
                    if (ev->log_facts[k].rank >= 0 &&
                        hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, ev->log_facts[k].rank))
                        return -ENOMEM;
                }
            v->finding = HDX_FIND_LOG_USER_PATTERN;
            int rc = set_line(v, f);
            if (!rc)
                rc = hdx_verdict_set_text(v, "pattern", f->pattern);
            return decided(rc ? rc : hdx_verdict_set_text(v, "proves", f->proves));
        }
    }
    return 0;
}

static int exits_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    const hdx_log_fact *elastic = find_fact(ev, 0, "elastic_child_failed", 0);
    if (!elastic)
        return 0;
    int *exited = NULL;
    size_t n = 0;
    int root = -1;
    for (size_t i = 0; i < ev->n_log_ranks; i++) {
        const hdx_log_rank *r = &ev->log_ranks[i];
        if (!r->exit_cause)
            continue;
        if (hdx_cls_add_int(&exited, &n, r->rank)) {
            free(exited);
            return -ENOMEM;
        }
        if (r->root_cause)
            root = r->rank;
    }
    if (!n)
        return 0;
    v->cls = HDX_CLASS_UNKNOWN;
    v->confidence = HDX_CONF_LOW;
    v->finding = HDX_FIND_LOG_EXITS;
    cite_fact(b, elastic);
    int rc = hdx_verdict_set_ints(v, "exited", exited, n);
    free(exited);
    if (!rc && root >= 0 && !(rc = hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, root)))
        rc = hdx_verdict_set_num(v, "root", root);
    return decided(rc);
}

/* Megatron's start-up milestones (patterns megatron_phase_*), in the order a job reaches them;
 * rank 0 prints them. */
static const char *const phase_patterns[] = {"megatron_phase_distributed", "megatron_phase_fused_kernels",
                                             "megatron_phase_fused_kernels_done", "megatron_phase_datasets",
                                             "megatron_phase_training"};
enum { PHASE_DISTRIBUTED, PHASE_FUSED_KERNELS, PHASE_FUSED_KERNELS_DONE, PHASE_DATASETS, PHASE_TRAINING };

/* Which milestone f is (PHASE_*), or -1. */
static int phase_of(const hdx_log_fact *f)
{
    for (int i = 0; i < (int)(sizeof phase_patterns / sizeof *phase_patterns); i++)
        if (is(f, phase_patterns[i]))
            return i;
    return -1;
}

/* The last milestone of the logs, in input order (a restarted job prints them again), or -1;
 * *at: its index in ev->log_facts. */
static int last_milestone(const hdx_evidence *ev, size_t *at)
{
    int phase = -1;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        int p = phase_of(&ev->log_facts[i]);
        if (p >= 0) {
            phase = p;
            *at = i;
        }
    }
    return phase;
}

/* Did a fused-kernel build run after the milestone at index at? "ran": cpp_extension lines
 * follow it; "none": none follow, and the logs show a release that builds nothing there
 * (Megatron prints no version; its parallel layout line names the context-parallel size only
 * from f048bf8c08 (2023-11, core_v0.4.0) on; every release with it has cd126362bb (2023-07), after
 * which fused_kernels.load builds nothing); "unknown": neither. *layout: that layout line for
 * "none", else NULL. */
static const char *kernel_build(const hdx_evidence *ev, size_t at, const hdx_log_fact **layout)
{
    *layout = NULL;
    if (find_fact(ev, at + 1, "cpp_extension_", 1))
        return "ran";
    for (size_t i = 0; i < ev->n_log_facts; i++)
        if (is(&ev->log_facts[i], "megatron_parallel_sizes") && hdx_log_fact_int(&ev->log_facts[i], "cp", -1) >= 0) {
            *layout = &ev->log_facts[i];
            return "none";
        }
    return "unknown";
}

/* The phase where the job's logs stop, as facts of a decided log finding: "phase" (the
 * milestone's words) and, after "compiling and loading fused kernels", "kernel_build".
 * Nothing when the logs show no milestone or a fact is already set. 0 or -ENOMEM. */
static int set_phase(const hdx_evidence *ev, hdx_verdict *v)
{
    size_t at = 0;
    int p = last_milestone(ev, &at);
    if (p < 0 || hdx_verdict_text(v, "phase"))
        return 0;
    const hdx_log_fact *layout;
    int rc = hdx_verdict_set_text(v, "phase", hdx_log_fact_field(&ev->log_facts[at], "phase"));
    if (!rc && p == PHASE_FUSED_KERNELS)
        rc = hdx_verdict_set_text(v, "kernel_build", kernel_build(ev, at, &layout));
    return rc;
}

/* No other rule decided, and the logs show how far Megatron's start-up went: the phase of its
 * last milestone. A milestone is a weak line: low confidence, medium only where the logs also
 * show a release whose fused-kernel phase builds nothing (then the job waits in the barrier
 * after it, never in a build: no build_lock). */
static int startup_rule(const hdx_evidence *ev, hdx_verdict *v, basis *b)
{
    size_t at = 0;
    int p = last_milestone(ev, &at);
    if (p < 0 || has_stacks(ev)) /* stacks tell where the ranks wait; a milestone only where the logs stop */
        return 0;
    const hdx_log_fact *m = &ev->log_facts[at];
    cite_fact(b, m);
    v->finding = HDX_FIND_LOG_STARTUP_PHASE;
    v->confidence = HDX_CONF_LOW;
    v->cls = HDX_CLASS_UNKNOWN;
    if (p == PHASE_DISTRIBUTED)
        v->cls = HDX_CLASS_RENDEZVOUS_WAIT; /* init_process_group waits for every rank */
    else if (p == PHASE_FUSED_KERNELS) {
        const hdx_log_fact *layout = NULL;
        const char *built = kernel_build(ev, at, &layout);
        if (strcmp(built, "ran")) {
            v->cls = HDX_CLASS_COLLECTIVE_WAIT; /* the barrier after fused_kernels.load */
            if (layout) {
                v->confidence = HDX_CONF_MEDIUM;
                cite_fact(b, layout);
            }
        }
    }
    int *stopped = NULL;
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < ev->n_log_ranks && !rc; i++)
        if (ev->log_ranks[i].last_pattern && !strncmp(ev->log_ranks[i].last_pattern, "megatron_phase_", 15))
            rc = hdx_cls_add_int(&stopped, &n, ev->log_ranks[i].rank);
    if (!rc)
        rc = hdx_verdict_set_ints(v, "stopped", stopped, n);
    free(stopped);
    if (!rc)
        rc = set_line(v, m);
    if (!rc)
        rc = set_phase(ev, v);
    return decided(rc);
}

/* The weak Megatron last line: a question, answered from other evidence or left unchecked,
 * as a note of v; the ranks that ended on it as the fact "weak_ranks", and whether other
 * evidence answers it as "weak_answered". Returns 1, 0 when no rank ended on that line,
 * -ENOMEM. */
static int weak_question(const hdx_evidence *ev, hdx_verdict *v)
{
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
    char r[RANKS_TEXT], buf[600];
    hdx_format_ranges_of(ranks, n, r, sizeof r);
    int rc = hdx_verdict_set_ints(v, "weak_ranks", ranks, n);
    free(ranks);
    if (rc)
        return rc;
    int answered = ev->n_locks || find_fact(ev, 0, "cpp_extension_", 1);
    if (hdx_verdict_set_num(v, "weak_answered", answered))
        return -ENOMEM;
    if (answered)
        snprintf(buf, sizeof buf, "rank%s %s last logged Megatron's \"using torch.float16 for parameters ...\", which "
                 "ends both a stale fused-kernel lock and unrelated multi-node hangs; answered from the %s",
                 n == 1 ? "" : "s", r, ev->n_locks ? "lock evidence" : "cpp_extension build lines");
    else
        snprintf(buf, sizeof buf, "rank%s %s last logged Megatron's \"using torch.float16 for parameters ...\", which "
                 "ends both a stale fused-kernel lock and unrelated multi-node hangs; unchecked: no lock, trace or "
                 "build line tells which (run 'hangdx locks' on the fused_kernels/build directory, or 'hangdx "
                 "inspect' while the job hangs)", n == 1 ? "" : "s", r);
    return hdx_cls_note(v, "%s", buf) ? -ENOMEM : 1;
}

static int decide(const hdx_evidence *ev, hdx_verdict *v)
{
    basis b = {.rank = HDX_UNKNOWN};
    int r = config_rule(ev, v, &b);
    if (!r) {
        seqs s;
        if ((r = seqs_of(ev, &s)) == 0 && (r = build_rule(ev, &s, v, &b)) == 0 && (r = file_lock_rule(ev, v, &b)) == 0 &&
            (r = build_unfinished_rule(ev, &s, v, &b)) == 0 && (r = store_rule(ev, v, &b)) == 0 &&
            (r = monitored_rule(ev, v, &b)) == 0 && (r = seq_rule(ev, &s, v, &b)) == 0 &&
            (r = detail_rule(ev, v, &b)) == 0 && (r = gloo_rule(ev, v, &b)) == 0 && (r = user_rule(ev, v, &b)) == 0 &&
            (r = exits_rule(ev, v, &b)) == 0)
            r = startup_rule(ev, v, &b);
        seqs_free(&s);
    }
    if (r <= 0)
        return r;
    if (v->confidence > allowed(&b))
        v->confidence = allowed(&b);
    return set_phase(ev, v) ? -ENOMEM : r;
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
    int q = weak_question(ev, v);
    if (q < 0)
        return q;
    if (!may_decide) {
        hdx_verdict *lv = calloc(1, sizeof *lv);
        int r = lv ? decide(ev, lv) : -ENOMEM;
        if (r > 0) {
            v->logs_alone = lv;
            return 0;
        }
        hdx_verdict_clear(lv);
        free(lv);
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
        v->finding = HDX_FIND_LOG_UNDECIDED;
    }
    if (note_culprits(ev, v))
        return -ENOMEM;
    return 1;
}
