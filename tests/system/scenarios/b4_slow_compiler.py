"""B4: a slow but healthy build is not a hang.

Two ranks under `hangdx run -d <tmp>/traces` call cpp_extension.load on one build
directory. Rank 0's compiler (a CXX wrapper) burns CPU before it runs the real
compiler; rank 1 polls the lock meanwhile. While the compiler runs, `hangdx inspect
--json` on rank 1, on rank 0, and on both launchers together must show the lock
`held` by rank 0's python (it keeps the lock's fd open), never `stale`, and must not
call it build_lock or compile_stall (the build makes progress; expected: not_hung).
Then the compiler is let go, and both ranks must load the module.
"""
import os

from hdxscen import (alive, check, comm, descendants, find_lock, log, read_pid, run_main,
                     verdict, wait_for, _read)


def check_held(rep, what, lock_path, pid0):
    v = verdict(rep)
    lk = find_lock(rep, lock_path)
    check(lk is not None, f"{what}: a lock with path {lock_path}",
          [(x.get("path"), x.get("state")) for x in rep.get("locks") or []])
    check(lk.get("state") == "held", f"{what}: lock state held, not stale", lk)
    check(lk.get("holder_pid") == pid0, f"{what}: holder_pid == rank 0's python pid {pid0}", lk)
    check(v.get("class") not in ("build_lock", "compile_stall"),
          f"{what}: class is neither build_lock nor compile_stall (got {v.get('class')})", v)
    if v.get("class") != "not_hung":
        log(f"note: {what}: class {v.get('class')}, expected not_hung")
    return v


def body(sc):
    build = sc.path("build")
    traces = sc.path("traces")
    os.makedirs(build)
    lock_path = os.path.join(build, "lock")
    sc.write_ext("b4ext")
    cxx, cxxdir = sc.write_cxx("burn", limit=60)
    env = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "CXX": cxx, "MAX_JOBS": "1"}

    r0, pid0 = sc.spawn_loader(build, "b4ext", "rank0", traced_dir=traces,
                               env=dict(env, RANK="0", LOCAL_RANK="0"))
    wait_for(lambda: os.path.exists(lock_path), "rank 0 to create the lock", 60)
    cc = wait_for(lambda: read_pid(os.path.join(cxxdir, "compiler.pid")), "rank 0's compiler to start", 60)
    check(cc in descendants(pid0), f"the compiler {cc} ({comm(cc)}) is a descendant of rank 0 ({pid0})")
    r1, pid1 = sc.spawn_loader(build, "b4ext", "rank1", traced_dir=traces,
                               env=dict(env, RANK="1", LOCAL_RANK="1"))
    sc.wait_rank_polls("rank1", pid1)
    check(alive(cc), "the compiler still burns CPU")

    if not sc.mech:
        check_held(sc.hangdx_json("inspect", "--json", pid1), "inspect rank 1", lock_path, pid0)
        rep = sc.hangdx_json("inspect", "--json", pid0)
        check_held(rep, "inspect rank 0", lock_path, pid0)
        compiler = [p for p in rep.get("processes") or [] if p.get("pid") == cc]
        check(len(compiler) == 1, f"inspect rank 0: the compiler {cc} is among its processes",
              [(p.get("pid"), (p.get("cmdline") or [None])[0]) for p in rep.get("processes") or []])
        check(compiler[0].get("progressing") is True, "inspect rank 0: the compiler is progressing",
              {k: compiler[0].get(k) for k in ("pid", "state", "cpu_ms", "progressing")})
        check_held(sc.hangdx_json("inspect", "--json", r0.pid, r1.pid),
                   "inspect both launchers", lock_path, pid0)
    check(alive(cc), "the compiler was still running during the inspections")

    open(os.path.join(cxxdir, "release"), "w").close()
    for tag in ("rank0", "rank1"):
        wait_for(lambda: "loaded" in (_read(sc.path(f"{tag}.log")) or ""), f"{tag} to load the module", 90)
    check(True, "both ranks loaded the module: the build was slow, not hung")
    check(not os.path.exists(lock_path), "the lock is released after the build")


run_main("b4", body)
