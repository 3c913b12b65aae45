#!/usr/bin/python3
"""Tests of the preload shim against real processes: shim_test.py TEST HELPER.

Env (from tests/CMakeLists.txt): HANGDX_PRELOAD (the shim), HANGDX (the
binary). Each test asserts real values read back from the trace with json."""
import glob, json, os, shutil, signal, subprocess, sys, tempfile, time

SHIM = os.environ["HANGDX_PRELOAD"]
HANGDX = os.environ.get("HANGDX", "")
PY = "/usr/bin/python3"
REQUIRED = """open open64 openat openat64 creat creat64 __open_2 __open64_2 __openat_2
__openat64_2 stat stat64 lstat lstat64 fstatat fstatat64 statx __xstat __xstat64 __lxstat
__lxstat64 __fxstatat __fxstatat64 flock fcntl fcntl64 lockf lockf64 unlink unlinkat rename
renameat renameat2 fork posix_spawn posix_spawnp exit _exit _Exit""".split()


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def env_with(trace_dir, **extra):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.pop("HANGDX_TRACE_DIR", None)
    if trace_dir is not None:
        e["LD_PRELOAD"] = SHIM
        e["HANGDX_TRACE_DIR"] = trace_dir
    e.update(extra)
    return e


def read_traces(d):
    """{pid: [records]} for every <host>-<pid>.jsonl in d; every line must parse."""
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        pid = int(f.rsplit("-", 1)[1].split(".")[0])
        st = os.stat(f)
        check(st.st_mode & 0o777 == 0o600, f"{f} has mode {oct(st.st_mode & 0o777)}, not 0600")
        with open(f, encoding="utf-8") as fh:
            recs = [json.loads(line) for line in fh]
        check(recs and recs[0]["type"] == "header", f"{f} does not start with a header")
        for h in (r for r in recs if r["type"] == "header"):
            check(h["schema"] == "hangdx.trace/1" and h["pid"] == pid, f"bad header in {f}: {h}")
        out[pid] = recs
    return out


def events(recs, typ):
    return [r for r in recs if r["type"] == typ]


def test_symbols(helper):
    nm = subprocess.run(["nm", "-D", "--defined-only", SHIM], capture_output=True, text=True,
                        check=True).stdout
    syms = {l.split()[-1] for l in nm.splitlines() if l.split() and l.split()[-2] in "TW"}
    missing = set(REQUIRED) - syms
    extra = syms - set(REQUIRED)
    check(not missing, f"not exported: {sorted(missing)}")
    check(not extra, f"exported beyond the wrappers: {sorted(extra)}")
    for forbidden in ("vfork", "execve", "execv"):
        check(forbidden not in syms, f"{forbidden} must not be wrapped")
    print(f"{len(syms)} symbols exported, exactly the wrapped ones")


