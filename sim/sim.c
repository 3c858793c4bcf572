/*
 * metaroce-sim core: the world, the event loop, links, switches, hosts and
 * flows. See sim.h for the model and README.md for the scenario format.
 */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evq.h"
#include "sim.h"
#include "units.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Labels of the random streams derived from the seed (sim_rng_seed). */
#define TAG_LINK (1ull << 56)
#define TAG_HOST (2ull << 56)
#define TAG_FLOW (3ull << 56)
#define TAG_SALT (4ull << 56)
#define TAG_PATTERN (5ull << 56)
#define TAG_LINK_GE (6ull << 56)

/* Event kinds. */
enum {
	EV_TX_DONE,    /* obj link, arg epoch: the head packet is serialized */
	EV_ARRIVE,     /* obj packet, arg epoch of packet->link: reached far end */
	EV_TIMER,      /* obj host: a deadline may have passed */
	EV_FLOW_START, /* obj flow */
	EV_SCENARIO,   /* arg index into cfg->events */
	EV_SAMPLE,     /* a time-series sample is due */
	EV_PFC,        /* obj link, arg 1 pause / 0 resume: a PFC frame reached its sender */
};

#define POOL_SLAB 64

struct sim_switch {
	uint8_t kind; /* SIM_NODE_SWITCH / _LEAF / _SPINE */
	uint8_t plane;
	uint32_t index;
	uint64_t salt;
	sim_link **port;
	uint32_t nports;
};

typedef struct sim_plane {
	sim_plane_config cfg; /* hosts_per_leaf resolved */
	sim_switch *sw;       /* single: sw[0]; leaf-spine: leaves, then spines */
	uint32_t nsw;
	sim_switch *leaf, *spine;
	unsigned fabric_down; /* leaf-spine cables that are down */
} sim_plane;

/* A cable in the topology: the link that leaves the named node. */
typedef struct cable_ref {
	sim_node node;
	uint32_t port; /* switch port; unused for a host */
} cable_ref;

struct sim {
	const sim_config *cfg; /* &own: the simulator's copy of the caller's */
	sim_config own;
	const sim_transport_ops *ops;
	uint64_t now;
	uint64_t seed;
	sim_evq q;

	sim_plane planes[SIM_MAX_PLANES];
	unsigned nplanes;
	sim_host *hosts;
	uint32_t nhosts;
	sim_link *links;
	size_t nlinks;
	uint64_t base_rtt_max; /* sim_base_rtt_max(), once asked (0: not yet) */
	sim_flow *flows;
	size_t nflows, flows_left;
	sim_link **evlink; /* per scenario event: the cable it names, or NULL */

	/* collectives: the flows waiting for each flow (CSR: dependents of flow
	 * i are dep_list[dep_off[i] .. dep_off[i+1]-1]) and shared buffers */
	uint32_t *dep_off, *dep_list;
	uint8_t **shared;
	size_t nshared;

	sim_pkt *free_pkts[SIM_PKT_POOLS];
	void **slabs;
	size_t nslabs, slabcap;

	int pfc; /* the switches run PFC (a lossless transport) */

	sim_ts ts;                /* time series; ts.cap == 0 when off */
	uint64_t *ts_flow_last;   /* rx_bytes of each recorded flow at the last sample */

	sim_stats st;
	int fatal;
	char errbuf[256];
};

/* ------------------------------------------------------------- names */

const char *sim_drop_name(unsigned cause)
{
	static const char *const names[SIM_DROP_N] = {"overflow", "loss", "down", "blackhole",
						      "noroute"};

	return cause < SIM_DROP_N ? names[cause] : "unknown";
}

const char *sim_op_name(unsigned op)
{
	static const char *const names[SIM_OP_N] = {"write", "write_imm", "send"};

	return op < SIM_OP_N ? names[op] : "unknown";
}

const char *sim_steer_name(unsigned action)
{
	static const char *const names[SIM_STEER_N] = {"reroute", "drain", "restore"};

	return action < SIM_STEER_N ? names[action] : "unknown";
}

const char *sim_event_name(unsigned type)
{
	static const char *const names[SIM_EVT_N] = {"link_down", "link_up",   "plane_down",
						     "plane_up",  "blackhole", "steer",
						     "set_link"};

	return type < SIM_EVT_N ? names[type] : "unknown";
}

char *sim_node_name(sim_node n, char *buf, size_t buflen)
{
	switch (n.kind) {
	case SIM_NODE_HOST:
		snprintf(buf, buflen, "host%" PRIu32, n.index);
		break;
	case SIM_NODE_SWITCH:
		snprintf(buf, buflen, "switch");
		break;
	case SIM_NODE_LEAF:
		snprintf(buf, buflen, "leaf%" PRIu32, n.index);
		break;
	case SIM_NODE_SPINE:
		snprintf(buf, buflen, "spine%" PRIu32, n.index);
		break;
	default:
		snprintf(buf, buflen, "?");
	}
	return buf;
}

int sim_node_parse(const char *s, sim_node *n)
{
	static const struct {
		const char *prefix;
		uint8_t kind;
	} kinds[] = {
		{"host", SIM_NODE_HOST},
		{"leaf", SIM_NODE_LEAF},
		{"spine", SIM_NODE_SPINE},
		{"switch", SIM_NODE_SWITCH},
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t len = strlen(kinds[i].prefix);
		uint64_t v;

		if (strncmp(s, kinds[i].prefix, len) != 0)
			continue;
		if (kinds[i].kind == SIM_NODE_SWITCH && (s[len] == '\0' || strcmp(s + len, "0") == 0)) {
			n->kind = SIM_NODE_SWITCH;
			n->index = 0;
			return 0;
		}
		if (kinds[i].kind == SIM_NODE_SWITCH)
			return MRP_ERR_INVAL;
		if (sim_parse_u64(s + len, &v) != 0 || v > UINT32_MAX)
			return MRP_ERR_INVAL;
		n->kind = kinds[i].kind;
		n->index = (uint32_t)v;
		return 0;
	}
	return MRP_ERR_INVAL;
}

char *sim_link_name(const sim_link *l, char *buf, size_t buflen)
{
	char a[24], b[24];

	snprintf(buf, buflen, "p%u:%s->%s", (unsigned)l->plane, sim_node_name(l->from, a, sizeof(a)),
		 sim_node_name(l->to, b, sizeof(b)));
	return buf;
}

/* ------------------------------------------------------------ messages */

void sim_violation(sim *s, const char *fmt, ...)
{
	s->st.violations++;
	if (s->st.nmsgs < sizeof(s->st.msgs) / sizeof(s->st.msgs[0])) {
		char *m = s->st.msgs[s->st.nmsgs++];
		int n = snprintf(m, sizeof(s->st.msgs[0]), "t=%" PRIu64 "ns: ", s->now);
		va_list ap;

		va_start(ap, fmt);
		if (n > 0 && (size_t)n < sizeof(s->st.msgs[0]))
			vsnprintf(m + n, sizeof(s->st.msgs[0]) - (size_t)n, fmt, ap);
		va_end(ap);
	}
}

void sim_set_error(sim *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->errbuf, sizeof(s->errbuf), fmt, ap);
	va_end(ap);
}

static void schedule(sim *s, uint64_t t, uint32_t kind, uint32_t arg, void *obj)
{
	assert(t >= s->now);
	if (sim_evq_push(&s->q, t, kind, arg, obj) != 0)
		s->fatal = MRP_ERR_NOMEM;
}

/* ------------------------------------------------------------- packets */

/* Data bytes of the packets of each pool: small (control packets), one
 * 4 KB-MTU data packet with its header, the largest. */
static const uint32_t pool_cap[SIM_PKT_POOLS] = {SIM_PKT_SMALL, SIM_PKT_MID, SIM_PKT_MAX};

static unsigned pool_of(size_t cap)
{
	return cap <= SIM_PKT_SMALL ? 0 : cap <= SIM_PKT_MID ? 1 : 2;
}

static int pool_grow(sim *s, unsigned which)
{
	size_t cap = pool_cap[which];
	size_t elt = (sizeof(sim_pkt) + cap + 15) & ~(size_t)15;

	if (s->nslabs == s->slabcap) {
		size_t n = s->slabcap ? s->slabcap * 2 : 16;
		void **v = realloc(s->slabs, n * sizeof(*v));

		if (!v)
			return MRP_ERR_NOMEM;
		s->slabs = v;
		s->slabcap = n;
	}

	char *slab = malloc(elt * POOL_SLAB);

	if (!slab)
		return MRP_ERR_NOMEM;
	s->slabs[s->nslabs++] = slab;
	for (size_t i = 0; i < POOL_SLAB; i++) {
		sim_pkt *p = (sim_pkt *)(void *)(slab + i * elt);

		memset(p, 0, sizeof(*p));
		p->data = (uint8_t *)(p + 1);
		p->cap = (uint32_t)cap;
		p->pool = (uint8_t)which;
		p->next = s->free_pkts[which];
		s->free_pkts[which] = p;
		POISON((char *)p + sizeof(p->next), elt - sizeof(p->next));
	}
	return 0;
}

sim_pkt *sim_pkt_new(sim *s, size_t cap)
{
	if (cap > SIM_PKT_MAX)
		return NULL;

	unsigned which = pool_of(cap);

	if (!s->free_pkts[which] && pool_grow(s, which) != 0)
		return NULL;

	sim_pkt *p = s->free_pkts[which];
	size_t size = pool_cap[which];

	UNPOISON((char *)p + sizeof(p->next), sizeof(*p) - sizeof(p->next) + size);
	s->free_pkts[which] = p->next;
	p->next = NULL;
	p->link = NULL;
	p->src_addr = p->dst_addr = 0;
	p->src_port = p->dst_port = 0;
	p->ecn = 0;
	p->plane = 0;
	p->prio = SIM_PRIO_DATA;
	p->len = p->datalen = 0;
	p->sent_ns = 0;
	p->ingress = NULL;
	s->st.pkts_live++;
	return p;
}

void sim_pkt_free(sim *s, sim_pkt *p)
{
	if (!p)
		return;
	assert(p->pool < SIM_PKT_POOLS && p->data == (uint8_t *)(p + 1));
	p->next = s->free_pkts[p->pool];
	s->free_pkts[p->pool] = p;
	s->st.pkts_live--;
	POISON((char *)p + sizeof(p->next),
	       sizeof(*p) - sizeof(p->next) + pool_cap[p->pool]);
}

/* --------------------------------------------------------------- links */

static void link_drop(sim *s, sim_link *l, sim_pkt *p, unsigned cause)
{
	l->drops[cause]++;
	sim_pkt_free(s, p);
}

/* The packet l sends next: SIM_PRIO_CTRL first (strict priority), then
 * SIM_PRIO_DATA unless a PFC pause holds that class; NULL if none may go. */
static sim_pkt *link_next(const sim_link *l)
{
	if (l->hi_head)
		return l->hi_head;
	return l->pfc_paused ? NULL : l->head;
}

/* Starts serializing link_next(l), which must exist. */
static void link_start_tx(sim *s, sim_link *l)
{
	sim_pkt *p = link_next(l);
	/* len * 8 bits at rate_bps, in ns, exact over a busy period: the
	 * remainder of the division carries to the next packet. */
	uint64_t num = (uint64_t)p->len * 8000000000ull + l->ser_rem;

	l->txp = p;
	if (l->pfc_paused)
		l->pfc_paused_tx++; /* only another class passes a pause */
	l->ser_rem = num % l->rate_bps;
	l->busy = 1;
	schedule(s, s->now + num / l->rate_bps, EV_TX_DONE, l->epoch, l);
}

/* ------------------------------------------------------------------ PFC */

/* A PFC pause frame on the wire: 64 bytes, preamble and inter-frame gap. */
#define PFC_FRAME_LEN 84

/* The switch at the end of link in sends a pause (or resume) frame for it
 * back over the reverse direction; it takes effect at in's sender after
 * the frame's serialization and the wire's delay. */
static void pfc_send(sim *s, sim_link *in, int pause)
{
	const sim_link *back = in->peer;
	uint64_t t = s->now + back->delay_ns + (PFC_FRAME_LEN * 8000000000ull + back->rate_bps - 1) / back->rate_bps;

	if (pause)
		in->pfc_pauses++;
	else
		in->pfc_resumes++;
	in->pfc_xoff_sent = pause;
	schedule(s, t, EV_PFC, (uint32_t)pause, in);
}

static void link_start_tx(sim *s, sim_link *l);

/* A pause frame reached l's sender: no new frame starts while paused (the
 * one on the wire finishes); a resume restarts the queue. */
static void pfc_apply(sim *s, sim_link *l, int pause)
{
	if (pause && !l->pfc_paused) {
		l->pfc_paused = 1;
		l->pfc_paused_since = s->now;
	} else if (!pause && l->pfc_paused) {
		l->pfc_paused = 0;
		l->pfc_paused_ns += s->now - l->pfc_paused_since;
		if (!l->busy && link_next(l))
			link_start_tx(s, l);
	}
}

