/*
 * The verdict's building blocks that every rule file shares (classify_impl.h): class
 * names, clearing a verdict, naming a process or a thread's place for a person, adding
 * culprits and notes. Pure.
 */
#include "classify/classify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "classify/classify_impl.h"
#include "classify/waitsfor.h"
#include "model/util.h"

const char *hdx_class_name(enum hdx_class c)
{
    static const char *const names[] = {
        "build_lock",      "compile_stall", "collective_wait", "p2p_mismatch",
        "rendezvous_wait", "config_error",  "not_hung",        "unknown",
    };
    return (unsigned)c <= HDX_CLASS_UNKNOWN ? names[c] : "unknown";
}

const char *hdx_finding_name(enum hdx_finding f)
{
    static const char *const names[] = {
        [HDX_FIND_NONE] = "none",
        [HDX_FIND_FROZEN] = "frozen",
        [HDX_FIND_LOCK_STALE] = "lock_stale",
        [HDX_FIND_LOCK_STALE_UNCHECKED] = "lock_stale_unchecked",
        [HDX_FIND_LOCK_HOLDER_UNREAD] = "lock_holder_unread",
        [HDX_FIND_BUILD_STUCK] = "build_stuck",
        [HDX_FIND_BUILD_RUNNING] = "build_running",
        [HDX_FIND_LOCK_HOLDER_STUCK] = "lock_holder_stuck",
        [HDX_FIND_PROGRESS] = "progress",
        [HDX_FIND_NO_PROCESS] = "no_process",
        [HDX_FIND_ALL_EXITED] = "all_exited",
        [HDX_FIND_NO_STACKS] = "no_stacks",
        [HDX_FIND_NO_RULE] = "no_rule",
        [HDX_FIND_RENDEZVOUS] = "rendezvous",
        [HDX_FIND_P2P] = "p2p",
        [HDX_FIND_COLLECTIVE_ELSEWHERE] = "collective_elsewhere",
        [HDX_FIND_COLLECTIVE_MISSING] = "collective_missing",
        [HDX_FIND_COLLECTIVE_GPU] = "collective_gpu",
        [HDX_FIND_COLLECTIVE_STUCK] = "collective_stuck",
        [HDX_FIND_COLLECTIVE_UNSEEN] = "collective_unseen",
        [HDX_FIND_GRAPH] = "graph",
        [HDX_FIND_LOG_CONFIG_MISMATCH] = "log_config_mismatch",
        [HDX_FIND_LOG_CONFIG_WORLD_NOT_DIVISIBLE] = "log_config_world_not_divisible",
        [HDX_FIND_LOG_CONFIG_DUPLICATE_GPU] = "log_config_duplicate_gpu",
        [HDX_FIND_LOG_PARALLEL_SIZES] = "log_parallel_sizes",
        [HDX_FIND_LOG_SEQUENCE_PARALLEL] = "log_sequence_parallel",
        [HDX_FIND_LOG_PARALLEL_ARGS] = "log_parallel_args",
        [HDX_FIND_LOG_BUILD_LOCK] = "log_build_lock",
        [HDX_FIND_LOG_BUILD_UNFINISHED] = "log_build_unfinished",
        [HDX_FIND_LOG_FILE_LOCK] = "log_file_lock",
        [HDX_FIND_LOG_STORE_BARRIER] = "log_store_barrier",
        [HDX_FIND_LOG_STORE_CLIENTS] = "log_store_clients",
        [HDX_FIND_LOG_SEQ_BEHIND] = "log_seq_behind",
        [HDX_FIND_LOG_DESYNC] = "log_desync",
        [HDX_FIND_LOG_SEQ_SILENT] = "log_seq_silent",
        [HDX_FIND_LOG_SEQ_GPU] = "log_seq_gpu",
        [HDX_FIND_LOG_SEQ_UNEXPLAINED] = "log_seq_unexplained",
        [HDX_FIND_LOG_DETAIL_MISMATCH] = "log_detail_mismatch",
        [HDX_FIND_LOG_MONITORED_BARRIER] = "log_monitored_barrier",
        [HDX_FIND_LOG_GLOO_COLLECTIVE] = "log_gloo_collective",
        [HDX_FIND_LOG_GLOO_CYCLE] = "log_gloo_cycle",
        [HDX_FIND_LOG_GLOO_UNMATCHED] = "log_gloo_unmatched",
        [HDX_FIND_LOG_GLOO_NO_PEERS] = "log_gloo_no_peers",
        [HDX_FIND_LOG_USER_PATTERN] = "log_user_pattern",
        [HDX_FIND_LOG_EXITS] = "log_exits",
        [HDX_FIND_LOG_STARTUP_PHASE] = "log_startup_phase",
        [HDX_FIND_LOG_UNDECIDED] = "log_undecided",
    };
    return (size_t)f < sizeof names / sizeof names[0] && names[f] ? names[f] : "none";
}

