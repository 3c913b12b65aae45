/* Slurm job ids (gather/slurm.h): what --slurm-job accepts (cmd/cli.c) before Slurm is asked.
 * On strings only: no Slurm, no process. The rest of Slurm: tests/system/slurm. */
#include <stdio.h>

#include "gather/slurm.h"

#include "check.h"

int main(void)
{
    CHECK(hdx_slurm_job_id_valid("1234"));
    CHECK(hdx_slurm_job_id_valid("1234_7"));
    CHECK(hdx_slurm_job_id_valid("1234+1"));
    CHECK(!hdx_slurm_job_id_valid(""));
    CHECK(!hdx_slurm_job_id_valid("abc"));
    CHECK(!hdx_slurm_job_id_valid("12 34"));
    CHECK(!hdx_slurm_job_id_valid("1234_"));
    CHECK(!hdx_slurm_job_id_valid("-5"));
    CHECK(!hdx_slurm_job_id_valid("12;rm"));
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
