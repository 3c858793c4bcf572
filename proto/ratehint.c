/*
 * Receiver-driven rate hints: per-sender arrival measurement and a max-min
 * fair division of the inbound capacity (see ratehint.h).
 *
 * Nothing runs on a timer: every entry point first closes the measurement
 * epoch if epoch_ns has passed (which also expires idle senders), and shares
 * are recomputed lazily, at most once per change (new sender, expiry,
 * release, capacity change, epoch end), when a share is next asked for.
 *
 * Water-filling without scratch memory: slot->share_bps doubles as the
 * "still unsaturated" mark (UINT64_MAX) during a recompute. Each round
 * computes the level remaining / unsaturated and freezes every sender whose
 * demand is at or below it at its demand; the level only rises from round to
 * round, so stopping after MAX_ROUNDS and giving the rest the current level
 * still divides exactly what remains and never over-allocates.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "arith.h"
#include "ratehint.h"

#define NS_PER_S 1000000000ull
#define MAX_ROUNDS 32
/* A measured sender's demand is at least 1/2^FLOOR_SHIFT of an equal share,
 * so one that paused for an epoch is not told (almost) nothing. */
#define FLOOR_SHIFT 4
#define UNSATURATED UINT64_MAX
/* Packets a sender may miss at its share before it counts as idle. */
#define IDLE_PKTS 4

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Time from since to now, 0 if the caller's clock went backwards. */
static uint64_t elapsed_ns(uint64_t now_ns, uint64_t since_ns)
{
	return now_ns > since_ns ? now_ns - since_ns : 0;
}

/*
 * How long s may be silent and still be active: idle_ns, or longer while
 * its share (an equal one before the first division) sends fewer than
 * IDLE_PKTS of the largest packets in idle_ns. A thousand senders paced at
 * a tenth of a Gbit/s each send a packet every 350 us: expired between two
 * of their packets, they would come back unmeasured, and the senders left
 * would be handed the capacity of those that only seemed gone.
 */
static uint64_t slot_idle_ns(const mrp_rh *rh, const mrp_rh_slot *s)
{
	uint64_t equal = rh->capacity_bps / (rh->nactive ? rh->nactive : 1);
	uint64_t share = s->share_bps, need;

	if (share == 0 || share == UINT64_MAX)
		share = equal;
	/* (not below the demand floor: a light sender that left frees its
	 * slot within 4 x 2^FLOOR_SHIFT packets at an equal share) */
	if (share < equal >> FLOOR_SHIFT)
		share = equal >> FLOOR_SHIFT;
	if (share == 0 || rh->max_pkt_bytes == 0)
		return rh->idle_ns;
	need = mrp_mul_div((uint64_t)IDLE_PKTS * rh->max_pkt_bytes * 8, NS_PER_S, share);
	return need > rh->idle_ns ? need : rh->idle_ns;
}

static int slot_expired(const mrp_rh *rh, const mrp_rh_slot *s, uint64_t now_ns)
{
	uint64_t el = elapsed_ns(now_ns, s->last_ns);
	if (s->waiting && now_ns < s->wait_until_ns)
		return 0; /* its data on its first hint is on its way */
	/* (slot_idle_ns() is at least idle_ns: its division only past that) */
	return s->key != 0 && el > rh->idle_ns && el > slot_idle_ns(rh, s);
}

static void slot_free(mrp_rh *rh, mrp_rh_slot *s)
{
	memset(s, 0, sizeof(*s));
	if (rh->nactive > 0)
		rh->nactive--;
	while (rh->hi > 0 && rh->slots[rh->hi - 1].key == 0)
		rh->hi--;
	rh->dirty = 1;
}

/* (Re)start s as a sender first seen at now_ns, demand unknown. */
static void slot_start(mrp_rh *rh, mrp_rh_slot *s, uint64_t key, uint64_t now_ns)
{
	uint32_t idx = (uint32_t)(s - rh->slots);

	memset(s, 0, sizeof(*s));
	s->key = key;
	s->first_ns = now_ns;
	s->last_ns = now_ns;
	if (idx >= rh->hi)
		rh->hi = idx + 1;
	rh->dirty = 1;
}

#define CE_ONE 65536u    /* alpha 1.0 in Q16 */
#define CE_GAIN_SHIFT 1 /* alpha gain 1/2 per epoch */
#define CONTEND_PCT 98  /* share of capacity divided among 2+ senders
			 * while a queue is evident (queue_evident()) */
