/*
 * The evidence model: what every input (a live inspection, a trace directory,
 * later snapshots and logs) is turned into, and what classify() reads.
 *
 * Ownership: an hdx_evidence owns everything reachable from it (every string
 * and array is heap memory, but what pooled frames borrow from ev->pool);
 * hdx_evidence_free() releases it all. Integers use
 * HDX_UNKNOWN (-1) for "not known"; strings use NULL.
 *
 * Stage rule: model may include nothing. (docs/design.md "Stages")
 */
#ifndef HDX_EVIDENCE_H
#define HDX_EVIDENCE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define HDX_UNKNOWN (-1)

enum hdx_frame_kind { HDX_FRAME_NATIVE = 0, HDX_FRAME_PYTHON = 1 };

/* A Python local variable: ints, floats, bools, None and short strings in
 * full; other objects by their type name (docs/design.md frame "locals"). */
enum hdx_value_kind { HDX_VAL_NONE, HDX_VAL_BOOL, HDX_VAL_INT, HDX_VAL_FLOAT, HDX_VAL_STR, HDX_VAL_OTHER };
typedef struct hdx_local {
    char *name;
    enum hdx_value_kind kind;
    long long i;   /* HDX_VAL_INT, HDX_VAL_BOOL */
    double f;      /* HDX_VAL_FLOAT */
    char *s;       /* HDX_VAL_STR: the string (UTF-8); HDX_VAL_OTHER: the type name */
    uint64_t addr; /* the object's address in the live target (identity), 0 unknown; never saved */
    char *pg;      /* the process group's name when the value is one of the process's process
                      groups (hdx_pgroup.name), else NULL */
} hdx_local;

typedef struct hdx_frame {
    enum hdx_frame_kind kind;
    unsigned char pooled; /* 1: function, file, module and locals (array, names, strings) are
                             borrowed from the evidence's pool and shared with other frames:
                             hdx_frame_clear leaves them; treat them as read-only */
    char *function; /* demangled name, or NULL when no symbol covers pc */
    char *file;     /* source file (DWARF line info or Python), or NULL */
    int line;       /* source line, 0 when unknown */
    char *module;   /* path of the ELF module that contains pc (native), or NULL */
    uint64_t offset; /* pc relative to the module's load bias (native) */
    uint64_t pc;     /* absolute instruction address (native), 0 for Python */
    hdx_local *locals; /* Python frames read with locals, else NULL */
    size_t n_locals;
} hdx_frame;

/* Syscall numbers in hdx_thread.syscall beyond the real ones (proc(5) syscall). */
#define HDX_SYSCALL_RUNNING (-1) /* /proc/TID/syscall said "running" */
#define HDX_SYSCALL_UNKNOWN (-2) /* could not be read */

typedef struct hdx_thread {
    int tid;
    char *name;    /* comm, from /proc/PID/task/TID/comm */
    char state;    /* state letter from /proc/PID/task/TID/stat (R S D T t Z), 0 unknown */
    char *wchan;   /* /proc/PID/task/TID/wchan, NULL when "0" or unreadable */
    long syscall;  /* current syscall number, or HDX_SYSCALL_* */
    uint64_t syscall_args[6]; /* its arguments, from the same file */
    double cpu_ms_first; /* this thread's time on a CPU, ms, at its first sample (schedstat, to the ns;
                            utime+stime where the kernel has no schedstat) */
    double cpu_ms;       /* the same at the last sample */
    hdx_frame *frames; /* innermost first; merged native+Python when merged; NULL when not sampled */
    size_t n_frames;
    hdx_frame *py_frames; /* the Python frames kept apart when they could not be merged, else NULL */
    size_t n_py_frames;
    unsigned char shared_frames; /* 1: the arrays frames and py_frames are borrowed from the
                                    evidence's pool and shared by the threads of one stack class
                                    (a loaded report's or reduced snapshot's "stacks"):
                                    hdx_thread_clear leaves them; treat them as read-only */
    int unmerged;         /* 1: the native eval frames and the Python activations did not agree in
                             number, so frames holds the native stack and py_frames the Python one */
    int stack_error;   /* 0, or a negative errno telling why frames are missing */
    char *polled_path; /* absolute path a bounded syscall watch saw it stat, or NULL */
    char *wait;        /* wait label set by the label step, hdx_evidence_label ("build_lock",
                          "collective", "p2p_recv", ...), or NULL */
    char *wait_op;     /* what it waits in: the collective or p2p call ("all_reduce", "recv"), or NULL */
    int wait_peer;     /* p2p: the global rank it waits for (src/dst/peer local), HDX_UNKNOWN */
    long wait_frame;   /* index in frames of the frame that told the wait, -1 none */
    /* A wait its input recorded (a Flight Recorder dump's oldest unfinished entry:
     * docs/formats.md "Flight Recorder dumps"), where wait_pg is set: the label step keeps
     * wait, wait_op and wait_peer as they are, and the waits-for graph takes the group from
     * wait_pg, not from the frames. wait_seq and wait_sig mean something only then. */
    char *wait_pg;      /* the process group's name (hdx_pgroup.name), or NULL */
    long long wait_seq; /* the call's sequence number on that group (collective_seq_id; for
                           send/recv p2p_seq_id), HDX_UNKNOWN */
    char *wait_sig;     /* what tells the call from another of the same op on the group: its
                           tensors' sizes and dtypes ("in [[2048]] float32, out [[2048]] float32"),
                           or NULL */
} hdx_thread;

