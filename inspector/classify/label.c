/*
 * The label step (classify.h, hdx_evidence_label): the facts the rules read,
 * derived from the evidence and written into it, before the pure classifier
 * runs (docs/design.md "Data flow").
 */
#include "classify/classify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "classify/waits.h"
#include "model/util.h"

static int mark_lock_waiter(hdx_thread *t)
{
    free(t->wait);
    free(t->wait_op);
    t->wait_op = NULL;
    t->wait_peer = HDX_UNKNOWN;
    return (t->wait = strdup(HDX_WAIT_BUILD_LOCK)) ? 0 : -ENOMEM;
}

/* Process i's threads' waits labelled (arg: the evidence). 0 or -ENOMEM. */
static int label_process(void *arg, size_t i)
{
    hdx_process *p = &((hdx_evidence *)arg)->procs[i];
    for (size_t j = 0; j < p->n_threads; j++)
        if (hdx_wait_classify(&p->threads[j]))
            return -ENOMEM;
    return 0;
}

/* Label every thread's wait: frame and syscall signatures, then the lock waiters. The threads
 * are labelled on every CPU: each alone, from its own stack (0.3 s of one CPU at 131 072 ranks). */
static int label_waits(hdx_evidence *ev)
{
    if (hdx_parallel_for(ev->n_procs, 256, 0, label_process, ev))
        return -ENOMEM;
    for (size_t i = 0; i < ev->n_locks; i++) {
        const hdx_lock *l = &ev->locks[i];
        for (size_t j = 0; j < l->n_waiters; j++) {
            hdx_process *p = hdx_evidence_find_waiter(ev, &l->waiters[j]);
            for (size_t k = 0; p && k < p->n_threads; k++)
                if ((l->waiters[j].tid == HDX_UNKNOWN && k == 0) || p->threads[k].tid == l->waiters[j].tid)
                    if (mark_lock_waiter(&p->threads[k]))
                        return -ENOMEM;
        }
    }
    return 0;
}

/* A world size from a process's rank variables (WORLD_SIZE, or a snapshot's "world_size") over
 * HDX_WORLD_SIZE_TAKEN is taken as unknown, with a note. */
static int bound_world_sizes(hdx_evidence *ev)
{
    const hdx_process *first = NULL;
    int claim = 0;
    size_t n = 0;
    for (size_t i = 0; i < ev->n_procs; i++) {
        hdx_process *p = &ev->procs[i];
        if (p->world_size <= HDX_WORLD_SIZE_TAKEN)
            continue;
        if (!n++) {
            first = p;
            claim = p->world_size;
        }
        p->world_size = HDX_UNKNOWN;
    }
    if (n && hdx_evidence_note(ev, "pid %d%s%s (rank %d) claims a world size of %d, more than hangdx takes (%d)%s: "
                                   "taken as unknown, so the ranks that no input shows are not named",
                               first->pid, first->host ? " on " : "", first->host ? first->host : "", first->rank,
                               claim, HDX_WORLD_SIZE_TAKEN, n > 1 ? ", as do other processes" : "") < 0)
        return -ENOMEM;
    return 0;
}

int hdx_evidence_label(hdx_evidence *ev)
{
    if (!ev)
        return -EINVAL;
    if (bound_world_sizes(ev))
        return -ENOMEM;
    hdx_mark_rank_processes(ev);
    size_t other_jobs = hdx_keep_largest_job(ev);
    int asked = 0; /* the job kept is that of a process given by PID */
    for (size_t i = 0; other_jobs && i < ev->n_procs; i++)
        asked |= ev->procs[i].asked && ev->procs[i].is_rank_process;
    /* Said where it is decided: after this step the count of rank processes set aside is gone
     * (their is_rank_process is 0). hdx_evidence_note says each thing once, so labelling again
     * adds nothing. */
    if (other_jobs &&
        hdx_evidence_note(ev, "%zu rank process%s of other jobs (another MASTER_ADDR/MASTER_PORT) were set aside: the "
                              "verdict is about %s; inspect each job's pids alone",
                          other_jobs, other_jobs == 1 ? "" : "es",
                          asked ? "the job of the process given" : "the job with the most live ranks here"))
        return -ENOMEM;
    if (label_waits(ev))
        return -ENOMEM;
    if (ev->samples > 0) /* post-mortem: progressing as recorded */
        for (size_t i = 0; i < ev->n_procs; i++)
            ev->procs[i].progressing = hdx_cls_progressing(ev, &ev->procs[i]);
    return 0;
}
