/* The merged stack tree (report/tree.h): its branches, their members, culprits and ends, on
 * evidence built here; and its paths, as the exports read them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify.h"
#include "model/util.h"
#include "report/report.h"
#include "report/tree.h"

#include "check.h"
#include "python_process.h"

/* A process (a rank when r >= 0) whose main thread runs the Python frames of /job/train.py
 * given outermost first. */
static void proc(hdx_evidence *ev, int pid, int r, const char *const *outer_first, size_t n)
{
    hdx_test_python_process(ev, pid, r, "/job/train.py", outer_first, n);
}

/* "[ranges] n: frame, frame" of branch b. */
static const char *branch_text(const hdx_tree *t, size_t b, char *buf, size_t size)
{
    const hdx_tree_branch *br = &t->branches[b];
    char ranges[128], label[128];
    hdx_format_ranges_of(br->members, br->n_members, ranges, sizeof ranges);
    size_t w = (size_t)snprintf(buf, size, "[%s] %zu level %zu:", ranges, br->n_members, br->level);
    for (size_t i = 0; i < br->n_frames && w < size; i++)
        w += (size_t)snprintf(buf + w, size - w, " %s", hdx_tree_frame_label(br->frames[i], label, sizeof label));
    return buf;
}

int main(void)
{
    static const char *const in_collective[] = {"<module>", "train", "train_step", "all_reduce"};
    static const char *const in_barrier[] = {"<module>", "train", "barrier"};
    static const char *const skipped[] = {"<module>", "train", "skip_and_sleep"};
    static const char *const stopped[] = {"<module>", "train"};
    hdx_evidence *ev = hdx_evidence_new();
    for (int r = 0; r < 8; r++)
        if (r != 5 && r != 6)
            proc(ev, 1000 + r, r, in_collective, 4);
    proc(ev, 1005, 5, in_barrier, 3);
    proc(ev, 1006, 6, skipped, 3);
    proc(ev, 1008, 8, stopped, 2);
    proc(ev, 1009, 9, in_barrier, 3);
    hdx_mark_rank_processes(ev); /* as hdx_evidence_label does */

    hdx_verdict v = {0};
    int culprit = 6;
    v.culprit_ranks = &culprit;
    v.n_culprit_ranks = 1;
    hdx_tree t;
    CHECK(hdx_tree_build(ev, &v, &t) == 0);
    CHECK(!t.by_pid);
    char buf[512];
    static const char *const want[] = {
        "[0-9] 10 level 0: <module> (train.py:10) train (train.py:20)",
        "[0-4,7] 6 level 1: train_step (train.py:30) all_reduce (train.py:40)",
        "[5,9] 2 level 1: barrier (train.py:30)",
        "[6] 1 level 1: skip_and_sleep (train.py:30)",
    };
    CHECK(t.n_branches == 4, "%zu branches", t.n_branches);
    for (size_t b = 0; b < t.n_branches && b < 4; b++)
        CHECK(!strcmp(branch_text(&t, b, buf, sizeof buf), want[b]), "branch %zu: %s", b, buf);
    if (t.n_branches == 4) {
        /* rank 8 stops at train: the root's end; each child is a leaf that ends all its members */
        CHECK(t.branches[0].n_ends == 1 && t.branches[0].ends[0] == 8);
        CHECK(t.branches[0].n_children == 3 && t.branches[0].children[2] == 3);
        CHECK(t.branches[1].n_ends == 6 && t.branches[1].parent == 0 && !t.branches[1].n_children);
        CHECK(t.branches[0].n_culprits == 1 && t.branches[1].n_culprits == 0 && t.branches[3].n_culprits == 1);
        CHECK(t.branches[3].n_culprit_ends == 1);
        const hdx_frame **path;
        size_t n;
        CHECK(hdx_tree_path(&t, 1, &path, &n) == 0 && n == 4);
        for (size_t i = 0; path && i < n; i++)
            CHECK(!strcmp(path[i]->function, in_collective[i]), "path[%zu] %s", i, path[i]->function);
        free(path);
    }
    CHECK(!strcmp(hdx_tree_members_noun(&t, 1), "rank") && !strcmp(hdx_tree_members_noun(&t, 2), "ranks"));
    hdx_tree_free(&t);

    /* The same tree in the text report (--tree): rank 8, which stops at train, as a line of its own. */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    CHECK(hdx_report_text(mem, ev, &v, 1) == 0);
    fclose(mem);
    const char *tree = text ? strstr(text, "\nstack tree (") : NULL;
    CHECK(tree && strstr(tree, "\n  [0-9] 10 ranks\n"
                               "      <module> (train.py:10)\n"
                               "      train (train.py:20)\n"
                               "      [8] 1 rank ends here\n"
                               "      [0-4,7] 6 ranks\n"
                               "          train_step (train.py:30)\n"
                               "          all_reduce (train.py:40)\n"
                               "      [5,9] 2 ranks\n"
                               "          barrier (train.py:30)\n"
                               "      [6] 1 rank (culprit): skip_and_sleep (train.py:30)\n\n"),
          "%s", tree ? tree : text);
    free(text);
    hdx_evidence_free(ev);

    /* 8192 ranks in 4 pipeline stages of 2 ops each: 13 branches, siblings of one size by their
     * lowest rank. */
    static const char *const stage[] = {"stage_0", "stage_1", "stage_2", "stage_3"};
    static const char *const op[] = {"op_0", "op_1"};
    ev = hdx_evidence_new();
    for (int r = 0; r < 8192; r++) {
        const char *path[] = {"<module>", "train", stage[r / 2048], op[r % 2]};
        proc(ev, 10000 + r, r, path, 4);
    }
    hdx_mark_rank_processes(ev);
    culprit = 8191;
    v = (hdx_verdict){.culprit_ranks = &culprit, .n_culprit_ranks = 1};
    CHECK(hdx_tree_build(ev, &v, &t) == 0);
    CHECK(t.n_branches == 13, "%zu branches", t.n_branches);
    if (t.n_branches == 13) {
        CHECK(!strcmp(branch_text(&t, 0, buf, sizeof buf), "[0-8191] 8192 level 0: <module> (train.py:10) train (train.py:20)"), "%s", buf);
        CHECK(!strcmp(branch_text(&t, 10, buf, sizeof buf), "[6144-8191] 2048 level 1: stage_3 (train.py:30)"), "%s", buf);
        const hdx_tree_branch *odd = &t.branches[12];
        CHECK(odd->n_members == 1024 && odd->members[0] == 6145 && odd->members[1023] == 8191 &&
              !strcmp(odd->frames[0]->function, "op_1") && odd->n_culprits == 1 && odd->n_ends == 1024);
        CHECK(t.branches[11].members[0] == 6144 && !strcmp(t.branches[11].frames[0]->function, "op_0"));
    }
    hdx_tree_free(&t);
    hdx_evidence_free(ev);

    /* No rank process: the tree is by pid, the verdict's culprit pids counted. */
    ev = hdx_evidence_new();
    proc(ev, 300, -1, in_barrier, 3);
    proc(ev, 301, -1, in_barrier, 3);
    proc(ev, 302, -1, skipped, 3);
    hdx_mark_rank_processes(ev);
    int pid = 302;
    v = (hdx_verdict){.culprit_pids = &pid, .n_culprit_pids = 1};
    CHECK(hdx_tree_build(ev, &v, &t) == 0);
    CHECK(t.by_pid && t.n_branches == 3);
    if (t.n_branches == 3) {
        CHECK(!strcmp(branch_text(&t, 1, buf, sizeof buf), "[300-301] 2 level 1: barrier (train.py:30)"), "%s", buf);
        CHECK(t.branches[2].n_culprits == 1 && t.branches[2].members[0] == 302);
    }
    CHECK(!strcmp(hdx_tree_members_noun(&t, 3), "processes"));
    hdx_tree_free(&t);
    hdx_evidence_free(ev);

    /* Native labels: the module's last component; no symbol: "??". */
    hdx_frame f = {.kind = HDX_FRAME_NATIVE, .module = "/usr/lib/libc.so.6"};
    CHECK(!strcmp(hdx_tree_frame_label(&f, buf, sizeof buf), "?? [libc.so.6]"), "%s", buf);
    f.function = "clock_nanosleep";
    f.module = NULL;
    CHECK(!strcmp(hdx_tree_frame_label(&f, buf, sizeof buf), "clock_nanosleep"), "%s", buf);
    if (failures)
        return 1;
    printf("tree: 4 branches, ranks 0-4,7 / 5,9 / 6 under <module> > train, rank 8 ends at train; 8192 ranks in 13\n");
    return 0;
}
