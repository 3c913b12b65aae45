/*
 * The Python frame reader: Python call stacks read out of another process,
 * CPython 3.8–3.14 (x86-64 and aarch64 Linux, GIL builds), without running
 * anything in the target and without stopping it.
 *
 * The facts behind every offset and rule are in
 * docs/python-frames.md; the comments below cite its headings
 * and the CPython sources they come from.
 *
 * How it fits together:
 *   hdx_pymem      a memory backend (live: process_vm_readv, /proc/PID/mem
 *                  fallback; a core-file backend plugs in the same way)
 *   hdx_map        the target's mappings (/proc/PID/maps, or a core's NT_FILE;
 *                  native/maps.h)
 *   hdx_py_attach  finds the interpreter (_PyRuntime) and its version once
 *   hdx_py_read    walks interpreters → thread states → frames, each time
 *
 * The reader does not stop threads. It is exact when the target is stopped
 * (or blocked) and robust when it is not: every read is checked, every list
 * is bounded and cycle-checked, and a read that fails half way gives a partial
 * stack marked as such, never a crash or a hang.
 *
 * Stage rule: python may include model, native. (docs/design.md "Stages")
 */
#ifndef HDX_PYTHON_H
#define HDX_PYTHON_H

#include <stddef.h>
#include <stdint.h>

#include "model/evidence.h"
#include "native/maps.h"

/* ---------------------------------------------------------------- memory */

/*
 * A memory backend. read() copies len bytes at the target address addr into
 * buf and returns 0, or a negative errno: -EFAULT when any byte of the range
 * is not mapped (also for addr 0), -ESRCH when the process is gone, -EPERM /
 * -EACCES when reading is not permitted. Never a short read: a partial copy
 * is -EFAULT. close() releases ctx (may be NULL).
 */
typedef struct hdx_pymem_ops {
    int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
    void (*close)(void *ctx);
} hdx_pymem_ops;

typedef struct hdx_pymem {
    const hdx_pymem_ops *ops;
    void *ctx;
} hdx_pymem;

/*
 * Fill *m with the live backend for process pid: process_vm_readv(2), and
 * pread(2) on /proc/PID/mem when process_vm_readv is unavailable (ENOSYS, or
 * EPERM from a seccomp filter). Both need ptrace access to pid (same user and
 * dumpable, or CAP_SYS_PTRACE). Returns 0 or -ENOMEM. Release with
 * hdx_pymem_close().
 */
int hdx_pymem_live(int pid, hdx_pymem *m);

/* Read through m (see hdx_pymem_ops.read). */
int hdx_pymem_read(const hdx_pymem *m, uint64_t addr, void *buf, size_t len);

/* Release m's context; m may be NULL or already closed. */
void hdx_pymem_close(hdx_pymem *m);

/* ------------------------------------------------------------ attaching */

typedef struct hdx_pyproc hdx_pyproc;

/*
 * Find the Python interpreter of a live process and its version, reading
 * only (nothing runs in the target, nothing is stopped).
 *
 * Discovery (docs/python-frames.md "Finding the interpreter"): every mapped ELF whose
 * base name contains "python" is opened as /proc/PID/root/<path> (so that containers
 * resolve; a trailing " (deleted)" is stripped) and searched for `_PyRuntime` in .dynsym, then
 * .symtab, then for the `.PyRuntime` section (CPython Python/pylifecycle.c,
 * Include/internal/pycore_runtime.h). The load bias is the start of the
 * mapping at file offset 0 minus the first PT_LOAD's p_vaddr rounded down to
 * its p_align (docs/python-frames.md "Load bias"). This covers static non-PIE binaries (Debian's
 * /usr/bin/python3.11) and shared PIE builds (libpython3.X.so).
 *
 * Version (docs/python-frames.md "The version"), first that answers: the `_Py_DebugOffsets` cookie
 * "xdebugpy" and version at _PyRuntime (3.13+); the `Py_Version` symbol
 * (3.11+); the file name (libpython3.X…, python3.X); a scan of the image's
 * writable data for the Py_GetVersion() string ("3.8.18 (default, …").
 * Never by running the binary.
 *
 * Returns a handle the caller frees with hdx_py_detach(), or NULL with errno:
 *   ENOENT   not a Python process (no mapped ELF named *python* defines
 *            _PyRuntime) — a normal outcome;
 *   ESRCH    no such process;
 *   EPERM/EACCES  its memory may not be read;
 *   ENOTSUP  a Python this reader does not know (< 3.8, > 3.14,
 *            free-threaded, invalid _Py_DebugOffsets);
 *   ENOMEM.
 * On failure, when err is not NULL, *err gets a message for a person (heap,
 * caller frees) saying what happened and what to do; on success *err = NULL.
 */
