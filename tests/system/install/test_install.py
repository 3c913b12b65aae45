"""The build installs, and the self-contained bundle runs where hangdx is not installed.

usage: test_install.py install | bundle
  install  `cmake --install` of the build under test into a new prefix: bin/hangdx,
           lib/libhangdx-preload.so and share/hangdx/patterns/logs.json are there, the
           installed hangdx finds its log patterns (analyze of a log gives the build tree's
           verdict) and its shim (`hangdx run` records a trace), and no path of the source
           tree is compiled into the binary.
  bundle   scripts/bundle DIR: every library Debian ships as a static archive is linked in
           (no libdw, libelf, libunwind, zlib, xz, bzip2 or libstdc++ needed), cJSON is in
           DIR/lib; the shim needs only libc and libdl at glibc 2.17 or later. In the Debian
           13 root (glibc 2.41, a container image without hangdx) the bundle's `hangdx run`
           records the trace of a FileBaton-like lock; in the Debian 11 root (glibc 2.31) the
           bundle's shim, preloaded into Debian 11's Python 3.9, records it too, and the
           bundle says that its bin/hangdx needs a newer glibc than that root has.
Exit 0 passed, 1 failed, 77 skipped (with a line saying why).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HANGDX = os.environ.get("HANGDX")
BUILD = os.environ.get("HDX_BUILD_DIR")
SRC = os.environ.get("HDX_SOURCE_DIR") or os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROOTS = {13: os.environ.get("HDX_CONTAINER_ROOT", "/var/cache/hangdx/debian13-root"),
         11: "/var/cache/hangdx/debian11-root"}
FAILED = []


def check(cond, what, got=None):
    print(("ok    " if cond else "FAIL  ") + what + ("" if cond or got is None else "\n        got: %r" % (got,)),
          flush=True)
    if not cond:
        FAILED.append(what)
    return cond


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def verdict(hangdx, log):
    r = run([hangdx, "analyze", "--json", log])
    return r.returncode, (json.loads(r.stdout)["verdict"] if r.stdout.strip().startswith("{") else r.stderr)


def case_install(tmp):
    prefix = os.path.join(tmp, "prefix")
    r = run(["cmake", "--install", BUILD, "--prefix", prefix])
    if not check(r.returncode == 0, "cmake --install exits 0", r.stderr):
        return
    for f in ("bin/hangdx", "lib/libhangdx-preload.so", "share/hangdx/patterns/logs.json"):
        check(os.path.isfile(os.path.join(prefix, f)), "installed: " + f, sorted(os.listdir(prefix)))
    hdx = os.path.join(prefix, "bin", "hangdx")
    log = os.path.join(SRC, "tests", "fixtures", "logs", "gloo_collective_rank_skipped.log")
    want = verdict(HANGDX, log)
    got = verdict(hdx, log)
    check(got == want and want[1]["class"] == "collective_wait",
          "the installed hangdx reads the log as the build tree's does (its patterns found at share/hangdx)", got)
    traces = os.path.join(tmp, "traces")
    r = run([hdx, "run", "-d", traces, "--", "/usr/bin/python3", "-c",
             "import os; os.makedirs('%s/b', exist_ok=True); os.open('%s/b/lock', os.O_CREAT | os.O_EXCL)" % (tmp, tmp)])
    check(r.returncode == 0, "the installed hangdx run exits 0 (it finds lib/libhangdx-preload.so)", r.stderr)
    check(lock_acquired(traces, os.path.join(tmp, "b", "lock")), "its shim recorded the lock's acquire", traces)
    if any(lib.startswith(("libasan", "libubsan")) for lib in needed(hdx)):
        print("skip  the source tree's path in bin/hangdx's data: a sanitizer build names its sources for its "
              "reports", flush=True)
        return
    rodata = os.path.join(tmp, "rodata")
    run(["objcopy", "-O", "binary", "--only-section=.rodata", hdx, rodata])
    with open(rodata, "rb") as f:
        blob = f.read()
    check(len(blob) > 0 and SRC.encode() not in blob,
          "the source tree's path (%s) is not in bin/hangdx's data (only its debug information names it)" % SRC)


def lock_acquired(traces, path):
    """Does a trace file under traces hold an acquire of path?"""
    if not os.path.isdir(traces):
        return False
    for name in os.listdir(traces):
        with open(os.path.join(traces, name)) as f:
            for line in f:
                e = json.loads(line)
                if e.get("type") == "acquire" and e.get("path") == path:
                    return True
    return False


def needed(path):
    out = run(["readelf", "-d", path]).stdout
    return re.findall(r"\(NEEDED\).*\[(.*)\]", out)


def make_root(release):
    r = run([os.path.join(SRC, "scripts", "make-debian-root"), str(release), ROOTS[release]])
    if r.returncode == 77:
        print("skipped: the Debian %d root cannot be made here: %s" % (release, r.stdout.strip().splitlines()[-1:]))
        sys.exit(77)
    if r.returncode != 0:
        sys.exit("make-debian-root %d failed: %s" % (release, r.stdout + r.stderr))


def in_root(release, bundle, args):
    """Run args in the root, with the bundle at /opt/hangdx and /proc mounted, in a mount
    namespace of its own (nothing is left mounted, and the cached root is not written)."""
    root = ROOTS[release]
    script = ('set -e; r="$2"; mount --make-rprivate /; mount --bind "$1" "$r/opt"; mount -t proc proc "$r/proc"; '
              'mount -t tmpfs tmpfs "$r/tmp"; shift 2; exec chroot "$r" "$@"')
    return run(["unshare", "--mount", "--pid", "--fork", "sh", "-c", script, "sh", bundle, root] + args)


def case_bundle(tmp):
    if os.geteuid() != 0:
        print("skipped: needs root (chroot, mounts) to run the bundle in the Debian roots")
        sys.exit(77)
    for release in (13, 11):
        make_root(release)
    bundle = os.path.join(tmp, "hangdx")
    r = run([os.path.join(SRC, "scripts", "bundle"), bundle])
    print(r.stdout, r.stderr[-2000:], flush=True)
    if not check(r.returncode == 0, "scripts/bundle exits 0", r.stderr[-2000:]):
        return
    hdx_needs = needed(os.path.join(bundle, "bin", "hangdx"))
    shim_needs = needed(os.path.join(bundle, "lib", "libhangdx-preload.so"))
    check(set(hdx_needs) <= {"libc.so.6", "libm.so.6", "libcjson.so.1"},
          "bin/hangdx needs only glibc and cJSON (every static archive linked in)", hdx_needs)
    check(os.path.isfile(os.path.join(bundle, "lib", "libcjson.so.1")), "cJSON is in the bundle's lib/")
    check(set(shim_needs) <= {"libc.so.6", "libdl.so.2"}, "the shim needs only libc and libdl", shim_needs)
    m = re.search(r"bin/hangdx needs glibc (\S+)", r.stdout)
    check(m is not None, "the bundle says which glibc bin/hangdx needs", r.stdout)
    check("lib/libhangdx-preload.so needs glibc 2.17 or later" in r.stdout,
          "the bundle says the shim needs glibc 2.17 or later", r.stdout)

    # Debian 13: an image without hangdx runs a job under the bundle's hangdx run.
    job = ("import os; os.makedirs('/tmp/ext', exist_ok=True); "
           "os.open('/tmp/ext/lock', os.O_CREAT | os.O_EXCL | os.O_WRONLY); print('built')")
    r = in_root(13, bundle, ["sh", "-c", "/opt/bin/hangdx run -d /tmp/traces -- python3 -c \"%s\" && "
                             "cat /tmp/traces/*.jsonl" % job])
    check(r.returncode == 0 and "built" in r.stdout, "Debian 13: the bundle's hangdx run runs the job", r.stderr)
    events = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    check(any(e.get("type") == "acquire" and e.get("path") == "/tmp/ext/lock" for e in events),
          "Debian 13: the trace holds the lock's acquire", events[:4])

    # Debian 11 (glibc 2.31): the shim loads into its Python 3.9 and records.
    r = in_root(11, bundle, ["sh", "-c", "mkdir -p /tmp/t && LD_PRELOAD=/opt/lib/libhangdx-preload.so "
                             "HANGDX_TRACE_DIR=/tmp/t python3 -c \"%s\" && cat /tmp/t/*.jsonl" % job])
    check(r.returncode == 0 and "built" in r.stdout and "ERROR: ld.so" not in r.stderr,
          "Debian 11: the shim loads into Python 3.9 (glibc 2.31)", r.stderr)
    events = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    check(any(e.get("type") == "acquire" and e.get("path") == "/tmp/ext/lock" for e in events),
          "Debian 11: the shim recorded the lock's acquire", events[:4])
    v11 = run(["chroot", ROOTS[11], "/usr/bin/ldd", "--version"]).stdout.splitlines()[0].split()[-1]
    if m and tuple(map(int, m.group(1).split("."))) > tuple(map(int, v11.split("."))):
        r = in_root(11, bundle, ["/opt/bin/hangdx", "--version"])
        check(r.returncode != 0 and "GLIBC_%s" % m.group(1) in r.stderr,
              "Debian 11 (glibc %s): bin/hangdx does not start, and the loader names the glibc %s it needs, as the "
              "bundle said" % (v11, m.group(1)), r.stderr)


def main():
    cases = {"install": case_install, "bundle": case_bundle}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.exit("usage: test_install.py install|bundle")
    if not HANGDX or not BUILD:
        print("skipped: HANGDX and HDX_BUILD_DIR must be set (ctest sets them)")
        return 77
    with tempfile.TemporaryDirectory(prefix="hdx-install-") as tmp:
        os.chmod(tmp, 0o755)
        cases[sys.argv[1]](tmp)
    print("%d expectation(s) failed" % len(FAILED) if FAILED else "ok")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
