#!/bin/bash
# hangdx analyze on inputs that claim more than they hold (found by fuzzing and by hand, kept in
# tests/fuzz/regressions/ and made here at test time): each is answered from what it holds, with
# the verdict or the error a person needs, and work and memory bounded by its size. A claimed
# rank of 10^25 in a launcher prefix, a world size of 16777216 over three ranks, a core without
# memory, ppids in a loop, a line of 1 MB, a hole of 1 GiB of NULs, a FIFO; ranks of 16777215 and
# world sizes of 16777215 in logs, file names, snapshots, Flight Recorder dumps and traces (in
# 200 MB of address space, with the verdict of the ranks read). The test's TIMEOUT
# (CMakeLists.txt) is the bound on time; memory is bounded here with ulimit -v (not under ASan,
# which reserves terabytes of address space). Needs $HANGDX and $HDX_SOURCE_DIR.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
: "${HDX_SOURCE_DIR:?HDX_SOURCE_DIR must name the source tree}"
. "$(dirname "$0")/../check.sh"
REG="$HDX_SOURCE_DIR/tests/fuzz/regressions"
WATCHDOG="$HDX_SOURCE_DIR/tests/fixtures/bounded/watchdog-line.txt"

T=$(mktemp -d /tmp/hdx-test-bounded-XXXXXX)
trap 'rm -rf "$T"' EXIT

# run NAME ARGS...: hangdx analyze ARGS into $T/NAME.out and .err, at most 1 GiB of address
# space (when not under ASan) and 50 s (never blocks: a FIFO must not hang it); $rc its status.
limit=""
grep -q __asan_init "$HANGDX" 2>/dev/null || limit="ulimit -v 1048576;"
run() {
    local name=$1
    shift
    bash -c "$limit"' exec timeout 50 "$@"' analyze "$HANGDX" analyze "$@" >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
}

# A launcher prefix [rank000...0512409557603043100]: a rank no job has; once sized an array by it
# (7.4 GB, 14 s).
cp "$REG/logs/logs-timeout-49ce7883" "$T/claimed-rank.log"
run claimed-rank "$T/claimed-rank.log"
check "a prefix naming rank 10^25: exit 0 (got $rc; $(head -c 300 "$T/claimed-rank.err"))" test $rc -eq 0
check "  a verdict" grep -q "^verdict: " "$T/claimed-rank.out"
check "  the note says the prefix names no possible rank" grep -q "names no possible rank" "$T/claimed-rank.out"

# The same kind of prefix where the fuzzer found a 30 GB allocation; read as a log through a
# pattern file of one pattern that its traceback line matches.
cat >"$T/patterns.json" <<'EOF'
{"schema": "hangdx.patterns/1", "patterns": [{"name": "test_any_traceback", "regex": "Traceback \\(m",
 "proves": "a test pattern", "strength": "weak"}]}
EOF
cp "$REG/logs/logs-oom-0020ebef" "$T/claimed-rank2.log"
HANGDX_PATTERNS="$T/patterns.json" run claimed-rank2 "$T/claimed-rank2.log"
check "a prefix naming rank 10^24 (fuzz_logs' 30 GB): exit 0 (got $rc; $(head -c 300 "$T/claimed-rank2.err"))" test $rc -eq 0
check "  the note says the prefix names no possible rank" grep -q "names no possible rank" "$T/claimed-rank2.out"

# A core with a thread but no PT_LOAD segment (UBSan: qsort of NULL).
run core "$REG/core/core-ubsan-7b63b514"
check "a core without memory: exit 2 (got $rc)" test $rc -eq 2
check "  a malformed-core error" grep -q "malformed core: no memory (PT_LOAD segment)" "$T/core.err"

# A snapshot of three ranks that claims a world size of 16777216 (2.5 min of CPU).
run world "$REG/snapshot/snapshot-world-size-max.json"
check "a claimed world size of 16777216: exit 0 (got $rc; $(head -c 300 "$T/world.err"))" test $rc -eq 0
check "  the verdict of the ranks present" grep -q "^verdict: collective_wait" "$T/world.out"
check "  the note says the world size is not taken" grep -q "claims a world size of 16777216, more than hangdx takes" "$T/world.out"

