/* Every log pattern matches its own example; the literal prefilter answers as the regex
 * does; a user pattern with a class decides it; a broken user pattern file is refused by name;
 * a file without launcher prefixes takes its rank from its own lines, and rank_from says how
 * (docs/design.md "Job logs"). */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "classify/classify.h"
#include "model/evidence.h"
#include "formats/logs.h"
#include "report/words.h"
#include "check.h"

/* hdx_log_pattern_matches answers as regexec does for every pattern of ps, on every example
 * and on each example with one character cut out (a needle taken too long fails here). */
static void check_prefilter(const hdx_log_patterns *ps)
{
    size_t n = hdx_log_patterns_count(ps);
    for (size_t i = 0; i < n; i++) {
        regex_t re;
        CHECK(regcomp(&re, hdx_log_pattern_regex(ps, i), REG_EXTENDED | REG_NOSUB) == 0, "regcomp %s",
              hdx_log_pattern_name(ps, i));
        for (size_t j = 0; j < n; j++) {
            const char *ex = hdx_log_pattern_example(ps, j);
            size_t len = ex ? strlen(ex) : 0;
            char cut[4096];
            for (size_t k = 0; ex && k <= len && len < sizeof cut; k++) {
                if (k < len && i != j)
                    continue; /* the cuts of a pattern's own example only */
                snprintf(cut, sizeof cut, "%.*s%s", (int)k, ex, k < len ? ex + k + 1 : "");
                int want = regexec(&re, cut, 0, NULL, 0) == 0;
                CHECK(hdx_log_pattern_matches(ps, i, cut) == want, "pattern %s (%s) on \"%s\": prefilter says %d, "
                      "the regex %d", hdx_log_pattern_name(ps, i), hdx_log_pattern_regex(ps, i), cut, !want, want);
            }
        }
        regfree(&re);
    }
}

/* The rank and rank_from that the log `text`, written to a file named `name` in a temporary
 * directory, gives its only rank summary: *rank HDX_UNKNOWN when it gives none; from copied
 * into from_buf. */
