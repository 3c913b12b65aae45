/*
 * System call names by number: a table, no I/O. The inspector reads a
 * thread's call number from /proc/PID/task/TID/syscall (gather/proc.c) and
 * names it in waits, snapshots and reports.
 */
#ifndef HDX_SYSCALLS_H
#define HDX_SYSCALLS_H

/* x86-64 syscall name for nr ("newfstatat"), or NULL. */
const char *hdx_syscall_name(long nr);

#endif
