/*
 * Frames: one JSON document (a node's snapshot) as short lines that survive
 * srun and pdsh. srun passes a task's output on line by line, mixes the lines
 * of different tasks, and splits a line longer than its buffer (labelling each
 * piece), so a snapshot travels as short lines that survive all three:
 *   hangdx.frames/1 ID SEQ CHUNK      SEQ = 0, 1, ...; CHUNK: at most
 *                                     HDX_FRAMES_CHUNK bytes of compact JSON
 *   hangdx.frames/1 ID end N BYTES    after the N chunks of BYTES bytes in all
 * ID (host/pid of the writer) tells the documents apart. Anything before the
 * tag on a line (srun's "3: " label, pdsh's "node7: ") is ignored, as are
 * lines without the tag (other output of the task).
 * Written by `hangdx snapshot --frames`, taken apart by the Slurm collector
 * (gather/slurm.h) and by `hangdx analyze` (formats/inputs.h). No printing here.
 */
#ifndef HDX_FRAMES_H
#define HDX_FRAMES_H

#include <stddef.h>
#include <stdio.h>

#include "model/index.h"

#define HDX_FRAMES_TAG "hangdx.frames/1"
#define HDX_FRAMES_CHUNK 480 /* bytes of JSON per line; srun's buffers take lines of 1 KiB whole */

/*
 * Write text (len bytes, compact JSON without newlines) to f as the frames
 * of document id (no spaces or newlines in id), then fflush(f).
 * 0, -EINVAL for a text with a newline or an id with a space, or the
 * negative errno of the failed write.
 */
int hdx_frames_write(FILE *f, const char *id, const char *text, size_t len);

/* One document being put back together from its frames. */
typedef struct hdx_frames_doc {
    char *id;         /* heap */
    char *text;       /* heap, NUL-terminated, len bytes */
    size_t len;
    size_t cap;       /* bytes allocated for text: it grows by doubling, not a chunk at a time */
    size_t next_seq;  /* chunks taken so far */
    int complete;     /* its end line came and agreed with what was taken */
    int broken;       /* a chunk came out of order, or the end line disagreed */
} hdx_frames_doc;

typedef struct hdx_frames {
    hdx_frames_doc *docs; /* heap, in the order their first frame came */
    size_t n;
    hdx_index by_id;      /* the FNV-1a hash of a doc's id -> its index in docs: a line finds its
                             document in O(1), not by a scan of every node's (16 384 at scale) */
} hdx_frames;

/*
 * Take one line of output (len bytes, without its newline; need not be
 * NUL-terminated). Lines without HDX_FRAMES_TAG are ignored (returns 0);
 * a frame is added to its document. 0, or -ENOMEM.
 */
int hdx_frames_feed(hdx_frames *fr, const char *line, size_t len);

/* Free what fr holds and zero it. NULL is fine. */
void hdx_frames_clear(hdx_frames *fr);

/*
 * Does a file hold frames, such as the saved output of `pdsh ... hangdx snapshot --all
 * --frames`, from its first n bytes (head; 64 KiB are looked at): a line with HDX_FRAMES_TAG
 * among them? 1 or 0.
 */
int hdx_frames_sniff(const char *head, size_t n);

/*
 * Feed every line of the file at path (at most max bytes) to fr. 0, or a
 * negative errno (-EFBIG beyond max) with *err, a heap message naming path
 * that the caller frees.
 */
int hdx_frames_read_file(const char *path, size_t max, hdx_frames *fr, char **err);

#endif
