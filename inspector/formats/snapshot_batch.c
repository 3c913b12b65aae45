/*
 * Many snapshot, report or frames files loaded at once (snapshot.h, hdx_snapshot_batch):
 * threads take the next file in line, each document into an evidence of its own; the caller
 * takes the files in order and merges.
 */
#include "formats/snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "formats/frames.h"
#include "formats/json_arena.h"
#include "model/util.h"

/* One document of text (len bytes; NULL: the file at d->name) into d. 0 or -ENOMEM. */
static int load_doc(hdx_loaded_doc *d, const char *text, size_t len)
{
    if (!(d->ev = hdx_evidence_new()))
        return -ENOMEM;
    d->rc = text ? hdx_snapshot_load_text(text, len, d->name, d->ev, &d->err)
                 : hdx_snapshot_load(d->name, d->ev, &d->err);
    if (d->rc < 0) {
        hdx_evidence_free(d->ev);
        d->ev = NULL;
    }
    return d->rc == -ENOMEM ? -ENOMEM : 0;
}

int hdx_loaded_file_load(const char *path, int frames, hdx_loaded_file *out)
{
    memset(out, 0, sizeof *out);
    if (!frames) {
        if (!(out->docs = calloc(1, sizeof *out->docs)) || !(out->docs[0].name = strdup(path)))
            return -ENOMEM;
        out->n = 1;
        return load_doc(&out->docs[0], NULL, 0);
    }
    hdx_frames fr = {0};
    int r = out->rc = hdx_frames_read_file(path, HDX_SNAPSHOT_MAX_BYTES, &fr, &out->err);
    if (r == 0 && fr.n && !(out->docs = calloc(fr.n, sizeof *out->docs)))
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < fr.n; i++) {
        hdx_frames_doc *f = &fr.docs[i];
        hdx_loaded_doc *d = &out->docs[out->n++];
        if (!(d->name = hdx_asprintf("%s (%s)", path, f->id)))
            r = -ENOMEM;
        else if (!f->complete)
            d->incomplete = f->broken ? 2 : 1;
        else
            r = load_doc(d, f->text, f->len);
        free(f->text); /* the node's text, done with: 16 384 nodes' would add up */
        f->text = NULL;
    }
    hdx_frames_clear(&fr);
    return r;
}

void hdx_loaded_file_clear(hdx_loaded_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        free(f->docs[i].name);
        hdx_evidence_free(f->docs[i].ev);
        free(f->docs[i].err);
    }
    free(f->docs);
    free(f->err);
    memset(f, 0, sizeof *f);
}

struct hdx_snapshot_batch {
    const char *const *paths;
    const unsigned char *frames;
    size_t n, next;          /* next: the first file no thread has taken */
    hdx_loaded_file *files;  /* per file: what it gave, once loaded */
    int *rcs;                /* per file: hdx_loaded_file_load's result */
    unsigned char *done;     /* 1 loaded, 2 taken */
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t *threads;
    size_t n_threads;
};

/* File i, which this thread took in line, loaded and marked done. Called without the lock. */
static void load_one(hdx_snapshot_batch *b, size_t i)
{
    hdx_loaded_file f;
    int rc = hdx_loaded_file_load(b->paths[i], b->frames[i], &f);
    pthread_mutex_lock(&b->lock);
    b->files[i] = f;
    b->rcs[i] = rc;
    b->done[i] = 1;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

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
        load_one(b, i);
    }
    hdx_json_arena_release();
    return NULL;
}

hdx_snapshot_batch *hdx_snapshot_batch_start(const char *const *paths, const unsigned char *frames, size_t n,
                                             int threads)
{
    hdx_snapshot_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->paths = paths;
    b->frames = frames;
    b->n = n;
    if (threads < 1)
        threads = 1;
    if ((size_t)threads > n)
        threads = (int)n;
    if (!(b->files = calloc(n ? n : 1, sizeof *b->files)) || !(b->rcs = calloc(n ? n : 1, sizeof *b->rcs)) ||
        !(b->done = calloc(n ? n : 1, 1)) || !(b->threads = calloc((size_t)threads + 1, sizeof *b->threads)) ||
        pthread_mutex_init(&b->lock, NULL)) {
        free(b->files);
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

int hdx_snapshot_batch_take(hdx_snapshot_batch *b, size_t i, hdx_loaded_file *out)
{
    memset(out, 0, sizeof *out);
    if (!b || i >= b->n)
        return -EINVAL;
    pthread_mutex_lock(&b->lock);
    if (b->done[i] == 2) {
        pthread_mutex_unlock(&b->lock);
        return -EINVAL;
    }
    /* Next in line and no thread took it yet (or there is no thread): load it here. */
    if (!b->done[i] && (i == b->next || (!b->n_threads && i > b->next))) {
        if (i == b->next)
            b->next++;
        pthread_mutex_unlock(&b->lock);
        load_one(b, i);
        pthread_mutex_lock(&b->lock);
    }
    while (!b->done[i])
        pthread_cond_wait(&b->cond, &b->lock);
    int rc = b->rcs[i];
    *out = b->files[i];
    memset(&b->files[i], 0, sizeof b->files[i]);
    b->done[i] = 2;
    pthread_mutex_unlock(&b->lock);
    return rc == -ENOMEM ? -ENOMEM : 0;
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
    for (size_t i = 0; i < b->n; i++)
        hdx_loaded_file_clear(&b->files[i]);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
    free(b->files);
    free(b->rcs);
    free(b->done);
    free(b->threads);
    free(b);
}
