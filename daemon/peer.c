#include "peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "datapath.h"
#include "log.h"
#include "mrd.h"
#include "planes.h"
#include "siphash.h"
#include "svcpolicy.h"

/* Every engine error code has its slot in the drop counters. */
#define MRD_ERR_FITS(name, val, msg) \
	_Static_assert(-(val) > 0 && -(val) < MRD_NERR, "MRP_ERR_" #name " outside drops[]");
MRP_ERRNO_MAP(MRD_ERR_FITS)
#undef MRD_ERR_FITS

#define HS_TRIES 10                   /* CONNECT transmissions (SPEC 9.3) */
#define HS_FIRST_NS 1000000ull        /* first retransmission after 1 ms */
_Static_assert(MRD_HS_TIMEOUT_NS == HS_FIRST_NS * ((1ull << HS_TRIES) - 1),
	       "MRD_HS_TIMEOUT_NS is not the CONNECT's last retransmission");
#define HALF_OPEN_NS 3000000000ull    /* SPEC 9.4 */
#define TOMB_NS 1000000000ull         /* SPEC 11.5 */
#define MAX_CONNS 65536
#define MAX_HALF_OPEN 1024
#define MAX_PEERS 4096
#define PEER_BUCKETS 1024 /* the keyed hash tables of mrd_peers (peer.h) */
#define ACC_BUCKETS 8192
#define IP_BUCKETS 1024
#define WRITE_BUDGET 256              /* packets per connection per service */
#define PROBE_TS_OFF 36               /* PROBE ts_ns (SPEC 8.2) */
#define PROBE_ACK_DELAY_OFF 36        /* PROBE_ACK ack_delay_ns (SPEC 8.3) */
#define RL_SRC_RATE 100               /* answers per second per source (SPEC 14.3) */
#define RL_ALL_RATE 10000             /* and per endpoint; each budget its own */
#define MAX_HALF_OPEN_SRC 128         /* half-open connections per peer */
#define MAX_RETRIES 3                 /* RETRYs one attempt follows (SPEC 9.7) */
/* An established connection from which nothing with our token came for
 * this long ends ("peer silent"): idle paths are probed every
 * timers.probe_interval and a live peer answers, so only a peer that is
 * gone, or an attacker that stopped after opening connections, stays
 * silent. Not applied with probe_interval 0 (nothing asks the peer). */
#define SILENT_MIN_NS 30000000000ull  /* at least 30 s, */
#define SILENT_PROBES 10              /* and 10 probe intervals */
#define OUR_CAPS (MRP_CAP_IMM | MRP_CAP_RATE_HINT | MRP_CAP_MULTIPLANE | MRP_CAP_RETRY | MRP_CAP_READ | \
		  MRP_CAP_HELD)
/* First-round-trip admission (SPEC 6.6). A daemon's datagrams leave and
 * arrive in bursts between its scheduling gaps, so both times are longer
 * than the engine's defaults (100 us to start on a credit, 200 us before
 * the receiver takes unused credit back): an initiator whose application
 * posts its first message more than ADMIT_START_NS after the ACCEPT asks
 * for a grant instead; the acceptor takes credit back ADMIT_RETURN_NS after
 * its last one if the data has not come. */
#define ADMIT_START_NS 1000000ull
#define ADMIT_RETURN_NS 2000000ull

/* What we offer in a CONNECT and accept in one: ADMIT only with a budget
 * (transport.admit_budget) and the rate-hint allocator it is kept in. */
static uint64_t our_caps(const mrd *d)
{
	return OUR_CAPS | (d->cfg.admit_budget && d->rh ? MRP_CAP_ADMIT : 0);
}

/* The allocator's admission state from the configuration and our
 * connections (each may send to us): the fair part of a credit or grant
 * is the budget or capacity over them. */
static void admit_update(mrd *d)
{
	if (!d->rh)
		return;
	d->rh->adm_budget = d->cfg.admit_budget;
	d->rh->adm_ttl_ns = ADMIT_RETURN_NS;
	d->rh->adm_conns = d->peers->nconns;
}

/* ---- randomness ---------------------------------------------------------- */

/* Ids, tokens and the instance id come from the kernel's CSPRNG (SPEC 3.1). */
static uint64_t random_u64(void)
{
	uint64_t v = 0;
	while (getrandom(&v, sizeof(v), 0) != sizeof(v))
		;
	return v;
}

static uint64_t random_nonzero(void)
{
	uint64_t v;
	while ((v = random_u64()) == 0)
		;
	return v;
}

/* The engine's randomness: source ports, and the sequence numbers of the
 * PROBEs that prove a peer's announced address (SPEC 9.5), which a host
 * that does not receive them must not guess. So not a generator whose
 * state its outputs give away (xorshift, which the source ports would
 * show), but SipHash-2-4 of a counter under a random key of its own. */
static uint64_t eng_rng(void *ud)
{
	mrd_peers *p = ud;
	uint64_t n = p->rng_state.n++;
	return mrd_siphash24(p->rng_state.key, &n, sizeof(n));
}

static void *eng_alloc(void *ud, size_t size)
{
	(void)ud;
	return malloc(size);
}

static void eng_free(void *ud, void *p)
{
	(void)ud;
	free(p);
}

/* ---- tables -------------------------------------------------------------- */

const char *mrd_conn_state_name(const mrd_conn *c)
{
	switch (c->state) {
	case MRD_CONN_CONNECTING: return "connecting";
	case MRD_CONN_HALF_OPEN: return "half-open";
	case MRD_CONN_ESTABLISHED: return "established";
	case MRD_CONN_ENDED: return "ended";
	}
	return "?";
}

void mrd_peers_set_hooks(mrd *d, const mrd_peer_hooks *hooks)
{
	d->peers->hooks = *hooks;
}

int mrd_peers_add_service(mrd *d, mrd_service_fn fn, void *ud)
{
	mrd_peers *p = d->peers;
	if (p->nservices >= MRD_SERVICES_MAX)
		return -1;
	p->services[p->nservices].fn = fn;
	p->services[p->nservices].ud = ud;
	p->nservices++;
	return 0;
}

static const mrd_conn_ops *service_lookup(const mrd_peers *p, uint32_t service_id)
{
	for (unsigned i = 0; i < p->nservices; i++) {
		const mrd_conn_ops *ops = p->services[i].fn(p->services[i].ud, service_id);
		if (ops)
			return ops;
	}
	return NULL;
}

int mrd_peers_init(mrd *d)
{
	mrd_peers *p = d->peers;
	memset(p, 0, sizeof(*p));
	p->nbuckets = 1024;
	p->buckets = calloc(p->nbuckets, sizeof(*p->buckets));
	if (!p->buckets)
		return -ENOMEM;
	p->pbuckets = calloc(PEER_BUCKETS, sizeof(*p->pbuckets));
	p->abuckets = calloc(ACC_BUCKETS, sizeof(*p->abuckets));
	p->ipbuckets = calloc(IP_BUCKETS, sizeof(*p->ipbuckets));
	if (!p->pbuckets || !p->abuckets || !p->ipbuckets) {
		free(p->buckets);
		free(p->pbuckets);
		free(p->abuckets);
		free(p->ipbuckets);
		return -ENOMEM;
	}
	uint64_t k0 = random_u64(), k1 = random_u64();
	memcpy(p->hkey, &k0, 8);
	memcpy(p->hkey + 8, &k1, 8);
	k0 = random_u64();
	k1 = random_u64();
	memcpy(p->rng_state.key, &k0, 8);
	memcpy(p->rng_state.key + 8, &k1, 8);
	p->mem = (mrp_mem){.alloc = eng_alloc, .free = eng_free, .ud = NULL};
	p->rng = (mrp_rng){.next = eng_rng, .ud = p};
	mrd_budget_init(&p->answers, RL_SRC_RATE, RL_ALL_RATE, NULL);
	mrd_budget_init(&p->retries, RL_SRC_RATE, RL_ALL_RATE, NULL);
	mrd_budget_init(&p->accepts, RL_SRC_RATE, RL_ALL_RATE, NULL);
	mrd_cookie_init(&p->cookies, uv_hrtime(), NULL);
	return 0;
}

/* The buckets of the keyed tables (peer.h): an attacker who cannot learn
 * the key cannot choose addresses or ids that share one. */
static mrd_peer **peer_bucket(mrd_peers *p, const mrd_sockaddr *a, socklen_t alen)
{
	return &p->pbuckets[mrd_siphash24(p->hkey, a, alen) & (PEER_BUCKETS - 1)];
}

static mrd_conn **acc_bucket(mrd_peers *p, uint32_t peer_id, const mrd_sockaddr *a,
			     socklen_t alen)
{
	uint8_t k[4 + sizeof(mrd_sockaddr)];
	size_t n = alen < sizeof(mrd_sockaddr) ? alen : sizeof(mrd_sockaddr);
	memcpy(k, &peer_id, 4);
	memcpy(k + 4, a, n);
	return &p->abuckets[mrd_siphash24(p->hkey, k, 4 + n) & (ACC_BUCKETS - 1)];
}

/* The IP address of a (no port) and its bucket. */
static mrd_addrmem **ip_bucket(mrd_peers *p, const mrd_sockaddr *a, int *family,
			       const void **ip)
{
	size_t n;
	if (a->sa.sa_family == AF_INET6) {
		*ip = &a->in6.sin6_addr;
		n = 16;
	} else {
		*ip = &a->in.sin_addr;
		n = 4;
	}
	*family = a->sa.sa_family;
	uint8_t k[17];
	k[0] = (uint8_t)*family;
	memcpy(k + 1, *ip, n);
	return &p->ipbuckets[mrd_siphash24(p->hkey, k, 1 + n) & (IP_BUCKETS - 1)];
}

static uint32_t hash_id(const mrd_peers *p, uint32_t id)
{
	return (id * 0x9e3779b1u) & (p->nbuckets - 1);
}

