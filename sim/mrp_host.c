/*
 * The MetaRoCE transport of metaroce-sim: the real engine (proto/conn.c) on
 * every simulated host.
 *
 * Each flow is one connection: an mrp_conn on the sender and one on the
 * receiver, created directly with matching ids and tokens (the simulator
 * does not run the CONNECT/ACCEPT handshake; the daemon does). The flow's
 * bytes are cut into messages of msg_size bytes, posted on the flow's stream
 * as WRITE, WRITE_IMM or SEND; the receiver exposes the flow's destination
 * buffer as one memory region (WRITE) or as one posted receive per message
 * (SEND, WRITE_IMM). Packets are the engine's real encoded bytes; their UDP
 * source port is the path's entropy, so the switches' ECMP hashing spreads
 * paths over spines exactly as a fabric would.
 *
 * The host's NIC is a queue per port with backpressure, as a daemon's socket
 * buffer is: a port is full when it has no room for a packet of the largest
 * size below nic_queue (and the link's own capacity), and the host never
 * drops its own packets. Connections with something to send wait in one
 * FIFO and are served one packet each, round-robin, while some usable port
 * has room and none is out of room below its link's capacity (a control
 * packet or a tail-loss probe goes on its path's plane, full or not); the
 * engine is told which ports are full (planes_full) and sends its data on
 * the others. A connection whose data waited for a full port
 * (mrp_conn_nic_blocked()) waits on the host's nicwait list, and the FIFO is
 * served again, with those connections, when a full port has drained half
 * way (on_nic()). (Before, the host asked for a packet only while every
 * usable port had room, since it cannot know the engine's plane before
 * asking: one full port held back the others, which needed a 128 KiB
 * queue to stay busy, and a 128 KiB queue in front of each step of a ring
 * all-reduce made it 1.16x RoCEv2's time: bench/README.md.)
 *
 * The host touches only connections with work: the FIFO of ready ones, and
 * a min-heap of the others ordered by the engine's deadline (the host's one
 * simulator deadline is the heap's top). Invariants are checked on the
 * connections an event touched (a list), never by a scan of them all.
 *
 * An engine connection lives only while its flow has work: the sender's is
 * made when the NIC first serves the flow, the receiver's when the flow's
 * first packet arrives, and both are deleted when the sender has every byte
 * acknowledged (a packet arriving for a deleted connection later, such as a
 * duplicate still on the wire, is dropped and counted). What stays for the
 * whole run is a small record per flow end (struct mconn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "mrp_host.h"

#define RX_BASE_ADDR 0x100000000ull

typedef struct mh mh;

typedef struct mconn mconn;

struct mconn {
	mh *host;
	mrp_conn *c;
	sim_flow *f;
	mconn *next_ready; /* FIFO link while ready */
	uint64_t deadline; /* the engine's, as of the last time we touched it */
	uint32_t heap_pos; /* index + 1 in the host's timer heap, 0 = not in it */
	uint32_t peer;     /* peer host id */
	uint8_t sender;
	uint8_t finished;
	uint8_t ready;     /* in the FIFO of connections with work */
	uint8_t dirty;     /* touched since its invariants were last checked */
	uint8_t retired;   /* the flow completed: its engine connection is gone */
	uint8_t retiring;  /* on the host's list of connections to retire */
	uint8_t nicwait;   /* on the host's list of connections waiting for a full port */
	/* sender */
	uint32_t next_wr, done_wr;
	uint64_t posted_bytes;
	uint64_t qwnd_bytes; /* sender: its connection's window when it retired */
	uint64_t admit_credit; /* sender: its first-round-trip credit (SPEC 6.6) */
	/* receiver */
	uint32_t rx_done;
	uint32_t nmsgs;
};

typedef struct mh_opts {
	uint64_t paths_per_plane, max_paths, msg_size, burst, ack_every, nic_queue;
	uint64_t ack_delay_ns, rto_min_ns, rto_init_ns, rate_hints;
	uint64_t admit, admit_budget, admit_lone, expedite, expedite_budget;
	const char *cc;
} mh_opts;

/* A growable array of connection pointers. */
typedef struct cvec {
	mconn **v;
	size_t n, cap;
} cvec;

struct mh {
	sim *s;
	mh_opts o;        /* transport.metaroce options, read once */
	sim_host *h;
	cvec conns;       /* every connection of the host */
	cvec heap;        /* timer heap: the connections not ready, by deadline */
	cvec dirty;       /* touched since the last check */
	cvec retiring;    /* senders whose flow completed in this callback */
	cvec nicwait;     /* senders whose data waits for a full port */
	uint32_t full;    /* usable ports that cannot take one more packet (the
			   * engine's planes_full) */
	uint64_t late_pkts; /* packets for a retired connection, dropped */
	uint64_t visits;  /* connections the host loop took up (sim_mrp_host_visits) */
	uint64_t dump;    /* transport.metaroce.dump */
	uint8_t drained[SIM_MAX_PLANES]; /* drained by a host-wide steer */
	mconn *ready_head, *ready_tail; /* connections with work, served in turn */
	uint64_t pkt_max; /* wire bytes of the largest packet the engine writes */
	mrp_rh rh;
	/* Per plane, the largest smoothed RTT of the last sender connection
	 * that measured one there: a new connection's plane_rtt_hint_ns, as a
	 * host's other connections tell it how far its network is. */
	uint64_t rtt_hint[SIM_MAX_PLANES];
	mrp_rh_slot *slots;
	uint32_t rx_conns; /* receiver records not retired: the connections that
			    * may send to this host (admission's fair part) */
	uint8_t pkt[MRP_DATA_HDR_LEN + MRP_MTU_MAX];
};

/* Options (transport.metaroce.* in a scenario). */
static const char *const mh_options[] = {
	"paths_per_plane", "max_paths", "cc", "msg_size", "burst", "ack_every",
	"ack_delay", "rto_min", "rto_init", "nic_queue", "rate_hints", "flow_paths",
	"dump", "admit", "admit_budget", "admit_lone", "expedite",
	"expedite_budget", NULL,
};



