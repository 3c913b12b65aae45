#!/usr/bin/python3
"""A stale build lock on a container's own /tmp, with a namesake on the host: hangdx checks and
cleans the container's file, never the host's.

usage: test_namesake.py container

One container (a pod: its pid 1 an init, the job run in it as `docker exec` does) of the Debian
13 root. A process in it, with the shim preloaded and HANGDX_TRACE_DIR=/mnt/<job>/traces (the
host's <job dir>/traces bound there), creates <d>/build/lock with O_CREAT|O_EXCL (as a
FileBaton does) on the container's private tmpfs /tmp, and exits without releasing it: a stale
lock. The host has its own file at the same path (the namesake, as when host and image share
~/.cache/torch_extensions). Expected, as a user checks:
  - while the container lives, `locks --json -d TRACES` names the container's file (not the
    namesake) as stale, with job_path the path inside; `locks --clean-stale -d TRACES`
    deletes it and leaves the namesake;
  - `locks --clean-stale --force /proc/<pid 1>/root<d>/build` deletes the container's lock
    again made, never the namesake (the magic link is not resolved to the host's /);
  - once the container is gone (its mount namespace with it), with a waiter that polled the
    lock (O_EXCL retried) in it, the lock is a path of that container: `locks -d TRACES` and `analyze` name its mount namespace, the remedy says to
    delete it in the container's file system and never on this host, and
    `locks --clean-stale --force -d TRACES` deletes nothing.
"""
import json
import os
import shutil
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import root  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "container"
if MODE != "container":
    sys.exit(f"usage: {sys.argv[0]} container")


def body(check):
    box = root.Box("namesake", "container")
    traces = box.host("traces")
    os.mkdir(traces, 0o700)
    os.makedirs(box.host("lib"))
    shutil.copy(root.preload_lib(), box.host("lib", "libhangdx-preload.so"))
    d = f"/tmp/hdx-namesake-{os.getpid()}"
    lock = f"{d}/build/lock"
    os.makedirs(os.path.dirname(lock))  # the namesake, on the host
    with open(lock, "w") as f:
        f.write("the host's own file\n")
    try:
        init = box.spawn(["python3", box.inside("job.py"), "init"], tag="init")
        box.ready("init", init)
        via = f"/proc/{init.host_pid}/root{lock}"
        # it lingers a second after making the lock: box.spawn finds a command's host pid by
        # polling nsenter's children, and a maker that had already exited was taken as failed
        make = ("import os, time; os.makedirs(os.path.dirname(%r), exist_ok=True); "
                "os.open(%r, os.O_CREAT | os.O_EXCL | os.O_WRONLY); time.sleep(1)" % (lock, lock))

        def make_lock(tag):
            p = box.spawn(["env", f"LD_PRELOAD={box.inside('lib', 'libhangdx-preload.so')}",
                           f"HANGDX_TRACE_DIR={box.inside('traces')}", "python3", "-c", make], tag=tag, join=init)
            root.wait_for(lambda: os.path.exists(via) and not p.alive(), f"{tag} to make the lock and exit", 60)

        make_lock("maker")
        check(open(lock).read() == "the host's own file\n", "set-up: the namesake is the host's file")

        lst = root.hangdx_json("locks", "--json", "-d", traces)
        locks = lst.get("locks") or []
        root.log(f"locks --json: {json.dumps(locks)[:1500]}")
        lk = next((l for l in locks if l.get("job_path") == lock or l.get("path") == via), None)
        check(lk is not None and lk.get("path") != lock,
              f"live container: the lock is named by a path of the container's file, not the namesake {lock}",
              [(l.get("path"), l.get("job_path")) for l in locks])
        if lk:
            check(lk.get("state") == "stale" and lk.get("job_path") == lock,
                  f"live container: stale, job_path {lock}", (lk.get("state"), lk.get("job_path")))
        r = root.hangdx("locks", "--clean-stale", "-d", traces)
        check(not os.path.exists(via), f"live container: locks --clean-stale deleted the container's lock ({via})",
              r.stderr.strip())
        check(os.path.exists(lock), f"live container: ... and left the host's namesake {lock}")

        make_lock("maker2")
        r = root.hangdx("locks", "--clean-stale", "--force", f"/proc/{init.host_pid}/root{d}/build")
        check(not os.path.exists(via), f"locks --clean-stale --force /proc/{init.host_pid}/root{d}/build deleted "
              "the container's lock", r.stdout + r.stderr)
        check(os.path.exists(lock), f"... and left the host's namesake {lock}", r.stdout)

        make_lock("maker3")
        wait = ("import os, time\nwhile True:\n    try:\n        os.open(%r, os.O_CREAT | os.O_EXCL | os.O_WRONLY); break\n"
                "    except FileExistsError:\n        time.sleep(0.2)" % lock)
        waiter = box.spawn(["env", f"LD_PRELOAD={box.inside('lib', 'libhangdx-preload.so')}",
                            f"HANGDX_TRACE_DIR={box.inside('traces')}", "python3", "-c", wait], tag="waiter", join=init)
        root.wait_for(lambda: waiter.host_pid and any("eexist" in open(os.path.join(traces, f)).read()
                                                      for f in os.listdir(traces)), "the waiter to wait", 60)
        ns = os.readlink(f"/proc/{init.host_pid}/ns/mnt")
        os.kill(init.host_pid, signal.SIGKILL)  # pid 1: the whole container goes
        root.wait_for(lambda: not init.alive(), "the container to end", 30)
        lst = root.hangdx("locks", "-d", traces)
        check(ns.split("[")[1].rstrip("]") in lst.stdout and "whose processes are all gone" in lst.stdout,
              f"gone container: locks names its mount namespace {ns}", lst.stdout)
        rep = root.hangdx_json("analyze", "--json", traces)
        lk = next((l for l in rep.get("locks") or [] if l.get("path") == lock), None)
        check(lk is not None and lk.get("foreign") is True and lk.get("mnt_ns") == int(ns.split("[")[1].rstrip("]")),
              "gone container: analyze gives the lock as foreign, with the container's mount namespace", lk)
        remedy = (rep.get("verdict") or {}).get("remedy") or ""
        check("never a file of that name on this host" in remedy and f"rm {lock}" not in remedy,
              "gone container: the remedy says to delete it in the container, never here", remedy)
        r = root.hangdx("locks", "--clean-stale", "--force", "-d", traces)
        check(open(lock).read() == "the host's own file\n",
              "gone container: locks --clean-stale --force left the host's namesake", r.stdout + r.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    root.run_test(body)
