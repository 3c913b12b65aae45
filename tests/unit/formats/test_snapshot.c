/*
 * hangdx.snapshot/1 on hand-built evidence: every field survives a round trip
 * and the JSON is the same after a second one; env outside the design's list
 * never leaves; bad inputs give clean errors and leave the evidence as it
 * was; several hosts merge into one job, associatively; a report reads back.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "classify/classify.h"
#include "classify/groups.h"
#include "formats/frames.h"
#include "model/evidence.h"
#include "report/report.h"
#include "report/words.h"
#include "formats/snapshot.h"
#include "check.h"

static char *sdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void add_local(hdx_frame *f, const char *name, enum hdx_value_kind k, long long i, double d, const char *s)
{
    f->locals = realloc(f->locals, (f->n_locals + 1) * sizeof *f->locals);
    hdx_local *v = &f->locals[f->n_locals++];
    memset(v, 0, sizeof *v);
    v->name = sdup(name);
    v->kind = k;
    v->i = i;
    v->f = d;
    v->s = sdup(s);
}

static void native(hdx_frame *f, const char *fn, const char *mod, uint64_t off, uint64_t pc)
{
    f->kind = HDX_FRAME_NATIVE;
    f->function = sdup(fn);
    f->file = sdup(fn ? "../src/x.c" : NULL);
    f->line = fn ? 42 : 0;
    f->module = sdup(mod);
    f->offset = off;
    f->pc = pc;
}

static void python(hdx_frame *f, const char *fn, const char *file, int line)
{
    f->kind = HDX_FRAME_PYTHON;
    f->function = sdup(fn);
    f->file = sdup(file);
    f->line = line;
}

/* A rank process on host with one thread of every kind of frame. */
static hdx_process *rank_proc(hdx_evidence *ev, const char *host, int pid, int rank)
{
    hdx_process *p = hdx_evidence_add_process(ev);
    char r[16];
    p->pid = pid;
    p->ppid = pid - 1;
    p->host = sdup(host);
    snprintf(r, sizeof r, "%d", rank);
    hdx_process_set_env(p, "RANK", r);
    hdx_process_set_env(p, "WORLD_SIZE", "4");
    p->cmdline = calloc(2, sizeof *p->cmdline);
    p->cmdline[0] = sdup("/usr/bin/python3");
    p->cmdline[1] = sdup("train.py");
    p->n_cmdline = 2;
    p->state = 'S';
    p->alive = 1;
    hdx_thread *t = hdx_process_add_thread(p);
    t->tid = pid;
    t->name = sdup("python3");
    t->state = 'S';
    t->syscall = 230;
    python(hdx_thread_add_frame(t), "barrier", "/usr/lib/python3/dist-packages/torch/distributed/c10d.py", 3000);
    return p;
}

/* Every field of the model set to something other than its default. */
static hdx_evidence *full_evidence(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    ev->host = sdup("node-a");
    ev->taken_ns = 1764441627123456789LL;
    ev->samples = 3;
    hdx_evidence_add_pgroup(ev, "0", (int[]){0, 1, 2, 3}, 4, "default_pg", NULL, 1);
    hdx_evidence_add_pgroup(ev, "2", (int[]){2, 3}, 2, NULL, "tp", 0);
    ev->interval_ms = 125;
    ev->build_timeout_s = 600;
    ev->live = 1;

    hdx_process *p = hdx_evidence_add_process(ev);
    p->pid = 4123;
    p->ppid = 4000;
    p->host = sdup("node-a");
    hdx_process_set_env(p, "RANK", "3");
    hdx_process_set_env(p, "LOCAL_RANK", "1");
    hdx_process_set_env(p, "WORLD_SIZE", "8");
    hdx_process_set_env(p, "MASTER_ADDR", "10.0.0.1");
    hdx_process_set_env(p, "TORCH_EXTENSIONS_DIR", "/home/u/.cache/torch_extensions");
    /* Set behind hdx_process_set_env's back: a secret must still never be written. */
    p->env = realloc(p->env, (p->n_env + 2) * sizeof *p->env);
    p->env[p->n_env++] = (hdx_env){sdup("AWS_SECRET_ACCESS_KEY"), sdup("hunter2-secret")};
    p->env[p->n_env++] = (hdx_env){sdup("HOME"), sdup("/home/secret-home")};
    p->rank = 3;
    p->local_rank = 1;
    p->world_size = 8;
    p->cmdline = calloc(3, sizeof *p->cmdline);
    p->cmdline[0] = sdup("/usr/bin/python3");
    p->cmdline[1] = sdup("pretrain.py");
    p->cmdline[2] = sdup("--tp=2 \"quoted\" \\ ünïcode");
    p->n_cmdline = 3;
    p->exe = sdup("/usr/bin/python3.11");
    p->cwd = sdup("/work/job");
    p->state = 'S';
    p->start_ticks = 123456789012ULL;
    p->age_s = 3600.25;
    p->cpu_ms_first = 1000.5;
    p->cpu_ms = 1002.75;
    p->window_ms = 612;
    p->progressing = 0;
    p->stack_changed = 1;
    p->frozen = 0;
    p->asked = 1;
    p->stopped_us = 5063;
    p->max_stop_us = 2100;
    p->alive = 1;
    p->read_error = -EACCES;
    p->python = sdup("3.11 /usr/bin/python3.11");

    hdx_thread *t = hdx_process_add_thread(p);
    t->tid = 4123;
    t->name = sdup("python3");
    t->state = 'S';
    t->wchan = sdup("hrtimer_nanosleep");
    t->syscall = 230;
    uint64_t args[6] = {1, 1, 0x7ffe0b1f27e0ULL, 0, 0xffffffffffffffffULL, 6};
    memcpy(t->syscall_args, args, sizeof args);
    t->cpu_ms_first = 990.5;
    t->cpu_ms = 998.125;
    t->polled_path = sdup("/work/job/build/lock");
    t->wait = sdup("build_lock");
    t->wait_op = sdup("recv");
    t->wait_peer = 2;
    t->wait_frame = 2;
    t->wait_pg = sdup("TENSOR_MODEL_PARALLEL_GROUP");
    t->wait_seq = 7;
    t->wait_sig = sdup("in [[2048]] float32, out [[2048]] float32");
    native(hdx_thread_add_frame(t), "clock_nanosleep", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0xcf503,
           0x7f7936f6b503ULL);
    native(hdx_thread_add_frame(t), NULL, "/usr/lib/libfoo.so", 0x10, 0xffffffffffffff10ULL); /* no symbol */
    hdx_frame *f = hdx_thread_add_frame(t);
    python(f, "FileBaton.wait", "/usr/lib/python3/dist-packages/torch/utils/file_baton.py", 42);
    add_local(f, "self", HDX_VAL_OTHER, 0, 0, "FileBaton");
    add_local(f, "none", HDX_VAL_NONE, 0, 0, NULL);
    add_local(f, "yes", HDX_VAL_BOOL, 1, 0, NULL);
    add_local(f, "no", HDX_VAL_BOOL, 0, 0, NULL);
    add_local(f, "src", HDX_VAL_INT, 2, 0, NULL);
    add_local(f, "neg", HDX_VAL_INT, -7, 0, NULL);
    add_local(f, "big", HDX_VAL_INT, 9223372036854775807LL, 0, NULL);
    add_local(f, "small", HDX_VAL_INT, -9223372036854775807LL - 1, 0, NULL);
    add_local(f, "wait_seconds", HDX_VAL_FLOAT, 0, 0.1, NULL);
    add_local(f, "whole", HDX_VAL_FLOAT, 0, 3.0, NULL);
    add_local(f, "inf", HDX_VAL_FLOAT, 0, INFINITY, NULL);
    add_local(f, "tiny", HDX_VAL_FLOAT, 0, 5e-324, NULL);
    add_local(f, "path", HDX_VAL_STR, 0, 0, "/work/job/build/lock");
    add_local(f, "empty", HDX_VAL_STR, 0, 0, "");
    add_local(f, "odd", HDX_VAL_OTHER, 0, 0, NULL);
    add_local(f, "group", HDX_VAL_OTHER, 0, 0, "ProcessGroupGloo");
    f->locals[f->n_locals - 1].pg = sdup("2");
    f = hdx_thread_add_frame(t);
    python(f, "_jit_compile", "/usr/lib/python3/dist-packages/torch/utils/cpp_extension.py", 1700);
    f->locals = calloc(1, sizeof *f->locals); /* read with locals, none there: {} not null */

    /* A thread whose Python frames could not be merged. */
    t = hdx_process_add_thread(p);
    t->tid = 4124;
    t->name = sdup("pt_watchdog");
    t->state = 'R';
    t->syscall = HDX_SYSCALL_RUNNING;
    native(hdx_thread_add_frame(t), "PyEval_EvalFrameDefault", "/usr/bin/python3.11", 0x1234, 0x5678);
    t->unmerged = 1;
    t->py_frames = calloc(2, sizeof *t->py_frames);
    python(&t->py_frames[0], "run", "/usr/lib/python3.11/threading.py", 975);
    python(&t->py_frames[1], "_bootstrap", "/usr/lib/python3.11/threading.py", 995);
    t->n_py_frames = 2;

    /* A thread whose stack could not be read, and one outside any call. */
    t = hdx_process_add_thread(p);
    t->tid = 4125;
    t->state = 'D';
    t->stack_error = -EPERM;
    t = hdx_process_add_thread(p);
    t->tid = 4126;
    t->syscall = 999; /* a number without a name */

    /* A second process: the compiler, many values unknown. */
    p = hdx_evidence_add_process(ev);
    p->pid = 4200;
    p->host = sdup("node-a");
    p->alive = 0;
    p->progressing = 1;

    hdx_lock *l = hdx_evidence_add_lock(ev);
    l->path = sdup("/work/job/build/lock");
    l->kind = HDX_LOCK_BATON;
    l->state = HDX_LOCK_STALE;
    l->exists = 1;
    l->mtime_ns = 1764441000000000001LL;
    l->has_creator = 1;
    l->creator_pid = 3999;
    l->creator_rank = 0;
    l->creator_alive = 0;
    l->created_ns = 1764440000987654321LL;
    l->source = sdup("trace");
    /* The facts its state is judged from: the waiter's blocked flock request and its open
     * fd, nobody else's: stale, its creator being dead. */
    l->facts.looked = l->facts.live = l->facts.checked = 1;
    l->facts.dev = 66306;
    l->facts.ino = 10953124;
    l->facts.size = 0;
    l->facts.uid = 1000;
    l->facts.rows = calloc(1, sizeof *l->facts.rows);
    l->facts.rows[0] = (hdx_lock_row){.pid = 4123, .kind = HDX_LOCK_FLOCK, .blocking = 1};
    l->facts.n_rows = l->facts.rows_read = 1;
    l->facts.openers = calloc(1, sizeof *l->facts.openers);
    l->facts.openers[0] = 4123;
    l->facts.n_openers = l->facts.openers_read = 1;
    l->facts.unreadable = 2;
    l->facts.pids = calloc(1, sizeof *l->facts.pids);
    l->facts.pids[0] = (hdx_pid_fact){.pid = 4123, .alive = 1, .start_ticks = 123456789};
    l->facts.n_pids = 1;
    hdx_waiter *w = hdx_lock_add_waiter(l);
    w->pid = 4123;
    w->tid = 4123;
    w->rank = 3;
    w->since_ns = 1764441001000000000LL;
    w->how = sdup("stat poll");
    w = hdx_lock_add_waiter(l);
    w->pid = 4300;
    w->elsewhere = 1; /* a gone container's pid */

    l = hdx_evidence_add_lock(ev);
    l->path = sdup("/work/job/other.lock");
    l->job_path = sdup("/workspace/other.lock"); /* a container's path, mapped here */
    l->kind = HDX_LOCK_FLOCK;
    l->state = HDX_LOCK_HELD;
    l->holder_pid = 4200;
    l->unchecked = 3;
    l->exists = 0;
    l->has_creator = 1; /* known to exist, every detail unknown */

    l = hdx_evidence_add_lock(ev);
    l->path = sdup("/workspace/gone.lock"); /* a gone container's path, not found here */
    l->foreign = 1;
    l->mnt_ns = 4026532801u;

    hdx_evidence_note(ev, "a bounded syscall watch ran");
    hdx_evidence_note(ev, "ünïcode \"note\"\n");
    return ev;
}

