/*
 * libFuzzer target: the CPython line tables (hdx_py_lnotab_line,
 * hdx_py_linetable310_line, hdx_py_loctable_line). The first 5 bytes choose
 * the position (i32) and the first line (i8); the rest is the table, given
 * to all three readers at exact size so that ASan sees any overread.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "python/python.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    int32_t pos;
    memcpy(&pos, data, sizeof pos);
    int first = (int8_t)data[4];
    size_t len = size - 5;
    uint8_t *tab = malloc(len ? len : 1);
    if (!tab)
        return 0;
    memcpy(tab, data + 5, len);
    (void)hdx_py_lnotab_line(tab, len, first, pos);
    (void)hdx_py_linetable310_line(tab, len, first, pos);
    (void)hdx_py_loctable_line(tab, len, first, pos);
    free(tab);
    return 0;
}
