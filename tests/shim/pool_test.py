#!/usr/bin/python3
"""The shim's buffer pool run dry (docs/design.md "The shim"): pool_test.py POOL_PROG SHIM_H.

pool_prog (pool_prog.c) holds the shim's trace writes of HELD threads unanswered, each thread
holding a pool buffer, while the rest of THREADS threads create their lock files at once. With
as many threads as the pool has buffers (HDX_POOL_N, read from SHIM_H) none is dropped; with 8
more, those 8 find the pool dry: each open still creates its file and returns, its event is not
recorded, and the exit line counts them ("dropped": 8). Exit 77 where the kernel has no seccomp
user notification."""
import glob, json, os, re, subprocess, sys, tempfile

SHIM = os.environ["HANGDX_PRELOAD"]


def check(cond, msg):
    if not cond:
        print("FAIL:", msg)
        sys.exit(1)


def run(prog, threads, held):
    with tempfile.TemporaryDirectory() as t:
        work, trace = os.path.join(t, "work"), os.path.join(t, "trace")
        os.mkdir(work)
        os.mkdir(trace)
        env = dict(os.environ, LD_PRELOAD=SHIM, HANGDX_TRACE_DIR=trace)
        p = subprocess.Popen([prog, work, str(threads), str(held)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=60)
        if p.returncode == 77:
            print(f"skipped: {err.strip()}")
            sys.exit(77)
        check(p.returncode == 0, f"pool_prog {threads} {held}: rc {p.returncode}: {err.strip()}")
        files = sorted(os.listdir(work))
        traces = glob.glob(os.path.join(trace, "*.jsonl"))
        check(len(traces) == 1, f"one trace expected: {traces}")
        with open(traces[0], encoding="utf-8") as f:
            recs = [json.loads(line) for line in f]
        check(recs[0]["type"] == "header" and recs[0]["pid"] == p.pid, f"header: {recs[0]}")
        return out.split(), files, recs


def main():
    prog, shim_h = sys.argv[1], sys.argv[2]
    with open(shim_h, encoding="utf-8") as f:
        pool = int(re.search(r"#define HDX_POOL_N (\d+)", f.read()).group(1))
    for threads, dropped in ((pool, 0), (pool + 8, 8)):
        out, files, recs = run(prog, threads, pool)
        want = ["held", str(pool), "done_before_release", str(dropped), "opened", str(threads)]
        check(out == want, f"{threads} threads: pool_prog said {out}, expected {want}")
        check(files == sorted(f"lock.{i}" for i in range(threads)),
              f"{threads} threads: every open creates its file, also a dropped one's: {files}")
        acq = [r for r in recs if r["type"] == "acquire"]
        paths = {os.path.basename(r["path"]) for r in acq}
        check(len(acq) == pool and len(paths) == pool and paths <= set(files),
              f"{threads} threads: {pool} acquire events, one per held thread: {acq}")
        ex = [r for r in recs if r["type"] == "exit"]
        check(len(ex) == 1 and ex[0].get("dropped", 0) == dropped,
              f"{threads} threads: the exit line counts {dropped} dropped: {ex}")
        print(f"{threads} threads, {pool} buffers held: {len(acq)} recorded, {dropped} dropped")
    print("PASS")


main()
