/*
 * /proc readers: process discovery and the facts that need no stop.
 * Sources: proc(5) for /proc/PID/{stat,status,cmdline,environ,cwd,exe,fd,
 * task/TID/{stat,comm,wchan,syscall}}; field numbers are proc(5)'s, 1-based.
 */
#ifndef HDX_PROC_H
#define HDX_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/evidence.h"
#include "model/procstat.h"

/*
 * Expand pids with all their descendants (from /proc/PID/task/TID/children,
 * or a scan of ppid fields when that file is absent). The result keeps the
 * order given, each pid once, descendants after their ancestor. *out is a
 * heap array the caller frees. Returns 0 or a negative errno; a pid that does
 * not exist is -ESRCH (nothing is returned then).
 */
int hdx_proc_descendants(const int *pids, size_t n, int **out, size_t *n_out);

/*
 * Fill p (from hdx_evidence_add_process) with the facts of pid that do not
 * change: pid, ppid, host, cmdline, allowed env (hdx_process_set_env; which
 * also gives rank, local rank and world size), exe, cwd, start_ticks, and
 * one hdx_thread per task (tid, name). Then takes a first sample as
 * hdx_proc_sample() does, setting cpu_ms_first. Returns 0, or a negative
 * errno (-ESRCH gone, -EACCES unreadable); p->read_error is set too.
 */
int hdx_proc_read(hdx_process *p, int pid);

/*
 * Refresh what changes: process state, age_s, cpu_ms (sum over threads, ms,
 * from utime+stime in clock ticks / sysconf(_SC_CLK_TCK); the process's own
 * stat fields, which include threads that ended), and per thread: state,
 * wchan, syscall number and args, cpu_ms. A thread blocked outside any system
 * call ("-1" in /proc/TID/syscall) gets HDX_SYSCALL_UNKNOWN. Threads that
 * appeared are added; threads that ended keep their last values. Sets alive
 * (0 and -ESRCH when the pid is gone or was reused). 0 or -errno.
 */
int hdx_proc_sample(hdx_process *p);

/*
 * Is the process that had start_ticks (field 22 of stat) still alive under
 * pid? 1 yes, 0 no (gone, zombie, or the pid was reused). start_ticks 0 means
 * "don't compare".
 */
int hdx_proc_alive(int pid, uint64_t start_ticks);

/* 1 when pid's cgroup is frozen by the cgroup freezer (v1: the freezer hierarchy's
 * freezer.state is FROZEN; v2: "frozen 1" in cgroup.events; cgroups(7)), 0 when not,
 * HDX_UNKNOWN when /proc/PID/cgroup cannot be read. A frozen process shows state D (v1) or S
 * (v2), never T: only this tells it from a blocked one. */
int hdx_proc_frozen(int pid);

/* When pid started: field 22 of /proc/PID/stat (clock ticks after boot), or 0 when it
 * cannot be read (gone, or not a pid). */
uint64_t hdx_proc_start_ticks(int pid);

/* Containers (docs/design.md "Containers"). */

/* The inode of /proc/PID/ns/NAME ("pid", "mnt"; pid <= 0: hangdx's own), 0 when unreadable. */
uint64_t hdx_proc_ns(int pid, const char *name);

/* The pid, as seen here, of the live process whose pid is nspid in the pid namespace
 * pid_ns and that started at start_ticks (0: any), or 0 when none. Scans /proc. */
int hdx_proc_pid_in_ns(uint64_t pid_ns, int nspid, uint64_t start_ticks);

/* A live process of the mount namespace mnt_ns that started no later than before_ticks
 * (clock ticks after boot, field 22 of its stat; 0: any), or 0 when none: the container
 * is gone, or the inode was given to a newer namespace (the kernel reuses namespace
 * inodes; a namespace that existed when a traced process started has a process that old,
 * or one that joined it later while that one lived). Scans /proc. */
int hdx_proc_in_mnt_ns(uint64_t mnt_ns, uint64_t before_ticks);

/* This boot's id (/proc/sys/kernel/random/boot_id), static buffer, "" if unreadable. */
const char *hdx_proc_boot_id(void);

/* This host, live, for the trace reader (formats/traces.h, hdx_trace_to_evidence): alive is
 * hdx_proc_alive, boot_id hdx_proc_boot_id, hostname hdx_hostname, own_ns hdx_proc_ns(0, name),
 * pid_in_ns hdx_proc_pid_in_ns, in_mnt_ns hdx_proc_in_mnt_ns. A static object; never NULL. */
