/*
 * Evidence to hangdx.snapshot/2's JSON objects (evidence_json.h): processes with their
 * threads and frames, locks, and the whole snapshot object with its string and frame tables.
 */
#include "model/evidence_json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hangdx/fnv.h"
#include "hangdx/report.h"
#include "hangdx/trace.h"
#include "model/index.h"
#include "model/jsonout.h"
#include "model/pool.h"
#include "model/syscalls.h"
#include "model/util.h"

/* Integers that a JSON number (a double) holds exactly. */
#define EXACT_MAX 9007199254740992.0 /* 2^53 */

static const char *const allowed_env[] = {HDX_TRACE_ENV_NAMES};

static int env_allowed(const char *name)
{
    for (size_t i = 0; name && allowed_env[i]; i++)
        if (!strcmp(allowed_env[i], name))
            return 1;
    return 0;
}

/* ---- writing -------------------------------------------------------------- */

static cJSON *num_or_null(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

/* Negative errno as a positive one, 0 as null. */
static cJSON *errno_or_null(int e)
{
    return e ? cJSON_CreateNumber(e < 0 ? -(double)e : (double)e) : cJSON_CreateNull();
}

/* hangdx.snapshot/2's tables while writing: each distinct string once in "strings", each
 * distinct frame once in "frames"; threads list frames by index. */
typedef struct ftab {
    hdx_pool *pool; /* canonical copies: equal strings (and locals texts) are one pointer */
    cJSON *strings, *frames;
    const char **strs; /* "strings"[i]'s canonical pointer */
    size_t sn;
    hdx_index sidx; /* the pointer -> its index in strs */
    struct fkey {
        int kind, line;
        long function, file, module;
        uint64_t offset, pc;
        const char *locals; /* canonical text of the locals object, NULL none */
    } *keys;
    size_t kn;
    hdx_index fidx; /* fkey_hash -> the frame's index in keys */
    int failed;
    int no_pc; /* hangdx.report/2: frames without their absolute pc (each process's own under
                  ASLR: a job's equal stacks would not be one class) */
    struct hdx_stack_table *stacks; /* hangdx.report/2: threads name their stack's class */
} ftab;

/* The index of s in "strings", added when new; -1 for NULL (null), -2 on ENOMEM. */
static long ftab_string(ftab *t, const char *s)
{
    if (!s)
        return -1;
    const char *c = hdx_pool_intern(t->pool, s, strlen(s));
    if (!c)
        return -2;
    size_t cur = 0, at;
    while ((at = hdx_index_find(&t->sidx, (uintptr_t)c, &cur)) != HDX_INDEX_NONE)
        if (t->strs[at] == c)
            return (long)at;
    if (hdx_index_reserve(&t->sidx, t->sn + 1) < 0) /* then the insert below cannot fail */
        return -2;
    cJSON *item = cJSON_CreateString(c);
    const char **slot = item ? hdx_append((void **)&t->strs, &t->sn, sizeof *slot) : NULL;
    if (!slot) {
        cJSON_Delete(item);
        return -2;
    }
    *slot = c;
    cJSON_AddItemToArray(t->strings, item);
    hdx_index_insert(&t->sidx, (uintptr_t)c, t->sn - 1);
    return (long)t->sn - 1;
}

static uint64_t fkey_hash(const struct fkey *k)
{
    uint64_t h = hdx_hash_mix((uint64_t)k->kind * 31 + (uint64_t)k->line);
    h = hdx_hash_mix(h ^ (uint64_t)k->function);
    h = hdx_hash_mix(h ^ ((uint64_t)k->file << 20) ^ (uint64_t)k->module);
    h = hdx_hash_mix(h ^ k->offset);
    h = hdx_hash_mix(h ^ k->pc);
    return hdx_hash_mix(h ^ (uintptr_t)k->locals);
}

static int fkey_same(const struct fkey *a, const struct fkey *b)
{
    return a->kind == b->kind && a->line == b->line && a->function == b->function && a->file == b->file &&
           a->module == b->module && a->offset == b->offset && a->pc == b->pc && a->locals == b->locals;
}

/* A number when a JSON number holds it exactly, else its "0x.." text (a kernel address). */
static cJSON *exact_or_hex(uint64_t v)
{
    return v <= (uint64_t)EXACT_MAX ? cJSON_CreateNumber((double)v) : hdx_json_hex(v);
}

static cJSON *index_or_null(long i)
{
    return i >= 0 ? cJSON_CreateNumber((double)i) : cJSON_CreateNull();
}

/* The index of f in "frames", added when new; -1 on ENOMEM. */
static long ftab_frame(ftab *t, const hdx_frame *f)
{
    struct fkey k = {.kind = f->kind == HDX_FRAME_PYTHON, .line = f->line > 0 ? f->line : 0,
                     .offset = f->offset, .pc = t->no_pc ? 0 : f->pc};
    if ((k.function = ftab_string(t, f->function)) < -1 || (k.file = ftab_string(t, f->file)) < -1 ||
        (k.module = ftab_string(t, f->module)) < -1)
        return -1;
    cJSON *locals = NULL;
    if (f->locals) {
        char *text = NULL;
        if (!(locals = hdx_json_locals(f)) || !(text = hdx_json_print(locals, 0)) ||
            !(k.locals = hdx_pool_intern(t->pool, text, strlen(text)))) {
            free(text);
            cJSON_Delete(locals);
            return -1;
        }
        free(text);
    }
    uint64_t h = fkey_hash(&k);
    size_t cur = 0, at;
    while ((at = hdx_index_find(&t->fidx, h, &cur)) != HDX_INDEX_NONE)
        if (fkey_same(&t->keys[at], &k)) {
            cJSON_Delete(locals);
            return (long)at;
        }
    if (hdx_index_reserve(&t->fidx, t->kn + 1) < 0) { /* then the insert below cannot fail */
        cJSON_Delete(locals);
        return -1;
    }
    /* [kind, function, file, line, module, offset, pc, locals] */
    cJSON *e = cJSON_CreateArray();
    if (!e) {
        cJSON_Delete(locals);
        return -1;
    }
    cJSON_AddItemToArray(e, cJSON_CreateNumber(k.kind));
    cJSON_AddItemToArray(e, index_or_null(k.function));
    cJSON_AddItemToArray(e, index_or_null(k.file));
    cJSON_AddItemToArray(e, cJSON_CreateNumber(k.line));
    cJSON_AddItemToArray(e, index_or_null(k.module));
    cJSON_AddItemToArray(e, exact_or_hex(k.offset));
    cJSON_AddItemToArray(e, t->no_pc ? cJSON_CreateNull() : exact_or_hex(k.pc));
    cJSON_AddItemToArray(e, locals ? locals : cJSON_CreateNull());
    if (cJSON_GetArraySize(e) != 8) {
        cJSON_Delete(e);
        return -1;
    }
    struct fkey *slot = hdx_append((void **)&t->keys, &t->kn, sizeof *slot);
    if (!slot) {
        cJSON_Delete(e);
        return -1;
    }
    *slot = k;
    cJSON_AddItemToArray(t->frames, e);
    hdx_index_insert(&t->fidx, h, t->kn - 1);
    return (long)t->kn - 1;
}

static cJSON *frames_printed(hdx_frame_text_cache *c, const hdx_frame *frames, size_t n);

/* A thread's frames: objects (/1, reports; printed ones from c when given) or, with a
 * table, indexes into it (/2). */
static cJSON *frames_json(ftab *t, hdx_frame_text_cache *c, const hdx_frame *frames, size_t n)
{
    if (!t)
        return c ? frames_printed(c, frames, n) : hdx_json_frames(frames, n);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        long k = ftab_frame(t, &frames[i]);
        cJSON *item = k >= 0 ? cJSON_CreateNumber((double)k) : NULL;
        if (!item) {
            t->failed = 1;
            break;
        }
        cJSON_AddItemToArray(a, item);
    }
    return a;
}

