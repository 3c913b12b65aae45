/* Reader of hangdx.trace/1 directories and their conversion into evidence. */
#include "formats/traces.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hangdx/trace.h"
#include "model/json_read.h"
#include "model/redact.h"
#include "model/util.h"

/* Longest line the reader keeps; the shim writes at most HDX_TRACE_LINE_MAX. */
#define TRACE_READ_LINE_MAX (1u << 20)

/* ---- one line ---------------------------------------------------------- */

/* The fields of a line through json_read.h: 1 set, 0 absent (or null), -EINVAL of another
 * type or out of range, -ENOMEM; the line's error is -EBADMSG without a sentence. */
#define I64_FIELD(o, name, out) hdx_json_get_i64((o), (name), 0, INT64_MAX, (out), NULL)
#define INT_FIELD(o, name, out) hdx_json_get_int((o), (name), INT_MIN, INT_MAX, (out), NULL)

void hdx_trace_event_clear(hdx_trace_event *ev)
{
    if (!ev)
        return;
    free(ev->path);
    free(ev->how);
    free(ev->op);
    free(ev->cmd);
    free(ev->via);
    for (size_t i = 0; i < ev->argc; i++)
        free(ev->argv[i]);
    free(ev->argv);
    memset(ev, 0, sizeof *ev);
}

void hdx_trace_image_clear(hdx_trace_image *img)
{
    if (!img)
        return;
    free(img->file);
    free(img->host);
    free(img->trace_dir);
    free(img->boot_id);
    free(img->cwd);
    free(img->exe);
    for (size_t i = 0; i < img->argc; i++)
        free(img->argv[i]);
    free(img->argv);
    for (size_t i = 0; i < img->n_env; i++) {
        free(img->env[i].name);
        free(img->env[i].value);
    }
    free(img->env);
    for (size_t i = 0; i < img->n_events; i++)
        hdx_trace_event_clear(&img->events[i]);
    free(img->events);
    memset(img, 0, sizeof *img);
}

/* Derive rank variables the way hdx_process_set_env does, into img. */
static int image_set_env(hdx_trace_image *img, const char *name, const char *value)
{
    hdx_process tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.rank = img->rank;
    tmp.local_rank = img->local_rank;
    tmp.world_size = img->world_size;
    tmp.env = img->env;
    tmp.n_env = img->n_env;
    int r = hdx_process_set_env(&tmp, name, value);
    img->env = tmp.env;
    img->n_env = tmp.n_env;
    img->rank = tmp.rank;
    img->local_rank = tmp.local_rank;
    img->world_size = tmp.world_size;
    return r;
}

static int parse_header(const cJSON *o, hdx_trace_image *img)
{
    const char *schema = NULL;
    if (hdx_json_get_str(o, "schema", &schema, NULL) != 1)
        return -EBADMSG;
    if (strcmp(schema, HDX_TRACE_SCHEMA) != 0)
        return -EPROTONOSUPPORT;
    img->pid = img->ppid = HDX_UNKNOWN;
    img->rank = img->local_rank = img->world_size = HDX_UNKNOWN;
    int64_t v = 0;
    int r = 0;
    if (INT_FIELD(o, "pid", &img->pid) != 1 || img->pid <= 0)
        goto bad;
    if (INT_FIELD(o, "ppid", &img->ppid) < 0 || I64_FIELD(o, "t", &img->t_ns) < 0)
        goto bad;
    if ((r = I64_FIELD(o, "start_time", &v)) < 0)
        goto bad;
    img->start_ticks = r == 1 ? (uint64_t)v : 0;
    if ((r = I64_FIELD(o, "pid_ns", &v)) < 0)
        goto bad;
    img->pid_ns = r == 1 ? (uint64_t)v : 0;
    if ((r = I64_FIELD(o, "mnt_ns", &v)) < 0)
        goto bad;
    img->mnt_ns = r == 1 ? (uint64_t)v : 0;
    if ((r = hdx_json_get_strdup(o, "trace_dir", &img->trace_dir, NULL)) < 0)
        goto fail;
    if ((r = hdx_json_get_strdup(o, "host", &img->host, NULL)) < 0 ||
        (r = hdx_json_get_strdup(o, "boot_id", &img->boot_id, NULL)) < 0 ||
        (r = hdx_json_get_strdup(o, "cwd", &img->cwd, NULL)) < 0 ||
        (r = hdx_json_get_strdup(o, "exe", &img->exe, NULL)) < 0 ||
        (r = hdx_json_get_strv(o, "argv", &img->argv, &img->argc, NULL)) < 0)
        goto fail;
    const cJSON *env = NULL;
    if ((r = hdx_json_get_object(o, "env", &env, NULL)) < 0)
        goto bad;
    if (env) {
        const cJSON *e;
        cJSON_ArrayForEach(e, env)
        {
            if (!cJSON_IsString(e) || !e->string)
                continue; /* one odd value does not spoil the header */
            if ((r = image_set_env(img, e->string, e->valuestring)) < 0)
                goto fail;
        }
    }
    return 2;
bad:
    r = -EBADMSG;
fail:
    if (r == -EINVAL)
        r = -EBADMSG;
    hdx_trace_image_clear(img);
    return r;
}

static const struct {
    const char *name;
    enum hdx_trace_ev_type type;
} ev_types[] = {
    {HDX_EV_ACQUIRE, HDX_TEV_ACQUIRE},       {HDX_EV_WAIT, HDX_TEV_WAIT},
    {HDX_EV_RELEASE, HDX_TEV_RELEASE},       {HDX_EV_LOCK_START, HDX_TEV_LOCK_START},
    {HDX_EV_LOCK_END, HDX_TEV_LOCK_END},     {HDX_EV_SPAWN, HDX_TEV_SPAWN},
    {HDX_EV_EXIT, HDX_TEV_EXIT},
};

