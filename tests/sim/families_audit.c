/*
 * The family measures of test_families.c on any scenario of
 * sim/scenarios/families/ and any seed, printed and not asserted: the
 * driver behind the audit tables of bench/README.md ("Audit on new
 * variants" and after). Built, never run by a suite.
 *
 * usage: SIM_SCENARIOS=DIR families_audit MEASURE NAME [ARG] SEED
 *   churn NAME SEED          receivers' rate / capacity of the planes up,
 *                            from 1 ms to 2 ms after each plane event (or
 *                            the next event), as churn_events() measures
 *   reorder NAME SEED        goodput, spurious retransmissions of the data
 *                            packets, drops, as reorder_run() measures;
 *                            with --links, every link that overflowed
 *   burst NAME BURST SEED    goodput with the file's one bursty cable at a
 *                            mean burst of BURST packet times, against the
 *                            same file without loss (seed 1), as
 *                            burst_goodput() measures (all flows)
 *   incast NAME SEED         Jain, receiver's links busy, drops, as
 *                            incast_measure() measures (printed by it)
 *   blackhole NAME PLANE SPINE SEED
 *                            a one-way hole on spine SPINE's cable to leaf0
 *                            of plane PLANE (the file's hole moved there):
 *                            what still goes into it, as
 *                            test_blackhole_one_way() measures
 *   hole NAME LINK SEED      the same on the file's own hole, LINK named as
 *                            sim_link_find() takes it (p2:spine2->leaf1)
 * Every run must still finish with every byte verified (run_finish()).
 */
#include "families.h"

static int g_argc;
static char **g_argv;

static void audit_churn(const char *name, uint64_t seed)
{
	churn_window w[32];
	unsigned n = churn_measure(name, seed, w, 32);
	double low = 1e9;
	printf("%s seed %llu:", name, (unsigned long long)seed);
	for (unsigned i = 0; i < n; i++) {
		printf(" %.3f", w[i].share);
		if (w[i].share < low)
			low = w[i].share;
	}
	printf(" | lowest %.3f\n", low);
}

static void audit_reorder(const char *name, uint64_t seed, int links)
{
	run rn;
	uint64_t pkts;
	reorder_load_run(&rn, name, seed, &pkts);
	printf("%s seed %llu: %.1f Gbit/s, spurious %llu of %llu (%.3f %%), drops %llu\n", name,
	       (unsigned long long)seed, rn.r.agg_goodput_bps / 1e9,
	       (unsigned long long)rn.r.spurious, (unsigned long long)pkts,
	       100.0 * (double)rn.r.spurious / (double)pkts, (unsigned long long)all_drops(rn.s));
	for (size_t i = 0; links && i < sim_link_count(rn.s); i++) {
		const sim_link *l = sim_link_get(rn.s, i);
		char lname[64];
		if (l->drops[SIM_DROP_OVERFLOW])
			printf("  %s: %llu overflow drops\n", sim_link_name(l, lname, sizeof(lname)),
			       (unsigned long long)l->drops[SIM_DROP_OVERFLOW]);
	}
	run_free(&rn);
}

static void audit(void **state)
{
	(void)state;
	int links = g_argc > 1 && !strcmp(g_argv[g_argc - 1], "--links");
	int argc = g_argc - links;
	if (argc == 4 && !strcmp(g_argv[1], "churn")) {
		audit_churn(g_argv[2], strtoull(g_argv[3], NULL, 10));
	} else if (argc == 4 && !strcmp(g_argv[1], "reorder")) {
		audit_reorder(g_argv[2], strtoull(g_argv[3], NULL, 10), links);
	} else if (argc == 4 && !strcmp(g_argv[1], "incast")) {
		incast_measure(g_argv[2], strtoull(g_argv[3], NULL, 10), 0.1);
	} else if (argc == 5 && !strcmp(g_argv[1], "burst")) {
		double b = strtod(g_argv[3], NULL);
		uint64_t seed = strtoull(g_argv[4], NULL, 10);
		assert_true(b > 0);
		uint64_t lost;
		double g0 = burst_goodput(g_argv[2], 0, 1, 1),
		       g = burst_goodput_lost(g_argv[2], b, seed, 1, &lost);
		printf("%s burst %g seed %llu: %.1f Gbit/s, %.3f of lossless (%.1f), %llu packets "
		       "lost on the wire\n", g_argv[2], b, (unsigned long long)seed, g / 1e9, g / g0,
		       g0 / 1e9, (unsigned long long)lost);
	} else if (argc == 6 && !strcmp(g_argv[1], "blackhole")) {
		blackhole_result b = blackhole_one_way_measure(
			g_argv[2], (unsigned)strtoul(g_argv[3], NULL, 10),
			(unsigned)strtoul(g_argv[4], NULL, 10), strtoull(g_argv[5], NULL, 10));
		printf("%s plane %s spine %s seed %s: %.2f %%%s\n", g_argv[2], g_argv[3], g_argv[4],
		       g_argv[5], b.pct, b.crossed ? "" : " (no route crossed)");
	} else if (argc == 5 && !strcmp(g_argv[1], "hole")) {
		blackhole_result b = blackhole_link_measure(g_argv[2], strtoull(g_argv[4], NULL, 10),
							    g_argv[3]);
		printf("%s %s seed %s: %.2f %%%s\n", g_argv[2], g_argv[3], g_argv[4], b.pct,
		       b.crossed ? "" : " (no route crossed)");
	} else {
		fail_msg("usage: families_audit churn NAME SEED | reorder NAME SEED [--links] | "
			 "burst NAME BURST SEED | incast NAME SEED | "
			 "blackhole NAME PLANE SPINE SEED | hole NAME LINK SEED");
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	g_argc = argc;
	g_argv = argv;
	if (!getenv("SIM_SCENARIOS")) {
		fprintf(stderr, "families_audit: set SIM_SCENARIOS to sim/scenarios\n");
		return 2;
	}
	const struct CMUnitTest tests[] = { cmocka_unit_test(audit) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
