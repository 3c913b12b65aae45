#!/usr/bin/python3
"""hangdx run --hang-timeout on real jobs.

usage: test_watch.py CASE
  lock_report   a cpp_extension.load on a build directory with a stale lock: DIR/report.json
                appears (build_lock, that lock path), the summary is on stderr, the job runs on
  lock_kill     the same with --on-hang kill: exit 124, nothing of the job left
  collective    tests/system/distributed/launch.py collective_skip (3 gloo ranks in sessions of their
                own) with --on-hang kill: collective_wait, culprit [2], exit 124, nothing left
  healthy       a job printing a line a second for 12 s (--hang-timeout 4), and a pure-Python
                loop calling functions at varying depths silently for 20 s (--hang-timeout 5
                --on-hang kill): never captured (nothing from hangdx on stderr), never reported
                nor killed, their own exit status and output
  frozen_busy   a job silent for longer than SEC while its main thread spins in one native call
                (spin.c through ctypes, no name hangdx knows): its Python stack does not move,
                so one capture checks it: not_hung on stderr, no report, the job runs on and
                ends with its own status and output
  spin_wait     a single rank (RANK=0, WORLD_SIZE=1) whose main thread spins in a stand-in for
                cudaStreamSynchronize (spin.c: CUDA's host wait for a stuck kernel, CPU-only)
                with --on-hang kill: reported as collective_wait within SEC + 30 s; killed (exit
                124) when the report's confidence is medium or high, else left running
  gpu_stuck_fixture  hangdx analyze of the NCCL hang recorded on an H200 (a rank spinning in
                cuStreamSynchronize, state R, CPU time growing): collective_wait
  kill_finally  --on-hang kill on a process waiting on a stale lock inside a try/finally that
                removes a FileBaton lock it took (jobs.py finally): exit 124, build_lock; the kill
                came only after a second capture confirmed the first; report.txt was there when
                SIGINT came; the finally ran (its lock is gone); SIGINT alone ended it
  kill_spares_spin  --on-hang kill on a job whose one process computes in a native loop (spin.c):
                not_hung at every capture; after three captures it still runs, unkilled
  kill_spares_computing  --on-hang kill on 2 gloo ranks, rank 0 computing in a native loop while
                rank 1 waits for it in a barrier (the culprit works): after three captures both
                still run, unkilled; they finish when the test lets rank 0 go
  first_build   --on-hang kill (SEC 5) on a first build: rank 0 JIT-compiles a real extension
                (<torch/extension.h>, far longer than SEC) while rank 1 waits in a gloo barrier,
                as Megatron-LM does: never killed, both ranks load the module, exit 0, no lock left
Bounds are generous (a report within 60 s); nothing here times a step tightly. The one bound
frozen_busy relies on: the test ends the spin within SEC (10 s) of the first verdict, so that
no second check comes.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import report_frames  # noqa: E402  (each thread's frames, from a report of either version)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HDX_SOURCE_DIR") or os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(SRC, "tests", "system", "scenarios"))
from hdxscen import (PYTHON, SKIP, Failure, alive, check, find_lock, hangdx_bin, kill_session,  # noqa: E402
                     log, need_torch, session_members, wait_for)

LOADER = os.path.join(SRC, "tests", "system", "scenarios", "loader.py")
NCCL_FIXTURES = os.path.join(SRC, "tests", "fixtures", "nccl-h200")

# A job whose main thread calls one native busy loop of spin.c (argv: the library, the
# function) from wait_for_result(), until a file named "stop" appears in its directory.
SPIN_JOB = """import ctypes, os, sys, threading, time
lib = ctypes.CDLL(sys.argv[1])
flag = ctypes.c_int(0)

def watch_for_stop():
    while not os.path.exists("stop"):
        time.sleep(0.1)
    flag.value = 1

def wait_for_result():
    return getattr(lib, sys.argv[2])(ctypes.byref(flag))

