#!/usr/bin/python3
"""One rank of a real hang in a job with process groups (3D parallelism), for hangdx's tests.

usage: /usr/bin/python3 pgroups.py CASE [--rank R --world-size W --port P] --ready FILE
                                        [--workdir DIR]

Like hangs.py (same options, same ready-file protocol, same environment), but every case
makes torch.distributed subgroups, most of them the way Megatron-LM's parallel_state does
(megatron_standin/ is put on sys.path: `megatron.core.parallel_state` with Megatron's module
globals, `megatron.core.pipeline_parallel.p2p_communication._communicate`), and hangs in one
of them while the other ranks wait in theirs. Every rank calls new_group for every group, in
the same order (torch 1.13's new_group is collective over the world). Megatron's rank order:
tensor-parallel innermost, then data-parallel, then pipeline,
    rank = pp_rank * (tp * dp) + dp_rank * tp + tp_rank.
pgroup_cases.py says what each case makes and what hangdx must conclude.

The rank writes FILE ({rank} replaced) just before the call that never returns. Each wait
is in a well-named function: tp_all_gather -> all_gather, dp_all_reduce_grads -> all_reduce,
step_barrier -> barrier, recv_forward -> _communicate (Work.wait), skip_and_sleep ->
time.sleep, ... SIGUSR1 dumps every thread's Python stack to stderr (faulthandler) and the
rank goes on waiting. The rank dies with its parent (PR_SET_PDEATHSIG). Process groups time
out after an hour.

dead_rank's rank 1 starts a socket holder first (spawn_socket_holder): gloo's peers notice a
dead rank at once on one host (its sockets close: 'Connection closed by peer') and fail,
where across hosts a node that vanishes (power, kernel panic, network) sends nothing and its
peers wait for ever. The holder keeps the rank's sockets open after the test SIGKILLs it, so
ranks 0 and 2 go on waiting as they would for a vanished node. It is no rank (no rank
variables in its environment, its own command line), stays in rank 1's process group (the
launcher's stop kills it) and leaves when the launcher goes.
"""

import argparse
import ctypes
import faulthandler
import fcntl
import os
import signal
import sys
import time
from contextlib import contextmanager
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "megatron_standin")
PG_TIMEOUT = timedelta(hours=1)  # nothing may time out while a test looks at the hang
CASES = {}  # name -> function(ctx)
HOLDER_PID_FILE = "socket-holder.pid"


def case(fn):
    CASES[fn.__name__[len("case_"):]] = fn
    return fn


# ----------------------------------------------------------------- process set-up (as hangs.py)

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world-size", type=int)
    ap.add_argument("--port", type=int)
    ap.add_argument("--ready", required=True, help="file to write when about to block ({rank} allowed)")
    ap.add_argument("--workdir", help="scratch directory of the job (default: the ready file's)")
    return ap.parse_args(argv)


def ensure_environment(a):
    """Fill in a's rank, world size and port; make sure the rank variables are in this
    process's own environment (/proc/PID/environ, where hangdx reads them): re-exec if not."""
    if a.rank is None:  # torchrun mode
        try:
            a.rank, a.world_size, a.port = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "MASTER_PORT"))
        except (KeyError, ValueError):
            sys.exit("pgroups.py: give --rank, --world-size and --port, or run under a launcher that sets "
                     "RANK, WORLD_SIZE and MASTER_PORT")
        return
    if a.world_size is None or a.port is None:
        sys.exit("pgroups.py: --rank needs --world-size and --port")
    want = {"RANK": str(a.rank), "LOCAL_RANK": str(a.rank), "WORLD_SIZE": str(a.world_size),
            "LOCAL_WORLD_SIZE": str(a.world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(a.port)}
    if any(os.environ.get(k) != v for k, v in want.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **want))


def die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        os._exit(1)


class Ctx:
    def __init__(self, a):
        self.case = a.case
        self.rank = a.rank
        self.world_size = a.world_size
        self.ready_path = a.ready.replace("{rank}", str(a.rank))
        self.workdir = a.workdir or os.path.dirname(os.path.abspath(self.ready_path))

    def ready(self, what):
        """Say that this rank is about to block in `what` (the test waits for this file)."""
        tmp = f"{self.ready_path}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()} {what}\n")
        os.rename(tmp, self.ready_path)
        print(f"rank {self.rank}: {what}", file=sys.stderr, flush=True)


