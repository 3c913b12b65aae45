/*
 * FNV-1a, 64 bits: the one string hash of the shim and the inspector.
 *
 * From the FNV specification (Fowler, Noll, Vo;
 * http://www.isthe.com/chongo/tech/comp/fnv/): start from the offset basis;
 * for each byte, XOR it into the hash, then multiply by the FNV prime (mod 2^64).
 * Not a cryptographic hash: it spreads keys over hash-table slots.
 *
 * Header-only and safe in the shim (preload/): no libc, no allocation, no
 * state, so it may run in a signal handler or a vfork child.
 */
#ifndef HANGDX_FNV_H
#define HANGDX_FNV_H

#include <stddef.h>
#include <stdint.h>

#define HDX_FNV1A_OFFSET_BASIS 14695981039346656037ULL /* 0xcbf29ce484222325 */
#define HDX_FNV1A_PRIME 1099511628211ULL               /* 0x100000001b3 */

/*
 * hdx_fnv1a: the FNV-1a hash of the n bytes at p, continued from h.
 * Takes: p, n bytes (p may be NULL when n is 0); h, HDX_FNV1A_OFFSET_BASIS to
 * start, or a hash this function returned, to hash several pieces as one.
 * Returns: the hash; any 64-bit value, 0 included. Never fails; reads p only.
 */
static inline uint64_t hdx_fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * HDX_FNV1A_PRIME;
    return h;
}

#endif
