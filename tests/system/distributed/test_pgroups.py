#!/usr/bin/python3
"""hangdx on real hangs of jobs with process groups (pgroups.py: plain subgroups and a
stand-in of Megatron's parallel_state with TP/PP/DP groups; gloo, localhost): for each case
of pgroup_cases.CASES, `hangdx inspect --json` of its ranks' pids must give
  verdict.class, verdict.culprit_ranks (exact), verdict.group.ranks (the group the hang is
  in; order_cycle: any group of its cycle) and, where the stand-in gives roles,
  verdict.group.role ("tp", "pp", "dp"); the words a case names (tag_mismatch's tags,
  order_cycle's cycle) in verdict.summary;
and also:
  - tp_dp_world: the report's process_groups has the four TP groups, role "tp", with their
    ranks;
  - dead_rank (rank 1 SIGKILLed; inspected from the live ranks 0 and 2): the text report
    (inspect without --json) says rank 1 is dead or gone;
  - every case: `hangdx snapshot` while it hangs, the job killed, `hangdx analyze` of the
    snapshot gives the same class, culprits and group;
  - subgroups: gcore cores of its 4 ranks, analyzed after the kill, give them too (the
    Python reader on cores).
The cases start a wave at a time (at most 12 ranks importing torch at once) and all stay
hung until the snapshots are taken. Every mismatch is printed with the case, what was
expected and what came; a table at the end puts them side by side. The waits-for graph
each case makes (pgroup_cases' `waits`) is printed beside the report's waits_for, for the
reader; not asserted.

Needs $HANGDX; skips (77) without Debian's python3-torch.
usage: /usr/bin/python3 test_pgroups.py [--cases a,b] [--max-ranks N] [--show-json]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402
import pgroup_cases  # noqa: E402  (registers the cases with launch)

HANGDX = os.environ.get("HANGDX")
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run_hangdx(args, timeout=180):
    try:
        out = subprocess.run([HANGDX] + args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"hangdx {' '.join(args[:2])} ran past {timeout} s"
    return out, None


def json_report(args):
    """(report dict, None) or (None, why there is none)."""
    out, err = run_hangdx(args)
    if err:
        return None, err
    try:
        return json.loads(out.stdout), None
    except ValueError:
        return None, f"no JSON (exit {out.returncode}); stderr: {out.stderr.strip()[-1500:]!r}"


def fmt_group(g):
    if not isinstance(g, dict):
        return repr(g)
    role = g.get("role")
    return f"{g.get('ranks')}" + (f" role {role}" if role else "") + (f" ({g['name']})" if g.get("name") else "")


def want_text(spec):
    g = spec.get("group") or " or ".join(map(str, spec.get("group_any", [])))
    return (f"{spec['expect']} culprits {spec['culprits']} group {g}"
            + (f" role {spec['role']}" if spec.get("role") else ""))


def got_text(report, why=None):
    if report is None:
        return f"(none: {why})"
    v = report.get("verdict") or {}
    g = v.get("group")
    return f"{v.get('class')} culprits {v.get('culprit_ranks')} group {fmt_group(g) if g is not None else '-'}"


def check_verdict(name, report, spec, why=None):
    """The verdict against the spec, one check line per field."""
    if not check(report is not None and isinstance(report.get("verdict"), dict),
                 f"{name}: a report with a verdict ({why or 'ok'})"):
        return
    v = report["verdict"]
    check(v.get("class") == spec["expect"], f"{name}: class {v.get('class')} (want {spec['expect']})")
    got_culprits = sorted(v.get("culprit_ranks") or [])
    check(got_culprits == sorted(spec["culprits"]),
          f"{name}: culprit ranks {got_culprits} (want {sorted(spec['culprits'])})")
    g = v.get("group")
    if spec.get("group") is not None or spec.get("group_any"):
        allowed = [sorted(spec["group"])] if spec.get("group") is not None else [sorted(x) for x in spec["group_any"]]
        want = allowed[0] if len(allowed) == 1 else " or ".join(map(str, allowed))
        if not isinstance(g, dict):
            check(False, f"{name}: verdict.group {'is absent' if g is None and 'group' not in v else repr(g)} "
                         f"(want ranks {want})")
        else:
            ranks = sorted(g.get("ranks") or [])
            check(ranks in allowed, f"{name}: verdict.group.ranks {ranks} (want {want})")
            if spec.get("role"):
                check(g.get("role") == spec["role"], f"{name}: verdict.group.role {g.get('role')!r} "
                                                     f"(want {spec['role']!r})")
    summary = v.get("summary") or ""
    for w in spec.get("words", []):
        check(re.search(w, summary, re.I) is not None, f"{name}: the summary matches /{w}/i (summary: {summary!r})")
    for w in spec.get("no_words", []):
        check(re.search(w, summary, re.I) is None, f"{name}: the summary does not match /{w}/i (summary: {summary!r})")
    if v.get("class") != spec["expect"] or got_culprits != sorted(spec["culprits"]):
        print(f"      summary: {summary}")


def check_tp_groups(name, report, spec):
    """process_groups lists each TP group with role "tp" and its ranks."""
    pgs = report.get("process_groups") if report else None
    if not check(isinstance(pgs, list), f"{name}: the report has process_groups "
                                        f"({'absent' if pgs is None else type(pgs).__name__})"):
        return
    for ranks in spec["tp_groups"]:
        hits = [p for p in pgs if isinstance(p, dict) and sorted(p.get("ranks") or []) == ranks]
        check(any(p.get("role") == "tp" for p in hits),
              f"{name}: process_groups has TP group {ranks} with role 'tp' "
              f"(groups with those ranks: {[(p.get('name'), p.get('desc'), p.get('role')) for p in hits]})")


def show_waits(name, report, spec):
    """The waits-for graph of the case beside the report's (for the reader)."""
    got = {}
    graph = (report or {}).get("waits_for") or []
    if isinstance(graph, dict):  # hangdx.report/2: columns, and whom each call waits for (docs/formats.md "Reports")
        nodes, calls = graph.get("ranks") or {}, graph.get("calls") or []
        peers = {}
        for rank, _op, peer, _tag, matched in graph.get("p2p") or []:
            if not matched and peer is not None:
                peers.setdefault(rank, []).append(peer)
        for rank, holder in graph.get("lock_holders") or []:
            peers.setdefault(rank, []).append(holder)
        for i, r in enumerate(nodes.get("rank") or []):
            c = nodes["call"][i]
            absent = [x for a, b in calls[c]["absent"] for x in range(a, b + 1)] if c is not None else []
            got[r] = (sorted(absent + peers.get(r, [])), nodes["kind"][i], nodes["op"][i], nodes["group"][i])
    for w in graph if isinstance(graph, list) else []:  # hangdx.report/1
        if isinstance(w, dict) and "rank" in w:
            got[w["rank"]] = (sorted(w.get("waits_for") or []), w.get("kind"), w.get("op"), w.get("group"))
    for r in sorted(set(spec["waits"]) | set(got)):
        want = spec["waits"].get(r)
        want_s = f"{want[0]} {want[1]}" if want else "-"
        have = got.get(r)
        have_s = f"{have[0]} {have[1]} {have[2]} {have[3]}" if have else "-"
        print(f"      waits-for rank {r}: case {want_s:28} report {have_s}")


