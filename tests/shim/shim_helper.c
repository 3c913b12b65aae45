/*
 * A program for the shim tests: each mode makes real calls and prints what
 * they returned ("name rc errno"), so that a run with the shim can be
 * compared line by line with a run without it.
 *
 *   shim_helper calls DIR       every wrapped family, success and failure
 *   shim_helper forkthreads DIR fork from a multithreaded program
 *   shim_helper closefds DIR    close every fd, reuse the numbers, then lock
 *   shim_helper spawn           posix_spawn and posix_spawnp of /bin/echo
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "glibc_entries.h"

extern char **environ;

#define SENTINEL 12345
/* Run expr with errno preset, print its result and errno. */
#define CALL(name, expr)                                                       \
    do {                                                                       \
        errno = SENTINEL;                                                      \
        long r_ = (long)(expr);                                                \
        int e_ = errno;                                                        \
        printf("%-28s rc=%ld errno=%d\n", name, r_, e_);                       \
    } while (0)

static int calls(void)
{
    struct stat st;
    struct stat64 st64;
    struct statx sx;
    int fd1, fd2, fd3;

    /* open family */
    CALL("open excl", fd1 = open("lock", O_CREAT | O_EXCL | O_RDWR, 0600));
    CALL("open excl again", open("lock", O_CREAT | O_EXCL | O_RDWR, 0600));
    CALL("open64 excl again", open64("lock", O_CREAT | O_EXCL | O_RDWR, 0600));
    CALL("openat excl again", openat(AT_FDCWD, "lock", O_CREAT | O_EXCL | O_RDWR, 0600));
    CALL("openat64 missing", openat64(AT_FDCWD, "missing/x", O_RDONLY));
    CALL("open missing", open("missing", O_RDONLY));
    CALL("open64 ok", fd2 = open64("lock", O_RDWR));
    CALL("__open_2 ok", fd3 = __open_2("lock", O_RDONLY));
    CALL("close", close(fd3));
    CALL("__open64_2 missing", __open64_2("missing", O_RDONLY));
    CALL("__openat_2 missing", __openat_2(AT_FDCWD, "missing", O_RDONLY));
    CALL("__openat64_2 ok", fd3 = __openat64_2(AT_FDCWD, "lock", O_RDONLY));
    CALL("close", close(fd3));
    CALL("creat ok", fd3 = creat("plain", 0600));
    CALL("close", close(fd3));
    CALL("creat64 missing dir", creat64("missing/x", 0600));

    /* stat family: the lock path (polled), a plain path, a missing one */
    const char *paths[] = {"lock", "plain", "missing"};
    for (int i = 0; i < 3; i++) {
        const char *p = paths[i];
        char n[64];
#define S(label, expr) do { snprintf(n, sizeof n, "%s %s", label, p); CALL(n, expr); } while (0)
        S("stat", stat(p, &st));
        S("stat64", stat64(p, &st64));
        S("lstat", lstat(p, &st));
        S("lstat64", lstat64(p, &st64));
        S("fstatat", fstatat(AT_FDCWD, p, &st, 0));
        S("fstatat64", fstatat64(AT_FDCWD, p, &st64, 0));
        S("statx", statx(AT_FDCWD, p, 0, STATX_BASIC_STATS, &sx));
        S("__xstat", __xstat(1, p, &st));
        S("__xstat64", __xstat64(1, p, &st64));
        S("__lxstat", __lxstat(1, p, &st));
        S("__lxstat64", __lxstat64(1, p, &st64));
        S("__fxstatat", __fxstatat(1, AT_FDCWD, p, &st, 0));
        S("__fxstatat64", __fxstatat64(1, AT_FDCWD, p, &st64, 0));
    }
    printf("stat size plain %lld\n", (long long)(stat("plain", &st), st.st_size));

    /* locks: fd1 and fd2 are two open file descriptions of "lock" */
    CALL("flock EX|NB", flock(fd1, LOCK_EX | LOCK_NB));
    CALL("flock EX|NB busy", flock(fd2, LOCK_EX | LOCK_NB));
    CALL("flock EX|NB busy", flock(fd2, LOCK_EX | LOCK_NB));
    CALL("flock EX blocking held", flock(fd1, LOCK_EX));
    CALL("flock UN", flock(fd1, LOCK_UN));
    CALL("flock bad fd", flock(-1, LOCK_EX));
    CALL("fcntl F_GETFL", fcntl(fd1, F_GETFL));
    CALL("fcntl64 F_GETFD", fcntl64(fd1, F_GETFD));
    CALL("fcntl F_SETFD", fcntl(fd1, F_SETFD, FD_CLOEXEC));
    CALL("fcntl F_GETFD", fcntl(fd1, F_GETFD));
    CALL("fcntl bad fd", fcntl(-1, F_GETFL));
    CALL("fcntl F_DUPFD", fd3 = fcntl(fd1, F_DUPFD, 50));
    CALL("close", close(fd3));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CALL("fcntl F_OFD_SETLK", fcntl(fd1, F_OFD_SETLK, &fl));
    CALL("fcntl F_OFD_SETLK busy", fcntl(fd2, F_OFD_SETLK, &fl));
    CALL("fcntl64 F_OFD_SETLKW held", fcntl64(fd1, F_OFD_SETLKW, &fl));
    fl.l_type = F_UNLCK;
    CALL("fcntl F_OFD_SETLK unlock", fcntl(fd1, F_OFD_SETLK, &fl));
    fl.l_type = F_WRLCK;
    CALL("fcntl F_SETLKW", fcntl(fd1, F_SETLKW, &fl));
    CALL("fcntl64 F_SETLK", fcntl64(fd1, F_SETLK, &fl));
    CALL("fcntl F_GETLK", fcntl(fd1, F_GETLK, &fl));
    printf("F_GETLK type %d\n", fl.l_type);
    CALL("fcntl F_SETLK bad fd", fcntl(-1, F_SETLK, &fl));
    CALL("lockf F_TLOCK", lockf(fd1, F_TLOCK, 0));
    CALL("lockf64 F_LOCK", lockf64(fd1, F_LOCK, 0));
    CALL("lockf F_ULOCK", lockf(fd1, F_ULOCK, 0));
    CALL("lockf bad fd", lockf(-1, F_LOCK, 0));

    /* release family */
    CALL("unlink missing", unlink("missing"));
    CALL("unlinkat missing", unlinkat(AT_FDCWD, "missing", 0));
    CALL("rename missing", rename("missing", "x"));
    CALL("renameat missing", renameat(AT_FDCWD, "missing", AT_FDCWD, "x"));
    CALL("renameat2 noreplace", renameat2(AT_FDCWD, "plain", AT_FDCWD, "lock", RENAME_NOREPLACE));
    CALL("rename plain", rename("plain", "plain2"));
    CALL("unlink lock", unlink("lock"));
    CALL("stat lock gone", stat("lock", &st));
    CALL("open excl after", fd3 = open("lock2", O_CREAT | O_EXCL | O_WRONLY, 0600));
    CALL("renameat lock2", renameat(AT_FDCWD, "lock2", AT_FDCWD, "lock3"));
    CALL("unlinkat lock3", unlinkat(AT_FDCWD, "lock3", 0));
    CALL("unlink plain2", unlink("plain2"));
    return 0;
}