typedef struct hdx_env {
    char *name; /* one of HDX_TRACE_ENV_NAMES */
    char *value;
} hdx_env;

typedef struct hdx_process {
    int pid;
    int ppid;
    char *host;
    int rank;       /* global rank (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID) */
    int local_rank; /* LOCAL_RANK, SLURM_LOCALID */
    int world_size; /* WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS */
    char **cmdline; /* argv as in /proc/PID/cmdline */
    size_t n_cmdline;
    hdx_env *env; /* only allowed names */
    size_t n_env;
    char *exe;
    char *cwd;
    char state;            /* the main thread's state letter, 0 unknown */
    int frozen;            /* 1: its cgroup is frozen (the cgroup freezer: a suspended job), 0 not,
                              HDX_UNKNOWN (docs/design.md "Busy or blocked") */
    uint64_t start_ticks;  /* field 22 of /proc/PID/stat: clock ticks after boot */
    double age_s;          /* seconds since the process started, at the last sample */
    double cpu_ms_first;   /* utime+stime of all threads, ms, first sample */
    double cpu_ms;         /* the same at the last sample */
    int64_t window_ms;     /* wall time between those two samples, ms (0: one sample) */
    int progressing;       /* 1 CPU time grew across samples, 0 not, HDX_UNKNOWN (set by the label
                              step when there are samples; post-mortem as recorded) */
    int stack_changed;     /* 1 the main thread's stack differs between the first and the last
                              sample, 0 the same, HDX_UNKNOWN (one stack sample) */
    int64_t stopped_us;    /* total time its threads were stopped, microseconds, or HDX_UNKNOWN: each
                              stop from the interrupt to the detach, less the time the thread ran or
                              waited for a CPU before it stopped (stacks.c, stop_ns) */
    int64_t max_stop_us;   /* longest single thread stop, microseconds (meaningful when stopped_us is known) */
    int n_stopped;         /* thread stops made for native stacks, over all samples, as stopped_us: a
                              thread that waits in the kernel is read without one (stacks.c) */
    int alive;             /* 1 running now, 0 gone, HDX_UNKNOWN */
    int read_error;        /* 0, or a negative errno: what could not be read (see notes) */
    char *python;          /* "3.11 /usr/bin/python3.11" when Python frames were read, else NULL */
    int is_rank_process;   /* set by the label step (hdx_evidence_label): 1 when p is its rank's own
                              process, not a launcher or child that inherited the rank variables
                              (hdx_mark_rank_processes) */
    int set_aside;         /* set by the label step: 1 when p belongs to another job than the one judged
                              (hdx_keep_largest_job); every rule ignores it */
    int asked;             /* 1 when its PID, or an ancestor's, was given to inspect or snapshot:
                              with --all too, its job is the one judged */
    hdx_thread *threads;
    size_t n_threads;
    size_t cap_threads;    /* threads' slots allocated (hdx_process_add_thread, hdx_process_reserve_threads) */
} hdx_process;

enum hdx_lock_kind { HDX_LOCK_BATON = 0, HDX_LOCK_FLOCK, HDX_LOCK_POSIX, HDX_LOCK_OFD };
enum hdx_lock_state { HDX_LOCK_FREE = 0, HDX_LOCK_HELD, HDX_LOCK_STALE };

