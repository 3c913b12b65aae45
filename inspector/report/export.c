/* The exports: speedscope, folded stacks, Graphviz (report/export.h). */
#include "report/export.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "classify/groups.h"
#include "classify/waitsfor.h"
#include "hangdx/fnv.h"
#include "model/index.h"
#include "model/jsonout.h"
#include "model/util.h"
#include "report/report.h"
#include "report/words.h"

/* A frame's label; names longer than this are cut (C++ templates). */
#define LABEL_MAX 512

/* "ranks 0-4,6-7 (7 ranks)" for members m[0..n) of t, into buf. */
static void members_text(const hdx_tree *t, const int *m, size_t n, char *buf, size_t size)
{
    char ranges[256];
    hdx_format_ranges_of(m, n, ranges, sizeof ranges);
    snprintf(buf, size, "%s %s (%zu %s)", t->by_pid ? "pids" : n == 1 ? "rank" : "ranks", ranges, n,
             hdx_tree_members_noun(t, n));
}

/* ---- speedscope ---- */

/* shared.frames, each distinct frame (hdx_frame_same) once. */
typedef struct frame_table {
    cJSON *frames;
    const hdx_frame **seen; /* by index in frames */
    size_t n;
    hdx_index index;
} frame_table;

/* The index of f in the table, added when new; -1 on ENOMEM. */
static long frame_index(frame_table *ft, const hdx_frame *f)
{
    uint64_t h = hdx_frame_hash(HDX_FNV1A_OFFSET_BASIS, f);
    size_t cur = 0, at;
    while ((at = hdx_index_find(&ft->index, h, &cur)) != HDX_INDEX_NONE)
        if (hdx_frame_same(ft->seen[at], f))
            return (long)at;
    char label[LABEL_MAX];
    cJSON *o = cJSON_CreateObject();
    const hdx_frame **s = hdx_append((void **)&ft->seen, &ft->n, sizeof *s);
    if (!o || !s || hdx_index_insert(&ft->index, h, ft->n - 1) < 0) {
        cJSON_Delete(o);
        return -1;
    }
    *s = f;
    cJSON_AddItemToArray(ft->frames, o);
    cJSON_AddItemToObject(o, "name", hdx_json_str(hdx_tree_frame_label(f, label, sizeof label)));
    const char *file = f->kind == HDX_FRAME_PYTHON ? f->file : f->module;
    if (file)
        cJSON_AddItemToObject(o, "file", hdx_json_str(file));
    if (f->kind == HDX_FRAME_PYTHON && f->line > 0)
        cJSON_AddNumberToObject(o, "line", f->line);
    return (long)(ft->n - 1);
}

/* The profile of the class ending at branch b. NULL on ENOMEM. */
static cJSON *class_profile(frame_table *ft, const hdx_tree *t, size_t b)
{
    const hdx_tree_branch *br = &t->branches[b];
    const hdx_frame **path;
    size_t n;
    if (hdx_tree_path(t, b, &path, &n) < 0)
        return NULL;
    char name[400];
    members_text(t, br->ends, br->n_ends, name, sizeof name);
    if (br->n_culprit_ends)
        strncat(name, br->n_culprit_ends == br->n_ends ? ", culprit" : ", culprits among them",
                sizeof name - strlen(name) - 1);
    cJSON *p = cJSON_CreateObject(), *stack = cJSON_CreateArray(), *samples, *weights;
    if (!p || !stack)
        goto nomem;
    cJSON_AddStringToObject(p, "type", "sampled");
    cJSON_AddItemToObject(p, "name", hdx_json_str(name));
    cJSON_AddStringToObject(p, "unit", "none");
    cJSON_AddNumberToObject(p, "startValue", 0);
    cJSON_AddNumberToObject(p, "endValue", (double)br->n_ends);
    for (size_t i = 0; i < n; i++) {
        long at = frame_index(ft, path[i]);
        if (at < 0)
            goto nomem;
        cJSON_AddItemToArray(stack, cJSON_CreateNumber((double)at));
    }
    samples = cJSON_AddArrayToObject(p, "samples");
    weights = cJSON_AddArrayToObject(p, "weights");
    if (!samples || !weights)
        goto nomem;
    cJSON_AddItemToArray(samples, stack);
    cJSON_AddItemToArray(weights, cJSON_CreateNumber((double)br->n_ends));
    free(path);
    return p;
nomem:
    free(path);
    cJSON_Delete(stack);
    cJSON_Delete(p);
    return NULL;
}

