#!/usr/bin/python3
"""The shim's trace fd (README, `hangdx run`): fd_test.py CASE FD_PROG FD_RACE.

The shim holds one descriptor, its trace file, opened while the process has one thread and
moved at once to a high number: the soft RLIMIT_NOFILE itself (past the limit) when the soft
limit is at most 4096 and the hard one higher, else the top of min(soft, 4096). These cases run
real programs (fd_prog.c, fd_race.c) without and with the shim and require the same exit
status and stdout, then read back what the shim recorded.

Cases: race policy dup2 closeall rlimit forkexec.
Env (tests/CMakeLists.txt): HANGDX_PRELOAD (the shim)."""
import concurrent.futures
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SHIM = os.environ["HANGDX_PRELOAD"]
BOUND = 60  # seconds a single run may take
HIGH = 4096  # HDX_FD_HIGH (preload/shim.h)
SOFT0, HARD0 = resource.getrlimit(resource.RLIMIT_NOFILE)
# Limits under which the shim's fd goes past the soft limit (1024), and below it (4095 when
# the hard limit here allows 8192); a process may always lower its hard limit.
PAST = (1024, 4096) if HARD0 >= 4096 else (HARD0 // 2, HARD0)
BELOW = (min(8192, HARD0),) * 2


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def expected_fd(soft, hard):
    """The number the shim's rule gives a process with no other high fd."""
    if soft <= HIGH and hard > soft:
        return soft
    return min(soft, HIGH) - 1


def feasible(limits):
    """Limits a process of ours can set (lowering the hard limit needs nothing; raising it,
    CAP_SYS_RESOURCE, which even root in a container may lack)."""
    return limits is None or limits[1] <= HARD0


def run(argv, trace_dir=None, limits=None):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HANGDX_TRACE_DIR")}
    if trace_dir is not None:
        env["LD_PRELOAD"] = SHIM
        env["HANGDX_TRACE_DIR"] = trace_dir

    def pre():
        if limits:
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    try:
        r = subprocess.run(argv, env=env, capture_output=True, timeout=BOUND, preexec_fn=pre)
    except subprocess.TimeoutExpired:
        fail(f"deadlock: {argv} did not finish in {BOUND} s")
    return r


def pair(tmp, label, make_argv, limits=None):
    """Without and with the shim, each in a directory of its own: the same status and stdout.
    Returns (stdout lines, the shim run's work dir, its trace dir)."""
    a, b, tr = (os.path.join(tmp, f"{label}-{x}") for x in ("plain", "shim", "trace"))
    for d in (a, b, tr):
        os.mkdir(d)
    ref = run(make_argv(a), limits=limits)
    check(ref.returncode == 0, f"{label} fails even without the shim: rc {ref.returncode}\n"
          f"{ref.stdout.decode()}{ref.stderr.decode()}")
    got = run(make_argv(b), trace_dir=tr, limits=limits)
    check((ref.returncode, ref.stdout) == (got.returncode, got.stdout),
          f"{label}: the shim changed the result\nwithout: rc {ref.returncode}\n"
          f"{ref.stdout.decode()}\nwith: rc {got.returncode}\n{got.stdout.decode()}"
          f"{got.stderr.decode()}")
    return ref.stdout.decode().splitlines(), b, tr


def read_traces(d):
    """{pid: [records]}: every line of every file parses, each file starts with a header."""
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        pid = int(f.rsplit("-", 1)[1].split(".")[0])
        with open(f, "rb") as fh:
            data = fh.read()
        check(data.endswith(b"\n"), f"{f}: ends in a torn line")
        recs = []
        for ln in data.split(b"\n")[:-1]:
            try:
                recs.append(json.loads(ln))
            except ValueError:
                fail(f"{f}: a line that is not the shim's JSON: {ln[:200]!r}")
        check(recs and recs[0]["type"] == "header" and recs[0]["pid"] == pid,
              f"{f}: no header first")
        out[pid] = recs
    return out


def events(recs, typ):
    return [r for r in recs if r["type"] == typ]


def acquired(recs):
    return [os.path.basename(a["path"]) for a in events(recs, "acquire")]


def the_trace(tr):
    traces = read_traces(tr)
    check(len(traces) == 1, f"{len(traces)} trace files in {tr}, expected 1")
    return next(iter(traces.values()))


def shim_fd(fd_prog, tmp, limits):
    """The number the shim's fd has in a program started under limits (fd_prog showfd)."""
    tr = tempfile.mkdtemp(dir=tmp)
    r = run([fd_prog, "showfd", tr], trace_dir=tr, limits=limits)
    words = r.stdout.decode().split()
    check(r.returncode == 0 and len(words) == 3, f"showfd under {limits}: {r.stdout!r}")
    return int(words[2])


def limits_label(limits):
    return "inherited %d:%d" % (SOFT0, HARD0) if limits is None else "%d:%d" % limits


# ------------------------------------------------------------------ cases

RACE_OK = "wrong_lowest_fd=0 dup2_fail=0 write_fail=0 log_ok=yes foreign_bytes_in_log=no"


def race_once(fd_race, tmp, k, iters, shim, limits):
    w = os.path.join(tmp, f"race-{k}")
    tr = os.path.join(w, "trace")
    os.makedirs(tr)
    r = run([fd_race, str(iters), w], trace_dir=tr if shim else None, limits=limits)
    line = r.stdout.decode().splitlines()[0] if r.stdout else ""
    res = {"rc": r.returncode, "line": line, "ok": r.returncode == 0 and
           line == f"iters={iters} {RACE_OK}", "out": r.stdout.decode() + r.stderr.decode()}
    with open(os.path.join(w, "blog2.txt"), "rb") as f:
        res["ok"] = res["ok"] and f.read() == b"B\n" * iters
    res["trace"] = None
    if shim:
        traces = read_traces(tr)
        main = [recs for recs in traces.values() if events(recs, "spawn")]
        recs = main[0] if len(main) == 1 else []
        starts = [s for s in events(recs, "lock_start") if s["path"].endswith("/c64.lock")]
        ends = [e for e in events(recs, "lock_end") if e["path"].endswith("/c64.lock")]
        res["events"] = len(starts)
        if not recs:
            res["trace"] = f"run {k}: the program's trace not found among {list(traces)}"
        elif not starts or len(starts) != len(ends):
            res["trace"] = (f"run {k}: {len(starts)} lock_start / {len(ends)} lock_end of "
                            "thread A's flock")
        elif recs[-1]["type"] != "exit":
            res["trace"] = f"run {k}: the trace lost its exit line"
    shutil.rmtree(w)
    return res


def case_race(fd_prog, fd_race, tmp):
    """The finding (fd_race.c): thread A's blocking flocks are recorded while the main thread
    relies on open() returning the lowest free number and dup2()s onto it. 100 runs under
    the shim with its fd below the soft limit (4095, the number a program could reach), 20
    with it past the limit: the program's log exact each time, thread A's calls recorded."""
    iters = 20000
    for k in range(3):
        r = race_once(fd_race, tmp, f"plain{k}", iters, False, None)
        check(r["ok"], f"the program is not exact even without the shim: {r['out']}")
    plans = [(BELOW, 100), (PAST, 20)]
    for limits, n in plans:
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            res = list(ex.map(lambda k: race_once(fd_race, tmp, f"{n}-{k}", iters, True, limits),
                              range(n)))
        bad = [r for r in res if not r["ok"]]
        check(not bad, f"{len(bad)} of {n} runs under the shim ({limits_label(limits)}) not exact: "
              + "; ".join(r["line"] or r["out"][:200] for r in bad[:5]))
        lost = [r["trace"] for r in res if r["trace"]]
        check(not lost, f"{len(lost)} of {n} traces incomplete: " + "; ".join(lost[:5]))
        ev = sorted(r["events"] for r in res)
        print(f"race, limits {limits_label(limits)}, shim fd {shim_fd(fd_prog, tmp, limits)}: "
              f"{n}/{n} runs exact ({RACE_OK}); thread A's flock recorded {ev[0]}..{ev[-1]} "
              f"times a run; {time.monotonic() - t0:.0f} s")


def case_policy(fd_prog, fd_race, tmp):
    """Where the fd goes, under each kind of limit."""
    cases = [PAST, (12, 64), (4096, 8192), (4097, 8192), BELOW, (12, 12), (64, 64), None]
    seen = []
    for limits in cases:
        if not feasible(limits):
            print(f"  (limits {limits_label(limits)} skipped: the hard limit here is {HARD0})")
            continue
        soft, hard = limits or (SOFT0, HARD0)
        got, want = shim_fd(fd_prog, tmp, limits), expected_fd(soft, hard)
        check(got == want, f"limits {limits_label(limits)}: the shim's fd is {got}, expected {want}")
        seen.append(f"{limits_label(limits)} -> {got}")
    print("the shim's fd: " + ", ".join(seen))


def case_dup2(fd_prog, fd_race, tmp):
    """The program dup2()s its own file onto the shim's fd number: its file gets only its own
    bytes. One thread: the shim reopens its file at another number; threads alive: it goes
    quiet. Past the limit the number cannot be targeted at all (EBADF, as without the shim),
    so threads recording all along lose nothing."""
    below = BELOW
    n_below = shim_fd(fd_prog, tmp, below)
    variants = [("below, one thread", below, n_below, 0, 0, 0, "reopened"),
                ("below, 2 threads alive", below, n_below, 2, 0, 0, "quiet")]
    n_past = shim_fd(fd_prog, tmp, PAST)
    check(n_past == PAST[0], f"past the limit: fd {n_past}")
    variants += [("past the limit, 3 threads recording", PAST, n_past, 3, 0, 1, "whole"),
                 ("past the limit raised, one thread", PAST, n_past, 0, 1, 0, "reopened"),
                 ("past the limit raised, 2 threads alive", PAST, n_past, 2, 1, 0, "quiet")]
    for label, limits, n, t, raise_, hot, want in variants:
        lines, w, tr = pair(tmp, label.replace(" ", "-").replace(",", ""),
                            lambda d: [fd_prog, "dup2", d, str(t), str(raise_), str(n), str(hot)],
                            limits)
        ok = "rc -1 errno 9" if want == "whole" else "rc ok errno 0"
        check(lines == [f"dup2 onto {n}: {ok}", "own file exact: yes", "errors 0"],
              f"dup2 {label}: {lines}")
        with open(os.path.join(w, "own.txt"), "rb") as f:
            own = f.read()
        check(b"{" not in own, f"dup2 {label}: trace bytes in the program's file")
        recs = the_trace(tr)
        acq = acquired(recs)
        if want == "quiet":
            check(acq == ["before.lock"] and not events(recs, "exit"),
                  f"dup2 {label}: expected the trace to stop at the dup2: {acq}")
        else:
            check(acq == ["before.lock", "during.lock", "after.lock"] and
                  recs[-1]["type"] == "exit", f"dup2 {label}: trace {acq}, last {recs[-1]}")
        if want == "whole":
            starts = events(recs, "lock_start")
            check(len(starts) >= 3 * 100 and len(starts) == len(events(recs, "lock_end")),
                  f"dup2 {label}: {len(starts)} lock_start of the threads' flocks")
        print(f"dup2 onto the shim's fd {n} ({label}, {limits_label(limits)}): the program's "
              f"file exact; trace {want}")


def case_closeall(fd_prog, fd_race, tmp):
    """close_range(3, ~0) and every number 3..200 taken by the program's own files while
    threads record: its files exact; one thread: the shim reopens, threads: it goes quiet."""
    for limits in (BELOW, PAST):
        for t in (0, 3):
            label = f"closeall-{t}-{limits_label(limits).replace(':', '_').replace(' ', '_')}"
            lines, w, tr = pair(tmp, label, lambda d: [fd_prog, "closeall", d, str(t)], limits)
            check(lines == ["own files exact: 198 of 198", "errors 0"], f"{label}: {lines}")
            for f in glob.glob(os.path.join(w, "own-*")):
                with open(f, "rb") as fh:
                    check(b"{" not in fh.read(), f"{label}: trace bytes in {f}")
            recs = the_trace(tr)
            acq = acquired(recs)
            if t:
                check(acq == ["before.lock"] and not events(recs, "exit"),
                      f"{label}: expected quiet after close_range: {acq}")
            else:
                check(acq == ["before.lock", "during.lock", "after.lock"] and
                      recs[-1]["type"] == "exit", f"{label}: {acq}")
            print(f"{label}: 198 own files exact; trace {'quiet' if t else 'reopened'}")


def case_rlimit(fd_prog, fd_race, tmp):
    """The program lowers both limits to 64, below the shim's fd: it opens as many files as
    without the shim, and it and its fork child (whose own fd goes below the new limit) are
    traced."""
    for limits in (None, PAST):
        label = f"rlimit-{limits_label(limits).replace(':', '_').replace(' ', '_')}"
        lines, w, tr = pair(tmp, label, lambda d: [fd_prog, "rlimit", d, "64"], limits)
        check(lines[1:] == ["child status 7", "errors 0"] and
              lines[0].startswith("limit 64: opened ") and lines[0].endswith("errno 24"),
              f"{label}: {lines}")
        traces = read_traces(tr)
        check(len(traces) == 2, f"{label}: {len(traces)} traces")
        parent = next(p for p, r in traces.items() if events(r, "spawn"))
        child = events(traces[parent], "spawn")[0]["child"]
        check(acquired(traces[parent]) == ["before.lock", "lowered.lock", "after.lock"] and
              traces[parent][-1]["type"] == "exit", f"{label}: parent {traces[parent]}")
        c = traces.get(child)
        check(c and c[0]["ppid"] == parent and acquired(c) == ["child.lock"] and
              c[-1]["type"] == "exit" and c[-1]["status"] == 7, f"{label}: child {c}")
        print(f"{label}: {lines[0]} (as without the shim); parent and fork child traced")


def case_forkexec(fd_prog, fd_race, tmp):
    """20 forks from a program whose 3 threads record; each child locks, execs and locks again:
    each child's trace is its own (both images, no line of the parent's threads), and the
    child holds exactly one trace fd, on its own file, before and after the exec."""
    for limits in (None, PAST):
        label = f"forkexec-{limits_label(limits).replace(':', '_').replace(' ', '_')}"
        n = 20
        lines, w, tr = pair(tmp, label, lambda d: [fd_prog, "forkexec", d, str(n), "3"], limits)
        want = " ".join(str(20 + i % 5) for i in range(n))
        check(lines == ["statuses " + want, "errors 0"], f"{label}: {lines}")
        traces = read_traces(tr)
        parent = next(p for p, r in traces.items() if r[0]["argv"][1:2] == ["forkexec"] and
                      r[0]["ppid"] not in traces)
        precs = traces[parent]
        spawns = [s["child"] for s in events(precs, "spawn")]
        check(len(spawns) == n and not acquired(precs) and precs[-1]["type"] == "exit",
              f"{label}: parent's trace: {len(spawns)} spawns, acquires {acquired(precs)}")
        check(len(events(precs, "lock_start")) >= 300, f"{label}: the threads' flocks")
        for i, c in enumerate(spawns):
            recs = traces.get(c)
            check(recs, f"{label}: child {i} ({c}) has no trace")
            heads = events(recs, "header")
            check(len(heads) == 2 and heads[0]["ppid"] == parent and
                  heads[1]["argv"] == ["fd_prog", "child", os.path.realpath(w), str(i)],
                  f"{label}: child {i} headers {heads}")
            check(acquired(recs) == [f"fc{i}.lock", f"ec{i}.lock"] and
                  recs.index(heads[1]) > recs.index(events(recs, "acquire")[0]),
                  f"{label}: child {i} events {acquired(recs)}")
            check(all(r["tid"] == c for r in recs if r["type"] != "header"),
                  f"{label}: child {i}: a line of another thread: {recs}")
            check(recs[-1]["type"] == "exit", f"{label}: child {i}: no exit line")
            own = os.path.join(tr, f"{recs[0]['host']}-{c}.jsonl")
            for when in ("fork", "exec"):
                with open(os.path.join(w, f"{when}-{i}.fds")) as f:
                    fds = f.read().split("\n")[:-1]
                check(len(fds) == 1 and fds[0].split(" ", 1)[1] == own,
                      f"{label}: child {i} after {when}: trace fds {fds}, expected one on {own}")
            with open(os.path.join(w.replace("-shim", "-plain"), f"exec-{i}.fds")) as f:
                check(f.read() == "", f"{label}: trace fds without the shim")
        print(f"{label}: {n} children of a 4-thread parent, each with its own trace (fork "
              f"header, lock, exec header, lock, exit) and one trace fd on its own file")


if __name__ == "__main__":
    case, fd_prog, fd_race = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    with tempfile.TemporaryDirectory(prefix="hdx-fd-") as tmp:
        t0 = time.monotonic()
        globals()["case_" + case](fd_prog, fd_race, tmp)
        print(f"{case}: passed in {time.monotonic() - t0:.1f} s")
