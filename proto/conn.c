/*
 * The MetaRoCE transport engine: one connection. See conn.h for the API and
 * proto/SPEC.md for the protocol it speaks.
 *
 * Send side: posted work requests become messages (txmsg) queued per stream
 * in MSN order and on a connection-wide send queue in posting order. The
 * scheduler cuts MTU-sized segments and sprays them over paths with open
 * window, in small same-path bursts. Each path has its own PSN space and a
 * scoreboard ring of what it has in flight; an ACK resolves every PSN below
 * its next_psn: a set SACK bit is delivery, a clear one is loss (paths are in
 * order), and a lost segment goes to the retransmission queue to leave again
 * with a fresh PSN on the best path (in the tail of the data, twice: on two
 * paths, write_data()). A message completes when all of its
 * segments are acknowledged and every earlier message of its stream has.
 *
 * Receive side: each data packet is checked (stream, MSN window, placement
 * through the caller's memory-region lookup or the matched posted receive),
 * copied to its final address, and recorded in the per-path window; ACKs go
 * back every ack_every packets, at once on a gap or an ACK_REQ (for every
 * path then, and for ack_delay_ns after new data's ACK_REQ every packet on
 * arrival: the sender is draining), or after ack_delay_ns. A
 * message completes when all of its segments are placed and all earlier
 * messages of its stream have completed.
 *
 * RDMA READ (SPEC 5.8): a READ is a message of its requester's stream whose
 * one packet, the READ_REQ, carries no payload; it completes when all of
 * its READ_RESP bytes have arrived (rx_read_resp()). The responder checks
 * the source region on arrival, and when the READ_REQ's turn comes in MSN
 * order queues a response: a txmsg of opcode READ_RESP on no stream, sent
 * and retransmitted like any message and freed without a completion when
 * all of it is acknowledged (the rd_* functions).
 */
#include <string.h>

#include "arith.h"
#include "conn.h"
#include "sack.h"

/* Segment state in txmsg.segs[]: low 2 bits state, high 6 bits RTO count. */
#define SEG_PENDING 0  /* not sent, or waiting in the retransmission queue */
#define SEG_INFLIGHT 1
#define SEG_ACKED 2
#define SEG_STATE(b) ((b) & 3)
#define SEG_RTOS(b) ((b) >> 2)

/* Scoreboard entry state. */
#define ENT_INFLIGHT 1
#define ENT_DONE 2 /* resolved: acked, lost, or NAK'd */
/* Timed out: its data is queued again and it no longer counts in flight,
 * but its fate is not known yet. The next ACK that covers it resolves it:
 * received (the timeout was only delay: spurious, undone) or missing (lost,
 * counted then). */
#define ENT_RTO 3

/* Where a path may not carry data, by whom. */
#define DIS_OPERATOR 0x1
#define DIS_PLANE_DOWN 0x2
#define DIS_PLANE_DRAIN 0x4

/* Connection states. */
#define CONN_OPEN 0
#define CONN_CLOSING 1  /* CLOSE sent, waiting for the reply; still receiving */
#define CONN_CLOSED 2
#define CONN_DRAINING 3 /* closing: finishing the work already posted */

#define NEVER UINT64_MAX
/* The NAK and event queues are rings allocated on first use, doubling
 * from *_MIN up to *_LEN entries (most connections never NAK, and few
 * have their events read): a connection end that never needs them holds
 * none of their memory. */
#define EVQ_LEN 64
#define EVQ_MIN 8
#define NAKQ_LEN 64
#define NAKQ_MIN 4
/* A path's scoreboard ring starts at this many entries when the path sends
 * its first data packet (an end that only receives never has one). */
#define RING_MIN 16
/* Tail-loss probes a path sends at most between two ACKs, one PTO apart,
 * before its timeout (write_tlp()). */
#define TLP_MAX 4
/* PROBEs a SUSPECT path sends one PTO apart after a timeout's first one,
 * before it waits for its (doubling) timeout (SPEC 8). */
#define REPROBE_MAX 8
/* Repeats of a cold path's PROBE (write_probe()). */
#define COLD_REPROBE_MAX 2
/* Repair sent ahead when the send queues run dry (tail_ahead()): copies of
 * each path's TAIL_AHEAD_LAST newest packets and of the packets whose loss
 * packets sent in the last 1/TAIL_AHEAD_DIV of the largest RTT would show,
 * in TAIL_AHEAD_SLICES slices of that span, newest first; then second
 * copies over half the span; at most 1/TAIL_AHEAD_SHARE of the bytes sent
 * since the queues last ran dry. */
#define TAIL_AHEAD_DIV 5
#define TAIL_AHEAD_LAST 2
#define TAIL_AHEAD_SHARE 24
#define TAIL_AHEAD_SLICES 8
#define TAIL_AHEAD_MIN_RTT_NS 1000000

typedef struct txmsg txmsg;
typedef struct rxmsg rxmsg;
typedef struct rxrecv rxrecv;

/* (mrp_conn_post_send() sets every field: records are not zeroed) */
struct txmsg {
	txmsg *snext;     /* stream queue, MSN order */
	txmsg *qnext;     /* connection send queue (has unsent segments) */
	txmsg *rnext;     /* RNR wait list */
	uint64_t wr_id;
	const uint8_t *local;
	uint64_t remote_addr;
	uint64_t rnr_until;
	uint64_t first_retry_ns; /* first timeout or RNR NAK of it; NEVER: none yet */
	uint32_t rkey, imm, len, msn;
	uint32_t recv_idx; /* a READ consumes no receive: there, the response
			    * packets arrived (their map follows segs[0]) */
	uint32_t npkts, next_seg, nacked;
	uint32_t refs;    /* scoreboard and retransmission-queue entries */
	uint16_t stream;
	uint8_t opcode;
	uint8_t status;   /* MRP_WC_* */
	uint8_t done;     /* every segment acked, or failed */
	uint8_t detached; /* completed and off its stream: free when refs == 0 */
	uint8_t rnr_count;
	uint8_t in_rnr;
	uint8_t held;     /* READ_RESP: waits for its READ_REQ's turn (MSN order) */
	uint8_t exp;      /* sent in the expedited class (SPEC 6.7) */
	uint8_t segs[];
};

/* A posted receive: an entry of its stream's receive ring. */
struct rxrecv {
	uint64_t wr_id;
	uint8_t *buf;
	uint32_t len;
	uint8_t claimed; /* an rxmsg names it (by recv_idx) */
};

struct rxmsg {
	rxmsg *hnext;
	uint8_t *held;    /* WRITE*: the last packet's payload, arrived before
			   * the others were placed (place_write_last()) */
	uint32_t msn, len, npkts, nrecv, imm, recv_idx;
	uint16_t stream;
	uint8_t opcode;
	uint8_t status;   /* MRP_WC_* of a message that failed */
	uint8_t bits[];   /* segments placed */
};

/* Per-stream state: 56 bytes on LP64 (the issue allows 64). */
typedef struct stream {
	txmsg *head, *tail;   /* outstanding sends, MSN order */
	/* Posted receives not yet completed, a ring indexed by receive number:
	 * receive k (consumed <= k < posted) is rq[k & (rq_cap - 1)]. One array
	 * per stream, not a record per receive: posting and matching cost no
	 * allocator call and walk contiguous memory. */
	rxrecv *rq;
	uint32_t rq_cap;      /* a power of two, or 0 */
	uint32_t next_msn;    /* send: next MSN to assign */
	uint32_t next_recv;   /* send: next recv_idx to assign */
	uint32_t complete_msn; /* receive: next MSN to complete */
	uint32_t consumed;    /* receive: receives completed so far */
	uint32_t posted;      /* receive: receives posted so far */
	uint32_t outstanding; /* send: messages not yet completed */
} stream;

_Static_assert(sizeof(stream) <= 64, "per-stream state must stay within 64 bytes");

typedef struct txent {
	txmsg *m;
	uint64_t sent_ns;
	uint32_t seg;
	uint32_t bytes;
	uint8_t state;
	uint8_t held; /* ENT_RTO whose data was not queued again (path_timeout()) */
	uint8_t credit; /* sent on the first-round-trip credit (GRANT, SPEC 6.6) */
} txent;

/* Fields grouped by size (bytes, then 16- and 32-bit, then 64-bit and
 * records) so that the struct has no padding: every path costs its size
 * on both ends of a connection, and large all-to-alls hold millions. */
typedef struct path {
	uint16_t id, gen;
	uint8_t plane, state, disabled, open;
	uint16_t sport;
	uint8_t undo_valid;    /* an RTO may still be undone */
	uint8_t own_sample;    /* an ACK or PROBE answer of its own timed it in
				* this generation (not only a borrowed RTT) */
	uint8_t rto_was_delay; /* its last resolved timeout was only delay */
	uint8_t opened_cold;   /* opened before the connection's first RTT sample */
	uint8_t cold_timers;   /* its timers armed before the connection's first
				* RTT sample (rearm_unsampled()) */
	uint8_t tlp_pending : 1; /* a tail-loss probe is due */
	uint8_t tlp_n : 3;       /* tail-loss probes since the path's last ACK */
	uint8_t reprobe_n : 4;   /* PROBEs repeated since the path's last timeout */
	uint8_t have_counts;
	uint8_t probe_pending; /* a PROBE is waiting for its answer */
	uint8_t rx_open, rx_ack_now, rx_plane; /* receive side (below) */
	uint8_t pack_pending;
	uint8_t pack_grant;     /* ... and the PROBE asked for a grant (SPEC 6.6) */
	uint8_t probe_asked;    /* our pending PROBE asks for a grant (SPEC 6.6) */
	uint8_t rp_hot : 4;     /* re-path (SPEC 6.4): marked rounds in a row */
	uint8_t rp_clean : 4;   /* ... rounds in a row acknowledged without a mark
				 * (CLEAN_ROUNDS) */
	uint8_t rp_drain : 1;   /* ... its route changes once nothing is in
				 * flight; no new data until then */
	uint8_t rp_fresh : 1;   /* ... it changed, and no data sent on the new
				 * route is acknowledged yet */
	uint8_t rp_wary : 1;    /* ... onto a plane where a route failed lately
				 * (path_room()) */
	uint8_t cold_probe : 1; /* its PROBE asks for a first RTT sample of its
				 * plane (cold_probe_arm()) */
	uint8_t cold_sent : 1;  /* ... and has left (cold_probe_nxt/_seq are its) */
	uint16_t pack_gen;
	uint16_t pack_via;     /* path+1 of the ACK sent for the PROBE, 0 = none */
	/* send side */
	uint32_t snd_nxt, snd_una;
	uint32_t ring_cap;
	uint32_t rto_count;    /* consecutive RTOs / unanswered probes */
	uint32_t route_rtos;   /* ... of them, those that came while another
				* path of its plane worked (path_timeout()) */
	uint32_t rto_pending;  /* ENT_RTO entries not yet resolved */
	uint32_t fails;        /* re-ports since the path last answered */
	uint32_t fails_quick;  /* ... of them, those of an ACK-only path while
				* another path of its plane worked: its timeout
				* does not double for them */
	uint32_t ack_ce, ack_rcv; /* counters of the last ACK */
	uint32_t probe_seq;
	uint32_t rto_probe_seq; /* probe_seq at its last timeout: a PROBE_ACK
				 * answering a later one resolves (SPEC 8.3) */
	uint32_t cold_probe_nxt; /* snd_nxt when its cold probe left */
	uint32_t cold_probe_seq; /* probe_seq of its cold probe (repeats follow it) */
	uint32_t rx_pending;   /* receive side */
	uint32_t pack_seq;
	uint32_t ctl_unproven; /* ACKs sent on it since it last proved to work */
	uint32_t rp_acked, rp_marked; /* re-path: bytes acked / marked this round */
	uint64_t rp_moved_ns; /* re-path: when it last moved, until the move is judged */
	uint64_t rp_mv_acked, rp_mv_marked; /* ... bytes of its own acked / marked
					     * since, and the connection's at the move
					     * (rp_mv_cacked / _cmarked): was it marked
					     * less than its siblings? */
	uint64_t rp_mv_cacked, rp_mv_cmarked;
	mrp_cc_path cc;
	txent *ring;
	uint64_t rttvar_ns;
	uint64_t max_rtt_ns;   /* largest recent RTT sample, decaying towards srtt */
	uint64_t last_rtt_ns;  /* the newest RTT sample */
	uint64_t rto_at, tlp_at;
	uint64_t hold_at;      /* data a timeout held goes by then at the latest
				* (path_timeout()), NEVER for none */
	uint64_t undo_cwnd, undo_ssthresh; /* window before the first unresolved RTO */
	uint64_t last_ack_ns, last_tx_ns;
	uint64_t probe_at;     /* next probe to send, NEVER for none */
	uint64_t probe_sent_ns;
	uint64_t probe_rtt_ns;    /* RTT of the last answered PROBE */
	uint64_t probes_answered;
	uint64_t rp_round_ns;  /* re-path: start of the current round */
	/* receive side: the peer's path with this id */
	mrp_rxwin rx;
	uint64_t rx_ack_at;
	uint64_t rx_ts_ns, rx_arrival_ns;
	uint64_t pack_ts_ns, pack_arrival_ns;
	/* statistics */
	uint64_t tx_pkts, tx_bytes, retx_pkts, lost_pkts, acked_pkts, ce_pkts;
	uint64_t rx_pkts, rx_ce_pkts;
} path;

typedef struct rqent {
	txmsg *m;
	uint32_t seg;
	uint16_t avoid; /* a second copy (write_data()): id + 1 of the path
			 * the first went on; 0: a retransmission */
} rqent;

/* A ring of segments to send again. */
typedef struct rqring {
	rqent *e;
	uint32_t cap, head, len; /* cap: 0 or a power of two */
} rqring;

typedef struct nakent {
	mrp_nak nak;
	uint16_t via_path; /* the peer path the NAK is about */
} nakent;

/* Freed records of one size kept for reuse: a stream of small messages
 * then costs no allocator call per message. Up to 256 (about 33 KiB of
 * one-packet txmsgs, in the connection's memory budget): completions come
 * in bursts of an ACK's worth, and with 32 an application keeping 1,024
 * 64-byte SENDs in flight still took 60 % of its messages from the
 * allocator (callgrind of the sending daemon). */
typedef struct objcache {
	void *head;
	uint32_t n;
} objcache;

#define OBJCACHE_MAX 256

struct mrp_conn {
	mrp_conn_params p;
	mrp_mem mem;
	mrp_rng rng;
	mrp_mr_ops mr;
	mrp_cc_conn cc;
	uint8_t state;
	uint8_t close_pending;  /* 1 CLOSE, 2 CLOSE reply, 3 RESET */
	uint8_t peer_closing;   /* the peer sent CLOSE: reply once our sends are done */
	uint8_t close_tries;
	uint8_t close_reason;   /* the reason our next CLOSE carries (a reply: the peer's) */
	uint8_t tx_by_ref;      /* in mrp_conn_write_pkt_ref(): payloads by reference */
	uint8_t failed;         /* conn_fail() ended it: its RESET carries close_reason */
	uint16_t nak_via;       /* path id + 1 of the last NAK sent (0: none) */
	uint64_t close_at;

	stream *streams;
	uint32_t nstreams;      /* allocated */

	path **paths;           /* paths_cap slots, paths_cap <= max_paths */
	uint32_t paths_cap;
	uint32_t path_hi;       /* slots [path_hi, paths_cap) are all unused */
	uint32_t npaths;        /* slots in use for sending */
	uint8_t plane_dis[MRP_MAX_PLANES];
	uint32_t unproven;       /* plane pairs whose peer address awaits its
				  * proof (mrp_conn_params.unproven_planes) */
	int burst_path;
	uint32_t burst_left;
	uint64_t burst_last_ns;  /* when the burst's last packet left */
	uint64_t last_open_ns;

	txmsg *sq_head, *sq_tail;
	/* segments not yet sent of the queued messages (those marked done
	 * count until they reach the head and leave): hint_window()'s demand
	 * without a walk of the queue, which holds every message posted */
	uint64_t sq_unsent;
	txmsg *rnr_list;
	rqring rq;               /* retransmissions, and their second copies */
	rqring aq;               /* copies sent ahead of any loss (tail_ahead()):
				  * they go when rq is empty */
	uint64_t total_inflight;
	uint64_t credit_inflight; /* ... of which sent on the credit (path_room()) */
	uint64_t busy_since;      /* total_inflight last went from 0 to more */
	uint64_t silence_wake;    /* data waits for silence_allowance() to grow */
	uint64_t ahead_mark;     /* tx_bytes when the send queue last ran dry */
	uint64_t pace_at;

	rxmsg **rxh;            /* receive messages by (stream, msn) */
	uint32_t rxh_cap, rxh_len;

	mrp_cqe *cq;
	uint32_t cq_cap, cq_head, cq_len; /* cq_cap: 0 or a power of two */

	nakent *nakq;            /* NAKs to send, a ring; NULL until the first */
	uint32_t nakq_cap, nakq_head, nakq_len; /* nakq_cap: 0 or a power of two */

	mrp_event *evq;          /* path-state events, a ring; NULL until the first */
	uint32_t evq_cap, evq_head, evq_len; /* evq_cap: 0 or a power of two */

	uint32_t rh_slot;
	uint8_t fs_spans;        /* spans in a row far short of the hint (cc.far_short) */
	uint64_t fs_left;        /* window of the paths that left service while
				  * far short, for the active ones (set_state()) */
	uint64_t last_hint_bps;
	/* re-path (SPEC 6.4): the connection's acknowledged rate, measured
	 * over spans of at least two of its RTTs, and the path whose
	 * route is to change (id + 1, 0 = none: one at a time) */
	uint64_t rp_bytes, rp_since_ns, rp_rate_bps;
	uint64_t rp_mbytes;     /* ... of rp_bytes, those marked */
	uint64_t rp_cum_acked, rp_cum_marked; /* ... bytes acked / marked, ever */
	uint8_t rp_marking;     /* ... the last span had a mark (CLEAN_ROUNDS) */
	uint64_t rp_first_ns;   /* ... the first ACK that acknowledged data, 0 = none yet */
	uint16_t rp_path;
	uint8_t rp_short;       /* ... spans in a row in which the rate was short
				 * of the hint and did not grow */
	uint8_t rp_miss;        /* ... moves that did not pay (repath_judge()),
				 * halved by each that did */
	uint64_t rp_next_ns;    /* ... no move before this (backing off after misses) */
	uint8_t adm;            /* first-round-trip admission: ADM_* (SPEC 6.6) */
	uint64_t adm_left;      /* ADM_CREDIT: credit bytes not yet used */
	uint64_t adm_sent;      /* ... bytes sent under it */
	uint64_t adm_until;     /* ... to be started before then */
	uint64_t grant_rtt_ns;  /* the round trip of the request a grant
				 * answered: the window's and pacing's RTT
				 * until the first sample (adm_granted()) */
	uint8_t adm_open;       /* ... more than the initial window: the windows
				 * are open and paths open as they fill */
	uint64_t max_rtt_ns;    /* largest max_rtt_ns of the active paths */
	uint64_t base_rtt_ns;   /* the slowest plane's base RTT: the largest, over
				 * the planes, of the smallest min RTT of a plane's
				 * active paths (0 before a sample) */
	uint64_t plane_max_rtt_ns[MRP_MAX_PLANES]; /* ... of those on each plane */
	uint64_t plane_last_rtt_ns[MRP_MAX_PLANES]; /* the latest ACK's RTT sample there */
	uint64_t plane_min_rtt_ns[MRP_MAX_PLANES]; /* the smallest RTT sample there in
						    * the connection's life, whatever
						    * the route (0 = none yet) */
	uint64_t plane_rx_ns[MRP_MAX_PLANES]; /* last valid packet from the peer
					       * that arrived there (0: none) */
	uint64_t route_fail_ns[MRP_MAX_PLANES]; /* a path there last failed while
						 * the peer answered (0: never) */
	/* losses behind a bottleneck, counted per plane (plane_loss()) */
	uint64_t plq_cut_ns[MRP_MAX_PLANES];   /* the plane's last cut, 0 = none */
	uint64_t plq_epoch_ns[MRP_MAX_PLANES]; /* start of its loss-counting RTT */
	uint32_t plq_losses[MRP_MAX_PLANES];   /* losses counted in it */
	uint32_t plq_low[MRP_MAX_PLANES];      /* ... and those found with the queue low */
	uint64_t plq_ref_rtt_ns[MRP_MAX_PLANES]; /* the plane's largest RTT at a cut */
	uint8_t ctl_dirty;      /* some path may have a control packet to send */
	uint8_t pace_blocked;   /* data waits for pace_at */
	uint64_t pace_gap;      /* the last data packet's time at the pacing rate */
	uint64_t plane_pace_at[MRP_MAX_PLANES]; /* per-plane token buckets */
	uint64_t plane_wait_at; /* data waits for a paced plane, NEVER for none */
	uint8_t nic_blocked;    /* ... or met a plane the caller said is full */
	uint32_t ctl_rr;        /* round robin over paths for ACKs */
	uint64_t last_rx_ns;    /* last valid packet from the peer */
	uint64_t rx_flush_until; /* receive side: until then every data packet is
				  * acknowledged at once (an ACK_REQ came: the
				  * sender is going idle, SPEC 6.3) */
	uint64_t tx_outstanding; /* messages posted and not yet completed */
	uint64_t tx_exp_out;    /* ... of which expedited (txmsg.exp) */
	uint64_t tx_exp_bytes;  /* ... and their bytes (expedite_budget) */
	uint64_t rx_exp_until;  /* the last data that arrived was of a message of
				 * at most expedite_max, rto_min before this: our
				 * ACKs go in the expedited class (SPEC 6.7) */
	uint8_t rx_credit_ended; /* receive side: the end of the peer's credit
				  * was told to the allocator (SPEC 6.6) */
	uint64_t rx_credit_ns;  /* receive side: when the peer's first data sent
				 * on its credit arrived; 0: none yet */
	objcache tx1, rx1;      /* freed one-packet messages */
	txmsg *rd_head, *rd_tail; /* READ responses we hold, by snext, arrival order */
	uint32_t rd_resp;       /* of them: how many (<= rd_dest_max) */
	uint32_t rd_out;        /* READs of ours sent and not yet whole */
	uint8_t pending_fail;   /* a message failed fatally: tear down after this event */
	uint8_t cold_timers;    /* some path armed its timers before any RTT sample */
	/* The paths' and RNR timers (timers_compute()), kept while valid:
	 * callers ask for the deadline after every batch, and computing it is
	 * a scan over the paths. Every entry point that changes state clears
	 * dl_valid on entry, except those that move none of these timers
	 * (posting) or usually none: mrp_conn_write_pkt(), data packets in
	 * mrp_conn_read_pkt() and mrp_conn_handle_timeout() when nothing is
	 * due clear it where they move one. mrp_conn_check() verifies the
	 * cached value. */
	uint8_t dl_valid;
	uint64_t dl_tmr;
	mrp_conn_stats st;
};

/* First-round-trip admission states (mrp_conn.adm). */
enum {
	ADM_OFF,    /* not in force, or over: the first ACK or grant came */
	ADM_CREDIT, /* new data only within the credit */
	ADM_ASK,    /* no credit: a PROBE with GRANT asks, data waits */
};

/* ---- small helpers ---------------------------------------------------- */

/* A hint to start loading *p: used where the next record the engine will
 * need is known one step ahead and was last touched long ago (work posted
 * far ahead of the wire), so its cache miss overlaps other work. */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* A rarely taken branch's helper, kept out of line: inlined into
 * mrp_conn_write_pkt() it would make every call, most of which write a
 * data packet or nothing, save and restore more registers. */
#if defined(__GNUC__)
#define COLD __attribute__((noinline, cold))
#else
#define COLD
#endif

static inline int32_t sdiff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

static inline uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

const char *mrp_wc_status_str(int status)
{
	switch (status) {
#define X(name, val, msg)                                                       \
	case MRP_WC_##name:                                                     \
		return msg;
		MRP_WC_STATUS_MAP(X)
#undef X
	}
	return "unknown status";
}

const char *mrp_wc_status_name(int status)
{
	switch (status) {
#define X(name, val, msg)                                                       \
	case MRP_WC_##name:                                                     \
		return #name;
		MRP_WC_STATUS_MAP(X)
#undef X
	}
	return "UNKNOWN";
}

const char *mrp_path_state_name(int state)
{
	switch (state) {
#define X(name, val, msg)                                                       \
	case MRP_PATH_##name:                                                   \
		return msg;
		MRP_PATH_STATE_MAP(X)
#undef X
	}
	return "unknown";
}

void mrp_conn_params_default(mrp_conn_params *p)
{
	memset(p, 0, sizeof(*p));
	p->mtu = MRP_MTU_DEFAULT;
	p->max_streams = 1024;
	p->max_paths = 64;
	p->initial_paths = 4;
	p->nplanes = 1;
	p->sport_min = 49152;
	p->sport_max = 65535;
	p->cc_name = "baseline";
	mrp_cc_params_default(&p->cc, p->mtu);
	p->rto_min_ns = 100000;
	p->rto_max_ns = 100000000;
	p->rto_init_ns = 1000000;
	p->burst_pkts = 4;
	p->ack_every = 4;
	p->ack_delay_ns = 8000;
	p->retry_max = 8;
	p->rnr_retry_max = 7;
	p->rnr_delay_ns = 100000;
	p->suspect_rtos = 3;
	p->probe_idle_ns = 1000000000;
	p->msg_window = 1024;
	p->peer_timeout_ns = 2000000000ull;
	p->retry_timeout_ns = 500000000ull;
	p->wire_overhead = 66;
	p->caps = MRP_CAP_RATE_HINT | MRP_CAP_HELD;
	p->rd_max = 16;
	p->admit_ttl_ns = 100000;
	p->rd_dest_max = 64;
	p->expedite_budget = 1u << 20;
}

/* Doubles a ring of len entries from head (cap 0 or a power of two, at
 * most max) into a new array of 2 * cap (or min) entries starting at 0.
 * Returns 0, or MRP_ERR_NOMEM at max or when the allocator refuses (the
 * ring is then unchanged). */
static int qring_grow(mrp_conn *c, void **ring, uint32_t *cap, uint32_t *head,
		      uint32_t len, size_t esize, uint32_t min, uint32_t max)
{
	if (*cap >= max)
		return MRP_ERR_NOMEM;
	uint32_t ncap = *cap ? *cap * 2 : min;
	uint8_t *n = mrp_calloc(&c->mem, ncap, esize);
	if (!n)
		return MRP_ERR_NOMEM;
	const uint8_t *o = *ring;
	for (uint32_t i = 0; i < len; i++)
		memcpy(n + i * esize, o + ((*head + i) & (*cap - 1)) * esize, esize);
	mrp_free(&c->mem, *ring);
	*ring = n;
	*cap = ncap;
	*head = 0;
	return 0;
}

static void push_event(mrp_conn *c, const path *pa, int old, uint64_t now)
{
	if (c->evq_len == c->evq_cap &&
	    qring_grow(c, (void **)&c->evq, &c->evq_cap, &c->evq_head, c->evq_len,
		       sizeof(mrp_event), EVQ_MIN, EVQ_LEN) < 0) {
		c->st.events_dropped++;
		if (!c->evq_len)
			return; /* no memory for the queue: this event is lost */
		/* full: the oldest event makes room */
		c->evq_head = (c->evq_head + 1) & (c->evq_cap - 1);
		c->evq_len--;
	}
	mrp_event *ev = &c->evq[(c->evq_head + c->evq_len++) & (c->evq_cap - 1)];
	ev->ts_ns = now;
	ev->path_id = pa->id;
	ev->gen = pa->gen;
	ev->plane = pa->plane;
	ev->old_state = (uint8_t)old;
	ev->new_state = pa->state;
	ev->sport = pa->sport;
}

/*
 * A path that leaves service (disabled: its plane down or drained, or by
 * the operator; or failed) while its connection is far short of its hint
 * (cc.far_short) leaves its window to the paths still active, in equal
 * parts (hint_window()): what holds such a connection back lies beyond the
 * planes -- a slower hop of every plane, or in a daemon the hosts' CPUs --
 * and one plane fewer does not change it. Far short, the hint's window is
 * taken over at most twice the base RTT, and a daemon's host delay keeps
 * its smoothed RTT far above that (4-5 ms against 11 us on a loaded
 * loopback), so the paths left on one plane held half the connection's
 * window and regrew the rest by additive increase: a plane drill during
 * verified perf traffic beside a CPU hog never carried the rate again in
 * 9 runs of 51 and took 0.6-2.3 s in 11 (integration drill, its load pass;
 * within 1-23 ms in 15 of 15 with the engine before far_short). A
 * path's window before a timeout took it is half of it, its ssthresh. Not
 * a path that is only suspect: most come back, and with their windows
 * handed out at each timeout, four flows joining one hidden 10 Gbit/s hop
 * 3 ms apart shared it less evenly (Jain 0.944, asserted >= 0.95).
 */
static void set_state(mrp_conn *c, path *pa, int state, uint64_t now)
{
	if (pa->state == state)
		return;
	int old = pa->state;
	pa->state = (uint8_t)state;
	if ((state == MRP_PATH_DISABLED || state == MRP_PATH_FAILED) &&
	    (old == MRP_PATH_ACTIVE || old == MRP_PATH_SUSPECT) && c->cc.far_short) {
		uint64_t w = pa->cc.cwnd;
		if (pa->cc.ssthresh != UINT64_MAX && pa->cc.ssthresh > w)
			w = pa->cc.ssthresh;
		c->fs_left = w > UINT64_MAX - c->fs_left ? UINT64_MAX : c->fs_left + w;
	}
	push_event(c, pa, old, now);
}

/* ---- completion queue ------------------------------------------------- */

static int cq_grow(mrp_conn *c)
{
	uint32_t ncap = c->cq_cap ? c->cq_cap * 2 : 64;
	mrp_cqe *n = mrp_calloc(&c->mem, ncap, sizeof(*n));
	if (!n)
		return MRP_ERR_NOMEM;
	for (uint32_t i = 0; i < c->cq_len; i++)
		n[i] = c->cq[(c->cq_head + i) & (c->cq_cap - 1)];
	mrp_free(&c->mem, c->cq);
	c->cq = n;
	c->cq_cap = ncap;
	c->cq_head = 0;
	return 0;
}

/* The next free completion slot, filled by the caller in place and taken
 * with c->cq_len++ (a completion built on the stack and copied in stalled
 * on the copy: its fields' stores do not forward to the wider loads of a
 * struct copy). NULL without memory. */
static inline mrp_cqe *cq_slot(mrp_conn *c)
{
	if (c->cq_len == c->cq_cap && cq_grow(c) < 0)
		return NULL;
	return &c->cq[(c->cq_head + c->cq_len) & (c->cq_cap - 1)];
}

static int cq_push(mrp_conn *c, const mrp_cqe *e)
{
	mrp_cqe *slot = cq_slot(c);
	if (!slot)
		return MRP_ERR_NOMEM;
	*slot = *e;
	c->cq_len++;
	return 0;
}

int mrp_conn_poll_cq(mrp_conn *c, mrp_cqe *out, int max)
{
	int n = 0;
	/* in at most two runs: to the end of the ring, then from its start */
	while (n < max && c->cq_len) {
		uint32_t run = c->cq_cap - c->cq_head;
		if (run > c->cq_len)
			run = c->cq_len;
		if (run > (uint32_t)(max - n))
			run = (uint32_t)(max - n);
		memcpy(out + n, c->cq + c->cq_head, run * sizeof(*out));
		n += (int)run;
		c->cq_head = (c->cq_head + run) & (c->cq_cap - 1);
		c->cq_len -= run;
	}
	return n;
}

/* ---- streams ---------------------------------------------------------- */

static stream *grow_streams(mrp_conn *c, uint16_t id)
{
	if (id >= c->p.max_streams)
		return NULL;
	uint32_t n = c->nstreams ? c->nstreams : 1;
	while (n <= id)
		n *= 2;
	if (n > c->p.max_streams)
		n = c->p.max_streams;
	stream *s = mrp_calloc(&c->mem, n, sizeof(*s));
	if (!s)
		return NULL;
	if (c->nstreams)
		memcpy(s, c->streams, c->nstreams * sizeof(*s));
	mrp_free(&c->mem, c->streams);
	c->streams = s;
	c->nstreams = n;
	return &c->streams[id];
}

/* Stream id, allocating the table up to it; NULL beyond max_streams or
 * without memory. */
static inline stream *get_stream(mrp_conn *c, uint16_t id)
{
	if (id < c->nstreams) /* (nstreams <= max_streams) */
		return &c->streams[id];
	return grow_streams(c, id);
}

/* n * size bytes, not zeroed; NULL on overflow or failure. */
static void *alloc_array(mrp_conn *c, size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size)
		return NULL;
	return c->mem.alloc(c->mem.ud, n * size);
}

/* ---- record caches ------------------------------------------------------- */

static void *cache_get(mrp_conn *c, objcache *oc, size_t size)
{
	void *p = oc->head;
	if (!p)
		return mrp_calloc(&c->mem, 1, size);
	oc->head = *(void **)p;
	oc->n--;
	memset(p, 0, size);
	return p;
}

static void cache_put(mrp_conn *c, objcache *oc, void *p)
{
	if (oc->n >= OBJCACHE_MAX) {
		mrp_free(&c->mem, p);
		return;
	}
	*(void **)p = oc->head;
	oc->head = p;
	oc->n++;
}

static void cache_drain(mrp_conn *c, objcache *oc)
{
	while (oc->head) {
		void *p = oc->head;
		oc->head = *(void **)p;
		mrp_free(&c->mem, p);
	}
	oc->n = 0;
}

/* One-packet messages (the common small case) and rxmsgs with a one-byte
 * segment map come from and go back to the caches; larger ones are
 * allocated and freed as they come. */
