/* metaroce-ctl plane drain|undrain PLANE [--force] */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void text(json_t *r)
{
	printf("plane %s: %s%s (%lld connection(s) on it, %lld usable plane(s) left)%s\n",
	       json_string_value(json_object_get(r, "plane")),
	       json_is_true(json_object_get(r, "drained")) ? "drained" : "in service",
	       json_is_true(json_object_get(r, "changed")) ? "" : " already",
	       (long long)json_integer_value(json_object_get(r, "conns")),
	       (long long)json_integer_value(json_object_get(r, "usable_planes")),
	       json_is_true(json_object_get(r, "persisted"))
		       ? ""
		       : "; NOT persisted: the daemon has no state database");
}

static int drain(cli *c, int argc, char **argv, int on)
{
	const char *cmd = on ? "plane drain" : "plane undrain";
	int force = 0;
	const char *plane = NULL;
	for (int i = 0; i < argc; i++) {
		if (on && strcmp(argv[i], "--force") == 0)
			force = 1;
		else if (!plane && argv[i][0] != '-')
			plane = argv[i];
		else
			plane = NULL, i = argc;
	}
	if (!plane)
		return CLI_USAGE;
	json_t *args = json_pack("{s:s}", "plane", plane);
	if (force)
		json_object_set_new(args, "force", json_true());
	json_t *r;
	/* The daemon writes the change durably (an fsync) before it answers. */
	int rv = cli_request(c, cmd, args, 30, &r);
	if (rv)
		return rv;
	cli_show(c, r, &(cli_view){.text = text});
	json_decref(r);
	return CLI_OK;
}

int cmd_plane_drain(cli *c, int argc, char **argv)
{
	return drain(c, argc, argv, 1);
}

int cmd_plane_undrain(cli *c, int argc, char **argv)
{
	return drain(c, argc, argv, 0);
}
