"""A process that takes an exclusive flock on PATH, the way Triton's and Inductor's caches
and the `filelock` library do.

usage: flocker.py hold PATH    take the lock, print 'locked', then stall (sleep)
       flocker.py block PATH   print 'waiting', then block in flock(LOCK_EX)
       flocker.py retry PATH   print 'waiting', then retry flock(LOCK_EX|LOCK_NB)
                               every 50 ms, as filelock's acquire() loop does
       flocker.py filelock-hold PATH, filelock-wait PATH
                               the same with the real `filelock` package (Debian's
                               python3-filelock): FileLock(PATH).acquire()
"""
import fcntl
import os
import sys
import time

mode, path = sys.argv[1], sys.argv[2]
if mode.startswith("filelock-"):
    import filelock
    lock = filelock.FileLock(path)
    if mode == "filelock-wait":
        print("waiting", flush=True)
    lock.acquire()  # polls flock(LOCK_EX|LOCK_NB) every 50 ms while another holds it
    print("locked", flush=True)
    if mode == "filelock-hold":
        time.sleep(3600)
    sys.exit(0)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
if mode == "hold":
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(3600)
elif mode == "block":
    print("waiting", flush=True)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
elif mode == "retry":
    print("waiting", flush=True)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.05)
    print("locked", flush=True)
else:
    sys.exit(f"flocker.py: unknown mode {mode}")
