#include "gather/proc.h"
#include "gather/nspath.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/traces.h" /* hdx_trace_host */
#include "model/util.h"
#include "native/stacks.h" /* hdx_proc_ns_pid */

#define SMALL_FILE (1 << 16)
#define BIG_FILE (4 << 20) /* cmdline, environ */

/* ---- helpers ---------------------------------------------------------- */

static int neg_errno(void)
{
    return errno ? -errno : -EIO;
}

static int parse_pid(const char *s)
{
    if (!*s)
        return -1;
    long v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s) || v > INT_MAX / 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return (int)v;
}

static char *read_link(const char *path)
{
    char buf[PATH_MAX];
    ssize_t r = readlink(path, buf, sizeof buf - 1);
    if (r < 0)
        return NULL;
    buf[r] = 0;
    return strdup(buf);
}

static char *read_trimmed(const char *path)
{
    char *s = hdx_read_file(path, SMALL_FILE, NULL);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = 0;
    return s;
}

static long clk_tck(void)
{
    static long t;
    if (!t) {
        t = sysconf(_SC_CLK_TCK);
        if (t <= 0)
            t = 100;
    }
    return t;
}

static double uptime_s(void)
{
    char *s = hdx_read_file("/proc/uptime", 256, NULL);
    double u = -1;
    if (s) {
        u = strtod(s, NULL);
        free(s);
    }
    return u;
}

/* ---- descendants ------------------------------------------------------ */

struct pidset {
    int *v;
    size_t n;
};

static int pidset_has(const struct pidset *s, int pid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == pid)
            return 1;
    return 0;
}

static int pidset_add(struct pidset *s, int pid)
{
    if (pidset_has(s, pid))
        return 0;
    int *e = hdx_append((void **)&s->v, &s->n, sizeof *e);
    if (!e)
        return -ENOMEM;
    *e = pid;
    return 0;
}

/* Does this kernel have /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)? */
static int have_children_files(void)
{
    static int have = -1;
    if (have < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
        have = access(path, F_OK) == 0;
    }
    return have;
}

/* Children of pid from /proc/PID/task/TID/children. 0 or -errno. */
static int children_files(int pid, struct pidset *out)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return neg_errno();
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) && rc == 0) {
        int tid = parse_pid(de->d_name);
        if (tid <= 0)
            continue;
        char cpath[96];
        snprintf(cpath, sizeof cpath, "/proc/%d/task/%d/children", pid, tid);
        char *s = hdx_read_file(cpath, BIG_FILE, NULL);
        if (!s)
            continue; /* the thread ended */
        char *save = NULL;
        for (char *tok = strtok_r(s, " \n", &save); tok && rc == 0;
             tok = strtok_r(NULL, " \n", &save)) {
            int c = parse_pid(tok);
            if (c > 0)
                rc = pidset_add(out, c);
        }
        free(s);
    }
    closedir(d);
    return rc;
}

/* Children of pid by a scan of every process's ppid (field 4). */
static int children_scan(int pid, struct pidset *out)
{
    DIR *d = opendir("/proc");
    if (!d)
        return neg_errno();
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        int q = parse_pid(de->d_name);
        if (q <= 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", q);
        hdx_stat sl;
        if (hdx_stat_read(path, &sl) < 0)
            continue;
        if ((int)sl.f[4] == pid)
            rc = pidset_add(out, q);
        if (rc < 0)
            break;
    }
    closedir(d);
    return rc;
}

int hdx_proc_descendants(const int *pids, size_t n, int **out, size_t *n_out)
{
    struct pidset s = {0};
    int rc = 0;
    *out = NULL;
    *n_out = 0;
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
        if (pids[i] <= 0 || access(path, F_OK) != 0) {
            rc = -ESRCH;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (pidset_has(&s, pids[i]))
            continue;
        /* Breadth first from this root: each pid after its ancestor. */
        size_t start = s.n;
        if ((rc = pidset_add(&s, pids[i])) < 0)
            goto out;
        for (size_t j = start; j < s.n; j++) {
            int r = have_children_files() ? children_files(s.v[j], &s)
                                           : children_scan(s.v[j], &s);
            if (r == -ENOMEM) {
                rc = r;
                goto out;
            }
            /* other errors: the process ended meanwhile; keep what we have */
        }
    }
    *out = s.v;
    *n_out = s.n;
    return 0;
out:
    free(s.v);
    return rc;
}