#define QUEUE_EPOCHS 16 /* epochs a CE or RETX arrival keeps it evident */
#define CE_CUT_SHIFT 3  /* marked arrivals take alpha/8 of the capacity off */
#define ADM_MARGIN_SHIFT 1 /* over several queues, credits take half the budget */
#define ADM_LONE_HOLD_SHIFT 2 /* a lone credit of a quarter of it holds it all */

/* Packets an active sender should have sent at an equal share within one
 * epoch: with fewer, a rate sample is mostly rounding (one packet more or
 * less), and a demand built from it starves the sender. */
#define EPOCH_PKTS 4

/* The epoch: epoch_ns, or longer when so many senders share the capacity
 * that an equal share sends fewer than EPOCH_PKTS of the largest packets
 * seen in epoch_ns. */
static uint64_t epoch_len(const mrp_rh *rh)
{
	uint64_t need;

	if (rh->nactive < 2 || rh->capacity_bps == 0 || rh->max_pkt_bytes == 0)
		return rh->epoch_ns;
	need = mrp_mul_div((uint64_t)EPOCH_PKTS * rh->max_pkt_bytes * 8 * rh->nactive,
			   NS_PER_S, rh->capacity_bps);
	return need > rh->epoch_ns ? need : rh->epoch_ns;
}

/*
 * Whether s, just measured, was held back in the epoch: it said so in at
 * least half of what it sent (HELD), or, not saying, it used at least half
 * of the water level (its own share follows its rate: no yardstick). A
 * sender that signals and sent nothing in the epoch (stalled after a loss,
 * or not run by its host) keeps its verdict; one that does not signal is
 * judged by its rate.
 */
static void held_check(const mrp_rh *rh, mrp_rh_slot *s)
{
	if (s->signals) {
		if (s->epoch_bytes > 0)
			s->held = s->epoch_held_bytes >= s->epoch_bytes - s->epoch_held_bytes;
		return;
	}
	s->held = rh->level_bps > 0 && s->rate_bps >= rh->level_bps / 2;
}

/* What is still out adm_ttl_ns after the last grant returns (unused, or
 * its packets lost); and credit that has not been returning for 4 x epoch_ns
 * (its data has arrived; the rest went unused, its senders' first ACKs
 * ending it) is no queue in front of us: adm_idle. */
/* No credit out any more: all of the budget can be handed out again. */
static void adm_clear(mrp_rh *rh)
{
	rh->adm_out = 0;
	rh->adm_hold = 0;
	rh->adm_credits = 0;
	rh->dirty = 1;
}

static void adm_expire(mrp_rh *rh, uint64_t now_ns)
{
	/* (not before its data can have arrived: adm_rtt_ns) */
	uint64_t ttl = rh->adm_rtt_ns > rh->adm_ttl_ns ? rh->adm_rtt_ns : rh->adm_ttl_ns;
	if (rh->adm_out && elapsed_ns(now_ns, rh->adm_at_ns) >= ttl)
		adm_clear(rh);
	uint64_t last = rh->adm_ret_ns > rh->adm_at_ns ? rh->adm_ret_ns : rh->adm_at_ns;
	uint8_t idle = rh->adm_out && elapsed_ns(now_ns, last) > 4 * rh->epoch_ns;
	if (idle != rh->adm_idle) {
		rh->adm_idle = idle;
		rh->dirty = 1;
	}
}

/*
 * End the measurement epoch if epoch_ns has passed: each sender active for
 * the whole epoch gets a rate sample (bytes over the time actually elapsed,
 * which may span several epochs if nobody called), folded into rate_bps with
 * weight 1/2; a sender that joined during the epoch only starts counting
 * from the next one. Senders idle longer than idle_ns are expired.
 */
