/*
 * The pickle reader that runs nothing (pickle.h). Opcodes as CPython's Lib/pickletools.py
 * documents them (protocols 2 to 5); a small stack machine of cJSON items with marks and a
 * memo, every step bounded by the bytes that are there.
 */
#include "formats/pickle.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/util.h"

enum {
    OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1', OP_DUP = '2', OP_FLOAT = 'F',
    OP_INT = 'I', OP_BININT = 'J', OP_BININT1 = 'K', OP_LONG = 'L', OP_BININT2 = 'M', OP_NONE = 'N',
    OP_PERSID = 'P', OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_STRING = 'S', OP_BINSTRING = 'T',
    OP_SHORT_BINSTRING = 'U', OP_UNICODE = 'V', OP_BINUNICODE = 'X', OP_APPEND = 'a', OP_BUILD = 'b',
    OP_GLOBAL = 'c', OP_DICT = 'd', OP_EMPTY_DICT = '}', OP_APPENDS = 'e', OP_GET = 'g', OP_BINGET = 'h',
    OP_INST = 'i', OP_LONG_BINGET = 'j', OP_LIST = 'l', OP_EMPTY_LIST = ']', OP_OBJ = 'o', OP_PUT = 'p',
    OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't', OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u', OP_BINFLOAT = 'G', OP_BINBYTES = 'B', OP_SHORT_BINBYTES = 'C',
    OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_EXT1 = 0x82, OP_EXT2 = 0x83, OP_EXT4 = 0x84, OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b, OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d, OP_BINBYTES8 = 0x8e,
    OP_EMPTY_SET = 0x8f, OP_ADDITEMS = 0x90, OP_FROZENSET = 0x91, OP_NEWOBJ_EX = 0x92,
    OP_STACK_GLOBAL = 0x93, OP_MEMOIZE = 0x94, OP_FRAME = 0x95, OP_BYTEARRAY8 = 0x96,
    OP_NEXT_BUFFER = 0x97, OP_READONLY_BUFFER = 0x98,
};

const char *hdx_pickle_opcode_name(int op)
{
    static const struct {
        int op;
        const char *name;
    } names[] = {
        {OP_MARK, "MARK"}, {OP_STOP, "STOP"}, {OP_POP, "POP"}, {OP_POP_MARK, "POP_MARK"}, {OP_DUP, "DUP"},
        {OP_FLOAT, "FLOAT"}, {OP_INT, "INT"}, {OP_BININT, "BININT"}, {OP_BININT1, "BININT1"}, {OP_LONG, "LONG"},
        {OP_BININT2, "BININT2"}, {OP_NONE, "NONE"}, {OP_PERSID, "PERSID"}, {OP_BINPERSID, "BINPERSID"},
        {OP_REDUCE, "REDUCE"}, {OP_STRING, "STRING"}, {OP_BINSTRING, "BINSTRING"},
        {OP_SHORT_BINSTRING, "SHORT_BINSTRING"}, {OP_UNICODE, "UNICODE"}, {OP_BINUNICODE, "BINUNICODE"},
        {OP_APPEND, "APPEND"}, {OP_BUILD, "BUILD"}, {OP_GLOBAL, "GLOBAL"}, {OP_DICT, "DICT"},
        {OP_EMPTY_DICT, "EMPTY_DICT"}, {OP_APPENDS, "APPENDS"}, {OP_GET, "GET"}, {OP_BINGET, "BINGET"},
        {OP_INST, "INST"}, {OP_LONG_BINGET, "LONG_BINGET"}, {OP_LIST, "LIST"}, {OP_EMPTY_LIST, "EMPTY_LIST"},
        {OP_OBJ, "OBJ"}, {OP_PUT, "PUT"}, {OP_BINPUT, "BINPUT"}, {OP_LONG_BINPUT, "LONG_BINPUT"},
        {OP_SETITEM, "SETITEM"}, {OP_TUPLE, "TUPLE"}, {OP_EMPTY_TUPLE, "EMPTY_TUPLE"}, {OP_SETITEMS, "SETITEMS"},
        {OP_BINFLOAT, "BINFLOAT"}, {OP_BINBYTES, "BINBYTES"}, {OP_SHORT_BINBYTES, "SHORT_BINBYTES"},
        {OP_PROTO, "PROTO"}, {OP_NEWOBJ, "NEWOBJ"}, {OP_EXT1, "EXT1"}, {OP_EXT2, "EXT2"}, {OP_EXT4, "EXT4"},
        {OP_TUPLE1, "TUPLE1"}, {OP_TUPLE2, "TUPLE2"}, {OP_TUPLE3, "TUPLE3"}, {OP_NEWTRUE, "NEWTRUE"},
        {OP_NEWFALSE, "NEWFALSE"}, {OP_LONG1, "LONG1"}, {OP_LONG4, "LONG4"},
        {OP_SHORT_BINUNICODE, "SHORT_BINUNICODE"}, {OP_BINUNICODE8, "BINUNICODE8"}, {OP_BINBYTES8, "BINBYTES8"},
        {OP_EMPTY_SET, "EMPTY_SET"}, {OP_ADDITEMS, "ADDITEMS"}, {OP_FROZENSET, "FROZENSET"},
        {OP_NEWOBJ_EX, "NEWOBJ_EX"}, {OP_STACK_GLOBAL, "STACK_GLOBAL"}, {OP_MEMOIZE, "MEMOIZE"},
        {OP_FRAME, "FRAME"}, {OP_BYTEARRAY8, "BYTEARRAY8"}, {OP_NEXT_BUFFER, "NEXT_BUFFER"},
        {OP_READONLY_BUFFER, "READONLY_BUFFER"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].op == op)
            return names[i].name;
    return "?";
}

