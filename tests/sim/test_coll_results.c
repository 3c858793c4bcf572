/*
 * Collectives where the network carries the load: MetaRoCE's completion time
 * is at most both baselines' (lossy RoCEv2 and RoCEv2 with PFC) for ring
 * all-reduce and pairwise all-to-all, on a non-blocking (1:1) and a 2:1
 * leaf-spine, over two seeds (each hashes the flows over the spines
 * differently).
 *
 * The fabric is the 64-host figure's scaled to 16 hosts so that the test
 * stays short under sanitizers: 2 planes, 4 leaves of 4 hosts, 4 spines
 * (1:1) or 2 (2:1), 100 Gbit/s, 2 channels. At 2 MiB an all-to-all step
 * moves 64 KiB per flow and a ring step 64 KiB; at 8 MiB an all-to-all step
 * 256 KiB. Below about 512 KiB a collective of 16 ranks is bound by latency
 * (sim/README.md, "Collectives": within 2 %, not asserted here).
 *
 * test_new_fabrics: the same bar on 64 ranks over fabrics the figures were
 * not taken on (3:1, 4 planes, one channel, an incast beside).
 * test_other_algorithms: recursive-doubling all-reduce and ring all-gather
 * on the 64-rank 2:1 fabric, with loss and on 8 planes.
 *
 * What this guards: a pairwise all-to-all step waits for its own previous
 * send to be acknowledged on every path. Before the receiver acknowledged
 * every path at an ACK_REQ (SPEC 6.3), the paths other than the last
 * packet's waited for the 8 us ACK delay and the 2 MiB all-to-all took
 * 1.25x (1:1) and 1.20x (2:1) RoCEv2's time.
 */
#include <inttypes.h>

#include "mrp_host.h"
#include "report.h"
#include "roce.h"
#include "sim_test.h"

static const sim_transport_ops *const transports[] = {&sim_roce_ops, &sim_roce_pfc_ops, &sim_mrp_ops};
enum { NT = sizeof(transports) / sizeof(transports[0]) };

/* Runs entry e at size index k and returns its time; every flow finished
 * and verified, no violation. */
static uint64_t coll_time(sim_config *cfg, size_t e, size_t k, const sim_transport_ops *ops)
{
	sim_result r;

	cfg->coll_entry = (int)e;
	cfg->coll_size = k;
	sim *s = sim_from(cfg, ops);
	int st = sim_run(s, SIM_NEVER);

	assert_int_equal(sim_result_collect(s, st, &r), 0);
	for (unsigned i = 0; i < r.nmsgs; i++)
		print_message("violation: %s\n", r.msgs[i]);
	assert_int_equal(st, SIM_RUN_DONE);
	assert_int_equal(r.violations, 0);
	assert_int_equal(r.verify_failures, 0);
	assert_int_equal(r.unfinished, 0);
	assert_int_equal(r.failed, 0);
	assert_int_equal(r.ncolls, 1);
	assert_int_equal(r.colls[0].finished, r.colls[0].flows);
	uint64_t t = r.colls[0].time_ns;

	assert_true(t != SIM_NEVER && t > 0);
	sim_result_free(&r);
	sim_del(s);
	return t;
}

static void fabric(unsigned spines, const char *label)
{
	char yaml[640];

	for (uint64_t seed = 1; seed <= 2; seed++) {
		sim_config cfg;

		snprintf(yaml, sizeof(yaml),
			 "seed: %" PRIu64 "\n"
			 "hosts: 16\n"
			 "planes: 2\n"
			 "fabric: {type: leafspine, leaves: 4, spines: %u, hosts_per_leaf: 4}\n"
			 "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n"
			 "duration: 1s\n"
			 "collectives:\n"
			 "  - {type: allreduce_ring, channels: 2, sizes: [2MiB]}\n"
			 "  - {type: alltoall, channels: 2, sizes: [2MiB, 8MiB]}\n",
			 seed, spines);
		cfg_from(&cfg, yaml);
		for (size_t e = 0; e < cfg.ncolls; e++) {
			for (size_t k = 0; k < cfg.colls[e].nsizes; k++) {
				uint64_t t[NT];

				for (size_t i = 0; i < NT; i++)
					t[i] = coll_time(&cfg, e, k, transports[i]);
				print_message("%s seed %" PRIu64 " %-14s %4" PRIu64
					      " KiB: roce %7.1f us, roce-pfc %7.1f us, metaroce %7.1f us"
					      " (x%.3f, x%.3f)\n",
					      label, seed, sim_coll_name(cfg.colls[e].type),
					      cfg.colls[e].sizes[k] >> 10, (double)t[0] / 1e3,
					      (double)t[1] / 1e3, (double)t[2] / 1e3,
					      (double)t[2] / (double)t[0], (double)t[2] / (double)t[1]);
				assert_true(t[2] <= t[0]);
				assert_true(t[2] <= t[1]);
			}
		}
		sim_config_free(&cfg);
	}
}

