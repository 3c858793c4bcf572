/*
 * Congestion control: the framework (algorithm table, parameter checks, path
 * room, pacing rate) and two algorithms, "baseline" and "fixed".
 *
 * Baseline, per path (see cc.h for the contract):
 *
 *  - Slow start while cwnd < ssthresh: cwnd += bytes acked. ssthresh starts
 *    at UINT64_MAX, so a new path doubles every RTT until its first cut (a CE
 *    mark, loss_cut_count losses in an RTT) and after an RTO regrows to half
 *    its old window. Slow start is deliberately NOT scaled by cwnd/QWND:
 *    growth by the bytes acked is multiplicative, and if every path doubles,
 *    QWND doubles, which is exactly what one single-path flow does; the
 *    coupling factor cwnd/QWND would instead make an n-path connection grow
 *    by only QWND/n per RTT (16 paths: ~11 RTTs to double), which hurts the
 *    large-BDP, many-path case slow start exists for. The receiver's rate
 *    hint caps the connection's window and pacing during slow start anyway.
 *
 *  - ECN: DCTCP-style alpha per path, an EWMA (gain 1/2^alpha_gain_shift) of
 *    the marked fraction of the bytes acked in an epoch of one RTT. A marked
 *    ACK cuts cwnd by alpha/2, at most once per RTT. alpha starts at 0, not
 *    at DCTCP's 1: starting at 1 makes every cut in the first ~2/g RTTs after
 *    slow start close to a halving whatever the real marked fraction is (the
 *    over-cutting that made Linux turn dctcp_alpha_on_init into a knob). So
 *    that a first mark still cuts, the cut uses max(alpha, floor), where the
 *    floor is, in slow start, the marked fraction of the ACK itself (a fully
 *    marked ACK halves the window, undoing slow start's overshoot), and in
 *    congestion avoidance, the alpha the epoch would produce if it ended now.
 *
 *  - Loss: loss_cut_count losses within one RTT halve cwnd when they are
 *    loss_cut_pct of the packets the path resolved in it; fewer, or a
 *    smaller share, are taken as random loss, which selective repeat
 *    absorbs. Losses behind a bottleneck (mrp_cc_queue_loss(): the
 *    connection has been acknowledged at under half the receiver's hint
 *    for a while, cc->far_short, which the engine measures) are instead
 *    counted by the engine per plane, and loss_cut_count of them in an RTT halve
 *    every path of the plane together (mrp_cc_path_cut()): that is what a
 *    bottleneck that drops instead of marking needs (a switch without ECN,
 *    a tc tbf), where every loss comes behind a full queue -- a sender
 *    that waited for 40 % of a round trip's packets to be lost held that
 *    queue full and sent again half of what it sent. Random loss, bursty
 *    or not, leaves a connection its hint's rate. (A standing queue seen
 *    in the RTT -- srtt several times min RTT -- is not the test: in a
 *    daemon, host delay alone holds srtt there, and that test cut windows
 *    an accurate hint had kept large, bench/README.md.) A cut answers the losses of every packet
 *    sent before it: theirs never cut again (the engine gives the newest
 *    lost packet's send time), so a queue that overflowed once costs one
 *    halving, not one per RTT while its losses come back (the "once per
 *    window" of NewReno's recovery).
 *
 *  - Additive increase in congestion avoidance, coupled: an ACK of b bytes
 *    on a path adds ai_pkts_per_rtt * mtu * b / F bytes, F the connection's
 *    bytes in flight (with the ACK's), at most QWND, at least the path's
 *    cwnd. Over an RTT the connection acks about F bytes in all, so all
 *    paths together grow by ai_pkts_per_rtt MTUs per RTT however many paths
 *    there are and whichever of them fill their windows. Marked bytes earn
 *    no increase. A path the engine flags as uncoupled (its route clean
 *    while the connection's others are marked and the connection is short
 *    of its hint) divides by its own window instead: one MTU per RTT of its
 *    own, as a one-path flow would.
 *
 *  - RTO: ssthresh = cwnd / 2, cwnd = min (the engine probes the path).
 *
 * "fixed" keeps every window at init_cwnd_pkts and ignores congestion
 * signals; it exists for tests and as the smallest example of the ops table.
 *
 * All arithmetic is 64-bit integer; products that could overflow go through
 * mrp_mul_div(), which saturates.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arith.h"
#include "cc.h"
#include "error.h"

#define ALPHA_ONE 65536u /* 1.0 in alpha_q16 */
#define FRAC_SHIFT 16    /* ai_frac holds 1/2^16 bytes */
#define NS_PER_S 1000000000ull
/* Pacing rate from the window: QWND * 8 bits * 1e9 ns/s / RTT * 5/4. */
#define PACING_BITS_NS (8ull * NS_PER_S * 5 / 4)

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The smaller of two limits where 0 means "no limit". */
static uint64_t min_limit(uint64_t a, uint64_t b)
{
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	return min_u64(a, b);
}