hdx_pyproc *hdx_py_attach(int pid, char **err);

/*
 * The same on given parts, for other backends (a core file, formats/core.h):
 * mem (ownership moves to the handle, also on failure), the target's
 * mappings (copied), and root, the prefix under which the mapped paths are
 * opened ("/proc/PID/root" live; "" or a sysroot for a core). pid > 0 means a
 * live process: TIDs are then checked against /proc/PID/task and mapped out
 * of a PID namespace through NSpid; pid <= 0 skips both. Errors as
 * hdx_py_attach().
 */
hdx_pyproc *hdx_py_attach_mem(int pid, hdx_pymem *mem, const hdx_map *maps, size_t n_maps,
                              const char *root, char **err);

/* Release the handle, its backend and caches. Accepts NULL. */
void hdx_py_detach(hdx_pyproc *p);

/* PY_VERSION_HEX >> 16 of the target, e.g. 0x030b for 3.11. */
int hdx_py_version(const hdx_pyproc *p);

/* How the version was found: "debug offsets", "Py_Version", "file name" or
 * "version string". Static string. */
const char *hdx_py_version_source(const hdx_pyproc *p);

/* Path (as in the maps) of the ELF that holds _PyRuntime; borrowed, valid
 * until hdx_py_detach(). */
const char *hdx_py_binary(const hdx_pyproc *p);

/* Address of _PyRuntime in the target. */
uint64_t hdx_py_runtime_addr(const hdx_pyproc *p);

/* -------------------------------------------------------------- reading */

/* Flags of hdx_py_read(). */
#define HDX_PY_LOCALS 1u /* also read each frame's local variables (docs/python-frames.md "Locals") */

/* Limits: deeper stacks and longer lists are cut and marked partial. */
#define HDX_PY_MAX_FRAMES 4096
#define HDX_PY_MAX_THREADS 1024
#define HDX_PY_MAX_INTERPS 64
/* Strings longer than this many code points: names are cut; local values
 * become HDX_VAL_OTHER "str". */
#define HDX_PY_MAX_STR 1024

/* One Python thread state. */
typedef struct hdx_py_thread {
    int tid;            /* kernel TID in hangdx's PID namespace, or HDX_UNKNOWN
                           (docs/python-frames.md "Thread ids": 3.11+ native_thread_id; ≤3.10 the glibc
                           struct pthread's tid field, checked against
                           /proc/PID/task) */
    uint64_t thread_id; /* pthread_self() of the thread (PyThreadState.thread_id) */
    uint64_t tstate;    /* address of its PyThreadState in the target */
    int64_t interp_id;  /* PyInterpreterState.id (0 for the main interpreter) */
    int holds_gil;      /* 1 holds the GIL, 0 does not, HDX_UNKNOWN
                           (docs/python-frames.md "The GIL holder") */
    /* Frames innermost first: kind HDX_FRAME_PYTHON, function (co_qualname
     * from 3.11, co_name before), file (co_filename), line (0 unknown), and
     * locals with HDX_PY_LOCALS. Heap array (hdx_frames_free() releases it);
     * a caller may take it over (e.g. hdx_merge_stacks()) and set frames to
     * NULL and n_frames to 0. */
    hdx_frame *frames;
    size_t n_frames;
    /* is_entry[i] != 0: frames[i] is the first (outermost) Python frame of
     * one _PyEval_EvalFrameDefault activation — 3.8–3.10 every frame; 3.11
     * _PyInterpreterFrame.is_entry; 3.12+ the frame whose previous frame is a
     * shim (owner FRAME_OWNED_BY_CSTACK, docs/python-frames.md "The frame chain",
     * "Merging native and Python stacks"). n_frames entries, heap; may be taken over
     * like frames. */
    unsigned char *is_entry;
    int partial;        /* 0: the whole stack was read; else a negative errno
                           telling why it stops early: -EFAULT/-ESRCH torn read
                           (the target moved or is gone), -ELOOP a cycle,
                           -E2BIG the depth limit, -EINVAL not a code object */
} hdx_py_thread;

