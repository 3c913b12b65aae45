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

/* ---- frames ------------------------------------------------------------ */

int hdx_frames_write(FILE *f, const char *id, const char *text, size_t len)
{
    if (strpbrk(id, " \t\n") || memchr(text, '\n', len))
        return -EINVAL;
    size_t seq = 0;
    for (size_t off = 0; off < len; off += HDX_FRAMES_CHUNK, seq++) {
        size_t n = len - off < HDX_FRAMES_CHUNK ? len - off : HDX_FRAMES_CHUNK;
        if (fprintf(f, "%s %s %zu ", HDX_FRAMES_TAG, id, seq) < 0 || fwrite(text + off, 1, n, f) != n ||
            fputc('\n', f) == EOF)
            return errno ? -errno : -EIO;
    }
    if (fprintf(f, "%s %s end %zu %zu\n", HDX_FRAMES_TAG, id, seq, len) < 0 || fflush(f) != 0)
        return errno ? -errno : -EIO;
    return 0;
}

static hdx_frames_doc *doc_of(hdx_frames *fr, const char *id, size_t idlen)
{
    for (size_t i = 0; i < fr->n; i++)
        if (strlen(fr->docs[i].id) == idlen && !memcmp(fr->docs[i].id, id, idlen))
            return &fr->docs[i];
    hdx_frames_doc *d = hdx_append((void **)&fr->docs, &fr->n, sizeof *d);
    if (!d)
        return NULL;
    memset(d, 0, sizeof *d);
    if (!(d->id = strndup(id, idlen)) || !(d->text = strdup(""))) {
        free(d->id);
        fr->n--;
        return NULL;
    }
    return d;
}

/* The next space-separated word of [*p, end): its start and length; *p moves past it and one space. */
static const char *word(const char **p, const char *end, size_t *len)
{
    const char *s = *p, *e = memchr(s, ' ', (size_t)(end - s));
    if (!e)
        e = end;
    *len = (size_t)(e - s);
    *p = e < end ? e + 1 : end;
    return s;
}

static int parse_size(const char *s, size_t len, size_t *v)
{
    if (!len || len > 18)
        return -1;
    *v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *v = *v * 10 + (size_t)(s[i] - '0');
    }
    return 0;
}

int hdx_frames_feed(hdx_frames *fr, const char *line, size_t len)
{
    static const char tag[] = HDX_FRAMES_TAG " ";
    const char *end = line + len, *p = memmem(line, len, tag, sizeof tag - 1);
    if (!p)
        return 0;
    p += sizeof tag - 1;
    size_t idlen, seqlen;
    const char *id = word(&p, end, &idlen), *seq = word(&p, end, &seqlen);
    if (!idlen || !seqlen)
        return 0;
    hdx_frames_doc *d = doc_of(fr, id, idlen);
    if (!d)
        return -ENOMEM;
    size_t n;
    if (seqlen == 3 && !memcmp(seq, "end", 3)) {
        size_t chunks, bytes, l1, l2;
        const char *a = word(&p, end, &l1), *b = word(&p, end, &l2);
        if (parse_size(a, l1, &chunks) || parse_size(b, l2, &bytes) || chunks != d->next_seq || bytes != d->len)
            d->broken = 1;
        else
            d->complete = !d->broken;
        return 0;
    }
    if (parse_size(seq, seqlen, &n) || n != d->next_seq || d->complete) {
        d->broken = 1;
        return 0;
    }
    size_t add = (size_t)(end - p);
    char *t = realloc(d->text, d->len + add + 1);
    if (!t)
        return -ENOMEM;
    memcpy(t + d->len, p, add);
    d->text = t;
    d->len += add;
    t[d->len] = 0;
    d->next_seq++;
    return 0;
}

void hdx_frames_clear(hdx_frames *fr)
{
    if (!fr)
        return;
    for (size_t i = 0; i < fr->n; i++) {
        free(fr->docs[i].id);
        free(fr->docs[i].text);
    }
    free(fr->docs);
    fr->docs = NULL;
    fr->n = 0;
}

int hdx_frames_sniff(const char *path)
{
    size_t len = 0;
    char *head = NULL;
    FILE *f = fopen(path, "rb");
    if (f && (head = malloc(65536)))
        len = fread(head, 1, 65536, f);
    int yes = head && memmem(head, len, HDX_FRAMES_TAG " ", sizeof HDX_FRAMES_TAG " " - 1) != NULL;
    free(head);
    if (f)
        fclose(f);
    return yes;
}

int hdx_frames_read_file(const char *path, size_t max, hdx_frames *fr, char **err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        *err = hdx_asprintf("%s: %s", path, strerror(e));
        return -e;
    }
    char *line = NULL;
    size_t cap = 0, total = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
        total += (size_t)n;
        if (total > max) {
            rc = -EFBIG;
            *err = hdx_asprintf("%s: larger than %zu bytes: not read", path, max);
            break;
        }
        if (n > 0 && line[n - 1] == '\n')
            n--;
        rc = hdx_frames_feed(fr, line, (size_t)n);
    }
    if (rc == 0 && ferror(f)) {
        rc = -EIO;
        *err = hdx_asprintf("%s: read error", path);
    }
    if (rc == -ENOMEM && !*err)
        *err = hdx_asprintf("%s: out of memory", path);
    free(line);
    fclose(f);
    return rc;
}

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