static void ftab_clear(ftab *t)
{
    hdx_pool_free(t->pool);
    free(t->strs);
    hdx_index_free(&t->sidx);
    free(t->keys);
    hdx_index_free(&t->fidx);
}

static long stack_class_met(const struct hdx_stack_table *s, const hdx_thread *t);

/* A thread. Here and in process_json the keys are literals, added without a copy
 * (cJSON_AddItemToObjectCS): a report of 8192 ranks adds about 2 M of them. */
static cJSON *thread_json(const hdx_thread *t, ftab *tab, hdx_frame_text_cache *c)
{
    cJSON *e = cJSON_CreateObject();
    if (!e)
        return NULL;
    cJSON_AddItemToObjectCS(e, "tid", hdx_json_int(t->tid));
    cJSON_AddItemToObjectCS(e, "name", hdx_json_str(t->name));
    cJSON_AddItemToObjectCS(e, "state", hdx_json_char(t->state));
    cJSON_AddItemToObjectCS(e, "wchan", hdx_json_str(t->wchan));
    const char *sc = t->syscall == HDX_SYSCALL_RUNNING ? "running"
                     : t->syscall >= 0                 ? hdx_syscall_name(t->syscall)
                                                       : NULL;
    cJSON_AddItemToObjectCS(e, "syscall", hdx_json_str(sc));
    cJSON_AddItemToObjectCS(e, "syscall_nr", t->syscall >= 0 ? cJSON_CreateNumber((double)t->syscall)
                                                          : cJSON_CreateNull());
    cJSON *args = cJSON_CreateArray();
    cJSON_AddItemToObjectCS(e, "syscall_args", args);
    for (size_t i = 0; args && i < 6; i++)
        cJSON_AddItemToArray(args, hdx_json_hex(t->syscall_args[i]));
    cJSON_AddItemToObjectCS(e, "cpu_ms_first", num_or_null(t->cpu_ms_first));
    cJSON_AddItemToObjectCS(e, "cpu_ms", num_or_null(t->cpu_ms));
    cJSON_AddItemToObjectCS(e, "stack_error", errno_or_null(t->stack_error));
    cJSON_AddItemToObjectCS(e, "polled_path", hdx_json_str(t->polled_path));
    cJSON_AddItemToObjectCS(e, "wait", hdx_json_str(t->wait));
    cJSON_AddItemToObjectCS(e, "wait_op", hdx_json_str(t->wait_op));
    cJSON_AddItemToObjectCS(e, "peer", hdx_json_int(t->wait_peer));
    cJSON_AddItemToObjectCS(e, "wait_frame", t->wait_frame >= 0 ? cJSON_CreateNumber((double)t->wait_frame)
                                                              : cJSON_CreateNull());
    cJSON_AddItemToObjectCS(e, "wait_pg", hdx_json_str(t->wait_pg));
    cJSON_AddItemToObjectCS(e, "wait_seq", t->wait_seq != HDX_UNKNOWN ? cJSON_CreateNumber((double)t->wait_seq)
                                                                    : cJSON_CreateNull());
    cJSON_AddItemToObjectCS(e, "wait_sig", hdx_json_str(t->wait_sig));
    if (tab && tab->stacks) {
        long k = stack_class_met(tab->stacks, t); /* counted before (hdx_stack_table_count) */
        if (k < 0) {
            cJSON_Delete(e);
            return NULL;
        }
        cJSON_AddItemToObjectCS(e, "stack", cJSON_CreateNumber((double)k));
        cJSON_AddItemToObjectCS(e, "unmerged", cJSON_CreateBool(t->unmerged != 0));
        return e;
    }
    cJSON_AddItemToObjectCS(e, "frames", t->frames || !t->stack_error ? frames_json(tab, c, t->frames, t->n_frames)
                                                                     : cJSON_CreateNull());
    cJSON_AddItemToObjectCS(e, "unmerged", cJSON_CreateBool(t->unmerged != 0));
    cJSON_AddItemToObjectCS(e, "python_frames",
                          t->py_frames ? frames_json(tab, c, t->py_frames, t->n_py_frames) : cJSON_CreateNull());
    return e;
}

