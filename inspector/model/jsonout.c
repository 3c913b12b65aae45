#include "model/jsonout.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/evidence.h"
#include "model/util.h"

/* Integers a JSON number (a double) holds exactly: 2^53. */
#define EXACT_MAX 9007199254740992.0

cJSON *hdx_json_str(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *hdx_json_int(long long v)
{
    return v == HDX_UNKNOWN ? cJSON_CreateNull() : cJSON_CreateNumber((double)v);
}

cJSON *hdx_json_bool(int v)
{
    return v == HDX_UNKNOWN ? cJSON_CreateNull() : cJSON_CreateBool(v != 0);
}

cJSON *hdx_json_char(char c)
{
    char s[2] = {c, 0};
    return c ? cJSON_CreateString(s) : cJSON_CreateNull();
}

const char *hdx_json_digits(long long v, char *buf, size_t *len)
{
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    char *d = buf + HDX_JSON_DIGITS;
    *--d = 0;
    do
        *--d = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--d = '-';
    *len = (size_t)(buf + HDX_JSON_DIGITS - 1 - d);
    return d;
}

cJSON *hdx_json_hex(uint64_t v)
{
    /* "0x%llx" by hand: a report of 131 072 ranks holds 7.9 M of them (six syscall arguments
     * a thread), and snprintf was a tenth of its writing. */
    char buf[19], *d = buf + sizeof buf;
    *--d = 0;
    do
        *--d = "0123456789abcdef"[v & 15];
    while (v >>= 4);
    *--d = 'x';
    *--d = '0';
    return cJSON_CreateString(d);
}

cJSON *hdx_json_time(int64_t ns, int nanos)
{
    if (ns == HDX_UNKNOWN)
        return cJSON_CreateNull();
    int64_t s = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        s--;
    }
    time_t t = (time_t)s;
    struct tm tm;
    char date[40], buf[64];
    if (!gmtime_r(&t, &tm) || !strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm))
        return cJSON_CreateNull();
    if (nanos)
        snprintf(buf, sizeof buf, "%s.%09lldZ", date, (long long)frac);
    else
        snprintf(buf, sizeof buf, "%sZ", date);
    return cJSON_CreateString(buf);
}

/* Python locals: ints, floats, bools, None and strings as themselves; other objects as
 * {"type": name}; an int beyond 2^53 as {"int": "digits"} and an integral, infinite or
 * NaN float as {"float": "text"}, so that they read back exactly. */
static cJSON *local_json(const hdx_local *v)
{
    cJSON *o;
    char buf[64];
    switch (v->kind) {
    case HDX_VAL_NONE: return cJSON_CreateNull();
    case HDX_VAL_BOOL: return cJSON_CreateBool(v->i != 0);
    case HDX_VAL_INT:
        if (v->i >= -EXACT_MAX && v->i <= EXACT_MAX)
            return cJSON_CreateNumber((double)v->i);
        snprintf(buf, sizeof buf, "%lld", v->i);
        o = cJSON_CreateObject();
        if (o)
            cJSON_AddStringToObject(o, "int", buf);
        return o;
    case HDX_VAL_FLOAT:
        /* cJSON prints a double so that it parses back to the same double; an integral
         * one would read back as an int, and inf/nan are not JSON. */
        if (isfinite(v->f) && v->f != floor(v->f))
            return cJSON_CreateNumber(v->f);
        snprintf(buf, sizeof buf, "%.17g", v->f);
        o = cJSON_CreateObject();
        if (o)
            cJSON_AddStringToObject(o, "float", buf);
        return o;
    case HDX_VAL_STR: return cJSON_CreateString(v->s ? v->s : "");
    case HDX_VAL_OTHER: break;
    }
    o = cJSON_CreateObject();
    if (o)
        cJSON_AddItemToObject(o, "type", hdx_json_str(v->s));
    if (o && v->pg)
        cJSON_AddStringToObject(o, "pg", v->pg);
    return o;
}

cJSON *hdx_json_pgroups(const hdx_evidence *ev)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < ev->n_pgroups; i++) {
        const hdx_pgroup *g = &ev->pgroups[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToObject(o, "name", hdx_json_str(g->name));
        cJSON_AddItemToObject(o, "desc", hdx_json_str(g->desc));
        cJSON_AddItemToObject(o, "role", hdx_json_str(g->role));
        cJSON_AddItemToObject(o, "ranks", cJSON_CreateIntArray(g->ranks, (int)g->n_ranks));
        cJSON_AddBoolToObject(o, "default", g->is_default);
    }
    return a;
}

