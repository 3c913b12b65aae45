#!/usr/bin/python3
"""A builder SIGKILLed mid-compile of torch.utils.cpp_extension.load (torch 2.6, CPython 3.13)
in containers of the Debian 13 root, with hangdx's shim preloaded; the other rank then waits
on the build lock forever. Inspected from the host with the host's hangdx.

usage: test_killed_builder.py pod | per-rank | host
  pod       one container (a pod) whose pid 1 is an init; ranks 0 and 1 are started in it
            as `docker exec` does (nsenter), with the shim preloaded. After the checks
            of the live job, rank 1 is killed too and the container stays up: then
            `hangdx analyze` and `hangdx locks --clean-stale` on the traces.
  per-rank  one container per rank (srun --container-image): each rank is pid 1 of its own
            pid namespace; rank 0's container dies with it.
  host      the baseline: the same two ranks on the host (Python 3.11, torch 1.13), then
            analyze, locks and --clean-stale as for pod (no decoy: the two names are one)

Both ranks run `job.py load` on one build directory of the job dir (/mnt/<job>/build inside,
the host's job dir outside), with the shim libhangdx-preload.so (a copy in the job dir) in
LD_PRELOAD and HANGDX_TRACE_DIR=/mnt/<job>/traces: the traces are written inside and read on
the host at <job dir>/traces. Rank 0 takes the FileBaton (<build>/lock) and runs ninja, whose
compiler (tests/system/scenarios' delaying CXX wrapper) sits idle; rank 1 polls the lock; rank 0 is
SIGKILLed with every process it started (the OOM killer, a launcher's teardown).

Expected, as a user reads it:
  while rank 0 still builds (alive, its compiler idle): the lock is not called stale nor its
  creator gone, and the verdict is the build (not_hung or compile_stall);
  after rank 0 is killed, live, `hangdx inspect --json -d <host trace dir> <rank 1's host pid>` and the same without
  -d (the trace dir from the process's HANGDX_TRACE_DIR, which names the container's path):
  verdict.class build_lock, culprit_ranks [1]; the lock: kind baton, state stale, named as the
  processes name it (/mnt/<job>/build/lock) and by its host path (<job dir>/build/lock), the
  one or the other as its path and both in the report; created_by rank 0, alive false, its
  pid rank 0's (the host's pid or the container's, said which); rank 1 (its host pid) a
  waiter; only the two loaders carry a rank;
  after the job is gone, `hangdx analyze --json <host trace dir>`: the same verdict, lock and
  creator;
  pod only: `hangdx locks --json -d <host trace dir>` lists the lock stale, and
  `hangdx locks --clean-stale -d <host trace dir>` deletes it inside the container's root (the
  host's <job dir>/build/lock, the container's /mnt/<job>/build/lock), and nothing on the host:
  a decoy file at the container's path on the host, /mnt/<job>/build/lock, stays.
"""
import json
import os
import shutil
import signal
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import root  # noqa: E402

sys.path.insert(0, os.path.join(root.SRC, "tests", "system", "scenarios"))
from hdxscen import CXX_WRAPPER, TINY_CPP  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "pod"
if MODE not in ("pod", "per-rank", "host"):
    sys.exit(f"usage: {sys.argv[0]} pod|per-rank|host")
EXT = "hdxctrext"


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(root.children(p))
    return out


def text_of(obj):
    return json.dumps(obj, default=str)