static cJSON *process_json(const hdx_process *p, ftab *tab, hdx_frame_text_cache *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddItemToObjectCS(o, "pid", hdx_json_int(p->pid));
    cJSON_AddItemToObjectCS(o, "ppid", hdx_json_int(p->ppid));
    cJSON_AddItemToObjectCS(o, "host", hdx_json_str(p->host));
    cJSON_AddItemToObjectCS(o, "rank", hdx_json_int(p->rank));
    cJSON_AddItemToObjectCS(o, "local_rank", hdx_json_int(p->local_rank));
    cJSON_AddItemToObjectCS(o, "world_size", hdx_json_int(p->world_size));
    cJSON *argv = cJSON_CreateArray();
    cJSON_AddItemToObjectCS(o, "cmdline", argv);
    for (size_t i = 0; argv && i < p->n_cmdline; i++)
        cJSON_AddItemToArray(argv, cJSON_CreateString(p->cmdline[i] ? p->cmdline[i] : ""));
    cJSON *env = cJSON_CreateObject();
    cJSON_AddItemToObjectCS(o, "env", env);
    for (size_t i = 0; env && i < p->n_env; i++) /* what leaves the host: the design's list only */
        if (env_allowed(p->env[i].name) && p->env[i].value && !cJSON_GetObjectItemCaseSensitive(env, p->env[i].name))
            cJSON_AddStringToObject(env, p->env[i].name, p->env[i].value);
    cJSON_AddItemToObjectCS(o, "exe", hdx_json_str(p->exe));
    cJSON_AddItemToObjectCS(o, "cwd", hdx_json_str(p->cwd));
    cJSON_AddItemToObjectCS(o, "state", hdx_json_char(p->state));
    cJSON_AddItemToObjectCS(o, "frozen", hdx_json_bool(p->frozen));
    cJSON_AddItemToObjectCS(o, "start_ticks", p->start_ticks ? cJSON_CreateNumber((double)p->start_ticks)
                                                           : cJSON_CreateNull());
    cJSON_AddItemToObjectCS(o, "age_s", num_or_null(p->age_s));
    cJSON_AddItemToObjectCS(o, "cpu_ms_first", num_or_null(p->cpu_ms_first));
    cJSON_AddItemToObjectCS(o, "cpu_ms", num_or_null(p->cpu_ms));
    cJSON_AddItemToObjectCS(o, "window_ms", cJSON_CreateNumber((double)p->window_ms));
    cJSON_AddItemToObjectCS(o, "progressing", hdx_json_bool(p->progressing));
    cJSON_AddItemToObjectCS(o, "stack_changed", hdx_json_bool(p->stack_changed));
    cJSON_AddItemToObjectCS(o, "asked", cJSON_CreateBool(p->asked));
    cJSON_AddItemToObjectCS(o, "stopped_us", hdx_json_int(p->stopped_us));
    cJSON_AddItemToObjectCS(o, "max_stop_us", cJSON_CreateNumber((double)p->max_stop_us));
    cJSON_AddItemToObjectCS(o, "n_stopped", cJSON_CreateNumber(p->n_stopped));
    cJSON_AddItemToObjectCS(o, "alive", hdx_json_bool(p->alive));
    cJSON_AddItemToObjectCS(o, "read_error", errno_or_null(p->read_error));
    cJSON_AddItemToObjectCS(o, "python", hdx_json_str(p->python));
    cJSON *threads = cJSON_CreateArray();
    cJSON_AddItemToObjectCS(o, "threads", threads);
    for (size_t i = 0; threads && i < p->n_threads; i++) {
        cJSON *t = thread_json(&p->threads[i], tab, c);
        if (!t) {
            cJSON_Delete(o);
            return NULL;
        }
        cJSON_AddItemToArray(threads, t);
    }
    return o;
}

cJSON *hdx_snapshot_process_json(const hdx_process *p)
{
    return process_json(p, NULL, NULL);
}

/* ---- stack classes (hangdx.report/2) ------------------------------------------ */

struct hdx_stack_table {
    ftab tab;
    cJSON *stacks; /* "stacks": one object per class, its "frames" and "python_frames" set */
    struct sclass {
        const char *key; /* the printed index arrays "frames|python_frames" (tab's pool) */
        int *ranks;      /* ranks of the processes with a thread in it, in order met (repeats) */
        size_t n_ranks, n_threads;
    } *classes;
    size_t n;
    hdx_index idx; /* fnv of key -> index in classes */
    /* Threads met, by their frames' pointers: a snapshot's frames share their names and
     * locals (pooled), so the threads of one host with equal stacks are found without
     * building their key (the 8192 ranks of BENCHMARKS.md "Reports that scale": the writer
     * took 2.8 s of CPU building every thread's key, 0.9 s so). */
    struct smet {
        const hdx_thread *t; /* borrowed from the evidence */
        long cls;
    } *met;
    size_t n_met;
    hdx_index met_idx; /* met_hash -> index in met */
    int given;     /* the tables went to a report (hdx_stack_table_take): not ours to free */
};

hdx_stack_table *hdx_stack_table_new(void)
{
    hdx_stack_table *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->tab.pool = hdx_pool_new();
    s->tab.strings = cJSON_CreateArray();
    s->tab.frames = cJSON_CreateArray();
    s->stacks = cJSON_CreateArray();
    s->tab.no_pc = 1;
    s->tab.stacks = s;
    if (!s->tab.pool || !s->tab.strings || !s->tab.frames || !s->stacks) {
        hdx_stack_table_free(s);
        errno = ENOMEM;
        return NULL;
    }
    return s;
}

