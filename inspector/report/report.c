/* The report: hangdx.report/2 JSON (and /1, on request) and the short text form. */
#include "report/report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hangdx/fnv.h"
#include "hangdx/report.h"
#include "classify/groups.h"
#include "model/jsonout.h"
#include "model/outfile.h"
#include "model/syscalls.h"
#include "model/evidence_json.h"
#include "model/index.h"
#include "model/util.h"
#include "classify/waitsfor.h"
#include "classify/classify.h"
#include "report/export.h"
#include "report/rows.h"
#include "report/tree.h"
#include "report/words.h"

/* Most frames a group's stack or a text report shows per thread. */
#define TEXT_FRAMES_MAX 24

/* Lock i's judgement: the verdict's, else judged now (a verdict made without the locks). */
static const hdx_lock_judgement *judged(const hdx_evidence *ev, const hdx_verdict *v, size_t i,
                                        hdx_lock_judgement *tmp)
{
    if (v && v->locks && i < v->n_locks)
        return &v->locks[i];
    hdx_lock_judge(ev, &ev->locks[i], tmp);
    return tmp;
}

/* Verdict note i, or NULL when there is none or ev says it already: a report analyzed again
 * brings the verdict's notes back among the evidence's, and the classifier says them again. */
static const char *verdict_note(const hdx_evidence *ev, const hdx_verdict *v, size_t i)
{
    if (!v || i >= v->n_notes)
        return NULL;
    for (size_t k = 0; k < ev->n_notes; k++)
        if (!strcmp(ev->notes[k], v->notes[i]))
            return NULL;
    return v->notes[i];
}

/* What the job logs alone would say when the stacks decided (v->logs_alone, worded), as a heap
 * string the caller frees; NULL when v has no such verdict, ev says it already (a report analyzed
 * again, as verdict_note) or memory ran out. */
static char *logs_alone_note(const hdx_evidence *ev, const hdx_verdict *v)
{
    char *summary = NULL, *remedy = NULL, *note = NULL;
    if (v && v->logs_alone && !hdx_verdict_words(ev, v->logs_alone, &summary, &remedy) && summary &&
        asprintf(&note, "the job logs alone would say %s: %s", hdx_class_name(v->logs_alone->cls), summary) < 0)
        note = NULL;
    for (size_t k = 0; note && k < ev->n_notes; k++)
        if (!strcmp(ev->notes[k], note)) {
            free(note);
            note = NULL;
        }
    free(summary);
    free(remedy);
    return note;
}

/* Add to notes what the lock judgements tell a person (hdx_lock_judgement_note). */
static void lock_notes_json(cJSON *notes, const hdx_evidence *ev, const hdx_verdict *v)
{
    for (size_t i = 0; notes && i < ev->n_locks; i++) {
        hdx_lock_judgement tmp;
        char note[1024];
        if (hdx_lock_judgement_note(&ev->locks[i], judged(ev, v, i, &tmp), note, sizeof note))
            cJSON_AddItemToArray(notes, cJSON_CreateString(note));
    }
}

static cJSON *int_array(const int *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static const char *thread_syscall(const hdx_thread *t)
{
    if (t->syscall == HDX_SYSCALL_RUNNING)
        return "running";
    return t->syscall >= 0 ? hdx_syscall_name(t->syscall) : NULL;
}

static const char *const confidence_names[] = {"low", "medium", "high"};

/* The report; its "processes" array stays empty unless with_procs (hdx_report_write
 * prints them one by one, so that a job of thousands of ranks is never one tree). */
/* At most this many ranks in one rank's "waits_for" (with "waits_for_count" the whole number). */
#define MAX_WAITS_FOR_JSON 1024

/* The verdict's process group as {"name", "role", "ranks"}, or null. */
static cJSON *verdict_group_json(const hdx_evidence *ev, const hdx_verdict *v)
{
    const hdx_pgroup *g = hdx_evidence_find_pgroup(ev, v->group);
    if (!g)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddItemToObject(o, "name", hdx_json_str(g->name));
    cJSON_AddItemToObject(o, "desc", hdx_json_str(g->desc));
    cJSON_AddItemToObject(o, "role", hdx_json_str(g->role));
    cJSON_AddItemToObject(o, "ranks", int_array(g->ranks, g->n_ranks));
    cJSON_AddBoolToObject(o, "default", g->is_default);
    return o;
}

/* One rank's node of the waits-for graph (a node of missing ranks: its range, rank..last): what
 * it waits in, and for whom. */
static cJSON *wait_json(const hdx_waitsfor *g, const hdx_wf_rank *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "rank", r->rank);
    cJSON_AddNumberToObject(o, "last", r->last);
    cJSON_AddStringToObject(o, "kind", hdx_wf_kind_name(r->kind));
    cJSON_AddItemToObject(o, "op", hdx_json_str(r->op));
    cJSON_AddItemToObject(o, "group", hdx_json_str(r->pgroup >= 0 ? g->ev->pgroups[r->pgroup].name : NULL));
    cJSON *to = cJSON_AddArrayToObject(o, "waits_for"), *mis = cJSON_AddArrayToObject(o, "mismatch");
    size_t n = 0;
    if (r->call >= 0) {
        const hdx_wf_call *c = &g->calls[r->call];
        for (size_t k = 0; k < hdx_wf_call_nodes(c) && n < MAX_WAITS_FOR_JSON; k++) {
            const hdx_wf_rank *b = hdx_wf_call_node(g, c, k);
            for (long long m = b->rank; m <= b->last && n < MAX_WAITS_FOR_JSON; m++, n++)
                cJSON_AddItemToArray(to, cJSON_CreateNumber((double)m));
            if (b->kind == HDX_WF_COLLECTIVE && b->pgroup == c->pgroup && c->kind == HDX_WF_COLLECTIVE)
                cJSON_AddItemToArray(mis, cJSON_CreateNumber(b->rank));
        }
        n = c->n_absent_ranks;
    }
    for (size_t k = 0; k < r->n_ops; k++)
        if (!r->ops[k].matched && r->ops[k].peer != HDX_UNKNOWN && ++n)
            cJSON_AddItemToArray(to, cJSON_CreateNumber(r->ops[k].peer));
    if (r->kind == HDX_WF_BUILD_LOCK && r->lock_holder != HDX_UNKNOWN && ++n)
        cJSON_AddItemToArray(to, cJSON_CreateNumber(r->lock_holder));
    cJSON_AddNumberToObject(o, "waits_for_count", (double)n);
    if (r->n_ops) {
        cJSON *ops = cJSON_AddArrayToObject(o, "p2p");
        for (size_t k = 0; ops && k < r->n_ops; k++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "op", r->ops[k].send ? "send" : "recv");
            cJSON_AddItemToObject(x, "peer", r->ops[k].peer >= 0 ? cJSON_CreateNumber(r->ops[k].peer) : cJSON_CreateNull());
            cJSON_AddItemToObject(x, "tag", r->ops[k].tag >= 0 ? cJSON_CreateNumber(r->ops[k].tag) : cJSON_CreateNull());
            cJSON_AddBoolToObject(x, "matched", r->ops[k].matched);
            cJSON_AddItemToArray(ops, x);
        }
    }
    cJSON_AddItemToObject(o, "state", r->culprit ? cJSON_CreateString(hdx_wf_state_name(r->state)) : cJSON_CreateNull());
    cJSON_AddBoolToObject(o, "culprit", r->culprit);
    cJSON_AddItemToObject(o, "depth", r->depth >= 0 ? cJSON_CreateNumber(r->depth) : cJSON_CreateNull());
    return o;
}