def check_report(check, box, rep, what, lk_names, r0, r1, live):
    """The verdict, the lock and its creator, as the module doc says."""
    lock_in, lock_host = lk_names
    v = rep.get("verdict") or {}
    check(rep.get("_exit") in (0, 1), f"{what}: hangdx exits 0 (or 1, partial)", rep.get("_exit"))
    check(v.get("class") == "build_lock", f"{what}: verdict.class == build_lock", v.get("class"))
    check(v.get("culprit_ranks") == [1], f"{what}: verdict.culprit_ranks == [1] (no live holder: the waiting rank)",
          v.get("culprit_ranks"))
    locks = rep.get("locks") or []
    lk = next((l for l in locks if l.get("path") in (lock_in, lock_host)), None)
    if not check(lk is not None, f"{what}: a lock named {lock_in} (inside) or {lock_host} (host)",
                 [(l.get("path"), l.get("state"), l.get("source")) for l in locks]):
        return
    root.log(f"{what}: the lock's path is {lk.get('path')!r} (the {'container' if lk.get('path') == lock_in else 'host'}'s name)")
    where = text_of(lk) + text_of(v)
    check(lock_in in where and lock_host in where,
          f"{what}: the report names the lock both ways: {lock_in} (inside) and {lock_host} (host)",
          {"lock": lk, "summary": v.get("summary"), "remedy": v.get("remedy")})
    check(lk.get("kind") == "baton", f"{what}: lock kind baton", lk.get("kind"))
    check(lk.get("state") == "stale", f"{what}: lock state stale", lk.get("state"))
    cb = lk.get("created_by") or {}
    check(cb.get("rank") == 0, f"{what}: created_by.rank == 0", lk.get("created_by"))
    check(cb.get("alive") is False, f"{what}: created_by.alive == false (rank 0 is gone)", lk.get("created_by"))
    check(cb.get("pid") in (r0["host_pid"], r0["pid"]),
          f"{what}: created_by.pid is rank 0's (host pid {r0['host_pid']} or container pid {r0['pid']})",
          lk.get("created_by"))
    if cb.get("pid") is not None:
        root.log(f"{what}: created_by.pid {cb.get('pid')} is rank 0's "
                 + ("host pid" if cb.get("pid") == r0["host_pid"] else
                    "container pid" if cb.get("pid") == r0["pid"] else "? (neither)"))
    ws = lk.get("waiters") or []
    check(1 in [w.get("rank") for w in ws], f"{what}: rank 1 among the lock's waiters", ws)
    if live:
        check(r1["host_pid"] in [w.get("pid") for w in ws],
              f"{what}: rank 1's host pid {r1['host_pid']} among the waiters", ws)
        ranked = root.json_ranks(rep)
        check([(r, p) for r, p, _ in ranked] == [(1, r1["host_pid"])],
              f"{what}: the only process presented as a rank is rank 1 ({r1['host_pid']}): no wrapper or init",
              ranked)


