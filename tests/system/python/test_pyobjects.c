/*
 * The Python object reader (pyobj.c) on real interpreters.
 *
 *   test_pyobjects objects PYOBJECTS_PY   every CPython >= 3.8 of the machine:
 *       pyobjects.py fakes torch.distributed's and Megatron's module state
 *       with plain objects; the process groups, names, ranks, roles, the
 *       default group (three ways), attributes of split, materialized and
 *       managed dicts, large dicts, lists, tuples and functions are compared
 *       exactly; wild and freed addresses must give errors; reads through a
 *       faulting backend must all return.
 *   test_pyobjects torch TORCH_GROUPS_PY  Debian's python3 with torch: 4 gloo
 *       ranks on 127.0.0.1; rank 2's groups and its parked frame's `group`.
 *
 * Exit 0 all passed, 1 a failure, 77 nothing to test here (a line says why).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/evidence.h"
#include "python/pyimpl.h"
#include "python/python.h"
#include "pyinterps.h"

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

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static pid_t spawn(const char *python, const char *script, char *const extra[])
{
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[16] = { (char *)python, "-u", (char *)script };
        int n = 3;
        for (int i = 0; extra[i] && n < 15; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
        execv(python, argv);
        _exit(127);
    }
    return pid;
}

static void reap(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* Wait (bounded, 60 s) until path holds a line "stage N" or "ready"; 0 or -1 (also when pid exited). */
static int wait_line(pid_t pid, const char *path, const char *line)
{
    for (int i = 0; i < 6000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return -1;
        FILE *f = fopen(path, "r");
        if (f) {
            char buf[256];
            int found = 0;
            while (!found && fgets(buf, sizeof buf, f))
                found = !strncmp(buf, line, strlen(line));
            fclose(f);
            if (found)
                return 0;
        }
        sleep_ms(10);
    }
    return -1;
}

/* The value of "NAME VALUE" in the file, or 0. */
static uint64_t addr_of(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    char key[64];
    unsigned long long v;
    uint64_t found = 0;
    while (f && fscanf(f, "%63s %llu", key, &v) == 2)
        if (!strcmp(key, name))
            found = v;
    if (f)
        fclose(f);
    return found;
}

/* ---------------------------------------------------------- expectations */

typedef struct want_group {
    const char *var;  /* the fixture's variable */
    const char *name;
    const char *role; /* NULL none */
    int ranks[4];
    size_t n;
    int is_default;
} want_group;

/* The local `group` of the frame "park" is the object at obj (hdx_local.addr). */
static int check_park_group(hdx_pyproc *p, uint64_t obj)
{
    hdx_py_sample s;
    int rc = hdx_py_read(p, HDX_PY_LOCALS, &s);
    if (rc)
        return bad("hdx_py_read: %s", strerror(-rc));
    const hdx_local *l = NULL;
    for (size_t t = 0; t < s.n_threads && !l; t++)
        for (size_t f = 0; f < s.threads[t].n_frames && !l; f++)
            if (s.threads[t].frames[f].function && !strcmp(s.threads[t].frames[f].function, "park"))
                l = hdx_frame_local(&s.threads[t].frames[f], "group");
    rc = !l ? bad("no frame park with a local group")
         : l->addr != obj ? bad("park's group is at %#llx, the group at %#llx", (unsigned long long)l->addr,
                                (unsigned long long)obj)
                          : 0;
    hdx_py_sample_clear(&s);
    return rc;
}

