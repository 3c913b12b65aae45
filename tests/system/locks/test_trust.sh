#!/bin/bash
# Trust of traces and lock files, with real users: a trace written by another user (here
# nobody), or in a directory others can write into, is not read; --clean-stale (with or
# without --force) deletes only the invoking user's own regular lock files. The legit case:
# a real process under `hangdx run` takes a FileBaton-style lock and is SIGKILLed; its lock is
# still listed as stale and deleted. Runs as root (writes as nobody with setpriv). Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
    echo "skipped: needs root and setpriv (to write files as nobody)"
    exit 77
fi
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
. "$(dirname "$0")/../../check.sh"

T=$(mktemp -d /tmp/hdx-test-trust-XXXXXX)
victim=
cleanup() { [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
T=$(cd "$T" && pwd -P)
chmod 711 "$T"                   # nobody may pass through, not list or write
export HOME="$T/home"            # keep the user's own ~/.cache/torch_extensions out of it
unset TORCH_EXTENSIONS_DIR
mkdir -p "$HOME" "$T/victim" "$T/own" "$T/b/theirs_ext" "$T/b/link_ext" "$T/b/mine_ext" "$T/nobodys"
chmod 700 "$T/own"
: >"$T/victim/lock"; : >"$T/victim/db.lock"
chown 65534:65534 "$T/nobodys"

boot=$(cat /proc/sys/kernel/random/boot_id)
dead=4194303
# forge FILE LOCK...: a trace of a dead pid that "created" each LOCK, written by nobody.
forge() {
    local f=$1; shift
    {
        echo "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":1700000000000000000,\"pid\":$dead,\"ppid\":1,\"host\":\"$(hostname)\",\"boot_id\":\"$boot\",\"start_time\":42,\"cwd\":\"/tmp\",\"exe\":\"/usr/bin/python3\",\"argv\":[\"python3\"],\"env\":{\"RANK\":\"0\"}}"
        for p in "$@"; do
            echo "{\"type\":\"acquire\",\"t\":1700000001000000000,\"tid\":$dead,\"path\":\"$p\",\"fd\":5}"
        done
    } | "${NOBODY[@]}" sh -c "cat >'$f'"
}

# 1. The reproduction: a 0777 directory of root's, a trace in it written by nobody.
mkdir "$T/open777"; chmod 777 "$T/open777"
forge "$T/open777/vm-$dead.jsonl" "$T/victim/lock" "$T/victim/db.lock"
check "the forged trace is nobody's" test "$(stat -c %u "$T/open777/vm-$dead.jsonl")" -eq 65534
"$HANGDX" locks -d "$T/open777" >"$T/out" 2>"$T/err"; rc=$?
check "locks -d open777: exit 0 (got $rc)" test $rc -eq 0
check "locks -d open777 does not list the victim's locks" bash -c "! grep -q '$T/victim' '$T/out'"
check "locks -d open777 says the directory is not read and what to do" \
    grep -q "$T/open777: trace directory writable by everyone (mode 0777): not read.*chmod 700" "$T/out"
"$HANGDX" locks --clean-stale -d "$T/open777" >"$T/out" 2>"$T/err"
check "locks --clean-stale -d open777 keeps victim/lock" test -e "$T/victim/lock"
check "locks --clean-stale -d open777 keeps victim/db.lock" test -e "$T/victim/db.lock"
check "  and deletes nothing" bash -c "! grep -q 'deleted' '$T/err'"
"$HANGDX" run -d "$T/open777" -- true 2>"$T/err"; rc=$?
check "run -d open777 is refused (exit 2, got $rc)" test $rc -eq 2
check "  with what to do" grep -q "writable by everyone (mode 0777).*chmod 700 $T/open777" "$T/err"
"$HANGDX" analyze "$T/open777" >"$T/out" 2>"$T/err"; rc=$?
check "analyze open777 takes no evidence from it (exit 2, got $rc)" test $rc -eq 2
check "  and says why" grep -q "not read" "$T/err"

# 2. A directory of root's that only root can write, holding nobody's trace (moved in: mv keeps
# the owner): the file is ignored and named.
forge "$T/nobodys/vm-$dead.jsonl" "$T/victim/lock" "$T/victim/db.lock"
mv "$T/nobodys/vm-$dead.jsonl" "$T/own/"
"$HANGDX" locks --json -d "$T/own" >"$T/out" 2>"$T/err"; rc=$?
check "locks --json -d own: exit 0 (got $rc)" test $rc -eq 0
check "nobody's trace file is ignored, with a note naming it" $PY - "$(cat "$T/out")" "$T" "$dead" <<'PYEOF'
import json, sys
doc = json.loads(sys.argv[1]); T = sys.argv[2]; dead = sys.argv[3]
assert not [l for l in doc["locks"] if l["path"].startswith(T + "/victim")], doc["locks"]
want = f"{T}/own/vm-{dead}.jsonl: not owned by you (uid 65534): ignored — a trace is trusted only from your own processes"
assert want in doc["notes"], doc["notes"]
PYEOF
"$HANGDX" locks --clean-stale -d "$T/own" >/dev/null 2>&1
check "locks --clean-stale -d own keeps the victim's files" test -e "$T/victim/lock" -a -e "$T/victim/db.lock"
"$HANGDX" analyze "$T/own" >/dev/null 2>"$T/err"; rc=$?
check "analyze own: nothing trusted (exit 2, got $rc)" test $rc -eq 2
check "  names the ignored file" grep -q "vm-$dead.jsonl: not owned by you (uid 65534)" "$T/err"

# 3. A trace directory owned by nobody (0755): not read.
forge "$T/nobodys/vm-$dead.jsonl" "$T/victim/lock"
"$HANGDX" locks -d "$T/nobodys" >"$T/out" 2>&1
check "a directory owned by nobody is not read" grep -q "$T/nobodys: trace directory owned by uid 65534" "$T/out"
check "  and its locks are not listed" bash -c "! grep -q '^stale.*$T/victim' '$T/out'"

# 4. Lock files that are not ours: a trusted trace of a dead creator names them, yet
# --clean-stale (and --force) deletes only our own regular file.
mkdir "$T/mytraces"; chmod 700 "$T/mytraces"
: >"$T/b/mine_ext/lock"
chown 65534:65534 "$T/b/theirs_ext" && "${NOBODY[@]}" sh -c ": >'$T/b/theirs_ext/lock'"
ln -s "$T/victim/lock" "$T/b/link_ext/lock"
{
    echo "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":1700000000000000000,\"pid\":$dead,\"ppid\":1,\"host\":\"$(hostname)\",\"boot_id\":\"$boot\",\"start_time\":42,\"cwd\":\"/tmp\",\"exe\":\"/usr/bin/python3\",\"argv\":[\"python3\"],\"env\":{\"RANK\":\"0\"}}"
    for p in "$T/b/mine_ext/lock" "$T/b/theirs_ext/lock" "$T/b/link_ext/lock"; do
        echo "{\"type\":\"acquire\",\"t\":1700000001000000000,\"tid\":$dead,\"path\":\"$p\",\"fd\":5}"
    done
} >"$T/mytraces/$(hostname)-$dead.jsonl"
"$HANGDX" locks --clean-stale -d "$T/mytraces" "$T/b" >"$T/out" 2>"$T/err"
check "--clean-stale deletes my own stale lock" test ! -e "$T/b/mine_ext/lock"
check "--clean-stale keeps nobody's lock" test -e "$T/b/theirs_ext/lock"
check "  and says why" grep -q "not deleted: $T/b/theirs_ext/lock: owned by uid 65534, not by you" "$T/err"
check "--clean-stale keeps the symbolic link and its target" test -L "$T/b/link_ext/lock" -a -e "$T/victim/lock"
check "  and says why" grep -q "not deleted: $T/b/link_ext/lock: a symbolic link" "$T/err"
"$HANGDX" locks --clean-stale --force -d "$T/mytraces" "$T/b" >"$T/out" 2>"$T/err"
check "--force keeps nobody's lock too" test -e "$T/b/theirs_ext/lock"
check "--force keeps the symbolic link and its target" test -L "$T/b/link_ext/lock" -a -e "$T/victim/lock"

# 5. The legit case: a real process under hangdx run takes a FileBaton lock (O_CREAT|O_EXCL,
# as torch.utils.file_baton does) and is SIGKILLed; its trace proves the lock stale.
mkdir -p "$T/b/real_ext"
"$HANGDX" run -d "$T/runtraces" -- $PY -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL)
open(sys.argv[2], "w").write("x")
time.sleep(60)' "$T/b/real_ext/lock" "$T/ready" 2>/dev/null &
for _ in $(seq 100); do [ -e "$T/ready" ] && break; sleep 0.1; done
victim=$(pgrep -f -n "^$PY -c .*$T/b/real_ext/lock" || true)
check "the lock taker runs (pid $victim)" test -n "$victim"
[ -n "$victim" ] && kill -9 "$victim"
wait 2>/dev/null; victim=
check "run made its trace directory 0700" test "$(stat -c %a "$T/runtraces")" = 700
"$HANGDX" locks --json -d "$T/runtraces" "$T/b/real_ext" >"$T/out" 2>"$T/err"
check "the killed taker's lock is stale, created by a dead pid" $PY - "$(cat "$T/out")" "$T" <<'PYEOF'
import json, sys
doc = json.loads(sys.argv[1]); T = sys.argv[2]
l = {x["path"]: x for x in doc["locks"]}[f"{T}/b/real_ext/lock"]
assert l["state"] == "stale" and l["created_by"] and l["created_by"]["alive"] is False, l
PYEOF
"$HANGDX" locks --clean-stale -d "$T/runtraces" "$T/b/real_ext" >/dev/null 2>"$T/err"
check "--clean-stale deletes the killed taker's lock" test ! -e "$T/b/real_ext/lock"

[ $fail -eq 0 ] && echo "locks.trust: all checks passed"
exit $fail
