/* Frames (formats/frames.h): snapshots cut into short tagged lines come back whole from output
 * that a launcher (srun) mixed line by line and labelled, and a lost or reordered line is
 * noticed. On text written in the test: no Slurm, no process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/frames.h"

#include "check.h"

/* A JSON-like text of n bytes without newlines. */
static char *text_of(size_t n, char c)
{
    char *t = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        t[i] = (i % 97 == 0) ? ' ' : (char)(c + i % 7);
    t[n] = 0;
    return t;
}

/* The frames of (id, text) as lines: a heap array of heap strings without newlines. */
static char **lines_of(const char *id, const char *text, size_t *n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(hdx_frames_write(f, id, text, strlen(text)) == 0);
    fclose(f);
    char **lines = NULL;
    *n = 0;
    for (char *s = buf, *e; (e = strchr(s, '\n')); s = e + 1) {
        lines = realloc(lines, (*n + 1) * sizeof *lines);
        lines[(*n)++] = strndup(s, (size_t)(e - s));
    }
    free(buf);
    return lines;
}

static void feed(hdx_frames *fr, const char *label, const char *line)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s%s", label, line);
    CHECK(hdx_frames_feed(fr, buf, strlen(buf)) == 0);
}

static void free_lines(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

int main(void)
{
    char *a = text_of(5000, 'a'), *b = text_of(1234, 'k');
    size_t na, nb;
    char **la = lines_of("node1/4123", a, &na), **lb = lines_of("node2/77", b, &nb);
    CHECK(na == 5000 / HDX_FRAMES_CHUNK + 1 + 1); /* 11 chunks (the last one short) and the end line */
    for (size_t i = 0; i < na; i++)
        CHECK(strlen(la[i]) < 600); /* srun passes lines of up to 1 KiB whole */

    /* Mixed line by line, with srun's labels and other output between them. */
    hdx_frames fr = {0};
    feed(&fr, "", "srun: some message of the launcher");
    for (size_t i = 0; i < na || i < nb; i++) {
        if (i < nb)
            feed(&fr, "1: ", lb[i]);
        if (i < na)
            feed(&fr, "0: ", la[i]);
        feed(&fr, "0: ", "hangdx snapshot: a progress line");
    }
    CHECK(fr.n == 2);
    CHECK(fr.n == 2 && !strcmp(fr.docs[0].id, "node2/77") && !strcmp(fr.docs[1].id, "node1/4123"));
    CHECK(fr.n == 2 && fr.docs[0].complete && fr.docs[0].len == strlen(b) && !strcmp(fr.docs[0].text, b));
    CHECK(fr.n == 2 && fr.docs[1].complete && fr.docs[1].len == strlen(a) && !strcmp(fr.docs[1].text, a));
    hdx_frames_clear(&fr);
    CHECK(fr.n == 0 && fr.docs == NULL);

    /* A lost line: never complete. */
    for (size_t i = 0; i < na; i++)
        if (i != 3)
            feed(&fr, "node1: ", la[i]);
    CHECK(fr.n == 1 && !fr.docs[0].complete && fr.docs[0].broken);
    hdx_frames_clear(&fr);

    /* Two lines swapped: never complete. */
    for (size_t i = 0; i < na; i++)
        feed(&fr, "", la[i == 2 ? 3 : i == 3 ? 2 : i]);
    CHECK(fr.n == 1 && !fr.docs[0].complete);
    hdx_frames_clear(&fr);

    /* Output that ended early: no end line, not complete. */
    for (size_t i = 0; i + 1 < na; i++)
        feed(&fr, "", la[i]);
    CHECK(fr.n == 1 && !fr.docs[0].complete && !fr.docs[0].broken);
    hdx_frames_clear(&fr);

    /* An end line that disagrees with the bytes taken. */
    for (size_t i = 0; i + 1 < na; i++)
        feed(&fr, "", la[i]);
    feed(&fr, "", HDX_FRAMES_TAG " node1/4123 end 11 4999");
    CHECK(fr.n == 1 && !fr.docs[0].complete && fr.docs[0].broken);
    hdx_frames_clear(&fr);

    /* The empty text: one end line, complete. */
    size_t ne;
    char **le = lines_of("h/1", "", &ne);
    CHECK(ne == 1);
    feed(&fr, "", le[0]);
    CHECK(fr.n == 1 && fr.docs[0].complete && fr.docs[0].len == 0);
    hdx_frames_clear(&fr);
    free_lines(le, ne);

    /* Many nodes' lines mixed, round robin, as srun passes them on: each id finds its own
     * document (through the index of ids), in the order its first line came. */
    enum { NODES = 3000 };
    char *texts[NODES], **ls[NODES];
    size_t ns[NODES], most = 0;
    for (int k = 0; k < NODES; k++) {
        char id[32];
        snprintf(id, sizeof id, "node%04d/%d", k, 100 + k);
        texts[k] = text_of(300 + (size_t)k % 1100, (char)('a' + k % 20));
        ls[k] = lines_of(id, texts[k], &ns[k]);
        most = ns[k] > most ? ns[k] : most;
    }
    for (size_t i = 0; i < most; i++)
        for (int k = 0; k < NODES; k++)
            if (i < ns[k])
                feed(&fr, "7: ", ls[k][i]);
    CHECK(fr.n == NODES);
    int whole = 0;
    for (int k = 0; k < NODES && (size_t)k < fr.n; k++) {
        char id[32];
        snprintf(id, sizeof id, "node%04d/%d", k, 100 + k);
        whole += !strcmp(fr.docs[k].id, id) && fr.docs[k].complete && !strcmp(fr.docs[k].text, texts[k]);
    }
    CHECK(whole == NODES);
    hdx_frames_clear(&fr);
    CHECK(fr.n == 0 && fr.by_id.count == 0);
    for (int k = 0; k < NODES; k++) {
        free_lines(ls[k], ns[k]);
        free(texts[k]);
    }

    /* What cannot be framed. */
    FILE *devnull = fopen("/dev/null", "w");
    CHECK(hdx_frames_write(devnull, "a b", "{}", 2) == -EINVAL);
    CHECK(hdx_frames_write(devnull, "a", "{\n}", 3) == -EINVAL);
    fclose(devnull);

    free_lines(la, na);
    free_lines(lb, nb);
    free(a);
    free(b);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
