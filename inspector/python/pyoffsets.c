/*
 * One table of CPython offsets per version (docs/python-frames.md "Offsets", "Locals"), chosen
 * once at attach time and read through hdx_pyoffs: static tables for
 * 3.8–3.12, and for 3.13+ a table filled from the target's own
 * _Py_DebugOffsets (docs/python-frames.md "Debug offsets"), validated first.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "python/pyimpl.h"

/* gilstate.tstate_current comes after the GIL's pthread_mutex_t, which is
 * 40 bytes on x86-64 glibc and 48 on aarch64 (docs/python-frames.md "Offsets"); every other offset is
 * the same on both. */
#if defined(__aarch64__)
#define GIL_TSTATE_38 1384
#define GIL_TSTATE_39 584
#define GIL_TSTATE_311 592
#else
#define GIL_TSTATE_38 1368
#define GIL_TSTATE_39 568
#define GIL_TSTATE_311 576
#endif

#define N HDX_PYOFF_NONE

/* Fields every version 3.8–3.14 shares (PyObject, tuple, bytes, float, int, str, cell). */
#define COMMON_OBJECTS                                                                            \
    .ob_type = 8, .ob_size = 16, .tp_name = 24, .tuple_item = 24, .bytes_sval = 32,               \
    .float_fval = 16, .long_digits = 24, .str_length = 16, .str_state = 32, .cell_ref = 16,       \
    TYPE_LIST_DICT_313

/* The object reader's fields that are the same in 3.8–3.13 (docs/python-objects.md). */
#define TYPE_LIST_DICT_313                                                                        \
    .tp_basicsize = 32, .tp_flags = 168, .tp_dict = 264, .tp_dictoffset = 288, .tp_mro = 344,      \
    .list_item = 24, .md_dict = 16, .dict_keys = 32, .dict_values = 40

/* 3.8–3.10 dicts: dk_size, 24-byte entries, split values a plain PyObject* array. */
#define DICT_SIZE                                                                                 \
    .dk_size = 8, .dk_log2_size = N, .dk_log2_index_bytes = N, .dk_kind = N, .dk_nentries = 32,   \
    .dk_indices = 40, .dv_values = 0, .dv_valid = N, .mgd_dict = N, .mgd_values = N,              \
    .mgd_tagged = 0, .inline_values = 0

/* 3.11+ dicts: dk_log2_size, dk_log2_index_bytes, dk_kind. */
#define DICT_LOG2                                                                                 \
    .dk_size = N, .dk_log2_size = 8, .dk_log2_index_bytes = 9, .dk_kind = 10, .dk_nentries = 24,  \
    .dk_indices = 32

/* 3.8–3.10: PyFrameObject, co_varnames; no qualname, no GIL pointer. */
#define FRAMEOBJ_COMMON                                                                           \
    .rt_finalizing = 16, .rt_interp_head = 32, .is_next = 0, .is_threads_head = 8,                \
    .is_gil_ptr = N, .is_gil_locked = N, .is_gil_holder = N,                                      \
    .ts_next = 8, .ts_interp = 16, .ts_frame = 24, .cf_current_frame = N, .ts_thread_id = 176,    \
    .ts_native_tid = N, .frame_kind = HDX_PYF_FRAMEOBJ, .fo_back = 24, .fo_code = 32,             \
    .if_previous = N, .if_code = N, .if_instr = N, .if_is_entry = N, .if_owner = N,               \
    .if_localsplus = N, .owner_shim_lo = -1, .owner_shim_hi = -1, .tag_mask = ~(uint64_t)0,       \
    .co_firstlineno = 40, .co_filename = 104, .co_name = 112, .co_qualname = N,                   \
    .co_linetable = 120, .co_code = 48, .co_code_adaptive = N, .co_nlocals = 28,                  \
    .co_varnames = 72, .co_freevars = 80, .co_cellvars = 88, .co_nlocalsplus = N,                 \
    .co_localsplusnames = N, .co_localspluskinds = N, .long_lv_tag = 0,                           \
    .str_ascii_size = 48, .str_compact_size = 72, COMMON_OBJECTS, DICT_SIZE

static const hdx_pyoffs py38 = {
    .version = 0x0308, FRAMEOBJ_COMMON, .rt_gil_tstate = GIL_TSTATE_38, .is_id = 16,
    .fo_lasti = 104, .fo_localsplus = 360, .lines = HDX_PYL_LNOTAB,
    .is_modules = 56, .ht_cached_keys = 872, .func_qualname = 104,
};

