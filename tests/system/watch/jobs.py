#!/usr/bin/python3
"""The jobs of test_watch.py's --on-hang kill cases, run under `hangdx run` with Debian's
/usr/bin/python3 (torch 1.13). Each prints what it reaches, one line each, flushed.

usage:
  jobs.py finally OWN_BUILD_DIR STALE_LOCK REPORT
      takes the FileBaton lock of OWN_BUILD_DIR (as cpp_extension.load does before it builds)
      and, in the try of its try/finally, waits forever on STALE_LOCK, a lock that nothing
      holds (FileBaton.try_acquire, then FileBaton.wait, as cpp_extension.load); the finally releases its own lock (removes OWN_BUILD_DIR/lock).
      Its SIGINT handler writes ./sigint.txt: whether REPORT was there when SIGINT came.
  jobs.py ranks WORLD_SIZE ROLE ARGS...
      a launcher: starts WORLD_SIZE ranks of `jobs.py ROLE ARGS...` in its own process group
      (RANK, WORLD_SIZE, MASTER_ADDR... set; MASTER_PORT from its environment), waits for them
      all (a Ctrl-C reaches them too) and exits with the first non-zero status among theirs.
  ROLE computing SPIN_LIB
      rank 0 computes: spin.c's hdx_test_spin (native, no name hangdx knows) until a file
      ./stop appears; the other ranks wait for it in a gloo barrier; then all meet there.
  ROLE build SOURCES BUILD_DIR
      a first build: rank 0 JIT-builds SOURCES (paths joined by ":") with cpp_extension.load into BUILD_DIR while the
      other ranks wait in a gloo barrier; after it every rank loads the module and calls it.
"""
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta


def say(msg):
    print(msg, flush=True)


def job_finally(own_build, stale_lock, report):
    from torch.utils.file_baton import FileBaton

    def on_sigint(sig, frame):
        with open("sigint.txt.tmp", "w") as f:
            f.write("report was there\n" if os.path.exists(report) else "no report yet\n")
        os.rename("sigint.txt.tmp", "sigint.txt")
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    own = FileBaton(os.path.join(own_build, "lock"))
    if not own.try_acquire():
        sys.exit(f"jobs.py finally: {own.lock_file_path} is taken already")
    say("holding my lock")
    try:
        other = FileBaton(stale_lock)
        if not other.try_acquire():  # as cpp_extension.load: the lock is there, so wait
            say("waiting on the stale lock")
            other.wait()  # forever: nothing will remove it
        say("the stale lock went away")
    finally:
        own.release()
        say("released my lock")


def launch(world_size, role_argv):
    procs = []
    for rank in range(world_size):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                   LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo",
                   OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + role_argv, env=env))
    statuses = []
    for p in procs:
        while True:
            try:
                statuses.append(p.wait())
                break
            except KeyboardInterrupt:
                pass  # the ranks got it too: wait for them to end
    return next((s for s in statuses if s != 0), 0)


def init_rank():
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", init_method="env://", rank=rank,
                            world_size=int(os.environ["WORLD_SIZE"]), timeout=timedelta(hours=1))
    return rank, dist


def rank_computing(spin_lib):
    import ctypes
    rank, dist = init_rank()
    if rank == 0:
        lib = ctypes.CDLL(spin_lib)
        flag = ctypes.c_int(0)

        def watch_for_stop():
            while not os.path.exists("stop"):
                time.sleep(0.1)
            flag.value = 1

        threading.Thread(target=watch_for_stop, daemon=True).start()
        say("rank 0: computing")
        lib.hdx_test_spin(ctypes.byref(flag))
        say("rank 0: computed")
    else:
        say(f"rank {rank}: in the barrier")
    dist.barrier()
    say(f"rank {rank}: done")


def rank_build(sources, build_dir):
    rank, dist = init_rank()
    from torch.utils import cpp_extension

    def load():
        return cpp_extension.load(name="hdx_watch_first_build", sources=sources.split(":"), build_directory=build_dir,
                                  verbose=True)

    if rank == 0:
        say("rank 0: building")
        mod = load()
        say("rank 0: built")
        dist.barrier()
    else:
        say(f"rank {rank}: in the barrier")
        dist.barrier()
        mod = load()
    say(f"rank {rank}: twice(21) = {mod.twice(21)}")


def main(argv):
    if argv[:1] == ["finally"] and len(argv) == 4:
        job_finally(*argv[1:])
    elif argv[:1] == ["ranks"] and len(argv) >= 3:
        sys.exit(launch(int(argv[1]), argv[2:]))
    elif argv[:1] == ["computing"] and len(argv) == 2:
        rank_computing(argv[1])
    elif argv[:1] == ["build"] and len(argv) == 3:
        rank_build(*argv[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
