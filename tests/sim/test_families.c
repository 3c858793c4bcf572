/*
 * Families of scenarios MetaRoCE must win, each over several topologies,
 * sizes and seeds (sim/scenarios/families/), not one tuned scenario. Every
 * run must also finish with every byte verified, every completion exactly
 * once and in order, and no engine invariant broken. Measured figures are
 * printed, so that a failure says by how much.
 *
 * What is asserted here is what holds today; the families of issue 11 that
 * do not hold yet (scale-across from start to finish at 10 ms, and under loss at
 * 10 ms and on 1 GB; bursty loss against RoCEv2; collectives; start-up's
 * completion within a few % of ideal) are listed in
 * bench/README.md with their figures, not asserted. The incast and
 * scale-across scenarios, like every other, run with first-round-trip
 * admission (SPEC 6.6), the simulator's default.
 */
#include "families.h"

#include <stdlib.h>

#include "roce.h"

/* One reordering run: no drops, and spurious retransmissions at most one
 * in per_pkts of the data packets. */
static double reorder_run(const char *name, uint64_t seed, uint64_t per_pkts)
{
	run rn;
	uint64_t pkts;
	reorder_load_run(&rn, name, seed, &pkts);
	print_message("%-28s seed %llu: %.1f Gbit/s, spurious retransmissions %llu "
		      "of %llu packets (%.3f %%), drops %llu\n",
		      name, (unsigned long long)seed, rn.r.agg_goodput_bps / 1e9,
		      (unsigned long long)rn.r.spurious, (unsigned long long)pkts,
		      100.0 * (double)rn.r.spurious / (double)pkts,
		      (unsigned long long)all_drops(rn.s));
	assert_int_equal(all_drops(rn.s), 0);
	assert_true(rn.r.spurious * per_pkts <= pkts);
	double g = rn.r.agg_goodput_bps;
	run_free(&rn);
	return g;
}

/*
 * Reordering: paths whose delays differ by up to 50x (spines 1 to 50 us
 * away; ACKs come back over the same spread). Reordering across paths is
 * not loss, and a timeout that was only delay is undone: spurious
 * retransmissions <= 0.1 % of the data packets, on five topologies and
 * three seeds each. The networks drop nothing, so every retransmission
 * there is spurious. reorder_50x_2planes puts the spread between planes
 * (plane 1's fabric cables 50 us long): a path of the far plane without
 * an RTT sample of its own was timed from the near plane's (and seeded
 * with it by the admitted connection's first ACK), and the first window
 * of each far path went again: 81-83 of 15,625 packets (0.52 %), now 2-4.
 * reorder_50x_far_spines has the spread inside one plane (spines 2, 2, 40
 * and 100 us away): a path whose ACKs now and then came back by the 100 us
 * spine timed out at each of them for the whole flow, its late ACK not
 * taken as an RTT sample (seed 2: 133 of 31,250, 0.43 %; now 12).
 */
static void test_reordering(void **state)
{
	(void)state;
	static const char *const names[] = { "reorder_50x", "reorder_50x_8spines",
					     "reorder_50x_small", "reorder_50x_2planes",
					     "reorder_50x_far_spines" };
	for (unsigned i = 0; i < 5; i++)
		for (uint64_t seed = 1; seed <= 3; seed++) {
			reorder_run(names[i], seed, 1000);
		}
	/* spines 2 and 60 us away, 20 us of jitter on the far one, three
	 * flows at 25G: the paths opened with the connections whose packets
	 * all took the far spine sent tail-loss probes timed from the near
	 * spine's RTT (seed 7: 6 of 5,862, 0.102 %; seed 15: 8, 0.136 %);
	 * they ask by PROBE now (start_unsampled() in proto/conn.c) */
	reorder_run("reorder_30x_start_25g_jitter", 7, 1000);
	reorder_run("reorder_30x_start_25g_jitter", 15, 1000);
}

/*
 * Reordering at a connection's start, spreads of 25x and 50x inside one
 * plane (spines 2 / 100 us; 2 / 2 / 40 / 100 us; at 400G 4 / 100 us, two
 * flows), seeds 1-4: spurious retransmissions <= 0.05 % of the data
 * packets, half the family's bar, and no drops. The paths on the far spines
 * have no RTT sample of their own when their first timers run out (their
 * plane's near paths' RTT, borrowed), and a path's ACKs now and then come
 * back by a slower return route than its plane has timed: such a first
 * timeout now holds the window's data and asks (PROBE) before it sends it
 * again (SPEC 8.1). The engine without that sent the far paths' windows
 * again: 15 of 15,625 packets (0.096 %), 16 and 22 of 15,625 (0.10-0.14
 * %), and 88-102 of 62,500 at 400G (0.14-0.16 %, with 173 drops in seed 1).
 * And the 400G pair's goodput (below): paths on the far spine are not held
 * to a window over the near spine's RTT where the fabric marks.
 */
static void test_reordering_start(void **state)
{
	(void)state;
	static const char *const names[] = { "reorder_50x_start", "reorder_50x_far_spines_start",
					     "reorder_25x_start_400g" };
	double g400 = 0;
	for (unsigned i = 0; i < 3; i++)
		for (uint64_t seed = 1; seed <= 4; seed++) {
			double g = reorder_run(names[i], seed, 2000);
			if (i == 2)
				g400 += g / 4;
		}
	/* The 400G pair's goodput, over the 4 seeds, at least 0.66 of its
	 * hosts' 800 Gbit/s (0.8 would be a start within 2 round trips of
	 * the far spine: not met). With the hint's window taken over twice
	 * the near spine's RTT while the flows were short of half their hint
	 * (hint_window(), where the fabric marks), 0.642 (448-573 Gbit/s). */
	print_message("reorder_25x_start_400g: %.1f Gbit/s over seeds 1-4, %.3f of 800\n",
		      g400 / 1e9, g400 / 800e9);
	assert_true(g400 >= 0.66 * 800e9);
}

/*
 * Reordering between planes far apart at high rates: four planes whose
 * spines are 1 / 5 / 20 / 50 us away, two flows, at 400G (2 MB queues,
 * 128 MB each) and at 200G (1 MB queues, 64 MB each), seeds 1-3: no drops,
 * spurious retransmissions <= 0.1 %. A cut's hold on the hinted window was
 * timed in the slowest plane's round trip (~205 us) and held every path,
 * and when it ended every path went to its part at once and the paths the
 * path set needed were opened at their whole part (24 at ~1 MB each): a
 * far spine's queue overflowed before the first mark came back (400G seed
 * 1: 536 drops, 111 spurious retransmissions, 0.178 %; 200G seed 1: 185
 * drops). Now each path is held 3 round trips of its own plane, ramps back
 * by slow start, and the path set grows by at most half per round trip
 * (SPEC 6.5).
 *
 * And spines 4 and 100 us away in one plane at 400G (reorder_25x_start_400g)
 * on two seeds test_reordering_start does not run: with every path's window
 * its equal part of the hint over the far spine's RTT, the near spine's
 * paths took many times their part of the rate, and its uplink queue filled
 * to 2 MB: seed 8 sent 102 of 62,500 packets again for nothing (0.163 %),
 * seed 9 dropped 20. Each path's part is now over its own RTT (hint_window()).
 * Seeds 14, 19 and 35 dropped 1,151, 104 and 92 packets: after a cut each
 * connection opened two more paths, raised at once to the equal part of the
 * whole target (~1 MB: no RTT of their own yet), on the near spine, whose
 * 2 MB queue then stayed full. Such a path now waits for its first RTT
 * sample (hint_window()); over seeds 1-40, 2 seeds drop (7 before): 9 at
 * the receiver's link in seed 7, and 526 in seed 29's first round trip,
 * where both flows' first paths share the far spine's uplink before any
 * mark can come back.
 */
