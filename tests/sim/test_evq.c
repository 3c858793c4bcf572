/* The event queue: order by time, then by insertion; no event lost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "evq.h"
#include "rng.h"

static void test_empty(void **state)
{
	sim_evq q;
	sim_ev ev;

	(void)state;
	assert_int_equal(sim_evq_init(&q, 0), 0);
	assert_int_equal(sim_evq_pop(&q, &ev), 0);
	assert_true(sim_evq_peek_time(&q) == UINT64_MAX);
	sim_evq_free(&q);
}

/* Equal times come out in insertion order. */
static void test_time_then_insertion(void **state)
{
	static const struct {
		uint64_t t;
		uint32_t tag;
	} in[] = {{5, 0}, {1, 1}, {5, 2}, {1, 3}, {3, 4}, {5, 5}, {0, 6}, {3, 7}};
	static const uint32_t want[] = {6, 1, 3, 4, 7, 0, 2, 5};
	sim_evq q;
	sim_ev ev;

	(void)state;
	assert_int_equal(sim_evq_init(&q, 0), 0);
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		assert_int_equal(sim_evq_push(&q, in[i].t, 0, in[i].tag, NULL), 0);
	assert_int_equal(sim_evq_len(&q), 8);
	assert_int_equal(sim_evq_peek_time(&q), 0);
	for (size_t i = 0; i < 8; i++) {
		assert_int_equal(sim_evq_pop(&q, &ev), 1);
		assert_int_equal(ev.arg, want[i]);
	}
	assert_int_equal(sim_evq_pop(&q, &ev), 0);
	sim_evq_free(&q);
}

/* 10^5 random events (many equal times, growing past the initial array)
 * come out sorted by (time, insertion), each exactly once. */
static void test_random_sorted(void **state)
{
	enum { N = 100000 };
	sim_evq q;
	sim_ev ev;
	sim_rng r;
	uint8_t *seen = calloc(N, 1);
	uint64_t prev_t = 0, prev_seq = 0;

	(void)state;
	assert_non_null(seen);
	sim_rng_seed(&r, 42, 0);
	assert_int_equal(sim_evq_init(&q, 16), 0);
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(sim_evq_push(&q, sim_rng_below(&r, 5000), 1, i, NULL), 0);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(sim_evq_pop(&q, &ev), 1);
		assert_true(ev.t > prev_t || (ev.t == prev_t && (i == 0 || ev.seq > prev_seq)));
		/* insertion sequence numbers equal the tags here */
		assert_int_equal(ev.seq, ev.arg);
		assert_false(seen[ev.arg]);
		seen[ev.arg] = 1;
		prev_t = ev.t;
		prev_seq = ev.seq;
	}
	assert_int_equal(sim_evq_len(&q), 0);
	free(seen);
	sim_evq_free(&q);
}

/* Interleaved pushes and pops, as in a simulation: never earlier than the
 * last popped time, always the minimum of what is queued. */
static void test_interleaved(void **state)
{
	sim_evq q;
	sim_ev ev;
	sim_rng r;
	uint64_t now = 0, pushed = 0, popped = 0;

	(void)state;
	sim_rng_seed(&r, 7, 0);
	assert_int_equal(sim_evq_init(&q, 0), 0);
	for (int i = 0; i < 64; i++, pushed++)
		assert_int_equal(sim_evq_push(&q, sim_rng_below(&r, 100), 0, 0, NULL), 0);
	while (sim_evq_pop(&q, &ev)) {
		assert_true(ev.t >= now);
		now = ev.t;
		popped++;
		if (pushed < 50000) {
			unsigned k = (unsigned)sim_rng_below(&r, 3);

			for (unsigned j = 0; j < k; j++, pushed++)
				assert_int_equal(sim_evq_push(&q, now + sim_rng_below(&r, 100), 0, 0, NULL), 0);
		}
	}
	assert_int_equal(pushed, popped);
	sim_evq_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_time_then_insertion),
		cmocka_unit_test(test_random_sorted),
		cmocka_unit_test(test_interleaved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