def test_passthrough(helper):
    with tempfile.TemporaryDirectory() as t:
        plain, shimmed, tr = (os.path.join(t, x) for x in ("plain", "shimmed", "trace"))
        for d in (plain, shimmed, tr):
            os.mkdir(d)
        a = subprocess.run([helper, "calls", plain], env=env_with(None), capture_output=True,
                           text=True)
        b = subprocess.run([helper, "calls", shimmed], env=env_with(tr), capture_output=True,
                           text=True)
        check(a.returncode == 0 and b.returncode == 0, f"helper failed: {a.stderr}{b.stderr}")
        la, lb = a.stdout.splitlines(), b.stdout.splitlines()
        check(len(la) > 80, f"too few calls made: {len(la)}")
        for x, y in zip(la, lb):
            check(x == y, f"with the shim: {y!r}\nwithout:       {x!r}")
        check(len(la) == len(lb), "different number of lines")
        # the cases the brief names, by value
        expect = {"open excl again": "rc=-1 errno=17", "stat missing": "rc=-1 errno=2",
                  "flock EX|NB busy": "rc=-1 errno=11", "fcntl F_OFD_SETLK busy": "rc=-1 errno=11",
                  "renameat2 noreplace": "rc=-1 errno=17"}
        for k, v in expect.items():
            line = next(l for l in lb if l.startswith(k + " "))
            check(line.split(None, len(k.split()))[-1] == v, f"{line!r}: expected {v}")
        getfl = next(l for l in lb if l.startswith("fcntl F_GETFL"))
        # O_RDWR plus the O_LARGEFILE (0o100000) the kernel reports on 64-bit
        check(getfl.split()[2] == "rc=%d" % (os.O_RDWR | 0o100000),
              f"F_GETFL not passed through: {getfl}")
        traces = read_traces(tr)
        check(len(traces) == 1, f"expected one trace file, got {list(traces)}")
        (pid, recs), = traces.items()
        lock = os.path.join(shimmed, "lock")
        acq = events(recs, "acquire")
        check([a["path"] for a in acq] == [lock, os.path.join(shimmed, "lock2")],
              f"acquires: {acq}")
        check(acq[0]["fd"] == 3, f"acquire fd {acq[0]['fd']}")
        waits = events(recs, "wait")
        ee = [w for w in waits if w["how"] == "eexist"]
        # 3 EEXIST: lines at polls 1 and 2 (the 3rd is no power of two)
        check([w["polls"] for w in ee] == [1, 2] and ee[0]["path"] == lock, f"eexist waits: {ee}")
        st = [w for w in waits if w["how"] == "stat"]
        # 13 stat-family calls on the lock: lines at polls 1, 2, 4, 8
        check([w["polls"] for w in st] == [1, 2, 4, 8], f"stat waits: {st}")
        check(len({w["since"] for w in st}) == 1, "since changed during one wait")
        fl = [w for w in waits if w["how"] == "flock"]
        check([w["polls"] for w in fl] == [1, 2] and fl[0]["path"] == lock, f"flock waits: {fl}")
        check([w["how"] for w in waits if w["how"] not in ("eexist", "stat", "flock")] == ["ofd"],
              f"other waits: {waits}")
        starts, ends = events(recs, "lock_start"), events(recs, "lock_end")
        check([(s["op"], s["cmd"]) for s in starts] ==
              [("flock", "LOCK_EX"), ("flock", "LOCK_EX"), ("ofd", "F_WRLCK"),
               ("posix", "F_WRLCK"), ("lockf", "F_LOCK"), ("lockf", "F_LOCK")],
              f"lock_start: {starts}")
        check(len(ends) == len(starts), "a lock_start without its lock_end")
        check(ends[1]["rc"] == -1 and ends[1]["errno"] == 9 and ends[1]["path"] is None,
              f"bad-fd flock: {ends[1]}")
        check(ends[0]["rc"] == 0 and ends[0]["path"] == lock, f"flock end: {ends[0]}")
        rel = events(recs, "release")
        check([r["path"] for r in rel] == [lock, os.path.join(shimmed, "lock2")],
              f"releases: {rel}")
        check(recs[-1]["type"] == "exit", "no exit event")
        check(all(r["tid"] == pid for r in recs if r["type"] != "header"), "tid")
        print(f"{len(la)} calls identical with and without the shim; {len(recs)} trace lines")


def test_forkthreads(helper):
    with tempfile.TemporaryDirectory() as t:
        tr = os.path.join(t, "trace")
        os.mkdir(tr)
        r = subprocess.run([helper, "forkthreads", t], env=env_with(tr), capture_output=True,
                           text=True, timeout=120)
        check(r.returncode == 0, f"helper: {r.stdout}{r.stderr}")
        traces = read_traces(tr)
        parent = r.args and [p for p, recs in traces.items()
                             if recs[0]["argv"][1:2] == ["forkthreads"] and
                             not recs[0]["ppid"] in traces]
        check(len(parent) == 1, f"parent trace: {parent}")
        parent = parent[0]
        spawns = [e["child"] for e in events(traces[parent], "spawn")]
        check(len(spawns) == 20, f"{len(spawns)} spawn events, expected 20")
        for i, c in enumerate(spawns):
            check(c in traces, f"child {c} wrote no trace of its own")
            recs = traces[c]
            check(recs[0]["ppid"] == parent, f"child {c} header ppid {recs[0]['ppid']}")
            acq = events(recs, "acquire")
            check([a["path"] for a in acq] == [os.path.join(t, f"child-{i}")],
                  f"child {c} acquires: {acq}")
            check(events(recs, "exit")[-1]["status"] == 40 + i % 3, f"child {c} exit status")
        print(f"20 forks from a 5-thread process, each child with its own trace")


