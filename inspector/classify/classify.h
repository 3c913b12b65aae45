/*
 * The classifier, in two steps (docs/design.md "Data flow"): hdx_evidence_label
 * writes into the evidence the facts derived from it (waits, progress, rank
 * processes, other jobs), then hdx_classify reads the labelled evidence and
 * writes a verdict. hdx_classify is pure: a const evidence in, a verdict out
 * (its notes included), no I/O, no ptrace, no clock; tested on recorded
 * evidence alone (docs/design.md "Stages").
 *
 * Stage rule: classify may include model; no I/O. (docs/design.md "Stages")
 */
#ifndef HDX_CLASSIFY_H
#define HDX_CLASSIFY_H

#include <stddef.h>

#include "model/evidence.h"

enum hdx_class {
    HDX_CLASS_BUILD_LOCK,
    HDX_CLASS_COMPILE_STALL,
    HDX_CLASS_COLLECTIVE_WAIT,
    HDX_CLASS_P2P_MISMATCH,
    HDX_CLASS_RENDEZVOUS_WAIT,
    HDX_CLASS_CONFIG_ERROR,
    HDX_CLASS_NOT_HUNG,
    HDX_CLASS_UNKNOWN,
};

enum hdx_confidence { HDX_CONF_LOW, HDX_CONF_MEDIUM, HDX_CONF_HIGH };

/*
 * What decided a verdict: one value per outcome of a rule (docs/design.md
 * "Findings", which lists the facts each one carries). The report words a
 * verdict from its finding and facts (report/words.h); tests check these.
 */
enum hdx_finding {
    HDX_FIND_NONE = 0,
    /* the rules on locks, CPU and stacks (classify.c) */
    HDX_FIND_FROZEN,              /* every live rank frozen by its cgroup's freezer */
    HDX_FIND_LOCK_STALE,          /* waiters on a lock nobody holds or has open */
    HDX_FIND_LOCK_STALE_UNCHECKED, /* the same, but processes of other users could not be checked */
    HDX_FIND_LOCK_HOLDER_UNREAD,  /* a holder seen in /proc/locks that could not be inspected */
    HDX_FIND_BUILD_STUCK,         /* the holder's build makes no progress, or ran past --build-timeout */
    HDX_FIND_BUILD_RUNNING,       /* the holder's build makes progress */
    HDX_FIND_LOCK_HOLDER_STUCK,   /* the holder is itself stuck, with no build under it */
    HDX_FIND_PROGRESS,            /* the processes make progress */
    HDX_FIND_NO_PROCESS,          /* the input held no process */
    HDX_FIND_ALL_EXITED,          /* every process has exited, and nothing says it was stuck */
    HDX_FIND_NO_STACKS,           /* no rule matched, and no stack could be read */
    HDX_FIND_NO_RULE,             /* stuck, but no rule matched */
    /* the distributed rules (classify_dist.c) */
    HDX_FIND_RENDEZVOUS,          /* ranks wait in process-group or NCCL communicator initialisation */
    HDX_FIND_P2P,                 /* send/recv that cannot match, without process groups */
    HDX_FIND_COLLECTIVE_ELSEWHERE, /* ranks wait in a collective that others are not in */
    HDX_FIND_COLLECTIVE_MISSING,  /* ... that ranks not inspected are missing from */
    HDX_FIND_COLLECTIVE_GPU,      /* the whole world waits on the GPU work under the collective */
    HDX_FIND_COLLECTIVE_STUCK,    /* the whole world waits in it, none elsewhere */
    HDX_FIND_COLLECTIVE_UNSEEN,   /* ranks wait in it, none missing here, world size unknown */
    HDX_FIND_GRAPH,               /* the waits-for graph of the process groups (v->graph) names the root */
    /* the log rules (classify_logs.c) */
    HDX_FIND_LOG_CONFIG_MISMATCH, /* a log line: a setting has two values that must agree */
    HDX_FIND_LOG_CONFIG_WORLD_NOT_DIVISIBLE, /* a log line: the world size is not divisible by TP x PP */
    HDX_FIND_LOG_CONFIG_DUPLICATE_GPU, /* a log line: two ranks of one NCCL communicator on one GPU */
    HDX_FIND_LOG_PARALLEL_SIZES,  /* Megatron's printed layout: TP x PP x CP x DP is not the world size */
    HDX_FIND_LOG_SEQUENCE_PARALLEL, /* Megatron's arguments: sequence parallel, seq_length not divisible by TP */
    HDX_FIND_LOG_PARALLEL_ARGS,   /* Megatron's arguments: TP x PP x CP x DP is not world_size */
    HDX_FIND_LOG_BUILD_LOCK,      /* ranks time out waiting for ranks whose last lines are a JIT kernel build */
    HDX_FIND_LOG_BUILD_UNFINISHED, /* no timeout: ranks whose last lines are a JIT kernel build that never loaded */
    HDX_FIND_LOG_FILE_LOCK,       /* a file lock could not be acquired (the filelock package's Timeout) */
    HDX_FIND_LOG_STORE_BARRIER,   /* the store-based barrier of process-group initialisation timed out */
    HDX_FIND_LOG_STORE_CLIENTS,   /* the TCPStore timed out waiting for the ranks to connect */
    HDX_FIND_LOG_SEQ_BEHIND,      /* ranks never enqueued the collective that the watchdogs of others timed out on */
    HDX_FIND_LOG_DESYNC,          /* the NCCL desync report names ranks */
    HDX_FIND_LOG_SEQ_SILENT,      /* a watchdog timeout; ranks that the logs know said nothing of it */
    HDX_FIND_LOG_SEQ_GPU,         /* a watchdog timeout on every rank of the job: its GPU work is stuck */
    HDX_FIND_LOG_SEQ_UNEXPLAINED, /* a watchdog timeout, and no log line tells which rank never joined */
    HDX_FIND_LOG_DETAIL_MISMATCH, /* TORCH_DISTRIBUTED_DEBUG=DETAIL: ranks in different collectives */
    HDX_FIND_LOG_MONITORED_BARRIER, /* monitored_barrier names the ranks that did not reach it */
    HDX_FIND_LOG_GLOO_COLLECTIVE, /* gloo timeouts in a collective */
    HDX_FIND_LOG_GLOO_CYCLE,      /* gloo send/recv timeouts whose peers wait for each other in a cycle */
    HDX_FIND_LOG_GLOO_UNMATCHED,  /* gloo send/recv timeouts whose peers did not time out */
    HDX_FIND_LOG_GLOO_NO_PEERS,   /* gloo send/recv timeouts, and no call site names the peers */
    HDX_FIND_LOG_USER_PATTERN,    /* a strong user pattern that names a class matched */
    HDX_FIND_LOG_STARTUP_PHASE,   /* no rule decided; Megatron's start-up milestones tell the phase where the logs stop */
    HDX_FIND_LOG_EXITS,           /* the job ended (torch elastic's ChildFailedError), no hang rule matched */
    HDX_FIND_LOG_UNDECIDED,       /* the logs hold no line that decides a class, and no stack to judge */
};

