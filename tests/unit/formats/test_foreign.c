/*
 * Foreign dumps (foreign.h): one fixture per format, parsed with exact
 * assertions, plus bad inputs that must fail cleanly with file and line.
 * Fixtures: py-spy text and JSON hand-written in py-spy's formats (its
 * src/dump.rs, src/stack_trace.rs); gdb, eu-stack and faulthandler recorded
 * from real gloo hangs by make_fixtures.py.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/evidence.h"
#include "formats/foreign.h"
#include "check.h"

static int same(const char *a, const char *b)
{
    return a && b && !strcmp(a, b);
}
#define STREQ(a, b) CHECK(same((a), (b)))

static const char *dir;

static hdx_evidence *load(const char *name, int want_rc)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hdx_evidence *ev = hdx_evidence_new();
    char *err = NULL;
    int rc = hdx_foreign_load(path, ev, &err);
    if (rc != want_rc)
        fprintf(stderr, "%s: rc %d, want %d: %s\n", name, rc, want_rc, err ? err : "");
    CHECK(rc == want_rc);
    free(err);
    return ev;
}

static int has_note(const hdx_evidence *ev, const char *part)
{
    for (size_t i = 0; i < ev->n_notes; i++)
        if (strstr(ev->notes[i], part))
            return 1;
    return 0;
}

static void test_pyspy_text(void)
{
    hdx_evidence *ev = load("pyspy-rank0.txt", 0);
    CHECK(ev->n_procs == 1);
    hdx_process *p = &ev->procs[0];
    CHECK(p->pid == 41021 && p->rank == 0 && p->host == NULL);
    CHECK(p->n_cmdline == 4);
    STREQ(p->cmdline[1], "train.py");
    STREQ(p->python, "3.11 /usr/bin/python3.11");
    CHECK(p->n_threads == 2);
    hdx_thread *t = &p->threads[0];
    CHECK(t->tid == 41021 && t->state == 'S');
    STREQ(t->name, "MainThread");
    CHECK(t->n_frames == 4);
    hdx_frame *f = &t->frames[0];
    CHECK(f->kind == HDX_FRAME_PYTHON && f->line == 1541);
    STREQ(f->function, "all_reduce");
    STREQ(f->file, "torch/distributed/distributed_c10d.py");
    CHECK(f->n_locals == 7);
    const hdx_local *v = hdx_frame_local(f, "tensor");
    CHECK(v && v->kind == HDX_VAL_OTHER);
    STREQ(v ? v->s : NULL, "Tensor");
    v = hdx_frame_local(f, "group");
    CHECK(v && v->kind == HDX_VAL_NONE);
    v = hdx_frame_local(f, "async_op");
    CHECK(v && v->kind == HDX_VAL_BOOL && v->i == 0);
    f = &t->frames[1];
    STREQ(f->function, "train_step");
    STREQ(f->file, "train.py");
    CHECK(f->line == 31);
    v = hdx_frame_local(f, "step");
    CHECK(v && v->kind == HDX_VAL_INT && v->i == 7);
    v = hdx_frame_local(f, "lr");
    CHECK(v && v->kind == HDX_VAL_FLOAT && v->f == 0.01);
    v = hdx_frame_local(f, "tag");
    CHECK(v && v->kind == HDX_VAL_STR);
    STREQ(v ? v->s : NULL, "warmup");
    STREQ(t->frames[3].function, "<module>");
    t = &p->threads[1];
    CHECK(t->tid == 41058 && t->n_frames == 6);
    STREQ(t->name, "Thread-1 (_pin_memory_loop)");
    STREQ(t->frames[2].function, "_pin_memory_loop");
    CHECK(has_note(ev, "pid 41021 is rank 0, from the file name only"));
    hdx_evidence_free(ev);

    /* --native: native frames by their module or source file. */
    ev = load("pyspy-rank2.txt", 0);
    p = &ev->procs[0];
    CHECK(p->pid == 41023 && p->rank == 2 && p->n_threads == 2);
    t = &p->threads[0];
    CHECK(t->n_frames == 6);
    CHECK(t->frames[0].kind == HDX_FRAME_NATIVE);
    STREQ(t->frames[0].function, "clock_nanosleep@GLIBC_2.2.5");
    STREQ(t->frames[0].module, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    CHECK(t->frames[0].file == NULL);
    STREQ(t->frames[1].function, "time_sleep.lto_priv.0");
    CHECK(t->frames[2].kind == HDX_FRAME_PYTHON && t->frames[2].line == 44);
    STREQ(t->frames[2].function, "skip_and_sleep");
    t = &p->threads[1];
    CHECK(t->tid == 41060);
    STREQ(t->name, "41060");
    STREQ(t->frames[1].function, "gloo::transport::tcp::Loop::run");
    CHECK(t->frames[2].function == NULL && t->frames[2].pc == 0x7f66bc2d44a3ULL);
    CHECK(t->frames[3].kind == HDX_FRAME_NATIVE && t->frames[3].line == 442);
    STREQ(t->frames[3].file, "pthread_create.c");
    hdx_evidence_free(ev);
}

