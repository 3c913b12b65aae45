/*
 * The three line-table formats of CPython 3.8–3.14 (docs/python-frames.md "Line numbers"). Pure
 * functions on a copy of the table: no target memory is touched here.
 */
#include "python/python.h"

int hdx_py_lnotab_line(const uint8_t *tab, size_t len, int firstlineno, int lasti_bytes)
{
    /* 3.8/3.9: addr += a; stop once addr passes lasti; else line += (int8)l. */
    int line = firstlineno, addr = 0;
    for (size_t i = 0; i + 1 < len; i += 2) {
        addr += tab[i];
        if (addr > lasti_bytes)
            break;
        line += (int8_t)tab[i + 1];
    }
    return line;
}

int hdx_py_linetable310_line(const uint8_t *tab, size_t len, int firstlineno, int lasti_units)
{
    if (lasti_units < 0)
        return firstlineno;
    /* Ranges [start, end) in bytes; -128 means "no line" for that range. */
    long addr = 2L * lasti_units, start = 0, end = 0;
    int line = firstlineno, ar_line = -1;
    for (size_t i = 0; i + 1 < len; i += 2) {
        start = end;
        end += tab[i];
        int8_t d = (int8_t)tab[i + 1];
        if (d == -128) {
            ar_line = -1;
        } else {
            line += d;
            ar_line = line;
        }
        if (start <= addr && addr < end)
            return ar_line < 0 ? 0 : ar_line;
    }
    return 0;
}

/* 6-bit little-endian chunks, bit 6 = more. Returns the bytes used (0 at the end). */
static size_t read_varint(const uint8_t *p, size_t left, unsigned *out)
{
    unsigned v = 0, shift = 0;
    size_t i = 0;
    while (i < left) {
        uint8_t b = p[i++];
        if (shift < 32)
            v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64)) {
            *out = v;
            return i;
        }
    }
    return 0;
}

static int signed_varint(unsigned v)
{
    return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

int hdx_py_loctable_line(const uint8_t *tab, size_t len, int firstlineno, int addr_units)
{
    if (addr_units < 0)
        return firstlineno;
    long start = 0, line = firstlineno;
    size_t i = 0;
    while (i < len) {
        uint8_t b = tab[i];
        if (!(b & 0x80))
            return 0; /* not the first byte of an entry: a corrupt table */
        int code = (b >> 3) & 15;
        long n = (b & 7) + 1; /* code units */
        int delta = 0, noline = 0;
        if (code == 15) {
            noline = 1;
        } else if (code == 14 || code == 13) {
            unsigned v;
            if (!read_varint(tab + i + 1, len - i - 1, &v))
                return 0;
            delta = signed_varint(v);
        } else if (code >= 10) {
            delta = code - 10;
        }
        line += delta;
        if (line < -(1L << 30) || line > (1L << 30))
            return 0; /* a corrupt table */
        if (start <= addr_units && addr_units < start + n)
            return noline ? 0 : (int)line;
        start += n;
        /* The rest of the entry: bytes with bit 7 clear. */
        for (i++; i < len && !(tab[i] & 0x80); i++)
            ;
    }
    return 0;
}
