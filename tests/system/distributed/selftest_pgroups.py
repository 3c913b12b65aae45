#!/usr/bin/python3
"""Self-test of the process-group hangs (pgroups.py, pgroup_cases.CASES), without hangdx:
every case hangs the way its spec says, so that a hangdx test that fails on one fails
because of hangdx.

The cases start a wave at a time (at most 12 ranks importing torch at once; an 8-rank case
alone), and stay hung until the end; dead_rank's rank 1 is then SIGKILLed. Then, as
selftest_hangs.py does for hangs.py (its checks are reused): every rank is alive, its log
has no Python exception, its main thread sleeps in the kind of wait its spec says (futex
for gloo, clock_nanosleep for a sleeping culprit), its CPU time stays flat, its main
thread's Python stack (faulthandler, SIGUSR1) has the expected frames, and it still waits
the same way after the dump. And for dead_rank: rank 1 is gone, ranks 0 and 2 still wait
(gloo did not fail them), its socket holder is alive; after stop() nothing is left.

Exit 0 when all hold, 1 when one fails, 77 (skip) without Debian's python3-torch.

usage: /usr/bin/python3 selftest_pgroups.py [--cases a,b] [--max-ranks N] [--show-stacks]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402
import pgroup_cases  # noqa: E402  (registers the cases with launch)
import selftest_hangs as st  # noqa: E402

log = st.log


def check_dead(c, jobs):
    for job in jobs:
        for r, pid in getattr(job, "killed", {}).items():
            c.check(not launch._alive(pid) and not os.path.exists(f"/proc/{pid}"),
                    f"{job.case} rank {r} (pid {pid}) is gone after SIGKILL", launch.proc_state(pid))
            h = pgroup_cases.holder_pid(job)
            c.check(h is not None and launch._alive(h),
                    f"{job.case}: rank {r}'s socket holder (pid {h}) is alive", h and launch.proc_state(h))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", help="comma-separated cases (default: all)")
    ap.add_argument("--max-ranks", type=int, default=12, help="ranks starting at once")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds for a wave to be ready")
    ap.add_argument("--show-stacks", action="store_true")
    a = ap.parse_args()
    st.need_torch()
    cases = a.cases.split(",") if a.cases else list(pgroup_cases.CASES)
    unknown = [x for x in cases if x not in pgroup_cases.CASES]
    if unknown:
        sys.exit(f"unknown cases: {unknown}; known: {', '.join(pgroup_cases.CASES)}")

    t0 = time.monotonic()
    cpu0 = os.times()
    c = st.Checker()
    jobs, holders = [], []
    try:
        jobs = pgroup_cases.start(cases, max_starting_ranks=a.max_ranks, timeout=a.timeout)
        for job in jobs:
            log(f"{job.case}: ready {job.ready_at - t0:5.1f} s after the start; ranks {job.pids}"
                + (f"; killed {job.killed}" if job.killed else ""))
        holders = [h for h in (pgroup_cases.holder_pid(j) for j in jobs) if h]
        log(f"{len(jobs)} cases, {sum(len(j.pids) for j in jobs)} ranks up after "
            f"{time.monotonic() - t0:.1f} s; load average {os.getloadavg()[0]:.1f}")

        check_dead(c, jobs)
        st.check_waits(c, jobs, "before the stack dump")
        shares = st.check_cpu(c, jobs)
        stacks = st.check_stacks(c, [j for j in jobs], a.show_stacks)
        time.sleep(0.5)
        st.check_waits(c, jobs, "after the stack dump")
        check_dead(c, jobs)

        print("\ncase                 id    rank  wait   cpu    main-thread Python stack (innermost first)")
        for job in jobs:
            for r in sorted(set(job.ranks) | set(job.killed)):
                if r in job.killed:
                    print(f"{job.case:20} {job.spec['id']:5} {r:4}  killed (pid {job.killed[r]})")
                    continue
                s = stacks.get((job.case, r), [])
                s = s[:s.index("main")] if "main" in s else s
                print(f"{job.case:20} {job.spec['id']:5} {r:4}  {job.spec['wait'][r]:6} "
                      f"{shares.get((job.case, r), float('nan')):5.0%}  {' <- '.join(s)}")
    except launch.LaunchError as e:
        c.check(False, f"start: {e}")
    finally:
        launch.stop_all()
    leftover = [p for j in jobs for p in j.pids.values() if launch._alive(p)]
    leftover += [h for h in holders if launch._alive(h)]
    c.check(not leftover, "every rank (and socket holder) is gone after stop()", leftover)

    wall = time.monotonic() - t0
    cpu1 = os.times()
    child_cpu = (cpu1.children_user + cpu1.children_system) - (cpu0.children_user + cpu0.children_system)
    log(f"wall time {wall:.1f} s; ranks' CPU {child_cpu:.1f} s ({child_cpu / wall:.2f} cores on average, "
        f"{os.cpu_count()} here); load average {os.getloadavg()[0]:.1f}")
    if c.failures:
        print(f"\n{len(c.failures)} check(s) failed:")
        for f in c.failures:
            print(f"  - {f}")
        return 1
    print("all process-group cases hang as they claim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
