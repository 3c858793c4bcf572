#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"
#include "ratehint.h"

#define US 1000ull
#define GBPS 1000000000ull
#define NSENDERS_MAX 64

/* Sender keys are never 0 (0 marks a free slot). */
/* What two or more contending senders share: all of the capacity while
 * no arrival says a queue stands in front of the receiver (CE) or
 * something was lost on the way (RETX); 98 % of it while one does
 * (QUEUED), so that their pacing leaves a little over to drain the queue
 * (ratehint.h). */
#define SHARED(cap) (cap)
#define QUEUED(cap) ((cap) * 98 / 100)

static uint64_t key_of(unsigned i)
{
	return 0x1000 + i;
}

/*
 * Drive n senders for [*now, end) in 1 us steps: at each step sender i
 * delivers bytes_per_us[i] bytes (none if 0) and asks for its share, as a
 * receiver does when it acknowledges. *now is left at end.
 */
static void run(mrp_rh *rh, uint32_t *cache, unsigned n, const uint32_t *bytes_per_us,
		uint64_t *now, uint64_t end)
{
	for (; *now < end; *now += US) {
		for (unsigned i = 0; i < n; i++) {
			int slot;

			if (bytes_per_us[i] == 0)
				continue;
			slot = mrp_rh_arrival(rh, &cache[i], key_of(i), bytes_per_us[i], 0, *now);
			assert_true(slot >= 0);
			assert_int_equal((uint32_t)slot, cache[i]);
			assert_true(mrp_rh_share(rh, cache[i], key_of(i), *now) > 0);
		}
	}
}

static uint64_t share_of(mrp_rh *rh, const uint32_t *cache, unsigned i, uint64_t now)
{
	return mrp_rh_share(rh, cache[i], key_of(i), now);
}

static uint64_t sum_shares(mrp_rh *rh, const uint32_t *cache, unsigned n, uint64_t now)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < n; i++)
		sum += share_of(rh, cache, i, now);
	return sum;
}

static void cache_reset(uint32_t *cache, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		cache[i] = UINT32_MAX;
}

static void test_init_invalid(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[4];
	uint32_t c = UINT32_MAX;

	(void)state;
	assert_int_equal(mrp_rh_init(NULL, slots, 4, GBPS, 0), MRP_ERR_INVAL);
	assert_int_equal(mrp_rh_init(&rh, NULL, 4, GBPS, 0), MRP_ERR_INVAL);
	assert_int_equal(mrp_rh_init(&rh, slots, 0, GBPS, 0), MRP_ERR_INVAL);
	assert_int_equal(mrp_rh_init(&rh, slots, 4, 0, 0), MRP_ERR_INVAL);
	memset(slots, 0xa5, sizeof(slots));
	assert_int_equal(mrp_rh_init(&rh, slots, 4, GBPS, 0), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(slots[i].key, 0);
	assert_int_equal(rh.epoch_ns, MRP_RH_DEFAULT_EPOCH_NS);
	assert_int_equal(rh.idle_ns, MRP_RH_DEFAULT_IDLE_NS);
	assert_int_equal(rh.headroom_pct, MRP_RH_DEFAULT_HEADROOM_PCT);
	/* key 0 means "free slot" and is refused */
	assert_int_equal(mrp_rh_arrival(&rh, &c, 0, 100, 0, 0), MRP_ERR_INVAL);
	assert_int_equal(rh.nactive, 0);
}

/* One sender gets the whole capacity, whether it uses it or not. */
static void test_single_sender_full_capacity(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[1];
	const uint32_t bpus[1] = { 125 }; /* 1 Gbit/s */
	uint64_t now = 0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100 * GBPS, 0), 0);
	cache_reset(cache, 1);
	assert_true(mrp_rh_arrival(&rh, &cache[0], key_of(0), 4096, 0, now) >= 0);
	assert_int_equal(share_of(&rh, cache, 0, now), 100 * GBPS);
	run(&rh, cache, 1, bpus, &now, 200 * US);
	assert_int_equal(slots[cache[0]].measured, 1);
	/* EWMA of 1 Gbit/s epochs after a first epoch with an extra 4 KiB */
	assert_true(slots[cache[0]].rate_bps >= 1 * GBPS);
	assert_true(slots[cache[0]].rate_bps <= 1 * GBPS + GBPS / 100);
	assert_int_equal(share_of(&rh, cache, 0, now), 100 * GBPS);
}

/* 64 senders arriving together are each told C/64 in their first ACK. */
static void test_incast_64_equal_from_first_arrival(void **state)
{
	static mrp_rh_slot slots[256];
	mrp_rh rh;
	uint32_t cache[64];
	const uint64_t cap = 100 * GBPS;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 256, cap, 0), 0);
	cache_reset(cache, 64);
	for (unsigned i = 0; i < 64; i++)
		assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4096, 0, i) >= 0);
	assert_int_equal(rh.nactive, 64);
	for (unsigned i = 0; i < 64; i++)
		assert_int_equal(share_of(&rh, cache, i, 100), SHARED(cap) / 64);
	assert_true(sum_shares(&rh, cache, 64, 100) <= cap);
}

/* Senders trickling in: each is told C/n as it arrives, and the first ones
 * drop to C/n at their next ACK; a newcomer among measured senders also
 * gets an equal share at once. */
static void test_late_joiner_gets_equal_share(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[16];
	uint32_t cache[4];
	const uint32_t bpus[3] = { 2500, 2500, 2500 }; /* 20 Gbit/s each */
	const uint64_t cap = 40 * GBPS;
	uint64_t now = 0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 16, cap, 0), 0);
	cache_reset(cache, 4);
	for (unsigned i = 0; i < 3; i++) {
		assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4096, 0, now) >= 0);
		assert_int_equal(share_of(&rh, cache, i, now), i ? SHARED(cap) / (i + 1) : cap);
	}
	assert_int_equal(share_of(&rh, cache, 0, now), SHARED(cap) / 3);
	run(&rh, cache, 3, bpus, &now, 100 * US);
	assert_true(slots[cache[0]].measured);
	assert_true(mrp_rh_arrival(&rh, &cache[3], key_of(3), 4096, 0, now) >= 0);
	assert_int_equal(share_of(&rh, cache, 3, now), SHARED(cap) / 4);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(share_of(&rh, cache, i, now), SHARED(cap) / 4);
}

/* Max-min: a sender using 10 % of its fair share keeps its demand (rate +
 * 25 % headroom); the others split the rest equally. */
static void test_max_min_light_sender(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[4];
	/* fair share 10 Gbit/s; sender 0 uses 1, the others try for 15 */
	const uint32_t bpus[4] = { 125, 1875, 1875, 1875 };
	const uint64_t cap = 40 * GBPS;
	uint64_t now = 0, s0, rest;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
	cache_reset(cache, 4);
	run(&rh, cache, 4, bpus, &now, 10 * MRP_RH_DEFAULT_EPOCH_NS);
	s0 = share_of(&rh, cache, 0, now);
	assert_int_equal(s0, 1250000000ull);
	rest = (SHARED(cap) - s0) / 3;
	for (unsigned i = 1; i < 4; i++)
		assert_int_equal(share_of(&rh, cache, i, now), rest);
	assert_true(sum_shares(&rh, cache, 4, now) <= cap);

	/* when every demand fits, the leftover is spread so all can grow */
	const uint32_t light[4] = { 125, 125, 125, 125 };
	run(&rh, cache, 4, light, &now, now + 60 * MRP_RH_DEFAULT_EPOCH_NS);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(share_of(&rh, cache, i, now), SHARED(cap) / 4);
}

