/*
 * Job logs into the evidence model (logs.h): the pattern file, and the reader
 * that turns each matching line into a fact and keeps a summary per rank.
 */
#include "formats/logs.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/json_read.h"
#include "model/util.h"

#define PATTERNS_SCHEMA "hangdx.patterns/1"
#define PATTERNS_MAX_BYTES (4u << 20)
#define LOG_MAX_BYTES ((size_t)1 << 30)
#define SNIFF_BYTES 65536
#define MAX_GROUPS 32

typedef struct pfield {
    char *name;
    int group;
} pfield;

typedef struct pattern {
    char *name, *regex, *proves, *example, *cls, *fix, *label_a, *label_b;
    enum hdx_log_strength strength;
    int block_scope;  /* its rank applies to the unprefixed lines that follow */
    int in_traceback; /* only lines inside a traceback */
    regex_t re;
    pfield *fields;
    size_t n_fields;
} pattern;

struct hdx_log_patterns {
    pattern *p;
    size_t n;
};

static void pattern_clear(pattern *p)
{
    free(p->name);
    free(p->regex);
    free(p->proves);
    free(p->example);
    free(p->cls);
    free(p->fix);
    free(p->label_a);
    free(p->label_b);
    for (size_t i = 0; i < p->n_fields; i++)
        free(p->fields[i].name);
    free(p->fields);
    regfree(&p->re);
}

void hdx_log_patterns_free(hdx_log_patterns *ps)
{
    if (!ps)
        return;
    for (size_t i = 0; i < ps->n; i++)
        pattern_clear(&ps->p[i]);
    free(ps->p);
    free(ps);
}

size_t hdx_log_patterns_count(const hdx_log_patterns *ps) { return ps ? ps->n : 0; }
const char *hdx_log_pattern_name(const hdx_log_patterns *ps, size_t i) { return ps->p[i].name; }
const char *hdx_log_pattern_example(const hdx_log_patterns *ps, size_t i) { return ps->p[i].example; }

int hdx_log_pattern_matches(const hdx_log_patterns *ps, size_t i, const char *line)
{
    return regexec(&ps->p[i].re, line, 0, NULL, 0) == 0;
}

/* A string member of a pattern (json_read.h), borrowed; NULL when absent or of another type. */
static const char *str_of(const cJSON *o, const char *key)
{
    const char *v = NULL;
    return hdx_json_get_str(o, key, &v, NULL) == 1 ? v : NULL;
}

