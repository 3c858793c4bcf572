/* metaroce-ctl monitor: events as they happen, until interrupted. One JSON
 * object per line with -j, one human line otherwise. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void human(json_t *e)
{
	double t = json_number_value(json_object_get(e, "ts"));
	time_t s = (time_t)t;
	struct tm tm;
	char b[32];
	localtime_r(&s, &tm);
	strftime(b, sizeof(b), "%H:%M:%S", &tm);
	printf("%s.%03d %-15s", b, (int)((t - (double)s) * 1000),
	       json_string_value(json_object_get(e, "kind")));
	const char *plane = json_string_value(json_object_get(e, "plane"));
	const char *conn = json_string_value(json_object_get(e, "conn"));
	json_t *path = json_object_get(e, "path");
	if (plane)
		printf(" plane %s", plane);
	if (conn)
		printf(" conn %s", conn);
	if (json_is_integer(path))
		printf(" path %lld", (long long)json_integer_value(path));
	const char *detail = json_string_value(json_object_get(e, "detail"));
	if (detail && *detail)
		printf(": %s", detail);
	json_t *count = json_object_get(e, "count");
	if (json_is_integer(count))
		printf(" %lld event(s) lost: this monitor read too slowly",
		       (long long)json_integer_value(count));
	putchar('\n');
}

int cmd_monitor(cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc)
		return CLI_USAGE;
	int fd = cli_open(c);
	if (fd < 0)
		return CLI_UNREACHABLE;
	json_t *msg, *r;
	int rv = cli_send(fd, "monitor", NULL, 1) < 0 ? CLI_UNREACHABLE : cli_recv(fd, 10000, &msg);
	if (rv == 0)
		rv = cli_result("monitor", msg, &r);
	if (rv) {
		close(fd);
		return rv == CLI_TIMEOUT || rv == CLI_INTERRUPTED ? CLI_UNREACHABLE : rv;
	}
	json_decref(r);
	setvbuf(stdout, NULL, _IOLBF, 0); /* a line as soon as it comes, in a pipe too */
	for (;;) {
		rv = cli_recv(fd, -1, &msg);
		if (rv == CLI_INTERRUPTED)
			continue;
		if (rv)
			break;
		json_t *e = json_object_get(msg, "event");
		if (e)
			cli_show(c, e, &(cli_view){.text = human});
		json_decref(msg);
	}
	close(fd);
	return rv;
}
