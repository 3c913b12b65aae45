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
#include <stdint.h>
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
 * Is path (its last component at least) a package manager's or git's lock file:
 * Cargo.lock, poetry.lock, yarn.lock, uv.lock, package-lock.json, Gemfile.lock,
 * flake.lock, pnpm-lock.yaml, composer.lock, Pipfile.lock, bun.lockb, or any file
 * under a ".git" directory (index.lock, HEAD.lock, refs/heads/main.lock)? These record
 * versions or guard a repository, never a build: a backstop behind the positive rule
 * of docs/design.md "Build locks", never the rule itself. Returns a static sentence
 * saying what the file is, or NULL.
 */
const char *hdx_locks_not_builders(const char *path);

/*
 * Does 'hangdx locks --clean-stale' leave l alone whatever its state (docs/design.md
 * "Build locks")? Only a lock that a builder's lock protocol made counts: a FileBaton
 * lock that a search took (found 1: hdx_locks_find_files listed it), or a lock a trace
 * saw made or polled as FileBaton makes and polls it (source "trace", kind baton: an
 * O_CREAT|O_EXCL create or stat polls, preload/open.c) and named like a lock ("lock",
 * "*.lock"). Never a package manager's or git's (hdx_locks_not_builders), found or not.
 * Returns NULL when l counts, else a static sentence saying why it is left alone.
 */
const char *hdx_locks_left_alone(const hdx_lock *l, int found);

/* How deep and how wide a search for lock files goes: Megatron's
 * megatron/legacy/fused_kernels/build/lock is four levels down. */
#define HDX_LOCKS_MAX_DEPTH 6
#define HDX_LOCKS_MAX_DIRS 20000
/* Files named like locks that a search leaves alone, listed at most (the rest counted). */
#define HDX_LOCKS_MAX_LEFT 64

/* A FileBaton lock file a search found. */
typedef struct hdx_lock_file {
    char *path;        /* absolute: the search's directory (made absolute, never resolved) and rel */
    const char *rel;   /* the path below the searched directory ("py311_cpu/fused/lock"); points into path */
    uint64_t dev, ino; /* the file the walk saw (fstatat on its directory's fd, no link followed) */
} hdx_lock_file;

/* A file named like a lock ("lock", "*.lock") that a search did not take, and why. */
typedef struct hdx_lock_left {
    char *path;      /* absolute, as in hdx_lock_file */
    const char *why; /* static sentence */
} hdx_lock_left;

/* What a search for lock files looked at and found; hdx_lock_search_clear releases it. */
typedef struct hdx_lock_search {
    size_t dirs;          /* directories read */
    int cut;              /* 1: directories deeper than HDX_LOCKS_MAX_DEPTH, or past HDX_LOCKS_MAX_DIRS, were not read */
    int rootfd;           /* the searched directory, open (O_DIRECTORY; the caller named it, so a link to it was
                             followed), for reopening a found file's directory below it without following
                             links (docs/design.md "Build locks"); -1 when none */
    hdx_lock_file *files; /* the FileBaton locks, each once */
    size_t n_files;
    hdx_lock_left *left;  /* the lock-named files left alone, HDX_LOCKS_MAX_LEFT at most */
    size_t n_left;
    size_t n_left_more;   /* and how many more were not listed */
} hdx_lock_search;

/*
 * The FileBaton lock files under dir (docs/design.md "Build locks"): an empty regular
 * file named "lock" whose directory is a build directory of torch's cpp_extension by
 * its place or its contents: dir itself (dir is the build directory), dir/<ext> (dir is
 * an extensions root, $TORCH_EXTENSIONS_DIR's layout), dir/py<ver>_<cu|cpu>/<ext>
 * (~/.cache/torch_extensions's layout), a directory named "build" (Megatron's
 * fused_kernels/build), or one holding cpp_extension's build.ninja. Every other file
 * named "lock" or "*.lock" goes into s->left with why. Searched at most
 * HDX_LOCKS_MAX_DEPTH levels down and in at most HDX_LOCKS_MAX_DIRS directories,
 * through directory fds, never through a symbolic link, leaving out .git,
 * node_modules and __pycache__. *s is filled (zeroed first; rootfd -1 on failure)
 * and owned by the caller: hdx_lock_search_clear. 0 or a negative errno (-ENOENT no
 * dir, -ENOTDIR, -EPERM dir or a directory on its way is another user's symbolic link
 * (model/outfile.h, hdx_outfile_foreign_link), -ENOMEM: what was found so far stays in *s).
 */
int hdx_locks_find_files(const char *dir, hdx_lock_search *s);

/* Free what s holds and close its rootfd; s may be NULL. */
void hdx_lock_search_clear(hdx_lock_search *s);

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
