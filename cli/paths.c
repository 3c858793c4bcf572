/* metaroce-ctl show paths [--conn ID] [--watch] */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Sparklines of each path's recent smoothed RTT and sending rate
 * (utilization of the link when its speed is known). */
static void sparks(json_t *w)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(w, "paths"), i, o) {
		size_t k;
		json_t *p;
		json_array_foreach(json_object_get(w, "recent"), k, p) {
			if (!json_equal(json_object_get(p, "conn"), json_object_get(o, "conn")) ||
			    !json_equal(json_object_get(p, "path"), json_object_get(o, "id")))
				continue;
			char b[128];
			cli_sparkline(json_object_get(p, "srtt_us"), 16, b, sizeof(b));
			json_object_set_new(o, "rtt_spark", json_string(b));
			json_t *u = json_object_get(p, "utilization");
			double usum = 0;
			for (size_t j = 0; j < json_array_size(u); j++)
				usum += json_number_value(json_array_get(u, j));
			cli_sparkline(usum > 0 ? u : json_object_get(p, "tx_bytes_per_s"), 16, b,
				      sizeof(b));
			json_object_set_new(o, "util_spark", json_string(b));
		}
	}
}

static const char *const wcols[] = {"conn", "id:PATH", "plane_name:PLANE", "state", "sport",
	"srtt_us:SRTT US", "rtt_spark:RTT (RECENT)", "util_spark:UTIL/RATE (RECENT)",
	"tx_pkts:TX PKTS", "retx_pkts:RETX", "lost_pkts:LOST", "ce_pkts:CE"};

/* One frame of --watch: {"paths": rows, "recent": the recent samples}. */
static int render(cli *c, json_t *rows, json_t *recent)
{
	json_t *w = json_object(), *rp = json_object_get(recent, "paths");
	json_object_set(w, "paths", rows);
	json_object_set(w, "recent", rp ? rp : json_null());
	cli_show(c, w, &(cli_view){sparks, "paths", wcols, CLI_NCOLS(wcols)});
	json_decref(w);
	return CLI_OK;
}

int cmd_show_paths(cli *c, int argc, char **argv)
{
	json_t *args = NULL;
	int watch = 0, bad = 0;
	for (int i = 0; i < argc && !bad; i++) {
		if (strcmp(argv[i], "--watch") == 0)
			watch = 1;
		else if (strcmp(argv[i], "--conn") == 0 && i + 1 < argc && !args)
			args = json_pack("{s:s}", "conn", argv[++i]);
		else
			bad = 1;
	}
	if (bad) {
		json_decref(args);
		return CLI_USAGE;
	}
	if (watch)
		return cli_watch(c, "show paths", args, render);
	json_t *r;
	int rv = cli_request(c, "show paths", args, 10, &r);
	if (rv)
		return rv;
	static const char *const cols[] = {"conn", "id:PATH", "gen", "plane_name:PLANE",
		"state", "local", "remote", "cwnd", "inflight", "srtt_us:SRTT US",
		"min_rtt_us:MIN RTT US", "tx_pkts:TX PKTS", "retx_pkts:RETX",
		"lost_pkts:LOST", "ce_pkts:CE", "rx_pkts:RX PKTS"};
	cli_show(c, r, &(cli_view){NULL, NULL, cols, CLI_NCOLS(cols)});
	json_decref(r);
	return CLI_OK;
}
