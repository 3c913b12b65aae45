/*
 * The classifier, on evidence the label step (label.c) has labelled; pure: it
 * reads the evidence and writes only the verdict. Rules, in order
 * (docs/design.md "The hang classes"); the root cause wins, so what others
 * wait on is decided before the waiting:
 *  1. a lock that processes wait on: stale → build_lock; held by a process
 *     whose build is stuck → compile_stall; held by a process that is itself
 *     stuck → build_lock; held by a process that makes progress → not_hung
 *     (a build is running). Collective waits behind it are its consequences;
 *  2. every rank busy (CPU time grows, and no distributed wait) → not_hung;
 *  3. ranks in process-group initialisation → rendezvous_wait;
 *  4. ranks in send/recv → p2p_mismatch, from the waits-for graph;
 *  5. ranks in a collective → collective_wait (classify_dist.c);
 *  6. otherwise any progress → not_hung;
 *  1b. job logs, when no stack evidence decides (classify_logs.c; with stacks they add notes);
 *  otherwise unknown, with the stack groups.
 * A wholly frozen job (cgroup freezer) is not_hung before all of them. The rules are a
 * table (rules[] below); each sets the verdict's finding and facts, and the report words
 * them (report/words.h).
 */
#include "classify/classify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "classify/groups.h"
#include "model/util.h"
#include "classify/waits.h"
#include "classify/waitsfor.h"

/* A thread's (or threads') CPU time that grew by grew ms in a window of window_ms is work. */
static int grew_enough(double grew, int64_t window_ms)
{
    return grew >= HDX_BUSY_CPU_MIN_MS && grew >= HDX_BUSY_CPU_SHARE * (double)window_ms;
}

static int is_distributed_wait(const char *w)
{
    return w && (!strcmp(w, HDX_WAIT_COLLECTIVE) || !strcmp(w, HDX_WAIT_RENDEZVOUS) || hdx_wait_is_p2p(w) ||
                 !strcmp(w, HDX_WAIT_BUILD_LOCK));
}

/*
 * Progress from CPU time across the samples, judged per thread (docs/design.md "Busy or
 * blocked"): a rank whose key thread waits in a distributed call progresses only when that
 * thread itself uses CPU (its gloo, NCCL and store threads tick along in any hung rank); any
 * other process by the CPU of its threads but the service ones. With one sample, a running
 * thread; post-mortem, as recorded. Call after the waits are labelled.
 */
int hdx_cls_progressing(const hdx_evidence *ev, const hdx_process *p)
{
    if (p->alive == 0)
        return 0;
    if (ev->samples >= 2 && p->window_ms > 0) {
        const hdx_thread *k = hdx_key_thread(p);
        if (!k)
            return grew_enough(p->cpu_ms - p->cpu_ms_first, p->window_ms);
        if (is_distributed_wait(k->wait))
            return grew_enough(k->cpu_ms - k->cpu_ms_first, p->window_ms);
        double grew = 0;
        for (size_t i = 0; i < p->n_threads; i++)
            if (!p->threads[i].wait || strcmp(p->threads[i].wait, HDX_WAIT_SERVICE))
                grew += p->threads[i].cpu_ms - p->threads[i].cpu_ms_first;
        return grew_enough(grew, p->window_ms);
    }
    if (ev->samples == 1) {
        for (size_t i = 0; i < p->n_threads; i++)
            if (p->threads[i].state == 'R')
                return 1;
        return 0;
    }
    return p->progressing; /* post-mortem: as recorded */
}

/* A waiter of the job judged: not one of a job set aside (hdx_keep_largest_job). */
static int waiter_kept(const hdx_evidence *ev, const hdx_waiter *w)
{
    const hdx_process *p = hdx_evidence_find_waiter(ev, w);
    return !p || !p->set_aside;
}

/* How many of l's waiters belong to the job judged. */
static size_t kept_waiters(const hdx_evidence *ev, const hdx_lock *l)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n_waiters; i++)
        n += waiter_kept(ev, &l->waiters[i]);
    return n;
}

