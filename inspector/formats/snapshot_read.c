/*
 * The reader of hangdx.snapshot/3, /2 and /1 and of hangdx.report/2 and /1 objects (snapshot.h): a
 * cJSON tree checked member by member into a fresh evidence, with a message naming where
 * it went wrong, and merged into the caller's.
 */
#include "formats/snapshot.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hangdx/report.h"
#include "model/evidence_merge.h"
#include "model/index.h"
#include "model/json_read.h"
#include "model/jsonout.h"
#include "model/pool.h"
#include "model/syscalls.h"
#include "model/util.h"

/* Integers that a JSON number (a double) holds exactly. */
#define EXACT_MAX 9007199254740992.0 /* 2^53 */

/* The reader's state: the input's name, where in it we are, and the first error. */
typedef struct rd {
    const char *name;
    char where[256];
    char *err;
    int rc;
    hdx_snapshot_share *share; /* frames' strings, locals and classes' frames go to its pool, interned */
    hdx_pool *pool;       /* share->pool */
    int v2;               /* hangdx.snapshot/2: frames are indexes into `table` */
    char **strings;       /* /2 "strings", interned in pool (the array: r's, heap) */
    size_t n_strings;
    hdx_frame *table;     /* /2 "frames", pooled (the array: r's, heap) */
    size_t n_table;
    const char *host;     /* the input's one host, for waiters and holders that name none */
    const cJSON **stacks; /* hangdx.report/2 and snapshot/3 "stacks": each class's object (borrowed from the tree; r's, heap) */
    size_t n_stacks;
    struct class_frames {  /* each class's frames, read once (shared in the pool) at its first thread; r's, heap */
        int read;          /* 1: read (the rest is set) */
        int has_frames;    /* 0: the class's "frames" is null or absent */
        hdx_frame *frames, *py;
        size_t n_frames, n_py;
    } *classes;            /* n_stacks of them */
    const cJSON *process_keys, *thread_keys; /* a /3 snapshot's or /2 report's rows' keys; else NULL */
    cJSON *process_view, *thread_view; /* as_object's objects for the rows of each; r's */
    struct view_hint {      /* member()'s memory of a view: */
        const cJSON *last;  /* the member found last */
        const char *absent[8]; /* keys (the callers' literals) the view's keys lack */
        size_t n_absent;
        struct asked {      /* the keys asked for in a row, in their order, and what each found */
            const char *key;   /* the caller's literal */
            const cJSON *item; /* the view's member (NULL: absent) */
        } asked[64];
        size_t step;        /* how many members this row has asked for */
    } process_hint, thread_hint;
    hdx_local *scratch;    /* read_locals' room, reused (heap) */
    size_t scratch_size;   /* its entries */
} rd;

/*
 * The memory the documents loaded in one thread share (snapshot.h): the pool their frames
 * borrow from, and the arrays interned in it — locals objects and the classes' frames, which
 * the ranks of a job repeat host after host. Entries are found by hash (index.h) and
 * compared field by field: their strings are the pool's interned ones, so equal strings are
 * equal pointers.
 */
enum shared_kind { SHARED_LOCALS, SHARED_FRAMES };
struct hdx_snapshot_share {
    hdx_pool *pool;
    struct shared_array {
        const void *items;
        size_t n;
        enum shared_kind kind;
    } *arrays;
    size_t n_arrays;
    hdx_index index; /* over arrays */
};

hdx_snapshot_share *hdx_snapshot_share_new(void)
{
    hdx_snapshot_share *s = calloc(1, sizeof *s);
    if (s && !(s->pool = hdx_pool_new())) {
        free(s);
        s = NULL;
    }
    return s;
}

void hdx_snapshot_share_end(hdx_snapshot_share *s, hdx_evidence *keep)
{
    if (!s)
        return;
    if (keep && !keep->pool) {
        keep->pool = s->pool;
        s->pool = NULL;
    } else if (keep) {
        hdx_pool_absorb(keep->pool, s->pool);
    }
    hdx_pool_free(s->pool);
    free(s->arrays);
    hdx_index_free(&s->index);
    free(s);
}

static uint64_t hash_ptr(uint64_t h, const void *p)
{
    return hdx_hash_mix(h ^ (uint64_t)(uintptr_t)p);
}

static uint64_t locals_hash(const hdx_local *l, size_t n)
{
    uint64_t h = n;
    for (size_t i = 0; i < n; i++) {
        uint64_t f;
        memcpy(&f, &l[i].f, sizeof f);
        h = hash_ptr(hash_ptr(hash_ptr(h, l[i].name), l[i].s), l[i].pg);
        h = hdx_hash_mix(h ^ (uint64_t)l[i].kind ^ ((uint64_t)l[i].i << 3) ^ (f << 1) ^ l[i].addr);
    }
    return h;
}

static int locals_same(const hdx_local *a, const hdx_local *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].name != b[i].name || a[i].kind != b[i].kind || a[i].i != b[i].i ||
            memcmp(&a[i].f, &b[i].f, sizeof a[i].f) || a[i].s != b[i].s || a[i].addr != b[i].addr ||
            a[i].pg != b[i].pg)
            return 0;
    return 1;
}

static uint64_t frames_hash(const hdx_frame *f, size_t n)
{
    uint64_t h = ~(uint64_t)n;
    for (size_t i = 0; i < n; i++) {
        h = hash_ptr(hash_ptr(hash_ptr(hash_ptr(h, f[i].function), f[i].file), f[i].module), f[i].locals);
        h = hdx_hash_mix(h ^ (uint64_t)f[i].kind ^ ((uint64_t)f[i].pooled << 1) ^ ((uint64_t)f[i].line << 2));
        h = hdx_hash_mix(h ^ f[i].offset ^ (f[i].pc << 1) ^ ((uint64_t)f[i].n_locals << 7));
    }
    return h;
}

static int frames_same(const hdx_frame *a, const hdx_frame *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || a[i].pooled != b[i].pooled || a[i].function != b[i].function ||
            a[i].file != b[i].file || a[i].line != b[i].line || a[i].module != b[i].module ||
            a[i].offset != b[i].offset || a[i].pc != b[i].pc || a[i].locals != b[i].locals ||
            a[i].n_locals != b[i].n_locals)
            return 0;
    return 1;
}

/* The share's copy of the n items at a (locals or frames, by kind), equal item for item: the
 * same array for equal contents, read-only. n 0 gives a valid pointer. NULL on ENOMEM. */
static void *share_array(hdx_snapshot_share *s, enum shared_kind kind, const void *a, size_t n)
{
    uint64_t h = kind == SHARED_LOCALS ? locals_hash(a, n) : frames_hash(a, n);
    size_t cur = 0, at;
    while ((at = hdx_index_find(&s->index, h, &cur)) != HDX_INDEX_NONE) {
        const struct shared_array *e = &s->arrays[at];
        if (e->kind == kind && e->n == n &&
            (kind == SHARED_LOCALS ? locals_same(e->items, a, n) : frames_same(e->items, a, n)))
            return (void *)e->items;
    }
    size_t size = n * (kind == SHARED_LOCALS ? sizeof(hdx_local) : sizeof(hdx_frame));
    void *copy;
    struct shared_array *e;
    if (hdx_index_reserve(&s->index, s->n_arrays + 1) < 0 || !(copy = hdx_pool_alloc(s->pool, size)) ||
        !(e = hdx_append((void **)&s->arrays, &s->n_arrays, sizeof *e)))
        return NULL;
    if (size)
        memcpy(copy, a, size);
    *e = (struct shared_array){.items = copy, .n = n, .kind = kind};
    hdx_index_insert(&s->index, h, s->n_arrays - 1); /* reserved: cannot fail */
    return copy;
}