/* One entry of "patterns" into *p. 0 or -EINVAL/-ENOMEM with *err. */
static int pattern_from_json(const cJSON *o, pattern *p, const char *path, char **err)
{
    const char *name = str_of(o, "name"), *regex = str_of(o, "regex"), *proves = str_of(o, "proves");
    const char *strength = str_of(o, "strength"), *example = str_of(o, "example");
    if (!name || !regex || !proves || !strength) {
        *err = hdx_asprintf("%s: pattern %s lacks one of name, regex, proves, strength", path, name ? name : "(unnamed)");
        return -EINVAL;
    }
    if (strcmp(strength, "strong") && strcmp(strength, "weak")) {
        *err = hdx_asprintf("%s: pattern %s: strength must be \"strong\" or \"weak\", not \"%s\"", path, name, strength);
        return -EINVAL;
    }
    int rc = regcomp(&p->re, regex, REG_EXTENDED);
    if (rc) {
        char msg[160];
        regerror(rc, &p->re, msg, sizeof msg);
        *err = hdx_asprintf("%s: pattern %s: bad regex (%s); regexes are POSIX extended (no \\d, no lazy *?)", path,
                            name, msg);
        return -EINVAL;
    }
    p->strength = strcmp(strength, "strong") ? HDX_LOG_WEAK : HDX_LOG_STRONG;
    const char *scope = str_of(o, "scope");
    p->block_scope = scope && !strcmp(scope, "block");
    int in_traceback = 0;
    p->in_traceback = hdx_json_get_bool(o, "in_traceback", &in_traceback, NULL) == 1 && in_traceback;
    const cJSON *values = NULL;
    if (hdx_json_get_array(o, "values", &values, NULL) == 1 && cJSON_GetArraySize(values) == 2) {
        const cJSON *a = cJSON_GetArrayItem(values, 0), *b = cJSON_GetArrayItem(values, 1);
        p->label_a = cJSON_IsString(a) ? strdup(a->valuestring) : NULL;
        p->label_b = cJSON_IsString(b) ? strdup(b->valuestring) : NULL;
    }
    p->name = strdup(name);
    p->regex = strdup(regex);
    p->proves = strdup(proves);
    p->example = hdx_strdup(example);
    p->cls = hdx_strdup(str_of(o, "class"));
    p->fix = hdx_strdup(str_of(o, "fix"));
    if (!p->name || !p->regex || !p->proves)
        return -ENOMEM;
    const cJSON *f, *fields = NULL;
    hdx_json_error why;
    if (hdx_json_get_object(o, "fields", &fields, &why) < 0) {
        *err = hdx_asprintf("%s: pattern %s: %s (field names to regex group numbers)", path, name, why.text);
        return -EINVAL;
    }
    cJSON_ArrayForEach(f, fields)
    {
        if (!cJSON_IsNumber(f) || f->valueint < 1 || (size_t)f->valueint > p->re.re_nsub ||
            f->valueint >= MAX_GROUPS) {
            *err = hdx_asprintf("%s: pattern %s: field %s names group %d, but the regex has %zu groups", path, name,
                                f->string, cJSON_IsNumber(f) ? f->valueint : -1, p->re.re_nsub);
            return -EINVAL;
        }
        pfield *slot = hdx_append((void **)&p->fields, &p->n_fields, sizeof *slot);
        if (!slot || !(slot->name = strdup(f->string)))
            return -ENOMEM;
        slot->group = f->valueint;
    }
    return 0;
}

int hdx_log_patterns_load_file(const char *path, hdx_log_patterns **ps, char **err)
{
    size_t len = 0;
    char *text = hdx_read_file(path, PATTERNS_MAX_BYTES, &len);
    if (!text) {
        int e = errno;
        *err = hdx_asprintf("cannot read the log patterns %s: %s", path, strerror(e));
        return -e;
    }
    int r = 0;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    const char *schema = doc ? str_of(doc, "schema") : NULL;
    const cJSON *arr = NULL;
    if (!doc || !schema || strcmp(schema, PATTERNS_SCHEMA) || hdx_json_get_array(doc, "patterns", &arr, NULL) != 1) {
        *err = hdx_asprintf("%s: not a pattern file (a JSON object with \"schema\": \"%s\" and a \"patterns\" array)",
                            path, PATTERNS_SCHEMA);
        r = -EINVAL;
        goto out;
    }
    if (!*ps && !(*ps = calloc(1, sizeof **ps))) {
        r = -ENOMEM;
        goto out;
    }
    const cJSON *o;
    cJSON_ArrayForEach(o, arr)
    {
        pattern *p = hdx_append((void **)&(*ps)->p, &(*ps)->n, sizeof *p);
        if (!p) {
            r = -ENOMEM;
            goto out;
        }
        if ((r = pattern_from_json(o, p, path, err)) < 0) {
            /* regfree of a regex that regcomp refused is not allowed: compile a trivial one */
            if (!p->name || regcomp(&p->re, "x", REG_EXTENDED | REG_NOSUB))
                regcomp(&p->re, "x", REG_EXTENDED | REG_NOSUB);
            goto out;
        }
    }
out:
    cJSON_Delete(doc);
    return r;
}