mrd_conn *mrd_conn_find(mrd *d, uint32_t id)
{
	mrd_peers *p = d->peers;
	for (mrd_conn *c = p->buckets[hash_id(p, id)]; c; c = c->hnext)
		if (c->local_id == id)
			return c;
	return NULL;
}

static void hash_grow(mrd_peers *p)
{
	uint32_t n = p->nbuckets * 2;
	mrd_conn **b = calloc(n, sizeof(*b));
	if (!b)
		return; /* chains just get longer */
	mrd_conn **old = p->buckets;
	uint32_t oldn = p->nbuckets;
	p->buckets = b;
	p->nbuckets = n;
	for (uint32_t i = 0; i < oldn; i++)
		for (mrd_conn *c = old[i], *nx; c; c = nx) {
			nx = c->hnext;
			uint32_t h = hash_id(p, c->local_id);
			c->hnext = b[h];
			b[h] = c;
		}
	free(old);
}

/* The idle list (peers without connections, oldest first). */
static void idle_push(mrd_peers *p, mrd_peer *pe)
{
	pe->inext = NULL;
	pe->iprev = p->idle_tail;
	if (p->idle_tail)
		p->idle_tail->inext = pe;
	else
		p->idle_head = pe;
	p->idle_tail = pe;
}

static void idle_remove(mrd_peers *p, mrd_peer *pe)
{
	if (pe->iprev)
		pe->iprev->inext = pe->inext;
	else
		p->idle_head = pe->inext;
	if (pe->inext)
		pe->inext->iprev = pe->iprev;
	else
		p->idle_tail = pe->iprev;
	pe->inext = pe->iprev = NULL;
}

static mrd_peer *peer_get(mrd *d, const mrd_sockaddr *a, socklen_t alen, int create)
{
	mrd_peers *p = d->peers;
	mrd_peer **b = peer_bucket(p, a, alen);
	for (mrd_peer *pe = *b; pe; pe = pe->hnext)
		if (pe->alen == alen && memcmp(&pe->addr, a, alen) == 0)
			return pe;
	if (!create)
		return NULL;
	if (p->npeers >= MAX_PEERS) {
		/* Forget the peer that has been without connections longest
		 * (the first of the idle list: no scan, since a CONNECT that
		 * passed the ACCEPT budget, up to 10,000 a second, may need a
		 * new peer each). */
		mrd_peer *gone = p->idle_head;
		if (!gone)
			return NULL;
		idle_remove(p, gone);
		if (gone->prev)
			gone->prev->next = gone->next;
		else
			p->list = gone->next;
		if (gone->next)
			gone->next->prev = gone->prev;
		for (mrd_peer **pp = peer_bucket(p, &gone->addr, gone->alen); *pp;
		     pp = &(*pp)->hnext)
			if (*pp == gone) {
				*pp = gone->hnext;
				break;
			}
		free(gone);
		p->npeers--;
	}
	mrd_peer *pe = calloc(1, sizeof(*pe));
	if (!pe)
		return NULL;
	pe->addr = *a;
	pe->alen = alen;
	pe->first_ns = pe->last_ns = uv_hrtime();
	pe->next = p->list;
	if (p->list)
		p->list->prev = pe;
	p->list = pe;
	pe->hnext = *b;
	*b = pe;
	p->npeers++;
	idle_push(p, pe);
	return pe;
}

static mrd_conn *conn_new(mrd *d, mrd_peer *pe, int initiator)
{
	mrd_peers *p = d->peers;
	if (p->nconns >= MAX_CONNS)
		return NULL;
	mrd_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	/* its peer IP address's share (SPEC 14.4; limits read at creation) */
	int fam;
	const void *ip;
	mrd_addrmem **ipb = ip_bucket(p, &pe->addr, &fam, &ip);
	c->addrmem = mrd_addrmem_get(ipb, fam, ip,
				     d->cfg.memory * d->cfg.address_memory_share / 100);
	if (!c->addrmem) {
		free(c);
		return NULL;
	}
	c->addrmem->accepted += !initiator;
	c->d = d;
	c->initiator = (uint8_t)initiator;
	c->peer = pe;
	if (pe->nconns++ == 0)
		idle_remove(p, pe);
	pe->conns_total++;
	mrd_timer_ent_init(&c->tent);
	do
		c->local_id = (uint32_t)random_u64();
	while (!c->local_id || mrd_conn_find(d, c->local_id));
	c->local_token = random_nonzero();
	c->created_ns = uv_hrtime();
	if (p->nconns >= p->nbuckets)
		hash_grow(p);
	uint32_t h = hash_id(p, c->local_id);
	c->hnext = p->buckets[h];
	p->buckets[h] = c;
	c->next = p->all;
	if (p->all)
		p->all->prev = c;
	p->all = c;
	p->nconns++;
	admit_update(d);
	return c;
}

/* ---- the source ports a connection's paths hold --------------------------- */

/* Bring the ports held (c->held) in line with the engine's paths. Every
 * change of a path's source port or plane counts in the engine's
 * paths_opened, reports or repaths (a path opens, is re-ported or steered,
 * re-paths), so the paths are only walked when their sum moved; the path
 * events cannot tell (a re-port of a path already probing changes no
 * state, and a full event queue drops the oldest). */
static void sports_sync(mrd_conn *c)
{
	uint64_t moves = mrp_conn_path_moves(c->eng);
	if (moves == c->held_moves)
		return;
	c->held_moves = moves;
	mrd_dp *dp = c->d->dp;
	for (unsigned i = 0; i < c->nheld; i++) {
		mrp_path_info pi;
		uint8_t lp1 = 0;
		uint16_t sport = 0;
		if (mrp_conn_path_info(c->eng, i, &pi) == 0 && pi.plane < c->npairs) {
			lp1 = (uint8_t)(c->pairs[pi.plane].lplane + 1);
			sport = pi.sport;
		}
		mrd_held_sport *h = &c->held[i];
		if (h->lplane1 == lp1 && h->sport == sport)
			continue;
		if (h->lplane1)
			mrd_dp_port_use(dp, h->lplane1 - 1u, h->sport, -1);
		if (lp1)
			mrd_dp_port_use(dp, lp1 - 1u, sport, +1);
		h->lplane1 = lp1;
		h->sport = sport;
	}
}

/* The connection goes: its paths leave their ports. */
static void sports_release(mrd_conn *c)
{
	for (unsigned i = 0; i < c->nheld; i++)
		if (c->held[i].lplane1)
			mrd_dp_port_use(c->d->dp, c->held[i].lplane1 - 1u, c->held[i].sport, -1);
	free(c->held);
	c->held = NULL;
	c->nheld = 0;
}

/* Unlink and free (from the service routine only). */
static void conn_free(mrd_conn *c)
{
	mrd *d = c->d;
	mrd_peers *p = d->peers;
	mrd_timer_set(&d->timer, &c->tent, MRD_NEVER);
	for (mrd_conn **pp = &p->buckets[hash_id(p, c->local_id)]; *pp; pp = &(*pp)->hnext)
		if (*pp == c) {
			*pp = c->hnext;
			break;
		}
	if (c->prev)
		c->prev->next = c->next;
	else
		p->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->state == MRD_CONN_HALF_OPEN) {
		p->nhalf--;
		c->peer->nhalf--;
		/* never confirmed, so nothing was sent on its credit: back to
		 * the budget (half-open connections of a CONNECT flood would
		 * otherwise keep it out, every new one renewing its time) */
		if (c->admit_credit && d->rh)
			mrp_rh_admit_return(d->rh, c->admit_credit);
	}
	if (!c->initiator && c->hs_alen)
		for (mrd_conn **pp = acc_bucket(p, c->peer_id, &c->hs_addr, c->hs_alen); *pp;
		     pp = &(*pp)->anext)
			if (*pp == c) {
				*pp = c->anext;
				break;
			}
	p->nconns--;
	if (--c->peer->nconns == 0)
		idle_push(p, c->peer);
	c->addrmem->accepted -= !c->initiator;
	admit_update(d);
	sports_release(c);
	mrp_conn_del(c->eng);
	mrd_membudget_fini(&c->mem);
	{
		int fam;
		const void *ip;
		mrd_addrmem_put(ip_bucket(p, &c->peer->addr, &fam, &ip), c->addrmem);
	}
	if (p->hooks.freed)
		p->hooks.freed(p->hooks.ud, c);
	free(c);
}

void mrd_conn_touch(mrd_conn *c)
{
	if (c->dirty || c->in_service)
		return;
	mrd_peers *p = c->d->peers;
	c->dirty = 1;
	c->dnext = NULL;
	if (p->dirty_tail)
		p->dirty_tail->dnext = c;
	else
		p->dirty = c;
	p->dirty_tail = c;
}

void mrd_conn_detach(mrd_conn *c)
{
	c->ops = NULL;
	c->ud = NULL;
}

/* ---- rate limit of answers (SPEC 14.3) ----------------------------------- */

/* REJECT and NAK UNKNOWN_CONN. */
static int answer_allowed(mrd *d, const mrd_sockaddr *src)
{
	if (mrd_budget_take(&d->peers->answers, src, uv_hrtime()))
		return 1;
	d->cnt.answers_limited++;
	return 0;
}

/* ACCEPT, first or resent: only to sources that proved their address. */
static int accept_allowed(mrd *d, const mrd_sockaddr *src)
{
	if (mrd_budget_take(&d->peers->accepts, src, uv_hrtime()))
		return 1;
	d->cnt.accepts_limited++;
	return 0;
}

/* ---- handshake packets --------------------------------------------------- */

static void hdr_init(mrp_hdr *h, uint8_t op, uint32_t dst, uint32_t src, uint64_t token)
{
	memset(h, 0, sizeof(*h));
	h->version = MRP_VERSION;
	h->opcode = op;
	h->dst_conn_id = dst;
	h->src_conn_id = src;
	h->token = token;
}

