#!/usr/bin/python3
"""Start the real distributed hangs of hangs.py, for hangdx's tests.

    import launch
    with launch.start_case("collective_skip") as job:   # 3 ranks of C1, hung once it returns
        job.pids          # {rank: pid}
        job.port          # MASTER_PORT (the TCPStore of rank 0 listens on 127.0.0.1:port)
        job.python_stacks()  # {rank: [function, ...]} innermost first, from faulthandler
    # leaving the block (or job.stop()) kills every rank's process group and reaps it

`CASES` says, for each case, its world size, which ranks are started, what hangdx must
conclude (class, culprit ranks, missing ranks) and the Python frames each rank waits in.

Runnable as a script to keep one case up by hand:
    /usr/bin/python3 launch.py collective_skip      # prints the pids, waits for Ctrl-C
or as every task of a Slurm job step, each becoming rank SLURM_PROCID of a case:
    srun -n 3 /usr/bin/python3 launch.py --slurm-task collective_skip PORT DIR

Safe to use from several threads and processes at once: each job has its own port (reserved
with a lock file under the system temp dir, below the kernel's ephemeral port range so that
gloo's own sockets cannot take it) and its own scratch directory. The module needs no torch;
the ranks run with Debian's /usr/bin/python3.
"""

import atexit
import errno
import fcntl
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

PYTHON = "/usr/bin/python3"  # Debian's, with torch; the first python3 on PATH may lack it
HERE = os.path.dirname(os.path.abspath(__file__))
HANGS = os.path.join(HERE, "hangs.py")

# What each case makes, and what hangdx must say about it. `stacks` gives, per rank, the
# Python function names of the main thread's waiting frames, innermost first: the first must
# be the innermost Python frame, the others must follow in that order (other frames may sit
# between them; a first "*" matches any innermost frame). `wait` is the kind of wait each rank is in, for the self-test's /proc checks:
# "gloo" (a futex in a c10d Work::wait / gloo transport), "sleep" (time.sleep),
# "store" (TCPStore / rendezvous), "busy" (computing).
_W_ALLRED = ["all_reduce", "train_step"]
CASES = {
    "collective_skip": dict(
        id="C1", world_size=3, expect="collective_wait", culprits=[2],
        stacks={0: _W_ALLRED, 1: _W_ALLRED, 2: ["skip_and_sleep", "case_collective_skip"]},
        wait={0: "gloo", 1: "gloo", 2: "sleep"}),
    "barrier_skip": dict(
        id="C2", world_size=4, expect="collective_wait", culprits=[0],
        stacks={0: ["skip_and_sleep"], 1: ["barrier", "wait_for_checkpoint"],
                2: ["barrier", "wait_for_checkpoint"], 3: ["barrier", "wait_for_checkpoint"]},
        wait={0: "sleep", 1: "gloo", 2: "gloo", 3: "gloo"}),
    "uneven": dict(
        id="C3", world_size=3, expect="collective_wait", culprits=[1],
        stacks={0: _W_ALLRED, 1: ["barrier", "finish_epoch"], 2: _W_ALLRED},
        wait={0: "gloo", 1: "gloo", 2: "gloo"}),
    "both_recv": dict(
        id="P1", world_size=2, expect="p2p_mismatch", culprits=[0, 1],
        stacks={0: ["recv", "recv_activations"], 1: ["recv", "recv_activations"]},
        wait={0: "gloo", 1: "gloo"}),
    "both_send": dict(
        id="P2", world_size=2, expect="p2p_mismatch", culprits=[0, 1],
        stacks={0: ["send", "send_activations"], 1: ["send", "send_activations"]},
        wait={0: "gloo", 1: "gloo"}),
    "send_no_recv": dict(
        id="P3", world_size=2, expect="p2p_mismatch", culprits=[1],
        stacks={0: ["send", "send_activations"], 1: ["skip_and_sleep"]},
        wait={0: "gloo", 1: "sleep"}),
    "ring_irecv": dict(
        id="P4", world_size=3, expect="p2p_mismatch", culprits=[0, 1, 2],
        stacks={r: ["recv_prev_stage"] for r in range(3)},
        wait={r: "gloo" for r in range(3)}),
    "batch_p2p": dict(
        id="P-batch", world_size=2, expect="p2p_mismatch", culprits=[0, 1],
        stacks={0: ["recv_batched"], 1: ["recv_batched"]},
        wait={0: "gloo", 1: "gloo"}),
    "rendezvous_missing": dict(
        id="R1", world_size=3, ranks=[0, 1], expect="rendezvous_wait", culprits=[2], missing=[2],
        # rank 0 hosts the TCPStore and waits for the workers to check in (C++ TCPStore
        # constructor, called from _create_c10d_store); rank 1 waits in ProcessGroupGloo's
        # constructor for rank 2's address in the store.
        stacks={0: ["_create_c10d_store", "init_process_group", "join_process_group"],
                1: ["_new_process_group_helper", "init_process_group", "join_process_group"]},
        wait={0: "store", 1: "store"}),
    "computing": dict(
        id="busy", world_size=2, expect="not_hung", culprits=[],
        stacks={0: ["*", "train_loop"], 1: ["*", "train_loop"]},
        wait={0: "busy", 1: "busy"}),
    "lock_behind_barrier": dict(
        id="B-barrier", world_size=3, expect="build_lock", culprits=[0],
        stacks={0: ["wait", "_jit_compile", "load", "load_fused_kernels"],
                1: ["barrier", "wait_for_fused_kernels"], 2: ["barrier", "wait_for_fused_kernels"]},
        wait={0: "sleep", 1: "gloo", 2: "gloo"}),
}

