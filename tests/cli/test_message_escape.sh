#!/bin/bash
# Text that input controls is escaped in messages on stderr as in the text report (\x1b, \r,
# \xHH for a byte that is no UTF-8, \u009b for a C1 control): a snapshot's schema, a trace
# header's schema, the name of a file in a snapshot directory, a path that does not exist, the
# HANGDX_PATTERNS path, and the command run cannot start. No raw control byte (nor a NUL,
# nor a stray 0xff or 0x9b) reaches stderr. Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../check.sh"
T=$(mktemp -d /tmp/hdx-test-msgesc-XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
LOG=$HERE/../fixtures/logs/build_single_weak_line.log

# Every byte on stderr is printable ASCII, a newline, or part of valid UTF-8 that is no C1
# control (the em dash of the messages).
clean() {
    /usr/bin/python3 -c '
import sys
b = open(sys.argv[1], "rb").read()
t = b.decode("utf-8")  # raises on a byte that is no UTF-8
bad = [c for c in t if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
sys.exit(1 if bad or not b else 0)' "$1"
}

printf '{"schema": "evil\\u001b[2J\\r\\u009bC1\\u0000NUL", "processes": []}' >schema.json
"$HANGDX" analyze schema.json 2>err1 >/dev/null
check "a snapshot's schema: stderr is clean" clean err1
check "  and shows it escaped" grep -qF 'schema evil\x1b[2J\r\u009bC1 is not supported' err1

mkdir -m 700 tr
printf '{"type":"header","schema":"hangdx.trace/9\\u001b]0;title\\u0007\\r","pid":5}\n' >tr/h-1.jsonl
"$HANGDX" analyze tr 2>err2 >/dev/null
check "a trace header's schema: stderr is clean" clean err2
check "  and shows it escaped" grep -qF 'schema hangdx.trace/9\x1b]0;title\x07\r is not supported' err2

mkdir sd
cp "$HERE/../fixtures/snapshots/stale_lock.json" sd/
echo '{' >"sd/$(printf 'a\033[2J\377\r.json')"
"$HANGDX" analyze sd 2>err3 >/dev/null
check "a snapshot directory's file name: stderr is clean" clean err3
check "  and shows it escaped" grep -qF 'sd/a\x1b[2J\xff\r.json: left out' err3

"$HANGDX" analyze "$(printf 'no\033[31m\377such\nfile')" 2>err4 >/dev/null
check "a path given that does not exist: stderr is clean" clean err4
check "  and shows it escaped" grep -qF 'no\x1b[31m\xffsuch\nfile: no such file' err4

HANGDX_PATTERNS="$(printf 'p\033[1m\302\233.json')" "$HANGDX" analyze "$LOG" 2>err5 >/dev/null
check "the HANGDX_PATTERNS path: stderr is clean" clean err5
check "  and shows it escaped" grep -qF 'cannot read the log patterns p\x1b[1m\u009b.json' err5

"$HANGDX" run -d rd -- "$(printf '/no/cmd\033[2J')" 2>err6
check "a command run cannot start: stderr is clean" clean err6
check "  and shows it escaped" grep -qF 'cannot run /no/cmd\x1b[2J:' err6
exit $fail