def test_closefds(helper):
    with tempfile.TemporaryDirectory() as t:
        tr = os.path.join(t, "trace")
        os.mkdir(tr)
        r = subprocess.run([helper, "closefds", t], env=env_with(tr), capture_output=True,
                           text=True)
        check(r.returncode == 0, f"program's own files disturbed: {r.stdout}{r.stderr}")
        check("files not ours 0" in r.stdout, r.stdout)
        traces = read_traces(tr)
        (pid, recs), = traces.items()
        check([a["path"] for a in events(recs, "acquire")] == [os.path.join(t, "lock")],
              f"acquire after the fds were closed: {recs}")
        check(len(events(recs, "release")) == 1, "release lost")
        print("trace fd closed and its number reused: program's files intact, trace reopened")


def test_quiet(helper):
    with tempfile.TemporaryDirectory() as t:
        ref = subprocess.run([helper, "calls", os.path.join(t, "ref")] if os.mkdir(
            os.path.join(t, "ref")) is None else [], env=env_with(None), capture_output=True,
            text=True).stdout
        ro = os.path.join(t, "ro")
        os.mkdir(ro)
        os.chmod(ro, 0o500)
        dirs = {"missing": os.path.join(t, "missing"), "a file": os.path.join(t, "ref", "x")}
        open(dirs["a file"], "w").close()
        if os.geteuid() != 0:
            dirs["read-only"] = ro
        else:  # root writes through mode bits: use a directory no one can create files in
            dirs["read-only (/proc/self, as root)"] = "/proc/self"
        for what, d in dirs.items():
            w = os.path.join(t, "w-" + what.split()[0])
            os.mkdir(w)
            r = subprocess.run([helper, "calls", w], env=env_with(d), capture_output=True,
                               text=True)
            check(r.returncode == 0 and r.stdout == ref and r.stderr == "",
                  f"trace dir {what}: program changed: {r.stderr}")
            check(not glob.glob(os.path.join(d, "*.jsonl")), f"trace dir {what}: files written")
        print("quiet with trace dir:", ", ".join(dirs))


def test_spawn(helper):
    with tempfile.TemporaryDirectory() as t:
        r = subprocess.run([helper, "spawn"], env=env_with(t), capture_output=True, text=True)
        check(r.returncode == 0, r.stdout + r.stderr)
        traces = read_traces(t)
        parent = next(p for p, recs in traces.items() if recs[0]["argv"][1:] == ["spawn"])
        sp = events(traces[parent], "spawn")
        check(len(sp) == 2, f"spawn events: {sp}")
        check(sp[0]["via"] == "posix_spawn" and sp[0]["argv"] == ["echo", "hello", 'from "spawn"'],
              f"spawn: {sp[0]}")
        check(sp[1]["argv"] == ["true"], f"spawnp: {sp[1]}")
        pid = int(r.stdout.split("pid=")[1].split()[0])
        check(sp[0]["child"] == pid, f"child pid {sp[0]['child']} != {pid}")
        for s in sp:
            h = traces[s["child"]][0]
            check(h["ppid"] == parent and h["argv"] == s["argv"], f"child header {h}")
        print("posix_spawn children recorded with pid and argv")