static void rank_of_text(const hdx_log_patterns *ps, const char *name, const char *text, int *rank, char *from_buf,
                         size_t size)
{
    char dir[] = "/tmp/hdx-test-rank-XXXXXX", path[4200], *err = NULL;
    *rank = HDX_UNKNOWN;
    from_buf[0] = 0;
    if (!mkdtemp(dir))
        return;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    hdx_evidence *ev = hdx_evidence_new();
    if (ev && hdx_log_load(ps, path, ev, &err) == 0 && ev->n_log_ranks == 1) {
        *rank = ev->log_ranks[0].rank;
        snprintf(from_buf, size, "%s", ev->log_ranks[0].rank_from ? ev->log_ranks[0].rank_from : "");
    }
    hdx_evidence_free(ev);
    free(err);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const char *src = getenv("HDX_SOURCE_DIR"), *build = getenv("HDX_BUILD_DIR");
    char path[4096], *err = NULL;
    hdx_log_patterns *ps = NULL;
    snprintf(path, sizeof path, "%s/inspector/formats/patterns/logs.json", src ? src : ".");
    int r = hdx_log_patterns_load_file(path, &ps, &err);
    CHECK(r == 0, "load %s: %s", path, err ? err : "?");
    CHECK(hdx_log_patterns_count(ps) >= 20, "only %zu patterns", hdx_log_patterns_count(ps));
    for (size_t i = 0; i < hdx_log_patterns_count(ps); i++) {
        const char *ex = hdx_log_pattern_example(ps, i);
        CHECK(ex, "pattern %s has no example", hdx_log_pattern_name(ps, i));
        CHECK(ex && hdx_log_pattern_matches(ps, i, ex), "pattern %s does not match its example: %s",
              hdx_log_pattern_name(ps, i), ex ? ex : "");
    }
    check_prefilter(ps);


    /* A file's rank from its own lines: printed, or node rank x nproc + local rank */
    static const struct {
        const char *name, *text, *from;
        int rank;
    } own[] = {
        {"out.log", "RANK=3\nstep 1\n", "line", 3},
        {"out.log", "environ({'LOCAL_RANK': '1', 'RANK': '5', 'GROUP_RANK': '1', 'LOCAL_WORLD_SIZE': '4'})\nstep 1\n",
         "line", 5},
        {"out.log", "GROUP_RANK=1\nLOCAL_RANK=2\nLOCAL_WORLD_SIZE=4\nstep 1\n", "node rank x nproc + local rank", 6},
        {"out.log", "SLURM_NODEID=1\nSLURM_LOCALID=3\nSLURM_NTASKS_PER_NODE=4\nstep 1\n",
         "Slurm node id x tasks per node + local id", 7},
        /* torchrun under srun, one task per node: torchrun's variables, not the task's */
        {"out.log", "SLURM_PROCID=1\nNODE_RANK=1\nLOCAL_RANK=0\nLOCAL_WORLD_SIZE=8\nstep 1\n",
         "node rank x nproc + local rank", 8},
        {"out.log", "SLURM_PROCID=2\nstep 1\n", "line", 2},
        {"out.log", "I0527 15:16:51.665375 58626 ProcessGroupNCCL.cpp:869] [PG 0 Rank 2] ProcessGroupNCCL "
                    "initialization options: size: 8, global rank: 2, TIMEOUT(ms): 600000\n", "line", 2},
        {"rank1.log", "RANK=2\nstep 1\n", "line; its file name says rank 1", 2},
        {"rank1.log", "RANK=1\nstep 1\n", "line", 1},
        {"rank1.log", "step 1\n", "file name", 1},
        /* two ranks printed in one file: neither is taken, the name's rank is */
        {"rank4.log", "RANK=0\nRANK=1\nstep 1\n", "file name", 4},
        /* a local rank alone is no global rank */
        {"rank4.log", "LOCAL_RANK=0\nstep 1\n", "file name", 4},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        int rank;
        char from[200];
        rank_of_text(ps, own[i].name, own[i].text, &rank, from, sizeof from);
        CHECK(rank == own[i].rank && !strcmp(from, own[i].from), "%s with %s: rank %d from \"%s\", expected %d from "
              "\"%s\"", own[i].name, own[i].text, rank, from, own[i].rank, own[i].from);
    }
    hdx_log_patterns_free(ps);

    /* The prefilter on regexes that try its parser: repeats, brackets, groups, alternatives,
     * glibc's anchors. */
    char tricky[] = "/tmp/hdx-test-tricky-XXXXXX";
    FILE *t = fdopen(mkstemp(tricky), "w");
    static const char *const cases[][2] = {
        {"ab+cdef", "abbbcdef"},           {"x?yzw|q*rst", "rst"},          {"[]ab]cdef", "]cdef"},
        {"[[:digit:]]+ items", "12 items"}, {"ab{0,2}cde", "acde"},          {"\\\\.{3,} done", "... done"},
        {"(foo|bar)baz(qux)?end", "barbazend"}, {"^ *Trace\\\\(x\\\\)", "  Trace(x)"},
        {"\\\\<word\\\\> end", "a word end"}, {"[^]x]yz{2}q", "ayzzq"}, {"a\\\\|bcd", "a|bcd"},
        {"(a(b|c)d)+efg|hij", "acdabdefg"}};
    fputs("{\"schema\": \"hangdx.patterns/1\", \"patterns\": [", t);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fprintf(t, "%s{\"name\": \"t%zu\", \"regex\": \"%s\", \"proves\": \"x\", \"strength\": \"weak\", "
                "\"example\": \"%s\"}", i ? ", " : "", i, cases[i][0], cases[i][1]);
    fputs("]}", t);
    fclose(t);
    ps = NULL;
    r = hdx_log_patterns_load_file(tricky, &ps, &err);
    CHECK(r == 0, "load %s: %s", tricky, err ? err : "?");
    for (size_t i = 0; ps && i < hdx_log_patterns_count(ps); i++)
        CHECK(hdx_log_pattern_matches(ps, i, hdx_log_pattern_example(ps, i)), "tricky %s (%s) misses its example %s",
              hdx_log_pattern_name(ps, i), hdx_log_pattern_regex(ps, i), hdx_log_pattern_example(ps, i));
    if (ps)
        check_prefilter(ps);
    hdx_log_patterns_free(ps);
    unlink(tricky);
    free(err);
    err = NULL;

    /* The copy beside the binary is what hangdx finds first. */
    char exe[4096];
    snprintf(exe, sizeof exe, "%s/bin/hangdx", build ? build : ".");
    ps = NULL;
    unsetenv(HDX_PATTERNS_ENV);
    r = hdx_log_patterns_load_default(exe, &ps, &err);
    CHECK(r == 0 && hdx_log_patterns_count(ps) >= 20, "default patterns beside %s: %s", exe, err ? err : "?");
    size_t builtin = hdx_log_patterns_count(ps);
    hdx_log_patterns_free(ps);
    free(err);
    err = NULL;

    /* A user's file adds patterns; a bad regex is refused with the pattern's name. */
    char user[] = "/tmp/hdx-test-patterns-XXXXXX";
    int fd = mkstemp(user);
    FILE *f = fdopen(fd, "w");
    fputs("{\"schema\": \"hangdx.patterns/1\", \"patterns\": [{\"name\": \"my_oom\", \"regex\": \"CUDA out of "
          "memory\", \"proves\": \"a rank ran out of GPU memory\", \"strength\": \"strong\", \"class\": "
          "\"collective_wait\", \"fields\": {}, \"example\": \"torch.cuda.OutOfMemoryError: CUDA out of memory.\"}]}",
          f);
    fclose(f);
    setenv(HDX_PATTERNS_ENV, user, 1);
    ps = NULL;
    r = hdx_log_patterns_load_default(exe, &ps, &err);
    CHECK(r == 0 && hdx_log_patterns_count(ps) == builtin + 1, "user patterns: %s", err ? err : "?");
    /* ... and its class decides a log that no built-in rule does: finding log_user_pattern, its line */
    char log[] = "/tmp/hdx-test-log-XXXXXX";
    f = fdopen(mkstemp(log), "w");
    fputs("[rank0]: step 4\n[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory.\n", f);
    fclose(f);
    hdx_evidence *ev = hdx_evidence_new();
    hdx_verdict v = {0};
    char *summary = NULL, *remedy = NULL, want[4200];
    CHECK(ps && hdx_log_load(ps, log, ev, &err) == 0 && hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0,
          "classify %s: %s", log, err ? err : "?");
    const char *name = hdx_verdict_text(&v, "pattern"), *file = hdx_verdict_text(&v, "file");
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.finding == HDX_FIND_LOG_USER_PATTERN && v.n_culprit_ranks == 1 &&
              v.culprit_ranks[0] == 1 && name && !strcmp(name, "my_oom") && file && !strcmp(file, log) &&
              hdx_verdict_num(&v, "line", 0) == 2,
          "user pattern: %s, finding %s", hdx_class_name(v.cls), hdx_finding_name(v.finding));
    snprintf(want, sizeof want, "the pattern my_oom (a rank ran out of GPU memory) matched %s:2: "
             "\"torch.cuda.OutOfMemoryError: CUDA out of memory.\"", log);
    CHECK(!hdx_verdict_words(ev, &v, &summary, &remedy) && summary && !strcmp(summary, want) && !remedy,
          "user pattern words: %s", summary ? summary : "(none)");
    free(summary);
    free(remedy);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
    unlink(log);
    hdx_log_patterns_free(ps);
    free(err);
    err = NULL;
    f = fopen(user, "w");
    fputs("{\"schema\": \"hangdx.patterns/1\", \"patterns\": [{\"name\": \"broken\", \"regex\": \"(unclosed\", "
          "\"proves\": \"x\", \"strength\": \"weak\"}]}",
          f);
    fclose(f);
    ps = NULL;
    r = hdx_log_patterns_load_default(exe, &ps, &err);
    CHECK(r < 0 && err && strstr(err, "broken"), "a bad regex must be refused by name: %s", err ? err : "(none)");
    hdx_log_patterns_free(ps);
    free(err);
    unlink(user);
    if (!failures)
        printf("ok: every pattern matches its example\n");
    return failures ? 1 : 0;
}
