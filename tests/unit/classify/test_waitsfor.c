/*
 * The waits-for graph on 3D-parallel evidence: process groups as a rank's
 * torch.distributed holds them, each waiting frame's `group` local naming one,
 * and the verdict's class, culprit ranks and group (docs/design.md "The
 * waits-for graph"). The groups follow Megatron's rank order: TP innermost,
 * then DP, then PP.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "classify/classify.h"
#include "model/evidence.h"
#include "report/report.h"
#include "report/words.h"
#include "classify/waitsfor.h"
#include "check.h"


#define C10D "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"
#define P2P "/w/megatron/core/pipeline_parallel/p2p_communication.py"

static hdx_evidence *job(int world)
{
    hdx_evidence *ev = hdx_evidence_new();
    ev->samples = 2;
    ev->interval_ms = 250;
    ev->build_timeout_s = 1800;
    ev->live = 1;
    int *all = malloc((size_t)world * sizeof *all);
    for (int r = 0; r < world; r++)
        all[r] = r;
    hdx_evidence_add_pgroup(ev, "0", all, (size_t)world, "default_pg", NULL, 1);
    free(all);
    return ev;
}

static void group(hdx_evidence *ev, const char *name, const char *role, const int *ranks, size_t n)
{
    CHECK(hdx_evidence_add_pgroup(ev, name, ranks, n, NULL, role, 0) == 0);
}

/* Megatron's layout: TP groups of consecutive ranks, DP groups across them, PP groups across stages. */
static void megatron(hdx_evidence *ev, int tp, int pp, int dp)
{
    char name[32];
    int ranks[64];
    int id = 1;
    for (int s = 0; s < pp; s++)
        for (int t = 0; t < tp; t++) {
            for (int d = 0; d < dp; d++)
                ranks[d] = s * tp * dp + d * tp + t;
            snprintf(name, sizeof name, "%d", id++);
            group(ev, name, "dp", ranks, (size_t)dp);
        }
    for (int s = 0; s < pp; s++)
        for (int d = 0; d < dp; d++) {
            for (int t = 0; t < tp; t++)
                ranks[t] = s * tp * dp + d * tp + t;
            snprintf(name, sizeof name, "%d", id++);
            group(ev, name, "tp", ranks, (size_t)tp);
        }
    for (int k = 0; k < tp * dp; k++) {
        for (int s = 0; s < pp; s++)
            ranks[s] = s * tp * dp + k;
        snprintf(name, sizeof name, "%d", id++);
        group(ev, name, "pp", ranks, (size_t)pp);
    }
}

/* The name of the group with `role` that holds rank. */
static const char *group_of(const hdx_evidence *ev, const char *role, int rank)
{
    for (size_t i = 0; i < ev->n_pgroups; i++) {
        const hdx_pgroup *g = &ev->pgroups[i];
        for (size_t k = 0; g->role && !strcmp(g->role, role) && k < g->n_ranks; k++)
            if (g->ranks[k] == rank)
                return g->name;
    }
    return NULL;
}

static hdx_local *add_local(hdx_frame *f, const char *name)
{
    f->locals = realloc(f->locals, (f->n_locals + 1) * sizeof *f->locals);
    hdx_local *l = &f->locals[f->n_locals++];
    memset(l, 0, sizeof *l);
    l->name = strdup(name);
    return l;
}

/* A rank whose main thread's innermost Python frame is `function` of `file`. */
static hdx_process *rank(hdx_evidence *ev, int r, int world, const char *function, const char *file)
{
    hdx_process *p = hdx_evidence_add_process(ev);
    p->pid = 1000 + r;
    p->ppid = 1;
    p->host = strdup("node0");
    p->state = 'S';
    p->alive = 1;
    p->window_ms = 250;
    p->cpu_ms_first = p->cpu_ms = 100;
    char v[16];
    snprintf(v, sizeof v, "%d", r);
    hdx_process_set_env(p, "RANK", v);
    snprintf(v, sizeof v, "%d", world);
    hdx_process_set_env(p, "WORLD_SIZE", v);
    hdx_process_set_env(p, "MASTER_PORT", "29500");
    p->cmdline = calloc(2, sizeof *p->cmdline);
    p->cmdline[0] = strdup("/usr/bin/python3");
    p->n_cmdline = 1;
    p->python = strdup("3.11 /usr/bin/python3.11");
    hdx_thread *t = hdx_process_add_thread(p);
    t->tid = p->pid;
    t->state = 'S';
    t->syscall = 202;
    hdx_frame *f = hdx_thread_add_frame(t);
    f->kind = HDX_FRAME_PYTHON;
    f->function = strdup(function);
    f->file = strdup(file);
    f->line = 40;
    return p;
}

