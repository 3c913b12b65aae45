/*
 * hangdx.report/2 — schema names, hang classes and exit codes that the
 * inspector's commands, its tests and any reader of its JSON agree on.
 * The report layout itself is described in docs/formats.md ("Reports").
 */
#ifndef HANGDX_REPORT_H
#define HANGDX_REPORT_H

#define HDX_REPORT_SCHEMA "hangdx.report/2"    /* what analyze, inspect and run --json write */
#define HDX_REPORT_SCHEMA_V1 "hangdx.report/1" /* the earlier report: still read, and written on request */
#define HDX_SNAPSHOT_SCHEMA "hangdx.snapshot/2"    /* what hangdx snapshot writes (inspector/snapshot.h) */
#define HDX_SNAPSHOT_SCHEMA_V1 "hangdx.snapshot/1" /* the earlier format, still read */
#define HDX_SNAPSHOT_SCHEMA_REDUCED "hangdx.snapshot/3" /* a node's snapshot with its stacks by class: snapshot --frames */

/* Exit codes of every hangdx command (docs/design.md, "Exit status"). */
#define HDX_EXIT_OK 0       /* a report was produced, whatever the verdict */
#define HDX_EXIT_PARTIAL 1  /* some processes could not be read */
#define HDX_EXIT_FAILURE 2  /* nothing useful could be produced */
#define HDX_EXIT_TIMEOUT 124 /* run --on-hang kill ended a hung job */
#define HDX_EXIT_USAGE 64   /* bad command line */

#endif
