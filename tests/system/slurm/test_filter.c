/* hdx_proc_find_ranks_filtered: which processes `snapshot --all` takes inside a Slurm step.
 * Real processes (sleep) with the environments Slurm gives, no Slurm needed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gather/proc.h"

#include "check.h"

/* A sleep 60 with exactly the environment env (NULL-terminated). */
static pid_t spawn(char *const *env)
{
    pid_t p = fork();
    if (p == 0) {
        char *argv[] = {"sleep", "60", NULL};
        execve("/bin/sleep", argv, env);
        _exit(127);
    }
    return p;
}

static int has(const int *pids, size_t n, pid_t p)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == p)
            return 1;
    return 0;
}

int main(void)
{
    char *rank_of_job[] = {"SLURM_JOB_ID=77", "SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_CLUSTER_NAME=c1", NULL};
    char *other_job[] = {"SLURM_JOB_ID=78", "SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_CLUSTER_NAME=c1", NULL};
    char *outside[] = {"RANK=1", "WORLD_SIZE=3", NULL};
    char *collector[] = {"SLURM_JOB_ID=77", "SLURM_STEP_ID=5", "SLURM_PROCID=0", "SLURM_CLUSTER_NAME=c1", NULL};
    char *other_cluster[] = {"SLURM_JOB_ID=77", "SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_CLUSTER_NAME=c2", NULL};
    char *batch_rank[] = {"SLURM_JOB_ID=77", "RANK=2", "SLURM_PROCID=0", NULL}; /* torchrun in the batch script */
    char *no_rank[] = {"SLURM_JOB_ID=77", "SLURM_STEP_ID=0", NULL};
    pid_t a = spawn(rank_of_job), b = spawn(other_job), c = spawn(outside), d = spawn(collector),
          e = spawn(other_cluster), f = spawn(batch_rank), g = spawn(no_rank);
    usleep(300 * 1000); /* each has exec'd: its environ is the one given */

    int *pids = NULL;
    size_t n = 0;
    CHECK(hdx_proc_find_ranks(&pids, &n) == 0);
    CHECK(has(pids, n, a) && has(pids, n, b) && has(pids, n, c) && has(pids, n, d) && has(pids, n, e) &&
          has(pids, n, f) && !has(pids, n, g));
    free(pids);

    const char *skip[] = {"5"};
    hdx_rank_filter flt = {.slurm_job_id = "77", .slurm_cluster = "c1", .skip_steps = skip, .n_skip_steps = 1};
    CHECK(hdx_proc_find_ranks_filtered(&flt, &pids, &n) == 0);
    CHECK(has(pids, n, a));  /* a task of job 77 */
    CHECK(!has(pids, n, b)); /* another job */
    CHECK(!has(pids, n, c)); /* outside Slurm, RANK set */
    CHECK(!has(pids, n, d)); /* the collecting step */
    CHECK(!has(pids, n, e)); /* job 77 of another cluster */
    CHECK(has(pids, n, f));  /* a rank of the batch step (no SLURM_STEP_ID) */
    CHECK(!has(pids, n, g)); /* no rank variable */
    free(pids);

    CHECK(hdx_proc_find_ranks_filtered(NULL, &pids, &n) == 0);
    CHECK(has(pids, n, a) && has(pids, n, b) && has(pids, n, c));
    free(pids);

    pid_t all[] = {a, b, c, d, e, f, g};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        kill(all[i], SIGKILL);
        waitpid(all[i], NULL, 0);
    }
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