static const hdx_pyoffs py39 = {
    .version = 0x0309, FRAMEOBJ_COMMON, .rt_gil_tstate = GIL_TSTATE_39, .is_id = 24,
    .fo_lasti = 104, .fo_localsplus = 360, .lines = HDX_PYL_LNOTAB,
    .is_modules = 856, .ht_cached_keys = 864, .func_qualname = 104,
};

static const hdx_pyoffs py310 = {
    .version = 0x030a, FRAMEOBJ_COMMON, .rt_gil_tstate = GIL_TSTATE_39, .is_id = 24,
    .fo_lasti = 96, .fo_localsplus = 352, .lines = HDX_PYL_LINETABLE310,
    .is_modules = 856, .ht_cached_keys = 872, .func_qualname = 40,
};

/* 3.11+: _PyInterpreterFrame, co_localsplus*, PEP 657 line tables. */
#define IFRAME_COMMON                                                                             \
    .rt_finalizing = 24, .rt_interp_head = 40, .is_next = 0, .ts_next = 8, .ts_interp = 16,       \
    .ts_frame = 56, .frame_kind = HDX_PYF_IFRAME, .fo_back = N, .fo_code = N, .fo_lasti = N,      \
    .fo_localsplus = N, .if_instr = 56, .if_localsplus = 72, .instr_is_prev = 1,                  \
    .tag_mask = ~(uint64_t)0, .co_filename = 112, .co_name = 120, .co_qualname = 128,             \
    .co_linetable = 136, .co_code = N, .co_nlocals = N, .co_varnames = N, .co_freevars = N,       \
    .co_cellvars = N, .co_localsplusnames = 96, .co_localspluskinds = 104,                        \
    .lines = HDX_PYL_LOCATIONS, COMMON_OBJECTS, DICT_LOG2, .dv_values = 0, .dv_valid = N,          \
    .inline_values = 0, .func_qualname = 40

static const hdx_pyoffs py311 = {
    .version = 0x030b, IFRAME_COMMON, .rt_gil_tstate = GIL_TSTATE_311,
    .is_threads_head = 16, .is_id = 48, .is_gil_ptr = N, .is_gil_locked = N, .is_gil_holder = N,
    .cf_current_frame = 8, .ts_thread_id = 152, .ts_native_tid = 160,
    .if_previous = 48, .if_code = 32, .if_is_entry = 68, .if_owner = 69,
    .owner_shim_lo = -1, .owner_shim_hi = -1,
    .co_firstlineno = 72, .co_code_adaptive = 184, .co_nlocalsplus = 76,
    .long_lv_tag = 0, .str_ascii_size = 48, .str_compact_size = 72,
    .is_modules = 888, .ht_cached_keys = 872, .mgd_dict = -24, .mgd_values = -32, .mgd_tagged = 0,
};

/* 3.12: is->ceval.gil points to _gil_runtime_state {interval, last_holder, locked}. */
static const hdx_pyoffs py312 = {
    .version = 0x030c, IFRAME_COMMON, .rt_gil_tstate = N,
    .is_threads_head = 72, .is_id = 8, .is_gil_ptr = 384, .is_gil_locked = 16, .is_gil_holder = 8,
    .cf_current_frame = 0, .ts_thread_id = 136, .ts_native_tid = 144,
    .if_previous = 8, .if_code = 0, .if_is_entry = N, .if_owner = 70,
    .owner_shim_lo = 3, .owner_shim_hi = 3,
    .co_firstlineno = 68, .co_code_adaptive = 192, .co_nlocalsplus = 72,
    .long_lv_tag = 1, .str_ascii_size = 40, .str_compact_size = 56,
    .is_modules = 944, .ht_cached_keys = 880, .mgd_dict = -24, .mgd_values = N, .mgd_tagged = 1,
};

const hdx_pyoffs *hdx_pyoffs_static(int minor)
{
    switch (minor) {
    case 8: return &py38;
    case 9: return &py39;
    case 10: return &py310;
    case 11: return &py311;
    case 12: return &py312;
    default: return NULL;
    }
}

/* ------------------------------------------------------ _Py_DebugOffsets */

/*
 * Positions inside _Py_DebugOffsets (every member a uint64_t but the cookie),
 * per minor version: 3.13 (584 bytes) and 3.14 (760 bytes), docs/python-frames.md "Debug offsets". Each used
 * field names the position of its value, of its group's size, and the width
 * of the field in the target struct, for the "field + width <= size" check.
 */
typedef struct do_field {
    size_t dst;       /* offsetof(hdx_pyoffs, ...) */
    int pos[2];       /* position in 3.13, 3.14 */
    int size_pos[2];  /* position of the group's size */
    int width;        /* bytes of the field in the target struct */
} do_field;

