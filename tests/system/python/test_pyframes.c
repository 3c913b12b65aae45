/*
 * The Python frame reader on real interpreters: park.py parks three threads
 * at known lines; for every CPython >= 3.8 on this machine, read it from
 * outside and compare functions, files, lines, TIDs, entry flags and locals
 * exactly. Then read it many times while its busy thread runs, read it after
 * it died, and attach to processes that are not Python.
 *
 *   test_pyframes PARK_PY
 *
 * Exit 0 all passed, 1 a failure, 77 no interpreter to test.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/evidence.h"
#include "python/pyimpl.h"
#include "python/python.h"
#include "pyinterps.h"

static const char *park;
static int failures;

/* ------------------------------------------------------------ markers */

typedef struct marker {
    char name[32];
    int line;
} marker;
static marker markers[32];
static size_t n_markers;

static void load_markers(void)
{
    FILE *f = fopen(park, "r");
    if (!f) {
        perror(park);
        exit(1);
    }
    char buf[512];
    int line = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        char *m = strstr(buf, "# @");
        if (m && n_markers < 32) {
            sscanf(m + 3, "%31s", markers[n_markers].name);
            markers[n_markers++].line = line;
        }
    }
    fclose(f);
}

static int L(const char *name)
{
    for (size_t i = 0; i < n_markers; i++)
        if (!strcmp(markers[i].name, name))
            return markers[i].line;
    fprintf(stderr, "no marker @%s in %s\n", name, park);
    exit(1);
}

/* ------------------------------------------------------------ checking */

static char why[4096];

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return s && a >= b && !strcmp(s + a - b, suffix);
}

typedef struct want_frame {
    const char *fn311; /* qualified name (3.11+) */
    const char *fn;    /* co_name (3.8–3.10) */
    const char *file;  /* "park" or a suffix such as "/threading.py" */
    int line, line2;   /* 0: any; line2: an alternative */
    int entry;         /* 1, 0, or -1 any */
} want_frame;

static int check_frames(const hdx_py_thread *t, const char *who, int minor, const want_frame *w, size_t n)
{
    if (t->partial)
        return bad("%s: partial stack (%s)", who, strerror(-t->partial));
    if (t->n_frames != n)
        return bad("%s: %zu frames, want %zu (innermost %s)", who, t->n_frames, n,
                   t->n_frames ? t->frames[0].function : "-");
    for (size_t i = 0; i < n; i++) {
        const hdx_frame *f = &t->frames[i];
        const char *fn = minor >= 11 ? w[i].fn311 : w[i].fn;
        if (f->kind != HDX_FRAME_PYTHON)
            return bad("%s frame %zu: kind %d", who, i, f->kind);
        if (!f->function || strcmp(f->function, fn))
            return bad("%s frame %zu: function %s, want %s", who, i, f->function, fn);
        int file_ok = !strcmp(w[i].file, "park") ? (f->file && !strcmp(f->file, park)) : ends_with(f->file, w[i].file);
        if (!file_ok)
            return bad("%s frame %zu (%s): file %s, want %s", who, i, fn, f->file,
                       !strcmp(w[i].file, "park") ? park : w[i].file);
        if (w[i].line && f->line != w[i].line && f->line != w[i].line2)
            return bad("%s frame %zu (%s): line %d, want %d", who, i, fn, f->line, w[i].line);
        if (!w[i].line && f->line <= 0)
            return bad("%s frame %zu (%s): no line", who, i, fn);
        int entry = minor <= 10 ? 1 : w[i].entry;
        if (entry >= 0 && (t->is_entry[i] != 0) != entry)
            return bad("%s frame %zu (%s): is_entry %d, want %d", who, i, fn, t->is_entry[i], entry);
    }
    return 0;
}

static const hdx_local *local(const hdx_frame *f, const char *name)
{
    for (size_t i = 0; i < f->n_locals; i++)
        if (!strcmp(f->locals[i].name, name))
            return &f->locals[i];
    return NULL;
}

static int want_int(const hdx_frame *f, const char *name, long long v, enum hdx_value_kind k)
{
    const hdx_local *l = local(f, name);
    if (!l)
        return bad("%s: no local %s", f->function, name);
    if (l->kind != k || l->i != v)
        return bad("%s: local %s = kind %d %lld, want kind %d %lld", f->function, name, l->kind, l->i, k, v);
    return 0;
}

