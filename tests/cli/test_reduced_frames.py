#!/usr/bin/env python3
"""The reduced node snapshot (hangdx.snapshot/3, docs/formats.md "Snapshots") through the reader
the Slurm collector uses: gen-synthetic-job writes a job of 4 hosts x 8 ranks with Megatron's
groups (TP=8 x PP=2 x DP=2, the hang in rank 13's TP group) as each node's `snapshot --frames`
output, once in /2 and once in /3; `hangdx analyze --json` of each node's frames says
collective_wait, culprit [13], group "18" of ranks 8-15, with the same stack groups (ranks,
count, the stack's frames) and the same waits-for graph's culprits, and the /3 outputs are
under 60 % of the /2 ones' bytes. Needs $HANGDX."""
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
HANGDX = os.environ["HANGDX"]
GEN = os.path.join(REPO, "scripts", "benchmarks", "gen-synthetic-job")
REAL = os.path.join(REPO, "scripts", "benchmarks", "bench-data", "gloo_collective_skip.snapshot.json")
failed = 0


def check(what, ok):
    global failed
    print("%s  %s" % ("ok  " if ok else "FAIL", what))
    failed += not ok


def stacks(doc):
    """Each stack group: its ranks, count and the frames of its class (function, file, line)."""
    strings, frames, classes = doc["strings"], doc["frames"], doc["stacks"]
    name = lambda i: None if i is None else strings[i]
    out = []
    for g in doc["groups"]:
        fr = [(name(frames[i][1]), name(frames[i][2]), frames[i][3]) for i in classes[g["stack"]]["frames"] or []]
        out.append((g["ranks"], g["count"], g["wait"], fr))
    return out


with tempfile.TemporaryDirectory() as tmp:
    docs, sizes = {}, {}
    for fmt in (2, 3):
        out = os.path.join(tmp, "f%d" % fmt)
        subprocess.run([sys.executable, GEN, "--hosts", "4", "--ranks-per-host", "8", "--layout", "8,2,2",
                        "--culprit", "13", "--format", str(fmt), "--node-output", REAL, out], check=True,
                       stdout=subprocess.DEVNULL)
        files = sorted(glob.glob(os.path.join(out, "node*.out")))
        check("/%d: 4 node outputs of frames" % fmt, len(files) == 4 and all(
            open(f).readline().startswith("hangdx.frames/1 node") for f in files))
        with open(files[0]) as f:
            first = f.readline()
        check("/%d: the frames hold hangdx.snapshot/%d" % (fmt, fmt), '"schema":"hangdx.snapshot/%d"' % fmt in first)
        sizes[fmt] = sum(os.path.getsize(f) for f in files)
        r = subprocess.run([HANGDX, "analyze", "--json", *files], capture_output=True, text=True, timeout=120)
        check("/%d: analyze exits 0 (%d)" % (fmt, r.returncode), r.returncode == 0)
        docs[fmt] = json.loads(r.stdout) if r.returncode == 0 else None
    if docs[2] and docs[3]:
        for fmt in (2, 3):
            v = docs[fmt]["verdict"]
            check("/%d: collective_wait, culprit [13], group 18 of ranks 8-15" % fmt,
                  v["class"] == "collective_wait" and v["culprit_ranks"] == [13] and v["group"] and
                  v["group"]["name"] == "18" and v["group"]["ranks"] == list(range(8, 16)))
        v2, v3 = docs[2]["verdict"], docs[3]["verdict"]
        check("the same finding and facts", (v2["finding"], v2["facts"]) == (v3["finding"], v3["facts"]))
        check("the same stack groups", stacks(docs[2]) == stacks(docs[3]) and len(stacks(docs[2])) == 2)
        w2, w3 = docs[2]["waits_for"]["ranks"], docs[3]["waits_for"]["ranks"]
        check("the same waits-for graph", w2 == w3 and 13 in w2["rank"])
        check("the same 32 ranks", docs[3]["ranks"]["rank"] == list(range(32)) == docs[2]["ranks"]["rank"])
    check("/3 outputs are under 60 %% of /2's (%d of %d bytes)" % (sizes[3], sizes[2]), sizes[3] < 0.6 * sizes[2])

print("%d check(s) failed" % failed if failed else "reduced frames: all checks passed")
sys.exit(1 if failed else 0)
