/*
 * Receiver-driven rate hints.
 *
 * A receiving endpoint knows its inbound capacity and who is sending to it.
 * mrp_rh tracks the active senders (one slot per inbound connection), measures
 * each one's arrival rate, and allots each a max-min fair share of the
 * capacity weighted by demand: a sender that uses less than an equal share
 * keeps what it uses (plus headroom to grow), and what it leaves is divided
 * among the others. A sender seen for the first time has unknown demand and
 * gets an equal share at once, so an incast of N senders is told C/N in the
 * first ACK each receives. Every ACK to that sender carries its share.
 *
 * What a sender uses is its demand only when it sends all it has. A sender
 * held back -- by its share, by its window after a loss, by a host that
 * does not run it often enough -- uses less than its share, and reading that
 * as demand would cut its share to what it used, then to what it used of
 * that: a ratchet down to the floor, out of which it cannot climb faster
 * than the headroom. So a sender that is held back has unknown demand, as a
 * new one does, and gets the water level. A sender that is held back by
 * its share says so on its data packets (the flag HELD, SPEC 6.5); one held
 * back by anything else (its window after a loss, its own link) does not:
 * its rate is its demand, and the share it leaves goes to the others. The
 * share then stays above what it uses, and when its window grows past that
 * share the share binds and the sender says HELD again. For a sender that
 * never says (the capability is not negotiated), a measured rate of at
 * least half the water level is taken as held back.
 *
 * The caller provides the slot array; nothing here allocates. Pure
 * computation: times in ns come in as arguments, rates in bit/s.
 */
#ifndef MRP_RATEHINT_H
#define MRP_RATEHINT_H

#include <stdint.h>

/* Defaults mrp_rh_init() sets; the caller may change the fields after it. */
#define MRP_RH_DEFAULT_EPOCH_NS 20000
#define MRP_RH_DEFAULT_IDLE_NS 200000
#define MRP_RH_DEFAULT_HEADROOM_PCT 25
#define MRP_RH_DEFAULT_ADM_TTL_NS 200000

typedef struct mrp_rh_slot {
	uint64_t key;          /* caller's id of the sender (e.g. conn pointer); 0 = free */
	uint64_t first_ns;     /* when this sender became active */
	uint64_t last_ns;      /* last arrival */
	uint64_t epoch_bytes;  /* bytes arrived in the current measurement epoch */
	uint64_t rate_bps;     /* measured arrival rate (EWMA over epochs) */
	uint64_t share_bps;    /* current allotment; never 0 once computed */
	uint64_t epoch_held_bytes; /* ... of epoch_bytes, those marked HELD */
	uint8_t measured;      /* rate_bps holds at least one full epoch */
	uint8_t signals;       /* its arrivals say whether they are HELD */
	uint8_t held;          /* held back in its last measured epoch: demand unknown */
	uint8_t waiting;       /* between its first round trip and its data on its
				 * first hint (wait_ns): counted, not measured */
	uint64_t wait_until_ns; /* ... active, unmeasured, until then at most */
} mrp_rh_slot;