static int streq(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static int dbl_eq(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* pc: compare the frames' pc too (hangdx.snapshot/3 writes none). */
static int frames_eq(const hdx_frame *a, size_t na, const hdx_frame *b, size_t nb, int pc)
{
    if (na != nb || !a != !b)
        return 0;
    for (size_t i = 0; i < na; i++) {
        const hdx_frame *x = &a[i], *y = &b[i];
        if (x->kind != y->kind || !streq(x->function, y->function) || !streq(x->file, y->file) ||
            x->line != y->line || !streq(x->module, y->module) || x->offset != y->offset || (pc && x->pc != y->pc) ||
            x->n_locals != y->n_locals || !x->locals != !y->locals)
            return 0;
        for (size_t k = 0; k < x->n_locals; k++) {
            const hdx_local *u = &x->locals[k], *v = &y->locals[k];
            if (!streq(u->name, v->name) || u->kind != v->kind)
                return 0;
            if ((u->kind == HDX_VAL_INT || u->kind == HDX_VAL_BOOL) && u->i != v->i)
                return 0;
            if (u->kind == HDX_VAL_FLOAT && !dbl_eq(u->f, v->f))
                return 0;
            if (!streq(u->pg, v->pg))
                return 0;
            if ((u->kind == HDX_VAL_STR || u->kind == HDX_VAL_OTHER) && !streq(u->s, v->s))
                return 0;
        }
    }
    return 1;
}

/* Every field of a and b equal (but the frames' pc, without pc); env of a compared on the
 * allowed names only. */
static void check_same_but(const hdx_evidence *a, const hdx_evidence *b, int pc)
{
    CHECK(streq(a->host, b->host));
    CHECK(a->taken_ns == b->taken_ns);
    CHECK(a->samples == b->samples && a->interval_ms == b->interval_ms);
    CHECK(a->build_timeout_s == b->build_timeout_s);
    CHECK(a->n_procs == b->n_procs);
    for (size_t i = 0; i < a->n_procs && i < b->n_procs; i++) {
        const hdx_process *p = &a->procs[i], *q = &b->procs[i];
        CHECK(p->pid == q->pid && p->ppid == q->ppid && streq(p->host, q->host));
        CHECK(p->rank == q->rank && p->local_rank == q->local_rank && p->world_size == q->world_size);
        CHECK(p->n_cmdline == q->n_cmdline);
        for (size_t k = 0; k < p->n_cmdline && k < q->n_cmdline; k++)
            CHECK(streq(p->cmdline[k], q->cmdline[k]));
        size_t allowed = 0;
        for (size_t k = 0; k < p->n_env; k++) {
            int secret = !strcmp(p->env[k].name, "AWS_SECRET_ACCESS_KEY") || !strcmp(p->env[k].name, "HOME");
            if (!secret) {
                allowed++;
                CHECK(streq(hdx_process_env(q, p->env[k].name), p->env[k].value));
            }
        }
        CHECK(q->n_env == allowed);
        CHECK(!hdx_process_env(q, "AWS_SECRET_ACCESS_KEY") && !hdx_process_env(q, "HOME"));
        CHECK(streq(p->exe, q->exe) && streq(p->cwd, q->cwd) && p->state == q->state);
        CHECK(p->start_ticks == q->start_ticks && dbl_eq(p->age_s, q->age_s));
        CHECK(dbl_eq(p->cpu_ms_first, q->cpu_ms_first) && dbl_eq(p->cpu_ms, q->cpu_ms));
        CHECK(p->window_ms == q->window_ms && p->progressing == q->progressing);
        CHECK(p->stack_changed == q->stack_changed && p->max_stop_us == q->max_stop_us && p->asked == q->asked);
        CHECK(p->frozen == q->frozen);
        CHECK(p->stopped_us == q->stopped_us && p->alive == q->alive && p->read_error == q->read_error);
        CHECK(streq(p->python, q->python));
        CHECK(p->n_threads == q->n_threads);
        for (size_t k = 0; k < p->n_threads && k < q->n_threads; k++) {
            const hdx_thread *t = &p->threads[k], *u = &q->threads[k];
            CHECK(t->tid == u->tid && streq(t->name, u->name) && t->state == u->state);
            CHECK(streq(t->wchan, u->wchan) && t->syscall == u->syscall);
            CHECK(!memcmp(t->syscall_args, u->syscall_args, sizeof t->syscall_args));
            CHECK(dbl_eq(t->cpu_ms, u->cpu_ms) && dbl_eq(t->cpu_ms_first, u->cpu_ms_first) && t->stack_error == u->stack_error);
            CHECK(streq(t->polled_path, u->polled_path) && streq(t->wait, u->wait));
            CHECK(streq(t->wait_op, u->wait_op) && t->wait_peer == u->wait_peer && t->wait_frame == u->wait_frame);
            CHECK(streq(t->wait_pg, u->wait_pg) && t->wait_seq == u->wait_seq && streq(t->wait_sig, u->wait_sig));
            CHECK(t->unmerged == u->unmerged);
            CHECK(frames_eq(t->frames, t->n_frames, u->frames, u->n_frames, pc));
            CHECK(frames_eq(t->py_frames, t->n_py_frames, u->py_frames, u->n_py_frames, pc));
        }
    }
    CHECK(a->n_locks == b->n_locks);
    for (size_t i = 0; i < a->n_locks && i < b->n_locks; i++) {
        const hdx_lock *l = &a->locks[i], *m = &b->locks[i];
        CHECK(streq(l->path, m->path) && l->kind == m->kind);
        CHECK(streq(l->job_path, m->job_path) && l->foreign == m->foreign && l->mnt_ns == m->mnt_ns);
        CHECK(l->exists == m->exists && l->mtime_ns == m->mtime_ns);
        /* The facts travel whole; without them, the recorded decision does. */
        const hdx_lock_facts *f = &l->facts, *g = &m->facts;
        CHECK(f->looked == g->looked && f->live == g->live && f->checked == g->checked);
        CHECK(f->dev == g->dev && f->ino == g->ino && f->size == g->size && f->uid == g->uid);
        CHECK(f->rows_read == g->rows_read && f->n_rows == g->n_rows && f->openers_read == g->openers_read);
        CHECK(f->n_openers == g->n_openers && f->unreadable == g->unreadable && f->n_pids == g->n_pids);
        for (size_t k = 0; k < f->n_rows && k < g->n_rows; k++)
            CHECK(f->rows[k].pid == g->rows[k].pid && f->rows[k].kind == g->rows[k].kind &&
                  f->rows[k].blocking == g->rows[k].blocking);
        for (size_t k = 0; k < f->n_openers && k < g->n_openers; k++)
            CHECK(f->openers[k] == g->openers[k]);
        for (size_t k = 0; k < f->n_pids && k < g->n_pids; k++)
            CHECK(f->pids[k].pid == g->pids[k].pid && f->pids[k].alive == g->pids[k].alive &&
                  f->pids[k].start_ticks == g->pids[k].start_ticks);
        if (!f->looked)
            CHECK(l->state == m->state && l->holder_pid == m->holder_pid && l->unchecked == m->unchecked);
        hdx_lock_judgement jl, jm;
        CHECK(hdx_lock_judge(a, l, &jl) == 0 && hdx_lock_judge(b, m, &jm) == 0);
        CHECK(jl.state == jm.state && jl.holder_pid == jm.holder_pid && jl.kind == jm.kind);
        CHECK(jl.unchecked == jm.unchecked && jl.creator_alive == jm.creator_alive);
        CHECK(l->has_creator == m->has_creator && l->creator_pid == m->creator_pid);
        CHECK(l->creator_rank == m->creator_rank && l->creator_alive == m->creator_alive);
        CHECK(l->created_ns == m->created_ns && streq(l->source, m->source));
        /* A holder or waiter without a host is the snapshot's host's. */
        CHECK(l->holder_pid == HDX_UNKNOWN ||
              streq(l->holder_host ? l->holder_host : a->host, m->holder_host ? m->holder_host : b->host));
        CHECK(l->n_waiters == m->n_waiters);
        for (size_t k = 0; k < l->n_waiters && k < m->n_waiters; k++) {
            const hdx_waiter *w = &l->waiters[k], *x = &m->waiters[k];
            CHECK(w->pid == x->pid && w->tid == x->tid && w->rank == x->rank);
            CHECK(w->since_ns == x->since_ns && streq(w->how, x->how));
            CHECK(streq(w->host ? w->host : a->host, x->host ? x->host : b->host));
            CHECK(w->elsewhere == x->elsewhere);
        }
    }
    CHECK(a->n_notes == b->n_notes);
    for (size_t i = 0; i < a->n_notes && i < b->n_notes; i++)
        CHECK(streq(a->notes[i], b->notes[i]));
    CHECK(a->n_pgroups == b->n_pgroups);
    for (size_t i = 0; i < a->n_pgroups && i < b->n_pgroups; i++) {
        const hdx_pgroup *g = &a->pgroups[i], *h = &b->pgroups[i];
        CHECK(streq(g->name, h->name) && streq(g->desc, h->desc) && streq(g->role, h->role));
        CHECK(g->is_default == h->is_default && g->n_ranks == h->n_ranks);
        CHECK(g->n_ranks == h->n_ranks && !memcmp(g->ranks, h->ranks, g->n_ranks * sizeof *g->ranks));
    }
}

static void check_same(const hdx_evidence *a, const hdx_evidence *b)
{
    check_same_but(a, b, 1);
}

static char *to_text(const hdx_evidence *ev)
{
    cJSON *j = hdx_snapshot_json(ev);
    char *s = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    return s;
}

/* Load text into a fresh evidence; NULL on error (message printed when expected is 0). */
static hdx_evidence *from_text(const char *text, int *rc, char **err)
{
    hdx_evidence *ev = hdx_evidence_new();
    ev->taken_ns = HDX_UNKNOWN; /* an empty evidence: the snapshot's values are taken */
    ev->build_timeout_s = 0;
    *rc = hdx_snapshot_load_text(text, strlen(text), "t.json", ev, err);
    return ev;
}

static void test_round_trip(void)
{
    hdx_evidence *ev = full_evidence();
    char *s1 = to_text(ev);
    CHECK(s1 != NULL);
    if (!s1)
        return;
    CHECK(strstr(s1, "\"schema\":\t\"hangdx.snapshot/2\""));
    CHECK(!strstr(s1, "secret") && !strstr(s1, "SECRET") && !strstr(s1, "HOME"));
    CHECK(strstr(s1, "\"TORCH_EXTENSIONS_DIR\""));
    CHECK(strstr(s1, "2025-11-29T18:40:27.123456789Z")); /* ns kept */
    CHECK(strstr(s1, ", 849155, ")); /* offset 0xcf503 in the frames table, a number */
    CHECK(!strstr(s1, "\"offset\"") && strstr(s1, "\"strings\":\t[")); /* no frame objects in /2 */
    CHECK(strstr(s1, "\"big\":\t{\n") && strstr(s1, "\"9223372036854775807\""));

    int rc;
    char *err = NULL;
    hdx_evidence *back = from_text(s1, &rc, &err);
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "load: %s\n", err);
    free(err);
    check_same(ev, back);
    char *s2 = to_text(back);
    CHECK(s2 && !strcmp(s1, s2));
    if (s2 && strcmp(s1, s2))
        fprintf(stderr, "--- first\n%s\n--- second\n%s\n", s1, s2);

    /* A third time, through the file writer and reader. */
    char path[] = "/tmp/hdx-snap-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(hdx_snapshot_write(back, path) == 0);
    CHECK(hdx_snapshot_sniff(path) == HDX_INPUT_SNAPSHOT);
    hdx_evidence *third = hdx_evidence_new();
    third->taken_ns = HDX_UNKNOWN;
    CHECK(hdx_snapshot_load(path, third, NULL) == 0);
    char *s3 = to_text(third);
    CHECK(s3 && !strcmp(s1, s3));
    unlink(path);
    free(s1);
    free(s2);
    free(s3);
    hdx_evidence_free(ev);
    hdx_evidence_free(back);
    hdx_evidence_free(third);
}

/* Load must fail with rc and a message holding each of the words; ev unchanged. */
static void expect_error(const char *text, int want_rc, const char *w1, const char *w2)
{
    hdx_evidence *ev = hdx_evidence_new();
    rank_proc(ev, "node-z", 77, 40);
    char *err = NULL;
    int rc = hdx_snapshot_load_text(text, strlen(text), "bad.json", ev, &err);
    CHECK(rc == want_rc);
    CHECK(err && strstr(err, "bad.json"));
    CHECK(err && (!w1 || strstr(err, w1)));
    CHECK(err && (!w2 || strstr(err, w2)));
    if (rc != want_rc || !err || (w1 && !strstr(err, w1)) || (w2 && !strstr(err, w2)))
        fprintf(stderr, "  input %.120s\n  rc %d, message: %s\n", text, rc, err ? err : "(none)");
    CHECK(ev->n_procs == 1 && ev->n_locks == 0 && ev->n_notes == 0);
    free(err);
    hdx_evidence_free(ev);
}

static void test_bad_inputs(void)
{
    expect_error("{\"schema\":\"hangdx.snapshot/4\",\"processes\":[]}", -EPROTONOSUPPORT, "hangdx.snapshot/4",
                 "not supported");
    /* hangdx.snapshot/3's rows: keys given, each row as long as its keys, a stack in range. */
    expect_error("{\"schema\":\"hangdx.snapshot/3\",\"processes\":[]}", -EBADMSG, "no \"process_keys\"", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/3\",\"process_keys\":[\"pid\",1],\"thread_keys\":[],"
                 "\"processes\":[]}", -EBADMSG, "\"process_keys\" should hold strings", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/3\",\"process_keys\":[\"pid\",\"threads\"],\"thread_keys\":[\"tid\"],"
                 "\"processes\":[[1]]}", -EBADMSG, "processes[0]", "should be an array of 2 values");
    /* a key twice: which of the row's values it means is not clear */
    expect_error("{\"schema\":\"hangdx.snapshot/3\",\"process_keys\":[\"pid\",\"threads\",\"pid\"],"
                 "\"thread_keys\":[\"tid\"],\"processes\":[[1,[],2]]}", -EBADMSG,
                 "\"process_keys\" names \"pid\" twice", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/3\",\"process_keys\":[\"pid\",\"threads\"],"
                 "\"thread_keys\":[\"tid\",\"stack\"],\"processes\":[[1,[[2,0]]]],\"stacks\":[]}",
                 -EBADMSG, "processes[0].threads[0]", "\"stack\" should be an index");
    /* hangdx.snapshot/2's tables: every index in range, every entry well formed. */
#define V2(tables, threads)                                                                                        \
    "{\"schema\":\"hangdx.snapshot/2\",\"host\":\"h\"," tables ",\"processes\":[{\"pid\":1,\"threads\":[" threads "]}]}"
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[0,0,null,0,null,0,0,null]]", "{\"frames\":[1]}"), -EBADMSG,
                 "frames[0] should be an index into \"frames\" (0 to 0)", "threads[0]");
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[0,0,null,0,null,0,0,null]]", "{\"frames\":[\"0\"]}"), -EBADMSG,
                 "index into \"frames\"", NULL);
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[0,3,null,0,null,0,0,null]]", "{\"frames\":[0]}"), -EBADMSG,
                 "frames[0]", "function should be an index into \"strings\" (0 to 0)");
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[2,0,null,0,null,0,0,null]]", "{\"frames\":[0]}"), -EBADMSG,
                 "kind should be 0 (native) or 1 (python)", NULL);
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[0,0,null,0,null,0,0]]", "{\"frames\":[0]}"), -EBADMSG,
                 "[kind, function, file, line, module, offset, pc, locals]", NULL);
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[1,0,0,-4,null,0,0,null]]", "{\"frames\":[0]}"), -EBADMSG,
                 "line should be an integer", NULL);
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[0,0,null,0,null,\"12\",0,null]]", "{\"frames\":[0]}"),
                 -EBADMSG, "\"offset\" should be a hex string", NULL);
    expect_error(V2("\"strings\":[\"f\"],\"frames\":[[1,0,0,3,null,0,0,[1]]]", "{\"frames\":[0]}"), -EBADMSG,
                 "locals should be an object or null", NULL);
    expect_error(V2("\"strings\":[7],\"frames\":[]", "{\"frames\":[]}"), -EBADMSG, "strings[0] should be a string",
                 NULL);
    expect_error(V2("\"strings\":{},\"frames\":[]", "{\"frames\":[]}"), -EBADMSG, "\"strings\" should be an array",
                 NULL);
    expect_error(V2("\"strings\":[],\"frames\":[]", "{\"frames\":[0]}"), -EBADMSG, "index into \"frames\"", NULL);
    /* A /1 frame object in a /2 snapshot, and a /2 index in a /1 one. */
    expect_error(V2("\"strings\":[],\"frames\":[]", "{\"frames\":[{\"kind\":\"native\"}]}"), -EBADMSG,
                 "index into \"frames\"", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"threads\":[{\"frames\":[0]}]}]}", -EBADMSG,
                 "a frame should be an object", NULL);
