#!/bin/bash
# hangdx as root writes no file it was not asked to (docs/design.md "Writing outputs safely").
# Root runs snapshot -o, analyze -o/--html and run -d into a group-writable directory (2775,
# the attacker's group) and a sticky world-writable one (1777), where the attacker (a second,
# unprivileged user: nobody) has planted symbolic links to a victim file of root's (0600, known
# bytes) at every name the old code used: FILE.tmp.<pid> over a range of pids, run's
# .report.txt.tmp and .report.json.tmp, and the outputs' own names. Asserted: the victim's bytes
# and mode are untouched, each output is a regular file of root's whose JSON parses with its
# schema, and (strace) every file hangdx creates is O_TMPFILE or O_CREAT|O_EXCL|O_NOFOLLOW, under
# a random name, renamed within its directory; also with O_TMPFILE refused (strace injects
# EOPNOTSUPP), with linkat's AT_EMPTY_PATH refused (the /proc/self/fd way), with a hard link
# at the output's name, and with a hard link planted at a job's trace name; and run -d through
# another user's link is refused. Root only (skips 77 otherwise).
set -u
: "${HANGDX:?HANGDX must name the hangdx binary}"
: "${HDX_SOURCE_DIR:?HDX_SOURCE_DIR must name the source tree}"
. "$(dirname "$0")/../check.sh"
if [ "$(id -u)" -ne 0 ]; then
    echo "skip: needs root (root's outputs against another user's planted links)"
    exit 77
fi
if ! id nobody >/dev/null 2>&1 || ! command -v setpriv >/dev/null || ! command -v strace >/dev/null; then
    echo "skip: needs the user nobody, setpriv and strace"
    exit 77
fi
# LeakSanitizer cannot run under ptrace: a sanitizer build's leak check would fail every
# straced hangdx here (the leak check runs in the other tests).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
U=$(id -u nobody) G=$(id -g nobody)
as_user() { setpriv --reuid="$U" --regid="$G" --clear-groups "$@"; }
T=$(mktemp -d /tmp/hdx-test-safeout-XXXXXX)
chmod 755 "$T"
target=
trap 'kill $target 2>/dev/null; rm -rf "$T"' EXIT
LOG="$HDX_SOURCE_DIR/tests/fixtures/logs/desync_report.log"

printf 'the victim: root-only bytes\n' >"$T/victim"; chmod 600 "$T/victim"
cp "$T/victim" "$T/victim.orig"
victim_intact() { cmp -s "$T/victim" "$T/victim.orig" && [ "$(stat -c %a:%u:%h "$T/victim")" = 600:0:1 ]; }
mkdir "$T/grp" "$T/sticky"
chown "root:$G" "$T/grp"; chmod 2775 "$T/grp"
chmod 1777 "$T/sticky"

# The attacker's links at the old code's names: FILE.tmp.<pid> for the next 3000 pids.
next=$(sh -c 'echo $$')
plant() { # DIR NAME...: links to the victim at DIR/NAME.tmp.<pid> and at each run name
    as_user /usr/bin/python3 -c 'import os, sys
d, v, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
for n in sys.argv[4:]:
    for p in range(start, start + 3001):
        os.symlink(v, "%s/%s.tmp.%d" % (d, n, p))
for n in (".report.txt.tmp", ".report.json.tmp"):
    os.symlink(v, os.path.join(d, n))' "$1" "$T/victim" "$next" "${@:2}"
}
plant "$T/grp" snap.json
plant "$T/sticky" snap.json out.json out.html out.txt
sleep 600 & target=$! # what snapshot looks at
check "the attacker's links are in place ($(find "$T/grp" "$T/sticky" -type l | wc -l))" \
    test "$(find "$T/grp" "$T/sticky" -type l -user nobody | wc -l)" -gt 9000

