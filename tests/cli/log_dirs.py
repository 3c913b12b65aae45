#!/usr/bin/python3
"""Lay out per-rank log directories as launchers leave them, from a combined log fixture of
tests/fixtures/logs (its [rankN]: lines split by rank, the prefix removed):
  log_dirs.py torchrun FIXTURE DIR/RUN ATTEMPT   DIR/RUN/attempt_<n>/<local_rank>/stderr.log, an
                                                 empty stdout.log beside it (torchrun --log-dir)
  log_dirs.py slurm FIXTURE DIR NAME             DIR/<NAME with %t replaced by the rank> (srun -o)
  log_dirs.py keep FIXTURE DIR/RUN ATTEMPT SHIFT as torchrun, with the prefixes kept and rank r in
                                                 local rank directory (r + SHIFT) % world"""
import os, re, sys


def by_rank(fixture):
    ranks = {}
    with open(fixture) as f:
        for line in f.read().splitlines()[1:]:  # the "# expect:" line is the fixture's own
            m = re.match(r"\[rank(\d+)\]:(.*)", line)
            if m:
                ranks.setdefault(int(m.group(1)), []).append((m.group(2), line))
    return ranks


how, fixture, out = sys.argv[1:4]
ranks = by_rank(fixture)
for rank, lines in sorted(ranks.items()):
    if how == "slurm":
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, sys.argv[4].replace("%t", str(rank)))
        text = [bare for bare, _ in lines]
    else:
        local = rank if how == "torchrun" else (rank + int(sys.argv[5])) % len(ranks)
        d = os.path.join(out, "attempt_" + sys.argv[4], str(local))
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "stdout.log"), "w").close()
        path = os.path.join(d, "stderr.log")
        text = [bare if how == "torchrun" else whole for bare, whole in lines]
    with open(path, "w") as f:
        f.write("\n".join(text) + "\n")
