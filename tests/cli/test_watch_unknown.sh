#!/bin/bash
# hangdx run --hang-timeout on a job stuck where no rule applies (a Python process reading a
# pipe that nobody writes): the verdict is unknown, and its line on stderr points at the stack
# groups in DIR/report.txt, not at groups "below" (stderr has none). Needs $HANGDX, ptrace.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
. "$(dirname "$0")/../check.sh"
T=$(mktemp -d /tmp/hdx-test-watchunk-XXXXXX)
trap 'rm -rf "$T"' EXIT
"$HANGDX" run --hang-timeout 2 --on-hang kill -d "$T/hang" -- \
    /usr/bin/python3 -c 'import os; r, w = os.pipe(); os.read(r, 1)' 2>"$T/err"; rc=$?
cat "$T/err"
check "the stuck job is ended: exit 124 (got $rc)" test $rc -eq 124
check "the verdict on stderr is unknown" grep -q "^hangdx: unknown: " "$T/err"
check "  and points at the report's stack groups" \
    grep -q "^hangdx: unknown: .*read the stack groups in $T/hang/report.txt\$" "$T/err"
check "  not at groups 'below'" bash -c "! grep -q 'below' '$T/err'"
check "the report has the stack groups" grep -q "stacks, grouped" "$T/hang/report.txt"
exit $fail