/* ---- reading one process ---------------------------------------------- */

static hdx_thread *find_thread(hdx_process *p, int tid)
{
    for (size_t i = 0; i < p->n_threads; i++)
        if (p->threads[i].tid == tid)
            return &p->threads[i];
    return NULL;
}

/* Split a NUL-separated file into a heap array of heap strings. */
static int split_nul(const char *buf, size_t len, char ***out, size_t *n)
{
    size_t i = 0;
    while (i < len) {
        size_t l = strnlen(buf + i, len - i);
        char **e = hdx_append((void **)out, n, sizeof *e);
        if (!e || !(*e = strndup(buf + i, l)))
            return -ENOMEM;
        i += l + 1;
    }
    return 0;
}

static int read_env(hdx_process *p, int pid)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    char *buf = hdx_read_file(path, BIG_FILE, &len);
    if (!buf)
        return neg_errno();
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        size_t l = strnlen(buf + i, len - i);
        char *kv = buf + i; /* NUL-terminated: hdx_read_file ends buf with one */
        char *eq = memchr(kv, '=', l);
        if (eq) {
            *eq = 0;
            rc = hdx_process_set_env(p, kv, eq + 1);
            *eq = '=';
        }
        i += l + 1;
    }
    free(buf);
    return rc;
}

static int add_tasks(hdx_process *p)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", p->pid);
    DIR *d = opendir(path);
    if (!d)
        return neg_errno();
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        int tid = parse_pid(de->d_name);
        if (tid <= 0 || find_thread(p, tid))
            continue;
        hdx_thread *t = hdx_process_add_thread(p);
        if (!t) {
            rc = -ENOMEM;
            break;
        }
        t->tid = tid;
        char cpath[96];
        snprintf(cpath, sizeof cpath, "/proc/%d/task/%d/comm", p->pid, tid);
        t->name = read_trimmed(cpath);
    }
    closedir(d);
    /* The main thread (tid == pid) first, then the others in tid order: stable reports. After
     * the pids wrap, a later thread may have a lower tid than the main thread. */
    for (size_t i = 1; i < p->n_threads; i++)
        for (size_t j = i; j > 0 && p->threads[j].tid != p->threads[j - 1].tid &&
                           (p->threads[j].tid == p->pid ||
                            (p->threads[j - 1].tid != p->pid && p->threads[j - 1].tid > p->threads[j].tid));
             j--) {
            hdx_thread tmp = p->threads[j];
            p->threads[j] = p->threads[j - 1];
            p->threads[j - 1] = tmp;
        }
    return rc;
}

int hdx_proc_read(hdx_process *p, int pid)
{
    char path[64];
    int rc = 0;
    p->pid = pid;
    hdx_stat sl;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int r = hdx_stat_read(path, &sl);
    if (r < 0) {
        rc = r == -ENOENT ? -ESRCH : r;
        goto out;
    }
    p->ppid = (int)sl.f[4];
    p->start_ticks = sl.f[22];
    p->state = sl.state;
    if (!p->host && !(p->host = strdup(hdx_hostname()))) {
        rc = -ENOMEM;
        goto out;
    }

    size_t len;
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    char *cmd = hdx_read_file(path, BIG_FILE, &len);
    if (cmd) {
        r = split_nul(cmd, len, &p->cmdline, &p->n_cmdline);
        free(cmd);
        if (r < 0) {
            rc = r;
            goto out;
        }
    }

    r = read_env(p, pid);
    if (r == -ENOMEM) {
        rc = r;
        goto out;
    }
    if (r < 0 && !rc)
        rc = r == -ENOENT ? -ESRCH : r;

    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    p->exe = read_link(path);
    if (!p->exe && errno == EACCES && !rc)
        rc = -EACCES;
    snprintf(path, sizeof path, "/proc/%d/cwd", pid);
    p->cwd = read_link(path);

    r = add_tasks(p);
    if (r < 0 && !rc)
        rc = r == -ENOENT ? -ESRCH : r;
    if (rc == -ENOMEM || rc == -ESRCH)
        goto out;

    r = hdx_proc_sample(p);
    if (r < 0 && !rc)
        rc = r;
    p->cpu_ms_first = p->cpu_ms;
    for (size_t i = 0; i < p->n_threads; i++)
        p->threads[i].cpu_ms_first = p->threads[i].cpu_ms;
out:
    p->read_error = rc;
    return rc;
}

