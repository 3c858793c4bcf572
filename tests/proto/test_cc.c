#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cc.h"
#include "error.h"

#define MTU 1500u
#define US 1000ull
#define RTT (10 * US)
#define MAXPATHS 16

/* A connection under test: its CC state and paths, QWND kept = sum of
 * cwnd after every event as the engine does. */
struct tconn {
	mrp_cc_conn cc;
	mrp_cc_path p[MAXPATHS];
	unsigned n;
};

static void resum(struct tconn *t)
{
	t->cc.qwnd = 0;
	for (unsigned i = 0; i < t->n; i++)
		t->cc.qwnd += t->p[i].cwnd;
}

static void tc_init_params(struct tconn *t, const char *algo, unsigned npaths,
			   uint64_t srtt_ns, const mrp_cc_params *params)
{
	memset(t, 0, sizeof(*t));
	assert_int_equal(mrp_cc_conn_init(&t->cc, algo, params), 0);
	t->n = npaths;
	for (unsigned i = 0; i < npaths; i++) {
		t->p[i].srtt_ns = srtt_ns;
		t->cc.ops->path_init(&t->cc, &t->p[i], 0);
		resum(t);
	}
}

/* The behaviour tests below start every path at 16 packets so that cuts
 * and growth are easy to read; the default (4) is checked on its own. */
static void tc_init(struct tconn *t, const char *algo, unsigned npaths, uint64_t srtt_ns)
{
	mrp_cc_params params;

	mrp_cc_params_default(&params, MTU);
	params.init_cwnd_pkts = 16;
	tc_init_params(t, algo, npaths, srtt_ns, &params);
}

static void ack(struct tconn *t, unsigned i, uint64_t acked, uint64_t marked, uint64_t now)
{
	t->cc.ops->on_ack(&t->cc, &t->p[i], acked, marked, now);
	resum(t);
}

static void loss(struct tconn *t, unsigned i, uint32_t n, uint64_t now)
{
	t->cc.ops->on_loss(&t->cc, &t->p[i], n, now);
	resum(t);
}

/* Defaults are what cc.h documents and are accepted by both algorithms. */
static void test_defaults_valid(void **state)
{
	mrp_cc_params p;
	mrp_cc_conn cc;

	(void)state;
	mrp_cc_params_default(&p, MTU);
	assert_int_equal(p.mtu, MTU);
	assert_int_equal(p.init_cwnd_pkts, 4);
	assert_int_equal(p.min_cwnd_pkts, 1);
	assert_int_equal(p.max_cwnd_pkts, 256);
	assert_int_equal(p.loss_cut_count, 3);
	assert_int_equal(p.ai_pkts_per_rtt, 1);
	assert_int_equal(p.alpha_gain_shift, 4);
	assert_int_equal(p.line_rate_bps, 0);
	assert_int_equal(mrp_cc_conn_init(&cc, "baseline", &p), 0);
	assert_ptr_equal(cc.ops, mrp_cc_find("baseline"));
	assert_int_equal(cc.pacing_bps, 0); /* nothing known: no pacing limit */
	assert_int_equal(cc.rate_hint_bps, 0);
	assert_int_equal(mrp_cc_conn_init(&cc, "fixed", &p), 0);
	assert_ptr_equal(cc.ops, mrp_cc_find("fixed"));
	/* the bounds themselves are valid */
	p.mtu = MRP_CC_MTU_MIN;
	assert_int_equal(mrp_cc_conn_init(&cc, "baseline", &p), 0);
	p.mtu = MRP_CC_MTU_MAX;
	p.min_cwnd_pkts = p.init_cwnd_pkts = p.max_cwnd_pkts = 256;
	assert_int_equal(mrp_cc_conn_init(&cc, "baseline", &p), 0);
}

