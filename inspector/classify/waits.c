#include "classify/waits.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/index.h" /* hdx_hash_mix */
#include "model/pool.h"  /* hdx_pool_epoch_moved */
#include "model/syscalls.h"

/*
 * Frame signatures, most telling first. Python rows match the function
 * (qualified from 3.11; the plain name before) in a file ending with `file`;
 * native rows match a substring of the demangled name. `op` NULL means the
 * function's own name. `peer` names the local that holds the peer rank.
 * Sources: torch/distributed/distributed_c10d.py (1.13–2.x),
 * torch/utils/file_baton.py, filelock/_api.py (3.9–3.x), Megatron-LM core/pipeline_parallel/
 * p2p_communication.py, and the native frames gloo, c10d and NCCL show in
 * gdb/eu-stack when they wait.
 */
static const struct signature {
    enum hdx_frame_kind kind;
    const char *function;
    const char *file; /* Python: file suffix; NULL: any */
    const char *wait;
    const char *op;
    const char *peer;
} signatures[] = {
    /* Service threads that every NCCL/c10d rank has, hung or not (seen on torch 2.11 with
     * NCCL 2.28: pt_nccl_watchdg, pt_nccl_heartbt, pt_tcpstore_uv; the older names from
     * torch 1.13–2.5). First, so that the ProcessGroupNCCL row below never takes them. */
    {HDX_FRAME_NATIVE, "ProcessGroupNCCL::Watchdog::run", NULL, HDX_WAIT_SERVICE, "NCCL watchdog", NULL},
    {HDX_FRAME_NATIVE, "ProcessGroupNCCL::ncclCommWatchdog", NULL, HDX_WAIT_SERVICE, "NCCL watchdog", NULL},
    {HDX_FRAME_NATIVE, "ProcessGroupNCCL::workCleanupLoop", NULL, HDX_WAIT_SERVICE, "NCCL watchdog", NULL},
    {HDX_FRAME_NATIVE, "ProcessGroupNCCL::HeartbeatMonitor::run", NULL, HDX_WAIT_SERVICE, "NCCL heartbeat monitor", NULL},
    {HDX_FRAME_NATIVE, "ProcessGroupNCCL::heartbeatMonitor", NULL, HDX_WAIT_SERVICE, "NCCL heartbeat monitor", NULL},
    {HDX_FRAME_NATIVE, "ncclProxyService", NULL, HDX_WAIT_SERVICE, "NCCL proxy", NULL},
    {HDX_FRAME_NATIVE, "ncclProxyProgress", NULL, HDX_WAIT_SERVICE, "NCCL proxy", NULL},
    {HDX_FRAME_NATIVE, "c10d::detail::LibUVStoreDaemon::run", NULL, HDX_WAIT_SERVICE, "TCPStore server", NULL},
    {HDX_FRAME_NATIVE, "c10d::detail::TCPStoreMasterDaemon::run", NULL, HDX_WAIT_SERVICE, "TCPStore server", NULL},
    /* A gloo worker thread runs the rank's async collectives (AsyncWork::execute under
     * ProcessGroupGloo::runLoop) and waits in UnboundBuffer::waitSend/waitRecv there, while
     * the calling thread waits in Work::wait: the worker must not read as a p2p wait of
     * the rank (gloo's send/recv wait in the calling thread, RecvWork/SendWork below). */
    {HDX_FRAME_NATIVE, "ProcessGroupGloo::AsyncWork::execute", NULL, HDX_WAIT_SERVICE, "gloo worker", NULL},

    /* Build locks: a FileBaton waiter polls forever; the filelock package's acquire retries
     * flock(LOCK_EX|LOCK_NB) every poll_interval (torch inductor's and Triton's caches, and
     * cpp_extension on torch's main branch through torch.utils._filelock). */
    {HDX_FRAME_PYTHON, HDX_FILEBATON_WAIT, HDX_FILEBATON_FILE, HDX_WAIT_BUILD_LOCK, HDX_FILEBATON_WAIT, NULL},
    {HDX_FRAME_PYTHON, "BaseFileLock.acquire", "filelock/_api.py", HDX_WAIT_BUILD_LOCK, "FileLock.acquire", NULL},

    /* Rendezvous: process-group initialisation and store barriers. */
    {HDX_FRAME_PYTHON, "_store_based_barrier", "distributed_c10d.py", HDX_WAIT_RENDEZVOUS, NULL, NULL},
    {HDX_FRAME_PYTHON, "init_process_group", "distributed_c10d.py", HDX_WAIT_RENDEZVOUS, NULL, NULL},
    {HDX_FRAME_PYTHON, "init_device_mesh", "device_mesh.py", HDX_WAIT_RENDEZVOUS, NULL, NULL},
    {HDX_FRAME_PYTHON, "_create_c10d_store", "rendezvous.py", HDX_WAIT_RENDEZVOUS, NULL, NULL},
    {HDX_FRAME_NATIVE, "c10d::TCPStore::waitForWorkers", NULL, HDX_WAIT_RENDEZVOUS, "TCPStore.wait_for_workers", NULL},
    {HDX_FRAME_NATIVE, "c10d::TCPStore::TCPStore", NULL, HDX_WAIT_RENDEZVOUS, "TCPStore", NULL},
    {HDX_FRAME_NATIVE, "ncclCommInitRank", NULL, HDX_WAIT_RENDEZVOUS, "ncclCommInitRank", NULL},

    /* Point-to-point, from the Python API. */
    {HDX_FRAME_PYTHON, "send", "distributed_c10d.py", HDX_WAIT_P2P_SEND, NULL, "dst"},
    {HDX_FRAME_PYTHON, "recv", "distributed_c10d.py", HDX_WAIT_P2P_RECV, NULL, "src"},
    /* Megatron's pipeline helpers (they batch isend/irecv, then wait). */
    {HDX_FRAME_PYTHON, "recv_forward", "p2p_communication.py", HDX_WAIT_P2P_RECV, NULL, NULL},
    {HDX_FRAME_PYTHON, "recv_backward", "p2p_communication.py", HDX_WAIT_P2P_RECV, NULL, NULL},
    {HDX_FRAME_PYTHON, "send_forward", "p2p_communication.py", HDX_WAIT_P2P_SEND, NULL, NULL},
    {HDX_FRAME_PYTHON, "send_backward", "p2p_communication.py", HDX_WAIT_P2P_SEND, NULL, NULL},
    {HDX_FRAME_PYTHON, "send_forward_recv_backward", "p2p_communication.py", HDX_WAIT_P2P, NULL, NULL},
    {HDX_FRAME_PYTHON, "send_backward_recv_forward", "p2p_communication.py", HDX_WAIT_P2P, NULL, NULL},
    {HDX_FRAME_PYTHON, "send_forward_recv_forward", "p2p_communication.py", HDX_WAIT_P2P, NULL, NULL},
    {HDX_FRAME_PYTHON, "send_backward_recv_backward", "p2p_communication.py", HDX_WAIT_P2P, NULL, NULL},
    {HDX_FRAME_PYTHON, "_communicate", "p2p_communication.py", HDX_WAIT_P2P, NULL, NULL},

    /* Collectives, from the Python API: the frame tells which one. */
    {HDX_FRAME_PYTHON, "all_reduce", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "all_reduce_coalesced", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "all_gather", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "all_gather_into_tensor", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "_all_gather_base", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, "all_gather", NULL},
    {HDX_FRAME_PYTHON, "all_gather_object", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "all_gather_coalesced", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "reduce_scatter", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "reduce_scatter_tensor", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "_reduce_scatter_base", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, "reduce_scatter", NULL},
    {HDX_FRAME_PYTHON, "broadcast", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "broadcast_object_list", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "barrier", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "monitored_barrier", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "reduce", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "gather", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "gather_object", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "scatter", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "scatter_object_list", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "all_to_all", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},
    {HDX_FRAME_PYTHON, "all_to_all_single", "distributed_c10d.py", HDX_WAIT_COLLECTIVE, NULL, NULL},

    /* Native waits: p2p work (isend/irecv then wait, batch_isend_irecv) ... */
    {HDX_FRAME_NATIVE, "ProcessGroupGloo::RecvWork::wait", NULL, HDX_WAIT_P2P_RECV, "irecv.wait", NULL},
    {HDX_FRAME_NATIVE, "UnboundBuffer::waitRecv", NULL, HDX_WAIT_P2P_RECV, "irecv.wait", NULL},
    {HDX_FRAME_NATIVE, "ProcessGroupGloo::SendWork::wait", NULL, HDX_WAIT_P2P_SEND, "isend.wait", NULL},
    {HDX_FRAME_NATIVE, "UnboundBuffer::waitSend", NULL, HDX_WAIT_P2P_SEND, "isend.wait", NULL},
    /* ... and collective work, NCCL's included (a cudaStreamSynchronize under a collective). */
    {HDX_FRAME_NATIVE, "ProcessGroupNCCL::WorkNCCL::wait", NULL, HDX_WAIT_COLLECTIVE, "WorkNCCL.wait", NULL},
    {HDX_FRAME_NATIVE, "ProcessGroupNCCL::WorkNCCL::synchronize", NULL, HDX_WAIT_COLLECTIVE, "WorkNCCL.wait", NULL},
    {HDX_FRAME_NATIVE, "ncclGroupEnd", NULL, HDX_WAIT_COLLECTIVE, "ncclGroupEnd", NULL},
    {HDX_FRAME_NATIVE, "c10d::ProcessGroupNCCL::", NULL, HDX_WAIT_COLLECTIVE, "ProcessGroupNCCL", NULL},
    {HDX_FRAME_NATIVE, "c10d::Work::wait", NULL, HDX_WAIT_COLLECTIVE, "Work.wait", NULL},
    {HDX_FRAME_NATIVE, "c10d::ProcessGroup::Work::wait", NULL, HDX_WAIT_COLLECTIVE, "Work.wait", NULL},
    /* The host waits for the GPU. An NCCL collective returns to Python at once; the rank then
     * blocks at its next sync (.item(), a copy to the host) while the collective's kernel waits
     * for its peers, and CUDA spin-waits there by default: state R, CPU time growing, the
     * same stack (seen on an H200 with torch 2.11: item → _local_scalar_dense_cuda →
     * cudaStreamSynchronize → cuStreamSynchronize). */
    {HDX_FRAME_NATIVE, "cudaStreamSynchronize", NULL, HDX_WAIT_COLLECTIVE, "cudaStreamSynchronize", NULL},
    {HDX_FRAME_NATIVE, "cudaDeviceSynchronize", NULL, HDX_WAIT_COLLECTIVE, "cudaDeviceSynchronize", NULL},
    {HDX_FRAME_NATIVE, "cudaEventSynchronize", NULL, HDX_WAIT_COLLECTIVE, "cudaEventSynchronize", NULL},
    {HDX_FRAME_NATIVE, "cuStreamSynchronize", NULL, HDX_WAIT_COLLECTIVE, "cuStreamSynchronize", NULL},
    {HDX_FRAME_NATIVE, "cuCtxSynchronize", NULL, HDX_WAIT_COLLECTIVE, "cuCtxSynchronize", NULL},
    {HDX_FRAME_NATIVE, "cuEventSynchronize", NULL, HDX_WAIT_COLLECTIVE, "cuEventSynchronize", NULL},

    /* Plain sleeps (a rank that skipped a collective often sits in one). */
    {HDX_FRAME_NATIVE, "time_sleep", NULL, "sleep", "time.sleep", NULL},
};