typedef struct hdx_waiter {
    int pid;
    int tid;        /* HDX_UNKNOWN when only the process is known */
    int rank;
    int64_t since_ns; /* CLOCK_REALTIME ns when the wait began, HDX_UNKNOWN */
    char *how;        /* "stat poll", "eexist", "flock", "fcntl", ... */
    char *host;       /* the host whose snapshot saw the wait (pids repeat across hosts), or NULL:
                         this host, or unknown (then the rank tells same-pid processes apart) */
    int elsewhere;    /* 1: pid is another pid namespace's (a container's, by its trace) and no
                         process of it lives here: it names no process of this host */
} hdx_waiter;

/* One row of /proc/locks on a lock file (proc(5) "/proc/locks"): a kernel lock, or a
 * request blocked on one. */
typedef struct hdx_lock_row {
    int pid;                 /* the process the kernel names, HDX_UNKNOWN for OFD locks (it names none) */
    enum hdx_lock_kind kind; /* flock, posix or ofd (rows of other kinds, leases, are not kept) */
    int blocking;            /* 1: a "->" row, a request that waits for the lock; 0: the lock itself */
} hdx_lock_row;

/* Whether one process concerned by a lock (a kernel lock's pid, a process that has the
 * file open) was alive when the facts were taken. */
typedef struct hdx_pid_fact {
    int pid;
    int alive;            /* kill(pid, 0) succeeded or failed with EPERM: 1, else 0 */
    uint64_t start_ticks; /* field 22 of /proc/PID/stat then, 0 unknown (with the pid, it names
                             the process even after the pid is reused) */
} hdx_pid_fact;

/*
 * What one host saw of a lock file, as it saw it: facts, no decision. The decision
 * (held, stale, free) is classify's hdx_lock_judge (docs/design.md "Build locks").
 * Arrays are heap memory the lock owns (hdx_lock_clear).
 */
typedef struct hdx_lock_facts {
    int looked;       /* 1: the facts below were taken (gather/locks.c, or a snapshot that carries
                         them); 0: none were (an older snapshot or report: the lock's recorded
                         state and holder_pid stand) */
    int live;         /* 1: taken while the job ran (inspect, snapshot, locks); 0: after it (analyze),
                         when only the traces still tell who held a kernel lock */
    int checked;      /* 1: the file was looked at from this host; 0: it could not be (another
                         host's path, or a container's that could not be mapped): exists unknown */
    uint64_t dev;     /* stat(2) of the file, when exists is 1: device, inode, size, owner */
    uint64_t ino;
    int64_t size;
    int uid;
    hdx_lock_row *rows; /* the /proc/locks rows on the file (dev, ino) */
    size_t n_rows;
    int rows_read;      /* 1: /proc/locks was read (rows is all of them), 0 it could not be */
    int *openers;       /* live processes that have the file open (their fds), hangdx excluded */
    size_t n_openers;
    int openers_read;   /* 1: the processes were listed (openers is complete but for unreadable) */
    int unreadable;     /* processes that could not be read when listing openers (another user's,
                           without root) */
    hdx_pid_fact *pids; /* each pid of rows and openers, once */
    size_t n_pids;
} hdx_lock_facts;

/* What another host's snapshot saw of the same lock file (a shared build directory): its
 * facts, judged with the lock's own. */
typedef struct hdx_lock_seen {
    char *host;           /* that host (its snapshot's), or NULL when unknown */
    hdx_lock_facts facts; /* looked is 1 */
} hdx_lock_seen;

