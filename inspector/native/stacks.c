#include "native/stacks.h"

#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <unistd.h>

#include "native/ptrace_registry.h"
#include "model/procstat.h"
#include "native/maps.h"
#include "native/symbols.h"
#include "native/unwind_tables.h"
#include "model/util.h"

#define MAX_DEPTH 256
#define PAGE 4096
#define STACK_COPY (256 * 1024) /* most bytes of stack copied above sp during the stop */
#define REDZONE 128
#define CACHE_PAGES 64
#define ALL_REGS ((1u << (UNW_X86_64_RIP + 1)) - 1) /* unwind_ctx.known after a stop */

/* What one thread's stop yields (or /proc, for a thread that waits: read_without_stop):
 * registers and a copy of its stack. */
struct unwind_ctx {
    int pid;
    struct user_regs_struct regs;
    /* which of regs are known (bit UNW_X86_64_*): all of them from a stop; without one
     * (read_blocked) only rsp, rip and a system call's argument registers */
    uint32_t known;
    /* without a stop: the frame the unwind steps from (its pc and sp; frame_outer: not the
     * innermost, so frame_ip is a return address), and the unwind's address space and _UPT
     * handle, for recover_rbp, which is tried once per unwind */
    uint64_t frame_ip, frame_sp;
    int frame_outer, rbp_tried;
    unw_addr_space_t as;
    void *upt;
    uint64_t stack_lo; /* target address of stack[0] */
    unsigned char *stack;
    size_t stack_len;
    /* the mappings (from /proc/PID/maps, read before any stop), to end a
     * stack copy where the stack's writable mapping ends */
    hdx_map *maps;
    size_t n_maps;
    /* small direct-mapped cache of other target pages (text, unwind tables) */
    struct {
        uint64_t addr; /* page address + 1, 0 empty */
        unsigned char data[PAGE];
    } *cache;
    /* where each image's unwind table lies, from one more read of /proc/PID/maps
     * (made at the first lookup; tables_tried: made or failed) */
    hdx_unwind_tables *tables;
    int tables_tried;
};

/* libunwind's callbacks get the _UPT handle as their argument (for
 * _UPT_find_proc_info); our own state travels beside it. */
static _Thread_local struct unwind_ctx *cur_ctx;

/* The raw result for one thread: PCs, and which frames are signal frames. */
struct raw_stack {
    uint64_t pc[MAX_DEPTH];
    unsigned char signal[MAX_DEPTH];
    int n;
    int ok;
    /* how the unwind ended: 0 at the outermost frame (unw_step 0), 1 at MAX_DEPTH, or a
     * negative UNW_E* code (no unwind info, a register not known, no progress: -UNW_EBADFRAME) */
    int end;
    int sp_backwards; /* a frame's sp lay below the one inside it */
};

static int read_remote(int pid, uint64_t addr, void *buf, size_t len)
{
    struct iovec l = {buf, len}, r = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    return n == (ssize_t)len ? 0 : -1;
}

static int acc_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
                          void *arg)
{
    (void)as;
    (void)arg;
    struct unwind_ctx *c = cur_ctx;
    if (write || !c)
        return -UNW_EINVAL;
    if (addr >= c->stack_lo && addr - c->stack_lo + sizeof *val <= c->stack_len) {
        memcpy(val, c->stack + (addr - c->stack_lo), sizeof *val);
        return 0;
    }
    uint64_t page = addr & ~(uint64_t)(PAGE - 1);
    if (c->cache && (addr & (PAGE - 1)) + sizeof *val <= PAGE) {
        size_t slot = (page / PAGE) % CACHE_PAGES;
        if (c->cache[slot].addr != page + 1) {
            if (read_remote(c->pid, page, c->cache[slot].data, PAGE) < 0)
                goto direct;
            c->cache[slot].addr = page + 1;
        }
        memcpy(val, c->cache[slot].data + (addr - page), sizeof *val);
        return 0;
    }
direct:
    return read_remote(c->pid, addr, val, sizeof *val) == 0 ? 0 : -UNW_EINVAL;
}

/* n bytes of target code or data at addr: 0 or -1. */
static int read_bytes(struct unwind_ctx *c, uint64_t addr, void *buf, size_t n)
{
    if (addr >= c->stack_lo && addr - c->stack_lo + n <= c->stack_len) {
        memcpy(buf, c->stack + (addr - c->stack_lo), n);
        return 0;
    }
    return read_remote(c->pid, addr, buf, n);
}

static int executable(const struct unwind_ctx *c, uint64_t pc);
static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info,
                              void *arg);

/* Whether the call that returns to ra calls fn: directly, through a PLT stub or a GOT slot,
 * or through a register or memory (a virtual call, a function pointer: not known, taken). */
