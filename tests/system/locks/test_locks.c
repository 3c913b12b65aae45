/* Unit tests of locks.h: the /proc/locks parser on captured text, real flock and OFD
 * holders and waiters, a stale lock file, and the search for lock files; the facts
 * taken are judged by classify's hdx_lock_judge, as hangdx does. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "classify/classify.h"
#include "model/evidence.h"
#include "report/words.h"
#include "gather/locks.h"
#include "gather/proc.h"
#include "model/util.h"

#include "check.h"

static char tmpdir[] = "/tmp/hdx-test-locks-XXXXXX";

/* The state hangdx gives l from the facts just taken. */
static hdx_lock_judgement judge(const hdx_evidence *ev, const hdx_lock *l)
{
    hdx_lock_judgement j;
    CHECK(hdx_lock_judge(ev, l, &j) == 0);
    return j;
}

static void test_parse(void)
{
    /* Captured from a 6.x kernel, plus a lease and a line the parser must skip. */
    const char *text = "1: OFDLCK ADVISORY  WRITE -1 fe:00:10953125 0 EOF\n"
                       "2: FLOCK  ADVISORY  WRITE 8719 fe:00:10953124 0 EOF\n"
                       "2: -> FLOCK  ADVISORY  WRITE 8723 fe:00:10953124 0 EOF\n"
                       "3: POSIX  ADVISORY  READ 1234 08:01:1234 128 128\n"
                       "3: -> POSIX  ADVISORY  WRITE 1240 08:01:1234 0 EOF\n"
                       "4: LEASE  ACTIVE    READ 77 00:2a:99 0 EOF\n"
                       "5: POSIX  ADVISORY  WRITE 55 <none>:0 0 EOF\n"
                       "garbage line\n"
                       "6: DELEG  ACTIVE    READ 5";
    hdx_kernel_lock *kl = NULL;
    size_t n = 0;
    CHECK(hdx_kernel_locks_parse(text, &kl, &n) == 0);
    CHECK(n == 6);
    if (n == 6) {
        CHECK(kl[0].id == 1 && !kl[0].blocked && !strcmp(kl[0].kind, "OFDLCK") && !strcmp(kl[0].mode, "WRITE"));
        CHECK(kl[0].pid == -1 && kl[0].dev_major == 0xfe && kl[0].dev_minor == 0 && kl[0].ino == 10953125UL);
        CHECK(kl[1].id == 2 && !kl[1].blocked && !strcmp(kl[1].kind, "FLOCK") && kl[1].pid == 8719);
        CHECK(kl[2].id == 2 && kl[2].blocked && !strcmp(kl[2].kind, "FLOCK") && kl[2].pid == 8723);
        CHECK(kl[2].ino == 10953124UL);
        CHECK(!strcmp(kl[3].kind, "POSIX") && !strcmp(kl[3].mode, "READ") && kl[3].pid == 1234);
        CHECK(kl[3].dev_major == 8 && kl[3].dev_minor == 1 && kl[3].ino == 1234);
        CHECK(kl[4].blocked && kl[4].pid == 1240);
        CHECK(!strcmp(kl[5].kind, "LEASE") && kl[5].dev_minor == 0x2a && kl[5].ino == 99);
    }
    free(kl);
    CHECK(hdx_kernel_locks_parse("", &kl, &n) == 0 && n == 0);
    free(kl);
}

static char *path_in(const char *rel)
{
    return hdx_asprintf("%s/%s", tmpdir, rel);
}