typedef struct hdx_lock {
    char *path;       /* the lock file as seen from here (what is checked, and deleted) */
    char *job_path;   /* the path as the job saw it, when it ran in another mount namespace (a
                         container) and that differs, else NULL */
    int foreign;      /* 1: path is another mount namespace's that could not be mapped to this
                         host's (its container gone, its traces telling nothing): not checked here */
    uint64_t mnt_ns;  /* foreign: that mount namespace (the inode of /proc/PID/ns/mnt), which
                         names the container once its processes are gone; else 0 */
    enum hdx_lock_kind kind; /* as found: a file found by its name is a baton until the kernel
                                says otherwise (hdx_lock_judge gives the kind to report) */
    /* The decision an older snapshot or report recorded (facts.looked 0). hdx_lock_judge
     * decides from the facts when there are some, else returns these. */
    enum hdx_lock_state state;
    int holder_pid;   /* recorded holder, HDX_UNKNOWN */
    int unchecked;    /* recorded: processes that could not be read when looking for a holder */
    int exists;       /* the lock file exists (stat when the facts were taken): 1, 0, HDX_UNKNOWN */
    int64_t mtime_ns; /* lock file's mtime (≈ creation of a baton), HDX_UNKNOWN */
    char *holder_host; /* the host whose snapshot saw the facts or the holder, or NULL (this host,
                          or unknown) */
    int recorded;     /* 1: state, holder_pid and unchecked come from an input that decided them (an
                         older snapshot or report, without facts): the facts are not taken again */
    hdx_lock_facts facts;
    hdx_lock_seen *seen; /* other hosts' facts of the same file (analyze of several snapshots) */
    size_t n_seen;
    int has_creator;  /* 1 when created_by is known (from a trace) */
    int creator_pid;
    int creator_rank;
    int creator_alive;      /* 1, 0, HDX_UNKNOWN */
    int creator_children;   /* processes a dead creator started (by the trace) that still run on
                               this host: a build may still write into its directory */
    int64_t created_ns;     /* from the trace's acquire event, HDX_UNKNOWN */
    char *source;           /* how it was found: "trace", "syscall watch", "blocked fd", "well-known place" */
    hdx_waiter *waiters;
    size_t n_waiters;
} hdx_lock;

/* The state of one lock, judged from its facts (classify's hdx_lock_judge): data that the
 * verdict carries and the writers print. */
typedef struct hdx_lock_judgement {
    enum hdx_lock_state state;
    enum hdx_lock_kind kind;  /* the kind to report: a file found by its name that the kernel
                                 locks is that kernel lock (flock, posix, ofd) */
    int holder_pid;           /* the live process that holds it or has it open, or the creator that
                                 lives on (or, after the job, the trace's holder), HDX_UNKNOWN */
    const char *holder_host;  /* the host whose facts name the holder (borrowed from the lock:
                                 hdx_lock.holder_host), or NULL: this host, or unknown */
    int creator_alive;        /* the lock's creator_alive, else its process's alive in the
                                 evidence: 1, 0, HDX_UNKNOWN */
    int unchecked;            /* processes that could not be read when looking for a holder: a
                                 state "stale" is then unverified */
    int from_facts;           /* 1: judged from the lock's facts; 0: the state an older snapshot or
                                 report recorded (hdx_lock.state, holder_pid, unchecked) */
    int holder_from_trace;    /* 1: holder_pid is the trace's last holder of a kernel lock nobody
                                 holds now, the job being gone */
    int creator_unknown;      /* 1: stale, and no trace tells who created it */
    int deleted;              /* 1: stale by the trace alone, after the job (facts.live 0): the lock
                                 file is gone now (deleted since), but its creator took it, never
                                 released it and is gone, and its waiters polled it until their
                                 trace ended */
} hdx_lock_judgement;

/* A process group of the job, as its ranks' torch.distributed keeps it (read from each
 * rank's memory, or from the job's logs), merged over the ranks by name
 * (docs/design.md "Process groups"). */
typedef struct hdx_pgroup {
    char *name;     /* torch's group name (_pg_names), unique in a job ("" for torch 1.13's default) */
    char *desc;     /* the group description torch >= 2.4 keeps, or NULL */
    char *role;     /* its part in a 3D-parallel layout, from megatron.core.parallel_state:
                       "tp", "pp", "dp", "cp", "ep", "mp", ... or NULL */
    int *ranks;     /* global ranks, indexed by group rank */
    size_t n_ranks;
    int is_default; /* 1 the default (world) group */
} hdx_pgroup;

/* ---- Job logs (logs.c reads them; classify_logs.c decides from them) ---- */

enum hdx_log_strength { HDX_LOG_WEAK = 0, HDX_LOG_STRONG = 1 };

/* One named value a log pattern captured: {"seq", "812"}. */
typedef struct hdx_log_field {
    char *name;
    char *value;
} hdx_log_field;