/* Time from since to now; UINT64_MAX if since is UINT64_MAX ("never"), 0 if
 * the clock the caller passes went backwards. */
static uint64_t elapsed_ns(uint64_t now_ns, uint64_t since_ns)
{
	if (since_ns == UINT64_MAX)
		return UINT64_MAX;
	return now_ns > since_ns ? now_ns - since_ns : 0;
}


/* part / whole as a Q16 fraction, at most 1.0; 0 for an empty whole. */
static uint32_t frac_q16(uint64_t part, uint64_t whole)
{
	if (whole == 0)
		return 0;
	if (part >= whole)
		return ALPHA_ONE;
	return (uint32_t)mrp_mul_div(part, ALPHA_ONE, whole);
}

/* alpha moved towards sample by gain 1/2^shift, rounded towards the sample
 * so that alpha can reach 0 and 1.0 rather than stalling just short. */
static uint32_t ewma_q16(uint32_t alpha, uint32_t sample, uint32_t shift)
{
	uint64_t round = ((uint64_t)1 << shift) - 1;

	if (sample >= alpha)
		return alpha + (uint32_t)(((uint64_t)(sample - alpha) + round) >> shift);
	return alpha - (uint32_t)(((uint64_t)(alpha - sample) + round) >> shift);
}

/* The RTT that "once per RTT" means on p. */
static uint64_t path_rtt(const mrp_cc_path *p)
{
	return p->srtt_ns ? p->srtt_ns : MRP_CC_DEFAULT_RTT_NS;
}

static uint64_t min_cwnd(const mrp_cc_conn *cc)
{
	return (uint64_t)cc->params.min_cwnd_pkts * cc->params.mtu;
}

static uint64_t max_cwnd(const mrp_cc_conn *cc)
{
	return (uint64_t)cc->params.max_cwnd_pkts * cc->params.mtu;
}

static uint64_t clamp_cwnd(const mrp_cc_conn *cc, uint64_t cwnd)
{
	return min_u64(max_u64(cwnd, min_cwnd(cc)), max_cwnd(cc));
}

/*
 * QWND once the engine has folded p's change from old_cwnd to new_cwnd into
 * it: hooks run before the engine re-sums QWND, and pacing should follow the
 * window just set, not the one before.
 */
static uint64_t qwnd_after(const mrp_cc_conn *cc, uint64_t old_cwnd,
			   uint64_t new_cwnd)
{
	uint64_t q = cc->qwnd;

	q = q > old_cwnd ? q - old_cwnd : 0;
	return sat_add(q, new_cwnd);
}

/* The RTT that turns the hint into a window: the engine's hint_rtt_ns,
 * else the path's srtt; 0 if neither is known. */
static uint64_t hint_rtt(const mrp_cc_conn *cc, const mrp_cc_path *p)
{
	if (cc->hint_rtt_ns)
		return cc->hint_rtt_ns;
	return p ? p->srtt_ns : 0;
}

