/* Build-directory locks: what the processes wait on, and the state of each lock. */
#include "gather/locks.h"
#include "gather/nspath.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gather/proc.h"
#include "gather/sample.h"
#include "gather/syswatch.h"
#include "model/outfile.h"
#include "model/util.h"


/* Polling threads watched per process at most (the main thread first). */
#define WATCH_PER_PROCESS 2

/* ---- /proc/locks --------------------------------------------------------- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Copy one whitespace-delimited token into buf (truncated); return the end. */
static const char *token(const char *p, char *buf, size_t size)
{
    size_t n = 0;
    p = skip_ws(p);
    while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
        if (n + 1 < size)
            buf[n++] = *p;
        p++;
    }
    buf[n] = 0;
    return p;
}

/* One line: "ID: [-> ]KIND ADVISORY MODE PID MAJ:MIN:INO START END" (fs/locks.c). */
static int parse_kernel_line(const char *p, hdx_kernel_lock *k)
{
    char *end;
    char tok[32];
    memset(k, 0, sizeof *k);
    p = skip_ws(p);
    long id = strtol(p, &end, 10);
    if (end == p || *end != ':')
        return -1;
    k->id = (int)id;
    p = skip_ws(end + 1);
    if (p[0] == '-' && p[1] == '>') {
        k->blocked = 1;
        p += 2;
    }
    p = token(p, k->kind, sizeof k->kind);
    if (!k->kind[0])
        return -1;
    p = token(p, tok, sizeof tok); /* ADVISORY, MANDATORY, ACTIVE, BREAKING, ... */
    if (!tok[0])
        return -1;
    p = token(p, k->mode, sizeof k->mode);
    if (!k->mode[0])
        return -1;
    p = skip_ws(p);
    long pid = strtol(p, &end, 10);
    if (end == p)
        return -1;
    k->pid = (int)pid;
    p = skip_ws(end);
    /* "%02x:%02x:%lu": device major and minor in hex, the inode in decimal. */
    unsigned long maj = strtoul(p, &end, 16);
    if (end == p || *end != ':')
        return -1;
    p = end + 1;
    unsigned long min = strtoul(p, &end, 16);
    if (end == p || *end != ':')
        return -1;
    p = end + 1;
    if (!isdigit((unsigned char)*p))
        return -1; /* "<none>" and the like */
    k->ino = strtoul(p, &end, 10);
    if (*end && *end != ' ' && *end != '\t' && *end != '\n')
        return -1;
    k->dev_major = (unsigned)maj;
    k->dev_minor = (unsigned)min;
    return 0;
}

int hdx_kernel_locks_parse(const char *text, hdx_kernel_lock **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!text)
        return 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[512];
        if (len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = 0;
            hdx_kernel_lock k;
            if (parse_kernel_line(buf, &k) == 0) {
                hdx_kernel_lock *slot = hdx_append((void **)out, n, sizeof *slot);
                if (!slot) {
                    free(*out);
                    *out = NULL;
                    *n = 0;
                    return -ENOMEM;
                }
                *slot = k;
            }
        }
        line += len;
        if (*line == '\n')
            line++;
    }
    return 0;
}

static int read_kernel_locks(hdx_kernel_lock **kl, size_t *n)
{
    char *text = hdx_read_file("/proc/locks", 16u << 20, NULL);
    if (!text) {
        *kl = NULL;
        *n = 0;
        return -errno;
    }
    int r = hdx_kernel_locks_parse(text, kl, n);
    free(text);
    return r;
}

static int same_file(const hdx_kernel_lock *k, const struct stat *st)
{
    return k->dev_major == major(st->st_dev) && k->dev_minor == minor(st->st_dev) &&
           k->ino == (unsigned long)st->st_ino;
}

static int kind_from_kernel(const char *kind, enum hdx_lock_kind *out)
{
    if (!strcmp(kind, "FLOCK"))
        *out = HDX_LOCK_FLOCK;
    else if (!strcmp(kind, "POSIX"))
        *out = HDX_LOCK_POSIX;
    else if (!strcmp(kind, "OFDLCK"))
        *out = HDX_LOCK_OFD;
    else
        return -1;
    return 0;
}

/* ---- collect -------------------------------------------------------------- */

static int is_lock_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t l = strlen(base);
    return !strcmp(base, "lock") || (l > 5 && !strcmp(base + l - 5, ".lock"));
}

const char *hdx_locks_not_builders(const char *path)
{
    static const char *const lockfiles[] = {"Cargo.lock",   "poetry.lock",    "yarn.lock",     "uv.lock",
                                            "Gemfile.lock", "flake.lock",     "composer.lock", "Pipfile.lock",
                                            "bun.lockb",    "pnpm-lock.yaml", "package-lock.json"};
    if (!path)
        return NULL;
    for (const char *p = path; (p = strstr(p, ".git")); p += 4)
        if ((p == path || p[-1] == '/') && p[4] == '/')
            return "git's (a file under .git): git makes and removes its own locks";
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof lockfiles / sizeof *lockfiles; i++)
        if (!strcmp(base, lockfiles[i]))
            return "a package manager's lock file: it pins versions and locks no build";
    return NULL;
}

