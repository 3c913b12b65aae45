/*
 * A hash index: from a 64-bit hash to positions ("slots") in an array the caller owns. The
 * one hash table of the inspector (the pool's interned strings, the evidence's process
 * lookups, stack groups, snapshot tables): the caller keeps its entries in its own array and
 * their keys' hashes here; the index only says where to look, the caller compares keys.
 *
 * Several entries may share a hash (equal keys, or different keys whose hashes collide):
 * hdx_index_find hands them out one by one, in no particular order. The hash need not be
 * uniform in its low bits (a pointer, a pid): the index mixes it.
 *
 * Open addressing with linear probing, at most half full: insert and find take expected
 * O(1) (find: per entry handed out); growing rehashes every entry, O(n), amortised O(1)
 * per insert. Memory: 16 bytes per table slot, 2 to 4 slots per entry.
 *
 * Ownership: an hdx_index is a value the caller owns (zero-initialised: an empty index);
 * its arrays belong to it and go with hdx_index_free. Not thread-safe; finds on an index
 * that nothing modifies may run in parallel.
 */
#ifndef HDX_INDEX_H
#define HDX_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct hdx_index {
    uint64_t *hashes; /* the mixed hash of each table slot's entry */
    size_t *slots;    /* 1 + the caller's slot; 0: an empty table slot */
    size_t cap;       /* table slots: 0 or a power of two */
    size_t count;     /* entries */
} hdx_index;

/* Spread every bit of h over the low bits (the finaliser of MurmurHash3, fmix64): a
 * bijection, so distinct hashes stay distinct. For combining the parts of a key's hash; the
 * index mixes each hash it is given itself. */
static inline uint64_t hdx_hash_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

#define HDX_INDEX_NONE SIZE_MAX /* hdx_index_find: no (more) entry with that hash */

/*
 * hdx_index_insert: add an entry: hash (any value) at the caller's slot (any value but
 * HDX_INDEX_NONE). Does not look for an entry already there: a hash inserted twice is
 * found twice. Grows the table when it would be more than half full.
 * Returns 0, -EINVAL when slot is HDX_INDEX_NONE, or -ENOMEM; on error the index is as it was.
 */
int hdx_index_insert(hdx_index *x, uint64_t hash, size_t slot);

/*
 * hdx_index_find: the next entry with this hash. *cursor is the caller's iteration state:
 * set it to 0 before the first call for a hash, and pass it back unchanged for the next.
 * Returns the entry's slot, or HDX_INDEX_NONE when there is none (more). Never fails;
 * x may be empty (zeroed). Inserting between calls restarts nothing: set *cursor to 0.
 */
size_t hdx_index_find(const hdx_index *x, uint64_t hash, size_t *cursor);

/*
 * hdx_index_reserve: make room for n entries in all, so that inserting up to n entries
 * allocates nothing. Returns 0, or -ENOMEM (the index is as it was).
 */
int hdx_index_reserve(hdx_index *x, size_t n);

/* hdx_index_clear: forget every entry, keeping the memory. Accepts NULL. */
void hdx_index_clear(hdx_index *x);

/* hdx_index_free: release the index's memory; x is then an empty index again. Accepts NULL. */
void hdx_index_free(hdx_index *x);

#endif
