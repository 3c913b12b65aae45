#!/bin/bash
# hangdx analyze on foreign dumps alone: three py-spy dumps give collective_wait with
# culprit rank 2; two py-spy --json dumps with recv's `src` local give a p2p cycle; a
# faulthandler job log of two ranks in recv gives p2p_mismatch without culprits (no
# locals, so no peers: the waits-for edges cannot be drawn).
set -u
F="$HDX_SOURCE_DIR/tests/fixtures/foreign"
fail=0
check() { # python expression over the report r, what it means
    if ! python3 -c "import json,sys; r=json.load(open(sys.argv[1])); v=r['verdict']; sys.exit(0 if ($1) else 1)" "$tmp"; then
        echo "FAIL: $2"; python3 -m json.tool "$tmp" | head -40; fail=1
    fi
}
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
cd "$F" || exit 1
"$HANGDX" analyze --json pyspy-rank0.txt pyspy-rank1.txt pyspy-rank2.txt > "$tmp" || { echo "analyze failed"; exit 1; }
check "v['class']=='collective_wait' and v['culprit_ranks']==[2] and v['culprit_pids']==[41023] and 'skip_and_sleep' in v['summary'] and 'ranks 0-1 wait in all_reduce' in v['summary']" "py-spy: collective_wait, culprit 2"
check "any('from the file name only' in n for n in r['notes'])" "py-spy: the note on where the rank came from"
"$HANGDX" analyze --json pyspy-both-recv-rank0.json pyspy-both-recv-rank1.json > "$tmp" || exit 1
check "v['class']=='p2p_mismatch' and sorted(v['culprit_ranks'])==[0,1] and 'cycle' in v['summary']" "py-spy --json: a p2p cycle"
"$HANGDX" analyze --json faulthandler-job.log > "$tmp" || exit 1
check "v['class']=='p2p_mismatch' and v['culprit_ranks']==[] and v['confidence']=='low' and 'peer could not be read' in v['summary'] and 'cannot match' not in v['summary']" "faulthandler: p2p without peers, not called a mismatch"
check "sorted(r['ranks']['rank'])==[0,1]" "faulthandler: ranks from the [rankN]: prefixes"
# gdb (rank 0) and eu-stack (rank 2) of the same real collective_skip hang, with rank 1's py-spy dump.
"$HANGDX" analyze --json gdb-rank0.txt pyspy-rank1.txt eustack-rank2.txt > "$tmp" || exit 1
check "v['class']=='collective_wait' and v['culprit_ranks']==[2]" "gdb + py-spy + eu-stack: collective_wait, culprit 2"
# Something else is refused with a message naming it.
echo "just text" > "$tmp.txt"
if "$HANGDX" analyze "$tmp.txt" 2> "$tmp.err"; then echo "FAIL: plain text accepted"; fail=1; fi
grep -q "$tmp.txt" "$tmp.err" || { echo "FAIL: the error does not name the file"; fail=1; }
rm -f "$tmp.txt" "$tmp.err"
[ $fail = 0 ] && echo "foreign analyze: all checks passed"
exit $fail
