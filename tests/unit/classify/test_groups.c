/* Stack groups: identical paths form one class; the odd one out is named by
 * the frame where it leaves the largest class. */
#include <stdio.h>
#include <string.h>

#include "classify/groups.h"
#include "model/util.h"

#include "check.h"
#include "python_process.h"

/* Rank r (pid 1000 + r), whose main thread runs the Python frames of train.py given outermost
 * first. */
static void rank(hdx_evidence *ev, int r, const char *const *outer_first, size_t n)
{
    hdx_test_python_process(ev, 1000 + r, r, "train.py", outer_first, n);
}

int main(void)
{
    static const char *const in_collective[] = {"<module>", "train", "train_step", "all_reduce"};
    static const char *const skipped[] = {"<module>", "train", "skip_and_sleep"};
    hdx_evidence *ev = hdx_evidence_new();
    for (int r = 0; r < 8; r++)
        if (r != 6)
            rank(ev, r, in_collective, 4);
    rank(ev, 6, skipped, 3);

    hdx_group *g = NULL;
    size_t n = 0;
    hdx_mark_rank_processes(ev); /* as hdx_evidence_label does */
    CHECK(hdx_groups_make(ev, &g, &n) == 0);
    CHECK(n == 2);
    char buf[64];
    hdx_format_ranges(g[0].ranks, g[0].n_ranks, buf, sizeof buf);
    CHECK(!strcmp(buf, "0-5,7"));
    CHECK(g[0].diverges_at == -1 && g[0].n_pids == 7);
    CHECK(g[1].n_ranks == 1 && g[1].ranks[0] == 6);
    CHECK(g[1].diverges_at == 0 && !strcmp(g[1].key->frames[g[1].diverges_at].function, "skip_and_sleep"));
    hdx_groups_free(g, n);
    hdx_evidence_free(ev);
    if (failures)
        return 1;
    printf("groups: 2 classes, rank 6 leaves at skip_and_sleep\n");
    return 0;
}
