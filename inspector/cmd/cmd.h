/*
 * The subcommands. Each takes the arguments after its name (argv[0] is the
 * subcommand's name), parses them with getopt_long, and returns the process
 * exit status (include/hangdx/report.h HDX_EXIT_*).
 *
 * Stage rule: cmd may include every stage. (docs/design.md "Stages")
 */
#ifndef HDX_CMD_H
#define HDX_CMD_H

int hdx_cmd_run(int argc, char **argv);
int hdx_cmd_inspect(int argc, char **argv);
int hdx_cmd_analyze(int argc, char **argv);
int hdx_cmd_snapshot(int argc, char **argv);
int hdx_cmd_locks(int argc, char **argv);
int hdx_cmd_dump(int argc, char **argv);

#endif
