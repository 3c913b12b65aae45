#include "gather/capture.h"
#include "gather/nspath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hangdx/trace.h"
#include "gather/locks.h"
#include "gather/proc.h"
#include "gather/sample.h"
#include "native/stacks.h"
#include "formats/traces.h"
#include "model/util.h"

/* Bound of the syscall watch of a polling thread, ms (style.md: well under a second). */
#define WATCH_MS 400

/* Read pid into ev unless it is there already; notes say why it could not be, unless
 * `for_ranks` (only its ranks are wanted, and a process hangdx may not read shows none). */
static int add_process(hdx_evidence *ev, int pid, int for_ranks)
{
    if (hdx_evidence_find_process(ev, pid))
        return 0;
    hdx_process *p = hdx_evidence_add_process(ev);
    if (!p)
        return -ENOMEM;
    int64_t t0 = hdx_mono_ns();
    int rc = hdx_proc_read(p, pid);
    if (rc == -ESRCH) {
        hdx_process_clear(p);
        ev->n_procs--;
        return rc;
    }
    if ((rc == -EACCES || rc == -EPERM) && !for_ranks) {
        char denied[512];
        int uid = hdx_proc_uid(pid);
        if (hdx_proc_denied(pid, denied, sizeof denied) > 0)
            hdx_evidence_note(ev, "/proc/%d: %s (it belongs to uid %d, hangdx runs as uid %d) — what follows "
                                  "comes from what /proc still shows: command line, state, threads, CPU time; "
                                  "for the rest, %s",
                              pid, denied, uid, (int)geteuid(), hdx_proc_access_advice());
        else
            hdx_evidence_note(ev, "cannot read /proc/%d: permission denied — run as the same user or as root", pid);
    }
    /* Until the last sample, window_ms holds the time of the first one. */
    p->window_ms = t0 / 1000000;
    return rc;
}

/* pid and its descendants; with `rank_of`, only rank processes of that rank's job; asked: given by PID. */
static int add_tree(hdx_evidence *ev, int pid, const hdx_process *rank_of, int asked)
{
    int *pids = NULL;
    size_t n = 0;
    int rc = hdx_proc_descendants(&pid, 1, &pids, &n);
    if (rc)
        return rc;
    /* rank_of points into ev->procs, which add_process may move: keep its index. */
    size_t ref = rank_of ? (size_t)(rank_of - ev->procs) : 0;
    for (size_t j = 0; j < n && rc != -ENOMEM; j++) {
        if (pids[j] == getpid() || hdx_evidence_find_process(ev, pids[j]))
            continue; /* hangdx itself, when it runs under the inspected process */
        rc = add_process(ev, pids[j], rank_of != NULL);
        hdx_process *added = &ev->procs[ev->n_procs - 1];
        /* Looking for sibling ranks, a process of another user (root's runuser, slurmstepd
         * above the ranks) is not one: its variables cannot be read, and it is left out
         * rather than made a partial read of the inspection. */
        int denied = rc == -EACCES || rc == -EPERM;
        if ((rc == 0 || denied) && rank_of && added->pid == pids[j] &&
            (denied || added->rank < 0 || !hdx_process_same_job(&ev->procs[ref], added))) {
            hdx_process_clear(added);
            ev->n_procs--;
            rc = 0;
        } else if (rc == 0 && added->pid == pids[j]) {
            added->asked = asked;
        }
    }
    free(pids);
    return rc == -ENOMEM ? rc : 0;
}

/* The sibling ranks of every rank process: the rank processes of its job under its parent. */
static int add_siblings(hdx_evidence *ev)
{
    size_t n = ev->n_procs;
    for (size_t i = 0; i < n; i++) {
        const hdx_process *p = &ev->procs[i];
        if (p->rank < 0 || p->ppid <= 1 || hdx_evidence_find_process(ev, p->ppid))
            continue;
        if (add_tree(ev, p->ppid, p, 0) == -ENOMEM)
            return -ENOMEM;
    }
    return 0;
}

/* Read pid too, with its descendants, when it lives and was not read yet. */
static int add_candidate(hdx_evidence *ev, const hdx_lock *l, int pid)
{
    for (size_t k = 0; k < l->n_waiters; k++)
        if (l->waiters[k].pid == pid)
            return 0;
    if (pid <= 0 || hdx_evidence_find_process(ev, pid))
        return 0;
    return add_tree(ev, pid, NULL, 0) == -ENOMEM ? -ENOMEM : 0;
}

