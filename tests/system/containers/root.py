"""Helpers of the container tests: the Debian 13 root, and processes run in it two ways, seen
and inspected from the host with the host's hangdx.

    import root
    box = root.Box("gloo", mode="chroot")       # or "unshare-chroot", "container"; skips (77) without a root
                                                # ("host": the same on the host, no root: the baseline)
    p = box.spawn(["python3", box.inside("job.py"), "rank"], env={"RANK": "0"}, tag="rank0")
    p.host_pid                                  # the command's pid on the host
    box.host_pid(p, inside_pid)                 # a pid seen inside p's pid namespace, on the host
    box.host("x/lock"), box.inside("x/lock")    # one file of the job dir, by both names
    box.close()                                 # kills everything, checks nothing is left

The root: scripts/fixtures/make-debian-root 13 makes it once and caches it (HDX_CONTAINER_ROOT, default
/var/cache/hangdx/debian13-root); ensure_root() runs it and exits 77 (SKIP_RETURN_CODE) with a
line saying why when it cannot be made (not root, mirror unreachable, no space) or when this
machine cannot make namespaces.

Each Box has a job directory on the host's disk (box.dir, under the temp dir) bound inside at
/mnt/<its name> (box.idir), so that a file has two names: box.host(rel) and box.inside(rel).
Modes (tests/system/containers/enter.py does the entering):
  chroot     a plain `chroot VIEW cmd` in all of the host's namespaces: VIEW (box.root) is a
             bind of the cached root under the temp dir (hdx-ctr-views/<job>), with /proc,
             /dev (a tmpfs with the usual device nodes bound in), /sys (read-only), /tmp and
             the job dir mounted into it in the host's mount namespace, by this module, and
             unmounted at close() (or, after a test that was killed, by the next Box). Pids
             are the host's; /proc/PID/maps shows host paths (VIEW/usr/lib/...).
  unshare-chroot  `unshare --mount` + chroot ROOT: the host's pids, but the mounts (the job
             dir at ROOT/mnt/<job>) exist only in the process's own mount namespace.
  host       no root at all: the same processes run on the host (Debian 12's Python 3.11 and
             torch 1.13), the job dir named by its host path: the baseline that shows a
             test's expectations hold where hangdx sees no container.
  container  each spawn a new container: `unshare --mount --pid --fork --kill-child`, then
             pivot_root into the root: the command is pid 1 of its pid namespace, and inside,
             pids and paths are the container's. spawn(..., join=p) runs a command in p's
             container instead (`nsenter -t PID -m -p -r -w`, as `docker exec` does).
The host's network namespace is kept in both (gloo on 127.0.0.1 across containers).

No process outlives the test: every spawn is a session leader that is SIGKILLed with its
whole session at close(); each dies with its parent (PR_SET_PDEATHSIG on the outermost process,
unshare's --kill-child, pid 1 of a namespace taking the rest with it); close() then looks for
anything left in the sessions and namespaces it made and fails the test if it finds one.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import report_frames  # noqa: E402  (each thread's frames, from a report of either version)

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HDX_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", "..", ".."))
MAKE_ROOT = os.path.join(SRC, "scripts", "fixtures", "make-debian-root")
ROOT_DIR = os.environ.get("HDX_CONTAINER_ROOT", "/var/cache/hangdx/debian13-root")
HOST_PY = "/usr/bin/python3"
ENTER = os.path.join(HERE, "enter.py")
JOB = os.path.join(HERE, "job.py")
INSIDE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

sys.path.insert(0, os.path.join(SRC, "tests", "system", "distributed"))


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(SKIP)


# ---------------------------------------------------------------- checks

class Checks:
    """Soft checks: every expectation is tried and printed; the test fails at the end if any
    did. A failed one prints what was expected and what came."""

    def __init__(self):
        self.failed = []

    def __call__(self, cond, what, got=None):
        if cond:
            log(f"ok    {what}")
        else:
            self.failed.append(what)
            log(f"FAIL  {what}" + ("" if got is None else f"\n        got: {_short(got)}"))
        return bool(cond)

    def summary(self):
        if self.failed:
            log(f"{len(self.failed)} expectation(s) failed:")
            for w in self.failed:
                log(f"  - {w}")
        return not self.failed


def _short(v, n=1500):
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[:n] + f"... ({len(s)} chars)"


# ---------------------------------------------------------------- the root

_root_checked = None


def ensure_root():
    """The made root's directory; exits 77 with the reason when it cannot be had."""
    global _root_checked
    if _root_checked:
        return _root_checked
    if os.geteuid() != 0:
        skip("not root: the container tests need chroot, mount and namespaces (CI runs as root)")
    for tool in ("unshare", "nsenter"):
        if not shutil.which(tool):
            skip(f"{tool} not found (util-linux)")
    t = time.monotonic()
    r = subprocess.run([MAKE_ROOT, "13", ROOT_DIR], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1800)
    for line in r.stdout.splitlines():
        log(line)
    if r.returncode == SKIP:
        last = [l for l in r.stdout.splitlines() if l.strip()]
        skip(f"the Debian 13 root cannot be made here: {last[-1] if last else 'make-debian-root exited 77'}")
    if r.returncode != 0:
        sys.exit(f"scripts/fixtures/make-debian-root 13 {ROOT_DIR} failed (exit {r.returncode})")
    log(f"root {ROOT_DIR} ready ({time.monotonic() - t:.1f} s)")
    probe = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        skip(f"this machine cannot make mount and pid namespaces: {probe.stderr.strip()}")
    _root_checked = ROOT_DIR
    return ROOT_DIR