/* A sender idle for idle_ns is expired; the others' shares rise. */
static void test_idle_sender_expires(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[4];
	uint32_t bpus[4] = { 1875, 1875, 1875, 1875 };
	const uint64_t cap = 40 * GBPS;
	uint64_t now = 0, before, t_stop;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
	cache_reset(cache, 4);
	run(&rh, cache, 4, bpus, &now, 100 * US);
	before = share_of(&rh, cache, 1, now);
	assert_int_equal(before, SHARED(cap) / 4);

	bpus[3] = 0; /* sender 3 goes quiet */
	t_stop = now - US;
	run(&rh, cache, 4, bpus, &now, t_stop + rh.idle_ns);
	/* not yet expired: still holds a slot */
	assert_int_equal(rh.nactive, 4);
	assert_true(share_of(&rh, cache, 3, now) > 0);
	run(&rh, cache, 4, bpus, &now, t_stop + rh.idle_ns + 2 * rh.epoch_ns);
	assert_int_equal(rh.nactive, 3);
	assert_int_equal(share_of(&rh, cache, 3, now), 0);
	assert_int_equal(slots[cache[3]].key, 0);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(share_of(&rh, cache, i, now), SHARED(cap) / 3);
	assert_true(SHARED(cap) / 3 > before);

	/* it comes back: a new sender with an equal share */
	assert_true(mrp_rh_arrival(&rh, &cache[3], key_of(3), 4096, 0, now) >= 0);
	assert_int_equal(rh.nactive, 4);
	assert_int_equal(share_of(&rh, cache, 3, now), SHARED(cap) / 4);
}

/* The scans stop at one past the highest slot in use (hi): it follows
 * senders coming and going, lower slots are taken first, and a sender
 * released at the top lets hi fall back past every free slot below it. */
static void test_slot_watermark(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[16];
	uint32_t cache[6];

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 16, 100 * GBPS, 0), 0);
	assert_int_equal(rh.hi, 0);
	cache_reset(cache, 6);
	for (unsigned i = 0; i < 6; i++)
		assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4096, 0, 0) >= 0);
	assert_int_equal(rh.hi, 6);
	assert_int_equal(rh.nactive, 6);
	/* a hole below the top: hi stays, the next sender fills the hole */
	mrp_rh_release(&rh, cache[2], key_of(2));
	assert_int_equal(rh.hi, 6);
	assert_int_equal(mrp_rh_arrival(&rh, NULL, key_of(10), 4096, 0, 0), (int)cache[2]);
	assert_int_equal(rh.hi, 6);
	/* the top and the hole below it go: hi falls past both */
	mrp_rh_release(&rh, cache[2], key_of(10));
	mrp_rh_release(&rh, cache[5], key_of(5));
	assert_int_equal(rh.hi, 5);
	mrp_rh_release(&rh, cache[4], key_of(4));
	mrp_rh_release(&rh, cache[3], key_of(3));
	assert_int_equal(rh.hi, 2);
	assert_int_equal(rh.nactive, 2);
	/* shares are divided among the two left, none of the freed above */
	assert_int_equal(share_of(&rh, cache, 0, 0), SHARED(100 * GBPS) / 2);
	assert_int_equal(share_of(&rh, cache, 1, 0), SHARED(100 * GBPS) / 2);
	/* expiry frees them too: after idle_ns, nobody is left */
	assert_int_equal(mrp_rh_share(&rh, cache[0], key_of(0), 10 * rh.idle_ns), 0);
	assert_int_equal(rh.hi, 0);
	assert_int_equal(rh.nactive, 0);
	/* and a full table still takes a new sender in a stale slot */
	for (unsigned i = 0; i < 16; i++)
		assert_true(mrp_rh_arrival(&rh, NULL, key_of(20 + i), 4096, 0, 20 * rh.idle_ns) >= 0);
	assert_int_equal(rh.hi, 16);
	assert_int_equal(mrp_rh_arrival(&rh, NULL, key_of(99), 4096, 0, 20 * rh.idle_ns),
			 MRP_ERR_FULL);
	assert_true(mrp_rh_arrival(&rh, NULL, key_of(99), 4096, 0, 40 * rh.idle_ns) >= 0);
}

/* A capacity change (plane down/up) recomputes every share at once. */
static void test_capacity_change(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[2];

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100 * GBPS, 0), 0);
	cache_reset(cache, 2);
	for (unsigned i = 0; i < 2; i++)
		assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4096, 0, 0) >= 0);
	assert_int_equal(share_of(&rh, cache, 0, 0), SHARED(100 * GBPS) / 2);
	mrp_rh_set_capacity(&rh, 50 * GBPS);
	assert_int_equal(slots[cache[0]].share_bps, SHARED(50 * GBPS) / 2);
	assert_int_equal(share_of(&rh, cache, 0, 0), SHARED(50 * GBPS) / 2);
	assert_int_equal(share_of(&rh, cache, 1, 0), SHARED(50 * GBPS) / 2);
	/* every plane down: a tiny but non-zero hint (0 would mean "none") */
	mrp_rh_set_capacity(&rh, 0);
	assert_int_equal(share_of(&rh, cache, 0, 0), 1);
	mrp_rh_set_capacity(&rh, 200 * GBPS);
	assert_int_equal(share_of(&rh, cache, 1, 0), SHARED(200 * GBPS) / 2);
}

/* All slots held by active senders: MRP_ERR_FULL; a freed or expired slot
 * is reused. */
static void test_table_full_and_reuse(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[4];
	uint32_t cache[6];

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 4, 100 * GBPS, 0), 0);
	/* no epoch ends in this test: only slot reuse can free a slot */
	rh.epoch_ns = UINT64_MAX;
	cache_reset(cache, 6);
	for (unsigned i = 0; i < 4; i++)
		assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 1000, 0, i * US) >= 0);
	assert_int_equal(mrp_rh_arrival(&rh, &cache[4], key_of(4), 1000, 0, 10 * US),
			 MRP_ERR_FULL);
	assert_int_equal(cache[4], UINT32_MAX);
	assert_int_equal(rh.nactive, 4);
	/* the sender that is refused is not counted in anyone's share */
	assert_int_equal(share_of(&rh, cache, 0, 10 * US), SHARED(100 * GBPS) / 4);

	/* senders 1..3 stay busy; sender 0 falls idle past idle_ns */
	uint64_t t = 10 * US + rh.idle_ns;
	for (unsigned i = 1; i < 4; i++)
		assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 1000, 0, t) >= 0);
	t += US;
	assert_int_equal(mrp_rh_arrival(&rh, &cache[4], key_of(4), 1000, 0, t), (int)cache[0]);
	assert_int_equal(rh.nactive, 4);
	assert_int_equal(share_of(&rh, cache, 0, t), 0); /* sender 0 lost its slot */
	assert_int_equal(mrp_rh_arrival(&rh, &cache[5], key_of(5), 1000, 0, t), MRP_ERR_FULL);
}

/* The cached index is used when valid and ignored when stale; a key never
 * holds two slots. */