/* A rank in collective `op` on group `pg` (NULL: group=None, the default group). */
static hdx_process *in_collective(hdx_evidence *ev, int r, int world, const char *op, const char *pg)
{
    hdx_process *p = rank(ev, r, world, op, C10D);
    hdx_local *l = add_local(&p->threads[0].frames[0], "group");
    l->kind = pg ? HDX_VAL_OTHER : HDX_VAL_NONE;
    if (pg) {
        l->s = strdup("ProcessGroupGloo");
        l->pg = strdup(pg);
    }
    return p;
}

static hdx_process *asleep(hdx_evidence *ev, int r, int world)
{
    hdx_process *p = rank(ev, r, world, "skip_and_sleep", "/t/pgroups.py");
    p->threads[0].syscall = 230; /* clock_nanosleep */
    return p;
}

/* send/recv of distributed_c10d with peer, tag and group. */
static hdx_process *in_p2p(hdx_evidence *ev, int r, int world, const char *op, int peer, int tag, const char *pg)
{
    hdx_process *p = in_collective(ev, r, world, op, pg);
    hdx_frame *f = &p->threads[0].frames[0];
    hdx_local *l = add_local(f, !strcmp(op, "send") ? "dst" : "src");
    l->kind = HDX_VAL_INT;
    l->i = peer;
    l = add_local(f, "tag");
    l->kind = HDX_VAL_INT;
    l->i = tag;
    return p;
}

static int culprits_are(const hdx_verdict *v, const int *want, size_t n)
{
    if (v->n_culprit_ranks != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t k = 0; k < v->n_culprit_ranks; k++)
            found |= v->culprit_ranks[k] == want[i];
        if (!found)
            return 0;
    }
    return 1;
}

/* The summary of v as the report words it (report/words.h): heap, the caller frees. */
static char *words_of(const hdx_evidence *ev, const hdx_verdict *v)
{
    char *summary = NULL, *remedy = NULL;
    CHECK(hdx_verdict_words(ev, v, &summary, &remedy) == 0 && summary);
    free(remedy);
    return summary;
}

static void dump(const char *name, const hdx_evidence *ev, const hdx_verdict *v)
{
    char *summary = words_of(ev, v);
    fprintf(stderr, "%s: %s %s (%d): %s [group %s]\n", name, hdx_class_name(v->cls), hdx_finding_name(v->finding),
            (int)v->confidence, summary ? summary : "", v->group ? v->group : "-");
    free(summary);
}