typedef struct hdx_py_sample {
    hdx_py_thread *threads; /* heap, n_threads entries, in interpreter order */
    size_t n_threads;
    int partial;    /* 0, or a negative errno (as hdx_py_thread.partial): the
                       interpreter or thread lists were cut short */
    int finalizing; /* 1 when _PyRuntime says the interpreter is shutting down */
} hdx_py_sample;

/*
 * Read every Python thread of every interpreter of the target into *out
 * (which the caller clears with hdx_py_sample_clear()). flags: HDX_PY_LOCALS.
 *
 * Returns 0 when something could be read: threads whose stacks were cut
 * short have partial set, and out->partial tells whether the thread list
 * itself was cut. An interpreter that is not initialized (or finalized) gives
 * 0 threads. Returns a negative errno, with *out empty, when even the
 * interpreter list could not be read: -ESRCH the process is gone, -EFAULT a
 * torn read of _PyRuntime, -ENOMEM.
 */
int hdx_py_read(hdx_pyproc *p, unsigned flags, hdx_py_sample *out);

/* Release what a sample owns and zero it. Accepts NULL. */
void hdx_py_sample_clear(hdx_py_sample *s);

/* ------------------------------------------- objects and process groups */

/*
 * Reading Python objects of the target by address (inspector/python/pyobj.c; the
 * layouts and how each was measured: docs/python-objects.md). As with
 * hdx_py_read(), nothing runs in the target and nothing is stopped; every
 * read is checked and every count bounded (at most 1 << 16 dict entries,
 * list or tuple items), so an object that changes or is freed while it is
 * read gives an error (-EFAULT, -EINVAL), never a crash or a hang. Only plain
 * data is read: no descriptor, property or __getattr__ runs. CPython 3.8 to
 * 3.13; on 3.14 only what _Py_DebugOffsets gives (lists, tuples), the rest
 * answers -ENOTSUP. Errors common to all: -EINVAL (p NULL, or the object is
 * not of the kind asked for), -EFAULT (a wild or torn address), -ESRCH (the
 * process is gone), -ENOTSUP, -ENOMEM.
 */

/*
 * Read attribute name of the object at obj into *out as python.c reads
 * locals: kind, i, f, s (heap, the caller frees it) and addr (the value's
 * address); out->name and out->pg are left alone. For a class, its own dict
 * and its bases' (tp_mro); for another object its instance dict (a dict,
 * or from 3.11 the values not yet made one), then its class's. Returns 0,
 * -ENOENT no such attribute (a property or a __slots__ member reads as
 * none), or an error above.
 */
int hdx_py_getattr(hdx_pyproc *p, uint64_t obj, const char *name, hdx_local *out);

/*
 * The items of the list or tuple (or a subclass) at obj: *items a heap array
 * of the items' addresses (the caller frees it; NULL when empty), *n of them.
 * Returns 0, -EINVAL not a list or tuple, -E2BIG more than max items (or
 * than 1 << 16), or an error above.
 */
int hdx_py_seq_items(hdx_pyproc *p, uint64_t obj, size_t max, uint64_t **items, size_t *n);

/*
 * The __qualname__ of the function object at obj ("P2POp.__init__",
 * "isend"), heap (the caller frees it), or NULL with errno set (EINVAL not a
 * Python function, or an error above).
 */
char *hdx_py_function_name(hdx_pyproc *p, uint64_t obj);

