/*
 * The preload shim's private interface: the table of real functions, the
 * process state, the known-lock-path table and the trace writer.
 *
 * Every wrapper follows the same pattern (style.md, "The shim"):
 *   1. call the real function (REAL(name)), save errno;
 *   2. decide with reads only whether the call is of interest (tracing on,
 *      flags, known lock path); if not, return at once;
 *   3. hdx_enter(): refuses in a vfork child (shared memory: no writes) and
 *      inside the shim (thread-local guard), and lends one of the shim's
 *      buffers (pool.c): the recording path keeps no path or line on the stack;
 *   4. record into that buffer, one write(); hdx_leave();
 *   5. restore errno, return what the real call returned.
 *
 * The stack bound (docs/design.md "The shim"): a wrapped call, however it
 * records, uses well under 2 KiB of stack beyond the real call's own, so that
 * it runs in a signal handler on a small sigaltstack and in a thread with a
 * small stack. No array on the recording path is larger than a few hundred
 * bytes; paths and lines live in the buffer that hdx_enter() lends.
 */
#ifndef HDX_SHIM_H
#define HDX_SHIM_H

/* The shim defines open() etc. itself: no inline fortify wrappers. */
#undef _FORTIFY_SOURCE

#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hangdx/trace.h"

/* dlsym at the version every glibc since 2.2.5 (x86-64) and 2.17 (aarch64) has, not at
 * glibc 2.34's (where libdl moved into libc): the shim built here loads in an older root
 * (Debian 11, glibc 2.31), where libdl.so.2 provides it (docs/design.md "Containers"). */
#if defined(__GLIBC__) && defined(__x86_64__)
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
#elif defined(__GLIBC__) && defined(__aarch64__)
__asm__(".symver dlsym,dlsym@GLIBC_2.17");
#endif

#define HDX_EXPORT __attribute__((visibility("default")))
#define HDX_HIDDEN __attribute__((visibility("hidden")))

struct stat;
struct stat64;
struct statx;

/* The next definition of every wrapped function (dlsym(RTLD_NEXT)). */
struct hdx_real {
    int (*open)(const char *, int, ...);
    int (*open64)(const char *, int, ...);
    int (*openat)(int, const char *, int, ...);
    int (*openat64)(int, const char *, int, ...);
    int (*creat)(const char *, mode_t);
    int (*creat64)(const char *, mode_t);
    int (*__open_2)(const char *, int);
    int (*__open64_2)(const char *, int);
    int (*__openat_2)(int, const char *, int);
    int (*__openat64_2)(int, const char *, int);

    int (*stat)(const char *, struct stat *);
    int (*stat64)(const char *, struct stat64 *);
    int (*lstat)(const char *, struct stat *);
    int (*lstat64)(const char *, struct stat64 *);
    int (*fstatat)(int, const char *, struct stat *, int);
    int (*fstatat64)(int, const char *, struct stat64 *, int);
    int (*statx)(int, const char *, int, unsigned int, struct statx *);
    int (*__xstat)(int, const char *, struct stat *);
    int (*__xstat64)(int, const char *, struct stat64 *);
    int (*__lxstat)(int, const char *, struct stat *);
    int (*__lxstat64)(int, const char *, struct stat64 *);
    int (*__fxstatat)(int, int, const char *, struct stat *, int);
    int (*__fxstatat64)(int, int, const char *, struct stat64 *, int);

    int (*flock)(int, int);
    int (*fcntl)(int, int, ...);
    int (*fcntl64)(int, int, ...);
    int (*lockf)(int, int, off_t);
    int (*lockf64)(int, int, off_t);

    int (*unlink)(const char *);
    int (*unlinkat)(int, const char *, int);
    int (*rename)(const char *, const char *);
    int (*renameat)(int, const char *, int, const char *);
    int (*renameat2)(int, const char *, int, const char *, unsigned int);

