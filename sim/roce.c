/* RoCEv2 baseline transport; the model is described in roce.h. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roce.h"

/* Our header at the start of the UDP payload (host byte order: it never
 * leaves the simulator). A real RoCEv2 packet carries a BTH (12 bytes), an
 * AETH on ACKs (4) and an ICRC (4): those bytes count on the wire. */
enum { R_DATA = 1, R_ACK, R_NAK, R_CNP };

typedef struct rhdr {
	uint8_t type;
	uint8_t pad_[3];
	uint32_t flow;
	uint32_t psn;    /* data: the packet's PSN; ACK/NAK: expected PSN */
	uint32_t paylen; /* data: payload bytes */
} rhdr;

#define RHDR_LEN ((uint32_t)sizeof(rhdr))
#define DATA_WIRE_EXTRA 16 /* BTH + ICRC */
#define CTRL_WIRE_LEN (SIM_WIRE_OVERHEAD + 20) /* BTH + AETH + ICRC */

typedef struct roce_opts {
	uint64_t ack_every;
	uint64_t rto_ns;
	uint64_t cnp_interval_ns;
	uint64_t timer_ns;   /* DCQCN rate-increase and alpha timer */
	double g;            /* DCQCN alpha gain */
	uint64_t rai_bps;    /* additive increase */
	uint64_t rhai_bps;   /* hyper increase */
	uint64_t min_rate_bps;
	uint64_t fr_steps;   /* fast-recovery steps (DCQCN's F) */
	uint64_t window;     /* packets in flight, 0 = unlimited */
} roce_opts;

typedef struct roce_qp { /* sender side of a flow */
	sim_flow *f;
	unsigned plane;
	uint16_t sport;
	int active;
	uint32_t npkts;
	uint32_t una; /* first PSN not acknowledged */
	uint32_t nxt; /* next PSN to send */
	uint32_t max; /* one past the highest PSN ever sent */
	uint64_t next_tx_ns;
	uint64_t last_progress_ns; /* RTO runs from here */
	/* DCQCN reaction point */
	double line, rc, rt, alpha;
	uint64_t t_incr_ns, t_alpha_ns;
	uint64_t stage;
	uint8_t dirty; /* changed since its invariants were last checked */
} roce_qp;

typedef struct roce_rq { /* receiver side of a flow */
	sim_flow *f;
	unsigned plane;
	uint16_t sport;
	uint32_t npkts;
	uint32_t epsn; /* expected PSN: everything below is placed */
	uint32_t unacked;
	int nak_sent;
	int cnp_sent;
	uint64_t last_cnp_ns;
	uint8_t dirty;
} roce_rq;

typedef struct roce_host {
	sim *s;
	sim_host *h;
	roce_opts o;
	uint32_t mtu;
	roce_qp **act; /* sender QPs with work left */
	size_t nact, capact, rr;
	roce_qp **qps; /* every QP of this host */
	size_t nqps, capqps;
	roce_rq **rqs; /* every receive side of this host */
	size_t nrqs, caprqs;
	uint64_t nic_next_ns[SIM_MAX_PLANES]; /* NIC busy until */
	/* roce-pfc: the network is lossless (PFC pauses the NIC port, whose
	 * queue then fills: data waits for room); DCQCN may be off */
	int pfc;
	uint64_t dcqcn;
	uint64_t visits; /* QPs and receive sides the host loop took up */
	/* changed since the last check: only those are checked */
	roce_qp **tq;
	size_t ntq, captq;
	roce_rq **trq;
	size_t ntrq, captrq;
} roce_host;

static const char *const roce_options[] = {
	"ack_every", "rto", "cnp_interval", "dcqcn_timer", "dcqcn_g", "rai", "rhai",
	"min_rate", "fast_recovery", "window", NULL,
};

/* roce-pfc: the same, and dcqcn (1 on, 0 off: no CNPs, line rate). */
static const char *const roce_pfc_options[] = {
	"ack_every", "rto", "cnp_interval", "dcqcn_timer", "dcqcn_g", "rai", "rhai",
	"min_rate", "fast_recovery", "window", "dcqcn", NULL,
};

/* roce-pfc: data is handed to a NIC port only while its queue holds less
 * than this many frames (a paused port's queue stops draining). */
#define PFC_NIC_FRAMES 2

