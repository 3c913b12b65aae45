"""ELF core files through `hangdx analyze`, against real processes.

    HANGDX=build/bin/hangdx HDX_SOURCE_DIR=. python3 tests/system/core/test_core.py

1. Live and post-mortem agree: tests/system/python/park.py under Debian's
   /usr/bin/python3.11 and pyenv's 3.10 and 3.12 (shared libpython) when
   present: `hangdx dump --json PID`, `gcore`, kill, `hangdx analyze --json
   CORE` must give the same pid, exe, cmdline, TIDs, Python frames
   (function, file, line) and native function names; the busy thread may
   differ in its innermost frames only (it was caught running).
2. A kernel core (SIGSEGV, core_pattern "core") with RANK/WORLD_SIZE in the
   environment: the Python frames, the rank from the initial stack, and the
   note that pages the core lacks came from the mapped file.
3. The same with the interpreter replaced on disk by another build: the
   fallback is refused with a note naming the file and its build ids.
4. A rank waiting on a stale FileBaton lock (a stand-in torch/utils tree, so
   no torch is needed), dumped with gcore: the verdict is build_lock.
5. A truncated core and a non-core ELF: exit 2 and a message that says so.

Exits 77 (skip) without gcore or Debian's python3.11, 1 on the first failure.
"""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "dump"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import report_frames  # noqa: E402  (each thread's frames, from a report of either version)
import test_dump as td  # noqa: E402  (start_park, expected, check_python, ...)

HANGDX = os.environ.get("HANGDX")
check, Fail = td.check, td.Fail


def analyze(*inputs, ok=True):
    r = subprocess.run([HANGDX, "analyze", "--json"] + list(inputs), capture_output=True, text=True, timeout=120)
    if not ok:
        return r
    check(r.returncode == 0, "hangdx analyze %s: exit %d, stderr: %s" % (" ".join(inputs), r.returncode, r.stderr.strip()))
    d = report_frames.loads(r.stdout)
    check(d.get("schema") == "hangdx.report/2", "schema %r" % d.get("schema"))
    check(len(d["processes"]) == 1, "%d processes from one core" % len(d["processes"]))
    return d


def gcore(pid, tmp):
    prefix = os.path.join(tmp, "core")
    r = subprocess.run(["gcore", "-o", prefix, str(pid)], capture_output=True, text=True, timeout=120)
    path = "%s.%d" % (prefix, pid)
    check(r.returncode == 0 and os.path.exists(path), "gcore %d: exit %d: %s" % (pid, r.returncode, r.stderr[-500:]))
    return path


def by_tid(proc):
    return {t["tid"]: t for t in proc["threads"]}


def natives(frames):
    return [td.fn(f) for f in frames if f["kind"] == "native"]


def outer_natives(frames):
    """Native function names outside the outermost Python frame."""
    last = max([i for i, f in enumerate(frames) if f["kind"] == "python"] or [-1])
    return [td.fn(f) for f in frames[last + 1:]]


def pys(frames):
    return [(td.fn(f), f.get("file"), f.get("line")) for f in td.python_frames(frames)]


