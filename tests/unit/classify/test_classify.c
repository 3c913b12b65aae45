/*
 * The classifier on recorded evidence: each case builds the evidence that
 * inspect would have gathered and checks the verdict's class, culprits and
 * the lock it names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify.h"
#include "classify/groups.h"
#include "model/evidence.h"
#include "report/report.h"
#include "report/words.h"
#include "check.h"

/* A process with one thread in the given syscall and state. */
static hdx_process *proc(hdx_evidence *ev, int pid, int ppid, int rank, const char *exe, char state,
                         long syscall, double cpu_first, double cpu_last)
{
    hdx_process *p = hdx_evidence_add_process(ev);
    p->pid = pid;
    p->ppid = ppid;
    p->rank = rank;
    p->alive = 1;
    p->state = state;
    p->cpu_ms_first = cpu_first;
    p->cpu_ms = cpu_last;
    p->window_ms = 500;
    p->age_s = 30;
    p->cmdline = calloc(1, sizeof *p->cmdline);
    p->cmdline[0] = strdup(exe);
    p->n_cmdline = 1;
    hdx_thread *t = hdx_process_add_thread(p);
    t->tid = pid;
    t->state = state;
    t->syscall = syscall;
    t->cpu_ms_first = cpu_first; /* its one thread used all of the process's CPU */
    t->cpu_ms = cpu_last;
    return p;
}

static hdx_lock *lock(hdx_evidence *ev, const char *path, enum hdx_lock_kind kind, enum hdx_lock_state st,
                      int holder)
{
    hdx_lock *l = hdx_evidence_add_lock(ev);
    l->path = strdup(path);
    l->kind = kind;
    l->state = st;
    l->holder_pid = holder;
    l->exists = 1;
    return l;
}

static void waiter(hdx_lock *l, int pid, int rank)
{
    hdx_waiter *w = hdx_lock_add_waiter(l);
    w->pid = pid;
    w->rank = rank;
}

