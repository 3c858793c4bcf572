/* metaroce-ctl perf PEER [--seconds N] [--msg-size BYTES] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void text(json_t *r)
{
	int ok = json_is_true(json_object_get(r, "verified"));
	printf("perf to %s: %lld bytes in %lld messages of %lld bytes, %.3f s\n",
	       json_string_value(json_object_get(r, "peer")),
	       (long long)json_integer_value(json_object_get(r, "bytes")),
	       (long long)json_integer_value(json_object_get(r, "messages")),
	       (long long)json_integer_value(json_object_get(r, "msg_size")),
	       json_real_value(json_object_get(r, "seconds")));
	printf("goodput %.3f Gbit/s\n", json_real_value(json_object_get(r, "goodput_gbps")));
	printf("verified by the receiver: %lld messages, %lld bytes, %lld errors: %s\n",
	       (long long)json_integer_value(json_object_get(r, "verified_messages")),
	       (long long)json_integer_value(json_object_get(r, "verified_bytes")),
	       (long long)json_integer_value(json_object_get(r, "verify_errors")),
	       ok ? "OK" : "FAILED");
	json_t *st = json_object_get(json_object_get(r, "conn"), "stats");
	printf("packets %lld sent, %lld retransmitted, %lld lost, %lld RTOs\n",
	       (long long)json_integer_value(json_object_get(st, "tx_pkts")),
	       (long long)json_integer_value(json_object_get(st, "retx_pkts")),
	       (long long)json_integer_value(json_object_get(st, "lost_pkts")),
	       (long long)json_integer_value(json_object_get(st, "rto_count")));
	static const char *const cols[] = {"id:PATH", "plane_name:PLANE", "local", "remote",
		"state", "gen", "cwnd", "srtt_us:SRTT US", "tx_pkts:TX PKTS",
		"retx_pkts:RETX", "lost_pkts:LOST", "ce_pkts:CE"};
	cli_print_table(json_object_get(r, "paths"), cols,
			(int)(sizeof(cols) / sizeof(cols[0])));
}

int cmd_perf(cli *c, int argc, char **argv)
{
	double secs = 3;
	long long msg = 1 << 20;
	int bad = argc < 1;
	for (int i = 1; i < argc && !bad; i += 2) {
		char *end;
		if (i + 1 >= argc)
			bad = 1;
		else if (strcmp(argv[i], "--seconds") == 0)
			secs = strtod(argv[i + 1], &end), bad = *end || !(secs > 0 && secs <= 3600);
		else if (strcmp(argv[i], "--msg-size") == 0)
			msg = strtoll(argv[i + 1], &end, 10), bad = *end || msg <= 0;
		else
			bad = 1;
	}
	if (bad)
		return CLI_USAGE;
	json_t *r;
	int rv = cli_request(c, "perf", json_pack("{s:s, s:f, s:I}", "peer", argv[0],
						   "seconds", secs, "msg_size", (json_int_t)msg),
			     (int)secs + 30, &r);
	if (rv)
		return rv;
	int ok = json_is_true(json_object_get(r, "verified"));
	cli_show(c, r, &(cli_view){.text = text});
	json_decref(r);
	if (!ok)
		fprintf(stderr, "metaroce-ctl: perf: data verification failed\n");
	return ok ? CLI_OK : CLI_FAILED;
}