/* Each out-of-range parameter is refused with MRP_ERR_INVAL. */
static void test_invalid_params(void **state)
{
	mrp_cc_params good, p;
	mrp_cc_conn cc;

	(void)state;
	mrp_cc_params_default(&good, MTU);
#define BAD(field, value)                                                       \
	do {                                                                    \
		p = good;                                                       \
		p.field = (value);                                              \
		assert_int_equal(mrp_cc_conn_init(&cc, "baseline", &p), MRP_ERR_INVAL); \
	} while (0)
	BAD(mtu, 255);
	BAD(mtu, MRP_CC_MTU_MAX + 1);
	BAD(mtu, 0);
	BAD(min_cwnd_pkts, 0);
	BAD(min_cwnd_pkts, 5);       /* > init */
	BAD(init_cwnd_pkts, 257);    /* > max */
	BAD(max_cwnd_pkts, 2);       /* < init */
	BAD(loss_cut_count, 0);
	BAD(ai_pkts_per_rtt, 0);
	BAD(alpha_gain_shift, 17);
#undef BAD
	p = good;
	p.init_cwnd_pkts = 257;
	p.max_cwnd_pkts = 257; /* beyond the SACK span */
	assert_int_equal(mrp_cc_conn_init(&cc, "baseline", &p), MRP_ERR_INVAL);
	assert_int_equal(mrp_cc_conn_init(NULL, "baseline", &good), MRP_ERR_INVAL);
	assert_int_equal(mrp_cc_conn_init(&cc, NULL, &good), MRP_ERR_INVAL);
	assert_int_equal(mrp_cc_conn_init(&cc, "baseline", NULL), MRP_ERR_INVAL);
}

static void test_unknown_name(void **state)
{
	mrp_cc_params p;
	mrp_cc_conn cc;

	(void)state;
	mrp_cc_params_default(&p, MTU);
	assert_int_equal(mrp_cc_conn_init(&cc, "cubic", &p), MRP_ERR_NOENT);
	assert_int_equal(mrp_cc_conn_init(&cc, "", &p), MRP_ERR_NOENT);
	assert_int_equal(mrp_cc_conn_init(&cc, "Baseline", &p), MRP_ERR_NOENT);
	assert_null(mrp_cc_find("cubic"));
	assert_null(mrp_cc_find(NULL));
}

/* The listing shows both algorithms, each complete and findable by name. */
static void test_registry(void **state)
{
	int seen_baseline = 0, seen_fixed = 0;
	unsigned i;

	(void)state;
	for (i = 0; mrp_cc_get(i); i++) {
		const mrp_cc_ops *o = mrp_cc_get(i);

		assert_non_null(o->name);
		assert_ptr_equal(mrp_cc_find(o->name), o);
		assert_non_null(o->path_init);
		assert_non_null(o->on_ack);
		assert_non_null(o->on_loss);
		assert_non_null(o->on_rate_hint);
		assert_non_null(o->on_rto);
		seen_baseline += strcmp(o->name, "baseline") == 0;
		seen_fixed += strcmp(o->name, "fixed") == 0;
	}
	assert_int_equal(i, 2);
	assert_int_equal(seen_baseline, 1);
	assert_int_equal(seen_fixed, 1);
	assert_null(mrp_cc_get(2));
	assert_null(mrp_cc_get(UINT32_MAX));
}

/* A new path starts at init_cwnd; a mark on one path cuts it, and only it. */
static void test_mark_cuts_only_marked_path(void **state)
{
	struct tconn t;
	uint64_t c0, c1;

	(void)state;
	tc_init(&t, "baseline", 2, RTT);
	c0 = t.p[0].cwnd;
	c1 = t.p[1].cwnd;
	assert_int_equal(c0, 16 * MTU);
	assert_int_equal(t.cc.qwnd, 32 * MTU);
	ack(&t, 0, MTU, MTU, 1 * US);
	ack(&t, 1, MTU, 0, 1 * US);
	assert_true(t.p[0].cwnd < c0);
	/* a fully marked ACK ends slow start with a halving */
	assert_int_equal(t.p[0].cwnd, c0 / 2);
	assert_true(t.p[1].cwnd >= c1);
	/* the scheduler sees the clean path has more room */
	assert_true(mrp_cc_path_room(&t.cc, &t.p[1], 0) >
		    mrp_cc_path_room(&t.cc, &t.p[0], 0));
}

