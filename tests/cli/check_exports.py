#!/usr/bin/python3
"""check_exports.py speedscope FILE | collapsed FILE TREE_TEXT | dot FILE

Checks an export of `hangdx analyze --format ...` by the rules of its format, and prints what
it read as JSON on stdout for the test to compare (exit 1 and the reasons on stderr otherwise):

- speedscope: the rules of speedscope's file format schema,
  https://www.speedscope.app/file-format-schema.json (the types of src/lib/file-format-spec.ts
  in github.com/jlfwong/speedscope), checked by hand (no jsonschema package here): "$schema"
  is that URL; "shared.frames" an array of objects with a string "name" (and "file" a string,
  "line" and "col" numbers when present); "profiles" an array of "sampled" profiles (or
  "evented", not written by hangdx) with a string "name", a "unit" of the schema's list,
  numbers "startValue" <= "endValue", "samples" arrays of integer frame indexes in range,
  "weights" numbers, as many as the samples; "name", "exporter" strings and
  "activeProfileIndex" an index into "profiles" when present. Prints
  {"profiles": [{"name", "weights", "stacks": [[frame name, ...] root first]}], "active"}.
- collapsed: folded stacks, `frame;frame;... COUNT` per line; TREE_TEXT is the text report
  with --tree, whose leaves (each branch's path from the root) must be the lines' stacks, and
  whose root's count the sum of the counts. Prints {"stacks": [[...], count], "total"}.
- dot: a digraph whose statements are node and edge lines; prints {"nodes": {id: attrs},
  "edges": [[from, to, label]]}; with Graphviz's `dot` on the PATH, it must also parse the file.
"""
import json
import re
import shutil
import subprocess
import sys

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def fail(errors):
    for e in errors:
        print("check_exports: " + e, file=sys.stderr)
    sys.exit(1)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_speedscope(path):
    doc = json.load(open(path))
    errors = []
    if not isinstance(doc, dict):
        fail(["the file is not an object"])
    if doc.get("$schema") != SCHEMA:
        errors.append("$schema is %r, not %r" % (doc.get("$schema"), SCHEMA))
    frames = doc.get("shared", {}).get("frames") if isinstance(doc.get("shared"), dict) else None
    if not isinstance(frames, list):
        fail(errors + ["shared.frames is not an array"])
    for i, f in enumerate(frames):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            errors.append("frame %d has no string name: %r" % (i, f))
            continue
        if "file" in f and not isinstance(f["file"], str):
            errors.append("frame %d: file is not a string" % i)
        for k in ("line", "col"):
            if k in f and not is_num(f[k]):
                errors.append("frame %d: %s is not a number" % (i, k))
    profiles = doc.get("profiles")
    if not isinstance(profiles, list):
        fail(errors + ["profiles is not an array"])
    for k in ("name", "exporter"):
        if k in doc and not isinstance(doc[k], str):
            errors.append("%s is not a string" % k)
    if "activeProfileIndex" in doc and not (
            isinstance(doc["activeProfileIndex"], int) and 0 <= doc["activeProfileIndex"] < len(profiles)):
        errors.append("activeProfileIndex %r is no index of profiles" % doc["activeProfileIndex"])
    out = []
    for i, p in enumerate(profiles):
        if not isinstance(p, dict) or p.get("type") not in ("sampled", "evented"):
            errors.append("profile %d: type is neither sampled nor evented" % i)
            continue
        if not isinstance(p.get("name"), str):
            errors.append("profile %d: name is not a string" % i)
        if p.get("unit") not in UNITS:
            errors.append("profile %d: unit %r is not one of %s" % (i, p.get("unit"), sorted(UNITS)))
        if not (is_num(p.get("startValue")) and is_num(p.get("endValue")) and p["startValue"] <= p["endValue"]):
            errors.append("profile %d: startValue and endValue are not numbers in order" % i)
        if p["type"] == "evented":
            errors.append("profile %d: evented (hangdx writes sampled profiles)" % i)
            continue
        samples, weights = p.get("samples"), p.get("weights")
        if not isinstance(samples, list) or not isinstance(weights, list):
            errors.append("profile %d: samples or weights is not an array" % i)
            continue
        if len(samples) != len(weights):
            errors.append("profile %d: %d samples but %d weights" % (i, len(samples), len(weights)))
        if not all(is_num(w) for w in weights):
            errors.append("profile %d: a weight is not a number" % i)
        stacks = []
        for j, s in enumerate(samples):
            if not isinstance(s, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in s):
                errors.append("profile %d sample %d is not an array of integers" % (i, j))
                continue
            bad = [x for x in s if not 0 <= x < len(frames)]
            if bad:
                errors.append("profile %d sample %d: frame indexes %s out of range" % (i, j, bad))
                continue
            stacks.append([frames[x]["name"] for x in s])
        out.append({"name": p.get("name"), "weights": weights, "stacks": stacks})
    if errors:
        fail(errors)
    print(json.dumps({"profiles": out, "active": doc.get("activeProfileIndex")}))


