/*
 * The classifier, on evidence the label step (label.c) has labelled; pure: it
 * reads the evidence and writes only the verdict. Rules, in order
 * (docs/design.md "The hang classes"); the root cause wins, so what others
 * wait on is decided before the waiting:
 *  1. a lock that processes wait on: stale → build_lock; held by a process
 *     whose build is stuck → compile_stall; held by a process that is itself
 *     stuck → build_lock; held by a process that makes progress → not_hung
 *     (a build is running). Collective waits behind it are its consequences;
 *  1b. job logs, when no stack evidence decides (classify_logs.c; with stacks they add notes);
 *  2. every rank busy (CPU time grows, and no distributed wait) → not_hung;
 *  3. ranks in process-group initialisation → rendezvous_wait;
 *  4. ranks in send/recv → p2p_mismatch, from the waits-for graph;
 *  5. ranks in a collective → collective_wait (classify_dist.c);
 *  6. otherwise any progress → not_hung, else unknown with the stack groups.
 */
#include "classify/classify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
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

/* The waiters of a lock as one phrase: "rank 1 (pid 12), pid 40". */
static void waiters_phrase(const hdx_evidence *ev, const hdx_lock *l, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < l->n_waiters && used + 60 < size; i++) {
        if (!waiter_kept(ev, &l->waiters[i]))
            continue;
        char w[160];
        hdx_evidence_who(ev, hdx_evidence_find_waiter(ev, &l->waiters[i]), l->waiters[i].pid,
            l->waiters[i].rank, w, sizeof w);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", w);
    }
    if (!buf[0])
        snprintf(buf, size, "no process seen waiting");
}


/* "torch/utils/file_baton.py:42" from a frame's absolute path. */
static void short_site(const hdx_frame *f, char *buf, size_t size)
{
    const char *file = f->file, *torch = strstr(file, "torch/");
    snprintf(buf, size, "%s:%d", torch ? torch : file, f->line);
}

/*
 * Where the waiters wait, from their Python frames: " in FileBaton.wait
 * (torch/utils/file_baton.py:42), called from _jit_compile
 * (torch/utils/cpp_extension.py:1508)", or "" when no frame shows it.
 */