const char *hdx_locks_left_alone(const hdx_lock *l, int found)
{
    const char *why = hdx_locks_not_builders(l->path);
    if (why)
        return why;
    if (found)
        return NULL;
    if (!l->source || strcmp(l->source, "trace") != 0)
        return "no build made it that hangdx saw: neither a FileBaton lock in a build directory searched nor "
               "named by a trace";
    if (l->kind != HDX_LOCK_BATON)
        return "a kernel lock's file (flock, fcntl): the kernel frees the lock when its holder dies, and the file "
               "locks nothing";
    if (!is_lock_name(l->path))
        return "the trace saw it created exclusively, but it is not named like a lock (\"lock\", \"*.lock\"): "
               "a temporary file, not a FileBaton's";
    return NULL;
}

/* The lock for path in ev, added (kind, source) when missing. NULL on ENOMEM. */
static hdx_lock *lock_for(hdx_evidence *ev, const char *path, enum hdx_lock_kind kind, const char *source)
{
    hdx_lock *l = hdx_evidence_find_lock(ev, path);
    if (l)
        return l;
    if (!(l = hdx_evidence_add_lock(ev)))
        return NULL;
    l->kind = kind;
    if (!(l->path = strdup(path)) || !(l->source = strdup(source)))
        return NULL;
    return l;
}

/* The lock for the file that live process p names path (in its own root: a chroot or a
 * container names it otherwise than hangdx, gather/nspath.h), added when missing; its
 * job_path is path when that differs from the name here. NULL on ENOMEM. */
static hdx_lock *lock_named_by(hdx_evidence *ev, const hdx_process *p, const char *path, enum hdx_lock_kind kind,
                               const char *source)
{
    int same;
    char *here = hdx_proc_path_here(p->pid, path, &same);
    hdx_lock *l = here ? lock_for(ev, here, kind, source) : NULL;
    free(here);
    if (l && !same && !l->job_path && !(l->job_path = strdup(path)))
        return NULL;
    return l;
}

static int add_waiter(hdx_lock *l, const hdx_process *p, int tid, const char *how)
{
    for (size_t i = 0; i < l->n_waiters; i++)
        if (l->waiters[i].pid == p->pid) {
            if (l->waiters[i].tid == HDX_UNKNOWN)
                l->waiters[i].tid = tid;
            return 0;
        }
    hdx_waiter *w = hdx_lock_add_waiter(l);
    if (!w)
        return -ENOMEM;
    w->pid = p->pid;
    w->tid = tid;
    w->rank = p->rank;
    if (!(w->how = strdup(how)))
        return -ENOMEM;
    return 0;
}

/* Does pid appear in any lock of ev (as a waiter or its creator)? */
static int has_known_lock(const hdx_evidence *ev, int pid)
{
    for (size_t i = 0; i < ev->n_locks; i++) {
        const hdx_lock *l = &ev->locks[i];
        if (l->has_creator && l->creator_pid == pid)
            return 1;
        for (size_t k = 0; k < l->n_waiters; k++)
            if (l->waiters[k].pid == pid)
                return 1;
    }
    return 0;
}

/* A thread blocked in flock()/fcntl(F_SETLKW|F_OFD_SETLKW): its lock. */
static int collect_blocked(hdx_evidence *ev, hdx_process *p, hdx_thread *t, const hdx_kernel_lock *kl, size_t nkl)
{
    int fd;
    enum hdx_lock_kind kind;
    const char *how;
    if (t->syscall == SYS_flock && !(t->syscall_args[1] & LOCK_NB)) {
        kind = HDX_LOCK_FLOCK;
        how = "flock";
    } else if (t->syscall == SYS_fcntl && (t->syscall_args[1] == F_SETLKW || t->syscall_args[1] == F_OFD_SETLKW)) {
        kind = t->syscall_args[1] == F_OFD_SETLKW ? HDX_LOCK_OFD : HDX_LOCK_POSIX;
        how = "fcntl";
    } else {
        return 0;
    }
    fd = (int)t->syscall_args[0];
    char path[PATH_MAX];
    int r = hdx_proc_fd_path(p->pid, fd, path, sizeof path);
    if (r < 0) {
        hdx_evidence_note(ev, "pid %d thread %d waits in %s on fd %d, but the file behind it could not be read: %s",
                          p->pid, t->tid, how, fd, strerror(-r));
        return 0;
    }
    /* The kernel's own view, when the fd's file has a blocked request from this pid. */
    char fdlink[64];
    struct stat st;
    snprintf(fdlink, sizeof fdlink, "/proc/%d/fd/%d", p->pid, fd);
    if (stat(fdlink, &st) == 0) {
        for (size_t i = 0; i < nkl; i++)
            if (kl[i].blocked && same_file(&kl[i], &st) && (kl[i].pid == p->pid || kl[i].pid == -1)) {
                kind_from_kernel(kl[i].kind, &kind);
                break;
            }
    }
    hdx_lock *l = lock_for(ev, path, kind, "blocked fd");
    if (!l)
        return -ENOMEM;
    if (strcmp(l->source, "trace") != 0 || !l->has_creator)
        l->kind = kind;
    return add_waiter(l, p, t->tid, how);
}

