#include "native/ptrace_registry.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/procstat.h"
#include "model/util.h"

/*
 * One slot per seized thread. Written only by the tracing thread; read by
 * the signal handler, so every field is accessed atomically and a slot's tid
 * is published last and cleared first.
 */
#define SLOTS 1024

struct slot {
    int tid;    /* 0 free */
    int sig;    /* signal to hand back on resume/detach */
    int orphan; /* interrupted but never stopped in time */
    int child;  /* the main thread of a child of hangdx's own (hangdx run's job): its exit
                   belongs to the code that started it, so it is looked at, never reaped */
};

static struct slot slots[SLOTS];

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)

static struct slot *find(int tid)
{
    for (int i = 0; i < SLOTS; i++)
        if (LOAD(slots[i].tid) == tid)
            return &slots[i];
    return NULL;
}

static void forget(int tid)
{
    struct slot *s = find(tid);
    if (s) {
        STORE(s->tid, 0);
        STORE(s->sig, 0);
        STORE(s->orphan, 0);
        STORE(s->child, 0);
    }
}

/*
 * waitpid(tid, status, __WALL | WNOHANG) for a seized thread, except that the
 * exit of a child of hangdx's own is left for its parent code to reap (hangdx
 * run waits for its job: a capture that took the job's exit status made run
 * wait forever). Such an exit is reported (with a status made by W_EXITCODE)
 * but stays reapable. Async-signal-safe.
 */
static pid_t wait_tid(int tid, int *status)
{
    struct slot *s = find(tid);
    if (s && LOAD(s->child)) {
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_PID, (id_t)tid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT | __WALL) < 0)
            return -1;
        if (si.si_pid == 0)
            return 0;
        if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
            *status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
            return tid; /* left for the parent code to reap */
        }
        /* a stop is pending: take it (the exit, if it came meanwhile, stays: no WEXITED) */
    }
    return waitpid(tid, status, __WALL | WNOHANG);
}

/* Is pid a child of this process (field 4 of its stat)? Not for signal handlers. */
static int is_own_child(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    hdx_stat st;
    return hdx_stat_read(path, &st) == 0 && (int)st.f[4] == (int)getpid();
}

/* Raw ptrace, as the glibc wrapper's varargs and errno juggling is not
 * documented async-signal-safe. Returns 0 or -errno. */
static long raw_ptrace(long req, int tid, long addr, long data)
{
    long r = syscall(SYS_ptrace, req, (long)tid, addr, data);
    return r < 0 ? -errno : r;
}

/* The signal of a signal-delivery-stop; 0 for event, group and syscall stops. */
static int stop_signal_of(int status)
{
    if (!WIFSTOPPED(status) || (status >> 16) != 0)
        return 0; /* PTRACE_EVENT_* stop (interrupt, group-stop) */
    int sig = WSTOPSIG(status);
    if (sig == (SIGTRAP | 0x80))
        return 0; /* syscall-stop under PTRACE_O_TRACESYSGOOD */
    return sig;
}

/*
 * wait_tid, and a stop's signal remembered in tid's slot, with every signal to hangdx held
 * off in between: a handler that let go of the thread (hdx_ptrace_detach_all) after the
 * stop was collected but before its signal was remembered detached with none, and the
 * target lost that signal.
 */
static pid_t collect(int tid, int *status)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pid_t r = wait_tid(tid, status);
    int saved = errno;
    struct slot *s = r == tid && WIFSTOPPED(*status) ? find(tid) : NULL;
    if (s)
        STORE(s->sig, stop_signal_of(*status));
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return r;
}

int hdx_ptrace_tracer_of(int pid, int tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
    char *buf = hdx_read_file(path, 1 << 16, NULL);
    if (!buf)
        return -1;
    int tracer = -1;
    char *t = strstr(buf, "\nTracerPid:");
    if (t)
        tracer = atoi(t + 11);
    free(buf);
    return tracer;
}

int hdx_ptrace_seize(int pid, int tid, unsigned long options, int *tracer)
{
    if (tracer)
        *tracer = 0;
    struct slot *s = find(0);
    if (!s)
        return -ENOSPC;
    /* Publish before seizing: a signal between the two must find it. */
    STORE(s->sig, 0);
    STORE(s->orphan, 0);
    STORE(s->child, tid == pid && is_own_child(pid));
    STORE(s->tid, tid);
    long r = raw_ptrace(PTRACE_SEIZE, tid, 0, (long)options);
    if (r == 0)
        return 0;
    STORE(s->tid, 0);
    if (r == -EPERM) {
        int t = hdx_ptrace_tracer_of(pid, tid);
        if (t > 0) {
            if (tracer)
                *tracer = t;
            return -EBUSY;
        }
    }
    return (int)r;
}