static int calls_into(struct unwind_ctx *c, uint64_t ra, uint64_t fn)
{
    unsigned char b[8], stub[16];
    uint64_t where, slot, to;
    if (ra < 8 || read_bytes(c, ra - 8, b, sizeof b) < 0)
        return 0;
    switch (hdx_x86_call_before(b, ra, &where)) {
    case HDX_CALL_INDIRECT:
        return 1;
    case HDX_CALL_SLOT:
        return read_bytes(c, where, &to, sizeof to) == 0 && to == fn;
    case HDX_CALL_DIRECT:
        if (where == fn)
            return 1;
        return read_bytes(c, where, stub, sizeof stub) == 0 &&
               hdx_x86_stub_slot(stub, sizeof stub, where, &slot) == 0 &&
               read_bytes(c, slot, &to, sizeof to) == 0 && to == fn;
    default:
        return 0;
    }
}

/*
 * rbp, for a stack read without a stop, when the unwind needs it and no frame inside saved
 * it (a frame-pointer function above libc functions that leave rbp alone): the function
 * of the frame the unwind steps from keeps rbp as its frame pointer, and its prologue
 * (hdx_x86_fp_frame_size) says how far above its sp rbp lies. That counts only when the
 * word above rbp is a return address whose call goes into this very function. Tried once
 * per unwind. 0 with c->regs.rbp set, or -1.
 */
static int recover_rbp(struct unwind_ctx *c)
{
    if (c->rbp_tried || !c->as || !c->frame_ip)
        return -1;
    c->rbp_tried = 1;
    /* the function's start, from its FDE (a return address may be the last byte of its
     * function: look up the call before it) */
    unw_proc_info_t pi;
    memset(&pi, 0, sizeof pi);
    if (acc_find_proc_info(c->as, c->frame_ip - (c->frame_outer ? 1 : 0), &pi, 0, c->upt) < 0 ||
        !pi.start_ip || pi.start_ip >= c->frame_ip)
        return -1;
    uint64_t start = pi.start_ip;
    unsigned char code[128];
    size_t len = c->frame_ip - start < sizeof code ? c->frame_ip - start : sizeof code;
    if (read_bytes(c, start, code, len) < 0)
        return -1;
    long below = hdx_x86_fp_frame_size(code, len);
    uint64_t rbp = c->frame_sp + (uint64_t)below, ra;
    if (below < 0 || below > STACK_COPY || read_bytes(c, rbp + 8, &ra, sizeof ra) < 0 || !executable(c, ra) ||
        !calls_into(c, ra, start))
        return -1;
    c->regs.rbp = rbp;
    return 0;
}

static int acc_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
                          void *arg)
{
    (void)as;
    (void)arg;
    struct unwind_ctx *c = cur_ctx;
    if (write || !c)
        return -UNW_EREADONLYREG;
    const struct user_regs_struct *r = &c->regs;
    if (reg == UNW_X86_64_RBP && !(c->known & (1u << reg)) && recover_rbp(c) == 0)
        c->known |= 1u << reg;
    if (reg < 0 || reg > UNW_X86_64_RIP || !(c->known & (1u << reg)))
        return -UNW_EBADREG; /* not known without a stop: the unwind ends in error */
    switch (reg) {
    case UNW_X86_64_RAX: *val = r->rax; break;
    case UNW_X86_64_RDX: *val = r->rdx; break;
    case UNW_X86_64_RCX: *val = r->rcx; break;
    case UNW_X86_64_RBX: *val = r->rbx; break;
    case UNW_X86_64_RSI: *val = r->rsi; break;
    case UNW_X86_64_RDI: *val = r->rdi; break;
    case UNW_X86_64_RBP: *val = r->rbp; break;
    case UNW_X86_64_RSP: *val = r->rsp; break;
    case UNW_X86_64_R8: *val = r->r8; break;
    case UNW_X86_64_R9: *val = r->r9; break;
    case UNW_X86_64_R10: *val = r->r10; break;
    case UNW_X86_64_R11: *val = r->r11; break;
    case UNW_X86_64_R12: *val = r->r12; break;
    case UNW_X86_64_R13: *val = r->r13; break;
    case UNW_X86_64_R14: *val = r->r14; break;
    case UNW_X86_64_R15: *val = r->r15; break;
    case UNW_X86_64_RIP: *val = r->rip; break;
    default: return -UNW_EBADREG;
    }
    return 0;
}

static int acc_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                            void *arg)
{
    (void)as;
    (void)reg;
    (void)val;
    (void)write;
    (void)arg;
    return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
    (void)as;
    (void)c;
    (void)arg;
    return -UNW_EINVAL; /* never run code in the target */
}

static int acc_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
                             unw_word_t *off, void *arg)
{
    (void)as;
    (void)addr;
    (void)buf;
    (void)len;
    (void)off;
    (void)arg;
    return -UNW_ENOINFO; /* names come from symbols.c */
}

