/*
 * hdx_classify is a pure function of the evidence (docs/design.md "Data flow"): on every
 * recorded evidence of tests/fixtures (evidence/, nccl/) and on job logs that make the
 * classifier add notes (tests/fixtures/logs), labelled first by hdx_evidence_label, the
 * evidence reads the same before and after hdx_classify (its snapshot JSON, each thread's
 * wait, each process's progressing, is_rank_process and set_aside, the notes), a second
 * call gives the same verdict, and the classifier's notes are the verdict's: the report
 * prints them after the evidence's, once.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify.h"
#include "formats/logs.h"
#include "formats/snapshot.h"
#include "model/evidence.h"
#include "report/report.h"
#include "report/words.h"
#include "check.h"

/* What of ev the classifier must leave as it is, as one heap string. */
static char *fingerprint(const hdx_evidence *ev)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        return NULL;
    cJSON *j = hdx_snapshot_json(ev);
    char *js = j ? cJSON_PrintUnformatted(j) : NULL;
    fprintf(f, "%s\n", js ? js : "(no json)");
    free(js);
    cJSON_Delete(j);
    for (size_t i = 0; i < ev->n_procs; i++) {
        const hdx_process *p = &ev->procs[i];
        fprintf(f, "pid %d progressing %d rank_process %d set_aside %d\n", p->pid, p->progressing,
                p->is_rank_process, p->set_aside);
        for (size_t k = 0; k < p->n_threads; k++) {
            const hdx_thread *t = &p->threads[k];
            fprintf(f, "  tid %d wait %s op %s peer %d frame %ld\n", t->tid, t->wait ? t->wait : "-",
                    t->wait_op ? t->wait_op : "-", t->wait_peer, t->wait_frame);
        }
    }
    for (size_t i = 0; i < ev->n_locks; i++)
        fprintf(f, "lock %s state %d holder %d\n", ev->locks[i].path, (int)ev->locks[i].state,
                ev->locks[i].holder_pid);
    fprintf(f, "%zu notes\n", ev->n_notes);
    for (size_t i = 0; i < ev->n_notes; i++)
        fprintf(f, "note %s\n", ev->notes[i]);
    fclose(f);
    return s;
}

/* Where a and b begin to differ: a from there, with up to 80 bytes of its line before. */
static const char *first_change(const char *a, const char *b)
{
    size_t i = 0;
    while (a[i] && a[i] == b[i])
        i++;
    for (int back = 0; i > 0 && a[i - 1] != '\n' && back < 80; back++)
        i--;
    return a + i;
}

/* How many of the report's JSON notes are s. */
static int report_says(const hdx_evidence *ev, const hdx_verdict *v, const char *s)
{
    cJSON *r = hdx_report_json(ev, v);
    int n = 0;
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItem(r, "notes"))
        n += cJSON_IsString(note) && !strcmp(note->valuestring, s);
    cJSON_Delete(r);
    return n;
}

/* Do a and b carry the same facts, in the same order? */
static int same_facts(const hdx_verdict *a, const hdx_verdict *b)
{
    if (a->n_facts != b->n_facts)
        return 0;
    for (size_t i = 0; i < a->n_facts; i++) {
        const hdx_fact *x = &a->facts[i], *y = &b->facts[i];
        if (strcmp(x->name, y->name) || x->kind != y->kind || x->num != y->num ||
            (x->kind == HDX_FACT_TEXT && strcmp(x->text, y->text)) || x->n_ints != y->n_ints ||
            (x->n_ints && memcmp(x->ints, y->ints, x->n_ints * sizeof *x->ints)))
            return 0;
    }
    return 1;
}

/* Do a and b read the same in the report (report/words.h)? */
static int same_words(const hdx_evidence *ev, const hdx_verdict *a, const hdx_verdict *b)
{
    char *sa = NULL, *ra = NULL, *sb = NULL, *rb = NULL;
    int same = !hdx_verdict_words(ev, a, &sa, &ra) && !hdx_verdict_words(ev, b, &sb, &rb) && sa && sb &&
               !strcmp(sa, sb) && (ra && rb ? !strcmp(ra, rb) : ra == rb);
    free(sa);
    free(ra);
    free(sb);
    free(rb);
    return same;
}

/* Label ev, then classify it twice: ev the same after each call, the same verdict. */
static void check_pure(const char *name, hdx_evidence *ev, hdx_verdict *v)
{
    CHECK(hdx_evidence_label(ev) == 0, "%s: label", name);
    char *before = fingerprint(ev);
    CHECK(hdx_classify(ev, v) == 0, "%s: classify", name);
    char *after = fingerprint(ev);
    CHECK(before && after && !strcmp(before, after), "%s: the evidence changed in hdx_classify, at: %.160s", name,
          before && after ? first_change(before, after) : "?");
    hdx_verdict again = {0};
    CHECK(hdx_classify(ev, &again) == 0, "%s: classify again", name);
    char *third = fingerprint(ev);
    CHECK(third && after && !strcmp(third, after), "%s: the evidence changed in the second hdx_classify", name);
    CHECK(again.cls == v->cls && again.n_notes == v->n_notes, "%s: another verdict the second time", name);
    CHECK(again.finding == v->finding && same_facts(v, &again), "%s: another finding or facts", name);
    CHECK(same_words(ev, v, &again), "%s: another summary", name);
    for (size_t i = 0; i < v->n_notes && i < again.n_notes; i++)
        CHECK(!strcmp(v->notes[i], again.notes[i]), "%s: another note %zu", name, i);
    hdx_verdict_clear(&again);
    free(before);
    free(after);
    free(third);
}