int hdx_export_speedscope(FILE *f, const hdx_verdict *v, const hdx_tree *t)
{
    int rc = -ENOMEM;
    frame_table ft = {0};
    char *s = NULL;
    cJSON *doc = cJSON_CreateObject(), *profiles;
    if (!doc)
        return -ENOMEM;
    cJSON_AddStringToObject(doc, "$schema", "https://www.speedscope.app/file-format-schema.json");
    char name[128];
    snprintf(name, sizeof name, "hangdx: %s, key thread of each %s", v ? hdx_class_name(v->cls) : "no verdict",
             t->by_pid ? "process" : "rank");
    cJSON_AddStringToObject(doc, "name", name);
    cJSON_AddStringToObject(doc, "exporter", "hangdx");
    cJSON *shared = cJSON_AddObjectToObject(doc, "shared");
    if (!shared || !(ft.frames = cJSON_AddArrayToObject(shared, "frames")) ||
        !(profiles = cJSON_AddArrayToObject(doc, "profiles")))
        goto out;
    long active = -1, n_profiles = 0;
    for (size_t b = 0; b < t->n_branches; b++) {
        if (!t->branches[b].n_ends)
            continue;
        cJSON *p = class_profile(&ft, t, b);
        if (!p)
            goto out;
        cJSON_AddItemToArray(profiles, p);
        if (active < 0 && t->branches[b].n_culprit_ends)
            active = n_profiles;
        n_profiles++;
    }
    if (n_profiles) /* none (logs alone give no stacks): no index into an empty list */
        cJSON_AddNumberToObject(doc, "activeProfileIndex", active < 0 ? 0 : (double)active);
    if (!(s = hdx_json_print(doc, 0)))
        goto out;
    rc = fprintf(f, "%s\n", s) < 0 ? -EIO : 0;
out:
    free(s);
    free(ft.seen);
    hdx_index_free(&ft.index);
    cJSON_Delete(doc);
    return rc;
}

/* ---- folded stacks ---- */

int hdx_export_collapsed(FILE *f, const hdx_tree *t)
{
    for (size_t b = 0; b < t->n_branches; b++) {
        const hdx_tree_branch *br = &t->branches[b];
        if (!br->n_ends)
            continue;
        const hdx_frame **path;
        size_t n;
        if (hdx_tree_path(t, b, &path, &n) < 0)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            char label[LABEL_MAX];
            hdx_tree_frame_label(path[i], label, sizeof label);
            for (char *c = label; (c = strchr(c, ';'));) /* ';' parts the frames of a line */
                *c = ',';
            if (i)
                fputc(';', f);
            hdx_put_text(f, label);
        }
        fprintf(f, " %zu\n", br->n_ends);
        free(path);
    }
    return ferror(f) ? -EIO : 0;
}

/* ---- Graphviz ---- */

/* s inside a DOT string: as the text report shows it (hdx_put_text: control bytes, bytes of
 * no valid UTF-8 and the code points a terminal acts on escaped), then '"' and '\' escaped
 * for DOT. */
static void dot_str(FILE *f, const char *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m) {
        hdx_put_text(m, s);
        fclose(m);
    }
    for (const char *c = text ? text : "?"; *c; c++) {
        if (*c == '"' || *c == '\\')
            fputc('\\', f);
        fputc(*c, f);
    }
    free(text);
}

#define CULPRIT_STYLE "style=filled, fillcolor=\"#f4a6a6\", peripheries=2"