/* Room for one more pointer in an array of object pointers: returns the
 * array (moved or not), or NULL when out of memory (the old one stays). */
static void *grow_ptrs(void *arr, size_t n, size_t *cap)
{
	if (n < *cap)
		return arr;

	size_t c = *cap ? *cap * 2 : 8;
	void *nv = realloc(arr, c * sizeof(void *));

	if (nv)
		*cap = c;
	return nv;
}

/*
 * A RoCEv2 QP's path MTU is one of InfiniBand's five (256, 512, 1,024,
 * 2,048 or 4,096 bytes of payload), whatever the Ethernet MTU under it: on
 * a jumbo-frame fabric (mtu above 4,096) the baseline's packets carry 4,096
 * bytes. MetaRoCE, on UDP, carries the scenario's mtu.
 */
static uint32_t roce_path_mtu(uint32_t mtu)
{
	uint32_t ib = 256;

	while (ib < 4096 && ib * 2 <= mtu)
		ib *= 2;
	return ib;
}

static void *roce_host_new(sim *s, sim_host *h)
{
	roce_host *rh = calloc(1, sizeof(*rh));

	if (!rh) {
		sim_set_error(s, "roce: out of memory");
		return NULL;
	}
	rh->s = s;
	rh->h = h;
	rh->mtu = roce_path_mtu(sim_mtu(s));

	roce_opts *o = &rh->o;
	/* (the QP's timeout an operator sets for the distance, as MetaRoCE's
	 * initial timeout) */
	uint64_t rto = sim_rto_default(s);

	if (sim_opt_u64(s, "ack_every", 4, &o->ack_every) || sim_opt_time(s, "rto", rto, &o->rto_ns) ||
	    sim_opt_time(s, "cnp_interval", 50000, &o->cnp_interval_ns) ||
	    sim_opt_time(s, "dcqcn_timer", 55000, &o->timer_ns) ||
	    sim_opt_double(s, "dcqcn_g", 1.0 / 256, &o->g) ||
	    sim_opt_rate(s, "rai", 100000000, &o->rai_bps) ||
	    sim_opt_rate(s, "rhai", 1000000000, &o->rhai_bps) ||
	    sim_opt_rate(s, "min_rate", 100000000, &o->min_rate_bps) ||
	    sim_opt_u64(s, "fast_recovery", 5, &o->fr_steps) || sim_opt_u64(s, "window", 0, &o->window) ||
	    sim_opt_u64(s, "dcqcn", 1, &rh->dcqcn)) {
		free(rh);
		return NULL;
	}
	rh->pfc = sim_transport(s)->lossless;
	if (rh->dcqcn > 1) {
		sim_set_error(s, "transport.%s.dcqcn: %" PRIu64 " is not 0 (off) or 1 (on)",
			      sim_transport(s)->name, rh->dcqcn);
		free(rh);
		return NULL;
	}
	if (o->ack_every == 0 || o->rto_ns == 0 || o->timer_ns == 0 || o->g > 1 ||
	    o->min_rate_bps == 0 || o->window > UINT32_MAX || o->ack_every > UINT32_MAX) {
		sim_set_error(s, "transport.roce: ack_every, rto, dcqcn_timer and min_rate must be "
				 "positive, dcqcn_g at most 1, window below 2^32");
		free(rh);
		return NULL;
	}
	return rh;
}

static void roce_host_del(void *hs)
{
	roce_host *rh = hs;

	for (size_t i = 0; i < rh->nqps; i++)
		free(rh->qps[i]);
	for (size_t i = 0; i < rh->nrqs; i++)
		free(rh->rqs[i]);
	free(rh->qps);
	free(rh->rqs);
	free(rh->act);
	free(rh->tq);
	free(rh->trq);
	free(rh);
}

/* q (rq) changed: its invariants are checked after this event. */
static void touch_qp(roce_host *rh, roce_qp *q)
{
	roce_qp **v;

	if (q->dirty)
		return;
	v = grow_ptrs(rh->tq, rh->ntq, &rh->captq);
	if (!v) {
		sim_violation(rh->s, "roce host%" PRIu32 ": out of memory for the check list", rh->h->id);
		return;
	}
	rh->tq = v;
	rh->tq[rh->ntq++] = q;
	q->dirty = 1;
}

