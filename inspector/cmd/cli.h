/*
 * Command-line pieces that inspect and snapshot share: the capture options,
 * the PIDs, and running the capture with progress and messages on stderr.
 * Only commands use this (library code never prints).
 */
#ifndef HDX_CLI_H
#define HDX_CLI_H

#include <stddef.h>

#include "model/evidence.h"
#include "report/report.h"

/* The capture options' getopt_long entries, to put in a command's table. */
#define HDX_CLI_CAPTURE_OPTIONS                                                                      \
    {"trace-dir", required_argument, NULL, 'd'}, {"samples", required_argument, NULL, 's'},          \
        {"interval", required_argument, NULL, 'i'}, {"build-timeout", required_argument, NULL, 'b'}, \
        {"all", no_argument, NULL, 'a'}, {"slurm-job", optional_argument, NULL, 'J'},                 \
        {"native-lines", no_argument, NULL, 'N'}

/* The report options of inspect and analyze: --json, --full, --schema 1|2, --format FMT,
 * --tree, --no-tree, --html FILE. */
#define HDX_CLI_REPORT_OPTIONS                                                                \
    {"json", no_argument, NULL, 'j'}, {"full", no_argument, NULL, 'L'},                       \
        {"schema", required_argument, NULL, 'S'}, {"format", required_argument, NULL, 'F'},   \
        {"tree", no_argument, NULL, 'T'}, {"no-tree", no_argument, NULL, 'U'},                \
        {"html", required_argument, NULL, 'H'}

/* Their lines of a command's --help. */
#define HDX_CLI_REPORT_HELP                                                                          \
    "  --json              print the hangdx.report/2 JSON object (the same as --format json):\n"     \
    "                      the verdict, the waits-for graph, a table of the ranks, each distinct\n"  \
    "                      stack once (with its ranks), and every process with its threads,\n"      \
    "                      each thread naming its stack\n"                                          \
    "  --full              with --json: every thread's frames in full in \"processes\"\n"           \
    "                      (large: about 115 KB a rank of 10 threads of 40 frames)\n"               \
    "  --schema 1          with --json: the earlier hangdx.report/1, for readers of it\n"           \
    "  --format FMT        text (the default), json, or an export of the stack tree:\n"             \
    "                      speedscope (speedscope's file format, one profile per set of ranks\n"    \
    "                      with the same stack), collapsed (folded stacks for flamegraph.pl),\n"   \
    "                      dot (Graphviz: the waits-for graph and the stack tree)\n"              \
    "  --tree, --no-tree   show (or not) the merged stack tree of the ranks' key threads in\n"    \
    "                      the text report (text only); by default shown for more than 8 ranks\n"    \
    "  --html FILE         also write FILE, one HTML page that works offline: the verdict,\n"    \
    "                      the waits-for graph, the ranks on the TP x PP x DP grid, the stack\n"  \
    "                      tree, a rank's stack on a click\n"

/*
 * *dst = arg for an option that names one file (-o, --html), unless an earlier one did:
 * then -1, with "hangdx CMD: FLAG given twice" printed (the last one would win silently).
 * 0 when set.
 */
int hdx_cli_once(const char *cmd, const char *flag, const char **dst, const char *arg);

/*
 * Take getopt's c and optarg if they are a report option ('j', 'L', 'S', 'F', 'T', 'U', 'H') into
 * *o. Returns 1 when taken, 0 when c is not one of them, -1 for a format or schema that is
 * none, or --html given twice (the message, naming cmd, is printed).
 */
int hdx_cli_report_option(const char *cmd, int c, const char *arg, hdx_report_options *o);

/*
 * After an export (--format speedscope, collapsed or dot) of ev is written: when no process's
 * key thread (classify/groups.h) has a stack, say on stderr that the export's stacks are
 * empty and which inputs carry some (job logs and traces hold none). Prints nothing for the
 * text and JSON reports, or when a stack is there.
 */
void hdx_cli_export_check(const char *cmd, const hdx_evidence *ev, const hdx_report_options *o);

/* Once every option is taken: 0, or -1 (printed, naming cmd) when --full or --schema is given
 * without a JSON report, or --full with --schema 1. */
int hdx_cli_report_check(const char *cmd, const hdx_report_options *o);

typedef struct hdx_cli_capture {
    const char *trace_dir;
    long samples;       /* default 2 */
    long interval_ms;   /* default 250 */
    long build_timeout; /* s, default 1800 */
    int all;
    int native_lines; /* --native-lines: file:line of native frames (DWARF) */
    int *pids; /* heap, freed by hdx_cli_capture_clear */
    size_t n_pids;
    int slurm;              /* --slurm-job: collect from every node of a Slurm job */
    const char *slurm_job;  /* its id (argv or SLURM_JOB_ID), once hdx_cli_capture_pids ran */
} hdx_cli_capture;

