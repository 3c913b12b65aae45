/*
 * Memory backends of the Python frame reader.
 * Live: process_vm_readv(2), with pread(2) on /proc/PID/mem as the fallback
 * when process_vm_readv is missing or filtered (docs/python-frames.md "Permissions").
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