def _host_baseline_ok():
    r = subprocess.run([HOST_PY, "-c", "import filelock, torch.utils.cpp_extension"], capture_output=True, text=True)
    if r.returncode != 0:
        skip(f"the host baseline needs Debian's python3-torch and python3-filelock in {HOST_PY} "
             f"(scripts/setup): {r.stderr.strip().splitlines()[-1:]}")
    return "/"


def hangdx_bin():
    path = os.environ.get("HANGDX") or os.path.join(
        os.environ.get("HDX_BUILD_DIR") or os.path.join(SRC, "build"), "bin", "hangdx")
    if not os.access(path, os.X_OK):
        sys.exit(f"hangdx binary not found at {path} (set HANGDX or build first)")
    return path


def preload_lib():
    path = os.environ.get("HANGDX_PRELOAD") or os.path.join(os.path.dirname(os.path.dirname(hangdx_bin())),
                                                            "lib", "libhangdx-preload.so")
    if not os.path.exists(path):
        sys.exit(f"the shim is not at {path} (set HANGDX_PRELOAD or build first)")
    return path


# ---------------------------------------------------------------- /proc

def proc_stat(pid):
    """(state, ppid, session) or None when gone."""
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


def pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def children(pid):
    return [p for p in pids() if (proc_stat(p) or (None, None))[1] == pid]


def pid_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def nspid(pid):
    """The NSpid line of pid: [host pid, ..., innermost pid]."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


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


def blocked_syscall(pid):
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


SLEEP_SYSCALLS = {230, 35} if os.uname().machine == "x86_64" else {115, 101}


def wait_for(cond, what, timeout=60.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def wait_asleep(pid, what, timeout=30.0, polls=False):
    """Wait until pid's main thread sleeps twice in a row (state S; with polls, in a
    nanosleep: a FileBaton or FileLock poll loop)."""
    def asleep():
        st = proc_stat(pid)
        if st is None or st[0] in ("Z", "X"):
            raise RuntimeError(f"{what} (pid {pid}) exited")
        return st[0] in ("S", "D") and (not polls or blocked_syscall(pid) in SLEEP_SYSCALLS)
    wait_for(asleep, what, timeout)
    time.sleep(0.3)
    wait_for(asleep, what, timeout)


# ---------------------------------------------------------------- processes in the root

class Proc:
    """One spawn: popen is the outermost process on the host (enter.py / unshare / nsenter),
    host_pid the command's own pid on the host, ns its pid namespace."""

    def __init__(self, box, popen, tag, log_path, outer):
        self.box, self.popen, self.tag, self.log_path, self.outer = box, popen, tag, log_path, outer
        self.host_pid = None
        self.ns = None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def alive(self):
        return self.host_pid is not None and alive(self.host_pid)