/* (not zeroed: mrp_conn_post_send() sets every field and segment) */
static txmsg *txmsg_alloc(mrp_conn *c, uint32_t npkts)
{
	if (npkts == 1 && c->tx1.head) {
		txmsg *m = c->tx1.head;
		c->tx1.head = *(void **)m;
		c->tx1.n--;
		return m;
	}
	return alloc_array(c, 1, sizeof(txmsg) + npkts);
}

static void txmsg_release(mrp_conn *c, txmsg *m)
{
	if (m->npkts == 1 && m->opcode != MRP_OP_READ_REQ) /* (a READ has its map) */
		cache_put(c, &c->tx1, m);
	else
		mrp_free(&c->mem, m);
}

static rxmsg *rxmsg_alloc(mrp_conn *c, uint32_t npkts)
{
	if (npkts <= 8)
		return cache_get(c, &c->rx1, sizeof(rxmsg) + 1);
	return mrp_calloc(&c->mem, 1, sizeof(rxmsg) + (npkts + 7) / 8);
}

static void rxmsg_release(mrp_conn *c, rxmsg *r)
{
	if (r->held) {
		mrp_free(&c->mem, r->held);
		r->held = NULL;
	}
	if (r->npkts <= 8)
		cache_put(c, &c->rx1, r);
	else
		mrp_free(&c->mem, r);
}

/* ---- send-side messages ----------------------------------------------- */

static void txmsg_put(mrp_conn *c, txmsg *m)
{
	if (m->refs == 0 && m->detached)
		txmsg_release(c, m);
}

static void txmsg_unref(mrp_conn *c, txmsg *m)
{
	m->refs--;
	txmsg_put(c, m);
}

/* Take m off the list of messages waiting out an RNR NAK, if it is on it. */
static void rnr_unlink(mrp_conn *c, txmsg *m)
{
	if (!m->in_rnr)
		return;
	txmsg **pp = &c->rnr_list;
	while (*pp && *pp != m)
		pp = &(*pp)->rnext;
	if (*pp)
		*pp = m->rnext;
	m->rnext = NULL;
	m->in_rnr = 0;
	c->dl_valid = 0; /* its wait was one of the timers */
}

/* Complete, in MSN order, the finished messages at the head of a stream. */
static void stream_complete_tx(mrp_conn *c, stream *s)
{
	while (s->head && s->head->done) {
		txmsg *m = s->head;
		mrp_cqe *e = cq_slot(c);
		if (!e)
			return; /* retried on the next event; nothing is lost */
		e->wr_id = m->wr_id;
		e->status = m->status;
		e->opcode = m->opcode;
		e->has_imm = m->opcode == MRP_OP_WRITE_IMM || m->opcode == MRP_OP_SEND_IMM;
		e->stream = m->stream;
		e->byte_len = m->status == MRP_WC_SUCCESS ? m->len : 0;
		e->imm = m->imm;
		c->cq_len++;
		s->head = m->snext;
		if (!s->head)
			s->tail = NULL;
		else
			PREFETCH(s->head);
		s->outstanding--;
		c->tx_outstanding--;
		c->tx_exp_out -= m->exp;
		c->tx_exp_bytes -= m->exp ? m->len : 0;
		/* Done while waiting out an RNR NAK (another copy of the
		 * NAK'd segment got through): off the wait list before it can
		 * be freed. */
		rnr_unlink(c, m);
		m->detached = 1;
		txmsg_put(c, m);
	}
}

/* ---- RDMA READ at the responder: the responses we hold ---------------- */

/* A response all of whose packets are acknowledged (or the connection
 * ends): off the list, freed once no scoreboard entry names it. */
static void rd_resp_done(mrp_conn *c, txmsg *m)
{
	txmsg **pp = &c->rd_head, *prev = NULL;
	while (*pp && *pp != m) {
		prev = *pp;
		pp = &(*pp)->snext;
	}
	if (*pp) {
		*pp = m->snext;
		if (c->rd_tail == m)
			c->rd_tail = prev;
		c->rd_resp--;
		c->tx_outstanding--;
	}
	m->snext = NULL;
	rnr_unlink(c, m); /* (never NAKed RNR by a conforming peer) */
	m->detached = 1;
	txmsg_put(c, m);
}

/* Every segment of m is acknowledged and it is done: complete it on its
 * stream, or let a READ response go. */
static void tx_finished(mrp_conn *c, txmsg *m)
{
	if (m->opcode == MRP_OP_READ_RESP)
		rd_resp_done(c, m);
	else
		stream_complete_tx(c, &c->streams[m->stream]);
}

static void sq_append(mrp_conn *c, txmsg *m)
{
	c->sq_unsent += m->npkts - m->next_seg;
	if (c->sq_tail)
		c->sq_tail->qnext = m;
	else
		c->sq_head = m;
	c->sq_tail = m;
}

static void sq_remove_head(mrp_conn *c)
{
	txmsg *m = c->sq_head;
	c->sq_unsent -= m->npkts - m->next_seg; /* (0 unless it left done) */
	c->sq_head = m->qnext;
	if (!c->sq_head)
		c->sq_tail = NULL;
	else
		PREFETCH(c->sq_head);
	m->qnext = NULL;
}

int mrp_conn_post_send(mrp_conn *c, const mrp_wr *wr, uint64_t now_ns)
{
	(void)now_ns; /* (posting moves no timer: the cached deadline stays) */
	if (c->state != CONN_OPEN || c->peer_closing)
		return MRP_ERR_STATE;
	if (!wr)
		return MRP_ERR_INVAL;
	int is_read = wr->opcode == MRP_OP_READ_REQ;
	if (is_read ? !c->p.read || (wr->len && !wr->sink)
		    : wr->opcode < MRP_OP_WRITE || wr->opcode > MRP_OP_SEND_IMM ||
			      (wr->len && !wr->local))
		return MRP_ERR_INVAL;
	if (wr->len > MRP_MSG_MAX)
		return MRP_ERR_INVAL;
	int is_write = wr->opcode == MRP_OP_WRITE || wr->opcode == MRP_OP_WRITE_IMM;
	if ((is_write || is_read) && wr->remote_addr > UINT64_MAX - wr->len)
		return MRP_ERR_INVAL;
	stream *s = get_stream(c, wr->stream);
	if (!s)
		return wr->stream >= c->p.max_streams ? MRP_ERR_INVAL : MRP_ERR_NOMEM;
	if (s->outstanding >= c->p.msg_window)
		return MRP_ERR_FULL;
	uint32_t npkts = wr->len > c->p.mtu ? (wr->len + c->p.mtu - 1) / c->p.mtu : 1;
	/* A READ sends one packet and expects npkts back: its map of them
	 * follows its one segment state. */
	txmsg *m = is_read ? alloc_array(c, 1, sizeof(txmsg) + 1 + (npkts + 7) / 8)
			   : txmsg_alloc(c, npkts);
	if (!m)
		return MRP_ERR_NOMEM;
	/* Every field, one by one: zeroing the record first compiles to a
	 * string store that cost a third of this function. (A new field of
	 * txmsg must be set here.) */
	m->snext = m->qnext = m->rnext = NULL;
	m->wr_id = wr->wr_id;
	m->local = is_read ? wr->sink : wr->local;
	m->remote_addr = is_write || is_read ? wr->remote_addr : 0;
	m->rnr_until = 0;
	m->first_retry_ns = NEVER;
	m->rkey = is_write || is_read ? wr->rkey : 0;
	m->imm = wr->opcode == MRP_OP_WRITE_IMM || wr->opcode == MRP_OP_SEND_IMM ? wr->imm : 0;
	m->len = wr->len;
	m->msn = s->next_msn++;
	m->recv_idx = wr->opcode != MRP_OP_WRITE && !is_read ? s->next_recv++ : 0;
	m->held = 0;
	if (is_read) {
		memset(m->segs + 1, 0, (npkts + 7) / 8);
		npkts = 1;
	}
	m->npkts = npkts;
	m->next_seg = m->nacked = m->refs = 0;
	m->stream = wr->stream;
	m->opcode = wr->opcode;
	m->status = MRP_WC_SUCCESS;
	m->done = m->detached = m->rnr_count = m->in_rnr = 0;
	/* Expedited (SPEC 6.7): a short message, behind none that is not. A
	 * path's packets in two classes would overtake each other: a bulk
	 * flow's last short message sent ahead of its queued packets reads
	 * as their loss. And within the connection's budget: a queue of
	 * short messages is bulk, and once one of them is not expedited,
	 * none after it is until it completes. */
	m->exp = c->p.expedite_max && wr->len <= c->p.expedite_max &&
		 c->tx_exp_out == c->tx_outstanding &&
		 (!c->tx_exp_out || c->tx_exp_bytes + wr->len <= c->p.expedite_budget);
	c->tx_exp_out += m->exp;
	c->tx_exp_bytes += m->exp ? wr->len : 0;
	if (npkts == 1)
		m->segs[0] = 0;
	else
		memset(m->segs, 0, npkts);
	if (s->tail)
		s->tail->snext = m;
	else
		s->head = m;
	s->tail = m;
	s->outstanding++;
	c->tx_outstanding++;
	sq_append(c, m);
	return 0;
}

/* Receives kept when a stream's ring empties; a larger ring is freed then,
 * so a burst of posted receives does not pin its memory for good. */
#define RQ_KEEP 64

static int rq_grow(mrp_conn *c, stream *s)
{
	uint32_t ncap = s->rq_cap ? s->rq_cap * 2 : 4;
	if (!ncap)
		return MRP_ERR_NOMEM; /* 2^31 receives posted: refuse, do not wrap */
	/* (not zeroed: only the entries of posted receives are ever read) */
	rxrecv *n = alloc_array(c, ncap, sizeof(*n));
	if (!n)
		return MRP_ERR_NOMEM;
	for (uint32_t k = s->consumed; k != s->posted; k++)
		n[k & (ncap - 1)] = s->rq[k & (s->rq_cap - 1)];
	mrp_free(&c->mem, s->rq);
	s->rq = n;
	s->rq_cap = ncap;
	return 0;
}

/* The oldest posted receive has completed. */
static void rq_consume(mrp_conn *c, stream *s)
{
	s->consumed++;
	/* A few entries ahead: the next one is usually in the same cache line
	 * (24-byte entries); measured, a prefetch of the next entry hid
	 * little of the miss, one 8 entries (3 lines) ahead most of it. */
	if (s->consumed != s->posted)
		PREFETCH(&s->rq[(s->consumed + 8) & (s->rq_cap - 1)]);
	else if (s->rq_cap > RQ_KEEP) {
		mrp_free(&c->mem, s->rq);
		s->rq = NULL;
		s->rq_cap = 0;
	}
}

int mrp_conn_post_recv(mrp_conn *c, uint16_t sid, uint64_t wr_id, uint8_t *buf,
		       uint32_t len, uint64_t now_ns)
{
	(void)now_ns;
	if (c->state != CONN_OPEN || c->peer_closing)
		return MRP_ERR_STATE;
	if (len && !buf)
		return MRP_ERR_INVAL;
	stream *s = get_stream(c, sid);
	if (!s)
		return sid >= c->p.max_streams ? MRP_ERR_INVAL : MRP_ERR_NOMEM;
	if (s->posted - s->consumed == s->rq_cap && rq_grow(c, s) < 0)
		return MRP_ERR_NOMEM;
	rxrecv *r = &s->rq[s->posted & (s->rq_cap - 1)];
	r->wr_id = wr_id;
	r->buf = buf;
	r->len = len;
	r->claimed = 0;
	s->posted++;
	return 0;
}

/* ---- retransmission queue --------------------------------------------- */

static int ring_push(mrp_conn *c, rqring *q, txmsg *m, uint32_t seg, uint16_t avoid)
{
	if (q->len == q->cap) {
		uint32_t ncap = q->cap ? q->cap * 2 : 64;
		rqent *n = mrp_calloc(&c->mem, ncap, sizeof(*n));
		if (!n)
			return MRP_ERR_NOMEM;
		for (uint32_t i = 0; i < q->len; i++)
			n[i] = q->e[(q->head + i) & (q->cap - 1)];
		mrp_free(&c->mem, q->e);
		q->e = n;
		q->cap = ncap;
		q->head = 0;
	}
	q->e[(q->head + q->len++) & (q->cap - 1)] = (rqent){ m, seg, avoid };
	m->refs++;
	return 0;
}

/* The head of q leaves it; the caller takes over its reference. */
static inline void ring_pop(rqring *q)
{
	q->head = (q->head + 1) & (q->cap - 1);
	q->len--;
}

/* Empties q, dropping its references. */
static void ring_drain(mrp_conn *c, rqring *q)
{
	while (q->len) {
		txmsg *m = q->e[q->head].m;
		ring_pop(q);
		txmsg_unref(c, m);
	}
}

static int rq_push_copy(mrp_conn *c, txmsg *m, uint32_t seg, uint16_t avoid)
{
	return ring_push(c, &c->rq, m, seg, avoid);
}

static int rq_push(mrp_conn *c, txmsg *m, uint32_t seg)
{
	return rq_push_copy(c, m, seg, 0);
}

/* ---- paths -------------------------------------------------------------- */

static uint64_t path_rto(const mrp_conn *c, const path *pa)
{
	uint64_t rto;
	if (pa->cc.srtt_ns == 0 && c->plane_max_rtt_ns[pa->plane])
		/* A path without an RTT sample of its own, beside paths to
		 * the same peer on its plane that have one: their largest
		 * recent RTT, doubled, rather than the initial timeout for an
		 * unknown network (a new path whose first packets a loss
		 * burst took held the end of a transfer for rto_init / 2).
		 * Only its own plane's: planes are separate networks, and
		 * one may be 50x further away than another (a path on it,
		 * timed from the near plane's RTT, sent its first window
		 * again for nothing: 0.26 % of a 64 MB flow's packets). The
		 * initial timeout bounds it only from above what its plane
		 * has measured, as mx + mx / 2 does a path's own (a plane
		 * whose RTTs a busy host stretched to 80 ms gave new paths
		 * 20 ms: each timed out before its first answer came and
		 * re-ported, on loopback beside a CPU hog up to 250 times in
		 * the first second of a transfer). */
		rto = max64(min64(2 * c->plane_max_rtt_ns[pa->plane], c->p.rto_init_ns),
			    c->plane_max_rtt_ns[pa->plane] + c->plane_max_rtt_ns[pa->plane] / 2);
	else if (pa->cc.srtt_ns == 0)
		rto = c->p.rto_init_ns;
	else {
		/* Its ACKs may come back by any return route of the plane
		 * (SPEC 6.3): wait for the plane's largest recent RTT too,
		 * not only its own, which decays towards its smoothed RTT
		 * between the rare ACKs that take the slowest route. */
		uint64_t mx = max64(pa->max_rtt_ns, c->plane_max_rtt_ns[pa->plane]);
		rto = max64(pa->cc.srtt_ns + 4 * pa->rttvar_ns, mx + mx / 2);
	}
	rto = max64(rto, c->p.rto_min_ns);
	for (uint32_t i = 0; i < pa->rto_count + pa->fails - pa->fails_quick && rto < c->p.rto_max_ns;
	     i++)
		rto *= 2;
	return min64(rto, c->p.rto_max_ns);
}

static uint16_t pick_sport(mrp_conn *c)
{
	uint32_t range = (uint32_t)c->p.sport_max - c->p.sport_min + 1;
	return (uint16_t)(c->p.sport_min + mrp_rand_below(&c->rng, range));
}

/* Whether pa was acknowledged within its last two smoothed RTTs before now:
 * what it measures moves only on ACKs, so only then is it news. A path's
 * ECN alpha steers new packets away from its plane (best_path()) only
 * then: a plane every sender left keeps the alpha that made them leave it;
 * read as current, it kept the plane idle until the others were as marked,
 * and then every sender came back to it at once (256:1 over 8 planes: one
 * plane's queue full while another's was empty, 0.3-0.6 % of the data
 * packets dropped after the first round trip). An idle path's smoothed RTT
 * paces the connection only then (recompute_qwnd()). */
static int acked_lately(const path *pa, uint64_t now)
{
	return pa->cc.srtt_ns && now - pa->last_ack_ns <= 2 * pa->cc.srtt_ns;
}

/* QWND = sum of the active paths' windows; the RTT that turns the rate hint
 * into a window is the largest smoothed RTT among them, so that the hint
 * never holds the slowest path below its share (hint_window() caps it at
 * twice the base RTT, base_rtt_ns). The RTT that turns QWND into the pacing
 * rate is the largest too, but of each path's smoothed RTT or, where its
 * newest sample is under half of that, the sample; and not of an idle path
 * no ACK has reached for two of its smoothed RTTs. (The hint's window kept
 * the smoothed RTTs: from the newest samples as well, reorder_25x_start_400g
 * seed 14 dropped 327 packets again. Paced at any newest sample under the
 * smoothed RTT, drop-tail behind a 250 Mbit/s hop fell from 0.94 to 0.91 of
 * the hop.) A host that was not scheduled for 40-90 ms (a daemon beside a
 * CPU hog) left every path smoothed RTTs of that size on a 10 ms route; the
 * samples after it came back at 10 ms, but the average took dozens of them
 * to follow, and the paths that then went idle (at a low pacing rate, each
 * packet goes to the emptiest path) kept theirs: the connection
 * was paced at a fifth of its plane for a second or more
 * (netns/multiplane_scaling; the simulator's stall_* scenarios: 1.6-7.3
 * times the stalls' length lost, now 0.9-1.6). */
static void recompute_qwnd(mrp_conn *c)
{
	uint64_t q = 0, rtt = 0, pace = 0, maxrtt = 0, base = 0, newest = 0;
	uint64_t pbase[MRP_MAX_PLANES] = { 0 };
	uint32_t n = 0;
	memset(c->plane_max_rtt_ns, 0, sizeof(c->plane_max_rtt_ns));
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (pa && pa->open && pa->state == MRP_PATH_ACTIVE)
			newest = max64(newest, pa->last_ack_ns);
	}
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (pa && pa->open && pa->state == MRP_PATH_ACTIVE) {
			q += pa->cc.cwnd;
			rtt = max64(rtt, pa->cc.srtt_ns);
			if (pa->cc.inflight || acked_lately(pa, newest))
				pace = max64(pace, pa->last_rtt_ns && 2 * pa->last_rtt_ns < pa->cc.srtt_ns
							   ? pa->last_rtt_ns : pa->cc.srtt_ns);
			maxrtt = max64(maxrtt, pa->max_rtt_ns);
			c->plane_max_rtt_ns[pa->plane] =
				max64(c->plane_max_rtt_ns[pa->plane], pa->max_rtt_ns);
			if (pa->cc.min_rtt_ns &&
			    (!pbase[pa->plane] || pa->cc.min_rtt_ns < pbase[pa->plane]))
				pbase[pa->plane] = pa->cc.min_rtt_ns;
			n++;
		}
	}
	for (uint32_t k = 0; k < MRP_MAX_PLANES; k++)
		base = max64(base, pbase[k]);
	c->base_rtt_ns = base;
	c->max_rtt_ns = maxrtt;
	c->cc.qwnd = q;
	c->cc.hint_rtt_ns = rtt ? rtt : c->grant_rtt_ns;
	c->cc.pace_rtt_ns = pace;
	c->st.npaths_active = n;
}

/* Grows the path pointer array to hold slot id (id < max_paths): it starts
 * at the connection's initial paths and doubles, up to max_paths, when a
 * path with a higher id is used. */
static int paths_grow(mrp_conn *c, uint32_t id)
{
	uint32_t ncap = c->paths_cap ? c->paths_cap : 1;
	while (ncap <= id)
		ncap *= 2;
	if (ncap > c->p.max_paths)
		ncap = c->p.max_paths;
	path **n = mrp_calloc(&c->mem, ncap, sizeof(*n));
	if (!n)
		return MRP_ERR_NOMEM;
	if (c->path_hi)
		memcpy(n, c->paths, c->path_hi * sizeof(*n));
	mrp_free(&c->mem, c->paths);
	c->paths = n;
	c->paths_cap = ncap;
	return 0;
}

static path *path_slot_new(mrp_conn *c, uint16_t id)
{
	if (id >= c->p.max_paths)
		return NULL;
	if (id >= c->paths_cap && paths_grow(c, id) < 0)
		return NULL;
	if (!c->paths[id]) {
		path *pa = mrp_calloc(&c->mem, 1, sizeof(*pa));
		if (!pa)
			return NULL;
		pa->id = id;
		pa->state = MRP_PATH_CLOSED;
		pa->rto_at = pa->tlp_at = pa->probe_at = pa->rx_ack_at = NEVER;
		pa->hold_at = NEVER;
		c->paths[id] = pa;
		if (id >= c->path_hi)
			c->path_hi = (uint32_t)id + 1;
	}
	return c->paths[id];
}

/* The path's route changed (opened, re-ported or moved to another source
 * port): its smallest RTT was the old route's, and starts again with the
 * next sample. Kept, a move to a longer route left it low, and everything
 * measured against it (the connection's base RTT, SPEC 6.5; `min_rtt_us`
 * in `show paths`) read the new route's base as a standing queue. */
static void path_new_route(const mrp_conn *c, path *pa)
{
	pa->cc.min_rtt_ns = 0;
	pa->cc.plane_rtt_ns = c->plane_min_rtt_ns[pa->plane];
}

/* Path slot id, allocated if it is not yet; NULL beyond max_paths or
 * without memory. */
static inline path *path_slot(mrp_conn *c, uint16_t id)
{
	if (id < c->paths_cap && c->paths[id])
		return c->paths[id];
	return path_slot_new(c, id);
}

/* The data of segment seg of m, sent in an entry now resolved as lost or
 * timed out, goes back to the retransmission queue (unless it was acked
 * meanwhile or the message is over); a timeout counts against the
 * message's retry budget. */
static void fail_with(mrp_conn *c, uint16_t reason);

static void seg_requeue(mrp_conn *c, txmsg *m, uint32_t seg, int by_rto, uint64_t now)
{
	uint8_t *sb = &m->segs[seg];
	if (SEG_STATE(*sb) == SEG_INFLIGHT && m->status == MRP_WC_SUCCESS && !m->done) {
		uint8_t rtos = SEG_RTOS(*sb);
		if (by_rto) {
			if (rtos < 63)
				rtos++;
			if (m->first_retry_ns == NEVER)
				m->first_retry_ns = now;
		}
		*sb = (uint8_t)(SEG_PENDING | (rtos << 2));
		/* Both a count and a time: a retransmission moves to another
		 * path with its own (short) timer, so retry_max timeouts alone
		 * can pass in a millisecond while the peer is merely busy. */
		if (rtos > c->p.retry_max && now - m->first_retry_ns >= c->p.retry_timeout_ns) {
			m->status = MRP_WC_RETRY_EXC;
			m->done = 1;
			fail_with(c, MRP_CLOSE_RETRY_EXCEEDED);
		} else if (!m->in_rnr) {
			rq_push(c, m, seg);
		}
	}
}

/* Resolve one in-flight scoreboard entry as lost: queue its segment again. */
static void ent_lost(mrp_conn *c, path *pa, txent *e, int by_rto, uint64_t now)
{
	txmsg *m = e->m;
	pa->cc.inflight -= e->bytes;
	c->total_inflight -= e->bytes;
	if (e->credit)
		c->credit_inflight -= e->bytes;
	e->state = ENT_DONE;
	if (e->sent_ns > pa->cc.lost_sent_ns)
		pa->cc.lost_sent_ns = e->sent_ns;
	pa->lost_pkts++;
	c->st.lost_pkts++;
	seg_requeue(c, m, e->seg, by_rto, now);
	e->m = NULL;
	txmsg_unref(c, m);
}

/*
 * Losses behind a bottleneck (mrp_cc_queue_loss(): the connection gets
 * far less than the receiver's hint, repath_round()) are
 * counted per plane, over all the connection's paths there, and
 * loss_cut_count of them in a round trip halve every active path of the
 * plane at once; losses of packets sent before the plane's last cut do
 * not count (that cut answered them). Cut path by path, a connection of
 * many paths was a stronger sender than one of few: a drop-tail overflow
 * spreads its losses thin over 64 paths, few reach the count, and each
 * cut halves a 64th of the window, so such a connection held 15-18 of a
 * 20 Gbit/s bottleneck against an older one of 8 paths (the uncoupled
 * decrease that gives n paths sqrt(n) times one path's window; the
 * increase is coupled already, cc.c). Cut together, a plane's paths take
 * one halving per overflow, like one flow.
 */
#define QLOW_MULT 4
static void plane_loss(mrp_conn *c, path *pa, uint32_t lost, uint64_t sent, uint64_t now)
{
	unsigned k = pa->plane;
	uint64_t rtt = max64(c->plane_max_rtt_ns[k], pa->cc.srtt_ns);
	if (!rtt)
		rtt = MRP_CC_DEFAULT_RTT_NS;
	if (c->plq_cut_ns[k] && (sent ? sent <= c->plq_cut_ns[k] : now - c->plq_cut_ns[k] < rtt))
		return;
	if (now - c->plq_epoch_ns[k] >= rtt) {
		c->plq_epoch_ns[k] = now;
		c->plq_losses[k] = 0;
		c->plq_low[k] = 0;
	}
	/*
	 * A loss found while the plane's queue is low is random, not the
	 * overflow's: a drop-tail queue overflows when full, and the ACK that
	 * finds the loss follows the lost packet through it. Low: the newest
	 * RTT sample on the plane is in the lower half between the path's
	 * smallest and the plane's RTT at its last cut (an overflow's; before
	 * the first, its largest recent one). Not the largest recent RTT
	 * alone: it decays towards the smoothed RTT, which a halved window's
	 * queue holds in the middle, and random losses there cut again and
	 * again (a hidden 25 Gbit/s hop per plane with 1 % random loss: 0.87
	 * of the goodput without it). Many low losses in a round trip
	 * (QLOW_MULT times the count) are an overflow still, whatever the
	 * RTT says: a reference left high by a path that moved must not stop
	 * the cuts.
	 */
	uint64_t lo = pa->cc.min_rtt_ns;
	uint64_t ref = c->plq_ref_rtt_ns[k] ? c->plq_ref_rtt_ns[k] : c->plane_max_rtt_ns[k];
	uint32_t *n = &c->plq_losses[k];
	if (lo && ref > lo && c->plane_last_rtt_ns[k] < lo + (ref - lo) / 2) {
		n = &c->plq_low[k];
		if (*n + (uint64_t)lost < (uint64_t)QLOW_MULT * c->p.cc.loss_cut_count) {
			*n += lost;
			return;
		}
	}
	*n = lost > UINT32_MAX - *n ? UINT32_MAX : *n + lost;
	if (*n < c->p.cc.loss_cut_count)
		return;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *q = c->paths[i];
		if (q && q->open && q->state == MRP_PATH_ACTIVE && q->plane == k)
			mrp_cc_path_cut(&c->cc, &q->cc, now);
	}
	c->plq_ref_rtt_ns[k] = max64(c->plq_ref_rtt_ns[k], c->plane_last_rtt_ns[k]);
	c->plq_low[k] = 0;
	c->plq_cut_ns[k] = now ? now : 1;
	c->plq_losses[k] = 0;
	recompute_qwnd(c);
}

/* lost packets of pa found lost: the algorithm's, and the plane's count. */
static void conn_on_loss(mrp_conn *c, path *pa, uint32_t lost, uint64_t now)
{
	uint64_t sent = pa->cc.lost_sent_ns;
	int plane = c->cc.ops->plane_cuts && mrp_cc_queue_loss(&c->cc);
	c->cc.ops->on_loss(&c->cc, &pa->cc, lost, now);
	if (plane && lost)
		plane_loss(c, pa, lost, sent, now);
}

/* The path's retransmission timer expired with e in flight: its data goes
 * back to the queue at once (or, hold: when it is found lost, SPEC 6.4),
 * but whether it was lost is left to the next ACK that covers it
 * (ENT_RTO). The entry keeps its reference to m. */
static void ent_timeout(mrp_conn *c, path *pa, txent *e, int hold, uint64_t now)
{
	pa->cc.inflight -= e->bytes;
	c->total_inflight -= e->bytes;
	if (e->credit)
		c->credit_inflight -= e->bytes;
	e->state = ENT_RTO;
	e->held = (uint8_t)hold;
	pa->rto_pending++;
	if (!hold)
		seg_requeue(c, e->m, e->seg, 1, now);
}

/* Resolve a timed-out entry: it arrived after all (delivered: the timeout
 * was spurious, and the segment is acknowledged if its copy is not yet), or
 * it is lost, counted now. Its data was queued again at the timeout, or,
 * held, is queued now. */
static void ent_rto_resolve(mrp_conn *c, path *pa, txent *e, int delivered, uint64_t now)
{
	txmsg *m = e->m;
	e->state = ENT_DONE;
	e->m = NULL;
	if (!--pa->rto_pending && pa->hold_at != NEVER) {
		pa->hold_at = NEVER; /* nothing held is left */
		c->dl_valid = 0;
	}
	if (!delivered) {
		pa->lost_pkts++;
		c->st.lost_pkts++;
		if (e->held) /* its data goes again now */
			seg_requeue(c, m, e->seg, 1, now);
		txmsg_unref(c, m);
		return;
	}
	pa->acked_pkts++;
	c->st.rto_late_pkts++;
	uint8_t *sb = &m->segs[e->seg];
	int finished = 0;
	if (SEG_STATE(*sb) != SEG_ACKED && !m->done) {
		*sb = (uint8_t)((*sb & ~3u) | SEG_ACKED);
		if (++m->nacked == m->npkts && m->opcode != MRP_OP_READ_REQ) {
			m->done = 1;
			finished = 1;
		}
	}
	m->refs--;
	if (finished)
		tx_finished(c, m);
	else
		txmsg_put(c, m);
}

/* Forget everything in flight on a path (new generation, or closing):
 * in-flight segments are queued for retransmission elsewhere, and entries
 * that timed out earlier are lost now. */
static void path_drain_inflight(mrp_conn *c, path *pa, int by_rto, uint64_t now)
{
	(void)by_rto;
	for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
		txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
		if (e->state == ENT_INFLIGHT)
			ent_lost(c, pa, e, by_rto, now);
		else if (e->state == ENT_RTO)
			ent_rto_resolve(c, pa, e, 0, now);
	}
	pa->snd_una = pa->snd_nxt;
	pa->rto_at = pa->tlp_at = pa->hold_at = NEVER;
	pa->tlp_pending = 0;
	pa->undo_valid = 0;
}

/* The path's timer expired: everything in flight times out (ENT_RTO), and
 * the window is cut, remembering the old one in case the timeout turns out
 * to have been only delay (SPEC 6.4). */
static void path_rto_inflight(mrp_conn *c, path *pa, int hold, uint64_t now)
{
	for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
		txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
		if (e->state == ENT_INFLIGHT)
			ent_timeout(c, pa, e, hold, now);
	}
	pa->tlp_at = NEVER;
	pa->tlp_pending = 0;
	if (!pa->undo_valid) {
		pa->undo_cwnd = pa->cc.cwnd;
		pa->undo_ssthresh = pa->cc.ssthresh;
		pa->undo_valid = 1;
	}
	c->cc.ops->on_rto(&c->cc, &pa->cc, now);
}

/* Move snd_una past the entries already resolved (NAK'd, or resolved
 * out of order): only unresolved PSNs hold the window (SPEC 3.3). */
static void path_advance_una(path *pa)
{
	while (pa->snd_una != pa->snd_nxt &&
	       pa->ring[pa->snd_una & (pa->ring_cap - 1)].state == ENT_DONE)
		pa->snd_una++;
}

/* Timed-out entries that still block the path's window (a path answering
 * probes again but with more than half its SACK span held by them): they
 * are declared lost, oldest first, so that new data can go out. */
static void path_trim_rto(mrp_conn *c, path *pa, uint64_t now)
{
	while (pa->rto_pending && pa->snd_nxt - pa->snd_una > MRP_SACK_BITS / 2) {
		txent *e = &pa->ring[pa->snd_una & (pa->ring_cap - 1)];
		if (e->state == ENT_RTO)
			ent_rto_resolve(c, pa, e, 0, now);
		else if (e->state == ENT_INFLIGHT)
			break;
		pa->snd_una++;
	}
}

/* The path's route-change-in-waiting, if any, is off; its rounds restart. */
static void repath_cancel(mrp_conn *c, path *pa, uint64_t now)
{
	if (c->rp_path == pa->id + 1)
		c->rp_path = 0;
	pa->rp_drain = 0;
	pa->rp_fresh = 0;
	pa->rp_hot = 0;
	pa->rp_clean = 0;
	pa->cc.uncoupled = 0;
	pa->rp_acked = pa->rp_marked = 0;
	pa->rp_round_ns = now;
	pa->rp_moved_ns = 0;
}

/* Start a new generation: fresh PSN space and congestion state. */
static void path_new_gen(mrp_conn *c, path *pa, uint64_t now)
{
	path_drain_inflight(c, pa, 0, now);
	pa->gen++;
	pa->snd_nxt = pa->snd_una = 0;
	pa->have_counts = 0;
	pa->rto_count = 0;
	pa->route_rtos = 0;
	pa->probe_pending = 0;
	pa->cold_probe = 0;
	pa->own_sample = 0;
	pa->rto_was_delay = 0;
	repath_cancel(c, pa, now);
	c->cc.ops->path_init(&c->cc, &pa->cc, now);
}

static void path_start_probe(mrp_conn *c, path *pa, uint64_t now)
{
	pa->probe_at = now;
	pa->probe_pending = 0;
	pa->cold_probe = 0; /* (this probe is not the cold one: an ACK must not cancel it) */
	c->ctl_dirty = 1;
}