int hdx_log_patterns_load_default(const char *exe, hdx_log_patterns **out, char **err)
{
    char cand[PATH_MAX + 64];
    *out = NULL;
    const char *found = NULL;
    if (!exe)
        exe = hdx_self_exe();
    if (exe) {
        const char *slash = strrchr(exe, '/');
        int dl = slash ? (int)(slash - exe) : 1;
        snprintf(cand, sizeof cand, "%.*s/../share/hangdx/patterns/logs.json", dl, slash ? exe : ".");
        if (access(cand, R_OK) == 0)
            found = cand;
    }
    if (!found) {
        *err = hdx_asprintf("the log patterns (share/hangdx/patterns/logs.json beside the hangdx binary) are missing: "
                            "reinstall hangdx, or name a pattern file with %s",
                            HDX_PATTERNS_ENV);
        if (!getenv(HDX_PATTERNS_ENV))
            return -ENOENT;
        free(*err);
        *err = NULL;
    }
    int r = found ? hdx_log_patterns_load_file(found, out, err) : 0;
    const char *user = getenv(HDX_PATTERNS_ENV);
    if (r == 0 && user && *user)
        r = hdx_log_patterns_load_file(user, out, err);
    if (r < 0) {
        hdx_log_patterns_free(*out);
        *out = NULL;
    }
    return r;
}

/* ---- reading a log ---- */

/* A launcher prefix: "[rank3]:" (PyTorch) or "[default0]:" (torchrun's role and rank). */
static const char PREFIX_RE[] = "^\\[([A-Za-z_]+)([0-9]+)\\]:";
/* A time stamp: glog's "E0412 11:02:55.730114208", or "2024-04-12 11:02:55,730". */
static const char TIME_RE[] = "([IWEF][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?)|"
                              "([0-9]{4}-[0-9]{2}-[0-9]{2}[ T_][0-9]{2}:[0-9]{2}:[0-9]{2}([.,][0-9]+)?)";
/* A rank in a per-rank file's name: "rank3.log", "train-rank_3.out". */
static const char FILE_RANK_RE[] = "rank[-_.]?([0-9]+)";

typedef struct stream {
    int in_tb;        /* inside a traceback */
    int tb_id;        /* the traceback being read, 0 none */
    size_t tb_first;  /* index of its first fact */
} stream;

typedef struct reader {
    const hdx_log_patterns *ps;
    hdx_evidence *ev;
    const char *path;
    regex_t prefix_re, time_re;
    stream *streams; /* index rank + 1; [0] the unprefixed lines */
    size_t n_streams;
    int tb_counter;
    int file_rank;   /* from the file name, HDX_UNKNOWN */
    int block_rank;  /* torch elastic's failure table entry, HDX_UNKNOWN */
    int root_cause_next;
    int noted_group, noted_assumed, noted_role;
    int only_rank;   /* the one rank of the file's lines so far, HDX_UNKNOWN */
    int several;     /* lines of two ranks or more */
} reader;

static stream *stream_of(reader *rd, int rank)
{
    size_t i = rank < 0 ? 0 : (size_t)rank + 1;
    if (i >= rd->n_streams) {
        size_t n = i + 1 > rd->n_streams * 2 ? i + 1 : rd->n_streams * 2;
        stream *s = realloc(rd->streams, n * sizeof *s);
        if (!s)
            return NULL;
        memset(s + rd->n_streams, 0, (n - rd->n_streams) * sizeof *s);
        rd->streams = s;
        rd->n_streams = n;
    }
    return &rd->streams[i];
}

static hdx_log_rank *log_rank_get(hdx_evidence *ev, int rank, const char *from)
{
    for (size_t i = 0; i < ev->n_log_ranks; i++)
        if (ev->log_ranks[i].rank == rank)
            return &ev->log_ranks[i];
    hdx_log_rank *r = hdx_append((void **)&ev->log_ranks, &ev->n_log_ranks, sizeof *r);
    if (!r)
        return NULL;
    r->rank = rank;
    r->last_line_no = 0;
    r->seq_timed_out = r->seq_enqueued = r->seq_completed = HDX_UNKNOWN;
    r->rank_from = hdx_strdup(from);
    return r;
}

static int add_field(hdx_log_fact *f, const char *name, const char *value, size_t len)
{
    hdx_log_field *slot = hdx_append((void **)&f->fields, &f->n_fields, sizeof *slot);
    if (!slot)
        return -ENOMEM;
    slot->name = strdup(name);
    slot->value = strndup(value, len);
    return slot->name && slot->value ? 0 : -ENOMEM;
}