/* Marks within one RTT of a cut do not cut again; after an RTT they do. */
static void test_one_cut_per_rtt(void **state)
{
	struct tconn t;
	uint64_t c1, c2;

	(void)state;
	tc_init(&t, "baseline", 1, RTT);
	ack(&t, 0, MTU, MTU, 1 * US);
	c1 = t.p[0].cwnd;
	assert_true(c1 < 16 * MTU);
	ack(&t, 0, MTU, MTU, 6 * US);
	ack(&t, 0, MTU, MTU, 10 * US); /* 9 us after the cut: still same RTT */
	assert_int_equal(t.p[0].cwnd, c1);
	ack(&t, 0, MTU, MTU, 11 * US);
	c2 = t.p[0].cwnd;
	assert_true(c2 < c1);
	/* DCTCP-gentle in congestion avoidance: not another halving */
	assert_true(c2 > c1 / 2);
	ack(&t, 0, MTU, MTU, 15 * US);
	assert_int_equal(t.p[0].cwnd, c2);
	ack(&t, 0, MTU, MTU, 21 * US);
	assert_true(t.p[0].cwnd < c2);
}

/* Fewer than loss_cut_count losses per RTT never cut. */
static void test_isolated_losses_do_not_cut(void **state)
{
	struct tconn t;
	uint64_t now = 0;

	(void)state;
	tc_init(&t, "baseline", 1, RTT);
	for (int i = 0; i < 1000; i++) {
		now += 6 * US; /* at most 2 per 10 us RTT */
		loss(&t, 0, 1, now);
		assert_int_equal(t.p[0].cwnd, 16 * MTU);
	}
	now += 100 * US;
	loss(&t, 0, 2, now); /* two in one report, still below 3 */
	assert_int_equal(t.p[0].cwnd, 16 * MTU);
}

/* loss_cut_count losses within an RTT halve the window, once per RTT. */
static void test_loss_burst_halves_once(void **state)
{
	struct tconn t;
	uint64_t now = 100 * US;

	(void)state;
	tc_init(&t, "baseline", 2, RTT);
	loss(&t, 0, 1, now);
	loss(&t, 0, 1, now + 1 * US);
	assert_int_equal(t.p[0].cwnd, 16 * MTU);
	loss(&t, 0, 1, now + 2 * US);
	assert_int_equal(t.p[0].cwnd, 8 * MTU);
	assert_int_equal(t.p[1].cwnd, 16 * MTU); /* other path untouched */
	/* three more within the same RTT: no second cut */
	loss(&t, 0, 3, now + 5 * US);
	assert_int_equal(t.p[0].cwnd, 8 * MTU);
	/* a new RTT with another burst: halves again */
	loss(&t, 0, 3, now + 13 * US);
	assert_int_equal(t.p[0].cwnd, 4 * MTU);
}

/* A trickle of random loss is not congestion: loss_cut_count losses within
 * an RTT do not cut when they are a small share of what the path delivered
 * in it; the same losses with little delivered do. */
static void test_loss_trickle_no_cut(void **state)
{
	struct tconn t;
	uint64_t now = 100 * US;

	(void)state;
	tc_init(&t, "baseline", 1, RTT);
	uint64_t before = t.p[0].cwnd;
	for (int i = 0; i < 30; i++)
		ack(&t, 0, MTU, 0, now + (uint64_t)i * 100);
	uint64_t grown = t.p[0].cwnd;
	assert_true(grown >= before);
	loss(&t, 0, 1, now + 3100);
	loss(&t, 0, 1, now + 3200);
	loss(&t, 0, 1, now + 3300); /* 3 of 33: 9 % */
	assert_int_equal(t.p[0].cwnd, grown);
	/* next RTT: 3 losses and only 2 delivered is congestion */
	now += 20 * US;
	ack(&t, 0, MTU, 0, now);
	ack(&t, 0, MTU, 0, now + 100);
	uint64_t w = t.p[0].cwnd;
	loss(&t, 0, 3, now + 200);
	assert_int_equal(t.p[0].cwnd, w / 2);
}