/* {0,1} and {2,3}: rank 3 never joins its group's all_gather; 0 and 1 wait in the world barrier. */
static void subgroups(void)
{
    hdx_evidence *ev = job(4);
    group(ev, "1", NULL, (int[]){0, 1}, 2);
    group(ev, "2", NULL, (int[]){2, 3}, 2);
    in_collective(ev, 0, 4, "barrier", NULL);
    in_collective(ev, 1, 4, "barrier", NULL);
    in_collective(ev, 2, 4, "all_gather", "2");
    asleep(ev, 3, 4);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.confidence == HDX_CONF_HIGH);
    CHECK(culprits_are(&v, (int[]){3}, 1));
    CHECK(v.group && !strcmp(v.group, "2"));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "rank 3") && strstr(summary, "never joined the all_gather of group 2 (ranks 2-3)"));
    CHECK(strstr(summary, "skip_and_sleep (pgroups.py:40)") && strstr(summary, "ranks 0-1 wait in barrier on the world group"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* TP=2 PP=2 DP=2: rank 5 skips its TP all_gather; 4 waits there, 6 and 7 in their DP
 * all_reduce, 0-3 in the world barrier. */
static void tp_dp_world(void)
{
    hdx_evidence *ev = job(8);
    megatron(ev, 2, 2, 2);
    for (int r = 0; r < 4; r++)
        in_collective(ev, r, 8, "barrier", NULL);
    in_collective(ev, 4, 8, "all_gather", group_of(ev, "tp", 4));
    asleep(ev, 5, 8);
    in_collective(ev, 6, 8, "all_reduce", group_of(ev, "dp", 6));
    in_collective(ev, 7, 8, "all_reduce", group_of(ev, "dp", 7));
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.confidence == HDX_CONF_HIGH);
    CHECK(culprits_are(&v, (int[]){5}, 1));
    CHECK(v.group && !strcmp(v.group, group_of(ev, "tp", 5)));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "rank 5 (TP 1 of TP group 4-5, PP stage 1, DP 0) never joined the all_gather of TP group 4-5: it sleeps"));
    CHECK(strstr(summary, "; rank 4 waits for it in all_gather on TP group 4-5; ranks 6-7 wait in all_reduce on DP groups 4,6 and 5,7; ranks 0-3 wait in barrier on the world group"));
    const hdx_wf_rank *r6 = hdx_waitsfor_rank(v.graph, 6);
    CHECK(r6 && r6->kind == HDX_WF_COLLECTIVE && r6->depth == 2 && !r6->culprit);
    /* the report: the verdict's group, the job's groups, and each rank's waits */
    cJSON *j = hdx_report_json(ev, &v);
    const cJSON *vg = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "verdict"), "group");
    CHECK(vg && !strcmp(cJSON_GetObjectItem(vg, "role")->valuestring, "tp") &&
          cJSON_GetArraySize(cJSON_GetObjectItem(vg, "ranks")) == 2);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "process_groups")) == 1 + 4 + 4 + 4);
    int seen4 = 0, seen5 = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(j, "waits_for"))
    {
        int rank = cJSON_GetObjectItem(w, "rank")->valueint;
        const cJSON *to = cJSON_GetObjectItem(w, "waits_for");
        if (rank == 4)
            seen4 = cJSON_GetArraySize(to) == 1 && cJSON_GetArrayItem(to, 0)->valueint == 5 &&
                    !strcmp(cJSON_GetObjectItem(w, "kind")->valuestring, "collective") &&
                    !strcmp(cJSON_GetObjectItem(w, "op")->valuestring, "all_gather");
        if (rank == 5)
            seen5 = cJSON_IsTrue(cJSON_GetObjectItem(w, "culprit")) &&
                    !strcmp(cJSON_GetObjectItem(w, "state")->valuestring, "asleep");
    }
    CHECK(seen4 && seen5);
    cJSON_Delete(j);
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* TP=2 DP=2: rank 1 skips its TP all_gather and goes on to the world barrier. */
static void peer_moved_on(void)
{
    hdx_evidence *ev = job(4);
    megatron(ev, 2, 1, 2);
    in_collective(ev, 0, 4, "all_gather", group_of(ev, "tp", 0));
    in_collective(ev, 1, 4, "barrier", NULL);
    in_collective(ev, 2, 4, "all_reduce", group_of(ev, "dp", 2));
    in_collective(ev, 3, 4, "barrier", NULL);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.confidence == HDX_CONF_HIGH);
    CHECK(culprits_are(&v, (int[]){1}, 1));
    CHECK(v.group && !strcmp(v.group, group_of(ev, "tp", 0)));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "rank 1 (TP 1 of TP group 0-1, PP stage 0, DP 0) never joined the all_gather of TP group 0-1: it went on to barrier on the world group"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* TP=2 PP=2: rank 0 sleeps before its TP all_gather; stage 1 waits in recv from 0 and 1. */
static void pipeline_behind_tp(void)
{
    hdx_evidence *ev = job(4);
    megatron(ev, 2, 2, 1);
    asleep(ev, 0, 4);
    in_collective(ev, 1, 4, "all_gather", group_of(ev, "tp", 1));
    in_p2p(ev, 2, 4, "recv", 0, 0, group_of(ev, "pp", 2));
    in_p2p(ev, 3, 4, "recv", 1, 0, group_of(ev, "pp", 3));
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT);
    CHECK(culprits_are(&v, (int[]){0}, 1));
    CHECK(v.group && !strcmp(v.group, group_of(ev, "tp", 0)));
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* One TP group in all_gather against broadcast; the rest in the world barrier. */
static void tp_mismatch(void)
{
    hdx_evidence *ev = job(4);
    megatron(ev, 2, 1, 2);
    in_collective(ev, 0, 4, "barrier", NULL);
    in_collective(ev, 1, 4, "barrier", NULL);
    in_collective(ev, 2, 4, "all_gather", group_of(ev, "tp", 2));
    in_collective(ev, 3, 4, "broadcast", group_of(ev, "tp", 3));
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT);
    CHECK(culprits_are(&v, (int[]){2, 3}, 2));
    CHECK(v.group && !strcmp(v.group, group_of(ev, "tp", 2)));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "rank 2 in all_gather, rank 3 in broadcast"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* Both stages of one pipeline group send first; the other pipeline group's DP peers wait. */