typedef struct mrp_rh {
	mrp_rh_slot *slots;
	uint32_t nslots;
	uint32_t hi;            /* every slot from hi up is free: the scans stop
				 * there, not at nslots */
	uint32_t nactive;
	uint64_t capacity_bps;  /* inbound capacity shared by all senders */
	uint64_t epoch_ns;      /* measurement epoch (default 20 us); longer while
				 * an equal share of the capacity sends fewer than
				 * 4 of the largest packets seen in it (many
				 * senders), so a rate sample is not mere rounding */
	uint64_t idle_ns;       /* a sender idle this long is no longer active (default
				 * 200 us), or longer while its share sends fewer than 4
				 * of the largest packets seen in it (many senders) */
	uint32_t headroom_pct;  /* demand = measured rate * (100 + headroom) / 100 (default 25) */
	uint64_t epoch_start_ns;
	uint64_t epoch_bytes;   /* bytes that arrived in this epoch, all senders */
	uint64_t epoch_ce_bytes; /* ... of which CE-marked */
	uint32_t ce_alpha_q16;  /* EWMA of the CE-marked share (1.0 = 65536) */
	uint64_t queue_ns;      /* the last arrival marked CE or RETX (a queue
				 * in front of us, or a loss on the way); 0 =
				 * none yet */
	uint32_t max_pkt_bytes; /* largest arrival seen (sizes the epoch) */
	uint64_t level_bps;     /* the water level of the last division; 0 when
				 * every demand fitted */
	uint8_t dirty;          /* shares need recomputing */
	/* First-round-trip admission (mrp_rh_admit(), SPEC 6.6) */
	uint64_t adm_budget;    /* bytes the receiver can absorb at once (B);
				 * 0 = no credit is ever given */
	uint64_t adm_out;       /* credit handed out and not yet returned */
	uint64_t adm_at_ns;     /* the last grant */
	uint64_t adm_ttl_ns;    /* credit returns to the pool this long after
				 * the last grant (default MRP_RH_DEFAULT_ADM_TTL_NS),
				 * or after adm_rtt_ns if that is longer */
	uint64_t adm_rtt_ns;    /* the longest a credit's data may take to
				 * arrive: the longest a round trip is taken to
				 * be (default 0: adm_ttl_ns alone); credit
				 * still out is not taken back before it */
	uint32_t adm_conns;     /* connections that may send to this receiver,
				 * kept by the caller (0 is taken as 1): the fair
				 * part of credits and grants */
	uint32_t adm_queues;    /* separate queues the budget spans (the
				 * receiver's planes), set by the caller; with
				 * more than one, credits together take at most
				 * half the budget (see mrp_rh_admit()) and
				 * credit still out is drained (see
				 * mrp_rh_arrival()) */
	uint32_t adm_credits;   /* credits handed out since none was out */
	uint64_t adm_ret_ns;    /* the last return of credit (as of the last
				 * arrival's time) */
	uint64_t seen_ns;       /* the last arrival's time */
	uint8_t adm_idle;       /* none returned for 4 x epoch_ns: the rest is unused */
	uint64_t adm_hold;      /* of adm_out, what a lone credit holds beyond
				 * itself (see mrp_rh_admit()) */
	uint64_t wait_ns;       /* how long a sender between its first round trip
				 * and the data sent on its first hint may be
				 * silent and still be counted (see
				 * mrp_rh_arrival()); 0 = as any sender */
	uint64_t adm_lone_bytes; /* the credit of a lone connection (adm_conns
				 * <= 1, no credit out) may exceed the budget,
				 * up to this (default 0: the budget bounds it
				 * too); see mrp_rh_admit() */
} mrp_rh;

/* Set up rh over caller storage of nslots slots (zeroed here). capacity_bps > 0,
 * 0 < nslots <= INT32_MAX (slot indexes are returned as int).
 * Returns 0 or MRP_ERR_INVAL. Defaults for the tunables above. */
int mrp_rh_init(mrp_rh *rh, mrp_rh_slot *slots, uint32_t nslots,
		uint64_t capacity_bps, uint64_t now_ns);

/* Change the capacity (plane down or up); shares are recomputed. With
 * capacity 0 every active sender is told 1 bit/s (a hint of 0 would mean
 * "no hint"): it may keep one packet in flight. */
void mrp_rh_set_capacity(mrp_rh *rh, uint64_t capacity_bps);

/* How an arrival came, for mrp_rh_arrival() (a mask; 0 = none of these). */
#define MRP_RH_CE 1u       /* the packet carried a CE mark */
#define MRP_RH_SIGNALS 2u  /* the sender marks HELD (negotiated) ... */
#define MRP_RH_HELD 4u  /* ... and marked this packet */
#define MRP_RH_CREDIT 8u /* sent on its admission credit (GRANT), and the
			  * sender has more to send (no ACK_REQ) */
#define MRP_RH_DRY 16u   /* sent on its admission credit with ACK_REQ: the
			  * sender's last for now, its queues run dry */
#define MRP_RH_RETX 32u  /* the packet retransmits data (RETX): something
			  * on the way was lost, perhaps to a full queue */