/*
 * Defaults for the distance (sim_base_rtt_max(), the longest round trip of
 * the fabric as built), as a deployment sets its timers and path budget
 * for its network: the initial timeout at least 3 of those round trips
 * (1 ms in a data centre; a 4 ms scale-across link timed out its whole
 * first window at 1 ms and sent it again for nothing), and room for 1.25
 * bandwidth-delay products of a host's links over paths of at most 255
 * packets in flight (a path's SACK span, SPEC 6.2), at least 64 paths. A
 * scenario's own values win.
 */
static void distance_defaults(sim *s, uint64_t *rto_init, uint64_t *max_paths)
{
	uint64_t rtt = sim_base_rtt_max(s), rate[SIM_MAX_PLANES] = {0}, sum = 0;
	for (size_t i = 0; i < sim_link_count(s); i++) {
		const sim_link *l = sim_link_get(s, i);
		if (l->from.kind == SIM_NODE_HOST && l->plane < SIM_MAX_PLANES &&
		    l->rate_bps > rate[l->plane])
			rate[l->plane] = l->rate_bps;
	}
	for (unsigned p = 0; p < SIM_MAX_PLANES; p++)
		sum += rate[p];
	*rto_init = sim_rto_default(s);
	double pkt = (double)(sim_mtu(s) + MRP_DATA_HDR_LEN) * 8;
	double need = 1.25 * (double)sum * ((double)rtt / 1e9) / pkt / (MRP_SACK_BITS - 1);
	*max_paths = need < 64 ? 64 : need >= MRP_MAX_PATHS ? MRP_MAX_PATHS : (uint64_t)need + 1;
}

static int get_opts(sim *s, mh_opts *o)
{
	uint64_t rto_init, max_paths;
	distance_defaults(s, &rto_init, &max_paths);
	if (sim_opt_u64(s, "paths_per_plane", 4, &o->paths_per_plane) < 0 ||
	    sim_opt_u64(s, "max_paths", max_paths, &o->max_paths) < 0 ||
	    sim_opt_bytes(s, "msg_size", 1 << 20, &o->msg_size) < 0 ||
	    sim_opt_u64(s, "burst", 4, &o->burst) < 0 ||
	    sim_opt_u64(s, "ack_every", 4, &o->ack_every) < 0 ||
	    sim_opt_bytes(s, "nic_queue", 64 << 10, &o->nic_queue) < 0 ||
	    sim_opt_time(s, "ack_delay", 8000, &o->ack_delay_ns) < 0 ||
	    sim_opt_time(s, "rto_min", 100000, &o->rto_min_ns) < 0 ||
	    sim_opt_time(s, "rto_init", rto_init, &o->rto_init_ns) < 0 ||
	    sim_opt_u64(s, "rate_hints", 1, &o->rate_hints) < 0 ||
	    sim_opt_u64(s, "admit", 1, &o->admit) < 0 ||
	    sim_opt_bytes(s, "admit_budget", 0, &o->admit_budget) < 0 ||
	    sim_opt_u64(s, "admit_lone", 1, &o->admit_lone) < 0 ||
	    sim_opt_bytes(s, "expedite", 262144, &o->expedite) < 0 ||
	    sim_opt_bytes(s, "expedite_budget", 1 << 20, &o->expedite_budget) < 0)
		return -1;
	if (o->expedite > UINT32_MAX || o->expedite_budget > UINT32_MAX) {
		sim_set_error(s, "transport.metaroce.%s: at most %u bytes",
			      o->expedite > UINT32_MAX ? "expedite" : "expedite_budget", UINT32_MAX);
		return -1;
	}
	o->cc = sim_opt_get(s, "cc");
	if (!o->cc)
		o->cc = "baseline";
	if (!mrp_cc_find(o->cc)) {
		sim_set_error(s, "transport.metaroce.cc: '%s' is not a congestion control algorithm",
			      o->cc);
		return -1;
	}
	if (!o->paths_per_plane || !o->max_paths || o->max_paths > MRP_MAX_PATHS ||
	    !o->msg_size || o->msg_size > MRP_MSG_MAX || !o->burst || !o->ack_every) {
		sim_set_error(s, "transport.metaroce: paths_per_plane, max_paths (<= %d), "
				 "msg_size (<= 2GiB), burst and ack_every must be positive",
			      MRP_MAX_PATHS);
		return -1;
	}
	return 0;
}

static void *mem_alloc(void *ud, size_t n)
{
	(void)ud;
	return malloc(n);
}

static void mem_free(void *ud, void *p)
{
	(void)ud;
	free(p);
}

static const mrp_mem heap = { mem_alloc, mem_free, NULL };

static uint64_t host_rand(void *ud)
{
	mh *m = ud;
	return sim_rand(m->s, m->h);
}

/* The receiver's one memory region: the flow's destination buffer. */
static uint8_t *rx_resolve(void *ud, uint32_t rkey, uint64_t addr, uint64_t len,
			   unsigned access, int *pnak)
{
	mconn *mc = ud;
	sim_flow *f = mc->f;
	(void)access;
	if (rkey != f->id + 1) {
		*pnak = MRP_NAK_INVALID_RKEY;
		return NULL;
	}
	if (addr < RX_BASE_ADDR || len > f->bytes || addr - RX_BASE_ADDR > f->bytes - len) {
		*pnak = MRP_NAK_OUT_OF_BOUNDS;
		return NULL;
	}
	return f->dst_buf + (addr - RX_BASE_ADDR);
}

static uint64_t link_capacity(mh *m)
{
	uint64_t cap = 0;
	for (unsigned p = 0; p < sim_planes(m->s); p++)
		if (sim_port_up(m->s, m->h, p))
			cap += sim_port_rate_bps(m->s, m->h, p);
	return cap ? cap : 1;
}