def compare(label, live, post, tids):
    for key in ("pid", "cmdline", "exe"):
        if key in live:
            check(live[key] == post.get(key), "%s: %s live %r, core %r" % (label, key, live[key], post.get(key)))
    check(post["alive"] is None, "%s: alive unknown in a core (alive when dumped, or died with it)" % label)
    lt, pt = by_tid(live), by_tid(post)
    check(set(lt) == set(pt), "%s: TIDs live %s, core %s" % (label, sorted(lt), sorted(pt)))
    for name, tid in tids.items():
        a, b = lt[tid], pt[tid]
        who = "%s %s (%d)" % (label, name, tid)
        pa, pb = pys(a), pys(b)
        if name == "busy":
            # Running when sampled: the line inside spin and the frames below it may differ.
            check([x[0] for x in pa] == [x[0] for x in pb], "%s: Python functions live %s, core %s" % (who, pa, pb))
            check(pa[1:] == pb[1:], "%s: outer Python frames live %s, core %s" % (who, pa, pb))
            na, nb = outer_natives(a["frames"]), outer_natives(b["frames"])
            check(na and na == nb, "%s: native frames outside Python live %s, core %s" % (who, na, nb))
            continue
        check(pa == pb, "%s: Python frames live %s, core %s" % (who, pa, pb))
        check(natives(a["frames"]) == natives(b["frames"]),
              "%s: native frames live %s, core %s" % (who, natives(a["frames"]), natives(b["frames"])))
        check(not b.get("unmerged") and any(f["kind"] == "native" for f in b["frames"]),
              "%s: the core's stack is not merged: %s" % (who, td.describe(b["frames"])))
        fa = [f for f in a["frames"] if f["kind"] == "native"]
        fb = [f for f in b["frames"] if f["kind"] == "native"]
        for x, y in zip(fa, fb):
            check((x.get("module"), x.get("offset"), x.get("line")) == (y.get("module"), y.get("offset"), y.get("line")),
                  "%s: %s live %s+%s:%s, core %s+%s:%s" % (who, td.fn(x), x.get("module"), x.get("offset"), x.get("line"),
                                                         y.get("module"), y.get("offset"), y.get("line")))


def live_vs_gcore(label, python, minor, mk, tmp):
    proc, tids = td.start_park(python, tmp)
    try:
        live, _ = td.dump_json(proc.pid, "--native-lines")  # the core gives file:line too
        core = gcore(proc.pid, tmp)
    finally:
        td.stop_park(proc)
    d = analyze(core)
    post = d["processes"][0]
    check(post["python"] and post["python"].startswith("3.%d " % minor), "%s: python %r" % (label, post["python"]))
    compare(label, live, post, tids)
    want = td.expected(minor, mk)
    for name in ("main", "worker"):
        td.check_python("%s core %s" % (label, name), td.python_frames(by_tid(post)[tids[name]]), want[name])
    os.unlink(core)
    print("ok: %s: gcore core agrees with the live dump (%d threads)" % (label, len(tids)))


def core_pattern_plain():
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            pat = f.read().strip()
    except OSError:
        return None
    return None if pat.startswith("|") or "/" in pat else pat


def start_in(cmd, cwd, env_extra, core_limit=True):
    env = dict(os.environ, **env_extra)

    def pre():
        if core_limit:
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=pre)


def wait_file(path, proc, secs=15):
    deadline = time.monotonic() + secs
    while not os.path.exists(path):
        check(proc.poll() is None, "%s exited early (%s)" % (proc.args, proc.returncode))
        check(time.monotonic() < deadline, "%s: no %s within %d s" % (proc.args, path, secs))
        time.sleep(0.02)
    time.sleep(0.3)


