#!/usr/bin/python3
"""One rank of a real distributed hang, for hangdx's tests.

usage: /usr/bin/python3 hangs.py CASE [--rank R --world-size W --port P] --ready FILE
                                      [--workdir DIR]

Each CASE is a hang that people really hit (see /work/shared/cases/README.md), made with
Debian's python3-torch and the gloo backend on 127.0.0.1. The rank initialises the process
group, does whatever the case needs first (a warm-up collective that completes, say), then
writes FILE (atomically; `{rank}` in FILE is replaced by the rank) just before it enters the
call that never returns, and blocks there. Every wait happens in a well-named function so
that Python stacks show it: train_step -> all_reduce, recv_activations -> recv,
send_activations -> send, recv_prev_stage -> Work.wait, skip_and_sleep -> time.sleep, ...

The rank variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
must be in the process's own environment, where hangdx reads them (/proc/PID/environ): the
launcher (launch.py, or torchrun) passes them. When they are missing or disagree with the
options, the script re-executes itself with them set, so they are there in any case. Without
--rank the script takes everything from the environment (torchrun mode).

SIGUSR1 dumps every Python thread's stack to stderr (faulthandler) and the rank carries on
waiting: launch.Job.python_stacks() uses it. The rank dies with its parent (PR_SET_PDEATHSIG),
so a crashed test leaves no ranks behind.
"""

import argparse
import ctypes
import faulthandler
import os
import signal
import sys
import time
from datetime import timedelta

CASES = {}  # name -> function(ctx)
PG_TIMEOUT = timedelta(hours=1)  # nothing may time out while a test looks at the hang


def case(fn):
    CASES[fn.__name__[len("case_"):]] = fn
    return fn


# ----------------------------------------------------------------- process set-up

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world-size", type=int)
    ap.add_argument("--port", type=int)
    ap.add_argument("--ready", required=True, help="file to write when about to block ({rank} allowed)")
    ap.add_argument("--workdir", help="scratch directory of the job (default: the ready file's)")
    return ap.parse_args(argv)


