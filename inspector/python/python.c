/*
 * The Python frame reader: attach (discovery, version, offsets) and the walk
 * interpreters → thread states → frames, with strings, line numbers and
 * locals. Every layout fact comes from the hdx_pyoffs table chosen at attach
 * (pyoffsets.c), read through OFF(); see python.h for the contract.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native/stacks.h" /* hdx_proc_ns_pid */
#include "python/pyimpl.h"
#include "model/index.h"
#include "model/util.h"

/* The tid field of glibc's struct pthread (docs/python-frames.md "Thread ids"); scanned for when wrong. */
#if defined(__aarch64__)
#define PTHREAD_TID_OFFSET 0xd0
#else
#define PTHREAD_TID_OFFSET 0x2d0
#endif
#define PTHREAD_SCAN_BYTES 1600

/* ------------------------------------------------------------ reading */

int hdx_pyrd(hdx_pyproc *p, uint64_t addr, void *buf, size_t len)
{
    return p->mem.ops->read(p->mem.ctx, addr, buf, len);
}

int hdx_pyrd_ptr(hdx_pyproc *p, uint64_t addr, uint64_t *v)
{
    return hdx_pyrd(p, addr, v, sizeof *v);
}

static int rd_i32(hdx_pyproc *p, uint64_t addr, int32_t *v)
{
    return hdx_pyrd(p, addr, v, sizeof *v);
}

/* Fields out of a block copied from the target. */
static uint64_t get_ptr(const uint8_t *blk, int off)
{
    uint64_t v;
    memcpy(&v, blk + off, sizeof v);
    return v;
}

static int32_t get_i32(const uint8_t *blk, int off)
{
    int32_t v;
    memcpy(&v, blk + off, sizeof v);
    return v;
}

int hdx_pyrd_cstr(hdx_pyproc *p, uint64_t addr, char *buf, size_t max)
{
    size_t got = 0;
    while (got + 1 < max) {
        uint64_t a = addr + got;
        size_t chunk = 4096 - (a & 4095);
        if (chunk > max - 1 - got)
            chunk = max - 1 - got;
        int rc = hdx_pyrd(p, a, buf + got, chunk);
        if (rc)
            return rc;
        void *z = memchr(buf + got, 0, chunk);
        if (z)
            return 0;
        got += chunk;
    }
    buf[max - 1] = 0;
    return 0;
}

int hdx_pyrd_type_name(hdx_pyproc *p, uint64_t obj, uint64_t *type, char *buf, size_t max)
{
    uint64_t t, name;
    int rc = hdx_pyrd_ptr(p, obj + OFF(p, ob_type), &t);
    if (!rc)
        rc = hdx_pyrd_ptr(p, t + OFF(p, tp_name), &name);
    if (!rc)
        rc = hdx_pyrd_cstr(p, name, buf, max);
    if (!rc && type)
        *type = t;
    return rc;
}

/* -------------------------------------------------------------- strings */

