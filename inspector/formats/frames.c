#include "formats/frames.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "hangdx/fnv.h"
#include "model/util.h"

int hdx_frames_write(FILE *f, const char *id, const char *text, size_t len)
{
    if (strpbrk(id, " \t\n") || memchr(text, '\n', len))
        return -EINVAL;
    size_t seq = 0;
    for (size_t off = 0; off < len; off += HDX_FRAMES_CHUNK, seq++) {
        size_t n = len - off < HDX_FRAMES_CHUNK ? len - off : HDX_FRAMES_CHUNK;
        if (fprintf(f, "%s %s %zu ", HDX_FRAMES_TAG, id, seq) < 0 || fwrite(text + off, 1, n, f) != n ||
            fputc('\n', f) == EOF)
            return errno ? -errno : -EIO;
    }
    if (fprintf(f, "%s %s end %zu %zu\n", HDX_FRAMES_TAG, id, seq, len) < 0 || fflush(f) != 0)
        return errno ? -errno : -EIO;
    return 0;
}

static hdx_frames_doc *doc_of(hdx_frames *fr, const char *id, size_t idlen)
{
    uint64_t h = hdx_fnv1a(id, idlen, HDX_FNV1A_OFFSET_BASIS);
    size_t cur = 0, i;
    while ((i = hdx_index_find(&fr->by_id, h, &cur)) != HDX_INDEX_NONE)
        if (strlen(fr->docs[i].id) == idlen && !memcmp(fr->docs[i].id, id, idlen))
            return &fr->docs[i];
    if (hdx_index_reserve(&fr->by_id, fr->n + 1) < 0) /* then the insert below cannot fail */
        return NULL;
    hdx_frames_doc *d = hdx_append((void **)&fr->docs, &fr->n, sizeof *d);
    if (!d)
        return NULL;
    memset(d, 0, sizeof *d);
    if (!(d->id = strndup(id, idlen)) || !(d->text = strdup(""))) {
        free(d->id);
        fr->n--;
        return NULL;
    }
    d->cap = 1;
    hdx_index_insert(&fr->by_id, h, fr->n - 1);
    return d;
}

/* The next space-separated word of [*p, end): its start and length; *p moves past it and one space. */
static const char *word(const char **p, const char *end, size_t *len)
{
    const char *s = *p, *e = memchr(s, ' ', (size_t)(end - s));
    if (!e)
        e = end;
    *len = (size_t)(e - s);
    *p = e < end ? e + 1 : end;
    return s;
}

static int parse_size(const char *s, size_t len, size_t *v)
{
    if (!len || len > 18)
        return -1;
    *v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *v = *v * 10 + (size_t)(s[i] - '0');
    }
    return 0;
}

int hdx_frames_feed(hdx_frames *fr, const char *line, size_t len)
{
    static const char tag[] = HDX_FRAMES_TAG " ";
    const char *end = line + len, *p = memmem(line, len, tag, sizeof tag - 1);
    if (!p)
        return 0;
    p += sizeof tag - 1;
    size_t idlen, seqlen;
    const char *id = word(&p, end, &idlen), *seq = word(&p, end, &seqlen);
    if (!idlen || !seqlen)
        return 0;
    hdx_frames_doc *d = doc_of(fr, id, idlen);
    if (!d)
        return -ENOMEM;
    size_t n;
    if (seqlen == 3 && !memcmp(seq, "end", 3)) {
        size_t chunks, bytes, l1, l2;
        const char *a = word(&p, end, &l1), *b = word(&p, end, &l2);
        if (parse_size(a, l1, &chunks) || parse_size(b, l2, &bytes) || chunks != d->next_seq || bytes != d->len)
            d->broken = 1;
        else
            d->complete = !d->broken;
        return 0;
    }
    if (parse_size(seq, seqlen, &n) || n != d->next_seq || d->complete) {
        d->broken = 1;
        return 0;
    }
    size_t add = (size_t)(end - p);
    if (hdx_reserve(&d->text, &d->cap, d->len + add + 1) < 0)
        return -ENOMEM;
    memcpy(d->text + d->len, p, add);
    d->len += add;
    d->text[d->len] = 0;
    d->next_seq++;
    return 0;
}

void hdx_frames_clear(hdx_frames *fr)
{
    if (!fr)
        return;
    for (size_t i = 0; i < fr->n; i++) {
        free(fr->docs[i].id);
        free(fr->docs[i].text);
    }
    free(fr->docs);
    fr->docs = NULL;
    fr->n = 0;
    hdx_index_free(&fr->by_id);
}

int hdx_frames_sniff(const char *head, size_t n)
{
    return memmem(head, n < 65536 ? n : 65536, HDX_FRAMES_TAG " ", sizeof HDX_FRAMES_TAG " " - 1) != NULL;
}

int hdx_frames_read_file(const char *path, size_t max, hdx_frames *fr, char **err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        *err = hdx_asprintf("%s: %s", path, strerror(e));
        return -e;
    }
    char *line = NULL;
    size_t cap = 0, total = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
        total += (size_t)n;
        if (total > max) {
            rc = -EFBIG;
            *err = hdx_asprintf("%s: larger than %zu bytes: not read", path, max);
            break;
        }
        if (n > 0 && line[n - 1] == '\n')
            n--;
        rc = hdx_frames_feed(fr, line, (size_t)n);
    }
    if (rc == 0 && ferror(f)) {
        rc = -EIO;
        *err = hdx_asprintf("%s: read error", path);
    }
    if (rc == -ENOMEM && !*err)
        *err = hdx_asprintf("%s: out of memory", path);
    free(line);
    fclose(f);
    return rc;
}