# created LOG: every file created in LOG (strace) is O_TMPFILE or O_CREAT|O_EXCL|O_NOFOLLOW,
# the shim's own trace files aside (O_NOFOLLOW, appended to: docs/design.md); each rename's
# source is a random name (.<name>.<16 hex>) and at least one file was created and renamed.
created_safely() {
    local bad
    bad=$(grep -E '(open|openat|openat2|creat)\(' "$1" | grep -E 'O_CREAT|creat\(' |
        grep -vE 'O_CREAT\|O_EXCL\|O_NOFOLLOW|O_EXCL\|O_NOFOLLOW' | grep -vE '\.jsonl", [^)]*O_NOFOLLOW')
    [ -z "$bad" ] || { echo "  unsafe creations: $bad" >&2; return 1; }
    bad=$(grep -E 'rename(at2?)?\(' "$1" | grep -vE 'renameat2?\([0-9]+, "\.[^"/]+\.[0-9a-f]{16}", [0-9]+, "[^"/]+"')
    [ -z "$bad" ] || { echo "  renames from a guessable name: $bad" >&2; return 1; }
    grep -qE 'O_TMPFILE|O_CREAT\|O_EXCL\|O_NOFOLLOW' "$1" && grep -qE 'renameat' "$1"
}
json_schema() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["schema"])' "$1" 2>/dev/null; }
root_file() { [ -f "$1" ] && [ ! -L "$1" ] && [ "$(stat -c %u "$1")" = 0 ]; }
# root_json FILE PATTERN: FILE is root's regular file, a JSON object whose schema matches PATTERN
root_json() { root_file "$1" && [[ $(json_schema "$1") == $2 ]]; }
ST="strace -f -qq -e trace=open,openat,openat2,creat,rename,renameat,renameat2,linkat"

# snapshot -o into the group-writable directory
$ST -o "$T/st.snap" "$HANGDX" snapshot --samples 1 -o "$T/grp/snap.json" $target 2>"$T/err"; rc=$?
check "snapshot -o in a 2775 directory: exit 0 (got $rc; $(tr "\n" " " <"$T/err"))" test $rc -eq 0
check "  the victim is untouched (bytes, mode 0600, one link)" victim_intact
check "  snap.json is root's regular file, schema hangdx.snapshot/* ($(json_schema "$T/grp/snap.json"))" \
    root_json "$T/grp/snap.json" 'hangdx.snapshot/*'
check "  every file it created was O_TMPFILE or O_EXCL|O_NOFOLLOW under a random name" created_safely "$T/st.snap"
check "  its writability check created no file (one O_TMPFILE probe, one output)" \
    test "$(grep -c 'O_TMPFILE' "$T/st.snap")" -eq 2

# the same where O_TMPFILE is refused (EOPNOTSUPP injected into every second open of the
# directory: the check's and the writer's, after each O_PATH open of it): a random O_EXCL name
rm -f "$T/grp/snap.json"
strace -f -qq -P "$T/sticky" -e trace=openat,renameat,linkat -e inject=openat:error=EOPNOTSUPP:when=2+2 \
    -o "$T/st.fallback" "$HANGDX" snapshot --samples 1 -o "$T/sticky/snap.json" $target 2>"$T/err"; rc=$?
check "snapshot -o in a 1777 directory without O_TMPFILE: exit 0 (got $rc; $(tail -1 "$T/err"))" test $rc -eq 0
check "  the fallback ran: O_TMPFILE refused, then O_CREAT|O_EXCL|O_NOFOLLOW on a random name" \
    bash -c "grep -q 'O_TMPFILE.*INJECTED' '$T/st.fallback' && grep -qE 'openat\([0-9]+, \"\.snap\.json\.[0-9a-f]{16}\", O_WRONLY\|O_CREAT\|O_EXCL\|O_NOFOLLOW' '$T/st.fallback'"
check "  the victim is untouched" victim_intact
check "  snap.json is root's regular file, schema hangdx.snapshot/*" root_json "$T/sticky/snap.json" 'hangdx.snapshot/*'
check "  every file it created was safe" created_safely "$T/st.fallback"

# analyze -o and --html into the sticky directory
$ST -o "$T/st.an" "$HANGDX" analyze --json -o "$T/sticky/out.json" --html "$T/sticky/out.html" "$LOG" 2>"$T/err"; rc=$?
check "analyze -o --html in a 1777 directory: exit 0 (got $rc; $(tail -1 "$T/err"))" test $rc -eq 0
check "  the victim is untouched" victim_intact
check "  out.json is root's, schema hangdx.report/2 ($(json_schema "$T/sticky/out.json"))" \
    root_json "$T/sticky/out.json" hangdx.report/2
check "  out.html is root's HTML report" \
    bash -c "$(declare -f root_file); root_file '$T/sticky/out.html' && grep -qi '<html' '$T/sticky/out.html'"
check "  every file it created was safe" created_safely "$T/st.an"
a=$(grep -oE '"\.out\.json\.[0-9a-f]{16}"' "$T/st.an" | sort -u)
$ST -o "$T/st.an2" "$HANGDX" analyze --json -o "$T/sticky/out.json" "$LOG" 2>/dev/null
b=$(grep -oE '"\.out\.json\.[0-9a-f]{16}"' "$T/st.an2" | sort -u)
check "  a second run publishes through another name ($a, $b)" bash -c "[ -n '$a' ] && [ -n '$b' ] && [ '$a' != '$b' ]"