BATON = r"""
import os, sys, time
lock = sys.argv[1]
if sys.argv[2] == "holder":
    fd = os.open(lock, os.O_CREAT | os.O_EXCL)
    open(lock + ".held", "w").close()
    while os.path.exists(lock + ".go") is False:
        time.sleep(0.01)
    time.sleep(1.0)
    os.close(fd)
    os.remove(lock)
else:
    try:
        os.open(lock, os.O_CREAT | os.O_EXCL)
        sys.exit(3)
    except FileExistsError:
        pass
    open(lock + ".go", "w").close()
    n = 0
    while os.path.exists(lock):
        n += 1
        time.sleep(0.1 / 10)   # FileBaton polls every 0.1 s; faster here to get many polls
    print(n)
"""


def test_baton(helper):
    """FileBaton: holder creates with O_EXCL, waiter gets EEXIST and polls, holder unlinks.
    Run through `hangdx run` when the binary exists, else with LD_PRELOAD."""
    with tempfile.TemporaryDirectory() as t:
        tr = os.path.join(t, "trace")
        script = os.path.join(t, "baton.py")
        with open(script, "w") as f:
            f.write(BATON)
        os.chdir(t)
        lock = "ext_build/lock"          # relative, as given: the trace must say it absolute
        os.mkdir("ext_build")
        use_run = HANGDX and os.access(HANGDX, os.X_OK)
        def launch(role, rank):
            cmd = [PY, script, lock, role]
            if use_run:
                return subprocess.Popen([HANGDX, "run", "-d", tr, "--"] + cmd,
                                        env=env_with(None, RANK=str(rank), WORLD_SIZE="2"),
                                        stdout=subprocess.PIPE, text=True)
            os.makedirs(tr, exist_ok=True)
            return subprocess.Popen(cmd, env=env_with(tr, RANK=str(rank), WORLD_SIZE="2"),
                                    stdout=subprocess.PIPE, text=True)
        holder = launch("holder", 0)
        while not os.path.exists(lock + ".held"):
            check(holder.poll() is None, "holder died")
            time.sleep(0.01)
        waiter = launch("waiter", 1)
        polls = int(waiter.communicate(timeout=60)[0])
        check(holder.wait(timeout=60) == 0 and waiter.returncode == 0, "baton processes failed")
        traces = read_traces(tr)
        py = {recs[0]["env"]["RANK"]: (p, recs) for p, recs in traces.items()
              if recs[-1]["type"] != "header" and os.path.basename(recs[0]["exe"]).startswith("python")
              for recs in [[r for r in recs]]}
        check(set(py) == {"0", "1"}, f"python traces by RANK: {list(py)}")
        abslock = os.path.join(os.path.realpath(t), lock)
        (hp, hrecs), (wp, wrecs) = py["0"], py["1"]
        check(hrecs[0]["env"]["WORLD_SIZE"] == "2", "WORLD_SIZE in header env")
        check(hrecs[0]["argv"][-2:] == [lock, "holder"], f"holder argv {hrecs[0]['argv']}")
        acq = events(hrecs, "acquire")
        check(len(acq) == 1 and acq[0]["path"] == abslock and acq[0]["tid"] == hp,
              f"holder acquire: {acq} (expected {abslock})")
        rel = events(hrecs, "release")
        check(len(rel) == 1 and rel[0]["path"] == abslock, f"holder release: {rel}")
        check(rel[0]["t"] > acq[0]["t"], "release before acquire")
        waits = events(wrecs, "wait")
        ee = [w for w in waits if w["how"] == "eexist"]
        st = [w for w in waits if w["how"] == "stat"]
        check(len(ee) == 1 and ee[0]["path"] == abslock, f"eexist wait: {ee}")
        check(st and all(w["path"] == abslock for w in st), f"stat waits: {st}")
        check(polls >= 30, f"only {polls} polls: the test needs many")
        check(st[-1]["polls"] <= polls + 1 and st[-1]["polls"] >= polls // 2,
              f"last wait line says {st[-1]['polls']} polls, program made {polls}")
        check(len(st) <= 2 + polls.bit_length(), f"{len(st)} wait lines for {polls} polls")
        check(ee[0]["t"] < rel[0]["t"] and st[0]["since"] < rel[0]["t"], "wait after release")
        print(f"baton via {'hangdx run' if use_run else 'LD_PRELOAD'}: {polls} polls -> "
              f"{len(st)} wait lines; holder {hp} rank 0, waiter {wp} rank 1")


