/*
 * Output files made without a guessable name and published by rename (outfile.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE, AT_EMPTY_PATH */
#endif
#include "model/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 8 /* symbolic links followed, as outfile.h says */

enum { HOW_NONE, HOW_STDOUT, HOW_TMPFILE, HOW_NAMED, HOW_INPLACE };

/* What the output's name holds, after following the links outfile.h allows. */
enum kind { NEW, REPLACE, INPLACE, DIR_, FOREIGN_LINK };

/* A name resolved: its directory (O_PATH fd, the caller closes), last component, kind, and
 * the existing file's stat (REPLACE, INPLACE, FOREIGN_LINK). */
typedef struct resolved {
    int dirfd;
    char name[NAME_MAX + 1];
    enum kind kind;
    struct stat st;
} resolved;

/* The link of lstat st is one that outfile.h does not follow. */
static int foreign(const struct stat *st)
{
    return S_ISLNK(st->st_mode) && st->st_uid != geteuid() && st->st_uid != 0;
}

int hdx_outfile_foreign_link(const char *path)
{
    char p[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof p)
        return 0; /* the open that follows fails with ENAMETOOLONG */
    memcpy(p, path, len + 1);
    /* Each prefix that ends a component ("a", "a/b", ..., path), lstat'ed: its last component
     * as it is, the ones before it as the kernel resolves them. */
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i])
            continue;
        if (p[i - 1] == '/')
            continue; /* "//", or a trailing slash, which would make lstat follow a link */
        char c = p[i];
        p[i] = 0;
        struct stat st;
        int bad = lstat(p, &st) == 0 && foreign(&st);
        p[i] = c;
        if (bad)
            return 1;
    }
    return 0;
}

/* Split path into its directory (opened O_PATH) and last component. -errno. */
static int split(const char *path, resolved *r)
{
    size_t len = strlen(path);
    if (!len)
        return -ENOENT;
    if (len >= PATH_MAX)
        return -ENAMETOOLONG;
    if (path[len - 1] == '/')
        return -EISDIR;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return -EISDIR;
    if (strlen(name) > NAME_MAX)
        return -ENAMETOOLONG;
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    snprintf(r->name, sizeof r->name, "%s", name);
    if (hdx_outfile_foreign_link(dir))
        return -EPERM;
    r->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return r->dirfd < 0 ? -errno : 0;
}

/* Resolve path by the rules of outfile.h into *r; r->dirfd is open when 0 is returned. */
static int resolve(const char *path, resolved *r)
{
    char cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int depth = 0;; depth++) {
        int rc = split(cur, r);
        if (rc)
            return rc;
        if (fstatat(r->dirfd, r->name, &r->st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT)
                goto fail;
            r->kind = NEW;
            return 0;
        }
        if (!S_ISLNK(r->st.st_mode)) {
            r->kind = S_ISREG(r->st.st_mode) ? REPLACE : S_ISDIR(r->st.st_mode) ? DIR_ : INPLACE;
            return 0;
        }
        if (foreign(&r->st)) {
            r->kind = FOREIGN_LINK;
            return 0;
        }
        /* A link to a pipe or device (/dev/stdout -> /proc/self/fd/1 -> pipe:[N]) is written
         * through as it is: its target is no path to resolve. */
        struct stat t;
        if (fstatat(r->dirfd, r->name, &t, 0) == 0 && !S_ISREG(t.st_mode) && !S_ISDIR(t.st_mode)) {
            r->st = t;
            r->kind = INPLACE;
            return 0;
        }
        char target[PATH_MAX];
        ssize_t n = readlinkat(r->dirfd, r->name, target, sizeof target - 1);
        if (n < 0)
            goto fail;
        target[n] = 0;
        if (depth >= MAX_LINKS) { /* cur was the (depth+1)th link */
            errno = ELOOP;
            goto fail;
        }
        size_t keep = 0; /* a relative target is relative to the link's directory */
        const char *slash = strrchr(cur, '/');
        if (target[0] != '/' && slash)
            keep = (size_t)(slash - cur) + 1;
        if (keep + (size_t)n >= sizeof cur) {
            errno = ENAMETOOLONG;
            goto fail;
        }
        memcpy(cur + keep, target, (size_t)n + 1);
        close(r->dirfd);
    }
fail:;
    int e = errno;
    close(r->dirfd);
    r->dirfd = -1;
    return -e;
}

/* A nameless file in dirfd (O_TMPFILE), or -errno; -EOPNOTSUPP where the filesystem or
 * kernel has none (old kernels answer EISDIR, some filesystems EINVAL). */
static int open_tmpfile(int dirfd)
{
    int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0)
        return fd;
    return errno == EISDIR || errno == EINVAL ? -EOPNOTSUPP : -errno;
}

/* A fresh random name ".<name>.<16 hex>" for name, into out. -errno of getrandom. */
static int random_name(const char *name, char out[NAME_MAX + 1])
{
    uint64_t r;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        return errno ? -errno : -EIO;
    snprintf(out, NAME_MAX + 1, ".%.*s.%016llx", NAME_MAX - 18, name, (unsigned long long)r);
    return 0;
}