static void touch(const char *rel)
{
    char *p = path_in(rel);
    char *d = strdup(p);
    for (char *s = strchr(d + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        mkdir(d, 0755);
        *s = '/';
    }
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    if (fd < 0) {
        perror(p);
        exit(2);
    }
    close(fd);
    free(d);
    free(p);
}

/* A child that takes a lock on path (how: 'f' flock, 'o' OFD) and then sleeps.
 * blocking: the lock call may block (a waiter). Returns its pid once it holds the
 * lock (holder) or has started (waiter). */
static pid_t locker(const char *path, char how, int blocking)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        int fd = open(path, O_RDWR);
        if (fd < 0)
            _exit(3);
        if (blocking)
            (void)!write(pfd[1], "s", 1);
        if (how == 'f') {
            if (flock(fd, LOCK_EX) != 0)
                _exit(4);
        } else {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            if (fcntl(fd, blocking ? F_OFD_SETLKW : F_OFD_SETLK, &fl) != 0)
                _exit(4);
        }
        if (!blocking)
            (void)!write(pfd[1], "h", 1);
        for (;;)
            pause();
    }
    close(pfd[1]);
    char c;
    if (read(pfd[0], &c, 1) != 1) {
        fprintf(stderr, "locker %c on %s failed to start\n", how, path);
        exit(2);
    }
    close(pfd[0]);
    return pid;
}

/* Wait (at most 5 s) until pid sits in system call nr. */
static int wait_in_syscall(pid_t pid, long nr)
{
    char f[64];
    snprintf(f, sizeof f, "/proc/%d/syscall", (int)pid);
    for (int i = 0; i < 500; i++) {
        char *s = hdx_read_file(f, 4096, NULL);
        long v = s ? strtol(s, NULL, 10) : -1;
        free(s);
        if (v == nr)
            return 0;
        hdx_sleep_ms(10);
    }
    return -1;
}

static void stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void test_flock_holder_and_waiter(void)
{
    touch("cache/x.lock");
    char *p = path_in("cache/x.lock");
    char real[4096];
    CHECK(realpath(p, real) != NULL);
    pid_t holder = locker(p, 'f', 0);
    pid_t waiter = locker(p, 'f', 1);
    if (wait_in_syscall(waiter, 73) != 0) {
        fprintf(stderr, "the waiter never blocked in flock\n");
        failures++;
    }
    hdx_evidence *ev = hdx_evidence_new();
    ev->live = 1;
    hdx_process *pw = hdx_evidence_add_process(ev);
    CHECK(hdx_proc_read(pw, waiter) == 0);
    hdx_locks_options opt = {0};
    CHECK(hdx_locks_collect(ev, &opt) == 0);
    CHECK(hdx_locks_record_facts(ev, 0) == 0);
    hdx_lock *l = hdx_evidence_find_lock(ev, real);
    CHECK(l != NULL);
    if (l) {
        hdx_lock_judgement j = judge(ev, l);
        CHECK(j.kind == HDX_LOCK_FLOCK);
        CHECK(j.state == HDX_LOCK_HELD);
        CHECK(j.holder_pid == holder);
        CHECK(l->exists == 1);
        CHECK(l->n_waiters == 1 && l->waiters[0].pid == waiter && l->waiters[0].tid == waiter);
        CHECK(l->n_waiters == 1 && !strcmp(l->waiters[0].how, "flock"));
        CHECK(!strcmp(l->source, "blocked fd"));
    }
    hdx_evidence_free(ev);

    /* The holder is gone: the waiter takes the lock; nobody waits, the file lock is free
     * once the second one is gone too. */
    stop(holder);
    stop(waiter);
    ev = hdx_evidence_new();
    ev->live = 1;
    hdx_lock *fl = hdx_evidence_add_lock(ev);
    fl->path = strdup(real);
    fl->kind = HDX_LOCK_FLOCK;
    CHECK(hdx_locks_record_facts(ev, 0) == 0);
    hdx_lock_judgement jf = judge(ev, &ev->locks[0]);
    CHECK(jf.state == HDX_LOCK_FREE && jf.holder_pid == HDX_UNKNOWN);
    hdx_evidence_free(ev);
    free(p);
}