VIEWS = os.path.join(tempfile.gettempdir(), "hdx-ctr-views")
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def _mount(*args):
    r = subprocess.run(["mount"] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"mount {' '.join(args)}: {r.stderr.strip()}")


def _mounts_below(path):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    return out


def _unmount_view(view):
    """Unmount a chroot view and everything below it, then remove its directory. Never removes
    anything while a mount stays below it."""
    for _ in range(3):
        mps = sorted(set(_mounts_below(view)), key=len, reverse=True)
        if not mps:
            break
        for mp in mps:
            subprocess.run(["umount", "-l", mp], capture_output=True)
    if _mounts_below(view):
        log(f"warning: mounts stay below {view}: {_mounts_below(view)}")
        return False
    try:
        os.rmdir(view)
    except OSError:
        pass
    try:
        os.unlink(view + ".owner")
    except OSError:
        pass
    return True


def _owner_gone(path):
    try:
        with open(path) as f:
            owner = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return True, None
    return not alive(owner), owner


def _sweep_job_dirs():
    """Remove the job dirs of tests that were killed before their close() (never one that a
    mount of a live chroot view still shows: those are swept with their view first)."""
    tmp = tempfile.gettempdir()
    for n in os.listdir(tmp):
        d = os.path.join(tmp, n)
        if not n.startswith("hdx-ctr-") or n == "hdx-ctr-views" or not os.path.isfile(os.path.join(d, ".owner")):
            continue
        gone, owner = _owner_gone(os.path.join(d, ".owner"))
        if gone and not os.path.exists(os.path.join(VIEWS, n)):
            log(f"removing the job dir {d} of a test that is gone (pid {owner})")
            shutil.rmtree(d, ignore_errors=True)


def _sweep_views():
    """Unmount the chroot views of tests that are gone (killed before their close())."""
    try:
        names = os.listdir(VIEWS)
    except OSError:
        return
    for n in names:
        if n.endswith(".owner"):
            continue
        view = os.path.join(VIEWS, n)
        gone, owner = _owner_gone(view + ".owner")
        if gone:
            log(f"removing the chroot view {view} of a test that is gone (pid {owner})")
            _unmount_view(view)


