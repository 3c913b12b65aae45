/*
 * Small helpers shared by the inspector's modules: growing arrays, reading
 * small files, time. No module-specific logic belongs here.
 */
#ifndef HDX_UTIL_H
#define HDX_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Make room for one more element in a heap array of *n elements of elsize
 * bytes with capacity *cap, doubling as needed. The new element (index *n) is
 * zeroed and *n is incremented. Returns a pointer to it, or NULL (errno
 * ENOMEM) leaving the array as it was.
 */
void *hdx_grow(void **arr, size_t *n, size_t *cap, size_t elsize);

/* Room for need bytes in the heap buffer *buf of *cap bytes: reallocated to twice *cap, or to
 * need when that is more, when *cap is less than need. 0, or -ENOMEM leaving it as it was. */
int hdx_reserve(char **buf, size_t *cap, size_t need);

/* Arrays that grow one element at a time without a separate capacity: the
 * capacity is the next power of two of *n. Same contract as hdx_grow(). */
void *hdx_append(void **arr, size_t *n, size_t elsize);

/* strdup that accepts NULL (returns NULL). */
char *hdx_strdup(const char *s);

/* printf into a new heap string; NULL on ENOMEM. Caller frees. */
char *hdx_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Read a whole (small, e.g. /proc) file into a NUL-terminated heap buffer.
 * Stops at max bytes. *len (may be NULL) gets the byte count. Returns NULL
 * with errno set on failure. Caller frees.
 */
char *hdx_read_file(const char *path, size_t max, size_t *len);

/* The first bytes of the regular file at path, size of them or all it has, into buf: one open,
 * with O_NONBLOCK and O_NOCTTY so that a FIFO or a terminal given by mistake is not waited for
 * (nor read: it is no regular file), and reads until size or the end (a file system may give
 * less than asked per read). The bytes read (0 for an empty file), or -1 with errno set: not
 * openable, not a regular file (EINVAL), or a read failed. What the sniffers of the input
 * formats look at (formats/inputs.c). */
ssize_t hdx_read_head(const char *path, void *buf, size_t size);

/* What a file of this st_mode is, for a person: "a FIFO (named pipe)", "a socket", "a character
 * device", ... "a regular file". A static string. */
const char *hdx_file_kind(unsigned mode);

/* CLOCK_REALTIME / CLOCK_MONOTONIC in nanoseconds. */
int64_t hdx_now_ns(void);
int64_t hdx_mono_ns(void);

/* Format ns since the epoch as RFC 3339 UTC ("2026-11-29T18:40:27Z") into buf. */
void hdx_format_time(int64_t ns, char *buf, size_t size);

/* This host's name (gethostname), in a static buffer. */
const char *hdx_hostname(void);

/* The path of the running binary (readlink of /proc/self/exe, proc(5)), read once into a
 * static buffer; NULL when it cannot be read (errno set by readlink). Not thread-safe on the
 * first call. */
const char *hdx_self_exe(void);

/* The directory of the running binary (hdx_self_exe without its last component), static
 * buffer; "." when the binary's path cannot be read. */
const char *hdx_self_dir(void);

/* Sleep for ms milliseconds, resuming after signals. */
void hdx_sleep_ms(int ms);



/* qsort(3) comparison of two ints, ascending. */
int hdx_cmp_int(const void *a, const void *b);

/*
 * Format a set of integers as compact ranges, sorted and deduplicated:
 * {8,0,1,2,3} → "0-3,8". Writes at most size bytes (NUL-terminated; a "..."
 * suffix marks truncation). vals may be reordered.
 */
void hdx_format_ranges(int *vals, size_t n, char *buf, size_t size);

/* The same for vals left as they are (formats a copy; vals may be NULL when n is 0). Without
 * memory for the copy, buf gets "?". */
void hdx_format_ranges_of(const int *vals, size_t n, char *buf, size_t size);

/* 1 when a and b are both NULL or equal strings, else 0. */
int hdx_str_same(const char *a, const char *b);

/* Parse a whole decimal integer in [min, max] into *out. 0, or -1 when s is
 * not one. */
int hdx_parse_long(const char *s, long min, long max, long *out);

/*
 * The launcher prefix that starts a line of a job log (docs/design.md, "Job logs"): '[',
 * letters or '_', digits, "]:" (torch's "[rank3]:", torchrun's "[default0]:": its role and
 * local rank), or blanks, digits, ':' and a blank (Slurm's srun --label, "3: ", the task id
 * padded to the width of the largest). Returns the prefix's length (up to its ':'), 0 when s
 * (NUL-terminated) starts none; then its digits are the *n_digits bytes at s + *digits_at and
 * its word the *word_len bytes before them (*word_len 0: Slurm's form). Slurm's label before a bracket
 * prefix ("0: [rank3]:", srun around torchrun, a task per node), or pdsh's host label before one
 * ("worker-0: [rank3]:", DeepSpeed's multi-node launcher), is one prefix, both together, whose
 * word and digits are the inner one's: the bracket prefix names the rank.
 */
size_t hdx_launcher_prefix(const char *s, size_t *word_len, size_t *digits_at, size_t *n_digits);

/*
 * The time stamp a container runtime puts before each line it keeps (docs/design.md, "Job
 * logs"): RFC 3339 with optional fraction and a zone, then one blank, as `docker logs -t` and
 * `kubectl logs --timestamps` write it ("2023-09-14T05:12:47.917781119Z "). Returns its length
 * with the blank, 0 when s (NUL-terminated) does not start with one.
 */
size_t hdx_runtime_stamp(const char *s);

/*
 * The length (1 to 4 bytes) of the valid UTF-8 sequence that s starts, its code point in *cp;
 * 0 when s starts none: a stray continuation byte, a cut or overlong sequence, a surrogate,
 * a code point past U+10FFFF (RFC 3629). s is NUL-terminated.
 */
int hdx_utf8_next(const char *s, uint32_t *cp);

/*
 * Write s, text that input controls (command lines, thread and function names, locals, paths,
 * log lines, the schema or group name a file gives, and the summaries and messages made of
 * them), to f as one line of text: a newline, an escape sequence or another control byte
 * printed raw would forge lines or drive the reader's terminal, so those bytes are written as
 * \n, \t, \r or \xHH, a byte that is no valid UTF-8 as \xHH, and the C1 controls and
 * bidirectional marks (U+0080-U+009F, U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C)
 * as \uHHHH (docs/design.md "Escaping"). The text report and every message use it.
 */
void hdx_put_text(FILE *f, const char *s);

/*
 * A message for a person (stderr, the run supervisor's lines): fmt and its arguments formatted,
 * then written through hdx_put_text, so that any text from input in it is escaped; only the
 * newlines that end it are written as they are. Never fails: out of memory, it writes fmt.
 */
void hdx_say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hdx_vsay(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* How many threads a step that spreads over the CPUs runs: threads when it is above 0 (a
 * caller's or a test's choice), else one per online CPU (sysconf), at most 8. At least 1. */
int hdx_cpus(int threads);

/*
 * fn(arg, i) for every i in [0, n), on up to hdx_cpus(threads) threads (at most 8), the
 * caller's among them: each takes the next `block` indexes in turn, so the order of the calls is not known and
 * fn must not depend on it. When fn returns non-zero no block is started any more, and that
 * value is returned (the first to be returned, of several); 0 when every call returned 0. No
 * thread to be had only makes the caller's do it all.
 */
int hdx_parallel_for(size_t n, size_t block, int threads, int (*fn)(void *arg, size_t i), void *arg);

#endif