static void *mh_host_new(sim *s, sim_host *h)
{
	mh_opts o;
	if (get_opts(s, &o) < 0)
		return NULL;
	mh *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->o = o;
	m->s = s;
	m->h = h;
	m->slots = calloc(4096, sizeof(*m->slots));
	if (!m->slots || mrp_rh_init(&m->rh, m->slots, 4096, link_capacity(m), 0) < 0) {
		free(m->slots);
		free(m);
		return NULL;
	}
	/* (a new sender's silence between its first round trip and its data
	 * on its first hint: at most the initial RTO, the longest a round
	 * trip is taken to be before one is measured) */
	m->rh.wait_ns = o.rto_init_ns;
	/* (and credit's data may take as long to arrive: its room is not
	 * given again before, SPEC 6.6) */
	m->rh.adm_rtt_ns = o.rto_init_ns;
	m->pkt_max = MRP_DATA_HDR_LEN + sim_mtu(s) + SIM_WIRE_OVERHEAD;
	if (sim_opt_u64(s, "dump", 0, &m->dump) < 0) {
		free(m->slots);
		free(m);
		return NULL;
	}
	if (o.nic_queue < m->pkt_max) {
		sim_set_error(s, "transport.metaroce.nic_queue: %llu bytes is less than one packet "
				 "(%llu bytes on the wire)",
			      (unsigned long long)o.nic_queue, (unsigned long long)m->pkt_max);
		free(m->slots);
		free(m);
		return NULL;
	}
	return m;
}

/* transport.metaroce.dump: 1 prints every connection's paths at the end. */
static void dump_conn(const mh *m, const mconn *mc)
{
	mrp_conn_stats st;
	mrp_conn_get_stats(mc->c, &st);
	fprintf(stderr,
		"host %u flow %u %s: tx %llu rx %llu retx %llu lost %llu rto %llu tlp %llu "
		"naks %llu/%llu qwnd %llu pacing %llu hint %llu paths %u opened %llu reported %llu\n",
		m->h->id, mc->f->id, mc->sender ? "sender" : "receiver",
		(unsigned long long)st.tx_pkts, (unsigned long long)st.rx_pkts,
		(unsigned long long)st.retx_pkts, (unsigned long long)st.lost_pkts,
		(unsigned long long)st.rto_count, (unsigned long long)st.tlp_count,
		(unsigned long long)st.naks_sent, (unsigned long long)st.naks_rcvd,
		(unsigned long long)st.qwnd, (unsigned long long)st.pacing_bps,
		(unsigned long long)st.rate_hint_bps, st.npaths_active,
		(unsigned long long)st.paths_opened, (unsigned long long)st.reports);
	for (unsigned id = 0; mc->sender && id < MRP_MAX_PATHS; id++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(mc->c, id, &pi) == 0)
			fprintf(stderr,
				"  path %3u plane %u sport %5u gen %u %-8s cwnd %8llu srtt %6llu ns "
				"tx %7llu retx %5llu lost %5llu ce %5llu\n",
				id, pi.plane, pi.sport, pi.gen, mrp_path_state_name(pi.state),
				(unsigned long long)pi.cwnd, (unsigned long long)pi.srtt_ns,
				(unsigned long long)pi.tx_pkts, (unsigned long long)pi.retx_pkts,
				(unsigned long long)pi.lost_pkts, (unsigned long long)pi.ce_pkts);
	}
}

static void mh_host_del(void *hs)
{
	mh *m = hs;
	for (size_t i = 0; i < m->conns.n; i++) {
		if (m->dump && m->conns.v[i]->c)
			dump_conn(m, m->conns.v[i]);
		mrp_conn_del(m->conns.v[i]->c);
		free(m->conns.v[i]);
	}
	if (m->dump && m->late_pkts)
		fprintf(stderr, "host %u: %llu packets for connections already deleted\n", m->h->id,
			(unsigned long long)m->late_pkts);
	free(m->conns.v);
	free(m->heap.v);
	free(m->dirty.v);
	free(m->retiring.v);
	free(m->nicwait.v);
	free(m->slots);
	free(m);
}

static int cvec_push(cvec *cv, mconn *mc)
{
	if (cv->n == cv->cap) {
		size_t ncap = cv->cap ? cv->cap * 2 : 8;
		mconn **n = realloc(cv->v, ncap * sizeof(*n));
		if (!n)
			return MRP_ERR_NOMEM;
		cv->v = n;
		cv->cap = ncap;
	}
	cv->v[cv->n++] = mc;
	return 0;
}

/* ------------------------------------------------------------ timer heap */

static void heap_set(mh *m, size_t i, mconn *mc)
{
	m->heap.v[i] = mc;
	mc->heap_pos = (uint32_t)i + 1;
}

static void heap_up(mh *m, size_t i)
{
	mconn *mc = m->heap.v[i];
	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (m->heap.v[up]->deadline <= mc->deadline)
			break;
		heap_set(m, i, m->heap.v[up]);
		i = up;
	}
	heap_set(m, i, mc);
}

static void heap_down(mh *m, size_t i)
{
	mconn *mc = m->heap.v[i];
	size_t n = m->heap.n;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && m->heap.v[c + 1]->deadline < m->heap.v[c]->deadline)
			c++;
		if (mc->deadline <= m->heap.v[c]->deadline)
			break;
		heap_set(m, i, m->heap.v[c]);
		i = c;
	}
	heap_set(m, i, mc);
}

static void heap_remove(mh *m, mconn *mc)
{
	if (!mc->heap_pos)
		return;
	size_t i = mc->heap_pos - 1;
	mconn *last = m->heap.v[--m->heap.n];
	mc->heap_pos = 0;
	if (last == mc)
		return;
	heap_set(m, i, last);
	heap_down(m, i);
	heap_up(m, last->heap_pos - 1);
}

/* (Re)file mc in the heap under its engine deadline; never when ready. */
static void heap_update(mh *m, mconn *mc)
{
	if (mc->ready)
		return;
	if (!mc->heap_pos) {
		if (mc->deadline == SIM_NEVER)
			return;
		if (cvec_push(&m->heap, mc) != 0) {
			sim_violation(m->s, "host %u: out of memory for the timer heap", m->h->id);
			return;
		}
		heap_up(m, m->heap.n - 1);
	} else if (mc->deadline == SIM_NEVER) {
		heap_remove(m, mc);
	} else {
		size_t i = mc->heap_pos - 1;
		heap_up(m, i);
		heap_down(m, mc->heap_pos - 1);
	}
}

/*
 * transport.metaroce.flow_paths: "16,1" gives flow 0 sixteen paths per plane
 * and flow 1 one; flows past the list (or a list that does not parse) use
 * paths_per_plane.
 */