/* Our plane addresses as handshake entries (the planes in mask; 0 = all). */
static uint8_t our_addrs(const mrd *d, mrp_addr *out, uint32_t mask)
{
	uint8_t n = 0;
	for (unsigned i = 0; i < d->cfg.nplanes && n < MRP_MAX_ADDRS; i++) {
		const mrd_addr *a = &d->cfg.planes[i].address;
		if (a->family != AF_INET && a->family != AF_INET6)
			continue;
		if (mask && !(mask & (1u << i)))
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].family = a->family == AF_INET ? 4 : 6;
		out[n].plane = (uint8_t)i;
		memcpy(out[n].addr, a->bytes, a->family == AF_INET ? 4 : 16);
		n++;
	}
	return n;
}

/* Our limits: the engine parameters the configuration gives. */
static void our_params(const mrd *d, mrp_conn_params *cp)
{
	mrd_config_conn_params(&d->cfg, cp);
	cp->rh = d->rh; /* the daemon's one rate-hint allocator (main.c) */
}

static void send_pkt(mrd *d, mrd_sock *s, const mrd_sockaddr *to, socklen_t tolen,
		     const mrp_pkt *k)
{
	uint8_t buf[MRD_HS_MAX];
	ssize_t n = mrp_pkt_encode(buf, sizeof(buf), k);
	if (n < 0) {
		mrd_warn("cannot encode %s: %s", mrp_op_name(k->hdr.opcode), mrp_strerror((int)n));
		return;
	}
	mrd_dp_send_now(d->dp, s, to, tolen, buf, (uint32_t)n);
}

static void send_reject(mrd *d, mrd_sock *s, const mrd_sockaddr *to, socklen_t tolen,
			uint32_t dst, uint64_t token, uint8_t reason, uint32_t service)
{
	if (!answer_allowed(d, to))
		return;
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	hdr_init(&k.hdr, MRP_OP_REJECT, dst, 0, token);
	k.u.reject.reason = reason;
	k.u.reject.min_version = MRP_VERSION_MIN;
	k.u.reject.max_version = MRP_VERSION_MAX;
	k.u.reject.service_id = service;
	d->cnt.rejects_tx++;
	send_pkt(d, s, to, tolen, &k);
}

/* SPEC 7.4: answer a data packet, ACK or ACCEPT of an unknown connection. */
static void send_nak_unknown(mrd *d, mrd_sock *s, const mrd_sockaddr *to, socklen_t tolen,
			     const mrp_pkt *pkt)
{
	const mrp_hdr *h = &pkt->hdr;
	if (!h->src_conn_id || !h->token || !answer_allowed(d, to))
		return;
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	hdr_init(&k.hdr, MRP_OP_NAK, h->src_conn_id, h->dst_conn_id, 0);
	k.u.nak.reason = MRP_NAK_UNKNOWN_CONN;
	k.u.nak.token_echo = h->token;
	k.u.nak.nak_path_id = h->path_id;
	k.u.nak.nak_path_gen = h->path_gen;
	k.u.nak.nak_psn = h->psn;
	if (mrp_op_is_data(h->opcode)) {
		k.u.nak.stream_id = pkt->u.data.stream_id;
		k.u.nak.msn = pkt->u.data.msn;
		k.u.nak.offset = pkt->u.data.offset;
	}
	d->cnt.naks_unknown_tx++;
	send_pkt(d, s, to, tolen, &k);
}

/* SPEC 9.7: a cookie for a CONNECT that has none (or a stale one). */
static void send_retry(mrd *d, mrd_sock *s, const mrd_sockaddr *to, socklen_t tolen,
		       const mrp_pkt *connect, uint64_t now)
{
	if (!mrd_budget_take(&d->peers->retries, to, now)) {
		d->cnt.retries_limited++;
		return;
	}
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	hdr_init(&k.hdr, MRP_OP_RETRY, connect->hdr.src_conn_id, 0, connect->u.hs.hs_token);
	k.u.retry.cookie = mrd_cookie_make(&d->peers->cookies, to, connect->u.hs.instance_id, now);
	k.u.retry.service_id = connect->u.hs.service_id;
	d->cnt.retries_tx++;
	send_pkt(d, s, to, tolen, &k);
}

/* The plane whose service socket sends our CONNECT to `to`. */
static int plane_for(const mrd *d, int family)
{
	for (unsigned i = 0; i < d->dp->nplanes; i++)
		if (d->dp->planes[i].local.sa.sa_family == family)
			return (int)i;
	return -1;
}

/* Pair our planes with the peer's addresses (SPEC 9.5). */
static unsigned make_pairs(mrd_conn *c, const mrp_hs *hs, unsigned hs_plane)
{
	const mrd *d = c->d;
	c->npairs = 0;
	if (!(c->caps & MRP_CAP_MULTIPLANE)) {
		/* One address pair: the handshake's. */
		mrd_pair *pr = &c->pairs[c->npairs++];
		pr->lplane = (uint8_t)hs_plane;
		pr->raddr = c->hs_addr;
		pr->rlen = c->hs_alen;
		if (pr->raddr.sa.sa_family == AF_INET6)
			pr->raddr.in6.sin6_port = htons(hs->service_port);
		else
			pr->raddr.in.sin_port = htons(hs->service_port);
		return c->npairs;
	}
	for (unsigned i = 0; i < d->dp->nplanes; i++) {
		int fam = d->dp->planes[i].local.sa.sa_family;
		if (c->opt_planes && !(c->opt_planes & (1u << i)))
			continue;
		for (unsigned k = 0; k < hs->num_addrs; k++) {
			const mrp_addr *a = &hs->addrs[k];
			if (a->plane != i || (a->family == 4) != (fam == AF_INET))
				continue;
			mrd_pair *pr = &c->pairs[c->npairs++];
			memset(pr, 0, sizeof(*pr));
			pr->lplane = (uint8_t)i;
			if (fam == AF_INET) {
				pr->raddr.in.sin_family = AF_INET;
				memcpy(&pr->raddr.in.sin_addr, a->addr, 4);
				pr->raddr.in.sin_port = htons(hs->service_port);
				pr->rlen = sizeof(pr->raddr.in);
			} else {
				pr->raddr.in6.sin6_family = AF_INET6;
				memcpy(&pr->raddr.in6.sin6_addr, a->addr, 16);
				pr->raddr.in6.sin6_port = htons(hs->service_port);
				pr->rlen = sizeof(pr->raddr.in6);
			}
			break;
		}
	}
	return c->npairs;
}

/* The engine's region lookup goes to the connection's service, if any. */
static uint8_t *mr_resolve(void *ud, uint32_t rkey, uint64_t addr, uint64_t len,
			   unsigned access, int *pnak)
{
	mrd_conn *c = ud;
	if (c->ops && c->ops->resolve)
		return c->ops->resolve(c, rkey, addr, len, access, pnak);
	*pnak = MRP_NAK_INVALID_RKEY;
	return NULL;
}

uint64_t mrd_rto_initial(uint64_t rto_initial_ns, uint64_t rto_max_ns, uint64_t hs_rtt_ns)
{
	uint64_t rto = rto_initial_ns;
	if (hs_rtt_ns && hs_rtt_ns <= MRD_HS_TIMEOUT_NS && 3 * hs_rtt_ns > rto)
		rto = 3 * hs_rtt_ns;
	return rto < rto_max_ns ? rto : rto_max_ns;
}

/* A handshake's round trip from then (hs_sent_ns) to now, 0 if now is not
 * later (a time read at the start of a round of received batches may
 * precede a send of the same round). */
static uint64_t hs_since(uint64_t then, uint64_t now)
{
	return now > then ? now - then : 0;
}

/* The engine's initial timeout from the configuration and what the
 * handshake measured (c->hs_rtt_ns). */
static uint64_t conn_rto_init(const mrd_conn *c)
{
	const mrd *d = c->d;
	return mrd_rto_initial(d->cfg.rto_initial_ns, d->cfg.rto_max_ns, c->hs_rtt_ns);
}

/* Create the engine with the negotiated parameters (SPEC 3.1). */
static int conn_engine(mrd_conn *c, uint64_t now)
{
	mrd *d = c->d;
	mrp_conn_params cp;
	our_params(d, &cp);
	cp.local_conn_id = c->local_id;
	cp.peer_conn_id = c->peer_id;
	cp.local_token = c->local_token;
	cp.peer_token = c->peer_token;
	cp.mtu = c->mtu;
	cp.max_streams = c->max_streams;
	cp.caps = c->caps; /* what both ends negotiated (SPEC 12.4) */
	cp.nplanes = (uint8_t)c->npairs;
	/* Only the handshake's address is known to be the peer's: the others
	 * it announced carry nothing but PROBEs until one is answered (SPEC
	 * 9.5), so that a peer cannot point our traffic at another host. */
	for (unsigned i = 0; i < c->npairs; i++)
		if (!mrd_sockaddr_same_ip(&c->pairs[i].raddr, &c->hs_addr))
			cp.unproven_planes |= 1u << i;
	cp.read = (c->caps & MRP_CAP_READ) != 0; /* SPEC 5.8 */
	/* (the acceptor's is the configuration's until the confirmation:
	 * confirm()) */
	cp.rto_init_ns = c->rto_init_ns = conn_rto_init(c);
	if (c->initiator && (c->caps & MRP_CAP_ADMIT)) {
		/* the ACCEPT's credit; none: ask for a grant (SPEC 6.6) */
		cp.admit = 1;
		cp.admit_credit = c->admit_credit;
		cp.admit_ttl_ns = ADMIT_START_NS;
	}
	uint32_t maxp = (uint32_t)d->cfg.max_paths_per_plane * c->npairs;
	uint32_t initp = (uint32_t)(c->opt_paths ? c->opt_paths
						  : d->cfg.initial_paths_per_plane) * c->npairs;
	if (maxp > c->max_paths)
		maxp = c->max_paths;
	if (initp > maxp)
		initp = maxp;
	cp.max_paths = (uint16_t)maxp;
	cp.initial_paths = (uint16_t)initp;
	c->held = calloc(maxp ? maxp : 1, sizeof(*c->held));
	if (!c->held)
		return -ENOMEM;
	c->nheld = (uint16_t)maxp;
	/* Engine plane i is our plane pairs[i].lplane: pace each to its link
	 * speed (configured or the kernel's, planes.c) and cap the connection
	 * at their sum when every one is known. */
	uint64_t sum = 0;
	int all = 1;
	for (unsigned i = 0; i < c->npairs; i++) {
		uint64_t r = mrd_planes_speed(d, c->pairs[i].lplane);
		cp.plane_rate_bps[i] = r;
		/* (how far this plane's network is, as the other connections
		 * measured it: a lost first packet asks by PROBE that soon) */
		if (c->pairs[i].lplane < MRD_MAX_PLANES)
			cp.plane_rtt_hint_ns[i] = d->peers->plane_rtt_ns[c->pairs[i].lplane];
		sum += r;
		all &= r != 0;
	}
	if (!cp.cc.line_rate_bps && all)
		cp.cc.line_rate_bps = sum;
	mrp_mr_ops mr = {.resolve = mr_resolve, .ud = c};
	/* Its own allocator, within the connection's and the daemon's memory
	 * budgets (membudget.h; limits read at creation, like the rest). */
	d->peers->memacct.limit = d->cfg.memory;
	mrd_membudget_init(&c->mem, &d->peers->memacct, &c->addrmem->acct, d->cfg.conn_memory);
	mrp_mem mem = mrd_membudget_mem(&c->mem);
	int rv = mrp_conn_new(&c->eng, &cp, &mem, &d->peers->rng, &mr, now);
	if (rv < 0) {
		mrd_warn("conn %08x: engine: %s", c->local_id, mrp_strerror(rv));
		return rv;
	}
	/* A plane that is down now carries nothing until it comes back. */
	for (unsigned i = 0; i < c->npairs; i++)
		if (!mrd_planes_up(d, c->pairs[i].lplane))
			mrp_conn_plane_event(c->eng, i, MRP_PLANE_DOWN, now);
	/* And the layers above (a drained plane takes no data). */
	if (d->peers->hooks.established)
		d->peers->hooks.established(d->peers->hooks.ud, c, now);
	return rv;
}

