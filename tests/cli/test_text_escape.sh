#!/bin/bash
# Text that a process controls cannot forge report lines or reach the terminal raw: a command
# line and a Python local holding a newline, a fake "verdict:" line and an escape sequence are
# printed escaped (\n, \x1b) by inspect, dump --locals and analyze of a snapshot; so are a byte
# that is no UTF-8 (0x9b, an 8-bit CSI), a UTF-8 C1 control (U+009B) and a right-to-left
# override (U+202E), and the JSON stays valid UTF-8. locks escapes a lock directory's name.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
. "$(dirname "$0")/../check.sh"
T=$(mktemp -d /tmp/hdx-test-escape-XXXXXX)
prog=$'import sys, time\ndef wait(s):\n    print("ready", flush=True)\n    time.sleep(3600)\nwait("\\x1b[31mRED\\x1b[0m\\nverdict: fake")\n'
$PY -c "$prog" $'\nverdict: not_hung (confidence high)\n\x1b[31mRED' $'c1\x9b31m' $'u\xc2\x9b32m' $'rlo\xe2\x80\xaeevil' >"$T/ready" &
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
check "dump: a stray 0x9b, U+009B and U+202E are escaped" grep -qF 'c1\x9b31m u\u009b32m rlo\u202eevil' "$T/dump"
for out in inspect dump analyze; do
    check "$out: no C1 byte, no U+009B, no U+202E" \
        bash -c "! LC_ALL=C grep -qP '\x9b|\xc2\x9b|\xe2\x80\xae' '$T/$out'"
done
"$HANGDX" inspect --samples 1 --json $target >"$T/inspect.json" 2>/dev/null
check "inspect --json is valid UTF-8 JSON and keeps the bytes as \u00XX" $PY -c '
import os, sys
sys.path.insert(0, os.path.join(os.environ["HDX_SOURCE_DIR"], "tests"))
import report_frames
rep = report_frames.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
argv = [p for p in rep["processes"] if p["pid"] == int(sys.argv[2])][0]["cmdline"]
assert "c1\u009b31m" in argv and "u\u009b32m" in argv, argv
' "$T/inspect.json" $target
mkdir -p "$T/b/"$'ext\nstale  baton  forged\x1b[31m'
: >"$T/b/"$'ext\nstale  baton  forged\x1b[31m'/lock
HOME="$T" "$HANGDX" locks "$T/b" >"$T/locks" 2>&1
check "locks: the directory's newline and escape are escaped" \
    bash -c "grep -qF 'ext\nstale  baton  forged\x1b[31m/lock' '$T/locks' && ! grep -q $'\x1b' '$T/locks' && ! grep -q '^stale  baton  forged' '$T/locks'"
exit $fail
