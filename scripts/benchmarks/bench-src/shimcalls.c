/*
 * shimcalls OP N DIR — wall-clock nanoseconds per call of one wrapped libc call,
 * for scripts/bench's shim-wall section, which runs it with and without
 * LD_PRELOAD=libhangdx-preload.so, interleaved. Not a test.
 *
 * OP (every call on DIR/file, a regular file on the file system of DIR):
 *   stat        stat(path)                           (the shim: a lock-path check)
 *   stat-known  stat(path) after this process created DIR/lock with O_CREAT|O_EXCL
 *               (a FileBaton lock: the shim now knows one lock path)
 *   open        open(path, O_RDONLY) + close         (close is not wrapped)
 *   flock       flock(LOCK_EX|LOCK_NB) + flock(LOCK_UN) on an open fd, both succeed
 * None of them records anything: a successful non-blocking lock, an unlock, a
 * stat or open of a path that is not a known lock write no trace line.
 *
 * Prints one line: "OP ns_per_iteration" for N timed iterations after N/10 of warm-up.
 *
 * shimcalls OP N DIR paired — the same call through its ordinary symbol (the shim's, when
 * preloaded) and through libc's own (dlsym on libc.so.6), in alternating blocks of 1000
 * iterations inside one process, so that the machine's load meets both alike. Prints
 * "OP ns_symbol ns_libc ns_added": the medians over the blocks, and the median of the
 * differences of adjacent blocks. Without the shim both are libc's: a control (about 0).
 *
 * shimcalls OP N DIR cold — as without the word, but with one warm-up iteration instead
 * of N/10: for instruction counts (callgrind), where warm-up is only a constant.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

struct calls {
    int (*stat)(const char *, struct stat *);
    int (*open)(const char *, int, ...);
    int (*flock)(int, int);
};

static int one(const struct calls *c, const char *op, const char *path, int fd)
{
    struct stat st;
    if (op[0] == 's')
        return c->stat(path, &st);
    if (op[0] == 'o') {
        int f = c->open(path, O_RDONLY);
        return f < 0 ? -1 : close(f);
    }
    return c->flock(fd, LOCK_EX | LOCK_NB) | c->flock(fd, LOCK_UN);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, long n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define BLOCK 1000

int main(int argc, char **argv)
{
    const char *mode = argc == 5 ? argv[4] : "";
    if (argc < 4 || argc > 5 || (*mode && strcmp(mode, "paired") && strcmp(mode, "cold")) ||
        (strcmp(argv[1], "stat") && strcmp(argv[1], "stat-known") && strcmp(argv[1], "open") &&
         strcmp(argv[1], "flock"))) {
        fprintf(stderr, "usage: shimcalls stat|stat-known|open|flock N DIR [paired|cold]\n");
        return 64;
    }
    const char *op = argv[1];
    long n = atol(argv[2]);
    if (chdir(argv[3]) != 0) {
        perror(argv[3]);
        return 1;
    }
    int fd = open("file", O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        perror("file");
        return 1;
    }
    int lk = -1;
    if (!strcmp(op, "stat-known")) {
        unlink("lock");
        if ((lk = open("lock", O_CREAT | O_EXCL | O_WRONLY, 0600)) < 0) {
            perror("lock");
            return 1;
        }
    }
    struct calls sym = {stat, open, flock}, libc = sym;
    void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (!h || !(libc.stat = (int (*)(const char *, struct stat *))dlsym(h, "stat")) ||
        !(libc.open = (int (*)(const char *, int, ...))dlsym(h, "open")) ||
        !(libc.flock = (int (*)(int, int))dlsym(h, "flock"))) {
        fprintf(stderr, "shimcalls: libc's own stat/open/flock not found: %s\n", dlerror());
        return 1;
    }
    for (long i = 0; i < (strcmp(mode, "cold") ? n / 10 : 1); i++)
        if (one(&sym, op, "file", fd) != 0 || one(&libc, op, "file", fd) != 0) {
            perror(op);
            return 1;
        }
    if (strcmp(mode, "paired")) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++)
            one(&sym, op, "file", fd);
        double dt = now_ns() - t0;
        printf("%s %.2f\n", op, dt / n);
    } else {
        long blocks = n / BLOCK > 0 ? n / BLOCK : 1;
        double *a = malloc(blocks * sizeof *a), *b = malloc(blocks * sizeof *b), *d = malloc(blocks * sizeof *d);
        if (!a || !b || !d)
            return 1;
        for (long k = 0; k < blocks; k++) {
            /* Alternate which goes first, so that neither always follows the other. */
            const struct calls *first = k % 2 ? &libc : &sym, *second = k % 2 ? &sym : &libc;
            double t0 = now_ns();
            for (int i = 0; i < BLOCK; i++)
                one(first, op, "file", fd);
            double t1 = now_ns();
            for (int i = 0; i < BLOCK; i++)
                one(second, op, "file", fd);
            double t2 = now_ns();
            a[k] = (k % 2 ? t2 - t1 : t1 - t0) / BLOCK;
            b[k] = (k % 2 ? t1 - t0 : t2 - t1) / BLOCK;
            d[k] = a[k] - b[k];
        }
        double md = median(d, blocks);
        printf("%s %.2f %.2f %.2f\n", op, median(a, blocks), median(b, blocks), md);
        free(a);
        free(b);
        free(d);
    }
    if (lk >= 0) {
        close(lk);
        unlink("lock");
    }
    return 0;
}