/* Update rank's summary from fact f. 0 or -ENOMEM. */
static int summarise_fact(hdx_evidence *ev, const hdx_log_fact *f, reader *rd)
{
    if (f->rank < 0)
        return 0;
    hdx_log_rank *r = log_rank_get(ev, f->rank, "line");
    if (!r)
        return -ENOMEM;
    const char *pn = f->pattern;
    /* Sequence numbers count per group: a rank's numbers are of one group, the first it
     * logged; those of other groups are not mixed in. A non-default group's lines count
     * when their global rank is known (a launcher prefix or the file name). */
    const char *pg = f->default_pg == 0 ? f->pg : NULL;
    int has_seq = r->seq_timed_out != HDX_UNKNOWN || r->seq_enqueued != HDX_UNKNOWN;
    int group_ok = !has_seq || ((pg == NULL) == (r->seq_pg == NULL) && (!pg || !strcmp(pg, r->seq_pg)));
    if (group_ok && !has_seq && pg && (!strcmp(pn, "nccl_watchdog_timeout") || !strcmp(pn, "nccl_work_progress")) &&
        !(r->seq_pg = strdup(pg)))
        return -ENOMEM;
    if (!strcmp(pn, "nccl_watchdog_timeout") && group_ok) {
        r->seq_timed_out = hdx_log_fact_int(f, "seq", HDX_UNKNOWN);
        free(r->timed_out_op);
        r->timed_out_op = hdx_strdup(hdx_log_fact_field(f, "op"));
    } else if (!strcmp(pn, "nccl_work_progress") && group_ok) {
        r->seq_enqueued = hdx_log_fact_int(f, "enqueued", HDX_UNKNOWN);
        r->seq_completed = hdx_log_fact_int(f, "completed", HDX_UNKNOWN);
        if (r->seq_timed_out == HDX_UNKNOWN && r->seq_enqueued >= hdx_log_fact_int(f, "seq", LLONG_MAX))
            r->seq_timed_out = hdx_log_fact_int(f, "seq", HDX_UNKNOWN);
    } else if (!strcmp(pn, "elastic_signal")) {
        free(r->exit_cause);
        r->exit_cause = hdx_asprintf("signal %s (%s)", hdx_log_fact_field(f, "signal"),
                                     hdx_log_fact_field(f, "signal_name"));
    } else if (!strcmp(pn, "elastic_exit_code")) {
        if (!r->exit_cause || strncmp(r->exit_cause, "signal", 6)) {
            free(r->exit_cause);
            r->exit_cause = hdx_asprintf("exit code %s", hdx_log_fact_field(f, "exit_code"));
        }
    } else if (!strcmp(pn, "python_exception") && !r->exit_cause) {
        r->exit_cause = hdx_asprintf("%s: %.160s", hdx_log_fact_field(f, "exception"), hdx_log_fact_field(f, "message"));
    } else if (!strcmp(pn, "elastic_failure_rank") && rd->root_cause_next) {
        r->root_cause = 1;
        rd->root_cause_next = 0;
    }
    return 0;
}

/* Translate the [PG ... Rank n] prefix of f: a group rank of the default group is global. */
static int translate_group(reader *rd, hdx_log_fact *f, int line_rank)
{
    const char *pg = hdx_log_fact_field(f, "pg"), *pg_name = hdx_log_fact_field(f, "pg_name");
    long long gr = hdx_log_fact_int(f, "group_rank", HDX_UNKNOWN);
    if (gr == HDX_UNKNOWN)
        return 0;
    f->group_rank = (int)gr;
    if (pg && *pg) {
        f->pg = pg_name && *pg_name ? hdx_asprintf("%s (%s)", pg, pg_name) : strdup(pg);
        f->default_pg = !strcmp(pg, "0") || (pg_name && !strcmp(pg_name, "default_pg"));
    } else {
        f->default_pg = HDX_UNKNOWN; /* only [Rank n]: PyTorch before 2.3; the watchdog's timeout line still (2.11) */
    }
    if (line_rank >= 0) {
        if (f->default_pg != 0 && line_rank != f->group_rank)
            hdx_evidence_note(rd->ev, "%s:%ld: the launcher prefix says rank %d, the NCCL line [Rank %d]; the prefix "
                              "is used", rd->path, f->line, line_rank, f->group_rank);
        return 0;
    }
    if (f->default_pg == 0) {
        f->rank = HDX_UNKNOWN;
        if (!rd->noted_group++)
            hdx_evidence_note(rd->ev, "%s: NCCL lines of process group %s name group ranks (e.g. Rank %d), which "
                              "cannot be turned into global ranks without the group's members; kept as group ranks",
                              rd->path, f->pg, f->group_rank);
        return 0;
    }
    f->rank = f->group_rank;
    if (f->default_pg == HDX_UNKNOWN && !rd->noted_assumed++)
        hdx_evidence_note(rd->ev, "%s: NCCL lines without a [PG ...] prefix: their [Rank n] "
                          "taken as global ranks of the default process group", rd->path);
    return 0;
}