static int fail(rd *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(rd *r, int rc, const char *fmt, ...)
{
    if (r->rc)
        return r->rc;
    r->rc = rc;
    if (rc == -ENOMEM)
        return rc;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    r->err = hdx_asprintf("%s: %s%s%s", r->name, r->where, r->where[0] ? ": " : "", msg ? msg : "malformed");
    free(msg);
    return rc;
}

#define BAD(r, ...) fail((r), -EBADMSG, __VA_ARGS__)

#define NO_INDEX ((size_t)-1)

/* Remember where we are for messages: name, then "[index]" unless NO_INDEX ("processes[3]",
 * then ".threads[1]"); returns the old length, for leave(). Made by hand: it runs for each
 * thread of a job's snapshots, and vsnprintf was 1.4 % of reading them. */
static size_t enter(rd *r, const char *name, size_t index)
{
    size_t old = strlen(r->where), at = old, room = sizeof r->where - 1, n = 0;
    char buf[HDX_JSON_DIGITS];
    const char *d = index == NO_INDEX ? NULL : hdx_json_digits((long long)index, buf, &n);
    for (; *name && at < room; name++)
        r->where[at++] = *name;
    if (d && at < room)
        r->where[at++] = '[';
    for (size_t k = 0; d && k <= n && at < room; k++)
        r->where[at++] = k < n ? d[k] : ']';
    r->where[at] = 0;
    return old;
}

static void leave(rd *r, size_t old)
{
    r->where[old] = 0;
}

/* The getters below read members through json_read.h; its refusals become r's message. */

/*
 * o's member key, NULL when absent or JSON null: hdx_json_member, but in a row's view (as_object),
 * whose keys are unique and the same for every row. The rows of a document are read alike, so
 * the member the n-th key asked for in a row found is remembered, and found again at once when
 * the next row's n-th key is the same literal (a pointer compare). Otherwise the search starts
 * after the member found last in that view and wraps around, and a key found absent once is not
 * looked for again, so that a row's members, read in their order, cost a compare each, not a
 * walk from the first (the walks were 10 % of analyze of 131 072 ranks, the compares 4 %).
 */
static const cJSON *member(rd *r, const cJSON *o, const char *key)
{
    struct view_hint *h = o && o == r->process_view ? &r->process_hint
                          : o && o == r->thread_view ? &r->thread_hint
                                                     : NULL;
    if (!h)
        return hdx_json_member(o, key);
    struct asked *a = h->step < sizeof h->asked / sizeof h->asked[0] ? &h->asked[h->step++] : NULL;
    if (a && a->key == key)
        return a->item && !cJSON_IsNull(a->item) ? a->item : NULL;
    const cJSON *found = NULL;
    for (size_t i = 0; i < h->n_absent; i++)
        if (h->absent[i] == key)
            goto out;
    const cJSON *start = h->last && h->last->next ? h->last->next : o->child, *c = start;
    for (int wrapped = 0; !found && c && (c != start || !wrapped); c = c->next ? c->next : o->child, wrapped = 1)
        if (c->string && !strcmp(c->string, key))
            found = h->last = c;
    if (!found && h->n_absent < sizeof h->absent / sizeof h->absent[0])
        h->absent[h->n_absent++] = key;
out:
    if (a)
        *a = (struct asked){key, found};
    return found && !cJSON_IsNull(found) ? found : NULL;
}

/* An array or object of at most HDX_SNAPSHOT_MAX_ITEMS entries (or NULL when absent). */
static const cJSON *container(rd *r, const cJSON *o, const char *key, int want_object)
{
    const cJSON *c = NULL;
    hdx_json_error why;
    const cJSON *m = member(r, o, key);
    int got = want_object ? hdx_json_object_value(m, key, &c, &why) : hdx_json_array_value(m, key, &c, &why);
    if (got < 0) {
        BAD(r, "%s", why.text);
        return NULL;
    }
    if (!got)
        return NULL;
    size_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, c)
    {
        if (++n > HDX_SNAPSHOT_MAX_ITEMS) {
            fail(r, -EBADMSG, "\"%s\" has more than %d entries: refused", key, HDX_SNAPSHOT_MAX_ITEMS);
            return NULL;
        }
    }
    return c;
}

/* An integral number in [min, max]; absent or null gives unknown. */
static long long get_int(rd *r, const cJSON *o, const char *key, long long min, long long max, long long unknown)
{
    int64_t v;
    hdx_json_error why;
    int got = hdx_json_i64_value(member(r, o, key), key, min, max, &v, &why);
    if (got < 0)
        BAD(r, "%s", why.text);
    return got == 1 ? (long long)v : unknown;
}

static double get_num(rd *r, const cJSON *o, const char *key, double unknown)
{
    double v;
    hdx_json_error why;
    int got = hdx_json_num_value(member(r, o, key), key, &v, &why);
    if (got < 0)
        BAD(r, "%s", why.text);
    return got == 1 ? v : unknown;
}

/* true/false as 1/0; absent or null gives HDX_UNKNOWN. */
static int get_bool(rd *r, const cJSON *o, const char *key)
{
    int v;
    hdx_json_error why;
    int got = hdx_json_bool_value(member(r, o, key), key, &v, &why);
    if (got < 0)
        BAD(r, "%s", why.text);
    return got == 1 ? v : HDX_UNKNOWN;
}

/* A string member's text (borrowed from the cJSON tree), NULL when absent or null (or on error). */
static const char *str_member(rd *r, const cJSON *o, const char *key)
{
    const char *v = NULL;
    hdx_json_error why;
    if (hdx_json_str_value(member(r, o, key), key, &v, &why) < 0)
        BAD(r, "%s", why.text);
    return v;
}

/* A heap copy of a string member, NULL when absent or null (or on error). */
static char *get_str(rd *r, const cJSON *o, const char *key)
{
    const char *v = str_member(r, o, key);
    char *s = v ? strdup(v) : NULL;
    if (v && !s)
        fail(r, -ENOMEM, "out of memory");
    return s;
}

/* The pool's interned copy of a string member, NULL when absent or null (or on error). */
static char *get_pstr(rd *r, const cJSON *o, const char *key)
{
    const char *v = str_member(r, o, key);
    char *s = v ? hdx_pool_intern(r->pool, v, strlen(v)) : NULL;
    if (v && !s)
        fail(r, -ENOMEM, "out of memory");
    return s;
}

/* A one-letter state ("S"), 0 when absent. */
static char get_state(rd *r, const cJSON *o, const char *key)
{
    const cJSON *c = member(r, o, key);
    if (!c)
        return 0;
    if (!cJSON_IsString(c) || !c->valuestring || strlen(c->valuestring) != 1) {
        BAD(r, "\"%s\" should be a one-letter state", key);
        return 0;
    }
    return c->valuestring[0];
}

/* The value of hex digit c, or -1. */
static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* "0x1f" (or a plain non-negative integer) in c; what names it in a message. */
static uint64_t hex_value(rd *r, const cJSON *c, const char *what)
{
    if (cJSON_IsNumber(c) && c->valuedouble >= 0 && c->valuedouble <= EXACT_MAX &&
        c->valuedouble == floor(c->valuedouble))
        return (uint64_t)c->valuedouble;
    /* "0x" and 1 to 16 digits (leading zeros aside), read by hand: a job's snapshots hold six
     * a thread (its syscall's arguments), and strtoull's generality was 3 % of their reading. */
    const char *s = cJSON_IsString(c) ? c->valuestring : NULL;
    if (s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && s[2]) {
        uint64_t v = 0;
        for (s += 2; *s && v >> 60 == 0; s++) {
            int d = hex_digit(*s);
            if (d < 0)
                break;
            v = v << 4 | (uint64_t)d;
        }
        if (!*s)
            return v;
    }
    BAD(r, "\"%s\" should be a hex string such as \"0x1f\"", what);
    return 0;
}

/* A hex member; absent or null gives 0. */
static uint64_t get_hex(rd *r, const cJSON *o, const char *key)
{
    const cJSON *c = member(r, o, key);
    return c ? hex_value(r, c, key) : 0;
}

