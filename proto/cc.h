/*
 * Congestion control framework.
 *
 * Windows are per path (PWND, bytes) and a connection's window is their sum
 * (QWND). An algorithm is an ops table selected by name; the engine calls it
 * on every ACK, CE report, loss, rate hint and RTO of a path. The baseline
 * ("baseline") is one entry of the table:
 *   - a CE mark cuts only the path that saw it, multiplicatively, at most once
 *     per RTT, by an amount that grows with the marked fraction (DCTCP-style
 *     alpha per path);
 *   - `loss_cut_count` or more losses on a path within one RTT cut it too,
 *     when they are also at least `loss_cut_pct` percent of the packets the
 *     path resolved in that RTT (a burst of losses is congestion; a steady
 *     trickle of random loss is not); fewer (isolated random loss) do
 *     not; losses of a connection far short of the receiver's hint (a
 *     bottleneck the receiver does not see) are a full queue's, not random,
 *     and the engine counts them per plane and halves the plane's paths
 *     together for loss_cut_count of them in an RTT (mrp_cc_path_cut());
 *     losses of packets sent before the last cut do not cut again (that
 *     cut answered them);
 *   - additive increase is coupled across the connection's paths: all paths
 *     together grow by about one MTU per RTT, so a many-path connection is no
 *     more aggressive at a shared bottleneck than a single-path one;
 *   - a path starts in slow start (cwnd += bytes acked, so QWND doubles per
 *     RTT however many paths there are) until its first cut; after an RTO
 *     (cwnd = min) it slow-starts back to half its old window; an RTO the
 *     engine finds spurious (its packets arrived after all) is undone with
 *     mrp_cc_path_raise();
 *   - windows stay within [min_cwnd, max_cwnd] (the max is capped by the
 *     256-packet SACK span);
 *   - the receiver's rate hint caps the connection's pacing rate and QWND;
 *     the engine also raises each path still in slow start (never cut) at
 *     once to its part of what the hinted rate carries in one RTT (opening
 *     the paths that needs), so a flow runs at its share from its second
 *     RTT instead of slow-starting for many; a path cut within the last 3
 *     RTTs of its own plane (or whose ssthresh an RTO set) is held, alone,
 *     and one cut longer ago slow-starts back to its part
 *     (mrp_cc_path_ramp()), or goes there at once where the queue that
 *     cut it has drained (scale-across distances: the capacity a sender
 *     that left gives back).
 *
 * Pure computation: no clock, no allocation. Times in ns, rates in bit/s.
 */
#ifndef MRP_CC_H
#define MRP_CC_H

#include <stdint.h>

/* Bounds mrp_cc_conn_init() checks params against. The window ceiling is the
 * span of the 256-bit per-path SACK bitmap (MRP_SACK_BITS in wire.h); the
 * packet-size bounds are wire.h's MRP_MTU_MIN/MAX, the latter with a data
 * packet's header. */
#define MRP_CC_MAX_CWND_PKTS 256
#define MRP_CC_MTU_MIN 256
#define MRP_CC_MTU_MAX (9000 + 72) /* MRP_MTU_MAX + MRP_DATA_HDR_LEN */
#define MRP_CC_MAX_GAIN_SHIFT 16
/* RTT assumed for "once per RTT" decisions while a path has no srtt_ns yet. */
#define MRP_CC_DEFAULT_RTT_NS 10000

typedef struct mrp_cc_params {
	uint32_t mtu;             /* bytes per full packet, as counted in flight
				   * (the engine: payload MTU + data header) */
	uint32_t init_cwnd_pkts;  /* initial PWND, packets (default 4: with 4 paths a
				   * connection starts with 16, about one BDP at
				   * 100 Gbit/s and 5 us, so a 64-sender incast
				   * fits the first round trip in a 1 MB queue) */
	uint32_t min_cwnd_pkts;   /* floor, packets (default 1) */
	uint32_t max_cwnd_pkts;   /* ceiling, packets, <= 256 (default 256) */
	uint32_t loss_cut_count;  /* losses within an RTT that cut (default 3) */
	uint32_t loss_cut_pct;    /* ... if also this share of the RTT's packets (default 40) */
	uint32_t ai_pkts_per_rtt; /* connection-wide additive increase (default 1) */
	uint32_t alpha_gain_shift; /* DCTCP g = 1/2^shift (default 4) */
	uint64_t line_rate_bps;   /* local link rate, caps pacing (0 = none) */
} mrp_cc_params;