struct hdx_trace_host;
const struct hdx_trace_host *hdx_proc_trace_host(void);

/*
 * The value of any environment variable of pid (e.g. HANGDX_TRACE_DIR),
 * for use on this host only; it never goes into evidence. Heap string, or
 * NULL (errno ENOENT when unset).
 */
char *hdx_proc_getenv(int pid, const char *name);

/* readlink /proc/PID/fd/FD into buf. 0 or a negative errno. */
int hdx_proc_fd_path(int pid, int fd, char *buf, size_t size);

/*
 * Every process on this host that has the file (dev, ino) open, from a scan
 * of /proc/<pid>/fd (processes we cannot read are skipped and counted in
 * *unreadable, which may be NULL). hangdx itself is left out: its own look
 * at the file never makes it a holder. *pids is a heap array the caller frees.
 * 0 or a negative errno.
 */
int hdx_proc_openers(dev_t dev, ino_t ino, int **pids, size_t *n, size_t *unreadable);

/*
 * Every process on this host whose environment has RANK, LOCAL_RANK,
 * SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK set, hangdx's own processes
 * (the same executable) and its ancestors (the shell or srun step that runs
 * it has its step's rank variables) excluded. Heap array; 0 or -errno.
 */
int hdx_proc_find_ranks(int **pids, size_t *n);

/* Which rank processes hdx_proc_find_ranks_filtered() keeps. */
typedef struct hdx_rank_filter {
    const char *slurm_job_id;      /* only processes whose SLURM_JOB_ID is this (NULL: any) */
    const char *slurm_cluster;     /* and, when both have one, whose SLURM_CLUSTER_NAME is this */
    const char *const *skip_steps; /* SLURM_STEP_ID values (of that job) to leave out: the */
    size_t n_skip_steps;           /* steps that collect, which carry the job's rank variables */
} hdx_rank_filter;

/*
 * hdx_proc_find_ranks(), keeping only the processes that pass f (NULL: all):
 * with f->slurm_job_id, those whose environment has SLURM_JOB_ID equal to it
 * and a SLURM_STEP_ID that is none of f->skip_steps (processes of the job
 * without SLURM_STEP_ID, such as a batch script's, are kept); with
 * f->slurm_cluster, a process whose SLURM_CLUSTER_NAME differs is another
 * cluster's job of the same number (two clusters may share a host). Environments
 * are read from /proc/PID/environ (readable as the same user or root); an
 * unreadable one is left out. *pids is a heap array the caller frees.
 * 0 or a negative errno.
 */
int hdx_proc_find_ranks_filtered(const hdx_rank_filter *f, int **pids, size_t *n);

/*
 * Thread tid's system call now, from /proc/PID/task/TID/syscall (proc(5)):
 * *nr its number and args[6] its arguments; *nr HDX_SYSCALL_RUNNING when the
 * file says "running", HDX_SYSCALL_UNKNOWN when blocked outside a system call
 * ("-1 sp pc") or unreadable. Returns 0, or a negative errno when the file
 * cannot be read (ENOENT: gone; EACCES: not ours).
 */
int hdx_proc_read_syscall(int pid, int tid, long *nr, uint64_t args[6]);

/* 1 when pid is a kernel thread (PF_KTHREAD in field 9 of /proc/PID/stat): no user-space
 * stacks, no command line; 0 otherwise, or when there is no such pid. */
int hdx_proc_is_kernel_thread(int pid);

/* What to do when another process's /proc files are denied: run as its user or as root, or,
 * when hangdx is root already, why root cannot read them. A static string. */
const char *hdx_proc_access_advice(void);

/* The state letter of pid (field 3 of its stat: R S D T t Z ...), 0 when there is no such pid. */
char hdx_proc_state(int pid);

/*
 * Which of pid's /proc files hangdx may not read (another user's process,
 * without root or CAP_SYS_PTRACE): environ, exe, cwd, fd, syscall, wchan
 * (the kernel shows "0" then: it is taken as denied with syscall), maps and
 * mem, in that order. Writes into buf (size bytes) a sentence for a person,
 * "environ, exe, cwd, fd, syscall, wchan, maps and mem are not readable: rank
 * variables unknown, ...", naming what each denial costs, and returns how
 * many were denied (0: buf is ""), or -ESRCH when pid is gone.
 */
int hdx_proc_denied(int pid, char *buf, size_t size);

#endif