/* How a Python frame tells the lock a thread waits on. */
typedef struct python_lock_wait {
    enum hdx_lock_kind kind;
    const char *how; /* the waiter's "how" */
} python_lock_wait;

/* "<dir>/<name>" in path, dir made absolute with p's working directory. 1, or 0 when it does not fit. */
static int absolute(const hdx_process *p, const char *dir, const char *name, char *path, size_t size)
{
    int n = dir[0] == '/' || !p->cwd ? snprintf(path, size, "%s%s%s", dir, name ? "/" : "", name ? name : "")
                                     : snprintf(path, size, "%s/%s%s%s", p->cwd, dir, name ? "/" : "", name ? name : "");
    return n > 0 && (size_t)n < size;
}

static const hdx_local *str_local(const hdx_frame *f, const char *name)
{
    const hdx_local *v = hdx_frame_local(f, name);
    return v && v->kind == HDX_VAL_STR && v->s && v->s[0] ? v : NULL;
}

/*
 * The lock a thread's Python stack waits on, with the path in path (1), else 0:
 *  - FileBaton.wait: the baton is <build_directory>/lock, build_directory being the local
 *    of the cpp_extension._jit_compile frame that called it (torch 1.13 to 2.x);
 *  - the filelock package's BaseFileLock.acquire (filelock/_api.py, which torch inductor,
 *    Triton and cpp_extension on torch's main branch use): its lock_filename local, the
 *    file it retries flock(LOCK_EX|LOCK_NB) on every poll_interval.
 * Without the local, the syscall watch finds the path.
 */
static int python_lock_path(const hdx_process *p, const hdx_thread *t, char *path, size_t size, python_lock_wait *w)
{
    size_t at = 0;
    const hdx_frame *f = hdx_thread_find_python(t, "BaseFileLock.acquire", "filelock/_api.py", &at);
    const hdx_local *v;
    if (f && (v = str_local(f, "lock_filename"))) {
        *w = (python_lock_wait){HDX_LOCK_FLOCK, "FileLock.acquire"};
        return absolute(p, v->s, NULL, path, size);
    }
    at = 0;
    if (!hdx_thread_find_python(t, HDX_FILEBATON_WAIT, HDX_FILEBATON_FILE, &at))
        return 0;
    const hdx_frame *jit = hdx_thread_find_python(t, HDX_FILEBATON_CALLER, HDX_FILEBATON_CALLER_FILE, &at);
    if (!(v = str_local(jit, "build_directory")))
        return 0;
    *w = (python_lock_wait){HDX_LOCK_BATON, HDX_FILEBATON_WAIT};
    return absolute(p, v->s, "lock", path, size);
}

static int collect_python_lock(hdx_evidence *ev, hdx_process *p, hdx_thread *t)
{
    char path[PATH_MAX];
    python_lock_wait w;
    if (!python_lock_path(p, t, path, sizeof path, &w))
        return 0;
    hdx_lock *l = lock_named_by(ev, p, path, w.kind, "Python frame");
    return l ? add_waiter(l, p, t->tid, w.how) : -ENOMEM;
}

/* 1 when /proc/PID/exe is a Python interpreter (its name starts with "python"). */
static int runs_python(int pid)
{
    char path[64], exe[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    const char *base = strrchr(exe, '/');
    return !strncmp(base ? base + 1 : exe, "python", 6);
}

int hdx_locks_add_python_waiters(hdx_evidence *ev)
{
    if (!ev->n_locks)
        return 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int added = 0, r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid() || !runs_python((int)pid))
            continue;
        hdx_evidence *one = hdx_evidence_new();
        hdx_process *p = one ? hdx_evidence_add_process(one) : NULL;
        if (!p) {
            r = -ENOMEM;
        } else if (hdx_proc_read(p, (int)pid) == 0 &&
                   hdx_sample_stacks(p, one, HDX_SAMPLE_PYTHON | HDX_SAMPLE_LOCALS | HDX_SAMPLE_NO_NATIVE) == 0) {
            char path[PATH_MAX];
            python_lock_wait w;
            for (size_t i = 0; r == 0 && i < p->n_threads; i++) {
                int same;
                char *here = python_lock_path(p, &p->threads[i], path, sizeof path, &w)
                                 ? hdx_proc_path_here(p->pid, path, &same) : NULL;
                hdx_lock *l = here ? hdx_evidence_find_lock(ev, here) : NULL;
                free(here);
                if (l && (r = add_waiter(l, p, p->threads[i].tid, w.how)) == 0)
                    added++;
            }
        }
        hdx_evidence_free(one);
    }
    closedir(d);
    return r < 0 ? r : added;
}

