/*
 * metaroce-sim core: a deterministic, discrete-event network simulator.
 *
 * The world is hosts, planes, switches and links. Every host has one NIC port
 * per plane; each plane is its own network: one switch, or a two-tier
 * leaf-spine fabric whose leaves hash the UDP 5-tuple onto a spine (ECMP).
 * Links are unidirectional output queues (a cable is two of them) with a
 * rate, a propagation delay, a drop-tail capacity, an ECN marking threshold,
 * random loss and a state (up, down, black hole).
 *
 * A *transport* (the RoCEv2 baseline in roce.c, the MetaRoCE engine in
 * mrp_host.c) runs on every host behind sim_transport_ops: the core hands it
 * packets, timer expiries, link changes and flows to send; it answers with
 * sim_send(), sim_set_deadline() and sim_flow_done(). After every event that
 * touched a host the core calls the transport's check hook on that host and
 * counts violations. At the end sim_verify() compares every flow's
 * destination buffer with its source buffer.
 *
 * Determinism: time is simulated (now_ns starts at 0), the event queue breaks
 * ties by insertion order, and every random draw comes from a stream seeded
 * from the scenario seed (per link for loss, per host for transports, per
 * flow for data patterns). The core never reads a clock; a run is a pure
 * function of (configuration, seed, transport).
 *
 * Errors are the engine's codes (proto/error.h): 0 or positive on success,
 * a negative MRP_ERR_* on failure. Times are ns and UINT64_MAX (SIM_NEVER)
 * means never; sizes are bytes; rates are bit/s.
 */
#ifndef SIM_H
#define SIM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "rng.h"

#define SIM_NEVER UINT64_MAX

#define SIM_MAX_PLANES 16
#define SIM_MAX_HOSTS 65535
#define SIM_MAX_SPINES 4096
/* Largest packet data buffer (a MetaRoCE data packet: 72-byte header plus a
 * 9000-byte payload fits). */
#define SIM_PKT_MAX 9216
/* Packets come from three pools by the data room they ask for: at most
 * SIM_PKT_SMALL (control packets), at most SIM_PKT_MID (a data packet of a
 * 4 KB MTU and its header), at most SIM_PKT_MAX. A packet in flight costs
 * its pool's size, so a 4 KB-MTU packet does not hold 9 KB. */
#define SIM_PKT_SMALL 512
#define SIM_PKT_MID 4352
#define SIM_PKT_POOLS 3
/* Wire bytes around the UDP payload: preamble 8 + Ethernet 14 + IPv4 20 +
 * UDP 8 + FCS 4 + inter-frame gap 12. sim_send() adds it when len is 0. */
#define SIM_WIRE_OVERHEAD 66
#define SIM_PROTO_UDP 17

/* The two ECN bits of the IP header. */
enum {
	SIM_ECN_NOT_ECT = 0,
	SIM_ECN_ECT1 = 1,
	SIM_ECN_ECT0 = 2,
	SIM_ECN_CE = 3,
};

typedef struct sim sim;
typedef struct sim_host sim_host;
typedef struct sim_link sim_link;
typedef struct sim_switch sim_switch;
typedef struct sim_pkt sim_pkt;
typedef struct sim_flow sim_flow;
typedef struct sim_config sim_config;

/* ---------------------------------------------------------------- packets */

/*
 * A packet. The transport owns it from sim_pkt_new() until it hands it to
 * sim_send() (which always takes it, also on error) or sim_pkt_free(); the
 * core hands received packets to on_packet(), which owns them from then on.
 * Fields marked "core" belong to the simulator.
 */
struct sim_pkt {
	sim_pkt *next;     /* core: queue / free-list link */
	sim_link *link;    /* core: the link it is crossing */
	uint32_t src_addr; /* set by sim_send() to the sending port's address */
	uint32_t dst_addr;
	uint16_t src_port; /* the ECMP entropy */
	uint16_t dst_port;
	uint8_t ecn;       /* SIM_ECN_*; switches turn ECT into CE above threshold */
	uint8_t plane;     /* set by sim_send() */
	uint8_t pool;      /* core: which pool it came from */
	uint8_t prio;      /* SIM_PRIO_*: its traffic class (0 unless set) */
	uint32_t len;      /* bytes on the wire (serialization); 0 in sim_send()
			    * means datalen + SIM_WIRE_OVERHEAD */
	uint32_t datalen;  /* bytes of data in use */
	uint32_t cap;      /* size of data */
	uint8_t *data;     /* the UDP payload, owned by the packet */
	uint64_t sent_ns;  /* set by sim_send() */
	sim_link *ingress; /* core, PFC: the link it entered the switch by */
};

