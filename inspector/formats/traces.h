/*
 * Reader of hangdx.trace/1 directories (include/hangdx/trace.h) and their
 * conversion into evidence. Uses cJSON for every line.
 */
#ifndef HDX_TRACES_H
#define HDX_TRACES_H

#include <stddef.h>
#include <stdint.h>

#include "model/evidence.h"

enum hdx_trace_ev_type {
    HDX_TEV_ACQUIRE,
    HDX_TEV_WAIT,
    HDX_TEV_RELEASE,
    HDX_TEV_LOCK_START,
    HDX_TEV_LOCK_END,
    HDX_TEV_SPAWN,
    HDX_TEV_EXIT,
};

typedef struct hdx_trace_event {
    enum hdx_trace_ev_type type;
    int64_t t_ns;
    int tid;
    char *path;     /* acquire, wait, release, lock_*; else NULL */
    int fd;         /* acquire, lock_*; else -1 */
    char *how;      /* wait: "eexist"/"stat" */
    int64_t polls;  /* wait */
    int64_t since_ns; /* wait */
    char *op;       /* lock_*: "flock"/"posix"/"ofd"/"lockf" */
    char *cmd;      /* lock_start */
    int rc, err;    /* lock_end */
    int child;      /* spawn */
    char *via;      /* spawn */
    char **argv;    /* spawn */
    size_t argc;
    int status;     /* exit */
    int64_t dropped; /* exit: events the shim could not record (all its buffers in use), 0 none */
} hdx_trace_event;

/* One program image of one process: a header and the events after it. */
typedef struct hdx_trace_image {
    char *file; /* the trace file it came from */
    int64_t t_ns;
    int pid, ppid;
    char *host, *boot_id, *cwd, *exe;
    uint64_t start_ticks;
    char **argv;
    size_t argc;
    hdx_env *env;
    size_t n_env;
    int rank, local_rank, world_size; /* derived from env, HDX_UNKNOWN */
    uint64_t pid_ns, mnt_ns;          /* the namespaces it ran in (inodes), 0 unknown */
    char *trace_dir;                  /* the trace directory as the process saw it, or NULL */
    hdx_trace_event *events;
    size_t n_events;
} hdx_trace_image;

typedef struct hdx_trace_set {
    char *dir;
    hdx_trace_image *images;
    size_t n_images;
    size_t n_files;
    size_t skipped_lines; /* torn or malformed lines, and lines before a header, skipped */
    size_t unknown_events; /* well-formed lines of an event type this hangdx does not know */
    size_t dropped_events; /* events the shims did not record (the exit lines' "dropped", summed) */
    char **notes; /* files or a directory not trusted, ignored (heap, owned by the set) */
    size_t n_notes;
} hdx_trace_set;

/*
 * Parse one trace line into *ev (type and fields; heap strings owned by ev,
 * release with hdx_trace_event_clear). Returns 1 for an event, 2 for a header
 * (filled into *img, whose events are left empty; release with
 * hdx_trace_image_clear), 0 for a blank line, or a negative errno: -EBADMSG
 * for a torn or malformed line (bad JSON, not an object, missing "type" or a
 * required field, a field of the wrong type), -ENOMSG for a well-formed line
 * whose "type" this hangdx does not know (skip it), -EPROTONOSUPPORT for a
 * header whose schema is not hangdx.trace/1. On any return but 1 / 2, *ev and
 * *img hold nothing to release. ev and img must be zeroed by the caller.
 */
int hdx_trace_parse_line(const char *line, size_t len, hdx_trace_event *ev, hdx_trace_image *img);

/*
 * Load every "*.jsonl" file of dir (in name order). Torn and malformed lines
 * are skipped and counted; lines before the first header of a file are
 * skipped too; lines longer than 1 MiB are skipped as malformed; events of an
 * unknown type are skipped and counted in unknown_events. A second header in
 * a file starts a new image (an exec).
 * Trust: a trace is believed only from the invoking user's own processes. A
 * file that is not a regular file (opened with O_NOFOLLOW, checked with
 * fstat) or not owned by the effective uid (root included) is ignored; a
 * directory owned by another uid, or group- or world-writable without the
 * sticky bit, is not read at all (the set holds no images). Each is named in
 * set->notes, which hdx_trace_to_evidence adds to the evidence's notes.
 * On error returns a negative errno and, when err is not NULL, a heap message
 * for a person in *err (e.g. "traces/: not a hangdx trace directory (no
 * *.jsonl files)"; "x.jsonl: schema hangdx.trace/9 is not supported (this
 * hangdx reads hangdx.trace/1)"). *out is freed with hdx_trace_set_free.
 */