int hdx_proc_read_syscall(int pid, int tid, long *nr, uint64_t args[6])
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", pid, tid);
    *nr = HDX_SYSCALL_UNKNOWN;
    memset(args, 0, 6 * sizeof *args);
    char *s = hdx_read_file(path, 512, NULL);
    if (!s)
        return -errno;
    if (strncmp(s, "running", 7) == 0) {
        *nr = HDX_SYSCALL_RUNNING;
    } else {
        char *end;
        long n = strtol(s, &end, 10);
        if (end != s && n >= 0) {
            *nr = n;
            char *q = end;
            for (int i = 0; i < 6; i++) {
                char *e2;
                unsigned long long v = strtoull(q, &e2, 16);
                if (e2 == q)
                    break;
                args[i] = v;
                q = e2;
            }
        }
        /* "-1 sp pc": blocked but not in a system call; stays UNKNOWN */
    }
    free(s);
    return 0;
}

/* A thread's time on a CPU in ms, to the nanosecond, from /proc/PID/task/TID/schedstat
 * (proc(5): its first field); -1 where the kernel has no schedstat (CONFIG_SCHED_INFO). */
static double thread_run_ms(int pid, int tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
    char *buf = hdx_read_file(path, 128, NULL);
    char *end = NULL;
    unsigned long long ns = buf ? strtoull(buf, &end, 10) : 0;
    int ok = buf && end != buf;
    free(buf);
    return ok ? (double)ns / 1e6 : -1;
}

int hdx_proc_frozen(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
    char *text = hdx_read_file(path, 1 << 16, NULL);
    if (!text)
        return HDX_UNKNOWN;
    int frozen = 0;
    /* Lines "ID:CONTROLLERS:PATH": cgroup v1's freezer hierarchy, or v2's one line "0::PATH". */
    for (char *line = text, *next; line && *line && !frozen; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *c = strchr(line, ':'), *rel = c ? strchr(c + 1, ':') : NULL;
        if (!rel)
            continue;
        *rel++ = 0;
        char *state = NULL;
        if (!strcmp(c + 1, "freezer")) {
            char *f = hdx_asprintf("/sys/fs/cgroup/freezer%s/freezer.state", rel);
            state = f ? hdx_read_file(f, 256, NULL) : NULL;
            frozen = state && !strncmp(state, "FROZEN", 6);
            free(f);
        } else if (!c[1] && !strncmp(line, "0", 2)) {
            char *f = hdx_asprintf("/sys/fs/cgroup%s/cgroup.events", rel);
            state = f ? hdx_read_file(f, 4096, NULL) : NULL;
            frozen = state && (!strncmp(state, "frozen 1", 8) || strstr(state, "\nfrozen 1"));
            free(f);
        }
        free(state);
    }
    free(text);
    return frozen;
}

