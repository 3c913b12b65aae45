#!/usr/bin/python3
"""hangdx run keeps out of the job's way: its output goes where it was sent (no pipe through
hangdx), a signal reaches it once, and a job whose hangdx dies runs on. Each case runs a real
job with and without `hangdx run` and compares what a user would check: the bytes of its
output, its exit status, how often its handlers ran.

usage: test_run_job.py CASE
  survives_kill  run --hang-timeout 30 on a job printing a line a second to stdout (through
                 `| cat` into a file) and to stderr (a file); run is SIGKILLed after 2 lines:
                 the job runs to its end, exit status 0, neither stopped nor traced, and both
                 files are byte-identical to those of the same job without hangdx; nothing of
                 hangdx is left (its signal witness died with it)
  group_signals  `kill -INT -- -PGID` and `kill -TERM -- -PGID` (the process group of the
                 command the test started) of a job that saves a checkpoint in `except
                 KeyboardInterrupt:` and in a SIGTERM handler, each taking 1 s, a second signal
                 would abort it: with run (with and without --hang-timeout) the same output
                 and exit status as without; SIGINT and SIGTERM sent to run alone reach the
                 job once too
  torchrun_signals  the same group signals to `python3 -m torch.distributed.run
                 --nproc_per_node 2` (gloo ranks waiting in a loop) under run --hang-timeout
                 30: torchrun's lines (one "Sending process N closing signal" per rank) and
                 exit status as without run
  ctrl_c         a Ctrl-C typed into a pseudo-terminal (an interactive bash, job control on)
                 while run --hang-timeout 30 runs a job that counts its SIGINTs: one SIGINT,
                 the job in the terminal's foreground process group, exit status 130, as
                 without run
  output_kinds   run --hang-timeout 3 on a job printing a line a second for 8 s into a
                 pseudo-terminal, and through `| cat`: output to either is progress (wchar),
                 so nothing is captured or reported
"""
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HDX_SOURCE_DIR") or os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(SRC, "tests", "system", "scenarios"))
from hdxscen import (PYTHON, SKIP, Failure, become_subreaper, check, hangdx_bin, kill_session, log,  # noqa: E402
                     session_members, wait_for)
sys.path.insert(0, os.path.join(SRC, "tests", "system", "distributed"))
import launch  # noqa: E402  (its ports: reserved against every other test's)

# A line a second to stdout and to stderr; its pid into job.pid (not part of the output).
PRINTER = """import os, sys, time
with open("job.pid", "w") as f:
    f.write(str(os.getpid()))
for i in range(8):
    print(f"step {i}: stdout", flush=True)
    print(f"step {i}: stderr", file=sys.stderr, flush=True)
    time.sleep(1)
print("done", flush=True)
"""

# Saves a checkpoint on SIGINT (except KeyboardInterrupt) and on SIGTERM (a handler); each
# save takes 1 s, and a second signal meanwhile would abort it (a traceback, or the handler
# entered twice).
CHECKPOINT = """import signal, sys, time
def on_term(sig, frame):
    print("SIGTERM: saving checkpoint", flush=True)
    for _ in range(10):
        time.sleep(0.1)
    print("SIGTERM: checkpoint saved", flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
try:
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
except KeyboardInterrupt:
    print("KeyboardInterrupt: saving checkpoint", flush=True)
    for _ in range(10):
        time.sleep(0.1)
    print("KeyboardInterrupt: checkpoint saved", flush=True)
    sys.exit(130)
"""

# Counts its SIGINTs into ./sigints, waits 1 s after the first for any second one, then ends
# as a Ctrl-C ends a program (killed by SIGINT: 130 in the shell).
COUNT_SIGINT = """import os, signal, time
n = 0
def on_int(sig, frame):
    global n
    n += 1
    with open("sigints", "a") as f:
        f.write("SIGINT\\n")
signal.signal(signal.SIGINT, on_int)
print("foreground:", os.tcgetpgrp(0) == os.getpgrp(), flush=True)
print("ready", flush=True)
while n == 0:
    time.sleep(0.05)
time.sleep(1.0)
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.kill(os.getpid(), signal.SIGINT)
"""

