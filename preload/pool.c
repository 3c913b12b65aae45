/*
 * The buffers of the recording path. A wrapped call may run in a signal
 * handler on a small alternate stack, or in a thread made with a small stack
 * (docs/design.md "The shim"): the shim keeps no path or line on the stack,
 * but borrows one of HDX_POOL_N static buffers for the time it records. A
 * buffer is claimed with one compare-and-swap on a bit mask: no lock, no
 * allocation, safe in a signal handler and in any thread. The guard of
 * hdx_enter() lets a thread hold at most one, so the pool runs dry only when
 * more than HDX_POOL_N threads record at the same instant; that event is then
 * not recorded, only counted (the exit line's "dropped").
 *
 * The pages of buffers never lent are never touched: a process that records
 * from a few threads at a time keeps a few buffers resident.
 */
#include "shim.h"

_Static_assert(HDX_POOL_N <= 32, "the pool's mask is 32 bits");

static struct hdx_buf pool[HDX_POOL_N];
static atomic_uint lent; /* bit i: pool[i] is lent */
atomic_long hdx_dropped;

int hdx_pool_get(void)
{
    unsigned m = atomic_load_explicit(&lent, memory_order_relaxed);
    for (;;) {
        unsigned free = ~m & ((1u << (HDX_POOL_N - 1) << 1) - 1);
        if (!free)
            return -1;
        int i = __builtin_ctz(free); /* the lowest: as few pages touched as may be */
        if (atomic_compare_exchange_weak_explicit(&lent, &m, m | 1u << i, memory_order_acquire,
                                                  memory_order_relaxed))
            return i;
    }
}

struct hdx_buf *hdx_pool_buf(int i)
{
    return &pool[i];
}

void hdx_pool_put(int i)
{
    if (i >= 0)
        atomic_fetch_and_explicit(&lent, ~(1u << i), memory_order_release);
}

void hdx_pool_reset(int keep)
{
    atomic_store(&lent, keep >= 0 ? 1u << keep : 0u);
    atomic_store(&hdx_dropped, 0);
}
