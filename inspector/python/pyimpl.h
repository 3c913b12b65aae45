/*
 * Internals of the Python reader shared by python.c, pyfind.c, pyoffsets.c
 * and pyobj.c (not a public interface; the tests use it too).
 */
#ifndef HDX_PYIMPL_H
#define HDX_PYIMPL_H

#include <stddef.h>
#include <stdint.h>

#include "python/python.h"

/* An offset that does not exist in this version. */
#define HDX_PYOFF_NONE (-1)

/* How a frame is laid out and linked (docs/python-frames.md "The frame chain"). */
enum hdx_pyframe_kind {
    HDX_PYF_FRAMEOBJ = 0, /* 3.8–3.10: PyFrameObject, f_back */
    HDX_PYF_IFRAME,       /* 3.11+: _PyInterpreterFrame, previous */
};

/* Line-table format (docs/python-frames.md "Line numbers"). */
enum hdx_pylines_kind {
    HDX_PYL_LNOTAB = 0, /* 3.8–3.9, f_lasti in bytes */
    HDX_PYL_LINETABLE310, /* 3.10, f_lasti in code units */
    HDX_PYL_LOCATIONS,  /* 3.11+, PEP 657 */
};

/*
 * Every offset and per-version rule the reader uses: one table per version,
 * chosen once at attach (static for 3.8–3.12, filled from _Py_DebugOffsets
 * for 3.13+). All offsets are bytes from the start of the named struct;
 * HDX_PYOFF_NONE when the field does not exist.
 */
typedef struct hdx_pyoffs {
    int version; /* 0x0308 ... 0x030e */

    /* _PyRuntimeState */
    int rt_finalizing;     /* pointer (3.8: _finalizing) */
    int rt_interp_head;    /* interpreters.head */
    int rt_gil_tstate;     /* gilstate.tstate_current (3.8–3.11) */

    /* PyInterpreterState */
    int is_next, is_threads_head, is_id;
    int is_gil_ptr;        /* ceval.gil, a pointer to _gil_runtime_state (3.12) */
    int is_gil_locked;     /* int, relative to is (3.13+) or to *is_gil_ptr (3.12) */
    int is_gil_holder;     /* pointer to the holding tstate, same base */

    /* PyThreadState */
    int ts_next, ts_interp;
    int ts_frame;          /* frame (3.8–3.10), cframe (3.11–3.12), current_frame (3.13+) */
    int cf_current_frame;  /* _PyCFrame.current_frame (3.11–3.12), else NONE */
    int ts_thread_id;      /* pthread_t */
    int ts_native_tid;     /* native_thread_id (3.11+) */

    enum hdx_pyframe_kind frame_kind;
    /* PyFrameObject (3.8–3.10) */
    int fo_back, fo_code, fo_lasti, fo_localsplus;
    /* _PyInterpreterFrame (3.11+) */
    int if_previous, if_code, if_instr, if_is_entry, if_owner, if_localsplus;
    int instr_is_prev;     /* 3.11/3.12 prev_instr; 3.13+ instr_ptr (same arithmetic,
                              docs/python-frames.md "Line numbers") */
    int owner_shim_lo, owner_shim_hi; /* owners to skip (3..3 in 3.12/3.13, 3..4 in 3.14); -1 none */
    uint64_t tag_mask;     /* ~3 for 3.14 _PyStackRef (f_executable, localsplus), else ~0 */

    /* PyCodeObject */
    int co_firstlineno, co_filename, co_name, co_qualname, co_linetable;
    int co_code;           /* co_code bytes object (3.8–3.10) */
    int co_code_adaptive;  /* inline bytecode (3.11+) */
    int co_nlocals, co_varnames, co_cellvars, co_freevars; /* 3.8–3.10 */
    int co_nlocalsplus, co_localsplusnames, co_localspluskinds; /* 3.11+ (nlocalsplus may be NONE) */
    enum hdx_pylines_kind lines;

    /* objects */
    int ob_type, ob_size, tp_name;
    int tuple_item;        /* ob_item */
    int bytes_sval;
    int float_fval;
    int long_digits;
    int long_lv_tag;       /* 1 from 3.12 (lv_tag at ob_size's place), else 0: signed ob_size */
    int str_length, str_state, str_ascii_size, str_compact_size;
    int cell_ref;          /* PyCellObject.ob_ref */

    /* What the object reader (pyobj.c) uses; docs/python-objects.md says how
     * each was measured. 3.14 knows only those in _Py_DebugOffsets. */
    int is_modules;        /* PyInterpreterState.modules (imports.modules from 3.12): sys.modules */
    int tp_basicsize, tp_flags, tp_dict, tp_dictoffset, tp_mro;
    int ht_cached_keys;    /* PyHeapTypeObject: the shared keys of the instances' split tables */
    int list_item;         /* PyListObject.ob_item, a pointer to the item array */
    int md_dict;           /* PyModuleObject */
    int func_qualname;     /* PyFunctionObject */
    int dict_keys, dict_values; /* PyDictObject.ma_keys, ma_values */
    /* PyDictKeysObject: dk_size (3.8–3.10) or dk_log2_size, dk_log2_index_bytes
     * and dk_kind (3.11+); the entries follow the index table at dk_indices. */
    int dk_size, dk_log2_size, dk_log2_index_bytes, dk_kind, dk_nentries, dk_indices;
    int dv_values;         /* the value array in a split table's values (PyDictValues from 3.11) */
    int dv_valid;          /* PyDictValues.valid (3.13+) */
    int mgd_dict;          /* Py_TPFLAGS_MANAGED_DICT (3.11+): the dict pointer, from the object's start */
    int mgd_values;        /* 3.11: the values pointer, from the object's start */
    int mgd_tagged;        /* 3.12: the pointer at mgd_dict is values - 1 when its low bit is set */
    int inline_values;     /* 3.13: Py_TPFLAGS_INLINE_VALUES objects keep values at tp_basicsize */
} hdx_pyoffs;

