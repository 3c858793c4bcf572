/* metaroce-ctl show peers */
#include <stdio.h>

#include "cli.h"

int cmd_show_peers(cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc)
		return CLI_USAGE;
	json_t *r;
	int rv = cli_request(c, "show peers", NULL, 10, &r);
	if (rv)
		return rv;
	static const char *const cols[] = {"address", "instance_id:INSTANCE", "conns",
		"conns_total:TOTAL", "restarts", "last_seen_s:LAST SEEN (S)"};
	cli_show(c, r, &(cli_view){NULL, NULL, cols, CLI_NCOLS(cols)});
	json_decref(r);
	return CLI_OK;
}