/* One log line that a pattern (inspector/formats/patterns/logs.json) matched. */
typedef struct hdx_log_fact {
    char *pattern;    /* the pattern's name ("nccl_work_progress") */
    char *proves;     /* what a match proves, from the pattern */
    char *cls;        /* a user pattern's "class", or NULL */
    enum hdx_log_strength strength;
    int rank;         /* the global rank the line belongs to, HDX_UNKNOWN */
    int group_rank;   /* the rank in the [PG ... Rank n] prefix, HDX_UNKNOWN */
    char *pg;         /* that prefix's process group ("0", "default_pg"...), NULL when none */
    int default_pg;   /* 1 the default group (its group ranks are global), 0 another, HDX_UNKNOWN */
    int in_traceback; /* 1 when the line is inside a Python traceback */
    int traceback;    /* the traceback it belongs to (counted per file from 1), 0 none */
    char *file;       /* the log file */
    long line;        /* its line number in that file (1 = first) */
    char *text;       /* the line without its launcher prefix */
    hdx_log_field *fields;
    size_t n_fields;
} hdx_log_fact;

/* The NCCL work counters one rank logged for one process group (docs/design.md "Job logs"):
 * sequence numbers count per group, so a rank keeps one of these per group it logged. */
typedef struct hdx_log_seq {
    char *pg;              /* the group, as the facts name it ("5 (TENSOR_MODEL_PARALLEL_GROUP)"); NULL: the
                              default group, or lines that name no group (torch before 2.3) */
    int group_rank;        /* the rank's place in that group, HDX_UNKNOWN */
    int unplaced;          /* 1: from bare "[Rank n]" lines (no "[PG ...]"), group_rank n: the default
                              group's when n is the rank's global rank, else a group not named (never
                              compared); a "[PG ...]" line of the same work and group rank takes them over */
    long long timed_out;   /* the work its watchdog timed out (SeqNum, or "at work: N"), HDX_UNKNOWN */
    long long enqueued;    /* last enqueued NCCL work, HDX_UNKNOWN */
    long long completed;   /* last completed NCCL work, HDX_UNKNOWN */
    char *op;              /* OpType of the timed-out work, or NULL */
} hdx_log_seq;

/* What the logs tell about one global rank. */
typedef struct hdx_log_rank {
    int rank;
    char *file;            /* the file of its last line */
    long last_line_no;     /* that line's number */
    char *last_line;       /* its last line, prefix removed */
    char *last_time;       /* the time stamp on that line as written, or NULL */
    char *last_pattern;    /* the pattern its last line matched, or NULL */
    hdx_log_seq *seqs;     /* its NCCL work counters, one per process group, in the order first logged */
    size_t n_seqs;
    char *exit_cause;      /* "exit code 1", "signal 9 (SIGKILL)", "RuntimeError: ...", or NULL */
    int root_cause;        /* 1: torch elastic's first observed failure */
    /* How its rank was known (docs/design.md "Job logs"): "prefix", "file name", "traceback",
     * "line", "node rank x nproc + local rank", "Slurm node id x tasks per node + local id"; where
     * the lines and the file's name or place disagree, "<how>; its file name says rank N" (or
     * "its place"). */
    char *rank_from;
} hdx_log_rank;

typedef struct hdx_evidence {
    char *host;
    int64_t taken_ns;   /* CLOCK_REALTIME ns of the first sample */
    int samples;        /* number of samples taken (0 for post-mortem input) */
    int interval_ms;
    int64_t build_timeout_s;
    int live;           /* 1 for inspect, 0 for analyze */
    hdx_process *procs;
    size_t n_procs;
    hdx_lock *locks;
    size_t n_locks;
    char **notes;       /* what could not be checked, and why */
    size_t n_notes;
    /* Job logs (logs.c): every pattern match in input order, and the summary per
     * rank. Logs are an input, not part of a snapshot: a snapshot does not carry them. */
    hdx_log_fact *log_facts;
    size_t n_log_facts;
    hdx_log_rank *log_ranks;
    size_t n_log_ranks;
    /* The job's process groups (hdx_evidence_add_pgroup); locals name them by hdx_local.pg. */
    hdx_pgroup *pgroups;
    size_t n_pgroups;
    /* Lookups of processes by (host, pid), pid and rank (hdx_evidence_index); private. */
    struct hdx_proc_index *proc_index;
    /* Lookups of pgroups by name (hdx_evidence_find_pgroup), kept by hdx_evidence_add_pgroup
     * and hdx_evidence_merge; private. */
    struct hdx_pgroup_index *pgroup_index;
    /* Strings and arrays that frames of this evidence borrow (frames with `pooled` set):
     * interned names and locals of loaded snapshots; private (formats/snapshot_read.c). */
    struct hdx_pool *pool;
} hdx_evidence;