/* Match line against every pattern; add the facts. 0 or -ENOMEM. */
static int match_line(reader *rd, const char *text, long lineno, int line_rank, stream *st, int in_tb)
{
    const hdx_log_patterns *ps = rd->ps;
    regmatch_t m[MAX_GROUPS];
    for (size_t i = 0; i < ps->n; i++) {
        const pattern *p = &ps->p[i];
        if (p->in_traceback && !in_tb)
            continue;
        if (regexec(&p->re, text, MAX_GROUPS, m, 0) != 0)
            continue;
        hdx_log_fact *f = hdx_append((void **)&rd->ev->log_facts, &rd->ev->n_log_facts, sizeof *f);
        if (!f)
            return -ENOMEM;
        f->pattern = strdup(p->name);
        f->proves = strdup(p->proves);
        f->cls = hdx_strdup(p->cls);
        f->strength = p->strength;
        f->rank = line_rank;
        f->group_rank = HDX_UNKNOWN;
        f->default_pg = 1;
        f->in_traceback = in_tb;
        f->traceback = in_tb ? st->tb_id : 0;
        f->file = strdup(rd->path);
        f->line = lineno;
        f->text = strdup(text);
        if (!f->pattern || !f->proves || !f->file || !f->text)
            return -ENOMEM;
        for (size_t k = 0; k < p->n_fields; k++) {
            const regmatch_t *g = &m[p->fields[k].group];
            if (g->rm_so >= 0 && add_field(f, p->fields[k].name, text + g->rm_so, (size_t)(g->rm_eo - g->rm_so)))
                return -ENOMEM;
        }
        if ((p->fix && add_field(f, "fix", p->fix, strlen(p->fix))) ||
            (p->label_a && add_field(f, "value_a_label", p->label_a, strlen(p->label_a))) ||
            (p->label_b && add_field(f, "value_b_label", p->label_b, strlen(p->label_b))))
            return -ENOMEM;
        translate_group(rd, f, line_rank);
        long long own = hdx_log_fact_int(f, "rank", HDX_UNKNOWN);
        if (f->rank < 0 && own >= 0 && own <= INT_MAX) {
            f->rank = (int)own;
            /* "on rank: N" at the end of a traceback: the traceback was that rank's */
            size_t self = (size_t)(f - rd->ev->log_facts);
            for (size_t k = st->tb_first; in_tb && st->tb_id && k < self; k++)
                if (rd->ev->log_facts[k].traceback == st->tb_id && rd->ev->log_facts[k].rank < 0 &&
                    !strcmp(rd->ev->log_facts[k].file, rd->path))
                    rd->ev->log_facts[k].rank = f->rank;
        }
        if (p->block_scope && line_rank < 0 && own >= 0)
            rd->block_rank = (int)own;
        if (f->rank < 0 && line_rank < 0 && rd->block_rank >= 0)
            f->rank = rd->block_rank;
        if (!strcmp(p->name, "elastic_root_cause"))
            rd->root_cause_next = 1;
        if (summarise_fact(rd->ev, f, rd))
            return -ENOMEM;
    }
    return 0;
}

