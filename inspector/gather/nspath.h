/*
 * A path that a live process names, as seen from hangdx (docs/design.md "Containers"): a
 * process in a chroot or a container names its files from its own root and mount
 * namespace; hangdx checks, lists and cleans them by a name of its own.
 */
#ifndef HDX_NSPATH_H
#define HDX_NSPATH_H

/*
 * The name here of the file that live process pid names path (absolute, in its root).
 * Candidates, each accepted only when it is the same file (device and inode, or those of
 * its directory when the file does not exist) as /proc/PID/root/<path>:
 *   path itself (the process shares hangdx's root);
 *   readlink(/proc/PID/root) + path (a chroot in hangdx's mount namespace);
 *   the mount that holds path in /proc/PID/mountinfo, found in hangdx's own mountinfo by
 *   its device and root (a directory bind-mounted into a container), proc(5);
 *   else "/proc/PID/root" + path, a name that holds while the process lives.
 * Returns a heap string (the caller frees it) and sets *same to 1 when it is path itself;
 * NULL with errno ENOMEM, or EINVAL for a path that is not absolute. When pid's root cannot
 * be read (the process is gone, or another user's without root) the result is path itself.
 */
char *hdx_proc_path_here(int pid, const char *path, int *same);

#endif
