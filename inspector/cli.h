/*
 * Command-line pieces that inspect and snapshot share: the capture options,
 * the PIDs, and running the capture with progress and messages on stderr.
 * Only commands use this (library code never prints).
 */
#ifndef HDX_CLI_H
#define HDX_CLI_H

#include <stddef.h>

#include "evidence.h"

/* The capture options' getopt_long entries, to put in a command's table. */
#define HDX_CLI_CAPTURE_OPTIONS                                                                      \
    {"trace-dir", required_argument, NULL, 'd'}, {"samples", required_argument, NULL, 's'},          \
        {"interval", required_argument, NULL, 'i'}, {"build-timeout", required_argument, NULL, 'b'}, \
        {"all", no_argument, NULL, 'a'}

typedef struct hdx_cli_capture {
    const char *trace_dir;
    long samples;       /* default 2 */
    long interval_ms;   /* default 250 */
    long build_timeout; /* s, default 1800 */
    int all;
    int *pids; /* heap, freed by hdx_cli_capture_clear */
    size_t n_pids;
} hdx_cli_capture;

/* The defaults of design.md ("The command line"). */
void hdx_cli_capture_init(hdx_cli_capture *o);
void hdx_cli_capture_clear(hdx_cli_capture *o);

/*
 * Take getopt's c and optarg if they are a capture option ('d', 's', 'i',
 * 'b', 'a'). Returns 1 when taken, 0 when c is not one of them, -1 for a bad
 * value (the message, naming cmd, is printed).
 */
int hdx_cli_capture_option(const char *cmd, int c, const char *arg, hdx_cli_capture *o);

/* The PIDs in argv[0..argc) (after the options). 0, or -1 when one is not a
 * PID or there is neither a PID nor --all (the message is printed). */
int hdx_cli_capture_pids(const char *cmd, int argc, char **argv, hdx_cli_capture *o);

/*
 * Run hdx_capture() into ev as o says, telling on stderr what it does and
 * which PIDs were not found. Returns 0 when processes were captured, -1 when
 * nothing was (the message is printed). *failures: processes whose stacks
 * could not be read.
 */
int hdx_cli_capture_run(const char *cmd, hdx_evidence *ev, const hdx_cli_capture *o, int *failures);

/* The exit status for a capture: HDX_EXIT_PARTIAL when some process could not be read. */
int hdx_cli_capture_status(const hdx_evidence *ev, int failures);

#endif
