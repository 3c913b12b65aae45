"""Python's subprocess (vfork on Linux since 3.10) and friends, for the shim stress test:
subproc.py DIR SHIM_STRESS. Prints one deterministic line per child (exit status, digests of
what it wrote), in a fixed order, whatever the timing; stress_test.py compares the output with
and without the shim.

Children: /bin/sh with stdin/stdout/stderr pipes, cwd, env, start_new_session, pass_fds and
preexec_fn (then fork, not vfork, and Python code in the child);
the C stress program's `child` mode (it takes a baton and a flock); a Python FileBaton child;
a missing program (the vfork child's exec fails: FileNotFoundError in the parent); the same
from four threads at once; os.posix_spawn; os.fork then os.execv; a fork child that runs
subprocess itself."""
import hashlib
import os
import subprocess
import sys
import threading

d, stress = sys.argv[1], sys.argv[2]
os.chdir(d)
PY = sys.executable


def h(b):
    return hashlib.sha256(b).hexdigest()[:12]


def status(ws):
    return os.waitstatus_to_exitcode(ws)


BATON = """
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
try:
    os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    sys.exit(9)
except FileExistsError:
    pass
assert os.path.exists(p)
os.write(fd, p.encode())
os.close(fd)
os.remove(p)
print("baton", p, os.path.exists(p))
"""


def sh(i, tag):
    r = subprocess.run(["/bin/sh", "-c", 'read x; echo "$x" %s %d; echo err >&2; exit %d'
                        % (tag, i, i % 4)], input=b"in-%d\n" % i, capture_output=True)
    return "sh %s %d: rc %d out %s err %s" % (tag, i, r.returncode, h(r.stdout), h(r.stderr))


out = []
for i in range(12):
    out.append(sh(i, "seq"))
for i in range(6):
    r = subprocess.run([stress, "child", ".", str(100 + i)])
    with open("child%d.out" % (100 + i), "rb") as f:
        out.append("stress child %d: rc %d file %s" % (i, r.returncode, h(f.read())))
for i in range(4):
    r = subprocess.run([PY, "-c", BATON, "baton%d" % i], capture_output=True)
    out.append("python baton %d: rc %d out %s" % (i, r.returncode, r.stdout.decode().strip()))
try:
    subprocess.run(["/nonexistent/prog"])
    out.append("missing program: ran")
except FileNotFoundError as e:
    out.append("missing program: FileNotFoundError errno %d" % e.errno)
os.mkdir("sub")
r = subprocess.run(["/bin/sh", "-c", "pwd; echo $HDX_X"], cwd="sub", env=dict(os.environ,
                   HDX_X="env-value"), start_new_session=True, capture_output=True)
out.append("cwd/env/session: rc %d out %s" % (r.returncode, r.stdout.decode().split("/")[-1]
                                                .replace("\n", " ")))
rp, wp = os.pipe()
r = subprocess.run(["/bin/sh", "-c", "echo through-fd >&%d" % wp], pass_fds=(wp,))
os.close(wp)
with os.fdopen(rp, "rb") as f:
    out.append("pass_fds: rc %d read %s" % (r.returncode, f.read().decode().strip()))

# preexec_fn: subprocess forks (no vfork) and runs Python in the child before exec
for i in range(2):
    def pre(i=i):
        fd = os.open("preexec%d.lock" % i, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
    r = subprocess.run(["/bin/sh", "-c", "ls preexec%d.lock; exit 2" % i], preexec_fn=pre,
                       capture_output=True)
    out.append("preexec_fn %d: rc %d out %s" % (i, r.returncode, r.stdout.decode().strip()))

# four threads at once, each its own sequence
res = {}


def worker(k):
    res[k] = [sh(i, "thread%d" % k) for i in range(8)]


ths = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in ths:
    t.start()
for t in ths:
    t.join()
for k in range(4):
    out.extend(res[k])

pid = os.posix_spawn("/bin/sh", ["sh", "-c", "exit 5"], os.environ)
out.append("posix_spawn: %d" % status(os.waitpid(pid, 0)[1]))
pid = os.fork()
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", "exit 6"])
out.append("fork+execv: %d" % status(os.waitpid(pid, 0)[1]))
pid = os.fork()
if pid == 0:  # a fork child that uses subprocess itself
    r = subprocess.run(["/bin/sh", "-c", "exit 3"])
    os._exit(40 + r.returncode)
out.append("fork child's subprocess: %d" % status(os.waitpid(pid, 0)[1]))
print("\n".join(out))