int hdx_snapshot_parse_time(const char *s, int64_t *ns)
{
    int Y, M, D, h, m, sec, n = 0;
    if (!s || !ns || sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sec, &n) != 6 || n != 19)
        return -EINVAL;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60 || Y < 1900 || Y > 9999)
        return -EINVAL;
    const char *p = s + n;
    int64_t frac = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 9)
                frac = frac * 10 + (*p - '0');
        if (!digits)
            return -EINVAL;
        for (; digits < 9; digits++)
            frac *= 10;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5 || oh > 23 || om > 59)
            return -EINVAL;
        off = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p)
        return -EINVAL;
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec};
    time_t t = timegm(&tm);
    /* ns since the epoch fit in int64 until 2262: a later time is not one hangdx took. */
    if ((int64_t)t - off > INT64_MAX / 1000000000 - 1 || (int64_t)t - off < INT64_MIN / 1000000000 + 1)
        return -EINVAL;
    *ns = ((int64_t)t - off) * 1000000000 + frac;
    return 0;
}

static int64_t get_time(rd *r, const cJSON *o, const char *key)
{
    const cJSON *c = hdx_json_member(o, key);
    int64_t ns;
    if (!c)
        return HDX_UNKNOWN;
    if (!cJSON_IsString(c) || hdx_snapshot_parse_time(c->valuestring, &ns) != 0) {
        BAD(r, "\"%s\" should be an RFC 3339 time such as \"2026-11-29T18:40:27Z\"", key);
        return HDX_UNKNOWN;
    }
    return ns;
}

/* A positive errno number as the negative one the evidence keeps; null 0. */
static int get_errno(rd *r, const cJSON *o, const char *key)
{
    return -(int)get_int(r, o, key, 0, 4095, 0);
}

static char *intern(rd *r, const char *s)
{
    char *c = hdx_pool_intern(r->pool, s, strlen(s));
    if (!c)
        fail(r, -ENOMEM, "out of memory");
    return c;
}

/* A local into v; its strings are the pool's. */
static int read_local(rd *r, const cJSON *c, hdx_local *v)
{
    if (!(v->name = intern(r, c->string ? c->string : "")))
        return r->rc;
    if (cJSON_IsNull(c)) {
        v->kind = HDX_VAL_NONE;
    } else if (cJSON_IsBool(c)) {
        v->kind = HDX_VAL_BOOL;
        v->i = cJSON_IsTrue(c);
    } else if (cJSON_IsNumber(c)) {
        double d = c->valuedouble;
        if (d == floor(d) && d >= -EXACT_MAX && d <= EXACT_MAX) {
            v->kind = HDX_VAL_INT;
            v->i = (long long)d;
        } else {
            v->kind = HDX_VAL_FLOAT;
            v->f = d;
        }
    } else if (cJSON_IsString(c) && c->valuestring) {
        v->kind = HDX_VAL_STR;
        if (!(v->s = intern(r, c->valuestring)))
            return r->rc;
    } else if (cJSON_IsObject(c)) {
        const cJSON *t;
        char *end;
        if ((t = cJSON_GetObjectItemCaseSensitive(c, "int")) && cJSON_IsString(t) && t->valuestring) {
            errno = 0;
            v->kind = HDX_VAL_INT;
            v->i = strtoll(t->valuestring, &end, 10);
            if (errno || end == t->valuestring || *end)
                return BAD(r, "local \"%s\": \"int\" should be a decimal string", v->name);
        } else if ((t = cJSON_GetObjectItemCaseSensitive(c, "float")) && cJSON_IsString(t) && t->valuestring) {
            v->kind = HDX_VAL_FLOAT;
            v->f = strtod(t->valuestring, &end);
            if (end == t->valuestring || *end)
                return BAD(r, "local \"%s\": \"float\" should be a number string", v->name);
        } else {
            v->kind = HDX_VAL_OTHER;
            t = cJSON_GetObjectItemCaseSensitive(c, "type");
            if (t && !cJSON_IsNull(t)) {
                if (!cJSON_IsString(t) || !t->valuestring)
                    return BAD(r, "local \"%s\": \"type\" should be a string", v->name);
                if (!(v->s = intern(r, t->valuestring)))
                    return r->rc;
            }
            t = cJSON_GetObjectItemCaseSensitive(c, "pg");
            if (t && !cJSON_IsString(t))
                return BAD(r, "local \"%s\": \"pg\" (its process group) should be a string", v->name);
            if (t && !(v->pg = intern(r, t->valuestring)))
                return r->rc;
        }
    } else {
        return BAD(r, "local \"%s\" should be null, a bool, a number, a string or an object", v->name);
    }
    return 0;
}

/* A frame's "locals" object (l, checked to be one) into f: the share's array of them. */
static int read_locals(rd *r, const cJSON *l, hdx_frame *f)
{
    size_t n = (size_t)cJSON_GetArraySize(l), k = 0;
    if (n > r->scratch_size) {
        hdx_local *grown = realloc(r->scratch, n * sizeof *grown);
        if (!grown)
            return fail(r, -ENOMEM, "out of memory");
        r->scratch = grown;
        r->scratch_size = n;
    }
    if (n)
        memset(r->scratch, 0, n * sizeof *r->scratch);
    const cJSON *c;
    cJSON_ArrayForEach(c, l)
    {
        if (read_local(r, c, &r->scratch[k++]) < 0)
            return r->rc;
    }
    /* an empty locals object stays an object (a valid pointer), not null */
    if (!(f->locals = share_array(r->share, SHARED_LOCALS, r->scratch, k)))
        return fail(r, -ENOMEM, "out of memory");
    f->n_locals = k;
    return 0;
}

/* A /1 frame object into f: its strings and locals are the pool's (f->pooled). */
static int read_frame(rd *r, const cJSON *o, hdx_frame *f)
{
    if (!cJSON_IsObject(o))
        return BAD(r, "a frame should be an object");
    const cJSON *k = hdx_json_member(o, "kind");
    if (!k || !cJSON_IsString(k) || (strcmp(k->valuestring, "native") && strcmp(k->valuestring, "python")))
        return BAD(r, "\"kind\" should be \"native\" or \"python\"");
    f->pooled = 1;
    f->kind = !strcmp(k->valuestring, "python") ? HDX_FRAME_PYTHON : HDX_FRAME_NATIVE;
    f->function = get_pstr(r, o, "function");
    f->file = get_pstr(r, o, "file");
    f->line = (int)get_int(r, o, "line", 0, INT_MAX, 0);
    f->module = get_pstr(r, o, "module");
    f->offset = get_hex(r, o, "offset");
    f->pc = get_hex(r, o, "pc");
    const cJSON *l = container(r, o, "locals", 1);
    if (l)
        read_locals(r, l, f);
    return r->rc;
}

/* A /2 string index (a number, or null for none) into *out. */
static int string_at(rd *r, const cJSON *c, const char *what, char **out)
{
    *out = NULL;
    if (cJSON_IsNull(c))
        return 0;
    double d = cJSON_IsNumber(c) ? c->valuedouble : -1;
    if (d != floor(d) || d < 0 || d >= (double)r->n_strings)
        return BAD(r, "%s should be an index into \"strings\" (0 to %zu) or null", what,
                   r->n_strings ? r->n_strings - 1 : 0);
    *out = r->strings[(size_t)d];
    return 0;
}

/* A /2 offset or pc: a non-negative integer, or "0x.." beyond 2^53. */
static uint64_t addr_at(rd *r, const cJSON *c, const char *what)
{
    return cJSON_IsNull(c) ? 0 : hex_value(r, c, what);
}

/* One entry of /2's "frames": [kind, function, file, line, module, offset, pc, locals]. */
static int read_table_frame(rd *r, const cJSON *o, hdx_frame *f)
{
    if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) != 8)
        return BAD(r, "a frame should be [kind, function, file, line, module, offset, pc, locals]");
    const cJSON *c = o->child;
    f->pooled = 1;
    if (!cJSON_IsNumber(c) || (c->valuedouble != 0 && c->valuedouble != 1))
        return BAD(r, "a frame's kind should be 0 (native) or 1 (python)");
    f->kind = c->valuedouble == 1 ? HDX_FRAME_PYTHON : HDX_FRAME_NATIVE;
    if (string_at(r, c = c->next, "a frame's function", &f->function) ||
        string_at(r, c = c->next, "a frame's file", &f->file))
        return r->rc;
    c = c->next;
    if (!cJSON_IsNull(c) && (!cJSON_IsNumber(c) || c->valuedouble != floor(c->valuedouble) || c->valuedouble < 0 ||
                             c->valuedouble > INT_MAX))
        return BAD(r, "a frame's line should be an integer from 0 to %d", INT_MAX);
    f->line = cJSON_IsNumber(c) ? (int)c->valuedouble : 0;
    if (string_at(r, c = c->next, "a frame's module", &f->module))
        return r->rc;
    f->offset = addr_at(r, c = c->next, "offset");
    f->pc = addr_at(r, c = c->next, "pc");
    c = c->next;
    if (r->rc)
        return r->rc;
    if (cJSON_IsObject(c))
        return read_locals(r, c, f);
    if (!cJSON_IsNull(c))
        return BAD(r, "a frame's locals should be an object or null");
    return 0;
}