int hdx_ptrace_wait_stop(int tid, int timeout_ms, int *status)
{
    int64_t start = hdx_mono_ns(), deadline = start + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int st = 0;
        pid_t r = collect(tid, &st);
        if (r == tid) {
            if (WIFEXITED(st) || WIFSIGNALED(st)) {
                forget(tid);
                return -ESRCH;
            }
            if (WIFSTOPPED(st)) {
                if (status)
                    *status = st;
                return 1;
            }
            continue; /* WIFCONTINUED: not a stop */
        }
        if (r < 0 && errno != EINTR) {
            if (errno == ECHILD) {
                forget(tid);
                return -ESRCH;
            }
            return -errno;
        }
        int64_t now = hdx_mono_ns();
        if (now >= deadline)
            return 0;
        /* Most stops arrive within microseconds: ask again at once for the first 100 us, then
         * sleep 50 us between asks, leaving the CPU to the thread that has to stop. Not
         * sched_yield(): on a loaded machine that hands the CPU to every runnable task
         * before hangdx sees the stop, and the thread stays stopped meanwhile. */
        if (now - start >= 100000) {
            struct timespec ts = {0, 50 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

int hdx_ptrace_resume(int tid, int request)
{
    struct slot *s = find(tid);
    int sig = s ? LOAD(s->sig) : 0;
    long r = raw_ptrace(request, tid, 0, sig);
    if (r == 0 && s)
        STORE(s->sig, 0);
    return (int)r;
}

int hdx_ptrace_detach(int tid)
{
    struct slot *s = find(tid);
    int sig = s ? LOAD(s->sig) : 0;
    long r = raw_ptrace(PTRACE_DETACH, tid, 0, sig);
    forget(tid);
    return (int)r;
}

int hdx_ptrace_release(int tid, int timeout_ms)
{
    struct slot *s = find(tid);
    if (!s)
        return 0;
    /* A stop nobody has collected yet carries its own signal. */
    int st;
    pid_t r = collect(tid, &st);
    if (r == tid && !WIFSTOPPED(st)) {
        forget(tid); /* exited */
        return 0;
    }
    /* Stopped: detach at once. */
    if (raw_ptrace(PTRACE_DETACH, tid, 0, LOAD(s->sig)) == 0) {
        forget(tid);
        return 0;
    }
    /* Running: detaching needs a stop. */
    if (raw_ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
        forget(tid); /* gone */
        return 0;
    }
    int w = hdx_ptrace_wait_stop(tid, timeout_ms, &st);
    if (w < 0)
        return 0; /* exited: nothing is traced any more */
    if (w == 0) {
        STORE(s->orphan, 1);
        return -ETIMEDOUT;
    }
    return hdx_ptrace_detach(tid);
}

int hdx_ptrace_sweep(void)
{
    int left = 0;
    for (int i = 0; i < SLOTS; i++) {
        int tid = LOAD(slots[i].tid);
        if (!tid || !LOAD(slots[i].orphan))
            continue;
        int st;
        int w = hdx_ptrace_wait_stop(tid, 0, &st);
        if (w == 1) {
            hdx_ptrace_detach(tid);
            continue;
        }
        if (w < 0)
            continue; /* exited: forgotten */
        /* No stop reported, but it may have stopped all the same: someone else collected
         * the report (hangdx run reaps with waitpid(-1), which takes ptrace stops too). */
        if (raw_ptrace(PTRACE_DETACH, tid, 0, LOAD(slots[i].sig)) == 0 ||
            raw_ptrace(PTRACE_INTERRUPT, tid, 0, 0) == -ESRCH) {
            forget(tid); /* let go, or no longer ours */
            continue;
        }
        left++;
    }
    return left;
}

void hdx_ptrace_detach_all(void)
{
    int saved = errno;
    for (int i = 0; i < SLOTS; i++) {
        int tid = LOAD(slots[i].tid);
        if (!tid)
            continue;
        int sig = LOAD(slots[i].sig);
        int st;
        /* A stop nobody has collected yet carries its own signal. */
        if (wait_tid(tid, &st) == tid && WIFSTOPPED(st))
            sig = stop_signal_of(st);
        if (raw_ptrace(PTRACE_DETACH, tid, 0, sig) != 0 &&
            raw_ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0) {
            /* Running: detaching needs a stop. Wait for it, briefly. */
            for (int k = 0; k < 20; k++) {
                pid_t r = wait_tid(tid, &st);
                if (r == tid && WIFSTOPPED(st)) {
                    raw_ptrace(PTRACE_DETACH, tid, 0, stop_signal_of(st));
                    break;
                }
                if (r == tid || (r < 0 && errno == ECHILD))
                    break; /* exited */
                struct timespec ts = {0, 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            /* Still running: the kernel detaches it when hangdx exits. */
        }
        STORE(slots[i].tid, 0);
        STORE(slots[i].sig, 0);
        STORE(slots[i].orphan, 0);
        STORE(slots[i].child, 0);
    }
    errno = saved;
}
