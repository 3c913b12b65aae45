"""End-to-end test of `hangdx dump` on every CPython >= 3.8 of the machine.

    HANGDX=build/bin/hangdx HDX_SOURCE_DIR=. python3 tests/system/dump/test_dump.py

For Debian's /usr/bin/python3.11 and each pyenv interpreter 3.8-3.13
($PYENV_ROOT, else `pyenv root`, else /root/.pyenv), starts
tests/system/python/park.py, runs `hangdx dump --json --locals PID` and checks, per
thread, what a user reads: the TIDs, the exact Python functions, files and
lines in order, the native frames around them, that parked threads are
merged, the locals, and stopped_us. Then `--python-only` must give the same
Python frames with no native frame and no stop, the text form must name the
functions, and the target must be left untraced and running.

Prints the versions covered and those skipped, with why. Exits 77 (skip) when
no interpreter is found, 1 on the first failed check of any interpreter (all
interpreters are still run and reported).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HANGDX = os.environ.get("HANGDX")
SRC = os.environ.get("HDX_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
PARK = os.path.realpath(os.path.join(SRC, "tests", "system", "python", "park.py"))
DUMP_TIMEOUT = 20  # seconds for one hangdx dump


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# ------------------------------------------------------------ interpreters

def interpreters():
    """[(label, path, minor)] and prints what is skipped."""
    found = []
    if os.access("/usr/bin/python3.11", os.X_OK):
        found.append(("debian 3.11", "/usr/bin/python3.11", 11))
    else:
        print("skipped: Debian /usr/bin/python3.11 (not installed)")
    root = os.environ.get("PYENV_ROOT")
    if not root:
        try:
            root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            root = ""
    root = root or "/root/.pyenv"
    vdir = os.path.join(root, "versions")
    if not os.path.isdir(vdir):
        print("skipped: pyenv interpreters (no %s)" % vdir)
        return found
    for name in sorted(os.listdir(vdir)):
        m = re.match(r"(\d+)\.(\d+)\.(\d+)$", name)
        if not m:
            print("skipped: pyenv %s (not a CPython release version)" % name)
            continue
        major, minor = int(m.group(1)), int(m.group(2))
        if (major, minor) < (3, 8):
            print("skipped: pyenv %s (older than 3.8)" % name)
            continue
        if (major, minor) > (3, 13):
            print("note: pyenv %s is newer than 3.13: tried, reader is best effort there" % name)
        binary = os.path.join(vdir, name, "bin", "python%d.%d" % (major, minor))
        if not os.access(binary, os.X_OK):
            print("skipped: pyenv %s (no %s)" % (name, binary))
            continue
        found.append(("pyenv " + name, binary, minor))
    found.sort(key=lambda x: (x[2], x[0]))
    return found


# ------------------------------------------------------------- the target

def markers():
    out = {}
    with open(PARK) as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"# @(\w+)", line)
            if m:
                out[m.group(1)] = n
    return out


def task_syscall(pid, tid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return None


# x86-64 system call numbers a parked thread sits in.
SLEEP_CALLS = {"23", "35", "230", "270", "7"}  # select, nanosleep, clock_nanosleep, pselect6, poll
FUTEX = {"202"}


def start_park(python, tmp):
    tidfile = os.path.join(tmp, "tids")
    proc = subprocess.Popen([python, PARK, tidfile], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while not os.path.exists(tidfile):
        if proc.poll() is not None:
            raise Fail("park.py exited with %d: %s" % (proc.returncode, proc.stderr.read().decode(errors="replace")))
        if time.monotonic() > deadline:
            proc.kill()
            raise Fail("park.py wrote no TID file within 15 s")
        time.sleep(0.02)
    tids = {}
    with open(tidfile) as f:
        for line in f:
            k, v = line.split()
            tids[k] = int(v)
    # The TID file is written just before main() calls outer(): wait until the
    # main thread sleeps and the worker waits on its futex.
    while time.monotonic() < deadline:
        if task_syscall(proc.pid, tids["main"]) in SLEEP_CALLS and task_syscall(proc.pid, tids["worker"]) in FUTEX:
            break
        time.sleep(0.02)
    time.sleep(0.05)
    return proc, tids


def stop_park(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.stderr:
        proc.stderr.close()


def dump(pid, *opts):
    r = subprocess.run([HANGDX, "dump"] + list(opts) + [str(pid)], capture_output=True, text=True,
                       timeout=DUMP_TIMEOUT)
    check(r.returncode == 0, "hangdx dump %s %d: exit %d, stderr: %s" % (" ".join(opts), pid, r.returncode, r.stderr.strip()))
    return r


def dump_json(pid, *opts):
    r = dump(pid, "--json", *opts)
    try:
        d = json.loads(r.stdout)
    except ValueError as e:
        raise Fail("hangdx dump --json %s: not JSON (%s): %.300s" % (" ".join(opts), e, r.stdout))
    check(d.get("schema") == "hangdx.dump/1", "schema %r" % d.get("schema"))
    procs = [p for p in d["processes"] if p["pid"] == pid]
    check(len(procs) == 1, "process %d appears %d times in the dump" % (pid, len(procs)))
    return procs[0], d.get("notes", [])


# --------------------------------------------------------------- expected

def expected(minor, mk):
    """Per thread: [(function, file, lines)] innermost first; file "park" or
    a suffix; lines a set of allowed lines or None (any line > 0)."""
    q = minor >= 11
    park = "park"
    thr = "/threading.py"
    return {
        "main": [
            ("middle", park, {mk["middle_sleep"]}),
            ("outer", park, {mk["outer_map"]}),
            ("<module>", park, {mk["main_outer"]}),
        ],
        "worker": [
            ("Condition.wait" if q else "wait", thr, None),
            ("Event.wait" if q else "wait", thr, None),
            ("leaf_wait", park, {mk["leaf_wait"]}),
            ("Worker.run" if q else "run", park, {mk["worker_run"]}),
            ("Thread._bootstrap_inner" if q else "_bootstrap_inner", thr, None),
            ("Thread._bootstrap" if q else "_bootstrap", thr, None),
        ],
        "busy": [
            ("spin", park, {mk["busy_while"], mk["busy_body"]}),
            ("Thread.run" if q else "run", thr, None),
            ("Thread._bootstrap_inner" if q else "_bootstrap_inner", thr, None),
            ("Thread._bootstrap" if q else "_bootstrap", thr, None),
        ],
    }


def fn(f):
    return f.get("function") or "?"


def describe(frames):
    return " < ".join(("py:" if f["kind"] == "python" else "") + fn(f) for f in frames)


def python_frames(t):
    """The Python frames of a thread: merged into frames, or apart when unmerged."""
    if t.get("unmerged"):
        return t.get("python_frames") or []
    return [f for f in (t.get("frames") or []) if f["kind"] == "python"]


def check_python(who, frames, want, exact_lines=True):
    got = [(fn(f), f.get("file"), f.get("line")) for f in frames]
    check(len(got) == len(want), "%s: Python frames %s, want %s" % (who, [g[0] for g in got], [w[0] for w in want]))
    for i, ((name, file, line), (wname, wfile, wlines)) in enumerate(zip(got, want)):
        check(name == wname, "%s frame %d: function %s, want %s" % (who, i, name, wname))
        file_ok = file == PARK if wfile == "park" else bool(file) and file.endswith(wfile)
        check(file_ok, "%s frame %d (%s): file %s, want %s" % (who, i, name, file, PARK if wfile == "park" else "*" + wfile))
        if wlines is not None and exact_lines:
            check(line in wlines, "%s frame %d (%s): line %s, want %s" % (who, i, name, line, sorted(wlines)))
        else:
            check(isinstance(line, int) and line > 0, "%s frame %d (%s): no line (%r)" % (who, i, name, line))


def index_of(frames, pred, start=0, who="", what=""):
    for i in range(start, len(frames)):
        if pred(frames[i]):
            return i
    raise Fail("%s: no %s in %s" % (who, what, describe(frames)))


def native(names):
    rx = re.compile(names)
    return lambda f: f["kind"] == "native" and bool(rx.search(fn(f)))


def is_py(name):
    return lambda f: f["kind"] == "python" and fn(f) == name


def eval_count(frames):
    return sum(1 for f in frames if f["kind"] == "native" and re.search(r"_PyEval_EvalFrameDefault|PyEval_EvalFrameEx", fn(f)))


def merge_diagnosis(t):
    """Why native and Python frames were not merged: the counts merging compares."""
    nat = t.get("frames") or []
    py = t.get("python_frames") or []
    return ("native stack has %d _PyEval_EvalFrameDefault frames for %d Python frames; native: %s; python: %s"
            % (eval_count(nat), len(py), describe(nat), describe(py)))


def locals_of(f):
    return f.get("locals") or {}


def check_locals(who, f, want):
    loc = locals_of(f)
    for k, v in want.items():
        check(k in loc, "%s (%s): no local %s in %s" % (who, fn(f), k, sorted(loc)))
        got = loc[k]
        if isinstance(v, float):
            ok = isinstance(got, (int, float)) and not isinstance(got, bool) and got == v
        else:
            ok = got == v and type(got) is type(v)
        check(ok, "%s (%s): local %s = %r, want %r" % (who, fn(f), k, got, v))


# ------------------------------------------------------------------ checks

def check_full(proc, tids, minor, mk):
    pid = proc.pid
    p, notes = dump_json(pid, "--locals")
    want = expected(minor, mk)
    threads = {t["tid"]: t for t in p["threads"]}
    check(tids["main"] == pid, "park.py's main TID %d is not its PID %d" % (tids["main"], pid))
    check(set(threads) == set(tids.values()),
          "thread TIDs %s, want %s (main %d, worker %d, busy %d)" % (sorted(threads), sorted(tids.values()),
                                                                    tids["main"], tids["worker"], tids["busy"]))
    check(p.get("python", "").startswith("3.%d " % minor), "python %r, want 3.%d" % (p.get("python"), minor))

    s = p.get("stopped_us")
    check(isinstance(s, int) and 0 < s < 1000000, "stopped_us %r: want 0 < stopped_us < 1 s for 3 threads" % s)
    if "max_stop_us" in p:
        m = p["max_stop_us"]
        check(isinstance(m, int) and 0 < m <= s, "max_stop_us %r, want 0 < max_stop_us <= stopped_us %d" % (m, s))

    for who in ("main", "worker"):
        t = threads[tids[who]]
        check(not t.get("unmerged"), "%s (TID %d): native and Python stacks not merged: %s" % (who, t["tid"], merge_diagnosis(t)))
        check(t.get("frames"), "%s: no frames" % who)
    for who in ("main", "worker", "busy"):
        t = threads[tids[who]]
        check_python(who, python_frames(t), want[who], exact_lines=who != "busy")

    # Native frames around the Python ones, in order (innermost first).
    m = threads[tids["main"]]["frames"]
    check(m[0]["kind"] == "native" and re.search(r"nanosleep|select|poll", fn(m[0])),
          "main: innermost frame %s, want clock_nanosleep/select (%s)" % (fn(m[0]), describe(m)))
    i = index_of(m, native(r"^time_sleep$|^pysleep$"), 0, "main", "time_sleep before middle")
    i = index_of(m, is_py("middle"), i, "main", "middle after time_sleep")
    j = index_of(m, is_py("outer"), i, "main", "outer")
    check(any(f["kind"] == "native" for f in m[i + 1:j]),
          "main: no native frame (map_next) between middle and outer, which map() calls from C: %s" % describe(m))
    i = index_of(m, is_py("<module>"), j, "main", "<module>")
    index_of(m, native(r"^(main|Py_BytesMain|Py_Main|Py_RunMain|pymain_main)$"), i, "main",
             "main/Py_BytesMain/Py_Main outside <module>")
    check(m[-1]["kind"] == "native", "main: outermost frame %s is not native" % fn(m[-1]))

    w = threads[tids["worker"]]["frames"]
    check(w[0]["kind"] == "native" and re.search(r"futex|sem_|pthread_cond|lll_lock|syscall", fn(w[0])),
          "worker: innermost frame %s, want a futex wait (%s)" % (fn(w[0]), describe(w)))
    first_py = want["worker"][0][0]
    i = index_of(w, native(r"PyThread_acquire_lock"), 0, "worker", "PyThread_acquire_lock_timed")
    i = index_of(w, is_py(first_py), i, "worker", first_py + " after PyThread_acquire_lock_timed")
    i = index_of(w, is_py(want["worker"][-1][0]), i, "worker", "Thread._bootstrap")
    index_of(w, native(r"^(start_thread|thread_run|pythread_wrapper|clone3?|__clone3?)$"), i, "worker",
             "start_thread/clone outside Thread._bootstrap")

    b = threads[tids["busy"]]
    busy_note = ""
    if b.get("unmerged"):  # allowed: it runs between the native and the Python read
        busy_note = " (busy thread unmerged: it runs; %s)" % merge_diagnosis(b).split("; native")[0]

    # Locals (--locals): every kind of value.
    wp = python_frames(threads[tids["worker"]])
    check_locals("worker", wp[2], {
        "x": 42, "name": "hello", "ratio": 0.5, "flag": True, "nothing": None, "items": {"type": "list"},
        "neg": -1234567890123, "latin": "caf\xe9", "wide": "na\u00efve\u2192\u221e", "astral": "a\U0001F600",
        "big": {"type": "int"},
    })
    check(len(locals_of(wp[2])) == 11, "worker (leaf_wait): %d locals, want 11: %s" % (len(locals_of(wp[2])), sorted(locals_of(wp[2]))))
    check_locals("worker", wp[3], {"self": {"type": "Worker"}})
    mp = python_frames(threads[tids["main"]])
    check_locals("main", mp[0], {"arg": 1, "counter": 5, "peek": {"type": "function"}})
    return p, busy_note


def check_python_only(proc, tids, full):
    p, _ = dump_json(proc.pid, "--python-only", "--locals")
    s = p.get("stopped_us")
    check(s in (None, 0), "--python-only: stopped_us %r, want 0 or null" % s)
    threads = {t["tid"]: t for t in p["threads"]}
    fthreads = {t["tid"]: t for t in full["threads"]}
    for who in ("main", "worker", "busy"):
        t = threads.get(tids[who])
        check(t is not None, "--python-only: no thread %s (TID %d)" % (who, tids[who]))
        frames = t.get("frames") or []
        nat = [fn(f) for f in frames if f["kind"] != "python"]
        check(not nat, "--python-only: %s has native frames %s" % (who, nat))
        check(not t.get("unmerged"), "--python-only: %s flagged unmerged" % who)
        a = [(fn(f), f.get("file"), f.get("line")) for f in frames]
        b = [(fn(f), f.get("file"), f.get("line")) for f in python_frames(fthreads[tids[who]])]
        if who == "busy":  # it runs: its line moves
            a, b = [x[:2] for x in a], [x[:2] for x in b]
        check(a == b, "--python-only: %s Python frames %s differ from the full dump's %s" % (who, a, b))


def check_text(proc):
    r = dump(proc.pid)
    for name in ("middle", "outer", "leaf_wait", "spin", "clock_nanosleep|__select|select"):
        check(re.search(r"\b(%s)\b" % name, r.stdout), "text dump does not name %s:\n%s" % (name, r.stdout[:2000]))
    check(str(proc.pid) in r.stdout, "text dump does not name PID %d" % proc.pid)


def check_native_lines(proc, tids):
    """Native frames: function and module+offset only by default; --native-lines adds file:line
    from DWARF (libc's from libc6-dbg, which scripts/setup installs), with the same functions."""
    plain, _ = dump_json(proc.pid)
    lined, _ = dump_json(proc.pid, "--native-lines")
    def natives(p):
        t = {t["tid"]: t for t in p["threads"]}[tids["main"]]  # in its sleep
        return [f for f in t["frames"] if f["kind"] == "native"]
    a, b = natives(plain), natives(lined)
    check(a and all(f.get("file") is None and f.get("line") is None for f in a),
          "native frames without --native-lines have no file:line: %s" % [(fn(f), f.get("file")) for f in a])
    check([fn(f) for f in a] == [fn(f) for f in b], "--native-lines changes the native functions: %s vs %s"
          % ([fn(f) for f in a], [fn(f) for f in b]))
    libc = [f for f in b if os.path.basename(f.get("module") or "").startswith("libc.so")]
    check(libc and all(f["file"].endswith((".c", ".h")) and f["line"] > 0 for f in libc),
          "--native-lines: libc frames with file:line (libc6-dbg): %s"
          % [(fn(f), f.get("file"), f.get("line")) for f in b])


def check_left_running(proc):
    pid = proc.pid
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            st = dict(l.split(":", 1) for l in f if ":" in l)
        tracer = int(st["TracerPid"].strip())
        state = st["State"].strip()
        check(tracer == 0, "thread %s of %d still traced by %d after the dump" % (tid, pid, tracer))
        check(state[0] not in "tT", "thread %s of %d left %s after the dump" % (tid, pid, state))


def run_one(label, python, minor, mk, text_once):
    with tempfile.TemporaryDirectory(prefix="hdx-dump-") as tmp:
        proc, tids = start_park(python, tmp)
        try:
            full, note = check_full(proc, tids, minor, mk)
            check_python_only(proc, tids, full)
            if text_once:
                check_text(proc)
                check_native_lines(proc, tids)
            check_left_running(proc)
            extra = " max_stop_us=%s" % full["max_stop_us"] if "max_stop_us" in full else ""
            return "stopped_us=%d%s%s" % (full["stopped_us"], extra, note)
        finally:
            stop_park(proc)


def main():
    if not HANGDX or not os.access(HANGDX, os.X_OK):
        print("test_dump: set HANGDX to the hangdx binary (ctest does)", file=sys.stderr)
        return 2
    interps = interpreters()
    if not interps:
        print("skipped: no CPython >= 3.8 on this machine")
        return 77
    mk = markers()
    t0 = time.monotonic()
    failed = []
    for k, (label, python, minor) in enumerate(interps):
        try:
            info = run_one(label, python, minor, mk, text_once=(k == 0))
            print("covered: %s (%s): %s" % (label, python, info))
        except (Fail, subprocess.TimeoutExpired, OSError, KeyError, ValueError) as e:
            print("FAILED: %s (%s): %s" % (label, python, e))
            failed.append(label)
        sys.stdout.flush()
    print("%d interpreters, %d failed, %.1f s" % (len(interps), len(failed), time.monotonic() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
