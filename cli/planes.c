/* metaroce-ctl show planes */
#include <stdio.h>

#include "cli.h"

int cmd_show_planes(cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc) {
		fprintf(stderr, "usage: metaroce-ctl show planes\n");
		return CLI_USAGE;
	}
	json_t *r;
	int rv = cli_request(c, "show planes", NULL, 10, &r);
	if (rv)
		return rv;
	static const char *const cols[] = {"index:#", "name", "address", "mtu",
		"source_ports:SPORTS", "sockets", "rx_pkts:RX PKTS", "tx_pkts:TX PKTS",
		"bind_fails:BIND FAILS"};
	if (c->json)
		cli_print_json(r);
	else
		cli_print_table(r, cols, (int)(sizeof(cols) / sizeof(cols[0])));
	json_decref(r);
	return CLI_OK;
}
