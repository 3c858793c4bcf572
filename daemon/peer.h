/*
 * Peers and connections: the handshake (SPEC 9-12), the dispatch of every
 * received datagram (SPEC 13), and the loop that drives each connection's
 * engine (proto/conn.h).
 *
 * A connection (mrd_conn) is created by mrd_conn_connect() (initiator) or by
 * a CONNECT for a service someone listens on (acceptor). Its states:
 *
 *   CONNECTING   initiator: CONNECT sent, resent after 1 ms, 2 ms, 4 ms, ...
 *                10 transmissions (about 1 s), then the attempt fails
 *   HALF_OPEN    acceptor: ACCEPT sent, waiting for the first packet of
 *                the initiator that carries our token; discarded silently
 *                after 3 s, or at once on an accepted NAK UNKNOWN_CONN
 *   ESTABLISHED  the engine runs; mrd_conn_close() starts the CLOSE
 *   ENDED        tombstone for 1 s (SPEC 11.5): its id is not reused, a
 *                late CLOSE is answered by the engine, the rest counted
 *                NOCONN; then freed
 *
 * Every connection has one entry in the engine-deadline heap (timer.h),
 * scheduled at its next deadline: the engine's, a handshake retransmission
 * or an expiry. Work that makes a connection produce packets (a datagram
 * read, a request posted) marks it dirty; mrd_peer_run() services the dirty
 * ones, flushes the send queue (one sendmmsg/GSO batch) and re-arms the
 * timerfd. Nothing here blocks.
 *
 * A peer (mrd_peer) is a remote daemon, recognised by the address and
 * service port of its handshakes; it remembers the peer's instance id. A
 * handshake with another instance id challenges the connections of the old
 * one (challenge.h): those the peer no longer answers for end (SPEC 9.6).
 * No packet without our token changes a connection's state.
 */
#ifndef MRD_PEER_H
#define MRD_PEER_H

#include <stdint.h>

#include "budget.h"
#include "challenge.h"
#include "cookie.h"
#include "membudget.h"
#include "conn.h"
#include "datapath.h"
#include "mrd.h"
#include "timer.h"

typedef struct mrd mrd;
typedef struct mrd_conn mrd_conn;
typedef struct mrd_peer mrd_peer;

enum {
	MRD_CONN_CONNECTING,
	MRD_CONN_HALF_OPEN,
	MRD_CONN_ESTABLISHED,
	MRD_CONN_ENDED,
};

const char *mrd_conn_state_name(const mrd_conn *c);

/* What the user of a connection (a service, perf.c) is told. Callbacks run
 * from the connection's service routine; they may post work and close the
 * connection but never free it. */
typedef struct mrd_conn_ops {
	/* The engine exists and the connection is confirmed: post receives
	 * and work. Returns 0, or -1 to reset the connection. */
	int (*established)(mrd_conn *c);
	void (*completion)(mrd_conn *c, const mrp_cqe *e);
	/* The connection (or the attempt) is over; why is a short phrase.
	 * No callback follows. */
	void (*ended)(mrd_conn *c, const char *why);
	/* Memory-region lookup for WRITEs to us, as mrp_mr_ops.resolve;
	 * NULL: every rkey is invalid. */
	uint8_t *(*resolve)(mrd_conn *c, uint32_t rkey, uint64_t addr, uint64_t len,
			    unsigned access, int *pnak);
	/* Acceptor: the most streams the service takes for service_id (it
	 * caps what the ACCEPT offers); NULL or 0: the configuration's. */
	uint16_t (*max_streams)(mrd *d, uint32_t service_id);
} mrd_conn_ops;

/* The service registry: who answers CONNECTs for a service id. Each
 * lookup registered at start (main.c: the daemon's own services, then the
 * applications' listeners) returns the ops for service_id or NULL; the
 * first that knows it answers, none: REJECT NO_SERVICE. */
typedef const mrd_conn_ops *(*mrd_service_fn)(void *ud, uint32_t service_id);
#define MRD_SERVICES_MAX 4

/* What the layers above hear of connections, set at start by main.c (a
 * NULL member: nobody listens). */
