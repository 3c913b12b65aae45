#!/usr/bin/env python3
"""The inspector's stage folders are a dependency order (docs/design.md "Stages").

Each folder inspector/<stage>/ holds one stage of the data flow, and one of its
headers carries the rule of that stage in its first comment, in exactly this form:

     * Stage rule: <stage> may include <what>.
     * Stage rule: <stage> may include <what>; no I/O.

where <what> is "nothing" (only the stage itself), "every stage", or stage names
joined by ", ". Anything after the full stop (a reference) is ignored. "no I/O"
forbids the stage's files the system headers through which a program does I/O,
waits or reads the clock (IO_HEADERS below; <stdio.h> stays, for snprintf).

This script reads those rules, lists every .c and .h under inspector/<stage>/, parses
each `#include "x/y.h"` and each `#include <x/y.h>` whose folder is a stage or one of
include/ (inspector/ is a PUBLIC include directory of hdxcore, so the angle form reaches
the stages too), with `.` and `..` resolved as the compiler does ("classify/../gather/
proc.h" is gather's; "../gather/proc.h" from a stage folder too), and fails (exit 1),
printing one line per problem, on:
  - an include of another stage that the including file's stage may not include
    (printed `file -> header`);
  - a quoted include that names no folder, or a folder that is neither a stage nor
    one of include/ (include/hangdx: what the shim and the inspector share), or one
    whose `..` leads out of inspector/ and include/;
  - an include that names no header literally (`#include MACRO`, or #include_next):
    what it includes cannot be checked;
  - a system header of IO_HEADERS in a stage whose rule says "no I/O", and in such a
    stage a call of <stdio.h>'s I/O (STDIO_IO_CALLS: fopen, fprintf, printf, ...;
    comments and string literals are not read) -- <stdio.h> stays for snprintf;
  - a .c or .h of inspector/ outside a stage folder;
  - a stage folder without its rule line, or with two; a rule of a stage that has
    no folder, or naming a stage that does not exist; rules that are no order (a
    stage that reaches itself through them).

The unit tests mirror the stages (tests/README.md): each folder tests/unit/<name>/ holds
the tests of the stage inspector/<name>/. It also fails on
  - a folder of tests/unit/ that names no stage folder;
  - a folder of tests/unit/ that tests/unit/CMakeLists.txt does not add (its tests would
    never run).
Exit 0 with a one-line summary when the tree keeps the rules; 2 on bad usage.

  check_layout.py [--root DIR]   check DIR (default: the source tree holding this script)
  check_layout.py --self-test    build small trees with known faults, check each is caught
"""
import argparse
import os
import posixpath
import re
import sys
import tempfile

RULE_RE = re.compile(r"^\s*\*\s*Stage rule:\s*(.*)$")
RULE_FORM = re.compile(r"^([a-z_]+) may include (nothing|every stage|[a-z_]+(?:, [a-z_]+)*)(; no I/O)?\.(?:\s.*)?$")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SYSTEM_RE = re.compile(r'^\s*#\s*include\s*<([^>]+)>')
# Any #include or #include_next: one that neither of the two above matches names no header.
ANY_INCLUDE_RE = re.compile(r'^\s*#\s*include(_next)?\b\s*(.*)$')
# Headers of the calls that do I/O, wait, or read the clock or the process's state.
IO_HEADERS = {"unistd.h", "fcntl.h", "dirent.h", "glob.h", "poll.h", "signal.h", "time.h", "pthread.h",
              "dlfcn.h", "sys/stat.h", "sys/types.h", "sys/ptrace.h", "sys/wait.h", "sys/uio.h",
              "sys/socket.h", "sys/mman.h", "sys/syscall.h", "sys/time.h", "sys/file.h", "libunwind.h",
              "libunwind-ptrace.h", "elfutils/libdwfl.h", "libelf.h", "gelf.h",
              "sys/ioctl.h", "sys/resource.h", "sys/select.h", "sys/epoll.h", "sched.h", "pwd.h", "grp.h",
              "threads.h", "sys/utsname.h", "sys/prctl.h", "sys/inotify.h", "sys/eventfd.h", "sys/timerfd.h",
              "sys/signalfd.h", "sys/sysinfo.h", "sys/statfs.h", "sys/statvfs.h", "sys/vfs.h", "sys/random.h",
              "sys/sendfile.h", "sys/un.h", "spawn.h", "termios.h", "netdb.h", "semaphore.h", "aio.h",
              "mqueue.h"}