/* What an opcode that runs code does, for the message; NULL for the others. */
static const char *unsafe_what(int op)
{
    switch (op) {
    case OP_GLOBAL:
    case OP_STACK_GLOBAL: return "finds a Python object by module and name (an import)";
    case OP_REDUCE: return "calls a Python object";
    case OP_BUILD: return "calls an object's __setstate__";
    case OP_INST:
    case OP_OBJ:
    case OP_NEWOBJ:
    case OP_NEWOBJ_EX: return "makes an instance of a class";
    case OP_EXT1:
    case OP_EXT2:
    case OP_EXT4: return "finds a Python object through the copyreg extension registry";
    case OP_PERSID:
    case OP_BINPERSID: return "asks the unpickler's persistent_load for an object";
    case OP_NEXT_BUFFER:
    case OP_READONLY_BUFFER: return "takes an out-of-band buffer";
    default: return NULL;
    }
}

/* The stack holds items and marks (NULL). */
typedef struct vm {
    const unsigned char *d;
    size_t len, at, op_at;
    int op;
    cJSON **stack;
    size_t n, cap;
    cJSON **memo;
    size_t n_memo, cap_memo;
    cJSON *kept;    /* items popped off the stack that the memo may still name: freed at the end */
    uint64_t cost, budget;
    hdx_pickle_error *e;
} vm;

static int fail(vm *m, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(vm *m, int code, const char *fmt, ...)
{
    m->e->offset = m->op_at;
    m->e->opcode = m->op;
    m->e->unsafe = code == -EPERM;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->e->what, sizeof m->e->what, fmt, ap);
    va_end(ap);
    return code;
}

/* n bytes of argument at the cursor, or NULL (and the failure) when fewer are there. */
static const unsigned char *take(vm *m, size_t n, int *rc)
{
    if (n > m->len - m->at) {
        *rc = fail(m, -EBADMSG, "%s needs %zu bytes, %zu are left: the pickle is cut short", hdx_pickle_opcode_name(m->op),
                   n, m->len - m->at);
        return NULL;
    }
    const unsigned char *p = m->d + m->at;
    m->at += n;
    return p;
}

static uint64_t le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* The height of a container (0 for a scalar), kept in valueint, which cJSON leaves unused
 * for arrays and objects. */
static int height(const cJSON *c)
{
    return cJSON_IsArray(c) || cJSON_IsObject(c) ? c->valueint : 0;
}

static int charge(vm *m, uint64_t cost)
{
    m->cost += cost;
    if (m->cost > m->budget)
        return fail(m, -EBADMSG, "the pickle makes more than %llu bytes of data from %zu bytes (memo fetches of large "
                                 "items, over and over): not read",
                    (unsigned long long)m->budget, m->len);
    return 0;
}

static int push(vm *m, cJSON *item)
{
    if (!item)
        return -ENOMEM;
    int rc = charge(m, 64 + (cJSON_IsString(item) ? strlen(item->valuestring) : 0));
    cJSON **slot = rc ? NULL : hdx_grow((void **)&m->stack, &m->n, &m->cap, sizeof *m->stack);
    if (!slot) {
        cJSON_Delete(item);
        return rc ? rc : -ENOMEM;
    }
    *slot = item;
    return 0;
}

