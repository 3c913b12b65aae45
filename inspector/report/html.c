/* The HTML report (report/html.h; docs/design.md "The HTML report"). */
#include "report/html.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "classify/groups.h"
#include "classify/waitsfor.h"
#include "model/jsonout.h"
#include "model/outfile.h"
#include "model/util.h"
#include "report/report.h"
#include "report/tree.h"

/* The page (report/html_page.html), made into this array by report/embed.cmake at build time. */
extern const char hdx_html_page[];

/* Where the data goes in the page. */
#define DATA_MARK "@HDX_DATA@"
/* A frame's label, and a set of ranks as text: cut beyond these. */
#define LABEL_MAX 512
#define RANGES_MAX 256
/* A node of the graph stands for ranks this many hops from their root, or more. */
#define DEPTH_MAX 8

/* One rank of the page (a process by pid when no process is a rank process). */
typedef struct member {
    int id;
    const hdx_process *p; /* NULL: missing */
    const hdx_thread *t;  /* its key thread, or NULL */
    int stack;            /* its class in "stacks", -1 */
    int culprit;          /* 1: a culprit of the verdict */
    int coord[3];         /* its place in its TP, PP and DP group, -1 */
} member;

static int member_cmp(const void *a, const void *b)
{
    int x = ((const member *)a)->id, y = ((const member *)b)->id;
    return (x > y) - (x < y);
}

static member *member_find(member *m, size_t n, int id)
{
    member key = {.id = id};
    return bsearch(&key, m, n, sizeof *m, member_cmp);
}

/* The ranks: g's (missing ones included, at most HDX_HTML_MAX_MISSING of a node of missing ranks
 * past its first; g may be NULL), else the rank processes, else every
 * process by pid (*by_pid 1). Sorted by id, each once. NULL with errno ENOMEM (or *n 0). */
static member *members_of(const hdx_evidence *ev, const hdx_verdict *v, const hdx_waitsfor *g, size_t *n,
                          int *by_pid)
{
    size_t cap = (g ? g->n_ranks : 0) + ev->n_procs + HDX_HTML_MAX_MISSING + 1, k = 0, missing = 0;
    member *m = calloc(cap, sizeof *m);
    if (!m)
        return NULL;
    *by_pid = 0;
    for (size_t i = 0; g && i < g->n_ranks; i++) { /* a node of missing ranks: a cell per rank, to a bound */
        const hdx_wf_rank *r = &g->ranks[i];
        m[k++] = (member){r->rank, r->p, r->t, -1, 0, {-1, -1, -1}};
        for (long long id = (long long)r->rank + 1; id <= r->last && missing < HDX_HTML_MAX_MISSING; id++, missing++)
            m[k++] = (member){(int)id, NULL, NULL, -1, 0, {-1, -1, -1}};
    }
    if (!k) {
        for (size_t i = 0; i < ev->n_procs; i++)
            if (ev->procs[i].is_rank_process && !ev->procs[i].set_aside)
                m[k++] = (member){ev->procs[i].rank, &ev->procs[i], hdx_key_thread(&ev->procs[i]), -1, 0, {-1, -1, -1}};
    }
    if (!k) {
        *by_pid = 1;
        for (size_t i = 0; i < ev->n_procs; i++)
            if (!ev->procs[i].set_aside)
                m[k++] = (member){ev->procs[i].pid, &ev->procs[i], hdx_key_thread(&ev->procs[i]), -1, 0, {-1, -1, -1}};
    }
    qsort(m, k, sizeof *m, member_cmp);
    size_t w = 0; /* the first process of a rank, as the graph takes it */
    for (size_t i = 0; i < k; i++)
        if (!w || m[w - 1].id != m[i].id)
            m[w++] = m[i];
    *n = w;
    const int *cul = *by_pid ? v->culprit_pids : v->culprit_ranks;
    size_t ncul = *by_pid ? v->n_culprit_pids : v->n_culprit_ranks;
    for (size_t i = 0; i < ncul; i++) {
        member *x = member_find(m, w, cul[i]);
        if (x)
            x->culprit = 1;
    }
    return m;
}

