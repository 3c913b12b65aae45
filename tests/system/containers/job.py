#!/usr/bin/python3
"""The processes of the container tests, run INSIDE the Debian 13 root by its own Python
(CPython 3.13, torch 2.6). The test copies this file into its job directory (bound inside
under /mnt) and runs it there, so the Python frames hangdx reads name this file as the
processes see it (/mnt/.../job.py). Lines the tests check carry "# @name" markers.

    job.py rank               one rank of the 3-rank gloo hang (RANK, WORLD_SIZE,
                              MASTER_ADDR, MASTER_PORT from the environment): a warm-up
                              all_reduce, then rank $HDX_CULPRIT sleeps in skip_and_sleep
                              and the others wait in train_step -> all_reduce
    job.py launch N           a launcher (a pod's torchrun): starts ranks 0..N-1 of
                              `job.py rank` with their rank variables, reaps them
    job.py init               a container's init: sleeps and reaps (docker --init's tini)
    job.py park               a thread parked in Event.wait, the main thread in time.sleep,
                              with locals of known values (for `hangdx dump --locals`)
    job.py fl_hold PATH       takes filelock.FileLock(PATH) and sleeps holding it
    job.py fl_wait PATH       blocks acquiring filelock.FileLock(PATH)
    job.py load BUILD NAME SRC  torch.utils.cpp_extension.load of SRC into BUILD

Each writes $HDX_JOB_DIR/ready-<tag>.json ({"pid", "tids", ...}, pids as seen inside)
just before it blocks; <tag> is $HDX_TAG, else the mode (with the rank for `rank`).
"""
import ctypes
import json
import os
import signal
import sys
import threading
import time

JOB_DIR = os.environ.get("HDX_JOB_DIR", os.path.dirname(os.path.abspath(__file__)))
libc = ctypes.CDLL(None, use_errno=True)


def ready(tag, **info):
    info.setdefault("pid", os.getpid())
    info.setdefault("tid", threading.get_native_id())
    path = os.path.join(JOB_DIR, f"ready-{os.environ.get('HDX_TAG') or tag}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(info, f)
    os.rename(path + ".tmp", path)
    print(f"ready {tag}: {info}", file=sys.stderr, flush=True)


def die_with_parent():
    """Die when the parent goes (pid 1 of a pid namespace has none to watch)."""
    if os.getpid() != 1:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def sleep_forever():
    while True:
        time.sleep(3600)


# ----------------------------------------------------------------- the gloo hang

def train_step(dist, grad):
    """One training step's gradient all-reduce."""
    dist.all_reduce(grad)  # @train_step_all_reduce
    return grad


def skip_and_sleep():
    """The culprit: never joins the all_reduce, and stays alive."""
    while True:
        time.sleep(1.0)  # @skip_and_sleep


def case_rank():
    import datetime
    import torch
    import torch.distributed as dist
    die_with_parent()
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(hours=1))
    grad = torch.ones(1024)
    train_step(dist, grad)  # a step every rank takes
    if rank == int(os.environ.get("HDX_CULPRIT", "2")):
        ready(f"rank{rank}", rank=rank, torch=torch.__version__)
        skip_and_sleep()  # @case_rank_skip
    ready(f"rank{rank}", rank=rank, torch=torch.__version__)
    train_step(dist, grad)  # @case_rank_train_step


def reap_forever(children=()):
    while True:
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(1.0)
        except InterruptedError:
            pass


def case_launch(n):
    import subprocess
    die_with_parent()
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n),
                   LOCAL_WORLD_SIZE=str(n))
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "rank"], env=env)
    reap_forever()


# ----------------------------------------------------------------- hangdx dump --locals

class Box:
    pass


def leaf_wait(ev, count, label, ratio, flag, items):
    total = count * 2
    libc.prctl(15, b"hdx-worker", 0, 0, 0)  # PR_SET_NAME: the thread's name in /proc
    tids["worker"] = threading.get_native_id()
    started.set()
    ev.wait()  # @leaf_wait
    return total


def outer_sleep(depth, word):
    box = Box()
    note = f"{word}-{depth}"
    while True:
        time.sleep(3600)  # @outer_sleep
    return box, note


tids = {}
started = threading.Event()


def case_park():
    die_with_parent()
    ev = threading.Event()
    t = threading.Thread(target=leaf_wait, args=(ev, 21, "hello", 0.5, True, [1, 2, 3]), daemon=True)
    t.start()
    started.wait()
    ready("park", tids={"main": threading.get_native_id(), "worker": tids["worker"]},
          python=sys.version.split()[0])
    outer_sleep(3, "deep")  # @park_outer


# ----------------------------------------------------------------- filelock

def hold_lock(path):
    import filelock
    lock = filelock.FileLock(path)
    lock.acquire()
    ready("fl_hold", path=path)
    while True:
        time.sleep(3600)  # @hold_lock_sleep


def wait_for_lock(path):
    import filelock
    lock = filelock.FileLock(path)
    ready("fl_wait", path=path)
    lock.acquire()  # @wait_for_lock_acquire
    print("fl_wait: got the lock", file=sys.stderr, flush=True)


# ----------------------------------------------------------------- cpp_extension.load

def load_ext(build, name, src):
    from torch.utils import cpp_extension
    print(f"rank {os.environ.get('RANK')}: loading {name} in {build}", flush=True)
    ready(f"load{os.environ.get('RANK', '')}")
    mod = cpp_extension.load(name=name, sources=[src], build_directory=build, verbose=True)  # @load_ext
    print(f"rank {os.environ.get('RANK')}: loaded {mod.__name__}", flush=True)


def main(argv):
    mode = argv[0]
    if mode == "rank":
        case_rank()
    elif mode == "launch":
        case_launch(int(argv[1]))
    elif mode == "init":
        ready("init")
        reap_forever()
    elif mode == "park":
        case_park()
    elif mode == "fl_hold":
        die_with_parent()
        hold_lock(argv[1])
    elif mode == "fl_wait":
        die_with_parent()
        wait_for_lock(argv[1])
    elif mode == "load":
        load_ext(argv[1], argv[2], argv[3])
    else:
        sys.exit(f"job.py: unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
