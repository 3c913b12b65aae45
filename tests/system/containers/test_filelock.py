#!/usr/bin/python3
"""A stuck filelock.FileLock holder and a waiter (Debian 13's python3-filelock on CPython
3.13), in the Debian 13 root, inspected from the host with the host's hangdx.

usage: test_filelock.py chroot | unshare-chroot | container
  chroot     holder and waiter each `chroot VIEW python3 job.py fl_hold|fl_wait PATH`, the
             host's namespaces (root.py)
  unshare-chroot  the same, each in a mount namespace of its own (`unshare --mount`)
  host       the baseline: the same on the host (Debian 12's Python 3.11 and filelock)
  container  one container whose pid 1 is an init (job.py init); holder and waiter are run
             in it as `docker exec` does (nsenter into its namespaces)

The holder takes filelock.FileLock(<job>/locks/k.lock) and sleeps; the waiter blocks in
FileLock.acquire (it retries flock(LOCK_EX|LOCK_NB) every 50 ms). Only the waiter's host pid
is given to `hangdx inspect --json`. Expected: verdict.class build_lock; a lock of kind flock
on the lock file (named as the processes name it, /mnt/<job>/locks/k.lock, or by a name it
has on the host: <job dir>/locks/k.lock, or VIEW/mnt/<job>/locks/k.lock in the plain chroot),
state held, holder_pid the holder's host pid; the holder among the culprit pids and
named in the summary; the waiter among the lock's waiters.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import root  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "chroot"
if MODE not in ("chroot", "unshare-chroot", "container", "host"):
    sys.exit(f"usage: {sys.argv[0]} chroot|unshare-chroot|container|host")


def body(check):
    box = root.Box(f"filelock-{MODE}", MODE)
    os.makedirs(box.host("locks"))
    lock_in = box.inside("locks", "k.lock")
    names = list(dict.fromkeys([lock_in] + box.host_names(lock_in)))
    job = box.inside("job.py")
    init = box.spawn(["python3", job, "init"], tag="init") if MODE == "container" else None
    holder = box.spawn(["python3", job, "fl_hold", lock_in], tag="holder", join=init)
    hinfo = box.ready("fl_hold", holder)
    waiter = box.spawn(["python3", job, "fl_wait", lock_in], tag="waiter", join=init)
    winfo = box.ready("fl_wait", waiter)
    hpid, wpid = hinfo["host_pid"], winfo["host_pid"]
    root.wait_asleep(hpid, "the holder")
    root.wait_asleep(wpid, "the waiter to poll the lock", polls=True)
    check("got the lock" not in waiter.log(), f"{MODE}: the waiter has not got the lock (set-up)")
    root.log(f"holder host pid {hpid} (inside {hinfo['pid']}), waiter host pid {wpid} (inside {winfo['pid']}); "
             f"lock {lock_in} inside, {' or '.join(names[1:])} on the host")

    rep = root.hangdx_json("inspect", "--json", wpid)
    root.show_report(rep, f"inspect {MODE}")
    v = rep.get("verdict") or {}
    check(rep.get("_exit") == 0, f"{MODE}: hangdx inspect exits 0", rep.get("_exit"))
    check(v.get("class") == "build_lock", f"{MODE}: verdict.class == build_lock", v.get("class"))
    locks = rep.get("locks") or []
    lk = next((l for l in locks if l.get("path") in names), None)
    if check(lk is not None, f"{MODE}: a lock named {lock_in} (inside) or {' or '.join(names[1:])} (host)",
             [(l.get("path"), l.get("state")) for l in locks]):
        root.log(f"the lock is named {lk.get('path')!r} ({'inside' if lk.get('path') == lock_in else 'host'} name)")
        check(lk.get("kind") == "flock", f"{MODE}: lock kind flock", lk.get("kind"))
        check(lk.get("state") == "held", f"{MODE}: lock state held", lk.get("state"))
        check(lk.get("holder_pid") == hpid, f"{MODE}: holder_pid == the holder's host pid {hpid}", lk)
        check(wpid in [w.get("pid") for w in lk.get("waiters") or []], f"{MODE}: the waiter {wpid} is a waiter",
              lk.get("waiters"))
    check(hpid in (v.get("culprit_pids") or []), f"{MODE}: culprit_pids contains the holder {hpid}",
          v.get("culprit_pids"))
    check(str(hpid) in (v.get("summary") or ""), f"{MODE}: the summary names the holder (pid {hpid})", v.get("summary"))
    check(root.find_process(rep, hpid) is not None, f"{MODE}: the holder {hpid} is among the processes",
          [p.get("pid") for p in rep.get("processes") or []])


if __name__ == "__main__":
    root.run_test(body)