static void test_slot_cache(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t c0 = UINT32_MAX, c1 = UINT32_MAX, wrong;
	int s0, s1;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100 * GBPS, 0), 0);
	s0 = mrp_rh_arrival(&rh, &c0, key_of(0), 100, 0, 0);
	s1 = mrp_rh_arrival(&rh, &c1, key_of(1), 100, 0, 0);
	assert_true(s0 >= 0 && s1 >= 0 && s0 != s1);
	assert_int_equal(c0, (uint32_t)s0);
	assert_int_equal(mrp_rh_arrival(&rh, &c0, key_of(0), 100, 0, 1), s0);
	/* a cache pointing at another sender's slot, out of range, or absent */
	wrong = c1;
	assert_int_equal(mrp_rh_arrival(&rh, &wrong, key_of(0), 100, 0, 2), s0);
	assert_int_equal(wrong, (uint32_t)s0);
	wrong = 12345;
	assert_int_equal(mrp_rh_arrival(&rh, &wrong, key_of(0), 100, 0, 3), s0);
	assert_int_equal(mrp_rh_arrival(&rh, NULL, key_of(0), 100, 0, 4), s0);
	assert_int_equal(rh.nactive, 2);
	assert_int_equal(slots[s0].epoch_bytes, 500);
	/* a share asked with the wrong key or slot is 0, not someone else's */
	assert_int_equal(mrp_rh_share(&rh, (uint32_t)s1, key_of(0), 5), 0);
	assert_int_equal(mrp_rh_share(&rh, 8, key_of(0), 5), 0);
	assert_int_equal(mrp_rh_share(&rh, (uint32_t)s0, key_of(0), 5), SHARED(100 * GBPS) / 2);
}

/* release frees the slot at once and the others get its share. */
static void test_release(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[2];
	uint32_t cache[3];

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 2, 100 * GBPS, 0), 0);
	cache_reset(cache, 3);
	for (unsigned i = 0; i < 2; i++)
		assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4096, 0, 0) >= 0);
	assert_int_equal(share_of(&rh, cache, 1, 0), SHARED(100 * GBPS) / 2);
	mrp_rh_release(&rh, cache[0], key_of(1)); /* wrong key: ignored */
	assert_int_equal(rh.nactive, 2);
	mrp_rh_release(&rh, cache[0], key_of(0));
	assert_int_equal(rh.nactive, 1);
	assert_int_equal(slots[cache[0]].key, 0);
	assert_int_equal(share_of(&rh, cache, 0, 1), 0);
	assert_int_equal(share_of(&rh, cache, 1, 1), 100 * GBPS);
	/* the freed slot takes a new sender in a full table */
	assert_int_equal(mrp_rh_arrival(&rh, &cache[2], key_of(2), 4096, 0, 2), (int)cache[0]);
	mrp_rh_release(&rh, cache[0], key_of(0)); /* stale release: ignored */
	assert_int_equal(rh.nactive, 2);
}

static double jain(const uint64_t *x, unsigned n)
{
	double s = 0, s2 = 0;

	for (unsigned i = 0; i < n; i++) {
		s += (double)x[i];
		s2 += (double)x[i] * (double)x[i];
	}
	return s2 > 0 ? s * s / (n * s2) : 0;
}

/* 64 equal senders over many epochs: Jain's fairness index >= 0.99 and
 * the shares add up to no more than the capacity. */
static void test_jain_64_equal(void **state)
{
	static mrp_rh_slot slots[128];
	mrp_rh rh;
	uint32_t cache[64], bpus[64];
	uint64_t shares[64], now = 0, sum = 0;
	const uint64_t cap = 100 * GBPS;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 128, cap, 0), 0);
	cache_reset(cache, 64);
	for (unsigned i = 0; i < 64; i++)
		bpus[i] = 250; /* 2 Gbit/s each: together above capacity */
	run(&rh, cache, 64, bpus, &now, 20 * MRP_RH_DEFAULT_EPOCH_NS);
	for (unsigned i = 0; i < 64; i++) {
		shares[i] = share_of(&rh, cache, i, now);
		sum += shares[i];
	}
	assert_true(jain(shares, 64) >= 0.99);
	assert_true(sum <= cap);
	assert_true(sum >= SHARED(cap) - 64);
}

/* 64 senders, each sending whole 4234-byte packets at its equal share
 * (staggered): within a 20 us epoch a sender delivers 0 or 1 packet, so a
 * rate sampled over one such epoch is mostly rounding. The epoch grows
 * until an equal share is several packets, and no sender's demand is
 * starved by the rounding: every share stays near the equal share. */
static void test_epoch_sized_for_many_senders(void **state)
{
	static mrp_rh_slot slots[128];
	mrp_rh rh;
	uint32_t cache[64];
	const uint64_t cap = 100 * GBPS;
	const uint32_t pkt = 4234;
	/* period of one sender: 64 packets per period fill 95 % of cap */
	const uint64_t period = (uint64_t)pkt * 8 * 64 * 1000000000ull / (cap / 100 * 95);
	uint64_t next[64], lo = UINT64_MAX;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 128, cap, 0), 0);
	cache_reset(cache, 64);
	for (unsigned i = 0; i < 64; i++)
		next[i] = period * i / 64;
	for (uint64_t now = 0; now < 3000000; now += 100) {
		for (unsigned i = 0; i < 64; i++)
			if (next[i] <= now) {
				assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), pkt, 0, now) >= 0);
				next[i] += period;
			}
		if (now < 1000000)
			continue;
		for (unsigned i = 0; i < 64; i++) {
			uint64_t sh = share_of(&rh, cache, i, now);
			lo = sh < lo ? sh : lo;
		}
	}
	assert_true(rh.epoch_ns == MRP_RH_DEFAULT_EPOCH_NS); /* the tunable is untouched */
	assert_true(lo >= SHARED(cap) / 64 * 9 / 10);
}

/* 1,024 senders, each paced at an equal share of 100 Gbit/s (a 4 KB packet
 * every 350 us, longer than idle_ns): none is expired between two of its
 * packets, so none is handed the capacity of senders that only seemed
 * gone -- every share stays within an eighth of the equal share. One that
 * stops for good is expired within a few of its packet times. */
static void test_slow_senders_stay_active(void **state)
{
	enum { N = 1024 };
	static mrp_rh_slot slots[N];
	static uint32_t cache[N];
	static uint64_t next[N];
	mrp_rh rh;
	const uint64_t cap = 100 * GBPS;
	const uint32_t pkt = 4234;
	/* N packets per period fill 95 % of cap */
	const uint64_t period = (uint64_t)pkt * 8 * N * 1000000000ull / (cap / 100 * 95);
	const uint64_t eq = SHARED(cap) / N;
	uint64_t hi = 0, lo = UINT64_MAX, now;
	uint32_t least = N;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, N, cap, 0), 0);
	assert_true(period > rh.idle_ns); /* (the case this is about) */
	cache_reset(cache, N);
	for (unsigned i = 0; i < N; i++)
		next[i] = period * i / N;
	for (now = 0; now < 6000 * US; now += US) {
		for (unsigned i = 0; i < N; i++)
			if (next[i] <= now) {
				assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), pkt, 0, now) >= 0);
				next[i] += period;
				if (now < period)
					continue; /* (not every sender has arrived yet) */
				uint64_t sh = share_of(&rh, cache, i, now);
				hi = sh > hi ? sh : hi;
				lo = sh < lo ? sh : lo;
				least = rh.nactive < least ? rh.nactive : least;
			}
	}
	assert_int_equal(least, N);
	assert_true(hi <= eq + eq / 8);
	assert_true(lo >= eq - eq / 8);

	/* sender 0 stops: gone after 4 of its packet times and an epoch */
	next[0] = UINT64_MAX;
	uint64_t t_stop = now;
	for (; now < t_stop + 4 * period + 2 * 1500 * US; now += US)
		for (unsigned i = 1; i < N; i++)
			if (next[i] <= now) {
				assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), pkt, 0, now) >= 0);
				next[i] += period;
			}
	assert_int_equal(rh.nactive, N - 1);
	assert_int_equal(share_of(&rh, cache, 0, now), 0);
}

/* CE-marked arrivals shrink what is divided (a queue before the receiver
 * is over its threshold); unmarked arrivals give it back. */