/*
 * Traffic classes. SIM_PRIO_DATA is the class every packet is in unless the
 * transport says otherwise: the lossless class of PFC runs, the one pause
 * frames stop. SIM_PRIO_CTRL is a second class served first (strict
 * priority) with its own queue of queue_bytes, never paused and never
 * lossless (drop-tail): where operators put RoCEv2's CNPs. Only roce-pfc
 * uses it, for its CNPs.
 */
enum { SIM_PRIO_DATA, SIM_PRIO_CTRL };

/* A packet whose data buffer holds at least cap bytes (cap <= SIM_PKT_MAX),
 * all header fields zero; NULL if cap is too large or memory ran out.
 * Packets come from free lists: no allocation per packet in steady state. */
sim_pkt *sim_pkt_new(sim *s, size_t cap);
void sim_pkt_free(sim *s, sim_pkt *p);

/* ------------------------------------------------------------ links, nodes */

enum { SIM_NODE_HOST, SIM_NODE_SWITCH, SIM_NODE_LEAF, SIM_NODE_SPINE };

typedef struct sim_node {
	uint8_t kind; /* SIM_NODE_* */
	uint32_t index;
} sim_node;

enum { SIM_LINK_UP, SIM_LINK_DOWN, SIM_LINK_BLACKHOLE };

/* Why a link dropped a packet. SIM_DROP_NOROUTE is a switch's, not a link's. */
enum {
	SIM_DROP_OVERFLOW,  /* queue full (drop-tail) */
	SIM_DROP_LOSS,      /* random loss on the wire */
	SIM_DROP_DOWN,      /* link down (queued, in flight or offered) */
	SIM_DROP_BLACKHOLE, /* silently dropped by a black-holed port */
	SIM_DROP_NOROUTE,   /* no usable next hop */
	SIM_DROP_N,
};

/* Names for reports: "overflow", "loss", "down", "blackhole", "noroute". */
const char *sim_drop_name(unsigned cause);

/*
 * One direction of a cable: an output queue and the wire after it. A packet
 * offered to the link is dropped if the link is down or black-holed, or if
 * qbytes + len > queue_bytes; otherwise it is marked CE if qbytes (before it)
 * > ecn_bytes and it is ECT, and queued. The head is serialized in
 * len * 8 / rate_bps (exact over time: the remainder carries over), then lost
 * with probability loss, else it arrives delay_ns later. qbytes counts every
 * byte in the port, including the packet being serialized.
 */
struct sim_link {
	uint32_t id;
	uint8_t plane;
	uint8_t state; /* SIM_LINK_* */
	sim_node from, to;
	sim_link *peer; /* the other direction of the cable */

	/* parameters: may be changed between events (tests do, and the
	 * scenario event set_link) */
	uint64_t rate_bps;
	uint64_t delay_ns;
	uint64_t queue_bytes;
	uint64_t ecn_bytes; /* SIM_NEVER: never mark */
	double loss;
	double loss_burst;  /* > 1: Gilbert-Elliott loss, mean burst (full-size packet times) */
	uint64_t jitter_ns; /* extra delay per packet, uniform in [0, jitter] */

	/* core state */
	sim_pkt *head, *tail;       /* SIM_PRIO_DATA packets */
	sim_pkt *hi_head, *hi_tail; /* SIM_PRIO_CTRL packets, served first */
	sim_pkt *txp;               /* the packet being serialized */
	uint64_t qbytes;            /* both classes */
	uint64_t hi_qbytes;         /* SIM_PRIO_CTRL only */
	uint64_t ser_rem; /* serialization remainder carried between packets */
	uint64_t loss_thresh;
	uint32_t epoch;   /* bumped when the link goes down: stale events die */
	int busy;
	sim_rng rng;      /* loss draws: one stream per link */
	void *to_obj;     /* sim_host or sim_switch at the far end */

	/* link model state */
	uint8_t ge_bad;          /* Gilbert-Elliott chain in its bad state */
	uint8_t ge_started;      /* its timeline is drawn up to ge_until */
	uint64_t ge_until;       /* the current period ends then (wire_lost()) */
	sim_rng ge_rng;          /* the timeline's own stream */
	uint64_t last_arrive_ns; /* a later packet never arrives before this */
	uint64_t win_max_qbytes; /* largest queue since the last time-series sample */
	uint64_t ts_tx_bytes;    /* tx_bytes at the last time-series sample */

	/* host NIC backpressure (sim_port_notify()): on_nic() when qbytes
	 * falls to at most this; SIM_NEVER = nobody asked */
	uint64_t notify_bytes;

	/* statistics */
	uint64_t max_qbytes;
	uint64_t tx_bytes, tx_pkts; /* left the queue (includes wire losses) */
	uint64_t ce_marks;
	uint64_t drops[SIM_DROP_N];

