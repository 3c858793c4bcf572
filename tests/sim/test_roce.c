/*
 * The RoCEv2 baseline end to end: line rate without loss, recovery from
 * random loss, incast, plane failure (stall, not failover), black holes
 * (timeout), rerouting, ACK coalescing. Every run checks that each byte
 * arrived where it belongs and that no invariant broke.
 */
#include "roce.h"
#include "sim_test.h"

typedef struct run {
	sim_config cfg;
	sim *s;
	int status;
} run;

static void run_yaml(run *r, const char *yaml)
{
	cfg_from(&r->cfg, yaml);
	r->s = sim_from(&r->cfg, &sim_roce_ops);
	r->status = sim_run(r->s, SIM_NEVER);
	sim_verify(r->s);
}

static void run_free(run *r)
{
	sim_del(r->s);
	sim_config_free(&r->cfg);
}

/* Every flow done, verified, no violation. */
static void assert_clean(run *r)
{
	const sim_stats *st = sim_get_stats(r->s);

	assert_int_equal(r->status, SIM_RUN_DONE);
	for (size_t i = 0; i < sim_flow_count(r->s); i++) {
		sim_flow *f = sim_flow_get(r->s, i);

		assert_true(f->done);
		assert_int_equal(f->status, 0);
		assert_true(f->verified);
	}
	if (st->violations)
		fail_msg("%llu violations, first: %s", (unsigned long long)st->violations, st->msgs[0]);
	assert_int_equal(st->verify_failures, 0);
}

static double goodput(const sim_flow *f)
{
	return (double)f->bytes * 8e9 / (double)(f->finish_ns - f->start_ns);
}

static uint64_t total_drops(sim *s, unsigned cause)
{
	uint64_t n = 0;

	for (size_t i = 0; i < sim_link_count(s); i++)
		n += sim_link_get(s, i)->drops[cause];
	return n;
}

static void test_one_flow_line_rate(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 2\nlink: {rate: 100Gbps, delay: 1us}\n"
		     "flows:\n  - {src: 0, dst: 1, bytes: 4MB}\n");
	assert_clean(&r);

	sim_flow *f = sim_flow_get(r.s, 0);

	assert_true(goodput(f) >= 0.9 * 100e9);
	assert_true(goodput(f) <= 100e9);
	assert_int_equal(f->retx_pkts, 0);
	assert_int_equal(f->spurious_pkts, 0);
	for (unsigned c = 0; c < SIM_DROP_N; c++)
		assert_int_equal(total_drops(r.s, c), 0);
	run_free(&r);
}

static void test_random_loss_recovers(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 2\nlink: {rate: 100Gbps, delay: 1us, loss: 1%}\n"
		     "flows:\n  - {src: 0, dst: 1, bytes: 4MB}\n");
	assert_clean(&r);

	sim_flow *f = sim_flow_get(r.s, 0);

	assert_true(total_drops(r.s, SIM_DROP_LOSS) > 0);
	assert_true(f->retx_pkts > 0);
	/* go-back-N resends more than what was lost */
	assert_true(f->retx_pkts >= total_drops(r.s, SIM_DROP_LOSS) / 2);
	assert_true(goodput(f) < 100e9);
	run_free(&r);
}

static void test_incast(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 9\n"
		     "flows:\n  - {pattern: incast, receiver: 0, senders: 8, bytes: 1MB}\n");
	assert_clean(&r);
	assert_int_equal(sim_flow_count(r.s), 8);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(sim_flow_get(r.s, i)->dst, 0);

	sim_link *l = link_named(r.s, "p0:switch->host0");

	assert_true(l->ce_marks > 0);
	assert_true(l->max_qbytes > 100000);
	/* the receiver's port is the bottleneck: 8 MB need >= 640 us at 100G */
	for (size_t i = 0; i < 8; i++)
		assert_true(sim_flow_get(r.s, i)->finish_ns > 640000);
	run_free(&r);
}

