/* hdx_proc_* against a real process (live_target) with known threads. */
#include <sys/stat.h>
#include <sys/syscall.h>

#include "live_util.h"
#include "gather/proc.h"
#include "model/syscalls.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_live_proc LIVE_TARGET\n");
        return 64;
    }
    char dir[] = "/tmp/hdx-live-proc-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char *lock = hdx_asprintf("%s/build.lock", dir);
    char *targv[] = {argv[1], lock, NULL};
    char *tenv[] = {"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "SECRET_TOKEN=hunter2",
                    "PATH=/usr/bin:/bin", NULL};
    struct live_proc lp;
    if (live_spawn(&lp, targv, tenv, dir) < 0)
        return 1;
    char line[128];
    if (live_read_line(lp.out, line, sizeof line, 10000) < 0) {
        fprintf(stderr, "FAIL: target did not start\n");
        live_kill(&lp);
        return 1;
    }
    int child = 0;
    sscanf(line, "ready %d", &child);
    hdx_sleep_ms(200); /* let the threads reach their waits */

    /* --- hdx_proc_read / hdx_proc_sample --- */
    hdx_evidence *ev = hdx_evidence_new();
    hdx_process *p = hdx_evidence_add_process(ev);
    int r = hdx_proc_read(p, lp.pid);
    CHECK(r == 0, "hdx_proc_read = %d", r);
    CHECK(p->pid == lp.pid, "pid %d", p->pid);
    CHECK(p->ppid == getpid(), "ppid %d, expected %d", p->ppid, getpid());
    CHECK(p->rank == 3, "rank %d", p->rank);
    CHECK(p->world_size == 4, "world_size %d", p->world_size);
    CHECK(p->local_rank == 1, "local_rank %d", p->local_rank);
    CHECK(p->n_cmdline == 2 && strcmp(p->cmdline[1], lock) == 0, "cmdline (%zu args)",
          p->n_cmdline);
    CHECK(p->exe && strstr(p->exe, "live_target"), "exe %s", p->exe ? p->exe : "NULL");
    char real[4096];
    CHECK(p->cwd && realpath(dir, real) && strcmp(p->cwd, real) == 0, "cwd %s",
          p->cwd ? p->cwd : "NULL");
    CHECK(p->start_ticks > 0, "start_ticks %llu", (unsigned long long)p->start_ticks);
    CHECK(p->age_s >= 0 && p->age_s < 3600, "age_s %f", p->age_s);
    CHECK(p->alive == 1, "alive %d", p->alive);
    CHECK(p->host && *p->host, "host");
    for (size_t i = 0; i < p->n_env; i++) {
        CHECK(strcmp(p->env[i].name, "SECRET_TOKEN") != 0, "SECRET_TOKEN kept");
        CHECK(strcmp(p->env[i].value, "hunter2") != 0, "secret value kept under %s",
              p->env[i].name);
        CHECK(strcmp(p->env[i].name, "PATH") != 0, "PATH kept");
    }
    CHECK(p->n_env == 3, "n_env %zu (RANK, WORLD_SIZE, LOCAL_RANK)", p->n_env);
    CHECK(p->n_threads == 4, "n_threads %zu", p->n_threads);
    CHECK(p->n_threads > 0 && p->threads[0].tid == lp.pid, "main thread first");

    const hdx_thread *sl = live_thread_named(p, "sleeper");
    const hdx_thread *lk = live_thread_named(p, "locker");
    const hdx_thread *bz = live_thread_named(p, "busy");
    CHECK(sl && lk && bz, "thread names");
    if (sl) {
        CHECK(sl->state == 'S', "sleeper state %c", sl->state);
        const char *nm = hdx_syscall_name(sl->syscall);
        CHECK(nm && (strcmp(nm, "clock_nanosleep") == 0 || strcmp(nm, "nanosleep") == 0),
              "sleeper syscall %ld (%s)", sl->syscall, nm ? nm : "?");
        fprintf(stderr, "sleeper: state %c, syscall %s, wchan %s\n", sl->state, nm ? nm : "?",
                sl->wchan ? sl->wchan : "-");
    }
    if (lk) {
        CHECK(lk->state == 'S', "locker state %c", lk->state);
        CHECK(lk->syscall == SYS_flock, "locker syscall %ld", lk->syscall);
        CHECK(hdx_syscall_name(lk->syscall) && strcmp(hdx_syscall_name(lk->syscall), "flock") == 0,
              "flock name");
        char fdp[4096];
        int fr = hdx_proc_fd_path(lp.pid, (int)lk->syscall_args[0], fdp, sizeof fdp);
        char reallock[4096];
        CHECK(fr == 0 && realpath(lock, reallock) && strcmp(fdp, reallock) == 0,
              "flock fd %d -> %s", (int)lk->syscall_args[0], fr == 0 ? fdp : "?");
        fprintf(stderr, "locker: syscall flock(fd %d -> %s), wchan %s\n",
                (int)lk->syscall_args[0], fr == 0 ? fdp : "?", lk->wchan ? lk->wchan : "-");
    }
    if (bz) {
        CHECK(bz->state == 'R', "busy state %c", bz->state);
        CHECK(bz->syscall == HDX_SYSCALL_RUNNING, "busy syscall %ld", bz->syscall);
    }
    const hdx_thread *mt = &p->threads[0];
    CHECK(mt->syscall == SYS_read && mt->syscall_args[0] == 0, "main syscall %ld(%llu)",
          mt->syscall, (unsigned long long)mt->syscall_args[0]);

    /* CPU time grows with the busy thread. */
    double first = p->cpu_ms_first;
    hdx_sleep_ms(300);
    CHECK(hdx_proc_sample(p) == 0, "sample");
    CHECK(p->cpu_ms > first, "cpu_ms %f -> %f", first, p->cpu_ms);
    bz = live_thread_named(p, "busy");
    CHECK(bz && bz->cpu_ms > 0, "busy cpu_ms");
    fprintf(stderr, "cpu_ms %.0f -> %.0f over 300 ms\n", first, p->cpu_ms);

    /* --- names, alive, boot id, getenv --- */
    CHECK(strcmp(hdx_syscall_name(262), "newfstatat") == 0, "newfstatat");
    CHECK(strcmp(hdx_syscall_name(202), "futex") == 0, "futex");
    CHECK(strcmp(hdx_syscall_name(0), "read") == 0, "read");
    CHECK(hdx_syscall_name(-3) == NULL && hdx_syscall_name(100000) == NULL, "out of range");
    CHECK(hdx_proc_alive(lp.pid, p->start_ticks) == 1, "alive");
    CHECK(hdx_proc_alive(lp.pid, 0) == 1, "alive, any start");
    CHECK(hdx_proc_alive(lp.pid, p->start_ticks + 1) == 0, "reused pid");
    CHECK(strlen(hdx_proc_boot_id()) == 36, "boot id '%s'", hdx_proc_boot_id());
    char *v = hdx_proc_getenv(lp.pid, "SECRET_TOKEN");
    CHECK(v && strcmp(v, "hunter2") == 0, "getenv");
    free(v);
    errno = 0;
    v = hdx_proc_getenv(lp.pid, "HANGDX_TRACE_DIR");
    CHECK(!v && errno == ENOENT, "getenv unset: errno %d", errno);

    pid_t z = fork();
    if (z == 0)
        _exit(0);
    hdx_sleep_ms(100); /* now a zombie until reaped */
    CHECK(hdx_proc_alive(z, 0) == 0, "zombie is not alive");
    waitpid(z, NULL, 0);
    CHECK(hdx_proc_alive(z, 0) == 0, "reaped is not alive");

    /* --- descendants --- */
    int *d = NULL;
    size_t nd = 0;
    int root = lp.pid;
    CHECK(hdx_proc_descendants(&root, 1, &d, &nd) == 0, "descendants");
    CHECK(nd == 2 && d[0] == lp.pid && d[1] == child, "descendants of %d: %zu (child %d)",
          lp.pid, nd, child);
    free(d);
    int me = getpid();
    CHECK(hdx_proc_descendants(&me, 1, &d, &nd) == 0, "own descendants");
    int seen_t = -1, seen_c = -1;
    for (size_t i = 0; i < nd; i++) {
        if (d[i] == lp.pid)
            seen_t = (int)i;
        if (d[i] == child)
            seen_c = (int)i;
    }
    CHECK(d[0] == me && seen_t > 0 && seen_c > seen_t, "order: me, target, its child");
    free(d);
    int gone = 0x3ffffff0;
    CHECK(hdx_proc_descendants(&gone, 1, &d, &nd) == -ESRCH, "missing pid");

    /* --- openers --- */
    struct stat st;
    stat(lock, &st);
    int *op = NULL;
    size_t nop = 0, unread = 0;
    CHECK(hdx_proc_openers(st.st_dev, st.st_ino, &op, &nop, &unread) == 0, "openers");
    int has_t = 0, has_c = 0;
    for (size_t i = 0; i < nop; i++) {
        has_t |= op[i] == lp.pid;
        has_c |= op[i] == child;
    }
    CHECK(nop == 2 && has_t && has_c, "openers of %s: %zu (target %d, holder %d)", lock, nop,
          has_t, has_c);
    fprintf(stderr, "openers of the lock: %zu (unreadable %zu)\n", nop, unread);
    free(op);

    /* --- find_ranks --- */
    int *rk = NULL;
    size_t nrk = 0;
    CHECK(hdx_proc_find_ranks(&rk, &nrk) == 0, "find_ranks");
    int has_rank = 0, has_self = 0;
    for (size_t i = 0; i < nrk; i++) {
        has_rank |= rk[i] == lp.pid;
        has_self |= rk[i] == getpid();
    }
    CHECK(has_rank && !has_self, "find_ranks: target %d, self %d", has_rank, has_self);
    free(rk);

    live_kill(&lp);
    unlink(lock);
    rmdir(dir);
    free(lock);
    /* the process is gone now */
    CHECK(hdx_proc_sample(p) == -ESRCH && p->alive == 0, "sample after exit");
    hdx_evidence_free(ev);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        fprintf(stderr, "ok\n");
    return failures ? 1 : 0;
}
