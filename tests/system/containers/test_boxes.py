#!/usr/bin/python3
"""The container tests' own machinery, without hangdx: the Debian 13 root is made (or found
cached), and each way of running in it gives what the other tests rely on.

  chroot:    Debian 13 and CPython 3.13 inside; the host's pids (the pid inside is the host's);
             /proc/PID/root of the process is the root (a container's reads as "/"); /proc/PID/maps, read from the host,
             names the interpreter by its host path (ROOT/usr/bin/python3.13);
  container: the command is pid 1, a second one joined to it (nsenter, as docker exec) is
             pid 2 or more of the same pid namespace; paths inside are the container's (maps
             read from the host name /usr/bin/python3.13); the job dir is one directory under
             both names; torch imports with USE_LIBUV=0;
  both:      nothing is left once the box is closed (sessions, namespaces), and no mount of
             ours shows on the host.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import root  # noqa: E402


def maps_paths(pid):
    with open(f"/proc/{pid}/maps") as f:
        return {l.split(None, 5)[5].strip() for l in f if len(l.split(None, 5)) == 6}


def body(check):
    for mode in ("chroot", "container"):
        box = root.Box(f"boxes-{mode}", mode)
        probe = ("import os, sys, threading, time\n"
                 "open(os.environ['HDX_JOB_DIR'] + '/hello', 'w').write("
                 "'%d %s %s' % (os.getpid(), sys.version.split()[0], open('/etc/debian_version').read().strip()))\n"
                 "time.sleep(3600)\n")
        p = box.spawn(["python3", "-c", probe], tag="probe")
        root.wait_for(lambda: os.path.exists(box.host("hello")), f"{mode}: the probe to write", 30)
        with open(box.host("hello")) as f:
            pid_in, pyver, debver = f.read().split()
        check(pyver.startswith("3.13."), f"{mode}: CPython 3.13 inside", pyver)
        check(debver.startswith("13."), f"{mode}: Debian 13 inside (/etc/debian_version)", debver)
        link = os.readlink(f"/proc/{p.host_pid}/root")
        if mode == "chroot":
            check(link == box.root, f"chroot: /proc/PID/root of the process is {box.root}", link)
        else:  # the root of a mount namespace the host cannot reach reads as "/"
            check(link == "/", "container: /proc/PID/root reads as / (a root the host cannot name)", link)
        with open(f"/proc/{p.host_pid}/root/etc/debian_version") as f:
            check(f.read().startswith("13."), f"{mode}: /proc/PID/root/etc/debian_version, read from the host, is 13")
        mp = maps_paths(p.host_pid)
        if mode == "chroot":
            check(int(pid_in) == p.host_pid, f"chroot: the pid inside is the host's ({p.host_pid})", pid_in)
            check(f"{box.root}/usr/bin/python3.13" in mp,
                  f"chroot: /proc/PID/maps names the interpreter by its host path {box.root}/usr/bin/python3.13",
                  sorted(mp)[:10])
        else:
            check(int(pid_in) == 1, "container: the command is pid 1 inside", pid_in)
            check("/usr/bin/python3.13" in mp, "container: /proc/PID/maps names /usr/bin/python3.13",
                  sorted(mp)[:10])
            q = box.spawn(["sh", "-c", 'echo "$$ $(cat /proc/1/cmdline | tr "\\0" " ")" > "$HDX_JOB_DIR/joined"; '
                           'exec sleep 3600'], tag="joined", join=p)
            root.wait_for(lambda: os.path.getsize(box.host("joined")) if os.path.exists(box.host("joined")) else 0,
                          "the joined process to write", 30)
            with open(box.host("joined")) as f:
                jpid, _, init_cmd = f.read().strip().partition(" ")
            check(int(jpid) > 1 and box.host_pid(p, int(jpid)) == q.host_pid,
                  f"container: a joined process is pid {jpid} of the same namespace (host pid {q.host_pid})",
                  (jpid, box.host_pid(p, int(jpid))))
            check("python3" in init_cmd, "container: its /proc/1 is the container's first process", init_cmd)
            t = box.spawn(["python3", "-c", "import torch, torch.distributed as d; "
                           "print('torch', torch.__version__, d.is_available())"], tag="torch", join=p)
            t.popen.wait(timeout=120)
            check(t.popen.returncode == 0 and "torch 2." in t.log(),
                  "container: torch 2.x imports (USE_LIBUV=0 set)", t.log()[-800:])
        check(box.inside("hello").startswith("/mnt/") and box.to_host(box.inside("hello")) == box.host("hello"),
              f"{mode}: the job dir file has two names: {box.inside('hello')} inside, {box.host('hello')} here")
        sessions = set(box.sessions)
        left = box.close()
        check(not left, f"{mode}: nothing left after close", left)
        check(not [q for q in root.pids() if (root.proc_stat(q) or (0, 0, 0))[2] in sessions],
              f"{mode}: no process of its sessions")
        with open("/proc/self/mountinfo") as f:
            ours = [l for l in f if box.root in l]
        check(not ours, f"{mode}: no mount under {box.root} on the host", ours)


if __name__ == "__main__":
    root.run_test(body)