static int want_str(const hdx_frame *f, const char *name, enum hdx_value_kind k, const char *s)
{
    const hdx_local *l = local(f, name);
    if (!l)
        return bad("%s: no local %s", f->function, name);
    if (l->kind != k || !l->s || strcmp(l->s, s))
        return bad("%s: local %s = kind %d \"%s\", want kind %d \"%s\"", f->function, name, l->kind,
                   l->s ? l->s : "(null)", k, s);
    return 0;
}

typedef struct tids {
    int main, worker, busy;
} tids;

static const hdx_py_thread *by_tid(const hdx_py_sample *s, int tid)
{
    for (size_t i = 0; i < s->n_threads; i++)
        if (s->threads[i].tid == tid)
            return &s->threads[i];
    return NULL;
}

static int check_sample(const hdx_py_sample *s, int minor, const tids *ids, int pid)
{
    if (s->partial)
        return bad("thread list partial (%s)", strerror(-s->partial));
    if (s->n_threads != 3)
        return bad("%zu Python threads, want 3", s->n_threads);
    if (ids->main != pid)
        return bad("main TID %d is not the PID %d", ids->main, pid);
    const hdx_py_thread *m = by_tid(s, ids->main), *w = by_tid(s, ids->worker), *b = by_tid(s, ids->busy);
    if (!m || !w || !b)
        return bad("TIDs read (%d %d %d) are not main %d, worker %d, busy %d", s->threads[0].tid,
                   s->threads[1].tid, s->threads[2].tid, ids->main, ids->worker, ids->busy);
    int gil = 0;
    for (size_t i = 0; i < s->n_threads; i++) {
        if (s->threads[i].holds_gil == HDX_UNKNOWN)
            return bad("GIL state unknown");
        gil += s->threads[i].holds_gil == 1;
        if (s->threads[i].interp_id != 0)
            return bad("interpreter id %lld", (long long)s->threads[i].interp_id);
    }
    if (gil > 1)
        return bad("%d threads hold the GIL", gil);

    const want_frame mw[] = {
        { "middle", "middle", "park", L("middle_sleep"), 0, 1 },
        { "outer", "outer", "park", L("outer_map"), 0, 0 },
        { "<module>", "<module>", "park", L("main_outer"), 0, 1 },
    };
    const want_frame ww[] = {
        { "Condition.wait", "wait", "/threading.py", 0, 0, 0 },
        { "Event.wait", "wait", "/threading.py", 0, 0, 0 },
        { "leaf_wait", "leaf_wait", "park", L("leaf_wait"), 0, 0 },
        { "Worker.run", "run", "park", L("worker_run"), 0, 0 },
        { "Thread._bootstrap_inner", "_bootstrap_inner", "/threading.py", 0, 0, 0 },
        { "Thread._bootstrap", "_bootstrap", "/threading.py", 0, 0, 1 },
    };
    const want_frame bw[] = {
        /* Thread.run calls its target with CALL_FUNCTION_EX: a new eval-loop
         * activation in 3.11, inlined from 3.12 (checked against eu-stack's
         * count of _PyEval_EvalFrameDefault frames). */
        { "spin", "spin", "park", L("busy_while"), L("busy_body"), minor == 11 },
        { "Thread.run", "run", "/threading.py", 0, 0, 0 },
        { "Thread._bootstrap_inner", "_bootstrap_inner", "/threading.py", 0, 0, 0 },
        { "Thread._bootstrap", "_bootstrap", "/threading.py", 0, 0, 1 },
    };
    if (check_frames(m, "main", minor, mw, 3) || check_frames(w, "worker", minor, ww, 6) ||
        check_frames(b, "busy", minor, bw, 4))
        return -1;

    /* Locals (docs/python-frames.md "Locals"): every kind of value the reader decodes. */
    const hdx_frame *lf = &w->frames[2];
    if (want_int(lf, "x", 42, HDX_VAL_INT) || want_str(lf, "name", HDX_VAL_STR, "hello") ||
        want_int(lf, "flag", 1, HDX_VAL_BOOL) || want_str(lf, "items", HDX_VAL_OTHER, "list") ||
        want_int(lf, "neg", -1234567890123LL, HDX_VAL_INT) ||
        want_str(lf, "latin", HDX_VAL_STR, "caf\xc3\xa9") ||
        want_str(lf, "wide", HDX_VAL_STR, "na\xc3\xafve\xe2\x86\x92\xe2\x88\x9e") ||
        want_str(lf, "astral", HDX_VAL_STR, "a\xf0\x9f\x98\x80") ||
        want_str(lf, "big", HDX_VAL_OTHER, "int"))
        return -1;
    const hdx_local *l = local(lf, "ratio");
    if (!l || l->kind != HDX_VAL_FLOAT || l->f != 0.5)
        return bad("leaf_wait: local ratio is not the float 0.5");
    l = local(lf, "nothing");
    if (!l || l->kind != HDX_VAL_NONE)
        return bad("leaf_wait: local nothing is not None");
    if (lf->n_locals != 11)
        return bad("leaf_wait: %zu locals, want 11", lf->n_locals);
    const hdx_frame *mf = &m->frames[0];
    if (want_int(mf, "arg", 1, HDX_VAL_INT) || want_int(mf, "counter", 5, HDX_VAL_INT) ||
        want_str(mf, "peek", HDX_VAL_OTHER, "function"))
        return -1;
    const hdx_frame *wr = &w->frames[3];
    if (!local(wr, "self") || strcmp(local(wr, "self")->s, "Worker"))
        return bad("Worker.run: local self is not a Worker");
    return 0;
}

