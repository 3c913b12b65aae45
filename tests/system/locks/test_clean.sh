#!/bin/bash
# hangdx locks --clean-stale deletes only a lock whose trace creator is dead;
# --force also deletes an unheld lock, never a held one. Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
. "$(dirname "$0")/../../check.sh"

T=$(mktemp -d /tmp/hdx-test-clean-XXXXXX)
holder=
waiter=
cleanup() { [ -n "$holder" ] && kill "$holder" 2>/dev/null; [ -n "$waiter" ] && kill "$waiter" 2>/dev/null
            wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
T=$(cd "$T" && pwd -P)
export HOME="$T/home"            # keep the user's own ~/.cache/torch_extensions out of it
unset TORCH_EXTENSIONS_DIR
mkdir -p "$HOME" "$T/b/dead_ext" "$T/b/unknown_ext" "$T/b/held_ext" "$T/b/waited_ext" "$T/traces"
: >"$T/b/dead_ext/lock"
: >"$T/b/waited_ext/lock"
: >"$T/b/unknown_ext/lock"
: >"$T/b/held_ext/lock"

# A process that keeps the held lock open, as FileBaton's builder does.
(exec 3<"$T/b/held_ext/lock"; exec sleep 60) &
holder=$!
for _ in $(seq 50); do
    [ "$(readlink /proc/$holder/fd/3 2>/dev/null)" = "$T/b/held_ext/lock" ] && break
    sleep 0.1
done

# The trace of the creator of dead_ext/lock: a pid that does not exist now, this boot.
boot=$(cat /proc/sys/kernel/random/boot_id)
dead=4194303
cat >"$T/traces/$(hostname)-$dead.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$dead,"ppid":1,"host":"$(hostname)","boot_id":"$boot","start_time":42,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"0"}}
{"type":"acquire","t":1700000001000000000,"tid":$dead,"path":"$T/b/dead_ext/lock","fd":5}
JSON

# waited_ext/lock: made by another dead pid, and a live process (a sleep standing for a rank)
# polls it: --clean-stale must leave it until the waiter is stopped.
dead2=4194302
sleep 60 &
waiter=$!
wstart=$(awk '{print $22}' /proc/$waiter/stat)
cat >"$T/traces/$(hostname)-$dead2.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$dead2,"ppid":1,"host":"$(hostname)","boot_id":"$boot","start_time":43,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"0"}}
{"type":"acquire","t":1700000001000000000,"tid":$dead2,"path":"$T/b/waited_ext/lock","fd":5}
JSON
cat >"$T/traces/$(hostname)-$waiter.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$waiter,"ppid":1,"host":"$(hostname)","boot_id":"$boot","start_time":$wstart,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"1"}}
{"type":"wait","t":1700000002000000000,"tid":$waiter,"path":"$T/b/waited_ext/lock","how":"stat","polls":40,"since":1700000002000000000}
JSON
chmod 600 "$T/traces/"*.jsonl

# 1. listing, JSON only on stdout
out=$("$HANGDX" locks --json -d "$T/traces" "$T/b" 2>"$T/err"); rc=$?
check "locks --json exits 0 (got $rc)" test $rc -eq 0
check "locks --json warns about other nodes on stderr" grep -q "another node" "$T/err"
check "locks --json gives the states" $PY - "$out" "$T" "$holder" "$dead" <<'PYEOF'
import json, sys
doc = json.loads(sys.argv[1]); T = sys.argv[2]; holder = int(sys.argv[3]); dead = int(sys.argv[4])
assert doc["schema"] == "hangdx.locks/1", doc
locks = {l["path"]: l for l in doc["locks"]}
assert set(locks) == {f"{T}/b/dead_ext/lock", f"{T}/b/unknown_ext/lock", f"{T}/b/held_ext/lock",
                      f"{T}/b/waited_ext/lock"}, locks
d = locks[f"{T}/b/dead_ext/lock"]
assert d["state"] == "stale" and d["kind"] == "baton", d
assert d["created_by"] == {"pid": dead, "rank": 0, "alive": False, "at": d["created_by"]["at"]}, d
u = locks[f"{T}/b/unknown_ext/lock"]
assert u["state"] == "stale" and u["created_by"] is None and u["holder_pid"] is None, u
h = locks[f"{T}/b/held_ext/lock"]
assert h["state"] == "held" and h["holder_pid"] == holder, h
for l in doc["locks"]:
    for k in ("path", "kind", "state", "holder_pid", "created_by", "waiters"):
        assert k in l, (k, l)
PYEOF

# 2. text listing
"$HANGDX" locks "$T/b" >"$T/out" 2>/dev/null
check "text: one line per lock" test "$(grep -cE '^(held|stale|free) ' "$T/out")" -eq 4
check "text: the held lock names its holder" grep -q "^held .*held_ext/lock.*holder pid $holder" "$T/out"

# 3. --clean-stale: only the lock whose creator the trace shows dead
"$HANGDX" locks -d "$T/traces" --clean-stale "$T/b" >"$T/out" 2>"$T/err"; rc=$?
check "--clean-stale exits 0 (got $rc)" test $rc -eq 0
check "--clean-stale deletes dead_ext/lock" test ! -e "$T/b/dead_ext/lock"
check "--clean-stale keeps unknown_ext/lock" test -e "$T/b/unknown_ext/lock"
check "--clean-stale keeps held_ext/lock" test -e "$T/b/held_ext/lock"
check "--clean-stale says what it deleted" grep -q "deleted $T/b/dead_ext/lock: stale, its creator is dead" "$T/err"
check "--clean-stale warns about other nodes" grep -q "another node" "$T/err"
check "--clean-stale keeps waited_ext/lock, whose waiter lives" test -e "$T/b/waited_ext/lock"
check "--clean-stale says to stop the waiter first" \
    grep -q "not deleted: $T/b/waited_ext/lock: pid $waiter still waits on it: stop those processes first" "$T/err"
kill "$waiter"; wait "$waiter" 2>/dev/null; waiter=
"$HANGDX" locks -d "$T/traces" --clean-stale "$T/b" >"$T/out" 2>"$T/err"; rc=$?
check "--clean-stale deletes waited_ext/lock once its waiter is gone (rc $rc)" test ! -e "$T/b/waited_ext/lock"

# 3b. A waiter no trace saw: a real cpp_extension.load, started outside hangdx run, waits in
# FileBaton.wait on torch_ext/lock (made by the dead pid of the trace): hangdx locks reads its
# Python stack (nothing stopped) and keeps the lock; --force deletes it and says what it overrode.
if $PY -c "import torch.utils.cpp_extension" 2>/dev/null; then
    mkdir -p "$T/b/torch_ext"
    : >"$T/b/torch_ext/lock"
    echo 'int hdx_tiny() { return 1; }' >"$T/tiny.cpp"
    dead3=4194301
    cat >"$T/traces/$(hostname)-$dead3.jsonl" <<JSON
{"schema":"hangdx.trace/1","type":"header","t":1700000000000000000,"pid":$dead3,"ppid":1,"host":"$(hostname)","boot_id":"$boot","start_time":44,"cwd":"$T","exe":"/usr/bin/python3","argv":["python3","train.py"],"env":{"RANK":"0"}}
{"type":"acquire","t":1700000001000000000,"tid":$dead3,"path":"$T/b/torch_ext/lock","fd":5}
JSON
    chmod 600 "$T/traces/"*.jsonl
    $PY "$HDX_SOURCE_DIR/tests/system/scenarios/loader.py" --build-dir "$T/b/torch_ext" --name hdx_clean_tiny \
        --source "$T/tiny.cpp" --pidfile "$T/loader.pid" >"$T/loader.out" 2>&1 &
    loader=$!
    for _ in $(seq 600); do grep -q loading "$T/loader.out" && break; sleep 0.1; done
    # Into FileBaton.wait: its time.sleep is the main thread's clock_nanosleep (230 on x86_64),
    # which a loaded machine may take seconds to reach after "loading".
    for _ in $(seq 300); do [ "$(cut -d' ' -f1 /proc/$loader/syscall 2>/dev/null)" = 230 ] && break; sleep 0.1; done
    "$HANGDX" locks -d "$T/traces" --clean-stale "$T/b" >"$T/out" 2>"$T/err"
    check "--clean-stale keeps torch_ext/lock, which an untraced cpp_extension.load waits on" \
        test -e "$T/b/torch_ext/lock"
    check "  and names the waiter" grep -q "not deleted: $T/b/torch_ext/lock: pid $loader still waits on it" "$T/err"
    "$HANGDX" locks -d "$T/traces" --clean-stale --force "$T/b/torch_ext" >"$T/out" 2>"$T/err"
    check "--force deletes it, and says it overrode a waiter" \
        grep -q "deleted $T/b/torch_ext/lock: stale, its creator is dead; with --force, although pid $loader still waits on it" "$T/err"
    kill $loader 2>/dev/null; wait $loader 2>/dev/null
else
    echo "skip 3b: $PY has no torch"
fi

# 4. --force: also the unheld lock, never the held one
"$HANGDX" locks --clean-stale --force "$T/b" >"$T/out" 2>"$T/err"; rc=$?
check "--force exits 0 (got $rc)" test $rc -eq 0
check "--force deletes unknown_ext/lock" test ! -e "$T/b/unknown_ext/lock"
check "--force keeps held_ext/lock" test -e "$T/b/held_ext/lock"
check "--force says why it kept held_ext/lock" grep -q "not deleted: $T/b/held_ext/lock: held" "$T/err"

# 5. usage errors and --help
"$HANGDX" locks --force "$T/b" >/dev/null 2>&1; rc=$?
check "--force without --clean-stale is a usage error (got $rc)" test $rc -eq 64
"$HANGDX" locks --help | grep -q "examples:"; check "--help has examples" test $? -eq 0
"$HANGDX" locks "$T/nonexistent" >/dev/null 2>"$T/err"; rc=$?
check "a missing BUILDDIR is partial (got $rc)" test $rc -eq 1
check "a missing BUILDDIR is named" grep -q "$T/nonexistent: no such directory" "$T/err"

[ $fail -eq 0 ] && echo "locks.clean: all checks passed"
exit $fail