/* Losses of a connection far short of the receiver's hint (cc.far_short,
 * the engine's measure) are a bottleneck's, the engine's to count per plane
 * (mrp_cc_queue_loss()); the baseline's on_loss leaves them alone and
 * mrp_cc_path_cut() halves a path for them. Otherwise the same 3 losses of
 * 33 packets are random loss, the share rule's, and do not cut -- however
 * far the smoothed RTT stands above the smallest (host delay does that in
 * a daemon). */
static void test_queue_losses_cut(void **state)
{
	static const struct {
		uint64_t min_rtt_ns;
		uint8_t far_short;
	} cases[] = {
		{ 5 * US, 0 },  /* srtt 40 us = 8 x min: not a bottleneck's */
		{ 40 * US, 0 }, /* no queue */
		{ 40 * US, 1 }, /* no queue seen, far short of the hint */
		{ 5 * US, 1 },
	};
	(void)state;
	assert_int_equal(mrp_cc_find("baseline")->plane_cuts, 1);
	assert_int_equal(mrp_cc_find("fixed")->plane_cuts, 0);
	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct tconn t;
		mrp_cc_params params;
		uint64_t now = 100 * US;

		mrp_cc_params_default(&params, MTU);
		params.init_cwnd_pkts = 16;
		tc_init_params(&t, "baseline", 1, 40 * US, &params);
		t.p[0].min_rtt_ns = cases[k].min_rtt_ns;
		t.cc.far_short = cases[k].far_short;
		assert_int_equal(mrp_cc_queue_loss(&t.cc), cases[k].far_short);
		for (int i = 0; i < 30; i++)
			ack(&t, 0, MTU, 0, now + (uint64_t)i * 100);
		uint64_t w = t.p[0].cwnd;
		for (int i = 0; i < 3; i++) { /* 3 of 33 packets: 9 % */
			t.p[0].lost_sent_ns = now + 3000;
			loss(&t, 0, 1, now + 3100 + (uint64_t)i * 100);
			assert_int_equal(t.p[0].lost_sent_ns, 0); /* on_loss takes it */
		}
		assert_int_equal(t.p[0].cwnd, w);
		assert_int_equal(t.p[0].loss_cut, 0);
		mrp_cc_path_cut(&t.cc, &t.p[0], now + 3400);
		resum(&t);
		assert_int_equal(t.p[0].cwnd, w / 2);
		assert_int_equal(t.p[0].ssthresh, w / 2);
		assert_int_equal(t.p[0].last_cut_ns, now + 3400);
		assert_int_equal(t.p[0].loss_cut, MRP_CC_CUT_QUEUE_LOSS);
		/* a timeout after such a cut keeps its mark (no ramp back to
		 * the hint while the connection stays far short, conn.c) */
		t.cc.ops->on_rto(&t.cc, &t.p[0], now + 5000);
		assert_int_equal(t.p[0].cwnd, MTU);
		assert_int_equal(t.p[0].loss_cut, MRP_CC_CUT_QUEUE_LOSS);
	}
}

/* A cut answers the losses of every packet sent before it: found later,
 * however much later, they do not cut again; losses of packets sent after
 * it do, in the same round trip or not. Without a send time (0) the old
 * rule holds: once per RTT. */
static void test_losses_before_cut_do_not_cut_again(void **state)
{
	struct tconn t;
	uint64_t now = 100 * US;

	(void)state;
	tc_init(&t, "baseline", 1, RTT);
	t.p[0].lost_sent_ns = now - 5 * US;
	loss(&t, 0, 3, now);
	assert_int_equal(t.p[0].cwnd, 8 * MTU);
	assert_int_equal(t.p[0].loss_cut, MRP_CC_CUT_LOSS);
	/* three round trips later, more losses of packets sent before the cut */
	for (int i = 0; i < 4; i++) {
		t.p[0].lost_sent_ns = now - 1;
		loss(&t, 0, 3, now + 3 * RTT + (uint64_t)i * US);
	}
	assert_int_equal(t.p[0].cwnd, 8 * MTU);
	/* within the cut's round trip, packets sent after it: a new episode */
	t.p[0].lost_sent_ns = now + 1 * US;
	loss(&t, 0, 3, now + 2 * US);
	assert_int_equal(t.p[0].cwnd, 4 * MTU);
	/* no send time: once per RTT */
	loss(&t, 0, 3, now + 5 * US);
	assert_int_equal(t.p[0].cwnd, 4 * MTU);
	loss(&t, 0, 3, now + 2 * US + RTT);
	assert_int_equal(t.p[0].cwnd, 2 * MTU);
}

