#!/usr/bin/python3
"""The shim under stress: stress_test.py CASE SHIM_STRESS SHIM_HELPER.

Each case runs real programs (shim_stress.c, subproc.py, shim_helper.c) once without the shim
and once with it, each in a fresh directory, and requires the same exit status, stdout and
stderr, byte for byte, within BOUND seconds (a run past it is reported as a deadlock of that
case, with the state of its processes). Then it checks the values the programs print and what
the shim recorded: every trace line parses, files are 0600, the events that must be there
are (spawn trees, acquires, releases), and `hangdx analyze` reads the directory.

Env (tests/CMakeLists.txt): HANGDX_PRELOAD (the shim), HANGDX (the binary).
Cases: threads forkexec vfork spawnchain subprocess closefds signals tracedir perms relative
valgrind bashfd ulimit flockloop.
Exit 77 (skipped) when the machine lacks what a case needs (root for mounts, valgrind)."""
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SHIM = os.environ["HANGDX_PRELOAD"]
HANGDX = os.environ.get("HANGDX", "")
PY = "/usr/bin/python3"
SUBPROC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "subproc.py")
BOUND = 60  # seconds: a run that takes longer is a deadlock
# under valgrind, which serialises a process's threads and starts again in each exec'd child:
# forkexec's 4 children took 19 s at load 5 and over 60 s in CI, with other suites beside it
VALGRIND_BOUND = 240
NOBODY = 65534


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def check(cond, msg):
    if not cond:
        fail(msg)


def env_with(trace_dir, preload=True):
    e = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HANGDX_TRACE_DIR")}
    if trace_dir is not None:
        if preload:
            e["LD_PRELOAD"] = SHIM
        e["HANGDX_TRACE_DIR"] = trace_dir
    return e