/* The RTT that turns the window into a rate: the engine's pace_rtt_ns,
 * else hint_rtt(). */
static uint64_t pacing_rtt(const mrp_cc_conn *cc, const mrp_cc_path *p)
{
	return cc->pace_rtt_ns ? cc->pace_rtt_ns : hint_rtt(cc, p);
}

/*
 * Recompute cc->pacing_bps after any change of window, hint or RTT: the
 * smallest of the line rate, the receiver's hint and 5/4 * qwnd / rtt, of
 * those that are known; 0 (no pacing limit) when none is.
 */
static void update_pacing(mrp_cc_conn *cc, uint64_t qwnd, uint64_t rtt_ns)
{
	uint64_t rate = min_limit(cc->params.line_rate_bps, cc->rate_hint_bps);

	if (qwnd > 0 && rtt_ns > 0)
		rate = min_limit(rate, max_u64(mrp_mul_div(qwnd, PACING_BITS_NS, rtt_ns), 1));
	cc->pacing_bps = rate;
}

/* Shared by every algorithm: the hint is the receiver's allotment, not an
 * algorithm's opinion, and mrp_cc_path_room() reads it from cc. */
static void common_on_rate_hint(mrp_cc_conn *cc, uint64_t hint_bps, uint64_t now_ns)
{
	(void)now_ns;
	cc->rate_hint_bps = hint_bps;
	update_pacing(cc, cc->qwnd, pacing_rtt(cc, NULL));
}

/* Set the algorithm-owned fields of p for a path starting at now_ns. */
static void path_reset(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns)
{
	p->cwnd = (uint64_t)cc->params.init_cwnd_pkts * cc->params.mtu;
	p->ssthresh = UINT64_MAX;
	p->last_cut_ns = UINT64_MAX;
	p->loss_epoch_ns = now_ns;
	p->losses = 0;
	p->delivered = 0;
	p->alpha_q16 = 0;
	p->acked_epoch = 0;
	p->marked_epoch = 0;
	p->alpha_epoch_ns = now_ns;
	p->ai_frac = 0;
	p->lost_sent_ns = 0;
	p->loss_cut = 0;
}

/* ---- baseline ---------------------------------------------------------- */

static void baseline_path_init(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns)
{
	path_reset(cc, p, now_ns);
	update_pacing(cc, qwnd_after(cc, 0, p->cwnd), pacing_rtt(cc, p));
}

/* Close p's alpha epoch if it has lasted an RTT: fold its marked fraction
 * into alpha and start the next one. */
static void alpha_epoch(const mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns)
{
	if (elapsed_ns(now_ns, p->alpha_epoch_ns) < path_rtt(p))
		return;
	if (p->acked_epoch > 0)
		p->alpha_q16 = ewma_q16(p->alpha_q16,
					frac_q16(p->marked_epoch, p->acked_epoch),
					cc->params.alpha_gain_shift);
	p->acked_epoch = 0;
	p->marked_epoch = 0;
	p->alpha_epoch_ns = now_ns;
}

/*
 * A connection the receiver's rate hint paces is not cut by ECN below what
 * the hint carries in the path's minimum RTT (its part of it: the floor
 * is cwnd * (hint x min RTT) / QWND): the receiver's allocator sees the
 * same marks and lowers the hints itself (ratehint.h), and a window of the
 * hint over the minimum RTT already keeps the sender from holding a queue
 * (at the hint, in flight grows past it only by what is queued). Cut
 * below it as well -- two controllers on one queue -- a joining flow at a
 * 10 ms round trip was left window-limited at half its hint once the
 * queue had drained, silent between its windows, and the allocator read
 * those silences as demand: the link 25-72 % busy for a round trip.
 * Only where that minimum RTT is HINT_FLOOR_MIN_RTT_NS or more: within a
 * data centre a queue in the fabric -- flows to different receivers whose
 * paths collide on a spine -- is no receiver's to divide, and only ECN
 * drains it. (Across sites ECN still cuts, down to the floor: a fabric
 * queue there is drained only that far. Not measured: no scenario has
 * one.)
 */