int hdx_proc_sample(hdx_process *p)
{
    char path[96];
    hdx_stat sl;
    snprintf(path, sizeof path, "/proc/%d/stat", p->pid);
    int r = hdx_stat_read(path, &sl);
    if (r < 0) {
        p->alive = 0;
        return r == -ENOENT ? -ESRCH : r;
    }
    p->state = sl.state;
    uint64_t start = sl.f[22];
    /* Process utime+stime covers every thread, the ended ones too. */
    p->cpu_ms = (double)(sl.f[14] + sl.f[15]) * 1000.0 / (double)clk_tck();
    if (p->start_ticks && start != p->start_ticks) {
        p->alive = 0; /* the pid was reused */
        return -ESRCH;
    }
    p->alive = (p->state == 'Z' || p->state == 'X') ? 0 : 1;
    p->frozen = hdx_proc_frozen(p->pid);
    double up = uptime_s();
    if (up >= 0)
        p->age_s = up - (double)start / (double)clk_tck();

    int rc = add_tasks(p);
    if (rc == -ENOMEM)
        return rc;
    for (size_t i = 0; i < p->n_threads; i++) {
        hdx_thread *t = &p->threads[i];
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", p->pid, t->tid);
        if (hdx_stat_read(path, &sl) < 0)
            continue; /* ended: keep its last values */
        t->state = sl.state;
        /* schedstat counts to the ns; stat's utime+stime in clock ticks (10 ms), too coarse to
         * tell one thread's few ms in a 250 ms window from none */
        t->cpu_ms = thread_run_ms(p->pid, t->tid);
        if (t->cpu_ms < 0)
            t->cpu_ms = (double)(sl.f[14] + sl.f[15]) * 1000.0 / (double)clk_tck();
        snprintf(path, sizeof path, "/proc/%d/task/%d/wchan", p->pid, t->tid);
        free(t->wchan);
        t->wchan = read_trimmed(path);
        if (t->wchan && (!*t->wchan || strcmp(t->wchan, "0") == 0)) {
            free(t->wchan);
            t->wchan = NULL;
        }
        hdx_proc_read_syscall(p->pid, t->tid, &t->syscall, t->syscall_args);
    }
    return 0;
}

uint64_t hdx_proc_ns(int pid, const char *name)
{
    char path[64], link[64];
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%d/ns/%s", pid, name);
    else
        snprintf(path, sizeof path, "/proc/self/ns/%s", name);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return 0;
    link[n] = 0;
    const char *b = strchr(link, '[');
    return b ? strtoull(b + 1, NULL, 10) : 0;
}

/* Each numeric entry of /proc: stop when fn returns non-zero, and return that. */
static int each_pid(int (*fn)(int pid, const void *arg), const void *arg)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *de;
    int r = 0;
    while (!r && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (!*end && pid > 0)
            r = fn((int)pid, arg);
    }
    closedir(d);
    return r;
}

struct in_ns {
    const char *ns;
    uint64_t ino;
    int nspid;
    uint64_t start_ticks;  /* the process's own start, 0: any */
    uint64_t before_ticks; /* a process that started no later, 0: any */
};

static int match_in_ns(int pid, const void *arg)
{
    const struct in_ns *q = arg;
    if (hdx_proc_ns(pid, q->ns) != q->ino)
        return 0;
    if (q->nspid > 0 && hdx_proc_ns_pid(pid, pid) != q->nspid)
        return 0;
    if (q->before_ticks && hdx_proc_start_ticks(pid) > q->before_ticks)
        return 0;
    return hdx_proc_alive(pid, q->start_ticks) == 1 ? pid : 0;
}

int hdx_proc_pid_in_ns(uint64_t pid_ns, int nspid, uint64_t start_ticks)
{
    struct in_ns q = {"pid", pid_ns, nspid, start_ticks, 0};
    return pid_ns && nspid > 0 ? each_pid(match_in_ns, &q) : 0;
}

int hdx_proc_in_mnt_ns(uint64_t mnt_ns, uint64_t before_ticks)
{
    struct in_ns q = {"mnt", mnt_ns, 0, 0, before_ticks};
    return mnt_ns ? each_pid(match_in_ns, &q) : 0;
}

uint64_t hdx_proc_start_ticks(int pid)
{
    char path[64];
    hdx_stat sl;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    return pid > 0 && hdx_stat_read(path, &sl) == 0 ? sl.f[22] : 0;
}

int hdx_proc_alive(int pid, uint64_t start_ticks)
{
    char path[64];
    hdx_stat sl;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (pid <= 0 || hdx_stat_read(path, &sl) < 0)
        return 0;
    char st = sl.state;
    uint64_t start = sl.f[22];
    if (st == 'Z' || st == 'X')
        return 0;
    return start_ticks == 0 || start == start_ticks;
}

