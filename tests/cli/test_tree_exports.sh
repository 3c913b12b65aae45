#!/bin/bash
# The merged stack tree of the text report and the exports of analyze --format, on recorded
# inputs: a gloo collective hang without process groups (tests/fixtures/evidence), Megatron's
# TP x PP x DP groups on 8 ranks (tests/fixtures/snapshots/megatron_tp_dp_world.json), and a
# synthetic job of 32 ranks on 4 hosts with Megatron's groups made by
# scripts/benchmarks/gen-synthetic-job from the real snapshot of bench-data. Each checks the
# exact branches and rank ranges of the tree, the waits-for edges of the dot file, and the
# exports by their formats' rules (check_exports.py). Needs $HANGDX and $HDX_SOURCE_DIR.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
: "${HDX_SOURCE_DIR:?HDX_SOURCE_DIR must name the source tree}"
PY=/usr/bin/python3
HERE=$(dirname "$0")
. "$HERE/../check.sh"
CHECK="$PY $HERE/check_exports.py"

T=$(mktemp -d /tmp/hdx-test-tree-XXXXXX)
trap 'rm -rf "$T"' EXIT

# tree_of FILE: the stack tree section of a text report, without its title.
tree_of() { sed -n '/^stack tree (/,/^$/p' "$1" | sed '1d;/^$/d'; }
# same NAME WANT GOT: GOT is WANT, else both are shown.
same() { if [ "$2" = "$3" ]; then return 0; fi; printf 'want:\n%s\ngot:\n%s\n' "$2" "$3" >&2; return 1; }

# ---- a collective hang, no process groups: 3 ranks, rank 2 asleep ----
SKIP=$HDX_SOURCE_DIR/tests/fixtures/evidence/gloo_collective_skip.json
"$HANGDX" analyze "$SKIP" >"$T/skip.txt" 2>"$T/err"
check "3 ranks: no tree without --tree (it is shown for more than 8)" eval '! grep -q "^stack tree" "$T/skip.txt"'
"$HANGDX" analyze --tree "$SKIP" >"$T/skip-tree.txt" 2>"$T/err"; rc=$?
check "analyze --tree: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "the tree: ranks 0-2 share main, 0-1 go on into all_reduce, 2 (the culprit) folded on one line" \
    same tree "$(cat <<'EOF'
  [0-2] 3 ranks
      _start [python3.11]
      __libc_start_main [libc.so.6]
      __libc_start_call_main [libc.so.6]
      Py_BytesMain [python3.11]
      Py_RunMain [python3.11]
      pyrun_file [python3.11]
      run_mod [python3.11]
      run_eval_code_obj [python3.11]
      <module> (hangs.py:346)
      main (hangs.py:341)
      [0-1] 2 ranks
          case_collective_skip (hangs.py:220)
          train_step (hangs.py:126)
          all_reduce (distributed_c10d.py:1541)
          ?? [libtorch_python.so.1.13.0]
          ?? [libtorch_python.so.1.13.0]
          c10d::Work::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >) [libtorch_cpu.so.1.13.0]
          pthread_cond_wait [libc.so.6]
          __futex_abstimed_wait_common [libc.so.6]
      [2] 1 rank (culprit): case_collective_skip (hangs.py:218) > skip_and_sleep (hangs.py:149) > time_sleep [python3.11] > clock_nanosleep [libc.so.6]
EOF
)" "$(tree_of "$T/skip-tree.txt")"
check "the tree comes before the processes" \
    $PY -c 'import sys; t=open(sys.argv[1]).read(); assert -1 < t.index("\nstack tree (") < t.index("\nprocesses:"), t' "$T/skip-tree.txt"

"$HANGDX" analyze --format collapsed "$SKIP" >"$T/skip.folded" 2>"$T/err"; rc=$?
check "--format collapsed: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "collapsed: two lines, 2 + 1 ranks, the stacks of the tree's leaves" $PY - \
    "$($CHECK collapsed "$T/skip.folded" "$T/skip-tree.txt")" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
assert [c for _, c in d["stacks"]] == [2, 1] and d["total"] == 3, d
assert d["stacks"][0][0][-1] == "__futex_abstimed_wait_common [libc.so.6]", d["stacks"][0]
assert d["stacks"][1][0][-3:] == ["skip_and_sleep (hangs.py:149)", "time_sleep [python3.11]", "clock_nanosleep [libc.so.6]"]
PYEOF