static void epoch_tick(mrp_rh *rh, uint64_t now_ns)
{
	uint64_t el = elapsed_ns(now_ns, rh->epoch_start_ns);

	/* (epoch_len() is at least epoch_ns: its division only past that) */
	if (el == 0 || el < rh->epoch_ns || el < epoch_len(rh))
		return;
	for (uint32_t i = 0; i < rh->hi; i++) {
		mrp_rh_slot *s = &rh->slots[i];
		uint64_t sample;

		if (s->key == 0)
			continue;
		if (slot_expired(rh, s, now_ns)) {
			slot_free(rh, s);
			continue;
		}
		if (s->first_ns <= rh->epoch_start_ns && !s->waiting) {
			sample = mrp_mul_div(s->epoch_bytes, 8 * NS_PER_S, el);
			if (s->measured)
				/* (a + b) / 2 without overflow */
				sample = (s->rate_bps >> 1) + (sample >> 1) +
					 (s->rate_bps & sample & 1);
			s->rate_bps = sample;
			s->measured = 1;
			held_check(rh, s);
		}
		s->epoch_bytes = 0;
		s->epoch_held_bytes = 0;
	}
	/* alpha += (F - alpha) / 2, F the marked share of this epoch */
	uint64_t f = rh->epoch_bytes ? mrp_mul_div(rh->epoch_ce_bytes, CE_ONE, rh->epoch_bytes) : 0;
	/* (the decay rounded up, so that alpha reaches 0 when nothing is
	 * marked: rounded down it stayed at 1/65536, a cut forever) */
	uint32_t decay = (uint32_t)((rh->ce_alpha_q16 + (1u << CE_GAIN_SHIFT) - 1) >> CE_GAIN_SHIFT);
	rh->ce_alpha_q16 = (uint32_t)(rh->ce_alpha_q16 - decay + (f >> CE_GAIN_SHIFT));
	rh->epoch_bytes = 0;
	rh->epoch_ce_bytes = 0;
	rh->epoch_start_ns = now_ns;
	rh->dirty = 1;
}

/* What s would use if allowed: unknown (infinite) until measured, and
 * while it is held back. */
static uint64_t demand(const mrp_rh *rh, const mrp_rh_slot *s, uint64_t floor_bps)
{
	uint64_t d;

	if (!s->measured || s->held)
		return UINT64_MAX;
	d = mrp_mul_div(s->rate_bps, 100 + (uint64_t)rh->headroom_pct, 100);
	return d > floor_bps ? d : floor_bps;
}

/* The part of the budget that credits may take together: all of it over
 * one queue, or for the only connection (it spreads its own packets evenly
 * over the planes); over several queues (the receiver's planes), with
 * other credits, half of it. Each sender picks a plane per packet on its
 * own, and what a dozen of them put into each plane's queue is not the
 * same: with the whole budget out every queue was 0.9-1 MB full of 1 MB,
 * and the first grants' data overflowed one (1,024:1 over 2 planes, 0.1 %
 * of the data packets; over 8 planes 1.2 %). */
static uint64_t adm_usable(const mrp_rh *rh)
{
	if (rh->adm_queues < 2 || (rh->adm_conns <= 1 && rh->adm_out == 0))
		return rh->adm_budget;
	return rh->adm_budget - (rh->adm_budget >> ADM_MARGIN_SHIFT);
}

/* Admission credit still out (at most the budget): data sent on it and not
 * yet arrived, which sits in the queues in front of this receiver. */
static uint64_t adm_queued(const mrp_rh *rh)
{
	/* (one credit alone, a lone connection's, is paced at a line rate
	 * no faster than ours: it builds no queue; and credit that stopped
	 * returning for 4 x epoch_ns went unused -- its senders' first ACKs
	 * ended it -- and queues nowhere: it returns at adm_ttl_ns) */
	if (rh->adm_budget == 0 || rh->adm_queues < 2 || rh->adm_credits < 2 || rh->adm_idle)
		return 0;
	uint64_t q = rh->adm_out < rh->adm_budget ? rh->adm_out : rh->adm_budget;
	/* (and less as the credit ages: what is left when it is taken back
	 * was not used, and the capacity must not come back all at once) */
	uint64_t age = elapsed_ns(rh->seen_ns, rh->adm_at_ns);
	if (age >= rh->adm_ttl_ns)
		return 0;
	return mrp_mul_div(q, rh->adm_ttl_ns - age, rh->adm_ttl_ns);
}

/* Whether an arrival in the last QUEUE_EPOCHS epochs (as of the last
 * arrival) said a queue in front of us is marking or something on the way
 * was lost. */
static int queue_evident(const mrp_rh *rh)
{
	return rh->queue_ns &&
	       elapsed_ns(rh->seen_ns, rh->queue_ns) < QUEUE_EPOCHS * epoch_len(rh);
}

/* What is divided among the senders: capacity_bps, less alpha/8 of it
 * while arrivals are CE-marked, 98 % of it when two or more senders
 * contend and a queue is evident (so that what their pacing leaves over
 * drains the queue in front of the receiver), and, with credit set, less
 * again while admission credit sits in several queues (adm_queued()). A
 * grant is a part of it without that last cut (mrp_rh_grant()). */
