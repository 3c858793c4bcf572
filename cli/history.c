/* metaroce-ctl history events|drills|paths|planes [--since DURATION] [--limit N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* "2026-11-29 15:04:05.123" in UTC. */
static void when(json_t *ts, char *buf, size_t len)
{
	double t = json_number_value(ts);
	time_t s = (time_t)t;
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03d", (int)((t - (double)s) * 1000));
}

static void put_time(json_t *rows)
{
	size_t i;
	json_t *o;
	json_array_foreach(rows, i, o) {
		char b[40];
		json_t *ts = json_object_get(o, "ts");
		if (!ts)
			ts = json_object_get(o, "started_ts");
		when(ts, b, sizeof(b));
		json_object_set_new(o, "time", json_string(b));
	}
}

/* Text: the rows with a readable time, and a note on stderr when the
 * daemon cut the list at the limit. */
static json_t *rows_of(json_t *r)
{
	json_t *rows = json_object_get(r, "rows");
	put_time(rows);
	if (json_is_true(json_object_get(r, "truncated")))
		fprintf(stderr, "metaroce-ctl: more rows than the limit: showing the oldest %zu; "
				"use a shorter --since or a larger --limit\n", json_array_size(rows));
	return rows;
}

static void plain_rows(json_t *r)
{
	rows_of(r);
}

/* A drill's report lifted into its row for the table. */
static void drill_rows(json_t *r)
{
	size_t i;
	json_t *o;
	json_array_foreach(rows_of(r), i, o) {
		json_t *rep = json_object_get(o, "report");
		json_object_set_new(o, "pass", json_incref(json_object_get(rep, "pass")));
		json_object_set_new(o, "action", json_incref(json_object_get(rep, "action")));
		json_object_set_new(o, "detection_ms",
				    json_incref(json_object_get(rep, "detection_ms")));
		json_object_set_new(o, "redistribution_ms",
				    json_incref(json_object_get(rep, "redistribution_ms")));
		json_object_set_new(o, "state", json_incref(json_object_get(rep, "state")));
	}
}

static const char *const events_cols[] = {"time:TIME (UTC)", "kind", "plane", "conn", "path",
	"detail"};
static const char *const drills_cols[] = {"id", "time:STARTED (UTC)", "plane", "action",
	"detection_ms:DETECT MS", "redistribution_ms:REDIST MS", "pass", "state"};
static const char *const paths_cols[] = {"time:TIME (UTC)", "resolution:RES", "conn", "path",
	"plane", "sport", "state", "srtt_us:SRTT US", "ecn_fraction:ECN", "lost_pkts:LOST",
	"retx_pkts:RETX", "utilization:UTIL", "tx_bytes_per_s:TX B/S"};
static const char *const planes_cols[] = {"time:TIME (UTC)", "resolution:RES", "plane",
	"state", "tx_bytes_per_s:TX B/S", "rx_bytes_per_s:RX B/S", "utilization:UTIL"};

static const cli_view events_view = {plain_rows, "rows", events_cols, CLI_NCOLS(events_cols)};
static const cli_view drills_view = {drill_rows, "rows", drills_cols, CLI_NCOLS(drills_cols)};
static const cli_view paths_view = {plain_rows, "rows", paths_cols, CLI_NCOLS(paths_cols)};
static const cli_view planes_view = {plain_rows, "rows", planes_cols, CLI_NCOLS(planes_cols)};

static int history(cli *c, const char *what, int argc, char **argv)
{
	char cmd[32];
	snprintf(cmd, sizeof(cmd), "history %s", what);
	double since = 3600;
	long limit = 0;
	int bad = 0;
	for (int i = 0; i < argc && !bad; i += 2) {
		char *end;
		if (i + 1 >= argc)
			bad = 1;
		else if (strcmp(argv[i], "--since") == 0)
			bad = (since = cli_duration(argv[i + 1])) <= 0;
		else if (strcmp(argv[i], "--limit") == 0)
			limit = strtol(argv[i + 1], &end, 10), bad = *end || limit < 1;
		else
			bad = 1;
	}
	if (bad)
		return CLI_USAGE;
	json_t *args = json_pack("{s:f}", "since_s", since);
	if (limit)
		json_object_set_new(args, "limit", json_integer(limit));
	json_t *r;
	int rv = cli_request(c, cmd, args, 60, &r);
	if (rv)
		return rv;
	const cli_view *v = strcmp(what, "events") == 0   ? &events_view
			    : strcmp(what, "drills") == 0 ? &drills_view
			    : strcmp(what, "paths") == 0  ? &paths_view
							  : &planes_view;
	cli_show(c, r, v);
	json_decref(r);
	return CLI_OK;
}

int cmd_history_events(cli *c, int argc, char **argv)
{
	return history(c, "events", argc, argv);
}

int cmd_history_drills(cli *c, int argc, char **argv)
{
	return history(c, "drills", argc, argv);
}

int cmd_history_paths(cli *c, int argc, char **argv)
{
	return history(c, "paths", argc, argv);
}

int cmd_history_planes(cli *c, int argc, char **argv)
{
	return history(c, "planes", argc, argv);
}
