#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"

static const int all_codes[] = {
#define CODE(name, val, msg) MRP_ERR_##name,
	MRP_ERRNO_MAP(CODE)
#undef CODE
};

/* Every code is negative, distinct, and has its own name and message. */
static void test_codes_distinct_and_named(void **state)
{
	(void)state;
	size_t n = sizeof(all_codes) / sizeof(all_codes[0]);

	for (size_t i = 0; i < n; i++) {
		assert_true(all_codes[i] < 0);
		assert_string_not_equal(mrp_err_name(all_codes[i]), "UNKNOWN");
		assert_string_not_equal(mrp_strerror(all_codes[i]), "unknown error");
		for (size_t j = i + 1; j < n; j++) {
			assert_int_not_equal(all_codes[i], all_codes[j]);
			assert_string_not_equal(mrp_err_name(all_codes[i]),
						mrp_err_name(all_codes[j]));
		}
	}
}

static void test_known_values(void **state)
{
	(void)state;
	assert_string_equal(mrp_err_name(MRP_ERR_TRUNCATED), "TRUNCATED");
	assert_string_equal(mrp_strerror(MRP_ERR_NOMEM), "out of memory");
	assert_string_equal(mrp_err_name(0), "OK");
	assert_string_equal(mrp_strerror(0), "success");
}

static void test_unknown_code(void **state)
{
	(void)state;
	assert_string_equal(mrp_err_name(-10000), "UNKNOWN");
	assert_string_equal(mrp_strerror(12345), "unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codes_distinct_and_named),
		cmocka_unit_test(test_known_values),
		cmocka_unit_test(test_unknown_code),
	};
	return cmocka_run_group_tests_name("proto/error", tests, NULL, NULL);
}