def init(ctx):
    dist.init_process_group("gloo", init_method="env://", rank=ctx.rank, world_size=ctx.world_size,
                            timeout=PG_TIMEOUT)


def megatron(tp, pp):
    """initialize_model_parallel of the stand-in (groups with an hour's timeout)."""
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                                             distributed_timeout_minutes=60)


def new_group(ranks):
    return dist.new_group(ranks, timeout=PG_TIMEOUT)


@contextmanager
def cuda_claimed():
    """torch 1.13's new_subgroups and new_subgroups_by_enumeration refuse to run without CUDA
    ('Subgroups can only be created when CUDA is available') though, given the ranks, they
    only call new_group: let them think CUDA is there while they run."""
    real = torch.cuda.is_available
    torch.cuda.is_available = lambda: True
    try:
        yield
    finally:
        torch.cuda.is_available = real


def spawn_socket_holder(ctx):
    """A process that keeps this rank's file descriptors (its gloo and TCPStore sockets) open
    after the rank dies: a forked child that clears FD_CLOEXEC on every descriptor and execs
    a small Python loop, without the rank variables. It leaves when the launcher (this
    rank's parent) is gone, or after two hours. Its pid goes to workdir/socket-holder.pid."""
    launcher = os.getppid()
    code = ("import os, sys, time\n"
            "launcher, t0 = int(sys.argv[2]), time.monotonic()\n"
            "while os.path.exists(f'/proc/{launcher}') and time.monotonic() - t0 < 7200:\n"
            "    time.sleep(1)\n")
    pid = os.fork()
    if pid == 0:
        try:
            for name in os.listdir("/proc/self/fd"):
                fd = int(name)
                try:
                    fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.fcntl(fd, fcntl.F_GETFD) & ~fcntl.FD_CLOEXEC)
                except OSError:
                    pass
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
            os.execve(sys.executable, [sys.executable, "-c", code, "hdx-socket-holder", str(launcher)], env)
        finally:
            os._exit(127)
    with open(os.path.join(ctx.workdir, HOLDER_PID_FILE), "w") as f:
        f.write(f"{pid}\n")
    return pid


# ----------------------------------------------------------------- the waits, by name

def skip_and_sleep():
    """The culprit: it never joins, and stays alive."""
    while True:
        time.sleep(1.0)


def slow_data_loader():
    """The next batch never comes (a stuck reader, a dead file system)."""
    while True:
        time.sleep(1.0)


def forward_step():
    """A long forward pass; dead_rank's test SIGKILLs the rank here (the OOM killer, say)."""
    while True:
        time.sleep(1.0)


def warm_up():
    """A world all-reduce that every rank takes: the job ran fine until the hang."""
    t = torch.ones(8)
    dist.all_reduce(t)


def all_gather_shards(x, group):
    out = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, x, group=group)
    return out


def tp_all_gather(x):
    """Tensor-parallel all-gather of the activations (sequence parallelism's gather)."""
    group = parallel_state.get_tensor_model_parallel_group()
    out = [torch.empty_like(x) for _ in range(parallel_state.get_tensor_model_parallel_world_size())]
    dist.all_gather(out, x, group=group)
    return out


def tp_broadcast(x):
    """Broadcast from tensor-parallel rank 0 (Megatron's broadcast_data of a batch)."""
    dist.broadcast(x, src=parallel_state.get_tensor_model_parallel_src_rank(),
                   group=parallel_state.get_tensor_model_parallel_group())
    return x


def dp_all_reduce_grads(grad):
    """The data-parallel gradient all-reduce."""
    dist.all_reduce(grad, group=parallel_state.get_data_parallel_group())
    return grad


def subgroup_all_reduce(t, group):
    dist.all_reduce(t, group=group)
    return t


def step_barrier():
    """Every rank of the job meets at the end of the step."""
    dist.barrier()


