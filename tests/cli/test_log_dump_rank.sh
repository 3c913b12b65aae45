#!/bin/bash
# The faulthandler dump inside a job log whose lines are all rank 0's (a real NCCL 2.28 /
# torch 2.11 log of a stuck GPU kernel, tests/fixtures/logs/nccl_watchdog_torch211.log): the
# dump is rank 0's process (not a process of no rank: "pid -1 ?"), with a note saying where the
# rank came from, and as NCCL says "nranks 1" the verdict blames no other rank (the GPU work
# never finished); given with a snapshot of rank 0 (either order) the snapshot's process is the
# one kept and the dump is left out with a note. Needs $HANGDX and $HDX_SOURCE_DIR.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
: "${HDX_SOURCE_DIR:?HDX_SOURCE_DIR must name the source tree}"
PY=/usr/bin/python3
. "$(dirname "$0")/../check.sh"
T=$(mktemp -d /tmp/hdx-test-logdump-XXXXXX)
trap 'rm -rf "$T"' EXIT
LOG="$HDX_SOURCE_DIR/tests/fixtures/logs/nccl_watchdog_torch211.log"
SNAP="$HDX_SOURCE_DIR/tests/fixtures/nccl-h200/gpu_stuck.snapshot.json"

"$HANGDX" analyze --json "$LOG" >"$T/out" 2>"$T/err"; rc=$?
check "the log alone: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "the dump is rank 0's process, and a note says the rank is the log's one rank" $PY - "$T/out" <<'PYEOF'
import os, sys
sys.path.insert(0, os.path.join(os.environ["HDX_SOURCE_DIR"], "tests"))
import report_frames
d = report_frames.loads(open(sys.argv[1]).read())
ps = d["processes"]
assert [p["rank"] for p in ps] == [0], ps
assert ps[0]["threads"] and ps[0]["threads"][0]["frames"][0]["function"] == "wait_for_result", ps[0]["threads"]
assert any("is rank 0, the one rank of the log's lines" in n for n in d["notes"]), d["notes"]
assert not any("rank unknown" in n for n in d["notes"]), d["notes"]
g = d["groups"]
assert g and g[0]["ranks"] == [[0, 0]], g
# NCCL's own line says "nranks 1": no other rank to blame, the GPU work never finished
v = d["verdict"]
assert v["class"] == "collective_wait" and v["culprit_ranks"] == [], v
assert "no other rank (world size 1" in v["summary"] and "GPU work never finished" in v["summary"], v["summary"]
assert "logs of the other ranks are missing" not in v["summary"], v["summary"]
PYEOF
"$HANGDX" analyze "$LOG" >"$T/out.txt" 2>/dev/null
check "the text report lists rank 0, not a process without a rank" grep -qE "^  rank 0 " "$T/out.txt"
check "no pid or thread of -1 in the text report (a dump names none: '?')" bash -c "! grep -qE '(pid|pids|thread) -1' '$T/out.txt'"

for order in "$LOG $SNAP" "$SNAP $LOG"; do
    # shellcheck disable=SC2086
    "$HANGDX" analyze --json $order >"$T/out" 2>"$T/err"; rc=$?
    check "log and snapshot of rank 0 ($order): exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
    check "  one process, the snapshot's (pid 466); the dump left out with a note" $PY - "$T/out" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert list(zip(d["ranks"]["rank"], d["ranks"]["pid"])) == [(0, 466)], d["ranks"]
assert any("faulthandler dump of rank 0 in this log is left out: another input has rank 0 (pid 466" in n
           for n in d["notes"]), d["notes"]
PYEOF
done
# A py-spy dump pasted into a job log, then the job's own lines, one of them indented as a frame
# line would be: the dump ends there (the log is read, its thread kept whole), where a file of
# the dump alone refuses the same line
cat >"$T/pyspy-in-log.log" <<'EOF2'
Process 46930: /usr/bin/python3 -u main.py --local_rank=0 --deepspeed
Python v3.11.2 (/usr/bin/python3.11)

Thread 46930 (idle): "MainThread"
    wait (torch/utils/file_baton.py:42)
    _jit_compile (torch/utils/cpp_extension.py:1522)
    load (torch/utils/cpp_extension.py:1284)
    main (main.py:273)

Loading the model:
    }
}
Using /home/user7/.cache/torch_extensions/py311_cu117 as PyTorch extensions root...
EOF2
"$HANGDX" analyze --json "$T/pyspy-in-log.log" >"$T/out" 2>"$T/err"; rc=$?
check "py-spy dump inside a log, then an indented log line: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "  the dump's thread whole: 4 frames, FileBaton.wait innermost, build_lock" $PY - "$T/out" <<'PYEOF'
import os, sys
sys.path.insert(0, os.path.join(os.environ["HDX_SOURCE_DIR"], "tests"))
import report_frames
d = report_frames.loads(open(sys.argv[1]).read())
ps = d["processes"]
assert [p["pid"] for p in ps] == [46930], ps
t = ps[0]["threads"][0]
assert [f["function"] for f in t["frames"]] == ["wait", "_jit_compile", "load", "main"], t["frames"]
assert t["wait"] == "build_lock" and t["wait_op"] == "FileBaton.wait", t
PYEOF
grep -v "^Using\|^Loading\|^}" "$T/pyspy-in-log.log" > "$T/pyspy.txt"
"$HANGDX" analyze --json "$T/pyspy.txt" >"$T/out" 2>"$T/err"; rc=$?
check "the same dump alone with the indented line: refused, exit 2 (got $rc)" test $rc -eq 2
check "  the error names the line" grep -q 'a frame line that is not "function (file:line)": "    }"' "$T/err"
exit $fail