#define F(member, p13, p14, s13, s14, w)                                                          \
    { offsetof(hdx_pyoffs, member), { p13, p14 }, { s13, s14 }, w }

static const do_field do_fields[] = {
    /* runtime_state (size 24 in both) */
    F(rt_finalizing, 32, 32, 24, 24, 8),
    F(rt_interp_head, 40, 40, 24, 24, 8),
    /* interpreter_state (size 48) */
    F(is_id, 56, 56, 48, 48, 8),
    F(is_next, 64, 64, 48, 48, 8),
    F(is_threads_head, 72, 72, 48, 48, 8),
    F(is_gil_locked, 136, 144, 48, 48, 4),
    F(is_gil_holder, 144, 152, 48, 48, 8),
    /* thread_state (size 152 / 176) */
    F(ts_next, 168, 192, 152, 176, 8),
    F(ts_interp, 176, 200, 152, 176, 8),
    F(ts_frame, 184, 208, 152, 176, 8),
    F(ts_thread_id, 192, 216, 152, 176, 8),
    F(ts_native_tid, 200, 224, 152, 176, 8),
    /* interpreter_frame (size 224 / 248) */
    F(if_previous, 232, 256, 224, 248, 8),
    F(if_code, 240, 264, 224, 248, 8),
    F(if_instr, 248, 272, 224, 248, 8),
    F(if_localsplus, 256, 280, 224, 248, 8),
    F(if_owner, 264, 288, 224, 248, 1),
    /* code_object (size 272 / 312) */
    F(co_filename, 280, 320, 272, 312, 8),
    F(co_name, 288, 328, 272, 312, 8),
    F(co_qualname, 296, 336, 272, 312, 8),
    F(co_linetable, 304, 344, 272, 312, 8),
    F(co_firstlineno, 312, 352, 272, 312, 4),
    F(co_localsplusnames, 328, 368, 272, 312, 8),
    F(co_localspluskinds, 336, 376, 272, 312, 8),
    F(co_code_adaptive, 344, 384, 272, 312, 2),
    F(is_modules, 88, 96, 48, 48, 8),
    /* pyobject (352 / 400), type_object (368 / 416), tuple_object (400 / 448) */
    F(ob_type, 360, 408, 352, 400, 8),
    F(tp_name, 376, 424, 368, 416, 8),
    F(tp_flags, 392, 440, 368, 416, 8),
    F(tuple_item, 408, 456, 400, 448, 8),
    F(ob_size, 416, 464, 400, 448, 8),
    /* list_object (424 / 472), dict_object (448 / 528) */
    F(list_item, 432, 480, 424, 472, 8),
    F(dict_keys, 456, 536, 448, 528, 8),
    F(dict_values, 464, 544, 448, 528, 8),
    /* float_object (472 / 552), long_object (488 / 568), bytes_object (512 / 592) */
    F(float_fval, 480, 560, 472, 552, 8),
    F(long_digits, 504, 584, 488, 568, 4),
    F(bytes_sval, 528, 608, 512, 592, 1),
    /* unicode_object (536 / 616) */
    F(str_state, 544, 624, 536, 616, 4),
    F(str_length, 552, 632, 536, 616, 8),
};
#undef F

/* long_object.lv_tag must be where ob_size is: checked, not used separately. */
static const int do_lv_tag_pos[2] = { 496, 576 };
/* unicode_object.asciiobject_size: a size, not an offset. */
static const int do_ascii_size_pos[2] = { 560, 640 };
static const size_t do_total[2] = { 584, 760 };

size_t hdx_pydebug_size(int version)
{
    if (version == 0x030d)
        return do_total[0];
    if (version == 0x030e)
        return do_total[1];
    return 0;
}

static uint64_t get_u64(const uint8_t *buf, int pos)
{
    uint64_t v;
    memcpy(&v, buf + pos, sizeof v);
    return v;
}