static void touch_rq(roce_host *rh, roce_rq *rq)
{
	roce_rq **v;

	if (rq->dirty)
		return;
	v = grow_ptrs(rh->trq, rh->ntrq, &rh->captrq);
	if (!v) {
		sim_violation(rh->s, "roce host%" PRIu32 ": out of memory for the check list", rh->h->id);
		return;
	}
	rh->trq = v;
	rh->trq[rh->ntrq++] = rq;
	rq->dirty = 1;
}

/* The plane and source port both ends of a flow use. */
static unsigned flow_plane(const roce_host *rh, const sim_flow *f)
{
	return f->plane >= 0 ? (unsigned)f->plane : f->id % sim_planes(rh->s);
}

static uint16_t flow_sport(const roce_host *rh, const sim_flow *f)
{
	return (uint16_t)(0xc000u | (sim_mix64(sim_seed(rh->s) ^ ((uint64_t)f->id << 1 | 1)) & 0x3fff));
}

static uint32_t flow_npkts(const roce_host *rh, const sim_flow *f)
{
	return (uint32_t)((f->bytes + rh->mtu - 1) / rh->mtu);
}

static void send_ctrl(roce_host *rh, roce_rq *rq, uint8_t type, uint32_t psn)
{
	sim_pkt *p = sim_pkt_new(rh->s, RHDR_LEN);

	if (!p) {
		sim_violation(rh->s, "roce: out of packet memory");
		return;
	}

	rhdr hd = {.type = type, .flow = rq->f->id, .psn = psn};

	memcpy(p->data, &hd, sizeof(hd));
	p->datalen = RHDR_LEN;
	p->len = CTRL_WIRE_LEN;
	p->dst_addr = sim_host_addr(rh->s, sim_host_get(rh->s, rq->f->src), rq->plane);
	p->src_port = rq->sport;
	p->dst_port = SIM_ROCE_PORT;
	p->ecn = SIM_ECN_NOT_ECT;
	if (rh->pfc && type == R_CNP)
		p->prio = SIM_PRIO_CTRL; /* as operators run it: CNPs outside the paused class */
	sim_send(rh->s, rh->h, rq->plane, p);
}

/* ------------------------------------------------------------ DCQCN */

static void dcqcn_catch_up(const roce_host *rh, roce_qp *q, uint64_t now)
{
	const roce_opts *o = &rh->o;

	if (now >= q->t_alpha_ns + o->timer_ns) {
		uint64_t n = (now - q->t_alpha_ns) / o->timer_ns;

		q->alpha *= pow(1 - o->g, (double)n);
		q->t_alpha_ns += n * o->timer_ns;
	}
	if (now < q->t_incr_ns + o->timer_ns)
		return;

	uint64_t n = (now - q->t_incr_ns) / o->timer_ns;

	q->t_incr_ns += n * o->timer_ns;
	for (uint64_t i = 0; i < n && (q->rc < q->line || q->rt < q->line); i++) {
		q->stage++;
		if (q->stage > 2 * o->fr_steps)
			q->rt += (double)o->rhai_bps; /* hyper increase */
		else if (q->stage > o->fr_steps)
			q->rt += (double)o->rai_bps;  /* additive increase */
		if (q->rt > q->line)
			q->rt = q->line;
		q->rc = (q->rt + q->rc) / 2;      /* fast recovery towards rt */
		if (q->line - q->rc < 1)
			q->rc = q->line;
	}
}

static void dcqcn_cnp(const roce_host *rh, roce_qp *q, uint64_t now)
{
	const roce_opts *o = &rh->o;

	dcqcn_catch_up(rh, q, now);
	q->rt = q->rc;
	q->rc *= 1 - q->alpha / 2;
	if (q->rc < (double)o->min_rate_bps)
		q->rc = (double)o->min_rate_bps;
	q->alpha = (1 - o->g) * q->alpha + o->g;
	q->stage = 0;
	q->t_incr_ns = now;
	q->t_alpha_ns = now;
}

/* ----------------------------------------------------------- sender */

static int qp_ready(const roce_host *rh, const roce_qp *q)
{
	return q->active && q->nxt < q->npkts &&
	       (rh->o.window == 0 || q->nxt - q->una < rh->o.window) &&
	       sim_port_up(rh->s, rh->h, q->plane);
}

