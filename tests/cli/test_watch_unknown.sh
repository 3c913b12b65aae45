#!/bin/bash
# hangdx run --hang-timeout on a job stuck where no rule applies (a Python process reading a
# pipe that nobody writes): the verdict is unknown, and its line on stderr points at the stack
# groups in DIR/report.txt, not at groups "below" (stderr has none). Under --on-hang kill the
# job is not ended (an unknown verdict's confidence is low); the test ends it. Needs $HANGDX, ptrace.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
. "$(dirname "$0")/../check.sh"
T=$(mktemp -d /tmp/hdx-test-watchunk-XXXXXX)
trap 'rm -rf "$T"' EXIT
"$HANGDX" run --hang-timeout 2 --on-hang kill -d "$T/hang" -- \
    /usr/bin/python3 -c 'import os; r, w = os.pipe(); os.read(r, 1)' 2>"$T/err" &
pid=$!
for _ in $(seq 900); do grep -q "^hangdx: not ending the job" "$T/err" && break; sleep 0.1; done
kill -0 $pid 2>/dev/null; alive=$?
kill -TERM $pid 2>/dev/null  # passed on to the job
wait $pid; rc=$?
cat "$T/err"
check "the verdict on stderr is unknown" grep -q "^hangdx: unknown: " "$T/err"
check "  and points at the report's stack groups" \
    grep -q "^hangdx: unknown: .*read the stack groups in $T/hang/report.txt\$" "$T/err"
check "  not at groups 'below'" bash -c "! grep -q 'below' '$T/err'"
check "the report has the stack groups" grep -q "stacks, grouped" "$T/hang/report.txt"
check "low confidence: --on-hang kill does not end the job" \
    grep -q "^hangdx: not ending the job: the verdict's confidence is low" "$T/err"
check "  it was still running (ended by the test: SIGTERM, exit 143, got $rc)" test $alive -eq 0 -a $rc -eq 143
exit $fail