static uint64_t divided_q(const mrp_rh *rh, int credit)
{
	uint64_t d = rh->capacity_bps -
		     (mrp_mul_div(rh->capacity_bps, rh->ce_alpha_q16, CE_ONE) >> CE_CUT_SHIFT);
	uint32_t contenders = 0;

	for (uint32_t i = 0; i < rh->hi && contenders < 2; i++)
		contenders += rh->slots[i].key != 0;
	if (contenders >= 2) {
		if (queue_evident(rh))
			d = mrp_mul_div(d, CONTEND_PCT, 100);
		uint64_t q = credit ? adm_queued(rh) : 0;
		if (q)
			d -= mrp_mul_div(d, q, 2 * rh->adm_budget);
	}
	return d;
}

static uint64_t divided(const mrp_rh *rh)
{
	return divided_q(rh, 1);
}

/* Max-min fair water-filling of divided() over the active senders. */
static void recompute(mrp_rh *rh)
{
	uint64_t remaining = divided(rh);
	uint64_t level, floor_bps, extra = 0;
	uint32_t n = 0, nun;

	for (uint32_t i = 0; i < rh->hi; i++) {
		if (rh->slots[i].key == 0)
			continue;
		rh->slots[i].share_bps = UNSATURATED;
		n++;
	}
	rh->nactive = n;
	rh->dirty = 0;
	if (n == 0)
		return;
	floor_bps = (rh->capacity_bps / n) >> FLOOR_SHIFT;

	nun = n;
	for (int round = 0; round < MAX_ROUNDS && nun > 0; round++) {
		uint32_t froze = 0;

		level = remaining / nun;
		for (uint32_t i = 0; i < rh->hi; i++) {
			mrp_rh_slot *s = &rh->slots[i];
			uint64_t d;

			if (s->key == 0 || s->share_bps != UNSATURATED)
				continue;
			d = demand(rh, s, floor_bps);
			if (d == UNSATURATED || d > level)
				continue;
			/* d <= level = remaining / nun keeps remaining >= 0 */
			s->share_bps = d;
			remaining -= d;
			froze++;
		}
		nun -= froze;
		if (froze == 0)
			break;
	}

	if (nun > 0)
		level = remaining / nun;
	else
		extra = remaining / n; /* everyone fits: spread the leftover */
	rh->level_bps = nun > 0 ? level : 0;
	for (uint32_t i = 0; i < rh->hi; i++) {
		mrp_rh_slot *s = &rh->slots[i];

		if (s->key == 0)
			continue;
		if (s->share_bps == UNSATURATED)
			s->share_bps = level;
		else
			s->share_bps += extra;
		if (s->share_bps == 0)
			s->share_bps = 1; /* 0 on the wire means "no hint" */
	}
}

int mrp_rh_init(mrp_rh *rh, mrp_rh_slot *slots, uint32_t nslots,
		uint64_t capacity_bps, uint64_t now_ns)
{
	if (!rh || !slots || nslots == 0 || nslots > INT32_MAX || capacity_bps == 0)
		return MRP_ERR_INVAL;
	memset(slots, 0, (size_t)nslots * sizeof(*slots));
	memset(rh, 0, sizeof(*rh));
	rh->slots = slots;
	rh->nslots = nslots;
	rh->capacity_bps = capacity_bps;
	rh->epoch_ns = MRP_RH_DEFAULT_EPOCH_NS;
	rh->idle_ns = MRP_RH_DEFAULT_IDLE_NS;
	rh->headroom_pct = MRP_RH_DEFAULT_HEADROOM_PCT;
	rh->epoch_start_ns = now_ns;
	rh->adm_ttl_ns = MRP_RH_DEFAULT_ADM_TTL_NS;
	return 0;
}

void mrp_rh_set_capacity(mrp_rh *rh, uint64_t capacity_bps)
{
	if (!rh)
		return;
	rh->capacity_bps = capacity_bps;
	recompute(rh);
}

/*
 * The slot of sender key, taking one if it has none: the cached *pslot if
 * it still belongs to key, else a scan that finds key's slot, a free one or
 * one whose sender has been idle past idle_ns. MRP_ERR_FULL if none.
 */