# The calls of <stdio.h> that do I/O (to a file, a stream, a pipe or the terminal); a stage of
# no I/O keeps <stdio.h> for snprintf and vsnprintf only. (open_memstream and fmemopen are here
# too through what they are for: fprintf, fclose; classify builds its strings with snprintf.)
STDIO_IO_CALLS = ("fopen", "fdopen", "freopen", "fclose", "fflush", "fprintf", "vfprintf", "printf", "vprintf",
                  "dprintf", "vdprintf", "fputs", "fputc", "putc", "putchar", "puts", "fwrite", "fread", "fgets",
                  "fgetc", "getc", "getchar", "ungetc", "fscanf", "scanf", "vfscanf", "vscanf", "getline",
                  "getdelim", "popen", "pclose", "perror", "tmpfile", "open_memstream", "fmemopen", "setvbuf",
                  "remove", "rename")
STDIO_CALL_RE = re.compile(r"(?<![\w.>])(%s)\s*\(" % "|".join(STDIO_IO_CALLS))
# Comments, string and character literals: blanked (newlines kept) before the calls are looked for.
CODE_NOISE_RE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def code_only(text):
    """text without its comments and literals, each replaced by as many newlines as it held."""
    return CODE_NOISE_RE.sub(lambda m: "\n" * m.group(0).count("\n") + " ", text)


def resolve(f, header, quoted, base):
    """The path of an include relative to the include folders, with . and .. resolved: a quoted
    one first beside the including file f (as the compiler looks), then from an include folder.
    None when it leads out of them."""
    if header.startswith("/"):
        return None
    parts = header.split("/")
    if ".." not in parts and "." not in parts:
        return header
    if quoted:
        beside = posixpath.normpath(posixpath.join(posixpath.dirname(f.replace(os.sep, "/")), header))
        if not beside.startswith("..") and os.path.exists(os.path.join(base, beside)):
            return beside
    norm = posixpath.normpath(header)
    return None if norm == ".." or norm.startswith("../") else norm
SOURCE_EXT = (".c", ".h")


def sources(root):
    """Every .c/.h under root/inspector, as paths relative to root/inspector, sorted."""
    base = os.path.join(root, "inspector")
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXT):
                out.append(os.path.relpath(os.path.join(dirpath, name), base))
    return out


