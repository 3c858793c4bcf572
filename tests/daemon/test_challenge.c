/*
 * The restart challenge's schedule (daemon/challenge.c): probes at 0, 50,
 * 150, 350, 750 ms and 1.55 s, expiry at 2.5 s, an answer ends the round,
 * and a running round is not restarted by another claim.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "challenge.h"

#define MS 1000000ull

static void test_schedule_and_expiry(void **state)
{
	(void)state;
	mrd_challenge ch = {0};
	uint64_t t0 = 1000 * MS;
	assert_int_equal(mrd_chal_step(&ch, t0), MRD_CHAL_IDLE);
	assert_true(mrd_chal_deadline(&ch) == UINT64_MAX);
	assert_int_equal(mrd_chal_start(&ch, t0), 1);
	assert_int_equal(mrd_chal_start(&ch, t0 + 10 * MS), 0); /* already running */
	static const uint64_t at[] = {0, 50, 150, 350, 750, 1550};
	for (unsigned i = 0; i < 6; i++) {
		uint64_t t = t0 + at[i] * MS;
		assert_true(mrd_chal_deadline(&ch) == t);
		if (at[i])
			assert_int_equal(mrd_chal_step(&ch, t - 1), MRD_CHAL_IDLE);
		assert_int_equal(mrd_chal_step(&ch, t), MRD_CHAL_PROBE);
		assert_int_equal(mrd_chal_step(&ch, t), MRD_CHAL_IDLE);
	}
	/* no more probes: the next thing is the expiry */
	assert_true(mrd_chal_deadline(&ch) == t0 + MRD_CHAL_TIMEOUT_NS);
	assert_int_equal(mrd_chal_step(&ch, t0 + MRD_CHAL_TIMEOUT_NS - 1), MRD_CHAL_IDLE);
	assert_int_equal(mrd_chal_step(&ch, t0 + MRD_CHAL_TIMEOUT_NS), MRD_CHAL_EXPIRED);
	assert_false(mrd_chal_running(&ch));
	assert_int_equal(mrd_chal_step(&ch, t0 + MRD_CHAL_TIMEOUT_NS + MS), MRD_CHAL_IDLE);
}

static void test_answer_ends_round(void **state)
{
	(void)state;
	mrd_challenge ch = {0};
	assert_int_equal(mrd_chal_answered(&ch), 0); /* nothing running */
	assert_int_equal(mrd_chal_start(&ch, 5 * MS), 1);
	assert_int_equal(mrd_chal_step(&ch, 5 * MS), MRD_CHAL_PROBE);
	assert_int_equal(mrd_chal_answered(&ch), 1);
	assert_false(mrd_chal_running(&ch));
	/* long after, nothing expires */
	assert_int_equal(mrd_chal_step(&ch, 5 * MS + 10 * MRD_CHAL_TIMEOUT_NS), MRD_CHAL_IDLE);
	/* a new round may start again, from its own time */
	assert_int_equal(mrd_chal_start(&ch, 9000 * MS), 1);
	assert_int_equal(mrd_chal_step(&ch, 9000 * MS + MRD_CHAL_TIMEOUT_NS - 1), MRD_CHAL_PROBE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schedule_and_expiry),
		cmocka_unit_test(test_answer_ends_round),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
