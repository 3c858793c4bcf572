/* Quantities of a scenario: rates, times, sizes, probabilities. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"
#include "units.h"

static void test_rate(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(sim_parse_rate("100Gbps", &v), 0);
	assert_true(v == 100000000000ull);
	assert_int_equal(sim_parse_rate("25Gbit/s", &v), 0);
	assert_true(v == 25000000000ull);
	assert_int_equal(sim_parse_rate("1.5Tbps", &v), 0);
	assert_true(v == 1500000000000ull);
	assert_int_equal(sim_parse_rate("800Mbps", &v), 0);
	assert_true(v == 800000000ull);
	assert_int_equal(sim_parse_rate("10kbps", &v), 0);
	assert_true(v == 10000);
	assert_int_equal(sim_parse_rate("1000", &v), 0);
	assert_true(v == 1000);
	assert_int_equal(sim_parse_rate("100 Gbps", &v), 0);
	assert_true(v == 100000000000ull);
	assert_int_equal(sim_parse_rate("abc", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_rate("100GB", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_rate("-1Gbps", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_rate("", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_rate("1e30Tbps", &v), MRP_ERR_RANGE);
}

static void test_time(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(sim_parse_time("1us", &v), 0);
	assert_true(v == 1000);
	assert_int_equal(sim_parse_time("2.5ms", &v), 0);
	assert_true(v == 2500000);
	assert_int_equal(sim_parse_time("1s", &v), 0);
	assert_true(v == 1000000000);
	assert_int_equal(sim_parse_time("300ns", &v), 0);
	assert_true(v == 300);
	assert_int_equal(sim_parse_time("0", &v), 0);
	assert_true(v == 0);
	assert_int_equal(sim_parse_time("5", &v), MRP_ERR_INVAL); /* no unit */
	assert_int_equal(sim_parse_time("5 minutes", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_time("us", &v), MRP_ERR_INVAL);
}

static void test_bytes(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(sim_parse_bytes("4096", &v), 0);
	assert_true(v == 4096);
	assert_int_equal(sim_parse_bytes("64KB", &v), 0);
	assert_true(v == 64000);
	assert_int_equal(sim_parse_bytes("1MB", &v), 0);
	assert_true(v == 1000000);
	assert_int_equal(sim_parse_bytes("1.5MB", &v), 0);
	assert_true(v == 1500000);
	assert_int_equal(sim_parse_bytes("64KiB", &v), 0);
	assert_true(v == 65536);
	assert_int_equal(sim_parse_bytes("1MiB", &v), 0);
	assert_true(v == 1048576);
	assert_int_equal(sim_parse_bytes("2GiB", &v), 0);
	assert_true(v == 2147483648ull);
	assert_int_equal(sim_parse_bytes("100B", &v), 0);
	assert_true(v == 100);
	assert_int_equal(sim_parse_bytes("1Mb", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_bytes("lots", &v), MRP_ERR_INVAL);
}

static void test_u64_and_prob(void **state)
{
	uint64_t v;
	double p;

	(void)state;
	assert_int_equal(sim_parse_u64("18446744073709551615", &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(sim_parse_u64("18446744073709551616", &v), MRP_ERR_RANGE);
	assert_int_equal(sim_parse_u64("12x", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_u64("-1", &v), MRP_ERR_INVAL);
	assert_int_equal(sim_parse_u64("", &v), MRP_ERR_INVAL);

	assert_int_equal(sim_parse_prob("0.01", &p), 0);
	assert_true(p == 0.01);
	assert_int_equal(sim_parse_prob("1%", &p), 0);
	assert_true(p == 0.01);
	assert_int_equal(sim_parse_prob("0", &p), 0);
	assert_true(p == 0);
	assert_int_equal(sim_parse_prob("1", &p), 0);
	assert_int_equal(sim_parse_prob("1.5", &p), MRP_ERR_RANGE);
	assert_int_equal(sim_parse_prob("150%", &p), MRP_ERR_RANGE);
	assert_int_equal(sim_parse_prob("often", &p), MRP_ERR_INVAL);
}

static void test_format(void **state)
{
	char b[32];

	(void)state;
	sim_fmt_rate(b, sizeof(b), 93.91e9);
	assert_string_equal(b, "93.91 Gbps");
	sim_fmt_time(b, sizeof(b), 85230);
	assert_string_equal(b, "85.23 us");
	sim_fmt_time(b, sizeof(b), 12);
	assert_string_equal(b, "12.00 ns");
	sim_fmt_bytes(b, sizeof(b), 1050000);
	assert_string_equal(b, "1.05 MB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_time),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_u64_and_prob),
		cmocka_unit_test(test_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