/* Fill params with the defaults above for the given MTU. */
void mrp_cc_params_default(mrp_cc_params *p, uint32_t mtu);

enum { MRP_CC_CUT_LOSS = 1, MRP_CC_CUT_QUEUE_LOSS = 2 };

/* Per-path congestion state, embedded in each path. */
typedef struct mrp_cc_path {
	uint64_t cwnd;          /* PWND, bytes */
	uint64_t inflight;      /* bytes sent and not yet acked or lost (engine keeps it) */
	uint64_t srtt_ns;       /* smoothed RTT (engine keeps it, RFC 6298) */
	uint64_t min_rtt_ns;    /* smallest RTT of the path's route (engine keeps it;
				 * 0 again when the route changes) */
	uint64_t plane_rtt_ns;  /* smallest RTT of any route on the path's plane in
				 * the connection's life (engine keeps it; 0 =
				 * none yet): a new route's first samples may
				 * cross the queue the old one left, and its
				 * min_rtt_ns is then the queue's */
	uint64_t last_cut_ns;   /* time of the last multiplicative cut */
	uint64_t loss_epoch_ns; /* start of the current loss-counting RTT */
	uint32_t losses;        /* losses in the current epoch */
	uint32_t delivered;     /* packets acknowledged in the current epoch */
	uint32_t alpha_q16;     /* marked-fraction EWMA, 1.0 = 65536 */
	uint8_t loss_cut;       /* what the last cut was for: MRP_CC_CUT_LOSS,
				 * MRP_CC_CUT_QUEUE_LOSS (losses behind a bottleneck,
				 * mrp_cc_queue_loss()), 0 (an ECN mark, an RTO, or
				 * no cut yet) */
	uint8_t uncoupled;      /* set by the engine: the path's route is clean
				 * while its siblings' are marked; its additive
				 * increase is by its own window (grow()) */
	uint64_t acked_epoch;   /* bytes acked since the alpha epoch began */
	uint64_t marked_epoch;  /* bytes marked in that epoch */
	uint64_t alpha_epoch_ns;
	uint64_t ai_frac;       /* sub-byte remainder of additive increase, 1/65536 bytes */
	uint64_t ssthresh;      /* slow start while cwnd < ssthresh; UINT64_MAX until
				 * the first cut (set by path_init, cuts and RTO) */
	uint64_t lost_sent_ns;  /* newest send time of the packets found lost since
				 * the last on_loss (engine keeps it; on_loss
				 * clears it): losses of packets sent before the
				 * last cut belong to the episode it answered */
} mrp_cc_path;

/* Per-connection congestion state. */
typedef struct mrp_cc_conn {
	const struct mrp_cc_ops *ops;
	mrp_cc_params params;
	uint64_t qwnd;           /* sum of the active paths' cwnd (engine keeps it) */
	uint64_t rate_hint_bps;  /* latest hint from the receiver; 0 = none */
	uint64_t pacing_bps;     /* rate the engine paces the connection at, 0 = no
				  * limit: min of line_rate_bps, the hint and
				  * 5/4 * QWND / RTT, those that are known */
	uint64_t hint_rtt_ns;    /* RTT used to turn the hint into a window and QWND
				  * into a pacing rate (engine sets it, e.g. the
				  * connection's smoothed RTT); 0 = use the path's srtt_ns */
	uint64_t pace_rtt_ns;    /* RTT that turns QWND into a pacing rate, where
				  * the engine knows a better one than
				  * hint_rtt_ns (it sets it); 0 = hint_rtt_ns */
	uint8_t far_short;       /* the connection has been acknowledged at under
				  * half the receiver's hint for a while (engine
				  * sets it): what limits it is not the receiver,
				  * and its losses are a full queue's
				  * (mrp_cc_queue_loss()) */
	uint64_t acking_bytes;   /* the connection's bytes in flight on every path
				  * plus those of the ACK being handled (engine
				  * sets it before on_ack): what an RTT of ACKs
				  * brings back; 0 = unknown (QWND is used) */
} mrp_cc_conn;