static int path_open(mrp_conn *c, uint16_t id, uint8_t plane, uint64_t now,
		     int probing)
{
	path *pa = path_slot(c, id);
	if (!pa)
		return MRP_ERR_NOMEM;
	c->dl_valid = 0;
	/* (its scoreboard ring comes with its first data packet: ring_grow()) */
	pa->open = 1;
	pa->plane = plane;
	pa->sport = pick_sport(c);
	pa->gen = (uint16_t)(pa->gen + 1);
	pa->opened_cold = !c->max_rtt_ns;
	path_new_route(c, pa);
	pa->snd_nxt = pa->snd_una = 0;
	pa->rto_at = pa->tlp_at = pa->hold_at = NEVER;
	pa->probe_at = NEVER;
	c->cc.ops->path_init(&c->cc, &pa->cc, now);
	pa->disabled = c->plane_dis[plane];
	pa->last_ack_ns = now;
	c->npaths++;
	c->st.paths_opened++;
	int old = pa->state;
	if (c->unproven >> plane & 1) {
		/* (the answer must echo a sequence number no one who did not
		 * get the PROBE can guess: SPEC 9.5) */
		pa->probe_seq = (uint32_t)c->rng.next(c->rng.ud);
		probing = 1;
	}
	if (pa->disabled)
		pa->state = MRP_PATH_DISABLED;
	else if (probing) {
		pa->state = MRP_PATH_PROBING;
		path_start_probe(c, pa, now);
	} else {
		pa->state = MRP_PATH_ACTIVE;
	}
	push_event(c, pa, old, now);
	recompute_qwnd(c);
	return 0;
}

/* Re-port a path: another source port (a new ECMP route) and generation. */
static void path_report(mrp_conn *c, path *pa, uint16_t sport, uint64_t now)
{
	uint16_t old = pa->sport;
	path_new_gen(c, pa, now);
	path_new_route(c, pa);
	if (sport)
		pa->sport = sport;
	else
		for (int i = 0; i < 8 && pa->sport == old; i++)
			pa->sport = pick_sport(c);
	c->st.reports++;
	if (pa->fails < 16)
		pa->fails++;
	if (!pa->disabled) {
		set_state(c, pa, MRP_PATH_PROBING, now);
		path_start_probe(c, pa, now);
	}
	recompute_qwnd(c);
}

/* Doubles path pa's scoreboard ring, or allocates it (RING_MIN entries)
 * for the path's first data packet. */
static int ring_grow(mrp_conn *c, path *pa)
{
	uint32_t ncap = pa->ring_cap ? pa->ring_cap * 2 : RING_MIN;
	txent *n = mrp_calloc(&c->mem, ncap, sizeof(*n));
	if (!n)
		return MRP_ERR_NOMEM;
	for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++)
		n[psn & (ncap - 1)] = pa->ring[psn & (pa->ring_cap - 1)];
	mrp_free(&c->mem, pa->ring);
	pa->ring = n;
	pa->ring_cap = ncap;
	return 0;
}

/* Packets a path re-pathed to a new route (SPEC 6.4) keeps in flight there
 * until the first of them is acknowledged. */
#define REPATH_FIRST_PKTS 8

/*
 * What the hint's bound on data in flight (mrp_cc_path_room(): two round
 * trips at the hinted rate) lets through beyond itself while nothing at
 * all has come back from the peer for longer than an ACK can be due --
 * twice the connection's largest recent RTT and the ACK delay, as a
 * tail-loss probe waits -- with data in flight all that time: the hinted
 * rate for the silence past that, up to silence_max(). On one plane
 * a loss burst on the ACK direction of the sender's cable (the two
 * directions burst apart) stopped a 200 Gbit/s sender two round trips
 * into it while its data still arrived, until its timeout 100 us on (one
 * 200G plane, 1 % in 40 us bursts: 0.974-0.983 of RoCEv2's goodput, whose
 * paced sender has no window; 0.983-0.995 with this; bench/README.md); and
 * after a burst on the data direction the first packets past it show its
 * losses at once, where a stopped sender waits for its tail-loss probe.
 * Pacing still holds the rate to the hint. Not while any ACK comes back on
 * another path or plane (a hole in one route, a plane down: the peer
 * answers, and the paths that lose fail as before), nor before the first
 * RTT sample. (From one RTT of silence on, a connection's start over
 * spines 1 and 50 us away met it between its first ACKs, and one of four
 * seeds ran 10 % slower.)
 */
/* How long a silence silence_allowance() covers: the timeout's floor, and at
 * most 16 of the connection's largest recent round trips (a daemon's floor,
 * 5 ms, is many of its round trips: a peer descheduled that long would get
 * the hinted rate's worth of it into its socket buffer). */
static uint64_t silence_max(const mrp_conn *c)
{
	return min64(c->p.rto_min_ns, 16 * c->max_rtt_ns);
}

/* When the allowance starts growing: an ACK is overdue (path_pto()'s
 * wait) since the last packet from the peer or since data went in flight;
 * NEVER without data in flight, a hint or an RTT sample. */
static uint64_t silence_start(const mrp_conn *c)
{
	if (!c->max_rtt_ns || !c->cc.rate_hint_bps || !c->total_inflight)
		return NEVER;
	return max64(c->last_rx_ns, c->busy_since) + 2 * c->max_rtt_ns + c->p.ack_delay_ns;
}

static uint64_t silence_allowance(const mrp_conn *c, uint64_t now)
{
	uint64_t start = silence_start(c);
	if (now <= start)
		return 0;
	uint64_t s = min64(now - start, silence_max(c));
	return mrp_mul_div(c->cc.rate_hint_bps, s, 8000000000ull);
}

/* Data of `bytes` found no path with room: while the silence allowance
 * still grows, come back when it has grown by about a packet (at least an
 * eighth of the RTT apart, and at least 1 ns: with an RTT under 8 ns and a
 * packet's time under 1 ns both round to 0, and a wake at `now` is a busy
 * loop -- tests/fuzz/fuzz_conn found it), as nothing else would (no ACK
 * comes). */
static void silence_wake_arm(mrp_conn *c, uint32_t bytes, uint64_t now)
{
	uint64_t start = silence_start(c);
	if (start == NEVER || now >= start + silence_max(c))
		return;
	uint64_t step = max64(max64(mrp_mul_div(bytes, 8000000000ull, c->cc.rate_hint_bps),
				    c->max_rtt_ns / 8),
			      1);
	c->silence_wake = min64(max64(now, start) + step, start + silence_max(c));
}

/* Bytes path pa may put in flight now (0 when it may not carry data). A
 * path with nothing in flight may always send one packet, whatever its
 * window: a window smaller than a packet must not stall it. */
static uint64_t path_room(const mrp_conn *c, const path *pa, uint64_t now)
{
	if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE || pa->rp_drain)
		return 0;
	if (pa->snd_nxt - pa->snd_una >= MRP_SACK_BITS)
		return 0;
	/* (what is in flight on the credit of the first round trip, paced
	 * at the line before any hint, counts against the hint's bound only
	 * as the part of it the hint would have sent in the same time: the
	 * rest is the receiver's admitted data, on its way. Held to all of
	 * it, a lone connection at 4 ms and 100 Gbit/s, hinted a quarter when
	 * three joined, sent nothing for 2 ms while its 50 MB drained; held
	 * to none of it, four lone connections hinted their line rate put
	 * more in flight into an oversubscribed core: reorder_50x_small seed
	 * 3 219.6 -> 193.1 Gbit/s. SPEC 6.6) */
	uint64_t infl = c->total_inflight, line = c->cc.params.line_rate_bps,
		 hint = c->cc.rate_hint_bps;
	if (c->credit_inflight && line && hint && hint < line)
		infl -= c->credit_inflight - mrp_mul_div(c->credit_inflight, hint, line);
	uint64_t allow = silence_allowance(c, now);
	infl = infl > allow ? infl - allow : 0;
	uint64_t room = mrp_cc_path_room(&c->cc, &pa->cc, infl);
	if (pa->cc.inflight == 0 && room < (uint64_t)MRP_DATA_HDR_LEN + c->p.mtu)
		room = (uint64_t)MRP_DATA_HDR_LEN + c->p.mtu;
	if (pa->rp_fresh) {
		/* a new route taken by a re-path carries a few packets until
		 * one is acknowledged: it may be a hole (the window waits);
		 * one packet on a plane where a route failed lately, as a
		 * hole there stays (a re-path onto it sent 10 packets in
		 * 70 us: 1.62 % of the cable's former packets) */
		uint64_t cap = (pa->rp_wary ? 1 : REPATH_FIRST_PKTS) *
			       ((uint64_t)MRP_DATA_HDR_LEN + c->p.mtu);
		room = pa->cc.inflight >= cap ? 0 : min64(room, cap - pa->cc.inflight);
	}
	return room;
}

/* ---- connection lifecycle --------------------------------------------- */

/* ---- first-round-trip admission (SPEC 6.6) ------------------------------ */

/* Every active path's window to the SACK span's ceiling: within a credit
 * larger than the initial window, the credit and pacing at the line, not a
 * window, hold the connection until its first ACK. */
static void adm_open_windows(mrp_conn *c)
{
	uint64_t ceiling = (uint64_t)(c->p.cc.max_cwnd_pkts - 1) * c->p.mtu;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (pa && pa->open && pa->state == MRP_PATH_ACTIVE && pa->cc.cwnd < ceiling)
			mrp_cc_path_raise(&c->cc, &pa->cc, ceiling, UINT64_MAX);
	}
	recompute_qwnd(c);
}

static void adm_start(mrp_conn *c, uint64_t now)
{
	c->adm = ADM_OFF;
	if (!c->p.admit || !(c->p.caps & MRP_CAP_ADMIT))
		return;
	c->adm = ADM_CREDIT;
	c->adm_left = c->p.admit_credit;
	c->adm_until = now + c->p.admit_ttl_ns;
	if (c->adm_left > c->cc.qwnd) {
		/* more than the initial window: the credit, not the window,
		 * bounds the first round trip; pacing at the line holds it */
		c->adm_open = 1;
		adm_open_windows(c);
	}
}

/* The first ACK or grant came: from now on the receiver's hints rule. A
 * large credit's windows come down to what each path has in flight, at
 * least the initial window, and grow from there (hint_window() sizes them
 * from the ACK's hint): left at the SACK span they let a lone connection
 * at line rate overflow an oversubscribed core before its ECN marks came
 * back (the simulator's reorder_50x_small). */
static inline void adm_end(mrp_conn *c)
{
	if (c->adm_open) {
		uint64_t init = (uint64_t)c->p.cc.init_cwnd_pkts * c->p.cc.mtu;
		for (uint32_t i = 0; i < c->path_hi; i++) {
			path *pa = c->paths[i];
			if (pa && pa->open)
				mrp_cc_path_lower(&c->cc, &pa->cc, max64(pa->cc.inflight, init));
		}
		recompute_qwnd(c);
	}
	c->adm = ADM_OFF;
	c->adm_open = 0;
}

static int check_params(const mrp_conn_params *p)
{
	if (!p->local_conn_id || !p->peer_conn_id || !p->local_token || !p->peer_token)
		return 0;
	if (p->mtu < MRP_MTU_MIN || p->mtu > MRP_MTU_MAX)
		return 0;
	if (!p->max_streams || !p->max_paths || p->max_paths > MRP_MAX_PATHS)
		return 0;
	if (!p->nplanes || p->nplanes > MRP_MAX_PLANES)
		return 0;
	if (p->sport_min == 0 || p->sport_min > p->sport_max)
		return 0;
	if (!p->rto_min_ns || p->rto_min_ns > p->rto_max_ns || !p->rto_init_ns)
		return 0;
	if (!p->burst_pkts || !p->ack_every || !p->msg_window || !p->suspect_rtos ||
	    !p->peer_timeout_ns)
		return 0;
	if (p->read && (!p->rd_max || !p->rd_dest_max))
		return 0;
	return 1;
}

int mrp_conn_new(mrp_conn **pconn, const mrp_conn_params *params,
		 const mrp_mem *mem, const mrp_rng *rng, const mrp_mr_ops *mr,
		 uint64_t now_ns)
{
	if (!pconn || !params || !mem || !mem->alloc || !mem->free || !rng ||
	    !rng->next || !mr || !mr->resolve || !check_params(params))
		return MRP_ERR_INVAL;
	mrp_conn *c = mrp_calloc(mem, 1, sizeof(*c));
	if (!c)
		return MRP_ERR_NOMEM;
	c->p = *params;
	c->unproven = params->unproven_planes &
		      (params->nplanes >= 32 ? UINT32_MAX : (1u << params->nplanes) - 1);
	c->mem = *mem;
	c->rng = *rng;
	c->mr = *mr;
	/* (the congestion controller counts windows in whole data packets, as
	 * they are counted in flight: payload and header) */
	c->p.cc.mtu = c->p.mtu + MRP_DATA_HDR_LEN;
	int rv = mrp_cc_conn_init(&c->cc, c->p.cc_name ? c->p.cc_name : "baseline",
				  &c->p.cc);
	if (rv < 0) {
		mrp_free(mem, c);
		return rv;
	}
	c->p.cc_name = NULL; /* the caller's string need not outlive this call */
	c->burst_path = -1;
	c->rh_slot = UINT32_MAX;
	c->plane_wait_at = NEVER;
	c->silence_wake = NEVER;
	/* The planes' pacing buckets start a few nanoseconds apart in a
	 * random order: best_path() breaks ties between planes by the oldest
	 * bucket, and connections that started together would otherwise all
	 * take the planes in the same order, at the same time, and crowd one
	 * plane of the host after the other. */
	for (uint32_t p = 0; p < params->nplanes && params->nplanes > 1; p++)
		c->plane_pace_at[p] = now_ns + mrp_rand_below(&c->rng, 64);
	uint32_t n = c->p.initial_paths;
	if (n < c->p.nplanes)
		n = c->p.nplanes;
	if (n > c->p.max_paths)
		n = c->p.max_paths;
	if (paths_grow(c, n ? n - 1 : 0) < 0) {
		mrp_free(mem, c);
		return MRP_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		rv = path_open(c, (uint16_t)i, (uint8_t)(i % c->p.nplanes), now_ns, 0);
		if (rv < 0) {
			mrp_conn_del(c);
			return rv;
		}
	}
	c->last_open_ns = now_ns;
	c->last_rx_ns = now_ns;
	adm_start(c, now_ns);
	*pconn = c;
	return 0;
}

int mrp_conn_set_rto_init(mrp_conn *c, uint64_t rto_init_ns)
{
	if (!rto_init_ns)
		return MRP_ERR_INVAL;
	c->p.rto_init_ns = rto_init_ns;
	return 0;
}

static void free_rxmsgs(mrp_conn *c)
{
	for (uint32_t i = 0; i < c->rxh_cap; i++) {
		rxmsg *r = c->rxh[i];
		while (r) {
			rxmsg *n = r->hnext;
			rxmsg_release(c, r);
			r = n;
		}
		c->rxh[i] = NULL;
	}
	c->rxh_len = 0;
}

void mrp_conn_del(mrp_conn *c)
{
	if (!c)
		return;
	/* Messages are owned by their stream until they complete, then by the
	 * scoreboard and retransmission-queue entries still pointing at them
	 * (txmsg_unref frees a completed one when its last entry goes). */
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!pa)
			continue;
		if (pa->ring)
			for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
				txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
				if ((e->state == ENT_INFLIGHT || e->state == ENT_RTO) && e->m)
					txmsg_unref(c, e->m);
			}
		mrp_free(&c->mem, pa->ring);
		mrp_free(&c->mem, pa);
	}
	mrp_free(&c->mem, c->paths);
	mrp_free(&c->mem, c->nakq);
	mrp_free(&c->mem, c->evq);
	ring_drain(c, &c->rq);
	ring_drain(c, &c->aq);
	mrp_free(&c->mem, c->rq.e);
	mrp_free(&c->mem, c->aq.e);
	for (uint32_t i = 0; i < c->nstreams; i++) {
		stream *s = &c->streams[i];
		for (txmsg *m = s->head, *n; m; m = n) {
			n = m->snext;
			txmsg_release(c, m);
		}
		mrp_free(&c->mem, s->rq);
	}
	mrp_free(&c->mem, c->streams);
	for (txmsg *m = c->rd_head, *n; m; m = n) {
		n = m->snext;
		txmsg_release(c, m);
	}
	free_rxmsgs(c);
	cache_drain(c, &c->tx1);
	cache_drain(c, &c->rx1);
	mrp_free(&c->mem, c->rxh);
	mrp_free(&c->mem, c->cq);
	if (c->p.rh && c->rh_slot != UINT32_MAX)
		mrp_rh_release(c->p.rh, c->rh_slot, (uint64_t)(uintptr_t)c);
	mrp_free(&c->mem, c);
}

/* ---- flushing and teardown -------------------------------------------- */

/* The READ responses we hold go without completions (the READs fail at
 * the requester), and our own READs stop counting. */
static void rd_flush(mrp_conn *c)
{
	while (c->rd_head) {
		txmsg *m = c->rd_head;
		c->rd_head = m->snext;
		m->snext = m->qnext = m->rnext = NULL;
		m->in_rnr = 0;
		m->done = m->detached = 1;
		c->tx_outstanding--;
		txmsg_put(c, m);
	}
	c->rd_tail = NULL;
	c->rd_resp = 0;
	c->rd_out = 0;
}

/* Complete everything outstanding: messages already failed keep their
 * status, the rest get `status`; posted receives get FLUSHED. Completions
 * still come out exactly once and in posting order per stream. */
static void conn_flush(mrp_conn *c, int status)
{
	c->dl_valid = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!pa || !pa->ring)
			continue;
		for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
			txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
			if (e->state == ENT_INFLIGHT || e->state == ENT_RTO) {
				if (e->state == ENT_INFLIGHT)
					pa->cc.inflight -= e->bytes;
				e->state = ENT_DONE;
				txmsg *m = e->m;
				e->m = NULL;
				txmsg_unref(c, m);
			}
		}
		pa->snd_una = pa->snd_nxt;
		pa->rto_pending = 0;
		pa->undo_valid = 0;
		pa->rto_at = pa->tlp_at = pa->probe_at = pa->rx_ack_at = NEVER;
		pa->hold_at = NEVER;
		pa->tlp_pending = pa->probe_pending = pa->pack_pending = 0;
		pa->rx_ack_now = 0;
		pa->rx_pending = 0;
	}
	c->total_inflight = 0;
	c->credit_inflight = 0;
	ring_drain(c, &c->rq);
	ring_drain(c, &c->aq);
	for (txmsg *m = c->sq_head, *n; m; m = n) {
		n = m->qnext;
		m->qnext = NULL;
	}
	c->sq_head = c->sq_tail = NULL;
	c->sq_unsent = 0;
	c->rnr_list = NULL;
	rd_flush(c);
	for (uint32_t i = 0; i < c->nstreams; i++) {
		stream *s = &c->streams[i];
		for (txmsg *m = s->head; m; m = m->snext) {
			m->in_rnr = 0;
			if (!m->done) {
				m->done = 1;
				m->status = (uint8_t)status;
			}
		}
		stream_complete_tx(c, s);
		while (s->consumed != s->posted) {
			rxrecv *r = &s->rq[s->consumed & (s->rq_cap - 1)];
			mrp_cqe e = {
				.wr_id = r->wr_id,
				.status = MRP_WC_FLUSHED,
				.opcode = MRP_WC_RECV,
				.stream = (uint16_t)i,
			};
			if (cq_push(&*c, &e) < 0)
				break;
			rq_consume(c, s);
		}
	}
	free_rxmsgs(c);
	c->ctl_dirty = 1; /* queued NAKs still go out, then CLOSE or RESET */
}

/* A fatal error found: the connection fails (conn_fail()) and its RESET
 * carries reason (SPEC 11.4), the first one found. */
static void fail_with(mrp_conn *c, uint16_t reason)
{
	if (!c->pending_fail && c->state != CONN_CLOSED)
		c->close_reason = (uint8_t)reason;
	c->pending_fail = 1;
}

/* A fatal error: flush and send RESET. */
static void conn_fail(mrp_conn *c)
{
	c->pending_fail = 0;
	c->dl_valid = 0;
	if (c->state == CONN_CLOSED)
		return;
	conn_flush(c, MRP_WC_FLUSHED);
	c->state = CONN_CLOSED;
	c->close_pending = 3;
	c->failed = 1;
}

int mrp_conn_failure(const mrp_conn *c)
{
	return c->failed ? c->close_reason : -1;
}

/* Data may still be sent (the connection is open or finishing its work). */
static int sending(const mrp_conn *c)
{
	return c->state == CONN_OPEN || c->state == CONN_DRAINING;
}

static uint64_t sends_outstanding(const mrp_conn *c)
{
	return c->tx_outstanding;
}

/*
 * Graceful close (SPEC 11.2): once every message this end posted has
 * completed, a closing end sends CLOSE and keeps receiving until the reply;
 * an end the peer closed flushes its unmatched receives and replies.
 */
static void close_check(mrp_conn *c, uint64_t now)
{
	if (!(c->state == CONN_DRAINING || (c->peer_closing && sending(c))))
		return;
	if (sends_outstanding(c))
		return;
	c->dl_valid = 0; /* the state changes */
	if (c->peer_closing) {
		conn_flush(c, MRP_WC_FLUSHED); /* only receives are left */
		c->state = CONN_CLOSED;
		c->close_pending = 2;
	} else {
		c->state = CONN_CLOSING;
		c->close_pending = 1;
		c->close_tries = 0;
		c->close_at = now;
	}
	c->ctl_dirty = 1;
}

void mrp_conn_close(mrp_conn *c, int abort, uint64_t now_ns)
{
	mrp_conn_close_reason(c, abort, MRP_CLOSE_NORMAL, now_ns);
}

void mrp_conn_close_reason(mrp_conn *c, int abort, uint16_t reason, uint64_t now_ns)
{
	c->dl_valid = 0;
	if (c->state == CONN_CLOSED)
		return;
	/* (not over the peer's reason, which our reply to its CLOSE carries,
	 * nor over that of a close already under way) */
	if (reason <= MRP_CLOSE_MAX &&
	    (abort || (!c->peer_closing && c->state != CONN_DRAINING)))
		c->close_reason = (uint8_t)reason;
	if (abort) {
		conn_flush(c, MRP_WC_FLUSHED);
		c->state = CONN_CLOSED;
		c->close_pending = 3;
		return;
	}
	if (c->state != CONN_OPEN)
		return;
	c->state = CONN_DRAINING;
	close_check(c, now_ns);
}

int mrp_conn_is_closed(const mrp_conn *c)
{
	return c->state == CONN_CLOSED && !c->close_pending;
}

/* ---- receive side: messages by (stream, msn) --------------------------- */

static inline uint32_t rxh_hash(uint16_t sid, uint32_t msn)
{
	uint32_t h = (uint32_t)sid * 0x9e3779b1u ^ msn * 0x85ebca77u;
	return h ^ (h >> 15);
}

static rxmsg **rxh_find(mrp_conn *c, uint16_t sid, uint32_t msn)
{
	if (!c->rxh_cap)
		return NULL;
	rxmsg **pp = &c->rxh[rxh_hash(sid, msn) & (c->rxh_cap - 1)];
	while (*pp && ((*pp)->stream != sid || (*pp)->msn != msn))
		pp = &(*pp)->hnext;
	return pp;
}

static int rxh_insert(mrp_conn *c, rxmsg *r)
{
	if (c->rxh_len + 1 > c->rxh_cap) {
		uint32_t ncap = c->rxh_cap ? c->rxh_cap * 2 : 64;
		rxmsg **n = mrp_calloc(&c->mem, ncap, sizeof(*n));
		if (!n)
			return MRP_ERR_NOMEM;
		for (uint32_t i = 0; i < c->rxh_cap; i++)
			for (rxmsg *x = c->rxh[i], *nx; x; x = nx) {
				nx = x->hnext;
				rxmsg **b = &n[rxh_hash(x->stream, x->msn) & (ncap - 1)];
				x->hnext = *b;
				*b = x;
			}
		mrp_free(&c->mem, c->rxh);
		c->rxh = n;
		c->rxh_cap = ncap;
	}
	rxmsg **b = &c->rxh[rxh_hash(r->stream, r->msn) & (c->rxh_cap - 1)];
	r->hnext = *b;
	*b = r;
	c->rxh_len++;
	return 0;
}

static int nak_to_status(int reason)
{
	switch (reason) {
	case MRP_NAK_INVALID_RKEY:
	case MRP_NAK_ACCESS:
		return MRP_WC_REM_ACCESS;
	case MRP_NAK_OUT_OF_BOUNDS:
		return MRP_WC_REM_BOUNDS;
	case MRP_NAK_RNR:
		return MRP_WC_RNR_RETRY_EXC;
	default:
		return MRP_WC_REM_INVALID;
	}
}

/* A held READ response's READ_REQ has completed in MSN order (SPEC 5.8.2,
 * step 3): it may leave now. */
static void rd_release(mrp_conn *c, uint16_t sid, uint32_t msn)
{
	for (txmsg *m = c->rd_head; m; m = m->snext)
		if (m->held && m->stream == sid && m->msn == msn) {
			m->held = 0;
			sq_append(c, m);
			return;
		}
}

/* Complete, in MSN order, the messages of stream sid that are whole. */
static void stream_complete_rx(mrp_conn *c, stream *s, uint16_t sid)
{
	while (c->rxh_len) {
		rxmsg **pp = rxh_find(c, sid, s->complete_msn);
		rxmsg *r = pp ? *pp : NULL;
		if (!r || (r->nrecv < r->npkts && !r->status))
			return;
		if (r->opcode == MRP_OP_READ_REQ) {
			rd_release(c, sid, r->msn);
		} else if (r->opcode != MRP_OP_WRITE) {
			if (s->consumed == s->posted || r->recv_idx != s->consumed) {
				/* The peer numbered its receives out of order. */
				fail_with(c, MRP_CLOSE_PROTOCOL);
				return;
			}
			rxrecv *rv = &s->rq[s->consumed & (s->rq_cap - 1)];
			mrp_cqe e = {
				.wr_id = rv->wr_id,
				.status = r->status,
				.opcode = r->opcode == MRP_OP_WRITE_IMM ? MRP_WC_RECV_WRITE_IMM
									: MRP_WC_RECV,
				.stream = sid,
				.byte_len = r->status ? 0 : r->len,
				.imm = r->imm,
				.has_imm = r->opcode != MRP_OP_SEND,
			};
			if (cq_push(c, &e) < 0)
				return;
			rq_consume(c, s);
		}
		*pp = r->hnext;
		c->rxh_len--;
		rxmsg_release(c, r);
		s->complete_msn++;
	}
}

#define PLACE_OK 0
#define PLACE_SLOW -1 /* not placed: take the general path */

/*
 * Place the last packet of a WRITE or WRITE_IMM, whose other bytes are all
 * placed already: its bytes but the last, then the message's last byte, in
 * a store that a release fence orders after every store before it (SPEC
 * 5.3: last byte last). memcpy() gives no order among its own stores (a
 * vector copy may write its head last, x86 fast strings write in any
 * order), so the last byte is a store of its own: an application that
 * polls the last byte of a target, as RDMA programs written for RC do,
 * finds every other byte of the message placed once it changes.
 */
static void place_write_last(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	if (len == 0)
		return;
	if (len > 1)
		memcpy(dst, src, len - 1);
	__atomic_store_n(dst + len - 1, src[len - 1], __ATOMIC_RELEASE);
}

/*
 * SPEC 5.3: the region behind a WRITE or WRITE_IMM, checked for the whole
 * message. Returns PLACE_OK with *pbase (NULL for a message of 0 bytes, which
 * accesses no memory and is not checked) or the NAK reason.
 */
static int rx_resolve_write(mrp_conn *c, const mrp_data *d, uint8_t **pbase)
{
	*pbase = NULL;
	if (d->msg_len == 0)
		return PLACE_OK;
	int nak = MRP_NAK_INVALID_RKEY;
	*pbase = c->mr.resolve(c->mr.ud, d->rkey, d->remote_addr, d->msg_len,
			       MRP_ACCESS_REMOTE_WRITE, &nak);
	if (*pbase)
		return PLACE_OK;
	if (nak < MRP_NAK_INVALID_RKEY || nak > MRP_NAK_ACCESS)
		nak = MRP_NAK_INVALID_RKEY;
	return nak;
}

/*
 * The common case: a message of one packet that is the next of its stream
 * to complete, completed on arrival with no record to track it (the general
 * path would allocate an rxmsg, hash it, find it again to complete it and
 * free it). The caller checked npkts == 1, msn == complete_msn, no rxmsg for
 * it yet and room in the completion queue. Returns PLACE_OK, a NAK reason
 * (and *pfatal) as rx_place() would, or PLACE_SLOW, having changed nothing,
 * for anything unusual: no matching receive, a receive another message
 * claimed, a SEND larger than its receive.
 */
static int rx_place_next(mrp_conn *c, stream *s, const mrp_pkt *pkt, int consumes,
			 int *pfatal)
{
	const mrp_data *d = &pkt->u.data;
	uint8_t op = pkt->hdr.opcode;
	rxrecv *rv = NULL;
	if (consumes) {
		if (d->recv_idx != s->consumed || s->consumed == s->posted)
			return PLACE_SLOW;
		rv = &s->rq[s->consumed & (s->rq_cap - 1)];
		if (rv->claimed || ((op == MRP_OP_SEND || op == MRP_OP_SEND_IMM) &&
				    d->msg_len > rv->len))
			return PLACE_SLOW;
	}
	uint8_t status = MRP_WC_SUCCESS;
	int nak = PLACE_OK;
	if (op == MRP_OP_WRITE || op == MRP_OP_WRITE_IMM) {
		uint8_t *base;
		nak = rx_resolve_write(c, d, &base);
		if (nak != PLACE_OK)
			status = (uint8_t)nak_to_status(nak); /* completes in error */
		else
			place_write_last(base, d->payload, d->payload_len);
	} else if (d->payload_len) {
		memcpy(rv->buf, d->payload, d->payload_len);
	}
	if (consumes) {
		/* (the caller checked for room: no growth, no failure) */
		mrp_cqe *e = &c->cq[(c->cq_head + c->cq_len++) & (c->cq_cap - 1)];
		e->wr_id = rv->wr_id;
		e->status = status;
		e->opcode = op == MRP_OP_WRITE_IMM ? MRP_WC_RECV_WRITE_IMM : MRP_WC_RECV;
		e->has_imm = op != MRP_OP_SEND;
		e->stream = d->stream_id;
		e->byte_len = status ? 0 : d->msg_len;
		e->imm = d->imm;
		rq_consume(c, s);
	}
	s->complete_msn++;
	stream_complete_rx(c, s, d->stream_id); /* later messages already whole */
	*pfatal = nak != PLACE_OK;
	return nak;
}

/*
 * Place one data packet. Returns PLACE_OK (placed, or a harmless duplicate)
 * or a NAK reason (MRP_NAK_*). *pfatal is set for reasons that end the
 * connection (SPEC.md 5.6); RNR is not fatal.
 */