def rank_environment(a):
    """The rank variables this process must have in its environment."""
    return {
        "RANK": str(a.rank),
        "LOCAL_RANK": str(a.rank),  # one host
        "WORLD_SIZE": str(a.world_size),
        "LOCAL_WORLD_SIZE": str(a.world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(a.port),
    }


def ensure_environment(a):
    """Fill in a's rank, world size and port, and make sure the rank variables are in this
    process's environment from its start (re-exec when they are not)."""
    if a.rank is None:  # torchrun mode: everything from the environment
        try:
            a.rank = int(os.environ["RANK"])
            a.world_size = int(os.environ["WORLD_SIZE"])
            a.port = int(os.environ["MASTER_PORT"])
        except (KeyError, ValueError):
            sys.exit("hangs.py: give --rank, --world-size and --port, or run under a launcher that sets "
                     "RANK, WORLD_SIZE and MASTER_PORT")
        return
    if a.world_size is None or a.port is None:
        sys.exit("hangs.py: --rank needs --world-size and --port")
    want = rank_environment(a)
    if any(os.environ.get(k) != v for k, v in want.items()):
        env = dict(os.environ, **want)
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def die_with_parent():
    """Ask the kernel to kill this rank when its parent goes (no stray ranks after a crash)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the prctl
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
    dist.init_process_group("gloo", init_method="env://", rank=ctx.rank,
                            world_size=ctx.world_size, timeout=PG_TIMEOUT)


# ----------------------------------------------------------------- the waits, by name

def train_step(grad):
    """One training step's gradient all-reduce."""
    dist.all_reduce(grad)
    return grad


def finish_epoch():
    """Every rank meets at the end of the epoch."""
    dist.barrier()


def wait_for_checkpoint():
    """Non-zero ranks wait until rank 0 has written the checkpoint."""
    dist.barrier()


def wait_for_fused_kernels():
    """Megatron's pattern: rank 0 builds the fused kernels, the others wait, then load them."""
    dist.barrier()


def skip_and_sleep():
    """The culprit: it never joins, and stays alive (with gloo, an exit makes the peers fail
    fast with 'Connection closed by peer' instead of hanging)."""
    while True:
        time.sleep(1.0)


def recv_activations(buf, src):
    dist.recv(buf, src=src)
    return buf


def send_activations(buf, dst):
    dist.send(buf, dst=dst)


def recv_prev_stage(buf, src):
    """Non-blocking receive from the previous pipeline stage, then wait for it."""
    req = dist.irecv(buf, src=src)
    req.wait()
    return buf


def recv_batched(buf, peer):
    """A batched receive (the way Megatron's p2p_communication posts its ops), then wait."""
    ops = [dist.P2POp(dist.irecv, buf, peer)]
    reqs = dist.batch_isend_irecv(ops)
    for req in reqs:
        req.wait()
    return buf


def join_process_group(ctx):
    """Rendezvous through the TCPStore at MASTER_ADDR:MASTER_PORT."""
    init(ctx)


def compute_forward(x, w):
    for _ in range(8):
        x = torch.tanh(x @ w)
    return x


def train_loop(ctx, on_first_sync):
    x = torch.randn(192, 192)
    w = torch.randn(192, 192) / 14.0
    step = 0
    while True:
        x = compute_forward(x, w)
        step += 1
        if step % 50 == 0:
            loss = x.abs().mean().reshape(1)
            train_step(loss)  # completes: every rank gets here
            if step == 50:
                on_first_sync()


def load_fused_kernels(ctx):
    """Rank 0 JIT-builds the fused kernels (a stale `lock` in the build dir stops it forever)."""
    build = os.path.join(ctx.workdir, "fused_kernels", "build")
    src = os.path.join(ctx.workdir, "fused_kernels", "hdx_fused_tiny.cpp")
    return cpp_extension.load(name="hdx_fused_tiny", sources=[src], build_directory=build, verbose=True)


# ----------------------------------------------------------------- the cases

@case
def case_collective_skip(ctx):
    """C1: 3 ranks; rank 2 skips all_reduce and sleeps; 0 and 1 wait in all_reduce."""
    grad = torch.ones(1024)
    train_step(grad)  # a step every rank takes
    if ctx.rank == 2:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    ctx.ready("train_step/all_reduce")
    train_step(grad)


@case
def case_barrier_skip(ctx):
    """C2: 4 ranks; rank 0 skips the barrier that the others wait in."""
    grad = torch.ones(16)
    train_step(grad)
    if ctx.rank == 0:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    ctx.ready("wait_for_checkpoint/barrier")
    wait_for_checkpoint()


@case
def case_uneven(ctx):
    """C3: rank 1 has one batch fewer: it leaves the loop for the final barrier while the
    others all_reduce their last batch."""
    batches = 3 if ctx.rank == 1 else 4
    grad = torch.ones(256)
    for i in range(batches):
        if i == 3:
            ctx.ready("train_step/all_reduce")
        train_step(grad)
    ctx.ready("finish_epoch/barrier")
    finish_epoch()


@case
def case_both_recv(ctx):
    """P1: 2 stages that both recv from each other."""
    buf = torch.zeros(1024)
    ctx.ready("recv_activations/recv")
    recv_activations(buf, src=1 - ctx.rank)


@case
def case_both_send(ctx):
    """P2: 2 stages that both send to each other first (gloo send waits for the recv)."""
    buf = torch.ones(1024)
    ctx.ready("send_activations/send")
    send_activations(buf, dst=1 - ctx.rank)
    recv_activations(buf, src=1 - ctx.rank)


@case
def case_send_no_recv(ctx):
    """P3: stage 0 sends to 1; stage 1 never receives and sleeps."""
    buf = torch.ones(1024)
    if ctx.rank == 1:
        ctx.ready("skip_and_sleep")
        skip_and_sleep()
    ctx.ready("send_activations/send")
    send_activations(buf, dst=1)


@case
def case_ring_irecv(ctx):
    """P4: 3 stages, each irecv from the previous one and wait: a cycle 0->1->2->0."""
    buf = torch.zeros(1024)
    ctx.ready("recv_prev_stage/irecv.wait")
    recv_prev_stage(buf, src=(ctx.rank - 1) % ctx.world_size)


@case
def case_batch_p2p(ctx):
    """2 ranks, each a batch_isend_irecv of one irecv from the other, then wait."""
    buf = torch.zeros(1024)
    ctx.ready("recv_batched/batch_isend_irecv.wait")
    recv_batched(buf, peer=1 - ctx.rank)


@case
def case_rendezvous_missing(ctx):
    """R1: WORLD_SIZE=3 but only ranks 0 and 1 start: both wait in init_process_group."""
    ctx.ready("join_process_group/init_process_group")
    join_process_group(ctx)
    raise SystemExit(f"rank {ctx.rank}: init_process_group returned with a rank missing")


@case
def case_computing(ctx):
    """Not hung: every rank multiplies matrices, with an all_reduce every 50 steps."""
    train_loop(ctx, on_first_sync=lambda: ctx.ready("train_loop/computing"))


@case
def case_lock_behind_barrier(ctx):
    """Rank 0 waits forever on a stale FileBaton lock in the build dir; ranks 1.. wait in the
    barrier after which they would load the kernels."""
    if ctx.rank == 0:
        ctx.ready("load_fused_kernels/FileBaton.wait")
        load_fused_kernels(ctx)
    else:
        ctx.ready("wait_for_fused_kernels/barrier")
    wait_for_fused_kernels()


NO_INIT = {"rendezvous_missing"}  # cases that initialise the process group themselves


def main(argv):
    a = parse_args(argv)
    if a.case not in CASES:
        sys.exit(f"hangs.py: unknown case {a.case!r}; known: {', '.join(sorted(CASES))}")
    ensure_environment(a)
    die_with_parent()
    faulthandler.enable()  # a crash (SIGABRT from gloo, say) leaves its stack in the log
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    global torch, dist, cpp_extension
    import torch
    import torch.distributed as dist
    if a.case == "lock_behind_barrier":
        from torch.utils import cpp_extension
    torch.set_num_threads(1)  # 2 cores, dozens of ranks: no intra-op thread pools

    ctx = Ctx(a)
    if a.case not in NO_INIT:
        init(ctx)
    CASES[a.case](ctx)
    sys.exit(f"rank {ctx.rank}: case {a.case} returned; it should have hung")


if __name__ == "__main__":
    main(sys.argv[1:])