/* Allocate an empty evidence set. Returns NULL with errno=ENOMEM. */
hdx_evidence *hdx_evidence_new(void);
/* Release everything the evidence owns. Accepts NULL. */
void hdx_evidence_free(hdx_evidence *ev);

/*
 * Append a zeroed process / thread / lock / waiter / frame and return it
 * (borrowed, valid until the next append to the same array), with every
 * integer field that has an "unknown" value set to HDX_UNKNOWN. NULL on ENOMEM.
 */
hdx_process *hdx_evidence_add_process(hdx_evidence *ev);
hdx_thread *hdx_process_add_thread(hdx_process *p);
/* Room for n threads in all, so that as many hdx_process_add_thread calls allocate nothing
 * more (a loader that knows the count: 131 072 ranks' threads took 16 slots for 10, 60 % of the
 * heap: BENCHMARKS.md "Analyze of 8192, 32 768 and 131 072 ranks"). 0, or -ENOMEM (p as it was). */
int hdx_process_reserve_threads(hdx_process *p, size_t n);
hdx_frame *hdx_thread_add_frame(hdx_thread *t);
hdx_lock *hdx_evidence_add_lock(hdx_evidence *ev);
hdx_waiter *hdx_lock_add_waiter(hdx_lock *l);

/*
 * Add the process group `name` with its global ranks (n of them, by group rank), or
 * merge it into the one of that name already there: desc, role and is_default are set
 * when given (desc and role may be NULL, is_default 0 or 1), and a group whose ranks
 * disagree with the ones there keeps the first ranks and returns -EEXIST (a torn read
 * or two jobs). Copies every string and array. Returns 0, -EEXIST or -ENOMEM.
 */
int hdx_evidence_add_pgroup(hdx_evidence *ev, const char *name, const int *ranks, size_t n, const char *desc,
                            const char *role, int is_default);

/* The group named `name` (borrowed), or NULL. Expected O(1) through ev's index of the groups'
 * names for the groups it covers; a scan of those added since (hdx_evidence_index_pgroups). */
const hdx_pgroup *hdx_evidence_find_pgroup(const hdx_evidence *ev, const char *name);

/* Bring ev's index of its groups' names up to date with ev->pgroups, for
 * hdx_evidence_find_pgroup; hdx_evidence_add_pgroup and hdx_evidence_merge call it. Without
 * memory the index goes and lookups scan: never an error. */
void hdx_evidence_index_pgroups(hdx_evidence *ev);

/* Release what a group owns (not the struct itself). */
void hdx_pgroup_clear(hdx_pgroup *g);

/* Add a note for a person (printf format, ap) to the list *notes of *n heap strings (the
 * list grows; the caller owns it), unless the list has that text already. 0 or -ENOMEM. */
int hdx_notes_vadd(char ***notes, size_t *n, const char *fmt, va_list ap);

/* Add a note (printf format) to ev, unless ev has it already. Returns 0 or -ENOMEM. */
int hdx_evidence_note(hdx_evidence *ev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Does a Python frame's function name `have` name the function `want`? Exactly, or
 * want's plain name where frames carry co_name (≤ 3.10: "FileBaton.wait" matches
 * "wait"), or a plain want naming a method from 3.11 (co_qualname:
 * "_communicate" matches "P2PCommunicator._communicate"). 1 or 0.
 */
int hdx_python_name_matches(const char *have, const char *want);

/*
 * The innermost Python frame of t (merged frames, then py_frames) at or
 * outside index *from (0 = innermost; NULL = 0) whose file ends with
 * file_suffix and whose function is `function`. Before 3.11 frames carry
 * only the plain name (co_name): names match as hdx_python_name_matches says.
 * Stores the frame's index in *from when found. Borrowed, or NULL.
 */
const hdx_frame *hdx_thread_find_python(const hdx_thread *t, const char *function, const char *file_suffix,
                                        size_t *from);

