#!/bin/bash
# hangdx run with a command that cannot start (exit 127): the trace directory that run made
# itself (its default ./hangdx-<date>-<time>/, or a -d DIR it created) is removed when nothing
# was written into it; a -d DIR that existed before, or one with files, is kept. Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
. "$(dirname "$0")/../check.sh"
T=$(mktemp -d /tmp/hdx-test-rundir-XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

"$HANGDX" run -- /nonexistent/cmd 2>"$T/err"; rc=$?
check "a command that does not exist: exit 127 (got $rc)" test $rc -eq 127
check "no ./hangdx-<date>-<time>/ is left behind ($(ls -d hangdx-* 2>/dev/null))" \
    bash -c "! ls -d hangdx-* >/dev/null 2>&1"
check "  and stderr says it was removed" grep -q "removed the empty trace directory $T/hangdx-" "$T/err"

"$HANGDX" run -d made -- /nonexistent/cmd 2>/dev/null; rc=$?
check "-d DIR that run made: exit 127 (got $rc), DIR removed" bash -c "test $rc -eq 127 && test ! -e made"

mkdir before
"$HANGDX" run -d before -- /nonexistent/cmd 2>"$T/err"; rc=$?
check "-d DIR that was there before: exit 127 (got $rc), DIR kept" bash -c "test $rc -eq 127 && test -d before"
check "  and nothing said about removing it" bash -c "! grep -q removed '$T/err'"

"$HANGDX" run -d traced -- /bin/sh -c 'exit 3' 2>/dev/null; rc=$?
check "a command that ran: its own exit status (got $rc), the trace directory kept with its traces" \
    bash -c "test $rc -eq 3 && ls traced/*.jsonl >/dev/null 2>&1"
exit $fail