static void test_ofd_and_stale(void)
{
    touch("ext/py311_cpu/ofd_ext/lock");
    touch("ext/py311_cpu/stale_ext/lock");
    char *ofd = path_in("ext/py311_cpu/ofd_ext/lock");
    char *root = path_in("ext");
    char rofd[4096], rstale[4096];
    CHECK(realpath(ofd, rofd) != NULL);
    char *stale = path_in("ext/py311_cpu/stale_ext/lock");
    CHECK(realpath(stale, rstale) != NULL);
    pid_t holder = locker(ofd, 'o', 0);

    hdx_evidence *ev = hdx_evidence_new();
    ev->live = 1;
    const char *dirs[] = {root};
    hdx_locks_options opt = {.watch_ms = 0, .dirs = dirs, .n_dirs = 1};
    CHECK(hdx_locks_collect(ev, &opt) == 0);
    CHECK(ev->n_locks == 2);
    CHECK(hdx_locks_record_facts(ev, 0) == 0);
    hdx_lock *l = hdx_evidence_find_lock(ev, rofd);
    CHECK(l != NULL);
    if (l) {
        hdx_lock_judgement j = judge(ev, l);
        CHECK(j.kind == HDX_LOCK_OFD); /* found as a file; the kernel says OFD */
        CHECK(j.state == HDX_LOCK_HELD);
        CHECK(j.holder_pid == holder); /* /proc/locks has no pid for OFD: the opener */
        CHECK(l->facts.looked && l->facts.n_rows == 1 && l->facts.rows[0].kind == HDX_LOCK_OFD);
    }
    l = hdx_evidence_find_lock(ev, rstale);
    CHECK(l != NULL);
    if (l) {
        hdx_lock_judgement j = judge(ev, l);
        char note[1024] = "";
        CHECK(j.kind == HDX_LOCK_BATON);
        CHECK(j.state == HDX_LOCK_STALE);
        CHECK(j.holder_pid == HDX_UNKNOWN && l->has_creator == 0);
        CHECK(l->exists == 1 && l->mtime_ns > 0);
        CHECK(hdx_lock_judgement_note(l, &j, note, sizeof note) == 1 && strstr(note, "creator unknown: no trace"));
    }
    hdx_evidence_free(ev);

    /* A baton whose creator (from a trace) is alive but no longer has it open: never stale. */
    ev = hdx_evidence_new();
    ev->live = 1;
    l = hdx_evidence_add_lock(ev);
    l->path = strdup(rstale);
    l->has_creator = 1;
    l->creator_pid = getpid();
    l->creator_alive = 1;
    CHECK(hdx_locks_record_facts(ev, 0) == 0);
    hdx_lock_judgement jc = judge(ev, &ev->locks[0]);
    CHECK(jc.state == HDX_LOCK_HELD && jc.holder_pid == getpid());
    /* ... and a baton that no longer exists is free. */
    l = hdx_evidence_add_lock(ev);
    l->path = path_in("ext/py311_cpu/gone/lock");
    CHECK(hdx_locks_record_facts(ev, 0) == 0);
    CHECK(judge(ev, &ev->locks[1]).state == HDX_LOCK_FREE && ev->locks[1].exists == 0);
    hdx_evidence_free(ev);
    stop(holder);
    free(ofd);
    free(stale);
    free(root);
}

/* A FileBaton waiter: stat() the lock every 100 ms, as torch's FileBaton.wait() does. */
static void test_stat_poller(void)
{
    touch("repo/fused_kernels/build/lock");
    char *lock = path_in("repo/fused_kernels/build/lock");
    char real[4096];
    CHECK(realpath(lock, real) != NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) {
            struct stat st;
            if (stat(lock, &st) != 0)
                _exit(0);
            hdx_sleep_ms(100);
        }
    }
    if (wait_in_syscall(pid, 230) != 0 && wait_in_syscall(pid, 35) != 0) {
        fprintf(stderr, "the poller never slept\n");
        failures++;
    }
    hdx_evidence *ev = hdx_evidence_new();
    ev->live = 1;
    hdx_process *p = hdx_evidence_add_process(ev);
    CHECK(hdx_proc_read(p, pid) == 0);
    hdx_locks_options opt = {.watch_ms = 400};
    CHECK(hdx_locks_collect(ev, &opt) == 0);
    int watched = 0;
    for (size_t i = 0; i < ev->n_notes; i++)
        watched |= strstr(ev->notes[i], "syscall watch") != NULL;
    hdx_lock *l = hdx_evidence_find_lock(ev, real);
    if (!watched && !l) {
        printf("skip: the syscall watch could not run here (%s)\n", ev->n_notes ? ev->notes[0] : "no note");
    } else {
        CHECK(watched);
        CHECK(l != NULL);
        CHECK(hdx_locks_record_facts(ev, 0) == 0);
        if (l) {
            CHECK(l->kind == HDX_LOCK_BATON && !strcmp(l->source, "syscall watch"));
            CHECK(judge(ev, l).state == HDX_LOCK_STALE);
            CHECK(l->n_waiters == 1 && l->waiters[0].pid == pid && l->waiters[0].tid == pid);
            CHECK(l->n_waiters == 1 && !strcmp(l->waiters[0].how, "stat poll"));
        }
        hdx_process *pp = hdx_evidence_find_process(ev, pid);
        CHECK(pp && pp->threads[0].polled_path && !strcmp(pp->threads[0].polled_path, real));
    }
    hdx_evidence_free(ev);
    stop(pid);
    free(lock);
}