static void test_ce_shrinks_allotment(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[4];
	uint32_t cache[2] = { UINT32_MAX, UINT32_MAX };
	uint64_t now = 0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 4, 100000000000ull, 0), 0);
	/* two senders, every arrival marked, for 20 epochs */
	for (int e = 0; e < 20; e++)
		for (int k = 0; k < 10; k++, now += rh.epoch_ns / 10)
			for (int i = 0; i < 2; i++)
				assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4096, 1, now) >= 0);
	uint64_t marked = mrp_rh_share(&rh, cache[0], key_of(0), now) +
			  mrp_rh_share(&rh, cache[1], key_of(1), now);
	/* alpha near 1: an eighth off the 98 % divided, about 0.86 */
	assert_true(marked < 100000000000ull * 89 / 100);
	assert_true(marked > 100000000000ull * 83 / 100);
	/* unmarked again: the allotment returns towards the capacity */
	for (int e = 0; e < 60; e++)
		for (int k = 0; k < 10; k++, now += rh.epoch_ns / 10)
			for (int i = 0; i < 2; i++)
				assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4096, 0, now) >= 0);
	uint64_t clean = mrp_rh_share(&rh, cache[0], key_of(0), now) +
			 mrp_rh_share(&rh, cache[1], key_of(1), now);
	/* (alpha back to 0, and no queue evident: all of it but the
	 * rounding of the measured demands) */
	assert_true(clean > 100000000000ull / 10000 * 9999);
}

/* x is all of d, but for the rounding of a division among a few senders */
#define assert_all(x, d) assert_in_range((x), (d) - 8, (d))

/* Drive two senders (one if n = 1) with unmarked 4,096-byte arrivals, ten
 * per epoch each, for epochs epochs; the first arrival of sender 0 carries
 * how. Returns the sum of their shares at the end. */
static uint64_t margin_run(mrp_rh *rh, uint32_t *cache, unsigned n, unsigned how,
			   unsigned epochs, uint64_t *now)
{
	for (unsigned e = 0; e < epochs; e++)
		for (int k = 0; k < 10; k++, *now += rh->epoch_ns / 10)
			for (unsigned i = 0; i < n; i++)
				assert_true(mrp_rh_arrival(rh, &cache[i], key_of(i), 4096,
							   e == 0 && k == 0 && i == 0 ? how : 0,
							   *now) >= 0);
	return sum_shares(rh, cache, n, *now);
}

/* Senders that contend share all of the capacity while nothing says a
 * queue stands before the receiver, 98 % from the arrival of a
 * retransmission (something on the way was lost) or of a CE mark for
 * QUEUE_EPOCHS (16) epochs after the last one; a lone sender always all. */
static void test_queue_margin(void **state)
{
	const uint64_t cap = 100 * GBPS;
	mrp_rh rh;
	mrp_rh_slot slots[4];
	uint32_t cache[2];
	uint64_t now = 0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 4, cap, 0), 0);
	cache_reset(cache, 2);
	assert_all(margin_run(&rh, cache, 2, 0, 20, &now), cap);
	/* a retransmission arrives: 98 % at once (before its epoch ends) */
	assert_true(mrp_rh_arrival(&rh, &cache[1], key_of(1), 4096, MRP_RH_RETX, now) >= 0);
	assert_all(sum_shares(&rh, cache, 2, now), QUEUED(cap));
	/* 15 epochs on, the margin holds; after 17 it is gone */
	assert_all(margin_run(&rh, cache, 2, 0, 15, &now), QUEUED(cap));
	assert_all(margin_run(&rh, cache, 2, 0, 2, &now), cap);
	/* another, and the clock starts again from it */
	assert_all(margin_run(&rh, cache, 2, MRP_RH_RETX, 10, &now), QUEUED(cap));
	assert_all(margin_run(&rh, cache, 2, 0, 10, &now), cap);
	/* one CE mark: the margin (alpha decays to 0 within 17 epochs too) */
	assert_true(margin_run(&rh, cache, 2, MRP_RH_CE, 1, &now) <= QUEUED(cap));
	assert_all(margin_run(&rh, cache, 2, 0, 20, &now), cap);

	/* alone: no margin, retransmission or not */
	assert_int_equal(mrp_rh_init(&rh, slots, 4, cap, 0), 0);
	cache_reset(cache, 1);
	now = 0;
	assert_int_equal(margin_run(&rh, cache, 1, MRP_RH_RETX, 2, &now), cap);
}

/*
 * A closed loop: each sender i is paced by its own share, as a sender that
 * honours the hint is, and delivers pct[i] % of it (a sender held back by a
 * stall, a loss or a busy host delivers less than it is allowed), in 1,000-
 * byte packets; how[i] is the MRP_RH_* mask its packets carry. Runs for
 * [*now, end) in 1 us steps.
 */
static void run_paced(mrp_rh *rh, uint32_t *cache, unsigned n, const unsigned *pct,
		      const unsigned *how, uint64_t *now, uint64_t end)
{
	static uint64_t credit[NSENDERS_MAX]; /* bit-nanoseconds owed, per sender */

	memset(credit, 0, sizeof(credit));
	for (; *now < end; *now += US) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t share = cache[i] == UINT32_MAX ? 0 :
					 mrp_rh_share(rh, cache[i], key_of(i), *now);

			if (cache[i] == UINT32_MAX || share == 0) {
				/* first packet: unknown share yet */
				assert_true(mrp_rh_arrival(rh, &cache[i], key_of(i), 1000,
							   how[i], *now) >= 0);
				continue;
			}
			credit[i] += share * pct[i] / 100 * US / 1000; /* bits this us, x1000 */
			while (credit[i] >= 8000ull * 1000000) {
				credit[i] -= 8000ull * 1000000;
				assert_true(mrp_rh_arrival(rh, &cache[i], key_of(i), 1000,
							   how[i], *now) >= 0);
			}
		}
	}
}

/* The ratchet a demand estimate falls into: a sender that delivers 40 % of
 * whatever it is allowed. Marking its packets HELD, it keeps an equal share
 * for as long as it is held back. Without the flag (an old peer) it is read
 * as wanting 40 % plus headroom, then 40 % of that: the fallback (half the
 * water level) cannot tell, and it sinks to the floor -- which is why the
 * flag exists. */
static void test_held_sender_keeps_its_share(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[4];
	const unsigned pct[4] = { 40, 100, 100, 100 };
	const unsigned signals[4] = { MRP_RH_SIGNALS | MRP_RH_HELD, MRP_RH_SIGNALS | MRP_RH_HELD,
				      MRP_RH_SIGNALS | MRP_RH_HELD, MRP_RH_SIGNALS | MRP_RH_HELD };
	const unsigned silent[4] = { 0, 0, 0, 0 };
	const uint64_t cap = 40 * GBPS;
	uint64_t now = 0, s0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
	cache_reset(cache, 4);
	run_paced(&rh, cache, 4, pct, signals, &now, 100 * MRP_RH_DEFAULT_EPOCH_NS);
	s0 = share_of(&rh, cache, 0, now);
	assert_int_equal(s0, SHARED(cap) / 4);
	for (unsigned i = 1; i < 4; i++)
		assert_int_equal(share_of(&rh, cache, i, now), SHARED(cap) / 4);

	assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
	cache_reset(cache, 4);
	now = 0;
	run_paced(&rh, cache, 4, pct, silent, &now, 100 * MRP_RH_DEFAULT_EPOCH_NS);
	s0 = share_of(&rh, cache, 0, now);
	assert_true(s0 < SHARED(cap) / 4 / 8);
	assert_true(sum_shares(&rh, cache, 4, now) <= cap);
}

/* A sender that signals, was held back, and then sends nothing for a few
 * epochs (stalled waiting for a retransmission, or its host did not run
 * it) keeps its share through the stall; one that says it is not held back
 * (its window or its own link limits it) gives what it leaves to the others. */