/* Lossless admission of p (from a switch ingress) to a switch output
 * queue: only the ingress's xoff + headroom limits it. */
static int pfc_admit(const sim *s, const sim_pkt *p)
{
	const sim_link *in = p->ingress;

	return in->pfc_ingress_bytes + p->len <= s->cfg->pfc_xoff + in->pfc_headroom;
}

static void pfc_enqueued(sim *s, sim_pkt *p)
{
	sim_link *in = p->ingress;

	in->pfc_ingress_bytes += p->len;
	if (in->pfc_ingress_bytes > in->pfc_max_ingress)
		in->pfc_max_ingress = in->pfc_ingress_bytes;
	if (!in->pfc_xoff_sent && in->pfc_ingress_bytes > s->cfg->pfc_xoff)
		pfc_send(s, in, 1);
}

/* p left the switch (sent on, or dropped from its output queue). */
static void pfc_dequeued(sim *s, sim_pkt *p)
{
	sim_link *in = p->ingress;

	p->ingress = NULL;
	if (!in)
		return;
	in->pfc_ingress_bytes -= p->len;
	if (in->pfc_xoff_sent && in->pfc_ingress_bytes <= s->cfg->pfc_xon)
		pfc_send(s, in, 0);
}

/* Offers p to the output queue of l. Returns 0 when queued (or silently
 * black-holed), MRP_ERR_STATE when the link is down, MRP_ERR_FULL on overflow. */
static int link_offer(sim *s, sim_link *l, sim_pkt *p)
{
	if (l->state == SIM_LINK_DOWN) {
		link_drop(s, l, p, SIM_DROP_DOWN);
		return MRP_ERR_STATE;
	}
	if (l->state == SIM_LINK_BLACKHOLE) {
		link_drop(s, l, p, SIM_DROP_BLACKHOLE);
		return 0;
	}
	if (p->prio == SIM_PRIO_CTRL ? l->hi_qbytes + p->len > l->queue_bytes
	    : p->ingress           ? !pfc_admit(s, p)
				   : l->qbytes + p->len > l->queue_bytes) {
		link_drop(s, l, p, SIM_DROP_OVERFLOW);
		return MRP_ERR_FULL;
	}
	if (p->ingress)
		pfc_enqueued(s, p);
	if (l->qbytes > l->ecn_bytes && (p->ecn == SIM_ECN_ECT0 || p->ecn == SIM_ECN_ECT1)) {
		p->ecn = SIM_ECN_CE;
		l->ce_marks++;
	}
	p->next = NULL;
	p->link = l;
	if (p->prio == SIM_PRIO_CTRL) {
		if (l->hi_tail)
			l->hi_tail->next = p;
		else
			l->hi_head = p;
		l->hi_tail = p;
		l->hi_qbytes += p->len;
	} else {
		if (l->tail)
			l->tail->next = p;
		else
			l->head = p;
		l->tail = p;
	}
	l->qbytes += p->len;
	if (l->qbytes > l->max_qbytes)
		l->max_qbytes = l->qbytes;
	if (l->qbytes > l->win_max_qbytes)
		l->win_max_qbytes = l->qbytes;
	if (!l->busy && link_next(l))
		link_start_tx(s, l);
	return 0;
}

static void host_after(sim *s, sim_host *h);

/*
 * Whether the packet now leaving l is lost on the wire. loss_burst <= 1:
 * independently with probability loss. loss_burst > 1: a Gilbert-Elliott
 * chain, from good to bad with probability p = loss * r / (1 - loss) and
 * from bad to good with r = 1 / loss_burst per step, losing every packet
 * sent in the bad state: on average a fraction p / (p + r) = loss, in
 * bursts of geometric length with mean loss_burst steps.
 *
 * The chain steps in time, once per slot: the time a full-size packet (the
 * MTU's payload and the wire overhead) takes on the link at its rate. So a
 * burst is an impairment of the wire that lasts loss_burst slots on average
 * whether or not packets cross it: back-to-back full-size packets see one
 * step each (bursts of loss_burst packets), and a sender that slows down or
 * waits does not stretch the burst. The chain is drawn as a timeline of
 * good and bad periods from time 0 (the first one bad with probability
 * loss, each a geometric number of slots), from the link's own stream
 * (ge_rng), whatever crosses the link: every transport run on a scenario
 * and seed meets the same bursts at the same moments, so that their
 * figures compare how each deals with one impairment, not two draws of it
 * (before, the chain was stepped per packet from the stream that jitter
 * also draws from, and on a 64 MB flow at 200 Gbit/s one transport met two
 * 40 us bursts where the other met none). No draw at all when loss is 0.
 */
static uint64_t ge_slots(sim_rng *rng, double q)
{
	if (q >= 1)
		return 1;
	double u = sim_rng_double(rng);
	double n = 1 + floor(log(u > 0 ? u : 1e-300) / log(1 - q));
	return n < 1e12 ? (uint64_t)n : (uint64_t)1e12;
}

static int wire_lost(sim *s, sim_link *l)
{
	if (l->loss <= 0)
		return 0;
	if (l->loss_burst <= 1)
		return sim_rng_double(&l->rng) < l->loss;
	if (l->loss >= 1)
		return 1;

	double r = 1 / l->loss_burst, p = l->loss * r / (1 - l->loss);
	double slot = l->rate_bps ? (double)(s->cfg->mtu + SIM_WIRE_OVERHEAD) * 8e9 /
					    (double)l->rate_bps
				  : 1;
	if (!l->ge_started) {
		l->ge_started = 1;
		l->ge_bad = sim_rng_double(&l->ge_rng) < l->loss;
		l->ge_until = (uint64_t)(slot * (double)ge_slots(&l->ge_rng, l->ge_bad ? r : p));
	}
	while (s->now >= l->ge_until) {
		l->ge_bad = !l->ge_bad;
		uint64_t len = (uint64_t)(slot * (double)ge_slots(&l->ge_rng, l->ge_bad ? r : p));
		l->ge_until += len ? len : 1;
	}
	return l->ge_bad;
}

/* When the packet now leaving l reaches the far end: delay, plus a uniform
 * draw in [0, jitter] when there is jitter, never before the previous
 * packet of l (a link is FIFO: jitter, or a delay lowered by set_link,
 * never reorders its packets). */
static uint64_t wire_arrival(sim *s, sim_link *l)
{
	uint64_t t = s->now + l->delay_ns;

	if (l->jitter_ns)
		t += l->jitter_ns == SIM_NEVER ? 0 : sim_rng_below(&l->rng, l->jitter_ns + 1);
	if (t < l->last_arrive_ns)
		t = l->last_arrive_ns;
	l->last_arrive_ns = t;
	return t;
}

/* A host's NIC queue drained to the level its transport asked for. */
static void nic_drained(sim *s, sim_link *l)
{
	sim_host *h = l->from.kind == SIM_NODE_HOST ? &s->hosts[l->from.index] : NULL;

	l->notify_bytes = SIM_NEVER;
	if (h && s->ops->on_nic) {
		s->ops->on_nic(h->ts, l->plane, s->now);
		host_after(s, h);
	}
}

static void link_tx_done(sim *s, sim_link *l, uint32_t epoch)
{
	if (epoch != l->epoch || !l->busy)
		return; /* the link went down meanwhile: the queue is gone */

	sim_pkt *p = l->txp;

	if (!p || (p != l->head && p != l->hi_head)) {
		char name[64];

		sim_violation(s, "%s: the packet serialized is not at the head of its queue",
			      sim_link_name(l, name, sizeof(name)));
		return;
	}
	if (l->qbytes < p->len) {
		char name[64];

		sim_violation(s, "%s: queue bytes %" PRIu64 " below head packet %" PRIu32,
			      sim_link_name(l, name, sizeof(name)), l->qbytes, p->len);
		l->qbytes = p->len;
	}
	if (p == l->hi_head) {
		l->hi_head = p->next;
		if (!l->hi_head)
			l->hi_tail = NULL;
		l->hi_qbytes -= p->len;
	} else {
		l->head = p->next;
		if (!l->head)
			l->tail = NULL;
	}
	l->txp = NULL;
	l->qbytes -= p->len;
	l->tx_bytes += p->len;
	l->tx_pkts++;
	pfc_dequeued(s, p);
	if (wire_lost(s, l))
		link_drop(s, l, p, SIM_DROP_LOSS);
	else
		schedule(s, wire_arrival(s, l), EV_ARRIVE, l->epoch, p);

	if (link_next(l)) {
		link_start_tx(s, l);
	} else {
		l->busy = 0;
		l->ser_rem = 0;
	}
	if (l->notify_bytes != SIM_NEVER && l->qbytes <= l->notify_bytes)
		nic_drained(s, l);
}

/* Sets the state of one direction; taking it down loses everything queued
 * and in flight (the epoch makes their pending events stale). */
static void link_set_state(sim *s, sim_link *l, unsigned state)
{
	if (state == SIM_LINK_DOWN && l->state != SIM_LINK_DOWN) {
		for (int c = 0; c < 2; c++) {
			sim_pkt *p = c ? l->hi_head : l->head;

			while (p) {
				sim_pkt *next = p->next;

				pfc_dequeued(s, p);
				link_drop(s, l, p, SIM_DROP_DOWN);
				p = next;
			}
		}
		l->head = l->tail = l->hi_head = l->hi_tail = l->txp = NULL;
		l->qbytes = l->hi_qbytes = 0;
		l->busy = 0;
		l->ser_rem = 0;
		l->epoch++;
		l->notify_bytes = SIM_NEVER; /* on_link() tells the host instead */
	}
	l->state = (uint8_t)state;
}

/* ------------------------------------------------------------- routing */

uint64_t sim_ecmp_hash(uint32_t src_addr, uint32_t dst_addr, uint16_t src_port,
		       uint16_t dst_port, uint64_t salt)
{
	uint64_t a = ((uint64_t)src_addr << 32 | dst_addr) ^ salt;
	uint64_t b = (uint64_t)src_port << 32 | (uint64_t)dst_port << 16 | SIM_PROTO_UDP;

	return sim_mix64(sim_mix64(a) ^ b ^ (salt >> 17));
}

/* The spine a leaf sends p to (for a host under leaf dleaf), or -1. Spines
 * whose cable from this leaf or to dleaf is down are not candidates (the
 * fabric's routing has withdrawn them); black holes still are. */
static int64_t ecmp_spine(const sim_plane *pl, const sim_switch *leaf, uint32_t dleaf, const sim_pkt *p)
{
	uint32_t spines = pl->cfg.spines, hpl = pl->cfg.hosts_per_leaf;
	uint64_t h = sim_ecmp_hash(p->src_addr, p->dst_addr, p->src_port, p->dst_port, leaf->salt);

	if (pl->fabric_down == 0)
		return (int64_t)(h % spines);

	uint32_t usable = 0;

	for (uint32_t sp = 0; sp < spines; sp++)
		usable += leaf->port[hpl + sp]->state != SIM_LINK_DOWN &&
			  pl->spine[sp].port[dleaf]->state != SIM_LINK_DOWN;
	if (usable == 0)
		return -1;

	uint64_t k = h % usable;

	for (uint32_t sp = 0; sp < spines; sp++) {
		if (leaf->port[hpl + sp]->state == SIM_LINK_DOWN ||
		    pl->spine[sp].port[dleaf]->state == SIM_LINK_DOWN)
			continue;
		if (k-- == 0)
			return sp;
	}
	return -1;
}

static void switch_forward(sim *s, sim_switch *sw, sim_pkt *p)
{
	sim_plane *pl = &s->planes[sw->plane];
	unsigned dplane;
	sim_host *dh = sim_addr_host(s, p->dst_addr, &dplane);
	sim_link *out = NULL;

	if (dh && dplane == sw->plane) {
		uint32_t hpl = pl->cfg.hosts_per_leaf;

		switch (sw->kind) {
		case SIM_NODE_SWITCH:
			out = sw->port[dh->id];
			break;
		case SIM_NODE_LEAF:
			if (dh->id / hpl == sw->index) {
				out = sw->port[dh->id % hpl];
			} else {
				int64_t sp = ecmp_spine(pl, sw, dh->id / hpl, p);

				if (sp >= 0)
					out = sw->port[hpl + (uint32_t)sp];
			}
			break;
		case SIM_NODE_SPINE:
			out = sw->port[dh->id / hpl];
			break;
		}
	}
	if (!out) {
		s->st.noroute++;
		sim_pkt_free(s, p);
		return;
	}
	/* lossless (its class): accounted to its ingress */
	p->ingress = s->pfc && p->prio == SIM_PRIO_DATA ? p->link : NULL;
	link_offer(s, out, p);
}

/* --------------------------------------------------------------- hosts */

