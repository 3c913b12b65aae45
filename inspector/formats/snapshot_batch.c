/*
 * Many snapshot or report files loaded at once (snapshot.h, hdx_snapshot_batch): threads
 * take the next file in line, each into an evidence of its own; the caller takes them in
 * order and merges.
 */
#include "formats/snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "formats/json_arena.h"

struct hdx_snapshot_batch {
    const char *const *paths;
    size_t n, next;      /* next: the first file no thread has taken */
    hdx_evidence **evs;  /* per file: its evidence once loaded (NULL after take) */
    char **errs;
    int *rcs;
    unsigned char *done;
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t *threads;
    size_t n_threads;
};

static void *batch_worker(void *arg)
{
    hdx_snapshot_batch *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->lock);
        size_t i = b->stop ? b->n : b->next;
        if (i < b->n)
            b->next++;
        pthread_mutex_unlock(&b->lock);
        if (i >= b->n)
            break;
        char *err = NULL;
        hdx_evidence *ev = hdx_evidence_new();
        int rc = ev ? hdx_snapshot_load(b->paths[i], ev, &err) : -ENOMEM;
        pthread_mutex_lock(&b->lock);
        b->evs[i] = ev;
        b->errs[i] = err;
        b->rcs[i] = rc;
        b->done[i] = 1;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
    }
    hdx_json_arena_release();
    return NULL;
}

hdx_snapshot_batch *hdx_snapshot_batch_start(const char *const *paths, size_t n, int threads)
{
    hdx_snapshot_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->paths = paths;
    b->n = n;
    if (threads < 1)
        threads = 1;
    if ((size_t)threads > n)
        threads = (int)n;
    if (!(b->evs = calloc(n ? n : 1, sizeof *b->evs)) || !(b->errs = calloc(n ? n : 1, sizeof *b->errs)) ||
        !(b->rcs = calloc(n ? n : 1, sizeof *b->rcs)) || !(b->done = calloc(n ? n : 1, 1)) ||
        !(b->threads = calloc((size_t)threads + 1, sizeof *b->threads)) || pthread_mutex_init(&b->lock, NULL)) {
        free(b->evs);
        free(b->errs);
        free(b->rcs);
        free(b->done);
        free(b->threads);
        free(b);
        errno = ENOMEM;
        return NULL;
    }
    pthread_cond_init(&b->cond, NULL);
    for (int k = 0; k < threads; k++)
        if (pthread_create(&b->threads[b->n_threads], NULL, batch_worker, b) == 0)
            b->n_threads++;
    return b; /* no thread at all: take() loads in the caller's */
}

int hdx_snapshot_batch_take(hdx_snapshot_batch *b, size_t i, hdx_evidence **out, char **err)
{
    *out = NULL;
    if (err)
        *err = NULL;
    if (!b || i >= b->n)
        return -EINVAL;
    pthread_mutex_lock(&b->lock);
    /* Next in line and no thread took it yet (or there is no thread): load it here. */
    if (!b->done[i] && (i == b->next || (!b->n_threads && i > b->next))) {
        if (i == b->next)
            b->next++;
        pthread_mutex_unlock(&b->lock);
        hdx_evidence *ev = hdx_evidence_new();
        char *e = NULL;
        int rc = ev ? hdx_snapshot_load(b->paths[i], ev, &e) : -ENOMEM;
        pthread_mutex_lock(&b->lock);
        b->evs[i] = ev;
        b->errs[i] = e;
        b->rcs[i] = rc;
        b->done[i] = 1;
    }
    while (!b->done[i])
        pthread_cond_wait(&b->cond, &b->lock);
    int rc = b->rcs[i];
    *out = b->evs[i];
    b->evs[i] = NULL;
    if (err)
        *err = b->errs[i];
    else
        free(b->errs[i]);
    b->errs[i] = NULL;
    pthread_mutex_unlock(&b->lock);
    if (rc < 0) {
        hdx_evidence_free(*out);
        *out = NULL;
    }
    return rc;
}

void hdx_snapshot_batch_free(hdx_snapshot_batch *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->stop = 1;
    pthread_mutex_unlock(&b->lock);
    for (size_t k = 0; k < b->n_threads; k++)
        pthread_join(b->threads[k], NULL);
    for (size_t i = 0; i < b->n; i++) {
        hdx_evidence_free(b->evs[i]);
        free(b->errs[i]);
    }
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
    free(b->evs);
    free(b->errs);
    free(b->rcs);
    free(b->done);
    free(b->threads);
    free(b);
}