/* ---- ending connections -------------------------------------------------- */

/* What the log and `show conns` say of a connection the engine closed by
 * itself: why it failed (it sent RESET), or "closed". (At most 47
 * characters: end_reason.) */
static const char *engine_end(const mrp_conn *e)
{
	switch (mrp_conn_failure(e)) {
	case -1:
		return "closed";
	case MRP_CLOSE_RETRY_EXCEEDED:
		return "failed: retries exhausted or peer silent";
	case MRP_CLOSE_PROTOCOL:
		return "failed: protocol violation";
	default:
		return "failed: access error";
	}
}

static void conn_ended(mrd_conn *c, const char *why, uint64_t now)
{
	if (c->state == MRD_CONN_ENDED)
		return;
	/* Its owner may free the memory of the requests still out (ended). */
	mrd_dp_flush_refs(c->d->dp);
	int was = c->state;
	if (was == MRD_CONN_HALF_OPEN) {
		c->d->peers->nhalf--;
		c->peer->nhalf--;
	}
	c->state = MRD_CONN_ENDED;
	c->ended_ns = now;
	if (why != c->end_reason)
		snprintf(c->end_reason, sizeof(c->end_reason), "%s", why);
	if (was == MRD_CONN_ESTABLISHED)
		c->d->cnt.conns_closed++;
	else
		c->d->cnt.conns_failed++;
	mrd_info("conn %08x (%s %08x): %s", c->local_id,
		 c->initiator ? "to" : "from", c->peer_id, why);
	if (was == MRD_CONN_ESTABLISHED)
		mrd_emit(&c->d->bus, strstr(why, "reset") ? MRD_STORE_EV_CONN_RESET
							 : MRD_STORE_EV_CONN_DOWN,
			 -1, NULL, c->local_id, -1, why);
	const mrd_conn_ops *ops = c->ops;
	void *ud = c->ud;
	c->ops = NULL;
	if (ops && ops->ended) {
		c->ud = ud;
		ops->ended(c, why);
	}
	c->ud = NULL;
	mrd_conn_touch(c);
}

static void deliver_cq(mrd_conn *c)
{
	mrp_cqe cqe[64];
	int n;
	while ((n = mrp_conn_poll_cq(c->eng, cqe, 64)) > 0) {
		/* A completion hands the request's memory back to its owner:
		 * packets queued with their payload in it go first
		 * (mrp_conn_write_pkt_ref). */
		mrd_dp_flush_refs(c->d->dp);
		for (int i = 0; i < n; i++)
			if (c->ops && c->ops->completion)
				c->ops->completion(c, &cqe[i]);
	}
}

/* End at once without telling the peer (its instance is gone: SPEC 9.6). */
static void conn_kill(mrd_conn *c, const char *why, uint64_t now)
{
	if (c->eng && c->state == MRD_CONN_ESTABLISHED) {
		mrp_conn_close(c->eng, 1, now);
		uint8_t buf[MRD_DP_PKT_MAX];
		mrp_tx_info ti;
		while (mrp_conn_write_pkt(c->eng, &ti, buf, sizeof(buf), now) > 0)
			; /* the RESET is discarded: the peer knows nothing of it */
		deliver_cq(c);
	}
	conn_ended(c, why, now);
}

/* The engine's PROBE with ACK_REQ on the first active path that takes one
 * carries the peer's token: only the instance that knows the connection
 * answers it. (A path with a probe out already has its question asked.) */
static void chal_probe(mrd_conn *c, uint64_t now)
{
	mrp_path_info pi;
	for (unsigned i = 0; c->eng && i < c->max_paths; i++)
		if (mrp_conn_path_info(c->eng, i, &pi) == 0 && pi.state == MRP_PATH_ACTIVE &&
		    mrp_conn_path_probe(c->eng, (uint16_t)i, now) == 0)
			return;
}

/* A handshake from peer `pe` names instance `inst`. If we knew another
 * one, the peer may have restarted: challenge each connection of another
 * instance (challenge.h); the unanswered ones end in conn_service(). Only
 * an authenticated handshake (an ACCEPT with our token, a confirmed
 * connection) records the new instance. A CONNECT ends nothing by itself
 * (SPEC 9.6). */
static void peer_instance(mrd *d, mrd_peer *pe, uint64_t inst, int authenticated,
			  uint64_t now)
{
	/* An unauthenticated claim starts at most one round per gap. */
	if (pe->have_instance && pe->instance_id != inst &&
	    (authenticated || !pe->chal_round_ns || now - pe->chal_round_ns >= MRD_CHAL_GAP_NS)) {
		unsigned n = 0;
		for (mrd_conn *c = d->peers->all; c; c = c->next)
			if (c->peer == pe && c->peer_instance != inst &&
			    c->state == MRD_CONN_ESTABLISHED && mrd_chal_start(&c->chal, now)) {
				n++;
				mrd_conn_touch(c);
			}
		if (n) {
			pe->chal_round_ns = now;
			pe->challenges += n;
			d->cnt.challenges += n;
			char buf[64];
			mrd_info("peer %s: a handshake names instance %016llx, we know %016llx: "
				 "challenging %u connection(s) of the old one",
				 mrd_sockaddr_str(&pe->addr, buf, sizeof(buf)),
				 (unsigned long long)inst, (unsigned long long)pe->instance_id, n);
		}
	}
	if (authenticated) {
		pe->instance_id = inst;
		pe->have_instance = 1;
	}
}

/* The old instance of c's peer is gone: one restart per round of
 * challenges, however many of its connections tell. */
static void count_restart(mrd_conn *c)
{
	mrd *d = c->d;
	mrd_peer *pe = c->peer;
	if (pe->chal_counted_ns != pe->chal_round_ns) {
		pe->chal_counted_ns = pe->chal_round_ns;
		pe->restarts++;
		d->cnt.peer_restarts++;
		char buf[64];
		mrd_info("peer %s restarted: its old connections do not answer",
			 mrd_sockaddr_str(&pe->addr, buf, sizeof(buf)));
	}
}

/* A challenged connection got no answer: the old instance is gone. */
static void chal_expired(mrd_conn *c, uint64_t now)
{
	count_restart(c);
	conn_kill(c, "peer restarted", now);
}

/* ---- the engine loop of one connection ----------------------------------- */

/* Payloads up to this many bytes are copied into the send queue's slot,
 * longer ones sent from where they are (mrp_conn_write_pkt_ref). */
#define COPY_MAX 512

/* Run the engine: timers, completions, packets out. Returns the number of
 * packets written (WRITE_BUDGET means there may be more). */