void hdx_stack_table_free(hdx_stack_table *s)
{
    if (!s)
        return;
    if (!s->given) {
        cJSON_Delete(s->tab.strings);
        cJSON_Delete(s->tab.frames);
        cJSON_Delete(s->stacks);
    }
    for (size_t i = 0; i < s->n; i++)
        free(s->classes[i].ranks);
    free(s->classes);
    hdx_index_free(&s->idx);
    free(s->met);
    hdx_index_free(&s->met_idx);
    ftab_clear(&s->tab);
    free(s);
}

/* What a class's key depends on but for the text behind the pointers: the frames' kinds,
 * lines, offsets, names and locals (the pointers), not their pc; and whether each list is
 * null. The threads of a loaded class share their arrays (hdx_thread.shared_frames): their
 * pointers stand for all that. */
static uint64_t met_hash(const hdx_thread *t)
{
    uint64_t h = hdx_hash_mix((uint64_t)t->n_frames << 1 ^ (uint64_t)t->n_py_frames << 32 ^
                              (uint64_t)(!t->frames && t->stack_error) ^ (uint64_t)!t->py_frames << 63);
    if (t->shared_frames)
        return hdx_hash_mix(h ^ (uintptr_t)t->frames ^ (uint64_t)(uintptr_t)t->py_frames << 9);
    for (int list = 0; list < 2; list++) {
        const hdx_frame *f = list ? t->py_frames : t->frames;
        for (size_t i = 0, n = list ? t->n_py_frames : t->n_frames; i < n; i++) {
            h = hdx_hash_mix(h ^ ((uint64_t)f[i].kind * 31 + (uint64_t)(unsigned)f[i].line));
            h = hdx_hash_mix(h ^ (uintptr_t)f[i].function ^ (uint64_t)(uintptr_t)f[i].file << 7);
            h = hdx_hash_mix(h ^ (uintptr_t)f[i].module ^ f[i].offset);
            h = hdx_hash_mix(h ^ (uintptr_t)f[i].locals ^ (uint64_t)f[i].n_locals << 48);
        }
    }
    return h;
}

static int met_same_frames(const hdx_frame *a, const hdx_frame *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || a[i].line != b[i].line || a[i].function != b[i].function ||
            a[i].file != b[i].file || a[i].module != b[i].module || a[i].offset != b[i].offset ||
            a[i].locals != b[i].locals || a[i].n_locals != b[i].n_locals)
            return 0;
    return 1;
}

/* a and b have the same key for certain: equal pointers are equal texts. */
static int met_same(const hdx_thread *a, const hdx_thread *b)
{
    if (a->n_frames != b->n_frames || a->n_py_frames != b->n_py_frames ||
        (!a->frames && a->stack_error) != (!b->frames && b->stack_error) || !a->py_frames != !b->py_frames)
        return 0;
    if (a->shared_frames && b->shared_frames && a->frames == b->frames && a->py_frames == b->py_frames)
        return 1;
    return met_same_frames(a->frames, b->frames, a->n_frames) &&
           met_same_frames(a->py_frames, b->py_frames, a->n_py_frames);
}

static long stack_class_of(hdx_stack_table *s, const hdx_thread *t);

/* The class of t's stack when a thread with its frames was met, else -1. Reads s only. */
static long stack_class_met(const hdx_stack_table *s, const hdx_thread *t)
{
    uint64_t h = met_hash(t);
    size_t cur = 0, i;
    while ((i = hdx_index_find(&s->met_idx, h, &cur)) != HDX_INDEX_NONE)
        if (met_same(s->met[i].t, t))
            return s->met[i].cls;
    return -1;
}

/* The class of t's stack, added when new; count: t is one more of its threads, and rank
 * (HDX_UNKNOWN: none) among its ranks. -1 on ENOMEM. */
static long stack_class(hdx_stack_table *s, const hdx_thread *t, int rank, int count)
{
    long at = stack_class_met(s, t);
    if (at < 0) {
        uint64_t h = met_hash(t);
        struct smet *m = hdx_index_reserve(&s->met_idx, s->n_met + 1) < 0 ? NULL
                         : (at = stack_class_of(s, t)) < 0 ? NULL
                                                           : hdx_append((void **)&s->met, &s->n_met, sizeof *m);
        if (!m)
            return -1;
        m->t = t;
        m->cls = at;
        hdx_index_insert(&s->met_idx, h, s->n_met - 1);
    }
    struct sclass *c = &s->classes[at];
    c->n_threads += count != 0;
    if (count && rank >= 0 && (!c->n_ranks || c->ranks[c->n_ranks - 1] != rank)) { /* a process's threads come together */
        int *slot = hdx_append((void **)&c->ranks, &c->n_ranks, sizeof *slot);
        if (!slot)
            return -1;
        *slot = rank;
    }
    return at;
}

/* The class of t's stack by its key, added when new; -1 on ENOMEM. The key is the text of
 * the thread's index arrays: equal stacks are equal frames of the table, in the same order. */
static long stack_class_of(hdx_stack_table *s, const hdx_thread *t)
{
    ftab *tab = &s->tab;
    cJSON *fr = t->frames || !t->stack_error ? frames_json(tab, NULL, t->frames, t->n_frames) : cJSON_CreateNull();
    cJSON *py = t->py_frames ? frames_json(tab, NULL, t->py_frames, t->n_py_frames) : cJSON_CreateNull();
    char *a = fr && py && !tab->failed ? hdx_json_print(fr, 0) : NULL, *b = a ? hdx_json_print(py, 0) : NULL;
    char *key = b ? hdx_asprintf("%s|%s", a, b) : NULL;
    free(a);
    free(b);
    long at = -1;
    if (!key)
        goto out;
    uint64_t h = hdx_fnv1a(key, strlen(key), HDX_FNV1A_OFFSET_BASIS);
    size_t cur = 0, i;
    while ((i = hdx_index_find(&s->idx, h, &cur)) != HDX_INDEX_NONE)
        if (!strcmp(s->classes[i].key, key)) {
            at = (long)i;
            break;
        }
    if (at < 0) {
        cJSON *o = NULL;
        struct sclass *c = NULL;
        const char *k = hdx_pool_intern(tab->pool, key, strlen(key));
        if (!k || hdx_index_reserve(&s->idx, s->n + 1) < 0 || !(o = cJSON_CreateObject()) ||
            !(c = hdx_append((void **)&s->classes, &s->n, sizeof *c))) {
            cJSON_Delete(o);
            goto out;
        }
        memset(c, 0, sizeof *c);
        c->key = k;
        cJSON_AddItemToObject(o, "frames", fr);
        cJSON_AddItemToObject(o, "python_frames", py);
        fr = py = NULL;
        cJSON_AddItemToArray(s->stacks, o);
        at = (long)s->n - 1;
        hdx_index_insert(&s->idx, h, (size_t)at);
    }
out:
    free(key);
    cJSON_Delete(fr);
    cJSON_Delete(py);
    return at;
}

