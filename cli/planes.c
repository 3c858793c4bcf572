/* metaroce-ctl show planes [--watch] */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *const cols[] = {"index:#", "name", "address", "mtu",
	"source_ports:SPORTS", "oper_state:OPER", "admin_state:ADMIN", "sockets",
	"rx_pkts:RX PKTS", "tx_pkts:TX PKTS", "bind_fails:BIND FAILS"};
#define NCOLS (int)(sizeof(cols) / sizeof(cols[0]))

static int render(cli *c, json_t *rows, json_t *recent)
{
	if (c->json) {
		json_t *o = json_pack("{s:O, s:O}", "planes", rows, "recent",
				      json_object_get(recent, "planes"));
		cli_print_json(o);
		json_decref(o);
		return CLI_OK;
	}
	/* Sparklines of each plane's recent transmit rate and utilization. */
	size_t i;
	json_t *o;
	json_array_foreach(rows, i, o) {
		size_t k;
		json_t *p;
		json_array_foreach(json_object_get(recent, "planes"), k, p) {
			if (!json_equal(json_object_get(p, "plane"), json_object_get(o, "name")))
				continue;
			char b[128];
			json_t *tx = json_object_get(p, "tx_bytes_per_s");
			cli_sparkline(tx, 16, b, sizeof(b));
			json_object_set_new(o, "tx_spark", json_string(b));
			double last = json_number_value(json_array_get(tx, json_array_size(tx) - 1));
			char r[32];
			snprintf(r, sizeof(r), "%.1f", last * 8 / 1e6);
			json_object_set_new(o, "tx_mbps", json_string(r));
			cli_sparkline(json_object_get(p, "utilization"), 16, b, sizeof(b));
			json_object_set_new(o, "util_spark", json_string(b));
		}
	}
	static const char *const wcols[] = {"index:#", "name", "oper_state:OPER",
		"admin_state:ADMIN", "tx_mbps:TX MBIT/S", "tx_spark:TX (RECENT)",
		"util_spark:UTIL (RECENT)", "rx_pkts:RX PKTS", "tx_pkts:TX PKTS"};
	cli_print_table(rows, wcols, (int)(sizeof(wcols) / sizeof(wcols[0])));
	return CLI_OK;
}

int cmd_show_planes(cli *c, int argc, char **argv)
{
	if (argc == 1 && strcmp(argv[0], "--watch") == 0)
		return cli_watch(c, "show planes", NULL, render);
	if (argc) {
		fprintf(stderr, "usage: metaroce-ctl show planes [--watch]\n");
		return CLI_USAGE;
	}
	json_t *r;
	int rv = cli_request(c, "show planes", NULL, 10, &r);
	if (rv)
		return rv;
	if (c->json)
		cli_print_json(r);
	else
		cli_print_table(r, cols, NCOLS);
	json_decref(r);
	return CLI_OK;
}