def gather_metrics(t, dst):
    """Rank dst collects everyone's metrics."""
    gather_list = [torch.empty_like(t) for _ in range(dist.get_world_size())] if dist.get_rank() == dst else None
    dist.gather(t, gather_list, dst=dst)


def scatter_shards(t, src):
    """Rank src hands every rank its shard."""
    scatter_list = [torch.full_like(t, r) for r in range(dist.get_world_size())] if dist.get_rank() == src else None
    dist.scatter(t, scatter_list, src=src)
    return t


def send_activations_blocking(buf, dst, group):
    """Stage 0's forward send, blocking (gloo's send returns once the peer has received)."""
    dist.send(buf, dst=dst, group=group)


def send_grads_blocking(buf, dst, group):
    """Stage 1's backward send of the input gradients, blocking."""
    dist.send(buf, dst=dst, group=group)


def recv_activations_blocking(buf, src, group):
    dist.recv(buf, src=src, group=group)
    return buf


def send_tagged(buf, dst, tag, group):
    dist.send(buf, dst=dst, group=group, tag=tag)


def recv_tagged(buf, src, tag, group):
    dist.recv(buf, src=src, group=group, tag=tag)
    return buf


def train_step(grad):
    """One training step's gradient all-reduce over the world."""
    dist.all_reduce(grad)
    return grad


# ----------------------------------------------------------------- the cases

ACT = (4, 2, 8)  # (sequence, micro-batch, hidden) of the activations between stages


@case
def case_subgroups(ctx):
    """4 ranks, plain groups {0,1} and {2,3}. Rank 3 never joins its group's all_gather and
    sleeps; rank 2 waits in it; ranks 0 and 1 finish theirs and wait in the world barrier."""
    g01, g23 = new_group([0, 1]), new_group([2, 3])
    mine = g01 if ctx.rank < 2 else g23
    warm_up()
    x = torch.full((16,), float(ctx.rank))
    if ctx.rank == 3:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    if ctx.rank == 2:
        ctx.ready("all_gather_shards/all_gather")
    all_gather_shards(x, mine)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_tp_dp_world(ctx):
    """8 ranks, TP=2 PP=2 DP=2 (stand-in parallel_state). Each rank: TP all-gather, DP
    all-reduce, world barrier. Rank 5 skips its TP all-gather and sleeps; rank 4 waits in
    TP [4,5]; ranks 6 and 7 wait in their DP all-reduce ([4,6], [5,7]); ranks 0-3 finish
    both and wait in the world barrier."""
    megatron(tp=2, pp=2)
    warm_up()
    x, grad = torch.full((16,), float(ctx.rank)), torch.ones(64)
    if ctx.rank == 5:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    if ctx.rank == 4:
        ctx.ready("tp_all_gather/all_gather")
    tp_all_gather(x)
    if ctx.rank in (6, 7):
        ctx.ready("dp_all_reduce_grads/all_reduce")
    dp_all_reduce_grads(grad)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_peer_moved_on(ctx):
    """4 ranks, TP=2 DP=2 PP=1. Rank 1 skips its TP all-gather and goes on: its DP all-reduce
    with rank 3 completes, then it waits in the world barrier. Rank 0 waits in TP [0,1];
    rank 2 (DP partner of 0, DP [0,2]) in the DP all-reduce; rank 3 in the world barrier."""
    megatron(tp=2, pp=1)
    warm_up()
    x, grad = torch.full((16,), float(ctx.rank)), torch.ones(64)
    if ctx.rank != 1:  # rank 1 takes the branch without sequence parallelism's gather
        if ctx.rank == 0:
            ctx.ready("tp_all_gather/all_gather")
        tp_all_gather(x)
    if ctx.rank == 2:
        ctx.ready("dp_all_reduce_grads/all_reduce")
    dp_all_reduce_grads(grad)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_pipeline_behind_tp(ctx):
    """4 ranks, TP=2 PP=2 DP=1. Stage 0 (ranks 0, 1): next batch, TP all-gather, send_forward;
    stage 1 (ranks 2, 3): recv_forward. Rank 0 never gets its batch (sleeps); rank 1 waits in
    TP [0,1]; ranks 2 and 3 wait in recv_forward from 0 and 1 (PP [0,2], [1,3])."""
    from megatron.core.pipeline_parallel import p2p_communication
    megatron(tp=2, pp=2)
    warm_up()
    if parallel_state.is_pipeline_first_stage():
        if ctx.rank == 0:
            ctx.ready("slow_data_loader")
            slow_data_loader()
        ctx.ready("tp_all_gather/all_gather")
        tp_all_gather(torch.ones(ACT))
        p2p_communication.send_forward(torch.ones(ACT))
    else:
        ctx.ready("recv_forward/_communicate")
        p2p_communication.recv_forward(ACT)
    step_barrier()


