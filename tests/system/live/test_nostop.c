/*
 * Stacks read without a stop (stacks.c, read_without_stop) against eintr_target, whose
 * threads wait in calls that a ptrace stop breaks with EINTR (built as an ordinary -O2
 * program, and with frame pointers, whose rbp no libc function saves: recover_rbp):
 *   - 60 samples stop none of them (n_stopped 0), and the target counts no EINTR;
 *   - each thread's stack holds the function that makes its call (wait_epoll, ...) and is
 *     the stack a stop gives (the same pcs, frame by frame);
 *   - a sample that stops every thread (hdx_stacks_set_always_stop) makes some calls return
 *     EINTR, each at most once: the target's count does see a stop;
 *   - with a thread that spins ("busy"), that one thread, and only it, is stopped in each
 *     sample, and its stack holds spin_busy.
 * The target is left untraced and running after every sample. First the decoders behind
 * recover_rbp, on prologues that compilers emit.
 *
 *   test_live_nostop EINTR_TARGET [EINTR_TARGET...]   (the same program built otherwise:
 *                                                      with frame pointers, at -O0)
 *   test_live_nostop --compare PID   (any process: how many of its threads a sample
 *                                     stops, and which stacks differ from a stop's)
 */
#include "live_util.h"
#include "gather/proc.h"
#include "native/stacks.h"
#include "native/unwind_tables.h"

#define SAMPLES 60

static const char *callers[] = {"wait_epoll", "wait_accept", "wait_recv", "wait_sigtimedwait", "wait_semop"};
static const char *thread_names[] = {"epoll", "accept", "recv", "sigtw", "semop"};

/* A fresh read of pid's threads and one sample of their stacks; NULL if pid is unreadable. */
static hdx_evidence *sample(int pid, int always_stop, int *rc)
{
    hdx_evidence *ev = hdx_evidence_new();
    hdx_process *p = ev ? hdx_evidence_add_process(ev) : NULL;
    if (!p || hdx_proc_read(p, pid) != 0) {
        hdx_evidence_free(ev);
        return NULL;
    }
    hdx_stacks_set_always_stop(always_stop);
    *rc = hdx_stacks_sample(p, ev, 1000);
    hdx_stacks_set_always_stop(0);
    return ev;
}

static const hdx_thread *thread_of(const hdx_process *p, int tid)
{
    for (size_t i = 0; i < p->n_threads; i++)
        if (p->threads[i].tid == tid)
            return &p->threads[i];
    return NULL;
}

/* The same frames (pcs) in a and b. */
static int same_stack(const hdx_thread *a, const hdx_thread *b)
{
    if (!a || !b || a->n_frames != b->n_frames || a->n_frames == 0)
        return 0;
    for (size_t k = 0; k < a->n_frames; k++)
        if (a->frames[k].pc != b->frames[k].pc)
            return 0;
    return 1;
}

/* The decoders that find a frame-pointer function's rbp without a stop, on prologues that
 * gcc 12 and clang emit (objdump -d of eintr_target_fp and live_target). */
