#!/usr/bin/python3
"""hangdx analyze --json on one log fixture (a file, or a directory of per-rank
files) and compare the verdict with the fixture's first line, `# expect: {json}`
(keys as ../shared/cases/README.md defines them; besides them, "confidence": the verdict's exact
confidence, and "notes": strings each of which some note of the report contains)."""
import json, os, subprocess, sys

path = sys.argv[1]
files = sorted(os.path.join(path, f) for f in os.listdir(path)) if os.path.isdir(path) else [path]
with open(files[0]) as f:
    first = f.readline()
assert first.startswith("# expect:"), f"{files[0]}: no '# expect:' first line"
expect = json.loads(first[len("# expect:"):])
run = subprocess.run([os.environ["HANGDX"], "analyze", "--json", *files], capture_output=True, text=True)
assert run.returncode == 0, f"{path}: hangdx exited {run.returncode}: {run.stderr}"
doc = json.loads(run.stdout)
v = doc["verdict"]
fail = []
if "class" in expect and v["class"] != expect["class"]:
    fail.append(f"class {v['class']!r}, expected {expect['class']!r}")
if "class_in" in expect and v["class"] not in expect["class_in"]:
    fail.append(f"class {v['class']!r}, expected one of {expect['class_in']}")
if "culprit_ranks" in expect and sorted(v["culprit_ranks"]) != sorted(expect["culprit_ranks"]):
    fail.append(f"culprit_ranks {v['culprit_ranks']}, expected {expect['culprit_ranks']}")
if "finding" in expect and v.get("finding") != expect["finding"]:
    fail.append(f"finding {v.get('finding')!r}, expected {expect['finding']!r}")
for name, want in (expect.get("facts") or {}).items():  # the facts the finding carries (docs/design.md "Findings")
    have = (v.get("facts") or {}).get(name)
    if have != want:
        fail.append(f"verdict.facts.{name} {have!r}, expected {want!r}")
if "missing_count" in expect and v.get("missing_count") != expect["missing_count"]:
    fail.append(f"missing_count {v.get('missing_count')}, expected {expect['missing_count']}")
for key, want in (expect.get("group") or {}).items():  # the process group the verdict names
    have = (v.get("group") or {}).get(key)
    if have != want:
        fail.append(f"verdict.group.{key} {have!r}, expected {want!r}")
text = json.dumps(v)
for m in expect.get("mentions", []):
    if m not in text and m not in (v.get("summary") or "") + (v.get("remedy") or ""):
        fail.append(f"the verdict does not mention {m!r}")
if v["class"] in expect.get("not_confident", []) and v["confidence"] == "high":
    fail.append(f"{v['class']} given with high confidence")
if "confidence" in expect and v["confidence"] != expect["confidence"]:
    fail.append(f"confidence {v['confidence']!r}, expected {expect['confidence']!r}")
for n in expect.get("notes", []):  # a note of the report contains each
    if not any(n in have for have in doc["notes"]):
        fail.append(f"no note says {n!r}")
if fail:
    print(f"FAIL {path}:\n  " + "\n  ".join(fail) + "\n  verdict: " + json.dumps(v, indent=1)
          + "\n  notes: " + json.dumps(doc["notes"], indent=1))
    sys.exit(1)
print(f"ok {os.path.basename(path)}: {v['class']} {v['culprit_ranks']} ({v['confidence']})")