/* What a member waits for, as the grid colours it. */
static const char *member_wait(const member *m)
{
    if (!m->p)
        return "missing";
    if (!m->p->alive)
        return "gone";
    if (!m->t)
        return "no stack";
    return m->t->wait ? m->t->wait : "none";
}

static cJSON *ranges_text(const int *ids, size_t n)
{
    char buf[RANGES_MAX];
    hdx_format_ranges_of(ids, n, buf, sizeof buf);
    return cJSON_CreateString(buf);
}

/* The stack classes (groups.h: the key threads' stacks), the largest first, each member given
 * its class. */
static cJSON *stacks_json(const hdx_evidence *ev, member *m, size_t n, int by_pid)
{
    hdx_group *g = NULL;
    size_t ng = 0;
    cJSON *a = cJSON_CreateArray();
    if (!a || hdx_groups_make(ev, &g, &ng) < 0) {
        cJSON_Delete(a);
        return NULL;
    }
    char label[LABEL_MAX];
    for (size_t i = 0; i < ng && i < HDX_HTML_MAX_STACKS; i++) {
        const int *ids = by_pid ? g[i].pids : g[i].ranks;
        size_t nids = by_pid ? g[i].n_pids : g[i].n_ranks;
        for (size_t k = 0; k < nids; k++) {
            member *x = member_find(m, n, ids[k]);
            if (x && x->stack < 0)
                x->stack = (int)i;
        }
        cJSON *o = cJSON_CreateObject(), *frames = cJSON_AddArrayToObject(o, "frames");
        cJSON_AddItemToArray(a, o);
        cJSON_AddItemToObject(o, "ranks", ranges_text(ids, nids));
        cJSON_AddNumberToObject(o, "n", (double)nids);
        cJSON_AddItemToObject(o, "wait", hdx_json_str(g[i].key->wait));
        for (size_t f = 0; frames && f < g[i].key->n_frames && f < HDX_HTML_MAX_FRAMES; f++)
            cJSON_AddItemToArray(frames, cJSON_CreateString(hdx_tree_frame_label(&g[i].key->frames[f], label, sizeof label)));
        cJSON_AddNumberToObject(o, "depth", (double)g[i].key->n_frames);
    }
    hdx_groups_free(g, ng);
    return a;
}

/* Each member's place in its TP, PP and DP group (Megatron's roles, docs/design.md "Process
 * groups"); the sizes into size[3]. 1 when every member has all three and TP x PP x DP is
 * the number of members (the job's grid is known), else 0. */
static int grid_known(const hdx_evidence *ev, member *m, size_t n, int by_pid, size_t size[3])
{
    static const char *const roles[3] = {"tp", "pp", "dp"};
    size[0] = size[1] = size[2] = 0;
    if (by_pid || !n)
        return 0;
    for (size_t i = 0; i < ev->n_pgroups; i++) {
        const hdx_pgroup *pg = &ev->pgroups[i];
        for (int r = 0; pg->role && r < 3; r++) {
            if (strcmp(pg->role, roles[r]))
                continue;
            if (size[r] && size[r] != pg->n_ranks)
                return 0; /* groups of one role of two sizes: no grid */
            size[r] = pg->n_ranks;
            for (size_t k = 0; k < pg->n_ranks; k++) {
                member *x = member_find(m, n, pg->ranks[k]);
                if (x)
                    x->coord[r] = (int)k;
            }
        }
    }
    if (!size[0] || !size[1] || !size[2] || size[0] * size[1] * size[2] != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].coord[0] < 0 || m[i].coord[1] < 0 || m[i].coord[2] < 0)
            return 0;
    return 1;
}

/* The per-rank table, as columns of small numbers: id, what it waits for (an index into
 * "waits"), culprit, stack class, and the grid's coordinates when known. */