static void send_data(roce_host *rh, roce_qp *q, uint64_t now)
{
	sim_flow *f = q->f;
	uint32_t psn = q->nxt;
	uint64_t off = (uint64_t)psn * rh->mtu;
	uint32_t pay = (uint32_t)(f->bytes - off < rh->mtu ? f->bytes - off : rh->mtu);
	sim_pkt *p = sim_pkt_new(rh->s, RHDR_LEN + pay);

	if (!p) {
		sim_violation(rh->s, "roce: out of packet memory");
		return;
	}

	rhdr hd = {.type = R_DATA, .flow = f->id, .psn = psn, .paylen = pay};

	memcpy(p->data, &hd, sizeof(hd));
	memcpy(p->data + RHDR_LEN, f->src_buf + off, pay);
	p->datalen = RHDR_LEN + pay;
	p->len = pay + SIM_WIRE_OVERHEAD + DATA_WIRE_EXTRA;
	p->dst_addr = sim_host_addr(rh->s, sim_host_get(rh->s, f->dst), q->plane);
	p->src_port = q->sport;
	p->dst_port = SIM_ROCE_PORT;
	p->ecn = SIM_ECN_ECT0;

	touch_qp(rh, q);
	if (q->una == q->max)
		q->last_progress_ns = now; /* first packet outstanding: RTO starts */
	if (psn < q->max)
		f->retx_pkts++;
	q->nxt++;
	if (q->nxt > q->max)
		q->max = q->nxt;

	dcqcn_catch_up(rh, q, now);

	double bits = (double)p->len * 8;
	uint64_t t = q->next_tx_ns > now ? q->next_tx_ns : now;
	uint64_t nic = rh->nic_next_ns[q->plane] > now ? rh->nic_next_ns[q->plane] : now;
	uint64_t line = sim_port_rate_bps(rh->s, rh->h, q->plane);

	q->next_tx_ns = t + (uint64_t)(bits * 1e9 / q->rc);
	rh->nic_next_ns[q->plane] = nic + ((uint64_t)p->len * 8000000000ull + line - 1) / line;
	sim_send(rh->s, rh->h, q->plane, p);
}

/* roce-pfc: the port's queue is full (paused, or ACKs queued): when to
 * look again (one frame time), else 0. */
static uint64_t nic_blocked(const roce_host *rh, unsigned plane, uint64_t now)
{
	uint64_t frame = (uint64_t)rh->mtu + SIM_WIRE_OVERHEAD + DATA_WIRE_EXTRA;
	uint64_t rate = sim_port_rate_bps(rh->s, rh->h, plane);

	if (!rh->pfc || sim_port_queue_bytes(rh->s, rh->h, plane) + frame <= PFC_NIC_FRAMES * frame)
		return 0;
	return now + (frame * 8000000000ull + rate - 1) / rate;
}

/* Sends what the NIC and the rate limiters allow now, then sets the host's
 * deadline to the next send time or retransmission timeout. */
static void pump(roce_host *rh, uint64_t now)
{
	for (;;) {
		int sent = 0;

		for (size_t i = 0; i < rh->nact; i++) {
			size_t k = (rh->rr + i) % rh->nact;
			roce_qp *q = rh->act[k];

			rh->visits++;
			if (!qp_ready(rh, q) || q->next_tx_ns > now || rh->nic_next_ns[q->plane] > now ||
			    nic_blocked(rh, q->plane, now))
				continue;
			send_data(rh, q, now);
			rh->rr = (k + 1) % rh->nact;
			sent = 1;
			break;
		}
		if (!sent)
			break;
	}

	uint64_t d = SIM_NEVER;

	for (size_t i = 0; i < rh->nact; i++) {
		roce_qp *q = rh->act[i];

		rh->visits++;
		if (q->una < q->max && q->last_progress_ns + rh->o.rto_ns < d)
			d = q->last_progress_ns + rh->o.rto_ns;
		if (qp_ready(rh, q)) {
			uint64_t t = q->next_tx_ns > rh->nic_next_ns[q->plane] ? q->next_tx_ns
									      : rh->nic_next_ns[q->plane];
			uint64_t b = nic_blocked(rh, q->plane, now);

			if (b > t)
				t = b;
			if (t < d)
				d = t;
		}
	}
	sim_set_deadline(rh->s, rh->h, d);
}