static void test_reordering_planes(void **state)
{
	(void)state;
	static const char *const names[] = { "reorder_4planes_400g", "reorder_4planes_200g" };
	for (unsigned i = 0; i < 2; i++)
		for (uint64_t seed = 1; seed <= 3; seed++)
			reorder_run(names[i], seed, 1000);
	reorder_run("reorder_25x_start_400g", 8, 1000);
	reorder_run("reorder_25x_start_400g", 9, 1000);
	/* no drops where the path set grew after a cut (above) */
	reorder_run("reorder_25x_start_400g", 14, 1000);
	reorder_run("reorder_25x_start_400g", 19, 1000);
	reorder_run("reorder_25x_start_400g", 35, 1000);
}

static void test_incast(void **state)
{
	(void)state;
	incast("incast_64", 1, 0.1);
	incast("incast_64", 2, 0.1);
	incast("incast_48_25g", 1, 0.1);
	incast("incast_64_leafspine", 1, 0.1);
	incast("incast_64_leafspine", 2, 0.1);
	incast("incast_32_2planes", 1, 0.1);
	incast("incast_256", 1, 0.1);
	incast("incast_256", 2, 0.1);
	incast("incast_1024", 1, 0.1);
	incast("incast_1024", 2, 0.1);
	/* rates, queues, planes and fan-ins the first ones do not have */
	incast("incast_32_400g", 1, 0.1);
	incast("incast_32_25g_small_queue", 1, 0.1);
	incast("incast_100_leafspine_2planes", 1, 0.1);
	incast("incast_100_leafspine_2planes", 2, 0.1);
	incast("incast_500_leafspine", 1, 0.1);
	/* many planes: each sender picks a plane per packet, the receiver
	 * divides their sum (1.10 / 0.38 % drops at 256:1 over 8 planes and
	 * 3.9 / 4.1 % at 2,000:1 over 4 x 400G before the credit still out
	 * was drained and stale ECN marks stopped steering, bench/README.md) */
	incast("incast_256_8planes", 1, 0.1);
	incast("incast_256_8planes", 2, 0.1);
	incast("incast_2000_4x400", 1, 0.1);
	incast("incast_2000_4x400", 2, 0.1);
	/* flows of 16 packets: the first 14 senders' credit covers them */
	incast("incast_64_small", 1, 0.1);
	incast("incast_64_small", 2, 0.1);
}

/*
 * Plane churn: planes go down and come back in turn; from 1 ms after every
 * event until 2 ms after it, the receivers get >= 0.95 of the capacity of
 * their planes that are up (the sum of those host links). Three sequences:
 * eight planes between two hosts (down, down, up, down), eight leaf-spine
 * planes with four flows across the leaves (the same), four planes between
 * two hosts (down, up, down, down). First-round-trip admission is on (the
 * simulator's default).
 *
 * churn_8planes_pair is the one that tells the host's NIC model apart: eight
 * connections on one host, each paced at its share (~98 % of the planes
 * that are up), share its ports. When the host asked a connection for a
 * packet only while every port had room, a 64 KiB nic_queue (15 packets of
 * 4 KB) let a port that a few connections hit together hold the seven
 * others back: 0.939 after plane 2 came back, and 0.919 after plane 2 went
 * down with admission on. Now the engine is told which ports are full and
 * sends on the others (planes_full): >= 0.98 in every window at 64 KiB.
 */
typedef struct churn_event {
	uint64_t at_ns;
	int up, plane;
} churn_event;

static void churn(const char *name, const uint32_t *rx, unsigned nrx,
		  const churn_event *ev, unsigned nev)
{
	run rn;
	run_load(&rn, name, 1);
	unsigned np = sim_planes(rn.s);
	int up[16];
	for (unsigned p = 0; p < np; p++)
		up[p] = 1;
	for (unsigned e = 0; e < nev; e++) {
		up[ev[e].plane] = ev[e].up;
		uint64_t t0 = ev[e].at_ns + 1000 * US, t1 = t0 + 1000 * US;
		double share = churn_share(&rn, up, np, rx, nrx, t0, t1);
		print_message("%-22s plane %d %s at %.0f ms: %.3f of the surviving capacity\n",
			      name, ev[e].plane, ev[e].up ? "up" : "down",
			      (double)ev[e].at_ns / 1e6, share);
		assert_true(share >= 0.95);
	}
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);
}

/*
 * The same measure on a scenario's own plane_down / plane_up events, in any
 * sequence: several planes at once, and a plane flapping faster than the
 * RTO floor. After each event the window runs from 1 ms after it to 2 ms
 * after it or the next event, whichever is first; events followed by
 * another within 1.1 ms (the flaps, the planes that went together) are
 * measured in the window of the last of them. Every flow goes to one
 * receiver or another; their capacity is what is asserted.
 */
static void churn_events(const char *name, uint64_t seed)
{
	churn_window w[32];
	unsigned n = churn_measure(name, seed, w, 32);
	for (unsigned i = 0; i < n; i++)
		print_message("%-22s seed %llu: plane %d %s at %.2f ms: %.3f of the surviving "
			      "capacity (%.0f to %.0f us)\n",
			      name, (unsigned long long)seed, w[i].plane, w[i].up ? "up" : "down",
			      (double)w[i].at / 1e6, w[i].share, (double)w[i].t0 / 1e3,
			      (double)w[i].t1 / 1e3);
	for (unsigned i = 0; i < n; i++)
		assert_true(w[i].share >= 0.95);
	assert_true(n >= 3);
}

static void test_plane_churn(void **state)
{
	(void)state;
	static const churn_event ev8[] = {
		{ 1000 * US, 0, 2 }, { 3000 * US, 0, 5 }, { 5000 * US, 1, 2 }, { 7000 * US, 0, 0 },
	};
	static const churn_event ev4[] = {
		{ 1000 * US, 0, 1 }, { 3000 * US, 1, 1 }, { 5000 * US, 0, 3 }, { 7000 * US, 0, 0 },
	};
	static const uint32_t one[] = { 1 }, four[] = { 4, 5, 6, 7 };
	churn("churn_8planes_pair", one, 1, ev8, 4);
	churn("churn_8planes", four, 4, ev8, 4);
	churn("churn_4planes_updown", one, 1, ev4, 4);
	churn_events("churn_8planes_multi", 1);
	churn_events("churn_8planes_multi", 2);
	churn_events("churn_4planes_flap", 1);
	/* leaf-spine planes whose paths must cover every spine of the planes
	 * left (re-path, SPEC 6.4): 2 and 4 planes of 4 spines, 2 planes of 2
	 * spines; and planes of one spine, where there is nothing to move */
	static const char *const ls[] = { "churn_2planes_leafspine", "churn_4planes_leafspine",
					  "churn_2planes_2spines" };
	for (unsigned i = 0; i < 3; i++)
		for (uint64_t seed = 1; seed <= 3; seed++)
			churn_events(ls[i], seed);
	churn_events("churn_4planes_1spine", 1);
	/* a spine of one plane that ECMP gave no path of any flow: the path
	 * moved onto it grows by its own window (CLEAN_ROUNDS in
	 * proto/conn.c); with the coupled increase alone 0.934, and 0.942 for
	 * a spine of one plane at 17-22 of 25 Gbit/s */
	churn_events("churn_6planes_leafspine", 2);
	churn_events("churn_4planes_leafspine", 6);
	/* a plane's traffic left on the other planes' few routes: seeds where
	 * some connection's paths of a plane missed a spine, before the planes
	 * left got new paths (replace_paths() in proto/conn.c): 0.927 (6
	 * planes, seed 14), 0.947, 0.946, 0.946 */
	churn_events("churn_6planes_leafspine", 14);
	churn_events("churn_6planes_leafspine", 15);
	churn_events("churn_4planes_leafspine", 16);
	churn_events("churn_2planes_leafspine", 14);
	/* six spines a plane, where four paths always miss two (0.948 before
	 * in seed 1); four leaves of 25 Gbit/s, traffic between all of them */
	churn_events("churn_2planes_6spines", 1);
	churn_events("churn_4planes_4leaves", 1);
}

