/* The spin policy of an empty ibv_poll_cq() (spin.h). */
#include "spin.h"

/* A wait longer than this is no guide to spinning: samples are clipped. */
#define MRV_SPIN_SAMPLE_MAX_NS 10000000u
/* A spin too short to say how much CPU the thread got. */
#define MRV_SPIN_SHARE_MIN_WALL_NS 5000u
/* While long spins do not pay, the share they are credited per wait (of
 * 1024): a longer spin is tried again after some waits. */
#define MRV_SPIN_PAY_RECOVER 2
/* While the host is busy, one wait in this many spins the base, to see
 * whether it still is. */
#define MRV_SPIN_PROBE_EVERY 16

void mrv_spin_init(mrv_spin *s)
{
	s->est_ns = 0;
	s->nwaits = 0;
	s->pay = 1024;
	s->share = 1024;
	s->probe = 0;
}

uint32_t mrv_spin_budget(const mrv_spin *s, const mrv_spin_cfg *c)
{
	if (s->nwaits < c->min_waits)
		return c->base_ns;
	if (s->share < c->share_min) /* busy: sleep at once, but probe now and then */
		return s->probe % MRV_SPIN_PROBE_EVERY == MRV_SPIN_PROBE_EVERY - 1 ? c->base_ns : 0;
	if (s->pay < c->pay_min)
		return 0;
	uint64_t b = (uint64_t)s->est_ns * c->mult_x4 / 4;
	if (b > c->max_ns)
		b = c->max_ns;
	return b > c->base_ns ? (uint32_t)b : c->base_ns;
}

void mrv_spin_done(mrv_spin *s, const mrv_spin_cfg *c, uint64_t wait_ns, uint32_t budget_ns,
		   int slept, uint64_t spin_wall_ns, uint64_t spin_cpu_ns)
{
	/* The estimate: a moving average (1/8) of waits, each clipped to 4x
	 * the estimate so that one stall does not make every later spin long. */
	uint64_t x = wait_ns < MRV_SPIN_SAMPLE_MAX_NS ? wait_ns : MRV_SPIN_SAMPLE_MAX_NS;
	if (s->nwaits == 0 || s->est_ns == 0) {
		s->est_ns = (uint32_t)x;
	} else {
		uint64_t hi = (uint64_t)s->est_ns * 4;
		if (x > hi)
			x = hi;
		int64_t d = (int64_t)x - (int64_t)s->est_ns;
		s->est_ns = (uint32_t)((int64_t)s->est_ns + d / 8);
	}
	if (s->nwaits < UINT32_MAX)
		s->nwaits++;

	/* Did a spin longer than the base pay? A miss costs a quarter of the
	 * score, a catch wins a quarter of what is missing. */
	if (s->share < c->share_min)
		s->probe++;
	if (budget_ns > c->base_ns) {
		if (slept)
			s->pay = (uint16_t)(s->pay - s->pay / 4);
		else
			s->pay = (uint16_t)(s->pay + (1024 - s->pay) / 4);
	} else if (s->pay < c->pay_min) {
		s->pay = (uint16_t)(s->pay + MRV_SPIN_PAY_RECOVER);
	}

	/* The CPU this thread got while it spun (moving average, 1/4). */
	if (spin_wall_ns >= MRV_SPIN_SHARE_MIN_WALL_NS) {
		uint64_t sh = spin_cpu_ns >= spin_wall_ns ? 1024 : spin_cpu_ns * 1024 / spin_wall_ns;
		int32_t d = (int32_t)sh - (int32_t)s->share;
		s->share = (uint16_t)((int32_t)s->share + d / 4);
	}
}
