/*
 * metaroce-ctl: the operator's CLI for metarocd. Each command asks the
 * daemon over its control socket (docs/control-protocol.md) and renders the
 * one JSON result either as aligned text or, with -j, as JSON on one line.
 * Data goes to stdout, diagnostics to stderr. Exit codes: 0 success, 1 the
 * command failed (the daemon said so, or a perf run did not verify), 2 usage,
 * 3 the daemon cannot be reached.
 */
#ifndef MRC_CLI_H
#define MRC_CLI_H

#include <jansson.h>

#define CLI_OK 0
#define CLI_FAILED 1
#define CLI_USAGE 2
#define CLI_UNREACHABLE 3

typedef struct cli {
	const char *socket;
	int json;
} cli;

typedef struct cli_cmd {
	const char *name; /* "status", "show paths": exact match */
	int (*fn)(cli *c, int argc, char **argv); /* argv: what follows the name */
	const char *help;
} cli_cmd;

/* Send one request; on success return 0 and *presult (a new reference);
 * otherwise print the problem to stderr and return an exit code. args is
 * stolen (may be NULL). timeout_s bounds the wait for the reply. */
int cli_request(cli *c, const char *cmd, json_t *args, int timeout_s, json_t **presult);

/* Print result as one JSON line (-j). */
void cli_print_json(json_t *result);

/* Aligned table of an array of objects: cols[i] is "key" or "key:Header";
 * values are printed as they are (strings bare, numbers as numbers). */
void cli_print_table(json_t *rows, const char *const *cols, int ncols);

/* Print "key: value" lines of an object, nested objects indented. */
void cli_print_object(json_t *obj, int indent);

/* One command per file. */
int cmd_status(cli *c, int argc, char **argv);
int cmd_show_planes(cli *c, int argc, char **argv);
int cmd_show_peers(cli *c, int argc, char **argv);
int cmd_show_conns(cli *c, int argc, char **argv);
int cmd_show_paths(cli *c, int argc, char **argv);
int cmd_ping(cli *c, int argc, char **argv);
int cmd_perf(cli *c, int argc, char **argv);

#endif