static cJSON *waits_for_json(const hdx_waitsfor *g)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && g && i < g->n_ranks; i++)
        if (g->ranks[i].kind != HDX_WF_NONE || g->ranks[i].culprit)
            cJSON_AddItemToArray(a, wait_json(g, &g->ranks[i]));
    return a;
}

/* The /2 form of the graph (docs/formats.md "Reports"): the nodes of the waiting and culprit
 * ranks as columns (a node of missing ranks one row, its range rank..last), each call with the
 * members it waits for (ranges), the point-to-point operations and the build-lock waits. g
 * NULL: the same, empty. */
static cJSON *graph_json(const hdx_waitsfor *g)
{
    cJSON *o = cJSON_CreateObject(), *nodes = cJSON_AddObjectToObject(o, "ranks");
    cJSON *rank = cJSON_AddArrayToObject(nodes, "rank"), *last = cJSON_AddArrayToObject(nodes, "last"), *kind = cJSON_AddArrayToObject(nodes, "kind"),
          *op = cJSON_AddArrayToObject(nodes, "op"), *group = cJSON_AddArrayToObject(nodes, "group"),
          *call = cJSON_AddArrayToObject(nodes, "call"), *culprit = cJSON_AddArrayToObject(nodes, "culprit"),
          *state = cJSON_AddArrayToObject(nodes, "state"), *depth = cJSON_AddArrayToObject(nodes, "depth");
    cJSON *calls = cJSON_AddArrayToObject(o, "calls"), *p2p = cJSON_AddArrayToObject(o, "p2p"),
          *holders = cJSON_AddArrayToObject(o, "lock_holders");
    if (!depth || !holders) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; g && i < g->n_ranks; i++) {
        const hdx_wf_rank *r = &g->ranks[i];
        if (r->kind == HDX_WF_NONE && !r->culprit)
            continue;
        cJSON_AddItemToArray(rank, cJSON_CreateNumber(r->rank));
        cJSON_AddItemToArray(last, cJSON_CreateNumber(r->last));
        cJSON_AddItemToArray(kind, cJSON_CreateString(hdx_wf_kind_name(r->kind)));
        cJSON_AddItemToArray(op, hdx_json_str(r->op));
        cJSON_AddItemToArray(group, hdx_json_str(r->pgroup >= 0 ? g->ev->pgroups[r->pgroup].name : NULL));
        cJSON_AddItemToArray(call, hdx_json_int(r->call));
        cJSON_AddItemToArray(culprit, cJSON_CreateBool(r->culprit));
        cJSON_AddItemToArray(state, r->culprit ? cJSON_CreateString(hdx_wf_state_name(r->state)) : cJSON_CreateNull());
        cJSON_AddItemToArray(depth, hdx_json_int(r->depth));
        for (size_t k = 0; k < r->n_ops; k++) {
            cJSON *x = cJSON_CreateArray();
            cJSON_AddItemToArray(x, cJSON_CreateNumber(r->rank));
            cJSON_AddItemToArray(x, cJSON_CreateString(r->ops[k].send ? "send" : "recv"));
            cJSON_AddItemToArray(x, hdx_json_int(r->ops[k].peer));
            cJSON_AddItemToArray(x, hdx_json_int(r->ops[k].tag));
            cJSON_AddItemToArray(x, cJSON_CreateBool(r->ops[k].matched));
            cJSON_AddItemToArray(p2p, x);
        }
        if (r->kind == HDX_WF_BUILD_LOCK && r->lock_holder != HDX_UNKNOWN) {
            const int pair[2] = {r->rank, r->lock_holder};
            cJSON_AddItemToArray(holders, cJSON_CreateIntArray(pair, 2));
        }
    }
    for (size_t i = 0; g && i < g->n_calls; i++) {
        const hdx_wf_call *c = &g->calls[i];
        cJSON *x = cJSON_CreateObject(), *absent = cJSON_CreateArray();
        if (!x || !absent) {
            cJSON_Delete(absent);
            cJSON_Delete(x);
            cJSON_Delete(o);
            return NULL;
        }
        for (size_t k = 0; k < c->n_absent; k++) { /* ranges already, as hdx_json_ranges writes them */
            const int pair[2] = {c->absent[k].lo, c->absent[k].hi};
            cJSON_AddItemToArray(absent, cJSON_CreateIntArray(pair, 2));
        }
        cJSON_AddStringToObject(x, "kind", hdx_wf_kind_name(c->kind));
        cJSON_AddItemToObject(x, "op", hdx_json_str(c->op));
        cJSON_AddItemToObject(x, "group", hdx_json_str(c->pgroup >= 0 ? g->ev->pgroups[c->pgroup].name : NULL));
        cJSON_AddItemToObject(x, "seq", hdx_json_int(c->seq));
        cJSON_AddNumberToObject(x, "in", (double)c->n_in);
        cJSON_AddItemToObject(x, "absent", absent);
        cJSON_AddNumberToObject(x, "mismatch", (double)c->n_mismatch);
        cJSON_AddItemToArray(calls, x);
    }
    return o;
}

/* The stack groups (groups.h). st NULL: /1's, each with its pids and its stack as frame
 * objects; st given: /2's, ranks as ranges, the stack its class in st and diverges_at an
 * index in it, no pids (the "ranks" table names each process's class). */
