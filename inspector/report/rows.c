/*
 * The report's process rows (rows.h): the first rows in the caller's thread, until they have
 * given the rows' keys; the rest in blocks, each made by one of the row threads in its own
 * cJSON arena, and written by the caller in their order.
 */
#include "report/rows.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model/json_arena.h"
#include "model/jsonout.h"
#include "model/util.h"

#define BLOCK_ROWS 256 /* rows a thread makes at a time: ~0.7 MB of text */
#define AHEAD 4        /* blocks each thread may make ahead of the one being written */

cJSON *hdx_report_with_part(const hdx_evidence *ev, const hdx_process *p, cJSON *o)
{
    if (o)
        cJSON_AddItemToObjectCS(o, "part", hdx_json_str(hdx_process_part(ev, p)));
    return o;
}

/* Text that grows: heap, len bytes and a NUL. */
struct text {
    char *s;
    size_t len, cap;
};

/* a then b appended to t. 0 or -ENOMEM. */
static int text_add(struct text *t, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (hdx_reserve(&t->s, &t->cap, t->len + la + lb + 1) < 0)
        return -ENOMEM;
    memcpy(t->s + t->len, a, la);
    memcpy(t->s + t->len + la, b, lb + 1);
    t->len += la + lb;
    return 0;
}

struct rows {
    const hdx_evidence *ev;
    const hdx_stack_table *st;
    cJSON *pkeys, *tkeys; /* filled before the threads start: only read by them */
    size_t from;          /* the first process of the blocks */
    struct block {
        struct text text;
        int rc, done;
    } *blocks;
    size_t n_blocks, next, written; /* next: the first block no thread took; written: by the caller */
    size_t ahead;                   /* blocks taken and not yet written, at most */
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

/* p's row appended to out after sep. In this thread's arena (model/json_arena.h) once the
 * rows' keys are known, so that nothing made for the row outlives it: its stack classes are
 * the table's already. 0 or -ENOMEM. */
static int row_add(const struct rows *r, const hdx_process *p, const char *sep, struct text *out)
{
    int arena = r->pkeys->child && (!p->n_threads || r->tkeys->child) &&
                hdx_json_arena_begin();
    cJSON *o = hdx_report_with_part(r->ev, p, hdx_stack_table_process_json(r->st, p));
    if (o)
        o = hdx_process_row(o, r->pkeys, r->tkeys);
    char *s = o ? hdx_json_print(o, 0) : NULL;
    int rc = s ? text_add(out, sep, s) : -ENOMEM;
    if (arena) {
        hdx_json_arena_end(); /* o and s with it */
    } else {
        cJSON_Delete(o);
        cJSON_free(s);
    }
    return rc;
}

static void *rows_worker(void *arg)
{
    struct rows *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->stop && r->next < r->n_blocks && r->next >= r->written + r->ahead)
            pthread_cond_wait(&r->cond, &r->lock);
        if (r->stop || r->next >= r->n_blocks)
            break;
        struct block *b = &r->blocks[r->next++];
        size_t first = r->from + (size_t)(b - r->blocks) * BLOCK_ROWS, end = first + BLOCK_ROWS;
        if (end > r->ev->n_procs)
            end = r->ev->n_procs;
        pthread_mutex_unlock(&r->lock);
        int rc = 0;
        for (size_t i = first; !rc && i < end; i++)
            rc = row_add(r, &r->ev->procs[i], i ? ",\n\t\t" : "\n\t\t", &b->text);
        pthread_mutex_lock(&r->lock);
        b->rc = rc;
        b->done = 1;
        pthread_cond_broadcast(&r->cond);
    }
    pthread_mutex_unlock(&r->lock);
    hdx_json_arena_release();
    return NULL;
}

/* The text t to f, and freed. 0 or -EIO. */
static int put_text(FILE *f, struct text *t)
{
    int rc = t->len && fwrite(t->s, 1, t->len, f) != t->len ? -EIO : 0;
    free(t->s);
    memset(t, 0, sizeof *t);
    return rc;
}

/* The blocks of r by n threads (n >= 1), written to f in order as they come. 0 or -errno. */
static int blocks_write(FILE *f, struct rows *r, size_t n)
{
    pthread_t *tids = calloc(n, sizeof *tids);
    size_t started = 0;
    int rc = tids ? 0 : -ENOMEM;
    r->ahead = n * AHEAD;
    if (pthread_mutex_init(&r->lock, NULL) != 0)
        rc = -ENOMEM;
    else if (pthread_cond_init(&r->cond, NULL) != 0) {
        pthread_mutex_destroy(&r->lock);
        rc = -ENOMEM;
    }
    if (rc) {
        free(tids);
        return rc;
    }
    while (started < n && pthread_create(&tids[started], NULL, rows_worker, r) == 0)
        started++;
    if (!started) /* no thread: the caller makes every block, as one thread would */
        rc = -EAGAIN;
    for (size_t i = 0; !rc && i < r->n_blocks; i++) {
        struct block *b = &r->blocks[i];
        pthread_mutex_lock(&r->lock);
        while (!b->done)
            pthread_cond_wait(&r->cond, &r->lock);
        pthread_mutex_unlock(&r->lock);
        rc = b->rc ? b->rc : put_text(f, &b->text);
        pthread_mutex_lock(&r->lock);
        r->written++;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
    }
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(tids);
    return rc;
}

/* Rows [from, to) of r made here and written to f, one at a time. 0 or -errno. */
static int rows_here(FILE *f, const struct rows *r, size_t from, size_t to)
{
    int rc = 0;
    for (size_t i = from; !rc && i < to; i++) {
        struct text t = {0};
        rc = row_add(r, &r->ev->procs[i], i ? ",\n\t\t" : "\n\t\t", &t);
        rc = rc ? rc : put_text(f, &t);
        free(t.s);
    }
    return rc;
}

int hdx_report_rows_write(FILE *f, const hdx_evidence *ev, const hdx_stack_table *st, cJSON *pkeys, cJSON *tkeys,
                          int threads)
{
    struct rows r = {.ev = ev, .st = st, .pkeys = pkeys, .tkeys = tkeys};
    int cpus = hdx_cpus(threads);
    int rc = 0;
    /* The first rows here: the one that fills the keys comes before any other is made. */
    for (; !rc && r.from < ev->n_procs && (!pkeys->child || !tkeys->child); r.from++)
        rc = rows_here(f, &r, r.from, r.from + 1);
    r.n_blocks = (ev->n_procs - r.from + BLOCK_ROWS - 1) / BLOCK_ROWS;
    int here = 1; /* the rest made here: one CPU, or no thread to be had */
    if (!rc && cpus > 1 && r.n_blocks > 1 && (r.blocks = calloc(r.n_blocks, sizeof *r.blocks))) {
        rc = blocks_write(f, &r, (size_t)cpus < r.n_blocks ? (size_t)cpus : r.n_blocks);
        for (size_t i = 0; i < r.n_blocks; i++) /* those not written, after an error */
            free(r.blocks[i].text.s);
        free(r.blocks);
        here = rc == -EAGAIN;
        if (here)
            rc = 0;
    }
    if (!rc && here)
        rc = rows_here(f, &r, r.from, ev->n_procs);
    hdx_json_arena_release(); /* this thread's, of the rows made here */
    return rc;
}