static int rx_place(mrp_conn *c, const mrp_pkt *pkt, int *pfatal)
{
	const mrp_data *d = &pkt->u.data;
	uint8_t op = pkt->hdr.opcode;
	uint32_t mtu = c->p.mtu;

	*pfatal = 1;
	/* SPEC 5.5 check 1: the packet's shape against the negotiated MTU
	 * (no division for a message of one packet: offset must be 0) */
	uint32_t npkts = 1, seg = 0;
	if (d->msg_len > mtu) {
		npkts = (d->msg_len + mtu - 1) / mtu;
		seg = d->offset / mtu;
		if (d->offset % mtu)
			return MRP_NAK_MALFORMED; /* not cut at the negotiated MTU */
	} else if (d->offset) {
		return MRP_NAK_MALFORMED;
	}
	uint32_t want = d->msg_len - d->offset < mtu ? d->msg_len - d->offset : mtu;
	if (d->payload_len != want)
		return MRP_NAK_MALFORMED;
	/* check 2 */
	if (d->stream_id >= c->p.max_streams)
		return MRP_NAK_UNKNOWN_STREAM;
	stream *s = get_stream(c, d->stream_id);
	if (!s) {
		*pfatal = 0;
		return MRP_NAK_RNR; /* cannot track it now: the sender retries */
	}
	int32_t dm = sdiff(d->msn, s->complete_msn);
	if (dm < 0) {
		c->st.rx_dup_pkts++; /* a message that already completed */
		return PLACE_OK;
	}
	if ((uint32_t)dm >= c->p.msg_window) {
		*pfatal = 0;
		return MRP_NAK_RNR; /* too far ahead to track now */
	}
	int consumes = op != MRP_OP_WRITE;

	rxmsg **pp = c->rxh_len ? rxh_find(c, d->stream_id, d->msn) : NULL;
	rxmsg *r = pp ? *pp : NULL;
	if (!r && npkts == 1 && dm == 0 && c->cq_len < c->cq_cap) {
		int rv = rx_place_next(c, s, pkt, consumes, pfatal);
		if (rv != PLACE_SLOW)
			return rv;
	}
	uint8_t *wbase = NULL;
	int wnak = PLACE_OK;
	if (!r) {
		/* A message's first packet: its region (check 6) before its
		 * receive (7) and before any state is spent on tracking it (8).
		 * A WRITE with a bad region ends the connection (5.6) with
		 * nothing to complete: no record for it. */
		if (op == MRP_OP_WRITE || op == MRP_OP_WRITE_IMM) {
			wnak = rx_resolve_write(c, d, &wbase);
			if (wnak != PLACE_OK && !consumes)
				return wnak;
		}
		rxrecv *rv = NULL;
		if (consumes) {
			int32_t ri = sdiff(d->recv_idx, s->consumed);
			if (ri < 0)
				return wnak != PLACE_OK ? wnak : MRP_NAK_MALFORMED;
			if ((uint32_t)ri >= s->posted - s->consumed) {
				if (wnak != PLACE_OK)
					return wnak;
				*pfatal = 0;
				return MRP_NAK_RNR;
			}
			rv = &s->rq[d->recv_idx & (s->rq_cap - 1)];
			if (rv->claimed) /* two messages name one receive */
				return wnak != PLACE_OK ? wnak : MRP_NAK_MALFORMED;
		}
		r = rxmsg_alloc(c, npkts);
		if (!r) {
			*pfatal = 0;
			return MRP_NAK_RNR;
		}
		r->stream = d->stream_id;
		r->msn = d->msn;
		r->opcode = op;
		r->len = d->msg_len;
		r->npkts = npkts;
		r->imm = d->imm;
		r->recv_idx = d->recv_idx;
		if (rxh_insert(c, r) < 0) {
			rxmsg_release(c, r);
			*pfatal = 0;
			return MRP_NAK_RNR;
		}
		if (rv)
			rv->claimed = 1;
		if ((op == MRP_OP_SEND || op == MRP_OP_SEND_IMM) && d->msg_len > rv->len) {
			r->status = MRP_WC_LOC_LEN;
			stream_complete_rx(c, s, d->stream_id);
			return MRP_NAK_OUT_OF_BOUNDS;
		}
	} else if (r->opcode != op || r->len != d->msg_len || r->imm != d->imm ||
		   (consumes && r->recv_idx != d->recv_idx)) {
		return MRP_NAK_MALFORMED; /* packets of one message disagree */
	}

	if (r->bits[seg / 8] & (1u << (seg % 8))) {
		c->st.rx_dup_pkts++;
		return PLACE_OK;
	}
	uint8_t *dst;
	int tagged = op == MRP_OP_WRITE || op == MRP_OP_WRITE_IMM;
	if (tagged) {
		/* every packet is checked against the whole range (5.3): a
		 * later packet against the region as it is now */
		if (wnak == PLACE_OK && !wbase) /* (not resolved in this call yet) */
			wnak = rx_resolve_write(c, d, &wbase);
		if (wnak != PLACE_OK) {
			r->status = (uint8_t)nak_to_status(wnak);
			stream_complete_rx(c, s, d->stream_id);
			return wnak;
		}
		dst = wbase ? wbase + d->offset : NULL;
	} else {
		dst = s->rq[r->recv_idx & (s->rq_cap - 1)].buf + d->offset;
	}
	*pfatal = 0;
	if (tagged && seg == npkts - 1) {
		if (r->nrecv < npkts - 1) {
			/* Last byte last (SPEC 5.3): the last packet came
			 * before the others were placed. Hold its payload (at
			 * most one MTU per incomplete message, from the
			 * connection's allocator and so within its memory
			 * budget) until they are; without the memory, NAK RNR
			 * and the sender sends it again. */
			uint8_t *h = c->mem.alloc(c->mem.ud, d->payload_len);
			if (!h)
				return MRP_NAK_RNR;
			memcpy(h, d->payload, d->payload_len);
			r->held = h;
			r->bits[seg / 8] |= (uint8_t)(1u << (seg % 8));
			c->st.rx_held_pkts++;
			return PLACE_OK;
		}
		place_write_last(dst, d->payload, d->payload_len);
	} else if (d->payload_len) {
		memcpy(dst, d->payload, d->payload_len);
	}
	r->bits[seg / 8] |= (uint8_t)(1u << (seg % 8));
	r->nrecv++;
	if (r->held && r->nrecv == npkts - 1) {
		/* every byte but the held packet's is placed: now its turn
		 * (wbase: the range as checked for this packet just now) */
		uint32_t off = (npkts - 1) * mtu;
		place_write_last(wbase + off, r->held, r->len - off);
		mrp_free(&c->mem, r->held);
		r->held = NULL;
		r->nrecv++;
	}
	if (r->nrecv == r->npkts)
		stream_complete_rx(c, s, d->stream_id);
	return PLACE_OK;
}

/* ---- RDMA READ: packets in ------------------------------------------- */

static txmsg *find_txmsg(mrp_conn *c, uint16_t sid, uint32_t msn)
{
	if (sid >= c->nstreams)
		return NULL;
	for (txmsg *m = c->streams[sid].head; m; m = m->snext)
		if (m->msn == msn)
			return m;
	return NULL;
}


/*
 * SPEC 5.8.2: a READ_REQ at the responder. Returns PLACE_OK (accepted, or a
 * duplicate) or a NAK reason, *pfatal set for the reasons that end the
 * connection.
 */
static int rx_read_req(mrp_conn *c, const mrp_pkt *pkt, int *pfatal)
{
	const mrp_data *d = &pkt->u.data;
	*pfatal = 1;
	if (!c->p.read)
		return MRP_NAK_MALFORMED; /* not negotiated */
	if (d->stream_id >= c->p.max_streams)
		return MRP_NAK_UNKNOWN_STREAM;
	*pfatal = 0;
	stream *s = get_stream(c, d->stream_id);
	if (!s)
		return MRP_NAK_RNR;
	int32_t dm = sdiff(d->msn, s->complete_msn);
	if (dm < 0) {
		c->st.rx_dup_pkts++; /* executed already */
		return PLACE_OK;
	}
	if ((uint32_t)dm >= c->p.msg_window)
		return MRP_NAK_RNR;
	rxmsg **pp = c->rxh_len ? rxh_find(c, d->stream_id, d->msn) : NULL;
	if (pp && *pp) {
		if ((*pp)->opcode != MRP_OP_READ_REQ || (*pp)->len != d->msg_len) {
			*pfatal = 1;
			return MRP_NAK_MALFORMED; /* check 3: disagrees with the message */
		}
		c->st.rx_dup_pkts++; /* held, waiting for its turn */
		return PLACE_OK;
	}
	if (d->msg_len) {
		int nak = MRP_NAK_INVALID_RKEY;
		if (!c->mr.resolve(c->mr.ud, d->rkey, d->remote_addr, d->msg_len,
				   MRP_ACCESS_REMOTE_READ, &nak)) {
			*pfatal = 1;
			return nak >= MRP_NAK_INVALID_RKEY && nak <= MRP_NAK_ACCESS
				       ? nak : MRP_NAK_INVALID_RKEY;
		}
	}
	/* Responder resources in use: retried. A READ that must wait for
	 * earlier messages of its stream (dm > 0) may not take the last one:
	 * held READs filling every slot while the READ they wait for is NAKed
	 * RNR would wait for each other until the retries run out. */
	if (c->rd_resp >= c->p.rd_dest_max || (dm > 0 && c->rd_resp + 1 >= c->p.rd_dest_max))
		return MRP_NAK_RNR;
	uint32_t mtu = c->p.mtu;
	uint32_t npkts = d->msg_len > mtu ? (d->msg_len + mtu - 1) / mtu : 1;
	txmsg *m = txmsg_alloc(c, npkts);
	if (!m)
		return MRP_NAK_RNR;
	m->snext = m->qnext = m->rnext = NULL;
	m->wr_id = 0;
	m->local = NULL; /* looked up again for every packet: write_seg() */
	m->remote_addr = d->remote_addr;
	m->rnr_until = 0;
	m->first_retry_ns = NEVER;
	m->rkey = d->rkey;
	m->imm = 0;
	m->len = d->msg_len;
	m->msn = d->msn;
	m->recv_idx = 0;
	m->npkts = npkts;
	m->next_seg = m->nacked = m->refs = 0;
	m->stream = d->stream_id;
	m->opcode = MRP_OP_READ_RESP;
	m->status = MRP_WC_SUCCESS;
	m->done = m->detached = m->rnr_count = m->in_rnr = 0;
	m->exp = 0; /* (a response goes in the default class) */
	m->held = dm != 0;
	memset(m->segs, 0, npkts);
	if (dm != 0) {
		/* Earlier messages of the stream are incomplete: a record holds
		 * the READ_REQ's place in MSN order until they complete. */
		rxmsg *r = rxmsg_alloc(c, 1);
		if (!r) {
			txmsg_release(c, m);
			return MRP_NAK_RNR;
		}
		r->stream = d->stream_id;
		r->msn = d->msn;
		r->opcode = MRP_OP_READ_REQ;
		r->len = d->msg_len;
		r->npkts = r->nrecv = 1;
		r->imm = r->recv_idx = 0;
		r->status = MRP_WC_SUCCESS;
		r->bits[0] = 1;
		if (rxh_insert(c, r) < 0) {
			rxmsg_release(c, r);
			txmsg_release(c, m);
			return MRP_NAK_RNR;
		}
	}
	if (c->rd_tail)
		c->rd_tail->snext = m;
	else
		c->rd_head = m;
	c->rd_tail = m;
	c->rd_resp++;
	c->tx_outstanding++;
	if (dm == 0) {
		s->complete_msn++;
		sq_append(c, m);
		stream_complete_rx(c, s, d->stream_id); /* later messages already whole */
	}
	return PLACE_OK;
}

/*
 * SPEC 5.8.3: a READ_RESP at the requester: placed in the buffer of the
 * READ it names. Returns PLACE_OK (placed, or a duplicate) or a NAK reason
 * (all of them fatal).
 */
static int rx_read_resp(mrp_conn *c, const mrp_pkt *pkt, int *pfatal)
{
	const mrp_data *d = &pkt->u.data;
	uint32_t mtu = c->p.mtu;
	*pfatal = 1;
	if (!c->p.read)
		return MRP_NAK_MALFORMED;
	/* check 1: cut at the negotiated MTU */
	uint32_t seg = 0;
	if (d->msg_len > mtu) {
		if (d->offset % mtu)
			return MRP_NAK_MALFORMED;
		seg = d->offset / mtu;
	} else if (d->offset) {
		return MRP_NAK_MALFORMED;
	}
	if (d->payload_len != (d->msg_len - d->offset < mtu ? d->msg_len - d->offset : mtu))
		return MRP_NAK_MALFORMED;
	if (d->stream_id >= c->p.max_streams)
		return MRP_NAK_UNKNOWN_STREAM;
	txmsg *m = find_txmsg(c, d->stream_id, d->msn);
	if (!m) {
		/* completed already (a duplicate), or never posted */
		if (d->stream_id < c->nstreams &&
		    sdiff(d->msn, c->streams[d->stream_id].next_msn) < 0) {
			c->st.rx_dup_pkts++;
			*pfatal = 0;
			return PLACE_OK;
		}
		return MRP_NAK_MALFORMED;
	}
	if (m->opcode != MRP_OP_READ_REQ || m->next_seg == 0 || m->len != d->msg_len ||
	    m->remote_addr != d->remote_addr || m->rkey != d->rkey)
		return MRP_NAK_MALFORMED; /* answers nothing we asked */
	*pfatal = 0;
	uint8_t *map = m->segs + 1, bit = (uint8_t)(1u << (seg % 8));
	if (m->done || (map[seg / 8] & bit)) {
		c->st.rx_dup_pkts++;
		return PLACE_OK;
	}
	if (d->payload_len) /* (local is the READ's sink: mrp_conn_post_send()) */
		memcpy((uint8_t *)(uintptr_t)m->local + d->offset, d->payload, d->payload_len);
	map[seg / 8] |= bit;
	if (++m->recv_idx == (d->msg_len > mtu ? (d->msg_len + mtu - 1) / mtu : 1)) {
		m->done = 1;
		c->rd_out--;
		stream_complete_tx(c, &c->streams[m->stream]);
	}
	return PLACE_OK;
}

static void queue_nak(mrp_conn *c, const mrp_pkt *pkt, int reason)
{
	/* Full, or no memory for the queue: the NAK is not sent; the sender
	 * sees a hole and retransmits, and we NAK again. */
	if (c->nakq_len == c->nakq_cap &&
	    qring_grow(c, (void **)&c->nakq, &c->nakq_cap, &c->nakq_head, c->nakq_len,
		       sizeof(nakent), NAKQ_MIN, NAKQ_LEN) < 0)
		return;
	const mrp_data *d = &pkt->u.data;
	uint32_t i = (c->nakq_head + c->nakq_len++) & (c->nakq_cap - 1);
	mrp_nak *n = &c->nakq[i].nak;
	memset(n, 0, sizeof(*n));
	n->reason = (uint8_t)reason;
	n->stream_id = d->stream_id;
	n->msn = d->msn;
	n->offset = d->offset;
	n->nak_path_id = pkt->hdr.path_id;
	n->nak_path_gen = pkt->hdr.path_gen;
	n->nak_psn = pkt->hdr.psn;
	if (reason == MRP_NAK_RNR)
		n->retry_after_us = (uint32_t)(c->p.rnr_delay_ns / 1000);
	c->nakq[i].via_path = pkt->hdr.path_id;
	c->st.naks_sent++;
	c->ctl_dirty = 1;
}

static int rx_data(mrp_conn *c, const mrp_pkt *pkt, unsigned plane, int ce,
		   uint64_t now)
{
	const mrp_hdr *h = &pkt->hdr;
	const mrp_data *d = &pkt->u.data;
	if (h->path_id >= c->p.max_paths) {
		/* beyond the negotiated path count: the ends disagree (SPEC 13.2) */
		c->st.drops_range++;
		queue_nak(c, pkt, MRP_NAK_MALFORMED);
		fail_with(c, MRP_CLOSE_PROTOCOL);
		return MRP_ERR_RANGE;
	}
	path *pa = path_slot(c, h->path_id);
	if (!pa)
		return MRP_ERR_NOMEM;
	int stale = 0, fresh = 0;
	if (!pa->rx_open || h->path_gen != pa->rx.gen) {
		if (pa->rx_open && (int16_t)(h->path_gen - pa->rx.gen) < 0) {
			/* A generation the sender has left: place the data (it is
			 * still good) but do not record or acknowledge it. */
			stale = 1;
			c->st.drops_stale++;
		} else {
			mrp_rxwin_init(&pa->rx, h->path_gen);
			pa->rx_open = 1;
			pa->rx_pending = 0;
			fresh = 1;
		}
	}
	if (!stale)
		pa->rx_plane = (uint8_t)plane;
	c->st.rx_pkts++;
	c->st.rx_bytes += d->payload_len;
	if (c->p.rh) {
		/* HELD tells the allocator whether this sender is held back
		 * by its share or sends what it has (SPEC 6.5). */
		unsigned how = (ce ? MRP_RH_CE : 0) | (h->flags & MRP_F_RETX ? MRP_RH_RETX : 0);
		if (c->p.caps & MRP_CAP_HELD)
			how |= MRP_RH_SIGNALS | (h->flags & MRP_F_HELD ? MRP_RH_HELD : 0);
		/* its first round trip, with more to come after it, or
		 * the last of what it had (6.5, 6.6) */
		if ((h->flags & MRP_F_GRANT) && (c->p.caps & MRP_CAP_ADMIT))
			how |= h->flags & MRP_F_ACK_REQ ? MRP_RH_DRY : MRP_RH_CREDIT;
		mrp_rh_arrival(c->p.rh, &c->rh_slot, (uint64_t)(uintptr_t)c,
			       d->payload_len + MRP_DATA_HDR_LEN + c->p.wire_overhead, how, now);
		/* Data sent on its admission has left the queue the credit
		 * reserved room in: that room is free again (SPEC 6.6). */
		if ((h->flags & MRP_F_GRANT) && (c->p.caps & MRP_CAP_ADMIT)) {
			mrp_rh_admit_return(c->p.rh, c->p.mtu + MRP_DATA_HDR_LEN);
			if (!c->rx_credit_ns)
				c->rx_credit_ns = now;
		} else if (c->rx_credit_ns && !c->rx_credit_ended && c->p.expedite_max &&
			   !(h->flags & MRP_F_RETX)) {
			/* New data without GRANT: its sender has heard from
			 * us and sends no more on its credit. With the
			 * expedited class, what is left of a lone credit is
			 * taken back now, not at the credit's time (SPEC 6.6,
			 * 6.7). */
			c->rx_credit_ended = 1;
			mrp_rh_admit_end(c->p.rh, c->rx_credit_ns);
		}
	}
	if (c->p.expedite_max)
		c->rx_exp_until = d->msg_len <= c->p.expedite_max ? now + c->p.rto_min_ns : 0;

	/* Every packet the path delivered counts, NAK'd or not (SPEC 5.5). */
	if (!stale) {
		pa->rx.rcv_count++;
		pa->rx_pkts++;
		if (ce) {
			pa->rx.ce_count++;
			pa->rx_ce_pkts++;
		}
	}
	int fatal = 0;
	int rv = !mrp_op_is_read(h->opcode) ? rx_place(c, pkt, &fatal)
		 : h->opcode == MRP_OP_READ_REQ ? rx_read_req(c, pkt, &fatal)
						: rx_read_resp(c, pkt, &fatal);
	if (rv > 0) {
		/* NAK'd packets are not recorded as received: if the NAK is
		 * lost, the sender sees a hole, retransmits, and is NAK'd again. */
		queue_nak(c, pkt, rv);
		if (fatal)
			fail_with(c, rv == MRP_NAK_MALFORMED ? MRP_CLOSE_PROTOCOL : MRP_CLOSE_NORMAL);
		return 0;
	}
	if (stale)
		return 0;
	int gap;
	int r = mrp_rxwin_record(&pa->rx, h->psn, &gap);
	if (r == MRP_RXWIN_NEW && h->psn == pa->rx.next_psn - 1)
		pa->rx_ts_ns = d->ts_ns;
	pa->rx_arrival_ns = now;
	pa->rx_pending++;
	if (h->flags & MRP_F_ACK_REQ) {
		/* The sender waits for every path's ACK, not only this one's,
		 * before its messages complete (SPEC 6.3): acknowledge every
		 * path generation holding unacknowledged packets now. New data
		 * asking this is the last before the sender's queues ran dry:
		 * packets it sent just before on other paths may still be on
		 * their way, and are acknowledged at once for ack_delay. (A
		 * retransmission asking it is a probe or a repair of this
		 * path's tail: the sender is not done because of it.) */
		if (!(h->flags & MRP_F_RETX))
			c->rx_flush_until = now + c->p.ack_delay_ns;
		for (uint32_t i = 0; i < c->path_hi; i++) {
			path *q = c->paths[i];
			if (q && q != pa && q->rx_open && q->rx_pending) {
				q->rx_ack_now = 1;
				if (q->rx_ack_at != NEVER) {
					q->rx_ack_at = NEVER;
					c->dl_valid = 0;
				}
			}
		}
	}
	if (gap || fresh || r != MRP_RXWIN_NEW || (h->flags & MRP_F_ACK_REQ) ||
	    pa->rx_pending >= c->p.ack_every || now < c->rx_flush_until) {
		pa->rx_ack_now = 1;
		c->ctl_dirty = 1;
	} else if (pa->rx_ack_at == NEVER) {
		pa->rx_ack_at = now + c->p.ack_delay_ns;
		c->dl_valid = 0;
	}
	return 0;
}

/* ---- send side: ACK, NAK, PROBE_ACK processing -------------------------- */

static void rtt_sample(mrp_conn *c, path *pa, uint64_t rtt)
{
	if (rtt == 0)
		rtt = 1;
	uint64_t *pm = &c->plane_min_rtt_ns[pa->plane];
	if (*pm == 0 || rtt < *pm)
		*pm = rtt;
	pa->cc.plane_rtt_ns = *pm;
	if (pa->cc.srtt_ns == 0) {
		pa->cc.srtt_ns = rtt;
		pa->rttvar_ns = rtt / 2;
	} else {
		uint64_t dev = rtt > pa->cc.srtt_ns ? rtt - pa->cc.srtt_ns : pa->cc.srtt_ns - rtt;
		pa->rttvar_ns = (3 * pa->rttvar_ns + dev) / 4;
		pa->cc.srtt_ns = (7 * pa->cc.srtt_ns + rtt) / 8;
	}
	pa->last_rtt_ns = rtt;
	if (pa->cc.min_rtt_ns == 0 || rtt < pa->cc.min_rtt_ns)
		pa->cc.min_rtt_ns = rtt;
	/* A path's samples mix its own forward delay with the delay of
	 * whichever path each ACK came back on (SPEC 6.3 spreads them), so
	 * their spread can be wide and heavy-tailed: the timers keep clear of
	 * the largest recent one, which decays by 1/64 of its excess over
	 * srtt per sample. */
	if (rtt >= pa->max_rtt_ns)
		pa->max_rtt_ns = rtt;
	else if (pa->max_rtt_ns > pa->cc.srtt_ns)
		pa->max_rtt_ns -= (pa->max_rtt_ns - max64(pa->cc.srtt_ns, rtt)) / 64;
}

/* Resolve an in-flight entry as delivered. */
static void ent_acked(mrp_conn *c, path *pa, txent *e)
{
	txmsg *m = e->m;
	pa->cc.inflight -= e->bytes;
	c->total_inflight -= e->bytes;
	if (e->credit)
		c->credit_inflight -= e->bytes;
	e->state = ENT_DONE;
	e->m = NULL;
	pa->acked_pkts++;
	int finished = 0;
	uint8_t *sb = &m->segs[e->seg];
	if (SEG_STATE(*sb) != SEG_ACKED && !m->done) {
		*sb = (uint8_t)((*sb & ~3u) | SEG_ACKED);
		/* (a READ is done when its bytes are here, not its request) */
		if (++m->nacked == m->npkts && m->opcode != MRP_OP_READ_REQ) {
			m->done = 1;
			finished = 1;
		}
	}
	m->refs--;
	if (finished)
		tx_finished(c, m);
	else
		txmsg_put(c, m);
}

/* The tail-loss probe's wait. (Any path's ACK may come back on the slowest
 * return path: a tail probe waits for the largest recent RTT of the
 * connection.) A path whose RTT was only seeded from its plane's first ACK
 * (adm_seed_rtt()), with no sample of its own yet, waits at least the
 * timeout's floor: its own route may be far slower than the one that
 * answered, and at that moment the connection's largest RTT is that same
 * near route's (25G, spines 2 and 60 us away with 20 us of jitter: 4 of 7
 * spurious retransmissions were such paths' probes, 60-78 us after their
 * last packet, where the far route takes 70-170 us). */
static uint64_t path_pto(const mrp_conn *c, const path *pa)
{
	if (!pa->cc.srtt_ns) /* half its timeout, as path_rto() times it */
		return path_rto(c, pa) / 2;
	uint64_t pto = max64(2 * pa->cc.srtt_ns, max64(pa->max_rtt_ns, c->max_rtt_ns)) +
		       c->p.ack_delay_ns;
	if (!pa->own_sample)
		pto = max64(pto, c->p.rto_min_ns);
	return pto;
}

/*
 * In the tail -- no new data left to send -- nothing sent later on a path
 * shows a loss of its last packets, and a lost ACK of them is repeated by
 * nothing: the path waits for its tail-loss probe or its timeout, at a
 * long round trip 1.5-2 round trips after its ACK was due (a 10 ms path
 * with 1 % loss on its cable ended 24 ms after its last new data, where the
 * repair of a loss takes 10). The path's newest packet should be answered
 * one of the connection's largest round trips after it left (the ACK may
 * come back on the slowest path), plus the receiver's ACK delay: its probe
 * is due a quarter of that round trip later, counted from that packet, not
 * from the last ACK. Only on a path clean of ECN marks: where the queues
 * are full, a round trip is no firm bound and a probe adds to the queue.
 */
static uint64_t tail_probe_at(const mrp_conn *c, const path *pa)
{
	if (c->sq_head || !pa->cc.srtt_ns || pa->cc.alpha_q16 || pa->snd_nxt == pa->snd_una)
		return NEVER;
	const txent *e = &pa->ring[(pa->snd_nxt - 1) & (pa->ring_cap - 1)];
	uint64_t rtt = max64(pa->max_rtt_ns, c->max_rtt_ns);
	return e->sent_ns + rtt + rtt / 8 + c->p.ack_delay_ns;
}

static void tail_arm(mrp_conn *c, path *pa)
{
	uint64_t t = tail_probe_at(c, pa);
	if (t < pa->tlp_at) {
		pa->tlp_at = t;
		c->dl_valid = 0;
	}
}

/* The time burst_pkts packets of `bytes` take on plane's link (0: its rate
 * unknown): what the plane's pacing lets leave back to back. */
static uint64_t burst_span(const mrp_conn *c, unsigned plane, uint32_t bytes)
{
	uint64_t rate = c->p.plane_rate_bps[plane];
	if (!rate)
		rate = c->cc.params.line_rate_bps;
	if (!rate)
		return 0;
	return mrp_mul_div((uint64_t)(bytes + c->p.wire_overhead) * c->p.burst_pkts,
			   8000000000ull, rate);
}

/*
 * Whether pa's connection sends its packets a pacing gap apart, more than a
 * burst's time on pa's plane (burst_span()), under the receiver's hint, with
 * new data still queued: then pa gets no tail-loss probe before its timeout.
 * Such a connection spreads its packets over its paths one at a time, so
 * nearly every packet is its path's last for a while, and the probe fires
 * whenever a queue grows past what the path has timed -- the same moment
 * for every sender into that queue. 1,024 senders at 48 Mbit/s into two 25
 * Gbit/s planes sent 40 probes per 50 us when one plane's queue rose past
 * 170 KB, the copies doubled what that plane received, and it dropped 959
 * packets (bench/README.md). Its timeout still covers a loss, and asks
 * before it sends again where it may be only delay; the tail-loss probe
 * copies data (SPEC 6.4). Not in the tail (nothing queued), where the
 * probe is what ends the transfer.
 */
static int spaced_with_more(const mrp_conn *c, const path *pa)
{
	if (!c->sq_head || !c->cc.rate_hint_bps)
		return 0;
	uint64_t span = burst_span(c, pa->plane, c->p.mtu + MRP_DATA_HDR_LEN);
	return span && c->pace_gap > span;
}

static void cold_probe_arm(mrp_conn *c, path *pa, uint64_t now);

/*
 * A path opened with the connection, before its first RTT sample, that
 * has none yet (not its own, not seeded by adm_seed_rtt()) while its plane
 * has one: its packets are asked after by PROBE (cold_probe_arm(), at
 * least the timeout's floor after its oldest packet), not copied by a
 * tail-loss probe. Its plane's samples are of the routes that answered
 * first, the near ones, and its own route may be far slower (25G, spines 2
 * and 60 us away with 20 us of jitter: seed 7's 6 spurious retransmissions
 * were all tail-loss probes, 4 of them such paths', 105-118 us after the
 * connection's first packets, where the far route takes 70-170 us; seeds
 * 1-20, 52 -> 19). A real loss costs the PROBE's round trip more. Not a
 * path opened later (the hint's window grows the path set) or re-ported:
 * there a loss burst takes its first packets more often than delay holds
 * them (burst_1plane, bursts of 120 packets: 0.962 -> 0.938 of lossless
 * with those paths asking too, bench/README.md).
 */
static int start_unsampled(const mrp_conn *c, const path *pa)
{
	return !pa->cc.srtt_ns && pa->gen == 1 && pa->opened_cold &&
	       c->plane_max_rtt_ns[pa->plane];
}

static void path_arm_timers(mrp_conn *c, path *pa, uint64_t now)
{
	if (!pa->cc.inflight) {
		if (!pa->probe_pending)
			pa->rto_at = NEVER;
		pa->tlp_at = NEVER;
		return;
	}
	pa->rto_at = now + path_rto(c, pa);
	pa->tlp_n = 0;
	int ask = start_unsampled(c, pa);
	pa->tlp_at = min64(spaced_with_more(c, pa) || ask ? NEVER : now + path_pto(c, pa),
			   max64(tail_probe_at(c, pa), now));
	if (ask)
		cold_probe_arm(c, pa, now);
	pa->cold_timers = !pa->cc.srtt_ns && !c->plane_max_rtt_ns[pa->plane];
	c->cold_timers |= pa->cold_timers;
	if (pa->cold_timers && !c->max_rtt_ns && c->p.plane_rtt_hint_ns[pa->plane])
		/* no sample anywhere yet, but the host knows its network:
		 * ask by PROBE in a few of its round trips */
		cold_probe_arm(c, pa, now);
}

/* The path answered: it is alive. Only delivered data clears the RTO count:
 * a path that answers probes but loses data keeps failing until re-ported. */
static void path_alive(mrp_conn *c, path *pa, int data, uint64_t now)
{
	if (data) {
		pa->rto_count = 0;
		pa->route_rtos = 0;
		pa->fails = 0;
		pa->fails_quick = 0;
		pa->rp_fresh = 0;
	}
	if (c->unproven >> pa->plane & 1)
		return; /* only its PROBE's answer proves the address (rx_probe_ack) */
	pa->last_ack_ns = now;
	pa->ctl_unproven = 0;
	if (!pa->disabled && (pa->state == MRP_PATH_SUSPECT || pa->state == MRP_PATH_PROBING ||
			      pa->state == MRP_PATH_FAILED)) {
		path_trim_rto(c, pa, now);
		if (pa->probe_at != NEVER && pa->reprobe_n) {
			pa->probe_at = NEVER; /* (its repeated PROBEs: no more) */
			c->dl_valid = 0;
		}
		set_state(c, pa, MRP_PATH_ACTIVE, now);
		recompute_qwnd(c);
	}
}

static void hint_window(mrp_conn *c, uint64_t now);

/* The oldest send time of pa's packets in flight (now if none). */
static uint64_t oldest_inflight_ns(const path *pa, uint64_t now)
{
	for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
		const txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
		if (e->state == ENT_INFLIGHT)
			return e->sent_ns;
	}
	return now;
}

/* How long after its oldest packet a cold path asks by PROBE, and between
 * the PROBE's repeats (cold_probe_arm(), below). */
static uint64_t cold_wait(const mrp_conn *c, const path *pa)
{
	uint64_t hint = c->p.plane_rtt_hint_ns[pa->plane];
	uint64_t wait = 2 * max64(c->max_rtt_ns, hint) + c->p.ack_delay_ns;
	if (!hint)
		/* (another plane's RTT only: this one may be far slower) */
		wait = max64(wait, c->p.rto_min_ns);
	return wait;
}

/*
 * A path with packets in flight on a plane where the connection has no RTT
 * sample yet, while other planes have one: nothing times it but the
 * initial timers for an unknown network (its tail-loss probe at rto_init /
 * 2), and a packet lost alone there -- a collective step puts about one
 * packet on each of 8 planes -- would wait that long (8 planes, 0.1 % loss,
 * 16 MiB all-to-all: 12.5 ms where 2.9 was measured before paths stopped
 * borrowing other planes' RTTs). Its data is not sent again early, since
 * its plane may be far slower than the sampled ones (50x in the reordering
 * family, where re-timed probes copied data for nothing); a PROBE asks
 * instead, twice the connection's largest RTT plus the ACK delay, at least
 * the timeout's floor, after its oldest packet. The same where no plane has
 * a sample yet but the host gave an RTT of the path's plane
 * (plane_rtt_hint_ns: its other connections'), timed from that and not
 * held to the floor -- the plane's own RTT, and the PROBE costs only
 * itself: a one-packet step's lost packet asks within a few round trips,
 * not at rto_init / 2; the hint also delays the PROBE on a plane further
 * away than this connection's sampled ones. The answer comes after the
 * peer's ACK of what arrived before it, on the same route (SPEC 8.2): it
 * times the path, and what the path sent before it and is still unresolved
 * is lost (rx_probe_ack()). Not while admission asks for a grant (that
 * PROBE is the request, SPEC 6.6), nor on a path already probing.
 */
static void cold_probe_arm(mrp_conn *c, path *pa, uint64_t now)
{
	if (!pa->open || pa->disabled || pa->state != MRP_PATH_ACTIVE || pa->cc.srtt_ns ||
	    !pa->cc.inflight || pa->probe_pending || pa->probe_at != NEVER || pa->cold_probe ||
	    c->adm == ADM_ASK)
		return;
	pa->probe_at = max64(oldest_inflight_ns(pa, now) + cold_wait(c, pa), now);
	pa->cold_probe = 1;
	pa->cold_sent = 0;
	c->dl_valid = 0;
}

/* A path without an RTT sample, with packets in flight (others: nothing to
 * do), armed its timeout
 * on the initial one (rto_init: an unknown network), and its PROBEs ask
 * after its packets (cold_probe_arm()); where its route is a hole, the
 * PROBEs go unanswered and its packets waited for that timeout (two of a
 * flow's 8 routes in a hole from its start: 256 KiB in 1.1 ms where its
 * other paths took 20 us; a plane whose only spine dropped everything
 * from the sender's leaf: 1 MiB in 1.0 ms). Its timeout comes once its
 * PROBEs have had their waits instead, and not before half the initial
 * timeout: that is set for the longest round trip the network may have
 * (the simulator's: 3 of its longest), and its route, or its plane, may be
 * far slower than those that answered (two planes, round trips of about
 * 10 and 500 us: at the PROBEs' waits alone, 300 us, the far plane's first
 * window timed out, and a 32 MB flow sent 56 packets again for nothing;
 * 1 with this bound, as before the cap). */
static void cold_rto_cap(mrp_conn *c, path *pa, uint64_t now)
{
	if (!pa->open || pa->cc.srtt_ns || !pa->cc.inflight)
		return;
	uint64_t wait = max64((COLD_REPROBE_MAX + 1) * cold_wait(c, pa), c->p.rto_init_ns / 2);
	uint64_t rto = max64(oldest_inflight_ns(pa, now) + wait, now);
	if (rto < pa->rto_at) {
		pa->rto_at = rto;
		c->dl_valid = 0;
	}
}

/* The first RTT sample on a plane: paths of that plane that sent before it
 * armed their timers (cold_timers) on the initial timeout for an unknown network (rto_init, its
 * tail-loss probe at half that); those still without a sample of their own
 * re-time their tail-loss probe from their plane's RTT now (path_pto()),
 * counted from their oldest packet in flight, but not sooner than the
 * timeout's floor after it: their own route may be far slower than the one
 * that answered (50x in the reordering family; at path_pto() alone, 0.13 %
 * of its packets were sent again for nothing). On a fresh connection whose
 * few packets are spread one or two per path -- a collective's step, a
 * short message -- a lost one would otherwise wait rto_init / 2 for its
 * probe (2 MiB ring all-reduce, 64 ranks, 0.1 % loss per link: 3.43 ms,
 * now 1.02). Only on an ACK without marks or losses: in an incast the first
 * round trip overflows the queue, and probes sooner there put copies into
 * it (r7_incast: 10 drops after the first round trip, where none may be).
 * Their timeouts come sooner too (cold_rto_cap()), and so do those of paths
 * on a plane that has no sample yet. */
