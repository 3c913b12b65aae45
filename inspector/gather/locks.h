/*
 * Build-directory locks: which lock files and kernel locks the processes wait
 * on, and the facts their state is judged from (docs/design.md "Build locks").
 * Sources: /proc/locks (proc(5), "/proc/locks"), /proc/PID/fd and fdinfo, the
 * lock files themselves, the traces (traces.h) and the syscall watch
 * (syswatch.h). This module records facts; classify's hdx_lock_judge decides.
 */
#ifndef HDX_LOCKS_H
#define HDX_LOCKS_H

#include <stddef.h>
#include <sys/types.h>

#include "model/evidence.h"

/* One line of /proc/locks. */
typedef struct hdx_kernel_lock {
    int id;
    int blocked;   /* 1 for a "->" line: a request waiting for lock id */
    char kind[8];  /* "FLOCK", "POSIX", "OFDLCK", "LEASE", ... */
    char mode[8];  /* "READ", "WRITE", ... */
    int pid;       /* -1 for OFD locks (the kernel does not record one) */
    unsigned dev_major, dev_minor;
    unsigned long ino;
} hdx_kernel_lock;

/*
 * Parse /proc/locks text. Lines that do not parse are skipped. *out is a
 * heap array the caller frees. 0 or -ENOMEM.
 */
int hdx_kernel_locks_parse(const char *text, hdx_kernel_lock **out, size_t *n);

/* Options of hdx_locks_collect. */
typedef struct hdx_locks_options {
    int watch_ms;         /* bound of a syscall watch per polling thread; 0 = no watch */
    const char **dirs;    /* extra build directories to look in (may be NULL) */
    size_t n_dirs;
} hdx_locks_options;

/*
 * Find what the live processes of ev wait on and add it to ev->locks:
 *  - a thread blocked in flock/fcntl(F_SETLKW/F_OFD_SETLKW) (syscall number
 *    and fd from /proc): the file behind the fd, kind from /proc/locks;
 *  - a thread whose Python frames sit in FileBaton.wait: the baton
 *    <build_directory>/lock, from the calling cpp_extension._jit_compile
 *    frame's local (needs frames read with locals, sample.h);
 *  - a thread sleeping in a poll loop with no trace lock known for its
 *    process: a bounded syscall watch; a stat-polled path whose name is
 *    "lock" (or ends in ".lock") and exists is a baton lock;
 *  - otherwise the well-known places: each process's cwd and script
 *    directory "*\/build/lock", $TORCH_EXTENSIONS_DIR/\*\/lock and
 *    ~/.cache/torch_extensions/\*\/\*\/lock, plus opt->dirs.
 * Each waiter is added to its lock. Notes in ev say what was done (that a
 * watch ran) and what failed. Returns 0 or a negative errno.
 */
int hdx_locks_collect(hdx_evidence *ev, const hdx_locks_options *opt);

/*
 * Take what this host sees of every lock of ev now, into each lock's facts
 * (hdx_lock_facts): stat(2) of the file (exists, mtime, dev, ino, size, owner),
 * its /proc/locks rows, the processes that have it open, and for each pid
 * concerned whether it lives and when it started. Facts only: the state
 * (held, stale, free) is classify's hdx_lock_judge. Another host's traces
 * (ev->host not this host, ev->live 0) and unmappable container paths are
 * not looked at (facts.checked 0). With keep_recorded, a lock that already
 * carries facts or a recorded state (from a snapshot or report) is left as its
 * input saw it; without, every lock is looked at again. Notes in ev say what
 * could not be read. Returns 0, -EINVAL (ev NULL) or -ENOMEM.
 */
int hdx_locks_record_facts(hdx_evidence *ev, int keep_recorded);

/*
 * Is path a file a builder's lock protocol makes? A FileBaton's or cpp_extension's
 * "lock" (torch/utils/file_baton.py, torch/utils/_filelock.py), or "<key>.lock" in a
 * directory named "locks" (torch inductor's and Triton's caches, through the filelock
 * package). Never a package manager's or git's: Cargo.lock, poetry.lock, yarn.lock,
 * uv.lock, .git/index.lock. 1 or 0.
 */
int hdx_locks_builder_name(const char *path);

/* How deep and how wide a search for lock files goes: Megatron's
 * megatron/legacy/fused_kernels/build/lock is four levels down. */
#define HDX_LOCKS_MAX_DEPTH 6
#define HDX_LOCKS_MAX_DIRS 20000

/* What a search for lock files looked at. */
typedef struct hdx_lock_search {
    size_t dirs; /* directories read */
    int cut;     /* 1: directories deeper than HDX_LOCKS_MAX_DEPTH, or past HDX_LOCKS_MAX_DIRS, were not read */
} hdx_lock_search;

/*
 * The builder lock files (hdx_locks_builder_name) under dir, at most
 * HDX_LOCKS_MAX_DEPTH levels down and in at most HDX_LOCKS_MAX_DIRS directories,
 * never through a symbolic link, leaving out .git, node_modules and __pycache__.
 * Appends absolute heap strings to *paths (each once); *s (may be NULL) says what
 * was searched. 0 or a negative errno (-ENOENT no dir, -ENOTDIR).
 */
int hdx_locks_find_files(const char *dir, hdx_lock_search *s, char ***paths, size_t *n);

/*
 * For 'hangdx locks', which captures nothing: every Python process of this host
 * that hangdx may read (/proc/PID/exe named python*) is read, its Python stacks
 * only, nothing stopped; a thread in torch's FileBaton.wait on a lock of ev
 * (<build_directory>/lock of its _jit_compile frame) becomes a waiter of that
 * lock ("FileBaton.wait"). Waiters that no trace saw, e.g. a rank started
 * outside 'hangdx run'. Returns how many waiters were added, or -ENOMEM.
 */
int hdx_locks_add_python_waiters(hdx_evidence *ev);

#endif
