"""Live and post-mortem agree, on one real hang: a stale FileBaton lock (as B1).

A process calls cpp_extension.load on a build directory whose `lock` was left behind, and
polls it forever. While it hangs: `hangdx inspect --json PID`, then `hangdx snapshot -o
s.json PID`. Then the process is killed, and `hangdx analyze --json s.json` must give what
inspect gave: class build_lock, the same lock (path, kind, state, creator, waiters) and
the same culprits, from the snapshot alone.
"""
import json
import os

from hdxscen import alive, check, find_lock, run_main, verdict, waiter_pids


def lock_facts(lk):
    return {k: lk.get(k) for k in ("path", "kind", "state", "holder_pid", "created_by")}


def body(sc):
    build = sc.path("fused_kernels", "build")
    os.makedirs(build)
    lock_path = os.path.join(build, "lock")
    open(lock_path, "w").close()
    sc.write_ext("pmext")
    popen, pid = sc.spawn_loader(build, "pmext", "rank")
    sc.wait_rank_polls("rank", pid)
    if sc.mech:
        return

    live = sc.hangdx_json("inspect", "--json", pid)
    snap = sc.path("s.json")
    sc.hangdx("snapshot", "-o", snap, pid)
    check(os.path.exists(snap), "snapshot -o wrote the file")
    with open(snap) as f:
        doc = json.load(f)
    check(doc.get("schema") == "hangdx.snapshot/2", "schema hangdx.snapshot/2", doc.get("schema"))
    check(any(p.get("pid") == pid for p in doc.get("processes") or []), f"the snapshot holds process {pid}")
    envs = [set((p.get("env") or {}).keys()) for p in doc.get("processes") or []]
    check(all(e <= {"TORCH_EXTENSIONS_DIR", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                    "CUDA_VISIBLE_DEVICES", "MAX_JOBS", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                    "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
                    "PMI_SIZE", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
                    "SLURM_NODEID"} for e in envs), "only the design's env names", envs)
    check("PATH" not in open(snap).read().replace("polled_path", ""), "no PATH in the snapshot")

    sc.kill_tree(popen)
    check(not alive(pid), f"process {pid} is gone before analyze")

    post = sc.hangdx_json("analyze", "--json", snap)
    lv, pv = verdict(live), verdict(post)
    check(lv.get("class") == "build_lock", "inspect: build_lock", lv)
    check(pv.get("class") == lv.get("class"), "analyze of the snapshot: the same class as inspect", pv)
    check(pv.get("culprit_ranks") == lv.get("culprit_ranks") and pv.get("culprit_pids") == lv.get("culprit_pids"),
          "the same culprits", (lv, pv))
    ll, pl = find_lock(live, lock_path), find_lock(post, lock_path)
    check(ll is not None and pl is not None, f"both name the lock {lock_path}", (live.get("locks"), post.get("locks")))
    check(lock_facts(pl) == lock_facts(ll), "the same lock path, kind, state, holder and creator",
          (lock_facts(ll), lock_facts(pl)))
    check(pl.get("state") == "stale", "the lock is stale", pl)
    check(sorted(waiter_pids(pl)) == sorted(waiter_pids(ll)) and pid in waiter_pids(pl),
          f"the same waiters, {pid} among them", (ll.get("waiters"), pl.get("waiters")))
    check(lock_path in (pv.get("summary") or "") + (pv.get("remedy") or ""), "the verdict names the lock file", pv)
    check(sorted(post.get("hosts") or []) == sorted(live.get("hosts") or []), "the same host", post.get("hosts"))


run_main("snapshot-b1", body)