/*
 * Start-up at scale-across distances: one flow over a 1 ms and a 4 ms round
 * trip at 100 Gbit/s. The receiver grants the connection, its only one, its
 * line rate for the first round trip (first-round-trip admission, SPEC
 * 6.6), and its first rate hint then sizes the window, so the flow's
 * payload arrives at >= 0.95 of the link's 100 Gbit/s from its first
 * packet's arrival to its last's (the wire carries 72 + 66 bytes per 4 KB
 * packet on top: the ceiling is 96.7 Gbit/s). Without the grant the first
 * round trip carried only the initial window: 55 Gbit/s over the whole 4 ms
 * flow (sender's FCT). Also: from the second round trip to 95 % of the
 * bytes.
 */
static void scale_startup(const char *name, uint64_t rtt_ns)
{
	run rn;
	run_load(&rn, name, 1);
	uint64_t total = sim_flow_get(rn.s, 0)->bytes, t = 2 * rtt_ns, b0, b95 = 0, t95 = 0;
	/* the first packet's arrival, to 1/16 of a round trip */
	uint64_t t_first = 0, step = rtt_ns / 16;
	for (uint64_t u = step; u <= t; u += step) {
		run_to(&rn, u);
		if (host_rx_bytes(rn.s, 1)) {
			t_first = u - step;
			break;
		}
	}
	run_to(&rn, t);
	b0 = host_rx_bytes(rn.s, 1);
	while (!t95) {
		t += rtt_ns / 8;
		run_to(&rn, t);
		uint64_t b = host_rx_bytes(rn.s, 1);
		if (b >= total / 100 * 95) {
			t95 = t;
			b95 = b;
		}
	}
	double rate = (double)(b95 - b0) * 8e9 / (double)(t95 - 2 * rtt_ns);
	/* the last packet's arrival: the receiver's link has carried every
	 * data packet, as the link counts it (the network is lossless: each
	 * is carried once; the sender's few probes are less than a packet) */
	uint64_t mtu = rn.cfg.mtu,
		 wire_all = total + (total + mtu - 1) / mtu * (MRP_DATA_HDR_LEN + SIM_WIRE_OVERHEAD);
	while (host_rx_bytes(rn.s, 1) < wire_all)
		run_to(&rn, t += step);
	double whole = (double)total * 8e9 / (double)(t - t_first);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	print_message("%-18s: from the 2nd round trip to 95 %% of the bytes %.1f Gbit/s; payload "
		      "from the first packet's arrival to the last's %.1f Gbit/s (the sender's "
		      "FCT %.1f ms)\n",
		      name, rate / 1e9, whole / 1e9, (double)rn.r.flows[0].fct_ns / 1e6);
	assert_true(rate >= 0.95 * 100e9);
	assert_true(whole >= 0.95 * 100e9);
	run_free(&rn);
}

static void test_scale_startup(void **state)
{
	(void)state;
	scale_startup("scale_1ms_quick", 1000 * US);
	scale_startup("scale_4ms_quick", 4000 * US);
	scale_startup("scale_10ms_quick", 10000 * US);
}

/*
 * Start-up: a flow that joins n running ones at the same receiver has its
 * fair share (the receiver's link / (n + 1)) within 2 round trips of its
 * start: measured over the 40 us that follow, it moves >= 0.8 of it, and
 * the receiver's link stays >= 0.9 busy. No slow start: the receiver's
 * first rate hint gives it an equal share at once. Joining 1 and 4 running
 * flows, on one switch (round trip ~6 us) and across a leaf-spine (the
 * joiner on the receiver's far leaf: ~11 us), two seeds each (measured:
 * 48.3 and 46.7 of 50 Gbit/s, 19.7 and 21.3 of 20; the seeds gave the same).
 */
static void join_one(unsigned nrun, int leafspine, uint64_t seed, unsigned gbps, unsigned planes)
{
	const uint64_t t_join = 300 * US, rtt = leafspine ? 11 * US : 6 * US,
		       win = 40 * US;
	char text[2048];
	/* the running flows last well past the joiner's window at any
	 * capacity (32 and 8 MB at 100 Gbit/s, as before) */
	unsigned cap_g = gbps * planes, mb_run = cap_g <= 100 ? 32 : cap_g / 8,
		 mb_join = cap_g <= 100 ? 8 : cap_g / 25;
	int k = snprintf(text, sizeof(text),
			 "description: a flow joins %u running ones\n"
			 "seed: %llu\nhosts: 8\nplanes: %u\n%s"
			 "link: {rate: %uGbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n"
			 "flows:\n",
			 nrun, (unsigned long long)seed, planes,
			 leafspine ? "fabric: {type: leafspine, leaves: 2, spines: 2}\n" : "", gbps);
	/* receivers: host 7; the running flows from hosts 0..nrun-1 (both
	 * leaves across the fabric), the joiner from host 3 (the far leaf) */
	static const unsigned src[] = { 0, 1, 4, 5 };
	for (unsigned i = 0; i < nrun; i++)
		k += snprintf(text + k, sizeof(text) - (size_t)k,
			      "  - {src: %u, dst: 7, bytes: %uMB}\n", src[i], mb_run);
	k += snprintf(text + k, sizeof(text) - (size_t)k,
		      "  - {src: 3, dst: 7, bytes: %uMB, start: 300us}\n", mb_join);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	run rn;
	run_parse(&rn, text, strlen(text), "join");
	rn.s = sim_from(&rn.cfg, &sim_mrp_ops);
	run_to(&rn, t_join + 2 * rtt);
	uint64_t j0 = sim_flow_get(rn.s, nrun)->rx_bytes, all0 = host_rx_bytes(rn.s, 7);
	run_to(&rn, t_join + 2 * rtt + win);
	uint64_t j1 = sim_flow_get(rn.s, nrun)->rx_bytes, all1 = host_rx_bytes(rn.s, 7);
	double cap = (double)gbps * 1e9 * planes, fair = cap / (nrun + 1),
	       rj = (double)(j1 - j0) * 8e9 / (double)win,
	       rall = (double)(all1 - all0) * 8e9 / (double)win;
	print_message("join %u running, %s, %u x %u Gbit/s, seed %llu: the joiner from its 2nd "
		      "round trip %.1f Gbit/s (fair share %.1f), the receiver's links %.1f\n",
		      nrun, leafspine ? "leaf-spine" : "one switch", planes, gbps,
		      (unsigned long long)seed, rj / 1e9, fair / 1e9, rall / 1e9);
	assert_true(rj >= 0.8 * fair);
	assert_true(rall >= 0.9 * cap);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);
}