static void test_ops_alike(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 4\n"
		     "flows:\n"
		     "  - {src: 0, dst: 1, bytes: 100000, op: write}\n"
		     "  - {src: 1, dst: 2, bytes: 100001, op: write_imm, stream: 4}\n"
		     "  - {src: 2, dst: 3, bytes: 1, op: send, stream: 9}\n");
	assert_clean(&r);
	run_free(&r);
}

/* Flows spread over planes by id, or stay on the plane they name. */
static void test_planes(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 2\nplanes: 2\n"
		     "flows:\n"
		     "  - {src: 0, dst: 1, bytes: 100KB}\n"
		     "  - {src: 0, dst: 1, bytes: 100KB}\n"
		     "  - {src: 0, dst: 1, bytes: 100KB, plane: 0}\n");
	assert_clean(&r);
	assert_true(link_named(r.s, "p0:host0->switch")->tx_bytes > 200000);
	assert_true(link_named(r.s, "p1:host0->switch")->tx_bytes > 100000);
	assert_true(link_named(r.s, "p1:host0->switch")->tx_bytes < 200000);
	run_free(&r);
}

/* A RoCE QP cannot leave its plane: it stalls while the plane is down and
 * finishes after it returns. */
static void test_plane_down_stalls(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 2\nplanes: 2\n"
		     "flows:\n  - {src: 0, dst: 1, bytes: 4MB, plane: 0}\n"
		     "events:\n"
		     "  - {at: 50us, type: plane_down, plane: 0}\n"
		     "  - {at: 300us, type: plane_up, plane: 0}\n");
	assert_clean(&r);
	assert_true(sim_flow_get(r.s, 0)->finish_ns > 300000);
	assert_true(sim_flow_get(r.s, 0)->retx_pkts > 0);
	assert_int_equal(link_named(r.s, "p1:host0->switch")->tx_pkts, 0);
	run_free(&r);

	/* the plane never returns: the flow never finishes */
	run_yaml(&r, "hosts: 2\nplanes: 2\nduration: 5ms\n"
		     "flows:\n  - {src: 0, dst: 1, bytes: 4MB, plane: 0}\n"
		     "events:\n  - {at: 50us, type: plane_down, plane: 0}\n");
	assert_int_equal(r.status, SIM_RUN_LIMIT);
	assert_false(sim_flow_get(r.s, 0)->done);
	assert_int_equal(sim_get_stats(r.s)->violations, 0);
	run_free(&r);
}

/* A black hole sends no NAK: only the retransmission timeout recovers. */
static void test_blackhole_needs_timeout(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 2\n"
		     "flows:\n  - {src: 0, dst: 1, bytes: 4MB}\n"
		     "events:\n"
		     "  - {at: 50us, type: blackhole, switch: switch, port: host1}\n"
		     "  - {at: 100us, type: link_up, switch: switch, port: host1}\n"
		     "transport:\n  roce: {rto: 200us}\n");
	assert_clean(&r);
	assert_true(total_drops(r.s, SIM_DROP_BLACKHOLE) > 0);
	/* nothing moved between the black hole and the timeout */
	assert_true(sim_flow_get(r.s, 0)->finish_ns > 50000 + 200000);
	run_free(&r);
}

/* steer reroute moves a QP to another source port: another spine. */
static void test_reroute_moves_path(void **state)
{
	run r;
	unsigned used = 0;

	(void)state;
	run_yaml(&r, "hosts: 2\n"
		     "fabric: {type: leafspine, leaves: 2, spines: 8, hosts_per_leaf: 1}\n"
		     "flows:\n  - {src: 0, dst: 1, bytes: 2MB}\n"
		     "events:\n  - {at: 60us, type: steer, host: 0, action: reroute}\n");
	assert_clean(&r);
	for (unsigned sp = 0; sp < 8; sp++) {
		char name[32];

		snprintf(name, sizeof(name), "p0:leaf0->spine%u", sp);
		used += link_named(r.s, name)->tx_pkts > 0;
	}
	assert_int_equal(used, 2);
	run_free(&r);
}

