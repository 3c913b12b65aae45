/*
 * The report: hangdx.report/2 JSON (and the earlier /1, on request; docs/formats.md
 * "Reports"), and the short text form (verdict first, then evidence, the stack tree
 * (report/tree.h), then the stacks grouped), or one of the exports of report/export.h.
 *
 * Stage rule: report may include model, classify. (docs/design.md "Stages")
 */
#ifndef HDX_REPORT_H
#define HDX_REPORT_H

#include <stdio.h>

#include "classify/classify.h"
#include "model/evidence.h"

struct cJSON;

/* The hangdx.report/1 object for ev and v, whole, as one tree (tests and small jobs; large
 * ones go through hdx_report_write). Its notes, as in the text report: the evidence's, then
 * the verdict's (v->notes, those ev does not say already), then what the lock judgements
 * tell. Caller frees with cJSON_Delete. NULL on ENOMEM. */
struct cJSON *hdx_report_json(const hdx_evidence *ev, const hdx_verdict *v);

/* The report's "verdict" object for ev and v (docs/formats.md "Reports": class, finding,
 * facts, summary and remedy in words, culprits, confidence, group). Caller frees with
 * cJSON_Delete. NULL on ENOMEM. */
struct cJSON *hdx_report_verdict_json(const hdx_evidence *ev, const hdx_verdict *v);

/* Every thread of p with its merged stack, as text (hangdx dump). 0 or -EIO. */
int hdx_report_threads_text(FILE *f, const hdx_process *p);

/* What hdx_report_write writes (docs/design.md "The stack tree and the exports"). */
enum hdx_report_format {
    HDX_REPORT_TEXT = 0,    /* the text report */
    HDX_REPORT_JSON,        /* hangdx.report/2 (or /1: HDX_REPORT_V1) */
    HDX_REPORT_SPEEDSCOPE,  /* the stack tree as speedscope's file format (report/export.h) */
    HDX_REPORT_COLLAPSED,   /* the stack tree as folded stacks, for flamegraph.pl */
    HDX_REPORT_DOT,         /* the waits-for graph and the stack tree, Graphviz */
};

/* The text report's stack tree: shown when the job has more than HDX_TREE_AUTO_RANKS ranks
 * (report/tree.h), or always (1), or never (0). */
#define HDX_TREE_AUTO (-1)

/* The JSON report's flags: HDX_REPORT_FULL every thread's frames as objects in "processes"
 * (docs/formats.md "Reports"), or HDX_REPORT_V1 hangdx.report/1 instead of /2. */
#define HDX_REPORT_FULL 1
#define HDX_REPORT_V1 2

typedef struct hdx_report_options {
    enum hdx_report_format format;
    int tree;  /* text only: HDX_TREE_AUTO, 1 or 0 */
    int flags; /* json only: HDX_REPORT_FULL, HDX_REPORT_V1 */
    const char *html; /* --html FILE: the HTML report's file, or NULL; hdx_report_write leaves it
                         to the command (hdx_report_html_write, report/html.h) */
} hdx_report_options;

/* The format named s ("text", "json", "speedscope", "collapsed", "dot") into *out.
 * 0, or -EINVAL for another name (*out untouched). */
int hdx_report_format_parse(const char *s, enum hdx_report_format *out);

/* Write the text report to f; tree: as hdx_report_options.tree. 0 or a negative errno. */
int hdx_report_text(FILE *f, const hdx_evidence *ev, const hdx_verdict *v, int tree);

/*
 * Write the report in the format o says (NULL: text, its tree HDX_TREE_AUTO) to path, or to
 * stdout when path is NULL or "-", through hdx_outfile_open() (model/outfile.h: a new file
 * renamed over path, whole, or nothing). The JSON is printed a process at a time, never held
 * as one tree. 0 or a negative errno (-ENOMEM, -EIO, or hdx_outfile_open's or _close's).
 */
int hdx_report_write(const hdx_evidence *ev, const hdx_verdict *v, const hdx_report_options *o,
                     const char *path);

#endif