static void test_join(void **state)
{
	(void)state;
	for (int ls = 0; ls <= 1; ls++)
		for (unsigned n = 1; n <= 4; n += 3)
			for (uint64_t seed = 1; seed <= 2; seed++)
				join_one(n, ls, seed, 100, 1);
	/* other rates and planes: 400 and 25 Gbit/s, 2 and 4 planes */
	join_one(2, 0, 1, 400, 1);
	join_one(4, 0, 1, 25, 1);
	join_one(3, 1, 1, 100, 2);
	join_one(1, 0, 1, 100, 4);
}

/*
 * Start-up at long round trips: two flows into one receiver, the second
 * starting later, the first a third the size of the second. The first
 * round trips overfill the receiver's queue (each sender's admission and
 * its first window), ECN cuts both flows' windows, and the flow left
 * alone must then take the whole link again. Before a cut whose queue
 * had drained stopped holding the window below the receiver's hint
 * (hint_window(), SPEC 6.5), a cut held it there for 3 round trips: at
 * 10 ms the survivor ran at 26-43 Gbit/s of 100 for 30 ms after the first
 * flow had finished. Asserted: over the third round trip after the first
 * flow completes, the survivor moves >= 0.9 of the link (measured 0.96-0.97
 * in every case below; before the change 0.51-0.69). Round trips of 1, 4
 * and 10 ms, 25, 100 and 400 Gbit/s, the second flow 0.2 to 5 ms later;
 * the scenarios have no random loss, and the seeds give the same figures.
 * What this does not show (bench/README.md, "Two flows into one receiver"):
 * while both flows run, ECN cuts still leave the link below 0.9 busy for
 * a round trip or two after the queue drains, and with 4 flows the ones
 * left after the first finishes stay window-limited.
 */
static void survivor_one(unsigned rtt_us, unsigned gbps, unsigned start_us)
{
	char text[2048];
	/* the first flow 1.5 bandwidth-delay products, the second 4.5:
	 * it runs for more than 3 round trips after the first one ends */
	uint64_t bdp_kb = (uint64_t)gbps * rtt_us / 8;
	int k = snprintf(text, sizeof(text),
			 "description: two flows into one receiver, the second later\n"
			 "seed: 1\nduration: 3s\nhosts: 3\n"
			 "link: {rate: %uGbps, delay: %uus, queue: 64MB, ecn_threshold: 8MB}\n"
			 "flows:\n"
			 "  - {src: 0, dst: 2, bytes: %lluKB}\n"
			 "  - {src: 1, dst: 2, bytes: %lluKB, start: %uus}\n"
			 "transport:\n  metaroce: {rto_init: %uus, max_paths: 160}\n",
			 gbps, rtt_us / 4, (unsigned long long)(bdp_kb * 3 / 2),
			 (unsigned long long)(bdp_kb * 9 / 2), start_us, 3 * rtt_us);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	run rn;
	run_parse(&rn, text, strlen(text), "survivor");
	rn.s = sim_from(&rn.cfg, &sim_mrp_ops);
	const uint64_t rtt = (uint64_t)rtt_us * US, step = rtt / 16;
	uint64_t t = 0;
	while (!sim_flow_get(rn.s, 0)->done)
		run_to(&rn, t += step);
	uint64_t t_done = sim_flow_get(rn.s, 0)->finish_ns;
	assert_true(t_done != SIM_NEVER);
	run_to(&rn, t_done + 2 * rtt);
	uint64_t b0 = sim_flow_get(rn.s, 1)->rx_bytes;
	run_to(&rn, t_done + 3 * rtt);
	uint64_t b1 = sim_flow_get(rn.s, 1)->rx_bytes;
	/* (still running: the window measured is not its tail) */
	assert_false(sim_flow_get(rn.s, 1)->done);
	double rate = (double)(b1 - b0) * 8e9 / (double)rtt, cap = (double)gbps * 1e9;
	print_message("two flows, %u ms, %u Gbit/s, the second %u us later: the first done at "
		      "%.2f ms, the survivor in the 3rd round trip after %.1f Gbit/s (%.2f of "
		      "the link)\n",
		      rtt_us / 1000, gbps, start_us, (double)t_done / 1e6, rate / 1e9, rate / cap);
	assert_true(rate >= 0.9 * cap);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	run_free(&rn);
}

static void test_survivor(void **state)
{
	(void)state;
	survivor_one(1000, 100, 200);
	survivor_one(1000, 100, 500);
	survivor_one(1000, 400, 500);
	survivor_one(4000, 25, 1000);
	survivor_one(4000, 100, 2000);
	survivor_one(10000, 25, 2000);
	survivor_one(10000, 25, 5000);
}

/*
 * Start-up at long round trips: n flows (2 or 4) into one receiver, each
 * starting `offset` after the one before, the last one three times the
 * size of the others. Measured from each flow's start (not from its first
 * hint: a flow that finds the receiver's first-round-trip credit out asks
 * for a grant, so its first data arrives 1.5 round trips after its start),
 * over its third round trip [start + 2 RTT, start + 3 RTT] at the
 * receiver: it moves >= 0.8 of its fair share (the link over the flows
 * running then), the receiver's link is >= 0.9 busy, and the run drops at
 * most 0.1 % of its data packets. Round trips of 1, 4 and 10 ms, 25, 100
 * and 400 Gbit/s, offsets of 0.2 to 5 ms; no random loss, so seeds matter
 * little (seed 2 on one case). Measured: 0.88 of the share at 1 ms 100
 * Gbit/s with 4 flows, 0.95-0.97 in every other case, the link 0.95-1.00
 * busy, no drops. Before the receiver's credit lived until its data could
 * arrive (SPEC 6.6), 4 flows at 4 ms 100 Gbit/s, 10 ms 25 Gbit/s and 1 ms
 * 400 Gbit/s dropped 0.8-1.0 % of their packets (credit handed out twice
 * into the 64 MB queue), and at 4 ms 100 Gbit/s and 1 ms 400 Gbit/s the
 * later flows moved 0.24-0.31 of their share (bench/README.md, "Start-up at
 * long round trips: credit handed out once").
 *
 * Not asserted, because not met: the last completion, printed, is
 * 0.88-0.96 of the ideal (every payload byte at the link's rate, plus a
 * round trip), not within a few %.
 */
