#!/bin/bash
# hangdx analyze on hand-written hangdx.snapshot/1 files: two hosts with disjoint ranks
# merge into one job (with a trace directory of a third host in the mix), the same rank
# on two hosts is an error naming both, and bad files fail cleanly. Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
. "$(dirname "$0")/../check.sh"

T=$(mktemp -d /tmp/hdx-test-snapan-XXXXXX)
trap 'rm -rf "$T"' EXIT

# snap HOST PID0 RANK...: a snapshot of HOST whose ranks wait in barrier (world size 4).
snap() { $PY "$(dirname "$0")/barrier_snapshot.py" "$@"; }

snap node-a 1000 0 1 >"$T/snap-a.json"
snap node-b 1000 2 3 >"$T/snap-b.json"
snap node-c 2000 1 >"$T/snap-c.json"

out=$("$HANGDX" analyze --json "$T/snap-a.json" "$T/snap-b.json" 2>"$T/err"); rc=$?
check "two hosts' snapshots: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "one job: 4 processes, ranks 0-3, 2 hosts, one group of 4" $PY - "$out" <<'PYEOF'
import json, sys
doc = json.loads(sys.argv[1])
assert doc["schema"] == "hangdx.report/2", doc
assert sorted(doc["hosts"]) == ["node-a", "node-b"], doc["hosts"]
ranks = doc["ranks"]  # a column per field, a row per process
assert sorted(ranks["rank"]) == [0, 1, 2, 3], ranks
assert {(doc["hosts"][h], r) for h, r in zip(ranks["host"], ranks["rank"])} == {
    ("node-a", 0), ("node-a", 1), ("node-b", 2), ("node-b", 3)}, ranks
assert doc["groups"] and doc["groups"][0]["ranks"] == [[0, 3]], doc["groups"]
assert "note from node-a" in doc["notes"] and "note from node-b" in doc["notes"], doc["notes"]
assert not any("no stacks" in n for n in doc["notes"]), doc["notes"]
assert doc["taken_at"].startswith("2026-11-29T18:40:27"), doc["taken_at"]
PYEOF

# Merging is order-free: b then a gives the same processes.
out2=$("$HANGDX" analyze --json "$T/snap-b.json" "$T/snap-a.json" 2>/dev/null)
check "b a gives the same job as a b" $PY -c "
import json,sys
a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2])
key=lambda d: sorted((d['hosts'][h],pid,r) for h,pid,r in zip(d['ranks']['host'],d['ranks']['pid'],d['ranks']['rank']))
assert key(a)==key(b) and a['verdict']['class']==b['verdict']['class'], (key(a),key(b))" "$out" "$out2"

# A trace directory of a third host in the mix.
mkdir "$T/traces"
echo '{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":3000,"ppid":1,"host":"node-d","boot_id":"x","start_time":1,"cwd":"/","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"9","WORLD_SIZE":"4"}}' >"$T/traces/node-d-3000.jsonl"
out=$("$HANGDX" analyze --json "$T/snap-a.json" "$T/traces" "$T/snap-b.json" 2>"$T/err"); rc=$?
check "snapshots and a trace dir: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "the trace's process joins: 5 processes on 3 hosts" $PY -c "
import json,sys
d=json.loads(sys.argv[1])
assert len(d['processes'])==5 and sorted(d['hosts'])==['node-a','node-b','node-d'], (d['hosts'], len(d['processes']))" "$out"

# A saved report is an input too: analyze of analyze's own JSON gives the same job.
"$HANGDX" analyze --json -o "$T/report.json" "$T/snap-a.json" "$T/snap-b.json" 2>/dev/null
out=$("$HANGDX" analyze --json "$T/report.json" 2>"$T/err"); rc=$?
check "a report as input: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "the report's 4 processes come back" $PY -c "
import json,sys
d=json.loads(sys.argv[1]); assert sorted(d['ranks']['rank'])==[0,1,2,3], d['ranks']" "$out"