static uint64_t flow_paths(sim *s, uint32_t flow, uint64_t def)
{
	const char *v = sim_opt_get(s, "flow_paths");
	for (uint32_t i = 0; v && *v; i++) {
		char *end;
		unsigned long n = strtoul(v, &end, 10);
		if (end == v || n == 0 || n > MRP_MAX_PATHS)
			return def;
		if (i == flow)
			return n;
		v = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end)
			return def;
	}
	return def;
}

/* Connection ids are derived from the flow: odd on the sender, even on the
 * receiver, so a packet's dst_conn_id finds its flow and side directly. */
static uint32_t conn_id(const sim_flow *f, int sender)
{
	return f->id * 2 + (sender ? 1 : 2);
}

/* The record of one end of a flow; its engine connection comes later
 * (engine_new()). */
static mconn *conn_new(mh *m, sim_flow *f, int sender)
{
	mconn *mc = calloc(1, sizeof(*mc));
	if (!mc || cvec_push(&m->conns, mc) < 0) {
		free(mc);
		return NULL;
	}
	mc->host = m;
	mc->f = f;
	mc->sender = sender;
	mc->peer = sender ? f->dst : f->src;
	mc->nmsgs = (uint32_t)((f->bytes + m->o.msg_size - 1) / m->o.msg_size);
	if (!mc->nmsgs)
		mc->nmsgs = 1;
	mc->deadline = SIM_NEVER;
	return mc;
}

static void post_more(mconn *mc, uint64_t now);

/* The window of mc's sender connection (the sum of its active paths'), or
 * the one it had when it retired. */
static uint64_t conn_qwnd(const mconn *mc)
{
	if (!mc->c)
		return mc->qwnd_bytes;
	uint64_t q = 0;
	mrp_path_info pi;
	for (unsigned i = 0; i < MRP_MAX_PATHS; i++)
		if (mrp_conn_path_info(mc->c, i, &pi) == 0 && pi.state == MRP_PATH_ACTIVE)
			q += pi.cwnd;
	return q;
}

/* A step of a ring between the same two ranks (sim_flow.conn_prev) runs
 * on the previous step's connection in a collective library: its window
 * carries over (RFC 9040's temporal sharing), as DCQCN's rate does in the
 * RoCE model. The initial window per path of f's new connection: the
 * previous one's window spread over the new paths, never below the
 * default (a flow with no predecessor, an incast's, keeps it). */
static uint32_t carried_init_cwnd(mh *m, const sim_flow *f, uint32_t paths, uint32_t def_pkts,
				  uint32_t max_pkts)
{
	if (f->conn_prev < 0 || !paths)
		return def_pkts;
	sim_flow *pf = sim_flow_get(m->s, (size_t)f->conn_prev);
	if (!pf || pf->src != f->src || pf->dst != f->dst || !pf->tx_ctx)
		return def_pkts;
	uint64_t per = conn_qwnd(pf->tx_ctx) / paths / (sim_mtu(m->s) + MRP_DATA_HDR_LEN);
	if (per <= def_pkts)
		return def_pkts;
	return per > max_pkts ? max_pkts : (uint32_t)per;
}

/*
 * First-round-trip admission (SPEC 6.6) as the handshake would give it: the
 * simulator runs no CONNECT/ACCEPT, so a new sender's connection asks its
 * receiver's allocator directly, as the receiver does when it builds its
 * ACCEPT. The receiver's budget is transport.metaroce.admit_budget, or the
 * queues in front of it (its switch ports, all planes). A flow that
 * runs on its predecessor's connection (a collective's next step) has
 * heard from the receiver already: no admission. With admit_lone, the
 * receiver's only connection may have more than the budget (its line rate
 * until its first ACK, mrp_rh_admit()) if its sender's links are no faster
 * than the receiver's: a rate the ACCEPT's receiver would have to be told
 * or configured with (the simulator knows it).
 */
static void admit(mh *m, const sim_flow *f, mrp_conn_params *p, uint64_t now)
{
	sim_host *dh = sim_host_get(m->s, f->dst);
	mh *d = dh ? dh->ts : NULL;
	if (!d)
		return;
	if (!d->rh.adm_budget) {
		uint64_t b = d->o.admit_budget;
		for (unsigned pl = 0; !d->o.admit_budget && pl < sim_planes(m->s); pl++)
			b += dh->in[pl] ? dh->in[pl]->queue_bytes : 0;
		/* (a link with no queue limit: a budget of 64 full packets) */
		d->rh.adm_budget = b ? b : 64ull * (MRP_DATA_HDR_LEN + sim_mtu(m->s));
	}
	p->admit = 1;
	d->rh.adm_conns = d->rx_conns;
	d->rh.adm_queues = sim_planes(m->s);
	d->rh.adm_lone_bytes =
		d->o.admit_lone && link_capacity(m) <= d->rh.capacity_bps ? UINT64_MAX : 0;
	/* (what the sender will send: its flow, a whole packet per segment) */
	uint64_t pkt = MRP_DATA_HDR_LEN + sim_mtu(m->s);
	uint64_t want = (f->bytes + sim_mtu(m->s) - 1) / sim_mtu(m->s) * pkt;
	p->admit_credit = mrp_rh_admit(&d->rh, (uint32_t)pkt, want ? want : pkt, now);
}

/* The engine connection of mc, made now: the sender's messages are posted,
 * the receiver's receives (SEND, WRITE_IMM), and planes that are down or
 * drained host-wide are reported. 0, or < 0 (the flow fails). */