# A gloo rank of torchrun: meets the other in a barrier, says so, then loops until a signal.
TORCHRUN_RANK = """import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print(f"rank {dist.get_rank()}: ready", flush=True)
while True:
    time.sleep(0.1)
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def under_run(args, cmd, watch=True):
    """cmd under `hangdx run`, with the watch (--hang-timeout 30) or without."""
    return [hangdx_bin(), "run"] + (["--hang-timeout", "30"] if watch else []) + args + ["--"] + cmd


def proc_status(pid):
    try:
        return dict(l.split(":\t", 1) for l in read(f"/proc/{pid}/status").splitlines() if ":\t" in l)
    except OSError:
        return {}


def witnesses(sid):
    return [p for p in session_members(sid) if read_or(f"/proc/{p}/comm").strip() == "hangdx-witness"]


def read_or(path, default=""):
    try:
        return read(path)
    except OSError:
        return default


# ------------------------------------------------------------------------ survives_kill

def printer_run(d, hangdx):
    """The printer in d, stdout through cat into d/out, stderr into d/err. With hangdx, run is
    SIGKILLed after the job's second line. Returns (job exit status, cat's)."""
    os.makedirs(d)
    script = write(os.path.join(d, "printer.py"), PRINTER)
    out, err = os.path.join(d, "out"), os.path.join(d, "err")
    cmd = [PYTHON, script]
    if hangdx:
        cmd = under_run(["-d", os.path.join(d, "dx")], cmd)
    with open(out, "wb") as o, open(err, "wb") as e:
        cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=o, start_new_session=True)
        p = subprocess.Popen(cmd, stdout=cat.stdin, stderr=e, cwd=d, start_new_session=True)
    cat.stdin.close()
    pidfile = os.path.join(d, "job.pid")
    try:
        wait_for(lambda: "step 1: stdout" in read_or(out), "the job's second line through cat", 60, 0.05)
        job = int(read(pidfile))
        if hangdx:
            check(witnesses(p.pid), "run's signal witness is there while run runs", session_members(p.pid))
            p.kill()
            rc = p.wait(10)
            check(rc == -signal.SIGKILL, f"hangdx run was SIGKILLed (status {rc})")
            log(f"killed hangdx run (pid {p.pid}); its job {job} runs on")
            wait_for(lambda: not witnesses(p.pid), "the witness to die with run", 10, 0.05)
            time.sleep(1.5)  # the job prints on, each line through cat and into the file
            st = proc_status(job)
            check(st.get("State", "?")[0] in "RS" and st.get("TracerPid", "").strip() == "0",
                  "after run's death the job is neither stopped nor traced", st)
        # The job is ours to reap: our child, or our orphan (we are a subreaper).
        _, status = os.waitpid(job, 0)
        if not hangdx:
            p.wait()
        return os.waitstatus_to_exitcode(status), cat.wait(30)
    finally:
        kill_session(p.pid)
        kill_session(cat.pid)


def case_survives_kill(tmp):
    become_subreaper()
    plain = printer_run(os.path.join(tmp, "plain"), False)
    hdx = printer_run(os.path.join(tmp, "hangdx"), True)
    check(plain == (0, 0), "without hangdx: the job and cat exit 0", plain)
    check(hdx == (0, 0), "with hangdx SIGKILLed: the job still runs to its end, exit status 0 (cat too)", hdx)
    for f in ("out", "err"):
        a, b = read(os.path.join(tmp, "plain", f), "rb"), read(os.path.join(tmp, "hangdx", f), "rb")
        check(a == b and b.endswith(b"done\n" if f == "out" else b"step 7: stderr\n"),
              f"its std{f} ({'through | cat' if f == 'out' else 'a file'}) is byte-identical to the "
              f"run without hangdx ({len(b)} bytes)", (a, b))


# ------------------------------------------------------------------------ group_signals

def checkpoint_run(d, cmd, sig, target):
    """Start cmd in a new session (its pid is its process group), wait for "ready", send sig
    to the group ("group") or to the command's pid alone ("pid"). Returns (status, output)."""
    os.makedirs(d)
    out = os.path.join(d, "out")
    with open(out, "wb") as o:
        p = subprocess.Popen(cmd, stdout=o, stderr=subprocess.STDOUT, cwd=d, start_new_session=True)
    try:
        wait_for(lambda: "ready" in read_or(out), "the job to be ready", 60, 0.02)
        time.sleep(0.3)
        if target == "group":
            os.killpg(p.pid, sig)
        else:
            os.kill(p.pid, sig)
        rc = p.wait(60)
        return rc, read(out)
    finally:
        kill_session(p.pid)