static int push_mark(vm *m)
{
    /* hdx_grow zeroes the new slot: a mark */
    return hdx_grow((void **)&m->stack, &m->n, &m->cap, sizeof *m->stack) ? charge(m, 8) : -ENOMEM;
}

/* The top item (not a mark), or NULL with the failure. */
static cJSON *top(vm *m, int *rc)
{
    if (!m->n || !m->stack[m->n - 1]) {
        *rc = fail(m, -EBADMSG, "%s needs an item on the stack and finds %s", hdx_pickle_opcode_name(m->op),
                   m->n ? "a MARK" : "none");
        return NULL;
    }
    return m->stack[m->n - 1];
}

/* Keep an item that leaves the stack without a parent alive for the memo. */
static int keep(vm *m, cJSON *item)
{
    if (!item)
        return 0;
    if (!cJSON_AddItemToArray(m->kept, item)) {
        cJSON_Delete(item);
        return -ENOMEM;
    }
    return 0;
}

/* The index of the topmost mark, or -1 with the failure. */
static long last_mark(vm *m, int *rc)
{
    for (size_t i = m->n; i-- > 0;)
        if (!m->stack[i])
            return (long)i;
    *rc = fail(m, -EBADMSG, "%s without a MARK before it", hdx_pickle_opcode_name(m->op));
    return -1;
}

/* A copy of item for a memo fetch or DUP, charged to the budget. */
static cJSON *copy(vm *m, const cJSON *item, int *rc)
{
    if ((*rc = charge(m, 64 + (cJSON_IsString(item) ? strlen(item->valuestring) : 0))))
        return NULL;
    cJSON *c;
    if (cJSON_IsArray(item) || cJSON_IsObject(item)) {
        c = cJSON_IsArray(item) ? cJSON_CreateArray() : cJSON_CreateObject();
        if (!c) {
            *rc = -ENOMEM;
            return NULL;
        }
        c->valueint = item->valueint;
        for (const cJSON *k = item->child; k; k = k->next) {
            cJSON *kc = copy(m, k, rc);
            if (!kc) {
                cJSON_Delete(c);
                return NULL;
            }
            if (cJSON_IsObject(item) ? !cJSON_AddItemToObject(c, k->string, kc) : !cJSON_AddItemToArray(c, kc)) {
                cJSON_Delete(kc);
                cJSON_Delete(c);
                *rc = -ENOMEM;
                return NULL;
            }
        }
        return c;
    }
    c = cJSON_Duplicate(item, 0);
    if (!c)
        *rc = -ENOMEM;
    return c;
}

/* Put child into container (an array, or an object under key), its height checked. The
 * child is the container's afterwards, also on failure. */
static int adopt(vm *m, cJSON *container, const char *key, cJSON *child)
{
    int h = height(child) + 1;
    if (h > HDX_PICKLE_MAX_DEPTH) {
        cJSON_Delete(child);
        return fail(m, -EBADMSG, "containers nest deeper than %d levels", HDX_PICKLE_MAX_DEPTH);
    }
    if (key ? !cJSON_AddItemToObject(container, key, child) : !cJSON_AddItemToArray(container, child)) {
        cJSON_Delete(child);
        return -ENOMEM;
    }
    if (h > container->valueint)
        container->valueint = h;
    return 0;
}

/* The text of a dict key: a string, or an int as its decimal text. */
static int key_text(vm *m, const cJSON *k, char *buf, size_t size, const char **out)
{
    if (cJSON_IsString(k)) {
        *out = k->valuestring;
        return 0;
    }
    if (cJSON_IsNumber(k) && fabs(k->valuedouble) < 9e18 && k->valuedouble == (double)(long long)k->valuedouble) {
        snprintf(buf, size, "%lld", (long long)k->valuedouble);
        *out = buf;
        return 0;
    }
    return fail(m, -EBADMSG, "a dict key that is neither a string nor an int");
}

/* Items stack[from..n) into the container below them (SETITEMS, APPENDS, ADDITEMS, or a
 * new one for DICT, LIST, TUPLE, FROZENSET), dropping the mark at from - 1 when marked. */
