/*
 * Release: unlink or rename of a known FileBaton lock path (its source, for
 * rename) is a release; the path is forgotten. Costs one atomic load when no
 * lock path is known.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static void after(int dirfd, const char *path, int rc)
{
    if (rc != 0 || !path || !atomic_load_explicit(&hdx_known_baton, memory_order_relaxed) ||
        !atomic_load_explicit(&hdx_on, memory_order_relaxed) || hdx_busy())
        return;
    int slot = hdx_lock_find(HDX_KIND_BATON, path);
    if (slot < 0 && path[0] == '/')
        return;
    int e = errno;
    struct hdx_buf *b = hdx_enter();
    if (!b) {
        errno = e;
        return;
    }
    if (slot < 0 && hdx_abs_path(dirfd, path, b->path, sizeof b->path) == 0)
        slot = hdx_lock_find(HDX_KIND_BATON, b->path);
    /* A copy that fails: another release of the lock forgot the slot meanwhile, and wrote
     * the line */
    if (slot >= 0 && hdx_lock_path_copy(slot, b->path, sizeof b->path) == 0) {
        struct hdx_w *w = &b->w;
        hdx_w_event(w, HDX_EV_RELEASE);
        hdx_w_kpath(w, "path", b->path);
        hdx_w_emit(w);
        hdx_lock_forget(slot);
    }
    hdx_leave();
    errno = e;
}

#define NO_REAL()                                                              \
    do {                                                                       \
        errno = ENOSYS;                                                        \
        return -1;                                                             \
    } while (0)

HDX_EXPORT int unlink(const char *path)
{
    __typeof__(hdx_real.unlink) fn = REAL(unlink);
    if (!fn)
        NO_REAL();
    int rc = fn(path);
    after(AT_FDCWD, path, rc);
    return rc;
}

HDX_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
    __typeof__(hdx_real.unlinkat) fn = REAL(unlinkat);
    if (!fn)
        NO_REAL();
    int rc = fn(dirfd, path, flags);
    after(dirfd, path, rc);
    return rc;
}

HDX_EXPORT int rename(const char *old, const char *new)
{
    __typeof__(hdx_real.rename) fn = REAL(rename);
    if (!fn)
        NO_REAL();
    int rc = fn(old, new);
    after(AT_FDCWD, old, rc);
    return rc;
}

HDX_EXPORT int renameat(int olddir, const char *old, int newdir, const char *new)
{
    __typeof__(hdx_real.renameat) fn = REAL(renameat);
    if (!fn)
        NO_REAL();
    int rc = fn(olddir, old, newdir, new);
    after(olddir, old, rc);
    return rc;
}

HDX_EXPORT int renameat2(int olddir, const char *old, int newdir, const char *new,
                         unsigned int flags)
{
    __typeof__(hdx_real.renameat2) fn = REAL(renameat2);
    if (!fn)
        NO_REAL();
    int rc = fn(olddir, old, newdir, new, flags);
    after(olddir, old, rc);
    return rc;
}