/* Unwind tables: over the sample's one read of /proc/PID/maps (read_maps; unwind_tables.h),
 * where _UPT_find_proc_info re-reads it whenever the unwind moves to another image. */
static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info,
                              void *arg)
{
    struct unwind_ctx *c = cur_ctx;
    if (c && !c->tables_tried) {
        c->tables = hdx_unwind_tables_new(c->pid, c->maps, c->n_maps); /* NULL: _UPT_find_proc_info alone */
        c->tables_tried = 1;
    }
    return hdx_unwind_tables_find(c ? c->tables : NULL, as, ip, pi, need_unwind_info, arg);
}

/* Memory and registers come from the copy above. */
static unw_accessors_t accessors = {
    .find_proc_info = acc_find_proc_info,
    .put_unwind_info = _UPT_put_unwind_info,
    .get_dyn_info_list_addr = _UPT_get_dyn_info_list_addr,
    .access_mem = acc_access_mem,
    .access_reg = acc_access_reg,
    .access_fpreg = acc_access_fpreg,
    .resume = acc_resume,
    .get_proc_name = acc_get_proc_name,
};

static void read_maps(struct unwind_ctx *c)
{
    if (hdx_maps_read(c->pid, &c->maps, &c->n_maps) < 0) {
        c->maps = NULL; /* no bound but STACK_COPY */
        c->n_maps = 0;
    }
}

/* Copy the stack above sp, up to the end of its mapping and STACK_COPY
 * bytes (page by page: a read stops at the first unreadable page). Runs
 * while the thread is stopped. */
static void copy_stack(struct unwind_ctx *c, int tid)
{
    uint64_t lo = c->regs.rsp > REDZONE ? c->regs.rsp - REDZONE : 0;
    uint64_t hi = lo + STACK_COPY;
    for (size_t i = 0; i < c->n_maps; i++)
        if (c->maps[i].perms[1] == 'w' && c->regs.rsp >= c->maps[i].start && c->regs.rsp < c->maps[i].end) {
            if (c->maps[i].end < hi)
                hi = c->maps[i].end;
            if (lo < c->maps[i].start)
                lo = c->maps[i].start;
            break;
        }
    struct iovec remote[STACK_COPY / PAGE + 1];
    int n = 0;
    for (uint64_t a = lo; a < hi && n < (int)(sizeof remote / sizeof remote[0]);) {
        uint64_t next = (a & ~(uint64_t)(PAGE - 1)) + PAGE;
        if (next > hi)
            next = hi;
        remote[n].iov_base = (void *)(uintptr_t)a;
        remote[n].iov_len = next - a;
        n++;
        a = next;
    }
    struct iovec local = {c->stack, STACK_COPY};
    ssize_t got = process_vm_readv(tid, &local, 1, remote, (unsigned long)n, 0);
    c->stack_lo = lo;
    c->stack_len = got > 0 ? (size_t)got : 0;
}

static void unwind(unw_addr_space_t as, void *upt, struct unwind_ctx *c, struct raw_stack *out)
{
    unw_cursor_t cursor;
    out->n = 0;
    out->end = 0;
    out->sp_backwards = 0;
    cur_ctx = c;
    int r = unw_init_remote(&cursor, as, upt);
    if (r < 0) {
        out->pc[0] = c->regs.rip; /* at least where it is */
        out->n = 1;
        out->end = r;
        goto done;
    }
    unw_word_t prev_sp = 0;
    for (;;) {
        unw_word_t ip = 0, sp = 0;
        if ((r = unw_get_reg(&cursor, UNW_REG_IP, &ip)) < 0 || ip == 0) {
            out->end = r < 0 ? r : 0;
            break;
        }
        unw_get_reg(&cursor, UNW_REG_SP, &sp);
        if (out->n > 0 && ip == out->pc[out->n - 1] && sp == prev_sp) {
            out->end = -UNW_EBADFRAME; /* no progress */
            break;
        }
        if (out->n > 0 && sp < prev_sp)
            out->sp_backwards = 1;
        prev_sp = sp;
        out->pc[out->n] = ip;
        out->signal[out->n] = unw_is_signal_frame(&cursor) > 0;
        if (++out->n >= MAX_DEPTH) {
            out->end = 1;
            break;
        }
        c->frame_ip = ip; /* for recover_rbp */
        c->frame_sp = sp;
        c->frame_outer = out->n > 1 && !out->signal[out->n - 2];
        if ((r = unw_step(&cursor)) <= 0) {
            out->end = r;
            break;
        }
    }
done:
    out->ok = 1;
    cur_ctx = NULL;
}