static void host_after(sim *s, sim_host *h)
{
	char err[128];

	if (!s->ops->check)
		return;
	s->st.checks++;
	err[0] = '\0';
	if (s->ops->check(h->ts, err, sizeof(err)) != 0)
		sim_violation(s, "host%" PRIu32 ": %s", h->id, err[0] ? err : "check failed");
}

static void arm_timer(sim *s, sim_host *h, uint64_t at)
{
	if (at < s->now)
		at = s->now;
	if (at < h->armed) {
		h->armed = at;
		schedule(s, at, EV_TIMER, 0, h);
	}
}

void sim_set_deadline(sim *s, sim_host *h, uint64_t at_ns)
{
	h->deadline = at_ns;
	if (at_ns != SIM_NEVER)
		arm_timer(s, h, at_ns);
}

static void host_timer(sim *s, sim_host *h, uint64_t t)
{
	/* Only the earliest armed event is live: later ones were superseded. */
	if (t != h->armed)
		return;
	h->armed = SIM_NEVER;
	if (h->deadline == SIM_NEVER)
		return;
	if (h->deadline > s->now) {
		arm_timer(s, h, h->deadline); /* moved later since armed */
		return;
	}
	h->deadline = SIM_NEVER;
	s->ops->on_timer(h->ts, s->now);
	host_after(s, h);
}

static void pkt_arrive(sim *s, sim_pkt *p, uint32_t epoch)
{
	sim_link *l = p->link;

	if (epoch != l->epoch) {
		link_drop(s, l, p, SIM_DROP_DOWN); /* lost on a wire that went down */
		return;
	}
	if (l->to.kind == SIM_NODE_HOST) {
		sim_host *h = l->to_obj;

		p->next = NULL;
		p->link = NULL;
		s->ops->on_packet(h->ts, l->plane, p, s->now);
		host_after(s, h);
	} else {
		switch_forward(s, l->to_obj, p);
	}
}

int sim_send(sim *s, sim_host *h, unsigned plane, sim_pkt *p)
{
	if (plane >= s->nplanes || p->datalen > p->cap) {
		sim_pkt_free(s, p);
		return MRP_ERR_INVAL;
	}
	p->src_addr = sim_host_addr(s, h, plane);
	p->plane = (uint8_t)plane;
	p->sent_ns = s->now;
	if (p->len == 0)
		p->len = p->datalen + SIM_WIRE_OVERHEAD;
	if (p->len > (1u << 20)) {
		sim_pkt_free(s, p);
		return MRP_ERR_INVAL;
	}
	int rc = link_offer(s, h->nic[plane], p);

	if (rc == MRP_ERR_FULL)
		s->st.nic_drops++;
	return rc;
}

uint64_t sim_rand(sim *s, sim_host *h)
{
	(void)s;
	return sim_rng_next(&h->rng);
}

uint32_t sim_host_addr(const sim *s, const sim_host *h, unsigned plane)
{
	(void)s;
	return (uint32_t)10 << 24 | (uint32_t)plane << 16 | h->id;
}

sim_host *sim_addr_host(const sim *s, uint32_t addr, unsigned *plane)
{
	unsigned p = (addr >> 16) & 0xff;
	uint32_t id = addr & 0xffff;

	if (addr >> 24 != 10 || p >= s->nplanes || id >= s->nhosts)
		return NULL;
	if (plane)
		*plane = p;
	return &s->hosts[id];
}

int sim_port_up(const sim *s, const sim_host *h, unsigned plane)
{
	return plane < s->nplanes && h->nic[plane]->state != SIM_LINK_DOWN;
}

uint64_t sim_port_rate_bps(const sim *s, const sim_host *h, unsigned plane)
{
	return plane < s->nplanes ? h->nic[plane]->rate_bps : 0;
}

uint64_t sim_port_queue_bytes(const sim *s, const sim_host *h, unsigned plane)
{
	return plane < s->nplanes ? h->nic[plane]->qbytes : 0;
}

uint64_t sim_port_room(const sim *s, const sim_host *h, unsigned plane)
{
	const sim_link *l = plane < s->nplanes ? h->nic[plane] : NULL;

	return l && l->queue_bytes > l->qbytes ? l->queue_bytes - l->qbytes : 0;
}

int sim_port_notify(sim *s, sim_host *h, unsigned plane, uint64_t bytes)
{
	if (plane >= s->nplanes)
		return MRP_ERR_INVAL;

	sim_link *l = h->nic[plane];

	if (l->qbytes <= bytes || bytes == SIM_NEVER) {
		l->notify_bytes = SIM_NEVER;
		return 1;
	}
	l->notify_bytes = bytes;
	return 0;
}

/* --------------------------------------------------------------- flows */

/* Collectives: f's data arrived (kind SIM_DEP_RECEIVED) or f is complete
 * (SIM_DEP_SENT); the flows waiting for that start when their last
 * dependency is satisfied (now), or fail with it (status < 0: f failed
 * before satisfying them). */
static void coll_release(sim *s, sim_flow *f, unsigned kind, uint64_t now_ns, int status)
{
	if (!s->dep_off)
		return;
	for (uint32_t i = s->dep_off[f->id]; i < s->dep_off[f->id + 1]; i++) {
		sim_flow *d = &s->flows[s->dep_list[i]];
		int mine = 0;

		for (uint32_t j = 0; j < d->ndeps; j++)
			mine |= d->deps[j] == f->id && d->dep_kind[j] == kind;
		if (!mine || d->done || d->waiting == 0)
			continue;
		if (status < 0) {
			d->waiting = 0;
			d->start_ns = now_ns;
			sim_flow_done(s, d, now_ns, status);
		} else if (--d->waiting == 0) {
			d->start_ns = now_ns;
			schedule(s, now_ns, EV_FLOW_START, 0, d);
		}
	}
}

void sim_flow_arrived(sim *s, sim_flow *f, uint64_t now_ns)
{
	if (f->arrived_ns != SIM_NEVER || f->done)
		return;
	f->arrived_ns = now_ns;
	coll_release(s, f, SIM_DEP_RECEIVED, now_ns, 0);
}

void sim_flow_done(sim *s, sim_flow *f, uint64_t now_ns, int status)
{
	if (f->done) {
		sim_violation(s, "flow %" PRIu32 " completed twice", f->id);
		return;
	}
	if (status == 0)
		sim_flow_arrived(s, f, now_ns); /* complete: every byte is there */
	f->done = 1;
	f->status = status;
	f->finish_ns = now_ns;
	s->flows_left--;
	s->st.flows_done++;
	if (status < 0 && f->arrived_ns == SIM_NEVER)
		coll_release(s, f, SIM_DEP_RECEIVED, now_ns, status);
	coll_release(s, f, SIM_DEP_SENT, now_ns, status);
}

static void flow_start(sim *s, sim_flow *f)
{
	sim_host *src = &s->hosts[f->src], *dst = &s->hosts[f->dst];
	int rc = 0;

	if (f->done)
		return; /* failed with a dependency */
	/* a collective step starts only when its inputs have arrived (and the
	 * sends it waits for are complete) */
	for (uint32_t i = 0; i < f->ndeps; i++) {
		const sim_flow *d = &s->flows[f->deps[i]];

		if (f->dep_kind[i] == SIM_DEP_RECEIVED) {
			if (d->arrived_ns == SIM_NEVER || d->arrived_ns > s->now ||
			    f->start_ns < d->arrived_ns)
				sim_violation(s, "flow %" PRIu32 " (step %" PRIu32 " of rank %" PRIu32
					      ") started before its input flow %" PRIu32 " arrived",
					      f->id, f->step, f->rank, d->id);
		} else if (!d->done || d->finish_ns > s->now || f->start_ns < d->finish_ns) {
			sim_violation(s, "flow %" PRIu32 " (step %" PRIu32 " of rank %" PRIu32
				      ") started before its input flow %" PRIu32 " completed",
				      f->id, f->step, f->rank, d->id);
		}
	}
	if (s->ops->flow_accept) {
		rc = s->ops->flow_accept(dst->ts, f, s->now);
		host_after(s, dst);
	}
	if (rc >= 0) {
		rc = s->ops->flow_start(src->ts, f, s->now);
		host_after(s, src);
	}
	if (rc < 0 && !f->done)
		sim_flow_done(s, f, s->now, rc);
}

size_t sim_verify(sim *s)
{
	size_t bad = 0;

	for (size_t i = 0; i < s->nflows; i++) {
		sim_flow *f = &s->flows[i];

		if (f->unchecked) {
			f->verified = 0; /* shared buffers: nothing to compare */
			continue;
		}
		f->verified = f->done && f->status == 0 && memcmp(f->src_buf, f->dst_buf, f->bytes) == 0;
		if (f->done && f->status == 0 && !f->verified)
			bad++;
	}
	s->st.verify_failures = bad;
	return bad;
}

/* ------------------------------------------------------ scenario events */

/* The host at one end of a cable, or NULL for a leaf-spine cable. */
static sim_host *cable_host(sim_link *l)
{
	if (l->to.kind == SIM_NODE_HOST)
		return l->to_obj;
	if (l->peer->to.kind == SIM_NODE_HOST)
		return l->peer->to_obj;
	return NULL;
}

/* Sets one direction. A leaf-spine link going down is withdrawn from ECMP
 * (fabric_down counts the plane's leaf-spine links that are down). */
static void link_dir_set(sim *s, sim_link *l, unsigned state)
{
	int was_down = l->state == SIM_LINK_DOWN, down = state == SIM_LINK_DOWN;

	link_set_state(s, l, state);
	if (was_down != down && !cable_host(l))
		s->planes[l->plane].fabric_down += down ? 1u : (unsigned)-1;
}

/* Sets l, or l and its peer (both), and tells a host on the cable at once
 * (on_link) when its port went down or came up: the port is its NIC's
 * output (sim_port_up()), so a fault of the host's receive direction alone
 * is silent, and so is a black hole. */
static void link_change(sim *s, sim_link *l, int both, unsigned state)
{
	sim_host *h = cable_host(l);
	sim_link *port = h ? h->nic[l->plane] : NULL;
	int was_down = port && port->state == SIM_LINK_DOWN;

	link_dir_set(s, l, state);
	if (both)
		link_dir_set(s, l->peer, state);
	if (!port || was_down == (port->state == SIM_LINK_DOWN))
		return;
	if (s->ops->on_link) {
		s->ops->on_link(h->ts, l->plane, was_down /* so now up */, s->now);
		host_after(s, h);
	}
}

/* Sets both directions of the cable of l. */
static void cable_set(sim *s, sim_link *l, unsigned state)
{
	link_change(s, l, 1, state);
}

static void link_params(sim_link *l, const sim_link_params *lp, unsigned mask);

/* The link(s) a cable event acts on: the named direction, or l and its
 * peer. */
static void event_links(sim_link *l, unsigned dir, sim_link **a, sim_link **b)
{
	*a = dir == SIM_DIR_IN ? l->peer : l;
	*b = dir == SIM_DIR_BOTH ? l->peer : NULL;
}

static void scenario_event(sim *s, uint32_t idx)
{
	const sim_event_config *e = &s->cfg->events[idx];

	sim_link *la, *lb;

	switch (e->type) {
	case SIM_EVT_LINK_DOWN:
	case SIM_EVT_LINK_UP:
	case SIM_EVT_BLACKHOLE: {
		unsigned st = e->type == SIM_EVT_LINK_DOWN	 ? SIM_LINK_DOWN
			      : e->type == SIM_EVT_LINK_UP ? SIM_LINK_UP
							   : SIM_LINK_BLACKHOLE;

		event_links(s->evlink[idx], e->dir, &la, &lb);
		link_change(s, la, lb != NULL, st);
		break;
	}
	case SIM_EVT_SET_LINK:
		event_links(s->evlink[idx], e->dir, &la, &lb);
		link_params(la, &e->v, e->mask);
		if (lb)
			link_params(lb, &e->v, e->mask);
		break;
	case SIM_EVT_PLANE_DOWN:
	case SIM_EVT_PLANE_UP: {
		unsigned p = e->plane < 0 ? 0 : (unsigned)e->plane;
		int up = e->type == SIM_EVT_PLANE_UP;

		for (uint32_t i = 0; i < s->nhosts; i++) {
			sim_link *l = s->hosts[i].nic[p];

			if (!up)
				cable_set(s, l, SIM_LINK_DOWN);
			else if (l->state == SIM_LINK_DOWN)
				cable_set(s, l, SIM_LINK_UP);
		}
		break;
	}
	case SIM_EVT_STEER: {
		sim_host *h = &s->hosts[e->host];
		sim_steer st = {.action = e->action, .plane = e->plane, .flow = e->flow};

		if (s->ops->on_steer) {
			s->ops->on_steer(h->ts, &st, s->now);
			host_after(s, h);
		}
		break;
	}
	}
}

/* ---------------------------------------------------------- time series */