static int parse_event(const cJSON *o, const char *type, hdx_trace_event *ev)
{
    size_t i;
    for (i = 0; i < sizeof ev_types / sizeof ev_types[0]; i++)
        if (strcmp(ev_types[i].name, type) == 0)
            break;
    if (i == sizeof ev_types / sizeof ev_types[0])
        return -ENOMSG;
    ev->type = ev_types[i].type;
    ev->tid = HDX_UNKNOWN;
    ev->fd = -1;
    ev->since_ns = HDX_UNKNOWN;
    ev->child = HDX_UNKNOWN;
    int r = 0;
    if (I64_FIELD(o, "t", &ev->t_ns) != 1 || INT_FIELD(o, "tid", &ev->tid) < 0)
        goto bad;
    switch (ev->type) {
    case HDX_TEV_ACQUIRE:
    case HDX_TEV_WAIT:
    case HDX_TEV_RELEASE:
    case HDX_TEV_LOCK_START:
    case HDX_TEV_LOCK_END:
        if ((r = hdx_json_get_strdup(o, "path", &ev->path, NULL)) != 1)
            goto fail;
        if (ev->path[0] != '/')
            goto bad; /* the format promises absolute paths */
        if (INT_FIELD(o, "fd", &ev->fd) < 0)
            goto bad;
        break;
    default:
        break;
    }
    switch (ev->type) {
    case HDX_TEV_WAIT:
        if ((r = hdx_json_get_strdup(o, "how", &ev->how, NULL)) < 0 || I64_FIELD(o, "polls", &ev->polls) < 0 ||
            I64_FIELD(o, "since", &ev->since_ns) < 0)
            goto fail;
        break;
    case HDX_TEV_LOCK_START:
    case HDX_TEV_LOCK_END:
        if ((r = hdx_json_get_strdup(o, "op", &ev->op, NULL)) != 1 ||
            (r = hdx_json_get_strdup(o, "cmd", &ev->cmd, NULL)) < 0)
            goto fail;
        if (ev->type == HDX_TEV_LOCK_END && (INT_FIELD(o, "rc", &ev->rc) != 1 || INT_FIELD(o, "errno", &ev->err) < 0))
            goto bad;
        break;
    case HDX_TEV_SPAWN:
        if (INT_FIELD(o, "child", &ev->child) != 1 || (r = hdx_json_get_strdup(o, "via", &ev->via, NULL)) < 0 ||
            (r = hdx_json_get_strv(o, "argv", &ev->argv, &ev->argc, NULL)) < 0)
            goto fail;
        break;
    case HDX_TEV_EXIT:
        if (INT_FIELD(o, "status", &ev->status) < 0 || I64_FIELD(o, "dropped", &ev->dropped) < 0)
            goto bad;
        break;
    default:
        break;
    }
    return 1;
bad:
    r = -EBADMSG;
fail:
    if (r >= 0 || r == -EINVAL) /* absent (0), or of another type (-EINVAL) */
        r = -EBADMSG;
    hdx_trace_event_clear(ev);
    return r;
}

int hdx_trace_parse_line(const char *line, size_t len, hdx_trace_event *ev, hdx_trace_image *img)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n'))
        i++;
    if (i == len)
        return 0;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!o)
        return -EBADMSG;
    int r = -EBADMSG;
    /* Nothing but white space may follow the object (a torn line glued to the next). */
    for (const char *p = end; p && p < line + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != 0)
            goto out;
    if (!cJSON_IsObject(o))
        goto out;
    const char *type = NULL;
    if (hdx_json_get_str(o, "type", &type, NULL) != 1)
        goto out;
    if (strcmp(type, HDX_EV_HEADER) == 0)
        r = parse_header(o, img);
    else if (strcmp(type, HDX_EV_LOCK_COUNT) == 0 || strcmp(type, HDX_EV_STOPPED) == 0)
        r = -EALREADY; /* the shim's bounds (trace.h): known, nothing kept */
    else
        r = parse_event(o, type, ev);
out:
    cJSON_Delete(o);
    return r;
}

/* ---- a directory ------------------------------------------------------- */

void hdx_trace_set_free(hdx_trace_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n_images; i++)
        hdx_trace_image_clear(&set->images[i]);
    free(set->images);
    for (size_t i = 0; i < set->n_notes; i++)
        free(set->notes[i]);
    free(set->notes);
    free(set->dir);
    free(set);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Read the next line of f into *buf (NUL-terminated, without the newline).
 * Returns 1 with a line, 2 for a line longer than TRACE_READ_LINE_MAX (its
 * content dropped), 0 at EOF, -errno on error. *torn is set when the line
 * had no newline (the last line of a process that died mid-write).
 */
static int read_line(FILE *f, char **buf, size_t *cap, size_t *len, int *torn)
{
    size_t n = 0;
    int c, too_long = 0;
    *torn = 0;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (too_long)
            continue;
        if (n + 1 >= *cap) {
            if (*cap >= TRACE_READ_LINE_MAX) {
                too_long = 1;
                continue;
            }
            size_t ncap = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, ncap);
            if (!nb)
                return -ENOMEM;
            *buf = nb;
            *cap = ncap;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF) {
        if (ferror(f))
            return -EIO;
        if (n == 0 && !too_long)
            return 0;
        *torn = 1;
    }
    if (*buf)
        (*buf)[n] = 0;
    *len = n;
    return too_long ? 2 : 1;
}