/* Watch one polling thread; 1 when it polls or retries an existing lock file, 0 not, -errno.
 * A lock call retried on a file is a kernel-lock wait; a stat poll of a file
 * named like a lock is a baton wait. */
static int watch_thread(hdx_evidence *ev, hdx_process *p, hdx_thread *t, int ms, size_t *n_watched)
{
    hdx_syswatch_hit *hits = NULL;
    size_t n = 0;
    int r = hdx_syswatch(p->pid, t->tid, ms, &hits, &n);
    if (r < 0) {
        if (r == -EPERM)
            hdx_evidence_note(ev, "could not watch the system calls of pid %d: ptrace not permitted — run as "
                                  "the same user or with CAP_SYS_PTRACE",
                              p->pid);
        else if (r == -EBUSY)
            hdx_evidence_note(ev, "could not watch the system calls of pid %d thread %d: another tracer holds it",
                              p->pid, t->tid);
        else
            hdx_evidence_note(ev, "could not watch the system calls of pid %d thread %d: %s", p->pid, t->tid,
                              strerror(-r));
        return 0;
    }
    (*n_watched)++;
    const hdx_syswatch_hit *found = NULL;
    for (size_t i = 0; i < n && !found; i++) /* a lock retry says most */
        if (hits[i].use == HDX_WATCH_LOCK_TRY)
            found = &hits[i];
    for (size_t i = 0; i < n && !found; i++) {
        struct stat st;
        char theirs[PATH_MAX + 32]; /* the path in the thread's own root */
        snprintf(theirs, sizeof theirs, "/proc/%d/root%s", p->pid, hits[i].path);
        if (hits[i].use == HDX_WATCH_STAT && is_lock_name(hits[i].path) && hits[i].path[0] == '/' &&
            stat(theirs, &st) == 0)
            found = &hits[i];
    }
    if (found) {
        int retry = found->use == HDX_WATCH_LOCK_TRY;
        hdx_lock *l = lock_named_by(ev, p, found->path, retry ? HDX_LOCK_FLOCK : HDX_LOCK_BATON, "syscall watch");
        if (!l || add_waiter(l, p, t->tid, retry ? "lock retry" : "stat poll") < 0) {
            r = -ENOMEM;
            goto out;
        }
    }
    if (!t->polled_path && (found || n > 0))
        t->polled_path = strdup(found ? found->path : hits[0].path);
    r = found != NULL;
out:
    hdx_syswatch_free(hits, n);
    return r;
}

/* The threads a watch left alone because their sleep ends after it: each with how long it
 * still sleeps, for one note (a one-hour sleep and a 1 s poll loop read alike otherwise). */
struct asleep {
    size_t n, shown;
    size_t used;
    char text[600];
};

static void add_asleep(struct asleep *a, const hdx_process *p, const hdx_thread *t, int64_t left_ns)
{
    a->n++;
    if (a->used + 80 >= sizeof a->text)
        return;
    a->used += (size_t)snprintf(a->text + a->used, sizeof a->text - a->used, "%spid %d thread %d for another %.1f s",
                                a->shown++ ? ", " : "", p->pid, t->tid, (double)left_ns / 1e9);
}

/* Watch the polling threads of p, the main thread first (that is where Python's FileBaton
 * polls). A thread whose sleep ends after the watch cannot poll during it: it goes into
 * asleep instead. */
static int watch_process(hdx_evidence *ev, hdx_process *p, int ms, size_t *n_watched, struct asleep *asleep)
{
    int watched = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < p->n_threads && watched < WATCH_PER_PROCESS; i++) {
            hdx_thread *t = &p->threads[i];
            if ((pass == 0) != (t->tid == p->pid) || !hdx_syswatch_is_sleep(t->syscall))
                continue;
            int64_t left = hdx_sleep_left_ns(p->pid, t->tid);
            if (left > (int64_t)ms * 1000000) {
                add_asleep(asleep, p, t, left);
                continue;
            }
            watched++;
            int r = watch_thread(ev, p, t, ms, n_watched);
            if (r != 0)
                return r < 0 ? r : 0;
        }
    }
    return 0;
}

static int add_found_file(hdx_evidence *ev, const char *path)
{
    if (hdx_evidence_find_lock(ev, path))
        return 0;
    return lock_for(ev, path, HDX_LOCK_BATON, "well-known place") ? 0 : -ENOMEM;
}

