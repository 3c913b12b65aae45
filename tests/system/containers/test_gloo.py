#!/usr/bin/python3
"""A 3-rank gloo job on torch 2.6 / CPython 3.13 in the Debian 13 root whose rank 2 skips an
all_reduce and sleeps, inspected from the host with the host's hangdx.

usage: test_gloo.py chroot | pod | per-rank | host
  chroot    each rank `chroot ROOT python3 job.py rank` (host pids); hangdx gets the 3 pids
  pod       one container (a Kubernetes pod): a launcher as its pid 1 starts the 3 ranks
            (pids 2-4 inside); hangdx gets the launcher's host pid
  per-rank  one container per rank (srun --container-image, enroot): each rank is pid 1 of
            its own pid namespace, under an `unshare` that carries the rank variables, as a
            launcher sets them; hangdx gets the 3 ranks' host pids
  host      the baseline: the same 3 ranks on the host (Python 3.11, torch 1.13)

Expected, from `hangdx inspect --json`, as a user reads it:
  verdict.class collective_wait, verdict.culprit_ranks [2], culprit_pids [rank 2's host pid],
  the summary naming skip_and_sleep; exactly the 3 rank processes read as ranks, in the JSON
  and in the text report (a wrapper that carries RANK is marked as not the rank, or absent);
  each rank's main thread with its Python frames, innermost first: ranks 0-1 all_reduce
  (torch's distributed_c10d.py) < train_step < case_rank, rank 2 skip_and_sleep < case_rank,
  each with the file as the process names it (/mnt/<job>/job.py) and the line of job.py;
  ranks 0-1 wait in a collective (wait "collective", wait_op "all_reduce");
  process_groups has the world group of ranks 0-2, and verdict.group is it.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import root  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "chroot"
if MODE not in ("chroot", "pod", "per-rank", "host"):
    sys.exit(f"usage: {sys.argv[0]} chroot|pod|per-rank|host")
WORLD = 3


def start(box, port):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(WORLD),
           "LOCAL_WORLD_SIZE": str(WORLD), "GLOO_SOCKET_IFNAME": "lo", "HDX_CULPRIT": "2"}
    job = box.inside("job.py")
    if MODE == "pod":
        launcher = box.spawn(["python3", job, "launch", str(WORLD)], env=env, tag="pod")
        return launcher, {r: launcher for r in range(WORLD)}
    procs = {r: box.spawn(["python3", job, "rank"], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                          tag=f"rank{r}") for r in range(WORLD)}
    return None, procs


def body(check):
    import launch  # tests/system/distributed/launch.py: ports
    box = root.Box(f"gloo-{MODE}", MODE if MODE in ("chroot", "host") else "container")
    port, port_fd = launch.reserve_port()
    try:
        launch.release_port(port, port_fd)
        launcher, procs = start(box, port)
        info = {r: box.ready(f"rank{r}", procs[r], timeout=120) for r in range(WORLD)}
    except BaseException:
        raise
    host = {r: info[r]["host_pid"] for r in range(WORLD)}
    for r in range(WORLD):
        root.wait_asleep(host[r], f"rank {r}")
    root.log(f"hung: torch {info[0].get('torch')}; ranks' host pids {host}; inside pids "
             f"{ {r: info[r]['pid'] for r in range(WORLD)} }")
    mk = root.markers(box.host("job.py"))
    job_file = box.inside("job.py")

    args = [launcher.host_pid] if launcher else [host[r] for r in range(WORLD)]
    rep = root.hangdx_json("inspect", "--json", *args)
    root.show_report(rep, f"inspect {MODE}")
    text = root.hangdx("inspect", *args, quiet=True).stdout
    root.log("text report (head):\n" + "\n".join(text.splitlines()[:40]))

    v = rep.get("verdict") or {}
    check(rep.get("_exit") == 0, f"{MODE}: hangdx inspect exits 0", rep.get("_exit"))
    check(v.get("class") == "collective_wait", f"{MODE}: verdict.class == collective_wait", v.get("class"))
    check(v.get("culprit_ranks") == [2], f"{MODE}: verdict.culprit_ranks == [2]", v.get("culprit_ranks"))
    check(v.get("culprit_pids") == [host[2]], f"{MODE}: verdict.culprit_pids == [{host[2]}] (rank 2's host pid)",
          v.get("culprit_pids"))
    check("skip_and_sleep" in (v.get("summary") or ""), f"{MODE}: the summary names skip_and_sleep",
          v.get("summary"))
    ranked = root.json_ranks(rep)
    want_ranks = [(r, host[r]) for r in range(WORLD)]
    check([(r, pid) for r, pid, _ in ranked] == want_ranks,
          f"{MODE}: JSON: the processes presented as ranks are exactly the 3 ranks {host} (a wrapper, "
          f"launcher or duplicate with a rank must be marked as not the rank)", ranked)
    check(root.text_ranks(text) == want_ranks,
          f"{MODE}: text report: the lines that read as ranks are exactly the 3 ranks {host}",
          [l for l in text.splitlines() if re.match(r"\s+rank \d+ pid", l)])

    want = {0: [("all_reduce", "torch/distributed/distributed_c10d.py", None),
                ("train_step", job_file, mk["train_step_all_reduce"]),
                ("case_rank", job_file, mk["case_rank_train_step"])],
            2: [("skip_and_sleep", job_file, mk["skip_and_sleep"]),
                ("case_rank", job_file, mk["case_rank_skip"])]}
    want[1] = want[0]
    for r in range(WORLD):
        p = root.find_process(rep, host[r])
        if not check(p is not None, f"{MODE}: rank {r} (host pid {host[r]}) is in the report"):
            continue
        t = root.main_thread(p)
        frames = root.python_frames(t or {})
        got = [(f.get("function"), f.get("file"), f.get("line")) for f in frames]
        native = [(f.get("function"), f.get("module")) for f in (t or {}).get("frames") or [] if f.get("kind") == "native"]
        check(len(frames) >= len(want[r]),
              f"{MODE}: rank {r}'s main thread has Python frames ({len(want[r])}+ wanted)",
              {"python": got, "native": native[:8], "stack_error": (t or {}).get("stack_error"),
               "python_version": p.get("python")})
        # Match the wanted frames innermost first, in order.
        i = 0
        for fn, file, line in want[r]:
            while i < len(got) and got[i][0] != fn:
                i += 1
            if i == len(got):
                check(False, f"{MODE}: rank {r}: Python frame {fn} ({file}:{line or '*'})", got[:8])
                break
            gfn, gfile, gline = got[i]
            ok_file = gfile == file if file.startswith("/") else bool(gfile) and gfile.endswith(file)
            check(ok_file and (line is None or gline == line),
                  f"{MODE}: rank {r}: frame {fn} at {file}:{line or '*'}", got[i])
            i += 1
        if r < 2:
            check((t or {}).get("wait") == "collective" and (t or {}).get("wait_op") == "all_reduce",
                  f"{MODE}: rank {r} waits in a collective all_reduce",
                  {k: (t or {}).get(k) for k in ("wait", "wait_op", "wait_frame")})

    pgs = rep.get("process_groups")
    world = [g for g in pgs or [] if sorted(g.get("ranks") or []) == list(range(WORLD))]
    check(bool(world), f"{MODE}: process_groups has the world group of ranks 0-2", pgs)
    g = v.get("group") or {}
    check(sorted(g.get("ranks") or []) == list(range(WORLD)) and g.get("default") is True,
          f"{MODE}: verdict.group is the world group (ranks 0-2, default)", v.get("group"))


if __name__ == "__main__":
    root.run_test(body)
