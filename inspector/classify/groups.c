#include "classify/groups.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hangdx/fnv.h"
#include "model/index.h"
#include "model/util.h"
#include "classify/waits.h"

const hdx_thread *hdx_key_thread(const hdx_process *p)
{
    for (size_t i = 0; i < p->n_threads; i++)
        if (p->threads[i].wait && !hdx_wait_is_background(p->threads[i].wait))
            return &p->threads[i];
    return p->n_threads ? &p->threads[0] : NULL;
}

int hdx_frame_same(const hdx_frame *a, const hdx_frame *b)
{
    if (a->kind != b->kind || !hdx_str_same(a->function, b->function))
        return 0;
    return a->kind != HDX_FRAME_PYTHON || (a->line == b->line && hdx_str_same(a->file, b->file));
}

/* s and a terminator, so that ("ab", "c") and ("a", "bc") hash apart. */
static uint64_t hash_str(uint64_t h, const char *s)
{
    static const unsigned char end = 0xff;
    h = s ? hdx_fnv1a(s, strlen(s), h) : h;
    return hdx_fnv1a(&end, 1, h);
}

uint64_t hdx_frame_hash(uint64_t h, const hdx_frame *f)
{
    unsigned char kind = (unsigned char)f->kind;
    h = hash_str(hdx_fnv1a(&kind, 1, h), f->function);
    if (f->kind == HDX_FRAME_PYTHON)
        h = hdx_fnv1a(&f->line, sizeof f->line, hash_str(h, f->file));
    return h;
}

static int same_stack(const hdx_thread *a, const hdx_thread *b)
{
    if (a->n_frames != b->n_frames || !hdx_str_same(a->wait, b->wait))
        return 0;
    for (size_t i = 0; i < a->n_frames; i++)
        if (!hdx_frame_same(&a->frames[i], &b->frames[i]))
            return 0;
    return 1;
}

static int cmp_group(const void *a, const void *b)
{
    const hdx_group *x = a, *y = b;
    if (x->n_pids != y->n_pids)
        return x->n_pids < y->n_pids ? 1 : -1;
    return (x->first > y->first) - (x->first < y->first); /* then in evidence order */
}

void hdx_groups_free(hdx_group *g, size_t n)
{
    for (size_t i = 0; g && i < n; i++) {
        free(g[i].ranks);
        free(g[i].pids);
    }
    free(g);
}

/* First frame, from the outermost in, where a's path leaves b's; -1 when none. */
static long divergence(const hdx_thread *a, const hdx_thread *b)
{
    size_t i = 0;
    while (i < a->n_frames && i < b->n_frames &&
           hdx_frame_same(&a->frames[a->n_frames - 1 - i], &b->frames[b->n_frames - 1 - i]))
        i++;
    if (i >= a->n_frames)
        return -1;
    return (long)(a->n_frames - 1 - i);
}

int hdx_groups_make(const hdx_evidence *ev, hdx_group **out, size_t *n_out)
{
    hdx_group *g = NULL;
    size_t n = 0;
    hdx_index table = {0}; /* stack hash -> index in g */
    if (hdx_index_reserve(&table, ev->n_procs) < 0)
        return -ENOMEM;

    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        const hdx_thread *t = hdx_key_thread(p);
        if (!t || p->alive == 0 || p->set_aside)
            continue;
        uint64_t h = hdx_stack_hash(t);
        hdx_group *grp = NULL;
        size_t cur = 0, at;
        while ((at = hdx_index_find(&table, h, &cur)) != HDX_INDEX_NONE)
            if (same_stack(g[at].key, t)) {
                grp = &g[at];
                break;
            }
        if (!grp) {
            if (!(grp = hdx_append((void **)&g, &n, sizeof *grp)))
                goto nomem;
            grp->first = p;
            grp->key = t;
            grp->diverges_at = -1;
            if (hdx_index_insert(&table, h, n - 1) < 0)
                goto nomem;
        }
        int *pid = hdx_append((void **)&grp->pids, &grp->n_pids, sizeof *pid);
        if (!pid)
            goto nomem;
        *pid = p->pid;
        if (p->is_rank_process) {
            int *r = hdx_append((void **)&grp->ranks, &grp->n_ranks, sizeof *r);
            if (!r)
                goto nomem;
            *r = p->rank;
        }
    }
    hdx_index_free(&table);
    if (n)
        qsort(g, n, sizeof *g, cmp_group);
    for (size_t i = 1; i < n; i++)
        g[i].diverges_at = divergence(g[i].key, g[0].key);
    *out = g;
    *n_out = n;
    return 0;
nomem:
    hdx_index_free(&table);
    hdx_groups_free(g, n);
    return -ENOMEM;
}
