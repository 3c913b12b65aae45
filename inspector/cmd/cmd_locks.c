/*
 * hangdx locks: the lock files of build directories and their state, and
 * (on request) the removal of the stale ones.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify/classify.h"
#include "cmd/cmd.h"
#include "model/evidence.h"
#include "hangdx/report.h"
#include "report/report.h"
#include "report/words.h"
#include "gather/locks.h"
#include "gather/proc.h"
#include "formats/snapshot.h"
#include "formats/traces.h"
#include "model/jsonout.h"
#include "model/util.h"

#define LOCKS_SCHEMA "hangdx.locks/1"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hangdx locks [--json] [-d TRACEDIR] [--clean-stale [--force]] [BUILDDIR...]\n\n"
            "List the build locks and their state: held (a live process on this host has it\n"
            "open or holds the kernel lock), stale (nobody holds it, its creator is gone or\n"
            "unknown) or free. It looks in each BUILDDIR (six levels down, never through a\n"
            "symbolic link; e.g. megatron/legacy/fused_kernels/build/lock), in $TORCH_EXTENSIONS_DIR\n"
            "or else ~/.cache/torch_extensions, and at the locks named in the traces of -d. Only\n"
            "what a builder's lock protocol made counts: FileBaton's empty \"lock\" in a build\n"
            "directory (BUILDDIR, BUILDDIR/<ext>, BUILDDIR/py311_cpu/<ext>, a torch_extensions\n"
            "layout, a build/ directory, or one with build.ninja), or a lock a trace saw created\n"
            "exclusively; never Cargo.lock, poetry.lock, yarn.lock, uv.lock, .git/index.lock or\n"
            "another package manager's or git's file (--json says why each was left alone).\n\n"
            "  --json              print only JSON ({\"schema\":\"" LOCKS_SCHEMA "\",\"locks\":[...]})\n"
            "  -d, --trace-dir DIR a hangdx trace directory: tells who created each lock\n"
            "  --clean-stale       delete the locks proven stale: their creator is dead by the trace,\n"
            "                      no process the trace saw waiting on one still lives, and none\n"
            "                      that its creator started still runs (stop those first)\n"
            "  --force             with --clean-stale, also delete every lock that no process on\n"
            "                      this host holds or has open (creator unknown, waiters alive)\n\n"
            "Only your own regular lock files are deleted, with or without --force (never a\n"
            "symbolic link or another user's file), through the directory fd that the search\n"
            "found each in (a directory swapped for a link is not followed), and a trace is\n"
            "trusted only from your own processes: files you own, in a directory you own that\n"
            "no one else can write, or that is sticky (as /tmp: no one else can rename or\n"
            "replace your files there); the rest is listed as not deleted.\n\n"
            "A build on another node that shares the directory cannot be seen from here: check\n"
            "that no such build runs before you delete anything.\n\n"
            "examples:\n"
            "  hangdx locks                                  # ~/.cache/torch_extensions\n"
            "  hangdx locks --json ./megatron/fused_kernels/build\n"
            "  hangdx locks -d traces/ --clean-stale         # delete what the trace proves stale\n"
            "  hangdx locks --clean-stale --force ~/.cache/torch_extensions\n\n"
            "exit status: 0 done, 1 partial (a directory or a lock could not be handled),\n"
            "2 failure, 64 usage error.\n");
}

/* Add the lock files found under dir to ev; the search goes into *all (its root fd stays open
 * for the deletions). A missing default dir is no error. */
