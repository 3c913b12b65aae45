/*
 * The processes' rows of hangdx.report/2 (docs/formats.md "Reports"), made on every CPU: at
 * 131 072 ranks they are ~40 M cJSON items, most of the writing of the report (BENCHMARKS.md
 * "Analyze of 8192, 32 768 and 131 072 ranks").
 */
#ifndef HDX_REPORT_ROWS_H
#define HDX_REPORT_ROWS_H

#include <stdio.h>

#include "model/evidence.h"
#include "model/evidence_json.h"

struct cJSON;

/* o, p's JSON, with "part" added: what p is to its rank ("rank", "worker", "launcher", or
 * null when it carries no rank; model/evidence.h hdx_process_part), so that a reader of the
 * report tells a rank from a wrapper that carries its RANK. NULL stays NULL. */
struct cJSON *hdx_report_with_part(const hdx_evidence *ev, const hdx_process *p, struct cJSON *o);

/*
 * Every process of ev as its row, in the order of ev->procs, each after "\n\t\t" (the first)
 * or ",\n\t\t", to f: hdx_stack_table_process_json with "part", made a row by hdx_process_row
 * and printed compact by hdx_json_print. st: the threads of every process counted
 * (hdx_stack_table_count); it is only read. pkeys and tkeys: the rows' keys, empty (the first
 * rows fill them, before the rest are made) or as an earlier document's rows gave them.
 * threads: at most this many threads make rows beside the caller's, which writes them; 0
 * means one per CPU, up to 8. The rows are the same, byte for byte, whatever the number.
 * 0, -ENOMEM, or -EIO when writing to f failed.
 */
int hdx_report_rows_write(FILE *f, const hdx_evidence *ev, const hdx_stack_table *st, struct cJSON *pkeys,
                          struct cJSON *tkeys, int threads);

#endif