static void test_held_verdict_survives_a_stall(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[4];
	const unsigned full[4] = { 100, 100, 100, 100 };
	const unsigned stall[4] = { 0, 100, 100, 100 };
	const unsigned light[4] = { 10, 100, 100, 100 };
	const unsigned held = MRP_RH_SIGNALS | MRP_RH_HELD;
	const unsigned how[4] = { held, held, held, held };
	const unsigned free_how[4] = { MRP_RH_SIGNALS, held, held, held };
	const uint64_t cap = 40 * GBPS;
	uint64_t now = 0, s0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
	cache_reset(cache, 4);
	run_paced(&rh, cache, 4, full, how, &now, 20 * MRP_RH_DEFAULT_EPOCH_NS);
	/* a stall of 8 epochs, shorter than idle_ns */
	assert_true(8 * MRP_RH_DEFAULT_EPOCH_NS < MRP_RH_DEFAULT_IDLE_NS);
	run_paced(&rh, cache, 4, stall, how, &now, now + 8 * MRP_RH_DEFAULT_EPOCH_NS);
	assert_int_equal(slots[cache[0]].held, 1);
	assert_int_equal(share_of(&rh, cache, 0, now), SHARED(cap) / 4);

	/* not held back: 10 % of its share is its demand */
	run_paced(&rh, cache, 4, light, free_how, &now, now + 100 * MRP_RH_DEFAULT_EPOCH_NS);
	assert_int_equal(slots[cache[0]].held, 0);
	s0 = share_of(&rh, cache, 0, now);
	assert_true(s0 < SHARED(cap) / 4 / 4);
	for (unsigned i = 1; i < 4; i++)
		assert_int_equal(share_of(&rh, cache, i, now), (SHARED(cap) - s0) / 3);
}

/* The fallback for a sender that does not signal: a rate of at least half
 * the water level counts as held back (level), below it as demand. */
static void test_fallback_half_level(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[4];
	const uint64_t cap = 40 * GBPS; /* level 9.8 Gbit/s */
	/* 6 Gbit/s: above half the level; 3 Gbit/s: below */
	const uint32_t above[4] = { 750, 1875, 1875, 1875 };
	const uint32_t below[4] = { 375, 1875, 1875, 1875 };
	uint64_t now = 0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
	cache_reset(cache, 4);
	run(&rh, cache, 4, above, &now, 20 * MRP_RH_DEFAULT_EPOCH_NS);
	assert_int_equal(share_of(&rh, cache, 0, now), SHARED(cap) / 4);
	run(&rh, cache, 4, below, &now, now + 20 * MRP_RH_DEFAULT_EPOCH_NS);
	assert_true(share_of(&rh, cache, 0, now) <= 3 * GBPS * 125 / 100 + GBPS / 100);
}

/*
 * First-round-trip admission (SPEC 6.6): a credit of min(budget /
 * connections, what is free, what the sender wants) in whole packets, 0
 * below one packet; the sum out never exceeds the budget; data sent on
 * admission returns its credit, and what is left returns adm_ttl_ns after
 * the last grant.
 */
static void test_admit_budget(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	const uint32_t pkt = 4168;
	const uint64_t B = 1000000;
	uint64_t credit, out = 0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100 * GBPS, 0), 0);
	/* no budget: nothing, not even for the only connection */
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 0), 0);
	rh.adm_budget = B;
	/* the only connection: the whole budget (adm_conns 0 counts as 1),
	 * and all of it held (a lone credit of a quarter of it or more) */
	credit = mrp_rh_admit(&rh, pkt, UINT64_MAX, 0);
	assert_int_equal(credit, B / pkt * pkt);
	assert_int_equal(rh.adm_out, B);
	/* a second in its first round trip: what is left, less than a packet */
	rh.adm_conns = 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 1 * US), 0);
	/* data sent on admission arrives: its room is free again */
	mrp_rh_admit_return(&rh, 10ull * pkt);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 2 * US), 10ull * pkt);
	assert_true(rh.adm_out <= B);
	/* what is left returns adm_ttl_ns after the last grant, not before */
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 2 * US + rh.adm_ttl_ns - 1), 0);
	rh.adm_conns = 100;
	credit = mrp_rh_admit(&rh, pkt, UINT64_MAX, 2 * US + 2 * rh.adm_ttl_ns);
	assert_int_equal(credit, (B / 100) / pkt * pkt); /* the fair part */
	/* a sender that wants less gets what it wants, in whole packets */
	credit = mrp_rh_admit(&rh, pkt, pkt + 1, 3 * US + 2 * rh.adm_ttl_ns);
	assert_int_equal(credit, 2ull * pkt);
	/* a fair part below one packet: 0 */
	rh.adm_conns = 1000;
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 4 * US + 2 * rh.adm_ttl_ns), 0);
	/* the sum out never exceeds the budget, whatever the order */
	rh.adm_out = 0;
	for (uint32_t n = 1; n <= 64; n++) {
		rh.adm_conns = n;
		out += mrp_rh_admit(&rh, pkt, UINT64_MAX, 5 * US + 2 * rh.adm_ttl_ns);
		assert_true(rh.adm_out <= B);
	}
	assert_true(out <= B);
	assert_true(out >= B - pkt); /* and all of it is given out */
	mrp_rh_admit_return(&rh, 2 * B); /* more than is out: floor 0 */
	assert_int_equal(rh.adm_out, 0);
	/* arguments */
	assert_int_equal(mrp_rh_admit(NULL, pkt, UINT64_MAX, 0), 0);
	assert_int_equal(mrp_rh_admit(&rh, 0, UINT64_MAX, 0), 0);
	mrp_rh_admit_return(NULL, 1);
}

/* A fresh allocator (8 slots, 100 Gbit/s) with an admission budget and one
 * connection, credit taken back after adm_rtt_ns if that is longer than
 * adm_ttl_ns. */
static void lone_setup(mrp_rh *rh, mrp_rh_slot *slots, uint64_t budget, uint64_t rtt_ns)
{
	assert_int_equal(mrp_rh_init(rh, slots, 8, 100 * GBPS, 0), 0);
	rh->adm_budget = budget;
	rh->adm_conns = 1;
	rh->adm_rtt_ns = rtt_ns;
}

/* lone_setup() with budget B, a lone credit of just over a quarter of it
 * (packets of pkt bytes) taken at 0: it holds the whole budget, and a second
 * connection asking at 1 us gets nothing. */
static void lone_holding(mrp_rh *rh, mrp_rh_slot *slots, uint32_t pkt, uint64_t B)
{
	const uint64_t quarter = B / 4 / pkt * pkt + pkt;

	lone_setup(rh, slots, B, 0);
	assert_int_equal(mrp_rh_admit(rh, pkt, quarter, 0), quarter);
	assert_int_equal(rh->adm_out, B);
	rh->adm_conns = 2;
	assert_int_equal(mrp_rh_admit(rh, pkt, UINT64_MAX, 1 * US), 0);
}

/*
 * A lone credit of a quarter of the budget or more holds all of it, so that a
 * connection arriving during its line-rate round trip asks for a grant
 * instead of queueing a credit behind it; its data returns its part as it
 * arrives. A smaller lone credit holds only itself. And credit still out
 * is taken back adm_rtt_ns after the last grant when that is longer than
 * adm_ttl_ns (the data of a credit at a long round trip has not arrived
 * 200 us after the grant), not before.
 */