static cJSON *ranks_json(const member *m, size_t n, int grid, cJSON *waits)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *id = cJSON_AddArrayToObject(o, "id"), *wait = cJSON_AddArrayToObject(o, "wait"),
          *culprit = cJSON_AddArrayToObject(o, "culprit"), *stack = cJSON_AddArrayToObject(o, "stack");
    cJSON *coord[3] = {NULL, NULL, NULL};
    if (grid) {
        coord[0] = cJSON_AddArrayToObject(o, "tp");
        coord[1] = cJSON_AddArrayToObject(o, "pp");
        coord[2] = cJSON_AddArrayToObject(o, "dp");
    }
    if (!stack || (grid && !coord[2])) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *w = member_wait(&m[i]);
        int wi = 0, nw = cJSON_GetArraySize(waits);
        while (wi < nw && strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(waits, wi)), w))
            wi++;
        if (wi == nw)
            cJSON_AddItemToArray(waits, cJSON_CreateString(w));
        cJSON_AddItemToArray(id, cJSON_CreateNumber(m[i].id));
        cJSON_AddItemToArray(wait, cJSON_CreateNumber(wi));
        cJSON_AddItemToArray(culprit, cJSON_CreateNumber(m[i].culprit));
        cJSON_AddItemToArray(stack, cJSON_CreateNumber(m[i].stack));
        for (int r = 0; grid && r < 3; r++)
            cJSON_AddItemToArray(coord[r], cJSON_CreateNumber(m[i].coord[r]));
    }
    return o;
}

/* The stack tree's branches, depth first: [parent, members, culprits, "ranges", [frames,
 * outermost first]]. */
static cJSON *tree_json(const hdx_evidence *ev, const hdx_verdict *v, cJSON *page)
{
    hdx_tree t;
    cJSON *a = NULL;
    char label[LABEL_MAX];
    if (hdx_tree_build(ev, v, &t) < 0 || !(a = cJSON_CreateArray()))
        goto out;
    for (size_t i = 0; i < t.n_branches && i < HDX_HTML_MAX_BRANCHES; i++) {
        const hdx_tree_branch *b = &t.branches[i];
        cJSON *x = cJSON_CreateArray(), *frames = cJSON_CreateArray();
        cJSON_AddItemToArray(a, x);
        cJSON_AddItemToArray(x, cJSON_CreateNumber((double)b->parent));
        cJSON_AddItemToArray(x, cJSON_CreateNumber((double)b->n_members));
        cJSON_AddItemToArray(x, cJSON_CreateNumber((double)b->n_culprits));
        cJSON_AddItemToArray(x, ranges_text(b->members, b->n_members));
        cJSON_AddItemToArray(x, frames);
        for (size_t f = 0; frames && f < b->n_frames; f++)
            cJSON_AddItemToArray(frames, cJSON_CreateString(hdx_tree_frame_label(b->frames[f], label, sizeof label)));
    }
    cJSON_AddNumberToObject(page, "tree_branches", (double)t.n_branches);
    cJSON_AddBoolToObject(page, "tree_by_pid", t.by_pid);
out:
    hdx_tree_free(&t);
    return a;
}

/* A node of the graph: like ranks at one depth from their root. */
typedef struct gnode {
    int depth, culprit;
    enum hdx_wf_state state;
    enum hdx_wf_kind kind;
    const char *op, *group; /* NULL when collapsed away */
    hdx_wf_range *ranges;   /* its ranks (heap), ascending: the graph's nodes come in rank order */
    size_t n_ranges, cap;
    size_t n;               /* ranks in them (a node of missing ranks gives a range of many) */
} gnode;

/* ranges[0..n) as the report writes a set of ranks ("0-3,8"; "..." past RANGES_MAX). */
static cJSON *node_ranges_text(const hdx_wf_range *ranges, size_t n)
{
    char buf[RANGES_MAX];
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        char part[32];
        if (ranges[i].lo == ranges[i].hi)
            snprintf(part, sizeof part, "%s%d", used ? "," : "", ranges[i].lo);
        else
            snprintf(part, sizeof part, "%s%d-%d", used ? "," : "", ranges[i].lo, ranges[i].hi);
        size_t len = strlen(part);
        if (used + len + 4 >= sizeof buf) {
            strcpy(buf + used, "...");
            break;
        }
        memcpy(buf + used, part, len + 1);
        used += len;
    }
    return cJSON_CreateString(buf);
}

