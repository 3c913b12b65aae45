/*
 * torch's NCCL Flight Recorder dumps (foreign.h; docs/formats.md "Flight Recorder dumps"):
 * one file per rank, `TORCH_NCCL_DEBUG_INFO_TEMP_FILE` + rank, a pickle (torch's own pickler,
 * protocol 2, plain data: read by pickle.h, which runs nothing) or its JSON form.
 *
 * Keys as torch's dump code writes them (torch/csrc/distributed/c10d/FlightRecorder.hpp and
 * .cpp, NCCLTraceBuffer::dump and dump_json, torch 2.6 "2.4" and later; TraceUtils.h before):
 * version, pg_config {name: {name, desc, ranks: "[0, 1]"}}, pg_status, entries [{record_id,
 * pg_id, process_group [name, desc], collective_seq_id, p2p_seq_id, op_id, profiling_name
 * ("nccl:all_reduce", "nccl:send 0->1", "nccl:recv 1<-0": group ranks, as
 * tools/flight_recorder/components/types.py reads them), time_created_ns, input_sizes,
 * input_dtypes, output_sizes, output_dtypes, state (scheduled, started, completed),
 * time_discovered_started_ns, time_discovered_completed_ns, retired, timeout_ms, is_p2p,
 * frames [{name, filename, line}] innermost first (the pickle only)}].
 *
 * Each dump becomes one rank's process whose one thread waits where the rank's oldest
 * unfinished entry is (entries are in the order they were recorded, and a rank's NCCL work
 * runs in that order), with the wait recorded (evidence.h, wait_pg: the group, the sequence
 * number, the sizes) and the entry's Python stack as its frames; the groups of pg_config go
 * into the evidence. Matching across ranks is the waits-for graph's (classify/waitsfor.h):
 * ranks of a group at one sequence number with the same op and tensors are in one call, the
 * members that are not are what it waits for, and a member at the same number with other
 * tensors is a mismatch.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "formats/foreign/internal.h"
#include "formats/logs.h" /* hdx_log_role_of_desc */
#include "formats/pickle.h"
#include "model/util.h"

/* The wait labels of classify/waits.h (HDX_WAIT_*), which this stage may not include. */
#define WAIT_COLLECTIVE "collective"
#define WAIT_SEND "p2p_send"
#define WAIT_RECV "p2p_recv"
#define WAIT_P2P "p2p"

#define FR_MAX_GROUP_RANKS (1 << 20)

int hdx_foreign_flight_recorder_sniff(const char *text, size_t len)
{
    if (len >= 2 && (unsigned char)text[0] == 0x80 && text[1] >= 2 && text[1] <= 5)
        return 1; /* a pickle: the reader says what else it is, if it is not a dump */
    size_t i = 0;
    while (i < len && isspace((unsigned char)text[i]))
        i++;
    if (i >= len || text[i] != '{')
        return 0;
    size_t look = len - i < 65536 ? len - i : 65536;
    const char *p = text + i;
    if (memmem(p, look, "\"schema\"", 8))
        return 0;
    /* dump_json's keys come sorted: "entries" first, "pg_config" after them */
    return memmem(p, look, "\"pg_config\"", 11) ||
           (memmem(p, look, "\"entries\"", 9) && memmem(p, look, "\"profiling_name\"", 16));
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static long long num_of(const cJSON *o, const char *key, long long def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9.2e18 ? (long long)v->valuedouble : def;
}

/* The rank of a dump: the last digits of its file name (torch names it prefix + rank). */
static int rank_of_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int rank = HDX_UNKNOWN;
    for (const char *q = base; *q; q++) {
        if (!isdigit((unsigned char)*q) || (q > base && isdigit((unsigned char)q[-1])))
            continue;
        const char *d = q;
        int r = take_int(&d);
        if (r >= 0 && r < (1 << 24))
            rank = r;
    }
    return rank;
}

/* pg_config's "ranks": torch writes "[0, 1, 2]" (ranks_str); an array is taken too.
 * *out is heap (the caller frees it); n 0 when none could be read. */
