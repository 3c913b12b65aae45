"""A Python process with many parked threads, for scripts/bench's dump section.

    python3 threads64.py READYFILE [NTHREADS]

Starts NTHREADS (default 64) threads besides the main one, each parked a few
nested Python calls deep: even threads in time.sleep, odd ones in
threading.Event.wait. Writes its PID to READYFILE once all are parked, then
sleeps until killed.
"""
import os
import sys
import threading
import time

ev = threading.Event()
parked = threading.Semaphore(0)


def leaf(i, depth):
    if depth:
        return leaf(i, depth - 1)
    parked.release()
    if i % 2:
        ev.wait()
    else:
        while True:
            time.sleep(3600)


def worker(i):
    step = i * 3 + 1
    leaf(i, 3)


if __name__ == "__main__":
    ready = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    for i in range(n):
        threading.Thread(target=worker, args=(i,), name="w%d" % i, daemon=True).start()
    for _ in range(n):
        parked.acquire()
    time.sleep(0.2)  # the last ones reach their wait
    with open(ready + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(ready + ".tmp", ready)
    while True:
        time.sleep(3600)