static void rearm_unsampled(mrp_conn *c, uint64_t now)
{
	if (!c->cold_timers || !c->max_rtt_ns)
		return;
	c->cold_timers = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!pa || !pa->cold_timers)
			continue;
		if (!c->plane_max_rtt_ns[pa->plane]) {
			/* no RTT of its plane yet (path_rto()): later, and a
			 * PROBE asks for one */
			c->cold_timers = 1;
			cold_probe_arm(c, pa, now);
			cold_rto_cap(c, pa, now);
			continue;
		}
		pa->cold_timers = 0;
		if (!pa->open || pa->cc.srtt_ns || !pa->cc.inflight)
			continue;
		cold_rto_cap(c, pa, now);
		if (start_unsampled(c, pa)) {
			cold_probe_arm(c, pa, now);
			continue;
		}
		uint64_t sent = oldest_inflight_ns(pa, now);
		uint64_t tlp = max64(sent + max64(path_pto(c, pa), c->p.rto_min_ns), now);
		if (tlp < pa->tlp_at) {
			pa->tlp_at = tlp;
			c->dl_valid = 0;
		}
	}
}

/* The first ACK within a large credit: the paths it opened before any
 * RTT was known take this sample as their first, and their timers follow.
 * Without it, a path whose packets were all lost (or whose last ones
 * were) would wait for the initial RTO -- 12 ms on a scale-across link --
 * where its peers take a few round trips. */
COLD static void adm_seed_rtt(mrp_conn *c, uint8_t plane, uint64_t rtt, uint64_t now)
{
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *p = c->paths[i];
		/* (only its plane's paths: another plane may be far slower,
		 * path_rto()) */
		if (!p || !p->open || p->cc.srtt_ns || p->plane != plane)
			continue;
		rtt_sample(c, p, rtt);
		if (p->cc.inflight)
			path_arm_timers(c, p, now);
	}
}

/*
 * Re-path (SPEC 6.4): a path whose route stays congested while the
 * connection runs below the receiver's rate hint moves to another route
 * with its window. ECN marks on every round of a path mean a queue on its
 * route; if the connection as a whole gets less than the receiver offers
 * it, that queue is not the receiver's link (where marks are expected and
 * another route changes nothing) but a cable of the fabric that ECMP gave
 * more than its share of flows, while another may idle. A re-port would
 * restart the path's window from the initial one; the path instead stops
 * taking new data, and once what it has in flight is acknowledged (so that
 * no packet of the old route arrives after one of the new, which would
 * read as loss), it takes another source port -- a new ECMP route -- and
 * goes on in the same generation with the same window and RTT. One path of
 * a connection at a time; a path's rounds of marks count again from zero
 * on its new route, so a new route that is as congested moves again after
 * REPATH_ROUNDS more rounds, and one that is clean stays. A connection
 * still opening its windows, or younger than REPATH_AGE_RTTS, is short of
 * its hint for that reason alone and does not re-path (paths moved in the
 * start-up of flows over planes 50x apart overflowed the far plane's
 * queue).
 */
#define REPATH_ROUNDS 3       /* rounds in a row with marks on >= 1/4 of the bytes */
#define REPATH_SHORT_NUM 15   /* ... while the connection gets < 15/16 of its hint */
#define REPATH_SHORT_DEN 16
#define REPATH_SHORT_SPANS 1  /* ... and not growing, in this many spans of 2 RTTs */
#define REPATH_AGE_RTTS 16    /* ... and acknowledged for this many of its RTTs */
/* A connection acknowledged at under half its hint over FAR_SHORT_SPANS
 * spans in a row, with data waiting at each span's end (an idle or
 * application-limited connection is short of its hint by its own choice:
 * in netns drill_link one idled 2 s with a hint and was taken as far
 * short when it started), and for FAR_SHORT_AGE_RTTS of its RTTs, is far
 * short of it (cc.far_short): its losses are a bottleneck's that the receiver does
 * not see (a slower hop that drops). Not a standing queue seen in the RTT
 * (srtt several times min RTT): in a daemon host delay alone holds srtt
 * there, and a queue test cut windows that accurate hints had kept large
 * (netns drill_link failed 2 runs of 6). Two spans, not one: a plane
 * failover's transition dips a connection under half its hint for one. */
#define FAR_SHORT_AGE_RTTS 4
#define FAR_SHORT_SPANS 2
#define REPATH_PAID_RTTS 16   /* a move is judged this long after it (repath_judge()) */
#define REPATH_MISS_FREE 8    /* moves that did not pay, free ... */
#define REPATH_BACKOFF_RTTS 4 /* ... then the next waits this, doubled for
			       * each further one ... */
#define REPATH_MISS_MAX 16    /* ... up to 2^15 times */
/*
 * A route with room (cc.uncoupled): a path acknowledged without a mark for
 * CLEAN_ROUNDS rounds in a row, while its connection is short of its hint
 * and not growing (rp_short) and marked somewhere (rp_marking, in the last
 * span), grows by its own window instead of the connection's: one MTU per
 * round trip of its own, not a share of one MTU per round trip of the whole
 * connection. The coupled increase keeps a connection fair to a one-path
 * flow at a bottleneck they share; a path whose route is clean while its
 * siblings are marked shares no bottleneck with them. Without this, a path
 * that a re-path moved onto an idle spine (churn_6planes_leafspine seed 2:
 * no plane-1 path of any flow on one spine) carried about a tenth of its
 * connection's bytes and gained a tenth of a packet per round trip: the
 * spine took 9 ms to fill. Not while far short (a drop-tail bottleneck
 * marks nothing, and every path there is "clean"); not slow start (a path
 * that lands on a full spine of a 1:1 fabric is clean for a few rounds by
 * luck, and doubling into it moved the flows already there:
 * bench/README.md).
 */
#define CLEAN_ROUNDS 3

/* The path waiting to re-path has nothing in flight: another source port. */
static void repath_apply(mrp_conn *c, path *pa, uint64_t now)
{
	if (pa->cc.inflight) /* (timed-out packets are not: they were sent again) */
		return;
	uint16_t old = pa->sport;
	for (int i = 0; i < 8 && pa->sport == old; i++)
		pa->sport = pick_sport(c);
	c->st.repaths++;
	path_new_route(c, pa);
	repath_cancel(c, pa, now);
	push_event(c, pa, pa->state, now); /* a move: same state, new sport */
	pa->rp_moved_ns = now ? now : 1;
	pa->rp_mv_acked = pa->rp_mv_marked = 0;
	pa->rp_mv_cacked = c->rp_cum_acked;
	pa->rp_mv_cmarked = c->rp_cum_marked;
	/* the new route may be a hole: it carries a few packets until one is
	 * acknowledged (path_room()), and a timeout before that re-ports it
	 * (path_timeout()) */
	pa->rp_fresh = 1;
	uint64_t rf = c->route_fail_ns[pa->plane];
	pa->rp_wary = rf && now - rf < c->p.rto_max_ns;
	c->ctl_dirty = 1;
}

/* Did a path's last move pay (SPEC 6.4)? REPATH_MISSED if the moved path
 * was marked REPATH_ROUNDS rounds in a row within REPATH_PAID_RTTS of the
 * move. After that, REPATH_PAID only if the new route marked it less than
 * a quarter as much as its connection's other paths were marked meanwhile
 * (by the fraction of bytes), over at least REPATH_PAID_PKTS of its own
 * packets; else REPATH_MISSED. Not being hot three rounds in a row is not
 * enough: marks that come and go on every route alike (a busy receiving
 * host's own queue) leave a path hot that long now and then, before its
 * move and after it, and each such "paid" move reset the backoff: on
 * loopback beside a CPU hog a daemon moved its paths 200 times a second,
 * each move a new source-port socket. Nor are a few packets: a path that
 * carried 19 in its 16 RTTs met no mark by chance a third of the time
 * (test_ce_host_flicker_repaths_back_off). A path that has not carried
 * them by REPATH_PAID_RTTS_MAX is not judged (REPATH_UNJUDGED). Clean
 * while its siblings are too: the marks are gone, and so is the need to
 * back off. */
#define REPATH_PAID_PKTS 32
#define REPATH_PAID_RTTS_MAX (4 * REPATH_PAID_RTTS)
enum { REPATH_WAIT, REPATH_PAID, REPATH_MISSED, REPATH_UNJUDGED };

static int repath_judge(const mrp_conn *c, const path *pa, uint64_t now, uint64_t base)
{
	uint64_t since = now - pa->rp_moved_ns;
	if (since < REPATH_PAID_RTTS * base)
		return pa->rp_hot >= REPATH_ROUNDS ? REPATH_MISSED : REPATH_WAIT;
	uint64_t oa = c->rp_cum_acked - pa->rp_mv_cacked - pa->rp_mv_acked;
	uint64_t om = c->rp_cum_marked - pa->rp_mv_cmarked - pa->rp_mv_marked;
	if (!oa)
		return REPATH_PAID; /* no sibling carried anything: nothing to compare */
	if (pa->rp_mv_acked < (uint64_t)REPATH_PAID_PKTS * c->p.mtu)
		return since < REPATH_PAID_RTTS_MAX * base ? REPATH_WAIT : REPATH_UNJUDGED;
	uint64_t pf = mrp_mul_div(pa->rp_mv_marked, 1024, pa->rp_mv_acked);
	uint64_t of = mrp_mul_div(om, 1024, oa);
	return 4 * pf <= of ? REPATH_PAID : REPATH_MISSED;
}

static void repath_round(mrp_conn *c, path *pa, uint64_t acked, uint64_t marked, uint64_t now)
{
	/* the connection's acknowledged rate, over at least two RTTs */
	if (!c->rp_first_ns)
		c->rp_first_ns = now ? now : 1;
	c->rp_bytes += acked;
	c->rp_mbytes += marked;
	c->rp_cum_acked += acked;
	c->rp_cum_marked += marked;
	if (pa->rp_moved_ns) {
		pa->rp_mv_acked += acked;
		pa->rp_mv_marked += marked;
	}
	uint64_t span = now - c->rp_since_ns, rtt = c->cc.hint_rtt_ns;
	uint64_t hint = c->cc.rate_hint_bps;
	if (rtt && span >= 2 * rtt) {
		uint64_t rate = mrp_mul_div(c->rp_bytes, 8000000000ull, span);
		/* short of the hint, and not growing towards it (a connection
		 * still opening its windows is short of the hint too) */
		int shortfall = (!hint || rate < hint / REPATH_SHORT_DEN * REPATH_SHORT_NUM) &&
				rate <= c->rp_rate_bps + c->rp_rate_bps / 16;
		c->rp_short = shortfall ? (uint8_t)(c->rp_short < 255 ? c->rp_short + 1 : 255) : 0;
		c->rp_rate_bps = rate;
		c->rp_marking = c->rp_mbytes > 0;
		c->rp_bytes = 0;
		c->rp_mbytes = 0;
		c->rp_since_ns = now;
		/* (no hint for the span: no news, the count stays) */
		int short2 = rate < hint / 2 && (c->sq_unsent || c->rq.len || c->aq.len) &&
			     now - c->rp_first_ns >= FAR_SHORT_AGE_RTTS * max64(rtt, c->max_rtt_ns);
		if (hint)
			c->fs_spans = short2 ? (uint8_t)(c->fs_spans < 255 ? c->fs_spans + 1 : 255) : 0;
		c->cc.far_short = c->fs_spans >= FAR_SHORT_SPANS;
		if (!c->cc.far_short)
			c->fs_left = 0; /* (the hint's window serves again) */
	}
	if (pa->rp_drain) {
		repath_apply(c, pa, now);
		return;
	}
	pa->rp_acked += (uint32_t)min64(acked, UINT32_MAX - pa->rp_acked);
	pa->rp_marked += (uint32_t)min64(marked, UINT32_MAX - pa->rp_marked);
	if (!pa->cc.srtt_ns || now - pa->rp_round_ns < pa->cc.srtt_ns)
		return;
	int hot = pa->rp_acked && pa->rp_marked >= pa->rp_acked / 4;
	pa->rp_hot = hot ? (uint8_t)(pa->rp_hot < 15 ? pa->rp_hot + 1 : 15) : 0;
	int clean = pa->rp_acked && !pa->rp_marked;
	pa->rp_clean = clean ? (uint8_t)(pa->rp_clean < 15 ? pa->rp_clean + 1 : 15) : 0;
	pa->cc.uncoupled = pa->rp_clean >= CLEAN_ROUNDS && c->rp_short && c->rp_marking &&
			   !c->cc.far_short;
	pa->rp_acked = pa->rp_marked = 0;
	pa->rp_round_ns = now;
	uint64_t base = max64(rtt, c->max_rtt_ns);
	if (pa->rp_moved_ns && base) {
		/* Did its last move pay (repath_judge())? A miss says the
		 * congestion is not the route's (the receiving host's own
		 * queue, marking every route alike), and the connection's next
		 * move waits, twice as long after each miss past
		 * REPATH_MISS_FREE in a row (a fabric with one idle spine of
		 * four: a move lands on a congested one 3 times in 4, and
		 * backing off at the first miss cost the churn family up to
		 * 0.05 of its capacity); a move that paid halves the count
		 * (starting it again let a lucky move among futile ones --
		 * a path that met no mark by chance -- undo the backoff:
		 * marks on a quarter of the 10 us windows made 358 moves in
		 * test_ce_host_flicker_repaths_back_off's 64 MB, 149 now). */
		int judged = repath_judge(c, pa, now, base);
		if (judged == REPATH_MISSED) {
			if (c->rp_miss < REPATH_MISS_FREE + REPATH_MISS_MAX)
				c->rp_miss++;
			if (c->rp_miss > REPATH_MISS_FREE)
				c->rp_next_ns = now + ((REPATH_BACKOFF_RTTS * base)
						       << (c->rp_miss - REPATH_MISS_FREE - 1));
		} else if (judged == REPATH_PAID) {
			c->rp_miss /= 2;
		}
		if (judged != REPATH_WAIT)
			pa->rp_moved_ns = 0;
	}
	if (pa->rp_hot >= REPATH_ROUNDS && !c->rp_path && pa->state == MRP_PATH_ACTIVE &&
	    c->rp_short >= REPATH_SHORT_SPANS && now >= c->rp_next_ns &&
	    now - c->rp_first_ns >= REPATH_AGE_RTTS * max64(rtt, c->max_rtt_ns)) {
		pa->rp_drain = 1;
		c->rp_path = (uint16_t)(pa->id + 1);
		repath_apply(c, pa, now);
	}
}

/*
 * An ACK showed held data of a timeout received after all (the timeout was
 * delay, at least for the oldest): the packets held with it that the ACK
 * does not cover yet were sent later, and are due one such round trip after
 * they left, not when the hold's one more timeout runs out. Their wait is
 * extended to the newest one's sending plus the round trip of the newest
 * packet this ACK showed received (rtt, the ACK's delay in it), an eighth
 * of it and the peer's ACK delay -- at most one more timeout from now. A
 * path on a far spine, timed from its plane's near RTT (2 vs 100 us), had
 * its 15 held packets sent again 7 us after the first of them was
 * acknowledged, as their own ACKs came: 16 spurious retransmissions, 0.102
 * % of reorder_50x_start seed 8. (Those the ACK shows missing were lost,
 * and are resolved by it as any.)
 */
COLD static void hold_extend(mrp_conn *c, path *pa, uint64_t rtt, uint64_t now)
{
	uint64_t newest = 0;
	int any = 0;
	for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
		const txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
		if (e->state == ENT_RTO && e->held) {
			any = 1;
			newest = max64(newest, e->sent_ns);
		}
	}
	if (!any)
		return;
	uint64_t due = min64(newest + rtt + rtt / 8 + c->p.ack_delay_ns, now + path_rto(c, pa));
	if (due > pa->hold_at) {
		pa->hold_at = due;
		c->dl_valid = 0;
	}
}

static int rx_ack(mrp_conn *c, const mrp_pkt *pkt, uint64_t now)
{
	const mrp_ack *a = &pkt->u.ack;
	c->st.acks_rcvd++;
	/* Without RATE_HINT the field means nothing (SPEC 6.4). */
	uint64_t hint = c->p.caps & MRP_CAP_RATE_HINT ? (uint64_t)a->rate_hint_mbps * 1000000 : 0;
	if (hint != c->last_hint_bps) {
		c->last_hint_bps = hint;
		c->cc.ops->on_rate_hint(&c->cc, hint, now);
	}
	int adm_open = c->adm && c->adm_open;
	adm_end(c); /* the receiver has heard from us: its hints rule (6.6) */
	path *pa = a->acked_path_id < c->paths_cap ? c->paths[a->acked_path_id] : NULL;
	if (!pa || !pa->open || a->acked_path_gen != pa->gen) {
		c->st.drops_stale++;
		return 0;
	}
	uint32_t n = a->next_psn;
	if (sdiff(n, pa->snd_nxt) > 0) {
		c->st.drops_range++; /* acknowledges what was never sent */
		return MRP_ERR_RANGE;
	}
	uint64_t acked = 0;
	uint32_t lost = 0, late = 0, rto_lost = 0;
	uint64_t late_sent = 0; /* the newest timed-out packet shown received */
	if (sdiff(n, pa->snd_una) > 0) {
		for (uint32_t psn = pa->snd_una; psn != n; psn++) {
			txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
			/* the next entry's message, sent an RTT ago, is cold:
			 * start loading it while this one is resolved */
			if (psn + 1 != n)
				PREFETCH(pa->ring[(psn + 1) & (pa->ring_cap - 1)].m);
			if (e->state == ENT_RTO) {
				uint32_t age = n - 1 - psn;
				int got = age < MRP_SACK_BITS && mrp_ack_bit(a, age);
				late += got;
				if (got && e->sent_ns > late_sent)
					late_sent = e->sent_ns;
				rto_lost += !got;
				ent_rto_resolve(c, pa, e, got, now);
				continue;
			}
			if (e->state != ENT_INFLIGHT)
				continue;
			uint32_t age = n - 1 - psn;
			if (age < MRP_SACK_BITS && mrp_ack_bit(a, age)) {
				acked += e->bytes;
				ent_acked(c, pa, e);
			} else {
				lost++;
				ent_lost(c, pa, e, 0, now);
			}
		}
		pa->snd_una = n;
		path_advance_una(pa);
		/* and the entries the path's next ACK will resolve (the
		 * scoreboard, written an RTT ago, is cold too) */
		if (n != pa->snd_nxt) {
			PREFETCH(&pa->ring[n & (pa->ring_cap - 1)]);
			PREFETCH(&pa->ring[(n + 2) & (pa->ring_cap - 1)]);
		}
	}
	uint64_t marked = 0;
	if (!pa->have_counts || sdiff(a->rcv_count, pa->ack_rcv) >= 0) {
		/* (an ACK older than the last one used gives SACK information only) */
		if (pa->have_counts) {
			uint32_t dce = a->ce_count - pa->ack_ce;
			uint32_t drcv = a->rcv_count - pa->ack_rcv;
			if (dce > drcv)
				dce = drcv;
			if (drcv)
				marked = acked * dce / drcv;
			pa->ce_pkts += dce;
		}
		pa->have_counts = 1;
		pa->ack_ce = a->ce_count;
		pa->ack_rcv = a->rcv_count;
	}
	if (late || rto_lost) {
		/* Timed-out packets resolved: if they arrived after all, the
		 * timeout was only delay (as Eifel and F-RTO detect it): the
		 * window cut is undone, and the path is alive. */
		if (late >= rto_lost && pa->undo_valid) {
			mrp_cc_path_raise(&c->cc, &pa->cc, pa->undo_cwnd, pa->undo_ssthresh);
			pa->undo_valid = 0;
			c->st.rto_spurious++;
		}
		pa->rto_was_delay = late >= rto_lost;
		if (!pa->rto_pending)
			pa->undo_valid = 0;
		if (late && !acked)
			path_alive(c, pa, 1, now);
	}
	if ((acked || late) && a->ts_echo_ns && a->ts_echo_ns <= now) {
		/* A timed-out packet that arrived after all is a sample too
		 * (a PSN is never sent twice: the echo is its own), and the
		 * one that matters: it took longer than the timer allowed.
		 * Without it a path whose ACKs now and then come back by a
		 * slower return route (SPEC 6.3) timed out at each of them
		 * and never learnt (spines 2 and 100 us away: 0.44 % of the
		 * packets sent again for nothing). */
		uint64_t rtt = now - a->ts_echo_ns;
		if (rtt > a->ack_delay_ns)
			rtt -= a->ack_delay_ns;
		rtt_sample(c, pa, rtt);
		pa->own_sample = 1;
		c->plane_last_rtt_ns[pa->plane] = rtt;
		if (pa->cold_probe && !pa->probe_pending) {
			pa->cold_probe = 0; /* timed by its own ACK: not needed */
			pa->probe_at = NEVER;
		} else if (pa->cold_probe && pa->reprobe_n && pa->probe_at != NEVER) {
			pa->probe_at = NEVER; /* (nor its repeats; the one out still counts) */
			c->dl_valid = 0;
		}
		if (acked && adm_open)
			adm_seed_rtt(c, pa->plane, rtt, now);
	}
	if (late && pa->rto_pending && pa->hold_at != NEVER)
		hold_extend(c, pa, now - late_sent, now);
	if (acked) {
		path_alive(c, pa, 1, now);
		c->cc.acking_bytes = c->total_inflight + acked;
		c->cc.ops->on_ack(&c->cc, &pa->cc, acked, marked, now);
	}
	if (lost)
		conn_on_loss(c, pa, lost, now);
	repath_round(c, pa, acked, marked, now);
	recompute_qwnd(c);
	hint_window(c, now);
	path_arm_timers(c, pa, now);
	if (!marked && !lost)
		rearm_unsampled(c, now);
	return 0;
}

static int rx_nak(mrp_conn *c, const mrp_pkt *pkt, uint64_t now)
{
	const mrp_nak *k = &pkt->u.nak;
	c->st.naks_rcvd++;
	if (k->reason == MRP_NAK_UNKNOWN_CONN) {
		/* The peer lost our connection (restart). Believe it only if it
		 * proves it saw our packets. */
		if (k->token_echo != c->p.peer_token) {
			c->st.drops_token++;
			return MRP_ERR_TOKEN;
		}
		if (c->state != CONN_CLOSED) {
			conn_flush(c, MRP_WC_RESET);
			c->state = CONN_CLOSED;
		}
		return 0;
	}
	txmsg *m = NULL;
	uint32_t seg = 0;
	int have_seg = 0;
	path *pa = k->nak_path_id < c->paths_cap ? c->paths[k->nak_path_id] : NULL;
	if (pa && pa->open && pa->gen == k->nak_path_gen &&
	    sdiff(k->nak_psn, pa->snd_una) >= 0 && sdiff(k->nak_psn, pa->snd_nxt) < 0) {
		txent *e = &pa->ring[k->nak_psn & (pa->ring_cap - 1)];
		if (e->state == ENT_RTO && e->held) {
			/* NAK'd after a timeout that held its data: as in
			 * flight (below), its bytes already out of the count */
			m = e->m;
			seg = e->seg;
			have_seg = 1;
			e->state = ENT_DONE;
			pa->rto_pending--;
			e->m = NULL;
			m->refs--;
		} else if (e->state == ENT_RTO) {
			/* NAK'd after its timeout: arrived, not lost; its data
			 * was queued again at the timeout */
			e->state = ENT_DONE;
			pa->rto_pending--;
			txmsg *x = e->m;
			e->m = NULL;
			txmsg_unref(c, x);
		} else if (e->state == ENT_INFLIGHT) {
			m = e->m;
			seg = e->seg;
			have_seg = 1;
			/* Resolved: not delivered, but not a loss either. */
			pa->cc.inflight -= e->bytes;
			c->total_inflight -= e->bytes;
			if (e->credit)
				c->credit_inflight -= e->bytes;
			e->state = ENT_DONE;
			e->m = NULL;
			m->refs--;
		}
		path_advance_una(pa);
		if (!pa->cc.inflight)
			path_arm_timers(c, pa, now);
	}
	if (!m)
		m = find_txmsg(c, k->stream_id, k->msn);
	if (!m || m->done) {
		if (have_seg)
			txmsg_put(c, m);
		return 0;
	}
	if (have_seg && SEG_STATE(m->segs[seg]) == SEG_INFLIGHT)
		m->segs[seg] = (uint8_t)(m->segs[seg] & ~3u); /* back to pending */
	if (k->reason == MRP_NAK_RNR) {
		if (!m->in_rnr) {
			if (m->rnr_count < UINT8_MAX)
				m->rnr_count++;
			if (m->first_retry_ns == NEVER)
				m->first_retry_ns = now;
			/* A count and a time, as for timeouts: a receiver that is
			 * a process may be descheduled for longer than
			 * rnr_retry_max short waits. */
			if (m->rnr_count > c->p.rnr_retry_max &&
			    now - m->first_retry_ns >= c->p.retry_timeout_ns) {
				m->status = MRP_WC_RNR_RETRY_EXC;
				m->done = 1;
				fail_with(c, MRP_CLOSE_RETRY_EXCEEDED);
			} else {
				m->in_rnr = 1;
				m->rnr_until = now + (k->retry_after_us
							      ? (uint64_t)k->retry_after_us * 1000
							      : c->p.rnr_delay_ns);
				m->rnext = c->rnr_list;
				c->rnr_list = m;
			}
		}
	} else {
		m->status = (uint8_t)nak_to_status(k->reason);
		m->done = 1;
		/* (the two ends disagree about the connection's state: SPEC 7.3) */
		fail_with(c, k->reason == MRP_NAK_MALFORMED ? MRP_CLOSE_PROTOCOL : MRP_CLOSE_NORMAL);
	}
	/* A message that failed is completed by conn_fail(), which unlinks it
	 * from the send queue first: completing it here could free it while
	 * it is still queued. */
	if (!m->done)
		stream_complete_tx(c, &c->streams[m->stream]);
	return 0;
}

/* The answer to our request (SPEC 6.6): the granted rate sizes the window
 * as a first ACK's hint would, over the RTT the request measured. A grant
 * of 0 (the receiver divides no capacity) leaves the initial window. That
 * RTT is not a sample of the path's: the request crossed an empty queue
 * (a control packet, ahead of data where switches prioritise them), and
 * the data it admits meets the queue that the receiver's budget allows --
 * with the request's RTT as srtt, the first data's tail-loss probes would
 * fire while it waits there, and add to it. The first ACK gives the first
 * sample, as it does without admission. */
COLD static void adm_granted(mrp_conn *c, uint64_t grant_bps, uint64_t rtt, uint64_t now)
{
	adm_end(c);
	c->st.admit_grants++;
	if (!grant_bps || !(c->p.caps & MRP_CAP_RATE_HINT))
		return;
	c->last_hint_bps = grant_bps;
	c->cc.ops->on_rate_hint(&c->cc, grant_bps, now);
	recompute_qwnd(c);
	if (rtt && !c->cc.hint_rtt_ns) {
		/* the window's and pacing's RTT until a path has a sample of
		 * its own (recompute_qwnd()); paced over an unsampled path's
		 * initial guess instead (3.75 ms at a 1 ms round trip), a
		 * granted connection sent a third of its grant for two round
		 * trips. Not the paths' srtt: their timers wait for a sample. */
		c->grant_rtt_ns = rtt;
		recompute_qwnd(c);
		hint_window(c, now);
		c->cc.ops->on_rate_hint(&c->cc, grant_bps, now); /* (pacing again) */
	}
	/* Requests that arrived together are answered together: were every
	 * sender to start with a burst at once, a thousand of them would
	 * overflow the queue the grants keep empty. Each starts at a random
	 * point of its first packet's pacing interval, with no burst, so that
	 * together they arrive at about the receiver's capacity. */
	if (c->cc.pacing_bps) {
		uint64_t wire = (uint64_t)MRP_DATA_HDR_LEN + c->p.mtu + c->p.wire_overhead;
		uint64_t gap = mrp_mul_div(wire, 8000000000ull, c->cc.pacing_bps);
		c->pace_at = now + mrp_rand_below(&c->rng, gap ? gap : 1);
		c->pace_blocked = 1;
	}
}

/* Whether a PROBE that asks for a grant is out on some path. */
COLD static int adm_asking(const mrp_conn *c)
{
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (pa && pa->open && pa->probe_pending && pa->probe_asked)
			return 1;
	}
	return 0;
}

/* The peer's address on plane pair `plane` answered a PROBE sent to it
 * (the echo of its random sequence number): its paths that waited for that
 * proof go into service, each through its own PROBE (the one answered has
 * its RTT sample next). */
static void plane_proven(mrp_conn *c, unsigned plane, uint64_t now)
{
	c->unproven &= ~(1u << plane);
	c->st.planes_proven++;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *o = c->paths[i];
		if (o && o->open && o->plane == plane && !o->disabled &&
		    o->state == MRP_PATH_PROBING && !o->probe_pending)
			path_start_probe(c, o, now);
	}
}

static int rx_probe_ack(mrp_conn *c, const mrp_pkt *pkt, uint64_t now)
{
	const mrp_probe_ack *k = &pkt->u.probe_ack;
	path *pa = k->probed_path_id < c->paths_cap ? c->paths[k->probed_path_id] : NULL;
	/* (the answer to any of the PROBEs repeated since the timeout) */
	if (!pa || !pa->open || pa->gen != k->probed_path_gen || !pa->probe_pending ||
	    pa->probe_seq - k->probe_seq > pa->reprobe_n) {
		c->st.drops_stale++;
		return 0;
	}
	pa->probe_pending = 0;
	if (pa->probe_at != NEVER) {
		pa->probe_at = NEVER; /* no more repeats */
		c->dl_valid = 0;
	}
	if (c->unproven >> pa->plane & 1)
		plane_proven(c, pa->plane, now);
	/* The peer acknowledged the path's packets just before it answered,
	 * on the same route (SPEC 8.2), and this PROBE left after the path's
	 * last timeout, so after every timed-out packet: those still
	 * unresolved were not shown received, and are lost (their data, if
	 * the timeout held it, goes again now). Which PROBE left when is
	 * told by its sequence number, not by the echoed timestamp: a
	 * sender may stamp a packet as it leaves, later than the engine
	 * wrote it (the daemon does), and the peer echoes what it likes. */
	if (pa->rto_pending && (int32_t)(k->probe_seq - pa->rto_probe_seq) > 0) {
		uint32_t lost = 0;
		for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
			txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
			if (e->state == ENT_RTO) {
				ent_rto_resolve(c, pa, e, 0, now);
				lost++;
			}
		}
		path_advance_una(pa);
		if (lost && !pa->rto_pending)
			pa->undo_valid = 0;
	}
	/* The answer to a cold path's PROBE (cold_probe_arm()), or to one of
	 * its repeats: its packets sent before the first and still unresolved
	 * were not shown received. */
	if (pa->cold_probe && pa->cold_sent && (int32_t)(k->probe_seq - pa->cold_probe_seq) >= 0) {
		pa->cold_probe = 0;
		pa->reprobe_n = 0;
		uint32_t lost = 0;
		/* (ACKs since may have moved snd_una past it) */
		for (uint32_t psn = pa->snd_una; (int32_t)(pa->cold_probe_nxt - psn) > 0; psn++) {
			txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
			if (e->state == ENT_INFLIGHT) {
				ent_lost(c, pa, e, 0, now);
				lost++;
			}
		}
		path_advance_una(pa);
		if (lost)
			conn_on_loss(c, pa, lost, now);
	}
	uint64_t rtt = 0;
	int grant = (pkt->hdr.flags & MRP_F_GRANT) && c->adm == ADM_ASK;
	if (k->ts_echo_ns <= now) {
		rtt = now - k->ts_echo_ns;
		if (rtt > k->ack_delay_ns)
			rtt -= k->ack_delay_ns;
		/* (not a grant's: see adm_granted()) */
		if (!grant) {
			rtt_sample(c, pa, rtt);
			pa->own_sample = 1;
		}
		pa->probe_rtt_ns = rtt;
		pa->probes_answered++;
	}
	if (pa->snd_nxt == 0)
		pa->fails = pa->fails_quick = 0; /* no data to lose: answering is working */
	path_alive(c, pa, 0, now);
	path_arm_timers(c, pa, now);
	recompute_qwnd(c); /* (the connection's RTT may be its first) */
	rearm_unsampled(c, now);
	if (grant)
		adm_granted(c, (uint64_t)k->grant_mbps * 1000000, rtt, now);
	else if (c->adm == ADM_ASK && pa->probe_asked)
		adm_end(c); /* a request answered without a grant: the initial window (6.6) */
	else if (c->adm == ADM_ASK && !adm_asking(c)) {
		/* Data waits for a grant that no PROBE asked for: every path
		 * had a PROBE out when the data came (a ping's). This path
		 * answers: ask on it now, not at its next idle probe. */
		path_start_probe(c, pa, now);
		c->dl_valid = 0;
	}
	return 0;
}