/* /2's "strings" and "frames" tables of root into r. */
static int read_tables(rd *r, const cJSON *root)
{
    const cJSON *strings = container(r, root, "strings", 0), *frames = container(r, root, "frames", 0), *c;
    if (r->rc)
        return r->rc;
    size_t n = strings ? (size_t)cJSON_GetArraySize(strings) : 0, m = frames ? (size_t)cJSON_GetArraySize(frames) : 0;
    if ((n && !(r->strings = malloc(n * sizeof *r->strings))) || (m && !(r->table = calloc(m, sizeof *r->table))))
        return fail(r, -ENOMEM, "out of memory");
    cJSON_ArrayForEach(c, strings)
    {
        if (!cJSON_IsString(c) || !c->valuestring)
            return BAD(r, "strings[%zu] should be a string", r->n_strings);
        if (!(r->strings[r->n_strings++] = intern(r, c->valuestring)))
            return r->rc;
    }
    cJSON_ArrayForEach(c, frames)
    {
        size_t old = enter(r, "frames", r->n_table);
        if (read_table_frame(r, c, &r->table[r->n_table++]))
            return r->rc;
        leave(r, old);
    }
    return 0;
}

/* hangdx.report/2's "stacks" of root into r: each class an object (its "frames" and
 * "python_frames" are read with the threads that name it). */
static int read_stacks(rd *r, const cJSON *root)
{
    const cJSON *stacks = container(r, root, "stacks", 0), *c;
    if (r->rc || !stacks)
        return r->rc;
    size_t n = (size_t)cJSON_GetArraySize(stacks);
    if (n && (!(r->stacks = malloc(n * sizeof *r->stacks)) || !(r->classes = calloc(n, sizeof *r->classes))))
        return fail(r, -ENOMEM, "out of memory");
    cJSON_ArrayForEach(c, stacks)
    {
        if (!cJSON_IsObject(c))
            return BAD(r, "stacks[%zu] should be an object", r->n_stacks);
        r->stacks[r->n_stacks++] = c;
    }
    return 0;
}

/* A /2 thread's or class's frames: indexes into the table, copied (their strings and locals
 * shared) into an array from malloc, or, when shared (a class's, which its threads share), the
 * share's array of them (share_array). */
static int read_frame_refs(rd *r, const cJSON *a, const char *key, hdx_frame **out, size_t *n, int keep_empty,
                           int shared)
{
    size_t count = (size_t)cJSON_GetArraySize(a), i = 0;
    if (!count && !keep_empty)
        return 0;
    hdx_frame *f = malloc((count ? count : 1) * sizeof *f);
    if (!f)
        return fail(r, -ENOMEM, "out of memory");
    const cJSON *c;
    cJSON_ArrayForEach(c, a)
    {
        double d = cJSON_IsNumber(c) ? c->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= (double)r->n_table) {
            free(f);
            return BAD(r, "%s[%zu] should be an index into \"frames\" (0 to %zu)", key, i,
                       r->n_table ? r->n_table - 1 : 0);
        }
        f[i++] = r->table[(size_t)d];
    }
    if (shared) {
        *out = share_array(r->share, SHARED_FRAMES, f, i);
        free(f);
        if (!*out)
            return fail(r, -ENOMEM, "out of memory");
    } else {
        *out = f;
    }
    *n = i;
    return 0;
}

/* An array of frames into *out; an empty array gives NULL unless keep_empty. */
static int read_frames(rd *r, const cJSON *a, const char *key, hdx_frame **out, size_t *n, int keep_empty)
{
    if (r->v2)
        return read_frame_refs(r, a, key, out, n, keep_empty, 0);
    size_t i = 0, old;
    size_t count = (size_t)cJSON_GetArraySize(a);
    if (!count && !keep_empty)
        return 0;
    if (!(*out = calloc(count ? count : 1, sizeof **out)))
        return fail(r, -ENOMEM, "out of memory");
    const cJSON *c;
    cJSON_ArrayForEach(c, a)
    {
        old = enter(r, ".", NO_INDEX);
        enter(r, key, i++);
        (*n)++;
        read_frame(r, c, &(*out)[*n - 1]);
        leave(r, old);
        if (r->rc)
            break;
    }
    return r->rc;
}

static long syscall_from_name(const char *name)
{
    if (!strcmp(name, "running"))
        return HDX_SYSCALL_RUNNING;
    for (long nr = 0; nr < 1024; nr++) {
        const char *n = hdx_syscall_name(nr);
        if (n && !strcmp(n, name))
            return nr;
    }
    return HDX_SYSCALL_UNKNOWN;
}

/* A /3 snapshot's or /2 report's "process_keys" or "thread_keys" of root: an array of strings. */
static const cJSON *row_keys(rd *r, const cJSON *root, const char *key)
{
    const cJSON *keys = container(r, root, key, 0), *c;
    if (!keys && !r->rc)
        BAD(r, "no \"%s\": truncated or not a snapshot", key);
    cJSON_ArrayForEach(c, keys)
    {
        if (!cJSON_IsString(c) || !c->valuestring) {
            BAD(r, "\"%s\" should hold strings", key);
            return NULL;
        }
        for (const cJSON *d = keys->child; d != c; d = d->next) /* member() takes them as unique */
            if (!strcmp(d->valuestring, c->valuestring)) {
                BAD(r, "\"%s\" names \"%.64s\" twice", key, c->valuestring);
                return NULL;
            }
    }
    return r->rc ? NULL : keys;
}

/*
 * A /3 row (an array of values in the order of keys) as the object that /2 writes, of
 * references to the row's values: what read_process and read_thread read. The object
 * (*view, made at the first row, freed with r) is the same for every row of those keys, its
 * references pointed at each row's values in turn, so that a row costs no allocation: it is
 * good until the next row of those keys. Other inputs: o itself (keys NULL). NULL with r->rc
 * set on a bad row or ENOMEM.
 */
static const cJSON *as_object(rd *r, const cJSON *keys, const cJSON *o, const char *what, cJSON **view,
                              struct view_hint *h)
{
    if (!keys)
        return o;
    h->step = 0; /* a new row: its keys are asked for from the first */
    if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) != cJSON_GetArraySize(keys)) {
        BAD(r, "a %s should be an array of %d values", what, cJSON_GetArraySize(keys));
        return NULL;
    }
    const cJSON *k = keys->child, *c = o->child;
    if (*view) {
        for (cJSON *v = (*view)->child; v; v = v->next, c = c->next) {
            v->type = c->type | cJSON_IsReference;
            v->child = c->child;
            v->valuestring = c->valuestring;
            v->valueint = c->valueint;
            v->valuedouble = c->valuedouble;
        }
        return *view;
    }
    cJSON *v = cJSON_CreateObject();
    for (; v && k; k = k->next, c = c->next)
        if (!cJSON_AddItemReferenceToObject(v, k->valuestring, (cJSON *)c)) {
            cJSON_Delete(v);
            v = NULL;
        }
    if (!v)
        fail(r, -ENOMEM, "out of memory");
    return *view = v;
}

/* A class of "stacks" (its "frames" and "python_frames", indexes into "frames") into k, its
 * arrays the share's. */
static int read_class(rd *r, const cJSON *cls, struct class_frames *k)
{
    const cJSON *fr = container(r, cls, "frames", 0), *py = container(r, cls, "python_frames", 0);
    if (fr && !r->rc)
        read_frame_refs(r, fr, "frames", &k->frames, &k->n_frames, 0, 1);
    if (py && !r->rc)
        read_frame_refs(r, py, "python_frames", &k->py, &k->n_py, 1, 1);
    k->has_frames = fr != NULL;
    k->read = !r->rc;
    return r->rc;
}

