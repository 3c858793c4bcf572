/* metaroce-ctl metrics: the Prometheus text exposition, as the daemon
 * renders it (docs/metrics.md). With -j the reply object. */
#include <stdio.h>

#include "cli.h"

int cmd_metrics(cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc) {
		fprintf(stderr, "usage: metaroce-ctl metrics\n");
		return CLI_USAGE;
	}
	json_t *r;
	int rv = cli_request(c, "metrics", NULL, 10, &r);
	if (rv)
		return rv;
	if (c->json)
		cli_print_json(r);
	else
		fputs(json_string_value(json_object_get(r, "text")), stdout);
	json_decref(r);
	return CLI_OK;
}
