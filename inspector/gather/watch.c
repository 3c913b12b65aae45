/*
 * Progress of a running job: CPU time of the tree under hangdx (proc(5)
 * /proc/PID/stat fields 4, 14-17 and 22), the bytes it wrote (/proc/PID/io
 * wchar) less the growth of the shim's trace files, new non-"wait" events in
 * those files (include/hangdx/trace.h), and, on demand, whether a process's
 * main thread moved in Python (python.h: memory reads only, no stop).
 */
#include "gather/watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hangdx/fnv.h"
#include "hangdx/trace.h"
#include "gather/proc.h"
#include "python/python.h"

#define CPU_RING 64 /* ticks of CPU history kept; more than any window at one tick a second */

struct cpu_entry {
    int pid;
    int ppid;       /* field 4 */
    uint64_t start; /* field 22: tells a reused pid apart */
    uint64_t ticks; /* utime + stime + cutime + cstime */
    uint64_t own;   /* utime + stime: a thread's own, without the children reaped */
    int has_wchar;  /* wchar was read (/proc/PID/io is ours to read) */
    int same;       /* the process of the last sample too (pid and start) */
    uint64_t wchar; /* /proc/PID/io: bytes written, the children it reaped included */
    uint64_t dw;    /* of them, written since the last sample */
};

struct trace_file {
    char *name;
    ino_t ino;
    off_t off; /* end of the last complete line read */
};

/* One process of the job as the Python check last saw it. */
struct py_entry {
    int pid;
    uint64_t start;      /* field 22 */
    uint64_t stack_top;  /* field 28, startstack: placed anew by every exec (ASLR), so a changed
                            value says the attachment below belongs to an image that is gone */
    hdx_pyproc *py;      /* NULL: not attached (yet) */
    int not_python;      /* attaching failed for good (not Python, not permitted, unknown version) */
    int have;            /* hash, main_ticks and t hold a read */
    uint64_t hash;       /* the main thread's Python frames: functions, files, lines */
    uint64_t main_ticks; /* the main thread's utime + stime then */
    double t;            /* monotonic s of that read */
    int seen;            /* listed in the current pass */
};

struct hdx_watch {
    char *trace_dir;
    int helper; /* never counted (hdx_watch_new) */
    double window_s, cpu_share;
    long clk_tck;
    int have_base;
    int have_io;       /* prev holds a sample of wchar */
    long long traces_before; /* trace files' total size before the last sample of the tree; -1 unknown */
    struct cpu_entry *prev;
    size_t n_prev;
    struct { double t; double ms; } ring[CPU_RING];
    size_t ring_next, ring_n;
    struct trace_file *traces;
    size_t n_traces, cap_traces;
    struct py_entry *py;
    size_t n_py, cap_py;
};

hdx_watch *hdx_watch_new(const char *trace_dir, int helper, double window_s, double cpu_share)
{
    hdx_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (trace_dir && !(w->trace_dir = strdup(trace_dir))) {
        free(w);
        return NULL;
    }
    w->helper = helper;
    w->traces_before = -1;
    w->window_s = window_s > 0 ? window_s : 1;
    w->cpu_share = cpu_share;
    w->clk_tck = sysconf(_SC_CLK_TCK);
    if (w->clk_tck <= 0)
        w->clk_tck = 100;
    return w;
}

void hdx_watch_free(hdx_watch *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_traces; i++)
        free(w->traces[i].name);
    free(w->traces);
    for (size_t i = 0; i < w->n_py; i++)
        hdx_py_detach(w->py[i].py);
    free(w->py);
    free(w->prev);
    free(w->trace_dir);
    free(w);
}

void hdx_watch_rebase(hdx_watch *w)
{
    if (!w)
        return;
    w->have_base = 0;
    w->ring_n = w->ring_next = 0;
}

/* State letter and the CPU fields of pid (*stack_top: field 28, may be NULL); 0, or -errno when
 * it is gone. */