static uint32_t engine_pump(mrd_conn *c, uint64_t now)
{
	mrd *d = c->d;
	mrp_conn *e = c->eng;
	if (mrp_conn_deadline(e) <= now)
		mrp_conn_handle_timeout(e, now);
	deliver_cq(c);
	uint32_t sent = 0;
	uint16_t bad[8];
	unsigned nbad = 0;
	while (sent < WRITE_BUDGET) {
		uint8_t *slot = mrd_dp_tx_slot(d->dp);
		mrp_tx_info ti;
		ssize_t n = mrp_conn_write_pkt_ref(e, &ti, slot, MRD_DP_PKT_MAX, now);
		if (n <= 0) {
			if (n < 0)
				mrd_warn("conn %08x: write_pkt: %s", c->local_id,
					 mrp_strerror((int)n));
			break;
		}
		sent++;
		if (ti.plane >= c->npairs)
			continue;
		const mrd_pair *pr = &c->pairs[ti.plane];
		int err = 0;
		mrd_sock *s = mrd_dp_sport(d->dp, pr->lplane, ti.sport, &err);
		if (!s) {
			/* Another socket holds this port: drop the packet (the
			 * engine sees a loss) and move the path to another
			 * port below. */
			c->sport_fails++;
			d->cnt.sport_bind_fails++;
			if (nbad < 8)
				bad[nbad++] = ti.path_id;
			continue;
		}
		if (ti.payload_len && ti.payload_len <= COPY_MAX) {
			/* a short payload costs less copied than as an iovec */
			memcpy(slot + n, ti.payload, ti.payload_len);
			n += ti.payload_len;
			ti.payload_len = 0;
		}
		mrd_dp_tx_commit_ref(d->dp, s, &pr->raddr, pr->rlen, (uint32_t)n, ti.payload,
				     ti.payload_len);
		if (ti.expedite && d->cfg.expedite_dscp)
			mrd_dp_tx_dscp(d->dp, (uint8_t)d->cfg.expedite_dscp); /* SPEC 6.7 */
		/* A PROBE's timestamp and a PROBE_ACK's hold time are taken
		 * when the packet leaves, not now (mrd_dp_tx_stamp): the
		 * flush sends path after path, and a PROBE of a path flushed
		 * later would otherwise count the earlier paths' sends in its
		 * RTT (SPEC 8.2: ts_ns is the clock at sending; 8.3:
		 * ack_delay_ns the time the answer was held). */
		if (n == MRP_PROBE_LEN && slot[1] == MRP_OP_PROBE)
			mrd_dp_tx_stamp(d->dp, MRD_DP_STAMP_SET64, PROBE_TS_OFF, now);
		else if (n == MRP_PROBE_ACK_LEN && slot[1] == MRP_OP_PROBE_ACK)
			mrd_dp_tx_stamp(d->dp, MRD_DP_STAMP_ADD32, PROBE_ACK_DELAY_OFF, now);
	}
	for (unsigned i = 0; i < nbad; i++)
		mrp_conn_path_steer(e, bad[i], 0, -1, now);
	sports_sync(c);
	deliver_cq(c);
	mrp_event ev;
	while (mrp_conn_poll_event(e, &ev) == 1) {
		/* the log, the monitors, a drill (the event bus) */
		int lp = ev.plane < c->npairs ? (int)c->pairs[ev.plane].lplane : -1;
		mrd_emit_path(&c->d->bus, lp, lp >= 0 ? c->d->cfg.planes[lp].name : NULL,
			      c->local_id, &ev);
	}
	return sent;
}

static void send_connect(mrd_conn *c)
{
	mrd_dp_send_now(c->d->dp, c->hs_sock, &c->hs_addr, c->hs_alen, c->hs_pkt, c->hs_len);
}

static uint64_t silent_ns(const mrd *d)
{
	uint64_t pi = d->cfg.probe_interval_ns;
	if (!pi)
		return 0;
	return pi * SILENT_PROBES > SILENT_MIN_NS ? pi * SILENT_PROBES : SILENT_MIN_NS;
}

/* Service one connection and schedule its next deadline. May free it. */
static void conn_service(mrd_conn *c, uint64_t now)
{
	mrd *d = c->d;
	uint64_t next = MRD_NEVER;
	c->in_service = 1;
	switch (c->state) {
	case MRD_CONN_CONNECTING:
		if (now >= c->hs_next_ns) {
			if (c->hs_tries >= HS_TRIES) {
				conn_ended(c, "handshake timed out", now);
				next = now;
				break;
			}
			if (!c->hs_tries)
				c->hs_sent_ns = now; /* the handshake's round trip */
			send_connect(c);
			c->hs_next_ns = now + (HS_FIRST_NS << c->hs_tries);
			c->hs_tries++;
		}
		next = c->hs_next_ns;
		break;
	case MRD_CONN_HALF_OPEN:
		if (c->hs_discard || now >= c->created_ns + HALF_OPEN_NS) {
			/* SPEC 9.4: discarded without notice. */
			c->in_service = 0;
			conn_free(c);
			return;
		}
		next = c->created_ns + HALF_OPEN_NS;
		break;
	case MRD_CONN_ESTABLISHED: {
		int ch = mrd_chal_step(&c->chal, now);
		if (ch == MRD_CHAL_EXPIRED) {
			chal_expired(c, now);
			next = now;
			break;
		}
		if (ch == MRD_CHAL_PROBE)
			chal_probe(c, now);
		uint64_t silent = silent_ns(d);
		if (silent && now - c->heard_ns >= silent && !c->silenced) {
			c->silenced = 1;
			if (!c->end_reason[0])
				snprintf(c->end_reason, sizeof(c->end_reason), "peer silent");
			d->cnt.conns_silent++;
			char buf[64];
			mrd_info("conn %08x (%s): nothing heard from the peer for %llu s: ending it",
				 c->local_id, mrd_sockaddr_str(&c->peer->addr, buf, sizeof(buf)),
				 (unsigned long long)(silent / 1000000000ull));
			mrp_conn_close(c->eng, 1, now);
		}
		if (engine_pump(c, now) >= WRITE_BUDGET) {
			next = now; /* more to send: after the loop polls once */
			break;
		}
		if (mrp_conn_is_closed(c->eng)) {
			conn_ended(c, c->end_reason[0] ? c->end_reason : engine_end(c->eng), now);
			next = now;
			break;
		}
		/* A pacing wait (the time the next packet may leave, mostly
		 * a few us away) ends no sooner than timers.wake_slack from
		 * now: the daemon wakes once for a bunch of packets (the
		 * pacing bucket lets up to burst_pkts accumulate) instead of
		 * once or twice per packet. The other deadlines (delayed ACK,
		 * RTO, a control packet due) are kept as they are. */
		next = mrp_conn_deadline_paced(c->eng, d->cfg.wake_slack_ns
							   ? now + d->cfg.wake_slack_ns : 0);
		if (mrd_chal_deadline(&c->chal) < next)
			next = mrd_chal_deadline(&c->chal);
		if (silent && !c->silenced && c->heard_ns + silent < next)
			next = c->heard_ns + silent;
		break;
	}
	case MRD_CONN_ENDED:
		if (now >= c->ended_ns + TOMB_NS) {
			c->in_service = 0;
			conn_free(c);
			return;
		}
		next = c->ended_ns + TOMB_NS;
		if (c->eng) {
			engine_pump(c, now); /* a CLOSE reply (SPEC 11.5) */
			uint64_t t = mrp_conn_deadline(c->eng);
			if (t < next)
				next = t <= now ? now + 1000 : t;
		}
		break;
	}
	c->in_service = 0;
	if (mrd_timer_set(&d->timer, &c->tent, next) < 0)
		mrd_conn_touch(c); /* no memory for the heap: retry next run */
}

void mrd_peer_run(mrd *d)
{
	mrd_peers *p = d->peers;
	uint64_t now = uv_hrtime();
	while (p->dirty) {
		mrd_conn *c = p->dirty;
		p->dirty = c->dnext;
		if (!p->dirty)
			p->dirty_tail = NULL;
		c->dirty = 0;
		conn_service(c, now);
	}
	mrd_dp_flush(d->dp);
	mrd_timer_rearm(&d->timer);
}

void mrd_peer_on_timer(mrd_timer *t)
{
	mrd *d = t->data;
	mrd_dp_drain(d->dp);
	uint64_t now = uv_hrtime();
	mrd_timer_ent *e;
	/* Bounded: a connection rescheduled at `now` waits for the next
	 * round, so received datagrams get their turn in between. */
	for (int i = 0; i < 4096 && (e = mrd_timer_pop_due(t, now)); i++) {
		mrd_conn *c = (mrd_conn *)((char *)e - offsetof(mrd_conn, tent));
		mrd_conn_touch(c);
	}
	mrd_peer_run(d);
}

/* ---- initiator ----------------------------------------------------------- */

int mrd_conn_connect(mrd *d, const mrd_sockaddr *to, socklen_t tolen,
		     uint32_t service_id, const mrd_conn_ops *ops, void *ud,
		     mrd_conn **pc, char *err, size_t errlen)
{
	return mrd_conn_connect_opts(d, to, tolen, service_id, ops, ud, NULL, pc, err,
				     errlen);
}

int mrd_conn_connect_opts(mrd *d, const mrd_sockaddr *to, socklen_t tolen,
			  uint32_t service_id, const mrd_conn_ops *ops, void *ud,
			  const mrd_conn_opts *opts, mrd_conn **pc, char *err,
			  size_t errlen)
{
	if (d->stopping) {
		snprintf(err, errlen, "the daemon is stopping");
		return -1;
	}
	int plane = plane_for(d, to->sa.sa_family);
	if (plane < 0) {
		snprintf(err, errlen, "no plane of that address family");
		return -1;
	}
	mrd_peer *pe = peer_get(d, to, tolen, 1);
	mrd_conn *c = pe ? conn_new(d, pe, 1) : NULL;
	if (!c) {
		snprintf(err, errlen, "out of connections or memory");
		return -1;
	}
	c->state = MRD_CONN_CONNECTING;
	c->service_id = service_id;
	c->ops = ops;
	c->ud = ud;
	c->hs_sock = &d->dp->planes[plane].service;
	c->hs_addr = *to;
	c->hs_alen = tolen;
	mrp_conn_params cp;
	our_params(d, &cp);
	if (opts) {
		if (opts->max_streams && opts->max_streams < cp.max_streams)
			cp.max_streams = opts->max_streams;
		c->opt_paths = opts->initial_paths;
		c->opt_planes = opts->planes_mask;
	}
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	/* A young cookie of this acceptor saves the RETRY (SPEC 9.7). */
	uint64_t now = uv_hrtime();
	hdr_init(&k.hdr, MRP_OP_CONNECT, 0, c->local_id,
		 pe->cookie && now - pe->cookie_ns < MRD_COOKIE_REUSE_NS ? pe->cookie : 0);
	mrp_hs *hs = &k.u.hs;
	hs->min_version = MRP_VERSION_MIN;
	hs->max_version = MRP_VERSION_MAX;
	hs->mtu = (uint16_t)cp.mtu;
	hs->service_id = service_id;
	hs->hs_token = c->local_token;
	hs->instance_id = d->instance_id;
	hs->caps = c->caps = our_caps(d); /* the offer, which the ACCEPT may narrow */
	hs->max_streams = cp.max_streams;
	hs->max_paths = cp.max_paths;
	hs->service_port = d->cfg.port;
	hs->num_addrs = our_addrs(d, hs->addrs, c->opt_planes);
	ssize_t n = mrp_pkt_encode(c->hs_pkt, sizeof(c->hs_pkt), &k);
	if (n < 0) {
		snprintf(err, errlen, "cannot encode CONNECT: %s", mrp_strerror((int)n));
		c->ops = NULL;
		conn_ended(c, "encode error", uv_hrtime());
		return -1;
	}
	c->hs_len = (uint16_t)n;
	c->hs_next_ns = 0; /* first transmission at the next run */
	d->cnt.conns_opened++;
	mrd_conn_touch(c);
	*pc = c;
	return 0;
}

