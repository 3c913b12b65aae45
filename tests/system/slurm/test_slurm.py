#!/usr/bin/python3
"""hangdx inspect/snapshot --slurm-job on a real Slurm: a private one-node cluster (cluster
start, Debian's slurmctld, slurmd and munge, proctrack/linuxproc) runs a 3-task gloo job, started
with srun, whose rank 2 skips an all_reduce (hangs.py's collective_skip, each task made a rank
by launch.py --slurm-task). Beside it run a second Slurm job and a process outside Slurm with
RANK set, neither of which may be taken. Checks:
  - inspect --slurm-job J --json: collective_wait, culprit rank 2, world size 3, exactly the 3
    rank processes of job J, nothing of the other job or outside Slurm, no collecting task;
  - snapshot --slurm-job J -o DIR: one file per node (here 1), and analyze DIR says the same;
  - snapshot --all --frames through srun's labelled output into one file: analyze says the same;
  - JOBID from SLURM_JOB_ID: inspect --slurm-job run inside a step of J (srun --overlap, under a
    shell that carries the job's rank variables, which must not count);
  - a job id Slurm does not know, and no srun in PATH: exit 2 and a message that says so.
Needs root (slurmd) and Debian's slurm packages; skips (77) when not root or without torch,
fails when root and Slurm cannot run (CI runs as root)."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import launch  # noqa: E402
import report_frames  # noqa: E402  (a report's processes as objects)

HANGDX = os.environ.get("HANGDX")
CLUSTER = os.path.join(HERE, "cluster")
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(cmd, env, timeout=120):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def report_of(out):
    try:
        return report_frames.loads(out.stdout)
    except ValueError:
        return None


def job_pids(job):
    """Pids on this host whose environment has SLURM_JOB_ID=job."""
    found = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job}".encode() in env:
            found.add(int(d))
    return found


def start_job(argv, env, log):
    """srun ... in a session of its own; returns (Popen, job id) once Slurm has given it an id."""
    out = open(log, "w")
    p = subprocess.Popen(["srun", "--verbose"] + argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log) as f:
            for line in f:
                if "jobid " in line and ":" in line:  # srun: jobid 5: nodes(1):`vm', cpu counts: ...
                    word = line.split("jobid ", 1)[1].split(":")[0].strip()
                    if word.isdigit():
                        return p, word
        if p.poll() is not None:
            break
        time.sleep(0.2)
    with open(log) as f:
        raise RuntimeError(f"srun {' '.join(argv)} got no job id; its output:\n{f.read()[-2000:]}")


def main():
    if not HANGDX:
        sys.exit("test_slurm.py: set HANGDX to the hangdx binary")
    if os.geteuid() != 0:
        print("skipped: a private Slurm cluster needs root (slurmd starts jobs as their users); "
              "run scripts/test as root, as CI does")
        sys.exit(77)
    if not os.path.exists(launch.PYTHON) or subprocess.run(
            [launch.PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode:
        print("skipped: Debian's python3-torch is not installed (scripts/setup installs it)")
        sys.exit(77)
    for b in ("srun", "squeue", "slurmd", "slurmctld", "munged"):
        if not shutil.which(b, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            print(f"FAIL  {b} is not installed: scripts/setup installs slurmctld slurmd munge slurm-client")
            sys.exit(1)

    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="hdx-slurm-test-")
    cdir = os.path.join(tmp, "cluster")
    work = os.path.join(tmp, "job")
    os.makedirs(work)
    env = dict(os.environ, SLURM_CONF=os.path.join(cdir, "slurm.conf"))
    for k in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
        del env[k]  # a test run inside an allocation must not steer these sruns
    # Tasks carry the marker that lets `cluster stop` find whatever they leave.
    job_env = dict(env, HDX_SLURM_CLUSTER=cdir, PYTHONDONTWRITEBYTECODE="1")
    started = []
    outsider = None
    port, port_fd = launch.reserve_port()
    try:
        # With this process as owner: should it be killed (a ctest timeout), a watchdog stops the cluster.
        subprocess.run([CLUSTER, "start", cdir, str(os.getpid())], check=True, timeout=90)
        print(f"cluster up after {time.monotonic() - t0:.0f} s", flush=True)

        # Job J: 3 tasks, each rank SLURM_PROCID of collective_skip (-O: 3 tasks on fewer CPUs).
        p, job = start_job(["-n", "3", "-O", "-J", "hdx-hang", launch.PYTHON,
                            os.path.join(launch.HERE, "launch.py"), "--slurm-task", "collective_skip",
                            str(port), work], job_env, os.path.join(tmp, "hang.log"))
        started.append(p)
        # Job K, unrelated, with its own rank variables (SLURM_PROCID); and a process outside
        # Slurm that has RANK and WORLD_SIZE.
        q, other = start_job(["-n", "2", "-O", "-J", "hdx-other", "sleep", "600"], job_env,
                             os.path.join(tmp, "other.log"))
        started.append(q)
        outsider = subprocess.Popen(["sleep", "600"], env=dict(job_env, RANK="1", WORLD_SIZE="3", LOCAL_RANK="1"),
                                    start_new_session=True)
        print(f"job {job} (the hang) and job {other} started", flush=True)

        # Poll until the 3 ranks are in the hang (ready files, then hangdx's own verdict).
        deadline = time.monotonic() + 90
        report, out = None, None
        while time.monotonic() < deadline:
            if p.poll() is not None:
                with open(os.path.join(tmp, "hang.log")) as f:
                    raise RuntimeError(f"job {job} ended (srun exit {p.returncode}):\n{f.read()[-3000:]}")
            if all(os.path.exists(os.path.join(work, f"ready-{r}")) for r in range(3)):
                out = run([HANGDX, "inspect", "--slurm-job", job, "--json"], env)
                report = report_of(out)
                if report and report["verdict"]["class"] == "collective_wait":
                    break
            time.sleep(1)
        print(f"job {job} hung and inspected after {time.monotonic() - t0:.0f} s", flush=True)
        check(report is not None and out.returncode == 0, f"inspect --slurm-job {job} --json gives a report (exit "
                                  f"{out.returncode if out else None}; {out.stderr[-1500:] if out else ''})")
        if report is None:
            return
        rank_pids = {}
        for r in range(3):
            with open(os.path.join(work, f"ready-{r}")) as f:
                rank_pids[r] = int(f.read().split()[0])
        v = report["verdict"]
        check(v["class"] == "collective_wait", f"class {v['class']} (want collective_wait): {v['summary']}")
        check(v["culprit_ranks"] == [2], f"culprit ranks {v['culprit_ranks']} (want [2], the task that skipped)")
        check("collecting from 1 node" in out.stderr, "progress on stderr: 'collecting from 1 node...'")
        procs = report["processes"]
        pids = {pr["pid"] for pr in procs}
        check(pids == set(rank_pids.values()),
              f"the report's processes {sorted(pids)} are exactly job {job}'s 3 ranks {sorted(rank_pids.values())}")
        check(sorted(pr["rank"] for pr in procs) == [0, 1, 2] and {pr["world_size"] for pr in procs} == {3},
              f"ranks {sorted(pr['rank'] for pr in procs)}, world sizes {sorted({pr['world_size'] for pr in procs})} "
              "(want 0, 1, 2 of world size 3)")
        check(all((pr.get("env") or {}).get("SLURM_JOB_ID") == job for pr in procs),
              f"every process has SLURM_JOB_ID={job}")
        others = job_pids(other)
        check(others and not (pids & others), f"no process of job {other} ({sorted(others)}) is taken")
        check(outsider.pid not in pids, f"the process outside Slurm with RANK=1 ({outsider.pid}) is not taken")
        check(not any("hangdx" in os.path.basename((pr.get("cmdline") or [""])[0]) for pr in procs),
              "the collecting task (hangdx snapshot) is not counted as a rank")

        # snapshot --slurm-job: one file per node, which analyze judges the same.
        sdir = os.path.join(tmp, "snaps")
        out = run([HANGDX, "snapshot", "--slurm-job", job, "-o", sdir], env)
        files = sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []
        check(out.returncode == 0 and len(files) == 1,
              f"snapshot --slurm-job {job} -o DIR: exit {out.returncode}, files {files} (want 1, one node)")
        an = report_of(run([HANGDX, "analyze", "--json", sdir], env))
        check(an is not None and an["verdict"]["class"] == "collective_wait" and an["verdict"]["culprit_ranks"] == [2],
              f"analyze DIR: {an['verdict']['class'] if an else None} {an['verdict']['culprit_ranks'] if an else None}"
              " (want collective_wait [2])")
        if files:
            size = os.path.getsize(os.path.join(sdir, files[0]))
            print(f"      per-node snapshot: {size} bytes for {len(procs)} processes", flush=True)

        # The pattern for other launchers (pdsh): `snapshot --all --frames` on each node, the
        # launcher's labelled output saved in one file, which analyze reads.
        out = run(["srun", "--overlap", "--jobid", job, "-n", "1", "--label", HANGDX, "snapshot", "--all",
                   "--frames"], job_env)
        fpath = os.path.join(tmp, "nodes.frames")
        with open(fpath, "w") as f:
            f.write(out.stdout)
        an = report_of(run([HANGDX, "analyze", "--json", fpath], env))
        check(out.stdout.startswith("0: hangdx.frames/1 ") and an is not None
              and an["verdict"]["class"] == "collective_wait" and an["verdict"]["culprit_ranks"] == [2],
              f"analyze of srun's labelled --frames output: {an['verdict']['class'] if an else None} "
              f"{an['verdict']['culprit_ranks'] if an else None} (want collective_wait [2])")

        # JOBID from SLURM_JOB_ID, inside a step of the job, under a shell that has the job's rank
        # variables (SLURM_PROCID=0) and stays alive beside hangdx: it must not count as a rank.
        out = run(["srun", "--overlap", "--jobid", job, "-n", "1", "sh", "-c",
                   f"'{HANGDX}' inspect --slurm-job --json; status=$?; exit $status"], job_env)
        inner = report_of(out)
        check(inner is not None and inner["verdict"]["class"] == "collective_wait"
              and inner["verdict"]["culprit_ranks"] == [2]
              and {pr["pid"] for pr in inner["processes"]} == set(rank_pids.values()),
              f"inside job {job} (SLURM_JOB_ID), inspect --slurm-job gives the same 3 ranks and verdict "
              f"(exit {out.returncode}: {out.stderr[-1500:] if inner is None else ''}"
              f"{'' if inner is None else sorted(pr['pid'] for pr in inner['processes'])})")

        # A job id Slurm does not know; no srun in PATH.
        out = run([HANGDX, "inspect", "--slurm-job", "987654"], env)
        check(out.returncode == 2 and "987654" in out.stderr and "squeue -u" in out.stderr,
              f"an unknown job id: exit {out.returncode}, says what to do: {out.stderr.strip()[-300:]}")
        out = run([HANGDX, "inspect", "--slurm-job", job], dict(env, PATH="/nonexistent"))
        check(out.returncode == 2 and "srun is not in PATH" in out.stderr,
              f"no srun: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    finally:
        launch.release_port(port, port_fd)
        if outsider:
            outsider.kill()
            outsider.wait()
        subprocess.run([CLUSTER, "stop", cdir], timeout=120)
        for p in started:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"{len(failures)} failed, in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        check(False, str(e))
    sys.exit(1 if failures else 0)