/* The lock's waiters of the job judged, as the fact "waiter_indexes": their indexes in l->waiters. */
static int set_waiters(const hdx_evidence *ev, const hdx_lock *l, hdx_verdict *v)
{
    int *kept = malloc((l->n_waiters ? l->n_waiters : 1) * sizeof *kept);
    size_t n = 0;
    if (!kept)
        return -ENOMEM;
    for (size_t i = 0; i < l->n_waiters; i++)
        if (waiter_kept(ev, &l->waiters[i]))
            kept[n++] = (int)i;
    int rc = hdx_verdict_set_ints(v, "waiter_indexes", kept, n);
    free(kept);
    return rc;
}

/* The facts every lock finding carries: "lock_index" (its index in ev->locks), "path", "waiter_indexes". */
static int set_lock_facts(const hdx_evidence *ev, size_t li, hdx_verdict *v)
{
    const hdx_lock *l = &ev->locks[li];
    return hdx_verdict_set_num(v, "lock_index", (long long)li) || hdx_verdict_set_text(v, "path", l->path) ||
                   set_waiters(ev, l, v)
               ? -ENOMEM
               : 0;
}

/* The build that holder runs: ninja and the compilers under it. */
typedef struct build_state {
    const hdx_process *child; /* the deepest descendant (the compiler under ninja), or NULL */
    int n_children;
    int progressing;          /* holder or any descendant progressing */
    double build_s;           /* how long the lock has been held, s, or -1 */
} build_state;

static build_state build_of(const hdx_evidence *ev, const hdx_lock *l, const hdx_process *holder)
{
    build_state b = {NULL, 0, hdx_cls_progressing(ev, holder), -1};
    int best = 0;
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *c = &ev->procs[i];
        int depth = c->alive == 0 ? 0 : hdx_process_descendant_depth(ev, c, holder);
        if (!depth)
            continue;
        b.n_children++;
        if (hdx_cls_progressing(ev, c))
            b.progressing = 1;
        if (depth > best || (depth == best && c->age_s > b.child->age_s)) {
            best = depth;
            b.child = c;
        }
    }
    int64_t since = l->created_ns != HDX_UNKNOWN ? l->created_ns : l->mtime_ns;
    if (since != HDX_UNKNOWN && ev->taken_ns > since)
        b.build_s = (double)(ev->taken_ns - since) / 1e9;
    else if (b.child)
        b.build_s = b.child->age_s;
    return b;
}

static int culprits_from_waiters(const hdx_evidence *ev, hdx_verdict *v, const hdx_lock *l)
{
    for (size_t i = 0; i < l->n_waiters; i++) {
        if (!waiter_kept(ev, &l->waiters[i]))
            continue;
        if (l->waiters[i].rank >= 0 && hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, l->waiters[i].rank))
            return -ENOMEM;
        if (hdx_cls_add_pid(v, l->waiters[i].pid))
            return -ENOMEM;
    }
    return 0;
}

static int verdict_stale(const hdx_evidence *ev, size_t li, const hdx_lock_judgement *j, hdx_verdict *v)
{
    const hdx_lock *l = &ev->locks[li];
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->confidence = l->has_creator && j->creator_alive == 0 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
    /* a holder may hide among processes hangdx could not read */
    v->finding = j->unchecked > 0 ? HDX_FIND_LOCK_STALE_UNCHECKED : HDX_FIND_LOCK_STALE;
    if (j->unchecked > 0)
        v->confidence = HDX_CONF_LOW;
    /* "deleted": the trace proved it stale, and its file is gone now */
    return culprits_from_waiters(ev, v, l) || set_lock_facts(ev, li, v) ||
                   (j->deleted && hdx_verdict_set_num(v, "deleted", 1))
               ? -ENOMEM
               : 0;
}

