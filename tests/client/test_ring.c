/*
 * The rings of libclient/abi.h, which the library and the daemon share:
 * free-running indices across 2^32, full and empty, and a two-thread
 * producer/consumer stress of the NEED_WAKEUP handshake with a real
 * eventfd. A lost wakeup shows up as a consumer that sleeps with work
 * waiting: its poll() times out and the test fails (the producer never
 * stops publishing before the end, so no timeout is legitimate).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi.h"

/* A ring as the mapping lays it out: indices, then the entries. */
typedef struct test_ring {
	mrc_ring r;
	uint64_t e[];
} test_ring;

static test_ring *ring_new(uint32_t entries, uint32_t start)
{
	test_ring *t = aligned_alloc(MRC_CACHELINE, sizeof(test_ring) + entries * sizeof(uint64_t) +
							    MRC_CACHELINE);
	assert_non_null(t);
	memset(t, 0, sizeof(*t));
	atomic_store(&t->r.head, start);
	atomic_store(&t->r.tail, start);
	t->r.entries = entries;
	t->r.mask = entries - 1;
	return t;
}

static void test_wraparound(void **state)
{
	(void)state;
	/* Start 5 below 2^32: the indices wrap while the ring is in use. */
	uint32_t start = UINT32_MAX - 4;
	test_ring *t = ring_new(8, start);
	uint32_t tail = start, head = start;
	uint64_t next_in = 0, next_out = 0;
	for (int round = 0; round < 40; round++) {
		/* produce 1..8 entries */
		uint32_t want = (uint32_t)(round % 8) + 1;
		uint32_t room = mrc_ring_room(&t->r, tail, 8);
		assert_int_equal(room, 8 - (tail - head));
		uint32_t n = want < room ? want : room;
		for (uint32_t i = 0; i < n; i++)
			t->e[(tail + i) & t->r.mask] = next_in++;
		tail += n;
		mrc_ring_publish(&t->r, tail);
		uint32_t ready = mrc_ring_ready(&t->r, head);
		assert_int_equal(ready, tail - head);
		/* consume all but (round % 3) */
		uint32_t take = ready > (uint32_t)(round % 3) ? ready - (uint32_t)(round % 3) : 0;
		for (uint32_t i = 0; i < take; i++)
			assert_int_equal(t->e[(head + i) & t->r.mask], next_out++);
		head += take;
		mrc_ring_consume(&t->r, head);
	}
	/* We did cross 2^32. */
	assert_true(tail < start);
	assert_true(next_in > 100);
	free(t);
}

static void test_full_empty(void **state)
{
	(void)state;
	test_ring *t = ring_new(16, 0x7ffffff8u);
	uint32_t tail = 0x7ffffff8u, head = tail;
	assert_int_equal(mrc_ring_ready(&t->r, head), 0);
	assert_int_equal(mrc_ring_room(&t->r, tail, 16), 16);
	for (int i = 0; i < 16; i++) {
		assert_int_equal(mrc_ring_room(&t->r, tail, 16), 16 - i);
		t->e[tail & t->r.mask] = (uint64_t)i;
		mrc_ring_publish(&t->r, ++tail);
	}
	assert_int_equal(mrc_ring_room(&t->r, tail, 16), 0);
	assert_int_equal(mrc_ring_ready(&t->r, head), 16);
	mrc_ring_consume(&t->r, ++head);
	assert_int_equal(mrc_ring_room(&t->r, tail, 16), 1);
	head += 15;
	mrc_ring_consume(&t->r, head);
	assert_int_equal(mrc_ring_ready(&t->r, head), 0);
	assert_int_equal(mrc_ring_room(&t->r, tail, 16), 16);
	/* A consumer head beyond our tail (a hostile or broken peer): no
	 * room rather than a huge count that would overwrite live entries. */
	mrc_ring_consume(&t->r, tail + 5);
	assert_int_equal(mrc_ring_room(&t->r, tail, 16), 0);
	free(t);
}

static void test_need_wakeup_flag(void **state)
{
	(void)state;
	test_ring *t = ring_new(8, 0);
	/* Consumer about to sleep on an empty ring: flag set, nothing ready. */
	assert_int_equal(mrc_ring_prepare_sleep(&t->r, 0), 0);
	assert_true(atomic_load(&t->r.flags) & MRC_RING_NEED_WAKEUP);
	/* The producer must kick. */
	assert_true(mrc_ring_publish(&t->r, 1));
	mrc_ring_awake(&t->r);
	assert_false(atomic_load(&t->r.flags) & MRC_RING_NEED_WAKEUP);
	/* Awake consumer: no kick. */
	assert_false(mrc_ring_publish(&t->r, 2));
	/* Work already there when preparing to sleep: reported. */
	assert_int_equal(mrc_ring_prepare_sleep(&t->r, 0), 2);
	free(t);
}