#undef V2
    expect_error("{\"schema\":\"hangdx.trace/1\"}", -EPROTONOSUPPORT, "hangdx.trace/1", "hangdx.snapshot/1");
    expect_error("{\"processes\":[]}", -EBADMSG, "no \"schema\"", NULL);
    expect_error("[1,2]", -EBADMSG, "not a JSON object", NULL);
    expect_error("", -EBADMSG, "truncated", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"host\":\"a\",\"processes\":[{\"pid\":1", -EBADMSG,
                 "truncated", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\"}", -EBADMSG, "processes", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"pid\":\"12\"}]}", -EBADMSG,
                 "processes[0]", "\"pid\" should be an integer");
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"pid\":1.5}]}", -EBADMSG, "\"pid\"", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"pid\":-5}]}", -EBADMSG, "\"pid\"", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":{}}", -EBADMSG, "\"processes\" should be an array",
                 NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"threads\":[{\"frames\":[{\"kind\":\"java\"}]}]}]}",
                 -EBADMSG, "processes[0].threads[0].frames[0]", "\"kind\"");
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"threads\":[{\"frames\":[{\"kind\":\"native\","
                 "\"offset\":\"12zz\"}]}]}]}",
                 -EBADMSG, "\"offset\"", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"threads\":[{\"frames\":[{\"kind\":\"python\","
                 "\"locals\":{\"x\":[1]}}]}]}]}",
                 -EBADMSG, "local \"x\"", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"threads\":[{\"syscall_args\":[1,2,3,4,5,6,7]}]}]}",
                 -EBADMSG, "syscall_args", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"env\":{\"RANK\":3}}]}", -EBADMSG, "env", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[],\"locks\":[{\"path\":\"/l\",\"state\":\"gone\"}]}",
                 -EBADMSG, "locks[0]", "\"state\"");
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[],\"locks\":[{\"path\":\"/l\",\"mtime\":\"yesterday\"}]}",
                 -EBADMSG, "\"mtime\"", "RFC 3339");
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[],\"notes\":[1]}", -EBADMSG, "notes[0]", NULL);
    expect_error("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"rank\":99999999999}]}", -EBADMSG, "\"rank\"",
                 NULL);

    /* Huge arrays: refused with a message, not parsed into memory without end. */
    size_t n = HDX_SNAPSHOT_MAX_ITEMS + 2;
    const char *head = "{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"cmdline\":[";
    char *big = malloc(strlen(head) + 3 * n + 16);
    char *q = stpcpy(big, head);
    for (size_t i = 0; i < n; i++)
        q = stpcpy(q, i ? ",\"\"" : "\"\"");
    strcpy(q, "]}]}");
    expect_error(big, -EBADMSG, "\"cmdline\"", "more than");
    free(big);
    /* A file larger than the bound is refused before it is read. */
    hdx_evidence *ev = hdx_evidence_new();
    char *err = NULL;
    CHECK(hdx_snapshot_load_text("{}", (size_t)HDX_SNAPSHOT_MAX_BYTES + 1, "huge.json", ev, &err) == -EFBIG);
    CHECK(err && strstr(err, "huge.json"));
    free(err);
    err = NULL;
    CHECK(hdx_snapshot_load("/nonexistent/snap.json", ev, &err) == -ENOENT);
    CHECK(err && strstr(err, "/nonexistent/snap.json"));
    free(err);
    hdx_evidence_free(ev);

    /* Missing optional fields are unknown, not errors. */
    int rc;
    err = NULL;
    ev = from_text("{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"pid\":5,\"threads\":[{}]}]}", &rc, &err);
    CHECK(rc == 0 && ev->n_procs == 1 && ev->procs[0].pid == 5 && ev->procs[0].rank == HDX_UNKNOWN);
    CHECK(ev->procs[0].alive == HDX_UNKNOWN && ev->procs[0].n_threads == 1);
    CHECK(ev->procs[0].threads[0].tid == HDX_UNKNOWN);
    free(err);
    hdx_evidence_free(ev);

    /* Every prefix of a good snapshot, and every byte replaced: errors, never a crash. */
    hdx_evidence *full = full_evidence();
    char *good = to_text(full);
    size_t len = strlen(good);
    size_t errors = 0;
    for (size_t cut = 0; cut < len; cut += 7) {
        hdx_evidence *e = hdx_evidence_new();
        err = NULL;
        rc = hdx_snapshot_load_text(good, cut, "cut.json", e, &err);
        errors += rc < 0;
        CHECK(rc == 0 || err);
        free(err);
        hdx_evidence_free(e);
    }
    CHECK(errors >= len / 7 - 2); /* only whitespace after the last brace parses */
    const char repl[] = {'"', '1', '-', '{', '}', '[', ']', ',', ':', 'x', 'n', '\\', 0};
    unsigned seed = 12345;
    for (int i = 0; i < 3000; i++) {
        char *m = strdup(good);
        seed = seed * 1103515245 + 12345;
        size_t at = (seed >> 8) % len;
        seed = seed * 1103515245 + 12345;
        m[at] = repl[(seed >> 8) % (sizeof repl - 1)];
        hdx_evidence *e = hdx_evidence_new();
        err = NULL;
        rc = hdx_snapshot_load_text(m, len, "fuzz.json", e, &err);
        CHECK(rc == 0 || (rc < 0 && err));
        if (rc == 0) { /* what it read, it writes */
            char *again = to_text(e);
            CHECK(again != NULL);
            free(again);
        }
        free(err);
        free(m);
        hdx_evidence_free(e);
    }
    free(good);
    hdx_evidence_free(full);
}

