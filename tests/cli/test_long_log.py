#!/usr/bin/env python3
"""A real run's log: megabytes of training output first, the watchdog lines last, and NUL
bytes at the end where the node crashed (as on NFS or Lustre). analyze must still read it
as a job log and give the verdict of its last lines. Made from a fixture, not committed."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(HERE, "..", "fixtures", "logs", "nccl_rank_never_enqueued.log")
lines = open(src).read().splitlines(True)
want = json.loads(lines[0].split("expect:", 1)[1])
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "job.log")
    with open(path, "wb") as f:
        for i in range(20000):  # about 1.3 MB
            f.write(b"[rank%d]: iteration %d | loss 2.345 | lr 1.0e-04 | grad norm 0.51 | 12345 tokens/s\n" % (i % 4, i))
        f.write("".join(lines[1:]).encode())
        f.write(b"\0" * 4096)
    out = subprocess.run([os.environ["HANGDX"], "analyze", "--json", path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: analyze exited {out.returncode}: {out.stderr.strip()}")
    v = json.loads(out.stdout)["verdict"]
    ok = v["class"] == want["class"] and sorted(v["culprit_ranks"]) == sorted(want["culprit_ranks"])
    print(("ok" if ok else "FAIL") + f": a 1.3 MB log with NULs at its end: {v['class']} {v['culprit_ranks']}")
    sys.exit(0 if ok else 1)
