#!/bin/bash
# hangdx snapshot -o FILE and inspect -o FILE check that FILE can be written before they capture:
# a directory that does not exist, -o naming a directory, or a read-only report file fails at
# once (exit 2) with what to do, and nothing is captured (no "looking at" line). A writable
# FILE still gets the snapshot. analyze refuses an output that is one of its inputs. A kernel
# thread is no process to inspect, and says so.
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
: "${HDX_SOURCE_DIR:?HDX_SOURCE_DIR must name the source tree}"
. "$(dirname "$0")/../check.sh"
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
"$HANGDX" inspect -o "$T/nonexistent/r.txt" $target >/dev/null 2>"$T/err"; rc=$?
check "inspect -o in a directory that does not exist: exit 2 (got $rc), before any capture" \
    bash -c "test $rc -eq 2 && grep -q 'cannot write the report to $T/nonexistent/r.txt' '$T/err' && ! grep -q 'looking at' '$T/err'"
if [ "$(id -u)" -ne 0 ]; then # root writes a read-only file anyway
    : >"$T/ro.txt"; chmod 444 "$T/ro.txt"
    "$HANGDX" inspect -o "$T/ro.txt" $target >/dev/null 2>"$T/err"; rc=$?
    check "inspect -o a read-only file: exit 2 (got $rc)" bash -c "test $rc -eq 2 && grep -q 'not writable' '$T/err'"
fi

# analyze: an output that is one of its inputs, or both outputs one file, is refused before
# anything is read (exit 64) and the input is left as it was; an --html FILE that cannot be
# written fails before the text report is printed
LOG="$HDX_SOURCE_DIR/tests/fixtures/logs/desync_report.log"
cp "$LOG" "$T/job.log"
"$HANGDX" analyze -o "$T/job.log" "$T/job.log" >"$T/out" 2>"$T/err"; rc=$?
check "analyze -o its own input: exit 64 (got $rc)" test $rc -eq 64
check "  the message says the report would overwrite the input" \
    grep -q -- "-o $T/job.log is an input ($T/job.log): the report would overwrite it" "$T/err"
check "  the input is untouched" cmp -s "$LOG" "$T/job.log"
ln -s job.log "$T/link.log"
"$HANGDX" analyze --html "$T/link.log" "$T/job.log" >"$T/out" 2>"$T/err"; rc=$?
check "analyze --html through a link to its input: exit 64 (got $rc), the input untouched" \
    bash -c "test $rc -eq 64 && cmp -s '$LOG' '$T/job.log'"
"$HANGDX" analyze --html "$T/r.out" -o "$T/r.out" "$T/job.log" >"$T/out" 2>"$T/err"; rc=$?
check "analyze -o and --html one file: exit 64 (got $rc)" \
    bash -c "test $rc -eq 64 && grep -q 'both name $T/r.out' '$T/err' && test ! -e '$T/r.out'"
"$HANGDX" analyze --html "$T/nonexistent/r.html" "$T/job.log" >"$T/out" 2>"$T/err"; rc=$?
check "analyze --html in a directory that does not exist: exit 2 (got $rc), no report printed" \
    bash -c "test $rc -eq 2 && test ! -s '$T/out' && grep -q 'choose another --html FILE' '$T/err'"

kt=
for st in /proc/[0-9]*/stat; do # a kernel thread: PF_KTHREAD (0x200000) in field 9
    read -r -a f <"$st" 2>/dev/null || continue
    [ "${f[1]: -1}" = ")" ] && (( f[8] & 0x200000 )) && { kt=${f[0]}; break; }
done
if [ -n "$kt" ]; then
    "$HANGDX" inspect "$kt" >/dev/null 2>"$T/err"; rc=$?
    check "inspect of kernel thread $kt: exit 2 (got $rc), 'process $kt is a kernel thread'" \
        bash -c "test $rc -eq 2 && grep -q 'process $kt is a kernel thread' '$T/err'"
    "$HANGDX" dump "$kt" >"$T/out" 2>"$T/err"
    check "dump of kernel thread $kt: says so, and nothing about exits" \
        bash -c "grep -q 'process $kt is a kernel thread' '$T/err' && ! grep -q 'exited' '$T/err'"
else
    echo "skip: no kernel thread visible in /proc"
fi
exit $fail