/* The receiver ACKs every ack_every packets (and the last one). */
static void test_ack_coalescing(void **state)
{
	run r;

	(void)state;
	run_yaml(&r, "hosts: 2\nflows:\n  - {src: 0, dst: 1, bytes: 4096000}\n");
	assert_clean(&r);
	assert_int_equal(link_named(r.s, "p0:host1->switch")->tx_pkts, 1000 / 4);
	run_free(&r);

	run_yaml(&r, "hosts: 2\nflows:\n  - {src: 0, dst: 1, bytes: 4096000}\n"
		     "transport:\n  roce: {ack_every: 1}\n");
	assert_clean(&r);
	assert_int_equal(link_named(r.s, "p0:host1->switch")->tx_pkts, 1000);
	run_free(&r);
}

/* The baseline's packets carry one of InfiniBand's path MTUs, the largest
 * that the scenario's mtu holds: 4,096 bytes on a jumbo-frame fabric, 2,048
 * under an mtu of 3,000, and the mtu itself where it is one of them. */
static void test_path_mtu(void **state)
{
	static const struct {
		const char *mtu;
		uint64_t pkts;
	} cases[] = { { "9000", 1000 }, { "8192", 1000 }, { "4096", 1000 }, { "4095", 2000 },
		      { "3000", 2000 }, { "1500", 4000 }, { "256", 16000 } };
	char yaml[160];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run r;
		snprintf(yaml, sizeof(yaml),
			 "hosts: 2\nmtu: %s\nflows:\n  - {src: 0, dst: 1, bytes: 4096000}\n",
			 cases[i].mtu);
		run_yaml(&r, yaml);
		assert_clean(&r);
		assert_int_equal(sim_flow_get(r.s, 0)->retx_pkts, 0);
		assert_int_equal(link_named(r.s, "p0:host0->switch")->tx_pkts, cases[i].pkts);
		run_free(&r);
	}
}

/* DCQCN: marks make the senders slow down (CNPs flow back, the bottleneck
 * queue stays below its capacity), and without ECN they do not. */
static void test_rate_cut_on_ce(void **state)
{
	run r;
	uint64_t with_ecn, without;

	(void)state;
	run_yaml(&r, "hosts: 5\nlink: {queue: 4MB, ecn_threshold: 50KB}\n"
		     "flows:\n  - {pattern: incast, receiver: 0, bytes: 2MB}\n");
	assert_clean(&r);
	with_ecn = link_named(r.s, "p0:switch->host0")->max_qbytes;
	assert_true(link_named(r.s, "p0:switch->host0")->ce_marks > 0);
	run_free(&r);

	run_yaml(&r, "hosts: 5\nlink: {queue: 4MB, ecn_threshold: off}\n"
		     "flows:\n  - {pattern: incast, receiver: 0, bytes: 2MB}\n");
	assert_clean(&r);
	without = link_named(r.s, "p0:switch->host0")->max_qbytes;
	assert_int_equal(link_named(r.s, "p0:switch->host0")->ce_marks, 0);
	assert_true(with_ecn < without);
	run_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_flow_line_rate),
		cmocka_unit_test(test_random_loss_recovers),
		cmocka_unit_test(test_incast),
		cmocka_unit_test(test_ops_alike),
		cmocka_unit_test(test_planes),
		cmocka_unit_test(test_plane_down_stalls),
		cmocka_unit_test(test_blackhole_needs_timeout),
		cmocka_unit_test(test_reroute_moves_path),
		cmocka_unit_test(test_ack_coalescing),
		cmocka_unit_test(test_path_mtu),
		cmocka_unit_test(test_rate_cut_on_ce),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