static hdx_evidence *host_evidence(const char *host, int pid0, int rank0, int n)
{
    hdx_evidence *ev = hdx_evidence_new();
    ev->host = sdup(host);
    ev->samples = 2;
    ev->interval_ms = 250;
    ev->taken_ns = 1764441627000000000LL + pid0;
    for (int i = 0; i < n; i++)
        rank_proc(ev, host, pid0 + i, rank0 + i);
    return ev;
}

/* ev's snapshot text, loaded back: a copy of ev through the format. */
static hdx_evidence *copy(const hdx_evidence *ev)
{
    char *s = to_text(ev);
    int rc;
    hdx_evidence *c = from_text(s, &rc, NULL);
    CHECK(rc == 0);
    free(s);
    return c;
}

static void test_multi_host(void)
{
    hdx_evidence *a = host_evidence("a", 100, 0, 2), *b = host_evidence("b", 100, 2, 2);
    /* Both hosts see the same shared lock file, each with its own waiters. */
    hdx_lock *l = hdx_evidence_add_lock(a);
    l->path = sdup("/shared/ext/lock");
    l->state = HDX_LOCK_STALE;
    l->exists = 1;
    hdx_waiter *w = hdx_lock_add_waiter(l);
    w->pid = 100;
    w->rank = 0;
    l = hdx_evidence_add_lock(b);
    l->path = sdup("/shared/ext/lock");
    l->state = HDX_LOCK_HELD;
    l->holder_pid = 101;
    w = hdx_lock_add_waiter(l);
    w->pid = 100;
    w->rank = 2;
    hdx_evidence_note(a, "same note");
    hdx_evidence_note(b, "same note");

    hdx_evidence *job = hdx_evidence_new();
    job->taken_ns = HDX_UNKNOWN;
    char *err = NULL;
    hdx_evidence *ca = copy(a), *cb = copy(b);
    CHECK(hdx_evidence_merge(job, ca, &err) == 0);
    CHECK(hdx_evidence_merge(job, cb, &err) == 0);
    CHECK(job->n_procs == 4);
    int seen[4] = {0};
    for (size_t i = 0; i < job->n_procs; i++)
        if (job->procs[i].rank >= 0 && job->procs[i].rank < 4)
            seen[job->procs[i].rank] = 1;
    CHECK(seen[0] && seen[1] && seen[2] && seen[3]);
    CHECK(job->host == NULL); /* two hosts */
    CHECK(job->samples == 2);
    CHECK(job->taken_ns == 1764441627000000100LL);
    CHECK(job->n_locks == 1 && job->locks[0].n_waiters == 2);
    CHECK(job->locks[0].state == HDX_LOCK_HELD && job->locks[0].holder_pid == 101);
    CHECK(job->n_notes == 1);
    CHECK(ca->n_procs == 0 && cb->n_procs == 0);

    /* The report of the merged job names both hosts and the 4 processes. */
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(job) == 0 && hdx_classify(job, &v) == 0);
    cJSON *rep = hdx_report_json(job, &v);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "hosts")) == 2);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "processes")) == 4);
    /* A report reads back into the same processes and locks. */
    char *rtext = cJSON_Print(rep);
    int rc;
    hdx_evidence *fromrep = from_text(rtext, &rc, &err);
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "report load: %s\n", err);
    CHECK(fromrep->n_procs == 4 && fromrep->n_locks == 1);
    CHECK(fromrep->procs[2].rank == 2 && streq(fromrep->procs[2].host, "b"));
    CHECK(fromrep->procs[2].threads[0].syscall == 230); /* from the name */
    CHECK(fromrep->procs[2].threads[0].n_frames == 1 &&
          streq(fromrep->procs[2].threads[0].frames[0].function, "barrier"));
    CHECK(fromrep->locks[0].state == HDX_LOCK_HELD && fromrep->locks[0].n_waiters == 2);
    free(rtext);
    cJSON_Delete(rep);
    hdx_verdict_clear(&v);
    hdx_evidence_free(fromrep);

    /* The same rank on two hosts: an error naming both, and nothing merged. */
    hdx_evidence *c = host_evidence("c", 300, 1, 1);
    size_t before = job->n_procs;
    err = NULL;
    CHECK(hdx_evidence_merge(job, c, &err) == -EEXIST);
    CHECK(err && strstr(err, "rank 1") && strstr(err, "pid 101 on a") && strstr(err, "pid 300 on c"));
    if (err)
        printf("same rank on two hosts: %s\n", err);
    CHECK(job->n_procs == before && c->n_procs == 1);
    free(err);
    /* The same through the loader: the message names the input too. */
    char *ctext = to_text(c);
    err = NULL;
    CHECK(hdx_snapshot_load_text(ctext, strlen(ctext), "snap-c.json", job, &err) == -EEXIST);
    CHECK(err && strstr(err, "snap-c.json") && strstr(err, "on a") && strstr(err, "on c"));
    free(err);
    free(ctext);
    /* The same host's snapshot twice is refused too. */
    hdx_evidence *a2 = copy(a);
    err = NULL;
    CHECK(hdx_evidence_merge(job, a2, &err) == -EEXIST && err && strstr(err, "two inputs"));
    free(err);

    /* Associative: (a + b) + d and a + (b + d) give the same JSON. */
    hdx_evidence *d = host_evidence("d", 500, 4, 2);
    l = hdx_evidence_add_lock(d);
    l->path = sdup("/shared/ext/lock");
    l->state = HDX_LOCK_STALE;
    l->has_creator = 1;
    l->creator_pid = 1;
    w = hdx_lock_add_waiter(l);
    w->pid = 500;
    w->rank = 4;
    hdx_evidence_note(d, "from d");
    hdx_evidence *left = copy(a), *x = copy(b), *y = copy(d);
    CHECK(hdx_evidence_merge(left, x, NULL) == 0 && hdx_evidence_merge(left, y, NULL) == 0);
    hdx_evidence *right = copy(a), *bd = copy(b), *z = copy(d);
    CHECK(hdx_evidence_merge(bd, z, NULL) == 0 && hdx_evidence_merge(right, bd, NULL) == 0);
    char *sl = to_text(left), *sr = to_text(right);
    CHECK(sl && sr && !strcmp(sl, sr));
    CHECK(left->n_procs == 6 && left->n_locks == 1 && left->locks[0].n_waiters == 3 && left->locks[0].has_creator);
    free(sl);
    free(sr);
    hdx_evidence *e[] = {a, b, c, d, ca, cb, job, a2, left, x, y, right, bd, z};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        hdx_evidence_free(e[i]);
}