static void pp_cycle(void)
{
    hdx_evidence *ev = job(4);
    megatron(ev, 1, 2, 2); /* PP groups {0,2}, {1,3}; DP groups {0,1}, {2,3} */
    in_p2p(ev, 0, 4, "send", 2, 0, group_of(ev, "pp", 0));
    in_p2p(ev, 2, 4, "send", 0, 0, group_of(ev, "pp", 2));
    in_collective(ev, 1, 4, "all_reduce", group_of(ev, "dp", 1));
    in_collective(ev, 3, 4, "all_reduce", group_of(ev, "dp", 3));
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_P2P_MISMATCH);
    CHECK(culprits_are(&v, (int[]){0, 2}, 2));
    CHECK(v.group && !strcmp(v.group, group_of(ev, "pp", 0)));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "cycle"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* send with tag 1 against recv with tag 2: the tags are named. */
static void tag_mismatch(void)
{
    hdx_evidence *ev = job(2);
    in_p2p(ev, 0, 2, "send", 1, 1, NULL);
    in_p2p(ev, 1, 2, "recv", 0, 2, NULL);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_P2P_MISMATCH);
    CHECK(culprits_are(&v, (int[]){0, 1}, 2));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "the tags differ") && strstr(summary, "with tag 1") && strstr(summary, "with tag 2"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* Three ranks, three groups of two, each waiting in a different order: a cycle. */
static void order_cycle(void)
{
    hdx_evidence *ev = job(3);
    group(ev, "1", NULL, (int[]){0, 1}, 2);
    group(ev, "2", NULL, (int[]){1, 2}, 2);
    group(ev, "3", NULL, (int[]){0, 2}, 2);
    in_collective(ev, 0, 3, "all_reduce", "1");
    in_collective(ev, 1, 3, "all_reduce", "2");
    in_collective(ev, 2, 3, "all_reduce", "3");
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && v.confidence == HDX_CONF_HIGH);
    CHECK(culprits_are(&v, (int[]){0, 1, 2}, 3));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "waits-for cycle") && !strstr(summary, "network"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* gather to rank 0: rank 2 skips it and sleeps; rank 1 gave its part and waits in the barrier. */
static void gather_skip(void)
{
    hdx_evidence *ev = job(3);
    in_collective(ev, 0, 3, "gather", NULL);
    in_collective(ev, 1, 3, "barrier", NULL);
    asleep(ev, 2, 3);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT);
    CHECK(culprits_are(&v, (int[]){2}, 1));
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* Rank 1 is gone: the others wait for it in all_reduce, and the text says so. */
static void dead_rank(void)
{
    hdx_evidence *ev = job(3);
    in_collective(ev, 0, 3, "all_reduce", NULL);
    in_collective(ev, 2, 3, "all_reduce", NULL);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT);
    CHECK(culprits_are(&v, (int[]){1}, 1));
    CHECK(v.n_missing_ranks == 1 && v.missing_ranks[0] == 1);
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "rank 1 never joined") && strstr(summary, "no process of it"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* A world of 8: ranks 0, 4-6 in the all_reduce, 1 and 2 asleep, 3 and 7 shown by no process: the
 * call waits for members 1-3 and 7, two ranges; 3 and 7 are nodes of missing ranks of one rank. */
static void absent_ranges(void)
{
    hdx_evidence *ev = job(8);
    for (int r = 0; r < 7; r++)
        if (r == 1 || r == 2)
            asleep(ev, r, 8);
        else if (r != 3)
            in_collective(ev, r, 8, "all_reduce", NULL);
    hdx_waitsfor g;
    CHECK(hdx_evidence_label(ev) == 0 && hdx_waitsfor_build(ev, &g) == 0);
    CHECK(g.n_calls == 1);
    const hdx_wf_call *c = &g.calls[0];
    CHECK(c->n_absent == 2 && c->absent[0].lo == 1 && c->absent[0].hi == 3 && c->absent[1].lo == 7 &&
          c->absent[1].hi == 7);
    CHECK(c->n_absent_ranks == 4 && c->n_in == 4 && c->n_mismatch == 0);
    CHECK(hdx_wf_call_nodes(c) == 4);
    static const int want[] = {1, 2, 3, 7};
    for (size_t k = 0; k < 4 && hdx_wf_call_nodes(c) == 4; k++)
        CHECK(hdx_wf_call_node(&g, c, k)->rank == want[k] && hdx_wf_call_node(&g, c, k)->last == want[k]);
    CHECK(hdx_wf_call_waits_for(c, 3) && hdx_wf_call_waits_for(c, 7) && !hdx_wf_call_waits_for(c, 4) &&
          !hdx_wf_call_waits_for(c, 0) && !hdx_wf_call_waits_for(c, 8));
    CHECK(g.n_ranks == 8 && !hdx_waitsfor_rank(&g, 3)->p && hdx_waitsfor_rank(&g, 3)->state == HDX_WF_MISSING);
    hdx_waitsfor_free(&g);
    hdx_evidence_free(ev);
}

/* Waits of ranks 0-2 in a world that claims 16777215 ranks: the ranks no wait names are one node
 * (3-16777214) and one root, and the call's absent ranks one range. */
static void claimed_world(void)
{
    hdx_evidence *ev = hdx_evidence_new();
    const hdx_wf_wait waits[] = {{2, "ALLREDUCE", HDX_UNKNOWN}, {0, "ALLREDUCE", HDX_UNKNOWN}, {1, "ALLREDUCE", HDX_UNKNOWN}};
    hdx_waitsfor g;
    CHECK(hdx_waitsfor_build_waits(ev, waits, 3, 16777215, NULL, 0, &g) == 0);
    CHECK(g.n_ranks == 4 && g.ranks[3].rank == 3 && g.ranks[3].last == 16777214 && !g.ranks[3].p);
    CHECK(g.n_calls == 1 && g.calls[0].n_absent == 1 && g.calls[0].absent[0].lo == 3 &&
          g.calls[0].absent[0].hi == 16777214 && g.calls[0].n_absent_ranks == 16777212);
    CHECK(hdx_waitsfor_rank(&g, 9999999) == &g.ranks[3] && !hdx_waitsfor_rank(&g, 16777215));
    CHECK(g.n_roots == 1 && g.roots[0].kind == HDX_WF_ROOT_RANK && g.roots[0].n_ranks == 1 &&
          g.roots[0].ranks[0] == 3 && g.ranks[3].state == HDX_WF_MISSING && g.ranks[3].culprit);
    CHECK(g.ranks[0].depth == 1 && g.ranks[0].root == 0);
    hdx_waitsfor_free(&g);
    hdx_evidence_free(ev);
}

/* Rank 0 builds (ninja and a busy compiler under it) while 1-3 wait in the barrier: not hung. */
static void healthy_build(void)
{
    hdx_evidence *ev = job(4);
    hdx_process *p = rank(ev, 0, 4, "_run_ninja_build", "/usr/lib/python3/dist-packages/torch/utils/cpp_extension.py");
    p->threads[0].syscall = 61; /* wait4 */
    for (int r = 1; r < 4; r++)
        in_collective(ev, r, 4, "barrier", NULL);
    hdx_process *ninja = hdx_evidence_add_process(ev);
    ninja->pid = 2000;
    ninja->ppid = 1000;
    ninja->alive = 1;
    ninja->age_s = 30;
    ninja->cmdline = calloc(2, sizeof *ninja->cmdline);
    ninja->cmdline[0] = strdup("ninja");
    ninja->n_cmdline = 1;
    hdx_process *cc = hdx_evidence_add_process(ev);
    cc->pid = 2001;
    cc->ppid = 2000;
    cc->alive = 1;
    cc->age_s = 20;
    cc->window_ms = 250;
    cc->cpu_ms_first = 0;
    cc->cpu_ms = 240;
    cc->cmdline = calloc(2, sizeof *cc->cmdline);
    cc->cmdline[0] = strdup("/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus");
    cc->n_cmdline = 1;
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_NOT_HUNG && v.culprit_working == 1 && v.n_culprit_ranks == 0);
    CHECK(v.finding == HDX_FIND_GRAPH && hdx_verdict_num(&v, "timed_out", -1) == 0);
    char *summary = words_of(ev, &v);
    CHECK(strstr(summary, "a build is running"));
    free(summary);
    hdx_verdict_clear(&v);
    /* past --build-timeout it is a compile_stall, still working: nothing may end it */
    ev->build_timeout_s = 10;
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    CHECK(v.cls == HDX_CLASS_COMPILE_STALL && v.culprit_working == 1 && culprits_are(&v, (int[]){0}, 1));
    CHECK(v.finding == HDX_FIND_GRAPH && hdx_verdict_num(&v, "timed_out", -1) == 1);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
}