static void test_admit_lone_holds(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	const uint32_t pkt = 4168;
	const uint64_t B = 64000000, quarter = B / 4 / pkt * pkt + pkt;

	(void)state;
	/* a lone credit of just over a quarter: the whole budget is out */
	lone_holding(&rh, slots, pkt, B);
	/* its data arrives: that part is free again */
	mrp_rh_admit_return(&rh, 100ull * pkt);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 2 * US), 100ull * pkt);
	/* all of its data has arrived: its run is over, and the budget it
	 * held is free at once, not at the credit's time (a collective's
	 * next step found it held for a millisecond) */
	lone_holding(&rh, slots, pkt, B);
	mrp_rh_admit_return(&rh, quarter - pkt);
	assert_int_equal(rh.adm_out, B - quarter + pkt);
	assert_int_equal(rh.adm_credits, 1);
	mrp_rh_admit_return(&rh, pkt);
	assert_int_equal(rh.adm_out, 0);
	assert_int_equal(rh.adm_credits, 0);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 3 * US), B / 2 / pkt * pkt);
	/* a lone credit of more than a quarter whose run at the capacity is
	 * shorter than an epoch (32 packets, 10.7 us at 100 Gbit/s) holds
	 * only itself: another credit's data would wait behind it less than
	 * a grant's round trip */
	const uint64_t Bs = 400000, run32 = 32ull * pkt;
	lone_setup(&rh, slots, Bs, 0);
	assert_true(run32 >= Bs / 4 && run32 * 8 < rh.epoch_ns * 100);
	assert_int_equal(mrp_rh_admit(&rh, pkt, run32, 0), run32);
	assert_int_equal(rh.adm_out, run32);
	rh.adm_conns = 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 1 * US), Bs / 2 / pkt * pkt);
	/* at 10 Gbit/s the same credit is a 107 us run: it holds */
	lone_setup(&rh, slots, Bs, 0);
	mrp_rh_set_capacity(&rh, 10 * GBPS);
	assert_int_equal(mrp_rh_admit(&rh, pkt, run32, 0), run32);
	assert_int_equal(rh.adm_out, Bs);
	/* and a credit given beside a smaller lone one is not taken back
	 * with it: no hold, the credits return each its own */
	lone_setup(&rh, slots, B, 0);
	assert_int_equal(mrp_rh_admit(&rh, pkt, 10ull * pkt, 0), 10ull * pkt);
	rh.adm_conns = 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, 20ull * pkt, 1 * US), 20ull * pkt);
	mrp_rh_admit_return(&rh, 10ull * pkt);
	assert_int_equal(rh.adm_out, 20ull * pkt);
	/* a lone credit below a quarter: only itself is out */
	lone_setup(&rh, slots, B, 0);
	uint64_t small = quarter - 2ull * pkt;
	assert_int_equal(mrp_rh_admit(&rh, pkt, small, 0), small);
	assert_int_equal(rh.adm_out, small);
	rh.adm_conns = 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 1 * US), B / 2 / pkt * pkt);
	/* adm_rtt_ns: not taken back at adm_ttl_ns, but at adm_rtt_ns */
	lone_setup(&rh, slots, B, 12000 * US);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 0), B / pkt * pkt);
	rh.adm_conns = 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 2 * rh.adm_ttl_ns), 0);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, rh.adm_rtt_ns - 1), 0);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, rh.adm_rtt_ns), B / 2 / pkt * pkt);
	/* an adm_rtt_ns shorter than adm_ttl_ns changes nothing */
	lone_setup(&rh, slots, B, 1 * US);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 0), B / pkt * pkt);
	rh.adm_conns = 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, rh.adm_ttl_ns - 1), 0);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, rh.adm_ttl_ns), B / 2 / pkt * pkt);
}

/*
 * mrp_rh_admit_end() (SPEC 6.7): the sender of the one credit out now sends
 * without GRANT; what is left of its credit returns at once. Not when
 * another credit is out beside it, nor when the only credit out was given
 * after the ended connection's credit data began to arrive (it is
 * another's).
 */
static void test_admit_end(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	const uint32_t pkt = 4168;
	const uint64_t B = 64000000;

	(void)state;
	/* a lone credit holding the budget; 10 of its packets arrive */
	lone_holding(&rh, slots, pkt, B);
	mrp_rh_admit_return(&rh, 10ull * pkt);
	mrp_rh_admit_end(&rh, 2 * US);
	assert_int_equal(rh.adm_out, 0);
	assert_int_equal(rh.adm_credits, 0);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 3 * US), B / 2 / pkt * pkt);
	/* two credits out: neither is taken back */
	lone_setup(&rh, slots, B, 0);
	rh.adm_conns = 4;
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 0), B / 4 / pkt * pkt);
	assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 1 * US), B / 4 / pkt * pkt);
	mrp_rh_admit_end(&rh, 2 * US);
	assert_int_equal(rh.adm_out, 2 * (B / 4 / pkt * pkt));
	/* the only credit out was given after the ended connection's data
	 * arrived: it is another connection's, and stays out */
	lone_setup(&rh, slots, B, 0);
	assert_int_equal(mrp_rh_admit(&rh, pkt, 10ull * pkt, 5 * US), 10ull * pkt);
	mrp_rh_admit_end(&rh, 4 * US);
	assert_int_equal(rh.adm_out, 10ull * pkt);
	mrp_rh_admit_end(&rh, 5 * US); /* (the same time: it is the ended one's) */
	assert_int_equal(rh.adm_out, 0);
	/* nothing out: nothing happens */
	mrp_rh_admit_end(&rh, 6 * US);
	assert_int_equal(rh.adm_out, 0);
	mrp_rh_admit_end(NULL, 0);
}

/*
 * A budget over several queues (adm_queues > 1: the receiver's planes):
 * the only connection still gets all of it (it spreads its own packets
 * over the planes), but credits that several connections hold together
 * take at most half of it, in any order of arrival. Over one queue, the
 * whole budget, as in test_admit_budget.
 */
static void test_admit_several_queues(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	const uint32_t pkt = 4168;
	const uint64_t B = 2000000;

	(void)state;
	for (uint32_t queues = 1; queues <= 8; queues *= 2) {
		uint64_t out = 0, limit = queues > 1 ? B / 2 : B;
		assert_int_equal(mrp_rh_init(&rh, slots, 8, 200 * GBPS, 0), 0);
		rh.adm_budget = B;
		rh.adm_queues = queues;
		/* the only one: the whole budget */
		rh.adm_conns = 1;
		assert_int_equal(mrp_rh_admit(&rh, pkt, UINT64_MAX, 0), B / pkt * pkt);
		rh.adm_out = 0;
		/* 1,024 arriving one after another, each wanting 32 packets */
		for (uint32_t n = 1; n <= 1024; n++) {
			rh.adm_conns = n;
			out += mrp_rh_admit(&rh, pkt, 32ull * pkt, 1 * US);
			assert_true(rh.adm_out <= limit);
		}
		assert_true(out <= limit);
		assert_true(out >= limit - pkt); /* and all of that is given out */
	}
}

/*
 * A lone connection (adm_conns <= 1, no credit out) may be given more than
 * the budget, up to adm_lone_bytes and what it wants, in whole packets; it
 * counts as out in full, so a second connection in its first round trip
 * gets no credit (it asks for a grant). With adm_lone_bytes 0, or a second
 * connection counted, or credit out, the budget rules as before.
 */