"$HANGDX" analyze --format speedscope -o "$T/skip.speedscope.json" "$SKIP" 2>"$T/err"; rc=$?
check "--format speedscope -o FILE: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
out=$($CHECK speedscope "$T/skip.speedscope.json")
check "speedscope: valid by the schema's rules" test -n "$out"
check "speedscope: a profile per class, named by its ranks, weighted by their count; the culprit's active" $PY - "$out" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
p = d["profiles"]
assert [x["name"] for x in p] == ["ranks 0-1 (2 ranks)", "rank 2 (1 rank), culprit"], p
assert [x["weights"] for x in p] == [[2], [1]], p
assert p[1]["stacks"][0][0] == "_start [python3.11]" and p[1]["stacks"][0][-1] == "clock_nanosleep [libc.so.6]", p[1]
assert d["active"] == 1, d["active"]
PYEOF
check "speedscope: each distinct frame once in shared.frames" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = [f["name"] for f in d["shared"]["frames"]]
assert len(names) == len(set(names)) == 21, names  # the two "??" of libtorch_python are one
assert {"name": "main (hangs.py:341)", "file": "/work/main/tests/distributed/hangs.py", "line": 341} in d["shared"]["frames"]' \
    "$T/skip.speedscope.json"

"$HANGDX" analyze --format dot "$SKIP" >"$T/skip.dot" 2>"$T/err"; rc=$?
check "--format dot: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "dot: ranks 0-1 in the all_reduce, which waits for rank 2, the culprit; the tree's 3 branches" $PY - \
    "$($CHECK dot "$T/skip.dot")" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
n, e = d["nodes"], d["edges"]
assert 'label="all_reduce on the world group\\n2 in it"' in n["c0"], n["c0"]
assert sorted(e) == sorted([["r0", "c0", None], ["r1", "c0", None], ["c0", "r2", "waits for"],
                            ["t0", "t1", None], ["t0", "t2", None]]), e
assert "culprit" in n["r2"] and "peripheries=2" in n["r2"] and "peripheries" not in n["r0"], n
assert n["t2"].startswith('label="rank 2 (1 rank)\\lcase_collective_skip (hangs.py:218)') and "filled" in n["t2"], n["t2"]
assert "filled" not in n["t0"] and "filled" not in n["t1"], n
PYEOF

# ---- Megatron's groups, 8 ranks: rank 5 skipped the all_gather of TP group 4-5 ----
MEG=$HDX_SOURCE_DIR/tests/fixtures/snapshots/megatron_tp_dp_world.json
"$HANGDX" analyze "$MEG" >"$T/meg.txt" 2>"$T/err"
check "8 ranks: no tree by default" eval '! grep -q "^stack tree" "$T/meg.txt"'
"$HANGDX" analyze --tree "$MEG" >"$T/meg-tree.txt" 2>"$T/err"
check "the tree: barrier 0-3, all_reduce 6-7, all_gather 4, rank 5 the culprit" \
    same tree "$(cat <<'EOF'
  [0-7] 8 ranks
      [0-3] 4 ranks
          barrier (distributed_c10d.py:40)
      [6-7] 2 ranks
          all_reduce (distributed_c10d.py:40)
      [4] 1 rank: all_gather (distributed_c10d.py:40)
      [5] 1 rank (culprit): skip_and_sleep (pgroups.py:40)
EOF
)" "$(tree_of "$T/meg-tree.txt")"
"$HANGDX" analyze --format collapsed "$MEG" >"$T/meg.folded"
check "collapsed: the 4 classes of the tree, 8 ranks" same folded "$(cat <<'EOF'
barrier (distributed_c10d.py:40) 4
all_reduce (distributed_c10d.py:40) 2
all_gather (distributed_c10d.py:40) 1
skip_and_sleep (pgroups.py:40) 1
EOF
)" "$(cat "$T/meg.folded")"
check "collapsed read back: the tree's leaves" eval '$CHECK collapsed "$T/meg.folded" "$T/meg-tree.txt" >/dev/null'
"$HANGDX" analyze --format dot -o "$T/meg.dot" "$MEG"
check "dot: the calls on the world, TP 4-5 and DP groups, and what each waits for" $PY - \
    "$($CHECK dot "$T/meg.dot")" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
n, e = d["nodes"], d["edges"]
calls = {k: v.split('label="')[1].split("\\n")[0] for k, v in n.items() if k.startswith("c")}
assert calls == {"c0": "barrier on the world group", "c1": "all_gather on TP group 4-5",
                 "c2": "all_reduce on DP group 4,6", "c3": "all_reduce on DP group 5,7"}, calls