static int read_stat_at(const char *path, int pid, char *state, struct cpu_entry *e, uint64_t *stack_top)
{
    hdx_stat st;
    int rc = hdx_stat_read(path, &st);
    if (rc < 0)
        return rc;
    const unsigned long long *f = st.f;
    *state = st.state;
    e->pid = pid;
    e->ppid = (int)f[4];
    e->start = f[22];
    e->ticks = f[14] + f[15] + f[16] + f[17];
    e->own = f[14] + f[15];
    if (stack_top)
        *stack_top = f[28];
    return 0;
}

static int read_stat(int pid, char *state, struct cpu_entry *e)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    return read_stat_at(path, pid, state, e, NULL);
}

int hdx_watch_job_pids(int skip, int **pids, size_t *n)
{
    int self = (int)getpid(), *all = NULL;
    size_t n_all = 0, k = 0;
    *pids = NULL;
    *n = 0;
    int rc = hdx_proc_descendants(&self, 1, &all, &n_all);
    if (rc)
        return rc;
    for (size_t i = 0; i < n_all; i++) {
        struct cpu_entry e;
        char st;
        if (all[i] != self && (skip <= 0 || all[i] != skip) && read_stat(all[i], &st, &e) == 0 && st != 'Z' &&
            st != 'X')
            all[k++] = all[i];
    }
    if (k == 0) {
        free(all);
        return 0;
    }
    *pids = all;
    *n = k;
    return 0;
}

static int by_pid(const void *a, const void *b)
{
    const struct cpu_entry *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* wchar of pid (/proc/PID/io) into *v; 0, or -errno (EACCES: not ours to read; ESRCH: gone). */
static int read_wchar(int pid, uint64_t *v)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/io", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int e = errno;
    close(fd);
    if (n <= 0)
        return n < 0 ? -e : -ESRCH;
    buf[n] = '\0';
    char *p = strstr(buf, "wchar:");
    if (!p)
        return -EINVAL;
    *v = strtoull(p + 6, NULL, 10);
    return 0;
}

/*
 * One look at the tree (zombies included: a zombie's counters are its last ones, and its
 * parent takes them on only when it reaps it): the CPU it used since the last look into
 * *cpu_ms (-1 when the tree cannot be listed), and the bytes it wrote since then into
 * *written (-1 when unknown; 0 at the first look, the baseline).
 */
static void sample_tree(hdx_watch *w, double *cpu_ms, long long *written)
{
    int self = (int)getpid(), *all = NULL;
    size_t n_all = 0;
    *cpu_ms = -1;
    *written = -1;
    if (hdx_proc_descendants(&self, 1, &all, &n_all) != 0)
        return;
    struct cpu_entry *cur = calloc(n_all ? n_all : 1, sizeof *cur);
    if (!cur) {
        free(all);
        return;
    }
    size_t n = 0;
    uint64_t grown = 0;
    for (size_t i = 0; i < n_all; i++) {
        char st;
        if (all[i] == self || (w->helper > 0 && all[i] == w->helper) || read_stat(all[i], &st, &cur[n]) != 0)
            continue;
        struct cpu_entry *c = &cur[n];
        c->has_wchar = read_wchar(c->pid, &c->wchar) == 0;
        const struct cpu_entry *old =
            w->prev ? bsearch(c, w->prev, w->n_prev, sizeof *w->prev, by_pid) : NULL;
        c->same = old && old->start == c->start;
        if (c->same)
            grown += c->ticks > old->ticks ? c->ticks - old->ticks : 0;
        else if (w->have_base)
            grown += c->ticks; /* a new process: all it used is new */
        if (c->same && old->has_wchar && c->has_wchar)
            c->dw = c->wchar > old->wchar ? c->wchar - old->wchar : 0;
        else if (!c->same && w->have_io && c->has_wchar)
            c->dw = c->wchar; /* a new process: all it wrote is new */
        n++;
    }
    free(all);
    qsort(cur, n, sizeof *cur, by_pid);
    /* A process that went away was reaped; when its parent is a process of the job, the
     * parent's wchar just took on the child's, which was counted already up to the last look. */
    for (size_t i = 0; w->have_io && i < w->n_prev; i++) {
        const struct cpu_entry *old = &w->prev[i];
        struct cpu_entry *now = bsearch(old, cur, n, sizeof *cur, by_pid);
        if ((now && now->start == old->start) || !old->has_wchar)
            continue;
        struct cpu_entry key = {.pid = old->ppid};
        struct cpu_entry *parent = bsearch(&key, cur, n, sizeof *cur, by_pid);
        if (parent && parent->same)
            parent->dw -= parent->dw < old->wchar ? parent->dw : old->wchar;
    }
    unsigned long long sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += cur[i].dw;
    free(w->prev);
    w->prev = cur;
    w->n_prev = n;
    *written = w->have_io ? (long long)sum : 0;
    w->have_io = 1;
    if (!w->have_base) {
        w->have_base = 1;
        *cpu_ms = 0;
        return;
    }
    *cpu_ms = (double)grown * 1000.0 / (double)w->clk_tck;
}

