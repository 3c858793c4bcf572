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

static const cli_cmd commands[] = {
	{"status", cmd_status, "daemon state and counters"},
	{"show planes", cmd_show_planes, "planes and their sockets"},
	{"show peers", cmd_show_peers, "peer daemons"},
	{"show conns", cmd_show_conns, "connections"},
	{"show paths", cmd_show_paths, "[--conn ID]  paths of every (or one) connection"},
	{"ping", cmd_ping, "PEER [-c COUNT]  round trips to a peer daemon"},
	{"perf", cmd_perf, "PEER [--seconds N] [--msg-size BYTES]  verified bulk transfer"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: metaroce-ctl [-s SOCKET] [-j] COMMAND [ARGS]\n"
		   "  -s SOCKET  control socket (default $METAROCE_SOCKET or %s)\n"
		   "  -j         JSON output, one object per line\n"
		   "commands:\n", MRC_DEFAULT_SOCKET);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
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
			return commands[k].fn(&c, argc - i - 1, argv + i + 1);
		if (sp && i + 1 < argc && strncmp(argv[i], name, (size_t)(sp - name)) == 0 &&
		    argv[i][sp - name] == '\0' && strcmp(argv[i + 1], sp + 1) == 0)
			return commands[k].fn(&c, argc - i - 2, argv + i + 2);
	}
	if (i < argc)
		fprintf(stderr, "metaroce-ctl: unknown command '%s%s%s'\n", argv[i],
			i + 1 < argc ? " " : "", i + 1 < argc ? argv[i + 1] : "");
	usage(stderr);
	return CLI_USAGE;
}