static int fill(vm *m, cJSON *c, size_t from, int pairs)
{
    int rc = 0;
    if (pairs && (m->n - from) % 2)
        rc = fail(m, -EBADMSG, "%s with an odd number of items: a key without its value",
                  hdx_pickle_opcode_name(m->op));
    for (size_t i = from; i < m->n; i += pairs ? 2 : 1) {
        if (rc) { /* the rest goes to the kept items, to be freed */
            rc = keep(m, m->stack[i]) ? -ENOMEM : rc;
            if (pairs && i + 1 < m->n) /* an odd count: the last key has no value */
                rc = keep(m, m->stack[i + 1]) ? -ENOMEM : rc;
            continue;
        }
        if (pairs) {
            char buf[32];
            const char *k = NULL;
            rc = key_text(m, m->stack[i], buf, sizeof buf, &k);
            if (!rc) /* a key set again: the last value wins */
                rc = keep(m, cJSON_DetachItemFromObjectCaseSensitive(c, k));
            if (!rc) {
                rc = adopt(m, c, k, m->stack[i + 1]);
                m->stack[i + 1] = NULL;
            }
            if (keep(m, m->stack[i]))
                rc = -ENOMEM;
            if (m->stack[i + 1] && keep(m, m->stack[i + 1]))
                rc = -ENOMEM;
        } else {
            rc = adopt(m, c, NULL, m->stack[i]);
        }
    }
    m->n = from;
    return rc;
}

/* The bytes after a little-endian count of n_len bytes (the strings, LONG1/LONG4), *n of them;
 * NULL with *rc set when the pickle ends before them. */
static const unsigned char *take_counted(vm *m, size_t n_len, size_t *n, int *rc)
{
    const unsigned char *p = take(m, n_len, rc);
    if (!p)
        return NULL;
    uint64_t c = le(p, n_len);
    if (c > m->len - m->at) {
        *rc = fail(m, -EBADMSG, "%s claims %llu bytes, %zu are left: the pickle is cut short",
                   hdx_pickle_opcode_name(m->op), (unsigned long long)c, m->len - m->at);
        return NULL;
    }
    *n = (size_t)c;
    return take(m, *n, rc);
}

static int op_string(vm *m, size_t n_len)
{
    int rc = 0;
    size_t n;
    const unsigned char *b = take_counted(m, n_len, &n, &rc);
    if (!b)
        return rc;
    char *s = malloc(n + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s, b, n);
    s[n] = 0;
    cJSON *item = cJSON_CreateString(s);
    free(s);
    return push(m, item);
}

/* LONG1/LONG4: n bytes of little-endian two's complement. */
static int op_long(vm *m, size_t n_len)
{
    int rc = 0;
    size_t n;
    const unsigned char *b = take_counted(m, n_len, &n, &rc);
    if (!b)
        return rc;
    double v = 0;
    if (n && n <= 8) {
        uint64_t u = le(b, n);
        if (n < 8 && (b[n - 1] & 0x80))
            u |= ~0ull << (8 * n); /* sign-extend */
        v = (double)(int64_t)u;
    } else if (n) { /* beyond 64 bits: its magnitude, as a double */
        int neg = b[n - 1] & 0x80;
        for (size_t i = n; i-- > 0;)
            v = v * 256 + (neg ? (unsigned char)~b[i] : b[i]);
        if (neg)
            v = -(v + 1);
    }
    return push(m, cJSON_CreateNumber(v));
}

static int memo_put(vm *m, uint64_t id)
{
    int rc = 0;
    cJSON *item = top(m, &rc);
    if (!item)
        return rc;
    if (id > m->n_memo)
        return fail(m, -EBADMSG, "memo id %llu out of order (%zu ids so far): not a pickle Python or torch writes",
                    (unsigned long long)id, m->n_memo);
    if (id == m->n_memo && !hdx_grow((void **)&m->memo, &m->n_memo, &m->cap_memo, sizeof *m->memo))
        return -ENOMEM;
    m->memo[id] = item;
    return charge(m, 8);
}

static int memo_get(vm *m, uint64_t id)
{
    if (id >= m->n_memo)
        return fail(m, -EBADMSG, "memo id %llu was never put (%zu ids)", (unsigned long long)id, m->n_memo);
    int rc = 0;
    cJSON *c = copy(m, m->memo[id], &rc);
    return c ? push(m, c) : rc;
}