static cJSON *groups_json(const hdx_evidence *ev, hdx_stack_table *st)
{
    cJSON *groups = cJSON_CreateArray();
    hdx_group *g = NULL;
    size_t ng = 0;
    if (groups && hdx_groups_make(ev, &g, &ng) == 0) {
        for (size_t i = 0; i < ng; i++) {
            cJSON *o = cJSON_CreateObject();
            const hdx_thread *key = g[i].key;
            if (st) {
                cJSON_AddItemToObject(o, "ranks", hdx_json_ranges(g[i].ranks, g[i].n_ranks, 1));
            } else {
                char ranks[256];
                hdx_format_ranges(g[i].ranks, g[i].n_ranks, ranks, sizeof ranks);
                cJSON_AddItemToObject(o, "ranks", g[i].n_ranks ? cJSON_CreateString(ranks) : cJSON_CreateNull());
                cJSON_AddItemToObject(o, "pids", int_array(g[i].pids, g[i].n_pids));
            }
            cJSON_AddNumberToObject(o, "count", (double)g[i].n_pids);
            cJSON_AddItemToObject(o, "wait", hdx_json_str(key->wait));
            if (st) {
                cJSON_AddItemToObject(o, "diverges_at", hdx_json_int(g[i].diverges_at));
                cJSON_AddItemToObject(o, "stack", hdx_json_int(hdx_stack_table_class(st, key, HDX_UNKNOWN, 0)));
            } else {
                cJSON_AddItemToObject(o, "diverges_at", g[i].diverges_at >= 0
                                                            ? hdx_json_frame(&key->frames[g[i].diverges_at])
                                                            : cJSON_CreateNull());
                cJSON_AddItemToObject(o, "stack", hdx_json_frames(key->frames, key->n_frames));
            }
            cJSON_AddItemToArray(groups, o);
        }
    }
    hdx_groups_free(g, ng);
    return groups;
}

/* The verdict's facts as one object: a number, a string or an array of ints each. */
static cJSON *facts_json(const hdx_verdict *v)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < v->n_facts; i++) {
        const hdx_fact *f = &v->facts[i];
        cJSON_AddItemToObject(o, f->name, f->kind == HDX_FACT_NUM    ? cJSON_CreateNumber((double)f->num)
                                          : f->kind == HDX_FACT_TEXT ? hdx_json_str(f->text)
                                                                     : int_array(f->ints, f->n_ints));
    }
    return o;
}

/* Each host once, in the order met, and in host_ix[i] (when not NULL) the index of process i's
 * host among them (-1: none). NULL on ENOMEM. */
static cJSON *hosts_json(const hdx_evidence *ev, int *host_ix)
{
    cJSON *hosts = cJSON_CreateArray();
    /* The hosts seen, by the hash of their names (16 384 hosts compared pairwise took 1.5 s);
     * a host's processes usually come together, so the previous process's host is checked
     * first. */
    const char **seen = malloc((ev->n_procs ? ev->n_procs : 1) * sizeof *seen);
    size_t n_seen = 0;
    hdx_index idx = {0};
    if (!seen || !hosts || hdx_index_reserve(&idx, ev->n_procs) < 0) {
        free(seen);
        cJSON_Delete(hosts);
        return NULL;
    }
    long last = -1; /* the previous process's host */
    for (size_t i = 0; i < ev->n_procs; i++) {
        const char *h = ev->procs[i].host;
        long at = -1;
        if (h && last >= 0 && !strcmp(seen[last], h)) {
            at = last;
        } else if (h) {
            uint64_t hash = hdx_fnv1a(h, strlen(h), HDX_FNV1A_OFFSET_BASIS);
            size_t cur = 0, j;
            while (at < 0 && (j = hdx_index_find(&idx, hash, &cur)) != HDX_INDEX_NONE)
                if (!strcmp(seen[j], h))
                    at = (long)j;
            if (at < 0) { /* reserved: the insert cannot fail */
                hdx_index_insert(&idx, hash, n_seen);
                seen[n_seen] = h;
                at = (long)n_seen++;
                cJSON_AddItemToArray(hosts, cJSON_CreateString(h));
            }
        }
        last = at;
        if (host_ix)
            host_ix[i] = (int)at;
    }
    free(seen);
    hdx_index_free(&idx);
    if (!cJSON_GetArraySize(hosts) && ev->host)
        cJSON_AddItemToArray(hosts, cJSON_CreateString(ev->host));
    return hosts;
}

cJSON *hdx_report_verdict_json(const hdx_evidence *ev, const hdx_verdict *v)
{
    char *summary, *remedy;
    if (hdx_verdict_words(ev, v, &summary, &remedy))
        return NULL;
    cJSON *vo = cJSON_CreateObject();
    if (!vo) {
        free(summary);
        free(remedy);
        return NULL;
    }
    cJSON_AddStringToObject(vo, "class", hdx_class_name(v->cls));
    cJSON_AddStringToObject(vo, "finding", hdx_finding_name(v->finding));
    cJSON_AddItemToObject(vo, "facts", facts_json(v));
    cJSON_AddItemToObject(vo, "summary", hdx_json_str(summary));
    cJSON_AddItemToObject(vo, "culprit_ranks", int_array(v->culprit_ranks, v->n_culprit_ranks));
    cJSON_AddItemToObject(vo, "culprit_pids", int_array(v->culprit_pids, v->n_culprit_pids));
    cJSON_AddItemToObject(vo, "missing_ranks", int_array(v->missing_ranks, v->n_missing_ranks));
    cJSON_AddItemToObject(vo, "missing_count", v->missing_count > 0 ? cJSON_CreateNumber(v->missing_count)
                                               : v->n_missing_ranks ? cJSON_CreateNumber((double)v->n_missing_ranks)
                                                                    : cJSON_CreateNull());
    cJSON_AddItemToObject(vo, "remedy", hdx_json_str(remedy));
    free(summary);
    free(remedy);
    cJSON_AddStringToObject(vo, "confidence", confidence_names[v->confidence]);
    cJSON_AddBoolToObject(vo, "culprit_working", v->culprit_working);
    cJSON_AddItemToObject(vo, "group", verdict_group_json(ev, v));
    return vo;
}

/*
 * The report's object. st NULL: hangdx.report/1, its "processes" empty unless with_procs
 * (hdx_report_write prints them one by one, so that a job of thousands of ranks is never one
 * tree). st given: the head of hangdx.report/2, whose "groups" name their classes in st and
 * whose "processes", the last key, stays empty (report2_write prints them, then the tables);
 * host_ix (ev->n_procs entries) gets each process's index in "hosts".
 */
