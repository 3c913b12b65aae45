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

/* How a role reads in text: "tp" → "TP", "dp_cp" → "DP×CP"; an unknown role as it is. */
const char *hdx_pgroup_role_label(const char *role);

/*
 * The process group of ev at index i as a person reads it: "TP group 4-5" (with its
 * role), "the world group", or "group 2 (ranks 2,3)". buf gets at most size bytes.
 */
void hdx_pgroup_text(const hdx_evidence *ev, int i, char *buf, size_t size);

/*
 * A rank's coordinates in the roles of the groups it belongs to:
 * "TP 1 of TP group 4-5, PP stage 1, DP 1", or "" when no group has a role.
 */
void hdx_rank_coords(const hdx_evidence *ev, int rank, char *buf, size_t size);

/*
 * The note a person needs about a judgement, into buf (size bytes): a holder
 * taken from the trace, or a stale lock whose creator no trace names. Returns
 * 1 when a note was written, 0 when there is none (buf untouched).
 */
int hdx_lock_judgement_note(const hdx_lock *l, const hdx_lock_judgement *j, char *buf, size_t size);

#endif
