#!/usr/bin/python3
"""What `hangdx run --hang-timeout` costs a job (BENCHMARKS.md, "run: the watch beside the job").
Not a test: the figures depend on the machine and its load.

usage: bench_run.py HANGDX [BEFORE_HANGDX] [--runs N]
  throughput  a job printing 100 MB (1,000,000 lines of 100 bytes) into a file and through
              `| cat`: wall time, MB/s, the job's own CPU (os.times at its end) and the CPU of
              everything (job, hangdx, cat), medians of N runs, without hangdx, with HANGDX and
              with BEFORE_HANGDX (a build of an earlier commit), interleaved
  idle        the watch's own CPU on a silent job of 1 and of 16 sleeping processes, 30 s
  latency     from the job's last output (then it blocks reading a pipe nobody writes) to
              DIR/report.json, --hang-timeout 5
"""
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
PRINT100 = """import os, sys
line = b"x" * 99 + b"\\n"
w = sys.stdout.buffer.write
for _ in range(1_000_000):
    w(line)
sys.stdout.flush()
t = os.times()
print(f"job cpu {t.user + t.system:.3f}", file=sys.stderr)
"""
LAST_LINE = "import os\nprint('last line', flush=True)\nr, w = os.pipe()\nos.read(r, 1)\n"


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def throughput(prefix, dest, script):
    c0, t0 = children_cpu(), time.monotonic()
    if dest == "file":
        with open("out.bin", "wb") as o:
            p = subprocess.run(prefix + [PY, script], stdout=o, stderr=subprocess.PIPE)
        assert os.path.getsize("out.bin") == 100_000_000
    else:
        cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        p = subprocess.run(prefix + [PY, script], stdout=cat.stdin, stderr=subprocess.PIPE)
        cat.stdin.close()
        cat.wait()
    wall = time.monotonic() - t0
    job = float(next(l for l in p.stderr.decode().splitlines() if l.startswith("job cpu")).split()[2])
    return wall, job, children_cpu() - c0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    args = [a for a in args if a != str(runs)]
    if not args:
        print(__doc__)
        return 64
    builds = {"hangdx": os.path.abspath(args[0])}
    if len(args) > 1:
        builds["before"] = os.path.abspath(args[1])
    tmp = tempfile.mkdtemp(prefix="hdx-bench-run-")
    os.chdir(tmp)
    with open("print100.py", "w") as f:
        f.write(PRINT100)
    modes = {"without hangdx": []}
    for name, h in builds.items():
        modes[f"{name} run --hang-timeout 30"] = [h, "run", "--hang-timeout", "30", "-d", "dx", "--"]
    print(f"load {os.getloadavg()}")
    print("| stdout | how | wall s | MB/s | job CPU s | all CPU s |\n| --- | --- | ---: | ---: | ---: | ---: |")
    for dest in ("file", "pipe"):
        res = {m: [] for m in modes}
        for _ in range(runs):
            for m, pre in modes.items():
                res[m].append(throughput(pre, dest, "print100.py"))
        for m, rs in res.items():
            w, j, a = (statistics.median(r[i] for r in rs) for i in range(3))
            print(f"| {'a file' if dest == 'file' else '`| cat`'} | {m} | {w:.2f} | {100 / w:.0f} | {j:.2f} | {a:.2f} |")

    print("\n| processes | how | wall s | CPU ms | CPU ms per s |\n| ---: | --- | ---: | ---: | ---: |")
    for n in (1, 16):
        job = ["sh", "-c", f"for i in $(seq {n}); do sleep 30 & done; wait"]
        for m, pre in modes.items():
            c0, t0 = children_cpu(), time.monotonic()
            subprocess.run(pre[:3] + ["600"] + pre[4:] + job if pre else job,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cpu = (children_cpu() - c0) * 1000
            print(f"| {n + 1} | {m} | {time.monotonic() - t0:.2f} | {cpu:.0f} | {cpu / 30:.2f} |")

    print("\n| how | runs | median s | min s | max s |\n| --- | ---: | ---: | ---: | ---: |")
    for name, h in builds.items():
        lat = []
        for _ in range(runs):
            shutil.rmtree("ldx", ignore_errors=True)
            with open("lout", "wb") as o:
                p = subprocess.Popen([h, "run", "--hang-timeout", "5", "-d", "ldx", "--", PY, "-c", LAST_LINE],
                                     stdout=o, stderr=subprocess.DEVNULL, start_new_session=True)
            while b"last line" not in open("lout", "rb").read():
                time.sleep(0.005)
            t0 = time.monotonic()
            while not os.path.exists("ldx/report.json"):
                time.sleep(0.01)
            lat.append(time.monotonic() - t0)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        print(f"| {name} | {runs} | {statistics.median(lat):.2f} | {min(lat):.2f} | {max(lat):.2f} |")
    print(f"load {os.getloadavg()}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
