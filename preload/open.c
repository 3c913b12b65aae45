/*
 * The open family. Only O_CREAT|O_EXCL opens are of interest (FileBaton's
 * lock file): success is an acquire, EEXIST a wait. Every other open costs
 * one flag test.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>

#define EXCL (O_CREAT | O_EXCL)
#define INTERESTING(flags) (((flags) & EXCL) == EXCL && atomic_load_explicit(&hdx_on, memory_order_relaxed))

/* The mode argument exists only with O_CREAT or O_TMPFILE. */
#define GET_MODE(flags, mode)                                                  \
    do {                                                                       \
        if (__OPEN_NEEDS_MODE(flags)) {                                        \
            va_list ap;                                                        \
            va_start(ap, flags);                                               \
            mode = va_arg(ap, mode_t);                                         \
            va_end(ap);                                                        \
        }                                                                      \
    } while (0)

#define NO_REAL()                                                              \
    do {                                                                       \
        errno = ENOSYS;                                                        \
        return -1;                                                             \
    } while (0)

static int after(int dirfd, const char *path, int flags, int fd)
{
    int e = errno;
    if (INTERESTING(flags) && !hdx_busy()) {
        hdx_after_open(dirfd, path, flags, fd, e);
        errno = e;
    }
    return fd;
}

HDX_EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    GET_MODE(flags, mode);
    __typeof__(hdx_real.open) fn = REAL(open);
    if (!fn)
        NO_REAL();
    return after(AT_FDCWD, path, flags, fn(path, flags, mode));
}

HDX_EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    GET_MODE(flags, mode);
    __typeof__(hdx_real.open64) fn = REAL(open64);
    if (!fn)
        NO_REAL();
    return after(AT_FDCWD, path, flags, fn(path, flags, mode));
}

HDX_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    GET_MODE(flags, mode);
    __typeof__(hdx_real.openat) fn = REAL(openat);
    if (!fn)
        NO_REAL();
    return after(dirfd, path, flags, fn(dirfd, path, flags, mode));
}

HDX_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    GET_MODE(flags, mode);
    __typeof__(hdx_real.openat64) fn = REAL(openat64);
    if (!fn)
        NO_REAL();
    return after(dirfd, path, flags, fn(dirfd, path, flags, mode));
}

/* creat() is O_CREAT|O_WRONLY|O_TRUNC: never exclusive, a plain pass-through. */
HDX_EXPORT int creat(const char *path, mode_t mode)
{
    __typeof__(hdx_real.creat) fn = REAL(creat);
    if (!fn)
        NO_REAL();
    return fn(path, mode);
}

HDX_EXPORT int creat64(const char *path, mode_t mode)
{
    __typeof__(hdx_real.creat64) fn = REAL(creat64);
    if (!fn)
        NO_REAL();
    return fn(path, mode);
}

/* The _FORTIFY_SOURCE entry points: called without a mode (no O_CREAT). */
HDX_EXPORT int __open_2(const char *path, int flags)
{
    __typeof__(hdx_real.__open_2) fn = REAL(__open_2);
    if (!fn)
        NO_REAL();
    return after(AT_FDCWD, path, flags, fn(path, flags));
}

HDX_EXPORT int __open64_2(const char *path, int flags)
{
    __typeof__(hdx_real.__open64_2) fn = REAL(__open64_2);
    if (!fn)
        NO_REAL();
    return after(AT_FDCWD, path, flags, fn(path, flags));
}

HDX_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    __typeof__(hdx_real.__openat_2) fn = REAL(__openat_2);
    if (!fn)
        NO_REAL();
    return after(dirfd, path, flags, fn(dirfd, path, flags));
}

HDX_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    __typeof__(hdx_real.__openat64_2) fn = REAL(__openat64_2);
    if (!fn)
        NO_REAL();
    return after(dirfd, path, flags, fn(dirfd, path, flags));
}