static volatile int stop;
static void *spin(void *arg)
{
    struct stat st;
    (void)arg;
    while (!stop) {
        stat("lock", &st); /* a known lock path: the recording path, hot */
        int fd = open("lock", O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (fd >= 0)
            close(fd);
    }
    return NULL;
}

static int forkthreads(void)
{
    int fd = open("lock", O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0)
        return perror("open"), 1;
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, spin, NULL);
    int bad = 0;
    for (int i = 0; i < 20; i++) {
        pid_t c = fork();
        if (c == 0) {
            /* The child: a new lock of its own, then its exit status. */
            char p[32];
            snprintf(p, sizeof p, "child-%d", i);
            int f = open(p, O_CREAT | O_EXCL | O_WRONLY, 0600);
            if (f < 0)
                _exit(2);
            close(f);
            unlink(p);
            exit(40 + i % 3);
        }
        int st;
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 40 + i % 3)
            bad++;
    }
    stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    printf("children failed %d\n", bad);
    return bad != 0;
}

static int closefds(void)
{
    /* Close everything above stderr, the shim's trace fd included wherever it
     * is (past the soft limit too): every number /proc/self/fd lists, as
     * daemons and subprocess modules do, then every number below 1024. */
    int open_fds[64], nopen = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while (d && (de = readdir(d)) && nopen < 64) {
        int fd = atoi(de->d_name);
        if (fd > 2 && fd != dirfd(d))
            open_fds[nopen++] = fd;
    }
    if (d)
        closedir(d);
    for (int i = 0; i < nopen; i++)
        close(open_fds[i]);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    /* Take every number up to 130 with files of our own. */
    int fds[128], n = 0, bad = 0;
    for (int i = 0; i < 128; i++) {
        char p[32];
        snprintf(p, sizeof p, "own-%d", i);
        fds[n++] = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    }
    int lock = open("lock", O_CREAT | O_EXCL | O_WRONLY, 0600); /* recorded: the shim reopens */
    for (int i = 0; i < n; i++) {
        char line[32];
        int len = snprintf(line, sizeof line, "mine %d\n", i);
        if (write(fds[i], line, (size_t)len) != len)
            bad++;
    }
    unlink("lock");
    close(lock);
    for (int i = 0; i < n; i++) {
        char p[32], buf[64];
        snprintf(p, sizeof p, "own-%d", i);
        int f = open(p, O_RDONLY);
        ssize_t r = read(f, buf, sizeof buf - 1);
        close(f);
        buf[r > 0 ? r : 0] = 0;
        char want[32];
        snprintf(want, sizeof want, "mine %d\n", i);
        if (strcmp(buf, want))
            bad++;
        unlink(p);
    }
    printf("lock fd %s, files not ours %d\n", lock >= 0 ? "ok" : "failed", bad);
    return bad != 0 || lock < 0;
}