/*
 * The Python frames of a FileBaton wait (a build_lock, docs/design.md "The hang classes"), for
 * hdx_thread_find_python: torch.utils.file_baton.FileBaton.wait polls for the build directory's "lock" file to go away,
 * called from torch.utils.cpp_extension._jit_compile, whose local build_directory names it.
 * HDX_FILEBATON_WAIT is also the name of the wait (waits.c's op, a lock waiter's how).
 */
#define HDX_FILEBATON_WAIT "FileBaton.wait"
#define HDX_FILEBATON_FILE "torch/utils/file_baton.py"
#define HDX_FILEBATON_CALLER "_jit_compile"
#define HDX_FILEBATON_CALLER_FILE "torch/utils/cpp_extension.py"

/* The value of local `name` of frame f (borrowed), or NULL. */
const hdx_local *hdx_frame_local(const hdx_frame *f, const char *name);

/*
 * Lookups; return borrowed pointers or NULL.
 *
 * hdx_evidence_find_process: the first process with pid, on any host (for one
 * host's evidence: inspect, capture). hdx_evidence_find_process_on: the process
 * with pid on host; a NULL host on either side matches any (a trace or dump
 * that does not name its host). In a multi-host job pids repeat across hosts,
 * so parent and lock lookups use the _on form.
 *
 * Both run in O(1) after hdx_evidence_index(ev) while ev->procs is the array
 * and n_procs the count that were indexed; otherwise (processes added since)
 * they scan. The index holds positions: after changing the pid, host or rank
 * of an indexed process in place, call hdx_evidence_index again.
 */
hdx_process *hdx_evidence_find_process(const hdx_evidence *ev, int pid);
hdx_process *hdx_evidence_find_process_on(const hdx_evidence *ev, const char *host, int pid);
hdx_lock *hdx_evidence_find_lock(const hdx_evidence *ev, const char *path);

/* The process of a lock waiter: by (w->host, w->pid); without a host, the process
 * with w->pid that has w->rank when one does, else the first with w->pid. Borrowed. */
hdx_process *hdx_evidence_find_waiter(const hdx_evidence *ev, const hdx_waiter *w);

/* A rank process (is_rank_process, as hdx_mark_rank_processes set it) with rank
 * on a host other than `host` (both hosts known), or NULL. Scans unless indexed
 * (above). Borrowed. */
hdx_process *hdx_evidence_find_rank_elsewhere(const hdx_evidence *ev, int rank, const char *host);

/*
 * (Re)build the lookup index over ev's processes: (host, pid), pid and rank.
 * hdx_evidence_index_more(ev, from) adds processes from..n_procs-1 to an index
 * that is current for 0..from-1 (contents unchanged, the array possibly moved):
 * the cost of the added ones only. Memory is ev's (hdx_evidence_free). 0 or
 * -ENOMEM (then lookups scan, correctly).
 */
int hdx_evidence_index(hdx_evidence *ev);
int hdx_evidence_index_more(hdx_evidence *ev, size_t from);
/* 1 when the index is current for ev->procs and ev->n_procs (lookups are O(1)), else 0. */
int hdx_evidence_indexed(const hdx_evidence *ev);

/* Set a process's env entry (copied), and derive rank/local_rank/world_size
 * from the env names listed above. Unknown names are ignored. 0 or -ENOMEM. */
int hdx_process_set_env(hdx_process *p, const char *name, const char *value);
/* The value of an allowed env name kept for p (borrowed), or NULL. */
const char *hdx_process_env(const hdx_process *p, const char *name);

/*
 * Mark each process's is_rank_process. Launchers (hangdx run, a shell, srun's
 * task), launch and container wrappers (env, chroot, unshare, slurmstepd, enroot,
 * apptainer's starter, runc, conmon, containerd-shim: never ranks) and children
 * (ninja, compilers, DataLoader workers) inherit a rank's variables: a rank's
 * own process is its outermost Python process (Python frames were read, or
 * argv[0] is python*); for a job without Python, its outermost process with
 * that rank. A process whose rank is only a scheduler's task number
 * (SLURM_PROCID, PMI_RANK, OMPI_COMM_WORLD_RANK) and that has a descendant with
 * RANK is a launcher (torchrun started by srun on each node), not a rank.
 * Processes are matched per host.
 */
void hdx_mark_rank_processes(hdx_evidence *ev);

