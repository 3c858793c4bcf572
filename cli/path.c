/* metaroce-ctl path steer CONN PATH (--port N | --plane P)
 *              path disable|enable|reset CONN PATH */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void text(json_t *r)
{
	printf("conn %s path %lld: %s; now plane %s, sport %lld, gen %lld, %s\n",
	       json_string_value(json_object_get(r, "conn")),
	       (long long)json_integer_value(json_object_get(r, "path")),
	       json_string_value(json_object_get(r, "detail")),
	       json_string_value(json_object_get(r, "plane")),
	       (long long)json_integer_value(json_object_get(r, "sport")),
	       (long long)json_integer_value(json_object_get(r, "gen")),
	       json_string_value(json_object_get(r, "state")));
}

static int path_cmd(cli *c, const char *cmd, int argc, char **argv, int steer)
{
	char *end;
	long path = argc >= 2 ? strtol(argv[1], &end, 10) : -1;
	int bad = argc < 2 || *end || path < 0 || path > 65535;
	json_t *args = NULL;
	if (!bad) {
		args = json_pack("{s:s, s:i}", "conn", argv[0], "path", (int)path);
		if (steer) {
			if (argc != 4)
				bad = 1;
			else if (strcmp(argv[2], "--port") == 0) {
				long port = strtol(argv[3], &end, 10);
				bad = *end || port < 1 || port > 65535;
				json_object_set_new(args, "port", json_integer(port));
			} else if (strcmp(argv[2], "--plane") == 0) {
				json_object_set_new(args, "plane", json_string(argv[3]));
			} else {
				bad = 1;
			}
		} else if (argc != 2) {
			bad = 1;
		}
	}
	if (bad) {
		json_decref(args);
		return CLI_USAGE;
	}
	json_t *r;
	int rv = cli_request(c, cmd, args, 10, &r);
	if (rv)
		return rv;
	cli_show(c, r, &(cli_view){.text = text});
	json_decref(r);
	return CLI_OK;
}

int cmd_path_steer(cli *c, int argc, char **argv)
{
	return path_cmd(c, "path steer", argc, argv, 1);
}

int cmd_path_disable(cli *c, int argc, char **argv)
{
	return path_cmd(c, "path disable", argc, argv, 0);
}

int cmd_path_enable(cli *c, int argc, char **argv)
{
	return path_cmd(c, "path enable", argc, argv, 0);
}

int cmd_path_reset(cli *c, int argc, char **argv)
{
	return path_cmd(c, "path reset", argc, argv, 0);
}