int mrp_conn_read_pkt(mrp_conn *c, const mrp_pkt *pkt, unsigned plane, int ce,
		      uint64_t now_ns)
{
	const mrp_hdr *h = &pkt->hdr;
	/* (a data packet moves no timer but its path's delayed ACK, and
	 * rx_data() drops the cached deadline for that; anything else may) */
	if (!mrp_op_is_data(h->opcode))
		c->dl_valid = 0;
	if (h->dst_conn_id != c->p.local_conn_id)
		return MRP_ERR_NOCONN;
	int unknown_conn_nak = h->opcode == MRP_OP_NAK &&
			       pkt->u.nak.reason == MRP_NAK_UNKNOWN_CONN;
	if (h->token != c->p.local_token && !unknown_conn_nak) {
		c->st.drops_token++;
		return MRP_ERR_TOKEN;
	}
	if (h->src_conn_id != c->p.peer_conn_id) {
		c->st.drops_noconn++; /* SPEC 13.2 step 3 */
		return MRP_ERR_NOCONN;
	}
	if (plane >= c->p.nplanes) {
		c->st.drops_range++;
		return MRP_ERR_RANGE;
	}
	/* Only a packet with our token is a sign of life: a NAK UNKNOWN_CONN
	 * carries none (SPEC 13.2 step 3), whether it ends the connection or
	 * is dropped below for a wrong token_echo. */
	if (!unknown_conn_nak)
		c->last_rx_ns = c->plane_rx_ns[plane] = now_ns;
	int rv = 0;
	if (h->opcode == MRP_OP_RESET) {
		if (c->state != CONN_CLOSED || c->close_pending == 1) {
			conn_flush(c, MRP_WC_RESET);
			c->state = CONN_CLOSED;
			c->close_pending = 0;
		}
		return 0;
	}
	if (h->opcode == MRP_OP_CLOSE) {
		if (h->flags & MRP_F_REPLY) {
			if (c->state == CONN_CLOSING) {
				conn_flush(c, MRP_WC_FLUSHED); /* unmatched receives */
				c->state = CONN_CLOSED;
				c->close_pending = 0;
			}
		} else if (sending(c)) {
			c->close_reason = pkt->u.close.reason; /* the reply's (11.2) */
			c->peer_closing = 1; /* reply when our own work is done */
			close_check(c, now_ns);
		} else if (c->state == CONN_CLOSING || c->close_pending == 0) {
			/* both closed at once, or a repeated CLOSE: answer it */
			if (c->state != CONN_CLOSED)
				conn_flush(c, MRP_WC_FLUSHED);
			c->state = CONN_CLOSED;
			c->close_reason = pkt->u.close.reason; /* the reply's (11.2) */
			c->close_pending = 2;
		}
		return 0;
	}
	if (c->state == CONN_CLOSED)
		return MRP_ERR_STATE;
	switch (h->opcode) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM:
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP:
		rv = rx_data(c, pkt, plane, ce, now_ns);
		break;
	case MRP_OP_ACK:
		rv = rx_ack(c, pkt, now_ns);
		break;
	case MRP_OP_NAK:
		rv = rx_nak(c, pkt, now_ns);
		break;
	case MRP_OP_PROBE: {
		path *pa = path_slot(c, h->path_id);
		if (!pa) {
			c->st.drops_range++;
			return MRP_ERR_RANGE;
		}
		pa->pack_pending = 1;
		pa->pack_grant = (h->flags & MRP_F_GRANT) && (c->p.caps & MRP_CAP_ADMIT);
		pa->pack_gen = h->path_gen;
		/* The path's receive state goes back with the answer, ahead of
		 * it on the same route (write_pkt): a sender probing a path
		 * whose packets timed out learns which of them arrived, and
		 * whatever was sent before the probe and is not acknowledged
		 * by then is lost (SPEC 8). */
		if (pa->rx_open && pa->rx.any && pa->rx.gen == h->path_gen) {
			pa->rx_ack_now = 1;
			if (pa->rx_ack_at != NEVER) {
				pa->rx_ack_at = NEVER;
				c->dl_valid = 0;
			}
		}
		pa->pack_seq = pkt->u.probe.probe_seq;
		pa->pack_ts_ns = pkt->u.probe.ts_ns;
		pa->pack_arrival_ns = now_ns;
		pa->rx_plane = (uint8_t)plane;
		c->ctl_dirty = 1;
		break;
	}
	case MRP_OP_PROBE_ACK:
		rv = rx_probe_ack(c, pkt, now_ns);
		break;
	default:
		return MRP_ERR_STATE; /* handshake packets belong to the caller */
	}
	if (c->pending_fail)
		conn_fail(c);
	close_check(c, now_ns);
	return rv;
}

/* ---- send side: writing packets ----------------------------------------- */

static void fill_hdr(const mrp_conn *c, mrp_hdr *h, uint8_t op, const path *via)
{
	memset(h, 0, sizeof(*h));
	h->version = MRP_VERSION;
	h->opcode = op;
	h->dst_conn_id = c->p.peer_conn_id;
	h->src_conn_id = c->p.local_conn_id;
	h->token = c->p.peer_token;
	if (via) {
		h->path_id = via->id;
		h->path_gen = via->gen;
	}
}

static void fill_ti(mrp_tx_info *ti, const path *via, int is_data)
{
	ti->plane = via->plane;
	ti->sport = via->sport;
	ti->path_id = via->id;
	ti->ect = (uint8_t)is_data;
	ti->is_data = (uint8_t)is_data;
}

static int usable_for_ctl(const path *pa)
{
	return pa && pa->open && !pa->disabled && pa->state != MRP_PATH_CLOSED;
}

/*
 * The path an ACK, NAK or PROBE_ACK about peer path `id` (which arrived on
 * local plane `plane`) travels on. ACKs are spread round robin over the
 * active paths of that plane, so that a route that fails in one direction
 * does not silence the acknowledgements of the other (SPEC 6.3); failing
 * that, any active path; failing that, our path with the same id.
 */
static path *ctl_route(mrp_conn *c, uint16_t id, uint8_t plane)
{
	uint32_t on_plane = 0, any = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!usable_for_ctl(pa) || pa->state != MRP_PATH_ACTIVE)
			continue;
		any++;
		on_plane += pa->plane == plane;
	}
	if (any) {
		uint32_t want = c->ctl_rr++ % (on_plane ? on_plane : any);
		for (uint32_t i = 0; i < c->path_hi; i++) {
			path *pa = c->paths[i];
			if (!usable_for_ctl(pa) || pa->state != MRP_PATH_ACTIVE ||
			    (on_plane && pa->plane != plane))
				continue;
			if (want-- == 0)
				return pa;
		}
	}
	path *same = id < c->paths_cap ? c->paths[id] : NULL;
	return usable_for_ctl(same) ? same : NULL;
}

/*
 * ACKs travel on paths that may carry no data of ours: a receiver that only
 * receives learns nothing of them from ACKs, and a route that fails in the
 * direction away from it would swallow its share of the ACKs for as long as
 * the connection lives. So a path with none of our data in flight (whose
 * timer would find out) is probed when it has carried ACKs since it last
 * proved to work (an answered PROBE, or an ACK of our data sent on it): at
 * CTL_PROBE_EVERY of them, or at CTL_PROBE_MIN once rto_min has passed
 * since the proof. Unanswered, it turns SUSPECT and carries no more ACKs
 * (ctl_route), and fails and re-ports like any path. The probes cost at
 * most one packet per CTL_PROBE_MIN ACKs and one per path per rto_min, or
 * one per CTL_PROBE_EVERY ACKs where ACKs are more frequent than that.
 */
#define CTL_PROBE_MIN 2
#define CTL_PROBE_EVERY 64
/* Re-ports of an ACK-only path at its first unanswered probe, without an
 * answer in between: ACK_REPORTS, or ACK_REPORTS_PROVEN while another path
 * of its plane works (the peer answers: it is the route that fails). */
#define ACK_REPORTS 2
#define ACK_REPORTS_PROVEN 6
/* ... and from the ACK_REPORTS-th of those on, on a connection with
 * nothing of its own to send, each new route's probe waits
 * 2^ACK_REPORT_HOLD timeout floors, doubling with each further re-port:
 * with two spines a streak of unlucky routes is common among many paths,
 * and probing each at once put a probe per floor into the hole (4 x 25G
 * planes of two spines, seeds 11-54: 1.3-3.1 % of the cable's former
 * packets still went into it 3 floors on in 6 of 76 runs, none over 1 %
 * with the wait; bench/README.md). At most rto_max. */
#define ACK_REPORT_HOLD 4
/* Timeouts that fail a path while another path of its plane works (the
 * peer answers: what fails is the route), instead of suspect_rtos. */
#define ROUTE_FAIL_RTOS 2

static void ctl_sent_on(mrp_conn *c, path *via, uint64_t now)
{
	if (!via || via->state != MRP_PATH_ACTIVE || via->cc.inflight || via->probe_pending ||
	    via->probe_at != NEVER)
		return;
	if (++via->ctl_unproven < CTL_PROBE_MIN ||
	    (via->ctl_unproven < CTL_PROBE_EVERY && now - via->last_ack_ns < c->p.rto_min_ns))
		return;
	via->ctl_unproven = 0;
	c->dl_valid = 0;
	path_start_probe(c, via, now);
}

static ssize_t encode_ctl(const mrp_conn *c, const mrp_pkt *k, mrp_tx_info *ti,
			  const path *via, uint8_t *buf, size_t buflen, uint64_t now)
{
	ssize_t n = mrp_pkt_encode(buf, buflen, k);
	if (n > 0 && via) {
		int rx = now < c->rx_exp_until;
		fill_ti(ti, via, 0);
		/* On a short message's round trip (SPEC 6.7): ACKs and NAKs of
		 * short messages received, PROBEs of a sender of short messages
		 * (or of a receiver of them with nothing of its own out), and
		 * what answers or ends either. */
		switch (k->hdr.opcode) {
		case MRP_OP_ACK:
		case MRP_OP_NAK:
			ti->expedite = rx;
			break;
		case MRP_OP_PROBE:
			ti->expedite = c->tx_exp_out || (rx && !c->tx_outstanding);
			break;
		default:
			ti->expedite = rx || c->tx_exp_out;
		}
		/* A request for a grant and its answer, whatever the
		 * connection carries: while they wait, the connection sends
		 * nothing, and in the default class they waited behind the
		 * expedited data of the host's other connections (a 4-host
		 * all-to-all of 256 KiB: every host's credit data filled the
		 * class at its line rate, and the answers to the other
		 * connections' requests came 65 us late) */
		if ((k->hdr.opcode == MRP_OP_PROBE || k->hdr.opcode == MRP_OP_PROBE_ACK) &&
		    (k->hdr.flags & MRP_F_GRANT) && c->p.expedite_max)
			ti->expedite = 1;
	}
	return n;
}

static ssize_t write_ack(mrp_conn *c, path *pa, mrp_tx_info *ti, uint8_t *buf,
			 size_t buflen, uint64_t now)
{
	path *via = ctl_route(c, pa->id, pa->rx_plane);
	pa->rx_ack_now = 0;
	if (pa->rx_ack_at != NEVER) {
		pa->rx_ack_at = NEVER;
		c->dl_valid = 0;
	}
	pa->rx_pending = 0;
	if (!via)
		return 0;
	mrp_pkt k;
	/* (the header and the ACK body only: the union is 10 times larger) */
	memset(&k, 0, offsetof(mrp_pkt, u) + sizeof(k.u.ack));
	fill_hdr(c, &k.hdr, MRP_OP_ACK, via);
	mrp_ack *a = &k.u.ack;
	a->acked_path_id = pa->id;
	mrp_rxwin_to_ack(&pa->rx, a);
	uint64_t delay = now - pa->rx_arrival_ns;
	a->ack_delay_ns = delay > UINT32_MAX ? UINT32_MAX : (uint32_t)delay;
	a->ts_echo_ns = pa->rx_ts_ns;
	if (c->p.rh && c->rh_slot != UINT32_MAX && (c->p.caps & MRP_CAP_RATE_HINT)) {
		uint64_t share = mrp_rh_share(c->p.rh, c->rh_slot, (uint64_t)(uintptr_t)c, now);
		uint64_t mbps = share / 1000000;
		if (share && !mbps)
			mbps = 1;
		a->rate_hint_mbps = mbps > UINT32_MAX ? UINT32_MAX : (uint32_t)mbps;
	}
	c->st.acks_sent++;
	ssize_t n = encode_ctl(c, &k, ti, via, buf, buflen, now);
	if (n > 0) {
		if (pa->pack_pending)
			pa->pack_via = (uint16_t)(via->id + 1);
		ctl_sent_on(c, via, now);
	}
	return n;
}

COLD static ssize_t write_probe_ack(mrp_conn *c, path *pa, mrp_tx_info *ti, uint8_t *buf,
			       size_t buflen, uint64_t now)
{
	pa->pack_pending = 0;
	/* (after the ACK it answers with, on the ACK's route: SPEC 8.2) */
	path *via = pa->pack_via && pa->pack_via - 1u < c->paths_cap ? c->paths[pa->pack_via - 1u]
								    : NULL;
	pa->pack_via = 0;
	if (!usable_for_ctl(via))
		via = ctl_route(c, pa->id, pa->rx_plane);
	if (!via)
		return 0;
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	fill_hdr(c, &k.hdr, MRP_OP_PROBE_ACK, via);
	k.u.probe_ack.probed_path_id = pa->id;
	k.u.probe_ack.probed_path_gen = pa->pack_gen;
	k.u.probe_ack.probe_seq = pa->pack_seq;
	k.u.probe_ack.ts_echo_ns = pa->pack_ts_ns;
	uint64_t delay = now - pa->pack_arrival_ns;
	k.u.probe_ack.ack_delay_ns = delay > UINT32_MAX ? UINT32_MAX : (uint32_t)delay;
	if (pa->pack_grant) {
		/* A request (SPEC 6.6): the sender takes its place among ours
		 * now, and the answer is its share of the capacity. */
		uint64_t g = 0;
		if (c->p.rh && (c->p.caps & MRP_CAP_RATE_HINT))
			g = mrp_rh_grant(c->p.rh, &c->rh_slot, (uint64_t)(uintptr_t)c, now);
		uint64_t mbps = g / 1000000;
		if (g && !mbps)
			mbps = 1;
		k.hdr.flags = MRP_F_GRANT;
		k.u.probe_ack.grant_mbps = mbps > UINT32_MAX ? UINT32_MAX : (uint32_t)mbps;
		pa->pack_grant = 0;
		c->st.admit_requests++;
	}
	return encode_ctl(c, &k, ti, via, buf, buflen, now);
}

static int plane_alive_without(const mrp_conn *c, const path *pa, uint64_t now);

COLD static ssize_t write_probe(mrp_conn *c, path *pa, mrp_tx_info *ti, uint8_t *buf,
			   size_t buflen, uint64_t now)
{
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	fill_hdr(c, &k.hdr, MRP_OP_PROBE, pa);
	k.hdr.flags = MRP_F_ACK_REQ;
	if (c->adm == ADM_ASK)
		k.hdr.flags |= MRP_F_GRANT; /* a request for a grant (SPEC 6.6) */
	pa->probe_asked = c->adm == ADM_ASK;
	k.u.probe.probe_seq = ++pa->probe_seq;
	k.u.probe.ts_ns = now;
	c->dl_valid = 0;
	int again = pa->probe_pending; /* the last one is unanswered */
	if (pa->cold_probe && !pa->cold_sent) {
		pa->cold_sent = 1;
		pa->cold_probe_nxt = pa->snd_nxt;
		pa->cold_probe_seq = pa->probe_seq;
	}
	pa->probe_at = NEVER;
	pa->probe_pending = 1;
	pa->probe_sent_ns = now;
	pa->last_tx_ns = now;
	if (!pa->cc.inflight && (!again || pa->rto_at == NEVER))
		pa->rto_at = now + path_rto(c, pa);
	/* A SUSPECT path probes again one PTO later, REPROBE_MAX times
	 * before its timeout: a loss burst on a link usually ends within a
	 * few round trips, and the doubled timeout would keep the path out
	 * of service long after it (SPEC 8). While another path of its plane
	 * works, what failed may be its own route alone (a hole, a cable down
	 * on it) and may last: the others carry the plane's traffic, and the
	 * waits between its probes double (a sender's path probed a black
	 * hole every 38 us for 0.3 ms: 1-3 % of the cable's former packets
	 * 3 RTO floors after the hole opened).
	 * A cold path's PROBE (cold_probe_arm()) is repeated one wait later,
	 * COLD_REPROBE_MAX times, while no answer comes: the PROBE and its
	 * answer cross the same lossy links as the data, and a lost one left
	 * a lost last packet to the tail-loss probe armed before the plane
	 * had an RTT, at half the initial timeout (a 2 MiB all-to-all of 64
	 * ranks at 0.1 % loss on every link: 3 of 236 such PROBEs or answers
	 * lost, each a flow 500 us late and its collective 0.4 ms late;
	 * bench/README.md, "A cold path's PROBE, repeated"). */
	uint64_t gap = 0; /* until the repeat; 0 = none */
	if (pa->state == MRP_PATH_SUSPECT && pa->reprobe_n < REPROBE_MAX) {
		gap = path_pto(c, pa);
		if (plane_alive_without(c, pa, now))
			gap <<= pa->reprobe_n;
	} else if (pa->cold_probe && pa->state == MRP_PATH_ACTIVE &&
		   pa->reprobe_n < COLD_REPROBE_MAX) {
		gap = cold_wait(c, pa);
	}
	if (gap && now + gap < pa->rto_at) {
		pa->reprobe_n++;
		pa->probe_at = now + gap;
	}
	return encode_ctl(c, &k, ti, pa, buf, buflen, now);
}

COLD static ssize_t write_nak(mrp_conn *c, mrp_tx_info *ti, uint8_t *buf, size_t buflen,
			       uint64_t now)
{
	uint32_t i = c->nakq_head;
	c->nakq_head = (c->nakq_head + 1) & (c->nakq_cap - 1);
	c->nakq_len--;
	uint16_t id = c->nakq[i].via_path;
	path *pa = id < c->paths_cap ? c->paths[id] : NULL;
	path *via = ctl_route(c, id, pa ? pa->rx_plane : 0);
	if (!via)
		return 0;
	c->nak_via = (uint16_t)(via->id + 1);
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	fill_hdr(c, &k.hdr, MRP_OP_NAK, via);
	k.u.nak = c->nakq[i].nak;
	return encode_ctl(c, &k, ti, via, buf, buflen, now);
}

COLD static ssize_t write_close(mrp_conn *c, mrp_tx_info *ti, uint8_t *buf, size_t buflen,
			   uint64_t now)
{
	c->dl_valid = 0;
	path *via = ctl_route(c, 0, 0);
	/* A RESET that follows a NAK (a fatal one, SPEC 7.3) takes the NAK's
	 * path: packets of one path leave and arrive in order, and the peer
	 * must see the NAK's reason before the RESET flushes the message. */
	if (c->close_pending == 3 && c->nak_via) {
		path *nv = c->nak_via - 1u < c->paths_cap ? c->paths[c->nak_via - 1u] : NULL;
		if (usable_for_ctl(nv))
			via = nv;
	}
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	fill_hdr(c, &k.hdr, c->close_pending == 3 ? MRP_OP_RESET : MRP_OP_CLOSE, NULL);
	/* Ours: why we close or fail (11.4); a reply: the peer's (11.2 step 3) */
	k.u.close.reason = c->close_reason;
	if (c->close_pending == 2)
		k.hdr.flags = MRP_F_REPLY;
	if (c->close_pending == 1) {
		/* Resent until the reply comes, a few times at most. */
		if (++c->close_tries > 8) {
			conn_flush(c, MRP_WC_FLUSHED);
			c->state = CONN_CLOSED;
			c->close_pending = 0;
			return 0;
		}
		c->close_at = now + (c->p.rto_init_ns << (c->close_tries - 1));
	} else {
		c->close_pending = 0;
	}
	if (!via)
		return 0;
	return encode_ctl(c, &k, ti, via, buf, buflen, now);
}

/* Token bucket: take a packet of wire_bytes at rate from the bucket whose
 * next free time is *at; a burst of burst_pkts may leave back to back. */
static uint64_t bucket_take(uint64_t *at, uint64_t rate, uint32_t wire_bytes,
			    uint32_t burst, uint64_t now)
{
	if (!rate)
		return 0;
	/* rounded up: rounding down would let the queue behind us grow */
	uint64_t gap = ((uint64_t)wire_bytes * 8 * 1000000000ull + rate - 1) / rate;
	uint64_t slack = gap * burst;
	uint64_t base = *at + slack < now ? now - slack : *at;
	*at = base + gap;
	return gap;
}

/* A data packet of `bytes` left on plane: charge the connection's pacing
 * (the congestion controller's rate) and the plane's (its link rate), both
 * for the bytes on the wire. */
static void pace_sent(mrp_conn *c, uint8_t plane, uint32_t bytes, uint64_t now)
{
	uint32_t wire = bytes + c->p.wire_overhead;
	c->pace_gap = bucket_take(&c->pace_at, c->cc.pacing_bps, wire, c->p.burst_pkts, now);
	bucket_take(&c->plane_pace_at[plane], c->p.plane_rate_bps[plane], wire,
		    c->p.burst_pkts, now);
}

/* Write one data packet of segment seg of m on path pa. */
/*
 * The source of a READ response, looked up for every packet it sends: the
 * region may have been deregistered (or lost its rights) since the READ_REQ
 * was checked, and the caller's memory behind it gone. Then the READ fails
 * (SPEC 5.8.2): a NAK with the lookup's reason names the READ, and the
 * connection fails. Returns the source, or NULL.
 */
static const uint8_t *rd_source(mrp_conn *c, txmsg *m)
{
	int nak = MRP_NAK_INVALID_RKEY;
	const uint8_t *src = c->mr.resolve(c->mr.ud, m->rkey, m->remote_addr, m->len,
					   MRP_ACCESS_REMOTE_READ, &nak);
	if (src)
		return src;
	if (nak < MRP_NAK_INVALID_RKEY || nak > MRP_NAK_ACCESS)
		nak = MRP_NAK_INVALID_RKEY;
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	k.hdr.path_id = 0xffff; /* names no transmission of the requester's */
	k.u.data.stream_id = m->stream;
	k.u.data.msn = m->msn;
	queue_nak(c, &k, nak);
	fail_with(c, MRP_CLOSE_NORMAL); /* (the requester's access error) */
	return NULL;
}

static ssize_t write_seg(mrp_conn *c, path *pa, txmsg *m, uint32_t seg, int retx,
			 uint16_t extra_flags, mrp_tx_info *ti, uint8_t *buf,
			 size_t buflen, uint64_t now)
{
	if (pa->snd_nxt - pa->snd_una == pa->ring_cap && ring_grow(c, pa) < 0)
		return 0;
	uint32_t off = seg * c->p.mtu;
	uint32_t plen = m->len - off < c->p.mtu ? m->len - off : c->p.mtu;
	if (m->opcode == MRP_OP_READ_REQ)
		plen = 0; /* len is what it asks for (SPEC 5.8.1) */
	const uint8_t *src = m->local;
	if (m->opcode == MRP_OP_READ_RESP && plen &&
	    !(src = rd_source(c, m)))
		return 0; /* the READ fails: mrp_conn_write_pkt() tears down */
	mrp_hdr h;
	fill_hdr(c, &h, m->opcode, pa);
	h.psn = pa->snd_nxt;
	h.flags = extra_flags;
	if (off == 0)
		h.flags |= MRP_F_FIRST;
	if (off + plen == m->len || m->opcode == MRP_OP_READ_REQ)
		h.flags |= MRP_F_LAST;
	if (retx)
		h.flags |= MRP_F_RETX;
	mrp_data d;
	memset(&d, 0, sizeof(d));
	d.stream_id = m->stream;
	d.payload_len = (uint16_t)plen;
	d.msn = m->msn;
	d.offset = off;
	d.msg_len = m->len;
	d.recv_idx = m->opcode == MRP_OP_READ_REQ ? 0 : m->recv_idx; /* (a READ counts there) */
	d.ts_ns = now;
	d.remote_addr = m->remote_addr;
	d.rkey = m->rkey;
	d.imm = m->imm;
	ssize_t n = mrp_data_hdr_encode(buf, buflen, &h, &d);
	if (n < 0)
		return n;
	ssize_t out = n + plen;
	if (plen && c->tx_by_ref) {
		ti->payload = src + off;
		ti->payload_len = plen;
		out = n;
	} else if (plen) {
		memcpy(buf + n, src + off, plen);
	}
	uint32_t bytes = plen + MRP_DATA_HDR_LEN;
	txent *e = &pa->ring[pa->snd_nxt & (pa->ring_cap - 1)];
	e->m = m;
	e->seg = seg;
	e->bytes = bytes;
	e->sent_ns = now;
	e->state = ENT_INFLIGHT;
	e->credit = (h.flags & MRP_F_GRANT) != 0;
	m->refs++;
	m->segs[seg] = (uint8_t)((m->segs[seg] & ~3u) | SEG_INFLIGHT);
	int was_idle = !pa->cc.inflight;
	if (was_idle)
		c->dl_valid = 0; /* the path was idle: its idle probe is off now */
	pa->snd_nxt++;
	pa->cc.inflight += bytes;
	if (!c->total_inflight)
		c->busy_since = now;
	c->total_inflight += bytes;
	if (e->credit)
		c->credit_inflight += bytes;
	pa->tx_pkts++;
	pa->tx_bytes += bytes;
	pa->last_tx_ns = now;
	c->st.tx_pkts++;
	c->st.tx_bytes += bytes;
	if (retx) {
		pa->retx_pkts++;
		c->st.retx_pkts++;
	}
	/* (a PROBE's timer becomes the data's at the first packet after it,
	 * not at each: re-armed at every packet, a path that sent more often
	 * than its timeout, its PROBE unanswered, never timed out -- a path
	 * in a hole sent into it every 50 us for as long as it was given
	 * data) */
	if (pa->rto_at == NEVER || (pa->probe_pending && was_idle)) {
		path_arm_timers(c, pa, now);
		c->dl_valid = 0;
	}
	pace_sent(c, pa->plane, bytes, now);
	fill_ti(ti, pa, 1);
	ti->expedite = m->exp; /* SPEC 6.7 */
	return out;
}

COLD static ssize_t write_tlp(mrp_conn *c, path *pa, mrp_tx_info *ti, uint8_t *buf,
			 size_t buflen, uint64_t now)
{
	pa->tlp_pending = 0;
	if (pa->state != MRP_PATH_ACTIVE || pa->snd_nxt - pa->snd_una >= MRP_SACK_BITS)
		return 0;
	for (uint32_t psn = pa->snd_nxt; psn != pa->snd_una;) {
		psn--;
		txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
		/* (an earlier copy of the segment may have been acked already:
		 * sending it again would mark it in flight a second time) */
		if (e->state == ENT_INFLIGHT && !e->m->done &&
		    SEG_STATE(e->m->segs[e->seg]) != SEG_ACKED) {
			c->st.tlp_count++;
			ssize_t n = write_seg(c, pa, e->m, e->seg, 1, MRP_F_ACK_REQ, ti, buf,
					      buflen, now);
			/* Another tail probe one PTO later, up to TLP_MAX before the
			 * timeout: a burst of loss that takes the first probe (and
			 * every packet and ACK with it) usually ends within a few
			 * round trips, and the probe that gets through brings the
			 * ACK whose SACK map repairs the rest at once -- without a
			 * timeout, its window cut and its probing. */
			if (n > 0 && pa->tlp_n + 1 < TLP_MAX) {
				pa->tlp_n++;
				uint64_t next = now + path_pto(c, pa);
				if (next < pa->rto_at) {
					pa->tlp_at = next;
					c->dl_valid = 0;
				}
			}
			return n;
		}
	}
	return 0;
}

/* Whether pa's plane is held back by its pacing (its link is busy), or is
 * one the caller said is full (planes_full: its NIC port's queue). */
static int plane_paced(mrp_conn *c, const path *pa, uint64_t now)
{
	if (c->p.planes_full && (*c->p.planes_full >> pa->plane & 1u)) {
		c->nic_blocked = 1;
		return 1;
	}
	uint64_t at = c->plane_pace_at[pa->plane];
	if (!c->p.plane_rate_bps[pa->plane] || at <= now)
		return 0;
	if (at < c->plane_wait_at)
		c->plane_wait_at = at;
	return 1;
}

/* How far path pa's plane is: the smallest RTT of any of the connection's
 * routes there (its own route's until the plane has one). */
static uint64_t path_base_rtt(const path *pa)
{
	return pa->cc.plane_rtt_ns ? pa->cc.plane_rtt_ns : pa->cc.min_rtt_ns;
}

/* The sum of the link rates of the planes in mask, or UINT64_MAX when one of
 * them is not known. */
static uint64_t plane_links(const mrp_conn *c, uint32_t mask)
{
	uint64_t sum = 0;
	for (uint32_t p = 0; p < c->p.nplanes; p++)
		if (mask >> p & 1) {
			if (!c->p.plane_rate_bps[p])
				return UINT64_MAX;
			sum += c->p.plane_rate_bps[p];
		}
	return sum;
}

/* A near path counts towards what the near paths carry while under this
 * share of its bytes is marked (alpha, 1/65536): an eighth. */
#define ECF_ALPHA_MAX 8192

/*
 * Earliest completion first at the end of a transfer (SPEC 6.4): the base
 * RTT above which a path waits, or 0 when none does. A path's base RTT is its
 * plane's: the smallest RTT of any of the connection's routes there. Only
 * once what is left to send -- queued new data and retransmissions -- is at
 * most what the connection sends in its largest RTT. The near paths are
 * those whose base RTT is within twice the smallest; a path waits when its
 * base RTT is above both that and the near paths' largest plus the time
 * they need for what is left (their windows over their smoothed RTTs, only
 * those under ECF_ALPHA_MAX marked, at most the pacing rate, the near
 * planes' links and their part of the connection's acknowledged rate): a
 * packet sent on it would arrive after they had delivered everything. Four
 * 200G planes 1-50 us apart: two 64 MB flows done 4 % sooner, the far
 * planes' last round trip no longer the transfer's tail.
 * The plane's base RTT, not the path's smoothed one nor its route's
 * smallest: the smoothed RTTs of one plane's routes differ by their queues,
 * and a tail sent on the routes that looked shorter a round trip ago
 * overflowed one spine's queue; and a route whose first samples crossed a
 * queue keeps that queue as its smallest RTT (bench/README.md).
 */
static uint64_t ecf_threshold(const mrp_conn *c)
{
	/* (the connection's rate: its pacing, its hint, or its window over
	 * the slowest plane's base RTT) */
	uint64_t rate = c->cc.pacing_bps ? c->cc.pacing_bps : c->cc.rate_hint_bps;
	if (!rate && c->base_rtt_ns)
		rate = mrp_mul_div(c->cc.qwnd, 8000000000ull, c->base_rtt_ns);
	if (!rate || !c->max_rtt_ns)
		return 0;
	uint64_t left = (c->sq_unsent + c->rq.len + c->aq.len) * (MRP_DATA_HDR_LEN + c->p.mtu);
	if (left > mrp_mul_div(rate, c->max_rtt_ns, 8000000000ull))
		return 0;
	uint64_t lo = UINT64_MAX;
	uint32_t used = 0; /* planes with an active path */
	for (uint32_t k = 0; k < c->path_hi; k++) {
		const path *pa = c->paths[k];
		if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
			continue;
		used |= 1u << pa->plane;
		if (path_base_rtt(pa) && pa->cc.srtt_ns)
			lo = min64(lo, path_base_rtt(pa));
	}
	if (lo == UINT64_MAX)
		return 0;
	uint64_t fast = 0, hi = 0;
	uint32_t near = 0;
	for (uint32_t k = 0; k < c->path_hi; k++) {
		const path *pa = c->paths[k];
		if (pa && pa->open && pa->state == MRP_PATH_ACTIVE && path_base_rtt(pa) &&
		    pa->cc.srtt_ns && path_base_rtt(pa) <= 2 * lo) {
			if (pa->cc.alpha_q16 < ECF_ALPHA_MAX) {
				fast += mrp_mul_div(pa->cc.cwnd, 8000000000ull, pa->cc.srtt_ns);
				near |= 1u << pa->plane;
			}
			hi = max64(hi, path_base_rtt(pa));
		}
	}
	uint64_t near_links = plane_links(c, near), all_links = plane_links(c, used);
	fast = min64(min64(fast, rate), near_links);
	/* ... and at most the near planes' part of what the connection has
	 * been acknowledged at lately: planes shared with other flows carry
	 * less than their links, and eight flows that all moved their tails
	 * onto such a plane finished 4-7 % later than without the rule */
	if (c->rp_rate_bps && near_links != UINT64_MAX && all_links != UINT64_MAX && all_links)
		fast = min64(fast, mrp_mul_div(c->rp_rate_bps, near_links, all_links));
	if (!fast)
		return 0;
	return max64(2 * lo, hi + mrp_mul_div(left, 8000000000ull, fast));
}

/* The active path with room for `bytes` on a plane whose link is free
 * that has the largest share of its window still free (room / cwnd), round
 * robin on ties; but a path with nothing in flight comes first. When the
 * connection is held back by its pacing rate rather than by windows, every
 * path has room, and the most room in bytes gave everything to the path
 * with the largest window for ever: the others' windows grow only with the
 * ACKs of data they carry, so they would never get the chance
 * (tests/netns/FINDINGS.md, finding 2). An idle path gets its window's
 * worth each round trip and grows from there. Weighed against its window,
 * a paced connection keeps each path equally full: weighed in bytes, a
 * path that a loss had cut carried 4-6 packets a round trip while the
 * others had 350-660 KB of room, so it never filled its window to regrow
 * it, and learnt of its last packets' loss only by a timeout, which cut it
 * to one packet (8 MiB at 5 % random loss, hint 9.99 Gbit/s: 3.2-3.6 MB of
 * window against 4.27; bench/README.md, "The starved path's fix, landed").
 * At the end of a transfer a path far beyond the near ones waits
 * (ecf_threshold()). */
