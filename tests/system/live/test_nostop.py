"""hangdx inspect, snapshot and dump of a job whose threads all wait, through the command.

    HANGDX=build/bin/hangdx /usr/bin/python3 tests/system/live/test_nostop.py build/tests/bin/eintr_target

eintr_target's threads wait in epoll_wait, accept and recv with SO_RCVTIMEO, sigtimedwait
and semtimedop: calls that a ptrace stop breaks with EINTR. hangdx reads the stacks of
threads that wait in the kernel without stopping them (stacks.c). After ROUNDS runs of each
command: no call returned EINTR (the target counts them), every report says n_stopped 0 and
stopped_us 0, each thread's native stack holds the function that makes its call (wait_epoll,
...), and no thread is left traced or stopped. Exit 0 passed, 1 failed, 77 skipped.

For BENCHMARKS.md, with any hangdx build (an older one too):
    HANGDX=... test_nostop.py --measure N EINTR_TARGET   N runs of each command, a fresh target each
    HANGDX=... test_nostop.py --measure N --pid PID...   the same on running processes (no EINTR count)
print, per command: the median wall time, the stops hangdx reports (n_stopped, when its JSON has
it), the wakeups of the target's threads (their context switches / 2: a stop wakes a waiting
thread and puts it back to sleep; a thread read without a stop does not run at all), beyond
those the target makes on its own (its rate over 2 s before the runs), and the EINTRs the
target counted, each per run.
"""
import os
import subprocess
import sys
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import report_frames  # noqa: E402  (each thread's frames, from a report of either version)