/* Add a note to set (printf-style). 0 or -ENOMEM. */
__attribute__((format(printf, 2, 3))) static int set_note(hdx_trace_set *set, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -ENOMEM;
    char **slot = hdx_append((void **)&set->notes, &set->n_notes, sizeof *slot);
    if (!slot) {
        free(s);
        return -ENOMEM;
    }
    *slot = s;
    return 0;
}

/*
 * Why a trace directory is not trusted (NULL: trusted): anyone else who can
 * write into it can forge traces, or rename and replace ours.
 */
static const char *dir_distrust(const struct stat *st, char *buf, size_t size)
{
    if (st->st_uid != geteuid()) {
        snprintf(buf, size, "owned by uid %u, not by you (uid %u)", (unsigned)st->st_uid, (unsigned)geteuid());
        return buf;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
        snprintf(buf, size, "writable by %s (mode %04o)", st->st_mode & S_IWOTH ? "everyone" : "its group",
                 (unsigned)(st->st_mode & 07777));
        return buf;
    }
    return NULL;
}

/* Open dirpath/name for reading if it is trusted: 1 with *out, 0 ignored (noted), -errno. */
static int open_trusted(hdx_trace_set *set, int dfd, const char *path, const char *name, FILE **out)
{
    struct stat st;
    *out = NULL;
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ELOOP)
            return set_note(set, "%s: a symbolic link, not a trace file: ignored", path) < 0 ? -ENOMEM : 0;
        return -errno;
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return set_note(set, "%s: not a regular file: ignored", path) < 0 ? -ENOMEM : 0;
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        return set_note(set, "%s: not owned by you (uid %u): ignored — a trace is trusted only from your own "
                             "processes",
                        path, (unsigned)st.st_uid) < 0
                   ? -ENOMEM
                   : 0;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (!(*out = fdopen(fd, "r"))) {
        int e = errno;
        close(fd);
        return -e;
    }
    return 1;
}

static int load_file(hdx_trace_set *set, int dfd, const char *dirpath, const char *name, char **err)
{
    char *path = hdx_asprintf("%s/%s", dirpath, name);
    char *buf = NULL;
    size_t cap = 0, len = 0;
    long cur = -1; /* index of the image events go to */
    int r = 0, torn;
    FILE *f = NULL;
    if (!path)
        return -ENOMEM;
    if ((r = open_trusted(set, dfd, path, name, &f)) <= 0) {
        if (r < 0 && r != -ENOMEM && err)
            *err = hdx_asprintf("%s: cannot read: %s", path, strerror(-r));
        goto out;
    }
    set->n_files++;
    for (;;) {
        r = read_line(f, &buf, &cap, &len, &torn);
        if (r == 0)
            break;
        if (r < 0) {
            if (err)
                *err = hdx_asprintf("%s: read error: %s", path, strerror(-r));
            goto out;
        }
        if (r == 2) {
            set->skipped_lines++;
            continue;
        }
        hdx_trace_event ev;
        hdx_trace_image img;
        memset(&ev, 0, sizeof ev);
        memset(&img, 0, sizeof img);
        int k = hdx_trace_parse_line(buf ? buf : "", len, &ev, &img);
        if (k == 2) {
            hdx_trace_image *slot = hdx_append((void **)&set->images, &set->n_images, sizeof *slot);
            if (!slot || !(img.file = strdup(path))) {
                hdx_trace_image_clear(&img);
                if (slot)
                    set->n_images--;
                r = -ENOMEM;
                goto out;
            }
            *slot = img;
            cur = (long)set->n_images - 1;
        } else if (k == 1) {
            if (cur < 0) {
                set->skipped_lines++; /* before any header: whose event is it? */
                hdx_trace_event_clear(&ev);
                continue;
            }
            hdx_trace_image *im = &set->images[cur];
            hdx_trace_event *slot = hdx_append((void **)&im->events, &im->n_events, sizeof *slot);
            if (!slot) {
                hdx_trace_event_clear(&ev);
                r = -ENOMEM;
                goto out;
            }
            *slot = ev;
            if (ev.type == HDX_TEV_EXIT)
                set->dropped_events += (size_t)ev.dropped;
        } else if (k == -EPROTONOSUPPORT) {
            r = k;
            if (err) {
                char found[64] = "another schema";
                cJSON *o = cJSON_ParseWithLength(buf, len);
                const char *s = NULL;
                if (hdx_json_get_str(o, "schema", &s, NULL) == 1)
                    snprintf(found, sizeof found, "schema %s", s);
                cJSON_Delete(o);
                *err = hdx_asprintf("%s: %s is not supported (this hangdx reads %s); "
                                    "read it with the hangdx that wrote it",
                                    path, found, HDX_TRACE_SCHEMA);
            }
            goto out;
        } else if (k == -EALREADY) {
            ; /* lock_count, stopped: known, nothing an analysis reads */
        } else if (k == -ENOMSG) {
            set->unknown_events++;
        } else if (k == -ENOMEM) {
            r = k;
            goto out;
        } else if (k < 0) {
            set->skipped_lines++; /* torn, garbage, wrong types */
        }
    }
    r = 0;
out:
    if (f)
        fclose(f);
    free(buf);
    free(path);
    return r;
}