static void recorded(const char *dir)
{
    DIR *d = opendir(dir);
    CHECK(d, "cannot open %s", dir);
    int seen = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") || !strcmp(e->d_name, "expect.json"))
            continue;
        char path[4096], *err = NULL;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        hdx_evidence *ev = hdx_evidence_new();
        int r = hdx_snapshot_load(path, ev, &err);
        CHECK(r == 0, "%s: %s", path, err ? err : "?");
        if (r == 0) {
            hdx_verdict v = {0};
            check_pure(path, ev, &v);
            hdx_verdict_clear(&v);
            seen++;
        }
        free(err);
        hdx_evidence_free(ev);
    }
    if (d)
        closedir(d);
    CHECK(seen > 0, "no fixture in %s", dir);
}

/* Logs without stacks that the classifier answers with a note (the weak Megatron line, a
 * culprit's last log line): the note is the verdict's, not the evidence's, and the report prints it once, also when the
 * evidence says it already (a report analyzed again). */
static void log_notes(const char *src)
{
    char path[4096], *err = NULL;
    snprintf(path, sizeof path, "%s/inspector/formats/patterns/logs.json", src);
    hdx_log_patterns *ps = NULL;
    CHECK(hdx_log_patterns_load_file(path, &ps, &err) == 0, "%s: %s", path, err ? err : "?");
    free(err);
    err = NULL;
    static const struct {
        const char *log, *note;
    } cases[] = {
        {"weak_megatron_only.log", "last logged Megatron's \"using torch.float16 for parameters ...\""},
        {"megatron_lock_behind_barrier.log", "rank 0's last log line"},
    };
    for (size_t i = 0; ps && i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/tests/fixtures/logs/%s", src, cases[i].log);
        hdx_evidence *ev = hdx_evidence_new();
        CHECK(hdx_log_load(ps, path, ev, &err) == 0, "%s: %s", path, err ? err : "?");
        free(err);
        err = NULL;
        size_t ev_notes = ev->n_notes;
        hdx_verdict v = {0};
        check_pure(path, ev, &v);
        CHECK(ev->n_notes == ev_notes, "%s: notes added to the evidence", path);
        CHECK(v.n_notes >= 1, "%s: the classifier added no note", path);
        int said = 0;
        for (size_t k = 0; k < v.n_notes; k++) {
            said |= strstr(v.notes[k], cases[i].note) != NULL;
            CHECK(report_says(ev, &v, v.notes[k]) == 1, "%s: the report says note %zu not once", path, k);
        }
        CHECK(said, "%s: no note with \"%s\"", path, cases[i].note);
        if (v.n_notes) {
            hdx_evidence_note(ev, "%s", v.notes[0]); /* as a report read back brings it */
            CHECK(report_says(ev, &v, v.notes[0]) == 1, "%s: a note the evidence has is said twice", path);
        }
        hdx_verdict_clear(&v);
        hdx_evidence_free(ev);
    }
    hdx_log_patterns_free(ps);
}

/* Stacks that decide, and a job log that would decide too: the verdict keeps what the logs alone
 * decide (v.logs_alone), and the report words it as a note, once, also for a report analyzed again. */
static void logs_alone(const char *src)
{
    char path[4096], *err = NULL;
    snprintf(path, sizeof path, "%s/inspector/formats/patterns/logs.json", src);
    hdx_log_patterns *ps = NULL;
    CHECK(hdx_log_patterns_load_file(path, &ps, &err) == 0, "%s: %s", path, err ? err : "?");
    hdx_evidence *ev = hdx_evidence_new();
    snprintf(path, sizeof path, "%s/tests/fixtures/nccl/nccl_allreduce_rank_missing.json", src);
    CHECK(hdx_snapshot_load(path, ev, &err) == 0, "%s: %s", path, err ? err : "?");
    snprintf(path, sizeof path, "%s/tests/fixtures/logs/nccl_rank_never_enqueued.log", src);
    CHECK(ps && hdx_log_load(ps, path, ev, &err) == 0, "%s: %s", path, err ? err : "?");
    hdx_verdict v = {0};
    check_pure("stacks and a log", ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.finding != HDX_FIND_LOG_SEQ_BEHIND, "the stacks did not decide");
    CHECK(v.logs_alone && v.logs_alone->finding == HDX_FIND_LOG_SEQ_BEHIND &&
              v.logs_alone->n_culprit_ranks == 1 && v.logs_alone->culprit_ranks[0] == 2,
          "no verdict of the logs alone");
    char *summary = NULL, *remedy = NULL, note[4096] = "";
    CHECK(v.logs_alone && !hdx_verdict_words(ev, v.logs_alone, &summary, &remedy) && summary, "logs alone: words");
    snprintf(note, sizeof note, "the job logs alone would say collective_wait: %s", summary ? summary : "?");
    CHECK(summary && strstr(summary, "rank 2 never joined ALLREDUCE SeqNum=812"), "logs alone: %s", summary);
    CHECK(report_says(ev, &v, note) == 1, "the report says the logs-alone note not once");
    hdx_evidence_note(ev, "%s", note); /* as a report read back brings it */
    CHECK(report_says(ev, &v, note) == 1, "a logs-alone note the evidence has is said twice");
    free(summary);
    free(remedy);
    free(err);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
    hdx_log_patterns_free(ps);
}

int main(void)
{
    const char *src = getenv("HDX_SOURCE_DIR");
    char dir[4096];
    if (!src)
        src = ".";
    snprintf(dir, sizeof dir, "%s/tests/fixtures/evidence", src);
    recorded(dir);
    snprintf(dir, sizeof dir, "%s/tests/fixtures/nccl", src);
    recorded(dir);
    snprintf(dir, sizeof dir, "%s/tests/fixtures/nccl-h200", src);
    recorded(dir);
    log_notes(src);
    logs_alone(src);
    return failures ? 1 : 0;
}
