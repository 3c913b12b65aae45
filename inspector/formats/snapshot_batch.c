/*
 * Many snapshot, report or frames files loaded at once (snapshot.h, hdx_snapshot_batch):
 * threads take the next file in line, each document into an evidence of its own, with the
 * thread's share (hdx_snapshot_share); the caller takes the files in order and merges, and
 * the shares end into what it merged them into.
 */
#include "formats/snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "formats/frames.h"
#include "model/json_arena.h"
#include "model/util.h"

/* One document of text (len bytes; NULL: the file at d->name) into d, with share. 0 or -ENOMEM. */
static int load_doc(hdx_loaded_doc *d, const char *text, size_t len, hdx_snapshot_share *share)
{
    if (!(d->ev = hdx_evidence_new()))
        return -ENOMEM;
    d->rc = text ? hdx_snapshot_load_text_shared(text, len, d->name, d->ev, share, &d->err)
                 : hdx_snapshot_load_shared(d->name, d->ev, share, &d->err);
    if (d->rc < 0) {
        hdx_evidence_free(d->ev);
        d->ev = NULL;
    }
    return d->rc == -ENOMEM ? -ENOMEM : 0;
}

int hdx_loaded_file_load(const char *path, int frames, hdx_snapshot_share *share, hdx_loaded_file *out)
{
    memset(out, 0, sizeof *out);
    if (!frames) {
        if (!(out->docs = calloc(1, sizeof *out->docs)) || !(out->docs[0].name = strdup(path)))
            return -ENOMEM;
        out->n = 1;
        return load_doc(&out->docs[0], NULL, 0, share);
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
            r = load_doc(d, f->text, f->len, share);
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
    const char **paths;      /* borrowed: the caller's */
    unsigned char *frames;
    size_t n, cap, next;     /* n added of cap; next: the first file no thread has taken */
    int closed;              /* no file is added any more */
    hdx_loaded_file *files;  /* per file: what it gave, once loaded */
    int *rcs;                /* per file: hdx_loaded_file_load's result */
    unsigned char *done;     /* 1 loaded, 2 taken */
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t *threads;
    size_t n_threads;
    int want_threads;        /* at most; started as files are added, from the second on */
    struct worker {
        struct hdx_snapshot_batch *b;
        hdx_snapshot_share *share; /* what the files this thread loads share */
    } *workers;                    /* one per thread, and the caller's last */
    size_t n_workers;
};

/* File i, which this thread took in line, loaded with its share and marked done. Called
 * without the lock. */
static void load_one(hdx_snapshot_batch *b, size_t i, hdx_snapshot_share *share)
{
    hdx_loaded_file f;
    int rc = hdx_loaded_file_load(b->paths[i], b->frames[i], share, &f);
    pthread_mutex_lock(&b->lock);
    b->files[i] = f;
    b->rcs[i] = rc;
    b->done[i] = 1;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

static void *batch_worker(void *arg)
{
    struct worker *w = arg;
    hdx_snapshot_batch *b = w->b;
    for (;;) {
        pthread_mutex_lock(&b->lock);
        while (!b->stop && !b->closed && b->next >= b->n) /* the caller is still adding */
            pthread_cond_wait(&b->cond, &b->lock);
        size_t i = b->stop ? b->n : b->next;
        int have = i < b->n;
        if (have)
            b->next++;
        pthread_mutex_unlock(&b->lock);
        if (!have)
            break;
        load_one(b, i, w->share);
    }
    hdx_json_arena_release();
    return NULL;
}

/* b's arrays, shares and b itself (its threads joined, its files cleared), the shares ended into keep. */
static void batch_free(hdx_snapshot_batch *b, hdx_evidence *keep)
{
    for (size_t k = 0; b->workers && k < b->n_workers; k++)
        hdx_snapshot_share_end(b->workers[k].share, keep);
    free(b->paths);
    free(b->frames);
    free(b->files);
    free(b->rcs);
    free(b->done);
    free(b->threads);
    free(b->workers);
    free(b);
}

hdx_snapshot_batch *hdx_snapshot_batch_new(size_t cap, int threads)
{
    hdx_snapshot_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->cap = cap;
    b->want_threads = threads < 1 ? 1 : threads;
    if ((size_t)b->want_threads > cap)
        b->want_threads = (int)(cap ? cap : 1);
    b->n_workers = (size_t)b->want_threads + 1;
    size_t room = cap ? cap : 1;
    int ok = (b->paths = calloc(room, sizeof *b->paths)) && (b->frames = calloc(room, 1)) &&
             (b->files = calloc(room, sizeof *b->files)) && (b->rcs = calloc(room, sizeof *b->rcs)) &&
             (b->done = calloc(room, 1)) && (b->threads = calloc((size_t)b->want_threads, sizeof *b->threads)) &&
             (b->workers = calloc(b->n_workers, sizeof *b->workers));
    for (size_t k = 0; ok && k < b->n_workers; k++)
        ok = (b->workers[k] = (struct worker){.b = b, .share = hdx_snapshot_share_new()}).share != NULL;
    if (!ok || pthread_mutex_init(&b->lock, NULL)) {
        batch_free(b, NULL);
        errno = ENOMEM;
        return NULL;
    }
    pthread_cond_init(&b->cond, NULL);
    return b;
}

long hdx_snapshot_batch_add(hdx_snapshot_batch *b, const char *path, int frames)
{
    if (!b || b->closed || b->n >= b->cap)
        return -EINVAL;
    pthread_mutex_lock(&b->lock);
    size_t i = b->n++;
    b->paths[i] = path;
    b->frames[i] = frames != 0;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    /* As many threads as files, up to those wanted, from the second file on: one file gains
     * nothing from a thread (and no thread at all only makes take() load in the caller's). */
    size_t target = b->n < 2 ? 0 : b->n < (size_t)b->want_threads ? b->n : (size_t)b->want_threads;
    while (b->n_threads < target &&
           pthread_create(&b->threads[b->n_threads], NULL, batch_worker, &b->workers[b->n_threads]) == 0)
        b->n_threads++;
    return (long)i;
}

/* *flag (b's closed or stop) set under b's lock, and every waiting thread woken to see it. */
static void raise_flag(hdx_snapshot_batch *b, int *flag)
{
    pthread_mutex_lock(&b->lock);
    *flag = 1;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

void hdx_snapshot_batch_close(hdx_snapshot_batch *b)
{
    if (b)
        raise_flag(b, &b->closed);
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
        load_one(b, i, b->workers[b->n_workers - 1].share);
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

void hdx_snapshot_batch_free(hdx_snapshot_batch *b, hdx_evidence *keep)
{
    if (!b)
        return;
    raise_flag(b, &b->stop);
    for (size_t k = 0; k < b->n_threads; k++)
        pthread_join(b->threads[k], NULL);
    for (size_t i = 0; i < b->n; i++)
        hdx_loaded_file_clear(&b->files[i]);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
    batch_free(b, keep);
}