static int engine_new(mconn *mc, uint64_t now)
{
	mh *m = mc->host;
	const mh_opts o = m->o;
	sim_flow *f = mc->f;
	int sender = mc->sender;

	if (mc->c)
		return 0;
	if (mc->retired)
		return MRP_ERR_STATE;

	mrp_conn_params p;
	mrp_conn_params_default(&p);
	p.local_conn_id = conn_id(f, sender);
	p.peer_conn_id = conn_id(f, !sender);
	p.local_token = 0x5151000000000000ull | p.local_conn_id;
	p.peer_token = 0x5151000000000000ull | p.peer_conn_id;
	p.mtu = sim_mtu(m->s);
	p.nplanes = (uint8_t)sim_planes(m->s);
	p.initial_paths = (uint16_t)(flow_paths(m->s, f->id, o.paths_per_plane) * p.nplanes);
	p.max_paths = (uint16_t)(o.max_paths < p.initial_paths ? p.initial_paths : o.max_paths);
	if (p.max_paths > MRP_MAX_PATHS)
		p.max_paths = MRP_MAX_PATHS;
	if (p.initial_paths > p.max_paths)
		p.initial_paths = p.max_paths;
	p.max_streams = (uint16_t)(f->stream + 1 > 1024 ? f->stream + 1 : 1024);
	p.cc_name = o.cc;
	mrp_cc_params_default(&p.cc, p.mtu);
	if (sender)
		p.cc.init_cwnd_pkts = carried_init_cwnd(m, f, p.initial_paths, p.cc.init_cwnd_pkts,
							p.cc.max_cwnd_pkts);
	p.cc.line_rate_bps = link_capacity(m);
	for (unsigned pl = 0; pl < p.nplanes; pl++)
		p.plane_rate_bps[pl] = sim_port_rate_bps(m->s, m->h, pl);
	p.burst_pkts = (uint32_t)o.burst;
	p.ack_every = (uint32_t)o.ack_every;
	p.ack_delay_ns = o.ack_delay_ns;
	p.expedite_max = (uint32_t)o.expedite;
	p.expedite_budget = (uint32_t)o.expedite_budget;
	p.rto_min_ns = o.rto_min_ns;
	p.rto_init_ns = o.rto_init_ns;
	for (unsigned pl = 0; pl < p.nplanes && pl < SIM_MAX_PLANES; pl++)
		p.plane_rtt_hint_ns[pl] = m->rtt_hint[pl];
	p.probe_idle_ns = 0;
	p.planes_full = &m->full;
	p.rh = (!sender && o.rate_hints) ? &m->rh : NULL;
	if (o.admit && o.rate_hints) {
		p.caps |= MRP_CAP_ADMIT;
		if (sender && f->conn_prev < 0)
			admit(m, f, &p, now);
	}
	mc->admit_credit = p.admit_credit;
	mrp_rng rng = { host_rand, m };
	mrp_mr_ops mr = { rx_resolve, mc };
	int rc = mrp_conn_new(&mc->c, &p, &heap, &rng, &mr, now);
	if (rc < 0) {
		mc->c = NULL;
		return rc;
	}
	for (unsigned pl = 0; pl < p.nplanes; pl++) {
		if (!sim_port_up(m->s, m->h, pl))
			mrp_conn_plane_event(mc->c, pl, MRP_PLANE_DOWN, now);
		if (m->drained[pl])
			mrp_conn_plane_event(mc->c, pl, MRP_PLANE_DRAIN, now);
	}
	if (sender) {
		post_more(mc, now);
	} else if (f->op != SIM_OP_WRITE) {
		uint64_t ms = o.msg_size;
		for (uint32_t i = 0; i < mc->nmsgs; i++) {
			uint64_t off = (uint64_t)i * ms;
			uint64_t len = f->bytes - off < ms ? f->bytes - off : ms;
			uint8_t *buf = f->op == SIM_OP_SEND ? f->dst_buf + off : NULL;
			if (f->op != SIM_OP_SEND)
				len = 0;
			rc = mrp_conn_post_recv(mc->c, (uint16_t)f->stream, i, buf, (uint32_t)len, now);
			if (rc < 0)
				return rc;
		}
	}
	mc->deadline = mrp_conn_deadline(mc->c);
	return 0;
}


static uint8_t flow_opcode(const sim_flow *f)
{
	switch (f->op) {
	case SIM_OP_WRITE_IMM:
		return MRP_WR_WRITE_IMM;
	case SIM_OP_SEND:
		return MRP_WR_SEND;
	default:
		return MRP_WR_WRITE;
	}
}

/* Post the sender's messages while the stream's window allows. */
static void post_more(mconn *mc, uint64_t now)
{
	sim_flow *f = mc->f;
	uint64_t ms = mc->host->o.msg_size;
	while (mc->posted_bytes < f->bytes || (f->bytes == 0 && mc->next_wr == 0)) {
		uint64_t len = f->bytes - mc->posted_bytes;
		if (len > ms)
			len = ms;
		mrp_wr wr = {
			.wr_id = mc->next_wr,
			.opcode = flow_opcode(f),
			.stream = (uint16_t)f->stream,
			.local = f->src_buf + mc->posted_bytes,
			.len = (uint32_t)len,
			.remote_addr = RX_BASE_ADDR + mc->posted_bytes,
			.rkey = f->id + 1,
			.imm = mc->next_wr,
		};
		if (mrp_conn_post_send(mc->c, &wr, now) < 0)
			return; /* window full: more after completions */
		mc->posted_bytes += len;
		mc->next_wr++;
	}
}

static void retire(mconn *mc);

/* Completions: check their order, count the flow's progress, post more.
 * When the sender has everything acknowledged the flow is done: the
 * receiver's connection is deleted at once (its host is not running now),
 * the sender's at the end of this callback (finish()). */
static void reap(mconn *mc, uint64_t now)
{
	mh *m = mc->host;
	mrp_cqe e[64];
	int n;
	if (!mc->c)
		return;
	while ((n = mrp_conn_poll_cq(mc->c, e, 64)) > 0) {
		for (int i = 0; i < n; i++) {
			if (mc->sender) {
				if (e[i].wr_id != mc->done_wr)
					sim_violation(m->s, "flow %u: send completion %llu out of order (want %u)",
						      mc->f->id, (unsigned long long)e[i].wr_id,
						      mc->done_wr);
				mc->done_wr++;
				if (e[i].status != MRP_WC_SUCCESS && !mc->finished) {
					mc->finished = 1;
					sim_flow_done(m->s, mc->f, now, -1);
				}
			} else {
				if (e[i].wr_id != mc->rx_done)
					sim_violation(m->s, "flow %u: receive completion %llu out of order",
						      mc->f->id, (unsigned long long)e[i].wr_id);
				mc->rx_done++;
			}
		}
	}
	mrp_conn_stats st;
	mrp_conn_get_stats(mc->c, &st);
	if (mc->sender)
		mc->f->retx_pkts = st.retx_pkts;
	else
		mc->f->spurious_pkts = st.rx_dup_pkts; /* retransmissions it already had */
	if (!mc->sender) {
		mc->f->rx_bytes = st.rx_bytes; /* the time series' per-flow rate */
		/* every message's receive completion (SEND, WRITE_IMM; a plain
		 * WRITE gives the receiver none): the data has arrived */
		if (mc->rx_done == mc->nmsgs && mc->f->op != SIM_OP_WRITE)
			sim_flow_arrived(m->s, mc->f, now);
	}
	if (mc->sender && !mc->finished) {
		if (mc->done_wr == mc->next_wr && mc->posted_bytes >= mc->f->bytes) {
			mconn *rx = mc->f->rx_ctx;
			mc->finished = 1;
			sim_flow_done(m->s, mc->f, now, 0);
			if (rx) {
				reap(rx, now); /* its last completions and counters */
				retire(rx);
			}
			if (!mc->retiring && cvec_push(&m->retiring, mc) == 0)
				mc->retiring = 1;
		} else {
			post_more(mc, now);
		}
	}
}

