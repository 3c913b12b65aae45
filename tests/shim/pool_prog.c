/*
 * The shim's buffer pool run dry (docs/design.md "The shim"): more threads
 * record at the same instant than the pool has buffers.
 *
 *   pool_prog DIR THREADS HELD
 *
 * A seccomp filter sends every write(2) to a descriptor above 2 to this
 * program's supervisor thread (SECCOMP_RET_USER_NOTIF): the program itself
 * writes only to stdout and stderr, so those are the shim's trace lines, each
 * written while its thread holds a pool buffer. The supervisor holds the
 * first HELD of them unanswered; THREADS threads then each create DIR/lock.N
 * with O_CREAT|O_EXCL at once. HELD threads block in their trace write, each
 * with its buffer; the others find the pool dry. Once those others have all
 * returned from open, the supervisor lets the held writes run
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE), and answers every later one at once.
 *
 * Prints "held H done_before_release D opened O" (H writes were held, D opens
 * returned while they were, O of THREADS opens succeeded) and exits 0; 2 on a
 * setup failure, 77 when the kernel has no user notification. A wait of more
 * than 20 s releases the held writes and says "timeout".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define WAIT_MS 20000

static int notify_fd, n_threads, n_held;
static const char *dir;
static pthread_barrier_t go;
static atomic_int done;                     /* opens returned */
static atomic_int opened;                   /* of them, succeeded */
static atomic_int held;                     /* trace writes held */
static atomic_int done_before_release = -1; /* done when they were let go */
static atomic_int timed_out;

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* write(2) to fd > 2: to the supervisor; every other call: allowed. x86-64 and aarch64 only. */
static int install_filter(void)
{
#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif
#ifdef ARCH
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* The next held write (blocks until one comes): 0 with *id, or -1 (its thread was interrupted). */
static int receive(unsigned long long *id)
{
    struct seccomp_notif n;
    memset(&n, 0, sizeof n);
    if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_RECV, &n) != 0)
        return -1;
    *id = n.id;
    return 0;
}

/* Let the write of notification id run. */
static void release(unsigned long long id)
{
    struct seccomp_notif_resp r = {.id = id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
    ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_SEND, &r); /* ENOENT: its thread was interrupted */
}

static void *supervisor(void *arg)
{
    (void)arg;
    unsigned long long ids[MAX_THREADS], id;
    long end = now_ms() + WAIT_MS;
    int h = 0;
    while (h < n_held && now_ms() < end) {
        struct pollfd p = {.fd = notify_fd, .events = POLLIN};
        long left = end - now_ms();
        if (poll(&p, 1, left > 0 ? (int)left : 0) > 0 && receive(&ids[h]) == 0)
            atomic_store(&held, ++h);
    }
    while (atomic_load(&done) < n_threads - n_held && now_ms() < end)
        usleep(1000);
    atomic_store(&timed_out, h < n_held || atomic_load(&done) < n_threads - n_held);
    atomic_store(&done_before_release, atomic_load(&done));
    for (int i = 0; i < h; i++)
        release(ids[i]);
    for (;;)
        if (receive(&id) == 0)
            release(id);
    return NULL;
}

static void *worker(void *arg)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lock.%d", dir, (int)(long)arg);
    pthread_barrier_wait(&go);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd >= 0) {
        atomic_fetch_add(&opened, 1);
        close(fd);
    }
    atomic_fetch_add(&done, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (n_threads = atoi(argv[2])) < 1 || n_threads > MAX_THREADS || (n_held = atoi(argv[3])) < 0 ||
        n_held > n_threads) {
        fprintf(stderr, "usage: pool_prog DIR THREADS(1-%d) HELD(0-THREADS)\n", MAX_THREADS);
        return 2;
    }
    dir = argv[1];
    if ((notify_fd = install_filter()) < 0) {
        fprintf(stderr, "pool_prog: seccomp user notification: %s\n", strerror(errno));
        return errno == EINVAL || errno == ENOSYS ? 77 : 2;
    }
    pthread_t sup, t[MAX_THREADS];
    pthread_barrier_init(&go, NULL, (unsigned)n_threads);
    if (pthread_create(&sup, NULL, supervisor, NULL) != 0)
        return 2;
    for (int i = 0; i < n_threads; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(long)i) != 0)
            return 2;
    for (int i = 0; i < n_threads; i++)
        pthread_join(t[i], NULL);
    printf("held %d done_before_release %d opened %d%s\n", atomic_load(&held), atomic_load(&done_before_release),
           atomic_load(&opened), atomic_load(&timed_out) ? " timeout" : "");
    fflush(stdout);
    return 0;
}
