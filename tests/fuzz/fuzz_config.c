/*
 * libFuzzer harness for metarocd's configuration parser (daemon/config.c):
 * the configuration file is a trust boundary. For every input:
 *   - a refused file gives -1, one line of message starting with the file's
 *     name, and leaves the configuration untouched;
 *   - an accepted file satisfies every invariant the daemon relies on
 *     (bounds, one plane at least, cross-key rules), its engine parameters
 *     are accepted by the congestion controller, and its dump reads back to
 *     the same configuration.
 * Anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.yaml"

static void check_valid(const mrd_config *c)
{
	mrp_conn_params p;
	mrp_cc_conn cc;

	if (c->nplanes < 1 || c->nplanes > MRD_MAX_PLANES || c->port == 0)
		abort();
	if (c->initial_paths_per_plane < 1 ||
	    c->initial_paths_per_plane > c->max_paths_per_plane ||
	    (unsigned)c->max_paths_per_plane * c->nplanes > MRP_MAX_PATHS)
		abort();
	if (!c->rto_min_ns || c->rto_min_ns > c->rto_initial_ns ||
	    c->rto_initial_ns > c->rto_max_ns)
		abort();
	if (c->telemetry_interval_ns > c->telemetry_retention_ns ||
	    !c->telemetry_interval_ns)
		abort();
	if (!c->control_socket[0] || !c->state_db[0] || !mrp_cc_find(c->cc_name))
		abort();
	for (unsigned i = 0; i < c->nplanes; i++) {
		const mrd_plane *pl = &c->planes[i];
		if (!pl->name[0] || (!pl->interface[0] && !pl->address.family))
			abort();
		if (pl->mtu < MRP_MTU_MIN || pl->mtu > MRP_MTU_MAX)
			abort();
		if (!pl->source_ports.min || pl->source_ports.min > pl->source_ports.max ||
		    (c->port >= pl->source_ports.min && c->port <= pl->source_ports.max))
			abort();
		for (unsigned j = 0; j < i; j++)
			if (strcmp(pl->name, c->planes[j].name) == 0)
				abort();
	}
	mrd_config_conn_params(c, &p);
	if (p.sport_min == 0 || p.sport_min > p.sport_max || p.max_paths > MRP_MAX_PATHS)
		abort();
	if (mrp_cc_conn_init(&cc, p.cc_name, &p.cc) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mrd_config c, before, again;
	char err[512];
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	setenv("HOME", "/home/fuzz", 1); /* for "~/" paths */
	memset(&c, 0xa5, sizeof(c));
	before = c;
	memset(err, 'x', sizeof(err));
	int rv = mrd_config_parse(&c, NAME, (const char *)data, size, err, sizeof(err));
	if (rv != 0) {
		if (rv != -1 || memcmp(&c, &before, sizeof(c)) != 0)
			abort();
		if (!memchr(err, '\0', sizeof(err)) ||
		    strncmp(err, NAME ":", strlen(NAME ":")) != 0 ||
		    strchr(err, '\n') || strlen(err) < strlen(NAME ": x"))
			abort();
		return 0;
	}
	if (err[0])
		abort();
	check_valid(&c);

	f = open_memstream(&buf, &len);
	if (!f)
		abort();
	mrd_config_dump(&c, f);
	if (fclose(f) != 0)
		abort();
	if (mrd_config_parse(&again, NAME, buf, len, err, sizeof(err)) != 0) {
		fprintf(stderr, "dump does not read back: %s\n%s", err, buf);
		abort();
	}
	if (mrd_config_diff(&c, &again, NULL, 0, NULL, 0) != 0) {
		fprintf(stderr, "dump reads back different:\n%s", buf);
		abort();
	}
	free(buf);
	return 0;
}
