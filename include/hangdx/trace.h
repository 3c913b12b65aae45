/*
 * hangdx.trace/1 — the on-disk trace that the preload shim writes and the
 * inspector reads. Shared by preload/ and inspector/; nothing else belongs here.
 *
 * A trace directory holds one file per process, named "<host>-<pid>.jsonl"
 * ("<host>-<pid>-ns<pid namespace inode>.jsonl" in a pid namespace not the host's),
 * mode 0600 whatever the umask, owned by the process's effective user, opened
 * O_APPEND. The shim holds that one fd, close-on-exec, at a high number it takes
 * while the process has a single thread (preload/tracefd.c; README "hangdx run"):
 * before each line it checks that the fd is still the file it created (device
 * and inode, regular), and one that is not is never written to nor closed: the
 * trace then ends without an exit line.
 * Each line is one JSON object written with a single write(2), so a
 * line is either whole or, for the last line of a process that died mid-write
 * or whose disk filled up, torn (a reader skips a torn line). After a write
 * that failed or was cut short the shim writes nothing more into that file,
 * so a torn line is always a file's last one.
 *
 * Every program image writes a header line first. An exec() keeps the pid, so
 * the same file then gets a second header: a reader treats each header as the
 * start of a new image of that process.
 *
 * Header (type "header"):
 *   {"schema":"hangdx.trace/1","type":"header","t":NS,"pid":P,"ppid":PP,
 *    "host":"h","boot_id":"uuid","pid_ns":INO,"mnt_ns":INO,"trace_dir":"/abs",
 *    "start_time":TICKS,"cwd":"/abs","exe":"/abs","argv":["a","b"],"env":{"RANK":"0",...}}
 *   pid_ns and mnt_ns are the inodes of the process's /proc/self/ns/pid and
 *   /proc/self/ns/mnt (null when unreadable): in a container, pid and every
 *   path are the container's, and trace_dir is the trace directory as the
 *   process saw it (docs/design.md "Containers").
 *   start_time is field 22 of /proc/PID/stat (clock ticks since boot,
 *   proc(5)); with boot_id it tells a live process from a recycled pid.
 *   env holds only the names in HDX_TRACE_ENV_NAMES that are set. The shim
 *   writes env before argv (key order carries no meaning) so that only argv
 *   is ever cut: a cut argv adds "argv_truncated":true. cwd/exe/boot_id/
 *   start_time are null when they cannot be read; cwd and exe also when
 *   longer than the header's 1024 bytes for each (never cut).
 *
 * Events (every event has "type", "t" and "tid"):
 *   acquire    {"path":ABS,"fd":N}            open(O_CREAT|O_EXCL) succeeded
 *   wait       {"path":ABS,"how":HOW,"polls":N,"since":NS}
 *              the process found the lock taken (EEXIST) or polls it with
 *              stat; aggregated: written at the first poll, when the count
 *              reaches a power of two, and at least every
 *              HDX_TRACE_WAIT_REPEAT_S seconds while polling goes on.
 *              "polls" counts since "since". HOW "eexist" or "stat" for a
 *              FileBaton path (one this process created with O_EXCL or got
 *              EEXIST on); a stat wait ends (the count restarts) when a stat
 *              finds the path gone. HOW "flock", "posix", "ofd", "lockf": a
 *              non-blocking kernel lock attempt (LOCK_NB, F_SETLK,
 *              F_OFD_SETLK, F_TLOCK) failed with EWOULDBLOCK/EAGAIN (or EACCES
 *              for posix/lockf); path from /proc/self/fd; the wait ends when
 *              such an attempt succeeds. When the shim's table of lock paths
 *              is full (64) each attempt gets its own line with "polls":1.
 *   release    {"path":ABS}                   unlink/rename of a known lock
 *   lock_start {"path":ABS,"fd":N,"op":OP,"cmd":CMD}  a blocking kernel lock
 *              call began (OP: "flock", "posix", "ofd", "lockf";
 *              CMD: "LOCK_EX", "LOCK_SH", "F_WRLCK", "F_RDLCK", "F_LOCK")
 *   lock_end   {"path":ABS,"fd":N,"op":OP,"rc":R,"errno":E}  that call returned
 *              (path of a lock event: null when the fd has none, e.g. EBADF;
 *              unlocks and successful non-blocking calls are not recorded)
 *   lock_count {"path":ABS,"op":OP,"count":N,"since":NS}
 *              the bound on lock lines: after HDX_TRACE_LOCK_FULL blocking
 *              calls of one op on one path (each with its lock_start and
 *              lock_end), a further blocking call first tries the lock without
 *              waiting; taken at once, it is only counted: N such calls since
 *              NS, written at most once a second per path and at exit. A call
 *              that has to wait is still recorded in full (lock_start,
 *              lock_end), so a hang always shows. A path the shim's count table
 *              (64) cannot hold is always recorded in full.
 *   stopped    {"reason":"size","bytes":B}    the file reached
 *              HDX_TRACE_FILE_MAX (B: its size then); the process writes
 *              nothing more (every image of it: the size is the file's).
 *   spawn      {"child":PID,"via":"fork"|"posix_spawn","argv":[...]}
 *              argv is empty for fork (the child writes its own header)
 *   exit       {"status":S}                   exit()/_exit()/_Exit() was called;
 *              "status":null when main() returned (libc calls exit past the
 *              shim; written from its destructor). A process killed by a
 *              signal has no exit line. "dropped":N, only when N > 0: events
              not recorded because every buffer of the shim was in use then
              (docs/design.md "The shim").
 *
 * Times ("t", "since") are CLOCK_REALTIME in nanoseconds since the epoch.
 * Paths in events are absolute (relative ones are resolved against the cwd,
 * or the directory fd, at the time of the call), not normalised beyond a
 * leading "./", and never cut: one that cannot be written whole and absolute
 * is null (a reader skips the line). A stat poll matches a known lock path by the string as given
 * or its absolute form (no getcwd per stat).
 *
 * Not traced: vfork children before exec (they share the parent's memory),
 * children forked by a raw clone(2) until they exec, calls made during the
 * shim's own start. The shim never creates the trace directory; without it,
 * read-only, or owned by another user than the process's effective user (who
 * could read, forge or replace the traces), it writes nothing there and the
 * program runs on unchanged.
 */