/* RTO drops the path to min_cwnd; slow start brings it back to half. */
static void test_rto(void **state)
{
	struct tconn t;
	uint64_t now = 50 * US;

	(void)state;
	tc_init(&t, "baseline", 1, RTT);
	t.cc.ops->on_rto(&t.cc, &t.p[0], now);
	resum(&t);
	assert_int_equal(t.p[0].cwnd, 1 * MTU);
	for (int i = 0; i < 20; i++)
		ack(&t, 0, MTU, 0, now + (uint64_t)i * US);
	/* doubled back to ssthresh = 8 packets, then only additive */
	assert_true(t.p[0].cwnd >= 8 * MTU);
	assert_true(t.p[0].cwnd < 10 * MTU);
}

/* xorshift64*: deterministic, seeded by the test. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* Under 10^5 random events no window leaves [min, max], and both ends are
 * reached (so the check is not vacuous). */
static void test_window_bounds_random(void **state)
{
	mrp_cc_params params;
	struct tconn t;
	uint64_t seed = 0x9e3779b97f4a7c15ull, now = 0;
	uint64_t lo = 2 * 1024, hi = 64 * 1024;
	static const uint64_t rtts[] = { 0, 5 * US, RTT, 50 * US };
	int saw_min = 0, saw_max = 0;

	(void)state;
	mrp_cc_params_default(&params, 1024);
	params.min_cwnd_pkts = 2;
	params.init_cwnd_pkts = 8;
	params.max_cwnd_pkts = 64;
	params.line_rate_bps = 100000000000ull;
	tc_init_params(&t, "baseline", 4, RTT, &params);

	for (int ev = 0; ev < 100000; ev++) {
		uint64_t r = rng_next(&seed);
		unsigned i = (unsigned)(r % t.n);
		unsigned kind = (unsigned)((r >> 8) % 1000);
		/* marks are rare in the first half, frequent in the second */
		unsigned mark_pct = ev < 50000 ? 1 : 40;

		now += (r >> 20) % (20 * US);
		t.p[i].srtt_ns = rtts[(r >> 40) % 4];
		if (kind < 850) {
			uint64_t acked = (r >> 24) % (64 * 1024);
			uint64_t marked = (r >> 44) % 100 < mark_pct ? acked / (1 + (r >> 50) % 4) : 0;

			ack(&t, i, acked, marked, now);
		} else if (kind < 980) {
			loss(&t, i, (uint32_t)(1 + (r >> 30) % 5), now);
		} else if (kind < 990) {
			t.cc.ops->on_rto(&t.cc, &t.p[i], now);
		} else if (kind < 995) {
			t.cc.ops->on_rate_hint(&t.cc, (r >> 30) % 2 ? (r >> 20) : 0, now);
		} else if (kind < 996) {
			t.cc.ops->path_init(&t.cc, &t.p[i], now);
		} else {
			/* a huge ACK must not overflow anything */
			ack(&t, i, UINT64_MAX / 2, (r >> 30) % 2 ? UINT64_MAX : 0, now);
		}
		resum(&t);
		for (unsigned k = 0; k < t.n; k++) {
			assert_true(t.p[k].cwnd >= lo);
			assert_true(t.p[k].cwnd <= hi);
			assert_true(mrp_cc_path_room(&t.cc, &t.p[k], t.cc.qwnd / 2) <= t.p[k].cwnd);
			saw_min |= t.p[k].cwnd == lo;
			saw_max |= t.p[k].cwnd == hi;
		}
		assert_true(t.p[i].alpha_q16 <= 65536);
		assert_true(t.cc.pacing_bps <= params.line_rate_bps);
	}
	assert_true(saw_min);
	assert_true(saw_max);
}