static size_t put_utf8(char *o, uint32_t c)
{
    if ((c >= 0xd800 && c < 0xe000) || c > 0x10ffff)
        c = 0xfffd;
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | c >> 6);
        o[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | c >> 12);
        o[1] = (char)(0x80 | ((c >> 6) & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (char)(0xf0 | c >> 18);
    o[1] = (char)(0x80 | ((c >> 12) & 63));
    o[2] = (char)(0x80 | ((c >> 6) & 63));
    o[3] = (char)(0x80 | (c & 63));
    return 4;
}

int hdx_pyrd_str(hdx_pyproc *p, uint64_t obj, size_t max, char **out, int *full)
{
    *out = NULL;
    uint8_t hdr[64]; /* set_spans() checked that length and state lie inside */
    size_t hl = (size_t)(OFF(p, str_state) + 4 > OFF(p, str_length) + 8 ? OFF(p, str_state) + 4
                                                                        : OFF(p, str_length) + 8);
    int rc = hdx_pyrd(p, obj, hdr, hl);
    if (rc)
        return rc;
    int64_t length = (int64_t)get_ptr(hdr, OFF(p, str_length));
    uint32_t state = (uint32_t)get_i32(hdr, OFF(p, str_state));
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (length < 0 || length > (1 << 30) || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
        return -EINVAL;
    uint64_t data;
    if (compact) {
        data = obj + (uint64_t)(ascii ? OFF(p, str_ascii_size) : OFF(p, str_compact_size));
    } else {
        rc = hdx_pyrd_ptr(p, obj + OFF(p, str_compact_size), &data); /* PyUnicodeObject.data.any */
        if (rc)
            return rc;
    }
    size_t n = (size_t)length;
    if (full)
        *full = n <= max;
    if (n > max)
        n = max;
    uint8_t *raw = malloc(n * kind + 1);
    char *s = malloc(n * 4 + 1);
    if (!raw || !s) {
        free(raw);
        free(s);
        return -ENOMEM;
    }
    rc = hdx_pyrd(p, data, raw, n * kind);
    if (rc) {
        free(raw);
        free(s);
        return rc;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c;
        if (kind == 1)
            c = raw[i];
        else if (kind == 2) {
            uint16_t c16;
            memcpy(&c16, raw + 2 * i, 2);
            c = c16;
        } else
            memcpy(&c, raw + 4 * i, 4);
        o += put_utf8(s + o, c);
    }
    s[o] = 0;
    free(raw);
    *out = s;
    return 0;
}

/* A bytes object's contents (at most max bytes); *out heap. */
static int rd_bytes(hdx_pyproc *p, uint64_t obj, size_t max, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    uint64_t size;
    int rc = hdx_pyrd_ptr(p, obj + OFF(p, ob_size), &size);
    if (rc)
        return rc;
    if ((int64_t)size < 0 || size > max)
        return -E2BIG;
    uint8_t *b = malloc(size ? size : 1);
    if (!b)
        return -ENOMEM;
    rc = hdx_pyrd(p, obj + OFF(p, bytes_sval), b, size);
    if (rc) {
        free(b);
        return rc;
    }
    *out = b;
    *len = size;
    return 0;
}

/* ------------------------------------------------------- address sets */

/* A set of target addresses, for cycle checks: the addresses and their hash index. */
typedef struct addrset {
    uint64_t *addr;
    size_t n;
    hdx_index index; /* an address -> its place in addr */
} addrset;

static void addrset_free(addrset *s)
{
    free(s->addr);
    hdx_index_free(&s->index);
    memset(s, 0, sizeof *s);
}

/* 1 when a was already there, 0 when added, -ENOMEM. */
static int addrset_add(addrset *s, uint64_t a)
{
    size_t cur = 0, at;
    while ((at = hdx_index_find(&s->index, a, &cur)) != HDX_INDEX_NONE)
        if (s->addr[at] == a)
            return 1;
    uint64_t *e;
    if (hdx_index_reserve(&s->index, s->n + 1) < 0 || !(e = hdx_append((void **)&s->addr, &s->n, sizeof *e)))
        return -ENOMEM;
    *e = a;
    hdx_index_insert(&s->index, a, s->n - 1); /* reserved: cannot fail */
    return 0;
}

/* ---------------------------------------------------------- code objects */

typedef struct code_info {
    uint64_t addr;
    char *name, *file;
    int firstlineno;
    uint8_t *table;
    size_t table_len;
    int64_t n_code;        /* bytes (3.8–3.10 co_code) or code units (3.11+) */
    /* locals, loaded on first need */
    int locals_state;      /* 0 not yet, 1 loaded, < 0 failed */
    size_t n_slots;        /* frame slots described */
    char **names;          /* per slot, NULL when unknown */
    uint8_t *kinds;        /* per slot: 3.11+ co_localspluskinds; ≤3.10 0x20 local, 0x40 cell, 0x80 free */
} code_info;

typedef struct walk_ctx {
    hdx_pyproc *p;
    unsigned flags;
    code_info *codes; /* a per-read cache: code objects can be freed and reused between reads */
    size_t n_codes;
    int *tasks;       /* live TIDs in hangdx's namespace (sorted) */
    size_t n_tasks;
    int *ns_tids;     /* the same TIDs as the target sees them, same order */
} walk_ctx;

static void code_info_clear(code_info *c)
{
    free(c->name);
    free(c->file);
    free(c->table);
    for (size_t i = 0; i < c->n_slots && c->names; i++)
        free(c->names[i]);
    free(c->names);
    free(c->kinds);
}

static int is_code_object(hdx_pyproc *p, uint64_t code)
{
    uint64_t t;
    if (hdx_pyrd_ptr(p, code + OFF(p, ob_type), &t))
        return 0;
    if (t && t == p->code_type)
        return 1;
    char name[16];
    uint64_t type;
    if (hdx_pyrd_type_name(p, code, &type, name, sizeof name) || strcmp(name, "code"))
        return 0;
    p->code_type = type;
    return 1;
}

/* The decoded code object at addr (borrowed from the cache), or NULL with *err. */
static code_info *code_get(walk_ctx *w, uint64_t addr, int *err)
{
    hdx_pyproc *p = w->p;
    for (size_t i = 0; i < w->n_codes; i++)
        if (w->codes[i].addr == addr)
            return &w->codes[i];
    if (!is_code_object(p, addr)) {
        *err = -EINVAL;
        return NULL;
    }
    uint8_t blk[512];
    int rc = hdx_pyrd(p, addr, blk, p->code_span);
    if (rc) {
        *err = rc;
        return NULL;
    }
    code_info c = { .addr = addr };
    c.firstlineno = get_i32(blk, OFF(p, co_firstlineno));
    uint64_t name = get_ptr(blk, HAS(p, co_qualname) ? OFF(p, co_qualname) : OFF(p, co_name));
    uint64_t file = get_ptr(blk, OFF(p, co_filename));
    uint64_t table = get_ptr(blk, OFF(p, co_linetable));
    if (HAS(p, co_code)) {
        uint64_t code_bytes = get_ptr(blk, OFF(p, co_code)), size;
        c.n_code = hdx_pyrd_ptr(p, code_bytes + OFF(p, ob_size), &size) ? -1 : (int64_t)size;
    } else {
        c.n_code = (int64_t)get_ptr(blk, OFF(p, ob_size));
    }
    if ((rc = hdx_pyrd_str(p, name, HDX_PY_MAX_STR, &c.name, NULL)) ||
        (rc = hdx_pyrd_str(p, file, 4096, &c.file, NULL)) ||
        (rc = rd_bytes(p, table, 1 << 20, &c.table, &c.table_len))) {
        code_info_clear(&c);
        *err = rc == -ENOMEM ? rc : -EINVAL;
        return NULL;
    }
    code_info *slot = hdx_append((void **)&w->codes, &w->n_codes, sizeof *slot);
    if (!slot) {
        code_info_clear(&c);
        *err = -ENOMEM;
        return NULL;
    }
    *slot = c;
    return slot;
}

/* The line of a frame at instruction position pos (f_lasti, or code units for 3.11+). */
static int code_line(hdx_pyproc *p, const code_info *c, int64_t pos)
{
    switch (OFF(p, lines)) {
    case HDX_PYL_LNOTAB: /* pos: bytes */
        if (pos < 0)
            return c->firstlineno;
        if (c->n_code >= 0 && pos >= c->n_code)
            return 0;
        return hdx_py_lnotab_line(c->table, c->table_len, c->firstlineno, (int)pos);
    case HDX_PYL_LINETABLE310: /* pos: code units */
        if (c->n_code >= 0 && pos * 2 >= c->n_code)
            return 0;
        return hdx_py_linetable310_line(c->table, c->table_len, c->firstlineno, (int)pos);
    case HDX_PYL_LOCATIONS:
        if (pos >= c->n_code)
            return 0;
        return hdx_py_loctable_line(c->table, c->table_len, c->firstlineno, (int)pos);
    }
    return 0;
}

/* The items of a tuple of str, appended to names[at...]. */
static int read_name_tuple(hdx_pyproc *p, uint64_t tuple, char **names, size_t at, size_t want)
{
    uint64_t size;
    int rc = hdx_pyrd_ptr(p, tuple + OFF(p, ob_size), &size);
    if (rc)
        return rc;
    if (size < want || size > 65536)
        return -EINVAL;
    if (!want)
        return 0;
    uint64_t *items = malloc(want * sizeof *items);
    if (!items)
        return -ENOMEM;
    rc = hdx_pyrd(p, tuple + OFF(p, tuple_item), items, want * sizeof *items);
    for (size_t i = 0; !rc && i < want; i++) {
        rc = hdx_pyrd_str(p, items[i], 256, &names[at + i], NULL);
        if (rc == -ENOMEM)
            break;
        rc = 0; /* an unreadable name leaves that slot unnamed */
    }
    free(items);
    return rc;
}

static uint64_t tuple_size(hdx_pyproc *p, uint64_t tuple)
{
    uint64_t size;
    if (!tuple || hdx_pyrd_ptr(p, tuple + OFF(p, ob_size), &size) || size > 65536)
        return 0;
    return size;
}

/* Load the slot names and kinds of a code object (docs/python-frames.md "Locals"). */
static int code_load_locals(hdx_pyproc *p, code_info *c)
{
    if (c->locals_state)
        return c->locals_state < 0 ? c->locals_state : 0;
    uint8_t blk[512];
    int rc = hdx_pyrd(p, c->addr, blk, p->code_span);
    if (rc)
        return c->locals_state = rc;
    if (HAS(p, co_varnames)) {
        /* 3.8–3.10: co_nlocals locals, then cell vars, then free vars. */
        int32_t nlocals = get_i32(blk, OFF(p, co_nlocals));
        uint64_t cells = get_ptr(blk, OFF(p, co_cellvars)), frees = get_ptr(blk, OFF(p, co_freevars));
        size_t ncell = tuple_size(p, cells), nfree = tuple_size(p, frees);
        if (nlocals < 0 || nlocals > 65536)
            return c->locals_state = -EINVAL;
        c->n_slots = (size_t)nlocals + ncell + nfree;
        c->names = calloc(c->n_slots + 1, sizeof *c->names);
        c->kinds = calloc(c->n_slots + 1, 1);
        if (!c->names || !c->kinds)
            return c->locals_state = -ENOMEM;
        for (size_t i = 0; i < c->n_slots; i++)
            c->kinds[i] = i < (size_t)nlocals ? 0x20 : i < (size_t)nlocals + ncell ? 0x40 : 0x80;
        rc = read_name_tuple(p, get_ptr(blk, OFF(p, co_varnames)), c->names, 0, (size_t)nlocals);
        if (!rc)
            rc = read_name_tuple(p, cells, c->names, (size_t)nlocals, ncell);
        if (!rc)
            rc = read_name_tuple(p, frees, c->names, (size_t)nlocals + ncell, nfree);
    } else {
        /* 3.11+: co_localsplusnames / co_localspluskinds. */
        uint64_t names = get_ptr(blk, OFF(p, co_localsplusnames));
        uint64_t kinds = get_ptr(blk, OFF(p, co_localspluskinds));
        size_t n = HAS(p, co_nlocalsplus) ? (size_t)get_i32(blk, OFF(p, co_nlocalsplus))
                                          : tuple_size(p, names);
        if (n > 65536)
            return c->locals_state = -EINVAL;
        uint8_t *kb = NULL;
        size_t kl = 0;
        rc = rd_bytes(p, kinds, 65536, &kb, &kl);
        if (rc)
            return c->locals_state = rc;
        if (kl < n) {
            free(kb);
            return c->locals_state = -EINVAL;
        }
        c->n_slots = n;
        c->kinds = kb;
        c->names = calloc(n + 1, sizeof *c->names);
        if (!c->names)
            return c->locals_state = -ENOMEM;
        rc = read_name_tuple(p, names, c->names, 0, n);
    }
    return c->locals_state = rc ? rc : 1;
}

/* ---------------------------------------------------------------- values */

int hdx_pyrd_long(hdx_pyproc *p, uint64_t obj, long long *out)
{
    uint64_t tag;
    int rc = hdx_pyrd_ptr(p, obj + OFF(p, ob_size), &tag);
    if (rc)
        return rc;
    int neg;
    uint64_t ndig;
    if (OFF(p, long_lv_tag)) {
        ndig = tag >> 3;
        if ((tag & 3) == 1) {
            *out = 0;
            return 0;
        }
        neg = (tag & 3) == 2;
    } else {
        int64_t s = (int64_t)tag;
        neg = s < 0;
        ndig = (uint64_t)(neg ? -s : s);
    }
    if (ndig > 3)
        return -ERANGE;
    uint32_t d[3] = { 0, 0, 0 };
    if (ndig && (rc = hdx_pyrd(p, obj + OFF(p, long_digits), d, ndig * 4)))
        return rc;
    unsigned __int128 v = 0;
    for (int i = (int)ndig - 1; i >= 0; i--)
        v = (v << 30) | (d[i] & 0x3fffffff);
    if (v > (unsigned __int128)INT64_MAX + (neg ? 1 : 0))
        return -ERANGE;
    *out = neg ? (long long)(-(__int128)v) : (long long)v;
    return 0;
}

int hdx_pyrd_value(hdx_pyproc *p, uint64_t obj, hdx_local *l)
{
    l->addr = obj;
    char tname[96];
    if (hdx_pyrd_type_name(p, obj, NULL, tname, sizeof tname)) {
        l->kind = HDX_VAL_OTHER;
        l->s = strdup("?");
        return l->s ? 0 : -ENOMEM;
    }
    if (!strcmp(tname, "NoneType")) {
        l->kind = HDX_VAL_NONE;
        return 0;
    }
    if (!strcmp(tname, "int") || !strcmp(tname, "bool")) {
        long long v;
        if (!hdx_pyrd_long(p, obj, &v)) {
            l->kind = tname[0] == 'b' ? HDX_VAL_BOOL : HDX_VAL_INT;
            l->i = tname[0] == 'b' ? v != 0 : v;
            return 0;
        }
    } else if (!strcmp(tname, "float")) {
        if (!hdx_pyrd(p, obj + OFF(p, float_fval), &l->f, sizeof l->f)) {
            l->kind = HDX_VAL_FLOAT;
            return 0;
        }
    } else if (!strcmp(tname, "str")) {
        int full = 0;
        char *s = NULL;
        int rc = hdx_pyrd_str(p, obj, HDX_PY_MAX_STR, &s, &full);
        if (rc == -ENOMEM)
            return rc;
        if (!rc && full) {
            l->kind = HDX_VAL_STR;
            l->s = s;
            return 0;
        }
        free(s);
    }
    l->kind = HDX_VAL_OTHER;
    l->s = strdup(tname);
    return l->s ? 0 : -ENOMEM;
}

/* Locals of one frame: slots at the target address slots (n of them). */
static int read_locals(walk_ctx *w, code_info *c, uint64_t slots, hdx_frame *f)
{
    hdx_pyproc *p = w->p;
    int rc = code_load_locals(p, c);
    if (rc < 0)
        return rc == -ENOMEM ? rc : 0; /* no names: no locals, not an error */
    size_t n = c->n_slots;
    if (!n)
        return 0;
    uint64_t *vals = malloc(n * sizeof *vals);
    if (!vals)
        return -ENOMEM;
    if (hdx_pyrd(p, slots, vals, n * sizeof *vals)) {
        free(vals);
        return 0;
    }
    f->locals = calloc(n, sizeof *f->locals);
    if (!f->locals) {
        free(vals);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = vals[i] & OFF(p, tag_mask);
        uint8_t kind = c->kinds[i];
        if (!v || !c->names[i] || (p->version >= 0x030c && (kind & 0x10)))
            continue; /* unbound, unnamed, or a hidden comprehension slot */
        if (kind & 0xc0) {
            /* A cell or free variable holds a cell once MAKE_CELL/COPY_FREE_VARS ran. */
            char tname[16];
            if (!hdx_pyrd_type_name(p, v, NULL, tname, sizeof tname) && !strcmp(tname, "cell")) {
                if (hdx_pyrd_ptr(p, v + OFF(p, cell_ref), &v) || !v)
                    continue;
            }
        }
        hdx_local *l = &f->locals[f->n_locals];
        l->name = strdup(c->names[i]);
        if (!l->name || hdx_pyrd_value(p, v, l)) {
            free(l->name);
            l->name = NULL;
            free(vals);
            return -ENOMEM;
        }
        f->n_locals++;
    }
    free(vals);
    return 0;
}

/* ----------------------------------------------------------------- frames */

typedef struct frames_buf {
    hdx_py_thread *t;
    size_t cap;
} frames_buf;

static hdx_frame *add_frame(frames_buf *b, int entry)
{
    hdx_py_thread *t = b->t;
    if (t->n_frames == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        hdx_frame *nf = realloc(t->frames, cap * sizeof *nf);
        if (!nf)
            return NULL;
        t->frames = nf;
        unsigned char *ne = realloc(t->is_entry, cap);
        if (!ne)
            return NULL;
        t->is_entry = ne;
        b->cap = cap;
    }
    hdx_frame *f = &t->frames[t->n_frames];
    memset(f, 0, sizeof *f);
    f->kind = HDX_FRAME_PYTHON;
    t->is_entry[t->n_frames] = (unsigned char)(entry != 0);
    t->n_frames++;
    return f;
}

/* One Python frame: code info → function, file, line (and locals). */
static int emit_frame(walk_ctx *w, frames_buf *b, code_info *c, int64_t pos, int entry, uint64_t slots)
{
    hdx_frame *f = add_frame(b, entry);
    if (!f)
        return -ENOMEM;
    f->function = strdup(c->name);
    f->file = strdup(c->file);
    if (!f->function || !f->file)
        return -ENOMEM;
    f->line = code_line(w->p, c, pos);
    if (w->flags & HDX_PY_LOCALS)
        return read_locals(w, c, slots, f);
    return 0;
}

/* Walk the frames of a thread state whose block is ts; sets t->partial. */
static int walk_frames(walk_ctx *w, const uint8_t *ts, hdx_py_thread *t)
{
    hdx_pyproc *p = w->p;
    frames_buf b = { t, 0 };
    addrset seen = { 0 };
    uint8_t blk[256];
    int rc = 0;
    uint64_t f = get_ptr(ts, OFF(p, ts_frame));
    if (HAS(p, cf_current_frame) && f) /* 3.11/3.12: through the _PyCFrame */
        rc = hdx_pyrd_ptr(p, f + OFF(p, cf_current_frame), &f);

    for (size_t steps = 0; !rc && f; steps++) {
        if (t->n_frames >= HDX_PY_MAX_FRAMES || steps >= 2 * HDX_PY_MAX_FRAMES) {
            rc = -E2BIG;
            break;
        }
        if ((f & 7) || (rc = addrset_add(&seen, f)) != 0) {
            rc = rc == -ENOMEM ? rc : (f & 7) ? -EFAULT : -ELOOP;
            break;
        }
        if ((rc = hdx_pyrd(p, f, blk, p->frame_span)))
            break;
        code_info *c;
        if (OFF(p, frame_kind) == HDX_PYF_FRAMEOBJ) {
            /* 3.8–3.10: every PyFrameObject is one eval activation. */
            if (!(c = code_get(w, get_ptr(blk, OFF(p, fo_code)), &rc)))
                break;
            rc = emit_frame(w, &b, c, get_i32(blk, OFF(p, fo_lasti)), 1, f + (uint64_t)OFF(p, fo_localsplus));
            f = get_ptr(blk, OFF(p, fo_back));
            continue;
        }
        /* 3.11+: _PyInterpreterFrame. */
        uint64_t prev = get_ptr(blk, OFF(p, if_previous));
        int owner = blk[OFF(p, if_owner)];
        uint64_t code = get_ptr(blk, OFF(p, if_code)) & OFF(p, tag_mask);
        if (owner > (OFF(p, owner_shim_hi) >= 0 ? OFF(p, owner_shim_hi) : 2)) {
            rc = -EFAULT; /* not a frame: a torn read */
            break;
        }
        if (OFF(p, owner_shim_lo) >= 0 && owner >= OFF(p, owner_shim_lo)) {
            /* A shim: the frame before it (inner side) began this activation. */
            if (t->n_frames)
                t->is_entry[t->n_frames - 1] = 1;
            f = prev;
            continue;
        }
        if (!code && p->version >= 0x030e) { /* 3.14 sentinel frame */
            f = prev;
            continue;
        }
        if (!(c = code_get(w, code, &rc)))
            break;
        uint64_t instr = get_ptr(blk, OFF(p, if_instr));
        int64_t pos = ((int64_t)instr - (int64_t)(code + (uint64_t)OFF(p, co_code_adaptive))) / 2;
        if (instr < code + (uint64_t)OFF(p, co_code_adaptive))
            pos = -1; /* not started yet (3.11/3.12 prev_instr before the first) */
        int entry = HAS(p, if_is_entry) ? blk[OFF(p, if_is_entry)] != 0 : 0;
        rc = emit_frame(w, &b, c, pos, entry, f + (uint64_t)OFF(p, if_localsplus));
        f = prev;
    }
    addrset_free(&seen);
    if (rc == -ENOMEM)
        return rc;
    t->partial = rc;
    return 0;
}

/* ---------------------------------------------------------------- TIDs */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The tid in the target's innermost pid namespace, or tid when unreadable. */
static int ns_tid_of(int pid, int tid)
{
    int v = hdx_proc_ns_pid(pid, tid);
    return v == HDX_UNKNOWN ? tid : v;
}

static void load_tasks(walk_ctx *w)
{
    hdx_pyproc *p = w->p;
    if (p->pid <= 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", p->pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        int tid = atoi(de->d_name);
        if (tid <= 0)
            continue;
        int *slot = hdx_append((void **)&w->tasks, &w->n_tasks, sizeof *slot);
        if (!slot)
            break;
        *slot = tid;
    }
    closedir(d);
    if (w->n_tasks)
        qsort(w->tasks, w->n_tasks, sizeof *w->tasks, cmp_int);
    if (p->in_pidns && w->n_tasks) {
        w->ns_tids = malloc(w->n_tasks * sizeof *w->ns_tids);
        for (size_t i = 0; w->ns_tids && i < w->n_tasks; i++)
            w->ns_tids[i] = ns_tid_of(p->pid, w->tasks[i]);
    }
}

/* A TID as the target sees it → hangdx's TID, or HDX_UNKNOWN when no such
 * task is alive. Without a task list (not live), the value as it is. */
static int host_tid(walk_ctx *w, int tid)
{
    if (tid <= 0)
        return HDX_UNKNOWN;
    if (!w->n_tasks)
        return tid; /* no task list (a core, or /proc/PID/task unreadable) */
    for (size_t i = 0; i < w->n_tasks; i++)
        if ((w->ns_tids ? w->ns_tids[i] : w->tasks[i]) == tid)
            return w->tasks[i];
    return HDX_UNKNOWN;
}

/*
 * ≤3.10: the TID from glibc's struct pthread at thread_id. The default offset
 * first; when it fails for a thread, once per process, scan each thread's
 * struct for an offset whose value is a live TID for every thread (docs/python-frames.md "Thread ids").
 */
static void resolve_pthread_tids(walk_ctx *w, hdx_py_sample *s)
{
    hdx_pyproc *p = w->p;
    int all_ok = 1;
    for (size_t i = 0; i < s->n_threads; i++) {
        hdx_py_thread *t = &s->threads[i];
        int32_t v;
        t->tid = HDX_UNKNOWN;
        if (t->thread_id && !rd_i32(p, t->thread_id + (uint64_t)p->tid_off, &v))
            t->tid = host_tid(w, v);
        all_ok &= t->tid != HDX_UNKNOWN;
    }
    if (all_ok || p->tid_scanned || !w->n_tasks || !s->n_threads)
        return;
    p->tid_scanned = 1;
    size_t n = s->n_threads;
    int32_t *img = calloc(n, PTHREAD_SCAN_BYTES);
    if (!img)
        return;
    size_t usable = 0;
    for (size_t i = 0; i < n; i++)
        if (s->threads[i].thread_id &&
            !hdx_pyrd(p, s->threads[i].thread_id, (char *)img + usable * PTHREAD_SCAN_BYTES, PTHREAD_SCAN_BYTES))
            usable++;
    for (int k = 0; usable && k < PTHREAD_SCAN_BYTES / 4; k++) {
        size_t ok = 0;
        for (size_t i = 0; i < usable; i++)
            ok += host_tid(w, img[i * (PTHREAD_SCAN_BYTES / 4) + k]) != HDX_UNKNOWN;
        if (ok == usable) {
            p->tid_off = k * 4;
            for (size_t i = 0; i < n; i++) {
                int32_t v;
                hdx_py_thread *t = &s->threads[i];
                if (t->thread_id && !rd_i32(p, t->thread_id + (uint64_t)p->tid_off, &v))
                    t->tid = host_tid(w, v);
            }
            break;
        }
    }
    free(img);
}

/* ---------------------------------------------------------------- walk */

static void thread_clear(hdx_py_thread *t)
{
    hdx_frames_free(t->frames, t->n_frames);
    free(t->is_entry);
    memset(t, 0, sizeof *t);
}

void hdx_py_sample_clear(hdx_py_sample *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_threads; i++)
        thread_clear(&s->threads[i]);
    free(s->threads);
    memset(s, 0, sizeof *s);
}

/* GIL state of an interpreter: holder tstate address (0 none), or -1 unknown. */
static int gil_holder(hdx_pyproc *p, uint64_t is, uint64_t *holder)
{
    int32_t locked;
    uint64_t base;
    if (HAS(p, rt_gil_tstate)) /* 3.8–3.11: gilstate.tstate_current */
        return hdx_pyrd_ptr(p, p->runtime + (uint64_t)OFF(p, rt_gil_tstate), holder) ? -1 : 0;
    if (!HAS(p, is_gil_locked))
        return -1;
    if (HAS(p, is_gil_ptr)) { /* 3.12: is->ceval.gil */
        if (hdx_pyrd_ptr(p, is + (uint64_t)OFF(p, is_gil_ptr), &base))
            return -1;
    } else
        base = is; /* 3.13+: the interpreter's own _gil */
    if (rd_i32(p, base + (uint64_t)OFF(p, is_gil_locked), &locked) ||
        hdx_pyrd_ptr(p, base + (uint64_t)OFF(p, is_gil_holder), holder))
        return -1;
    if (!locked)
        *holder = 0;
    return 0;
}

int hdx_py_read(hdx_pyproc *p, unsigned flags, hdx_py_sample *out)
{
    memset(out, 0, sizeof *out);
    if (!p)
        return -EINVAL;
    walk_ctx w = { .p = p, .flags = flags };
    addrset seen_is = { 0 }, seen_ts = { 0 };
    uint64_t is, fin = 0;
    int rc = hdx_pyrd_ptr(p, p->runtime + (uint64_t)OFF(p, rt_interp_head), &is);
    if (rc)
        return rc;
    if (!hdx_pyrd_ptr(p, p->runtime + (uint64_t)OFF(p, rt_finalizing), &fin))
        out->finalizing = fin != 0;
    load_tasks(&w);

    size_t cap = 0;
    int partial = 0;
    for (size_t ni = 0; is && !partial; ni++) {
        uint64_t next, ts, id;
        if (ni >= HDX_PY_MAX_INTERPS) {
            partial = -E2BIG;
            break;
        }
        if ((rc = addrset_add(&seen_is, is))) {
            partial = rc == -ENOMEM ? rc : -ELOOP;
            break;
        }
        /* PyInterpreterState is large (7 KiB in 3.13): its fields one by one. */
        if ((rc = hdx_pyrd_ptr(p, is + (uint64_t)OFF(p, is_next), &next)) ||
            (rc = hdx_pyrd_ptr(p, is + (uint64_t)OFF(p, is_threads_head), &ts)) ||
            (rc = hdx_pyrd_ptr(p, is + (uint64_t)OFF(p, is_id), &id))) {
            partial = rc;
            break;
        }
        uint64_t holder = 0;
        int gil_known = gil_holder(p, is, &holder) == 0;
        while (ts) {
            uint8_t tsblk[512];
            if (out->n_threads >= HDX_PY_MAX_THREADS) {
                partial = -E2BIG;
                break;
            }
            if ((rc = addrset_add(&seen_ts, ts))) {
                partial = rc == -ENOMEM ? rc : -ELOOP;
                break;
            }
            if ((rc = hdx_pyrd(p, ts, tsblk, p->ts_span))) {
                partial = rc;
                break;
            }
            if (get_ptr(tsblk, OFF(p, ts_interp)) != is) {
                partial = -EFAULT; /* not a thread state of this interpreter: torn */
                break;
            }
            hdx_py_thread *t = hdx_grow((void **)&out->threads, &out->n_threads, &cap, sizeof *t);
            if (!t) {
                partial = -ENOMEM;
                break;
            }
            t->tstate = ts;
            t->interp_id = (int64_t)id;
            t->thread_id = get_ptr(tsblk, OFF(p, ts_thread_id));
            t->tid = HDX_UNKNOWN;
            if (HAS(p, ts_native_tid))
                t->tid = host_tid(&w, (int)get_ptr(tsblk, OFF(p, ts_native_tid)));
            t->holds_gil = gil_known ? holder == ts : HDX_UNKNOWN;
            if ((rc = walk_frames(&w, tsblk, t))) {
                partial = rc;
                break;
            }
            ts = get_ptr(tsblk, OFF(p, ts_next));
        }
        is = next;
    }
    if (!HAS(p, ts_native_tid))
        resolve_pthread_tids(&w, out);

    for (size_t i = 0; i < w.n_codes; i++)
        code_info_clear(&w.codes[i]);
    free(w.codes);
    free(w.tasks);
    free(w.ns_tids);
    addrset_free(&seen_is);
    addrset_free(&seen_ts);
    if (partial == -ENOMEM) {
        hdx_py_sample_clear(out);
        return -ENOMEM;
    }
    out->partial = partial;
    if (partial == -ESRCH && !out->n_threads)
        return -ESRCH;
    return 0;
}

/* --------------------------------------------------------------- attach */

static hdx_pyproc *fail(hdx_pyproc *p, char **err, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static hdx_pyproc *fail(hdx_pyproc *p, char **err, int e, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(err, fmt, ap) < 0)
            *err = NULL;
        va_end(ap);
    }
    hdx_py_detach(p);
    errno = e;
    return NULL;
}