ROUNDS = 60
HANGDX = os.environ.get("HANGDX")
CALLERS = {"epoll": "wait_epoll", "accept": "wait_accept", "recv": "wait_recv", "sigtw": "wait_sigtimedwait",
           "semop": "wait_semop"}


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def task_status(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                st = dict(l.split(":", 1) for l in f if ":" in l)
        except FileNotFoundError:
            continue
        out[int(tid)] = (st["State"].strip()[0], int(st["TracerPid"].strip()))
    return out


def functions(thread, doc):
    """The native function names of a thread's stack, innermost first."""
    out = []
    for f in thread.get("frames") or []:
        if isinstance(f, int):  # hangdx.snapshot/2: [kind, function, ...] in "frames", names in "strings"
            kind, fn = doc["frames"][f][:2]
            if kind == 0 and fn is not None:
                out.append(doc["strings"][fn])
        elif f.get("kind", "native") == "native" and f.get("function"):
            out.append(f["function"])
    return out


def check_report(doc, pid, tids, what):
    procs = [p for p in doc["processes"] if p["pid"] == pid]
    check(procs, "%s: the report has process %d" % (what, pid))
    p = procs[0]
    check(p.get("n_stopped") == 0, "%s: %s threads stopped, want 0 (every thread waits)" % (what, p.get("n_stopped")))
    check(p.get("stopped_us") == 0 and p.get("max_stop_us") == 0,
          "%s: stopped_us %s, max_stop_us %s, want 0" % (what, p.get("stopped_us"), p.get("max_stop_us")))
    threads = {t["tid"]: t for t in p["threads"]}
    for name, tid in tids.items():
        check(tid in threads, "%s: thread %d (%s) is in the report" % (what, tid, name))
        fns = functions(threads[tid], doc)
        check(CALLERS[name] in fns and "thread_main" in fns and "start_thread" in fns,
              "%s: thread %d (%s) waits in %s, called from thread_main: %s" % (what, tid, name, CALLERS[name], fns))
    fns = functions(threads[pid], doc)
    check("wait_stdin" in fns and "main" in fns, "%s: the main thread waits in wait_stdin: %s" % (what, fns))


def wait_in_calls(pid, timeout=20):
    """Until every thread of pid is blocked in a system call (/proc/PID/task/TID/syscall is not
    "running"): the target prints "ready" just before its main thread enters read(2), and on a
    loaded machine a thread that still runs at the first inspection would be stopped, rightly."""
    deadline = time.monotonic() + timeout
    while True:
        running = []
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                    if f.read().split()[0] == "running":
                        running.append(int(tid))
            except (FileNotFoundError, IndexError):
                pass
        if not running:
            return
        check(time.monotonic() < deadline, "threads %s of the target still run after %d s" % (running, timeout))
        time.sleep(0.01)


def switches(pids):
    """Context switches of every thread of pids, summed."""
    total = 0
    for pid in pids:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                    total += sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
            except FileNotFoundError:
                pass
    return total


def measure(n, target, pids):
    for cmd in (["inspect", "--json"], ["snapshot"], ["dump", "--json"]):
        proc = None
        if target:
            proc = subprocess.Popen([target], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            proc.stdout.readline()
            pids = [proc.pid]
        time.sleep(0.2)
        walls, stops = [], []
        idle0, t_idle = switches(pids), time.monotonic()
        time.sleep(2)  # the job's own wakeups per second, taken out below
        idle = (switches(pids) - idle0) / (time.monotonic() - t_idle)
        before, t_before = switches(pids), time.monotonic()
        for _ in range(n):
            t0 = time.monotonic()
            r = subprocess.run([HANGDX] + cmd + [str(p) for p in pids], capture_output=True, text=True)
            walls.append(time.monotonic() - t0)
            procs = [q for q in report_frames.loads(r.stdout)["processes"] if q["pid"] in pids]
            stops.append(sum(q["n_stopped"] for q in procs) if all("n_stopped" in q for q in procs) else None)
        wakeups = max(0.0, switches(pids) - before - idle * (time.monotonic() - t_before)) / 2 / n
        eintr = "-"
        if proc:
            out, _ = proc.communicate("stop\n", timeout=20)
            eintr = "%.1f" % (int(out.strip().splitlines()[-1].split("=")[1]) / n)
        walls.sort()
        print("%-16s %d runs: median %.0f ms, n_stopped %s, thread wakeups %.1f, EINTR %s (per run)"
              % (" ".join(cmd), n, walls[n // 2] * 1000,
                 "%.1f" % (sum(stops) / n) if None not in stops else "(not reported)", wakeups, eintr))
    return 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--measure" and HANGDX:
        n = int(sys.argv[2])
        if sys.argv[3] == "--pid":
            return measure(n, None, [int(a) for a in sys.argv[4:]])
        return measure(n, sys.argv[3], None)
    if len(sys.argv) != 2 or not HANGDX:
        print("skipped: usage: HANGDX=... test_nostop.py EINTR_TARGET (ctest sets HANGDX)")
        return 77
    target = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        words = target.stdout.readline().split()
        check(words and words[0] == "ready" and len(words) == 6, "the target did not start: %s" % words)
        tids = dict(zip(CALLERS, map(int, words[1:])))
        pid = target.pid
        wait_in_calls(pid)
        t0 = time.monotonic()
        for cmd in (["inspect", "--json"], ["snapshot"], ["dump", "--json"]):
            c0 = time.monotonic()
            for k in range(ROUNDS):
                r = subprocess.run([HANGDX] + cmd + [str(pid)], capture_output=True, text=True, timeout=30)
                what = "%s #%d" % (" ".join(cmd), k + 1)
                check(r.returncode == 0, "%s: status %d; stderr:\n%s" % (what, r.returncode, r.stderr))
                if k in (0, ROUNDS - 1) or k % 10 == 5:
                    check_report(report_frames.loads(r.stdout), pid, tids, what)
                else:
                    # every run: nothing stopped
                    doc = report_frames.loads(r.stdout)
                    p = [q for q in doc["processes"] if q["pid"] == pid][0]
                    check(p.get("n_stopped") == 0, "%s: %s threads stopped" % (what, p.get("n_stopped")))
                bad = [(t, s) for t, s in task_status(pid).items() if s[1] != 0 or s[0] in "tT"]
                check(not bad, "%s: threads left traced or stopped: %s" % (what, bad))
            print("%d x hangdx %s: no thread stopped, %.2f s each" % (ROUNDS, " ".join(cmd),
                                                                      (time.monotonic() - c0) / ROUNDS), flush=True)
        out, _ = target.communicate("stop\n", timeout=20)
        lines = out.strip().splitlines()
        print("target: " + " | ".join(lines))
        counts = dict(l.split(" ", 1) for l in lines)
        check(counts.get("total") == "eintr=0", "the target's calls returned EINTR after %d inspections: %s"
              % (3 * ROUNDS, lines))
        for name in CALLERS:
            check(counts.get(name, "").endswith("eintr=0"), "%s: %s" % (name, counts.get(name)))
        print("ok: %d inspect, snapshot and dump runs in %.1f s: no EINTR, no stop"
              % (3 * ROUNDS, time.monotonic() - t0))
        return 0
    except Fail as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()


if __name__ == "__main__":
    sys.exit(main())