static int verdict_held(const hdx_evidence *ev, size_t li, const hdx_lock_judgement *j, hdx_verdict *v)
{
    const hdx_lock *l = &ev->locks[li];
    const hdx_process *holder = hdx_evidence_find_process_on(ev, j->holder_host, j->holder_pid);
    if (holder && holder->rank >= 0 && hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, holder->rank))
        return -ENOMEM;
    if (hdx_cls_add_pid(v, j->holder_pid) || set_lock_facts(ev, li, v) ||
        hdx_verdict_set_num(v, "holder_pid", j->holder_pid))
        return -ENOMEM;
    if (!holder) { /* holder seen in /proc/locks but not readable */
        v->cls = HDX_CLASS_BUILD_LOCK;
        v->confidence = HDX_CONF_LOW;
        v->finding = HDX_FIND_LOCK_HOLDER_UNREAD;
        return 0;
    }
    build_state b = build_of(ev, l, holder);
    int timed_out = b.build_s >= 0 && ev->build_timeout_s > 0 && b.build_s > (double)ev->build_timeout_s;
    if (b.child && (hdx_verdict_set_num(v, "compiler_pid", b.child->pid) ||
                    hdx_verdict_set_num(v, "compiler_busy", hdx_cls_progressing(ev, b.child))))
        return -ENOMEM;

    if (b.n_children && (timed_out || (!b.progressing && ev->samples != 0))) {
        v->cls = HDX_CLASS_COMPILE_STALL;
        v->finding = HDX_FIND_BUILD_STUCK;
        v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_LOW;
        v->n_culprit_pids = 0;
        return hdx_cls_add_pid(v, holder->pid) || hdx_verdict_set_num(v, "timed_out", timed_out) ? -ENOMEM : 0;
    }
    if (b.progressing) {
        v->n_culprit_ranks = v->n_culprit_pids = 0; /* not_hung names no culprit */
        v->cls = HDX_CLASS_NOT_HUNG;
        v->finding = HDX_FIND_BUILD_RUNNING;
        v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
        return hdx_verdict_set_num(v, "build_timeout_s", ev->build_timeout_s);
    }
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->finding = HDX_FIND_LOCK_HOLDER_STUCK;
    v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
    return 0;
}

/* The lock that decides: stale first, then held, among locks with waiters of the
 * job judged (the waiters of jobs set aside decide nothing). */
static long deciding_lock(const hdx_evidence *ev, const hdx_verdict *v)
{
    long held = -1;
    for (size_t i = 0; i < ev->n_locks && i < v->n_locks; i++) {
        if (!kept_waiters(ev, &ev->locks[i]))
            continue;
        if (v->locks[i].state == HDX_LOCK_STALE)
            return (long)i;
        if (v->locks[i].state == HDX_LOCK_HELD && held < 0)
            held = (long)i;
    }
    return held;
}

/* The ranks of the lock waiters' job that wait in a distributed call behind a
 * lock verdict, its consequences: the facts "consequence_ranks" and
 * "consequence_op" (the call the first of them waits in). None when no waiter is
 * a rank. */
static int add_consequences(const hdx_evidence *ev, const hdx_lock *l, hdx_verdict *v)
{
    const hdx_process *waiter = NULL;
    for (size_t i = 0; i < l->n_waiters && !waiter; i++) {
        const hdx_process *w = hdx_evidence_find_waiter(ev, &l->waiters[i]);
        if (w && w->is_rank_process) /* never one set aside: those are no rank processes */
            waiter = w;
    }
    if (!waiter)
        return 0;
    int *ranks = NULL;
    size_t n = 0;
    const char *op = NULL;
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        const hdx_thread *t = hdx_key_thread(p);
        if (!p->is_rank_process || !hdx_process_same_job(p, waiter) || !t || !t->wait ||
            !strcmp(t->wait, HDX_WAIT_BUILD_LOCK) || !is_distributed_wait(t->wait))
            continue;
        if (hdx_cls_add_int(&ranks, &n, p->rank)) {
            free(ranks);
            return -ENOMEM;
        }
        if (!op)
            op = t->wait_op ? t->wait_op : t->wait;
    }
    int rc = n && (hdx_verdict_set_ints(v, "consequence_ranks", ranks, n) ||
                   hdx_verdict_set_text(v, "consequence_op", op))
                 ? -ENOMEM
                 : 0;
    free(ranks);
    return rc;
}