/* Room for max_samples samples of every link and of the recorded flows. */
static int ts_init(sim *s)
{
	const sim_ts_config *tc = &s->cfg->ts;
	size_t cap = tc->max_samples;

	if (tc->interval_ns == 0)
		return 0;
	s->ts.interval_ns = tc->interval_ns;
	s->ts.nflows = s->nflows < tc->max_flows ? s->nflows : tc->max_flows;
	s->ts.nlinks = s->nlinks;
	s->ts.link_maxq = calloc(s->nlinks * cap, sizeof(uint64_t));
	s->ts.link_tx = calloc(s->nlinks * cap, sizeof(uint64_t));
	s->ts.flow_bytes = calloc(s->ts.nflows * cap + 1, sizeof(uint64_t));
	s->ts_flow_last = calloc(s->ts.nflows + 1, sizeof(uint64_t));
	if (!s->ts.link_maxq || !s->ts.link_tx || !s->ts.flow_bytes || !s->ts_flow_last)
		return MRP_ERR_NOMEM;
	s->ts.cap = cap;
	schedule(s, s->ts.interval_ns, EV_SAMPLE, 0, NULL);
	return 0;
}

static void ts_free(sim *s)
{
	free(s->ts.link_maxq);
	free(s->ts.link_tx);
	free(s->ts.flow_bytes);
	free(s->ts_flow_last);
}

/* Full: every two neighbouring samples become one of twice the interval
 * (largest queue: the larger; bytes: the sum). */
static void ts_halve(sim *s)
{
	sim_ts *ts = &s->ts;
	size_t half = ts->nsamples / 2;

	for (size_t l = 0; l < ts->nlinks; l++) {
		uint64_t *q = &ts->link_maxq[l * ts->cap], *x = &ts->link_tx[l * ts->cap];

		for (size_t i = 0; i < half; i++) {
			q[i] = q[2 * i] > q[2 * i + 1] ? q[2 * i] : q[2 * i + 1];
			x[i] = x[2 * i] + x[2 * i + 1];
		}
	}
	for (size_t f = 0; f < ts->nflows; f++) {
		uint64_t *b = &ts->flow_bytes[f * ts->cap];

		for (size_t i = 0; i < half; i++)
			b[i] = b[2 * i] + b[2 * i + 1];
	}
	ts->nsamples = half;
	ts->interval_ns *= 2;
}

static void ts_sample(sim *s)
{
	sim_ts *ts = &s->ts;
	size_t i = ts->nsamples;

	for (size_t k = 0; k < ts->nlinks; k++) {
		sim_link *l = &s->links[k];

		ts->link_maxq[k * ts->cap + i] = l->win_max_qbytes;
		ts->link_tx[k * ts->cap + i] = l->tx_bytes - l->ts_tx_bytes;
		l->win_max_qbytes = l->qbytes;
		l->ts_tx_bytes = l->tx_bytes;
	}
	for (size_t f = 0; f < ts->nflows; f++) {
		uint64_t b = s->flows[f].rx_bytes;

		ts->flow_bytes[f * ts->cap + i] = b - s->ts_flow_last[f];
		s->ts_flow_last[f] = b;
	}
	ts->nsamples++;
	if (ts->nsamples == ts->cap)
		ts_halve(s);
	/* the series follows the run: no sample keeps an idle world going */
	if (sim_evq_peek_time(&s->q) != SIM_NEVER)
		schedule(s, (ts->nsamples + 1) * ts->interval_ns, EV_SAMPLE, 0, NULL);
}

const sim_ts *sim_get_ts(const sim *s)
{
	return s->ts.cap ? &s->ts : NULL;
}

/* ------------------------------------------------------------ the loop */

static void dispatch(sim *s, const sim_ev *ev)
{
	switch (ev->kind) {
	case EV_TX_DONE:
		link_tx_done(s, ev->obj, ev->arg);
		break;
	case EV_ARRIVE:
		pkt_arrive(s, ev->obj, ev->arg);
		break;
	case EV_TIMER:
		host_timer(s, ev->obj, ev->t);
		break;
	case EV_FLOW_START:
		flow_start(s, ev->obj);
		break;
	case EV_SCENARIO:
		scenario_event(s, ev->arg);
		break;
	case EV_SAMPLE:
		ts_sample(s);
		break;
	case EV_PFC:
		pfc_apply(s, ev->obj, (int)ev->arg);
		break;
	default:
		assert(0 && "unknown event kind");
	}
}

int sim_step(sim *s)
{
	sim_ev ev;

	if (s->fatal)
		return s->fatal;
	if (!sim_evq_pop(&s->q, &ev))
		return 0;
	s->now = ev.t;
	s->st.events++;
	dispatch(s, &ev);
	return s->fatal ? s->fatal : 1;
}

int sim_run(sim *s, uint64_t until_ns)
{
	if (s->cfg->duration_ns < until_ns)
		until_ns = s->cfg->duration_ns;
	while (s->nflows == 0 || s->flows_left > 0) {
		uint64_t t = sim_evq_peek_time(&s->q);

		if (t == SIM_NEVER)
			return SIM_RUN_IDLE;
		if (t > until_ns) {
			if (until_ns > s->now)
				s->now = until_ns;
			return SIM_RUN_LIMIT;
		}

		int rc = sim_step(s);

		if (rc < 0)
			return rc;
	}
	return SIM_RUN_DONE;
}

/* ------------------------------------------------------------- access */

uint64_t sim_now(const sim *s)
{
	return s->now;
}

uint64_t sim_seed(const sim *s)
{
	return s->seed;
}

uint32_t sim_mtu(const sim *s)
{
	return s->cfg->mtu;
}

unsigned sim_planes(const sim *s)
{
	return s->nplanes;
}

uint32_t sim_hosts(const sim *s)
{
	return s->nhosts;
}

sim_host *sim_host_get(const sim *s, uint32_t id)
{
	return id < s->nhosts ? &s->hosts[id] : NULL;
}

size_t sim_flow_count(const sim *s)
{
	return s->nflows;
}

sim_flow *sim_flow_get(const sim *s, size_t id)
{
	return id < s->nflows ? &s->flows[id] : NULL;
}

size_t sim_link_count(const sim *s)
{
	return s->nlinks;
}

sim_link *sim_link_get(const sim *s, size_t i)
{
	return i < s->nlinks ? &s->links[i] : NULL;
}

/*
 * The longest round trip between two hosts over the cables as the scenario
 * built them (their delays, before any set_link event; no queueing, no
 * serialization, no jitter): a host's cable both ways at each end, and
 * between two leaves the slowest spine each way. What a handshake between
 * the two farthest hosts would measure on an idle network, and what a
 * deployment sets its timers for (sim/README.md, "transport").
 */
uint64_t sim_base_rtt_max(sim *s)
{
	if (s->base_rtt_max)
		return s->base_rtt_max;
	uint64_t host = 0, fabric = 0;
	uint32_t nleaf = 0, nspine = 0;
	for (size_t i = 0; i < s->nlinks; i++) {
		const sim_link *l = &s->links[i];
		uint64_t both = l->peer ? l->delay_ns + l->peer->delay_ns : 0;
		if (l->from.kind == SIM_NODE_HOST && both > host)
			host = both;
		if (l->from.kind == SIM_NODE_LEAF && l->to.kind == SIM_NODE_SPINE) {
			nleaf = l->from.index + 1 > nleaf ? l->from.index + 1 : nleaf;
			nspine = l->to.index + 1 > nspine ? l->to.index + 1 : nspine;
		}
	}
	/* leaf a to leaf b (a != b) over the slowest spine, there and back,
	 * plane by plane: up[a][s] leaf a to spine s, down[s][b] back down */
	uint64_t *up = nleaf && nspine ? calloc((size_t)nleaf * nspine * 2, sizeof(*up)) : NULL;
	for (unsigned p = 0; up && p < s->nplanes; p++) {
		uint64_t *down = up + (size_t)nleaf * nspine;
		memset(up, 0, (size_t)nleaf * nspine * 2 * sizeof(*up));
		for (size_t i = 0; i < s->nlinks; i++) {
			const sim_link *l = &s->links[i];
			if (l->plane != p)
				continue;
			if (l->from.kind == SIM_NODE_LEAF && l->to.kind == SIM_NODE_SPINE)
				up[(size_t)l->from.index * nspine + l->to.index] = l->delay_ns;
			else if (l->from.kind == SIM_NODE_SPINE && l->to.kind == SIM_NODE_LEAF)
				down[(size_t)l->to.index * nspine + l->from.index] = l->delay_ns;
		}
		for (uint32_t a = 0; a < nleaf; a++)
			for (uint32_t b = a + 1; b < nleaf; b++) {
				uint64_t ab = 0, ba = 0;
				for (uint32_t sp = 0; sp < nspine; sp++) {
					uint64_t x = up[(size_t)a * nspine + sp] +
						     down[(size_t)b * nspine + sp];
					uint64_t y = up[(size_t)b * nspine + sp] +
						     down[(size_t)a * nspine + sp];
					ab = x > ab ? x : ab;
					ba = y > ba ? y : ba;
				}
				fabric = ab + ba > fabric ? ab + ba : fabric;
			}
	}
	free(up);
	s->base_rtt_max = 2 * host + fabric;
	if (!s->base_rtt_max)
		s->base_rtt_max = 1;
	return s->base_rtt_max;
}

uint64_t sim_rto_default(sim *s)
{
	uint64_t rtt = sim_base_rtt_max(s);
	return rtt < 1000000 / 3 ? 1000000 : 3 * rtt;
}

sim_link *sim_link_find(const sim *s, const char *name)
{
	char buf[64];

	for (size_t i = 0; i < s->nlinks; i++)
		if (strcmp(sim_link_name(&s->links[i], buf, sizeof(buf)), name) == 0)
			return &s->links[i];
	return NULL;
}

const sim_transport_ops *sim_transport(const sim *s)
{
	return s->ops;
}

const sim_config *sim_get_config(const sim *s)
{
	return s->cfg;
}

const sim_stats *sim_get_stats(const sim *s)
{
	return &s->st;
}

sim_switch *sim_switch_get(const sim *s, unsigned p, unsigned kind, uint32_t index)
{
	if (p >= s->nplanes)
		return NULL;

	const sim_plane *pl = &s->planes[p];

	switch (kind) {
	case SIM_NODE_SWITCH:
		return pl->cfg.fabric == SIM_FABRIC_SINGLE && index == 0 ? &pl->sw[0] : NULL;
	case SIM_NODE_LEAF:
		return pl->cfg.fabric == SIM_FABRIC_LEAFSPINE && index < pl->cfg.leaves ? &pl->leaf[index]
											 : NULL;
	case SIM_NODE_SPINE:
		return pl->cfg.fabric == SIM_FABRIC_LEAFSPINE && index < pl->cfg.spines ? &pl->spine[index]
											 : NULL;
	}
	return NULL;
}

uint64_t sim_switch_salt(const sim_switch *sw)
{
	return sw->salt;
}

sim_link *sim_switch_port(const sim_switch *sw, uint32_t port)
{
	return port < sw->nports ? sw->port[port] : NULL;
}

/* -------------------------------------------------------- transport options */

const char *sim_opt_get(const sim *s, const char *key)
{
	const sim_config *cfg = s->cfg;

	for (size_t i = cfg->nopts; i-- > 0;) {
		const sim_opt *o = &cfg->opts[i];

		if (strcmp(o->transport, s->ops->name) == 0 && strcmp(o->key, key) == 0)
			return o->value;
	}
	return NULL;
}

static const sim_opt *opt_find(const sim *s, const char *key)
{
	const sim_config *cfg = s->cfg;

	for (size_t i = cfg->nopts; i-- > 0;) {
		const sim_opt *o = &cfg->opts[i];

		if (strcmp(o->transport, s->ops->name) == 0 && strcmp(o->key, key) == 0)
			return o;
	}
	return NULL;
}

static int opt_bad(sim *s, const sim_opt *o, const char *what)
{
	sim_set_error(s, "%s:%d: transport.%s.%s: '%s' is not %s", s->cfg->name ? s->cfg->name : "scenario",
		      o->line, o->transport, o->key, o->value, what);
	return MRP_ERR_INVAL;
}

int sim_opt_u64(sim *s, const char *key, uint64_t def, uint64_t *out)
{
	const sim_opt *o = opt_find(s, key);

	*out = def;
	if (o && sim_parse_u64(o->value, out) != 0)
		return opt_bad(s, o, "a whole number");
	return 0;
}

int sim_opt_time(sim *s, const char *key, uint64_t def, uint64_t *out)
{
	const sim_opt *o = opt_find(s, key);

	*out = def;
	if (o && sim_parse_time(o->value, out) != 0)
		return opt_bad(s, o, "a time (e.g. 10us)");
	return 0;
}

int sim_opt_bytes(sim *s, const char *key, uint64_t def, uint64_t *out)
{
	const sim_opt *o = opt_find(s, key);

	*out = def;
	if (o && sim_parse_bytes(o->value, out) != 0)
		return opt_bad(s, o, "a size (e.g. 64KB)");
	return 0;
}

