/*
 * A MetaRoCE connection: the transport engine, sans I/O.
 *
 * One mrp_conn is one end of a connection after the handshake. It carries many
 * ordered streams upward and many paths downward under one congestion
 * controller. Inputs are function calls with the current time: work requests
 * posted, decoded packets received, timers expired, plane events, operator
 * steering. Outputs are packets written into caller buffers (with the path
 * they belong to), completions, and telemetry events. It never reads a clock,
 * touches a socket, allocates from the global heap or draws global randomness.
 *
 * The caller's loop:
 *   - on a datagram: mrp_pkt_decode(), find the conn by dst_conn_id,
 *     mrp_conn_read_pkt();
 *   - then (and after posting work, and when the deadline passes) call
 *     mrp_conn_handle_timeout() if mrp_conn_deadline() <= now, and
 *     mrp_conn_write_pkt() until it returns 0;
 *   - mrp_conn_poll_cq() for completions, mrp_conn_poll_event() for telemetry.
 */
#ifndef MRP_CONN_H
#define MRP_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cc.h"
#include "error.h"
#include "mem.h"
#include "ratehint.h"
#include "wire.h"

typedef struct mrp_conn mrp_conn;

/* Completion statuses: X(NAME, value, message). */
#define MRP_WC_STATUS_MAP(X)                                                    \
	X(SUCCESS, 0, "success")                                                \
	X(REM_ACCESS, 1, "remote access error: invalid rkey or access rights") \
	X(REM_BOUNDS, 2, "remote bounds error: outside the region or receive buffer") \
	X(RNR_RETRY_EXC, 3, "receiver not ready beyond the retry count")       \
	X(RETRY_EXC, 4, "retry budget exhausted: the peer does not answer")    \
	X(RESET, 5, "connection reset by peer")                                 \
	X(FLUSHED, 6, "flushed: the connection closed")                         \
	X(LOC_LEN, 7, "local length error: message larger than the receive buffer") \
	X(REM_INVALID, 8, "remote invalid request: unknown stream or malformed")

enum {
#define MRP_WC_ENUM(name, val, msg) MRP_WC_##name = (val),
	MRP_WC_STATUS_MAP(MRP_WC_ENUM)
#undef MRP_WC_ENUM
};

const char *mrp_wc_status_str(int status);
const char *mrp_wc_status_name(int status);

/* Work request opcodes (send side) and completion opcodes. */
enum {
	MRP_WR_WRITE = MRP_OP_WRITE,
	MRP_WR_WRITE_IMM = MRP_OP_WRITE_IMM,
	MRP_WR_SEND = MRP_OP_SEND,
	MRP_WR_SEND_IMM = MRP_OP_SEND_IMM,
	MRP_WR_READ = MRP_OP_READ_REQ, /* only with mrp_conn_params.read */
	MRP_WC_RECV = 0x40,          /* a SEND or SEND_IMM arrived */
	MRP_WC_RECV_WRITE_IMM = 0x41, /* a WRITE_IMM arrived (consumed a receive) */
};

typedef struct mrp_wr {
	uint64_t wr_id;
	uint8_t opcode;       /* MRP_WR_* */
	uint16_t stream;
	const uint8_t *local; /* source bytes; valid until the completion */
	uint32_t len;
	uint64_t remote_addr; /* WRITE*: target address; READ: source address */
	uint32_t rkey;        /* WRITE*: target key; READ: source key */
	uint32_t imm;         /* *_IMM */
	uint8_t *sink;        /* READ: where the len bytes land (local is unused);
			       * valid until the completion */
} mrp_wr;

typedef struct mrp_cqe {
	uint64_t wr_id;
	uint8_t status;   /* MRP_WC_* status */
	uint8_t opcode;   /* MRP_WR_* on the send side, MRP_WC_RECV* on the receive side */
	uint8_t has_imm;
	uint16_t stream;
	uint32_t byte_len;
	uint32_t imm;
} mrp_cqe;

/* Access rights of a memory region. */
#define MRP_ACCESS_LOCAL_WRITE 0x1
#define MRP_ACCESS_REMOTE_WRITE 0x2
#define MRP_ACCESS_REMOTE_READ 0x4