static int group_ranks(const cJSON *v, int **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
    const cJSON *k = cJSON_IsArray(v) ? v->child : NULL;
    for (;;) {
        long r;
        if (s) {
            while (*s && !isdigit((unsigned char)*s))
                s++;
            if (!*s)
                break;
            char *end;
            r = strtol(s, &end, 10);
            s = end;
        } else if (k) {
            r = cJSON_IsNumber(k) ? (long)k->valuedouble : -1;
            k = k->next;
        } else {
            break;
        }
        if (r < 0 || r >= (1 << 24) || *n >= FR_MAX_GROUP_RANKS) {
            free(*out);
            *out = NULL;
            *n = 0;
            return 0; /* not a list of ranks: the group is left out */
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            int *a = realloc(*out, cap * sizeof *a);
            if (!a) {
                free(*out);
                *out = NULL;
                *n = 0;
                return -ENOMEM;
            }
            *out = a;
        }
        (*out)[(*n)++] = (int)r;
    }
    return 0;
}

typedef struct fr {
    const char *name;
    hdx_evidence *ev;
    char **err;
    int rank;
    int world_size;
} fr;

static int fr_fail(fr *F, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fr_fail(fr *F, int code, const char *fmt, ...)
{
    if (F->err && !*F->err) {
        va_list ap;
        va_start(ap, fmt);
        char *what = NULL;
        if (vasprintf(&what, fmt, ap) < 0)
            what = NULL;
        va_end(ap);
        *F->err = what ? hdx_asprintf("%s: %s", F->name, what) : NULL;
        free(what);
    }
    return code;
}

/* pg_config into the evidence's groups; the default group's size is the world size. */
static int add_groups(fr *F, const cJSON *cfg)
{
    size_t disagree = 0;
    for (const cJSON *g = cJSON_IsObject(cfg) ? cfg->child : NULL; g; g = g->next) {
        const char *name = str_of(g, "name");
        const char *desc = str_of(g, "desc");
        if (!name)
            name = g->string;
        int *ranks = NULL;
        size_t n = 0;
        if (!name || group_ranks(cJSON_GetObjectItemCaseSensitive(g, "ranks"), &ranks, &n) < 0)
            return name ? -ENOMEM : 0;
        if (!n)
            continue;
        /* torch's default group is named "0" and described "default_pg" */
        int is_default = (desc && !strcmp(desc, "default_pg")) || !strcmp(name, "0");
        int r = hdx_evidence_add_pgroup(F->ev, name, ranks, n, desc && *desc ? desc : NULL, hdx_log_role_of_desc(desc),
                                        is_default);
        free(ranks);
        if (r == -ENOMEM)
            return r;
        disagree += r == -EEXIST;
        if (is_default && (int)n > F->world_size)
            F->world_size = (int)n;
    }
    if (disagree && hdx_evidence_note(F->ev, "%s: %zu process group%s of its pg_config disagree%s with another dump "
                                             "on their ranks: the first dump's ranks are kept",
                                      F->name, disagree, disagree == 1 ? "" : "s", disagree == 1 ? "s" : ""))
        return -ENOMEM;
    return 0;
}

/* "all_reduce" from "nccl:all_reduce", "send" from "nccl:send 0->1". Into buf. */
static const char *op_name(const char *profiling, char *buf, size_t size)
{
    const char *p = profiling ? strchr(profiling, ':') : NULL;
    p = p ? p + 1 : profiling ? profiling : "?";
    size_t n = strcspn(p, " ");
    snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), p);
    return buf;
}

/* "Float,Half" from a list of dtype names, into buf. */
static void dtypes(const cJSON *list, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (const cJSON *d = cJSON_IsArray(list) ? list->child : NULL; d && used < size; d = d->next)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "," : "",
                                 cJSON_IsString(d) ? d->valuestring : "?");
}

/* The sizes and dtypes of an entry, the identity of its call beyond op and number:
 * "in [[2048]] Float, out [[2048]] Float". Heap, or NULL. */
static char *signature(const cJSON *e)
{
    char *in = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(e, "input_sizes"));
    char *out = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(e, "output_sizes"));
    char ind[128], outd[128];
    dtypes(cJSON_GetObjectItemCaseSensitive(e, "input_dtypes"), ind, sizeof ind);
    dtypes(cJSON_GetObjectItemCaseSensitive(e, "output_dtypes"), outd, sizeof outd);
    char *s = hdx_asprintf("in %s %s, out %s %s", in ? in : "?", ind, out ? out : "?", outd);
    free(in);
    free(out);
    return s;
}