static void call_site(const hdx_evidence *ev, const hdx_lock *l, char *buf, size_t size)
{
    buf[0] = 0;
    for (size_t i = 0; i < l->n_waiters; i++) {
        const hdx_process *p = hdx_evidence_find_waiter(ev, &l->waiters[i]);
        for (size_t k = 0; p && !p->set_aside && k < p->n_threads; k++) {
            const hdx_thread *t = &p->threads[k];
            size_t at = 0;
            const hdx_frame *wait = hdx_thread_find_python(t, HDX_FILEBATON_WAIT, HDX_FILEBATON_FILE, &at);
            if (!wait)
                continue;
            const hdx_frame *jit = hdx_thread_find_python(t, HDX_FILEBATON_CALLER, HDX_FILEBATON_CALLER_FILE, &at);
            char w[256], j[256] = "";
            short_site(wait, w, sizeof w);
            if (jit)
                short_site(jit, j, sizeof j);
            snprintf(buf, size, " in %s (%s)%s%s%s", wait->function, w, jit ? ", called from _jit_compile (" : "", j,
                     jit ? ")" : "");
            return;
        }
    }
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
        int depth = c->alive == 0 ? 0 : hdx_cls_descendant_depth(ev, c, holder);
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

static int verdict_stale(const hdx_evidence *ev, const hdx_lock *l, const hdx_lock_judgement *j, hdx_verdict *v)
{
    char waiters[512], creator[256], site[600];
    waiters_phrase(ev, l, waiters, sizeof waiters);
    call_site(ev, l, site, sizeof site);
    if (l->has_creator) {
        char c[160];
        hdx_evidence_who(ev, NULL, l->creator_pid, l->creator_rank, c, sizeof c);
        snprintf(creator, sizeof creator, "created by %s, which is %s", c,
                 j->creator_alive == 1 ? "alive but no longer holds it" : "gone");
    } else {
        snprintf(creator, sizeof creator, "creator unknown: no trace");
    }
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->confidence = l->has_creator && j->creator_alive == 0 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
    if (culprits_from_waiters(ev, v, l))
        return -ENOMEM;
    if (j->unchecked > 0) { /* a holder may hide among processes hangdx could not read */
        v->confidence = HDX_CONF_LOW;
        if (hdx_cls_set_text(&v->summary,
                             "%s wait%s%s on %s, which looks stale (%s), but %d process%s of other users could not be "
                             "checked for a holder",
                             waiters, kept_waiters(ev, l) == 1 ? "s" : "", site, l->path, creator, j->unchecked,
                             j->unchecked == 1 ? "" : "es"))
            return -ENOMEM;
        return hdx_cls_set_text(&v->remedy,
                                "run hangdx as root (or as the lock's owner) to see whether a live process holds %s "
                                "before deleting it",
                                l->path);
    }
    if (hdx_cls_set_text(&v->summary,
                 "%s wait%s%s on the stale build lock %s (%s); no process holds or has it open, so nothing will "
                 "release it",
                 waiters, kept_waiters(ev, l) == 1 ? "s" : "", site, l->path, creator))
        return -ENOMEM;
    if (l->foreign) /* a gone container's path: a namesake here is not its lock */
        return hdx_cls_set_text(&v->remedy,
                        "the lock is a path of the container of mount namespace %llu, whose processes are all gone, "
                        "and not this host's: in that container's file system (its image's writable layer, or the "
                        "volume it had mounted there), delete %s, then relaunch; never a file of that name on this "
                        "host",
                        (unsigned long long)l->mnt_ns, l->path);
    return hdx_cls_set_text(&v->remedy,
                    "stop the ranks that wait on it first (a waiter that wakes up loads a half-built module), and "
                    "check that no build runs on any node that shares this directory (processes left from a killed "
                    "builder included); then delete the lock and relaunch: rm %s",
                    l->path);
}

static int verdict_held(const hdx_evidence *ev, const hdx_lock *l, const hdx_lock_judgement *j, hdx_verdict *v)
{
    const hdx_process *holder = hdx_evidence_find_process_on(ev, j->holder_host, j->holder_pid);
    char waiters[512], h[160], site[600];
    waiters_phrase(ev, l, waiters, sizeof waiters);
    call_site(ev, l, site, sizeof site);
    hdx_evidence_who(ev, holder, j->holder_pid, HDX_UNKNOWN, h, sizeof h);
    if (holder && holder->rank >= 0 && hdx_cls_add_int(&v->culprit_ranks, &v->n_culprit_ranks, holder->rank))
        return -ENOMEM;
    if (hdx_cls_add_pid(v, j->holder_pid))
        return -ENOMEM;
    if (!holder) { /* holder seen in /proc/locks but not readable */
        v->cls = HDX_CLASS_BUILD_LOCK;
        v->confidence = HDX_CONF_LOW;
        if (hdx_cls_set_text(&v->summary, "%s wait%s on %s, held by %s, which could not be inspected",
                     waiters, kept_waiters(ev, l) == 1 ? "s" : "", l->path, h))
            return -ENOMEM;
        return hdx_cls_set_text(&v->remedy, "inspect the holder: hangdx inspect %d", j->holder_pid);
    }
    build_state b = build_of(ev, l, holder);
    int timed_out = b.build_s >= 0 && ev->build_timeout_s > 0 && b.build_s > (double)ev->build_timeout_s;
    char child[256] = "";
    if (b.child)
        snprintf(child, sizeof child, "%s (pid %d) has run %.0f s, %s", hdx_process_name(b.child), b.child->pid,
                 b.child->age_s,
                 b.child->state == 'T' || b.child->state == 't' ? "stopped (state T)"
                 : hdx_cls_progressing(ev, b.child)                ? "CPU-busy"
                                                                   : "idle");

    if (b.n_children && (timed_out || (!b.progressing && ev->samples != 0))) {
        v->cls = HDX_CLASS_COMPILE_STALL;
        v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_LOW;
        v->n_culprit_pids = 0;
        if (hdx_cls_add_pid(v, holder->pid))
            return -ENOMEM;
        if (hdx_cls_set_text(&v->summary, "%s holds %s and its build is stuck (%s): %s; %s wait%s", h, l->path,
                     timed_out ? "past --build-timeout" : "no CPU progress", child, waiters,
                     kept_waiters(ev, l) == 1 ? "s" : ""))
            return -ENOMEM;
        return hdx_cls_set_text(&v->remedy,
                        "look at the compiler (pid %d): kill it and the build of %s, then relaunch; "
                        "a compiler killed by the OOM killer or out of memory calls for a lower MAX_JOBS",
                        b.child->pid, h);
    }
    if (b.progressing) {
        v->n_culprit_ranks = v->n_culprit_pids = 0; /* not_hung names no culprit */
        v->cls = HDX_CLASS_NOT_HUNG;
        v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
        if (hdx_cls_set_text(&v->summary, "a build is running: %s holds %s%s%s; %s wait%s for it%s", h, l->path,
                     child[0] ? " and " : "", child, waiters, kept_waiters(ev, l) == 1 ? "s" : "", site))
            return -ENOMEM;
        return hdx_cls_set_text(&v->remedy, "wait for the build; hangdx calls it compile_stall after --build-timeout (%lld s)",
                        (long long)ev->build_timeout_s);
    }
    v->cls = HDX_CLASS_BUILD_LOCK;
    v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
    if (hdx_cls_set_text(&v->summary, "%s wait%s%s on %s %s, held by %s, which is itself stuck (%s, no CPU progress)",
                 waiters, kept_waiters(ev, l) == 1 ? "s" : "", site, hdx_lock_kind_name(j->kind), l->path, h,
                 holder->n_threads && holder->threads[0].wait ? holder->threads[0].wait : "idle"))
        return -ENOMEM;
    return hdx_cls_set_text(&v->remedy, "find why %s is stuck (hangdx inspect %d); ending it releases %s", h,
                    holder->pid, l->path);
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
 * lock verdict: its consequences. None when no waiter is a rank. */
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
    int rc = 0;
    if (n) {
        char buf[256];
        hdx_format_ranges(ranks, n, buf, sizeof buf);
        rc = hdx_cls_set_text(&v->summary, "%s; as a consequence rank%s %s wait%s in %s", v->summary,
                              n == 1 ? "" : "s", buf, n == 1 ? "s" : "", op);
    }
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

static int verdict_not_hung(const hdx_evidence *ev, hdx_verdict *v)
{
    v->cls = HDX_CLASS_NOT_HUNG;
    v->confidence = ev->samples >= 2 ? HDX_CONF_HIGH : HDX_CONF_MEDIUM;
    char busy[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < ev->n_procs && used + 64 < sizeof busy; i++) {
        if (ev->procs[i].progressing != 1 || ev->procs[i].set_aside)
            continue;
        char w[160];
        hdx_evidence_who(ev, &ev->procs[i], 0, 0, w, sizeof w);
        used += (size_t)snprintf(busy + used, sizeof busy - used, "%s%s %s", used ? ", " : "", w,
                                 hdx_process_name(&ev->procs[i]));
    }
    return hdx_cls_set_text(&v->summary, "the processes are making progress (CPU time grows): %s", busy);
}

/* Every live rank (every live process when none has a rank) frozen by the cgroup freezer:
 * the job is suspended (a scheduler's or a person's freeze), not hung; -ENOMEM, 1, or 0. */
static int verdict_frozen(const hdx_evidence *ev, hdx_verdict *v)
{
    int n = every_live_rank(ev, frozen);
    if (!n)
        return 0;
    v->cls = HDX_CLASS_NOT_HUNG;
    v->confidence = HDX_CONF_HIGH;
    if (hdx_cls_set_text(&v->remedy, "thaw the cgroup (cgroup v2: echo 0 > cgroup.freeze; v1: echo THAWED > "
                                     "freezer.state; Slurm: scontrol resume JOBID), and the job goes on"))
        return -ENOMEM;
    return hdx_cls_set_text(&v->summary, "every %s (%d) is frozen by its cgroup's freezer: the job is suspended, "
                                         "not hung",
                            has_rank_process(ev) ? "rank process" : "process", n)
               ? -ENOMEM : 1;
}

/* The rules on stacks and CPU samples: 1 when one decided v, 0 when none did, -ENOMEM. */
static int stack_rules(const hdx_evidence *ev, hdx_verdict *v, int any_progress)
{
    if (every_live_rank(ev, busy))
        return verdict_not_hung(ev, v) ? -ENOMEM : 1;
    int r = hdx_cls_distributed(ev, v);
    if (r != 0)
        return r;
    if (any_progress)
        return verdict_not_hung(ev, v) ? -ENOMEM : 1;
    return 0;
}

int hdx_classify(const hdx_evidence *ev, hdx_verdict *v)
{
    hdx_verdict_clear(v);
    int jr = hdx_lock_judge_all(ev, &v->locks); /* the state of each lock (lockjudge.c) */
    if (jr < 0)
        return jr;
    v->n_locks = ev->n_locks;
    int any_progress = 0;
    for (size_t i = 0; i < ev->n_procs; i++)
        any_progress |= ev->procs[i].progressing == 1 && !ev->procs[i].set_aside;

    int fr = verdict_frozen(ev, v);
    if (fr)
        return fr < 0 ? fr : 0;
    long li = deciding_lock(ev, v);
    if (li >= 0) {
        const hdx_lock *l = &ev->locks[li];
        const hdx_lock_judgement *j = &v->locks[li];
        int rc = j->state == HDX_LOCK_STALE ? verdict_stale(ev, l, j, v) : verdict_held(ev, l, j, v);
        if (rc || v->cls == HDX_CLASS_NOT_HUNG || (rc = hdx_cls_logs(ev, v, 0)) < 0)
            return rc;
        return add_consequences(ev, l, v);
    }
    int r = stack_rules(ev, v, any_progress);
    if (r < 0)
        return r;
    /* Job logs (classify_logs.c): they decide what the stacks left open, else they add notes. */
    int lr = hdx_cls_logs(ev, v, r == 0);
    if (lr != 0 || r > 0)
        return lr < 0 ? lr : 0;

    v->cls = HDX_CLASS_UNKNOWN;
    v->confidence = HDX_CONF_LOW;
    int alive = 0, stacks = 0;
    for (size_t i = 0; i < ev->n_procs; i++) {
        alive |= ev->procs[i].alive != 0;
        for (size_t k = 0; k < ev->procs[i].n_threads; k++)
            stacks |= ev->procs[i].threads[k].n_frames > 0;
    }
    const char *why = !ev->n_procs ? "no process to judge: the input held no process"
                      : !alive     ? "every process has exited or was killed, and nothing it left says it was stuck"
                      : !stacks    ? "no rule matched, and no stack could be read: see the notes for what is missing"
                                   : "stuck, but no rule matched: read the stack groups below";
    return hdx_cls_set_text(&v->summary, "%s", why);
}
