/* Helpers shared by the live tests: spawning targets, checks. */
#ifndef HDX_LIVE_UTIL_H
#define HDX_LIVE_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/evidence.h"
#include "model/util.h"
#include "check.h"

struct live_proc {
    pid_t pid;
    int in;  /* write end of its stdin */
    int out; /* read end of its stdout */
};

/* Start argv with env (NULL-terminated "K=V" list, replacing the whole
 * environment) in cwd (NULL: ours), stdin and stdout on pipes. */
static inline int live_spawn(struct live_proc *lp, char *const argv[], char *const env[], const char *cwd)
{
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        if (cwd && chdir(cwd) < 0)
            _exit(126);
        execve(argv[0], argv, env);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    lp->pid = pid;
    lp->in = in[1];
    lp->out = out[0];
    return 0;
}

/* Read up to size-1 bytes until a newline or timeout_ms; 0 on a line. */
static inline int live_read_line(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t n = 0;
    int64_t until = hdx_mono_ns() + (int64_t)timeout_ms * 1000000;
    while (n < size - 1) {
        int64_t left = (until - hdx_mono_ns()) / 1000000;
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        if (read(fd, buf + n, 1) != 1)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = 0;
            return 0;
        }
        n++;
    }
    return -1;
}

/* Bytes readable within timeout_ms (drains what is there). */
static inline size_t live_drain(int fd, int timeout_ms)
{
    size_t total = 0;
    char buf[4096];
    struct pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, timeout_ms) > 0) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0)
            break;
        total += (size_t)r;
        timeout_ms = 0;
    }
    return total;
}

static inline void live_kill(struct live_proc *lp)
{
    if (lp->pid > 0) {
        kill(lp->pid, SIGKILL);
        waitpid(lp->pid, NULL, 0);
    }
    close(lp->in);
    close(lp->out);
    lp->pid = 0;
}

/* Every task of pid: TracerPid 0 and not stopped ('T' or 't'). Returns the
 * number of tasks that break it (printing them). */
static inline int live_untraced(int pid)
{
    char path[512];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return 1;
    int bad = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/status", pid, de->d_name);
        char *s = hdx_read_file(path, 1 << 16, NULL);
        if (!s)
            continue;
        char *tp = strstr(s, "\nTracerPid:");
        char *st = strstr(s, "\nState:");
        int tracer = tp ? atoi(tp + 11) : -1;
        char state = '?';
        if (st) {
            st += 7;
            while (*st == ' ' || *st == '\t')
                st++;
            state = *st;
        }
        if (tracer != 0 || state == 'T' || state == 't') {
            fprintf(stderr, "task %s of %d: TracerPid %d, state %c\n", de->d_name, pid, tracer,
                    state);
            bad++;
        }
        free(s);
    }
    closedir(d);
    return bad;
}

static inline const hdx_thread *live_thread_named(const hdx_process *p, const char *name)
{
    for (size_t i = 0; i < p->n_threads; i++)
        if (p->threads[i].name && strcmp(p->threads[i].name, name) == 0)
            return &p->threads[i];
    return NULL;
}

static inline const hdx_frame *live_frame(const hdx_thread *t, const char *function)
{
    for (size_t i = 0; t && i < t->n_frames; i++)
        if (t->frames[i].function && strcmp(t->frames[i].function, function) == 0)
            return &t->frames[i];
    return NULL;
}

static inline void live_print_stack(const hdx_thread *t)
{
    fprintf(stderr, "  thread %d (%s) state %c, %zu frames, stack_error %d\n", t->tid,
            t->name ? t->name : "?", t->state ? t->state : '?', t->n_frames, t->stack_error);
    for (size_t i = 0; i < t->n_frames; i++) {
        const hdx_frame *f = &t->frames[i];
        fprintf(stderr, "    #%zu 0x%llx %s %s:%d [%s+0x%llx]\n", i, (unsigned long long)f->pc,
                f->function ? f->function : "??", f->file ? f->file : "?", f->line,
                f->module ? f->module : "?", (unsigned long long)f->offset);
    }
}

static inline int live_has_note(const hdx_evidence *ev, const char *needle)
{
    for (size_t i = 0; i < ev->n_notes; i++)
        if (strstr(ev->notes[i], needle))
            return 1;
    return 0;
}

#endif