static int has(const int *v, size_t n, int x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

static hdx_evidence *evidence(int samples)
{
    hdx_evidence *ev = hdx_evidence_new();
    ev->samples = samples;
    ev->taken_ns = 2000000000000000000LL;
    return ev;
}

/* B2: creator (rank 0) killed, rank 1 polls: build_lock, culprit the blocked rank. */
static void stale_baton_from_trace(void)
{
    hdx_evidence *ev = evidence(2);
    proc(ev, 200, 1, 1, "python3", 'S', 230 /* clock_nanosleep */, 100, 101);
    hdx_lock *l = lock(ev, "/w/fused_kernels/build/lock", HDX_LOCK_BATON, HDX_LOCK_STALE, HDX_UNKNOWN);
    l->has_creator = 1;
    l->creator_pid = 100;
    l->creator_rank = 0;
    l->creator_alive = 0;
    waiter(l, 200, 1);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_BUILD_LOCK);
    CHECK(v.confidence == HDX_CONF_HIGH);
    CHECK(v.n_culprit_ranks == 1 && v.culprit_ranks[0] == 1);
    CHECK(v.finding == HDX_FIND_LOCK_STALE);
    CHECK(hdx_verdict_num(&v, "lock_index", -1) == 0 && !strcmp(hdx_verdict_text(&v, "path"), "/w/fused_kernels/build/lock"));
    CHECK(v.locks[0].state == HDX_LOCK_STALE && v.locks[0].creator_alive == 0); /* its creator, rank 0, is gone */
    const hdx_fact *waiters = hdx_verdict_fact(&v, "waiter_indexes");
    CHECK(waiters && waiters->n_ints == 1 && waiters->ints[0] == 0);
    CHECK(!strcmp(ev->procs[0].threads[0].wait, "build_lock"));
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* B1: no trace: creator unknown, said so, confidence below high. */
static void stale_baton_no_trace(void)
{
    hdx_evidence *ev = evidence(2);
    proc(ev, 300, 1, HDX_UNKNOWN, "python3", 'S', 230, 50, 50);
    hdx_lock *l = lock(ev, "/w/build/lock", HDX_LOCK_BATON, HDX_LOCK_STALE, HDX_UNKNOWN);
    waiter(l, 300, HDX_UNKNOWN);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_BUILD_LOCK);
    CHECK(v.confidence == HDX_CONF_MEDIUM);
    CHECK(v.n_culprit_ranks == 0);
    CHECK(has(v.culprit_pids, v.n_culprit_pids, 300));
    CHECK(v.finding == HDX_FIND_LOCK_STALE);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* Run without root: other users' processes could not be checked for a holder. */
static void stale_baton_unverified(void)
{
    hdx_evidence *ev = evidence(2);
    proc(ev, 300, 1, HDX_UNKNOWN, "python3", 'S', 230, 50, 50);
    hdx_lock *l = lock(ev, "/w/build/lock", HDX_LOCK_BATON, HDX_LOCK_STALE, HDX_UNKNOWN);
    l->unchecked = 97;
    waiter(l, 300, HDX_UNKNOWN);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_BUILD_LOCK && v.confidence == HDX_CONF_LOW);
    CHECK(v.finding == HDX_FIND_LOCK_STALE_UNCHECKED && v.locks[0].unchecked == 97);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* B4: the holder's compiler burns CPU: a running build, not a hang. */
static void held_baton_busy_compiler(void)
{
    hdx_evidence *ev = evidence(2);
    proc(ev, 100, 1, 0, "python3", 'S', 61 /* wait4 */, 10, 10);
    proc(ev, 110, 100, HDX_UNKNOWN, "ninja", 'S', 61, 1, 1);
    proc(ev, 120, 110, HDX_UNKNOWN, "cc1plus", 'R', HDX_SYSCALL_RUNNING, 1000, 1490);
    proc(ev, 200, 1, 1, "python3", 'S', 230, 5, 5);
    hdx_lock *l = lock(ev, "/w/build/lock", HDX_LOCK_BATON, HDX_LOCK_HELD, 100);
    waiter(l, 200, 1);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_NOT_HUNG);
    CHECK(v.finding == HDX_FIND_BUILD_RUNNING && v.n_culprit_ranks == 0 && v.n_culprit_pids == 0);
    CHECK(hdx_verdict_num(&v, "compiler_pid", -1) == 120); /* the compiler under ninja */
    CHECK(hdx_verdict_num(&v, "compiler_busy", -1) == 1 && hdx_verdict_num(&v, "holder_pid", -1) == 100);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* The holder's compiler sits idle across the samples: compile_stall. */
static void held_baton_idle_compiler(void)
{
    hdx_evidence *ev = evidence(2);
    proc(ev, 100, 1, 0, "python3", 'S', 61, 10, 10);
    proc(ev, 120, 100, HDX_UNKNOWN, "c++", 'S', 61, 3, 3);
    proc(ev, 200, 1, 1, "python3", 'S', 230, 5, 5);
    hdx_lock *l = lock(ev, "/w/build/lock", HDX_LOCK_BATON, HDX_LOCK_HELD, 100);
    waiter(l, 200, 1);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_COMPILE_STALL);
    CHECK(v.n_culprit_ranks == 1 && v.culprit_ranks[0] == 0);
    CHECK(v.finding == HDX_FIND_BUILD_STUCK && hdx_verdict_num(&v, "timed_out", -1) == 0);
    CHECK(hdx_verdict_num(&v, "compiler_pid", -1) == 120 && hdx_verdict_num(&v, "compiler_busy", -1) == 0);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* A busy compiler past --build-timeout is a compile_stall too. */
static void held_baton_past_timeout(void)
{
    hdx_evidence *ev = evidence(2);
    ev->build_timeout_s = 60;
    proc(ev, 100, 1, 0, "python3", 'S', 61, 10, 10);
    proc(ev, 120, 100, HDX_UNKNOWN, "cc1plus", 'R', HDX_SYSCALL_RUNNING, 0, 400);
    hdx_lock *l = lock(ev, "/w/build/lock", HDX_LOCK_BATON, HDX_LOCK_HELD, 100);
    l->mtime_ns = ev->taken_ns - 120LL * 1000000000LL;
    waiter(l, 100, 0);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_COMPILE_STALL);
    CHECK(v.finding == HDX_FIND_BUILD_STUCK && hdx_verdict_num(&v, "timed_out", -1) == 1);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* B5: a flock holder that is itself stuck: build_lock naming the holder. */
static void flock_holder_stuck(void)
{
    hdx_evidence *ev = evidence(2);
    proc(ev, 400, 1, HDX_UNKNOWN, "python3", 'S', 73 /* flock */, 20, 20);
    proc(ev, 500, 1, HDX_UNKNOWN, "python3", 'S', 230, 20, 20);
    hdx_lock *l = lock(ev, "/w/cache/x.lock", HDX_LOCK_FLOCK, HDX_LOCK_HELD, 500);
    waiter(l, 400, HDX_UNKNOWN);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_BUILD_LOCK);
    CHECK(has(v.culprit_pids, v.n_culprit_pids, 500));
    CHECK(!has(v.culprit_pids, v.n_culprit_pids, 400));
    CHECK(v.finding == HDX_FIND_LOCK_HOLDER_STUCK && hdx_verdict_num(&v, "holder_pid", -1) == 500);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* A busy process with no lock: not_hung. With one sample, a running thread decides. */
static void busy_process(void)
{
    for (int samples = 1; samples <= 2; samples++) {
        hdx_evidence *ev = evidence(samples);
        proc(ev, 600, 1, HDX_UNKNOWN, "python3", 'R', HDX_SYSCALL_RUNNING, 100, 590);
        hdx_verdict v = {0};
        CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
        CHECK(v.cls == HDX_CLASS_NOT_HUNG);
        CHECK(ev->procs[0].progressing == 1);
        CHECK(!strcmp(ev->procs[0].threads[0].wait, "running"));
        hdx_verdict_clear(&v);
        hdx_evidence_free(ev);
    }
}

/* Idle with no rule: unknown, low confidence. */
static void idle_unknown(void)
{
    hdx_evidence *ev = evidence(2);
    proc(ev, 700, 1, 0, "python3", 'S', 202 /* futex */, 100, 100);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_UNKNOWN);
    CHECK(v.confidence == HDX_CONF_LOW);
    CHECK(!strcmp(ev->procs[0].threads[0].wait, "futex"));
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* A rank of job `port` (MASTER_PORT) whose main thread is in the Python frame
 * function (file). */
static hdx_process *rank_in(hdx_evidence *ev, int pid, int rank, int world, const char *port, const char *function,
                            const char *file, int line)
{
    hdx_process *p = proc(ev, pid, 1, rank, "python3", 'S', 202 /* futex */, 100, 100);
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", rank);
    snprintf(w, sizeof w, "%d", world);
    hdx_process_set_env(p, "RANK", r);
    hdx_process_set_env(p, "WORLD_SIZE", w);
    hdx_process_set_env(p, "MASTER_ADDR", "127.0.0.1");
    hdx_process_set_env(p, "MASTER_PORT", port);
    p->python = strdup("3.11 /usr/bin/python3.11");
    hdx_frame *f = hdx_thread_add_frame(&p->threads[0]);
    f->kind = HDX_FRAME_PYTHON;
    f->function = strdup(function);
    f->file = strdup(file);
    f->line = line;
    return p;
}

#define C10D "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"

/* v's summary and remedy as the report words them (report/words.h), into the caller's
 * heap strings; freed with words_free. */
typedef struct words {
    char *summary, *remedy;
} words;

static words words_of(const hdx_evidence *ev, const hdx_verdict *v)
{
    words w = {NULL, NULL};
    CHECK(hdx_verdict_words(ev, v, &w.summary, &w.remedy) == 0);
    return w;
}

static void words_free(words *w)
{
    free(w->summary);
    free(w->remedy);
}

/* B2 analyzed after the job, once the user ran the remedy (rm LOCK): the file is gone, but the
 * trace proves the job waited on a stale lock. The same verdict and culprits, the fact
 * "deleted", and words that say the file is gone and delete nothing: relaunch, restarting the
 * waiter that still runs. */
static void stale_baton_deleted_since(void)
{
    hdx_evidence *ev = evidence(0);
    proc(ev, 200, 1, 1, "python3", 'S', 230 /* clock_nanosleep */, 100, 101);
    hdx_lock *l = lock(ev, "/w/fused_kernels/build/lock", HDX_LOCK_BATON, HDX_LOCK_FREE, HDX_UNKNOWN);
    l->exists = 0;
    l->facts.looked = l->facts.checked = l->facts.rows_read = l->facts.openers_read = 1; /* live 0: analyze */
    l->has_creator = 1;
    l->creator_pid = 100;
    l->creator_rank = 0;
    l->creator_alive = 0;
    waiter(l, 200, 1);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_BUILD_LOCK && v.finding == HDX_FIND_LOCK_STALE && v.confidence == HDX_CONF_HIGH);
    CHECK(v.n_culprit_ranks == 1 && v.culprit_ranks[0] == 1 && v.n_culprit_pids == 1 && v.culprit_pids[0] == 200);
    CHECK(v.locks[0].state == HDX_LOCK_STALE && v.locks[0].deleted == 1);
    CHECK(hdx_verdict_num(&v, "deleted", 0) == 1 && hdx_verdict_num(&v, "lock_index", -1) == 0);
    CHECK(!strcmp(hdx_verdict_text(&v, "path"), "/w/fused_kernels/build/lock"));
    words w = words_of(ev, &v);
    CHECK(w.summary && strstr(w.summary, "rank 1 (pid 200) waited") &&
          strstr(w.summary, "the lock file is gone now (deleted since: relaunch)"));
    CHECK(w.remedy && !strstr(w.remedy, "rm ") && strstr(w.remedy, "stop rank 1 (pid 200), which still runs") &&
          strstr(w.remedy, "relaunch the job"));
    words_free(&w);
    hdx_verdict_clear(&v);

    /* the waiter is gone too: relaunch, nothing to stop */
    ev->procs[0].alive = 0;
    CHECK(hdx_classify(ev, &v) == 0 && v.finding == HDX_FIND_LOCK_STALE);
    w = words_of(ev, &v);
    CHECK(w.remedy && !strncmp(w.remedy, "relaunch the job; nothing to delete", 35) && !strstr(w.remedy, "stop"));
    words_free(&w);
    hdx_verdict_clear(&v);

    /* nobody waited on it: the trace proves nothing, the lock is free, no lock verdict */
    l->n_waiters = 0;
    CHECK(hdx_classify(ev, &v) == 0 && v.locks[0].state == HDX_LOCK_FREE && v.cls != HDX_CLASS_BUILD_LOCK);
    CHECK(hdx_verdict_fact(&v, "deleted") == NULL);
    l->n_waiters = 1;
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* inspect --all with two jobs: a 3-rank job whose rank 0 waits on a stale
 * build lock (ranks 1-2 in barrier behind it), and a 4-rank job whose rank 0
 * skipped the barrier. The 4-rank job is judged; the lock of the job set aside
 * decides nothing. */
static void two_jobs_lock_of_other_job(void)
{
    hdx_evidence *ev = evidence(2);
    rank_in(ev, 1000, 0, 3, "29500", "wait", "/usr/lib/python3/dist-packages/torch/utils/file_baton.py", 42);
    rank_in(ev, 1001, 1, 3, "29500", "barrier", C10D, 3439);
    rank_in(ev, 1002, 2, 3, "29500", "barrier", C10D, 3439);
    rank_in(ev, 2000, 0, 4, "29600", "skip_and_sleep", "/t/hangs.py", 40);
    for (int r = 1; r < 4; r++)
        rank_in(ev, 2000 + r, r, 4, "29600", "barrier", C10D, 3439);
    hdx_lock *l = lock(ev, "/w/ext/lock", HDX_LOCK_BATON, HDX_LOCK_STALE, HDX_UNKNOWN);
    waiter(l, 1000, 0);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT);
    CHECK(v.n_culprit_ranks == 1 && v.culprit_ranks[0] == 0);
    CHECK(v.n_culprit_pids == 1 && v.culprit_pids[0] == 2000);
    CHECK(v.finding == HDX_FIND_COLLECTIVE_ELSEWHERE && hdx_verdict_num(&v, "world_size", -1) == 4);
    words w = words_of(ev, &v);
    CHECK(w.summary && strstr(w.summary, "skip_and_sleep") && !strstr(w.summary, "pid 1000"));
    words_free(&w);
    CHECK(ev->procs[0].set_aside == 1 && ev->procs[3].set_aside == 0);
    /* The stack groups are the judged job's: its 4 ranks, none of the other job's pids. */
    hdx_group *g = NULL;
    size_t ng = 0, grouped = 0;
    CHECK(hdx_groups_make(ev, &g, &ng) == 0);
    for (size_t i = 0; i < ng; i++)
        for (size_t j = 0; j < g[i].n_pids; j++) {
            CHECK(g[i].pids[j] >= 2000);
            grouped++;
        }
    CHECK(grouped == 4);
    hdx_groups_free(g, ng);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* Two jobs, the larger one's processes all exited: the live job is judged. */
static void two_jobs_larger_gone(void)
{
    hdx_evidence *ev = evidence(2);
    for (int r = 0; r < 4; r++)
        rank_in(ev, 3000 + r, r, 4, "29700", "barrier", C10D, 3439)->alive = 0;
    rank_in(ev, 4000, 0, 2, "29800", "skip_and_sleep", "/t/hangs.py", 40);
    rank_in(ev, 4001, 1, 2, "29800", "all_reduce", C10D, 2050);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT);
    CHECK(v.n_culprit_pids == 1 && v.culprit_pids[0] == 4000);
    CHECK(ev->procs[0].set_aside == 1 && ev->procs[4].set_aside == 0 && ev->procs[4].is_rank_process == 1);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* inspect --all PID on a shared host: the job of the PID given is judged, though another
 * job has more live ranks (a review saw --all PID judge someone else's job). */
static void two_jobs_asked_one(void)
{
    hdx_evidence *ev = evidence(2);
    for (int r = 0; r < 4; r++)
        rank_in(ev, 3000 + r, r, 4, "29700", "barrier", C10D, 3439);
    rank_in(ev, 4000, 0, 2, "29800", "skip_and_sleep", "/t/hangs.py", 40);
    rank_in(ev, 4001, 1, 2, "29800", "all_reduce", C10D, 2050)->asked = 1;
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT);
    CHECK(v.n_culprit_pids == 1 && v.culprit_pids[0] == 4000);
    CHECK(ev->procs[0].set_aside == 1 && ev->procs[4].set_aside == 0);
    int said = 0;
    for (size_t i = 0; i < ev->n_notes; i++)
        said |= strstr(ev->notes[i], "the verdict is about the job of the process given") != NULL;
    CHECK(said);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* A job on two hosts (pids repeat across hosts): the culprit is named with its host,
 * in the verdict and on the text report's process lines; on one host, never. */
static void multi_host_names_host(void)
{
    for (int hosts = 1; hosts <= 2; hosts++) {
        hdx_evidence *ev = evidence(2);
        for (int r = 0; r < 8; r++) {
            hdx_process *p = r == 6 ? rank_in(ev, 5000 + r % 4, r, 8, "29500", "skip_and_sleep", "/t/hangs.py", 40)
                                    : rank_in(ev, 5000 + r % 4, r, 8, "29500", "barrier", C10D, 3439);
            p->host = strdup(hosts == 2 && r >= 4 ? "nodeB" : "nodeA");
        }
        if (hosts == 1)
            for (size_t i = 0; i < ev->n_procs; i++)
                ev->procs[i].pid = 5000 + (int)i;
        hdx_verdict v = {0};
        CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
        CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.n_culprit_ranks == 1 && v.culprit_ranks[0] == 6);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        CHECK(hdx_report_text(f, ev, &v, HDX_TREE_AUTO) == 0);
        fclose(f);
        words w = words_of(ev, &v);
        if (hosts == 2) {
            CHECK(w.summary && strstr(w.summary, "rank 6 (pid 5002 on nodeB) is in skip_and_sleep"));
            CHECK(text && strstr(text, "\n  rank 6 pid 5002 on nodeB  S"));
        } else {
            CHECK(w.summary && strstr(w.summary, "rank 6 (pid 5006) is in skip_and_sleep"));
            CHECK(text && strstr(text, "\n  rank 6 pid 5006  S") && !strstr(text, " on nodeA"));
        }
        words_free(&w);
        free(text);
        hdx_verdict_clear(&v);
        hdx_evidence_free(ev);
    }
}

/* Push a frame outside t's existing ones (frames are innermost first). */
static void outer_frame(hdx_thread *t, enum hdx_frame_kind kind, const char *function, const char *file)
{
    hdx_frame *f = hdx_thread_add_frame(t);
    f->kind = kind;
    f->function = strdup(function);
    f->file = file ? strdup(file) : NULL;
    f->line = file ? 10 : 0;
}

/* As tests/fixtures/nccl-h200/gpu_stuck.snapshot.json: world size 1, rank 0's host waits for the GPU
 * (item -> cudaStreamSynchronize). No culprit: the verdict says the GPU work does not
 * finish and the remedy looks at the GPU, not at "culprit ranks"; the text report's
 * process line says how long hangdx held it, and a group without a wait says so. */
static void gpu_stuck_wording(void)
{
    hdx_evidence *ev = evidence(2);
    hdx_process *p = proc(ev, 466, 1, 0, "python3", 'R', HDX_SYSCALL_RUNNING, 100, 100);
    hdx_process_set_env(p, "RANK", "0");
    hdx_process_set_env(p, "WORLD_SIZE", "1");
    p->stopped_us = 238;
    outer_frame(&p->threads[0], HDX_FRAME_NATIVE, "cuStreamSynchronize", NULL);
    outer_frame(&p->threads[0], HDX_FRAME_NATIVE, "cudaStreamSynchronize", NULL);
    outer_frame(&p->threads[0], HDX_FRAME_PYTHON, "case_gpu_stuck", "/t/nccl_hangs.py");
    hdx_process *other = proc(ev, 900, 1, HDX_UNKNOWN, "sleep", 'S', 230, 0, 0); /* no known wait */
    other->threads[0].syscall = HDX_SYSCALL_UNKNOWN;
    other->threads[0].name = strdup("sleep");
    outer_frame(&other->threads[0], HDX_FRAME_NATIVE, "main", NULL);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.n_culprit_ranks == 0);
    CHECK(v.finding == HDX_FIND_COLLECTIVE_GPU && hdx_verdict_num(&v, "world_size", -1) == 1);
    CHECK(hdx_verdict_text(&v, "op") && !strcmp(hdx_verdict_text(&v, "op"), "cudaStreamSynchronize"));
    words w = words_of(ev, &v);
    CHECK(w.summary && strstr(w.summary, "rank 0 (world size 1, all here) waits in cudaStreamSynchronize: the GPU "
                                         "work it waits for") && !strstr(w.summary, "(0)"));
    CHECK(w.remedy && strstr(w.remedy, "nvidia-smi") && !strstr(w.remedy, "culprit"));
    words_free(&w);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(hdx_report_text(f, ev, &v, HDX_TREE_AUTO) == 0);
    fclose(f);
    CHECK(text && strstr(text, "  hangdx held it 238 us  ") && !strstr(text, "stopped 238"));
    CHECK(text && !strstr(text, ") \n"));
    CHECK(!other->threads[0].wait && text && strstr(text, "thread 900 (sleep), no known wait\n"));
    free(text);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* As tests/fixtures/nccl-h200/comm_init.snapshot.json: rank 0 in ncclCommInitRank under all_reduce,
 * rank 1 alive elsewhere. Named as NCCL's communicator set-up; the remedy looks at why
 * rank 1 does not join, not at missing ranks or WORLD_SIZE. */
static void comm_init_wording(void)
{
    hdx_evidence *ev = evidence(2);
    hdx_process *r0 = rank_in(ev, 459, 0, 2, "29500", "all_reduce", C10D, 2050);
    hdx_thread *t = &r0->threads[0];
    /* native frames inside the Python one: rebuild the stack innermost first */
    hdx_frame py = t->frames[0];
    t->n_frames = 0;
    outer_frame(t, HDX_FRAME_NATIVE, "bootstrapInit(int, void*, ncclComm*)", NULL);
    outer_frame(t, HDX_FRAME_NATIVE, "ncclCommInitRankFunc(ncclAsyncJob*)", NULL);
    outer_frame(t, HDX_FRAME_NATIVE, "c10d::ProcessGroupNCCL::initNCCLComm", NULL);
    *hdx_thread_add_frame(t) = py;
    outer_frame(t, HDX_FRAME_PYTHON, "train_step", "/t/nccl_hangs.py");
    rank_in(ev, 460, 1, 2, "29500", "skip_and_sleep", "/t/nccl_hangs.py", 52);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_RENDEZVOUS_WAIT && v.n_culprit_ranks == 1 && v.culprit_ranks[0] == 1);
    CHECK(v.finding == HDX_FIND_RENDEZVOUS && hdx_verdict_num(&v, "nccl", -1) == 1);
    CHECK(hdx_verdict_text(&v, "call") && !strcmp(hdx_verdict_text(&v, "call"), "all_reduce"));
    const hdx_fact *elsewhere = hdx_verdict_fact(&v, "elsewhere");
    CHECK(elsewhere && elsewhere->n_ints == 1 && elsewhere->ints[0] == 1 && v.n_missing_ranks == 0);
    words w = words_of(ev, &v);
    CHECK(w.summary && strstr(w.summary, "rank 0 waits in NCCL communicator initialisation (ncclCommInitRank, "
                                         "under all_reduce, store 127.0.0.1:29500)"));
    CHECK(w.remedy && strstr(w.remedy, "does not join all_reduce") && strstr(w.remedy, "skip_and_sleep") &&
          !strstr(w.remedy, "missing") && !strstr(w.remedy, "WORLD_SIZE"));
    words_free(&w);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* A gloo worker thread running an async collective: waitSend under AsyncWork::execute
 * under ProcessGroupGloo::runLoop (as `hangdx dump` shows a gloo rank in all_reduce). */
static void gloo_worker(hdx_process *p)
{
    hdx_thread *w = hdx_process_add_thread(p);
    w->tid = p->pid + 5;
    w->state = 'S';
    w->syscall = 202;
    outer_frame(w, HDX_FRAME_NATIVE, "gloo::transport::tcp::UnboundBuffer::waitSend(int*, std::chrono::duration<long, "
                                     "std::ratio<1l, 1000l> >)", NULL);
    outer_frame(w, HDX_FRAME_NATIVE, "c10d::ProcessGroupGloo::AsyncWork::execute(c10::intrusive_ptr<...>)", NULL);
    outer_frame(w, HDX_FRAME_NATIVE, "c10d::ProcessGroupGloo::runLoop(int)", NULL);
}

/* Ranks 0-1 in all_reduce with their gloo workers in waitSend, rank 2 elsewhere: the
 * workers are service threads, not p2p waits, whether or not the main threads' stacks
 * were read (once, with none read, the verdict was p2p_mismatch). */
static void gloo_worker_is_no_p2p(void)
{
    for (int read = 1; read >= 0; read--) {
        hdx_evidence *ev = evidence(2);
        for (int r = 0; r < 2; r++) {
            hdx_process *p = rank_in(ev, 700 + r, r, 3, "29501", "all_reduce", C10D, 1541);
            if (!read) { /* its stack was not read */
                hdx_frame_clear(&p->threads[0].frames[0]);
                p->threads[0].n_frames = 0;
            }
            gloo_worker(p);
        }
        rank_in(ev, 702, 2, 3, "29501", "skip_and_sleep", "/t/hangs.py", 149);
        hdx_verdict v = {0};
        CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
        CHECK(v.cls != HDX_CLASS_P2P_MISMATCH);
        CHECK(ev->procs[0].threads[1].wait && !strcmp(ev->procs[0].threads[1].wait, "service"));
        if (read)
            CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.n_culprit_ranks == 1 && v.culprit_ranks[0] == 2);
        hdx_verdict_clear(&v);
        hdx_evidence_free(ev);
    }
}