static int read_thread(rd *r, const cJSON *o, hdx_process *p)
{
    if (!cJSON_IsObject(o))
        return BAD(r, "a thread should be an object");
    hdx_thread *t = hdx_process_add_thread(p);
    if (!t)
        return fail(r, -ENOMEM, "out of memory");
    t->tid = (int)get_int(r, o, "tid", 0, INT_MAX, HDX_UNKNOWN);
    t->name = get_str(r, o, "name");
    t->state = get_state(r, o, "state");
    t->wchan = get_str(r, o, "wchan");
    const cJSON *sc = member(r, o, "syscall"); /* before "syscall_nr", as a row orders them */
    t->syscall = (long)get_int(r, o, "syscall_nr", 0, 100000, HDX_SYSCALL_UNKNOWN);
    if (sc && !cJSON_IsString(sc))
        return BAD(r, "\"syscall\" should be a string");
    if (t->syscall == HDX_SYSCALL_UNKNOWN && sc) /* a report names the call only */
        t->syscall = syscall_from_name(sc->valuestring);
    const cJSON *args = container(r, o, "syscall_args", 0);
    if (args) {
        size_t i = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, args)
        {
            if (i >= 6)
                return BAD(r, "\"syscall_args\" should have at most 6 entries");
            t->syscall_args[i++] = hex_value(r, a, "syscall_args");
        }
    }
    t->cpu_ms = get_num(r, o, "cpu_ms", 0);
    t->cpu_ms_first = get_num(r, o, "cpu_ms_first", t->cpu_ms);
    t->stack_error = get_errno(r, o, "stack_error");
    t->polled_path = get_str(r, o, "polled_path");
    t->wait = get_str(r, o, "wait");
    t->wait_op = get_str(r, o, "wait_op");
    t->wait_peer = (int)get_int(r, o, "peer", 0, 1 << 24, HDX_UNKNOWN);
    t->wait_frame = (long)get_int(r, o, "wait_frame", 0, HDX_SNAPSHOT_MAX_ITEMS, -1);
    t->wait_pg = get_str(r, o, "wait_pg");
    t->wait_seq = get_int(r, o, "wait_seq", 0, (1LL << 53), HDX_UNKNOWN);
    t->wait_sig = get_str(r, o, "wait_sig");
    int um = get_bool(r, o, "unmerged");
    t->unmerged = um == 1;
    /* A /2 report's or /3 snapshot's thread names its stack's class, whose frames are indexes
     * into "frames": read once, and shared by the class's threads. */
    const cJSON *sk = member(r, o, "stack");
    int has_frames;
    if (sk) {
        double d = cJSON_IsNumber(sk) ? sk->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= (double)r->n_stacks)
            return BAD(r, "\"stack\" should be an index into \"stacks\" (0 to %zu)", r->n_stacks ? r->n_stacks - 1 : 0);
        struct class_frames *k = &r->classes[(size_t)d];
        if (!k->read && read_class(r, r->stacks[(size_t)d], k))
            return r->rc;
        t->frames = k->frames;
        t->n_frames = k->n_frames;
        t->py_frames = k->py;
        t->n_py_frames = k->n_py;
        t->shared_frames = 1;
        has_frames = k->has_frames;
    } else {
        const cJSON *fr = container(r, o, "frames", 0), *py = container(r, o, "python_frames", 0);
        if (fr && !r->rc)
            read_frames(r, fr, "frames", &t->frames, &t->n_frames, 0);
        if (py && !r->rc)
            read_frames(r, py, "python_frames", &t->py_frames, &t->n_py_frames, 1);
        has_frames = fr != NULL;
    }
    if (!has_frames && !member(r, o, "stack_error") && !r->rc)
        t->stack_error = -EIO; /* a report's "frames": null: the stack could not be read */
    return r->rc;
}

static int read_process(rd *r, const cJSON *o, const char *host, hdx_evidence *ev)
{
    if (!cJSON_IsObject(o))
        return BAD(r, "a process should be an object");
    hdx_process *p = hdx_evidence_add_process(ev);
    if (!p)
        return fail(r, -ENOMEM, "out of memory");
    p->pid = (int)get_int(r, o, "pid", 0, INT_MAX, HDX_UNKNOWN);
    p->ppid = (int)get_int(r, o, "ppid", 0, INT_MAX, HDX_UNKNOWN);
    p->host = get_str(r, o, "host");
    if (!p->host && host && !r->rc && !(p->host = strdup(host)))
        return fail(r, -ENOMEM, "out of memory");
    const cJSON *argv = container(r, o, "cmdline", 0);
    const cJSON *c;
    if (argv) {
        size_t n = (size_t)cJSON_GetArraySize(argv);
        if (n && !(p->cmdline = calloc(n, sizeof *p->cmdline)))
            return fail(r, -ENOMEM, "out of memory");
        cJSON_ArrayForEach(c, argv)
        {
            if (!cJSON_IsString(c) || !c->valuestring)
                return BAD(r, "\"cmdline\" should hold strings");
            if (!(p->cmdline[p->n_cmdline++] = strdup(c->valuestring)))
                return fail(r, -ENOMEM, "out of memory");
        }
    }
    const cJSON *env = container(r, o, "env", 1);
    if (env) {
        cJSON_ArrayForEach(c, env)
        {
            if (!cJSON_IsString(c) || !c->valuestring)
                return BAD(r, "env \"%s\" should be a string", c->string ? c->string : "?");
            /* Names outside the design's list are dropped: they never leave a host. */
            if (c->string && hdx_process_set_env(p, c->string, c->valuestring) < 0)
                return fail(r, -ENOMEM, "out of memory");
        }
    }
    /* The rank variables as recorded, over what the env gives. */
    if (cJSON_GetObjectItemCaseSensitive(o, "rank"))
        p->rank = (int)get_int(r, o, "rank", 0, 1 << 24, HDX_UNKNOWN);
    if (cJSON_GetObjectItemCaseSensitive(o, "local_rank"))
        p->local_rank = (int)get_int(r, o, "local_rank", 0, 1 << 24, HDX_UNKNOWN);
    if (cJSON_GetObjectItemCaseSensitive(o, "world_size"))
        p->world_size = (int)get_int(r, o, "world_size", 0, 1 << 24, HDX_UNKNOWN);
    p->exe = get_str(r, o, "exe");
    p->cwd = get_str(r, o, "cwd");
    p->state = get_state(r, o, "state");
    p->frozen = get_bool(r, o, "frozen");
    p->start_ticks = (uint64_t)get_int(r, o, "start_ticks", 0, (long long)EXACT_MAX, 0);
    p->age_s = get_num(r, o, "age_s", 0);
    p->cpu_ms = get_num(r, o, "cpu_ms", 0);
    /* A report has no first sample: its cpu_ms stands for both. */
    p->cpu_ms_first = get_num(r, o, "cpu_ms_first", p->cpu_ms);
    p->window_ms = get_int(r, o, "window_ms", 0, (long long)EXACT_MAX, 0);
    p->progressing = get_bool(r, o, "progressing");
    p->stack_changed = get_bool(r, o, "stack_changed");
    p->asked = get_bool(r, o, "asked") == 1; /* absent before it was written: not asked */
    p->stopped_us = get_int(r, o, "stopped_us", 0, (long long)EXACT_MAX, HDX_UNKNOWN);
    p->max_stop_us = get_int(r, o, "max_stop_us", 0, (long long)EXACT_MAX, 0);
    p->n_stopped = (int)get_int(r, o, "n_stopped", 0, INT_MAX, 0);
    p->alive = get_bool(r, o, "alive");
    p->read_error = get_errno(r, o, "read_error");
    p->python = get_str(r, o, "python");
    const cJSON *threads = container(r, o, "threads", 0);
    size_t i = 0;
    if (threads && !r->rc && hdx_process_reserve_threads(p, (size_t)cJSON_GetArraySize(threads)) < 0)
        return fail(r, -ENOMEM, "out of memory");
    if (threads && !r->rc) {
        cJSON_ArrayForEach(c, threads)
        {
            size_t old = enter(r, ".threads", i++);
            const cJSON *t = as_object(r, r->thread_keys, c, "thread", &r->thread_view, &r->thread_hint);
            if (t)
                read_thread(r, t, p);
            if (r->rc)
                break;
            leave(r, old);
        }
    }
    return r->rc;
}