static void test_nonblocking(void **state)
{
	(void)state;
	fabric(4, "1:1");
}

static void test_oversubscribed(void **state)
{
	(void)state;
	fabric(2, "2:1");
}

/*
 * Fabrics the figures above were not taken on (bench/README.md, "Collectives
 * on new fabrics (audit)"), 64 ranks as in the issue. yaml holds
 * the scenario without its collectives; every size of coll is run under the
 * three transports. MetaRoCE's time is at most lim_pm per mille of each
 * baseline's (860: at least 14 % faster, the bar where the network
 * is the bottleneck; 1020: within 2 %, its bar where latency alone
 * bounds every transport).
 */
static void audit2(const char *label, const char *yaml, const char *coll, unsigned roce_pm,
		   unsigned pfc_pm)
{
	char doc[1024];
	sim_config cfg;

	snprintf(doc, sizeof(doc), "%sduration: 1s\ncollectives:\n  - %s\n", yaml, coll);
	cfg_from(&cfg, doc);
	for (size_t k = 0; k < cfg.colls[0].nsizes; k++) {
		uint64_t t[NT];

		for (size_t i = 0; i < NT; i++)
			t[i] = coll_time(&cfg, 0, k, transports[i]);
		print_message("%s %-14s %6" PRIu64 " B: roce %7.1f us, roce-pfc %7.1f us,"
			      " metaroce %7.1f us (x%.3f, x%.3f)\n",
			      label, sim_coll_name(cfg.colls[0].type), cfg.colls[0].sizes[k],
			      (double)t[0] / 1e3, (double)t[1] / 1e3, (double)t[2] / 1e3,
			      (double)t[2] / (double)t[0], (double)t[2] / (double)t[1]);
		assert_true(t[2] * 1000 <= t[0] * roce_pm);
		assert_true(t[2] * 1000 <= t[1] * pfc_pm);
	}
	sim_config_free(&cfg);
}

static void audit(const char *label, const char *yaml, const char *coll, unsigned lim_pm)
{
	audit2(label, yaml, coll, lim_pm, lim_pm);
}

/*
 * Where the network is the bottleneck MetaRoCE is at least 14 % faster
 * than both baselines on fabrics other than the figure's: 12-host leaves
 * over 4 spines (3:1), 4 planes, one channel per rank, an incast of
 * 16 x 4 MB into a rank of the collective as background, and a background
 * permutation on 1:1 (from 8 B: the steps wait in the background's
 * queues). test_shallow_and_lossy_fabrics() has the rest.
 */
static void test_new_fabrics(void **state)
{
	(void)state;
	audit("64 ranks, 2 planes, 3:1",
	      "hosts: 64\nplanes: 2\n"
	      "fabric: {type: leafspine, leaves: 6, spines: 4, hosts_per_leaf: 12}\n"
	      "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n",
	      "{type: alltoall, channels: 2, sizes: [16MiB]}", 860);
	audit("64 ranks, 4 planes, 1:1",
	      "hosts: 64\nplanes: 4\n"
	      "fabric: {type: leafspine, leaves: 8, spines: 8, hosts_per_leaf: 8}\n"
	      "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n",
	      "{type: alltoall, channels: 4, sizes: [16MiB]}", 860);
	static const char one_ch[] =
		"hosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n";
	audit("64 ranks, 2:1, 1 channel", one_ch,
	      "{type: allreduce_ring, channels: 1, sizes: [2MiB]}", 860);
	audit("64 ranks, 2:1, 1 channel", one_ch,
	      "{type: alltoall, channels: 1, sizes: [2MiB]}", 860);
	static const char bg[] =
		"hosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n"
		"flows:\n  - {pattern: incast, receiver: 3, senders: 16, bytes: 4MB}\n";
	audit("64 ranks, 2:1, incast beside", bg,
	      "{type: allreduce_ring, channels: 2, sizes: [512KiB, 2MiB]}", 860);
	audit("64 ranks, 2:1, incast beside", bg,
	      "{type: alltoall, channels: 2, sizes: [512KiB, 2MiB]}", 860);
	/* Beside a background permutation (every host sends one 16 MB flow
	 * and receives one) on 1:1: the steps' data and ACKs in the
	 * expedited class (SPEC 6.7), where the background holds the default
	 * class's queues at ECN's marking level; 1.43-2.0x RoCEv2 with PFC
	 * without it, 8 B included (bench/README.md) */
	static const char perm[] =
		"hosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 8, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n"
		"flows:\n  - {pattern: permutation, bytes: 16MB}\n";
	audit("64 ranks, 1:1, permutation beside", perm,
	      "{type: alltoall, channels: 2, sizes: [8B, 512KiB, 2MiB]}", 860);
	audit("64 ranks, 1:1, permutation beside", perm,
	      "{type: allreduce_ring, channels: 2, sizes: [512KiB, 2MiB]}", 860);
	static const char perm2[] =
		"seed: 2\nhosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 8, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n"
		"flows:\n  - {pattern: permutation, bytes: 16MB}\n";
	audit("64 ranks, 1:1, permutation beside, seed 2", perm2,
	      "{type: alltoall, channels: 2, sizes: [512KiB]}", 860);
}

