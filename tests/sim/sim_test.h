/*
 * Helpers shared by the simulator tests: build a world from a YAML string,
 * and a "probe" transport that sends planned packet trains and records what
 * arrives, so link and switch behaviour can be measured exactly.
 */
#ifndef SIM_TEST_H
#define SIM_TEST_H

#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scenario.h"
#include "sim.h"

/*
 * Runs the tests of a group that the environment selects: TEST_FILTER, one
 * glob that cmocka applies, and TEST_SKIP, names (globs) separated by commas
 * that are left out here (cmocka takes one pattern). meson runs the long
 * tests of a group as tests of their own this way, so that none outgrows
 * its timeout under ASan.
 */
#define SIM_TESTS_MAX 64
static inline int sim_run_selected(const char *group, const struct CMUnitTest *tests, size_t nt)
{
	struct CMUnitTest sel[SIM_TESTS_MAX];
	size_t n = 0;
	const char *skip = getenv("TEST_SKIP");

	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (nt > SIM_TESTS_MAX) {
		fprintf(stderr, "%s: %zu tests, at most %d\n", group, nt, SIM_TESTS_MAX);
		return 1;
	}
	for (size_t i = 0; i < nt; i++) {
		int skipped = 0;
		for (const char *p = skip; p && *p && !skipped;) {
			size_t len = strcspn(p, ",");
			char pat[64];
			if (len < sizeof(pat)) {
				memcpy(pat, p, len);
				pat[len] = 0;
				skipped = fnmatch(pat, tests[i].name, 0) == 0;
			}
			p += len + (p[len] == ',');
		}
		if (!skipped)
			sel[n++] = tests[i];
	}
	return _cmocka_run_group_tests(group, sel, n, NULL, NULL);
}

/* Parses a scenario held in a string; fails the test with the message. */
static inline void cfg_from(sim_config *cfg, const char *yaml)
{
	char err[512] = "";
	int rc = sim_scenario_parse(yaml, strlen(yaml), "test.yaml", cfg, err, sizeof(err));

	if (rc != 0)
		fail_msg("scenario: %s", err);
}

/* Expects the scenario to be rejected; returns the message (static). */
static inline const char *cfg_error(const char *yaml)
{
	static char err[512];
	sim_config cfg;

	err[0] = '\0';
	if (sim_scenario_parse(yaml, strlen(yaml), "test.yaml", &cfg, err, sizeof(err)) == 0) {
		sim_config_free(&cfg);
		fail_msg("scenario accepted, expected an error:\n%s", yaml);
	}
	return err;
}

static inline sim *sim_from(const sim_config *cfg, const sim_transport_ops *ops)
{
	char err[512] = "";
	sim *s = NULL;

	if (sim_new(cfg, ops, &s, err, sizeof(err)) != 0)
		fail_msg("sim_new: %s", err);
	return s;
}

/* ------------------------------------------------------------ probe */

#define PROBE_MAX_PLANS 4

/* A train of packets: count packets of wire length len to host dst, one
 * every gap_ns from start_ns (gap 0: all at start). Source ports are
 * sport, sport+1, ... if vary_sport, else sport. */
typedef struct probe_plan {
	uint32_t dst;
	unsigned plane;
	uint32_t count, len;
	uint64_t start_ns, gap_ns;
	uint8_t ecn;
	uint16_t sport;
	int vary_sport;
	uint32_t sent; /* so far */
} probe_plan;

typedef struct probe_host {
	sim *s;
	sim_host *h;
	probe_plan plan[PROBE_MAX_PLANS];
	unsigned nplans;
	uint64_t send_errors;
	/* what arrived */
	uint64_t rx, rx_bytes, rx_ce;
	uint64_t first_rx_ns, last_rx_ns;
	uint64_t rx_hash; /* order-sensitive hash of (sender, seq) */
	uint64_t link_events, link_down_events;
	int port_up[SIM_MAX_PLANES];
} probe_host;

static inline void *probe_host_new(sim *s, sim_host *h)
{
	probe_host *ph = calloc(1, sizeof(*ph));

	ph->s = s;
	ph->h = h;
	ph->first_rx_ns = SIM_NEVER;
	for (unsigned p = 0; p < SIM_MAX_PLANES; p++)
		ph->port_up[p] = 1;
	return ph;
}