/*
 * Memory-region lookup supplied by the caller: the local address of
 * [addr, addr + len) in the region rkey names, if that whole range lies inside
 * it and it grants access. On failure returns NULL and sets *pnak to
 * MRP_NAK_INVALID_RKEY, MRP_NAK_OUT_OF_BOUNDS or MRP_NAK_ACCESS.
 */
typedef struct mrp_mr_ops {
	uint8_t *(*resolve)(void *ud, uint32_t rkey, uint64_t addr, uint64_t len,
			    unsigned access, int *pnak);
	void *ud;
} mrp_mr_ops;

/* Path states. */
#define MRP_PATH_STATE_MAP(X)                                                   \
	X(ACTIVE, 0, "active")                                                  \
	X(SUSPECT, 1, "suspect")   /* timed out: probing, carries no new data */ \
	X(FAILED, 2, "failed")     /* gave up: will be re-ported */             \
	X(PROBING, 3, "probing")   /* new or re-ported: waits for a PROBE_ACK */ \
	X(DISABLED, 4, "disabled") /* operator disabled, or its plane is down or drained */ \
	X(CLOSED, 5, "closed")     /* slot unused */

enum {
#define MRP_PS_ENUM(name, val, msg) MRP_PATH_##name = (val),
	MRP_PATH_STATE_MAP(MRP_PS_ENUM)
#undef MRP_PS_ENUM
};

const char *mrp_path_state_name(int state);

#define MRP_MAX_PLANES 16
#define MRP_MAX_PATHS 256