static void test_time(void)
{
    int64_t ns;
    CHECK(hdx_snapshot_parse_time("2026-11-29T18:40:27Z", &ns) == 0 && ns == 1795977627000000000LL);
    CHECK(hdx_snapshot_parse_time("2026-11-29T18:40:27.5Z", &ns) == 0 && ns == 1795977627500000000LL);
    CHECK(hdx_snapshot_parse_time("2026-11-29T20:40:27+02:00", &ns) == 0 && ns == 1795977627000000000LL);
    CHECK(hdx_snapshot_parse_time("2026-11-29", &ns) == -EINVAL);
    CHECK(hdx_snapshot_parse_time("2026-13-29T18:40:27Z", &ns) == -EINVAL);
    CHECK(hdx_snapshot_parse_time("2026-11-29T18:40:27Zjunk", &ns) == -EINVAL);
    CHECK(hdx_snapshot_parse_time(NULL, &ns) == -EINVAL);
}

/* A field added to the model must be written (model/evidence_json.c) and read
 * (formats/snapshot_read.c), and checked in check_same above: the sizes of the model's
 * structs tell that one was added. */
static void test_model_unchanged(void)
{
    static const struct {
        const char *name;
        size_t have, known;
    } sizes[] = {
        /* hdx_evidence: 88 + the job-log facts and rank summaries (32), which snapshots do not
         * carry: logs are an input of analyze, read again each time (evidence.h); + the private
         * index of the groups' names (8), made again as groups are read. hdx_thread: 208 +
         * shared_frames (8 with its padding), how the reader holds a class's frames.
         * hdx_process: 208 + cap_threads (8), the threads' slots allocated. */
        {"hdx_evidence", sizeof(hdx_evidence), 160}, {"hdx_process", sizeof(hdx_process), 216},
        {"hdx_thread", sizeof(hdx_thread), 216},     {"hdx_frame", sizeof(hdx_frame), 72},
        {"hdx_local", sizeof(hdx_local), 56},        {"hdx_lock", sizeof(hdx_lock), 264},
        {"hdx_lock_facts", sizeof(hdx_lock_facts), 112},
        {"hdx_waiter", sizeof(hdx_waiter), 48},
    };
    if (sizeof(void *) != 8)
        return; /* the sizes below are LP64's */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].have != sizes[i].known) {
            fprintf(stderr, "%s is %zu bytes, the snapshot knows it at %zu: a field was added or removed — carry it "
                            "in inspector/model/evidence_json.c (writer) and inspector/formats/snapshot_read.c "
                            "(reader), check it in check_same, then update this size\n",
                    sizes[i].name, sizes[i].have, sizes[i].known);
            failures++;
        }
    }
}