#define HINT_FLOOR_MIN_RTT_NS 1000000
static uint64_t hint_floor(const mrp_cc_conn *cc, const mrp_cc_path *p)
{
	/* The minimum RTT: the route's, or the plane's if that is smaller. A
	 * route's own is measured again after every move, and a first sample
	 * through the queue the old route left reads as across sites: a path
	 * 30 us from its peer re-pathed on a marked plane, took 1.3 ms for
	 * its minimum, and from then on no mark cut it (the floor was its
	 * whole window), so its queue stood and the minimum stayed
	 * (tests/netns ecn_plane: plane1's window 1 MB, plane0's 0.3 MB). */
	uint64_t min_rtt = p->min_rtt_ns;
	if (p->plane_rtt_ns && (!min_rtt || p->plane_rtt_ns < min_rtt))
		min_rtt = p->plane_rtt_ns;
	if (!cc->rate_hint_bps || min_rtt < HINT_FLOOR_MIN_RTT_NS || !cc->qwnd)
		return 0;
	uint64_t conn = mrp_mul_div(cc->rate_hint_bps, min_rtt, 8000000000ull);
	if (conn >= cc->qwnd)
		return p->cwnd;
	return mrp_mul_div(p->cwnd, conn, cc->qwnd);
}

/* Multiplicative decrease for a CE-marked ACK (caller checked once-per-RTT). */
static void ecn_cut(const mrp_cc_conn *cc, mrp_cc_path *p, uint64_t acked_bytes,
		    uint64_t marked_bytes, uint64_t now_ns)
{
	uint32_t a = p->alpha_q16;

	if (p->cwnd < p->ssthresh)
		a = (uint32_t)max_u64(a, frac_q16(marked_bytes, acked_bytes));
	else if (p->acked_epoch > 0)
		a = (uint32_t)max_u64(a, ewma_q16(p->alpha_q16,
						  frac_q16(p->marked_epoch, p->acked_epoch),
						  cc->params.alpha_gain_shift));
	/* cwnd * (1 - a/2): a <= 1.0, so the cut is at most half. */
	uint64_t floor = hint_floor(cc, p);
	p->cwnd = clamp_cwnd(cc, max_u64(p->cwnd - mrp_mul_div(p->cwnd, a, 2 * (uint64_t)ALPHA_ONE),
					 floor));
	p->ssthresh = p->cwnd;
	p->last_cut_ns = now_ns;
	p->ai_frac = 0;
	p->loss_cut = 0;
}

/* Grow p for bytes acked without a mark: slow start or coupled increase. */
static void grow(const mrp_cc_conn *cc, mrp_cc_path *p, uint64_t bytes)
{
	const mrp_cc_params *pr = &cc->params;
	uint64_t denom, inc_q;

	if (bytes == 0)
		return;
	if (p->cwnd < p->ssthresh) {
		p->cwnd = min_u64(sat_add(p->cwnd, bytes), p->ssthresh);
	} else {
		/* What the connection acks in an RTT: QWND, or less when
		 * some paths' windows are not what limits them (a plane
		 * held to its link's rate by pacing keeps a large window it
		 * does not fill, and with QWND as the divisor the paths that
		 * are window-limited would hardly grow: a plane recovering
		 * from a loss burst took milliseconds to regrow); never
		 * below this path's own window (a stale figure must not
		 * inflate the increase). */
		denom = cc->qwnd;
		if (cc->acking_bytes && cc->acking_bytes < denom)
			denom = cc->acking_bytes;
		denom = max_u64(denom, p->cwnd);
		if (p->uncoupled)
			denom = p->cwnd;
		if (denom == 0)
			return;
		inc_q = mrp_mul_div((uint64_t)pr->ai_pkts_per_rtt * pr->mtu << FRAC_SHIFT,
				bytes, denom);
		inc_q = sat_add(inc_q, p->ai_frac);
		p->cwnd = sat_add(p->cwnd, inc_q >> FRAC_SHIFT);
		p->ai_frac = inc_q & ((1u << FRAC_SHIFT) - 1);
	}
	if (p->cwnd >= max_cwnd(cc))
		p->ai_frac = 0;
	p->cwnd = clamp_cwnd(cc, p->cwnd);
}