static void test_pyspy_json(void)
{
    hdx_evidence *ev = load("pyspy-both-recv-rank0.json", 0);
    CHECK(ev->n_procs == 1);
    hdx_process *p = &ev->procs[0];
    CHECK(p->pid == 52001 && p->rank == 0 && p->n_threads == 2);
    hdx_thread *t = &p->threads[0]; /* the main thread first, though py-spy lists it last */
    CHECK(t->tid == 52001 && t->state == 'S' && t->n_frames == 4);
    STREQ(t->name, "MainThread");
    hdx_frame *f = &t->frames[0];
    CHECK(f->kind == HDX_FRAME_PYTHON && f->line == 1202 && f->n_locals == 5);
    STREQ(f->function, "recv");
    STREQ(f->file, "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py");
    const hdx_local *v = hdx_frame_local(f, "src");
    CHECK(v && v->kind == HDX_VAL_INT && v->i == 1);
    STREQ(t->frames[1].function, "recv_activations");
    CHECK(t->frames[1].line == 153);
    t = &p->threads[1];
    CHECK(t->tid == 52032 && t->state == 'R' && t->n_frames == 1);
    STREQ(t->name, "Thread-2 (watch)");
    v = hdx_frame_local(&t->frames[0], "every");
    CHECK(v && v->kind == HDX_VAL_FLOAT && v->f == 2.5);
    hdx_evidence_free(ev);
}

static void test_gdb(void)
{
    hdx_evidence *ev = load("gdb-rank0.txt", 0);
    CHECK(ev->n_procs == 1);
    hdx_process *p = &ev->procs[0];
    CHECK(p->pid == 18043 && p->rank == 0 && p->n_threads == 6);
    hdx_thread *t = &p->threads[0];
    CHECK(t->tid == 18043 && !t->unmerged);
    STREQ(t->name, "python3");
    /* Native frames down to the eval loop, then py-bt's Python frames in its place. */
    STREQ(t->frames[0].function, "__futex_abstimed_wait_common64");
    STREQ(t->frames[0].file, "./nptl/futex-internal.c");
    CHECK(t->frames[0].line == 57 && t->frames[0].pc == 0);
    STREQ(t->frames[5].function, "c10d::Work::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >)");
    STREQ(t->frames[5].module, "/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13");
    CHECK(t->frames[5].pc == 0x00007fc08aac2843ULL);
    CHECK(t->frames[6].function == NULL);
    STREQ(t->frames[6].module, "/lib/x86_64-linux-gnu/libtorch_python.so.1.13");
    size_t i = 0;
    while (i < t->n_frames && t->frames[i].kind != HDX_FRAME_PYTHON)
        i++;
    CHECK(i + 5 <= t->n_frames);
    if (i + 5 <= t->n_frames) {
        STREQ(t->frames[i].function, "all_reduce");
        STREQ(t->frames[i].file, "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py");
        CHECK(t->frames[i].line == 1541);
        STREQ(t->frames[i + 1].function, "train_step");
        CHECK(t->frames[i + 1].line == 126);
        STREQ(t->frames[i + 4].function, "<module>");
        STREQ(t->frames[i + 4].file, "/work/main/tests/distributed/hangs.py");
    }
    STREQ(t->frames[t->n_frames - 1].function, "_start");
    t = &p->threads[1]; /* gdb's thread 6 comes first after the main one */
    CHECK(t->tid == 18079 && t->n_frames == 14 && t->n_py_frames == 0);
    STREQ(t->frames[6].function, "gloo::transport::tcp::UnboundBuffer::waitSend(int*, std::chrono::duration<long, "
                                 "std::ratio<1l, 1000l> >)");
    STREQ(t->frames[6].module, "/lib/libgloo.so.0");
    STREQ(t->frames[13].function, "clone3");
    CHECK(t->frames[13].line == 81);
    hdx_evidence_free(ev);
}

