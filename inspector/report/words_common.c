/*
 * What the renderer's files share (words_impl.h): setting a sentence, plurals, and
 * ranks as ranges.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/util.h"
#include "report/words_impl.h"

int hdx_words_set(char **dst, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        return -ENOMEM;
    free(*dst);
    *dst = s;
    return 0;
}

const char *hdx_words_verb_s(size_t n) { return n == 1 ? "s" : ""; }

const char *hdx_words_noun_s(size_t n) { return n == 1 ? "" : "s"; }

size_t hdx_words_ranks(const hdx_verdict *v, const char *name, char *buf, size_t size)
{
    const hdx_fact *f = hdx_verdict_fact(v, name);
    buf[0] = 0;
    if (!f || f->kind != HDX_FACT_INTS)
        return 0;
    hdx_format_ranges_of(f->ints, f->n_ints, buf, size);
    return f->n_ints;
}

const char *hdx_words_text(const hdx_verdict *v, const char *name, const char *dflt)
{
    const char *t = hdx_verdict_text(v, name);
    return t ? t : dflt;
}
