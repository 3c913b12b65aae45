#!/usr/bin/python3
"""`hangdx run` of a job that enters a chroot where the shim's path does not exist: ld.so
cannot preload it there, and hangdx says so on its own stderr (nothing of that process is
traced), as docs/containers.md tells.

usage: test_run_shim.py chroot

  chroot  `hangdx run -d T -- chroot ROOT python3 -c ...` (the Debian 13 root, which has no
          copy of the build's lib/): exit 0 with the job's, and one line on hangdx's stderr,
          "the shim is not loaded in pid N (python3), which runs in another root"; the same
          job on the host (no chroot) gets no such line.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import root  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "chroot"
if MODE != "chroot":
    sys.exit(f"usage: {sys.argv[0]} chroot")
JOB = "import time; time.sleep(2.5); print('job done')"


def body(check):
    rootdir = root.ensure_root()
    with tempfile.TemporaryDirectory(prefix="hdx-run-shim-") as tmp:
        r = subprocess.run([root.hangdx_bin(), "run", "-d", os.path.join(tmp, "a"), "--", "chroot", rootdir,
                            "/usr/bin/python3", "-c", JOB], capture_output=True, text=True, timeout=60)
        root.log(f"chroot: exit {r.returncode}; stderr: {r.stderr.strip()}")
        check(r.returncode == 0 and "job done" in r.stdout, "chroot: the job runs and hangdx run exits 0", r.returncode)
        line = [l for l in r.stderr.splitlines() if l.startswith("hangdx run: the shim is not loaded in pid")]
        check(len(line) == 1 and "(python3), which runs in another root" in line[0],
              "chroot: hangdx says once that the shim is not loaded in the chrooted python3", r.stderr)
        r = subprocess.run([root.hangdx_bin(), "run", "-d", os.path.join(tmp, "b"), "--", "/usr/bin/python3", "-c",
                            JOB], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "shim is not loaded" not in r.stderr,
              "host: the same job on the host gets no such line", r.stderr)


if __name__ == "__main__":
    root.run_test(body)