TINY_EXTENSION = """\
// The smallest extension cpp_extension.load can build: nothing long to compile.
#include <Python.h>
static struct PyModuleDef hdx_fused_tiny_module = {PyModuleDef_HEAD_INIT, "hdx_fused_tiny", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_hdx_fused_tiny(void) { return PyModule_Create(&hdx_fused_tiny_module); }
"""


class LaunchError(Exception):
    pass


# ----------------------------------------------------------------- ports

_port_lock = threading.Lock()
_PORT_DIR = os.path.join(tempfile.gettempdir(), "hangdx-ports")


def _port_range():
    """Ports to choose from: below the kernel's ephemeral range (which gloo's own listening
    sockets and every outgoing connection draw from), or above it if that has more room."""
    lo, hi = 32768, 60999
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        pass
    below = (max(10000, lo - 12000), lo - 1)
    above = (hi + 1, 65535)
    return below if below[1] - below[0] >= above[1] - above[0] else above


def release_port(port, fd):
    """Give back a port of reserve_port(): the lock file goes while still locked, so a
    launcher that opened it meanwhile sees it was replaced and picks again."""
    try:
        os.unlink(os.path.join(_PORT_DIR, f"{port}.lock"))
    except OSError:
        pass
    os.close(fd)


def reserve_port():
    """A free TCP port on 127.0.0.1, reserved for this process until release_port(): a lock
    file under the temp dir (held with flock, so a crashed process frees it) keeps other
    launchers, in this process or another, from handing out the same one.
    Returns (port, fd of the held lock); release_port(port, fd) gives it back."""
    os.makedirs(_PORT_DIR, exist_ok=True)
    lo, hi = _port_range()
    with _port_lock:
        for _ in range(200):
            port = random.randint(lo, hi)
            path = os.path.join(_PORT_DIR, f"{port}.lock")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_ino != os.stat(path).st_ino:
                    raise OSError(errno.ESTALE, "lock file replaced")  # its holder released it
            except OSError:
                os.close(fd)
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore binds
                s.bind(("127.0.0.1", port))
                s.close()
                return port, fd
            except OSError:
                s.close()
                os.close(fd)
    raise LaunchError(f"no free port found in {lo}-{hi}")


# ----------------------------------------------------------------- /proc

def _proc_stat(pid, tid=None):
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2:].split()  # fields from 3 (state) on


def proc_state(pid):
    st = _proc_stat(pid)
    return st[0] if st else None


def cpu_ticks(pid):
    """utime + stime of the whole process, in clock ticks (None when it is gone)."""
    st = _proc_stat(pid)
    return int(st[11]) + int(st[12]) if st else None


def thread_states(pid):
    """{tid: state letter} of pid's threads."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        st = _proc_stat(pid, t)
        if st:
            out[int(t)] = st[0]
    return out


def main_syscall(pid):
    """(number, raw line) of the system call pid's main thread is blocked in; number is None
    when it runs or the file cannot be read."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            line = f.read().strip()
    except OSError as e:
        return None, f"unreadable: {e}"
    first = line.split()[0] if line else ""
    return (int(first) if first.lstrip("-").isdigit() else None), line


def wchan(pid):
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip()
    except OSError:
        return None


def _alive(pid):
    return proc_state(pid) not in (None, "Z", "X")


# ----------------------------------------------------------------- one rank

def rank_environment(rank, local_rank, world_size, local_world_size, port, workdir):
    """The variables a rank of hangs.py gets from its launcher (added to the environment)."""
    return {
        "RANK": str(rank), "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(local_world_size),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "TORCH_EXTENSIONS_DIR": os.path.join(workdir, "torch_extensions"),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
    }