threading.Thread(target=watch_for_stop, daemon=True).start()
print("spinning", flush=True)
wait_for_result()
print("done", flush=True)
raise SystemExit(3)
"""

# A healthy, silent, CPU-bound pure-Python loop: its main thread's stack moves all the time.
BUSY_PYTHON = """import random, time

def leaf(n):
    return sum(range(n))

def down(depth, n):
    return down(depth - 1, n) if depth else leaf(n)

t = time.monotonic()
calls = 0
while time.monotonic() - t < 20:
    down(random.randrange(1, 40), random.randrange(100, 3000))
    calls += 1
print("calls", calls > 0)
raise SystemExit(5)
"""
LAUNCH = os.path.join(SRC, "tests", "system", "distributed", "launch.py")
JOBS = os.path.join(HERE, "jobs.py")
sys.path.insert(0, os.path.dirname(LAUNCH))
import launch  # noqa: E402  (its ports: reserved against every other test's)

# What hangdx run says on stderr at each capture, and when --on-hang kill ends the job.
CAPTURE = "hangdx: no progress for"
ENDING = "hangdx: ending the job"


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
        rep = report_frames.loads(f.read())
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
        # after the job: analyze of the directory takes the report run wrote into it
        a = subprocess.run([hangdx_bin(), "analyze", "--json", d], capture_output=True, text=True, timeout=60)
        av = report_frames.loads(a.stdout).get("verdict", {}) if a.returncode in (0, 1) and a.stdout else {}
        check(av.get("class") == "collective_wait" and av.get("culprit_ranks") == [2],
              "analyze DIR after the job: collective_wait, culprit [2] (from DIR/report.json)", a.stdout[-500:] + a.stderr)
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

    # Silent and CPU-bound for 4 SEC, with --on-hang kill: the watch reads its Python stack (no
    # stop) and sees it move, so nothing is captured and nothing killed.
    os.makedirs(os.path.join(tmp, "b"))
    d2 = os.path.join(tmp, "dx2")
    job = Job(os.path.join(tmp, "b"), ["--hang-timeout", "5", "--on-hang", "kill", "-d", d2, "--",
                                      sys.executable, "-c", BUSY_PYTHON])
    try:
        rc = job.wait(120)
        check(rc == 5, "a pure-Python loop burning CPU silently for 20 s: its own exit status 5, not killed",
              f"{rc} {job.stderr()}")
        check(not os.path.exists(os.path.join(d2, "report.json")), "no report", job.stderr())
        check("hangdx:" not in job.stderr(), "nothing from hangdx on stderr: no capture", job.stderr())
        check(job.stdout() == "calls True\n", "its output, whole", job.stdout())
    finally:
        job.close()


def spin_lib():
    lib = os.environ.get("WATCH_SPIN")
    if not lib or not os.path.exists(lib):
        log("SKIP: WATCH_SPIN (the spin.c library, built as watch_spin) is not set; run through ctest")
        sys.exit(SKIP)
    return lib


def spin_job(tmp, args, function, env=None):
    job_dir = os.path.join(tmp, "job")
    os.makedirs(job_dir)
    script = os.path.join(job_dir, "spin_job.py")
    with open(script, "w") as f:
        f.write(SPIN_JOB)
    return job_dir, Job(job_dir, args + ["--", sys.executable, script, spin_lib(), function], env)


def case_frozen_busy(tmp):
    d = os.path.join(tmp, "dx")
    job_dir, job = spin_job(tmp, ["--hang-timeout", "10", "-d", d], "hdx_test_spin")
    try:
        wait_for(lambda: "spinning" in job.stdout(), "the job to start spinning", 60, 0.2)
        wait_for(lambda: "hangdx: not_hung:" in job.stderr() or job.p.poll() is not None,
                 "the confirming capture's verdict on stderr", 90, 0.2)
        open(os.path.join(job_dir, "stop"), "w").close()  # ends the spin
        rc = job.wait(60)
        err = job.stderr()
        check(rc == 3, "the job's own exit status 3", f"{rc}\n{err}")
        check(err.count("capturing its 1 process to tell work from a spinning wait") == 1,
              "exactly one confirming capture, announced as such", err)
        check(err.count("hangdx: not_hung: the processes are making progress") == 1,
              "its verdict not_hung on stderr", err)
        check(not os.path.exists(os.path.join(d, "report.json")) and
              not os.path.exists(os.path.join(d, "report.txt")), "no report", err)
        check("report in" not in err, "no report announced", err)
        check(job.stdout() == "spinning\ndone\n", "its output, whole: it ran on after the check",
              job.stdout())
    finally:
        job.close()


def case_spin_wait(tmp):
    d = os.path.join(tmp, "dx")
    sec = 5
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
    job_dir, job = spin_job(tmp, ["--hang-timeout", str(sec), "--on-hang", "kill", "--kill-grace", "2", "-d", d],
                            "hdx_standin_cudaStreamSynchronize", env)
    try:
        wait_for(lambda: "spinning" in job.stdout() or job.p.poll() is not None,
                 "the rank to start spinning", 60, 0.2)
        spin_start = time.monotonic()
        rep = read_report(d, 120)
        took = time.monotonic() - spin_start
        log(f"reported {took:.1f} s after the spin began (--hang-timeout {sec})")
        check(took <= sec + 30, f"reported within SEC + 30 s of the spin's start ({took:.1f} s)", job.stderr())
        v = rep.get("verdict") or {}
        check(v.get("class") == "collective_wait", "verdict.class == collective_wait", v)
        check("cudaStreamSynchronize" in (v.get("summary") or ""), "the summary names the wait", v)
        procs = [p for p in rep.get("processes", []) if p.get("rank") == 0]
        check(len(procs) == 1, "rank 0 is in the report", rep.get("processes"))
        main = procs[0]["threads"][0]
        check(main.get("wait") == "collective" and main.get("state") == "R",
              "its main thread: state R, a collective wait", main)
        check(any(f.get("function") == "hdx_standin_cudaStreamSynchronize" for f in main.get("frames", [])),
              "the spinning frame is on its stack", main.get("frames"))
        # --on-hang kill ends a job on a verdict of medium or high confidence only.
        if v.get("confidence") == "low":
            wait_for(lambda: "not ending the job: the verdict's confidence is low" in job.stderr()
                     or job.p.poll() is not None, "hangdx to say why it spares the job", 60, 0.2)
            wait_captures(job, 1, "a hang of low confidence")
            open(os.path.join(job_dir, "stop"), "w").close()
            rc = job.wait(60)
            check(rc == 3, "confidence low: never killed; let go by the test, its own exit status 3",
                  f"{rc}\n{job.stderr()}")
        else:
            rc = job.wait(120)
            check(rc == 124, f"confidence {v.get('confidence')}: exit status 124 (--on-hang kill)",
                  f"{rc}\n{job.stderr()}")
            check(not session_members(job.sid), "nothing of the job is left", session_members(job.sid))
        check("not_hung" not in job.stderr(), "the spin was never taken for work", job.stderr())
    finally:
        job.close()


def case_gpu_stuck_fixture(tmp):
    snap = os.path.join(NCCL_FIXTURES, "gpu_stuck.snapshot.json")
    r = subprocess.run([hangdx_bin(), "analyze", "--json", snap], capture_output=True, text=True, timeout=60)
    check(r.returncode in (0, 1), "hangdx analyze ran", f"{r.returncode}\n{r.stderr}")
    rep = report_frames.loads(r.stdout)
    v = rep.get("verdict") or {}
    check(v.get("class") == "collective_wait", "a rank spinning in cuStreamSynchronize: collective_wait", v)
    check(v.get("culprit_ranks") == [], "no culprit rank (none is missing)", v)
    rank0 = [p for p in rep.get("processes", []) if p.get("rank") == 0]
    check(rank0 and rank0[0].get("progressing") is True,
          "its CPU time grew (the case CPU time alone took for progress)", rank0)
    main = rank0[0]["threads"][0]
    check(main.get("state") == "R" and main.get("wait") == "collective", "main thread: R, collective wait", main)


def case_kill_finally(tmp):
    need_torch()
    own = os.path.join(tmp, "own", "build")
    stale = os.path.join(tmp, "stale", "build", "lock")
    for d in (own, os.path.dirname(stale)):
        os.makedirs(d)
    open(stale, "w").close()  # left behind by a builder long gone
    d = os.path.join(tmp, "dx")
    job = Job(tmp, ["--hang-timeout", "2", "--on-hang", "kill", "--kill-grace", "30,10", "-d", d, "--",
                    PYTHON, JOBS, "finally", own, stale, os.path.join(d, "report.txt")])
    try:
        rc = job.wait(180)
        err, out = job.stderr(), job.stdout()
        log("what hangdx said:\n" + hangdx_lines(err))
        check(rc == 124, "exit status 124", f"{rc}\nstderr: {err}\nstdout: {out}")
        check_lock_verdict(read_report(d, 1), stale, err)
        check(err.count(CAPTURE) >= 2 and err.rfind(CAPTURE) < err.find(ENDING),
              "the kill came after a second capture", err)
        check(0 <= err.find("finds this hang again") < err.find("the same hang as at the last capture") < err.find(ENDING),
              "the first capture's hang was held for confirmation, the second confirmed it, then the kill", err)
        with open(os.path.join(tmp, "sigint.txt")) as f:
            check(f.read() == "report was there\n", "report.txt was written before SIGINT came")
        check("released my lock" in out, "the finally ran", out)
        check(not os.path.exists(os.path.join(own, "lock")), "the lock it took is gone", os.listdir(own))
        check("after SIGINT" not in err, "SIGINT alone ended it (no SIGTERM)", err)
        check(not session_members(job.sid), "nothing of the job is left", session_members(job.sid))
    finally:
        job.close()


def hangdx_lines(err):
    return "\n".join(l for l in err.splitlines() if l.startswith("hangdx: "))


def wait_captures(job, n, what):
    """Wait until n more captures than now were made and acted on (the one after them has begun);
    fail if the job ended or was killed meanwhile."""
    want = job.stderr().count(CAPTURE) + n + 1
    wait_for(lambda: job.stderr().count(CAPTURE) >= want or job.p.poll() is not None or ENDING in job.stderr(),
             f"{n} more capture(s) of {what}", 180, 0.2)
    err = job.stderr()
    check(ENDING not in err and job.p.poll() is None, f"{n} more capture(s) of {what}: not killed, still running",
          err)
    return err


def case_kill_spares_spin(tmp):
    job_dir, job = spin_job(tmp, ["--hang-timeout", "2", "--on-hang", "kill", "-d", os.path.join(tmp, "dx")],
                            "hdx_test_spin")
    try:
        wait_for(lambda: "spinning" in job.stdout() or job.p.poll() is not None, "the job to start spinning", 60, 0.2)
        err = wait_captures(job, 3, "a process computing in a native loop")
        log("what hangdx said:\n" + hangdx_lines(err))
        check(err.count("hangdx: not_hung:") >= 3 and "report in" not in err, "not_hung at every capture", err)
        open(os.path.join(job_dir, "stop"), "w").close()
        rc = job.wait(60)
        check(rc == 3, "stopped by the test, it ends with its own status 3", f"{rc}\n{job.stderr()}")
        check(job.stdout() == "spinning\ndone\n", "its output, whole", job.stdout())
    finally:
        job.close()


def case_kill_spares_computing(tmp):
    need_torch()
    port, fd = launch.reserve_port()
    job_dir = os.path.join(tmp, "job")
    os.makedirs(job_dir)
    job = Job(job_dir, ["--hang-timeout", "2", "--on-hang", "kill", "-d", os.path.join(tmp, "dx"), "--",
                        PYTHON, JOBS, "ranks", "2", "computing", spin_lib()], {"MASTER_PORT": str(port)})
    try:
        wait_for(lambda: ("rank 0: computing" in job.stdout() and "rank 1: in the barrier" in job.stdout())
                 or job.p.poll() is not None, "rank 0 to compute and rank 1 to wait in the barrier", 120, 0.2)
        err = wait_captures(job, 3, "rank 1 waiting in a barrier for rank 0, which computes")
        log("what hangdx said:\n" + hangdx_lines(err))
        open(os.path.join(job_dir, "stop"), "w").close()
        rc = job.wait(60)
        out = job.stdout()
        check(rc == 0, "let go by the test, the job ends with exit status 0", f"{rc}\n{job.stderr()}\n{out}")
        check("rank 0: done" in out and "rank 1: done" in out, "both ranks met in the barrier", out)
    finally:
        job.close()
        launch.release_port(port, fd)


# Long to compile (<torch/extension.h> alone takes 20-40 s here, and two sources compile one
# after the other with MAX_JOBS=1: about a minute, many times SEC), quick to call.
FIRST_BUILD_CPP = """#include <torch/extension.h>
int64_t twice(int64_t x);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""
FIRST_BUILD_TWICE_CPP = """#include <torch/extension.h>
int64_t twice(int64_t x) { return torch::full({1}, 2 * x).item<int64_t>(); }
"""


