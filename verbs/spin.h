/*
 * How long an empty ibv_poll_cq() spins before it sleeps: a policy of its
 * own, with no clock and no system call, so that it can be tested with
 * made-up waits (tests/verbs/test_spin.c).
 *
 * A wait starts at the poll that finds a CQ empty for the first time in a
 * while and ends at the poll that finds a completion. The policy keeps,
 * per CQ, a moving estimate of how long waits took, and spins up to a
 * bounded multiple of it, so that a completion that comes about as soon
 * as the last ones did is caught without a sleep and a wakeup. It spins
 * the short base spin until it has seen a few waits, and not at all (it
 * sleeps at once)
 *   - when its spins stopped paying: most waits that it spun for longer
 *     than the base ended in a sleep anyway (the completion came later
 *     than the spin); it tries a longer spin again after a while,
 *   - when the host has no idle core: while it spun, the thread got only
 *     a small part of the CPU (other runnable threads took the core at
 *     each yield, often for milliseconds: a spin then costs far more than
 *     a sleep and a wakeup); one wait in 16 spins the base to see whether
 *     the host is still busy.
 */
#ifndef MRV_SPIN_H
#define MRV_SPIN_H

#include <stdint.h>

typedef struct mrv_spin_cfg {
	uint32_t base_ns;  /* the spin of a CQ's first waits, and of a probe of a busy host */
	uint32_t max_ns;   /* never spin longer */
	uint32_t mult_x4;  /* the spin is est * mult_x4 / 4 */
	uint32_t min_waits; /* waits seen before the estimate is used */
	uint32_t share_min; /* CPU share while spinning (of 1024) under which the host is busy */
	uint32_t pay_min;   /* share of long spins that must catch their completion (of 1024) */
} mrv_spin_cfg;

/* The defaults: base 30 us, at most 400 us, twice the estimate, after 4
 * waits, a host is busy under a 1/8 CPU share, spins pay when at least 1/4
 * of them catch their completion. The share is low on any host this small:
 * a ping-pong's two programs and two daemons take turns on 2 cores (19-55 %
 * measured with them at nice -15 on a shared host); with other jobs
 * running, each yield gave the core away for ~50 us (2-4 %). */
#define MRV_SPIN_CFG_DEFAULT                                                   \
	{.base_ns = 30000, .max_ns = 400000, .mult_x4 = 8, .min_waits = 4,     \
	 .share_min = 128, .pay_min = 256}

typedef struct mrv_spin {
	uint32_t est_ns; /* moving estimate of a wait's length (0: none yet) */
	uint32_t nwaits; /* waits seen (saturates) */
	uint16_t pay;    /* moving share of long spins that caught their completion */
	uint16_t share;  /* moving share of the CPU this thread got while it spun */
	uint32_t probe;  /* waits while the host was busy */
} mrv_spin;

/* A fresh state: no estimate, spins assumed to pay, the CPU assumed free. */
void mrv_spin_init(mrv_spin *s);

/* How long the wait that starts now may spin (0: not at all). */
uint32_t mrv_spin_budget(const mrv_spin *s, const mrv_spin_cfg *c);

/* A wait ended: it lasted wait_ns until a completion was found; it spun
 * with a budget of budget_ns (from mrv_spin_budget() at its start) and
 * then slept (slept != 0) or caught the completion while spinning; while
 * it spun, spin_wall_ns passed and the thread ran for spin_cpu_ns of them
 * (spin_wall_ns 0: not measured). */
void mrv_spin_done(mrv_spin *s, const mrv_spin_cfg *c, uint64_t wait_ns, uint32_t budget_ns,
		   int slept, uint64_t spin_wall_ns, uint64_t spin_cpu_ns);

#endif
