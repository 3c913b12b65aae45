#include "model/evidence.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/index.h"
#include "model/pool.h"
#include "model/redact.h"
#include "model/util.h"
#include "hangdx/fnv.h"
#include "hangdx/trace.h"

static void hdx_evidence_index_free(hdx_evidence *ev);
static void pgroup_index_free(hdx_evidence *ev);

hdx_evidence *hdx_evidence_new(void)
{
    hdx_evidence *ev = calloc(1, sizeof *ev);
    if (ev) {
        ev->build_timeout_s = 1800;
        ev->taken_ns = hdx_now_ns();
    }
    return ev;
}

void hdx_frame_clear(hdx_frame *f)
{
    if (!f)
        return;
    if (f->pooled) { /* the pool owns it all */
        memset(f, 0, sizeof *f);
        return;
    }
    free(f->function);
    free(f->file);
    free(f->module);
    for (size_t j = 0; j < f->n_locals; j++) {
        free(f->locals[j].name);
        free(f->locals[j].s);
        free(f->locals[j].pg);
    }
    free(f->locals);
    memset(f, 0, sizeof *f);
}

void hdx_frames_free(hdx_frame *frames, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hdx_frame_clear(&frames[i]);
    free(frames);
}

void hdx_thread_clear(hdx_thread *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->wchan);
    if (!t->shared_frames) {
        hdx_frames_free(t->frames, t->n_frames);
        hdx_frames_free(t->py_frames, t->n_py_frames);
    }
    free(t->polled_path);
    free(t->wait);
    free(t->wait_op);
    free(t->wait_pg);
    free(t->wait_sig);
    memset(t, 0, sizeof *t);
}

void hdx_process_clear(hdx_process *p)
{
    if (!p)
        return;
    free(p->host);
    for (size_t i = 0; i < p->n_cmdline; i++)
        free(p->cmdline[i]);
    free(p->cmdline);
    for (size_t i = 0; i < p->n_env; i++) {
        free(p->env[i].name);
        free(p->env[i].value);
    }
    free(p->env);
    free(p->exe);
    free(p->cwd);
    free(p->python);
    for (size_t i = 0; i < p->n_threads; i++)
        hdx_thread_clear(&p->threads[i]);
    free(p->threads);
    memset(p, 0, sizeof *p);
}

void hdx_lock_facts_clear(hdx_lock_facts *f)
{
    if (!f)
        return;
    free(f->rows);
    free(f->openers);
    free(f->pids);
    memset(f, 0, sizeof *f);
}

void hdx_lock_clear(hdx_lock *l)
{
    if (!l)
        return;
    free(l->path);
    free(l->job_path);
    free(l->source);
    free(l->holder_host);
    hdx_lock_facts_clear(&l->facts);
    for (size_t i = 0; i < l->n_seen; i++) {
        free(l->seen[i].host);
        hdx_lock_facts_clear(&l->seen[i].facts);
    }
    free(l->seen);
    for (size_t i = 0; i < l->n_waiters; i++) {
        free(l->waiters[i].how);
        free(l->waiters[i].host);
    }
    free(l->waiters);
    memset(l, 0, sizeof *l);
}

void hdx_evidence_free(hdx_evidence *ev)
{
    if (!ev)
        return;
    free(ev->host);
    for (size_t i = 0; i < ev->n_procs; i++)
        hdx_process_clear(&ev->procs[i]);
    free(ev->procs);
    for (size_t i = 0; i < ev->n_locks; i++)
        hdx_lock_clear(&ev->locks[i]);
    free(ev->locks);
    for (size_t i = 0; i < ev->n_notes; i++)
        free(ev->notes[i]);
    free(ev->notes);
    for (size_t i = 0; i < ev->n_log_facts; i++)
        hdx_log_fact_clear(&ev->log_facts[i]);
    free(ev->log_facts);
    for (size_t i = 0; i < ev->n_log_ranks; i++)
        hdx_log_rank_clear(&ev->log_ranks[i]);
    free(ev->log_ranks);
    for (size_t i = 0; i < ev->n_pgroups; i++)
        hdx_pgroup_clear(&ev->pgroups[i]);
    free(ev->pgroups);
    pgroup_index_free(ev);
    hdx_evidence_index_free(ev);
    hdx_pool_free(ev->pool);
    free(ev);
}

void hdx_log_fact_clear(hdx_log_fact *f)
{
    if (!f)
        return;
    free(f->pattern);
    free(f->proves);
    free(f->cls);
    free(f->pg);
    free(f->file);
    free(f->text);
    for (size_t i = 0; i < f->n_fields; i++) {
        free(f->fields[i].name);
        free(f->fields[i].value);
    }
    free(f->fields);
    memset(f, 0, sizeof *f);
}