/* The global rank of group rank gr of group pg (NULL: taken as global), or HDX_UNKNOWN. */
static int global_rank(const hdx_pgroup *pg, long gr)
{
    if (gr < 0 || gr >= (1 << 24))
        return HDX_UNKNOWN;
    if (!pg)
        return (int)gr;
    return (size_t)gr < pg->n_ranks ? pg->ranks[gr] : HDX_UNKNOWN;
}

/* The thread's wait from entry e. */
static int set_wait(fr *F, hdx_thread *t, const cJSON *e)
{
    const cJSON *pgv = cJSON_GetObjectItemCaseSensitive(e, "process_group");
    const char *pg = cJSON_IsArray(pgv) && cJSON_IsString(pgv->child) ? pgv->child->valuestring : NULL;
    const char *prof = str_of(e, "profiling_name");
    char op[64];
    op_name(prof, op, sizeof op);
    const cJSON *p2pv = cJSON_GetObjectItemCaseSensitive(e, "is_p2p");
    int p2p = cJSON_IsTrue(p2pv) || !strcmp(op, "send") || !strcmp(op, "recv");
    const char *wait = WAIT_COLLECTIVE;
    if (!(t->wait_pg = strdup(pg ? pg : "0")) || !(t->wait_op = strdup(op)))
        return -ENOMEM;
    if (p2p) {
        const hdx_pgroup *g = hdx_evidence_find_pgroup(F->ev, t->wait_pg);
        const char *meta = prof ? strchr(prof, ' ') : NULL;
        long a = -1, b = -1;
        if (meta && !strcmp(op, "send") && sscanf(meta, " %ld->%ld", &a, &b) == 2) {
            wait = WAIT_SEND;
            t->wait_peer = global_rank(g, b);
        } else if (meta && !strcmp(op, "recv") && sscanf(meta, " %ld<-%ld", &a, &b) == 2) {
            wait = WAIT_RECV;
            t->wait_peer = global_rank(g, b);
        } else {
            wait = WAIT_P2P; /* a batch of send/recv ("coalesced"): the peers are not in the entry */
        }
        t->wait_seq = num_of(e, "p2p_seq_id", HDX_UNKNOWN);
    } else {
        t->wait_seq = num_of(e, "collective_seq_id", HDX_UNKNOWN);
        if (!(t->wait_sig = signature(e)))
            return -ENOMEM;
    }
    return (t->wait = strdup(wait)) ? 0 : -ENOMEM;
}

/* The entry's Python stack (innermost first) as t's frames. */
static int set_frames(hdx_thread *t, const cJSON *e)
{
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(e, "frames");
    for (const cJSON *f = cJSON_IsArray(frames) ? frames->child : NULL; f && t->n_frames < HDX_FOREIGN_MAX_FRAMES;
         f = f->next) {
        if (!cJSON_IsObject(f))
            continue;
        hdx_frame *fr = hdx_thread_add_frame(t);
        if (!fr)
            return -ENOMEM;
        fr->kind = HDX_FRAME_PYTHON;
        const char *name = str_of(f, "name"), *file = str_of(f, "filename");
        long long line = num_of(f, "line", 0);
        fr->line = line < (1 << 30) ? (int)line : 0;
        if ((name && !(fr->function = strdup(name))) || (file && !(fr->file = strdup(file))))
            return -ENOMEM;
    }
    return 0;
}

/* "all_reduce #7 on group 0 (default_pg), started" for a note. */
static void entry_text(const cJSON *e, char *buf, size_t size)
{
    const cJSON *pgv = cJSON_GetObjectItemCaseSensitive(e, "process_group");
    const char *pg = cJSON_IsArray(pgv) && cJSON_IsString(pgv->child) ? pgv->child->valuestring : "?";
    const char *desc = cJSON_IsArray(pgv) && pgv->child && cJSON_IsString(pgv->child->next)
                           ? pgv->child->next->valuestring
                           : NULL;
    char op[64];
    op_name(str_of(e, "profiling_name"), op, sizeof op);
    int p2p = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "is_p2p"));
    const char *state = str_of(e, "state");
    const char *prof = str_of(e, "profiling_name");
    const char *meta = p2p && prof ? strchr(prof, ' ') : NULL;
    snprintf(buf, size, "%s%s #%lld on group %s%s%s%s, %s", op, meta ? meta : "",
             num_of(e, p2p ? "p2p_seq_id" : "collective_seq_id", -1), pg, desc && *desc ? " (" : "",
             desc && *desc ? desc : "", desc && *desc ? ")" : "", state ? state : "state unknown");
}