int hdx_pyoffs_from_debug(const uint8_t *buf, size_t len, hdx_pyoffs *o, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (len < 24 || memcmp(buf, "xdebugpy", 8)) {
        *why = "no \"xdebugpy\" cookie at _PyRuntime";
        return -EINVAL;
    }
    uint64_t hex = get_u64(buf, 8);
    int version = (int)(hex >> 16);
    int col;
    if (version == 0x030d)
        col = 0;
    else if (version == 0x030e)
        col = 1;
    else {
        *why = "a _Py_DebugOffsets version this reader does not know (only 3.13 and 3.14)";
        return -ENOTSUP;
    }
    if (len < do_total[col]) {
        *why = "_Py_DebugOffsets cut short";
        return -EINVAL;
    }
    if (get_u64(buf, 16)) {
        *why = "a free-threaded (no-GIL) build, which this reader does not support";
        return -ENOTSUP;
    }

    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < sizeof do_fields / sizeof do_fields[0]; i++) {
        const do_field *f = &do_fields[i];
        uint64_t size = get_u64(buf, f->size_pos[col]);
        uint64_t off = get_u64(buf, f->pos[col]);
        if (size == 0 || size >= (1u << 20)) {
            *why = "a struct size in _Py_DebugOffsets is 0 or over 1 MiB";
            return -EINVAL;
        }
        if (off + (uint64_t)f->width > size) {
            *why = "a field of _Py_DebugOffsets lies outside its struct";
            return -EINVAL;
        }
        *(int *)((char *)o + f->dst) = (int)off;
    }
    if (get_u64(buf, do_lv_tag_pos[col]) != (uint64_t)o->ob_size) {
        *why = "long_object.lv_tag is not where ob_size is";
        return -EINVAL;
    }
    uint64_t ascii = get_u64(buf, do_ascii_size_pos[col]);
    if (ascii < 32 || ascii > 256) {
        *why = "implausible unicode_object.asciiobject_size";
        return -EINVAL;
    }

    /* What the debug offsets do not say stays per version (docs/python-frames.md "Debug offsets"). */
    o->version = version;
    o->rt_gil_tstate = N;
    o->is_gil_ptr = N; /* locked/holder are relative to the interpreter state (its _gil) */
    o->cf_current_frame = N;
    o->frame_kind = HDX_PYF_IFRAME;
    o->fo_back = o->fo_code = o->fo_lasti = o->fo_localsplus = N;
    o->if_is_entry = N;
    o->instr_is_prev = 0;
    o->owner_shim_lo = 3;                          /* FRAME_OWNED_BY_CSTACK (3.13) */
    o->owner_shim_hi = version >= 0x030e ? 4 : 3;  /* 3.14: INTERPRETER 3, CSTACK 4 */
    o->tag_mask = version >= 0x030e ? ~(uint64_t)3 : ~(uint64_t)0; /* _PyStackRef tags */
    o->co_code = o->co_nlocals = o->co_varnames = o->co_cellvars = o->co_freevars = N;
    o->co_nlocalsplus = N; /* not in the debug offsets: use len(co_localsplusnames) */
    o->lines = HDX_PYL_LOCATIONS;
    o->long_lv_tag = 1;
    o->str_ascii_size = (int)ascii;
    o->str_compact_size = (int)ascii + 16; /* sizeof(PyCompactUnicodeObject), 3.12+ */
    o->cell_ref = 16;

    /* The object reader's other facts (docs/python-objects.md): measured for
     * 3.13; for 3.14 none was measured here, so they stay unknown and the
     * readers that need them answer -ENOTSUP. */
    static const hdx_pyoffs objs313 = {
        TYPE_LIST_DICT_313, DICT_LOG2, .ht_cached_keys = 880, .func_qualname = 40,
        .dv_values = 8, .dv_valid = 3, .mgd_dict = -24, .mgd_values = N, .mgd_tagged = 0,
        .inline_values = 1,
    };
    static const int kept[] = {
        offsetof(hdx_pyoffs, tp_basicsize),
        offsetof(hdx_pyoffs, tp_dict), offsetof(hdx_pyoffs, tp_dictoffset),
        offsetof(hdx_pyoffs, tp_mro), offsetof(hdx_pyoffs, ht_cached_keys),
        offsetof(hdx_pyoffs, md_dict), offsetof(hdx_pyoffs, func_qualname),
        offsetof(hdx_pyoffs, dk_size), offsetof(hdx_pyoffs, dk_log2_size),
        offsetof(hdx_pyoffs, dk_log2_index_bytes), offsetof(hdx_pyoffs, dk_kind),
        offsetof(hdx_pyoffs, dk_nentries), offsetof(hdx_pyoffs, dk_indices),
        offsetof(hdx_pyoffs, dv_values), offsetof(hdx_pyoffs, dv_valid),
        offsetof(hdx_pyoffs, mgd_dict), offsetof(hdx_pyoffs, mgd_values),
    };
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        *(int *)((char *)o + kept[i]) =
            version == 0x030d ? *(const int *)((const char *)&objs313 + kept[i]) : N;
    o->mgd_tagged = 0;
    o->inline_values = version == 0x030d;
    return 0;
}
