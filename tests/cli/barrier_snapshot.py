#!/usr/bin/python3
"""Print a hand-written hangdx.snapshot/1 of one host whose ranks wait in barrier (world size
4, sampled twice, idle), for the analyze tests.

usage: barrier_snapshot.py HOST PID0 RANK...   (rank i gets pid PID0+i; one note per host)"""
import json
import sys

host, pid0, ranks = sys.argv[1], int(sys.argv[2]), [int(r) for r in sys.argv[3:]]
procs = []
for i, r in enumerate(ranks):
    pid = pid0 + i
    procs.append({
        "pid": pid, "ppid": pid0 - 1, "host": host, "rank": r, "local_rank": i, "world_size": 4,
        "cmdline": ["/usr/bin/python3", "train.py"], "env": {"RANK": str(r), "WORLD_SIZE": "4"},
        "state": "S", "cpu_ms_first": 100.0, "cpu_ms": 100.0, "window_ms": 500, "alive": True,
        "threads": [{"tid": pid, "name": "python3", "state": "S", "syscall": "futex", "syscall_nr": 202,
                     "frames": [{"kind": "native", "function": "syscall", "file": None, "line": None,
                                 "module": "/usr/lib/x86_64-linux-gnu/libc.so.6", "offset": "0x1234",
                                 "pc": "0x7f0000001234", "locals": None},
                                {"kind": "python", "function": "barrier",
                                 "file": "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py",
                                 "line": 3700, "module": None, "offset": None, "locals": {"group": None}}]}],
    })
print(json.dumps({"schema": "hangdx.snapshot/1", "host": host, "taken_at": "2026-11-29T18:40:27.5Z",
                  "samples": 2, "interval_ms": 250, "build_timeout_s": 1800,
                  "processes": procs, "locks": [], "notes": [f"note from {host}"]}, indent=1))
