/*
 * Links: serialization and propagation are exact, queues build and overflow
 * at the right rate, ECN marks only above threshold and only ECT packets,
 * random loss has the configured rate and is reproducible, and link state
 * changes are seen by hosts (down/up) or not (black hole).
 */
#include "sim_test.h"

/* Two hosts on one switch at 10 Gbit/s with 3 us of wire each way. */
static const char *const two_hosts = "hosts: 2\n"
				     "link: {rate: 10Gbps, delay: 3us, queue: 100KB, ecn_threshold: off}\n";

static void test_single_packet_exact(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, two_hosts);
	s = sim_from(&cfg, &probe_ops);
	/* 1250 bytes at 10 Gbit/s = 1000 ns per hop, plus 3000 ns of wire,
	 * store and forward over two hops: 8000 ns. */
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 1, .len = 1250});
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_IDLE);

	probe_host *rx = probe_of(s, 1);

	assert_int_equal(rx->rx, 1);
	assert_int_equal(rx->first_rx_ns, 8000);
	assert_int_equal(link_named(s, "p0:host0->switch")->tx_bytes, 1250);
	assert_int_equal(link_named(s, "p0:switch->host1")->tx_pkts, 1);
	assert_int_equal(link_named(s, "p0:host1->switch")->tx_pkts, 0);
	assert_int_equal(sim_get_stats(s)->pkts_live, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

/* Back to back, the second packet follows one serialization time later. */
static void test_back_to_back(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, two_hosts);
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 2, .len = 1250});
	sim_run(s, SIM_NEVER);
	assert_int_equal(probe_of(s, 1)->first_rx_ns, 8000);
	assert_int_equal(probe_of(s, 1)->last_rx_ns, 9000);
	sim_del(s);
	sim_config_free(&cfg);
}

/* A serialization time that is not a whole number of ns does not drift:
 * 100 packets of 4178 bytes at 100 Gbit/s take 33424 ns, not 100 x 335. */
static void test_fractional_serialization(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 2\nlink: {rate: 100Gbps, delay: 1us}\n");
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 100, .len = 4178});
	sim_run(s, SIM_NEVER);

	/* last packet: leaves the NIC at 33424, wire 1000, second hop 334.24,
	 * wire 1000 */
	int64_t want = 33424 + 1000 + 334 + 1000;
	int64_t got = (int64_t)probe_of(s, 1)->last_rx_ns;

	assert_true(got >= want - 2 && got <= want + 2);
	sim_del(s);
	sim_config_free(&cfg);
}

static const char *const three_hosts_fmt = "hosts: 3\n"
					   "link: {rate: 10Gbps, delay: 1us, queue: %s, ecn_threshold: %s}\n";

/* Hosts 0 and 1 each send count packets of 1000 bytes at line rate to host 2:
 * the switch port to host 2 sees twice what it can send. */
static sim *overload(sim_config *cfg, const char *queue, const char *ecn, uint32_t count, uint8_t ecnbits)
{
	char yaml[256];

	snprintf(yaml, sizeof(yaml), three_hosts_fmt, queue, ecn);
	cfg_from(cfg, yaml);

	sim *s = sim_from(cfg, &probe_ops);

	for (uint32_t h = 0; h < 2; h++)
		probe_add(s, h, (probe_plan){.dst = 2, .count = count, .len = 1000, .gap_ns = 800,
					     .ecn = ecnbits, .sport = (uint16_t)(1000 + h)});
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_IDLE);
	return s;
}

/* 2:1 overload builds the queue by one packet per two arrivals, and the
 * bottleneck then sends back to back. */