int sim_opt_rate(sim *s, const char *key, uint64_t def, uint64_t *out)
{
	const sim_opt *o = opt_find(s, key);

	*out = def;
	if (o && sim_parse_rate(o->value, out) != 0)
		return opt_bad(s, o, "a rate (e.g. 100Gbps)");
	return 0;
}

int sim_opt_double(sim *s, const char *key, double def, double *out)
{
	const sim_opt *o = opt_find(s, key);

	*out = def;
	if (o && sim_parse_double(o->value, out) != 0)
		return opt_bad(s, o, "a number");
	return 0;
}

/* ------------------------------------------------------- configuration */

void sim_config_init(sim_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->seed = 1;
	cfg->duration_ns = 1000000000ull;
	cfg->mtu = 4096;
	cfg->hosts = 2;
	cfg->planes = 1;
	cfg->max_buffer_bytes = 8ull << 30;
	cfg->ts.max_samples = 1000;
	cfg->ts.top_links = 8;
	cfg->ts.max_flows = 64;
	cfg->coll_entry = -1;
	cfg->pfc_xoff = 200000;
	cfg->pfc_xon = 160000;

	sim_link_params lp = {
		.rate_bps = 100000000000ull,
		.delay_ns = 1000,
		.queue_bytes = 1000000,
		.ecn_bytes = 100000,
		.loss = 0,
	};

	for (unsigned p = 0; p < SIM_MAX_PLANES; p++) {
		cfg->plane[p].fabric = SIM_FABRIC_SINGLE;
		cfg->plane[p].host_link = lp;
		cfg->plane[p].fabric_link = lp;
	}
}

void sim_config_free(sim_config *cfg)
{
	for (size_t i = 0; i < cfg->nopts; i++) {
		free(cfg->opts[i].transport);
		free(cfg->opts[i].key);
		free(cfg->opts[i].value);
	}
	free(cfg->opts);
	free(cfg->cables);
	free(cfg->flows);
	free(cfg->events);
	free(cfg->name);
	for (size_t i = 0; i < cfg->ts.nlinks; i++)
		free(cfg->ts.links[i]);
	free(cfg->ts.links);
	for (size_t i = 0; i < cfg->ncolls; i++) {
		free(cfg->colls[i].ranks);
		free(cfg->colls[i].sizes);
	}
	free(cfg->colls);
	memset(cfg, 0, sizeof(*cfg));
}

/* Room for element n of an array growing 4, 8, 16, ...: returns the array
 * (moved or not), or NULL when out of memory (the old array stays valid). */
static void *grow(void *v, size_t n, size_t elt)
{
	if (n != 0 && (n < 4 || (n & (n - 1)) != 0))
		return v;
	return realloc(v, (n ? n * 2 : 4) * elt);
}

#define APPEND(arr, n, item)                                               \
	do {                                                               \
		void *nv_ = grow((arr), (n), sizeof(*(arr)));              \
		if (!nv_)                                                  \
			return MRP_ERR_NOMEM;                              \
		(arr) = nv_;                                               \
		(arr)[(n)++] = *(item);                                    \
	} while (0)

int sim_config_add_flow(sim_config *cfg, const sim_flow_config *fc)
{
	APPEND(cfg->flows, cfg->nflows, fc);
	return 0;
}

int sim_config_add_event(sim_config *cfg, const sim_event_config *ec)
{
	APPEND(cfg->events, cfg->nevents, ec);
	return 0;
}

int sim_config_add_cable(sim_config *cfg, const sim_cable_config *cc)
{
	APPEND(cfg->cables, cfg->ncables, cc);
	return 0;
}

int sim_config_add_coll(sim_config *cfg, const sim_coll_config *cc)
{
	void *nv = grow(cfg->colls, cfg->ncolls, sizeof(*cc));

	if (!nv) {
		free(cc->ranks);
		free(cc->sizes);
		return MRP_ERR_NOMEM;
	}
	cfg->colls = nv;
	cfg->colls[cfg->ncolls++] = *cc;
	return 0;
}

int sim_config_add_opt(sim_config *cfg, const char *transport, const char *key, const char *value,
		       int line)
{
	sim_opt o = {
		.transport = strdup(transport),
		.key = strdup(key),
		.value = strdup(value),
		.line = line,
	};

	sim_opt *v = o.transport && o.key && o.value ? grow(cfg->opts, cfg->nopts, sizeof(o)) : NULL;

	if (!v) {
		free(o.transport);
		free(o.key);
		free(o.value);
		return MRP_ERR_NOMEM;
	}
	cfg->opts = v;
	cfg->opts[cfg->nopts++] = o;
	return 0;
}

/* A copy of n elements of elt bytes with the capacity grow() expects for n
 * (so sim_config_add_*() keep working on the copy); NULL only when out of
 * memory (n == 0 gives NULL too, and is no error). */
static void *dup_array(const void *v, size_t n, size_t elt)
{
	size_t cap = 4;

	if (n == 0)
		return NULL;
	while (cap < n)
		cap *= 2;

	void *d = malloc(cap * elt);

	if (d)
		memcpy(d, v, n * elt);
	return d;
}

int sim_config_copy(sim_config *dst, const sim_config *src)
{
	*dst = *src;
	dst->name = NULL;
	dst->cables = NULL;
	dst->flows = NULL;
	dst->events = NULL;
	dst->opts = NULL;
	dst->ncables = dst->nflows = dst->nevents = dst->nopts = 0;
	dst->ts.links = NULL;
	dst->ts.nlinks = 0;
	dst->colls = NULL;
	dst->ncolls = 0;
	if (src->name && !(dst->name = strdup(src->name)))
		goto nomem;
	if (src->ncables && !(dst->cables = dup_array(src->cables, src->ncables, sizeof(*src->cables))))
		goto nomem;
	dst->ncables = src->ncables;
	if (src->nflows && !(dst->flows = dup_array(src->flows, src->nflows, sizeof(*src->flows))))
		goto nomem;
	dst->nflows = src->nflows;
	if (src->nevents && !(dst->events = dup_array(src->events, src->nevents, sizeof(*src->events))))
		goto nomem;
	dst->nevents = src->nevents;
	for (size_t i = 0; i < src->nopts; i++) {
		const sim_opt *o = &src->opts[i];

		if (sim_config_add_opt(dst, o->transport, o->key, o->value, o->line) != 0)
			goto nomem;
	}
	for (size_t i = 0; i < src->ts.nlinks; i++)
		if (sim_config_add_ts_link(dst, src->ts.links[i]) != 0)
			goto nomem;
	for (size_t i = 0; i < src->ncolls; i++) {
		sim_coll_config cc = src->colls[i];

		cc.ranks = NULL;
		cc.sizes = NULL;
		if (src->colls[i].ranks && src->colls[i].nranks) {
			cc.ranks = malloc(src->colls[i].nranks * sizeof(*cc.ranks));
			if (!cc.ranks)
				goto nomem;
			memcpy(cc.ranks, src->colls[i].ranks, src->colls[i].nranks * sizeof(*cc.ranks));
		}
		if (src->colls[i].sizes && src->colls[i].nsizes) {
			cc.sizes = malloc(src->colls[i].nsizes * sizeof(*cc.sizes));
			if (!cc.sizes) {
				free(cc.ranks);
				goto nomem;
			}
			memcpy(cc.sizes, src->colls[i].sizes, src->colls[i].nsizes * sizeof(*cc.sizes));
		}
		if (sim_config_add_coll(dst, &cc) != 0) /* frees both on error */
			goto nomem;
	}
	return 0;

nomem:
	sim_config_free(dst);
	return MRP_ERR_NOMEM;
}

int sim_config_add_ts_link(sim_config *cfg, const char *name)
{
	char *d = strdup(name);
	char **v = d ? grow(cfg->ts.links, cfg->ts.nlinks, sizeof(*v)) : NULL;

	if (!v) {
		free(d);
		return MRP_ERR_NOMEM;
	}
	cfg->ts.links = v;
	cfg->ts.links[cfg->ts.nlinks++] = d;
	return 0;
}

void sim_flow_config_init(sim_flow_config *fc)
{
	memset(fc, 0, sizeof(*fc));
	fc->pattern = SIM_PAT_NONE;
	fc->bytes = 1000000;
	fc->op = SIM_OP_WRITE;
	fc->plane = -1;
}

static size_t flow_spec_count(const sim_config *cfg, const sim_flow_config *fc)
{
	switch (fc->pattern) {
	case SIM_PAT_INCAST:
		return fc->senders ? fc->senders : cfg->hosts - 1;
	case SIM_PAT_PERMUTATION:
		return cfg->hosts;
	case SIM_PAT_ALL_TO_ALL:
		return (size_t)cfg->hosts * (cfg->hosts - 1);
	default:
		return 1;
	}
}

size_t sim_config_flow_count(const sim_config *cfg)
{
	size_t n = 0;

	for (size_t i = 0; i < cfg->nflows; i++)
		n += flow_spec_count(cfg, &cfg->flows[i]);
	for (size_t i = 0; i < cfg->ncolls; i++) {
		const sim_coll_config *cc = &cfg->colls[i];
		uint32_t nr = sim_coll_nranks(cfg, cc);

		if (sim_coll_selected(cfg, i) && nr >= 2)
			n += (size_t)sim_coll_steps(cc->type, nr) * nr * cc->channels;
	}
	return n;
}

static uint32_t hosts_per_leaf(const sim_config *cfg, unsigned p)
{
	const sim_plane_config *pc = &cfg->plane[p];

	if (pc->fabric != SIM_FABRIC_LEAFSPINE)
		return cfg->hosts;
	if (pc->hosts_per_leaf)
		return pc->hosts_per_leaf;
	return pc->leaves ? (cfg->hosts + pc->leaves - 1) / pc->leaves : 0;
}

__attribute__((format(printf, 5, 6))) static int fail(char *err, size_t errlen, const sim_config *cfg,
						       int line, const char *fmt, ...)
{
	int n;
	va_list ap;

	if (line > 0)
		n = snprintf(err, errlen, "%s:%d: ", cfg->name ? cfg->name : "scenario", line);
	else
		n = snprintf(err, errlen, "%s: ", cfg->name ? cfg->name : "scenario");
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return MRP_ERR_INVAL;
}

/* Resolves r in plane p to the node and port whose output link it names. */
static int port_resolve(const sim_config *cfg, unsigned p, const sim_port_ref *r, cable_ref *out,
			char *why, size_t whylen)
{
	const sim_plane_config *pc = &cfg->plane[p];
	uint32_t hpl = hosts_per_leaf(cfg, p);
	sim_node nd = r->node, peer = r->peer;
	char nm[24], pn[24];
	uint64_t nports;

	sim_node_name(nd, nm, sizeof(nm));
	out->node = nd;
	out->port = 0;
	switch (nd.kind) {
	case SIM_NODE_HOST:
		if (nd.index >= cfg->hosts) {
			snprintf(why, whylen, "%s does not exist (hosts: %" PRIu32 ")", nm, cfg->hosts);
			return MRP_ERR_INVAL;
		}
		return 0;
	case SIM_NODE_SWITCH:
		if (pc->fabric != SIM_FABRIC_SINGLE) {
			snprintf(why, whylen, "plane %u is a leaf-spine fabric: it has no '%s'", p, nm);
			return MRP_ERR_INVAL;
		}
		nports = cfg->hosts;
		break;
	case SIM_NODE_LEAF:
	case SIM_NODE_SPINE: {
		uint32_t count = nd.kind == SIM_NODE_LEAF ? pc->leaves : pc->spines;

		if (pc->fabric != SIM_FABRIC_LEAFSPINE) {
			snprintf(why, whylen, "plane %u has a single switch: it has no '%s'", p, nm);
			return MRP_ERR_INVAL;
		}
		if (nd.index >= count) {
			snprintf(why, whylen, "%s does not exist in plane %u (0-%" PRIu32 ")", nm, p,
				 count - 1);
			return MRP_ERR_INVAL;
		}
		nports = nd.kind == SIM_NODE_LEAF ? (uint64_t)hpl + pc->spines : pc->leaves;
		break;
	}
	default:
		snprintf(why, whylen, "not a node");
		return MRP_ERR_INVAL;
	}

	if (r->port >= 0) {
		if ((uint64_t)r->port >= nports) {
			snprintf(why, whylen, "port %" PRId64 " of %s is out of range (0-%" PRIu64 ")",
				 r->port, nm, nports - 1);
			return MRP_ERR_INVAL;
		}
		if (nd.kind == SIM_NODE_LEAF && (uint64_t)r->port < hpl &&
		    (uint64_t)nd.index * hpl + (uint64_t)r->port >= cfg->hosts) {
			snprintf(why, whylen, "port %" PRId64 " of %s has no host", r->port, nm);
			return MRP_ERR_INVAL;
		}
		out->port = (uint32_t)r->port;
		return 0;
	}

	sim_node_name(peer, pn, sizeof(pn));
	if (nd.kind == SIM_NODE_SWITCH && peer.kind == SIM_NODE_HOST && peer.index < cfg->hosts) {
		out->port = peer.index;
		return 0;
	}
	if (nd.kind == SIM_NODE_LEAF && peer.kind == SIM_NODE_HOST && peer.index < cfg->hosts &&
	    peer.index / hpl == nd.index) {
		out->port = peer.index % hpl;
		return 0;
	}
	if (nd.kind == SIM_NODE_LEAF && peer.kind == SIM_NODE_SPINE && peer.index < pc->spines) {
		out->port = hpl + peer.index;
		return 0;
	}
	if (nd.kind == SIM_NODE_SPINE && peer.kind == SIM_NODE_LEAF && peer.index < pc->leaves) {
		out->port = peer.index;
		return 0;
	}
	snprintf(why, whylen, "%s has no port facing %s in plane %u", nm, pn, p);
	return MRP_ERR_INVAL;
}