/* One attached target (python.c). */
struct hdx_pyproc {
    int pid;               /* > 0 live */
    hdx_pymem mem;
    hdx_pyoffs off;        /* the one table of this version */
    char *binary;
    uint64_t runtime;
    int version;           /* 0x030b */
    const char *version_source;
    int tid_off;           /* ≤3.10: tid offset in struct pthread */
    int tid_scanned;       /* the scan was tried */
    int in_pidns;          /* the target lives in another PID namespace */
    uint64_t code_type;    /* address of PyCode_Type once seen */
    /* spans of the blocks read in one go */
    size_t ts_span, frame_span, code_span;
};

/* The one accessor of the offsets table. */
#define OFF(p, field) ((p)->off.field)
#define HAS(p, field) ((p)->off.field != HDX_PYOFF_NONE)

/*
 * The readers of python.c that pyobj.c shares. Each returns 0 or the
 * backend's negative errno (-EFAULT unmapped, -ESRCH gone), or as said:
 *  hdx_pyrd            len bytes at addr into buf;
 *  hdx_pyrd_ptr        one 8-byte word;
 *  hdx_pyrd_cstr       a NUL-terminated C string into buf, cut to max-1 bytes,
 *                      read page by page;
 *  hdx_pyrd_type_name  the tp_name of obj's type into buf (max bytes, cut),
 *                      and the type's address into *type (may be NULL);
 *  hdx_pyrd_str        a str object as UTF-8 (docs/python-frames.md "Strings"): compact ASCII, compact
 *                      latin-1/UCS2/UCS4 and legacy strings; at most max code
 *                      points, *full (may be NULL) says whether that was all;
 *                      *out heap (caller frees); -EINVAL not a plausible str;
 *  hdx_pyrd_long       an int (docs/python-frames.md "Locals") that fits a long long; -ERANGE when not;
 *  hdx_pyrd_value      a local-like value of obj into l (kind, i, f, s, addr),
 *                      as python.c's locals are read; l->s heap; -ENOMEM only.
 */
int hdx_pyrd(hdx_pyproc *p, uint64_t addr, void *buf, size_t len);
int hdx_pyrd_ptr(hdx_pyproc *p, uint64_t addr, uint64_t *v);
int hdx_pyrd_cstr(hdx_pyproc *p, uint64_t addr, char *buf, size_t max);
int hdx_pyrd_type_name(hdx_pyproc *p, uint64_t obj, uint64_t *type, char *buf, size_t max);
int hdx_pyrd_str(hdx_pyproc *p, uint64_t obj, size_t max, char **out, int *full);
int hdx_pyrd_long(hdx_pyproc *p, uint64_t obj, long long *out);
int hdx_pyrd_value(hdx_pyproc *p, uint64_t obj, hdx_local *l);

/*
 * The object reader (pyobj.c, docs/python-objects.md). Every function
 * returns 0 or a negative errno: the backend's (-EFAULT a torn or wild
 * address, -ESRCH gone), -EINVAL the object is not of the kind asked for or
 * its layout is implausible, -E2BIG over a limit, -ENOENT no such key,
 * attribute or module, -ENOTSUP a fact this version's table lacks (3.14),
 * -ENOMEM. Nothing is cached: each call reads the target afresh.
 */
#define HDX_PYOBJ_MAX_ITEMS (1 << 16) /* dict entries, list and tuple items */

