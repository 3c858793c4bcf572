/* metaroce-ctl show conns */
#include <stdio.h>

#include "cli.h"

/* Lift a few engine counters to the top level for the table. */
static void lift(json_t *r)
{
	size_t i;
	json_t *o;
	json_array_foreach(r, i, o) {
		json_t *st = json_object_get(o, "stats");
		json_object_set(o, "tx_bytes", json_object_get(st, "tx_bytes"));
		json_object_set(o, "rx_bytes", json_object_get(st, "rx_bytes"));
		json_object_set(o, "retx_pkts", json_object_get(st, "retx_pkts"));
		json_object_set(o, "paths", json_object_get(st, "npaths_active"));
	}
}

static const char *const cols[] = {"id", "peer", "role", "state", "service", "mtu", "paths",
	"tx_bytes:TX BYTES", "rx_bytes:RX BYTES", "retx_pkts:RETX", "end_reason:ENDED"};

int cmd_show_conns(cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc)
		return CLI_USAGE;
	json_t *r;
	int rv = cli_request(c, "show conns", NULL, 10, &r);
	if (rv)
		return rv;
	cli_show(c, r, &(cli_view){lift, NULL, cols, CLI_NCOLS(cols)});
	json_decref(r);
	return CLI_OK;
}
