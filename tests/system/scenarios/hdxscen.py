"""Shared helpers for hangdx's real-hang scenario tests.

Each scenario makes a real hang with real processes (Debian's python3-torch,
torch.utils.cpp_extension, flock), runs the hangdx binary on it and asserts the
values a user would check in the JSON report. Every scenario gets its own
temporary directory and starts each of its processes in a new session, so that
`Scenario.close()` can kill everything it started, children included, even the
compiler processes that ninja puts into process groups of their own.

Run by ctest with /usr/bin/python3 and the environment of tests/CMakeLists.txt:
HANGDX (the hangdx binary), HANGDX_PRELOAD, HDX_SOURCE_DIR, HDX_BUILD_DIR.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77  # ctest SKIP_RETURN_CODE
PYTHON = "/usr/bin/python3"  # Debian's, with torch; the first python3 on PATH may lack it
HERE = os.path.dirname(os.path.abspath(__file__))
LOADER = os.path.join(HERE, "loader.py")
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import report_frames  # noqa: E402  (a report's processes as objects, whatever its version)

# Syscall numbers seen in /proc/PID/syscall while a thread is blocked.
_SYSCALLS = {
    "x86_64": {"flock": 73, "clock_nanosleep": 230, "nanosleep": 35},
    "aarch64": {"flock": 32, "clock_nanosleep": 115, "nanosleep": 101},
}


class Failure(Exception):
    pass


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def check(cond, what, got=None):
    """Assert one value a user would check; on failure say what and show the evidence."""
    if cond:
        log(f"ok: {what}")
        return
    raise Failure(f"FAILED: {what}" + ("" if got is None else f"\n  got: {got}"))


def need_torch():
    """Skip (exit 77) with a line saying what is missing when the machine lacks torch."""
    if not os.access(PYTHON, os.X_OK):
        print(f"SKIP: {PYTHON} not found (run scripts/setup)")
        sys.exit(SKIP)
    r = subprocess.run([PYTHON, "-c", "import torch.utils.cpp_extension"], capture_output=True)
    if r.returncode != 0:
        print(f"SKIP: {PYTHON} cannot import torch.utils.cpp_extension (python3-torch missing; run scripts/setup)")
        sys.exit(SKIP)
    if shutil.which("ninja") is None or shutil.which("c++") is None:
        print("SKIP: ninja or c++ not found (ninja-build, build-essential; run scripts/setup)")
        sys.exit(SKIP)


def hangdx_bin():
    path = os.environ.get("HANGDX")
    if not path:
        build = os.environ.get("HDX_BUILD_DIR") or os.path.join(HERE, "..", "..", "..", "build")
        path = os.path.join(build, "bin", "hangdx")
    if not os.access(path, os.X_OK):
        raise Failure(f"hangdx binary not found at {path} (set HANGDX or build first)")
    return path


# ---------------------------------------------------------------- /proc helpers

def proc_stat(pid):
    """(state, ppid, session) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[3])


def alive(pid):
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def blocked_syscall(pid):
    """Number of the system call pid's main thread is blocked in, or None."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            first = f.read().split()[0]
        return int(first)
    except (OSError, ValueError, IndexError):
        return None


def syscall_nr(name):
    return _SYSCALLS.get(os.uname().machine, _SYSCALLS["x86_64"])[name]


def session_members(sid):
    """Live pids whose session id is sid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = proc_stat(int(d))
        if st and st[2] == sid and st[0] not in ("Z", "X"):
            out.append(int(d))
    return out


def descendants(pid):
    """pid's live descendants (any depth), not pid itself."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st and st[0] not in ("Z", "X"):
                children.setdefault(st[1], []).append(int(d))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def kill_session(sid, sig=signal.SIGKILL, limit=10.0):
    """Kill every process of session sid (ninja's children included: they keep the
    session though ninja gives them process groups of their own). Stops them all first
    so that none can spawn a new child between the listing and the kill."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        members = session_members(sid)
        if not members:
            return True
        for p in members:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        if set(session_members(sid)) - set(members):
            continue  # a new one appeared: stop it too before killing
        for p in members:
            try:
                os.kill(p, sig)
                if sig != signal.SIGKILL:
                    os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    return not session_members(sid)


def wait_for(cond, what, timeout=60.0, interval=0.05):
    """Poll cond() until true; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise Failure(f"timed out after {timeout:.0f} s waiting for {what}")


def wait_polling(pid, timeout=60.0):
    """Wait until pid sleeps in FileBaton.wait()'s time.sleep(0.1), twice in a row."""
    sleeps = {syscall_nr("clock_nanosleep"), syscall_nr("nanosleep")}

    def polling():
        if not alive(pid):
            raise Failure(f"process {pid} exited while it should wait on the lock")
        return blocked_syscall(pid) in sleeps
    wait_for(polling, f"process {pid} to poll the lock", timeout)
    time.sleep(0.3)
    wait_for(polling, f"process {pid} to poll the lock", timeout)