static int cpu_progress(hdx_watch *w, double now_s, int first, double ms)
{
    if (ms < 0)
        return 0;
    if (first)
        return HDX_WATCH_CPU; /* the job just started */
    w->ring[w->ring_next].t = now_s;
    w->ring[w->ring_next].ms = ms;
    w->ring_next = (w->ring_next + 1) % CPU_RING;
    if (w->ring_n < CPU_RING)
        w->ring_n++;
    double sum = 0;
    for (size_t i = 0; i < w->ring_n; i++)
        if (w->ring[i].t > now_s - w->window_s - 1e-3)
            sum += w->ring[i].ms;
    return sum >= w->cpu_share * w->window_s * 1000.0 ? HDX_WATCH_CPU : 0;
}

/* Read the complete lines after t->off; 1 when one is an event other than "wait". */
static int trace_lines(int dirfd, struct trace_file *t, off_t size)
{
    int fd = openat(dirfd, t->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int progress = 0;
    char buf[65536];
    static const char wait_prefix[] = "{\"type\":\"" HDX_EV_WAIT "\"";
    while (t->off < size) {
        ssize_t n = pread(fd, buf, sizeof buf, t->off);
        if (n <= 0)
            break;
        char *line = buf, *end = buf + n, *nl;
        while ((nl = memchr(line, '\n', (size_t)(end - line)))) {
            size_t len = (size_t)(nl - line);
            if (len && !(len >= sizeof wait_prefix - 1 && !memcmp(line, wait_prefix, sizeof wait_prefix - 1)))
                progress = 1;
            line = nl + 1;
        }
        if (line == buf) {
            /* No newline in a whole buffer: a line longer than any the shim writes. */
            if (n == (ssize_t)sizeof buf) {
                t->off += n;
                progress = 1;
                continue;
            }
            break; /* a line still being written: read it next time */
        }
        t->off += line - buf;
    }
    close(fd);
    return progress;
}

/*
 * The trace files: their total size into *bytes (0 when there is no trace directory or it
 * cannot be read), and, when lines is set, HDX_WATCH_TRACE when one got an event other than
 * "wait" since the last call.
 */
static int trace_scan(hdx_watch *w, int lines, long long *bytes)
{
    *bytes = 0;
    if (!w->trace_dir)
        return 0;
    DIR *d = opendir(w->trace_dir);
    if (!d)
        return 0;
    int progress = 0;
    size_t suffix = strlen(HDX_TRACE_SUFFIX);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= suffix || strcmp(de->d_name + len - suffix, HDX_TRACE_SUFFIX))
            continue;
        struct stat st;
        /* Only our own regular files (as traces.c): another user's lines are no progress of ours. */
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        *bytes += (long long)st.st_size;
        if (!lines)
            continue;
        struct trace_file *t = NULL;
        for (size_t i = 0; i < w->n_traces && !t; i++)
            if (!strcmp(w->traces[i].name, de->d_name))
                t = &w->traces[i];
        if (!t) {
            if (w->n_traces == w->cap_traces) {
                size_t cap = w->cap_traces ? 2 * w->cap_traces : 32;
                struct trace_file *nt = realloc(w->traces, cap * sizeof *nt);
                if (!nt)
                    break;
                w->traces = nt;
                w->cap_traces = cap;
            }
            t = &w->traces[w->n_traces];
            if (!(t->name = strdup(de->d_name)))
                break;
            t->ino = st.st_ino;
            t->off = 0;
            w->n_traces++;
        }
        if (t->ino != st.st_ino || st.st_size < t->off) { /* replaced or truncated */
            t->ino = st.st_ino;
            t->off = 0;
        }
        if (st.st_size > t->off && trace_lines(dirfd(d), t, st.st_size))
            progress = HDX_WATCH_TRACE;
    }
    closedir(d);
    return progress;
}