typedef struct mrd_peer_hooks {
	/* The engine exists and the connection is established. */
	void (*established)(void *ud, mrd_conn *c, uint64_t now_ns);
	/* The connection is about to be freed. */
	void (*freed)(void *ud, mrd_conn *c);
	void *ud;
} mrd_peer_hooks;

/* A pair of planes a connection's paths use: engine plane i is our plane
 * lplane talking to the peer's address raddr (its service port). */
typedef struct mrd_pair {
	uint8_t lplane;
	mrd_sockaddr raddr;
	socklen_t rlen;
} mrd_pair;

/* The source port one path of a connection holds in the datapath
 * (mrd_dp_port_use): lplane1 = local plane + 1, 0 = none. */
typedef struct mrd_held_sport {
	uint16_t sport;
	uint8_t lplane1;
} mrd_held_sport;

struct mrd_peer {
	mrd_peer *next, *prev; /* every peer */
	mrd_peer *inext, *iprev; /* the peers without connections, in the order
				  * they lost their last one (or were created
				  * without): the first is the one evicted */
	mrd_peer *hnext;   /* address hash chain */
	mrd_sockaddr addr; /* handshake address and service port */
	socklen_t alen;
	uint64_t instance_id;
	uint8_t have_instance;
	uint32_t nconns;   /* connections not yet freed */
	uint64_t first_ns, last_ns, restarts, conns_total;
	/* restart challenges (challenge.h): the start of the last round, and
	 * the round whose expiry was counted as a restart */
	uint64_t chal_round_ns, chal_counted_ns;
	uint64_t challenges, challenges_answered;
	uint32_t nhalf;            /* its half-open connections here */
	uint64_t cookie, cookie_ns; /* initiator: the peer's last RETRY cookie */
};

#define MRD_HS_MAX (MRP_HS_FIXED_LEN + MRP_HS_ADDR_LEN * MRP_MAX_ADDRS)

struct mrd_conn {
	mrd *d;
	mrd_conn *hnext;       /* id hash chain */
	mrd_conn *anext;       /* acceptor: (peer id, handshake address) hash chain */
	mrd_conn *next, *prev; /* every connection */
	mrd_conn *dnext;       /* dirty list */
	uint8_t dirty, in_service, initiator, busy;
	uint8_t hs_discard; /* HALF_OPEN: the initiator does not know it (SPEC 9.4) */
	int state;
	mrd_peer *peer;
	uint32_t local_id, peer_id;
	uint64_t local_token, peer_token;
	uint32_t service_id;
	uint64_t peer_instance, caps;
	uint64_t admit_credit;    /* ADMIT (SPEC 6.6): the ACCEPT's credit, bytes */
	uint32_t mtu;
	uint16_t max_streams, max_paths;
	mrp_conn *eng;
	mrd_timer_ent tent;
	unsigned npairs;
	mrd_pair pairs[MRD_MAX_PLANES];
	/* handshake: where it went/came from, the packet to resend */
	mrd_sock *hs_sock;
	mrd_sockaddr hs_addr;
	socklen_t hs_alen;
	uint8_t hs_pkt[MRD_HS_MAX];
	uint16_t hs_len;
	uint32_t hs_tries;
	uint32_t hs_retries;   /* RETRYs taken for this attempt (SPEC 9.7) */
	uint64_t hs_next_ns;
	/* The handshake's round trip (mrd_rto_initial()): the first
	 * transmission of the CONNECT (initiator; after a RETRY, of the one
	 * with the cookie) or of the ACCEPT (acceptor) whose answer is
	 * awaited; the round trip measured, 0 until then; the initial
	 * timeout it gave the engine, once the engine exists. */
	uint64_t hs_sent_ns, hs_rtt_ns, rto_init_ns;
	uint64_t created_ns, established_ns, ended_ns;
	uint64_t heard_ns;        /* last packet of the peer with our token */
	int silenced;             /* ended for that silence (peer.c) */
	char end_reason[48];
	const mrd_conn_ops *ops;
	void *ud;                 /* the service's state */
	uint64_t drops[MRD_NERR]; /* datagrams of this connection dropped, by -MRP_ERR_* */
	uint64_t sport_fails;
	/* The source ports its paths hold, by path id (max_paths of them),
	 * brought in line with the engine's paths when a path opened or moved
	 * (sports_sync in peer.c), released when the connection is freed: a
	 * socket that no path holds closes soon (datapath.h). */
	mrd_held_sport *held;
	uint16_t nheld;
	uint64_t held_moves;      /* the engine's paths_opened + reports + repaths then */
	/* initiator options (mrd_conn_opts): 0 = the configuration's */
	uint16_t opt_paths;       /* initial paths per plane */
	uint32_t opt_planes;      /* our planes the connection may use (bit i) */
	void *tel;                /* the telemetry sampler's state (telemetry.c) */
	mrd_challenge chal;       /* is the peer's old instance alive? (SPEC 9.6) */
	mrd_membudget mem;        /* what its engine holds (membudget.h) */
	mrd_addrmem *addrmem;     /* and its peer address's share of it */
};