int hdx_trace_load_dir(const char *dir, hdx_trace_set **out, char **err);

void hdx_trace_event_clear(hdx_trace_event *ev);
void hdx_trace_image_clear(hdx_trace_image *img);
/* Accepts NULL. */
void hdx_trace_set_free(hdx_trace_set *set);

/*
 * What the trace reader asks of the host it runs on (docs/design.md "Stages": formats/
 * reads files and does no live lookups; the caller passes the host, gather/ implements
 * the live one). Each member may be NULL (as if it answered "unknown"); ctx is passed
 * back to each. Pids and namespaces are the host's, read from /proc by the live one:
 *   alive      1 when the process that had start_ticks (field 22 of its stat; 0: any)
 *              still runs under pid, else 0 (gone, zombie, or the pid reused);
 *   boot_id    this boot's id (/proc/sys/kernel/random/boot_id), "" or NULL unknown;
 *   hostname   the host's name, or NULL;
 *   own_ns     the inode of the reader's own namespace `name` ("pid", "mnt"), 0 unknown;
 *   pid_in_ns  the pid here of the live process whose pid is nspid in pid namespace
 *              pid_ns and that started at start_ticks (0: any), or 0 when none;
 *   in_mnt_ns  a live process of mount namespace mnt_ns that started no later than
 *              before_ticks (0: any; a reused namespace inode names a newer namespace),
 *              or 0 when none;
 *   path_here  the host's name (heap) of the file that live process pid names path in its
 *              own root, *same set when it is path itself; NULL on ENOMEM;
 *   is_dir     1 when path is a directory here, else 0.
 * Strings returned are borrowed (valid until the next call on this host).
 */
typedef struct hdx_trace_host {
    int (*alive)(int pid, uint64_t start_ticks, void *ctx);
    const char *(*boot_id)(void *ctx);
    const char *(*hostname)(void *ctx);
    uint64_t (*own_ns)(const char *name, void *ctx);
    int (*pid_in_ns)(uint64_t pid_ns, int nspid, uint64_t start_ticks, void *ctx);
    int (*in_mnt_ns)(uint64_t mnt_ns, uint64_t before_ticks, void *ctx);
    char *(*path_here)(int pid, const char *path, int *same, void *ctx);
    int (*is_dir)(const char *path, void *ctx);
    void *ctx;
} hdx_trace_host;

/*
 * Add what the traces prove to ev:
 *  - one hdx_lock per baton path seen in acquire/wait events (creator from
 *    the acquire not followed by a release, with its pid, rank, time and
 *    whether that process is alive now: same boot id and start time;
 *    alive 0 when the same host has rebooted since or the image called exit;
 *    else unknown, with a note naming the other host);
 *    waiters from wait events (since = the first wait), unless a later
 *    acquire, the process's exit or a later exec ended the wait;
 *  - kernel locks (flock/fcntl) whose lock_start has no lock_end: waiters
 *    (how = the op, since = the lock_start); the last other process whose
 *    blocking lock call on that path succeeded (lock_end rc 0) is recorded
 *    as its creator (created_by), since the trace does not see unlocks;
 *  Events of all images are replayed in time order. Locks already in ev
 *  (same path) are completed, not duplicated.
 *  - with add_processes, one hdx_process per image (the last image of each
 *    pid; alive from host->alive when the boot id is the host's), with
 *    its rank variables and argv. Live inspection passes 0: it reads the
 *    processes from /proc.
 * What is alive now, and which namespaces are foreign, is asked of host (borrowed; the
 * live one is gather/proc.h's hdx_proc_trace_host). With host NULL (post-mortem: nothing
 * of this machine is consulted) no image shares the host's boot, so no process is
 * alive by its trace: alive is 0 where the trace shows its exit, else HDX_UNKNOWN with a
 * note; namespaces are taken as the host's own (paths and pids as the traces give them).
 * Returns 0 or a negative errno.
 */
int hdx_trace_to_evidence(const hdx_trace_set *set, hdx_evidence *ev, int add_processes, const hdx_trace_host *host);

#endif