static size_t span_of(const int *offs, const int *widths, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (offs[i] != HDX_PYOFF_NONE && (size_t)(offs[i] + widths[i]) > m)
            m = (size_t)(offs[i] + widths[i]);
    return m;
}

/* Compute the block sizes read in one go, and check they fit the buffers. */
static int set_spans(hdx_pyproc *p)
{
    const hdx_pyoffs *o = &p->off;
    const int w8[16] = { 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8 };
    int ts_f[] = { o->ts_next, o->ts_interp, o->ts_frame, o->ts_thread_id, o->ts_native_tid };
    int fr_f[] = { o->fo_back, o->fo_code, o->fo_lasti, o->if_previous, o->if_code, o->if_instr,
                   o->if_is_entry, o->if_owner };
    int co_f[] = { o->co_firstlineno, o->co_filename, o->co_name, o->co_qualname, o->co_linetable,
                   o->co_code, o->co_nlocals, o->co_varnames, o->co_cellvars, o->co_freevars,
                   o->co_nlocalsplus, o->co_localsplusnames, o->co_localspluskinds, o->ob_size };
    p->ts_span = span_of(ts_f, w8, sizeof ts_f / sizeof *ts_f);
    p->frame_span = span_of(fr_f, w8, sizeof fr_f / sizeof *fr_f);
    p->code_span = span_of(co_f, w8, sizeof co_f / sizeof *co_f);
    /* A span of 8 past a 1- or 4-byte last field stays inside the struct
     * for every version here (the structs go on well past these fields). */
    if (p->ts_span > 512 || p->frame_span > 256 || p->code_span > 512)
        return -EINVAL;
    if (o->str_state + 4 > 64 || o->str_length + 8 > 64)
        return -EINVAL;
    return 0;
}