	/* PFC (lossless runs; see "pfc" in sim_config). This link is an
	 * ingress of the switch it leads to: ingress_bytes are its packets
	 * waiting in that switch's output queues; above xoff the switch pauses
	 * this link's sender, at or below xon it resumes it. */
	uint64_t pfc_ingress_bytes, pfc_max_ingress;
	uint64_t pfc_headroom;       /* bytes allowed above xoff */
	int pfc_xoff_sent;           /* the switch has paused this link */
	int pfc_paused;              /* this link's sender is paused: no new frame starts */
	uint64_t pfc_paused_since;
	uint64_t pfc_pauses, pfc_resumes; /* pause (XOFF) and resume (XON) frames about it */
	uint64_t pfc_paused_ns;      /* time its sender spent paused */
	uint64_t pfc_paused_tx;      /* SIM_PRIO_CTRL frames it started while paused */
};

/* "p0:host3->leaf0"; returns buf. */
char *sim_link_name(const sim_link *l, char *buf, size_t buflen);

/* --------------------------------------------------------------- transports */

enum { SIM_OP_WRITE, SIM_OP_WRITE_IMM, SIM_OP_SEND, SIM_OP_N };
const char *sim_op_name(unsigned op); /* "write", "write_imm", "send" */

/*
 * A flow: bytes to move from src_buf on host src into dst_buf on host dst,
 * starting at start_ns. src_buf holds a pseudo-random pattern derived from
 * (seed, id); dst_buf starts zeroed. The transport sets tx_ctx / rx_ctx as
 * it likes, counts retransmissions, and calls sim_flow_done() once.
 */
struct sim_flow {
	uint32_t id, src, dst;
	uint64_t bytes;
	uint64_t start_ns;
	uint8_t op;      /* SIM_OP_* */
	int8_t plane;    /* plane the flow asks for, -1 = the transport chooses */
	uint32_t stream;
	uint8_t *src_buf, *dst_buf;

	void *tx_ctx, *rx_ctx; /* the transport's (sender side, receiver side) */

	/* results, written by the transport */
	uint64_t rx_bytes;      /* payload bytes of the flow's data packets that
				 * reached the receiver's transport so far
				 * (duplicates included): the time series' rate */
	uint64_t retx_pkts;     /* packets sent again */
	uint64_t spurious_pkts; /* retransmissions the receiver already had */

	/* results, written by the core */
	int done;
	int status;         /* sim_flow_done()'s status: 0 ok, < 0 failed */
	uint64_t finish_ns; /* SIM_NEVER until done */
	int verified;       /* after sim_verify(): dst_buf == src_buf */

	/* Collectives (collective.c): a step of collective coll. A flow with
	 * dependencies starts when the last of deps[] is satisfied (start_ns
	 * is then set to that time); if one fails first, it fails too. A
	 * dependency of kind SIM_DEP_RECEIVED is satisfied when that flow's
	 * data has arrived at its receiver (arrived_ns), one of kind
	 * SIM_DEP_SENT when that flow is complete at its sender (finish_ns). */
	int32_t coll;      /* index in cfg->colls, -1 = a plain flow */
	uint32_t step;     /* the step of the collective */
	uint32_t rank;     /* the sending rank's index */
	uint32_t channel;  /* the collective's channel */
	uint32_t ndeps;    /* 0-2 */
	uint32_t deps[2];  /* flow ids this one waits for */
	uint8_t dep_kind[2]; /* SIM_DEP_* of each */
	uint32_t waiting;  /* core: deps not yet complete */
	int64_t conn_prev; /* the previous flow between the same two ranks on the
			    * same channel (ring: the previous step), -1 if none:
			    * a transport may carry its connection state over */
	int unchecked;     /* core: shared buffers, memory not verified */
	uint64_t arrived_ns; /* core: when the receiver had every byte
			      * (sim_flow_arrived(), at the latest the flow's
			      * successful finish); SIM_NEVER until then */
};

/* What a collective step waits for in a flow of the previous step: that its
 * data has arrived at its receiver (what the step forwards or reduces), or
 * that it is complete at its sender (the send buffer is free again). */
enum { SIM_DEP_SENT, SIM_DEP_RECEIVED };

/* An operator's steering command (scenario event "steer"). */
enum { SIM_STEER_REROUTE, SIM_STEER_DRAIN, SIM_STEER_RESTORE, SIM_STEER_N };
const char *sim_steer_name(unsigned action); /* "reroute", "drain", "restore" */

typedef struct sim_steer {
	unsigned action; /* SIM_STEER_*: reroute = move to new ECMP routes (new
			  * source ports); drain = stop using plane; restore =
			  * use plane again */
	int plane;       /* -1 = every plane */
	int64_t flow;    /* -1 = every flow of the host */
} sim_steer;

/*
 * What a transport implements. Every callback gets the per-host state that
 * host_new() returned. Optional ones may be NULL.
 */
