#!/usr/bin/python3
"""Busy or blocked, at load 8 on this machine's CPUs: 20 `hangdx inspect --json` of the
3-rank collective_skip hang (ranks 0 and 1 wait in all_reduce, rank 2 sleeps instead) while
8 CPU burners run. A waiting rank's gloo and torch threads tick a few ms now and then; that
must never read as progress. Every inspect must give the same verdict: collective_wait,
culprit [2], the same confidence, and no rank marked progressing.
Needs $HANGDX; skips (77) without Debian's python3-torch."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import launch  # noqa: E402
import report_frames  # noqa: E402  (a report's processes as objects)

HANGDX = os.environ.get("HANGDX")
BURNERS = 8
INSPECTS = 20


def main():
    if not HANGDX:
        sys.exit("test_load.py: set HANGDX to the hangdx binary")
    if subprocess.run([launch.PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode:
        print("skipped: Debian's python3-torch is not installed (scripts/setup installs it)")
        sys.exit(77)
    failures = []
    burners = []
    with launch.start_case("collective_skip") as job:
        try:
            burners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(BURNERS)]
            seen = []
            for i in range(INSPECTS):
                out = subprocess.run([HANGDX, "inspect", "--json"] + [str(p) for p in job.pids.values()],
                                     capture_output=True, text=True, timeout=300)
                try:
                    r = report_frames.loads(out.stdout)
                except ValueError:
                    failures.append(f"inspect {i + 1}: no JSON (exit {out.returncode}): {out.stderr[-500:]}")
                    continue
                v = r["verdict"]
                busy = sorted(p["rank"] for p in r["processes"] if p.get("progressing") and p.get("rank") is not None)
                got = (v["class"], v["culprit_ranks"], v["confidence"], busy)
                seen.append(got)
                ok = got[:2] == ("collective_wait", [2]) and not busy and got[2] == seen[0][2]
                print(("ok    " if ok else "FAIL  ") + f"inspect {i + 1} at load {os.getloadavg()[0]:.1f}: "
                      f"{got[0]} {got[1]} ({got[2]}), ranks progressing: {busy}", flush=True)
                if not ok:
                    failures.append(f"inspect {i + 1}: {got}; summary: {v['summary']}")
        finally:
            for b in burners:
                b.kill()
                b.wait()
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
