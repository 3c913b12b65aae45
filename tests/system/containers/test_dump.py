#!/usr/bin/python3
"""`hangdx dump --json --locals PID` of a CPython 3.13 process in the Debian 13 root, from the
host with the host's hangdx.

usage: test_dump.py chroot | unshare-chroot | container | host   (see root.py for the modes;
       host: the baseline, the same on the host's Python 3.11)

job.py park parks two threads: the main thread in time.sleep inside outer_sleep(depth=3,
word="deep"), a worker thread (named hdx-worker) in Event.wait inside leaf_wait(ev, 21,
"hello", 0.5, True, [1, 2, 3]). Expected, per thread, as a user reads it: the thread ids (host
tids), the worker's name, the Python version 3.13, the Python functions innermost first with
the file as the process names it (/mnt/<job>/job.py; threading.py of the root's Python) and
the line of job.py, and the locals with their values.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import root  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "chroot"
if MODE not in ("chroot", "unshare-chroot", "container", "host"):
    sys.exit(f"usage: {sys.argv[0]} chroot|unshare-chroot|container|host")


def host_tid(host_pid, inside_tid):
    for t in os.listdir(f"/proc/{host_pid}/task"):
        try:
            with open(f"/proc/{host_pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith("NSpid:") and int(line.split()[-1]) == inside_tid:
                        return int(t)
        except OSError:
            pass
    return None


def check_frames(check, who, frames, want):
    got = [(f.get("function"), f.get("file"), f.get("line")) for f in frames]
    i = 0
    for fn, file, line in want:
        while i < len(got) and got[i][0] != fn:
            i += 1
        if i == len(got):
            check(False, f"{MODE}: {who}: Python frame {fn} ({file}:{line or '*'}) in order", got)
            return
        ok_file = got[i][1] == file if file.startswith("/") else bool(got[i][1]) and got[i][1].endswith(file)
        check(ok_file and (line is None or got[i][2] == line), f"{MODE}: {who}: frame {fn} at {file}:{line or '*'}",
              got[i])
        i += 1


def check_locals(check, who, frame, want):
    loc = (frame or {}).get("locals") or {}
    for k, v in want.items():
        got = loc.get(k, "<missing>")
        same = got == v and (type(got) is type(v) or isinstance(v, dict))
        check(same, f"{MODE}: {who}: local {k} == {v!r}", {"got": got, "all locals": loc})


def body(check):
    box = root.Box(f"dump-{MODE}", MODE)
    p = box.spawn(["python3", box.inside("job.py"), "park"], tag="park")
    info = box.ready("park", p)
    pid = info["host_pid"]
    tids = {k: (pid if v == info["pid"] and k == "main" else host_tid(pid, v)) for k, v in info["tids"].items()}
    root.wait_asleep(pid, "park's main thread", polls=True)
    root.log(f"park: host pid {pid}, host tids {tids}, Python {info.get('python')}")
    mk = root.markers(box.host("job.py"))
    job = box.inside("job.py")

    rep = root.hangdx_json("dump", "--json", "--locals", pid)
    check(rep.get("_exit") == 0, f"{MODE}: hangdx dump exits 0", rep.get("_exit"))
    check(rep.get("schema") == "hangdx.dump/1", f"{MODE}: schema hangdx.dump/1", rep.get("schema"))
    procs = [q for q in rep.get("processes") or [] if q.get("pid") == pid]
    if not check(len(procs) == 1, f"{MODE}: the dump has process {pid}",
                 [q.get("pid") for q in rep.get("processes") or []]):
        return
    proc = procs[0]
    minor = "3.11" if MODE == "host" else "3.13"
    thr = f"/usr/lib/python{minor}/threading.py"
    check(str(info.get("python")).startswith(minor), f"{MODE}: set-up: the target runs Python {minor}", info.get("python"))
    check(str(proc.get("python") or "").startswith(minor), f"{MODE}: python {minor}", proc.get("python"))
    threads = {t.get("tid"): t for t in proc.get("threads") or []}
    check(tids["main"] in threads and tids["worker"] in threads,
          f"{MODE}: threads main {tids['main']} and worker {tids['worker']} (host tids)", sorted(threads))
    main, worker = threads.get(tids["main"], {}), threads.get(tids["worker"], {})
    check(worker.get("name") == "hdx-worker", f"{MODE}: the worker thread is named hdx-worker", worker.get("name"))
    mf, wf = root.python_frames(main), root.python_frames(worker)
    for who, t, fr in (("main", main, mf), ("worker", worker, wf)):
        check(bool(fr), f"{MODE}: {who} thread has Python frames",
              {"native": [(f.get("function"), f.get("module")) for f in t.get("frames") or []][:8],
               "stack_error": t.get("stack_error"), "python": proc.get("python"), "notes": rep.get("notes")})
    check_frames(check, "main", mf, [("outer_sleep", job, mk["outer_sleep"]), ("case_park", job, mk["park_outer"]),
                                     ("main", job, None), ("<module>", job, None)])
    check_frames(check, "worker", wf, [("Condition.wait", thr, None), ("Event.wait", thr, None),
                                       ("leaf_wait", job, mk["leaf_wait"]), ("Thread.run", thr, None)])
    by_name = {f.get("function"): f for f in mf + wf}
    check_locals(check, "outer_sleep", by_name.get("outer_sleep"),
                 {"depth": 3, "word": "deep", "note": "deep-3", "box": {"type": "Box"}})
    check_locals(check, "leaf_wait", by_name.get("leaf_wait"),
                 {"count": 21, "label": "hello", "ratio": 0.5, "flag": True, "items": {"type": "list"}, "total": 42})
    text = root.hangdx("dump", "--locals", pid, quiet=True).stdout
    root.log("text dump:\n" + text[:3000])
    check("outer_sleep" in text and f"{job}:{mk['outer_sleep']}" in text,
          f"{MODE}: the text dump shows outer_sleep ({job}:{mk['outer_sleep']})", text[:1500])


if __name__ == "__main__":
    root.run_test(body)