void hdx_log_rank_clear(hdx_log_rank *r)
{
    if (!r)
        return;
    free(r->file);
    free(r->last_line);
    free(r->last_time);
    free(r->last_pattern);
    for (size_t i = 0; i < r->n_seqs; i++) {
        free(r->seqs[i].pg);
        free(r->seqs[i].op);
    }
    free(r->seqs);
    free(r->exit_cause);
    free(r->rank_from);
    memset(r, 0, sizeof *r);
}

hdx_process *hdx_evidence_add_process(hdx_evidence *ev)
{
    hdx_process *p = hdx_append((void **)&ev->procs, &ev->n_procs, sizeof *p);
    if (p) {
        p->pid = p->ppid = HDX_UNKNOWN;
        p->rank = p->local_rank = p->world_size = HDX_UNKNOWN;
        p->progressing = p->alive = p->stack_changed = HDX_UNKNOWN;
        p->stopped_us = HDX_UNKNOWN;
        p->frozen = HDX_UNKNOWN;
    }
    return p;
}

hdx_thread *hdx_process_add_thread(hdx_process *p)
{
    hdx_thread *t = hdx_grow((void **)&p->threads, &p->n_threads, &p->cap_threads, sizeof *t);
    if (t) {
        t->tid = HDX_UNKNOWN;
        t->syscall = HDX_SYSCALL_UNKNOWN;
        t->wait_peer = HDX_UNKNOWN;
        t->wait_frame = -1;
        t->wait_seq = HDX_UNKNOWN;
    }
    return t;
}

int hdx_process_reserve_threads(hdx_process *p, size_t n)
{
    if (n <= p->cap_threads)
        return 0;
    hdx_thread *t = n <= SIZE_MAX / sizeof *t ? realloc(p->threads, n * sizeof *t) : NULL;
    if (!t)
        return -ENOMEM;
    p->threads = t;
    p->cap_threads = n;
    return 0;
}

hdx_frame *hdx_thread_add_frame(hdx_thread *t)
{
    return hdx_append((void **)&t->frames, &t->n_frames, sizeof(hdx_frame));
}

void hdx_pgroup_clear(hdx_pgroup *g)
{
    free(g->name);
    free(g->desc);
    free(g->role);
    free(g->ranks);
    memset(g, 0, sizeof *g);
}

/* ---- the process-group index ---- */

/* The names of pgroups[0, n) by their hash; groups after n are looked for by a scan. A merge
 * that joins a host's groups looks up each of them: without it, the lookups of 16 384 hosts'
 * groups in the job's would be quadratic (BENCHMARKS.md, "Reports that scale"). */
struct hdx_pgroup_index {
    size_t n;
    hdx_index names;
};

static uint64_t name_hash(const char *name) { return hdx_fnv1a(name, strlen(name), HDX_FNV1A_OFFSET_BASIS); }

static void pgroup_index_free(hdx_evidence *ev)
{
    if (ev->pgroup_index)
        hdx_index_free(&ev->pgroup_index->names);
    free(ev->pgroup_index);
    ev->pgroup_index = NULL;
}

void hdx_evidence_index_pgroups(hdx_evidence *ev)
{
    struct hdx_pgroup_index *x = ev->pgroup_index;
    if (!x && !(x = ev->pgroup_index = calloc(1, sizeof *x)))
        return;
    if (x->n > ev->n_pgroups) { /* groups were taken away (a merge moved them): anew */
        hdx_index_clear(&x->names);
        x->n = 0;
    }
    for (; x->n < ev->n_pgroups; x->n++)
        if (hdx_index_insert(&x->names, name_hash(ev->pgroups[x->n].name), x->n)) {
            pgroup_index_free(ev); /* lookups scan */
            return;
        }
}

const hdx_pgroup *hdx_evidence_find_pgroup(const hdx_evidence *ev, const char *name)
{
    if (!name)
        return NULL;
    const struct hdx_pgroup_index *x = ev->pgroup_index;
    size_t from = 0;
    if (x && x->n <= ev->n_pgroups) {
        size_t cur = 0, i;
        while ((i = hdx_index_find(&x->names, name_hash(name), &cur)) != HDX_INDEX_NONE)
            if (!strcmp(ev->pgroups[i].name, name))
                return &ev->pgroups[i];
        from = x->n;
    }
    for (size_t i = from; i < ev->n_pgroups; i++)
        if (!strcmp(ev->pgroups[i].name, name))
            return &ev->pgroups[i];
    return NULL;
}

/* Set *dst to a copy of s when *dst is unset and s is given. 0 or -ENOMEM. */
static int fill_str(char **dst, const char *s)
{
    if (*dst || !s)
        return 0;
    return (*dst = strdup(s)) ? 0 : -ENOMEM;
}