/* Scan the image's writable data and the anonymous mappings after it for
 * the Py_GetVersion() string (docs/python-frames.md "The version", 3.8–3.10 with an unusual file name). */
static int version_from_data(hdx_pyproc *p, const hdx_map *maps, size_t n)
{
    size_t budget = 64u << 20;
    uint8_t *buf = malloc(1 << 16);
    if (!buf)
        return 0;
    int v = 0;
    uint64_t prev_end = 0;
    int in_image = 0;
    for (size_t i = 0; i < n && !v && budget; i++) {
        const hdx_map *m = &maps[i];
        int ours = m->path && !strcmp(m->path, p->binary);
        int follows = !m->path && in_image && m->start == prev_end;
        in_image = ours || follows;
        prev_end = m->end;
        if (!in_image || m->perms[0] != 'r' || m->perms[1] != 'w')
            continue;
        for (uint64_t a = m->start; a < m->end && !v && budget;) {
            size_t chunk = (size_t)(m->end - a < (1 << 16) ? m->end - a : (1 << 16));
            if (hdx_pyrd(p, a, buf, chunk))
                break;
            v = hdx_pyversion_from_text(buf, chunk);
            budget = budget > chunk ? budget - chunk : 0;
            a += chunk > 64 ? chunk - 64 : chunk; /* overlap: a string across chunks */
        }
    }
    free(buf);
    return v;
}