static int slot_lookup(mrp_rh *rh, const uint32_t *pslot, uint64_t key,
		       uint64_t now_ns)
{
	int64_t found = -1, free_idx = -1, stale = -1;
	mrp_rh_slot *s;

	if (pslot && *pslot < rh->nslots && rh->slots[*pslot].key == key) {
		found = *pslot;
	} else {
		for (uint32_t i = 0; i < rh->hi; i++) {
			s = &rh->slots[i];
			if (s->key == key) {
				found = i;
				break;
			}
			if (s->key == 0) {
				if (free_idx < 0)
					free_idx = i;
			} else if (stale < 0 && slot_expired(rh, s, now_ns)) {
				stale = i;
			}
		}
	}
	if (found >= 0) {
		s = &rh->slots[found];
		/* back after idle_ns: a new sender as far as demand goes */
		if (slot_expired(rh, s, now_ns))
			slot_start(rh, s, key, now_ns);
		return (int)found;
	}
	if (free_idx < 0 && rh->hi < rh->nslots)
		free_idx = rh->hi; /* (every slot from hi up is free) */
	if (free_idx < 0 && stale >= 0) {
		slot_free(rh, &rh->slots[stale]);
		free_idx = stale;
	}
	if (free_idx < 0)
		return MRP_ERR_FULL;
	slot_start(rh, &rh->slots[free_idx], key, now_ns);
	rh->nactive++;
	return (int)free_idx;
}

int mrp_rh_arrival(mrp_rh *rh, uint32_t *pslot, uint64_t key, uint32_t bytes,
		   unsigned how, uint64_t now_ns)
{
	mrp_rh_slot *s;
	int idx;

	if (!rh || key == 0)
		return MRP_ERR_INVAL;
	epoch_tick(rh, now_ns);
	if (now_ns > rh->seen_ns)
		rh->seen_ns = now_ns;
	adm_expire(rh, now_ns);
	idx = slot_lookup(rh, pslot, key, now_ns);
	if (idx < 0)
		return idx;
	s = &rh->slots[idx];
	if ((how & MRP_RH_CREDIT) && rh->wait_ns && !s->measured) {
		/* its first round trip: its data on its first hint follows */
		s->waiting = 1;
		s->wait_until_ns = now_ns + rh->wait_ns;
	} else if ((how & MRP_RH_DRY) && !s->measured) {
		/* everything it had came on its credit: a demand of 0 until
		 * its next epoch says otherwise */
		s->measured = 1;
		s->held = 0;
		s->rate_bps = 0;
		s->waiting = 0;
		rh->dirty = 1;
	} else if (s->waiting && bytes) {
		/* its first data after the grant or the credit: measured
		 * from the next epoch */
		s->waiting = 0;
		s->first_ns = now_ns;
	}
	if (bytes > rh->max_pkt_bytes)
		rh->max_pkt_bytes = bytes;
	s->epoch_bytes = sat_add(s->epoch_bytes, bytes);
	if (how & MRP_RH_SIGNALS) {
		s->signals = 1;
		if (how & MRP_RH_HELD)
			s->epoch_held_bytes = sat_add(s->epoch_held_bytes, bytes);
	}
	rh->epoch_bytes = sat_add(rh->epoch_bytes, bytes);
	if (how & MRP_RH_CE)
		rh->epoch_ce_bytes = sat_add(rh->epoch_ce_bytes, bytes);
	if (how & (MRP_RH_CE | MRP_RH_RETX)) {
		if (!queue_evident(rh))
			rh->dirty = 1; /* the margin applies from now */
		rh->queue_ns = now_ns ? now_ns : 1;
	}
	if (now_ns > s->last_ns)
		s->last_ns = now_ns;
	if (pslot)
		*pslot = (uint32_t)idx;
	return idx;
}

uint64_t mrp_rh_share(mrp_rh *rh, uint32_t slot, uint64_t key, uint64_t now_ns)
{
	if (!rh)
		return 0;
	epoch_tick(rh, now_ns);
	adm_expire(rh, now_ns);
	if (key == 0 || slot >= rh->nslots || rh->slots[slot].key != key)
		return 0;
	if (rh->dirty)
		recompute(rh);
	return rh->slots[slot].share_bps;
}

/* Whether a lone credit of credit bytes keeps the link busy for an epoch or
 * more at rh's capacity (unknown capacity: taken as long). */
static int lone_run_is_long(const mrp_rh *rh, uint64_t credit)
{
	if (rh->capacity_bps == 0)
		return 1;
	return mrp_mul_div(credit, 8 * NS_PER_S, rh->capacity_bps) >= rh->epoch_ns;
}

