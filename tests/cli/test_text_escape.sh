#!/bin/bash
# Text that a process controls cannot forge report lines or reach the terminal raw: a command
# line and a Python local holding a newline, a fake "verdict:" line and an escape sequence are
# printed escaped (\n, \x1b) by inspect, dump --locals and analyze of a snapshot.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
fail=0
check() { if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1" >&2; fail=1; fi; }
T=$(mktemp -d /tmp/hdx-test-escape-XXXXXX)
prog=$'import sys, time\ndef wait(s):\n    print("ready", flush=True)\n    time.sleep(3600)\nwait("\\x1b[31mRED\\x1b[0m\\nverdict: fake")\n'
$PY -c "$prog" $'\nverdict: not_hung (confidence high)\n\x1b[31mRED' >"$T/ready" &
target=$!
trap 'kill $target 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do grep -q ready "$T/ready" && break; sleep 0.1; done

"$HANGDX" inspect --samples 1 $target >"$T/inspect" 2>/dev/null
"$HANGDX" dump --locals $target >"$T/dump" 2>/dev/null
"$HANGDX" snapshot --samples 1 -o "$T/snap.json" $target 2>/dev/null
"$HANGDX" analyze "$T/snap.json" >"$T/analyze" 2>/dev/null
for out in inspect dump analyze; do
    check "$out: no escape byte" bash -c "! grep -q $'\x1b' '$T/$out'"
    check "$out: no forged verdict line" bash -c "! grep -qE '^(verdict: (not_hung|fake)|RED)' '$T/$out'"
done
check "inspect: the command line, escaped" grep -qF '\nverdict: not_hung (confidence high)\n\x1b[31mRED' "$T/inspect"
check "dump --locals: the local, escaped" grep -qF "s='\\x1b[31mRED\\x1b[0m\\nverdict: fake'" "$T/dump"
check "inspect: one verdict line" test "$(grep -c '^verdict:' "$T/inspect")" -eq 1
exit $fail