static int note_line(reader *rd, int rank, const char *text, long lineno, const char *from)
{
    hdx_log_rank *r = log_rank_get(rd->ev, rank, from);
    if (!r)
        return -ENOMEM;
    regmatch_t m[5];
    char *t = NULL;
    if (regexec(&rd->time_re, text, 5, m, 0) == 0)
        t = strndup(text + m[0].rm_so, (size_t)(m[0].rm_eo - m[0].rm_so));
    free(r->last_line);
    free(r->file);
    free(r->last_pattern);
    r->last_pattern = NULL;
    r->last_line = strdup(text);
    r->file = strdup(rd->path);
    r->last_line_no = lineno;
    if (t) {
        free(r->last_time);
        r->last_time = t;
    }
    if (r->rank_from && !strcmp(r->rank_from, "line")) {
        free(r->rank_from);
        r->rank_from = strdup(from);
    }
    return r->last_line && r->file ? 0 : -ENOMEM;
}

static int read_lines(reader *rd, char *buf)
{
    long lineno = 0;
    char *save = NULL;
    for (char *line = buf, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[--len] = 0;
        if (!len && !next)
            break;
        regmatch_t m[3];
        int rank = HDX_UNKNOWN;
        const char *text = line, *from = NULL;
        if (regexec(&rd->prefix_re, line, 3, m, 0) == 0) {
            rank = atoi(line + m[2].rm_so);
            text = line + m[0].rm_eo;
            if (*text == ' ')
                text++;
            from = "prefix";
            if (strncmp(line + 1, "rank", 4) && !rd->noted_role++)
                hdx_evidence_note(rd->ev, "%s: torchrun's [%.*s%d]: prefixes taken as global ranks (on one node "
                                  "they are also the local ranks)", rd->path, (int)(m[1].rm_eo - m[1].rm_so),
                                  line + m[1].rm_so, rank);
        } else if (rd->file_rank >= 0) {
            rank = rd->file_rank;
            from = "file name";
        }
        stream *st = stream_of(rd, rank);
        if (!st)
            return -ENOMEM;
        if (rank < 0 && (!strncmp(text, "-----", 5) || !strncmp(text, "=====", 5) ||
                         (text[0] == '[' && text[1] >= '0' && text[1] <= '9')))
            rd->block_rank = HDX_UNKNOWN; /* the end of an entry of torch elastic's failure table */
        const char *t = text;
        while (*t == ' ')
            t++;
        int in_tb = 0;
        if (!strncmp(t, "Traceback (most recent call last):", 34)) {
            st->in_tb = 1;
            st->tb_id = ++rd->tb_counter;
            st->tb_first = rd->ev->n_log_facts;
            in_tb = 1;
        } else if (st->in_tb) {
            in_tb = 1;
            if (text[0] != ' ' && text[0] != '\t')
                st->in_tb = 0; /* the exception line ends it */
        }
        if (!st->in_tb && !in_tb)
            st->tb_id = 0;
        size_t before = rd->ev->n_log_facts;
        if (match_line(rd, text, lineno, rank, st, in_tb))
            return -ENOMEM;
        if (!in_tb && st->tb_id && !st->in_tb)
            st->tb_id = 0;
        if (rank < 0) /* an NCCL line's own [Rank n] (default group) tells whose line it is */
            for (size_t k = before; k < rd->ev->n_log_facts && rank < 0; k++)
                if (rd->ev->log_facts[k].rank >= 0 && rd->ev->log_facts[k].group_rank >= 0) {
                    rank = rd->ev->log_facts[k].rank;
                    from = "line";
                }
        if (rank >= 0 && *t) {
            if (rd->only_rank == HDX_UNKNOWN)
                rd->only_rank = rank;
            else if (rd->only_rank != rank)
                rd->several = 1;
            if (note_line(rd, rank, text, lineno, from))
                return -ENOMEM;
            if (rd->ev->n_log_facts > before) {
                hdx_log_rank *r = log_rank_get(rd->ev, rank, from);
                free(r->last_pattern);
                r->last_pattern = strdup(rd->ev->log_facts[rd->ev->n_log_facts - 1].pattern);
            }
        }
    }
    (void)save;
    return 0;
}