static void test_decoders(void)
{
    static const struct {
        const char *what;
        unsigned char code[32];
        size_t len;
        long want;
    } fp[] = {
        /* push %rbp; xor %ecx,%ecx; mov $1,%edx; mov %rsp,%rbp; sub $0x10,%rsp (gcc -O2 -fno-omit-frame-pointer) */
        {"interleaved", {0x55, 0x31, 0xc9, 0xba, 1, 0, 0, 0, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10}, 15, 16},
        /* push %rbp; mov %rsp,%rbp; push %r15..%r12; xor %r12d,%r12d; push %rbx; sub $0x208,%rsp */
        {"pushes", {0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x45, 0x31, 0xe4, 0x53,
                    0x48, 0x81, 0xec, 0x08, 0x02, 0, 0}, 23, 5 * 8 + 0x208},
        /* mov $0x40,%eax; cmp $2,%edi; je +1; ret; push %rbp; mov %rsp,%rbp; push %r12; push %rbx;
         * lea -0x18(%rbp),%rdi; sub $0x10,%rsp (shrink-wrapped) */
        {"shrink-wrapped", {0xb8, 0x40, 0, 0, 0, 0x83, 0xff, 0x02, 0x74, 0x01, 0xc3, 0x55, 0x48, 0x89, 0xe5, 0x41,
                            0x54, 0x53, 0x48, 0x8d, 0x7d, 0xe8, 0x48, 0x83, 0xec, 0x10}, 26, 32},
        /* push %rbp; mov lsock(%rip),%edi; xor %edx,%edx; xor %esi,%esi; mov %rsp,%rbp; call (no sub) */
        {"no sub", {0x55, 0x8b, 0x3d, 0xed, 0x28, 0, 0, 0x31, 0xd2, 0x31, 0xf6, 0x48, 0x89, 0xe5, 0xe8, 0xad, 0xf9,
                    0xff, 0xff}, 19, 0},
        /* endbr64; push %rbp; mov %rsp,%rbp; sub $0x10,%rsp (-O0, -fcf-protection) */
        {"endbr64", {0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10}, 12, 16},
        /* movdqa, movaps to the frame after the sub are not read: the sub ends it */
        {"sse after", {0x55, 0x31, 0xf6, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0x66, 0x0f, 0x6f, 0x05, 1, 2, 3,
                       4}, 18, 16},
        /* sub $0x28,%rsp: no frame pointer */
        {"rsp-based", {0x48, 0x83, 0xec, 0x28, 0x48, 0x89, 0x54, 0x24, 0x18, 0xe8, 0, 0, 0, 0}, 14, -1},
        /* push %rbp; mov %rsp,%rbp; mov %rdi,%rbp: rbp is no frame pointer */
        {"rbp written", {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xfd, 0xe8, 0, 0, 0, 0}, 12, -1},
        /* push %rbp; mov %rsp,%rbp; and $-16,%rsp: realigned, the distance is not known */
        {"realigned", {0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xe4, 0xf0, 0xe8, 0, 0, 0, 0}, 13, -1},
        /* vmovdqu (VEX) before the sub: not known */
        {"vex", {0x55, 0x48, 0x89, 0xe5, 0xc5, 0xfa, 0x6f, 0x07, 0x48, 0x83, 0xec, 0x10}, 12, -1},
        {"cut short", {0x55, 0x48, 0x89, 0xe5, 0x48, 0x83}, 6, -1},
    };
    for (size_t i = 0; i < sizeof fp / sizeof fp[0]; i++) {
        long got = hdx_x86_fp_frame_size(fp[i].code, fp[i].len);
        CHECK(got == fp[i].want, "fp frame %s: %ld, want %ld", fp[i].what, got, fp[i].want);
    }
    uint64_t where = 0, ra = 0x401000;
    const unsigned char direct[8] = {0x90, 0x90, 0x90, 0xe8, 0xfb, 0xff, 0xff, 0xff}; /* call ra-5 */
    CHECK(hdx_x86_call_before(direct, ra, &where) == HDX_CALL_DIRECT && where == ra - 5, "call rel32");
    const unsigned char slot[8] = {0x90, 0x90, 0xff, 0x15, 0x10, 0, 0, 0}; /* call *0x10(%rip) */
    CHECK(hdx_x86_call_before(slot, ra, &where) == HDX_CALL_SLOT && where == ra + 0x10, "call *rel32(%%rip)");
    const unsigned char reg[8] = {0x48, 0x89, 0xc7, 0x90, 0x90, 0x90, 0xff, 0xd0}; /* call *%rax */
    CHECK(hdx_x86_call_before(reg, ra, &where) == HDX_CALL_INDIRECT, "call *%%rax");
    const unsigned char rex[8] = {0x90, 0x90, 0x90, 0x90, 0x90, 0x41, 0xff, 0xd3}; /* call *%r11 */
    CHECK(hdx_x86_call_before(rex, ra, &where) == HDX_CALL_INDIRECT, "call *%%r11");
    const unsigned char vcall[8] = {0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0x50, 0x18}; /* call *0x18(%rax) */
    CHECK(hdx_x86_call_before(vcall, ra, &where) == HDX_CALL_INDIRECT, "call *0x18(%%rax)");
    const unsigned char none[8] = {0x48, 0x89, 0xc7, 0x48, 0x83, 0xc4, 0x08, 0xc3}; /* mov; add; ret */
    CHECK(hdx_x86_call_before(none, ra, &where) == 0, "no call");
    uint64_t s = 0;
    const unsigned char plt[16] = {0xff, 0x25, 0x12, 0x2f, 0, 0, 0x68, 0, 0, 0, 0}; /* jmp *0x2f12(%rip) */
    CHECK(hdx_x86_stub_slot(plt, sizeof plt, 0x1030, &s) == 0 && s == 0x1030 + 6 + 0x2f12, ".plt stub");
    const unsigned char sec[16] = {0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x10, 0, 0, 0}; /* endbr64; bnd jmp */
    CHECK(hdx_x86_stub_slot(sec, sizeof sec, 0x2000, &s) == 0 && s == 0x2000 + 11 + 0x10, ".plt.sec stub");
    CHECK(hdx_x86_stub_slot(direct, sizeof direct, 0x2000, &s) == -ENOENT, "no stub");
}