static void test_admit_lone(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	const uint32_t pkt = 4168;
	const uint64_t B = 1000000, want = 50ull * B;
	uint64_t credit;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100 * GBPS, 0), 0);
	rh.adm_budget = B;
	rh.adm_lone_bytes = UINT64_MAX;
	/* what it wants, beyond the budget, in whole packets */
	credit = mrp_rh_admit(&rh, pkt, want, 0);
	assert_int_equal(credit, (want + pkt - 1) / pkt * pkt);
	assert_int_equal(rh.adm_out, credit);
	/* a second one meanwhile: nothing is free */
	rh.adm_conns = 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, want, 1 * US), 0);
	/* once that credit is back: two connections, the budget's half */
	credit = mrp_rh_admit(&rh, pkt, want, 1 * US + rh.adm_ttl_ns);
	assert_int_equal(credit, (B / 2) / pkt * pkt);
	/* alone again but credit out: the budget bounds it */
	rh.adm_conns = 1;
	credit = mrp_rh_admit(&rh, pkt, want, 2 * US + rh.adm_ttl_ns);
	assert_int_equal(credit, (B - (B / 2) / pkt * pkt) / pkt * pkt);
	/* bounded by adm_lone_bytes, never below the budget's credit */
	rh.adm_out = 0;
	rh.adm_lone_bytes = 3 * B;
	assert_int_equal(mrp_rh_admit(&rh, pkt, want, 3 * US + rh.adm_ttl_ns), 3 * B / pkt * pkt);
	rh.adm_out = 0;
	rh.adm_lone_bytes = B / 2;
	assert_int_equal(mrp_rh_admit(&rh, pkt, want, 4 * US + rh.adm_ttl_ns), B / pkt * pkt);
	/* a sender that wants less than the budget: what it wants */
	rh.adm_out = 0;
	rh.adm_lone_bytes = UINT64_MAX;
	assert_int_equal(mrp_rh_admit(&rh, pkt, 3ull * pkt, 5 * US + rh.adm_ttl_ns), 3ull * pkt);
	/* the receiver cannot know what it wants: no overflow */
	rh.adm_out = 0;
	credit = mrp_rh_admit(&rh, pkt, UINT64_MAX, 6 * US + rh.adm_ttl_ns);
	assert_int_equal(credit, UINT64_MAX / pkt * pkt);
	assert_int_equal(rh.adm_out, credit);
	/* no budget: still nothing (the receiver gives no credit at all) */
	rh.adm_out = 0;
	rh.adm_budget = 0;
	assert_int_equal(mrp_rh_admit(&rh, pkt, want, 7 * US + rh.adm_ttl_ns), 0);
}

/* A request's grant is the requester's share, but no more than the
 * capacity over the receiver's connections: requests that arrive together
 * must not get C, C/2, C/3 ... before the later ones are counted. */
static void test_grant_fair_part(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[300];
	uint32_t cache[256];
	uint64_t sum = 0;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 300, 100 * GBPS, 0), 0);
	rh.adm_conns = 256;
	for (unsigned i = 0; i < 256; i++) {
		cache[i] = UINT32_MAX;
		uint64_t g = mrp_rh_grant(&rh, &cache[i], key_of(i), 1 * US + i);
		assert_true(g > 0);
		assert_true(g <= 100 * GBPS / 256);
		/* once two are counted: a part of the 98 % the shares divide */
		if (i > 0)
			assert_true(g <= SHARED(100 * GBPS) / 256);
		sum += g;
	}
	assert_true(sum <= SHARED(100 * GBPS) + 100 * GBPS / 256);
	assert_int_equal(rh.nactive, 256);
	/* with no connection count the share alone decides */
	rh.adm_conns = 0;
	assert_int_equal(mrp_rh_grant(&rh, &cache[0], key_of(0), 2 * US),
			 mrp_rh_share(&rh, cache[0], key_of(0), 2 * US));
	assert_int_equal(mrp_rh_grant(&rh, NULL, 0, 3 * US), 0); /* key 0 */
}

/*
 * A granted sender's data comes a round trip after the grant: until it
 * arrives (at most the wait given) the slot stays active and unmeasured,
 * so the sender already running is told half the capacity from the grant
 * on, not the whole of it again once idle_ns has passed. Once its data has come, the granted
 * sender idles out as any other; past the wait it expires; with no wait it
 * expires after idle_ns as before.
 */
static void test_grant_waits_for_data(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[2];
	uint32_t bpus[2] = { 12500, 0 }; /* sender 0 at 100 Gbit/s */
	const uint64_t cap = 100 * GBPS, wait = 30000 * US;
	uint64_t now = 0;

	(void)state;
	for (int with_wait = 0; with_wait <= 1; with_wait++) {
		assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
		rh.wait_ns = with_wait ? wait : 0;
		cache_reset(cache, 2);
		now = 0;
		run(&rh, cache, 2, bpus, &now, 1000 * US);
		assert_int_equal(share_of(&rh, cache, 0, now), cap);
		uint64_t g = mrp_rh_grant(&rh, &cache[1], key_of(1), now);
		assert_int_equal(g, SHARED(cap) / 2);
		/* its data is 10 ms away */
		run(&rh, cache, 2, bpus, &now, 10000 * US);
		if (!with_wait) {
			/* expired while it was silent: the other has it all */
			assert_int_equal(rh.nactive, 1);
			assert_int_equal(share_of(&rh, cache, 0, now), cap);
			continue;
		}
		assert_int_equal(rh.nactive, 2);
		assert_int_equal(share_of(&rh, cache, 0, now), SHARED(cap) / 2);
		/* not measured while silent: not a demand of 0, the level */
		assert_int_equal(share_of(&rh, cache, 1, now), SHARED(cap) / 2);
		assert_int_equal(slots[cache[1]].measured, 0);
		/* its data arrives: measured from then on, shares unchanged */
		bpus[1] = 6125;
		bpus[0] = 6125;
		run(&rh, cache, 2, bpus, &now, 10200 * US);
		assert_int_equal(slots[cache[1]].waiting, 0);
		assert_int_equal(slots[cache[1]].measured, 1);
		assert_int_equal(share_of(&rh, cache, 1, now), SHARED(cap) / 2);
		/* then silent: it idles out after idle_ns as any sender */
		bpus[1] = 0;
		bpus[0] = 12500;
		run(&rh, cache, 2, bpus, &now, 10200 * US + rh.idle_ns + 2 * rh.epoch_ns);
		assert_int_equal(rh.nactive, 1);
		assert_int_equal(share_of(&rh, cache, 0, now), cap);
		/* a grant whose data never comes is let go after the wait */
		g = mrp_rh_grant(&rh, &cache[1], key_of(1), now);
		assert_true(g > 0);
		uint64_t t_grant = now;
		run(&rh, cache, 2, bpus, &now, t_grant + wait - 100 * US);
		assert_int_equal(rh.nactive, 2);
		run(&rh, cache, 2, bpus, &now, t_grant + wait + 2 * rh.epoch_ns);
		assert_int_equal(rh.nactive, 1);
		assert_int_equal(share_of(&rh, cache, 0, now), cap);
		bpus[1] = 0;
	}
}

/*
 * The same after a first round trip sent on admission credit: the
 * newcomer's credit packets (MRP_RH_CREDIT: GRANT, more to come) arrive,
 * then nothing until its data on its first hint, a round trip later. It
 * stays counted and unmeasured meanwhile: neither its credit's line rate
 * nor its silence is a demand. Before, it expired 200 us into the silence
 * and the running sender was told the whole capacity. A credit packet
 * without MRP_RH_CREDIT (the sender's last, ACK_REQ) does not make it wait.
 */
