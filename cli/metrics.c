/* metaroce-ctl metrics: the Prometheus text exposition, as the daemon
 * renders it (docs/metrics.md). With -j the reply object. */
#include <stdio.h>

#include "cli.h"

static void text(json_t *r)
{
	fputs(json_string_value(json_object_get(r, "text")), stdout);
}

int cmd_metrics(cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc)
		return CLI_USAGE;
	json_t *r;
	int rv = cli_request(c, "metrics", NULL, 10, &r);
	if (rv)
		return rv;
	cli_show(c, r, &(cli_view){.text = text});
	json_decref(r);
	return CLI_OK;
}