def case_first_build(tmp):
    need_torch()
    port, fd = launch.reserve_port()
    srcs = []
    for name, text in (("first_build.cpp", FIRST_BUILD_CPP), ("first_build_twice.cpp", FIRST_BUILD_TWICE_CPP)):
        srcs.append(os.path.join(tmp, name))
        with open(srcs[-1], "w") as f:
            f.write(text)
    build = os.path.join(tmp, "fused", "build")
    os.makedirs(build)
    os.makedirs(os.path.join(tmp, "torch_extensions"))
    job = Job(tmp, ["--hang-timeout", "5", "--on-hang", "kill", "-d", os.path.join(tmp, "dx"), "--",
                    PYTHON, JOBS, "ranks", "2", "build", ":".join(srcs), build],
              {"MASTER_PORT": str(port), "TORCH_EXTENSIONS_DIR": os.path.join(tmp, "torch_extensions"),
               "MAX_JOBS": "1"})
    t0 = time.monotonic()
    try:
        rc = job.wait(540)
        err, out = job.stderr(), job.stdout()
        took = time.monotonic() - t0
        log(f"the job took {took:.0f} s; what hangdx said:\n{hangdx_lines(err)}")
        check(ENDING not in err, "the build was never killed", err)
        check(rc == 0, "exit status 0", f"{rc}\nstderr: {err}\nstdout: {out}")
        check("rank 0: twice(21) = 42" in out and "rank 1: twice(21) = 42" in out,
              "both ranks loaded the module built and called it", out)
        check(err.count(CAPTURE) >= 1, "the silent compile was captured at least once (it took longer than SEC)", err)
        check(not os.path.exists(os.path.join(build, "lock")), "no lock left in the build directory",
              os.listdir(build))
    finally:
        job.close()
        launch.release_port(port, fd)


CASES = {"lock_report": case_lock_report, "lock_kill": case_lock_kill,
         "collective": case_collective, "healthy": case_healthy, "frozen_busy": case_frozen_busy,
         "spin_wait": case_spin_wait, "gpu_stuck_fixture": case_gpu_stuck_fixture,
         "kill_finally": case_kill_finally, "kill_spares_spin": case_kill_spares_spin,
         "kill_spares_computing": case_kill_spares_computing, "first_build": case_first_build}


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
