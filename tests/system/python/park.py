"""Parks threads at known lines for the Python frame reader's tests.

    python park.py TIDFILE

Runs under CPython 3.8 and later. Once every thread is parked (or about to
be), writes "NAME TID" lines (main, worker, busy) to TIDFILE, then sleeps until
killed. The test finds the expected line numbers through the "# @name" markers
below, so lines may move freely.
"""
import os
import sys
import threading
import time

ev = threading.Event()
tids = {}
stop = False


def leaf_wait(x, name, ratio, flag, nothing, items):
    neg = -1234567890123
    latin = "caf\xe9"
    wide = "na\u00efve\u2192\u221e"
    astral = "a\U0001F600"
    big = 2 ** 80
    tids["worker"] = threading.get_native_id()
    ev.wait()  # @leaf_wait
    return neg, latin, wide, astral, big


class Worker(threading.Thread):
    def run(self):
        leaf_wait(x=42, name="hello", ratio=0.5, flag=True, nothing=None, items=[1, 2])  # @worker_run


def spin():
    tids["busy"] = threading.get_native_id()
    n = 0
    while not stop:  # @busy_while
        n += 1  # @busy_body


def middle(arg):
    counter = arg + 4

    def peek():
        return counter

    while True:
        time.sleep(3600)  # @middle_sleep


def outer():
    # map() calls middle from C: a second eval-loop activation on this thread.
    for _ in map(middle, [1]):  # @outer_map
        pass


if __name__ == "__main__":
    out = sys.argv[1]
    Worker(name="worker", daemon=True).start()
    threading.Thread(target=spin, name="busy", daemon=True).start()
    while len(tids) < 2:
        time.sleep(0.01)
    tids["main"] = threading.get_native_id()
    with open(out + ".tmp", "w") as f:
        for k, v in sorted(tids.items()):
            f.write("%s %d\n" % (k, v))
    os.rename(out + ".tmp", out)
    outer()  # @main_outer
