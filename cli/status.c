/* metaroce-ctl status */
#include <stdio.h>

#include "cli.h"

/* Everything but the per-error drop table, which follows compactly. */
static void text(json_t *r)
{
	json_t *counters = json_object_get(r, "counters");
	json_t *drops = json_incref(json_object_get(counters, "drops"));
	json_object_del(counters, "drops");
	cli_print_object(r, 0);
	printf("drops by reason:");
	const char *k;
	json_t *v;
	int any = 0;
	json_object_foreach(drops, k, v)
		if (json_integer_value(v)) {
			printf(" %s=%lld", k, (long long)json_integer_value(v));
			any = 1;
		}
	printf("%s\n", any ? "" : " none");
	json_decref(drops);
}

int cmd_status(cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc)
		return CLI_USAGE;
	json_t *r;
	int rv = cli_request(c, "status", NULL, 10, &r);
	if (rv)
		return rv;
	cli_show(c, r, &(cli_view){.text = text});
	json_decref(r);
	return CLI_OK;
}
