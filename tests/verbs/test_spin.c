/*
 * The spin policy of the verbs library's empty ibv_poll_cq() (verbs/spin.h)
 * on made-up waits: no clock, no daemon, deterministic.
 */
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

static int failed;

#define CHECK(c, ...)                                          \
	do {                                                   \
		if (!(c)) {                                    \
			fprintf(stderr, "FAIL line %d: ", __LINE__); \
			fprintf(stderr, __VA_ARGS__);          \
			fprintf(stderr, "\n");                 \
			failed = 1;                            \
		}                                              \
	} while (0)

static const mrv_spin_cfg cfg = MRV_SPIN_CFG_DEFAULT;

/* One wait of wait_ns, as poll_cq() would report it: it spins for the
 * budget (or until the completion), sleeps after that, and while it spins
 * the thread gets share/1024 of the CPU. Returns the budget it had. */
static uint32_t one_wait(mrv_spin *s, uint64_t wait_ns, unsigned share)
{
	uint32_t b = mrv_spin_budget(s, &cfg);
	int slept = wait_ns > b;
	uint64_t wall = slept ? b : wait_ns;
	mrv_spin_done(s, &cfg, wait_ns, b, slept, wall, wall * share / 1024);
	return b;
}

/* A small deterministic generator for jittered waits. */
static uint32_t rng = 12345;
static uint32_t next(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

static void fresh_state(void)
{
	mrv_spin s;
	mrv_spin_init(&s);
	CHECK(mrv_spin_budget(&s, &cfg) == cfg.base_ns, "no waits seen: the base spin");
	/* fewer than min_waits waits: still the base, even for long waits */
	for (uint32_t i = 0; i + 1 < cfg.min_waits; i++)
		one_wait(&s, 100000, 1024);
	CHECK(mrv_spin_budget(&s, &cfg) == cfg.base_ns, "%u waits: still the base spin",
	      cfg.min_waits - 1);
	one_wait(&s, 100000, 1024);
	CHECK(mrv_spin_budget(&s, &cfg) > cfg.base_ns, "%u waits of 100 us: a longer spin",
	      cfg.min_waits);
}

/* Waits of about W (jittered +-20 %) on an idle host. Where twice the
 * longest of them fits under the maximum, the spin settles at about twice
 * W and catches nearly every completion; where even the shortest is longer
 * than the maximum spin, long spins never pay and it mostly does not spin;
 * in between, it spins within [base, max] or not at all. */
static void follows_wait(uint32_t w_ns)
{
	mrv_spin s;
	mrv_spin_init(&s);
	int caught = 0, longs = 0, n = 400;
	uint32_t b = 0;
	uint64_t lo = w_ns - w_ns / 5, hi = w_ns + w_ns / 5;
	for (int i = 0; i < n; i++) {
		uint64_t w = lo + next() % (hi - lo + 1);
		b = one_wait(&s, w, 1000);
		if (i >= 100 && w <= b)
			caught++;
		if (i >= 100 && b > cfg.base_ns)
			longs++;
		CHECK(b <= cfg.max_ns && (b == 0 || b >= cfg.base_ns),
		      "budget %u neither 0 nor in [base, max]", b);
	}
	uint64_t want = (uint64_t)w_ns * cfg.mult_x4 / 4;
	if (want < cfg.base_ns)
		want = cfg.base_ns;
	if (hi * cfg.mult_x4 / 4 <= cfg.max_ns) {
		CHECK(b >= want * 8 / 10 && b <= want * 12 / 10,
		      "waits of ~%u us: spin %u us, want ~%llu", w_ns / 1000, b / 1000,
		      (unsigned long long)want / 1000);
		CHECK(caught >= (n - 100) * 95 / 100, "waits of ~%u us: %d of %d caught spinning",
		      w_ns / 1000, caught, n - 100);
	} else if (lo > cfg.max_ns) {
		CHECK(longs <= (n - 100) / 10, "waits of ~%u us, all beyond the maximum spin: "
					       "%d of %d spins longer than the base",
		      w_ns / 1000, longs, n - 100);
	}
}

/* Waits that move from short to long and back: the spin follows. */
static void moves(void)
{
	mrv_spin s;
	mrv_spin_init(&s);
	for (int i = 0; i < 100; i++)
		one_wait(&s, 20000, 1024);
	uint32_t b20 = mrv_spin_budget(&s, &cfg);
	for (int i = 0; i < 100; i++)
		one_wait(&s, 120000, 1024);
	uint32_t b120 = mrv_spin_budget(&s, &cfg);
	for (int i = 0; i < 100; i++)
		one_wait(&s, 20000, 1024);
	uint32_t back = mrv_spin_budget(&s, &cfg);
	CHECK(b20 >= 36000 && b20 <= 44000, "20 us waits: spin %u, want ~40 us", b20);
	CHECK(b120 >= 200000 && b120 <= 260000, "120 us waits: spin %u, want ~240 us", b120);
	CHECK(back >= 36000 && back <= 44000, "back to 20 us waits: spin %u, want ~40 us", back);
}

/* One stall among regular waits does not make the spin long. */
static void outlier(void)
{
	mrv_spin s;
	mrv_spin_init(&s);
	for (int i = 0; i < 100; i++)
		one_wait(&s, 80000, 1024);
	uint32_t before = mrv_spin_budget(&s, &cfg);
	one_wait(&s, 50000000, 1024); /* 50 ms */
	uint32_t after = mrv_spin_budget(&s, &cfg);
	CHECK(after <= before + before / 2, "one 50 ms stall: spin %u -> %u", before, after);
}

/* Waits far longer than the longest spin: long spins never catch them,
 * so the policy stops spinning and tries a long one only now and then. */
static void does_not_pay(void)
{
	mrv_spin s;
	mrv_spin_init(&s);
	int longs = 0, n = 1000;
	for (int i = 0; i < n; i++) {
		uint32_t b = one_wait(&s, 2000000, 1024); /* 2 ms */
		if (i >= 100 && b > cfg.base_ns)
			longs++;
	}
	CHECK(longs > 0, "a long spin is still tried now and then");
	CHECK(mrv_spin_budget(&s, &cfg) == 0 || mrv_spin_budget(&s, &cfg) > cfg.base_ns,
	      "2 ms waits: no spin, or a long one tried");
	CHECK(longs <= (n - 100) / 10, "2 ms waits: %d of %d spins longer than the base", longs,
	      n - 100);
	/* then the waits get short again: the long spin comes back */
	int caught = 0;
	for (int i = 0; i < 400; i++) {
		uint32_t b = one_wait(&s, 150000, 1024);
		if (i >= 300 && b >= 150000)
			caught++;
	}
	CHECK(caught >= 95, "150 us waits again: %d of the last 100 spins long enough", caught);
}

/* Half the waits short, half far beyond the spin: catching half of them
 * still pays. */
static void bimodal(void)
{
	mrv_spin s;
	mrv_spin_init(&s);
	int longs = 0;
	for (int i = 0; i < 600; i++) {
		uint32_t b = one_wait(&s, i % 2 ? 5000000 : 60000, 1024);
		if (i >= 100 && b > cfg.base_ns)
			longs++;
	}
	CHECK(longs >= 450, "60 us / 5 ms waits: %d of 500 spins longer than the base", longs);
}

/* No idle core: while it spins the thread gets a few per cent of the CPU
 * (each yield gives the core away for long); it stops spinning whatever the
 * waits, but for a probe of the base spin one wait in 16, and spins long
 * again once a probe finds the CPU free. */
static void busy_host(void)
{
	mrv_spin s;
	mrv_spin_init(&s);
	for (int i = 0; i < 50; i++)
		one_wait(&s, 100000, 1024);
	CHECK(mrv_spin_budget(&s, &cfg) > cfg.base_ns, "idle host: a long spin");
	for (int i = 0; i < 50; i++)
		one_wait(&s, 100000, 400); /* our own daemons and peers take turns */
	CHECK(mrv_spin_budget(&s, &cfg) > cfg.base_ns, "40 %% of the CPU: a long spin");
	int zero = 0, probes = 0, other = 0;
	for (int i = 0; i < 160; i++) {
		/* a loaded host: the yields give the CPU away */
		uint32_t b = one_wait(&s, 100000, 40);
		if (i < 10)
			continue;
		if (b == 0)
			zero++;
		else if (b == cfg.base_ns)
			probes++;
		else
			other++;
	}
	CHECK(other == 0 && probes >= 6 && probes <= 12 && zero >= 130,
	      "4 %% of the CPU, 150 waits: %d without a spin, %d probes of the base, %d other",
	      zero, probes, other);
	uint32_t b = 0;
	for (int i = 0; i < 50; i++)
		b = one_wait(&s, 100000, 1000);
	CHECK(b > cfg.base_ns, "the CPU free again (seen by a probe): a long spin (%u)", b);
	/* a share just above the threshold keeps the long spin */
	for (int i = 0; i < 50; i++)
		b = one_wait(&s, 100000, cfg.share_min + 40);
	CHECK(b > cfg.base_ns, "share %u/1024: a long spin (%u)", cfg.share_min + 40, b);
}

/* Spins too short to measure the share, or the share not measured at
 * all, leave it alone. */
static void unmeasured_share(void)
{
	mrv_spin s;
	mrv_spin_init(&s);
	for (int i = 0; i < 50; i++)
		mrv_spin_done(&s, &cfg, 100000, cfg.base_ns, 1, 0, 0);
	CHECK(s.share == 1024, "an unmeasured spin does not lower the share (%u)", s.share);
	for (int i = 0; i < 50; i++)
		mrv_spin_done(&s, &cfg, 100000, cfg.base_ns, 1, 1000, 0);
	CHECK(s.share == 1024, "a 1 us spin does not lower the share (%u)", s.share);
}

/* A different configuration is obeyed (the environment's maximum). */
static void max_obeyed(void)
{
	mrv_spin_cfg c = cfg;
	c.max_ns = 50000;
	mrv_spin s;
	mrv_spin_init(&s);
	for (int i = 0; i < 50; i++) {
		uint32_t b = mrv_spin_budget(&s, &c);
		uint64_t wall = 40000 > b ? b : 40000;
		mrv_spin_done(&s, &c, 40000, b, 40000 > b, wall, wall);
	}
	CHECK(mrv_spin_budget(&s, &c) == 50000, "max 50 us: spin %u", mrv_spin_budget(&s, &c));
}

int main(void)
{
	fresh_state();
	for (uint32_t w = 10000; w <= 1000000; w = w * 3 / 2)
		follows_wait(w);
	moves();
	outlier();
	does_not_pay();
	bimodal();
	busy_host();
	unmeasured_share();
	max_obeyed();
	if (failed)
		return 1;
	printf("PASS\n");
	return 0;
}