def check_text(name, pids, spec):
    out, err = run_hangdx(["inspect"] + [str(p) for p in pids])
    text = (out.stdout if out else "") or ""
    for w in spec.get("text_words", []):
        check(re.search(w, text, re.I) is not None,
              f"{name}: the text report matches /{w}/i" + ("" if text else f" ({err or 'no text'})"))
    if not all(re.search(w, text, re.I) for w in spec.get("text_words", [])):
        print("      text report, first lines:\n        " + "\n        ".join(text.splitlines()[:12]))


CORE_CASE = "subgroups"  # its 4 ranks' cores (about 2.3 GB, 15 s of gcore) are judged too


def dump_cores(job, tmp):
    """gcore every rank of job (each is stopped for its dump, and goes on waiting); the paths."""
    paths = []
    for rank, pid in sorted(job.pids.items()):
        prefix = os.path.join(tmp, f"core-rank{rank}")
        out = subprocess.run(["gcore", "-o", prefix, str(pid)], capture_output=True, text=True, timeout=300)
        path = f"{prefix}.{pid}"
        check(out.returncode == 0 and os.path.exists(path), f"{job.case}: gcore of rank {rank} (pid {pid})"
              + ("" if out.returncode == 0 else f": {out.stderr.strip()[-300:]}"))
        if os.path.exists(path):
            paths.append(path)
    return paths


