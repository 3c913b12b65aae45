"""B5 (and B6 with --retry): a flock held by a process that is itself stuck.

Process A takes flock(LOCK_EX) on <tmp>/cache/x.lock and stalls. Process B blocks in
flock(LOCK_EX) on it (B6: retries a non-blocking flock every 50 ms, as the `filelock`
library does). Only B's pid is given to `hangdx inspect --json`; it must find A
itself: build_lock, the lock of kind flock held by A (holder_pid, culprit_pids), B a
waiter.

usage: b5_flock_holder.py [--retry]
"""
import os
import sys

from hdxscen import (PYTHON, HERE, check, find_lock, run_main, verdict, wait_blocked_in,
                     wait_for, wait_polling, waiter_pids, _read)

RETRY = "--retry" in sys.argv[1:]
FLOCKER = os.path.join(HERE, "flocker.py")


def body(sc):
    os.makedirs(sc.path("cache"))
    lock_path = sc.path("cache", "x.lock")

    a = sc.spawn([PYTHON, FLOCKER, "hold", lock_path], tag="a")
    wait_for(lambda: "locked" in (_read(sc.path("a.log")) or ""), "A to take the flock", 60)
    b = sc.spawn([PYTHON, FLOCKER, "retry" if RETRY else "block", lock_path], tag="b")
    wait_for(lambda: "waiting" in (_read(sc.path("b.log")) or ""), "B to start", 60)
    if RETRY:
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


run_main("b6" if RETRY else "b5", body, needs_torch=False)