static inline void probe_host_del(void *hs)
{
	free(hs);
}

static inline int probe_flow_start(void *hs, sim_flow *f, uint64_t now)
{
	(void)hs;
	(void)f;
	(void)now;
	return MRP_ERR_STATE; /* the probe moves no flows */
}

static inline uint64_t probe_next(const probe_host *ph)
{
	uint64_t d = SIM_NEVER;

	for (unsigned i = 0; i < ph->nplans; i++) {
		const probe_plan *pl = &ph->plan[i];

		if (pl->sent < pl->count && pl->start_ns + pl->sent * pl->gap_ns < d)
			d = pl->start_ns + pl->sent * pl->gap_ns;
	}
	return d;
}

static inline void probe_on_timer(void *hs, uint64_t now)
{
	probe_host *ph = hs;

	for (unsigned i = 0; i < ph->nplans; i++) {
		probe_plan *pl = &ph->plan[i];

		while (pl->sent < pl->count && pl->start_ns + pl->sent * pl->gap_ns <= now) {
			sim_pkt *p = sim_pkt_new(ph->s, 16);
			uint64_t seq = pl->sent;
			uint32_t from = ph->h->id;

			memcpy(p->data, &seq, 8);
			memcpy(p->data + 8, &from, 4);
			p->datalen = 16;
			p->len = pl->len;
			p->ecn = pl->ecn;
			p->src_port = (uint16_t)(pl->sport + (pl->vary_sport ? pl->sent : 0));
			p->dst_port = 4791;
			p->dst_addr = sim_host_addr(ph->s, sim_host_get(ph->s, pl->dst), pl->plane);
			if (sim_send(ph->s, ph->h, pl->plane, p) != 0)
				ph->send_errors++;
			pl->sent++;
		}
	}
	sim_set_deadline(ph->s, ph->h, probe_next(ph));
}

static inline void probe_on_packet(void *hs, unsigned plane, sim_pkt *p, uint64_t now)
{
	probe_host *ph = hs;
	uint64_t seq = 0;
	uint32_t from = 0;

	(void)plane;
	memcpy(&seq, p->data, 8);
	memcpy(&from, p->data + 8, 4);
	ph->rx++;
	ph->rx_bytes += p->len;
	ph->rx_ce += p->ecn == SIM_ECN_CE;
	if (ph->first_rx_ns == SIM_NEVER)
		ph->first_rx_ns = now;
	ph->last_rx_ns = now;
	ph->rx_hash = sim_mix64(ph->rx_hash ^ (seq << 16 | from));
	sim_pkt_free(ph->s, p);
}

static inline void probe_on_link(void *hs, unsigned plane, int up, uint64_t now)
{
	probe_host *ph = hs;

	(void)now;
	ph->link_events++;
	ph->link_down_events += !up;
	ph->port_up[plane] = up;
}

static const sim_transport_ops probe_ops = {
	.name = "probe",
	.host_new = probe_host_new,
	.host_del = probe_host_del,
	.flow_start = probe_flow_start,
	.on_packet = probe_on_packet,
	.on_timer = probe_on_timer,
	.on_link = probe_on_link,
};

static inline probe_host *probe_of(sim *s, uint32_t host)
{
	return sim_host_get(s, host)->ts;
}

/* Adds a train to host src and arms its timer. */
static inline void probe_add(sim *s, uint32_t src, probe_plan plan)
{
	probe_host *ph = probe_of(s, src);

	assert_true(ph->nplans < PROBE_MAX_PLANS);
	ph->plan[ph->nplans++] = plan;
	sim_set_deadline(s, ph->h, probe_next(ph));
}

/* The link from one node to another in a plane, by name ("p0:host0->switch"). */
static inline sim_link *link_named(sim *s, const char *name)
{
	char buf[64];

	for (size_t i = 0; i < sim_link_count(s); i++) {
		sim_link *l = sim_link_get(s, i);

		if (strcmp(sim_link_name(l, buf, sizeof(buf)), name) == 0)
			return l;
	}
	fail_msg("no link %s", name);
	return NULL;
}

#endif