def wait_blocked_in(pid, name, timeout=60.0):
    nr = syscall_nr(name)

    def blocked():
        if not alive(pid):
            raise Failure(f"process {pid} exited while it should block in {name}")
        return blocked_syscall(pid) == nr
    wait_for(blocked, f"process {pid} to block in {name}()", timeout)


# ---------------------------------------------------------------- the scenario

TINY_CPP = """#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%(name)s(void) { return PyModule_Create(&def); }
"""

# A CXX for cpp_extension that delays only real compile invocations (those with -c):
# the compiler checks (`which`, `-v`, `-dumpfullversion`) that cpp_extension runs
# under the baton pass straight through, so ninja runs when the delay starts.
# MODE=sleep: the "compiler" sits idle; MODE=burn: it burns CPU (slow but healthy).
# It writes its pid to $DIR/compiler.pid, then waits until $DIR/release exists or
# LIMIT seconds pass, then runs the real compiler. The idle wait is bash's own `read -t`
# on a FIFO, so the "compiler" starts no child (a `sleep` would add a traced process
# five times a second).
CXX_WRAPPER = """#!/bin/bash
dir=%(dir)s
for a in "$@"; do
  if [ "$a" = -c ]; then
    exec 9<>"$dir/fifo"
    echo $$ > "$dir/compiler.pid.tmp" && mv "$dir/compiler.pid.tmp" "$dir/compiler.pid"
    SECONDS=0
    while [ ! -e "$dir/release" ] && (( SECONDS < %(limit)d )); do
      %(body)s
    done
    break
  fi
done
exec %(real)s "$@"
"""