# where linkat(AT_EMPTY_PATH) is refused (kernels before 6.10 without CAP_DAC_READ_SEARCH:
# ENOENT, injected) the nameless file is linked through /proc/self/fd
strace -f -qq -e trace=linkat,renameat -e inject=linkat:error=ENOENT:when=1 -o "$T/st.proc" \
    "$HANGDX" analyze --json -o "$T/sticky/proc.json" "$LOG" 2>/dev/null; rc=$?
check "analyze -o with AT_EMPTY_PATH refused: exit 0 (got $rc), linked through /proc/self/fd" \
    bash -c "test $rc -eq 0 && grep -qE 'linkat\(AT_FDCWD, \"/proc/self/fd/[0-9]+\", [0-9]+, \"\.proc\.json\.[0-9a-f]{16}\", AT_SYMLINK_FOLLOW\) = 0' '$T/st.proc'"
check "  proc.json is root's, schema hangdx.report/2" root_json "$T/sticky/proc.json" hangdx.report/2
check "  the victim is untouched" victim_intact

# a link another user planted at the output's own name: refused before anything is read
as_user ln -s "$T/victim" "$T/sticky/out.txt"
"$HANGDX" analyze -o "$T/sticky/out.txt" "$LOG" >/dev/null 2>"$T/err"; rc=$?
check "analyze -o a link that nobody owns: exit 2 (got $rc), says so" \
    bash -c "test $rc -eq 2 && grep -q 'is a symbolic link that another user owns' '$T/err'"
check "  the victim is untouched" victim_intact
check "  the link is still the attacker's link" test -L "$T/sticky/out.txt"
# a link another user planted at a directory on the output's way (to a directory of root's
# that holds a file of root's at the output's name): refused, for -o, --html, snapshot -o and
# run -d alike; nothing is written or replaced in that directory
mkdir -m 700 "$T/rootdir2"
cp "$T/victim" "$T/rootdir2/hang.txt"
as_user ln -s "$T/rootdir2" "$T/sticky/run1"
"$HANGDX" analyze -o "$T/sticky/run1/hang.txt" "$LOG" >/dev/null 2>"$T/err"; rc=$?
check "analyze -o through a directory link that nobody owns: exit 2 (got $rc), says so" \
    bash -c "test $rc -eq 2 && grep -q 'or a directory on its way, is a symbolic link that another user owns' '$T/err'"
"$HANGDX" analyze --html "$T/sticky/run1/h.html" "$LOG" >/dev/null 2>&1; rc=$?
check "analyze --html through it: exit 2 (got $rc)" test $rc -eq 2
"$HANGDX" snapshot --samples 1 -o "$T/sticky/run1/snap.json" $target >/dev/null 2>&1; rc=$?
check "snapshot -o through it: refused (exit $rc)" test $rc -ne 0
"$HANGDX" run -d "$T/sticky/run1/traces" -- /bin/true 2>"$T/err"; rc=$?
check "run -d through it: refused (exit $rc), says so" \
    bash -c "test $rc -ne 0 && grep -q 'or a directory on its way, is a symbolic link that another user owns' '$T/err'"
check "  root's directory holds its one file, unchanged" \
    bash -c "test \"\$(ls -A '$T/rootdir2')\" = hang.txt && cmp -s '$T/rootdir2/hang.txt' '$T/victim.orig'"
# a link of root's own is what its owner asked for: written to its target
ln -s mine.txt "$T/grp/mylink.txt"
"$HANGDX" analyze -o "$T/grp/mylink.txt" "$LOG" >/dev/null 2>&1; rc=$?
check "analyze -o root's own link: exit 0 (got $rc), the report in its target, the link kept" \
    bash -c "test $rc -eq 0 && grep -q '^verdict:' '$T/grp/mine.txt' && test -L '$T/grp/mylink.txt'"
"$HANGDX" analyze -o /dev/null "$LOG" >/dev/null 2>&1; rc=$?
check "analyze -o /dev/null: exit 0 (got $rc), /dev/null still the null device" \
    bash -c "test $rc -eq 0 && test -c /dev/null"
# a hard link at the output's name (as where fs.protected_hardlinks is off): the name is
# replaced, the other link keeps its bytes
ln "$T/victim" "$T/grp/hard.txt"
"$HANGDX" analyze -o "$T/grp/hard.txt" "$LOG" >/dev/null 2>&1; rc=$?
check "analyze -o a hard link to the victim: exit 0 (got $rc), hard.txt the report" \
    bash -c "test $rc -eq 0 && grep -q '^verdict:' '$T/grp/hard.txt'"