/* ------------------------------------------------------- chaos backend */

/* A memory backend over the live one that, once armed, fails one read in 40
 * with EFAULT and flips a byte in one in 40: what a torn or hostile target
 * looks like. */
typedef struct chaos {
    hdx_pymem live;
    int armed;
    unsigned seed;
    long reads, faults, flips;
} chaos;

static int chaos_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    chaos *c = ctx;
    c->reads++;
    if (c->armed && rand_r(&c->seed) % 40 == 0) {
        c->faults++;
        return -EFAULT;
    }
    int rc = hdx_pymem_read(&c->live, addr, buf, len);
    if (!rc && len && c->armed && rand_r(&c->seed) % 40 == 0) {
        c->flips++;
        ((uint8_t *)buf)[(size_t)rand_r(&c->seed) % len] ^= (uint8_t)(1 + rand_r(&c->seed) % 255);
    }
    return rc;
}

static void chaos_close(void *ctx)
{
    (void)ctx; /* the test owns it */
}

static const hdx_pymem_ops chaos_ops = { chaos_read, chaos_close };

/* Reads through the chaos backend: every one returns, none crashes or hangs. */
static int test_chaos(const pyinterp *py, pid_t pid)
{
    hdx_map *maps;
    size_t n;
    if (hdx_maps_read(pid, &maps, &n))
        return -1;
    chaos c = { .seed = 777 };
    hdx_pymem_live(pid, &c.live);
    hdx_pymem m = { &chaos_ops, &c };
    char root[64], *err = NULL;
    snprintf(root, sizeof root, "/proc/%d/root", pid);
    hdx_pyproc *p = hdx_py_attach_mem(pid, &m, maps, n, root, &err);
    hdx_maps_free(maps, n);
    if (!p) {
        printf("FAIL %s: attach through a custom backend: %s\n", py->label, err);
        free(err);
        hdx_pymem_close(&c.live);
        return -1;
    }
    c.armed = 1;
    int partial = 0, failed = 0;
    for (int i = 0; i < 400; i++) {
        hdx_py_sample s;
        int r = hdx_py_read(p, HDX_PY_LOCALS, &s);
        if (r)
            failed++;
        partial += s.partial != 0;
        for (size_t t = 0; t < s.n_threads; t++) {
            partial += s.threads[t].partial != 0;
            if (s.threads[t].n_frames > HDX_PY_MAX_FRAMES) {
                printf("FAIL %s: %zu frames\n", py->label, s.threads[t].n_frames);
                failed = -1000000;
            }
        }
        hdx_py_sample_clear(&s);
    }
    hdx_py_detach(p);
    hdx_pymem_close(&c.live);
    if (failed < 0)
        return -1;
    printf("ok   %s: 400 reads through a backend that faulted %ld and corrupted %ld of %ld reads: "
           "%d failed cleanly, %d partial\n", py->label, c.faults, c.flips, c.reads, failed, partial);
    return 0;
}

/* ------------------------------------------------------------- processes */