def tree_leaves(text):
    """The stacks of the text report's stack tree, ([frames from the root], count) each: every
    leaf's path, and the path of each "[...] N ranks end here" (or "1 rank ends here") line; and the root's count."""
    lines = text.split("\n")
    try:
        at = next(i for i, l in enumerate(lines) if l.startswith("stack tree ("))
    except StopIteration:
        fail(["the text report has no stack tree"])
    noun = r"(?:ranks?|process(?:es)?)"
    head = re.compile(r"^( *)\[[^\]]*\] (\d+) " + noun + r"(?: \([^)]*\))?(?:: (.*))?$")
    ends = re.compile(r"^ *\[[^\]]*\] (\d+) " + noun + " ends? here$")
    path, seen, stacks = [], [], []  # path: the open branches [indent, frames, count, has children]
    for line in lines[at + 1:]:
        if not line.strip():
            break
        m, e = head.match(line), ends.match(line)
        if e:
            stacks.append((list(path[-1][1]), int(e.group(1))))
        elif m:
            indent = len(m.group(1))
            while path and path[-1][0] >= indent:
                path.pop()
            frames = list(path[-1][1]) if path else []
            if path:
                path[-1][3] = True
            if m.group(3) is not None:
                frames += m.group(3).split(" > ")
            path.append([indent, frames, int(m.group(2)), False])
            seen.append(path[-1])
        else:
            path[-1][1].append(line.strip())
    stacks += [(b[1], b[2]) for b in seen if not b[3]]
    return stacks, seen[0][2] if seen else None


def check_collapsed(path, tree_path):
    stacks, errors = [], []
    for n, line in enumerate(open(path).read().splitlines(), 1):
        m = re.match(r"^(.+) (\d+)$", line)
        if not m:
            errors.append("line %d is not 'frame;frame COUNT': %r" % (n, line))
            continue
        stacks.append([m.group(1).split(";"), int(m.group(2))])
    leaves, root = tree_leaves(open(tree_path).read())
    total = sum(c for _, c in stacks)
    if total != root:
        errors.append("the counts sum to %d, the tree's root has %s" % (total, root))
    if sorted(map(repr, stacks)) != sorted(repr([f, c]) for f, c in leaves):
        errors.append("the stacks are not the tree's leaves:\n  %s\n  %s" % (stacks, leaves))
    if errors:
        fail(errors)
    print(json.dumps({"stacks": stacks, "total": total}))


def check_dot(path):
    text = open(path).read()
    errors = []
    if not text.startswith("digraph hangdx {") or not text.rstrip().endswith("}"):
        errors.append("not one digraph hangdx { ... }")
    if text.count("{") != text.count("}"):
        errors.append("unbalanced braces")
    nodes, edges = {}, []
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r'^(\w+) -> (\w+)(?: \[label="([^"]*)"\])?;$', line)
        if m:
            edges.append([m.group(1), m.group(2), m.group(3)])
            continue
        m = re.match(r'^(\w+) \[(.*)\];$', line)
        if m and m.group(1) not in ("node", "graph", "edge"):
            nodes[m.group(1)] = m.group(2)
    for a, b, _ in edges:
        for x in (a, b):
            if x not in nodes:
                errors.append("edge %s -> %s: no node %s" % (a, b, x))
    if shutil.which("dot"):
        r = subprocess.run(["dot", "-Tcanon", path], capture_output=True, text=True)
        if r.returncode:
            errors.append("Graphviz's dot does not parse it: " + r.stderr)
    else:
        print("check_exports: no Graphviz dot here: its parse not checked", file=sys.stderr)
    if errors:
        fail(errors)
    print(json.dumps({"nodes": nodes, "edges": edges}))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "speedscope" and len(sys.argv) == 3:
        check_speedscope(sys.argv[2])
    elif what == "collapsed" and len(sys.argv) == 4:
        check_collapsed(sys.argv[2], sys.argv[3])
    elif what == "dot" and len(sys.argv) == 3:
        check_dot(sys.argv[2])
    else:
        sys.exit(__doc__)