hdx_pyproc *hdx_py_attach_mem(int pid, hdx_pymem *mem, const hdx_map *maps, size_t n_maps,
                              const char *root, char **err)
{
    if (err)
        *err = NULL;
    hdx_pyproc *p = calloc(1, sizeof *p);
    if (!p) {
        hdx_pymem_close(mem);
        return fail(NULL, err, ENOMEM, "out of memory");
    }
    p->pid = pid;
    p->mem = *mem;
    mem->ops = NULL;
    mem->ctx = NULL;
    p->tid_off = PTHREAD_TID_OFFSET;

    hdx_pyfound f;
    int rc = hdx_pyfind_runtime(maps, n_maps, pid, root, &f);
    if (rc == -ENOMEM)
        return fail(p, err, ENOMEM, "out of memory");
    if (rc)
        return fail(p, err, ENOENT,
                    "process %d is not a Python process: no mapped ELF file named *python* "
                    "defines _PyRuntime (CPython 3.8 or later is needed)", pid);
    p->binary = f.path;
    p->runtime = f.runtime;

    uint8_t head[24];
    rc = hdx_pyrd(p, p->runtime, head, sizeof head);
    if (rc == -EPERM || rc == -EACCES)
        return fail(p, err, -rc,
                    "cannot read the memory of process %d: not permitted — run hangdx as the "
                    "target's user (and the target dumpable) or with CAP_SYS_PTRACE", pid);
    if (rc == -ESRCH)
        return fail(p, err, ESRCH, "process %d exited", pid);
    if (rc)
        return fail(p, err, -rc, "cannot read _PyRuntime at %#llx in process %d (%s): %s",
                    (unsigned long long)p->runtime, pid, p->binary, strerror(-rc));

    /* The version, without running anything (docs/python-frames.md "The version"). */
    int cookie = !memcmp(head, "xdebugpy", 8);
    if (cookie) {
        uint64_t hex;
        memcpy(&hex, head + 8, 8);
        p->version = (int)(hex >> 16);
        p->version_source = "debug offsets";
    } else if (f.py_version >> 24 == 3) {
        p->version = (int)(f.py_version >> 16);
        p->version_source = "Py_Version";
    } else if ((p->version = hdx_pyversion_from_name(p->binary))) {
        p->version_source = "file name";
    } else {
        for (size_t i = 0; i < n_maps && !p->version; i++)
            if (maps[i].path && strstr(maps[i].path, "python"))
                p->version = hdx_pyversion_from_name(maps[i].path);
        if (p->version) {
            p->version_source = "file name";
        } else if ((p->version = version_from_data(p, maps, n_maps))) {
            p->version_source = "version string";
        }
    }
    if (!p->version)
        return fail(p, err, ENOTSUP,
                    "process %d: found _PyRuntime in %s but could not tell the Python version",
                    pid, p->binary);

    int minor = p->version & 0xff;
    if ((p->version >> 8) != 3 || minor < 8 || minor > 14)
        return fail(p, err, ENOTSUP, "process %d runs Python %d.%d; hangdx reads 3.8 to 3.14", pid,
                    p->version >> 8, minor);
    if (minor <= 12) {
        p->off = *hdx_pyoffs_static(minor);
    } else {
        size_t len = hdx_pydebug_size(p->version);
        uint8_t *buf = malloc(len);
        if (!buf)
            return fail(p, err, ENOMEM, "out of memory");
        const char *why = "cannot read it";
        rc = hdx_pyrd(p, p->runtime, buf, len);
        if (!rc)
            rc = hdx_pyoffs_from_debug(buf, len, &p->off, &why);
        free(buf);
        if (rc)
            return fail(p, err, ENOTSUP, "process %d (Python 3.%d, %s): unusable _Py_DebugOffsets: %s",
                        pid, minor, p->binary, why);
    }
    if (set_spans(p))
        return fail(p, err, ENOTSUP, "process %d: implausible offsets for Python 3.%d", pid, minor);

    /* In another PID namespace, native_thread_id and pthread TIDs need mapping. */
    if (pid > 0 && ns_tid_of(pid, pid) != pid)
        p->in_pidns = 1;
    return p;
}

