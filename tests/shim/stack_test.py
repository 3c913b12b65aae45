#!/usr/bin/python3
"""The shim's stack bound (docs/design.md "The shim"): stack_test.py MODE STACK_PROG.

  altstack  every wrapped call in a SIGUSR1 handler on an 8 KiB sigaltstack
  thread    every wrapped call in a thread of a 16 KiB stack
  depth     the stack each call touches on a painted alternate stack, with the shim
            and without it: the shim adds less than 2048 bytes to every call

Each mode runs stack_prog (stack_prog.c) without the shim first: where even that fails, the
machine's own signal frame or thread overhead does not fit, and the test skips (77). Under the
shim it must exit 0 and every call's event must be in the trace, with its path."""
import glob, json, os, subprocess, sys, tempfile

SHIM = os.environ["HANGDX_PRELOAD"]
BOUND = 2048  # bytes the shim may add to a call's stack (docs/design.md "The shim")

STATS = """stat stat64 lstat lstat64 fstatat fstatat64 statx __xstat __xstat64 __lxstat __lxstat64
__fxstatat __fxstatat64""".split()
PASS_THROUGH = "creat creat64 __open_2 __open64_2 __openat_2 __openat64_2".split()


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(prog, mode, work, trace):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("HANGDX_TRACE_DIR", None)
    if trace:
        env["LD_PRELOAD"] = SHIM
        env["HANGDX_TRACE_DIR"] = trace
    p = subprocess.Popen([prog, mode, work], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    cases, depth = {}, {}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "case":
            cases[f[1]] = dict(kv.split("=") for kv in f[2:])
        elif f[0] == "depth":
            depth[f[1]] = int(f[2])
    return p.pid, p.returncode, cases, depth, err


def traces(d):
    out = {}
    for f in glob.glob(os.path.join(d, "*.jsonl")):
        with open(f, encoding="utf-8") as fh:
            recs = [json.loads(line) for line in fh]
        check(recs and recs[0]["type"] == "header", f"{f}: no header first")
        out[recs[0]["pid"]] = recs
    return out


def one(recs, what, **keys):
    got = [r for r in recs if all(k in r and r[k] == v for k, v in keys.items())]
    check(len(got) == 1, f"{what}: expected one event {keys}, found {got}")
    return got[0]


def check_events(pid, cases, tr, work, final_exit):
    """Every case's call happened as without the shim would make it, and its event is there."""
    check(pid in tr, f"no trace of the program (pid {pid}): {sorted(tr)}")
    recs = tr[pid]
    p = lambda name: os.path.join(work, name)
    rc = lambda c: int(cases[c]["rc"])
    for c in ("open", "open64", "openat", "openat64", "openat_dirfd"):
        name = "acq_dirfd" if c == "openat_dirfd" else "acq_" + c
        a = one(recs, c, type="acquire", path=p(name))
        check(a["fd"] == rc(c) and rc(c) >= 0, f"{c}: acquire fd {a['fd']}, call returned {rc(c)}")
    check(cases["eexist"] == {"rc": "-1", "errno": "17"}, f"eexist: {cases['eexist']}")
    one(recs, "eexist", type="wait", how="eexist", polls=1, path=p("ee_open"))
    for c in PASS_THROUGH:
        check(rc(c) >= 0, f"{c} failed: {cases[c]}")
    for c in STATS:
        check(rc(c) == 0, f"{c} failed: {cases[c]}")
        one(recs, c, type="wait", how="stat", polls=1, path=p("st_" + c))
    for c, how, f in (("flock_busy", "flock", "fl_busy"), ("ofd_busy", "ofd", "ofd_busy"),
                      ("ofd64_busy", "ofd", "ofd64_busy")):
        check(cases[c] == {"rc": "-1", "errno": "11"}, f"{c}: {cases[c]}")
        one(recs, c, type="wait", how=how, polls=1, path=p(f))
    check(rc("flock_taken") == 0, f"flock_taken: {cases['flock_taken']}")
    for c, op, cmd, f in (("flock_block", "flock", "LOCK_EX", "fl_block"),
                          ("posix_w", "posix", "F_WRLCK", "posix_w"),
                          ("ofd64_w", "ofd", "F_WRLCK", "ofd64_w"),
                          ("lockf_w", "lockf", "F_LOCK", "lockf_w"),
                          ("lockf64_w", "lockf", "F_LOCK", "lockf64_w")):
        check(rc(c) == 0, f"{c}: {cases[c]}")
        one(recs, c, type="lock_start", op=op, cmd=cmd, path=p(f))
        one(recs, c, type="lock_end", op=op, rc=0, errno=0, path=p(f))
    check(rc("count") == 0, f"count: {cases['count']}")
    one(recs, "count", type="lock_count", op="flock", count=1, path=p("cnt"))
    for c in ("unlink", "unlinkat", "rename", "renameat", "renameat2"):
        check(rc(c) == 0, f"{c}: {cases[c]}")
        one(recs, c, type="release", path=p("rel_" + c))
    # Paths that cannot be written whole are null, never cut (docs/formats.md "Traces").
    for c in ("wide", "deep"):
        check(rc(c) >= 0, f"{c}: {cases[c]}")
        one(recs, c, type="acquire", fd=rc(c), path=None)
    check(cases["deep_busy"] == {"rc": "-1", "errno": "11"}, f"deep_busy: {cases['deep_busy']}")
    one(recs, "deep_busy", type="wait", how="flock", polls=1, path=None)
    cut = [r for r in recs if isinstance(r.get("path"), str) and not r["path"].startswith(work)]
    check(not cut, f"paths outside the work directory (cut?): {cut}")
    kid = int(cases["fork"]["child"])
    check(rc("fork") == kid > 0, f"fork: {cases['fork']}")
    one(recs, "fork", type="spawn", via="fork", child=kid)
    check(kid in tr and tr[kid][0]["pid"] == kid and tr[kid][0]["ppid"] == pid,
          f"fork: the child's header {tr.get(kid, [None])[0]}")
    one(tr[kid], "fork child", type="exit", status=0)
    for c in ("posix_spawn", "posix_spawnp"):
        kid = int(cases[c]["child"])
        check(rc(c) == 0 and kid > 0, f"{c}: {cases[c]}")
        one(recs, c, type="spawn", via="posix_spawn", child=kid, argv=["true", "stack_spawn"])
    ex = [r for r in recs if r["type"] == "exit"]
    check(len(ex) == 1 and "dropped" not in ex[0], f"exit lines: {ex}")
    if final_exit:
        check(ex[0]["status"] == 0, f"the handler's _exit(0): {ex[0]}")


def main():
    mode, prog = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as t:
        plain, work, tr = (os.path.realpath(os.path.join(t, x)) for x in ("plain", "work", "trace"))
        for d in (plain, work, tr):
            os.mkdir(d)
        _, brc, bcases, bdepth, berr = run(prog, mode, plain, None)
        if brc != 0:
            print(f"stack_prog {mode} fails even without the shim (rc {brc}: {berr.strip()}): "
                  "this machine's signal frame or thread overhead does not fit; skipped")
            sys.exit(77)
        pid, rc, cases, depth, err = run(prog, mode, work, tr)
        check(rc == 0, f"stack_prog {mode} under the shim: rc {rc} (without it: 0); {err.strip()}"
              f"; last case done: {list(cases)[-1:] }")
        check(list(cases) == list(bcases), f"cases differ: {list(cases)} vs {list(bcases)}")
        check_events(pid, cases, traces(tr), work, mode != "depth")
        if mode == "depth":
            check(set(depth) == set(bdepth) and len(depth) == len(cases) + 1,
                  f"depths: {sorted(depth)} vs {sorted(bdepth)}")
            over = {c: depth[c] - bdepth[c] for c in depth}
            worst = max(over, key=over.get)
            bad = {c: v for c, v in over.items() if v >= BOUND}
            check(not bad, f"the shim adds {BOUND} bytes of stack or more to: {bad}")
            print(f"stack the shim adds to a call: at most {over[worst]} bytes ({worst}; "
                  f"the call alone {bdepth[worst]}), bound {BOUND}")
        print(f"{mode}: {len(cases)} calls ran and recorded under the shim")


main()
