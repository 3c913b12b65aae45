"""The process-group hangs of pgroups.py: what each case makes, and what hangdx must say.

    import pgroup_cases                        # registers the cases with launch
    jobs = pgroup_cases.start(["subgroups"])   # hung (and dead_rank's rank 1 killed) on return
    ...
    launch.stop_all()

Importing this module adds CASES to launch.CASES (in this process only; each spec names
pgroups.py as its script), so launch.spawn_case / wait_ready_all / Job work on them as on
hangs.py's. selftest_hangs.py and test_verdicts.py do not import it and do not see them.

Each spec, besides launch's fields (world_size, expect, culprits, stacks, wait):
  group      the ranks of the group the verdict must name (verdict.group.ranks)
  group_any  instead of group: any of these groups will do (a cycle through several)
  role       verdict.group.role where the stand-in parallel_state gives roles ("tp",
             "pp", "dp"); None for plain new_group groups
  waits      {rank: (ranks it waits for, kind)}: the waits-for graph the case makes,
             for the reader and for the report (not asserted edge by edge)
  kill       ranks the test SIGKILLs once the hang exists (dead_rank)
  words      regular expressions (case-insensitive) the verdict's summary must match
  no_words   ... and must not
  text_words ... that the text report (inspect without --json) must match
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402

PGROUPS = os.path.join(launch.HERE, "pgroups.py")
HOLDER_PID_FILE = "socket-holder.pid"  # as pgroups.py writes it

_AG_TP = ["all_gather", "tp_all_gather"]
_AR_DP = ["all_reduce", "dp_all_reduce_grads"]
_AR_SUB = ["all_reduce", "subgroup_all_reduce"]
_BAR = ["barrier", "step_barrier"]
_SLEEP = ["skip_and_sleep"]

CASES = {
    "subgroups": dict(
        id="G1", world_size=4, expect="collective_wait", culprits=[3], group=[2, 3], role=None,
        waits={0: ([2, 3], "collective"), 1: ([2, 3], "collective"), 2: ([3], "collective")},
        stacks={0: _BAR, 1: _BAR, 2: ["all_gather", "all_gather_shards"], 3: _SLEEP},
        wait={0: "gloo", 1: "gloo", 2: "gloo", 3: "sleep"}),
    "tp_dp_world": dict(
        id="G2", world_size=8, expect="collective_wait", culprits=[5], group=[4, 5], role="tp",
        tp_groups=[[0, 1], [2, 3], [4, 5], [6, 7]],
        waits={**{r: ([4, 5, 6, 7], "collective") for r in range(4)},
               4: ([5], "collective"), 6: ([4], "collective"), 7: ([5], "collective")},
        stacks={0: _BAR, 1: _BAR, 2: _BAR, 3: _BAR, 4: _AG_TP, 5: _SLEEP, 6: _AR_DP, 7: _AR_DP},
        wait={**{r: "gloo" for r in range(8)}, 5: "sleep"}),
    "peer_moved_on": dict(
        id="G3", world_size=4, expect="collective_wait", culprits=[1], group=[0, 1], role="tp",
        waits={0: ([1], "mismatch"), 1: ([0, 2], "collective"), 2: ([0], "collective"),
               3: ([0, 2], "collective")},
        stacks={0: _AG_TP, 1: _BAR, 2: _AR_DP, 3: _BAR},
        wait={r: "gloo" for r in range(4)}),
    "pipeline_behind_tp": dict(
        id="G4", world_size=4, expect="collective_wait", culprits=[0], group=[0, 1], role="tp",
        waits={1: ([0], "collective"), 2: ([0], "p2p"), 3: ([1], "p2p")},
        stacks={0: ["slow_data_loader"], 1: _AG_TP, 2: ["_communicate", "recv_forward"],
                3: ["_communicate", "recv_forward"]},
        wait={0: "sleep", 1: "gloo", 2: "gloo", 3: "gloo"}),
    "tp_mismatch": dict(
        id="G5", world_size=4, expect="collective_wait", culprits=[2, 3], group=[2, 3], role="tp",
        waits={0: ([2, 3], "collective"), 1: ([2, 3], "collective"), 2: ([3], "mismatch"),
               3: ([2], "mismatch")},
        stacks={0: _BAR, 1: _BAR, 2: _AG_TP, 3: ["broadcast", "tp_broadcast"]},
        wait={r: "gloo" for r in range(4)}),
    "pp_cycle": dict(
        id="G6", world_size=4, expect="p2p_mismatch", culprits=[0, 2], group=[0, 2], role="pp",
        waits={0: ([2], "p2p"), 2: ([0], "p2p"), 1: ([0], "collective"), 3: ([2], "collective")},
        stacks={0: ["send", "send_activations_blocking"], 1: _AR_DP,
                2: ["send", "send_grads_blocking"], 3: _AR_DP},
        wait={r: "gloo" for r in range(4)}),
    "batched_p2p": dict(
        id="G7", world_size=4, expect="p2p_mismatch", culprits=[0, 2], group=[0, 2], role="pp",
        waits={0: ([2], "p2p"), 1: ([0], "collective"), 2: ([0], "collective"), 3: ([0], "collective")},
        stacks={0: ["_communicate", "send_forward"], 1: _BAR, 2: _BAR, 3: _BAR},
        wait={r: "gloo" for r in range(4)}),
    "unsorted_subgroups": dict(
        id="G8", world_size=4, expect="collective_wait", culprits=[2], group=[1, 2], role=None,
        waits={1: ([2], "collective"), 0: ([1, 2], "collective"), 3: ([1, 2], "collective")},
        stacks={0: _BAR, 1: _AR_SUB, 2: _SLEEP, 3: _BAR},
        wait={0: "gloo", 1: "gloo", 2: "sleep", 3: "gloo"}),
    "gather_skip": dict(
        id="G9", world_size=3, expect="collective_wait", culprits=[2], group=[0, 1, 2], role=None,
        waits={0: ([2], "collective"), 1: ([0, 2], "collective")},
        stacks={0: ["gather", "gather_metrics"], 1: _BAR, 2: _SLEEP},
        wait={0: "gloo", 1: "gloo", 2: "sleep"}),
    "scatter_skip": dict(
        id="G9s", world_size=3, expect="collective_wait", culprits=[2], group=[0, 1, 2], role=None,
        waits={0: ([2], "collective"), 1: ([0, 2], "collective")},
        stacks={0: ["scatter", "scatter_shards"], 1: _BAR, 2: _SLEEP},
        wait={0: "gloo", 1: "gloo", 2: "sleep"}),
    "order_cycle": dict(
        id="G10", world_size=4, expect="collective_wait", culprits=[0, 1, 2],
        group_any=[[0, 1], [1, 2], [0, 2]], role=None, words=[r"cycle"],
        waits={0: ([1], "collective"), 1: ([2], "collective"), 2: ([0], "collective"),
               3: ([0, 1, 2], "collective")},
        stacks={0: _AR_SUB, 1: _AR_SUB, 2: _AR_SUB, 3: _BAR},
        wait={r: "gloo" for r in range(4)}),
    "tag_mismatch": dict(
        id="G11", world_size=3, expect="p2p_mismatch", culprits=[0, 1], group=[0, 1], role=None,
        words=[r"tag\D{0,16}1\b", r"tag\D{0,16}2\b"], no_words=[r"cycle"],
        waits={0: ([1], "p2p"), 1: ([0], "p2p"), 2: ([0, 1], "collective")},
        stacks={0: ["send", "send_tagged"], 1: ["recv", "recv_tagged"], 2: _BAR},
        wait={r: "gloo" for r in range(3)}),
    "dead_rank": dict(
        id="G12", world_size=3, expect="collective_wait", culprits=[1], group=[0, 1, 2], role=None,
        kill=[1], text_words=[r"rank 1\b[^\n]*\b(dead|gone|died|exited|killed|no longer|missing)"
                              r"|\b(dead|gone|died|exited|killed|missing)\b[^\n]*\brank 1\b"],
        waits={0: ([1], "collective"), 2: ([1], "collective")},
        # before the kill: rank 1 in forward_step (a sleep loop)
        stacks={0: ["all_reduce", "train_step"], 1: ["forward_step"], 2: ["all_reduce", "train_step"]},
        wait={0: "gloo", 1: "sleep", 2: "gloo"}),
}
for _spec in CASES.values():
    _spec["script"] = PGROUPS
launch.CASES.update(CASES)


def start(names, max_starting_ranks=12, timeout=180.0):
    """Start the cases `names` a wave at a time (at most max_starting_ranks ranks importing
    torch at once on a small machine; an 8-rank case goes alone) and return their jobs
    once each hangs; then SIGKILL each job's `kill` ranks (see kill_ranks). On a failure,
    stops every job started here and raises launch.LaunchError."""
    jobs, wave, pending = [], [], list(names)
    try:
        while pending or wave:
            if pending and (not wave or sum(CASES[n]["world_size"] for n in wave) +
                            CASES[pending[0]]["world_size"] <= max_starting_ranks):
                wave.append(pending.pop(0))
                continue
            started = [launch.spawn_case(n) for n in wave]
            jobs += started
            launch.wait_ready_all(started, timeout=timeout, grace=1.0)
            wave = []
        for job in jobs:
            kill_ranks(job)
    except BaseException:
        for job in jobs:
            job.stop()
        raise
    return jobs


def kill_ranks(job, settle=2.0):
    """SIGKILL the ranks of job.spec["kill"] and reap them: they leave job.pids and job.ranks
    (job.killed keeps {rank: pid}; job.procs keeps them for stop(), which kills their process
    groups, socket holder included). Then `settle` seconds for the peers to notice (they must
    not: they must go on waiting)."""
    job.killed = {}
    for r in job.spec.get("kill", []):
        pid = job.pids.pop(r)
        job.ranks.remove(r)
        os.kill(pid, signal.SIGKILL)
        job.procs[r].wait(timeout=30)
        job.killed[r] = pid
    if job.killed:
        time.sleep(settle)


def holder_pid(job):
    """The pid of dead_rank's socket holder (None if it wrote none)."""
    try:
        with open(os.path.join(job.dir, HOLDER_PID_FILE)) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