static void deactivate(roce_host *rh, roce_qp *q)
{
	q->active = 0;
	for (size_t i = 0; i < rh->nact; i++) {
		if (rh->act[i] == q) {
			rh->act[i] = rh->act[--rh->nact];
			break;
		}
	}
	if (rh->rr >= rh->nact)
		rh->rr = 0;
}

static void on_ack(roce_host *rh, roce_qp *q, uint32_t epsn, int nak, uint64_t now)
{
	if (!q->active)
		return;
	touch_qp(rh, q);
	if (epsn > q->max) {
		sim_violation(rh->s, "roce flow %" PRIu32 ": ACK for PSN %" PRIu32 " beyond sent %" PRIu32,
			      q->f->id, epsn, q->max);
		return;
	}
	if (epsn > q->una) {
		q->una = epsn;
		q->last_progress_ns = now;
	}
	if (nak && epsn == q->una && q->nxt > epsn) {
		q->nxt = epsn; /* go back N */
		q->last_progress_ns = now;
	}
	if (q->nxt < q->una)
		q->nxt = q->una;
	if (q->una == q->npkts) {
		deactivate(rh, q);
		sim_flow_done(rh->s, q->f, now, 0);
	}
}

static int roce_flow_start(void *hs, sim_flow *f, uint64_t now)
{
	roce_host *rh = hs;
	roce_qp *q = calloc(1, sizeof(*q));
	roce_qp **qps = q ? grow_ptrs(rh->qps, rh->nqps, &rh->capqps) : NULL;
	roce_qp **act = qps ? grow_ptrs(rh->act, rh->nact, &rh->capact) : NULL;

	if (qps)
		rh->qps = qps;
	if (act)
		rh->act = act;
	if (!act) {
		free(q);
		return MRP_ERR_NOMEM;
	}
	rh->qps[rh->nqps++] = q;
	rh->act[rh->nact++] = q;
	q->f = f;
	q->plane = flow_plane(rh, f);
	q->sport = flow_sport(rh, f);
	q->npkts = flow_npkts(rh, f);
	q->line = (double)sim_port_rate_bps(rh->s, rh->h, q->plane);
	q->rc = q->rt = q->line;
	q->alpha = 1;
	q->t_incr_ns = q->t_alpha_ns = now;
	/* A ring step between the same two ranks (conn_prev) runs on the
	 * previous step's queue pair in a collective library: DCQCN's state
	 * carries over, as the MetaRoCE model carries its window over. (Its
	 * UDP source port does not: each step hashes afresh, as MetaRoCE's
	 * new paths do.) */
	sim_flow *pf = f->conn_prev >= 0 ? sim_flow_get(rh->s, (size_t)f->conn_prev) : NULL;
	roce_qp *pq = pf && pf->src == f->src && pf->dst == f->dst ? pf->tx_ctx : NULL;
	if (pq && pq->plane == q->plane) {
		dcqcn_catch_up(rh, pq, now);
		q->rc = pq->rc;
		q->rt = pq->rt;
		q->alpha = pq->alpha;
		q->stage = pq->stage;
		q->t_incr_ns = pq->t_incr_ns;
		q->t_alpha_ns = pq->t_alpha_ns;
	}
	q->next_tx_ns = now;
	q->active = 1;
	f->tx_ctx = q;
	touch_qp(rh, q);
	pump(rh, now);
	return 0;
}

/* ---------------------------------------------------------- receiver */

static int roce_flow_accept(void *hs, sim_flow *f, uint64_t now)
{
	roce_host *rh = hs;
	roce_rq *rq = calloc(1, sizeof(*rq));
	roce_rq **rqs = rq ? grow_ptrs(rh->rqs, rh->nrqs, &rh->caprqs) : NULL;

	(void)now;
	if (!rqs) {
		free(rq);
		return MRP_ERR_NOMEM;
	}
	rh->rqs = rqs;
	rh->rqs[rh->nrqs++] = rq;
	rq->f = f;
	rq->plane = flow_plane(rh, f);
	rq->sport = flow_sport(rh, f);
	rq->npkts = flow_npkts(rh, f);
	f->rx_ctx = rq;
	return 0;
}