typedef struct sim_transport_ops {
	const char *name;             /* "roce", "metaroce" */
	const char *const *options;   /* keys accepted under transport.<name> in
				       * a scenario, NULL-terminated; NULL = any */
	/* Per-host state, or NULL after sim_set_error() to fail sim_new(). */
	void *(*host_new)(sim *s, sim_host *h);
	void (*host_del)(void *hs);
	/* Optional. Receiver side of a flow, called on host dst just before
	 * flow_start() on host src (both at start_ns). < 0 fails the flow. */
	int (*flow_accept)(void *hs, sim_flow *f, uint64_t now_ns);
	/* Sender side: start moving f. < 0 fails the flow. */
	int (*flow_start)(void *hs, sim_flow *f, uint64_t now_ns);
	/* A packet arrived on the host's port of that plane; takes ownership. */
	void (*on_packet)(void *hs, unsigned plane, sim_pkt *p, uint64_t now_ns);
	/* The host's deadline (sim_set_deadline()) passed; it is cleared first. */
	void (*on_timer)(void *hs, uint64_t now_ns);
	/* Optional. The host's port on plane went down / came up (like a
	 * netlink link event: at once). A black hole is never reported. */
	void (*on_link)(void *hs, unsigned plane, int up, uint64_t now_ns);
	/* Optional. An operator steering command for this host. */
	void (*on_steer)(void *hs, const sim_steer *st, uint64_t now_ns);
	/* Optional. Invariants of this host's state: 0 if they hold, otherwise
	 * non-zero with a sentence in err. Must not change anything. */
	int (*check)(void *hs, char *err, size_t errlen);
	/* Optional. The host's NIC queue on plane drained to the level asked
	 * for with sim_port_notify() (once per request). */
	void (*on_nic)(void *hs, unsigned plane, uint64_t now_ns);
	/* The transport needs a lossless network: the switches run PFC
	 * (cfg->pfc) in its runs. */
	int lossless;
} sim_transport_ops;

/* ------------------------------------------------------------------- hosts */

struct sim_host {
	uint32_t id;
	void *ts; /* the transport's state (host_new()'s result) */
	sim *s;
	sim_link *nic[SIM_MAX_PLANES]; /* host -> switch, per plane */
	sim_link *in[SIM_MAX_PLANES];  /* switch -> host, per plane */
	uint64_t deadline;             /* the transport's, SIM_NEVER = none */
	uint64_t armed;                /* core: earliest pending timer event */
	sim_rng rng;                   /* sim_rand()'s stream */
};

/* ------------------------------------------------ calls for a transport */

/*
 * Sends p from host h's port on plane: sets p->src_addr, p->plane,
 * p->sent_ns, and p->len if 0, then offers it to the port's output queue.
 * Always takes ownership of p. Returns 0 when queued, MRP_ERR_STATE if the
 * port is down, MRP_ERR_FULL if the NIC queue overflowed, MRP_ERR_INVAL for a
 * bad plane (the packet is dropped and counted in each case).
 *
 * A host's NIC is a queue with backpressure: a transport sends only what
 * fits (sim_port_room()) and, when it is full, asks to be told when it has
 * drained (sim_port_notify(), on_nic()). A packet the host's own NIC drops
 * for overflow is a transport defect: it is counted in sim_stats.nic_drops
 * (the roce and metaroce transports keep it at 0; tests assert it).
 */
int sim_send(sim *s, sim_host *h, unsigned plane, sim_pkt *p);

/* The one deadline of host h (absolute ns; SIM_NEVER = none). Replaces the
 * previous one. on_timer() runs at max(at_ns, now). */
void sim_set_deadline(sim *s, sim_host *h, uint64_t at_ns);

/* The flow is complete from the application's point of view (for the
 * sender: every byte acknowledged). status 0 = success, < 0 = failed. A
 * second call for the same flow is counted as an invariant violation. */
void sim_flow_done(sim *s, sim_flow *f, uint64_t now_ns, int status);

/* The receiver's application has every byte of the flow: a receive
 * completion (SEND, WRITE_IMM) covering its last byte. A plain WRITE gives
 * its receiver no completion, so transports do not call this for op write;
 * sim_flow_done() with status 0 implies it. Later calls do nothing.
 * Collective steps that forward what a flow brought start now. */
void sim_flow_arrived(sim *s, sim_flow *f, uint64_t now_ns);

/* Reports an invariant violation noticed by the transport itself. */
void sim_violation(sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The next 64 bits of host h's random stream (seeded from the scenario seed
 * and the host id: the same for every transport). */
uint64_t sim_rand(sim *s, sim_host *h);

