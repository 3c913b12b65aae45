/*
 * --slurm-job for inspect and snapshot: every node's snapshot of one Slurm
 * job, collected with srun (slurm.h), and snapshot --frames, what each node
 * runs. Declared in cli.h.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "hangdx/report.h"
#include "gather/slurm.h"
#include "formats/snapshot.h"
#include "model/jsonout.h"
#include "model/outfile.h"
#include "model/util.h"

int hdx_cli_write_frames(const hdx_evidence *ev)
{
    cJSON *j = hdx_snapshot_json_reduced(ev); /* the collector's input grows with the distinct stacks */
    if (!j)
        return -ENOMEM;
    char *s = hdx_json_print(j, 0);
    cJSON_Delete(j);
    if (!s)
        return -ENOMEM;
    char id[320];
    snprintf(id, sizeof id, "%s/%d", hdx_hostname(), (int)getpid());
    for (char *p = id; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == '\n')
            *p = '_';
    int rc = hdx_frames_write(stdout, id, s, strlen(s));
    free(s);
    return rc;
}

/* The numbers of node_argv, as words. */
struct node_words {
    char samples[24], interval[24], timeout[24];
};

/* The words each node runs: this very binary (the same path on every node), snapshot --all --frames
 * with the capture options of o; argv has room for 16, the numbers live in w. */
static void node_argv(const hdx_cli_capture *o, const char *exe, struct node_words *w, char **argv)
{
    snprintf(w->samples, sizeof w->samples, "%ld", o->samples);
    snprintf(w->interval, sizeof w->interval, "%ld", o->interval_ms);
    snprintf(w->timeout, sizeof w->timeout, "%ld", o->build_timeout);
    size_t i = 0;
    argv[i++] = (char *)exe;
    argv[i++] = "snapshot";
    argv[i++] = "--all";
    argv[i++] = "--frames";
    argv[i++] = "--samples";
    argv[i++] = w->samples;
    argv[i++] = "--interval";
    argv[i++] = w->interval;
    argv[i++] = "--build-timeout";
    argv[i++] = w->timeout;
    if (o->native_lines)
        argv[i++] = "--native-lines";
    if (o->trace_dir) {
        argv[i++] = "--trace-dir";
        argv[i++] = (char *)o->trace_dir;
    }
    argv[i] = NULL;
}

int hdx_cli_slurm_collect(const char *cmd, const hdx_cli_capture *o, hdx_evidence ***nodes, size_t *n,
                          int *partial)
{
    *nodes = NULL;
    *n = 0;
    *partial = 0;
    hdx_slurm_job job = {0};
    hdx_frames fr = {0};
    char *err = NULL;
    int rc = -1, status = 0;

    const char *exe = hdx_self_exe();
    if (!exe) {
        hdx_say(stderr, "hangdx %s: cannot find hangdx's own path (/proc/self/exe): %s\n", cmd, strerror(errno));
        return -1;
    }
    if (!hdx_slurm_have("srun") || !hdx_slurm_have("squeue")) {
        hdx_say(stderr, "hangdx %s: cannot collect from Slurm job %s: %s is not in PATH — run this where Slurm's "
                        "client commands are (a login node; Debian: apt install slurm-client), or take one "
                        "'hangdx snapshot --all' per node and give them to 'hangdx analyze'\n",
                cmd, o->slurm_job, hdx_slurm_have("srun") ? "squeue" : "srun");
        return -1;
    }
    int q = hdx_slurm_job_query(o->slurm_job, &job, &err);
    if (q) {
        hdx_say(stderr, "hangdx %s: cannot collect from Slurm job %s: %s — %s\n", cmd, o->slurm_job,
                err ? err : strerror(-q),
                q == -ESRCH ? "check the job id (squeue -u $USER lists your jobs)"
                            : "check that Slurm answers here (squeue, SLURM_CONF)");
        goto out;
    }
    if (strcmp(job.state, "RUNNING") != 0) {
        hdx_say(stderr, "hangdx %s: Slurm job %s is %s, not RUNNING: it has no processes to look at%s\n", cmd,
                job.id, job.state,
                !strcmp(job.state, "PENDING") ? " yet" : "; for a job that ended, 'hangdx analyze' its logs");
        goto out;
    }
    struct node_words words;
    char *argv[16];
    node_argv(o, exe, &words, argv);
    int timeout = 120 + (int)(o->samples * o->interval_ms / 1000) * 2;
    hdx_say(stderr, "hangdx %s: collecting from %d node%s of Slurm job %s (%s): srun --overlap runs '%s snapshot "
                    "--all' on each...\n",
            cmd, job.nodes, job.nodes == 1 ? "" : "s", job.id, job.nodelist, exe);
    int c = hdx_slurm_collect(&job, argv, timeout, &fr, &status, &err);
    if (c) {
        hdx_say(stderr, "hangdx %s: %s\n", cmd, err ? err : strerror(-c));
        if (c != -ETIMEDOUT)
            goto out;
    }
    for (size_t i = 0; i < fr.n; i++) {
        hdx_frames_doc *d = &fr.docs[i];
        char *lerr = NULL;
        hdx_evidence *ev = NULL;
        int r = -EBADMSG;
        if (d->complete && (ev = hdx_evidence_new()))
            r = hdx_snapshot_load_text(d->text, d->len, d->id, ev, &lerr);
        if (r == 0) {
            hdx_evidence **slot = hdx_append((void **)nodes, n, sizeof *slot);
            if (slot) {
                *slot = ev;
                ev = NULL;
            } else {
                r = -ENOMEM;
            }
        }
        if (r) {
            *partial = 1;
            hdx_say(stderr, "hangdx %s: the snapshot of %s came back %s%s%s\n", cmd, d->id,
                    d->complete ? "unreadable" : "incomplete (srun's output ended in the middle of it)",
                    lerr ? ": " : "", lerr ? lerr : "");
        }
        free(lerr);
        hdx_evidence_free(ev);
    }
    if (!*n)
        hdx_say(stderr, "hangdx %s: no node of job %s sent a snapshot (srun exit %d; the nodes' own messages are "
                        "above) — hangdx must be at %s on every node (a shared file system, or the same "
                        "package everywhere)\n", cmd, job.id, status, exe);
    else if ((int)*n < job.nodes) {
        *partial = 1;
        hdx_say(stderr, "hangdx %s: snapshots from %zu of %d nodes (srun exit %d; the nodes' own messages are "
                        "above): the verdict is from those only\n", cmd, *n, job.nodes, status);
    } else {
        hdx_say(stderr, "hangdx %s: snapshot%s received from %s\n", cmd, job.nodes == 1 ? "" : "s",
                job.nodes == 1 ? "the job's one node" : "every node");
    }
    rc = *n ? 0 : -1;
out:
    if (rc) {
        for (size_t i = 0; i < *n; i++)
            hdx_evidence_free((*nodes)[i]);
        free(*nodes);
        *nodes = NULL;
        *n = 0;
    }
    free(err);
    hdx_frames_clear(&fr);
    hdx_slurm_job_clear(&job);
    return rc;
}