static void test_eustack(void)
{
    hdx_evidence *ev = load("eustack-rank2.txt", 0);
    hdx_process *p = &ev->procs[0];
    CHECK(ev->n_procs == 1 && p->pid == 18045 && p->rank == 2 && p->n_threads == 5);
    hdx_thread *t = &p->threads[0];
    CHECK(t->tid == 18045 && t->n_frames == 14);
    STREQ(t->frames[0].function, "clock_nanosleep@GLIBC_2.2.5");
    CHECK(t->frames[0].pc == 0x00007f66c5450545ULL && t->frames[0].kind == HDX_FRAME_NATIVE);
    STREQ(t->frames[1].function, "time_sleep.lto_priv.0");
    STREQ(t->frames[2].function, "_PyEval_EvalFrameDefault");
    t = &p->threads[2];
    CHECK(t->tid == 18072 && t->n_frames == 5);
    STREQ(t->frames[1].function, "gloo::transport::tcp::Loop::run()");
    CHECK(p->threads[1].frames[1].function == NULL && p->threads[1].frames[1].pc == 0x00007f66c0e80c61ULL);
    hdx_evidence_free(ev);

    /* -m and -s: module after " - ", the source on the next line. */
    const char *text = "PID 29363 - process\nTID 29363:\n"
                       "#0  0x00007f5737ae9503 __GI___clock_nanosleep - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                       "    ../sysdeps/unix/sysv/linux/clock_nanosleep.c:71:10\n"
                       "#2  0x00005649277a74af - /usr/bin/sleep\n";
    ev = hdx_evidence_new();
    CHECK(hdx_foreign_load_text(text, strlen(text), HDX_FOREIGN_NONE, "x", ev, NULL) == 0);
    hdx_frame *f = ev->procs[0].threads[0].frames;
    STREQ(f[0].function, "__GI___clock_nanosleep");
    STREQ(f[0].module, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    STREQ(f[0].file, "../sysdeps/unix/sysv/linux/clock_nanosleep.c");
    CHECK(f[0].line == 71);
    CHECK(f[1].function == NULL);
    STREQ(f[1].module, "/usr/bin/sleep");
    hdx_evidence_free(ev);
}

static void test_faulthandler(void)
{
    hdx_evidence *ev = load("faulthandler-rank2.txt", 0);
    hdx_process *p = &ev->procs[0];
    CHECK(ev->n_procs == 1 && p->pid == HDX_UNKNOWN && p->rank == 2 && p->n_threads == 1);
    hdx_thread *t = &p->threads[0];
    CHECK(t->tid == HDX_UNKNOWN && t->n_frames == 4);
    STREQ(t->name, "0x00007f66c5380040");
    STREQ(t->frames[0].function, "skip_and_sleep");
    STREQ(t->frames[0].file, "/work/main/tests/distributed/hangs.py");
    CHECK(t->frames[0].line == 149 && t->frames[0].kind == HDX_FRAME_PYTHON);
    STREQ(t->frames[3].function, "<module>");
    hdx_evidence_free(ev);

    ev = load("faulthandler-job.log", 0);
    CHECK(ev->n_procs == 2);
    for (int r = 0; r < 2 && ev->n_procs == 2; r++) {
        p = &ev->procs[r];
        CHECK(p->rank == r && p->n_threads == 1 && p->threads[0].n_frames == 5);
        STREQ(p->threads[0].frames[0].function, "recv");
        CHECK(p->threads[0].frames[0].line == 1202);
        STREQ(p->threads[0].frames[1].function, "recv_activations");
    }
    CHECK(has_note(ev, "is rank 1, from its \"[rank1]:\" line prefix"));
    hdx_evidence_free(ev);

    /* Interleaved ranks, a repeated dump (the last kept), the main thread first. */
    const char *text = "[rank1]:Timeout (0:00:05)!\n"
                       "[rank1]:Thread 0x00007f0000000002 (most recent call first):\n"
                       "[rank0]:Thread 0x00007f0000000001 (most recent call first):\n"
                       "[rank1]:  File \"/x.py\", line 3 in old\n"
                       "[rank0]:  File \"/x.py\", line 12 in leaf\n"
                       "[rank1]:Timeout (0:00:10)!\n"
                       "[rank1]:Thread 0x00007f00000000aa (most recent call first):\n"
                       "[rank1]:  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
                       "[rank1]:\n"
                       "[rank1]:Current thread 0x00007f0000000002 (most recent call first):\n"
                       "[rank1]:  File \"/x.py\", line 4 in new\n"
                       "[rank1]:  File \"/x.py\", line 9 in <module>\n";
    ev = hdx_evidence_new();
    char *err = NULL;
    CHECK(hdx_foreign_load_text(text, strlen(text), HDX_FOREIGN_NONE, "job.log", ev, &err) == 0);
    CHECK(ev->n_procs == 2);
    if (ev->n_procs == 2) {
        /* rank 0's dump comes before rank 1's second one */
        CHECK(ev->procs[1].rank == 1 && ev->procs[1].n_threads == 2);
        STREQ(ev->procs[1].threads[0].frames[0].function, "new");
        STREQ(ev->procs[1].threads[1].frames[0].function, "wait");
        CHECK(ev->procs[0].rank == 0);
        STREQ(ev->procs[0].threads[0].frames[0].function, "leaf");
    }
    CHECK(has_note(ev, "1 earlier faulthandler dump of the same process replaced"));
    free(err);
    hdx_evidence_free(ev);
}

static void test_bad(void)
{
    static const struct {
        const char *text;
        int rc;
        const char *msg;
    } cases[] = {
        {"hello\nworld\n", -EINVAL, "x: not a stack dump"},
        {"Process 1: python\nPython v3.11.2 (/usr/bin/python3)\n    f (a.py:1)\n", -EBADMSG, "x:3: a frame line outside"},
        {"Process 1: python\nPython v3.11.2 (/usr/bin/python3)\nThread 1\n", -EBADMSG, "x:3: a thread line without"},
        {"Process 1: python\nPython v3.11.2 (/usr/bin/python3)\n", -EBADMSG, "x: no stack"},
        {"[{\"thread_id\": 1, \"frames\": 3}]", -EBADMSG, "x: thread 0: no \"frames\" array"},
        {"[{\"thread_id\": 1, \"frames\": [}", -EBADMSG, "x: not valid JSON"},
        {"TID 5:\n#0 zz\nPID 1 - process\n", -EBADMSG, "x:2: an eu-stack frame without its address"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hdx_evidence *ev = hdx_evidence_new();
        char *err = NULL;
        int rc = hdx_foreign_load_text(cases[i].text, strlen(cases[i].text), HDX_FOREIGN_NONE, "x", ev, &err);
        if (rc != cases[i].rc || !err || strncmp(err, cases[i].msg, strlen(cases[i].msg)) != 0) {
            fprintf(stderr, "bad case %zu: rc %d, err %s\n", i, rc, err ? err : "(none)");
            failures++;
        }
        CHECK(ev->n_procs == 0);
        free(err);
        hdx_evidence_free(ev);
    }
    /* The same rank twice across inputs is refused. */
    hdx_evidence *ev = load("pyspy-rank0.txt", 0);
    char path[4096], *err = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, "gdb-rank0.txt");
    CHECK(hdx_foreign_load(path, ev, &err) == -EEXIST && err && strstr(err, "rank 0 is also in an earlier input"));
    CHECK(ev->n_procs == 1);
    free(err);
    hdx_evidence_free(ev);
    /* Every truncation of a real dump parses or fails cleanly. */
    snprintf(path, sizeof path, "%s/%s", dir, "gdb-rank0.txt");
    FILE *f = fopen(path, "r");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    for (size_t cut = 0; cut < n; cut += 97) {
        ev = hdx_evidence_new();
        err = NULL;
        (void)hdx_foreign_load_text(buf, cut, HDX_FOREIGN_GDB, "cut", ev, &err);
        free(err);
        hdx_evidence_free(ev);
    }
}

int main(int argc, char **argv)
{
    dir = argc > 1 ? argv[1] : "fixtures";
    CHECK(hdx_foreign_sniff("[]", 2) == HDX_FOREIGN_NONE);
    test_pyspy_text();
    test_pyspy_json();
    test_gdb();
    test_eustack();
    test_faulthandler();
    test_bad();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("foreign: all checks passed\n");
    return failures ? 1 : 0;
}
