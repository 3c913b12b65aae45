/* Unit tests of classify's hdx_lock_judge on evidence built here, with no I/O: the
 * state (held, stale, free), kind and holder a user checks, judged from a lock's facts
 * as docs/design.md "Build locks" defines them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify.h"
#include "model/evidence.h"
#include "report/words.h"

#include "check.h"

#define WAITER 300  /* a rank polling the baton, or blocked in flock */
#define CREATOR 200 /* the process the trace saw create the lock */

/* A baton <dir>/lock that exists, seen live, that WAITER waits on (and has open, as a
 * poller's stat does not, but a blocked flock does: a waiter never counts as a holder). */
static hdx_lock *baton(hdx_evidence *ev)
{
    hdx_lock *l = hdx_evidence_add_lock(ev);
    l->path = strdup("/w/fused_kernels/build/lock");
    l->kind = HDX_LOCK_BATON;
    l->exists = 1;
    l->mtime_ns = 1764441000000000000LL;
    l->facts.looked = l->facts.live = l->facts.checked = 1;
    l->facts.rows_read = l->facts.openers_read = 1;
    hdx_waiter *w = hdx_lock_add_waiter(l);
    w->pid = WAITER;
    w->rank = 0;
    return l;
}

static void add_row(hdx_lock *l, int pid, enum hdx_lock_kind kind, int blocking)
{
    hdx_lock_facts *f = &l->facts;
    f->rows = realloc(f->rows, (f->n_rows + 1) * sizeof *f->rows);
    f->rows[f->n_rows++] = (hdx_lock_row){.pid = pid, .kind = kind, .blocking = blocking};
}

static void add_opener(hdx_lock *l, int pid)
{
    hdx_lock_facts *f = &l->facts;
    f->openers = realloc(f->openers, (f->n_openers + 1) * sizeof *f->openers);
    f->openers[f->n_openers++] = pid;
}

static void add_pid(hdx_lock *l, int pid, int alive)
{
    hdx_lock_facts *f = &l->facts;
    f->pids = realloc(f->pids, (f->n_pids + 1) * sizeof *f->pids);
    f->pids[f->n_pids++] = (hdx_pid_fact){.pid = pid, .alive = alive, .start_ticks = alive ? 4242 : 0};
}

static void creator(hdx_lock *l, int alive)
{
    l->has_creator = 1;
    l->creator_pid = CREATOR;
    l->creator_rank = 1;
    l->creator_alive = alive;
}

static hdx_lock_judgement judge(const hdx_evidence *ev, const hdx_lock *l)
{
    hdx_lock_judgement j;
    CHECK(hdx_lock_judge(ev, l, &j) == 0);
    return j;
}

/* The creator is dead and only the waiter has the file open: stale, nobody holds it. */
static void baton_creator_dead(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    creator(l, 0);
    add_opener(l, WAITER);
    add_pid(l, WAITER, 1);
    hdx_lock before = *l;
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_STALE && j.holder_pid == HDX_UNKNOWN);
    CHECK(j.kind == HDX_LOCK_BATON && j.creator_alive == 0 && j.from_facts == 1 && j.unchecked == 0);
    char note[256];
    CHECK(hdx_lock_judgement_note(l, &j, note, sizeof note) == 0); /* the trace names the creator */
    /* pure: the lock is as it was (what the old resolver changed in place) */
    CHECK(l->kind == before.kind && l->state == before.state && l->holder_pid == before.holder_pid);
    CHECK(l->creator_alive == before.creator_alive && l->unchecked == before.unchecked && ev->n_notes == 0);
    hdx_evidence_free(ev);
}

/* The creator lives on (the trace says so, or its process in the evidence does): held by it,
 * never stale, though nobody has the file open now. */
static void baton_creator_alive(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    creator(l, 1);
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == CREATOR && j.creator_alive == 1);

    l->creator_alive = HDX_UNKNOWN; /* the trace could not tell: the inspected process does */
    hdx_process *p = hdx_evidence_add_process(ev);
    p->pid = CREATOR;
    p->alive = 1;
    j = judge(ev, &ev->locks[0]);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == CREATOR && j.creator_alive == 1);
    p->alive = 0;
    j = judge(ev, &ev->locks[0]);
    CHECK(j.state == HDX_LOCK_STALE && j.holder_pid == HDX_UNKNOWN && j.creator_alive == 0);
    hdx_evidence_free(ev);
}