/* Start a new loss-counting epoch when the last one is an RTT old. */
static void loss_epoch(mrp_cc_path *p, uint64_t now_ns)
{
	if (elapsed_ns(now_ns, p->loss_epoch_ns) >= path_rtt(p)) {
		p->losses = 0;
		p->delivered = 0;
		p->loss_epoch_ns = now_ns;
	}
}

static void baseline_on_ack(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t acked_bytes,
			    uint64_t marked_bytes, uint64_t now_ns)
{
	uint64_t old = p->cwnd;

	if (marked_bytes > acked_bytes)
		marked_bytes = acked_bytes;
	p->acked_epoch = sat_add(p->acked_epoch, acked_bytes);
	p->marked_epoch = sat_add(p->marked_epoch, marked_bytes);
	alpha_epoch(cc, p, now_ns);
	loss_epoch(p, now_ns);
	if (acked_bytes) {
		uint64_t pkts = acked_bytes / cc->params.mtu;
		pkts = pkts ? pkts : 1;
		p->delivered = pkts > UINT32_MAX - p->delivered ? UINT32_MAX
								 : p->delivered + (uint32_t)pkts;
	}

	if (marked_bytes > 0 && elapsed_ns(now_ns, p->last_cut_ns) >= path_rtt(p))
		ecn_cut(cc, p, acked_bytes, marked_bytes, now_ns);
	else
		grow(cc, p, acked_bytes - marked_bytes);
	update_pacing(cc, qwnd_after(cc, old, p->cwnd), pacing_rtt(cc, p));
}

int mrp_cc_queue_loss(const mrp_cc_conn *cc)
{
	return cc->far_short;
}

void mrp_cc_path_cut(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns)
{
	uint64_t old = p->cwnd;

	p->cwnd = clamp_cwnd(cc, p->cwnd / 2);
	p->ssthresh = p->cwnd;
	p->last_cut_ns = now_ns;
	p->losses = 0;
	p->delivered = 0;
	p->loss_epoch_ns = now_ns;
	p->ai_frac = 0;
	p->loss_cut = MRP_CC_CUT_QUEUE_LOSS;
	update_pacing(cc, qwnd_after(cc, old, p->cwnd), pacing_rtt(cc, p));
}

static void baseline_on_loss(mrp_cc_conn *cc, mrp_cc_path *p, uint32_t lost_pkts,
			     uint64_t now_ns)
{
	uint64_t rtt = path_rtt(p), old = p->cwnd, sent = p->lost_sent_ns;

	p->lost_sent_ns = 0;
	if (lost_pkts == 0 || mrp_cc_queue_loss(cc))
		return; /* (the engine's, per plane: mrp_cc_path_cut()) */
	/* sent before the last cut: that cut answered them (and the engine
	 * does not know a send time: once per RTT, as before) */
	if (p->last_cut_ns != UINT64_MAX &&
	    (sent ? sent <= p->last_cut_ns : elapsed_ns(now_ns, p->last_cut_ns) < rtt))
		return;
	loss_epoch(p, now_ns);
	p->losses = lost_pkts > UINT32_MAX - p->losses ? UINT32_MAX : p->losses + lost_pkts;
	if (p->losses < cc->params.loss_cut_count ||
	    (uint64_t)p->losses * 100 <
		    (uint64_t)cc->params.loss_cut_pct * ((uint64_t)p->losses + p->delivered))
		return;
	p->cwnd = clamp_cwnd(cc, p->cwnd / 2);
	p->ssthresh = p->cwnd;
	p->last_cut_ns = now_ns;
	p->losses = 0;
	p->delivered = 0;
	p->ai_frac = 0;
	p->loss_cut = MRP_CC_CUT_LOSS;
	update_pacing(cc, qwnd_after(cc, old, p->cwnd), pacing_rtt(cc, p));
}