/* Pids repeat across hosts: a lock waiter seen by host b's snapshot is b's process with
 * that pid, not the first process of the job with it (host a's, listed first). */
static void test_same_pid_on_two_hosts(void)
{
    hdx_evidence *a = hdx_evidence_new(), *b = hdx_evidence_new();
    a->host = sdup("a");
    b->host = sdup("b");
    rank_proc(a, "a", 100, 0);
    rank_proc(b, "b", 100, 3);
    hdx_lock *l = hdx_evidence_add_lock(b);
    l->path = sdup("/b/ext/lock");
    l->state = HDX_LOCK_STALE;
    l->exists = 1;
    hdx_waiter *w = hdx_lock_add_waiter(l); /* as a live inspection of b records it: no host, no rank */
    w->pid = 100;
    hdx_evidence *job = hdx_evidence_new();
    job->taken_ns = HDX_UNKNOWN;
    char *ta = to_text(a), *tb = to_text(b), *err = NULL;
    CHECK(ta && tb && strstr(tb, "\"host\":\t\"b\"")); /* the waiter's host is written */
    CHECK(ta && hdx_snapshot_load_text(ta, strlen(ta), "a.json", job, &err) == 0);
    CHECK(tb && hdx_snapshot_load_text(tb, strlen(tb), "b.json", job, &err) == 0);
    CHECK(job->n_procs == 2 && job->n_locks == 1);
    CHECK(hdx_evidence_indexed(job)); /* the merge keeps the index current */
    const hdx_process *pa = hdx_evidence_find_process_on(job, "a", 100), *pb = hdx_evidence_find_process_on(job, "b", 100);
    CHECK(pa && pa->rank == 0 && pb && pb->rank == 3);
    CHECK(!hdx_evidence_find_process_on(job, "c", 100));
    CHECK(hdx_evidence_find_rank_elsewhere(job, 3, "a") == pb && !hdx_evidence_find_rank_elsewhere(job, 3, "b"));
    CHECK(job->n_locks == 1 && hdx_evidence_find_waiter(job, &job->locks[0].waiters[0]) == pb);
    /* The same lookups by scanning, once the index is out of date (a process added). */
    rank_proc(job, "c", 100, 5);
    CHECK(!hdx_evidence_indexed(job));
    CHECK(hdx_evidence_find_process_on(job, "b", 100) == &job->procs[1] && hdx_evidence_find_process_on(job, "c", 100) == &job->procs[2]);
    CHECK(hdx_evidence_index(job) == 0 && hdx_evidence_find_process_on(job, "c", 100) == &job->procs[2]);
    job->n_procs--; /* drop c again */
    hdx_process_clear(&job->procs[2]);
    hdx_verdict v;
    memset(&v, 0, sizeof v);
    CHECK(hdx_evidence_label(job) == 0 && hdx_classify(job, &v) == 0);
    CHECK(v.cls == HDX_CLASS_BUILD_LOCK && v.n_culprit_pids == 1 && v.culprit_pids && v.culprit_pids[0] == 100);
    CHECK(v.finding == HDX_FIND_LOCK_STALE);
    char *summary = NULL, *remedy = NULL; /* the waiter named with its host */
    CHECK(hdx_verdict_words(job, &v, &summary, &remedy) == 0);
    CHECK(summary && strstr(summary, "rank 3 (pid 100 on b)") && !strstr(summary, "rank 0"));
    free(summary);
    free(remedy);
    hdx_verdict_clear(&v);
    free(ta);
    free(tb);
    free(err);
    hdx_evidence_free(a);
    hdx_evidence_free(b);
    hdx_evidence_free(job);
}

/* srun starts torchrun on each node (SLURM_PROCID = the node's index, no RANK), torchrun the
 * workers (RANK). Node b's torchrun has SLURM_PROCID 1, the number of a worker on node a: the
 * merge must not take it for rank 1, and it is no rank of the job. */