waits = sorted(x for x in e if not x[0].startswith("t"))
assert waits == sorted([["r0", "c0", None], ["r1", "c0", None], ["r2", "c0", None], ["r3", "c0", None],
                        ["r4", "c1", None], ["r6", "c2", None], ["r7", "c3", None],
                        ["c0", "r4", "waits for"], ["c0", "r5", "waits for"], ["c0", "r6", "waits for"],
                        ["c0", "r7", "waits for"], ["c1", "r5", "waits for"], ["c2", "r4", "waits for"],
                        ["c3", "r5", "waits for"]]), waits
assert [k for k, v in n.items() if "culprit" in v and k.startswith("r")] == ["r5"], n
assert sorted(x for x in e if x[0].startswith("t")) == [["t0", "t1", None], ["t0", "t2", None],
                                                        ["t0", "t3", None], ["t0", "t4", None]], e
PYEOF

# ---- 32 ranks on 4 hosts, TP=4 x PP=2 x DP=4: rank 13 skipped its TP group's all_reduce ----
"$HDX_SOURCE_DIR/scripts/benchmarks/gen-synthetic-job" --hosts 4 --ranks-per-host 8 --threads 3 --frames 20 \
    --culprit 13 --layout 4,2,4 "$HDX_SOURCE_DIR/scripts/benchmarks/bench-data/gloo_collective_skip.snapshot.json" \
    "$T/syn" >/dev/null
"$HANGDX" analyze "$T/syn" >"$T/syn.txt" 2>"$T/err"; rc=$?
check "32 ranks: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "32 ranks: the tree by default, 31 ranks in all_reduce, rank 13 the culprit, folded" \
    same tree "$(cat <<'EOF'
  [0-31] 32 ranks
      _start [python3.11]
      __libc_start_main [libc.so.6]
      __libc_start_call_main [libc.so.6]
      Py_BytesMain [python3.11]
      Py_RunMain [python3.11]
      pyrun_file [python3.11]
      run_mod [python3.11]
      run_eval_code_obj [python3.11]
      <module> (hangs.py:346)
      [0-12,14-31] 31 ranks
          case_collective_skip (hangs.py:220)
          train_step (hangs.py:126)
          main (hangs.py:341)
          case_collective_skip (hangs.py:220)
          train_step (hangs.py:126)
          all_reduce (distributed_c10d.py:1541)
          ?? [libtorch_python.so.1.13.0]
          ?? [libtorch_python.so.1.13.0]
          c10d::Work::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >) [libtorch_cpu.so.1.13.0]
          pthread_cond_wait [libc.so.6]
          __futex_abstimed_wait_common [libc.so.6]
      [13] 1 rank (culprit): main (hangs.py:341) > case_collective_skip (hangs.py:218) > main (hangs.py:341) > case_collective_skip (hangs.py:218) > main (hangs.py:341) > case_collective_skip (hangs.py:218) > main (hangs.py:341) > case_collective_skip (hangs.py:218) > skip_and_sleep (hangs.py:149) > time_sleep [python3.11] > clock_nanosleep [libc.so.6]
EOF
)" "$(tree_of "$T/syn.txt")"
"$HANGDX" analyze --no-tree "$T/syn" >"$T/syn-no.txt" 2>/dev/null
check "--no-tree: no tree, the rest of the report as it was" \
    eval '! grep -q "^stack tree" "$T/syn-no.txt" && diff <(sed "/^stack tree (/,/^$/d" "$T/syn.txt") "$T/syn-no.txt" >&2'
"$HANGDX" analyze --format collapsed "$T/syn" >"$T/syn.folded"
check "collapsed: 31 + 1 ranks, the tree's leaves" $PY - "$($CHECK collapsed "$T/syn.folded" "$T/syn.txt")" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
assert [c for _, c in d["stacks"]] == [31, 1] and d["total"] == 32, d
PYEOF
"$HANGDX" analyze --format speedscope "$T/syn" >"$T/syn.speedscope.json"
check "speedscope: valid, 2 profiles of 31 and 1 ranks" $PY - "$($CHECK speedscope "$T/syn.speedscope.json")" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
assert [(x["name"], x["weights"]) for x in d["profiles"]] == [("ranks 0-12,14-31 (31 ranks)", [31]),
                                                              ("rank 13 (1 rank), culprit", [1])], d
PYEOF
"$HANGDX" analyze --format dot "$T/syn" >"$T/syn.dot"
check "dot: ranks 12,14,15 in TP group 12-15's all_reduce, which waits for rank 13; the world's waits for 12-15" \
    $PY - "$($CHECK dot "$T/syn.dot")" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