hdx_pyproc *hdx_py_attach(int pid, char **err)
{
    if (err)
        *err = NULL;
    hdx_map *maps = NULL;
    size_t n = 0;
    int rc = hdx_maps_read(pid, &maps, &n);
    if (rc == -ESRCH)
        return fail(NULL, err, ESRCH, "no process %d", pid);
    if (rc == -EACCES || rc == -EPERM)
        return fail(NULL, err, -rc,
                    "cannot read /proc/%d/maps: not permitted — run hangdx as the target's user "
                    "or with CAP_SYS_PTRACE", pid);
    if (rc)
        return fail(NULL, err, -rc, "cannot read /proc/%d/maps: %s", pid, strerror(-rc));
    hdx_pymem mem;
    if (hdx_pymem_live(pid, &mem)) {
        hdx_maps_free(maps, n);
        return fail(NULL, err, ENOMEM, "out of memory");
    }
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", pid);
    hdx_pyproc *p = hdx_py_attach_mem(pid, &mem, maps, n, root, err);
    int e = errno;
    hdx_maps_free(maps, n);
    errno = e;
    return p;
}

void hdx_py_detach(hdx_pyproc *p)
{
    if (!p)
        return;
    hdx_pymem_close(&p->mem);
    free(p->binary);
    free(p);
}

int hdx_py_version(const hdx_pyproc *p)
{
    return p ? p->version : 0;
}

const char *hdx_py_version_source(const hdx_pyproc *p)
{
    return p ? p->version_source : NULL;
}

const char *hdx_py_binary(const hdx_pyproc *p)
{
    return p ? p->binary : NULL;
}

uint64_t hdx_py_runtime_addr(const hdx_pyproc *p)
{
    return p ? p->runtime : 0;
}

void hdx_py_set_tid_offset(hdx_pyproc *p, int off)
{
    p->tid_off = off;
    p->tid_scanned = 0;
}

int hdx_py_tid_offset(const hdx_pyproc *p)
{
    return p->tid_off;
}

int hdx_py_scan_version(hdx_pyproc *p, const hdx_map *maps, size_t n)
{
    return version_from_data(p, maps, n);
}