/* The slot of fact name in v, made empty when it is new; NULL on ENOMEM. */
static hdx_fact *fact_slot(hdx_verdict *v, const char *name)
{
    for (size_t i = 0; i < v->n_facts; i++)
        if (!strcmp(v->facts[i].name, name)) {
            free(v->facts[i].text);
            free(v->facts[i].ints);
            v->facts[i] = (hdx_fact){.name = name};
            return &v->facts[i];
        }
    hdx_fact *f = hdx_append((void **)&v->facts, &v->n_facts, sizeof *f);
    if (f)
        f->name = name;
    return f;
}

int hdx_verdict_set_num(hdx_verdict *v, const char *name, long long num)
{
    hdx_fact *f = fact_slot(v, name);
    if (!f)
        return -ENOMEM;
    f->kind = HDX_FACT_NUM;
    f->num = num;
    return 0;
}

int hdx_verdict_set_text(hdx_verdict *v, const char *name, const char *text)
{
    if (!text)
        return 0;
    char *copy = strdup(text);
    hdx_fact *f = copy ? fact_slot(v, name) : NULL;
    if (!f) {
        free(copy);
        return -ENOMEM;
    }
    f->kind = HDX_FACT_TEXT;
    f->text = copy;
    return 0;
}

int hdx_verdict_set_ints(hdx_verdict *v, const char *name, const int *ints, size_t n)
{
    int *copy = malloc((n ? n : 1) * sizeof *copy);
    hdx_fact *f = copy ? fact_slot(v, name) : NULL;
    if (!f) {
        free(copy);
        return -ENOMEM;
    }
    if (n)
        memcpy(copy, ints, n * sizeof *copy);
    f->kind = HDX_FACT_INTS;
    f->ints = copy;
    f->n_ints = n;
    return 0;
}

const hdx_fact *hdx_verdict_fact(const hdx_verdict *v, const char *name)
{
    for (size_t i = 0; v && i < v->n_facts; i++)
        if (!strcmp(v->facts[i].name, name))
            return &v->facts[i];
    return NULL;
}

long long hdx_verdict_num(const hdx_verdict *v, const char *name, long long dflt)
{
    const hdx_fact *f = hdx_verdict_fact(v, name);
    return f && f->kind == HDX_FACT_NUM ? f->num : dflt;
}

const char *hdx_verdict_text(const hdx_verdict *v, const char *name)
{
    const hdx_fact *f = hdx_verdict_fact(v, name);
    return f && f->kind == HDX_FACT_TEXT ? f->text : NULL;
}

int hdx_cls_add_int(int **arr, size_t *n, int v)
{
    for (size_t i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return 0;
    return hdx_cls_append_int(arr, n, v);
}

int hdx_cls_append_int(int **arr, size_t *n, int v)
{
    int *slot = hdx_append((void **)arr, n, sizeof *slot);
    if (!slot)
        return -ENOMEM;
    *slot = v;
    return 0;
}

int hdx_cls_add_pid(hdx_verdict *v, int pid)
{
    return pid > 0 ? hdx_cls_add_int(&v->culprit_pids, &v->n_culprit_pids, pid) : 0;
}

int hdx_cls_note(hdx_verdict *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = hdx_notes_vadd(&v->notes, &v->n_notes, fmt, ap);
    va_end(ap);
    return r;
}

void hdx_verdict_clear(hdx_verdict *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n_facts; i++) {
        free(v->facts[i].text);
        free(v->facts[i].ints);
    }
    free(v->facts);
    free(v->culprit_ranks);
    free(v->culprit_pids);
    free(v->missing_ranks);
    free(v->group);
    free(v->locks);
    hdx_waitsfor_free(v->graph);
    free(v->graph);
    for (size_t i = 0; i < v->n_notes; i++)
        free(v->notes[i]);
    free(v->notes);
    hdx_verdict_clear(v->logs_alone);
    free(v->logs_alone);
    memset(v, 0, sizeof *v);
}
