/* metaroce-ctl ping PEER [-c COUNT] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void text(json_t *r)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(r, "rtt_us"), i, v)
		printf("reply from %s: seq=%zu rtt=%.1f us\n",
		       json_string_value(json_object_get(r, "peer")), i, json_real_value(v));
	printf("rtt min/avg/max = %.1f/%.1f/%.1f us, handshake %.1f us\n",
	       json_real_value(json_object_get(r, "min_us")),
	       json_real_value(json_object_get(r, "avg_us")),
	       json_real_value(json_object_get(r, "max_us")),
	       json_real_value(json_object_get(r, "handshake_us")));
	printf("PROBE round trips per path:\n");
	static const char *const pcols[] = {"path:PATH", "plane:PLANE", "sport:SPORT",
		"state", "sent:SENT", "answered:ANSWERED", "min_us:MIN US", "avg_us:AVG US",
		"max_us:MAX US"};
	cli_print_table(json_object_get(r, "probes"), pcols,
			(int)(sizeof(pcols) / sizeof(pcols[0])));
	static const char *const cols[] = {"id:PATH", "plane_name:PLANE", "local", "remote",
		"state", "srtt_us:SRTT US", "min_rtt_us:MIN RTT US"};
	cli_print_table(json_object_get(r, "paths"), cols,
			(int)(sizeof(cols) / sizeof(cols[0])));
}

int cmd_ping(cli *c, int argc, char **argv)
{
	long count = 5;
	char *end = NULL;
	if (argc == 3 && (strcmp(argv[1], "-c") == 0 || strcmp(argv[1], "--count") == 0))
		count = strtol(argv[2], &end, 10);
	if ((argc != 1 && argc != 3) || (end && (*end || count < 1 || count > 10000)))
		return CLI_USAGE;
	json_t *r;
	int rv = cli_request(c, "ping", json_pack("{s:s, s:I}", "peer", argv[0], "count",
						   (json_int_t)count),
			     30, &r);
	if (rv)
		return rv;
	cli_show(c, r, &(cli_view){.text = text});
	json_decref(r);
	return CLI_OK;
}