typedef struct mrp_conn_params {
	uint32_t local_conn_id, peer_conn_id; /* nonzero */
	uint64_t local_token, peer_token;     /* nonzero */
	uint32_t mtu;            /* payload bytes per packet (default 4096) */
	uint16_t max_streams;    /* default 1024 */
	uint16_t max_paths;      /* default 64, <= MRP_MAX_PATHS */
	uint16_t initial_paths;  /* default 4 in all, at least one per plane (the
				  * daemon and the simulator pass per-plane x planes) */
	uint8_t nplanes;         /* plane pairs: local plane i talks to remote plane i */
	uint16_t sport_min, sport_max; /* source-port range for path entropy */
	const char *cc_name;     /* default "baseline" */
	mrp_cc_params cc;        /* mtu is copied in */
	uint64_t rto_min_ns, rto_max_ns, rto_init_ns;
	uint32_t burst_pkts;     /* same-path packets handed out in a row (default 4) */
	uint32_t ack_every;      /* ACK after this many packets (default 4) */
	uint64_t ack_delay_ns;   /* or after this long (default 8 us) */
	uint32_t retry_max;      /* RTOs of one packet before RETRY_EXC (default 8) ... */
	uint64_t retry_timeout_ns; /* ... and at least this long since the request's
				    * first RTO or RNR NAK (default 500 ms; 0 = count
				    * only); the same holds for rnr_retry_max */
	uint32_t rnr_retry_max;  /* RNR NAKs of one message (default 7) */
	uint64_t rnr_delay_ns;   /* default wait after an RNR NAK (default 100 us) */
	uint32_t suspect_rtos;   /* consecutive RTOs that fail a path (default 3) */
	uint64_t probe_idle_ns;  /* probe a path idle this long (default 1 s; 0 = never) */
	uint32_t msg_window;     /* outstanding messages per stream (default 1024) */
	uint64_t peer_timeout_ns; /* with work outstanding and nothing heard from the
				   * peer this long, the connection fails with RESET
				   * RETRY_EXCEEDED (default 2 s); an idle one whose
				   * probes go unanswered, after twice this */
	mrp_rh *rh;              /* receiver's rate-hint allocator, or NULL */
	uint64_t caps;           /* capabilities both ends negotiated (MRP_CAP_*);
				  * the engine reads two: RATE_HINT (ACKs carry
				  * the allocator's share, and the peer's hints
				  * limit sending) and HELD (data packets say
				  * when the peer's hint holds back more that is
				  * ready, and the peer's tell the allocator).
				  * Default both */
	uint64_t plane_rate_bps[MRP_MAX_PLANES]; /* local link rate of each plane:
						  * the plane is paced to it (0 = not paced) */
	const uint32_t *planes_full; /* NULL, or the caller's bitmask of the
				      * planes whose local queue (the host's
				      * NIC port) is full now, bit p for plane
				      * p, read at every mrp_conn_write_pkt():
				      * no data goes on them, as if paced, and
				      * the data goes on the other planes
				      * instead (mrp_conn_nic_blocked()) */
	uint32_t wire_overhead;  /* bytes each packet costs on the wire beyond the
				  * UDP payload (default 66: Ethernet with preamble,
				  * FCS and gap, IPv4, UDP); pacing and rate hints
				  * count them */
	/* First-round-trip admission (SPEC 6.6), with the capability ADMIT
	 * negotiated: what the peer, as receiver, granted this connection
	 * before it has heard anything from it (the ACCEPT's admit, or a
	 * simulator's model of it). With admit 0 the connection starts with
	 * its initial window, as without ADMIT. With admit 1, until its first
	 * ACK or grant it sends new data only within admit_credit bytes
	 * (counted with their headers; started within admit_ttl_ns of its
	 * creation, or void): a credit above the initial window opens the
	 * windows, and paths as they fill, paced at the line. With no credit
	 * it first asks for a grant (a PROBE with GRANT). Receive side: with
	 * ADMIT and an rh, a PROBE with GRANT is answered with the
	 * allocator's share, and data sent on admission returns its credit. */
	uint8_t admit;            /* default 0 */
	uint64_t admit_credit;    /* bytes, packets counted with their header */
	uint64_t admit_ttl_ns;    /* default 100 us */
	/* RDMA READ (SPEC 5.8): only when the capability READ was negotiated.
	 * Without it READ work requests are refused (MRP_ERR_INVAL) and
	 * READ_REQ / READ_RESP packets are NAKed MALFORMED. */
	uint8_t read;            /* default 0 */
	uint16_t rd_max;         /* READs of ours outstanding at once, from their
				  * READ_REQ to their last byte (verbs
				  * max_rd_atomic; default 16); more wait */
	uint16_t rd_dest_max;    /* peer READs held at once, until their
				  * responses are acknowledged (verbs
				  * max_dest_rd_atomic; default 64); more are
				  * NAKed RNR */
	/* Address validation of the peer's planes (SPEC 9.5): bit i set when
	 * the peer's address on plane pair i was only announced, never shown
	 * to be the peer's (the handshake's own address is). The paths of such
	 * a pair carry no data and no ACKs until one of their PROBEs, sent
	 * with a random sequence number, is answered; until then they are
	 * PROBING, and their probes back off as for any path that gets no
	 * answer. A peer that announces another host's address for a plane
	 * thus gets nothing sent there but the probes. Default 0 (every
	 * address trusted: a simulator's peers). */
	uint32_t unproven_planes;
	/* A round-trip time the host measured recently over each plane, to
	 * peers of the same network (its other connections' paths), or 0
	 * where it knows none (default). Only a PROBE is timed from it: a
	 * path whose plane has no RTT sample in this connection yet asks for
	 * one by PROBE twice this plus the ACK delay after its oldest packet
	 * (not held to rto_min: the PROBE follows the path's data on its
	 * route, so an early one costs only itself), instead of waiting for
	 * the initial timers of an unknown network (rto_init; its tail-loss
	 * probe at half that). Its data is not sent again sooner: this peer
	 * may be further away. */
	uint64_t plane_rtt_hint_ns[MRP_MAX_PLANES];
	/* The expedited class (SPEC 6.7): a network with a second traffic
	 * class served first (strict priority, or a large weight) carries the
	 * data of messages of at most expedite_max bytes there, and every
	 * control packet of a connection whose last data to arrive was of
	 * such a message; ti->expedite says which packets. With it, a lone
	 * admission credit also ends when its sender's first data without
	 * GRANT arrives (mrp_rh_admit_end()). Default 0: off, one class. */
	uint32_t expedite_max;
	/* ... and the bytes of expedited messages a connection may have
	 * outstanding (posted, not completed), the new one counted; one
	 * message alone may always be. A queue of short messages is bulk:
	 * the message past the budget, and every one posted while it is
	 * outstanding, go in the default class. Default 1 MiB. */
	uint32_t expedite_budget;
} mrp_conn_params;

