#!/bin/bash
# hangdx analyze DIR of per-rank job logs, laid out at test time from the combined log fixtures
# (log_dirs.py): torchrun --log-dir with a restart (attempt_0 ended in an NCCL timeout, attempt_1
# in a gloo timeout: the verdict is attempt_1's, and a note says so), Slurm %t files, files whose
# [rankN]: prefixes disagree with their directory (the lines win), a FIFO among the logs (left
# out, exit 1), a snapshot among them (read too). Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
: "${HDX_SOURCE_DIR:?HDX_SOURCE_DIR must name the source tree}"
PY=/usr/bin/python3
. "$(dirname "$0")/../check.sh"

T=$(mktemp -d /tmp/hdx-test-logdirs-XXXXXX)
trap 'rm -rf "$T"' EXIT
FX="$HDX_SOURCE_DIR/tests/fixtures/logs"
lay() { $PY "$(dirname "$0")/log_dirs.py" "$@"; }

# verdict FILE CLASS FINDING CULPRITS [NOTE]: the report's class, finding, culprit ranks, and a
# note that contains NOTE.
verdict() {
    $PY - "$@" <<'PYEOF'
import json, sys
path, cls, finding, culprits = sys.argv[1:5]
doc = json.load(open(path))
v = doc["verdict"]
assert v["class"] == cls, (v["class"], cls)
assert v.get("finding") == finding, (v.get("finding"), finding)
assert sorted(v["culprit_ranks"]) == json.loads(culprits), (v["culprit_ranks"], culprits)
for want in sys.argv[5:]:
    assert any(want in n for n in doc["notes"]), (want, doc["notes"])
PYEOF
}

# ---- torchrun --log-dir D: D/<run_id>_<hash>/attempt_<n>/<local_rank>/{stdout,stderr}.log
D="$T/torchrun"
lay torchrun "$FX/nccl_rank_never_enqueued.log" "$D/job7_k2x9q1/" 0   # the failure before the restart
lay torchrun "$FX/gloo_collective_rank_skipped.log" "$D/job7_k2x9q1/" 1
echo '{"message": {"message": "RuntimeError: timed out", "extraInfo": {"timestamp": "1712919775"}}}' \
    >"$D/job7_k2x9q1/attempt_1/0/error.json"   # torchrun's reply file: not a snapshot, not left out
"$HANGDX" analyze --json "$D" >"$T/out" 2>"$T/err"; rc=$?
check "torchrun --log-dir with a restart: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "  the last attempt's verdict (gloo, rank 2 skipped), with the restart noted" verdict "$T/out" \
    collective_wait log_gloo_collective "[2]" \
    "torch elastic restarted the workers 1 time; the verdict is from attempt_1; earlier attempts: attempt_0"
check "  the rank from the local rank directory, said to be a local rank" verdict "$T/out" \
    collective_wait log_gloo_collective "[2]" "attempt_1/2 (local rank 2)" \
    "3 files without rank prefixes took their rank from their local rank directory, a local rank taken as the global rank"
check "  attempt_0's NCCL timeout is not judged" bash -c "! grep -q 'SeqNum=812' '$T/out'"

# Given one attempt's directory, or the run's, it is the same job.
"$HANGDX" analyze --json "$D/job7_k2x9q1/attempt_0" >"$T/out0" 2>"$T/err"; rc=$?
check "attempt_0 given alone is judged: the NCCL rank 2 behind (got $rc; $(cat "$T/err"))" verdict "$T/out0" \
    collective_wait log_seq_behind "[2]"

"$HANGDX" analyze --json "$D/job7_k2x9q1/attempt_1" >"$T/out1" 2>"$T/err"; rc=$?
check "attempt_1 given alone: its local rank directories still give the ranks (got $rc; $(cat "$T/err"))" \
    verdict "$T/out1" collective_wait log_gloo_collective "[2]" "(local rank 2)"

"$HANGDX" analyze --json "$D"/job7_k2x9q1/attempt_1/[01]/stderr.log >"$T/outn" 2>"$T/err"; rc=$?
check "attempt_1's logs named one by one: ranks from their directories (got $rc; $(cat "$T/err"))" $PY -c '
import json, sys
doc = json.load(open(sys.argv[1]))
assert any("attempt_1/1 (local rank 1, taken as the global rank" in n for n in doc["notes"]), doc["notes"]
assert doc["verdict"]["facts"]["timed_out"] == [0, 1], doc["verdict"]
' "$T/outn"

# ---- node 1's torchrun --log-dir, whose workers print NODE_RANK, LOCAL_RANK and LOCAL_WORLD_SIZE: the
# lines give global ranks 4..7 (node rank x nproc + local rank), which the local rank directories
# 0..3 contradict: the lines' ranks are used, and a note says the two disagree
N="$T/node1"
for k in 0 1 2 3; do
    mkdir -p "$N/job9_q7r2/attempt_0/$k" && cp "$FX/torchrun_two_nodes.logs/node1-worker$k.out" "$N/job9_q7r2/attempt_0/$k/stderr.log"