const char *hdx_proc_boot_id(void)
{
    static char id[64];
    if (!id[0]) {
        char *s = read_trimmed("/proc/sys/kernel/random/boot_id");
        if (s) {
            snprintf(id, sizeof id, "%s", s);
            free(s);
        }
    }
    return id;
}

char *hdx_proc_getenv(int pid, const char *name)
{
    char path[64];
    size_t len, nl = strlen(name);
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    char *buf = hdx_read_file(path, BIG_FILE, &len);
    if (!buf)
        return NULL;
    char *val = NULL;
    for (size_t i = 0; i < len;) {
        size_t l = strnlen(buf + i, len - i);
        if (l > nl && buf[i + nl] == '=' && memcmp(buf + i, name, nl) == 0) {
            val = strndup(buf + i + nl + 1, l - nl - 1);
            if (!val)
                errno = ENOMEM;
            break;
        }
        i += l + 1;
    }
    free(buf);
    if (!val && errno != ENOMEM)
        errno = ENOENT;
    return val;
}

int hdx_proc_fd_path(int pid, int fd, char *buf, size_t size)
{
    char path[64];
    if (size == 0)
        return -EINVAL;
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    ssize_t r = readlink(path, buf, size);
    if (r < 0)
        return neg_errno();
    if ((size_t)r >= size) {
        buf[size - 1] = 0;
        return -ENAMETOOLONG;
    }
    buf[r] = 0;
    return 0;
}

int hdx_proc_openers(dev_t dev, ino_t ino, int **pids, size_t *n, size_t *unreadable)
{
    *pids = NULL;
    *n = 0;
    if (unreadable)
        *unreadable = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return neg_errno();
    int self = getpid(), rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) && rc == 0) {
        int pid = parse_pid(de->d_name);
        if (pid <= 0 || pid == self)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/fd", pid);
        DIR *fdd = opendir(path);
        if (!fdd) {
            if (errno != ENOENT && unreadable)
                (*unreadable)++;
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(fdd))) {
            int fd = parse_pid(fe->d_name);
            if (fd < 0)
                continue;
            char fpath[96];
            struct stat st;
            snprintf(fpath, sizeof fpath, "/proc/%d/fd/%d", pid, fd);
            /* stat follows the magic link to the open file itself */
            if (stat(fpath, &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
                int *e = hdx_append((void **)pids, n, sizeof *e);
                if (!e)
                    rc = -ENOMEM;
                else
                    *e = pid;
                break;
            }
        }
        closedir(fdd);
    }
    closedir(d);
    if (rc < 0) {
        free(*pids);
        *pids = NULL;
        *n = 0;
    }
    return rc;
}

static const char *const rank_names[] = {"RANK",    "LOCAL_RANK", "SLURM_PROCID",
                                         "OMPI_COMM_WORLD_RANK", "PMI_RANK"};

static int has_rank_env(const char *buf, size_t len)
{
    for (size_t i = 0; i < len;) {
        size_t l = strnlen(buf + i, len - i);
        for (size_t k = 0; k < sizeof rank_names / sizeof rank_names[0]; k++) {
            size_t nl = strlen(rank_names[k]);
            if (l > nl && buf[i + nl] == '=' && memcmp(buf + i, rank_names[k], nl) == 0)
                return 1;
        }
        i += l + 1;
    }
    return 0;
}

/* The parent of pid (field 4 of its stat), or 0. */
static int parent_of(int pid)
{
    char path[64];
    hdx_stat sl;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (hdx_stat_read(path, &sl) < 0)
        return 0;
    int ppid = (int)sl.f[4];
    return ppid;
}

/* Is pid one of hangdx's ancestors (the shell or srun step that runs it
 * carries its step's rank variables but is no rank)? */
static int is_ancestor(int pid)
{
    int depth = 0;
    for (int p = getppid(); p > 1 && depth < 64; p = parent_of(p), depth++)
        if (p == pid)
            return 1;
    return 0;
}