/*
 * One RTT of traffic: every path acks its whole window (snapshot at the
 * start of the RTT) in MTU-sized ACKs, interleaved across paths, QWND
 * re-summed after each ACK.
 */
static void run_rtt(struct tconn *t, uint64_t start_ns, uint64_t marked_every)
{
	uint64_t left[MAXPATHS], n = 0, step;
	int more = 1;

	for (unsigned i = 0; i < t->n; i++)
		left[i] = t->p[i].cwnd;
	step = RTT / (t->cc.qwnd / MTU + 1);
	while (more) {
		more = 0;
		for (unsigned i = 0; i < t->n; i++) {
			uint64_t a = left[i] < MTU ? left[i] : MTU;

			if (a == 0)
				continue;
			left[i] -= a;
			n++;
			ack(t, i, a, marked_every && n % marked_every == 0 ? a : 0,
			    start_ns + n * step);
			more = 1;
		}
	}
}

/* Leave slow start on every path with one marked ACK each. */
static void end_slow_start(struct tconn *t, uint64_t now)
{
	for (unsigned i = 0; i < t->n; i++)
		ack(t, i, MTU, MTU, now);
}

/* 100 RTTs without marks after slow start: a 16-path connection's QWND
 * grows like a 1-path one's, about ai_pkts_per_rtt MTUs per RTT. */
static void test_coupled_increase(void **state)
{
	static struct tconn one, many;
	uint64_t q1, q16, g1, g16;

	(void)state;
	tc_init(&one, "baseline", 1, RTT);
	tc_init(&many, "baseline", 16, RTT);
	end_slow_start(&one, 1 * US);
	end_slow_start(&many, 1 * US);
	q1 = one.cc.qwnd;
	q16 = many.cc.qwnd;
	for (int r = 0; r < 100; r++) {
		run_rtt(&one, 20 * US + (uint64_t)r * RTT, 0);
		run_rtt(&many, 20 * US + (uint64_t)r * RTT, 0);
	}
	g1 = one.cc.qwnd - q1;
	g16 = many.cc.qwnd - q16;
	assert_true(g1 > 0 && g16 > 0);
	assert_true(g16 * 100 >= g1 * 80);
	assert_true(g16 * 100 <= g1 * 125);
	/* and the rate is the configured one MTU per RTT */
	assert_true(g1 >= 80 * MTU && g1 <= 125 * MTU);
	assert_true(g16 >= 80 * MTU && g16 <= 125 * MTU);
}

/* Slow start is multiplicative: both connections double QWND per RTT, so
 * many paths are no more aggressive relative to their window than one. */
static void test_slow_start_doubles(void **state)
{
	static struct tconn one, many;
	uint64_t q1, q16;

	(void)state;
	tc_init(&one, "baseline", 1, RTT);
	tc_init(&many, "baseline", 16, RTT);
	q1 = one.cc.qwnd;
	q16 = many.cc.qwnd;
	for (int r = 0; r < 3; r++) {
		run_rtt(&one, (uint64_t)r * RTT, 0);
		run_rtt(&many, (uint64_t)r * RTT, 0);
	}
	assert_int_equal(one.cc.qwnd, 8 * q1);
	assert_int_equal(many.cc.qwnd, 8 * q16);
}

/* Under a steady marked fraction alpha converges to it, and a path with
 * more marks ends with a smaller window than one with fewer. */