def proc_states(pgid):
    """One line per process of the group: pid, state, wchan, cmdline (for a deadlock report)."""
    lines = []
    for p in glob.glob("/proc/[0-9]*"):
        try:
            with open(p + "/stat") as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            if int(fields[2]) != pgid:
                continue
            with open(p + "/wchan") as f:
                wchan = f.read()
            with open(p + "/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"  pid {p[6:]} state {fields[0]} wchan {wchan or '-'}: {cmd[:120]}")
        except (OSError, ValueError):
            pass
    return "\n".join(lines)


class Run:
    def __init__(self, rc, out, err, secs):
        self.rc, self.out, self.err, self.secs = rc, out, err, secs


def run(label, argv, trace_dir=None, preload=True, umask=-1, bound=BOUND):
    """Run argv (its DIR argument already in it) in a session of its own, bounded by bound
    seconds."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env_with(trace_dir, preload), start_new_session=True, umask=umask)
    try:
        out, err = p.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        states = proc_states(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        fail(f"deadlock: {label} did not finish in {bound} s; its processes were:\n{states}")
    return Run(p.returncode, out, err, time.monotonic() - t0)


def same(label, ref, got):
    """With the shim exactly as without: status, stdout, stderr."""
    if (ref.rc, ref.out, ref.err) != (got.rc, got.out, got.err):
        fail(f"{label}: the shim changed the result\nwithout: rc {ref.rc}\n{ref.out.decode()}"
             f"{ref.err.decode()}\nwith: rc {got.rc}\n{got.out.decode()}{got.err.decode()}")


def pair(label, make_argv, tmp, trace_dir=None, **kw):
    """make_argv(workdir) -> argv. Runs without and with the shim; returns (ref, got)."""
    a, b = os.path.join(tmp, label + "-plain"), os.path.join(tmp, label + "-shim")
    os.mkdir(a)
    os.mkdir(b)
    ref = run(label + " without the shim", make_argv(a))
    check(ref.rc == 0, f"{label} fails even without the shim: rc {ref.rc}\n"
          f"{ref.out.decode()}{ref.err.decode()}")
    got = run(label + " with the shim", make_argv(b), trace_dir=trace_dir, **kw)
    same(label, ref, got)
    print(f"{label}: identical with and without the shim ({ref.secs:.2f} s / {got.secs:.2f} s)")
    return ref, got


def read_traces(d, torn_ok=False):
    """{pid: [records]}: every line must parse; with torn_ok a file's last line may be cut."""
    out = {}
    me = os.geteuid()
    for f in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        pid = int(f.rsplit("-", 1)[1].split(".")[0])
        st = os.stat(f)
        check(st.st_mode & 0o7777 == 0o600, f"{f}: mode {oct(st.st_mode & 0o7777)}, not 0600")
        check(st.st_uid == me, f"{f}: owned by uid {st.st_uid}")
        with open(f, "rb") as fh:
            data = fh.read()
        lines = data.split(b"\n")
        tail = lines.pop()  # after the last newline: empty, or a torn line
        check(tail == b"" or torn_ok, f"{f}: ends in a torn line {tail[:80]!r}")
        recs = []
        for ln in lines:
            try:
                recs.append(json.loads(ln))
            except ValueError:
                fail(f"{f}: a line that is not JSON: {ln[:200]!r}")
        if not recs:
            check(torn_ok, f"{f}: empty trace file")
            continue
        check(recs[0]["type"] == "header", f"{f} does not start with a header")
        for h in (r for r in recs if r["type"] == "header"):
            check(h["schema"] == "hangdx.trace/1" and h["pid"] == pid, f"bad header in {f}: {h}")
        out[pid] = recs
    return out


def analyze(d, pids, torn_ok=False):
    """hangdx analyze reads the directory: every process with a header is in the report."""
    if not (HANGDX and os.access(HANGDX, os.X_OK)):
        print("  (hangdx not built: analyze skipped)")
        return
    r = run("hangdx analyze", [HANGDX, "analyze", "--json", d])
    check(r.rc == 0, f"hangdx analyze {d}: rc {r.rc}: {r.err.decode()}")
    rep = json.loads(r.out)
    got = set(rep["ranks"]["pid"])
    check(got == set(pids), f"analyze saw processes {sorted(got ^ set(pids))} differently")
    torn = [n for n in rep["notes"] if "torn or malformed" in n]
    check(torn_ok or not torn, f"analyze skipped lines: {torn}")
    print(f"  hangdx analyze: {len(got)} processes, {len(rep['locks'])} locks"
          + (f"; {torn[0]}" if torn else ""))


def events(recs, typ):
    return [r for r in recs if r["type"] == typ]


def last_image(recs):
    """The records after the last header (the image that ran last)."""
    i = max(k for k, r in enumerate(recs) if r["type"] == "header")
    return recs[i:]


def roots(traces, pred):
    return [p for p, recs in traces.items() if pred(recs[0]) and recs[0]["ppid"] not in traces]


def out_lines(run):
    return run.out.decode().splitlines()


# ------------------------------------------------------------------ cases

def case_threads(stress, helper, tmp):
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    ref, _ = pair("threads", lambda w: [stress, "threads", w, "8", "150"], tmp, tr)
    lines = out_lines(ref)
    check(lines[-2:] == ["shared counter 1200", "errors 0"], f"threads: {lines[-2:]}")
    for k in range(8):
        want = " ".join(str(10 + (k + i) % 7) for i in range(0, 150, 16))
        check(lines[k].endswith("children " + want), f"thread {k}: {lines[k]}")
    traces = read_traces(tr)
    parent, = roots(traces, lambda h: h["argv"][1:2] == ["threads"])
    recs = traces[parent]
    acq = [os.path.basename(a["path"]) for a in events(recs, "acquire")]
    check(len(acq) == 1200 and all(a in {f"t{k}.lock" for k in range(8)} for a in acq),
          f"parent: {len(acq)} acquires, expected 1200 of t<k>.lock")
    check(len(events(recs, "release")) == 1200, "releases")
    starts, ends = events(recs, "lock_start"), events(recs, "lock_end")
    # the bound (trace.h, lock_count): past HDX_TRACE_LOCK_FULL calls on a path, calls that
    # take the lock at once are only counted; every call is in lock_start or a lock_count
    counted = sum(c["count"] for c in events(recs, "lock_count") if c["op"] == "posix")
    nstart = sum(s["op"] == "posix" for s in starts)
    check(nstart + counted == 1200 and nstart >= 64,
          f"F_SETLKW: {nstart} lock_start + {counted} counted, expected 1200 (>= 64 in full)")
    check(len(starts) == len(ends) and all(e["rc"] == 0 for e in ends), "lock_start/lock_end")
    spawns = events(recs, "spawn")
    check(len(spawns) == 80 and all(s["via"] == "fork" for s in spawns), f"{len(spawns)} spawns")
    for s in spawns:
        c = traces.get(s["child"])
        check(c and c[0]["ppid"] == parent, f"fork child {s['child']}: no trace of its own")
        check([os.path.basename(a["path"]) for a in events(c, "acquire")][0].endswith(".baton")
              and events(c, "exit")[0]["status"] in range(10, 17), f"child {s['child']}: {c}")
    check(len(traces) == 81, f"{len(traces)} trace files, expected 81")
    analyze(tr, traces)


def case_forkexec(stress, helper, tmp):
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    ref, _ = pair("forkexec", lambda w: [stress, "forkexec", w, "40"], tmp, tr)
    want = [30 if i % 10 == 7 else 127 if i % 10 == 9 else 20 + i % 5 for i in range(40)]
    check(out_lines(ref)[0] == "statuses " + " ".join(map(str, want)) and
          out_lines(ref)[-1] == "errors 0", f"forkexec: {out_lines(ref)}")
    traces = read_traces(tr)
    parent, = roots(traces, lambda h: h["argv"][1:2] == ["forkexec"])
    spawns = events(traces[parent], "spawn")
    check(len(spawns) == 40, f"{len(spawns)} fork events, expected 40")
    for i, s in enumerate(spawns):
        c = traces.get(s["child"])
        check(c and c[0]["ppid"] == parent, f"fork child {i}: no trace")
        heads = events(c, "header")
        img = last_image(c)
        if i % 10 == 7:
            check(len(heads) == 1 and [os.path.basename(a["path"]) for a in events(c, "acquire")]
                  == ["noexec.lock"] and events(c, "exit")[0]["status"] == 30, f"child {i}: {c}")
        elif i % 10 == 9:
            check(len(heads) == 1 and events(c, "exit")[0]["status"] == 127, f"child {i}: {c}")
        else:
            check(len(heads) == 2 and heads[1]["argv"] == ["shim_stress", "child", ".", str(i)],
                  f"child {i}: exec'd image's header {heads}")
            check([os.path.basename(a["path"]) for a in events(img, "acquire")] ==
                  [f"child{i}.out"], f"child {i} after exec: {img}")
    analyze(tr, traces)


def case_vfork(stress, helper, tmp):
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    ref, _ = pair("vfork", lambda w: [stress, "vfork", w, "10"], tmp, tr)
    want = " ".join(str(20 + (200 + i) % 5 if i % 2 else 60) for i in range(10))
    check(out_lines(ref) == ["statuses " + want, "lock files 10", "errors 0"],
          f"vfork: {out_lines(ref)}")
    traces = read_traces(tr)
    parent, = roots(traces, lambda h: h["argv"][1:2] == ["vfork"])
    recs = traces[parent]
    # the children share the parent's memory until exec: nothing of theirs in its trace
    check(not events(recs, "acquire") and not events(recs, "wait") and not events(recs, "spawn"),
          f"a vfork child's calls in the parent's trace: {recs}")
    ex = events(recs, "exit")
    check(len(ex) == 1 and recs[-1] is ex[0], f"the parent's exit lines: {ex}")
    kids = {p: r for p, r in traces.items() if p != parent}
    check(len(kids) == 5 and all(r[0]["ppid"] == parent and r[0]["argv"][1] == "child" and
                                 len(events(r, "header")) == 1 for r in kids.values()),
          f"traces besides the parent's: only the 5 exec'd images, {kids}")
    acq = sorted(os.path.basename(events(r, "acquire")[0]["path"]) for r in kids.values())
    check(acq == sorted(f"child{200 + i}.out" for i in range(1, 10, 2)), f"exec'd: {acq}")
    analyze(tr, traces)


def case_spawnchain(stress, helper, tmp):
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    ref, _ = pair("spawnchain", lambda w: [stress, "spawnchain", w, "3", "3"], tmp, tr)
    lines = out_lines(ref)
    leaves = [l for l in lines if l.startswith("leaf ")]
    check(len(leaves) == 27 and all(" ok 1 " in l for l in leaves) and
          lines[-1] == "node r depth 3: 3 children, errors 0", f"spawnchain: {lines}")
    traces = read_traces(tr)
    root, = roots(traces, lambda h: h["argv"][1:2] == ["spawnchain"])
    # walk the tree through the spawn events: every node's 3 children, ids in order
    todo, seen = [(root, "r", 3)], 0
    while todo:
        pid, ident, depth = todo.pop()
        seen += 1
        recs = traces[pid]
        sp = events(recs, "spawn")
        if depth == 0:
            check(not sp and [os.path.basename(a["path"]) for a in events(recs, "acquire")] ==
                  [f"leaf-{ident}.lock"], f"leaf {ident}: {recs}")
            continue
        check([s["argv"][5] for s in sp] == [f"{ident}.{c}" for c in range(3)] and
              all(s["via"] == "posix_spawn" for s in sp), f"node {ident} spawns: {sp}")
        for s in sp:
            h = traces[s["child"]][0]
            check(h["ppid"] == pid and h["argv"] == s["argv"], f"child header {h} vs {s}")
            todo.append((s["child"], s["argv"][5], depth - 1))
    check(seen == 40 == len(traces), f"tree of {seen} processes, {len(traces)} traces")
    analyze(tr, traces)
    spawn_ninja(stress, tmp)


NINJA = """rule chain
  command = $stress spawnchain . 1 3 $id > $out
rule cat
  command = cat $in > $out
"""


def spawn_ninja(stress, tmp):
    """Real ninja (posix_spawn, -j4): 12 chains of posix_spawn, then a join; the result files
    with and without the shim, and one spawn event per command in ninja's trace."""
    ninja = shutil.which("ninja")
    if not ninja:
        print("  (ninja not installed: the real ninja part skipped)")
        return
    tr = os.path.join(tmp, "ninja-trace")
    os.mkdir(tr)
    res = []
    for label, trace in (("without the shim", None), ("with the shim", tr)):
        w = os.path.join(tmp, "ninja-" + label.split()[0])
        os.mkdir(w)
        with open(os.path.join(w, "build.ninja"), "w") as f:
            f.write(f"stress = {stress}\n" + NINJA)
            for i in range(12):
                f.write(f"build c{i}.txt: chain\n  id = n{i}\n")
            f.write("build all.txt: cat " + " ".join(f"c{i}.txt" for i in range(12)) + "\n")
        r = run(f"ninja {label}", [ninja, "-C", w, "-j4", "--quiet", "all.txt"], trace_dir=trace)
        with open(os.path.join(w, "all.txt"), "rb") as f:
            res.append((r.rc, r.out, r.err, f.read()))
    check(res[0] == res[1], f"ninja: the shim changed the result:\n{res[0]}\n{res[1]}")
    check(res[0][0] == 0 and res[0][3].count(b" ok 1 ") == 36, f"ninja: {res[0]}")
    traces = read_traces(tr)
    nj, = roots(traces, lambda h: os.path.basename(h["argv"][0]) == "ninja")
    sp = events(traces[nj], "spawn")
    check(len(sp) == 13 and all(s["via"] == "posix_spawn" for s in sp),
          f"ninja's spawn events: {sp}")
    for s in sp:
        check(s["child"] in traces and traces[s["child"]][0]["ppid"] == nj,
              f"ninja's child {s['child']}: no trace")
    print(f"  real ninja -j4: 13 commands, result identical, {len(traces)} traces")


def case_subprocess(stress, helper, tmp):
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    ref, _ = pair("subprocess", lambda w: [PY, SUBPROC, w, stress], tmp, tr)
    lines = out_lines(ref)
    for want in ("missing program: FileNotFoundError errno 2", "posix_spawn: 5", "fork+execv: 6",
                 "fork child's subprocess: 43", "pass_fds: rc 0 read through-fd",
                 "preexec_fn 0: rc 2 out preexec0.lock", "preexec_fn 1: rc 2 out preexec1.lock",
                 "cwd/env/session: rc 0 out sub env-value "):
        check(want in lines, f"subprocess: no line {want!r} in {lines}")
    check(sum(l.startswith("sh ") for l in lines) == 44, "sh lines")
    traces = read_traces(tr)
    is_py = lambda h: h["argv"][1:2] == [SUBPROC]
    parent, = roots(traces, is_py)
    # vfork children share the parent's memory: they must write nothing of their own; only
    # the parent and its two os.fork children have a header with the script's argv
    pyheads = sorted(p for p, recs in traces.items() if any(is_py(h) for h in events(recs, "header")))
    forks = [s["child"] for s in events(traces[parent], "spawn") if s["via"] == "fork"]
    check(pyheads == sorted([parent] + forks) and len(forks) == 4,
          f"traces with the script's header: {pyheads}, parent {parent}, forks {forks}")
    # the preexec_fn children: the lock made in the child before exec, then sh's own header
    pre = [traces[f] for f in forks if events(traces[f], "acquire")]
    check(sorted(os.path.basename(events(c, "acquire")[0]["path"]) for c in pre) ==
          ["preexec0.lock", "preexec1.lock"] and
          all(events(c, "header")[-1]["argv"][0] == "/bin/sh" for c in pre),
          f"preexec_fn children: {pre}")
    # a vfork child whose exec failed leaves with _exit(): nothing of it in the parent's trace
    ex = events(traces[parent], "exit")
    check(len(ex) == 1 and traces[parent][-1] is ex[0], f"the parent's exit events: {ex}")
    ps = [s for s in events(traces[parent], "spawn") if s["via"] == "posix_spawn"]
    check([s["argv"] for s in ps] == [["sh", "-c", "exit 5"]], f"posix_spawn events {ps}")
    kids = [p for p, recs in traces.items() if recs[0]["ppid"] == parent]
    sh = [p for p in kids if traces[p][0]["argv"][:1] == ["/bin/sh"]]
    check(len(sh) == 46, f"{len(sh)} /bin/sh children of subprocess (vfork) traced, expected 46")
    batons = sorted(os.path.basename(a["path"]) for p in kids
                    for a in events(traces[p], "acquire") if "baton" in a["path"])
    check(batons == [f"baton{i}" for i in range(4)], f"python baton children: {batons}")
    rel = sorted(os.path.basename(a["path"]) for p in kids
                 for a in events(traces[p], "release"))
    check(rel == batons, f"baton releases: {rel}")
    cs = sorted(os.path.basename(a["path"]) for p in kids for a in events(traces[p], "acquire")
                if "child" in a["path"])
    check(cs == [f"child{100 + i}.out" for i in range(6)], f"stress children: {cs}")
    analyze(tr, traces)


def case_closefds(stress, helper, tmp):
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    ref, _ = pair("closefds", lambda w: [stress, "closefds", w], tmp, tr)
    check(out_lines(ref)[-1] == "errors 0", f"closefds: {out_lines(ref)}")
    for f in glob.glob(os.path.join(tr, "*.jsonl")):
        with open(f, "rb") as fh:
            check(b" mine " not in fh.read(), f"{f}: the program's bytes in a trace")
    traces = read_traces(tr)
    parent, = roots(traces, lambda h: h["argv"][1:2] == ["closefds"])
    recs = traces[parent]
    tags = ["before", "dup2", "open", "after"]
    check([os.path.basename(a["path"]) for a in events(recs, "acquire")] ==
          [f"lock-{t}" for t in tags], f"acquires after every fd was closed: {recs}")
    check([os.path.basename(a["path"]) for a in events(recs, "release")] ==
          [f"lock-{t}" for t in tags], "releases")
    sp = events(recs, "spawn")
    check([s["via"] for s in sp] == ["fork", "posix_spawn"] * 4, f"spawns: {sp}")
    check(sum(w["how"] == "flock" for w in events(recs, "wait")) == 4, "busy flock waits")
    check(recs[-1]["type"] == "exit", "no exit line: the trace was lost")
    analyze(tr, traces)
    print("  the program's 198 reused fds got no trace bytes (the shim checks its fd before each "
          "line and reopens its file)")


def case_signals(stress, helper, tmp):
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    ref, _ = pair("signals", lambda w: [stress, "signals", w, "1000"], tmp, tr)
    lines = out_lines(ref)
    check(lines == [f"worker {k}: " + " ".join(["1000"] * 8) for k in range(3)] +
          ["handler ran: yes", "errors 0"], f"signals: {lines}")
    traces = read_traces(tr)
    (pid, recs), = traces.items()
    acq = [os.path.basename(a["path"]) for a in events(recs, "acquire")]
    # the workers' own creates are all recorded; the handler's only when it did not
    # interrupt the shim itself (then its calls pass straight through)
    check(sum(a.startswith("w") for a in acq) == 3000, f"{len(acq)} acquires")
    print(f"  the handler's creates recorded: {acq.count('sig.lock')}")
    analyze(tr, traces)


RELATIVE = """
import os
os.mkdir("sub")
os.chdir("sub")
pid = os.fork()
if pid == 0:
    os.open("child.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os._exit(7)
print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
os.closerange(3, 1 << 30)  # the trace fd too (past the limit or not): the shim reopens its file
os.open("parent.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
print("parent ok")
"""


def case_relative(stress, helper, tmp):
    """HANGDX_TRACE_DIR relative: a fork child and a reopen after a chdir use the directory
    the process started with."""
    res = []
    for label, trace in (("without the shim", None), ("with the shim", "tr")):
        w = os.path.join(tmp, label.split()[0])
        os.makedirs(os.path.join(w, "tr"))
        cwd = os.getcwd()
        os.chdir(w)
        try:
            res.append(run(f"relative {label}", [PY, "-c", RELATIVE], trace_dir=trace))
        finally:
            os.chdir(cwd)
    same("relative trace dir", res[0], res[1])
    check(res[0].out == b"child 7\nparent ok\n", f"relative: {res[0].out}")
    traces = read_traces(os.path.join(tmp, "with", "tr"))
    acq = sorted(os.path.basename(a["path"]) for recs in traces.values()
                 for a in events(recs, "acquire"))
    check(len(traces) == 2 and acq == ["child.lock", "parent.lock"],
          f"relative trace dir: {len(traces)} traces, acquires {acq}")
    check(not os.path.exists(os.path.join(tmp, "with", "sub", "tr")), "a second trace dir")
    print("relative HANGDX_TRACE_DIR: the fork child after chdir and the reopened file use "
          "the start's directory")


def programs(stress):
    """The programs the broken trace directories are tried with (smaller sizes)."""
    return [("threads", lambda w: [stress, "threads", w, "4", "60"]),
            ("forkexec", lambda w: [stress, "forkexec", w, "20"]),
            ("spawnchain", lambda w: [stress, "spawnchain", w, "2", "3"]),
            ("closefds", lambda w: [stress, "closefds", w]),
            ("subprocess", lambda w: [PY, SUBPROC, w, stress])]


def mount_tmpfs(path, opts):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path], capture_output=True,
                       text=True)
    if r.returncode != 0:
        skip(f"cannot mount a tmpfs ({r.stderr.strip()}): this case needs root with CAP_SYS_ADMIN")