    pid_t (*fork)(void);
    int (*posix_spawn)(pid_t *, const char *, const void *, const void *, char *const[],
                       char *const[]);
    int (*posix_spawnp)(pid_t *, const char *, const void *, const void *, char *const[],
                        char *const[]);
    void (*exit)(int) __attribute__((noreturn));
    void (*_exit)(int) __attribute__((noreturn));
    void (*_Exit)(int) __attribute__((noreturn));
};

HDX_HIDDEN extern struct hdx_real hdx_real;

/*
 * Resolve one real function (name is its symbol) and store it in *slot. The
 * pointer itself is the once-guard: resolved at load by the constructor, or
 * here on a call that comes earlier. Returns the pointer, NULL when the
 * symbol is missing or when called re-entrantly from inside dlsym.
 */
HDX_HIDDEN void *hdx_resolve(void **slot, const char *name);

#define REAL(name)                                                                   \
    (__atomic_load_n(&hdx_real.name, __ATOMIC_RELAXED)                               \
         ? hdx_real.name                                                             \
         : (__typeof__(hdx_real.name))hdx_resolve((void **)&hdx_real.name, #name))

/* 1 while tracing (HANGDX_TRACE_DIR set, its file open, nothing lost or cut). */
HDX_HIDDEN extern atomic_int hdx_on;

/* ---- writer.c: JSON lines into a buffer ---- */

struct hdx_w {
    char buf[HDX_TRACE_LINE_MAX];
    size_t len;
    size_t soft; /* appends stop here; the rest is kept for closing brackets */
    int truncated;
};

/* ---- pool.c: the buffers of the recording path ---- */

/* One buffer: a line, and room for one path (resolved, read from /proc, or
 * copied from the table of lock paths). */
struct hdx_buf {
    struct hdx_w w;
    char path[PATH_MAX];
};

/* Buffers in the pool: one per thread recording at the same instant. */
#define HDX_POOL_N 16

/*
 * Claim a free buffer (lock-free, async-signal-safe: one compare-and-swap on
 * a bit mask). Returns its index, or -1 when all are lent (the caller then
 * records nothing and counts a dropped event).
 */
HDX_HIDDEN int hdx_pool_get(void);
/* The buffer of index i (from hdx_pool_get). */
HDX_HIDDEN struct hdx_buf *hdx_pool_buf(int i);
/* Give back index i (-1: nothing). */
HDX_HIDDEN void hdx_pool_put(int i);
/* Fork child: only the forking thread lives; every buffer but keep (its own, or -1) is free. */
HDX_HIDDEN void hdx_pool_reset(int keep);
/* Events not recorded for want of a free buffer; written as "dropped" in the exit line. */
HDX_HIDDEN extern atomic_long hdx_dropped;

/*
 * Enter the recording path: returns the buffer lent for it (give it back with
 * hdx_leave()), or NULL to skip: in a vfork child (the cached pid differs
 * from the real one; nothing is written, not even the thread-local guard),
 * when this thread is already inside the shim, or when no buffer is free
 * (counted in hdx_dropped).
 */
HDX_HIDDEN struct hdx_buf *hdx_enter(void);
HDX_HIDDEN void hdx_leave(void);
/* 1 when this thread is inside the shim (read only). */
HDX_HIDDEN int hdx_busy(void);

/* The fork() child: take the new pid, open the child's own file, write its header. */
HDX_HIDDEN void hdx_after_fork_child(void);

/* ---- tracefd.c: the trace file's descriptor ---- */

/*
 * Where the trace fd goes (README, "hangdx run"): when the soft RLIMIT_NOFILE
 * is at most HDX_FD_HIGH and the hard limit above it, the first free number
 * at or past the soft limit (within HDX_FD_ROOM of it), which the program's
 * open() and dup2() cannot reach; else the first free number of the
 * HDX_FD_TRIES below min(soft, HDX_FD_HIGH). Not higher: the kernel's fd
 * table grows to the highest open number (8 bytes each), copied at each fork.
 */
#define HDX_FD_HIGH 4096
#define HDX_FD_ROOM 16
#define HDX_FD_TRIES 16

/*
 * Move the freshly opened (O_CLOEXEC) trace fd low to the shim's number; low
 * is closed. reuse: the shim's previous trace fd, checked to be its own (a
 * fork child's inherited one), or -1: its number is taken again (dup3) when
 * the rule allows, else it is closed. Call only with one thread and every
 * signal blocked. Returns the new close-on-exec fd, or -1 (nothing left open).
 */
HDX_HIDDEN int hdx_fd_place(int low, int reuse);
/* This process's threads (/proc/self/task, no fd taken); -1 when unknown. */
HDX_HIDDEN int hdx_threads(void);
/* Block every signal of this thread; returns the mask to restore. */
HDX_HIDDEN uint64_t hdx_sig_block(void);
HDX_HIDDEN void hdx_sig_restore(uint64_t old);

/* Start an event line: {"type":TYPE,"t":NOW,"tid":TID */
HDX_HIDDEN void hdx_w_event(struct hdx_w *w, const char *type);
/* Start with raw text (the header). */
HDX_HIDDEN void hdx_w_begin(struct hdx_w *w);
HDX_HIDDEN void hdx_w_raw(struct hdx_w *w, const char *s);
/* A closing bracket: goes into the reserved room when needed. */
HDX_HIDDEN void hdx_w_close(struct hdx_w *w, const char *s);
HDX_HIDDEN void hdx_w_int(struct hdx_w *w, int64_t v);
/* A JSON string: quoted, escaped; truncated (on a character boundary) to fit. */
HDX_HIDDEN void hdx_w_str(struct hdx_w *w, const char *s);
HDX_HIDDEN void hdx_w_strn(struct hdx_w *w, const char *s, size_t n);
/* "key": (with a leading comma if comma), all or nothing: -1 (and nothing
 * written) when it and a short value do not fit; the value must then be skipped. */
HDX_HIDDEN int hdx_w_key(struct hdx_w *w, const char *key, int comma);
/* ,"key":value helpers (the pair is skipped when the key does not fit) */
HDX_HIDDEN void hdx_w_kint(struct hdx_w *w, const char *key, int64_t v);
HDX_HIDDEN void hdx_w_kstr(struct hdx_w *w, const char *key, const char *s);
/* ,"key":PATH whole, or ,"key":null when it is NULL, not absolute or does not fit
 * whole: an event never names a cut or relative path. */
HDX_HIDDEN void hdx_w_kpath(struct hdx_w *w, const char *key, const char *path);
/* ,"argv":[...] from a NULL-terminated vector (NULL gives []). */
HDX_HIDDEN void hdx_w_kargv(struct hdx_w *w, const char *key, char *const *argv);
/* The same from n bytes of NUL-separated strings (/proc/self/cmdline); more: the
 * bytes were cut, so argv is marked truncated. */
HDX_HIDDEN void hdx_w_kargz(struct hdx_w *w, const char *key, const char *z, size_t n, int more);
/* Close the object ("}\n") and write the line to the trace file. */
HDX_HIDDEN void hdx_w_emit(struct hdx_w *w);

/*
 * Append-one-write of a finished line. Writes only into the shim's own trace
 * fd, checked before each line (fstat: regular, the device and inode it
 * created); one that the program closed or replaced is never written to nor
 * closed: the file is reopened when the process has one thread, else the
 * shim records nothing more for this process.
 */
HDX_HIDDEN void hdx_trace_write(const char *line, size_t len);

HDX_HIDDEN int64_t hdx_now_ns(void);
HDX_HIDDEN pid_t hdx_gettid(void);
/* Decimal of v into out (at least 24 bytes); returns the length. */
HDX_HIDDEN size_t hdx_itoa(int64_t v, char *out);

/* ---- paths.c: absolute paths and the table of known lock paths ---- */

/*
 * Absolute form of path, relative to dirfd (AT_FDCWD: the cwd), into out
 * (cap bytes). Not normalised beyond dropping leading "./". Returns 0, or -1
 * when it cannot be told (out then holds path as given, possibly truncated).
 */
HDX_HIDDEN int hdx_abs_path(int dirfd, const char *path, char *out, size_t cap);
/* The path of an open fd (readlink /proc/self/fd/N); 0, or -1 ("?" in out) when it has
 * none or it does not fit in cap - 2 bytes. */
HDX_HIDDEN int hdx_fd_path(int fd, char *out, size_t cap);

enum hdx_kind { HDX_KIND_BATON = 1, HDX_KIND_KERNEL = 2 };
enum hdx_how { HDX_HOW_EEXIST, HDX_HOW_STAT, HDX_HOW_FLOCK, HDX_HOW_POSIX, HDX_HOW_OFD,
               HDX_HOW_LOCKF, HDX_HOW_N };

/* Live known lock paths of a kind; the cheap test every stat call makes. */
HDX_HIDDEN extern atomic_int hdx_known_baton;
HDX_HIDDEN extern atomic_int hdx_known_kernel;

/*
 * Look up a path (the string as given) among the live slots of a kind.
 * Returns the canonical slot (the one whose key is the absolute path), or -1.
 */
HDX_HIDDEN int hdx_lock_find(enum hdx_kind kind, const char *path);
/*
 * Remember a lock path: the string as given and its absolute form (abs, may
 * equal given). Returns the canonical slot, or -1 when the table is full or
 * the path too long (then nothing is aggregated for it).
 */
HDX_HIDDEN int hdx_lock_add(enum hdx_kind kind, const char *given, const char *abs);
/* Forget a canonical slot and every alias of it. */
HDX_HIDDEN void hdx_lock_forget(int slot);
/*
 * Copy the canonical (absolute) path of slot into out (cap bytes with its NUL).
 * Returns 0, or -1 when the slot is no longer that canonical slot (forgotten, or
 * claimed again by another thread while it was read) or the path does not fit:
 * then out holds nothing to use. Async-signal-safe.
 */
HDX_HIDDEN int hdx_lock_path_copy(int slot, char *out, size_t cap);
/* Count one poll of a wait on slot; writes the aggregated wait line when due, in b
 * (b's path and line are overwritten). */
HDX_HIDDEN void hdx_wait_poll(struct hdx_buf *b, int slot, enum hdx_how how);
/* The wait of that kind on slot is over (the lock was taken, or is gone). */
HDX_HIDDEN void hdx_wait_reset(int slot, enum hdx_how how);
/* Forget all wait counters (fork child). */
HDX_HIDDEN void hdx_wait_reset_all(void);

/* A failed non-blocking kernel lock attempt on fd (EWOULDBLOCK/EAGAIN/EACCES). */
HDX_HIDDEN void hdx_kernel_wait(int fd, enum hdx_how how);
/* A successful kernel lock on fd: its wait (if any) is over. */
HDX_HIDDEN void hdx_kernel_taken(int fd, enum hdx_how how);

/* lock.c: write every pending lock_count line (at exit); forget all counts (fork child). */
HDX_HIDDEN void hdx_lock_counts_flush(struct hdx_buf *b);
HDX_HIDDEN void hdx_lock_counts_reset(void);
/* Longest path the lock-count table keeps (longer ones are always recorded in full). */
#define HDX_LOCK_PATH_MAX_COUNT 512

/* ---- open.c / stat.c / release.c helpers ---- */

/* After an open/openat of (dirfd, path, flags) that returned fd (errno e). */
HDX_HIDDEN void hdx_after_open(int dirfd, const char *path, int flags, int fd, int e);
/* After a stat-family call on (dirfd, path) that returned rc (errno e). */
HDX_HIDDEN void hdx_after_stat(const char *path, int rc, int e);

#endif