/* ---- stress ---- */

#define STRESS_RING 256
/* A consumer sleep longer than this with a producer that never stops is a
 * lost wakeup. */
#define LOST_WAKEUP_MS 10000

typedef struct stress {
	test_ring *t;
	int efd;
	uint64_t count;
	uint64_t kicks, sleeps, lost, bad;
} stress;

static void *producer(void *arg)
{
	stress *s = arg;
	uint32_t tail = atomic_load(&s->t->r.tail);
	uint64_t seq = 0;
	unsigned burst = 1;
	while (seq < s->count) {
		uint32_t room = mrc_ring_room(&s->t->r, tail, STRESS_RING);
		if (room == 0) {
			sched_yield(); /* the consumer frees slots; it never sleeps while there is work */
			continue;
		}
		/* Vary the burst so the two threads meet in every phase. */
		burst = burst * 5 % 61 + 1;
		uint32_t n = room < burst ? room : burst;
		if (n > s->count - seq)
			n = (uint32_t)(s->count - seq);
		for (uint32_t i = 0; i < n; i++)
			s->t->e[(tail + i) & (STRESS_RING - 1)] = seq++;
		tail += n;
		if (mrc_ring_publish(&s->t->r, tail)) {
			uint64_t one = 1;
			if (write(s->efd, &one, sizeof(one)) != sizeof(one))
				s->bad++;
			s->kicks++;
		}
	}
	return NULL;
}

static void *consumer(void *arg)
{
	stress *s = arg;
	uint32_t head = atomic_load(&s->t->r.head);
	uint64_t expect = 0;
	while (expect < s->count) {
		uint32_t ready = mrc_ring_ready(&s->t->r, head);
		if (ready == 0) {
			/* The handshake under test. */
			if (mrc_ring_prepare_sleep(&s->t->r, head) == 0) {
				struct pollfd p = {.fd = s->efd, .events = POLLIN};
				int r;
				do
					r = poll(&p, 1, LOST_WAKEUP_MS);
				while (r < 0 && errno == EINTR);
				if (r == 0) {
					s->lost++;
					return NULL;
				}
				uint64_t v;
				if (read(s->efd, &v, sizeof(v)) != sizeof(v))
					s->bad++;
				s->sleeps++;
			}
			mrc_ring_awake(&s->t->r);
			continue;
		}
		for (uint32_t i = 0; i < ready; i++) {
			uint64_t v = s->t->e[(head + i) & (STRESS_RING - 1)];
			if (v != expect)
				s->bad++; /* lost, duplicated or out of order */
			expect = v + 1;
		}
		head += ready;
		mrc_ring_consume(&s->t->r, head);
	}
	return NULL;
}

static void test_stress_wakeup(void **state)
{
	(void)state;
	const char *env = getenv("MRC_RING_STRESS");
	stress s = {.count = env ? strtoull(env, NULL, 10) : 10000000ull};
	/* Start near the wrap so it happens under load too. */
	s.t = ring_new(STRESS_RING, UINT32_MAX - 1000);
	s.efd = eventfd(0, EFD_CLOEXEC);
	assert_true(s.efd >= 0);
	pthread_t a, b;
	assert_int_equal(pthread_create(&b, NULL, consumer, &s), 0);
	assert_int_equal(pthread_create(&a, NULL, producer, &s), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	print_message("stress: %llu entries, %llu sleeps, %llu kicks\n",
		      (unsigned long long)s.count, (unsigned long long)s.sleeps,
		      (unsigned long long)s.kicks);
	assert_int_equal(s.lost, 0);
	assert_int_equal(s.bad, 0);
	/* The handshake was exercised, not bypassed by a never-sleeping
	 * consumer. */
	assert_true(s.sleeps > 0);
	assert_int_equal(atomic_load(&s.t->r.head), atomic_load(&s.t->r.tail));
	close(s.efd);
	free(s.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_full_empty),
		cmocka_unit_test(test_need_wakeup_flag),
		cmocka_unit_test(test_stress_wakeup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
