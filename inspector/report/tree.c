/* The merged stack tree: a trie of the groups' paths, then its runs of one set of members
 * made into branches (report/tree.h). */
#include "report/tree.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/groups.h"
#include "hangdx/fnv.h"
#include "model/index.h"
#include "model/util.h"

/* A node of the trie: one frame under its parent's path. */
typedef struct node {
    const hdx_frame *frame; /* NULL for the root */
    size_t parent;
    size_t first_child, next_sibling; /* 0: none (node 0 is the root, nobody's child) */
    size_t n_children;
    size_t count;      /* members whose path runs through it */
    int min_member;    /* the lowest of them: the order of siblings of one size */
    size_t *groups;    /* the groups whose path runs through it (indexes), hdx_append'ed */
    size_t n_groups;
    size_t *ending;    /* the groups whose path ends at it */
    size_t n_ending;
} node;

typedef struct builder {
    const hdx_group *g;
    int by_pid;
    const int *culprits; /* sorted copy */
    size_t n_culprits;
    node *nodes;
    size_t n_nodes;
    hdx_tree *t;
} builder;

/* The members of group g: its ranks, or its pids when the tree is by pid. */
static const int *group_members(const builder *b, size_t g, size_t *n)
{
    *n = b->by_pid ? b->g[g].n_pids : b->g[g].n_ranks;
    return b->by_pid ? b->g[g].pids : b->g[g].ranks;
}

static uint64_t child_hash(size_t parent, const hdx_frame *f)
{
    return hdx_frame_hash(HDX_FNV1A_OFFSET_BASIS, f) ^ hdx_hash_mix((uint64_t)parent + 1);
}

/* Add group gi (its members, min the lowest) to node at: 0 or -ENOMEM. */
static int node_add_group(node *nd, size_t gi, size_t n, int min)
{
    size_t *s = hdx_append((void **)&nd->groups, &nd->n_groups, sizeof *s);
    if (!s)
        return -ENOMEM;
    *s = gi;
    if (!nd->count || min < nd->min_member)
        nd->min_member = min;
    nd->count += n;
    return 0;
}

/* The child of parent for frame f, made when there is none. Index, or 0 on ENOMEM. */
static size_t child_of(builder *b, hdx_index *x, size_t parent, const hdx_frame *f)
{
    uint64_t h = child_hash(parent, f);
    size_t cur = 0, at;
    while ((at = hdx_index_find(x, h, &cur)) != HDX_INDEX_NONE)
        if (b->nodes[at].parent == parent && hdx_frame_same(b->nodes[at].frame, f))
            return at;
    node *nd = hdx_append((void **)&b->nodes, &b->n_nodes, sizeof *nd);
    if (!nd || hdx_index_insert(x, h, b->n_nodes - 1) < 0)
        return 0;
    nd->frame = f;
    nd->parent = parent;
    node *p = &b->nodes[parent];
    nd->next_sibling = p->first_child;
    p->first_child = b->n_nodes - 1;
    p->n_children++;
    return b->n_nodes - 1;
}

/* Insert every group's path, outermost frame first. 0 or -ENOMEM. */
static int build_trie(builder *b, size_t n_groups)
{
    hdx_index x = {0};
    int rc = -ENOMEM;
    if (!hdx_append((void **)&b->nodes, &b->n_nodes, sizeof *b->nodes)) /* the root */
        return -ENOMEM;
    for (size_t gi = 0; gi < n_groups; gi++) {
        size_t n;
        const int *m = group_members(b, gi, &n);
        if (!n)
            continue;
        int min = m[0];
        for (size_t k = 1; k < n; k++)
            min = m[k] < min ? m[k] : min;
        const hdx_thread *t = b->g[gi].key;
        size_t at = 0;
        if (node_add_group(&b->nodes[0], gi, n, min) < 0)
            goto out;
        for (size_t i = t->n_frames; i-- > 0;) {
            if (!(at = child_of(b, &x, at, &t->frames[i])) || node_add_group(&b->nodes[at], gi, n, min) < 0)
                goto out;
        }
        size_t *e = hdx_append((void **)&b->nodes[at].ending, &b->nodes[at].n_ending, sizeof *e);
        if (!e)
            goto out;
        *e = gi;
    }
    rc = 0;
out:
    hdx_index_free(&x);
    return rc;
}