/* The value of name in an environ block of len bytes (NUL-separated), pointing into buf; NULL when unset. */
static const char *environ_value(const char *buf, size_t len, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < len;) {
        size_t l = strnlen(buf + i, len - i);
        if (l > nl && buf[i + nl] == '=' && memcmp(buf + i, name, nl) == 0 && i + l < len)
            return buf + i + nl + 1;
        i += l + 1;
    }
    return NULL;
}

/* Does the environ block pass f (see hdx_rank_filter)? */
static int passes_filter(const char *buf, size_t len, const hdx_rank_filter *f)
{
    if (!f || !f->slurm_job_id)
        return 1;
    const char *job = environ_value(buf, len, "SLURM_JOB_ID");
    if (!job || strcmp(job, f->slurm_job_id) != 0)
        return 0;
    const char *cluster = environ_value(buf, len, "SLURM_CLUSTER_NAME");
    if (f->slurm_cluster && cluster && strcmp(cluster, f->slurm_cluster) != 0)
        return 0;
    const char *step = environ_value(buf, len, "SLURM_STEP_ID");
    for (size_t i = 0; step && i < f->n_skip_steps; i++)
        if (f->skip_steps[i] && !strcmp(step, f->skip_steps[i]))
            return 0;
    return 1;
}

int hdx_proc_find_ranks(int **pids, size_t *n)
{
    return hdx_proc_find_ranks_filtered(NULL, pids, n);
}

int hdx_proc_find_ranks_filtered(const hdx_rank_filter *f, int **pids, size_t *n)
{
    *pids = NULL;
    *n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return neg_errno();
    int self = getpid(), rc = 0;
    struct stat self_exe;
    int have_self = stat("/proc/self/exe", &self_exe) == 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int pid = parse_pid(de->d_name);
        if (pid <= 0 || pid == self || is_ancestor(pid))
            continue;
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d/exe", pid);
        /* hangdx's own processes (another hangdx, a helper) are not ranks */
        if (have_self && stat(path, &st) == 0 && st.st_dev == self_exe.st_dev &&
            st.st_ino == self_exe.st_ino)
            continue;
        snprintf(path, sizeof path, "/proc/%d/environ", pid);
        size_t len;
        char *buf = hdx_read_file(path, BIG_FILE, &len);
        if (!buf)
            continue;
        int yes = has_rank_env(buf, len) && passes_filter(buf, len, f);
        free(buf);
        if (!yes || !hdx_proc_alive(pid, 0))
            continue;
        int *e = hdx_append((void **)pids, n, sizeof *e);
        if (!e) {
            rc = -ENOMEM;
            break;
        }
        *e = pid;
    }
    closedir(d);
    if (rc < 0) {
        free(*pids);
        *pids = NULL;
        *n = 0;
    }
    return rc;
}

/* ---- what another user's process hides ------------------------------- */

/* pid's /proc/PID/stat into sl (free sl->buf after); -1 when there is no such pid. */
static int read_pid_stat(int pid, hdx_stat *sl)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    return pid <= 0 ? -1 : hdx_stat_read(path, sl);
}

char hdx_proc_state(int pid)
{
    hdx_stat sl;
    if (read_pid_stat(pid, &sl) < 0)
        return 0;
    char st = sl.state;
    return st;
}

int hdx_proc_is_kernel_thread(int pid)
{
    hdx_stat sl;
    if (read_pid_stat(pid, &sl) < 0)
        return 0;
    int k = (sl.f[9] & 0x00200000ull) != 0; /* PF_KTHREAD, include/linux/sched.h */
    return k;
}

const char *hdx_proc_access_advice(void)
{
    return geteuid() == 0 ? "hangdx already runs as root, so /proc is restricted here (hidepid, a container's "
                            "or a security module's policy): run hangdx where that process's /proc is readable"
                          : "run hangdx as that user or as root";
}