/* --compare PID: one sample as hangdx takes it, one that stops every thread. */
static int compare(int pid)
{
    int r1 = 0, r2 = 0;
    hdx_evidence *a = sample(pid, 0, &r1), *b = sample(pid, 1, &r2);
    if (!a || !b) {
        fprintf(stderr, "cannot read process %d\n", pid);
        return 2;
    }
    const hdx_process *p = &a->procs[0], *q = &b->procs[0];
    size_t differ = 0;
    for (size_t i = 0; i < p->n_threads; i++) {
        const hdx_thread *t = &p->threads[i], *u = thread_of(q, t->tid);
        if (same_stack(t, u))
            continue;
        differ++;
        fprintf(stderr, "thread %d: without the stop / with it\n", t->tid);
        live_print_stack(t);
        if (u)
            live_print_stack(u);
    }
    printf("pid %d: %zu threads, %d stopped by a sample (%lld us), %zu stacks differ from a stop's "
           "(a thread that moved in between differs too)\n",
           pid, p->n_threads, p->n_stopped, (long long)p->stopped_us, differ);
    hdx_evidence_free(a);
    hdx_evidence_free(b);
    hdx_stacks_forget();
    return 0;
}

/* Waits (up to 1 s) until pid's main thread is back in wait_stdin's read(2), syscall 0 in
 * /proc/PID/syscall, after it printed: a sample taken before would find it running. */
static void main_in_read(int pid)
{
    char path[64], buf[64] = "";
    snprintf(path, sizeof path, "/proc/%d/syscall", pid);
    for (int k = 0; k < 1000 && strncmp(buf, "0 ", 2); k++) {
        FILE *f = fopen(path, "r");
        if (!f || !fgets(buf, sizeof buf, f))
            buf[0] = 0;
        if (f)
            fclose(f);
        if (strncmp(buf, "0 ", 2))
            usleep(1000);
    }
}

/* The target's "NAME calls=N eintr=E" lines after command ("count" or "stop"): the total
 * of E, -1 if unreadable; "stop" also reaps the target. */