int hdx_watch_tick(hdx_watch *w, double now_s)
{
    if (!w)
        return 0;
    /* The trace files' size before and after the tree is read: the shim's lines written since
     * the last look are at most after - (before, last time), whichever process wrote them. */
    long long before, after, written;
    double ms;
    int first = !w->have_base && w->n_prev == 0;
    int kinds = trace_scan(w, 1, &before);
    sample_tree(w, &ms, &written);
    trace_scan(w, 0, &after);
    kinds |= cpu_progress(w, now_s, first, ms);
    if (written > 0 && w->traces_before >= 0 && after >= w->traces_before && written > after - w->traces_before)
        kinds |= HDX_WATCH_OUTPUT;
    w->traces_before = before;
    return kinds;
}

/* ------------------------------------------------ the Python check */

/* FNV-1a of s with its terminating NUL (NULL: as ""), continued from h. */
static uint64_t fnv_str(uint64_t h, const char *s)
{
    return s ? hdx_fnv1a(s, strlen(s) + 1, h) : hdx_fnv1a("", 1, h);
}

/*
 * The main thread of a read: the thread state whose kernel TID is the pid;
 * when no TID is known, the last thread state of the main interpreter (CPython
 * puts each new thread state at the head of the list, so the first one, the
 * main thread's, ends it). NULL when there is none (not initialised yet, or
 * finalised).
 */
static const hdx_py_thread *main_thread(const hdx_py_sample *s, int pid)
{
    const hdx_py_thread *last = NULL;
    for (size_t i = 0; i < s->n_threads; i++) {
        if (s->threads[i].tid == pid)
            return &s->threads[i];
        if (s->threads[i].interp_id == 0)
            last = &s->threads[i];
    }
    for (size_t i = 0; i < s->n_threads; i++)
        if (s->threads[i].tid >= 0 && s->threads[i].interp_id == 0)
            return NULL; /* TIDs are known and none is the pid: the main thread is not Python's */
    return last;
}

static struct py_entry *py_entry_of(hdx_watch *w, int pid)
{
    for (size_t i = 0; i < w->n_py; i++)
        if (w->py[i].pid == pid)
            return &w->py[i];
    if (w->n_py == w->cap_py) {
        size_t cap = w->cap_py ? 2 * w->cap_py : 16;
        struct py_entry *n = realloc(w->py, cap * sizeof *n);
        if (!n)
            return NULL;
        w->py = n;
        w->cap_py = cap;
    }
    struct py_entry *e = &w->py[w->n_py++];
    memset(e, 0, sizeof *e);
    e->pid = pid;
    return e;
}

/*
 * Read pid's main-thread Python stack into e. 1 when it moved since e's last
 * read while the main thread used at least cpu_share of a core; 0 when not (or
 * this is the first read); -1 when no Python stack could be read.
 */