/* The group of r as node key at coarseness level: 0 its name, 1 its role (or "world"), 2 none. */
static const char *node_group(const hdx_waitsfor *g, const hdx_wf_rank *r, int level)
{
    if (level >= 2 || r->pgroup < 0)
        return NULL;
    const hdx_pgroup *pg = &g->ev->pgroups[r->pgroup];
    if (level == 0)
        return pg->name;
    return pg->role ? pg->role : pg->is_default ? "world" : "other";
}

static void nodes_free(gnode *nodes, size_t n)
{
    for (size_t i = 0; nodes && i < n; i++)
        free(nodes[i].ranges);
    free(nodes);
}

/* The graph's ranks (those that wait or are culprits) collapsed into nodes at one level;
 * node_of[i] the node of g->ranks[i], -1. 0, -ENOMEM, or -E2BIG past HDX_HTML_MAX_NODES
 * (level < 2). */
static int nodes_make(const hdx_waitsfor *g, int level, long *node_of, gnode **out, size_t *nn)
{
    gnode *nodes = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < g->n_ranks; i++) {
        const hdx_wf_rank *r = &g->ranks[i];
        node_of[i] = -1;
        if (r->kind == HDX_WF_NONE && !r->culprit)
            continue;
        gnode key = {r->depth < DEPTH_MAX ? r->depth : DEPTH_MAX, r->culprit, r->culprit ? r->state : HDX_WF_WAITING,
                     r->kind, level < 2 ? r->op : NULL, node_group(g, r, level), NULL, 0, 0, 0};
        size_t k = 0;
        while (k < n && !(nodes[k].depth == key.depth && nodes[k].culprit == key.culprit &&
                          nodes[k].state == key.state && nodes[k].kind == key.kind && hdx_str_same(nodes[k].op, key.op) &&
                          hdx_str_same(nodes[k].group, key.group)))
            k++;
        if (k == n) {
            if (level < 2 && n == HDX_HTML_MAX_NODES) {
                rc = -E2BIG;
                goto out;
            }
            if (n == cap) {
                gnode *more = realloc(nodes, (cap = cap ? 2 * cap : 16) * sizeof *nodes);
                if (!more) {
                    rc = -ENOMEM;
                    goto out;
                }
                nodes = more;
            }
            nodes[n++] = key;
        }
        gnode *x = &nodes[k];
        x->n += (size_t)(r->last - r->rank) + 1;
        if (x->n_ranges && x->ranges[x->n_ranges - 1].hi + 1 == r->rank) {
            x->ranges[x->n_ranges - 1].hi = r->last;
        } else {
            if (x->n_ranges == x->cap) {
                hdx_wf_range *more = realloc(x->ranges, (x->cap = x->cap ? 2 * x->cap : 4) * sizeof *more);
                if (!more) {
                    rc = -ENOMEM;
                    goto out;
                }
                x->ranges = more;
            }
            x->ranges[x->n_ranges++] = (hdx_wf_range){r->rank, r->last};
        }
        node_of[i] = (long)k;
    }
out:
    if (rc) {
        nodes_free(nodes, n);
        nodes = NULL;
        n = 0;
    }
    *out = nodes;
    *nn = n;
    return rc;
}

/* The node of rank id, -1. */
static long node_of_rank(const hdx_waitsfor *g, const long *node_of, int id)
{
    const hdx_wf_rank *r = hdx_waitsfor_rank(g, id);
    return r ? node_of[r - g->ranks] : -1;
}

/* The waits-for graph as nodes of like ranks and the edges between them ("a waits for b"):
 * through each call to the members it waits for, each unanswered send or recv to its peer,
 * each build-lock wait to the holder. {"nodes": [...], "edges": [[a, b], ...], "level": n}. */