/* The kinds of value a fact holds. */
enum hdx_fact_kind { HDX_FACT_NUM, HDX_FACT_TEXT, HDX_FACT_INTS };

/* One fact of a verdict, named: what the rule that decided read from the evidence
 * (a path, an op, the ranks that wait), as the report words it and prints it in
 * its JSON (verdict.facts). */
typedef struct hdx_fact {
    const char *name; /* static, e.g. "path", "waiting", "op" (docs/design.md "Findings") */
    enum hdx_fact_kind kind;
    long long num;    /* HDX_FACT_NUM */
    char *text;       /* HDX_FACT_TEXT, owned */
    int *ints;        /* HDX_FACT_INTS, owned */
    size_t n_ints;
} hdx_fact;

typedef struct hdx_verdict {
    enum hdx_class cls;
    enum hdx_finding finding; /* what decided it */
    hdx_fact *facts;          /* the finding's facts, each name once; owned */
    size_t n_facts;
    int *culprit_ranks;
    size_t n_culprit_ranks;
    int *culprit_pids;
    size_t n_culprit_pids;
    int *missing_ranks;
    size_t n_missing_ranks;
    int missing_count; /* rendezvous_wait: how many ranks are missing when a log tells the count
                          but maybe not which (report: this, else n_missing_ranks, else null); 0 unknown */
    enum hdx_confidence confidence;
    int culprit_working; /* 1 when a root of the waits-for graph is doing work (a live build whose
                            compilers make progress, a rank that computes): the job may only be
                            slow, and nothing may end it */
    char *group;         /* the name of the process group the hang is in (hdx_pgroup.name), or NULL */
    hdx_lock_judgement *locks; /* the state of each lock, parallel to ev->locks (n_locks of them), or
                                  NULL when the evidence has none; owned by the verdict */
    size_t n_locks;
    struct hdx_waitsfor *graph; /* the job's waits-for graph the verdict was read from (waitsfor.h), or
                                   NULL: it borrows from the evidence, which must outlive the verdict */
    char **notes;               /* what the classifier adds for a person (a question the logs raise, a
                                   culprit's last log line), each once; the report prints them after the
                                   evidence's notes. Owned by the verdict */
    size_t n_notes;
    struct hdx_verdict *logs_alone; /* when the stacks decided and the job logs would decide too: the verdict
                                       of the logs alone (classify_logs.c), which the report words as a note
                                       after these ("the job logs alone would say ..."); NULL otherwise.
                                       Owned by the verdict */
} hdx_verdict;

