/*
 * The verdict in words: the renderer that turns what the classifier found (its
 * finding and facts, docs/design.md "Findings") into the sentences a person
 * reads in the report. The classifier decides; this only words. Part of the
 * report stage (report.h).
 */
#ifndef HDX_WORDS_H
#define HDX_WORDS_H

#include "classify/classify.h"
#include "model/evidence.h"

/*
 * The summary (one sentence for a person) and remedy (what to do) of v, from its
 * finding and facts, with the processes and threads they name read from ev (the
 * evidence v was classified from). *summary and *remedy are heap strings the caller
 * frees; *remedy is NULL when the finding calls for none, and both are NULL for a
 * verdict that names no finding (HDX_FIND_NONE: never classified). A finding whose
 * facts are too few for its words (v not classified from ev) gets a sentence that
 * says so. Returns 0, or -ENOMEM (both then NULL).
 */
int hdx_verdict_words(const hdx_evidence *ev, const hdx_verdict *v, char **summary, char **remedy);

#endif