static void test_credit_waits_for_data(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[2];
	uint32_t bpus[2] = { 12500, 0 };
	const uint64_t cap = 100 * GBPS;
	uint64_t now = 0;

	(void)state;
	for (int last = 0; last <= 1; last++) {
		assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
		rh.wait_ns = 30000 * US;
		cache_reset(cache, 2);
		now = 0;
		run(&rh, cache, 2, bpus, &now, 1000 * US);
		/* 1 ms of credit at the line rate from sender 1, sender 0 going on */
		for (; now < 2000 * US; now += US) {
			assert_true(mrp_rh_arrival(&rh, &cache[0], key_of(0), 6250, 0, now) >= 0);
			assert_true(mrp_rh_arrival(&rh, &cache[1], key_of(1), 6250,
						   last ? 0 : MRP_RH_CREDIT, now) >= 0);
		}
		/* then silent for 8 ms */
		run(&rh, cache, 2, bpus, &now, 10000 * US);
		if (last) {
			assert_int_equal(rh.nactive, 1);
			assert_int_equal(share_of(&rh, cache, 0, now), cap);
			continue;
		}
		assert_int_equal(rh.nactive, 2);
		assert_int_equal(slots[cache[1]].measured, 0);
		assert_int_equal(share_of(&rh, cache, 0, now), SHARED(cap) / 2);
		assert_int_equal(share_of(&rh, cache, 1, now), SHARED(cap) / 2);
		/* its data on its first hint: waiting ends, measured from then */
		assert_true(mrp_rh_arrival(&rh, &cache[1], key_of(1), 6125, 0, now) >= 0);
		assert_int_equal(slots[cache[1]].waiting, 0);
		bpus[1] = 6125;
		run(&rh, cache, 2, bpus, &now, 10200 * US);
		assert_int_equal(slots[cache[1]].measured, 1);
		bpus[1] = 0;
	}
}

/*
 * A credit packet with ACK_REQ (MRP_RH_DRY: the sender's last for now,
 * everything it had came on its credit) makes its sender measured at a
 * demand of 0 at once, not an unknown demand with an equal share until an
 * epoch has measured it. Short messages from senders new to the receiver,
 * one every few microseconds, otherwise kept a bulk sender's share cut to
 * a fraction (a 64 MB flow beside 62 senders of a 4 KB message every 200
 * us ran at 0.70 of RoCEv2's rate). A sender that then sends more than
 * its share, held back, is an unknown demand again from its next epoch.
 */
static void test_dry_credit_measured(void **state)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[3];
	uint32_t bpus[3] = { 12500, 0, 0 };
	const uint64_t cap = 100 * GBPS;
	uint64_t now = 0;

	(void)state;
	for (int dry = 0; dry <= 1; dry++) {
		assert_int_equal(mrp_rh_init(&rh, slots, 8, cap, 0), 0);
		cache_reset(cache, 3);
		now = 0;
		run(&rh, cache, 3, bpus, &now, 200 * US);
		assert_int_equal(share_of(&rh, cache, 0, now), cap);
		/* two senders' one-packet messages, each on its credit */
		for (unsigned i = 1; i <= 2; i++)
			assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), 4168,
						   dry ? MRP_RH_DRY : 0, now) >= 0);
		uint64_t bulk = share_of(&rh, cache, 0, now);
		if (!dry) {
			/* unknown demands: three equal shares */
			assert_int_equal(bulk, SHARED(cap) / 3);
			continue;
		}
		assert_int_equal(slots[cache[1]].measured, 1);
		assert_int_equal(slots[cache[1]].rate_bps, 0);
		/* the bulk sender keeps all but the light ones' floors */
		assert_true(bulk >= SHARED(cap) * 9 / 10);
		assert_true(bulk < cap);
		/* sender 1 comes back with more than its share, held back:
		 * from its next epoch an unknown demand, an equal share */
		bpus[1] = 6250;
		for (uint64_t end = now + 100 * US; now < end; now += US)
			for (unsigned i = 0; i < 2; i++)
				assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), bpus[i],
							   MRP_RH_SIGNALS | (i ? MRP_RH_HELD : 0),
							   now) >= 0);
		assert_int_equal(slots[cache[1]].held, 1);
		assert_true(share_of(&rh, cache, 1, now) >= SHARED(cap) / 3);
		bpus[1] = 0;
	}
}

/*
 * Credit out over several queues (adm_queues > 1, a receiver's planes):
 * while credits of two or more connections are out, the division is less
 * by out / (2 x budget), shrinking with the credit's age, so that the
 * queues the credit filled drain; once credit stops returning (the rest
 * unused) the division is whole again. Over one queue nothing changes.
 */
static uint64_t drain_sum(unsigned queues, uint64_t t_check, int returning)
{
	mrp_rh rh;
	mrp_rh_slot slots[8];
	uint32_t cache[4];
	const uint32_t pkt = 4168;
	const uint64_t B = 800000;

	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100 * GBPS, 0), 0);
	rh.adm_budget = B;
	rh.adm_queues = queues;
	cache_reset(cache, 4);
	rh.adm_conns = 4;
	for (unsigned i = 0; i < 4; i++)
		assert_true(mrp_rh_admit(&rh, pkt, 50ull * pkt, 0) > 0);
	for (uint64_t t = 1 * US; t <= t_check; t += 1 * US)
		for (unsigned i = 0; i < 4; i++) {
			assert_true(mrp_rh_arrival(&rh, &cache[i], key_of(i), pkt, 0, t) >= 0);
			if (returning || t <= 2 * US)
				mrp_rh_admit_return(&rh, pkt / 4);
		}
	return sum_shares(&rh, cache, 4, t_check);
}

static void test_admit_drain_several_queues(void **state)
{
	const uint64_t cap = 100 * GBPS;

	(void)state;
	/* one queue: the division as without credit */
	assert_int_equal(drain_sum(1, 5 * US, 1), SHARED(cap));
	/* two: the credits' half of the 800 KB budget (four credits of
	 * 23 packets) is out at 5 us, so about a quarter less */
	uint64_t early = drain_sum(2, 5 * US, 1);
	assert_true(early < SHARED(cap) * 8 / 10);
	assert_true(early > SHARED(cap) * 7 / 10);
	/* less cut as the credit ages and returns */
	assert_true(drain_sum(2, 100 * US, 1) > early);
	/* credit that stopped returning went unused: no cut */
	assert_int_equal(drain_sum(2, 120 * US, 0), SHARED(cap));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ce_shrinks_allotment),
		cmocka_unit_test(test_queue_margin),
		cmocka_unit_test(test_epoch_sized_for_many_senders),
		cmocka_unit_test(test_slow_senders_stay_active),
		cmocka_unit_test(test_init_invalid),
		cmocka_unit_test(test_single_sender_full_capacity),
		cmocka_unit_test(test_incast_64_equal_from_first_arrival),
		cmocka_unit_test(test_late_joiner_gets_equal_share),
		cmocka_unit_test(test_max_min_light_sender),
		cmocka_unit_test(test_idle_sender_expires),
		cmocka_unit_test(test_capacity_change),
		cmocka_unit_test(test_table_full_and_reuse),
		cmocka_unit_test(test_slot_cache),
		cmocka_unit_test(test_release),
		cmocka_unit_test(test_jain_64_equal),
		cmocka_unit_test(test_held_sender_keeps_its_share),
		cmocka_unit_test(test_held_verdict_survives_a_stall),
		cmocka_unit_test(test_fallback_half_level),
		cmocka_unit_test(test_admit_budget),
		cmocka_unit_test(test_admit_lone),
		cmocka_unit_test(test_admit_lone_holds),
		cmocka_unit_test(test_admit_end),
		cmocka_unit_test(test_admit_several_queues),
		cmocka_unit_test(test_grant_fair_part),
		cmocka_unit_test(test_grant_waits_for_data),
		cmocka_unit_test(test_credit_waits_for_data),
		cmocka_unit_test(test_dry_credit_measured),
		cmocka_unit_test(test_admit_drain_several_queues),
		cmocka_unit_test(test_slot_watermark),
	};
	return cmocka_run_group_tests_name("proto/ratehint", tests, NULL, NULL);
}