static int lock_kind(const char *s, enum hdx_lock_kind *k)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, hdx_lock_kind_name((enum hdx_lock_kind)i))) {
            *k = (enum hdx_lock_kind)i;
            return 0;
        }
    return -1;
}

static int lock_state(const char *s, enum hdx_lock_state *st)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, hdx_lock_state_name((enum hdx_lock_state)i))) {
            *st = (enum hdx_lock_state)i;
            return 0;
        }
    return -1;
}

/* A lock's "facts" (hdx_lock_facts) into f. Absent or null: none (looked stays 0). 0 or r->rc. */
static int read_facts(rd *r, const cJSON *o, hdx_lock_facts *f)
{
    const cJSON *c = hdx_json_member(o, "facts"), *a, *e;
    if (!c)
        return 0;
    if (!cJSON_IsObject(c))
        return BAD(r, "\"facts\" should be an object or null");
    size_t old = enter(r, ".facts", NO_INDEX);
    f->looked = 1;
    f->live = get_bool(r, c, "live") == 1;
    f->checked = get_bool(r, c, "checked") == 1;
    f->dev = (uint64_t)get_num(r, c, "dev", 0);
    f->ino = (uint64_t)get_num(r, c, "ino", 0);
    f->size = (int64_t)get_int(r, c, "size", -1, INT64_MAX / 2, HDX_UNKNOWN);
    f->uid = (int)get_int(r, c, "uid", -1, INT_MAX, HDX_UNKNOWN);
    f->unreadable = (int)get_int(r, c, "unreadable", 0, INT_MAX, 0);
    if ((a = container(r, c, "rows", 0))) {
        f->rows_read = 1;
        cJSON_ArrayForEach(e, a)
        {
            const cJSON *k = hdx_json_member(e, "kind");
            hdx_lock_row *row = hdx_append((void **)&f->rows, &f->n_rows, sizeof *row);
            if (!row)
                return fail(r, -ENOMEM, "out of memory");
            if (!cJSON_IsObject(e) || !k || !cJSON_IsString(k) || lock_kind(k->valuestring, &row->kind))
                return BAD(r, "a row should be an object with \"kind\" \"flock\", \"posix\" or \"ofd\"");
            row->pid = (int)get_int(r, e, "pid", 0, INT_MAX, HDX_UNKNOWN);
            row->blocking = get_bool(r, e, "blocking") == 1;
        }
    }
    if ((a = container(r, c, "openers", 0))) {
        f->openers_read = 1;
        cJSON_ArrayForEach(e, a)
        {
            int *pid = hdx_append((void **)&f->openers, &f->n_openers, sizeof *pid);
            if (!pid)
                return fail(r, -ENOMEM, "out of memory");
            if (!cJSON_IsNumber(e) || e->valuedouble < 1 || e->valuedouble > INT_MAX)
                return BAD(r, "an opener should be a pid");
            *pid = (int)e->valuedouble;
        }
    }
    if ((a = container(r, c, "pids", 0)))
        cJSON_ArrayForEach(e, a)
        {
            hdx_pid_fact *x = hdx_append((void **)&f->pids, &f->n_pids, sizeof *x);
            if (!x)
                return fail(r, -ENOMEM, "out of memory");
            if (!cJSON_IsObject(e))
                return BAD(r, "a pid fact should be an object");
            x->pid = (int)get_int(r, e, "pid", 1, INT_MAX, HDX_UNKNOWN);
            x->alive = get_bool(r, e, "alive") == 1;
            x->start_ticks = (uint64_t)get_num(r, e, "start_ticks", 0);
        }
    if (!r->rc)
        leave(r, old);
    return r->rc;
}

static int read_lock(rd *r, const cJSON *o, hdx_evidence *ev)
{
    if (!cJSON_IsObject(o))
        return BAD(r, "a lock should be an object");
    const cJSON *path = hdx_json_member(o, "path"), *k = hdx_json_member(o, "kind"), *s = hdx_json_member(o, "state");
    if (!path || !cJSON_IsString(path))
        return BAD(r, "\"path\" should be a string");
    hdx_lock *l = hdx_evidence_add_lock(ev);
    if (!l || !(l->path = strdup(path->valuestring)))
        return fail(r, -ENOMEM, "out of memory");
    l->job_path = get_str(r, o, "job_path");
    l->mnt_ns = (uint64_t)get_int(r, o, "mnt_ns", 0, (long long)EXACT_MAX, 0);
    l->foreign = get_bool(r, o, "foreign") == 1;
    if (k && (!cJSON_IsString(k) || lock_kind(k->valuestring, &l->kind)))
        return BAD(r, "\"kind\" should be \"baton\", \"flock\", \"posix\" or \"ofd\"");
    if (s && (!cJSON_IsString(s) || lock_state(s->valuestring, &l->state)))
        return BAD(r, "\"state\" should be \"stale\", \"held\" or \"free\"");
    l->exists = get_bool(r, o, "exists");
    l->mtime_ns = get_time(r, o, "mtime");
    l->holder_pid = (int)get_int(r, o, "holder_pid", 0, INT_MAX, HDX_UNKNOWN);
    /* Absent (hangdx.snapshot/1, an older report): the input's own host saw it. */
    if (cJSON_GetObjectItemCaseSensitive(o, "holder_host"))
        l->holder_host = get_str(r, o, "holder_host");
    else if (l->holder_pid != HDX_UNKNOWN && r->host && !(l->holder_host = strdup(r->host)))
        return fail(r, -ENOMEM, "out of memory");
    l->unchecked = (int)get_int(r, o, "unchecked", 0, INT_MAX, 0);
    if (read_facts(r, o, &l->facts))
        return r->rc;
    /* Without facts (hangdx.snapshot/1, an older /2, a report) the input's decision stands;
     * with them, the holder they name is on the input's host. */
    l->recorded = !l->facts.looked;
    if (l->facts.looked && !l->holder_host && r->host && !(l->holder_host = strdup(r->host)))
        return fail(r, -ENOMEM, "out of memory");
    const cJSON *c = hdx_json_member(o, "created_by");
    if (c) {
        if (!cJSON_IsObject(c))
            return BAD(r, "\"created_by\" should be an object or null");
        l->has_creator = 1;
        l->creator_pid = (int)get_int(r, c, "pid", 0, INT_MAX, HDX_UNKNOWN);
        l->creator_rank = (int)get_int(r, c, "rank", 0, 1 << 24, HDX_UNKNOWN);
        l->creator_alive = get_bool(r, c, "alive");
        l->created_ns = get_time(r, c, "at");
    }
    l->source = get_str(r, o, "source");
    const cJSON *w = container(r, o, "waiters", 0);
    size_t i = 0;
    if (w && !r->rc) {
        cJSON_ArrayForEach(c, w)
        {
            size_t old = enter(r, ".waiters", i++);
            if (!cJSON_IsObject(c))
                return BAD(r, "a waiter should be an object");
            hdx_waiter *x = hdx_lock_add_waiter(l);
            if (!x)
                return fail(r, -ENOMEM, "out of memory");
            x->pid = (int)get_int(r, c, "pid", 0, INT_MAX, HDX_UNKNOWN);
            x->tid = (int)get_int(r, c, "tid", 0, INT_MAX, HDX_UNKNOWN);
            x->rank = (int)get_int(r, c, "rank", 0, 1 << 24, HDX_UNKNOWN);
            x->since_ns = get_time(r, c, "since");
            x->how = get_str(r, c, "how");
            x->elsewhere = get_bool(r, c, "elsewhere") == 1;
            if (cJSON_GetObjectItemCaseSensitive(c, "host"))
                x->host = get_str(r, c, "host");
            else if (r->host && !(x->host = strdup(r->host)))
                return fail(r, -ENOMEM, "out of memory");
            if (r->rc)
                break;
            leave(r, old);
        }
    }
    return r->rc;
}