/* The lock files that DIR/pattern names (a glob); a DIR too long for a path adds nothing. */
static int add_glob(hdx_evidence *ev, const char *dir, const char *pattern)
{
    char full[PATH_MAX];
    if (snprintf(full, sizeof full, "%s/%s", dir, pattern) >= (int)sizeof full)
        return 0;
    glob_t g;
    int r = 0;
    if (glob(full, GLOB_NOSORT, NULL, &g) != 0)
        return 0;
    for (size_t i = 0; i < g.gl_pathc && r == 0; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode))
            r = add_found_file(ev, g.gl_pathv[i]);
    }
    globfree(&g);
    return r;
}

/* "DIR/build/lock" and "DIR/<any>/build/lock". */
static int scan_build_dirs(hdx_evidence *ev, const char *dir)
{
    int r = add_glob(ev, dir, "build/lock");
    return r < 0 ? r : add_glob(ev, dir, "*/build/lock");
}

/* "ROOT/<ext>/lock" and "ROOT/<py tag>/<ext>/lock" (torch_extensions layouts). */
static int scan_extensions_root(hdx_evidence *ev, const char *root)
{
    int r = add_glob(ev, root, "*/lock");
    return r < 0 ? r : add_glob(ev, root, "*/*/lock");
}

static int scan_well_known(hdx_evidence *ev, hdx_process *p)
{
    int r;
    if (p->cwd && (r = scan_build_dirs(ev, p->cwd)) < 0)
        return r;
    for (size_t i = 0; i < p->n_cmdline; i++) {
        const char *a = p->cmdline[i];
        size_t l = strlen(a);
        if (l < 4 || strcmp(a + l - 3, ".py") != 0)
            continue;
        char script[PATH_MAX];
        if (a[0] == '/' || !p->cwd)
            snprintf(script, sizeof script, "%s", a);
        else
            snprintf(script, sizeof script, "%s/%s", p->cwd, a);
        char *slash = strrchr(script, '/');
        if (slash && slash != script) {
            *slash = 0;
            if ((!p->cwd || strcmp(script, p->cwd) != 0) && (r = scan_build_dirs(ev, script)) < 0)
                return r;
        }
        break;
    }
    const char *ext = hdx_process_env(p, "TORCH_EXTENSIONS_DIR");
    if (ext)
        return scan_extensions_root(ev, ext);
    char *home = hdx_proc_getenv(p->pid, "HOME");
    if (home) {
        char root[PATH_MAX];
        snprintf(root, sizeof root, "%s/.cache/torch_extensions", home);
        free(home);
        return scan_extensions_root(ev, root);
    }
    return 0;
}

int hdx_locks_collect(hdx_evidence *ev, const hdx_locks_options *opt)
{
    hdx_kernel_lock *kl = NULL;
    size_t nkl = 0, n_watched = 0;
    struct asleep asleep = {0};
    int r;
    if (!ev)
        return -EINVAL;
    if ((r = read_kernel_locks(&kl, &nkl)) < 0 && r != -ENOMEM)
        hdx_evidence_note(ev, "/proc/locks could not be read (%s): kernel lock kinds are guessed from the "
                              "system call",
                          strerror(-r));
    if (r == -ENOMEM)
        return r;
    /* 1. Threads blocked in a kernel lock call, or in FileBaton.wait or FileLock.acquire (Python frames). */
    for (size_t i = 0; i < ev->n_procs; i++) {
        hdx_process *p = &ev->procs[i];
        if (p->alive == 0 || p->pid <= 0)
            continue;
        for (size_t k = 0; k < p->n_threads; k++)
            if ((r = collect_blocked(ev, p, &p->threads[k], kl, nkl)) < 0 ||
                (r = collect_python_lock(ev, p, &p->threads[k])) < 0)
                goto out;
    }
    /* 2. Polling threads of processes with no known lock: a bounded watch. */
    if (opt && opt->watch_ms > 0) {
        for (size_t i = 0; i < ev->n_procs; i++) {
            hdx_process *p = &ev->procs[i];
            if (p->alive == 0 || p->pid <= 0 || has_known_lock(ev, p->pid))
                continue;
            if ((r = watch_process(ev, p, opt->watch_ms, &n_watched, &asleep)) < 0)
                goto out;
        }
        if (n_watched)
            hdx_evidence_note(ev, "a bounded syscall watch (one poll round, at most %d ms each) ran on %zu polling thread%s "
                                  "to see which files they poll",
                              opt->watch_ms, n_watched, n_watched == 1 ? "" : "s");
        if (asleep.n)
            hdx_evidence_note(ev, "not watched, as %s sleep%s past the watch's %d ms (by %s clock_nanosleep "
                                  "deadline): %s%s",
                              asleep.n == 1 ? "this thread" : "these threads", asleep.n == 1 ? "s" : "",
                              opt->watch_ms, asleep.n == 1 ? "its" : "each one's", asleep.text, asleep.n > asleep.shown ? ", ..." : "");
    }
    /* 3. The well-known places, for processes whose wait is still unexplained. */
    for (size_t i = 0; i < ev->n_procs; i++) {
        hdx_process *p = &ev->procs[i];
        if (p->alive == 0 || p->pid <= 0 || has_known_lock(ev, p->pid))
            continue;
        if ((r = scan_well_known(ev, p)) < 0)
            goto out;
    }
    for (size_t i = 0; opt && i < opt->n_dirs; i++) {
        hdx_lock_search found;
        r = hdx_locks_find_files(opt->dirs[i], &found);
        if (r < 0 && r != -ENOMEM)
            hdx_evidence_note(ev, "%s: cannot look for lock files: %s", opt->dirs[i], strerror(-r));
        else if (found.cut)
            hdx_evidence_note(ev, "%s: lock files looked for in %zu directories, %d levels down at most: deeper or "
                                  "further ones were not read (give the build directory itself)",
                              opt->dirs[i], found.dirs, HDX_LOCKS_MAX_DEPTH);
        for (size_t k = 0; k < found.n_files && r >= 0; k++)
            r = add_found_file(ev, found.files[k].path);
        hdx_lock_search_clear(&found);
        if (r == -ENOMEM)
            goto out;
    }
    r = 0;
out:
    free(kl);
    return r;
}