static int add_dir(hdx_evidence *ev, const char *dir, int required, int *partial, hdx_lock_search **all,
                   size_t *n_all)
{
    hdx_lock_search found;
    int r = hdx_locks_find_files(dir, &found);
    if (r < 0 && r != -ENOMEM && (required || r != -ENOENT)) {
        hdx_say(stderr, "hangdx locks: %s: %s\n", dir,
                r == -ENOENT   ? "no such directory"
                : r == -EPERM ? "it, or a directory on its way, is a symbolic link that another user owns: not "
                                "searched (give the directory it names)"
                               : strerror(-r));
        *partial = 1;
    } else if (r == 0 && found.cut) {
        hdx_say(stderr, "hangdx locks: %s: looked in %zu directories, %d levels down at most; deeper or further "
                        "ones were not read: give the build directory itself\n",
                dir, found.dirs, HDX_LOCKS_MAX_DEPTH);
    }
    for (size_t i = 0; r != -ENOMEM && i < found.n_files; i++) {
        if (hdx_evidence_find_lock(ev, found.files[i].path))
            continue;
        hdx_lock *l = hdx_evidence_add_lock(ev);
        if (!l || !(l->path = strdup(found.files[i].path)) || !(l->source = strdup("build directory")))
            r = -ENOMEM;
        else
            l->kind = HDX_LOCK_BATON;
    }
    hdx_lock_search *slot = hdx_append((void **)all, n_all, sizeof *slot);
    if (!slot) {
        hdx_lock_search_clear(&found);
        return -ENOMEM;
    }
    *slot = found;
    return r == -ENOMEM ? r : 0;
}

/* The file at path as a search of all found it, with that search's root fd; or NULL. */
static const hdx_lock_file *found_file(const hdx_lock_search *all, size_t n_all, const char *path, int *rootfd)
{
    for (size_t i = 0; i < n_all; i++)
        for (size_t k = 0; k < all[i].n_files; k++)
            if (!strcmp(all[i].files[k].path, path) && all[i].rootfd >= 0) {
                *rootfd = all[i].rootfd;
                return &all[i].files[k];
            }
    return NULL;
}

/* Has a process of this host the file dev:ino open now? 1 also when it cannot tell. */
static int has_opener(uint64_t dev, uint64_t ino)
{
    int *pids = NULL;
    size_t n = 0, unreadable = 0;
    if (hdx_proc_openers((dev_t)dev, (ino_t)ino, &pids, &n, &unreadable) < 0)
        return 1; /* cannot tell: keep it */
    free(pids);
    return n > 0 || unreadable > 0;
}

/*
 * Delete the lock file rel, below the directory open at rootfd, only while it is still
 * the file judged (dev, ino), a regular file of the effective uid that no process has
 * open (docs/design.md "Build locks"): each directory on the way is opened from rootfd
 * with O_NOFOLLOW, and the file is checked (fstatat, no link followed) and unlinked
 * (unlinkat) through its own directory's fd, so that a directory swapped for a symbolic
 * link cannot lead the deletion elsewhere. Returns 0 deleted; 1 refused, with why (in buf
 * when formatted); a negative errno when unlinkat failed (why: its error).
 */
static int remove_lock(int rootfd, const char *rel, uint64_t dev, uint64_t ino, char *buf, size_t size,
                       const char **why)
{
    char *copy = strdup(rel), *name = copy;
    int dirfd = copy ? fcntl(rootfd, F_DUPFD_CLOEXEC, 0) : -1, r = 1;
    struct stat st;
    *why = buf;
    if (dirfd < 0) {
        snprintf(buf, size, "cannot check it: %s", strerror(copy ? errno : ENOMEM));
        goto out;
    }
    for (char *slash; (slash = strchr(name, '/')); name = slash + 1) {
        *slash = 0;
        if (!*name)
            continue;
        int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(dirfd);
        if ((dirfd = sub) < 0) {
            if (e == ELOOP || e == ENOTDIR)
                *why = "a directory on its path is a symbolic link or no directory now (hangdx follows none)";
            else
                snprintf(buf, size, "cannot open its directory %s: %s", name, strerror(e));
            goto out;
        }
    }
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(buf, size, "cannot check it: %s", strerror(errno));
    } else if (S_ISLNK(st.st_mode)) {
        *why = "a symbolic link (hangdx deletes only a regular file)";
    } else if (!S_ISREG(st.st_mode)) {
        *why = "not a regular file";
    } else if (st.st_uid != geteuid()) {
        snprintf(buf, size, "owned by uid %u, not by you (uid %u): delete it as its owner", (unsigned)st.st_uid,
                 (unsigned)geteuid());
    } else if ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino) {
        *why = "replaced meanwhile: not the file judged stale";
    } else if (has_opener(dev, ino)) { /* a build may have opened it since it was judged */
        *why = "a process has it open now";
    } else if (unlinkat(dirfd, name, 0) != 0) {
        r = -errno;
        *why = strerror(errno);
    } else {
        r = 0;
    }