def case_group_signals(tmp):
    script = write(os.path.join(tmp, "checkpoint.py"), CHECKPOINT)
    job = [PYTHON, script]
    for sig in (signal.SIGINT, signal.SIGTERM):
        name = sig.name
        want = checkpoint_run(os.path.join(tmp, f"{name}-plain"), job, sig, "group")
        saved = "KeyboardInterrupt: checkpoint saved" if sig == signal.SIGINT else "SIGTERM: checkpoint saved"
        check(want[0] == 128 + sig and saved in want[1] and "Traceback" not in want[1],
              f"without run, kill -{name[3:]} -- -PGID: the checkpoint is saved, exit {128 + sig}", want)
        for i, (label, cmd, target) in enumerate((
                ("run --hang-timeout 30, kill -- -PGID", under_run(["-d", "dx"], job), "group"),
                ("run (no watch), kill -- -PGID", under_run(["-d", "dx"], job, watch=False), "group"),
                ("run --hang-timeout 30, kill PID of run", under_run(["-d", "dx"], job), "pid"),
                ("run (no watch), kill PID of run", under_run(["-d", "dx"], job, watch=False), "pid"))):
            d = os.path.join(tmp, f"{name}-{i}")
            got = checkpoint_run(d, cmd, sig, target)
            check(got == want, f"{name}, {label}: the same output and exit status as without run "
                               f"(the job got it once)", f"{got}\n  without run: {want}")


# ------------------------------------------------------------------------ torchrun_signals

TORCHRUN_LINE = re.compile(r"WARNING:torch\.distributed\.elastic\S*|\S*SignalException: |^During handling")


def torchrun_lines(out):
    """torchrun's own lines (its log lines, its exception), pids as N, sorted; and the ranks'
    ready lines. A rank's own traceback is left out: it gets the group's signal and then
    torchrun's, and where the second lands differs from run to run, with or without hangdx
    (a rank's half-written line can run into one of torchrun's: each is taken from where it
    starts)."""
    lines = []
    for line in out.splitlines():
        m = TORCHRUN_LINE.search(line)
        if m:
            lines.append(re.sub(r"\d+", "N", line[m.start():]))
    return sorted(lines)


def torchrun_run(d, cmd, sig, port):
    os.makedirs(d)
    write(os.path.join(d, "rank.py"), TORCHRUN_RANK)
    out = os.path.join(d, "out")
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
    with open(out, "wb") as o:
        p = subprocess.Popen(cmd, stdout=o, stderr=subprocess.STDOUT, cwd=d, start_new_session=True, env=env)
    try:
        wait_for(lambda: read_or(out).count(": ready") >= 2 or p.poll() is not None,
                 "both ranks to be ready", 120, 0.1)
        check(p.poll() is None, "torchrun and its ranks run", read_or(out))
        time.sleep(0.5)
        os.killpg(p.pid, sig)
        rc = p.wait(90)
        return rc, read(out)
    finally:
        kill_session(p.pid)


def case_torchrun_signals(tmp):
    r = subprocess.run([PYTHON, "-c", "import torch.distributed.run"], capture_output=True)
    if r.returncode != 0:
        print(f"SKIP: {PYTHON} cannot import torch.distributed.run (python3-torch missing)")
        sys.exit(SKIP)
    for sig in (signal.SIGINT, signal.SIGTERM):
        results = {}
        for mode in ("plain", "run"):
            port, fd = launch.reserve_port()
            try:
                # Debian's torch 1.13 on Python 3.11 cannot parse the default --redirects 0 (a
                # zero enum.Flag); 1 (stdout to a log, teed) parses.
                job = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                       "--redirects", "1", "--tee", "1", "--log_dir", "logs", "rank.py"]
                cmd = job if mode == "plain" else under_run(["-d", "dx"], job)
                results[mode] = torchrun_run(os.path.join(tmp, f"{sig.name}-{mode}"), cmd, sig, port)
            finally:
                launch.release_port(port, fd)
        (rc0, out0), (rc1, out1) = results["plain"], results["run"]
        log(f"{sig.name}: torchrun's lines without run:\n  " + "\n  ".join(torchrun_lines(out0)))
        closing = [l for l in out1.splitlines() if "closing signal" in l]
        pids = [l.split("Sending process ")[1].split()[0] for l in closing if "Sending process " in l]
        check(len(closing) == 2 and len(set(pids)) == 2,
              f"{sig.name} to the group under run: 'Sending process N closing signal' once per rank", out1)
        check(torchrun_lines(out1) == torchrun_lines(out0),
              f"{sig.name}: torchrun's lines as without run", f"{out1}\n  without run:\n{out0}")
        check(rc1 == rc0, f"{sig.name}: torchrun's exit status as without run ({rc0})", rc1)


# ------------------------------------------------------------------------ ctrl_c and output

