/*
 * The report: hangdx.report/1 JSON (cJSON) and the short text form
 * (verdict first, then evidence, then the stacks grouped).
 *
 * Stage rule: report may include model, classify. (docs/design.md "Stages")
 */
#ifndef HDX_REPORT_H
#define HDX_REPORT_H

#include <stdio.h>

#include "classify/classify.h"
#include "model/evidence.h"

struct cJSON;

/* The hangdx.report/1 object for ev and v. Its notes, as in the text report: the evidence's,
 * then the verdict's (v->notes, those ev does not say already), then what the lock
 * judgements tell. Caller frees with cJSON_Delete. NULL on ENOMEM. */
struct cJSON *hdx_report_json(const hdx_evidence *ev, const hdx_verdict *v);

/*
 * Write s, text that a process controls (command lines, thread and function names, locals,
 * paths, and the summaries made of them), into a line of a text report: a newline, an
 * escape sequence or another control byte printed raw would forge report lines or drive
 * the reader's terminal, so those bytes are written as \n, \t, \r or \xHH, a byte
 * that is no valid UTF-8 as \xHH, and the C1 controls and bidirectional marks
 * (U+0080-U+009F, U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) as \uHHHH.
 */
void hdx_report_put_text(FILE *f, const char *s);

/* Every thread of p with its merged stack, as text (hangdx dump). 0 or -EIO. */
int hdx_report_threads_text(FILE *f, const hdx_process *p);

/* Write the text report to f. 0 or a negative errno. */
int hdx_report_text(FILE *f, const hdx_evidence *ev, const hdx_verdict *v);

/*
 * Write the report (JSON when json != 0, else text) to path, or to stdout
 * when path is NULL or "-". 0 or a negative errno.
 */
int hdx_report_write(const hdx_evidence *ev, const hdx_verdict *v, int json, const char *path);

#endif
