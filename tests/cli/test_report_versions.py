#!/usr/bin/env python3
"""A saved report is judged as its inputs were (docs/formats.md "Reports"): for every input the
tests analyze (each fixture of tests/fixtures, the shared cases of ../shared/cases when the
checkout has them), `hangdx analyze INPUT` is compared with `hangdx analyze` of the report it
writes as hangdx.report/2, as /2 --full and as hangdx.report/1 (--schema 1): the same class,
finding, culprit ranks, missing ranks, group (name and ranks) and, from /2 on, the culprits of
the waits-for graph (a /1 report holds no job logs: of an input with logs, only /2 is). Each /2 report is also checked against the /1 report of the same input: every thread's
class holds the thread's frames as /1 writes them (but the pc, which /2 leaves out), the classes
count every thread once and name the ranks that have them, and the "ranks" table gives each
process its key thread's class. Needs $HANGDX."""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import report_frames  # noqa: E402  (a /2 report's rows as objects)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
HANGDX = os.environ["HANGDX"]
failed = 0


def inputs():
    """(name, [argv...]) for each input: a fixture file, or a fixture directory's files."""
    out = []
    for folder in ("evidence", "nccl", "nccl-h200", "snapshots", "foreign", "bounded"):
        for path in sorted(glob.glob(os.path.join(FIXTURES, folder, "*"))):
            if os.path.isfile(path) and not path.endswith((".py", ".md", "expect.json")):
                out.append((os.path.relpath(path, FIXTURES), [path]))
    out.append(("foreign/pyspy-rank0..2", sorted(glob.glob(os.path.join(FIXTURES, "foreign", "pyspy-rank*.txt")))))
    for path in sorted(glob.glob(os.path.join(FIXTURES, "fr", "*"))):
        if os.path.isdir(path):
            out.append((os.path.relpath(path, FIXTURES), [path]))
    logs = sorted(glob.glob(os.path.join(FIXTURES, "logs", "*")))
    # The shared cases sit beside the checkout (shared/cases), one or two levels up.
    for up in ("..", os.path.join("..", "..")):
        cases = os.path.join(REPO, up, "shared", "cases", "logs")
        if os.path.isdir(cases):
            logs += sorted(glob.glob(os.path.join(cases, "*")))
            break
    else:
        print("skip  the shared cases: no shared/cases beside this checkout")
    for path in logs:
        if path.endswith(".md"):
            continue
        files = sorted(glob.glob(os.path.join(path, "*"))) if os.path.isdir(path) else [path]
        out.append((os.path.relpath(path, os.path.dirname(os.path.dirname(path))), files))
    return out