static path *best_path(mrp_conn *c, uint32_t bytes, uint64_t now)
{
	path *best = NULL;
	uint64_t best_rel = 0, best_load = 0;
	int best_idle = 0;
	uint32_t n = c->path_hi;
	uint32_t i = c->burst_path < 0 ? 0 : (uint32_t)c->burst_path + 1;
	/* Several planes: the plane with the least in flight (per bit/s of
	 * its link) comes first, then the one used least recently, so
	 * traffic spreads evenly over the planes and a plane that comes back
	 * gets its share at once, its paths growing from a full window's use
	 * each round trip instead of one packet whenever they happen to be
	 * idle. */
	uint64_t load[MRP_MAX_PLANES];
	uint32_t mark[MRP_MAX_PLANES];
	int planes = c->p.nplanes > 1;
	if (planes) {
		/* (zeroed only here: one plane, the common case, needs none) */
		memset(load, 0, c->p.nplanes * sizeof(load[0]));
		memset(mark, 0, c->p.nplanes * sizeof(mark[0]));
		for (uint32_t k = 0; k < n; k++) {
			const path *pa = c->paths[k];
			if (pa && pa->open) {
				load[pa->plane] += pa->cc.inflight;
				if (pa->state == MRP_PATH_ACTIVE &&
				    pa->cc.alpha_q16 > mark[pa->plane] &&
				    acked_lately(pa, now))
					mark[pa->plane] = pa->cc.alpha_q16;
			}
		}
		/* Each plane's standing, once per call (it depends on the
		 * plane only; two divisions per path per burst cost the
		 * sender a few % of its CPU): in flight per 1 Gbit/s of the
		 * plane's link (equal links when they are not known), in
		 * 1/65536 bytes; and new packets steer to clean planes: a
		 * plane whose paths see ECN marks (alpha, the marked
		 * fraction) counts as loaded 1 + 32 alpha times its load. */
		for (uint32_t p = 0; p < c->p.nplanes; p++) {
			uint64_t r = c->p.plane_rate_bps[p] / 1000000000u;
			uint64_t pl = mrp_mul_div(load[p] + 1, 1u << 16, r ? r : 1);
			load[p] = mrp_mul_div(pl, 65536u + 32u * (uint64_t)mark[p], 65536u);
		}
	}
	uint64_t ecf_cut = ecf_threshold(c);
	for (uint32_t k = 0; k < n; k++, i++) {
		if (i >= n) /* (no division: this runs for every burst) */
			i = 0;
		path *pa = c->paths[i];
		if (ecf_cut && pa && path_base_rtt(pa) > ecf_cut)
			continue;
		uint64_t room = path_room(c, pa, now);
		if (room < bytes)
			continue;
		int idle = pa->cc.inflight == 0;
		uint64_t rel = mrp_mul_div(room, 65536u, pa->cc.cwnd ? pa->cc.cwnd : 1);
		uint64_t pl = planes ? load[pa->plane] : 0; /* (the plane's standing, above) */
		int better;
		if (!best)
			better = 1;
		else if (pl != best_load)
			better = pl < best_load;
		else if (planes && best->plane != pa->plane &&
			 c->plane_pace_at[pa->plane] != c->plane_pace_at[best->plane])
			/* as loaded: the plane this connection used least
			 * recently for its rate (its pacing bucket is the
			 * oldest), so that planes take turns even when the
			 * connection has little in flight */
			better = c->plane_pace_at[pa->plane] < c->plane_pace_at[best->plane];
		else
			better = idle > best_idle || (idle == best_idle && rel > best_rel);
		if (better && !plane_paced(c, pa, now)) {
			best = pa;
			best_rel = rel;
			best_idle = idle;
			best_load = pl;
		}
	}
	return best;
}

/* Open up to want more paths, spread over the planes in service (the
 * plane with the fewest open paths first), none on a plane that has its
 * part of max_paths (max_per_plane in the daemon's configuration) already:
 * the planes left after a failure get new paths (replace_paths()), and
 * must not take the slots of the plane that comes back. Returns how many
 * it opened. */
static uint32_t open_paths(mrp_conn *c, uint32_t want, uint64_t now)
{
	uint32_t per_plane[MRP_MAX_PLANES] = { 0 }, opened = 0;
	uint32_t cap = c->p.max_paths / (c->p.nplanes ? c->p.nplanes : 1);
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (pa && pa->open)
			per_plane[pa->plane]++;
	}
	int plane = -1;
	for (uint32_t p = 0; p < c->p.nplanes; p++)
		if (!c->plane_dis[p] && per_plane[p] < cap &&
		    (plane < 0 || per_plane[p] < per_plane[plane]))
			plane = (int)p;
	for (uint32_t i = 0; plane >= 0 && i < c->p.max_paths && opened < want; i++)
		if (i >= c->paths_cap || !c->paths[i] || !c->paths[i]->open) {
			if (path_open(c, (uint16_t)i, (uint8_t)plane, now, 0) < 0)
				break;
			c->last_open_ns = now;
			opened++;
			if (++per_plane[plane] >= cap)
				plane = -1;
			for (uint32_t p = 0; p < c->p.nplanes; p++)
				if (!c->plane_dis[p] && per_plane[p] < cap &&
				    (plane < 0 || per_plane[p] < per_plane[plane]))
					plane = (int)p;
		}
	return opened;
}

/*
 * A plane went down or was drained: the planes left carry its traffic, each
 * over only the few routes its paths hash to. With four paths of a
 * connection on a plane of four spines, some spine carries none of them
 * about nine times in ten, and where every connection misses a spine it
 * idles while the others queue; a re-path finds it only by luck, one
 * drained path at a time (churn_6planes_leafspine seed 14: 0.93 of the
 * surviving capacity, one connection with all four paths of a plane on one
 * of its three spines; bench/README.md). So the paths in service are
 * brought back to the connection's initial count with new paths, spread
 * over the planes still in service (SPEC 8.1). Only up to that count: a
 * plane that flaps adds paths once, not at every flap, and max_paths
 * bounds them all.
 */
static void replace_paths(mrp_conn *c, uint64_t now)
{
	uint32_t in = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		in += pa && pa->open && !pa->disabled;
	}
	if (in < c->p.initial_paths)
		open_paths(c, c->p.initial_paths - in, now);
}

/* The connection has data but no window: open another path when every
 * active path is at its ceiling (the bandwidth-delay product outgrew them). */
COLD static void maybe_open_path(mrp_conn *c, uint64_t now)
{
	if (c->npaths >= c->p.max_paths)
		return;
	uint64_t ceiling = (uint64_t)(c->p.cc.max_cwnd_pkts - 1) * c->p.mtu;
	uint64_t srtt = 0;
	int active = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
			continue;
		active++;
		if (pa->cc.cwnd < ceiling)
			return;
		srtt = max64(srtt, pa->cc.srtt_ns);
	}
	if (!active || now - c->last_open_ns < srtt / 2)
		return;
	if (c->adm && c->adm_open) {
		/* Within a large credit until the first ACK, a path at a time:
		 * the paths are only as many as the round trip needs. */
		open_paths(c, 1, now);
		adm_open_windows(c);
		return;
	}
	/* Grow the path set by half at a time (at least one), as slow start
	 * grows windows, spreading the new paths over the planes in use. */
	open_paths(c, active / 2 > 0 ? (uint32_t)active / 2 : 1, now);
}

/*
 * Whether pa's last cut no longer holds its window below the hint before
 * the 3 round trips hint_window() waits otherwise: the cut is at least a
 * round trip old (its effect has been seen) and the queue that caused it
 * has drained: the newest RTT sample of an ACK on pa's plane is within
 * 1/DRAINED_DIV of the smallest RTT seen on that plane (the packet it
 * times crossed no queue). Not the path's own smoothed RTT: a path that
 * carries little updates it slowly (one stayed 1.3 ms above its minimum
 * for 8 ms after the queue had gone), and one marked sample moves it by
 * only an eighth of the queue. At a 10 ms round trip, waiting the 3 round
 * trips left a second flow into a receiver at its cut window for 30 ms
 * after the first flow had ended. Only across sites (a smallest RTT of
 * DRAINED_MIN_RTT_NS or more): within a data centre 3 round trips are
 * microseconds, and there one plane's spines queue apart -- a sample
 * through one says nothing of the others (with the early open everywhere,
 * reorder_25x_start_400g overflowed a queue: 3 drops).
 */
#define DRAINED_DIV 8
#define DRAINED_MIN_RTT_NS 1000000
static int cut_drained(const mrp_conn *c, const path *pa, const uint64_t *base, uint64_t now)
{
	/* (the plane's smallest RTT in the connection's life where that is
	 * smaller: a route's own minimum starts again at each move, and a
	 * first sample through the queue the old route left made a path 30
	 * us from its peer "across sites", its queue "drained" at every
	 * sample -- raised to 1 MB at once on a plane that marked 10 % of
	 * its packets, tests/netns ecn_plane) */
	uint64_t b = base[pa->plane], life = c->plane_min_rtt_ns[pa->plane];
	if (b && life && life < b)
		b = life;
	return b >= DRAINED_MIN_RTT_NS && !pa->cc.loss_cut && now - pa->cc.last_cut_ns >= b &&
	       c->plane_last_rtt_ns[pa->plane] <= b + b / DRAINED_DIV;
}

/*
 * Where a path stands with the rate hint (hint_window()):
 * RAISE_NOW -- never cut (still starting; not while the connection is
 * held far short of its hint by a bottleneck that has cut its plane: a
 * path opened or restarted then -- a re-path, a re-port -- came in at its
 * part of the hint, ~1 MB, and four flows started 3 ms apart into one
 * hidden 10 Gbit/s hop dropped 62,000 packets for 39,000 sent, 15,000
 * with this), or its ECN cut's queue has
 * drained (cut_drained(); not a loss cut's: a flow that joins a queue
 * which already stands takes that queue for its base RTT, sees it "drained"
 * at every sample, and was raised again after each of its losses -- 60 %
 * of what a late flow into a full drop-tail queue sent was dropped);
 * raised to its part at once;
 * RAISE_HELD -- cut within 3 round trips of its own plane (the plane's
 * largest recent RTT: a plane's ACKs come back over its own routes), not
 * of the connection's slowest plane: timed in the slowest plane's RTT, a
 * cut on a path 1 us from its spines held every path of four 400G planes
 * 1-50 us away for ~600 us, 65 of its own round trips; or its ssthresh
 * was set by a timeout (slow start regrows it);
 * or its cut was for losses behind a bottleneck that still holds the
 * connection far short of its hint (below);
 * RAISE_RAMP -- cut longer ago than that: it grows to its part by slow
 * start (mrp_cc_path_ramp()), ACK by ACK, doubling per round trip, not at
 * once: a mark from a queue that its growth builds then comes back before
 * its whole part is in flight (raised at once, the paths of three flows
 * over those four planes, released together, overflowed a far spine's
 * 2 MB queue: 378 drops in one seed of three, 0 with the ramp).
 */
enum { RAISE_NOW, RAISE_HELD, RAISE_RAMP };
#define HOLD_RTTS 3
static int raise_how(const mrp_conn *c, const path *pa, const uint64_t *base, uint64_t rtt,
		     uint64_t now)
{
	if (pa->cc.ssthresh == UINT64_MAX)
		return mrp_cc_queue_loss(&c->cc) && c->plq_cut_ns[pa->plane] ? RAISE_HELD
										: RAISE_NOW;
	if (pa->cc.last_cut_ns == UINT64_MAX)
		return RAISE_HELD;
	if (cut_drained(c, pa, base, now))
		return RAISE_NOW;
	/* Its cut was for losses behind a bottleneck that drops instead of
	 * marking: while the connection stays far short of its hint,
	 * additive increase alone regrows it. Ramped back to its part of the
	 * hint, it overflowed that queue again 3 round trips after each cut. */
	if (pa->cc.loss_cut == MRP_CC_CUT_QUEUE_LOSS && mrp_cc_queue_loss(&c->cc))
		return RAISE_HELD;
	uint64_t own = max64(pa->cc.srtt_ns, c->plane_max_rtt_ns[pa->plane]);
	if (own)
		rtt = own;
	return now - pa->cc.last_cut_ns < HOLD_RTTS * rtt ? RAISE_HELD : RAISE_RAMP;
}

/*
 * The receiver's rate hint, not a small initial window, sizes a new
 * connection: while a path has seen no congestion signal yet (still in
 * slow start), its window goes at once to its equal part of what the
 * hinted rate carries in the connection's largest smoothed RTT (at most
 * twice its base RTT, below) -- or of
 * the data it has, if that is less -- and the paths that window needs
 * (each holds at most the SACK span) are opened. Pacing holds the rate
 * to the hint; an ECN mark or a loss burst ends slow start as usual. A
 * path that was cut is raised again as raise_how() says, each path on its
 * own: a held path holds no other (it did: one cut on the nearest plane
 * kept the far planes' paths low for the slowest plane's 3 round trips).
 * New paths are opened only while no path is held. Called after every
 * ACK; a connection at or above the window returns at once.
 */
/* The target's RTT is at most HINT_BASE_MULT times the slowest plane's base
 * RTT: the smoothed RTT includes the queue, and a bottleneck the receiver
 * does not know of (a slower cable in the fabric) that drops instead of
 * marking fills its queue, which raised the smoothed RTT, which raised the
 * target -- a 10 Gbit/s hop with a 4 MB queue under 100 Gbit/s hosts:
 * paths opened up to 64 of 1 MB each and 45 % of the packets sent were
 * dropped (82 % as many drops as data packets; 1.2 % with the cap). Twice
 * the base leaves a round trip of queue, as much as the pacing and ACK
 * clock need. The cap holds only until the connection is measured at half
 * its hint or more (rp_rate_bps): one that gets its hint keeps the window
 * its smoothed RTT asks, which in a daemon includes host delay. Nor while
 * every plane the connection uses marks it (ecn_marked()): the bottleneck
 * marks, and ECN holds its queue. There the cap, over the plane's
 * shortest route, only starved paths on longer ones, and a connection it
 * held under half its hint stayed capped (spines 4 and 100 us away at
 * 400G, two flows: 448-573 Gbit/s over 4 seeds, 512-569 without the cap;
 * bench/README.md, "The hint's window where every plane marks"). Instead,
 * each path's window there is its equal part of the hint over its own
 * smoothed RTT, at most the equal part of the target: equal windows over
 * the slowest route's RTT gave the paths on the near spine ten times their
 * part of the rate, and that spine's uplink queue filled from 8 KB to 2 MB
 * while the far one idled (reorder_25x_start_400g seed 8: 0.163 % of the
 * packets sent again for nothing, seed 14: 808 drops; bench/README.md,
 * "Each path's part of the hint over its own RTT"). Over twice its own RTT
 * (the cap's "twice", per route) the near paths had twice their part, which
 * did no harm while the scheduler filled the path with the most room in
 * bytes first; once it keeps every path equally full (best_path()) that
 * part is sent, and the same file dropped 297 packets (seed 14). */
#define HINT_BASE_MULT 2
/* Every plane with an active path has one whose marked share (alpha) is
 * above zero. */
static int ecn_marked(const mrp_conn *c)
{
	uint32_t used = 0, marked = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
			continue;
		used |= 1u << pa->plane;
		if (pa->cc.alpha_q16)
			marked |= 1u << pa->plane;
	}
	return used && marked == used;
}
static void hint_window(mrp_conn *c, uint64_t now)
{
	uint64_t hint = c->cc.rate_hint_bps, rtt = c->cc.hint_rtt_ns;
	if (c->fs_left && c->st.npaths_active) {
		/* what paths that left service had (set_state()), before the
		 * hint's window is looked at: it may be the smaller */
		uint64_t add = c->fs_left / c->st.npaths_active;
		uint64_t ceil = (uint64_t)(c->p.cc.max_cwnd_pkts - 1) * c->p.mtu;
		c->fs_left = 0;
		for (uint32_t i = 0; add && i < c->path_hi; i++) {
			path *pa = c->paths[i];
			if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
				continue;
			uint64_t w = min64(pa->cc.cwnd + add, ceil);
			mrp_cc_path_raise(&c->cc, &pa->cc, w,
					  pa->cc.ssthresh == UINT64_MAX ? UINT64_MAX
									: max64(pa->cc.ssthresh, w));
		}
		recompute_qwnd(c);
	}
	if (!hint || !rtt)
		return;
	int spread = c->base_rtt_ns && rtt > HINT_BASE_MULT * c->base_rtt_ns;
	int marked = -1; /* ecn_marked(c), once asked: a walk of the paths */
	if (spread && !(c->rp_rate_bps && c->rp_rate_bps >= hint / 2) &&
	    !(marked = ecn_marked(c)))
		rtt = HINT_BASE_MULT * c->base_rtt_ns;
	uint64_t target = mrp_mul_div(hint, rtt, 8000000000ull);
	if (c->cc.qwnd >= target)
		return;
	/* No more window (and no more paths) than the data asks for: what is in
	 * flight and still queued. A ping or a short message on a fast fabric
	 * would otherwise open every path it may (each path a socket of the
	 * daemon's). */
	uint64_t demand = c->total_inflight +
			  (c->sq_unsent + c->rq.len + c->aq.len) * (MRP_DATA_HDR_LEN + c->p.mtu);
	if (demand < target)
		target = demand;
	if (c->cc.qwnd >= target)
		return;
	/* each path's part of the hint over its own RTT (above) */
	int own_rtt = spread && (marked >= 0 ? marked : ecn_marked(c));
	uint64_t ceiling = (uint64_t)(c->p.cc.max_cwnd_pkts - 1) * c->p.mtu;
	uint32_t active = 0, held = 0;
	uint64_t base[MRP_MAX_PLANES] = { 0 }; /* the smallest RTT on each plane */
	for (uint32_t i = 0; c->max_rtt_ns >= DRAINED_MIN_RTT_NS && i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (pa && pa->open && pa->state == MRP_PATH_ACTIVE && pa->cc.min_rtt_ns &&
		    (!base[pa->plane] || pa->cc.min_rtt_ns < base[pa->plane]))
			base[pa->plane] = pa->cc.min_rtt_ns;
	}
	int cut = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
			continue;
		active++;
		held += raise_how(c, pa, base, rtt, now) == RAISE_HELD;
		cut |= pa->cc.ssthresh != UINT64_MAX;
	}
	if (active == held)
		return;
	/* Within a data centre, once a path of the connection has been cut,
	 * the path set grows by at most half per round trip, as
	 * maybe_open_path() grows it: the target counts the hint over the
	 * slowest plane's RTT for every plane, and on four planes 1-50 us
	 * apart it opened 24 paths of ~1 MB window each at once, which
	 * overflowed a far spine's 2 MB queue (446 drops). */
	int open_slow = cut && c->max_rtt_ns < DRAINED_MIN_RTT_NS;
	uint64_t need = (target + ceiling - 1) / ceiling;
	if (!held && need > active && c->npaths < c->p.max_paths) {
		uint64_t more = need - active;
		if (more > c->p.max_paths - c->npaths)
			more = c->p.max_paths - c->npaths;
		if (open_slow && now - c->last_open_ns < rtt)
			more = 0;
		else if (open_slow && more > max64(active / 2, 1))
			more = max64(active / 2, 1);
		open_paths(c, (uint32_t)more, now);
	}
	/* The target is the planes' in equal parts, each plane's the equal
	 * part of its paths: a plane's share does not follow how many paths
	 * it has (a plane back in service has fewer than those that got new
	 * paths when it went, replace_paths(); with parts per path it carried
	 * 0.78-0.94 of its link for a millisecond after its return). */
	uint32_t on_plane[MRP_MAX_PLANES] = { 0 }, nplanes = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (pa && pa->open && pa->state == MRP_PATH_ACTIVE)
			nplanes += on_plane[pa->plane]++ == 0;
	}
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
			continue;
		uint64_t shares = (uint64_t)nplanes * on_plane[pa->plane];
		uint64_t w = min64(target / shares, ceiling);
		if (own_rtt && pa->cc.srtt_ns)
			w = min64(w, mrp_mul_div(hint / shares, pa->cc.srtt_ns,
						 8000000000ull));
		if (pa->cc.cwnd >= w)
			continue;
		int how = raise_how(c, pa, base, rtt, now);
		/* A path the path set grew by after a cut, where the fabric
		 * marks and the routes' RTTs are spread, waits for its first
		 * RTT sample (slow start from the initial window until then):
		 * without one its part is the equal part of the whole target,
		 * not the part over its own RTT, and its route may be the near
		 * spine whose queue the cut came from (two flows over spines
		 * 4 and 100 us away at 400G: each opened two paths of ~1 MB
		 * at once there, and that spine's 2 MB queue stayed full,
		 * 1,151 drops; seeds with drops, of 40: 7 -> 2). */
		if (how == RAISE_NOW && open_slow && own_rtt && !pa->cc.srtt_ns &&
		    pa->cc.ssthresh == UINT64_MAX)
			continue;
		if (how == RAISE_NOW)
			mrp_cc_path_raise(&c->cc, &pa->cc, w, UINT64_MAX);
		else if (how == RAISE_RAMP)
			mrp_cc_path_ramp(&c->cc, &pa->cc, w);
	}
	recompute_qwnd(c);
}

/* The path for a second copy of a segment whose first went on path
 * `first`: another active path with room, not paced, clean of ECN marks;
 * on another plane if one has such a path. NULL if none. */
static path *copy_path(mrp_conn *c, uint32_t bytes, uint32_t first, uint64_t now)
{
	path *same = NULL;
	const path *fp = first < c->paths_cap ? c->paths[first] : NULL;
	for (uint32_t k = 1; k <= c->path_hi; k++) {
		path *pa = c->paths[(first + k) % c->path_hi];
		if (!pa || pa->id == first || pa->state != MRP_PATH_ACTIVE ||
		    pa->cc.alpha_q16 || path_room(c, pa, now) < bytes || plane_paced(c, pa, now))
			continue;
		if (!fp || pa->plane != fp->plane)
			return pa;
		if (!same)
			same = pa;
	}
	return same;
}

/* Queue a copy of e's segment, sent ahead of any loss (write_data()). */
static int ahead_push(mrp_conn *c, path *pa, txent *e, uint64_t *used, uint64_t budget)
{
	if (e->state != ENT_INFLIGHT || e->m->done || e->m->opcode == MRP_OP_READ_REQ)
		return 0;
	if (*used + e->bytes > budget)
		return -1;
	if (ring_push(c, &c->aq, e->m, e->seg, (uint16_t)(pa->id + 1)))
		return -1;
	*used += e->bytes;
	return 0;
}

/*
 * The last new data left (SPEC 6.4, "repair sent ahead"): at a long round
 * trip the sender then idles for a round trip, and a loss among the last
 * packets is learnt a round trip after they left and repaired a round
 * trip later still -- at 10 ms, two round trips after the last new data
 * where the lossless transfer ends one after it. So a copy goes ahead, on
 * another path as ACKs free room, of each packet in flight whose loss
 * would be learnt late: each path's two newest (no later packet of the
 * path would show it: only its tail-loss probe, 1.125 round trips on),
 * then each packet whose path's next packet left in the last fifth of the
 * largest RTT (a loss is learnt from the ACK of a later packet of its
 * path: a packet older than the span whose path then sent nothing for
 * milliseconds is learnt as late as one inside it), newest first across
 * the paths, a slice of the span at a time. Then second copies of the
 * same, up to half the span: a packet lost together with its copy is
 * learnt when the packet alone would be, and a loss learnt within a tenth
 * of a round trip of the last new data ends the transfer close to two
 * round trips after it. At most 1/24 of the bytes sent since the queues
 * last ran dry (what does not fit: second copies first, then the oldest),
 * only at round trips of a millisecond or more (across sites: a
 * data-centre round trip repairs a loss in microseconds), and not while a
 * path sees ECN marks (the copies would add to a queue).
 */
static void tail_ahead(mrp_conn *c, uint64_t now)
{
	uint64_t span = c->max_rtt_ns / TAIL_AHEAD_DIV;
	uint64_t budget = (c->st.tx_bytes - c->ahead_mark) / TAIL_AHEAD_SHARE, used = 0;
	c->ahead_mark = c->st.tx_bytes;
	if (c->max_rtt_ns < TAIL_AHEAD_MIN_RTT_NS)
		return;
	uint32_t active = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (pa && pa->open && pa->cc.alpha_q16)
			return;
		active += pa && pa->open && pa->state == MRP_PATH_ACTIVE;
	}
	if (active < 2)
		return; /* a copy goes on another path */
	for (int copy = 0; copy < 2; copy++) {
		for (uint32_t i = 0; i < c->path_hi; i++) {
			path *pa = c->paths[i];
			if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
				continue;
			uint32_t psn = pa->snd_nxt;
			for (uint32_t k = 0; psn != pa->snd_una && k < TAIL_AHEAD_LAST; k++) {
				psn--;
				if (ahead_push(c, pa, &pa->ring[psn & (pa->ring_cap - 1)], &used,
					       budget))
					return;
			}
		}
		uint64_t reach = copy ? span / 2 : span;
		if (reach > now)
			reach = now;
		for (uint32_t sl = 0; sl < TAIL_AHEAD_SLICES; sl++) {
			/* packets whose loss is learnt from a packet sent in
			 * [lo, hi); hi is now for the first slice */
			uint64_t hi = now - reach * sl / TAIL_AHEAD_SLICES;
			uint64_t lo = now - reach * (sl + 1) / TAIL_AHEAD_SLICES;
			for (uint32_t i = 0; i < c->path_hi; i++) {
				path *pa = c->paths[i];
				if (!pa || !pa->open || pa->state != MRP_PATH_ACTIVE)
					continue;
				uint64_t next_ns = now; /* when the path's next packet left */
				uint32_t k = 0;
				for (uint32_t psn = pa->snd_nxt; psn != pa->snd_una; k++) {
					psn--;
					txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
					uint64_t learnt = next_ns;
					next_ns = e->sent_ns;
					if (learnt < lo)
						break;
					if (k < TAIL_AHEAD_LAST || (sl && learnt >= hi))
						continue; /* copied already */
					if (ahead_push(c, pa, e, &used, budget))
						return;
				}
			}
		}
	}
}

/* Whether a copy sent ahead that found no path may wait for one: another
 * active path clean of ECN marks exists, whose room ACKs will free. */
static int copy_may_wait(const mrp_conn *c, uint32_t first)
{
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (pa && pa->id != first && pa->open && pa->state == MRP_PATH_ACTIVE &&
		    !pa->cc.alpha_q16)
			return 1;
	}
	return 0;
}

static int rnr_waiting(const txmsg *m, uint64_t now)
{
	return m->in_rnr && m->rnr_until > now;
}

/*
 * Before the first ACK, new data of bytes (header included) may go only
 * within the receiver's credit (SPEC 6.6). 0: it may. Otherwise the data
 * waits: > 0 when a request for a grant was written instead, < 0 for
 * nothing to send. A sender that sent part of its credit waits for that
 * data's ACK; one that has none (or lets it expire) asks, on its first
 * active path, once: a lost request is repeated by the path's probe timer.
 */
COLD static ssize_t adm_gate(mrp_conn *c, uint32_t bytes, mrp_tx_info *ti, uint8_t *buf,
			     size_t buflen, uint64_t now)
{
	if (c->adm == ADM_CREDIT) {
		if (!c->adm_sent && now >= c->adm_until)
			c->adm_left = 0; /* not started in time: the receiver took it back */
		if (c->adm_left >= bytes)
			return 0;
		if (c->adm_sent)
			return -1;
		c->adm = ADM_ASK;
		c->st.admit_asks++;
		for (uint32_t i = 0; i < c->path_hi; i++) {
			path *pa = c->paths[i];
			if (pa && pa->open && !pa->disabled && pa->state == MRP_PATH_ACTIVE &&
			    !pa->probe_pending)
				return write_probe(c, pa, ti, buf, buflen, now);
		}
		/* no such path now: the next probe of any path asks */
	}
	return -1;
}

/*
 * Whether the burst on bp is over in time: a burst is packets that leave
 * back to back, and the next packet comes later than burst_span(). A
 * connection paced far below its links (an incast sender at its share)
 * would otherwise send burst_pkts packets in a row on one plane, each a
 * pacing gap apart, whatever the planes' standing: 1,024 senders into two
 * 25 Gbit/s planes, one packet per ~650 us each, all starting together,
 * put four packets in a row on one plane, 2.6 ms, and one plane's queue
 * stood at 355-510 KB of 512 for 3 ms while the other's was nearly
 * empty (bench/README.md). Chosen anew, its packets take the planes in
 * turn (best_path()). Over one plane the path is the ECMP hash's choice:
 * it stays (chosen anew, a 400G 32:1 incast ran 0.89 busy, not 0.98).
 */
static int burst_over(const mrp_conn *c, const path *bp, uint32_t bytes, uint64_t now)
{
	if (c->p.nplanes < 2)
		return 0;
	uint64_t span = burst_span(c, bp->plane, bytes);
	return span && now - c->burst_last_ns > span;
}

static ssize_t write_data(mrp_conn *c, mrp_tx_info *ti, uint8_t *buf, size_t buflen,
			  uint64_t now)
{
	c->pace_blocked = 0;
	c->plane_wait_at = NEVER;
	c->silence_wake = NEVER;
	if (c->cc.pacing_bps && c->pace_at > now) {
		c->pace_blocked = 1;
		return 0;
	}
	txmsg *m = NULL;
	uint32_t seg = 0;
	int retx = 0;
	uint16_t avoid = 0;
	int ahead = 0;
	/* repair first, copies sent ahead of any loss when none is left */
	rqring *q;
	while ((q = c->rq.len ? &c->rq : c->aq.len ? &c->aq : NULL)) {
		rqent *r = &q->e[q->head];
		/* (a second copy goes only while the first is in flight) */
		if (r->m->done || r->m->in_rnr ||
		    SEG_STATE(r->m->segs[r->seg]) != (r->avoid ? SEG_INFLIGHT : SEG_PENDING)) {
			txmsg *dead = r->m;
			ring_pop(q);
			txmsg_unref(c, dead);
			continue;
		}
		m = r->m;
		seg = r->seg;
		avoid = r->avoid;
		ahead = q == &c->aq;
		retx = 1;
		break;
	}
	txmsg *prev = NULL;
	if (!m) {
		for (txmsg *x = c->sq_head; x; prev = x, x = x->qnext) {
			if (x->done || x->next_seg >= x->npkts)
				continue; /* unlinked below when it reaches the head */
			if (rnr_waiting(x, now))
				continue;
			if (x->opcode == MRP_OP_READ_REQ && x->next_seg == 0 &&
			    c->rd_out >= c->p.rd_max)
				continue; /* READs outstanding at the bound: it waits */
			m = x;
			seg = x->next_seg;
			break;
		}
		while (c->sq_head && (c->sq_head->done || c->sq_head->next_seg >= c->sq_head->npkts)) {
			if (prev == c->sq_head)
				prev = NULL;
			sq_remove_head(c);
		}
	}
	if (!m)
		return 0;
	uint32_t off = seg * c->p.mtu;
	uint32_t bytes = (m->opcode == MRP_OP_READ_REQ ? 0
			  : m->len - off < c->p.mtu ? m->len - off : c->p.mtu) +
			 MRP_DATA_HDR_LEN;
	/* admission credit counts whole packets, whatever the segment's length
	 * (as it is given and as the receiver returns it, 6.6) */
	const uint32_t credit_pkt = c->p.mtu + MRP_DATA_HDR_LEN;
	if (c->adm && !retx) {
		ssize_t g = adm_gate(c, credit_pkt, ti, buf, buflen, now);
		if (g)
			return g < 0 ? 0 : g;
	}
	path *pa = NULL;
	if (avoid) {
		/* A second copy goes on another clean path with room, or not at
		 * all (then the first copy's own recovery stands). */
		pa = copy_path(c, bytes, avoid - 1u, now);
		if (!pa && ahead && copy_may_wait(c, avoid - 1u))
			return 0; /* it waits for room (ACKs free it) */
		if (!pa) {
			ring_pop(q);
			txmsg_unref(c, m);
			return 0;
		}
	} else if (c->burst_left && c->burst_path >= 0) {
		path *bp = c->paths[c->burst_path];
		if (path_room(c, bp, now) >= bytes && !plane_paced(c, bp, now) &&
		    !burst_over(c, bp, bytes, now))
			pa = bp;
	}
	if (!pa) {
		pa = best_path(c, bytes, now);
		if (!pa && c->plane_wait_at == NEVER && !c->nic_blocked) {
			maybe_open_path(c, now);
			/* (within a large credit no ACK may come to try
			 * again: the new paths take the packet now) */
			if (c->adm && c->adm_open)
				pa = best_path(c, bytes, now);
		}
		if (!pa) {
			silence_wake_arm(c, bytes, now);
			return 0;
		}
		c->burst_path = pa->id;
		c->burst_left = c->p.burst_pkts;
	}
	/* The last packet before the send queues run dry asks for its ACK at
	 * once (SPEC 6.3): the receiver would otherwise hold it for ack_delay,
	 * and a short message -- a collective's step -- would wait for that. */
	int flags = 0;
	if (!m->qnext && c->rq.len + c->aq.len == (uint32_t)retx &&
	    (retx || seg + 1 == m->npkts))
		flags = MRP_F_ACK_REQ;
	else if ((c->p.caps & MRP_CAP_HELD) && c->cc.rate_hint_bps &&
		 c->cc.pacing_bps >= c->cc.rate_hint_bps)
		/* More is queued behind this packet and the receiver's hint is
		 * what paces the connection: its allocator learns that what
		 * arrives is its share, not all this sender would send (6.5).
		 * Held back by a window or a link instead, the sender says
		 * nothing, and the allocator reads its rate as its demand. */
		flags = MRP_F_HELD;
	if (c->adm == ADM_CREDIT && !retx)
		flags |= MRP_F_GRANT; /* sent before the first ACK, on its admission (6.6) */
	ssize_t n = write_seg(c, pa, m, seg, retx, flags, ti, buf, buflen, now);
	if (n <= 0)
		return n;
	if (c->adm == ADM_CREDIT && !retx) {
		c->adm_left -= credit_pkt; /* (adm_gate() saw it fit) */
		c->adm_sent += bytes;
	}
	c->plane_wait_at = NEVER;
	if (!avoid) {
		c->burst_left--;
		c->burst_last_ns = now;
	}
	if (retx) {
		/* The queue's reference moves to the scoreboard entry. */
		ring_pop(q);
		m->refs--;
		/* In the tail -- no new data left to send -- a lost segment's
		 * retransmission goes twice, on two paths: with nothing sent
		 * after it, losing it again would cost a tail probe's wait or a
		 * timeout, and each further loss one more round trip, where a
		 * second copy costs one packet of an otherwise idle window.
		 * Only where loss is not congestion: both paths clean of ECN
		 * marks (copy_path()). At a round trip of a millisecond or
		 * more, where that round trip is the transfer's whole tail
		 * (tail_ahead()), it goes three times: both copies lost, 1 %
		 * of 1 % at 1 % loss, is one run in thirty of a 1 GB transfer
		 * at 10 ms, and costs it a round trip. */
		if (!avoid && !c->sq_head && pa->cc.alpha_q16 == 0 &&
		    m->opcode != MRP_OP_READ_REQ) { /* (its copy would double the response) */
			rq_push_copy(c, m, seg, (uint16_t)(pa->id + 1));
			if (c->max_rtt_ns >= TAIL_AHEAD_MIN_RTT_NS)
				rq_push_copy(c, m, seg, (uint16_t)(pa->id + 1));
		}
	} else {
		if (m->opcode == MRP_OP_READ_REQ)
			c->rd_out++; /* its request's first transmission */
		c->sq_unsent--;
		if (++m->next_seg == m->npkts) {
			if (c->sq_head == m)
				sq_remove_head(c);
			else if (prev && prev->qnext == m) {
				prev->qnext = m->qnext;
				if (c->sq_tail == m)
					c->sq_tail = prev;
				m->qnext = NULL;
			}
			/* the last new data left: the tail begins (the other
			 * paths' probes follow at their next ACK) */
			if (!c->sq_head) {
				tail_arm(c, pa);
				tail_ahead(c, now);
			}
		}
	}
	return n;
}

