/*
 * A pool: memory handed out in bulk and released at once, with interned
 * strings (one copy of each distinct string). The evidence keeps one for what
 * loaded snapshots share: function, file and module names and Python locals,
 * which repeat across the threads and ranks of a job (3.3 M frames of an
 * 8192-rank job hold a few hundred distinct names). Freeing the pool frees
 * them all, without a free() per frame.
 *
 * Not thread-safe: one pool per thread at a time (a loader thread fills the
 * pool of the evidence it loads).
 */
#ifndef HDX_POOL_H
#define HDX_POOL_H

#include <stddef.h>

typedef struct hdx_pool hdx_pool;

/* An empty pool. NULL with errno ENOMEM. */
hdx_pool *hdx_pool_new(void);

/* Release the pool and everything it handed out. Accepts NULL. */
void hdx_pool_free(hdx_pool *pool);

/* size bytes, aligned for any type, uninitialised; valid until the pool (or the pool that
 * absorbed it) is freed. size 0 gives a valid unique pointer. NULL on ENOMEM. */
void *hdx_pool_alloc(hdx_pool *pool, size_t size);

/* The pool's copy of the len bytes at s plus a NUL: the same pointer for equal strings
 * interned in this pool. s need not be NUL-terminated. NULL on ENOMEM. */
char *hdx_pool_intern(hdx_pool *pool, const char *s, size_t len);

/* Move everything src handed out into dst (it is then freed with dst). src stays a valid,
 * empty pool; strings interned in src are not known to dst's interning. */
void hdx_pool_absorb(hdx_pool *dst, hdx_pool *src);

/* Forget everything the pool handed out and its interned strings, keeping its largest
 * block for what comes next (a parser's scratch memory, reused per input). */
void hdx_pool_reset(hdx_pool *pool);

/* 1 when a pool of the process released memory (free, reset) since *seen was set, and *seen
 * set to now; else 0. A cache keyed by pooled pointers stays right while this says 0, and
 * empties itself when it says 1 (*seen: the cache's own, 0 at first). */
int hdx_pool_epoch_moved(unsigned long *seen);

/* Bytes the pool holds (its blocks), for measurements. */
size_t hdx_pool_size(const hdx_pool *pool);

#endif