/* The loss model's values (those mask sets): loss in 0-1, loss_burst 0 or
 * at least 1, and below 1 loss for a bursty one. 0, or 1 with "key: why". */
static int link_model_bad(const sim_link_params *lp, unsigned mask, char *why, size_t whylen)
{
	if ((mask & SIM_LP_LOSS) && !(lp->loss >= 0 && lp->loss <= 1)) {
		snprintf(why, whylen, "loss: %g is not in 0-1", lp->loss);
		return 1;
	}
	if ((mask & SIM_LP_BURST) && !(lp->loss_burst == 0 || lp->loss_burst >= 1)) {
		snprintf(why, whylen, "loss_burst: %g is not 0 or at least 1 (packets)", lp->loss_burst);
		return 1;
	}
	if ((mask & SIM_LP_BURST) && (mask & SIM_LP_LOSS) && lp->loss_burst > 1 && lp->loss >= 1) {
		snprintf(why, whylen, "loss_burst: bursts need a loss below 1");
		return 1;
	}
	return 0;
}

static int event_plane(const sim_config *cfg, const sim_event_config *e)
{
	return e->plane >= 0 ? e->plane : (cfg->planes == 1 ? 0 : -1);
}

/* Buffer bytes collective i needs at size: 2 x its flow bytes, or 2 x one
 * chunk when they are above verify_max (shared buffers). *shared is set. */
static uint64_t coll_buffer_bytes(const sim_config *cfg, size_t i, uint64_t size, int *shared)
{
	const sim_coll_config *cc = &cfg->colls[i];
	uint32_t n = sim_coll_nranks(cfg, cc);
	uint64_t chunk = sim_coll_chunk(cc->type, n, cc->channels, size);
	uint64_t flows = (uint64_t)sim_coll_steps(cc->type, n) * n * cc->channels;

	*shared = flows > UINT64_MAX / 2 / chunk || 2 * flows * chunk > cc->verify_max;
	return *shared ? 2 * chunk : 2 * flows * chunk;
}

/* Checks the collectives of cfg; adds the buffer bytes the selected ones
 * need to *total. */
static int check_colls(const sim_config *cfg, uint64_t *total, char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->ncolls; i++) {
		const sim_coll_config *cc = &cfg->colls[i];
		uint32_t n = sim_coll_nranks(cfg, cc);
		int shared;

		if (cc->type >= SIM_COLL_N)
			return fail(err, errlen, cfg, cc->line, "collectives[%zu].type: unknown", i);
		if (n < 2 || n > cfg->hosts)
			return fail(err, errlen, cfg, cc->line,
				    "collectives[%zu].ranks: %" PRIu32 " ranks is out of range (2-%" PRIu32
				    ")",
				    i, n, cfg->hosts);
		if (cc->type == SIM_COLL_ALLREDUCE_RD && (n & (n - 1)) != 0)
			return fail(err, errlen, cfg, cc->line,
				    "collectives[%zu]: allreduce_rd needs a power-of-two number of ranks, "
				    "not %" PRIu32,
				    i, n);
		for (uint32_t r = 0; cc->ranks && r < n; r++) {
			if (cc->ranks[r] >= cfg->hosts)
				return fail(err, errlen, cfg, cc->line,
					    "collectives[%zu].ranks[%" PRIu32 "]: host %" PRIu32
					    " does not exist (hosts: %" PRIu32 ")",
					    i, r, cc->ranks[r], cfg->hosts);
			for (uint32_t q = 0; q < r; q++)
				if (cc->ranks[q] == cc->ranks[r])
					return fail(err, errlen, cfg, cc->line,
						    "collectives[%zu].ranks: host %" PRIu32
						    " is rank %" PRIu32 " and rank %" PRIu32,
						    i, cc->ranks[r], q, r);
		}
		if (cc->nsizes == 0)
			return fail(err, errlen, cfg, cc->line, "collectives[%zu]: needs a size", i);
		for (size_t k = 0; k < cc->nsizes; k++)
			if (cc->sizes[k] == 0 || cc->sizes[k] > (1ull << 40))
				return fail(err, errlen, cfg, cc->line,
					    "collectives[%zu].sizes[%zu]: %" PRIu64
					    " is out of range (1 B - 1 TiB)",
					    i, k, cc->sizes[k]);
		if (cc->plane >= (int)cfg->planes)
			return fail(err, errlen, cfg, cc->line,
				    "collectives[%zu].plane: %d is out of range (0-%u)", i, cc->plane,
				    cfg->planes - 1);
		if (cc->op >= SIM_OP_N)
			return fail(err, errlen, cfg, cc->line, "collectives[%zu].op: unknown", i);
		if (cc->channels < 1 || cc->channels > 64 ||
		    (uint64_t)sim_coll_steps(cc->type, n) * n * cc->channels > 16000000)
			return fail(err, errlen, cfg, cc->line,
				    "collectives[%zu]: %" PRIu32 " channels is out of range (1-64, "
				    "at most 16 M flows)",
				    i, cc->channels);
		if (sim_coll_selected(cfg, i))
			*total += coll_buffer_bytes(cfg, i, sim_coll_size(cfg, i), &shared);
	}
	return 0;
}

int sim_config_check(const sim_config *cfg, char *err, size_t errlen)
{
	char why[160];
	cable_ref cr;

	if (cfg->hosts < 2 || cfg->hosts > SIM_MAX_HOSTS)
		return fail(err, errlen, cfg, cfg->hosts_line,
			    "hosts: %" PRIu32 " is out of range (2-%u)", cfg->hosts, SIM_MAX_HOSTS);
	if (cfg->planes < 1 || cfg->planes > SIM_MAX_PLANES)
		return fail(err, errlen, cfg, cfg->planes_line, "planes: %u is out of range (1-%u)",
			    cfg->planes, SIM_MAX_PLANES);
	if (cfg->mtu < 256 || cfg->mtu > 9000)
		return fail(err, errlen, cfg, 0, "mtu: %" PRIu32 " is out of range (256-9000)", cfg->mtu);
	if (cfg->duration_ns == 0)
		return fail(err, errlen, cfg, 0, "duration: must be greater than 0");

	for (unsigned p = 0; p < cfg->planes; p++) {
		const sim_plane_config *pc = &cfg->plane[p];
		const sim_link_params *lps[2] = {&pc->host_link, &pc->fabric_link};

		if (pc->fabric == SIM_FABRIC_LEAFSPINE) {
			uint32_t hpl = hosts_per_leaf(cfg, p);

			if (pc->leaves < 1 || pc->spines < 1 || pc->spines > SIM_MAX_SPINES)
				return fail(err, errlen, cfg, cfg->fabric_line,
					    "plane %u: a leaf-spine fabric needs leaves >= 1 and "
					    "spines in 1-%u (got %" PRIu32 " and %" PRIu32 ")",
					    p, SIM_MAX_SPINES, pc->leaves, pc->spines);
			if ((uint64_t)pc->leaves * hpl < cfg->hosts)
				return fail(err, errlen, cfg, cfg->fabric_line,
					    "plane %u: %" PRIu32 " leaves x %" PRIu32
					    " hosts_per_leaf cannot hold %" PRIu32 " hosts",
					    p, pc->leaves, hpl, cfg->hosts);
			if ((uint64_t)pc->leaves * pc->spines > 4000000)
				return fail(err, errlen, cfg, cfg->fabric_line,
					    "plane %u: %" PRIu32 " x %" PRIu32 " leaf-spine cables is too many",
					    p, pc->leaves, pc->spines);
		}
		for (int k = 0; k < 2; k++) {
			const sim_link_params *lp = lps[k];

			if (lp->rate_bps == 0)
				return fail(err, errlen, cfg, 0, "plane %u: a link rate is 0", p);
			if (lp->queue_bytes < (uint64_t)cfg->mtu + 256)
				return fail(err, errlen, cfg, 0,
					    "plane %u: a link queue of %" PRIu64
					    " bytes cannot hold one packet (mtu + 256 = %" PRIu32 ")",
					    p, lp->queue_bytes, cfg->mtu + 256);
			if (!(lp->loss >= 0 && lp->loss <= 1))
				return fail(err, errlen, cfg, 0, "plane %u: a link loss is not in 0-1", p);
			if (link_model_bad(lp, SIM_LP_LOSS | SIM_LP_BURST, why, sizeof(why)))
				return fail(err, errlen, cfg, 0, "plane %u: a link %s", p, why);
		}
	}

	for (size_t i = 0; i < cfg->ncables; i++) {
		const sim_cable_config *c = &cfg->cables[i];

		if (c->plane >= (int)cfg->planes)
			return fail(err, errlen, cfg, c->line,
				    "links[%zu].plane: %d is out of range (0-%u)", i, c->plane,
				    cfg->planes - 1);
		for (unsigned p = 0; p < cfg->planes; p++) {
			if (c->plane >= 0 && (unsigned)c->plane != p)
				continue;
			if (port_resolve(cfg, p, &c->at, &cr, why, sizeof(why)) != 0)
				return fail(err, errlen, cfg, c->line, "links[%zu]: %s", i, why);
		}
		if ((c->mask & SIM_LP_RATE) && c->v.rate_bps == 0)
			return fail(err, errlen, cfg, c->line, "links[%zu].rate: must not be 0", i);
		if ((c->mask & SIM_LP_QUEUE) && c->v.queue_bytes < (uint64_t)cfg->mtu + 256)
			return fail(err, errlen, cfg, c->line,
				    "links[%zu].queue: %" PRIu64 " bytes cannot hold one packet "
				    "(mtu + 256 = %" PRIu32 ")",
				    i, c->v.queue_bytes, cfg->mtu + 256);
		if (link_model_bad(&c->v, c->mask, why, sizeof(why)))
			return fail(err, errlen, cfg, c->line, "links[%zu].%s", i, why);
	}
	if (cfg->ts.interval_ns && (cfg->ts.max_samples < 2 || cfg->ts.max_samples % 2))
		return fail(err, errlen, cfg, cfg->ts.line,
			    "timeseries.max_samples: %" PRIu32 " must be even and at least 2",
			    cfg->ts.max_samples);

	uint64_t total = 0;

	for (size_t i = 0; i < cfg->nflows; i++) {
		const sim_flow_config *f = &cfg->flows[i];

		if (f->bytes == 0)
			return fail(err, errlen, cfg, f->line, "flows[%zu].bytes: must be at least 1", i);
		if (f->plane >= (int)cfg->planes)
			return fail(err, errlen, cfg, f->line,
				    "flows[%zu].plane: %d is out of range (0-%u)", i, f->plane,
				    cfg->planes - 1);
		if (f->op >= SIM_OP_N)
			return fail(err, errlen, cfg, f->line, "flows[%zu].op: unknown", i);
		switch (f->pattern) {
		case SIM_PAT_NONE:
			if (f->src >= cfg->hosts || f->dst >= cfg->hosts)
				return fail(err, errlen, cfg, f->line,
					    "flows[%zu]: host %" PRIu32 " does not exist (hosts: %" PRIu32
					    ")",
					    i, f->src >= cfg->hosts ? f->src : f->dst, cfg->hosts);
			if (f->src == f->dst)
				return fail(err, errlen, cfg, f->line,
					    "flows[%zu]: src and dst are both host %" PRIu32, i, f->src);
			break;
		case SIM_PAT_INCAST:
			if (f->dst >= cfg->hosts)
				return fail(err, errlen, cfg, f->line,
					    "flows[%zu].receiver: host %" PRIu32
					    " does not exist (hosts: %" PRIu32 ")",
					    i, f->dst, cfg->hosts);
			if (f->senders > cfg->hosts - 1)
				return fail(err, errlen, cfg, f->line,
					    "flows[%zu].senders: %" PRIu32
					    " is more than the other hosts (%" PRIu32 ")",
					    i, f->senders, cfg->hosts - 1);
			break;
		}
		uint64_t n = flow_spec_count(cfg, f);

		if (f->bytes > (UINT64_MAX / 4) / n)
			return fail(err, errlen, cfg, f->line, "flows[%zu]: too many bytes", i);
		total += n * f->bytes;
		if (total > UINT64_MAX / 4)
			return fail(err, errlen, cfg, f->line, "flows[%zu]: too many bytes", i);
	}
	if (cfg->pfc_xon > cfg->pfc_xoff || cfg->pfc_xoff < (uint64_t)cfg->mtu + 256)
		return fail(err, errlen, cfg, cfg->pfc_line,
			    "pfc: xon (%" PRIu64 ") must not exceed xoff (%" PRIu64
			    "), and xoff must hold a packet (mtu + 256)",
			    cfg->pfc_xon, cfg->pfc_xoff);
	total *= 2;
	if (check_colls(cfg, &total, err, errlen) != 0)
		return MRP_ERR_INVAL;
	if (total > cfg->max_buffer_bytes) {
		char a[32], b[32];

		sim_fmt_bytes(a, sizeof(a), (double)total);
		sim_fmt_bytes(b, sizeof(b), (double)cfg->max_buffer_bytes);
		return fail(err, errlen, cfg, 0,
			    "flows: need %s of buffers (source and destination of every flow); "
			    "the limit is %s",
			    a, b);
	}

	size_t nflows = sim_config_flow_count(cfg);

	for (size_t i = 0; i < cfg->nevents; i++) {
		const sim_event_config *e = &cfg->events[i];
		int p = event_plane(cfg, e);

		if (e->plane >= (int)cfg->planes)
			return fail(err, errlen, cfg, e->line,
				    "events[%zu].plane: %d is out of range (0-%u)", i, e->plane,
				    cfg->planes - 1);
		switch (e->type) {
		case SIM_EVT_LINK_DOWN:
		case SIM_EVT_LINK_UP:
		case SIM_EVT_BLACKHOLE:
		case SIM_EVT_SET_LINK:
			if (!e->has_where)
				return fail(err, errlen, cfg, e->line,
					    "events[%zu]: %s needs host, or switch and port", i,
					    sim_event_name(e->type));
			__attribute__((fallthrough));
		case SIM_EVT_PLANE_DOWN:
		case SIM_EVT_PLANE_UP:
			if (p < 0)
				return fail(err, errlen, cfg, e->line,
					    "events[%zu]: %s needs a plane (there are %u)", i,
					    sim_event_name(e->type), cfg->planes);
			if (e->has_where && port_resolve(cfg, (unsigned)p, &e->where, &cr, why, sizeof(why)))
				return fail(err, errlen, cfg, e->line, "events[%zu]: %s", i, why);
			if (e->dir >= SIM_DIR_N)
				return fail(err, errlen, cfg, e->line, "events[%zu].direction: unknown", i);
			if (e->dir != SIM_DIR_BOTH &&
			    (e->type == SIM_EVT_PLANE_DOWN || e->type == SIM_EVT_PLANE_UP))
				return fail(err, errlen, cfg, e->line,
					    "events[%zu].direction: %s acts on whole cables", i,
					    sim_event_name(e->type));
			if (e->type != SIM_EVT_SET_LINK)
				break;
			if (e->mask == 0)
				return fail(err, errlen, cfg, e->line,
					    "events[%zu]: set_link sets nothing (rate, delay, queue, "
					    "ecn_threshold, loss, loss_burst, jitter)", i);
			if ((e->mask & SIM_LP_RATE) && e->v.rate_bps == 0)
				return fail(err, errlen, cfg, e->line, "events[%zu].rate: must not be 0", i);
			if ((e->mask & SIM_LP_QUEUE) && e->v.queue_bytes < (uint64_t)cfg->mtu + 256)
				return fail(err, errlen, cfg, e->line,
					    "events[%zu].queue: %" PRIu64 " bytes cannot hold one packet "
					    "(mtu + 256 = %" PRIu32 ")",
					    i, e->v.queue_bytes, cfg->mtu + 256);
			if (link_model_bad(&e->v, e->mask, why, sizeof(why)))
				return fail(err, errlen, cfg, e->line, "events[%zu].%s", i, why);
			break;
		case SIM_EVT_STEER:
			if (e->host < 0 || e->host >= cfg->hosts)
				return fail(err, errlen, cfg, e->line,
					    "events[%zu].host: steer needs an existing host (0-%" PRIu32 ")",
					    i, cfg->hosts - 1);
			if (e->flow >= (int64_t)nflows)
				return fail(err, errlen, cfg, e->line,
					    "events[%zu].flow: %" PRId64 " is out of range (0-%zu)", i,
					    e->flow, nflows ? nflows - 1 : 0);
			if (e->action >= SIM_STEER_N)
				return fail(err, errlen, cfg, e->line, "events[%zu].action: unknown", i);
			break;
		default:
			return fail(err, errlen, cfg, e->line, "events[%zu].type: unknown", i);
		}
	}
	return 0;
}