static cJSON *report_json(const hdx_evidence *ev, const hdx_verdict *v, int with_procs, hdx_stack_table *st,
                          int *host_ix)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    cJSON_AddStringToObject(r, "schema", st ? HDX_REPORT_SCHEMA : HDX_REPORT_SCHEMA_V1);
    cJSON *hosts = hosts_json(ev, host_ix);
    if (!hosts) {
        cJSON_Delete(r);
        return NULL;
    }
    cJSON_AddItemToObject(r, "hosts", hosts);
    cJSON_AddItemToObject(r, "taken_at", hdx_json_time(ev->taken_ns, 0));
    if (st) { /* what analyze of the report judges with, as a snapshot gives them */
        cJSON_AddNumberToObject(r, "samples", ev->samples);
        cJSON_AddNumberToObject(r, "interval_ms", ev->interval_ms);
        cJSON_AddNumberToObject(r, "build_timeout_s", (double)ev->build_timeout_s);
    }

    cJSON *vo = hdx_report_verdict_json(ev, v);
    if (!vo) {
        cJSON_Delete(r);
        return NULL;
    }
    cJSON_AddItemToObject(r, "verdict", vo);

    cJSON_AddItemToObject(r, "process_groups", hdx_json_pgroups(ev));
    cJSON_AddItemToObject(r, "waits_for", st ? graph_json(v->graph) : waits_for_json(v->graph));

    cJSON *locks = cJSON_AddArrayToObject(r, "locks");
    for (size_t i = 0; i < ev->n_locks; i++) {
        hdx_lock_judgement tmp;
        cJSON_AddItemToArray(locks, hdx_snapshot_lock_json(&ev->locks[i], judged(ev, v, i, &tmp)));
    }

    cJSON_AddItemToObject(r, "groups", groups_json(ev, st));
    if (st)
        cJSON_AddItemToObject(r, "logs", hdx_logs_json(ev));
    else
        cJSON_AddArrayToObject(r, "processes");
    for (size_t i = 0; with_procs && !st && i < ev->n_procs; i++)
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r, "processes"),
                             hdx_report_with_part(ev, &ev->procs[i], hdx_snapshot_process_json(&ev->procs[i])));
    cJSON *notes = cJSON_AddArrayToObject(r, "notes");
    for (size_t i = 0; i < ev->n_notes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(ev->notes[i]));
    for (size_t i = 0; v && i < v->n_notes; i++)
        if (verdict_note(ev, v, i))
            cJSON_AddItemToArray(notes, cJSON_CreateString(v->notes[i]));
    char *alone = logs_alone_note(ev, v);
    if (alone)
        cJSON_AddItemToArray(notes, cJSON_CreateString(alone));
    free(alone);
    lock_notes_json(notes, ev, v);
    if (st)
        cJSON_AddArrayToObject(r, "processes");
    return r;
}

cJSON *hdx_report_json(const hdx_evidence *ev, const hdx_verdict *v)
{
    return report_json(ev, v, 1, NULL, NULL);
}

/* Where the empty "processes" array of report_json(.., 0) is in its cJSON_Print text:
 * a key at depth 1 starts a line, so a string value cannot hold this. */
#define PROCS_EMPTY "\n\t\"processes\":\t[]"

/* s (cJSON_Print of an object) as the element of an array at depth 2: each line after
 * the first indented by two more tabs. 0 or -EIO. */
static int put_indented(FILE *f, const char *s)
{
    /* One write of the re-indented copy: a line at a time was ~20 % of a large report. */
    size_t len = 0, lines = 0;
    for (; s[len]; len++) /* lines are short: a plain loop beats a memchr per line */
        lines += s[len] == '\n';
    char *out = malloc(len + 2 * lines + 1), *w = out;
    if (!out) { /* the slow way, without memory */
        for (const char *nl; (nl = strchr(s, '\n')); s = nl + 1)
            if (fwrite(s, 1, (size_t)(nl - s), f) != (size_t)(nl - s) || fputs("\n\t\t", f) < 0)
                return -EIO;
        return fputs(s, f) < 0 ? -EIO : 0;
    }
    for (const char *q = s; *q; q++) {
        *w++ = *q;
        if (*q == '\n') {
            *w++ = '\t';
            *w++ = '\t';
        }
    }
    int rc = fwrite(out, 1, (size_t)(w - out), f) == (size_t)(w - out) ? 0 : -EIO;
    free(out);
    return rc;
}

/* Every process of ev as an object (/1's, with "part"; frames printed once through cache),
 * ", " between them, each indented as an element at depth 2. 0 or -errno. */
static int objects_write(FILE *f, const hdx_evidence *ev, hdx_frame_text_cache *cache)
{
    int rc = 0;
    for (size_t i = 0; !rc && i < ev->n_procs; i++) {
        cJSON *p = hdx_report_with_part(ev, &ev->procs[i], hdx_snapshot_process_json_printed(&ev->procs[i], cache));
        char *ps = p ? hdx_json_print(p, 1) : NULL;
        cJSON_Delete(p);
        if (!ps)
            rc = -ENOMEM;
        else if ((i && fputs(", ", f) < 0) || put_indented(f, ps) < 0)
            rc = -EIO;
        free(ps);
    }
    return rc;
}

/* The JSON report, byte for byte cJSON_Print(hdx_report_json(ev, v)) (through hdx_json_print), printed one
 * process at a time: the whole tree of 8192 ranks' stacks took ~5 GB. 0 or -errno. */
static int report_json_write(FILE *f, const hdx_evidence *ev, const hdx_verdict *v)
{
    cJSON *r = report_json(ev, v, 0, NULL, NULL);
    char *s = r ? hdx_json_print(r, 1) : NULL;
    cJSON_Delete(r);
    if (!s)
        return -ENOMEM;
    int rc = 0;
    char *at = strstr(s, PROCS_EMPTY);
    if (!at) { /* cannot happen: print it whole */
        free(s);
        r = hdx_report_json(ev, v);
        s = r ? hdx_json_print(r, 1) : NULL;
        cJSON_Delete(r);
        rc = !s ? -ENOMEM : fprintf(f, "%s\n", s) < 0 ? -EIO : 0;
        free(s);
        return rc;
    }
    size_t head = (size_t)(at - s) + strlen(PROCS_EMPTY) - 1; /* up to and with the '[' */
    if (fwrite(s, 1, head, f) != head)
        rc = -EIO;
    /* Frames that ranks share (loaded from snapshots) are printed once: model/evidence_json.h. */
    hdx_frame_text_cache *cache = hdx_frame_text_cache_new();
    if (!rc)
        rc = cache ? objects_write(f, ev, cache) : -ENOMEM;
    hdx_frame_text_cache_free(cache);
    if (!rc && fprintf(f, "%s\n", s + head) < 0)
        rc = -EIO;
    free(s);
    return rc;
}

/* hangdx.report/2 (docs/formats.md "Reports"): the head (verdict ... notes), then the
 * processes, each a row of values whose threads name their stack's class (report/rows.h; full:
 * an object as in /1, its threads' frames as objects, one by one), then the "ranks" table, the
 * rows' keys and the stack tables. 0 or -errno. */
