/*
 * The stat family. A stat of a known lock path is a poll of a wait (Python's
 * FileBaton: os.path.exists(lock) every 0.1 s). Every other stat costs one
 * atomic load when no lock path is known, a hash of the path otherwise.
 * Relative paths are matched as given (no getcwd per stat); a path given
 * relative to a directory fd other than AT_FDCWD is matched as given too.
 */
#include "shim.h"

#include <errno.h>
#include <sys/stat.h>

/* Not declared by glibc >= 2.33 headers, still exported by it. */
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);

static inline int after(const char *path, int rc)
{
    if (__builtin_expect(atomic_load_explicit(&hdx_known_baton, memory_order_relaxed) != 0, 0) &&
        path && atomic_load_explicit(&hdx_on, memory_order_relaxed) && !hdx_busy()) {
        int e = errno;
        hdx_after_stat(path, rc, e);
        errno = e;
    }
    return rc;
}

#define WRAP(ret, name, params, args, path)                                    \
    HDX_EXPORT ret name params                                                 \
    {                                                                          \
        __typeof__(hdx_real.name) fn = REAL(name);                             \
        if (!fn) {                                                             \
            errno = ENOSYS;                                                    \
            return -1;                                                         \
        }                                                                      \
        return after(path, fn args);                                           \
    }

WRAP(int, stat, (const char *p, struct stat *b), (p, b), p)
WRAP(int, stat64, (const char *p, struct stat64 *b), (p, b), p)
WRAP(int, lstat, (const char *p, struct stat *b), (p, b), p)
WRAP(int, lstat64, (const char *p, struct stat64 *b), (p, b), p)
WRAP(int, fstatat, (int d, const char *p, struct stat *b, int f), (d, p, b, f), p)
WRAP(int, fstatat64, (int d, const char *p, struct stat64 *b, int f), (d, p, b, f), p)
WRAP(int, statx, (int d, const char *p, int f, unsigned int m, struct statx *b), (d, p, f, m, b), p)
WRAP(int, __xstat, (int v, const char *p, struct stat *b), (v, p, b), p)
WRAP(int, __xstat64, (int v, const char *p, struct stat64 *b), (v, p, b), p)
WRAP(int, __lxstat, (int v, const char *p, struct stat *b), (v, p, b), p)
WRAP(int, __lxstat64, (int v, const char *p, struct stat64 *b), (v, p, b), p)
WRAP(int, __fxstatat, (int v, int d, const char *p, struct stat *b, int f), (v, d, p, b, f), p)
WRAP(int, __fxstatat64, (int v, int d, const char *p, struct stat64 *b, int f), (v, d, p, b, f), p)