static int reader_init(reader *rd, const hdx_log_patterns *ps, hdx_evidence *ev, const char *path)
{
    memset(rd, 0, sizeof *rd);
    rd->ps = ps;
    rd->ev = ev;
    rd->path = path;
    rd->file_rank = rd->block_rank = rd->only_rank = HDX_UNKNOWN;
    if (regcomp(&rd->prefix_re, PREFIX_RE, REG_EXTENDED))
        return -ENOMEM;
    if (regcomp(&rd->time_re, TIME_RE, REG_EXTENDED)) {
        regfree(&rd->prefix_re);
        return -ENOMEM;
    }
    return 0;
}

static void reader_fini(reader *rd)
{
    regfree(&rd->prefix_re);
    regfree(&rd->time_re);
    free(rd->streams);
}

/* The rank in a per-rank file's name, or HDX_UNKNOWN. */
static int rank_from_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    regex_t re;
    regmatch_t m[2];
    int rank = HDX_UNKNOWN;
    if (regcomp(&re, FILE_RANK_RE, REG_EXTENDED | REG_ICASE))
        return rank;
    if (regexec(&re, base, 2, m, 0) == 0)
        rank = atoi(base + m[1].rm_so);
    regfree(&re);
    return rank;
}

/* A role from a group description Megatron gives its groups (group_desc, torch >= 2.4). */
static const char *role_of_desc(const char *desc)
{
    static const struct {
        const char *desc, *role;
    } roles[] = {{"TENSOR_MODEL_PARALLEL_GROUP", "tp"}, {"PIPELINE_MODEL_PARALLEL_GROUP", "pp"},
                 {"DATA_PARALLEL_GROUP", "dp"},         {"DATA_PARALLEL_GROUP_WITH_CP", "dp_cp"},
                 {"CONTEXT_PARALLEL_GROUP", "cp"},      {"EXPERT_MODEL_PARALLEL_GROUP", "ep"},
                 {"MODEL_PARALLEL_GROUP", "mp"},        {"EMBEDDING_GROUP", "embedding"},
                 {"POSITION_EMBEDDING_GROUP", "position_embedding"}};
    for (size_t i = 0; desc && i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(desc, roles[i].desc))
            return roles[i].role;
    return NULL;
}

int hdx_log_pgroups(hdx_evidence *ev)
{
    char *done = calloc(ev->n_log_facts ? ev->n_log_facts : 1, 1);
    int *ranks = NULL;
    size_t cap = 0;
    int rc = done ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (done[i] || !f->pg || f->rank < 0 || f->group_rank < 0)
            continue;
        /* every line of this group whose global rank is known places one member */
        size_t size = 0;
        for (size_t k = i; k < ev->n_log_facts; k++) {
            const hdx_log_fact *g = &ev->log_facts[k];
            if (g->pg && g->rank >= 0 && g->group_rank >= 0 && !strcmp(g->pg, f->pg) && (size_t)g->group_rank >= size)
                size = (size_t)g->group_rank + 1;
        }
        if (size > cap) {
            int *more = realloc(ranks, size * sizeof *ranks);
            if (!more) {
                rc = -ENOMEM;
                break;
            }
            ranks = more;
            cap = size;
        }
        for (size_t k = 0; k < size; k++)
            ranks[k] = HDX_UNKNOWN;
        int clash = 0;
        for (size_t k = i; k < ev->n_log_facts; k++) {
            const hdx_log_fact *g = &ev->log_facts[k];
            if (!g->pg || g->rank < 0 || g->group_rank < 0 || strcmp(g->pg, f->pg))
                continue;
            done[k] = 1;
            clash |= ranks[g->group_rank] != HDX_UNKNOWN && ranks[g->group_rank] != g->rank;
            ranks[g->group_rank] = g->rank;
        }
        size_t known = 0;
        while (known < size && ranks[known] != HDX_UNKNOWN)
            known++;
        if (clash || known < size)
            continue; /* a member whose line is missing: the group is not known whole */
        const char *desc = hdx_log_fact_field(f, "pg_name");
        int r = hdx_evidence_add_pgroup(ev, f->pg, ranks, size, desc && *desc ? desc : NULL, role_of_desc(desc),
                                        f->default_pg == 1);
        rc = r == -ENOMEM ? r : 0;
    }
    free(done);
    free(ranks);
    return rc;
}