static void test_queue_builds_at_overload(void **state)
{
	sim_config cfg;
	sim *s = overload(&cfg, "10MB", "off", 200, SIM_ECN_NOT_ECT);
	sim_link *l = link_named(s, "p0:switch->host2");
	probe_host *rx = probe_of(s, 2);

	(void)state;
	assert_int_equal(rx->rx, 400);
	assert_int_equal(l->drops[SIM_DROP_OVERFLOW], 0);
	/* 400 KB arrive while 200 KB leave */
	assert_true(l->max_qbytes >= 195000 && l->max_qbytes <= 205000);
	assert_int_equal(rx->last_rx_ns - rx->first_rx_ns, 399 * 800);
	assert_int_equal(l->qbytes, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

/* A full queue drops the tail and never exceeds its capacity. */
static void test_queue_drops_when_full(void **state)
{
	sim_config cfg;
	sim *s = overload(&cfg, "100KB", "off", 1000, SIM_ECN_NOT_ECT);
	sim_link *l = link_named(s, "p0:switch->host2");
	probe_host *rx = probe_of(s, 2);

	(void)state;
	assert_true(l->max_qbytes <= 100000);
	assert_true(l->max_qbytes >= 99000);
	assert_true(l->drops[SIM_DROP_OVERFLOW] > 800);
	assert_int_equal(rx->rx + l->drops[SIM_DROP_OVERFLOW], 2000);
	assert_int_equal(link_named(s, "p0:host0->switch")->drops[SIM_DROP_OVERFLOW], 0);
	sim_del(s);
	sim_config_free(&cfg);
}

/* ECT packets are marked when the queue exceeds the threshold. */
static void test_ecn_marks_above_threshold(void **state)
{
	sim_config cfg;
	sim *s = overload(&cfg, "10MB", "10KB", 200, SIM_ECN_ECT0);
	sim_link *l = link_named(s, "p0:switch->host2");
	probe_host *rx = probe_of(s, 2);

	(void)state;
	/* the queue passes 10 KB after about 20 packets of 400 */
	assert_true(l->ce_marks >= 350 && l->ce_marks < 400);
	assert_int_equal(rx->rx_ce, l->ce_marks);
	assert_int_equal(link_named(s, "p0:host0->switch")->ce_marks, 0);
	sim_del(s);
	sim_config_free(&cfg);

	/* ECT(1) counts as ECT too */
	s = overload(&cfg, "10MB", "10KB", 200, SIM_ECN_ECT1);
	assert_int_equal(probe_of(s, 2)->rx_ce, link_named(s, "p0:switch->host2")->ce_marks);
	assert_true(probe_of(s, 2)->rx_ce >= 350);
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_ecn_not_below_threshold(void **state)
{
	sim_config cfg;
	sim *s = overload(&cfg, "10MB", "300KB", 200, SIM_ECN_ECT0);

	(void)state;
	assert_true(link_named(s, "p0:switch->host2")->max_qbytes > 150000);
	assert_int_equal(link_named(s, "p0:switch->host2")->ce_marks, 0);
	assert_int_equal(probe_of(s, 2)->rx_ce, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_ecn_never_marks_not_ect(void **state)
{
	sim_config cfg;
	sim *s = overload(&cfg, "10MB", "10KB", 200, SIM_ECN_NOT_ECT);

	(void)state;
	assert_true(link_named(s, "p0:switch->host2")->max_qbytes > 150000);
	assert_int_equal(link_named(s, "p0:switch->host2")->ce_marks, 0);
	assert_int_equal(probe_of(s, 2)->rx_ce, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

/* 10^5 packets over a link with 10% loss. */
static void lossy_run(uint64_t seed, uint64_t *rx, uint64_t *hash, uint64_t *lost)
{
	char yaml[256];
	sim_config cfg;
	sim *s;

	snprintf(yaml, sizeof(yaml),
		 "seed: %llu\nhosts: 2\nlink: {rate: 10Gbps, delay: 1us}\n"
		 "links:\n  - {switch: switch, port: host1, loss: 0.1}\n",
		 (unsigned long long)seed);
	cfg_from(&cfg, yaml);
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 100000, .len = 100, .gap_ns = 80});
	sim_run(s, SIM_NEVER);
	*rx = probe_of(s, 1)->rx;
	*hash = probe_of(s, 1)->rx_hash;
	*lost = link_named(s, "p0:switch->host1")->drops[SIM_DROP_LOSS];
	assert_int_equal(link_named(s, "p0:host0->switch")->drops[SIM_DROP_LOSS], 0);
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_random_loss_rate_and_reproducible(void **state)
{
	uint64_t rx1, h1, lost1, rx2, h2, lost2, rx3, h3, lost3;

	(void)state;
	lossy_run(1, &rx1, &h1, &lost1);
	/* binomial: mean 90000, sd ~95; allow 5 sd */
	assert_true(rx1 >= 89525 && rx1 <= 90475);
	assert_int_equal(rx1 + lost1, 100000);

	lossy_run(1, &rx2, &h2, &lost2);
	assert_int_equal(rx1, rx2);
	assert_true(h1 == h2); /* the very same packets arrived */

	lossy_run(2, &rx3, &h3, &lost3);
	assert_true(h3 != h1); /* another seed loses other packets */
	assert_true(rx3 >= 89525 && rx3 <= 90475);
}

/* A host's link going down is reported to that host at once; what is sent
 * meanwhile fails; it comes back with link_up. */
static void test_link_down_up_notifies(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 2\nlink: {rate: 10Gbps, delay: 1us}\n"
		       "events:\n"
		       "  - {at: 10us, type: link_down, host: 0}\n"
		       "  - {at: 20500ns, type: link_up, host: 0}\n");
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 30, .len = 1000, .gap_ns = 1000});
	sim_run(s, SIM_NEVER);

	probe_host *tx = probe_of(s, 0), *rx = probe_of(s, 1);

	assert_int_equal(tx->link_events, 2);
	assert_int_equal(tx->link_down_events, 1);
	assert_true(tx->port_up[0]);
	assert_int_equal(rx->link_events, 0);
	/* sends at 10..20 us fail (the event at 10 us comes first: it was
	 * scheduled first); the packet sent at 9 us dies on the wire */
	assert_int_equal(tx->send_errors, 11);
	assert_int_equal(rx->rx, 18);
	assert_int_equal(link_named(s, "p0:host0->switch")->drops[SIM_DROP_DOWN], 12);
	sim_del(s);
	sim_config_free(&cfg);
}

/* A black-holed switch port drops silently: nobody is told. */
static void test_blackhole_is_silent(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 2\nlink: {rate: 10Gbps, delay: 1us}\n"
		       "events:\n"
		       "  - {at: 10us, type: blackhole, switch: switch, port: host1}\n");
	s = sim_from(&cfg, &probe_ops);
	probe_add(s, 0, (probe_plan){.dst = 1, .count = 30, .len = 1000, .gap_ns = 1000});
	sim_run(s, SIM_NEVER);

	probe_host *tx = probe_of(s, 0), *rx = probe_of(s, 1);
	sim_link *l = link_named(s, "p0:switch->host1");

	assert_int_equal(tx->link_events + rx->link_events, 0);
	assert_int_equal(tx->send_errors, 0);
	assert_true(sim_port_up(s, sim_host_get(s, 1), 0));
	assert_true(rx->rx >= 8 && rx->rx <= 10);
	assert_int_equal(rx->rx + l->drops[SIM_DROP_BLACKHOLE] + l->drops[SIM_DROP_DOWN], 30);
	assert_true(l->drops[SIM_DROP_BLACKHOLE] >= 20);
	sim_del(s);
	sim_config_free(&cfg);
}

/* plane_down takes every host's port of that plane down, and only those. */
static void test_plane_down(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 4\nplanes: 2\n"
		       "events:\n"
		       "  - {at: 1us, type: plane_down, plane: 1}\n"
		       "  - {at: 2us, type: plane_up, plane: 1}\n");
	s = sim_from(&cfg, &probe_ops);
	sim_run(s, 1500);
	for (uint32_t h = 0; h < 4; h++) {
		assert_false(probe_of(s, h)->port_up[1]);
		assert_true(probe_of(s, h)->port_up[0]);
		assert_false(sim_port_up(s, sim_host_get(s, h), 1));
		assert_true(sim_port_up(s, sim_host_get(s, h), 0));
	}
	sim_run(s, SIM_NEVER);
	for (uint32_t h = 0; h < 4; h++) {
		assert_int_equal(probe_of(s, h)->link_events, 2);
		assert_true(probe_of(s, h)->port_up[1]);
	}
	sim_del(s);
	sim_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_packet_exact),
		cmocka_unit_test(test_back_to_back),
		cmocka_unit_test(test_fractional_serialization),
		cmocka_unit_test(test_queue_builds_at_overload),
		cmocka_unit_test(test_queue_drops_when_full),
		cmocka_unit_test(test_ecn_marks_above_threshold),
		cmocka_unit_test(test_ecn_not_below_threshold),
		cmocka_unit_test(test_ecn_never_marks_not_ect),
		cmocka_unit_test(test_random_loss_rate_and_reproducible),
		cmocka_unit_test(test_link_down_up_notifies),
		cmocka_unit_test(test_blackhole_is_silent),
		cmocka_unit_test(test_plane_down),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