/* An ACCEPT for an attempt in CONNECTING, token already checked. */
static void on_accept(mrd *d, mrd_conn *c, const mrp_pkt *pkt, unsigned plane, uint64_t now)
{
	const mrp_hs *hs = &pkt->u.hs;
	mrp_conn_params cp;
	our_params(d, &cp);
	const char *bad = NULL;
	if (pkt->hdr.version != MRP_VERSION || hs->min_version != MRP_VERSION)
		bad = "version";
	else if (hs->mtu > cp.mtu || hs->max_streams > cp.max_streams ||
		 hs->max_paths > cp.max_paths)
		bad = "limits above ours";
	else if (hs->caps & ~c->caps)
		bad = "capabilities we did not offer";
	else if (hs->service_id != c->service_id)
		bad = "service id";
	c->peer_id = pkt->hdr.src_conn_id;
	c->peer_token = hs->hs_token;
	/* The handshake's round trip, from the first transmission of the
	 * CONNECT. The ACCEPT does not say which copy it answers, and the
	 * copies leave 1, 3, 7 ... ms after the first: timed from the
	 * latest, a round trip longer than 1 ms -- the networks this is
	 * for -- would measure as a fraction of itself (and Karn's rule, no
	 * sample after a retransmission, would take none on them). Timed
	 * from the first it is exact without loss, and a lost CONNECT or
	 * ACCEPT only lengthens it by the time to the next copy: a longer
	 * initial timeout, within timers.rto_max. After a RETRY, the
	 * smaller of its own round trip and this one (on_retry()). */
	uint64_t rtt = hs_since(c->hs_sent_ns, now);
	if (!c->hs_rtt_ns || (rtt && rtt < c->hs_rtt_ns))
		c->hs_rtt_ns = rtt;
	if (bad) {
		/* SPEC 9.3: RESET PROTOCOL, the attempt fails. */
		mrp_pkt k;
		memset(&k, 0, sizeof(k));
		hdr_init(&k.hdr, MRP_OP_RESET, c->peer_id, c->local_id, c->peer_token);
		k.u.close.reason = MRP_CLOSE_PROTOCOL;
		send_pkt(d, c->hs_sock, &c->hs_addr, c->hs_alen, &k);
		char why[48];
		snprintf(why, sizeof(why), "bad ACCEPT: %s", bad);
		conn_ended(c, why, now);
		return;
	}
	c->mtu = hs->mtu;
	c->max_streams = hs->max_streams;
	c->max_paths = hs->max_paths;
	c->caps = hs->caps;
	c->admit_credit = (c->caps & MRP_CAP_ADMIT) ? mrp_admit_bytes(hs->admit) : 0;
	c->peer_instance = hs->instance_id;
	if (!make_pairs(c, hs, plane)) {
		conn_ended(c, "no usable plane pair", now);
		return;
	}
	if (conn_engine(c, now) < 0) {
		conn_ended(c, "engine refused the parameters", now);
		return;
	}
	c->state = MRD_CONN_ESTABLISHED;
	c->established_ns = c->heard_ns = now;
	c->peer->last_ns = now;
	peer_instance(d, c->peer, hs->instance_id, 1, now);
	mrd_info("conn %08x to %08x: established, %u plane pair(s), mtu %u", c->local_id,
		 c->peer_id, c->npairs, c->mtu);
	mrd_emit(&d->bus, MRD_STORE_EV_CONN_UP, -1, NULL, c->local_id, -1, "initiator");
	if (c->ops && c->ops->established && c->ops->established(c) < 0) {
		mrd_conn_close(c, 1);
		mrd_conn_touch(c);
		return;
	}
	/* SPEC 9.3: the initiator confirms promptly with data or a PROBE. A
	 * service may have nothing to send yet (an application that only
	 * listens for its peer's first message): a PROBE on the first active
	 * path confirms the connection now, not at the first idle probe. */
	mrp_path_info pi;
	for (unsigned i = 0; c->eng && i < c->max_paths; i++)
		if (mrp_conn_path_info(c->eng, i, &pi) == 0 && pi.state == MRP_PATH_ACTIVE) {
			mrp_conn_path_probe(c->eng, (uint16_t)i, now);
			break;
		}
	mrd_conn_touch(c);
}

/* SPEC 9.7: the acceptor wants its cookie in our CONNECT. */
static void on_retry(mrd *d, mrd_conn *c, const mrp_pkt *pkt, uint64_t now)
{
	mrp_pkt k;
	if (pkt->hdr.token != c->local_token || pkt->u.retry.service_id != c->service_id) {
		mrd_count_drop(d, MRP_ERR_TOKEN);
		c->drops[-MRP_ERR_TOKEN]++;
		return;
	}
	if (c->hs_retries >= MAX_RETRIES ||
	    mrp_pkt_decode(&k, c->hs_pkt, c->hs_len) < 0) {
		mrd_count_drop(d, MRP_ERR_STATE);
		c->drops[-MRP_ERR_STATE]++;
		return;
	}
	d->cnt.retries_rx++;
	if (!c->hs_retries) {
		/* The RETRY's round trip is a sample of the handshake's: the
		 * acceptor answers at once, without building anything, from
		 * the same socket its ACCEPT would leave. The CONNECT with
		 * the cookie, sent now, times a second one (on_accept()),
		 * which also holds the acceptor's building of the connection;
		 * each errs only long (a lost packet adds the time to the
		 * next copy), so the smaller is kept. Later RETRYs (to copies
		 * sent before the first came back) start nothing: the
		 * ACCEPT may answer the CONNECT sent now. */
		c->hs_rtt_ns = hs_since(c->hs_sent_ns, now);
		c->hs_sent_ns = now;
	}
	c->hs_retries++;
	c->peer->cookie = pkt->u.retry.cookie;
	c->peer->cookie_ns = now;
	k.hdr.token = pkt->u.retry.cookie;
	ssize_t n = mrp_pkt_encode(c->hs_pkt, sizeof(c->hs_pkt), &k);
	if (n < 0) {
		conn_ended(c, "encode error", now);
		return;
	}
	c->hs_len = (uint16_t)n;
	send_connect(c); /* at once; the retransmission schedule goes on */
}

static void on_reject(mrd *d, mrd_conn *c, const mrp_pkt *pkt, uint64_t now)
{
	const mrp_reject *r = &pkt->u.reject;
	if (c->state != MRD_CONN_CONNECTING) {
		mrd_count_drop(d, MRP_ERR_STATE);
		return;
	}
	/* SPEC 10.3 (only v1 exists, so a VERSION REJECT with token 0
	 * cannot deny a version we sent and is not accepted). */
	if (pkt->hdr.token != c->local_token || r->service_id != c->service_id) {
		mrd_count_drop(d, MRP_ERR_TOKEN);
		c->drops[-MRP_ERR_TOKEN]++;
		return;
	}
	static const char *why[] = {"", "rejected: no common version",
				    "rejected: no such service", "rejected: peer busy",
				    "rejected: refused", "rejected: parameters not acceptable"};
	conn_ended(c, r->reason <= MRP_REJ_MAX ? why[r->reason] : "rejected", now);
}

/* ---- acceptor ------------------------------------------------------------ */

/* Connections peers at src's IP address opened to us, whatever service
 * port they claimed (transport.max_conns_per_address). */
static unsigned accepted_from(mrd *d, const mrd_sockaddr *src)
{
	int fam;
	const void *ip;
	mrd_addrmem **b = ip_bucket(d->peers, src, &fam, &ip);
	const mrd_addrmem *a = mrd_addrmem_find(*b, fam, ip);
	return a ? a->accepted : 0;
}

