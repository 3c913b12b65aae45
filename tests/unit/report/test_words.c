/*
 * The report's words (report/words.h) on recorded inputs, one of each family of
 * findings: the whole summary and remedy a person reads, byte for byte. The other
 * tests check findings and facts; this one checks the sentences they are worded into.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "classify/classify.h"
#include "formats/logs.h"
#include "formats/snapshot.h"
#include "model/evidence.h"
#include "report/words.h"
#include "check.h"

static const struct {
    const char *input; /* relative to the source tree: a log's path is in its words */
    const char *finding;
    const char *summary;
    const char *remedy;
} cases[] = {
    {"tests/fixtures/snapshots/stale_lock.json", "lock_stale",
     "rank 0 (pid 8080) waits on the stale build lock /w/build/lock (created by rank 1 (pid 4000), which is gone); no process holds or has it open, so nothing will release it",
     "stop the ranks that wait on it first (a waiter that wakes up loads a half-built module), and check that no build runs on any node that shares this directory (processes left from a killed builder included); then delete the lock and relaunch: rm /w/build/lock"},
    {"tests/fixtures/evidence/gloo_computing.json", "progress",
     "the processes are making progress (CPU time grows): rank 0 (pid 26766) python3, rank 1 (pid 26767) python3",
     NULL},
    {"tests/fixtures/evidence/gloo_collective_skip.json", "collective_elsewhere",
     "ranks 0-1 wait in all_reduce; rank 2 (pid 26745) is in skip_and_sleep (hangs.py:149) (process groups not read: every collective taken on the world group)",
     "look at the culprit ranks where they are: a skipped or reordered collective, an uneven loop, or a rank stopped or stuck elsewhere"},
    {"tests/fixtures/snapshots/megatron_tp_dp_world.json", "graph",
     "rank 5 (TP 1 of TP group 4-5, PP stage 1, DP 0) never joined the all_gather of TP group 4-5: it sleeps in skip_and_sleep (pgroups.py:40); rank 4 waits for it in all_gather on TP group 4-5; ranks 6-7 wait in all_reduce on DP groups 4,6 and 5,7; ranks 0-3 wait in barrier on the world group",
     "look at the culprit ranks where they are: a skipped or reordered collective of their group, an uneven loop, or a rank stopped or stuck elsewhere"},
    {"tests/fixtures/logs/megatron_sizes_mismatch.log", "log_parallel_sizes",
     "configuration error: TPxPPxDP != world size: tensor-parallel 2 x pipeline-parallel 3 x context-parallel 1 x data-parallel 2 = 12, but the world size is 8 (tests/fixtures/logs/megatron_sizes_mismatch.log:2)",
     "launch TPxPPxCPxDP = 12 processes, or choose parallel sizes whose product is the world size 8"}
};

/* Equal strings, or both NULL. */
static int eq(const char *a, const char *b)
{
    return a && b ? !strcmp(a, b) : a == b;
}

static const char *shown(const char *s)
{
    return s ? s : "(none)";
}

int main(void)
{
    hdx_log_patterns *ps = NULL;
    char *err = NULL;
    CHECK(chdir(HDX_SOURCE_DIR) == 0);
    CHECK(hdx_log_patterns_load_file("inspector/formats/patterns/logs.json", &ps, &err) == 0, "%s", err);
    for (size_t i = 0; ps && i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = cases[i].input, *dot = strrchr(path, '.');
        hdx_evidence *ev = hdx_evidence_new();
        char *summary = NULL, *remedy = NULL;
        hdx_verdict v = {0};
        int rc = !strcmp(dot, ".log") ? hdx_log_load(ps, path, ev, &err) : hdx_snapshot_load(path, ev, &err);
        CHECK(ev && rc == 0, "%s: %s", path, err ? err : "?");
        CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
        CHECK(eq(cases[i].finding, hdx_finding_name(v.finding)), "%s: finding %s", path, hdx_finding_name(v.finding));
        CHECK(hdx_verdict_words(ev, &v, &summary, &remedy) == 0);
        CHECK(eq(cases[i].summary, summary), "%s: summary\n  want: %s\n  got:  %s", path, shown(cases[i].summary),
              shown(summary));
        CHECK(eq(cases[i].remedy, remedy), "%s: remedy\n  want: %s\n  got:  %s", path, shown(cases[i].remedy),
              shown(remedy));
        free(summary);
        free(remedy);
        free(err);
        err = NULL;
        hdx_verdict_clear(&v);
        hdx_evidence_free(ev);
    }
    hdx_log_patterns_free(ps);

    /* Every finding, with no facts and an empty evidence (a verdict read against other
     * evidence): still a sentence, and never a NULL printed into it. */
    hdx_evidence *empty = hdx_evidence_new();
    int n = 0;
    for (int f = 1; strcmp(hdx_finding_name((enum hdx_finding)f), "none"); f++, n++) {
        hdx_verdict v = {.cls = HDX_CLASS_UNKNOWN, .finding = (enum hdx_finding)f};
        char *summary = NULL, *remedy = NULL;
        CHECK(hdx_verdict_words(empty, &v, &summary, &remedy) == 0);
        CHECK(summary && !strstr(summary, "(null)") && (!remedy || !strstr(remedy, "(null)")), "%s: %s / %s",
              hdx_finding_name(v.finding), shown(summary), shown(remedy));
        free(summary);
        free(remedy);
    }
    CHECK(n > 40, "only %d findings named", n);
    hdx_evidence_free(empty);
    if (failures)
        return 1;
    printf("words: %zu recorded inputs worded as expected; %d findings worded without facts\n",
           sizeof cases / sizeof cases[0], n);
    return 0;
}
