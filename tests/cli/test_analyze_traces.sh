#!/bin/bash
# hangdx analyze on a hand-written trace directory (B2 after the job is gone):
# rank 0 created <dir>/build/lock and was killed; rank 1 waited on it; the ninja rank 0
# started still runs. Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
. "$(dirname "$0")/../check.sh"

T=$(mktemp -d /tmp/hdx-test-analyze-XXXXXX)
trap 'rm -rf "$T"' EXIT
T=$(cd "$T" && pwd -P)
mkdir -p "$T/fused_kernels/build" "$T/traces" "$T/empty" "$T/v9"
: >"$T/fused_kernels/build/lock"
boot=$(cat /proc/sys/kernel/random/boot_id)
host=$(hostname)
r0=4194303 r1=4194302
cat >"$T/traces/$host-$r0.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$r0,"ppid":1,"host":"$host","boot_id":"$boot","start_time":42,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"0","WORLD_SIZE":"2"}}
{"type":"acquire","t":1700000001000000000,"tid":$r0,"path":"$T/fused_kernels/build/lock","fd":5}
{"type":"spawn","t":1700000001100000000,"tid":$r0,"child":4194000,"via":"posix_spawn","argv":["ninja","-v"]}
{"type":"wait","t":17000000
JSON
cat >"$T/traces/$host-$r1.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$r1,"ppid":1,"host":"$host","boot_id":"$boot","start_time":43,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"1","WORLD_SIZE":"2"}}
{"type":"wait","t":1700000002000000000,"tid":$r1,"path":"$T/fused_kernels/build/lock","how":"eexist","polls":1,"since":1700000002000000000}
{"type":"wait","t":1700000060000000000,"tid":$r1,"path":"$T/fused_kernels/build/lock","how":"stat","polls":512,"since":1700000002000000000}
JSON

# The dead builder's ninja still runs: a real process whose trace header names rank 0 as its parent.
sleep 60 &
left=$!
trap 'kill $left 2>/dev/null; rm -rf "$T"' EXIT
left_start=$(awk '{print $22}' /proc/$left/stat)
cat >"$T/traces/$host-$left.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000001200000000,"pid":$left,"ppid":$r0,"host":"$host","boot_id":"$boot","start_time":$left_start,"cwd":"$T","exe":"/usr/bin/ninja","argv":["ninja","-v"],"env":{"RANK":"0"}}
JSON

out=$("$HANGDX" analyze --json "$T/traces" 2>"$T/err"); rc=$?
check "analyze exits 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "analyze gives build_lock, stale, created by the dead rank 0, rank 1 waiting" $PY - "$out" "$T" "$r0" "$r1" "$left" <<'PYEOF'
import json, sys
doc = json.loads(sys.argv[1]); T = sys.argv[2]; r0 = int(sys.argv[3]); r1 = int(sys.argv[4]); left = int(sys.argv[5])
assert doc["schema"] == "hangdx.report/2", doc
v = doc["verdict"]
assert v["class"] == "build_lock", v
assert f"{T}/fused_kernels/build/lock" in v["summary"] + (v.get("remedy") or ""), v
locks = [l for l in doc["locks"] if l["path"] == f"{T}/fused_kernels/build/lock"]
assert len(locks) == 1, doc["locks"]
l = locks[0]
assert l["state"] == "stale" and l["kind"] == "baton", l
assert l["created_by"]["pid"] == r0 and l["created_by"]["rank"] == 0 and l["created_by"]["alive"] is False, l
assert [(w["pid"], w["rank"]) for w in l["waiters"]] == [(r1, 1)], l
assert l["waiters"][0]["since"].startswith("2023-11-14T22:13:22"), l
assert any("no stacks" in n for n in doc["notes"]), doc["notes"]
assert any("torn or malformed" in n for n in doc["notes"]), doc["notes"]
assert any("still run" in n and f"ninja (pid {left})" in n for n in doc["notes"]), doc["notes"]
PYEOF

"$HANGDX" analyze "$T/traces" >"$T/out" 2>&1
check "text report names the lock" grep -q "$T/fused_kernels/build/lock" "$T/out"

"$HANGDX" analyze -o "$T/report.json" --json "$T/traces" 2>/dev/null
check "-o writes the report" $PY -c "import json,sys; assert json.load(open(sys.argv[1]))['verdict']['class']=='build_lock'" "$T/report.json"

# The user ran the remedy (rm the lock): the file is gone, but the traces still prove the job
# waited on a stale lock. The same verdict and culprits, the fact "deleted", words that say the
# file is gone, and a remedy that deletes nothing.
rm "$T/fused_kernels/build/lock"
out=$("$HANGDX" analyze --json "$T/traces" 2>"$T/err"); rc=$?
check "analyze after rm exits 0 (got $rc; $(cat "$T/err"))" test $rc -eq 0
check "after rm: still build_lock, lock_stale, rank 1; deleted, the file gone, nothing to rm" $PY - "$out" "$T" "$r0" "$r1" <<'PYEOF'
import json, sys
doc = json.loads(sys.argv[1]); T = sys.argv[2]; r0 = int(sys.argv[3]); r1 = int(sys.argv[4])
path = f"{T}/fused_kernels/build/lock"
v = doc["verdict"]
assert v["class"] == "build_lock" and v["finding"] == "lock_stale", v
assert v["culprit_ranks"] == [1] and v["culprit_pids"] == [r1], v
assert v["facts"]["deleted"] == 1 and v["facts"]["path"] == path, v["facts"]
assert "the lock file is gone now (deleted since: relaunch)" in v["summary"], v["summary"]
assert "rm " not in v["remedy"] and "relaunch the job" in v["remedy"], v["remedy"]
l = [l for l in doc["locks"] if l["path"] == path][0]
assert l["state"] == "stale" and l["exists"] is False and l["created_by"]["pid"] == r0, l
PYEOF
"$HANGDX" analyze "$T/traces" >"$T/out" 2>&1
check "after rm: the text report says the file is gone" grep -q "stale (by the trace; the file is gone now)" "$T/out"
# The report saved then, analyzed again, still knows the file is gone.
"$HANGDX" analyze -o "$T/report-rm.json" --json "$T/traces" 2>/dev/null
out=$("$HANGDX" analyze --json "$T/report-rm.json" 2>"$T/err"); rc=$?
check "the saved report after rm, analyzed again: lock_stale, deleted, no rm (rc $rc; $(cat "$T/err"))" $PY -c '
import json, sys
v = json.loads(sys.argv[1])["verdict"]
assert v["finding"] == "lock_stale" and v["facts"]["deleted"] == 1, v
assert "gone now" in v["summary"] and "rm " not in v["remedy"], v
' "$out"

# A process whose shim could not record 2 events (every buffer in use): its exit line says so,
# and the analysis notes it.
mkdir "$T/dropped"
cat >"$T/dropped/$host-$r0.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$r0,"ppid":1,"host":"$host","boot_id":"$boot","start_time":42,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"0","WORLD_SIZE":"1"}}
{"type":"exit","t":1700000001000000000,"tid":$r0,"status":0,"dropped":2}
JSON
out=$("$HANGDX" analyze --json "$T/dropped" 2>"$T/err")
check "the events a shim dropped are noted ($(cat "$T/err"))" $PY -c '
import json, sys
notes = json.loads(sys.argv[1])["notes"]
assert any(n.endswith("dropped: 2 events not recorded: every buffer of the shim was in use (many threads "
                      "recording at once); the locks\x27 waits may be undercounted") for n in notes), notes
' "$out"

# The shim records argv and the allowed variables as the process had them: a password option's
# value and a URL's credentials are blanked on the way into the report (its pid may be another
# process's by now, so no environment is read); ./prog, python and train.py stay.
mkdir -m 700 "$T/secrets"
cat >"$T/secrets/$host-$r0.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$r0,"ppid":1,"host":"$host","boot_id":"$boot","start_time":42,"cwd":"$T","exe":"/usr/bin/python3","argv":["./prog","python","train.py","--password","pw-from-cli","-p","hunter2secret","--data","https://user:s3cret@data.example/set"],"env":{"RANK":"0","WORLD_SIZE":"1","MASTER_ADDR":"https://user:s3cret@host.example"}}
JSON
out=$("$HANGDX" analyze --json "$T/secrets" 2>"$T/err")
check "a trace's secrets are blanked in the report ($(cat "$T/err"))" $PY -c '
import os, sys
sys.path.insert(0, os.path.join(os.environ["HDX_SOURCE_DIR"], "tests"))
import report_frames
doc = report_frames.loads(sys.argv[1])
p = [p for p in doc["processes"] if p["pid"] == int(sys.argv[2])][0]
assert p["cmdline"] == ["./prog", "python", "train.py", "--password", "<redacted: value of --password>", "-p",
                        "<redacted: value of -p>", "--data", "https://<redacted>@data.example/set"], p["cmdline"]
assert p["env"]["MASTER_ADDR"] == "https://<redacted>@host.example", p["env"]
assert "s3cret" not in sys.argv[1] and "hunter2secret" not in sys.argv[1] and "pw-from-cli" not in sys.argv[1]
' "$out" "$r0"

"$HANGDX" analyze "$T/nope/" >/dev/null 2>"$T/err"; rc=$?
check "a missing dir fails with 2 (got $rc)" test $rc -eq 2
check "a missing dir is named" grep -q "analyze: $T/nope/: no such file or directory" "$T/err"
"$HANGDX" analyze "$T/empty" >/dev/null 2>"$T/err"; rc=$?
check "a dir without traces fails with 2 (got $rc)" test $rc -eq 2
check "a dir without traces says so" grep -q "not a hangdx trace directory" "$T/err"
echo '{"schema":"hangdx.trace/9","type":"header","t":1,"pid":5}' >"$T/v9/h-5.jsonl"
"$HANGDX" analyze "$T/v9" >/dev/null 2>"$T/err"; rc=$?
check "an unknown schema fails with 2 (got $rc)" test $rc -eq 2
check "an unknown schema is named with both versions" grep -q "h-5.jsonl: schema hangdx.trace/9 is not supported (this hangdx reads hangdx.trace/1)" "$T/err"
"$HANGDX" analyze >/dev/null 2>&1; rc=$?
check "no input is a usage error (got $rc)" test $rc -eq 64
"$HANGDX" analyze --help | grep -q "examples:"; check "--help has examples" test $? -eq 0

[ $fail -eq 0 ] && echo "traces.analyze: all checks passed"
exit $fail