cJSON *hdx_json_frame(const hdx_frame *f)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int native = f->kind != HDX_FRAME_PYTHON;
    cJSON_AddStringToObject(o, "kind", native ? "native" : "python");
    cJSON_AddItemToObject(o, "function", hdx_json_str(f->function));
    cJSON_AddItemToObject(o, "file", hdx_json_str(f->file));
    cJSON_AddItemToObject(o, "line", f->line > 0 ? cJSON_CreateNumber(f->line) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "module", hdx_json_str(f->module));
    cJSON_AddItemToObject(o, "offset", native || f->offset ? hdx_json_hex(f->offset) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "pc", native || f->pc ? hdx_json_hex(f->pc) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "locals", hdx_json_locals(f));
    return o;
}

cJSON *hdx_json_locals(const hdx_frame *f)
{
    if (!f->locals)
        return cJSON_CreateNull();
    cJSON *l = cJSON_CreateObject();
    for (size_t i = 0; l && i < f->n_locals; i++)
        cJSON_AddItemToObject(l, f->locals[i].name ? f->locals[i].name : "?", local_json(&f->locals[i]));
    return l;
}

cJSON *hdx_json_frames(const hdx_frame *frames, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, hdx_json_frame(&frames[i]));
    return a;
}

/* text (n bytes, valid JSON: a nested array's) as a's next value. */
static void array_add(hdx_json_array *a, const char *text, size_t n)
{
    if (a->failed || (a->failed = hdx_reserve(&a->text, &a->cap, a->len + n + 3) < 0))
        return;
    if (!a->len)
        a->text[a->len++] = '[';
    else if ((a->text[a->len++] = ',') && !a->compact)
        a->text[a->len++] = ' ';
    memcpy(a->text + a->len, text, n);
    a->len += n;
}

cJSON *hdx_json_ranges(int *vals, size_t n, int formatted)
{
    hdx_json_array a = {.compact = !formatted};
    if (n)
        qsort(vals, n, sizeof *vals, hdx_cmp_int);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && vals[j + 1] - vals[j] <= 1) /* repeats and neighbours join the range */
            j++;
        char lo[HDX_JSON_DIGITS], hi[HDX_JSON_DIGITS], pair[2 * HDX_JSON_DIGITS + 4];
        size_t nl, nh;
        const char *l = hdx_json_digits(vals[i], lo, &nl), *h = hdx_json_digits(vals[j], hi, &nh);
        size_t k = 0;
        pair[k++] = '[';
        memcpy(pair + k, l, nl);
        k += nl;
        pair[k++] = ',';
        if (formatted)
            pair[k++] = ' ';
        memcpy(pair + k, h, nh);
        k += nh;
        pair[k++] = ']';
        array_add(&a, pair, k);
        i = j + 1;
    }
    return hdx_json_array_end(&a);
}

void hdx_json_array_int(hdx_json_array *a, long long v)
{
    char buf[HDX_JSON_DIGITS];
    size_t n = 4;
    const char *d = v == HDX_UNKNOWN ? "null" : hdx_json_digits(v, buf, &n);
    array_add(a, d, n);
}

void hdx_json_array_str(hdx_json_array *a, const char *s)
{
    if (s && !a->failed && (!a->last || strcmp(s, a->last))) {
        cJSON *j = cJSON_CreateString(s);
        free(a->last);
        cJSON_free(a->last_text);
        a->last_text = j ? hdx_json_print(j, 0) : NULL;
        a->last = a->last_text ? strdup(s) : NULL;
        cJSON_Delete(j);
        a->failed = !a->last;
    }
    if (!a->failed)
        array_add(a, s ? a->last_text : "null", s ? strlen(a->last_text) : 4);
}

cJSON *hdx_json_array_end(hdx_json_array *a)
{
    cJSON *raw = NULL;
    if (!a->failed && hdx_reserve(&a->text, &a->cap, a->len + 3) == 0) {
        memcpy(a->text + a->len, a->len ? "]" : "[]", a->len ? 2 : 3);
        raw = cJSON_CreateRaw(a->text);
    }
    free(a->text);
    free(a->last);
    cJSON_free(a->last_text);
    *a = (hdx_json_array){.compact = a->compact};
    return raw;
}