/* ---- hangdx.report/2 "logs" (evidence_json.h, hdx_logs_json) ------------------ */

/* A heap copy of c, a string or null; what names it in a message. 0 or r->rc. */
static int item_str(rd *r, const cJSON *c, const char *what, char **out)
{
    *out = NULL;
    if (!c || cJSON_IsNull(c))
        return 0;
    if (!cJSON_IsString(c) || !c->valuestring)
        return BAD(r, "%s should be a string or null", what);
    if (!(*out = strdup(c->valuestring)))
        return fail(r, -ENOMEM, "out of memory");
    return 0;
}

/* A heap copy of logs.strings[c] (c a number or null). 0 or r->rc. */
static int item_ref(rd *r, const cJSON *strings, const cJSON *c, const char *what, char **out)
{
    *out = NULL;
    if (!c || cJSON_IsNull(c))
        return 0;
    double d = cJSON_IsNumber(c) ? c->valuedouble : -1;
    const cJSON *e = d == floor(d) && d >= 0 && d < cJSON_GetArraySize(strings) ? cJSON_GetArrayItem(strings, (int)d) : NULL;
    if (!e)
        return BAD(r, "%s should be an index into logs.strings or null", what);
    return item_str(r, e, what, out);
}

/* An integer item in [min, max], null (or absent) giving unknown. */
static long long item_int(rd *r, const cJSON *c, const char *what, long long min, long long max, long long unknown)
{
    if (!c || cJSON_IsNull(c))
        return unknown;
    if (!cJSON_IsNumber(c) || c->valuedouble != floor(c->valuedouble) || c->valuedouble < (double)min ||
        c->valuedouble > (double)max) {
        BAD(r, "%s should be an integer from %lld to %lld", what, min, max);
        return unknown;
    }
    return (long long)c->valuedouble;
}

static int read_log_fact(rd *r, const cJSON *strings, const cJSON *a, hdx_evidence *ev)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 14)
        return BAD(r, "a log fact should be [pattern, proves, class, strength, rank, group_rank, pg, default_pg, "
                      "in_traceback, traceback, file, line, text, fields]");
    hdx_log_fact *f = hdx_append((void **)&ev->log_facts, &ev->n_log_facts, sizeof *f);
    if (!f)
        return fail(r, -ENOMEM, "out of memory");
    memset(f, 0, sizeof *f);
    const cJSON *c = a->child;
    if (item_ref(r, strings, c, "pattern", &f->pattern) || item_ref(r, strings, c = c->next, "proves", &f->proves) ||
        item_ref(r, strings, c = c->next, "class", &f->cls))
        return r->rc;
    f->strength = item_int(r, c = c->next, "strength", 0, 1, 0) ? HDX_LOG_STRONG : HDX_LOG_WEAK;
    f->rank = (int)item_int(r, c = c->next, "rank", 0, 1 << 24, HDX_UNKNOWN);
    f->group_rank = (int)item_int(r, c = c->next, "group_rank", 0, 1 << 24, HDX_UNKNOWN);
    if (item_ref(r, strings, c = c->next, "pg", &f->pg))
        return r->rc;
    c = c->next;
    f->default_pg = cJSON_IsBool(c) ? cJSON_IsTrue(c) : HDX_UNKNOWN;
    c = c->next;
    f->in_traceback = cJSON_IsTrue(c);
    f->traceback = (int)item_int(r, c = c->next, "traceback", 0, INT_MAX, 0);
    if (item_ref(r, strings, c = c->next, "file", &f->file))
        return r->rc;
    f->line = (long)item_int(r, c = c->next, "line", 0, LONG_MAX / 2, 0);
    if (item_str(r, c = c->next, "text", &f->text))
        return r->rc;
    if (!f->pattern || !f->proves || !f->file || !f->text) /* as every fact a log gives has them */
        return BAD(r, "a log fact needs its pattern, proves, file and text");
    c = c->next;
    if (!cJSON_IsObject(c))
        return BAD(r, "a log fact's fields should be an object");
    const cJSON *e;
    cJSON_ArrayForEach(e, c)
    {
        hdx_log_field *x = hdx_append((void **)&f->fields, &f->n_fields, sizeof *x);
        if (!x)
            return fail(r, -ENOMEM, "out of memory");
        memset(x, 0, sizeof *x);
        if (!(x->name = strdup(e->string ? e->string : "")))
            return fail(r, -ENOMEM, "out of memory");
        if (item_str(r, e, "a field", &x->value))
            return r->rc;
        if (!x->value)
            return BAD(r, "a log fact's field \"%.64s\" should be a string", x->name);
    }
    return r->rc;
}

static int read_log_rank(rd *r, const cJSON *strings, const cJSON *o, hdx_evidence *ev)
{
    if (!cJSON_IsObject(o))
        return BAD(r, "a log rank should be an object");
    hdx_log_rank *x = hdx_append((void **)&ev->log_ranks, &ev->n_log_ranks, sizeof *x);
    if (!x)
        return fail(r, -ENOMEM, "out of memory");
    memset(x, 0, sizeof *x);
    x->rank = (int)get_int(r, o, "rank", 0, 1 << 24, HDX_UNKNOWN);
    x->last_line_no = (long)get_int(r, o, "line", 0, LONG_MAX / 2, 0);
    x->last_line = get_str(r, o, "last_line");
    x->last_time = get_str(r, o, "last_time");
    x->exit_cause = get_str(r, o, "exit_cause");
    x->root_cause = get_bool(r, o, "root_cause") == 1;
    x->rank_from = get_str(r, o, "rank_from");
    if (r->rc || item_ref(r, strings, hdx_json_member(o, "file"), "file", &x->file) ||
        item_ref(r, strings, hdx_json_member(o, "last_pattern"), "last_pattern", &x->last_pattern))
        return r->rc;
    if (x->rank == HDX_UNKNOWN)
        return BAD(r, "a log rank needs its \"rank\"");
    const cJSON *seqs = container(r, o, "seqs", 0), *a;
    cJSON_ArrayForEach(a, seqs)
    {
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 7)
            return BAD(r, "a seq should be [pg, group_rank, unplaced, timed_out, enqueued, completed, op]");
        hdx_log_seq *q = hdx_append((void **)&x->seqs, &x->n_seqs, sizeof *q);
        if (!q)
            return fail(r, -ENOMEM, "out of memory");
        memset(q, 0, sizeof *q);
        const cJSON *c = a->child;
        if (item_str(r, c, "pg", &q->pg))
            return r->rc;
        q->group_rank = (int)item_int(r, c = c->next, "group_rank", 0, 1 << 24, HDX_UNKNOWN);
        q->unplaced = cJSON_IsTrue(c = c->next);
        q->timed_out = item_int(r, c = c->next, "timed_out", 0, 1LL << 53, HDX_UNKNOWN);
        q->enqueued = item_int(r, c = c->next, "enqueued", 0, 1LL << 53, HDX_UNKNOWN);
        q->completed = item_int(r, c = c->next, "completed", 0, 1LL << 53, HDX_UNKNOWN);
        if (item_str(r, c = c->next, "op", &q->op))
            return r->rc;
    }
    return r->rc;
}

/* A /2 report's "logs" into ev's log_facts and log_ranks. Absent: none. 0 or r->rc. */
static int read_logs(rd *r, const cJSON *root, hdx_evidence *ev)
{
    const cJSON *logs = container(r, root, "logs", 1);
    if (r->rc || !logs)
        return r->rc;
    const cJSON *strings = container(r, logs, "strings", 0), *facts = container(r, logs, "facts", 0),
                *ranks = container(r, logs, "ranks", 0), *c;
    size_t i = 0;
    cJSON_ArrayForEach(c, facts)
    {
        size_t old = enter(r, "logs.facts", i++);
        if (r->rc || read_log_fact(r, strings, c, ev))
            return r->rc;
        leave(r, old);
    }
    i = 0;
    cJSON_ArrayForEach(c, ranks)
    {
        size_t old = enter(r, "logs.ranks", i++);
        if (r->rc || read_log_rank(r, strings, c, ev))
            return r->rc;
        leave(r, old);
    }
    return r->rc;
}

