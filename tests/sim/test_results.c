/*
 * The results MetaRoCE promises, asserted on deterministic simulated runs of
 * the scenarios shipped in sim/scenarios/results/ (the same files a user
 * runs with metaroce-sim). Every run also has to finish with every byte
 * verified, every completion exactly once and in order, and no engine
 * invariant broken. The measured figures are printed so that a failure says
 * by how much.
 */
#include "mrp_host.h"
#include "report.h"
#include "roce.h"
#include "sim_test.h"

#define GBPS 1e9
#define US 1000ull
#define MS 1000000ull

typedef struct run {
	sim_config cfg;
	sim *s;
	sim_result r;
} run;

static void run_load(run *rn, const char *name, const sim_transport_ops *ops)
{
	const char *dir = getenv("SIM_SCENARIOS");
	char path[1024], err[512] = "";

	if (!dir)
		skip();
	snprintf(path, sizeof(path), "%s/results/%s.yaml", dir ? dir : ".", name);
	memset(rn, 0, sizeof(*rn));
	if (sim_scenario_load(path, &rn->cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	rn->s = sim_from(&rn->cfg, ops);
}

/* Finish the run: everything done, verified, no violation. */
static void run_finish(run *rn, int status)
{
	assert_int_equal(sim_result_collect(rn->s, status, &rn->r), 0);
	for (unsigned i = 0; i < rn->r.nmsgs; i++)
		print_message("violation: %s\n", rn->r.msgs[i]);
	assert_int_equal(status, SIM_RUN_DONE);
	assert_int_equal(rn->r.violations, 0);
	assert_int_equal(rn->r.verify_failures, 0);
	assert_int_equal(rn->r.unfinished, 0);
	assert_int_equal(rn->r.failed, 0);
	assert_int_equal(rn->r.nic_drops, 0);
}

static void run_free(run *rn)
{
	sim_result_free(&rn->r);
	sim_del(rn->s);
	sim_config_free(&rn->cfg);
}

/* Run a scenario to the end; its aggregate goodput in bit/s. With keep, the
 * run is built in *keep (never copied from a local) and left for the caller
 * to inspect and run_free(). */
static double goodput(const char *name, const sim_transport_ops *ops, run *keep)
{
	run local;
	run *rn = keep ? keep : &local;
	run_load(rn, name, ops);
	run_finish(rn, sim_run(rn->s, SIM_NEVER));
	double g = rn->r.agg_goodput_bps;
	print_message("%-24s %-9s %8.2f Gbit/s\n", name, ops->name, g / GBPS);
	if (!keep)
		run_free(rn);
	return g;
}

/* Bytes delivered to host h over all its planes so far. */
static uint64_t host_rx_bytes(sim *s, uint32_t h)
{
	sim_host *host = sim_host_get(s, h);
	uint64_t b = 0;
	for (unsigned p = 0; p < sim_planes(s); p++)
		b += host->in[p]->tx_bytes;
	return b;
}

/* Bytes host h has sent over all its planes so far. */
static uint64_t host_tx_bytes(sim *s, uint32_t h)
{
	sim_host *host = sim_host_get(s, h);
	uint64_t b = 0;
	for (unsigned p = 0; p < sim_planes(s); p++)
		b += host->nic[p]->tx_bytes;
	return b;
}

/* Advance to t; fails the test if the run ended before. */
static void run_to(run *rn, uint64_t t)
{
	assert_int_equal(sim_run(rn->s, t), SIM_RUN_LIMIT);
}

/* 1. One flow across a two-tier fabric, no loss: >= 95 % of the link. */
static void test_r1_one_flow(void **state)
{
	(void)state;
	double g = goodput("r1_one_flow", &sim_mrp_ops, NULL);
	assert_true(g >= 0.95 * 100 * GBPS);
}

/* 2. 1 % and 10 % random loss end to end: >= 97 % and >= 80 % of the lossless
 * goodput, and better than the RoCEv2 baseline in the same scenario. */
static void test_r2_loss(void **state)
{
	(void)state;
	double lossless = goodput("r1_one_flow", &sim_mrp_ops, NULL);
	double g1 = goodput("r2_loss_1", &sim_mrp_ops, NULL);
	double r1 = goodput("r2_loss_1", &sim_roce_ops, NULL);
	double g10 = goodput("r2_loss_10", &sim_mrp_ops, NULL);
	double r10 = goodput("r2_loss_10", &sim_roce_ops, NULL);
	print_message("1 %% loss: %.3f of lossless (roce %.3f); 10 %%: %.3f (roce %.3f)\n",
		      g1 / lossless, r1 / lossless, g10 / lossless, r10 / lossless);
	assert_true(g1 >= 0.97 * lossless);
	assert_true(g10 >= 0.80 * lossless);
	assert_true(g1 > r1);
	assert_true(g10 > r10);
}

/* 3. Paths of unequal delay reorder packets across paths: spurious
 * retransmissions <= 0.1 % of packets. */
static void test_r3_unequal_delays(void **state)
{
	(void)state;
	run rn;
	goodput("r3_unequal_delays", &sim_mrp_ops, &rn);
	uint64_t pkts = 0;
	for (size_t i = 0; i < rn.r.nflows; i++)
		pkts += (rn.r.flows[i].bytes + rn.cfg.mtu - 1) / rn.cfg.mtu;
	print_message("spurious retransmissions %llu of %llu packets\n",
		      (unsigned long long)rn.r.spurious, (unsigned long long)pkts);
	assert_true(rn.r.spurious * 1000 <= pkts);
	run_free(&rn);
}

/*
 * 4. Eight planes, plane 3 fails at 1 ms: the receiver's rate after the
 * failure (from `settle` after it) is >= 0.95 x 7/8 of the rate before it;
 * the transfer completes with every byte right and every completion once.
 */
static void plane_failure(const char *name, uint64_t settle_ns)
{
	run rn;
	run_load(&rn, name, &sim_mrp_ops);
	uint64_t t_fail = 1 * MS;
	run_to(&rn, t_fail / 2);
	uint64_t b0 = host_rx_bytes(rn.s, 3);
	run_to(&rn, t_fail);
	uint64_t b1 = host_rx_bytes(rn.s, 3);
	run_to(&rn, t_fail + settle_ns);
	uint64_t b2 = host_rx_bytes(rn.s, 3);
	uint64_t win = 2 * MS;
	run_to(&rn, t_fail + settle_ns + win);
	uint64_t b3 = host_rx_bytes(rn.s, 3);
	double before = (double)(b1 - b0) * 8e9 / (double)(t_fail / 2);
	double after = (double)(b3 - b2) * 8e9 / (double)win;
	print_message("%s: %.1f Gbit/s before, %.1f after (%.3f of 7/8)\n", name,
		      before / GBPS, after / GBPS, after / (before * 7 / 8));
	assert_true(after >= 0.95 * before * 7 / 8);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);
}

static void test_r4_plane_down(void **state)
{
	(void)state;
	/* a netlink-style link-down is acted on at once: measure from 10 us on */
	plane_failure("r4_plane_down", 10 * US);
}

static void test_r4_blackhole(void **state)
{
	(void)state;
	/* silent: the paths' own timers must find it within 3 RTOs; the RTO
	 * here is the engine's floor, rto_min = 100 us */
	plane_failure("r4_blackhole", 3 * 100 * US);
}

/* 5. Planes 1, 2, 4, 8: aggregate goodput >= 0.95 x k x one plane's. */
static void test_r5_plane_scaling(void **state)
{
	(void)state;
	double one = goodput("r5_planes_1", &sim_mrp_ops, NULL);
	const char *names[] = { "r5_planes_2", "r5_planes_4", "r5_planes_8" };
	const int k[] = { 2, 4, 8 };
	for (int i = 0; i < 3; i++) {
		double g = goodput(names[i], &sim_mrp_ops, NULL);
		print_message("%d planes: %.2f x one plane\n", k[i], g / one);
		assert_true(g >= 0.95 * k[i] * one);
	}
}

/* Rates of the senders of hosts [first, first + n) between t0 and t1. */
static void sender_rates(run *rn, uint32_t first, uint32_t n, uint64_t t0, uint64_t t1,
			 double *rate)
{
	uint64_t b0[64];
	assert_true(n <= 64);
	run_to(rn, t0);
	for (uint32_t i = 0; i < n; i++)
		b0[i] = host_tx_bytes(rn->s, first + i);
	run_to(rn, t1);
	for (uint32_t i = 0; i < n; i++)
		rate[i] = (double)(host_tx_bytes(rn->s, first + i) - b0[i]) * 8e9 / (double)(t1 - t0);
}

/* 6. Two flows into one receiver: Jain >= 0.95 from 10 RTTs on; a 16-path
 * flow against a 1-path flow: rate ratio within 0.8-1.25. (The base RTT of
 * these scenarios is about 5 us: 10 RTTs is 50 us.) */
static void test_r6_fairness(void **state)
{
	(void)state;
	run rn;
	double rate[2];
	run_load(&rn, "r6_two_flows", &sim_mrp_ops);
	sender_rates(&rn, 0, 2, 50 * US, 3 * MS, rate);
	double j = sim_jain(rate, 2);
	print_message("two flows: %.1f and %.1f Gbit/s, Jain %.4f\n", rate[0] / GBPS,
		      rate[1] / GBPS, j);
	assert_true(j >= 0.95);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);

	run_load(&rn, "r6_paths_16_vs_1", &sim_mrp_ops);
	sender_rates(&rn, 0, 2, 50 * US, 3 * MS, rate);
	double ratio = rate[0] / rate[1];
	print_message("16 paths %.1f, 1 path %.1f Gbit/s: ratio %.3f\n", rate[0] / GBPS,
		      rate[1] / GBPS, ratio);
	assert_true(ratio >= 0.8 && ratio <= 1.25);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);
}