static long count_eintr(struct live_proc *lp, const char *command, long eintr[5])
{
    char cmd[16];
    int n = snprintf(cmd, sizeof cmd, "%s\n", command);
    if (write(lp->in, cmd, (size_t)n) != n)
        return -1;
    long total = -1;
    char line[256];
    while (live_read_line(lp->out, line, sizeof line, 10000) == 0) {
        fprintf(stderr, "target: %s\n", line);
        for (int i = 0; i < 5; i++) {
            size_t len = strlen(thread_names[i]);
            char *e = strstr(line, "eintr=");
            if (!strncmp(line, thread_names[i], len) && line[len] == ' ' && e)
                eintr[i] = atol(e + 6);
        }
        if (!strncmp(line, "total eintr=", 12)) {
            total = atol(line + 12);
            break;
        }
    }
    if (strcmp(command, "stop")) {
        main_in_read(lp->pid);
        return total;
    }
    int st;
    waitpid(lp->pid, &st, 0);
    lp->pid = 0;
    close(lp->in);
    close(lp->out);
    return total;
}

static int start_target(struct live_proc *lp, const char *target, const char *mode, int tids[5])
{
    char *argv[] = {(char *)target, (char *)mode, NULL};
    char *env[] = {NULL};
    char line[256];
    if (live_spawn(lp, argv, env, NULL) < 0 || live_read_line(lp->out, line, sizeof line, 10000) < 0 ||
        sscanf(line, "ready %d %d %d %d %d", &tids[0], &tids[1], &tids[2], &tids[3], &tids[4]) != 5) {
        fprintf(stderr, "FAIL: %s did not start\n", target);
        return -1;
    }
    main_in_read(lp->pid);
    return 0;
}

/* Every waiting thread's stack holds its caller function and start_thread. */
static void check_waiters(const hdx_process *p, const int tids[5], const char *what)
{
    for (int i = 0; i < 5; i++) {
        const hdx_thread *t = thread_of(p, tids[i]);
        int ok = t && live_frame(t, callers[i]) && live_frame(t, "thread_main") && live_frame(t, "start_thread");
        CHECK(ok, "%s: thread %d (%s) waits in %s, called from thread_main", what, tids[i], thread_names[i],
              callers[i]);
        if (!ok && t)
            live_print_stack(t);
    }
    const hdx_thread *mt = thread_of(p, p->pid);
    CHECK(mt && live_frame(mt, "wait_stdin") && live_frame(mt, "main"), "%s: main waits in wait_stdin", what);
}

/* SAMPLES samples of target's waiting threads: none stopped, the right stacks, the same as a
 * stop's; then one sample with stops, which breaks each wait once (the target's counts see it). */