/* Did thread t use CPU between the samples (by the same measure as a process)? */
static int thread_grew(const hdx_evidence *ev, const hdx_process *p, const hdx_thread *t)
{
    if (ev->samples < 2 || p->window_ms <= 0)
        return t->state == 'R';
    return grew_enough(t->cpu_ms - t->cpu_ms_first, p->window_ms);
}

/*
 * Is p busy? Its CPU time grows, and when its key thread sits in a
 * distributed wait that growth must come from work between the samples: the
 * main thread used CPU and either its stack moved, or it sleeps in the wait
 * (a gloo wait sleeps; a collective that completes now and then as the rank
 * computes is caught in it). A wait that spins (NCCL) runs in place: same
 * stack, state R.
 */
static int busy(const hdx_evidence *ev, const hdx_process *p)
{
    if (p->progressing != 1)
        return 0;
    const hdx_thread *t = hdx_key_thread(p);
    if (!t || !is_distributed_wait(t->wait))
        return 1;
    const hdx_thread *main_thread = &p->threads[0];
    return thread_grew(ev, p, main_thread) && (p->stack_changed == 1 || t->state != 'R');
}

/* Does any process of ev carry a rank of its own? */
static int has_rank_process(const hdx_evidence *ev)
{
    for (size_t i = 0; i < ev->n_procs; i++)
        if (ev->procs[i].is_rank_process)
            return 1;
    return 0;
}

/* How many live ranks (live processes when none has a rank) of the job judged there are when
 * every one of them is such that holds(ev, p); 0 when one is not, or there is none. */
static int every_live_rank(const hdx_evidence *ev, int (*holds)(const hdx_evidence *, const hdx_process *))
{
    int any_rank = has_rank_process(ev), seen = 0;
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        if ((any_rank && !p->is_rank_process) || p->alive == 0 || p->set_aside)
            continue;
        if (!holds(ev, p))
            return 0;
        seen++;
    }
    return seen;
}

static int frozen(const hdx_evidence *ev, const hdx_process *p)
{
    (void)ev;
    return p->frozen == 1;
}

/* not_hung: the processes make progress. The fact "busy_indexes": the indexes in ev->procs of
 * those of the job judged that do. */
static int verdict_not_hung(const hdx_evidence *ev, hdx_verdict *v)
{
    v->cls = HDX_CLASS_NOT_HUNG;
    v->finding = HDX_FIND_PROGRESS;
    v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
    int *busy = NULL;
    size_t n = 0;
    for (size_t i = 0; i < ev->n_procs; i++)
        if (ev->procs[i].progressing == 1 && !ev->procs[i].set_aside && hdx_cls_add_int(&busy, &n, (int)i)) {
            free(busy);
            return -ENOMEM;
        }
    int rc = hdx_verdict_set_ints(v, "busy_indexes", busy, n);
    free(busy);
    return rc;
}

/* Every live rank (every live process when none has a rank) frozen by the cgroup freezer:
 * the job is suspended (a scheduler's or a person's freeze), not hung; -ENOMEM, 1, or 0. */
static int verdict_frozen(const hdx_evidence *ev, hdx_verdict *v)
{
    int n = every_live_rank(ev, frozen);
    if (!n)
        return 0;
    v->cls = HDX_CLASS_NOT_HUNG;
    v->finding = HDX_FIND_FROZEN;
    v->confidence = HDX_CONF_HIGH;
    return hdx_verdict_set_num(v, "frozen", n) || hdx_verdict_set_num(v, "of_ranks", has_rank_process(ev)) ? -ENOMEM
                                                                                                          : 1;
}