/* The name of call c as the report says it: "all_reduce on TP group 4-5". */
static void call_label(const hdx_waitsfor *g, const hdx_wf_call *c, char *buf, size_t size)
{
    char group[256];
    if (c->kind == HDX_WF_RENDEZVOUS) {
        snprintf(buf, size, "rendezvous");
        return;
    }
    if (c->pgroup >= 0)
        hdx_pgroup_text(g->ev, c->pgroup, group, sizeof group);
    else
        snprintf(group, sizeof group, "the world group");
    snprintf(buf, size, "%s on %s", c->op ? c->op : "collective", group);
}

/* Whether rank r is a culprit of the verdict (culprits: its culprit_ranks, sorted). */
static int is_culprit(const int *culprits, size_t n, int r)
{
    return bsearch(&r, culprits, n, sizeof r, hdx_cmp_int) != NULL;
}

/* Mark rank r of g as a node. */
static void need(const hdx_waitsfor *g, char *node, int r)
{
    const hdx_wf_rank *x = hdx_waitsfor_rank(g, r);
    if (x)
        node[x - g->ranks] = 1;
}

/* The waits-for graph g, its culprits those of the verdict; stacks: whether any rank has a
 * stack (the graph is read from them). 0 or -ENOMEM. */
static int dot_waits_for(FILE *f, const hdx_waitsfor *g, const hdx_verdict *v, int stacks)
{
    fprintf(f, "  subgraph cluster_waits_for {\n    label=\"waits-for graph\";\n    node [shape=box];\n");
    size_t nc = v ? v->n_culprit_ranks : 0;
    int *culprits = malloc((nc ? nc : 1) * sizeof *culprits);
    char *node = calloc(g->n_ranks ? g->n_ranks : 1, 1), *root_call = calloc(g->n_calls ? g->n_calls : 1, 1);
    if (!culprits || !node || !root_call) {
        free(culprits);
        free(node);
        free(root_call);
        return -ENOMEM;
    }
    if (nc) {
        memcpy(culprits, v->culprit_ranks, nc * sizeof *culprits);
        qsort(culprits, nc, sizeof *culprits, hdx_cmp_int);
    }
    /* The nodes: the ranks that wait or are culprits, and those waited for. */
    for (size_t i = 0; i < g->n_ranks; i++) {
        const hdx_wf_rank *r = &g->ranks[i];
        if (r->kind == HDX_WF_NONE && !is_culprit(culprits, nc, r->rank))
            continue;
        node[i] = 1;
        for (size_t k = 0; r->call >= 0 && k < hdx_wf_call_nodes(&g->calls[r->call]); k++)
            node[hdx_wf_call_node(g, &g->calls[r->call], k) - g->ranks] = 1;
        for (size_t k = 0; k < r->n_ops; k++)
            if (!r->ops[k].matched && r->ops[k].peer != HDX_UNKNOWN)
                need(g, node, r->ops[k].peer);
        if (r->kind == HDX_WF_BUILD_LOCK && r->lock_holder != HDX_UNKNOWN)
            need(g, node, r->lock_holder);
    }
    for (size_t k = 0; k < g->n_roots; k++)
        if (g->roots[k].kind == HDX_WF_ROOT_CALL && g->roots[k].call >= 0)
            root_call[g->roots[k].call] = 1;
    if (!g->n_calls && !memchr(node, 1, g->n_ranks ? g->n_ranks : 1))
        fprintf(f, "    none [shape=plaintext, label=\"%s\"];\n",
                stacks ? "no rank waits in a distributed call"
                       : "no waits-for graph: no rank of the inputs has a stack (job logs and traces carry none)");
    for (size_t c = 0; c < g->n_calls; c++) {
        char label[512];
        call_label(g, &g->calls[c], label, sizeof label);
        fprintf(f, "    c%zu [shape=ellipse, label=\"", c);
        dot_str(f, label);
        fprintf(f, "\\n%zu in it%s\"%s];\n", g->calls[c].n_in, root_call[c] ? ", root" : "",
                root_call[c] ? ", " CULPRIT_STYLE : "");
    }
    for (size_t i = 0; i < g->n_ranks; i++) {
        const hdx_wf_rank *r = &g->ranks[i];
        if (!node[i])
            continue;
        int culprit = is_culprit(culprits, nc, r->rank);
        if (r->last > r->rank) /* a node of missing ranks: one for the range */
            fprintf(f, "    r%d [label=\"ranks %d-%d\\n", r->rank, r->rank, r->last);
        else
            fprintf(f, "    r%d [label=\"rank %d\\n", r->rank, r->rank);
        dot_str(f, r->kind != HDX_WF_NONE ? (r->op ? r->op : hdx_wf_kind_name(r->kind))
                   : r->state != HDX_WF_WAITING ? hdx_wf_state_name(r->state)
                                                : "in no distributed call");
        fprintf(f, "%s\"%s];\n", culprit ? "\\nculprit" : "", culprit ? ", " CULPRIT_STYLE : "");
    }
    for (size_t i = 0; i < g->n_ranks; i++) {
        const hdx_wf_rank *r = &g->ranks[i];
        if (r->call >= 0)
            fprintf(f, "    r%d -> c%ld;\n", r->rank, r->call);
        for (size_t k = 0; k < r->n_ops; k++)
            if (!r->ops[k].matched && r->ops[k].peer != HDX_UNKNOWN)
                fprintf(f, "    r%d -> r%d [label=\"%s\"];\n", r->rank, r->ops[k].peer, r->ops[k].send ? "send" : "recv");
        if (r->kind == HDX_WF_BUILD_LOCK && r->lock_holder != HDX_UNKNOWN)
            fprintf(f, "    r%d -> r%d [label=\"build lock\"];\n", r->rank, r->lock_holder);
    }
    for (size_t c = 0; c < g->n_calls; c++)
        for (size_t k = 0; k < hdx_wf_call_nodes(&g->calls[c]); k++)
            fprintf(f, "    c%zu -> r%d [label=\"waits for\"];\n", c, hdx_wf_call_node(g, &g->calls[c], k)->rank);
    free(culprits);
    free(node);
    free(root_call);
    fprintf(f, "  }\n");
    return 0;
}