# A snapshot whose processes' ppids loop (a is b's parent, b a's): found by fuzz_snapshot, the
# JSON report's walk up the process tree never ended.
run ppid-loop --json "$REG/snapshot/ppid-loop-870f61b6"
check "a snapshot whose ppids loop: exit 0, not stuck (got $rc)" test $rc -eq 0
check "  a JSON report with a verdict" grep -q '"class":' "$T/ppid-loop.out"

# A watchdog line, then a line of 1 MB (ran > 8 min), and one of 200 KB (96 s): cut, noted.
for n in 1000000 200000; do
    { cat "$WATCHDOG"; head -c $n /dev/zero | tr '\0' x; echo; } >"$T/long$n.log"
    run long$n "$T/long$n.log"
    check "a line of $n bytes after a watchdog line: exit 0 (got $rc)" test $rc -eq 0
    check "  the watchdog line's verdict" grep -q "^verdict: collective_wait" "$T/long$n.out"
    check "  the note says the line was cut" grep -q "long$n.log:2: a line of $n bytes: only its first 4096 bytes read" "$T/long$n.out"
done

# A watchdog line, a hole of 1 GiB (a sparse file: a billion NULs), the line again.
cat "$WATCHDOG" >"$T/hole.log"
truncate -s 1G "$T/hole.log"
cat "$WATCHDOG" >>"$T/hole.log"
run hole "$T/hole.log"
check "a log with a 1 GiB hole of NULs: exit 0 (got $rc)" test $rc -eq 0
check "  the watchdog line's verdict" grep -q "^verdict: collective_wait" "$T/hole.out"
check "  the note says the hole is one line end" grep -q "hole.log:2: 1073741.* NUL bytes .* read as one line end" "$T/hole.out"

# A FIFO given by name, with no writer: refused at once, never waited on.
mkfifo "$T/job.fifo"
run fifo "$T/job.fifo"
check "a FIFO: exit 2, not blocked (got $rc)" test $rc -eq 2
check "  the error names it and says what to do" grep -q "job.fifo: a FIFO (named pipe), not a regular file: .*save what it carries into a file" "$T/fifo.err"

# A file given by name that the user may not read: exit 2, and the error says why, not that
# hangdx does not know the file (as an unprivileged user, where root runs the tests).
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    P=$(mktemp -d /tmp/hdx-test-unread-XXXXXX)
    chmod 755 "$P"
    cp "$HDX_SOURCE_DIR/tests/fixtures/evidence/gloo_collective_skip.json" "$P/snap.json"
    chmod 000 "$P/snap.json"
    setpriv --reuid="$(id -u nobody)" --regid="$(id -g nobody)" --clear-groups \
        timeout 50 "$HANGDX" analyze "$P/snap.json" >"$T/unread.out" 2>"$T/unread.err"
    rc=$?
    rm -rf "$P"
    check "a file it may not read: exit 2 (got $rc)" test $rc -eq 2
    check "  the error says it cannot be read, and why" \
        grep -q "snap.json: cannot read it: Permission denied: run hangdx as a user who may read it" "$T/unread.err"
else
    echo "skip: an unreadable file needs root, the user nobody and setpriv"
fi

# A rank no job can have where a line or a file's name says it, not only a launcher prefix: the
# NCCL line's own [Rank 999999999] behind a refused [rank999999999]: prefix, and a file named
# rank999999999.log. Neither is taken as a rank (a rank is at most 16777215, as for prefixes);
# once both were, and the name's overrode the line's.
sed -n 1p "$WATCHDOG" | sed 's/^\[rank0\]:\(.*\)\[Rank 0\]/[rank999999999]:\1[Rank 999999999]/' >"$T/big-own.log"
sed -n 1p "$WATCHDOG" | sed 's/^\[rank0\]://; s/\[Rank 0\] //' >"$T/rank999999999.log"
for name in big-own rank999999999; do
    "$HANGDX" analyze --json "$T/$name.log" >"$T/$name.out" 2>"$T/$name.err"; rc=$?
    check "$name.log: exit 0 (got $rc)" test $rc -eq 0
    check "  no rank 999999999 in the verdict or the report's ranks" python3 - "$T/$name.out" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
v = d["verdict"]
assert 999999999 not in v["culprit_ranks"], v
assert "999999999" not in (v.get("summary") or ""), v["summary"]
assert 999999999 not in d["ranks"]["rank"], d["ranks"]
ranks = (d.get("logs") or {}).get("ranks") or []
assert "999999999" not in json.dumps(ranks), ranks
PYEOF
done