def kernel_core(python, tmp):
    """Start park.py under python in tmp, SIGSEGV it, return (core path, tids)."""
    tidfile = os.path.join(tmp, "tids")
    proc = start_in([python, td.PARK, tidfile], tmp, {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    try:
        wait_file(tidfile, proc)
        tids = dict((k, int(v)) for k, v in (line.split() for line in open(tidfile)))
        proc.send_signal(signal.SIGSEGV)
        proc.wait(timeout=60)
    finally:
        td.stop_park(proc)
    cores = [os.path.join(tmp, n) for n in os.listdir(tmp) if re.match(r"core(\.\d+)?$", n)]
    check(len(cores) == 1, "no kernel core in %s after SIGSEGV (core_pattern %r)" % (tmp, core_pattern_plain()))
    return cores[0], tids


def test_kernel_core(mk, tmp):
    core, tids = kernel_core("/usr/bin/python3.11", tmp)
    d = analyze(core)
    p = d["processes"][0]
    check(p["rank"] == 3 and p["world_size"] == 8 and p["local_rank"] == 1,
          "kernel core: rank/world_size/local_rank %s/%s/%s, want 3/8/1 (from the initial stack's envp)"
          % (p["rank"], p["world_size"], p["local_rank"]))
    check(p["env"].get("RANK") == "3", "kernel core: env %r" % p["env"])
    want = td.expected(11, mk)
    for name in ("main", "worker"):
        td.check_python("kernel core %s" % name, td.python_frames(by_tid(p)[tids[name]]), want[name])
    check(natives(by_tid(p)[tids["main"]]["frames"])[:2] == ["clock_nanosleep", "time_sleep"],
          "kernel core main: native %s" % natives(by_tid(p)[tids["main"]]["frames"]))
    check(any("pages the core lacks were read from /usr/bin/python3.11" in n and "same build id" in n for n in d["notes"]),
          "kernel core: no note of the NT_FILE fallback: %s" % d["notes"])
    os.unlink(core)
    print("ok: kernel core: Python frames through the NT_FILE fallback, rank 3 from the environment")


def test_other_build(tmp):
    """A copy of python3.11 that is replaced by another build after the dump."""
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    exe = os.path.join(bindir, "python3.11")
    shutil.copy2("/usr/bin/python3.11", exe)
    tidfile = os.path.join(tmp, "tids")
    proc = start_in([exe, td.PARK, tidfile], tmp, {"PYTHONHOME": "/usr"})
    try:
        wait_file(tidfile, proc)
        proc.send_signal(signal.SIGSEGV)
        proc.wait(timeout=60)
    finally:
        td.stop_park(proc)
    core = [os.path.join(tmp, n) for n in os.listdir(tmp) if re.match(r"core(\.\d+)?$", n)]
    check(len(core) == 1, "other build: no kernel core")
    # Another build of the same path: same bytes but a different build id note.
    data = bytearray(open(exe, "rb").read())
    i = data.find(b"\x04\0\0\0\x14\0\0\0\x03\0\0\0GNU\0", 0, 4096) + 12
    check(i >= 12, "no build id note in the first page of python3.11")
    data[i + 4] ^= 0xFF
    os.unlink(exe)
    with open(exe, "wb") as f:
        f.write(data)
    d = analyze(core[0])
    notes = d["notes"]
    check(any(exe in n and "another build" in n and "build id" in n for n in notes),
          "other build: no note refusing %s: %s" % (exe, notes))
    check(any(exe in n and "not the same build" in n for n in notes),
          "other build: no note about native frames of %s: %s" % (exe, notes))
    print("ok: another build of the interpreter on disk is refused with a note")


BATON = '''import os, time

class FileBaton:
    def __init__(self, lock_file_path, wait_seconds=0.1):
        self.lock_file_path = lock_file_path
        self.wait_seconds = wait_seconds
        self.fd = None

    def try_acquire(self):
        try:
            self.fd = os.open(self.lock_file_path, os.O_CREAT | os.O_EXCL)
            return True
        except FileExistsError:
            return False

    def wait(self):
        while os.path.exists(self.lock_file_path):
            time.sleep(self.wait_seconds)
'''

CPP_EXT = '''import os
from torch.utils.file_baton import FileBaton

def _jit_compile(name, build_directory):
    baton = FileBaton(os.path.join(build_directory, "lock"))
    if baton.try_acquire():
        raise SystemExit("the lock should have been taken")
    baton.wait()

def load(name, build_directory):
    return _jit_compile(name, build_directory)
'''

MAIN = '''import sys
from torch.utils import cpp_extension
open(sys.argv[2], "w").close()
cpp_extension.load("fused", sys.argv[1])
'''


def test_build_lock(tmp):
    for d in ("torch/utils", "build/fused"):
        os.makedirs(os.path.join(tmp, d))
    for path, text in (("torch/__init__.py", ""), ("torch/utils/__init__.py", ""),
                       ("torch/utils/file_baton.py", BATON), ("torch/utils/cpp_extension.py", CPP_EXT),
                       ("main.py", MAIN)):
        with open(os.path.join(tmp, path), "w") as f:
            f.write(text)
    build = os.path.join(tmp, "build", "fused")
    open(os.path.join(build, "lock"), "w").close()  # left behind by a killed rank 0
    ready = os.path.join(tmp, "ready")
    proc = start_in(["/usr/bin/python3.11", "main.py", build, ready], tmp, {"RANK": "1", "WORLD_SIZE": "2"}, False)
    try:
        wait_file(ready, proc)
        core = gcore(proc.pid, tmp)
    finally:
        td.stop_park(proc)
    d = analyze(core)
    v = d["verdict"]
    check(v["class"] == "build_lock", "stale baton core: verdict %s (%s), want build_lock; notes %s"
          % (v["class"], v.get("summary"), d["notes"]))
    locks = [l for l in d["locks"] if l["path"] == os.path.join(build, "lock")]
    check(locks and locks[0]["state"] == "stale", "stale baton core: locks %s" % d["locks"])
    print("ok: a core waiting on a stale FileBaton lock gives build_lock (%s)" % v.get("summary"))


def test_bad_inputs(tmp):
    src = "/usr/bin/python3.11"
    r = analyze(src, ok=False)
    check(r.returncode == 2 and "not a core file" in r.stderr, "non-core ELF: exit %d, %s" % (r.returncode, r.stderr))
    tidfile = os.path.join(tmp, "tids")
    proc = start_in(["/usr/bin/python3.11", td.PARK, tidfile], tmp, {}, False)
    try:
        wait_file(tidfile, proc)
        core = gcore(proc.pid, tmp)
    finally:
        td.stop_park(proc)
    cut = os.path.join(tmp, "cut")
    with open(core, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(os.path.getsize(core) // 2))
    r = analyze(cut, ok=False)
    check(r.returncode == 2 and "truncated core" in r.stderr and cut in r.stderr,
          "truncated core: exit %d, %s" % (r.returncode, r.stderr))
    with open(core, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(100))
    r = analyze(cut, ok=False)
    check(r.returncode == 2 and "truncated" in r.stderr, "100-byte core: exit %d, %s" % (r.returncode, r.stderr))
    print("ok: a non-core ELF and truncated cores give clean errors")


def main():
    if not HANGDX:
        print("test_core: set HANGDX to the hangdx binary (ctest does)", file=sys.stderr)
        return 2
    if not shutil.which("gcore"):
        print("skipped: gdb's gcore is not installed")
        return 77
    if not os.access("/usr/bin/python3.11", os.X_OK):
        print("skipped: Debian /usr/bin/python3.11 is not installed")
        return 77
    td.HANGDX = HANGDX
    mk = td.markers()
    failed = 0
    runs = [("debian 3.11", "/usr/bin/python3.11", 11)]
    for label, path, minor in td.interpreters():
        if label.startswith("pyenv 3.10.") or label.startswith("pyenv 3.12."):
            runs.append((label, path, minor))
    if not any(r[2] == 12 for r in runs):
        print("skipped: pyenv 3.12 (shared libpython): not installed")
    tests = [(lbl, lambda t, a=(lbl, p, m): live_vs_gcore(a[0], a[1], a[2], mk, t)) for lbl, p, m in runs]
    tests.append(("bad inputs", test_bad_inputs))
    tests.append(("stale baton", test_build_lock))
    pat = core_pattern_plain()
    if pat is None:
        print("skipped: kernel cores (core_pattern is a pipe or a path: %s)" % open("/proc/sys/kernel/core_pattern").read().strip())
    else:
        tests.append(("kernel core", lambda t: test_kernel_core(mk, t)))
        tests.append(("other build", test_other_build))
    for label, fn in tests:
        tmp = tempfile.mkdtemp(prefix="hdx-core-")
        try:
            fn(tmp)
        except (Fail, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
            print("FAIL: %s: %s" % (label, e))
            failed = 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