static void startup_one(unsigned rtt_us, unsigned gbps, unsigned nflows, unsigned offset_us,
			uint64_t seed, double fig[4])
{
	enum { NF = 4 };
	assert_true(nflows >= 2 && nflows <= NF);
	const uint64_t rtt = (uint64_t)rtt_us * US, off = (uint64_t)offset_us * US;
	const double cap = (double)gbps * 1e9;
	/* the small flows run until the last one's third round trip is over:
	 * alone, then shared, then with all (bytes at their fair shares, with
	 * a quarter to spare) */
	double need = 0;
	for (unsigned k = 1; k < nflows; k++)
		need += (double)off / 1e9 * cap / 8 / k;
	need += 3.0 * (double)rtt / 1e9 * cap / 8 / nflows;
	/* (and a round trip more at the whole link: a flow that starts while
	 * the first one's credit is out is granted, and its data arrives 1.5
	 * round trips after its start, not 0.5: the flows running until then
	 * keep the link, and the first flow, sized without that round trip,
	 * ended inside the last one's third) */
	need += (double)rtt / 1e9 * cap / 8;
	uint64_t small_kb = (uint64_t)(need * 1.25 / 1000) + 1;
	char text[2048];
	int k = snprintf(text, sizeof(text),
			 "description: %u flows into one receiver, %u us apart\n"
			 "seed: %llu\nduration: 5s\nhosts: %u\n"
			 "link: {rate: %uGbps, delay: %uus, queue: 64MB, ecn_threshold: 8MB}\n"
			 "flows:\n",
			 nflows, offset_us, (unsigned long long)seed, nflows + 1, gbps, rtt_us / 4);
	for (unsigned i = 0; i < nflows; i++)
		k += snprintf(text + k, sizeof(text) - (size_t)k,
			      "  - {src: %u, dst: %u, bytes: %lluKB, start: %lluus}\n", i, nflows,
			      (unsigned long long)(i + 1 == nflows ? 3 * small_kb : small_kb),
			      (unsigned long long)i * offset_us);
	k += snprintf(text + k, sizeof(text) - (size_t)k,
		      "transport:\n  metaroce: {rto_init: %uus, max_paths: 160}\n", 3 * rtt_us);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	run rn;
	run_parse(&rn, text, strlen(text), "startup");
	rn.s = sim_from(&rn.cfg, &sim_mrp_ops);

	/* each flow's third round trip; no flow may start inside one (the
	 * fair share would change within it) */
	uint64_t t[2 * NF], f0[NF], f1[NF], l0[NF], l1[NF];
	unsigned nt = 0;
	for (unsigned i = 0; i < nflows; i++) {
		uint64_t w0 = i * off + 2 * rtt;
		for (unsigned j = 0; j < nflows; j++)
			assert_false(j * off > w0 && j * off < w0 + rtt);
		t[nt++] = w0;
		t[nt++] = w0 + rtt;
	}
	/* (sorted: insertion, at most 8) */
	for (unsigned a = 1; a < nt; a++)
		for (unsigned b = a; b > 0 && t[b - 1] > t[b]; b--) {
			uint64_t x = t[b];
			t[b] = t[b - 1];
			t[b - 1] = x;
		}
	for (unsigned a = 0; a < nt; a++) {
		if (a == 0 || t[a] != t[a - 1])
			run_to(&rn, t[a]);
		for (unsigned i = 0; i < nflows; i++) {
			uint64_t w0 = i * off + 2 * rtt;
			if (t[a] == w0) {
				f0[i] = sim_flow_get(rn.s, i)->rx_bytes;
				l0[i] = host_rx_bytes(rn.s, nflows);
			}
			if (t[a] == w0 + rtt) {
				f1[i] = sim_flow_get(rn.s, i)->rx_bytes;
				l1[i] = host_rx_bytes(rn.s, nflows);
				/* every flow started is still running */
				for (unsigned j = 0; j < nflows; j++)
					assert_true(j * off > w0 || !sim_flow_get(rn.s, j)->done);
			}
		}
	}
	double worst = 1e9, worst_link = 1e9;
	for (unsigned i = 0; i < nflows; i++) {
		uint64_t w0 = i * off + 2 * rtt;
		unsigned n = 0;
		for (unsigned j = 0; j < nflows; j++)
			n += j * off <= w0;
		double r = (double)(f1[i] - f0[i]) * 8e9 / (double)rtt, fair = cap / n,
		       link = (double)(l1[i] - l0[i]) * 8e9 / (double)rtt;
		if (r / fair < worst)
			worst = r / fair;
		if (link / cap < worst_link)
			worst_link = link / cap;
		print_message("  flow %u (of %u running) in its 3rd round trip: %.1f Gbit/s "
			      "(%.2f of its share), the link %.2f busy\n",
			      i, n, r / 1e9, r / fair, link / cap);
	}
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	uint64_t last = 0, bytes = 0;
	for (unsigned i = 0; i < nflows; i++) {
		const sim_flow *f = sim_flow_get(rn.s, i);
		bytes += f->bytes;
		if (f->finish_ns > last)
			last = f->finish_ns;
	}
	double ideal = (double)bytes * 8e9 / cap + (double)rtt,
	       ratio = ideal / (double)last;
	uint64_t pkts = 0, drops = all_drops(rn.s);
	for (unsigned i = 0; i < nflows; i++)
		pkts += (sim_flow_get(rn.s, i)->bytes + rn.cfg.mtu - 1) / rn.cfg.mtu;
	print_message("start-up, %u flows, %u ms, %u Gbit/s, %u us apart, seed %llu: worst "
		      "share %.2f, link %.2f; last completion %.2f ms, %.3f of ideal; drops %llu "
		      "of %llu data packets (%.3f %%)\n",
		      nflows, rtt_us / 1000, gbps, offset_us, (unsigned long long)seed, worst,
		      worst_link, (double)last / 1e6, ratio, (unsigned long long)drops,
		      (unsigned long long)pkts, 100.0 * (double)drops / (double)pkts);
	run_free(&rn);
	/* (every case is run and printed before any is asserted) */
	fig[0] = worst;
	fig[1] = worst_link;
	fig[2] = ratio;
	fig[3] = 100.0 * (double)drops / (double)pkts;
}

static void test_startup(void **state)
{
	(void)state;
	static const struct {
		unsigned rtt_us, gbps, nflows, offset_us;
		uint64_t seed;
	} cases[] = {
		{ 1000, 100, 2, 500, 1 },  { 1000, 100, 2, 200, 2 },  { 1000, 25, 2, 500, 1 },
		{ 4000, 100, 2, 2000, 1 }, { 10000, 25, 2, 5000, 1 }, { 1000, 100, 4, 200, 1 },
		{ 4000, 25, 4, 500, 1 },   { 10000, 25, 4, 2000, 1 }, { 4000, 100, 4, 500, 1 },
		{ 1000, 400, 4, 200, 1 },
	};
	enum { NC = sizeof(cases) / sizeof(cases[0]) };
	double fig[NC][4];
	for (unsigned i = 0; i < NC; i++)
		startup_one(cases[i].rtt_us, cases[i].gbps, cases[i].nflows, cases[i].offset_us,
			    cases[i].seed, fig[i]);
	/* (the completion, fig[i][2], is printed, not asserted: 0.80-0.95 of
	 * the ideal, not the "few %", bench/README.md) */
	for (unsigned i = 0; i < NC; i++) {
		assert_true(fig[i][0] >= 0.8);
		assert_true(fig[i][1] >= 0.9);
		assert_true(fig[i][3] <= 0.1);
	}
}

/*
 * Scale-across under loss: the flows of test_scale_startup with 1 % random
 * loss on the sender's cable (data and ACKs), three seeds. Loss may cost
 * its retransmissions' share of the link and the round trip that repairs
 * the last window, not a chain of round trips at the end: the FCT is at
 * most 1.5 round trips longer than the lossless run's. (Before a tail's
 * retransmissions went twice, each loss of a retransmission in the last
 * window cost a round trip more, or a timeout: 1.6-3.5 round trips at
 * 4 ms, bench/README.md. Before repair was sent ahead of the last
 * packets' losses, SPEC 6.4, the bar was 2: 1.68-1.75 round trips at 4 ms,
 * 1.77-1.92 at 10 ms; now 0.85-1.02.) At 10 ms the copies sent ahead of
 * the last window's losses keep it within one round trip (0.93-0.94 over
 * seeds 1-10; 1.01 before repair went ahead of them and they covered the
 * packets whose loss would be learnt last, SPEC 6.4).
 */
static uint64_t scale_fct(const char *name, uint64_t seed)
{
	run rn;
	run_load(&rn, name, seed);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	uint64_t fct = rn.r.flows[0].fct_ns;
	run_free(&rn);
	return fct;
}

