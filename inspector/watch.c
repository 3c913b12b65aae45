/*
 * Progress of a running job: CPU time of the tree under hangdx (proc(5)
 * /proc/PID/stat fields 14-17 and 22) and new non-"wait" events in the shim's
 * trace files (include/hangdx/trace.h).
 */
#include "watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hangdx/trace.h"
#include "proc.h"

#define CPU_RING 64 /* ticks of CPU history kept; more than any window at one tick a second */

struct cpu_entry {
    int pid;
    uint64_t start; /* field 22: tells a reused pid apart */
    uint64_t ticks; /* utime + stime + cutime + cstime */
};

struct trace_file {
    char *name;
    ino_t ino;
    off_t off; /* end of the last complete line read */
};

struct hdx_watch {
    char *trace_dir;
    double window_s, cpu_share;
    long clk_tck;
    int have_base;
    struct cpu_entry *prev;
    size_t n_prev;
    struct { double t; double ms; } ring[CPU_RING];
    size_t ring_next, ring_n;
    struct trace_file *traces;
    size_t n_traces, cap_traces;
};

hdx_watch *hdx_watch_new(const char *trace_dir, double window_s, double cpu_share)
{
    hdx_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (trace_dir && !(w->trace_dir = strdup(trace_dir))) {
        free(w);
        return NULL;
    }
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

/* State letter and the CPU fields of pid; 0, or -errno when it is gone. */
static int read_stat(int pid, char *state, struct cpu_entry *e)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -ESRCH;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -EINVAL;
    p += 2;
    /* p is field 3 (state); we want 14-17 and 22. */
    unsigned long long f[23] = {0};
    *state = *p;
    for (int field = 3; field <= 22 && *p; field++) {
        if (field > 3)
            f[field] = strtoull(p, NULL, 10);
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
    }
    e->pid = pid;
    e->start = f[22];
    e->ticks = f[14] + f[15] + f[16] + f[17];
    return 0;
}

int hdx_watch_job_pids(int **pids, size_t *n)
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
        if (all[i] != self && read_stat(all[i], &st, &e) == 0 && st != 'Z' && st != 'X')
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

/* CPU used since the last sample, in ms; -1 when the tree cannot be listed. */
static double cpu_delta_ms(hdx_watch *w)
{
    int self = (int)getpid(), *all = NULL;
    size_t n_all = 0;
    if (hdx_proc_descendants(&self, 1, &all, &n_all) != 0)
        return -1;
    struct cpu_entry *cur = calloc(n_all ? n_all : 1, sizeof *cur);
    if (!cur) {
        free(all);
        return -1;
    }
    size_t n = 0;
    uint64_t grown = 0;
    for (size_t i = 0; i < n_all; i++) {
        char st;
        if (all[i] == self || read_stat(all[i], &st, &cur[n]) != 0)
            continue;
        const struct cpu_entry *old =
            w->prev ? bsearch(&cur[n], w->prev, w->n_prev, sizeof *w->prev, by_pid) : NULL;
        if (old && old->start == cur[n].start)
            grown += cur[n].ticks > old->ticks ? cur[n].ticks - old->ticks : 0;
        else if (w->have_base)
            grown += cur[n].ticks; /* a new process: all it used is new */
        n++;
    }
    free(all);
    qsort(cur, n, sizeof *cur, by_pid);
    free(w->prev);
    w->prev = cur;
    w->n_prev = n;
    if (!w->have_base) {
        w->have_base = 1;
        return 0;
    }
    return (double)grown * 1000.0 / (double)w->clk_tck;
}

static int cpu_progress(hdx_watch *w, double now_s)
{
    int first = !w->have_base && w->n_prev == 0;
    double ms = cpu_delta_ms(w);
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
    int fd = openat(dirfd, t->name, O_RDONLY | O_CLOEXEC);
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

static int trace_progress(hdx_watch *w)
{
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
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
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
    return cpu_progress(w, now_s) | trace_progress(w);
}