static void test_torchrun_under_srun(void)
{
    hdx_evidence *job = hdx_evidence_new();
    job->taken_ns = HDX_UNKNOWN;
    for (int node = 0; node < 2; node++) {
        hdx_evidence *h = hdx_evidence_new();
        const char *host = node ? "b" : "a";
        h->host = sdup(host);
        hdx_process *agent = hdx_evidence_add_process(h); /* torchrun: Python, no RANK of its own */
        agent->pid = 200;
        agent->ppid = 1;
        agent->host = sdup(host);
        agent->state = 'S';
        hdx_process_set_env(agent, "SLURM_PROCID", node ? "1" : "0");
        hdx_process_set_env(agent, "SLURM_NTASKS", "2");
        agent->cmdline = calloc(2, sizeof *agent->cmdline);
        agent->cmdline[0] = sdup("/usr/bin/python3");
        agent->cmdline[1] = sdup("/usr/bin/torchrun");
        agent->n_cmdline = 2;
        agent->alive = 1;
        for (int w = 0; w < 2; w++) {
            hdx_process *p = rank_proc(h, host, 201 + w, node * 2 + w);
            p->ppid = 200;
            hdx_process_set_env(p, "SLURM_PROCID", node ? "1" : "0"); /* inherited from the agent */
        }
        char *t = to_text(h), *err = NULL;
        CHECK(t && hdx_snapshot_load_text(t, strlen(t), host, job, &err) == 0);
        if (err)
            fprintf(stderr, "merge: %s\n", err);
        free(t);
        free(err);
        hdx_evidence_free(h);
    }
    CHECK(job->n_procs == 6);
    hdx_mark_rank_processes(job);
    int ranks = 0;
    for (size_t i = 0; i < job->n_procs; i++) {
        const hdx_process *p = &job->procs[i];
        CHECK(p->is_rank_process == (p->pid != 200));
        ranks += p->is_rank_process;
    }
    CHECK(ranks == 4);
    hdx_evidence_free(job);
}

/* The verdict of ev: class and culprit ranks as text. */
static void verdict_of(hdx_evidence *ev, char *buf, size_t size)
{
    hdx_verdict v;
    memset(&v, 0, sizeof v);
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    size_t used = (size_t)snprintf(buf, size, "%s", hdx_class_name(v.cls));
    for (size_t i = 0; i < v.n_culprit_ranks && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, " %d", v.culprit_ranks[i]);
    hdx_verdict_clear(&v);
}

/* Real snapshots and reports in hangdx.snapshot/1 (saved files, as users have them):
 * read, written as /2, read back: the same evidence and the same verdict, and a /2 file
 * a fraction of the /1 one's size. */
static void test_v1_to_v2(void)
{
    static const char *const files[] = {
        "scripts/benchmarks/bench-data/gloo_collective_skip.snapshot.json", /* `hangdx snapshot` of a real gloo hang */
        "tests/fixtures/evidence/gloo_collective_skip.json",     /* `hangdx inspect --json` reports */
        "tests/fixtures/evidence/gloo_both_recv.json",
        "tests/fixtures/evidence/gloo_lock_behind_barrier.json",
        "tests/fixtures/evidence/gloo_rendezvous_missing.json",
        "tests/fixtures/nccl/nccl_allreduce_rank_missing.json",  /* /1 snapshots written by hand */
        "tests/fixtures/nccl/nccl_barrier_sync_rank_in_checkpoint.json",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024], *err = NULL, want[256], got[256];
        snprintf(path, sizeof path, "%s/%s", HDX_SOURCE_DIR, files[i]);
        hdx_evidence *v1 = hdx_evidence_new(), *v2 = hdx_evidence_new();
        v1->taken_ns = v2->taken_ns = HDX_UNKNOWN;
        v1->build_timeout_s = v2->build_timeout_s = 0;
        int rc = hdx_snapshot_load(path, v1, &err);
        CHECK(rc == 0);
        if (rc) {
            fprintf(stderr, "%s: %s\n", files[i], err);
            free(err);
            hdx_evidence_free(v1);
            hdx_evidence_free(v2);
            continue;
        }
        char *text = to_text(v1);
        CHECK(text && strstr(text, "hangdx.snapshot/2"));
        rc = text ? hdx_snapshot_load_text(text, strlen(text), "v2.json", v2, &err) : -ENOMEM;
        CHECK(rc == 0);
        if (rc)
            fprintf(stderr, "%s as /2: %s\n", files[i], err ? err : "?");
        check_same(v1, v2);
        verdict_of(v1, want, sizeof want);
        verdict_of(v2, got, sizeof got);
        CHECK(!strcmp(want, got));
        printf("%s: /1 and /2 say %s\n", files[i], got);
        free(text);
        free(err);
        hdx_evidence_free(v1);
        hdx_evidence_free(v2);
    }
}

/* The verdict of ev as text: class, culprit ranks and the group's name and ranks. */
static void judged(hdx_evidence *ev, char *buf, size_t size)
{
    hdx_verdict v;
    memset(&v, 0, sizeof v);
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    size_t used = (size_t)snprintf(buf, size, "%s culprits", hdx_class_name(v.cls));
    for (size_t i = 0; i < v.n_culprit_ranks && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, " %d", v.culprit_ranks[i]);
    const hdx_pgroup *g = v.group ? hdx_evidence_find_pgroup(ev, v.group) : NULL;
    if (used < size)
        used += (size_t)snprintf(buf + used, size - used, "; group %s", v.group ? v.group : "none");
    for (size_t i = 0; g && i < g->n_ranks && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, " %d", g->ranks[i]);
    hdx_verdict_clear(&v);
}

/* The stack groups of ev (groups.h) as text: each group's ranks, pids and key stack. */
static char *stack_groups(const hdx_evidence *ev)
{
    hdx_group *g = NULL;
    size_t n = 0, len = 0;
    char *out = NULL;
    FILE *f = open_memstream(&out, &len);
    CHECK(f && hdx_groups_make(ev, &g, &n) == 0);
    for (size_t i = 0; f && i < n; i++) {
        fprintf(f, "group %zu: ranks", i);
        for (size_t k = 0; k < g[i].n_ranks; k++)
            fprintf(f, " %d", g[i].ranks[k]);
        fprintf(f, "; pids");
        for (size_t k = 0; k < g[i].n_pids; k++)
            fprintf(f, " %d", g[i].pids[k]);
        fprintf(f, "; diverges at %ld; stack", g[i].diverges_at);
        for (size_t k = 0; k < g[i].key->n_frames; k++) {
            const hdx_frame *fr = &g[i].key->frames[k];
            fprintf(f, " %s@%s:%d", fr->function ? fr->function : "?", fr->file ? fr->file : fr->module ? fr->module : "?",
                    fr->line);
        }
        fputc('\n', f);
    }
    hdx_groups_free(g, n);
    if (f)
        fclose(f);
    return out;
}

/* The /3 text of ev carried as frames and taken apart again, as the Slurm collector does
 * (cli_slurm.c: hdx_frames_write on the node, hdx_frames_feed and hdx_snapshot_load_text);
 * *bytes: the /3 text's size. */
static hdx_evidence *through_frames(const hdx_evidence *ev, size_t *bytes)
{
    cJSON *j = hdx_snapshot_json_reduced(ev);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL, *lines = NULL, *err = NULL;
    cJSON_Delete(j);
    CHECK(text && strstr(text, "\"schema\":\"hangdx.snapshot/3\""));
    *bytes = text ? strlen(text) : 0;
    size_t len = 0;
    FILE *f = open_memstream(&lines, &len);
    CHECK(f && text && hdx_frames_write(f, "node7/1", text, strlen(text)) == 0);
    if (f)
        fclose(f);
    hdx_frames fr = {0};
    for (char *line = lines, *nl; line && (nl = strchr(line, '\n')); line = nl + 1)
        CHECK(hdx_frames_feed(&fr, line, (size_t)(nl - line)) == 0);
    CHECK(fr.n == 1 && fr.docs[0].complete && fr.docs[0].len == *bytes);
    hdx_evidence *back = hdx_evidence_new();
    back->taken_ns = HDX_UNKNOWN;
    back->build_timeout_s = 0;
    int rc = fr.n == 1 ? hdx_snapshot_load_text(fr.docs[0].text, fr.docs[0].len, fr.docs[0].id, back, &err) : -EIO;
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "/3 through frames: %s\n", err ? err : strerror(-rc));
    hdx_frames_clear(&fr);
    free(err);
    free(lines);
    free(text);
    return back;
}