/* ------------------------------------------------------------ building */

static sim_link *cable_link(sim *s, unsigned p, const cable_ref *cr)
{
	if (cr->node.kind == SIM_NODE_HOST)
		return s->hosts[cr->node.index].nic[p];
	return sim_switch_port(sim_switch_get(s, p, cr->node.kind, cr->node.index), cr->port);
}

static void link_params(sim_link *l, const sim_link_params *lp, unsigned mask)
{
	if (mask & SIM_LP_RATE)
		l->rate_bps = lp->rate_bps;
	if (mask & SIM_LP_DELAY)
		l->delay_ns = lp->delay_ns;
	if (mask & SIM_LP_QUEUE)
		l->queue_bytes = lp->queue_bytes;
	if (mask & SIM_LP_ECN)
		l->ecn_bytes = lp->ecn_bytes;
	if (mask & SIM_LP_LOSS)
		l->loss = lp->loss;
	if (mask & SIM_LP_BURST)
		l->loss_burst = lp->loss_burst;
	if (mask & SIM_LP_JITTER)
		l->jitter_ns = lp->jitter_ns;
}

#define LP_ALL                                                                            \
	(SIM_LP_RATE | SIM_LP_DELAY | SIM_LP_QUEUE | SIM_LP_ECN | SIM_LP_LOSS | SIM_LP_BURST | \
	 SIM_LP_JITTER)

/* Creates the two links of a cable a <-> b; returns a -> b. */
static sim_link *new_cable(sim *s, unsigned p, sim_node a, void *aobj, sim_node b, void *bobj,
			   const sim_link_params *lp)
{
	sim_link *ab = &s->links[s->nlinks++], *ba = &s->links[s->nlinks++];

	ab->from = a;
	ab->to = b;
	ab->to_obj = bobj;
	ba->from = b;
	ba->to = a;
	ba->to_obj = aobj;
	ab->peer = ba;
	ba->peer = ab;
	for (sim_link *l = ab; l; l = l == ab ? ba : NULL) {
		l->id = (uint32_t)(l - s->links);
		l->plane = (uint8_t)p;
		l->state = SIM_LINK_UP;
		l->notify_bytes = SIM_NEVER;
		link_params(l, lp, LP_ALL);
		sim_rng_seed(&l->rng, s->seed, TAG_LINK + l->id);
		sim_rng_seed(&l->ge_rng, s->seed, TAG_LINK_GE + l->id);
	}
	return ab;
}

static int build_plane(sim *s, unsigned p)
{
	sim_plane *pl = &s->planes[p];
	const sim_config *cfg = s->cfg;
	uint32_t hpl = hosts_per_leaf(cfg, p);
	sim_rng r;

	pl->cfg = cfg->plane[p];
	pl->cfg.hosts_per_leaf = hpl;
	pl->nsw = pl->cfg.fabric == SIM_FABRIC_SINGLE ? 1 : pl->cfg.leaves + pl->cfg.spines;
	pl->sw = calloc(pl->nsw, sizeof(*pl->sw));
	if (!pl->sw)
		return MRP_ERR_NOMEM;
	for (uint32_t i = 0; i < pl->nsw; i++) {
		sim_switch *sw = &pl->sw[i];

		sw->plane = (uint8_t)p;
		if (pl->cfg.fabric == SIM_FABRIC_SINGLE) {
			sw->kind = SIM_NODE_SWITCH;
			sw->index = 0;
			sw->nports = cfg->hosts;
		} else if (i < pl->cfg.leaves) {
			sw->kind = SIM_NODE_LEAF;
			sw->index = i;
			sw->nports = hpl + pl->cfg.spines;
		} else {
			sw->kind = SIM_NODE_SPINE;
			sw->index = i - pl->cfg.leaves;
			sw->nports = pl->cfg.leaves;
		}
		sim_rng_seed(&r, s->seed, TAG_SALT | (uint64_t)p << 40 | (uint64_t)sw->kind << 32 | sw->index);
		sw->salt = sim_rng_next(&r);
		sw->port = calloc(sw->nports, sizeof(*sw->port));
		if (!sw->port)
			return MRP_ERR_NOMEM;
	}
	if (pl->cfg.fabric == SIM_FABRIC_LEAFSPINE) {
		pl->leaf = &pl->sw[0];
		pl->spine = &pl->sw[pl->cfg.leaves];
	}

	for (uint32_t i = 0; i < s->nhosts; i++) {
		sim_host *h = &s->hosts[i];
		sim_switch *sw;
		uint32_t port;

		if (pl->cfg.fabric == SIM_FABRIC_SINGLE) {
			sw = &pl->sw[0];
			port = i;
		} else {
			sw = &pl->leaf[i / hpl];
			port = i % hpl;
		}

		sim_node hn = {SIM_NODE_HOST, i}, sn = {sw->kind, sw->index};

		h->nic[p] = new_cable(s, p, hn, h, sn, sw, &pl->cfg.host_link);
		h->in[p] = h->nic[p]->peer;
		sw->port[port] = h->in[p];
	}
	if (pl->cfg.fabric == SIM_FABRIC_LEAFSPINE) {
		for (uint32_t l = 0; l < pl->cfg.leaves; l++) {
			for (uint32_t sp = 0; sp < pl->cfg.spines; sp++) {
				sim_switch *lf = &pl->leaf[l], *spn = &pl->spine[sp];
				sim_node ln = {SIM_NODE_LEAF, l}, spnode = {SIM_NODE_SPINE, sp};
				sim_link *up = new_cable(s, p, ln, lf, spnode, spn, &pl->cfg.fabric_link);

				lf->port[hpl + sp] = up;
				spn->port[l] = up->peer;
			}
		}
	}
	return 0;
}