/* Address of host h's port on plane: 10.<plane>.<id/256>.<id%256>. */
uint32_t sim_host_addr(const sim *s, const sim_host *h, unsigned plane);
/* The host owning addr (its plane in *plane if not NULL), or NULL. */
sim_host *sim_addr_host(const sim *s, uint32_t addr, unsigned *plane);

/* The host's port on plane: up (not down; a black hole looks up), its rate,
 * and the bytes waiting in its output queue. */
int sim_port_up(const sim *s, const sim_host *h, unsigned plane);
uint64_t sim_port_rate_bps(const sim *s, const sim_host *h, unsigned plane);
uint64_t sim_port_queue_bytes(const sim *s, const sim_host *h, unsigned plane);
/* Bytes the port's output queue can still take (queue capacity - queued);
 * 0 for a bad plane. */
uint64_t sim_port_room(const sim *s, const sim_host *h, unsigned plane);
/* Asks for one on_nic(plane) call the first time the port's queue holds at
 * most bytes after a packet leaves it (replacing an earlier request on that
 * port). Returns 0 when armed, 1 if the queue already holds at most bytes
 * (nothing is armed: there is room now), MRP_ERR_INVAL for a bad plane. A
 * port going down cancels the request (on_link() reports it instead). */
int sim_port_notify(sim *s, sim_host *h, unsigned plane, uint64_t bytes);

/* Transport options of the scenario (section transport.<ops->name>): the
 * value of key as written, or NULL. The typed getters store def when the
 * key is absent and return 0, or return MRP_ERR_INVAL after sim_set_error()
 * with "file:line: transport.roce.rto: 'x' is not a time (e.g. 10us)". */
const char *sim_opt_get(const sim *s, const char *key);
int sim_opt_u64(sim *s, const char *key, uint64_t def, uint64_t *out);
int sim_opt_time(sim *s, const char *key, uint64_t def, uint64_t *out);
int sim_opt_bytes(sim *s, const char *key, uint64_t def, uint64_t *out);
int sim_opt_rate(sim *s, const char *key, uint64_t def, uint64_t *out);
int sim_opt_double(sim *s, const char *key, double def, double *out);