# A character device.
run dev /dev/null
check "/dev/null: exit 2 (got $rc)" test $rc -eq 2
check "  the error says it is a character device" grep -q "/dev/null: a character device, not a regular file" "$T/dev.err"

# A FIFO among a snapshot directory's files: left out by name, the others analyzed.
mkdir "$T/snaps"
cp "$HDX_SOURCE_DIR/tests/fuzz/corpus/snapshot/snapshot.json" "$T/snaps/snap-node0001.json"
mkfifo "$T/snaps/snap-node0002.json"
run snapdir "$T/snaps"
check "a snapshot directory with a FIFO in it: exit 1, partial, not blocked (got $rc)" test $rc -eq 1
check "  the FIFO named as left out" grep -q "snap-node0002.json: left out: a FIFO (named pipe), not a regular file: not read" "$T/snapdir.err"

# Ranks up to the largest one taken (16777215) and world sizes up to it, in every reader: memory
# grows with the ranks read, not with the numbers (each run at most 200 MB of address space).
# Once a log of ranks 0-2 and 16777215 made a world of 2^20 missing ranks (300 MB, > 10 min).
small=""
grep -q __asan_init "$HANGDX" 2>/dev/null || small="ulimit -v 204800;"
run_small() {
    local name=$1
    shift
    bash -c "$small"' exec timeout 50 "$@"' analyze "$HANGDX" analyze --json "$@" >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
}
# verdict NAME PYTHON-EXPRESSION: over the JSON report d of NAME (v its verdict)
verdict() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); v = d["verdict"]; sys.exit(0 if eval(sys.argv[2]) else 1)' "$T/$1.out" "$2"
}
LOGS="$HDX_SOURCE_DIR/tests/fixtures/logs"
tail -n +2 "$LOGS/nccl_rank_never_enqueued.log" | sed 's/\[rank3\]/[rank16777215]/; s/\[Rank 3\]/[Rank 16777215]/' >"$T/rank-max.log"
run_small rank-max "$T/rank-max.log"
check "a log of ranks 0-2 and 16777215 (rank 2 behind): exit 0 within 200 MB (got $rc; $(head -c 300 "$T/rank-max.err"))" test $rc -eq 0
check "  culprit rank 2, ranks 0, 1, 16777215 waiting" verdict rank-max \
    'v["culprit_ranks"] == [2] and v["facts"]["waiting"] == [0, 1, 16777215] and v["facts"]["behind"] == [2]'
tail -n +2 "$LOGS/nccl_rank_never_enqueued.log" | sed 's/\[rank3\]/[rank65535]/; s/\[Rank 3\]/[Rank 65535]/' >"$T/rank-65535.log"
run_small rank-65535 "$T/rank-65535.log"
check "the same with rank 65535 (a world of 65536, the largest taken): exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  culprit rank 2" verdict rank-65535 'v["culprit_ranks"] == [2] and v["facts"]["waiting"] == [0, 1, 65535]'
{ sed 's/^\[rank0\]:\(.*\)\[Rank 0\]/[rank16777215]:\1[Rank 16777215]/' "$WATCHDOG"; cat "$WATCHDOG"; } >"$T/prefix-max.log"
run_small prefix-max "$T/prefix-max.log"
check "[rank16777215]: and [rank0]: watchdog lines: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  both ranks timed out in SeqNum=57" verdict prefix-max \
    'v["class"] == "collective_wait" and "ranks 0,16777215 timed out in ALLREDUCE SeqNum=57" in v["summary"]'
sed 's/^\[rank0\]://; s/\[Rank 0\] /[Rank 16777214] /' "$WATCHDOG" >"$T/rank16777214.log"
run_small name-max "$T/rank16777214.log"
check "a file named rank16777214.log: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  its rank is 16777214" verdict name-max '"rank 16777214 timed out in ALLREDUCE SeqNum=57" in v["summary"]'
python3 - "$REG/snapshot/snapshot-world-size-max.json" "$T" <<'PY'
import json, sys
for name, world, ranks in (("world-max", 16777215, (0, 1, 16777215)), ("world-65536", 65536, (0, 1, 65535))):
    d = json.load(open(sys.argv[1]))
    for p, r in zip(d["processes"], ranks):
        p["rank"], p["world_size"] = r, world
        p["env"].update(RANK=str(r), WORLD_SIZE=str(world))
    json.dump(d, open(f"{sys.argv[2]}/{name}.json", "w"))
