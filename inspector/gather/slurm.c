#include "gather/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gather/capture.h"
#include "model/util.h"

/* ---- jobs ---------------------------------------------------------------- */

void hdx_slurm_job_clear(hdx_slurm_job *j)
{
    if (!j)
        return;
    free(j->id);
    free(j->state);
    free(j->nodelist);
    memset(j, 0, sizeof *j);
}

int hdx_slurm_job_id_valid(const char *s)
{
    size_t i = 0;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == 0 || i > 18)
        return 0;
    if (!s[i])
        return 1;
    if (s[i] != '_' && s[i] != '+')
        return 0;
    size_t k = ++i;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    return i > k && i - k <= 18 && !s[i];
}

int hdx_slurm_have(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char *full = hdx_asprintf("%.*s/%s", (int)l, l ? p : ".", prog);
        int ok = full && access(full, X_OK) == 0;
        free(full);
        if (ok)
            return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

/* ---- running a client command ------------------------------------------ */

typedef int (*line_fn)(void *ctx, const char *line, size_t len);

/* Hand each complete line of buf[0, *len) to fn and keep the rest at the start. */
static int drain_lines(char *buf, size_t *len, line_fn fn, void *ctx)
{
    size_t start = 0;
    for (size_t i = 0; i < *len; i++)
        if (buf[i] == '\n') {
            int r = fn(ctx, buf + start, i - start);
            if (r < 0)
                return r;
            start = i + 1;
        }
    memmove(buf, buf + start, *len - start);
    *len -= start;
    return 0;
}

/*
 * Run argv (through PATH) with its stdout (and stderr too with merge_stderr)
 * going to fn line by line, env name=value added when name is not NULL.
 * At most timeout_s seconds; then SIGINT, 5 s later SIGKILL, and -ETIMEDOUT.
 * *status: the exit status (128 + signal). 0 or a negative errno.
 */
static int run_lines(char *const *argv, int merge_stderr, const char *name, const char *value, int timeout_s,
                     line_fn fn, void *ctx, int *status)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    if (pid == 0) {
        if (dup2(fds[1], 1) < 0 || (merge_stderr && dup2(fds[1], 2) < 0))
            _exit(127);
        if (name)
            setenv(name, value, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    int rc = 0, killed = 0;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int64_t deadline = hdx_mono_ns() + (int64_t)timeout_s * 1000000000;
    if (!buf)
        rc = -ENOMEM;
    while (rc == 0) {
        int64_t left_ms = (deadline - hdx_mono_ns()) / 1000000;
        if (left_ms <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pfd, 1, left_ms > 1000 ? 1000 : (int)left_ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0) {
            rc = -errno;
            break;
        }
        if (pr == 0)
            continue;
        if (len == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fds[0], buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (len)
                rc = fn(ctx, buf, len);
            len = 0;
            break;
        }
        len += (size_t)r;
        rc = drain_lines(buf, &len, fn, ctx);
    }
    close(fds[0]);
    free(buf);
    if (rc) {
        kill(pid, SIGINT); /* srun passes it on and cancels the step */
        killed = 1;
    }
    int ws = 0;
    for (int waited = 0;; waited++) {
        pid_t w = waitpid(pid, &ws, killed ? WNOHANG : 0);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        if (w == 0) {
            if (waited == 50)
                kill(pid, SIGKILL);
            hdx_sleep_ms(100);
        }
    }
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 255;
    return rc;
}

struct text {
    char *s;
    size_t len;
};

static int keep_text(void *ctx, const char *line, size_t len)
{
    struct text *t = ctx;
    if (t->len > 1 << 20)
        return 0;
    char *n = realloc(t->s, t->len + len + 2);
    if (!n)
        return -ENOMEM;
    memcpy(n + t->len, line, len);
    t->len += len;
    n[t->len++] = '\n';
    n[t->len] = 0;
    t->s = n;
    return 0;
}

/* The first line of s without its newline, at most 300 bytes: heap. */
static char *first_line(const char *s)
{
    size_t l = s ? strcspn(s, "\n") : 0;
    return strndup(s ? s : "", l > 300 ? 300 : l);
}

int hdx_slurm_job_query(const char *id, hdx_slurm_job *j, char **err)
{
    memset(j, 0, sizeof *j);
    if (!hdx_slurm_have("squeue")) {
        *err = hdx_asprintf("squeue is not in PATH: this host has no Slurm client commands");
        return -ENOENT;
    }
    char *argv[] = {"squeue", "-h", "-j", (char *)id, "-o", "%A %D %T %N", NULL};
    struct text out = {0};
    int status = 0, rc = run_lines(argv, 1, NULL, NULL, 60, keep_text, &out, &status);
    char *line = first_line(out.s);
    if (rc == -ETIMEDOUT) {
        *err = hdx_asprintf("squeue -j %s gave no answer within 60 s (is slurmctld reachable?)", id);
        goto out;
    }
    if (rc)
        goto out;
    char idbuf[32], state[32], nodes[4096];
    int n = 0;
    if (status == 0 && line && sscanf(line, "%31s %d %31s %4095s", idbuf, &n, state, nodes) == 4 && n > 0) {
        if (!(j->id = strdup(idbuf)) || !(j->state = strdup(state)) || !(j->nodelist = strdup(nodes)))
            rc = -ENOMEM;
        j->nodes = n;
        goto out;
    }
    if ((status == 0 && (!line || !*line)) || (out.s && strstr(out.s, "Invalid job id"))) {
        rc = -ESRCH;
        *err = line && *line ? hdx_asprintf("Slurm does not know job %s (squeue: %s)", id, line)
                             : hdx_asprintf("Slurm does not know job %s (squeue lists no such job: it ended, "
                                            "or never existed)", id);
    } else {
        rc = -EIO;
        *err = hdx_asprintf("squeue -j %s failed (exit %d): %s", id, status, line && *line ? line : "no output");
    }
out:
    if (rc)
        hdx_slurm_job_clear(j);
    if (rc && !*err)
        *err = hdx_asprintf("cannot run squeue: %s", strerror(-rc));
    free(line);
    free(out.s);
    return rc;
}

static int feed_frames(void *ctx, const char *line, size_t len)
{
    return hdx_frames_feed(ctx, line, len);
}

int hdx_slurm_collect(const hdx_slurm_job *j, char *const *node_argv, int timeout_s, hdx_frames *fr,
                      int *srun_status, char **err)
{
    *srun_status = 0;
    if (!hdx_slurm_have("srun")) {
        *err = hdx_asprintf("srun is not in PATH: this host has no Slurm client commands");
        return -ENOENT;
    }
    char nodes[16];
    snprintf(nodes, sizeof nodes, "%d", j->nodes);
    char *head[] = {"srun", "--overlap", "--jobid", j->id, "--nodes", nodes, "--ntasks", nodes,
                    "--ntasks-per-node", "1", "--label", "--job-name", "hangdx-collect", "--"};
    size_t nh = sizeof head / sizeof head[0], na = 0;
    while (node_argv[na])
        na++;
    char **argv = calloc(nh + na + 1, sizeof *argv);
    char *collector = NULL;
    if (!argv)
        return -ENOMEM;
    memcpy(argv, head, sizeof head);
    memcpy(argv + nh, node_argv, na * sizeof *argv);
    /* Run from a step of the job itself: its tasks are no ranks either (capture.c). */
    const char *my_job = getenv("SLURM_JOB_ID"), *my_step = getenv("SLURM_STEP_ID");
    if (my_job && my_step && !strcmp(my_job, j->id) && !(collector = hdx_asprintf("%s.%s", my_job, my_step))) {
        free(argv);
        return -ENOMEM;
    }
    int rc = run_lines(argv, 0, collector ? HDX_SLURM_COLLECTOR_ENV : NULL, collector, timeout_s, feed_frames, fr,
                       srun_status);
    if (rc == -ETIMEDOUT)
        *err = hdx_asprintf("srun did not finish within %d s; it was stopped", timeout_s);
    else if (rc)
        *err = hdx_asprintf("cannot run srun: %s", strerror(-rc));
    free(collector);
    free(argv);
    return rc;
}