static void test_alpha_tracks_marked_fraction(void **state)
{
	struct tconn t;
	uint64_t now = 0;

	(void)state;
	tc_init(&t, "baseline", 2, RTT);
	end_slow_start(&t, 1 * US);
	for (int r = 0; r < 200; r++) {
		now = 20 * US + (uint64_t)r * RTT;
		for (int k = 0; k < 10; k++) {
			ack(&t, 0, MTU, k < 3 ? MTU : 0, now + (uint64_t)k * 500);
			ack(&t, 1, MTU, k < 1 ? MTU : 0, now + (uint64_t)k * 500);
		}
	}
	/* 30 % and 10 % of the bytes of each epoch are marked */
	assert_true(t.p[0].alpha_q16 > 65536 * 27 / 100);
	assert_true(t.p[0].alpha_q16 < 65536 * 33 / 100);
	assert_true(t.p[1].alpha_q16 > 65536 * 8 / 100);
	assert_true(t.p[1].alpha_q16 < 65536 * 12 / 100);
	assert_true(t.p[0].cwnd < t.p[1].cwnd);
}

/* A rate hint whose window is below cwnd limits the room, per connection. */
static void test_hint_caps_room(void **state)
{
	struct tconn t;

	(void)state;
	tc_init(&t, "baseline", 2, RTT);
	/* no hint: the path's own window */
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 0), 16 * MTU);
	t.p[0].inflight = 4 * MTU;
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 4 * MTU), 12 * MTU);
	t.p[0].inflight = 0;

	/* 1 Gbit/s over two of the path's 10 us srtt: 2500 bytes + one MTU */
	t.cc.ops->on_rate_hint(&t.cc, 1000000000ull, 5 * US);
	assert_int_equal(t.cc.rate_hint_bps, 1000000000ull);
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 0), 2500 + MTU);
	/* what the other path has in flight counts against it */
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 2000), 2500 + MTU - 2000);
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 7000), 0);
	/* the engine's hint_rtt_ns takes precedence over the path's srtt */
	t.cc.hint_rtt_ns = 20 * US;
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 0), 5000 + MTU);
	/* a hint larger than the window leaves the window in charge */
	t.cc.ops->on_rate_hint(&t.cc, 400000000000ull, 6 * US);
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 0), 16 * MTU);
	/* hint withdrawn */
	t.cc.ops->on_rate_hint(&t.cc, 0, 7 * US);
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 0), 16 * MTU);
	/* a window overrun (engine raced a cut) is 0, never negative */
	t.p[0].inflight = 17 * MTU;
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 17 * MTU), 0);
}

/* Pacing is the smallest of line rate, hint and 5/4 QWND/RTT. */
/* Where the receiver's hint paces a connection across sites (a minimum RTT
 * of 1 ms or more), ECN does not cut a path below what the hint carries in
 * that RTT; within a data centre it does. A route's own minimum starts again
 * when the path moves, and its first samples may cross the queue the old
 * route left: the plane's smallest RTT in the connection's life, when
 * smaller, is the one that says where the peer is. */
static void test_hint_floor_across_sites_only(void **state)
{
	struct tconn t;

	(void)state;
	tc_init(&t, "baseline", 1, 2000 * US);
	t.cc.ops->on_rate_hint(&t.cc, 20000000000ull, 0);
	/* 20 Gbit/s over 1.3 ms is 3.25 MB, more than the window: no cut (it
	 * ends slow start all the same) */
	t.p[0].min_rtt_ns = 1300 * US;
	uint64_t c0 = t.p[0].cwnd;
	ack(&t, 0, MTU, MTU, 1 * US);
	assert_int_equal(t.p[0].cwnd, c0);
	/* the same route's minimum, on a plane where 30 us has been seen */
	t.p[0].plane_rtt_ns = 30 * US;
	ack(&t, 0, MTU, MTU, 3000 * US);
	assert_true(t.p[0].cwnd < c0);
	/* a plane whose smallest RTT is across sites too: the floor again */
	uint64_t c1 = t.p[0].cwnd;
	t.p[0].plane_rtt_ns = 1100 * US;
	ack(&t, 0, MTU, MTU, 6000 * US);
	assert_int_equal(t.p[0].cwnd, c1);
	/* and 0 (no sample on the plane yet) is not a minimum */
	t.p[0].plane_rtt_ns = 0;
	ack(&t, 0, MTU, MTU, 9000 * US);
	assert_int_equal(t.p[0].cwnd, c1);
}