typedef struct mrd_peers {
	mrd_conn **buckets; /* by local id */
	uint32_t nbuckets, nconns, nhalf;
	mrd_conn *all;
	mrd_conn *dirty, *dirty_tail;
	mrd_peer *list;
	mrd_peer *idle_head, *idle_tail; /* mrd_peer.inext */
	uint32_t npeers;
	struct {
		uint8_t key[16];
		uint64_t n;
	} rng_state;            /* the engine's randomness: SipHash of a counter */
	mrp_mem mem;
	mrp_rng rng;
	/* answers to packets not authenticated (budget.h, SPEC 14.3): REJECT
	 * and NAK UNKNOWN_CONN; RETRY; ACCEPT (validated sources only) */
	mrd_budget answers, retries, accepts;
	mrd_cookie_keys cookies; /* SPEC 9.7 */
	mrd_memacct memacct;     /* engine memory of every connection */
	/* Per local plane, the largest smoothed RTT of the connections' paths
	 * there at the telemetry sampler's last pass that measured one (0:
	 * none yet, or telemetry off): what a new connection is told of its
	 * network (mrp_conn_params.plane_rtt_hint_ns, SPEC 6.4). */
	uint64_t plane_rtt_ns[MRD_MAX_PLANES];
	/* Lookups a CONNECT makes, each a keyed hash (hkey), so that their
	 * cost does not grow with what peers opened (SPEC 14.4): peers by
	 * handshake address and port, acceptor connections by the initiator's
	 * connection id and address, and each peer IP address's share of the
	 * engine memory and of the accepted connections. */
	uint8_t hkey[16];
	mrd_peer **pbuckets;     /* 1,024 (peers: at most 4,096) */
	mrd_conn **abuckets;     /* 8,192 (connections: at most 65,536) */
	mrd_addrmem **ipbuckets; /* 1,024 */
	mrd_peer_hooks hooks;
	struct {
		mrd_service_fn fn;
		void *ud;
	} services[MRD_SERVICES_MAX];
	unsigned nservices;
} mrd_peers;

int mrd_peers_init(mrd *d);

/* Set after mrd_peers_init(), before anything connects. */
void mrd_peers_set_hooks(mrd *d, const mrd_peer_hooks *hooks);
/* Returns 0, or -1 when the registry is full. */
int mrd_peers_add_service(mrd *d, mrd_service_fn fn, void *ud);
void mrd_peers_free(mrd *d);

/* How long a handshake may last: the initiator sends its CONNECT 10 times,
 * 1, 2, 4 ... 512 ms apart (SPEC 9.3), then gives up. */
#define MRD_HS_TIMEOUT_NS 1023000000ull

/* The engine's initial retransmission timeout (mrp_conn_params.rto_init_ns)
 * for a connection whose handshake took hs_rtt_ns: timers.rto_initial
 * (rto_initial_ns), or three handshake round trips where that is longer
 * (the first window of a new connection on a network further away than
 * the configuration assumed, 4-10 ms between data centres, would
 * otherwise time out before its first ACK could come back), at most
 * timers.rto_max (rto_max_ns). A sample of 0 (none) or longer than a
 * handshake may last is ignored. */
uint64_t mrd_rto_initial(uint64_t rto_initial_ns, uint64_t rto_max_ns, uint64_t hs_rtt_ns);

/* One datagram from the datapath, read at now (uv_hrtime()). */
void mrd_peer_input(mrd *d, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
		    const uint8_t *data, size_t len, int ce, uint64_t now);

