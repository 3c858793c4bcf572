/*
 * Incast over several planes (issue 11): 64, 256 and 1,024 senders into one
 * receiver over two and eight planes, several seeds, with the measures of
 * test_families.c's test_incast (Jain >= 0.95 among the contending senders
 * from the third round trip, the receiver's links >= 90 % busy, drops <=
 * 0.1 % of the data packets over the run). Its own test, so that the
 * families test does not grow under ASan.
 *
 * Over several planes each sender picks a plane per packet on its own, so
 * the queues in front of the receiver do not fill alike. The receiver's
 * admission credits (SPEC 6.6) of two or more connections now take at
 * most half the budget (the sum of the planes' queues) over several
 * queues: with the whole budget out, every plane's queue was 0.9-1 MB full
 * of 1 MB from the first microseconds, and one of them overflowed at the
 * start and again when the first grants' data met that queue (1,024:1
 * over 2 planes: 45 drops, 0.137 %, seed 1; over 8 planes 806, 1.25 %).
 * (Grants are also a part of the 98 % the rate hints divide, not of the
 * whole capacity: 10 -> 6 drops in seed 1 of 1,024:1 over 2 planes.)
 * On main, test_incast_two_planes fails at its first case (Jain 0.912,
 * 0.137 % dropped) and test_incast_eight_planes at its first (1.25 %).
 */
#include "families.h"

static void test_incast_two_planes(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 3; seed++)
		incast("incast_1024_2planes", seed, 0.1);
	incast("incast_256_2planes", 1, 0.1);
	incast("incast_256_2planes", 2, 0.1);
	incast("incast_64_2planes", 1, 0.1);
	incast("incast_64_2planes", 2, 0.1);
}

static void test_incast_eight_planes(void **state)
{
	(void)state;
	incast("incast_1024_8planes", 1, 0.1);
	incast("incast_1024_8planes", 2, 0.1);
	incast("incast_64_8planes", 1, 0.1);
	incast("incast_64_8planes", 2, 0.1);
}

/* 1,024:1 over two 25 Gbit/s planes (64 KB each, 512 KB queues) and 128:1
 * over eight (512 KB each, 256 KB queues): senders paced a packet per
 * ~650 us (per ~21 us at 128:1). Such a sender takes a plane per packet,
 * not four packets in a row on one plane across its pacing gaps, and its
 * paths get no tail-loss probe while it has more to send (conn.c,
 * burst_over() and spaced_with_more()). On main 1,024:1 drops 862 / 0 /
 * 409 packets (5.3 / 0 / 2.5 %) in seeds 1-3 and 128:1 19 (0.119 %) in
 * seed 3; with the first rule alone 959 / 0 / 946 and 95 in seed 1. */
static void test_incast_slow_senders(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 3; seed++)
		incast("incast_1024_2planes_25g", seed, 0.1);
	for (uint64_t seed = 1; seed <= 3; seed++)
		incast("incast_128_8planes_25g", seed, 0.1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_incast_two_planes),
		cmocka_unit_test(test_incast_eight_planes),
		cmocka_unit_test(test_incast_slow_senders),
	};
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests_name("sim/incast_planes", tests, NULL, NULL);
}