/*
 * 7. Incast 64:1, every sender starting at 0. The first round trip is the
 * time until every sender has heard back from the receiver (its first ACK
 * carries the receiver's rate hint); measured from the second round trip
 * (2 x that) until the first sender is done: Jain >= 0.95 over the senders'
 * rates, the receiver's link >= 90 % busy, no drops anywhere, and the
 * receiver's queue under the ECN threshold in at least 90 % of 1 us samples.
 */
static void test_r7_incast(void **state)
{
	(void)state;
	run rn;
	run_load(&rn, "r7_incast_64", &sim_mrp_ops);
	const uint32_t n = 64;
	uint64_t t = 0, t_rtt = 0;
	while (!t_rtt) {
		t += 1 * US;
		run_to(&rn, t);
		uint32_t heard = 0;
		for (uint32_t i = 0; i < n; i++)
			heard += sim_host_get(rn.s, 1 + i)->in[0]->tx_pkts > 0;
		if (heard == n)
			t_rtt = t;
	}
	uint64_t t0 = 2 * t_rtt;
	run_to(&rn, t0);
	uint64_t tx0[64], rx0 = host_rx_bytes(rn.s, 0), drops0 = 0;
	for (uint32_t i = 0; i < n; i++)
		tx0[i] = host_tx_bytes(rn.s, 1 + i);
	for (size_t i = 0; i < sim_link_count(rn.s); i++)
		for (unsigned d = 0; d < SIM_DROP_N; d++)
			drops0 += sim_link_get(rn.s, i)->drops[d];
	sim_link *rl = sim_host_get(rn.s, 0)->in[0];
	uint64_t samples = 0, under = 0;
	int any_done = 0;
	t = t0;
	while (!any_done) {
		t += 1 * US;
		run_to(&rn, t);
		samples++;
		under += rl->qbytes <= rn.cfg.plane[0].host_link.ecn_bytes;
		for (size_t f = 0; f < sim_flow_count(rn.s); f++)
			any_done |= sim_flow_get(rn.s, f)->done;
	}
	double rate[64];
	for (uint32_t i = 0; i < n; i++)
		rate[i] = (double)(host_tx_bytes(rn.s, 1 + i) - tx0[i]) * 8e9 / (double)(t - t0);
	double util = (double)(host_rx_bytes(rn.s, 0) - rx0) * 8e9 / (double)(t - t0) / 100e9;
	uint64_t drops = 0;
	for (size_t i = 0; i < sim_link_count(rn.s); i++)
		for (unsigned d = 0; d < SIM_DROP_N; d++)
			drops += sim_link_get(rn.s, i)->drops[d];
	double j = sim_jain(rate, n);
	print_message("incast 64:1: first round trip %.0f us; from %.0f us for %.0f us: Jain %.4f, "
		      "receiver link %.3f busy, %llu drops, queue under ECN threshold in %.3f "
		      "of samples\n",
		      (double)t_rtt / 1e3, (double)t0 / 1e3, (double)(t - t0) / 1e3, j, util,
		      (unsigned long long)(drops - drops0), (double)under / (double)samples);
	assert_true(j >= 0.95);
	assert_true(util >= 0.90);
	assert_int_equal(drops - drops0, 0);
	assert_true(under * 10 >= samples * 9);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);
}