/* ---- facts --------------------------------------------------------------- */

static int pid_alive(int pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Record pid's liveness once in f. 0 or -ENOMEM. */
static int add_pid_fact(hdx_lock_facts *f, int pid)
{
    if (pid <= 0)
        return 0;
    for (size_t i = 0; i < f->n_pids; i++)
        if (f->pids[i].pid == pid)
            return 0;
    hdx_pid_fact *x = hdx_append((void **)&f->pids, &f->n_pids, sizeof *x);
    if (!x)
        return -ENOMEM;
    x->pid = pid;
    x->alive = pid_alive(pid);
    x->start_ticks = x->alive ? hdx_proc_start_ticks(pid) : 0;
    return 0;
}

/* The processes that have the file open (hangdx excluded), into f. 0 or -ENOMEM. */
static int record_openers(hdx_evidence *ev, hdx_lock *l, const struct stat *st)
{
    hdx_lock_facts *f = &l->facts;
    int *pids = NULL;
    size_t n = 0, unreadable = 0;
    int r = hdx_proc_openers(st->st_dev, st->st_ino, &pids, &n, &unreadable);
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        hdx_evidence_note(ev, "%s: could not list the processes that have it open: %s", l->path, strerror(-r));
        return 0;
    }
    f->openers = pids;
    f->n_openers = n;
    f->openers_read = 1;
    f->unreadable = (int)unreadable;
    for (size_t i = 0; i < n; i++)
        if (add_pid_fact(f, pids[i]) < 0)
            return -ENOMEM;
    return 0;
}

/* 1 when a live process other than l's waiters has it open or holds its kernel lock. */
static int seen_holder(const hdx_lock *l)
{
    const hdx_lock_facts *f = &l->facts;
    for (size_t i = 0; i < f->n_pids; i++) {
        int waiter = 0;
        for (size_t k = 0; k < l->n_waiters && !waiter; k++)
            waiter = l->waiters[k].pid == f->pids[i].pid;
        if (f->pids[i].alive == 1 && !waiter)
            return 1;
    }
    return 0;
}

/* What this host sees of l now, into l->facts (replacing what was there). 0 or -ENOMEM. */
static int record_one(hdx_evidence *ev, hdx_lock *l, const hdx_kernel_lock *kl, size_t nkl, int kl_read,
                      int remote)
{
    struct stat st;
    hdx_lock_facts *f = &l->facts;
    hdx_lock_facts_clear(f);
    f->looked = 1;
    f->live = ev->live;
    f->rows_read = kl_read;
    if (remote || l->foreign) { /* another host's, or a container's path not mappable here */
        l->exists = HDX_UNKNOWN;
        return 0;
    }
    f->checked = 1;
    /* stat, not lstat: the kernel locks the file a link leads to, and /proc/locks names that
     * file's inode; 'hangdx locks --clean-stale' refuses links itself before deleting. */
    if (stat(l->path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            l->exists = 0;
        } else {
            l->exists = HDX_UNKNOWN;
            hdx_evidence_note(ev, "%s: cannot stat: %s", l->path, strerror(errno));
        }
        return 0;
    }
    l->exists = 1;
    l->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    f->dev = (uint64_t)st.st_dev;
    f->ino = (uint64_t)st.st_ino;
    f->size = (int64_t)st.st_size;
    f->uid = (int)st.st_uid;
    for (size_t i = 0; i < nkl; i++) {
        enum hdx_lock_kind k;
        if (!same_file(&kl[i], &st) || kind_from_kernel(kl[i].kind, &k) != 0)
            continue;
        hdx_lock_row *row = hdx_append((void **)&f->rows, &f->n_rows, sizeof *row);
        if (!row)
            return -ENOMEM;
        row->pid = kl[i].pid > 0 ? kl[i].pid : HDX_UNKNOWN;
        row->kind = k;
        row->blocking = kl[i].blocked;
        if (!kl[i].blocked && add_pid_fact(f, kl[i].pid) < 0)
            return -ENOMEM;
    }
    if (record_openers(ev, l, &st) < 0)
        return -ENOMEM;
    if (!seen_holder(l) && f->unreadable)
        hdx_evidence_note(ev, "%s: %d process%s could not be read to see whether they have it open (run as "
                              "root to check all)",
                          l->path, f->unreadable, f->unreadable == 1 ? "" : "es");
    return 0;
}