/*
 * The other fabrics of test_new_fabrics(), a test of their own so that
 * neither outgrows its timeout under ASan (meson.build): 256 KB queues,
 * 4 channels, 128 ranks, and 8 planes of 2:1 with 0.1 % random loss on
 * every link (there also the 8 B all-to-all, at most a quarter of either's
 * time); latency-bound all-to-alls of new connections within 2 % of both,
 * and at least 14 % faster where the network is the bottleneck.
 */
static void test_shallow_and_lossy_fabrics(void **state)
{
	(void)state;
	/* Latency-bound all-to-alls, within 2 % of both: each step a new
	 * connection on admission credit, its short data charged and
	 * returned in whole packets (SPEC 6.6; returned at their own
	 * length, the credits' rest ran the budget dry and every step asked
	 * for a grant: 1.53x on 256 KB queues, 1.04x with 4 channels, 1.05x
	 * on 128 ranks) */
	audit("64 ranks, 2:1, 256 KB queues",
	      "hosts: 64\nplanes: 2\n"
	      "fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
	      "link: {rate: 100Gbps, delay: 1us, queue: 256KB, ecn_threshold: 40KB}\n",
	      "{type: alltoall, channels: 2, sizes: [8B, 32KiB, 256KiB]}", 1020);
	/* The same shallow queues where the network is the bottleneck: each
	 * step's two 128 KiB connections, the first alone at the receiver;
	 * its credit, a quarter of the budget, held all of it (SPEC 6.6) and
	 * the other asked for a grant at every step, 1.03-1.07x RoCEv2 with
	 * PFC over seeds 1-4; a run of under an epoch now holds only itself */
	static const char shallow[] =
		"hosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 256KB, ecn_threshold: 40KB}\n";
	audit("64 ranks, 2:1, 256 KB queues", shallow,
	      "{type: alltoall, channels: 2, sizes: [16MiB]}", 860);
	static const char shallow2[] =
		"seed: 2\nhosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 256KB, ecn_threshold: 40KB}\n";
	audit("64 ranks, 2:1, 256 KB queues, seed 2", shallow2,
	      "{type: alltoall, channels: 2, sizes: [16MiB]}", 860);
	audit("64 ranks, 1:1, 4 channels",
	      "hosts: 64\nplanes: 2\n"
	      "fabric: {type: leafspine, leaves: 8, spines: 8, hosts_per_leaf: 8}\n"
	      "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n",
	      "{type: alltoall, channels: 4, sizes: [8B, 32KiB]}", 1020);
	audit("128 ranks, 2:1",
	      "hosts: 128\nplanes: 2\n"
	      "fabric: {type: leafspine, leaves: 16, spines: 4, hosts_per_leaf: 8}\n"
	      "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n",
	      "{type: alltoall, channels: 2, sizes: [8B, 32KiB]}", 1020);
	/* 16 MiB over 8 channels is 32 KiB per flow, about a packet per
	 * plane: a lone loss on a plane with no RTT sample (cold_probe_arm()
	 * in proto/conn.c; 1.10-1.19x lossy RoCEv2 before it) */
	static const char lossy8[] =
		"hosts: 64\nplanes: 8\n"
		"fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB, "
		"loss: 0.1%}\n";
	audit("64 ranks, 8 planes, 2:1, 0.1 % loss", lossy8,
	      "{type: allreduce_ring, channels: 8, sizes: [16MiB]}", 860);
	audit("64 ranks, 8 planes, 2:1, 0.1 % loss", lossy8,
	      "{type: alltoall, channels: 8, sizes: [16MiB]}", 860);
	/* 8 B over 8 channels: every step's flow one packet on a new
	 * connection with no RTT sample anywhere. A lost one is asked about
	 * by a PROBE timed from the host's RTT of its plane
	 * (plane_rtt_hint_ns, cold_probe_arm()); it waited for the tail-loss
	 * probe at rto_init / 2 before: 0.48x RoCEv2, now 0.10x. */
	audit("64 ranks, 8 planes, 2:1, 0.1 % loss", lossy8,
	      "{type: alltoall, channels: 8, sizes: [8B]}", 250);
}