/* 8. One flow over a 1.5 ms RTT at 100 Gbit/s: >= 90 % of the link in steady
 * state, measured while the receiver goes from 50 % to 90 % of the bytes. */
static void test_r8_long_rtt(void **state)
{
	(void)state;
	run rn;
	run_load(&rn, "r8_long_rtt", &sim_mrp_ops);
	uint64_t total = sim_flow_get(rn.s, 0)->bytes;
	uint64_t t = 0, t50 = 0, t90 = 0, b50 = 0, b90 = 0;
	while (!t90) {
		t += 100 * US;
		run_to(&rn, t);
		uint64_t b = host_rx_bytes(rn.s, 1);
		if (!t50 && b >= total / 2) {
			t50 = t;
			b50 = b;
		}
		if (b >= total / 10 * 9) {
			t90 = t;
			b90 = b;
		}
	}
	double rate = (double)(b90 - b50) * 8e9 / (double)(t90 - t50);
	print_message("1.5 ms RTT: %.1f Gbit/s in steady state\n", rate / GBPS);
	assert_true(rate >= 0.90 * 100 * GBPS);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_r1_one_flow),
		cmocka_unit_test(test_r2_loss),
		cmocka_unit_test(test_r3_unequal_delays),
		cmocka_unit_test(test_r4_plane_down),
		cmocka_unit_test(test_r4_blackhole),
		cmocka_unit_test(test_r5_plane_scaling),
		cmocka_unit_test(test_r6_fairness),
		cmocka_unit_test(test_r7_incast),
		cmocka_unit_test(test_r8_long_rtt),
	};
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests_name("sim/results", tests, NULL, NULL);
}