static void test_scale_loss(void **state)
{
	(void)state;
	static const struct {
		const char *lossless, *lossy;
		uint64_t rtt_ns;
	} fam[] = {
		{ "scale_1ms_quick", "scale_1ms_loss_quick", 1000 * US },
		{ "scale_4ms_quick", "scale_4ms_loss_quick", 4000 * US },
		{ "scale_10ms_quick", "scale_10ms_loss_quick", 10000 * US },
	};
	for (unsigned i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
		uint64_t f0 = scale_fct(fam[i].lossless, 1);
		for (uint64_t seed = 1; seed <= 3; seed++) {
			uint64_t f = scale_fct(fam[i].lossy, seed);
			print_message("%-21s seed %llu: FCT %.2f ms, lossless %.2f ms: %.2f round "
				      "trips more\n", fam[i].lossy, (unsigned long long)seed,
				      (double)f / 1e6, (double)f0 / 1e6,
				      ((double)f - (double)f0) / (double)fam[i].rtt_ns);
			assert_true(f <= f0 + 3 * fam[i].rtt_ns / 2);
			if (fam[i].rtt_ns >= 10000 * US)
				assert_true(f <= f0 + fam[i].rtt_ns);
		}
	}
}

/*
 * Bursty loss: the sender's cable (plane 0, both directions) loses 1 % of
 * the time in bursts of 2, 10 and 40 us on average (loss_burst 6, 30, 120),
 * one flow of 32 MB over 1 and 2 planes, the first two seeds whose run met
 * a burst, 16 packets lost on the wire or more (a 32 MB flow lasts about 3
 * ms, and the bursts come 0.2-4 ms apart: some seeds meet none, or hit a
 * few ACKs only, and such a run shows nothing; every run taken is
 * asserted, met or not): MetaRoCE keeps >= 0.95
 * of its goodput on the same fabric without loss (issue 11 asks for 0.9,
 * and for RoCEv2's goodput or more: see bench/README.md, "Bursty loss", for
 * the comparison with RoCEv2 and where it falls short). What it takes:
 * paths that time out in a burst probe again one PTO apart, the peer's ACK
 * ahead of the PROBE_ACK resolves their timed-out packets (SPEC 8), and the
 * congestion-avoidance increase is divided by the bytes in flight, so that
 * the lossy plane regrows beside a plane whose windows pacing holds large
 * (with QWND as the divisor, 2 planes, burst 15, seed 5 fell to 0.81).
 */
static void test_bursty_loss(void **state)
{
	(void)state;
	static const char *const fam[] = { "burst_1plane", "burst_2planes" };
	static const double bursts[] = { 6, 30, 120 };
	for (unsigned i = 0; i < 2; i++) {
		double g0 = burst_goodput(fam[i], 0, 1, 0);
		for (unsigned b = 0; b < 3; b++) {
			unsigned met = 0;
			for (uint64_t seed = 1; seed <= 20 && met < 2; seed++) {
				uint64_t lost;
				double g = burst_goodput_lost(fam[i], bursts[b], seed, 0, &lost);
				print_message("%-13s burst %3.0f seed %2llu: %.1f Gbit/s, %.3f of "
					      "lossless (%.1f), %llu packets lost\n",
					      fam[i], bursts[b], (unsigned long long)seed, g / 1e9,
					      g / g0, g0 / 1e9, (unsigned long long)lost);
				assert_true(g >= 0.95 * g0);
				met += lost >= 16;
			}
			assert_int_equal(met, 2); /* two runs that met a burst (16 packets
						   * lost or more: not only a probe's) */
		}
	}
}

/*
 * Drop-tail bottlenecks the receiver does not know of: a slower hop in the
 * fabric (10, 25, 40 Gbit/s; 250 Mbit/s like the netns test bed's tbf
 * planes) under faster hosts, queues of 312 KB to 4 MB, no ECN, so only
 * losses say the hop is full, and the receiver's hints (its own link's
 * rate) say nothing. One flow or four (to four receivers), one plane to
 * four, planes of different rates, and hops that also lose 1 % of their
 * packets at random (whose losses must not cut: they come with no full
 * queue), and four flows that join one hop 3 ms apart. MetaRoCE must
 * fill the hops (>= 0.92 of their rate, headers included in the rate),
 * share them (Jain >= 0.95 over the flows' goodputs) and lose few of the
 * packets it sends: at most 5 % as many drops as the flows' data packets
 * (random ones included), seeds 1 and 2. Before the engine cut a plane's
 * paths together for losses of a connection far short of its hint, capped
 * the hint's window at twice the base RTT, and stopped cutting again for
 * losses a cut had answered, the runs without random loss dropped 16-267 %
 * as many (bench/README.md, "A bottleneck that drops instead of marking").
 *
 * Where the start-up dominates (the 250 Mbit/s planes, four flows into one
 * 10 Gbit/s hop, together or 3 ms apart) a run is made twice, with the
 * flows and with twice their bytes, and the bound is on what the second
 * half adds. The first round trips go out at the hint's rate before the
 * connection is known to be far short of it (two spans of two round
 * trips) and cost ~500-3,500 drops in the first 5-20 ms; and a flow that
 * joins a queue which already stands takes that queue for its base RTT,
 * and sizes its first window by it: ~3,000 drops each (printed, not
 * asserted; open, bench/README.md). What follows
 * must lose at most 1 %.
 */
static void droptail_one(const char *name, uint64_t seed, uint64_t mult, uint64_t *drops,
			 double *goodput, uint64_t *pkts, double *jain)
{
	run rn;

	run_load_config(&rn, name, seed);
	*pkts = 0;
	for (size_t f = 0; f < rn.cfg.nflows; f++) {
		rn.cfg.flows[f].bytes *= mult;
		*pkts += (rn.cfg.flows[f].bytes + 4095) / 4096;
	}
	rn.s = sim_from(&rn.cfg, &sim_mrp_ops);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	*drops = rn.r.drops_total;
	*goodput = rn.r.agg_goodput_bps;
	*jain = rn.r.jain;
	assert_int_equal(rn.r.finished, rn.cfg.nflows);
	run_free(&rn);
}

static void test_droptail(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		double rate_bps; /* the hidden hops' rate, all planes */
		int twice;       /* bound the second half (see above) */
	} fam[] = {
		{ "droptail_10g_4mb", 10e9, 0 },
		{ "droptail_10g_2planes_2flows", 20e9, 0 },
		{ "droptail_25g_4planes", 200e9, 0 },
		{ "droptail_tbf_1plane", 250e6, 1 },
		{ "droptail_tbf_2planes", 500e6, 1 },
		{ "droptail_10g_4flows", 10e9, 1 },
		{ "droptail_10g_staggered", 10e9, 1 },
		{ "droptail_mixed_planes", 35e9, 0 },
		{ "droptail_40g_loss", 40e9, 0 },
		{ "droptail_25g_2planes_loss", 100e9, 0 },
	};
	for (unsigned i = 0; i < sizeof(fam) / sizeof(fam[0]); i++)
		for (uint64_t seed = 1; seed <= 2; seed++) {
			uint64_t d, n, d2 = 0, n2 = 0;
			double g, g2 = 0, j, j2 = 1;
			droptail_one(fam[i].name, seed, 1, &d, &g, &n, &j);
			if (fam[i].twice)
				droptail_one(fam[i].name, seed, 2, &d2, &g2, &n2, &j2);
			print_message("%-27s seed %llu: %.3f of the hops' rate, Jain %.3f, %llu drops for "
				      "%llu data packets (%.2f %%)",
				      fam[i].name, (unsigned long long)seed, g / fam[i].rate_bps, j,
				      (unsigned long long)d, (unsigned long long)n, 100.0 * (double)d / (double)n);
			if (fam[i].twice)
				print_message("; twice the bytes: %.3f, Jain %.3f, %llu drops, the second half %.2f %%",
					      g2 / fam[i].rate_bps, j2, (unsigned long long)d2,
					      100.0 * ((double)d2 - (double)d) / (double)(n2 - n));
			print_message("\n");
			assert_true(g >= 0.92 * fam[i].rate_bps);
			assert_true(j >= 0.95);
			if (fam[i].twice) {
				assert_true(g2 >= 0.92 * fam[i].rate_bps);
				assert_true(j2 >= 0.95);
				assert_true(d2 <= d + (n2 - n) / 100);
			} else {
				assert_true(d <= n / 20);
			}
		}
}