static void test_pacing(void **state)
{
	mrp_cc_params params;
	struct tconn t;

	(void)state;
	mrp_cc_params_default(&params, MTU);
	params.init_cwnd_pkts = 16;
	params.line_rate_bps = 100000000000ull;
	tc_init_params(&t, "baseline", 1, 0, &params);
	assert_int_equal(t.cc.pacing_bps, 100000000000ull);
	t.cc.ops->on_rate_hint(&t.cc, 10000000000ull, 0);
	assert_int_equal(t.cc.pacing_bps, 10000000000ull);
	t.cc.ops->on_rate_hint(&t.cc, 400000000000ull, 0);
	assert_int_equal(t.cc.pacing_bps, 100000000000ull);
	t.cc.ops->on_rate_hint(&t.cc, 0, 0);
	assert_int_equal(t.cc.pacing_bps, 100000000000ull);

	/* an RTT known: QWND 17 packets (16 + the one acked) over 10 us,
	 * times 5/4 = 25.5 Gbit/s, below the line rate */
	t.p[0].srtt_ns = RTT;
	ack(&t, 0, MTU, 0, 1 * US);
	assert_int_equal(t.cc.qwnd, 17 * MTU);
	assert_int_equal(t.cc.pacing_bps, 17ull * MTU * 8 * 1000000000ull / RTT * 5 / 4);
	t.cc.hint_rtt_ns = RTT;
	t.cc.ops->on_rate_hint(&t.cc, 10000000000ull, 2 * US);
	assert_int_equal(t.cc.pacing_bps, 10000000000ull);

	/* no line rate, no hint, no RTT: no pacing limit */
	params.line_rate_bps = 0;
	tc_init_params(&t, "baseline", 1, 0, &params);
	t.cc.ops->on_rate_hint(&t.cc, 0, 0);
	assert_int_equal(t.cc.pacing_bps, 0);
	t.cc.ops->on_rate_hint(&t.cc, 5000000000ull, 0);
	assert_int_equal(t.cc.pacing_bps, 5000000000ull);
}

/* "fixed" keeps init_cwnd whatever happens but still honours the hint. */
static void test_fixed_ignores_signals(void **state)
{
	struct tconn t;

	(void)state;
	tc_init(&t, "fixed", 2, RTT);
	for (int i = 0; i < 100; i++) {
		ack(&t, 0, MTU, i % 2 ? MTU : 0, (uint64_t)i * 20 * US);
		loss(&t, 1, 10, (uint64_t)i * 20 * US);
	}
	t.cc.ops->on_rto(&t.cc, &t.p[0], 3000 * US);
	assert_int_equal(t.p[0].cwnd, 16 * MTU);
	assert_int_equal(t.p[1].cwnd, 16 * MTU);
	t.cc.ops->on_rate_hint(&t.cc, 1000000000ull, 3000 * US);
	assert_int_equal(mrp_cc_path_room(&t.cc, &t.p[0], 0), 2500 + MTU);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_valid),
		cmocka_unit_test(test_invalid_params),
		cmocka_unit_test(test_unknown_name),
		cmocka_unit_test(test_registry),
		cmocka_unit_test(test_mark_cuts_only_marked_path),
		cmocka_unit_test(test_one_cut_per_rtt),
		cmocka_unit_test(test_isolated_losses_do_not_cut),
		cmocka_unit_test(test_loss_burst_halves_once),
		cmocka_unit_test(test_loss_trickle_no_cut),
		cmocka_unit_test(test_queue_losses_cut),
		cmocka_unit_test(test_losses_before_cut_do_not_cut_again),
		cmocka_unit_test(test_rto),
		cmocka_unit_test(test_window_bounds_random),
		cmocka_unit_test(test_coupled_increase),
		cmocka_unit_test(test_slow_start_doubles),
		cmocka_unit_test(test_alpha_tracks_marked_fraction),
		cmocka_unit_test(test_hint_caps_room),
		cmocka_unit_test(test_hint_floor_across_sites_only),
		cmocka_unit_test(test_pacing),
		cmocka_unit_test(test_fixed_ignores_signals),
	};
	return cmocka_run_group_tests_name("proto/cc", tests, NULL, NULL);
}