/*
 * What p is to its rank, after hdx_mark_rank_processes: "rank" (the rank's own process),
 * "worker" (a descendant of it that inherited its variables: a DataLoader worker, a
 * compiler), "launcher" (a launcher or wrapper above it: torchrun, srun, a shell, unshare,
 * a container runtime), or NULL when p carries no rank. Static string.
 */
const char *hdx_process_part(const hdx_evidence *ev, const hdx_process *p);

/* Name a process for a person, into buf (size bytes): "rank 1 (pid 123)", "rank 1" (pid
 * unknown: a dump without pids) or "pid 123", from p, or from pid and rank when p is NULL;
 * in a multi-host job the pid with its host: "rank 1 (pid 123 on node3)". */
void hdx_evidence_who(const hdx_evidence *ev, const hdx_process *p, int pid, int rank, char *buf, size_t size);

/* Where thread t is, for a person, into buf: "skip_and_sleep (hangs.py:40)" from its innermost
 * Python frame, else its wait label, else "an unknown place" (t may be NULL). */
void hdx_thread_where(const hdx_thread *t, char *buf, size_t size);

/* The program's base name ("python3"), from argv[0] or the main thread's name. Borrowed. */
const char *hdx_process_name(const hdx_process *p);

/* How many generations p is below ancestor in ev (1 for a child), or 0 when it is not (or
 * more than 64 generations: recorded parents may form a cycle). Pids repeat across hosts:
 * each parent is looked up on p's host. */
int hdx_process_descendant_depth(const hdx_evidence *ev, const hdx_process *p, const hdx_process *ancestor);

/* The group rank of global rank `rank` in pg (its index in pg->ranks), or -1 when pg is NULL
 * or rank is not a member. */
int hdx_pgroup_rank_of(const hdx_pgroup *pg, int rank);

/* Do a and b belong to one job? Every job variable that both have (MASTER_ADDR,
 * MASTER_PORT, TORCHELASTIC_RUN_ID, SLURM_JOB_ID) agrees. */
int hdx_process_same_job(const hdx_process *a, const hdx_process *b);

/*
 * When the rank processes belong to several jobs (inspect --all on a shared
 * host), keep is_rank_process only for one job: the job of a process given by
 * PID (asked) if there is one, else the job with the most live rank
 * processes (alive != 0; on a tie, the most rank processes), and return how
 * many rank processes of other jobs were set aside (0: one job). Every process
 * of another job (its rank processes, and the launchers and children that carry
 * its rank variables) gets set_aside = 1 and is_rank_process = 0; the others
 * set_aside = 0. Call after hdx_mark_rank_processes.
 */
size_t hdx_keep_largest_job(hdx_evidence *ev);

/* 1 when ev's processes name more than one host (a multi-host job: pids then need
 * their host to be found), else 0. Scans until the second host. */
int hdx_evidence_multi_host(const hdx_evidence *ev);

/* A hash of t's wait and frames (function names; Python file and line too):
 * equal stacks give equal hashes. */
uint64_t hdx_stack_hash(const hdx_thread *t);

/* The value of field name of f (borrowed), or NULL. */
const char *hdx_log_fact_field(const hdx_log_fact *f, const char *name);
/* The same as an integer; def when absent or not a number. */
long long hdx_log_fact_int(const hdx_log_fact *f, const char *name, long long def);

/* The summary of rank in ev (borrowed), or NULL. */
const hdx_log_rank *hdx_evidence_log_rank(const hdx_evidence *ev, int rank);

/* Release what a process / thread / lock owns (not the struct itself). */
void hdx_process_clear(hdx_process *p);
void hdx_thread_clear(hdx_thread *t);
void hdx_lock_clear(hdx_lock *l);
/* Release the arrays of f and zero it (looked 0: no facts). Accepts NULL. */
void hdx_lock_facts_clear(hdx_lock_facts *f);
void hdx_log_fact_clear(hdx_log_fact *f);
void hdx_log_rank_clear(hdx_log_rank *r);
void hdx_frame_clear(hdx_frame *f);
/* Clear n frames and free the array. Accepts NULL. */
void hdx_frames_free(hdx_frame *frames, size_t n);

/* Names used in reports: "baton", "flock", "posix", "ofd"; "stale", "held", "free". */
const char *hdx_lock_kind_name(enum hdx_lock_kind k);
const char *hdx_lock_state_name(enum hdx_lock_state s);

#endif