static void dot_tree(FILE *f, const hdx_tree *t)
{
    fprintf(f, "  subgraph cluster_stack_tree {\n    label=\"stack tree (outermost call at the top)\";\n"
               "    node [shape=box];\n");
    for (size_t b = 0; b < t->n_branches; b++) {
        const hdx_tree_branch *br = &t->branches[b];
        char members[400], label[LABEL_MAX];
        members_text(t, br->members, br->n_members, members, sizeof members);
        fprintf(f, "    t%zu [label=\"", b);
        dot_str(f, members);
        fprintf(f, "\\l");
        for (size_t i = 0; i < br->n_frames; i++) {
            dot_str(f, hdx_tree_frame_label(br->frames[i], label, sizeof label));
            fprintf(f, "\\l");
        }
        int culprit = br->n_culprits && br->n_culprits == br->n_members;
        fprintf(f, "\"%s];\n", culprit ? ", " CULPRIT_STYLE : "");
        if (br->parent >= 0)
            fprintf(f, "    t%ld -> t%zu;\n", br->parent, b);
    }
    fprintf(f, "  }\n");
}

int hdx_export_dot(FILE *f, const hdx_evidence *ev, const hdx_verdict *v, const hdx_tree *t)
{
    /* A verdict that did not read the graph (no process groups, another rule decided) has none:
     * it is built here, each collective on the world group where no group was read. */
    hdx_waitsfor own = {0};
    const hdx_waitsfor *g = v && v->graph ? v->graph : &own;
    int rc = g == &own ? hdx_waitsfor_build(ev, &own) : 0;
    if (!rc) {
        fprintf(f, "digraph hangdx {\n  label=\"hangdx: %s\";\n  labelloc=t;\n", v ? hdx_class_name(v->cls) : "no verdict");
        rc = dot_waits_for(f, g, v, t->n_branches > 0);
    }
    if (!rc) {
        dot_tree(f, t);
        fprintf(f, "}\n");
        rc = ferror(f) ? -EIO : 0;
    }
    hdx_waitsfor_free(&own);
    return rc;
}