out:
    if (dirfd >= 0)
        close(dirfd);
    free(copy);
    return r;
}

/* Delete l, which a trace names and no search found, as remove_lock does from "/" (or from
 * the root of the container it is in, /proc/PID/root: the kernel's link to that root), the
 * file judged being the one its facts recorded. */
static int remove_named(const hdx_lock *l, char *buf, size_t size, const char **why)
{
    const char *rel = l->path + 1, *p = l->path + 6;
    char root[64] = "/";
    if (l->path[0] != '/' || !l->facts.checked) {
        *why = "its path is not absolute, or it was not checked here";
        return 1;
    }
    if (!strncmp(l->path, "/proc/", 6) && isdigit((unsigned char)*p)) {
        while (isdigit((unsigned char)*p))
            p++;
        if (!strncmp(p, "/root/", 6) && (size_t)(p - l->path) + 5 < sizeof root) {
            snprintf(root, sizeof root, "%.*s", (int)(p - l->path) + 5, l->path);
            rel = p + 6;
        }
    }
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, size, "cannot open %s: %s", root, strerror(errno));
        *why = buf;
        return 1;
    }
    int r = remove_lock(fd, rel, l->facts.dev, l->facts.ino, buf, size, why);
    close(fd);
    return r;
}

/* "hangdx locks: WHAT PATH: REST" on stderr, the path escaped as in the reports (a lock
 * directory's name may hold a newline or an escape sequence). */
static void say(const char *what, const char *path, const char *rest)
{
    hdx_say(stderr, "hangdx locks: %s", what);
    hdx_put_text(stderr, path);
    hdx_say(stderr, ": %s\n", rest);
}

/* Processes of this host waiting on l (by a trace, or their Python stack now) that still live;
 * *first: one of them. */
static size_t live_waiters(const hdx_lock *l, int *first)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n_waiters; i++) {
        const hdx_waiter *w = &l->waiters[i];
        char st = w->host || w->elsewhere ? 0 : hdx_proc_state(w->pid);
        if (st && st != 'Z' && st != 'X' && !n++)
            *first = l->waiters[i].pid;
    }
    return n;
}

/* What would make deleting l harmful though it is stale: a live waiter (it would wake up and
 * load a half-built module), processes its dead creator started (a compiler that still
 * writes into the build directory). Into buf; 0 when nothing. */
static int still_in_use(const hdx_lock *l, char *buf, size_t size)
{
    int first = 0;
    size_t waiting = live_waiters(l, &first);
    if (!waiting && !l->creator_children)
        return 0;
    char who[64] = "";
    if (waiting)
        snprintf(who, sizeof who, "pid %d%s still waits on it", first, waiting > 1 ? " and others" : "");
    snprintf(buf, size, "%s%s%s", who, waiting && l->creator_children ? " and " : "",
             l->creator_children ? "processes its dead creator started still run" : "");
    return 1;
}

/* Is l, judged j, deletable? 1 yes; *why (in buf when formatted) says why not. */
static int deletable(const hdx_lock *l, const hdx_lock_judgement *j, int force, char *buf, size_t size,
                     const char **why)
{
    if (l->exists != 1) {
        *why = "gone";
        return 0;
    }
    if (j->state == HDX_LOCK_HELD) {
        *why = "held";
        return 0;
    }
    if (force)
        return 1;
    if (j->state != HDX_LOCK_STALE || !l->has_creator || j->creator_alive != 0) {
        *why = l->has_creator ? "creator not proven dead" : "creator unknown (no trace); --force deletes it";
        return 0;
    }
    char use[128];
    if (still_in_use(l, use, sizeof use)) {
        snprintf(buf, size, "%s: stop those processes first (--force deletes it anyway)", use);
        *why = buf;
        return 0;
    }
    return 1;
}