/* Sets the message sim_new() reports when host_new() returns NULL. */
void sim_set_error(sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ access */

uint64_t sim_now(const sim *s);
uint64_t sim_seed(const sim *s);
uint32_t sim_mtu(const sim *s);
unsigned sim_planes(const sim *s);
uint32_t sim_hosts(const sim *s);
sim_host *sim_host_get(const sim *s, uint32_t id);
size_t sim_flow_count(const sim *s);
sim_flow *sim_flow_get(const sim *s, size_t id); /* NULL if out of range */
size_t sim_link_count(const sim *s);
sim_link *sim_link_get(const sim *s, size_t i);
/* The longest round trip between two hosts on the idle network as built
 * (cable delays only), at least 1 ns: what a transport's defaults for its
 * timers and window take the distance to be. */
uint64_t sim_base_rtt_max(sim *s);
/* A transport's default retransmission timeout before its first RTT
 * sample: 1 ms (a data centre), or 3 of sim_base_rtt_max()'s round trips
 * when that is longer (as a deployment sets its timers for its distance). */
uint64_t sim_rto_default(sim *s);
/* The link named name (sim_link_name()), or NULL. */
sim_link *sim_link_find(const sim *s, const char *name);

/* The time series recorded so far (NULL when the scenario has none):
 * sample i covers [i, i + 1) * interval_ns; link k's largest queue in it is
 * link_maxq[k * cap + i] and its bytes sent link_tx[k * cap + i] (k is the
 * index of sim_link_get()); flow f's (f < nflows) bytes arrived is
 * flow_bytes[f * cap + i]. */
typedef struct sim_ts {
	uint64_t interval_ns; /* doubles each time the samples fill cap */
	size_t nsamples, cap;
	size_t nlinks, nflows;
	uint64_t *link_maxq, *link_tx, *flow_bytes;
} sim_ts;
const sim_ts *sim_get_ts(const sim *s);
const sim_transport_ops *sim_transport(const sim *s);
const sim_config *sim_get_config(const sim *s);

/* A switch of plane: kind SIM_NODE_SWITCH (index 0), _LEAF or _SPINE. */
sim_switch *sim_switch_get(const sim *s, unsigned plane, unsigned kind, uint32_t index);
uint64_t sim_switch_salt(const sim_switch *sw);
/* The output link of a switch port, NULL if there is no such port. */
sim_link *sim_switch_port(const sim_switch *sw, uint32_t port);

/*
 * ECMP: the 64-bit hash of a UDP 5-tuple under a switch's salt. A leaf sends
 * a packet for another leaf to spine hash % (usable spines).
 */
uint64_t sim_ecmp_hash(uint32_t src_addr, uint32_t dst_addr, uint16_t src_port,
		       uint16_t dst_port, uint64_t salt);

/* -------------------------------------------------------------- the world */

/*
 * Builds the world of cfg for the transport ops: switches, links, hosts
 * (host_new() on each), flows (patterns expanded, buffers filled) and the
 * scheduled flow starts and scenario events. The simulator keeps its own
 * deep copy of cfg (sim_config_copy()): the caller still owns cfg and may
 * change, move or free it as soon as sim_new() returns; sim_get_config()
 * returns the copy, which lives until sim_del(). ops is not copied: it must
 * outlive the simulator (the transports' ops are static constants).
 * Returns 0, or a negative code with a message in err
 * ("scenario.yaml:12: events[0].port: 9 is out of range ...").
 */
int sim_new(const sim_config *cfg, const sim_transport_ops *ops, sim **ps, char *err,
	    size_t errlen);
void sim_del(sim *s);

/* Why sim_run() returned. */
enum {
	SIM_RUN_DONE = 0,  /* every flow is done */
	SIM_RUN_IDLE = 1,  /* nothing left to happen (flows may be unfinished) */
	SIM_RUN_LIMIT = 2, /* reached until_ns or the scenario's duration */
};

/*
 * Processes events in order until every flow is done (if there are flows),
 * the queue is empty, or the next event is later than until_ns or the
 * scenario duration; then now is the last event's time. Returns SIM_RUN_* or
 * a negative code (MRP_ERR_NOMEM).
 */
int sim_run(sim *s, uint64_t until_ns);

/* Processes exactly one event. Returns 1, 0 if the queue was empty, or < 0. */
int sim_step(sim *s);

/* Compares every finished flow's dst_buf with its src_buf, sets verified,
 * and returns the number of finished flows whose memory differs. */
size_t sim_verify(sim *s);

typedef struct sim_stats {
	uint64_t events;          /* events processed */
	uint64_t checks;          /* check hook calls */
	uint64_t violations;      /* invariant violations */
	uint64_t noroute;         /* SIM_DROP_NOROUTE drops */
	uint64_t flows_done;
	uint64_t verify_failures; /* set by sim_verify() */
	uint64_t pkts_live;       /* packets allocated and not freed */
	uint64_t nic_drops;       /* packets a host's own NIC dropped because its
				   * queue was full (sim_send() said MRP_ERR_FULL) */
	unsigned nmsgs;           /* first violation messages kept */
	char msgs[8][160];
} sim_stats;

const sim_stats *sim_get_stats(const sim *s);

/* -------------------------------------------------------- configuration */

enum { SIM_FABRIC_SINGLE, SIM_FABRIC_LEAFSPINE };

typedef struct sim_link_params {
	uint64_t rate_bps;
	uint64_t delay_ns;
	uint64_t queue_bytes;
	uint64_t ecn_bytes; /* SIM_NEVER: never mark */
	double loss;        /* average loss probability per packet */
	double loss_burst;  /* mean length of a loss burst, in full-size packet
			     * times at the link's rate: <= 1 independent
			     * losses, > 1 Gilbert-Elliott (in time) */
	uint64_t jitter_ns; /* per-packet extra delay, uniform in [0, jitter];
			     * never reorders a link's packets */
} sim_link_params;

/* Which fields of a sim_link_params an override sets. */
enum {
	SIM_LP_RATE = 1,
	SIM_LP_DELAY = 2,
	SIM_LP_QUEUE = 4,
	SIM_LP_ECN = 8,
	SIM_LP_LOSS = 16,
	SIM_LP_BURST = 32,
	SIM_LP_JITTER = 64,
};

typedef struct sim_plane_config {
	unsigned fabric;         /* SIM_FABRIC_* */
	uint32_t leaves, spines; /* leaf-spine only */
	uint32_t hosts_per_leaf; /* 0 = ceil(hosts / leaves) */
	sim_link_params host_link;   /* host <-> switch/leaf cables */
	sim_link_params fabric_link; /* leaf <-> spine cables */
} sim_plane_config;

/*
 * A place in the topology: a host's cable (node.kind == SIM_NODE_HOST), or a
 * switch port given by number (port >= 0) or by the node it faces (port < 0,
 * peer). Resolved against the topology by sim_new() / sim_config_check().
 */
typedef struct sim_port_ref {
	sim_node node;
	int64_t port;
	sim_node peer;
} sim_port_ref;

/* Per-cable override of link parameters (both directions of the cable). */
typedef struct sim_cable_config {
	int plane; /* -1 = every plane */
	sim_port_ref at;
	unsigned mask; /* SIM_LP_* */
	sim_link_params v;
	int line;
} sim_cable_config;

enum { SIM_PAT_NONE, SIM_PAT_INCAST, SIM_PAT_PERMUTATION, SIM_PAT_ALL_TO_ALL };

/* An explicit flow (pattern SIM_PAT_NONE) or a generated pattern. */
typedef struct sim_flow_config {
	unsigned pattern;
	uint32_t src, dst;  /* explicit; incast: dst is the receiver */
	uint32_t senders;   /* incast: how many, 0 = every other host */
	uint64_t bytes;
	uint64_t start_ns;
	unsigned op;
	uint32_t stream;
	int plane; /* -1 = transport's choice */
	int line;
} sim_flow_config;

enum {
	SIM_EVT_LINK_DOWN,
	SIM_EVT_LINK_UP,
	SIM_EVT_PLANE_DOWN,
	SIM_EVT_PLANE_UP,
	SIM_EVT_BLACKHOLE,
	SIM_EVT_STEER,
	SIM_EVT_SET_LINK, /* change a link's parameters (mask, v) */
	SIM_EVT_N,
};

/* Which direction of a cable an event acts on: both, the one leaving the
 * named node (host: its NIC's output; switch port: that port's output), or
 * the one arriving at it. */
enum { SIM_DIR_BOTH, SIM_DIR_OUT, SIM_DIR_IN, SIM_DIR_N };
const char *sim_event_name(unsigned type); /* "link_down", ... */

typedef struct sim_event_config {
	uint64_t at_ns;
	unsigned type; /* SIM_EVT_* */
	int plane;     /* -1 = not given */
	sim_port_ref where; /* link_*, blackhole */
	int has_where;
	int64_t host;  /* steer; -1 = not given */
	int64_t flow;  /* steer; -1 = every flow */
	unsigned action; /* steer: SIM_STEER_* */
	unsigned dir;    /* link_*, blackhole, set_link: SIM_DIR_* */
	unsigned mask;   /* set_link: SIM_LP_* it changes ... */
	sim_link_params v; /* ... to these values */
	int line;
} sim_event_config;

/* Time series (scenario key timeseries; interval_ns 0 = off). Every
 * interval the core samples every link (largest queue in the interval,
 * bytes sent) and the first max_flows flows (sim_flow.rx_bytes); after
 * max_samples samples the interval doubles and neighbouring samples merge,
 * so memory and output stay bounded. The report keeps the top_links links
 * with the largest queue over the run and the links named in links[]. */
typedef struct sim_ts_config {
	uint64_t interval_ns;
	uint32_t max_samples;  /* default 1000 */
	uint32_t top_links;    /* default 8 */
	uint32_t max_flows;    /* default 64 */
	char **links;          /* link names ("p0:leaf0->spine1") always kept */
	size_t nlinks;
	int line;
} sim_ts_config;

typedef struct sim_opt {
	char *transport, *key, *value;
	int line;
} sim_opt;

/*
 * A collective over ranks (collective.c, the scenario's collectives:
 * section). size is per rank, as nccl-tests counts it: all-reduce, the
 * buffer every rank reduces; all-gather, the gathered output; all-to-all,
 * what every rank sends in all. Ring all-reduce runs 2(n-1) steps of
 * ceil(size/n) bytes, recursive doubling log2(n) steps of size bytes,
 * pairwise all-to-all and ring all-gather n-1 steps of ceil(size/n) bytes.
 */
enum {
	SIM_COLL_ALLREDUCE_RING,
	SIM_COLL_ALLREDUCE_RD,
	SIM_COLL_ALLTOALL,
	SIM_COLL_ALLGATHER,
	SIM_COLL_N,
};
/* "allreduce_ring", "allreduce_rd", "alltoall", "allgather" */
const char *sim_coll_name(unsigned type);

typedef struct sim_coll_config {
	unsigned type;       /* SIM_COLL_* */
	uint32_t *ranks;     /* the host of each rank; NULL = hosts 0 .. nranks-1 */
	uint32_t nranks;     /* 0 = every host */
	uint64_t *sizes;     /* one run per size */
	size_t nsizes;
	uint64_t start_ns;
	unsigned op;
	uint32_t stream;
	int plane;           /* -1 = transport's choice */
	uint32_t channels;   /* parallel rings / exchanges, each 1/channels of every step */
	uint64_t verify_max; /* above this many buffer bytes: shared buffers, unverified */
	int line;
} sim_coll_config;

/* Everything a run needs; what a scenario file says. The arrays and
 * strings belong to the sim_config (sim_config_free() frees them;
 * sim_config_copy() duplicates them). */
struct sim_config {
	char *name; /* file name for messages */
	uint64_t seed;
	uint64_t duration_ns; /* simulated time limit */
	uint32_t mtu;         /* payload bytes per packet */
	uint32_t hosts;
	unsigned planes;
	sim_plane_config plane[SIM_MAX_PLANES];
	sim_cable_config *cables;
	size_t ncables;
	sim_flow_config *flows;
	size_t nflows;
	sim_event_config *events;
	size_t nevents;
	sim_opt *opts;
	size_t nopts;
	uint64_t max_buffer_bytes; /* limit of 2 x total flow bytes */
	sim_ts_config ts;          /* time series */
	/* lines of top-level keys, for messages (0 = not given) */
	int hosts_line, planes_line, fabric_line;

	/* PFC of lossless runs: per switch ingress, pause the upstream sender
	 * above xoff bytes, resume at or below xon; headroom (0 = computed per
	 * link: two wire delays at line rate plus three frames) is what may
	 * still arrive after xoff before the switch drops */
	uint64_t pfc_xoff, pfc_xon, pfc_headroom;
	int pfc_line;

	/* collectives: sim_new() expands entry coll_entry (-1 = every entry)
	 * at size index coll_size (clamped to each entry's list) */
	sim_coll_config *colls;
	size_t ncolls;
	int coll_entry;
	size_t coll_size;
};

/* Defaults: seed 1, duration 1s, mtu 4096, 2 hosts, 1 plane, single
 * switch, links 100Gbps / 1us / 1MB queue / ECN above 100KB / no loss. */
void sim_config_init(sim_config *cfg);
void sim_config_free(sim_config *cfg);
/* A deep copy of src into dst (every array and string duplicated; dst is
 * overwritten, not freed first). 0, or MRP_ERR_NOMEM with dst left empty.
 * A new pointer member of sim_config must be duplicated here too. */
int sim_config_copy(sim_config *dst, const sim_config *src);
/* Appends (copies) an entry; 0 or MRP_ERR_NOMEM. */
int sim_config_add_flow(sim_config *cfg, const sim_flow_config *fc);
int sim_config_add_event(sim_config *cfg, const sim_event_config *ec);
int sim_config_add_cable(sim_config *cfg, const sim_cable_config *cc);
int sim_config_add_opt(sim_config *cfg, const char *transport, const char *key,
		       const char *value, int line);
/* Appends a link name to the time series' links (copied). */
int sim_config_add_ts_link(sim_config *cfg, const char *name);

/* Appends a collective, taking its ranks and sizes arrays (malloc()ed;
 * freed by sim_config_free(), also on error). 0 or MRP_ERR_NOMEM. */
int sim_config_add_coll(sim_config *cfg, const sim_coll_config *cc);

/* ------------------------------------------------------- collectives */

/* Ranks of collective cc in cfg, and the host of rank r. */
uint32_t sim_coll_nranks(const sim_config *cfg, const sim_coll_config *cc);
uint32_t sim_coll_host(const sim_coll_config *cc, uint32_t r);
/* Whether sim_new() expands entry i, and at which size. */
int sim_coll_selected(const sim_config *cfg, size_t i);
uint64_t sim_coll_size(const sim_config *cfg, size_t i);
/* Steps of a collective of n ranks; it has steps x n x channels flows of
 * sim_coll_chunk() bytes each. */
uint32_t sim_coll_steps(unsigned type, uint32_t n);
uint64_t sim_coll_chunk(unsigned type, uint32_t n, uint32_t channels, uint64_t size);
/* Flow k (= (step * n + sending rank) * channels + channel) of the
 * collective: its step, channel, the ranks it goes between and the flows
 * (indices within the collective) it waits for. Returns the number of
 * dependencies (0-2). */
unsigned sim_coll_flow(unsigned type, uint32_t n, uint32_t channels, uint32_t k, uint32_t *step,
		       uint32_t *channel, uint32_t *src_rank, uint32_t *dst_rank, uint32_t deps[2]);
/* SIM_DEP_* of dependency i of a flow of a collective of this type: the
 * own previous send of a pairwise all-to-all is SIM_DEP_SENT, every other
 * dependency SIM_DEP_RECEIVED. */
unsigned sim_coll_dep_kind(unsigned type, unsigned i);
/* nccl-tests' bus bandwidth factor: busbw = size / time * factor. */
double sim_coll_busbw_factor(unsigned type, uint32_t n);

/* Default sim_flow_config (op write, plane -1, ...). */
void sim_flow_config_init(sim_flow_config *fc);

/* Checks cfg against itself (host, plane, switch, port and flow numbers,
 * sizes). 0, or MRP_ERR_INVAL with "name:line: what: why" in err. */
int sim_config_check(const sim_config *cfg, char *err, size_t errlen);

/* Number of flows cfg expands to. */
size_t sim_config_flow_count(const sim_config *cfg);

/* Parses "host3", "leaf0", "spine12", "switch" / "switch0". 0 or
 * MRP_ERR_INVAL. */
int sim_node_parse(const char *s, sim_node *n);
/* "host3", "leaf0", "switch"; returns buf. */
char *sim_node_name(sim_node n, char *buf, size_t buflen);

#endif