/* Service dirty connections, flush the send queue, re-arm the timer. */
void mrd_peer_run(mrd *d);

/* The timerfd fired. */
void mrd_peer_on_timer(mrd_timer *t);

/* Open a connection to the daemon at `to` (address and service port) for
 * service_id. ops and ud are the caller's. Returns 0 and *pc (in
 * CONNECTING: the outcome comes through ops), or -1 with err filled. */
int mrd_conn_connect(mrd *d, const mrd_sockaddr *to, socklen_t tolen,
		     uint32_t service_id, const mrd_conn_ops *ops, void *ud,
		     mrd_conn **pc, char *err, size_t errlen);

/* What an initiator may ask beyond the configuration; 0 = its value. */
typedef struct mrd_conn_opts {
	uint16_t max_streams;   /* offered in the CONNECT (the peer may take fewer) */
	uint16_t initial_paths; /* paths this end opens per plane pair, at most
				 * paths.max_per_plane (the acceptor opens what
				 * its own configuration says) */
	uint32_t planes_mask;   /* bit i: our plane i may carry paths; the CONNECT
				 * advertises only those planes' addresses, so
				 * the acceptor pairs only them */
} mrd_conn_opts;

/* mrd_conn_connect() with options (opts may be NULL). */
int mrd_conn_connect_opts(mrd *d, const mrd_sockaddr *to, socklen_t tolen,
			  uint32_t service_id, const mrd_conn_ops *ops, void *ud,
			  const mrd_conn_opts *opts, mrd_conn **pc, char *err,
			  size_t errlen);

/* The engine of a connection is peer.c's: the other modules reach it only
 * through these calls (each the mrp_conn_* call of the same name, on the
 * connection's engine). mrd_conn_has_engine(): whether it exists yet (and
 * still: it goes when the connection is freed). */
int mrd_conn_has_engine(const mrd_conn *c);
int mrd_conn_post_send(mrd_conn *c, const mrp_wr *wr, uint64_t now_ns);
int mrd_conn_post_recv(mrd_conn *c, uint16_t stream, uint64_t wr_id, uint8_t *buf,
		       uint32_t len, uint64_t now_ns);
int mrd_conn_plane_event(mrd_conn *c, unsigned plane, int event, uint64_t now_ns);
int mrd_conn_path_disable(mrd_conn *c, uint16_t path_id, uint64_t now_ns);
int mrd_conn_path_enable(mrd_conn *c, uint16_t path_id, uint64_t now_ns);
int mrd_conn_path_probe(mrd_conn *c, uint16_t path_id, uint64_t now_ns);
int mrd_conn_path_steer(mrd_conn *c, uint16_t path_id, uint16_t sport, int plane,
			uint64_t now_ns);
int mrd_conn_path_info(const mrd_conn *c, unsigned i, mrp_path_info *out);
void mrd_conn_get_stats(const mrd_conn *c, mrp_conn_stats *out);

/* Work was posted: service the connection at the next mrd_peer_run(). */
void mrd_conn_touch(mrd_conn *c);

/* Graceful close (CLOSE) or abort (RESET). An attempt still CONNECTING
 * ends at once. ops->ended follows. */
void mrd_conn_close(mrd_conn *c, int abort);
/* The same with the reason its CLOSE or RESET carries (MRP_CLOSE_*, SPEC
 * 11.4); mrd_conn_close() says SHUTDOWN while the daemon stops, else NORMAL. */
void mrd_conn_close_reason(mrd_conn *c, int abort, uint16_t reason);

/* Detach the service: no more callbacks (the service is going away). */
void mrd_conn_detach(mrd_conn *c);

mrd_conn *mrd_conn_find(mrd *d, uint32_t local_id);

/* SIGTERM: close every connection gracefully. */
void mrd_peers_close_all(mrd *d);

/* A plane changed state (planes.c): give every connection with a path pair
 * on our plane `plane` the engine event (MRP_PLANE_DOWN, MRP_PLANE_UP, ...)
 * and run them. */
void mrd_peers_plane_event(mrd *d, unsigned plane, int event);

/* Connections not yet ENDED. */
uint32_t mrd_peers_live(const mrd *d);

#endif
