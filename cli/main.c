/*
 * metaroce-ctl [-s SOCKET] [-j] COMMAND
 *
 * Commands come from the table below, matched exactly ("show paths" is one
 * command of two words); each lives in its own file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifndef MRC_DEFAULT_SOCKET
#define MRC_DEFAULT_SOCKET "/run/metaroce/metarocd.sock"
#endif

#define PATH_DETAIL "  CONN: connection id (hex, as in show conns); PATH: path id\n"
#define HISTORY_DETAIL "  D: 30s, 10m, 2h, 7d (default 1h)\n"

/* The one place of every command's usage: `metaroce-ctl`, `COMMAND --help`
 * and a command given bad arguments all print it from here. */
static const cli_cmd commands[] = {
	{"status", cmd_status, "daemon state and counters", NULL},
	{"show planes", cmd_show_planes, "[--watch]  planes: link and admin state, sockets", NULL},
	{"show peers", cmd_show_peers, "peer daemons", NULL},
	{"show conns", cmd_show_conns, "connections", NULL},
	{"show paths", cmd_show_paths, "[--conn ID] [--watch]  paths of every (or one) connection", NULL},
	{"ping", cmd_ping, "PEER [-c COUNT]  round trips to a peer daemon",
	 "  PEER: ADDRESS[:PORT]; COUNT 1-10000\n"},
	{"perf", cmd_perf, "PEER [--seconds N] [--msg-size BYTES]  verified bulk transfer",
	 "  PEER: ADDRESS[:PORT]; N in (0, 3600], default 3\n"},
	{"plane drain", cmd_plane_drain, "PLANE [--force]  take a plane out of service (kept)", NULL},
	{"plane undrain", cmd_plane_undrain, "PLANE  put a drained plane back in service", NULL},
	{"path steer", cmd_path_steer, "CONN PATH (--port N | --plane P)  move a path", PATH_DETAIL},
	{"path disable", cmd_path_disable, "CONN PATH  take a path out of service", PATH_DETAIL},
	{"path enable", cmd_path_enable, "CONN PATH  put a disabled path back", PATH_DETAIL},
	{"path reset", cmd_path_reset, "CONN PATH  move a path to a random new source port", PATH_DETAIL},
	{"drill plane", cmd_drill_plane,
	 "PLANE [--peer PEER] [--duration D] [--link] [--auto-revert D] [--json]  failover drill",
	 "  D: 500ms, 5s, 2m (duration default 5s, at most 10m)\n"},
	{"history events", cmd_history_events, "[--since D] [--limit N]  the event log", HISTORY_DETAIL},
	{"history drills", cmd_history_drills, "[--since D] [--limit N]  drill reports", HISTORY_DETAIL},
	{"history paths", cmd_history_paths, "[--since D] [--limit N]  path telemetry", HISTORY_DETAIL},
	{"history planes", cmd_history_planes, "[--since D] [--limit N]  plane telemetry", HISTORY_DETAIL},
	{"metrics", cmd_metrics, "counters and gauges, Prometheus text format", NULL},
	{"monitor", cmd_monitor, "events as they happen (one JSON object a line with -j)", NULL},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: metaroce-ctl [-s SOCKET] [-j] COMMAND [ARGS]\n"
		   "  -s SOCKET  control socket (default $METAROCE_SOCKET or %s)\n"
		   "  -j         JSON output, one object per line\n"
		   "  COMMAND --help: the command's usage\n"
		   "commands:\n", MRC_DEFAULT_SOCKET);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].help);
}

/* `metaroce-ctl plane` or `metaroce-ctl plane --help`: the commands of one
 * object. Returns whether word names an object. */
static int object_help(FILE *f, const char *word)
{
	size_t n = strlen(word);
	int any = 0;
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strncmp(commands[i].name, word, n) == 0 && commands[i].name[n] == ' ') {
			if (!any)
				fprintf(f, "usage: metaroce-ctl [-s SOCKET] [-j] %s COMMAND\n", word);
			fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].help);
			any = 1;
		}
	return any;
}

static int is_help(const char *s)
{
	return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0;
}

static void cmd_usage(FILE *f, const cli_cmd *k)
{
	fprintf(f, "usage: metaroce-ctl [-s SOCKET] [-j] %s %s\n%s", k->name, k->help,
		k->detail ? k->detail : "");
}

static int run(const cli_cmd *k, cli *c, int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (is_help(argv[i])) {
			cmd_usage(stdout, k);
			return CLI_OK;
		}
	int rv = k->fn(c, argc, argv);
	if (rv == CLI_USAGE)
		cmd_usage(stderr, k);
	return rv;
}

int main(int argc, char **argv)
{
	cli c = {.socket = getenv("METAROCE_SOCKET"), .json = 0};
	if (!c.socket || !*c.socket)
		c.socket = MRC_DEFAULT_SOCKET;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "-j") == 0 || strcmp(argv[i], "--json") == 0) {
			c.json = 1;
		} else if ((strcmp(argv[i], "-s") == 0 || strcmp(argv[i], "--socket") == 0) &&
			   i + 1 < argc) {
			c.socket = argv[++i];
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return CLI_OK;
		} else {
			usage(stderr);
			return CLI_USAGE;
		}
	}
	for (size_t k = 0; k < NCOMMANDS; k++) {
		const char *name = commands[k].name, *sp = strchr(name, ' ');
		if (!sp && i < argc && strcmp(argv[i], name) == 0)
			return run(&commands[k], &c, argc - i - 1, argv + i + 1);
		if (sp && i + 1 < argc && strncmp(argv[i], name, (size_t)(sp - name)) == 0 &&
		    argv[i][sp - name] == '\0' && strcmp(argv[i + 1], sp + 1) == 0)
			return run(&commands[k], &c, argc - i - 2, argv + i + 2);
	}
	if (i < argc && (i + 1 == argc || is_help(argv[i + 1]))) {
		/* An object alone, or with --help: its commands. */
		if (i + 1 < argc && object_help(stdout, argv[i]))
			return CLI_OK;
		if (i + 1 == argc && object_help(stderr, argv[i]))
			return CLI_USAGE;
	}
	if (i < argc)
		fprintf(stderr, "metaroce-ctl: unknown command '%s%s%s'\n", argv[i],
			i + 1 < argc ? " " : "", i + 1 < argc ? argv[i + 1] : "");
	usage(stderr);
	return CLI_USAGE;
}