def rank_command(case, ready, workdir, rank=None, world_size=None, port=None):
    """The command line of one rank of `case`; without rank, hangs.py takes RANK, WORLD_SIZE and
    MASTER_PORT from its environment (as under torchrun or srun). A case whose spec has a
    "script" runs that script instead of hangs.py (pgroup_cases.py's run pgroups.py)."""
    cmd = [PYTHON, CASES.get(case, {}).get("script", HANGS), case]
    if rank is not None:
        cmd += ["--rank", str(rank), "--world-size", str(world_size), "--port", str(port)]
    return cmd + ["--ready", ready, "--workdir", workdir]


def exec_slurm_task(case, port, workdir):
    """Inside a task of `srun -n W`: become rank SLURM_PROCID of `case` (world size SLURM_NTASKS,
    local rank SLURM_LOCALID), its rank variables added to the task's environment (SLURM_JOB_ID
    and the others stay), its ready file workdir/ready-<rank>. Replaces this process (exec), so
    the task's pid is the rank's."""
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    local = int(os.environ.get("SLURM_LOCALID", rank))
    per_node = os.environ.get("SLURM_STEP_TASKS_PER_NODE", str(world)).split("(")[0].split(",")[0]
    env = dict(os.environ, **rank_environment(rank, local, world, int(per_node), port, workdir))
    os.execve(PYTHON, rank_command(case, os.path.join(workdir, "ready-{rank}"), workdir), env)


# ----------------------------------------------------------------- jobs

_jobs = set()
_jobs_lock = threading.Lock()