/* Fill p with the defaults above. */
void mrp_conn_params_default(mrp_conn_params *p);

/* Create a connection. Returns 0 and *pconn, or MRP_ERR_INVAL (bad params,
 * naming nothing more specific: see the comments above), MRP_ERR_NOENT
 * (unknown CC algorithm) or MRP_ERR_NOMEM. */
int mrp_conn_new(mrp_conn **pconn, const mrp_conn_params *params,
		 const mrp_mem *mem, const mrp_rng *rng, const mrp_mr_ops *mr,
		 uint64_t now_ns);

/* Free it and everything in it (outstanding work is dropped without
 * completions: call mrp_conn_close() first to get them). */
void mrp_conn_del(mrp_conn *conn);

/* Change the initial timeout (mrp_conn_params.rto_init_ns) of a connection
 * that has sent nothing yet, for a caller that learns how far its peer is
 * only after creating it (the daemon's acceptor: the round trip of its
 * ACCEPT, known when the initiator's first packet arrives). Timers already
 * armed keep the value they were armed with. Returns 0, or MRP_ERR_INVAL
 * for 0. */
int mrp_conn_set_rto_init(mrp_conn *conn, uint64_t rto_init_ns);

/* Post a send-side work request. MRP_ERR_INVAL (bad opcode/stream/length),
 * MRP_ERR_STATE (closed), MRP_ERR_NOMEM. */
int mrp_conn_post_send(mrp_conn *conn, const mrp_wr *wr, uint64_t now_ns);

/* Post a receive buffer on a stream. */
int mrp_conn_post_recv(mrp_conn *conn, uint16_t stream, uint64_t wr_id,
		       uint8_t *buf, uint32_t len, uint64_t now_ns);

/*
 * Process a decoded packet addressed to this connection (hdr.dst_conn_id ==
 * local_conn_id). plane is the local plane it arrived on, ce whether its IP
 * header carried CE. Returns 0, or a negative code for a packet that was
 * dropped (and counted): MRP_ERR_TOKEN, MRP_ERR_RANGE (path id, stream or MSN
 * outside what the connection allows), MRP_ERR_STATE.
 */
int mrp_conn_read_pkt(mrp_conn *conn, const mrp_pkt *pkt, unsigned plane,
		      int ce, uint64_t now_ns);

/* Where a packet written by mrp_conn_write_pkt goes. */
typedef struct mrp_tx_info {
	uint8_t plane;    /* plane pair index */
	uint16_t sport;   /* UDP source port */
	uint16_t path_id;
	uint8_t ect;      /* send with ECT(0) */
	uint8_t is_data;
	uint8_t expedite; /* send in the expedited traffic class (SPEC 6.7,
			   * mrp_conn_params.expedite_max); 0 without it */
	/* mrp_conn_write_pkt_ref() only: the packet's payload, sent after the
	 * bytes written into buf; NULL and 0 otherwise. */
	const uint8_t *payload;
	uint32_t payload_len;
} mrp_tx_info;

/*
 * Write the next packet to send into buf. Returns its length, 0 if nothing
 * can be sent now (see mrp_conn_deadline), or MRP_ERR_NOBUF if buflen is too
 * small for an MTU-sized packet (MRP_DATA_HDR_LEN + mtu). Consecutive calls
 * return same-path bursts of up to burst_pkts packets.
 */
ssize_t mrp_conn_write_pkt(mrp_conn *conn, mrp_tx_info *ti, uint8_t *buf,
			   size_t buflen, uint64_t now_ns);

/*
 * mrp_conn_write_pkt(), but a data packet's payload is not copied into buf:
 * the packet is the returned number of bytes of buf (its headers) followed by
 * ti->payload_len bytes at ti->payload, a pointer into the memory of the work
 * request (or, for a READ response, into what mr.resolve returned). That
 * memory is the caller's, and is the caller's to keep unchanged until the
 * packet is sent: at the latest before it takes this connection's next
 * completion (mrp_conn_poll_cq) or frees the connection, since a completion
 * hands the memory back to its owner. The packet's accounting (sizes, pacing,
 * the congestion window) is that of the whole packet. A scatter-gather send
 * (sendmsg with two iovecs) then copies the payload once, in the kernel.
 */
