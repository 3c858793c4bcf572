/*
 * ECMP in a leaf-spine plane: a 5-tuple always takes the same spine, many
 * source ports spread evenly over the spines, traffic within a leaf never
 * climbs to a spine, a cable that goes down leaves the ECMP set, and a black
 * hole does not.
 */
#include "sim_test.h"

/* 2 hosts on different leaves, 8 spines. */
static const char *const fabric8 = "hosts: 2\n"
				   "fabric: {type: leafspine, leaves: 2, spines: 8, hosts_per_leaf: 1}\n"
				   "link: {rate: 100Gbps, delay: 1us, queue: 10MB}\n";

static uint64_t uplink_pkts(sim *s, uint32_t spine)
{
	char name[64];

	snprintf(name, sizeof(name), "p0:leaf0->spine%u", spine);
	return link_named(s, name)->tx_pkts;
}

static void test_hash_deterministic(void **state)
{
	(void)state;
	uint64_t a = sim_ecmp_hash(0x0a000001, 0x0a000002, 49152, 4791, 12345);

	assert_true(a == sim_ecmp_hash(0x0a000001, 0x0a000002, 49152, 4791, 12345));
	assert_true(a != sim_ecmp_hash(0x0a000001, 0x0a000002, 49153, 4791, 12345));
	assert_true(a != sim_ecmp_hash(0x0a000001, 0x0a000002, 49152, 4791, 12346));
	assert_true(a != sim_ecmp_hash(0x0a000002, 0x0a000001, 49152, 4791, 12345));
}

/* The same 5-tuple always goes to the same spine. */
static void test_same_tuple_same_spine(void **state)
{
	sim_config cfg;

	(void)state;
	cfg_from(&cfg, fabric8);
	for (uint16_t sport = 50000; sport < 50020; sport++) {
		sim *s = sim_from(&cfg, &probe_ops);
		unsigned used = 0;

		probe_add(s, 0, (probe_plan){.dst = 1, .count = 100, .len = 1000, .gap_ns = 100,
					     .sport = sport});
		sim_run(s, SIM_NEVER);
		for (uint32_t sp = 0; sp < 8; sp++) {
			uint64_t n = uplink_pkts(s, sp);

			assert_true(n == 0 || n == 100);
			used += n == 100;
		}
		assert_int_equal(used, 1);
		assert_int_equal(probe_of(s, 1)->rx, 100);
		sim_del(s);
	}
	sim_config_free(&cfg);
}

/* 10^4 distinct source ports land on every spine within +-20% of 1/8. */
static void test_spread_over_spines(void **state)
{
	sim_config cfg;
	sim *s;
	uint64_t total = 0;

	(void)state;
	cfg_from(&cfg, fabric8);
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 10000, .len = 1000, .gap_ns = 100,
				     .sport = 20000, .vary_sport = 1});
	sim_run(s, SIM_NEVER);
	for (uint32_t sp = 0; sp < 8; sp++) {
		uint64_t n = uplink_pkts(s, sp);

		assert_true(n >= 1000 && n <= 1500);
		char name[64];

		snprintf(name, sizeof(name), "p0:spine%u->leaf1", sp);
		assert_int_equal(link_named(s, name)->tx_pkts, n); /* and down to the right leaf */
		total += n;
	}
	assert_int_equal(total, 10000);
	assert_int_equal(probe_of(s, 1)->rx, 10000);
	sim_del(s);
	sim_config_free(&cfg);
}

/* Another seed gives the switches other salts: another mapping. */
static void test_salt_follows_seed(void **state)
{
	sim_config cfg;
	uint64_t first[8];
	int differ = 0;

	(void)state;
	cfg_from(&cfg, fabric8);
	for (int round = 0; round < 2; round++) {
		cfg.seed = 1 + (uint64_t)round;

		sim *s = sim_from(&cfg, &probe_ops);

		probe_add(s, 0, (probe_plan){.dst = 1, .count = 64, .len = 1000, .gap_ns = 100,
					     .sport = 20000, .vary_sport = 1});
		sim_run(s, SIM_NEVER);
		for (uint32_t sp = 0; sp < 8; sp++) {
			if (round == 0)
				first[sp] = uplink_pkts(s, sp);
			else
				differ |= first[sp] != uplink_pkts(s, sp);
		}
		sim_del(s);
	}
	assert_true(differ);
	sim_config_free(&cfg);
}

/* Hosts on the same leaf talk through the leaf only. */
static void test_same_leaf_stays_down(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 4\nfabric: {type: leafspine, leaves: 2, spines: 2}\n");
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 50, .len = 1000, .gap_ns = 100,
				     .sport = 1, .vary_sport = 1});
	sim_run(s, SIM_NEVER);
	assert_int_equal(probe_of(s, 1)->rx, 50);
	for (size_t i = 0; i < sim_link_count(s); i++) {
		sim_link *l = sim_link_get(s, i);

		if (l->from.kind == SIM_NODE_SPINE || l->to.kind == SIM_NODE_SPINE)
			assert_int_equal(l->tx_pkts, 0);
	}
	assert_int_equal(link_named(s, "p0:leaf0->host1")->tx_pkts, 50);
	sim_del(s);
	sim_config_free(&cfg);
}

