/*
 * The words of the distributed findings (classify_dist.c) (docs/design.md "Findings").
 */
#include "report/words_impl.h"

int hdx_words_dist(const hdx_evidence *ev, const hdx_verdict *v, hdx_words *w)
{
    (void)ev;
    (void)v;
    (void)w;
    return 0;
}