/* Rows by thread state and current system call, when no frame tells. */
static const struct {
    const char *syscall; /* hdx_syscall_name() of the current call, or NULL for any */
    char state;          /* thread state letter, or 0 for any */
    const char *wait;
} syscall_rows[] = {
    {NULL, 'R', "running"},
    {NULL, 'D', "uninterruptible"},
    {"flock", 0, "kernel_lock"},
    {"fcntl", 0, "kernel_lock"},
    {"clock_nanosleep", 0, "sleep"},
    {"nanosleep", 0, "sleep"},
    {"futex", 0, "futex"},
    {"wait4", 0, "child_wait"},
    {"waitid", 0, "child_wait"},
    {"poll", 0, "io"},
    {"ppoll", 0, "io"},
    {"select", 0, "io"},
    {"pselect6", 0, "io"},
    {"epoll_wait", 0, "io"},
    {"epoll_pwait", 0, "io"},
    {"read", 0, "io"},
    {"recvfrom", 0, "io"},
    {"recvmsg", 0, "io"},
    {"accept", 0, "io"},
    {"accept4", 0, "io"},
};

int hdx_wait_is_background(const char *wait)
{
    static const char *const bg[] = {HDX_WAIT_SERVICE, "sleep", "futex", "io", "running"};
    for (size_t i = 0; i < sizeof bg / sizeof bg[0]; i++)
        if (!strcmp(wait, bg[i]))
            return 1;
    return 0;
}

