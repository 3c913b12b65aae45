#!/usr/bin/python3
"""Record the real foreign-dump fixtures of tests/foreign/fixtures/ from real gloo hangs.

usage: /usr/bin/python3 make_fixtures.py OUTDIR

Starts tests/distributed/hangs.py's collective_skip (ranks 0 and 1 in all_reduce from
train_step, rank 2 in time.sleep from skip_and_sleep) and both_recv (two stages that both
recv), then writes:
  gdb-rank0.txt        gdb -batch -ex 'thread apply all bt' -ex 'thread apply all py-bt' of rank 0
  eustack-rank2.txt    eu-stack -p of rank 2
  faulthandler-rank2.txt  rank 2's SIGUSR1 faulthandler dump, as it wrote it
  faulthandler-job.log the SIGUSR1 dumps of both_recv's two ranks, each line prefixed with
                       "[rankN]:" as torchrun --tee / a combined launcher log does
Not run by ctest: the fixtures are committed; rerun it by hand to record them again.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))
import launch  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return r.stdout


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with launch.start_case("collective_skip") as job:
        gdb = run(["gdb", "-p", str(job.pids[0]), "-batch", "-ex", "set pagination off",
                   "-ex", "thread apply all bt", "-ex", "thread apply all py-bt"])
        with open(os.path.join(out, "gdb-rank0.txt"), "w") as f:
            f.write(gdb)
        with open(os.path.join(out, "eustack-rank2.txt"), "w") as f:
            f.write(run(["eu-stack", "-p", str(job.pids[2])]))
        job.python_stacks()
        with open(os.path.join(out, "faulthandler-rank2.txt"), "w") as f:
            f.write(job.last_dumps[2])
    with launch.start_case("both_recv") as job:
        job.python_stacks()
        with open(os.path.join(out, "faulthandler-job.log"), "w") as f:
            for r in sorted(job.last_dumps):
                for line in job.last_dumps[r].splitlines():
                    f.write(f"[rank{r}]:{line}\n")


if __name__ == "__main__":
    main()