/* A leaf-spine cable that is down is left out of ECMP: nothing is lost. */
static void test_down_cable_leaves_ecmp(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 2\n"
		       "fabric: {type: leafspine, leaves: 2, spines: 8, hosts_per_leaf: 1}\n"
		       "events:\n"
		       "  - {at: 0, type: link_down, switch: leaf0, port: spine3}\n"
		       "  - {at: 0, type: link_down, switch: spine5, port: leaf1}\n");
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 2000, .len = 1000, .gap_ns = 100,
				     .sport = 20000, .vary_sport = 1});
	sim_run(s, SIM_NEVER);
	assert_int_equal(probe_of(s, 1)->rx, 2000);
	assert_int_equal(uplink_pkts(s, 3), 0);
	assert_int_equal(uplink_pkts(s, 5), 0);
	for (uint32_t sp = 0; sp < 8; sp++)
		if (sp != 3 && sp != 5)
			assert_true(uplink_pkts(s, sp) > 200);
	/* hosts see nothing of fabric failures */
	assert_int_equal(probe_of(s, 0)->link_events, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

/* A black-holed leaf-spine cable stays in ECMP and eats its share. */
static void test_blackhole_stays_in_ecmp(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 2\n"
		       "fabric: {type: leafspine, leaves: 2, spines: 8, hosts_per_leaf: 1}\n"
		       "events:\n"
		       "  - {at: 0, type: blackhole, switch: leaf0, port: 3}\n"); /* spine2 */
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 2000, .len = 1000, .gap_ns = 100,
				     .sport = 20000, .vary_sport = 1});
	sim_run(s, SIM_NEVER);

	sim_link *l = link_named(s, "p0:leaf0->spine2");

	assert_true(l->drops[SIM_DROP_BLACKHOLE] > 150);
	assert_int_equal(probe_of(s, 1)->rx + l->drops[SIM_DROP_BLACKHOLE], 2000);
	assert_int_equal(probe_of(s, 0)->link_events, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

/* Addresses name (host, plane) one to one. */
static void test_addresses(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 300\nplanes: 3\n");
	s = sim_from(&cfg, &probe_ops);
	for (uint32_t h = 0; h < 300; h++) {
		for (unsigned p = 0; p < 3; p++) {
			unsigned q = 99;
			uint32_t a = sim_host_addr(s, sim_host_get(s, h), p);

			assert_ptr_equal(sim_addr_host(s, a, &q), sim_host_get(s, h));
			assert_int_equal(q, p);
		}
	}
	assert_int_equal(sim_host_addr(s, sim_host_get(s, 258), 2), (10u << 24) | (2u << 16) | 258u);
	assert_null(sim_addr_host(s, (10u << 24) | (3u << 16) | 1u, NULL));
	assert_null(sim_addr_host(s, (10u << 24) | 300u, NULL));
	assert_null(sim_addr_host(s, (11u << 24) | 1u, NULL));
	sim_del(s);
	sim_config_free(&cfg);
}

/* The longest round trip of the fabric as built: host cables both ways at
 * each end, and between two leaves the slowest spine each way; a cable of
 * the same leaf never counts (no route climbs to a spine there). */
static void test_base_rtt_max(void **state)
{
	(void)state;
	static const struct {
		const char *yaml;
		uint64_t rtt_ns;
	} t[] = {
		/* one switch: 4 host cables' crossings */
		{ "hosts: 2\nlink: {delay: 1ms}\n", 4000000 },
		/* 2 leaves, the far spine 100 us away from leaf1 only: 2 + 2
		 * + 100 + 2 each way (not 100 + 100: a route from leaf1 to
		 * itself does not climb) */
		{ "hosts: 4\nfabric: {type: leafspine, leaves: 2, spines: 2}\n"
		  "link: {delay: 2us}\n"
		  "links:\n  - {plane: 0, switch: spine1, port: leaf1, delay: 100us}\n",
		  212000 },
		/* the slower of two planes; a slower host cable on one host */
		{ "hosts: 4\nplanes:\n  - {link: {delay: 1us}}\n  - {link: {delay: 5us}}\n"
		  "fabric: {type: leafspine, leaves: 2, spines: 4}\n"
		  "links:\n  - {plane: 0, host: 3, delay: 30us}\n",
		  2 * (30000 + 30000) + 4 * 5000 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		sim_config cfg;
		cfg_from(&cfg, t[i].yaml);
		sim *s = sim_from(&cfg, &probe_ops);
		assert_int_equal(sim_base_rtt_max(s), t[i].rtt_ns);
		sim_del(s);
		sim_config_free(&cfg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_deterministic),
		cmocka_unit_test(test_same_tuple_same_spine),
		cmocka_unit_test(test_spread_over_spines),
		cmocka_unit_test(test_salt_follows_seed),
		cmocka_unit_test(test_same_leaf_stays_down),
		cmocka_unit_test(test_down_cable_leaves_ecmp),
		cmocka_unit_test(test_blackhole_stays_in_ecmp),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_base_rtt_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