static void format_age(int64_t ns, char *buf, size_t size)
{
    if (ns == HDX_UNKNOWN) {
        snprintf(buf, size, "age ?");
        return;
    }
    int64_t s = (hdx_now_ns() - ns) / 1000000000;
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, size, "age %llds", (long long)s);
    else if (s < 7200)
        snprintf(buf, size, "age %lldm", (long long)(s / 60));
    else if (s < 172800)
        snprintf(buf, size, "age %lldh", (long long)(s / 3600));
    else
        snprintf(buf, size, "age %lldd", (long long)(s / 86400));
}

static void print_text(const hdx_lock *l, const hdx_lock_judgement *j, int deleted, const char *left)
{
    char who[160] = "", age[32];
    if (j->holder_pid != HDX_UNKNOWN)
        snprintf(who, sizeof who, "holder pid %d", j->holder_pid);
    if (l->has_creator) {
        size_t k = strlen(who);
        char rank[32] = "";
        if (l->creator_rank != HDX_UNKNOWN)
            snprintf(rank, sizeof rank, " (rank %d)", l->creator_rank);
        snprintf(who + k, sizeof who - k, "%screated by pid %d%s, %s", k ? ", " : "", l->creator_pid, rank,
                 j->creator_alive == 1 ? "alive" : j->creator_alive == 0 ? "dead" : "alive unknown");
    } else if (j->holder_pid == HDX_UNKNOWN) {
        snprintf(who, sizeof who, "creator unknown");
    }
    format_age(l->mtime_ns, age, sizeof age);
    printf("%-5s  %-5s  ", hdx_lock_state_name(j->state), hdx_lock_kind_name(j->kind));
    hdx_put_text(stdout, l->path);
    if (l->foreign)
        printf(" (in the container of mount namespace %llu, whose processes are all gone: not found here)",
               (unsigned long long)l->mnt_ns);
    printf("  %s, %s%s", who, age, deleted ? "  [deleted]" : "");
    int first = 0;
    size_t live = live_waiters(l, &first);
    if (l->n_waiters)
        printf(", %zu waiter%s", l->n_waiters, l->n_waiters == 1 ? "" : "s");
    if (l->n_waiters && live < l->n_waiters)
        printf(" (%zu alive)", live);
    if (left)
        printf("  [left alone: %s]", left);
    printf("\n");
}

/* The lock object of docs/design.md "Formats", with what this command adds. */
static cJSON *lock_json(const hdx_lock *l, const hdx_lock_judgement *j, int deleted, const char *left)
{
    cJSON *o = hdx_snapshot_lock_json(l, j);
    if (o) {
        cJSON_AddBoolToObject(o, "deleted", deleted);
        cJSON_AddItemToObject(o, "left_alone", left ? cJSON_CreateString(left) : cJSON_CreateNull());
    }
    return o;
}

/* The files named like locks that the searches left alone, each once: into arr (with why)
 * when arr, else counted. Returns how many, and in *more those not listed. */
static size_t left_files(const hdx_lock_search *all, size_t n_all, cJSON *arr, size_t *more)
{
    size_t n = 0;
    *more = 0;
    for (size_t i = 0; i < n_all; i++) {
        *more += all[i].n_left_more;
        for (size_t k = 0; k < all[i].n_left; k++) {
            int seen = 0;
            for (size_t a = 0; a < i && !seen; a++) /* a directory given twice, or inside another */
                for (size_t b = 0; b < all[a].n_left && !seen; b++)
                    seen = !strcmp(all[a].left[b].path, all[i].left[k].path);
            if (seen)
                continue;
            n++;
            cJSON *o = arr ? cJSON_CreateObject() : NULL;
            if (o && cJSON_AddStringToObject(o, "path", all[i].left[k].path))
                cJSON_AddStringToObject(o, "why", all[i].left[k].why);
            if (o)
                cJSON_AddItemToArray(arr, o);
        }
    }
    return n;
}