/* ---- the rules, in order ---------------------------------------------------
 * Each returns 1 when it decided v, 0 when it did not, -ENOMEM. */

/* A lock that processes of the job wait on (stale first, then held). Behind a lock that
 * holds the job, what the job logs alone would say is a note, and the ranks that wait in
 * a distributed call are its consequences. */
static int rule_build_lock(const hdx_evidence *ev, hdx_verdict *v)
{
    long li = deciding_lock(ev, v);
    if (li < 0)
        return 0;
    const hdx_lock_judgement *j = &v->locks[li];
    int rc = j->state == HDX_LOCK_STALE ? verdict_stale(ev, (size_t)li, j, v) : verdict_held(ev, (size_t)li, j, v);
    if (rc < 0 || v->cls == HDX_CLASS_NOT_HUNG)
        return rc < 0 ? rc : 1;
    if ((rc = hdx_cls_logs(ev, v, 0)) < 0)
        return rc;
    return add_consequences(ev, &ev->locks[li], v) ? -ENOMEM : 1;
}

/* Every live rank busy, and none in a distributed wait that only spins. */
static int rule_busy(const hdx_evidence *ev, hdx_verdict *v)
{
    return every_live_rank(ev, busy) ? (verdict_not_hung(ev, v) ? -ENOMEM : 1) : 0;
}

/* Any process of the job judged makes progress. */
static int rule_progress(const hdx_evidence *ev, hdx_verdict *v)
{
    for (size_t i = 0; i < ev->n_procs; i++)
        if (ev->procs[i].progressing == 1 && !ev->procs[i].set_aside)
            return verdict_not_hung(ev, v) ? -ENOMEM : 1;
    return 0;
}

/* The job logs decide what the stacks left open (classify_logs.c). */
static int rule_logs(const hdx_evidence *ev, hdx_verdict *v)
{
    return hdx_cls_logs(ev, v, 1);
}

/* Nothing decided: unknown, and why. */
static int rule_unknown(const hdx_evidence *ev, hdx_verdict *v)
{
    v->cls = HDX_CLASS_UNKNOWN;
    v->confidence = HDX_CONF_LOW;
    int alive = 0, stacks = 0;
    for (size_t i = 0; i < ev->n_procs; i++) {
        alive |= ev->procs[i].alive != 0;
        for (size_t k = 0; k < ev->procs[i].n_threads; k++)
            stacks |= ev->procs[i].threads[k].n_frames > 0;
    }
    v->finding = !ev->n_procs ? HDX_FIND_NO_PROCESS
                 : !alive     ? HDX_FIND_ALL_EXITED
                 : !stacks    ? HDX_FIND_NO_STACKS
                              : HDX_FIND_NO_RULE;
    return 1;
}

/* The rule table (docs/design.md "The hang classes"): the first rule that decides makes the
 * verdict; with log_notes, what the job logs alone would say is then added as a note. */
static const struct rule {
    int (*decide)(const hdx_evidence *ev, hdx_verdict *v);
    int log_notes;
} rules[] = {
    {verdict_frozen, 0},      /* every live rank frozen: not_hung */
    {rule_build_lock, 0},     /* 1 */
    {rule_busy, 1},           /* 2 */
    {hdx_cls_distributed, 1}, /* 3-5 */
    {rule_progress, 1},       /* 6 */
    {rule_logs, 0},           /* 1b */
    {rule_unknown, 0},
};

int hdx_classify(const hdx_evidence *ev, hdx_verdict *v)
{
    hdx_verdict_clear(v);
    int rc = hdx_lock_judge_all(ev, &v->locks); /* the state of each lock (lockjudge.c) */
    if (rc < 0)
        return rc;
    v->n_locks = ev->n_locks;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if ((rc = rules[i].decide(ev, v)) < 0)
            return rc;
        if (rc > 0)
            return rules[i].log_notes ? hdx_cls_logs(ev, v, 0) : 0;
    }
    return 0;
}
