#include "model/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hdx_stat_parse(const char *text, hdx_stat *out)
{
    memset(out, 0, sizeof *out);
    const char *open = strchr(text, '('), *close = strrchr(text, ')'); /* comm may hold ')' */
    if (!open || !close || close < open || close[1] != ' ')
        return -EIO;
    size_t len = (size_t)(close - open - 1);
    if (len >= sizeof out->comm)
        len = sizeof out->comm - 1;
    memcpy(out->comm, open + 1, len);
    out->last = 2;
    const char *p = close + 2;
    for (int field = 3; field <= HDX_STAT_FIELDS; field++) {
        p += strspn(p, " \n");
        if (!*p)
            break;
        if (field == 3)
            out->state = *p;
        else
            out->f[field] = strtoull(p, NULL, 10);
        out->last = field;
        p += strcspn(p, " \n");
    }
    return 0;
}

int hdx_stat_read(const char *path, hdx_stat *out)
{
    char buf[4096];
    size_t n = 0;
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    while (n < sizeof buf - 1) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int rc = -errno;
            close(fd);
            return rc;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return hdx_stat_parse(buf, out);
}