/* One opcode at the cursor. 1 at STOP, else 0 or the failure. */
static int step(vm *m)
{
    int rc = 0;
    m->op_at = m->at;
    if (m->at >= m->len) {
        m->op = -1;
        return fail(m, -EBADMSG, "the pickle ends before its STOP opcode: it is cut short");
    }
    m->op = m->d[m->at++];
    const char *bad = unsafe_what(m->op);
    if (bad)
        return fail(m, -EPERM, "%s (0x%02x) %s: this reader runs nothing, so it reads only pickles of plain data",
                    hdx_pickle_opcode_name(m->op), m->op, bad);
    const unsigned char *p;
    long mk;
    cJSON *c, *t;
    switch (m->op) {
    case OP_PROTO:
        if (!(p = take(m, 1, &rc)))
            return rc;
        if (*p < 2 || *p > 5)
            return fail(m, -EBADMSG, "pickle protocol %d: this reader reads protocols 2 to 5", *p);
        return 0;
    case OP_FRAME: /* a length hint for buffering: the opcodes inside are read as they come */
        return take(m, 8, &rc) ? 0 : rc;
    case OP_STOP:
        return 1;
    case OP_MARK: return push_mark(m);
    case OP_POP:
        if (!m->n)
            return fail(m, -EBADMSG, "POP on an empty stack");
        c = m->stack[--m->n];
        return keep(m, c);
    case OP_POP_MARK:
        if ((mk = last_mark(m, &rc)) < 0)
            return rc;
        while (m->n > (size_t)mk + 1)
            if (keep(m, m->stack[--m->n]))
                return -ENOMEM;
        m->n--;
        return 0;
    case OP_DUP:
        if (!(t = top(m, &rc)))
            return rc;
        return (c = copy(m, t, &rc)) ? push(m, c) : rc;
    case OP_NONE: return push(m, cJSON_CreateNull());
    case OP_NEWTRUE: return push(m, cJSON_CreateTrue());
    case OP_NEWFALSE: return push(m, cJSON_CreateFalse());
    case OP_BININT:
        if (!(p = take(m, 4, &rc)))
            return rc;
        return push(m, cJSON_CreateNumber((double)(int32_t)(uint32_t)le(p, 4)));
    case OP_BININT1:
        if (!(p = take(m, 1, &rc)))
            return rc;
        return push(m, cJSON_CreateNumber(*p));
    case OP_BININT2:
        if (!(p = take(m, 2, &rc)))
            return rc;
        return push(m, cJSON_CreateNumber((double)le(p, 2)));
    case OP_LONG1: return op_long(m, 1);
    case OP_LONG4: return op_long(m, 4);
    case OP_BINFLOAT: {
        if (!(p = take(m, 8, &rc)))
            return rc;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = u << 8 | p[i]; /* big-endian */
        double v;
        memcpy(&v, &u, sizeof v);
        return push(m, cJSON_CreateNumber(v));
    }
    case OP_SHORT_BINUNICODE:
    case OP_SHORT_BINSTRING:
    case OP_SHORT_BINBYTES: return op_string(m, 1);
    case OP_BINUNICODE:
    case OP_BINSTRING:
    case OP_BINBYTES: return op_string(m, 4);
    case OP_BINUNICODE8:
    case OP_BINBYTES8:
    case OP_BYTEARRAY8: return op_string(m, 8);
    case OP_EMPTY_LIST:
    case OP_EMPTY_TUPLE:
    case OP_EMPTY_SET: return push(m, cJSON_CreateArray());
    case OP_EMPTY_DICT: return push(m, cJSON_CreateObject());
    case OP_APPEND:
        if (m->n < 2 || !m->stack[m->n - 1] || !cJSON_IsArray(m->stack[m->n - 2]))
            return fail(m, -EBADMSG, "APPEND without a list and an item on the stack");
        return fill(m, m->stack[m->n - 2], m->n - 1, 0);
    case OP_SETITEM:
        if (m->n < 3 || !m->stack[m->n - 1] || !m->stack[m->n - 2] || !cJSON_IsObject(m->stack[m->n - 3]))
            return fail(m, -EBADMSG, "SETITEM without a dict, a key and a value on the stack");
        return fill(m, m->stack[m->n - 3], m->n - 2, 1);
    case OP_APPENDS:
    case OP_ADDITEMS:
    case OP_SETITEMS:
        if ((mk = last_mark(m, &rc)) < 0)
            return rc;
        if (mk == 0 || !m->stack[mk - 1] ||
            !(m->op == OP_SETITEMS ? cJSON_IsObject(m->stack[mk - 1]) : cJSON_IsArray(m->stack[mk - 1])))
            return fail(m, -EBADMSG, "%s without a %s below its MARK", hdx_pickle_opcode_name(m->op),
                        m->op == OP_SETITEMS ? "dict" : "list");
        rc = fill(m, m->stack[mk - 1], (size_t)mk + 1, m->op == OP_SETITEMS);
        m->n = (size_t)mk; /* the mark */
        return rc;
    case OP_LIST:
    case OP_TUPLE:
    case OP_FROZENSET:
    case OP_DICT:
        if ((mk = last_mark(m, &rc)) < 0)
            return rc;
        if (!(c = m->op == OP_DICT ? cJSON_CreateObject() : cJSON_CreateArray()))
            return -ENOMEM;
        rc = fill(m, c, (size_t)mk + 1, m->op == OP_DICT);
        m->n = (size_t)mk;
        if (rc) {
            cJSON_Delete(c);
            return rc;
        }
        return push(m, c);
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
        size_t k = (size_t)(m->op - OP_TUPLE1 + 1);
        if (m->n < k)
            return fail(m, -EBADMSG, "%s needs %zu items on the stack", hdx_pickle_opcode_name(m->op), k);
        for (size_t i = m->n - k; i < m->n; i++)
            if (!m->stack[i])
                return fail(m, -EBADMSG, "%s finds a MARK among its items", hdx_pickle_opcode_name(m->op));
        if (!(c = cJSON_CreateArray()))
            return -ENOMEM;
        if ((rc = fill(m, c, m->n - k, 0))) {
            cJSON_Delete(c);
            return rc;
        }
        return push(m, c);
    }
    case OP_BINPUT: return (p = take(m, 1, &rc)) ? memo_put(m, *p) : rc;
    case OP_LONG_BINPUT: return (p = take(m, 4, &rc)) ? memo_put(m, le(p, 4)) : rc;
    case OP_MEMOIZE: return memo_put(m, m->n_memo);
    case OP_BINGET: return (p = take(m, 1, &rc)) ? memo_get(m, *p) : rc;
    case OP_LONG_BINGET: return (p = take(m, 4, &rc)) ? memo_get(m, le(p, 4)) : rc;
    case OP_INT:
    case OP_LONG:
    case OP_FLOAT:
    case OP_STRING:
    case OP_UNICODE:
    case OP_PUT:
    case OP_GET:
        return fail(m, -EBADMSG, "%s (0x%02x) is a text opcode of pickle protocols 0 and 1, which this reader does "
                                 "not read (Flight Recorder dumps are protocol 2 or later)",
                    hdx_pickle_opcode_name(m->op), m->op);
    default:
        return fail(m, -EBADMSG, "byte 0x%02x is no pickle opcode: not a pickle, or a damaged one", m->op);
    }
}

