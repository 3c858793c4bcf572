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
/* Not exit codes: what cli_recv() may return besides 0 and the above. */
#define CLI_TIMEOUT 100
#define CLI_INTERRUPTED 101

typedef struct cli {
	const char *socket;
	int json;
} cli;

typedef struct cli_cmd {
	const char *name; /* "status", "show paths": exact match */
	/* argv: what follows the name. Bad arguments: return CLI_USAGE and
	 * print nothing: the usage comes from this table. */
	int (*fn)(cli *c, int argc, char **argv);
	const char *help;   /* the arguments, two spaces, what it does */
	const char *detail; /* more lines of usage (each "  ...\n"), or NULL */
} cli_cmd;

/* Send one request; on success return 0 and *presult (a new reference);
 * otherwise print the problem to stderr and return an exit code. args is
 * stolen (may be NULL). timeout_s bounds the wait for the reply. */
int cli_request(cli *c, const char *cmd, json_t *args, int timeout_s, json_t **presult);

/* Lower level, for commands that stream (monitor) or cancel (drill): open
 * the socket (-1 after printing why), send a request with an id, and read
 * the next message (0 and *pmsg; CLI_TIMEOUT; CLI_INTERRUPTED when a
 * signal came; or an exit code after printing why). timeout_ms < 0 waits
 * for ever. cli_result() turns a reply into its result or prints its error
 * (the reply is consumed). */
int cli_open(cli *c);
int cli_send(int fd, const char *cmd, json_t *args, int id);
int cli_recv(int fd, int timeout_ms, json_t **pmsg);
int cli_result(const char *cmd, json_t *reply, json_t **presult);

/* A duration: "30s", "10m", "2h", "7d", "500ms", or plain seconds. -1 if
 * it is not one. */
double cli_duration(const char *s);

/* Print result as one JSON line (-j). */
void cli_print_json(json_t *result);

/*
 * The one output path of every command: with -j, r goes out whole as one
 * JSON line (as the daemon sent it); otherwise as text through the view:
 * first text(r) when set (sentences, or reshaping r's rows for the table),
 * then the table of cols over r's member `rows` (r itself when rows is
 * NULL) when cols is set. The commands never test -j themselves.
 */
typedef struct cli_view {
	void (*text)(json_t *r);
	const char *rows;
	const char *const *cols;
	int ncols;
} cli_view;
void cli_show(const cli *c, json_t *r, const cli_view *v);
#define CLI_NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

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
int cmd_plane_drain(cli *c, int argc, char **argv);
int cmd_plane_undrain(cli *c, int argc, char **argv);
int cmd_path_steer(cli *c, int argc, char **argv);
int cmd_path_disable(cli *c, int argc, char **argv);
int cmd_path_enable(cli *c, int argc, char **argv);
int cmd_path_reset(cli *c, int argc, char **argv);
int cmd_history_events(cli *c, int argc, char **argv);
int cmd_history_drills(cli *c, int argc, char **argv);
int cmd_history_paths(cli *c, int argc, char **argv);
int cmd_history_planes(cli *c, int argc, char **argv);
int cmd_metrics(cli *c, int argc, char **argv);
int cmd_monitor(cli *c, int argc, char **argv);
int cmd_drill_plane(cli *c, int argc, char **argv);

/* show planes/paths --watch: redraw every interval with sparklines. */
int cli_watch(cli *c, const char *cmd, json_t *args, int (*render)(cli *c, json_t *rows,
								    json_t *recent));
/* "▁▂▃▅█" of the numbers in arr (at most width, the newest), scaled to
 * their maximum; into buf. */
void cli_sparkline(json_t *arr, int width, char *buf, size_t len);

#endif
