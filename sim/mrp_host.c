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
 * The host's NIC queue is the backpressure: the engine is asked for packets
 * only while the port's queue holds less than nic_queue bytes, like a daemon
 * that stops when its socket buffer is full.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "mrp_host.h"

#define RX_BASE_ADDR 0x100000000ull

typedef struct mh mh;

typedef struct mconn {
	mh *host;
	mrp_conn *c;
	sim_flow *f;
	int sender;
	uint32_t peer; /* peer host id */
	/* sender */
	uint64_t posted_bytes;
	uint64_t done_bytes;
	uint32_t next_wr, done_wr;
	/* receiver */
	uint32_t rx_done;
	uint32_t nmsgs;
	int finished;
	uint64_t deadline; /* the engine's, as of the last time we touched it */
	int dirty;         /* touched since its invariants were last checked */
} mconn;

typedef struct mh_opts {
	uint64_t paths_per_plane, max_paths, msg_size, burst, ack_every, nic_queue;
	uint64_t ack_delay_ns, rto_min_ns, rto_init_ns, rate_hints;
	const char *cc;
} mh_opts;

struct mh {
	sim *s;
	mh_opts o;        /* transport.metaroce options, read once */
	sim_host *h;
	mconn **conns;
	size_t nconns, cap;
	mrp_rh rh;
	mrp_rh_slot *slots;
	uint64_t wake_ns; /* NIC queue drained enough to send again */
	uint8_t pkt[MRP_DATA_HDR_LEN + MRP_MTU_MAX];
};

/* Options (transport.metaroce.* in a scenario). */
static const char *const mh_options[] = {
	"paths_per_plane", "max_paths", "cc", "msg_size", "burst", "ack_every",
	"ack_delay", "rto_min", "rto_init", "nic_queue", "rate_hints", "flow_paths",
	"dump", NULL,
};



static int get_opts(sim *s, mh_opts *o)
{
	if (sim_opt_u64(s, "paths_per_plane", 4, &o->paths_per_plane) < 0 ||
	    sim_opt_u64(s, "max_paths", 64, &o->max_paths) < 0 ||
	    sim_opt_bytes(s, "msg_size", 1 << 20, &o->msg_size) < 0 ||
	    sim_opt_u64(s, "burst", 4, &o->burst) < 0 ||
	    sim_opt_u64(s, "ack_every", 4, &o->ack_every) < 0 ||
	    sim_opt_bytes(s, "nic_queue", 64 << 10, &o->nic_queue) < 0 ||
	    sim_opt_time(s, "ack_delay", 8000, &o->ack_delay_ns) < 0 ||
	    sim_opt_time(s, "rto_min", 100000, &o->rto_min_ns) < 0 ||
	    sim_opt_time(s, "rto_init", 1000000, &o->rto_init_ns) < 0 ||
	    sim_opt_u64(s, "rate_hints", 1, &o->rate_hints) < 0)
		return -1;
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
	m->wake_ns = SIM_NEVER;
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
	uint64_t dump = 0;
	sim_opt_u64(m->s, "dump", 0, &dump);
	for (size_t i = 0; i < m->nconns; i++) {
		if (dump)
			dump_conn(m, m->conns[i]);
		mrp_conn_del(m->conns[i]->c);
		free(m->conns[i]);
	}
	free(m->conns);
	free(m->slots);
	free(m);
}

