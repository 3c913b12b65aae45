/*
 * The target's mappings (maps.h): /proc/PID/maps parsed, and the file behind
 * a mapping found by its device and inode.
 */
#include "native/maps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include "model/util.h"

void hdx_maps_free(hdx_map *maps, size_t n)
{
    if (!maps)
        return;
    for (size_t i = 0; i < n; i++)
        free(maps[i].path);
    free(maps);
}

int hdx_maps_parse(const char *text, hdx_map **maps, size_t *n)
{
    *maps = NULL;
    *n = 0;
    hdx_map *arr = NULL;
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
        hdx_map *m = hdx_append((void **)&arr, &cnt, sizeof *arr);
        if (!m) {
            hdx_maps_free(arr, cnt);
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
            hdx_maps_free(arr, cnt);
            return -ENOMEM;
        }
        line = next;
    }
    *maps = arr;
    *n = cnt;
    return 0;
}

/* 1 when path names m's file: the same device and inode. */
static int same_file(const char *path, const hdx_map *m)
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

int hdx_map_file(int pid, const char *root, const hdx_map *m, char *path, size_t size)
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

int hdx_maps_read(int pid, hdx_map **maps, size_t *n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    *maps = NULL;
    *n = 0;
    char *text = hdx_read_file(path, 64 << 20, NULL);
    if (!text)
        return errno == ENOENT ? -ESRCH : -errno;
    int rc = hdx_maps_parse(text, maps, n);
    free(text);
    return rc;
}