def test_run(helper):
    if not (HANGDX and os.access(HANGDX, os.X_OK)):
        print("SKIP: the hangdx binary is not built")
        return
    with tempfile.TemporaryDirectory() as t:
        d = os.path.join(t, "tr")
        r = subprocess.run([HANGDX, "run", "-d", d, "--", "sh", "-c", "exit 7"])
        check(r.returncode == 7, f"exit status {r.returncode}, expected 7")
        check(os.stat(d).st_mode & 0o777 == 0o700, "trace dir not 0700")
        r = subprocess.run([HANGDX, "run", "-d", d, "--", "sh", "-c", "kill -TERM $$"])
        check(r.returncode == -signal.SIGTERM, f"killed: {r.returncode}, expected -15 (run dies of the job's signal)")
        r = subprocess.run([HANGDX, "run", "-d", d, "--", PY, "-c",
                            "import os; print(os.environ['LD_PRELOAD'])"],
                           env=env_with(None, LD_PRELOAD="libother.so", HANGDX_TRACE_DIR="x"),
                           capture_output=True, text=True)
        check(r.stdout.strip() == os.path.realpath(SHIM) + ":libother.so" or
              r.stdout.strip().endswith("libhangdx-preload.so:libother.so"),
              f"LD_PRELOAD {r.stdout!r} stderr {r.stderr!r}")
        # a trace of the python process with argv
        heads = [recs[0] for recs in read_traces(d).values()]
        check(any(h["argv"][:2] == [PY, "-c"] for h in heads), f"no python header: {heads}")
        # SIGTERM to hangdx reaches the job
        p = subprocess.Popen([HANGDX, "run", "-d", d, "--", "sleep", "30"])
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=10) == -signal.SIGTERM, f"forwarded SIGTERM: {p.returncode}, expected -15")
        r = subprocess.run([HANGDX, "run"], capture_output=True, text=True)
        check(r.returncode == 64 and "--" in r.stderr, f"usage: {r.returncode} {r.stderr}")
        r = subprocess.run([HANGDX, "run", "--bogus", "--", "true"], capture_output=True)
        check(r.returncode == 64, f"bad option: {r.returncode}")
        r = subprocess.run([HANGDX, "run", "--help"], capture_output=True, text=True)
        check(r.returncode == 0 and "examples:" in r.stdout, "--help")
        r = subprocess.run([HANGDX, "run", "-d", d, "--", "/nonexistent/cmd"],
                           capture_output=True, text=True)
        check(r.returncode == 127, f"missing command: {r.returncode}")
        # default directory in the cwd
        r = subprocess.run([HANGDX, "run", "--", "true"], cwd=t, capture_output=True, text=True)
        made = glob.glob(os.path.join(t, "hangdx-*"))
        check(r.returncode == 0 and len(made) == 1 and os.path.basename(made[0]) in r.stderr,
              f"default dir: {made} {r.stderr!r}")
        if os.geteuid() == 0:
            other = os.path.join(t, "other")
            os.mkdir(other, 0o700)
            os.chown(other, 65534, 65534)
            r = subprocess.run([HANGDX, "run", "-d", other, "--", "true"], capture_output=True,
                               text=True)
            check(r.returncode == 2 and "belongs to" in r.stderr,
                  f"foreign dir: {r.returncode} {r.stderr}")
        print("hangdx run: status passthrough, signals, usage, trace dir checks")


if __name__ == "__main__":
    globals()["test_" + sys.argv[1]](sys.argv[2] if len(sys.argv) > 2 else None)