/* The top-level object into a fresh evidence *out. */
/* One of "process_groups": {"name", "desc", "role", "ranks", "default"}. */
static int read_pgroup(rd *r, const cJSON *o, hdx_evidence *ev)
{
    if (!cJSON_IsObject(o))
        return BAD(r, "should be an object");
    const char *name = str_member(r, o, "name"), *desc = str_member(r, o, "desc"), *role = str_member(r, o, "role");
    const cJSON *ranks = container(r, o, "ranks", 0);
    int is_default = get_bool(r, o, "default");
    if (r->rc)
        return r->rc;
    if (!name || !ranks)
        return BAD(r, "a process group needs \"name\" and \"ranks\"");
    /* the ranks the input holds, not a count it claims */
    size_t n = (size_t)cJSON_GetArraySize(ranks), k = 0;
    int *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return fail(r, -ENOMEM, "out of memory");
    const cJSON *c;
    cJSON_ArrayForEach(c, ranks)
    {
        if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble >= (1 << 24) ||
            c->valuedouble != floor(c->valuedouble)) {
            free(v);
            return BAD(r, "ranks[%zu] should be a rank (an integer from 0 to 2^24)", k);
        }
        v[k++] = (int)c->valuedouble;
    }
    int rc = hdx_evidence_add_pgroup(ev, name, v, n, desc, role, is_default);
    free(v);
    if (rc == -EEXIST)
        return BAD(r, "process group \"%.64s\" is given twice with different ranks", name);
    return rc ? fail(r, rc, "out of memory") : 0;
}

static int read_root(rd *r, const cJSON *root, hdx_evidence *ev)
{
    if (!cJSON_IsObject(root))
        return BAD(r, "not a hangdx snapshot or report (not a JSON object)");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
    if (!schema || !cJSON_IsString(schema))
        return BAD(r, "not a hangdx snapshot or report (no \"schema\"); 'hangdx snapshot -o FILE PID' writes one");
    int report2 = !strcmp(schema->valuestring, HDX_REPORT_SCHEMA);
    int report = report2 || !strcmp(schema->valuestring, HDX_REPORT_SCHEMA_V1);
    int reduced = !strcmp(schema->valuestring, HDX_SNAPSHOT_SCHEMA_REDUCED);
    r->v2 = reduced || !strcmp(schema->valuestring, HDX_SNAPSHOT_SCHEMA);
    if (!report && !r->v2 && strcmp(schema->valuestring, HDX_SNAPSHOT_SCHEMA_V1) != 0)
        return fail(r, -EPROTONOSUPPORT,
                    "schema %.64s is not supported (this hangdx reads %s, %s, %s, %s and %s; a newer hangdx may "
                    "read it)",
                    schema->valuestring, HDX_SNAPSHOT_SCHEMA_REDUCED, HDX_SNAPSHOT_SCHEMA, HDX_SNAPSHOT_SCHEMA_V1,
                    HDX_REPORT_SCHEMA, HDX_REPORT_SCHEMA_V1);
    const char *host = NULL;
    if (report) {
        const cJSON *hosts = container(r, root, "hosts", 0);
        if (hosts && cJSON_GetArraySize(hosts) == 1 && cJSON_IsString(hosts->child))
            host = hosts->child->valuestring;
    }
    if (!report || report2) { /* a /1 report has none of these: the evidence's defaults stand */
        const cJSON *h = report2 ? NULL : hdx_json_member(root, "host");
        if (h && !cJSON_IsString(h))
            return BAD(r, "\"host\" should be a string");
        host = h ? h->valuestring : host;
        ev->samples = (int)get_int(r, root, "samples", 0, 1000000, 0);
        ev->interval_ms = (int)get_int(r, root, "interval_ms", 0, INT_MAX, 0);
        ev->build_timeout_s = get_int(r, root, "build_timeout_s", 0, (long long)EXACT_MAX, 1800);
    }
    if (host && !(ev->host = strdup(host)))
        return fail(r, -ENOMEM, "out of memory");
    r->host = host;
    ev->taken_ns = get_time(r, root, "taken_at");
    if ((r->v2 || report2) && read_tables(r, root))
        return r->rc;
    if ((report2 || reduced) && read_stacks(r, root))
        return r->rc;
    if (report2 && read_logs(r, root, ev))
        return r->rc;
    /* Rows: a /3 snapshot's processes, and a /2 report's but with --full. */
    if ((reduced || (report2 && hdx_json_member(root, "process_keys"))) &&
        (!(r->process_keys = row_keys(r, root, "process_keys")) ||
                    !(r->thread_keys = row_keys(r, root, "thread_keys"))))
        return r->rc;

    const cJSON *procs = container(r, root, "processes", 0);
    const cJSON *locks = container(r, root, "locks", 0);
    const cJSON *notes = container(r, root, "notes", 0);
    const cJSON *pgroups = container(r, root, "process_groups", 0);
    const cJSON *c;
    size_t i = 0;
    cJSON_ArrayForEach(c, pgroups)
    {
        size_t old = enter(r, "process_groups", i++);
        if (r->rc || read_pgroup(r, c, ev))
            return r->rc;
        leave(r, old);
    }
    i = 0;
    if (!report && !r->rc && !cJSON_GetObjectItemCaseSensitive(root, "processes"))
        return BAD(r, "no \"processes\": truncated or not a snapshot");
    cJSON_ArrayForEach(c, procs)
    {
        size_t old = enter(r, "processes", i++);
        const cJSON *p = r->rc ? NULL : as_object(r, r->process_keys, c, "process", &r->process_view, &r->process_hint);
        if (!p || read_process(r, p, host, ev))
            return r->rc;
        leave(r, old);
    }
    i = 0;
    cJSON_ArrayForEach(c, locks)
    {
        size_t old = enter(r, "locks", i++);
        if (r->rc || read_lock(r, c, ev))
            return r->rc;
        leave(r, old);
    }
    i = 0;
    cJSON_ArrayForEach(c, notes)
    {
        if (r->rc)
            return r->rc;
        if (!cJSON_IsString(c))
            return BAD(r, "notes[%zu] should be a string", i);
        char **slot = hdx_append((void **)&ev->notes, &ev->n_notes, sizeof *slot);
        if (!slot || !(*slot = strdup(c->valuestring)))
            return fail(r, -ENOMEM, "out of memory");
        i++;
    }
    return r->rc;
}

int hdx_snapshot_from_json_shared(const cJSON *root, const char *name, hdx_evidence *ev, hdx_snapshot_share *share,
                                  char **err)
{
    if (err)
        *err = NULL;
    if (!ev)
        return -EINVAL;
    hdx_snapshot_share *own = share ? NULL : hdx_snapshot_share_new();
    hdx_evidence *src = share || own ? hdx_evidence_new() : NULL;
    if (!src) {
        hdx_snapshot_share_end(own, NULL);
        return -ENOMEM;
    }
    rd r = {.name = name ? name : "input", .share = share ? share : own};
    r.pool = r.share->pool;
    int rc = read_root(&r, root, src);
    cJSON_Delete(r.process_view);
    cJSON_Delete(r.thread_view);
    free(r.strings);
    free(r.table);
    free(r.stacks);
    free(r.classes);
    free(r.scratch);
    char *msg = r.err;
    if (rc == 0) {
        char *merr = NULL;
        rc = hdx_evidence_merge(ev, src, &merr);
        if (rc < 0)
            msg = hdx_asprintf("%s: %s", r.name, merr ? merr : strerror(-rc));
        free(merr);
    }
    if (rc < 0 && !msg)
        msg = hdx_asprintf("%s: %s", r.name, strerror(-rc));
    if (rc < 0 && err)
        *err = msg;
    else
        free(msg);
    hdx_evidence_free(src);
    hdx_snapshot_share_end(own, rc == 0 ? ev : NULL); /* what ev's frames now borrow */
    return rc;
}

int hdx_snapshot_from_json(const cJSON *root, const char *name, hdx_evidence *ev, char **err)
{
    return hdx_snapshot_from_json_shared(root, name, ev, NULL, err);
}