/* One process group as one rank's torch.distributed.distributed_c10d holds it. */
typedef struct hdx_py_pgroup {
    uint64_t obj;   /* the ProcessGroup object's address in the target (identity;
                       compare with hdx_local.addr) */
    char *name;     /* _pg_names[pg] ("0", "1", ... unless named), or NULL */
    char *desc;     /* the description torch >= 2.4 gives a group: kept only in
                       C++ (ProcessGroup::setGroupDesc), not in Python state, so
                       NULL; room for a later reader */
    char *role;     /* what megatron.core.parallel_state calls it, when that module
                       is loaded: "tp", "pp", "dp", "cp", "ep", "mp", "dp_cp",
                       "tp_dp", "embedding", "position_embedding", "tp_ep", "etp",
                       "edp", ... (the table in pyobj.c), else NULL; never the
                       default group's */
    int *ranks;     /* global ranks indexed by group rank, from _pg_group_ranks[pg]
                       ({global rank: group rank}) */
    size_t n_ranks;
    int is_default; /* 1 for the default (world) group */
} hdx_py_pgroup;

typedef struct hdx_py_pgroups {
    hdx_py_pgroup *groups; /* heap, n entries, in _pg_group_ranks order */
    size_t n;
    int partial;           /* 0, or a negative errno: some groups, names or roles
                              could not be read (a torn read, -EINVAL) */
} hdx_py_pgroups;

/*
 * The process groups of the target's torch.distributed (sys.modules
 * "torch.distributed.distributed_c10d"), read into *out, which the caller
 * clears with hdx_py_pgroups_clear(). Sources, torch 1.13 to 2.x:
 *   groups and ranks  module global _pg_group_ranks {pg: {global: group rank}},
 *                     without GroupMember.NON_GROUP_MEMBER's entry (1.13 files
 *                     there the ranks of groups this rank is not in);
 *   names             module global _pg_names {pg: str};
 *   default           _world._default_pg (2.x), else GroupMember.WORLD (1.x),
 *                     else the largest group that maps every rank to itself;
 *   roles             megatron.core.parallel_state's group globals (a group, or
 *                     a list of groups each), matched by identity.
 * Returns 0 (n is 0 when torch.distributed is not loaded or not initialised),
 * or -ESRCH (gone), -EFAULT (sys.modules unreadable), -ENOTSUP (3.14),
 * -ENOMEM, -EINVAL (p NULL), with *out empty.
 */
int hdx_py_read_pgroups(hdx_pyproc *p, hdx_py_pgroups *out);

/* Release what out owns and zero it. Accepts NULL. */
void hdx_py_pgroups_clear(hdx_py_pgroups *g);

/*
 * The process groups of a torch.distributed rank (docs/design.md "Process groups"), read
 * through py (a live process or a core): into ev->pgroups (merged by name), and each local of
 * p's frames whose object is one of them gets its name (hdx_local.pg). Returns 0 (also
 * when it has none, or they could not be read: a note in ev says which) or -ENOMEM.
 */
int hdx_sample_pgroups(hdx_pyproc *py, hdx_process *p, hdx_evidence *ev);

/* ------------------------------------------------- line tables (docs/python-frames.md "Line numbers") */

/*
 * The source line of one instruction, from a code object's line table; 0 when
 * the table says "no line" or the position is outside it.
 *  - hdx_py_lnotab_line: 3.8–3.9 co_lnotab, pairs (addr delta u8, line delta
 *    i8); lasti_bytes = f_lasti (a byte offset). CPython 3.8
 *    Objects/codeobject.c PyCode_Addr2Line.
 *  - hdx_py_linetable310_line: 3.10 co_linetable, pairs (start delta u8, line
 *    delta i8, -128 = no line); lasti_units = f_lasti (code units, < 0 before
 *    the first instruction gives firstlineno). CPython 3.10
 *    Objects/codeobject.c PyLineTable_NextAddressRange.
 *  - hdx_py_loctable_line: 3.11+ PEP 657 location table; addr_units = the
 *    instruction's index in code units (< 0 gives firstlineno). CPython 3.11
 *    Objects/locations.md, Objects/codeobject.c _PyCode_CheckLineNumber.
 */
int hdx_py_lnotab_line(const uint8_t *tab, size_t len, int firstlineno, int lasti_bytes);
int hdx_py_linetable310_line(const uint8_t *tab, size_t len, int firstlineno, int lasti_units);
int hdx_py_loctable_line(const uint8_t *tab, size_t len, int firstlineno, int addr_units);

#endif