ssize_t mrp_conn_write_pkt_ref(mrp_conn *conn, mrp_tx_info *ti, uint8_t *buf,
			       size_t buflen, uint64_t now_ns);

/* The earliest time the connection needs mrp_conn_handle_timeout or
 * mrp_conn_write_pkt again; UINT64_MAX for never. Cheap to ask after every
 * batch: the connection keeps the part that needs a scan over its paths
 * until a call changes it. (That cache is written through the const
 * pointer, so this is no more safe to call concurrently with another call
 * on the same connection than any other function here.) */
uint64_t mrp_conn_deadline(const mrp_conn *conn);

/* mrp_conn_deadline(), with a pacing wait (the connection's rate) that ends
 * before not_before put back towards not_before, but no later than the time
 * the pacing bucket is full again (burst_pkts packets of the last one's
 * size); the other deadlines as they are. For a host that pays more for a
 * wake-up than for a packet: woken a little later, it sends what the bucket
 * let accumulate in one go. not_before 0: the same as mrp_conn_deadline(). */
uint64_t mrp_conn_deadline_paced(const mrp_conn *conn, uint64_t not_before);

/* Run the timers that are due (RTO, tail-loss probe, delayed ACK, RNR
 * retry, probes). */
void mrp_conn_handle_timeout(mrp_conn *conn, uint64_t now_ns);

/* Take up to max completions. Returns how many. */
int mrp_conn_poll_cq(mrp_conn *conn, mrp_cqe *out, int max);

/* Plane events from the host (netlink) or the operator. */
enum {
	MRP_PLANE_DOWN = 1,
	MRP_PLANE_UP = 2,
	MRP_PLANE_DRAIN = 3,
	MRP_PLANE_UNDRAIN = 4,
};
int mrp_conn_plane_event(mrp_conn *conn, unsigned plane, int event,
			 uint64_t now_ns);

/* Operator steering of one path. */
int mrp_conn_path_disable(mrp_conn *conn, uint16_t path_id, uint64_t now_ns);
int mrp_conn_path_enable(mrp_conn *conn, uint16_t path_id, uint64_t now_ns);
/* Send a PROBE on an active path now (an operator's ping); its answer's RTT
 * is mrp_path_info.probe_rtt_ns and counts in probes_answered. MRP_ERR_RANGE,
 * MRP_ERR_NOENT (no such open path), MRP_ERR_STATE (the connection is not
 * sending, or the path is not active or already has a probe out). */
int mrp_conn_path_probe(mrp_conn *conn, uint16_t path_id, uint64_t now_ns);
/* Move a path to another source port (0 = a random one) and/or plane
 * (-1 = keep): starts a new generation. */
int mrp_conn_path_steer(mrp_conn *conn, uint16_t path_id, uint16_t sport,
			int plane, uint64_t now_ns);

/* Close: flush everything outstanding with MRP_WC_FLUSHED and queue a CLOSE
 * to the peer. Abort instead queues a RESET. The CLOSE or RESET carries
 * reason NORMAL; mrp_conn_close_reason() gives another (MRP_CLOSE_*, SPEC
 * 11.4: APP_EXIT when the application went away, SHUTDOWN when the endpoint
 * stops). */
void mrp_conn_close(mrp_conn *conn, int abort, uint64_t now_ns);
void mrp_conn_close_reason(mrp_conn *conn, int abort, uint16_t reason, uint64_t now_ns);

/* Whether the engine itself ended the connection, with a RESET (SPEC 11.4):
 * the RESET's reason (MRP_CLOSE_RETRY_EXCEEDED: retries or RNR retries
 * exhausted, or the peer silent; MRP_CLOSE_PROTOCOL: the ends disagree;
 * MRP_CLOSE_NORMAL: an access error the peer NAK'd or we did), or -1 when
 * it did not (still open, closed by the caller or by the peer). */
int mrp_conn_failure(const mrp_conn *conn);

/* Whether the connection is closed (by either side) and has nothing left to
 * send. */
int mrp_conn_is_closed(const mrp_conn *conn);

