#!/usr/bin/python3
"""Self-test of the distributed hang fixtures: every case of hangs.py really hangs the way
launch.CASES says, so that a hangdx test that fails on one of them fails because of hangdx.

Starts every case at once (their ranks only wait once started, so they do not compete for
the CPU for long), then checks each rank, without hangdx:
- it is alive and its log shows no Python exception or fatal error;
- its kind of wait, from /proc: a gloo wait sleeps in futex, a culprit in time.sleep sleeps
  in clock_nanosleep, a rendezvous waits in the TCPStore; the process's CPU time stays flat
  over the watch (a computing rank's grows instead);
- its main thread's Python stack (faulthandler, on SIGUSR1) has the expected frames;
- and that the dump disturbed nothing: it still waits the same way afterwards.
Prints the wall time of the whole run and the CPU load. Exit 0 when all hold, 1 when one
fails, 77 (skip) when the machine lacks Debian's python3-torch with gloo.

usage: /usr/bin/python3 selftest_hangs.py [--cases a,b] [--timeout S] [--gdb] [--show-stacks]
  --gdb          also take each rank's native and Python stack with gdb (slow: ~4 s a rank)
  --show-stacks  print every rank's faulthandler dump
"""

import argparse
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402

SKIP = 77
_SYSCALLS = {
    "x86_64": {"futex": 202, "clock_nanosleep": 230, "nanosleep": 35, "recvfrom": 45, "read": 0,
               "poll": 7, "ppoll": 271, "epoll_wait": 232, "accept": 43, "accept4": 288},
    "aarch64": {"futex": 98, "clock_nanosleep": 115, "nanosleep": 101, "recvfrom": 207, "read": 63,
                "ppoll": 73, "epoll_pwait": 22, "accept": 202, "accept4": 242},
}
SC = _SYSCALLS.get(platform.machine(), _SYSCALLS["x86_64"])
SLEEPS = {SC["clock_nanosleep"], SC["nanosleep"]}
EXPECT_SYSCALL = {
    "gloo": {SC["futex"]},
    "sleep": SLEEPS,
    "store": SLEEPS | {SC[k] for k in ("recvfrom", "read", "poll", "ppoll", "epoll_wait", "epoll_pwait",
                                      "accept", "accept4", "futex") if k in SC},
}
HZ = os.sysconf("SC_CLK_TCK")
WATCH_S = 2.0            # how long CPU time is watched
IDLE_MAX = 0.10          # a waiting rank may use at most this share of a core (TCPStore polls)
BUSY_MIN = 0.20          # a computing rank must use at least this share of a core


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def need_torch():
    if not os.access(launch.PYTHON, os.X_OK):
        print(f"SKIP: {launch.PYTHON} not found (run scripts/setup)")
        sys.exit(SKIP)
    r = subprocess.run([launch.PYTHON, "-c", "import torch.distributed as d, torch.utils.cpp_extension; "
                        "assert d.is_available() and d.is_gloo_available()"], capture_output=True)
    if r.returncode != 0:
        print(f"SKIP: {launch.PYTHON} lacks torch.distributed with gloo (python3-torch; run scripts/setup)")
        sys.exit(SKIP)


class Checker:
    def __init__(self):
        self.failures = []

    def check(self, cond, what, got=None):
        if not cond:
            self.failures.append(what + ("" if got is None else f"\n    got: {got}"))
            log(f"FAILED: {what}" + ("" if got is None else f" (got: {got})"))
        return cond


def sample_waits(jobs):
    """{(case, rank): (main thread state, syscall nr, raw syscall line, wchan)} now."""
    out = {}
    for job in jobs:
        for r, pid in job.pids.items():
            nr, line = launch.main_syscall(pid)
            out[(job.case, r)] = (launch.proc_state(pid), nr, line, launch.wchan(pid))
    return out


def check_waits(c, jobs, when):
    """Each rank alive, without errors, in the kind of wait its case says; the samples are
    taken several times, and a waiting rank must be in its wait in most of them (a sleep loop,
    such as a FileBaton waiter's 0.1 s polls, may be caught awake once on a loaded machine). A
    TCPStore poll loop wakes every few ms, and on a loaded machine stays runnable until a core
    is free: it must be caught in its wait once and be runnable, never stopped, otherwise
    (check_cpu holds its CPU time flat)."""
    samples = []
    for _ in range(5):
        samples.append(sample_waits(jobs))
        time.sleep(0.1)
    for job in jobs:
        errs = job.errors()
        for r, pid in job.pids.items():
            kind = job.spec["wait"][r]
            name = f"{job.case} rank {r} (pid {pid}, {kind}) {when}"
            if not c.check(job.alive(r), f"{name}: alive", launch.proc_state(pid)):
                continue
            c.check(r not in errs, f"{name}: no error in its log", errs.get(r, "")[-1500:])
            if kind == "busy":
                continue
            mine = [s[(job.case, r)] for s in samples]
            good = [s for s in mine if s[0] == "S" and s[1] in EXPECT_SYSCALL[kind]]
            if kind == "store":
                need, what = 1, ", and runnable in the others"
                # runnable: its state R, or its syscall file "running" (the state, read just
                # before, may still say S)
                runnable = all(s in good or s[0] == "R" or s[2] == "running" for s in mine)
            else:
                need, what = len(mine) - 1 if kind == "sleep" else len(mine), ""
                runnable = True
            c.check(len(good) >= need and runnable, f"{name}: main thread sleeps in {kind} "
                    f"(syscalls {sorted(EXPECT_SYSCALL[kind])}) in {need}/{len(mine)} samples{what}",
                    [(s[0], s[2][:24], s[3]) for s in mine])


