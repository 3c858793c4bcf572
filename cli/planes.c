/* metaroce-ctl show planes [--watch] */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *const cols[] = {"index:#", "name", "address", "mtu",
	"source_ports:SPORTS", "oper_state:OPER", "admin_state:ADMIN", "sockets",
	"rx_pkts:RX PKTS", "tx_pkts:TX PKTS", "bind_fails:BIND FAILS"};
#define NCOLS (int)(sizeof(cols) / sizeof(cols[0]))

/* Sparklines of each plane's recent transmit rate and utilization. */
static void sparks(json_t *w)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(w, "planes"), i, o) {
		size_t k;
		json_t *p;
		json_array_foreach(json_object_get(w, "recent"), k, p) {
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
}

static const char *const wcols[] = {"index:#", "name", "oper_state:OPER", "admin_state:ADMIN",
	"tx_mbps:TX MBIT/S", "tx_spark:TX (RECENT)", "util_spark:UTIL (RECENT)",
	"rx_pkts:RX PKTS", "tx_pkts:TX PKTS"};

/* One frame of --watch: {"planes": rows, "recent": the recent samples}. */
static int render(cli *c, json_t *rows, json_t *recent)
{
	json_t *w = json_object(), *rp = json_object_get(recent, "planes");
	json_object_set(w, "planes", rows);
	json_object_set(w, "recent", rp ? rp : json_null());
	cli_show(c, w, &(cli_view){sparks, "planes", wcols, CLI_NCOLS(wcols)});
	json_decref(w);
	return CLI_OK;
}

int cmd_show_planes(cli *c, int argc, char **argv)
{
	if (argc == 1 && strcmp(argv[0], "--watch") == 0)
		return cli_watch(c, "show planes", NULL, render);
	if (argc)
		return CLI_USAGE;
	json_t *r;
	int rv = cli_request(c, "show planes", NULL, 10, &r);
	if (rv)
		return rv;
	cli_show(c, r, &(cli_view){NULL, NULL, cols, NCOLS});
	json_decref(r);
	return CLI_OK;
}