int hdx_locks_record_facts(hdx_evidence *ev, int keep_recorded)
{
    hdx_kernel_lock *kl = NULL;
    size_t nkl = 0;
    int kl_read = 0, r = 0;
    if (!ev)
        return -EINVAL;
    size_t todo = 0;
    for (size_t i = 0; i < ev->n_locks; i++)
        todo += !keep_recorded || (!ev->locks[i].facts.looked && !ev->locks[i].recorded);
    int remote = !ev->live && ev->host && strcmp(ev->host, hdx_hostname()) != 0;
    if (remote && todo)
        hdx_evidence_note(ev, "the traces come from host %s: the lock files and their holders there could not be "
                              "checked from %s",
                          ev->host, hdx_hostname());
    if (!remote && todo) {
        r = read_kernel_locks(&kl, &nkl);
        if (r == -ENOMEM)
            return r;
        if (r < 0)
            hdx_evidence_note(ev, "/proc/locks could not be read (%s): kernel lock holders unknown", strerror(-r));
        kl_read = r == 0;
        r = 0;
    }
    for (size_t i = 0; i < ev->n_locks && r == 0; i++) {
        hdx_lock *l = &ev->locks[i];
        if (!keep_recorded || (!l->facts.looked && !l->recorded))
            r = record_one(ev, l, kl, nkl, kl_read, remote);
    }
    free(kl);
    return r;
}

/* ---- find files ----------------------------------------------------------- */

/* Directories a build never puts its lock in, and that hold many files. */
static int skipped_dir(const char *name)
{
    return !strcmp(name, ".git") || !strcmp(name, "node_modules") || !strcmp(name, "__pycache__");
}

/* "py311_cu121", "py310_cpu": the directory ~/.cache/torch_extensions names for a Python
 * version and a CUDA (or none), as cpp_extension's _get_build_directory makes it. */
static int py_tag(const char *name, size_t len)
{
    size_t i = 2;
    if (len < 5 || strncmp(name, "py", 2))
        return 0;
    while (i < len && isdigit((unsigned char)name[i]))
        i++;
    return i > 2 && i + 1 < len && name[i] == '_';
}

/* Is the component of rel that ends at end (exclusive) named name? */
static int component_is(const char *rel, const char *end, const char *name)
{
    size_t n = strlen(name);
    return end - rel >= (ptrdiff_t)n && !strncmp(end - n, name, n) && (end - n == rel || end[-(ptrdiff_t)n - 1] == '/');
}

/*
 * Is rel (below the searched directory, last component "lock") in a build directory by
 * its place: the searched directory itself, DIR/<ext>, DIR/py<tag>/<ext>, any
 * .../torch_extensions/<ext> or .../torch_extensions/py<tag>/<ext>, or any .../build?
 * The contents (build.ninja) are the caller's to check.
 */
static int baton_place(const char *rel)
{
    const char *slash = strrchr(rel, '/');
    if (!slash)
        return 1; /* DIR/lock */
    const char *parent = slash;
    while (parent > rel && parent[-1] != '/')
        parent--;
    if (component_is(rel, slash, "build"))
        return 1; /* .../build/lock */
    if (parent == rel)
        return 1; /* DIR/<ext>/lock */
    const char *up = parent - 1, *tag = up; /* up: the '/' before <ext> */
    if (component_is(rel, up, "torch_extensions"))
        return 1; /* .../torch_extensions/<ext>/lock */
    while (tag > rel && tag[-1] != '/')
        tag--;
    if (!py_tag(tag, (size_t)(up - tag)))
        return 0;
    return tag == rel || component_is(rel, tag - 1, "torch_extensions"); /* [.../torch_extensions/]py311_cpu/<ext>/lock */
}

/* Why the file called name, in the directory open at dirfd (rel below the searched one),
 * is not a FileBaton lock; NULL when it is one, or when its name is no lock's. */
