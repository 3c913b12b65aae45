/*
 * What the report's files share: setting a sentence, plurals and ranks as ranges
 * (words_impl.h), and how process groups, a rank's place in them and a lock's
 * judgement read (words.h).
 */
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

const char *hdx_words_text(const hdx_verdict *v, const char *name, const char *dflt)
{
    const char *t = hdx_verdict_text(v, name);
    return t ? t : dflt;
}

const char *hdx_pgroup_role_label(const char *role)
{
    static const struct {
        const char *role, *label;
    } labels[] = {{"tp", "TP"}, {"pp", "PP"}, {"dp", "DP"},      {"cp", "CP"},       {"ep", "EP"},
                  {"mp", "model-parallel"},   {"dp_cp", "DP×CP"}, {"tp_dp", "TP×DP"}, {"dp_gloo", "DP (gloo)"},
                  {"position_embedding", "position-embedding"}, {"tp_ep", "TP×EP"}, {"etp", "expert TP"},
                  {"edp", "expert DP"}, {"dp_cp_gloo", "DP×CP (gloo)"}, {"tp_dp_cp", "TP×DP×CP"},
                  {"tp_cp", "TP×CP"}, {"mp_ep", "model×expert-parallel"}, {"etp_ep", "expert TP×EP"},
                  {"edp_gloo", "expert DP (gloo)"}, {"dist_opt", "distributed-optimizer"}};
    for (size_t i = 0; role && i < sizeof labels / sizeof labels[0]; i++)
        if (!strcmp(role, labels[i].role))
            return labels[i].label;
    return role;
}

void hdx_pgroup_text(const hdx_evidence *ev, int i, char *buf, size_t size)
{
    if (i < 0 || (size_t)i >= ev->n_pgroups) {
        snprintf(buf, size, "the world group");
        return;
    }
    const hdx_pgroup *pg = &ev->pgroups[i];
    char ranks[256];
    hdx_format_ranges_of(pg->ranks, pg->n_ranks, ranks, sizeof ranks);
    if (pg->is_default)
        snprintf(buf, size, "the world group");
    else if (pg->role)
        snprintf(buf, size, "%s group %s", hdx_pgroup_role_label(pg->role), ranks);
    else if (pg->desc)
        snprintf(buf, size, "group %s (%s, ranks %s)", pg->name, pg->desc, ranks);
    else
        snprintf(buf, size, "group %s (ranks %s)", pg->name, ranks);
}

void hdx_rank_coords(const hdx_evidence *ev, int rank, char *buf, size_t size)
{
    static const char *const order[] = {"tp", "cp", "pp", "dp", "ep"};
    size_t used = 0;
    buf[0] = 0;
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++)
        for (size_t i = 0; i < ev->n_pgroups; i++) {
            const hdx_pgroup *pg = &ev->pgroups[i];
            int at;
            if (!pg->role || strcmp(pg->role, order[o]) || (at = hdx_pgroup_rank_of(pg, rank)) < 0)
                continue;
            char ranks[128];
            hdx_format_ranges_of(pg->ranks, pg->n_ranks, ranks, sizeof ranks);
            int n;
            if (!strcmp(order[o], "tp"))
                n = snprintf(buf + used, size - used, "%sTP %d of TP group %s", used ? ", " : "", at, ranks);
            else if (!strcmp(order[o], "pp"))
                n = snprintf(buf + used, size - used, "%sPP stage %d", used ? ", " : "", at);
            else
                n = snprintf(buf + used, size - used, "%s%s %d", used ? ", " : "", hdx_pgroup_role_label(order[o]), at);
            if (n < 0 || (size_t)n >= size - used)
                return;
            used += (size_t)n;
            break;
        }
}

int hdx_lock_judgement_note(const hdx_lock *l, const hdx_lock_judgement *j, char *buf, size_t size)
{
    if (!l || !j || !buf || !size)
        return 0;
    if (j->holder_from_trace)
        snprintf(buf, size,
                 "%s: holder pid %d taken from the trace (its last successful lock call before the others "
                 "waited); the job is gone, so /proc/locks could not confirm it",
                 l->path, j->holder_pid);
    else if (j->creator_unknown)
        snprintf(buf, size,
                 "%s: creator unknown: no trace (run the job under 'hangdx run' to record who creates build locks)",
                 l->path);
    else
        return 0;
    return 1;
}