/* 0 readable, 1 denied (EACCES/EPERM), -1 other (gone). */
static int denied_open(const char *path, int read_too)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char c;
        ssize_t n = read_too ? read(fd, &c, 1) : 0;
        int e = errno;
        close(fd);
        return n < 0 && (e == EACCES || e == EPERM) ? 1 : 0;
    }
    return errno == EACCES || errno == EPERM ? 1 : -1;
}

static int denied_link(const char *path)
{
    char buf[PATH_MAX];
    if (readlink(path, buf, sizeof buf) >= 0)
        return 0;
    return errno == EACCES || errno == EPERM ? 1 : -1;
}

int hdx_proc_denied(int pid, char *buf, size_t size)
{
    static const struct {
        const char *file;
        int kind; /* 0 open, 1 open and read, 2 link, 3 directory */
        const char *costs;
    } files[] = {
        {"environ", 0, "rank variables unknown"},
        {"exe", 2, NULL},
        {"cwd", 2, NULL},
        {"fd", 3, "no open files or locks"},
        {"syscall", 1, "no system calls"},
        {"wchan", -1, "wchan hidden"},
        {"maps", 0, NULL},
        {"mem", 0, "no native or Python stacks"},
    };
    char path[64];
    const char *names[8], *costs[8];
    int n = 0, nc = 0, syscall_denied = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (access(path, F_OK) != 0)
        return -ESRCH;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int d;
        snprintf(path, sizeof path, "/proc/%d/%s", pid, files[i].file);
        switch (files[i].kind) {
        case 0: d = denied_open(path, 0); break;
        case 1: d = denied_open(path, 1); break;
        case 2: d = denied_link(path); break;
        case 3: {
            DIR *dd = opendir(path);
            d = dd ? 0 : errno == EACCES || errno == EPERM ? 1 : -1;
            if (dd)
                closedir(dd);
            break;
        }
        default: d = syscall_denied; break; /* wchan reads "0" when denied */
        }
        if (i == 4)
            syscall_denied = d == 1;
        if (d != 1)
            continue;
        names[n++] = files[i].file;
        if (files[i].costs)
            costs[nc++] = files[i].costs;
    }
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", names[i]);
    if (n && at < size)
        at += (size_t)snprintf(buf + at, size - at, " %s not readable", n == 1 ? "is" : "are");
    for (int i = 0; i < nc && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", i == 0 ? ": " : ", ", costs[i]);
    return n;
}

/* ---- this host, for the trace reader ---------------------------------- */

static int live_alive(int pid, uint64_t start_ticks, void *ctx)
{
    (void)ctx;
    return hdx_proc_alive(pid, start_ticks);
}

static const char *live_boot_id(void *ctx)
{
    (void)ctx;
    return hdx_proc_boot_id();
}

static const char *live_hostname(void *ctx)
{
    (void)ctx;
    return hdx_hostname();
}

static uint64_t live_own_ns(const char *name, void *ctx)
{
    (void)ctx;
    return hdx_proc_ns(0, name);
}

static int live_pid_in_ns(uint64_t pid_ns, int nspid, uint64_t start_ticks, void *ctx)
{
    (void)ctx;
    return hdx_proc_pid_in_ns(pid_ns, nspid, start_ticks);
}

static int live_in_mnt_ns(uint64_t mnt_ns, uint64_t before_ticks, void *ctx)
{
    (void)ctx;
    return hdx_proc_in_mnt_ns(mnt_ns, before_ticks);
}

static char *live_path_here(int pid, const char *path, int *same, void *ctx)
{
    (void)ctx;
    return hdx_proc_path_here(pid, path, same);
}

static int live_is_dir(const char *path, void *ctx)
{
    (void)ctx;
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const struct hdx_trace_host *hdx_proc_trace_host(void)
{
    static const hdx_trace_host live = {
        .alive = live_alive,
        .boot_id = live_boot_id,
        .hostname = live_hostname,
        .own_ns = live_own_ns,
        .pid_in_ns = live_pid_in_ns,
        .in_mnt_ns = live_in_mnt_ns,
        .path_here = live_path_here,
        .is_dir = live_is_dir,
        .ctx = NULL,
    };
    return &live;
}
