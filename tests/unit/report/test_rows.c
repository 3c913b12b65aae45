/* The report's process rows (report/rows.h), made by 1, 2 and 3 threads: the same text, byte
 * for byte, each process's row in its place, and a row that cannot be made stops the writing
 * with -ENOMEM wherever it falls. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/evidence_json.h"
#include "report/rows.h"

#include "check.h"
#include "python_process.h"

#define N_PROCS 1000 /* several blocks of rows */

/* The rows of ev by `threads` threads into a heap string (*rc: the writer's result); the
 * keys each row names (a fresh pair each time). */
static char *rows_text(const hdx_evidence *ev, const hdx_stack_table *st, int threads, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cJSON *pkeys = cJSON_CreateArray(), *tkeys = cJSON_CreateArray();
    CHECK(f && pkeys && tkeys);
    *rc = hdx_report_rows_write(f, ev, st, pkeys, tkeys, threads);
    fclose(f);
    if (*rc == 0) {
        CHECK(cJSON_GetArraySize(pkeys) > 10); /* filled by the first row */
        CHECK(cJSON_GetArraySize(tkeys) > 10); /* by the first row with a thread */
    }
    cJSON_Delete(pkeys);
    cJSON_Delete(tkeys);
    return text;
}

int main(void)
{
    static const char *const stacks[3][4] = {{"<module>", "train", "train_step", "all_reduce"},
                                             {"<module>", "train", "barrier", NULL},
                                             {"<module>", "train", "skip_and_sleep", NULL}};
    hdx_evidence *ev = hdx_evidence_new();
    CHECK(ev != NULL);
    /* The first process has no thread: the threads' keys come from the second row. */
    hdx_process *first = hdx_evidence_add_process(ev);
    CHECK(first != NULL);
    first->pid = 999;
    for (int r = 0; r < N_PROCS - 1; r++)
        hdx_test_python_process(ev, 1000 + r, r, "/job/train.py", stacks[r % 3], r % 3 ? 3 : 4);

    hdx_stack_table *st = hdx_stack_table_new();
    CHECK(st != NULL);
    for (size_t i = 0; i < ev->n_procs; i++)
        CHECK(hdx_stack_table_count(st, &ev->procs[i]) == 0);

    int rc1, rc2, rc3;
    char *one = rows_text(ev, st, 1, &rc1), *two = rows_text(ev, st, 2, &rc2), *three = rows_text(ev, st, 3, &rc3);
    CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0);
    CHECK(one && two && three);
    if (one && two && three) {
        CHECK(strcmp(one, two) == 0);
        CHECK(strcmp(one, three) == 0);
        /* Row i starts "[pid," (pid is the first key), in the order of the processes. */
        const char *at = one;
        size_t rows = 0;
        for (size_t i = 0; i < ev->n_procs; i++) {
            char want[32];
            snprintf(want, sizeof want, "%s[%d,", i ? ",\n\t\t" : "\n\t\t", ev->procs[i].pid);
            CHECK(strncmp(at, want, strlen(want)) == 0, "row %zu: want %s at \"%.40s\"", i, want, at);
            if (strncmp(at, want, strlen(want)) != 0)
                break;
            rows++;
            const char *next = strstr(at + 1, ",\n\t\t");
            at = next ? next : at + strlen(at);
        }
        CHECK(rows == ev->n_procs);
        CHECK(*at == 0);
        CHECK(strstr(one, "skip_and_sleep") == NULL); /* a thread names its class: frames are the table's */
    }
    free(one);
    free(two);
    free(three);

    /* A process whose threads were not counted has no row: in the threads' last block (1000),
     * or among the first rows (the second, of a table that counted nothing), the writing stops. */
    hdx_test_python_process(ev, 5000, N_PROCS, "/job/other.py", stacks[0], 4);
    for (int threads = 1; threads <= 3; threads++) {
        int rc;
        free(rows_text(ev, st, threads, &rc));
        CHECK(rc == -ENOMEM);
    }
    hdx_stack_table *none = hdx_stack_table_new();
    int rc;
    free(rows_text(ev, none, 2, &rc));
    CHECK(rc == -ENOMEM);
    hdx_stack_table_free(none);
    hdx_stack_table_free(st);
    hdx_evidence_free(ev);
    if (failures)
        return 1;
    printf("rows: %d processes' rows the same by 1, 2 and 3 threads, each in its place; an uncounted one: -ENOMEM\n",
           N_PROCS);
    return 0;
}