@case
def case_tp_mismatch(ctx):
    """4 ranks, TP=2 DP=2 PP=1. In TP group [2,3] rank 2 all-gathers while rank 3
    broadcasts (from TP rank 0, rank 2): each waits for the other in a different collective.
    Ranks 0 and 1 all-gather in TP [0,1], then wait in the world barrier."""
    megatron(tp=2, pp=1)
    warm_up()
    x = torch.full((16,), float(ctx.rank))
    if ctx.rank == 3:
        ctx.ready("tp_broadcast/broadcast")
        tp_broadcast(x)
    else:
        if ctx.rank == 2:
            ctx.ready("tp_all_gather/all_gather")
        tp_all_gather(x)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_pp_cycle(ctx):
    """4 ranks, TP=1 PP=2 DP=2: PP [0,2], [1,3]; DP [0,1], [2,3]. In pipeline [0,2] both
    stages send first with a blocking send (0 its activations, 2 its gradients): a cycle.
    Pipeline [1,3] goes right (1 sends, 3 receives); then 1 and 3 wait in their DP all-reduce
    for 0 and 2."""
    megatron(tp=1, pp=2)
    warm_up()
    pp_group = parallel_state.get_pipeline_model_parallel_group()
    buf = torch.ones(ACT)
    if ctx.rank == 0:
        ctx.ready("send_activations_blocking/send")
        send_activations_blocking(buf, parallel_state.get_pipeline_model_parallel_next_rank(), pp_group)
    elif ctx.rank == 2:
        ctx.ready("send_grads_blocking/send")
        send_grads_blocking(buf, parallel_state.get_pipeline_model_parallel_prev_rank(), pp_group)
    elif ctx.rank == 1:
        send_activations_blocking(buf, parallel_state.get_pipeline_model_parallel_next_rank(), pp_group)
    else:
        recv_activations_blocking(buf, parallel_state.get_pipeline_model_parallel_prev_rank(), pp_group)
    ctx.ready("dp_all_reduce_grads/all_reduce")
    dp_all_reduce_grads(torch.ones(64))
    step_barrier()