static char thread_state(int pid, int tid, char *wchan, size_t wsize)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    hdx_stat stat;
    char st = hdx_stat_read(path, &stat) == 0 ? stat.state : 0;
    if (wchan && wsize) {
        wchan[0] = 0;
        snprintf(path, sizeof path, "/proc/%d/task/%d/wchan", pid, tid);
        char *w = hdx_read_file(path, 256, NULL);
        if (w) {
            snprintf(wchan, wsize, "%s", w);
            free(w);
        }
    }
    return st;
}

/* The name (comm) of pid into buf, "?" when gone. */
static void comm_of(int pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    char *c = hdx_read_file(path, 256, NULL);
    if (c)
        c[strcspn(c, "\n")] = 0;
    snprintf(buf, size, "%s", c && *c ? c : "?");
    free(c);
}

/* Why ptrace is not permitted on pid, and what to do, for a note. */
static void why_not_permitted(int pid, char *buf, size_t size)
{
    int uid = hdx_proc_uid(pid), me = (int)geteuid();
    if (uid >= 0 && uid != me && me != 0) { /* root is refused for other reasons: below */
        snprintf(buf, size, "it belongs to uid %d, hangdx runs as uid %d: run hangdx as that user or as root "
                            "(or with CAP_SYS_PTRACE)", uid, me);
        return;
    }
    char *scope = hdx_read_file("/proc/sys/kernel/yama/ptrace_scope", 64, NULL);
    int sc = scope ? atoi(scope) : 0;
    free(scope);
    if (me == 0)
        snprintf(buf, size, "hangdx runs as root, so this system forbids ptrace here: a container without the "
                            "SYS_PTRACE capability, a seccomp filter%s, or kernel lockdown",
                 sc >= 3 ? ", or kernel.yama.ptrace_scope 3 (no ptrace at all)" : "");
    else if (sc > 0)
        snprintf(buf, size, "kernel.yama.ptrace_scope is %d, which lets only a parent or root trace: run "
                            "hangdx as root, or set it to 0 (sysctl kernel.yama.ptrace_scope=0)", sc);
    else
        snprintf(buf, size, "run hangdx as the same user or as root (or with CAP_SYS_PTRACE); a container "
                            "may forbid ptrace (seccomp, missing SYS_PTRACE capability)");
}

/* A thread's time on a CPU plus its time waiting for one, in ns, from
 * /proc/PID/task/TID/schedstat (proc(5): "time spent on the cpu", "time spent
 * waiting on a runqueue", "# of timeslices"); -1 when it cannot be read (a
 * kernel without CONFIG_SCHED_INFO). */
static int64_t sched_ns(int pid, int tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
    char *buf = hdx_read_file(path, 128, NULL);
    unsigned long long cpu, wait;
    int ok = buf && sscanf(buf, "%llu %llu", &cpu, &wait) == 2;
    free(buf);
    return ok ? (int64_t)(cpu + wait) : -1;
}

/*
 * Reading a thread's stack without a stop. A thread that waits in the kernel does not run,
 * and its user stack does not move while it waits; and /proc tells where it waits without
 * a stop: /proc/PID/task/TID/syscall (proc(5)) gives the system call's number and
 * arguments and the user stack pointer and instruction pointer. Such a thread is read like
 * a stopped one (copy_stack, unwind) from those alone, and /proc read again afterwards must
 * show it waiting, unmoved, all the while; otherwise (or when the unwind from so little
 * fails) it is stopped as before. A stop breaks many waits: epoll_wait, accept and recv
 * with SO_RCVTIMEO, sigtimedwait, semtimedop return EINTR to the program after it
 * (signal(7), "Interruption of system calls and library functions by stop signals"),
 * which C/C++ code may take for an error.
 */
struct blocked {
    char state;              /* 'S' or 'D' */
    long nr;                 /* the system call, -1 blocked outside one (a page fault) */
    uint64_t args[6];        /* its arguments when nr >= 0: rdi, rsi, rdx, r10, r8, r9 */
    uint64_t sp, pc;         /* user stack and instruction pointers */
    long long nvcsw, nivcsw; /* voluntary_ctxt_switches, nonvoluntary_ctxt_switches */
    int64_t sched;           /* sched_ns() */
};

/* Up to size-1 bytes of a small /proc file into buf, NUL-terminated; its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

static long long status_field(const char *status, const char *name)
{
    const char *f = strstr(status, name);
    return f ? strtoll(f + strlen(name), NULL, 10) : -1;
}

/*
 * What /proc shows of thread tid of pid now, without a stop: 1 when it waits in the kernel
 * (state S or D, traced by no one, its system call file not "running") with its stack and
 * instruction pointers known; 0 otherwise, or when something cannot be read. The status
 * comes first, then the system call, then the CPU time: a thread that ran after the status
 * was read changes it (blocked_same).
 */