/* No trace: stale, and the note says the creator is unknown and how to know it. */
static void baton_no_trace(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_STALE && j.creator_unknown == 1 && j.creator_alive == HDX_UNKNOWN);
    char note[256] = "";
    CHECK(hdx_lock_judgement_note(l, &j, note, sizeof note) == 1);
    CHECK(!strcmp(note, "/w/fused_kernels/build/lock: creator unknown: no trace (run the job under 'hangdx run' "
                        "to record who creates build locks)"));
    /* Processes of other users could not be read: a holder may hide there. */
    l->facts.unreadable = 97;
    CHECK(judge(ev, l).state == HDX_LOCK_STALE && judge(ev, l).unchecked == 97);
    hdx_evidence_free(ev);
}

/* A live process that has the baton open and does not wait on it holds it; the creator
 * first among several. */
static void baton_opener(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    creator(l, 0);
    l->facts.unreadable = 5;
    add_opener(l, WAITER);
    add_opener(l, 555);
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == 555 && j.unchecked == 0);
    add_opener(l, CREATOR);
    CHECK(judge(ev, l).holder_pid == CREATOR);
    hdx_evidence_free(ev);
}

/* A kernel flock on a file found by its name: the kernel says what it is and who holds it. */
static void flock_live_holder(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    add_row(l, 500, HDX_LOCK_FLOCK, 0);
    add_row(l, WAITER, HDX_LOCK_FLOCK, 1); /* the waiter's blocked request */
    add_pid(l, 500, 1);
    add_opener(l, 500);
    add_opener(l, WAITER);
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == 500 && j.kind == HDX_LOCK_FLOCK);

    /* Its holder gone and nobody else with the file open: an unlocked kernel lock is free. */
    l->facts.pids[0].alive = 0;
    l->facts.n_openers = 1; /* only the waiter */
    l->facts.openers[0] = WAITER;
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_FREE && j.holder_pid == HDX_UNKNOWN && j.kind == HDX_LOCK_FLOCK);

    /* The same facts taken after the job (analyze): the trace's last holder is named, and said. */
    l->facts.live = 0;
    creator(l, 0);
    l->kind = HDX_LOCK_FLOCK; /* the trace saw a flock */
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == CREATOR && j.holder_from_trace == 1);
    char note[256] = "";
    CHECK(hdx_lock_judgement_note(l, &j, note, sizeof note) == 1 && strstr(note, "holder pid 200 taken from the trace"));
    hdx_evidence_free(ev);
}

/* The file is gone: free, whoever created it. */
static void file_gone(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    creator(l, 0);
    l->exists = 0;
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_FREE && j.holder_pid == HDX_UNKNOWN);
    hdx_evidence_free(ev);
}

/* After the job (facts.live 0), the file deleted since: the trace keeps what it proved. A baton
 * its creator took and never released, that is gone now, which a waiter polled until its trace
 * ended, was stale (deleted 1); without a waiter, a creator known dead, a baton, or with a live
 * look, nothing proves it: free. */
static void file_gone_after_job(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    creator(l, 0);
    l->exists = 0;
    l->facts.live = 0;
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_STALE && j.deleted == 1 && j.holder_pid == HDX_UNKNOWN && j.creator_alive == 0);
    CHECK(j.from_facts == 1 && j.unchecked == 0 && j.creator_unknown == 0);
    l->creator_alive = HDX_UNKNOWN; /* another host's creator: not known dead */
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_FREE && j.deleted == 0);
    l->creator_alive = 1; /* it lives: it may have released it itself */
    CHECK(judge(ev, l).state == HDX_LOCK_FREE);
    l->creator_alive = 0;
    l->kind = HDX_LOCK_FLOCK; /* a kernel lock goes with its holder's fds, not with the file */
    CHECK(judge(ev, l).state == HDX_LOCK_FREE);
    l->kind = HDX_LOCK_BATON;
    l->facts.live = 1; /* inspect: the file is gone while the job runs: free */
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_FREE && j.deleted == 0);
    l->facts.live = 0;
    l->has_creator = 0; /* no trace of who created it */
    CHECK(judge(ev, l).state == HDX_LOCK_FREE);
    l->has_creator = 1;
    l->n_waiters = 0; /* nobody waited on it: nothing to keep */
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_FREE && j.deleted == 0);
    l->n_waiters = 1;
    hdx_evidence_free(ev);
}