static int report2_write(FILE *f, const hdx_evidence *ev, const hdx_verdict *v, int full)
{
    hdx_stack_table *st = hdx_stack_table_new();
    int *host_ix = malloc((ev->n_procs ? ev->n_procs : 1) * sizeof *host_ix);
    cJSON *head = st && host_ix ? report_json(ev, v, 0, st, host_ix) : NULL, *tail = cJSON_CreateObject();
    char *s = head ? hdx_json_print(head, 1) : NULL, *t = NULL;
    hdx_frame_text_cache *cache = full ? hdx_frame_text_cache_new() : NULL;
    int rc = s && tail && (!full || cache) ? 0 : -ENOMEM;
    cJSON *ranks = cJSON_AddObjectToObject(tail, "ranks");
    enum { PID, HOST, RANK, PART, STATE, WAIT, OP, GROUP, STACK, N_COLUMNS };
    static const char *const names[N_COLUMNS] = {"pid", "host", "rank", "part", "state", "wait", "op", "group", "stack"};
    hdx_json_array col[N_COLUMNS] = {{0}};
    cJSON *pkeys = full ? NULL : cJSON_AddArrayToObject(tail, "process_keys"),
          *tkeys = full ? NULL : cJSON_AddArrayToObject(tail, "thread_keys");
    if (!full && !tkeys)
        rc = -ENOMEM;
    char *at = s ? strstr(s, PROCS_EMPTY) : NULL;
    if (!rc && (!ranks || !at)) /* at: "processes" is the head's last key */
        rc = -ENOMEM;
    /* The rows' stack classes, made and counted in the order of the processes (full: only the
     * key threads', below). */
    for (size_t i = 0; !rc && !full && i < ev->n_procs; i++)
        rc = hdx_stack_table_count(st, &ev->procs[i]);
    size_t len = at ? (size_t)(at - s) + strlen(PROCS_EMPTY) - 1 : 0; /* up to and with the '[' */
    if (!rc && fwrite(s, 1, len, f) != len)
        rc = -EIO;
    if (!rc && !full)
        rc = hdx_report_rows_write(f, ev, st, pkeys, tkeys, 0);
    if (!rc && full)
        rc = objects_write(f, ev, cache);
    for (size_t i = 0; !rc && i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        const hdx_thread *key = hdx_key_thread(p);
        /* full: the key threads' classes only, counted here; else the class its thread was
         * counted in above. */
        long k = key ? hdx_stack_table_class(st, key, p->rank, full) : -1;
        if (key && k < 0)
            rc = -ENOMEM;
        const hdx_wf_rank *node = p->is_rank_process && v->graph ? hdx_waitsfor_rank(v->graph, p->rank) : NULL;
        if (node && node->p != p)
            node = NULL;
        const char state[2] = {p->state, 0};
        hdx_json_array_int(&col[PID], p->pid);
        hdx_json_array_int(&col[HOST], host_ix[i]);
        hdx_json_array_int(&col[RANK], p->rank);
        hdx_json_array_str(&col[PART], hdx_process_part(ev, p));
        hdx_json_array_str(&col[STATE], p->state ? state : NULL);
        hdx_json_array_str(&col[WAIT], key ? key->wait : NULL);
        hdx_json_array_str(&col[OP], key ? key->wait_op : NULL);
        hdx_json_array_str(&col[GROUP], node && node->pgroup >= 0 ? ev->pgroups[node->pgroup].name : NULL);
        hdx_json_array_int(&col[STACK], k);
    }
    for (int c = 0; c < N_COLUMNS; c++) {
        cJSON *values = hdx_json_array_end(&col[c]);
        if (!values || !cJSON_AddItemToObject(ranks, names[c], values)) {
            cJSON_Delete(values);
            rc = rc ? rc : -ENOMEM;
        }
    }
    if (!rc && (hdx_stack_table_take(st, tail, 1) < 0 || !(t = hdx_json_print(tail, 1))))
        rc = -ENOMEM;
    /* t is "{\n\t\"ranks\": ...\n}": its members follow the processes' array */
    if (!rc && fprintf(f, "%s],%s\n", full ? "" : "\n\t", t + 1) < 0)
        rc = -EIO;
    free(t);
    free(s);
    cJSON_Delete(tail);
    cJSON_Delete(head);
    hdx_frame_text_cache_free(cache);
    hdx_stack_table_free(st);
    free(host_ix);
    return rc;
}

/* hdx_put_text between prefix and suffix (plain text of ours). */
static void put_field(FILE *f, const char *prefix, const char *s, const char *suffix)
{
    fputs(prefix, f);
    hdx_put_text(f, s);
    fputs(suffix, f);
}

/* A pid or TID as text: "?" when unknown (a stack dump that names none). buf: 16 bytes. */
static const char *id_text(int id, char *buf)
{
    if (id < 0)
        return "?";
    snprintf(buf, 16, "%d", id);
    return buf;
}

/* "rank 1 pid 123" / "pid 123", with " on node3" when host is given (a multi-host job). */
static void text_who(FILE *f, int pid, int rank, const char *host)
{
    char id[16];
    if (rank >= 0)
        fprintf(f, "rank %d pid %s", rank, id_text(pid, id));
    else
        fprintf(f, "pid %s", id_text(pid, id));
    if (host)
        put_field(f, " on ", host, "");
}

static void text_frame(FILE *f, size_t i, const hdx_frame *fr)
{
    const char *mod = fr->module ? strrchr(fr->module, '/') : NULL;
    fprintf(f, "      #%-2zu ", i);
    hdx_put_text(f, fr->function ? fr->function : "??");
    if (fr->file && fr->line > 0) {
        put_field(f, " (", fr->file, "");
        fprintf(f, ":%d)", fr->line);
    }
    if (fr->kind == HDX_FRAME_NATIVE && (fr->module || fr->offset)) { /* a foreign dump may have neither */
        put_field(f, " [", mod ? mod + 1 : (fr->module ? fr->module : "?"), "");
        fprintf(f, "+0x%llx]", (unsigned long long)fr->offset);
    }
    fputc('\n', f);
    for (size_t j = 0; j < fr->n_locals; j++) {
        const hdx_local *v = &fr->locals[j];
        put_field(f, j ? ", " : "          ", v->name, "=");
        switch (v->kind) {
        case HDX_VAL_NONE: fprintf(f, "None"); break;
        case HDX_VAL_BOOL: fprintf(f, "%s", v->i ? "True" : "False"); break;
        case HDX_VAL_INT: fprintf(f, "%lld", v->i); break;
        case HDX_VAL_FLOAT: { /* as Python shows a float: 1.0, not 1 */
            char num[40];
            snprintf(num, sizeof num, "%g", v->f);
            fprintf(f, "%s%s", num, num[strspn(num, "-0123456789")] ? "" : ".0");
            break;
        }
        case HDX_VAL_STR: put_field(f, "'", v->s ? v->s : "", "'"); break;
        case HDX_VAL_OTHER: put_field(f, "<", v->s ? v->s : "?", ">"); break;
        }
        if (j + 1 == fr->n_locals)
            fputc('\n', f);
    }
}