/* Create a file under a random name in dirfd (O_EXCL|O_NOFOLLOW: a name that exists, link
 * or not, is never opened), its name into tmp. fd, or -errno. */
static int open_named(int dirfd, const char *name, char tmp[NAME_MAX + 1])
{
    for (int tries = 0; tries < 8; tries++) {
        int rc = random_name(name, tmp);
        if (rc)
            return rc;
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd >= 0 ? fd : -errno;
    }
    return -EEXIST;
}

int hdx_outfile_open(hdx_outfile *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->dirfd = -1;
    if (!path || !strcmp(path, "-")) {
        o->f = stdout;
        o->how = HOW_STDOUT;
        return 0;
    }
    resolved r;
    int rc = resolve(path, &r);
    if (rc)
        return rc;
    int fd;
    if (r.kind == DIR_) {
        fd = -EISDIR;
    } else if (r.kind == INPLACE) {
        /* A device or pipe: opened as it is (its link, if any, is trusted: resolve()). */
        fd = openat(r.dirfd, r.name, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
            fd = -errno;
        else if (fstat(fd, &st) != 0 || S_ISREG(st.st_mode)) { /* it changed: no in-place write */
            close(fd);
            fd = -EAGAIN;
        }
        o->how = HOW_INPLACE;
    } else {
        fd = open_tmpfile(r.dirfd);
        o->how = HOW_TMPFILE;
        if (fd == -EOPNOTSUPP) {
            fd = open_named(r.dirfd, r.name, o->tmp);
            o->how = HOW_NAMED;
        }
        /* The file replaced keeps its permissions when it was the caller's. */
        if (fd >= 0 && r.kind == REPLACE && r.st.st_uid == geteuid())
            (void)fchmod(fd, r.st.st_mode & 0777);
    }
    if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
        rc = fd < 0 ? fd : -errno;
        if (fd >= 0)
            close(fd);
        if (o->how == HOW_NAMED)
            unlinkat(r.dirfd, o->tmp, 0);
        close(r.dirfd);
        memset(o, 0, sizeof *o);
        o->dirfd = -1;
        return rc;
    }
    o->dirfd = r.dirfd;
    snprintf(o->name, sizeof o->name, "%s", r.name);
    return 0;
}

/* Give the nameless file fd a random name in dirfd, into tmp: linkat with AT_EMPTY_PATH
 * (needs CAP_DAC_READ_SEARCH), else through /proc/self/fd (proc(5)). 0 or -errno. */
static int link_tmpfile(int fd, int dirfd, const char *name, char tmp[NAME_MAX + 1])
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int tries = 0; tries < 8; tries++) {
        int rc = random_name(name, tmp);
        if (rc)
            return rc;
        if (linkat(fd, "", dirfd, tmp, AT_EMPTY_PATH) == 0 ||
            (errno != EEXIST && linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) == 0))
            return 0;
        if (errno != EEXIST) {
            tmp[0] = 0;
            return -errno;
        }
    }
    tmp[0] = 0;
    return -EEXIST;
}

int hdx_outfile_close(hdx_outfile *o, int rc)
{
    if (!o || !o->f)
        return rc;
    if (o->how == HOW_STDOUT) {
        if ((fflush(o->f) != 0 || ferror(o->f)) && !rc)
            rc = -EIO;
        o->f = NULL;
        return rc;
    }
    if (!rc && fflush(o->f) != 0)
        rc = -errno;
    if (!rc && o->how == HOW_TMPFILE)
        rc = link_tmpfile(fileno(o->f), o->dirfd, o->name, o->tmp);
    if (fclose(o->f) != 0 && !rc)
        rc = -errno;
    o->f = NULL;
    /* renameat replaces the name itself: a link there is replaced, not written through. */
    if (!rc && o->tmp[0] && renameat(o->dirfd, o->tmp, o->dirfd, o->name) != 0)
        rc = -errno;
    if (rc && o->tmp[0])
        unlinkat(o->dirfd, o->tmp, 0);
    close(o->dirfd);
    o->dirfd = -1;
    return rc;
}

int hdx_outfile_check(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return 0;
    resolved r;
    int rc = resolve(path, &r);
    if (rc)
        return rc;
    if (r.kind == DIR_)
        rc = -EISDIR;
    else if (r.kind == FOREIGN_LINK)
        rc = -EPERM;
    else if (r.kind != NEW && faccessat(r.dirfd, r.name, W_OK, AT_EACCESS) != 0)
        rc = -errno; /* a read-only file is not replaced (nor a device written) */
    else if (r.kind != INPLACE) {
        /* The directory must take a new file: a nameless one made and dropped says so for
         * sure (a read-only filesystem, a full quota of inodes); else its permission bits. */
        int fd = open_tmpfile(r.dirfd);
        if (fd >= 0)
            close(fd);
        else if (fd != -EOPNOTSUPP)
            rc = fd;
        else if (faccessat(r.dirfd, ".", W_OK | X_OK, AT_EACCESS) != 0)
            rc = -errno;
    }
    close(r.dirfd);
    return rc;
}