int hdx_cmd_locks(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},      {"trace-dir", required_argument, NULL, 'd'},
        {"clean-stale", no_argument, NULL, 'c'}, {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0},
    };
    int json = 0, clean = 0, force = 0, partial = 0, c;
    const char *trace_dir = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jd:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'd': trace_dir = optarg; break;
        case 'c': clean = 1; break;
        case 'f': force = 1; break;
        case 'h': usage(stdout); return HDX_EXIT_OK;
        default: usage(stderr); return HDX_EXIT_USAGE;
        }
    }
    if (force && !clean) {
        hdx_say(stderr, "hangdx locks: --force only goes with --clean-stale\n");
        return HDX_EXIT_USAGE;
    }

    int status = HDX_EXIT_FAILURE;
    int *deleted = NULL;
    const char **left = NULL;   /* why each lock of ev is left alone (hdx_locks_left_alone), NULL: it counts */
    hdx_lock_search *all = NULL; /* the searches of the directories, their root fds open */
    size_t n_all = 0;
    hdx_lock_judgement *judged = NULL; /* the state of each lock (hdx_lock_judge), parallel to ev->locks */
    hdx_trace_set *set = NULL;
    char *err = NULL, *default_dir = NULL;
    hdx_evidence *ev = hdx_evidence_new();
    if (!ev)
        goto nomem;
    ev->live = 1; /* this host, now */
    if (trace_dir) {
        int r = hdx_trace_load_dir(trace_dir, &set, &err);
        if (r < 0) {
            hdx_say(stderr, "hangdx locks: %s\n", err ? err : strerror(-r));
            goto out;
        }
        if ((r = hdx_trace_to_evidence(set, ev, 0, hdx_proc_trace_host())) < 0)
            goto nomem;
    }
    for (int i = optind; i < argc; i++)
        if (add_dir(ev, argv[i], 1, &partial, &all, &n_all) < 0)
            goto nomem;
    const char *ext = getenv("TORCH_EXTENSIONS_DIR");
    if (ext && *ext)
        default_dir = strdup(ext);
    else if (getenv("HOME"))
        default_dir = hdx_asprintf("%s/.cache/torch_extensions", getenv("HOME"));
    if (default_dir && add_dir(ev, default_dir, 0, &partial, &all, &n_all) < 0)
        goto nomem;
    if (hdx_locks_add_python_waiters(ev) < 0) /* the waiters no trace saw */
        goto nomem;
    if (hdx_locks_record_facts(ev, 0) < 0 || hdx_lock_judge_all(ev, &judged) < 0)
        goto nomem;
    for (size_t i = 0; i < ev->n_locks; i++) { /* what the judgements leave unknown, among the notes */
        char note[1024];
        if (hdx_lock_judgement_note(&ev->locks[i], &judged[i], note, sizeof note) &&
            hdx_evidence_note(ev, "%s", note) < 0)
            goto nomem;
    }

    if (ev->n_locks && (!(deleted = calloc(ev->n_locks, sizeof *deleted)) || !(left = calloc(ev->n_locks, sizeof *left))))
        goto nomem;
    for (size_t i = 0; i < ev->n_locks; i++) { /* only what a builder's lock protocol made counts */
        int rootfd;
        left[i] = hdx_locks_left_alone(&ev->locks[i], found_file(all, n_all, ev->locks[i].path, &rootfd) != NULL);
    }
    for (size_t i = 0; clean && i < ev->n_locks; i++) {
        const hdx_lock *l = &ev->locks[i];
        const hdx_lock_judgement *j = &judged[i];
        const char *why = NULL;
        char whybuf[192];
        if (l->foreign) { /* a same-named file here is not the container's lock */
            snprintf(whybuf, sizeof whybuf, "it is a path in the container of mount namespace %llu, whose processes "
                                            "are all gone and whose files could not be found from here",
                     (unsigned long long)l->mnt_ns);
            say("not deleted: ", l->path, whybuf);
            continue;
        }
        if (left[i] || !deletable(l, j, force, whybuf, sizeof whybuf, &why)) {
            if (l->exists == 1)
                say("not deleted: ", l->path, left[i] ? left[i] : why);
            continue;
        }
        /* Only the file found and judged, a regular file of the invoking user, with or without
         * --force, through directory fds (remove_lock); never a path that may lead elsewhere now. */
        int rootfd, r;
        const hdx_lock_file *f = found_file(all, n_all, l->path, &rootfd);
        if (f && (!l->facts.checked || l->facts.dev != f->dev || l->facts.ino != f->ino))
            r = 1, why = "replaced between the search and the judgement: not the file found";
        else
            r = f ? remove_lock(rootfd, f->rel, f->dev, f->ino, whybuf, sizeof whybuf, &why)
                  : remove_named(l, whybuf, sizeof whybuf, &why);
        if (r != 0) {
            say(r < 0 ? "cannot delete " : "not deleted: ", l->path, why);
            partial |= r < 0;
            continue;
        }
        deleted[i] = 1;
        char use[128], rest[320];
        int overrode = still_in_use(l, use, sizeof use);
        snprintf(rest, sizeof rest, "%s%s%s%s", hdx_lock_state_name(j->state),
                 l->has_creator && j->creator_alive == 0 ? ", its creator is dead" : ", no process here has it open",
                 overrode ? "; with --force, although " : "", overrode ? use : "");
        say("deleted ", l->path, rest);
    }

    if (json) {
        cJSON *root = cJSON_CreateObject(), *arr = NULL;
        if (!root || !cJSON_AddStringToObject(root, "schema", LOCKS_SCHEMA) ||
            !(arr = cJSON_AddArrayToObject(root, "locks"))) {
            cJSON_Delete(root);
            goto nomem;
        }
        for (size_t i = 0; i < ev->n_locks; i++)
            cJSON_AddItemToArray(arr, lock_json(&ev->locks[i], &judged[i], deleted[i], left[i]));
        size_t more;
        cJSON *alone = cJSON_AddArrayToObject(root, "left_alone");
        if (alone)
            left_files(all, n_all, alone, &more);
        if (alone && more)
            hdx_evidence_note(ev, "%zu more files named like locks were left alone and not listed", more);
        cJSON *notes = cJSON_AddArrayToObject(root, "notes");
        for (size_t i = 0; notes && i < ev->n_notes; i++)
            cJSON_AddItemToArray(notes, cJSON_CreateString(ev->notes[i]));
        char *s = hdx_json_print(root, 0);
        cJSON_Delete(root);
        if (!s)
            goto nomem;
        printf("%s\n", s);
        free(s);
    } else {
        if (!ev->n_locks)
            printf("no lock files found\n");
        for (size_t i = 0; i < ev->n_locks; i++)
            print_text(&ev->locks[i], &judged[i], deleted[i], left[i]);
        size_t more, n_left = left_files(all, n_all, NULL, &more);
        if (n_left + more)
            printf("left alone: %zu file%s named like locks that no build's lock protocol made (a package "
                   "manager's, git's, or not a FileBaton's): --json lists each and why\n",
                   n_left + more, n_left + more == 1 ? "" : "s");
        for (size_t i = 0; i < ev->n_notes; i++) {
            printf("note: ");
            hdx_put_text(stdout, ev->notes[i]);
            printf("\n");
        }
    }
    hdx_say(stderr, "hangdx locks: a build on another node that shares these directories cannot be seen from "
                    "here; check that none runs before deleting a lock.\n");
    status = partial ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
    goto out;
nomem:
    hdx_say(stderr, "hangdx locks: out of memory\n");
out:
    for (size_t i = 0; i < n_all; i++)
        hdx_lock_search_clear(&all[i]);
    free(all);
    free(left);
    free(deleted);
    free(judged);
    free(default_dir);
    free(err);
    hdx_trace_set_free(set);
    hdx_evidence_free(ev);
    return status;
}