long hdx_stack_table_class(hdx_stack_table *s, const hdx_thread *t, int rank, int count)
{
    return s && t && !s->given ? stack_class(s, t, rank, count) : -1;
}

int hdx_stack_table_count(hdx_stack_table *s, const hdx_process *p)
{
    if (!s || s->given)
        return -ENOMEM;
    for (size_t i = 0; i < p->n_threads; i++)
        if (stack_class(s, &p->threads[i], p->rank, 1) < 0)
            return -ENOMEM;
    return 0;
}

cJSON *hdx_stack_table_process_json(const hdx_stack_table *s, const hdx_process *p)
{
    if (!s || s->given)
        return NULL;
    ftab tab = {.stacks = (hdx_stack_table *)s}; /* the threads' classes are only read */
    return process_json(p, &tab, NULL);
}

int hdx_stack_table_take(hdx_stack_table *s, cJSON *o, int formatted)
{
    if (!s || s->given || s->tab.failed)
        return -ENOMEM;
    cJSON *c = s->stacks->child;
    for (size_t i = 0; c && i < s->n; i++, c = c->next) {
        cJSON *r = hdx_json_ranges(s->classes[i].ranks, s->classes[i].n_ranks, formatted);
        if (!r)
            return -ENOMEM;
        cJSON_AddItemToObject(c, "ranks", r);
        cJSON_AddNumberToObject(c, "threads", (double)s->classes[i].n_threads);
    }
    s->given = 1;
    cJSON_AddItemToObject(o, "strings", s->tab.strings);
    cJSON_AddItemToObject(o, "frames", s->tab.frames);
    cJSON_AddItemToObject(o, "stacks", s->stacks);
    return 0;
}

/* ---- job logs (hangdx.report/2) ------------------------------------------------ */

static cJSON *string_ref(ftab *t, const char *s)
{
    long i = ftab_string(t, s);
    if (i < -1)
        t->failed = 1;
    return index_or_null(i);
}

static cJSON *log_fact_json(ftab *t, const hdx_log_fact *f)
{
    cJSON *a = cJSON_CreateArray(), *fields = cJSON_CreateObject();
    if (!a || !fields) {
        cJSON_Delete(a);
        cJSON_Delete(fields);
        return NULL;
    }
    /* [pattern, proves, class, strength, rank, group_rank, pg, default_pg, in_traceback,
     *  traceback, file, line, text, fields] */
    cJSON_AddItemToArray(a, string_ref(t, f->pattern));
    cJSON_AddItemToArray(a, string_ref(t, f->proves));
    cJSON_AddItemToArray(a, string_ref(t, f->cls));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(f->strength));
    cJSON_AddItemToArray(a, hdx_json_int(f->rank));
    cJSON_AddItemToArray(a, hdx_json_int(f->group_rank));
    cJSON_AddItemToArray(a, string_ref(t, f->pg));
    cJSON_AddItemToArray(a, hdx_json_bool(f->default_pg));
    cJSON_AddItemToArray(a, cJSON_CreateBool(f->in_traceback));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(f->traceback));
    cJSON_AddItemToArray(a, string_ref(t, f->file));
    cJSON_AddItemToArray(a, cJSON_CreateNumber((double)f->line));
    cJSON_AddItemToArray(a, hdx_json_str(f->text));
    for (size_t i = 0; i < f->n_fields; i++)
        cJSON_AddItemToObject(fields, f->fields[i].name ? f->fields[i].name : "", hdx_json_str(f->fields[i].value));
    cJSON_AddItemToArray(a, fields);
    return a;
}

static cJSON *log_rank_json(ftab *t, const hdx_log_rank *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "rank", r->rank);
    cJSON_AddItemToObject(o, "file", string_ref(t, r->file));
    cJSON_AddNumberToObject(o, "line", (double)r->last_line_no);
    cJSON_AddItemToObject(o, "last_line", hdx_json_str(r->last_line));
    cJSON_AddItemToObject(o, "last_time", hdx_json_str(r->last_time));
    cJSON_AddItemToObject(o, "last_pattern", string_ref(t, r->last_pattern));
    cJSON *seqs = cJSON_AddArrayToObject(o, "seqs");
    for (size_t i = 0; seqs && i < r->n_seqs; i++) {
        const hdx_log_seq *q = &r->seqs[i];
        cJSON *a = cJSON_CreateArray(); /* [pg, group_rank, unplaced, timed_out, enqueued, completed, op] */
        cJSON_AddItemToArray(a, hdx_json_str(q->pg));
        cJSON_AddItemToArray(a, hdx_json_int(q->group_rank));
        cJSON_AddItemToArray(a, cJSON_CreateBool(q->unplaced));
        cJSON_AddItemToArray(a, hdx_json_int(q->timed_out));
        cJSON_AddItemToArray(a, hdx_json_int(q->enqueued));
        cJSON_AddItemToArray(a, hdx_json_int(q->completed));
        cJSON_AddItemToArray(a, hdx_json_str(q->op));
        cJSON_AddItemToArray(seqs, a);
    }
    cJSON_AddItemToObject(o, "exit_cause", hdx_json_str(r->exit_cause));
    cJSON_AddBoolToObject(o, "root_cause", r->root_cause);
    cJSON_AddItemToObject(o, "rank_from", hdx_json_str(r->rank_from));
    return o;
}

