#!/usr/bin/env python3
"""hangdx run passes a fatal signal through: when the job dies of signal N, run dies of N itself
(its caller sees WIFSIGNALED, Python's returncode -N), not an exit status 128+N that a calling
script would read as an ordinary failure and go on after. Cases:
  INT, TERM, KILL  `sh -c 'kill -N $$'`: run's returncode is -N, its trace directory is kept
  QUIT             a core signal: -3, and run left no core file of its own in its directory
  report           run --hang-timeout 2 on a job reading a pipe nobody writes; once run said
                   "report in", the test sends the job SIGINT (its handler reset to SIG_DFL):
                   run's returncode is -2, and report.txt and report.json were written first
Needs $HANGDX; the report case needs ptrace (run's capture)."""
import os
import signal
import subprocess
import sys
import tempfile
import time

HANGDX = os.environ["HANGDX"]
fail = 0


def check(ok, what, detail=""):
    global fail
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else f" ({detail})"))
    fail |= not ok


with tempfile.TemporaryDirectory(prefix="hdx-test-runsig-") as tmp:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGQUIT):
        d = os.path.join(tmp, sig.name)
        r = subprocess.run([HANGDX, "run", "-d", d, "--", "/bin/sh", "-c", f"kill -{sig.name[3:]} $$"],
                           cwd=tmp, capture_output=True, text=True, timeout=60)
        check(r.returncode == -sig, f"a job killed by {sig.name}: run dies of {sig.name} "
              f"(returncode {r.returncode})", r.stderr.strip())
        check(any(f.endswith(".jsonl") for f in os.listdir(d)), f"  its trace directory is kept with the traces")
    cores = [f for f in os.listdir(tmp) if f.startswith("core")]
    check(not cores, "no core file of run's own after SIGQUIT", cores)

    d = os.path.join(tmp, "hang")
    pidfile = os.path.join(tmp, "job.pid")
    job = ("import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
           f"open({pidfile!r}, 'w').write(str(os.getpid())); r, w = os.pipe(); os.read(r, 1)")
    err = open(os.path.join(tmp, "err"), "w+")
    p = subprocess.Popen([HANGDX, "run", "--hang-timeout", "2", "-d", d, "--", "/usr/bin/python3", "-c", job],
                         stderr=err)
    said = ""
    for _ in range(600):
        err.seek(0)
        said = err.read()
        if "hangdx: report in" in said or p.poll() is not None:
            break
        time.sleep(0.1)
    check("hangdx: report in" in said, "run --hang-timeout 2 reported the job stuck on a pipe", said)
    if os.path.exists(pidfile):
        os.kill(int(open(pidfile).read()), signal.SIGINT)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    check(rc == -signal.SIGINT, f"the job then killed by SIGINT: run dies of SIGINT (returncode {rc})", said)
    check(os.path.exists(os.path.join(d, "report.txt")) and os.path.exists(os.path.join(d, "report.json")),
          "  after writing report.txt and report.json", os.listdir(d))
sys.exit(fail)