static const char *not_baton(int dirfd, const char *name, const char *rel, const struct stat *st,
                             const char **why)
{
    size_t l = strlen(name);
    struct stat ninja;
    const char *why_not;
    *why = NULL;
    if (strcmp(name, "lock") != 0) {
        if (l > 5 && !strcmp(name + l - 5, ".lock"))
            *why = (why_not = hdx_locks_not_builders(rel))
                       ? why_not
                       : "not a FileBaton's \"lock\": hangdx takes a \"*.lock\" only when a trace shows a build "
                         "made it (a flock lock file locks nothing once its holder is gone)";
        return *why;
    }
    if (st->st_size != 0)
        *why = "not empty: a FileBaton's lock is an empty file";
    else if (!baton_place(rel) && fstatat(dirfd, "build.ninja", &ninja, AT_SYMLINK_NOFOLLOW) != 0)
        *why = "not in a build directory (no build.ninja, not named build, not in a torch_extensions layout)";
    return *why;
}

static int add_left(hdx_lock_search *s, const char *path, const char *why)
{
    if (s->n_left >= HDX_LOCKS_MAX_LEFT) {
        s->n_left_more++;
        return 0;
    }
    hdx_lock_left *x = hdx_append((void **)&s->left, &s->n_left, sizeof *x);
    if (!x || !(x->path = strdup(path)))
        return -ENOMEM;
    x->why = why;
    return 0;
}

static int add_file(hdx_lock_search *s, const char *path, size_t root_len, const struct stat *st)
{
    hdx_lock_file *x = hdx_append((void **)&s->files, &s->n_files, sizeof *x);
    if (!x || !(x->path = strdup(path)))
        return -ENOMEM;
    x->rel = x->path + root_len + 1;
    x->dev = (uint64_t)st->st_dev;
    x->ino = (uint64_t)st->st_ino;
    return 0;
}

/*
 * The lock files under the directory open at dirfd (its path `dir`, the searched one's
 * being root_len long), depth levels down at most, through directory descriptors (openat
 * with O_NOFOLLOW, fstatat without following links): a symbolic link is never followed,
 * and a directory swapped for a link while the walk runs is not entered. dirfd is closed.
 */
static int walk(int dirfd, const char *dir, size_t root_len, int depth, hdx_lock_search *s)
{
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return -errno;
    }
    s->dirs++;
    struct dirent *de;
    int r = 0;
    while (r == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        char *path = hdx_asprintf("%s/%s", strcmp(dir, "/") ? dir : "", de->d_name);
        if (!path) {
            r = -ENOMEM;
            break;
        }
        const char *why;
        if (S_ISREG(st.st_mode)) {
            const char *rel = path + (root_len > 1 ? root_len + 1 : 1);
            if (not_baton(dirfd, de->d_name, rel, &st, &why))
                r = add_left(s, path, why);
            else if (!strcmp(de->d_name, "lock"))
                r = add_file(s, path, root_len > 1 ? root_len : 0, &st);
        } else if (S_ISDIR(st.st_mode) && !skipped_dir(de->d_name)) {
            if (depth <= 0 || s->dirs >= HDX_LOCKS_MAX_DIRS) {
                s->cut = 1;
            } else {
                int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0 && walk(sub, path, root_len, depth - 1, s) == -ENOMEM)
                    r = -ENOMEM; /* an unreadable subdirectory is skipped */
            }
        }
        free(path);
    }
    closedir(d);
    return r;
}

void hdx_lock_search_clear(hdx_lock_search *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_files; i++)
        free(s->files[i].path);
    for (size_t i = 0; i < s->n_left; i++)
        free(s->left[i].path);
    free(s->files);
    free(s->left);
    if (s->rootfd >= 0)
        close(s->rootfd);
    memset(s, 0, sizeof *s);
    s->rootfd = -1;
}

int hdx_locks_find_files(const char *dir, hdx_lock_search *s)
{
    char abs[PATH_MAX];
    if (!s)
        return -EINVAL;
    memset(s, 0, sizeof *s);
    s->rootfd = -1;
    if (!dir)
        return -EINVAL;
    /* Made absolute, never resolved: realpath would turn a container's file seen through
     * /proc/PID/root/... into this host's namesake (the magic link reads "/"). */
    char cwd[PATH_MAX];
    while (dir[0] == '.' && dir[1] == '/')
        dir += 2;
    if (!strcmp(dir, "."))
        dir = "";
    int len = dir[0] == '/' ? snprintf(abs, sizeof abs, "%s", dir)
              : getcwd(cwd, sizeof cwd) ? snprintf(abs, sizeof abs, "%s%s%s", cwd, dir[0] ? "/" : "", dir) : -1;
    if (len < 0 || (size_t)len >= sizeof abs)
        return len < 0 ? -errno : -ENAMETOOLONG;
    while (len > 1 && abs[len - 1] == '/')
        abs[--len] = 0;
    if (hdx_outfile_foreign_link(abs)) /* another user's link would choose what is deleted */
        return -EPERM;
    if ((s->rootfd = open(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        s->rootfd = -1;
        return -errno;
    }
    int fd = dup(s->rootfd); /* the walk closes its own; rootfd stays for the caller */
    if (fd < 0)
        return -errno;
    return walk(fd, abs, (size_t)len, HDX_LOCKS_MAX_DEPTH, s);
}