/* "(no stack...)" for a thread without frames: why, and what /proc still tells of it. */
static void text_no_stack(FILE *f, const hdx_thread *t, const char *none)
{
    const char *why = t->stack_error == -ESRCH       ? "the thread ended while being read"
                      : t->stack_error == -ETIMEDOUT ? "it did not stop"
                      : t->stack_error == -EPERM     ? "ptrace not permitted"
                      : t->stack_error == -EBUSY     ? "another tracer holds it"
                      : t->stack_error               ? "it could not be read"
                                                     : none;
    fprintf(f, "      (no stack: %s; state %c, wchan %s", why, t->state ? t->state : '?',
            t->wchan ? t->wchan : "unknown");
    const char *sc = thread_syscall(t);
    if (sc)
        fprintf(f, ", %s%s", strcmp(sc, "running") ? "in " : "", sc);
    fprintf(f, ")\n");
}

static void text_frames(FILE *f, const hdx_frame *frames, size_t n, size_t max)
{
    for (size_t j = 0; j < n && j < max; j++)
        text_frame(f, j, &frames[j]);
    if (n > max)
        fprintf(f, "      ... %zu more frames\n", n - max);
}

int hdx_report_threads_text(FILE *f, const hdx_process *p)
{
    fprintf(f, "process %d", p->pid);
    if (p->rank >= 0)
        fprintf(f, " (rank %d)", p->rank);
    fprintf(f, ":");
    for (size_t j = 0; j < p->n_cmdline && j < 8; j++)
        put_field(f, " ", p->cmdline[j], "");
    fprintf(f, "\n  Python %s, threads stopped %lld us in all\n",
            p->python                                                  ? p->python
            : p->read_error == -EACCES || p->read_error == -EPERM ? "not readable (another user's process)"
                                                                       : "not found",
            (long long)(p->stopped_us == HDX_UNKNOWN ? 0 : p->stopped_us));
    for (size_t i = 0; i < p->n_threads; i++) {
        const hdx_thread *t = &p->threads[i];
        const char *sc = thread_syscall(t);
        char id[16];
        fprintf(f, "  thread %s ", id_text(t->tid, id));
        put_field(f, "(", t->name ? t->name : "?", ") ");
        fprintf(f, "%c%s%s%s\n", t->state ? t->state : '?', sc ? ", in " : "", sc ? sc : "",
                t->unmerged ? ", native and Python stacks not merged" : "");
        text_frames(f, t->frames, t->n_frames, SIZE_MAX);
        if (!t->n_frames)
            text_no_stack(f, t, "none was taken");
        if (t->unmerged) {
            fprintf(f, "    Python frames:\n");
            text_frames(f, t->py_frames, t->n_py_frames, SIZE_MAX);
        }
    }
    return ferror(f) ? -EIO : 0;
}

/* The culprits of v among m[0..n) (ascending) as ranges, into buf ("" when none). */
static void culprits_among(const hdx_tree *t, const hdx_verdict *v, const int *m, size_t n, char *buf, size_t size)
{
    const int *c = t->by_pid ? v->culprit_pids : v->culprit_ranks;
    size_t nc = t->by_pid ? v->n_culprit_pids : v->n_culprit_ranks, k = 0;
    int *in = malloc((nc ? nc : 1) * sizeof *in);
    for (size_t i = 0; in && i < nc; i++)
        if (bsearch(&c[i], m, n, sizeof *m, hdx_cmp_int))
            in[k++] = c[i];
    if (in)
        hdx_format_ranges(in, k, buf, size);
    else
        snprintf(buf, size, "?");
    free(in);
}

/* "[0-4,6-7] 7 ranks" and the culprit mark of branch br. */
static void text_branch_head(FILE *f, const hdx_tree *t, const hdx_verdict *v, const hdx_tree_branch *br)
{
    char ranges[256];
    hdx_format_ranges_of(br->members, br->n_members, ranges, sizeof ranges);
    fprintf(f, "[%s] %zu %s", ranges, br->n_members, hdx_tree_members_noun(t, br->n_members));
    if (br->n_culprits && br->n_culprits == br->n_members)
        fprintf(f, " (culprit)");
    else if (br->n_culprits && (br->parent >= 0 || !br->n_children)) {
        culprits_among(t, v, br->members, br->n_members, ranges, sizeof ranges);
        fprintf(f, " (culprit %s among them)", ranges);
    }
}

/* The merged stack tree (report/tree.h), each level four columns further in: a branch's head,
 * then its frames one a line, four columns further in still; a branch of one member on one line,
 * its frames joined by " > " (docs/design.md "The stack tree and the exports"). */
static void text_tree(FILE *f, const hdx_tree *t, const hdx_verdict *v)
{
    char label[512];
    fprintf(f, "\nstack tree (the key thread of each %s, outermost call first; [%s] and how many at each "
               "branch):\n",
            t->by_pid ? "process" : "rank", t->by_pid ? "pids" : "ranks");
    for (size_t b = 0; b < t->n_branches; b++) {
        const hdx_tree_branch *br = &t->branches[b];
        int in = 2 + 4 * (int)br->level;
        fprintf(f, "%*s", in, "");
        text_branch_head(f, t, v, br);
        if (br->n_members == 1 && !br->n_children) {
            for (size_t i = 0; i < br->n_frames; i++)
                put_field(f, i ? " > " : ": ", hdx_tree_frame_label(br->frames[i], label, sizeof label), "");
            fputc('\n', f);
            continue;
        }
        fputc('\n', f);
        for (size_t i = 0; i < br->n_frames; i++) {
            fprintf(f, "%*s", in + 4, "");
            put_field(f, "", hdx_tree_frame_label(br->frames[i], label, sizeof label), "\n");
        }
        if (br->n_ends && br->n_children) {
            char ranges[256];
            hdx_format_ranges_of(br->ends, br->n_ends, ranges, sizeof ranges);
            fprintf(f, "%*s[%s] %zu %s end%s here\n", in + 4, "", ranges, br->n_ends, hdx_tree_members_noun(t, br->n_ends),
                    br->n_ends == 1 ? "s" : "");
        }
    }
}

/* The process groups in a few lines whatever their number: how many of each role (or
 * plain groups) and of which sizes, then the group of the hang. */