def case_tracedir(stress, helper, tmp):
    if os.geteuid() != 0:
        skip("needs root: a read-only and a full trace directory are tmpfs mounts")
    mounts = []
    try:
        ro, full = os.path.join(tmp, "ro"), os.path.join(tmp, "full")
        mount_tmpfs(ro, "size=64k,mode=0700")
        mounts.append(ro)
        subprocess.run(["mount", "-o", "remount,ro", ro], check=True)
        check(not os.access(ro, os.W_OK), "the read-only mount is writable")
        page = os.sysconf("SC_PAGE_SIZE")
        mount_tmpfs(full, f"size={4 * page},mode=0700")  # 16k with 4k pages
        mounts.append(full)
        foreign = os.path.join(tmp, "foreign")
        os.mkdir(foreign)
        os.chmod(foreign, 0o777)  # writable by anyone: only the owner check stops the shim
        os.chown(foreign, NOBODY, NOBODY)
        dirs = [("missing", os.path.join(tmp, "missing")), ("read-only", ro), ("full", full),
                ("owned by nobody", foreign)]
        for name, make in programs(stress):
            w = os.path.join(tmp, f"{name}-ref")
            os.mkdir(w)
            ref = run(f"{name} without the shim", make(w))
            check(ref.rc == 0, f"{name} fails without the shim: {ref.out}{ref.err}")
            for what, d in dirs:
                w = os.path.join(tmp, f"{name}-{what.split()[0]}")
                os.mkdir(w)
                got = run(f"{name} with a trace directory {what}", make(w), trace_dir=d)
                same(f"{name}, trace directory {what}", ref, got)
            print(f"{name}: identical with a trace directory missing, read-only, full, "
                  f"owned by nobody")
        check(not os.path.exists(dirs[0][1]), "the shim created the missing trace directory")
        check(os.listdir(ro) == [] and os.listdir(foreign) == [],
              f"files written: {os.listdir(ro)} {os.listdir(foreign)}")
        vfs = os.statvfs(full)
        check(vfs.f_bavail == 0, f"the small tmpfs is not full ({vfs.f_bavail} blocks free): "
              "the case did not test a full disk")
        traces = read_traces(full, torn_ok=True)
        n = len(glob.glob(os.path.join(full, "*.jsonl")))
        print(f"  full: {n} trace files, {len(traces)} with a header, each line whole but "
              "a torn last one")
        analyze(full, traces, torn_ok=True)
        # full, then room again: after its first failed or short write the shim stays quiet,
        # so a torn line is never followed by whole ones
        full2 = os.path.join(tmp, "full2")
        mount_tmpfs(full2, f"size={4 * page},mode=0700")
        mounts.append(full2)
        filler = os.path.join(full2, "filler")
        with open(filler, "wb") as f:
            f.write(b"x" * 3 * page)  # 3 of the 4 pages: the trace gets one
        res = []
        for label, trace in (("without the shim", None), ("with the shim", full2)):
            w = os.path.join(tmp, "fill-" + label.split()[0])
            os.mkdir(w)
            p = subprocess.Popen([stress, "fill", w, str(60 * page // 4096)],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env_with(trace),
                                 start_new_session=True)
            first = p.stdout.readline()
            if trace and os.path.exists(filler):
                os.unlink(filler)
            open(os.path.join(w, "go"), "w").close()
            try:
                out, err = p.communicate(timeout=BOUND)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                fail(f"deadlock: fill {label} did not finish in {BOUND} s")
            res.append(Run(p.returncode, first + out, err, 0))
        same("fill (full, then room again)", res[0], res[1])
        check(res[0].out == b"phase 1, errors 0\nphase 2, go, errors 0\n", f"fill: {res[0].out}")
        files = glob.glob(os.path.join(full2, "*.jsonl"))
        check(len(files) == 1 and os.path.getsize(files[0]) == page,
              f"fill: trace files {[(f, os.path.getsize(f)) for f in files]}: not one full page")
        with open(files[0], "rb") as f:
            data = f.read()
        check(b"phase2" not in data, "fill: the shim wrote again after a failed write: "
              + repr(data[-300:]))
        (pid, recs), = read_traces(full2, torn_ok=True).items()
        torn = "a torn last line, " if not data.endswith(b"\n") else ""
        print(f"  full, then room again: {len(recs)} whole lines, {torn}nothing after it")
    finally:
        for m in mounts:
            r = subprocess.run(["umount", m], capture_output=True, text=True)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", m])


def case_perms(stress, helper, tmp):
    # trace files are 0600 whatever the program's umask
    for um in (0o022, 0o277, 0o000):
        tr = os.path.join(tmp, f"umask{um:o}")
        os.mkdir(tr)
        r = run("errno", [stress, "errno"], trace_dir=tr, umask=um)
        check(r.out == b"errno at main 0\n", f"errno at main() with the shim: {r.out}")
        r = run("errno", [stress, "errno"], trace_dir=os.path.join(tmp, "missing"), umask=um)
        check(r.out == b"errno at main 0\n",
              f"errno at main() with the shim and a missing trace directory: {r.out}")
        files = glob.glob(os.path.join(tr, "*.jsonl"))
        check(len(files) == 1, f"umask {um:o}: trace files {files}")
        mode = os.stat(files[0]).st_mode & 0o7777
        check(mode == 0o600, f"umask {um:o}: trace file mode {oct(mode)}, not 0600")
    print("trace files 0600 under umask 022, 277, 000; errno 0 at main()")
    # a FIFO where the trace file goes (the same pid after exec): the shim must not wait for
    # a reader, nor write into it
    fifo_dir = os.path.join(tmp, "fifo")
    os.mkdir(fifo_dir)
    env = env_with(None)
    env.update(D=fifo_dir, SHIM=SHIM, STRESS=stress, HANGDX_TRACE_DIR=fifo_dir)
    p = subprocess.Popen(["/bin/sh", "-c", 'mkfifo "$D/$(uname -n)-$$.jsonl" && '
                          'LD_PRELOAD="$SHIM" exec "$STRESS" errno'], env=env,
                         stdout=subprocess.PIPE, start_new_session=True)
    try:
        out = p.communicate(timeout=BOUND)[0]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail(f"deadlock: the shim waits on a FIFO at its trace file's name ({BOUND} s)")
    check(out == b"errno at main 0\n", f"with a FIFO as trace file: {out}")
    print("a FIFO at the trace file's name: not opened for good, the program unchanged")
    if os.geteuid() != 0:
        skip("needs root to give a directory to another user")
    other = os.path.join(tmp, "other")
    os.mkdir(other)
    os.chmod(other, 0o777)
    os.chown(other, NOBODY, NOBODY)
    # a file of another user where the trace file goes (the same pid after exec), in a
    # directory of ours that anyone may write: left alone, not one byte added
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    env = env_with(None)
    env.update(D=shared, SHIM=SHIM, STRESS=stress, HANGDX_TRACE_DIR=shared)
    r = subprocess.run(["/bin/sh", "-c", 'f="$D/$(uname -n)-$$.jsonl"; : > "$f" && chmod 666 "$f"'
                        f' && chown {NOBODY} "$f" && LD_PRELOAD="$SHIM" exec "$STRESS" errno'],
                       env=env, capture_output=True, timeout=BOUND)
    files = glob.glob(os.path.join(shared, "*.jsonl"))
    check(r.stdout == b"errno at main 0\n" and len(files) == 1, f"{r.stdout} {files}")
    check(os.stat(files[0]).st_size == 0, "the shim wrote into another user's trace file")
    print("a trace file of another user: left alone")
    # the shim alone: writes nothing there, changes nothing
    ref, _ = pair("threads, trace dir owned by nobody",
                  lambda w: [stress, "threads", w, "2", "20"], tmp, other)
    check(os.listdir(other) == [], f"the shim wrote into nobody's directory: {os.listdir(other)}")
    if not (HANGDX and os.access(HANGDX, os.X_OK)):
        print("SKIP: hangdx not built: run's refusal not checked")
        return
    marker = os.path.join(tmp, "started")
    r = subprocess.run([HANGDX, "run", "-d", other, "--", "sh", "-c", f"touch {marker}"],
                       capture_output=True, text=True, timeout=BOUND)
    check(r.returncode == 2, f"hangdx run into nobody's directory: rc {r.returncode}")
    check(not os.path.exists(marker), "hangdx run started the command anyway")
    for want in (other, "nobody", f"uid {NOBODY}", "-d DIR"):
        check(want in r.stderr, f"the refusal does not say {want!r}: {r.stderr!r}")
    check(os.listdir(other) == [], "hangdx run wrote into nobody's directory")
    print(f"hangdx run refuses nobody's directory: {r.stderr.strip()}")


def case_valgrind(stress, helper, tmp):
    vg = shutil.which("valgrind")
    if not vg:
        skip("valgrind is not installed")
    # memcheck errors in any code of the process, the shim's included, fail the run (99);
    # --run-libc-freeres=no: valgrind's end-of-run clean-up would flush stdio in children
    # that leave with _exit()
    vgargs = [vg, "-q", "--error-exitcode=99", "--run-libc-freeres=no", "--trace-children=yes",
              "--trace-children-skip=/bin/*,/usr/bin/*"]
    cases = [("helper calls", lambda w: [helper, "calls", w]),
             ("threads", lambda w: [stress, "threads", w, "4", "20"]),
             ("forkexec", lambda w: [stress, "forkexec", w, "4"]),
             ("spawnchain", lambda w: [stress, "spawnchain", w, "1", "3"]),
             ("closefds", lambda w: [stress, "closefds", w]),
             ("signals", lambda w: [stress, "signals", w, "60"])]
    for name, make in cases:
        tr = os.path.join(tmp, name.replace(" ", "-") + "-trace")
        os.mkdir(tr)
        w = os.path.join(tmp, name.replace(" ", "-") + "-ref")
        os.mkdir(w)
        ref = run(name, make(w))
        w = os.path.join(tmp, name.replace(" ", "-") + "-vg")
        os.mkdir(w)
        got = run(name + " under valgrind", vgargs + make(w), trace_dir=tr, bound=VALGRIND_BOUND)
        check(got.rc != 99, f"{name}: valgrind found errors with the shim loaded:\n"
              f"{got.err.decode()}")
        same(name + " under valgrind", ref, got)
        traces = read_traces(tr)
        check(traces, f"{name}: no traces under valgrind")
        print(f"{name}: no memcheck errors, output identical ({got.secs:.1f} s, "
              f"{len(traces)} traces)")


# bash keeps an fd it finds close-on-exec as its own (saves it across `exec 100>F`, restores
# it after): a trace fd held at 100 became the script's fd 100 (D1). The shim's one fd sits
# past the soft limit or at the top of min(soft, 4096) (README), far from such numbers.
BASH_FL = """exec 100>"$1/lockfile100"
if flock -n 100; then echo "$2 got lock"; sleep 2; else echo "$2 lock busy"; fi
"""
BASH_RW = """exec 100>"$1/F"; echo data >&100; exec 100>&-
exec 100<"$1/F"; cat <&100
ls /proc/self/fd | sort -n | tr '\\n' ' ' > "$1/fds"
"""


def case_bashfd(stress, helper, tmp):
    bash = shutil.which("bash")
    flock_bin = shutil.which("flock")
    if not bash or not flock_bin:
        skip("bash or flock(1) is not installed")
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    fl = os.path.join(tmp, "fl.sh")
    with open(fl, "w") as f:
        f.write(BASH_FL)
    rw = os.path.join(tmp, "rw.sh")
    with open(rw, "w") as f:
        f.write(BASH_RW)
    # two scripts on one lock: A holds it 2 s, B (0.5 s later) must find it busy
    two = lambda w: [bash, "-c", f'{bash} {fl} {w} A & sleep 0.5; {bash} {fl} {w} B; wait']
    ref, _ = pair("bashfd-flock", two, tmp, tr)
    check(out_lines(ref) == ["A got lock", "B lock busy"], f"bash flock: {out_lines(ref)}")
    ref, _ = pair("bashfd-rw", lambda w: [bash, rw, w], tmp, tr)
    check(out_lines(ref)[0] == "data", f"bash fd 100 write/read: {out_lines(ref)}")
    # what ls finds open in itself: with the shim, its one trace fd more, at the rule's number
    fds = []
    for side in ("plain", "shim"):
        with open(os.path.join(tmp, f"bashfd-rw-{side}", "fds")) as f:
            fds.append([int(x) for x in f.read().split()])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = soft if soft <= 4096 and hard > soft else min(soft, 4096) - 1
    check(fds[1] == sorted(fds[0] + [want]),
          f"ls /proc/self/fd: {fds[1]} with the shim, {fds[0]} without; expected one more, {want}")
    print(f"  ls /proc/self/fd: {' '.join(map(str, fds[0]))} without the shim, and {want} with it")
    traces = read_traces(tr)
    check(any(events(r, "wait") for r in traces.values()), "B's busy flock -n: no wait line")
    analyze(tr, traces)


def case_ulimit(stress, helper, tmp):
    bash = shutil.which("bash")
    if not bash:
        skip("bash is not installed")
    tr = os.path.join(tmp, "trace")
    os.mkdir(tr)
    prog = os.path.join(tmp, "fds.py")
    with open(prog, "w") as f:
        f.write("import os\nn = 0\ntry:\n    while True:\n        os.open('/dev/null', os.O_RDONLY)\n"
                "        n += 1\nexcept OSError as e:\n    print('opened', n, 'then errno', e.errno)\n")
    # under ulimit -Sn 12 (the hard limit above it) the shim's fd goes past the soft limit:
    # the program may open exactly as many fds as without the shim
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard > 12:
        script = f'ulimit -Sn 12; exec 3>"$1/a"; {PY} -S {prog}; flock "$1/a" true; echo ok'
        ref, _ = pair("ulimit", lambda w: [bash, "-c", script, "x", w], tmp, tr)
        check(out_lines(ref) == ["opened 8 then errno 24", "ok"], f"ulimit: {out_lines(ref)}")
        traces = read_traces(tr)
        check(any(events(r, "lock_start") for r in traces.values()), "flock(1): no lock_start")
        analyze(tr, traces)
    else:
        print(f"  (ulimit -Sn 12 not tried: the hard limit is {hard})")
    # under ulimit -n 12 (soft and hard) there is no number past the limit: the shim's fd
    # takes the top one, 11, and the program can open one fd fewer (README says so)
    script = f'ulimit -n 12; exec 3>"$1/a"; {PY} -S {prog}; flock "$1/a" true; echo ok'
    tr2 = os.path.join(tmp, "trace-hard")
    os.mkdir(tr2)
    res = []
    for label, trace in (("plain", None), ("shim", tr2)):
        w = os.path.join(tmp, "ulimit-hard-" + label)
        os.mkdir(w)
        res.append(out_lines(run(f"ulimit -n 12 {label}", [bash, "-c", script, "x", w],
                                 trace_dir=trace)))
    check(res == [["opened 8 then errno 24", "ok"], ["opened 7 then errno 24", "ok"]],
          f"ulimit -n 12: {res[0]} without the shim, {res[1]} with it")
    traces = read_traces(tr2)
    check(any(events(r, "lock_start") for r in traces.values()), "flock(1): no lock_start")
    print("  ulimit -Sn 12: as many fds as without the shim; ulimit -n 12: one fewer (the "
          "shim's, at 11)")


FLOCK_LOOP = """import fcntl, sys, threading
n, threads = int(sys.argv[2]), int(sys.argv[3])
def work(k):
    with open(sys.argv[1] + "/lk", "w") as f:
        for i in range(n):
            fcntl.flock(f, fcntl.LOCK_EX)
            fcntl.flock(f, fcntl.LOCK_UN)
ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
[t.start() for t in ts]
[t.join() for t in ts]
print("done", threads * n)
"""


def case_flockloop(stress, helper, tmp):
    prog = os.path.join(tmp, "loop.py")
    with open(prog, "w") as f:
        f.write(FLOCK_LOOP)
    # One thread: no call ever waits, so past the first 64 every call is only counted and the
    # trace stays small. Three threads: a call that has to wait is recorded in full (so that a
    # hang always shows); on an idle machine most do, so only the counting is checked there.
    for threads, n in ((1, 150000), (3, 20000)):
        label = f"flockloop-{threads}"
        tr = os.path.join(tmp, label + "-trace")
        os.mkdir(tr)
        ref, got = pair(label, lambda w: [PY, "-S", prog, w, str(n), str(threads)], tmp, tr)
        calls = threads * n
        check(out_lines(ref) == [f"done {calls}"], f"{label}: {out_lines(ref)}")
        traces = read_traces(tr)
        (pid, recs), = traces.items()
        size = os.path.getsize(glob.glob(os.path.join(tr, "*.jsonl"))[0])
        starts = events(recs, "lock_start")
        counted = sum(c["count"] for c in events(recs, "lock_count"))
        # every call is either recorded in full or counted; the counted lines come at most
        # once a second (and at exit)
        check(len(starts) + counted == calls, f"{label}: {len(starts)} lock_start + {counted} counted")
        check(len(starts) == len(events(recs, "lock_end")), f"{label}: lock_start without lock_end")
        check(len(events(recs, "lock_count")) <= got.secs + 2, f"{label}: lock_count more than once a second")
        if threads == 1:
            check(len(starts) == 64, f"{label}: {len(starts)} calls in full, want the first 64")
            check(size < 64 * 1024, f"{label}: trace {size} bytes for {calls} calls: not bounded")
        print(f"  {label}: {calls} flock calls: {len(starts)} in full (contended or first 64), {counted} "
              f"counted; trace {size} bytes; {calls / ref.secs:.0f} calls/s without, "
              f"{calls / got.secs:.0f} with the shim")
        analyze(tr, traces)


if __name__ == "__main__":
    case, stress, helper = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    with tempfile.TemporaryDirectory(prefix="hdx-stress-") as tmp:
        t0 = time.monotonic()
        globals()["case_" + case](stress, helper, tmp)
        print(f"{case}: passed in {time.monotonic() - t0:.1f} s")