/*
 * cJSON (1.7.15, Debian 12's) prints every number with "%1.15g" and reads it back with
 * sscanf to check that it round-trips: a report of 8192 ranks spent a fifth of its time
 * there (BENCHMARKS.md "Reports that scale"). Integers within ±2^53, nearly every number a
 * report holds, are printed as the same digits from here instead: each becomes a raw item of
 * its digits (kept in r->digits) for the print, and a number again after it (ints_restore).
 */
struct raw_ints {
    cJSON **items; /* the integers found */
    size_t n;
    char *digits;  /* HDX_JSON_DIGITS bytes for each: the text of those made raw */
};

/* The integers within ±2^53 of j, its siblings after it and their children into r->items.
 * 0, or -ENOMEM (those found so far stay in r). */
static int find_ints(cJSON *j, struct raw_ints *r)
{
    for (; j; j = j->next) {
        if ((j->type & 0xff) == cJSON_Number && !j->valuestring && j->valuedouble == floor(j->valuedouble) &&
            fabs(j->valuedouble) <= EXACT_MAX) {
            cJSON **slot = hdx_append((void **)&r->items, &r->n, sizeof *slot);
            if (!slot)
                return -ENOMEM;
            *slot = j;
        }
        if (j->child && find_ints(j->child, r) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Each integer of r->items a raw item of its digits, kept in r->digits: one allocation for
 * all of them (a pool per print took a 64 KiB block, whose free made malloc walk its fast bins
 * once per process). 0, or -ENOMEM (none is made raw). */
static int ints_as_raw(struct raw_ints *r)
{
    if (!r->n)
        return 0;
    if (r->n > SIZE_MAX / HDX_JSON_DIGITS || !(r->digits = malloc(r->n * HDX_JSON_DIGITS)))
        return -ENOMEM;
    for (size_t i = 0; i < r->n; i++) {
        cJSON *j = r->items[i];
        char buf[HDX_JSON_DIGITS];
        size_t n;
        const char *d = hdx_json_digits((long long)j->valuedouble, buf, &n);
        j->valuestring = memcpy(r->digits + i * HDX_JSON_DIGITS, d, n + 1);
        j->type = (j->type & ~0xff) | cJSON_Raw;
    }
    return 0;
}

/* The items made raw numbers again (those not made raw are numbers still: untouched). */
static void ints_restore(struct raw_ints *r)
{
    for (size_t i = 0; i < r->n; i++) {
        r->items[i]->type = (r->items[i]->type & ~0xff) | cJSON_Number;
        r->items[i]->valuestring = NULL;
    }
    r->n = 0;
}

/* Are the len bytes at s all ASCII (below 0x80)? */
static int ascii(const char *s, size_t len)
{
    uint64_t any = 0, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, s + i, 8);
        any |= w;
    }
    for (; i < len; i++)
        any |= (unsigned char)s[i];
    return !(any & 0x8080808080808080ULL);
}

char *hdx_json_print(const cJSON *j, int formatted)
{
    struct raw_ints r = {0};
    if (find_ints((cJSON *)j, &r) < 0 || ints_as_raw(&r) < 0) /* then cJSON prints them all */
        ints_restore(&r);
    char *s = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    ints_restore(&r); /* the tree is as the caller made it again */
    free(r.items);
    free(r.digits);
    size_t bad = 0, len = s ? strlen(s) : 0;
    uint32_t cp;
    if (ascii(s, len)) /* nearly every report: its bytes looked at 8 at a time */
        return s;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0x80) && !hdx_utf8_next(s + i, &cp))
            bad++;
    if (!bad)
        return s;
    char *out = cJSON_malloc(len + bad * 5 + 1), *w = out; /* as cJSON's own text: see jsonout.h */
    for (const char *q = s; out && *q;) {
        int n = hdx_utf8_next(q, &cp);
        if (n) {
            memcpy(w, q, (size_t)n);
            w += n;
            q += n;
        } else { /* only inside a string: cJSON writes nothing else above 0x7f */
            w += sprintf(w, "\\u%04x", (unsigned char)*q++);
        }
    }
    if (out)
        *w = 0;
    cJSON_free(s);
    return out;
}