class Box:
    def __init__(self, name, mode):
        if mode not in ("chroot", "unshare-chroot", "container", "host"):
            raise ValueError(mode)
        self.cached_root = ensure_root() if mode != "host" else _host_baseline_ok()
        self.root = self.cached_root
        _become_subreaper()
        self.name, self.mode = name, mode
        _sweep_views()
        _sweep_job_dirs()
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix=f"hdx-ctr-{name}-"))
        os.chmod(self.dir, 0o755)
        with open(os.path.join(self.dir, ".owner"), "w") as f:
            f.write(f"{os.getpid()}\n")
        self.idir = "/mnt/" + os.path.basename(self.dir) if mode != "host" else self.dir
        self.procs = []
        self.sessions = set()
        self.namespaces = set()
        self.closed = False
        self.view = None
        shutil.copy(JOB, self.host("job.py"))
        _boxes.append(self)
        if mode == "chroot":
            self._make_view()
        log(f"box {name} ({mode}): job dir {self.dir}, inside {self.idir}, root {self.root}")

    def _make_view(self):
        """The plain chroot's root: a bind of the cached root with its mounts, all in the host's
        mount namespace (made private, so that nothing propagates to or from it)."""
        os.makedirs(VIEWS, exist_ok=True)
        view = os.path.join(VIEWS, os.path.basename(self.dir))
        os.mkdir(view)
        with open(view + ".owner", "w") as f:
            f.write(f"{os.getpid()}\n")
        self.view = view
        _mount("--bind", self.cached_root, view)
        _mount("--make-private", view)
        _mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", f"{view}/proc")
        _mount("-t", "sysfs", "-o", "ro,nosuid,nodev,noexec", "sysfs", f"{view}/sys")
        _mount("-t", "tmpfs", "-o", "mode=755,nosuid", "tmpfs", f"{view}/dev")
        for n in DEV_NODES:  # bound one by one: nothing under it can remove the host's nodes
            if os.path.exists(f"/dev/{n}"):
                open(f"{view}/dev/{n}", "w").close()
                _mount("--bind", f"/dev/{n}", f"{view}/dev/{n}")
        os.mkdir(f"{view}/dev/shm")
        _mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", f"{view}/dev/shm")
        os.symlink("/proc/self/fd", f"{view}/dev/fd")
        _mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", f"{view}/tmp")
        _mount("-t", "tmpfs", "-o", "mode=755,nosuid,nodev", "tmpfs", f"{view}/mnt")
        os.mkdir(view + self.idir)
        _mount("--bind", self.dir, view + self.idir)
        self.root = view

    # -- names

    def host(self, *rel):
        return os.path.join(self.dir, *rel)

    def inside(self, *rel):
        return os.path.join(self.idir, *rel)

    def host_names(self, inside_path):
        """Every name the host has for a file of the job dir that the processes name inside_path:
        the job dir's own, and in the plain chroot also the one through the chroot's root (the
        view's mount of the job dir, in the host's mount namespace)."""
        names = [self.to_host(inside_path)]
        if self.view:
            names.append(self.view + inside_path)
        return names

    def to_host(self, inside_path):
        """The host's name of a file the processes name inside_path."""
        if inside_path == self.idir or inside_path.startswith(self.idir + "/"):
            return self.dir + inside_path[len(self.idir):]
        return inside_path if self.mode == "host" else self.cached_root + inside_path

    # -- processes

    def env(self, extra=None):
        e = {"PATH": INSIDE_PATH, "HOME": "/root", "LANG": "C.UTF-8", "USE_LIBUV": "0",
             "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
             "MKL_NUM_THREADS": "1", "HDX_JOB_DIR": self.idir, "TORCH_EXTENSIONS_DIR": self.inside("torch_ext")}
        e.update(extra or {})
        return e

    def spawn(self, argv, env=None, tag="proc", join=None, cwd=None):
        """Run argv (paths as seen inside) in the root: a new chroot or container, or, with
        join=Proc, in that one's container (docker exec). env is the whole environment of the
        command (box.env() plus env), also the environment of the wrappers around it, as a
        launcher that sets RANK before `srun --container-image`, `docker run -e` or `enroot
        start` would."""
        full = self.env(env)
        cwd = cwd or self.idir
        if join is not None and self.mode == "container":
            # Wait until the container is up (pivot_root done, the job dir there), as a
            # `docker exec` into a container still starting would fail.
            wait_for(lambda: os.path.exists(f"/proc/{join.host_pid}/root{self.idir}/job.py")
                     or join.popen.poll() is not None, f"{join.tag}'s container to be up", 30)
            outer = ["nsenter", "-t", str(join.host_pid), "-m", "-p", "-r", "-w", "--",
                     "sh", "-c", 'cd "$0" && exec "$@"', cwd] + list(argv)
        elif self.mode == "host":
            outer = list(argv)
        elif self.mode == "chroot":
            outer = [HOST_PY, ENTER, "--mode", "chroot", "--root", self.root, "--cwd", cwd, "--"] + list(argv)
        else:
            enter = [HOST_PY, ENTER, "--mode", self.mode, "--root", self.root,
                     "--bind", f"{self.dir}={self.idir}", "--cwd", cwd, "--"] + list(argv)
            outer = enter if self.mode == "unshare-chroot" else \
                ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--"] + enter
        log_path = self.host(f"{tag}.log")
        out = open(log_path, "ab")
        popen = subprocess.Popen(outer, env=full, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=_die_with_parent, cwd=cwd if self.mode == "host" else None)
        out.close()
        p = Proc(self, popen, tag, log_path, outer)
        self.procs.append(p)
        self.sessions.add(popen.pid)
        if self.mode != "container":
            p.host_pid = popen.pid  # enter.py execs into the command
        else:  # unshare and nsenter fork the command
            def child():
                if popen.poll() is not None:
                    raise RuntimeError(f"{tag}: {outer[0]} exited with {popen.returncode}: {p.log()[-2000:]}")
                c = children(popen.pid)
                return c[0] if c else None
            p.host_pid = wait_for(child, f"{tag}: the command under {outer[0]}", 20, 0.01)
        p.ns = pid_ns(p.host_pid)
        if self.mode == "container" and join is None:
            self.namespaces.add(p.ns)
        log(f"started {tag}: host pid {p.host_pid} (outer {outer[0]} {popen.pid}): {' '.join(argv)}")
        return p

    def host_pid(self, p, inside_pid):
        """The host pid of the process that p's pid namespace calls inside_pid."""
        if self.mode != "container":
            return inside_pid
        for q in pids():
            if pid_ns(q) == p.ns:
                ns = nspid(q)
                if ns and ns[-1] == inside_pid:
                    return q
        return None

    def ready(self, tag, proc, timeout=90.0):
        """Wait for job.py's ready-<tag>.json; returns its info with host_pid added."""
        path = self.host(f"ready-{tag}.json")

        def got():
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.tag} exited with {proc.popen.returncode} before {tag} was ready; "
                                   f"log:\n{proc.log()[-3000:]}")
            try:
                with open(path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
        info = wait_for(got, f"{tag} to be ready", timeout, 0.1)
        info["host_pid"] = self.host_pid(proc, info["pid"])
        log(f"ready {tag}: inside pid {info['pid']}, host pid {info['host_pid']}: {info}")
        return info

    def kill(self, p, sig=signal.SIGKILL):
        """Kill p's whole session (the command, its wrappers, its children) and reap it."""
        _kill_session(p.popen.pid, sig)
        try:
            p.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        _reap()

    def leftovers(self):
        """Live processes of this box's sessions and namespaces."""
        left = []
        for q in pids():
            st = proc_stat(q)
            if st is None or st[0] in ("Z", "X"):
                continue
            if st[2] in self.sessions or (self.namespaces and pid_ns(q) in self.namespaces):
                left.append(q)
        return left

    def close(self, keep=False):
        if self.closed:
            return []
        self.closed = True
        for p in self.procs:
            _kill_session(p.popen.pid)
        for p in self.procs:
            try:
                p.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log(f"warning: {p.tag} ({p.popen.pid}) did not exit")
        _reap()
        left = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = self.leftovers()
            if not left:
                break
            for q in left:
                try:
                    os.kill(q, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
            _reap()
        for p in self.procs:
            tail = p.log()[-1500:]
            if tail.strip():
                log(f"--- {p.tag}.log (tail)\n{tail}")
        if left:
            log(f"LEFTOVER processes after close: {[(q, comm(q)) for q in left]}")
        if self.view and not _unmount_view(self.view):
            left.append(f"mounts below {self.view}")
        if keep or os.environ.get("HDX_KEEP") == "1":
            log(f"kept {self.dir}")
        elif not (self.view and _mounts_below(self.view)):
            shutil.rmtree(self.dir, ignore_errors=True)
        return left


_boxes = []


def close_all():
    left = []
    for b in list(_boxes):
        left += b.close()
    return left


atexit.register(close_all)


def _on_signal(sig, frame):
    close_all()
    os._exit(128 + sig)


for _s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_s, _on_signal)


def _die_with_parent():
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _become_subreaper():
    import ctypes
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_session(sid, sig=signal.SIGKILL, limit=10.0):
    """SIGKILL every process of session sid, stopping them first so that none forks meanwhile."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        members = [q for q in pids() if (st := proc_stat(q)) and st[2] == sid and st[0] not in ("Z", "X")]
        if not members:
            return True
        for q in members:
            try:
                os.kill(q, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        for q in members:
            try:
                os.kill(q, sig)
                if sig != signal.SIGKILL:
                    os.kill(q, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if sig != signal.SIGKILL:
            return True
        time.sleep(0.05)
        _reap()
    return False


# ---------------------------------------------------------------- hangdx

def hangdx(*args, timeout=120, quiet=False):
    argv = [hangdx_bin()] + [str(a) for a in args]
    log("$ " + " ".join(argv))
    t = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    log(f"  exit {r.returncode} in {time.monotonic() - t:.1f} s")
    if r.stderr.strip() and not quiet:
        log("  stderr: " + r.stderr.strip().replace("\n", "\n  stderr: "))
    return r


def hangdx_json(*args, timeout=120):
    r = hangdx(*args, timeout=timeout)
    try:
        obj = report_frames.loads(r.stdout)
    except ValueError as e:
        log(f"  stdout is not JSON ({e}): {r.stdout[:3000]}")
        return {"_exit": r.returncode, "_stdout": r.stdout}
    obj["_exit"] = r.returncode
    return obj


def show_report(rep, what):
    """The parts of a report a failure needs: verdict, process groups, locks, notes, and the
    processes as a table with each one's main Python frames."""
    brief = {k: rep.get(k) for k in ("verdict", "process_groups", "locks", "notes", "_exit") if k in rep}
    log(f"report ({what}):\n{json.dumps(brief, indent=1, default=str)[:8000]}")
    rows = []
    for p in rep.get("processes") or []:
        cmd = " ".join(p.get("cmdline") or [])[:80]
        rows.append(f"  pid {p.get('pid')!s:>7} rank={p.get('rank')!s:<4} {p.get('state')!s:<2} "
                    f"exe={p.get('exe')} python={_short(p.get('python'), 200)} {cmd}")
        for t in p.get("threads") or []:
            fr = t.get("frames") or []
            py = [f for f in fr if f.get("kind") == "python"]
            rows.append(f"      tid {t.get('tid')} wait={t.get('wait')} frames={len(fr)} python={len(py)} "
                        + ("; ".join(f"{f.get('function')} ({f.get('file')}:{f.get('line')})" for f in py[:4])
                           or ("; ".join(f"{f.get('function')} [{f.get('module')}]" for f in fr[:3]))))
    if rows:
        log(f"processes ({what}):\n" + "\n".join(rows))


def markers(path):
    """{name: line} of the '# @name' markers of a file."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"# @(\w+)", line)
            if m:
                out[m.group(1)] = n
    return out


def python_frames(thread):
    return [f for f in thread.get("frames") or [] if f.get("kind") == "python"] or \
        list(thread.get("python_frames") or [])


def find_process(rep, pid):
    for p in rep.get("processes") or []:
        if p.get("pid") == pid:
            return p
    return None


def main_thread(proc):
    for t in proc.get("threads") or []:
        if t.get("tid") == proc.get("pid"):
            return t
    return (proc.get("threads") or [None])[0]


def json_ranks(rep):
    """[(rank, pid, command)] of the report's processes that it presents as ranks: those with a
    rank, less any it marks as not the rank (a launcher or worker of one, a wrapper)."""
    out = []
    for p in rep.get("processes") or []:
        if p.get("rank") is None:
            continue
        if p.get("part", "rank") != "rank" or p.get("is_rank") is False or p.get("rank_process") is False \
                or p.get("wrapper") is True:
            continue
        out.append((p.get("rank"), p.get("pid"), " ".join(p.get("cmdline") or [])[:60]))
    return sorted(out)


def text_ranks(text):
    """[(rank, pid)] of the text report's process lines that read as a rank ("rank N pid P ..."
    without "(launcher of rank N, not the rank)" or the like)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s+rank (\d+) pid (\d+)\s", line)
        if m and "not the rank" not in line:
            out.append((int(m.group(1)), int(m.group(2))))
    return sorted(out)


def run_test(body):
    """Run body(checks); exit 0 when every check passed, 1 otherwise; close every box."""
    checks = Checks()
    t0 = time.monotonic()
    ok = False
    try:
        body(checks)
        ok = checks.summary()
    except (TimeoutError, RuntimeError) as e:
        log(f"FAIL  the test could not set up its hang: {e}")
        checks.summary()
    finally:
        left = close_all()
        if left:
            log("FAIL  processes outlived the test (killed now)")
            ok = False
    log(f"{'PASS' if ok else 'FAIL'} in {time.monotonic() - t0:.1f} s")
    sys.exit(0 if ok else 1)