# A directory of saved reports alone is read; beside the snapshots it was made from, the report
# is not read (it would count their processes twice), and a note says so.
mkdir "$T/reports" "$T/both"
cp "$T/report.json" "$T/reports/"
out=$("$HANGDX" analyze --json "$T/reports" 2>"$T/err"); rc=$?
check "a directory of a report: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "its 4 processes come back" $PY -c "
import json,sys
d=json.loads(sys.argv[1]); assert sorted(d['ranks']['rank'])==[0,1,2,3], d['ranks']" "$out"
cp "$T/snap-a.json" "$T/snap-b.json" "$T/report.json" "$T/both/"
out=$("$HANGDX" analyze --json "$T/both" 2>"$T/err"); rc=$?
check "snapshots and their report: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "each rank once, and a note names the report not read" $PY - "$out" "$T/both/report.json" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
assert sorted(d['ranks']['rank']) == [0, 1, 2, 3], d['ranks']
want = sys.argv[2] + ": a report, not read beside the snapshots of its directory"
assert any(n.startswith(want) for n in d['notes']), d['notes']
PYEOF

# When no snapshot of the directory is usable (one cut short), its report is read: exit 1, the
# cut snapshot named.
mkdir "$T/cut"
cp "$T/report.json" "$T/cut/"
head -c 700 "$T/snap-a.json" >"$T/cut/snap-a.json"
out=$("$HANGDX" analyze --json "$T/cut" 2>"$T/err"); rc=$?
check "a cut snapshot beside a report: exit 1 (got $rc; $(cat "$T/err"))" test $rc -eq 1
check "  the report's 4 processes, the cut snapshot named as left out" $PY - "$out" "$T/cut/snap-a.json" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
assert sorted(d['ranks']['rank']) == [0, 1, 2, 3], d['ranks']
assert any(n.startswith(sys.argv[2] + ": left out: ") for n in d['notes']), d['notes']
assert not any("not read beside" in n for n in d['notes']), d['notes']
PYEOF

# The same rank on two hosts: exit 2, naming both hosts and pids.
"$HANGDX" analyze --json "$T/snap-a.json" "$T/snap-c.json" >"$T/out" 2>"$T/err"; rc=$?
check "the same rank on two hosts fails with 2 (got $rc)" test $rc -eq 2
check "the error names the file, both hosts and both pids" \
    grep -q "snap-c.json: rank 1 is on two hosts: pid 1001 on node-a and pid 2000 on node-c" "$T/err"
check "nothing on stdout" test ! -s "$T/out"

# Bad files: a clean message naming the file, exit 2.
echo '{"schema": "hangdx.snapshot/7", "processes": []}' >"$T/v7.json"
"$HANGDX" analyze "$T/v7.json" >/dev/null 2>"$T/err"; rc=$?
check "an unknown version fails with 2 (got $rc)" test $rc -eq 2
check "it says which version and what is read" grep -q "v7.json: schema hangdx.snapshot/7 is not supported" "$T/err"
head -c 700 "$T/snap-a.json" >"$T/cut.json"
"$HANGDX" analyze "$T/cut.json" >/dev/null 2>"$T/err"; rc=$?
check "a truncated snapshot fails with 2 (got $rc)" test $rc -eq 2
check "it says truncated" grep -q "cut.json: not a whole JSON object (truncated?)" "$T/err"
sed 's/"pid": 1000/"pid": "1000"/' "$T/snap-a.json" >"$T/types.json"
"$HANGDX" analyze "$T/types.json" >/dev/null 2>"$T/err"; rc=$?
check "a wrong type fails with 2 (got $rc)" test $rc -eq 2
check "it says where" grep -q 'types.json: processes\[0\]: "pid" should be an integer' "$T/err"
echo 'hello' >"$T/plain.txt"
"$HANGDX" analyze "$T/plain.txt" >/dev/null 2>"$T/err"; rc=$?
check "a text file fails with 2 (got $rc)" test $rc -eq 2
check "it names the file" grep -q "plain.txt: hangdx does not know what this is" "$T/err"

# snapshot's command line.
"$HANGDX" snapshot --help >"$T/out"; rc=$?
check "snapshot --help exits 0 with examples" bash -c "test $rc -eq 0 && grep -q 'hangdx snapshot --all' '$T/out'"
"$HANGDX" snapshot >/dev/null 2>&1; rc=$?
check "snapshot without PID is a usage error (got $rc)" test $rc -eq 64
"$HANGDX" snapshot --all nonsense >/dev/null 2>&1; rc=$?
check "a PID that is not a number is a usage error (got $rc)" test $rc -eq 64
"$HANGDX" snapshot 4194301 >/dev/null 2>"$T/err"; rc=$?
check "a missing PID fails with 2 (got $rc)" test $rc -eq 2

exit $fail