/* Another host's lock (not checked from here): exists unknown, a baton without a live
 * creator is stale. */
static void not_checked_here(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    l->exists = HDX_UNKNOWN;
    l->facts.checked = 0;
    l->facts.rows_read = l->facts.openers_read = 0;
    creator(l, 0);
    CHECK(judge(ev, l).state == HDX_LOCK_STALE);
    hdx_evidence_free(ev);
}

/* An older snapshot or report without facts: its recorded decision stands. */
static void recorded_decision(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = hdx_evidence_add_lock(ev);
    l->path = strdup("/w/build/lock");
    l->exists = 1;
    l->state = HDX_LOCK_HELD;
    l->holder_pid = 4200;
    l->holder_host = strdup("node-b");
    l->unchecked = 3;
    l->recorded = 1;
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == 4200 && j.unchecked == 3 && j.from_facts == 0);
    CHECK(j.holder_host && !strcmp(j.holder_host, "node-b"));
    CHECK(j.deleted == 0);
    /* a report that judged a gone file stale (by its trace): still stale, still deleted */
    l->state = HDX_LOCK_STALE;
    l->holder_pid = HDX_UNKNOWN;
    l->exists = 0;
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_STALE && j.deleted == 1 && j.from_facts == 0);
    hdx_evidence_free(ev);
}

static void arguments(void)
{
    hdx_lock_judgement j;
    hdx_evidence *ev = hdx_evidence_new();
    CHECK(hdx_lock_judge(NULL, NULL, &j) == -EINVAL);
    hdx_lock_judgement *all = (hdx_lock_judgement *)1;
    CHECK(hdx_lock_judge_all(ev, &all) == 0 && all == NULL); /* no lock, no array */
    hdx_evidence_free(ev);
}

/* A shared build directory seen from two hosts: this host's facts show no holder (stale),
 * host "b"'s show its pid 101 with the file open. Held, by 101 on b, whatever the order. */
static void two_hosts(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_lock *l = baton(ev);
    hdx_lock_judgement j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_STALE && j.holder_host == NULL);
    l->seen = calloc(1, sizeof *l->seen);
    l->n_seen = 1;
    l->seen[0].host = strdup("b");
    hdx_lock_facts *f = &l->seen[0].facts;
    *f = (hdx_lock_facts){.looked = 1, .live = 1, .checked = 1, .rows_read = 1, .openers_read = 1};
    f->openers = malloc(sizeof *f->openers);
    f->openers[f->n_openers++] = 101;
    f->pids = malloc(sizeof *f->pids);
    f->pids[f->n_pids++] = (hdx_pid_fact){.pid = 101, .alive = 1, .start_ticks = 7};
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == 101 && j.holder_host && strcmp(j.holder_host, "b") == 0);
    /* The other way round: this host holds it, b saw it stale. */
    hdx_lock_facts mine = l->facts;
    l->facts = *f;
    *f = mine;
    free(l->holder_host);
    l->holder_host = NULL;
    j = judge(ev, l);
    CHECK(j.state == HDX_LOCK_HELD && j.holder_pid == 101 && j.holder_host == NULL);
    hdx_evidence_free(ev);
}

int main(void)
{
    baton_creator_dead();
    baton_creator_alive();
    baton_no_trace();
    baton_opener();
    flock_live_holder();
    file_gone();
    file_gone_after_job();
    not_checked_here();
    recorded_decision();
    two_hosts();
    arguments();
    return failures ? 1 : 0;
}