static void baseline_on_rto(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns)
{
	uint64_t old = p->cwnd;

	p->ssthresh = max_u64(p->cwnd / 2, min_cwnd(cc));
	p->cwnd = min_cwnd(cc);
	p->ai_frac = 0;
	/* (not marked a bottleneck's loss even when the connection is far
	 * short of its hint: in a daemon starved of CPU, timeouts are the
	 * hosts' delay, and paths so marked were held at the minimum window,
	 * regrown by additive increase alone) */
	p->losses = 0;
	p->delivered = 0;
	p->loss_epoch_ns = now_ns;
	update_pacing(cc, qwnd_after(cc, old, p->cwnd), pacing_rtt(cc, p));
}

static const mrp_cc_ops baseline_ops = {
	.name = "baseline",
	.plane_cuts = 1,
	.path_init = baseline_path_init,
	.on_ack = baseline_on_ack,
	.on_loss = baseline_on_loss,
	.on_rate_hint = common_on_rate_hint,
	.on_rto = baseline_on_rto,
};

/* ---- fixed ------------------------------------------------------------- */

static void fixed_path_init(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns)
{
	path_reset(cc, p, now_ns);
	update_pacing(cc, qwnd_after(cc, 0, p->cwnd), pacing_rtt(cc, p));
}

/* The window never moves; only the pacing rate follows a changing RTT. */
static void fixed_on_ack(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t acked_bytes,
			 uint64_t marked_bytes, uint64_t now_ns)
{
	(void)acked_bytes;
	(void)marked_bytes;
	(void)now_ns;
	update_pacing(cc, cc->qwnd, pacing_rtt(cc, p));
}

static void fixed_on_loss(mrp_cc_conn *cc, mrp_cc_path *p, uint32_t lost_pkts,
			  uint64_t now_ns)
{
	(void)cc;
	(void)p;
	(void)lost_pkts;
	(void)now_ns;
}

static void fixed_on_rto(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns)
{
	(void)cc;
	(void)p;
	(void)now_ns;
}

static const mrp_cc_ops fixed_ops = {
	.name = "fixed",
	.path_init = fixed_path_init,
	.on_ack = fixed_on_ack,
	.on_loss = fixed_on_loss,
	.on_rate_hint = common_on_rate_hint,
	.on_rto = fixed_on_rto,
};

/* ---- framework --------------------------------------------------------- */

/* The registry; the first entry is the default a configuration names. */
static const mrp_cc_ops *const cc_algos[] = {
	&baseline_ops,
	&fixed_ops,
};

#define N_ALGOS (sizeof(cc_algos) / sizeof(cc_algos[0]))

const mrp_cc_ops *mrp_cc_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < N_ALGOS; i++)
		if (strcmp(cc_algos[i]->name, name) == 0)
			return cc_algos[i];
	return NULL;
}

const mrp_cc_ops *mrp_cc_get(unsigned i)
{
	return i < N_ALGOS ? cc_algos[i] : NULL;
}

void mrp_cc_params_default(mrp_cc_params *p, uint32_t mtu)
{
	memset(p, 0, sizeof(*p));
	p->mtu = mtu;
	p->init_cwnd_pkts = 4;
	p->min_cwnd_pkts = 1;
	p->max_cwnd_pkts = MRP_CC_MAX_CWND_PKTS;
	p->loss_cut_count = 3;
	p->loss_cut_pct = 40;
	p->ai_pkts_per_rtt = 1;
	p->alpha_gain_shift = 4;
	p->line_rate_bps = 0;
}