static void fill_pattern(uint8_t *buf, uint64_t len, uint64_t seed, uint32_t id)
{
	sim_rng r;
	uint64_t i = 0;

	sim_rng_seed(&r, seed, TAG_FLOW + id);
	for (; i + 8 <= len; i += 8) {
		uint64_t v = sim_rng_next(&r);

		memcpy(buf + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = sim_rng_next(&r);

		memcpy(buf + i, &v, (size_t)(len - i));
	}
}

static int add_flow(sim *s, const sim_flow_config *fc, uint32_t src, uint32_t dst)
{
	sim_flow *f = &s->flows[s->nflows];

	f->id = (uint32_t)s->nflows;
	f->src = src;
	f->dst = dst;
	f->bytes = fc->bytes;
	f->start_ns = fc->start_ns;
	f->op = (uint8_t)fc->op;
	f->plane = (int8_t)fc->plane;
	f->stream = fc->stream;
	f->finish_ns = SIM_NEVER;
	f->arrived_ns = SIM_NEVER;
	f->coll = -1;
	f->conn_prev = -1;
	f->src_buf = malloc(fc->bytes);
	f->dst_buf = malloc(fc->bytes);
	s->nflows++;
	if (!f->src_buf || !f->dst_buf)
		return MRP_ERR_NOMEM;
	fill_pattern(f->src_buf, f->bytes, s->seed, f->id);
	/* Written, not calloc()ed: the pages are faulted in now, while
	 * building, instead of during the run (where zeroing fresh pages
	 * would otherwise dominate the cost of large flows). */
	memset(f->dst_buf, 0, fc->bytes);
	return 0;
}

/* A buffer shared by the flows of a collective too large to verify. */
static uint8_t *shared_buf(sim *s, uint64_t len)
{
	uint8_t **v = realloc(s->shared, (s->nshared + 1) * sizeof(*v));
	uint8_t *b;

	if (!v)
		return NULL;
	s->shared = v;
	b = malloc(len);
	if (b)
		s->shared[s->nshared++] = b;
	return b;
}

/* Expands collective ci into flows (its flow k is step k / n of rank k % n)
 * with their dependencies. Under verify_max every flow has its own source
 * pattern and destination buffer; above it every flow of the collective
 * sends from one shared pattern into one shared sink (not verified). */
static int build_coll(sim *s, size_t ci)
{
	const sim_config *cfg = s->cfg;
	const sim_coll_config *cc = &cfg->colls[ci];
	uint32_t n = sim_coll_nranks(cfg, cc);
	uint64_t size = sim_coll_size(cfg, ci);
	uint64_t chunk = sim_coll_chunk(cc->type, n, cc->channels, size);
	uint32_t nflows = sim_coll_steps(cc->type, n) * n * cc->channels;
	uint32_t base = (uint32_t)s->nflows;
	uint8_t *ssrc = NULL, *sdst = NULL;
	int shared;

	coll_buffer_bytes(cfg, ci, size, &shared);
	if (shared) {
		ssrc = shared_buf(s, chunk);
		sdst = shared_buf(s, chunk);
		if (!ssrc || !sdst)
			return MRP_ERR_NOMEM;
		fill_pattern(ssrc, chunk, s->seed, base);
		memset(sdst, 0, chunk);
	}
	for (uint32_t k = 0; k < nflows; k++) {
		sim_flow *f = &s->flows[s->nflows];
		uint32_t step, ch, sr, dr, deps[2];
		unsigned nd = sim_coll_flow(cc->type, n, cc->channels, k, &step, &ch, &sr, &dr, deps);

		f->id = (uint32_t)s->nflows;
		f->src = sim_coll_host(cc, sr);
		f->dst = sim_coll_host(cc, dr);
		f->bytes = chunk;
		f->start_ns = cc->start_ns;
		f->op = (uint8_t)cc->op;
		/* channel c on plane c mod planes unless the scenario names one */
		f->plane = (int8_t)(cc->plane >= 0 || cc->channels < 2 ? cc->plane
								      : (int)(ch % s->nplanes));
		f->stream = cc->stream;
		f->finish_ns = SIM_NEVER;
		f->arrived_ns = SIM_NEVER;
		f->coll = (int32_t)ci;
		f->step = step;
		f->channel = ch;
		f->rank = sr;
		f->ndeps = nd;
		for (unsigned d = 0; d < nd; d++) {
			f->deps[d] = base + deps[d];
			f->dep_kind[d] = (uint8_t)sim_coll_dep_kind(cc->type, d);
		}
		f->waiting = nd;
		f->conn_prev = -1;
		if (f->step > 0 && (cc->type == SIM_COLL_ALLREDUCE_RING || cc->type == SIM_COLL_ALLGATHER))
			f->conn_prev = (int64_t)f->id - (int64_t)n * cc->channels;
		s->nflows++;
		if (shared) {
			f->src_buf = ssrc;
			f->dst_buf = sdst;
			f->unchecked = 1;
			continue;
		}
		f->src_buf = malloc(chunk);
		f->dst_buf = malloc(chunk);
		if (!f->src_buf || !f->dst_buf)
			return MRP_ERR_NOMEM;
		fill_pattern(f->src_buf, chunk, s->seed, f->id);
		memset(f->dst_buf, 0, chunk);
	}
	return 0;
}

/* The reverse of the flows' dependencies, for coll_release(). */
static int build_dependents(sim *s)
{
	size_t ndeps = 0;

	for (size_t i = 0; i < s->nflows; i++)
		ndeps += s->flows[i].ndeps;
	if (ndeps == 0)
		return 0;
	s->dep_off = calloc(s->nflows + 1, sizeof(*s->dep_off));
	s->dep_list = calloc(ndeps, sizeof(*s->dep_list));
	if (!s->dep_off || !s->dep_list)
		return MRP_ERR_NOMEM;
	for (size_t i = 0; i < s->nflows; i++)
		for (uint32_t d = 0; d < s->flows[i].ndeps; d++)
			s->dep_off[s->flows[i].deps[d] + 1]++;
	for (size_t i = 0; i < s->nflows; i++)
		s->dep_off[i + 1] += s->dep_off[i];

	uint32_t *fill = calloc(s->nflows, sizeof(*fill));

	if (!fill)
		return MRP_ERR_NOMEM;
	for (size_t i = 0; i < s->nflows; i++)
		for (uint32_t d = 0; d < s->flows[i].ndeps; d++) {
			uint32_t j = s->flows[i].deps[d];

			s->dep_list[s->dep_off[j] + fill[j]++] = (uint32_t)i;
		}
	free(fill);
	return 0;
}

static int build_flows(sim *s)
{
	const sim_config *cfg = s->cfg;
	size_t n = sim_config_flow_count(cfg);
	uint32_t H = s->nhosts;
	int rc = 0;

	s->flows = calloc(n ? n : 1, sizeof(*s->flows));
	if (!s->flows)
		return MRP_ERR_NOMEM;
	for (size_t i = 0; i < cfg->nflows && rc == 0; i++) {
		const sim_flow_config *fc = &cfg->flows[i];

		switch (fc->pattern) {
		case SIM_PAT_NONE:
			rc = add_flow(s, fc, fc->src, fc->dst);
			break;
		case SIM_PAT_INCAST: {
			uint32_t k = fc->senders ? fc->senders : H - 1;

			/* the k hosts after the receiver, wrapping around */
			for (uint32_t j = 1; j <= k && rc == 0; j++)
				rc = add_flow(s, fc, (fc->dst + j) % H, fc->dst);
			break;
		}
		case SIM_PAT_PERMUTATION: {
			uint32_t *to = malloc(H * sizeof(*to));
			sim_rng r;

			if (!to)
				return MRP_ERR_NOMEM;
			/* Sattolo's shuffle: a random single cycle, so nobody
			 * sends to itself and everybody receives once. */
			for (uint32_t j = 0; j < H; j++)
				to[j] = j;
			sim_rng_seed(&r, s->seed, TAG_PATTERN + i);
			for (uint32_t j = H - 1; j > 0; j--) {
				uint32_t k = (uint32_t)sim_rng_below(&r, j);
				uint32_t t = to[j];

				to[j] = to[k];
				to[k] = t;
			}
			for (uint32_t j = 0; j < H && rc == 0; j++)
				rc = add_flow(s, fc, j, to[j]);
			free(to);
			break;
		}
		case SIM_PAT_ALL_TO_ALL:
			for (uint32_t a = 0; a < H && rc == 0; a++)
				for (uint32_t b = 0; b < H && rc == 0; b++)
					if (a != b)
						rc = add_flow(s, fc, a, b);
			break;
		}
	}
	for (size_t i = 0; i < cfg->ncolls && rc == 0; i++)
		if (sim_coll_selected(cfg, i))
			rc = build_coll(s, i);
	if (rc == 0)
		rc = build_dependents(s);
	s->flows_left = s->nflows;
	return rc;
}

int sim_new(const sim_config *cfg, const sim_transport_ops *ops, sim **ps, char *err, size_t errlen)
{
	char why[160];
	int rc = sim_config_check(cfg, err, errlen);

	*ps = NULL;
	if (rc != 0)
		return rc;

	sim *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return MRP_ERR_NOMEM;
	}
	/* The simulator keeps its own copy: the caller may free or change cfg
	 * as soon as sim_new() returns. */
	if (sim_config_copy(&s->own, cfg) != 0) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return MRP_ERR_NOMEM;
	}
	cfg = s->cfg = &s->own;
	s->ops = ops;
	s->seed = cfg->seed;
	s->nplanes = cfg->planes;
	s->nhosts = cfg->hosts;
	s->pfc = ops->lossless;
	rc = sim_evq_init(&s->q, 1024);
	if (rc != 0)
		goto nomem;

	size_t nlinks = 0;

	for (unsigned p = 0; p < cfg->planes; p++) {
		nlinks += 2 * (size_t)cfg->hosts;
		if (cfg->plane[p].fabric == SIM_FABRIC_LEAFSPINE)
			nlinks += 2 * (size_t)cfg->plane[p].leaves * cfg->plane[p].spines;
	}
	s->links = calloc(nlinks, sizeof(*s->links));
	s->hosts = calloc(cfg->hosts, sizeof(*s->hosts));
	s->evlink = calloc(cfg->nevents ? cfg->nevents : 1, sizeof(*s->evlink));
	if (!s->links || !s->hosts || !s->evlink)
		goto nomem;
	for (uint32_t i = 0; i < s->nhosts; i++) {
		sim_host *h = &s->hosts[i];

		h->id = i;
		h->s = s;
		h->deadline = h->armed = SIM_NEVER;
		sim_rng_seed(&h->rng, s->seed, TAG_HOST + i);
	}
	for (unsigned p = 0; p < s->nplanes; p++)
		if (build_plane(s, p) != 0)
			goto nomem;
	assert(s->nlinks == nlinks);

	/* per-cable overrides, in file order: later ones win */
	for (size_t i = 0; i < cfg->ncables; i++) {
		const sim_cable_config *c = &cfg->cables[i];

		for (unsigned p = 0; p < s->nplanes; p++) {
			cable_ref cr;

			if (c->plane >= 0 && (unsigned)c->plane != p)
				continue;
			if (port_resolve(cfg, p, &c->at, &cr, why, sizeof(why)) != 0)
				continue; /* sim_config_check() said it resolves */

			sim_link *l = cable_link(s, p, &cr);

			link_params(l, &c->v, c->mask);
			link_params(l->peer, &c->v, c->mask);
		}
	}

	/* PFC headroom per ingress: what arrives between xoff and the pause
	 * taking effect (a round trip on the wire at line rate, plus a frame
	 * being sent at each end and the pause frame) unless configured */
	for (size_t i = 0; i < s->nlinks; i++) {
		sim_link *l = &s->links[i];

		l->pfc_headroom = cfg->pfc_headroom;
		if (!l->pfc_headroom)
			l->pfc_headroom = 2 * (l->delay_ns * (l->rate_bps / 1000000) / 8000) +
					  3 * ((uint64_t)cfg->mtu + 256) + PFC_FRAME_LEN;
	}

	if (build_flows(s) != 0)
		goto nomem;

	/* Scenario events first: a change at t applies before flows starting at t. */
	for (size_t i = 0; i < cfg->nevents; i++) {
		const sim_event_config *e = &cfg->events[i];

		if (e->has_where) {
			cable_ref cr;

			if (port_resolve(cfg, (unsigned)event_plane(cfg, e), &e->where, &cr, why,
					 sizeof(why)) == 0)
				s->evlink[i] = cable_link(s, (unsigned)event_plane(cfg, e), &cr);
		}
		schedule(s, e->at_ns, EV_SCENARIO, (uint32_t)i, NULL);
	}
	for (size_t i = 0; i < s->nflows; i++)
		if (s->flows[i].ndeps == 0) /* the others start when their inputs are done */
			schedule(s, s->flows[i].start_ns, EV_FLOW_START, 0, &s->flows[i]);
	if (ts_init(s) != 0 || s->fatal)
		goto nomem;
	for (size_t i = 0; i < cfg->ts.nlinks; i++) {
		if (!sim_link_find(s, cfg->ts.links[i])) {
			snprintf(err, errlen, "%s:%d: timeseries.links[%zu]: no link is named '%s' "
				 "(e.g. 'p0:leaf0->spine1', 'p0:host3->switch')",
				 cfg->name ? cfg->name : "scenario", cfg->ts.line, i, cfg->ts.links[i]);
			sim_del(s);
			return MRP_ERR_INVAL;
		}
	}

	for (uint32_t i = 0; i < s->nhosts; i++) {
		s->errbuf[0] = '\0';
		s->hosts[i].ts = ops->host_new(s, &s->hosts[i]);
		if (!s->hosts[i].ts) {
			if (s->errbuf[0])
				snprintf(err, errlen, "%s", s->errbuf);
			else
				snprintf(err, errlen, "transport %s: cannot set up host %" PRIu32, ops->name,
					 i);
			sim_del(s);
			return MRP_ERR_INVAL;
		}
	}
	*ps = s;
	return 0;

nomem:
	snprintf(err, errlen, "out of memory building the simulation");
	sim_del(s);
	return MRP_ERR_NOMEM;
}

void sim_del(sim *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; s->hosts && i < s->nhosts; i++)
		if (s->hosts[i].ts && s->ops->host_del)
			s->ops->host_del(s->hosts[i].ts);
	for (size_t i = 0; s->flows && i < s->nflows; i++) {
		if (s->flows[i].unchecked)
			continue; /* shared: freed below */
		free(s->flows[i].src_buf);
		free(s->flows[i].dst_buf);
	}
	for (size_t i = 0; i < s->nshared; i++)
		free(s->shared[i]);
	free(s->shared);
	free(s->dep_off);
	free(s->dep_list);
	free(s->flows);
	for (unsigned p = 0; p < s->nplanes; p++) {
		for (uint32_t i = 0; s->planes[p].sw && i < s->planes[p].nsw; i++)
			free(s->planes[p].sw[i].port);
		free(s->planes[p].sw);
	}
	for (size_t i = 0; i < s->nslabs; i++)
		free(s->slabs[i]); /* malloc() unpoisons on reuse */
	free(s->slabs);
	free(s->links);
	free(s->hosts);
	free(s->evlink);
	sim_evq_free(&s->q);
	ts_free(s);
	sim_config_free(&s->own);
	free(s);
}
