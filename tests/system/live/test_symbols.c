/* The symbol cache shared by the processes of one capture (symbols.h):
 * two processes of one binary each (live_target, then python3), their real
 * stacks symbolized through one hdx_symcache give exactly what a fresh
 * per-process symbolizer gives, and an address one process resolved costs
 * the other no libdwfl lookup.
 *   test_live_symbols LIVE_TARGET [PYTHON]
 */
#include <sys/stat.h>

#include "live_util.h"
#include "gather/proc.h"
#include "native/stacks.h"
#include "native/symbols.h"

/* One native frame to resolve: its pc and whether it holds a return address. */
struct addr {
    uint64_t pc;
    int is_return;
};

/* The native frames of every thread of pid, from a real stack sample. */
static size_t sample_addrs(int pid, struct addr **out)
{
    *out = NULL;
    size_t n = 0;
    hdx_evidence *ev = hdx_evidence_new();
    hdx_process *p = ev ? hdx_evidence_add_process(ev) : NULL;
    if (p && hdx_proc_read(p, pid) == 0 && hdx_stacks_sample(p, ev, 1000) == 0)
        for (size_t i = 0; i < p->n_threads; i++)
            for (size_t k = 0; k < p->threads[i].n_frames; k++) {
                const hdx_frame *f = &p->threads[i].frames[k];
                if (f->kind != HDX_FRAME_NATIVE || !f->pc)
                    continue;
                struct addr *a = hdx_append((void **)out, &n, sizeof **out);
                if (!a)
                    break;
                /* the stacks here have no signal frames: callers hold return addresses */
                a->pc = f->pc;
                a->is_return = k > 0;
            }
    hdx_evidence_free(ev);
    hdx_stacks_forget();
    return n;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Resolve the addresses with s, and with a fresh per-process symbolizer of
 * pid; every field must agree. Returns how many resolved to a function. */
static size_t check_same(hdx_symbolizer *s, int pid, const struct addr *a, size_t n, const char *what)
{
    hdx_symbolizer *fresh = hdx_symbolizer_new(pid);
    CHECK(fresh, "fresh symbolizer for %d: %s", pid, strerror(errno));
    size_t named = 0;
    for (size_t i = 0; fresh && i < n; i++) {
        hdx_frame x = {.kind = HDX_FRAME_NATIVE, .pc = a[i].pc}, y = x;
        int rx = hdx_symbolize(s, &x, a[i].is_return);
        int ry = hdx_symbolize(fresh, &y, a[i].is_return);
        CHECK(rx == ry && same_str(x.function, y.function) && same_str(x.file, y.file) &&
                  x.line == y.line && same_str(x.module, y.module) && x.offset == y.offset,
              "%s, pc 0x%llx: shared %d %s %s:%d [%s+0x%llx], fresh %d %s %s:%d [%s+0x%llx]", what,
              (unsigned long long)a[i].pc, rx, x.function, x.file, x.line, x.module,
              (unsigned long long)x.offset, ry, y.function, y.file, y.line, y.module,
              (unsigned long long)y.offset);
        named += rx == 0;
        hdx_frame_clear(&x);
        hdx_frame_clear(&y);
    }
    hdx_symbolizer_free(fresh);
    return named;
}

/* Where each address lies in its binary, as the shared cache keys it:
 * module path and lookup address less the load bias. */
struct key {
    char *module;
    uint64_t off;
};

static size_t keys_of(hdx_symbolizer *s, const struct addr *a, size_t n, struct key **out)
{
    size_t nk = 0;
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        hdx_frame f = {.kind = HDX_FRAME_NATIVE, .pc = a[i].pc};
        hdx_symbolize(s, &f, a[i].is_return);
        struct key *k = f.module ? hdx_append((void **)out, &nk, sizeof **out) : NULL;
        if (k) {
            k->module = f.module;
            f.module = NULL;
            k->off = f.offset - (uint64_t)a[i].is_return;
        }
        hdx_frame_clear(&f);
    }
    return nk;
}

static int has_key(const struct key *k, size_t n, const struct key *x)
{
    for (size_t i = 0; i < n; i++)
        if (k[i].off == x->off && strcmp(k[i].module, x->module) == 0)
            return 1;
    return 0;
}

static void keys_free(struct key *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i].module);
    free(k);
}