static void text_pgroups(FILE *f, const hdx_evidence *ev, const hdx_verdict *v)
{
    fprintf(f, "\nprocess groups:");
    char *told = calloc(ev->n_pgroups, 1);
    for (size_t i = 0; told && i < ev->n_pgroups; i++) {
        if (told[i])
            continue;
        const hdx_pgroup *a = &ev->pgroups[i];
        size_t n = 0, min = a->n_ranks, max = a->n_ranks;
        for (size_t k = i; k < ev->n_pgroups; k++) {
            const hdx_pgroup *b = &ev->pgroups[k];
            if (told[k] || b->is_default != a->is_default || !!a->role != !!b->role || (a->role && strcmp(a->role, b->role)))
                continue;
            told[k] = 1;
            n++;
            min = b->n_ranks < min ? b->n_ranks : min;
            max = b->n_ranks > max ? b->n_ranks : max;
        }
        const char *what = a->is_default ? "world" : a->role ? hdx_pgroup_role_label(a->role) : "other";
        if (min == max)
            fprintf(f, "%s %zu %s (%zu rank%s%s)", i ? "," : "", n, what, min, min == 1 ? "" : "s", n > 1 ? " each" : "");
        else
            fprintf(f, "%s %zu %s (%zu to %zu ranks)", i ? "," : "", n, what, min, max);
    }
    free(told);
    fputc('\n', f);
    const hdx_pgroup *g = hdx_evidence_find_pgroup(ev, v->group);
    if (g) {
        char text[256], ranks[256];
        hdx_pgroup_text(ev, (int)(g - ev->pgroups), text, sizeof text);
        hdx_format_ranges_of(g->ranks, g->n_ranks, ranks, sizeof ranks);
        put_field(f, "  the hang is in ", text, "");
        put_field(f, " (torch's name ", g->name, "");
        fprintf(f, ", ranks %s)\n", ranks);
    }
}

int hdx_report_text(FILE *f, const hdx_evidence *ev, const hdx_verdict *v, int tree)
{
    int hosts = hdx_evidence_multi_host(ev); /* then each pid is named with its host */
    char *summary, *remedy;
    if (hdx_verdict_words(ev, v, &summary, &remedy))
        return -ENOMEM;
    fprintf(f, "verdict: %s (confidence %s)\n", hdx_class_name(v->cls), confidence_names[v->confidence]);
    if (summary)
        put_field(f, "  ", summary, "\n");
    if (v->n_culprit_ranks || v->n_culprit_pids) {
        char buf[256];
        int *tmp = malloc((v->n_culprit_ranks + 1) * sizeof *tmp);
        if (tmp && v->n_culprit_ranks) {
            memcpy(tmp, v->culprit_ranks, v->n_culprit_ranks * sizeof *tmp);
            hdx_format_ranges(tmp, v->n_culprit_ranks, buf, sizeof buf);
            long long all = hdx_verdict_num(v, "culprit_count", 0); /* past HDX_RANKS_NAMED (design.md) */
            fprintf(f, "  culprit ranks: %s", buf);
            if (all > (long long)v->n_culprit_ranks)
                fprintf(f, "%s (%lld in all)", strstr(buf, "...") ? "" : "...", all);
            fputc('\n', f);
        }
        free(tmp);
        if (v->n_culprit_pids) {
            fprintf(f, "  culprit pids:");
            for (size_t i = 0; i < v->n_culprit_pids; i++)
                fprintf(f, " %d", v->culprit_pids[i]);
            fputc('\n', f);
        }
    }
    if (remedy)
        put_field(f, "remedy: ", remedy, "\n");
    free(summary);
    free(remedy);

    if (ev->n_pgroups)
        text_pgroups(f, ev, v);

    if (ev->n_locks)
        fprintf(f, "\nlocks:\n");
    for (size_t i = 0; i < ev->n_locks; i++) {
        const hdx_lock *l = &ev->locks[i];
        hdx_lock_judgement tmp;
        const hdx_lock_judgement *j = judged(ev, v, i, &tmp);
        char when[40] = "";
        put_field(f, "  ", l->path, "");
        if (l->foreign)
            fprintf(f, " (a path in the container of mount namespace %llu, whose processes are all gone: not "
                       "found from here)", (unsigned long long)l->mnt_ns);
        else if (l->job_path)
            put_field(f, " (as the job saw it: ", l->job_path, ")");
        fprintf(f, "  %s, %s", hdx_lock_kind_name(j->kind), hdx_lock_state_name(j->state));
        if (j->deleted)
            fprintf(f, " (by the trace; the file is gone now)");
        if (j->holder_pid != HDX_UNKNOWN)
            fprintf(f, ", held by pid %d", j->holder_pid);
        if (l->has_creator) {
            fprintf(f, ", created by ");
            text_who(f, l->creator_pid, l->creator_rank, NULL);
            fprintf(f, " (%s)", j->creator_alive == 1 ? "alive" : j->creator_alive == 0 ? "gone" : "alive?");
            if (l->created_ns != HDX_UNKNOWN) {
                hdx_format_time(l->created_ns, when, sizeof when);
                fprintf(f, " at %s", when);
            }
        } else if (j->kind == HDX_LOCK_BATON) {
            fprintf(f, ", creator unknown");
            if (l->mtime_ns != HDX_UNKNOWN) {
                hdx_format_time(l->mtime_ns, when, sizeof when);
                fprintf(f, " (file written %s)", when);
            }
        }
        if (l->source && !strcmp(l->source, "well-known place") && !l->n_waiters &&
            j->holder_pid == HDX_UNKNOWN && !l->has_creator)
            fprintf(f, " [found in a build directory near the processes (cwd, script directory, "
                       "torch_extensions); none of them is known to use it]");
        else if (l->source)
            fprintf(f, " [found by %s]", l->source);
        fputc('\n', f);
        for (size_t j = 0; j < l->n_waiters; j++) {
            fprintf(f, "    waiter: ");
            text_who(f, l->waiters[j].pid, l->waiters[j].rank, hosts ? l->waiters[j].host : NULL);
            if (l->waiters[j].how)
                put_field(f, ", ", l->waiters[j].how, "");
            if (l->waiters[j].since_ns != HDX_UNKNOWN) {
                hdx_format_time(l->waiters[j].since_ns, when, sizeof when);
                fprintf(f, ", since %s", when);
            }
            fputc('\n', f);
        }
    }

    if (tree) {
        hdx_tree t;
        if (hdx_tree_build(ev, v, &t) < 0) {
            hdx_tree_free(&t);
            return -ENOMEM;
        }
        if (tree == 1 ? t.n_branches > 0
                      : t.n_branches && !t.by_pid && t.branches[0].n_members > HDX_TREE_AUTO_RANKS)
            text_tree(f, &t, v);
        hdx_tree_free(&t);
    }

    fprintf(f, "\nprocesses:\n");
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        fprintf(f, "  ");
        text_who(f, p->pid, p->rank, hosts ? p->host : NULL);
        fprintf(f, "  %c  cpu %.0f ms%s", p->state ? p->state : '?', p->cpu_ms,
                p->progressing == 1 ? " (progressing)" : p->progressing == 0 ? " (no progress)" : "");
        if (p->stopped_us != HDX_UNKNOWN) /* not its state: how long hangdx kept its threads stopped */
            fprintf(f, "  hangdx held it %lld us", (long long)p->stopped_us);
        if (p->alive == 0)
            fprintf(f, "  gone");
        else if (p->frozen == 1)
            fprintf(f, "  frozen (cgroup freezer)");
        if (p->set_aside)
            fprintf(f, "  (another job: not judged)");
        else if (p->rank >= 0 && !p->is_rank_process)
            fprintf(f, "  (%s of rank %d, not the rank)", hdx_process_part(ev, p), p->rank);
        fprintf(f, "  ");
        for (size_t j = 0; j < p->n_cmdline && j < 6; j++)
            put_field(f, j ? " " : "", p->cmdline[j], "");
        if (p->n_cmdline > 6)
            fprintf(f, " ...");
        fputc('\n', f);
        /* No stack of it could be read (another user's, another tracer's): its threads as /proc shows them. */
        size_t with_frames = 0;
        for (size_t j = 0; j < p->n_threads; j++)
            with_frames += p->threads[j].n_frames > 0;
        for (size_t j = 0; !with_frames && j < p->n_threads && j < 32; j++) {
            const hdx_thread *t = &p->threads[j];
            const char *sc = thread_syscall(t);
            char id[16];
            fprintf(f, "    thread %s ", id_text(t->tid, id));
            put_field(f, "(", t->name ? t->name : "?", ") ");
            fprintf(f, "%c, wchan %s%s%s\n", t->state ? t->state : '?', t->wchan ? t->wchan : "unknown", sc ? ", " : "",
                    sc ? sc : "");
        }
        if (!with_frames && p->n_threads > 32)
            fprintf(f, "    ... %zu more threads\n", p->n_threads - 32);
    }

    hdx_group *g = NULL;
    size_t ng = 0;
    if (hdx_groups_make(ev, &g, &ng) == 0 && ng) {
        fprintf(f, "\nstacks, grouped (the thread that waits, else the main thread):\n");
        for (size_t i = 0; i < ng; i++) {
            char ranks[256] = "";
            hdx_format_ranges(g[i].ranks, g[i].n_ranks, ranks, sizeof ranks);
            fprintf(f, "  %zu process%s", g[i].n_pids, g[i].n_pids == 1 ? "" : "es");
            if (g[i].n_ranks)
                fprintf(f, ", ranks %s", ranks);
            fprintf(f, ", pids");
            char id[16];
            for (size_t j = 0; j < g[i].n_pids && j < 8; j++)
                fprintf(f, " %s", id_text(g[i].pids[j], id));
            const hdx_thread *t = g[i].key;
            fprintf(f, "; thread %s ", id_text(t->tid, id));
            put_field(f, "(", t->name ? t->name : "?", ")");
            fprintf(f, "%s%s\n", t->wait ? " " : ", ", t->wait ? t->wait : "no known wait");
            if (g[i].diverges_at >= 0) {
                fprintf(f, "      leaves the largest group at #%ld ", g[i].diverges_at);
                put_field(f, "", t->frames[g[i].diverges_at].function ? t->frames[g[i].diverges_at].function : "??",
                          "\n");
            }
            text_frames(f, t->frames, t->n_frames, TEXT_FRAMES_MAX);
            if (!t->n_frames)
                text_no_stack(f, t, "none was taken");
            if (t->unmerged) {
                fprintf(f, "      Python frames (not merged: the native eval frames and the Python activations differ in number):\n");
                text_frames(f, t->py_frames, t->n_py_frames, TEXT_FRAMES_MAX);
            }
        }
    }
    hdx_groups_free(g, ng);

    char note[1024], *alone = logs_alone_note(ev, v);
    int more_notes = alone != NULL;
    for (size_t i = 0; i < ev->n_locks && !more_notes; i++) {
        hdx_lock_judgement tmp;
        more_notes = hdx_lock_judgement_note(&ev->locks[i], judged(ev, v, i, &tmp), note, sizeof note);
    }
    for (size_t i = 0; v && i < v->n_notes && !more_notes; i++)
        more_notes = verdict_note(ev, v, i) != NULL;
    if (ev->n_notes || more_notes) {
        fprintf(f, "\nnotes:\n");
        for (size_t i = 0; i < ev->n_notes; i++)
            put_field(f, "  - ", ev->notes[i], "\n");
        for (size_t i = 0; v && i < v->n_notes; i++)
            if (verdict_note(ev, v, i))
                put_field(f, "  - ", v->notes[i], "\n");
        if (alone)
            put_field(f, "  - ", alone, "\n");
        for (size_t i = 0; i < ev->n_locks; i++) {
            hdx_lock_judgement tmp;
            if (hdx_lock_judgement_note(&ev->locks[i], judged(ev, v, i, &tmp), note, sizeof note))
                put_field(f, "  - ", note, "\n");
        }
    }
    free(alone);
    return ferror(f) ? -EIO : 0;
}