static void on_data(roce_host *rh, roce_rq *rq, const rhdr *hd, const sim_pkt *p, uint64_t now)
{
	sim_flow *f = rq->f;

	touch_rq(rh, rq);
	f->rx_bytes += hd->paylen; /* arrivals, for the time series */
	if (p->ecn == SIM_ECN_CE && rh->dcqcn &&
	    (!rq->cnp_sent || now >= rq->last_cnp_ns + rh->o.cnp_interval_ns)) {
		send_ctrl(rh, rq, R_CNP, 0);
		rq->cnp_sent = 1;
		rq->last_cnp_ns = now;
	}
	if (hd->psn == rq->epsn) {
		uint64_t off = (uint64_t)hd->psn * rh->mtu;
		uint64_t want = f->bytes - off < rh->mtu ? f->bytes - off : rh->mtu;

		if (hd->psn >= rq->npkts || hd->paylen != want || p->datalen != RHDR_LEN + hd->paylen) {
			sim_violation(rh->s, "roce flow %" PRIu32 ": bad data packet PSN %" PRIu32, f->id,
				      hd->psn);
			return;
		}
		memcpy(f->dst_buf + off, p->data + RHDR_LEN, hd->paylen);
		rq->epsn++;
		rq->nak_sent = 0;
		/* the last byte is placed: a SEND or WRITE_IMM completes at the
		 * receiver now (a plain WRITE shows its receiver nothing) */
		if (rq->epsn == rq->npkts && f->op != SIM_OP_WRITE)
			sim_flow_arrived(rh->s, f, now);
		if (++rq->unacked >= rh->o.ack_every || rq->epsn == rq->npkts) {
			send_ctrl(rh, rq, R_ACK, rq->epsn);
			rq->unacked = 0;
		}
	} else if (hd->psn < rq->epsn) {
		f->spurious_pkts++; /* a retransmission of something placed */
		send_ctrl(rh, rq, R_ACK, rq->epsn);
		rq->unacked = 0;
	} else if (!rq->nak_sent) {
		send_ctrl(rh, rq, R_NAK, rq->epsn);
		rq->nak_sent = 1;
		rq->unacked = 0;
	}
}

static void roce_on_packet(void *hs, unsigned plane, sim_pkt *p, uint64_t now)
{
	roce_host *rh = hs;
	rhdr hd;
	sim_flow *f = NULL;

	(void)plane;
	if (p->datalen >= RHDR_LEN) {
		memcpy(&hd, p->data, sizeof(hd));
		f = sim_flow_get(rh->s, hd.flow);
	}
	if (!f) {
		sim_violation(rh->s, "roce host%" PRIu32 ": packet for no flow", rh->h->id);
	} else if (hd.type == R_DATA) {
		if (f->dst != rh->h->id || !f->rx_ctx)
			sim_violation(rh->s, "roce flow %" PRIu32 ": data at host%" PRIu32, f->id, rh->h->id);
		else
			on_data(rh, f->rx_ctx, &hd, p, now);
	} else if (f->src != rh->h->id || !f->tx_ctx) {
		sim_violation(rh->s, "roce flow %" PRIu32 ": control packet at host%" PRIu32, f->id,
			      rh->h->id);
	} else if (hd.type == R_CNP) {
		roce_qp *q = f->tx_ctx;

		if (q->active && rh->dcqcn)
			dcqcn_cnp(rh, q, now);
	} else {
		on_ack(rh, f->tx_ctx, hd.psn, hd.type == R_NAK, now);
	}
	sim_pkt_free(rh->s, p);
	pump(rh, now);
}

static void roce_on_timer(void *hs, uint64_t now)
{
	roce_host *rh = hs;

	for (size_t i = 0; i < rh->nact; i++) {
		roce_qp *q = rh->act[i];

		rh->visits++;
		if (q->una < q->max && now >= q->last_progress_ns + rh->o.rto_ns) {
			touch_qp(rh, q);
			q->nxt = q->una; /* timeout: go back to the first unacked */
			q->last_progress_ns = now;
		}
	}
	pump(rh, now);
}

static void roce_on_link(void *hs, unsigned plane, int up, uint64_t now)
{
	roce_host *rh = hs;

	if (up) {
		/* whatever was in flight died with the link: resend at once */
		for (size_t i = 0; i < rh->nact; i++) {
			roce_qp *q = rh->act[i];

			rh->visits++;
			if (q->plane == plane) {
				touch_qp(rh, q);
				q->nxt = q->una;
				q->last_progress_ns = now;
			}
		}
	}
	pump(rh, now);
}