/*
 * Host stalls: a host whose daemon is not scheduled for a while (a busy
 * server, a CI machine beside other jobs) holds its traffic, and what it
 * would have sent or received goes at once when it runs again. The
 * stall_* scenarios model it by steps of one host's cable delay (40, 35,
 * ... 5 ms) behind drop-tail hops without ECN, where the loss-driven window
 * holds the queue: the receiver 40 ms four times on a 250 Mbit/s tbf-like
 * plane; the receiver's ACKs 20 ms six times over two such planes; the
 * sender 100 ms twice behind 1 Gbit/s; the receiver 4 ms ten times behind
 * 10 Gbit/s. Each is run as it is and without its stalls: the stalls may
 * cost the flow at most 1.6 times their length. The stalls' RTT samples
 * took the smoothed RTTs to their length, the pacing rate followed them,
 * and the paths that went idle kept them: 1.64, 1.60, 7.3 and 0.96 times
 * the stalls' length lost (a daemon beside a CPU hog: 0.10 of its plane for
 * a second, netns/multiplane_scaling; recompute_qwnd() in proto/conn.c);
 * now 1.22, 0.87, 1.55 and 0.95.
 */
static void test_host_stall(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		uint64_t stalled_ns; /* the stalls' total length */
	} fam[] = {
		{ "stall_tbf_1plane", 4 * 40000000ull },
		{ "stall_tbf_2planes_acks", 6 * 20000000ull },
		{ "stall_1g_sender", 2 * 100000000ull },
		{ "stall_10g_short", 10 * 4000000ull },
	};
	for (unsigned i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
		uint64_t fct[2];
		for (int stalls = 0; stalls < 2; stalls++) {
			run rn;
			run_load_config(&rn, fam[i].name, 1);
			size_t nev = rn.cfg.nevents;
			assert_true(nev > 0);
			if (!stalls)
				rn.cfg.nevents = 0;
			rn.s = sim_from(&rn.cfg, &sim_mrp_ops);
			run_finish(&rn, sim_run(rn.s, SIM_NEVER));
			fct[stalls] = rn.r.max_fct_ns;
			rn.cfg.nevents = nev;
			run_free(&rn);
		}
		double lost = (double)(fct[1] - fct[0]) / (double)fam[i].stalled_ns;
		print_message("%-24s completes in %.1f ms, %.1f ms with %.0f ms of stalls: %.2f "
			      "times their length lost\n", fam[i].name, (double)fct[0] / 1e6,
			      (double)fct[1] / 1e6, (double)fam[i].stalled_ns / 1e6, lost);
		assert_true(fct[1] > fct[0]);
		assert_true(lost <= 1.6);
	}
}

/*
 * One-direction black hole: one direction of one spine-to-leaf cable goes
 * silent at 200 us. Whatever used it -- data one way, ACKs the other --
 * must move: three RTO floors (3 x 100 us) after the hole opened, the
 * packets still sent into it are <= 1 % of what the cable carried in that
 * direction in the 100 us before, measured over the next 2 ms (a rate: a
 * cable that carried ACKs alone holds ~0.2-0.4 packets a microsecond, and
 * one probe of a new route that hashes into the hole again is then 0.5 %
 * of 500 us). A receiver
 * that only receives learns of its ACK paths by probing them (conn.c,
 * CTL_PROBE_EVERY). One flow across 4 spines, the hole on each spine's
 * cable to the sender's leaf (the ACKs' way back), two seeds; and a
 * permutation over two planes, the hole in plane 1, three seeds.
 */
/* Returns 1, or 0 when no route of this seed crossed the cable (nothing to
 * move: not a case); asserts the bar. */
static int blackhole_one_way(const char *name, unsigned plane, unsigned spine, uint64_t seed)
{
	blackhole_result b = blackhole_one_way_measure(name, plane, spine, seed);
	assert_true(b.pct <= 1.0);
	return b.crossed;
}

static int blackhole_link(const char *name, uint64_t seed, const char *lname)
{
	blackhole_result b = blackhole_link_measure(name, seed, lname);
	assert_true(b.pct <= 1.0);
	return b.crossed;
}

static void test_blackhole_one_way(void **state)
{
	unsigned cases = 0;

	(void)state;
	for (unsigned spine = 0; spine < 4; spine++)
		for (uint64_t seed = 1; seed <= 2; seed++)
			cases += (unsigned)blackhole_one_way("blackhole_ack_4spines", 0, spine, seed);
	for (uint64_t seed = 1; seed <= 3; seed++)
		cases += (unsigned)blackhole_one_way("blackhole_ack_permutation", 1, 0, seed);
	/* two spines per plane: a new route lands in the hole half the time
	 * (ACK-only paths re-port at each unanswered probe while another path
	 * of their plane works, their timeout not doubling for it: 1.03-2.14 %
	 * in the worst of these runs before) */
	for (unsigned spine = 0; spine < 2; spine++)
		for (uint64_t seed = 1; seed <= 4; seed++)
			cases += (unsigned)blackhole_one_way("blackhole_ack_2spines_25g", 0, spine,
							     seed);
	print_message("%u of 19 runs had traffic on the cable\n", cases);
	assert_true(cases >= 15);
	/* seeds where a receiver's new routes fell into the hole several
	 * times in a row, each probed at once: 1.25-3.12 % before its later
	 * routes' probes waited (ACK_REPORT_HOLD in proto/conn.c), and the
	 * permutation's 1.98 % (seed 23) */
	static const struct {
		const char *name;
		unsigned plane, spine;
		uint64_t seed;
	} streak[] = {
		{ "blackhole_ack_2spines_25g", 0, 0, 12 }, { "blackhole_ack_2spines_25g", 0, 1, 14 },
		{ "blackhole_ack_2spines_25g", 0, 0, 22 }, { "blackhole_ack_2spines_25g", 0, 1, 43 },
		{ "blackhole_ack_2spines_25g", 0, 0, 52 }, { "blackhole_ack_permutation", 1, 0, 23 },
	};
	cases = 0;
	for (unsigned i = 0; i < sizeof(streak) / sizeof(streak[0]); i++)
		cases += (unsigned)blackhole_one_way(streak[i].name, streak[i].plane, streak[i].spine,
						     streak[i].seed);
	assert_int_equal(cases, sizeof(streak) / sizeof(streak[0]));
	/* the data direction with 8 spines, and with 4 planes of 4 spines
	 * (a data path in the hole probed it for some 700 us, its waits
	 * doubling, before it failed: 1.91 % at seed 2); a leaf's uplink
	 * (the direction into the spine) under traffic both ways, on plane 1
	 * of 2 */
	cases = 0;
	for (uint64_t seed = 1; seed <= 3; seed++) {
		cases += (unsigned)blackhole_link("blackhole_data_8spines", seed, "p0:spine3->leaf1");
		cases += (unsigned)blackhole_link("blackhole_leafup_2planes", seed,
						  "p1:leaf1->spine0");
	}
	for (uint64_t seed = 1; seed <= 4; seed++)
		cases += (unsigned)blackhole_link("blackhole_data_4planes_100g", seed,
						  "p2:spine2->leaf1");
	print_message("%u of 10 runs had traffic on the cable\n", cases);
	assert_true(cases >= 8);
	/* seeds where every plane-2 path of one connection took the hole's
	 * spine (25, 56: they stayed SUSPECT, probing it 8 times per timeout,
	 * until a data path whose plane has no working path re-ported while
	 * the peer answered on another plane) and where a re-path moved a
	 * path onto it (11: its 8 first packets on the new route; 1 on a
	 * plane with a route failure now): 1.62-1.79 % before, 0.15-0.60 %
	 * since */
	static const uint64_t hard[] = { 11, 25, 56 };
	cases = 0;
	for (unsigned i = 0; i < sizeof(hard) / sizeof(hard[0]); i++)
		cases += (unsigned)blackhole_link("blackhole_data_4planes_100g", hard[i],
						  "p2:spine2->leaf1");
	assert_int_equal(cases, sizeof(hard) / sizeof(hard[0]));
}