/*
 * The other all-reduce and the all-gather, where the network is the
 * bottleneck: recursive doubling (every step a new partner, half the ranks'
 * flows crossing the 2:1 leaves at once, so flows' ECMP hashes collide) and
 * the ring all-gather, on the 64-rank 2:1 fabric of the figures, with 0.1 %
 * random loss on every link, and on 8 planes. MetaRoCE is at least 14 %
 * faster than both baselines (bench/README.md, "Every collective on 2:1
 * fabrics"; measured 0.22-0.81x of the faster baseline).
 */
static void test_other_algorithms(void **state)
{
	(void)state;
	static const char two[] =
		"hosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n";
	audit("64 ranks, 2:1", two, "{type: allreduce_rd, channels: 2, sizes: [512KiB, 2MiB]}",
	      860);
	audit("64 ranks, 2:1", two, "{type: allgather, channels: 2, sizes: [8MiB]}", 860);
	static const char lossy[] =
		"hosts: 64\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB, "
		"loss: 0.1%}\n";
	audit("64 ranks, 2:1, 0.1 % loss", lossy,
	      "{type: allreduce_rd, channels: 2, sizes: [2MiB]}", 860);
	audit("64 ranks, 2:1, 0.1 % loss", lossy, "{type: allgather, channels: 2, sizes: [2MiB]}",
	      860);
	audit("64 ranks, 8 planes, 2:1",
	      "hosts: 64\nplanes: 8\n"
	      "fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
	      "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n",
	      "{type: allreduce_rd, channels: 8, sizes: [2MiB]}", 860);
}

/*
 * Rings whose steps are bound by the hosts' links (256 KiB steps: 16 ranks,
 * 8 MiB, 2 channels): every step of both channels runs at once, so there is
 * no idle capacity for spraying to use, and MetaRoCE's packets are 1.3 %
 * longer than RoCEv2's. The bar (at most both baselines' time) is
 * not met against lossy RoCEv2 here; what is asserted is the header's cost
 * and little more: at most 1.04x lossy RoCEv2, at most RoCEv2 with PFC's
 * time. When the host served its connections only while every NIC port had
 * room, below a 128 KiB nic_queue, two channels' steps starting at line rate
 * each stood a 128 KiB queue in front of every step's last packet: 1.08-1.14x
 * (ring) and 1.11-1.20x (all-gather, 1.13x RoCEv2 with PFC) (bench/README.md,
 * "Rings with large steps: the host's own queue").
 */
static void test_ring_large_steps(void **state)
{
	(void)state;
	static const char *const fab[] = {
		"seed: 1\nhosts: 16\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 2, spines: 8, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n",
		"seed: 2\nhosts: 16\nplanes: 2\n"
		"fabric: {type: leafspine, leaves: 2, spines: 8, hosts_per_leaf: 8}\n"
		"link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n",
	};
	for (size_t i = 0; i < sizeof(fab) / sizeof(fab[0]); i++) {
		audit2("16 ranks, 1:1, 256 KiB steps", fab[i],
		       "{type: allreduce_ring, channels: 2, sizes: [8MiB]}", 1040, 1000);
		audit2("16 ranks, 1:1, 256 KiB steps", fab[i],
		       "{type: allgather, channels: 2, sizes: [8MiB]}", 1040, 1000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nonblocking),
		cmocka_unit_test(test_oversubscribed),
		cmocka_unit_test(test_new_fabrics),
		cmocka_unit_test(test_shallow_and_lossy_fabrics),
		cmocka_unit_test(test_other_algorithms),
		cmocka_unit_test(test_ring_large_steps),
	};
	/* (meson runs test_other_algorithms and test_ring_large_steps apart:
	 * TEST_SKIP) */
	return sim_run_selected("sim/coll_results", tests, sizeof(tests) / sizeof(tests[0]));
}