/* The processes that may hold a lock and were not asked for, with their descendants (a
 * holder's ninja and compilers tell a running build from a stuck one): every live process
 * that its facts name (a kernel lock's owner, a process with the file open) and does not
 * wait on it, and its creator while it lives. Which one holds it is classify's to judge. */
static int add_lock_holders(hdx_evidence *ev)
{
    for (size_t i = 0; i < ev->n_locks; i++) {
        const hdx_lock *l = &ev->locks[i];
        const hdx_lock_facts *f = &l->facts;
        int rc = 0;
        for (size_t k = 0; !rc && k < f->n_rows; k++)
            if (!f->rows[k].blocking)
                rc = add_candidate(ev, l, f->rows[k].pid);
        for (size_t k = 0; !rc && k < f->n_openers; k++)
            rc = add_candidate(ev, l, f->openers[k]);
        if (!rc && l->has_creator && l->creator_alive == 1)
            rc = add_candidate(ev, l, l->creator_pid);
        if (rc)
            return rc;
    }
    return 0;
}

/* -d, else the first HANGDX_TRACE_DIR among the processes' environments, named as that
 * process names it (in a container, its own root: gather/nspath.h). */
static int load_traces(hdx_evidence *ev, const char *dir)
{
    char *found = NULL;
    for (size_t i = 0; !dir && i < ev->n_procs; i++) {
        char *theirs = hdx_proc_getenv(ev->procs[i].pid, HDX_TRACE_DIR_ENV);
        int same;
        if (theirs && theirs[0] == '/') {
            found = hdx_proc_path_here(ev->procs[i].pid, theirs, &same);
            free(theirs);
        } else {
            found = theirs;
        }
        dir = found;
    }
    if (!dir)
        return 0; /* the lock resolver says what no trace leaves unknown */
    hdx_trace_set *set = NULL;
    char *err = NULL;
    int rc = hdx_trace_load_dir(dir, &set, &err);
    if (rc == 0) {
        rc = hdx_trace_to_evidence(set, ev, 0, hdx_proc_trace_host());
    } else {
        hdx_evidence_note(ev, "traces not read: %s", err ? err : strerror(-rc));
        rc = 0;
    }
    free(err);
    free(found);
    hdx_trace_set_free(set);
    return rc;
}

/* Merged native and Python stacks, with locals, of the live processes from
 * index `from` on; returns how many could not be read. */
static int take_stacks(hdx_evidence *ev, size_t from)
{
    int failures = 0;
    for (size_t i = from; i < ev->n_procs; i++)
        if (ev->procs[i].alive != 0 &&
            hdx_sample_stacks(&ev->procs[i], ev, HDX_SAMPLE_PYTHON | HDX_SAMPLE_LOCALS) != 0)
            failures++;
    return failures;
}

/*
 * Inside a Slurm step (SLURM_JOB_ID in hangdx's own environment, as srun sets
 * it), --all takes only that job's processes (of its SLURM_CLUSTER_NAME too,
 * where both have one), and neither hangdx's own step
 * nor the step of the hangdx that started this collection (HANGDX_SLURM_COLLECTOR,
 * "JOBID.STEPID"): their tasks carry the job's rank variables but are no ranks.
 * skip has room for 2 step ids.
 */
static void slurm_filter(hdx_evidence *ev, hdx_rank_filter *f, const char **skip)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    const char *collector = getenv(HDX_SLURM_COLLECTOR_ENV);
    if (!job || !*job)
        return;
    f->slurm_job_id = job;
    f->slurm_cluster = getenv("SLURM_CLUSTER_NAME");
    f->skip_steps = skip;
    if (step && *step)
        skip[f->n_skip_steps++] = step;
    size_t jl = strlen(job);
    if (collector && !strncmp(collector, job, jl) && collector[jl] == '.' && collector[jl + 1])
        skip[f->n_skip_steps++] = collector + jl + 1;
    hdx_evidence_note(ev, "--all on %s: only the processes of Slurm job %s (hangdx runs in it), "
                          "without the step that collects", ev->host, job);
}