class Job:
    """The ranks of one case. pids: {rank: pid}; logs: {rank: path of its stdout+stderr}."""

    def __init__(self, case, world_size, ranks, tmpdir, own_tmpdir):
        self.case = case
        self.spec = CASES.get(case, {})
        self.world_size = world_size
        self.ranks = list(ranks)
        self.dir = tmpdir
        self._own_dir = own_tmpdir
        self.port = None
        self._port_fd = None
        self.procs = {}
        self.pids = {}
        self.logs = {}
        self.ready_files = {}
        self.started_at = None
        self.ready_at = None
        self._stopped = False
        self.port_taken = False
        self.last_dumps = {}

    # ---- public

    @property
    def master(self):
        return f"127.0.0.1:{self.port}"

    def alive(self, rank):
        return _alive(self.pids[rank])

    def log(self, rank):
        try:
            with open(self.logs[rank], errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def errors(self):
        """{rank: log} of the ranks whose log shows a Python exception or a fatal error."""
        bad = {}
        for r in self.ranks:
            text = self.log(r)
            if "Traceback" in text or "Fatal Python error" in text or "terminate called" in text:
                bad[r] = text
        return bad

    def python_stacks(self, timeout=10.0):
        """Dump every rank's Python stacks (SIGUSR1 -> faulthandler, into its log; the rank
        keeps waiting) and return {rank: [function, ...]} of its main thread, innermost
        first. Also keeps the raw text in self.last_dumps {rank: text}."""
        sizes = {r: os.path.getsize(self.logs[r]) for r in self.ranks}
        for r in self.ranks:
            os.kill(self.pids[r], signal.SIGUSR1)
        out, self.last_dumps = {}, {}
        deadline = time.monotonic() + timeout
        for r in self.ranks:
            while True:
                text = self._read_from(r, sizes[r])
                threads = parse_faulthandler(text)
                main = [t for t in threads if t and t[-1] == "<module>"]
                if main:
                    out[r] = main[0]
                    self.last_dumps[r] = text
                    break
                if time.monotonic() > deadline:
                    raise LaunchError(f"{self.case}: rank {r} (pid {self.pids[r]}) wrote no stack dump "
                                      f"after SIGUSR1 within {timeout:.0f} s; log:\n{self.log(r)[-2000:]}")
                time.sleep(0.05)
        return out

    def stop(self):
        """Kill every rank's process group (SIGKILL) and reap them; remove the scratch dir if
        start_case made it. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        for p in self.procs.values():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self._port_fd is not None:
            release_port(self.port, self._port_fd)
            self._port_fd = None
        with _jobs_lock:
            _jobs.discard(self)
        if self._own_dir:
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"<Job {self.case} port={self.port} pids={self.pids}>"

    # ---- internal

    def _read_from(self, rank, offset):
        try:
            with open(self.logs[rank], errors="replace") as f:
                f.seek(offset)
                return f.read()
        except OSError:
            return ""

    def _prepare(self):
        if self.case == "lock_behind_barrier":
            # The stale FileBaton lock of B1: an empty `lock` that no live process holds,
            # left by a builder killed a while ago.
            ext = os.path.join(self.dir, "fused_kernels")
            os.makedirs(os.path.join(ext, "build"), exist_ok=True)
            with open(os.path.join(ext, "hdx_fused_tiny.cpp"), "w") as f:
                f.write(TINY_EXTENSION)
            lock = os.path.join(ext, "build", "lock")
            open(lock, "w").close()
            old = time.time() - 600
            os.utime(lock, (old, old))

    def _spawn(self, env_extra):
        self.port, self._port_fd = reserve_port()
        for r in self.ranks:
            ready = os.path.join(self.dir, f"ready-{r}")
            for p in (ready, ready + ".tmp"):
                if os.path.exists(p):
                    os.unlink(p)
            self.ready_files[r] = ready
            self.logs[r] = os.path.join(self.dir, f"rank{r}.log")
            env = dict(os.environ)
            for k in ("TORCHELASTIC_RUN_ID", "GROUP_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                      "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
                      "SLURM_NTASKS"):
                env.pop(k, None)  # the test's own launcher, if any, must not leak into the ranks
            env.update(rank_environment(r, r, self.world_size, self.world_size, self.port, self.dir))
            env.update(env_extra or {})
            cmd = rank_command(self.case, ready, self.dir, r, self.world_size, self.port)
            with open(self.logs[r], "w") as log:
                p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=env, cwd=self.dir, start_new_session=True)
            self.procs[r] = p
            self.pids[r] = p.pid

    def wait_ready(self, timeout=60.0, grace=1.0):
        """Wait until the hang exists (see start_case); on failure stop the job and raise
        LaunchError, with port_taken set when the TCPStore could not bind its port."""
        wait_ready_all([self], timeout, grace)
        return self

    def _fail(self, msg):
        logs = "".join(self.log(r) for r in self.logs)
        self.port_taken = "Address already in use" in logs
        self.stop()
        e = LaunchError(f"{self.case}: {msg}")
        e.job = self
        return e


def wait_ready_all(jobs, timeout=60.0, grace=1.0):
    """Wait for several jobs at once until each one's hang exists: every started rank wrote
    its ready file (within `timeout` seconds), then `grace` seconds for the blocking calls
    to be entered, then every waiting rank is seen asleep twice in a row. Sets each job's
    ready_at. On the first failure stops that job and raises LaunchError (its .job is the
    job); the other jobs are left running."""
    deadline = time.monotonic() + timeout
    pending = {(j, r) for j in jobs for r in j.ranks}
    while pending:
        for j, r in list(pending):
            if os.path.exists(j.ready_files[r]):
                pending.discard((j, r))
                if not any(jj is j for jj, _ in pending):
                    j.ready_at = time.monotonic()
            elif j.procs[r].poll() is not None:
                raise j._fail(f"rank {r} (pid {j.pids[r]}) exited with {j.procs[r].returncode} "
                              f"before it was ready; log:\n{j.log(r)[-3000:]}")
        if pending and time.monotonic() > deadline:
            j = next(iter(pending))[0]
            late = sorted(r for jj, r in pending if jj is j)
            raise j._fail(f"ranks {late} not ready after {timeout:.0f} s; "
                          + "; ".join(f"rank {r} log tail: {j.log(r)[-800:]!r}" for r in late))
        if pending:
            time.sleep(0.1)
    # The ready file is written just before the blocking call: give every rank time to
    # enter it, then make sure the waiting ones sleep (not run) and none has died.
    time.sleep(grace)
    settle = max(10.0, timeout / 4)
    settle_deadline = time.monotonic() + settle
    streak = {(j, r): 0 for j in jobs for r in j.ranks if j.spec.get("wait", {}).get(r) != "busy"}
    while True:
        for (j, r), n in streak.items():
            if n >= 2:
                continue
            if not _alive(j.pids[r]):
                raise j._fail(f"rank {r} (pid {j.pids[r]}) died after it was ready; log:\n{j.log(r)[-3000:]}")
            streak[(j, r)] = n + 1 if proc_state(j.pids[r]) in ("S", "D") else 0
        running = [(j, r) for (j, r), n in streak.items() if n < 2]
        if not running:
            break
        if time.monotonic() > settle_deadline:
            j, r = running[0]
            raise j._fail(f"rank {r} (pid {j.pids[r]}) still runs {settle:.0f} s after it was ready")
        time.sleep(0.2)
    for j in jobs:
        for r in j.ranks:
            if j.procs[r].poll() is not None:
                raise j._fail(f"rank {r} exited with {j.procs[r].returncode}; log:\n{j.log(r)[-3000:]}")


def spawn_case(case, world_size=None, ranks=None, tmpdir=None, env=None):
    """Start the ranks of `case` (a key of CASES) and return its Job at once, before the
    hang exists: call job.wait_ready() next. Lets a test start several cases and then wait
    for them all. Arguments as for start_case. Call it from a thread that outlives the job
    (the main thread, say): a rank is killed when the thread that started it exits."""
    spec = CASES.get(case)
    if spec is None:
        raise LaunchError(f"unknown case {case!r}; known: {', '.join(CASES)}")
    world_size = world_size or spec["world_size"]
    if ranks is None:
        ranks = spec.get("ranks", list(range(world_size)))
    own = tmpdir is None
    d = tempfile.mkdtemp(prefix=f"hdx-{case}-") if own else tmpdir
    os.makedirs(d, exist_ok=True)
    job = Job(case, world_size, ranks, d, own)
    with _jobs_lock:
        _jobs.add(job)
    job.started_at = time.monotonic()
    try:
        job._prepare()
        job._spawn(env)
    except BaseException:
        job.stop()
        raise
    return job


def start_case(case, world_size=None, ranks=None, tmpdir=None, timeout=60.0, grace=1.0, env=None):
    """Start the ranks of `case` (a key of CASES) and return its Job once the hang exists:
    every started rank has written its ready file, `grace` seconds passed, and every rank
    that should wait sleeps. world_size and ranks default to the case's (ranks: all of
    them, except for rendezvous_missing). tmpdir: the job's scratch directory (logs, ready
    files, build dir); made and removed by the job when None. env: extra environment
    variables for every rank. Raises LaunchError (after killing what it started) when a
    rank exits or is not ready within `timeout` seconds; retries with another port when
    the TCPStore's port was taken meanwhile. Call it from a thread that outlives the job
    (the main thread, say): a rank is killed when the thread that started it exits."""
    for attempt in range(3):
        job = spawn_case(case, world_size, ranks, tmpdir, env)
        try:
            job.wait_ready(timeout, grace)
        except LaunchError:
            if attempt < 2 and job.port_taken:
                continue
            raise
        return job
    raise LaunchError("unreachable")


def stop_all():
    """Stop every job this process started and has not stopped (also run at exit)."""
    with _jobs_lock:
        jobs = list(_jobs)
    for j in jobs:
        j.stop()


atexit.register(stop_all)


# ----------------------------------------------------------------- faulthandler dumps

_FH_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):")
_FH_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.+)$')


def parse_faulthandler(text, with_files=False):
    """Threads of a faulthandler dump: a list, one per thread, of function names innermost
    first (or (function, file, line) tuples with with_files)."""
    threads, cur = [], None
    for line in text.splitlines():
        if _FH_THREAD.match(line):
            cur = []
            threads.append(cur)
            continue
        m = _FH_FRAME.match(line)
        if m and cur is not None:
            cur.append((m.group(3), m.group(1), int(m.group(2))) if with_files else m.group(3))
        elif cur is not None and line.strip() and not m:
            cur = None  # the dump ended
    return threads


def stack_matches(stack, want):
    """True when stack[0] is want[0] and want[1:] follow in order further out. A want[0]
    of "*" matches any innermost frame (a computing rank's changes all the time)."""
    if not want:
        return True
    if not stack or (want[0] != "*" and stack[0] != want[0]):
        return False
    i = 1
    for fn in stack[1:] if want[0] != "*" else stack:
        if i < len(want) and fn == want[i]:
            i += 1
    return i == len(want)


def _main(argv):
    import argparse
    if argv[:1] == ["--slurm-task"]:  # launch.py --slurm-task CASE PORT DIR, as each task of srun -n W
        exec_slurm_task(argv[1], int(argv[2]), argv[3])
    ap = argparse.ArgumentParser(description="Start one case of hangs.py and keep it hung until Ctrl-C.")
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--world-size", type=int)
    ap.add_argument("--ranks", help="comma-separated ranks to start")
    a = ap.parse_args(argv)
    ranks = [int(x) for x in a.ranks.split(",")] if a.ranks else None
    job = start_case(a.case, a.world_size, ranks)
    print(f"{a.case}: hung; master {job.master}; dir {job.dir}")
    for r, pid in sorted(job.pids.items()):
        print(f"  rank {r}: pid {pid}")
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        job.stop()


if __name__ == "__main__":
    _main(sys.argv[1:])