/* mc changed: its invariants are checked after this event. */
static void touched(mconn *mc)
{
	if (mc->dirty)
		return;
	if (cvec_push(&mc->host->dirty, mc) != 0) {
		sim_violation(mc->host->s, "host %u: out of memory for the check list",
			      mc->host->h->id);
		return;
	}
	mc->dirty = 1;
}

/* mc may have a packet to send: join the FIFO (leaving the timer heap). */
static void make_ready(mconn *mc)
{
	mh *m = mc->host;
	touched(mc);
	if (mc->ready)
		return;
	heap_remove(m, mc);
	mc->ready = 1;
	mc->next_ready = NULL;
	if (m->ready_tail)
		m->ready_tail->next_ready = mc;
	else
		m->ready_head = mc;
	m->ready_tail = mc;
}

/* What c measured of each plane's round trip becomes the host's hint
 * there (mh.rtt_hint). */
static void learn_rtt(mh *m, const mrp_conn *c)
{
	uint64_t mx[SIM_MAX_PLANES] = {0};
	mrp_path_info pi;
	for (unsigned i = 0; i < MRP_MAX_PATHS; i++)
		if (mrp_conn_path_info(c, i, &pi) == 0 && pi.plane < SIM_MAX_PLANES &&
		    pi.srtt_ns > mx[pi.plane])
			mx[pi.plane] = pi.srtt_ns;
	for (unsigned pl = 0; pl < SIM_MAX_PLANES; pl++)
		if (mx[pl])
			m->rtt_hint[pl] = mx[pl];
}

/* Deletes mc's engine connection (its flow is done); the record stays for
 * late packets. A retired connection left in the FIFO is skipped there. */
static void retire(mconn *mc)
{
	mh *m = mc->host;
	if (!mc->c)
		return;
	if (m->dump)
		dump_conn(m, mc);
	heap_remove(m, mc);
	if (mc->sender) {
		mc->qwnd_bytes = conn_qwnd(mc);
		learn_rtt(m, mc->c);
	}
	mrp_conn_del(mc->c);
	mc->c = NULL;
	mc->retired = 1;
	if (!mc->sender && m->rx_conns)
		m->rh.adm_conns = --m->rx_conns;
	mc->deadline = SIM_NEVER;
}

static mconn *pop_ready(mh *m)
{
	mconn *mc = m->ready_head;
	if (!mc)
		return NULL;
	m->ready_head = mc->next_ready;
	if (!m->ready_head)
		m->ready_tail = NULL;
	mc->next_ready = NULL;
	mc->ready = 0;
	return mc;
}

/* After an input (packet, timer, post, plane event): completions, then mc
 * may have something to send. */
static void after_input(mconn *mc, uint64_t now)
{
	reap(mc, now);
	make_ready(mc);
}

/* The host's queue limit on plane: nic_queue, or the link's capacity. */
static uint64_t nic_limit(mh *m, unsigned plane)
{
	uint64_t cap = sim_port_room(m->s, m->h, plane) + sim_port_queue_bytes(m->s, m->h, plane);
	return m->o.nic_queue < cap ? m->o.nic_queue : cap;
}

/* The usable ports that cannot take one more packet of the largest size
 * below nic_limit(), as a mask; *usable: the ports that are up; *hard: those
 * of them that cannot take one below the link's own capacity (a packet the
 * engine sent there anyway, a control packet or a tail-loss probe, would be
 * dropped). */
static uint32_t nic_full_mask(mh *m, uint32_t *usable, uint32_t *hard)
{
	uint32_t full = 0, up = 0, over = 0;
	for (unsigned p = 0; p < sim_planes(m->s); p++) {
		if (!sim_port_up(m->s, m->h, p))
			continue;
		up |= 1u << p;
		if (sim_port_queue_bytes(m->s, m->h, p) + m->pkt_max > nic_limit(m, p))
			full |= 1u << p;
		if (m->pkt_max > sim_port_room(m->s, m->h, p))
			over |= 1u << p;
	}
	*usable = up;
	*hard = over;
	return full;
}

/* Ask for on_nic() once each port of the mask has drained half way (or
 * just enough for one packet, if its limit is below two). */
static void nic_notify(mh *m, uint32_t ports)
{
	for (unsigned p = 0; p < sim_planes(m->s); p++) {
		if (!(ports >> p & 1u))
			continue;
		uint64_t limit = nic_limit(m, p), resume = limit / 2;
		if (resume > limit - m->pkt_max)
			resume = limit - m->pkt_max;
		sim_port_notify(m->s, m->h, p, resume);
	}
}

/* 1 if some usable port has room for a packet below nic_queue (or none is
 * up: the engine then finds no path) and every one has room below its link's
 * capacity; the ports full below nic_queue are m->full, the engine's
 * planes_full, so that its data goes on the others. Otherwise asks the core
 * for on_nic() once the full ports have drained half way and returns 0.
 * nic_limit() >= pkt_max (checked in host_new() and by the scenario's queue
 * minimum), so a full port always holds more than the level asked for. */
static int nic_room(mh *m)
{
	uint32_t up, hard, full = nic_full_mask(m, &up, &hard);
	m->full = full;
	if (!hard && (full != up || !up))
		return 1;
	nic_notify(m, hard ? hard : full);
	return 0;
}