int hdx_capture(hdx_evidence *ev, const hdx_capture_options *o, int *failures)
{
    int rc = 0, failed = 0, exited = 0;
    uint64_t *first = NULL;
    ev->live = 1;
    hdx_stacks_set_native_lines(o->native_lines);
    ev->samples = o->samples;
    ev->interval_ms = o->interval_ms;
    if (!ev->host && !(ev->host = strdup(hdx_hostname())))
        return -ENOMEM;

    /* Reading a process is its first sample (hdx_proc_read). */
    for (size_t i = 0; i < o->n_pids; i++) {
        if (hdx_proc_is_kernel_thread(o->pids[i])) {
            hdx_evidence_note(ev, "process %d is a kernel thread: it has no user-space stacks to inspect",
                              o->pids[i]);
            continue;
        }
        rc = add_tree(ev, o->pids[i], NULL, 1);
        if (rc == -ESRCH)
            hdx_evidence_note(ev, "no process %d", o->pids[i]);
        else if (rc)
            return rc;
        else if (!hdx_evidence_find_process(ev, o->pids[i]) && o->pids[i] != getpid())
            hdx_evidence_note(ev, hdx_proc_state(o->pids[i]) == 'Z'
                                      ? "no process %d: it has exited (a zombie its parent has not reaped)"
                                      : "process %d exited while being inspected, before anything of it was read",
                              o->pids[i]);
    }
    if (o->all) {
        int *ranks = NULL;
        size_t n = 0;
        hdx_rank_filter f = {0};
        const char *skip[2];
        slurm_filter(ev, &f, skip);
        if (hdx_proc_find_ranks_filtered(&f, &ranks, &n) == 0)
            for (size_t i = 0; i < n; i++)
                if ((rc = add_process(ev, ranks[i], 0)) == -ENOMEM)
                    break;
        free(ranks);
        if (rc == -ENOMEM)
            return rc;
    }
    if ((rc = add_siblings(ev)) || !ev->n_procs || (rc = load_traces(ev, o->trace_dir)))
        return rc;

    /* Stacks first: a thread's Python frames can name the lock it waits on. */
    failed = take_stacks(ev, 0);
    size_t asked = ev->n_procs;
    hdx_locks_options lo = {.watch_ms = WATCH_MS};
    if ((rc = hdx_locks_collect(ev, &lo)) || (rc = hdx_locks_record_facts(ev, 0)) || (rc = add_lock_holders(ev)))
        goto out;
    failed += take_stacks(ev, asked);

    first = calloc(ev->n_procs, sizeof *first); /* the main threads' stacks at the first sample */
    for (size_t i = 0; first && i < ev->n_procs; i++)
        first[i] = ev->procs[i].n_threads ? hdx_stack_hash(&ev->procs[i].threads[0]) : 0;
    for (int s = 2; s <= o->samples; s++) {
        hdx_sleep_ms(o->interval_ms);
        for (size_t i = 0; i < ev->n_procs; i++) {
            hdx_process *p = &ev->procs[i];
            if (p->alive == 0)
                continue;
            hdx_proc_sample(p);
            if (p->alive == 0) { /* it ended between samples: reported as last seen, and said */
                exited++;
                hdx_evidence_note(ev, "process %d exited while being inspected (between samples): what was "
                                      "read before it ended is kept", p->pid);
            }
        }
    }
    int64_t now_ms = hdx_mono_ns() / 1000000;
    for (size_t i = 0; i < ev->n_procs; i++)
        ev->procs[i].window_ms = o->samples > 1 ? now_ms - ev->procs[i].window_ms : 0;
    if (o->samples > 1 && first) {
        /* Busy vs stuck also comes from whether the stacks moved (a spinning wait burns CPU too). */
        failed = take_stacks(ev, 0);
        for (size_t i = 0; i < ev->n_procs; i++)
            if (ev->procs[i].n_threads && ev->procs[i].alive != 0)
                ev->procs[i].stack_changed = hdx_stack_hash(&ev->procs[i].threads[0]) != first[i];
    }
    rc = hdx_locks_record_facts(ev, 0);
out:
    /* A process that ended during the capture is reported as it was last seen, and says so. */
    for (size_t i = 0; i < ev->n_procs; i++) {
        hdx_process *p = &ev->procs[i];
        if (p->alive == 0 || hdx_proc_alive(p->pid, p->start_ticks))
            continue;
        p->alive = 0;
        exited++;
        hdx_evidence_note(ev, "process %d exited while being inspected: what was read before it ended is "
                              "kept", p->pid);
    }
    hdx_stacks_forget();
    free(first);
    if (failures)
        *failures = failed + exited;
    return rc;
}
