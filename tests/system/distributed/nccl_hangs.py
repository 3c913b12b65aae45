#!/usr/bin/env python3
"""One rank of a real NCCL hang, for recording hangdx's NCCL fixtures on a GPU machine.

usage: python3 nccl_hangs.py CASE --ready FILE      (rank variables from the environment:
                                                    RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

The machine that records them has one GPU, so every case keeps at most one rank per job on it
(NCCL refuses two ranks of one communicator on the same device, see `same_gpu`):

  comm_init   2 ranks. Rank 0 all-reduces a CUDA tensor, which creates the NCCL communicator
              (lazily, at the first collective); rank 1 never calls all_reduce and sleeps.
              Rank 0 hangs in NCCL's communicator init, waiting for rank 1 to connect.
  eager_init  2 ranks. Rank 0 passes device_id to init_process_group, which creates the NCCL
              communicator at once; rank 1 joins the store without one and sleeps. Rank 0
              hangs in init_process_group's communicator init.
  missing     World size 2, only rank 0 started: it waits in init_process_group's TCPStore
              rendezvous for rank 1.
  gpu_stuck   World size 1, a 60 s process-group timeout. A kernel that spins for minutes
              (torch.cuda._sleep) runs before an all_reduce, and the host waits for the
              result: cudaStreamSynchronize under the collective, until NCCL's watchdog
              times the collective out (its log line) and tears the process down.
  same_gpu    2 ranks on the one GPU, a warm-up all_reduce, then rank 1 skips the second and
              rank 0 waits for its result (cudaStreamSynchronize). Recorded for whatever NCCL
              does with two ranks on one device (it may refuse them at init).

Each rank writes FILE ({rank} replaced) just before the call that never returns. SIGUSR1 makes
it print every Python thread's stack (faulthandler), the ground truth for the fixtures. It dies
with its parent (PR_SET_PDEATHSIG).
"""

import argparse
import ctypes
import faulthandler
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

PG_TIMEOUT = timedelta(hours=1)  # nothing may time out while the recorder looks at the hang


def ready(path, what):
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {what}\n")
    os.rename(path + ".tmp", path)
    print(f"rank {os.environ['RANK']}: {what}", file=sys.stderr, flush=True)


def skip_and_sleep():
    """The culprit: it never joins, and stays alive."""
    while True:
        time.sleep(3600)


def train_step(grad):
    """One training step's gradient all-reduce."""
    dist.all_reduce(grad)
    return grad


def wait_for_result(grad):
    """The host waits for the collective's result (cudaStreamSynchronize under .item())."""
    return grad.sum().item()


def join_process_group(device_id=None, timeout=PG_TIMEOUT):
    """Rendezvous through the TCPStore at MASTER_ADDR:MASTER_PORT."""
    kw = {"device_id": device_id} if device_id is not None else {}
    dist.init_process_group("nccl", init_method="env://", timeout=timeout, **kw)


def case_comm_init(rank, ready_path):
    join_process_group()
    if rank == 1:
        ready(ready_path, "skip_and_sleep")
        skip_and_sleep()
    grad = torch.ones(1024, device="cuda:0")
    ready(ready_path, "train_step -> all_reduce (NCCL communicator init)")
    train_step(grad)
    wait_for_result(grad)


def case_eager_init(rank, ready_path):
    if rank == 1:
        join_process_group()
        ready(ready_path, "skip_and_sleep")
        skip_and_sleep()
    torch.cuda.set_device(0)
    ready(ready_path, "join_process_group (eager NCCL communicator init)")
    join_process_group(device_id=torch.device("cuda:0"))


def case_missing(rank, ready_path):
    ready(ready_path, "join_process_group (TCPStore rendezvous)")
    join_process_group()


def case_gpu_stuck(rank, ready_path):
    torch.cuda.set_device(0)
    join_process_group(timeout=timedelta(seconds=60))
    grad = torch.ones(1024, device="cuda:0")
    train_step(grad)
    wait_for_result(grad)  # warm-up: creates the communicator, completes
    torch.cuda._sleep(2 ** 40)  # about 9 minutes of GPU clock cycles at 2 GHz
    ready(ready_path, "train_step -> wait_for_result (cudaStreamSynchronize behind a stuck kernel)")
    train_step(grad)
    wait_for_result(grad)


def case_same_gpu(rank, ready_path):
    torch.cuda.set_device(0)
    join_process_group()
    grad = torch.ones(1024, device="cuda:0")
    train_step(grad)
    wait_for_result(grad)  # warm-up: both ranks, completes if NCCL accepts them
    if rank == 1:
        ready(ready_path, "skip_and_sleep")
        skip_and_sleep()
    ready(ready_path, "train_step -> wait_for_result (cudaStreamSynchronize)")
    train_step(grad)
    wait_for_result(grad)


CASES = {"comm_init": case_comm_init, "eager_init": case_eager_init,
         "missing": case_missing, "gpu_stuck": case_gpu_stuck, "same_gpu": case_same_gpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--ready", required=True)
    a = ap.parse_args()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    rank = int(os.environ["RANK"])
    CASES[a.case](rank, a.ready.replace("{rank}", str(rank)))
    print(f"rank {rank}: the case returned: it did not hang", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