/* One packet of mc's, if it has one, onto the NIC. 1 if one was sent. */
static int send_one(mh *m, mconn *mc, uint64_t now)
{
	mrp_tx_info ti;
	ssize_t n = mrp_conn_write_pkt(mc->c, &ti, m->pkt, sizeof(m->pkt), now);
	if (n <= 0)
		return 0;
	sim_pkt *p = sim_pkt_new(m->s, (size_t)n);
	if (!p) {
		sim_violation(m->s, "host %u: out of packet memory", m->h->id);
		return 0;
	}
	memcpy(p->data, m->pkt, (size_t)n);
	p->datalen = (uint32_t)n;
	p->dst_addr = sim_host_addr(m->s, sim_host_get(m->s, mc->peer), ti.plane);
	p->src_port = ti.sport;
	p->dst_port = MRP_DEFAULT_PORT;
	p->ecn = ti.ect ? SIM_ECN_ECT0 : SIM_ECN_NOT_ECT;
	p->prio = ti.expedite ? SIM_PRIO_CTRL : SIM_PRIO_DATA;
	if (p->datalen + SIM_WIRE_OVERHEAD > m->pkt_max)
		sim_violation(m->s, "host %u: the engine wrote a %u-byte packet (largest %llu)",
			      m->h->id, p->datalen, (unsigned long long)(m->pkt_max - SIM_WIRE_OVERHEAD));
	if (sim_send(m->s, m->h, ti.plane, p) == MRP_ERR_FULL)
		sim_violation(m->s, "host %u: its own NIC dropped a packet (plane %u)", m->h->id,
			      ti.plane);
	return 1;
}

/* The connections that waited for a full port join the FIFO. */
static void nicwait_release(mh *m)
{
	for (size_t i = 0; i < m->nicwait.n; i++) {
		mconn *mc = m->nicwait.v[i];
		mc->nicwait = 0;
		if (!mc->retired && mc->c)
			make_ready(mc);
	}
	m->nicwait.n = 0;
}

/*
 * Serve the ready connections round-robin, one packet each, while the NIC
 * has room. A connection that has nothing to send leaves the FIFO for the
 * timer heap under its engine deadline.
 */
static void serve(mh *m, uint64_t now)
{
	while (m->ready_head && nic_room(m)) {
		mconn *mc = pop_ready(m);
		int sent;
		m->visits++;
		if (mc->retired)
			continue;
		if (!mc->c) {
			int rc = engine_new(mc, now); /* first service: the connection is made */
			if (rc < 0) {
				sim_flow_done(m->s, mc->f, now, rc);
				mc->retired = 1;
				continue;
			}
		}
		touched(mc);
		if (mc->deadline <= now)
			mrp_conn_handle_timeout(mc->c, now); /* its timers first */
		sent = send_one(m, mc, now);
		mc->deadline = mrp_conn_deadline(mc->c);
		if (!sent && mc->deadline <= now) {
			/* timers came due while it waited in the FIFO */
			mrp_conn_handle_timeout(mc->c, now);
			sent = send_one(m, mc, now);
			mc->deadline = mrp_conn_deadline(mc->c);
			if (!sent && mc->deadline <= now) {
				sim_violation(m->s,
					      "host %u flow %u: engine deadline %llu is not after now %llu "
					      "with nothing to send",
					      m->h->id, mc->f->id, (unsigned long long)mc->deadline,
					      (unsigned long long)now);
				mc->deadline = now + 1;
			}
		}
		/* (its data waited for a full port: it is served again when
		 * one drains, which its deadline does not say) */
		if (!sent && m->full && mc->c && mrp_conn_nic_blocked(mc->c) && !mc->nicwait) {
			mc->nicwait = 1;
			if (cvec_push(&m->nicwait, mc) < 0)
				sim_violation(m->s, "host %u: out of memory", m->h->id);
			nic_notify(m, m->full);
		}
		if (sent) {
			make_ready(mc); /* back of the line */
		} else {
			reap(mc, now);
			heap_update(m, mc);
		}
	}
}

/* End of every callback: serve, retire the senders whose flow completed,
 * then the host's deadline is the heap's top. */
static void finish(mh *m, uint64_t now)
{
	serve(m, now);
	for (size_t i = 0; i < m->retiring.n; i++) {
		m->retiring.v[i]->retiring = 0;
		retire(m->retiring.v[i]);
	}
	m->retiring.n = 0;
	sim_set_deadline(m->s, m->h, m->heap.n ? m->heap.v[0]->deadline : SIM_NEVER);
}

/* The receiver's record; its connection is made by the first packet. */
static int mh_flow_accept(void *hs, sim_flow *f, uint64_t now)
{
	mh *m = hs;
	mconn *mc = conn_new(m, f, 0);
	if (!mc)
		return MRP_ERR_NOMEM;
	f->rx_ctx = mc;
	m->rh.adm_conns = ++m->rx_conns;
	finish(m, now);
	return 0;
}

/* The sender's record joins the FIFO; its connection is made when served. */
static int mh_flow_start(void *hs, sim_flow *f, uint64_t now)
{
	mh *m = hs;
	mconn *mc = conn_new(m, f, 1);
	if (!mc)
		return MRP_ERR_NOMEM;
	f->tx_ctx = mc;
	make_ready(mc);
	finish(m, now);
	return 0;
}

static void mh_on_packet(void *hs, unsigned plane, sim_pkt *p, uint64_t now)
{
	mh *m = hs;
	mrp_pkt pkt;
	ssize_t n = mrp_pkt_decode(&pkt, p->data, p->datalen);
	int ce = p->ecn == SIM_ECN_CE;
	mconn *mc = NULL;
	if (n > 0) {
		uint32_t id = pkt.hdr.dst_conn_id;
		sim_flow *f = id ? sim_flow_get(m->s, (id - 1) / 2) : NULL;
		if (f)
			mc = (id % 2) ? f->tx_ctx : f->rx_ctx;
		if (mc && mc->host != m)
			mc = NULL;
	}
	if (mc && mc->retired) {
		m->late_pkts++; /* e.g. a duplicate still on the wire when the flow completed */
		sim_pkt_free(m->s, p);
		finish(m, now);
		return;
	}
	if (mc && !mc->c && engine_new(mc, now) < 0) {
		sim_violation(m->s, "host %u flow %u: cannot make the connection", m->h->id,
			      mc->f->id);
		mc = NULL;
	}
	if (mc)
		mrp_conn_read_pkt(mc->c, &pkt, plane, ce, now);
	else
		sim_violation(m->s, "host %u: undeliverable packet (decode %zd)", m->h->id, n);
	sim_pkt_free(m->s, p);
	if (mc)
		after_input(mc, now);
	finish(m, now);
}

