/* metaroce-ctl show paths [--conn ID] */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cmd_show_paths(cli *c, int argc, char **argv)
{
	json_t *args = NULL;
	if (argc == 2 && strcmp(argv[0], "--conn") == 0) {
		args = json_pack("{s:s}", "conn", argv[1]);
	} else if (argc) {
		fprintf(stderr, "usage: metaroce-ctl show paths [--conn ID]\n");
		return CLI_USAGE;
	}
	json_t *r;
	int rv = cli_request(c, "show paths", args, 10, &r);
	if (rv)
		return rv;
	static const char *const cols[] = {"conn", "id:PATH", "gen", "plane_name:PLANE",
		"state", "local", "remote", "cwnd", "inflight", "srtt_us:SRTT US",
		"min_rtt_us:MIN RTT US", "tx_pkts:TX PKTS", "retx_pkts:RETX",
		"lost_pkts:LOST", "ce_pkts:CE", "rx_pkts:RX PKTS"};
	if (c->json)
		cli_print_json(r);
	else
		cli_print_table(r, cols, (int)(sizeof(cols) / sizeof(cols[0])));
	json_decref(r);
	return CLI_OK;
}