cJSON *hdx_logs_json(const hdx_evidence *ev)
{
    ftab t = {.pool = hdx_pool_new()};
    cJSON *o = cJSON_CreateObject();
    t.strings = cJSON_AddArrayToObject(o, "strings");
    cJSON *facts = cJSON_AddArrayToObject(o, "facts"), *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (size_t i = 0; facts && i < ev->n_log_facts; i++)
        cJSON_AddItemToArray(facts, log_fact_json(&t, &ev->log_facts[i]));
    for (size_t i = 0; ranks && i < ev->n_log_ranks; i++)
        cJSON_AddItemToArray(ranks, log_rank_json(&t, &ev->log_ranks[i]));
    if (!t.pool || !ranks || t.failed || cJSON_GetArraySize(facts) != (int)ev->n_log_facts ||
        cJSON_GetArraySize(ranks) != (int)ev->n_log_ranks) {
        cJSON_Delete(o);
        o = NULL;
        errno = ENOMEM;
    }
    ftab_clear(&t);
    return o;
}

/* ---- frames printed once (reports of many ranks) ------------------------------ */

#define FRAME_TEXT_DEPTH 4                    /* a frame object's depth in cJSON_Print of a process */
#define FRAME_TEXT_MAX_BYTES (64u << 20)      /* the cache stops growing here */

struct hdx_frame_text_cache {
    struct ftslot {
        const hdx_frame *key; /* a frame with this content (pooled: its pointers name it) */
        char *text;
    } *slots;
    size_t n, bytes;
    hdx_index index; /* frame_key_hash -> index in slots */
};

hdx_frame_text_cache *hdx_frame_text_cache_new(void)
{
    return calloc(1, sizeof(hdx_frame_text_cache));
}

void hdx_frame_text_cache_free(hdx_frame_text_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->slots[i].text);
    free(c->slots);
    hdx_index_free(&c->index);
    free(c);
}

/* Everything the printed text of a pooled frame depends on: its names and locals are
 * shared, read-only pool memory, so their pointers stand for their content. */
static uint64_t frame_key_hash(const hdx_frame *f)
{
    uint64_t h = hdx_hash_mix((uint64_t)f->kind * 31 + (uint64_t)(unsigned)f->line);
    h = hdx_hash_mix(h ^ (uintptr_t)f->function);
    h = hdx_hash_mix(h ^ (uintptr_t)f->file);
    h = hdx_hash_mix(h ^ (uintptr_t)f->module);
    h = hdx_hash_mix(h ^ f->offset);
    h = hdx_hash_mix(h ^ f->pc);
    return hdx_hash_mix(h ^ (uintptr_t)f->locals ^ (uint64_t)f->n_locals << 48);
}

static int frame_key_same(const hdx_frame *a, const hdx_frame *b)
{
    return a->kind == b->kind && a->line == b->line && a->function == b->function && a->file == b->file &&
           a->module == b->module && a->offset == b->offset && a->pc == b->pc && a->locals == b->locals &&
           a->n_locals == b->n_locals;
}

/* cJSON_Print of f as it stands at FRAME_TEXT_DEPTH: each line after the first indented
 * by that many more tabs. NULL on ENOMEM. */
static char *frame_text(const hdx_frame *f)
{
    cJSON *o = hdx_json_frame(f);
    char *t = o ? hdx_json_print(o, 1) : NULL;
    cJSON_Delete(o);
    if (!t)
        return NULL;
    size_t lines = 0, len = strlen(t);
    for (const char *q = t; (q = strchr(q, '\n')); q++)
        lines++;
    char *out = malloc(len + lines * FRAME_TEXT_DEPTH + 1), *w = out;
    for (const char *q = t; out && *q; q++) {
        *w++ = *q;
        if (*q == '\n')
            for (int k = 0; k < FRAME_TEXT_DEPTH; k++)
                *w++ = '\t';
    }
    if (out)
        *w = 0;
    free(t);
    return out;
}

/* The cached text of a pooled frame (borrowed from c), or NULL: not pooled, the cache
 * full, or ENOMEM (then the frame is printed as an object). */
static const char *cached_text(hdx_frame_text_cache *c, const hdx_frame *f)
{
    if (!c || !f->pooled)
        return NULL;
    uint64_t h = frame_key_hash(f);
    size_t cur = 0, at;
    while ((at = hdx_index_find(&c->index, h, &cur)) != HDX_INDEX_NONE)
        if (frame_key_same(c->slots[at].key, f))
            return c->slots[at].text;
    /* reserved first: the insert below cannot fail */
    if (c->bytes >= FRAME_TEXT_MAX_BYTES || hdx_index_reserve(&c->index, c->n + 1) < 0)
        return NULL;
    char *t = frame_text(f);
    struct ftslot *e = t ? hdx_append((void **)&c->slots, &c->n, sizeof *e) : NULL;
    if (!e) {
        free(t);
        return NULL;
    }
    e->key = f;
    e->text = t;
    hdx_index_insert(&c->index, h, c->n - 1);
    c->bytes += strlen(t) + sizeof *c->slots;
    return t;
}

/* frames as an array of raw items (cached texts), or of objects where none is cached. */
static cJSON *frames_printed(hdx_frame_text_cache *c, const hdx_frame *frames, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        const char *t = cached_text(c, &frames[i]);
        cJSON *item = t ? cJSON_CreateNull() : hdx_json_frame(&frames[i]);
        if (!item) {
            cJSON_Delete(a);
            return NULL;
        }
        if (t) { /* a raw item that borrows the cache's text: cJSON_Delete leaves it */
            item->type = cJSON_Raw | cJSON_IsReference;
            item->valuestring = (char *)t;
        }
        cJSON_AddItemToArray(a, item);
    }
    return a;
}