static int spawn(void)
{
    pid_t pid;
    char *argv[] = {"echo", "hello", "from \"spawn\"", NULL};
    int rc = posix_spawn(&pid, "/bin/echo", NULL, NULL, argv, environ);
    int st = -1;
    if (rc == 0)
        waitpid(pid, &st, 0);
    printf("spawn rc=%d pid=%d status=%d\n", rc, (int)pid, st);
    fflush(stdout);
    char *argv2[] = {"true", NULL};
    int rc2 = posix_spawnp(&pid, "true", NULL, NULL, argv2, environ);
    if (rc2 == 0)
        waitpid(pid, &st, 0);
    printf("spawnp rc=%d pid=%d status=%d\n", rc2, (int)pid, st);
    char *argv3[] = {"nope", NULL};
    int rc3 = posix_spawnp(&pid, "/nonexistent/nope", NULL, NULL, argv3, environ);
    printf("spawnp missing rc=%d\n", rc3);
    return rc != 0 || rc2 != 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return 64;
    if (argc > 2 && chdir(argv[2]) != 0)
        return perror(argv[2]), 2;
    if (!strcmp(argv[1], "calls"))
        return calls();
    if (!strcmp(argv[1], "forkthreads"))
        return forkthreads();
    if (!strcmp(argv[1], "closefds"))
        return closefds();
    if (!strcmp(argv[1], "spawn"))
        return spawn();
    return 64;
}