static int check_groups(hdx_pyproc *p, const char *ready, const want_group *w, size_t n)
{
    hdx_py_pgroups g;
    int rc = hdx_py_read_pgroups(p, &g);
    if (rc)
        return bad("hdx_py_read_pgroups: %s", strerror(-rc));
    rc = -1;
    if (g.partial) {
        bad("partial: %s", strerror(-g.partial));
        goto out;
    }
    if (g.n != n) {
        bad("%zu groups, want %zu", g.n, n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t obj = addr_of(ready, w[i].var);
        const hdx_py_pgroup *pg = NULL;
        for (size_t j = 0; j < g.n; j++)
            if (g.groups[j].obj == obj)
                pg = &g.groups[j];
        if (!pg) {
            bad("no group at %s's address %#llx", w[i].var, (unsigned long long)obj);
            goto out;
        }
        if (!pg->name || strcmp(pg->name, w[i].name)) {
            bad("%s: name %s, want %s", w[i].var, pg->name ? pg->name : "(null)", w[i].name);
            goto out;
        }
        if ((pg->role == NULL) != (w[i].role == NULL) || (pg->role && strcmp(pg->role, w[i].role))) {
            bad("%s: role %s, want %s", w[i].var, pg->role ? pg->role : "(null)",
                w[i].role ? w[i].role : "(null)");
            goto out;
        }
        if (pg->is_default != w[i].is_default || pg->desc) {
            bad("%s: is_default %d, want %d (desc %s)", w[i].var, pg->is_default, w[i].is_default,
                pg->desc ? pg->desc : "(null)");
            goto out;
        }
        if (pg->n_ranks != w[i].n || memcmp(pg->ranks, w[i].ranks, w[i].n * sizeof(int))) {
            bad("%s: %zu ranks (first %d), want %zu", w[i].var, pg->n_ranks,
                pg->n_ranks ? pg->ranks[0] : -1, w[i].n);
            goto out;
        }
    }
    rc = 0;
out:
    hdx_py_pgroups_clear(&g);
    return rc;
}

static int want_attr(hdx_pyproc *p, uint64_t obj, const char *who, const char *name,
                     enum hdx_value_kind kind, long long i, double f, const char *s)
{
    hdx_local l = { 0 };
    int rc = hdx_py_getattr(p, obj, name, &l);
    if (rc) {
        free(l.s);
        return bad("%s.%s: %s", who, name, strerror(-rc));
    }
    int ok = l.kind == kind && l.addr != 0 &&
             (kind != HDX_VAL_INT && kind != HDX_VAL_BOOL ? 1 : l.i == i) &&
             (kind != HDX_VAL_FLOAT || l.f == f) &&
             (kind != HDX_VAL_STR && kind != HDX_VAL_OTHER ? 1 : l.s && !strcmp(l.s, s));
    if (!ok)
        bad("%s.%s: kind %d i=%lld f=%g s=%s addr=%#llx, want kind %d i=%lld f=%g s=%s", who, name,
            l.kind, l.i, l.f, l.s ? l.s : "(null)", (unsigned long long)l.addr, kind, i, f, s ? s : "");
    free(l.s);
    return ok ? 0 : -1;
}

/* Values of hdx_pyrd_value for the items of a list or tuple. */
static int want_items(hdx_pyproc *p, uint64_t obj, const char *who, const enum hdx_value_kind *kinds,
                      size_t n)
{
    uint64_t *items;
    size_t got;
    int rc = hdx_py_seq_items(p, obj, 16, &items, &got);
    if (rc)
        return bad("%s: hdx_py_seq_items: %s", who, strerror(-rc));
    rc = got == n ? 0 : bad("%s: %zu items, want %zu", who, got, n);
    for (size_t i = 0; !rc && i < n; i++) {
        hdx_local l = { 0 };
        hdx_pyrd_value(p, items[i], &l);
        if (l.kind != kinds[i] || l.addr != items[i])
            rc = bad("%s[%zu]: kind %d, want %d", who, i, l.kind, kinds[i]);
        free(l.s);
    }
    free(items);
    return rc;
}

static int want_dict_int(hdx_pyproc *p, uint64_t dict, const char *who, const char *key, long long v,
                         size_t n)
{
    uint64_t val;
    long long got;
    hdx_pydict_item *it;
    size_t count;
    int rc = hdx_pydict_get(p, dict, key, &val);
    if (!rc)
        rc = hdx_pyobj_int(p, val, &got);
    if (rc || got != v)
        return bad("%s[%s]: rc %d value %lld, want %lld", who, key, rc, rc ? 0 : got, v);
    if ((rc = hdx_pydict_items(p, dict, HDX_PYOBJ_MAX_ITEMS, &it, &count)) || count != n)
        return bad("%s: %zu items (rc %d), want %zu", who, count, rc, n);
    free(it);
    if ((rc = hdx_pydict_items(p, dict, n - 1, &it, &count)) != -E2BIG)
        return bad("%s: reading at most %zu items gave %d, want -E2BIG", who, n - 1, rc);
    return 0;
}

/* -------------------------------------------------------- chaos backend */

/* A backend over the live one that fails one read in 30 with EFAULT and
 * flips a byte in one in 30: a target that changes under the reader. */
typedef struct chaos {
    hdx_pymem live;
    unsigned seed;
    long reads, faults, flips;
} chaos;

static int chaos_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    chaos *c = ctx;
    c->reads++;
    if (rand_r(&c->seed) % 30 == 0) {
        c->faults++;
        return -EFAULT;
    }
    int rc = hdx_pymem_read(&c->live, addr, buf, len);
    if (!rc && len && rand_r(&c->seed) % 30 == 0) {
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

static int test_chaos(const pyinterp *py, pid_t pid)
{
    hdx_map *maps;
    size_t n;
    if (hdx_maps_read(pid, &maps, &n))
        return bad("maps");
    chaos c = { .seed = 4242 };
    hdx_pymem_live(pid, &c.live);
    hdx_pymem m = { &chaos_ops, &c };
    char root[64], *err = NULL;
    snprintf(root, sizeof root, "/proc/%d/root", pid);
    hdx_pyproc *p = NULL;
    for (int i = 0; i < 50 && !p; i++) { /* the attach itself may meet a fault */
        hdx_pymem mi = m;
        free(err);
        p = hdx_py_attach_mem(pid, &mi, maps, n, root, &err);
    }
    hdx_maps_free(maps, n);
    free(err);
    if (!p) {
        hdx_pymem_close(&c.live);
        return bad("attach through the faulting backend failed 50 times");
    }
    int ok = 0, failed = 0, partial = 0;
    for (int i = 0; i < 150; i++) {
        hdx_py_pgroups g;
        int rc = hdx_py_read_pgroups(p, &g);
        if (rc)
            failed++;
        else if (g.partial)
            partial++;
        else
            ok++;
        hdx_py_pgroups_clear(&g);
    }
    hdx_py_detach(p);
    hdx_pymem_close(&c.live);
    printf("ok   %s: 150 reads of the groups through a backend that faulted %ld and corrupted %ld "
           "of %ld reads: %d whole, %d partial, %d failed cleanly\n",
           py->label, c.faults, c.flips, c.reads, ok, partial, failed);
    return 0;
}

/* ------------------------------------------------------------- objects */

static int check_objects(hdx_pyproc *p, const char *ready, int minor)
{
    uint64_t split1 = addr_of(ready, "split1"), mat = addr_of(ready, "materialized");
    uint64_t other = addr_of(ready, "other_order"), big = addr_of(ready, "big");
    uint64_t grown = addr_of(ready, "grown");
    uint64_t mid = addr_of(ready, "mid"), seq = addr_of(ready, "seq"), tup = addr_of(ready, "tup");
    uint64_t freed = addr_of(ready, "freed"), junk = addr_of(ready, "junk_data");
    uint64_t method = addr_of(ready, "method");

    /* sys.modules → __main__ → globals, by name. */
    uint64_t main_mod, v;
    int rc = hdx_pyobj_sys_module(p, "__main__", &main_mod);
    if (rc)
        return bad("sys.modules['__main__']: %s", strerror(-rc));
    if ((rc = hdx_pyobj_attr(p, main_mod, "big", &v)) || v != big)
        return bad("__main__.big: rc %d address %#llx, want %#llx", rc, (unsigned long long)v,
                   (unsigned long long)big);
    if (hdx_pyobj_sys_module(p, "no.such.module", &v) != -ENOENT)
        return bad("sys.modules['no.such.module'] is not -ENOENT");
    hdx_local cls = { 0 };
    if ((rc = hdx_py_getattr(p, main_mod, "Plain", &cls)) || !cls.s || strcmp(cls.s, "type"))
        return bad("__main__.Plain: rc %d type %s", rc, cls.s ? cls.s : "(null)");
    free(cls.s);

    /* Instance dicts (docs/python-objects.md): split1 a split table (<=3.10),
     * values (3.11, 3.12) or valid inline values (3.13); materialized a dict
     * made from them; grown a dict past the shared keys (3.13: the inline
     * values invalid); other_order a key the shared keys lack. */
    if (want_attr(p, split1, "split1", "a", HDX_VAL_INT, 1, 0, NULL) ||
        want_attr(p, split1, "split1", "b", HDX_VAL_STR, 0, 0, "two") ||
        want_attr(p, split1, "split1", "c", HDX_VAL_FLOAT, 0, 3.5, NULL) ||
        want_attr(p, split1, "split1", "cls_attr", HDX_VAL_INT, 7, 0, NULL) ||
        want_attr(p, split1, "split1", "base_attr", HDX_VAL_STR, 0, 0, "from the base") ||
        want_attr(p, split1, "split1", "method", HDX_VAL_OTHER, 0, 0, "function") ||
        want_attr(p, mat, "materialized", "a", HDX_VAL_INT, 1, 0, NULL) ||
        want_attr(p, mat, "materialized", "late", HDX_VAL_INT, 9, 0, NULL) ||
        want_attr(p, grown, "grown", "a", HDX_VAL_INT, 1, 0, NULL) ||
        want_attr(p, grown, "grown", "x39", HDX_VAL_INT, 39, 0, NULL) ||
        want_attr(p, other, "other_order", "a", HDX_VAL_INT, -5, 0, NULL) ||
        want_attr(p, other, "other_order", "z", HDX_VAL_NONE, 0, 0, NULL) ||
        want_attr(p, cls.addr, "Plain", "cls_attr", HDX_VAL_INT, 7, 0, NULL) ||
        want_attr(p, cls.addr, "Plain", "base_attr", HDX_VAL_STR, 0, 0, "from the base"))
        return -1;
    hdx_local l = { 0 };
    if ((rc = hdx_py_getattr(p, split1, "missing", &l)) != -ENOENT)
        return bad("split1.missing: %d, want -ENOENT", rc);

    /* Dicts with 2- and 4-byte indices; lists and tuples. */
    if (want_dict_int(p, big, "big", "k49999", 49999, 50000) ||
        want_dict_int(p, mid, "mid", "k1499", 1499, 1500))
        return -1;
    const enum hdx_value_kind seq_k[] = { HDX_VAL_INT, HDX_VAL_STR, HDX_VAL_NONE };
    const enum hdx_value_kind tup_k[] = { HDX_VAL_BOOL, HDX_VAL_FLOAT };
    if (want_items(p, seq, "seq", seq_k, 3) || want_items(p, tup, "tup", tup_k, 2))
        return -1;
    uint64_t *items;
    size_t n;
    if ((rc = hdx_py_seq_items(p, big, 16, &items, &n)) != -EINVAL)
        return bad("hdx_py_seq_items of a dict: %d, want -EINVAL", rc);
    if ((rc = hdx_py_seq_items(p, seq, 2, &items, &n)) != -E2BIG)
        return bad("hdx_py_seq_items of 3 items, at most 2: %d, want -E2BIG", rc);
    char *fn = hdx_py_function_name(p, method);
    if (!fn || strcmp(fn, "Plain.method"))
        return bad("function name %s, want Plain.method", fn ? fn : "(null)");
    free(fn);

    /* Wild and freed addresses: errors, never a crash. */
    hdx_pydict_item *it;
    const uint64_t wild[] = { freed, junk, 0x10, 0, freed + 4096 * 7, seq + 1 };
    for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++) {
        if ((rc = hdx_pydict_items(p, wild[i], HDX_PYOBJ_MAX_ITEMS, &it, &n)) >= 0)
            return bad("a dict at %#llx read as %zu items", (unsigned long long)wild[i], n);
        if (hdx_py_getattr(p, wild[i], "a", &l) >= 0 || hdx_py_seq_items(p, wild[i], 16, &items, &n) >= 0 ||
            (fn = hdx_py_function_name(p, wild[i])) || hdx_pydict_get(p, wild[i], "k1", &v) >= 0)
            return bad("an object at %#llx read as something", (unsigned long long)wild[i]);
    }
    if ((rc = hdx_pydict_items(p, seq, HDX_PYOBJ_MAX_ITEMS, &it, &n)) != -EINVAL)
        return bad("a list read as a dict: %d, want -EINVAL", rc);
    (void)minor;
    return 0;
}

static int test_objects(const pyinterp *py, const char *script)
{
    char ready[] = "/tmp/hdx-pyobj-XXXXXX";
    int fd = mkstemp(ready);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(ready);
    char stagefile[64];
    snprintf(stagefile, sizeof stagefile, "%s.stage", ready);
    char *extra[] = { ready, NULL };
    pid_t pid = spawn(py->path, script, extra);
    hdx_pyproc *p = NULL;
    int rc = -1;
    char *err = NULL;
    if (pid < 0 || wait_line(pid, ready, "stage 0")) {
        printf("FAIL %s: the fixture did not start\n", py->label);
        goto out;
    }
    if (!(p = hdx_py_attach(pid, &err))) {
        printf("FAIL %s: attach: %s\n", py->label, err);
        goto out;
    }
    /* torch 1.13's shape: GroupMember.WORLD. */
    const want_group s0[] = {
        { "g1", "0", NULL, { 0, 1, 2, 3 }, 4, 1 },
        { "g2", "tp-group", "tp", { 2, 3 }, 2, 0 },
        { "g3", "2", "pp", { 3, 1 }, 2, 0 },
        { "g4", "caf\xc3\xa9", "ep", { 1, 2 }, 2, 0 },
    };
    if (check_groups(p, ready, s0, 4)) {
        printf("FAIL %s: groups (GroupMember.WORLD): %s\n", py->label, why);
        goto out;
    }
    if (check_park_group(p, addr_of(ready, "g2"))) {
        printf("FAIL %s: %s\n", py->label, why);
        goto out;
    }
    printf("ok   %s: 4 groups, names, ranks and Megatron roles exact; default from GroupMember.WORLD; "
           "park's local group is g2\n", py->label);
    if (check_objects(p, ready, py->minor)) {
        printf("FAIL %s: %s\n", py->label, why);
        goto out;
    }
    printf("ok   %s: attributes (instance, class, bases), dicts of 1500 and 50000, lists, tuples, "
           "functions exact; wild and freed addresses give errors\n", py->label);

    /* torch 2.x's shape: _world._default_pg (here g4, so that roles move). */
    kill(pid, SIGUSR1);
    if (wait_line(pid, stagefile, "stage 1")) {
        printf("FAIL %s: the fixture did not reach stage 1\n", py->label);
        goto out;
    }
    const want_group s1[] = {
        { "g1", "0", "dp", { 0, 1, 2, 3 }, 4, 0 },
        { "g2", "tp-group", "tp", { 2, 3 }, 2, 0 },
        { "g3", "2", "pp", { 3, 1 }, 2, 0 },
        { "g4", "caf\xc3\xa9", NULL, { 1, 2 }, 2, 1 },
    };
    if (check_groups(p, ready, s1, 4)) {
        printf("FAIL %s: groups (_world._default_pg): %s\n", py->label, why);
        goto out;
    }
    /* Neither: the largest group that maps every rank to itself. */
    kill(pid, SIGUSR1);
    if (wait_line(pid, stagefile, "stage 2") || check_groups(p, ready, s0, 4)) {
        printf("FAIL %s: groups (guessed default): %s\n", py->label, why);
        goto out;
    }
    printf("ok   %s: the default group from _world._default_pg, and guessed when neither is there\n",
           py->label);
    if (test_chaos(py, pid)) {
        printf("FAIL %s: %s\n", py->label, why);
        goto out;
    }
    reap(pid);
    pid = -1;
    hdx_py_pgroups g;
    if ((rc = hdx_py_read_pgroups(p, &g)) != -ESRCH) {
        printf("FAIL %s: reading a dead process gave %d, want -ESRCH\n", py->label, rc);
        hdx_py_pgroups_clear(&g);
        rc = -1;
        goto out;
    }
    rc = 0;
out:
    free(err);
    hdx_py_detach(p);
    reap(pid);
    unlink(ready);
    unlink(stagefile);
    return rc;
}

static int run_objects(const char *script)
{
    int failures = 0;
    pyinterp py[32];
    size_t n = pyi_find(py, 32);
    if (!n) {
        printf("SKIP: no CPython >= 3.8 on this machine\n");
        return 77;
    }
    for (size_t i = 0; i < n; i++)
        failures += test_objects(&py[i], script) != 0;
    hdx_py_read_pgroups(NULL, &(hdx_py_pgroups){ 0 });
    hdx_py_pgroups_clear(NULL);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

/* --------------------------------------------------------------- torch */

#define TORCH_PY "/usr/bin/python3"
#define TORCH_C10D "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int port = -1;
    if (s >= 0 && !bind(s, (struct sockaddr *)&a, sizeof a) && !getsockname(s, (struct sockaddr *)&a, &len))
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

static int check_rank2(hdx_pyproc *p, const char *ready)
{
    hdx_py_pgroups g;
    int rc = hdx_py_read_pgroups(p, &g);
    if (rc)
        return bad("hdx_py_read_pgroups: %s", strerror(-rc));
    const hdx_py_pgroup *world = NULL, *pair = NULL;
    for (size_t i = 0; i < g.n; i++) {
        if (g.groups[i].is_default)
            world = &g.groups[i];
        else
            pair = &g.groups[i];
    }
    uint64_t want_obj = addr_of(ready, "group");
    static const int w4[] = { 0, 1, 2, 3 }, w2[] = { 2, 3 };
    rc = -1;
    if (g.partial || g.n != 2 || !world || !pair)
        bad("%zu groups (partial %d), want the world and [2, 3]", g.n, g.partial);
    else if (world->n_ranks != 4 || memcmp(world->ranks, w4, sizeof w4) || !world->name ||
             strcmp(world->name, "0"))
        bad("world: %zu ranks, name %s", world->n_ranks, world->name ? world->name : "(null)");
    else if (pair->n_ranks != 2 || memcmp(pair->ranks, w2, sizeof w2) || !pair->name ||
             strcmp(pair->name, "2") || pair->obj != want_obj || pair->role)
        bad("group [2,3]: %zu ranks, name %s, obj %#llx (want %#llx)", pair->n_ranks,
            pair->name ? pair->name : "(null)", (unsigned long long)pair->obj, (unsigned long long)want_obj);
    else
        rc = 0;
    uint64_t obj = pair ? pair->obj : 0;
    hdx_py_pgroups_clear(&g);
    if (rc)
        return rc;

    /* The parked frame's argument `group` is that group. */
    return check_park_group(p, obj);
}

static int run_torch(const char *script)
{
    if (access(TORCH_PY, X_OK) || access(TORCH_C10D, R_OK)) {
        printf("SKIP: no %s with Debian's python3-torch (%s)\n", TORCH_PY, TORCH_C10D);
        return 77;
    }
    int port = free_port();
    char ready[4][64], portstr[16], rankstr[4][8];
    pid_t pids[4] = { -1, -1, -1, -1 };
    hdx_pyproc *p = NULL;
    char *err = NULL;
    int rc = 1;
    snprintf(portstr, sizeof portstr, "%d", port);
    for (int r = 0; r < 4; r++) {
        snprintf(ready[r], sizeof ready[r], "/tmp/hdx-torchpg-%d-%d", (int)getpid(), r);
        snprintf(rankstr[r], sizeof rankstr[r], "%d", r);
        unlink(ready[r]);
        char *extra[] = { rankstr[r], portstr, ready[r], NULL };
        pids[r] = spawn(TORCH_PY, script, extra);
    }
    for (int r = 0; r < 4; r++) {
        if (wait_line(pids[r], ready[r], "ready")) {
            int st = 0;
            if (waitpid(pids[r], &st, WNOHANG) == pids[r] && WIFEXITED(st) && WEXITSTATUS(st) == 77) {
                pids[r] = -1;
                printf("SKIP: torch.distributed has no gloo here\n");
                rc = 77;
            } else {
                printf("FAIL: rank %d did not start (port %d)\n", r, port);
            }
            goto out;
        }
    }
    if (!(p = hdx_py_attach(pids[2], &err))) {
        printf("FAIL: attach to rank 2: %s\n", err);
        goto out;
    }
    if (check_rank2(p, ready[2])) {
        printf("FAIL: rank 2: %s\n", why);
        goto out;
    }
    printf("ok   torch 1.13, 4 gloo ranks: rank 2 has the world group (default, ranks 0-3, \"0\") and "
           "[2, 3] (\"2\"), and its parked frame's group is that object\n");
    rc = 0;
out:
    free(err);
    hdx_py_detach(p);
    for (int r = 0; r < 4; r++) {
        reap(pids[r]);
        unlink(ready[r]);
    }
    printf("%s\n", rc == 0 ? "PASSED" : rc == 77 ? "SKIPPED" : "FAILED");
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "objects") && strcmp(argv[1], "torch"))) {
        fprintf(stderr, "usage: %s objects PYOBJECTS_PY | torch TORCH_GROUPS_PY\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    return !strcmp(argv[1], "objects") ? run_objects(argv[2]) : run_torch(argv[2]);
}
