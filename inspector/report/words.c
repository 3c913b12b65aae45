/*
 * The verdict in words (words.h): the dispatch over the families of findings,
 * and the words of the lock, CPU and stack findings (docs/design.md "Findings").
 */
#include "report/words.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/util.h"
#include "report/words_impl.h"

/* ---- locks -------------------------------------------------------------------- */

/* The lock a lock finding names (its fact "lock_index"), and its judgement; NULL when v has none. */
static const hdx_lock *lock_of(const hdx_evidence *ev, const hdx_verdict *v, const hdx_lock_judgement **j)
{
    long long li = hdx_verdict_num(v, "lock_index", -1);
    if (li < 0 || (size_t)li >= ev->n_locks || (size_t)li >= v->n_locks)
        return NULL;
    *j = &v->locks[li];
    return &ev->locks[li];
}

/* The waiters of the job judged (fact "waiter_indexes": indexes in l->waiters) as one phrase,
 * "rank 1 (pid 12), pid 40", and how many it names (for the verb). */
static size_t waiters_phrase(const hdx_evidence *ev, const hdx_verdict *v, const hdx_lock *l, char *buf, size_t size)
{
    const hdx_fact *f = hdx_verdict_fact(v, "waiter_indexes");
    size_t used = 0, told = 0, n = f && f->kind == HDX_FACT_INTS ? f->n_ints : 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && used + 60 < size; i++) {
        if (f->ints[i] < 0 || (size_t)f->ints[i] >= l->n_waiters)
            continue;
        told++;
        const hdx_waiter *w = &l->waiters[f->ints[i]];
        char who[160];
        hdx_evidence_who(ev, hdx_evidence_find_waiter(ev, w), w->pid, w->rank, who, sizeof who);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", who);
    }
    if (!buf[0])
        snprintf(buf, size, "no process seen waiting");
    return told < n && used + 60 >= size ? n : told; /* a list cut short still counts all */
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
static void call_site(const hdx_evidence *ev, const hdx_verdict *v, const hdx_lock *l, char *buf, size_t size)
{
    const hdx_fact *f = hdx_verdict_fact(v, "waiter_indexes");
    buf[0] = 0;
    for (size_t i = 0; f && f->kind == HDX_FACT_INTS && i < f->n_ints; i++) {
        const hdx_process *p = (size_t)f->ints[i] < l->n_waiters ? hdx_evidence_find_waiter(ev, &l->waiters[f->ints[i]])
                                                                  : NULL;
        for (size_t k = 0; p && k < p->n_threads; k++) {
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

/*
 * A stale lock whose file is gone now (fact "deleted"): what the trace proved, and a remedy
 * that deletes nothing. The waiters of the fact that still run must be restarted: their
 * FileBaton.wait returns once the file is gone, and they load whatever the dead build left.
 */
static int words_deleted(const hdx_evidence *ev, const hdx_verdict *v, const hdx_lock *l, const char *waiters,
                         size_t n_waiters, const char *site, const char *creator, hdx_words *w)
{
    const hdx_fact *f = hdx_verdict_fact(v, "waiter_indexes");
    char alive[512] = "", left[200] = "";
    size_t used = 0, n_alive = 0;
    for (size_t i = 0; f && f->kind == HDX_FACT_INTS && i < f->n_ints && used + 60 < sizeof alive; i++) {
        if (f->ints[i] < 0 || (size_t)f->ints[i] >= l->n_waiters)
            continue;
        const hdx_waiter *x = &l->waiters[f->ints[i]];
        const hdx_process *p = hdx_evidence_find_waiter(ev, x);
        if (!p || p->alive != 1)
            continue;
        char who[160];
        hdx_evidence_who(ev, p, x->pid, x->rank, who, sizeof who);
        used += (size_t)snprintf(alive + used, sizeof alive - used, "%s%s", used ? ", " : "", who);
        n_alive++;
    }
    if (l->creator_children > 0)
        snprintf(left, sizeof left,
                 "first stop the %d process%s the dead builder left (see the notes): %s may still write into "
                 "the build directory; then ",
                 l->creator_children, l->creator_children == 1 ? "" : "es", l->creator_children == 1 ? "it" : "they");
    if (hdx_words_set(&w->summary,
                      "%s waited%s on the stale build lock %s (%s) up to the last poll %s trace%s recorded: "
                      "nothing released it; the lock file is gone now (deleted since: relaunch)",
                      waiters, site, l->path, creator, n_waiters == 1 ? "its" : "their", n_waiters == 1 ? "" : "s"))
        return -ENOMEM;
    if (n_alive)
        return hdx_words_set(&w->remedy,
                             "%sstop %s, which still run%s (a waiter whose lock file went away wakes up and loads "
                             "a half-built module), and relaunch the job; nothing to delete: %s is gone already",
                             left, alive, n_alive == 1 ? "s" : "", l->path)
                   ? -ENOMEM
                   : 1;
    return hdx_words_set(&w->remedy, "%srelaunch the job; nothing to delete: %s is gone already", left, l->path)
               ? -ENOMEM
               : 1;
}

/* A stale lock: its creator, and the remedy (never a host file for a gone container's path). */
static int words_stale(const hdx_evidence *ev, const hdx_verdict *v, const hdx_lock *l, const hdx_lock_judgement *j,
                       hdx_words *w)
{
    char waiters[512], creator[256], site[600];
    size_t n = waiters_phrase(ev, v, l, waiters, sizeof waiters);
    call_site(ev, v, l, site, sizeof site);
    if (l->has_creator) {
        char c[160];
        hdx_evidence_who(ev, NULL, l->creator_pid, l->creator_rank, c, sizeof c);
        snprintf(creator, sizeof creator, "created by %s, which is %s", c,
                 j->creator_alive == 1 ? "alive but no longer holds it" : "gone");
    } else {
        snprintf(creator, sizeof creator, "creator unknown: no trace");
    }
    if (v->finding == HDX_FIND_LOCK_STALE_UNCHECKED)
        return hdx_words_set(&w->summary,
                             "%s wait%s%s on %s, which looks stale (%s), but %d process%s of other users could not "
                             "be checked for a holder",
                             waiters, hdx_words_verb_s(n), site, l->path, creator, j->unchecked,
                             j->unchecked == 1 ? "" : "es") ||
                       hdx_words_set(&w->remedy,
                                     "run hangdx as root (or as the lock's owner) to see whether a live process "
                                     "holds %s before deleting it",
                                     l->path)
                   ? -ENOMEM
                   : 1;
    if (hdx_verdict_num(v, "deleted", 0)) /* proved stale by the trace; the file is gone now */
        return words_deleted(ev, v, l, waiters, n, site, creator, w);
    if (hdx_words_set(&w->summary,
                      "%s wait%s%s on the stale build lock %s (%s); no process holds or has it open, so nothing "
                      "will release it",
                      waiters, hdx_words_verb_s(n), site, l->path, creator))
        return -ENOMEM;
    if (l->foreign) /* a gone container's path: a namesake here is not its lock */
        return hdx_words_set(&w->remedy,
                             "the lock is a path of the container of mount namespace %llu, whose processes are all "
                             "gone, and not this host's: in that container's file system (its image's writable "
                             "layer, or the volume it had mounted there), delete %s, then relaunch; never a file "
                             "of that name on this host",
                             (unsigned long long)l->mnt_ns, l->path)
                   ? -ENOMEM
                   : 1;
    return hdx_words_set(&w->remedy,
                         "stop the ranks that wait on it first (a waiter that wakes up loads a half-built module), "
                         "and check that no build runs on any node that shares this directory (processes left from "
                         "a killed builder included); then delete the lock and relaunch: rm %s",
                         l->path)
               ? -ENOMEM
               : 1;
}

/* A held lock: its holder, the build under it (fact "compiler_pid"), and what to do. */
static int words_held(const hdx_evidence *ev, const hdx_verdict *v, const hdx_lock *l, const hdx_lock_judgement *j,
                      hdx_words *w)
{
    const hdx_process *holder = hdx_evidence_find_process_on(ev, j->holder_host, j->holder_pid);
    char waiters[512], h[160], site[600], child[256] = "";
    size_t n = waiters_phrase(ev, v, l, waiters, sizeof waiters);
    call_site(ev, v, l, site, sizeof site);
    hdx_evidence_who(ev, holder, j->holder_pid, HDX_UNKNOWN, h, sizeof h);
    long long compiler = hdx_verdict_num(v, "compiler_pid", -1);
    const hdx_process *c = compiler > 0 ? hdx_evidence_find_process_on(ev, holder ? holder->host : NULL, (int)compiler)
                                        : NULL;
    if (c)
        snprintf(child, sizeof child, "%s (pid %d) has run %.0f s, %s", hdx_process_name(c), c->pid, c->age_s,
                 c->state == 'T' || c->state == 't'        ? "stopped (state T)"
                 : hdx_verdict_num(v, "compiler_busy", 0) ? "CPU-busy"
                                                           : "idle");
    int rc;
    switch (v->finding) {
    case HDX_FIND_LOCK_HOLDER_UNREAD:
        rc = hdx_words_set(&w->summary, "%s wait%s on %s, held by %s, which could not be inspected", waiters,
                           hdx_words_verb_s(n), l->path, h) ||
             hdx_words_set(&w->remedy, "inspect the holder: hangdx inspect %d", j->holder_pid);
        break;
    case HDX_FIND_BUILD_STUCK:
        rc = hdx_words_set(&w->summary, "%s holds %s and its build is stuck (%s): %s; %s wait%s", h, l->path,
                           hdx_verdict_num(v, "timed_out", 0) ? "past --build-timeout" : "no CPU progress", child,
                           waiters, hdx_words_verb_s(n)) ||
             hdx_words_set(&w->remedy,
                           "look at the compiler (pid %lld): kill it and the build of %s, then relaunch; a compiler "
                           "killed by the OOM killer or out of memory calls for a lower MAX_JOBS",
                           compiler, h);
        break;
    case HDX_FIND_BUILD_RUNNING:
        rc = hdx_words_set(&w->summary, "a build is running: %s holds %s%s%s; %s wait%s for it%s", h, l->path,
                           child[0] ? " and " : "", child, waiters, hdx_words_verb_s(n), site) ||
             hdx_words_set(&w->remedy, "wait for the build; hangdx calls it compile_stall after --build-timeout (%lld s)",
                           hdx_verdict_num(v, "build_timeout_s", 0));
        break;
    default: /* HDX_FIND_LOCK_HOLDER_STUCK */
        rc = hdx_words_set(&w->summary, "%s wait%s%s on %s %s, held by %s, which is itself stuck (%s, no CPU progress)",
                           waiters, hdx_words_verb_s(n), site, hdx_lock_kind_name(j->kind), l->path, h,
                           holder && holder->n_threads && holder->threads[0].wait ? holder->threads[0].wait : "idle") ||
             hdx_words_set(&w->remedy, "find why %s is stuck (hangdx inspect %d); ending it releases %s", h,
                           j->holder_pid, l->path);
    }
    return rc ? -ENOMEM : 1;
}

/* The ranks that wait in a distributed call behind a lock (facts "consequence_ranks",
 * "consequence_op"), appended to the summary. */
static int words_consequences(const hdx_verdict *v, hdx_words *w)
{
    char ranks[256];
    size_t n = hdx_words_ranks(v, "consequence_ranks", ranks, sizeof ranks);
    const char *op = hdx_verdict_text(v, "consequence_op");
    if (!n || !op)
        return 0;
    return hdx_words_set(&w->summary, "%s; as a consequence rank%s %s wait%s in %s", w->summary, hdx_words_noun_s(n),
                         ranks, hdx_words_verb_s(n), op);
}

/* ---- CPU and stacks ------------------------------------------------------------- */

/* not_hung, the processes make progress: those of the fact "busy_indexes" (indexes in ev->procs). */
static int words_progress(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    const hdx_fact *f = hdx_verdict_fact(v, "busy_indexes");
    char busy[256] = "";
    size_t used = 0;
    for (size_t i = 0; f && f->kind == HDX_FACT_INTS && i < f->n_ints && used + 64 < sizeof busy; i++) {
        if (f->ints[i] < 0 || (size_t)f->ints[i] >= ev->n_procs)
            continue;
        const hdx_process *p = &ev->procs[f->ints[i]];
        char who[160];
        hdx_evidence_who(ev, p, 0, 0, who, sizeof who);
        used += (size_t)snprintf(busy + used, sizeof busy - used, "%s%s %s", used ? ", " : "", who,
                                 hdx_process_name(p));
    }
    return hdx_words_set(&w->summary, "the processes are making progress (CPU time grows): %s", busy);
}

/* The lock, CPU and stack findings: 1 when f is one (w set), 0, -ENOMEM. */
static int words_local(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    const hdx_lock_judgement *j = NULL;
    const hdx_lock *l;
    const char *why;
    int rc;
    switch (v->finding) {
    case HDX_FIND_LOCK_STALE:
    case HDX_FIND_LOCK_STALE_UNCHECKED:
    case HDX_FIND_LOCK_HOLDER_UNREAD:
    case HDX_FIND_BUILD_STUCK:
    case HDX_FIND_BUILD_RUNNING:
    case HDX_FIND_LOCK_HOLDER_STUCK:
        if (!(l = lock_of(ev, v, &j))) /* not the evidence v was classified from */
            return 0;
        rc = (v->finding == HDX_FIND_LOCK_STALE || v->finding == HDX_FIND_LOCK_STALE_UNCHECKED)
                 ? words_stale(ev, v, l, j, w)
                 : words_held(ev, v, l, j, w);
        return rc < 0 || words_consequences(v, w) ? -ENOMEM : 1;
    case HDX_FIND_FROZEN:
        return hdx_words_set(&w->summary,
                             "every %s (%lld) is frozen by its cgroup's freezer: the job is suspended, not hung",
                             hdx_verdict_num(v, "of_ranks", 0) ? "rank process" : "process",
                             hdx_verdict_num(v, "frozen", 0)) ||
                       hdx_words_set(&w->remedy, "thaw the cgroup (cgroup v2: echo 0 > cgroup.freeze; v1: echo "
                                                 "THAWED > freezer.state; Slurm: scontrol resume JOBID), and the job "
                                                 "goes on")
                   ? -ENOMEM
                   : 1;
    case HDX_FIND_PROGRESS:
        return words_progress(ev, v, w) ? -ENOMEM : 1;
    case HDX_FIND_NO_PROCESS:
        why = "no process to judge: the input held no process";
        break;
    case HDX_FIND_ALL_EXITED:
        why = "every process has exited or was killed, and nothing it left says it was stuck";
        break;
    case HDX_FIND_NO_STACKS:
        why = "no rule matched, and no stack could be read: see the notes for what is missing";
        break;
    case HDX_FIND_NO_RULE:
        why = "stuck, but no rule matched: read the stack groups below";
        break;
    default:
        return 0;
    }
    return hdx_words_set(&w->summary, "%s", why) ? -ENOMEM : 1;
}

int hdx_verdict_words(const hdx_evidence *ev, const hdx_verdict *v, char **summary, char **remedy)
{
    hdx_words w = {NULL, NULL};
    int r = words_local(ev, v, &w);
    if (r == 0)
        r = hdx_words_dist(ev, v, &w);
    if (r == 0)
        r = hdx_words_logs(ev, v, &w);
    /* A finding whose facts are too few for its words (a verdict read from another evidence,
     * or a family's guard): still one honest sentence. */
    if (r == 0 && v->finding != HDX_FIND_NONE)
        r = hdx_words_set(&w.summary, "%s (%s); its facts are too few to word it: see the report's verdict.facts",
                          hdx_class_name(v->cls), hdx_finding_name(v->finding));
    if (r < 0) {
        free(w.summary);
        free(w.remedy);
        w.summary = w.remedy = NULL;
    }
    *summary = w.summary;
    *remedy = w.remedy;
    return r < 0 ? r : 0;
}