def body(check):
    box = root.Box(f"b2-{MODE}", "host" if MODE == "host" else "container")
    for d in ("build", "cxx", "lib"):
        os.makedirs(box.host(d))
    traces = box.host("traces")
    os.mkdir(traces, 0o700)
    with open(box.host(f"{EXT}.cpp"), "w") as f:
        f.write(TINY_CPP % {"name": EXT})
    os.mkfifo(box.host("cxx", "fifo"))
    with open(box.host("cxx", "c++"), "w") as f:
        f.write(CXX_WRAPPER % {"dir": box.inside("cxx"), "limit": 300, "body": "read -t 0.2 -u 9 || true",
                               "real": shutil.which("c++") if MODE == "host" else "/usr/bin/c++"})
    os.chmod(box.host("cxx", "c++"), 0o755)
    shutil.copy(root.preload_lib(), box.host("lib", "libhangdx-preload.so"))
    lock_in, lock_host = box.inside("build", "lock"), box.host("build", "lock")

    init = None
    if MODE == "pod":
        init = box.spawn(["python3", box.inside("job.py"), "init"], tag="init")
        box.ready("init", init)

    def start(rank):
        # The job's variables are set inside only (`docker exec -e`, a launcher in the
        # container): no wrapper on the host carries them.
        inner = ["env", f"RANK={rank}", f"LOCAL_RANK={rank}", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2",
                 f"CXX={box.inside('cxx', 'c++')}", "MAX_JOBS=1",
                 f"LD_PRELOAD={box.inside('lib', 'libhangdx-preload.so')}",
                 f"HANGDX_TRACE_DIR={box.inside('traces')}",
                 "python3", box.inside("job.py"), "load", box.inside("build"), EXT, box.inside(f"{EXT}.cpp")]
        p = box.spawn(inner, tag=f"rank{rank}", join=init)
        return p, box.ready(f"load{rank}", p)

    p0, r0 = start(0)
    root.wait_for(lambda: os.path.exists(lock_host), "rank 0 to create the build lock", 90)
    cc_in = root.wait_for(lambda: read_int(box.host("cxx", "compiler.pid")), "rank 0's compiler to start", 90)
    cc = box.host_pid(p0, cc_in)
    t0 = tree(r0["host_pid"])
    check(cc in t0, f"set-up: the compiler (host pid {cc}) runs under rank 0 ({r0['host_pid']})")
    check(any(root.comm(q) == "ninja" for q in t0), "set-up: rank 0 runs ninja")
    p1, r1 = start(1)
    root.wait_for(lambda: "loading" in p1.log(), "rank 1 to call cpp_extension.load", 90)
    root.wait_asleep(r1["host_pid"], "rank 1 to poll the lock", 60, polls=True)

    # While rank 0 still builds (its compiler idles, alive), its lock must not read as stale:
    # a creator taken for gone here is a lock that `locks --clean-stale` would delete under
    # a running build.
    rep = root.hangdx_json("inspect", "--json", "-d", traces, r1["host_pid"])
    root.show_report(rep, "inspect -d, rank 0 alive")
    lk = next((l for l in rep.get("locks") or [] if l.get("path") in (lock_in, lock_host)), None)
    what = f"{MODE}: inspect -d while rank 0 (alive) builds"
    if check(lk is not None, f"{what}: the lock is found", [(l.get("path"), l.get("state")) for l in rep.get("locks") or []]):
        check(lk.get("state") != "stale", f"{what}: the lock is not called stale", lk.get("state"))
        check((lk.get("created_by") or {}).get("alive") is not False,
              f"{what}: its creator is not called gone", lk.get("created_by"))
    v = rep.get("verdict") or {}
    check("stale" not in (v.get("summary") or "") and v.get("class") in ("not_hung", "compile_stall"),
          f"{what}: the verdict is the build (not_hung or compile_stall), not a stale lock",
          {"class": v.get("class"), "summary": v.get("summary")})

    box.kill(p0)  # SIGKILL: rank 0 and everything it started
    gone = [q for q in t0 if root.alive(q)]
    check(not gone, "set-up: rank 0 and all its children are gone (SIGKILL)", [(q, root.comm(q)) for q in gone])
    check(os.path.exists(lock_host), f"set-up: the lock {lock_host} stays")
    root.wait_asleep(r1["host_pid"], "rank 1 to poll the stale lock", 30, polls=True)
    root.log(f"hung: rank 0 was host pid {r0['host_pid']} (pid {r0['pid']} inside), rank 1 is host pid "
             f"{r1['host_pid']} (pid {r1['pid']} inside); lock {lock_in} inside = {lock_host}; traces "
             f"{sorted(os.listdir(traces))}")

    rep = root.hangdx_json("inspect", "--json", "-d", traces, r1["host_pid"])
    root.show_report(rep, "inspect -d")
    check_report(check, box, rep, f"{MODE}: inspect -d <host trace dir>", (lock_in, lock_host), r0, r1, True)
    rep = root.hangdx_json("inspect", "--json", r1["host_pid"])
    root.show_report(rep, "inspect (HANGDX_TRACE_DIR)")
    check_report(check, box, rep, f"{MODE}: inspect (trace dir from HANGDX_TRACE_DIR={box.inside('traces')})",
                 (lock_in, lock_host), r0, r1, True)

    box.kill(p1)
    check(not root.alive(r1["host_pid"]), "set-up: rank 1 is gone")
    rep = root.hangdx_json("analyze", "--json", traces)
    root.show_report(rep, "analyze")
    check_report(check, box, rep, f"{MODE}: analyze <host trace dir> after the job is gone",
                 (lock_in, lock_host), r0, r1, False)
    if MODE == "per-rank":
        return

    # locks --clean-stale, with the container still up (its init), and a decoy on the host
    # at the path the traces name.
    lst = root.hangdx_json("locks", "--json", "-d", traces)
    root.log(f"locks --json: {json.dumps(lst.get('locks'), default=str)[:3000]}")
    lk = next((l for l in lst.get("locks") or [] if l.get("path") in (lock_in, lock_host)), None)
    check(lk is not None and lk.get("state") == "stale", f"{MODE}: locks lists {lock_in} or {lock_host} as stale",
          [(l.get("path"), l.get("state")) for l in lst.get("locks") or []])
    decoy = lock_in  # the container's path, taken as a host path
    decoy_top = "/" + decoy.split("/")[1] + "/" + decoy.split("/")[2]  # /mnt/<job>
    made_decoy = MODE != "host" and not os.path.exists(decoy_top)
    if made_decoy:
        os.makedirs(os.path.dirname(decoy))
        with open(decoy, "w") as f:
            f.write("decoy: a host file at the container's path of the lock\n")
    try:
        r = root.hangdx("locks", "--clean-stale", "-d", traces)
        check(r.returncode == 0, f"{MODE}: locks --clean-stale exits 0", r.returncode)
        check(not os.path.exists(lock_host),
              f"{MODE}: locks --clean-stale deleted the lock inside the container's root ({lock_host} on the host)",
              r.stderr.strip())
        if init is not None:
            via = f"/proc/{init.host_pid}/root{lock_in}"
            check(not os.path.exists(via), f"{MODE}: ... so the container sees no {lock_in} ({via})")
        if made_decoy:
            check(os.path.exists(decoy), f"{MODE}: locks --clean-stale left the host's own file {decoy} alone",
                  r.stderr.strip())
    finally:
        if made_decoy:
            shutil.rmtree(decoy_top, ignore_errors=True)


if __name__ == "__main__":
    root.run_test(body)