int hdx_wait_is_p2p(const char *wait)
{
    return wait && (!strcmp(wait, HDX_WAIT_P2P_SEND) || !strcmp(wait, HDX_WAIT_P2P_RECV) || !strcmp(wait, HDX_WAIT_P2P));
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int matches(const struct signature *s, const hdx_frame *f)
{
    if (f->kind != s->kind || !f->function)
        return 0;
    if (s->kind == HDX_FRAME_NATIVE)
        return strstr(f->function, s->function) != NULL;
    return hdx_python_name_matches(f->function, s->function) && f->file && (!s->file || ends_with(f->file, s->file));
}

int hdx_wait_rank_local(const hdx_frame *f, const char *name)
{
    const hdx_local *v = hdx_frame_local(f, name);
    return v && v->kind == HDX_VAL_INT && v->i >= 0 && v->i < (1 << 24) ? (int)v->i : HDX_UNKNOWN;
}

/* The peer of a p2p wait: the signature's local, else the nearest Python frame's src/dst/peer. */
static int find_peer(const hdx_thread *t, const struct signature *s, size_t at)
{
    if (s->peer)
        return hdx_wait_rank_local(&t->frames[at], s->peer);
    const char *first = !strcmp(s->wait, HDX_WAIT_P2P_SEND) ? "dst" : "src";
    static const char *const others[] = {"peer", "src_rank", "dst_rank"};
    for (size_t i = at; i < t->n_frames; i++) {
        if (t->frames[i].kind != HDX_FRAME_PYTHON)
            continue;
        int r = hdx_wait_rank_local(&t->frames[i], first);
        for (size_t k = 0; r == HDX_UNKNOWN && k < sizeof others / sizeof others[0]; k++)
            r = hdx_wait_rank_local(&t->frames[i], others[k]);
        if (r != HDX_UNKNOWN)
            return r;
    }
    return HDX_UNKNOWN;
}

static int set(hdx_thread *t, const char *wait, const char *op, int peer, long frame)
{
    free(t->wait);
    free(t->wait_op);
    t->wait = strdup(wait);
    t->wait_op = op ? strdup(op) : NULL;
    t->wait_peer = peer;
    t->wait_frame = frame;
    return !t->wait || (op && !t->wait_op) ? -ENOMEM : 0;
}

/*
 * The first signature (table order) a frame matches, or -1. Frames loaded from snapshots
 * are pooled: their names are shared pointers, and the 3.3 M frames of an 8192-rank job
 * hold a few thousand distinct (kind, function, file), so the answer is kept per pointer
 * pair in a small direct-mapped cache. The threads of a loaded stack class share one frames
 * array (hdx_thread.shared_frames), so the answer for a whole stack is kept per array too.
 * Pooled memory is only reused after a pool released some (hdx_pool_epoch_moved), and
 * then both caches are emptied.
 */
#define MEMO_SLOTS 4096
static _Thread_local struct memo {
    const char *function, *file;
    int kind, sig;
} memo[MEMO_SLOTS];
static _Thread_local struct stack_memo {
    const hdx_frame *frames;
    size_t n_frames;
    int best;
    size_t at;
} stack_memo[MEMO_SLOTS];
static _Thread_local unsigned long memo_epoch;

static void memo_check_epoch(void)
{
    if (hdx_pool_epoch_moved(&memo_epoch)) {
        memset(memo, 0, sizeof memo);
        memset(stack_memo, 0, sizeof stack_memo);
    }
}

static int first_signature(const hdx_frame *f)
{
    const size_t n = sizeof signatures / sizeof signatures[0];
    struct memo *m = NULL;
    if (f->pooled && f->function) {
        memo_check_epoch();
        uintptr_t h = ((uintptr_t)f->function >> 4) * 0x9E3779B97F4A7C15ULL ^ ((uintptr_t)f->file >> 4) ^ (uintptr_t)f->kind;
        m = &memo[(h >> 20) & (MEMO_SLOTS - 1)];
        if (m->function == f->function && m->file == f->file && m->kind == (int)f->kind)
            return m->sig;
    }
    int sig = -1;
    for (size_t s = 0; s < n && sig < 0; s++)
        if (matches(&signatures[s], f))
            sig = (int)s;
    if (m) {
        m->function = f->function;
        m->file = f->file;
        m->kind = (int)f->kind;
        m->sig = sig;
    }
    return sig;
}

/* The lowest first signature of the stack's frames (-1 none) and the first frame whose first
 * signature it is (*at): that row matches anywhere in the stack, at its innermost frame. */
static int stack_signature(const hdx_thread *t, size_t *at)
{
    struct stack_memo *m = NULL;
    if (t->shared_frames && t->frames) {
        memo_check_epoch();
        m = &stack_memo[hdx_hash_mix((uintptr_t)t->frames) & (MEMO_SLOTS - 1)];
        if (m->frames == t->frames && m->n_frames == t->n_frames) {
            *at = m->at;
            return m->best;
        }
    }
    int best = -1;
    *at = 0;
    for (size_t i = 0; i < t->n_frames; i++) {
        int s = first_signature(&t->frames[i]);
        if (s >= 0 && (best < 0 || s < best)) {
            best = s;
            *at = i;
        }
    }
    if (m)
        *m = (struct stack_memo){t->frames, t->n_frames, best, *at};
    return best;
}

int hdx_wait_classify(hdx_thread *t)
{
    /* A wait its input recorded (evidence.h, wait_pg) stays: the stack is the call's, as the
     * input kept it, and tells less than the record. */
    if (t->wait && t->wait_pg)
        return 0;
    /* A stopped thread waits on whoever stopped it, whatever its stack says. */
    if (t->state == 'T' || t->state == 't')
        return set(t, "stopped", NULL, HDX_UNKNOWN, -1);
    /* Frames: the first row that matches anywhere in the stack wins, at its innermost
     * frame. A frame's first row is the lowest it matches, so that row is the lowest
     * first row of all frames, and its frame the first frame whose first row it is. */
    size_t at;
    int best = stack_signature(t, &at);
    if (best >= 0) {
        const struct signature *sig = &signatures[best];
        int peer = hdx_wait_is_p2p(sig->wait) ? find_peer(t, sig, at) : HDX_UNKNOWN;
        return set(t, sig->wait, sig->op ? sig->op : t->frames[at].function, peer, (long)at);
    }
    const char *sc = t->syscall >= 0 ? hdx_syscall_name(t->syscall) : NULL;
    for (size_t i = 0; i < sizeof syscall_rows / sizeof syscall_rows[0]; i++) {
        if (syscall_rows[i].state && syscall_rows[i].state != t->state)
            continue;
        if (syscall_rows[i].syscall && !(sc && !strcmp(sc, syscall_rows[i].syscall)))
            continue;
        return set(t, syscall_rows[i].wait, NULL, HDX_UNKNOWN, -1);
    }
    return 0;
}