static cJSON *graph_json(const hdx_waitsfor *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *jn = cJSON_AddArrayToObject(o, "nodes"), *je = cJSON_AddArrayToObject(o, "edges");
    long *node_of = g && g->n_ranks ? malloc(g->n_ranks * sizeof *node_of) : NULL;
    unsigned char *edge = NULL, *in_call = NULL;
    gnode *nodes = NULL;
    size_t nn = 0;
    int level = 0, rc = -ENOMEM;
    if (!je || (g && g->n_ranks && !node_of))
        goto out;
    if (!g || !g->n_ranks) {
        rc = 0;
        goto out;
    }
    while ((rc = nodes_make(g, level, node_of, &nodes, &nn)) == -E2BIG)
        level++;
    cJSON_AddNumberToObject(o, "level", level);
    if (rc || !nn)
        goto out;
    rc = -ENOMEM;
    edge = calloc(nn * nn, 1);
    in_call = calloc((g->n_calls ? g->n_calls : 1) * nn, 1);
    if (!edge || !in_call)
        goto out;
    for (size_t i = 0; i < g->n_ranks; i++) {
        const hdx_wf_rank *r = &g->ranks[i];
        long a = node_of[i], b;
        if (a < 0)
            continue;
        if (r->call >= 0)
            in_call[(size_t)r->call * nn + (size_t)a] = 1;
        for (size_t k = 0; k < r->n_ops; k++)
            if (!r->ops[k].matched && r->ops[k].peer != HDX_UNKNOWN && (b = node_of_rank(g, node_of, r->ops[k].peer)) >= 0)
                edge[(size_t)a * nn + (size_t)b] = 1;
        if (r->kind == HDX_WF_BUILD_LOCK && r->lock_holder != HDX_UNKNOWN &&
            (b = node_of_rank(g, node_of, r->lock_holder)) >= 0)
            edge[(size_t)a * nn + (size_t)b] = 1;
    }
    for (size_t c = 0; c < g->n_calls; c++)
        for (size_t a = 0; a < nn; a++) {
            if (!in_call[c * nn + a])
                continue;
            for (size_t k = 0; k < hdx_wf_call_nodes(&g->calls[c]); k++) {
                long b = node_of[hdx_wf_call_node(g, &g->calls[c], k) - g->ranks];
                if (b >= 0)
                    edge[a * nn + (size_t)b] = 1;
            }
        }
    for (size_t a = 0; a < nn; a++) {
        const gnode *x = &nodes[a];
        cJSON *y = cJSON_CreateObject();
        cJSON_AddItemToArray(jn, y);
        cJSON_AddItemToObject(y, "ranks", node_ranges_text(x->ranges, x->n_ranges));
        cJSON_AddNumberToObject(y, "n", (double)x->n);
        cJSON_AddNumberToObject(y, "depth", x->depth);
        cJSON_AddBoolToObject(y, "culprit", x->culprit);
        cJSON_AddItemToObject(y, "state", x->culprit ? cJSON_CreateString(hdx_wf_state_name(x->state)) : cJSON_CreateNull());
        cJSON_AddStringToObject(y, "kind", hdx_wf_kind_name(x->kind));
        cJSON_AddItemToObject(y, "op", hdx_json_str(x->op));
        cJSON_AddItemToObject(y, "group", hdx_json_str(x->group));
        for (size_t b = 0; b < nn; b++)
            if (edge[a * nn + b] && a != b) {
                const int pair[2] = {(int)a, (int)b};
                cJSON_AddItemToArray(je, cJSON_CreateIntArray(pair, 2));
            }
    }
    rc = 0;
out:
    free(edge);
    free(in_call);
    free(node_of);
    nodes_free(nodes, nn);
    if (rc) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* How many hosts ev's processes ran on (sorted, not compared pairwise: 16384 hosts), -1 on
 * ENOMEM. */
static long count_hosts(const hdx_evidence *ev)
{
    const char **h = malloc((ev->n_procs ? ev->n_procs : 1) * sizeof *h);
    size_t n = 0;
    long distinct = 0;
    if (!h)
        return -1;
    for (size_t i = 0; i < ev->n_procs; i++)
        if (ev->procs[i].host || ev->host)
            h[n++] = ev->procs[i].host ? ev->procs[i].host : ev->host;
    qsort(h, n, sizeof *h, str_cmp);
    for (size_t i = 0; i < n; i++)
        distinct += !i || strcmp(h[i - 1], h[i]);
    free(h);
    return distinct;
}

/* The page's data object: g is v's waits-for graph, or one built from ev for a verdict that
 * did not need it (as the dot export does, report/export.h), or NULL. NULL on ENOMEM. */
static cJSON *page_json(const hdx_evidence *ev, const hdx_verdict *v, const hdx_waitsfor *g)
{
    size_t n = 0, size[3];
    int by_pid = 0;
    member *m = members_of(ev, v, g, &n, &by_pid);
    cJSON *o = cJSON_CreateObject(), *waits = cJSON_CreateArray();
    long hosts = count_hosts(ev);
    if (!m || !o || !waits || hosts < 0) {
        free(m);
        cJSON_Delete(o);
        cJSON_Delete(waits);
        return NULL;
    }
    cJSON_AddNumberToObject(o, "hosts", (double)hosts);
    cJSON_AddItemToObject(o, "taken_at", hdx_json_time(ev->taken_ns, 0));
    cJSON_AddItemToObject(o, "verdict", hdx_report_verdict_json(ev, v));
    cJSON_AddBoolToObject(o, "by_pid", by_pid);
    cJSON_AddItemToObject(o, "stacks", stacks_json(ev, m, n, by_pid));
    int grid = grid_known(ev, m, n, by_pid, size);
    cJSON *go = grid ? cJSON_AddObjectToObject(o, "grid") : cJSON_AddNullToObject(o, "grid");
    if (grid) {
        cJSON_AddNumberToObject(go, "tp", (double)size[0]);
        cJSON_AddNumberToObject(go, "pp", (double)size[1]);
        cJSON_AddNumberToObject(go, "dp", (double)size[2]);
    }
    cJSON_AddItemToObject(o, "waits", waits);
    cJSON_AddItemToObject(o, "ranks", ranks_json(m, n, grid, waits));
    cJSON_AddItemToObject(o, "tree", tree_json(ev, v, o));
    cJSON_AddItemToObject(o, "graph", graph_json(g));
    /* the collectives taken on the world group: no group read */
    cJSON_AddBoolToObject(o, "graph_guessed", g && g->n_ranks && (g->n_guessed || !ev->n_pgroups));
    cJSON *notes = cJSON_AddArrayToObject(o, "notes");
    for (size_t i = 0; notes && i < ev->n_notes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(ev->notes[i]));
    free(m);
    /* A part that could not be made is missing, not null: the page would show less. */
    static const char *const parts[] = {"verdict", "stacks", "ranks", "tree", "graph", "notes"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (!cJSON_GetObjectItemCaseSensitive(o, parts[i])) {
            cJSON_Delete(o);
            return NULL;
        }
    return o;
}

/* s into f with every '<' as \u003c (s is JSON text: '<' is only ever inside its strings). */
static int put_script_data(FILE *f, const char *s)
{
    for (const char *lt; (lt = strchr(s, '<')); s = lt + 1)
        if (fwrite(s, 1, (size_t)(lt - s), f) != (size_t)(lt - s) || fputs("\\u003c", f) < 0)
            return -EIO;
    return fputs(s, f) < 0 ? -EIO : 0;
}

int hdx_report_html(FILE *f, const hdx_evidence *ev, const hdx_verdict *v)
{
    hdx_waitsfor own;
    memset(&own, 0, sizeof own);
    if (!v->graph && hdx_waitsfor_build(ev, &own) < 0) {
        hdx_waitsfor_free(&own);
        return -ENOMEM;
    }
    cJSON *o = page_json(ev, v, v->graph ? v->graph : &own);
    hdx_waitsfor_free(&own);
    char *s = o ? hdx_json_print(o, 0) : NULL;
    cJSON_Delete(o);
    if (!s)
        return -ENOMEM;
    const char *at = strstr(hdx_html_page, DATA_MARK);
    size_t head = at ? (size_t)(at - hdx_html_page) : strlen(hdx_html_page);
    int rc = fwrite(hdx_html_page, 1, head, f) == head ? 0 : -EIO;
    if (!rc && at)
        rc = put_script_data(f, s);
    if (!rc && at && fputs(at + strlen(DATA_MARK), f) < 0)
        rc = -EIO;
    free(s);
    return rc || ferror(f) ? -EIO : 0;
}

int hdx_report_html_write(const hdx_evidence *ev, const hdx_verdict *v, const char *path)
{
    hdx_outfile out;
    int rc = hdx_outfile_open(&out, path);
    return rc ? rc : hdx_outfile_close(&out, hdx_report_html(out.f, ev, v));
}