int hdx_trace_load_dir(const char *dir, hdx_trace_set **out, char **err)
{
    hdx_trace_set *set = NULL;
    char **names = NULL;
    size_t n_names = 0;
    int r = 0;
    *out = NULL;
    if (err)
        *err = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        r = -errno;
        if (err) {
            if (errno == ENOENT)
                *err = hdx_asprintf("%s: no such directory", dir);
            else if (errno == ENOTDIR)
                *err = hdx_asprintf("%s: not a directory (a trace directory holds <host>-<pid>%s files)", dir,
                                    HDX_TRACE_SUFFIX);
            else
                *err = hdx_asprintf("%s: cannot read: %s", dir, strerror(errno));
        }
        return r;
    }
    struct stat dst;
    char why[128];
    const char *distrust = NULL;
    if (fstat(dirfd(d), &dst) != 0) {
        r = -errno;
        if (err)
            *err = hdx_asprintf("%s: cannot read: %s", dir, strerror(errno));
        goto out;
    }
    if ((distrust = dir_distrust(&dst, why, sizeof why))) {
        /* Read nothing from it: a trusted set with no images and the reason. */
        if (!(set = calloc(1, sizeof *set)) || !(set->dir = strdup(dir)) ||
            set_note(set, "%s: trace directory %s: not read — traces are trusted only from a directory "
                          "that only you can write (chmod 700 %s)",
                     dir, distrust, dir) < 0) {
            r = -ENOMEM;
            goto out;
        }
        *out = set;
        set = NULL;
        goto out;
    }
    struct dirent *de;
    size_t slen = strlen(HDX_TRACE_SUFFIX);
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l <= slen || strcmp(de->d_name + l - slen, HDX_TRACE_SUFFIX) != 0)
            continue;
        char **slot = hdx_append((void **)&names, &n_names, sizeof *slot);
        if (!slot || !(*slot = strdup(de->d_name))) {
            r = -ENOMEM;
            goto out;
        }
    }
    if (n_names == 0) {
        r = -ENOENT;
        if (err)
            *err = hdx_asprintf("%s: not a hangdx trace directory (no *%s files)", dir, HDX_TRACE_SUFFIX);
        goto out;
    }
    qsort(names, n_names, sizeof *names, cmp_str);
    if (!(set = calloc(1, sizeof *set)) || !(set->dir = strdup(dir))) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_names; i++)
        if ((r = load_file(set, dirfd(d), dir, names[i], err)) < 0)
            goto out;
    *out = set;
    set = NULL;
out:
    if (r == -ENOMEM && err && !*err)
        *err = hdx_asprintf("%s: out of memory", dir);
    closedir(d);
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    hdx_trace_set_free(set);
    return r;
}

/* ---- into evidence ----------------------------------------------------- */

/* One event (or an image's start) in the replay, in time order. */
typedef struct ref {
    int64_t t;
    size_t img;
    long ev; /* -1: the image's header */
    size_t seq;
} ref;

static int cmp_ref(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

typedef struct pwait {
    size_t img;
    int tid;
    int64_t since;
    const char *how; /* borrowed from the event */
    int active;
} pwait;

/* What the replay knows of one path. */
/*
 * How one image's pids and paths read here (docs/design.md "Containers"): a process of
 * another pid namespace is looked up by its NSpid and start time, and a path of another
 * mount namespace is mapped by the trace directory (the same directory seen from both
 * sides gives the two prefixes), else through a live process of that namespace
 * (/proc/PID/root). A path that cannot be mapped is not this host's: the lock is foreign.
 */
typedef struct nsview {
    int foreign_pid;  /* its pid namespace is not hangdx's */
    int host_pid;     /* foreign_pid: its pid here while it lives, else 0 */
    int foreign_mnt;  /* its mount namespace is not hangdx's */
    const hdx_trace_host *host; /* foreign_mnt: what names its paths here (borrowed) */
    uint64_t mnt_ns;  /* foreign_mnt: its mount namespace */
    int live;         /* foreign_mnt: a live process of its mount namespace, or 0 */
    char *from, *to;  /* foreign_mnt: by the trace directory, a path under from is to + the
                         rest; from NULL: no such mapping */
} nsview;

/* The length of the longest common tail of paths a and b that begins at a component of both. */
static size_t common_tail(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), best = 0;
    for (size_t n = 0; n < la && n < lb && a[la - 1 - n] == b[lb - 1 - n];) {
        n++;
        if ((n == la || a[la - 1 - n] == '/') && (n == lb || b[lb - 1 - n] == '/'))
            best = n;
    }
    return best;
}

/* A copy of the first n bytes of s without trailing slashes. */
static char *prefix_of(const char *s, size_t n)
{
    while (n && s[n - 1] == '/')
        n--;
    return strndup(s, n);
}

/* ---- the host the traces are checked against (hdx_trace_host; NULL: none) ---- */

static uint64_t host_own_ns(const hdx_trace_host *h, const char *name)
{
    return h && h->own_ns ? h->own_ns(name, h->ctx) : 0;
}

static int host_pid_in_ns(const hdx_trace_host *h, uint64_t pid_ns, int nspid, uint64_t start_ticks)
{
    return h && h->pid_in_ns ? h->pid_in_ns(pid_ns, nspid, start_ticks, h->ctx) : 0;
}

static int host_in_mnt_ns(const hdx_trace_host *h, uint64_t mnt_ns, uint64_t before_ticks)
{
    return h && h->in_mnt_ns ? h->in_mnt_ns(mnt_ns, before_ticks, h->ctx) : 0;
}

static int host_alive(const hdx_trace_host *h, int pid, uint64_t start_ticks)
{
    return h && h->alive ? h->alive(pid, start_ticks, h->ctx) : 0;
}

/* The host's boot id, "" when there is no host or it is unknown. */
static const char *host_boot_id(const hdx_trace_host *h)
{
    const char *b = h && h->boot_id ? h->boot_id(h->ctx) : NULL;
    return b ? b : "";
}

