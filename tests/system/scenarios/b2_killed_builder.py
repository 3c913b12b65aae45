"""B2 (and B3 with --sigterm): the building rank is killed with its children while its
compiler runs: with SIGKILL (B2, the OOM killer), or with SIGTERM to all of its processes
(B3, a launcher tearing down its workers because another rank failed).

Two ranks (RANK 0 and 1, WORLD_SIZE 2), each under `hangdx run -d <tmp>/traces`, call
cpp_extension.load on one build directory. Rank 0 starts first, takes the FileBaton
(<build>/lock) and runs ninja, whose compiler (a CXX wrapper) sits idle; then rank 1
starts and polls the lock. Rank 0 is killed with SIGKILL together with every
descendant (ninja, sh, the compiler), as the OOM killer or a launcher would. The lock
stays, and rank 1 polls it forever.

Checks, each from the JSON a user reads:
- live `hangdx inspect --json <rank 1 pid>` (trace dir found from the process's
  HANGDX_TRACE_DIR), and again with `-d <tmp>/traces`: build_lock, the lock stale,
  created by rank 0's python pid, rank 0, not alive; rank 1 waits; culprit rank 1;
- after rank 1 is killed too, `hangdx analyze --json <tmp>/traces`: the same;
- `hangdx locks --json -d <tmp>/traces` lists the lock as stale, and
  `hangdx locks --clean-stale -d <tmp>/traces` deletes it;
- then `hangdx analyze --json <tmp>/traces` again: the same verdict, with the fact
  `deleted`, a summary saying the lock file is gone, and a remedy that deletes nothing.
"""
import os
import signal
import sys

from hdxscen import (alive, check, comm, descendants, find_lock, kill_session, read_pid,
                     run_main, verdict, wait_for, waiter_pids, waiter_ranks)

SIGTERM = "--sigterm" in sys.argv[1:]


def check_report(sc, rep, what, lock_path, pid0, pid1, live):
    v = verdict(rep)
    check(rep.get("schema") == "hangdx.report/2", f"{what}: schema hangdx.report/2", rep.get("schema"))
    check(v.get("class") == "build_lock", f"{what}: verdict.class == build_lock", v)
    lk = find_lock(rep, lock_path)
    check(lk is not None, f"{what}: a lock with path {lock_path}",
          [(x.get("path"), x.get("state")) for x in rep.get("locks") or []])
    check(lk.get("kind") == "baton", f"{what}: lock kind baton", lk)
    check(lk.get("state") == "stale", f"{what}: lock state stale", lk)
    cb = lk.get("created_by") or {}
    check(cb.get("pid") == pid0, f"{what}: created_by.pid == rank 0's python pid {pid0}", lk.get("created_by"))
    check(cb.get("rank") == 0, f"{what}: created_by.rank == 0", lk.get("created_by"))
    check(cb.get("alive") is False, f"{what}: created_by.alive == false", lk.get("created_by"))
    check(1 in waiter_ranks(lk), f"{what}: rank 1 among the waiters", lk.get("waiters"))
    if live:
        check(pid1 in waiter_pids(lk), f"{what}: pid {pid1} among the waiters", lk.get("waiters"))
    check(v.get("culprit_ranks") == [1], f"{what}: culprit_ranks == [1] (no live holder: the blocked ranks)", v)


def body(sc):
    build = sc.path("build")
    traces = sc.path("traces")
    os.makedirs(build)
    lock_path = os.path.join(build, "lock")
    sc.write_ext("b2ext")
    cxx, cxxdir = sc.write_cxx("sleep", limit=120)
    env = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "CXX": cxx, "MAX_JOBS": "1"}

    r0, pid0 = sc.spawn_loader(build, "b2ext", "rank0", traced_dir=traces,
                               env=dict(env, RANK="0", LOCAL_RANK="0"))
    wait_for(lambda: os.path.exists(lock_path), "rank 0 to create the lock", 60)
    cc = wait_for(lambda: read_pid(os.path.join(cxxdir, "compiler.pid")), "rank 0's compiler to start", 60)
    check(cc in descendants(pid0), f"the compiler {cc} ({comm(cc)}) is a descendant of rank 0 ({pid0})")
    check(any(comm(p) == "ninja" for p in descendants(pid0)), "rank 0 runs ninja")

    r1, pid1 = sc.spawn_loader(build, "b2ext", "rank1", traced_dir=traces,
                               env=dict(env, RANK="1", LOCAL_RANK="1"))
    sc.wait_rank_polls("rank1", pid1)

    tree = [pid0] + descendants(pid0)
    check(alive(cc), "rank 0's compiler still runs when rank 0 is killed")
    if SIGTERM:
        check(kill_session(r0.pid, signal.SIGTERM), "SIGTERM ends rank 0 and all its children")
    sc.kill_tree(r0)  # reaps; with --sigterm there is nothing left to kill
    check(not any(alive(p) for p in tree),
          f"rank 0 and all its children are gone ({'SIGTERM' if SIGTERM else 'SIGKILL'})",
          [(p, comm(p)) for p in tree if alive(p)])
    check(os.path.exists(lock_path), "the lock stays after rank 0 is killed")
    sc.wait_rank_polls("rank1", pid1)
    check(alive(pid1), "rank 1 still polls the stale lock")
    if sc.mech:
        return

    rep = sc.hangdx_json("inspect", "--json", pid1)
    check_report(sc, rep, "inspect (trace dir from HANGDX_TRACE_DIR)", lock_path, pid0, pid1, True)
    rep = sc.hangdx_json("inspect", "--json", "-d", traces, pid1)
    check_report(sc, rep, "inspect -d", lock_path, pid0, pid1, True)

    sc.kill_tree(r1)
    check(not alive(pid1), "rank 1 is gone")
    rep = sc.hangdx_json("analyze", "--json", traces)
    check_report(sc, rep, "analyze", lock_path, pid0, pid1, False)

    lst = sc.hangdx_json("locks", "--json", "-d", traces)
    check(lst.get("schema") == "hangdx.locks/1", "locks: schema hangdx.locks/1", lst.get("schema"))
    lk = find_lock(lst, lock_path)
    check(lk is not None and lk.get("state") == "stale", f"locks: {lock_path} listed as stale", lst.get("locks"))
    sc.hangdx("locks", "--clean-stale", "-d", traces, expect_rc=(0,))
    check(not os.path.exists(lock_path), f"locks --clean-stale deleted {lock_path}")

    # The traces keep what they proved: the file is gone, the verdict stays, with "deleted".
    rep = sc.hangdx_json("analyze", "--json", traces)
    check_report(sc, rep, "analyze after the lock was deleted", lock_path, pid0, pid1, False)
    v = verdict(rep)
    check(v.get("finding") == "lock_stale" and (v.get("facts") or {}).get("deleted") == 1,
          "analyze after the lock was deleted: finding lock_stale, fact deleted == 1", v)
    check("the lock file is gone now" in (v.get("summary") or ""),
          "analyze after the lock was deleted: the summary says the file is gone", v.get("summary"))
    check("rm " not in (v.get("remedy") or "") and "relaunch" in (v.get("remedy") or ""),
          "analyze after the lock was deleted: the remedy deletes nothing, it relaunches", v.get("remedy"))


run_main("b3" if SIGTERM else "b2", body)