/*
 * Account bytes that arrived from sender key; how is a mask of MRP_RH_*.
 * *pslot caches the slot index between calls (pass UINT32_MAX the first
 * time; pslot may be NULL). Returns the slot index, MRP_ERR_INVAL for key 0,
 * or MRP_ERR_FULL when every slot is taken by an active sender (the sender
 * then gets no hint: the caller sends 0). A sender new to the table (or back
 * after idle_ns) has unknown demand and an equal share from its first
 * arrival; so has, from the end of an epoch on, a sender held back in it:
 * one whose arrivals in the epoch were at least half HELD (with
 * MRP_RH_SIGNALS), or, for one that does not signal, whose measured rate is
 * at least half the water level. Closes the measurement epoch (and expires
 * idle senders) when the epoch (epoch_ns, or longer, above) has passed.
 *
 * CE marks on arriving packets mean a queue in front of this receiver is
 * over its marking threshold: the capacity divided among the senders is
 * then reduced by alpha/8, alpha being the EWMA (gain 1/2 per epoch) of the
 * marked share of arriving bytes, so that a standing queue (left, say, by an
 * incast's first round trip) drains instead of being held at capacity. With
 * two or more senders, 98 % of the capacity is divided while a queue is
 * evident (an arrival marked CE or RETX in the last 16 epochs),
 * for the same reason; with none, all of it: two senders paced to the whole
 * link keep it busy and build no queue, where 98 % left it 2 % idle.
 * (A cut of alpha/2 drained more than the queue: hundreds of paced senders
 * arrive in bursts that mark now and then with no standing queue at all, and
 * the link ran 80 % busy.)
 *
 * A new sender's first round trip -- what it sends on its admission credit
 * (MRP_RH_CREDIT), or nothing at all after a grant (mrp_rh_grant()) -- is
 * followed by what it sends on the first hint it hears, a round trip after
 * that hint left: at a long round trip, a silence of up to a round trip.
 * With wait_ns set (the longest a round trip is taken to be), a sender
 * from its grant or its credit data until its first other data -- for at
 * most wait_ns after the grant or the last credit packet -- stays active
 * (not expired after idle_ns) and unmeasured (its silence is not a rate of
 * 0, nor is its credit's line rate a demand): it keeps an equal share, so
 * the others' hints make room for it from the start and their lower rates
 * and its data reach the receiver together. (Counted only until idle_ns,
 * at a 10 ms round trip the sender already running was told 87.5 of 100
 * Gbit/s during that silence, into the queue the credits had left, and
 * the newcomer was read as a demand of almost nothing when its data came.)
 * A credit packet with ACK_REQ, the sender's last for now (MRP_RH_DRY),
 * does not make it wait: it makes an unmeasured sender measured at once,
 * at a demand of 0 (all it had came on its credit), so that senders of
 * one short message each do not take equal shares from the others. One
 * that then sends more, held back, is an unknown demand again from its
 * next epoch.
 *
 * With a budget over several queues (adm_queues > 1: the receiver's planes,
 * each sender picking a plane per packet on its own) and credits of two or
 * more connections out, what is divided is less by min(out, budget) /
 * (2 x budget), that part shrinking linearly to 0 over adm_ttl_ns from the
 * last credit, and 0 once no credit has returned for 4 x epoch_ns (the
 * rest went unused): the credit's data sits in those queues, and rates that add up to
 * the capacity would hold them full, one of them overflowing (256:1 over 8
 * planes: 0.3-1.1 % of the data packets dropped in the first 100 us).
 */
int mrp_rh_arrival(mrp_rh *rh, uint32_t *pslot, uint64_t key, uint32_t bytes,
		   unsigned how, uint64_t now_ns);

/* The share allotted to the sender in slot, bit/s, after expiring idle
 * senders and recomputing if needed. 0 if slot is not valid for key (e.g.
 * the sender was expired: its next arrival takes a slot again).
 *
 * Shares are a max-min fair division of capacity_bps: a sender whose demand
 * (measured rate plus headroom_pct, at least 1/16 of an equal share) is below
 * the water level gets its demand; the others, every sender not measured
 * yet and every sender held back (above), get the level; if all demands fit, what is left is split equally on
 * top. The sum of shares never exceeds capacity_bps (except for the 1 bit/s
 * floor). Recomputed at most on each new sender, expiry, capacity change or
 * epoch end: O(hi) per round (hi: one past the highest slot in use), a few
 * rounds in practice, at most 32. */
uint64_t mrp_rh_share(mrp_rh *rh, uint32_t slot, uint64_t key, uint64_t now_ns);

