/*
 * A snapshot file's bytes (snapshot.h): written whole or not at all, and read (from a file
 * or a text) within the reader's limits, parsed in the thread's cJSON arena, and handed to
 * the reader (snapshot_read.c).
 */
#include "formats/snapshot.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/json_arena.h"
#include "model/jsonout.h"
#include "model/outfile.h"
#include "model/util.h"

int hdx_snapshot_write(const hdx_evidence *ev, const char *path)
{
    cJSON *j = hdx_snapshot_json(ev);
    if (!j)
        return -errno;
    char *s = hdx_json_print(j, 1);
    cJSON_Delete(j);
    if (!s)
        return -ENOMEM;
    /* Published whole by rename (model/outfile.h): a reader never sees half a snapshot. */
    hdx_outfile out;
    int rc = hdx_outfile_open(&out, path);
    size_t len = strlen(s);
    if (!rc)
        rc = hdx_outfile_close(&out, fwrite(s, 1, len, out.f) != len || fputc('\n', out.f) == EOF ? -EIO : 0);
    free(s);
    return rc;
}

int hdx_snapshot_load_text(const char *text, size_t len, const char *name, hdx_evidence *ev, char **err)
{
    return hdx_snapshot_load_text_shared(text, len, name, ev, NULL, err);
}

int hdx_snapshot_load_text_shared(const char *text, size_t len, const char *name, hdx_evidence *ev,
                                  hdx_snapshot_share *share, char **err)
{
    if (err)
        *err = NULL;
    if (!text || !ev)
        return -EINVAL;
    name = name ? name : "input";
    if (len > HDX_SNAPSHOT_MAX_BYTES) {
        if (err)
            *err = hdx_asprintf("%s: larger than %u MiB: refused", name, HDX_SNAPSHOT_MAX_BYTES >> 20);
        return -EFBIG;
    }
    const char *end = NULL;
    int arena = hdx_json_arena_begin();
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        if (arena)
            hdx_json_arena_end();
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
        size_t last = len; /* cJSON stops at the last byte of an input cut short */
        while (last > 0 && (text[last - 1] == ' ' || text[last - 1] == '\n' || text[last - 1] == '\t' ||
                            text[last - 1] == '\r' || text[last - 1] == 0))
            last--;
        if (err)
            *err = at + 1 >= last ? hdx_asprintf("%s: not a whole JSON object (truncated?)", name)
                                  : hdx_asprintf("%s: not valid JSON (at byte %zu)", name, at);
        return -EBADMSG;
    }
    int rc = hdx_snapshot_from_json_shared(root, name, ev, share, err); /* nothing of root stays in ev */
    if (arena)
        hdx_json_arena_end(); /* root with it */
    else
        cJSON_Delete(root);
    return rc;
}

int hdx_snapshot_load(const char *path, hdx_evidence *ev, char **err)
{
    return hdx_snapshot_load_shared(path, ev, NULL, err);
}

int hdx_snapshot_load_shared(const char *path, hdx_evidence *ev, hdx_snapshot_share *share, char **err)
{
    if (err)
        *err = NULL;
    if (!path || !ev)
        return -EINVAL;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (err)
            *err = hdx_asprintf("%s: cannot read: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > HDX_SNAPSHOT_MAX_BYTES) {
        close(fd);
        if (err)
            *err = S_ISREG(st.st_mode)
                       ? hdx_asprintf("%s: larger than %u MiB: refused", path, HDX_SNAPSHOT_MAX_BYTES >> 20)
                       : hdx_asprintf("%s: not a regular file", path);
        return S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
    }
    size_t size = (size_t)st.st_size, n = 0;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    while (n < size) {
        ssize_t k = read(fd, buf + n, size - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    int rc = hdx_snapshot_load_text_shared(buf, n, path, ev, share, err);
    free(buf);
    return rc;
}