def check(root):
    """The list of problems of root's inspector/ (empty when it keeps the rules), and a summary."""
    problems = []
    base = os.path.join(root, "inspector")
    if not os.path.isdir(base):
        return ["%s: no inspector/ folder" % root], ""
    shared = set()
    inc = os.path.join(root, "include")
    if os.path.isdir(inc):
        shared = {d for d in os.listdir(inc) if os.path.isdir(os.path.join(inc, d))}
    files = sources(root)
    stages = sorted({f.split(os.sep)[0] for f in files if os.sep in f})
    for f in files:
        if os.sep not in f:
            problems.append("inspector/%s: outside a stage folder (put it in inspector/<stage>/)" % f)

    # The rules: one line per stage folder.
    rules = {}  # stage -> set of stages it may include, or None for every stage
    pure = set()  # stages whose rule says "no I/O"
    where = {}
    texts = {}
    raw = {}
    for f in files:
        with open(os.path.join(base, f), encoding="utf-8", errors="replace") as fh:
            raw[f] = fh.read()
            texts[f] = raw[f].replace("\\\n", "").splitlines()  # a directive may span lines
    for f in files:
        for no, line in enumerate(texts[f], 1):
            m = RULE_RE.match(line)
            if not m:
                continue
            at = "inspector/%s:%d" % (f, no)
            form = RULE_FORM.match(m.group(1).strip())
            if not form:
                problems.append('%s: a stage rule not in the form "Stage rule: <stage> may include <stages>."' % at)
                continue
            stage, what, no_io = form.group(1), form.group(2), bool(form.group(3))
            own = f.split(os.sep)[0] if os.sep in f else None
            if stage != own:
                problems.append("%s: the rule of stage %s is in folder %s" % (at, stage, own or "inspector/"))
                continue
            if stage in rules:
                problems.append("%s: a second rule for stage %s (the first: %s)" % (at, stage, where[stage]))
                continue
            allowed = None if what == "every stage" else set() if what == "nothing" else set(what.split(", "))
            rules[stage] = allowed
            where[stage] = at
            if no_io:
                pure.add(stage)
    for stage in stages:
        if stage not in rules:
            problems.append('inspector/%s/: no stage rule line (" * Stage rule: %s may include ...." in one of its '
                            "headers)" % (stage, stage))
    for stage, allowed in sorted(rules.items()):
        for other in sorted(allowed or ()):
            if other not in stages:
                problems.append("%s: stage %s may include %s, which is no stage folder" % (where[stage], stage, other))

    # The rules must be an order: no stage may reach itself through them.
    def deps(stage):
        allowed = rules[stage]
        return sorted((set(rules) - {stage}) if allowed is None else allowed & set(rules))
    state = {}

    def visit(stage, path):
        state[stage] = 1
        for other in deps(stage):
            if state.get(other) == 1:
                cycle = path[path.index(other):] + [other]
                problems.append("the stage rules are not an order: %s" % " -> ".join(cycle))
            elif other not in state:
                visit(other, path + [other])
        state[stage] = 2

    for stage in sorted(rules):
        if stage not in state:
            visit(stage, [stage])

    # The includes.
    n_includes = 0
    for f in files:
        if os.sep not in f:
            continue
        stage = f.split(os.sep)[0]
        if stage not in rules:
            continue  # its missing rule is reported above
        allowed = rules[stage]
        for line in texts[f]:
            a = ANY_INCLUDE_RE.match(line)
            if not a:
                continue
            s = SYSTEM_RE.match(line)
            m = INCLUDE_RE.match(line)
            if a.group(1) or not (s or m):
                problems.append("inspector/%s: `%s` names no header literally (#include \"stage/file.h\" or "
                                "<header.h>, so that its stage can be checked)" % (f, line.strip()))
                continue
            quoted = m is not None
            written = m.group(1) if quoted else s.group(1)
            header = resolve(f, written, quoted, base)
            if header is None:
                problems.append("inspector/%s -> %s (leads out of inspector/ and include/)" % (f, written))
                continue
            shown = written if header == written else "%s (that is %s)" % (header, written)
            top = header.split("/")[0] if "/" in header else None
            if not quoted:
                if stage in pure and header in IO_HEADERS:
                    problems.append("inspector/%s -> <%s> (stage %s does no I/O)" % (f, header, stage))
                if top not in stages and top not in shared:
                    continue  # a system header
            n_includes += 1
            if top is None:
                problems.append("inspector/%s -> %s (a quoted include names its folder: stage/file.h)" % (f, shown))
            elif top in stages:
                if top != stage and allowed is not None and top not in allowed:
                    problems.append("inspector/%s -> %s" % (f, shown))
            elif top not in shared:
                problems.append("inspector/%s -> %s (%s/ is neither a stage nor in include/)" % (f, shown, top))
        if stage in pure:
            code = code_only(raw[f])
            for no, cline in enumerate(code.splitlines(), 1):
                if cline.lstrip().startswith("#"):
                    continue
                for c in STDIO_CALL_RE.finditer(cline):
                    problems.append("inspector/%s:%d: calls %s() (stage %s does no I/O; its <stdio.h> is for "
                                    "snprintf)" % (f, no, c.group(1), stage))

    n_unit = check_unit_tests(root, stages, problems)
    summary = "layout: %d stages, %d files, %d includes of stages and include/: every one keeps its stage's rule" % (
        len(stages), len(files), n_includes)
    if n_unit is not None:
        summary += "; tests/unit: %d folders, each a stage's" % n_unit
    return problems, summary


ADD_SUBDIRECTORY_RE = re.compile(r"^\s*add_subdirectory\(\s*([^\s)]+)", re.MULTILINE)