/* Two processes of one program, started by argv[0] and argv[1] (each prints a line when ready). */
static void check_pair(char *const *argv[2], char *const env[], const char *what)
{
    struct live_proc lp[2];
    char line[128];
    for (int i = 0; i < 2; i++) {
        if (live_spawn(&lp[i], argv[i], env, NULL) < 0 || live_read_line(lp[i].out, line, sizeof line, 20000) < 0) {
            CHECK(0, "%s: process %d did not start", what, i);
            return;
        }
    }
    hdx_sleep_ms(200);
    struct addr *a[2];
    size_t n[2];
    for (int i = 0; i < 2; i++) {
        n[i] = sample_addrs(lp[i].pid, &a[i]);
        CHECK(n[i] >= 3, "%s: %zu native frames in process %d", what, n[i], lp[i].pid);
    }

    hdx_symcache *c = hdx_symcache_new(1);
    CHECK(c, "hdx_symcache_new");
    hdx_symbolizer *s0 = hdx_symbolizer_new_shared(lp[0].pid, c);
    CHECK(s0, "shared symbolizer: %s", strerror(errno));
    size_t named0 = check_same(s0, lp[0].pid, a[0], n[0], what);
    size_t after0 = hdx_symcache_lookups(c);
    CHECK(named0 >= 3 && after0 > 0, "%s: %zu of %zu frames named, %zu libdwfl lookups", what, named0, n[0],
          after0);
    fprintf(stderr, "%s: process %d: %zu frames, %zu named, %zu lookups in %zu binaries\n", what, lp[0].pid,
            n[0], named0, after0, hdx_symcache_binaries(c));

    /* the same process again, through another symbolizer: nothing new to look up */
    hdx_symbolizer *s0b = hdx_symbolizer_new_shared(lp[0].pid, c);
    check_same(s0b, lp[0].pid, a[0], n[0], what);
    CHECK(hdx_symcache_lookups(c) == after0, "%s: a second symbolizer of one process looked up %zu more",
          what, hdx_symcache_lookups(c) - after0);
    hdx_symbolizer_free(s0b);

    /* the other process: what the first resolved is not looked up again */
    struct key *k0 = NULL, *k1 = NULL;
    size_t nk0 = keys_of(s0, a[0], n[0], &k0);
    hdx_symbolizer *probe = hdx_symbolizer_new(lp[1].pid);
    size_t nk1 = probe ? keys_of(probe, a[1], n[1], &k1) : 0;
    hdx_symbolizer_free(probe);
    CHECK(nk1 == n[1], "%s: %zu of %zu frames of %d in a module", what, nk1, n[1], lp[1].pid);
    struct addr *seen = calloc(n[1] + 1, sizeof *seen), *unseen = calloc(n[1] + 1, sizeof *unseen);
    size_t ns = 0, nu = 0;
    for (size_t i = 0; seen && unseen && i < n[1] && i < nk1; i++) {
        if (has_key(k0, nk0, &k1[i]))
            seen[ns++] = a[1][i];
        else
            unseen[nu++] = a[1][i];
    }
    CHECK(ns * 2 >= n[1], "%s: only %zu of %zu frames of the second process are in the first's stacks",
          what, ns, n[1]);
    hdx_symbolizer *s1 = hdx_symbolizer_new_shared(lp[1].pid, c);
    CHECK(s1, "shared symbolizer 2: %s", strerror(errno));
    size_t named1 = check_same(s1, lp[1].pid, seen, ns, what);
    CHECK(hdx_symcache_lookups(c) == after0,
          "%s: %zu frames the first process resolved cost the second %zu libdwfl lookups", what, ns,
          hdx_symcache_lookups(c) - after0);
    check_same(s1, lp[1].pid, unseen, nu, what);
    CHECK(hdx_symcache_lookups(c) <= after0 + nu, "%s: %zu new frames, %zu new lookups", what, nu,
          hdx_symcache_lookups(c) - after0);
    fprintf(stderr, "%s: process %d: %zu frames (%zu named) already resolved for %d, %zu new; %zu lookups "
                    "in all\n", what, lp[1].pid, ns, named1, lp[0].pid, nu, hdx_symcache_lookups(c));

    hdx_symbolizer_free(s1);
    hdx_symbolizer_free(s0);
    hdx_symcache_free(c);
    keys_free(k0, nk0);
    keys_free(k1, nk1);
    free(seen);
    free(unseen);
    free(a[0]);
    free(a[1]);
    for (int i = 0; i < 2; i++) {
        CHECK(live_untraced(lp[i].pid) == 0, "%s: process %d untraced", what, i);
        live_kill(&lp[i]);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_live_symbols LIVE_TARGET [PYTHON]\n");
        return 64;
    }
    /* NULL and empty are fine */
    hdx_symcache_free(NULL);
    hdx_symbolizer_free(NULL);
    CHECK(hdx_symcache_lookups(NULL) == 0 && hdx_symcache_binaries(NULL) == 0, "NULL cache counts 0");

    char dir[] = "/tmp/hdx-live-symbols-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    /* a lock file each: live_target's child holds it */
    char *lock0 = hdx_asprintf("%s/0.lock", dir), *lock1 = hdx_asprintf("%s/1.lock", dir);
    char *targv0[] = {argv[1], lock0, NULL}, *targv1[] = {argv[1], lock1, NULL};
    char *const *targv[2] = {targv0, targv1};
    char *tenv[] = {NULL};
    check_pair(targv, tenv, "live_target");
    unlink(lock0);
    unlink(lock1);

    struct stat st;
    if (argc > 2 && stat(argv[2], &st) == 0) {
        char *pyargv[] = {argv[2], "-c",
                          "import sys, time\nsys.stdout.write('ready\\n'); sys.stdout.flush()\ntime.sleep(600)",
                          NULL};
        char *const *pyargvs[2] = {pyargv, pyargv};
        char *pyenv[] = {"PYTHONDONTWRITEBYTECODE=1", NULL};
        check_pair(pyargvs, pyenv, "python");
    } else {
        fprintf(stderr, "skip: no Python interpreter given or found: the python3 pair is not checked\n");
    }
    rmdir(dir);
    free(lock0);
    free(lock1);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        fprintf(stderr, "ok\n");
    return failures ? 1 : 0;
}
