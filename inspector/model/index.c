/* The hash index (index.h). */
#include "model/index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Place a mixed hash in a table that has room; no growth. */
static void place(uint64_t *hashes, size_t *slots, size_t cap, uint64_t m, size_t slot1)
{
    size_t s = (size_t)m & (cap - 1);
    while (slots[s])
        s = (s + 1) & (cap - 1);
    hashes[s] = m;
    slots[s] = slot1;
}

/* A table of cap slots (a power of two, more than twice count) with every entry moved in. */
static int rehash(hdx_index *x, size_t cap)
{
    uint64_t *hashes = malloc(cap * sizeof *hashes);
    size_t *slots = calloc(cap, sizeof *slots);
    if (!hashes || !slots) {
        free(hashes);
        free(slots);
        return -ENOMEM;
    }
    for (size_t i = 0; i < x->cap; i++)
        if (x->slots[i])
            place(hashes, slots, cap, x->hashes[i], x->slots[i]);
    free(x->hashes);
    free(x->slots);
    x->hashes = hashes;
    x->slots = slots;
    x->cap = cap;
    return 0;
}

int hdx_index_reserve(hdx_index *x, size_t n)
{
    if (n > SIZE_MAX / 4 / sizeof(uint64_t))
        return -ENOMEM;
    size_t cap = x->cap ? x->cap : 16;
    while (n * 2 > cap)
        cap *= 2;
    return cap == x->cap ? 0 : rehash(x, cap);
}

int hdx_index_insert(hdx_index *x, uint64_t hash, size_t slot)
{
    if (slot == HDX_INDEX_NONE)
        return -EINVAL;
    if ((x->count + 1) * 2 > x->cap) {
        int rc = hdx_index_reserve(x, x->count + 1);
        if (rc < 0)
            return rc;
    }
    place(x->hashes, x->slots, x->cap, hdx_hash_mix(hash), slot + 1);
    x->count++;
    return 0;
}

size_t hdx_index_find(const hdx_index *x, uint64_t hash, size_t *cursor)
{
    if (!x->cap)
        return HDX_INDEX_NONE;
    uint64_t m = hdx_hash_mix(hash);
    size_t s = *cursor ? *cursor - 1 : (size_t)m & (x->cap - 1);
    for (; x->slots[s]; s = (s + 1) & (x->cap - 1))
        if (x->hashes[s] == m) {
            *cursor = ((s + 1) & (x->cap - 1)) + 1;
            return x->slots[s] - 1;
        }
    *cursor = s + 1; /* an empty table slot: the next call ends here too */
    return HDX_INDEX_NONE;
}

void hdx_index_clear(hdx_index *x)
{
    if (!x)
        return;
    if (x->slots)
        memset(x->slots, 0, x->cap * sizeof *x->slots);
    x->count = 0;
}

void hdx_index_free(hdx_index *x)
{
    if (!x)
        return;
    free(x->hashes);
    free(x->slots);
    memset(x, 0, sizeof *x);
}