static void roce_on_steer(void *hs, const sim_steer *st, uint64_t now)
{
	roce_host *rh = hs;

	if (st->action != SIM_STEER_REROUTE)
		return; /* a QP is bound to its plane: drain/restore do nothing */
	for (size_t i = 0; i < rh->nact; i++) {
		roce_qp *q = rh->act[i];
		uint16_t old = q->sport;

		rh->visits++;
		if ((st->flow >= 0 && q->f->id != (uint64_t)st->flow) ||
		    (st->plane >= 0 && q->plane != (unsigned)st->plane))
			continue;
		while (q->sport == old)
			q->sport = (uint16_t)(0xc000u | (sim_rand(rh->s, rh->h) & 0x3fff));
	}
	pump(rh, now);
}

/* The invariants of one flow, from either end: 0, or 1 with err set. */
static int flow_check(const roce_qp *q, const roce_rq *rq, char *err, size_t errlen)
{
	if (q && !(q->una <= q->nxt && q->nxt <= q->max && q->max <= q->npkts)) {
		snprintf(err, errlen,
			 "flow %" PRIu32 ": PSNs out of order (una %" PRIu32 " nxt %" PRIu32
			 " max %" PRIu32 " npkts %" PRIu32 ")",
			 q->f->id, q->una, q->nxt, q->max, q->npkts);
		return 1;
	}
	if (q && rq && !(q->una <= rq->epsn && rq->epsn <= q->max)) {
		snprintf(err, errlen,
			 "flow %" PRIu32 ": acked %" PRIu32 " <= received %" PRIu32
			 " <= sent %" PRIu32 " does not hold",
			 q->f->id, q->una, rq->epsn, q->max);
		return 1;
	}
	if (q && q->f->done && q->una != q->npkts && q->f->status == 0) {
		snprintf(err, errlen, "flow %" PRIu32 ": done with %" PRIu32 " of %" PRIu32 " acked",
			 q->f->id, q->una, q->npkts);
		return 1;
	}
	if (rq && rq->epsn > rq->npkts) {
		snprintf(err, errlen, "flow %" PRIu32 ": received PSN %" PRIu32 " of %" PRIu32,
			 rq->f->id, rq->epsn, rq->npkts);
		return 1;
	}
	return 0;
}

/*
 * The QPs and receive sides this host changed since the last check (its
 * lists), each with the other end of its flow; the others have not changed.
 * A QP changes only while it is active, and the one that completes its flow
 * is checked after that event.
 */
static int roce_check(void *hs, char *err, size_t errlen)
{
	roce_host *rh = hs;
	int rc = 0;

	for (size_t i = 0; i < rh->ntq; i++) {
		roce_qp *q = rh->tq[i];

		rh->visits++;
		q->dirty = 0;
		if (rc == 0)
			rc = flow_check(q, q->f->rx_ctx, err, errlen);
	}
	rh->ntq = 0;
	for (size_t i = 0; i < rh->ntrq; i++) {
		roce_rq *rq = rh->trq[i];

		rh->visits++;
		rq->dirty = 0;
		if (rc == 0)
			rc = flow_check(rq->f->tx_ctx, rq, err, errlen);
	}
	rh->ntrq = 0;
	return rc;
}

uint64_t sim_roce_host_visits(const void *hs)
{
	return ((const roce_host *)hs)->visits;
}

const sim_transport_ops sim_roce_ops = {
	.name = "roce",
	.options = roce_options,
	.host_new = roce_host_new,
	.host_del = roce_host_del,
	.flow_accept = roce_flow_accept,
	.flow_start = roce_flow_start,
	.on_packet = roce_on_packet,
	.on_timer = roce_on_timer,
	.on_link = roce_on_link,
	.on_steer = roce_on_steer,
	.check = roce_check,
};

/* The same QPs on a lossless network: the switches run PFC (sim.c) in its
 * runs; the NIC holds data back while its paused port's queue is full. */
const sim_transport_ops sim_roce_pfc_ops = {
	.name = "roce-pfc",
	.options = roce_pfc_options,
	.host_new = roce_host_new,
	.host_del = roce_host_del,
	.flow_accept = roce_flow_accept,
	.flow_start = roce_flow_start,
	.on_packet = roce_on_packet,
	.on_timer = roce_on_timer,
	.on_link = roce_on_link,
	.on_steer = roce_on_steer,
	.check = roce_check,
	.lossless = 1,
};