check "  the victim keeps its bytes" cmp -s "$T/victim" "$T/victim.orig"

# run -d: a sticky world-writable trace directory, with the links planted above and at the
# report's own names; hangdx is straced from its start (-p: the job must stay untraced for
# hangdx to capture it)
as_user ln -s "$T/victim" "$T/sticky/report.txt"
as_user ln -s "$T/victim" "$T/sticky/report.json"
"$HANGDX" run --hang-timeout 3 -d "$T/sticky" -- \
    /usr/bin/python3 -c 'import os; r, w = os.pipe(); os.read(r, 1)' 2>"$T/err.run" &
run=$!
strace -f -qq -e trace=open,openat,openat2,creat,rename,renameat,renameat2,linkat -o "$T/st.run" -p $run &
tracer=$!
for _ in $(seq 600); do grep -q "^hangdx: report in" "$T/err.run" && break; sleep 0.1; done
kill -TERM $run 2>/dev/null  # passed on to the job: run ends with it
wait $run
kill $tracer 2>/dev/null; wait $tracer 2>/dev/null
check "run -d a 1777 directory: reported ($(grep -m1 'report' "$T/err.run"))" grep -q "^hangdx: report in $T/sticky/report.txt" "$T/err.run"
check "  the victim is untouched" victim_intact
check "  report.txt and report.json replaced the links: root's regular files" \
    bash -c "$(declare -f root_file); root_file '$T/sticky/report.txt' && root_file '$T/sticky/report.json'"
check "  report.json has schema hangdx.report/2" root_json "$T/sticky/report.json" hangdx.report/2
check "  report.txt has the verdict" grep -q '^verdict:' "$T/sticky/report.txt"
check "  every file hangdx created was safe" created_safely "$T/st.run"

# run -d in the attacker's group-writable directory: once run started, the attacker moves the
# trace directory away and puts a link to a directory of root's in its place; the report goes
# into the directory run checked and holds (now run.old), nothing into root's
mkdir -m 700 "$T/rootdir3"
"$HANGDX" run --hang-timeout 3 -d "$T/grp/run" -- \
    /usr/bin/python3 -c 'import os; r, w = os.pipe(); os.read(r, 1)' 2>"$T/err.swap" &
run=$!
for _ in $(seq 300); do grep -q "tracing into" "$T/err.swap" && break; sleep 0.1; done
as_user mv "$T/grp/run" "$T/grp/run.old"
as_user ln -s "$T/rootdir3" "$T/grp/run"
for _ in $(seq 600); do grep -q "^hangdx: report in" "$T/err.swap" && break; sleep 0.1; done
kill -TERM $run 2>/dev/null
wait $run
check "run -d, its directory swapped for a link mid-run: the report is in the directory run holds" \
    bash -c "$(declare -f root_file); root_file '$T/grp/run.old/report.txt' && root_file '$T/grp/run.old/report.json'"
check "  nothing in root's directory that the link names" test -z "$(ls -A "$T/rootdir3")"

# a trace directory given through a link that the attacker planted to a directory of root's
mkdir -m 700 "$T/rootdir"
as_user ln -s "$T/rootdir" "$T/sticky/tracelink"
"$HANGDX" run -d "$T/sticky/tracelink" -- /bin/true 2>"$T/err"; rc=$?
check "run -d a link that nobody owns: refused (exit $rc), says so" \
    bash -c "test $rc -ne 0 && grep -q 'is a symbolic link that another user owns' '$T/err'"
check "  nothing was written into the directory it names" test -z "$(ls -A "$T/rootdir")"

# a hard link to a file of root's at a job's trace name (the job plants it itself, as an
# attacker could where fs.protected_hardlinks is off): the shim refuses it, the job runs on
mkdir -m 1777 "$T/traces"
"$HANGDX" run -d "$T/traces" -- /bin/sh -c 'f=$(ls "$1"/*-$$.jsonl "$1"/*-$$-ns*.jsonl 2>/dev/null | head -1)
    [ -n "$f" ] && rm -f "$f" && ln "$2" "$f" && exec /bin/true; exit 9' _ "$T/traces" "$T/victim" 2>"$T/err"; rc=$?
check "a job that links the victim at its trace name, then execs: exit 0 (got $rc)" test $rc -eq 0
check "  the shim appended nothing to the victim" cmp -s "$T/victim" "$T/victim.orig"
exit $fail