static int add_conn(mh *m, mconn *mc)
{
	if (m->nconns == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 8;
		mconn **n = realloc(m->conns, ncap * sizeof(*n));
		if (!n)
			return MRP_ERR_NOMEM;
		m->conns = n;
		m->cap = ncap;
	}
	m->conns[m->nconns++] = mc;
	return 0;
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

static mconn *conn_new(mh *m, sim_flow *f, int sender, uint64_t now)
{
	const mh_opts o = m->o;
	mconn *mc = calloc(1, sizeof(*mc));
	if (!mc)
		return NULL;
	mc->host = m;
	mc->f = f;
	mc->sender = sender;
	mc->peer = sender ? f->dst : f->src;
	mc->nmsgs = (uint32_t)((f->bytes + o.msg_size - 1) / o.msg_size);
	if (!mc->nmsgs)
		mc->nmsgs = 1;

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
	p.cc.line_rate_bps = link_capacity(m);
	for (unsigned pl = 0; pl < p.nplanes; pl++)
		p.plane_rate_bps[pl] = sim_port_rate_bps(m->s, m->h, pl);
	p.burst_pkts = (uint32_t)o.burst;
	p.ack_every = (uint32_t)o.ack_every;
	p.ack_delay_ns = o.ack_delay_ns;
	p.rto_min_ns = o.rto_min_ns;
	p.rto_init_ns = o.rto_init_ns;
	p.probe_idle_ns = 0;
	p.rh = (!sender && o.rate_hints) ? &m->rh : NULL;
	mrp_rng rng = { host_rand, m };
	mrp_mr_ops mr = { rx_resolve, mc };
	if (mrp_conn_new(&mc->c, &p, &heap, &rng, &mr, now) < 0 || add_conn(m, mc) < 0) {
		mrp_conn_del(mc->c);
		free(mc);
		return NULL;
	}
	return mc;
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

static void reap(mconn *mc, uint64_t now)
{
	mh *m = mc->host;
	mrp_cqe e[64];
	int n;
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
				mc->done_bytes += e[i].byte_len;
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
	if (mc->sender && !mc->finished) {
		if (mc->done_wr == mc->next_wr && mc->posted_bytes >= mc->f->bytes) {
			mc->finished = 1;
			sim_flow_done(m->s, mc->f, now, 0);
		} else {
			post_more(mc, now);
		}
	}
}

/* Hand the engine's packets to the NIC while its queue has room. */
static void pump(mconn *mc, uint64_t now)
{
	mh *m = mc->host;
	uint64_t limit = m->o.nic_queue;
	for (;;) {
		mrp_tx_info ti;
		ssize_t n = mrp_conn_write_pkt(mc->c, &ti, m->pkt, sizeof(m->pkt), now);
		if (n <= 0)
			break;
		sim_pkt *p = sim_pkt_new(m->s, (size_t)n);
		if (!p)
			break;
		memcpy(p->data, m->pkt, (size_t)n);
		p->datalen = (uint32_t)n;
		p->dst_addr = sim_host_addr(m->s, sim_host_get(m->s, mc->peer), ti.plane);
		p->src_port = ti.sport;
		p->dst_port = MRP_DEFAULT_PORT;
		p->ecn = ti.ect ? SIM_ECN_ECT0 : SIM_ECN_NOT_ECT;
		sim_send(m->s, m->h, ti.plane, p);
		if (ti.is_data && sim_port_queue_bytes(m->s, m->h, ti.plane) >= limit) {
			/* come back when the queue has drained by half */
			uint64_t rate = sim_port_rate_bps(m->s, m->h, ti.plane);
			uint64_t wait = rate ? (limit / 2) * 8 * 1000000000ull / rate : 1000;
			if (now + wait < m->wake_ns)
				m->wake_ns = now + wait;
			break;
		}
	}
	reap(mc, now);
	mc->deadline = mrp_conn_deadline(mc->c);
	mc->dirty = 1;
}

/* The host's deadline: the earliest of its connections' (cached by pump(),
 * the only place a connection's state changes) and the NIC wake-up. */
static void update_deadline(mh *m)
{
	uint64_t t = m->wake_ns;
	for (size_t i = 0; i < m->nconns; i++)
		if (m->conns[i]->deadline < t)
			t = m->conns[i]->deadline;
	sim_set_deadline(m->s, m->h, t);
}

static int mh_flow_accept(void *hs, sim_flow *f, uint64_t now)
{
	mh *m = hs;
	mconn *mc = conn_new(m, f, 0, now);
	if (!mc)
		return MRP_ERR_NOMEM;
	f->rx_ctx = mc;
	if (f->op != SIM_OP_WRITE) {
		uint64_t ms = m->o.msg_size;
		for (uint32_t i = 0; i < mc->nmsgs; i++) {
			uint64_t off = (uint64_t)i * ms;
			uint64_t len = f->bytes - off < ms ? f->bytes - off : ms;
			uint8_t *buf = f->op == SIM_OP_SEND ? f->dst_buf + off : NULL;
			if (f->op != SIM_OP_SEND)
				len = 0;
			if (mrp_conn_post_recv(mc->c, (uint16_t)f->stream, i, buf, (uint32_t)len, now) < 0)
				return MRP_ERR_NOMEM;
		}
	}
	return 0;
}

static int mh_flow_start(void *hs, sim_flow *f, uint64_t now)
{
	mh *m = hs;
	mconn *mc = conn_new(m, f, 1, now);
	if (!mc)
		return MRP_ERR_NOMEM;
	f->tx_ctx = mc;
	post_more(mc, now);
	pump(mc, now);
	update_deadline(m);
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
		if (mc && mc->host == m)
			mrp_conn_read_pkt(mc->c, &pkt, plane, ce, now);
		else
			mc = NULL;
	}
	if (!mc)
		sim_violation(m->s, "host %u: undeliverable packet (decode %zd)", m->h->id, n);
	sim_pkt_free(m->s, p);
	if (mc)
		pump(mc, now);
	update_deadline(m);
}

static void mh_on_timer(void *hs, uint64_t now)
{
	mh *m = hs;
	int woke = m->wake_ns <= now; /* the NIC queue drained: everyone may send */
	if (woke)
		m->wake_ns = SIM_NEVER;
	for (size_t i = 0; i < m->nconns; i++) {
		mconn *mc = m->conns[i];
		if (mc->deadline <= now) {
			mrp_conn_handle_timeout(mc->c, now);
			pump(mc, now);
		} else if (woke) {
			pump(mc, now);
		}
	}
	update_deadline(m);
}

static void mh_on_link(void *hs, unsigned plane, int up, uint64_t now)
{
	mh *m = hs;
	mrp_rh_set_capacity(&m->rh, link_capacity(m));
	for (size_t i = 0; i < m->nconns; i++) {
		mrp_conn_plane_event(m->conns[i]->c, plane, up ? MRP_PLANE_UP : MRP_PLANE_DOWN, now);
		pump(m->conns[i], now);
	}
	update_deadline(m);
}

static void mh_on_steer(void *hs, const sim_steer *st, uint64_t now)
{
	mh *m = hs;
	for (size_t i = 0; i < m->nconns; i++) {
		mconn *mc = m->conns[i];
		if (st->flow >= 0 && (int64_t)mc->f->id != st->flow)
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
		pump(mc, now);
	}
	update_deadline(m);
}

/* Every connection an event touched (they all pass through pump()) has its
 * invariants checked after that event; the others have not changed. */
static int mh_check(void *hs, char *err, size_t errlen)
{
	mh *m = hs;
	for (size_t i = 0; i < m->nconns; i++) {
		mconn *mc = m->conns[i];
		if (!mc->dirty)
			continue;
		mc->dirty = 0;
		if (mrp_conn_check(mc->c, err, errlen) != 0)
			return -1;
	}
	return 0;
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
};