/* Wrappers that carry RANK are never ranks; a DataLoader worker is its rank's worker. */
static void wrappers_and_workers(void)
{
    hdx_evidence *ev = evidence(2);
    const char *const names[] = {"/usr/bin/unshare", "/usr/bin/python3", "/usr/bin/python3", "/usr/bin/env",
                                 "/opt/trainer", "/usr/libexec/apptainer/bin/starter"};
    const int pids[] = {10, 11, 12, 20, 21, 30}, ppids[] = {1, 10, 11, 1, 20, 1}, ranks[] = {0, 0, 0, 1, 1, 2};
    for (int i = 0; i < 6; i++) {
        hdx_process *p = proc(ev, pids[i], ppids[i], -1, names[i], 'S', 7, 0, 0);
        char r[8];
        snprintf(r, sizeof r, "%d", ranks[i]);
        hdx_process_set_env(p, "RANK", r);
    }
    hdx_mark_rank_processes(ev);
    const int want[] = {0, 1, 0, 0, 1, 0};
    for (int i = 0; i < 6; i++)
        CHECK(ev->procs[i].is_rank_process == want[i]);
    CHECK(!strcmp(hdx_process_part(ev, &ev->procs[0]), "launcher"));
    CHECK(!strcmp(hdx_process_part(ev, &ev->procs[1]), "rank"));
    CHECK(!strcmp(hdx_process_part(ev, &ev->procs[2]), "worker"));
    CHECK(!strcmp(hdx_process_part(ev, &ev->procs[3]), "launcher"));
    hdx_evidence_free(ev);
}

int main(void)
{
    wrappers_and_workers();
    gloo_worker_is_no_p2p();
    gpu_stuck_wording();
    comm_init_wording();
    multi_host_names_host();
    two_jobs_lock_of_other_job();
    two_jobs_larger_gone();
    two_jobs_asked_one();
    stale_baton_from_trace();
    stale_baton_deleted_since();
    stale_baton_no_trace();
    stale_baton_unverified();
    held_baton_busy_compiler();
    held_baton_idle_compiler();
    held_baton_past_timeout();
    flock_holder_stuck();
    busy_process();
    idle_unknown();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("classify: all rules hold\n");
    return 0;
}