static int py_check_one(hdx_watch *w, struct py_entry *e, double now_s)
{
    char path[64], st;
    struct cpu_entry proc, main;
    uint64_t stack_top = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", e->pid);
    if (read_stat_at(path, e->pid, &st, &proc, &stack_top) != 0 || st == 'Z' || st == 'X')
        return -1;
    if (e->start != proc.start || e->stack_top != stack_top) { /* another process, or an exec */
        hdx_py_detach(e->py);
        e->py = NULL;
        e->not_python = e->have = 0;
        e->start = proc.start;
        e->stack_top = stack_top;
    }
    if (e->not_python)
        return -1;
    if (!e->py) {
        char *err = NULL;
        e->py = hdx_py_attach(e->pid, &err);
        int why = errno;
        free(err);
        if (!e->py) {
            /* Not Python, not ours to read, or a Python this reader does not know: not worth
             * asking again until the process execs. Other failures (a torn read while the
             * interpreter starts) are tried again at the next check. */
            e->not_python = why == ENOENT || why == EPERM || why == EACCES || why == ENOTSUP;
            return -1;
        }
    }
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", e->pid, e->pid);
    if (read_stat_at(path, e->pid, &st, &main, NULL) != 0)
        return -1;
    hdx_py_sample s = {0};
    if (hdx_py_read(e->py, 0, &s) != 0) {
        hdx_py_detach(e->py); /* perhaps an image the reader no longer fits: attach anew */
        e->py = NULL;
        e->have = 0;
        return -1;
    }
    const hdx_py_thread *t = main_thread(&s, e->pid);
    if (!t || t->n_frames == 0) {
        hdx_py_sample_clear(&s);
        e->have = 0;
        return -1;
    }
    uint64_t h = HDX_FNV1A_OFFSET_BASIS;
    for (size_t i = 0; i < t->n_frames; i++) {
        h = fnv_str(h, t->frames[i].function);
        h = fnv_str(h, t->frames[i].file);
        h = hdx_fnv1a(&t->frames[i].line, sizeof t->frames[i].line, h);
    }
    h = hdx_fnv1a(&t->partial, sizeof t->partial, h);
    hdx_py_sample_clear(&s);
    int moved = 0;
    if (e->have && h != e->hash && main.own >= e->main_ticks) {
        double used_ms = (double)(main.own - e->main_ticks) * 1000.0 / (double)w->clk_tck;
        moved = used_ms >= w->cpu_share * (now_s - e->t) * 1000.0;
    }
    e->have = 1;
    e->hash = h;
    e->main_ticks = main.own;
    e->t = now_s;
    return moved;
}

int hdx_watch_python(hdx_watch *w, double now_s, size_t *n_read)
{
    size_t read_ok = 0;
    int moved = 0, *pids = NULL;
    size_t n = 0;
    if (n_read)
        *n_read = 0;
    if (!w)
        return 0;
    int rc = hdx_watch_job_pids(w->helper, &pids, &n);
    if (rc)
        return rc;
    for (size_t i = 0; i < w->n_py; i++)
        w->py[i].seen = 0;
    for (size_t i = 0; i < n; i++) {
        struct py_entry *e = py_entry_of(w, pids[i]);
        if (!e) {
            rc = -ENOMEM;
            break;
        }
        e->seen = 1;
        int r = py_check_one(w, e, now_s);
        if (r >= 0)
            read_ok++;
        if (r > 0)
            moved = HDX_WATCH_PYTHON;
    }
    free(pids);
    /* Processes that ended: their attachments go. */
    size_t k = 0;
    for (size_t i = 0; i < w->n_py; i++) {
        if (w->py[i].seen || rc) {
            w->py[k++] = w->py[i];
            continue;
        }
        hdx_py_detach(w->py[i].py);
    }
    w->n_py = k;
    if (n_read)
        *n_read = read_ok;
    return rc ? rc : moved;
}