def check_cpu(c, jobs):
    """Over WATCH_S seconds: waiting ranks' CPU time stays flat, computing ranks' grows."""
    before = {(j.case, r): launch.cpu_ticks(p) for j in jobs for r, p in j.pids.items()}
    t0 = time.monotonic()
    time.sleep(WATCH_S)
    dt = time.monotonic() - t0
    shares = {}
    for job in jobs:
        for r, pid in job.pids.items():
            a, b = before[(job.case, r)], launch.cpu_ticks(pid)
            if a is None or b is None:
                continue  # check_waits reports the dead
            share = (b - a) / HZ / dt
            shares[(job.case, r)] = share
            kind = job.spec["wait"][r]
            if kind == "busy":
                c.check(share >= BUSY_MIN, f"{job.case} rank {r}: computing uses >= {BUSY_MIN:.0%} of a core",
                        f"{share:.0%}")
            else:
                c.check(share <= IDLE_MAX, f"{job.case} rank {r}: waiting uses <= {IDLE_MAX:.0%} of a core",
                        f"{share:.0%}")
    return shares


def check_stacks(c, jobs, show):
    got = {}
    for job in jobs:
        try:
            stacks = job.python_stacks(timeout=20)
        except launch.LaunchError as e:
            c.check(False, str(e))
            continue
        for r in job.ranks:
            want = job.spec["stacks"][r]
            st = stacks.get(r, [])
            got[(job.case, r)] = st
            c.check(launch.stack_matches(st, want),
                    f"{job.case} rank {r}: Python stack has {' <- '.join(want)}", " <- ".join(st))
            if show:
                print(f"--- {job.case} rank {r}\n{job.last_dumps.get(r, '').rstrip()}")
    return got


def gdb_stacks(jobs):
    for job in jobs:
        for r, pid in job.pids.items():
            t = time.monotonic()
            try:
                p = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                                    "-ex", "bt 12", "-ex", "py-bt"], capture_output=True, text=True, timeout=120)
                out = p.stdout
            except (OSError, subprocess.TimeoutExpired) as e:
                out = f"gdb failed: {e}"
            frames = []
            for line in out.splitlines():
                if line.startswith("#"):
                    parts = line.split(" in ", 1)
                    fn = (parts[1] if len(parts) > 1 else line.split(None, 1)[1]).split(" (")[0]
                    frames.append(fn)
                elif line.strip().startswith(("File ", "<built-in")):
                    frames.append("py: " + line.strip())
            print(f"--- gdb {job.case} rank {r} ({time.monotonic() - t:.1f} s)")
            for f in frames:
                print(f"    {f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", help="comma-separated cases (default: all)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds for all ranks to be ready")
    ap.add_argument("--gdb", action="store_true")
    ap.add_argument("--show-stacks", action="store_true")
    a = ap.parse_args()
    need_torch()
    cases = a.cases.split(",") if a.cases else list(launch.CASES)
    unknown = [x for x in cases if x not in launch.CASES]
    if unknown:
        sys.exit(f"unknown cases: {unknown}")

    t0 = time.monotonic()
    cpu0 = os.times()
    c = Checker()
    jobs = []
    try:
        # Every case at once, except the computing one: started after the hangs exist, it
        # does not take the CPU from their start-up (dozens of torch imports on 2 cores).
        busy = [x for x in cases if "busy" in launch.CASES[x]["wait"].values()]
        for wave in ([x for x in cases if x not in busy], busy):
            started = [launch.spawn_case(x) for x in wave]
            jobs += started
            launch.wait_ready_all(started, timeout=max(30.0, a.timeout - (time.monotonic() - t0)), grace=1.0)
            for job in started:
                log(f"{job.case}: ready {job.ready_at - t0:5.1f} s after the start; "
                    f"ranks {job.pids}; master {job.master}")
        nprocs = sum(len(j.pids) for j in jobs)
        log(f"{len(jobs)} cases, {nprocs} ranks up after {time.monotonic() - t0:.1f} s; "
            f"load average {os.getloadavg()[0]:.1f}")

        check_waits(c, jobs, "before the stack dump")
        shares = check_cpu(c, jobs)
        stacks = check_stacks(c, jobs, a.show_stacks)
        time.sleep(0.5)
        check_waits(c, jobs, "after the stack dump")
        if a.gdb:
            gdb_stacks(jobs)

        print("\ncase                 id         rank  wait   cpu    main-thread Python stack (innermost first)")
        for job in jobs:
            for r in job.ranks:
                st = stacks.get((job.case, r), [])
                st = st[:st.index("main")] if "main" in st else st
                print(f"{job.case:20} {job.spec['id']:10} {r:4}  {job.spec['wait'][r]:6} "
                      f"{shares.get((job.case, r), float('nan')):5.0%}  {' <- '.join(st)}")
    except launch.LaunchError as e:
        c.check(False, f"start: {e}")
    finally:
        launch.stop_all()
    leftover = [p for j in jobs for p in j.pids.values() if launch._alive(p)]
    c.check(not leftover, "every rank is gone after stop()", leftover)

    wall = time.monotonic() - t0
    cpu1 = os.times()
    child_cpu = (cpu1.children_user + cpu1.children_system) - (cpu0.children_user + cpu0.children_system)
    log(f"wall time {wall:.1f} s; ranks' CPU {child_cpu:.1f} s "
        f"({child_cpu / wall:.2f} cores on average, {os.cpu_count()} here); "
        f"load average {os.getloadavg()[0]:.1f}")
    if c.failures:
        print(f"\n{len(c.failures)} check(s) failed:")
        for f in c.failures:
            print(f"  - {f}")
        return 1
    print("all fixtures hang as they claim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