/* Real snapshots and reports written as hangdx.snapshot/3 (docs/formats.md "Snapshots"), the
 * node's part of --slurm-job, and read back through frames: the same evidence but the pcs,
 * the same verdict (class, culprits, group and its ranks) and the same stack groups as from
 * /2, and fewer bytes than /2. */
static void test_reduced(void)
{
    /* Every field of the hand-built evidence (locks, waiters, groups, locals) but the pcs. */
    hdx_evidence *ev = full_evidence();
    size_t n = 0;
    hdx_evidence *back = through_frames(ev, &n);
    check_same_but(ev, back, 0);
    hdx_evidence_free(ev);
    hdx_evidence_free(back);

    static const char *const files[] = {
        "scripts/benchmarks/bench-data/gloo_collective_skip.snapshot.json",
        "tests/fixtures/evidence/gloo_barrier_skip.json",
        "tests/fixtures/evidence/gloo_batch_p2p.json",
        "tests/fixtures/evidence/gloo_both_recv.json",
        "tests/fixtures/evidence/gloo_both_send.json",
        "tests/fixtures/evidence/gloo_collective_skip.json",
        "tests/fixtures/evidence/gloo_computing.json",
        "tests/fixtures/evidence/gloo_lock_behind_barrier.json",
        "tests/fixtures/evidence/gloo_rendezvous_missing.json",
        "tests/fixtures/evidence/gloo_ring_irecv.json",
        "tests/fixtures/evidence/gloo_send_no_recv.json",
        "tests/fixtures/evidence/gloo_uneven.json",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024], *err = NULL, want[512], got[512];
        snprintf(path, sizeof path, "%s/%s", HDX_SOURCE_DIR, files[i]);
        hdx_evidence *in = hdx_evidence_new(), *full = hdx_evidence_new();
        in->taken_ns = full->taken_ns = HDX_UNKNOWN;
        in->build_timeout_s = full->build_timeout_s = 0;
        int rc = hdx_snapshot_load(path, in, &err);
        CHECK(rc == 0);
        cJSON *j = rc ? NULL : hdx_snapshot_json(in);
        char *text = j ? cJSON_PrintUnformatted(j) : NULL;
        cJSON_Delete(j);
        CHECK(text && hdx_snapshot_load_text(text, strlen(text), "v2.json", full, &err) == 0);
        size_t bytes = 0;
        hdx_evidence *reduced = rc ? NULL : through_frames(full, &bytes);
        if (rc || !text || !reduced) {
            fprintf(stderr, "%s: %s\n", files[i], err ? err : "not read");
        } else {
            check_same_but(full, reduced, 0);
            CHECK(bytes < strlen(text));
            char *gw = stack_groups(full), *gg = stack_groups(reduced);
            CHECK(gw && gg && !strcmp(gw, gg) && strstr(gw, "group 0: ranks"));
            judged(full, want, sizeof want);
            judged(reduced, got, sizeof got);
            CHECK(!strcmp(want, got));
            printf("%s: /2 (%zu bytes) and /3 (%zu bytes) say %s\n", files[i], strlen(text), bytes, got);
            free(gw);
            free(gg);
        }
        free(text);
        free(err);
        hdx_evidence_free(in);
        hdx_evidence_free(full);
        hdx_evidence_free(reduced);
    }
}

/* Two hosts' /3 documents loaded with one share (snapshot.h, hdx_snapshot_share), as the
 * batch's threads load 16 384 hosts: each reads back the same evidence, and what they repeat
 * is one copy — the classes' frames arrays, their locals and strings are the same pointers in
 * both; ended into the evidence they are merged into, it stays whole once the others are gone. */
static void test_share(void)
{
    hdx_evidence *ev = full_evidence();
    cJSON *j = hdx_snapshot_json_reduced(ev);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL, *err = NULL;
    cJSON_Delete(j);
    hdx_snapshot_share *share = hdx_snapshot_share_new();
    hdx_evidence *one = hdx_evidence_new(), *two = hdx_evidence_new(), *keep = hdx_evidence_new();
    CHECK(text && share && one && two && keep);
    if (!text || !share || !one || !two || !keep)
        return;
    CHECK(hdx_snapshot_load_text_shared(text, strlen(text), "node1", one, share, &err) == 0);
    CHECK(hdx_snapshot_load_text_shared(text, strlen(text), "node2", two, share, &err) == 0);
    size_t threads = 0, with_locals = 0;
    for (size_t i = 0; i < one->n_procs && i < two->n_procs; i++)
        for (size_t k = 0; k < one->procs[i].n_threads && k < two->procs[i].n_threads; k++) {
            const hdx_thread *a = &one->procs[i].threads[k], *b = &two->procs[i].threads[k];
            if (!a->n_frames)
                continue;
            threads++;
            CHECK(a->shared_frames && b->shared_frames && a->frames == b->frames && a->py_frames == b->py_frames);
            for (size_t f = 0; f < a->n_frames; f++)
                with_locals += a->frames[f].locals != NULL;
        }
    CHECK(threads >= 2 && with_locals >= 1);
    CHECK(one->n_procs == ev->n_procs && two->n_procs == ev->n_procs);
    CHECK(hdx_evidence_merge(keep, one, NULL) == 0);
    hdx_evidence_free(one);
    hdx_evidence_free(two);
    hdx_snapshot_share_end(share, keep);
    keep->taken_ns = ev->taken_ns;
    check_same_but(ev, keep, 0);
    hdx_evidence_free(keep);
    hdx_evidence_free(ev);
    free(text);
    free(err);
}

/* Hex strings as the writer makes them ("0x1f", hdx_json_hex) read back, with upper case,
 * leading zeros and a plain integer; what is no such string is refused by name. */
static void test_hex(void)
{
    static const struct {
        const char *arg;
        uint64_t want;
    } good[] = {{"\"0x0\"", 0},          {"\"0xffffffffffffffff\"", UINT64_MAX}, {"\"0X7FFE0b1f\"", 0x7ffe0b1fULL},
                {"\"0x000000000000000000001f\"", 0x1f}, {"12", 12}};
    static const char *const bad[] = {"\"0x\"", "\"0x1g\"", "\"0x10000000000000000\"", "\" 0x1\"", "\"0x-1\"",
                                      "\"1f\"",  "\"0x1 \"", "\"x1\""};
    char doc[256];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(doc, sizeof doc,
                 "{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"pid\":5,\"threads\":[{\"tid\":5,"
                 "\"syscall_args\":[%s,0,0,0,0,0]}]}]}",
                 good[i].arg);
        hdx_evidence *ev = hdx_evidence_new();
        char *err = NULL;
        int rc = hdx_snapshot_load_text(doc, strlen(doc), "hex.json", ev, &err);
        CHECK(rc == 0 && ev->n_procs == 1 && ev->procs[0].n_threads == 1 &&
                  ev->procs[0].threads[0].syscall_args[0] == good[i].want,
              "%s: rc %d (%s)", good[i].arg, rc, err ? err : "no message");
        free(err);
        hdx_evidence_free(ev);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(doc, sizeof doc,
                 "{\"schema\":\"hangdx.snapshot/1\",\"processes\":[{\"threads\":[{\"syscall_args\":[0,%s,0,0,0,0]}]}]}",
                 bad[i]);
        expect_error(doc, -EBADMSG, "processes[0].threads[0]", "\"syscall_args\" should be a hex string");
    }
}

int main(void)
{
    test_model_unchanged();
    test_time();
    test_round_trip();
    test_bad_inputs();
    test_hex();
    test_v1_to_v2();
    test_reduced();
    test_share();
    test_same_pid_on_two_hosts();
    test_torchrun_under_srun();
    test_multi_host();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("snapshot: all checks passed\n");
    return 0;
}
