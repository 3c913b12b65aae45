#include "gather/nspath.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/util.h"

/* The identity a candidate must have: the file's, or its directory's when it is missing. */
typedef struct ident {
    dev_t dev;
    ino_t ino;
    int of_dir; /* 1: the file is missing; dev/ino are its directory's */
} ident;

static int stat_ident(const char *path, int of_dir, ident *id)
{
    struct stat st;
    char dir[PATH_MAX];
    if (of_dir) {
        const char *slash = strrchr(path, '/');
        if (!slash || (size_t)(slash - path) >= sizeof dir)
            return -1;
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
        path = dir;
    }
    if (stat(path, &st) < 0)
        return -1;
    *id = (ident){st.st_dev, st.st_ino, of_dir};
    return 0;
}

static int same_ident(const char *cand, const ident *want)
{
    ident got;
    return stat_ident(cand, want->of_dir, &got) == 0 && got.dev == want->dev && got.ino == want->ino;
}

/* Undo mountinfo's octal escapes (\040 for a space, proc(5)) in place. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

/* The length of prefix when it is a leading run of whole components of path, else -1. */
static long component_prefix(const char *prefix, const char *path)
{
    size_t n = strlen(prefix);
    while (n && prefix[n - 1] == '/')
        n--;
    if (strncmp(prefix, path, n) || (path[n] && path[n] != '/'))
        return -1;
    return (long)n;
}

/* One mountinfo line: device, root and mount point (pointers into line, unescaped). */
typedef struct mount_line {
    char dev[32];
    char *root, *point;
} mount_line;

static int parse_mount_line(char *line, mount_line *m)
{
    char *f[5] = {0};
    char *save = NULL, *tok = strtok_r(line, " ", &save);
    for (int i = 0; tok && i < 5; i++, tok = i < 5 ? strtok_r(NULL, " ", &save) : NULL)
        f[i] = tok;
    if (!f[4] || strlen(f[2]) >= sizeof m->dev)
        return -1;
    strcpy(m->dev, f[2]);
    unescape(f[3]);
    unescape(f[4]);
    m->root = f[3];
    m->point = f[4];
    return 0;
}

/* The mount of pid's mountinfo whose mount point holds path (the last, longest one: later
 * mounts cover earlier ones), copied into *m with its buffers in *buf. -1 when none. */
static int mount_of(int pid, const char *path, mount_line *m, char **buf)
{
    char file[64];
    snprintf(file, sizeof file, "/proc/%d/mountinfo", pid);
    char *text = hdx_read_file(file, 4 << 20, NULL);
    if (!text)
        return -1;
    long best = -1;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        mount_line cur;
        long n;
        if (parse_mount_line(line, &cur) == 0 && (n = component_prefix(cur.point, path)) >= best) {
            best = n;
            *m = cur;
        }
    }
    if (best < 0) {
        free(text);
        return -1;
    }
    *buf = text;
    return 0;
}

/* The name here of pid's path through the mount that holds it: hangdx's mount of the same
 * device whose root holds that mount's root. Heap string, or NULL. */
static char *through_mounts(int pid, const char *path, const ident *want)
{
    mount_line theirs, ours;
    char *their_buf = NULL, *our_text = NULL, *found = NULL;
    if (mount_of(pid, path, &theirs, &their_buf) < 0)
        return NULL;
    long in_point = component_prefix(theirs.point, path);
    const char *rest = path + in_point; /* "" or "/..." */
    if (!(our_text = hdx_read_file("/proc/self/mountinfo", 4 << 20, NULL)))
        goto out;
    for (char *line = our_text, *next; line && *line && !found; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        long n;
        if (parse_mount_line(line, &ours) < 0 || strcmp(ours.dev, theirs.dev) ||
            (n = component_prefix(ours.root, theirs.root)) < 0)
            continue;
        char *cand = hdx_asprintf("%s%s%s", strcmp(ours.point, "/") ? ours.point : "", theirs.root + n, rest);
        if (cand && same_ident(cand, want))
            found = cand;
        else
            free(cand);
    }
out:
    free(their_buf);
    free(our_text);
    return found;
}

char *hdx_proc_path_here(int pid, const char *path, int *same)
{
    *same = 0;
    if (path[0] != '/') {
        errno = EINVAL;
        return NULL;
    }
    char *theirs = hdx_asprintf("/proc/%d/root%s", pid, path);
    if (!theirs)
        return NULL;
    ident want;
    if (stat_ident(theirs, 0, &want) < 0 && stat_ident(theirs, 1, &want) < 0) {
        free(theirs);
        *same = 1;
        return strdup(path);
    }
    if (same_ident(path, &want)) {
        free(theirs);
        *same = 1;
        return strdup(path);
    }
    char root[PATH_MAX], link[64];
    snprintf(link, sizeof link, "/proc/%d/root", pid);
    ssize_t n = readlink(link, root, sizeof root - 1);
    char *cand = NULL;
    if (n > 1) {
        root[n] = 0;
        cand = hdx_asprintf("%s%s", root, path);
        if (cand && !same_ident(cand, &want)) {
            free(cand);
            cand = NULL;
        }
    }
    if (!cand)
        cand = through_mounts(pid, path, &want);
    if (cand) {
        free(theirs);
        return cand;
    }
    return theirs;
}
