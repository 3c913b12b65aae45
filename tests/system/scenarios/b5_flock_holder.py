"""B5 (B6 with --retry, B7 with --filelock): a flock held by a process that is itself stuck.

Process A takes flock(LOCK_EX) on <tmp>/cache/x.lock and stalls. Process B blocks in
flock(LOCK_EX) on it (B6: retries a non-blocking flock every 50 ms, as the `filelock`
library does). Only B's pid is given to `hangdx inspect --json`; it must find A
itself: build_lock, the lock of kind flock held by A (holder_pid, culprit_pids), B a
waiter. B7 does it with the real `filelock` package on <tmp>/cache/locks/k.lock, as
torch inductor's and Triton's caches (and cpp_extension on torch's main branch) do.

usage: b5_flock_holder.py [--retry | --filelock]
"""
import os
import subprocess
import sys

from hdxscen import (PYTHON, HERE, check, find_lock, run_main, verdict, wait_blocked_in,
                     wait_for, wait_polling, waiter_pids, _read)

RETRY = "--retry" in sys.argv[1:]
FILELOCK = "--filelock" in sys.argv[1:]
FLOCKER = os.path.join(HERE, "flocker.py")


def body(sc):
    if FILELOCK:
        os.makedirs(sc.path("cache", "locks"))
        lock_path = sc.path("cache", "locks", "k.lock")
    else:
        os.makedirs(sc.path("cache"))
        lock_path = sc.path("cache", "x.lock")

    a = sc.spawn([PYTHON, FLOCKER, "filelock-hold" if FILELOCK else "hold", lock_path], tag="a")
    wait_for(lambda: "locked" in (_read(sc.path("a.log")) or ""), "A to take the flock", 60)
    b = sc.spawn([PYTHON, FLOCKER, "filelock-wait" if FILELOCK else "retry" if RETRY else "block", lock_path], tag="b")
    wait_for(lambda: "waiting" in (_read(sc.path("b.log")) or ""), "B to start", 60)
    if RETRY or FILELOCK:
        wait_polling(b.pid)
    else:
        wait_blocked_in(b.pid, "flock")
    check("locked" not in (_read(sc.path("b.log")) or ""), "B has not got the lock")
    if sc.mech:
        return

    rep = sc.hangdx_json("inspect", "--json", b.pid)
    v = verdict(rep)
    check(v.get("class") == "build_lock", "verdict.class == build_lock", v)
    lk = find_lock(rep, lock_path)
    check(lk is not None, f"a lock with path {lock_path}", rep.get("locks"))
    check(lk.get("kind") == "flock", "lock kind flock", lk)
    check(lk.get("state") == "held", "lock state held (a live process holds it)", lk)
    check(lk.get("holder_pid") == a.pid, f"holder_pid == A ({a.pid})", lk)
    check(a.pid in (v.get("culprit_pids") or []), f"culprit_pids contains A ({a.pid})", v)
    check(b.pid in waiter_pids(lk), f"B ({b.pid}) is a waiter", lk.get("waiters"))


if FILELOCK and subprocess.run([PYTHON, "-c", "import filelock"], capture_output=True).returncode:
    print("skipped: Debian's python3-filelock is not installed (scripts/setup installs it)")
    sys.exit(77)
run_main("b7" if FILELOCK else "b6" if RETRY else "b5", body, needs_torch=False)
