"""The build installs, and the self-contained bundle runs where hangdx is not installed.

usage: test_install.py install | bundle | deb
  install  `cmake --install` of the build under test into a new prefix: bin/hangdx,
           lib/libhangdx-preload.so (or where HDX_SHIM_INSTALL_DIR says) and
           share/hangdx/patterns/logs.json are there, the installed hangdx finds its log
           patterns (analyze of a log gives the build tree's verdict) and its shim (`hangdx
           run` records a trace), and no path of the source tree is compiled into the binary.
  bundle   scripts/bundle DIR: every library Debian ships as a static archive is linked in
           (no libdw, libelf, libunwind, zlib, xz, bzip2 or libstdc++ needed), cJSON is in
           DIR/lib; the shim needs only libc and libdl at glibc 2.17 or later. In the Debian
           13 root (glibc 2.41, a container image without hangdx) the bundle's `hangdx run`
           records the trace of a FileBaton-like lock; in the Debian 11 root (glibc 2.31) the
           bundle's shim, preloaded into Debian 11's Python 3.9, records it too, and the
           bundle says that its bin/hangdx needs a newer glibc than that root has.
  deb      `cpack -G DEB` of the build under test (into a new directory): hangdx_<version>-1,
           files under /usr only, a Depends field. In the Debian 12 root (base system and
           ca-certificates only: none of the Depends but libc6 and libstdc++6 is there),
           seen through an overlay so the cached root stays as made, `apt-get install -y
           ./hangdx_*.deb` fetches the Depends from Debian's mirror and dpkg configures the
           package (so every Depends, with its version, is met); then /usr/bin/hangdx --version
           prints the project's version, the shim is in /usr/lib (or
           /usr/HDX_SHIM_INSTALL_DIR), analyze of a log gives the build tree's verdict (its
           patterns found at /usr/share/hangdx), and `hangdx run` records a flock taken (it
           found the shim). Nothing stays mounted, and the root is not written.
Exit 0 passed, 1 failed, 77 skipped (with a line saying why).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HANGDX = os.environ.get("HANGDX")
BUILD = os.environ.get("HDX_BUILD_DIR")
SRC = os.environ.get("HDX_SOURCE_DIR") or os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROOTS = {13: os.environ.get("HDX_CONTAINER_ROOT", "/var/cache/hangdx/debian13-root"),
         12: "/var/cache/hangdx/debian12-root",
         11: "/var/cache/hangdx/debian11-root"}
SHIM = os.path.join(os.environ.get("HDX_SHIM_INSTALL_DIR") or "lib", "libhangdx-preload.so")  # under the prefix
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
    for f in ("bin/hangdx", SHIM, "share/hangdx/patterns/logs.json"):
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
    check(r.returncode == 0, "the installed hangdx run exits 0 (it finds %s)" % SHIM, r.stderr)
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
          "the source tree's path (%s) is not in bin/hangdx's data" % SRC)
    # Nor anywhere in the unstripped files, debug information included (-ffile-prefix-map).
    for f in ("bin/hangdx", SHIM):
        with open(os.path.join(prefix, f), "rb") as fh:
            whole = fh.read()
        for what, path in (("source tree", SRC), ("build directory", BUILD)):
            check(not path or path.encode() not in whole,
                  "the %s's path (%s) is nowhere in the installed %s, debug information included" % (what, path, f))


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
    r = run([os.path.join(SRC, "scripts", "fixtures", "make-debian-root"), str(release), ROOTS[release]])
    if r.returncode == 77:
        print("skipped: the Debian %d root cannot be made here: %s" % (release, r.stdout.strip().splitlines()[-1:]))
        sys.exit(77)
    if r.returncode != 0:
        sys.exit("make-debian-root %d failed: %s" % (release, r.stdout + r.stderr))
    print("\n".join(r.stdout.strip().splitlines()[-3:]), flush=True)  # what it did, and how long it took


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


def in_overlay(tmp, copies, args):
    """Run args (a shell command line) in the Debian 12 root seen through an overlay whose
    writes go to tmp/overlay, with the host files copies in its /tmp, /proc and /dev mounted,
    in mount and pid namespaces of their own: every mount goes with them, and the cached root
    is never written. The same tmp gives the same overlay, run after run."""
    ov = os.path.join(tmp, "overlay")
    for d in ("upper", "work", "merged"):
        os.makedirs(os.path.join(ov, d), exist_ok=True)
    script = ('set -e; lower="$1"; ov="$2"; shift 2; r="$ov/merged"; mount --make-rprivate /; '
              'mount -t overlay overlay -o "lowerdir=$lower,upperdir=$ov/upper,workdir=$ov/work" "$r"; '
              'mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"; '
              'cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true; '
              'while [ "$1" != -- ]; do cp "$1" "$r/tmp/"; shift; done; shift; '
              'exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 '
              'DEBIAN_FRONTEND=noninteractive sh -c "cd /tmp; $1"')
    return run(["unshare", "--mount", "--pid", "--fork", "sh", "-c", script, "sh", ROOTS[12], ov] + copies
               + ["--", args])


def mounted_below(path):
    with open("/proc/self/mountinfo") as f:
        return [l.split()[4] for l in f if l.split()[4] == path or l.split()[4].startswith(path + "/")]


def case_deb(tmp):
    if os.geteuid() != 0:
        print("skipped: needs root (chroot, mounts) to install the .deb in the Debian 12 root")
        sys.exit(77)
    version = os.environ.get("HDX_PROJECT_VERSION")
    config = os.path.join(BUILD, "CPackConfig.cmake")
    if not version or not os.path.isfile(config):
        print("skipped: no CPackConfig.cmake in %s (a HDX_SELF_CONTAINED build makes no .deb)" % BUILD)
        sys.exit(77)
    if any(lib.startswith(("libasan", "libubsan")) for lib in needed(HANGDX)):
        print("skipped: a sanitizer build's package would need the sanitizer runtimes; the normal build's is checked")
        sys.exit(77)
    make_root(12)
    stamp = os.path.join(ROOTS[12], ".hangdx-root-stamp")
    with open(stamp) as f:
        stamp_before = f.read()

    pkgdir = os.path.join(tmp, "pkg")
    r = run(["cpack", "-G", "DEB", "--config", config, "-B", pkgdir])
    if not check(r.returncode == 0, "cpack -G DEB exits 0", r.stdout[-2000:] + r.stderr[-2000:]):
        return
    debs = [f for f in os.listdir(pkgdir) if f.startswith("hangdx_") and f.endswith(".deb")]
    if not check(len(debs) == 1, "cpack wrote one hangdx_*.deb", sorted(os.listdir(pkgdir))):
        return
    deb = os.path.join(pkgdir, debs[0])
    field = lambda name: run(["dpkg-deb", "-f", deb, name]).stdout.strip()
    check(field("Package") == "hangdx" and field("Version") == version + "-1",
          "the package is hangdx %s-1 (the project's version)" % version, (field("Package"), field("Version")))
    check(field("Maintainer") != "" and field("Description").startswith("diagnose hung distributed training jobs"),
          "it has a Maintainer and a Description", (field("Maintainer"), field("Description")[:80]))
    depends = [d.split()[0] for d in field("Depends").split(",") if d.strip()]
    check({"libc6", "libdw1", "libelf1", "libunwind8", "libcjson1"} <= set(depends),
          "its Depends name the libraries bin/hangdx links (libc6, libdw1, libelf1, libunwind8, libcjson1)",
          field("Depends"))
    files = [l.split()[-1] for l in run(["dpkg-deb", "-c", deb]).stdout.splitlines()]
    for f in ("./usr/bin/hangdx", "./usr/" + SHIM, "./usr/share/hangdx/patterns/logs.json"):
        check(f in files, "the package holds " + f[1:], files)
    check(all(f == "./" or f.startswith("./usr/") for f in files), "every file of the package is under /usr", files)

    # Which Depends the root lacks: apt-get must fetch them.
    r = in_overlay(tmp, [], "dpkg-query -W -f '${Package} ${Status}\\n' %s 2>/dev/null; true" % " ".join(depends))
    present = {l.split()[0] for l in r.stdout.splitlines() if l.endswith(" installed")}
    missing = [d for d in depends if d not in present]
    check({"libdw1", "libunwind8", "libcjson1"} <= set(missing),
          "the Debian 12 root lacks libdw1, libunwind8 and libcjson1 before the install", r.stdout + r.stderr)

    t0 = time.monotonic()
    r = in_overlay(tmp, [deb], "apt-get update -q && apt-get install -y -q ./%s" % debs[0])
    print("\n".join(r.stdout.splitlines()[-8:]), r.stderr[-2000:], flush=True)
    if r.returncode != 0 and re.search(r"Temporary failure resolving|Could not resolve|Failed to fetch|"
                                       r"Network is unreachable", r.stdout + r.stderr):
        print("skipped: apt-get in the Debian 12 root cannot reach Debian's mirror to fetch the Depends")
        sys.exit(77)
    check(r.returncode == 0, "Debian 12: apt-get install -y ./%s exits 0 (%.0f s)" % (debs[0], time.monotonic() - t0),
          r.stderr[-2000:])
    r = in_overlay(tmp, [], "dpkg-query -W -f '${Package} ${Status} ${Version}\\n' hangdx %s" % " ".join(depends))
    status = {l.split()[0]: l for l in r.stdout.splitlines() if l.strip()}
    check(status.get("hangdx", "").startswith("hangdx install ok installed %s-1" % version),
          "Debian 12: dpkg has hangdx configured (every Depends met, with its version)", r.stdout + r.stderr)
    check(all(" install ok installed " in status.get(d, "") for d in depends),
          "Debian 12: apt-get installed every package of Depends (it fetched %s)" % ", ".join(missing), r.stdout)
    r = in_overlay(tmp, [], "dpkg --audit")
    check(r.returncode == 0 and r.stdout.strip() == "", "Debian 12: dpkg --audit finds nothing amiss",
          r.stdout + r.stderr)

    r = in_overlay(tmp, [], "hangdx --version; test -f /usr/%s && echo shim-there" % SHIM)
    check(r.returncode == 0 and r.stdout.splitlines()[:1] == ["hangdx " + version],
          "Debian 12: /usr/bin/hangdx --version prints hangdx %s" % version, r.stdout + r.stderr)
    check("shim-there" in r.stdout, "Debian 12: /usr/%s is there" % SHIM, r.stdout)

    log = os.path.join(SRC, "tests", "fixtures", "logs", "gloo_collective_rank_skipped.log")
    want = verdict(HANGDX, log)
    r = in_overlay(tmp, [log], "hangdx analyze --json /tmp/%s" % os.path.basename(log))
    got = (r.returncode, json.loads(r.stdout)["verdict"] if r.stdout.strip().startswith("{") else r.stderr)
    check(got == want and want[1]["class"] == "collective_wait",
          "Debian 12: the packaged hangdx reads the log as the build tree's does (patterns at /usr/share/hangdx)",
          got)

    r = in_overlay(tmp, [], "hangdx run -d /tmp/traces -- flock /tmp/build.lock true && cat /tmp/traces/*.jsonl")
    events = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    check(r.returncode == 0 and any(e.get("type") == "lock_end" and e.get("op") == "flock" and e.get("rc") == 0
                                    and e.get("path") == "/tmp/build.lock" for e in events),
          "Debian 12: the packaged hangdx run preloads /usr/%s, which records the flock taken" % SHIM,
          r.stdout[-1000:] + r.stderr[-1000:])

    check(mounted_below(ROOTS[12]) == [] and mounted_below(os.path.join(tmp, "overlay")) == [],
          "nothing stays mounted in or over the Debian 12 root", mounted_below(ROOTS[12]))
    with open(stamp) as f:
        stamp_after = f.read()
    check(stamp_after == stamp_before and not os.path.exists(os.path.join(ROOTS[12], "usr", "bin", "hangdx")),
          "the cached Debian 12 root is as made (no hangdx in it, its stamp unchanged)")


def main():
    cases = {"install": case_install, "bundle": case_bundle, "deb": case_deb}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.exit("usage: test_install.py install|bundle|deb")
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
