/*
 * The initial retransmission timeout of a connection from its handshake
 * (mrd_rto_initial()): timers.rto_initial, or three handshake round trips
 * where that is longer, at most timers.rto_max; an absurd sample ignored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "peer.h"

#define US 1000ull
#define MS 1000000ull

/* The daemon's defaults: rto_initial 5 ms, rto_max 100 ms. */
static const uint64_t INIT = 5 * MS, MAX = 100 * MS;

static void test_near_keeps_configured(void **state)
{
	(void)state;
	/* a data centre, loopback: three round trips are well below 5 ms */
	assert_int_equal(mrd_rto_initial(INIT, MAX, 20 * US), INIT);
	assert_int_equal(mrd_rto_initial(INIT, MAX, 1 * MS), INIT);
	/* three round trips of exactly rto_initial: still rto_initial */
	assert_int_equal(mrd_rto_initial(6 * MS, MAX, 2 * MS), 6 * MS);
}

static void test_far_three_round_trips(void **state)
{
	(void)state;
	/* between data centres, 4-10 ms: the first ACK is back before the
	 * timeout (at 5 ms, the first window timed out before it came) */
	assert_int_equal(mrd_rto_initial(INIT, MAX, 4 * MS), 12 * MS);
	assert_int_equal(mrd_rto_initial(INIT, MAX, 10 * MS), 30 * MS);
	/* just above a third of rto_initial */
	assert_int_equal(mrd_rto_initial(INIT, MAX, 5 * MS / 3 + 1), 5 * MS + 1);
	/* a configured rto_initial above three round trips is kept */
	assert_int_equal(mrd_rto_initial(50 * MS, MAX, 10 * MS), 50 * MS);
}

static void test_capped_at_rto_max(void **state)
{
	(void)state;
	assert_int_equal(mrd_rto_initial(INIT, MAX, 34 * MS), MAX);
	assert_int_equal(mrd_rto_initial(INIT, MAX, 900 * MS), MAX);
	assert_int_equal(mrd_rto_initial(INIT, 20 * MS, 10 * MS), 20 * MS);
	/* the longest round trip a handshake can measure */
	assert_int_equal(mrd_rto_initial(INIT, 60000 * MS, MRD_HS_TIMEOUT_NS),
			 3 * MRD_HS_TIMEOUT_NS);
}

static void test_absurd_sample_ignored(void **state)
{
	(void)state;
	/* none */
	assert_int_equal(mrd_rto_initial(INIT, MAX, 0), INIT);
	/* longer than a handshake can last: not a round trip */
	assert_int_equal(mrd_rto_initial(INIT, MAX, MRD_HS_TIMEOUT_NS + 1), INIT);
	assert_int_equal(mrd_rto_initial(INIT, MAX, UINT64_MAX), INIT);
	/* (3 x a wrapped time difference would overflow) */
	assert_int_equal(mrd_rto_initial(INIT, MAX, UINT64_MAX / 3 + 1), INIT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_near_keeps_configured),
		cmocka_unit_test(test_far_three_round_trips),
		cmocka_unit_test(test_capped_at_rto_max),
		cmocka_unit_test(test_absurd_sample_ignored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