static pid_t spawn(const char *python, const char *tidfile)
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
        execl(python, python, "-u", park, tidfile, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Wait (bounded) for the TID file; 0 or -1. */
static int wait_tids(pid_t pid, const char *tidfile, tids *ids)
{
    for (int i = 0; i < 3000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return -1;
        FILE *f = fopen(tidfile, "r");
        if (f) {
            char name[16];
            int tid;
            memset(ids, 0, sizeof *ids);
            while (fscanf(f, "%15s %d", name, &tid) == 2) {
                if (!strcmp(name, "main"))
                    ids->main = tid;
                else if (!strcmp(name, "worker"))
                    ids->worker = tid;
                else if (!strcmp(name, "busy"))
                    ids->busy = tid;
            }
            fclose(f);
            return ids->main && ids->worker && ids->busy ? 0 : -1;
        }
        sleep_ms(10);
    }
    return -1;
}

static void print_thread(const hdx_py_thread *t)
{
    printf("    thread %d%s%s\n", t->tid, t->holds_gil == 1 ? " (GIL)" : "",
           t->partial ? " PARTIAL" : "");
    for (size_t i = 0; i < t->n_frames; i++) {
        printf("      %c %s (%s:%d)\n", t->is_entry[i] ? '*' : ' ', t->frames[i].function,
               t->frames[i].file, t->frames[i].line);
        for (size_t j = 0; j < t->frames[i].n_locals; j++) {
            const hdx_local *l = &t->frames[i].locals[j];
            printf("          %s = kind %d i=%lld f=%g s=%s\n", l->name, l->kind, l->i, l->f,
                   l->s ? l->s : "");
        }
    }
}

static int test_interp(const pyinterp *py)
{
    char tidfile[] = "/tmp/hdx-park-XXXXXX";
    int fd = mkstemp(tidfile);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(tidfile);
    pid_t pid = spawn(py->path, tidfile);
    tids ids;
    int rc = -1;
    hdx_pyproc *p = NULL;
    hdx_py_sample s = { 0 };
    if (pid < 0 || wait_tids(pid, tidfile, &ids)) {
        printf("FAIL %s: the fixture did not start\n", py->label);
        goto out;
    }
    char *err = NULL;
    p = hdx_py_attach(pid, &err);
    if (!p) {
        printf("FAIL %s: attach: %s\n", py->label, err);
        free(err);
        goto out;
    }
    if (hdx_py_version(p) != (0x0300 | py->minor)) {
        printf("FAIL %s: version %#x, want 3.%d\n", py->label, hdx_py_version(p), py->minor);
        goto out;
    }
    /* The parked threads settle within moments; the busy one may be seen
     * between lines. Retry (bounded) until everything matches. */
    int ok = 0;
    for (int attempt = 0; attempt < 200 && !ok; attempt++) {
        hdx_py_sample_clear(&s);
        int r = hdx_py_read(p, HDX_PY_LOCALS, &s);
        if (r) {
            bad("hdx_py_read: %s", strerror(-r));
            continue;
        }
        ok = check_sample(&s, py->minor, &ids, pid) == 0;
        if (!ok)
            sleep_ms(50);
    }
    if (!ok) {
        printf("FAIL %s: %s\n", py->label, why);
        for (size_t i = 0; i < s.n_threads; i++)
            print_thread(&s.threads[i]);
        goto out;
    }
    printf("ok   %s: %s (version from %s), 3 threads, lines, TIDs, entries and locals exact\n",
           py->label, hdx_py_binary(p), hdx_py_version_source(p));
    if (getenv("HDX_TEST_VERBOSE"))
        for (size_t i = 0; i < s.n_threads; i++)
            print_thread(&s.threads[i]);

    /* Robustness: many reads while the busy thread runs. */
    int partial = 0;
    for (int i = 0; i < 300; i++) {
        hdx_py_sample_clear(&s);
        int r = hdx_py_read(p, i % 2 ? HDX_PY_LOCALS : 0, &s);
        if (r) {
            printf("FAIL %s: read %d while running: %s\n", py->label, i, strerror(-r));
            goto out;
        }
        for (size_t t = 0; t < s.n_threads; t++)
            partial += s.threads[t].partial != 0;
        if (s.n_threads != 3) {
            printf("FAIL %s: read %d while running: %zu threads\n", py->label, i, s.n_threads);
            goto out;
        }
    }
    printf("ok   %s: 300 reads while running (%d torn stacks marked partial)\n", py->label, partial);

    if (test_chaos(py, pid))
        goto out;

    /* The Py_GetVersion() string scan (docs/python-frames.md "The version"), the fallback for 3.8–3.10
     * binaries with unusual names, on every interpreter. */
    hdx_map *maps;
    size_t nmaps;
    if (!hdx_maps_read(pid, &maps, &nmaps)) {
        int v = hdx_py_scan_version(p, maps, nmaps);
        hdx_maps_free(maps, nmaps);
        if (v != (0x0300 | py->minor)) {
            printf("FAIL %s: the version string scan found %#x\n", py->label, v);
            goto out;
        }
        printf("ok   %s: the Py_GetVersion() string scan says 3.%d\n", py->label, v & 0xff);
    }

    /* ≤3.10: with a wrong struct pthread offset, the scan finds the right one. */
    if (py->minor <= 10) {
        int good = hdx_py_tid_offset(p);
        hdx_py_set_tid_offset(p, 0x18);
        hdx_py_sample_clear(&s);
        if (hdx_py_read(p, 0, &s) || !by_tid(&s, ids.main) || !by_tid(&s, ids.worker) ||
            !by_tid(&s, ids.busy) || hdx_py_tid_offset(p) != good) {
            printf("FAIL %s: the struct pthread scan found offset %#x, not %#x\n", py->label,
                   hdx_py_tid_offset(p), good);
            goto out;
        }
        printf("ok   %s: the struct pthread TID scan found %#x\n", py->label, good);
    }

    /* A dead target: an error, not a crash. */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    pid = -1;
    hdx_py_sample_clear(&s);
    int r = hdx_py_read(p, HDX_PY_LOCALS, &s);
    if (r >= 0) {
        printf("FAIL %s: reading a dead process returned %d\n", py->label, r);
        goto out;
    }
    rc = 0;
out:
    hdx_py_sample_clear(&s);
    hdx_py_detach(p);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    unlink(tidfile);
    return rc;
}

/* Attaching to what is not Python: ENOENT with a message; no process: ESRCH. */
static int test_not_python(void)
{
    char *err = NULL;
    errno = 0;
    hdx_pyproc *p = hdx_py_attach(getpid(), &err);
    if (p || errno != ENOENT || !err) {
        printf("FAIL not-python (self): p=%p errno=%d err=%s\n", (void *)p, errno, err ? err : "(null)");
        hdx_py_detach(p);
        free(err);
        return -1;
    }
    printf("ok   not Python (self): %s\n", err);
    free(err);

    pid_t child = fork();
    if (child == 0) {
        execl("/bin/sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    sleep_ms(100);
    errno = 0;
    p = hdx_py_attach(child, &err);
    int e = errno;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    if (p || e != ENOENT) {
        printf("FAIL not-python (/bin/sleep): p=%p errno=%d\n", (void *)p, e);
        hdx_py_detach(p);
        free(err);
        return -1;
    }
    free(err);
    errno = 0;
    p = hdx_py_attach(child, &err); /* reaped: gone */
    e = errno;
    free(err);
    if (p || e != ESRCH) {
        printf("FAIL no process: p=%p errno=%d, want ESRCH\n", (void *)p, e);
        hdx_py_detach(p);
        return -1;
    }
    printf("ok   not Python (/bin/sleep): ENOENT; gone: ESRCH\n");
    hdx_py_read(NULL, 0, &(hdx_py_sample){ 0 });
    hdx_py_sample_clear(NULL);
    hdx_py_detach(NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PARK_PY\n", argv[0]);
        return 2;
    }
    park = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    load_markers();
    if (test_not_python())
        failures++;

    pyinterp py[32];
    size_t n = pyi_find(py, 32);
    if (!n) {
        printf("SKIP: no CPython >= 3.8 on this machine\n");
        return failures ? 1 : 77;
    }
    char covered[4096] = "";
    for (size_t i = 0; i < n; i++) {
        if (test_interp(&py[i]))
            failures++;
        else
            snprintf(covered + strlen(covered), sizeof covered - strlen(covered), "%s%.60s",
                     *covered ? ", " : "", py[i].label);
    }
    printf("covered: %s\n", *covered ? covered : "none");
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