def become_subreaper():
    """Adopt the orphans of the processes this scenario kills, so that they are reaped here
    and not left as zombies under a PID 1 that may never reap them (as in containers)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_orphans():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Scenario:
    """One scenario: a temp dir, the processes it started, and cleanup of both."""

    def __init__(self, name):
        become_subreaper()
        self.name = name
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix=f"hdx-{name}-"))
        self.procs = []  # Popen objects, each a session leader
        self.logs = []
        self.t0 = time.monotonic()
        # HDX_MECHANICS=1: make the hang and check its mechanics only, without hangdx
        # (for working on the scenarios while the binary does not build).
        self.mech = os.environ.get("HDX_MECHANICS") == "1"
        # Keep every cpp_extension and `hangdx locks` away from the user's own
        # ~/.cache/torch_extensions: this scenario's processes and hangdx see only its dir.
        os.environ["TORCH_EXTENSIONS_DIR"] = self.path("torch_extensions")
        os.makedirs(os.environ["TORCH_EXTENSIONS_DIR"])
        log(f"scenario {name} in {self.tmp}" + (" (mechanics only)" if self.mech else ""))

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    # -- processes

    def spawn(self, argv, env=None, tag="proc"):
        """Start argv in a new session, its output to <tmp>/<tag>.log."""
        full = dict(os.environ)
        full.update(env or {})
        out = open(self.path(f"{tag}.log"), "wb")
        self.logs.append(self.path(f"{tag}.log"))
        p = subprocess.Popen(argv, env=full, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True, cwd=self.tmp)
        out.close()
        self.procs.append(p)
        log(f"started {tag}: pid {p.pid}: {' '.join(argv)}")
        return p

    def spawn_loader(self, build_dir, ext, tag, env=None, traced_dir=None):
        """A process that calls cpp_extension.load(ext) on build_dir, under
        `hangdx run -d traced_dir` when traced_dir is given. Returns (Popen, python pid)."""
        pidfile = self.path(f"{tag}.pid")
        argv = [PYTHON, LOADER, "--build-dir", build_dir, "--name", ext,
                "--source", self.path(f"{ext}.cpp"), "--pidfile", pidfile]
        if traced_dir is not None and not self.mech:
            if os.environ.get("HDX_SCEN_PRELOAD") == "1":
                # Development aid: what `hangdx run` does, done by hand (shim + trace dir).
                os.makedirs(traced_dir, exist_ok=True)
                env = dict(env or {}, LD_PRELOAD=os.environ["HANGDX_PRELOAD"],
                           HANGDX_TRACE_DIR=traced_dir)
            else:
                argv = [hangdx_bin(), "run", "-d", traced_dir, "--"] + argv
        p = self.spawn(argv, env=env, tag=tag)
        pid = int(wait_for(lambda: _read(pidfile), f"{tag} to write its pid", 60))
        log(f"{tag}: python pid {pid}")
        return p, pid

    def wait_rank_polls(self, tag, pid, timeout=60.0):
        """Wait until the loader `tag` (python pid) has called load() and sleeps in
        FileBaton.wait()'s poll loop."""
        wait_for(lambda: "loading" in (_read(self.path(f"{tag}.log")) or ""),
                 f"{tag} to call cpp_extension.load", timeout)
        wait_polling(pid, timeout)

    def write_ext(self, ext):
        with open(self.path(f"{ext}.cpp"), "w") as f:
            f.write(TINY_CPP % {"name": ext})

    def write_cxx(self, mode, limit=120):
        """The delaying CXX wrapper (see CXX_WRAPPER); returns its path and the dir of its
        pid/release files."""
        d = self.path("cxx")
        os.makedirs(d, exist_ok=True)
        real = shutil.which("c++") or "/usr/bin/c++"
        body = "read -t 0.2 -u 9 || true" if mode == "sleep" else ":"
        if not os.path.exists(os.path.join(d, "fifo")):
            os.mkfifo(os.path.join(d, "fifo"))
        path = os.path.join(d, "c++")
        with open(path, "w") as f:
            f.write(CXX_WRAPPER % {"dir": d, "limit": limit, "body": body, "real": real})
        os.chmod(path, 0o755)
        return path, d

    def kill_tree(self, popen):
        """SIGKILL a started process with every descendant (its whole session), and reap it."""
        kill_session(popen.pid)
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.05)
        reap_orphans()

    # -- hangdx

    def hangdx(self, *args, timeout=90, expect_rc=(0, 1)):
        argv = [hangdx_bin()] + [str(a) for a in args]
        log("$ " + " ".join(argv))
        t = time.monotonic()
        r = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        log(f"  exit {r.returncode} in {time.monotonic() - t:.1f} s")
        if r.stderr:
            sys.stdout.write("  stderr: " + r.stderr.decode(errors="replace").replace("\n", "\n  stderr: ") + "\n")
        if expect_rc is not None and r.returncode not in expect_rc:
            raise Failure(f"FAILED: {' '.join(argv)} exited {r.returncode}\n"
                          f"stdout: {r.stdout.decode(errors='replace')[:4000]}")
        return r

    def hangdx_json(self, *args, **kw):
        r = self.hangdx(*args, **kw)
        try:
            obj = report_frames.loads(r.stdout)
        except ValueError as e:
            raise Failure(f"FAILED: hangdx {' '.join(map(str, args))}: stdout is not one JSON object "
                          f"({e}):\n{r.stdout.decode(errors='replace')[:4000]}")
        self.dump(obj, "-".join(str(a) for a in args if not str(a).startswith("/"))[:40])
        return obj

    def dump(self, obj, what):
        """Keep each JSON answer in the log, so that a failure shows what hangdx said: the
        verdict, locks and notes in full, the processes as a table, stacks left out."""
        brief = {k: v for k, v in obj.items() if k not in ("processes", "groups")}
        log(f"JSON ({what}), without processes and groups:\n{json.dumps(brief, indent=1)}")
        procs = obj.get("processes")
        if isinstance(procs, list):
            rows = []
            for p in procs:
                cmd = " ".join(p.get("cmdline") or [])[:70]
                rows.append(f"  {p.get('pid')!s:>7} rank={p.get('rank')!s:<4} {p.get('state')!s:<2} "
                            f"cpu_ms={p.get('cpu_ms')!s:<6} progressing={p.get('progressing')!s:<5} "
                            f"stopped_us={p.get('stopped_us')!s:<8} {cmd}")
            log(f"processes ({what}):\n" + "\n".join(rows))

    # -- cleanup

    def close(self, keep=False):
        for p in self.procs:
            kill_session(p.pid)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log(f"warning: {p.pid} did not exit")
        reap_orphans()
        for lf in self.logs:
            try:
                with open(lf, errors="replace") as f:
                    tail = f.read()[-1500:]
                if tail.strip():
                    log(f"--- {os.path.basename(lf)} (tail)\n{tail}")
            except OSError:
                pass
        if keep:
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        log(f"scenario {self.name} took {time.monotonic() - self.t0:.1f} s")


def _read(path):
    try:
        with open(path) as f:
            s = f.read().strip()
        return s or None
    except OSError:
        return None


def read_pid(path):
    s = _read(path)
    return int(s) if s else None


# ---------------------------------------------------------------- report accessors

def verdict(rep):
    return rep.get("verdict") or {}


def find_lock(rep, path):
    for lk in rep.get("locks") or []:
        if lk.get("path") == path:
            return lk
    return None


def waiter_pids(lock):
    return [w.get("pid") for w in (lock or {}).get("waiters") or []]


def waiter_ranks(lock):
    return [w.get("rank") for w in (lock or {}).get("waiters") or []]


def run_main(name, body, needs_torch=True):
    """Run body(scenario); exit 0 on success, 1 on a failed check, 77 to skip."""
    if needs_torch:
        need_torch()
    sc = Scenario(name)
    ok = False
    try:
        body(sc)
        ok = True
    except Failure as e:
        log(str(e))
    finally:
        sc.close(keep=not ok and os.environ.get("HDX_KEEP") == "1")
    log("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)