cJSON *hdx_snapshot_process_json_printed(const hdx_process *p, hdx_frame_text_cache *c)
{
    return process_json(p, NULL, c);
}

/* The facts of a lock (hdx_lock_facts), as a snapshot carries them; null for none. */
static cJSON *facts_json(const hdx_lock_facts *f)
{
    if (!f->looked)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject(), *a;
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "live", f->live);
    cJSON_AddBoolToObject(o, "checked", f->checked);
    cJSON_AddNumberToObject(o, "dev", (double)f->dev);
    cJSON_AddNumberToObject(o, "ino", (double)f->ino);
    cJSON_AddNumberToObject(o, "size", (double)f->size);
    cJSON_AddNumberToObject(o, "uid", f->uid);
    if (f->rows_read && (a = cJSON_AddArrayToObject(o, "rows")))
        for (size_t i = 0; i < f->n_rows; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToObject(e, "pid", hdx_json_int(f->rows[i].pid));
            cJSON_AddStringToObject(e, "kind", hdx_lock_kind_name(f->rows[i].kind));
            cJSON_AddBoolToObject(e, "blocking", f->rows[i].blocking);
            cJSON_AddItemToArray(a, e);
        }
    else
        cJSON_AddNullToObject(o, "rows");
    if (f->openers_read && (a = cJSON_AddArrayToObject(o, "openers")))
        for (size_t i = 0; i < f->n_openers; i++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(f->openers[i]));
    else
        cJSON_AddNullToObject(o, "openers");
    cJSON_AddNumberToObject(o, "unreadable", f->unreadable);
    if ((a = cJSON_AddArrayToObject(o, "pids")))
        for (size_t i = 0; i < f->n_pids; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "pid", f->pids[i].pid);
            cJSON_AddBoolToObject(e, "alive", f->pids[i].alive == 1);
            cJSON_AddNumberToObject(e, "start_ticks", (double)f->pids[i].start_ticks);
            cJSON_AddItemToArray(a, e);
        }
    return o;
}

/* A lock as judged j (NULL: as the lock records it: kind, state, holder, unchecked, its
 * creator's liveness); waiters and a holder without a host get default_host (the
 * snapshot's). with_facts: add the facts it is judged from (snapshots, for analyze to
 * judge again). */