/* The heap's top came due: run the timers of every due connection and put
 * them in the FIFO. Connections already in the FIFO run theirs when served. */
static void mh_on_timer(void *hs, uint64_t now)
{
	mh *m = hs;
	while (m->heap.n && m->heap.v[0]->deadline <= now) {
		mconn *mc = m->heap.v[0];
		m->visits++;
		heap_remove(m, mc);
		mrp_conn_handle_timeout(mc->c, now);
		mc->deadline = mrp_conn_deadline(mc->c);
		after_input(mc, now);
	}
	finish(m, now);
}

/* A port drained: the connections that waited for a full port join the
 * FIFO, and it is served again. */
static void mh_on_nic(void *hs, unsigned plane, uint64_t now)
{
	mh *m = hs;
	(void)plane;
	nicwait_release(m);
	finish(hs, now);
}

static void mh_on_link(void *hs, unsigned plane, int up, uint64_t now)
{
	mh *m = hs;
	mrp_rh_set_capacity(&m->rh, link_capacity(m));
	for (size_t i = 0; i < m->conns.n; i++) {
		mconn *mc = m->conns.v[i];
		m->visits++;
		if (!mc->c)
			continue; /* not made yet (it will see the port as it is) or retired */
		mrp_conn_plane_event(mc->c, plane, up ? MRP_PLANE_UP : MRP_PLANE_DOWN, now);
		mc->deadline = mrp_conn_deadline(mc->c);
		after_input(mc, now);
	}
	finish(m, now);
}

static void mh_on_steer(void *hs, const sim_steer *st, uint64_t now)
{
	mh *m = hs;
	if (st->flow < 0 && st->action != SIM_STEER_REROUTE)
		for (unsigned pl = 0; pl < sim_planes(m->s); pl++)
			if (st->plane < 0 || (unsigned)st->plane == pl)
				m->drained[pl] = st->action == SIM_STEER_DRAIN; /* for later connections */
	for (size_t i = 0; i < m->conns.n; i++) {
		mconn *mc = m->conns.v[i];
		m->visits++;
		if (st->flow >= 0 && (int64_t)mc->f->id != st->flow)
			continue;
		if (mc->retired)
			continue;
		/* a connection not made yet: host-wide commands reach it when it is
		 * made (drained[]; a new connection's ports are new routes anyway);
		 * one for this flow alone makes it now */
		if (!mc->c && (st->flow < 0 || engine_new(mc, now) < 0))
			continue;
		for (unsigned pl = 0; pl < sim_planes(m->s); pl++) {
			if (st->plane >= 0 && (unsigned)st->plane != pl)
				continue;
			if (st->action == SIM_STEER_DRAIN)
				mrp_conn_plane_event(mc->c, pl, MRP_PLANE_DRAIN, now);
			else if (st->action == SIM_STEER_RESTORE)
				mrp_conn_plane_event(mc->c, pl, MRP_PLANE_UNDRAIN, now);
		}
		if (st->action == SIM_STEER_REROUTE)
			for (unsigned id = 0; id < MRP_MAX_PATHS; id++) {
				mrp_path_info pi;
				if (mrp_conn_path_info(mc->c, id, &pi) == 0 &&
				    (st->plane < 0 || pi.plane == (unsigned)st->plane))
					mrp_conn_path_steer(mc->c, (uint16_t)id, 0, -1, now);
			}
		mc->deadline = mrp_conn_deadline(mc->c);
		after_input(mc, now);
	}
	finish(m, now);
}

/*
 * The connections this event touched (the dirty list) have their engine
 * invariants checked; the others have not changed. The host's own
 * structures are checked too: a ready connection is never in the heap, the
 * heap is ordered, and nothing ready waits while a usable port has room.
 */
static int mh_check(void *hs, char *err, size_t errlen)
{
	mh *m = hs;
	int rc = 0;
	uint32_t up_ports, hard_ports, full_ports = nic_full_mask(m, &up_ports, &hard_ports);
	if (m->ready_head && !hard_ports && (full_ports != up_ports || !up_ports)) {
		snprintf(err, errlen, "flow %u waits to send while a port has room",
			 m->ready_head->f->id);
		rc = -1;
	}
	for (size_t i = 0; i < m->dirty.n; i++) {
		mconn *mc = m->dirty.v[i];
		m->visits++;
		mc->dirty = 0;
		if (!mc->c)
			continue; /* retired since */
		if (rc == 0 && mrp_conn_check(mc->c, err, errlen) != 0)
			rc = -1;
		if (rc == 0 && mc->ready && mc->heap_pos) {
			snprintf(err, errlen, "flow %u: ready and in the timer heap", mc->f->id);
			rc = -1;
		}
		if (rc == 0 && mc->heap_pos) {
			size_t k = mc->heap_pos - 1;
			if (k >= m->heap.n || m->heap.v[k] != mc ||
			    (k > 0 && m->heap.v[(k - 1) / 2]->deadline > mc->deadline)) {
				snprintf(err, errlen, "flow %u: timer heap out of order", mc->f->id);
				rc = -1;
			}
		}
	}
	m->dirty.n = 0;
	return rc;
}

uint64_t sim_mrp_flow_credit(const sim_flow *f)
{
	const mconn *mc = f ? f->tx_ctx : NULL;
	return mc ? mc->admit_credit : 0;
}

uint64_t sim_mrp_host_visits(const void *hs)
{
	return ((const mh *)hs)->visits;
}

const sim_transport_ops sim_mrp_ops = {
	.name = "metaroce",
	.options = mh_options,
	.host_new = mh_host_new,
	.host_del = mh_host_del,
	.flow_accept = mh_flow_accept,
	.flow_start = mh_flow_start,
	.on_packet = mh_on_packet,
	.on_timer = mh_on_timer,
	.on_link = mh_on_link,
	.on_steer = mh_on_steer,
	.check = mh_check,
	.on_nic = mh_on_nic,
};