/*
 * Steady short messages beside a bulk flow into one receiver: a 16-256 MB
 * flow from another leaf while 16-62 other hosts each send the receiver a
 * 4-16 KB message every 50-200 us, staggered, for 6 ms -- RPCs beside a
 * checkpoint or a dataset read. Each message comes from a sender idle
 * longer than the allocator remembers, so it is a sender new to the
 * receiver every time. RoCEv2 keeps the bulk flow's rate; so must
 * MetaRoCE, and its short messages must finish no later (p50 within the
 * non-preemptive wait behind a bulk packet, p99 no later). A sender whose
 * message all came on its credit (SPEC 6.5) was taken as an unknown
 * demand with an equal share for an epoch or two, and the bulk flow, told
 * a fraction of the link at every such arrival, ran at 0.70 of RoCEv2's
 * rate on one plane (bench/README.md, "Steady short messages beside a
 * bulk flow").
 */
typedef struct rpc_case {
	unsigned planes, clients, msg_kb, every_us, gbps, queue_kb, ecn_kb, bulk_mb;
} rpc_case;

typedef struct rpc_result {
	double bulk_bps;
	uint64_t p50_ns, p99_ns;
} rpc_result;

static rpc_result rpc_run(const rpc_case *k, uint64_t seed, const sim_transport_ops *ops)
{
	static char text[16384];
	size_t n = 0;
	run rn;
	rpc_result out = { 0 };

	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      "hosts: 64\nplanes: %u\n"
			      "fabric: {type: leafspine, leaves: 8, spines: 4, hosts_per_leaf: 8}\n"
			      "link: {rate: %uGbps, delay: 1us, queue: %uKB, ecn_threshold: %uKB}\n"
			      "duration: 100ms\nflows:\n  - {src: 9, dst: 0, bytes: %uMB}\n",
			      k->planes, k->gbps, k->queue_kb, k->ecn_kb, k->bulk_mb);
	for (unsigned i = 0, src = 1; i < k->clients; i++, src++) {
		if (src == 9)
			src++;
		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      "  - {src: %u, dst: 0, bytes: %uKB, start: %.3fus, "
				      "repeat: %u, every: %uus}\n",
				      src, k->msg_kb, (double)k->every_us * i / k->clients,
				      6000 / k->every_us, k->every_us);
	}
	assert_true(n < sizeof(text));
	run_parse(&rn, text, n, "rpc_beside_bulk");
	rn.cfg.seed = seed;
	rn.s = sim_from(&rn.cfg, ops);
	assert_non_null(rn.s);
	run_finish(&rn, sim_run(rn.s, SIM_NEVER));
	size_t nf = sim_flow_count(rn.s), ns = 0;
	uint64_t *fct = calloc(nf, sizeof(*fct));
	assert_non_null(fct);
	for (size_t i = 0; i < nf; i++) {
		const sim_flow *f = sim_flow_get(rn.s, i);
		uint64_t t = f->finish_ns - f->start_ns;
		if (f->src == 9)
			out.bulk_bps = (double)f->bytes * 8e9 / (double)t;
		else
			fct[ns++] = t;
	}
	out.p50_ns = sim_percentile(fct, ns, 0.5);
	out.p99_ns = sim_percentile(fct, ns, 0.99);
	free(fct);
	run_free(&rn);
	return out;
}

static void test_short_beside_bulk(void **state)
{
	(void)state;
	static const rpc_case cases[] = {
		{ 1, 62, 4, 200, 100, 1024, 100, 64 },
		{ 2, 62, 4, 100, 100, 1024, 100, 128 },
		{ 1, 16, 8, 50, 100, 1024, 100, 64 },
		{ 1, 62, 4, 50, 400, 2048, 400, 256 },
		{ 4, 62, 16, 100, 100, 1024, 100, 256 },
		{ 1, 62, 4, 200, 100, 256, 40, 64 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (uint64_t seed = 1; seed <= 2; seed++) {
			const rpc_case *k = &cases[i];
			rpc_result m = rpc_run(k, seed, &sim_mrp_ops);
			rpc_result r = rpc_run(k, seed, &sim_roce_ops);
			print_message("%u plane(s) %u Gbit/s, %u x %u KB every %u us, seed %llu: "
				      "bulk %.1f Gbit/s (RoCEv2 %.1f), short p50 %.1f / p99 %.1f us "
				      "(RoCEv2 %.1f / %.1f)\n",
				      k->planes, k->gbps, k->clients, k->msg_kb, k->every_us,
				      (unsigned long long)seed, m.bulk_bps / 1e9, r.bulk_bps / 1e9,
				      m.p50_ns / 1e3, m.p99_ns / 1e3, r.p50_ns / 1e3, r.p99_ns / 1e3);
			assert_true(m.bulk_bps >= r.bulk_bps);
			assert_true(m.p99_ns <= r.p99_ns);
			/* (a short packet waits for the bulk packet on the wire at
			 * each hop: 4 hops of a 4 KB packet's time) */
			uint64_t wait = 4 * (4096 + 140) * 8 / k->gbps;
			assert_true(m.p50_ns <= r.p50_ns + wait);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reordering),
		cmocka_unit_test(test_reordering_start),
		cmocka_unit_test(test_reordering_planes),
		cmocka_unit_test(test_incast),
		cmocka_unit_test(test_plane_churn),
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_survivor),
		cmocka_unit_test(test_startup),
		cmocka_unit_test(test_scale_startup),
		cmocka_unit_test(test_scale_loss),
		cmocka_unit_test(test_bursty_loss),
		cmocka_unit_test(test_droptail),
		cmocka_unit_test(test_host_stall),
		cmocka_unit_test(test_blackhole_one_way),
		cmocka_unit_test(test_short_beside_bulk),
	};
	/* (meson runs test_reordering_planes, test_startup and test_plane_churn
	 * apart: TEST_SKIP, TEST_FILTER) */
	return sim_run_selected("sim/families", tests, sizeof(tests) / sizeof(tests[0]));
}