PY
run_small world-max "$T/world-max.json"
check "a snapshot of ranks 0, 1, 16777215 claiming a world size of 16777215: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  culprit rank 1; the world taken: ranks 2-16777214 missing, the first 65536 named" verdict world-max \
    'v["culprit_ranks"] == [1] and v["missing_ranks"] == list(range(2, 65538)) and v["missing_count"] == 16777213 and not any("more than hangdx takes" in n for n in d["notes"])'
# The same claim over ranks 0-2, with a process group read that is not the default one, so that
# the waits-for graph takes the all_reduce on the world: its missing ranks are one range, one node
# (docs/design.md "The waits-for graph"), however large the world.
python3 - "$REG/snapshot/snapshot-world-size-max.json" "$T/world-graph.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for p, r in zip(d["processes"], (0, 1, 2)):
    p["rank"], p["world_size"] = r, 16777215
    p["env"].update(RANK=str(r), WORLD_SIZE="16777215")
d["process_groups"] = [{"name": "7", "desc": None, "role": None, "ranks": [0, 2], "default": False}]
json.dump(d, open(sys.argv[2], "w"))
PY
run_small world-graph "$T/world-graph.json"
check "a snapshot of ranks 0-2 claiming a world of 16777215, a group read: exit 0 within 200 MB (got $rc; $(head -c 300 "$T/world-graph.err"))" test $rc -eq 0
check "  collective_wait from the graph, culprit rank 1 first, 16777212 missing" verdict world-graph \
    'v["class"] == "collective_wait" and v["finding"] == "graph" and v["culprit_ranks"][:2] == [1, 3] and v["missing_count"] == 16777212 and v["missing_ranks"][:1] == [3]'
check "  the graph: all_reduce on the world waits for ranks 1 and 3-16777214, one node of missing ranks" verdict world-graph \
    'd["waits_for"]["calls"] == [{"kind": "collective", "op": "all_reduce", "group": None, "seq": None, "in": 2, "absent": [[1, 1], [3, 16777214]], "mismatch": 0}] and d["waits_for"]["ranks"]["rank"] == [0, 1, 2, 3] and d["waits_for"]["ranks"]["last"] == [0, 1, 2, 16777214] and d["waits_for"]["ranks"]["state"] == [None, "asleep", None, "missing"]'
check "  culprit_count 16777213: rank 1 and the 16777212 missing" verdict world-graph 'v["facts"]["culprit_count"] == 16777213'
bash -c "$small"' exec timeout 50 "$@"' text "$HANGDX" analyze "$T/world-graph.json" >"$T/world-graph.txt" 2>&1
check "  the text's culprit line says it names the first ones" grep -qx '  culprit ranks: 1,3-65538... (16777213 in all)' "$T/world-graph.txt"
check "  the summary names the range" grep -q 'also rooted at ranks 3-16777214 (missing)' <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"]["summary"])' "$T/world-graph.out")
bash -c "$small"' exec timeout 50 "$@"' dot "$HANGDX" analyze --format dot "$T/world-graph.json" >"$T/world-graph.dot" 2>&1
check "  --format dot within 200 MB: one node for ranks 3-16777214, waited for by the call" \
    grep -q 'r3 \[label="ranks 3-16777214\\nmissing\\nculprit"' "$T/world-graph.dot"
check "    and its edge" grep -qx '    c0 -> r3 \[label="waits for"\];' "$T/world-graph.dot"
# A job of 2 hosts x 8 ranks that claims a world of 131072 (the largest jobs run 100 000+ GPUs):
# the world is taken, no note says otherwise, and its 131056 ranks no input shows are one range.
python3 "$HDX_SOURCE_DIR/scripts/benchmarks/gen-synthetic-job" --hosts 2 --ranks-per-host 8 --culprit 5 \
    "$REG/snapshot/snapshot-world-size-max.json" "$T/w131072" >/dev/null
python3 - "$T/w131072" <<'PY'
import glob, json, sys
for f in glob.glob(sys.argv[1] + "/snap-node*.json"):
    d = json.load(open(f))
    for p in d["processes"]:
        p["world_size"] = 131072
        p["env"]["WORLD_SIZE"] = "131072"
    json.dump(d, open(f, "w"))
