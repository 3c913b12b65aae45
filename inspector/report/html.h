/*
 * The HTML report (docs/design.md "The HTML report"): one self-contained page that loads
 * nothing (no script, style, font or image from elsewhere, no request at all) and shows the
 * verdict, the waits-for graph as SVG, the ranks on the job's TP x PP x DP grid (a plain grid
 * when the groups are not known) coloured by what each waits for, the merged stack tree
 * (report/tree.h), and a rank's stack on a click. The page is a fixed template
 * (report/html_page.html, embedded at build time) and one JSON object of the data, in class
 * form: stacks once per class, the graph's ranks collapsed into nodes of like ranks, a few
 * small numbers per rank; its size is bounded by the caps below, whatever the job's size.
 */
#ifndef HDX_HTML_H
#define HDX_HTML_H

#include <stdio.h>

#include "classify/classify.h"
#include "model/evidence.h"

/* At most this many stack classes get their frames in the page (the largest first); the
 * ranks of the others show their wait only. */
#define HDX_HTML_MAX_STACKS 256
/* At most this many frames of a stack class, the innermost ones. */
#define HDX_HTML_MAX_FRAMES 160
/* At most this many branches of the stack tree (depth first: the first ones). */
#define HDX_HTML_MAX_BRANCHES 2000
/* The waits-for graph keeps at most this many nodes before it collapses like ranks further
 * (by group role instead of group, then by depth, kind and culprit alone). */
#define HDX_HTML_MAX_NODES 48
/* The grid gives at most this many cells to ranks that no input shows (the waits-for graph's
 * nodes of missing ranks, each a range); the graph's node names them all. */
#define HDX_HTML_MAX_MISSING (1 << 16)

/*
 * Write the HTML report of ev and v (classified from ev) to f. Without v->graph (a verdict
 * that did not need it) the page's graph is built from ev, every collective on the world group
 * where no group was read. Text
 * of the processes (function names, paths, the summary) goes into the page only as JSON
 * string data, which the page's script sets as text, never as markup; every '<' of the data
 * is written \u003c, so that nothing in it can end its script element. Returns 0, -ENOMEM,
 * or -EIO when writing to f failed.
 */
int hdx_report_html(FILE *f, const hdx_evidence *ev, const hdx_verdict *v);

/* The same into the file path ("-": stdout) through hdx_outfile_open() (model/outfile.h: a
 * new file renamed over path, whole, or nothing). 0, or -ENOMEM, -EIO, or hdx_outfile_open's
 * or _close's negative errno. */
int hdx_report_html_write(const hdx_evidence *ev, const hdx_verdict *v, const char *path);

#endif