/* The defaults of docs/design.md ("The command line"). */
void hdx_cli_capture_init(hdx_cli_capture *o);
void hdx_cli_capture_clear(hdx_cli_capture *o);

/*
 * Take getopt's c and optarg if they are a capture option ('d', 's', 'i',
 * 'b', 'a'). Returns 1 when taken, 0 when c is not one of them, -1 for a bad
 * value (the message, naming cmd, is printed).
 */
int hdx_cli_capture_option(const char *cmd, int c, const char *arg, hdx_cli_capture *o);

/* The PIDs in argv[0..argc) (after the options). 0, or -1 when one is not a
 * PID or there is neither a PID nor --all (the message is printed).
 * With --slurm-job: argv holds at most the job id (getopt moves it there when
 * it follows --slurm-job as a word of its own); without it, the job id is
 * SLURM_JOB_ID. -1 for a job id that is not one, none at all, or PIDs or
 * --all beside it (the message is printed). */
int hdx_cli_capture_pids(const char *cmd, int argc, char **argv, hdx_cli_capture *o);

/*
 * Run hdx_capture() into ev as o says, telling on stderr what it does and
 * which PIDs were not found. Returns 0 when processes were captured, -1 when
 * nothing was (the message is printed). *failures: processes whose stacks
 * could not be read.
 */
int hdx_cli_capture_run(const char *cmd, hdx_evidence *ev, const hdx_cli_capture *o, int *failures);

/*
 * --slurm-job: run `hangdx snapshot --all --frames` on every node of the job
 * through srun (slurm.h), with o's capture options, and read each node's
 * snapshot back. Progress and every problem go to stderr, naming cmd.
 * *nodes: a heap array of *n evidence sets, one per node that answered, the
 * caller frees each (hdx_evidence_free) and the array. *partial: 1 when some
 * node sent no snapshot or an incomplete one. Returns 0 when at least one
 * node answered, else -1 (the message is printed).
 */
int hdx_cli_slurm_collect(const char *cmd, const hdx_cli_capture *o, hdx_evidence ***nodes, size_t *n,
                          int *partial);

/*
 * inspect --slurm-job: hdx_cli_slurm_collect(), then every node's snapshot
 * merged into ev (from hdx_evidence_new) as analyze merges them. 0, or -1
 * (the message is printed). *failures: 1 when some node's snapshot is
 * missing (the report is then partial), else 0.
 */
int hdx_cli_slurm_merged(const char *cmd, const hdx_cli_capture *o, hdx_evidence *ev, int *failures);

/*
 * snapshot --slurm-job -o DIR: hdx_cli_slurm_collect(), then one
 * hangdx.snapshot/1 file per node, DIR/snap-<node>.json (DIR is made when
 * missing). frames: whether --frames was given too (refused). Returns the
 * command's exit status (HDX_EXIT_*), messages printed.
 */
int hdx_cli_slurm_snapshots(const char *cmd, const hdx_cli_capture *o, const char *dir, int frames);

/*
 * snapshot --frames: write ev as hangdx.snapshot/3 (reduced: its stacks by class) to stdout in frames
 * (slurm.h) named "<host>/<pid>", for a collector that reads them back out of
 * srun's (or another launcher's) mixed output. 0 or a negative errno.
 */
int hdx_cli_write_frames(const hdx_evidence *ev);

/* The exit status for a capture: HDX_EXIT_PARTIAL when some process could not be read whole
 * (a read error other than its exit, or failures: how many processes' stacks could not be
 * read), and then one line on stderr, prefixed "hangdx CMD:", that says which and why. */
int hdx_cli_capture_status(const char *cmd, const hdx_evidence *ev, int failures);

/*
 * Can command cmd write its `what` ("snapshot", "report") to path (given by option flag, "-o"
 * or "--html"; "-": standard output, 0), before it reads or captures anything?
 * hdx_outfile_check() (model/outfile.h), which makes no file. 0, or -1 with the message
 * printed (a directory, a missing or read-only directory, a read-only file, a symbolic link
 * another user owns).
 */
int hdx_cli_check_output(const char *cmd, const char *what, const char *flag, const char *path);

/*
 * Is the output path (flag: the option that names it, "-o" or "--html") one of the n
 * inputs, or the other output other (NULL: none)? The same file by device and inode where
 * path exists, the same string where it does not. 0, or -1 with the message printed: writing
 * would overwrite what the command reads (or its other output), so nothing may be written.
 */
int hdx_cli_check_not_input(const char *cmd, const char *flag, const char *path, char *const *inputs, size_t n,
                            const char *other);

#endif
