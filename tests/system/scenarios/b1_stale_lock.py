"""B1: a stale FileBaton lock with no trace.

An empty `lock` is left in <tmp>/fused_kernels/build (its builder is long gone), then a
real process calls cpp_extension.load on that build directory, not under `hangdx run`.
It polls the lock forever. `hangdx inspect --json PID` must say build_lock, name the
lock by its absolute path, call it stale, say the creator is unknown (no trace), and
list the process as a waiter.

usage: b1_stale_lock.py [--relative]   (--relative: load with build_directory
'fused_kernels/build', relative to the process's cwd, so the polled path is relative)
"""
import os
import sys

from hdxscen import check, find_lock, run_main, verdict, waiter_pids

RELATIVE = "--relative" in sys.argv[1:]


def body(sc):
    build = sc.path("fused_kernels", "build")
    os.makedirs(build)
    open(os.path.join(build, "lock"), "w").close()
    lock_path = os.path.join(build, "lock")
    sc.write_ext("b1ext")

    _, pid = sc.spawn_loader("fused_kernels/build" if RELATIVE else build, "b1ext", "rank")
    sc.wait_rank_polls("rank", pid)
    check(os.path.exists(lock_path), "the stale lock is still there while the process polls")

    if sc.mech:
        return
    rep = sc.hangdx_json("inspect", "--json", pid)
    v = verdict(rep)
    check(rep.get("schema") == "hangdx.report/2", "schema hangdx.report/2", rep.get("schema"))
    check(v.get("class") == "build_lock", "verdict.class == build_lock", v)
    lk = find_lock(rep, lock_path)
    check(lk is not None, f"a lock with path {lock_path}", rep.get("locks"))
    check(lk.get("state") == "stale", "lock state stale", lk)
    check(lk.get("created_by") is None, "created_by null (creator unknown: no trace)", lk)
    check(lk.get("holder_pid") is None, "no holder", lk)
    check(pid in waiter_pids(lk), f"process {pid} is a waiter", lk.get("waiters"))
    check(lock_path in (v.get("summary") or "") + (v.get("remedy") or ""),
          "the verdict names the lock file", v)


run_main("b1-relative" if RELATIVE else "b1", body)