int hdx_report_format_parse(const char *s, enum hdx_report_format *out)
{
    static const char *const names[] = {
        [HDX_REPORT_TEXT] = "text",           [HDX_REPORT_JSON] = "json", [HDX_REPORT_SPEEDSCOPE] = "speedscope",
        [HDX_REPORT_COLLAPSED] = "collapsed", [HDX_REPORT_DOT] = "dot",
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i])) {
            *out = (enum hdx_report_format)i;
            return 0;
        }
    return -EINVAL;
}

/* One of the exports of the stack tree (report/export.h). 0 or a negative errno. */
static int export_write(FILE *f, const hdx_evidence *ev, const hdx_verdict *v, enum hdx_report_format format)
{
    hdx_tree t;
    int rc = hdx_tree_build(ev, v, &t);
    if (!rc)
        rc = format == HDX_REPORT_SPEEDSCOPE ? hdx_export_speedscope(f, v, &t)
             : format == HDX_REPORT_COLLAPSED ? hdx_export_collapsed(f, &t)
                                              : hdx_export_dot(f, ev, v, &t);
    hdx_tree_free(&t);
    return rc;
}

int hdx_report_write(const hdx_evidence *ev, const hdx_verdict *v, const hdx_report_options *o,
                     const char *path)
{
    hdx_report_options text = {HDX_REPORT_TEXT, HDX_TREE_AUTO, 0, NULL};
    if (!o)
        o = &text;
    hdx_outfile out;
    int rc = hdx_outfile_open(&out, path);
    if (rc)
        return rc;
    FILE *f = out.f;
    if (o->format == HDX_REPORT_JSON && (o->flags & HDX_REPORT_V1))
        rc = report_json_write(f, ev, v);
    else if (o->format == HDX_REPORT_JSON)
        rc = report2_write(f, ev, v, (o->flags & HDX_REPORT_FULL) != 0);
    else if (o->format == HDX_REPORT_TEXT)
        rc = hdx_report_text(f, ev, v, o->tree);
    else
        rc = export_write(f, ev, v, o->format);
    return hdx_outfile_close(&out, rc);
}
