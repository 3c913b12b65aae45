/*
 * glibc's entry points that the shim wraps beside the public names (preload/open.c and
 * preload/stat.c): what _FORTIFY_SOURCE's open calls and what programs built against
 * glibc before 2.33 call for stat. No public header declares them; the shim's test programs
 * call each one.
 */
#ifndef HDX_TEST_GLIBC_ENTRIES_H
#define HDX_TEST_GLIBC_ENTRIES_H

#include <sys/stat.h>

int __open_2(const char *, int);
int __open64_2(const char *, int);
int __openat_2(int, const char *, int);
int __openat64_2(int, const char *, int);
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);

#endif
