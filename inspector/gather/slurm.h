/*
 * Collecting the snapshots of every node of a Slurm job: `srun --overlap
 * --jobid JOBID --ntasks-per-node 1 hangdx snapshot --all --frames` runs on
 * each node of the job, and each node's snapshot comes back through srun's
 * standard output as frames (formats/frames.h), which the collector takes
 * apart again.
 * No printing here: callers (cli_slurm.c) talk to the person.
 */
#ifndef HDX_SLURM_H
#define HDX_SLURM_H

#include <stddef.h>
#include <stdio.h>

#include "formats/frames.h"

/* A job as squeue sees it. */
typedef struct hdx_slurm_job {
    char *id;       /* the numeric job id (%A), heap: what srun --jobid takes */
    char *state;    /* RUNNING, PENDING, ... heap */
    char *nodelist; /* e.g. "node[1-4]", heap */
    int nodes;      /* its node count */
} hdx_slurm_job;

void hdx_slurm_job_clear(hdx_slurm_job *j);

/* Is s a job id that Slurm could know: digits, optionally "_N" (array task)
 * or "+N" (heterogeneous component)? 1 or 0. */
int hdx_slurm_job_id_valid(const char *s);

/*
 * Is prog found in $PATH (or, when it contains a '/', is it executable)?
 * 1 or 0.
 */
int hdx_slurm_have(const char *prog);

/*
 * Ask `squeue -h -j id -o "%A %D %T %N"` about job id. Fills *j (caller
 * clears with hdx_slurm_job_clear). 0; or a negative errno with *err, a heap
 * message for a person that the caller frees: -ENOENT squeue is not in
 * PATH; -ESRCH Slurm does not know the job (squeue's own words quoted);
 * -EIO squeue failed otherwise or said nothing we understand; -ETIMEDOUT
 * squeue gave no answer within 60 s; -ENOMEM.
 */
int hdx_slurm_job_query(const char *id, hdx_slurm_job *j, char **err);

/*
 * Run `srun --overlap --jobid J --nodes N --ntasks N --ntasks-per-node 1
 * --label --job-name hangdx-collect -- node_argv...` for job j, with
 * HANGDX_SLURM_COLLECTOR set to this process's "JOBID.STEPID" when it runs in
 * a step of that job, and put the frames of its standard output into *fr.
 * srun's standard error (and the nodes') goes to ours. Waits at most
 * timeout_s seconds, then stops srun (SIGINT, which cancels the step, then
 * SIGKILL). *srun_status: srun's exit status (128 + signal when killed).
 * 0 when srun ran (whatever its status; see fr for what came back), or a
 * negative errno with *err (heap, caller frees): -ENOENT srun not in PATH,
 * -ETIMEDOUT, or the failed system call's.
 */
int hdx_slurm_collect(const hdx_slurm_job *j, char *const *node_argv, int timeout_s, hdx_frames *fr,
                      int *srun_status, char **err);

#endif