/*
 * First-round-trip admission (SPEC 6.6): the credit, in bytes, a new
 * connection may send before it has heard from this receiver.
 * adm_conns counts the new one; pkt_bytes is a full data packet as the
 * credit counts it (header and payload); want_bytes what the sender has to
 * send, UINT64_MAX when the receiver cannot know it. The credit is
 * min(adm_budget / adm_conns, what of the budget is not out, want_bytes
 * rounded up to whole packets), in whole packets; 0 when that is less than
 * one packet: the sender then asks for a grant (a PROBE with GRANT) and
 * sends after the answer. The receiver's only connection so gets the whole
 * budget: with a budget of a bandwidth-delay product or more, it runs at
 * its line rate from its first packet.
 *
 * A lone connection -- adm_conns <= 1 and no credit out -- may be given
 * more than the budget: min(want_bytes, adm_lone_bytes) in whole packets
 * when that is more. Paced at a line rate no faster than this receiver's,
 * its data queues nowhere, and its first ACK ends its credit one round
 * trip after its first packet, whatever is left of it: so it runs at its
 * line rate for its whole first round trip, however long (a budget of a
 * queue is less than the bandwidth-delay product of a long-distance path).
 * A connection that arrives meanwhile finds that credit out and asks for a
 * grant, and the rate hints share the capacity from the lone one's first
 * ACK. The caller sets adm_lone_bytes only for a sender whose line rate is
 * no more than rh's capacity (a faster one would fill the queue at the
 * difference for a round trip).
 *
 * Otherwise the sum of the credits out never exceeds adm_budget, and over
 * several queues (adm_queues > 1) half of it unless the credit is the only
 * connection's: each sender picks a plane per packet on its own, and the
 * credits of a dozen senders do not fill the planes' queues alike (with
 * all of a 2 MB budget out over two 1 MB queues, 1,024 senders overflowed
 * one in their first round trip). Credit returns as
 * the data sent on it arrives (mrp_rh_admit_return()), and what is still
 * out adm_ttl_ns after the last grant returns then (credit unused, or its
 * packets lost: a sender must start using its credit within a shorter
 * time of getting it). With adm_budget 0 every credit is 0.
 */
uint64_t mrp_rh_admit(mrp_rh *rh, uint32_t pkt_bytes, uint64_t want_bytes, uint64_t now_ns);
/*
 * (continued) A lone credit of a quarter of the budget or more whose run
 * keeps rh's capacity busy for epoch_ns or longer holds the whole budget:
 * it counts as adm_budget out (or itself, if more), its data returns its
 * part as it arrives, and the rest returns with the last of that data (its
 * run is over), or is taken back with any credit still out (below). Paced
 * at the line, such a credit keeps the receiver's link busy for a long
 * run, up to the sender's whole first round trip, and the data of any
 * other credit given meanwhile only queues behind it: at a 4 ms round trip
 * and 25 Gbit/s, a second credit of 31 MB stood 10 ms in the queue, and
 * the connections granted after it waited there (0.03 of their share in
 * their third round trip). A connection that comes meanwhile asks for a
 * grant, which the rate hints divide (mrp_rh_grant()). A smaller lone
 * credit -- a short message's -- ends soon, and the credits given beside
 * it are what lets an incast of short messages finish in its first round
 * trip. So does a shorter run: behind a few microseconds of it, another
 * credit's data waits less than the round trip a grant would cost it (an
 * all-to-all's steps of 128 KiB into 256 KB queues held the budget in
 * turn, one connection of each step asking for a grant).
 *
 * Credit still out returns to the pool adm_ttl_ns after the last grant,
 * or adm_rtt_ns after it if that is longer: at a round trip of
 * milliseconds a credit's data has not arrived 200 us after the grant,
 * and giving its room again hands the same queue out twice (at 4 ms and
 * 100 Gbit/s four connections 0.5 ms apart were given 63.7 + 32 + 21 + 16
 * MB of a 64 MB budget: 1,513 packets dropped).
 */

/* The grant for a PROBE with GRANT from sender key (SPEC 6.6): the sender
 * takes a slot as on its first arrival (an equal share at once) and the
 * answer is its share, bit/s, but at most an equal part (1 / adm_conns)
 * of what the shares divide (98 % of the capacity among two or more
 * senders while a queue is evident, less while arrivals are CE-marked;
 * not less for credit still out): requests that arrive together are answered before the later ones
 * are counted active, and the first would otherwise be given the whole
 * capacity, the second half of it, and so on. 0: no slot free. With wait_ns, the slot
 * then waits for the sender's data (above). */
uint64_t mrp_rh_grant(mrp_rh *rh, uint32_t *pslot, uint64_t key, uint64_t now_ns);

/* bytes of data sent on an admission (flag GRANT) arrived: their credit
 * returns to the pool. */
void mrp_rh_admit_return(mrp_rh *rh, uint64_t bytes);

/* A connection whose first data sent on its credit arrived at since_ns now
 * sends without GRANT: it sends no more on that credit. If that credit is
 * the only one out and was handed out before since_ns (so it is the
 * connection's), what is left of it returns to the pool at once instead of
 * at the credit's time: a lone credit held the whole budget (above), and
 * the connections that come meanwhile need not ask for grants. */
void mrp_rh_admit_end(mrp_rh *rh, uint64_t since_ns);

/* Release a sender's slot (connection closed). */
void mrp_rh_release(mrp_rh *rh, uint32_t slot, uint64_t key);

#endif