ssize_t mrp_conn_write_pkt(mrp_conn *c, mrp_tx_info *ti, uint8_t *buf, size_t buflen,
			   uint64_t now)
{
	if (!c || !ti || !buf)
		return MRP_ERR_INVAL;
	if (buflen < (size_t)MRP_DATA_HDR_LEN + c->p.mtu)
		return MRP_ERR_NOBUF;
	memset(ti, 0, sizeof(*ti));
	c->nic_blocked = 0; /* (this call's, whatever it writes) */
	ssize_t n;
	while (c->nakq_len)
		if ((n = write_nak(c, ti, buf, buflen, now)) != 0)
			return n;
	if (c->ctl_dirty) {
		for (uint32_t i = 0; i < c->path_hi; i++) {
			path *pa = c->paths[i];
			if (!pa)
				continue;
			if (pa->rx_open && pa->rx_ack_now &&
			    (n = write_ack(c, pa, ti, buf, buflen, now)))
				return n;
			if (pa->pack_pending && (n = write_probe_ack(c, pa, ti, buf, buflen, now)))
				return n;
			if (sending(c) && pa->open && !pa->disabled &&
			    pa->probe_at <= now)
				return write_probe(c, pa, ti, buf, buflen, now);
			if (sending(c) && pa->tlp_pending &&
			    (n = write_tlp(c, pa, ti, buf, buflen, now)))
				return n;
		}
		c->ctl_dirty = 0;
	}
	if (c->close_pending && (c->close_pending != 1 || c->close_at <= now))
		return write_close(c, ti, buf, buflen, now);
	if (!sending(c))
		return 0;
	n = write_data(c, ti, buf, buflen, now);
	if (n == 0 && c->pending_fail) {
		/* a READ response lost its source (rd_source()): its NAK and
		 * the RESET go out now */
		conn_fail(c);
		return mrp_conn_write_pkt(c, ti, buf, buflen, now);
	}
	return n;
}

ssize_t mrp_conn_write_pkt_ref(mrp_conn *c, mrp_tx_info *ti, uint8_t *buf,
			       size_t buflen, uint64_t now)
{
	if (!c)
		return MRP_ERR_INVAL;
	c->tx_by_ref = 1;
	ssize_t n = mrp_conn_write_pkt(c, ti, buf, buflen, now);
	c->tx_by_ref = 0;
	return n;
}

/* ---- timers ------------------------------------------------------------- */

static uint64_t idle_probe_at(const mrp_conn *c, const path *pa)
{
	if (!c->p.probe_idle_ns || pa->state != MRP_PATH_ACTIVE || pa->probe_pending ||
	    pa->cc.inflight)
		return NEVER;
	return max64(pa->last_ack_ns, pa->last_tx_ns) + c->p.probe_idle_ns;
}

/* The earliest time a timer that mrp_conn_handle_timeout() runs is due:
 * the paths' and the RNR waits (none on a closed connection). */
static uint64_t timers_compute(const mrp_conn *c)
{
	if (c->state == CONN_CLOSED)
		return NEVER;
	uint64_t t = NEVER;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (!pa)
			continue;
		t = min64(t, pa->rx_ack_at);
		if (!pa->open || !sending(c))
			continue;
		t = min64(t, pa->rto_at);
		t = min64(t, pa->hold_at);
		t = min64(t, pa->tlp_at);
		t = min64(t, pa->probe_at);
		t = min64(t, idle_probe_at(c, pa));
	}
	for (const txmsg *m = c->rnr_list; m; m = m->rnext)
		t = min64(t, m->rnr_until);
	return t;
}

static uint64_t timers_at(const mrp_conn *c)
{
	if (!c->dl_valid) {
		/* A cache behind a const interface: every mrp_conn comes from
		 * mrp_conn_new(), never from a const definition, so the write
		 * is well defined. */
		mrp_conn *mc = (mrp_conn *)c;
		mc->dl_tmr = timers_compute(c);
		mc->dl_valid = 1;
	}
	return c->dl_tmr;
}

uint64_t mrp_conn_deadline(const mrp_conn *c)
{
	return mrp_conn_deadline_paced(c, 0);
}

uint64_t mrp_conn_deadline_paced(const mrp_conn *c, uint64_t not_before)
{
	if (c->ctl_dirty || c->nakq_len)
		return 0; /* a control packet waits */
	uint64_t t = timers_at(c);
	/* Pacing waits only matter while data may still be sent: a closing
	 * connection that stopped while paced must not stay due forever.
	 * (These are read here, not cached: they change with most packets.) */
	if (sending(c)) {
		if (c->pace_blocked) {
			/* put back, but not past the time the bucket is full
			 * again (burst_pkts packets of the last one's size):
			 * small packets must not be capped at a burst per
			 * not_before */
			uint64_t at = c->pace_at;
			if (not_before > at)
				at = min64(not_before,
					   at + c->pace_gap * (c->p.burst_pkts ? c->p.burst_pkts - 1 : 0));
			t = min64(t, at);
		}
		t = min64(t, min64(c->plane_wait_at, c->silence_wake));
		if (sends_outstanding(c))
			t = min64(t, c->last_rx_ns + c->p.peer_timeout_ns);
	}
	if (c->close_pending)
		t = min64(t, c->close_pending == 1 ? c->close_at : 0);
	return t;
}

/*
 * Whether another path of pa's plane works: active, answered in its
 * generation, and answered within pa's RTO before backoff if it has
 * anything outstanding. Then what fails is pa's route, and a new one
 * (another source port, another ECMP hash) may help. When every path of the plane
 * went silent together, the failure is common to them -- the host's own
 * link, a loss burst on it, the peer -- and a new route cannot help: the
 * path keeps its route and its RTT (which a new generation would forget,
 * probing with the initial RTO) and goes on probing, its waits doubling.
 */
static int plane_works_without(const mrp_conn *c, const path *pa, uint64_t now,
				uint32_t *others);

static int plane_alive_without(const mrp_conn *c, const path *pa, uint64_t now)
{
	uint32_t others = 0;
	if (plane_works_without(c, pa, now, &others))
		return 1;
	/* A path alone on its plane cannot tell: it re-ports, as a new route
	 * may avoid a hole in its own (it loses only its RTT if it cannot). */
	return others == 0;
}

/* Another path of pa's plane works (see plane_alive_without()); *others:
 * how many other paths the plane has in service. */
static int plane_works_without(const mrp_conn *c, const path *pa, uint64_t now,
				uint32_t *others_out)
{
	uint64_t base = pa->cc.srtt_ns ? max64(pa->cc.srtt_ns + 4 * pa->rttvar_ns,
					       pa->max_rtt_ns + pa->max_rtt_ns / 2)
				       : c->p.rto_init_ns;
	base = max64(base, c->p.rto_min_ns);
	uint32_t others = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *o = c->paths[i];
		if (!o || o == pa || !o->open || o->plane != pa->plane || o->disabled)
			continue;
		others++;
		/* Answered in this generation (it has an RTT sample), active,
		 * and answered lately or with nothing outstanding to answer. */
		if (o->state == MRP_PATH_ACTIVE && o->cc.srtt_ns &&
		    ((!o->cc.inflight && !o->rto_pending) || now - o->last_ack_ns < base)) {
			*others_out = others;
			return 1;
		}
	}
	*others_out = others;
	return 0;
}

/* Timed-out entries whose data a first timeout held (path_timeout()):
 * neither an ACK nor the answer to its PROBE resolved them within one more
 * timeout (hold_at), or the path's timer expired again, so they go again
 * now, still unresolved (a late ACK may yet show them delivered). */
static void path_release_held(mrp_conn *c, path *pa, uint64_t now)
{
	pa->hold_at = NEVER;
	if (!pa->rto_pending)
		return;
	for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
		txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
		if (e->state == ENT_RTO && e->held) {
			e->held = 0;
			seg_requeue(c, e->m, e->seg, 1, now);
		}
	}
}

/*
 * Whether a path's timeout may be only delay, so that it should ask before
 * it sends its window again (SPEC 8.1): its first timeout (none since its
 * last delivered data), while a path of its plane works, on a path whose
 * timer is a guess -- no RTT sample of its own yet, only its plane's
 * borrowed (a route far slower than its plane's first one times out on
 * its first window) -- or whose last timeout was only delay, or that has
 * lost nothing yet (its ACKs come back now and then by a slower return
 * route than any its plane has timed, SPEC 6.3). A path that has lost
 * packets and whose last timeout was a loss sends at once, as before.
 */
static int timeout_may_be_delay(const mrp_conn *c, const path *pa, uint64_t now)
{
	if (pa->rto_count || pa->state != MRP_PATH_ACTIVE || pa->disabled || !pa->cc.inflight)
		return 0;
	if (pa->own_sample && !pa->rto_was_delay && pa->lost_pkts)
		return 0;
	return plane_alive_without(c, pa, now) && c->plane_max_rtt_ns[pa->plane];
}

static void path_timeout(mrp_conn *c, path *pa, uint64_t now)
{
	pa->rto_at = NEVER;
	pa->reprobe_n = 0;
	pa->rto_probe_seq = pa->probe_seq;
	pa->cold_probe = 0; /* (the timeout's own PROBE resolves now) */
	int repathed = pa->rp_fresh;
	/* A timeout that may be only delay holds the window's data: the
	 * PROBE that follows asks, and its answer -- or an ACK meanwhile --
	 * resolves each entry: delivered, or lost and sent again then. If
	 * no answer comes within the timeout that just expired (not
	 * doubled), or the path's timer expires again first, they go then
	 * (path_release_held()): a peer that answers nothing still gets
	 * the data about one timeout later than without the hold. (Not on
	 * a route a re-path just took: it may be a hole, and the path
	 * re-ports below.) */
	int hold = !repathed && timeout_may_be_delay(c, pa, now);
	uint64_t held_for = hold ? path_rto(c, pa) : 0;
	if (!hold)
		path_release_held(c, pa, now);
	if (pa->cc.inflight) {
		c->st.rto_count++;
		pa->rto_count++;
		repath_cancel(c, pa, now); /* failure handling decides */
		path_rto_inflight(c, pa, hold, now);
		if (hold)
			pa->hold_at = min64(pa->hold_at, now + held_for);
	} else if (pa->probe_pending) {
		pa->rto_count++;
		pa->probe_pending = 0;
	} else {
		return;
	}
	if (pa->disabled)
		return;
	/* A path that has carried none of our data in this generation -- one
	 * that carries ACKs -- and answered its probes until now has nothing
	 * to lose by a new route, and every probe of the old one may go into
	 * the same hole: it re-ports at its first unanswered probe, and so
	 * does its first new route (which may hash into the same hole). After
	 * two re-ports without an answer (a peer that answers no probes) it
	 * goes the slow way, its waits doubling with each re-port, so that it
	 * cannot make us churn source ports -- unless another path of its
	 * plane works: the peer answers, and what fails is the route. Then a
	 * new route lands in the same hole half the time with two spines, and
	 * it re-ports up to ACK_REPORTS_PROVEN times, its timeout not
	 * doubling for these (4 x 25G planes of 2 spines: 1.6-2.1 % of the
	 * cable's former packets still went into the hole, 0.4-0.7 % then),
	 * the probes of its later routes held back (ACK_REPORT_HOLD).
	 * A path that carries data fails after suspect_rtos timeouts, or
	 * ROUTE_FAIL_RTOS while another path of its plane works: a second
	 * timeout, its PROBEs unanswered all the while, when the peer
	 * answers on the same plane, is its route (with 3, a data path in a
	 * one-way hole went on probing it, its waits doubling, for some
	 * 700 us at 100-400G: 1.3-1.9 % of the cable's former packets still
	 * went into the hole after three timeout floors, 0-0.2 % now). */
	uint32_t others = 0;
	int works = plane_works_without(c, pa, now, &others);
	int ack_only = pa->snd_nxt == 0;
	/* A data path whose plane has no other path that works, while the
	 * peer answers on another plane: every route of ours there may lead
	 * into one hole (4 paths on a spine of 4 one time in 64), or the
	 * peer's plane is down. After suspect_rtos timeouts -- no burst
	 * lasts that long -- it re-ports too: probing on, its routes kept,
	 * 4 paths probed a hole every 41 us for 2 ms (1.79 % of the cable's
	 * former packets). It re-ports once: its new route has carried no
	 * data (ack_only), and is probed the usual way, its waits doubling,
	 * so a plane down at the peer costs one new route per path. */
	int heard = !ack_only && !works && others && now - c->last_rx_ns < path_rto(c, pa);
	/* An ACK-only path whose plane has no path that works, while the
	 * peer's packets still reach us on that plane: the peer and our
	 * cable there work, and what fails is the way back, our routes (a
	 * hole in one spine's cable took all 4 return routes of a receiver
	 * one time in 256: its sender heard nothing and sent its 4 KiB again
	 * and again for the whole 200 ms run, the receiver's paths probing
	 * the hole, their waits doubling). It re-ports like a path whose
	 * plane works, up to ACK_REPORTS_PROVEN times -- once it has been
	 * silent for half the initial timeout, which is set for the longest
	 * round trip the network may have: a far route's probe is answered
	 * before that (spines 2 and 160 us away: re-ported at their first
	 * timeouts, the receiver's new routes moved its ACKs between near and
	 * far spines, and a 32 MB flow lost 15 % of its goodput). */
	int peer_here = ack_only && !works && others && c->plane_rx_ns[pa->plane] &&
			now - c->plane_rx_ns[pa->plane] < path_rto(c, pa) &&
			now - pa->last_ack_ns >= c->p.rto_init_ns / 2;
	/* (only the timeouts that came while the plane worked count for its
	 * route: a silence of the whole connection -- a burst on the ACK
	 * direction of our cable, the peer descheduled -- timed out every
	 * path, and when it ends the others' ACKs come back before this
	 * path's PROBE is answered again; taken as a failed route, it was
	 * re-ported, and its timed-out packets, delivered, counted lost) */
	if (works)
		pa->route_rtos++;
	/* (a path whose new route, taken by a re-path, times out before any
	 * of its data there is acknowledged has nothing to prove on it: its
	 * old route worked, so the new one may well be a hole) */
	int failed = works ? pa->route_rtos >= min64(ROUTE_FAIL_RTOS, c->p.suspect_rtos)
			   : pa->rto_count >= c->p.suspect_rtos;
	if ((failed ||
	     (repathed && works) ||
	     (ack_only && (pa->fails < ACK_REPORTS ||
			   ((works || peer_here) && pa->fails < ACK_REPORTS_PROVEN)))) &&
	    (works || others == 0 || heard || peer_here)) {
		if (works || heard)
			c->route_fail_ns[pa->plane] = now ? now : 1;
		set_state(c, pa, MRP_PATH_FAILED, now);
		path_report(c, pa, 0, now);
		if (ack_only && works && pa->fails_quick < pa->fails)
			pa->fails_quick++;
		/* Its new routes keep landing in the hole: the plane's other
		 * paths carry its ACKs, and the next route's probe waits
		 * (ACK_REPORT_HOLD) -- on a connection that only receives,
		 * whose paths have no data to carry meanwhile. */
		if (ack_only && works && !sends_outstanding(c) && pa->fails_quick >= ACK_REPORTS) {
			unsigned sh = ACK_REPORT_HOLD + pa->fails_quick - ACK_REPORTS;
			pa->probe_at = now + min64(c->p.rto_min_ns << (sh < 8 ? sh : 8),
						   c->p.rto_max_ns);
			c->dl_valid = 0;
		}
	} else {
		if (pa->state == MRP_PATH_ACTIVE)
			set_state(c, pa, MRP_PATH_SUSPECT, now);
		path_start_probe(c, pa, now);
	}
	recompute_qwnd(c);
}

/* Some path waits for the answer to a PROBE or is out of service (SUSPECT,
 * PROBING, FAILED): the connection is trying to hear from its peer. */
static int probing_unanswered(const mrp_conn *c)
{
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (pa && pa->open && !pa->disabled &&
		    (pa->probe_pending || pa->state == MRP_PATH_SUSPECT ||
		     pa->state == MRP_PATH_PROBING || pa->state == MRP_PATH_FAILED))
			return 1;
	}
	return 0;
}

void mrp_conn_handle_timeout(mrp_conn *c, uint64_t now)
{
	if (c->silence_wake <= now)
		c->silence_wake = NEVER; /* (the caller writes next: write_data() arms it again) */
	/* Callers come whenever the deadline passed, and it is 0 while a
	 * control packet waits: often no timer is due, and then the scan below
	 * has nothing to do. */
	int due = timers_at(c) <= now;
	if (due)
		c->dl_valid = 0; /* (conn_fail() and close_check() drop it too) */
	if (c->state != CONN_CLOSED && due) {
		for (uint32_t i = 0; i < c->path_hi; i++) {
			path *pa = c->paths[i];
			if (!pa)
				continue;
			if (pa->rx_ack_at <= now) {
				pa->rx_ack_at = NEVER;
				pa->rx_ack_now = 1;
				c->ctl_dirty = 1;
			}
			if (!pa->open || !sending(c))
				continue;
			if (pa->rto_at <= now)
				path_timeout(c, pa, now);
			if (pa->hold_at <= now)
				path_release_held(c, pa, now);
			if (pa->tlp_at <= now) {
				pa->tlp_at = NEVER;
				if (pa->cc.inflight) {
					pa->tlp_pending = 1;
					c->ctl_dirty = 1;
				}
			}
			if (idle_probe_at(c, pa) <= now)
				path_start_probe(c, pa, now);
			if (pa->probe_at <= now)
				c->ctl_dirty = 1;
		}
		for (txmsg **pp = &c->rnr_list; *pp;) {
			txmsg *m = *pp;
			if (m->rnr_until > now) {
				pp = &m->rnext;
				continue;
			}
			*pp = m->rnext;
			m->rnext = NULL;
			m->in_rnr = 0;
			for (uint32_t s = 0; s < m->next_seg; s++)
				if (SEG_STATE(m->segs[s]) == SEG_PENDING)
					rq_push(c, m, s);
		}
	}
	/* Work outstanding and the peer silent for peer_timeout_ns, or an idle
	 * connection trying to hear from it (its probes) and silent for twice
	 * that: give up with RESET RETRY_EXCEEDED (SPEC 8.1; paths that keep
	 * failing re-port and probe forever, and a segment waiting for a live
	 * path never reaches its own retry limit). An idle connection costs
	 * nothing until it is used, and the longer wait lets an endpoint that
	 * knows more -- its peer restarted, and the challenge of 9.6 went
	 * unanswered (2.5 s) -- end it first, without a RESET. */
	uint64_t silent = now - c->last_rx_ns;
	if (sending(c) &&
	    ((silent >= c->p.peer_timeout_ns && sends_outstanding(c)) ||
	     (silent / 2 >= c->p.peer_timeout_ns && probing_unanswered(c)))) {
		for (uint32_t i = 0; i < c->nstreams; i++) {
			txmsg *m = c->streams[i].head;
			if (m && !m->done) {
				m->status = MRP_WC_RETRY_EXC;
				m->done = 1;
			}
		}
		fail_with(c, MRP_CLOSE_RETRY_EXCEEDED);
	}
	if (c->pending_fail)
		conn_fail(c);
	close_check(c, now);
}

/* ---- planes and steering ------------------------------------------------ */

static void path_set_disabled(mrp_conn *c, path *pa, uint8_t dis, uint64_t now)
{
	uint8_t was = pa->disabled;
	pa->disabled = dis;
	if (!was && dis) {
		path_drain_inflight(c, pa, 0, now);
		repath_cancel(c, pa, now);
		pa->probe_at = NEVER;
		pa->probe_pending = 0;
		pa->cold_probe = 0;
		set_state(c, pa, MRP_PATH_DISABLED, now);
	} else if (was && !dis) {
		/* Back in service through a fresh generation and a probe. */
		path_new_gen(c, pa, now);
		set_state(c, pa, MRP_PATH_PROBING, now);
		path_start_probe(c, pa, now);
	}
}

int mrp_conn_plane_event(mrp_conn *c, unsigned plane, int event, uint64_t now)
{
	c->dl_valid = 0;
	if (plane >= c->p.nplanes)
		return MRP_ERR_INVAL;
	uint8_t flag;
	int set;
	switch (event) {
	case MRP_PLANE_DOWN: flag = DIS_PLANE_DOWN; set = 1; break;
	case MRP_PLANE_UP: flag = DIS_PLANE_DOWN; set = 0; break;
	case MRP_PLANE_DRAIN: flag = DIS_PLANE_DRAIN; set = 1; break;
	case MRP_PLANE_UNDRAIN: flag = DIS_PLANE_DRAIN; set = 0; break;
	default: return MRP_ERR_INVAL;
	}
	if (set)
		c->plane_dis[plane] |= flag;
	else
		c->plane_dis[plane] &= (uint8_t)~flag;
	uint32_t lost = 0;
	for (uint32_t i = 0; i < c->path_hi; i++) {
		path *pa = c->paths[i];
		if (!pa || !pa->open || pa->plane != plane)
			continue;
		uint8_t dis = set ? (uint8_t)(pa->disabled | flag) : (uint8_t)(pa->disabled & ~flag);
		lost += set && !pa->disabled;
		path_set_disabled(c, pa, dis, now);
	}
	if (lost && sending(c)) /* (a plane down or drained) */
		replace_paths(c, now);
	recompute_qwnd(c);
	return 0;
}

static path *open_path(const mrp_conn *c, uint16_t id)
{
	path *pa = id < c->paths_cap ? c->paths[id] : NULL;
	return pa && pa->open ? pa : NULL;
}

int mrp_conn_path_disable(mrp_conn *c, uint16_t id, uint64_t now)
{
	c->dl_valid = 0;
	path *pa = open_path(c, id);
	if (!pa)
		return MRP_ERR_NOENT;
	path_set_disabled(c, pa, pa->disabled | DIS_OPERATOR, now);
	recompute_qwnd(c);
	return 0;
}

int mrp_conn_path_probe(mrp_conn *c, uint16_t id, uint64_t now)
{
	if (id >= c->p.max_paths)
		return MRP_ERR_RANGE;
	path *pa = id < c->paths_cap ? c->paths[id] : NULL;
	if (!pa || !pa->open)
		return MRP_ERR_NOENT;
	if (!sending(c) || pa->disabled || pa->state != MRP_PATH_ACTIVE || pa->probe_pending ||
	    pa->probe_at <= now)
		return MRP_ERR_STATE;
	path_start_probe(c, pa, now);
	c->dl_valid = 0;
	return 0;
}

int mrp_conn_path_enable(mrp_conn *c, uint16_t id, uint64_t now)
{
	c->dl_valid = 0;
	path *pa = open_path(c, id);
	if (!pa)
		return MRP_ERR_NOENT;
	path_set_disabled(c, pa, pa->disabled & (uint8_t)~DIS_OPERATOR, now);
	recompute_qwnd(c);
	return 0;
}

int mrp_conn_path_steer(mrp_conn *c, uint16_t id, uint16_t sport, int plane, uint64_t now)
{
	c->dl_valid = 0;
	path *pa = open_path(c, id);
	if (!pa)
		return MRP_ERR_NOENT;
	if (plane >= (int)c->p.nplanes || (sport && (sport < c->p.sport_min || sport > c->p.sport_max)))
		return MRP_ERR_INVAL;
	if (plane >= 0 && plane != pa->plane) {
		path_drain_inflight(c, pa, 0, now);
		pa->plane = (uint8_t)plane;
		uint8_t dis = (uint8_t)((pa->disabled & DIS_OPERATOR) | c->plane_dis[plane]);
		if (dis != pa->disabled) {
			pa->disabled = dis;
			if (dis) {
				/* as path_set_disabled(): a disabled path sends no
				 * probe, so none may stay scheduled */
				pa->probe_at = NEVER;
				pa->probe_pending = 0;
				set_state(c, pa, MRP_PATH_DISABLED, now);
			}
		}
	}
	path_report(c, pa, sport, now);
	return 0;
}

/* ---- telemetry and invariants ------------------------------------------- */

int mrp_conn_path_info(const mrp_conn *c, unsigned i, mrp_path_info *o)
{
	const path *pa = i < c->paths_cap ? c->paths[i] : NULL;
	if (!pa || !pa->open)
		return MRP_ERR_NOENT;
	memset(o, 0, sizeof(*o));
	o->id = pa->id;
	o->gen = pa->gen;
	o->plane = pa->plane;
	o->rx_plane = pa->rx_plane;
	o->state = pa->state;
	o->sport = pa->sport;
	o->cwnd = pa->cc.cwnd;
	o->inflight = pa->cc.inflight;
	o->srtt_ns = pa->cc.srtt_ns;
	o->min_rtt_ns = pa->cc.min_rtt_ns;
	o->tx_pkts = pa->tx_pkts;
	o->tx_bytes = pa->tx_bytes;
	o->retx_pkts = pa->retx_pkts;
	o->lost_pkts = pa->lost_pkts;
	o->acked_pkts = pa->acked_pkts;
	o->ce_pkts = pa->ce_pkts;
	o->rx_pkts = pa->rx_pkts;
	o->rx_ce_pkts = pa->rx_ce_pkts;
	o->probe_rtt_ns = pa->probe_rtt_ns;
	o->probes_answered = pa->probes_answered;
	return 0;
}

uint64_t mrp_conn_path_moves(const mrp_conn *c)
{
	return c->st.paths_opened + c->st.reports + c->st.repaths;
}

void mrp_conn_get_stats(const mrp_conn *c, mrp_conn_stats *o)
{
	*o = c->st;
	o->qwnd = c->cc.qwnd;
	o->pacing_bps = c->cc.pacing_bps;
	o->rate_hint_bps = c->cc.rate_hint_bps;
	o->planes_unproven = c->unproven;
}

int mrp_conn_poll_event(mrp_conn *c, mrp_event *ev)
{
	if (!c->evq_len)
		return 0;
	*ev = c->evq[c->evq_head];
	c->evq_head = (c->evq_head + 1) & (c->evq_cap - 1);
	c->evq_len--;
	return 1;
}

static int fail(char *err, size_t errlen, const char *what)
{
	if (errlen) {
		size_t n = strlen(what);
		if (n >= errlen)
			n = errlen - 1;
		memcpy(err, what, n);
		err[n] = 0;
	}
	return -1;
}

int mrp_conn_nic_blocked(const mrp_conn *c)
{
	return c->nic_blocked;
}

int mrp_conn_check(const mrp_conn *c, char *err, size_t errlen)
{
	uint64_t total = 0, nmsgs = 0;
	uint64_t minw = (uint64_t)c->p.cc.min_cwnd_pkts * c->p.cc.mtu; /* (whole packets) */
	uint64_t maxw = (uint64_t)c->p.cc.max_cwnd_pkts * c->p.cc.mtu;
	if (c->path_hi > c->paths_cap || c->paths_cap > c->p.max_paths)
		return fail(err, errlen, "path slots beyond the path array");
	if (c->nakq_len > c->nakq_cap || c->nakq_cap > NAKQ_LEN || (c->nakq_cap & (c->nakq_cap - 1)) ||
	    (c->nakq_cap && !c->nakq))
		return fail(err, errlen, "NAK queue beyond its ring");
	if (c->evq_len > c->evq_cap || c->evq_cap > EVQ_LEN || (c->evq_cap & (c->evq_cap - 1)) ||
	    (c->evq_cap && !c->evq))
		return fail(err, errlen, "event queue beyond its ring");
	for (uint32_t i = 0; i < c->path_hi; i++) {
		const path *pa = c->paths[i];
		if (!pa || !pa->open)
			continue;
		if (pa->snd_nxt != pa->snd_una && !pa->ring)
			return fail(err, errlen, "path has data in flight and no scoreboard");
		if (pa->snd_nxt - pa->snd_una > pa->ring_cap || pa->ring_cap > MRP_SACK_BITS)
			return fail(err, errlen, "path has more in flight than its scoreboard");
		uint64_t infl = 0;
		for (uint32_t psn = pa->snd_una; psn != pa->snd_nxt; psn++) {
			const txent *e = &pa->ring[psn & (pa->ring_cap - 1)];
			if (e->state == ENT_INFLIGHT)
				infl += e->bytes;
		}
		if (infl != pa->cc.inflight)
			return fail(err, errlen, "path inflight bytes disagree with its scoreboard");
		if (pa->acked_pkts + pa->lost_pkts > pa->tx_pkts)
			return fail(err, errlen, "path acked + lost exceeds sent");
		if (pa->cc.cwnd < minw || pa->cc.cwnd > maxw)
			return fail(err, errlen, "path window outside [min, max]");
		if (pa->rp_drain && (c->rp_path != pa->id + 1 || !infl))
			return fail(err, errlen, "path waits to re-path with nothing in flight, or not as the connection's one");
		total += infl;
	}
	if (c->rp_path && (c->rp_path > c->path_hi || !c->paths[c->rp_path - 1] ||
			   !c->paths[c->rp_path - 1]->rp_drain))
		return fail(err, errlen, "connection's re-path names no path waiting to re-path");
	if (total != c->total_inflight)
		return fail(err, errlen, "connection inflight disagrees with its paths");
	if (c->credit_inflight > c->total_inflight)
		return fail(err, errlen, "connection credit inflight exceeds its inflight");
	uint64_t nexp = 0, nexp_bytes = 0;
	for (uint32_t i = 0; i < c->nstreams; i++) {
		uint32_t n = 0;
		for (const txmsg *m = c->streams[i].head; m; m = m->snext) {
			n++;
			nexp += m->exp;
			nexp_bytes += m->exp ? m->len : 0;
			if (m->nacked > m->npkts || m->next_seg > m->npkts)
				return fail(err, errlen, "message acked or sent beyond its length");
			if (m->done || m->npkts > 65536)
				continue;
			uint32_t acked = 0;
			for (uint32_t s = 0; s < m->npkts; s++)
				acked += SEG_STATE(m->segs[s]) == SEG_ACKED;
			if (acked != m->nacked)
				return fail(err, errlen, "message acked count disagrees with its segments");
		}
		if (n != c->streams[i].outstanding)
			return fail(err, errlen, "stream outstanding count disagrees with its queue");
		nmsgs += n;
	}
	uint32_t nresp = 0;
	for (const txmsg *m = c->rd_head; m; m = m->snext) {
		nresp++;
		if (m->opcode != MRP_OP_READ_RESP || m->nacked > m->npkts ||
		    m->next_seg > m->npkts || (m->held && m->next_seg))
			return fail(err, errlen, "READ response inconsistent");
	}
	if (nresp != c->rd_resp || (c->p.read && c->rd_resp > c->p.rd_dest_max))
		return fail(err, errlen, "READ responses disagree with their count or bound");
	if (c->p.read && c->rd_out > c->p.rd_max)
		return fail(err, errlen, "READs outstanding beyond rd_max");
	nmsgs += nresp;
	if (nmsgs != c->tx_outstanding)
		return fail(err, errlen, "connection outstanding count disagrees with its streams");
	if (nexp != c->tx_exp_out || nexp_bytes != c->tx_exp_bytes)
		return fail(err, errlen, "expedited messages outstanding disagree with their count");
	if (nexp > 1 && nexp_bytes > c->p.expedite_budget)
		return fail(err, errlen, "expedited messages outstanding beyond expedite_budget");
	uint64_t unsent = 0;
	for (const txmsg *m = c->sq_head; m; m = m->qnext)
		unsent += m->npkts - m->next_seg;
	if (unsent != c->sq_unsent)
		return fail(err, errlen, "send queue's unsent count disagrees with its messages");
	if (c->cq_len > c->cq_cap)
		return fail(err, errlen, "completion queue overflow");
	if (c->dl_valid && c->dl_tmr != timers_compute(c))
		return fail(err, errlen, "cached deadline disagrees with the timers");
	return 0;
}
