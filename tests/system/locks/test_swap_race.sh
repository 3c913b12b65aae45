#!/bin/bash
# The swap race: root runs hangdx locks --clean-stale --force on a directory that an
# unprivileged user (nobody) can write; that user swaps a subdirectory for a symbolic link to
# the directory of a root-only lock file outside it, in a tight loop, while root runs it 20
# times. Deleting through directory fds (docs/design.md "Build locks") leaves the victim
# untouched every time. Runs as root (the attacker runs as nobody with setpriv). Needs $HANGDX.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
PY=/usr/bin/python3
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
    echo "skipped: needs root and setpriv (the attacker runs as nobody)"
    exit 77
fi
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
. "$(dirname "$0")/../../check.sh"

T=$(mktemp -d /tmp/hdx-test-swap-XXXXXX)
attacker=
cleanup() { [ -n "$attacker" ] && kill "$attacker" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
T=$(cd "$T" && pwd -P)
chmod 755 "$T"
export HOME="$T/home"            # keep root's own ~/.cache/torch_extensions out of it
unset TORCH_EXTENSIONS_DIR
mkdir -p "$HOME" "$T/victim" "$T/scan"
# The victim: a root-only lock file, empty as a FileBaton's, where a symbolic link
# scan/ext<N> -> victim makes scan/ext<N>/lock name it.
: >"$T/victim/lock"
chmod 600 "$T/victim/lock"
ino=$(stat -c %i "$T/victim/lock")
chown 65534:65534 "$T/scan"      # the scanned directory: nobody writes in it

# The attacker, as nobody: ext0..ext7 and ext0.x..ext7.x, each pair a directory holding an
# empty "lock" (what the search finds: $TORCH_EXTENSIONS_DIR's <ext>/lock) and a symbolic link
# to the victim's directory, the two swapped atomically (renameat2 RENAME_EXCHANGE) in a tight
# loop: each name is there all the time, a directory half of it, a link to the victim the other
# half; sixteen names give each run sixteen chances at the window.
"${NOBODY[@]}" $PY -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
os.chdir(sys.argv[1])
pairs = [(b"ext%d" % i, b"ext%d.x" % i) for i in range(8)]
for d, l in pairs:
    os.mkdir(d); open(d + b"/lock", "w").close()
    os.symlink(sys.argv[2], l)
open("ready", "w").close()
while True:
    for a, b in pairs:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
' "$T/scan" "$T/victim" &
attacker=$!
for _ in $(seq 100); do [ -e "$T/scan/ready" ] && break; sleep 0.05; done
check "the attacker runs as nobody (pid $attacker)" test "$(stat -c %u /proc/$attacker)" -eq 65534
"${NOBODY[@]}" rm -f "$T/scan/ready"

found=0 untouched=0
for i in $(seq 20); do
    "$HANGDX" locks --json --clean-stale --force "$T/scan" >"$T/out.$i" 2>"$T/err.$i"
    grep -q "\"path\":\"$T/scan/ext[0-7][.x]*/lock\"" "$T/out.$i" && found=$((found + 1))
    if [ -f "$T/victim/lock" ] && [ "$(stat -c %i:%u:%a:%s "$T/victim/lock")" = "$ino:0:600:0" ]; then
        untouched=$((untouched + 1))
    else
        echo "try $i: the victim was touched"; cat "$T/err.$i"
        : >"$T/victim/lock"; chmod 600 "$T/victim/lock"; ino=$(stat -c %i "$T/victim/lock")
    fi
done
check "the attacker still swaps" kill -0 "$attacker"
check "the victim is untouched after each of 20 runs (untouched $untouched)" test "$untouched" -eq 20
check "the searches met the swapped directory (found a scan/ext*/lock in $found of 20)" test "$found" -gt 0
check "nothing was deleted in any run" bash -c "! grep -h '^hangdx locks: deleted ' '$T'/err.*"
kill "$attacker"; wait "$attacker" 2>/dev/null; attacker=
check "the attacker's own locks were never deleted either" \
    test "$(find "$T/scan" -name lock -type f | wc -l)" -eq 8

# A link of the attacker's as the directory given, or as a directory on its way: refused
# before the walk, and root's stale build locks where it points stay.
mkdir -p "$T/rootv/build"; : >"$T/rootv/lock"; : >"$T/rootv/build/lock"; chmod -R go-rwx "$T/rootv"
"${NOBODY[@]}" ln -s "$T/rootv" "$T/scan/torch_extensions"
"${NOBODY[@]}" ln -s "$T" "$T/scan/up"
for d in "$T/scan/torch_extensions" "$T/scan/up/rootv"; do
    "$HANGDX" locks --clean-stale --force "$d" >"$T/out" 2>"$T/err"
    check "--clean-stale --force $d (nobody's link on its way): refused, says so" \
        grep -q "or a directory on its way, is a symbolic link that another user owns" "$T/err"
    check "  root's locks where it points are there still" test -f "$T/rootv/lock" -a -f "$T/rootv/build/lock"
done

[ $fail -eq 0 ] && echo "locks.swap_race: all checks passed"
exit $fail