def need_torch():
    if not os.path.exists(launch.PYTHON) or subprocess.run(
            [launch.PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
            capture_output=True).returncode:
        print("skipped: Debian's python3-torch is not installed (scripts/setup installs it)")
        sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", help="comma-separated cases (default: all)")
    ap.add_argument("--max-ranks", type=int, default=12, help="ranks starting at once")
    ap.add_argument("--show-json", action="store_true", help="print each inspect verdict's JSON")
    a = ap.parse_args()
    if not HANGDX:
        sys.exit("test_pgroups.py: set HANGDX to the hangdx binary")
    need_torch()
    cases = a.cases.split(",") if a.cases else list(pgroup_cases.CASES)
    unknown = [x for x in cases if x not in pgroup_cases.CASES]
    if unknown:
        sys.exit(f"unknown cases: {unknown}; known: {', '.join(pgroup_cases.CASES)}")

    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="hdx-pgroups-")
    live, post, snapshots, cores = {}, {}, {}, {}
    try:
        jobs = pgroup_cases.start(cases, max_starting_ranks=a.max_ranks)
        print(f"{len(jobs)} cases hung after {time.monotonic() - t0:.0f} s", flush=True)
        for job in jobs:
            spec = job.spec
            pids = sorted(job.pids.values())
            print(f"--- {job.case} ({spec['id']}): ranks {job.pids}"
                  + (f", killed {job.killed}" if job.killed else "") + f"; want {want_text(spec)}", flush=True)
            dead = [r for r, p in job.pids.items() if not launch._alive(p)]
            check(not dead, f"{job.case}: the fixture holds: every rank that should wait is alive"
                            + (f" (dead: {dead}; logs: {[job.log(r)[-600:] for r in dead]})" if dead else ""))
            report, why = json_report(["inspect", "--json"] + [str(p) for p in pids])
            live[job.case] = (report, why)
            if a.show_json and report:
                print(json.dumps(report.get("verdict"), indent=2))
            check_verdict(f"{job.case} (inspect)", report, spec, why)
            show_waits(job.case, report, spec)
            if spec.get("tp_groups"):
                check_tp_groups(job.case, report, spec)
            if spec.get("text_words"):
                check_text(job.case, pids, spec)
            if job.case == CORE_CASE and shutil.which("gcore"):
                cores[job.case] = dump_cores(job, tmp)
            path = os.path.join(tmp, job.case + ".snapshot.json")
            out, err = run_hangdx(["snapshot", "-o", path] + [str(p) for p in pids])
            ok = out is not None and out.returncode in (0, 1) and os.path.exists(path)
            check(ok, f"{job.case}: snapshot written" + ("" if ok else f" ({err or out.stderr.strip()[-500:]})"))
            if ok:
                snapshots[job.case] = path
    except launch.LaunchError as e:
        check(False, f"start: {e}")
    finally:
        launch.stop_all()
    # The jobs are gone: each snapshot alone must give the verdict.
    for case, path in snapshots.items():
        report, why = json_report(["analyze", "--json", path])
        post[case] = (report, why)
        check_verdict(f"{case} (analyze after the kill)", report, pgroup_cases.CASES[case], why)

    # Cores of every rank (gcore), after the job is gone: the same verdict and group.
    for case, paths in cores.items():
        report, why = json_report(["analyze", "--json"] + paths)
        check_verdict(f"{case} (analyze of the gcore cores)", report, pgroup_cases.CASES[case], why)
        for c in paths:
            os.unlink(c)

    print("\ncase                 want / inspect / analyze after the kill")
    for case in cases:
        print(f"{case:20} want     {want_text(pgroup_cases.CASES[case])}")
        print(f"{'':20} inspect  {got_text(*live.get(case, (None, 'not run')))}")
        print(f"{'':20} analyze  {got_text(*post.get(case, (None, 'not run')))}")
    print(f"{len(failures)} failed, in {time.monotonic() - t0:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