static cJSON *lock_json(const hdx_lock *l, const hdx_lock_judgement *j, const char *default_host, int with_facts)
{
    hdx_lock_judgement rec = {.state = l->state,
                              .kind = l->kind,
                              .holder_pid = l->holder_pid,
                              .holder_host = l->holder_host,
                              .creator_alive = l->creator_alive,
                              .unchecked = l->unchecked};
    if (!j)
        j = &rec;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddItemToObject(o, "path", hdx_json_str(l->path));
    cJSON_AddItemToObject(o, "job_path", hdx_json_str(l->job_path));
    cJSON_AddItemToObject(o, "mnt_ns", l->mnt_ns ? cJSON_CreateNumber((double)l->mnt_ns) : cJSON_CreateNull());
    cJSON_AddBoolToObject(o, "foreign", l->foreign);
    cJSON_AddStringToObject(o, "kind", hdx_lock_kind_name(j->kind));
    cJSON_AddStringToObject(o, "state", hdx_lock_state_name(j->state));
    cJSON_AddItemToObject(o, "exists", hdx_json_bool(l->exists));
    cJSON_AddItemToObject(o, "mtime", hdx_json_time(l->mtime_ns, 1));
    cJSON_AddItemToObject(o, "holder_pid", hdx_json_int(j->holder_pid));
    cJSON_AddItemToObject(o, "holder_host", hdx_json_str(j->holder_pid == HDX_UNKNOWN ? NULL
                                                         : j->holder_host       ? j->holder_host
                                                                                : default_host));
    cJSON_AddNumberToObject(o, "unchecked", j->unchecked);
    if (l->has_creator) {
        cJSON *c = cJSON_AddObjectToObject(o, "created_by");
        cJSON_AddItemToObject(c, "pid", hdx_json_int(l->creator_pid));
        cJSON_AddItemToObject(c, "rank", hdx_json_int(l->creator_rank));
        cJSON_AddItemToObject(c, "alive", hdx_json_bool(j->creator_alive));
        cJSON_AddItemToObject(c, "at", hdx_json_time(l->created_ns, 1));
    } else {
        cJSON_AddNullToObject(o, "created_by");
    }
    cJSON_AddItemToObject(o, "source", hdx_json_str(l->source));
    cJSON *w = cJSON_AddArrayToObject(o, "waiters");
    for (size_t i = 0; w && i < l->n_waiters; i++) {
        const hdx_waiter *x = &l->waiters[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToObject(e, "pid", hdx_json_int(x->pid));
        cJSON_AddItemToObject(e, "tid", hdx_json_int(x->tid));
        cJSON_AddItemToObject(e, "rank", hdx_json_int(x->rank));
        cJSON_AddItemToObject(e, "since", hdx_json_time(x->since_ns, 1));
        cJSON_AddItemToObject(e, "how", hdx_json_str(x->how));
        cJSON_AddItemToObject(e, "host", hdx_json_str(x->host ? x->host : default_host));
        if (x->elsewhere) /* a gone container's pid: no process of the host */
            cJSON_AddBoolToObject(e, "elsewhere", 1);
        cJSON_AddItemToArray(w, e);
    }
    if (with_facts)
        cJSON_AddItemToObject(o, "facts", facts_json(&l->facts));
    return o;
}

cJSON *hdx_snapshot_lock_json(const hdx_lock *l, const hdx_lock_judgement *j)
{
    return l ? lock_json(l, j, NULL, 0) : NULL;
}

/* ---- hangdx.snapshot/3: a node's snapshot with its stacks by class ------------ */

/* o (an object, which is emptied) as a row: an array of its values in the order of its
 * keys, which are those of keys (an array of strings; when empty, o's keys are written to
 * it). NULL on ENOMEM, or when o's keys are not those of keys (the writer's objects always
 * have every key, in one order). */
static cJSON *row_of(cJSON *o, cJSON *keys)
{
    cJSON *row = cJSON_CreateArray();
    int fill = !keys->child;
    const cJSON *k = keys->child;
    while (row && o->child) {
        cJSON *v = cJSON_DetachItemViaPointer(o, o->child);
        /* A constant key (cJSON_AddItemToObjectCS: the writer's literals) is kept by reference,
         * so that the next rows' keys, the same literals, compare as pointers. */
        int literal = (v->type & cJSON_StringIsConst) != 0;
        if (fill ? !cJSON_AddItemToArray(keys, literal ? cJSON_CreateStringReference(v->string) : cJSON_CreateString(v->string))
                 : !k || !v->string || (k->valuestring != v->string && strcmp(k->valuestring, v->string) != 0)) {
            cJSON_Delete(v);
            cJSON_Delete(row);
            return NULL;
        }
        k = k ? k->next : NULL;
        cJSON_AddItemToArray(row, v);
    }
    if (row && !fill && k) { /* fewer values than keys */
        cJSON_Delete(row);
        return NULL;
    }
    return row;
}

cJSON *hdx_process_row(cJSON *o, cJSON *pkeys, cJSON *tkeys)
{
    cJSON *row = NULL;
    cJSON *threads = o ? cJSON_GetObjectItemCaseSensitive(o, "threads") : NULL, *rows = cJSON_CreateArray();
    if (!threads || !rows)
        goto out;
    for (cJSON *t = threads->child; t; t = t->next) {
        cJSON *r = row_of(t, tkeys);
        if (!r)
            goto out;
        cJSON_AddItemToArray(rows, r);
    }
    cJSON_ReplaceItemInObjectCaseSensitive(o, "threads", rows);
    rows = NULL;
    row = row_of(o, pkeys);
out:
    cJSON_Delete(rows);
    cJSON_Delete(o);
    return row;
}

/* hangdx.snapshot/2 (reduced 0) or /3 (reduced 1) of ev. */
static cJSON *snapshot_json(const hdx_evidence *ev, int reduced)
{
    if (!ev) {
        errno = EINVAL;
        return NULL;
    }
    ftab tab = {.pool = reduced ? NULL : hdx_pool_new()};
    hdx_stack_table *st = reduced ? hdx_stack_table_new() : NULL;
    cJSON *r = cJSON_CreateObject(), *pkeys = NULL, *tkeys = NULL;
    if (!r || (reduced ? !st : !tab.pool))
        goto nomem;
    cJSON_AddStringToObject(r, "schema", reduced ? HDX_SNAPSHOT_SCHEMA_REDUCED : HDX_SNAPSHOT_SCHEMA);
    cJSON_AddItemToObject(r, "host", hdx_json_str(ev->host));
    cJSON_AddItemToObject(r, "taken_at", hdx_json_time(ev->taken_ns, 1));
    cJSON_AddNumberToObject(r, "samples", ev->samples);
    cJSON_AddNumberToObject(r, "interval_ms", ev->interval_ms);
    cJSON_AddNumberToObject(r, "build_timeout_s", (double)ev->build_timeout_s);
    if (reduced) {
        pkeys = cJSON_AddArrayToObject(r, "process_keys");
        tkeys = cJSON_AddArrayToObject(r, "thread_keys");
        if (!pkeys || !tkeys)
            goto nomem;
    } else {
        tab.strings = cJSON_AddArrayToObject(r, "strings");
        tab.frames = cJSON_AddArrayToObject(r, "frames");
        if (!tab.strings || !tab.frames)
            goto nomem;
    }
    cJSON *procs = cJSON_AddArrayToObject(r, "processes");
    for (size_t i = 0; procs && i < ev->n_procs; i++)
        cJSON_AddItemToArray(procs, !reduced ? process_json(&ev->procs[i], &tab, NULL)
                                    : hdx_stack_table_count(st, &ev->procs[i]) < 0
                                        ? NULL
                                        : hdx_process_row(hdx_stack_table_process_json(st, &ev->procs[i]), pkeys, tkeys));
    cJSON *locks = cJSON_AddArrayToObject(r, "locks");
    for (size_t i = 0; locks && i < ev->n_locks; i++)
        cJSON_AddItemToArray(locks, lock_json(&ev->locks[i], NULL, ev->host, 1));
    cJSON *pgroups = hdx_json_pgroups(ev);
    cJSON_AddItemToObject(r, "process_groups", pgroups);
    cJSON *notes = cJSON_AddArrayToObject(r, "notes");
    for (size_t i = 0; notes && i < ev->n_notes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(ev->notes[i] ? ev->notes[i] : ""));
    if (tab.failed || !procs || !locks || !notes || !pgroups || cJSON_GetArraySize(procs) != (int)ev->n_procs ||
        cJSON_GetArraySize(locks) != (int)ev->n_locks || cJSON_GetArraySize(notes) != (int)ev->n_notes ||
        (reduced && hdx_stack_table_take(st, r, 0) < 0) || cJSON_GetArraySize(r) != (reduced ? 15 : 12))
        goto nomem;
    ftab_clear(&tab);
    hdx_stack_table_free(st);
    return r;
nomem:
    ftab_clear(&tab);
    hdx_stack_table_free(st);
    cJSON_Delete(r);
    errno = ENOMEM;
    return NULL;
}

cJSON *hdx_snapshot_json(const hdx_evidence *ev)
{
    return snapshot_json(ev, 0);
}

cJSON *hdx_snapshot_json_reduced(const hdx_evidence *ev)
{
    return snapshot_json(ev, 1);
}