done
"$HANGDX" analyze --json "$N" >"$T/outn1" 2>"$T/err"; rc=$?
check "node 1's --log-dir: rank 7 behind, the ranks from the lines (got $rc; $(cat "$T/err"))" verdict "$T/outn1" \
    collective_wait log_seq_behind "[7]" \
    "attempt_0/3/stderr.log: its lines and its name disagree: node rank 1 (line 1) x nproc 4 (LOCAL_WORLD_SIZE, line 1) + local rank 3 (line 1) says rank 7, its torchrun --log-dir directory"
check "  no file said to take its rank from its directory" bash -c "! grep -q 'took their rank from their local rank directory' '$T/outn1'"

# ---- the lines win: [rankN]: prefixes kept, rank r in local rank directory r+1
K="$T/prefixed"
lay keep "$FX/gloo_collective_rank_skipped.log" "$K/run_a" 0 1
"$HANGDX" analyze --json "$K" >"$T/outk" 2>"$T/err"; rc=$?
check "prefixed lines in other ranks' directories: still rank 2 (got $rc; $(cat "$T/err"))" verdict "$T/outk" \
    collective_wait log_gloo_collective "[2]"
check "  and no rank taken from a directory" bash -c "! grep -q 'local rank directory' '$T/outk'"

# ---- Slurm: srun -o job-%j-%t.out, and out-%t.log
S="$T/slurm"
lay slurm "$FX/gloo_collective_rank_skipped.log" "$S" "job-1234-%t.out"
echo "srun: job 1234 queued and waiting for resources" >"$S/slurm-1234.out"   # %j alone: no rank
"$HANGDX" analyze --json "$S" >"$T/outs" 2>"$T/err"; rc=$?
check "Slurm %t files: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "  rank 2 skipped, the ranks from the task ids" verdict "$T/outs" collective_wait log_gloo_collective "[2]" \
    "job-1234-2.out: no rank prefix in the file; its lines taken as rank 2's, from the Slurm task id"
check "  slurm-1234.out is no rank's" bash -c "! grep -q 'slurm-1234.out: no rank prefix' '$T/outs'"
S2="$T/slurm2"
lay slurm "$FX/nccl_rank_never_enqueued.log" "$S2" "out-%t.log"
"$HANGDX" analyze --json "$S2" >"$T/outs2" 2>"$T/err"; rc=$?
check "out-%t.log files: rank 2 behind (got $rc; $(cat "$T/err"))" verdict "$T/outs2" \
    collective_wait log_seq_behind "[2]"

# ---- a FIFO among the logs: left out (never opened), exit 1; a snapshot among them: read
mkfifo "$S/job-1234-9.out"
"$HANGDX" analyze --json "$S" >"$T/outf" 2>"$T/err"; rc=$?
check "a FIFO among the logs: exit 1, partial (got $rc)" test $rc -eq 1
check "  named as left out" grep -q "job-1234-9.out: left out: a FIFO (named pipe), not a regular file" "$T/err"
check "  the verdict from the rest" verdict "$T/outf" collective_wait log_gloo_collective "[2]"
rm "$S/job-1234-9.out"
$PY "$(dirname "$0")/barrier_snapshot.py" node0009 9000 7 >"$S/snap-node0009.json"
"$HANGDX" analyze --json "$S" >"$T/outm" 2>"$T/err"; rc=$?
check "logs and a snapshot in one directory: both read (got $rc; $(cat "$T/err"))" $PY -c '
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["ranks"]["rank"] == [7], doc["ranks"]
assert any("job-1234-0.out" in n for n in doc["notes"]), doc["notes"]
' "$T/outm"

# ---- the walk is bounded: a log 9 levels down is not read, and a note says the walk was cut
deep="$S/a/b/c/d/e/f/g/h"
mkdir -p "$deep" && cp "$S/job-1234-0.out" "$deep/job-1234-0.out"
"$HANGDX" analyze --json "$S" >"$T/outd" 2>"$T/err"; rc=$?
check "a log below 8 levels: not read, noted (got $rc; $(cat "$T/err"))" $PY -c '
import json, sys
doc = json.load(open(sys.argv[1]))
assert not any("a/b/c/d/e/f/g/h" in n for n in doc["notes"] if "taken as rank" in n), doc["notes"]
assert any("the walk of the directory stopped at 8 levels of directories" in n for n in doc["notes"]), doc["notes"]
' "$T/outd"
rm -rf "$S/a"

# ---- a directory of nothing hangdx knows is still refused, by name
mkdir "$T/junk" && echo hello >"$T/junk/a.txt"
"$HANGDX" analyze "$T/junk" >/dev/null 2>"$T/err"; rc=$?
check "a directory of unknown files: exit 2 (got $rc)" test $rc -eq 2
check "  says what it looked for" grep -q "nor a directory of snapshots or of job logs" "$T/err"
exit $fail