/* Megatron's _communicate: stage 0 sends a 4th microbatch; stage 1 took 3 and is in the barrier.
 * As a method (core_v0.14.0 on: P2PCommunicator._communicate), its next_rank and prev_rank
 * locals give the peers. */
static void batched_p2p(void)
{
    for (int method = 0; method < 2; method++) {
    hdx_evidence *ev = job(2);
    megatron(ev, 1, 2, 1);
    hdx_process *p = rank(ev, 0, 2, method ? "P2PCommunicator._communicate" : "_communicate", P2P);
    hdx_frame *f = &p->threads[0].frames[0];
    if (method) {
        hdx_local *nl = add_local(f, "next_rank");
        nl->kind = HDX_VAL_INT;
        nl->i = 1;
        nl = add_local(f, "prev_rank");
        nl->kind = HDX_VAL_INT;
        nl->i = 1;
    }
    hdx_local *l = add_local(f, "tensor_send_next");
    l->kind = HDX_VAL_OTHER;
    l->s = strdup("Tensor");
    l = add_local(f, "tensor_send_prev");
    l->kind = HDX_VAL_NONE;
    l = add_local(f, "recv_prev");
    l->kind = HDX_VAL_BOOL;
    l = add_local(f, "recv_next");
    l->kind = HDX_VAL_BOOL;
    in_collective(ev, 1, 2, "barrier", NULL);
    hdx_verdict v = {0};
    CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
    dump(__func__, ev, &v);
    CHECK(v.cls == HDX_CLASS_P2P_MISMATCH);
    CHECK(culprits_are(&v, (int[]){0, 1}, 2));
    CHECK(v.group && !strcmp(v.group, group_of(ev, "pp", 0)));
    CHECK(v.finding == HDX_FIND_GRAPH);
    char *summary = words_of(ev, &v);
    CHECK(!strstr(summary, "unknown peer"));
    free(summary);
    hdx_verdict_clear(&v);
    hdx_evidence_free(ev);
    }
}

