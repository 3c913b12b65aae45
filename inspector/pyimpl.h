/*
 * Internals of the Python frame reader shared by python.c, pyfind.c and
 * pyoffsets.c (not a public interface; the tests use it too).
 */
#ifndef HDX_PYIMPL_H
#define HDX_PYIMPL_H

#include <stddef.h>
#include <stdint.h>

#include "python.h"

/* An offset that does not exist in this version. */
#define HDX_PYOFF_NONE (-1)

/* How a frame is laid out and linked (§2.1). */
enum hdx_pyframe_kind {
    HDX_PYF_FRAMEOBJ = 0, /* 3.8–3.10: PyFrameObject, f_back */
    HDX_PYF_IFRAME,       /* 3.11+: _PyInterpreterFrame, previous */
};

/* Line-table format (§2.3). */
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
    int instr_is_prev;     /* 3.11/3.12 prev_instr; 3.13+ instr_ptr (same arithmetic, §2.3) */
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
} hdx_pyoffs;

/* The static table of minor version 8..12 (x86-64 or aarch64), or NULL. */
const hdx_pyoffs *hdx_pyoffs_static(int minor);

/*
 * Fill *o from a copy of the target's _Py_DebugOffsets (len bytes from the
 * start of _PyRuntime), for 3.13 and 3.14, validating as §3.1 says: cookie,
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
 * and that defines _PyRuntime (§1.1, §1.2). Returns 0, -ENOENT when none, or
 * -ENOMEM. f->path is heap (caller frees).
 */
int hdx_pyfind_runtime(const hdx_pymap *maps, size_t n, const char *root, hdx_pyfound *f);

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
int hdx_py_scan_version(hdx_pyproc *p, const hdx_pymap *maps, size_t n);

#endif
