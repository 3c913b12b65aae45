/*
 * Memory backends of the Python frame reader, and the target's mappings.
 * Live: process_vm_readv(2), with pread(2) on /proc/PID/mem as the fallback
 * when process_vm_readv is missing or filtered (reference §6, Permissions).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "python/python.h"
#include "model/util.h"

typedef struct live_ctx {
    int pid;
    int use_mem; /* 1 once process_vm_readv was found unusable */
    int memfd;   /* /proc/PID/mem, opened on first need; -1 */
} live_ctx;

static int live_read_procmem(live_ctx *c, uint64_t addr, void *buf, size_t len)
{
    if (c->memfd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mem", c->pid);
        c->memfd = open(path, O_RDONLY | O_CLOEXEC);
        if (c->memfd < 0)
            return errno == ENOENT ? -ESRCH : -errno;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(c->memfd, (char *)buf + done, len - done, (off_t)(addr + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno == EIO ? -EFAULT : -errno;
        }
        if (r == 0)
            return -EFAULT;
        done += (size_t)r;
    }
    return 0;
}

static int live_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    live_ctx *c = ctx;
    if (!len)
        return 0;
    if (addr < 4096 || addr + len < addr)
        return -EFAULT;
    if (!c->use_mem) {
        struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
        ssize_t r = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
        if (r == (ssize_t)len)
            return 0;
        if (r >= 0)
            return -EFAULT; /* partial: the range runs into an unmapped page */
        int e = errno;
        if (e == ENOSYS || e == EPERM) {
            /* process_vm_readv missing, or filtered while /proc/PID/mem may work */
            int r2 = live_read_procmem(c, addr, buf, len);
            if (e == ENOSYS || (r2 != -EPERM && r2 != -EACCES)) {
                c->use_mem = 1;
                return r2;
            }
        }
        errno = e;
        return -errno;
    }
    return live_read_procmem(c, addr, buf, len);
}

static void live_close(void *ctx)
{
    live_ctx *c = ctx;
    if (c && c->memfd >= 0)
        close(c->memfd);
    free(c);
}

static const hdx_pymem_ops live_ops = { live_read, live_close };

int hdx_pymem_live(int pid, hdx_pymem *m)
{
    live_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->pid = pid;
    c->memfd = -1;
    m->ops = &live_ops;
    m->ctx = c;
    return 0;
}

int hdx_pymem_read(const hdx_pymem *m, uint64_t addr, void *buf, size_t len)
{
    if (!m || !m->ops)
        return -EINVAL;
    return m->ops->read(m->ctx, addr, buf, len);
}

void hdx_pymem_close(hdx_pymem *m)
{
    if (!m || !m->ops)
        return;
    if (m->ops->close)
        m->ops->close(m->ctx);
    m->ops = NULL;
    m->ctx = NULL;
}

/* ------------------------------------------------------------- mappings */

void hdx_pymaps_free(hdx_pymap *maps, size_t n)
{
    if (!maps)
        return;
    for (size_t i = 0; i < n; i++)
        free(maps[i].path);
    free(maps);
}

int hdx_pymaps_parse(const char *text, hdx_pymap **maps, size_t *n)
{
    *maps = NULL;
    *n = 0;
    hdx_pymap *arr = NULL;
    size_t cnt = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *next = nl ? nl + 1 : NULL;
        /* start-end perms offset dev inode [path], parsed within the line: sscanf would take
         * strlen of the whole rest of the text for every line (1700 lines for a torch rank) */
        const char *stop = line + len, *p = line;
        char *e;
        uint64_t start = strtoull(p, &e, 16), end = 0, off = 0;
        int ok = e != p && e < stop && *e == '-';
        if (ok) {
            end = strtoull(p = e + 1, &e, 16);
            ok = e != p && stop - e > 6 && e[0] == ' ' && e[5] == ' ';
        }
        char perms[5] = {0};
        if (ok) {
            memcpy(perms, e + 1, 4);
            off = strtoull(p = e + 6, &e, 16);
            ok = e != p && e < stop && *e == ' ';
        }
        unsigned long long dev_major = 0, dev_minor = 0, ino = 0;
        if (ok) { /* dev "fd:01", inode decimal */
            dev_major = strtoull(p = e + 1, &e, 16);
            ok = e != p && e < stop && *e == ':';
        }
        if (ok) {
            dev_minor = strtoull(p = e + 1, &e, 16);
            ok = e != p && e < stop && *e == ' ';
        }
        if (ok) {
            while (e < stop && *e == ' ')
                e++;
            ino = strtoull(p = e, &e, 10);
            ok = e != p && e <= stop;
        }
        if (!ok) {
            line = next;
            continue;
        }
        hdx_pymap *m = hdx_append((void **)&arr, &cnt, sizeof *arr);
        if (!m) {
            hdx_pymaps_free(arr, cnt);
            return -ENOMEM;
        }
        m->start = start;
        m->end = end;
        m->offset = off;
        m->dev_major = (unsigned)dev_major;
        m->dev_minor = (unsigned)dev_minor;
        m->ino = ino;
        memcpy(m->perms, perms, 5); /* "rwxp" and its NUL */
        p = e;
        while (p < stop && (*p == ' ' || *p == '\t'))
            p++;
        if (p < stop && !(m->path = strndup(p, (size_t)(stop - p)))) {
            hdx_pymaps_free(arr, cnt);
            return -ENOMEM;
        }
        line = next;
    }
    *maps = arr;
    *n = cnt;
    return 0;
}

/* 1 when path names m's file: the same device and inode. */
static int same_file(const char *path, const hdx_pymap *m)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_ino == m->ino &&
           major(st.st_dev) == m->dev_major && minor(st.st_dev) == m->dev_minor;
}

static int put_path(char *path, size_t size, const char *a, const char *b, size_t blen)
{
    int n = snprintf(path, size, "%s%.*s", a, (int)blen, b);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int hdx_pymap_file(int pid, const char *root, const hdx_pymap *m, char *path, size_t size)
{
    if (!m->path || m->path[0] != '/')
        return -ENOENT;
    size_t l = strlen(m->path);
    const char *del = " (deleted)";
    size_t dl = strlen(del);
    if (l > dl && !strcmp(m->path + l - dl, del))
        l -= dl;
    char files[64] = "";
    if (pid > 0)
        snprintf(files, sizeof files, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)m->start,
                 (unsigned long long)m->end);
    int known = m->ino != 0;
    if (known) {
        const char *cand[3][2] = {{files, ""}, {root ? root : "", m->path}, {"", m->path}};
        for (int i = 0; i < 3; i++) {
            if (!cand[i][0][0] && !cand[i][1][0])
                continue;
            if (put_path(path, size, cand[i][0], cand[i][1], i ? l : 0))
                return -ENAMETOOLONG;
            if (same_file(path, m))
                return 0;
        }
    }
    if (files[0] && access(files, R_OK) == 0)
        return put_path(path, size, files, "", 0);
    if (put_path(path, size, root ? root : "", m->path, l))
        return -ENAMETOOLONG;
    return access(path, R_OK) == 0 ? 0 : -ENOENT;
}

int hdx_pymaps_read(int pid, hdx_pymap **maps, size_t *n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    *maps = NULL;
    *n = 0;
    char *text = hdx_read_file(path, 64 << 20, NULL);
    if (!text)
        return errno == ENOENT ? -ESRCH : -errno;
    int rc = hdx_pymaps_parse(text, maps, n);
    free(text);
    return rc;
}