def check_unit_tests(root, stages, problems):
    """The folders of root/tests/unit must be stage names, each added by its CMakeLists.txt.
    Appends to problems; returns how many folders there are, None without tests/unit."""
    unit = os.path.join(root, "tests", "unit")
    if not os.path.isdir(unit):
        return None
    folders = sorted(d for d in os.listdir(unit) if os.path.isdir(os.path.join(unit, d)))
    added = set()
    try:
        with open(os.path.join(unit, "CMakeLists.txt"), encoding="utf-8") as fh:
            added = set(ADD_SUBDIRECTORY_RE.findall(fh.read()))
    except OSError:
        pass
    for d in folders:
        if d not in stages:
            problems.append("tests/unit/%s/: names no stage of inspector/ (%s): the unit tests of a stage go in "
                            "tests/unit/<stage>/" % (d, ", ".join(stages)))
        elif d not in added:
            problems.append("tests/unit/%s/: not added by tests/unit/CMakeLists.txt (add_subdirectory(%s)): its "
                            "tests never run" % (d, d))
    return len(folders)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def rule(stage, what):
    return "/*\n * The %s stage.\n *\n * Stage rule: %s may include %s. (docs/design.md \"Stages\")\n */\n" % (
        stage, stage, what)


def self_test():
    """Trees with known faults: each must give exactly the expected problems."""
    failures = []

    def expect(name, build, want):
        with tempfile.TemporaryDirectory(prefix="hdx-layout-") as root:
            # a clean base: model <- classify <- cmd, and include/hangdx shared
            write(root, "include/hangdx/trace.h", "")
            write(root, "inspector/model/evidence.h", rule("model", "nothing") + '#include "hangdx/trace.h"\n')
            write(root, "inspector/model/evidence.c", '#include "model/evidence.h"\n')
            write(root, "inspector/classify/classify.h", rule("classify", "model") + '#include "model/evidence.h"\n')
            write(root, "inspector/classify/classify.c",
                  '#include "classify/classify.h"\n#include <stdio.h>\n  #  include "model/evidence.h"\n')
            write(root, "inspector/cmd/cmd.h", rule("cmd", "every stage"))
            write(root, "inspector/cmd/main.c", '#include "cmd/cmd.h"\n#include "classify/classify.h"\n')
            write(root, "tests/unit/CMakeLists.txt", "add_subdirectory(model)\nadd_subdirectory(classify)\n")
            write(root, "tests/unit/model/test_pool.c", "")
            write(root, "tests/unit/classify/test_rules.c", "")
            build(root)
            got, _ = check(root)
        ok = all(any(w in g for g in got) for w in want) and len(got) == len(want)
        print("%s %s: %s" % ("ok  " if ok else "FAIL", name, got if got else "clean"))
        if not ok:
            failures.append("%s: want %s, got %s" % (name, want, got))

    expect("clean tree", lambda r: None, [])
    expect("a stage of no I/O includes <unistd.h>",
           lambda r: (write(r, "inspector/classify/classify.h",
                            rule("classify", "model; no I/O") + '#include "model/evidence.h"\n'),
                      write(r, "inspector/classify/lock.c", '#include <stdio.h>\n#include <unistd.h>\n')),
           ["inspector/classify/lock.c -> <unistd.h> (stage classify does no I/O)"])
    expect("a model file includes classify",
           lambda r: write(r, "inspector/model/pool.c", '#include "model/evidence.h"\n#include "classify/classify.h"\n'),
           ["inspector/model/pool.c -> classify/classify.h"])
    expect("classify includes cmd (indented, spaced #include)",
           lambda r: write(r, "inspector/classify/waits.c", '  #  include "cmd/cmd.h"\n'),
           ["inspector/classify/waits.c -> cmd/cmd.h"])
    expect("a stage folder without its rule line",
           lambda r: write(r, "inspector/report/report.c", '#include "model/evidence.h"\n'),
           ["inspector/report/: no stage rule line"])
    expect("a file outside a stage folder",
           lambda r: write(r, "inspector/stray.c", '#include "model/evidence.h"\n'),
           ["inspector/stray.c: outside a stage folder"])
    expect("an include without its folder",
           lambda r: write(r, "inspector/classify/groups.c", '#include "evidence.h"\n'),
           ["inspector/classify/groups.c -> evidence.h (a quoted include names its folder"])
    expect("an include of no stage and not include/",
           lambda r: write(r, "inspector/classify/groups.c", '#include "gather/proc.h"\n'),
           ["inspector/classify/groups.c -> gather/proc.h (gather/ is neither"])
    expect("a rule in another stage's folder, and a malformed rule",
           lambda r: (write(r, "inspector/classify/groups.h", rule("model", "nothing")),
                      write(r, "inspector/cmd/cli.h", "/*\n * Stage rule: cmd may use anything\n */\n")),
           ["the rule of stage model is in folder classify", "a stage rule not in the form"])
    expect("two rules for one stage, and a rule naming no stage",
           lambda r: (write(r, "inspector/model/pool.h", rule("model", "nothing")),
                      write(r, "inspector/classify/classify.h", rule("classify", "model, gather"))),
           ["a second rule for stage model", "stage classify may include gather, which is no stage folder"])

    expect("a unit test folder that names no stage",
           lambda r: write(r, "tests/unit/locks/test_judge.c", ""),
           ["tests/unit/locks/: names no stage of inspector/"])
    expect("a unit test folder that tests/unit/CMakeLists.txt does not add",
           lambda r: write(r, "tests/unit/cmd/test_cli.c", ""),
           ["tests/unit/cmd/: not added by tests/unit/CMakeLists.txt"])

    # Ways around the include check: the angle form, `..`, a macro, a spanned line.
    expect("classify includes cmd with angle brackets (inspector/ is a public include folder)",
           lambda r: write(r, "inspector/classify/waits.c", '#include <stdio.h>\n#include <cmd/cmd.h>\n'),
           ["inspector/classify/waits.c -> cmd/cmd.h"])
    expect("classify reaches cmd through .. (from a stage folder, and from beside the file)",
           lambda r: (write(r, "inspector/classify/waits.c", '#include "classify/../cmd/cmd.h"\n'),
                      write(r, "inspector/classify/groups.c", '#include "../cmd/cmd.h"\n'),
                      write(r, "inspector/classify/graph.c", '#include <model/../cmd/cmd.h>\n')),
           ["inspector/classify/waits.c -> cmd/cmd.h (that is classify/../cmd/cmd.h)",
            "inspector/classify/groups.c -> cmd/cmd.h (that is ../cmd/cmd.h)",
            "inspector/classify/graph.c -> cmd/cmd.h (that is model/../cmd/cmd.h)"])
    expect("an include whose .. leads out of the include folders",
           lambda r: write(r, "inspector/classify/waits.c", '#include "../../preload/shim.h"\n'),
           ["inspector/classify/waits.c -> ../../preload/shim.h (leads out of"])
    expect("an include of a macro, and an #include_next",
           lambda r: (write(r, "inspector/classify/waits.c", '#define H "cmd/cmd.h"\n#include H\n'),
                      write(r, "inspector/classify/groups.c", '#include_next <stdio.h>\n')),
           ["inspector/classify/waits.c: `#include H` names no header literally",
            "inspector/classify/groups.c: `#include_next <stdio.h>` names no header literally"])
    expect("an include split over two lines",
           lambda r: write(r, "inspector/classify/waits.c", '#include \\\n  "cmd/cmd.h"\n'),
           ["inspector/classify/waits.c -> cmd/cmd.h"])
    new_io = ["sys/ioctl.h", "sys/resource.h", "sys/select.h", "sys/epoll.h", "sched.h", "pwd.h", "threads.h",
              "sys/utsname.h", "dirent.h", "fcntl.h", "unistd.h", "sys/stat.h", "sys/ptrace.h", "pthread.h"]
    expect("a stage of no I/O includes each header of waiting, files, users and threads",
           lambda r: (write(r, "inspector/classify/classify.h",
                            rule("classify", "model; no I/O") + '#include "model/evidence.h"\n'),
                      write(r, "inspector/classify/lock.c", "".join("#include <%s>\n" % h for h in new_io))),
           ["inspector/classify/lock.c -> <%s> (stage classify does no I/O)" % h for h in new_io])
    stdio_c = ('#include <stdio.h>\n'
               '/* fopen(x) and printf( in a comment */\n'
               'int name(char *b, size_t n) { return snprintf(b, n, "fprintf(%s)", "puts("); }\n'
               'int out(const char *s) {\n'
               '    FILE *f = fopen(s, "w");\n'
               '    fprintf (f, "%s\\n", s); fputs(s, stdout); printf("x"); puts(s);\n'
               '    char *l = 0; size_t m = 0; getline(&l, &m, stdin); perror("x");\n'
               '    return fwrite(s, 1, 1, f) + (int)fread(l, 1, 1, f) + (fgets(l, 1, f) != 0) + fputc(1, f)\n'
               '        + (popen("x", "r") != 0) + (open_memstream(&l, &m) != 0);\n}\n')
    calls = [(5, "fopen"), (6, "fprintf"), (6, "fputs"), (6, "printf"), (6, "puts"), (7, "getline"),
             (7, "perror"), (8, "fwrite"), (8, "fread"), (8, "fgets"), (8, "fputc"), (9, "popen"),
             (9, "open_memstream")]
    expect("a stage of no I/O calls stdio's I/O (but snprintf, comments and strings are fine)",
           lambda r: (write(r, "inspector/classify/classify.h",
                            rule("classify", "model; no I/O") + '#include "model/evidence.h"\n'),
                      write(r, "inspector/classify/words.c", stdio_c)),
           ["inspector/classify/words.c:%d: calls %s() (stage classify does no I/O" % c for c in calls])

    expect("rules that are no order",
           lambda r: write(r, "inspector/model/evidence.h", rule("model", "classify")),
           ["the stage rules are not an order: classify -> model -> classify"])

    # The command line: a violation exits 1 and prints `file -> header`.
    with tempfile.TemporaryDirectory(prefix="hdx-layout-") as root:
        write(root, "inspector/model/evidence.h", rule("model", "nothing") + '#include "native/stacks.h"\n')
        write(root, "inspector/native/stacks.h", rule("native", "model") + '#include "model/evidence.h"\n')
        import subprocess
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", root], capture_output=True, text=True)
        ok = r.returncode == 1 and "inspector/model/evidence.h -> native/stacks.h" in r.stdout
        print("%s command line: exit %d, %r" % ("ok  " if ok else "FAIL", r.returncode, r.stdout.strip()))
        if not ok:
            failures.append("command line: exit %d, stdout %r, stderr %r" % (r.returncode, r.stdout, r.stderr))
    # The usage: --help prints it and exits 0; an unknown option exits 2.
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--help"], capture_output=True, text=True)
    ok = r.returncode == 0 and "--root DIR" in r.stdout and "--self-test" in r.stdout
    print("%s --help: exit %d" % ("ok  " if ok else "FAIL", r.returncode))
    if not ok:
        failures.append("--help: exit %d, stdout %r" % (r.returncode, r.stdout))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--bogus"], capture_output=True, text=True)
    ok = r.returncode == 2 and "usage:" in r.stderr
    print("%s bad usage: exit %d" % ("ok  " if ok else "FAIL", r.returncode))
    if not ok:
        failures.append("bad usage: exit %d, stderr %r" % (r.returncode, r.stderr))
    if failures:
        print("self-test FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("self-test: every fault was caught")
    return 0


def main(argv):
    parser = argparse.ArgumentParser(
        prog="check_layout.py",
        description="Check that every #include of inspector/<stage>/ keeps the \"Stage rule:\" line of its "
                    "stage (docs/design.md \"Stages\"), that a stage of no I/O includes no I/O header and "
                    "calls no stdio I/O, and that every folder of tests/unit/ names a stage and is added by "
                    "tests/unit/CMakeLists.txt.",
        epilog="exit status: 0 the tree keeps the rules (one summary line); 1 it does not (one line per "
               "problem); 2 bad usage.  examples:  check_layout.py;  check_layout.py --root ~/src/hangdx;  "
               "check_layout.py --self-test")
    parser.add_argument("--root", metavar="DIR",
                        default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")),
                        help="the source tree to check (default: the one holding this script)")
    parser.add_argument("--self-test", action="store_true",
                        help="build small trees with known faults and check that each is caught")
    args = parser.parse_args(argv[1:])
    if args.self_test:
        return self_test()
    problems, summary = check(args.root)
    if problems:
        print("the inspector's stages, or the unit tests' mirror of them, are broken (docs/design.md \"Stages\", "
              "tests/README.md):")
        for p in problems:
            print(p)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