int hdx_pickle_read(const unsigned char *data, size_t len, cJSON **out, hdx_pickle_error *e)
{
    *out = NULL;
    memset(e, 0, sizeof *e);
    e->opcode = -1;
    uint64_t budget = (uint64_t)len * HDX_PICKLE_COST_PER_BYTE + HDX_PICKLE_COST_BASE;
    vm m = {.d = data, .len = data ? len : 0, .e = e, .budget = budget < HDX_PICKLE_COST_MAX ? budget : HDX_PICKLE_COST_MAX};
    int rc = (m.kept = cJSON_CreateArray()) ? 0 : -ENOMEM;
    if (!rc && (m.len < 2 || data[0] != OP_PROTO)) {
        m.op = m.len ? data[0] : -1;
        rc = fail(&m, -EBADMSG, "no PROTO opcode first: not a pickle of protocol 2 or later");
    }
    while (!rc)
        rc = step(&m);
    if (rc == 1) {
        rc = 0;
        m.op_at = m.at - 1;
        if (m.n != 1 || !m.stack[0])
            rc = fail(&m, -EBADMSG, "STOP with %zu items on the stack: a pickle leaves one", m.n);
        else {
            *out = m.stack[0];
            m.n = 0;
        }
    }
    for (size_t i = 0; i < m.n; i++)
        cJSON_Delete(m.stack[i]);
    if (rc == -ENOMEM)
        snprintf(e->what, sizeof e->what, "out of memory");
    free(m.stack);
    free(m.memo);
    cJSON_Delete(m.kept);
    return rc;
}