#ifndef HANGDX_TRACE_H
#define HANGDX_TRACE_H

#define HDX_TRACE_SCHEMA "hangdx.trace/1"
/* Environment variable naming the trace directory; the shim is quiet without it.
 * A relative one is resolved against the cwd at the start of each program
 * image (a fork child keeps its parent's); hangdx run passes an absolute one. */
#define HDX_TRACE_DIR_ENV "HANGDX_TRACE_DIR"
/* Suffix of every trace file: "<host>-<pid>" HDX_TRACE_SUFFIX. */
#define HDX_TRACE_SUFFIX ".jsonl"
/* Longest line the shim writes, in bytes; longer argv are truncated. */
#define HDX_TRACE_LINE_MAX 4096
/* While a wait goes on, a wait line is repeated at least this often (s). */
#define HDX_TRACE_WAIT_REPEAT_S 60

/* After this many blocking calls on one path, quick ones are only counted (lock_count). */
#define HDX_TRACE_LOCK_FULL 64
/* Largest trace file (bytes); past it one "stopped" line, then nothing. */
#define HDX_TRACE_FILE_MAX (16L * 1024 * 1024)

/* The event type names, as written in "type". */
#define HDX_EV_HEADER "header"
#define HDX_EV_ACQUIRE "acquire"
#define HDX_EV_WAIT "wait"
#define HDX_EV_RELEASE "release"
#define HDX_EV_LOCK_START "lock_start"
#define HDX_EV_LOCK_END "lock_end"
#define HDX_EV_SPAWN "spawn"
#define HDX_EV_EXIT "exit"
#define HDX_EV_LOCK_COUNT "lock_count"
#define HDX_EV_STOPPED "stopped"

/*
 * The environment variables that may leave the host (docs/design.md, "what leaves
 * the host"): the only ones a trace header, a snapshot or a report carries.
 * A NULL-terminated initializer list.
 */
#define HDX_TRACE_ENV_NAMES                                                      \
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",        \
        "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",                     \
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", \
        "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",         \
        "SLURM_NODEID", "CUDA_VISIBLE_DEVICES", "TORCH_EXTENSIONS_DIR",          \
        "MAX_JOBS", NULL

#endif
