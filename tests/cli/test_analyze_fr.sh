#!/bin/bash
# hangdx analyze on NCCL Flight Recorder dumps (tests/fixtures/fr, built by make_fixtures.py from
# torch's dump code): the class, the culprit ranks, the group and the sequence number of each
# case; the JSON form judged as the pickle; a pickle that would run code refused with exit 2.
set -u
F="$HDX_SOURCE_DIR/tests/fixtures/fr"
fail=0
tmp=$(mktemp); trap 'rm -f "$tmp" "$tmp.err"' EXIT
check() { # python expression over the report r (v its verdict, f its facts), what it means
    if ! python3 -c "import json,sys; r=json.load(open(sys.argv[1])); v=r['verdict']; f=v['facts']; g=v['group'] or {}; sys.exit(0 if ($1) else 1)" "$tmp"; then
        echo "FAIL: $2"; python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['verdict']; print(json.dumps({k: v[k] for k in ('class','finding','facts','culprit_ranks','group','summary')}, indent=1))" "$tmp"; fail=1
    fi
}
analyze() { "$HANGDX" analyze --json "$@" > "$tmp" 2> "$tmp.err" || { echo "FAIL: analyze $* exited $?"; cat "$tmp.err"; fail=1; }; }

# (a) rank 2 never scheduled all_reduce #7 of the world group
analyze "$F/world_skip"
check "v['class']=='collective_wait' and v['culprit_ranks']==[2] and g.get('desc')=='default_pg' and f.get('seq')==7 and f.get('op')=='all_reduce'" "world_skip: collective_wait, culprit 2, seq 7"
check "'all_reduce #7' in v['summary'] and 'ranks 0-1,3 wait for it' in v['summary']" "world_skip: the words name the call and who waits"
check "any('nccl_trace_rank_2' in n and 'every entry completed' in n for n in r['notes'])" "world_skip: the note on rank 2's last entry"
# the same files named one by one
analyze "$F"/world_skip/nccl_trace_rank_{0,1,2,3}
check "v['culprit_ranks']==[2] and f.get('seq')==7" "world_skip, files named: culprit 2"
# (f) its JSON form
analyze "$F/world_skip_json"
check "v['class']=='collective_wait' and v['culprit_ranks']==[2] and g.get('desc')=='default_pg' and f.get('seq')==7" "world_skip_json: the JSON form, culprit 2, seq 7"
# a rank's dump missing: rank 2 is then a missing rank of the world group
analyze "$F"/world_skip/nccl_trace_rank_{0,1,3}
check "v['culprit_ranks']==[2] and v['missing_ranks']==[2]" "world_skip without rank 2's dump: rank 2 missing"

# (b) TPxDP: rank 5 behind in its TP group, the DP all_reduces of the others wait on 4 and 5
analyze "$F/tp_dp"
check "v['class']=='collective_wait' and v['culprit_ranks']==[5] and g.get('desc')=='TENSOR_MODEL_PARALLEL_GROUP' and g.get('ranks')==[4,5] and f.get('seq')==5" "tp_dp: culprit 5 in TP group 4-5, seq 5"
check "sorted(p['name'] for p in r['process_groups'])==['0','1','2','3','4','5','6']" "tp_dp: the groups of every pg_config"
check "'DP groups' in v['summary'] and 'rank 4 waits for it' in v['summary']" "tp_dp: the DP waits told as consequences"

# (c) all_reduce #7 with other sizes on rank 3: a collective mismatch
analyze "$F/size_mismatch"
check "v['class']=='collective_wait' and v['culprit_ranks']==[3] and f.get('seq')==7 and g.get('desc')=='default_pg'" "size_mismatch: culprit 3, seq 7"
check "'different collectives' in v['summary'] and '[[1024]]' in v['summary'] and '[[2048]]' in v['summary']" "size_mismatch: the words show both sizes"

# (d) a send 0->1 that no recv answers
analyze "$F/p2p_unmatched"
check "v['class']=='p2p_mismatch' and v['culprit_ranks']==[1] and f.get('p2p_seq')==1 and f.get('op')=='send'" "p2p_unmatched: p2p_mismatch, culprit 1, p2p seq 1"

# (e) a pickle with a GLOBAL opcode: refused, named, exit 2 (docs/design.md "Exit status")
"$HANGDX" analyze "$F/global_opcode/nccl_trace_rank_0" > /dev/null 2> "$tmp.err"
rc=$?
[ $rc = 2 ] || { echo "FAIL: global_opcode: exit $rc, not 2"; fail=1; }
grep -q "nccl_trace_rank_0: refused: opcode GLOBAL at offset [0-9]" "$tmp.err" || { echo "FAIL: global_opcode: message"; cat "$tmp.err"; fail=1; }
grep -q "give hangdx the JSON" "$tmp.err" || { echo "FAIL: global_opcode: no remedy"; fail=1; }

# a dump whose name ends in no rank
d=$(mktemp -d)
cp "$F/world_skip/nccl_trace_rank_0" "$d/nccl_trace_rank_"
"$HANGDX" analyze "$d/nccl_trace_rank_" > /dev/null 2> "$tmp.err"
rc=$?
rm -rf "$d"
[ $rc = 2 ] && grep -q "ends in no rank" "$tmp.err" || { echo "FAIL: no rank in the name: exit $rc"; cat "$tmp.err"; fail=1; }

[ $fail = 0 ] && echo "fr analyze: all checks passed"
exit $fail
