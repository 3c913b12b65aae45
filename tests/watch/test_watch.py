#!/usr/bin/python3
"""hangdx run --hang-timeout on real jobs (issue 6).

usage: test_watch.py CASE
  lock_report   a cpp_extension.load on a build directory with a stale lock: DIR/report.json
                appears (build_lock, that lock path), the summary is on stderr, the job runs on
  lock_kill     the same with --on-hang kill: exit 124, nothing of the job left
  collective    tests/distributed/launch.py collective_skip (3 gloo ranks in sessions of their
                own) with --on-hang kill: collective_wait, culprit [2], exit 124, nothing left
  healthy       a job printing a line a second for 12 s (--hang-timeout 4), and one burning
                CPU silently for 10 s: never reported, their own exit status
Bounds are generous (a report within 60 s); nothing here times a step tightly.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HDX_SOURCE_DIR") or os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(SRC, "tests", "scenarios"))
from hdxscen import (PYTHON, SKIP, Failure, alive, check, find_lock, hangdx_bin, kill_session,  # noqa: E402
                     log, need_torch, session_members, wait_for)

LOADER = os.path.join(SRC, "tests", "scenarios", "loader.py")
LAUNCH = os.path.join(SRC, "tests", "distributed", "launch.py")


class Job:
    """hangdx run ... in a session of its own, stdout and stderr into files."""

    def __init__(self, tmp, args, env=None):
        self.out = os.path.join(tmp, "stdout")
        self.err = os.path.join(tmp, "stderr")
        e = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        e.update(env or {})
        with open(self.out, "wb") as o, open(self.err, "wb") as er:
            self.p = subprocess.Popen([hangdx_bin(), "run"] + args, stdout=o, stderr=er,
                                      env=e, cwd=tmp, start_new_session=True)
        self.sid = self.p.pid
        log(f"started hangdx run {' '.join(args)} (pid {self.p.pid})")

    def stderr(self):
        with open(self.err, errors="replace") as f:
            return f.read()

    def stdout(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def wait(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Failure(f"hangdx run still running after {timeout} s\nstderr: {self.stderr()}")

    def close(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)  # passed on to the job
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        kill_session(self.sid)
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def read_report(d, timeout=60.0):
    path = os.path.join(d, "report.json")
    wait_for(lambda: os.path.exists(path), f"{path} to appear", timeout, 0.2)
    with open(path) as f:
        rep = json.load(f)
    check(os.path.exists(os.path.join(d, "report.txt")), "report.txt is there too")
    return rep


def job_pids_left(pids):
    return [p for p in pids if alive(p)]


def stale_lock(tmp):
    build = os.path.join(tmp, "fused", "build")
    os.makedirs(build)
    lock = os.path.join(build, "lock")
    open(lock, "w").close()
    src = os.path.join(tmp, "watchext.cpp")
    with open(src, "w") as f:
        f.write('#include <Python.h>\n'
                'static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "watchext", NULL, -1, NULL};\n'
                'PyMODINIT_FUNC PyInit_watchext(void) { return PyModule_Create(&def); }\n')
    cmd = [PYTHON, LOADER, "--build-dir", build, "--name", "watchext", "--source", src,
           "--pidfile", os.path.join(tmp, "loader.pid")]
    return lock, cmd


def check_lock_verdict(rep, lock, err):
    v = rep.get("verdict") or {}
    check(v.get("class") == "build_lock", "verdict.class == build_lock", v)
    check(find_lock(rep, lock) is not None, f"the report names the lock {lock}", rep.get("locks"))
    check("hangdx: build_lock:" in err, "the summary is on stderr", err)


def case_lock_report(tmp):
    need_torch()
    lock, cmd = stale_lock(tmp)
    d = os.path.join(tmp, "dx")
    job = Job(tmp, ["--hang-timeout", "5", "-d", d, "--"] + cmd)
    try:
        rep = read_report(d)
        wait_for(lambda: "report in" in job.stderr(), "the summary on stderr", 30, 0.2)
        check_lock_verdict(rep, lock, job.stderr())
        check(job.p.poll() is None, "--on-hang report: the job runs on after the report")
        first = os.stat(os.path.join(d, "report.json")).st_mtime_ns
        time.sleep(8)  # more than SEC: a job that made no progress gets no second report
        check(os.stat(os.path.join(d, "report.json")).st_mtime_ns == first,
              "no new report while the hang goes on", job.stderr())
        check(job.stderr().count("hangdx: build_lock:") == 1, "one summary on stderr", job.stderr())
        check("loading watchext" in job.stdout(), "the job's output passed through", job.stdout())
    finally:
        job.close()


def case_lock_kill(tmp):
    need_torch()
    lock, cmd = stale_lock(tmp)
    d = os.path.join(tmp, "dx")
    job = Job(tmp, ["--hang-timeout", "5", "--on-hang", "kill", "-d", d, "--"] + cmd)
    try:
        rc = job.wait(120)
        err = job.stderr()
        check(rc == 124, "exit status 124", f"{rc}\n{err}")
        check_lock_verdict(read_report(d, 1), lock, err)
        with open(os.path.join(tmp, "loader.pid")) as f:
            loader = int(f.read())
        check(not alive(loader), f"the job's process {loader} is gone")
        check(not session_members(job.sid), "nothing of the job is left", session_members(job.sid))
    finally:
        job.close()


def case_collective(tmp):
    need_torch()
    d = os.path.join(tmp, "dx")
    job = Job(tmp, ["--hang-timeout", "5", "--on-hang", "kill", "-d", d, "--",
                    PYTHON, LAUNCH, "collective_skip"])
    try:
        rc = job.wait(180)
        err, out = job.stderr(), job.stdout()
        check(rc == 124, "exit status 124", f"{rc}\nstderr: {err}\nstdout: {out}")
        rep = read_report(d, 1)
        v = rep.get("verdict") or {}
        check(v.get("class") == "collective_wait", "verdict.class == collective_wait", v)
        check(v.get("culprit_ranks") == [2], "culprit ranks [2]", v)
        ranks = [int(l.split("pid")[1]) for l in out.splitlines() if l.strip().startswith("rank ")]
        check(len(ranks) == 3, "launch.py's output (the 3 ranks' pids) passed through", out)
        check(not job_pids_left(ranks), "no rank is left (they ran in sessions of their own)",
              job_pids_left(ranks))
        check(not session_members(job.sid), "nothing of the job is left", session_members(job.sid))
    finally:
        job.close()


def case_healthy(tmp):
    d1 = os.path.join(tmp, "dx1")
    t0 = time.monotonic()
    job = Job(tmp, ["--hang-timeout", "4", "-d", d1, "--", sys.executable, "-c",
                    "import time\nfor i in range(12):\n    print('step', i, flush=True); time.sleep(1)\n"
                    "raise SystemExit(7)"])
    try:
        rc = job.wait(120)
        check(rc == 7, "a job printing a line a second: its own exit status 7", f"{rc} {job.stderr()}")
        check(time.monotonic() - t0 >= 11, "it ran longer than the timeout")
        check(not os.path.exists(os.path.join(d1, "report.json")), "no report", job.stderr())
        check("hangdx:" not in job.stderr(), "nothing from hangdx on stderr", job.stderr())
        check(job.stdout() == "".join(f"step {i}\n" for i in range(12)), "its output, whole and in order",
              job.stdout())
    finally:
        job.close()

    os.makedirs(os.path.join(tmp, "b"))
    d2 = os.path.join(tmp, "dx2")
    job = Job(os.path.join(tmp, "b"), ["--hang-timeout", "4", "-d", d2, "--", sys.executable, "-c",
                                      "import time\nt = time.monotonic()\n"
                                      "while time.monotonic() - t < 10: pass\nraise SystemExit(5)"])
    try:
        rc = job.wait(120)
        check(rc == 5, "a job burning CPU silently for 10 s: its own exit status 5", f"{rc} {job.stderr()}")
        check(not os.path.exists(os.path.join(d2, "report.json")), "no report", job.stderr())
        check("hangdx:" not in job.stderr(), "nothing from hangdx on stderr", job.stderr())
    finally:
        job.close()


CASES = {"lock_report": case_lock_report, "lock_kill": case_lock_kill,
         "collective": case_collective, "healthy": case_healthy}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(__doc__)
        return 64
    tmp = tempfile.mkdtemp(prefix=f"hdx-watch-{sys.argv[1]}-")
    try:
        CASES[sys.argv[1]](tmp)
    except Failure as e:
        print(e)
        print(f"(kept {tmp})")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