def in_pty(cwd, command, on_output, timeout=90):
    """command run by an interactive bash (job control on, as at a terminal) in a new
    pseudo-terminal; on_output(all output so far, master fd) is called as output comes.
    Returns everything the terminal showed and bash's exit status as a shell's $? would read
    it (128+N when signal N ended it: bash ends itself by the SIGINT that ended its foreground
    job, and a job's exit status 130 reads the same)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.execvp("bash", ["bash", "--norc", "--noprofile", "-i", "-c", command])
        finally:
            os._exit(127)
    buf = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's last process is gone
                    break
                if not chunk:
                    break
                buf += chunk
                on_output(buf, fd)
        else:
            raise Failure(f"the terminal's job still runs after {timeout} s: {buf!r}")
    finally:
        for _ in range(50):  # the terminal hung up: bash is ending, or has
            pid_done, status = os.waitpid(pid, os.WNOHANG)
            if pid_done:
                break
            time.sleep(0.1)
        if not pid_done:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(fd)
    code = os.waitstatus_to_exitcode(status)
    return buf.decode(errors="replace"), 128 - code if code < 0 else code


def case_ctrl_c(tmp):
    if shutil.which("bash") is None:
        print("SKIP: bash not found")
        sys.exit(SKIP)
    script = write(os.path.join(tmp, "count_sigint.py"), COUNT_SIGINT)
    results = {}
    for mode in ("plain", "run"):
        d = os.path.join(tmp, mode)
        os.makedirs(d)
        cmd = f"{PYTHON} {script}"
        if mode == "run":
            cmd = f"{hangdx_bin()} run --hang-timeout 30 -d dx -- {cmd}"
        typed = []

        def type_ctrl_c(buf, fd):
            if b"ready" in buf and not typed:
                time.sleep(0.3)
                os.write(fd, b"\x03")  # the terminal's INTR character: SIGINT to its foreground group
                typed.append(1)
        shown, status = in_pty(d, cmd, type_ctrl_c)
        results[mode] = (status, read_or(os.path.join(d, "sigints")).count("SIGINT"), "foreground: True" in shown)
        log(f"{mode}: the terminal showed {shown!r}")
    check(results["plain"] == (130, 1, True), "without run: one SIGINT, exit 130, the job in the foreground",
          results["plain"])
    check(results["run"] == (130, 1, True),
          "with run --hang-timeout 30: one SIGINT, exit 130, the job in the terminal's foreground process group",
          results["run"])


def case_output_kinds(tmp):
    lines = "import time\nfor i in range(8):\n    print('step', i, flush=True)\n    time.sleep(1)\n"
    script = write(os.path.join(tmp, "lines.py"), lines)
    want = "".join(f"step {i}\n" for i in range(8))
    # Into a pseudo-terminal: before, a terminal was no progress signal at all.
    d = os.path.join(tmp, "tty")
    os.makedirs(d)
    shown, status = in_pty(d, f"{hangdx_bin()} run --hang-timeout 3 -d dx -- {PYTHON} {script}", lambda b, f: None)
    check("hangdx:" not in shown and status == 0, "output to a terminal is progress: nothing captured, exit 0",
          f"{status} {shown}")
    check(shown.replace("\r\n", "\n").count("step ") == 8, "all its lines reached the terminal", shown)
    check(not os.path.exists(os.path.join(d, "dx", "report.json")), "no report")
    # Through a pipe that hangdx is not part of.
    d = os.path.join(tmp, "pipe")
    os.makedirs(d)
    with open(os.path.join(d, "out"), "wb") as o, open(os.path.join(d, "err"), "wb") as e:
        cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=o, start_new_session=True)
        p = subprocess.Popen([hangdx_bin(), "run", "--hang-timeout", "3", "-d", "dx", "--", PYTHON, script],
                             stdout=cat.stdin, stderr=e, cwd=d, start_new_session=True)
    cat.stdin.close()
    try:
        rc = p.wait(60)
        cat.wait(30)
    finally:
        kill_session(p.pid)
        kill_session(cat.pid)
    err = read(os.path.join(d, "err"))
    check(rc == 0 and "hangdx:" not in err, "output through | cat is progress: nothing captured, exit 0",
          f"{rc} {err}")
    check(read(os.path.join(d, "out")) == want, "its output, whole, through cat", read(os.path.join(d, "out")))


CASES = {"survives_kill": case_survives_kill, "group_signals": case_group_signals,
         "torchrun_signals": case_torchrun_signals, "ctrl_c": case_ctrl_c, "output_kinds": case_output_kinds}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(__doc__)
        return 64
    tmp = tempfile.mkdtemp(prefix=f"hdx-runjob-{sys.argv[1]}-")
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