int hdx_evidence_add_pgroup(hdx_evidence *ev, const char *name, const int *ranks, size_t n, const char *desc,
                            const char *role, int is_default)
{
    hdx_pgroup *g = (hdx_pgroup *)hdx_evidence_find_pgroup(ev, name);
    if (g) {
        if (g->n_ranks != n || (n && memcmp(g->ranks, ranks, n * sizeof *ranks)))
            return -EEXIST;
    } else {
        if (!(g = hdx_append((void **)&ev->pgroups, &ev->n_pgroups, sizeof *g)))
            return -ENOMEM;
        g->name = strdup(name);
        g->ranks = malloc((n ? n : 1) * sizeof *ranks);
        if (!g->name || !g->ranks) {
            hdx_pgroup_clear(g);
            ev->n_pgroups--;
            return -ENOMEM;
        }
        if (n)
            memcpy(g->ranks, ranks, n * sizeof *ranks);
        g->n_ranks = n;
        hdx_evidence_index_pgroups(ev);
    }
    g->is_default |= is_default;
    return fill_str(&g->desc, desc) || fill_str(&g->role, is_default ? NULL : role) ? -ENOMEM : 0;
}

hdx_lock *hdx_evidence_add_lock(hdx_evidence *ev)
{
    hdx_lock *l = hdx_append((void **)&ev->locks, &ev->n_locks, sizeof *l);
    if (l) {
        l->exists = HDX_UNKNOWN;
        l->mtime_ns = HDX_UNKNOWN;
        l->holder_pid = HDX_UNKNOWN;
        l->creator_pid = l->creator_rank = l->creator_alive = HDX_UNKNOWN;
        l->created_ns = HDX_UNKNOWN;
    }
    return l;
}

hdx_waiter *hdx_lock_add_waiter(hdx_lock *l)
{
    hdx_waiter *w = hdx_append((void **)&l->waiters, &l->n_waiters, sizeof *w);
    if (w) {
        w->pid = w->tid = w->rank = HDX_UNKNOWN;
        w->since_ns = HDX_UNKNOWN;
    }
    return w;
}

int hdx_notes_vadd(char ***notes, size_t *n, const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*notes)[i], s) == 0) { /* say each thing once */
            free(s);
            return 0;
        }
    }
    char **slot = hdx_append((void **)notes, n, sizeof *slot);
    if (!slot) {
        free(s);
        return -ENOMEM;
    }
    *slot = s;
    return 0;
}