/* obj's type and that type's tp_flags (Py_TPFLAGS_*). */
int hdx_pyobj_type(hdx_pyproc *p, uint64_t obj, uint64_t *type, uint64_t *flags);

/* An int object's value (-EINVAL not an int, -ERANGE too large). */
int hdx_pyobj_int(hdx_pyproc *p, uint64_t obj, long long *v);

/* A str object as UTF-8, *s heap (caller frees); -EINVAL not a str,
 * -E2BIG longer than max code points. */
int hdx_pyobj_str(hdx_pyproc *p, uint64_t obj, size_t max, char **s);

/* One live entry of a dict. */
typedef struct hdx_pydict_item {
    uint64_t key, value;
} hdx_pydict_item;

/* The live entries of the dict at dict, in table order: *items heap (caller
 * frees), *n of them; -E2BIG more than max entries. Combined and split
 * tables, every kind of keys of this version. */
int hdx_pydict_items(hdx_pyproc *p, uint64_t dict, size_t max, hdx_pydict_item **items, size_t *n);

/* The value under the str key of the dict at dict (compared as text, without
 * hashing); -ENOENT none. */
int hdx_pydict_get(hdx_pyproc *p, uint64_t dict, const char *key, uint64_t *value);

/* A module object's dict (md_dict; -EINVAL not a module). */
int hdx_pyobj_module_dict(hdx_pyproc *p, uint64_t module, uint64_t *dict);

/* sys.modules[name] of the main interpreter (name as a key, e.g.
 * "torch.distributed.distributed_c10d"); -ENOENT not imported. */
int hdx_pyobj_sys_module(hdx_pyproc *p, const char *name, uint64_t *module);

/* Attribute name of obj, as far as plain Python data goes: for a type, its
 * own and its bases' dicts (tp_mro, tp_dict); for another object, its
 * instance dict (tp_dictoffset ≤3.10; managed dict or inline values 3.11+),
 * then its type's. Descriptors (properties, __slots__) are not run or read:
 * what a data descriptor would give is -ENOENT. *value is borrowed. */
int hdx_pyobj_attr(hdx_pyproc *p, uint64_t obj, const char *name, uint64_t *value);

/* The static table of minor version 8..12 (x86-64 or aarch64), or NULL. */
const hdx_pyoffs *hdx_pyoffs_static(int minor);

/*
 * Fill *o from a copy of the target's _Py_DebugOffsets (len bytes from the
 * start of _PyRuntime), for 3.13 and 3.14, validating as docs/python-frames.md "Debug offsets" says: cookie,
 * major/minor, not free-threaded, every size < 1 MiB, every used field
 * + width <= its struct's size. Returns 0, -ENOTSUP (unknown minor,
 * free-threaded) or -EINVAL (invalid), with *why (static) saying what.
 */
int hdx_pyoffs_from_debug(const uint8_t *buf, size_t len, hdx_pyoffs *o, const char **why);

/* Bytes of _Py_DebugOffsets to copy for a version (0 when not known). */
size_t hdx_pydebug_size(int version);

/* What discovery found (pyfind.c). */
typedef struct hdx_pyfound {
    char *path;         /* as in the maps */
    uint64_t runtime;   /* _PyRuntime in the target */
    uint64_t py_version_addr; /* Py_Version in the target, 0 when absent */
    uint32_t py_version;      /* its value read from the file, 0 when absent */
    uint64_t bias;
} hdx_pyfound;

/*
 * Look through the mappings for an ELF whose base name contains "python"
 * and that defines _PyRuntime (docs/python-frames.md "Where _PyRuntime is", "Load bias"), each file opened as
 * hdx_map_file(pid, root, ...) finds it (pid <= 0: a core). Returns 0, -ENOENT
 * when none, or -ENOMEM. f->path is heap (caller frees).
 */
int hdx_pyfind_runtime(const hdx_map *maps, size_t n, int pid, const char *root, hdx_pyfound *f);

/* "python3.X" / "libpython3.X…" in a path's base name → 0x030X, else 0. */
int hdx_pyversion_from_name(const char *path);

/* Scan a buffer for a Py_GetVersion() string ("3.10.13 (main, …") → 0x030X, else 0. */
int hdx_pyversion_from_text(const uint8_t *buf, size_t len);

/*
 * Hooks for the tests (python.c): force the ≤3.10 pthread TID offset (and
 * allow the scan again), read it back, and run the Py_GetVersion() string
 * scan of the binary's data on its own (returns 0x030X or 0).
 */
void hdx_py_set_tid_offset(hdx_pyproc *p, int off);
int hdx_py_tid_offset(const hdx_pyproc *p);
int hdx_py_scan_version(hdx_pyproc *p, const hdx_map *maps, size_t n);

#endif
