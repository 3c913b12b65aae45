/*
 * Job logs into the evidence model (logs.h): the pattern file, and the reader
 * that turns each matching line into a fact and keeps a summary per rank.
 */
#include "formats/logs.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/json_read.h"
#include "model/util.h"

#define PATTERNS_SCHEMA "hangdx.patterns/1"
#define PATTERNS_MAX_BYTES (4u << 20)
#define SNIFF_BYTES 65536
/* A longer line is cut here: its head (prefix, time, message) is read, the rest skipped and
 * counted in a note. The patterns' regexes cost up to the square of a line's length (glibc
 * tries each start), so a bound on the line is what keeps a log's reading linear; the
 * longest real line among the fixtures is 1 KiB. */
#define LOG_LINE_MAX 4096
#define LOG_CHUNK 65536
/* The largest rank a launcher prefix may name: the bound the snapshot reader puts on a world
 * size. A larger number is not taken as a rank. */
#define LOG_RANK_MAX ((1 << 24) - 1)
#define MAX_GROUPS 32

typedef struct pfield {
    char *name;
    int group;
} pfield;

/* A pattern's regex holds at most this many top-level alternatives with a literal each. */
#define NEEDLES_MAX 8

typedef struct pattern {
    char *name, *regex, *proves, *example, *cls, *fix, *label_a, *label_b;
    /* Literals of which every match holds one (one per top-level alternative of the regex),
     * found by needles_of; n_needles 0: none known, the regex alone decides. */
    char *needles[NEEDLES_MAX];
    uint64_t needle_bytes[NEEDLES_MAX][4]; /* each needle's bytes (bytes_of) */
    size_t n_needles;
    enum hdx_log_strength strength;
    int block_scope;  /* its rank applies to the unprefixed lines that follow */
    int file_scope;   /* tells whose file it is (scope "file"): read before the file's lines, no fact */
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
    for (size_t i = 0; i < p->n_needles; i++)
        free(p->needles[i]);
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
const char *hdx_log_pattern_regex(const hdx_log_patterns *ps, size_t i) { return ps->p[i].regex; }

/* The index of the ']' that closes the bracket expression opening at re[i] ('['), or n. */
static size_t bracket_end(const char *re, size_t i, size_t n)
{
    size_t k = i + 1;
    if (k < n && re[k] == '^')
        k++;
    if (k < n && re[k] == ']')
        k++; /* a ']' first is a member */
    for (; k < n && re[k] != ']'; k++)
        if (re[k] == '[' && k + 1 < n && strchr(":.=", re[k + 1])) {
            /* [:class:], [.coll.], [=equiv=]: up to its own closing pair */
            const char *e = strstr(re + k + 2, (char[]){re[k + 1], ']', 0});
            k = e && (size_t)(e - re) < n ? (size_t)(e - re) + 1 : n;
        }
    return k;
}

/* The index after the group, bracket expression or interval ({m,n}) opening at re[i], or
 * after the escaped character at re[i] ('\\'), or i + 1. */
static size_t atom_end(const char *re, size_t i, size_t n)
{
    if (re[i] == '\\')
        return i + 2 <= n ? i + 2 : n;
    if (re[i] == '[')
        return bracket_end(re, i, n) + 1;
    if (re[i] == '{') {
        const char *e = memchr(re + i, '}', n - i);
        return e ? (size_t)(e - re) + 1 : n;
    }
    if (re[i] != '(')
        return i + 1;
    size_t k = i + 1;
    while (k < n && re[k] != ')')
        k = atom_end(re, k, n);
    return k + 1;
}

/*
 * The longest literal that every match of one alternative of a POSIX extended regex,
 * re[0..n), holds: a run of ordinary (or backslash-escaped punctuation) characters outside
 * any group or bracket expression, each one not made optional by a following ?, * or {0
 * (docs/design.md, "Job logs").
 * A character that +, or {m with m >= 1, repeats counts once and ends the run. Conservative:
 * what it does not understand ends a run, so the literal is always one the match holds.
 * A malloc'd string, or NULL when there is no run of MIN_NEEDLE characters (or on ENOMEM).
 */
#define MIN_NEEDLE 3
static char *needle_of(const char *re, size_t n)
{
    char *cur = malloc(n + 1), *best = NULL;
    size_t len = 0, best_len = 0;
    if (!cur)
        return NULL;
    for (size_t i = 0; i <= n;) {
        size_t next = i < n ? atom_end(re, i, n) : n + 1;
        int lit = -1; /* the literal character at i, else -1: the run ends before i */
        /* \\<, \\>, \\` and \\' are glibc's word and buffer anchors, \\w and the like its classes */
        if (i < n && re[i] == '\\' && next == i + 2 && !isalnum((unsigned char)re[i + 1]) && !strchr("<>`'", re[i + 1]))
            lit = (unsigned char)re[i + 1];
        else if (i < n && !strchr(".[]()*+?{}|^$\\", re[i]))
            lit = (unsigned char)re[i];
        if (lit >= 0) {
            char q = next < n ? re[next] : 0;
            int optional = q == '?' || q == '*' || (q == '{' && next + 1 < n && strchr("0,", re[next + 1]));
            if (!optional)
                cur[len++] = (char)lit;
            if (optional || q == '+' || q == '{')
                lit = -1; /* the run ends after this character (before it, if optional) */
        }
        if (lit < 0) {
            if (len > best_len) {
                free(best);
                best_len = (best = strndup(cur, len)) ? len : 0;
            }
            len = 0;
        }
        i = next;
    }
    free(cur);
    if (best_len < MIN_NEEDLE) {
        free(best);
        best = NULL;
    }
    return best;
}

/* The set of bytes text holds, as 256 bits. */
static void bytes_of(const char *text, uint64_t set[4])
{
    set[0] = set[1] = set[2] = set[3] = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        set[*c >> 6] |= 1ull << (*c & 63);
}

/* p->needles from p->regex: one per top-level alternative, or none when one alternative has
 * no needle (or there are more than NEEDLES_MAX). Never fails: without needles (on ENOMEM
 * too) the regex alone decides, as it always may. */
static void needles_of(pattern *p)
{
    const char *re = p->regex;
    size_t n = strlen(re), start = 0;
    for (size_t i = 0; i <= n; i = i < n ? atom_end(re, i, n) : n + 1) {
        if (i < n && re[i] != '|')
            continue;
        char *nd = p->n_needles < NEEDLES_MAX ? needle_of(re + start, i - start) : NULL;
        if (!nd) {
            for (size_t k = 0; k < p->n_needles; k++)
                free(p->needles[k]);
            p->n_needles = 0;
            return;
        }
        bytes_of(nd, p->needle_bytes[p->n_needles]);
        p->needles[p->n_needles++] = nd;
        start = i + 1;
    }
}

/* 0 when text holds none of p's needles (no match possible), else 1. line_bytes: text's
 * bytes (bytes_of), so that most needles are ruled out without a search. */
static int may_match(const pattern *p, const char *text, const uint64_t line_bytes[4])
{
    if (!p->n_needles)
        return 1;
    for (size_t i = 0; i < p->n_needles; i++) {
        const uint64_t *nb = p->needle_bytes[i];
        if ((nb[0] & ~line_bytes[0]) || (nb[1] & ~line_bytes[1]) || (nb[2] & ~line_bytes[2]) ||
            (nb[3] & ~line_bytes[3]))
            continue; /* a byte of the needle is not in the line */
        if (strstr(text, p->needles[i]))
            return 1;
    }
    return 0;
}

int hdx_log_pattern_matches(const hdx_log_patterns *ps, size_t i, const char *line)
{
    uint64_t set[4];
    bytes_of(line, set);
    return may_match(&ps->p[i], line, set) && regexec(&ps->p[i].re, line, 0, NULL, 0) == 0;
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
    p->file_scope = scope && !strcmp(scope, "file");
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
    needles_of(p);
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

/* A time stamp: glog's "E0412 11:02:55.730114208", or "2024-04-12 11:02:55,730". */
static const char TIME_RE[] = "([IWEF][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?)|"
                              "([0-9]{4}-[0-9]{2}-[0-9]{2}[ T_][0-9]{2}:[0-9]{2}:[0-9]{2}([.,][0-9]+)?)";
/* A rank in a per-rank file's name: "rank3.log", "train-rank_3.out". */
static const char FILE_RANK_RE[] = "rank[-_.]?([0-9]+)";

typedef struct stream {
    int rank;         /* whose lines: a rank, or -1 the unprefixed lines */
    int used;         /* the slot holds a stream */
    int in_tb;        /* inside a traceback */
    int tb_id;        /* the traceback being read, 0 none */
    size_t tb_first;  /* index of its first fact */
    size_t log_rank;  /* 1 + its index in ev->log_ranks, 0 not looked up yet */
} stream;

typedef struct reader {
    const hdx_log_patterns *ps;
    hdx_evidence *ev;
    const char *path;
    regex_t time_re;
    stream *streams; /* a hash table by rank (open addressing), as many slots as ranks seen at most twice over */
    size_t n_streams, cap_streams;
    int tb_counter;
    int file_rank;   /* from the file's own lines, its name or its place, HDX_UNKNOWN */
    char file_rank_from[160]; /* how file_rank was known: hdx_log_rank.rank_from */
    int block_rank;  /* torch elastic's failure table entry, HDX_UNKNOWN */
    int root_cause_next;
    int noted_assumed, noted_role, noted_bare;
    int only_rank;   /* the one rank of the file's lines so far, HDX_UNKNOWN */
    int several;     /* lines of two ranks or more */
    size_t n_cut;    /* lines longer than LOG_LINE_MAX, cut */
    long first_cut;  /* the first one's line number */
    size_t first_cut_len;
    size_t n_bad_prefix; /* prefixes that name no possible rank */
} reader;

static size_t stream_slot(const stream *t, size_t cap, int rank)
{
    size_t i = ((size_t)(unsigned)rank * 2654435761u) & (cap - 1);
    while (t[i].used && t[i].rank != rank)
        i = (i + 1) & (cap - 1);
    return i;
}

/* The stream of rank's lines (rank < 0: the unprefixed lines), made at its first line; NULL
 * on ENOMEM. Borrowed: valid until the next call. */
static stream *stream_of(reader *rd, int rank)
{
    if (rank < 0)
        rank = -1;
    if (rd->cap_streams && rd->streams[stream_slot(rd->streams, rd->cap_streams, rank)].used)
        return &rd->streams[stream_slot(rd->streams, rd->cap_streams, rank)];
    if (2 * (rd->n_streams + 1) > rd->cap_streams) {
        size_t cap = rd->cap_streams ? rd->cap_streams * 2 : 16;
        stream *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < rd->cap_streams; i++)
            if (rd->streams[i].used)
                t[stream_slot(t, cap, rd->streams[i].rank)] = rd->streams[i];
        free(rd->streams);
        rd->streams = t;
        rd->cap_streams = cap;
    }
    stream *st = &rd->streams[stream_slot(rd->streams, rd->cap_streams, rank)];
    st->used = 1;
    st->rank = rank;
    rd->n_streams++;
    return st;
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

/* The counters rank r logged for group pg (NULL: the default group), or with unplaced those of
 * a bare timeout line of group rank group_rank; made at the first. Borrowed (valid until the
 * next call); NULL on ENOMEM. */
static hdx_log_seq *seq_of(hdx_log_rank *r, const char *pg, int unplaced, int group_rank)
{
    for (size_t i = 0; i < r->n_seqs; i++) {
        hdx_log_seq *s = &r->seqs[i];
        if (s->unplaced == unplaced && (s->pg == NULL) == (pg == NULL) && (!pg || !strcmp(pg, s->pg)) &&
            (!unplaced || s->group_rank == group_rank))
            return s;
    }
    hdx_log_seq *s = hdx_append((void **)&r->seqs, &r->n_seqs, sizeof *s);
    if (!s || (pg && !(s->pg = strdup(pg))))
        return NULL;
    s->unplaced = unplaced;
    s->group_rank = group_rank;
    s->timed_out = s->enqueued = s->completed = HDX_UNKNOWN;
    return s;
}

/* A pattern whose line gives a group's work counters: last enqueued and last completed
 * (docs/design.md "Job logs"). */
static int is_counter_line(const char *pn)
{
    return !strcmp(pn, "nccl_work_progress") || !strcmp(pn, "nccl_work_failure") || !strcmp(pn, "nccl_work_update") ||
           !strcmp(pn, "nccl_dump_signal");
}

/*
 * The work counters of f (a watchdog timeout or a counter line) into rank r's counters of
 * f's group. A bare "[Rank n]" timeout line (the WorkNCCL timeout before it took the group's
 * "[PG ...]" prefix, as torch 2.4 prints it; n the rank in the work's group) is kept unplaced: it joins the "[PG ...]" line of the same
 * work and group rank when one comes, before or after it; else it is the default group's
 * when n is the global rank (torch before 2.3 names no group), and no group's otherwise.
 * 0 or -ENOMEM.
 */
static int summarise_seq(hdx_log_rank *r, const hdx_log_fact *f)
{
    const char *pg = f->default_pg == 0 ? f->pg : NULL;
    long long seq = hdx_log_fact_int(f, "seq", HDX_UNKNOWN);
    const char *op = hdx_log_fact_field(f, "op");
    hdx_log_seq *s = NULL;
    if (!strcmp(f->pattern, "nccl_watchdog_timeout")) {
        int bare = !f->pg;
        for (size_t i = 0; bare && !s && i < r->n_seqs; i++)
            if (!r->seqs[i].unplaced && r->seqs[i].group_rank == f->group_rank && r->seqs[i].timed_out == seq)
                s = &r->seqs[i];
        if (!s && !(s = seq_of(r, pg, bare, f->group_rank)))
            return -ENOMEM;
        s->timed_out = seq;
        free(s->op);
        s->op = NULL;
        return op && !(s->op = strdup(op)) ? -ENOMEM : 0;
    }
    /* a counter line without [PG ...] whose [Rank n] is not the global rank: a group's, not named */
    int bare_other = !f->pg && f->group_rank >= 0 && f->group_rank != f->rank;
    if (!(s = seq_of(r, pg, bare_other, f->group_rank)))
        return -ENOMEM;
    if (f->group_rank >= 0)
        s->group_rank = f->group_rank;
    s->enqueued = hdx_log_fact_int(f, "enqueued", HDX_UNKNOWN);
    s->completed = hdx_log_fact_int(f, "completed", HDX_UNKNOWN);
    if (s->timed_out == HDX_UNKNOWN && seq != HDX_UNKNOWN && s->enqueued >= seq)
        s->timed_out = seq;
    /* an unplaced timeout line of this work: this line names its group */
    size_t at = (size_t)(s - r->seqs);
    for (size_t i = 0; !bare_other && seq != HDX_UNKNOWN && i < r->n_seqs;) {
        hdx_log_seq *u = &r->seqs[i];
        if (!u->unplaced || u->group_rank != r->seqs[at].group_rank || u->timed_out != seq) {
            i++;
            continue;
        }
        hdx_log_seq *t = &r->seqs[at];
        t->timed_out = seq;
        if (!t->op) {
            t->op = u->op;
            u->op = NULL;
        }
        free(u->op);
        memmove(u, u + 1, (r->n_seqs - i - 1) * sizeof *u);
        r->n_seqs--;
        at -= at > i;
    }
    return 0;
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
    /* A non-default group's lines count when their global rank is known (a launcher prefix,
     * the file name, the group's printed members). */
    if (!strcmp(pn, "nccl_watchdog_timeout") || is_counter_line(pn)) {
        if (summarise_seq(r, f))
            return -ENOMEM;
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

/* Translate the [PG ... Rank n] prefix of f: a group rank of the default group is global. The
 * group is named by its GUID where the prefix has one (torch >= 2.5 "[PG ID i PG GUID g(desc)
 * Rank n]": the ID i counts the groups made on that rank, so two tensor-parallel groups print
 * the same ID; the GUID is the group's name, one per group), else by its number. */
static int translate_group(reader *rd, hdx_log_fact *f, int line_rank)
{
    const char *pg = hdx_log_fact_field(f, "pg"), *pg_name = hdx_log_fact_field(f, "pg_name");
    const char *guid = hdx_log_fact_field(f, "pg_guid");
    long long gr = hdx_log_fact_int(f, "group_rank", HDX_UNKNOWN);
    if (gr < 0 || gr > LOG_RANK_MAX) /* none, or none a job can have: as a launcher prefix's */
        return 0;
    f->group_rank = (int)gr;
    if (pg && *pg) {
        const char *id = guid && *guid ? guid : pg;
        f->pg = pg_name && *pg_name ? hdx_asprintf("%s (%s)", id, pg_name) : strdup(id);
        f->default_pg = !strcmp(pg, "0") || (pg_name && !strcmp(pg_name, "default_pg"));
    } else {
        f->default_pg = HDX_UNKNOWN; /* only [Rank n]: PyTorch before 2.3; the watchdog's timeout line still (2.11) */
    }
    if (line_rank >= 0) {
        if (f->default_pg == 1 && line_rank != f->group_rank)
            hdx_evidence_note(rd->ev, "%s:%ld: the launcher prefix says rank %d, the NCCL line of the default group "
                              "[Rank %d]; the prefix is used", rd->path, f->line, line_rank, f->group_rank);
        else if (f->default_pg == HDX_UNKNOWN && line_rank != f->group_rank && !rd->noted_bare++)
            hdx_evidence_note(rd->ev, "%s:%ld: the NCCL line's [Rank %d] is not the launcher prefix's rank %d: taken "
                              "as the rank in the group of its work (releases before the watchdog's timeout line "
                              "took the group's [PG ...] prefix print the group rank so), and the prefix's as the global rank", rd->path, f->line,
                              f->group_rank, line_rank);
        return 0;
    }
    long long global = hdx_log_fact_int(f, "global_rank", HDX_UNKNOWN);
    if (global >= 0 && global <= LOG_RANK_MAX) { /* the line says whose process it is */
        f->rank = (int)global;
        return 0;
    }
    if (f->default_pg == 0) {
        f->rank = HDX_UNKNOWN; /* hdx_log_pgroups translates it where the group's members are printed */
        return 0;
    }
    f->rank = f->group_rank;
    if (f->default_pg == HDX_UNKNOWN && !rd->noted_assumed++)
        hdx_evidence_note(rd->ev, "%s: NCCL lines without a [PG ...] prefix: their [Rank n] "
                          "taken as global ranks of the default process group", rd->path);
    return 0;
}

/* The next pattern of ps from *i on that matches text (bytes: its bytes_of), its groups in m,
 * or NULL; *i moves past it. Only patterns of file scope with file_scope, of the others
 * without; a pattern for tracebacks only within one (in_tb). */
static const pattern *next_match(const hdx_log_patterns *ps, size_t *i, const char *text, const uint64_t *bytes,
                                 int file_scope, int in_tb, regmatch_t *m)
{
    while (*i < ps->n) {
        const pattern *p = &ps->p[(*i)++];
        if (p->file_scope == file_scope && (in_tb || !p->in_traceback) && may_match(p, text, bytes) &&
            regexec(&p->re, text, MAX_GROUPS, m, 0) == 0)
            return p;
    }
    return NULL;
}

/* Match line against every pattern; add the facts. 0 or -ENOMEM. */
static int match_line(reader *rd, const char *text, long lineno, int line_rank, stream *st, int in_tb)
{
    regmatch_t m[MAX_GROUPS];
    uint64_t bytes[4];
    bytes_of(text, bytes);
    size_t i = 0;
    for (const pattern *p; (p = next_match(rd->ps, &i, text, bytes, 0, in_tb, m));) {
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
        if (f->rank < 0 && own >= 0 && own <= LOG_RANK_MAX) {
            f->rank = (int)own;
            /* "on rank: N" at the end of a traceback: the traceback was that rank's */
            size_t self = (size_t)(f - rd->ev->log_facts);
            for (size_t k = st->tb_first; in_tb && st->tb_id && k < self; k++)
                if (rd->ev->log_facts[k].traceback == st->tb_id && rd->ev->log_facts[k].rank < 0 &&
                    !strcmp(rd->ev->log_facts[k].file, rd->path))
                    rd->ev->log_facts[k].rank = f->rank;
            if (in_tb && st->tb_id)
                st->tb_first = self; /* those before have their rank now: not walked again */
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

/* rank's summary, looked up once per stream (st, the stream of the line, may be another
 * rank's: an unprefixed line that names its rank). NULL on ENOMEM. */
static hdx_log_rank *log_rank_of(reader *rd, stream *st, int rank, const char *from)
{
    if (st->rank == rank && st->log_rank && st->log_rank <= rd->ev->n_log_ranks &&
        rd->ev->log_ranks[st->log_rank - 1].rank == rank)
        return &rd->ev->log_ranks[st->log_rank - 1];
    hdx_log_rank *r = log_rank_get(rd->ev, rank, from);
    if (r && st->rank == rank)
        st->log_rank = (size_t)(r - rd->ev->log_ranks) + 1;
    return r;
}

/* Does text hold a clock, "hh:mm:ss" (what every TIME_RE match holds)? A cheap test that
 * spares the regex most lines of a log. */
static int has_clock(const char *text)
{
    for (const char *c = strchr(text, ':'); c; c = strchr(c + 1, ':'))
        if (c - text >= 2 && isdigit((unsigned char)c[-1]) && isdigit((unsigned char)c[-2]) &&
            isdigit((unsigned char)c[1]) && isdigit((unsigned char)c[2]) && c[3] == ':')
            return 1;
    return 0;
}

/* A line of rank's into its summary: text (without prefixes) its last line, and the time stamp
 * in it or, when it has none, the container runtime's in stamped (the line as read; NULL: none). */
static int note_line(reader *rd, stream *st, int rank, const char *text, const char *stamped, long lineno,
                     const char *from)
{
    hdx_log_rank *r = log_rank_of(rd, st, rank, from);
    if (!r)
        return -ENOMEM;
    regmatch_t m[5];
    char *t = NULL;
    const char *clock = has_clock(text) ? text : stamped;
    if (clock && regexec(&rd->time_re, clock, 5, m, 0) == 0)
        t = strndup(clock + m[0].rm_so, (size_t)(m[0].rm_eo - m[0].rm_so));
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

/*
 * A log's lines, read a chunk at a time: at most LOG_LINE_MAX bytes of each are kept (the
 * rest is skipped and its length counted), and a run of NUL bytes (what a node crash leaves
 * in a file on NFS or Lustre, or a sparse file's hole) ends a line as one gap, however long.
 * Memory: one chunk and one line.
 */
typedef struct line_in {
    int fd;
    char chunk[LOG_CHUNK];
    size_t pos, end;
    int eof, in_nul;
    int cr;               /* the last byte read was a '\r' inside a line */
    long lines;           /* lines returned */
    uint64_t run;         /* NULs of the run being skipped */
    size_t nul_runs;      /* runs of NUL bytes, each read as one line end */
    uint64_t nul_longest; /* the longest run's length, */
    long nul_longest_at;  /* and the line it ends */
    char line[LOG_LINE_MAX + 1];
    size_t len;  /* bytes in line */
    size_t full; /* the line's length before it was cut */
} line_in;

static void line_in_start(line_in *li, int fd)
{
    li->fd = fd;
    li->pos = li->end = 0;
    li->eof = li->in_nul = li->cr = 0;
    li->lines = 0;
    li->run = li->nul_runs = li->nul_longest = 0;
    li->nul_longest_at = 0;
}

static void nul_run_end(line_in *li)
{
    li->in_nul = 0;
    li->nul_runs++;
    if (li->run > li->nul_longest) {
        li->nul_longest = li->run;
        li->nul_longest_at = li->lines;
    }
}

/* The next line into li->line (NUL-terminated, without its '\r\n'). 1, 0 at the end, or -errno. */
static int line_next(line_in *li)
{
    int any = 0;
    li->len = li->full = 0;
    for (;;) {
        if (li->pos == li->end) {
            if (li->eof) {
                if (li->in_nul)
                    nul_run_end(li);
                break;
            }
            ssize_t r = read(li->fd, li->chunk, sizeof li->chunk);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -errno;
            li->eof = r == 0;
            li->pos = 0;
            li->end = (size_t)r;
            continue;
        }
        const char *p = li->chunk + li->pos, *e = li->chunk + li->end;
        if (li->in_nul) {
            uint64_t w;
            while (p + sizeof w <= e && (memcpy(&w, p, sizeof w), !w)) /* a hole: 8 bytes a step */
                p += sizeof w;
            while (p < e && !*p)
                p++;
            li->run += (uint64_t)(p - (li->chunk + li->pos));
            li->pos = (size_t)(p - li->chunk);
            if (p == e)
                continue;
            nul_run_end(li);
        }
        if (li->cr) {
            li->cr = 0;
            if (*p != '\n' && *p) { /* a carriage return alone: what follows overwrites the line's text
                                       (a progress bar's updates, then the line it ends on), as on a
                                       terminal; the prefixes the line began with stay */
                li->line[li->len] = 0;
                size_t keep = hdx_runtime_stamp(li->line), w, at, d;
                keep += hdx_launcher_prefix(li->line + keep, &w, &at, &d);
                li->len = li->full = keep;
            }
        }
        const char *s = p;
        while (p < e && *p != '\n' && *p != '\r' && *p)
            p++;
        size_t n = (size_t)(p - s), room = LOG_LINE_MAX - li->len;
        memcpy(li->line + li->len, s, n < room ? n : room);
        li->len += n < room ? n : room;
        li->full += n;
        li->pos = (size_t)(p - li->chunk);
        any = 1;
        if (p < e && *p == '\r') {
            li->cr = 1;
            li->pos++;
            continue;
        }
        if (p < e) {
            li->in_nul = !*p;
            li->run = 1;
            li->pos++;
            break;
        }
    }
    li->cr = 0;
    if (!any)
        return 0;
    li->line[li->len] = 0;
    li->lines++;
    return 1;
}

/* The rank a launcher prefix's digits name, or HDX_UNKNOWN beyond LOG_RANK_MAX. */
static int prefix_rank(const char *d, size_t n)
{
    long v = 0;
    for (size_t i = 0; i < n; i++)
        if ((v = v * 10 + (d[i] - '0')) > LOG_RANK_MAX)
            return HDX_UNKNOWN;
    return (int)v;
}

/* The values that lines of scope "file" patterns give (logs.json "about"), by field name. */
enum { ID_RANK, ID_NODE_RANK, ID_LOCAL_RANK, ID_LOCAL_WORLD_SIZE, ID_SLURM_PROCID, ID_SLURM_NODEID, ID_SLURM_LOCALID,
       ID_SLURM_NTASKS_PER_NODE, ID_N };
static const char *const id_names[ID_N] = {"rank",         "node_rank",    "local_rank",    "local_world_size",
                                           "slurm_procid", "slurm_nodeid", "slurm_localid", "slurm_ntasks_per_node"};

typedef struct id_value {
    int v;          /* the first value a line gave */
    long line;      /* that line's number, 0: no line gave one */
    int other;      /* a second value, HDX_UNKNOWN: none */
    long other_line;
    char text[81];  /* the head of the first line, for a note */
} id_value;

/* The values a line of a file without launcher prefixes gives, into ids[ID_N]. */
static void id_line(const hdx_log_patterns *ps, id_value *ids, const char *line, long lineno)
{
    regmatch_t m[MAX_GROUPS];
    uint64_t bytes[4];
    bytes_of(line, bytes);
    size_t i = 0;
    for (const pattern *p; (p = next_match(ps, &i, line, bytes, 1, 0, m));) {
        for (size_t k = 0; k < p->n_fields; k++) {
            const regmatch_t *g = &m[p->fields[k].group];
            size_t j = 0;
            while (j < ID_N && strcmp(id_names[j], p->fields[k].name))
                j++;
            int v = j < ID_N && g->rm_so >= 0 && g->rm_eo > g->rm_so
                        ? prefix_rank(line + g->rm_so, (size_t)(g->rm_eo - g->rm_so)) : HDX_UNKNOWN;
            if (v == HDX_UNKNOWN)
                continue;
            id_value *d = &ids[j];
            if (!d->line) {
                d->v = v;
                d->line = lineno;
                d->other = HDX_UNKNOWN;
                snprintf(d->text, sizeof d->text, "%.*s", (int)sizeof d->text - 1, line);
            } else if (d->v != v && d->other == HDX_UNKNOWN) {
                d->other = v;
                d->other_line = lineno;
            }
        }
    }
}

/* One value of ids for a rank: given by a line, and by no line otherwise. */
static int id_known(const id_value *ids, int j) { return ids[j].line && ids[j].other == HDX_UNKNOWN; }

/*
 * The rank that a file's own lines tell (docs/design.md "Job logs"): a printed rank (RANK,
 * rank=, the default group's NCCL prefix, ...), else torchrun's node rank x LOCAL_WORLD_SIZE +
 * LOCAL_RANK, else Slurm's SLURM_PROCID, else SLURM_NODEID x SLURM_NTASKS_PER_NODE +
 * SLURM_LOCALID (Slurm's default block distribution). HDX_UNKNOWN when none does; *how gets
 * rank_from's words, said (size bytes) where the lines say it. Notes where lines disagree.
 */
static int rank_of_ids(reader *rd, const id_value *ids, const char **how, char *said, size_t size)
{
    static const struct {
        int node, local, per;
        const char *how, *words;
    } products[] = {{ID_NODE_RANK, ID_LOCAL_RANK, ID_LOCAL_WORLD_SIZE, "node rank x nproc + local rank",
                     "node rank %d (line %ld) x nproc %d (LOCAL_WORLD_SIZE, line %ld) + local rank %d (line %ld)"},
                    {ID_SLURM_NODEID, ID_SLURM_LOCALID, ID_SLURM_NTASKS_PER_NODE,
                     "Slurm node id x tasks per node + local id",
                     "SLURM_NODEID %d (line %ld) x SLURM_NTASKS_PER_NODE %d (line %ld) + SLURM_LOCALID %d (line %ld)"}};
    int product[2] = {HDX_UNKNOWN, HDX_UNKNOWN};
    for (int j = 0; j < ID_N; j++)
        if (ids[j].line && ids[j].other != HDX_UNKNOWN)
            hdx_evidence_note(rd->ev, "%s: its lines give two values of %s (%d on line %ld, %d on line %ld): the file "
                              "is not taken as one rank's by them", rd->path, id_names[j], ids[j].v, ids[j].line,
                              ids[j].other, ids[j].other_line);
    for (int k = 0; k < 2; k++) {
        const id_value *n = &ids[products[k].node], *l = &ids[products[k].local], *p = &ids[products[k].per];
        if (id_known(ids, products[k].node) && id_known(ids, products[k].local) && id_known(ids, products[k].per) &&
            l->v < p->v && (long long)n->v * p->v + l->v <= LOG_RANK_MAX)
            product[k] = n->v * p->v + l->v;
    }
    if (id_known(ids, ID_RANK)) {
        if (product[0] != HDX_UNKNOWN && product[0] != ids[ID_RANK].v) /* Slurm's may differ: torchrun under srun */
            hdx_evidence_note(rd->ev, "%s: line %ld says rank %d, but %s is %d: the printed rank is used", rd->path,
                              ids[ID_RANK].line, ids[ID_RANK].v, products[0].how, product[0]);
        *how = "line";
        snprintf(said, size, "line %ld (\"%s\")", ids[ID_RANK].line, ids[ID_RANK].text);
        return ids[ID_RANK].v;
    }
    /* torchrun's node arithmetic, else SLURM_PROCID, else Slurm's node arithmetic */
    int k = product[0] != HDX_UNKNOWN ? 0 : id_known(ids, ID_SLURM_PROCID) ? -1 : product[1] != HDX_UNKNOWN ? 1 : -2;
    if (k >= 0) {
        const id_value *n = &ids[products[k].node], *l = &ids[products[k].local], *p = &ids[products[k].per];
        *how = products[k].how;
        snprintf(said, size, products[k].words, n->v, n->line, p->v, p->line, l->v, l->line);
        return product[k];
    }
    if (k == -1) {
        *how = "line";
        snprintf(said, size, "line %ld (\"%s\")", ids[ID_SLURM_PROCID].line, ids[ID_SLURM_PROCID].text);
        return ids[ID_SLURM_PROCID].v;
    }
    return HDX_UNKNOWN;
}

static int read_lines(reader *rd, line_in *li)
{
    long lineno = 0;
    int got;
    while ((got = line_next(li)) > 0) {
        size_t stamp = hdx_runtime_stamp(li->line); /* a container runtime's, before all: its time is kept */
        char *line = li->line + stamp;
        lineno++;
        if (li->full > li->len && !rd->n_cut++) {
            rd->first_cut = lineno;
            rd->first_cut_len = li->full;
        }
        size_t word, at, digits, pre = hdx_launcher_prefix(line, &word, &at, &digits);
        int rank = HDX_UNKNOWN, slurm = pre && !word;
        const char *text = line, *from = NULL;
        if (pre && (rank = prefix_rank(line + at, digits)) == HDX_UNKNOWN && !rd->n_bad_prefix++)
            hdx_evidence_note(rd->ev, "%s:%ld: the launcher prefix %.*s%s names no possible rank (a rank is at most "
                              "%d): such lines taken as lines without a prefix", rd->path, lineno,
                              (int)(pre < 40 ? pre : 40), line, pre > 40 ? "..." : "", LOG_RANK_MAX);
        if (rank != HDX_UNKNOWN) {
            text = line + pre;
            if (*text == ' ')
                text++;
            from = "prefix";
            if (slurm && !rd->noted_role++)
                hdx_evidence_note(rd->ev, "%s: Slurm's task-id prefixes (srun --label, \"%d: \") taken as global "
                                  "ranks", rd->path, rank);
            else if (!slurm && strncmp(line + at - word, "rank", 4) && !rd->noted_role++)
                hdx_evidence_note(rd->ev, "%s: torchrun's [%.*s%d]: prefixes taken as global ranks (on one node "
                                  "they are also the local ranks)", rd->path, (int)word, line + at - word, rank);
        } else if (rd->file_rank >= 0) {
            rank = rd->file_rank;
            from = rd->file_rank_from;
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
        if (*text && match_line(rd, text, lineno, rank, st, in_tb))
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
            if (note_line(rd, st, rank, text, stamp ? li->line : NULL, lineno, from))
                return -ENOMEM;
            if (rd->ev->n_log_facts > before) {
                hdx_log_rank *r = log_rank_of(rd, st, rank, from);
                if (!r)
                    return -ENOMEM;
                free(r->last_pattern);
                r->last_pattern = strdup(rd->ev->log_facts[rd->ev->n_log_facts - 1].pattern);
            }
        }
    }
    return got;
}

static int reader_init(reader *rd, const hdx_log_patterns *ps, hdx_evidence *ev, const char *path)
{
    memset(rd, 0, sizeof *rd);
    rd->ps = ps;
    rd->ev = ev;
    rd->path = path;
    rd->file_rank = rd->block_rank = rd->only_rank = HDX_UNKNOWN;
    return regcomp(&rd->time_re, TIME_RE, REG_EXTENDED) ? -ENOMEM : 0;
}

static void reader_fini(reader *rd)
{
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
        rank = prefix_rank(base + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so)); /* beyond LOG_RANK_MAX: none */
    regfree(&re);
    return rank;
}

/* A role from a group description Megatron gives its groups (logs.h). */
const char *hdx_log_role_of_desc(const char *desc)
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

/* The global rank torch printed for place group_rank of group pg (its "initialization options"
 * line), HDX_UNKNOWN when none or when two processes claim the place (torch 2.2 and 2.3 number
 * groups per rank: one number, several groups); *size: the group's size it printed, or 0. */
static int printed_member(const hdx_evidence *ev, const size_t *init, size_t n_init, const char *pg, int group_rank,
                          size_t *size)
{
    int global = HDX_UNKNOWN;
    *size = 0;
    for (size_t k = 0; k < n_init; k++) {
        const hdx_log_fact *g = &ev->log_facts[init[k]];
        if (!g->pg || strcmp(g->pg, pg))
            continue;
        long long n = hdx_log_fact_int(g, "group_size", 0);
        *size = n > 0 && n <= LOG_RANK_MAX + 1 ? (size_t)n : *size;
        if (g->group_rank != group_rank || g->rank < 0 || group_rank < 0)
            continue;
        if (global != HDX_UNKNOWN && global != g->rank)
            return HDX_UNKNOWN;
        global = g->rank;
    }
    return global;
}

/* The lines of a group whose global rank no prefix gave, translated through the members torch
 * printed (printed_member), and summarised; a note for the first left as a group rank. */
static int translate_members(hdx_evidence *ev, const size_t *init, size_t n_init)
{
    reader rd;
    memset(&rd, 0, sizeof rd);
    const hdx_log_fact *left = NULL;
    for (size_t i = 0; i < ev->n_log_facts; i++) {
        hdx_log_fact *f = &ev->log_facts[i];
        if (f->rank >= 0 || !f->pg || f->default_pg != 0 || f->group_rank < 0)
            continue;
        size_t size;
        int global = printed_member(ev, init, n_init, f->pg, f->group_rank, &size);
        if (global == HDX_UNKNOWN) {
            left = left ? left : f;
            continue;
        }
        f->rank = global;
        if (summarise_fact(ev, f, &rd))
            return -ENOMEM;
    }
    if (left && hdx_evidence_note(ev, "%s: NCCL lines of process group %s name group ranks (e.g. Rank %d), which "
                                  "cannot be turned into global ranks: no launcher prefix, and no line gives the "
                                  "group's members (ProcessGroupNCCL's initialization options, printed at "
                                  "TORCH_CPP_LOG_LEVEL=INFO); kept as group ranks", left->file, left->pg,
                                  left->group_rank) < 0)
        return -ENOMEM;
    return 0;
}

int hdx_log_pgroups(hdx_evidence *ev)
{
    size_t *init = NULL, n_init = 0;
    for (size_t i = 0; i < ev->n_log_facts; i++)
        if (!strcmp(ev->log_facts[i].pattern, "nccl_init_options")) {
            size_t *slot = hdx_append((void **)&init, &n_init, sizeof *slot);
            if (!slot) {
                free(init);
                return -ENOMEM;
            }
            *slot = i;
        }
    if (translate_members(ev, init, n_init)) {
        free(init);
        return -ENOMEM;
    }
    char *done = calloc(ev->n_log_facts ? ev->n_log_facts : 1, 1);
    int *ranks = NULL;
    size_t cap = 0;
    int rc = done ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < ev->n_log_facts; i++) {
        const hdx_log_fact *f = &ev->log_facts[i];
        if (done[i] || !f->pg || f->rank < 0 || f->group_rank < 0)
            continue;
        /* every line of this group whose global rank is known places one member */
        size_t size = 0, lines = 0;
        for (size_t k = i; k < ev->n_log_facts; k++) {
            const hdx_log_fact *g = &ev->log_facts[k];
            if (!g->pg || g->rank < 0 || g->group_rank < 0 || strcmp(g->pg, f->pg))
                continue;
            done[k] = 1;
            lines++;
            if ((size_t)g->group_rank >= size)
                size = (size_t)g->group_rank + 1;
        }
        size_t printed;
        printed_member(ev, init, n_init, f->pg, HDX_UNKNOWN, &printed);
        if (size > lines || (printed && printed != size) || size < 2)
            continue; /* fewer lines than members (the printed size, else the highest place): not known whole;
                         and one member alone waits for nobody */
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
            clash |= ranks[g->group_rank] != HDX_UNKNOWN && ranks[g->group_rank] != g->rank;
            ranks[g->group_rank] = g->rank;
        }
        size_t known = 0;
        while (known < size && ranks[known] != HDX_UNKNOWN)
            known++;
        if (clash || known < size)
            continue; /* a member whose line is missing: the group is not known whole */
        const char *desc = hdx_log_fact_field(f, "pg_name");
        int r = hdx_evidence_add_pgroup(ev, f->pg, ranks, size, desc && *desc ? desc : NULL, hdx_log_role_of_desc(desc),
                                        f->default_pg == 1);
        rc = r == -ENOMEM ? r : 0;
    }
    free(done);
    free(ranks);
    free(init);
    return rc;
}

int hdx_log_load(const hdx_log_patterns *ps, const char *path, hdx_evidence *ev, char **err)
{
    return hdx_log_load_ranked(ps, path, ev, NULL, err);
}

/* A file that analyze may read: a regular file, opened without blocking (a FIFO's open waits
 * for a writer). An fd, or -errno with *err: -EINVAL for a FIFO, socket or device. */
static int open_log(const char *path, char **err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        *err = hdx_asprintf("%s: cannot read: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        *err = hdx_asprintf("%s: not a regular file (%s): a job log is read from a file; copy it into one first",
                            path, hdx_file_kind(st.st_mode));
        return -EINVAL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int hdx_log_load_ranked(const hdx_log_patterns *ps, const char *path, hdx_evidence *ev, int *only_rank, char **err)
{
    return hdx_log_load_hinted(ps, path, NULL, ev, only_rank, err);
}

int hdx_log_load_hinted(const hdx_log_patterns *ps, const char *path, hdx_log_hint *hint, hdx_evidence *ev,
                        int *only_rank, char **err)
{
    if (only_rank)
        *only_rank = HDX_UNKNOWN;
    int fd = open_log(path, err);
    if (fd < 0)
        return fd;
    line_in *li = malloc(sizeof *li);
    reader rd;
    int r = li ? reader_init(&rd, ps, ev, path) : -ENOMEM;
    if (r < 0) {
        free(li);
        close(fd);
        return r;
    }
    /* A file with no launcher prefix on any line is one rank's file when its own lines tell the rank
     * (patterns of scope "file"), else when its place or its name does; lines and name that
     * disagree are said in a note (docs/design.md "Job logs"). */
    int prefixed = 0;
    id_value ids[ID_N] = {{0}};
    line_in_start(li, fd);
    while (!prefixed && (r = line_next(li)) > 0) {
        const char *body = li->line + hdx_runtime_stamp(li->line);
        prefixed = hdx_launcher_prefix(body, &(size_t){0}, &(size_t){0}, &(size_t){0}) > 0;
        if (!prefixed)
            id_line(ps, ids, body, li->lines);
    }
    if (r >= 0 && lseek(fd, 0, SEEK_SET) != 0)
        r = -errno;
    if (hint)
        hint->used = 0;
    int place = hint && hint->rank >= 0 && hint->rank <= LOG_RANK_MAX ? hint->rank : HDX_UNKNOWN;
    int name = place == HDX_UNKNOWN ? rank_from_name(path) : HDX_UNKNOWN;
    const char *how = NULL, *place_words = place != HDX_UNKNOWN ? (hint->why ? hint->why : "its path") : "the file name";
    char said[200];
    int own = r >= 0 && !prefixed ? rank_of_ids(&rd, ids, &how, said, sizeof said) : HDX_UNKNOWN;
    int other = place != HDX_UNKNOWN ? place : name;
    if (own >= 0) {
        rd.file_rank = own;
        if (other >= 0 && other != own) {
            snprintf(rd.file_rank_from, sizeof rd.file_rank_from, "%s; %s says rank %d", how,
                     place != HDX_UNKNOWN ? "its place" : "its file name", other);
            hdx_evidence_note(ev, "%s: its lines and its name disagree: %s says rank %d, %s rank %d; the lines' "
                              "rank %d is used (a file renamed or copied from another rank's, or a launcher that "
                              "numbers otherwise: check which is right)", path, said, own, place_words, other, own);
        } else {
            snprintf(rd.file_rank_from, sizeof rd.file_rank_from, "%s", how);
            hdx_evidence_note(ev, "%s: no rank prefix in the file; its lines taken as rank %d's, from %s%s", path,
                              own, said, other == own ? ", as its name says too" : "");
        }
    } else if (r >= 0 && !prefixed && place != HDX_UNKNOWN) {
        rd.file_rank = place;
        hint->used = 1;
        snprintf(rd.file_rank_from, sizeof rd.file_rank_from, "file name");
        hdx_evidence_note(ev, "%s: no rank prefix in the file; its lines taken as rank %d's, from %s", path,
                          rd.file_rank, place_words);
    } else if (r >= 0 && !prefixed && name >= 0) {
        rd.file_rank = name;
        snprintf(rd.file_rank_from, sizeof rd.file_rank_from, "file name");
        hdx_evidence_note(ev, "%s: no rank prefix in the file; its lines taken as rank %d's, from the file name",
                          path, rd.file_rank);
    }
    if (r >= 0) {
        line_in_start(li, fd);
        r = read_lines(&rd, li);
    }
    if (r == 0 && rd.n_cut == 1 &&
        hdx_evidence_note(ev, "%s:%ld: a line of %zu bytes: only its first %d bytes read", path, rd.first_cut,
                          rd.first_cut_len, LOG_LINE_MAX) < 0)
        r = -ENOMEM;
    if (r == 0 && rd.n_cut > 1 &&
        hdx_evidence_note(ev, "%s:%ld: a line of %zu bytes, and %zu more lines longer than %d bytes: only the "
                          "first %d bytes of each read", path, rd.first_cut, rd.first_cut_len, rd.n_cut - 1,
                          LOG_LINE_MAX, LOG_LINE_MAX) < 0)
        r = -ENOMEM;
    if (r == 0 && li->nul_runs &&
        hdx_evidence_note(ev, "%s:%ld: %llu NUL bytes (a hole, as a node crash leaves in a file on NFS or Lustre) "
                          "read as one line end%s", path, li->nul_longest_at, (unsigned long long)li->nul_longest,
                          li->nul_runs > 1 ? ", as are the file's other runs of NULs" : "") < 0)
        r = -ENOMEM;
    if (r == 0 && only_rank && !rd.several)
        *only_rank = rd.only_rank;
    reader_fini(&rd);
    free(li);
    close(fd);
    if (r < 0 && !*err)
        *err = hdx_asprintf("%s: %s", path, strerror(-r));
    return r;
}

/* Does a line of buf[0..n) (NUL-terminated, modified) match a pattern? A cut first or
 * last line (cut_head, cut_tail) is not judged. As hdx_log_load reads them: a run of NULs
 * ends a line, and a line is read up to LOG_LINE_MAX bytes. */
static int sniff_lines(const hdx_log_patterns *ps, char *buf, size_t n, int cut_head,
                       int cut_tail)
{
    char *p = buf, *e = buf + n;
    if (cut_head) {
        while (p < e && *p != '\n' && *p)
            p++;
        p++;
    }
    while (p < e) {
        char *line = p;
        while (p < e && *p != '\n' && *p)
            p++;
        if (p == e && cut_tail)
            break;
        *p = 0; /* buf[n] is 0 already */
        if (p > line && p[-1] == '\r')
            p[-1] = 0; /* CRLF */
        for (p++; p < e && !*p;)
            p++;
        if (!*line)
            continue;
        size_t word, at, digits;
        line += hdx_runtime_stamp(line);
        char *text = line + hdx_launcher_prefix(line, &word, &at, &digits);
        char *cr = strrchr(text, '\r'); /* as line_next reads it: the text after the last one */
        if (cr)
            text = cr + 1;
        if (text > line && *text == ' ')
            text++;
        if (strlen(text) > LOG_LINE_MAX)
            text[LOG_LINE_MAX] = 0;
        uint64_t set[4];
        bytes_of(text, set); /* once per line, not once per pattern */
        for (size_t i = 0; i < ps->n; i++)
            if (!ps->p[i].in_traceback && may_match(&ps->p[i], text, set) &&
                regexec(&ps->p[i].re, text, 0, NULL, 0) == 0)
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
    if (!buf) {
        fclose(f);
        return -ENOMEM;
    }
    /* The head, then the tail: a run's watchdog lines come at its end, after megabytes of
     * training output. */
    size_t n = fread(buf, 1, SNIFF_BYTES, f);
    buf[n] = 0;
    int found = sniff_lines(ps, buf, n, 0, n == SNIFF_BYTES);
    if (!found && n == SNIFF_BYTES && fseeko(f, -(off_t)SNIFF_BYTES, SEEK_END) == 0 && ftello(f) >= (off_t)SNIFF_BYTES) {
        n = fread(buf, 1, SNIFF_BYTES, f);
        buf[n] = 0;
        found = sniff_lines(ps, buf, n, 1, 0);
    }
    fclose(f);
    free(buf);
    return found;
}