int hdx_evidence_note(hdx_evidence *ev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = hdx_notes_vadd(&ev->notes, &ev->n_notes, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- the process index -------------------------------------------------- */

/* One hash index for three kinds of key: (host, pid), pid, rank. An entry holds a key's
 * hash and a position in procs; a hit is checked against the process itself, so a key may
 * have several entries (pids repeat across hosts) and a stale one only misses. */
struct hdx_proc_index {
    const hdx_process *procs; /* the array and count it is current for */
    size_t n;
    hdx_index keys; /* key_of() -> position in procs */
};

enum { KEY_HOST_PID = 1, KEY_PID = 2, KEY_RANK = 3 };

static uint64_t host_hash(const char *host)
{
    return host ? hdx_fnv1a(host, strlen(host), HDX_FNV1A_OFFSET_BASIS) : 0;
}

static uint64_t key_of(int kind, const char *host, long long v)
{
    uint64_t k = hdx_hash_mix(((uint64_t)kind << 56) ^ (uint64_t)(v & 0xffffffffffffLL) ^ hdx_hash_mix(kind == KEY_HOST_PID ? host_hash(host) : 0));
    return k ? k : 1;
}

/* Room was reserved (index_reserve): this allocates nothing and cannot fail. */
static void index_put(struct hdx_proc_index *x, uint64_t key, size_t pos)
{
    hdx_index_insert(&x->keys, key, pos);
}

static void index_add(struct hdx_proc_index *x, const hdx_process *p, size_t pos)
{
    if (p->pid != HDX_UNKNOWN) {
        index_put(x, key_of(KEY_HOST_PID, p->host, p->pid), pos);
        index_put(x, key_of(KEY_PID, NULL, p->pid), pos);
    }
    if (p->rank >= 0)
        index_put(x, key_of(KEY_RANK, NULL, p->rank), pos);
}

static void hdx_evidence_index_free(hdx_evidence *ev)
{
    if (!ev || !ev->proc_index)
        return;
    hdx_index_free(&ev->proc_index->keys);
    free(ev->proc_index);
    ev->proc_index = NULL;
}

/* Room for 3 keys per process of n_total, so that index_put never allocates. */
static int index_reserve(struct hdx_proc_index *x, size_t n_total)
{
    return n_total > SIZE_MAX / 3 ? -ENOMEM : hdx_index_reserve(&x->keys, n_total * 3);
}

int hdx_evidence_index_more(hdx_evidence *ev, size_t from)
{
    struct hdx_proc_index *x = ev->proc_index;
    if (!x) {
        if (!(x = calloc(1, sizeof *x)))
            return -ENOMEM;
        ev->proc_index = x;
        from = 0;
    } else if (from > x->n || from > ev->n_procs) {
        from = 0;
    }
    if (!from)
        hdx_index_clear(&x->keys);
    if (index_reserve(x, ev->n_procs) < 0) {
        hdx_evidence_index_free(ev);
        return -ENOMEM;
    }
    for (size_t i = from; i < ev->n_procs; i++)
        index_add(x, &ev->procs[i], i);
    x->procs = ev->procs;
    x->n = ev->n_procs;
    return 0;
}

int hdx_evidence_index(hdx_evidence *ev)
{
    return hdx_evidence_index_more(ev, 0);
}

static const struct hdx_proc_index *current_index(const hdx_evidence *ev)
{
    const struct hdx_proc_index *x = ev->proc_index;
    return x && x->procs == ev->procs && x->n == ev->n_procs ? x : NULL;
}

int hdx_evidence_indexed(const hdx_evidence *ev)
{
    return current_index(ev) != NULL;
}

static int same_host(const char *a, const char *b)
{
    return !a || !b || !strcmp(a, b);
}

/* The first process (lowest position) with this key that passes ok(), from the index. */
static hdx_process *index_find(const hdx_evidence *ev, const struct hdx_proc_index *x, uint64_t key,
                               int (*ok)(const hdx_process *, const void *), const void *arg)
{
    size_t best = SIZE_MAX, cur = 0, at;
    while ((at = hdx_index_find(&x->keys, key, &cur)) != HDX_INDEX_NONE)
        if (at < ev->n_procs && at < best && ok(&ev->procs[at], arg))
            best = at;
    return best == SIZE_MAX ? NULL : &ev->procs[best];
}

struct want {
    const char *host;
    int pid, rank;
};

static int ok_pid(const hdx_process *p, const void *arg)
{
    const struct want *w = arg;
    return p->pid == w->pid;
}

static int ok_host_pid(const hdx_process *p, const void *arg)
{
    const struct want *w = arg;
    return p->pid == w->pid && same_host(p->host, w->host);
}

static int ok_pid_rank(const hdx_process *p, const void *arg)
{
    const struct want *w = arg;
    return p->pid == w->pid && p->rank == w->rank;
}

static int ok_rank_elsewhere(const hdx_process *p, const void *arg)
{
    const struct want *w = arg;
    return p->rank == w->rank && p->is_rank_process && p->host && w->host && strcmp(p->host, w->host) != 0;
}

static hdx_process *scan(const hdx_evidence *ev, int (*ok)(const hdx_process *, const void *), const void *arg)
{
    for (size_t i = 0; i < ev->n_procs; i++)
        if (ok(&ev->procs[i], arg))
            return &ev->procs[i];
    return NULL;
}

hdx_process *hdx_evidence_find_process(const hdx_evidence *ev, int pid)
{
    struct want w = {.pid = pid};
    const struct hdx_proc_index *x = current_index(ev);
    if (pid == HDX_UNKNOWN)
        return scan(ev, ok_pid, &w);
    return x ? index_find(ev, x, key_of(KEY_PID, NULL, pid), ok_pid, &w) : scan(ev, ok_pid, &w);
}

hdx_process *hdx_evidence_find_process_on(const hdx_evidence *ev, const char *host, int pid)
{
    if (!host)
        return hdx_evidence_find_process(ev, pid);
    struct want w = {.host = host, .pid = pid};
    const struct hdx_proc_index *x = current_index(ev);
    if (!x || pid == HDX_UNKNOWN)
        return scan(ev, ok_host_pid, &w);
    /* Under its own host's key, or (a process that names no host) under the NULL host's. */
    hdx_process *a = index_find(ev, x, key_of(KEY_HOST_PID, host, pid), ok_host_pid, &w);
    hdx_process *b = index_find(ev, x, key_of(KEY_HOST_PID, NULL, pid), ok_host_pid, &w);
    return !a ? b : !b ? a : a < b ? a : b;
}

hdx_process *hdx_evidence_find_waiter(const hdx_evidence *ev, const hdx_waiter *w)
{
    if (w->host)
        return hdx_evidence_find_process_on(ev, w->host, w->pid);
    if (w->rank >= 0) {
        struct want k = {.pid = w->pid, .rank = w->rank};
        const struct hdx_proc_index *x = current_index(ev);
        hdx_process *p = x && w->pid != HDX_UNKNOWN ? index_find(ev, x, key_of(KEY_PID, NULL, w->pid), ok_pid_rank, &k)
                                                    : scan(ev, ok_pid_rank, &k);
        if (p)
            return p;
    }
    return hdx_evidence_find_process(ev, w->pid);
}

hdx_process *hdx_evidence_find_rank_elsewhere(const hdx_evidence *ev, int rank, const char *host)
{
    if (rank < 0 || !host)
        return NULL;
    struct want w = {.host = host, .rank = rank};
    const struct hdx_proc_index *x = current_index(ev);
    return x ? index_find(ev, x, key_of(KEY_RANK, NULL, rank), ok_rank_elsewhere, &w)
             : scan(ev, ok_rank_elsewhere, &w);
}

hdx_lock *hdx_evidence_find_lock(const hdx_evidence *ev, const char *path)
{
    for (size_t i = 0; i < ev->n_locks; i++)
        if (ev->locks[i].path && strcmp(ev->locks[i].path, path) == 0)
            return &ev->locks[i];
    return NULL;
}

/* Which env names give which rank variable, most specific first. */
static const struct {
    const char *name;
    size_t field; /* offsetof into hdx_process */
} rank_vars[] = {
    {"RANK", offsetof(hdx_process, rank)},
    {"OMPI_COMM_WORLD_RANK", offsetof(hdx_process, rank)},
    {"PMI_RANK", offsetof(hdx_process, rank)},
    {"SLURM_PROCID", offsetof(hdx_process, rank)},
    {"LOCAL_RANK", offsetof(hdx_process, local_rank)},
    {"SLURM_LOCALID", offsetof(hdx_process, local_rank)},
    {"WORLD_SIZE", offsetof(hdx_process, world_size)},
    {"OMPI_COMM_WORLD_SIZE", offsetof(hdx_process, world_size)},
    {"PMI_SIZE", offsetof(hdx_process, world_size)},
    {"SLURM_NTASKS", offsetof(hdx_process, world_size)},
};

static const char *const allowed_env[] = {HDX_TRACE_ENV_NAMES};

static int env_priority(const char *name)
{
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++)
        if (strcmp(rank_vars[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *hdx_process_env(const hdx_process *p, const char *name)
{
    for (size_t i = 0; i < p->n_env; i++)
        if (strcmp(p->env[i].name, name) == 0)
            return p->env[i].value;
    return NULL;
}

int hdx_process_set_env(hdx_process *p, const char *name, const char *value)
{
    int allowed = 0;
    for (size_t i = 0; allowed_env[i] && !allowed; i++)
        allowed = strcmp(allowed_env[i], name) == 0;
    if (!allowed || hdx_process_env(p, name))
        return 0;
    /* A URL's credentials in an allowed value (MASTER_ADDR) would leave the host with it. */
    char *blanked = hdx_redact_credentials(value);
    if (!blanked && errno == ENOMEM)
        return -ENOMEM;
    hdx_env *e = hdx_append((void **)&p->env, &p->n_env, sizeof *e);
    if (!e || !(e->name = strdup(name)) || !(e->value = blanked ? blanked : strdup(value))) {
        if (!e || !e->name)
            free(blanked);
        return -ENOMEM;
    }
    /* Recompute the rank variables: the first listed name that is set wins. */
    int idx = env_priority(name);
    if (idx < 0)
        return 0;
    char *end;
    long v = strtol(value, &end, 10);
    if (end == value || *end || v < 0 || v > 1 << 24)
        return 0;
    int *field = (int *)((char *)p + rank_vars[idx].field);
    for (size_t i = 0; i < (size_t)idx; i++) {
        if (rank_vars[i].field == rank_vars[idx].field && hdx_process_env(p, rank_vars[i].name))
            return 0; /* a more specific name already set it */
    }
    *field = (int)v;
    return 0;
}

const char *hdx_lock_kind_name(enum hdx_lock_kind k)
{
    static const char *const n[] = {"baton", "flock", "posix", "ofd"};
    return (unsigned)k < 4 ? n[k] : "baton";
}

const char *hdx_lock_state_name(enum hdx_lock_state s)
{
    static const char *const n[] = {"free", "held", "stale"};
    return (unsigned)s < 3 ? n[s] : "free";
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

int hdx_python_name_matches(const char *have, const char *want)
{
    if (!strcmp(have, want))
        return 1;
    const char *dot = strrchr(want, '.'); /* qualified name wanted, plain name recorded (≤ 3.10) */
    if (dot)
        return !strchr(have, '.') && !strcmp(have, dot + 1);
    dot = strrchr(have, '.'); /* a plain name wanted, a method's qualified name recorded (3.11+) */
    return dot && !strcmp(dot + 1, want);
}

static const hdx_frame *find_in(const hdx_frame *frames, size_t n, const char *function, const char *file_suffix,
                                size_t *from)
{
    for (size_t i = from ? *from : 0; i < n; i++) {
        const hdx_frame *f = &frames[i];
        if (f->kind != HDX_FRAME_PYTHON || !f->function || !f->file)
            continue;
        if (hdx_python_name_matches(f->function, function) && ends_with(f->file, file_suffix)) {
            if (from)
                *from = i;
            return f;
        }
    }
    return NULL;
}

const hdx_frame *hdx_thread_find_python(const hdx_thread *t, const char *function, const char *file_suffix,
                                        size_t *from)
{
    if (t->unmerged)
        return find_in(t->py_frames, t->n_py_frames, function, file_suffix, from);
    return find_in(t->frames, t->n_frames, function, file_suffix, from);
}

const hdx_local *hdx_frame_local(const hdx_frame *f, const char *name)
{
    for (size_t i = 0; f && i < f->n_locals; i++)
        if (!strcmp(f->locals[i].name, name))
            return &f->locals[i];
    return NULL;
}

static int is_python(const hdx_process *p)
{
    if (p->python)
        return 1;
    if (!p->n_cmdline || !p->cmdline[0])
        return 0;
    const char *base = strrchr(p->cmdline[0], '/');
    return !strncmp(base ? base + 1 : p->cmdline[0], "python", 6);
}

static int same_host_proc(const hdx_process *a, const hdx_process *b)
{
    return same_host(a->host, b->host);
}

/* p's rank is PyTorch's own RANK, not a scheduler's task number (SLURM_PROCID, PMI_RANK, ...). */
static int has_torch_rank(const hdx_process *p)
{
    return hdx_process_env(p, "RANK") != NULL;
}

/* A launch or container wrapper: it carries the rank's variables on to the rank, and is never a
 * rank itself (a shell, env, chroot, unshare, srun and slurmstepd, enroot's, pyxis's and
 * apptainer's helpers, runc, conmon, containerd's shim, init stand-ins). By argv[0]'s base name,
 * else the thread name. */
static int is_wrapper(const hdx_process *p)
{
    static const char *const names[] = {
        "sh",          "bash",          "dash",    "zsh",       "env",      "chroot",      "unshare",
        "nsenter",     "setsid",        "nohup",   "timeout",   "stdbuf",   "numactl",     "taskset",
        "srun",        "slurmstepd",    "enroot",  "enroot-nsenter", "enroot-switchroot", "enroot-mount",
        "enroot-aufs2ovlfs", "pyxis",   "starter", "starter-suid", "apptainer", "singularity", "runc",
        "crun",        "conmon",        "containerd-shim", "containerd-shim-runc-v2", "tini", "dumb-init",
        "runuser",     "su",            "sudo",    "hangdx",
    };
    const char *name = p->n_cmdline && p->cmdline[0] ? p->cmdline[0]
                       : p->n_threads && p->threads[0].name ? p->threads[0].name
                                                             : NULL;
    if (!name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(base, names[i]))
            return 1;
    return 0;
}

/* An ancestor of p (within the evidence, same host) with p's rank, not a wrapper; with want_python, a Python
 * one. A rank that RANK gives is not inherited from an ancestor whose rank is a scheduler's task
 * number: torchrun under srun has SLURM_PROCID = its node's index, its workers RANK. */
static int ancestor_with_rank(const hdx_evidence *ev, const hdx_process *p, int want_python)
{
    const hdx_process *a = p;
    for (int depth = 0; depth < 64 && (a = hdx_evidence_find_process_on(ev, a->host, a->ppid)); depth++)
        if (a != p && a->rank == p->rank && same_host_proc(a, p) && (!want_python || is_python(a)) &&
            !is_wrapper(a) && (!has_torch_rank(p) || has_torch_rank(a)))
            return 1;
    return 0;
}

/* A launcher: an ancestor (same host) of a process with RANK, whose own rank is only a
 * scheduler's task number (srun's torchrun, one per node). Not a rank of the job. */
static void unmark_launchers(hdx_evidence *ev)
{
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        if (!has_torch_rank(p))
            continue;
        hdx_process *a = &ev->procs[i];
        for (int depth = 0; depth < 64 && (a = hdx_evidence_find_process_on(ev, a->host, a->ppid)); depth++)
            if (a->rank >= 0 && !has_torch_rank(a))
                a->is_rank_process = 0;
    }
}

struct python_rank {
    const hdx_process *p;
};

static int ok_python_rank(const hdx_process *q, const void *arg)
{
    const hdx_process *p = ((const struct python_rank *)arg)->p;
    return q->rank == p->rank && is_python(q) && same_host_proc(p, q);
}

void hdx_mark_rank_processes(hdx_evidence *ev)
{
    hdx_evidence_index(ev); /* without memory for it, the lookups scan */
    const struct hdx_proc_index *x = current_index(ev);
    for (size_t i = 0; i < ev->n_procs; i++) {
        hdx_process *p = &ev->procs[i];
        p->is_rank_process = 0;
        if (p->rank < 0 || is_wrapper(p))
            continue;
        if (is_python(p)) {
            p->is_rank_process = !ancestor_with_rank(ev, p, 1);
            continue;
        }
        /* Not Python: the rank's process only when no Python process has the rank. */
        struct python_rank arg = {p};
        int python_has_it = (x ? index_find(ev, x, key_of(KEY_RANK, NULL, p->rank), ok_python_rank, &arg)
                               : scan(ev, ok_python_rank, &arg)) != NULL;
        p->is_rank_process = !python_has_it && !ancestor_with_rank(ev, p, 0);
    }
    unmark_launchers(ev);
}

int hdx_process_descendant_depth(const hdx_evidence *ev, const hdx_process *p, const hdx_process *ancestor)
{
    for (int depth = 1; p && depth <= 64; depth++) {
        if (p->ppid == ancestor->pid && (!p->host || !ancestor->host || !strcmp(p->host, ancestor->host)))
            return depth;
        p = hdx_evidence_find_process_on(ev, p->host, p->ppid);
    }
    return 0;
}

int hdx_pgroup_rank_of(const hdx_pgroup *pg, int rank)
{
    for (size_t k = 0; pg && k < pg->n_ranks; k++)
        if (pg->ranks[k] == rank)
            return (int)k;
    return -1;
}

const char *hdx_process_part(const hdx_evidence *ev, const hdx_process *p)
{
    if (p->rank < 0)
        return NULL;
    if (p->is_rank_process)
        return "rank";
    /* 64 generations at most, as the other walks up the tree: a snapshot's ppids may loop
     * (a is b's parent and b a's) without coming back to p */
    const hdx_process *a = p;
    for (int depth = 0; depth < 64 && (a = hdx_evidence_find_process_on(ev, a->host, a->ppid)) && a != p; depth++)
        if (a->is_rank_process && a->rank == p->rank)
            return "worker";
    return "launcher";
}

int hdx_process_same_job(const hdx_process *a, const hdx_process *b)
{
    static const char *const keys[] = {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *x = hdx_process_env(a, keys[i]), *y = hdx_process_env(b, keys[i]);
        if (x && y && strcmp(x, y))
            return 0;
    }
    return 1;
}

int hdx_evidence_multi_host(const hdx_evidence *ev)
{
    const char *first = NULL;
    for (size_t i = 0; ev && i < ev->n_procs; i++) {
        const char *h = ev->procs[i].host;
        if (!h)
            continue;
        if (!first)
            first = h;
        else if (h != first && strcmp(h, first))
            return 1;
    }
    return 0;
}

size_t hdx_keep_largest_job(hdx_evidence *ev)
{
    const hdx_process *first = NULL;
    int one_job = 1;
    for (size_t i = 0; i < ev->n_procs; i++) {
        hdx_process *p = &ev->procs[i];
        p->set_aside = 0;
        if (!p->is_rank_process)
            continue;
        if (!first)
            first = p;
        else if (!hdx_process_same_job(first, p))
            one_job = 0;
    }
    if (one_job) /* the common case, in one pass even at 8192 ranks */
        return 0;
    /* The job of a process the user named; else the one with the most live rank processes
     * (one whose ranks all exited is no hang to judge). */
    const hdx_process *best = NULL;
    size_t best_live = 0, best_n = 0, set_aside = 0;
    int best_asked = 0;
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        size_t n = 0, live = 0;
        int asked = 0;
        for (size_t k = 0; p->is_rank_process && k < ev->n_procs; k++) {
            const hdx_process *q = &ev->procs[k];
            if (q->is_rank_process && hdx_process_same_job(p, q)) {
                n++;
                live += q->alive != 0;
                asked |= q->asked;
            }
        }
        if (n && (!best || asked > best_asked ||
                  (asked == best_asked && (live > best_live || (live == best_live && n > best_n))))) {
            best_asked = asked;
            best_live = live;
            best_n = n;
            best = p;
        }
    }
    const hdx_process keep = *best; /* a copy: is_rank_process changes below */
    for (size_t i = 0; i < ev->n_procs; i++) {
        hdx_process *p = &ev->procs[i];
        if (p->rank < 0)
            continue; /* no rank variables: no job's process */
        if (hdx_process_same_job(&keep, p))
            continue;
        set_aside += p->is_rank_process != 0;
        p->is_rank_process = 0;
        p->set_aside = 1;
    }
    return set_aside;
}

/* FNV-1a of s (NULL: as ""), then of a 0xff byte that ends it. */
static uint64_t hash_str(uint64_t h, const char *s)
{
    static const unsigned char end = 0xff;
    h = s ? hdx_fnv1a(s, strlen(s), h) : h;
    return hdx_fnv1a(&end, 1, h);
}

/* The frames' part of hdx_stack_hash. The threads of a loaded stack class share their array
 * (hdx_thread.shared_frames): its hash is kept per array in a small direct-mapped cache,
 * emptied when pooled memory may have been reused (hdx_pool_epoch_moved), as waits.c keeps its
 * signatures. */
#define FRAMES_MEMO_SLOTS 4096
static _Thread_local struct {
    const hdx_frame *frames;
    size_t n;
    uint64_t h;
} frames_memo[FRAMES_MEMO_SLOTS];
static _Thread_local unsigned long frames_memo_epoch;

static uint64_t frames_hash(const hdx_thread *t)
{
    size_t slot = 0;
    if (t->shared_frames && t->frames) {
        if (hdx_pool_epoch_moved(&frames_memo_epoch))
            memset(frames_memo, 0, sizeof frames_memo);
        slot = (size_t)(hdx_hash_mix((uintptr_t)t->frames) & (FRAMES_MEMO_SLOTS - 1));
        if (frames_memo[slot].frames == t->frames && frames_memo[slot].n == t->n_frames)
            return frames_memo[slot].h;
    }
    uint64_t h = HDX_FNV1A_OFFSET_BASIS;
    for (size_t i = 0; i < t->n_frames; i++) {
        h = hash_str(h, t->frames[i].function);
        if (t->frames[i].kind == HDX_FRAME_PYTHON)
            h = hash_str(h, t->frames[i].file) ^ (uint64_t)t->frames[i].line * 31;
    }
    if (t->shared_frames && t->frames) {
        frames_memo[slot].frames = t->frames;
        frames_memo[slot].n = t->n_frames;
        frames_memo[slot].h = h;
    }
    return h;
}

uint64_t hdx_stack_hash(const hdx_thread *t)
{
    return hash_str(frames_hash(t), t->wait);
}

const char *hdx_log_fact_field(const hdx_log_fact *f, const char *name)
{
    for (size_t i = 0; f && i < f->n_fields; i++)
        if (!strcmp(f->fields[i].name, name))
            return f->fields[i].value;
    return NULL;
}

long long hdx_log_fact_int(const hdx_log_fact *f, const char *name, long long def)
{
    const char *s = hdx_log_fact_field(f, name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return errno || *end ? def : v;
}

const hdx_log_rank *hdx_evidence_log_rank(const hdx_evidence *ev, int rank)
{
    for (size_t i = 0; i < ev->n_log_ranks; i++)
        if (ev->log_ranks[i].rank == rank)
            return &ev->log_ranks[i];
    return NULL;
}

void hdx_evidence_who(const hdx_evidence *ev, const hdx_process *p, int pid, int rank, char *buf, size_t size)
{
    const char *host = NULL;
    if (p) {
        pid = p->pid;
        rank = p->rank;
        host = p->host && hdx_evidence_multi_host(ev) ? p->host : NULL;
    }
    if (rank >= 0 && pid > 0)
        snprintf(buf, size, "rank %d (pid %d%s%s)", rank, pid, host ? " on " : "", host ? host : "");
    else if (rank >= 0)
        snprintf(buf, size, "rank %d", rank);
    else
        snprintf(buf, size, "pid %d%s%s", pid, host ? " on " : "", host ? host : "");
}


void hdx_thread_where(const hdx_thread *t, char *buf, size_t size)
{
    for (size_t i = 0; t && i < t->n_frames; i++) {
        const hdx_frame *f = &t->frames[i];
        if (f->kind != HDX_FRAME_PYTHON || !f->function)
            continue;
        const char *base = f->file ? strrchr(f->file, '/') : NULL;
        snprintf(buf, size, "%s (%s:%d)", f->function, base ? base + 1 : (f->file ? f->file : "?"), f->line);
        return;
    }
    snprintf(buf, size, "%s", t && t->wait ? t->wait : "an unknown place");
}

const char *hdx_process_name(const hdx_process *p)
{
    if (p->n_cmdline && p->cmdline[0]) {
        const char *slash = strrchr(p->cmdline[0], '/');
        return slash ? slash + 1 : p->cmdline[0];
    }
    if (p->n_threads && p->threads[0].name)
        return p->threads[0].name;
    return "?";
}
