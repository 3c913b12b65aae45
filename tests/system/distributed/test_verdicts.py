#!/usr/bin/python3
"""hangdx inspect on every real distributed hang of launch.CASES (gloo, localhost): the
class, the culprit ranks and the missing ranks it must give. All cases hang at once, each
on its own port; more checks reuse them:
  - live and post-mortem agree: `hangdx snapshot` of each case, then the ranks are killed,
    then `hangdx analyze` of the snapshot gives the verdict inspect gave;
  - a single rank's pid brings its sibling ranks (collective_skip, from rank 0 alone);
  - a launcher's pid brings its ranks (a case started under `hangdx run`);
  - the verdicts name where the culprit is (its Python function).
Needs $HANGDX; skips (77) without Debian's python3-torch."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402

HANGDX = os.environ.get("HANGDX")
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def inspect(pids):
    out = subprocess.run([HANGDX, "inspect", "--json"] + [str(p) for p in pids],
                         capture_output=True, text=True, timeout=120)
    try:
        return json.loads(out.stdout)
    except ValueError:
        print(out.stderr[-3000:])
        return {"verdict": {"class": f"(no JSON, exit {out.returncode})", "culprit_ranks": [], "summary": ""}}


def straggler(v):
    """A healthy job caught at an instant where a rank waits for one that computes (a
    straggler): hangdx says so itself, a collective_wait whose culprit is working."""
    return v["class"] == "collective_wait" and v.get("culprit_working") is True


def inspect_healthy(pids):
    """A healthy job (expect not_hung), inspected up to 3 times: one that computes can be
    caught once in a while with a rank waiting for a slower one (under load, longer than the
    samples' window); each such verdict must say its culprit works, and a later look not_hung."""
    for _ in range(3):
        report = inspect(pids)
        v = report["verdict"]
        if not straggler(v):
            return report
        print(f"      a straggler at this instant ({v['culprit_ranks']} computing); looking again")
    return report


def check_case(name, report, spec):
    v = report["verdict"]
    check(v["class"] == spec["expect"], f"{name}: class {v['class']} (want {spec['expect']})")
    check(sorted(v["culprit_ranks"]) == sorted(spec["culprits"]),
          f"{name}: culprit ranks {v['culprit_ranks']} (want {spec['culprits']})")
    if "missing" in spec:
        check(sorted(v["missing_ranks"]) == sorted(spec["missing"]),
              f"{name}: missing ranks {v['missing_ranks']} (want {spec['missing']})")
    if v["class"] != spec["expect"]:
        print("      summary:", v["summary"])


def snapshot(pids, path):
    out = subprocess.run([HANGDX, "snapshot", "-o", path] + [str(p) for p in pids],
                         capture_output=True, text=True, timeout=120)
    return out.returncode in (0, 1) and os.path.exists(path)


def analyze(path):
    out = subprocess.run([HANGDX, "analyze", "--json", path], capture_output=True, text=True, timeout=120)
    try:
        return json.loads(out.stdout)
    except ValueError:
        print(out.stderr[-3000:])
        return {"verdict": {"class": f"(no JSON, exit {out.returncode})", "culprit_ranks": [], "summary": ""}}


def start_under_run(case, tmp):
    """A case launched by `hangdx run -- launch.py CASE`: the launcher is hangdx run."""
    p = subprocess.Popen([HANGDX, "run", "-d", os.path.join(tmp, "traces"), "--", launch.PYTHON,
                          os.path.join(launch.HERE, "launch.py"), case],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    for line in p.stdout:
        if "hung;" in line or time.monotonic() > deadline:
            break
    return p


def main():
    if not HANGDX:
        sys.exit("test_verdicts.py: set HANGDX to the hangdx binary")
    if not os.path.exists(launch.PYTHON) or subprocess.run(
            [launch.PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode:
        print("skipped: Debian's python3-torch is not installed (scripts/setup installs it)")
        sys.exit(77)
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="hdx-verdicts-")
    snapshots = {}
    launcher = start_under_run("collective_skip", tmp)
    jobs = [launch.spawn_case(c) for c in launch.CASES]
    try:
        launch.wait_ready_all(jobs)
        print(f"{len(jobs)} cases hung after {time.monotonic() - t0:.0f} s", flush=True)
        snapshots = {}
        for job in jobs:
            pids = sorted(job.pids.values())
            report = inspect_healthy(pids) if job.spec["expect"] == "not_hung" else inspect(pids)
            check_case(job.case, report, job.spec)
            path = os.path.join(tmp, job.case + ".snapshot.json")
            check(snapshot(sorted(job.pids.values()), path), f"{job.case}: snapshot written")
            snapshots[job.case] = (path, report["verdict"])
            if job.case == "collective_skip":
                check("skip_and_sleep" in report["verdict"]["summary"],
                      "collective_skip: the culprit is shown in skip_and_sleep"
                      f" (summary: {report['verdict']['summary']!r})")
                alone = inspect([job.pids[0]])
                check_case("collective_skip from rank 0 alone (siblings)", alone, job.spec)
        # Two jobs in one inspection (as inspect --all on a shared host): the 3-rank job whose
        # rank 0 waits on a stale build lock is set aside, and its lock decides nothing; the
        # verdict is the 4-rank barrier_skip job's, culprit its rank 0.
        by_case = {job.case: job for job in jobs}
        locked, skip = by_case["lock_behind_barrier"], by_case["barrier_skip"]
        both = inspect(sorted(locked.pids.values()) + sorted(skip.pids.values()))
        v = both["verdict"]
        check(v["class"] == "collective_wait" and v["culprit_ranks"] == [0] and v["culprit_pids"] == [skip.pids[0]],
              f"lock_behind_barrier + barrier_skip inspected together: {v['class']} {v['culprit_ranks']} "
              f"pids {v['culprit_pids']} (want collective_wait [0] pids [{skip.pids[0]}], the larger job's)")
        check(any("3 rank processes of other jobs" in n for n in both.get("notes", [])),
              "the note says the 3 rank processes of the other job were set aside")
        check(launcher.poll() is None, "the case under hangdx run is up")
        check_case("collective_skip from its launcher (hangdx run)", inspect([launcher.pid]),
                   launch.CASES["collective_skip"])
    finally:
        launch.stop_all()
        try:
            os.killpg(launcher.pid, 15)
        except ProcessLookupError:
            pass
        launcher.wait(timeout=30)
    # The job is gone: the snapshots alone must give what inspect gave live.
    # (A healthy job's snapshot is an instant of its own: a straggler there, said as such, is
    # what it saw.)
    for case, (path, live) in snapshots.items():
        post = analyze(path)["verdict"]
        if live["class"] == "not_hung" and straggler(post):
            post = live
        check(post["class"] == live["class"] and sorted(post["culprit_ranks"]) == sorted(live["culprit_ranks"]),
              f"{case}: after the kill, analyze of the snapshot says {post['class']} {post['culprit_ranks']} "
              f"(live: {live['class']} {live['culprit_ranks']})")
    print(f"{len(failures)} failed, in {time.monotonic() - t0:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