/* The file rel (below tmpdir) as s found it (1), with its place below te and its inode;
 * 0 when s did not find it. */
static int has(const hdx_lock_search *s, const char *rel)
{
    char real[4096];
    int found = 0;
    if (realpath(tmpdir, real)) {
        char *want = hdx_asprintf("%s/%s", real, rel);
        struct stat st;
        for (size_t i = 0; i < s->n_files; i++)
            if (strcmp(s->files[i].path, want) == 0 && stat(want, &st) == 0 && s->files[i].ino == st.st_ino &&
                s->files[i].dev == st.st_dev && !strcmp(s->files[i].rel, rel + 3)) /* rel past "te/" */
                found++;
        free(want);
    }
    return found;
}

/* Why s left rel alone, or NULL when it did not list it. */
static const char *left_why(const hdx_lock_search *s, const char *rel)
{
    const char *why = NULL;
    char real[4096];
    if (realpath(tmpdir, real)) {
        char *want = hdx_asprintf("%s/%s", real, rel);
        for (size_t i = 0; i < s->n_left; i++)
            if (strcmp(s->left[i].path, want) == 0)
                why = s->left[i].why;
        free(want);
    }
    return why;
}

static void test_find_files(void)
{
    touch("te/py311_cpu/a/lock");                 /* ~/.cache/torch_extensions/py311_cpu/<ext>/lock */
    touch("te/py311_cpu/b/lock");
    touch("te/py311_cpu/b/build.ninja");
    touch("te/py311_cpu/c/locked");
    touch("te/fused/lock");                       /* $TORCH_EXTENSIONS_DIR/<ext>/lock */
    touch("te/inductor/locks/3fa2.lock");         /* a filelock of inductor's cache: a kernel lock's file */
    touch("te/megatron/legacy/fused_kernels/build/lock"); /* Megatron's: four levels down */
    touch("te/proj/ext/out/build.ninja");         /* a build_directory of cpp_extension.load, by its ninja file */
    touch("te/proj/ext/out/lock");
    touch("te/proj/.cache/torch_extensions/py311_cpu/fused/lock"); /* a torch_extensions inside */
    touch("te/proj/torch_extensions/k/lock");
    touch("te/proj/tool/state/lock");             /* a "lock" in no build directory */
    touch("te/proj/mybuild/lock");                /* nor here: "mybuild" is no "build" */
    touch("te/proj/x/build/lock");                /* a FileBaton's lock is empty: this one is not */
    char *full = path_in("te/proj/x/build/lock");
    FILE *f = fopen(full, "w");
    CHECK(f && fputs("pid 12\n", f) >= 0 && fclose(f) == 0);
    free(full);
    touch("te/a/b/c/d/e/f/g/lock");               /* past the depth bound */
    /* package managers' and git's: never a build lock */
    touch("te/Cargo.lock");
    touch("te/proj/poetry.lock");
    touch("te/proj/yarn.lock");
    touch("te/proj/uv.lock");
    touch("te/proj/.git/index.lock");
    char *te = path_in("te");
    char *loop = path_in("te/py311_cpu/loop");
    CHECK(symlink(te, loop) == 0); /* a symlinked directory is not followed */
    hdx_lock_search s;
    CHECK(hdx_locks_find_files(te, &s) == 0);
    CHECK(s.n_files == 7 && s.rootfd >= 0);
    CHECK(has(&s, "te/proj/.cache/torch_extensions/py311_cpu/fused/lock") == 1);
    CHECK(has(&s, "te/proj/torch_extensions/k/lock") == 1);
    CHECK(has(&s, "te/py311_cpu/a/lock") == 1);
    CHECK(has(&s, "te/py311_cpu/b/lock") == 1);
    CHECK(has(&s, "te/fused/lock") == 1);
    CHECK(has(&s, "te/megatron/legacy/fused_kernels/build/lock") == 1);
    CHECK(has(&s, "te/proj/ext/out/lock") == 1);
    CHECK(s.cut == 1 && s.dirs > 10); /* te/a/b/c/d/e/f/g was not read, and it says so */
    const char *why;
    CHECK((why = left_why(&s, "te/Cargo.lock")) && strstr(why, "package manager"));
    CHECK((why = left_why(&s, "te/proj/poetry.lock")) && strstr(why, "package manager"));
    CHECK((why = left_why(&s, "te/proj/yarn.lock")) && strstr(why, "package manager"));
    CHECK((why = left_why(&s, "te/proj/uv.lock")) && strstr(why, "package manager"));
    CHECK((why = left_why(&s, "te/inductor/locks/3fa2.lock")) && strstr(why, "not a FileBaton"));
    CHECK((why = left_why(&s, "te/proj/tool/state/lock")) && strstr(why, "not in a build directory"));
    CHECK((why = left_why(&s, "te/proj/x/build/lock")) && strstr(why, "not empty"));
    CHECK(!left_why(&s, "te/proj/.git/index.lock") && !left_why(&s, "te/py311_cpu/c/locked")); /* never read */
    CHECK((why = left_why(&s, "te/proj/mybuild/lock")) && strstr(why, "not in a build directory"));
    CHECK(s.n_left == 8);
    hdx_lock_search_clear(&s);
    CHECK(s.rootfd == -1 && s.n_files == 0);
    CHECK(hdx_locks_not_builders("/x/.git/index.lock") && hdx_locks_not_builders("/x/.git/refs/heads/m.lock"));
    CHECK(hdx_locks_not_builders("/x/package-lock.json") && hdx_locks_not_builders("flake.lock"));
    CHECK(!hdx_locks_not_builders("/x/build/lock") && !hdx_locks_not_builders("/x/my.git/lock"));
    /* a trace names a lock: it counts when FileBaton's protocol made it and it is named like one */
    hdx_lock l = {.path = "/w/ext/lock", .source = "trace", .kind = HDX_LOCK_BATON};
    CHECK(hdx_locks_left_alone(&l, 0) == NULL);
    l.path = "/w/.git/index.lock"; /* git's exclusive create, seen by the shim */
    CHECK(hdx_locks_left_alone(&l, 0) && hdx_locks_left_alone(&l, 1));
    l.path = "/w/tmpa8f3k2"; /* a temporary file made with O_EXCL */
    CHECK(hdx_locks_left_alone(&l, 0) != NULL);
    l.path = "/w/locks/k.lock";
    l.kind = HDX_LOCK_FLOCK;
    CHECK(hdx_locks_left_alone(&l, 0) != NULL);
    l.source = "Python frame";
    l.kind = HDX_LOCK_BATON;
    CHECK(hdx_locks_left_alone(&l, 0) != NULL && hdx_locks_left_alone(&l, 1) == NULL);
    CHECK(hdx_locks_find_files("/nonexistent/dir", &s) == -ENOENT && s.n_files == 0 && s.rootfd == -1);
    free(te);
    free(loop);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_parse();
    test_flock_holder_and_waiter();
    test_ofd_and_stale();
    test_find_files();
    test_stat_poller();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("locks: all checks passed\n");
    return 0;
}