/* The members of groups[0..n) as one ascending array (heap) in *out. 0 or -ENOMEM. */
static int members_of(const builder *b, const size_t *groups, size_t n, int **out, size_t *n_out)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        group_members(b, groups[i], &k);
        total += k;
    }
    int *m = malloc((total ? total : 1) * sizeof *m);
    if (!m)
        return -ENOMEM;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const int *src = group_members(b, groups[i], &k);
        if (k) /* a group of no rank has no array */
            memcpy(m + w, src, k * sizeof *m);
        w += k;
    }
    qsort(m, w, sizeof *m, hdx_cmp_int);
    size_t u = 0; /* a rank twice (two processes that carry it) counts once */
    for (size_t i = 0; i < w; i++)
        if (!u || m[u - 1] != m[i])
            m[u++] = m[i];
    *out = m;
    *n_out = u;
    return 0;
}

static size_t count_culprits(const builder *b, const int *m, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; b->n_culprits && i < n; i++) /* bsearch wants an array, even of none */
        c += bsearch(&m[i], b->culprits, b->n_culprits, sizeof *m, hdx_cmp_int) != NULL;
    return c;
}

/* Siblings: the most members first, then the lowest member. */
static int cmp_sibling(const void *pa, const void *pb)
{
    const node *a = *(const node *const *)pa, *b = *(const node *const *)pb;
    if (a->count != b->count)
        return a->count < b->count ? 1 : -1;
    return (a->min_member > b->min_member) - (a->min_member < b->min_member);
}

/*
 * Make the branch that starts at node at (under branch parent, at level): at's frame and those
 * of the nodes below it while the path neither parts nor ends, then, depth first, a branch for
 * each child of the last node. Returns the branch's index, or -ENOMEM.
 */
static long emit(builder *b, size_t at, long parent, size_t level)
{
    hdx_tree *t = b->t;
    hdx_tree_branch *br = hdx_append((void **)&t->branches, &t->n_branches, sizeof *br);
    if (!br)
        return -ENOMEM;
    long self = (long)t->n_branches - 1;
    br->parent = parent;
    br->level = level;
    const node *nd = &b->nodes[at];
    if (members_of(b, nd->groups, nd->n_groups, &br->members, &br->n_members) < 0)
        return -ENOMEM;
    br->n_culprits = count_culprits(b, br->members, br->n_members);
    for (;;) {
        if (nd->frame) {
            br = &t->branches[self];
            const hdx_frame **f = hdx_append((void **)&br->frames, &br->n_frames, sizeof *f);
            if (!f)
                return -ENOMEM;
            *f = nd->frame;
        }
        if (nd->n_children != 1 || b->nodes[nd->first_child].count != nd->count)
            break;
        at = nd->first_child;
        nd = &b->nodes[at];
    }
    br = &t->branches[self];
    if (members_of(b, nd->ending, nd->n_ending, &br->ends, &br->n_ends) < 0)
        return -ENOMEM;
    br->n_culprit_ends = count_culprits(b, br->ends, br->n_ends);
    if (!nd->n_children)
        return self;
    const node **kids = malloc(nd->n_children * sizeof *kids);
    size_t n_kids = 0;
    if (!kids || !(br->children = malloc(nd->n_children * sizeof *br->children))) {
        free(kids);
        return -ENOMEM;
    }
    for (size_t c = nd->first_child; c; c = b->nodes[c].next_sibling)
        kids[n_kids++] = &b->nodes[c];
    qsort(kids, n_kids, sizeof *kids, cmp_sibling);
    for (size_t k = 0; k < n_kids; k++) {
        long child = emit(b, (size_t)(kids[k] - b->nodes), self, level + 1);
        if (child < 0) {
            free(kids);
            return child;
        }
        br = &t->branches[self];
        br->children[br->n_children++] = (size_t)child;
    }
    free(kids);
    return self;
}

