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

/* Against a plain model (one flag per PSN, a byte array) over a long random
 * run: mostly the next PSN, sometimes a jump ahead, a late arrival inside
 * the window or a duplicate. Every answer, gap flag and bit agrees. */
static void test_random_vs_model(void **state)
{
	(void)state;
	enum { N = 20000 };
	static uint8_t got[N + 600];
	memset(got, 0, sizeof(got));
	mrp_rxwin w;
	mrp_rxwin_init(&w, 1);
	uint64_t r = 0x2545f4914f6cdd1dull;
	uint32_t hi = 0; /* highest PSN recorded + 1 (model) */
	int any = 0;
	while (hi < N) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		unsigned k = (unsigned)(r % 100);
		uint32_t psn;
		if (!any || k < 80)
			psn = hi;                           /* the next one */
		else if (k < 88)
			psn = hi + 1 + (uint32_t)(r >> 32) % 300; /* a jump */
		else
			psn = hi - 1 - (uint32_t)((r >> 32) % (hi < 300 ? hi : 300)); /* old */
		int gap;
		int rv = mrp_rxwin_record(&w, psn, &gap);
		int want, want_gap;
		if (!any) {
			want = MRP_RXWIN_NEW;
			want_gap = psn != 0;
		} else if (psn >= hi) {
			want = MRP_RXWIN_NEW;
			want_gap = psn > hi;
		} else if (hi - 1 - psn >= MRP_SACK_BITS) {
			want = MRP_RXWIN_OLD;
			want_gap = 0;
		} else if (got[psn]) {
			want = MRP_RXWIN_DUP;
			want_gap = 0;
		} else {
			want = MRP_RXWIN_NEW;
			want_gap = 1;
		}
		assert_int_equal(rv, want);
		assert_int_equal(gap, want_gap);
		if (want == MRP_RXWIN_NEW) {
			got[psn] = 1;
			if (psn >= hi)
				hi = psn + 1;
		}
		any = 1;
		assert_int_equal(w.next_psn, hi);
		mrp_ack a;
		memset(&a, 0, sizeof(a));
		mrp_rxwin_to_ack(&w, &a);
		for (unsigned i = 0; i < MRP_SACK_BITS && i < hi; i++)
			assert_int_equal(mrp_ack_bit(&a, i), got[hi - 1 - i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order),
		cmocka_unit_test(test_gap_reported_then_forgotten),
		cmocka_unit_test(test_dup_and_fill),
		cmocka_unit_test(test_shift_across_words),
		cmocka_unit_test(test_wrap),
		cmocka_unit_test(test_random_vs_model),
	};
	return cmocka_run_group_tests_name("proto/sack", tests, NULL, NULL);
}