int hdx_cli_slurm_merged(const char *cmd, const hdx_cli_capture *o, hdx_evidence *ev, int *failures)
{
    hdx_evidence **nodes = NULL;
    size_t n = 0;
    int partial = 0, rc = -1;
    *failures = 0;
    ev->build_timeout_s = o->build_timeout;
    if (hdx_cli_slurm_collect(cmd, o, &nodes, &n, &partial))
        return -1;
    size_t i = 0;
    for (; i < n; i++) {
        char *err = NULL;
        int r = hdx_evidence_merge(ev, nodes[i], &err);
        if (r) {
            hdx_say(stderr, "hangdx %s: cannot merge the snapshot of %s: %s\n", cmd,
                    nodes[i]->host ? nodes[i]->host : "a node", err ? err : strerror(-r));
            free(err);
            goto out;
        }
    }
    if (ev->n_locks)
        hdx_evidence_note(ev, "lock states as each host saw them when its snapshot was taken");
    *failures = partial;
    rc = 0;
out:
    for (size_t k = 0; k < n; k++)
        hdx_evidence_free(nodes[k]);
    free(nodes);
    return rc;
}

int hdx_cli_slurm_snapshots(const char *cmd, const hdx_cli_capture *o, const char *dir, int frames)
{
    if (frames || !dir) {
        hdx_say(stderr, "hangdx %s: --slurm-job writes one snapshot file per node into a directory: give it "
                        "with -o DIR%s\n", cmd, frames ? ", without --frames" : "");
        return HDX_EXIT_USAGE;
    }
    struct stat st;
    if (hdx_outfile_foreign_link(dir)) { /* model/outfile.h: its snapshots would go where that user chose */
        hdx_say(stderr, "hangdx %s: -o %s, or a directory on its way, is a symbolic link that another user owns — give the directory it "
                        "names, or choose another -o DIR\n", cmd, dir);
        return HDX_EXIT_USAGE;
    }
    if (mkdir(dir, 0777) != 0 && (errno != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        hdx_say(stderr, "hangdx %s: cannot make the directory %s for the snapshots: %s\n", cmd, dir,
                errno == EEXIST ? "a file of that name is in the way" : strerror(errno));
        return HDX_EXIT_FAILURE;
    }
    hdx_evidence **nodes = NULL;
    size_t n = 0;
    int partial = 0, status = HDX_EXIT_FAILURE;
    if (hdx_cli_slurm_collect(cmd, o, &nodes, &n, &partial))
        return HDX_EXIT_FAILURE;
    char **names = calloc(n, sizeof *names);
    size_t written = 0, procs = 0;
    for (size_t i = 0; names && i < n; i++) {
        char host[256];
        snprintf(host, sizeof host, "%s", nodes[i]->host ? nodes[i]->host : "unknown");
        for (char *p = host; *p; p++)
            if (*p == '/')
                *p = '_';
        names[i] = hdx_asprintf("%s/snap-%s.json", dir, host);
        for (size_t k = 0; names[i] && k < i; k++)
            if (names[k] && !strcmp(names[k], names[i])) { /* two tasks on one node: keep both */
                free(names[i]);
                names[i] = hdx_asprintf("%s/snap-%s-%zu.json", dir, host, i);
                break;
            }
        int r = names[i] ? hdx_snapshot_write(nodes[i], names[i]) : -ENOMEM;
        if (r) {
            hdx_say(stderr, "hangdx %s: cannot write %s: %s\n", cmd, names[i] ? names[i] : "a snapshot",
                    strerror(-r));
            goto out;
        }
        written++;
        procs += nodes[i]->n_procs;
    }
    if (!names)
        goto out;
    hdx_say(stderr, "hangdx: %zu snapshot%s (%zu processes) written to %s; 'hangdx analyze %s' gives the verdict\n",
            written, written == 1 ? "" : "s", procs, dir, dir);
    status = partial ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
    for (size_t i = 0; status == HDX_EXIT_OK && i < n; i++)
        status = hdx_cli_capture_status(cmd, nodes[i], 0);
out:
    for (size_t i = 0; i < n; i++) {
        if (names)
            free(names[i]);
        hdx_evidence_free(nodes[i]);
    }
    free(names);
    free(nodes);
    return status;
}
