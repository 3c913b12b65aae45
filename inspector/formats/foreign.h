/*
 * Other tools' stack dumps as evidence, for `hangdx analyze`: what people
 * took by hand from a hung job before it was killed.
 *
 *   - py-spy `dump` text, with or without --locals and --native, several
 *     processes (--subprocesses) in one file;
 *   - py-spy `dump --json` (an array of thread objects);
 *   - gdb `thread apply all bt`, with or without `thread apply all py-bt`
 *     (CPython's python-gdb.py); the Python frames are merged into the native
 *     stack at its eval-loop frames as live capture does (merge.h);
 *   - eu-stack `-p PID` text (with or without -m module names and -s sources);
 *   - Python faulthandler tracebacks (SIGUSR1 via faulthandler.register,
 *     dump_traceback_later, a fatal error), several processes' dumps in one
 *     job log;
 *   - torch's NCCL Flight Recorder dumps, one rank's per file, pickled (read by
 *     pickle.h, which runs nothing) or JSON: not stacks but each rank's
 *     collectives and send/recv, the oldest unfinished one taken as its wait
 *     (docs/formats.md "Flight Recorder dumps"); the rank is the last number of
 *     the file's name, as torch names them.
 *
 * Lines may carry a launcher's prefix, "[rank3]:" (a global rank) or
 * "[default0]:" (torchrun's role + local rank); each prefix's lines are
 * parsed on their own, so interleaved ranks in one combined log come apart.
 * A dump rarely says its rank: it comes from the prefix, else from the file
 * name ("...rank3..."), else stays unknown; a note says which. The host is
 * unknown (NULL). What a format lacks stays unknown: faulthandler gives
 * pthread idents, not TIDs (tid unknown, the ident "0x..." becomes the
 * thread's name) and no pid; none of them gives CPU time.
 *
 * Within one process the main thread is put first (threads[0]), as live
 * capture has it: the thread whose TID is the pid, py-spy's "MainThread",
 * or faulthandler's thread whose outermost frame is <module>.
 */
#ifndef HDX_FOREIGN_H
#define HDX_FOREIGN_H

#include <stddef.h>

#include "model/evidence.h"

/* Limits of the reader: beyond them an input is refused, or cut with a note. */
#define HDX_FOREIGN_MAX_BYTES (64u * 1024 * 1024) /* file size: refused */
#define HDX_FOREIGN_MAX_LINE 65536                /* one line: the rest is ignored */
#define HDX_FOREIGN_MAX_FRAMES 4096               /* frames of one thread: cut, with a note */
#define HDX_FOREIGN_MAX_THREADS 65536             /* threads of one process: refused */
#define HDX_FOREIGN_MAX_PROCS 65536               /* processes (or prefixes) of one file: refused */
#define HDX_FOREIGN_MAX_LOCALS 256                /* locals of one frame: cut */

enum hdx_foreign_format {
    HDX_FOREIGN_NONE = 0,
    HDX_FOREIGN_PYSPY,        /* py-spy dump */
    HDX_FOREIGN_PYSPY_JSON,   /* py-spy dump --json */
    HDX_FOREIGN_GDB,          /* gdb thread apply all bt / py-bt */
    HDX_FOREIGN_EUSTACK,      /* eu-stack -p */
    HDX_FOREIGN_FAULTHANDLER, /* Python faulthandler */
    HDX_FOREIGN_FLIGHT_RECORDER, /* torch's NCCL Flight Recorder dump (pickle or JSON) */
};

/*
 * Which format text (len bytes, need not be NUL-terminated) is, from its
 * content alone. Never fails: HDX_FOREIGN_NONE when no format fits. Looks at
 * the first HDX_FOREIGN_MAX_BYTES bytes at most.
 */
enum hdx_foreign_format hdx_foreign_sniff(const char *text, size_t len);

/* "py-spy dump", "py-spy dump --json", "gdb", "eu-stack", "faulthandler", "Flight Recorder", or "none".
 * Static. */
const char *hdx_foreign_format_name(enum hdx_foreign_format f);

/*
 * Parse text (len bytes) in format `format` (HDX_FOREIGN_NONE: sniff it) and
 * append its processes to ev, with notes on where each rank came from. `name`
 * is the input's path: it names the input in messages and is the fallback
 * for ranks. On error ev is left as it was, and *err (when err is not NULL)
 * gets a heap message naming the input and line, which the caller frees.
 * Returns 0, or:
 *   -EINVAL   not a format this reader knows;
 *   -EBADMSG  malformed: a line that cannot be what its place says
 *             (e.g. a frame line outside any thread), beyond the limits,
 *             or no thread at all;
 *   -EEXIST   a rank that ev already has from another input;
 *   -EPERM    a Flight Recorder pickle with an opcode that would run code;
 *   -EPROTONOSUPPORT  a Flight Recorder dump of a version other than 2.x;
 *   -ENOMEM.
 */
int hdx_foreign_load_text(const char *text, size_t len, enum hdx_foreign_format format, const char *name,
                          hdx_evidence *ev, char **err);

/* The same from the file at path (at most HDX_FOREIGN_MAX_BYTES); open and
 * read errors are returned as their negative errno, with a message. */
int hdx_foreign_load(const char *path, hdx_evidence *ev, char **err);

/*
 * hdx_foreign_load for the stack dump inside a job log (logs.h): the one process without a
 * launcher prefix gets log_rank (the one rank of the log's lines, hdx_log_load_ranked; or
 * HDX_UNKNOWN), with a note saying so. A process whose rank ev already has (another input
 * shows it: a snapshot, a core, a dump of its own) is left out with a note, not an error.
 */
int hdx_foreign_load_log(const char *path, int log_rank, hdx_evidence *ev, char **err);

/* Sniff the file at path (its first HDX_FOREIGN_MAX_BYTES). HDX_FOREIGN_NONE
 * when unreadable. */
enum hdx_foreign_format hdx_foreign_sniff_file(const char *path);

/* 1 when a file looks like a Flight Recorder dump from its first len bytes (text; 64 KiB are
 * enough): a pickle of protocol 2 to 5, or a JSON object with pg_config or entries of
 * profiling names and no "schema"; else 0. Cheap, for telling its JSON form from a snapshot
 * before the snapshot sniffer claims every JSON object. */
int hdx_foreign_flight_recorder_sniff(const char *text, size_t len);

#endif