/* 0 if params are in range (cc.h, mrp_cc_conn_init), else MRP_ERR_INVAL. */
static int params_check(const mrp_cc_params *p)
{
	if (p->mtu < MRP_CC_MTU_MIN || p->mtu > MRP_CC_MTU_MAX)
		return MRP_ERR_INVAL;
	if (p->min_cwnd_pkts < 1 || p->min_cwnd_pkts > p->init_cwnd_pkts ||
	    p->init_cwnd_pkts > p->max_cwnd_pkts ||
	    p->max_cwnd_pkts > MRP_CC_MAX_CWND_PKTS)
		return MRP_ERR_INVAL;
	if (p->loss_cut_count < 1 || p->loss_cut_pct < 1 || p->loss_cut_pct > 100)
		return MRP_ERR_INVAL;
	if (p->ai_pkts_per_rtt < 1 || p->ai_pkts_per_rtt > p->max_cwnd_pkts)
		return MRP_ERR_INVAL;
	if (p->alpha_gain_shift > MRP_CC_MAX_GAIN_SHIFT)
		return MRP_ERR_INVAL;
	return 0;
}

int mrp_cc_conn_init(mrp_cc_conn *cc, const char *name,
		     const mrp_cc_params *params)
{
	const mrp_cc_ops *ops;
	int rc;

	if (!cc || !name || !params)
		return MRP_ERR_INVAL;
	ops = mrp_cc_find(name);
	if (!ops)
		return MRP_ERR_NOENT;
	rc = params_check(params);
	if (rc < 0)
		return rc;
	memset(cc, 0, sizeof(*cc));
	cc->ops = ops;
	cc->params = *params;
	update_pacing(cc, 0, 0);
	return 0;
}

void mrp_cc_path_raise(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t cwnd, uint64_t ssthresh)
{
	uint64_t old = p->cwnd;

	p->cwnd = clamp_cwnd(cc, max_u64(p->cwnd, cwnd));
	p->ssthresh = ssthresh;
	p->ai_frac = 0;
	update_pacing(cc, qwnd_after(cc, old, p->cwnd), pacing_rtt(cc, p));
}

void mrp_cc_path_lower(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t cwnd)
{
	uint64_t old = p->cwnd;

	p->cwnd = clamp_cwnd(cc, cwnd < p->cwnd ? cwnd : p->cwnd);
	p->ai_frac = 0;
	update_pacing(cc, qwnd_after(cc, old, p->cwnd), pacing_rtt(cc, p));
}

void mrp_cc_path_ramp(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t cwnd)
{
	cwnd = clamp_cwnd(cc, cwnd);
	if (p->ssthresh < cwnd)
		p->ssthresh = cwnd;
}

uint64_t mrp_cc_path_room(const mrp_cc_conn *cc, const mrp_cc_path *p,
			  uint64_t total_inflight)
{
	uint64_t room = p->cwnd > p->inflight ? p->cwnd - p->inflight : 0;
	uint64_t rtt = hint_rtt(cc, p), hint_wnd;

	if (cc->rate_hint_bps == 0 || rtt == 0)
		return room;
	/* bytes the hinted rate delivers in two RTTs, plus one packet so a
	 * tiny hint still lets the connection send something. Pacing holds
	 * the rate to the hint; the window only bounds what is in flight, and
	 * one RTT's worth would throttle below the hint because the RTT
	 * estimate leaves out ACK coalescing and the sender's own queue. */
	hint_wnd = sat_add(mrp_mul_div(cc->rate_hint_bps, 2 * rtt, 8 * NS_PER_S), cc->params.mtu);
	if (hint_wnd <= total_inflight)
		return 0;
	return min_u64(room, hint_wnd - total_inflight);
}