uint64_t mrp_rh_admit(mrp_rh *rh, uint32_t pkt_bytes, uint64_t want_bytes, uint64_t now_ns)
{
	uint64_t credit, free_bytes, want_pkts;

	if (!rh || pkt_bytes == 0)
		return 0;
	epoch_tick(rh, now_ns);
	adm_expire(rh, now_ns);
	uint64_t budget = adm_usable(rh);
	free_bytes = budget > rh->adm_out ? budget - rh->adm_out : 0;
	credit = budget / (rh->adm_conns ? rh->adm_conns : 1);
	if (credit > free_bytes)
		credit = free_bytes;
	credit -= credit % pkt_bytes;
	want_pkts = want_bytes / pkt_bytes + (want_bytes % pkt_bytes != 0);
	int lone = rh->adm_conns <= 1 && rh->adm_out == 0 && rh->adm_budget;
	if (lone) {
		/* a lone connection: the line rate for its first round trip */
		uint64_t lone_pkts = rh->adm_lone_bytes / pkt_bytes;
		if (lone_pkts > want_pkts)
			lone_pkts = want_pkts;
		if (lone_pkts > credit / pkt_bytes)
			credit = lone_pkts * pkt_bytes;
	}
	if (want_pkts < credit / pkt_bytes)
		credit = want_pkts * pkt_bytes;
	if (credit) {
		/* (a lone credit of a quarter of the budget or more, whose
		 * run at our capacity lasts an epoch or longer, holds all of
		 * it: another credit's data would queue behind that run, see
		 * ratehint.h) */
		if (lone && credit >= rh->adm_budget >> ADM_LONE_HOLD_SHIFT &&
		    credit < rh->adm_budget && lone_run_is_long(rh, credit)) {
			rh->adm_out = rh->adm_budget;
			rh->adm_hold = rh->adm_budget - credit;
		} else
			rh->adm_out += credit;
		rh->adm_at_ns = now_ns;
		rh->adm_idle = 0;
		rh->adm_credits++;
		rh->dirty = 1;
	}
	return credit;
}

uint64_t mrp_rh_grant(mrp_rh *rh, uint32_t *pslot, uint64_t key, uint64_t now_ns)
{
	int idx = mrp_rh_arrival(rh, pslot, key, 0, 0, now_ns);
	uint64_t share, fair;

	if (idx < 0)
		return 0;
	mrp_rh_slot *s = &rh->slots[idx];
	if (rh->wait_ns && !s->measured && s->epoch_bytes == 0) {
		/* (no data from it yet: it waits for its first) */
		s->waiting = 1;
		s->wait_until_ns = now_ns + rh->wait_ns;
	}
	share = mrp_rh_share(rh, (uint32_t)idx, key, now_ns);
	/* (a part of what the shares divide, its margin and CE cut
	 * included: requests answered together add up to no more; the
	 * credit's own cut left out: cutting the grants as well left the
	 * link half idle while their first packets, one per pacing interval
	 * of hundreds of microseconds, were on their way) */
	fair = divided_q(rh, 0) / (rh->adm_conns ? rh->adm_conns : 1);
	return share < fair ? share : (fair ? fair : 1);
}

void mrp_rh_admit_return(mrp_rh *rh, uint64_t bytes)
{
	if (!rh)
		return;
	rh->adm_out = rh->adm_out > bytes ? rh->adm_out - bytes : 0;
	rh->adm_ret_ns = rh->seen_ns;
	/* (a lone credit's data has all arrived: its run is over, and the
	 * budget it held is free again) */
	if (rh->adm_hold && rh->adm_out <= rh->adm_hold)
		rh->adm_out = 0;
	if (!rh->adm_out && (rh->adm_credits || rh->adm_hold))
		adm_clear(rh);
}

void mrp_rh_admit_end(mrp_rh *rh, uint64_t since_ns)
{
	if (!rh || rh->adm_credits != 1 || rh->adm_at_ns > since_ns)
		return;
	adm_clear(rh);
	rh->adm_ret_ns = rh->seen_ns;
}

void mrp_rh_release(mrp_rh *rh, uint32_t slot, uint64_t key)
{
	if (!rh || key == 0 || slot >= rh->nslots || rh->slots[slot].key != key)
		return;
	slot_free(rh, &rh->slots[slot]);
}