def run(*argv):
    r = subprocess.run([HANGDX, *argv], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def judged(doc):
    """What must not change when a report is analyzed again."""
    v = doc["verdict"]
    g = v.get("group") or {}
    out = {"class": v["class"], "finding": v["finding"], "culprit_ranks": sorted(v["culprit_ranks"]),
           "missing_ranks": sorted(v["missing_ranks"]), "group": (g.get("name"), g.get("ranks"))}
    if doc["schema"] == "hangdx.report/2":
        nodes = doc["waits_for"]["ranks"]
        out["roots"] = sorted(r for r, c in zip(nodes["rank"], nodes["culprit"]) if c)
    return out


def number(v):
    """An offset as /1 ("0x..", null for none) or /2 (a number, "0x.." beyond 2^53) writes it."""
    return int(v, 16) if isinstance(v, str) else v or 0


def frame_key(f):
    return (f["kind"], f["function"], f["file"], f["line"] or 0, f["module"], number(f["offset"]), f["locals"])


def table_frame(doc, i):
    """Frame i of a /2 report's table as frame_key gives a /1 frame, and its pc."""
    kind, fn, file, line, mod, off, pc, local = doc["frames"][i]
    s = doc["strings"]
    return ("python" if kind else "native", s[fn] if fn is not None else None, s[file] if file is not None else None,
            line, s[mod] if mod is not None else None, number(off), local), pc


def class_frames(doc, k):
    """Class k of a /2 report: its frames and Python frames as frame_key gives them."""
    cls = doc["stacks"][k]
    return [None if cls[key] is None else [table_frame(doc, i)[0] for i in cls[key]]
            for key in ("frames", "python_frames")]


def check_classes(name, one, two):
    """two (/2) against one (/1, of the same input): a list of what disagrees."""
    bad = []
    if [(p["pid"], len(p["threads"])) for p in one["processes"]] != [(p["pid"], len(p["threads"])) for p in two["processes"]]:
        return ["the processes and their threads are not /1's"]
    counts = [0] * len(two["stacks"])
    ranks = [set() for _ in two["stacks"]]
    for p, p1 in zip(two["processes"], one["processes"]):  # in the evidence's order, both
        for t, want in zip(p["threads"], p1["threads"]):
            k = t["stack"]
            counts[k] += 1
            if p["rank"] is not None:
                ranks[k].add(p["rank"])
            cls = two["stacks"][k]
            for key in ("frames", "python_frames"):
                if (cls[key] is None) != (want[key] is None):
                    bad.append(f"{p['pid']}/{t['tid']}: {key} null in one report only")
                    continue
                got = [table_frame(two, i) for i in cls[key] or []]
                if any(pc is not None for _, pc in got):
                    bad.append(f"{p['pid']}/{t['tid']}: a /2 frame with a pc")
                got = [k for k, _ in got]
                exp = [frame_key(f) for f in want[key] or []]
                if got != exp:
                    bad.append(f"{p['pid']}/{t['tid']}: {key} differ from /1's: {got[:3]} vs {exp[:3]}")
    for k, cls in enumerate(two["stacks"]):
        if cls["threads"] != counts[k]:
            bad.append(f"stacks[{k}] counts {cls['threads']} threads, the processes {counts[k]}")
        listed = {r for a, b in cls["ranks"] for r in range(a, b + 1)}
        if listed != ranks[k]:
            bad.append(f"stacks[{k}] names ranks {sorted(listed)}, its threads' are {sorted(ranks[k])}")
    table = two["ranks"]
    if table["pid"] != [p["pid"] for p in two["processes"]]:
        bad.append("the ranks table's pids are not the processes'")
    nodes = two["waits_for"]["ranks"]
    node_group = dict(zip(nodes["rank"], nodes["group"]))
    for i, p in enumerate(two["processes"]):
        # the key thread: one whose wait and op the table gives, with the class the table names
        keys = {t["stack"] for t in p["threads"] if (t["wait"], t["wait_op"]) == (table["wait"][i], table["op"][i])}
        if (table["stack"][i] is None) != (not p["threads"]) or (p["threads"] and table["stack"][i] not in keys):
            bad.append(f"ranks.stack[{i}] {table['stack'][i]}: no thread of pid {p['pid']} with that wait and op has it")
        if table["group"][i] != node_group.get(p["rank"]):
            bad.append(f"ranks.group[{i}] {table['group'][i]} is not rank {p['rank']}'s in the waits-for graph")
        hix = table["host"][i]
        if (two["hosts"][hix] if hix is not None else None) != p["host"]:
            bad.append(f"ranks.host[{i}] {hix} does not name {p['host']}")
        if (table["rank"][i], table["state"][i], table["part"][i]) != (p["rank"], p["state"], p["part"]):
            bad.append(f"ranks[{i}] is not pid {p['pid']}'s rank, state and part")
    return bad


checked = 0
with tempfile.TemporaryDirectory() as tmp:
    for name, argv in inputs():
        rc, out, err = run("analyze", "--json", *argv)
        if rc not in (0, 1):
            print(f"skip  {name}: analyze exits {rc} (an input it refuses): {err.strip()[:120]}")
            continue
        direct = json.loads(out)
        want = judged(direct)
        reports = {}
        # A /1 report never held the job logs: it is judged again the same only without them.
        logs = direct["logs"]["facts"] or direct["logs"]["ranks"]
        for label, flags in (("/1", ["--schema", "1"]), ("/2", []), ("/2 --full", ["--full"])):
            path = os.path.join(tmp, "report.json")
            rc, out, err = run("analyze", "--json", *flags, *argv)
            doc = json.loads(out)
            rows = label == "/2"  # /2 writes its processes as rows, --full as objects
            if any(isinstance(p, list) != rows for p in doc["processes"]) or ("process_keys" in doc) != rows:
                print(f"FAIL  {name} {label}: processes as {'rows' if not rows else 'objects'}")
                failed += 1
            reports[label] = report_frames.expand(doc)
            with open(path, "w") as f:
                f.write(out)
            rc, again, err = run("analyze", "--json", path)
            if rc not in (0, 1):
                print(f"FAIL  {name} {label}: analyze of the report exits {rc}: {err.strip()}")
                failed += 1
                continue
            got = judged(json.loads(again))
            diff = {k: (got[k], want[k]) for k in got if got[k] != want[k]}
            if diff and not (logs and label == "/1"):
                print(f"FAIL  {name} {label}: judged again, then from the inputs: {diff}")
                failed += 1
        schemas = [reports[k]["schema"] for k in ("/1", "/2", "/2 --full")]
        if schemas != ["hangdx.report/1", "hangdx.report/2", "hangdx.report/2"]:
            print(f"FAIL  {name}: schemas {schemas}")
            failed += 1
            continue
        bad = check_classes(name, reports["/1"], reports["/2"])
        full = reports["/2 --full"]
        if [p["threads"] for p in full["processes"]] != [p["threads"] for p in reports["/1"]["processes"]]:
            bad.append("--full's threads are not /1's")
        two = reports["/2"]
        if {k: v for k, v in full["ranks"].items() if k != "stack"} != {k: v for k, v in two["ranks"].items() if k != "stack"}:
            bad.append("--full's ranks table is not /2's")
        # --full's classes are the key threads' only, numbered apart: the same stacks all the same
        for i, (a, b) in enumerate(zip(full["ranks"]["stack"], two["ranks"]["stack"])):
            if (a is None) != (b is None) or (a is not None and class_frames(full, a) != class_frames(two, b)):
                bad.append(f"--full's class of process {i} is not /2's")
        if bad:
            print(f"FAIL  {name}: " + "; ".join(bad[:5]))
            failed += 1
            continue
        checked += 1
        print(f"ok    {name}: {want['class']} {want['culprit_ranks']}, {len(reports['/2']['stacks'])} stacks")

# The fixtures that do not reach a verdict (refused inputs) are few: the rest were all compared.
if checked < 100:
    print(f"FAIL  only {checked} inputs compared")
    failed += 1
print(f"{checked} inputs: {'%d failed' % failed if failed else 'all judged the same from their reports'}")
sys.exit(1 if failed else 0)
