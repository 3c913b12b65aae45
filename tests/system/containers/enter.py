#!/usr/bin/python3
"""Enter the Debian 13 root and run a command there, as a chroot or as a container.

    enter.py --mode chroot         --root VIEW [--cwd DIR] -- CMD...
    enter.py --mode unshare-chroot --root DIR [--bind HOST=INSIDE]... [--cwd DIR] -- CMD...
    unshare --mount --pid --fork --kill-child -- \\
    enter.py --mode container      --root DIR [--bind HOST=INSIDE]... [--cwd DIR] -- CMD...

Run by the host's /usr/bin/python3 (the root's Python is not needed to get in).
chroot:    a plain `chroot VIEW CMD` in all of the host's namespaces, the mount namespace
           included: VIEW is a bind of the root that root.py has mounted /proc, /dev, /sys,
           /tmp and the job dir (under /mnt) into, in the host's mount namespace. So
           /proc/PID/maps of the command, read from the host, shows host paths
           (VIEW/usr/lib/...) and they are valid on the host as they are.
The other two modes mount, in a mount namespace of their own (nothing is left mounted on the
host when the last process of the root ends):
  /proc  a proc of the process's pid namespace; /dev, /sys  the host's (recursive binds);
  /tmp   a fresh tmpfs; /mnt  a tmpfs, with each --bind HOST=INSIDE (INSIDE under /mnt)
         bound from the host's directory HOST.
unshare-chroot: `unshare --mount` and chroot(DIR) in the host's pid, network, IPC and UTS
           namespaces (as schroot-like wrappers and HPC container runtimes that chroot
           rather than pivot_root do): /proc/PID/maps, read from the host, shows
           DIR/usr/lib/..., valid on the host, but DIR/mnt/<job>/... too, which exists only
           in the process's own mount namespace.
In both chroot modes the command keeps this process's pid and dies with its parent
(PR_SET_PDEATHSIG).
container: as docker, runc or enroot: must run as pid 1 of a new pid namespace (under
           `unshare --mount --pid --fork`); binds DIR onto itself, mounts the rest,
           pivot_root(".", ".") into it and detaches the old root, so inside the pids, the
           mounts and the paths are the container's only.
The command's environment is this process's (the caller builds it: PATH, USE_LIBUV=0 for
torch >= 2.4's TCPStore on Debian, the rank variables...).
"""
import argparse
import ctypes
import os
import signal
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
CLONE_NEWNS = 0x00020000
PR_SET_PDEATHSIG = 1
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def die(msg):
    sys.stderr.write(f"enter.py: {msg}\n")
    sys.exit(126)


def _b(s):
    return None if s is None else os.fsencode(s)


def mount(src, target, fstype=None, flags=0, data=None):
    if libc.mount(_b(src), _b(target), _b(fstype), flags, _b(data)) != 0:
        e = ctypes.get_errno()
        die(f"mount {src} on {target} ({fstype or 'bind'}): {os.strerror(e)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("chroot", "unshare-chroot", "container"), required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--bind", action="append", default=[], metavar="HOST=INSIDE")
    ap.add_argument("--cwd", default="/")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        die("no command")
    root = os.path.realpath(a.root)
    if not os.path.isfile(os.path.join(root, ".hangdx-root-stamp")):
        die(f"{root} is not a made root (no .hangdx-root-stamp): run scripts/fixtures/make-debian-root 13")

    if a.mode == "chroot":  # the mounts are the caller's, in the host's mount namespace
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.chroot(root)
        os.chdir(a.cwd)
        try:
            os.execvp(cmd[0], cmd)
        except OSError as e:
            die(f"exec {cmd[0]}: {e}")

    if a.mode == "unshare-chroot":
        if libc.unshare(CLONE_NEWNS) != 0:
            die(f"unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())}")
        # Die with the parent (the test); survives the exec of the command.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    elif os.getpid() != 1:
        die("--mode container must run as pid 1 of a new pid namespace "
            "(unshare --mount --pid --fork --kill-child -- enter.py ...)")
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing of ours goes back to the host
    if a.mode == "container":
        mount(root, root, None, MS_BIND)  # pivot_root needs the new root to be a mount point
    mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("/dev", f"{root}/dev", None, MS_BIND | MS_REC)
    mount("/sys", f"{root}/sys", None, MS_BIND | MS_REC)
    mount("tmpfs", f"{root}/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    mount("tmpfs", f"{root}/mnt", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for spec in a.bind:
        host, _, inside = spec.partition("=")
        inside = os.path.normpath(inside)
        if not inside.startswith("/mnt/"):
            die(f"--bind {spec}: INSIDE must be under /mnt")
        target = root + inside
        os.makedirs(target, exist_ok=True)  # on the tmpfs of /mnt
        mount(host, target, None, MS_BIND | MS_REC)

    if a.mode == "container":
        os.chdir(root)
        nr = SYS_PIVOT_ROOT.get(os.uname().machine)
        if nr is None:
            die(f"pivot_root: unknown system call number on {os.uname().machine}")
        if libc.syscall(nr, b".", b".") != 0:
            die(f"pivot_root: {os.strerror(ctypes.get_errno())}")
        if libc.umount2(b".", MNT_DETACH) != 0:  # the old root, stacked under the new one
            die(f"umount the old root: {os.strerror(ctypes.get_errno())}")
        os.chdir("/")
    else:
        os.chroot(root)
        os.chdir("/")
    os.chdir(a.cwd)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        die(f"exec {cmd[0]}: {e}")


if __name__ == "__main__":
    main()