typedef struct mrp_cc_ops {
	const char *name;
	int plane_cuts; /* the engine cuts a plane's paths together for losses
			 * behind a bottleneck (above) */
	/* A new path joins (or a path restarts after failure/re-port). Sets
	 * every field of p the algorithm owns; leaves inflight, srtt_ns and
	 * min_rtt_ns (the engine's) alone. */
	void (*path_init)(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns);
	/* acked_bytes newly acknowledged on p, with marked_bytes of them CE-marked
	 * (marked_bytes <= acked_bytes). Called once per processed ACK. */
	void (*on_ack)(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t acked_bytes,
		       uint64_t marked_bytes, uint64_t now_ns);
	/* lost_pkts packets detected lost on p (SACK gap). With plane_cuts
	 * set, losses for which mrp_cc_queue_loss() holds are the engine's
	 * to count per plane (it cuts the plane's paths together with
	 * mrp_cc_path_cut()); on_loss then only takes lost_sent_ns. */
	void (*on_loss)(mrp_cc_conn *cc, mrp_cc_path *p, uint32_t lost_pkts,
			uint64_t now_ns);
	/* The receiver's rate hint changed (0 = no hint). Every algorithm
	 * must store it in cc->rate_hint_bps: mrp_cc_path_room() reads it. */
	void (*on_rate_hint)(mrp_cc_conn *cc, uint64_t hint_bps, uint64_t now_ns);
	/* Retransmission timeout on p. */
	void (*on_rto)(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns);
} mrp_cc_ops;

/* The algorithm called name, or NULL. */
const mrp_cc_ops *mrp_cc_find(const char *name);
/* The i-th registered algorithm (for listing), NULL past the end. */
const mrp_cc_ops *mrp_cc_get(unsigned i);

/* Set up cc with the named algorithm. MRP_ERR_INVAL if an argument is NULL
 * or params are out of range (mtu outside MRP_CC_MTU_MIN..MAX; not
 * 1 <= min_cwnd_pkts <= init_cwnd_pkts <= max_cwnd_pkts <= MRP_CC_MAX_CWND_PKTS;
 * loss_cut_count or ai_pkts_per_rtt 0; ai_pkts_per_rtt > max_cwnd_pkts;
 * alpha_gain_shift > MRP_CC_MAX_GAIN_SHIFT), MRP_ERR_NOENT if name is
 * not a registered algorithm. */
int mrp_cc_conn_init(mrp_cc_conn *cc, const char *name,
		     const mrp_cc_params *params);

/*
 * Bytes the connection may add in flight on path p now: min of the path's
 * open window (cwnd - inflight) and what the rate hint leaves of QWND.
 * total_inflight is the connection's bytes in flight over all paths. The
 * hint's window is rate_hint_bps * rtt / 8e9 bytes plus one MTU, with rtt =
 * hint_rtt_ns, or p->srtt_ns while that is 0; with neither (or no hint) only
 * the path's window limits. Never negative.
 */
/* Raise p's window to at least cwnd (within the window bounds) and set its
 * ssthresh; pacing follows. The engine uses it to undo a cut that turned
 * out to be spurious (a retransmission timeout that was only delay: the
 * window and ssthresh from before it) and to size a new connection from
 * the receiver's rate hint (ssthresh UINT64_MAX: still slow start). */
void mrp_cc_path_raise(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t cwnd, uint64_t ssthresh);

/* Lower p's window to at most cwnd (within the window bounds; ssthresh
 * unchanged); pacing follows. The engine uses it when a first-round-trip
 * credit (SPEC 6.6) that opened the windows to the SACK span before any RTT
 * was known ends. */
void mrp_cc_path_lower(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t cwnd);

/* Let p grow to cwnd by slow start from where it is (ssthresh raised to
 * cwnd, within the window bounds; the window itself unchanged): the engine
 * raises a path that a cut no longer holds towards its part of the rate
 * hint this way, ACK by ACK, rather than at once. */
void mrp_cc_path_ramp(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t cwnd);

/* Whether the connection's losses are a bottleneck's, to be answered as a
 * full queue's whatever their share: it is far short of the receiver's hint
 * (cc->far_short). */
int mrp_cc_queue_loss(const mrp_cc_conn *cc);

/* Halve p's window for losses behind a bottleneck (the engine's per-plane
 * count, ops->plane_cuts): ssthresh at the new window, p->loss_cut =
 * MRP_CC_CUT_QUEUE_LOSS, the loss epoch restarted. */
void mrp_cc_path_cut(mrp_cc_conn *cc, mrp_cc_path *p, uint64_t now_ns);

uint64_t mrp_cc_path_room(const mrp_cc_conn *cc, const mrp_cc_path *p,
			  uint64_t total_inflight);

#endif