/* The host's name for messages, or NULL when there is no host. */
static const char *host_name(const hdx_trace_host *h)
{
    return h && h->hostname ? h->hostname(h->ctx) : NULL;
}

/* A path that live process pid of another mount namespace names, as the host names it
 * (host->path_here); NULL when there is no host or on ENOMEM. */
static char *host_path_here(const hdx_trace_host *h, int pid, const char *path, int *same)
{
    return h && h->path_here ? h->path_here(pid, path, same, h->ctx) : NULL;
}

/* Paths of a foreign mount namespace: through a live process of it, exactly
 * (hdx_trace_host's path_here), a process of this boot that was in it when the image
 * started (a namespace's inode is reused once it is gone); else, once the container is
 * gone, by the trace directory seen from both sides (exact when the directory lies in the
 * container's root, a guess when it was bind-mounted from elsewhere: path_here checks it). */
static int view_of(const hdx_trace_set *set, const hdx_trace_image *img, const hdx_trace_host *host, nsview *v)
{
    memset(v, 0, sizeof *v);
    uint64_t own_pid = host_own_ns(host, "pid"), own_mnt = host_own_ns(host, "mnt");
    v->foreign_pid = img->pid_ns && own_pid && img->pid_ns != own_pid;
    if (v->foreign_pid)
        v->host_pid = host_pid_in_ns(host, img->pid_ns, img->pid, img->start_ticks);
    v->foreign_mnt = img->mnt_ns && own_mnt && img->mnt_ns != own_mnt;
    if (!v->foreign_mnt)
        return 0;
    v->host = host;
    v->mnt_ns = img->mnt_ns;
    const char *boot = host_boot_id(host);
    if (img->boot_id && boot[0] && !strcmp(img->boot_id, boot))
        v->live = host_in_mnt_ns(host, img->mnt_ns, img->start_ticks);
    char host_dir[PATH_MAX];
    size_t t;
    if (!img->trace_dir || !realpath(set->dir, host_dir) || !(t = common_tail(host_dir, img->trace_dir)))
        return 0; /* no mapping by the trace directory */
    v->from = prefix_of(img->trace_dir, strlen(img->trace_dir) - t);
    v->to = prefix_of(host_dir, strlen(host_dir) - t);
    if (!v->from || !v->to) {
        free(v->from);
        free(v->to);
        v->from = v->to = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* The path of image's path p as seen here (heap), or NULL when it cannot be mapped; *same
 * says whether it is p itself. A live process of the namespace names it exactly (its
 * /proc/PID/root name when nothing of this host's mounts holds it). Else the trace
 * directory's mapping, taken only when the directory it gives exists here: a trace
 * directory bind-mounted from elsewhere would give a namesake. */
static char *path_here(const nsview *v, const char *p, int *same)
{
    *same = !v->foreign_mnt;
    if (!v->foreign_mnt)
        return strdup(p);
    if (v->live)
        return host_path_here(v->host, v->live, p, same);
    *same = 0;
    size_t lf = v->from ? strlen(v->from) : 0;
    if (!v->from || strncmp(p, v->from, lf) || (lf && p[lf] && p[lf] != '/'))
        return NULL;
    char *here = hdx_asprintf("%s%s", v->to, p + lf), *slash = here ? strrchr(here, '/') : NULL;
    if (slash && slash > here) {
        *slash = 0;
        int dir = v->host && v->host->is_dir && v->host->is_dir(here, v->host->ctx) == 1;
        *slash = '/';
        if (!dir) {
            free(here);
            return NULL;
        }
    }
    return here;
}

typedef struct pstate {
    char *path;       /* the lock file as seen here (heap), or as the job saw it when foreign */
    const char *job_path; /* as the job saw it (borrowed from an event) when that differs, else NULL */
    int foreign;      /* its path is another mount namespace's and could not be mapped here */
    uint64_t mnt_ns;  /* foreign: that namespace */
    int baton;        /* seen in acquire / wait / release */
    long creator;     /* image of the acquire not followed by a release, -1 */
    int64_t created;
    long taker;       /* kernel: image of the last successful blocking lock call, -1 */
    int64_t taken;
    pwait *waits; /* baton waiters and pending kernel lock calls */
    size_t n_waits;
} pstate;

/* The state of the lock file an event of an image with view v names; NULL on ENOMEM. */
static pstate *state_for(pstate **st, size_t *n, const nsview *v, const char *path)
{
    int same;
    char *here = path_here(v, path, &same);
    int foreign = !here;
    if (!here && !(here = strdup(path)))
        return NULL;
    for (size_t i = 0; i < *n; i++)
        if ((*st)[i].foreign == foreign && strcmp((*st)[i].path, here) == 0) {
            free(here);
            return &(*st)[i];
        }
    pstate *s = hdx_append((void **)st, n, sizeof *s);
    if (!s) {
        free(here);
        return NULL;
    }
    s->path = here;
    s->job_path = same ? NULL : path;
    s->foreign = foreign;
    s->mnt_ns = foreign ? v->mnt_ns : 0;
    s->creator = s->taker = -1;
    return s;
}

/* Image i's pid as seen here: its pid in hangdx's namespace while it lives, else its own. */
static int pid_here(const hdx_trace_set *set, const nsview *views, size_t i)
{
    return views[i].foreign_pid && views[i].host_pid ? views[i].host_pid : set->images[i].pid;
}

/* End the waits of every image of pid on s (its acquire); only_baton keeps kernel lock calls. */
static void end_waits(const hdx_trace_set *set, pstate *s, int pid, int only_baton)
{
    for (size_t i = 0; i < s->n_waits; i++) {
        pwait *w = &s->waits[i];
        if (!w->active || set->images[w->img].pid != pid)
            continue;
        if (only_baton && w->how && strcmp(w->how, "eexist") && strcmp(w->how, "stat"))
            continue;
        w->active = 0;
    }
}

static int image_has_exit(const hdx_trace_image *img)
{
    for (size_t i = 0; i < img->n_events; i++)
        if (img->events[i].type == HDX_TEV_EXIT)
            return 1;
    return 0;
}

/* Last image of the pid of set->images[i] (the one that is running, if any). */
static size_t last_image_of(const hdx_trace_set *set, size_t i)
{
    size_t best = i;
    for (size_t j = 0; j < set->n_images; j++)
        if (set->images[j].pid == set->images[i].pid && set->images[j].t_ns >= set->images[best].t_ns &&
            (!set->images[i].host || !set->images[j].host || !strcmp(set->images[i].host, set->images[j].host)))
            best = j;
    return best;
}

/* Is the process of image i alive now? 1, 0, HDX_UNKNOWN; notes why not known. */
static int image_alive(const hdx_trace_set *set, const nsview *views, size_t i, const hdx_trace_host *host,
                       hdx_evidence *ev)
{
    const hdx_trace_image *img = &set->images[i];
    if (views[i].foreign_pid) /* a container's process: alive when its NSpid and start time are found */
        return views[i].host_pid != 0;
    const char *boot = host_boot_id(host), *here = host_name(host);
    const hdx_trace_image *last = &set->images[last_image_of(set, i)];
    if (img->boot_id && boot[0] && strcmp(img->boot_id, boot) == 0)
        return host_alive(host, img->pid, img->start_ticks);
    if (img->host && img->boot_id && boot[0] && here && strcmp(img->host, here) == 0)
        return 0; /* this host has rebooted since */
    if (image_has_exit(last))
        return 0;
    if (!here)
        hdx_evidence_note(ev, "traces from host %s%s%s: whether their processes are alive was not checked "
                              "(read without a live host); run hangdx on that host to check",
                          img->host ? img->host : "(unknown)", img->boot_id ? ", boot " : "",
                          img->boot_id ? img->boot_id : "");
    else
        hdx_evidence_note(ev, "traces from host %s%s%s: whether their processes are alive cannot be "
                              "checked from this host (%s); run hangdx there to check",
                          img->host ? img->host : "(unknown)", img->boot_id ? ", boot " : "",
                          img->boot_id ? img->boot_id : "", here);
    return HDX_UNKNOWN;
}

static enum hdx_lock_kind kind_of_op(const char *op)
{
    if (op && !strcmp(op, "flock"))
        return HDX_LOCK_FLOCK;
    if (op && !strcmp(op, "ofd"))
        return HDX_LOCK_OFD;
    return HDX_LOCK_POSIX; /* "posix", "lockf" */
}

static int add_waiter(hdx_lock *l, int pid, int elsewhere, int tid, int rank, int64_t since, const char *how)
{
    for (size_t i = 0; i < l->n_waiters; i++) {
        hdx_waiter *w = &l->waiters[i];
        if (w->pid == pid && w->elsewhere == elsewhere && (w->tid == tid || w->tid == HDX_UNKNOWN || tid == HDX_UNKNOWN)) {
            if (since != HDX_UNKNOWN && (w->since_ns == HDX_UNKNOWN || since < w->since_ns))
                w->since_ns = since;
            if (w->tid == HDX_UNKNOWN)
                w->tid = tid;
            if (w->rank == HDX_UNKNOWN)
                w->rank = rank;
            return 0;
        }
    }
    hdx_waiter *w = hdx_lock_add_waiter(l);
    if (!w)
        return -ENOMEM;
    w->pid = pid;
    w->elsewhere = elsewhere;
    w->tid = tid;
    w->rank = rank;
    w->since_ns = since;
    if (how && !(w->how = strdup(how)))
        return -ENOMEM;
    return 0;
}

/* Was image i started, directly or not, by process pid (by the headers' ppids)? */
static int started_by(const hdx_trace_set *set, size_t i, int pid)
{
    int at = set->images[i].ppid;
    for (int depth = 0; at > 1 && depth < 64; depth++) {
        if (at == pid)
            return 1;
        size_t k = 0;
        while (k < set->n_images && set->images[k].pid != at)
            k++;
        if (k == set->n_images)
            return 0;
        at = set->images[k].ppid;
    }
    return 0;
}

/* A dead builder's children that still run (ninja, a compiler), counted in
 * l->creator_children and named in a note: they may still write into the build directory,
 * so they must be stopped before the lock goes. */
static int note_leftovers(const hdx_trace_set *set, size_t creator, hdx_lock *l, const hdx_trace_host *host,
                          hdx_evidence *ev)
{
    const char *boot = host_boot_id(host);
    char list[512] = "";
    size_t used = 0, n = 0;
    for (size_t i = 0; i < set->n_images; i++) {
        const hdx_trace_image *img = &set->images[i];
        if (i != last_image_of(set, i) || !img->boot_id || !boot[0] || strcmp(img->boot_id, boot) ||
            !started_by(set, i, set->images[creator].pid) || host_alive(host, img->pid, img->start_ticks) != 1)
            continue;
        const char *name = img->argc && img->argv[0] ? strrchr(img->argv[0], '/') : NULL;
        name = name ? name + 1 : img->argc && img->argv[0] ? img->argv[0] : "?";
        if (used + 64 < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s (pid %d)", n ? ", " : "", name, img->pid);
        n++;
    }
    l->creator_children = (int)n;
    if (!n)
        return 0;
    return hdx_evidence_note(ev, "%s: its creator (pid %d) is gone, but %zu process%s it started still run%s: %s — "
                                 "stop them before deleting the lock",
                             l->path, set->images[creator].pid, n, n == 1 ? "" : "es", n == 1 ? "s" : "", list);
}

static int emit_lock(const hdx_trace_set *set, const nsview *views, pstate *s, const hdx_trace_host *host,
                     hdx_evidence *ev)
{
    int any_wait = 0;
    for (size_t i = 0; i < s->n_waits; i++)
        any_wait |= s->waits[i].active;
    if (!any_wait && s->creator < 0)
        return 0; /* taken and released, nobody waits: nothing to say */
    hdx_lock *l = hdx_evidence_find_lock(ev, s->path);
    if (!l) {
        if (!(l = hdx_evidence_add_lock(ev)) || !(l->path = strdup(s->path)) || !(l->source = strdup("trace")) ||
            (s->job_path && !(l->job_path = strdup(s->job_path))))
            return -ENOMEM;
        l->foreign = s->foreign;
        l->mnt_ns = s->mnt_ns;
        l->kind = HDX_LOCK_BATON;
        if (!s->baton) {
            for (size_t i = 0; i < s->n_waits; i++)
                if (s->waits[i].active) {
                    l->kind = kind_of_op(s->waits[i].how);
                    break;
                }
        }
    }
    long creator = s->creator >= 0 ? s->creator : (any_wait ? s->taker : -1);
    int64_t created = s->creator >= 0 ? s->created : s->taken;
    if (creator >= 0 && !l->has_creator) {
        const hdx_trace_image *ci = &set->images[creator];
        l->has_creator = 1;
        l->creator_pid = pid_here(set, views, (size_t)creator);
        l->creator_rank = ci->rank;
        l->created_ns = created;
        l->creator_alive = image_alive(set, views, (size_t)creator, host, ev);
        if (l->creator_alive == 0 && note_leftovers(set, (size_t)creator, l, host, ev) < 0)
            return -ENOMEM;
    }
    for (size_t i = 0; i < s->n_waits; i++) {
        const pwait *w = &s->waits[i];
        if (!w->active)
            continue;
        const hdx_trace_image *wi = &set->images[w->img];
        const char *how = w->how;
        if (how && !strcmp(how, "stat"))
            how = "stat poll";
        const nsview *v = &views[w->img];
        int r = add_waiter(l, pid_here(set, views, w->img), v->foreign_pid && !v->host_pid,
                           v->foreign_pid ? HDX_UNKNOWN : w->tid, wi->rank, w->since, how);
        if (r < 0)
            return r;
    }
    return 0;
}

static int add_process(const hdx_trace_set *set, const nsview *views, size_t i, const hdx_trace_host *host,
                       hdx_evidence *ev)
{
    const hdx_trace_image *img = &set->images[i];
    int pid = pid_here(set, views, i);
    if (hdx_evidence_find_process_on(ev, img->host, pid))
        return 0; /* live inspection already read it (pids repeat across hosts: this host's) */
    int alive = image_alive(set, views, i, host, ev);
    hdx_process *p = hdx_evidence_add_process(ev);
    if (!p)
        return -ENOMEM;
    p->pid = pid;
    p->ppid = img->ppid;
    p->start_ticks = img->start_ticks;
    p->alive = alive;
    if ((img->host && !(p->host = strdup(img->host))) || (img->exe && !(p->exe = strdup(img->exe))) ||
        (img->cwd && !(p->cwd = strdup(img->cwd))))
        return -ENOMEM;
    for (size_t k = 0; k < img->argc; k++) {
        char **slot = hdx_append((void **)&p->cmdline, &p->n_cmdline, sizeof *slot);
        if (!slot || !(*slot = strdup(img->argv[k])))
            return -ENOMEM;
    }
    for (size_t k = 0; k < img->n_env; k++)
        if (hdx_process_set_env(p, img->env[k].name, img->env[k].value) < 0)
            return -ENOMEM;
    /* The shim records argv as it was: its secrets stay here (docs/design.md "what leaves the host"). */
    return hdx_redact_command_line(p) == -ENOMEM ? -ENOMEM : 0;
}

int hdx_trace_to_evidence(const hdx_trace_set *set, hdx_evidence *ev, int add_processes, const hdx_trace_host *host)
{
    ref *refs = NULL;
    size_t n_refs = 0, seq = 0;
    pstate *st = NULL;
    size_t n_st = 0;
    int r = 0;
    if (!set || !ev)
        return -EINVAL;
    nsview *views = calloc(set->n_images ? set->n_images : 1, sizeof *views);
    if (!views)
        return -ENOMEM;
    size_t foreign = 0, unmapped = 0;
    for (size_t i = 0; i < set->n_images; i++) {
        if (view_of(set, &set->images[i], host, &views[i]) < 0)
            goto nomem;
        foreign += views[i].foreign_mnt || views[i].foreign_pid;
        unmapped += views[i].foreign_mnt && !views[i].live;
    }
    if (foreign)
        hdx_evidence_note(ev, "%s: %zu trace image%s of processes in other namespaces (a container): their pids are "
                              "mapped to this host's while they live, their paths through a live process of "
                              "their container%s",
                          set->dir, foreign, foreign == 1 ? "" : "s",
                          unmapped ? "; some containers are gone: their paths are mapped only where the trace "
                                     "directory shows where they lie, else their locks are named by the container's "
                                     "mount namespace and not checked here"
                                   : "");
    for (size_t i = 0; i < set->n_images; i++) {
        const hdx_trace_image *img = &set->images[i];
        ref *h = hdx_append((void **)&refs, &n_refs, sizeof *h);
        if (!h)
            goto nomem;
        *h = (ref){img->t_ns, i, -1, seq++};
        for (size_t k = 0; k < img->n_events; k++) {
            const hdx_trace_event *e = &img->events[k];
            if (e->type == HDX_TEV_SPAWN)
                continue;
            ref *x = hdx_append((void **)&refs, &n_refs, sizeof *x);
            if (!x)
                goto nomem;
            *x = (ref){e->t_ns, i, (long)k, seq++};
        }
    }
    if (n_refs) /* refs is NULL without images: qsort must not see it */
        qsort(refs, n_refs, sizeof *refs, cmp_ref);

    for (size_t q = 0; q < n_refs; q++) {
        const hdx_trace_image *img = &set->images[refs[q].img];
        if (refs[q].ev < 0 || set->images[refs[q].img].events[refs[q].ev].type == HDX_TEV_EXIT) {
            /* A new image (exec) or an exit ends every wait of older images of that pid. */
            for (size_t s = 0; s < n_st; s++)
                for (size_t k = 0; k < st[s].n_waits; k++)
                    if (st[s].waits[k].active && set->images[st[s].waits[k].img].pid == img->pid &&
                        (refs[q].ev >= 0 || st[s].waits[k].img != refs[q].img))
                        st[s].waits[k].active = 0;
            continue;
        }
        const hdx_trace_event *e = &img->events[refs[q].ev];
        if (!e->path)
            continue;
        pstate *s = state_for(&st, &n_st, &views[refs[q].img], e->path);
        if (!s)
            goto nomem;
        switch (e->type) {
        case HDX_TEV_ACQUIRE:
            s->baton = 1;
            s->creator = (long)refs[q].img;
            s->created = e->t_ns;
            end_waits(set, s, img->pid, 1);
            break;
        case HDX_TEV_RELEASE:
            s->baton = 1;
            s->creator = -1;
            break;
        case HDX_TEV_WAIT: {
            s->baton = 1;
            int64_t since = e->since_ns != HDX_UNKNOWN ? e->since_ns : e->t_ns;
            pwait *w = NULL;
            for (size_t k = 0; k < s->n_waits; k++)
                if (s->waits[k].active && s->waits[k].img == refs[q].img && s->waits[k].how &&
                    (!strcmp(s->waits[k].how, "eexist") || !strcmp(s->waits[k].how, "stat")))
                    w = &s->waits[k];
            if (w) {
                if (since < w->since)
                    w->since = since;
                break;
            }
            if (!(w = hdx_append((void **)&s->waits, &s->n_waits, sizeof *w)))
                goto nomem;
            *w = (pwait){refs[q].img, e->tid, since, e->how ? e->how : "stat", 1};
            break;
        }
        case HDX_TEV_LOCK_START: {
            pwait *w = hdx_append((void **)&s->waits, &s->n_waits, sizeof *w);
            if (!w)
                goto nomem;
            *w = (pwait){refs[q].img, e->tid, e->t_ns, e->op ? e->op : "posix", 1};
            break;
        }
        case HDX_TEV_LOCK_END:
            for (size_t k = 0; k < s->n_waits; k++) {
                pwait *w = &s->waits[k];
                if (w->active && w->img == refs[q].img && (w->tid == e->tid || e->tid == HDX_UNKNOWN) &&
                    strcmp(w->how, "eexist") && strcmp(w->how, "stat"))
                    w->active = 0;
            }
            if (e->rc == 0) {
                s->taker = (long)refs[q].img;
                s->taken = e->t_ns;
            }
            break;
        default:
            break;
        }
    }
    /* A kernel lock's taker who is itself still waiting on it is no holder. */
    for (size_t s = 0; s < n_st; s++) {
        if (st[s].taker >= 0)
            for (size_t k = 0; k < st[s].n_waits; k++)
                if (st[s].waits[k].active && set->images[st[s].waits[k].img].pid == set->images[st[s].taker].pid)
                    st[s].taker = -1;
        if ((r = emit_lock(set, views, &st[s], host, ev)) < 0)
            goto out;
    }
    if (add_processes) {
        for (size_t i = 0; i < set->n_images; i++)
            if (last_image_of(set, i) == i && (r = add_process(set, views, i, host, ev)) < 0)
                goto out;
    }
    for (size_t i = 0; i < set->n_notes; i++)
        hdx_evidence_note(ev, "%s", set->notes[i]);
    if (set->skipped_lines)
        hdx_evidence_note(ev, "%s: %zu torn or malformed trace line%s skipped", set->dir, set->skipped_lines,
                          set->skipped_lines == 1 ? "" : "s");
    if (set->unknown_events)
        hdx_evidence_note(ev, "%s: %zu trace event%s of an unknown type skipped (written by a newer shim?)",
                          set->dir, set->unknown_events, set->unknown_events == 1 ? "" : "s");
    if (set->dropped_events)
        hdx_evidence_note(ev, "%s: %zu event%s not recorded: every buffer of the shim was in use (many threads "
                          "recording at once); the locks' waits may be undercounted",
                          set->dir, set->dropped_events, set->dropped_events == 1 ? "" : "s");
    r = 0;
    goto out;
nomem:
    r = -ENOMEM;
out:
    for (size_t s = 0; s < n_st; s++) {
        free(st[s].waits);
        free(st[s].path);
    }
    for (size_t i = 0; i < set->n_images; i++) {
        free(views[i].from);
        free(views[i].to);
    }
    free(views);
    free(st);
    free(refs);
    return r;
}
