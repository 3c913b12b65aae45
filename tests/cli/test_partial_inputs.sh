#!/bin/bash
# hangdx analyze when part of an input is unusable: a directory of snapshots with an empty, a
# junk and a truncated snap-*.json beside good ones, and a --frames file in which one node's
# snapshot is incomplete. One rule: the usable part is analyzed, each file or node left out is
# named on stderr and in the report's notes, and the exit status is 1 (partial). Files not
# named *.json in the directory are not read, and a note counts them. Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
: "${HDX_SOURCE_DIR:?HDX_SOURCE_DIR must name the source tree}"
PY=/usr/bin/python3
. "$(dirname "$0")/../check.sh"

T=$(mktemp -d /tmp/hdx-test-partial-XXXXXX)
trap 'rm -rf "$T"' EXIT

# snap HOST PID0 RANK...: a snapshot of HOST whose ranks wait in barrier (world size 4).
snap() { $PY "$(dirname "$0")/barrier_snapshot.py" "$@"; }

# ---- a directory of snapshots with bad files among them
D="$T/snaps"
mkdir "$D"
snap node0001 1000 0 >"$D/snap-node0001.json"
snap node0002 2000 1 >"$D/snap-node0002.json"
: >"$D/snap-node0003.json"                               # empty
echo 'srun: error: node0004: task 3: Killed' >"$D/snap-node0004.json" # junk
snap node0005 5000 3 | head -c 400 >"$D/snap-node0005.json" # truncated
echo "collected by hand" >"$D/README"                   # not *.json: not read
"$HANGDX" analyze --json "$D" >"$T/out" 2>"$T/err"; rc=$?
check "a directory with 3 bad snapshot files: exit 1, partial (got $rc; $(cat "$T/err"))" test $rc -eq 1
check "stderr names the empty file" grep -q "snap-node0003.json: left out: the file is empty" "$T/err"
check "stderr names the junk file" grep -q "snap-node0004.json: left out: not a hangdx snapshot" "$T/err"
check "stderr names the truncated file" grep -q "snap-node0005.json: left out: not a whole JSON object (truncated?)" "$T/err"
check "the good snapshots are analyzed, the bad ones are in the notes, the README counted" $PY - "$T/out" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
assert sorted(doc["ranks"]["rank"]) == [0, 1], doc["ranks"]
notes = doc["notes"]
for f, why in (("snap-node0003.json", "the file is empty"), ("snap-node0004.json", "not a hangdx snapshot"),
               ("snap-node0005.json", "not a whole JSON object (truncated?)")):
    assert any(f in n and "left out: " + why in n for n in notes), (f, notes)
assert any("1 entry not named *.json not read" in n for n in notes), notes
PYEOF
"$HANGDX" analyze "$D" >"$T/out.txt" 2>/dev/null
check "the text report lists what was left out" grep -q "snap-node0003.json: left out: the file is empty" "$T/out.txt"

# Only good files: exit 0, no message, no note of a left-out file.
rm "$D/snap-node0003.json" "$D/snap-node0004.json" "$D/snap-node0005.json"
"$HANGDX" analyze --json "$D" >"$T/out" 2>"$T/err"; rc=$?
check "the same directory without the bad files: exit 0 (got $rc)" test $rc -eq 0
check "  and nothing on stderr" test ! -s "$T/err"
check "  and no left-out note" bash -c "! grep -q 'left out' '$T/out'"

# A bad snapshot named on the command line stays an error (exit 2).
snap node0005 5000 3 | head -c 400 >"$T/cut.json"
"$HANGDX" analyze "$D/snap-node0001.json" "$T/cut.json" >/dev/null 2>"$T/err"; rc=$?
check "a truncated snapshot given by name: exit 2 (got $rc)" test $rc -eq 2

# ---- a --frames file (pdsh's prefixes) in which one node's snapshot is incomplete
frames() { # FILE: frame stdin's JSON as 'hangdx snapshot --frames' does, with a pdsh prefix; CUT: drop the end
    $PY -c '
import json, sys
host, pid, cut = sys.argv[1], sys.argv[2], sys.argv[3] == "cut"
text = json.dumps(json.load(sys.stdin), separators=(",", ":"))
chunks = [text[i:i + 480] for i in range(0, len(text), 480)]
ident = "%s/%s" % (host, pid)
lines = ["%s: hangdx.frames/1 %s %d %s" % (host, ident, i, c) for i, c in enumerate(chunks)]
if cut:
    lines = lines[:len(lines) // 2]
else:
    lines.append("%s: hangdx.frames/1 %s end %d %d" % (host, ident, len(chunks), len(text.encode())))
print("\n".join(lines))' "$@"
}
{
    snap node0001 1000 0 | frames node0001 999 whole
    snap node0002 2000 1 | frames node0002 1999 cut
    snap node0003 3000 2 | frames node0003 2999 whole
} >"$T/hang.frames"
"$HANGDX" analyze --json "$T/hang.frames" >"$T/out" 2>"$T/err"; rc=$?
check "a frames file with one incomplete node: exit 1, partial (got $rc; $(cat "$T/err"))" test $rc -eq 1
check "stderr names the incomplete node" grep -q "hang.frames (node0002/1999): left out: the snapshot is incomplete" "$T/err"
check "the complete nodes are analyzed, the incomplete one is in the notes" $PY - "$T/out" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
assert sorted(doc["ranks"]["rank"]) == [0, 2], doc["ranks"]
assert sorted(doc["hosts"]) == ["node0001", "node0003"], doc["hosts"]
assert any("node0002/1999" in n and "incomplete" in n for n in doc["notes"]), doc["notes"]
PYEOF
# Every node incomplete: nothing to analyze, exit 2.
snap node0002 2000 1 | frames node0002 1999 cut >"$T/none.frames"
"$HANGDX" analyze "$T/none.frames" >/dev/null 2>"$T/err"; rc=$?
check "a frames file with no complete node: exit 2 (got $rc)" test $rc -eq 2
check "  saying so" grep -q "no node's snapshot in it is complete" "$T/err"

# ---- help texts
"$HANGDX" analyze --help >"$T/help"
check "analyze --help: one list item per line" bash -c "! grep -q 'HANGDX_PATTERNS);  - ' '$T/help'"
check "analyze --help: the exit status 1 (partial)" grep -q "1 partial" "$T/help"
"$HDX_SOURCE_DIR/scripts/benchmarks/gen-synthetic-job" --help >"$T/help"
check "gen-synthetic-job --help has examples" grep -q "^examples:" "$T/help"
check "gen-synthetic-job --help says what --hosts and --ranks-per-host are" \
    bash -c "grep -A1 -- '--hosts HOSTS' '$T/help' | grep -q 'hosts of the synthetic job' && grep -A2 -- '--ranks-per-host' '$T/help' | grep -q 'rank processes per host'"

exit $fail
