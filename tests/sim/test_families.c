/*
 * Families of scenarios MetaRoCE must win, each over several topologies,
 * sizes and seeds (sim/scenarios/families/), not one tuned scenario. Every
 * run must also finish with every byte verified, every completion exactly
 * once and in order, and no engine invariant broken. Measured figures are
 * printed, so that a failure says by how much.
 *
 * What is asserted here is what holds today; the families of issue 11 that
 * do not hold yet (incast drops <= 0.1 % of data packets, which needs
 * first-round-trip admission; scale-across; plane churn; one-direction
 * black holes; bursty loss; collectives) are listed in bench/README.md with
 * their figures, not asserted.
 */
#include "mrp_host.h"
#include "report.h"
#include "sim_test.h"

#define US 1000ull

typedef struct run {
	sim_config cfg;
	sim *s;
	sim_result r;
} run;

static void run_load(run *rn, const char *name, uint64_t seed)
{
	const char *dir = getenv("SIM_SCENARIOS");
	char path[1024], err[512] = "";

	if (!dir)
		skip();
	snprintf(path, sizeof(path), "%s/families/%s.yaml", dir ? dir : ".", name);
	memset(rn, 0, sizeof(*rn));
	if (sim_scenario_load(path, &rn->cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	rn->cfg.seed = seed;
	rn->s = sim_from(&rn->cfg, &sim_mrp_ops);
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
}

static void run_free(run *rn)
{
	sim_result_free(&rn->r);
	sim_del(rn->s);
	sim_config_free(&rn->cfg);
}

static uint64_t all_drops(sim *s)
{
	uint64_t d = 0;
	for (size_t i = 0; i < sim_link_count(s); i++)
		for (unsigned k = 0; k < SIM_DROP_N; k++)
			d += sim_link_get(s, i)->drops[k];
	return d;
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

static uint64_t host_tx_bytes(sim *s, uint32_t h)
{
	sim_host *host = sim_host_get(s, h);
	uint64_t b = 0;
	for (unsigned p = 0; p < sim_planes(s); p++)
		b += host->nic[p]->tx_bytes;
	return b;
}

static void run_to(run *rn, uint64_t t)
{
	assert_int_equal(sim_run(rn->s, t), SIM_RUN_LIMIT);
}

/*
 * Reordering: paths whose delays differ by up to 50x (spines 1 to 50 us
 * away; ACKs come back over the same spread). Reordering across paths is
 * not loss, and a timeout that was only delay is undone: spurious
 * retransmissions <= 0.1 % of the data packets, on three topologies and
 * three seeds each. The networks drop nothing, so every retransmission
 * there is spurious.
 */
static void test_reordering(void **state)
{
	(void)state;
	static const char *const names[] = { "reorder_50x", "reorder_50x_8spines",
					     "reorder_50x_small" };
	for (unsigned i = 0; i < 3; i++)
		for (uint64_t seed = 1; seed <= 3; seed++) {
			run rn;
			run_load(&rn, names[i], seed);
			run_finish(&rn, sim_run(rn.s, SIM_NEVER));
			uint64_t pkts = 0;
			for (size_t f = 0; f < rn.r.nflows; f++)
				pkts += (rn.r.flows[f].bytes + rn.cfg.mtu - 1) / rn.cfg.mtu;
			print_message("%-20s seed %llu: %.1f Gbit/s, spurious retransmissions %llu "
				      "of %llu packets (%.3f %%), drops %llu\n",
				      names[i], (unsigned long long)seed,
				      rn.r.agg_goodput_bps / 1e9,
				      (unsigned long long)rn.r.spurious,
				      (unsigned long long)pkts,
				      100.0 * (double)rn.r.spurious / (double)pkts,
				      (unsigned long long)all_drops(rn.s));
			assert_int_equal(all_drops(rn.s), 0);
			assert_true(rn.r.spurious * 1000 <= pkts);
			run_free(&rn);
		}
}

/*
 * Incast fairness and utilization: from the third round trip (the first
 * ends when every sender has heard from the receiver) until the first
 * sender is done, Jain >= 0.95 over the senders' rates and the receiver's
 * links >= 90 % busy. Over a single switch (64:1 with a 2 MB queue; 48:1 at
 * 25 Gbit/s), a leaf-spine fabric (64:1 from four leaves; ECMP seeds 1 and
 * 2) and two planes (32:1). Drops of the first
 * round trip are printed, not asserted: the family's <= 0.1 % does not
 * hold yet.
 */
static void incast(const char *name, uint64_t seed)
{
	run rn;
	run_load(&rn, name, seed);
	uint32_t n = (uint32_t)sim_flow_count(rn.s), rx = sim_flow_get(rn.s, 0)->dst;
	uint64_t t = 0, t_rtt = 0;
	double cap = 0;
	for (unsigned p = 0; p < sim_planes(rn.s); p++)
		cap += (double)rn.cfg.plane[p].host_link.rate_bps;
	assert_true(n <= 256);
	while (!t_rtt) {
		t += 1 * US;
		run_to(&rn, t);
		uint32_t heard = 0;
		for (uint32_t i = 0; i < n; i++) {
			sim_host *h = sim_host_get(rn.s, sim_flow_get(rn.s, i)->src);
			uint64_t in = 0;
			for (unsigned p = 0; p < sim_planes(rn.s); p++)
				in += h->in[p]->tx_pkts;
			heard += in > 0;
		}
		if (heard == n)
			t_rtt = t;
	}
	uint64_t t0 = 2 * t_rtt;
	run_to(&rn, t0);
	uint64_t tx0[256], rx0 = host_rx_bytes(rn.s, rx);
	for (uint32_t i = 0; i < n; i++)
		tx0[i] = host_tx_bytes(rn.s, sim_flow_get(rn.s, i)->src);
	int any_done = 0;
	t = t0;
	while (!any_done) {
		t += 1 * US;
		run_to(&rn, t);
		for (uint32_t i = 0; i < n; i++)
			any_done |= sim_flow_get(rn.s, i)->done;
	}
	double rate[256];
	for (uint32_t i = 0; i < n; i++)
		rate[i] = (double)(host_tx_bytes(rn.s, sim_flow_get(rn.s, i)->src) - tx0[i]) * 8e9 /
			  (double)(t - t0);
	double util = (double)(host_rx_bytes(rn.s, rx) - rx0) * 8e9 / (double)(t - t0) / cap;
	double j = sim_jain(rate, n);
	uint64_t pkts = 0;
	for (uint32_t i = 0; i < n; i++)
		pkts += (sim_flow_get(rn.s, i)->bytes + rn.cfg.mtu - 1) / rn.cfg.mtu;
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	print_message("%-20s seed %llu: first round trip %.0f us; from %.0f us for %.0f us: "
		      "Jain %.4f, receiver links %.3f busy; drops over the run %llu of %llu "
		      "data packets (%.2f %%, not asserted)\n",
		      name, (unsigned long long)seed, (double)t_rtt / 1e3, (double)t0 / 1e3,
		      (double)(t - t0) / 1e3, j, util, (unsigned long long)all_drops(rn.s),
		      (unsigned long long)pkts, 100.0 * (double)all_drops(rn.s) / (double)pkts);
	assert_true(j >= 0.95);
	assert_true(util >= 0.90);
	run_free(&rn);
}

static void test_incast(void **state)
{
	(void)state;
	incast("incast_64", 1);
	incast("incast_48_25g", 1);
	incast("incast_64_leafspine", 1);
	incast("incast_64_leafspine", 2);
	incast("incast_32_2planes", 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reordering),
		cmocka_unit_test(test_incast),
	};
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests_name("sim/families", tests, NULL, NULL);
}
