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
each `#include "x/y.h"` and fails (exit 1), printing one line per problem, on:
  - an include of another stage that the including file's stage may not include
    (printed `file -> header`);
  - a quoted include that names no folder, or a folder that is neither a stage nor
    one of include/ (include/hangdx: what the shim and the inspector share);
  - a system header of IO_HEADERS in a stage whose rule says "no I/O";
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
import os
import re
import sys
import tempfile

RULE_RE = re.compile(r"^\s*\*\s*Stage rule:\s*(.*)$")
RULE_FORM = re.compile(r"^([a-z_]+) may include (nothing|every stage|[a-z_]+(?:, [a-z_]+)*)(; no I/O)?\.(?:\s.*)?$")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SYSTEM_RE = re.compile(r'^\s*#\s*include\s*<([^>]+)>')
# Headers of the calls that do I/O, wait, or read the clock or the process's state.
IO_HEADERS = {"unistd.h", "fcntl.h", "dirent.h", "glob.h", "poll.h", "signal.h", "time.h", "pthread.h",
              "dlfcn.h", "sys/stat.h", "sys/types.h", "sys/ptrace.h", "sys/wait.h", "sys/uio.h",
              "sys/socket.h", "sys/mman.h", "sys/syscall.h", "sys/time.h", "sys/file.h", "libunwind.h",
              "libunwind-ptrace.h", "elfutils/libdwfl.h", "libelf.h", "gelf.h"}
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
    for f in files:
        with open(os.path.join(base, f), encoding="utf-8", errors="replace") as fh:
            texts[f] = fh.read().splitlines()
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
            s = SYSTEM_RE.match(line)
            if s and stage in pure and s.group(1) in IO_HEADERS:
                problems.append("inspector/%s -> <%s> (stage %s does no I/O)" % (f, s.group(1), stage))
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            header = m.group(1)
            n_includes += 1
            top = header.split("/")[0] if "/" in header else None
            if top is None:
                problems.append("inspector/%s -> %s (a quoted include names its folder: stage/file.h)" % (f, header))
            elif top in stages:
                if top != stage and allowed is not None and top not in allowed:
                    problems.append("inspector/%s -> %s" % (f, header))
            elif top not in shared:
                problems.append("inspector/%s -> %s (%s/ is neither a stage nor in include/)" % (f, header, top))

    n_unit = check_unit_tests(root, stages, problems)
    summary = "layout: %d stages, %d files, %d quoted includes: every include keeps its stage's rule" % (
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
    if failures:
        print("self-test FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("self-test: every fault was caught")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if len(argv) == 3 and argv[1] == "--root":
        root = argv[2]
    elif len(argv) != 1:
        print("usage: check_layout.py [--root DIR] | --self-test", file=sys.stderr)
        return 2
    problems, summary = check(root)
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