PY
run_small w131072 "$T/w131072"
check "16 ranks claiming a world of 131072: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  culprit rank 5, world_size 131072 taken, ranks 16-131071 missing (131056)" verdict w131072 \
    'v["culprit_ranks"] == [5] and v["facts"]["world_size"] == 131072 and v["missing_count"] == 131056 and v["missing_ranks"][:2] == [16, 17] and not any("more than hangdx takes" in n for n in d["notes"])'
"$HANGDX" analyze --format dot "$T/w131072" >"$T/w131072.dot" 2>&1
check "  --format dot: the all_reduce waits for rank 5 and one node of ranks 16-131071" \
    grep -q 'r16 \[label="ranks 16-131071\\nmissing' "$T/w131072.dot"
run_small world-65536 --html "$T/world.html" "$T/world-65536.json"
check "a snapshot of ranks 0, 1, 65535 of a world of 65536, with --html: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  culprit rank 1, the 65533 ranks no input shows missing" verdict world-65536 \
    'v["culprit_ranks"] == [1] and v["missing_ranks"] == list(range(2, 65535))'
mkdir "$T/fr"
python3 - "$HDX_SOURCE_DIR/tests/fixtures/fr/world_skip_json" "$T/fr" <<'PY'
import json, sys
for r, name in ((0, 0), (1, 1), (2, 2), (3, 16777215)):
    d = json.load(open(f"{sys.argv[1]}/nccl_trace_rank_{r}"))
    d["pg_config"]["0"]["ranks"] = "[0, 1, 2, 16777215]"
    for e in d["entries"]:
        for k in ("collective_seq_id", "op_id", "record_id"):
            e[k] += 1 << 40
    json.dump(d, open(f"{sys.argv[2]}/nccl_trace_rank_{name}", "w"))
PY
run_small fr "$T/fr"
check "Flight Recorder dumps of ranks 0-2 and 16777215, sequence numbers past 2^40: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  culprit rank 2 at all_reduce #2^40+7" verdict fr 'v["culprit_ranks"] == [2] and v["facts"]["seq"] == (1 << 40) + 7'
mkdir -m 700 "$T/traces"
: >"$T/lock"
boot=$(cat /proc/sys/kernel/random/boot_id) host=$(hostname)
cat >"$T/traces/$host-4194303.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":4194303,"ppid":1,"host":"$host","boot_id":"$boot","start_time":42,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"16777215","LOCAL_RANK":"16777215","WORLD_SIZE":"16777215","LOCAL_WORLD_SIZE":"16777215"}}
{"type":"acquire","t":1700000001000000000,"tid":4194303,"path":"$T/lock","fd":5}
JSON
cat >"$T/traces/$host-4194302.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":4194302,"ppid":1,"host":"$host","boot_id":"$boot","start_time":43,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"0","WORLD_SIZE":"16777215"}}
{"type":"wait","t":1700000060000000000,"tid":4194302,"path":"$T/lock","how":"stat","polls":512,"since":1700000002000000000}
JSON
run_small traces "$T/traces"
check "traces of rank 16777215 (WORLD_SIZE 16777215) and rank 0: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  build_lock: rank 0 waits on the lock rank 16777215 created" verdict traces \
    'v["class"] == "build_lock" and v["culprit_ranks"] == [0] and "created by rank 16777215" in v["summary"]'
tail -n +2 "$LOGS/store_barrier_missing_worker.log" | sed 's/world_size=4/world_size=2000000000/' >"$T/store-world.log"
run_small store-world "$T/store-world.log"
check "a store barrier's timeout claiming world_size=2000000000 over 3 arrived: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  rendezvous_wait, 1999999997 missing counted, none enumerated" verdict store-world \
    'v["class"] == "rendezvous_wait" and v["missing_count"] == 1999999997 and v["missing_ranks"] == []'
tail -n +2 "$LOGS/monitored_barrier_timed_out.log" | sed 's/WORLD_SIZE=4/WORLD_SIZE=16777215/' >"$T/monitored-world.log"
run_small monitored-world "$T/monitored-world.log"
check "monitoredBarrier's timeout under a printed WORLD_SIZE=16777215: exit 0 within 200 MB (got $rc)" test $rc -eq 0
check "  the world taken: ranks 3-16777214 unchecked, the first 65536 named, the culprits" verdict monitored-world \
    'v["culprit_ranks"] == list(range(3, 65539)) and v["facts"]["unchecked"] == v["culprit_ranks"] and v["facts"]["unchecked_count"] == 16777212 and "not checked: ranks 3-65538... (16777212 in all)" in v["summary"]'

exit $fail