static void check_waiting(const char *target)
{
    struct live_proc lp;
    int tids[5];
    if (start_target(&lp, target, "wait", tids) < 0) {
        failures++;
        return;
    }
    hdx_evidence *ev = NULL;
    int stopped = 0, failed = 0;
    int64_t t0 = hdx_mono_ns();
    for (int k = 0; k < SAMPLES; k++) {
        hdx_evidence_free(ev);
        int rc = 0;
        ev = sample(lp.pid, 0, &rc);
        if (!ev || rc != 0) {
            failed++;
            continue;
        }
        stopped += ev->procs[0].n_stopped;
        if (k == 0 || k == SAMPLES - 1)
            check_waiters(&ev->procs[0], tids, k == 0 ? "first sample" : "last sample");
    }
    double ms = (double)(hdx_mono_ns() - t0) / 1e6 / SAMPLES;
    CHECK(failed == 0, "%s: %d of %d samples failed", target, failed, SAMPLES);
    CHECK(stopped == 0, "%s: %d threads stopped in %d samples of a process whose threads all wait", target,
          stopped, SAMPLES);
    CHECK(ev && ev->procs[0].stopped_us == 0 && ev->procs[0].max_stop_us == 0, "stopped_us %lld, max %lld",
          ev ? (long long)ev->procs[0].stopped_us : -1LL, ev ? (long long)ev->procs[0].max_stop_us : -1LL);
    CHECK(live_untraced(lp.pid) == 0, "untraced after the samples");
    fprintf(stderr, "%s: %d samples, %.2f ms each, %d threads stopped\n", target, SAMPLES, ms, stopped);
    long eintr[5] = {-1, -1, -1, -1, -1};
    long total = count_eintr(&lp, "count", eintr);
    CHECK(total == 0, "%s: EINTR returned to the target by %d samples without stops: %ld, want 0", target,
          SAMPLES, total);

    /* the stacks a stop gives are the same; that sample breaks each wait once */
    int rc = 0;
    hdx_evidence *ev2 = sample(lp.pid, 1, &rc);
    CHECK(ev2 && rc == 0 && ev2->procs[0].n_stopped == (int)ev2->procs[0].n_threads,
          "a sample with stops stops all %zu threads: %d", ev2 ? ev2->procs[0].n_threads : 0,
          ev2 ? ev2->procs[0].n_stopped : -1);
    for (size_t i = 0; ev && ev2 && i < ev->procs[0].n_threads; i++) {
        const hdx_thread *t = &ev->procs[0].threads[i], *u = thread_of(&ev2->procs[0], t->tid);
        CHECK(same_stack(t, u), "thread %d: the stack read without a stop is the one a stop gives", t->tid);
        if (!same_stack(t, u)) {
            live_print_stack(t);
            if (u)
                live_print_stack(u);
        }
    }
    if (ev2)
        check_waiters(&ev2->procs[0], tids, "sample with stops");
    CHECK(live_untraced(lp.pid) == 0, "untraced after the sample with stops");
    /* the one sample with stops breaks some waits, at most once each: the count does see a
     * stop (whether a given call returns EINTR or restarts after one varies with timing) */
    long before[5];
    memcpy(before, eintr, sizeof before);
    total = count_eintr(&lp, "stop", eintr);
    CHECK(total >= 1, "EINTR returned to the target after the sample with stops: %ld, want at least 1", total);
    for (int i = 0; i < 5; i++)
        CHECK(eintr[i] - before[i] <= 1 && eintr[i] >= before[i], "%s returned EINTR %ld times after one stop",
              thread_names[i], eintr[i] - before[i]);
    hdx_evidence_free(ev);
    hdx_evidence_free(ev2);
}

/* One thread spins: it alone is stopped, in every sample. */
static void check_busy(const char *target)
{
    struct live_proc lp;
    int tids[5], rc = 0, stopped = 0;
    if (start_target(&lp, target, "busy", tids) < 0) {
        failures++;
        return;
    }
    hdx_evidence *ev = NULL;
    for (int k = 0; k < 10; k++) {
        hdx_evidence_free(ev);
        ev = sample(lp.pid, 0, &rc);
        CHECK(ev && rc == 0, "sample %d of the busy target: %d", k, rc);
        if (ev)
            stopped += ev->procs[0].n_stopped;
    }
    CHECK(stopped == 10, "the spinning thread, and only it, stopped in each of 10 samples: %d stops", stopped);
    const hdx_thread *bz = ev ? live_thread_named(&ev->procs[0], "busy") : NULL;
    CHECK(live_frame(bz, "spin_busy"), "the spinning thread's stack holds spin_busy");
    if (bz && !live_frame(bz, "spin_busy"))
        live_print_stack(bz);
    if (ev) {
        check_waiters(&ev->procs[0], tids, "busy target");
        CHECK(ev->procs[0].stopped_us > 0, "stopped_us counts the busy thread's stop");
    }
    CHECK(live_untraced(lp.pid) == 0, "untraced after the busy samples");
    long eintr[5];
    long total = count_eintr(&lp, "stop", eintr);
    CHECK(total == 0, "EINTR returned to the busy target: %ld, want 0", total);
    hdx_evidence_free(ev);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--compare"))
        return compare(atoi(argv[2]));
    if (argc < 2) {
        fprintf(stderr, "usage: test_live_nostop EINTR_TARGET [EINTR_TARGET...] | --compare PID\n");
        return 64;
    }
    test_decoders();
    /* the target as an ordinary optimized build, then as others (with frame pointers) */
    for (int i = 1; i < argc; i++)
        check_waiting(argv[i]);
    check_busy(argv[1]);
    hdx_stacks_forget();
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        fprintf(stderr, "ok\n");
    return failures ? 1 : 0;
}
