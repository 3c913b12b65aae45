"""A busy process (a CPU loop) is not hung: `hangdx inspect --json PID` says not_hung
and marks the process as progressing."""
from hdxscen import PYTHON, check, run_main, verdict, wait_for, _read


def body(sc):
    p = sc.spawn([PYTHON, "-c", "print('busy', flush=True)\nwhile True: pass"], tag="busy")
    wait_for(lambda: "busy" in (_read(sc.path("busy.log")) or ""), "the loop to start", 60)
    if sc.mech:
        return
    rep = sc.hangdx_json("inspect", "--json", p.pid)
    v = verdict(rep)
    check(v.get("class") == "not_hung", "verdict.class == not_hung", v)
    procs = [x for x in rep.get("processes") or [] if x.get("pid") == p.pid]
    check(len(procs) == 1, f"process {p.pid} in processes[]",
          [x.get("pid") for x in rep.get("processes") or []])
    check(procs[0].get("progressing") is True, "the process is progressing",
          {k: procs[0].get(k) for k in ("pid", "state", "cpu_ms", "progressing")})
    check(not (rep.get("locks") or []), "no locks reported", rep.get("locks"))


run_main("busy", body, needs_torch=False)