n, e = d["nodes"], d["edges"]
tp = [k for k, v in n.items() if "all_reduce on TP group 12-15" in v]
world = [k for k, v in n.items() if "all_reduce on the world group\\n28 in it" in v]
assert len(tp) == 1 and len(world) == 1, n
assert sorted(x[0] for x in e if x[1] == tp[0]) == ["r12", "r14", "r15"], e
assert [x[1] for x in e if x[0] == tp[0]] == ["r13"], e
assert sorted(x[1] for x in e if x[0] == world[0]) == ["r12", "r13", "r14", "r15"], e
assert len([x for x in e if x[1] == world[0]]) == 28, e
assert [k for k, v in n.items() if "culprit" in v and k.startswith("r")] == ["r13"], n
PYEOF

# ---- inputs without stacks: the export is valid and empty, and stderr says why ----
LOG=$(dirname "$0")/../fixtures/logs/desync_not_joined.log
check "a snapshot's export says nothing on stderr" test ! -s "$T/err"
for fmt in speedscope collapsed dot; do
    "$HANGDX" analyze --format $fmt -o "$T/log.$fmt" "$LOG" 2>"$T/err"; rc=$?
    check "a job log alone, --format $fmt: exit 0 (got $rc)" test $rc -eq 0
    check "  stderr says it is empty: no process has a stack, logs carry none" \
        grep -q "is empty: no process of the inputs has a stack (job logs and traces carry none)" "$T/err"
done
check "the log's speedscope file is valid, with no profile" $PY -c '
import json, sys; d = json.loads(sys.argv[1]); assert d["profiles"] == [] and d["active"] is None, d' \
    "$($CHECK speedscope "$T/log.speedscope")"
check "the log's collapsed export has no line" test ! -s "$T/log.collapsed"
check "the log's dot graph says it has no waits-for graph as the inputs hold no stack" \
    grep -q 'none \[shape=plaintext, label="no waits-for graph: no rank of the inputs has a stack' "$T/log.dot"

# ---- the command line ----
"$HANGDX" analyze --format svg "$SKIP" >/dev/null 2>"$T/err"; rc=$?
check "--format svg: usage error 64 (got $rc)" test $rc -eq 64
check "it names the formats" grep -q "\-\-format wants text, json, speedscope, collapsed or dot, not 'svg'" "$T/err"
"$HANGDX" analyze --format json "$SKIP" >"$T/skip.json" 2>/dev/null
check "--format json is the hangdx.report/2 of --json" eval 'cmp -s "$T/skip.json" <("$HANGDX" analyze --json "$SKIP" 2>/dev/null)'
for opts in "--json --format dot" "--format collapsed --format dot" "--tree --no-tree"; do
    # shellcheck disable=SC2086
    "$HANGDX" analyze $opts "$SKIP" >"$T/out" 2>"$T/err"; rc=$?
    check "$opts: usage error 64 (got $rc), nothing printed" bash -c "test $rc -eq 64 && test ! -s '$T/out'"
    check "  it says two options ask for different ones" grep -q "two options ask for different" "$T/err"
done
"$HANGDX" analyze --json --format json "$SKIP" >/dev/null 2>&1 && "$HANGDX" analyze --tree --tree "$SKIP" >/dev/null 2>&1; rc=$?
check "the same option twice is no conflict (got $rc)" test $rc -eq 0
for opts in "--json --tree" "--format collapsed --no-tree" "--format dot --tree"; do
    # shellcheck disable=SC2086
    "$HANGDX" analyze $opts "$SKIP" >"$T/out" 2>"$T/err"; rc=$?
    check "$opts: usage error 64 (got $rc), nothing printed, the tree options named as the text report's" \
        bash -c "test $rc -eq 64 && test ! -s '$T/out' && grep -q -- '--tree and --no-tree shape the text report' '$T/err'"
done
for opts in "-o $T/x1 -o $T/x2" "--html $T/a.html --html $T/b.html"; do
    # shellcheck disable=SC2086
    "$HANGDX" analyze $opts "$SKIP" >"$T/out" 2>"$T/err"; rc=$?
    check "$opts: usage error 64 (got $rc), says it was given twice, writes nothing" \
        bash -c "test $rc -eq 64 && grep -q 'given twice' '$T/err' && ! ls '$T'/x[12] '$T'/[ab].html 2>/dev/null"
done
for cmd in analyze inspect; do
    check "$cmd --help names --format, its exports and --tree/--no-tree" \
        eval '"$HANGDX" $cmd --help | grep -q "speedscope" && "$HANGDX" $cmd --help | grep -q -- "--tree, --no-tree"'
done
exit $fail
