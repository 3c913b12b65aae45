#!/bin/bash
# The bounded syscall watch of inspect: a thread in time.sleep(3600) is not watched (its
# clock_nanosleep deadline is past the watch) and the note says for how long it sleeps; a
# thread polling every 50 ms is watched for one poll round. Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
. "$(dirname "$0")/../../check.sh"
T=$(mktemp -d /tmp/hdx-test-sleepnote-XXXXXX)
$PY -c 'import time; time.sleep(3600)' & long=$!
$PY -c 'import os, time
while True:
    os.path.exists("/nonexistent/x.lock"); time.sleep(0.05)' & loop=$!
trap 'kill $long $loop 2>/dev/null; rm -rf "$T"' EXIT
sleep 1
"$HANGDX" inspect --samples 1 --json $long >"$T/long.json" 2>/dev/null
"$HANGDX" inspect --samples 1 --json $loop >"$T/loop.json" 2>/dev/null
check "time.sleep(3600): not watched, the note says it sleeps another ~3599 s" $PY - "$T/long.json" $long <<'PYEOF'
import json, re, sys
notes = json.load(open(sys.argv[1]))["notes"]
pid = sys.argv[2]
m = [re.search(r"pid %s thread %s for another ([0-9.]+) s" % (pid, pid), n) for n in notes]
m = [x for x in m if x]
assert m and 3500 < float(m[0].group(1)) <= 3600, notes
assert not any("bounded syscall watch" in n for n in notes), notes
PYEOF
check "a 50 ms poll loop: watched, no 'not watched' note" $PY - "$T/loop.json" <<'PYEOF'
import json, sys
notes = json.load(open(sys.argv[1]))["notes"]
assert any("bounded syscall watch" in n and "ran on 1 polling thread" in n for n in notes), notes
assert not any("not watched" in n for n in notes), notes
PYEOF
exit $fail
