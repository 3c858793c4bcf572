#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sack.h"

/* In-order arrival: no gaps, the map is a run of ones below next_psn. */
static void test_in_order(void **state)
{
	(void)state;
	mrp_rxwin w;
	mrp_rxwin_init(&w, 3);
	int gap;
	for (uint32_t psn = 0; psn < 300; psn++) {
		assert_int_equal(mrp_rxwin_record(&w, psn, &gap), MRP_RXWIN_NEW);
		assert_int_equal(gap, 0);
	}
	assert_int_equal(w.next_psn, 300);
	mrp_ack a;
	memset(&a, 0, sizeof(a));
	mrp_rxwin_to_ack(&w, &a);
	assert_int_equal(a.next_psn, 300);
	assert_int_equal(a.acked_path_gen, 3);
	for (unsigned i = 0; i < MRP_SACK_BITS; i++)
		assert_int_equal(mrp_ack_bit(&a, i), 1);
}

/* A skipped PSN is a gap; it stays a clear bit as the window slides, and
 * falls off after 256 newer PSNs. */
static void test_gap_reported_then_forgotten(void **state)
{
	(void)state;
	mrp_rxwin w;
	mrp_rxwin_init(&w, 0);
	int gap;
	for (uint32_t psn = 0; psn < 10; psn++)
		mrp_rxwin_record(&w, psn, &gap);
	assert_int_equal(mrp_rxwin_record(&w, 11, &gap), MRP_RXWIN_NEW); /* 10 lost */
	assert_int_equal(gap, 1);
	mrp_ack a;
	mrp_rxwin_to_ack(&w, &a);
	assert_int_equal(a.next_psn, 12);
	assert_int_equal(mrp_ack_bit(&a, 0), 1); /* 11 */
	assert_int_equal(mrp_ack_bit(&a, 1), 0); /* 10 */
	assert_int_equal(mrp_ack_bit(&a, 2), 1); /* 9 */
	assert_int_equal(mrp_ack_bit(&a, 11), 1); /* 0 */
	assert_int_equal(mrp_ack_bit(&a, 12), 0); /* before 0: nothing */
	for (uint32_t psn = 12; psn < 12 + 254; psn++)
		mrp_rxwin_record(&w, psn, &gap);
	assert_false(mrp_rxwin_has(&w, 10));
	assert_true(mrp_rxwin_has(&w, 11));
	mrp_rxwin_record(&w, 266, &gap); /* 10 is now 256 below the top: gone */
	assert_int_equal(mrp_rxwin_record(&w, 10, &gap), MRP_RXWIN_OLD);
}

/* Duplicates are recognised; a late arrival fills its hole. */
static void test_dup_and_fill(void **state)
{
	(void)state;
	mrp_rxwin w;
	mrp_rxwin_init(&w, 0);
	int gap;
	mrp_rxwin_record(&w, 0, &gap);
	mrp_rxwin_record(&w, 2, &gap);
	assert_int_equal(mrp_rxwin_record(&w, 2, &gap), MRP_RXWIN_DUP);
	assert_int_equal(mrp_rxwin_record(&w, 1, &gap), MRP_RXWIN_NEW);
	assert_int_equal(gap, 1);
	assert_true(mrp_rxwin_has(&w, 1));
	assert_int_equal(w.next_psn, 3);
}

/* Jumps across word boundaries and beyond the window shift correctly. */
static void test_shift_across_words(void **state)
{
	(void)state;
	for (uint32_t jump = 1; jump < 300; jump++) {
		mrp_rxwin w;
		mrp_rxwin_init(&w, 0);
		int gap;
		for (uint32_t psn = 0; psn < 100; psn++)
			mrp_rxwin_record(&w, psn, &gap);
		mrp_rxwin_record(&w, 99 + jump, &gap);
		for (uint32_t psn = 0; psn <= 99 + jump; psn++) {
			int want = psn == 99 + jump || (psn < 100 && 99 + jump - psn < MRP_SACK_BITS);
			assert_int_equal(mrp_rxwin_has(&w, psn), want);
		}
	}
}

/* PSN arithmetic wraps at 2^32. */
static void test_wrap(void **state)
{
	(void)state;
	mrp_rxwin w;
	mrp_rxwin_init(&w, 0);
	int gap;
	mrp_rxwin_record(&w, 0xfffffffeu, &gap);
	assert_int_equal(gap, 1); /* did not start at 0 */
	assert_int_equal(mrp_rxwin_record(&w, 0xffffffffu, &gap), MRP_RXWIN_NEW);
	assert_int_equal(mrp_rxwin_record(&w, 0, &gap), MRP_RXWIN_NEW);
	assert_int_equal(gap, 0);
	assert_int_equal(w.next_psn, 1);
	assert_true(mrp_rxwin_has(&w, 0xfffffffeu));
	assert_int_equal(mrp_rxwin_record(&w, 0xffffffffu, &gap), MRP_RXWIN_DUP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order),
		cmocka_unit_test(test_gap_reported_then_forgotten),
		cmocka_unit_test(test_dup_and_fill),
		cmocka_unit_test(test_shift_across_words),
		cmocka_unit_test(test_wrap),
	};
	return cmocka_run_group_tests_name("proto/sack", tests, NULL, NULL);
}
