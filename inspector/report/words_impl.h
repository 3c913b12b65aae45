/*
 * What the renderer's files (words.c: the lock, CPU and stack findings;
 * words_dist.c: the distributed ones; words_logs.c: the log ones) share, defined
 * in words_common.c. Internal to report/.
 */
#ifndef HDX_WORDS_IMPL_H
#define HDX_WORDS_IMPL_H

#include "report/words.h"

/* The sentences being written: both heap, NULL until set. */
typedef struct hdx_words {
    char *summary;
    char *remedy;
} hdx_words;

/* Replace *dst with a formatted heap string. 0 or -ENOMEM. */
int hdx_words_set(char **dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The text of fact name, or dflt when v has none (a sentence never prints "(null)"). Borrowed. */
const char *hdx_words_text(const hdx_verdict *v, const char *name, const char *dflt);

/* "s" when n is 1, else "" (the verb of "rank 1 waits", "ranks 1-3 wait"). */
const char *hdx_words_verb_s(size_t n);

/* "" when n is 1, else "s" (the noun of "rank 1", "ranks 1-3"). */
const char *hdx_words_noun_s(size_t n);

/* The ranks of fact name as ranges ("0-3,7") into buf (size bytes), and how many there are;
 * buf "" and 0 when v has no such fact. */
size_t hdx_words_ranks(const hdx_verdict *v, const char *name, char *buf, size_t size);

/*
 * Word a finding of one family into *w: 1 when f is one of that family (w set), 0 when
 * it is not, -ENOMEM.
 */
int hdx_words_dist(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w);
int hdx_words_logs(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w);

#endif