int hdx_log_load(const hdx_log_patterns *ps, const char *path, hdx_evidence *ev, char **err)
{
    return hdx_log_load_ranked(ps, path, ev, NULL, err);
}

int hdx_log_load_ranked(const hdx_log_patterns *ps, const char *path, hdx_evidence *ev, int *only_rank, char **err)
{
    if (only_rank)
        *only_rank = HDX_UNKNOWN;
    size_t len = 0;
    char *buf = hdx_read_file(path, LOG_MAX_BYTES, &len);
    if (!buf) {
        int e = errno;
        *err = hdx_asprintf("%s: cannot read: %s", path, strerror(e));
        return -e;
    }
    /* NUL runs (what a node crash leaves at the end of a file on NFS or Lustre) end lines. */
    for (size_t i = 0; i < len; i++)
        if (!buf[i])
            buf[i] = '\n';
    reader rd;
    int r = reader_init(&rd, ps, ev, path);
    if (r < 0) {
        free(buf);
        return r;
    }
    /* A file with no launcher prefix on any line is one rank's file when its name tells the rank. */
    int prefixed = 0;
    for (char *l = buf; l && !prefixed; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        prefixed = l[0] == '[' && regexec(&rd.prefix_re, l, 0, NULL, 0) == 0;
    if (!prefixed && (rd.file_rank = rank_from_name(path)) >= 0)
        hdx_evidence_note(ev, "%s: no rank prefix in the file; its lines taken as rank %d's, from the file name",
                          path, rd.file_rank);
    r = read_lines(&rd, buf);
    if (r == 0 && only_rank && !rd.several)
        *only_rank = rd.only_rank;
    reader_fini(&rd);
    free(buf);
    if (r < 0 && !*err)
        *err = hdx_asprintf("%s: %s", path, strerror(-r));
    return r;
}

/* Does a line of buf[0..n) (NUL-terminated, modified) match a pattern? A cut first or
 * last line (cut_head, cut_tail) is not judged. */
static int sniff_lines(const hdx_log_patterns *ps, const regex_t *pre, char *buf, size_t n, int cut_head,
                       int cut_tail)
{
    for (size_t i = 0; i < n; i++)
        if (!buf[i])
            buf[i] = '\n'; /* NUL runs end lines, as hdx_log_load reads them */
    char *line = buf;
    if (cut_head && (line = strchr(buf, '\n')))
        line++;
    for (char *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        else if (cut_tail)
            break;
        regmatch_t m[1];
        const char *text = line;
        if (regexec(pre, line, 1, m, 0) == 0) {
            text = line + m[0].rm_eo;
            if (*text == ' ')
                text++;
        }
        for (size_t i = 0; i < ps->n; i++)
            if (!ps->p[i].in_traceback && regexec(&ps->p[i].re, text, 0, NULL, 0) == 0)
                return 1;
    }
    return 0;
}

int hdx_log_sniff(const hdx_log_patterns *ps, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    char *buf = malloc(SNIFF_BYTES + 1);
    regex_t pre;
    if (!buf || regcomp(&pre, PREFIX_RE, REG_EXTENDED) != 0) {
        free(buf);
        fclose(f);
        return -ENOMEM;
    }
    /* The head, then the tail: a run's watchdog lines come at its end, after megabytes of
     * training output. */
    size_t n = fread(buf, 1, SNIFF_BYTES, f);
    buf[n] = 0;
    int found = sniff_lines(ps, &pre, buf, n, 0, n == SNIFF_BYTES);
    if (!found && n == SNIFF_BYTES && fseeko(f, -(off_t)SNIFF_BYTES, SEEK_END) == 0 && ftello(f) >= (off_t)SNIFF_BYTES) {
        n = fread(buf, 1, SNIFF_BYTES, f);
        buf[n] = 0;
        found = sniff_lines(ps, &pre, buf, n, 1, 0);
    }
    regfree(&pre);
    fclose(f);
    free(buf);
    return found;
}