static void on_connect(mrd *d, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
		       const mrp_pkt *pkt, uint64_t now)
{
	const mrp_hs *hs = &pkt->u.hs;
	mrd_peers *p = d->peers;
	unsigned plane = s->plane->idx;
	d->cnt.connects_rx++;
	/* 0. Address validation (SPEC 9.7): nothing is kept, and nothing but
	 * a RETRY (or a REJECT) is sent, until the CONNECT carries the cookie
	 * that only the owner of its source address can have. */
	if (!mrd_cookie_check(&p->cookies, src, hs->instance_id, pkt->hdr.token, now)) {
		if (pkt->hdr.token)
			d->cnt.cookies_bad++;
		if (!(hs->caps & MRP_CAP_RETRY)) {
			/* an initiator that cannot validate its address */
			send_reject(d, s, src, srclen, pkt->hdr.src_conn_id, hs->hs_token,
				    MRP_REJ_PARAM, hs->service_id);
			return;
		}
		send_retry(d, s, src, srclen, pkt, now);
		return;
	}
	d->cnt.connects_validated++;
	/* 1. Duplicate: resend the same ACCEPT. */
	for (mrd_conn *c = *acc_bucket(p, pkt->hdr.src_conn_id, src, srclen); c; c = c->anext)
		if (!c->initiator && c->peer_id == pkt->hdr.src_conn_id &&
		    c->peer_instance == hs->instance_id && c->hs_alen == srclen &&
		    memcmp(&c->hs_addr, src, srclen) == 0) {
			if (c->state != MRD_CONN_ENDED && accept_allowed(d, src))
				mrd_dp_send_now(d->dp, s, src, srclen, c->hs_pkt, c->hs_len);
			return;
		}
	uint32_t dst = pkt->hdr.src_conn_id;
	uint64_t ti = hs->hs_token;
	/* 2. Version: the header's must lie in the range; we speak only 1. */
	if (pkt->hdr.version < hs->min_version || pkt->hdr.version > hs->max_version) {
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_PARAM, hs->service_id);
		return;
	}
	if (hs->max_version < MRP_VERSION_MIN || hs->min_version > MRP_VERSION_MAX) {
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_VERSION, hs->service_id);
		return;
	}
	/* 3. Service (and whether it answers this peer: svcpolicy.h). */
	const mrd_conn_ops *ops = d->stopping ? NULL : service_lookup(d->peers, hs->service_id);
	int pol = ops ? mrd_svc_allowed(d, hs->service_id, src) : MRD_SVC_OK;
	if (pol == MRD_SVC_REFUSED) {
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_REFUSED, hs->service_id);
		return;
	}
	if (pol == MRD_SVC_OFF)
		ops = NULL;
	if (!ops) {
		send_reject(d, s, src, srclen, dst, ti,
			    d->stopping ? MRP_REJ_RESOURCES : MRP_REJ_NO_SERVICE,
			    hs->service_id);
		return;
	}
	/* 5. Resources (checked before building anything). */
	mrd_sockaddr key = *src;
	if (key.sa.sa_family == AF_INET6)
		key.in6.sin6_port = htons(hs->service_port);
	else
		key.in.sin_port = htons(hs->service_port);
	mrd_peer *pe = peer_get(d, &key, srclen, 0);
	if (p->nconns >= MAX_CONNS || p->nhalf >= MAX_HALF_OPEN ||
	    (pe && pe->nhalf >= MAX_HALF_OPEN_SRC)) {
		d->cnt.half_open_full++;
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_RESOURCES, hs->service_id);
		return;
	}
	if (!accept_allowed(d, src)) {
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_RESOURCES, hs->service_id);
		return;
	}
	if (accepted_from(d, src) >= d->cfg.max_conns_per_addr) {
		d->cnt.conns_per_addr_full++;
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_RESOURCES, hs->service_id);
		return;
	}
	if (!pe)
		pe = peer_get(d, &key, srclen, 1);
	if (pe)
		peer_instance(d, pe, hs->instance_id, 0, now);
	mrd_conn *c = pe ? conn_new(d, pe, 0) : NULL;
	if (!c) {
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_RESOURCES, hs->service_id);
		return;
	}
	mrp_conn_params cp;
	our_params(d, &cp);
	c->state = MRD_CONN_HALF_OPEN;
	p->nhalf++;
	pe->nhalf++;
	c->ops = ops;
	c->service_id = hs->service_id;
	c->peer_id = dst;
	c->peer_token = ti;
	c->peer_instance = hs->instance_id;
	c->hs_sock = s;
	c->hs_addr = *src;
	c->hs_alen = srclen;
	mrd_conn **ab = acc_bucket(p, c->peer_id, &c->hs_addr, c->hs_alen);
	c->anext = *ab;
	*ab = c;
	c->mtu = hs->mtu < cp.mtu ? hs->mtu : cp.mtu;
	c->max_streams = hs->max_streams < cp.max_streams ? hs->max_streams : cp.max_streams;
	if (ops->max_streams) {
		uint16_t m = ops->max_streams(d, hs->service_id);
		if (m && m < c->max_streams)
			c->max_streams = m;
	}
	c->max_paths = hs->max_paths < cp.max_paths ? hs->max_paths : cp.max_paths;
	c->caps = hs->caps & our_caps(d);
	/* 4. Parameters: a usable address pair. */
	if (!make_pairs(c, hs, plane) || conn_engine(c, now) < 0) {
		send_reject(d, s, src, srclen, dst, ti, MRP_REJ_PARAM, hs->service_id);
		conn_free(c);
		return;
	}
	/* 7. Accept. */
	mrp_pkt k;
	memset(&k, 0, sizeof(k));
	hdr_init(&k.hdr, MRP_OP_ACCEPT, dst, c->local_id, ti);
	mrp_hs *a = &k.u.hs;
	a->min_version = a->max_version = MRP_VERSION;
	a->mtu = (uint16_t)c->mtu;
	a->service_id = c->service_id;
	a->hs_token = c->local_token;
	a->instance_id = d->instance_id;
	a->caps = c->caps;
	a->max_streams = c->max_streams;
	a->max_paths = c->max_paths;
	a->service_port = d->cfg.port;
	a->num_addrs = our_addrs(d, a->addrs, 0);
	if (c->caps & MRP_CAP_ADMIT) {
		/* What the initiator may send before it hears from us: its
		 * part of the budget, in whole packets, as the code can say it
		 * (rounded down; the rest returns with the credit's time). */
		uint64_t credit = mrp_rh_admit(d->rh, c->mtu + MRP_DATA_HDR_LEN, UINT64_MAX, now);
		a->admit = mrp_admit_code(credit);
		c->admit_credit = mrp_admit_bytes(a->admit);
		mrp_rh_admit_return(d->rh, credit - c->admit_credit);
		d->cnt.admit_credits += c->admit_credit > 0;
	}
	ssize_t n = mrp_pkt_encode(c->hs_pkt, sizeof(c->hs_pkt), &k);
	if (n < 0) {
		conn_free(c);
		return;
	}
	c->hs_len = (uint16_t)n;
	d->cnt.accepts_tx++;
	c->hs_sent_ns = now; /* (confirm()) */
	mrd_dp_send_now(d->dp, s, src, srclen, c->hs_pkt, c->hs_len);
	mrd_timer_set(&d->timer, &c->tent, c->created_ns + HALF_OPEN_NS);
	char buf[64];
	mrd_debug("conn %08x: CONNECT %08x from %s service %08x: half-open", c->local_id,
		  c->peer_id, mrd_sockaddr_str(src, buf, sizeof(buf)), c->service_id);
}

/* The first packet of the initiator with our token confirms a half-open
 * connection (SPEC 9.4). */
static int confirm(mrd *d, mrd_conn *c, uint64_t now)
{
	/* The acceptor's handshake round trip: from its first ACCEPT to
	 * this packet, which the initiator sends as soon as an ACCEPT
	 * arrives (SPEC 9.3). (An ACCEPT sent again for a copy of the
	 * CONNECT may be the one answered: timed from the first, the sample
	 * errs only long, as the initiator's does.) The acceptor needs one
	 * as much: its engine has no RTT sample before its own first
	 * packets are answered -- a request arriving from the initiator
	 * gives it none -- so on a far network the first window of its
	 * reply would time out on timers.rto_initial as the initiator's
	 * did. Not the host's per-plane RTT instead (plane_rtt_ns, given
	 * to the engine as plane_rtt_hint_ns): it is the largest of every
	 * peer's on the plane, so a far peer's would slow down the
	 * recovery of every near peer's first packets, and a busy host
	 * stretches it (a plane's RTTs at 80 ms on loopback beside a CPU
	 * hog); the engine times only PROBEs from it, which cost only
	 * themselves. A half-open connection has sent nothing, so every
	 * timer of the engine starts from the new value. */
	c->hs_rtt_ns = hs_since(c->hs_sent_ns, now);
	uint64_t rto = conn_rto_init(c);
	if (rto != c->rto_init_ns && mrp_conn_set_rto_init(c->eng, rto) == 0)
		c->rto_init_ns = rto;
	d->peers->nhalf--;
	c->peer->nhalf--;
	c->state = MRD_CONN_ESTABLISHED;
	c->established_ns = c->heard_ns = now;
	c->peer->last_ns = now;
	d->cnt.conns_opened++;
	peer_instance(d, c->peer, c->peer_instance, 1, now);
	char buf[64];
	mrd_info("conn %08x from %08x (%s): established, %u plane pair(s), mtu %u",
		 c->local_id, c->peer_id, mrd_sockaddr_str(&c->peer->addr, buf, sizeof(buf)),
		 c->npairs, c->mtu);
	mrd_emit(&d->bus, MRD_STORE_EV_CONN_UP, -1, NULL, c->local_id, -1, "acceptor");
	if (c->ops && c->ops->established && c->ops->established(c) < 0) {
		mrd_conn_close(c, 1);
		return -1;
	}
	return 0;
}

/* ---- dispatch (SPEC 13) -------------------------------------------------- */

static void reject_version(mrd *d, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
			   const uint8_t *data, size_t len)
{
	/* SPEC 12.3: a CONNECT we cannot decode, at least 36 bytes. */
	mrp_hdr h;
	if (len < 36 || mrp_hdr_decode(&h, data, len) < 0 || h.opcode != MRP_OP_CONNECT ||
	    !h.src_conn_id)
		return;
	send_reject(d, s, src, srclen, h.src_conn_id, 0, MRP_REJ_VERSION, 0);
}

static unsigned pair_index(const mrd_conn *c, unsigned lplane)
{
	for (unsigned i = 0; i < c->npairs; i++)
		if (c->pairs[i].lplane == lplane)
			return i;
	return 0;
}

