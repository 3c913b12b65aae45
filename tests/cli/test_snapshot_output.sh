#!/bin/bash
# hangdx snapshot -o FILE checks that FILE can be written before it captures: a directory that
# does not exist, or -o naming a directory, fails at once (exit 2) with what to do, and
# nothing is captured (no "looking at" line). A writable FILE still gets the snapshot.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
fail=0
check() { if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1" >&2; fail=1; fi; }
T=$(mktemp -d /tmp/hdx-test-snapout-XXXXXX)
sleep 60 & target=$!
trap 'kill $target 2>/dev/null; rm -rf "$T"' EXIT

"$HANGDX" snapshot -o "$T/nonexistent/x.json" $target >/dev/null 2>"$T/err"; rc=$?
check "-o in a directory that does not exist: exit 2 (got $rc)" test $rc -eq 2
check "  the message names the file and says what to do" \
    grep -q "cannot write the snapshot to $T/nonexistent/x.json: No such file or directory — its directory does not exist" "$T/err"
check "  before any capture" bash -c "! grep -q 'looking at' '$T/err'"

"$HANGDX" snapshot -o "$T" $target >/dev/null 2>"$T/err"; rc=$?
check "-o naming a directory: exit 2 (got $rc), before any capture" \
    bash -c "test $rc -eq 2 && grep -q 'it is a directory' '$T/err' && ! grep -q 'looking at' '$T/err'"

"$HANGDX" snapshot --samples 1 -o "$T/snap.json" $target 2>"$T/err"; rc=$?
check "a writable -o FILE: exit 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "  the snapshot is there, and no probe file is left" \
    bash -c "grep -q '\"schema\"' '$T/snap.json' && test \$(ls '$T' | grep -c tmp) -eq 0"
exit $fail