static int read_blocked(int pid, int tid, struct blocked *b)
{
    char path[64], buf[2048];
    memset(b, 0, sizeof *b);
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return 0;
    const char *st = strstr(buf, "\nState:");
    if (!st)
        return 0;
    st += 7;
    while (*st == ' ' || *st == '\t')
        st++;
    b->state = *st;
    b->nvcsw = status_field(buf, "\nvoluntary_ctxt_switches:");
    b->nivcsw = status_field(buf, "\nnonvoluntary_ctxt_switches:");
    /* another tracer: the stop path says who (and a thread of ours left seized stays there) */
    if ((b->state != 'S' && b->state != 'D') || status_field(buf, "\nTracerPid:") != 0 || b->nvcsw < 0 ||
        b->nivcsw < 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", pid, tid);
    if (read_small(path, buf, sizeof buf) <= 0 || !strncmp(buf, "running", 7))
        return 0;
    /* "NR ARG0 .. ARG5 SP PC", or "-1 SP PC" for a thread blocked outside a system call */
    char *q = buf, *e;
    b->nr = strtol(q, &e, 10);
    if (e == q || b->nr < -1)
        return 0;
    uint64_t v[8];
    int n = 0;
    for (q = e; n < 8; q = e) {
        unsigned long long x = strtoull(q, &e, 16);
        if (e == q)
            break;
        v[n++] = x;
    }
    if (n != (b->nr >= 0 ? 8 : 2))
        return 0;
    if (b->nr >= 0)
        memcpy(b->args, v, sizeof b->args);
    b->sp = v[n - 2];
    b->pc = v[n - 1];
    b->sched = sched_ns(pid, tid);
    return b->sp != 0 && b->pc != 0;
}

/* The same wait, by a thread that did not run in between: nothing it shows has changed. */
static int blocked_same(const struct blocked *a, const struct blocked *b)
{
    return a->state == b->state && a->nr == b->nr && !memcmp(a->args, b->args, sizeof a->args) &&
           a->sp == b->sp && a->pc == b->pc && a->nvcsw == b->nvcsw && a->nivcsw == b->nivcsw &&
           a->sched == b->sched;
}

/* Whether pc lies in an executable mapping of c's maps. */
static int executable(const struct unwind_ctx *c, uint64_t pc)
{
    for (size_t i = 0; i < c->n_maps; i++)
        if (pc >= c->maps[i].start && pc < c->maps[i].end)
            return c->maps[i].perms[2] == 'x';
    return 0;
}

/*
 * The stack of thread tid of pid into out without stopping it, when it waits in the kernel
 * (read_blocked). The unwind starts from rip and rsp and the system call's argument
 * registers only (vfork keeps its return address in rdi): the registers a function saves
 * for its caller are taken from where the unwind tables (DWARF CFI) say they were saved. A
 * frame-pointer function's rbp that no function inside it saved (Debian's libc leaves rbp
 * alone) comes from its prologue (recover_rbp); another register that a frame needs and
 * no inner frame saved ends the unwind in error. It counts only when /proc shows the same
 * wait afterwards (blocked_same: same call, arguments, pointers, context switches and CPU
 * time), the unwind reached the outermost frame (or MAX_DEPTH), every pc lies in
 * executable memory and sp never goes down. Returns 1 with out filled, 0 when the thread
 * must be stopped instead.
 */
static int read_without_stop(unw_addr_space_t as, void *upt, struct unwind_ctx *c, int tid, struct raw_stack *out)
{
    struct blocked before, after;
    if (!c->n_maps || !read_blocked(c->pid, tid, &before))
        return 0;
    memset(&c->regs, 0, sizeof c->regs);
    c->regs.rsp = before.sp;
    c->regs.rip = before.pc;
    c->known = 1u << UNW_X86_64_RSP | 1u << UNW_X86_64_RIP;
    c->rbp_tried = 0;
    c->as = as;
    c->upt = upt;
    if (before.nr >= 0) { /* the x86-64 system call convention; rcx holds the return address */
        c->regs.rdi = before.args[0];
        c->regs.rsi = before.args[1];
        c->regs.rdx = before.args[2];
        c->regs.r10 = before.args[3];
        c->regs.r8 = before.args[4];
        c->regs.r9 = before.args[5];
        c->regs.rcx = before.pc;
        c->known |= 1u << UNW_X86_64_RDI | 1u << UNW_X86_64_RSI | 1u << UNW_X86_64_RDX | 1u << UNW_X86_64_R10 |
                    1u << UNW_X86_64_R8 | 1u << UNW_X86_64_R9 | 1u << UNW_X86_64_RCX;
    }
    copy_stack(c, tid);
    int ok = c->stack_len > 0 && read_blocked(c->pid, tid, &after) && blocked_same(&before, &after);
    if (ok) {
        unwind(as, upt, c, out);
        ok = (out->end == 0 || out->end == 1) && !out->sp_backwards && out->n >= 2;
        for (int k = 0; ok && k < out->n; k++)
            ok = executable(c, out->pc[k]);
    }
    c->known = ALL_REGS;
    c->as = NULL;
    if (!ok)
        memset(out, 0, sizeof *out);
    return ok;
}

/*
 * A thread stays stopped until hangdx, having seen the stop, copies its stack
 * and lets it go: on a loaded machine hangdx waits for a CPU in between
 * (13-20 ms measured at load 10 on 2 CPUs, for 0.1 ms of work). Where it may
 * (root, CAP_SYS_NICE), hangdx's thread runs SCHED_FIFO from the interrupt to
 * the detach only, and so is not preempted by ordinary tasks then; it never
 * spins long meanwhile (hdx_ptrace_wait_stop sleeps after 100 us). rt_state: 0
 * untried, 1 allowed, -1 refused (not tried again).
 */
static int rt_state;

static void rt_enter(void)
{
    struct sched_param sp = {.sched_priority = 1};
    if (rt_state >= 0)
        rt_state = sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0 ? 1 : -1;
}

static void rt_leave(void)
{
    struct sched_param sp = {.sched_priority = 0};
    if (rt_state > 0)
        sched_setscheduler(0, SCHED_OTHER, &sp); /* the nice value is kept */
}

/*
 * The length of the stop of a thread interrupted at t0, seen stopped at t_seen and let go
 * just now (before rt_leave(), after which hangdx may wait for a CPU), kept as the longest
 * if it is. Between the interrupt and its stop the thread runs or waits for a CPU (its
 * sleep is broken); sched0 and sched1, its sched_ns() at the interrupt and once seen
 * stopped, take that time out (under load a thread can wait tens of ms for a CPU before it
 * stops), at most up to t_seen: a running thread's CPU time is only brought up to date at
 * the scheduler's tick, so sched0 can lag by up to one. Without them (-1) the stop counts
 * from t0.
 */
static int64_t stop_ns(int64_t t0, int64_t t_seen, int64_t sched0, int64_t sched1, int64_t *max_ns)
{
    int64_t d = hdx_mono_ns() - t0;
    if (sched0 >= 0 && sched1 >= sched0)
        d -= sched1 - sched0 < t_seen - t0 ? sched1 - sched0 : t_seen - t0;
    if (d > *max_ns)
        *max_ns = d;
    return d;
}

static void rank_label(const hdx_process *p, char *buf, size_t size)
{
    if (p->rank >= 0)
        snprintf(buf, size, " (rank %d)", p->rank);
    else
        buf[0] = 0;
}

/* Drop an earlier sample's frames (merged Python frames with their locals included). */
static void free_frames(hdx_thread *t)
{
    hdx_frames_free(t->frames, t->n_frames);
    t->frames = NULL;
    t->n_frames = 0;
}

/*
 * Symbolizers kept across the samples of one capture: building one reads every module's
 * symbol table and decompresses its debug info (about 0.2 s for python3.11), the same for
 * each sample. Keyed by pid and start time, so a reused pid never gets another's symbols.
 * They share sym_shared: the ranks of a job run the same binaries, whose symbols and
 * DWARF are then read once per capture, not once per rank.
 */
#define SYM_CACHE 64
static struct {
    int pid;
    uint64_t start_ticks;
    hdx_symbolizer *sym;
} sym_cache[SYM_CACHE];
static hdx_symcache *sym_shared;
static int native_lines = 1;

void hdx_stacks_set_native_lines(int on)
{
    native_lines = on;
}

static int always_stop;

void hdx_stacks_set_always_stop(int on)
{
    always_stop = on;
}

static hdx_symbolizer *symbolizer_for(const hdx_process *p)
{
    for (size_t i = 0; i < SYM_CACHE; i++)
        if (sym_cache[i].sym && sym_cache[i].pid == p->pid && sym_cache[i].start_ticks == p->start_ticks)
            return sym_cache[i].sym;
    if (!sym_shared)
        sym_shared = hdx_symcache_new(native_lines); /* NULL: each process on its own, with lines */
    hdx_symbolizer *s = hdx_symbolizer_new_shared(p->pid, sym_shared);
    for (size_t i = 0; s && i < SYM_CACHE; i++)
        if (!sym_cache[i].sym) {
            sym_cache[i].pid = p->pid;
            sym_cache[i].start_ticks = p->start_ticks;
            sym_cache[i].sym = s;
            return s;
        }
    return s; /* the cache is full: the caller frees it (see below) */
}

static int cached(const hdx_symbolizer *s)
{
    for (size_t i = 0; i < SYM_CACHE; i++)
        if (sym_cache[i].sym == s)
            return 1;
    return 0;
}

int hdx_stacks_release_orphans(void)
{
    return hdx_ptrace_sweep();
}

void hdx_stacks_forget(void)
{
    hdx_ptrace_sweep();
    for (size_t i = 0; i < SYM_CACHE; i++) {
        hdx_symbolizer_free(sym_cache[i].sym);
        sym_cache[i].sym = NULL;
    }
    hdx_symcache_free(sym_shared);
    sym_shared = NULL;
}

int hdx_stacks_sample(hdx_process *p, hdx_evidence *ev, int timeout_ms)
{
    int rc = 0, n_ok = 0, n_perm = 0, n_gone = 0, first_err = 0, n_stops = 0;
    int noted_perm = 0, noted_busy = 0;
    int64_t stopped_ns = 0, max_stop_ns = 0;
    char rl[32];
    rank_label(p, rl, sizeof rl);
    struct raw_stack *raw = NULL;
    struct unwind_ctx ctx = {.pid = p->pid, .known = ALL_REGS};
    unw_addr_space_t as = NULL;
    void *upt = NULL;
    hdx_symbolizer *sym = NULL;

    hdx_ptrace_sweep();
    if (p->n_threads == 0)
        return -ESRCH;
    raw = calloc(p->n_threads, sizeof *raw);
    ctx.stack = malloc(STACK_COPY);
    ctx.cache = calloc(CACHE_PAGES, sizeof *ctx.cache);
    as = unw_create_addr_space(&accessors, 0);
    upt = _UPT_create(p->pid);
    if (!raw || !ctx.stack || !ctx.cache || !as || !upt) {
        rc = -ENOMEM;
        goto out;
    }
    unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
    read_maps(&ctx);
    /* Threads in uninterruptible sleep share one wait of timeout_ms: a process
     * with many of them (all on one NFS server) still costs at most that. */
    int64_t d_deadline = hdx_mono_ns() + (int64_t)timeout_ms * 1000000;

    for (size_t i = 0; i < p->n_threads; i++) {
        hdx_thread *t = &p->threads[i];
        int tid = t->tid;
        char wchan[128];
        t->stack_error = 0;

        /* A thread in uninterruptible sleep would not stop: give it the
         * timeout to leave D before seizing, so it is never left seized. */
        char st = thread_state(p->pid, tid, wchan, sizeof wchan);
        if (st == 0 || st == 'Z' || st == 'X') {
            t->stack_error = -ESRCH;
            n_gone++;
            continue;
        }
        /* Waiting in the kernel: read without a stop if /proc shows it unmoved throughout. */
        if ((st == 'S' || st == 'D') && !always_stop && read_without_stop(as, upt, &ctx, tid, &raw[i])) {
            n_ok++;
            continue;
        }
        if (st == 'D') {
            while (st == 'D' && hdx_mono_ns() < d_deadline) {
                hdx_sleep_ms(1);
                st = thread_state(p->pid, tid, wchan, sizeof wchan);
            }
            if (st == 'D') {
                t->stack_error = -ETIMEDOUT;
                hdx_evidence_note(ev, "thread %d (%s) of %d%s stayed in uninterruptible sleep (state D, "
                                  "wchan %s) through the %d ms a sample gives its process's D threads: not "
                                  "stopped, no native stack",
                                  tid, t->name ? t->name : "?", p->pid, rl,
                                  wchan[0] ? wchan : "?", timeout_ms);
                if (!first_err)
                    first_err = -ETIMEDOUT;
                continue;
            }
        }

        int tracer = 0;
        int r = hdx_ptrace_seize(p->pid, tid, 0, &tracer);
        if (r < 0) {
            t->stack_error = r;
            if (r == -ESRCH) {
                n_gone++; /* ended meanwhile: skip quietly */
            } else if (r == -EPERM) {
                n_perm++;
                if (!noted_perm++) {
                    char why[256];
                    why_not_permitted(p->pid, why, sizeof why);
                    hdx_evidence_note(ev, "cannot attach to %d%s: ptrace not permitted, no native stacks — "
                                      "%s", p->pid, rl, why);
                }
            } else if (r == -EBUSY) {
                n_perm++;
                if (!noted_busy++) {
                    char name[64];
                    comm_of(tracer, name, sizeof name);
                    hdx_evidence_note(ev, "cannot attach to %d%s: PID %d is traced by PID %d (%s) — no "
                                      "native stacks while it is attached; detach it (quit gdb, stop "
                                      "strace) and retry. /proc facts and Python frames are still read",
                                      p->pid, rl, p->pid, tracer, name);
                }
            } else if (!first_err) {
                first_err = r;
            }
            continue;
        }
        int64_t sched0 = sched_ns(p->pid, tid), sched1 = -1;
        rt_enter();
        int64_t t0 = hdx_mono_ns();
        if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0) {
            rt_leave();
            hdx_ptrace_release(tid, timeout_ms);
            t->stack_error = -ESRCH;
            n_gone++;
            continue;
        }
        n_stops++;
        int status;
        int w = hdx_ptrace_wait_stop(tid, timeout_ms, &status);
        if (w < 0) {
            rt_leave();
            t->stack_error = -ESRCH;
            n_gone++;
            continue;
        }
        if (w == 0) {
            char state = thread_state(p->pid, tid, wchan, sizeof wchan);
            int rel = hdx_ptrace_release(tid, 0);
            stopped_ns += stop_ns(t0, t0, -1, -1, &max_stop_ns);
            rt_leave();
            t->stack_error = -ETIMEDOUT;
            if (!first_err)
                first_err = -ETIMEDOUT;
            hdx_evidence_note(ev, "thread %d (%s) of %d%s did not stop within %d ms (state %c, "
                              "wchan %s): no native stack%s",
                              tid, t->name ? t->name : "?", p->pid, rl, timeout_ms,
                              state ? state : '?', wchan[0] ? wchan : "?",
                              rel == -ETIMEDOUT ? "; it stays seized until it wakes or hangdx "
                                                  "exits" : "");
            continue;
        }
        /* Stopped: take registers and a copy of the stack, let go at once. */
        int64_t t_seen = hdx_mono_ns();
        sched1 = sched_ns(p->pid, tid);
        if (ptrace(PTRACE_GETREGS, tid, 0, &ctx.regs) < 0) {
            r = -errno;
            hdx_ptrace_detach(tid);
            stopped_ns += stop_ns(t0, t_seen, sched0, sched1, &max_stop_ns);
            rt_leave();
            t->stack_error = r;
            if (!first_err)
                first_err = r;
            continue;
        }
        copy_stack(&ctx, tid);
        hdx_ptrace_detach(tid);
        stopped_ns += stop_ns(t0, t_seen, sched0, sched1, &max_stop_ns);
        rt_leave();

        unwind(as, upt, &ctx, &raw[i]);
        n_ok++;
    }
    hdx_ptrace_sweep();

    p->n_stopped += n_stops;
    if (stopped_ns > 0 || n_ok > 0) {
        if (p->stopped_us == HDX_UNKNOWN)
            p->stopped_us = 0; /* known: every thread read without a stop is 0 us */
        p->stopped_us += stopped_ns / 1000;
        if (max_stop_ns / 1000 > p->max_stop_us)
            p->max_stop_us = max_stop_ns / 1000;
    }

    /* Every thread runs again: now symbolize. */
    if (n_ok > 0) {
        sym = symbolizer_for(p);
        if (!sym)
            hdx_evidence_note(ev, "cannot read the symbols of %d%s (%s): frames have "
                              "addresses only", p->pid, rl, strerror(errno));
    }
    for (size_t i = 0; i < p->n_threads; i++) {
        if (!raw[i].ok)
            continue;
        hdx_thread *t = &p->threads[i];
        free_frames(t);
        for (int k = 0; k < raw[i].n; k++) {
            hdx_frame *f = hdx_thread_add_frame(t);
            if (!f) {
                rc = -ENOMEM;
                goto out;
            }
            f->kind = HDX_FRAME_NATIVE;
            f->pc = raw[i].pc[k];
            /* Caller frames hold return addresses, except right above a
             * signal frame, where the interrupted pc is exact. */
            int is_return = k > 0 && !raw[i].signal[k - 1];
            if (sym)
                hdx_symbolize(sym, f, is_return);
        }
    }

    if (n_ok == 0)
        rc = n_perm ? (noted_perm ? -EPERM : -EBUSY) : first_err ? first_err : n_gone ? -ESRCH : -EIO;
out:
    if (!cached(sym))
        hdx_symbolizer_free(sym);
    if (upt)
        _UPT_destroy(upt);
    if (as)
        unw_destroy_addr_space(as);
    hdx_unwind_tables_free(ctx.tables);
    hdx_maps_free(ctx.maps, ctx.n_maps);
    free(ctx.cache);
    free(ctx.stack);
    free(raw);
    return rc;
}

void hdx_stacks_emergency_detach(void)
{
    hdx_ptrace_detach_all();
}

/* ---- facts of a live thread (proc(5)) ---- */

int hdx_proc_ns_pid(int pid, int tid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
    char *s = hdx_read_file(path, 8192, NULL);
    if (!s)
        return HDX_UNKNOWN;
    int v = HDX_UNKNOWN;
    char *l = strstr(s, "\nNSpid:");
    for (char *q = l ? l + 7 : NULL, *end; q; q = end) {
        long x = strtol(q, &end, 10);
        if (end == q)
            break;
        v = (int)x;
    }
    free(s);
    return v;
}

int hdx_proc_uid(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    char *s = hdx_read_file(path, (1 << 16), NULL);
    if (!s)
        return -1;
    char *u = strstr(s, "\nUid:");
    int uid = u ? atoi(u + 5) : -1;
    free(s);
    return uid;
}
