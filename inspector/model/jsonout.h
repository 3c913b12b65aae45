/*
 * Small cJSON constructors shared by every JSON writer (report, snapshot,
 * locks): unknown values become null, never left out (docs/design.md "Formats").
 * Each returns a new item the caller adds to a tree (cJSON frees it with
 * the tree), or NULL on ENOMEM.
 */
#ifndef HDX_JSONOUT_H
#define HDX_JSONOUT_H

#include <stddef.h>
#include <stdint.h>

#include "model/evidence.h"

struct cJSON;

struct cJSON *hdx_json_str(const char *s);   /* NULL → null */
struct cJSON *hdx_json_int(long long v);     /* HDX_UNKNOWN → null */
struct cJSON *hdx_json_bool(int v);          /* HDX_UNKNOWN → null, else true/false */
struct cJSON *hdx_json_char(char c);         /* 0 → null, else a one-letter string (a state) */
struct cJSON *hdx_json_hex(uint64_t v);      /* "0x1f" */

/* Room for the decimal text of any long long and its NUL. */
#define HDX_JSON_DIGITS 24
/* v's decimal digits ("-12"), as cJSON prints an integral number: written into the end of
 * buf (HDX_JSON_DIGITS bytes, the caller's), NUL-terminated. Returns where they start in buf,
 * with *len their count (without the NUL). */
const char *hdx_json_digits(long long v, char *buf, size_t *len);
/* ns since the epoch (CLOCK_REALTIME) as RFC 3339 UTC, with nanoseconds when
 * `nanos` ("2026-11-29T18:40:27.000123456Z") else whole seconds; HDX_UNKNOWN → null. */
struct cJSON *hdx_json_time(int64_t ns, int nanos);

/* A frame as docs/design.md's `frame` object ("kind", "function", "file", "line",
 * "module", "offset", "pc", "locals"). */
struct cJSON *hdx_json_frame(const hdx_frame *f);
/* A frame's "locals": an object {name: value} (values as docs/design.md's frame; an int
 * beyond ±2^53 as {"int": "digits"}, a float a JSON number would not give back as
 * {"float": "repr"}, another object as {"type": name}), or null when f has none. */
struct cJSON *hdx_json_locals(const hdx_frame *f);
/* The process groups of ev as an array of {"name", "desc", "role", "ranks" (global, by group
 * rank), "default"} (docs/design.md "Formats"), or NULL on ENOMEM. */
struct cJSON *hdx_json_pgroups(const hdx_evidence *ev);
/* An array of n frames, innermost first. */
struct cJSON *hdx_json_frames(const hdx_frame *frames, size_t n);
/* A set of integers (ranks) as ranges, hangdx.report/2's form (docs/formats.md "Reports"):
 * [[first, last], ...] ascending, [[5, 5]] for one; vals[0..n) may be in any order and
 * repeat (they are sorted in place: vals is the caller's, changed). A raw item of the text
 * (hdx_json_array: a job's classes of stacks can hold 10^5 ranges), spaced as the print it
 * goes into (formatted: cJSON_Print's, else cJSON_PrintUnformatted's), and not to be read;
 * NULL on ENOMEM. */
struct cJSON *hdx_json_ranges(int *vals, size_t n, int formatted);

/*
 * A JSON array's text made value by value, as cJSON_Print writes an array of those values
 * ([1, null, "a"]; with compact set, as cJSON_PrintUnformatted does: [1,null,"a"]), for a
 * report's arrays of 10^5 values and more: its "ranks" table and the ranges of its classes of
 * stacks. Made of cJSON items, each made, printed and deleted, they took 0.6 s of the 2.1 s
 * that writing the report of 131 072 ranks took; so, 0.1 s (BENCHMARKS.md "Analyze of 8192,
 * 32 768 and 131 072 ranks"). Start from a zeroed hdx_json_array (compact set or not); after
 * an ENOMEM the adds do nothing and hdx_json_array_end says so.
 */
typedef struct hdx_json_array {
    int compact; /* the caller's: no space after a comma */
    char *text;  /* heap: "[" and the values so far */
    size_t len, cap;
    char *last, *last_text; /* heap: a copy of the string added last, and its JSON text */
    int failed;             /* out of memory */
} hdx_json_array;

/* v, or null for HDX_UNKNOWN (as hdx_json_int). */
void hdx_json_array_int(hdx_json_array *a, long long v);
/* s, or null for NULL (as hdx_json_str): its text is hdx_json_print's, made once for each run
 * of equal strings. */
void hdx_json_array_str(hdx_json_array *a, const char *s);
/* The array ended ("]"), as a raw item (cJSON_CreateRaw), which a print writes as it is (so
 * print it as a's compact says); a's memory is freed. NULL on ENOMEM, now or in an add. */
struct cJSON *hdx_json_array_end(hdx_json_array *a);

/*
 * j as JSON text (cJSON_Print when formatted, else cJSON_PrintUnformatted), valid UTF-8 as
 * RFC 8259 wants: a byte of a string that is no valid UTF-8 (a command line, a path or a
 * thread name in another encoding) is written as \u00XX (the byte read as Latin-1). An
 * integral number within ±2^53 is written as its digits (jsonout.c, ints_as_raw: cJSON would
 * print it through "%1.15g" and check it with sscanf); j is changed for the print and is as it
 * was when this returns, so no other thread may read j meanwhile. A string allocated as
 * cJSON allocates (cJSON_malloc), or NULL on ENOMEM: release it with cJSON_free, or with free
 * where no arena of model/json_arena.h is active (then cJSON_malloc is malloc); text printed
 * inside an arena goes with it.
 */
char *hdx_json_print(const struct cJSON *j, int formatted);

#endif
