/*
 * JSON lines into a buffer of the pool (pool.c): no allocation, no stdio. Strings are
 * escaped per RFC 8259; bytes that are not valid UTF-8 are written as
 * \u00XX (their Latin-1 reading) so that every line stays valid JSON.
 * Appends stop at w->soft; the bytes after it are reserved for the closing
 * brackets, so a line is always complete, at most HDX_TRACE_LINE_MAX bytes.
 */
#include "shim.h"

#include <string.h>

/* Room kept after soft: closing quote, "]", ",\"argv_truncated\":true", "}\n". */
#define HDX_W_RESERVE 40

void hdx_w_begin(struct hdx_w *w)
{
    w->len = 0;
    w->soft = sizeof w->buf - HDX_W_RESERVE;
    w->truncated = 0;
}

static void put(struct hdx_w *w, const char *s, size_t n)
{
    if (w->len + n > w->soft) {
        w->truncated = 1;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

/* Appends into the reserve (closing brackets only). */
static void put_hard(struct hdx_w *w, const char *s, size_t n)
{
    if (w->len + n <= sizeof w->buf) {
        memcpy(w->buf + w->len, s, n);
        w->len += n;
    }
}

void hdx_w_close(struct hdx_w *w, const char *s)
{
    put_hard(w, s, strlen(s));
}

void hdx_w_raw(struct hdx_w *w, const char *s)
{
    put(w, s, strlen(s));
}

void hdx_w_int(struct hdx_w *w, int64_t v)
{
    char tmp[24];
    put(w, tmp, hdx_itoa(v, tmp));
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, min = 0x10000;
    else
        return 0;
    if (k > n)
        return 0;
    unsigned cp = c & (0xff >> (k + 1));
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k;
}

void hdx_w_strn(struct hdx_w *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    /* The opening quote needs room for itself and the closing one. */
    if (w->len + 2 > w->soft) {
        w->truncated = 1;
        put_hard(w, "\"\"", 2);
        return;
    }
    w->buf[w->len++] = '"';
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        char esc[6];
        const char *unit = esc;
        size_t ul, adv = 1;
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c, ul = 2;
        } else if (c == '\n') {
            esc[0] = '\\', esc[1] = 'n', ul = 2;
        } else if (c == '\t') {
            esc[0] = '\\', esc[1] = 't', ul = 2;
        } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !(adv = utf8_len(p + i, n - i)))) {
            esc[0] = '\\', esc[1] = 'u', esc[2] = '0', esc[3] = '0';
            esc[4] = hex[c >> 4], esc[5] = hex[c & 15], ul = 6;
            adv = 1;
        } else {
            unit = s + i, ul = adv;
        }
        if (w->len + ul + 1 > w->soft) {
            w->truncated = 1;
            break;
        }
        memcpy(w->buf + w->len, unit, ul);
        w->len += ul;
        i += adv;
    }
    w->buf[w->len++] = '"'; /* room was kept above */
}

void hdx_w_str(struct hdx_w *w, const char *s)
{
    hdx_w_strn(w, s, strlen(s));
}

int hdx_w_key(struct hdx_w *w, const char *k, int comma)
{
    size_t kl = strlen(k);
    /* All or nothing, with room for a short value after it (24: any number). */
    if (w->len + kl + 4 + 24 > w->soft) {
        w->truncated = 1;
        return -1;
    }
    if (comma)
        w->buf[w->len++] = ',';
    w->buf[w->len++] = '"';
    memcpy(w->buf + w->len, k, kl);
    w->len += kl;
    w->buf[w->len++] = '"';
    w->buf[w->len++] = ':';
    return 0;
}

void hdx_w_kint(struct hdx_w *w, const char *k, int64_t v)
{
    if (hdx_w_key(w, k, 1) == 0)
        hdx_w_int(w, v);
}

void hdx_w_kstr(struct hdx_w *w, const char *k, const char *s)
{
    if (hdx_w_key(w, k, 1) != 0)
        return;
    if (s)
        hdx_w_str(w, s);
    else
        hdx_w_raw(w, "null");
}

void hdx_w_kpath(struct hdx_w *w, const char *k, const char *path)
{
    if (hdx_w_key(w, k, 1) != 0)
        return;
    size_t at = w->len;
    int was = w->truncated;
    w->truncated = 0;
    if (path && path[0] == '/')
        hdx_w_str(w, path);
    if (!path || path[0] != '/' || w->truncated) {
        /* Cut or relative, it would name another file: null, which a reader skips
         * (docs/formats.md "Traces"). */
        w->len = at;
        hdx_w_raw(w, "null");
    }
    w->truncated |= was;
}

/* ,"key":[...] of the strings that next() gives one by one (NULL: no more). */
static void kargs(struct hdx_w *w, const char *k, const char *(*next)(void *, size_t *),
                  void *it, int more)
{
    if (hdx_w_key(w, k, 1) != 0)
        return;
    int was = w->truncated; /* a cut before (the header's cwd) is no cut of argv */
    w->truncated = 0;
    put(w, "[", 1);
    const char *s;
    size_t n;
    for (size_t i = 0; (s = next(it, &n)); i++) {
        if (w->truncated || w->len + 4 > w->soft) {
            w->truncated = 1;
            break;
        }
        if (i)
            put(w, ",", 1);
        hdx_w_strn(w, s, n);
    }
    put_hard(w, "]", 1);
    if (w->truncated || more)
        put_hard(w, ",\"argv_truncated\":true", 22);
    w->truncated |= was;
}

static const char *next_vec(void *it, size_t *n)
{
    char *const **v = it;
    if (!*v || !**v)
        return NULL;
    const char *s = *(*v)++;
    *n = strlen(s);
    return s;
}

void hdx_w_kargv(struct hdx_w *w, const char *k, char *const *argv)
{
    kargs(w, k, next_vec, &argv, 0);
}

/* A cursor over NUL-separated strings. */
struct zcur {
    const char *p, *end;
};

static const char *next_z(void *it, size_t *n)
{
    struct zcur *c = it;
    if (c->p >= c->end)
        return NULL;
    const char *s = c->p, *nul = memchr(s, 0, (size_t)(c->end - s));
    *n = nul ? (size_t)(nul - s) : (size_t)(c->end - s);
    c->p = s + *n + 1;
    return s;
}

void hdx_w_kargz(struct hdx_w *w, const char *k, const char *z, size_t n, int more)
{
    struct zcur c = {z, z + n};
    kargs(w, k, next_z, &c, more);
}

void hdx_w_event(struct hdx_w *w, const char *type)
{
    hdx_w_begin(w);
    put(w, "{\"type\":\"", 9);
    hdx_w_raw(w, type);
    put(w, "\"", 1);
    hdx_w_kint(w, "t", hdx_now_ns());
    hdx_w_kint(w, "tid", hdx_gettid());
}

void hdx_w_emit(struct hdx_w *w)
{
    put_hard(w, "}\n", 2);
    hdx_trace_write(w->buf, w->len);
}