int hdx_tree_build(const hdx_evidence *ev, const hdx_verdict *v, hdx_tree *t)
{
    memset(t, 0, sizeof *t);
    hdx_group *g = NULL;
    size_t ng = 0;
    builder b = {0};
    int *culprits = NULL, rc = hdx_groups_make(ev, &g, &ng);
    if (rc < 0)
        return rc;
    b.g = g;
    b.t = t;
    b.by_pid = 1;
    for (size_t i = 0; i < ng && b.by_pid; i++)
        b.by_pid = g[i].n_ranks == 0;
    t->by_pid = b.by_pid;
    const int *cv = v ? (b.by_pid ? v->culprit_pids : v->culprit_ranks) : NULL;
    b.n_culprits = v ? (b.by_pid ? v->n_culprit_pids : v->n_culprit_ranks) : 0;
    rc = -ENOMEM;
    if (b.n_culprits && !(culprits = malloc(b.n_culprits * sizeof *culprits)))
        goto out;
    if (b.n_culprits) {
        memcpy(culprits, cv, b.n_culprits * sizeof *culprits);
        qsort(culprits, b.n_culprits, sizeof *culprits, hdx_cmp_int);
    }
    b.culprits = culprits;
    if (build_trie(&b, ng) < 0)
        goto out;
    rc = 0;
    if (b.nodes[0].count && emit(&b, 0, -1, 0) < 0)
        rc = -ENOMEM;
out:
    for (size_t i = 0; i < b.n_nodes; i++) {
        free(b.nodes[i].groups);
        free(b.nodes[i].ending);
    }
    free(b.nodes);
    free(culprits);
    hdx_groups_free(g, ng);
    return rc;
}

int hdx_tree_path(const hdx_tree *t, size_t b, const hdx_frame ***out, size_t *n)
{
    size_t total = 0;
    for (long at = (long)b; at >= 0; at = t->branches[at].parent)
        total += t->branches[at].n_frames;
    *out = NULL;
    *n = total;
    if (!total)
        return 0;
    if (!(*out = malloc(total * sizeof **out)))
        return -ENOMEM;
    size_t w = total; /* filled from the innermost branch back */
    for (long at = (long)b; at >= 0; at = t->branches[at].parent) {
        const hdx_tree_branch *br = &t->branches[at];
        w -= br->n_frames;
        if (br->n_frames) /* memcpy wants an array, even of none */
            memcpy(*out + w, br->frames, br->n_frames * sizeof *br->frames);
    }
    return 0;
}

void hdx_tree_free(hdx_tree *t)
{
    for (size_t i = 0; t && i < t->n_branches; i++) {
        free(t->branches[i].frames);
        free(t->branches[i].members);
        free(t->branches[i].ends);
        free(t->branches[i].children);
    }
    if (t) {
        free(t->branches);
        memset(t, 0, sizeof *t);
    }
}

static const char *last_component(const char *path)
{
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}

const char *hdx_tree_frame_label(const hdx_frame *f, char *buf, size_t size)
{
    const char *fn = f->function ? f->function : "??";
    if (f->kind == HDX_FRAME_PYTHON && f->file && f->line > 0)
        snprintf(buf, size, "%s (%s:%d)", fn, last_component(f->file), f->line);
    else if (f->kind == HDX_FRAME_NATIVE && f->module)
        snprintf(buf, size, "%s [%s]", fn, last_component(f->module));
    else
        snprintf(buf, size, "%s", fn);
    return buf;
}

const char *hdx_tree_members_noun(const hdx_tree *t, size_t n)
{
    if (t->by_pid)
        return n == 1 ? "process" : "processes";
    return n == 1 ? "rank" : "ranks";
}