@case
def case_batched_p2p(ctx):
    """4 ranks, TP=1 PP=2 DP=2, Megatron's batched p2p (stand-in _communicate). In pipeline
    [0,2] stage 0 sends 4 micro-batches and stage 1 receives 3, then waits in the world
    barrier; pipeline [1,3] passes all 4 and waits in the barrier. Rank 0 waits in its 4th
    send_forward."""
    from megatron.core.pipeline_parallel import p2p_communication
    megatron(tp=1, pp=2)
    warm_up()
    micro_batches = 3 if ctx.rank == 2 else 4
    for i in range(micro_batches):
        if parallel_state.is_pipeline_first_stage():
            if ctx.rank == 0 and i == 3:
                ctx.ready("send_forward/_communicate")
            p2p_communication.send_forward(torch.full(ACT, float(i)))
        else:
            p2p_communication.recv_forward(ACT)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_unsorted_subgroups(ctx):
    """4 ranks; groups given unsorted: new_group([3,1]) and new_group([2,0]), new_subgroups
    (group_size 2: [0,1], [2,3]) and new_subgroups_by_enumeration([[3,0],[2,1]]) ([0,3],
    [1,2]). Every rank all-reduces in its pair and its node subgroup, then in its enumerated
    subgroup: there rank 2 skips and sleeps, rank 1 waits in [1,2]; ranks 0 and 3 finish
    [0,3] and wait in the world barrier."""
    pairs = [new_group([3, 1]), new_group([2, 0])]
    with cuda_claimed():
        node, _ = dist.new_subgroups(group_size=2, timeout=PG_TIMEOUT)
        enumerated, _ = dist.new_subgroups_by_enumeration([[3, 0], [2, 1]], timeout=PG_TIMEOUT)
    pair = pairs[0] if ctx.rank in (1, 3) else pairs[1]
    warm_up()
    t = torch.ones(32)
    subgroup_all_reduce(t, pair)
    subgroup_all_reduce(t, node)
    if ctx.rank == 2:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    if ctx.rank == 1:
        ctx.ready("subgroup_all_reduce/all_reduce")
    subgroup_all_reduce(t, enumerated)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_gather_skip(ctx):
    """3 ranks: gather to rank 0, then the world barrier. Rank 2 skips the gather and
    sleeps; rank 0 waits in the gather for it; rank 1 has sent its part (gloo: a non-root
    rank leaves the gather once the root took its data) and waits in the barrier."""
    warm_up()
    t = torch.full((8,), float(ctx.rank))
    if ctx.rank == 2:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    if ctx.rank == 0:
        ctx.ready("gather_metrics/gather")
    gather_metrics(t, dst=0)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_scatter_skip(ctx):
    """3 ranks: scatter from rank 0, then the world barrier. Rank 2 skips the scatter and
    sleeps; rank 0 waits in the scatter (its send to 2 is never taken); rank 1 got its
    shard, left the scatter and waits in the barrier."""
    warm_up()
    t = torch.zeros(8)
    if ctx.rank == 2:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    if ctx.rank == 0:
        ctx.ready("scatter_shards/scatter")
    scatter_shards(t, src=0)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_order_cycle(ctx):
    """4 ranks; groups A = [0,1], B = [1,2], C = [0,2]. Each of ranks 0-2 all-reduces in
    its two groups, in an order that closes a cycle: rank 0 A then C, rank 1 B then A,
    rank 2 C then B. 0 waits in A for 1, 1 in B for 2, 2 in C for 0. Rank 3 waits in the
    world barrier."""
    a, b, c = new_group([0, 1]), new_group([1, 2]), new_group([0, 2])
    order = {0: (a, c), 1: (b, a), 2: (c, b), 3: ()}[ctx.rank]
    warm_up()
    t = torch.ones(32)
    for i, g in enumerate(order):
        if i == 0:
            ctx.ready("subgroup_all_reduce/all_reduce")
        subgroup_all_reduce(t, g)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_tag_mismatch(ctx):
    """3 ranks, a pair group [0,1]: rank 0 sends with tag 1, rank 1 receives from 0 with
    tag 2; neither matches. Rank 2 waits in the world barrier."""
    pair = new_group([0, 1])
    warm_up()
    buf = torch.ones(ACT)
    if ctx.rank == 0:
        ctx.ready("send_tagged/send")
        send_tagged(buf, dst=1, tag=1, group=pair)
    elif ctx.rank == 1:
        ctx.ready("recv_tagged/recv")
        recv_tagged(buf, src=0, tag=2, group=pair)
    ctx.ready("step_barrier/barrier")
    step_barrier()


@case
def case_dead_rank(ctx):
    """3 ranks: ranks 0 and 2 wait in the world all-reduce; rank 1 is in a long forward
    step, where the test SIGKILLs it (its socket holder keeps the peers waiting)."""
    warm_up()
    grad = torch.ones(1024)
    if ctx.rank == 1:
        spawn_socket_holder(ctx)
        ctx.ready("forward_step")
        forward_step()
    ctx.ready("train_step/all_reduce")
    train_step(grad)


def main(argv):
    a = parse_args(argv)
    if a.case not in CASES:
        sys.exit(f"pgroups.py: unknown case {a.case!r}; known: {', '.join(sorted(CASES))}")
    ensure_environment(a)
    die_with_parent()
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    global torch, dist, parallel_state
    sys.path.insert(0, STANDIN)
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state
    torch.set_num_threads(1)

    ctx = Ctx(a)
    init(ctx)
    CASES[a.case](ctx)
    sys.exit(f"rank {ctx.rank}: case {a.case} returned; it should have hung")


if __name__ == "__main__":
    main(sys.argv[1:])