/* A gloo worker thread of each waiting rank ticks 30 ms in the window (a loaded machine):
 * no rank progresses, and the verdict keeps its confidence; the culprit's own thread
 * computing is what makes it "computing". */
static void busy_or_blocked(void)
{
    for (int computing = 0; computing < 2; computing++) {
        hdx_evidence *ev = job(3);
        for (int r = 0; r < 2; r++) {
            hdx_process *p = in_collective(ev, r, 3, "all_reduce", NULL);
            hdx_thread *w = hdx_process_add_thread(p);
            w->tid = p->pid + 100;
            w->state = 'S';
            w->cpu_ms_first = 500;
            w->cpu_ms = 530;
            hdx_frame *f = hdx_thread_add_frame(w);
            f->function = strdup("c10d::ProcessGroupGloo::AsyncWork::execute");
            p->cpu_ms = p->cpu_ms_first + 30;
        }
        hdx_process *c = rank(ev, 2, 3, "matmul_loop", "/t/pgroups.py");
        if (computing) {
            c->threads[0].state = 'R';
            c->threads[0].syscall = HDX_SYSCALL_RUNNING;
            c->threads[0].cpu_ms = c->threads[0].cpu_ms_first + 240;
            c->cpu_ms = c->cpu_ms_first + 240;
        }
        hdx_verdict v = {0};
        CHECK(hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0);
        dump(__func__, ev, &v);
        CHECK(ev->procs[0].progressing == 0 && ev->procs[1].progressing == 0);
        CHECK(ev->procs[2].progressing == computing);
        CHECK(v.cls == HDX_CLASS_COLLECTIVE_WAIT && culprits_are(&v, (int[]){2}, 1));
        CHECK(v.confidence == (computing ? HDX_CONF_MEDIUM : HDX_CONF_HIGH) && v.culprit_working == computing);
        hdx_verdict_clear(&v);
        hdx_evidence_free(ev);
    }
}

int main(void)
{
    busy_or_blocked();
    subgroups();
    tp_dp_world();
    peer_moved_on();
    pipeline_behind_tp();
    tp_mismatch();
    pp_cycle();
    tag_mismatch();
    order_cycle();
    gather_skip();
    dead_rank();
    healthy_build();
    batched_p2p();
    absent_ranges();
    claimed_world();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("waitsfor: every case names its root\n");
    return 0;
}