void mrd_peer_input(mrd *d, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
		    const uint8_t *data, size_t len, int ce, uint64_t now)
{
	mrp_pkt pkt;
	d->cnt.rx_pkts++;
	d->cnt.rx_bytes += len;
	ssize_t rv = mrp_pkt_decode(&pkt, data, len);
	if (rv < 0) {
		mrd_count_drop(d, (int)rv);
		if (rv == MRP_ERR_VERSION)
			reject_version(d, s, src, srclen, data, len);
		return;
	}
	const mrp_hdr *h = &pkt.hdr;
	if (h->opcode == MRP_OP_CONNECT) {
		on_connect(d, s, src, srclen, &pkt, now);
		return;
	}
	mrd_conn *c = mrd_conn_find(d, h->dst_conn_id);
	if (!c) {
		mrd_count_drop(d, MRP_ERR_NOCONN);
		if (mrp_op_is_data(h->opcode) || h->opcode == MRP_OP_ACK ||
		    h->opcode == MRP_OP_ACCEPT)
			send_nak_unknown(d, s, src, srclen, &pkt);
		return;
	}
	int err = 0;
	switch (c->state) {
	case MRD_CONN_ENDED:
		/* Tombstone (SPEC 11.5): the engine answers a late CLOSE; the
		 * rest is expected noise. */
		if (h->opcode == MRP_OP_CLOSE && c->eng && h->token == c->local_token &&
		    h->src_conn_id == c->peer_id) {
			mrp_conn_read_pkt(c->eng, &pkt, pair_index(c, s->plane->idx), ce, now);
			mrd_conn_touch(c);
			return;
		}
		err = MRP_ERR_NOCONN;
		break;
	case MRD_CONN_CONNECTING:
		if (h->opcode == MRP_OP_REJECT) {
			on_reject(d, c, &pkt, now);
			return;
		}
		if (h->opcode == MRP_OP_RETRY) {
			on_retry(d, c, &pkt, now);
			return;
		}
		if (h->opcode != MRP_OP_ACCEPT)
			err = MRP_ERR_STATE;
		else if (h->token != c->local_token)
			err = MRP_ERR_TOKEN;
		else
			on_accept(d, c, &pkt, s->plane->idx, now);
		break;
	case MRD_CONN_HALF_OPEN:
		if (h->opcode == MRP_OP_ACCEPT || h->opcode == MRP_OP_REJECT ||
		    h->opcode == MRP_OP_RETRY) {
			err = MRP_ERR_STATE;
			break;
		}
		if (h->opcode == MRP_OP_NAK && pkt.u.nak.reason == MRP_NAK_UNKNOWN_CONN) {
			/* SPEC 9.4: carries no token of ours, so it confirms
			 * nothing; if it echoes the initiator's token, the
			 * initiator does not know the connection (a CONNECT
			 * sent in its name): discard the half-open one. */
			if (h->src_conn_id != c->peer_id || pkt.u.nak.token_echo != c->peer_token) {
				err = MRP_ERR_TOKEN;
				break;
			}
			if (!c->hs_discard) {
				c->hs_discard = 1;
				d->cnt.half_open_discarded++;
				mrd_conn_touch(c);
			}
			return;
		}
		if (h->token != c->local_token) {
			err = MRP_ERR_TOKEN;
			break;
		}
		if (h->src_conn_id != c->peer_id) {
			err = MRP_ERR_NOCONN;
			break;
		}
		if (c->hs_discard) {
			err = MRP_ERR_STATE;
			break;
		}
		if (confirm(d, c, now) < 0)
			break;
		/* the confirming packet is processed as any other */
		__attribute__((fallthrough));
	case MRD_CONN_ESTABLISHED:
		if (h->opcode == MRP_OP_ACCEPT || h->opcode == MRP_OP_REJECT ||
		    h->opcode == MRP_OP_RETRY) {
			err = MRP_ERR_STATE; /* a duplicate ACCEPT (SPEC 9.3) */
			break;
		}
		if (h->opcode == MRP_OP_NAK && pkt.u.nak.reason == MRP_NAK_UNKNOWN_CONN) {
			/* SPEC 7.4, checked here so that a token-less NAK that
			 * fails never reaches the engine (nor refreshes its
			 * liveness). */
			if (h->src_conn_id != c->peer_id || pkt.u.nak.token_echo != c->peer_token) {
				err = MRP_ERR_TOKEN;
				break;
			}
		} else if (h->token == c->local_token && h->src_conn_id == c->peer_id) {
			c->heard_ns = now; /* a sign of life (SILENT_MIN_NS) */
			if (mrd_chal_answered(&c->chal)) {
				/* our token: the instance that knows the
				 * connection lives (challenge.h) */
				c->peer->challenges_answered++;
				d->cnt.challenges_answered++;
			}
		}
		err = mrp_conn_read_pkt(c->eng, &pkt, pair_index(c, s->plane->idx), ce, now);
		if (err >= 0 && h->opcode == MRP_OP_RESET)
			snprintf(c->end_reason, sizeof(c->end_reason), "reset by peer");
		else if (err >= 0 && h->opcode == MRP_OP_CLOSE && !c->end_reason[0])
			snprintf(c->end_reason, sizeof(c->end_reason), "closed by peer");
		else if (err >= 0 && h->opcode == MRP_OP_NAK &&
			 pkt.u.nak.reason == MRP_NAK_UNKNOWN_CONN && mrd_chal_running(&c->chal)) {
			/* the answer to our challenge, from the address of the
			 * peer that claimed a new instance, echoing the token
			 * only our PROBE carried: that instance does not know
			 * the connection; the old one is gone */
			count_restart(c);
			snprintf(c->end_reason, sizeof(c->end_reason), "peer restarted");
		} else if (err >= 0 && h->opcode == MRP_OP_NAK &&
			 pkt.u.nak.reason == MRP_NAK_UNKNOWN_CONN)
			snprintf(c->end_reason, sizeof(c->end_reason),
				 "peer does not know the connection");
		mrd_conn_touch(c);
		break;
	}
	if (err < 0) {
		mrd_count_drop(d, err);
		if (-err < MRD_NERR)
			c->drops[-err]++;
	}
}

/* ---- closing ------------------------------------------------------------- */

void mrd_conn_close(mrd_conn *c, int abort)
{
	mrd_conn_close_reason(c, abort, c->d->stopping ? MRP_CLOSE_SHUTDOWN : MRP_CLOSE_NORMAL);
}

void mrd_conn_close_reason(mrd_conn *c, int abort, uint16_t reason)
{
	uint64_t now = uv_hrtime();
	switch (c->state) {
	case MRD_CONN_CONNECTING:
		conn_ended(c, "cancelled", now);
		break;
	case MRD_CONN_HALF_OPEN:
		conn_ended(c, "cancelled", now);
		break;
	case MRD_CONN_ESTABLISHED:
		if (!c->end_reason[0])
			snprintf(c->end_reason, sizeof(c->end_reason), "%s",
				 c->d->stopping ? "daemon stopping"
				 : reason == MRP_CLOSE_APP_EXIT ? "application gone"
				 : abort	? "reset" : "closed");
		mrp_conn_close_reason(c->eng, abort, reason, now);
		mrd_conn_touch(c);
		break;
	default:
		break;
	}
}

void mrd_peers_close_all(mrd *d)
{
	for (mrd_conn *c = d->peers->all; c; c = c->next)
		if (c->state != MRD_CONN_ENDED)
			mrd_conn_close(c, 0);
	mrd_peer_run(d);
}

void mrd_peers_plane_event(mrd *d, unsigned plane, int event)
{
	uint64_t now = uv_hrtime();
	for (mrd_conn *c = d->peers->all; c; c = c->next) {
		if (!c->eng || c->state == MRD_CONN_ENDED)
			continue;
		for (unsigned i = 0; i < c->npairs; i++)
			if (c->pairs[i].lplane == plane) {
				mrp_conn_plane_event(c->eng, i, event, now);
				mrd_conn_touch(c);
			}
	}
	mrd_peer_run(d);
}

uint32_t mrd_peers_live(const mrd *d)
{
	uint32_t n = 0;
	for (const mrd_conn *c = d->peers->all; c; c = c->next)
		n += c->state != MRD_CONN_ENDED;
	return n;
}

void mrd_peers_free(mrd *d)
{
	mrd_peers *p = d->peers;
	while (p->all) {
		mrd_conn *c = p->all;
		if (c->state != MRD_CONN_ENDED)
			conn_ended(c, "daemon stopped", uv_hrtime());
		conn_free(c);
	}
	while (p->list) {
		mrd_peer *pe = p->list;
		p->list = pe->next;
		free(pe);
	}
	free(p->buckets);
	free(p->pbuckets);
	free(p->abuckets);
	free(p->ipbuckets);
	p->buckets = NULL;
	p->pbuckets = NULL;
	p->abuckets = NULL;
	p->ipbuckets = NULL;
}

/* ---- the engine's calls for the other modules (peer.h) ------------------- */

int mrd_conn_has_engine(const mrd_conn *c)
{
	return c->eng != NULL;
}

int mrd_conn_post_send(mrd_conn *c, const mrp_wr *wr, uint64_t now_ns)
{
	return mrp_conn_post_send(c->eng, wr, now_ns);
}

int mrd_conn_post_recv(mrd_conn *c, uint16_t stream, uint64_t wr_id, uint8_t *buf,
		       uint32_t len, uint64_t now_ns)
{
	return mrp_conn_post_recv(c->eng, stream, wr_id, buf, len, now_ns);
}

int mrd_conn_plane_event(mrd_conn *c, unsigned plane, int event, uint64_t now_ns)
{
	return mrp_conn_plane_event(c->eng, plane, event, now_ns);
}

int mrd_conn_path_disable(mrd_conn *c, uint16_t path_id, uint64_t now_ns)
{
	return mrp_conn_path_disable(c->eng, path_id, now_ns);
}

int mrd_conn_path_enable(mrd_conn *c, uint16_t path_id, uint64_t now_ns)
{
	return mrp_conn_path_enable(c->eng, path_id, now_ns);
}

int mrd_conn_path_probe(mrd_conn *c, uint16_t path_id, uint64_t now_ns)
{
	return mrp_conn_path_probe(c->eng, path_id, now_ns);
}

int mrd_conn_path_steer(mrd_conn *c, uint16_t path_id, uint16_t sport, int plane,
			uint64_t now_ns)
{
	return mrp_conn_path_steer(c->eng, path_id, sport, plane, now_ns);
}

int mrd_conn_path_info(const mrd_conn *c, unsigned i, mrp_path_info *out)
{
	return mrp_conn_path_info(c->eng, i, out);
}

void mrd_conn_get_stats(const mrd_conn *c, mrp_conn_stats *out)
{
	mrp_conn_get_stats(c->eng, out);
}