/* Telemetry. */
typedef struct mrp_path_info {
	uint16_t id, gen;
	uint8_t plane, state;
	uint16_t sport;
	uint64_t cwnd, inflight;
	uint64_t srtt_ns, min_rtt_ns;
	uint64_t tx_pkts, tx_bytes, retx_pkts, lost_pkts, acked_pkts, ce_pkts;
	uint64_t rx_pkts, rx_ce_pkts;
	/* rx_*: the peer's path with this id, which need not be on the same
	 * plane pair as ours (each end opens its own paths): the plane pair
	 * its packets last arrived on */
	uint8_t rx_plane;
	uint64_t probe_rtt_ns;    /* RTT of the last answered PROBE, 0 = none yet */
	uint64_t probes_answered; /* PROBEs of ours answered on this path */
} mrp_path_info;

/* Info of path slot i (0 <= i < max_paths). MRP_ERR_NOENT for a closed slot. */
int mrp_conn_path_info(const mrp_conn *conn, unsigned i, mrp_path_info *out);

typedef struct mrp_conn_stats {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t retx_pkts, lost_pkts, rto_count, tlp_count;
	uint64_t rto_spurious;     /* timeouts undone: their packets arrived after all */
	uint64_t rto_late_pkts;    /* packets of timeouts that arrived after all (not
				    * counted in lost_pkts: a timeout's packets count
				    * as lost only once an ACK shows them missing) */
	uint64_t rx_dup_pkts;      /* data segments that had already arrived */
	uint64_t rx_held_pkts;     /* last packets of WRITEs held until the rest of
				    * their message was placed (SPEC 5.3) */
	uint64_t naks_sent, naks_rcvd, acks_sent, acks_rcvd;
	uint64_t drops_token, drops_noconn, drops_range, drops_stale;
	/* every change of a path's source port or plane counts in
	 * paths_opened, reports (re-ports, steering) or repaths: a caller
	 * that keeps what the paths use looks at them again when the sum
	 * moves, mrp_conn_path_moves() (the daemon's source-port sockets) */
	uint64_t paths_opened, reports, events_dropped;
	uint64_t qwnd, pacing_bps, rate_hint_bps;
	uint32_t npaths_active;
	/* first-round-trip admission (SPEC 6.6): requests for a grant we
	 * sent, grants we received, requests we answered */
	uint64_t admit_asks, admit_grants, admit_requests;
	/* address validation (SPEC 9.5): peer plane addresses proven by the
	 * answer to a PROBE, and the plane pairs still waiting (a mask) */
	uint64_t planes_proven;
	uint32_t planes_unproven;
	/* paths moved to another route with their window (SPEC 6.4) */
	uint64_t repaths;
} mrp_conn_stats;

void mrp_conn_get_stats(const mrp_conn *conn, mrp_conn_stats *out);

/* paths_opened + reports + repaths of the stats, without copying them: it
 * moves whenever a path's source port or plane may have changed (cheap
 * enough to ask on every turn). */
uint64_t mrp_conn_path_moves(const mrp_conn *conn);

typedef struct mrp_event {
	uint64_t ts_ns;
	uint16_t path_id, gen;
	uint8_t plane;
	uint8_t old_state, new_state;
	uint16_t sport;
} mrp_event;

/* A path's move to another route without a change of state (a re-path,
 * SPEC 6.4) is an event with old_state == new_state and the new sport. */
/* Take the next path-state event. Returns 1, or 0 when none is queued. The
 * queue holds the most recent 64; older ones are dropped and counted, and so
 * is an event the allocator had no memory for (the queue is allocated on the
 * first event and grows with use). */
int mrp_conn_poll_event(mrp_conn *conn, mrp_event *ev);

/* Whether the last mrp_conn_write_pkt() looked for a path for data and met
 * a plane the caller's planes_full named. When that call wrote no packet,
 * the caller calls again once such a plane has room: nothing in the
 * connection's deadline says when. */
int mrp_conn_nic_blocked(const mrp_conn *conn);

/* Check internal invariants (acked <= sent, windows within bounds, ...).
 * Returns 0, or -1 with a message in err. For tests and the simulator. */
int mrp_conn_check(const mrp_conn *conn, char *err, size_t errlen);

#endif
