/* Bulk memory with interned strings (pool.h). */
#include "model/pool.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hangdx/fnv.h"
#include "model/index.h"
#include "model/util.h"

#define BLOCK_MIN (64u * 1024)
#define ALIGN 16u

struct block {
    struct block *next;
    size_t size, used; /* bytes of data[] */
    _Alignas(16) unsigned char data[];
};

struct hdx_pool {
    struct block *blocks; /* the current block first */
    size_t total;
    /* Interned strings, in the order interned, and their index (FNV-1a of the bytes). */
    struct interned {
        char *s;
        size_t len;
    } *strs;
    size_t count;
    hdx_index index;
};

hdx_pool *hdx_pool_new(void)
{
    return calloc(1, sizeof(hdx_pool));
}

static atomic_ulong epoch;

int hdx_pool_epoch_moved(unsigned long *seen)
{
    unsigned long e = atomic_load_explicit(&epoch, memory_order_acquire);
    if (e == *seen)
        return 0;
    *seen = e;
    return 1;
}

static void free_blocks(struct block *b)
{
    if (b)
        atomic_fetch_add_explicit(&epoch, 1, memory_order_release);
    while (b) {
        struct block *next = b->next;
        free(b);
        b = next;
    }
}

void hdx_pool_free(hdx_pool *pool)
{
    if (!pool)
        return;
    free_blocks(pool->blocks);
    free(pool->strs);
    hdx_index_free(&pool->index);
    free(pool);
}

/* A block with room for need bytes made pool's current one (or put behind it), or NULL on
 * ENOMEM. Kept out of hdx_pool_alloc, which then takes 20 instructions, not 32: the cJSON
 * arenas of analyze --json of 8192 ranks make 9.3 M allocations. */
static __attribute__((noinline)) struct block *new_block(hdx_pool *pool, size_t need)
{
    struct block *b = pool->blocks;
    /* Blocks grow with the pool (1/8 of it), so a big pool needs few of them. */
    size_t bs = pool->total / 8 > BLOCK_MIN ? pool->total / 8 : BLOCK_MIN;
    if (bs < need)
        bs = need;
    if (bs > SIZE_MAX - sizeof *b) {
        errno = ENOMEM;
        return NULL;
    }
    struct block *nb = malloc(sizeof *nb + bs);
    if (!nb)
        return NULL;
    nb->size = bs;
    nb->used = 0;
    /* A large single allocation goes behind the current block, which keeps its room. */
    if (b && need > BLOCK_MIN && b->size - b->used >= BLOCK_MIN / 4) {
        nb->next = b->next;
        b->next = nb;
    } else {
        nb->next = b;
        pool->blocks = nb;
    }
    pool->total += bs;
    return nb;
}

void *hdx_pool_alloc(hdx_pool *pool, size_t size)
{
    size_t need = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (need < size) {
        errno = ENOMEM;
        return NULL;
    }
    if (!need)
        need = ALIGN;
    struct block *b = pool->blocks;
    if ((!b || b->size - b->used < need) && !(b = new_block(pool, need)))
        return NULL;
    void *p = b->data + b->used;
    b->used += need;
    return p;
}

char *hdx_pool_intern(hdx_pool *pool, const char *s, size_t len)
{
    uint64_t h = hdx_fnv1a(s, len, HDX_FNV1A_OFFSET_BASIS);
    size_t cur = 0, at;
    while ((at = hdx_index_find(&pool->index, h, &cur)) != HDX_INDEX_NONE)
        if (pool->strs[at].len == len && !memcmp(pool->strs[at].s, s, len))
            return pool->strs[at].s;
    /* reserved first: the insert below cannot fail */
    struct interned *e = NULL;
    char *copy = NULL;
    if (hdx_index_reserve(&pool->index, pool->count + 1) < 0 || !(copy = hdx_pool_alloc(pool, len + 1)) ||
        !(e = hdx_append((void **)&pool->strs, &pool->count, sizeof *e))) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = 0;
    e->s = copy;
    e->len = len;
    hdx_index_insert(&pool->index, h, pool->count - 1);
    return copy;
}

void hdx_pool_absorb(hdx_pool *dst, hdx_pool *src)
{
    if (!dst || !src || dst == src || !src->blocks)
        return;
    /* src's blocks go behind dst's current one: dst keeps allocating where it was. */
    struct block *last = src->blocks;
    while (last->next)
        last = last->next;
    if (dst->blocks) {
        last->next = dst->blocks->next;
        dst->blocks->next = src->blocks;
    } else {
        dst->blocks = src->blocks;
    }
    dst->total += src->total;
    src->blocks = NULL;
    src->total = 0;
    free(src->strs);
    src->strs = NULL;
    src->count = 0;
    hdx_index_free(&src->index);
}

size_t hdx_pool_size(const hdx_pool *pool)
{
    return pool ? pool->total : 0;
}

void hdx_pool_reset(hdx_pool *pool)
{
    if (!pool)
        return;
    struct block *keep = NULL, **link = &pool->blocks;
    for (struct block *b = pool->blocks; b; b = b->next)
        if (!keep || b->size > keep->size)
            keep = b;
    while (*link) {
        struct block *b = *link;
        if (b == keep) {
            link = &b->next;
            continue;
        }
        *link = b->next;
        atomic_fetch_add_explicit(&epoch, 1, memory_order_release);
        free(b);
    }
    if (keep) {
        keep->next = NULL;
        keep->used = 0; /* reused: what it held is gone */
        atomic_fetch_add_explicit(&epoch, 1, memory_order_release);
    }
    pool->total = keep ? keep->size : 0;
    hdx_index_clear(&pool->index);
    pool->count = 0; /* strs keeps its memory */
}