/*
 * The label step, run once on the evidence before hdx_classify: it writes
 * into ev the facts the rules read (docs/design.md "Data flow"):
 *  - each thread's wait (hdx_thread.wait, wait_op, wait_peer, wait_frame):
 *    what it waits on, read from its stack and its system call (waits.h,
 *    hdx_wait_classify), and "build_lock" for the waiters of ev's locks;
 *  - each process's progressing, when ev has samples: whether it made
 *    progress between them (docs/design.md "Busy or blocked"); post-mortem
 *    evidence keeps what was recorded;
 *  - which processes are the ranks (is_rank_process, hdx_mark_rank_processes)
 *    and which belong to another job (set_aside, hdx_keep_largest_job), with a
 *    note on ev saying how many rank processes were set aside.
 * Labelling again gives the same labels (notes are said once). No I/O. Returns
 * 0, -EINVAL (ev NULL) or -ENOMEM (labels then partly set).
 */
int hdx_evidence_label(hdx_evidence *ev);

/*
 * Classify ev into *v (zeroed by the caller or left from hdx_verdict_clear),
 * v->locks included: the judgement of each lock of ev (hdx_lock_judge).
 * Needs ev labelled (hdx_evidence_label). Pure: reads ev and writes only *v,
 * its notes (v->notes) included. Returns 0 or -ENOMEM.
 */
int hdx_classify(const hdx_evidence *ev, hdx_verdict *v);

/*
 * Judge the state of lock l of ev from the facts a host recorded of it
 * (docs/design.md "Build locks"), into *out (owned by the caller; its
 * holder_host is borrowed from l):
 *  - held: a live process holds its kernel lock (a /proc/locks row), or, for
 *    a baton or a file the kernel locks, has it open and does not wait on it
 *    (the creator first); a baton whose creator lives on; a kernel lock nobody
 *    holds after the job is gone (facts.live 0), with waiters, whose trace names
 *    a creator: that creator;
 *  - stale: a baton file that exists (or could not be checked) with no live
 *    holder or opener, and a creator gone or unknown; or, after the job is gone
 *    (facts.live 0), a baton file that no longer exists but that waiters polled
 *    until their trace ended while its creator, gone now, held it (never
 *    released in the trace): deleted 1, stale in the past;
 *  - free: no file (but for the above), or a kernel lock nobody holds.
 * A lock without facts (facts.looked 0: an older snapshot or report) keeps the
 * state, holder_pid and unchecked it recorded (and deleted, when it recorded a
 * stale lock whose file did not exist). A lock that other hosts saw too
 * (l->seen) is judged on each host's facts: held wins, then stale, then free, and
 * holder_host names the host whose facts decided. Pure: reads ev (the creator's
 * process when the lock does not say whether it lives) and l, nothing else.
 * Returns 0, or -EINVAL when an argument is NULL.
 */
int hdx_lock_judge(const hdx_evidence *ev, const hdx_lock *l, hdx_lock_judgement *out);

/*
 * hdx_lock_judge for every lock of ev: *out is a heap array parallel to
 * ev->locks (the caller frees it), or NULL when ev has no lock. Returns 0,
 * -EINVAL or -ENOMEM.
 */
int hdx_lock_judge_all(const hdx_evidence *ev, hdx_lock_judgement **out);

/*
 * Set v's fact name (a static string) to a number, a text (copied; NULL sets
 * nothing) or a set of ints (copied, in their order), replacing a fact of that
 * name. Returns 0 or -ENOMEM.
 */
int hdx_verdict_set_num(hdx_verdict *v, const char *name, long long num);
int hdx_verdict_set_text(hdx_verdict *v, const char *name, const char *text);
int hdx_verdict_set_ints(hdx_verdict *v, const char *name, const int *ints, size_t n);

/* v's fact name, borrowed from v, or NULL when v has none of that name. */
const hdx_fact *hdx_verdict_fact(const hdx_verdict *v, const char *name);

/* The number of fact name, or dflt when v has no such number. */
long long hdx_verdict_num(const hdx_verdict *v, const char *name, long long dflt);

/* The text of fact name (borrowed from v), or NULL when v has no such text. */
const char *hdx_verdict_text(const hdx_verdict *v, const char *name);

/* "lock_stale", "graph", ... (docs/design.md "Findings"); "none" for HDX_FIND_NONE. */
const char *hdx_finding_name(enum hdx_finding f);

/* Release what v owns and zero it. Accepts NULL. */
void hdx_verdict_clear(hdx_verdict *v);

/* "build_lock", "compile_stall", ... */
const char *hdx_class_name(enum hdx_class c);

#endif
