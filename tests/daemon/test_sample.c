/*
 * The telemetry sampler's arithmetic (mrd_tel_derive): per-interval deltas,
 * sending rate, utilization of the link, the ECN-marked share of the
 * packets acknowledged, and counters that start over.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sample.h"

static void test_deltas_and_rates(void **state)
{
	(void)state;
	mrd_tel_counters a = {.tx_bytes = 1000000, .acked_pkts = 100, .ce_pkts = 10,
			      .lost_pkts = 3, .retx_pkts = 4};
	mrd_tel_counters b = {.tx_bytes = 1000000 + 125000000, .acked_pkts = 300,
			      .ce_pkts = 60, .lost_pkts = 5, .retx_pkts = 9};
	mrd_tel_derived x;
	/* 125 MB in 0.5 s on a 10 Gbit/s link: 250 MB/s = 2 Gbit/s = 20%. */
	mrd_tel_derive(&a, &b, 0.5, 10000000000ull, &x);
	assert_true(x.tx_bytes_per_s == 250000000.0);
	assert_true(x.utilization == 0.2);
	/* 50 of the 200 packets acked in the interval were marked. */
	assert_true(x.ecn_fraction == 0.25);
	assert_int_equal(x.lost_pkts, 2);
	assert_int_equal(x.retx_pkts, 5);
}

static void test_unknown_speed_and_idle(void **state)
{
	(void)state;
	mrd_tel_counters a = {.tx_bytes = 5000, .acked_pkts = 7, .ce_pkts = 1};
	mrd_tel_derived x;
	/* Link speed unknown: no utilization, the rate still. */
	mrd_tel_counters b = a;
	b.tx_bytes += 8000;
	mrd_tel_derive(&a, &b, 2.0, 0, &x);
	assert_true(x.tx_bytes_per_s == 4000.0);
	assert_true(x.utilization == 0.0);
	/* Nothing acked: no ECN share (not a division by zero). */
	assert_true(x.ecn_fraction == 0.0);
	/* An interval of 0 (two samples at once): no rate. */
	mrd_tel_derive(&a, &b, 0, 1000, &x);
	assert_true(x.tx_bytes_per_s == 0.0 && x.utilization == 0.0);
}

static void test_counter_starts_over(void **state)
{
	(void)state;
	/* The slot was reused by a new path: its counters are below the last
	 * ones, and count from 0. */
	mrd_tel_counters a = {.tx_bytes = 9000000, .acked_pkts = 900, .ce_pkts = 90,
			      .lost_pkts = 9, .retx_pkts = 9};
	mrd_tel_counters b = {.tx_bytes = 1000, .acked_pkts = 10, .ce_pkts = 2,
			      .lost_pkts = 1, .retx_pkts = 0};
	mrd_tel_derived x;
	mrd_tel_derive(&a, &b, 1.0, 8000, &x);
	assert_true(x.tx_bytes_per_s == 1000.0);
	assert_true(x.utilization == 1.0);
	assert_true(x.ecn_fraction == 0.2);
	assert_int_equal(x.lost_pkts, 1);
	assert_int_equal(x.retx_pkts, 0);
}

static void test_ecn_share_capped(void **state)
{
	(void)state;
	/* More marks than acks in one interval (marks of packets acked
	 * earlier arrive late): the share is capped at 1. */
	mrd_tel_counters a = {.acked_pkts = 100, .ce_pkts = 0};
	mrd_tel_counters b = {.acked_pkts = 102, .ce_pkts = 5};
	mrd_tel_derived x;
	mrd_tel_derive(&a, &b, 1.0, 0, &x);
	assert_true(x.ecn_fraction == 1.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deltas_and_rates),
		cmocka_unit_test(test_unknown_speed_and_idle),
		cmocka_unit_test(test_counter_starts_over),
		cmocka_unit_test(test_ecn_share_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