static int load_tree(fr *F, const cJSON *root)
{
    const char *version = str_of(root, "version");
    if (!cJSON_IsObject(root) || (!version && !cJSON_GetObjectItemCaseSensitive(root, "entries")))
        return fr_fail(F, -EINVAL, "not a Flight Recorder dump: no \"version\" and no \"entries\"");
    if (!version || strncmp(version, "2.", 2))
        return fr_fail(F, -EPROTONOSUPPORT,
                       "Flight Recorder dump of version %s: this hangdx reads versions 2.x (torch 2.4 and later)",
                       version ? version : "(none)");
    if (F->rank == HDX_UNKNOWN)
        return fr_fail(F, -EINVAL, "a Flight Recorder dump, but its name ends in no rank: torch names each dump "
                                   "TORCH_NCCL_DEBUG_INFO_TEMP_FILE followed by the rank (/tmp/nccl_trace_rank_3): "
                                   "give it back its name");
    for (size_t i = 0; i < F->ev->n_procs; i++)
        if (F->ev->procs[i].rank == F->rank)
            return fr_fail(F, -EEXIST, "rank %d is also in an earlier input; give each rank once", F->rank);
    int rc = add_groups(F, cJSON_GetObjectItemCaseSensitive(root, "pg_config"));
    if (rc)
        return rc;
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "entries");
    const cJSON *pending = NULL, *last = NULL;
    size_t n = 0;
    for (const cJSON *e = cJSON_IsArray(entries) ? entries->child : NULL; e; e = e->next) {
        if (!cJSON_IsObject(e))
            continue;
        n++;
        last = e;
        const char *state = str_of(e, "state");
        if (!pending && !(state && !strcmp(state, "completed")))
            pending = e;
    }
    hdx_process *p = hdx_evidence_add_process(F->ev);
    hdx_thread *t = p ? hdx_process_add_thread(p) : NULL;
    if (!t)
        return -ENOMEM;
    p->rank = F->rank;
    if (F->world_size > 0)
        p->world_size = F->world_size;
    if (pending && ((rc = set_wait(F, t, pending)) || (rc = set_frames(t, pending))))
        return rc;
    char what[512] = "no entries";
    if (pending)
        entry_text(pending, what, sizeof what);
    else if (last)
        entry_text(last, what, sizeof what);
    return hdx_evidence_note(F->ev, "%s: NCCL Flight Recorder dump of rank %d (the rank from the file name; "
                                    "version %s, %zu entr%s): %s%s",
                             F->name, F->rank, version, n, n == 1 ? "y" : "ies",
                             pending ? "it waits in its oldest unfinished entry, " : last ? "every entry completed, the last: " : "",
                             what)
               ? -ENOMEM
               : 0;
}

int hdx_foreign_flight_recorder(const char *text, size_t len, const char *name, hdx_evidence *ev, char **err)
{
    fr F = {name, ev, err, rank_of_name(name), HDX_UNKNOWN};
    cJSON *root = NULL;
    int rc;
    if (len >= 1 && (unsigned char)text[0] == 0x80) {
        hdx_pickle_error pe;
        rc = hdx_pickle_read((const unsigned char *)text, len, &root, &pe);
        if (rc == -EPERM)
            return fr_fail(&F, rc, "refused: opcode %s at offset %zu: %s. torch writes its Flight Recorder dumps as "
                                   "plain data, so this pickle is not one as torch wrote it. If you trust the file, "
                                   "convert it where Python may run it (python3 -c 'import json, pickle, sys; "
                                   "print(json.dumps(pickle.load(open(sys.argv[1], \"rb\"))))' FILE > FILE.json) "
                                   "and give hangdx the JSON",
                           hdx_pickle_opcode_name(pe.opcode), pe.offset, pe.what);
        if (rc == -EBADMSG)
            return fr_fail(&F, rc, "not a readable Flight Recorder pickle: at offset %zu (opcode %s): %s", pe.offset,
                           pe.opcode >= 0 ? hdx_pickle_opcode_name(pe.opcode) : "none", pe.what);
        if (rc)
            return rc;
    } else {
        root = cJSON_ParseWithLength(text, len);
        if (!root)
            return fr_fail(&F, -EBADMSG, "looks like the JSON form of a Flight Recorder dump but is not JSON "
                                         "(cut short?)");
    }
    rc = load_tree(&F, root); /* its refusals come before it adds anything to ev */
    cJSON_Delete(root);
    return rc;
}
