/*
 * Engine tests: two connections joined by an in-memory network whose
 * behaviour each test chooses (delay per path, loss, CE marks, black holes).
 * Deterministic: time starts at 0 and advances explicitly, randomness is a
 * seeded xorshift, memory goes through cmocka's leak-checking allocator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "conn.h"

/* ---- deterministic randomness and memory ------------------------------- */

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static uint64_t rng_next(void *ud)
{
	return xorshift(ud);
}

static void *t_alloc(void *ud, size_t n)
{
	(void)ud;
	return test_malloc(n);
}

static void t_free(void *ud, void *p)
{
	(void)ud;
	test_free(p);
}

static const mrp_mem tmem = { t_alloc, t_free, NULL };

/* ---- memory regions: one region per side ------------------------------- */

typedef struct region {
	uint8_t *base;
	uint64_t addr; /* the address peers use */
	uint64_t len;
	uint32_t rkey;
	unsigned access;
} region;

static uint8_t *mr_resolve(void *ud, uint32_t rkey, uint64_t addr, uint64_t len,
			   unsigned access, int *pnak)
{
	region *r = ud;
	if (rkey != r->rkey) {
		*pnak = MRP_NAK_INVALID_RKEY;
		return NULL;
	}
	if ((r->access & access) != access) {
		*pnak = MRP_NAK_ACCESS;
		return NULL;
	}
	if (addr < r->addr || len > r->len || addr - r->addr > r->len - len) {
		*pnak = MRP_NAK_OUT_OF_BOUNDS;
		return NULL;
	}
	return r->base + (addr - r->addr);
}

/* ---- the network -------------------------------------------------------- */

#define MAXQ 65536
#define PKTMAX (MRP_DATA_HDR_LEN + MRP_MTU_MAX)

typedef struct wpkt {
	uint64_t at;
	uint64_t seq;
	int to;      /* 0: A, 1: B */
	int plane;
	int ce;
	size_t len;
	uint8_t data[PKTMAX];
} wpkt;

typedef struct net net;
static void stamp_late(uint8_t *buf, size_t len);
/* Decide a packet's fate: return 0 to drop, else set *delay and *ce. */
typedef int (*policy_fn)(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			 uint64_t *delay, int *ce);

struct net {
	mrp_conn *c[2];
	region mr[2];
	uint64_t seed[2];
	uint64_t now;
	wpkt *q;     /* unsorted; the earliest is found by scan (tests are small) */
	size_t qlen, qcap; /* packets queued, at most qcap */
	size_t qalloc;     /* allocated: it grows as needed (a packet is ~4 KB, and
			    * MALLOC_PERTURB_, which meson sets, writes all of
			    * a freed block: 64 Ki of them cost seconds a test) */
	uint64_t seq;
	policy_fn policy;
	uint64_t prng;
	unsigned loss_pct;   /* random loss, percent */
	int blackhole_sport; /* drop every packet from this source port (A to B) */
	int ce_path;         /* mark every data packet of this path id (A to B) */
	int stamp_probes_late; /* A's PROBEs carry a send time 2 us after the
				* engine wrote them (stamp_late()) */
	int by_ref;          /* write with mrp_conn_write_pkt_ref() */
	uint64_t ref_pkts;   /* packets sent with a payload by reference */
	uint64_t tx_hash;    /* FNV-1a of every packet written, in order */
	uint64_t delivered, dropped;
	int check_failures;
	unsigned stuck;
	char check_msg[160];
};

static int default_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			  uint64_t *delay, int *ce)
{
	(void)pkt;
	*delay = 5000 + (uint64_t)ti->path_id * 300; /* unequal delays reorder paths */
	*ce = 0;
	if (from == 0 && n->blackhole_sport == ti->sport)
		return 0;
	if (from == 0 && ti->is_data && n->ce_path == (int)ti->path_id)
		*ce = 1;
	if (n->loss_pct && xorshift(&n->prng) % 100 < n->loss_pct)
		return 0;
	return 1;
}

/* Matching parameters for the two ends: connection ids 100 (A) and 101 (B),
 * tokens 0x1111 and 0x1112, nplanes planes, idle probes every probe_idle_ns
 * (0 = never). */
static void pair_params(mrp_conn_params p[2], uint8_t nplanes, uint64_t probe_idle_ns)
{
	for (int i = 0; i < 2; i++) {
		mrp_conn_params_default(&p[i]);
		p[i].local_conn_id = 100 + i;
		p[i].peer_conn_id = 101 - i;
		p[i].local_token = 0x1111 + i;
		p[i].peer_token = 0x1112 - i;
		p[i].nplanes = nplanes;
		p[i].probe_idle_ns = probe_idle_ns;
	}
}

/* Sets the network up with room for qcap packets in flight and regions of
 * mrlen bytes; the connections allocate through mem. Returns 0, or the
 * error of the first mrp_conn_new() that failed (its end stays NULL). */
static int net_init_mem(net *n, mrp_conn_params *pa, mrp_conn_params *pb, const mrp_mem *mem,
			size_t qcap, uint64_t mrlen)
{
	memset(n, 0, sizeof(*n));
	n->qcap = qcap;
	n->qalloc = qcap < 256 ? qcap : 256;
	n->q = calloc(n->qalloc, sizeof(wpkt));
	assert_non_null(n->q);
	n->prng = 0x9e3779b97f4a7c15ull;
	n->seed[0] = 1;
	n->seed[1] = 2;
	n->blackhole_sport = -1;
	n->ce_path = -1;
	n->policy = default_policy;
	for (int i = 0; i < 2; i++) {
		n->mr[i].len = mrlen;
		n->mr[i].base = calloc(1, n->mr[i].len);
		assert_non_null(n->mr[i].base);
		n->mr[i].addr = 0x10000000ull * (i + 1);
		n->mr[i].rkey = 0xabc0 + i;
		n->mr[i].access = MRP_ACCESS_REMOTE_WRITE | MRP_ACCESS_LOCAL_WRITE;
	}
	mrp_conn_params d[2];
	pair_params(d, 1, 0);
	if (pa)
		d[0] = *pa;
	if (pb)
		d[1] = *pb;
	for (int i = 0; i < 2; i++) {
		mrp_rng rng = { rng_next, &n->seed[i] };
		mrp_mr_ops mr = { mr_resolve, &n->mr[i] };
		int rv = mrp_conn_new(&n->c[i], &d[i], mem, &rng, &mr, 0);
		if (rv != 0)
			return rv;
	}
	return 0;
}

static void net_init_mem_ok(net *n, mrp_conn_params *pa, mrp_conn_params *pb, uint64_t mrlen)
{
	assert_int_equal(net_init_mem(n, pa, pb, &tmem, MAXQ, mrlen), 0);
}

static void net_init(net *n, mrp_conn_params *pa, mrp_conn_params *pb)
{
	assert_int_equal(net_init_mem(n, pa, pb, &tmem, MAXQ, 8 << 20), 0);
}

/* Two planes, the default parameters otherwise, and the policy pol. */
static void net_init_2planes(net *n, policy_fn pol)
{
	mrp_conn_params p[2];
	pair_params(p, 2, 0);
	net_init(n, &p[0], &p[1]);
	n->policy = pol;
}

/* Two planes paced at plane_bps each, the connection at line_bps, and the
 * policy pol. */
static void net_init_2planes_paced(net *n, policy_fn pol, uint64_t line_bps, uint64_t plane_bps)
{
	mrp_conn_params p[2];
	pair_params(p, 2, 0);
	p[0].cc.line_rate_bps = line_bps;
	p[0].plane_rate_bps[0] = p[0].plane_rate_bps[1] = plane_bps;
	net_init(n, &p[0], &p[1]);
	n->policy = pol;
}

static void net_free(net *n)
{
	for (int i = 0; i < 2; i++) {
		mrp_conn_del(n->c[i]);
		free(n->mr[i].base);
	}
	free(n->q);
}

/* A slot at the end of the queue, NULL when qcap packets are queued. */
static wpkt *net_slot(net *n)
{
	if (n->qlen == n->qcap)
		return NULL;
	if (n->qlen == n->qalloc) {
		size_t na = n->qalloc * 2 < n->qcap ? n->qalloc * 2 : n->qcap;
		wpkt *q = realloc(n->q, na * sizeof(wpkt));
		assert_non_null(q);
		n->q = q;
		n->qalloc = na;
	}
	return &n->q[n->qlen++];
}

static void net_check(net *n)
{
	for (int i = 0; i < 2; i++) {
		char err[128];
		if (mrp_conn_check(n->c[i], err, sizeof(err)) != 0) {
			n->check_failures++;
			snprintf(n->check_msg, sizeof(n->check_msg), "conn %d: %s", i, err);
		}
	}
}

/* Drain every packet both sides want to send now into the network. */
static void net_flush_tx(net *n)
{
	static uint8_t buf[PKTMAX];
	for (int i = 0; i < 2; i++) {
		for (;;) {
			mrp_tx_info ti;
			/* Asking for the deadline is a pure query; asking before
			 * every write and checking after it makes
			 * mrp_conn_check() verify that a write which moves a
			 * timer drops the deadline the engine keeps. */
			(void)mrp_conn_deadline(n->c[i]);
			ssize_t len = n->by_ref
				? mrp_conn_write_pkt_ref(n->c[i], &ti, buf, sizeof(buf), n->now)
				: mrp_conn_write_pkt(n->c[i], &ti, buf, sizeof(buf), n->now);
			assert_true(len >= 0);
			net_check(n);
			if (len == 0)
				break;
			if (ti.payload_len) {
				/* the headers in buf, the payload where the
				 * request's memory holds it: the packet is both */
				assert_true(n->by_ref);
				assert_true(ti.is_data);
				assert_non_null(ti.payload);
				assert_int_equal(len, MRP_DATA_HDR_LEN);
				assert_true((size_t)len + ti.payload_len <= sizeof(buf));
				memcpy(buf + len, ti.payload, ti.payload_len);
				len += (ssize_t)ti.payload_len;
				n->ref_pkts++;
			} else {
				assert_null(ti.payload);
			}
			for (ssize_t k = 0; k < len; k++)
				n->tx_hash = (n->tx_hash ^ buf[k]) * 0x100000001b3ull;
			uint64_t delay;
			int ce;
			if (!n->policy(n, i, &ti, buf, &delay, &ce)) {
				n->dropped++;
				continue;
			}
			if (i == 0 && n->stamp_probes_late)
				stamp_late(buf, (size_t)len);
			wpkt *w = net_slot(n);
			assert_non_null(w);
			w->at = n->now + delay;
			w->seq = n->seq++;
			w->to = 1 - i;
			w->plane = ti.plane;
			w->ce = ce && ti.ect;
			w->len = (size_t)len;
			memcpy(w->data, buf, (size_t)len);
		}
	}
}

/* Advance to the next event (a delivery or a deadline) and process it.
 * Returns 0 when nothing is left to happen. */
static int net_step(net *n)
{
	net_flush_tx(n);
	uint64_t next = UINT64_MAX;
	size_t idx = SIZE_MAX;
	for (size_t i = 0; i < n->qlen; i++)
		if (n->q[i].at < next || (n->q[i].at == next && n->q[i].seq < n->q[idx].seq)) {
			next = n->q[i].at;
			idx = i;
		}
	uint64_t dl = UINT64_MAX;
	for (int i = 0; i < 2; i++) {
		uint64_t d = mrp_conn_deadline(n->c[i]);
		if (d < dl)
			dl = d;
	}
	if (next == UINT64_MAX && dl == UINT64_MAX)
		return 0;
	if (dl < next) {
		if (dl > n->now) {
			n->now = dl;
			n->stuck = 0;
		} else if (++n->stuck > 1000) {
			fail_msg("deadline %llu stays in the past at %llu: busy loop",
				 (unsigned long long)dl, (unsigned long long)n->now);
		}
		for (int i = 0; i < 2; i++)
			if (mrp_conn_deadline(n->c[i]) <= n->now)
				mrp_conn_handle_timeout(n->c[i], n->now);
	} else {
		wpkt w = n->q[idx];
		n->q[idx] = n->q[--n->qlen];
		if (w.at > n->now)
			n->now = w.at;
		mrp_pkt pkt;
		assert_int_equal(mrp_pkt_decode(&pkt, w.data, w.len), (ssize_t)w.len);
		mrp_conn_read_pkt(n->c[w.to], &pkt, (unsigned)w.plane, w.ce, n->now);
		n->delivered++;
	}
	net_check(n);
	return 1;
}

/* Run until cond(arg) holds or the time limit passes. */
static int net_run_until(net *n, int (*cond)(net *, void *), void *arg, uint64_t limit_ns)
{
	while (n->now < limit_ns) {
		if (cond && cond(n, arg))
			return 1;
		if (!net_step(n))
			return cond ? cond(n, arg) : 1;
	}
	return cond ? cond(n, arg) : 0;
}

typedef struct cqlog {
	mrp_cqe e[4096];
	int n;
} cqlog;

static void poll_all(net *n, cqlog log[2])
{
	for (int i = 0; i < 2; i++) {
		mrp_cqe e[64];
		int k;
		while ((k = mrp_conn_poll_cq(n->c[i], e, 64)) > 0)
			for (int j = 0; j < k; j++) {
				assert_true(log[i].n < 4096);
				log[i].e[log[i].n++] = e[j];
			}
	}
}

typedef struct want {
	cqlog *log;
	int side, count;
} want;

static int have_cqes(net *n, void *arg)
{
	want *w = arg;
	cqlog *log = w->log;
	poll_all(n, log);
	return log[w->side].n >= w->count;
}

static void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
	uint64_t s = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(xorshift(&s) >> 56);
}

static uint64_t b_addr(net *n, uint64_t off)
{
	return n->mr[1].addr + off;
}

/* A patterned buffer of len bytes (seed), written by A at the start of B's
 * region in one work request (wr_id 1) posted at now: the buffer, for the
 * test to compare B's region with and free. */
static uint8_t *post_write(net *n, size_t len, uint32_t seed, uint64_t now)
{
	uint8_t *src = malloc(len);
	assert_non_null(src);
	fill_pattern(src, len, seed);
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(n, 0), .rkey = n->mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n->c[0], &wr, now), 0);
	return src;
}

/* ---- an allocator that refuses one call ---------------------------------- */

typedef struct failer {
	unsigned long calls;   /* allocation calls so far */
	unsigned long fail_at; /* refuse this call (1-based); 0: none */
	unsigned long refused;
} failer;

static void *f_alloc(void *ud, size_t n)
{
	failer *f = ud;
	if (++f->calls == f->fail_at) {
		f->refused++;
		return NULL;
	}
	return test_malloc(n);
}

/* ---- tests -------------------------------------------------------------- */

/* A 1 MiB WRITE lands byte for byte, completes once, with spraying over 4
 * paths of unequal delay (so packets arrive out of order). */
static void test_write_placed(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	size_t len = 1 << 20;
	uint8_t *src = malloc(len);
	fill_pattern(src, len, 7);
	mrp_wr wr = { .wr_id = 42, .opcode = MRP_WR_WRITE, .stream = 0, .local = src,
		      .len = (uint32_t)len, .remote_addr = b_addr(&n, 4096),
		      .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].wr_id, 42);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[0].e[0].byte_len, len);
	assert_memory_equal(n.mr[1].base + 4096, src, len);
	/* nothing outside the target range was touched */
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(n.mr[1].base[i], 0);
	assert_int_equal(n.mr[1].base[4096 + len], 0);
	assert_int_equal(log[1].n, 0); /* plain WRITE: no receive completion */
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.npaths_active >= 4);
	uint32_t used = 0;
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], i, &pi) == 0 && pi.tx_pkts > 0)
			used++;
	}
	assert_true(used >= 4); /* sprayed over every path */
	assert_int_equal(st.retx_pkts, 0);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* SPEC 6.3: the sender's message completes when every path's packets are
 * acknowledged. A short WRITE sprayed one packet per path in turn leaves
 * fewer than ack_every packets on each path; the last carries ACK_REQ, and
 * the receiver acknowledges every path at once, not the others after
 * ack_delay (8 us) -- and for ack_delay after it, every packet still on its
 * way: path 0 here is slow (its packets arrive after the last one). The
 * sender completes one round trip of the slowest path after the send. */
static uint64_t slow_path0_ns;
static int slow_path0_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			     uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (ti->path_id == 0)
		*delay = slow_path0_ns;
	return ok;
}

static uint64_t short_write_completes_ns(uint64_t path0_ns)
{
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	p[0].burst_pkts = 1; /* one packet per path in turn */
	net n;
	net_init(&n, &p[0], &p[1]);
	slow_path0_ns = path0_ns;
	n.policy = slow_path0_policy;
	size_t len = 8 * 4096; /* 8 packets over 4 paths: 2 each */
	uint8_t *src = malloc(len);
	fill_pattern(src, len, 11);
	mrp_wr wr = { .wr_id = 9, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.retx_pkts, 0);
	uint32_t used = 0;
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], i, &pi) == 0 && pi.tx_pkts > 0)
			used++;
	}
	assert_int_equal(used, 4);
	assert_int_equal(n.check_failures, 0);
	uint64_t t = n.now;
	free(src);
	net_free(&n);
	return t;
}

static void test_ack_req_acks_every_path(void **state)
{
	(void)state;
	/* paths 5.0-5.9 us each way: the last packet (path 3) arrives at
	 * 5.9 us; every ACK is back by 11.8 us (without the rule: 13 us + 5) */
	uint64_t t = short_write_completes_ns(5000);
	print_message("short WRITE, paths 5.0-5.9 us: complete at %.2f us\n", (double)t / 1e3);
	assert_true(t <= 11800 + 200);
	/* path 0 takes 7 us: its packets arrive after the ACK_REQ and are
	 * acknowledged on arrival (without the window: at 15 us + 5) */
	t = short_write_completes_ns(7000);
	print_message("short WRITE, path 0 at 7 us: complete at %.2f us\n", (double)t / 1e3);
	assert_true(t <= 14000 + 200);
}

/* SENDs match the n-th posted receive of their stream, are placed on
 * arrival, and complete in posting order on both sides. */
static void test_send_recv_ordered(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	enum { NMSG = 20 };
	static uint8_t src[NMSG][20000], dst[NMSG][20000];
	for (int i = 0; i < NMSG; i++) {
		fill_pattern(src[i], sizeof(src[i]), (uint32_t)i);
		assert_int_equal(mrp_conn_post_recv(n.c[1], 3, 1000 + i, dst[i], sizeof(dst[i]), 0), 0);
	}
	for (int i = 0; i < NMSG; i++) {
		uint32_t len = 1000u * (uint32_t)(i + 1) - (uint32_t)i;
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = i % 2 ? MRP_WR_SEND_IMM : MRP_WR_SEND,
			      .stream = 3, .local = src[i], .len = len, .imm = 0xdead0000u + i };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	cqlog log[2] = { 0 };
	want w = { log, 1, NMSG };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	w.side = 0;
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	for (int i = 0; i < NMSG; i++) {
		uint32_t len = 1000u * (uint32_t)(i + 1) - (uint32_t)i;
		assert_int_equal(log[0].e[i].wr_id, i);
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
		assert_int_equal(log[1].e[i].wr_id, 1000 + i);
		assert_int_equal(log[1].e[i].status, MRP_WC_SUCCESS);
		assert_int_equal(log[1].e[i].opcode, MRP_WC_RECV);
		assert_int_equal(log[1].e[i].byte_len, len);
		assert_int_equal(log[1].e[i].stream, 3);
		assert_int_equal(log[1].e[i].has_imm, i % 2);
		if (i % 2)
			assert_int_equal(log[1].e[i].imm, 0xdead0000u + i);
		assert_memory_equal(dst[i], src[i], len);
	}
	assert_int_equal(log[0].n, NMSG);
	assert_int_equal(log[1].n, NMSG);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* WRITE_IMM places data through the rkey and consumes a receive, whose
 * completion carries the immediate. */
static void test_write_imm(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[10000];
	fill_pattern(src, sizeof(src), 99);
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 77, NULL, 0, 0), 0);
	mrp_wr wr = { .wr_id = 5, .opcode = MRP_WR_WRITE_IMM, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey, .imm = 0x12345678 };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 1, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[1].e[0].wr_id, 77);
	assert_int_equal(log[1].e[0].opcode, MRP_WC_RECV_WRITE_IMM);
	assert_int_equal(log[1].e[0].imm, 0x12345678);
	assert_int_equal(log[1].e[0].byte_len, sizeof(src));
	assert_memory_equal(n.mr[1].base, src, sizeof(src));
	net_free(&n);
}

/* Streams never block each other: with every packet of stream 1's message
 * held back, stream 2 completes; stream 1 completes after. */
static int hold_stream1;
static int hold_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		       uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (ok && from == 0 && ti->is_data && hold_stream1) {
		mrp_pkt p;
		if (mrp_pkt_decode(&p, pkt, MRP_DATA_HDR_LEN + ((pkt[30] << 8) | pkt[31])) > 0 &&
		    p.u.data.stream_id == 1)
			*delay += 50000000; /* 50 ms late */
	}
	return ok;
}

static void test_streams_independent(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = hold_policy;
	hold_stream1 = 1;
	static uint8_t a[8192], b[8192], ra[8192], rb[8192];
	fill_pattern(a, sizeof(a), 1);
	fill_pattern(b, sizeof(b), 2);
	mrp_conn_post_recv(n.c[1], 1, 11, ra, sizeof(ra), 0);
	mrp_conn_post_recv(n.c[1], 2, 22, rb, sizeof(rb), 0);
	mrp_wr w1 = { .wr_id = 1, .opcode = MRP_WR_SEND, .stream = 1, .local = a, .len = sizeof(a) };
	mrp_wr w2 = { .wr_id = 2, .opcode = MRP_WR_SEND, .stream = 2, .local = b, .len = sizeof(b) };
	assert_int_equal(mrp_conn_post_send(n.c[0], &w1, 0), 0);
	assert_int_equal(mrp_conn_post_send(n.c[0], &w2, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 1, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 10000000ull));
	assert_int_equal(log[1].e[0].wr_id, 22); /* stream 2 first */
	assert_true(n.now < 50000000ull);
	w.count = 2;
	hold_stream1 = 0;
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[1].e[1].wr_id, 11);
	assert_memory_equal(ra, a, sizeof(a));
	assert_memory_equal(rb, b, sizeof(b));
	net_free(&n);
}

/* 5 % random loss in both directions: everything arrives intact, losses are
 * repaired by retransmission, completions exactly once and in order. */
static void test_random_loss(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.loss_pct = 5;
	size_t len = 2 << 20;
	uint8_t *src = malloc(len);
	fill_pattern(src, len, 3);
	for (int i = 0; i < 8; i++) {
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = MRP_WR_WRITE, .stream = (uint16_t)(i % 3),
			      .local = src + i * (len / 8), .len = (uint32_t)(len / 8),
			      .remote_addr = b_addr(&n, i * (len / 8)), .rkey = n.mr[1].rkey };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	cqlog log[2] = { 0 };
	want w = { log, 0, 8 };
	assert_true(net_run_until(&n, have_cqes, &w, 10000000000ull));
	assert_int_equal(log[0].n, 8);
	int last[3] = { -1, -1, -1 };
	for (int i = 0; i < 8; i++) {
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
		int id = (int)log[0].e[i].wr_id;
		assert_true(id > last[id % 3]); /* in posting order per stream */
		last[id % 3] = id;
	}
	assert_memory_equal(n.mr[1].base, src, len);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.retx_pkts > 0);
	assert_true(st.lost_pkts > 0);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* mrp_conn_write_pkt_ref(): the same connections under the same 5 % loss
 * write the same packets, byte for byte, in the same order, whether the
 * payload is copied into the buffer or handed out by reference (here joined
 * to the headers by the test, in a daemon by the kernel's scatter-gather
 * send); WRITEs and SENDs of several sizes, one of them empty. */
/* SPEC 6.7, the expedited class: packets written, by sender (0: A, 1: B),
 * data or not, expedited or not. */
static uint64_t exp_count[2][2][2];
static int exp_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		      uint64_t *delay, int *ce)
{
	exp_count[from][ti->is_data != 0][ti->expedite != 0]++;
	return default_policy(n, from, ti, pkt, delay, ce);
}

/* Posts WRITEs of the lengths in len[] (0 ends the list) at once, runs until
 * they complete, and returns the packets A and B wrote (exp_count). */
static void exp_run(net *n, const uint32_t *len, uint8_t *src)
{
	cqlog *log = calloc(2, sizeof(cqlog));
	assert_non_null(log);
	memset(exp_count, 0, sizeof(exp_count));
	int k = 0;
	for (; len[k]; k++) {
		mrp_wr wr = { .wr_id = (uint64_t)k + 1, .opcode = MRP_WR_WRITE, .local = src,
			      .len = len[k], .remote_addr = b_addr(n, 0), .rkey = n->mr[1].rkey };
		assert_int_equal(mrp_conn_post_send(n->c[0], &wr, n->now), 0);
	}
	want w = { log, 0, k };
	assert_true(net_run_until(n, have_cqes, &w, n->now + 1000000000ull));
	for (int i = 0; i < k; i++)
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
	assert_int_equal(n->check_failures, 0);
	free(log);
}

/*
 * A short message and its connection's control packets go in the expedited
 * class; a bulk message does not, nor a short one posted behind it (a path's
 * packets in two classes would overtake each other); with expedite_max 0
 * nothing does. A queue of short messages past expedite_budget is bulk.
 */
static void test_expedited_class(void **state)
{
	(void)state;
	static uint8_t src[1 << 20];
	fill_pattern(src, sizeof(src), 5);
	for (int on = 0; on < 2; on++) {
		mrp_conn_params p[2];
		pair_params(p, 1, 0);
		p[0].expedite_max = p[1].expedite_max = on ? 65536 : 0;
		p[0].expedite_budget = p[1].expedite_budget = 131072;
		net n;
		net_init(&n, &p[0], &p[1]);
		n.policy = exp_policy;
		static const uint32_t one_short[] = { 16384, 0 };
		static const uint32_t bulk_then_short[] = { 1 << 20, 16384, 0 };
		static const uint32_t limit[] = { 65536, 0 };
		static const uint32_t over[] = { 65537, 0 };

		exp_run(&n, one_short, src);
		if (!on) {
			/* off: one class */
			assert_int_equal(exp_count[0][1][1] + exp_count[0][0][1] +
						 exp_count[1][0][1] + exp_count[1][1][1], 0);
			assert_true(exp_count[0][1][0] >= 4);
			net_free(&n);
			continue;
		}
		/* every data packet of A's and every ACK of B's in the class */
		assert_int_equal(exp_count[0][1][1], 4);
		assert_int_equal(exp_count[0][1][0], 0);
		assert_true(exp_count[1][0][1] >= 1);
		assert_int_equal(exp_count[1][0][0], 0);

		/* a bulk message, and a short one posted behind it: neither */
		exp_run(&n, bulk_then_short, src);
		assert_int_equal(exp_count[0][1][1], 0);
		assert_true(exp_count[0][1][0] >= 256 + 4);
		/* (B's ACKs of the bulk message: not in the class) */
		assert_true(exp_count[1][0][0] >= 8);

		/* once it completed, a short message is expedited again */
		exp_run(&n, one_short, src);
		assert_int_equal(exp_count[0][1][1], 4);
		assert_int_equal(exp_count[0][1][0], 0);

		/* the bound: expedite_max bytes are, one more is not */
		exp_run(&n, limit, src);
		assert_int_equal(exp_count[0][1][1], 16);
		assert_int_equal(exp_count[0][1][0], 0);
		exp_run(&n, over, src);
		assert_int_equal(exp_count[0][1][1], 0);
		assert_int_equal(exp_count[0][1][0], 17);
		assert_int_equal(exp_count[1][0][1], 0);

		/* the budget (128 KiB): a queue of twelve 16 KiB messages is
		 * bulk past its eighth; the ninth and all posted while it is
		 * outstanding go in the default class */
		static const uint32_t queue[] = { 16384, 16384, 16384, 16384, 16384, 16384,
						  16384, 16384, 16384, 16384, 16384, 16384, 0 };
		exp_run(&n, queue, src);
		assert_int_equal(exp_count[0][1][1], 8 * 4);
		assert_int_equal(exp_count[0][1][0], 4 * 4);
		/* and once they completed, the budget is whole again */
		exp_run(&n, one_short, src);
		assert_int_equal(exp_count[0][1][1], 4);
		assert_int_equal(exp_count[0][1][0], 0);
		net_free(&n);
	}

	/* a budget under expedite_max: a message alone is expedited
	 * whatever its length, a second one beside it is not */
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	p[0].expedite_max = p[1].expedite_max = 65536;
	p[0].expedite_budget = p[1].expedite_budget = 1024;
	net n;
	net_init(&n, &p[0], &p[1]);
	n.policy = exp_policy;
	static const uint32_t limit_alone[] = { 65536, 0 };
	static const uint32_t two_short[] = { 768, 768, 0 };
	exp_run(&n, limit_alone, src);
	assert_int_equal(exp_count[0][1][1], 16);
	assert_int_equal(exp_count[0][1][0], 0);
	exp_run(&n, two_short, src);
	assert_int_equal(exp_count[0][1][1], 1);
	assert_int_equal(exp_count[0][1][0], 1);
	net_free(&n);
}

static uint64_t by_ref_run(int by_ref, uint64_t *ref_pkts)
{
	net n;
	net_init(&n, NULL, NULL);
	n.by_ref = by_ref;
	n.tx_hash = 0xcbf29ce484222325ull;
	n.loss_pct = 5;
	static const uint32_t lens[] = { 1, 4095, 4096, 4097, 300000, 0 };
	enum { NW = sizeof(lens) / sizeof(lens[0]) };
	static uint8_t src[1 << 20], rb[NW][300000];
	fill_pattern(src, sizeof(src), 41);
	memset(rb, 0, sizeof(rb));
	for (int i = 0; i < NW; i++)
		assert_int_equal(mrp_conn_post_recv(n.c[1], 1, 700 + (uint64_t)i, rb[i],
						    sizeof(rb[i]), 0), 0);
	for (int i = 0; i < 2 * NW; i++) {
		uint32_t len = lens[i % NW];
		uint64_t off = (uint64_t)i * 301000 % (sizeof(src) - 300000);
		mrp_wr wr = { .wr_id = (uint64_t)i, .stream = 1, .local = src + off, .len = len };
		if (i < NW) {
			wr.opcode = MRP_WR_WRITE;
			wr.stream = 2;
			wr.remote_addr = b_addr(&n, off);
			wr.rkey = n.mr[1].rkey;
		} else {
			wr.opcode = MRP_WR_SEND;
		}
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	cqlog log[2] = { 0 };
	want w = { log, 0, 2 * NW };
	assert_true(net_run_until(&n, have_cqes, &w, 10000000000ull));
	for (int i = 0; i < 2 * NW; i++) {
		uint32_t len = lens[i % NW];
		uint64_t off = (uint64_t)i * 301000 % (sizeof(src) - 300000);
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
		if (i < NW)
			assert_memory_equal(n.mr[1].base + off, src + off, len);
		else
			assert_memory_equal(rb[i - NW], src + off, len);
	}
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.retx_pkts > 0);
	assert_int_equal(n.check_failures, 0);
	*ref_pkts = n.ref_pkts;
	uint64_t h = n.tx_hash;
	net_free(&n);
	return h;
}

static void test_write_pkt_ref_same_packets(void **state)
{
	(void)state;
	uint64_t copied, by_ref;
	uint64_t h0 = by_ref_run(0, &copied), h1 = by_ref_run(1, &by_ref);
	assert_int_equal(copied, 0);
	assert_true(by_ref > 2 * 300000 / 4096); /* every data packet with a payload */
	assert_true(h0 == h1);
}

/* No posted receive: RNR NAK, retry, success once the receive is posted. */
/* A receiver that posts its receive 20 ms late (an application thread
 * descheduled): far beyond rnr_retry_max (7) waits of rnr_delay (100 us),
 * yet within retry_timeout_ns, so the SEND succeeds. With the count alone
 * it fails RNR_RETRY_EXC: the counter-proof. Returns the sender's status. */
static int late_recv_status(uint64_t retry_timeout_ns)
{
	mrp_conn_params d[2];
	pair_params(d, 1, 0);
	for (int i = 0; i < 2; i++)
		d[i].retry_timeout_ns = retry_timeout_ns;
	net n;
	net_init(&n, &d[0], &d[1]);
	static uint8_t src[5000], dst[5000];
	fill_pattern(src, sizeof(src), 5);
	memset(dst, 0, sizeof(dst));
	mrp_wr wr = { .wr_id = 9, .opcode = MRP_WR_SEND, .local = src, .len = sizeof(src) };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	net_run_until(&n, NULL, NULL, 20000000ull);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	if (log[0].n == 0)
		assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 8, dst, sizeof(dst), n.now), 0);
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, n.now + 1000000000ull));
	int status = log[0].e[0].status;
	if (status == MRP_WC_SUCCESS)
		assert_memory_equal(dst, src, sizeof(src));
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
	return status;
}

static void test_rnr_late_receiver(void **state)
{
	(void)state;
	assert_int_equal(late_recv_status(500000000ull), MRP_WC_SUCCESS);
	assert_int_equal(late_recv_status(0), MRP_WC_RNR_RETRY_EXC);
}

static void test_rnr_then_success(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[5000], dst[5000];
	fill_pattern(src, sizeof(src), 4);
	mrp_wr wr = { .wr_id = 9, .opcode = MRP_WR_SEND, .local = src, .len = sizeof(src) };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	net_run_until(&n, NULL, NULL, 150000); /* 150 us: at least one RNR round */
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[1], &st);
	assert_true(st.naks_sent > 0);
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 8, dst, sizeof(dst), n.now), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	poll_all(&n, log);
	assert_int_equal(log[1].n, 1);
	assert_int_equal(log[1].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(dst, src, sizeof(src));
	net_free(&n);
}

/* Never a receive: the send fails with RNR_RETRY_EXC after the retries. */
static void test_rnr_exhausted(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[100];
	mrp_wr wr = { .wr_id = 9, .opcode = MRP_WR_SEND, .local = src, .len = sizeof(src) };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].status, MRP_WC_RNR_RETRY_EXC);
	net_free(&n);
}

/* A WRITE with a wrong rkey fails with REM_ACCESS, out of bounds with
 * REM_BOUNDS; nothing is written to the region; later work is flushed. */
static void run_bad_write(uint32_t rkey_delta, uint64_t off, int status)
{
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[9000];
	memset(src, 0x5a, sizeof(src));
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, off), .rkey = n.mr[1].rkey + rkey_delta };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	wr.wr_id = 2;
	wr.rkey = n.mr[1].rkey;
	wr.remote_addr = b_addr(&n, 0);
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 2 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].wr_id, 1);
	assert_int_equal(log[0].e[0].status, status);
	assert_int_equal(log[0].e[1].wr_id, 2);
	assert_true(log[0].e[1].status == MRP_WC_FLUSHED || log[0].e[1].status == MRP_WC_SUCCESS ||
		    log[0].e[1].status == MRP_WC_RESET);
	/* the bad write placed nothing */
	for (uint64_t i = 0; i < n.mr[1].len; i++)
		if (n.mr[1].base[i] != 0 && !(i < sizeof(src) && log[0].e[1].status == MRP_WC_SUCCESS))
			fail_msg("byte %llu written", (unsigned long long)i);
	net_free(&n);
}

static void test_bad_rkey(void **state)
{
	(void)state;
	run_bad_write(1, 0, MRP_WC_REM_ACCESS);
}

static void test_out_of_bounds(void **state)
{
	(void)state;
	run_bad_write(0, (8 << 20) - 100, MRP_WC_REM_BOUNDS);
}

/* CE marks on one path cut only that path's window. */
static void test_ce_cuts_one_path(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.ce_path = 1;
	size_t len = 4 << 20;
	uint8_t *src = post_write(&n, len, 5, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	mrp_path_info p0, p1;
	assert_int_equal(mrp_conn_path_info(n.c[0], 0, &p0), 0);
	assert_int_equal(mrp_conn_path_info(n.c[0], 1, &p1), 0);
	assert_true(p1.ce_pkts > 0);
	assert_int_equal(p0.ce_pkts, 0);
	assert_true(p1.cwnd < p0.cwnd);
	assert_true(p1.tx_pkts < p0.tx_pkts); /* load moved to clean paths */
	assert_memory_equal(n.mr[1].base, src, len);
	free(src);
	net_free(&n);
}

/* Re-path (SPEC 6.4): every data packet A sends from the source ports its
 * paths started with is CE-marked (congested routes, not the paths: a new
 * port leaves them), and A is paced at 10 Gbit/s, its rate flat below what
 * the receiver would take. Each path moves to another port in its
 * generation, still active and keeping its window (a re-port would start a
 * new generation in PROBING at the initial window); on the new ports the
 * marks stop; the data arrives whole. */
#define HOT_PATHS 4
static int hot_sports[HOT_PATHS];
static int hot_sport(int sport)
{
	for (int i = 0; i < HOT_PATHS; i++)
		if (hot_sports[i] == sport)
			return 1;
	return 0;
}

static int hot_sport_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			    uint64_t *delay, int *ce)
{
	int r = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 0 && ti->is_data && hot_sport(ti->sport))
		*ce = 1;
	return r;
}

/* A one-plane pair whose A sends at 10 Gbit/s under policy, with A's first
 * HOT_PATHS paths' source ports the hot ones (their routes' info in first);
 * B's allocator rh (NULL: none), regions of mrlen bytes. */
static void hot_pair_init_rh(net *n, policy_fn policy, mrp_path_info first[HOT_PATHS],
			     mrp_rh *rh, uint64_t mrlen)
{
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	p[0].cc.line_rate_bps = 10000000000ull;
	p[1].rh = rh;
	net_init_mem_ok(n, &p[0], &p[1], mrlen);
	n->policy = policy;
	for (int i = 0; i < HOT_PATHS; i++) {
		assert_int_equal(mrp_conn_path_info(n->c[0], (unsigned)i, &first[i]), 0);
		hot_sports[i] = first[i].sport;
	}
}

static void hot_pair_init(net *n, policy_fn policy, mrp_path_info first[HOT_PATHS])
{
	hot_pair_init_rh(n, policy, first, NULL, 8 << 20);
}

static void test_ce_route_repaths(void **state)
{
	(void)state;
	net n;
	mrp_path_info first[HOT_PATHS], pi[HOT_PATHS], now;
	hot_pair_init(&n, hot_sport_policy, first);
	uint64_t ce_at_move[HOT_PATHS] = { 0 };
	int moved[HOT_PATHS] = { 0 };
	uint64_t move_events = 0;
	size_t len = 8 << 20;
	uint8_t *src = post_write(&n, len, 9, 0);
	cqlog log[2] = { 0 };
	while (!log[0].n && n.now < 1000000000ull) {
		for (int i = 0; i < HOT_PATHS; i++)
			assert_int_equal(mrp_conn_path_info(n.c[0], (unsigned)i, &pi[i]), 0);
		if (!net_step(&n))
			break;
		poll_all(&n, log);
		/* each move is an event: same state, the new port */
		mrp_event ev;
		while (mrp_conn_poll_event(n.c[0], &ev))
			if (ev.old_state == ev.new_state) {
				assert_true(ev.path_id < HOT_PATHS);
				assert_int_not_equal(ev.sport, pi[ev.path_id].sport);
				assert_int_equal(ev.new_state, MRP_PATH_ACTIVE);
				move_events++;
			}
		for (int i = 0; i < HOT_PATHS; i++) {
			assert_int_equal(mrp_conn_path_info(n.c[0], (unsigned)i, &now), 0);
			if (moved[i] || now.sport == first[i].sport)
				continue;
			moved[i] = 1;
			ce_at_move[i] = now.ce_pkts;
			assert_int_equal(now.gen, first[i].gen);
			assert_int_equal(now.state, MRP_PATH_ACTIVE);
			/* the ACK that moved it may cut it once, by at most half */
			assert_true(now.cwnd >= pi[i].cwnd / 2);
		}
	}
	assert_int_equal(n.check_failures, 0);
	assert_int_equal(log[0].n, 1);
	for (int i = 0; i < HOT_PATHS; i++) {
		assert_int_equal(mrp_conn_path_info(n.c[0], (unsigned)i, &now), 0);
		print_message("path %d: moved %d, %llu of %llu packets marked\n", i, moved[i],
			      (unsigned long long)now.ce_pkts, (unsigned long long)now.tx_pkts);
		assert_true(moved[i]);
		assert_true(ce_at_move[i] > 0);
		assert_int_equal(now.gen, first[i].gen);
		/* on a port that is not a hot one, its marks stopped */
		if (!hot_sport(now.sport))
			assert_int_equal(now.ce_pkts, ce_at_move[i]);
	}
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.repaths >= HOT_PATHS);
	assert_int_equal(st.events_dropped, 0);
	assert_int_equal(move_events, st.repaths);
	assert_int_equal(st.reports, 0);
	assert_memory_equal(n.mr[1].base, src, len);
	free(src);
	net_free(&n);
	memset(hot_sports, 0, sizeof(hot_sports));
}

/* Routes the hot paths are moved to are 60 us longer, one way (a far
 * spine): the marks of hot_sport_policy() move the paths there. */
#define FAR_ROUTE_NS 60000ull
static int far_route_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			    uint64_t *delay, int *ce)
{
	int r = hot_sport_policy(n, from, ti, pkt, delay, ce);
	if (from == 0 && !hot_sport(ti->sport))
		*delay += FAR_ROUTE_NS;
	return r;
}

/* A path's smallest RTT is its route's: after a move to a longer route it
 * is that route's, not the old one's (which would make the new route's
 * base read as a standing queue). */
static void test_route_move_resets_min_rtt(void **state)
{
	(void)state;
	net n;
	mrp_path_info first[HOT_PATHS], now;
	hot_pair_init(&n, far_route_policy, first);
	size_t len = 8 << 20;
	uint8_t *src = post_write(&n, len, 9, 0);
	cqlog log[2] = { 0 };
	uint64_t near_min[HOT_PATHS] = { 0 };
	while (!log[0].n && n.now < 1000000000ull) {
		if (!net_step(&n))
			break;
		poll_all(&n, log);
		for (int i = 0; i < HOT_PATHS; i++) {
			assert_int_equal(mrp_conn_path_info(n.c[0], (unsigned)i, &now), 0);
			if (hot_sport(now.sport) && now.min_rtt_ns)
				near_min[i] = now.min_rtt_ns;
		}
	}
	assert_int_equal(n.check_failures, 0);
	assert_int_equal(log[0].n, 1);
	int far = 0;
	for (int i = 0; i < HOT_PATHS; i++) {
		assert_int_equal(mrp_conn_path_info(n.c[0], (unsigned)i, &now), 0);
		print_message("path %d: sport %u, smallest RTT %.1f us (%.1f us on its first route)\n",
			      i, now.sport, now.min_rtt_ns / 1e3, near_min[i] / 1e3);
		assert_true(near_min[i] > 0);
		assert_true(near_min[i] < FAR_ROUTE_NS);
		if (hot_sport(now.sport))
			continue;
		far++;
		/* sampled on the far route since the move, and only there */
		assert_true(now.min_rtt_ns >= near_min[i] + FAR_ROUTE_NS / 2);
		assert_true(now.min_rtt_ns >= FAR_ROUTE_NS);
	}
	assert_true(far > 0);
	assert_memory_equal(n.mr[1].base, src, len);
	free(src);
	net_free(&n);
	memset(hot_sports, 0, sizeof(hot_sports));
}

/* One plane whose bottleneck queue every route shares (netns ecn_plane's
 * tbf): A's packets queue there from 1 ms on, 1.5 ms from 2 ms on; 2 % of
 * A's data packets are CE-marked on every route, and from 3 ms on every one
 * sent from the hot paths' first source ports (a hot spine: they move). */
#define QUEUE_ROUTE_NS 1500000ull
#define HOT_FROM_NS 3000000ull
static int queue_route_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			      uint64_t *delay, int *ce)
{
	int r = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 0 && ti->is_data)
		*ce = (hot_sport(ti->sport) && n->now >= HOT_FROM_NS) ||
		      xorshift(&n->prng) % 50 == 0;
	/* the queue builds from 1 ms to 2 ms, then stands */
	if (from == 0 && n->now > 1000000)
		*delay += n->now >= 2000000 ? QUEUE_ROUTE_NS
					    : QUEUE_ROUTE_NS * (n->now - 1000000) / 1000000;
	return r;
}

/* A path that moves while the plane's queue stands takes the queue for its
 * new route's smallest RTT (the route's own starts again, SPEC 6.4): 1.5 ms
 * on a plane ~10 us from its peer. That does not make the plane "across
 * sites" (SPEC 6.5): the queue is not "drained" at every sample, and the
 * path, cut by marks, is not raised at once to its part of the hint (B's
 * allocator hints 100 Gbit/s: ~1 MB), which kept a marked tbf plane's path
 * at 1 MB (tests/netns/FINDINGS.md 4); without the plane's smallest RTT in
 * the test, the largest step of a moved path's window here was 965 KB. It
 * grows as ACKs and marks say. */
static void test_route_move_into_queue_not_far(void **state)
{
	(void)state;
	static mrp_rh_slot slots[4];
	mrp_rh rh;
	assert_int_equal(mrp_rh_init(&rh, slots, 4, 100000000000ull, 0), 0);
	net n;
	mrp_path_info first[HOT_PATHS], now;
	size_t len = 16u << 20;
	hot_pair_init_rh(&n, queue_route_policy, first, &rh, len);
	uint8_t *src = post_write(&n, len, 11, 0);
	cqlog log[2] = { 0 };
	uint64_t last[HOT_PATHS] = { 0 }, jump[HOT_PATHS] = { 0 }, qmin[HOT_PATHS] = { 0 };
	int moved[HOT_PATHS] = { 0 }, nmoved = 0;
	while (!log[0].n && n.now < 1000000000ull) {
		if (!net_step(&n))
			break;
		poll_all(&n, log);
		for (int i = 0; i < HOT_PATHS; i++) {
			assert_int_equal(mrp_conn_path_info(n.c[0], (unsigned)i, &now), 0);
			if (hot_sport(now.sport)) {
				last[i] = now.cwnd;
				continue;
			}
			if (!moved[i]) {
				moved[i] = 1;
				nmoved++;
			}
			if (now.min_rtt_ns)
				qmin[i] = now.min_rtt_ns;
			if (now.cwnd > last[i] && now.cwnd - last[i] > jump[i])
				jump[i] = now.cwnd - last[i];
			last[i] = now.cwnd;
		}
	}
	assert_int_equal(n.check_failures, 0);
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(nmoved, HOT_PATHS);
	for (int i = 0; i < HOT_PATHS; i++) {
		print_message("path %d: smallest RTT on its new route %.1f us, largest step "
			      "of its window there %llu bytes\n", i, qmin[i] / 1e3,
			      (unsigned long long)jump[i]);
		/* it did take the queue for its route's minimum */
		assert_true(qmin[i] >= QUEUE_ROUTE_NS);
		/* and grew by what ACKs acknowledge, never by a raise to its
		 * part of the hint */
		assert_true(jump[i] < 128u << 10);
	}
	free(src);
	net_free(&n);
	memset(hot_sports, 0, sizeof(hot_sports));
}

/* Re-path when the marks are not the route's (the receiving host's own
 * queue, SPEC 6.4): every data packet A sends is CE-marked, whatever its
 * source port. Moving paths cannot help; after REPATH_MISS_FREE moves in a
 * row that did not pay, the moves back off, each wait twice the last: over
 * 64 MB at 10 Gbit/s (about 54 ms, ~6,000 round trips) a few dozen moves
 * at most, not one every few round trips. */
static int all_ce_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			 uint64_t *delay, int *ce)
{
	int r = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 0 && ti->is_data)
		*ce = 1;
	return r;
}

/* A 64 MB WRITE from A to B at 10 Gbit/s over one plane whose marks policy
 * sets; it must arrive whole. The moves (re-paths) A made. */
static uint64_t marked_write_moves(policy_fn policy, int pattern, const char *what)
{
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	p[0].cc.line_rate_bps = 10000000000ull;
	net n;
	net_init_mem_ok(&n, &p[0], &p[1], 64u << 20);
	n.policy = policy;
	size_t len = 64u << 20;
	uint8_t *src = post_write(&n, len, pattern, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 2000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	print_message("%s: %llu moves in %.1f ms\n", what, (unsigned long long)st.repaths,
		      (double)n.now / 1e6);
	free(src);
	net_free(&n);
	return st.repaths;
}

static void test_ce_host_repaths_back_off(void **state)
{
	(void)state;
	uint64_t moves = marked_write_moves(all_ce_policy, 11, "every packet marked");
	assert_true(moves >= 1);
	assert_true(moves <= 40);
}

/* The same, with marks that come and go: the receiving host's queue marks
 * every route alike, but only now and then (a busy host: on loopback
 * beside a CPU hog). Here every data packet A sends in one 20 us window
 * of three, chosen by a hash of the window, whatever its route. A path
 * is now and then marked three rounds in a row, before a move and after
 * it alike; a move is judged by comparing the moved path's marks with its
 * siblings' since (repath_judge()), and such a move seldom looks as if it
 * paid. (Judged by the moved path's not being hot three rounds in a row,
 * 64 MB made 399 moves; a daemon made 200 a second, each a new
 * source-port socket.) */
static int flicker_ce_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			     uint64_t *delay, int *ce)
{
	int r = default_policy(n, from, ti, pkt, delay, ce);
	uint64_t w = n->now / 20000 + 1;
	if (from == 0 && ti->is_data && xorshift(&w) % 3 == 0)
		*ce = 1;
	return r;
}

static void test_ce_host_flicker_repaths_back_off(void **state)
{
	(void)state;
	uint64_t moves = marked_write_moves(flicker_ce_policy, 12,
					    "a third of the time every packet marked");
	assert_true(moves >= 1);
	assert_true(moves <= 40);
}

/* A path opened after its plane has RTT samples times its first packets
 * from the plane's largest recent RTT (path_rto()); the initial timeout
 * caps that only where it is longer than half again the plane's RTT. Here
 * every packet takes 1.5 ms each way, an RTT of three rto_init: paths opened on the
 * way took a 1 ms timeout, timed out before any answer could come, and
 * re-ported, again and again (a daemon beside a CPU hog, whose planes'
 * RTTs reached 80 ms against a 20 ms initial timeout, re-ported up to 250
 * times in its first second). */
static int slow_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		       uint64_t *delay, int *ce)
{
	int r = default_policy(n, from, ti, pkt, delay, ce);
	*delay += 1500000;
	return r;
}

static void test_new_path_waits_for_plane_rtt(void **state)
{
	(void)state;
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	for (int i = 0; i < 2; i++)
		p[i].initial_paths = 1;
	net n;
	net_init_mem_ok(&n, &p[0], &p[1], 16u << 20);
	n.policy = slow_policy;
	size_t len = 16u << 20;
	uint8_t *src = post_write(&n, len, 13, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 5000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	print_message("RTT 3 ms, rto_init 1 ms: %llu paths opened, %llu re-ports, %llu timeouts, "
		      "%.1f ms\n", (unsigned long long)st.paths_opened,
		      (unsigned long long)st.reports, (unsigned long long)st.rto_count,
		      (double)n.now / 1e6);
	assert_true(st.paths_opened > 1); /* paths opened after the first sample */
	assert_int_equal(st.reports, 0);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* A delay spike on path 2 (A to B): its packets sent in [30 us, 60 us)
 * are held until 250 us (beyond the path's first timeout, before its
 * second), and the path stays first in, first out (nothing sent
 * on it later overtakes them), as a queue on one route would. */
static uint64_t spike_last_at;

static int spike_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (from != 0 || ti->path_id != 2)
		return ok;
	uint64_t at = n->now + *delay;
	if (n->now >= 30000 && n->now < 60000)
		at = 250000;
	if (at < spike_last_at)
		at = spike_last_at;
	spike_last_at = at;
	*delay = at - n->now;
	return ok;
}

/* A timeout that was only delay is undone (SPEC 6.4): the packets it
 * declared lost arrive after all, so they are not counted lost (in the
 * connection's and the path's counters, which the daemon's telemetry
 * reads), the timeout counts as spurious, and the path gets back the
 * window it had before. (The path's first timeout, while its plane works,
 * holds its data and asks (6.4), but the spike outlasts the hold -- one
 * more timeout -- and the data goes again: a hold that ends before the
 * delay does is test_held_timeout_ack_first.) */
static void test_spurious_rto_undone(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = spike_policy;
	spike_last_at = 0;
	size_t len = 8 << 20;
	uint8_t *src = post_write(&n, len, 12, 0);
	net_run_until(&n, NULL, NULL, 30000);
	mrp_path_info before;
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &before), 0);
	/* just before the spike ends: the path has timed out */
	net_run_until(&n, NULL, NULL, 245000);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.rto_count > 0);
	assert_int_equal(st.lost_pkts, 0); /* not yet known: nothing counted */
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	/* the held packets arrive at 250 us, perhaps after the message
	 * completed through their retransmissions: their ACKs resolve them */
	net_run_until(&n, NULL, NULL, n.now + 1000000);
	mrp_conn_get_stats(n.c[0], &st);
	print_message("rto %llu spurious %llu late packets %llu lost %llu; path 2 cwnd %llu "
		      "before\n",
		      (unsigned long long)st.rto_count, (unsigned long long)st.rto_spurious,
		      (unsigned long long)st.rto_late_pkts, (unsigned long long)st.lost_pkts,
		      (unsigned long long)before.cwnd);
	assert_true(st.rto_spurious > 0);
	assert_true(st.rto_late_pkts > 0);
	assert_int_equal(st.lost_pkts, 0);
	mrp_path_info p2;
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &p2), 0);
	assert_int_equal(p2.lost_pkts, 0);
	assert_true(p2.cwnd >= before.cwnd);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* A real loss after a timeout still counts: the path's packets are dropped
 * in a hole from 30 to 400 us and the timeout fires; the first timeout held
 * them (8.1), the second sends them again on the other paths, and the
 * message completes then, inside the hole (at 241 us). The path's PROBEs go
 * unanswered while the other paths answer, so it fails at that second
 * timeout and is re-ported (SPEC 8.1: the route fails, not the peer); its
 * new route answers. The completion time is taken when the completion
 * appears: net_run_until() runs to the first event at or after its limit,
 * which on an idle network is a millisecond later (this test used to read
 * the time after the hole's end, and so "completed" at the path's next
 * PROBE after 400 us, 418 us). */
static void test_rto_loss_counted(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	mrp_path_info p2;
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &p2), 0);
	size_t len = 4 << 20;
	uint8_t *src = post_write(&n, len, 13, 0);
	net_run_until(&n, NULL, NULL, 30000);
	n.blackhole_sport = p2.sport; /* a black hole from 30 to 400 us */
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	uint64_t done_at = 0;
	if (net_run_until(&n, have_cqes, &w, 400000))
		done_at = n.now;
	net_run_until(&n, NULL, NULL, 400000);
	n.blackhole_sport = -1;
	if (!done_at) {
		assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
		done_at = n.now;
	}
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	/* the path's timed-out packets are resolved when its probe is
	 * answered, which may come just after the completion */
	net_run_until(&n, NULL, NULL, n.now + 1000000);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &p2), 0);
	print_message("complete at %llu us; rto %llu spurious %llu lost %llu (path 2: %llu, "
		      "probes answered %llu)\n",
		      (unsigned long long)done_at / 1000, (unsigned long long)st.rto_count,
		      (unsigned long long)st.rto_spurious, (unsigned long long)st.lost_pkts,
		      (unsigned long long)p2.lost_pkts, (unsigned long long)p2.probes_answered);
	assert_true(done_at < 300000);
	assert_int_equal(p2.state, MRP_PATH_ACTIVE);
	assert_true(p2.probes_answered > 0);
	assert_true(st.lost_pkts > 0);
	assert_true(p2.lost_pkts > 0);
	assert_true(st.rto_count > 0);
	assert_int_equal(st.rto_spurious, 0);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* A loss burst on the host's only plane, every path at once: from 30 to
 * 400 us everything A sends (burst_dirs 1), B sends (2) or both (3) is
 * lost. */
static int burst_dirs;

static int burst_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (n->now >= 30000 && n->now < 400000 && (burst_dirs & (1 << from)))
		return 0;
	return ok;
}

static unsigned count_active(mrp_conn *c, unsigned *nopen)
{
	unsigned open = 0, active = 0;
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(c, i, &pi) != 0)
			continue;
		open++;
		active += pi.state == MRP_PATH_ACTIVE;
	}
	if (nopen)
		*nopen = open;
	return active;
}

static int all_active(net *n, void *arg)
{
	(void)arg;
	unsigned open;
	return count_active(n->c[0], &open) == open;
}

/* Every path times out in the burst, and no other path of the plane works
 * to tell a broken route from a common failure: they keep their routes
 * and probe, again one PTO apart after each timeout (SPEC 8.1), so that
 * they are back within a few round trips of the burst's end (at 400 us:
 * back at 436 us; waiting for the doubled timeout, as they did before, the
 * next probe left at about 730 us, and none left in [350, 400) us). The
 * ACK the peer sends ahead of each PROBE_ACK (SPEC 8.2) resolves the
 * timed-out packets: lost ones count as lost; when only the ACKs were lost,
 * the packets arrived, the timeouts were spurious and nothing is lost. */
static void run_burst(int dirs)
{
	net n;
	net_init(&n, NULL, NULL);
	n.policy = burst_policy;
	burst_dirs = dirs;
	size_t len = 4 << 20;
	uint8_t *src = post_write(&n, len, 21, 0);
	/* (net_run_until() stops after the first event past its limit, and
	 * the probes in the burst are about 30 us apart) */
	net_run_until(&n, NULL, NULL, 350000);
	assert_true(n.now < 400000);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.rto_count >= 4);
	assert_int_equal(count_active(n.c[0], NULL), 0); /* every path timed out */
	assert_true(net_run_until(&n, all_active, NULL, 10000000));
	uint64_t back_at = n.now;
	unsigned open = 0, active = count_active(n.c[0], &open);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	uint64_t done_at = n.now;
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	net_run_until(&n, NULL, NULL, n.now + 1000000);
	mrp_conn_get_stats(n.c[0], &st);
	print_message("burst %s: %u paths back at %llu us; complete at %llu us; rto %llu "
		      "spurious %llu late %llu lost %llu\n",
		      dirs == 3 ? "both ways" : "on the ACKs", open, (unsigned long long)back_at / 1000,
		      (unsigned long long)done_at / 1000, (unsigned long long)st.rto_count,
		      (unsigned long long)st.rto_spurious, (unsigned long long)st.rto_late_pkts,
		      (unsigned long long)st.lost_pkts);
	assert_true(open > 0);
	assert_int_equal(active, open);
	assert_true(back_at < 500000);
	if (dirs == 3) {
		assert_true(st.lost_pkts > 0);
	} else {
		assert_int_equal(st.lost_pkts, 0);
		assert_true(st.rto_spurious > 0);
		assert_true(st.rto_late_pkts > 0);
	}
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

static void test_burst_both_ways(void **state)
{
	(void)state;
	run_burst(3);
}

static void test_burst_on_acks(void **state)
{
	(void)state;
	run_burst(2);
}

/* The first data packet A sends on its path 2 is lost. */
static int first3_lost;

static int first3_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			 uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 0 && ti->is_data && ti->path_id == 2 && !first3_lost) {
		first3_lost = 1;
		return 0;
	}
	return ok;
}

/* A fresh connection's short message (36 KiB: 4 packets on each of paths 0
 * and 1, the initial window, and 1 on path 2) loses the packet of path 2: that path has no RTT sample of its own, but the
 * connection has one once another path's ACK is in, and the lost packet's
 * tail-loss probe is re-timed from it (not before the timeout's floor, 100
 * us, after it was sent) instead of waiting rto_init / 2 (500 us). */
static void test_fresh_tail_loss(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = first3_policy;
	first3_lost = 0;
	size_t len = 36 << 10;
	n.now = 1000; /* (a timestamp of 0 gives no RTT sample) */
	uint8_t *src = post_write(&n, len, 22, n.now);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	uint64_t done_at = n.now;
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	print_message("36 KiB WRITE, path 2's packet lost: complete at %llu us, tail "
		      "probes %llu, timeouts %llu\n", (unsigned long long)done_at / 1000,
		      (unsigned long long)st.tlp_count, (unsigned long long)st.rto_count);
	assert_true(first3_lost);
	assert_true(done_at < 200000);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* The first data packet A sends on plane 1 is lost; recorded: when, on
 * which path, A's first PROBE on that path after it, and A's data packets
 * on plane 1 before that PROBE. */
static struct {
	int lost_path;
	uint64_t lost_at, probe_at;
	unsigned plane1_data;
	int drop_probe, drop_answer; /* the first PROBE of the path, or its answer */
	unsigned probes, answers;
} cp;

static int cold_plane_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			     uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 1 && pkt[1] == MRP_OP_PROBE_ACK && cp.probe_at) {
		/* (answers to the lost path's PROBEs: B sends nothing else
		 * after them but ACKs) */
		if (cp.answers++ == 0 && cp.drop_answer)
			return 0;
	}
	if (from != 0 || ti->plane != 1)
		return ok;
	if (pkt[1] == MRP_OP_PROBE && (int)ti->path_id == cp.lost_path &&
	    cp.probes++ == 0 && cp.drop_probe) {
		cp.probe_at = n->now;
		return 0;
	}
	if (ti->is_data && !cp.probe_at)
		cp.plane1_data++;
	if (ti->is_data && cp.lost_path < 0) {
		cp.lost_path = ti->path_id;
		cp.lost_at = n->now;
		return 0;
	}
	if (pkt[1] == MRP_OP_PROBE && (int)ti->path_id == cp.lost_path && !cp.probe_at)
		cp.probe_at = n->now;
	return ok;
}

/* A WRITE of len bytes from A (post_write()) on n, run until it completes
 * (within 1 s of simulated time): how long it took; its data verified, A's
 * stats in *st, n freed. */
static uint64_t fresh_write_run(net *n, size_t len, uint32_t seed, mrp_conn_stats *st)
{
	uint64_t t0 = n->now;
	uint8_t *src = post_write(n, len, seed, n->now);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(n, have_cqes, &w, 1000000000ull));
	uint64_t done = n->now - t0;
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n->mr[1].base, src, len);
	mrp_conn_get_stats(n->c[0], st);
	assert_int_equal(n->check_failures, 0);
	free(src);
	net_free(n);
	return done;
}

/* A fresh 2-plane connection's 20 KiB WRITE (5 packets: a burst of 4 on
 * plane 0, 1 on plane 1) with cold_plane_policy: plane 1's one packet is
 * lost, and the path's first PROBE (drop_probe) or its answer
 * (drop_answer) too. Returns when it completed; data verified. */
static uint64_t cold_plane_run(int drop_probe, int drop_answer, mrp_conn_stats *st)
{
	net n;
	net_init_2planes(&n, cold_plane_policy);
	memset(&cp, 0, sizeof(cp));
	cp.lost_path = -1;
	cp.drop_probe = drop_probe;
	cp.drop_answer = drop_answer;
	n.now = 1000; /* (a timestamp of 0 gives no RTT sample) */
	uint64_t done = fresh_write_run(&n, 20 << 10, 23, st);
	assert_true(cp.lost_path >= 0);
	return done;
}

/* Plane 1's one packet lost. Plane 1 never gets an RTT sample, so nothing
 * re-times that path's timers from its own plane (rearm_unsampled()), and
 * its tail-loss probe would wait rto_init / 2 (500 us). Instead the path
 * sends a PROBE the timeout's floor (100 us) after the packet, as plane 0's
 * RTT is known (cold_probe_arm()); its answer shows the packet
 * unacknowledged, and it goes again: complete within 200 us, no tail-loss
 * probe, no timeout, no data sent on plane 1 before the PROBE but the lost
 * packet. */
static void test_cold_plane_lone_loss(void **state)
{
	(void)state;
	mrp_conn_params d;
	mrp_conn_params_default(&d);
	mrp_conn_stats st;
	uint64_t done = cold_plane_run(0, 0, &st);
	print_message("20 KiB WRITE over 2 planes, plane 1's one packet lost: PROBE %llu us "
		      "after it, complete at %llu us, tail probes %llu, timeouts %llu\n",
		      (unsigned long long)(cp.probe_at ? cp.probe_at - cp.lost_at : 0) / 1000,
		      (unsigned long long)done / 1000, (unsigned long long)st.tlp_count,
		      (unsigned long long)st.rto_count);
	assert_int_equal(cp.plane1_data, 1);
	assert_true(cp.probe_at && cp.probe_at >= cp.lost_at + d.rto_min_ns);
	assert_true(done < 200000);
	assert_int_equal(st.tlp_count, 0);
	assert_int_equal(st.rto_count, 0);
	assert_int_equal(st.lost_pkts, 1);
}

/* The same with the lost path's first PROBE, or its answer, lost too: the
 * PROBE goes again one wait later (the timeout's floor: plane 1 has no
 * RTT), and its answer shows the packet missing. Before, the path waited
 * for its tail-loss probe, armed before any RTT at rto_init / 2: complete
 * at ~510 us, one tail-loss probe. Now within 300 us, no tail-loss probe,
 * no timeout, one packet lost. */
static void test_cold_plane_probe_lost(void **state)
{
	(void)state;
	for (int drop_probe = 1; drop_probe >= 0; drop_probe--) {
		mrp_conn_stats st;
		uint64_t done = cold_plane_run(drop_probe, !drop_probe, &st);
		print_message("plane 1's one packet lost and its path's first %s: %u PROBEs, "
			      "complete at %llu us, tail probes %llu, timeouts %llu\n",
			      drop_probe ? "PROBE" : "PROBE's answer", cp.probes,
			      (unsigned long long)done / 1000, (unsigned long long)st.tlp_count,
			      (unsigned long long)st.rto_count);
		assert_int_equal(cp.probes, 2);
		assert_true(done < 300000);
		assert_int_equal(st.tlp_count, 0);
		assert_int_equal(st.rto_count, 0);
		assert_int_equal(st.lost_pkts, 1);
	}
}

/* A's first data packet is lost; recorded: when, and A's first PROBE after
 * it. */
static struct {
	int lost;
	uint64_t lost_at, probe_at;
} rh1;

static int first_data_lost_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
				  uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (from != 0)
		return ok;
	if (ti->is_data && !rh1.lost) {
		rh1.lost = 1;
		rh1.lost_at = n->now;
		return 0;
	}
	if (pkt[1] == MRP_OP_PROBE && rh1.lost && !rh1.probe_at)
		rh1.probe_at = n->now;
	return ok;
}

/* A 64-byte WRITE on a fresh connection, its one packet lost: when it
 * completes, with A given plane_rtt_hint_ns = hint (0: none). */
static uint64_t lone_loss_run(uint64_t hint, mrp_conn_stats *st)
{
	net n;
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	p[0].plane_rtt_hint_ns[0] = hint;
	net_init(&n, &p[0], &p[1]);
	n.policy = first_data_lost_policy;
	memset(&rh1, 0, sizeof(rh1));
	n.now = 1000;
	return fresh_write_run(&n, 64, 29, st);
}

/* A one-packet message on a fresh connection whose packet is lost has no
 * RTT sample anywhere: without a hint it waits for the tail-loss probe at
 * rto_init / 2 (500 us). With the host's RTT of the plane (here 12 us, the
 * test network's round trip) a PROBE asks twice that plus the ACK delay
 * after the packet; its answer shows the packet unacknowledged and it goes
 * again (cold_probe_arm()). */
static void test_rtt_hint_lone_loss(void **state)
{
	(void)state;
	mrp_conn_params d;
	mrp_conn_params_default(&d);
	mrp_conn_stats st;
	uint64_t cold = lone_loss_run(0, &st);
	assert_true(rh1.lost);
	assert_true(cold >= d.rto_init_ns / 2);
	assert_int_equal(st.tlp_count, 1);
	const uint64_t hint = 12000;
	uint64_t hinted = lone_loss_run(hint, &st);
	print_message("64-byte WRITE, its one packet lost: complete at %llu us without an RTT "
		      "hint, %llu us with one of %llu us (PROBE %llu us after the packet)\n",
		      (unsigned long long)cold / 1000, (unsigned long long)hinted / 1000,
		      (unsigned long long)hint / 1000,
		      (unsigned long long)(rh1.probe_at - rh1.lost_at) / 1000);
	assert_true(rh1.lost && rh1.probe_at);
	assert_true(rh1.probe_at >= rh1.lost_at + 2 * hint + d.ack_delay_ns);
	assert_true(rh1.probe_at <= rh1.lost_at + 2 * hint + d.ack_delay_ns + 1000);
	assert_true(hinted < 100000);
	assert_int_equal(st.tlp_count, 0);
	assert_int_equal(st.rto_count, 0);
	assert_int_equal(st.lost_pkts, 1);
}

/* ---- a held first timeout and the PROBE's answer (SPEC 6.4, 8.3) -------- */

/* A peer like the conformance tool's: B withholds the ACKs of A's data
 * (every ACK it sends is dropped) until release_on_probe lets them through
 * from A's first PROBE on; it answers PROBEs. A stamps its PROBEs as they
 * leave, 2 us after the engine wrote them (as the daemon's datapath does).
 * Recorded from the message's post (at hw.start): A's first PROBE of the
 * path that carries the message (its timeout), the arrival at A of B's
 * first answer to it, A's first data packet after that PROBE, and how
 * many. */
static struct {
	int release_on_probe; /* B's ACKs pass from A's first PROBE on */
	int released;
	int silent;           /* B answers no PROBE of that path either */
	int path;             /* the path of the message's first packet */
	uint64_t start, probe_at, answer_at, retx_at;
	unsigned data_after;
} hw;

static int held_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		       uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (!hw.start || n->now < hw.start)
		return ok;
	if (from == 0 && ti->is_data) {
		if (hw.path < 0)
			hw.path = ti->path_id;
		else if (hw.probe_at && !hw.data_after++) {
			hw.retx_at = n->now;
			hw.released = 1; /* its ACK shows the data received */
		}
	} else if (from == 0 && pkt[1] == MRP_OP_PROBE && ti->path_id == hw.path && !hw.probe_at) {
		hw.probe_at = n->now;
		hw.released = hw.release_on_probe;
	} else if (from == 1 && pkt[1] == MRP_OP_ACK && !hw.released) {
		return 0;
	} else if (from == 1 && pkt[1] == MRP_OP_PROBE_ACK && hw.probe_at && !hw.released) {
		mrp_pkt k;
		if (mrp_pkt_decode(&k, pkt, MRP_PROBE_ACK_LEN) > 0 &&
		    k.u.probe_ack.probed_path_id == hw.path) {
			if (hw.silent)
				return 0;
			if (!hw.answer_at)
				hw.answer_at = n->now + *delay;
		}
	}
	return ok;
}

/* A PROBE's send time as the daemon writes it: stamped as it leaves. */
static void stamp_late(uint8_t *buf, size_t len)
{
	if (len != MRP_PROBE_LEN || buf[1] != MRP_OP_PROBE)
		return;
	uint64_t ts = 0;
	for (int i = 0; i < 8; i++)
		ts = ts << 8 | buf[36 + i];
	ts += 2000;
	for (int i = 7; i >= 0; i--, ts >>= 8)
		buf[36 + i] = (uint8_t)ts;
}

/* Warm every path up with a transfer, then post a one-packet WRITE under
 * held_policy; returns when it completes (or the limit passes). */
static uint64_t held_run(net *n, int release_on_probe, int silent, cqlog log[2])
{
	net_init(n, NULL, NULL);
	n->policy = held_policy;
	n->stamp_probes_late = 1;
	memset(&hw, 0, sizeof(hw));
	hw.path = -1;
	hw.release_on_probe = release_on_probe;
	hw.silent = silent;
	n->now = 1000;
	uint8_t *warm = post_write(n, 256 << 10, 40, n->now);
	want w = { log, 0, 1 };
	assert_true(net_run_until(n, have_cqes, &w, 100000000ull));
	net_run_until(n, NULL, NULL, n->now + 200000);
	free(warm);
	hw.start = n->now;
	uint8_t src[100];
	fill_pattern(src, sizeof(src), 41);
	mrp_wr wr = { .wr_id = 2, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(n, 0), .rkey = n->mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n->c[0], &wr, n->now), 0);
	w.count = 2;
	assert_true(net_run_until(n, have_cqes, &w, hw.start + 100000000ull));
	assert_int_equal(log[0].e[1].wr_id, 2);
	assert_int_equal(log[0].e[1].status, MRP_WC_SUCCESS);
	assert_memory_equal(n->mr[1].base, src, sizeof(src));
	return n->now;
}

static void held_print(const char *what, net *n, uint64_t done)
{
	mrp_conn_stats st;
	mrp_conn_get_stats(n->c[0], &st);
	print_message("%s: path %d timed out %llu us after the post; answered at +%llu us, "
		      "data again at +%llu us (%u packets), complete at +%llu us; timeouts %llu "
		      "(spurious %llu), lost %llu\n", what, hw.path,
		      (unsigned long long)(hw.probe_at - hw.start) / 1000,
		      (unsigned long long)(hw.answer_at ? (hw.answer_at - hw.probe_at) / 1000 : 0),
		      (unsigned long long)(hw.data_after ? (hw.retx_at - hw.probe_at) / 1000 : 0),
		      hw.data_after, (unsigned long long)(done - hw.probe_at) / 1000,
		      (unsigned long long)st.rto_count, (unsigned long long)st.rto_spurious,
		      (unsigned long long)st.lost_pkts);
}

/* The path's first timeout holds its data and PROBEs (SPEC 6.4); the peer
 * answers the PROBE without the path's ACK ahead of it (8.2 makes it a
 * SHOULD; the conformance tool omits it): nothing shows the packet
 * received, so it is lost, and its data goes again at the answer -- not
 * at the next (doubled) timeout. Before: the answer resolved only packets
 * sent before the echoed timestamp, and a PROBE stamped as it left (the
 * daemon's) never qualified, so the data waited for the doubled timeout. */
static void test_held_timeout_answer_without_ack(void **state)
{
	(void)state;
	net n;
	cqlog log[2] = { 0 };
	uint64_t done = held_run(&n, 0, 0, log);
	held_print("PROBE answered, no ACK", &n, done);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(hw.path >= 0);
	assert_true(hw.probe_at > hw.start);
	assert_true(hw.answer_at > hw.probe_at);
	assert_true(hw.data_after > 0);
	/* held at the timeout, sent again when the answer arrived */
	assert_true(hw.retx_at >= hw.answer_at);
	assert_true(hw.retx_at - hw.answer_at < 1000);
	assert_true(st.rto_count > 0);
	assert_int_equal(st.rto_spurious, 0);
	assert_true(st.lost_pkts > 0);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* The same, but the path's ACK comes just ahead of the PROBE's answer and
 * shows the packet received: the timeout was only delay, and its data is
 * not sent again (nothing after the timeout), nor counted lost. */
static void test_held_timeout_ack_first(void **state)
{
	(void)state;
	net n;
	cqlog log[2] = { 0 };
	uint64_t done = held_run(&n, 1, 0, log);
	held_print("ACK ahead of the answer", &n, done);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(hw.probe_at > hw.start);
	assert_true(done > hw.probe_at);
	assert_int_equal(hw.data_after, 0);
	assert_true(st.rto_spurious > 0);
	assert_int_equal(st.lost_pkts, 0);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* A peer that answers nothing on the path (no ACK, no PROBE_ACK): the held
 * data goes once the timeout that expired has passed again, not at the
 * doubled one (before: 2 timeouts after the first). */
static void test_held_timeout_unanswered(void **state)
{
	(void)state;
	net n;
	cqlog log[2] = { 0 };
	uint64_t done = held_run(&n, 0, 1, log);
	held_print("nothing answered", &n, done);
	assert_true(hw.probe_at > hw.start);
	assert_int_equal(hw.answer_at, 0);
	assert_true(hw.data_after > 0);
	/* held (nothing at the timeout), then at most one more timeout: the
	 * one that expired, from the post to the timeout */
	assert_true(hw.retx_at > hw.probe_at);
	assert_true(hw.retx_at - hw.probe_at <= hw.probe_at - hw.start);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* From late_route_from on, what A sends on path late_route_path takes
 * late_route_ns more: a route to a spine much further away than the one its
 * RTT was measured over. */
static int late_route_path = -1;
static uint64_t late_route_from, late_route_ns;

static int late_route_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			     uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 0 && (int)ti->path_id == late_route_path && n->now >= late_route_from)
		*delay += late_route_ns;
	return ok;
}

/* The path's first timeout held its data (only delay, maybe) and the first
 * ACK of it comes back just before the hold's one more timeout runs out:
 * the packets held with it, sent later, are due later, and are waited for
 * (their sending plus the round trip that ACK showed), not sent again as
 * their own ACKs come in. Before: a far spine's path had its held packets
 * sent again 7 us after the first of them was acknowledged
 * (reorder_50x_start seed 8, 16 spurious retransmissions). Measured: 3
 * duplicates at B, the 3 tail-loss probes' copies; 25 with the old rule
 * (22 held packets sent again). */
static void test_held_timeout_late_acks_extend(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = late_route_policy;
	late_route_path = -1;
	n.now = 1000;
	uint8_t *warm = post_write(&n, 256 << 10, 42, n.now);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 100000000ull));
	net_run_until(&n, NULL, NULL, n.now + 200000);
	free(warm);
	late_route_path = 1;
	late_route_from = n.now;
	/* the path's timeout (its floor, 100 us) runs out first; its first
	 * ACK comes back just before the hold's end, the rest after it */
	late_route_ns = 187000;
	mrp_conn_stats a0, b0, a1, b1;
	mrp_conn_get_stats(n.c[0], &a0);
	mrp_conn_get_stats(n.c[1], &b0);
	static uint8_t src[256 << 10];
	fill_pattern(src, sizeof(src), 43);
	mrp_wr wr = { .wr_id = 2, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, n.now), 0);
	w.count = 2;
	assert_true(net_run_until(&n, have_cqes, &w, n.now + 100000000ull));
	assert_int_equal(log[0].e[1].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, sizeof(src));
	net_run_until(&n, NULL, NULL, n.now + 1000000); /* what is still on its way */
	mrp_conn_get_stats(n.c[0], &a1);
	mrp_conn_get_stats(n.c[1], &b1);
	uint64_t tlps = a1.tlp_count - a0.tlp_count, dups = b1.rx_dup_pkts - b0.rx_dup_pkts;
	print_message("timeouts %llu (undone %llu), tail-loss probes %llu, packets sent again "
		      "%llu, duplicates at B %llu\n",
		      (unsigned long long)(a1.rto_count - a0.rto_count),
		      (unsigned long long)(a1.rto_spurious - a0.rto_spurious),
		      (unsigned long long)tlps, (unsigned long long)(a1.retx_pkts - a0.retx_pkts),
		      (unsigned long long)dups);
	assert_true(a1.rto_count > a0.rto_count);	/* the path timed out */
	assert_true(a1.rto_spurious > a0.rto_spurious); /* and it was delay */
	/* the only copies: the tail-loss probes before the timeout */
	assert_true(dups <= tlps);
	late_route_path = -1;
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* A silent black hole on one path: detected by its RTO, its data resent on
 * other paths, the path re-ported; the transfer completes intact. */
static void test_blackhole_reported(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	mrp_path_info p2;
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &p2), 0);
	n.blackhole_sport = p2.sport;
	size_t len = 2 << 20;
	uint8_t *src = post_write(&n, len, 6, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.rto_count > 0);
	/* run on so the path has time to fail and re-port */
	net_run_until(&n, NULL, NULL, n.now + 20000000ull);
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &p2), 0);
	assert_int_not_equal(p2.sport, (uint16_t)n.blackhole_sport);
	mrp_event ev;
	int saw_failed = 0;
	while (mrp_conn_poll_event(n.c[0], &ev))
		if (ev.path_id == 2 && ev.new_state == MRP_PATH_FAILED)
			saw_failed = 1;
	assert_true(saw_failed);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* B's path hole_path carries nothing from hole_from on, whatever its route:
 * every new route of it lands in the hole (as with two spines, unlucky). */
static int hole_path = -1;
static uint64_t hole_from, hole_sent;

static int ack_path_hole_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
				uint64_t *delay, int *ce)
{
	if (from == 1 && (int)ti->path_id == hole_path && n->now >= hole_from) {
		hole_sent++;
		return 0;
	}
	return default_policy(n, from, ti, pkt, delay, ce);
}

/* A receiver's ACK-only path whose every new route fails while the other
 * paths of its plane work: after its second unanswered re-port its next
 * routes' probes wait 16 timeout floors and more (ACK_REPORT_HOLD), rather
 * than one probe into the hole per floor. Over the 4 ms after the hole
 * opens it re-ports 2-5 times and sends at most 8 packets into the hole:
 * the ACKs it carried before its first probe went unanswered, and one
 * probe per route (measured: 3 re-ports, 6 packets; without the hold 17
 * and 32). The transfer completes intact. */
static void test_ack_path_reports_held(void **state)
{
	(void)state;
	net n;
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	p[0].cc.line_rate_bps = 2000000000ull; /* 6 MB: some 25 ms */
	net_init(&n, &p[0], &p[1]);
	n.policy = ack_path_hole_policy;
	size_t len = 6 << 20;
	uint8_t *src = post_write(&n, len, 11, 0);
	/* let B's paths open and carry ACKs (B sends no data: each is
	 * ACK-only), then take one of them */
	net_run_until(&n, NULL, NULL, 200000);
	hole_path = -1;
	for (uint16_t id = 0; id < 16 && hole_path < 0; id++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[1], id, &pi) == 0 && pi.state == MRP_PATH_ACTIVE &&
		    id > 0)
			hole_path = id;
	}
	assert_true(hole_path > 0);
	hole_from = n.now;
	hole_sent = 0;
	mrp_conn_stats b0, b1;
	mrp_conn_get_stats(n.c[1], &b0);
	net_run_until(&n, NULL, NULL, hole_from + 4000000);
	mrp_conn_get_stats(n.c[1], &b1);
	print_message("B's path %d: %llu re-ports, %llu packets into the hole in 4 ms\n", hole_path,
		      (unsigned long long)(b1.reports - b0.reports), (unsigned long long)hole_sent);
	assert_true(b1.reports - b0.reports >= 2 && b1.reports - b0.reports <= 5);
	assert_true(hole_sent <= 8);
	hole_path = -1;
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, n.now + 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* Routes that lead into a hole from the start: bh_n source ports of end
 * bh_from's (0: A's, from A to B; 1: B's, from B to A), and the packets
 * sent into it. */
static uint16_t bh_sport[16];
static unsigned bh_n;
static int bh_from;
static uint64_t bh_sent;

static int start_hole_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			     uint64_t *delay, int *ce)
{
	if (from == bh_from)
		for (unsigned i = 0; i < bh_n; i++)
			if (ti->sport == bh_sport[i]) {
				bh_sent++;
				return 0;
			}
	return default_policy(n, from, ti, pkt, delay, ce);
}

/* Paths that never got an RTT sample, their routes in a hole from the
 * first packet: their timeouts were armed on the initial one (1 ms, an
 * unknown network) and their PROBEs go unanswered, so their first window
 * waited that long, while the other paths' ACKs had timed the plane in
 * their first round trip. Their timeout now comes once their PROBEs have
 * had their waits, and half the initial timeout: a 256 KiB WRITE completes
 * at 0.61 ms (1.11 ms before). */
static void test_cold_paths_in_hole_time_out(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = start_hole_policy;
	bh_from = 0; /* two of A's four routes */
	bh_n = 0;
	bh_sent = 0;
	for (uint16_t id = 1; id < 16 && bh_n < 2; id += 2) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], id, &pi) == 0)
			bh_sport[bh_n++] = pi.sport;
	}
	assert_int_equal(bh_n, 2);
	size_t len = 256 << 10;
	uint8_t *src = post_write(&n, len, 19, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 100000000ull));
	print_message("256 KiB, 2 of 4 routes in a hole: %.3f ms, %llu packets into it\n",
		      (double)n.now / 1e6, (unsigned long long)bh_sent);
	assert_true(n.now < 800000);
	assert_true(bh_sent > 0);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	bh_n = 0;
	free(src);
	net_free(&n);
}

/* A receiver all of whose routes back lead into one hole (one spine's cable
 * took all 4 return routes of a receiver one time in 256 in the
 * simulator): it hears nothing, but A's packets keep arriving on that
 * plane, so its ACK-only paths re-port when their probes go unanswered
 * rather than probe the same routes with waits doubling. A 4 KiB WRITE
 * completes in 3.0 ms, B's paths re-ported 4 times; before, they never
 * re-ported and the WRITE had not completed after 200 ms. */
static void test_ack_routes_all_in_hole(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = start_hole_policy;
	bh_from = 1; /* every route of B's: A's data and probes reach B, nothing
		      * of B's reaches A */
	bh_n = 0;
	bh_sent = 0;
	for (uint16_t id = 0; id < 16; id++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[1], id, &pi) == 0)
			bh_sport[bh_n++] = pi.sport;
	}
	assert_int_equal(bh_n, 4);
	size_t len = 4096;
	uint8_t *src = post_write(&n, len, 13, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 200000000ull));
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[1], &st);
	print_message("4 KiB through B's holed routes: %.2f ms, B re-ported %llu times, %llu of "
		      "its packets into the hole\n", (double)n.now / 1e6,
		      (unsigned long long)st.reports, (unsigned long long)bh_sent);
	assert_true(n.now < 10000000ull);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_true(st.reports >= 1);
	assert_true(bh_sent > 0);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* Every route A's plane-1 paths had when the hole opened leads into it, A
 * to B only: B's packets on plane 1 and on plane 0 still arrive, and no
 * plane event comes. */
static uint16_t rh_sport[16];
static unsigned rh_n;
static uint64_t rh_from, rh_sent, rh_ctl;

static int routes_hole_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			      uint64_t *delay, int *ce)
{
	if (from == 0 && ti->plane == 1 && n->now >= rh_from)
		for (unsigned i = 0; i < rh_n; i++)
			if (ti->sport == rh_sport[i]) {
				rh_sent += ti->is_data;
				rh_ctl += !ti->is_data;
				return 0;
			}
	return default_policy(n, from, ti, pkt, delay, ce);
}

/* Packets a connection sent on its paths of one plane, in their current
 * generations. */
static uint64_t plane_tx(const mrp_conn *c, uint8_t plane)
{
	uint64_t tx = 0;
	for (unsigned id = 0; id < 64; id++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(c, id, &pi) == 0 && pi.plane == plane)
			tx += pi.tx_pkts;
	}
	return tx;
}

/* No path of A's plane 1 works, and no other path of that plane can tell
 * A whether its routes or B's plane failed; but B answers on plane 0. Each
 * data path there re-ports after suspect_rtos timeouts (before, they
 * stayed SUSPECT, probing the hole 8 times per timeout for as long as the
 * connection lived), its new route works, and plane 1 carries A's data
 * again. A path given data while its PROBE was unanswered restarted its
 * timer at each packet and never timed out: it sent into the hole every
 * 50 us. Measured: 2 re-ports, 15 data packets into the hole in the first
 * 4 ms and none in the 2 ms after, when plane 1 carried 60 (before: no
 * re-port, and plane 1's data went into the hole for as long as the
 * connection lived). */
static void test_plane_routes_all_in_hole(void **state)
{
	(void)state;
	net n;
	mrp_conn_params p[2];
	pair_params(p, 2, 0);
	for (int i = 0; i < 2; i++)
		p[i].initial_paths = 8; /* 4 on each plane */
	p[0].cc.line_rate_bps = 2000000000ull; /* 8 MB: some 34 ms */
	net_init(&n, &p[0], &p[1]);
	n.policy = routes_hole_policy;
	rh_n = 0;
	rh_from = UINT64_MAX;
	size_t len = 8 << 20;
	uint8_t *src = post_write(&n, len, 29, 0);
	net_run_until(&n, NULL, NULL, 3000000);
	for (uint16_t id = 0; id < 16; id++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], id, &pi) == 0 && pi.plane == 1 &&
		    pi.state == MRP_PATH_ACTIVE)
			rh_sport[rh_n++] = pi.sport;
	}
	assert_true(rh_n >= 2); /* several paths: the plane has no witness */
	assert_true(plane_tx(n.c[0], 1) > 0);
	rh_from = n.now;
	rh_sent = rh_ctl = 0;
	mrp_conn_stats s0, s1;
	mrp_conn_get_stats(n.c[0], &s0);
	net_run_until(&n, NULL, NULL, rh_from + 4000000);
	uint64_t sent_4ms = rh_sent, ctl_4ms = rh_ctl, tx1 = plane_tx(n.c[0], 1);
	net_run_until(&n, NULL, NULL, n.now + 2000000);
	uint64_t tx2 = plane_tx(n.c[0], 1);
	mrp_conn_get_stats(n.c[0], &s1);
	print_message("%u plane-1 paths: %llu re-ports, %llu data and %llu other packets into "
		      "the hole in 4 ms, %llu and %llu in the 2 ms after; %llu sent on plane 1 "
		      "then\n",
		      rh_n, (unsigned long long)(s1.reports - s0.reports),
		      (unsigned long long)sent_4ms, (unsigned long long)ctl_4ms,
		      (unsigned long long)(rh_sent - sent_4ms),
		      (unsigned long long)(rh_ctl - ctl_4ms), (unsigned long long)(tx2 - tx1));
	assert_true(s1.reports - s0.reports >= 1);
	assert_true(tx2 - tx1 >= 20); /* plane 1 carries data again */
	assert_int_equal(rh_sent, sent_4ms); /* no more data into the hole */
	/* (A's answers to B's PROBEs may still take A's paths that carry no
	 * data and whose routes lead into the hole: B's probes of its own
	 * paths, A's answers lost, a few per millisecond) */
	assert_true(rh_ctl - ctl_4ms <= 10);
	rh_n = 0;
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, n.now + 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* A path alone on its plane, its route a black hole: it cannot tell a hole
 * in its route from a failure common to the plane, so it re-ports, and the
 * transfer completes on the new route. */
static void test_lone_path_reports(void **state)
{
	(void)state;
	net n;
	mrp_conn_params d[2];
	pair_params(d, 1, 0);
	for (int i = 0; i < 2; i++)
		d[i].initial_paths = d[i].max_paths = 1;
	net_init(&n, &d[0], &d[1]);
	mrp_path_info p0;
	assert_int_equal(mrp_conn_path_info(n.c[0], 0, &p0), 0);
	n.blackhole_sport = p0.sport;
	size_t len = 256 << 10;
	uint8_t *src = post_write(&n, len, 23, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(mrp_conn_path_info(n.c[0], 0, &p0), 0);
	assert_int_not_equal(p0.sport, (uint16_t)n.blackhole_sport);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* Everything B sends to A is lost from 30 us to 500 us (a burst on A's own
 * link, ACK direction): every path of A times out together. None of them
 * re-ports -- a new route cannot help when they all fail, and would forget
 * the path's RTT -- and the transfer completes once the burst is over. */
static int b_silent_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			   uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 1 && n->now >= 30000 && n->now < 500000)
		return 0;
	return ok;
}

static void test_common_failure_keeps_routes(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = b_silent_policy;
	mrp_path_info before[4];
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(mrp_conn_path_info(n.c[0], i, &before[i]), 0);
	size_t len = 4 << 20;
	uint8_t *src = post_write(&n, len, 21, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	print_message("rto %llu tlp %llu reports %llu, done at %llu ns\n",
		      (unsigned long long)st.rto_count, (unsigned long long)st.tlp_count,
		      (unsigned long long)st.reports, (unsigned long long)n.now);
	assert_true(st.rto_count > 0);  /* the burst outlasted the timers */
	assert_true(st.tlp_count >= 4); /* tail probes went on before the timeout */
	assert_int_equal(st.reports, 0);
	for (unsigned i = 0; i < 4; i++) {
		mrp_path_info p;
		assert_int_equal(mrp_conn_path_info(n.c[0], i, &p), 0);
		assert_int_equal(p.sport, before[i].sport);
		assert_int_equal(p.gen, before[i].gen);
	}
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* A plane goes down mid-transfer: its paths stop, in-flight data is resent
 * on the other plane, nothing is lost. */
static int plane1_down;
static int plane_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			uint64_t *delay, int *ce)
{
	if (plane1_down && ti->plane == 1)
		return 0;
	return default_policy(n, from, ti, pkt, delay, ce);
}

static void test_plane_down(void **state)
{
	(void)state;
	net n;
	net_init_2planes(&n, plane_policy);
	plane1_down = 0;
	size_t len = 4 << 20;
	uint8_t *src = post_write(&n, len, 8, 0);
	net_run_until(&n, NULL, NULL, 6000); /* packets in flight on both planes */
	plane1_down = 1;
	for (int i = 0; i < 2; i++)
		assert_int_equal(mrp_conn_plane_event(n.c[i], 1, MRP_PLANE_DOWN, n.now), 0);
	uint64_t plane1_tx = plane_tx(n.c[0], 1);
	assert_true(plane1_tx > 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	uint64_t plane1_after = 0;
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], i, &pi) == 0 && pi.plane == 1) {
			assert_int_equal(pi.state, MRP_PATH_DISABLED);
			plane1_after += pi.tx_pkts;
		}
	}
	assert_int_equal(plane1_after, plane1_tx); /* nothing new on the dead plane */
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.retx_pkts > 0); /* its in-flight data went out again elsewhere */
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* Runs n until the WRITE post_write() posted completes; it succeeded and
 * its len bytes of src arrived. */
static void write_completes(net *n, const uint8_t *src, size_t len)
{
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n->mr[1].base, src, len);
}

/* The caller's planes_full (its NIC ports with no room): data goes on the
 * other planes; with every plane full nothing is written, the connection
 * says it waits for a port (mrp_conn_nic_blocked()) and opens no path for
 * it; once a port has room again the transfer completes. */
static void test_planes_full(void **state)
{
	(void)state;
	net n;
	mrp_conn_params p[2];
	uint32_t full = 1; /* plane 0 full */
	pair_params(p, 2, 0);
	p[0].planes_full = &full;
	net_init(&n, &p[0], &p[1]);
	size_t len = 1 << 20;
	uint8_t *src = post_write(&n, len, 3, 0);
	write_completes(&n, src, len);
	assert_int_equal(plane_tx(n.c[0], 0), 0);
	assert_true(plane_tx(n.c[0], 1) >= len / 4096);
	free(src);

	full = 3; /* both full */
	src = post_write(&n, len, 4, n.now);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	uint64_t opened = st.paths_opened;
	uint8_t buf[MRP_DATA_HDR_LEN + MRP_MTU_MAX];
	mrp_tx_info ti;
	ssize_t w;
	while ((w = mrp_conn_write_pkt(n.c[0], &ti, buf, sizeof(buf), n.now)) > 0)
		assert_true(w < MRP_DATA_HDR_LEN); /* (a control packet, if any) */
	assert_int_equal(w, 0);
	assert_true(mrp_conn_nic_blocked(n.c[0]));
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.paths_opened, opened);
	full = 0;
	write_completes(&n, src, len);
	assert_false(mrp_conn_nic_blocked(n.c[0]));
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* Everything B sends is lost in [ack_gap_from, ack_gap_to): the ACK
 * direction of a one-plane host's cable bursts (its two directions burst
 * apart); A's new data packets (not RETX) are counted in three windows of
 * the silence: [+40, +100) us, [+ack_gap_quiet, ack_gap_to) and the 30 us
 * before it. */
static uint64_t ack_gap_from, ack_gap_quiet, ack_gap_to, ack_gap_new[3];

static int ack_gap_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			  uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 1 && n->now >= ack_gap_from && n->now < ack_gap_to)
		return 0;
	uint16_t flags = (uint16_t)(pkt[2] << 8 | pkt[3]);
	if (from == 0 && ti->is_data && !(flags & MRP_F_RETX)) {
		uint64_t t = n->now;
		if (t + 30000 >= ack_gap_from && t < ack_gap_from)
			ack_gap_new[0]++;
		else if (t >= ack_gap_from + 40000 && t < ack_gap_from + 100000)
			ack_gap_new[1]++;
		else if (t >= ack_gap_from + ack_gap_quiet && t < ack_gap_to)
			ack_gap_new[2]++;
	}
	return ok;
}

/* The run of test_ack_silence_keeps_sending() (below) with B's allocator
 * hinting cap_bps; counts: whether to assert the new packets' counts,
 * which are those of a 10 Gbit/s hint. */
static void ack_silence_run_at(uint64_t rto_min_ns, uint64_t quiet_ns, uint64_t silence_ns,
			       uint64_t cap_bps, int counts)
{
	/* one plane, A at 10 Gbit/s, B's allocator hinting cap_bps */
	static mrp_rh_slot slots[4];
	mrp_rh rh;
	mrp_conn_params p[2];
	net n;
	size_t len = 8u << 20;
	assert_int_equal(mrp_rh_init(&rh, slots, 4, cap_bps, 0), 0);
	pair_params(p, 1, 0);
	p[0].cc.line_rate_bps = 10000000000ull;
	p[0].rto_min_ns = rto_min_ns;
	p[1].rh = &rh;
	net_init_mem_ok(&n, &p[0], &p[1], len);
	n.policy = ack_gap_policy;
	ack_gap_from = 2000000;
	ack_gap_quiet = quiet_ns;
	ack_gap_to = ack_gap_from + silence_ns;
	memset(ack_gap_new, 0, sizeof(ack_gap_new));
	uint8_t *src = post_write(&n, len, 12, 0);
	write_completes(&n, src, len);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	print_message("rto_min %llu us, hint %.3f Gbit/s: new data packets: %llu in the 30 us "
		      "before the silence, %llu in its [40, 100) us, %llu in [%llu, %llu) us; "
		      "lost %llu, timeouts %llu (%llu undone), re-ports %llu\n",
		      (unsigned long long)rto_min_ns / 1000, (double)cap_bps / 1e9,
		      (unsigned long long)ack_gap_new[0], (unsigned long long)ack_gap_new[1],
		      (unsigned long long)ack_gap_new[2], (unsigned long long)quiet_ns / 1000,
		      (unsigned long long)silence_ns / 1000, (unsigned long long)st.lost_pkts,
		      (unsigned long long)st.rto_count, (unsigned long long)st.rto_spurious,
		      (unsigned long long)st.reports);
	assert_int_equal(st.lost_pkts, 0);
	assert_int_equal(n.check_failures, 0);
	if (!counts) {
		free(src);
		net_free(&n);
		return;
	}
	/* 10 Gbit/s is 9 packets in 30 us. In [40, 100) us of the silence
	 * the hint's bound alone allowed none (0 when silence_allowance()
	 * returns 0); with it, 12 here -- from a PTO of silence on (some 28
	 * us), at about half the hinted rate: the paths' own windows bound
	 * them too */
	assert_true(ack_gap_new[0] >= 6);
	assert_true(ack_gap_new[1] >= 8);
	assert_int_equal(ack_gap_new[2], 0);
	free(src);
	net_free(&n);
}

static void ack_silence_run(uint64_t rto_min_ns, uint64_t quiet_ns, uint64_t silence_ns)
{
	ack_silence_run_at(rto_min_ns, quiet_ns, silence_ns, 10000000000ull, 1);
}

/* A sender under its receiver's hint (10 Gbit/s) whose ACKs are all lost
 * while its data arrives: it goes on at the hinted rate past the hint's
 * bound on data in flight (two round trips, some 25 KB here) for up to the
 * timeout's floor of silence, where it stopped two round trips in before
 * (one 200G plane, 1 % loss in 40 us bursts: 0.974-0.983 of RoCEv2's
 * goodput, bench/README.md), and then stops sending new data: with a floor
 * of 100 us, none from 150 us of silence on. With a daemon's floor of 5 ms
 * it stops after 16 of its round trips instead (about 11-20 us each here):
 * none from 400 us on, where the floor alone would let it send for 5 ms.
 * Nothing is lost, the transfer completes intact. */
static void test_ack_silence_keeps_sending(void **state)
{
	(void)state;
	ack_silence_run(100000, 150000, 300000);
	ack_silence_run(5000000, 400000, 600000);
}

/* The same silence under hints a little apart (the paths' timers and
 * probes fall at other moments against the silence's end): every path
 * times out in it, and when it ends the others' ACKs come back before a
 * path's PROBE, sent in the silence, is answered again. Its timeouts came
 * while nothing of the plane worked: its route is not taken as failed,
 * and its timed-out packets, delivered, are not counted lost. (It was
 * re-ported, and 9 or 10 packets counted lost, at 9.8, 9.9, 9.98, 9.99
 * and 9.995 Gbit/s: path_new_gen() resolves what a path still has timed
 * out as lost, the ACKs of its old generation being stale.) */
static void test_ack_silence_no_false_route_failure(void **state)
{
	(void)state;
	static const uint64_t mbps[] = { 9800, 9900, 9950, 9980, 9990, 9995, 9998, 10000 };
	for (size_t i = 0; i < sizeof(mbps) / sizeof(mbps[0]); i++)
		ack_silence_run_at(100000, 150000, 300000, mbps[i] * 1000000ull, 0);
}

/* Paths of c in service (open, not disabled) on plane pl, or on every
 * plane for pl < 0; *opened counts the open slots. */
static unsigned paths_in_service(const mrp_conn *c, int pl, unsigned *opened)
{
	unsigned in = 0, open = 0;
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(c, i, &pi) != 0)
			continue;
		open++;
		in += pi.state != MRP_PATH_DISABLED && (pl < 0 || pi.plane == pl);
	}
	if (opened)
		*opened = open;
	return in;
}

/* A plane goes down: the planes left get new paths, so that the paths in
 * service are as many as the connection started with (more routes across
 * the surviving fabric, SPEC 8.1), and they carry data. Only up to that
 * count: the plane's return and a second failure add none. */
static void test_plane_down_replaces_paths(void **state)
{
	(void)state;
	net n;
	net_init_2planes(&n, plane_policy);
	plane1_down = 0;
	size_t len = 8 << 20;
	uint8_t *src = post_write(&n, len, 8, 0);
	net_run_until(&n, NULL, NULL, 6000);
	unsigned opened;
	assert_int_equal(paths_in_service(n.c[0], 0, &opened), 2);
	assert_int_equal(opened, 4); /* initial_paths 4, over two planes */
	plane1_down = 1;
	for (int i = 0; i < 2; i++)
		assert_int_equal(mrp_conn_plane_event(n.c[i], 1, MRP_PLANE_DOWN, n.now), 0);
	assert_int_equal(paths_in_service(n.c[0], 0, &opened), 4);
	assert_int_equal(paths_in_service(n.c[0], -1, NULL), 4);
	assert_int_equal(opened, 6);
	write_completes(&n, src, len);
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], i, &pi) == 0 && pi.plane == 0)
			assert_true(pi.acked_pkts > 0); /* the new ones carried data too */
	}
	/* back, and down again: no more paths */
	plane1_down = 0;
	for (int i = 0; i < 2; i++)
		assert_int_equal(mrp_conn_plane_event(n.c[i], 1, MRP_PLANE_UP, n.now), 0);
	net_run_until(&n, NULL, NULL, n.now + 1000000);
	assert_int_equal(paths_in_service(n.c[0], -1, &opened), 6);
	plane1_down = 1;
	for (int i = 0; i < 2; i++)
		assert_int_equal(mrp_conn_plane_event(n.c[i], 1, MRP_PLANE_DOWN, n.now), 0);
	assert_int_equal(paths_in_service(n.c[0], -1, &opened), 4);
	assert_int_equal(opened, 6);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* The same for a plane the operator drains: its paths stay open (they
 * answer probes) but carry no data, and the plane left gets new ones. */
static void test_plane_drain_replaces_paths(void **state)
{
	(void)state;
	net n;
	net_init_2planes(&n, default_policy);
	size_t len = 8 << 20;
	uint8_t *src = post_write(&n, len, 8, 0);
	net_run_until(&n, NULL, NULL, 6000);
	assert_int_equal(mrp_conn_plane_event(n.c[0], 1, MRP_PLANE_DRAIN, n.now), 0);
	unsigned opened;
	assert_int_equal(paths_in_service(n.c[0], 0, &opened), 4);
	assert_int_equal(paths_in_service(n.c[0], 1, NULL), 0);
	assert_int_equal(opened, 6);
	uint64_t plane1_tx = plane_tx(n.c[0], 1), plane1_after = 0;
	write_completes(&n, src, len);
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], i, &pi) != 0)
			continue;
		if (pi.plane == 1)
			plane1_after += pi.tx_pkts;
		else
			assert_true(pi.acked_pkts > 0);
	}
	assert_true(plane1_after - plane1_tx < 8); /* probes at most, no data */
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* No plane gets more than its part of max_paths (max_per_plane in the
 * daemon): with max_paths 6 on two planes, the plane left goes from 2 paths
 * to 3, not to the 4 the connection started with (the slots free would
 * allow it). */
static void test_plane_down_paths_capped(void **state)
{
	(void)state;
	mrp_conn_params p[2];
	pair_params(p, 2, 0);
	for (int i = 0; i < 2; i++)
		p[i].max_paths = 6;
	net n;
	net_init(&n, &p[0], &p[1]);
	n.policy = plane_policy;
	plane1_down = 0;
	size_t len = 4 << 20;
	uint8_t *src = post_write(&n, len, 8, 0);
	net_run_until(&n, NULL, NULL, 6000);
	plane1_down = 1;
	for (int i = 0; i < 2; i++)
		assert_int_equal(mrp_conn_plane_event(n.c[i], 1, MRP_PLANE_DOWN, n.now), 0);
	unsigned opened;
	assert_int_equal(paths_in_service(n.c[0], 0, &opened), 3);
	assert_int_equal(opened, 5);
	write_completes(&n, src, len);
	assert_int_equal(paths_in_service(n.c[0], 0, &opened), 3);
	assert_int_equal(opened, 5);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* A connection paced far below its planes' links takes a plane per packet
 * (the plane with the least in flight, then the one it used least
 * recently): a burst of burst_pkts packets on one path is what leaves back
 * to back, not packets a pacing gap apart (burst_over()). Kept on one path,
 * 1,024 incast senders each put four packets in a row on one of two 25
 * Gbit/s planes, ~650 us apart, and one plane's queue stood full while the
 * other's was nearly empty (bench/README.md). A at 200 Mbit/s over two 100
 * Gbit/s planes: its data packets alternate planes, on one plane in a row
 * at most twice (four in a row before). */
static int alt_last_plane = -1, alt_run, alt_max_run;
static uint64_t alt_data[2];

static int alternate_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			    uint64_t *delay, int *ce)
{
	if (from == 0 && ti->is_data) {
		alt_data[ti->plane & 1]++;
		alt_run = (int)ti->plane == alt_last_plane ? alt_run + 1 : 1;
		alt_last_plane = ti->plane;
		if (alt_run > alt_max_run)
			alt_max_run = alt_run;
	}
	return default_policy(n, from, ti, pkt, delay, ce);
}

static void test_spaced_packets_take_planes_in_turn(void **state)
{
	(void)state;
	net n;
	net_init_2planes_paced(&n, alternate_policy, 200000000ull, 100000000000ull);
	alt_last_plane = -1;
	alt_run = alt_max_run = 0;
	alt_data[0] = alt_data[1] = 0;
	size_t len = 256 << 10;
	uint8_t *src = post_write(&n, len, 12, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_true(alt_data[0] + alt_data[1] >= len / MRP_MTU_DEFAULT);
	assert_true(alt_max_run <= 2);
	assert_true(alt_data[0] <= alt_data[1] + 2 && alt_data[1] <= alt_data[0] + 2);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* SPEC 6.4, the tail: plane 1 ten times as far as plane 0. A's data
 * packets (first transmissions and retransmissions alike) by plane. */
static uint64_t far_data[2];

static int far_plane_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			    uint64_t *delay, int *ce)
{
	int ok = default_policy(n, from, ti, pkt, delay, ce);
	*delay = (ti->plane == 1 ? 50000 : 5000) + (uint64_t)ti->path_id * 100;
	if (from == 0 && ti->is_data)
		far_data[ti->plane & 1]++;
	return ok;
}

/* Posts a WRITE of len bytes, runs until it completes; returns the time it
 * took. */
static uint64_t far_write(net *n, size_t len, uint32_t seed)
{
	far_data[0] = far_data[1] = 0;
	uint64_t t0 = n->now;
	uint8_t *src = post_write(n, len, seed, n->now);
	cqlog *log = calloc(2, sizeof(cqlog));
	assert_non_null(log);
	want w = { log, 0, 1 };
	assert_true(net_run_until(n, have_cqes, &w, n->now + 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n->mr[1].base, src, len);
	free(log);
	free(src);
	return n->now - t0;
}

/*
 * Earliest completion first (SPEC 6.4): two planes of 10 Gbit/s, plane 1's
 * round trip 100 us against plane 0's 10 us. Once both have RTT samples, a
 * 32 KiB message goes on plane 0 alone and completes in 20 us (105 us
 * without the rule, half its packets on plane 1); a 4 MiB transfer uses
 * both planes, but not plane 1 at its end: what is left there goes on plane
 * 0, which delivers it before a packet on plane 1 would arrive.
 */
static void test_tail_off_far_plane(void **state)
{
	(void)state;
	/* two 10 Gbit/s links: a bulk transfer needs both */
	net n;
	net_init_2planes_paced(&n, far_plane_policy, 20000000000ull, 10000000000ull);
	/* both planes measured (the last ACKs of plane 1 come after the
	 * transfer completed on plane 0) */
	far_write(&n, 1 << 20, 21);
	assert_true(far_data[0] > 0 && far_data[1] > 0);
	net_run_until(&n, NULL, NULL, n.now + 500000);

	uint64_t t = far_write(&n, 32 << 10, 22);
	assert_int_equal(far_data[1], 0);
	assert_true(far_data[0] >= 8);
	assert_true(t < 50000);

	t = far_write(&n, 4 << 20, 23);
	/* both planes carry the bulk */
	assert_true(far_data[1] * 3 >= far_data[0] + far_data[1]);
	/* A schedule that keeps plane 1 busy to the end completes a far round
	 * trip after both links have sent every packet (here at least its
	 * payload and header: 1,024 x 4,168 bytes at 20 Gbit/s, 1,707 us);
	 * 100 us on: 1,807 us (the engine without this rule: 1,827). Moved
	 * to plane 0, the last 100 KB arrive sooner (1,781). */
	uint64_t both = 1024ull * (MRP_MTU_DEFAULT + MRP_DATA_HDR_LEN) * 8 / 20; /* ns at 20 Gbit/s */
	assert_true(t + 20000 < both + 100000);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* ---- a peer's announced addresses (SPEC 9.5) ---------------------------------- */

/* A's plane 1 goes to an address B only announced. victim: that address is
 * another host's, which answers nothing (A's packets there are counted and
 * dropped); forge: B, which cannot see them, answers each of A's PROBEs
 * there with PROBE_ACKs on plane 0, guessing the sequence number. */
static struct {
	int victim, forge;
	uint64_t data, probes, other, forged;
	uint64_t probes_after; /* PROBEs to it from after_ns on */
	uint64_t after_ns;
	uint64_t first_data_ns, first_ack_ns; /* plane 1: A's first data, B's first PROBE_ACK to A */
	mrp_hdr b_hdr; /* a header B sent A, to copy */
	int have_b_hdr;
} ann;

static void forge_probe_acks(net *n, const uint8_t *pkt, size_t len)
{
	mrp_pkt pr;
	if (!ann.have_b_hdr || mrp_pkt_decode(&pr, pkt, len) != (ssize_t)len)
		return;
	/* what a guesser who does not see the PROBE would try: the first
	 * sequence numbers, and random ones (the test sees the PROBE: only
	 * its path id, generation and timestamp are copied, which are easy to
	 * guess) */
	uint32_t guesses[20];
	for (unsigned g = 0; g < 16; g++)
		guesses[g] = g + 1;
	for (unsigned g = 16; g < 20; g++)
		guesses[g] = (uint32_t)xorshift(&n->prng);
	for (unsigned g = 0; g < 20; g++) {
		mrp_pkt k;
		memset(&k, 0, sizeof(k));
		k.hdr = ann.b_hdr;
		k.hdr.opcode = MRP_OP_PROBE_ACK;
		k.hdr.flags = 0;
		k.hdr.psn = 0;
		k.u.probe_ack.probed_path_id = pr.hdr.path_id;
		k.u.probe_ack.probed_path_gen = pr.hdr.path_gen;
		k.u.probe_ack.probe_seq = guesses[g];
		k.u.probe_ack.ts_echo_ns = pr.u.probe.ts_ns;
		wpkt *w = net_slot(n);
		assert_non_null(w);
		ssize_t l = mrp_pkt_encode(w->data, sizeof(w->data), &k);
		assert_true(l > 0);
		w->len = (size_t)l;
		w->at = n->now + 5000;
		w->seq = n->seq++;
		w->to = 0;
		w->plane = 0;
		w->ce = 0;
		ann.forged++;
	}
}

static int announced_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			    uint64_t *delay, int *ce)
{
	if (from == 1) {
		mrp_hdr h;
		if (mrp_hdr_decode(&h, pkt, MRP_HDR_LEN) == MRP_HDR_LEN) {
			ann.b_hdr = h;
			ann.have_b_hdr = 1;
		}
		if (pkt[1] == MRP_OP_PROBE_ACK && ti->plane == 1 && !ann.first_ack_ns)
			ann.first_ack_ns = n->now;
	}
	if (from == 0 && ti->plane == 1) {
		if (ti->is_data) {
			ann.data++;
			if (!ann.first_data_ns)
				ann.first_data_ns = n->now;
		} else if (pkt[1] == MRP_OP_PROBE) {
			ann.probes++;
			if (ann.after_ns && n->now >= ann.after_ns)
				ann.probes_after++;
		} else {
			ann.other++;
		}
		if (ann.victim) {
			if (ann.forge && pkt[1] == MRP_OP_PROBE)
				forge_probe_acks(n, pkt, MRP_PROBE_LEN);
			return 0;
		}
	}
	return default_policy(n, from, ti, pkt, delay, ce);
}

static void announced_run(int victim, int forge, net *n, uint8_t **src, size_t len)
{
	memset(&ann, 0, sizeof(ann));
	ann.victim = victim;
	ann.forge = forge;
	mrp_conn_params p[2];
	pair_params(p, 2, 1000000); /* idle probes every 1 ms */
	p[0].unproven_planes = 2;   /* A: B's plane-1 address was only announced */
	net_init(n, &p[0], &p[1]);
	n->policy = announced_policy;
	mrp_conn_stats st;
	mrp_conn_get_stats(n->c[0], &st);
	assert_int_equal(st.planes_unproven, 2);
	*src = post_write(n, len, 21, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(n, have_cqes, &w, 2000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n->mr[1].base, *src, len);
}

/* Another host's address announced for plane 1: A sends it no data and no
 * ACKs, only PROBEs, fewer and fewer; forged answers that guess the PROBEs'
 * sequence numbers prove nothing; the transfer runs on plane 0. */
static void test_announced_victim(void **state)
{
	(void)state;
	net n;
	uint8_t *src;
	announced_run(1, 1, &n, &src, 4 << 20);
	assert_int_equal(ann.data, 0);
	assert_int_equal(ann.other, 0);
	assert_true(ann.probes > 0);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.planes_unproven, 2);
	assert_int_equal(st.planes_proven, 0);
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], i, &pi) == 0 && pi.plane == 1)
			assert_int_not_equal(pi.state, MRP_PATH_ACTIVE);
	}
	/* An idle connection that keeps probing: the probes to the address
	 * that never answers thin out (their waits double). Counted over
	 * 100 ms and over the 100 ms that follow 300 ms later. */
	uint64_t t0 = n.now, p0 = ann.probes;
	net_run_until(&n, NULL, NULL, t0 + 100000000ull);
	uint64_t first = ann.probes - p0;
	net_run_until(&n, NULL, NULL, t0 + 400000000ull);
	p0 = ann.probes;
	net_run_until(&n, NULL, NULL, t0 + 500000000ull);
	uint64_t later = ann.probes - p0;
	print_message("announced victim: %llu PROBEs during the transfer, %llu in the next 100 ms, "
		      "%llu in 100 ms from 400 ms; %llu forged answers\n",
		      (unsigned long long)(ann.probes - first - later), (unsigned long long)first,
		      (unsigned long long)later, (unsigned long long)ann.forged);
	assert_true(later < first || later <= 2);
	/* (every PROBE was answered by 20 forgeries, but those sent before
	 * B had sent anything whose header they could copy) */
	assert_true(ann.forged > 0 && ann.forged >= 20 * (ann.probes - 2));
	assert_int_equal(ann.data, 0);
	assert_int_equal(ann.other, 0);
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.planes_proven, 0);
	assert_int_equal(st.planes_unproven, 2);
	assert_true(st.drops_stale >= ann.forged);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* The peer's own address announced for plane 1: its PROBE's answer proves
 * it within a round trip, then plane 1 carries its share; no data went
 * there before that answer came back. */
static void test_announced_proven(void **state)
{
	(void)state;
	net n;
	uint8_t *src;
	announced_run(0, 0, &n, &src, 4 << 20);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.planes_unproven, 0);
	assert_int_equal(st.planes_proven, 1);
	assert_true(ann.first_ack_ns > 0);
	assert_true(ann.first_data_ns > ann.first_ack_ns);
	uint64_t tx[2] = { 0, 0 };
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[0], i, &pi) == 0 && pi.plane < 2)
			tx[pi.plane] += pi.tx_pkts;
	}
	/* (plane 1 waited one round trip of 1,024 packets in all) */
	assert_true(tx[1] > (tx[0] + tx[1]) / 4);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* A graceful close finishes the work already posted (SPEC 11.2): the
 * writes complete successfully and land; new work is refused; the receives
 * nothing matched are flushed, exactly once, in order; both ends close. */
static void test_close_graceful(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[3][4096], dst[4096];
	mrp_conn_post_recv(n.c[1], 0, 500, dst, sizeof(dst), 0);
	mrp_conn_post_recv(n.c[1], 0, 501, dst, sizeof(dst), 0);
	for (int i = 0; i < 3; i++) {
		fill_pattern(src[i], sizeof(src[i]), (uint32_t)i + 77);
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = MRP_WR_WRITE, .local = src[i],
			      .len = sizeof(src[i]), .remote_addr = b_addr(&n, (uint64_t)i * 4096),
			      .rkey = n.mr[1].rkey };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	mrp_conn_close(n.c[0], 0, 0);
	mrp_wr wr = { .wr_id = 9, .opcode = MRP_WR_WRITE, .local = src[0], .len = 1,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), MRP_ERR_STATE);
	net_run_until(&n, NULL, NULL, 100000000ull);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[0].n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(log[0].e[i].wr_id, i);
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
		assert_memory_equal(n.mr[1].base + i * 4096, src[i], 4096);
	}
	assert_int_equal(log[1].n, 2);
	assert_int_equal(log[1].e[0].wr_id, 500);
	assert_int_equal(log[1].e[0].status, MRP_WC_FLUSHED);
	assert_int_equal(log[1].e[1].wr_id, 501);
	assert_int_equal(log[1].e[1].status, MRP_WC_FLUSHED);
	assert_true(mrp_conn_is_closed(n.c[0]));
	assert_true(mrp_conn_is_closed(n.c[1]));
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* An abortive close flushes everything outstanding at once with FLUSHED and
 * sends RESET: the peer's outstanding work completes "reset by peer" and
 * its receives are flushed. */
static void test_close_abort(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[4096], dst[4096];
	mrp_conn_post_recv(n.c[1], 0, 500, dst, sizeof(dst), 0);
	mrp_wr back = { .wr_id = 70, .opcode = MRP_WR_SEND, .local = src, .len = sizeof(src) };
	assert_int_equal(mrp_conn_post_send(n.c[1], &back, 0), 0); /* A posted no receive */
	for (int i = 0; i < 3; i++) {
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = MRP_WR_WRITE, .local = src,
			      .len = sizeof(src), .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	mrp_conn_close(n.c[0], 1, 0);
	net_run_until(&n, NULL, NULL, 100000000ull);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[0].n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(log[0].e[i].wr_id, i);
		assert_int_equal(log[0].e[i].status, MRP_WC_FLUSHED);
	}
	assert_int_equal(log[1].n, 2);
	int saw_reset = 0, saw_flushed = 0;
	for (int i = 0; i < 2; i++) {
		saw_reset |= log[1].e[i].wr_id == 70 && log[1].e[i].status == MRP_WC_RESET;
		saw_flushed |= log[1].e[i].wr_id == 500 && log[1].e[i].status == MRP_WC_FLUSHED;
	}
	assert_true(saw_reset && saw_flushed);
	assert_true(mrp_conn_is_closed(n.c[0]));
	assert_true(mrp_conn_is_closed(n.c[1]));
	net_free(&n);
}

/* A peer that goes silent for good (it crashed: every packet to it and from
 * it is lost): the outstanding work fails (RETRY_EXC, the rest FLUSHED)
 * within peer_timeout_ns instead of being retried forever. */
static int silent;
static int a_reset_reason = -1; /* the reason of the last RESET A sent */
static int silent_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			 uint64_t *delay, int *ce)
{
	mrp_pkt k;
	if (from == 0 && pkt[1] == MRP_OP_RESET && mrp_pkt_decode(&k, pkt, MRP_CLOSE_LEN) > 0)
		a_reset_reason = k.u.close.reason;
	if (silent)
		return 0;
	return default_policy(n, from, ti, pkt, delay, ce);
}

static void test_peer_silent_fails(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.policy = silent_policy;
	silent = 0;
	static uint8_t src[1 << 20];
	for (int i = 0; i < 4; i++) {
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = MRP_WR_WRITE, .stream = (uint16_t)(i % 2),
			      .local = src, .len = sizeof(src), .remote_addr = b_addr(&n, 0),
			      .rkey = n.mr[1].rkey };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	net_run_until(&n, NULL, NULL, 20000); /* 20 us: under way */
	silent = 1;
	uint64_t t_silent = n.now;
	cqlog log[2] = { 0 };
	want w = { log, 0, 4 };
	assert_true(net_run_until(&n, have_cqes, &w, t_silent + 10000000000ull));
	assert_true(n.now <= t_silent + 2000000000ull + 200000000ull); /* within the timeout */
	int retry_exc = 0;
	for (int i = 0; i < 4; i++) {
		assert_true(log[0].e[i].status == MRP_WC_RETRY_EXC ||
			    log[0].e[i].status == MRP_WC_FLUSHED);
		retry_exc += log[0].e[i].status == MRP_WC_RETRY_EXC;
	}
	assert_true(retry_exc >= 1);
	a_reset_reason = -1;
	net_run_until(&n, NULL, NULL, n.now + 1000000); /* its RESET goes out */
	assert_true(mrp_conn_is_closed(n.c[0]));
	assert_int_equal(a_reset_reason, MRP_CLOSE_RETRY_EXCEEDED); /* SPEC 8.1, 11.4 */
	/* the engine failed it, and says why; the peer did not fail */
	assert_int_equal(mrp_conn_failure(n.c[0]), MRP_CLOSE_RETRY_EXCEEDED);
	assert_int_equal(mrp_conn_failure(n.c[1]), -1);
	net_free(&n);
}

/* An idle connection whose peer vanished: its keep-alive probes go
 * unanswered, and after twice peer_timeout_ns it is reset with
 * RETRY_EXCEEDED (SPEC 8.1) instead of probing a dead peer for ever. */
static void test_idle_peer_silent_reset(void **state)
{
	(void)state;
	net n;
	mrp_conn_params d[2];
	pair_params(d, 1, 0);
	d[0].probe_idle_ns = 100000000; /* keep-alive probes every 100 ms */
	net_init(&n, &d[0], &d[1]);
	n.policy = silent_policy;
	silent = 1;
	a_reset_reason = -1;
	uint64_t t0 = n.now;
	net_run_until(&n, NULL, NULL, t0 + 3900000000ull);
	assert_false(mrp_conn_is_closed(n.c[0])); /* not before twice the 2 s */
	assert_int_equal(mrp_conn_failure(n.c[0]), -1);
	net_run_until(&n, NULL, NULL, t0 + 5000000000ull);
	assert_true(mrp_conn_is_closed(n.c[0]));
	assert_int_equal(a_reset_reason, MRP_CLOSE_RETRY_EXCEEDED);
	assert_int_equal(mrp_conn_failure(n.c[0]), MRP_CLOSE_RETRY_EXCEEDED);
	net_free(&n);
}

/* Data lost for 30 ms while the paths still answer probes (a peer whose
 * receive path is stuck, a burst of drops): every request completes with
 * success afterwards. Retransmissions hop to other paths with fresh, short
 * timers, and probes bring suspect paths back, so retry_max timeouts of one
 * packet pass within a few milliseconds; the request may fail only once
 * retry_timeout_ns has passed as well. With the count alone
 * (retry_timeout_ns = 0) the same 30 ms fail them all: the counter-proof
 * below shows the test can fail. */
static int data_silent_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			      uint64_t *delay, int *ce)
{
	if (silent && from == 0 && ti->is_data)
		return 0;
	return default_policy(n, from, ti, pkt, delay, ce);
}

static int pause_run(uint64_t retry_timeout_ns, int *statuses)
{
	mrp_conn_params d[2];
	pair_params(d, 3, 1000000000ull); /* 12 paths, probing as the daemon does */
	for (int i = 0; i < 2; i++)
		d[i].retry_timeout_ns = retry_timeout_ns;
	net n;
	net_init(&n, &d[0], &d[1]);
	n.policy = data_silent_policy;
	silent = 0;
	static uint8_t src[4096];
	for (int i = 0; i < 4; i++) {
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = MRP_WR_WRITE, .stream = (uint16_t)i,
			      .local = src, .len = sizeof(src), .remote_addr = b_addr(&n, 0),
			      .rkey = n.mr[1].rkey };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	silent = 1;
	net_run_until(&n, NULL, NULL, n.now + 30000000ull);
	silent = 0;
	cqlog log[2] = { 0 };
	want w = { log, 0, 4 };
	assert_true(net_run_until(&n, have_cqes, &w, n.now + 5000000000ull));
	int ok = 0;
	for (int i = 0; i < 4; i++) {
		statuses[i] = log[0].e[i].status;
		ok += log[0].e[i].status == MRP_WC_SUCCESS;
	}
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
	return ok;
}

static void test_peer_pause_survives(void **state)
{
	(void)state;
	int st[4];
	assert_int_equal(pause_run(500000000ull, st), 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(st[i], MRP_WC_SUCCESS);
	/* The counter-proof: the count alone gives up during the pause. */
	assert_int_equal(pause_run(0, st), 0);
}

/* An operator's ping: a PROBE on one active path on demand, answered with
 * the path's RTT (5 us each way in this network, plus 300 ns per path id of
 * the sender of each packet);
 * a second one while the first is out, a closed slot and an id beyond
 * max_paths are refused. */
static void test_path_probe(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[4096];
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	net_run_until(&n, NULL, NULL, n.now + 1000000ull); /* every path confirmed */
	mrp_path_info pi;
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &pi), 0);
	assert_int_equal(pi.state, MRP_PATH_ACTIVE);
	uint64_t before = pi.probes_answered;
	assert_int_equal(mrp_conn_path_probe(n.c[0], 2, n.now), 0);
	assert_int_equal(mrp_conn_path_probe(n.c[0], 2, n.now), MRP_ERR_STATE);
	assert_int_equal(mrp_conn_path_probe(n.c[0], 60, n.now), MRP_ERR_NOENT);
	assert_int_equal(mrp_conn_path_probe(n.c[0], MRP_MAX_PATHS, n.now), MRP_ERR_RANGE);
	net_run_until(&n, NULL, NULL, n.now + 1000000ull);
	assert_int_equal(mrp_conn_path_info(n.c[0], 2, &pi), 0);
	assert_int_equal(pi.probes_answered, before + 1);
	/* out on path 2 (5,600 ns), back on one of B's 4 paths (5,000-5,900) */
	assert_true(pi.probe_rtt_ns >= 10600 && pi.probe_rtt_ns <= 11500);
	assert_int_equal(pi.state, MRP_PATH_ACTIVE);
	assert_int_equal(mrp_conn_path_probe(n.c[0], 2, n.now), 0); /* again, once answered */
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* Many streams: 1,024 streams each with one SEND, all complete. */
static void test_many_streams(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	enum { NS = 1024 };
	static uint8_t src[NS][64], dst[NS][64];
	for (int i = 0; i < NS; i++) {
		fill_pattern(src[i], 64, (uint32_t)i + 1000);
		assert_int_equal(mrp_conn_post_recv(n.c[1], (uint16_t)i, (uint64_t)i, dst[i], 64, 0), 0);
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = MRP_WR_SEND, .stream = (uint16_t)i,
			      .local = src[i], .len = 64 };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	}
	cqlog *log = calloc(2, sizeof(cqlog));
	want w = { log, 1, NS };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	for (int i = 0; i < NS; i++)
		assert_memory_equal(dst[i], src[i], 64);
	mrp_wr wr = { .opcode = MRP_WR_SEND, .stream = NS, .local = src[0], .len = 1 };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, n.now), MRP_ERR_INVAL);
	free(log);
	net_free(&n);
}

/* Packets with a wrong token or for another connection are dropped and
 * counted, and change nothing. */
static void test_token_checked(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	mrp_pkt p;
	memset(&p, 0, sizeof(p));
	p.hdr.version = 1;
	p.hdr.opcode = MRP_OP_ACK;
	p.hdr.dst_conn_id = 100;
	p.hdr.src_conn_id = 101;
	p.hdr.token = 0x9999;
	assert_int_equal(mrp_conn_read_pkt(n.c[0], &p, 0, 0, 0), MRP_ERR_TOKEN);
	p.hdr.dst_conn_id = 7;
	assert_int_equal(mrp_conn_read_pkt(n.c[0], &p, 0, 0, 0), MRP_ERR_NOCONN);
	/* the right token from the wrong peer connection */
	p.hdr.dst_conn_id = 100;
	p.hdr.token = 0x1111;
	p.hdr.src_conn_id = 555;
	assert_int_equal(mrp_conn_read_pkt(n.c[0], &p, 0, 0, 0), MRP_ERR_NOCONN);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.drops_token, 1);
	assert_int_equal(st.drops_noconn, 1);
	assert_int_equal(st.acks_rcvd, 0);
	net_free(&n);
}

/* SPEC 13.2 step 3: a packet without the connection's token is no sign of
 * life. A sends into a black hole while forged NAK UNKNOWN_CONNs (token 0, a
 * wrong token_echo) and ACKs with a wrong token reach it every 100 ms: they
 * are dropped as TOKEN and do not hold off the peer timeout, so the WRITE
 * still fails within the timeout (plus the time it was first sent). */
static void test_tokenless_no_liveness(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.loss_pct = 100; /* every packet, both ways */
	static uint8_t src[1000];
	mrp_wr wr = { .wr_id = 5, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	mrp_pkt nak, ack;
	memset(&nak, 0, sizeof(nak));
	nak.hdr.version = 1;
	nak.hdr.opcode = MRP_OP_NAK;
	nak.hdr.dst_conn_id = 100;
	nak.hdr.src_conn_id = 101;
	nak.u.nak.reason = MRP_NAK_UNKNOWN_CONN;
	nak.u.nak.token_echo = 0x7777; /* not A's peer token 0x1112 */
	ack = nak;
	ack.hdr.opcode = MRP_OP_ACK;
	ack.hdr.token = 0x9999;
	mrp_conn_params d;
	mrp_conn_params_default(&d);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	unsigned forged = 0;
	for (uint64_t t = 100000000ull; t <= 20000000000ull && log[0].n == 0;
	     t += 100000000ull) {
		net_run_until(&n, have_cqes, &w, t);
		if (log[0].n)
			break;
		assert_int_equal(mrp_conn_read_pkt(n.c[0], &nak, 0, 0, n.now), MRP_ERR_TOKEN);
		assert_int_equal(mrp_conn_read_pkt(n.c[0], &ack, 0, 0, n.now), MRP_ERR_TOKEN);
		forged += 2;
	}
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].wr_id, 5);
	assert_int_not_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	/* the peer timeout from the last packet heard (none: time 0), one
	 * injection period of lateness at most */
	assert_true(n.now <= d.peer_timeout_ns + 100000000ull);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.drops_token, forged);
	net_free(&n);
}

static void test_params_rejected(void **state)
{
	(void)state;
	mrp_conn_params p;
	mrp_conn_params_default(&p);
	uint64_t s = 1;
	mrp_rng rng = { rng_next, &s };
	region r = { 0 };
	mrp_mr_ops mr = { mr_resolve, &r };
	mrp_conn *c = NULL;
	assert_int_equal(mrp_conn_new(&c, &p, &tmem, &rng, &mr, 0), MRP_ERR_INVAL); /* ids 0 */
	p.local_conn_id = p.peer_conn_id = 1;
	p.local_token = p.peer_token = 1;
	p.mtu = 100;
	assert_int_equal(mrp_conn_new(&c, &p, &tmem, &rng, &mr, 0), MRP_ERR_INVAL);
	p.mtu = 4096;
	p.cc_name = "nonesuch";
	assert_int_equal(mrp_conn_new(&c, &p, &tmem, &rng, &mr, 0), MRP_ERR_NOENT);
	p.cc_name = "baseline";
	assert_int_equal(mrp_conn_new(&c, &p, &tmem, &rng, &mr, 0), 0);
	mrp_conn_del(c);
}

/* ---- regressions found by fuzz-conn (tests/fuzz/fuzz_conn.c) -------------
 * These drive the two connections packet by packet: grab() takes the next
 * packet a side writes, give() hands it to the other side. */

typedef struct rpkt {
	size_t len;
	int plane;
	uint8_t data[PKTMAX];
} rpkt;

/* Side i's next packet into *p; returns its length (0: nothing to send). */
static size_t grab(net *n, int i, rpkt *p)
{
	mrp_tx_info ti;
	ssize_t len = mrp_conn_write_pkt(n->c[i], &ti, p->data, sizeof(p->data), n->now);
	assert_true(len >= 0);
	p->len = (size_t)len;
	p->plane = ti.plane;
	net_check(n);
	return p->len;
}

/* Hand a packet side i wrote to the other side. */
static void give(net *n, int i, const rpkt *p)
{
	mrp_pkt pkt;
	assert_int_equal(mrp_pkt_decode(&pkt, p->data, p->len), (ssize_t)p->len);
	mrp_conn_read_pkt(n->c[1 - i], &pkt, (unsigned)p->plane, 0, n->now);
	net_check(n);
}

/* Hand everything side i has to send now to the other side. */
static void give_all(net *n, int i)
{
	static rpkt p;
	while (grab(n, i, &p))
		give(n, i, &p);
}

/* A WRITE with a bad rkey, larger than the first window: the NAK fails it
 * while most of it still waits in the send queue. It completes once, with
 * REM_ACCESS, and the connection resets. (The failed message used to be
 * completed and freed by the NAK while still on the send queue, which the
 * teardown then walked: use after free.) */
static void test_nak_fails_queued_message(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	size_t len = 1 << 20;
	uint8_t *src = malloc(len);
	fill_pattern(src, len, 12);
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey + 1 };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	net_run_until(&n, NULL, NULL, n.now + 10000000ull);
	poll_all(&n, log);
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].wr_id, 1);
	assert_int_equal(log[0].e[0].status, MRP_WC_REM_ACCESS);
	assert_true(mrp_conn_is_closed(n.c[0]));
	assert_true(mrp_conn_is_closed(n.c[1]));
	for (uint64_t i = 0; i < n.mr[1].len; i++)
		if (n.mr[1].base[i])
			fail_msg("byte %llu written through a bad rkey", (unsigned long long)i);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* An RNR NAK for one copy of a segment while the tail-loss probe's copy of
 * it gets through: the message completes while it waits out the RNR and
 * must leave the RNR wait list. (It used to be freed while still on the
 * list, which the next deadline computation walked: use after free.) */
static void test_rnr_copy_completes(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[8192], dst[8192];
	static rpkt p[3];
	fill_pattern(src, sizeof(src), 13);
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_SEND, .local = src, .len = sizeof(src) };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	assert_true(grab(&n, 0, &p[0]) > 0); /* segment 0, PSN 0 */
	assert_true(grab(&n, 0, &p[1]) > 0); /* segment 1, PSN 1 */
	assert_int_equal(grab(&n, 0, &p[2]), 0);
	/* no ACK comes: the tail-loss probe sends segment 1 again (PSN 2) */
	n.now = mrp_conn_deadline(n.c[0]);
	mrp_conn_handle_timeout(n.c[0], n.now);
	assert_true(grab(&n, 0, &p[2]) > 0);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.tlp_count, 1);
	/* segment 1 reaches B before the application posts a receive: RNR */
	give(&n, 0, &p[1]);
	give_all(&n, 1);
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.naks_rcvd, 1);
	/* the receive is posted; segment 0 and the probe's copy arrive */
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 7, dst, sizeof(dst), n.now), 0);
	give(&n, 0, &p[0]);
	give(&n, 0, &p[2]);
	give_all(&n, 1);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].wr_id, 1);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[1].n, 1);
	assert_int_equal(log[1].e[0].wr_id, 7);
	assert_int_equal(log[1].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[1].e[0].byte_len, sizeof(src));
	assert_memory_equal(dst, src, sizeof(src));
	/* the RNR timer runs out with nothing left to resend */
	net_run_until(&n, NULL, NULL, n.now + 10000000ull);
	poll_all(&n, log);
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[1].n, 1);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* The tail-loss probe never resends a copy of a segment an ACK has already
 * covered. (It used to pick the newest packet in flight even when an ACK
 * for an earlier copy of the same segment had arrived, marking the acked
 * segment in flight again: the message's acked count went wrong.) */
static void test_tlp_skips_acked_copy(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[3 * 4096];
	static rpkt p[4];
	fill_pattern(src, sizeof(src), 14);
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	for (int i = 0; i < 3; i++)
		assert_true(grab(&n, 0, &p[i]) > 0); /* segment i, PSN i */
	n.now = mrp_conn_deadline(n.c[0]);
	mrp_conn_handle_timeout(n.c[0], n.now);
	assert_true(grab(&n, 0, &p[3]) > 0); /* the probe: segment 2 again, PSN 3 */
	static rpkt q;
	assert_int_equal(grab(&n, 0, &q), 0);
	/* segment 0 is lost; 1 and 2 arrive and are acked; the probe's copy is
	 * still on its way when the next probe is due (before A writes the
	 * retransmission of segment 0) */
	give(&n, 0, &p[1]);
	give(&n, 0, &p[2]);
	give_all(&n, 1);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.lost_pkts, 1);
	uint64_t t = mrp_conn_deadline(n.c[0]);
	assert_true(t > n.now && t != UINT64_MAX);
	n.now = t;
	mrp_conn_handle_timeout(n.c[0], n.now);
	assert_true(grab(&n, 0, &q) > 0);
	assert_int_equal(n.check_failures, 0);
	mrp_pkt pkt;
	assert_int_equal(mrp_pkt_decode(&pkt, q.data, q.len), (ssize_t)q.len);
	assert_int_equal(pkt.u.data.offset, 0); /* segment 0 goes again, not 2 */
	give(&n, 0, &q);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, sizeof(src));
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* In the tail -- nothing new left to send -- a path whose last ACK was lost
 * probes 1.125 largest RTTs (plus the ACK delay) after its newest packet
 * left, not 2 smoothed RTTs after the last ACK or at its timeout: over a
 * long round trip those come one round trip later. The probe (a copy of
 * the newest packet, ACK_REQ) brings the ACK back: the transfer completes
 * with no timeout. One path, a 4 ms round trip. */
static void test_tail_probe_after_lost_ack(void **state)
{
	(void)state;
	const uint64_t R = 4000000;
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	for (int i = 0; i < 2; i++) {
		p[i].initial_paths = 1;
		p[i].rto_init_ns = 50000000;
	}
	net n;
	net_init(&n, &p[0], &p[1]);
	static uint8_t src[8 * 4096];
	static rpkt d[8], a, q;
	fill_pattern(src, sizeof(src), 15);
	mrp_wr w1 = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = 4 * 4096,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	mrp_wr w2 = w1;
	w2.wr_id = 2;
	w2.local = src + 4 * 4096;
	w2.remote_addr = b_addr(&n, 4 * 4096);
	/* the first message takes a round trip of R: the path's RTT sample
	 * (from 1 ms: a timestamp of 0 is none) */
	const uint64_t t0 = 1000000;
	n.now = t0;
	assert_int_equal(mrp_conn_post_send(n.c[0], &w1, n.now), 0);
	for (int i = 0; i < 4; i++)
		assert_true(grab(&n, 0, &d[i]) > 0);
	assert_int_equal(grab(&n, 0, &q), 0);
	n.now = t0 + R / 2;
	for (int i = 0; i < 4; i++)
		give(&n, 0, &d[i]);
	n.now += p[1].ack_delay_ns;
	mrp_conn_handle_timeout(n.c[1], n.now);
	assert_true(grab(&n, 1, &a) > 0); /* B's ACK leaves ... */
	n.now = t0 + R + p[1].ack_delay_ns;
	give(&n, 1, &a); /* ... and arrives */
	mrp_path_info pi;
	assert_int_equal(mrp_conn_path_info(n.c[0], 0, &pi), 0);
	assert_true(pi.srtt_ns >= R && pi.inflight == 0);
	/* the second, the last data: it arrives, its ACK is lost */
	const uint64_t t1 = n.now;
	assert_int_equal(mrp_conn_post_send(n.c[0], &w2, n.now), 0);
	for (int i = 4; i < 8; i++)
		assert_true(grab(&n, 0, &d[i]) > 0);
	assert_int_equal(grab(&n, 0, &q), 0);
	n.now = t1 + R / 2;
	for (int i = 4; i < 8; i++)
		give(&n, 0, &d[i]);
	n.now += p[1].ack_delay_ns;
	mrp_conn_handle_timeout(n.c[1], n.now);
	assert_true(grab(&n, 1, &a) > 0); /* lost */
	/* A's next move: the tail probe, a round trip and an eighth after t1 */
	uint64_t t = mrp_conn_deadline(n.c[0]);
	print_message("tail probe due %.3f round trips after the last packet left\n",
		      (double)(t - t1) / (double)R);
	assert_true(t >= t1 + R);
	assert_true(t <= t1 + R + R / 8 + p[0].ack_delay_ns);
	n.now = t;
	mrp_conn_handle_timeout(n.c[0], n.now);
	assert_true(grab(&n, 0, &q) > 0);
	mrp_pkt pkt;
	assert_int_equal(mrp_pkt_decode(&pkt, q.data, q.len), (ssize_t)q.len);
	assert_true(pkt.hdr.flags & MRP_F_ACK_REQ);
	assert_int_equal(pkt.u.data.offset, 3 * 4096); /* the newest packet again */
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.tlp_count, 1);
	assert_int_equal(st.rto_count, 0);
	/* its ACK comes back: both messages complete, no timeout */
	n.now += R / 2;
	give(&n, 0, &q);
	n.now += R / 2;
	give_all(&n, 1);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[0].n, 2);
	assert_int_equal(log[0].e[1].wr_id, 2);
	assert_int_equal(log[0].e[1].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, sizeof(src));
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.rto_count, 0);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* The initial timeout set after creation, before anything was sent (the
 * daemon's acceptor learns how far its peer is only when the initiator's
 * first packet confirms the connection): a path's first packets are timed
 * from it. One path, a 10 ms round trip, rto_init 1 ms at creation and 30 ms
 * set then: the first message completes with no timeout and no tail-loss
 * probe (at 1 ms both would fire before the ACK comes back). */
static void test_set_rto_init(void **state)
{
	(void)state;
	const uint64_t R = 10000000;
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	for (int i = 0; i < 2; i++)
		p[i].initial_paths = 1;
	assert_true(p[0].rto_init_ns < R);
	net n;
	net_init(&n, &p[0], &p[1]);
	assert_int_equal(mrp_conn_set_rto_init(n.c[0], 0), MRP_ERR_INVAL);
	assert_int_equal(mrp_conn_set_rto_init(n.c[0], 3 * R), 0);
	static uint8_t src[4096];
	static rpkt d, a, q;
	fill_pattern(src, sizeof(src), 16);
	mrp_wr w = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		     .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	/* (from 1 ms: a timestamp of 0 is none) */
	const uint64_t t0 = 1000000;
	n.now = t0;
	assert_int_equal(mrp_conn_post_send(n.c[0], &w, n.now), 0);
	assert_true(grab(&n, 0, &d) > 0);
	assert_int_equal(grab(&n, 0, &q), 0);
	/* nothing is due before the ACK can be back */
	assert_true(mrp_conn_deadline(n.c[0]) > t0 + R + p[1].ack_delay_ns);
	n.now = t0 + R / 2;
	give(&n, 0, &d);
	n.now += p[1].ack_delay_ns;
	mrp_conn_handle_timeout(n.c[1], n.now);
	assert_true(grab(&n, 1, &a) > 0);
	n.now = t0 + R + p[1].ack_delay_ns;
	give(&n, 1, &a);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, sizeof(src));
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_int_equal(st.rto_count, 0);
	assert_int_equal(st.tlp_count, 0);
	assert_int_equal(st.retx_pkts, 0);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* Forge a SEND packet on stream 0 from A to B. */
static int forge_send(net *n, uint32_t psn, uint32_t msn, uint32_t recv_idx,
		      uint32_t msg_len, uint32_t offset)
{
	static uint8_t pay[4096], buf[PKTMAX];
	memset(pay, 0x77, sizeof(pay));
	uint32_t plen = msg_len - offset < 4096 ? msg_len - offset : 4096;
	mrp_pkt p;
	memset(&p, 0, sizeof(p));
	p.hdr.version = MRP_VERSION;
	p.hdr.opcode = MRP_OP_SEND;
	p.hdr.flags = (uint16_t)((offset == 0 ? MRP_F_FIRST : 0) |
				 (offset + plen == msg_len ? MRP_F_LAST : 0));
	p.hdr.path_gen = 1;
	p.hdr.dst_conn_id = 101;
	p.hdr.src_conn_id = 100;
	p.hdr.token = 0x1112;
	p.hdr.psn = psn;
	p.u.data.payload_len = (uint16_t)plen;
	p.u.data.msn = msn;
	p.u.data.offset = offset;
	p.u.data.msg_len = msg_len;
	p.u.data.recv_idx = recv_idx;
	p.u.data.payload = pay;
	ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &p);
	assert_true(len > 0);
	mrp_pkt d;
	assert_int_equal(mrp_pkt_decode(&d, buf, (size_t)len), len);
	return mrp_conn_read_pkt(n->c[1], &d, 0, 0, n->now);
}

/* Two messages that name the same posted receive: a protocol violation,
 * answered by a NAK and a reset. (The second one used to take the receive
 * as well; when it completed, the receive was freed under the first, whose
 * next packet was then placed through the freed receive.) */
static void test_two_messages_one_receive(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t dst[8192];
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 5, dst, sizeof(dst), 0), 0);
	/* MSN 1, receive 0: its second packet comes first and takes receive 0 */
	assert_int_equal(forge_send(&n, 0, 1, 0, 8192, 4096), 0);
	/* MSN 0 claims receive 0 as well */
	assert_int_equal(forge_send(&n, 1, 0, 0, 100, 0), 0);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[1], &st);
	assert_int_equal(st.naks_sent, 1);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[1].n, 1);
	assert_int_equal(log[1].e[0].wr_id, 5);
	assert_int_equal(log[1].e[0].status, MRP_WC_FLUSHED);
	/* the connection is gone: the rest of MSN 1 is refused */
	assert_int_equal(forge_send(&n, 2, 1, 0, 8192, 0), MRP_ERR_STATE);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* The same with the receive's rightful message next in its stream and the
 * completion queue already in use (the case completed on arrival): it must
 * still see that another message took the receive. */
static void test_two_messages_one_receive_in_order(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t dst[2][8192];
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 5, dst[0], sizeof(dst[0]), 0), 0);
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 6, dst[1], sizeof(dst[1]), 0), 0);
	assert_int_equal(forge_send(&n, 0, 0, 0, 100, 0), 0); /* MSN 0 completes */
	/* MSN 2, receive 1: its second packet comes first and takes receive 1 */
	assert_int_equal(forge_send(&n, 1, 2, 1, 8192, 4096), 0);
	/* MSN 1 claims receive 1 as well */
	assert_int_equal(forge_send(&n, 2, 1, 1, 100, 0), 0);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[1], &st);
	assert_int_equal(st.naks_sent, 1);
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[1].n, 2);
	assert_int_equal(log[1].e[0].wr_id, 5);
	assert_int_equal(log[1].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[1].e[0].byte_len, 100);
	assert_int_equal(log[1].e[1].wr_id, 6);
	assert_int_equal(log[1].e[1].status, MRP_WC_FLUSHED);
	assert_int_equal(forge_send(&n, 3, 2, 1, 8192, 0), MRP_ERR_STATE);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* ---- one-packet messages: completed on arrival, receive rings ----------- */

enum { SM_NS = 3, SM_NMSG = 600, SM_LEN = 64 };
static uint8_t sm_src[SM_NMSG][SM_LEN], sm_dst[SM_NMSG][SM_LEN];

/* Message i: stream i % SM_NS; every fifth a WRITE_IMM into B's region at
 * i * SM_LEN, else a SEND (every fifth of those with an immediate) into
 * receive 10000 + i. */
static void sm_post_recvs(net *n, int from, int to)
{
	for (int i = from; i < to; i++)
		assert_int_equal(mrp_conn_post_recv(n->c[1], (uint16_t)(i % SM_NS),
						    10000u + (uint64_t)i, sm_dst[i], SM_LEN,
						    n->now), 0);
}

static void sm_post_sends(net *n, int from, int to)
{
	for (int i = from; i < to; i++) {
		mrp_wr wr = { .wr_id = (uint64_t)i, .stream = (uint16_t)(i % SM_NS),
			      .local = sm_src[i], .len = SM_LEN, .imm = 0xab000000u + (uint32_t)i };
		if (i % 5 == 4) {
			wr.opcode = MRP_WR_WRITE_IMM;
			wr.remote_addr = b_addr(n, (uint64_t)i * SM_LEN);
			wr.rkey = n->mr[1].rkey;
		} else {
			wr.opcode = i % 5 == 3 ? MRP_WR_SEND_IMM : MRP_WR_SEND;
		}
		assert_int_equal(mrp_conn_post_send(n->c[0], &wr, n->now), 0);
	}
}

static void sm_run(net *n, cqlog log[2], int count)
{
	want w = { log, 1, count };
	assert_true(net_run_until(n, have_cqes, &w, n->now + 1000000000ull));
	w.side = 0;
	assert_true(net_run_until(n, have_cqes, &w, n->now + 1000000000ull));
}

/* Hundreds of one-packet SENDs, SEND_IMMs and WRITE_IMMs on three streams,
 * over paths of unequal delay (packets overtake each other) with 5% loss:
 * most complete on arrival, the rest wait for earlier messages of their
 * stream. The receives are posted in batches so that a stream's receive
 * ring grows, empties (and is freed), wraps around and grows while wrapped.
 * Every receive completes exactly once, in posting order per stream, with
 * the right message in it. */
static void test_small_messages(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	n.loss_pct = 5;
	for (int i = 0; i < SM_NMSG; i++)
		fill_pattern(sm_src[i], SM_LEN, 500u + (uint32_t)i);
	memset(sm_dst, 0, sizeof(sm_dst));
	static cqlog log[2];
	memset(log, 0, sizeof(log));
	sm_post_recvs(&n, 0, 300); /* 100 a stream: the ring grows to 128 */
	sm_post_sends(&n, 0, 300);
	sm_run(&n, log, 300);      /* ... and empties */
	sm_post_recvs(&n, 300, 400);
	sm_post_sends(&n, 300, 360);
	sm_run(&n, log, 360);
	sm_post_recvs(&n, 400, 600); /* wraps, then grows while wrapped */
	sm_post_sends(&n, 360, 600);
	sm_run(&n, log, 600);
	poll_all(&n, log);
	assert_int_equal(log[0].n, SM_NMSG);
	assert_int_equal(log[1].n, SM_NMSG);
	int last[SM_NS] = { -1, -1, -1 };
	static uint8_t seen[SM_NMSG];
	memset(seen, 0, sizeof(seen));
	for (int k = 0; k < SM_NMSG; k++) {
		const mrp_cqe *e = &log[1].e[k];
		assert_true(e->wr_id >= 10000 && e->wr_id < 10000 + SM_NMSG);
		int i = (int)(e->wr_id - 10000);
		assert_int_equal(seen[i], 0);
		seen[i] = 1;
		assert_int_equal(e->stream, i % SM_NS);
		assert_true(i > last[i % SM_NS]);
		last[i % SM_NS] = i;
		assert_int_equal(e->status, MRP_WC_SUCCESS);
		assert_int_equal(e->byte_len, SM_LEN);
		if (i % 5 == 4) {
			assert_int_equal(e->opcode, MRP_WC_RECV_WRITE_IMM);
			assert_memory_equal(n.mr[1].base + (size_t)i * SM_LEN, sm_src[i], SM_LEN);
		} else {
			assert_int_equal(e->opcode, MRP_WC_RECV);
			assert_memory_equal(sm_dst[i], sm_src[i], SM_LEN);
		}
		assert_int_equal(e->has_imm, i % 5 >= 3);
		if (i % 5 >= 3)
			assert_int_equal(e->imm, 0xab000000u + (uint32_t)i);
		assert_int_equal(log[0].e[k].status, MRP_WC_SUCCESS);
	}
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[0], &st);
	assert_true(st.retx_pkts > 0); /* the loss was repaired */
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* A one-packet WRITE_IMM with a wrong rkey, next in its stream: the receive
 * it names completes with REM_ACCESS and no bytes, the sender's with
 * REM_ACCESS, and nothing is written. */
static void test_small_write_imm_bad_rkey(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[100];
	memset(src, 0x3c, sizeof(src));
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 61, NULL, 0, 0), 0);
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 62, NULL, 0, 0), 0);
	mrp_wr wr = { .wr_id = 7, .opcode = MRP_WR_WRITE_IMM, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey, .imm = 1 };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	wr.wr_id = 8;
	wr.rkey = n.mr[1].rkey + 1;
	wr.remote_addr = b_addr(&n, 4096);
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 2 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	poll_all(&n, log);
	assert_int_equal(log[0].e[0].wr_id, 7);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[0].e[1].wr_id, 8);
	assert_int_equal(log[0].e[1].status, MRP_WC_REM_ACCESS);
	assert_int_equal(log[1].n, 2);
	assert_int_equal(log[1].e[0].wr_id, 61);
	assert_int_equal(log[1].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[1].e[0].byte_len, sizeof(src));
	assert_int_equal(log[1].e[1].wr_id, 62);
	assert_int_equal(log[1].e[1].status, MRP_WC_REM_ACCESS);
	assert_int_equal(log[1].e[1].byte_len, 0);
	assert_int_equal(log[1].e[1].opcode, MRP_WC_RECV_WRITE_IMM);
	assert_memory_equal(n.mr[1].base, src, sizeof(src));
	for (size_t i = 4096; i < 4096 + sizeof(src); i++)
		assert_int_equal(n.mr[1].base[i], 0);
	net_free(&n);
}

/* A one-packet SEND larger than the receive it names fails with LOC_LEN on
 * the receiver and REM_BOUNDS on the sender, after an earlier message of the
 * stream succeeded. */
static void test_small_send_too_long(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t src[200], dst[2][100];
	memset(src, 0x42, sizeof(src));
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 1, dst[0], sizeof(dst[0]), 0), 0);
	assert_int_equal(mrp_conn_post_recv(n.c[1], 0, 2, dst[1], sizeof(dst[1]), 0), 0);
	mrp_wr wr = { .wr_id = 11, .opcode = MRP_WR_SEND, .local = src, .len = 100 };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	wr.wr_id = 12;
	wr.len = 200;
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 2 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	poll_all(&n, log);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[0].e[1].wr_id, 12);
	assert_int_equal(log[0].e[1].status, MRP_WC_REM_BOUNDS);
	assert_int_equal(log[1].n, 2);
	assert_int_equal(log[1].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(log[1].e[1].wr_id, 2);
	assert_int_equal(log[1].e[1].status, MRP_WC_LOC_LEN);
	assert_memory_equal(dst[0], src, 100);
	for (size_t i = 0; i < sizeof(dst[1]); i++)
		assert_int_equal(dst[1][i], 0);
	net_free(&n);
}

/* Steering a path onto a plane that is down disables it and cancels the
 * probe it had scheduled. (The probe used to stay due on the disabled path,
 * which sends no probes: the deadline stayed in the past and the caller
 * would spin.) */
/* One transfer with a refused allocation: a WRITE and a SEND that is RNR
 * NAK'd first (its receive comes late), on 2 planes, with the sender using
 * 6 paths and the receiver starting with 1 (so its path array grows as
 * data arrives), 3 % loss. Returns the allocator calls made. Whatever the
 * refused call, no invariant breaks, nothing leaks (cmocka checks), each
 * posted work request completes exactly once, and a success means the
 * data arrived intact. */
static unsigned long alloc_fail_run(unsigned long fail_at, int *nsuccess)
{
	failer f = { 0, fail_at, 0 };
	const mrp_mem fmem = { f_alloc, t_free, &f };
	mrp_conn_params d[2];
	pair_params(d, 2, 0);
	d[0].initial_paths = 6;
	d[1].initial_paths = 1;
	net n;
	/* (a small network: tests run with MALLOC_PERTURB_, which writes
	 * over every freed byte, and this one is set up once per call) */
	int rv = net_init_mem(&n, &d[0], &d[1], &fmem, 1024, 1 << 17);
	if (rv != 0) {
		assert_int_equal(rv, MRP_ERR_NOMEM);
		assert_int_equal(f.refused, 1);
		net_free(&n);
		return f.calls;
	}
	n.loss_pct = 3;
	static uint8_t src[65536], msg[5000], dst[5000];
	fill_pattern(src, sizeof(src), 11);
	fill_pattern(msg, sizeof(msg), 12);
	memset(dst, 0, sizeof(dst));
	int posted = 0;
	int write_ok = 0, send_ok = 0;
	mrp_wr w1 = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = sizeof(src),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	rv = mrp_conn_post_send(n.c[0], &w1, 0);
	assert_true(rv == 0 || rv == MRP_ERR_NOMEM);
	posted += rv == 0;
	mrp_wr w2 = { .wr_id = 2, .opcode = MRP_WR_SEND, .stream = 1, .local = msg,
		      .len = sizeof(msg) };
	rv = mrp_conn_post_send(n.c[0], &w2, 0);
	assert_true(rv == 0 || rv == MRP_ERR_NOMEM);
	posted += rv == 0;
	net_run_until(&n, NULL, NULL, 300000ull);
	rv = mrp_conn_post_recv(n.c[1], 1, 7, dst, sizeof(dst), n.now);
	assert_true(rv == 0 || rv == MRP_ERR_NOMEM || rv == MRP_ERR_STATE);
	cqlog *log = calloc(2, sizeof(cqlog));
	assert_non_null(log);
	want w = { log, 0, posted };
	net_run_until(&n, have_cqes, &w, n.now + 3000000000ull);
	poll_all(&n, log);
	if (f.refused == 0 && rv == 0) {
		assert_int_equal(log[0].n, posted); /* a clean run completes everything */
		/* and used the NAK queue (the RNR NAK), the event queues and
		 * the receiver's path array growth the refusals hit */
		mrp_conn_stats st;
		mrp_conn_get_stats(n.c[1], &st);
		assert_true(st.naks_sent > 0);
		mrp_event ev;
		assert_int_equal(mrp_conn_poll_event(n.c[0], &ev), 1);
	}
	assert_true(log[0].n <= posted);
	for (int i = 0; i < log[0].n; i++) {
		for (int j = 0; j < i; j++)
			assert_true(log[0].e[j].wr_id != log[0].e[i].wr_id);
		if (log[0].e[i].status != MRP_WC_SUCCESS)
			continue;
		if (log[0].e[i].wr_id == 1) {
			assert_memory_equal(n.mr[1].base, src, sizeof(src));
			write_ok = 1;
		} else {
			assert_memory_equal(dst, msg, sizeof(msg));
			send_ok = 1;
		}
	}
	if (n.check_failures)
		fail_msg("refused call %lu: %s", fail_at, n.check_msg);
	assert_true(f.refused <= 1);
	*nsuccess = write_ok + send_ok;
	free(log);
	net_free(&n);
	return f.calls;
}

static void test_alloc_failures(void **state)
{
	(void)state;
	int ok = 0;
	unsigned long calls = alloc_fail_run(0, &ok);
	assert_int_equal(ok, 2);
	assert_true(calls > 10);
	/* every call of the clean run refused in turn */
	int all_ok = 0;
	for (unsigned long k = 1; k <= calls; k++) {
		alloc_fail_run(k, &ok);
		all_ok += ok == 2;
	}
	/* most single refusals are absorbed (a dropped packet is sent again) */
	print_message("%lu allocator calls; with one refused, both succeeded in %d runs\n",
		      calls, all_ok);
	assert_true(all_ok > 0);
}

static void test_steer_onto_down_plane(void **state)
{
	(void)state;
	mrp_conn_params p[2];
	pair_params(p, 2, 1000000);
	net n;
	net_init(&n, &p[0], &p[1]);
	/* idle for 1 ms: every path is due a probe */
	n.now = mrp_conn_deadline(n.c[0]);
	assert_int_equal(n.now, 1000000);
	mrp_conn_handle_timeout(n.c[0], n.now);
	assert_int_equal(mrp_conn_plane_event(n.c[0], 1, MRP_PLANE_DOWN, n.now), 0);
	assert_int_equal(mrp_conn_path_steer(n.c[0], 0, 0, 1, n.now), 0);
	mrp_path_info pi;
	assert_int_equal(mrp_conn_path_info(n.c[0], 0, &pi), 0);
	assert_int_equal(pi.plane, 1);
	assert_int_equal(pi.state, MRP_PATH_DISABLED);
	static rpkt q;
	while (grab(&n, 0, &q))
		;
	assert_true(mrp_conn_deadline(n.c[0]) > n.now);
	/* the plane comes back: the path probes and carries data again */
	assert_int_equal(mrp_conn_plane_event(n.c[0], 1, MRP_PLANE_UP, n.now), 0);
	net_run_until(&n, NULL, NULL, n.now + 1000000);
	assert_int_equal(mrp_conn_path_info(n.c[0], 0, &pi), 0);
	assert_int_equal(pi.state, MRP_PATH_ACTIVE);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* ---- HELD (SPEC 6.5) ------------------------------------------------------ */

static unsigned held_pkts, held_data_pkts;

static int count_held(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		      uint64_t *delay, int *ce)
{
	if (from == 0 && ti->is_data) {
		/* flags: bytes 2-3 of the common header, network order */
		uint16_t flags = (uint16_t)(pkt[2] << 8 | pkt[3]);

		held_data_pkts++;
		held_pkts += (flags & MRP_F_HELD) != 0;
	}
	return default_policy(n, from, ti, pkt, delay, ce);
}

/* One 4 MiB WRITE from A to B, whose allocator has capacity_bps; caps as
 * negotiated. Returns the share of A's data packets marked HELD, percent. */
static unsigned held_share(uint64_t capacity_bps, uint64_t caps)
{
	static mrp_rh_slot slots[4];
	mrp_rh rh;
	mrp_conn_params p[2];
	net n;
	size_t len = 4 << 20;
	uint8_t *src = malloc(len);

	assert_non_null(src);
	fill_pattern(src, len, 3);
	assert_int_equal(mrp_rh_init(&rh, slots, 4, capacity_bps, 0), 0);
	pair_params(p, 1, 0);
	p[0].caps = p[1].caps = caps;
	p[1].rh = &rh;
	net_init(&n, &p[0], &p[1]);
	n.policy = count_held;
	held_pkts = held_data_pkts = 0;
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 10000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	assert_true(held_data_pkts >= len / MRP_MTU_DEFAULT);
	net_free(&n);
	free(src);
	return held_pkts * 100 / held_data_pkts;
}

/* A sender whose queue is longer than the receiver's hint lets through says
 * HELD on (nearly) every packet; one that the hint does not limit (a hint
 * above what its window carries) says it on none but the first few, sent
 * before an RTT sample; without the capability,
 * never -- and the hint itself is neither sent nor honoured without
 * RATE_HINT (SPEC 6.4): the transfer still completes. */
static void test_held_marks_hint_bound_packets(void **state)
{
	const uint64_t both = MRP_CAP_RATE_HINT | MRP_CAP_HELD;

	(void)state;
	/* 1 Gbit/s for 4 MiB: ~34 ms, the hint binds from the first ACK */
	assert_true(held_share(1000000000ull, both) >= 90);
	/* 100 Tbit/s: the window limits it, once it has an RTT to turn the
	 * window into a rate; before the first sample only the hint paces the
	 * first packets (2 % of them here) */
	assert_true(held_share(100000000000000ull, both) <= 5);
	assert_int_equal(held_share(1000000000ull, MRP_CAP_RATE_HINT), 0);
	assert_int_equal(held_share(1000000000ull, 0), 0);
}

/* A 1 ms round trip (and the default policy's loss and marks). */
static int far_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		      uint64_t *delay, int *ce)
{
	int keep = default_policy(n, from, ti, pkt, delay, ce);
	*delay += 495000;
	return keep;
}

/*
 * Time of an 8 MiB WRITE from A to B, whose allocator hints hint_bps,
 * over a 1 ms round trip that loses 5 % of the packets at random, and A's
 * window (QWND) at each of its first 8 ms in qwnd[]; first, if
 * idle_first, A sends a 4 KiB WRITE every 200 us for 20 ms (0.16 Gbit/s:
 * far under the hint, by the application's choice), without loss.
 */
static uint64_t after_slow_app_at(uint64_t hint_bps, int idle_first, uint64_t *qwnd)
{
	static mrp_rh_slot slots[4];
	mrp_rh rh;
	mrp_conn_params p[2];
	net n;
	size_t len = 8 << 20;
	uint8_t *src = malloc(len);
	cqlog *log = calloc(2, sizeof(cqlog));

	assert_non_null(src);
	assert_non_null(log);
	fill_pattern(src, len, 5);
	assert_int_equal(mrp_rh_init(&rh, slots, 4, hint_bps, 0), 0);
	pair_params(p, 1, 0);
	p[1].rh = &rh;
	assert_int_equal(net_init_mem(&n, &p[0], &p[1], &tmem, MAXQ, 16 << 20), 0);
	n.policy = far_policy;
	int posted = 0;
	if (idle_first) {
		for (int k = 0; k < 100; k++) {
			mrp_wr wr = { .wr_id = (uint64_t)k, .opcode = MRP_WR_WRITE,
				      .local = src + (size_t)k * 4096, .len = 4096,
				      .remote_addr = b_addr(&n, (uint64_t)k * 4096),
				      .rkey = n.mr[1].rkey };
			assert_int_equal(mrp_conn_post_send(n.c[0], &wr, n.now), 0);
			posted++;
			net_run_until(&n, NULL, NULL, (uint64_t)(k + 1) * 200000);
		}
		want w = { log, 0, posted };
		assert_true(net_run_until(&n, have_cqes, &w, n.now + 100000000ull));
	}
	n.loss_pct = 5;
	uint64_t t0 = n.now;
	mrp_wr wr = { .wr_id = 1000, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, n.now), 0);
	want w = { log, 0, posted + 1 };
	for (int k = 0; k < 8; k++) {
		assert_false(net_run_until(&n, have_cqes, &w, t0 + (uint64_t)(k + 1) * 1000000));
		mrp_conn_stats st;
		mrp_conn_get_stats(n.c[0], &st);
		qwnd[k] = st.qwnd;
	}
	assert_true(net_run_until(&n, have_cqes, &w, t0 + 10000000000ull));
	uint64_t took = n.now - t0;
	for (int k = 0; k < log[0].n; k++)
		assert_int_equal(log[0].e[k].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
	free(src);
	free(log);
	return took;
}

static uint64_t after_slow_app(int idle_first, uint64_t *qwnd)
{
	return after_slow_app_at(10000000000ull, idle_first, qwnd);
}

/*
 * A connection that the application keeps far under the receiver's hint
 * is short of the hint by its own choice, not for want of the network: it
 * must not be taken as behind a hidden drop-tail bottleneck (cc.far_short,
 * "data waiting" in repath_round()) when it then has data to send. Taken
 * so, its losses are counted per plane and 3 in a round trip cut every
 * path, and a cut path is held there while it stays far short: the 8 MiB
 * WRITE on 5 % random loss after 20 ms of slow 4 KiB WRITEs kept a window
 * of 1.1-1.3 MB from its 3rd millisecond on, a quarter of what the hint's
 * 10 Gbit/s over the round trip asks (4.27 MB), where a new connection
 * reaches that by its 5th: random loss below loss_cut_pct cuts nothing.
 * (The drill on netns: a connection idle for 2 s with a hint, then loaded,
 * failed the bandwidth bar.) From the 5th millisecond on, the window must
 * be at least 0.9 of the new connection's, and the WRITE take at most 1.25
 * times as long.
 */
static void test_slow_app_not_far_short(void **state)
{
	(void)state;
	uint64_t qf[8], qa[8];
	uint64_t fresh = after_slow_app(0, qf), after = after_slow_app(1, qa);
	print_message("8 MiB at 5 %% loss: %.2f ms on a new connection, %.2f ms after the "
		      "slow application; window at 5-8 ms: %llu-%llu / %llu-%llu bytes\n",
		      (double)fresh / 1e6, (double)after / 1e6, (unsigned long long)qf[4],
		      (unsigned long long)qf[7], (unsigned long long)qa[4],
		      (unsigned long long)qa[7]);
	for (int k = 4; k < 8; k++)
		assert_true(qa[k] >= qf[k] / 10 * 9);
	assert_true(after <= fresh + fresh / 4);
}

/*
 * A connection held back by its pacing rate, not by its windows, keeps
 * every path's window full enough to grow: 8 MiB at 5 % random loss over a
 * 1 ms round trip, as above, at hints a few Mbit/s either side of 10 Gbit/s,
 * on a new connection and after the slow application. The scheduler gave
 * each packet to the path with the most room in bytes; a path that a loss
 * had cut then carried a few packets a round trip while the others had
 * hundreds of KB of room, never filled its window to regrow it, and found
 * its tail losses by a timeout (hints 9.990, 9.995 and 10.005 Gbit/s:
 * 3.2-3.6 MB of window at 6-8 ms, 4.27 at the others). Whether a loss cuts
 * a path early is the draw of the hint's pacing against the loss; what a
 * path gets after it must not be. At 6-8 ms every run's window must be at
 * least 0.95 of the largest any run had then.
 */
static void test_paced_paths_not_starved(void **state)
{
	static const uint64_t hints[] = { 9950000000ull,  9980000000ull,  9990000000ull,
					  9995000000ull,  10000000000ull, 10005000000ull,
					  10010000000ull, 10050000000ull };
	enum { NH = sizeof(hints) / sizeof(hints[0]) };
	uint64_t q[NH][2][8], top = 0;

	(void)state;
	for (unsigned h = 0; h < NH; h++)
		for (int idle = 0; idle < 2; idle++) {
			after_slow_app_at(hints[h], idle, q[h][idle]);
			for (int k = 5; k < 8; k++)
				if (q[h][idle][k] > top)
					top = q[h][idle][k];
		}
	for (unsigned h = 0; h < NH; h++)
		for (int idle = 0; idle < 2; idle++) {
			print_message("hint %.3f Gbit/s, %s: window at 6-8 ms %llu %llu %llu "
				      "bytes (largest %llu)\n",
				      (double)hints[h] / 1e9, idle ? "after the slow application" : "new",
				      (unsigned long long)q[h][idle][5],
				      (unsigned long long)q[h][idle][6],
				      (unsigned long long)q[h][idle][7], (unsigned long long)top);
			for (int k = 5; k < 8; k++)
				assert_true(q[h][idle][k] >= top / 100 * 95);
		}
}

/* Host delay: 1 packet in 64 crosses in 5 us, the others wait 1 ms (a
 * daemon's smoothed RTT far above its smallest, as on a loaded host). */
static int host_delay_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			     uint64_t *delay, int *ce)
{
	int keep = default_policy(n, from, ti, pkt, delay, ce);
	if (xorshift(&n->prng) % 64)
		*delay += 1000000;
	return keep;
}

/* A's window (QWND) at drain_ns of a long WRITE to B, whose allocator
 * hints 10 Gbit/s, over two planes with host_delay_policy, when plane 0 is
 * drained; *after: the largest window in the 2 ms after the drain, looked
 * at every 50 us; data verified when the WRITE ends. */
static uint64_t drained_window(uint64_t drain_ns, uint64_t *after)
{
	static mrp_rh_slot slots[4];
	mrp_rh rh;
	mrp_conn_params p[2];
	net n;
	size_t len = 16 << 20;
	uint8_t *src = malloc(len);
	cqlog *log = calloc(2, sizeof(cqlog));

	assert_non_null(src);
	assert_non_null(log);
	fill_pattern(src, len, 7);
	assert_int_equal(mrp_rh_init(&rh, slots, 4, 10000000000ull, 0), 0);
	pair_params(p, 2, 0);
	p[1].rh = &rh;
	assert_int_equal(net_init_mem(&n, &p[0], &p[1], &tmem, MAXQ, 32 << 20), 0);
	n.policy = host_delay_policy;
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	want w = { log, 0, 1 };
	mrp_conn_stats st;
	assert_false(net_run_until(&n, have_cqes, &w, drain_ns));
	mrp_conn_get_stats(n.c[0], &st);
	uint64_t before = st.qwnd, t0 = n.now;
	assert_int_equal(mrp_conn_plane_event(n.c[0], 0, MRP_PLANE_DRAIN, n.now), 0);
	*after = 0;
	for (uint64_t t = 50000; t <= 2000000; t += 50000) {
		assert_false(net_run_until(&n, have_cqes, &w, t0 + t));
		mrp_conn_get_stats(n.c[0], &st);
		if (st.qwnd > *after)
			*after = st.qwnd;
	}
	assert_true(net_run_until(&n, have_cqes, &w, n.now + 10000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
	free(src);
	free(log);
	return before;
}

/*
 * A connection far short of its hint (cc.far_short) for host delay, not
 * for the network -- its smoothed RTT far above its smallest, so the
 * hint's window is taken over twice the smallest and its window is what
 * additive increase grew -- keeps that window when a plane is drained:
 * the drained plane's paths leave theirs to the other plane's (set_state()).
 * Before, the other plane's paths kept their own half and regrew the
 * rest by additive increase alone (integration drill beside a CPU hog:
 * 0.6-2.3 s to carry the rate again, or never within the 3 s drill). In
 * the 2 ms after the drain, the window must come back to at least 0.9 of
 * what it was, drained at seven points of the WRITE. The largest window of
 * the 2 ms, not the window at their end: the host delay reorders packets
 * past the loss detection, and a plane's cut for those losses can land in
 * them (drained at 26 or 28 ms, this engine had 0.29 and 0.65 of its
 * window 2 ms after: the cut's doing, not the drain's; with the largest,
 * 1.15-1.48 at the seven points). Without the hand-over (set_state()
 * leaving fs_left alone), 0.76-0.89 at six of the seven (0.92 at 29 ms).
 */
static void test_drain_keeps_far_short_window(void **state)
{
	(void)state;
	for (uint64_t ms = 20; ms <= 38; ms += 3) {
		uint64_t after, before = drained_window(ms * 1000000, &after);
		print_message("drained at %llu ms: window %llu bytes before, at most %llu in the "
			      "2 ms after\n",
			      (unsigned long long)ms, (unsigned long long)before,
			      (unsigned long long)after);
		assert_true(after >= before / 10 * 9);
	}
}

/* ---- first-round-trip admission (SPEC 6.6) -------------------------------- */

/* What A sent before B sent anything (B answers only what it heard, so A
 * had heard nothing from B then), and the GRANT flags on the wire. */
static struct {
	int b_spoke;
	unsigned a_data_before, a_first_op, a_first_flags, a_grant_data;
	unsigned b_grants;
	uint32_t b_grant_mbps;
} adm;

static int adm_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		      uint64_t *delay, int *ce)
{
	uint16_t flags = (uint16_t)(pkt[2] << 8 | pkt[3]);

	if (from == 0) {
		if (!adm.a_first_op) {
			adm.a_first_op = pkt[1];
			adm.a_first_flags = flags;
		}
		if (ti->is_data && !adm.b_spoke)
			adm.a_data_before++;
		if (ti->is_data && (flags & MRP_F_GRANT))
			adm.a_grant_data++;
	} else {
		adm.b_spoke = 1;
		if (pkt[1] == MRP_OP_PROBE_ACK && (flags & MRP_F_GRANT)) {
			adm.b_grants++;
			adm.b_grant_mbps = (uint32_t)pkt[48] << 24 | (uint32_t)pkt[49] << 16 |
					   (uint32_t)pkt[50] << 8 | pkt[51];
		}
	}
	return default_policy(n, from, ti, pkt, delay, ce);
}

/* A with ADMIT and credit bytes of admission, B with b_caps and the
 * allocator rh, idle probes every probe_idle_ns, the admission policy. */
static void admit_net(net *n, mrp_rh *rh, uint64_t credit, uint64_t b_caps,
		      uint64_t probe_idle_ns)
{
	mrp_conn_params p[2];
	pair_params(p, 1, probe_idle_ns);
	p[0].caps = MRP_CAP_RATE_HINT | MRP_CAP_HELD | MRP_CAP_ADMIT;
	p[1].caps = b_caps;
	p[0].admit = 1;
	p[0].admit_credit = credit;
	p[1].rh = rh;
	net_init(n, &p[0], &p[1]);
	n->policy = adm_policy;
	memset(&adm, 0, sizeof(adm));
}

/* A 1 MiB WRITE from A to B (B's allocator: 100 Gbit/s, 4 connections),
 * A with ADMIT and credit bytes of admission, B with b_caps; with
 * probe_first, A probes every path (as a ping does) before it posts, and
 * idle paths are probed every second. Returns when the WRITE completed. */
static uint64_t admit_run_probed(uint64_t credit, uint64_t b_caps, int probe_first,
				 mrp_conn_stats st[2])
{
	static mrp_rh_slot slots[8];
	mrp_rh rh;
	net n;
	size_t len = 1 << 20;
	uint8_t *src = malloc(len);

	assert_non_null(src);
	fill_pattern(src, len, 11);
	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100000000000ull, 0), 0);
	rh.adm_conns = 4;
	admit_net(&n, &rh, credit, b_caps, probe_first ? 1000000000ull : 0);
	if (probe_first) {
		mrp_conn_params d;
		mrp_conn_params_default(&d);
		unsigned probed = 0;
		for (uint16_t id = 0; id < d.max_paths; id++)
			probed += mrp_conn_path_probe(n.c[0], id, n.now) == 0;
		assert_true(probed > 0);
	}
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 10000000000ull));
	uint64_t done = n.now;
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	assert_int_equal(n.check_failures, 0);
	mrp_conn_get_stats(n.c[0], &st[0]);
	mrp_conn_get_stats(n.c[1], &st[1]);
	net_free(&n);
	free(src);
	return done;
}

static void admit_run(uint64_t credit, uint64_t b_caps, mrp_conn_stats st[2])
{
	admit_run_probed(credit, b_caps, 0, st);
}

/* No credit: A's first packet is a request (a PROBE with GRANT and
 * ACK_REQ), no data leaves before B has answered, and B's answer is a
 * 52-byte PROBE_ACK with GRANT whose rate is at most B's capacity over its
 * connections. A credit of 3 packets: exactly 3 data packets carry GRANT,
 * at most 3 leave before B has said anything, and A asks for nothing. */
static void test_admission_request_and_credit(void **state)
{
	mrp_conn_stats st[2];
	const uint64_t pkt = MRP_MTU_DEFAULT + MRP_DATA_HDR_LEN;

	const uint64_t all = MRP_CAP_RATE_HINT | MRP_CAP_HELD | MRP_CAP_ADMIT;

	(void)state;
	admit_run(0, all, st);
	assert_int_equal(adm.a_first_op, MRP_OP_PROBE);
	assert_true(adm.a_first_flags & MRP_F_GRANT);
	assert_true(adm.a_first_flags & MRP_F_ACK_REQ);
	assert_int_equal(adm.a_data_before, 0);
	assert_int_equal(adm.a_grant_data, 0);
	assert_int_equal(adm.b_grants, 1);
	assert_true(adm.b_grant_mbps > 0 && adm.b_grant_mbps <= 100000 / 4);
	assert_int_equal(st[0].admit_asks, 1);
	assert_int_equal(st[0].admit_grants, 1);
	assert_int_equal(st[1].admit_requests, 1);

	admit_run(3 * pkt, all, st);
	assert_int_equal(adm.a_grant_data, 3);
	assert_true(adm.a_data_before <= 3);
	assert_true(adm.a_data_before >= 1);
	assert_int_equal(adm.b_grants, 0);
	assert_int_equal(st[0].admit_asks, 0);
	assert_int_equal(st[1].admit_requests, 0);

	/* a receiver that answers the request without a grant (it ignores
	 * GRANT): A starts with its initial window, and the WRITE completes */
	admit_run(0, MRP_CAP_RATE_HINT | MRP_CAP_HELD, st);
	assert_int_equal(adm.a_first_op, MRP_OP_PROBE);
	assert_int_equal(adm.a_data_before, 0);
	assert_int_equal(adm.b_grants, 0);
	assert_int_equal(st[0].admit_asks, 1);
	assert_int_equal(st[0].admit_grants, 0);
	assert_int_equal(st[1].admit_requests, 0);
}

/* The class of every request for a grant and of its answer. */
static struct {
	unsigned req, req_exp, ans, ans_exp, data, data_exp;
} gcls;

static int grant_class_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			      uint64_t *delay, int *ce)
{
	uint16_t flags = (uint16_t)(pkt[2] << 8 | pkt[3]);
	if (from == 0 && pkt[1] == MRP_OP_PROBE && (flags & MRP_F_GRANT)) {
		gcls.req++;
		gcls.req_exp += ti->expedite;
	} else if (from == 1 && pkt[1] == MRP_OP_PROBE_ACK && (flags & MRP_F_GRANT)) {
		gcls.ans++;
		gcls.ans_exp += ti->expedite;
	} else if (from == 0 && ti->is_data) {
		gcls.data++;
		gcls.data_exp += ti->expedite;
	}
	return default_policy(n, from, ti, pkt, delay, ce);
}

/* With the expedited class on, a request for a grant and its answer go in
 * it whatever the connection carries (SPEC 6.7): here a 1 MiB WRITE, whose
 * data stays in the default class. In the default class the answer waited
 * behind the expedited data of the receiver's other connections (a 4-host
 * all-to-all of 256 KiB in the simulator: 65 us, the connection idle
 * meanwhile). Without the class nothing is expedited. */
static void test_admission_grant_expedited(void **state)
{
	(void)state;
	const uint64_t all = MRP_CAP_RATE_HINT | MRP_CAP_HELD | MRP_CAP_ADMIT;
	for (int on = 0; on < 2; on++) {
		static mrp_rh_slot slots[8];
		mrp_rh rh;
		assert_int_equal(mrp_rh_init(&rh, slots, 8, 100000000000ull, 0), 0);
		rh.adm_conns = 4;
		net n;
		mrp_conn_params p[2];
		pair_params(p, 1, 0);
		for (int i = 0; i < 2; i++)
			p[i].expedite_max = on ? 256u << 10 : 0;
		p[0].caps = all;
		p[1].caps = all;
		p[0].admit = 1;
		p[0].admit_credit = 0;
		p[1].rh = &rh;
		net_init(&n, &p[0], &p[1]);
		n.policy = grant_class_policy;
		memset(&gcls, 0, sizeof(gcls));
		size_t len = 1 << 20;
		uint8_t *src = post_write(&n, len, 17, 0);
		cqlog log[2] = { 0 };
		want w = { log, 0, 1 };
		assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
		assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
		assert_memory_equal(n.mr[1].base, src, len);
		assert_int_equal(gcls.req, 1);
		assert_int_equal(gcls.ans, 1);
		assert_int_equal(gcls.req_exp, on ? 1 : 0);
		assert_int_equal(gcls.ans_exp, on ? 1 : 0);
		assert_true(gcls.data >= len / MRP_MTU_DEFAULT);
		assert_int_equal(gcls.data_exp, 0);
		assert_int_equal(n.check_failures, 0);
		free(src);
		net_free(&n);
	}
}

/* No credit, and every path has a PROBE out when the data comes (a ping's,
 * sent before the data was posted, so not a request): the first answer
 * sends the request on its path at once. Without that, the data waited
 * for the next idle probe (1 s here): found by metarocd's pings to a
 * daemon whose budget was out. */
static void test_admission_request_after_probes(void **state)
{
	mrp_conn_stats st[2];
	const uint64_t all = MRP_CAP_RATE_HINT | MRP_CAP_HELD | MRP_CAP_ADMIT;

	(void)state;
	uint64_t done = admit_run_probed(0, all, 1, st);
	assert_int_equal(adm.a_first_op, MRP_OP_PROBE);
	assert_int_equal(adm.a_data_before, 0);
	assert_int_equal(st[0].admit_asks, 1);
	assert_int_equal(st[0].admit_grants, 1);
	assert_int_equal(st[1].admit_requests, 1);
	assert_true(done < 100000000ull); /* simulated: far below the 1 s probe */
}

/* Admission credit is given in whole data packets (mrp_rh_admit()); data
 * sent on it is charged and returned in whole packets too, whatever its
 * length (SPEC 6.6). A 100-byte WRITE on a 2-packet credit: A sends its
 * one segment with GRANT, and B's allocator has only the unused packet
 * out afterwards. When the return was the segment's own length, 3,996
 * bytes more of this credit stayed out until adm_ttl_ns after the
 * receiver's last grant, and a
 * receiver granting a new connection every few microseconds -- an
 * all-to-all's steps -- ran its budget dry: every step then asked, a
 * round trip more (256 KB queues: 771.7 us for an 8 B all-to-all where
 * RoCEv2 took 503.2). */
static void test_admission_credit_whole_packets(void **state)
{
	static mrp_rh_slot slots[8];
	mrp_rh rh;
	net n;
	const uint64_t pkt = MRP_MTU_DEFAULT + MRP_DATA_HDR_LEN;

	(void)state;
	assert_int_equal(mrp_rh_init(&rh, slots, 8, 100000000000ull, 0), 0);
	rh.adm_budget = 1000000;
	rh.adm_conns = 4;
	uint64_t credit = mrp_rh_admit(&rh, (uint32_t)pkt, 2 * pkt, 0);
	assert_int_equal(credit, 2 * pkt);
	assert_int_equal(rh.adm_out, 2 * pkt);
	admit_net(&n, &rh, credit, MRP_CAP_RATE_HINT | MRP_CAP_HELD | MRP_CAP_ADMIT, 0);
	uint8_t *src = post_write(&n, 100, 12, 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, 100);
	assert_int_equal(adm.a_grant_data, 1);
	/* its room free again, long before adm_ttl_ns */
	assert_true(n.now < rh.adm_ttl_ns);
	assert_int_equal(rh.adm_out, pkt);
	assert_int_equal(n.check_failures, 0);
	free(src);
	net_free(&n);
}

/* ---- pacing waits put back (mrp_conn_deadline_paced) ------------------- */

typedef struct paced_seen {
	want w;
	uint64_t slack;
	unsigned postponed, due_now, steps;
} paced_seen;

/* Before every step of a transfer: with not_before 0 the deadline is
 * mrp_conn_deadline()'s; with not_before = now + slack it is never sooner,
 * never later than not_before when it moved, and a control packet due now
 * (deadline 0) stays due now. */
static int paced_check(net *n, void *arg)
{
	paced_seen *ps = arg;
	for (int i = 0; i < 2; i++) {
		uint64_t d = mrp_conn_deadline(n->c[i]);
		assert_int_equal(mrp_conn_deadline_paced(n->c[i], 0), d);
		uint64_t nb = n->now + ps->slack;
		uint64_t p = mrp_conn_deadline_paced(n->c[i], nb);
		assert_true(p >= d);
		if (d == 0) {
			assert_int_equal(p, 0);
			ps->due_now++;
		}
		if (p != d) {
			assert_true(p <= nb);
			ps->postponed++;
		}
	}
	ps->steps++;
	return have_cqes(n, &ps->w);
}

static void test_deadline_paced(void **state)
{
	(void)state;
	net n;
	net_init_2planes(&n, default_policy);
	size_t len = 4 << 20;
	uint8_t *src = malloc(len);
	fill_pattern(src, len, 11);
	mrp_wr wr = { .wr_id = 7, .opcode = MRP_WR_WRITE, .local = src, .len = (uint32_t)len,
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	paced_seen ps = { { log, 0, 1 }, 50000, 0, 0, 0 };
	assert_true(net_run_until(&n, paced_check, &ps, 2000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(n.mr[1].base, src, len);
	/* the checks ran, pacing waits did occur and were put back, and
	 * control packets were due at once */
	assert_true(ps.steps > 100);
	assert_true(ps.postponed > 0);
	assert_true(ps.due_now > 0);
	free(src);
	net_free(&n);
}

/* ---- RDMA READ (SPEC 5.8) ------------------------------------------------ */

/* Both ends negotiated READ, with these bounds; B's region may be read. */
static void read_net(net *n, uint16_t rd_max, uint16_t rd_dest_max)
{
	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	for (int i = 0; i < 2; i++) {
		p[i].read = 1;
		p[i].rd_max = rd_max;
		p[i].rd_dest_max = rd_dest_max;
	}
	net_init(n, &p[0], &p[1]);
	n->mr[1].access |= MRP_ACCESS_REMOTE_READ;
}

static int post_read(net *n, uint64_t wr_id, uint16_t stream, uint8_t *sink, uint32_t len,
		     uint64_t b_off)
{
	mrp_wr wr = { .wr_id = wr_id, .opcode = MRP_WR_READ, .stream = stream, .sink = sink,
		      .len = len, .remote_addr = b_addr(n, b_off), .rkey = n->mr[1].rkey };
	return mrp_conn_post_send(n->c[0], &wr, n->now);
}

/* Reads of several sizes (0, 2 bytes, one MTU, 1 MiB + 5) land byte for
 * byte, complete in posting order with their length, sprayed over the
 * responder's paths; the responder sees no completion and holds nothing
 * afterwards. */
static void run_reads(net *n, cqlog log[2])
{
	static const uint32_t lens[] = { 0, 2, 4096, (1u << 20) + 5, 3 };
	enum { NR = sizeof(lens) / sizeof(lens[0]) };
	static uint8_t *dst[NR];
	fill_pattern(n->mr[1].base, n->mr[1].len, 99);
	for (int i = 0; i < NR; i++) {
		dst[i] = calloc(1, lens[i] + 1);
		assert_int_equal(post_read(n, 500 + i, 2, dst[i], lens[i], 1000u * i), 0);
	}
	want w = { log, 0, NR };
	assert_true(net_run_until(n, have_cqes, &w, 5000000000ull));
	assert_int_equal(log[0].n, NR);
	for (int i = 0; i < NR; i++) {
		assert_int_equal(log[0].e[i].wr_id, 500 + i);
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
		assert_int_equal(log[0].e[i].opcode, MRP_WR_READ);
		assert_int_equal(log[0].e[i].byte_len, lens[i]);
		assert_int_equal(log[0].e[i].stream, 2);
		assert_memory_equal(dst[i], n->mr[1].base + 1000u * i, lens[i]);
		assert_int_equal(dst[i][lens[i]], 0); /* nothing past the sink */
		free(dst[i]);
	}
	/* the responder frees each response once acknowledged: run until
	 * nothing is left, then the check (rd_resp = 0) holds */
	assert_true(net_run_until(n, NULL, NULL, n->now + 1000000000ull));
	assert_int_equal(log[1].n, 0);
	assert_int_equal(n->check_failures, 0);
}

static void test_read_placed(void **state)
{
	(void)state;
	net n;
	read_net(&n, 16, 64);
	cqlog log[2] = { 0 };
	run_reads(&n, log);
	mrp_conn_stats st;
	mrp_conn_get_stats(n.c[1], &st);
	assert_true(st.npaths_active >= 4); /* the responder opened its own paths */
	uint32_t used = 0;
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[1], i, &pi) == 0 && pi.tx_pkts > 0)
			used++;
	}
	assert_true(used >= 4);
	assert_int_equal(st.retx_pkts, 0);
	net_free(&n);
}

/* 10 % random loss both ways, paths of unequal delay (reordering): lost
 * READ_REQs and lost READ_RESPs are retransmitted, every READ completes
 * with the right bytes. */
static void test_read_loss(void **state)
{
	(void)state;
	net n;
	read_net(&n, 16, 64);
	n.loss_pct = 10;
	cqlog log[2] = { 0 };
	run_reads(&n, log);
	mrp_conn_stats sa, sb;
	mrp_conn_get_stats(n.c[0], &sa);
	mrp_conn_get_stats(n.c[1], &sb);
	assert_true(sb.retx_pkts > 0); /* responses were resent */
	assert_true(n.dropped > 0);
	net_free(&n);
}

/* READ responses by reference: their payload is the responder's region
 * (mr.resolve), under 10 % loss. */
static void test_read_loss_by_ref(void **state)
{
	(void)state;
	net n;
	read_net(&n, 16, 64);
	n.loss_pct = 10;
	n.by_ref = 1;
	cqlog log[2] = { 0 };
	run_reads(&n, log);
	mrp_conn_stats sb;
	mrp_conn_get_stats(n.c[1], &sb);
	assert_true(sb.retx_pkts > 0);
	assert_true(n.ref_pkts > (1u << 20) / 4096);
	net_free(&n);
}

/* Every packet delivered twice: duplicate READ_REQs are not executed again
 * (no second response), duplicate READ_RESPs are not placed twice. */
static int dup_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
		      uint64_t *delay, int *ce)
{
	int rv = default_policy(n, from, ti, pkt, delay, ce);
	wpkt *w;
	if (rv && (w = net_slot(n))) {
		w->at = n->now + *delay + 7000;
		w->seq = n->seq++;
		w->to = 1 - from;
		w->plane = ti->plane;
		w->ce = 0;
		size_t len = pkt[1] == MRP_OP_ACK ? MRP_ACK_LEN : 0;
		mrp_pkt k;
		for (size_t l = MRP_HDR_LEN; !len && l <= PKTMAX; l++)
			if (mrp_pkt_decode(&k, pkt, l) == (ssize_t)l)
				len = l;
		assert_true(len > 0);
		w->len = len;
		memcpy(w->data, pkt, len);
	}
	return rv;
}

static void test_read_duplicates(void **state)
{
	(void)state;
	net n;
	read_net(&n, 16, 64);
	n.policy = dup_policy;
	cqlog log[2] = { 0 };
	run_reads(&n, log);
	mrp_conn_stats sa, sb;
	mrp_conn_get_stats(n.c[0], &sa);
	mrp_conn_get_stats(n.c[1], &sb);
	assert_true(sa.rx_dup_pkts > 0); /* duplicate responses, ignored */
	assert_true(sb.rx_dup_pkts > 0); /* duplicate requests, ignored */
	/* each response was sent once: the responder sent no more data
	 * packets than the responses have (1 + 1 + 1 + 257 + 1) */
	assert_int_equal(sb.retx_pkts, 0);
	uint64_t data_pkts = 0;
	for (unsigned i = 0; i < 64; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(n.c[1], i, &pi) == 0)
			data_pkts += pi.tx_pkts;
	}
	assert_int_equal(data_pkts, 1 + 1 + 1 + 257 + 1);
	net_free(&n);
}

/* A READ after a WRITE to the same bytes on the same stream returns the
 * written bytes (executed in MSN order), even though the READ_REQ arrives
 * before the WRITE is whole: the WRITE's first packets are held back. */
static int hold_write_until;
static int hold_write_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			     uint64_t *delay, int *ce)
{
	int rv = default_policy(n, from, ti, pkt, delay, ce);
	if (from == 0 && pkt[1] == MRP_OP_WRITE && hold_write_until-- > 0)
		*delay += 200000; /* 200 us late: the READ_REQ overtakes */
	return rv;
}

static void test_read_after_write(void **state)
{
	(void)state;
	net n;
	read_net(&n, 16, 64);
	n.policy = hold_write_policy;
	hold_write_until = 4;
	size_t len = 64 * 1024;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	fill_pattern(src, len, 5);
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_WRITE, .stream = 1, .local = src,
		      .len = (uint32_t)len, .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	assert_int_equal(post_read(&n, 2, 1, dst, (uint32_t)len, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 2 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].wr_id, 1);
	assert_int_equal(log[0].e[1].wr_id, 2);
	assert_int_equal(log[0].e[1].status, MRP_WC_SUCCESS);
	assert_memory_equal(dst, src, len);
	assert_true(hold_write_until < 0); /* the hold did delay WRITE packets */
	assert_int_equal(n.check_failures, 0);
	free(src);
	free(dst);
	net_free(&n);
}

/* Access errors: the READ completes with the NAK's status at the
 * requester, later work is flushed, the sink is untouched. */
static void run_bad_read(unsigned access, uint32_t rkey_delta, uint64_t off, int status)
{
	net n;
	read_net(&n, 16, 64);
	n.mr[1].access = access;
	memset(n.mr[1].base, 0x77, n.mr[1].len);
	static uint8_t dst[10000], dst2[100];
	memset(dst, 0, sizeof(dst));
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_READ, .sink = dst, .len = sizeof(dst),
		      .remote_addr = b_addr(&n, off), .rkey = n.mr[1].rkey + rkey_delta };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	assert_int_equal(post_read(&n, 2, 0, dst2, sizeof(dst2), 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 2 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].wr_id, 1);
	assert_int_equal(log[0].e[0].status, status);
	assert_int_equal(log[0].e[0].byte_len, 0);
	assert_int_equal(log[0].e[1].wr_id, 2);
	assert_int_not_equal(log[0].e[1].status, MRP_WC_SUCCESS);
	for (size_t i = 0; i < sizeof(dst); i++)
		if (dst[i])
			fail_msg("sink byte %zu written", i);
	mrp_conn_stats sb;
	mrp_conn_get_stats(n.c[1], &sb);
	assert_true(sb.naks_sent >= 1);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

static void test_read_no_access(void **state)
{
	(void)state;
	/* a region that allows remote write but not remote read */
	run_bad_read(MRP_ACCESS_REMOTE_WRITE | MRP_ACCESS_LOCAL_WRITE, 0, 0, MRP_WC_REM_ACCESS);
}

static void test_read_bad_rkey(void **state)
{
	(void)state;
	run_bad_read(MRP_ACCESS_REMOTE_READ, 1, 0, MRP_WC_REM_ACCESS);
}

static void test_read_out_of_bounds(void **state)
{
	(void)state;
	run_bad_read(MRP_ACCESS_REMOTE_READ, 0, (8 << 20) - 100, MRP_WC_REM_BOUNDS);
}

/* The first READ_REQ of a stream arrives late (its first transmission
 * 300 us behind the others): the READs after it must wait for it, and,
 * with room for 2 READs at the responder, they must not take both places
 * -- the late one would be NAKed RNR until its retries ran out while they
 * waited for it. All six complete, in order, byte for byte. */
static int late_first_read(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			   uint64_t *delay, int *ce)
{
	int rv = default_policy(n, from, ti, pkt, delay, ce);
	/* msn (bytes 32-35 of the data header) 0, not a retransmission */
	if (from == 0 && pkt[1] == MRP_OP_READ_REQ && !(pkt[3] & MRP_F_RETX) &&
	    pkt[32] == 0 && pkt[33] == 0 && pkt[34] == 0 && pkt[35] == 0)
		*delay += 300000;
	return rv;
}

static void test_read_late_first_no_deadlock(void **state)
{
	(void)state;
	net n;
	read_net(&n, 16, 2);
	n.policy = late_first_read;
	fill_pattern(n.mr[1].base, 1 << 20, 5);
	enum { NR = 6 };
	static uint8_t dst[NR][5000];
	memset(dst, 0, sizeof(dst));
	for (int i = 0; i < NR; i++)
		assert_int_equal(post_read(&n, (uint64_t)i, 0, dst[i], sizeof(dst[i]), 8000u * i), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, NR };
	assert_true(net_run_until(&n, have_cqes, &w, 2000000000ull));
	for (int i = 0; i < NR; i++) {
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
		assert_int_equal(log[0].e[i].wr_id, (uint64_t)i);
		assert_memory_equal(dst[i], n.mr[1].base + 8000u * i, sizeof(dst[i]));
	}
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* The responder holds at most rd_dest_max READs: with 2 and a requester
 * that may have 12 out, the others are NAKed RNR and retried, and all
 * complete; with rd_max 3 the requester never has more than 3 out
 * (mrp_conn_check() verifies both bounds at every step). */
static void test_read_responder_limit(void **state)
{
	(void)state;
	for (int round = 0; round < 2; round++) {
		net n;
		fprintf(stderr, "ROUND %d\n", round);
		read_net(&n, round ? 3 : 12, round ? 64 : 2);
		fill_pattern(n.mr[1].base, 1 << 20, 3);
		enum { NR = 12 };
		static uint8_t dst[NR][20000];
		memset(dst, 0, sizeof(dst));
		for (int i = 0; i < NR; i++)
			assert_int_equal(post_read(&n, (uint64_t)i, (uint16_t)(i % 3), dst[i],
						   sizeof(dst[i]), 30000u * i), 0);
		cqlog log[2] = { 0 };
		want w = { log, 0, NR };
		assert_true(net_run_until(&n, have_cqes, &w, 2000000000ull));
		for (int i = 0; i < NR; i++) {
			assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
			uint64_t id = log[0].e[i].wr_id;
			assert_memory_equal(dst[id], n.mr[1].base + 30000u * id, sizeof(dst[id]));
		}
		mrp_conn_stats sb;
		mrp_conn_get_stats(n.c[1], &sb);
		if (round == 0)
			assert_true(sb.naks_sent > 0); /* RNR for the READs beyond 2 */
		else
			assert_int_equal(sb.naks_sent, 0);
		assert_int_equal(n.check_failures, 0);
		net_free(&n);
	}
}

/* Without the capability READ: a READ cannot be posted; a peer that sends
 * READ_REQ anyway is NAKed MALFORMED, and its READ fails. */
static void test_read_not_negotiated(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	static uint8_t dst[64];
	mrp_wr wr = { .wr_id = 1, .opcode = MRP_WR_READ, .sink = dst, .len = sizeof(dst),
		      .remote_addr = b_addr(&n, 0), .rkey = n.mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), MRP_ERR_INVAL);
	net_free(&n);

	mrp_conn_params p[2];
	pair_params(p, 1, 0);
	p[0].read = 1; /* A thinks READ was negotiated, B does not */
	net_init(&n, &p[0], &p[1]);
	n.mr[1].access |= MRP_ACCESS_REMOTE_READ;
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].status, MRP_WC_REM_INVALID);
	net_free(&n);
	/* a sink is required, and the source must not wrap */
	read_net(&n, 16, 64);
	wr.sink = NULL;
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), MRP_ERR_INVAL);
	wr.sink = dst;
	wr.remote_addr = UINT64_MAX - 10;
	assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), MRP_ERR_INVAL);
	net_free(&n);
}

/* Each allocation a READ needs may fail, at either end: no leak, no crash,
 * the READ either completes with the bytes or fails cleanly (run under the
 * leak-checking allocator). */
static void test_read_alloc_failures(void **state)
{
	(void)state;
	for (unsigned long k = 1; k < 400; k += 7) {
		failer f = { 0, k, 0 };
		mrp_mem fm = { f_alloc, t_free, &f };
		mrp_conn_params p[2];
		pair_params(p, 1, 0);
		p[0].read = p[1].read = 1;
		net n;
		if (net_init_mem(&n, &p[0], &p[1], &fm, 4096, 1 << 20) != 0) {
			net_free(&n);
			continue;
		}
		n.mr[1].access |= MRP_ACCESS_REMOTE_READ;
		static uint8_t dst[3][50000];
		for (int i = 0; i < 3; i++)
			if (post_read(&n, (uint64_t)i, 0, dst[i], sizeof(dst[i]), 0) != 0)
				break;
		net_run_until(&n, NULL, NULL, 300000000ull);
		assert_int_equal(n.check_failures, 0);
		net_free(&n);
	}
}

/* The responder's region loses its read right while a 1 MiB READ is being
 * answered: the responder NAKs the READ (ACCESS) instead of reading memory
 * that may be gone, the READ fails with REM_ACCESS, the connection ends. */
static int b_sent_some(net *n, void *arg)
{
	(void)arg;
	mrp_conn_stats st;
	mrp_conn_get_stats(n->c[1], &st);
	return st.tx_pkts >= 40;
}

static void test_read_region_revoked(void **state)
{
	(void)state;
	net n;
	read_net(&n, 16, 64);
	uint8_t *dst = calloc(1, 1 << 20);
	assert_int_equal(post_read(&n, 9, 0, dst, 1 << 20, 0), 0);
	assert_true(net_run_until(&n, b_sent_some, NULL, 1000000000ull));
	n.mr[1].access = MRP_ACCESS_REMOTE_WRITE;
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].wr_id, 9);
	assert_int_equal(log[0].e[0].status, MRP_WC_REM_ACCESS);
	assert_true(net_run_until(&n, NULL, NULL, n.now + 100000000ull));
	assert_true(mrp_conn_is_closed(n.c[0]));
	assert_true(mrp_conn_is_closed(n.c[1]));
	assert_int_equal(n.check_failures, 0);
	free(dst);
	net_free(&n);
}

/* ---- last byte last (SPEC 5.3) ------------------------------------------ */

/* A WRITE's last byte is placed after every other byte of it: an RDMA
 * program that polls the last byte of its target (perftest's write
 * latency test does) then finds the whole message there. */

typedef struct lbl_msg {
	const uint8_t *src;
	uint8_t *dst;
	uint32_t len;
	int verified; /* its last byte was seen, and every other byte with it */
} lbl_msg;

typedef struct lbl_run {
	lbl_msg *m;
	int nmsg;
	cqlog *log;
	int want_a, want_b;
	unsigned last_seen; /* messages whose last byte was seen mid-run */
} lbl_run;

/* Checked before every step of the network: a message whose last byte has
 * its new value has all its other bytes too. */
static int lbl_check(net *n, void *arg)
{
	(void)n;
	lbl_run *r = arg;
	for (int i = 0; i < r->nmsg; i++) {
		lbl_msg *m = &r->m[i];
		if (m->verified || m->dst[m->len - 1] != m->src[m->len - 1])
			continue;
		for (uint32_t k = 0; k < m->len; k++)
			if (m->dst[k] != m->src[k])
				fail_msg("message %d (%u bytes): last byte placed before byte %u", i,
					 m->len, k);
		m->verified = 1;
		r->last_seen++;
	}
	poll_all(n, r->log);
	return r->log[0].n >= r->want_a && r->log[1].n >= r->want_b;
}

/* Random delays of up to 60 us on top of the paths' own (data overtakes
 * data of the same message freely) and 5 % loss both ways. */
static int jitter_policy(net *n, int from, const mrp_tx_info *ti, const uint8_t *pkt,
			 uint64_t *delay, int *ce)
{
	if (!default_policy(n, from, ti, pkt, delay, ce))
		return 0;
	*delay += xorshift(&n->prng) % 60000;
	return 1;
}

static void test_write_last_byte_last(void **state)
{
	(void)state;
	mrp_conn_params d[2];
	pair_params(d, 2, 0);
	net n;
	net_init(&n, &d[0], &d[1]);
	n.policy = jitter_policy;
	n.loss_pct = 5;
	static const uint32_t sizes[] = { 1,     2,     100,   4095,  4096,   4097,  8192,
					  8193,  12289, 20000, 65536, 65537, 200000, 1 << 20 };
	enum { NS = sizeof(sizes) / sizeof(sizes[0]), ROUNDS = 3, NMSG = NS * ROUNDS };
	lbl_msg m[NMSG];
	size_t total = 0;
	for (int i = 0; i < NMSG; i++)
		total += sizes[i % NS];
	uint8_t *src = malloc(total);
	assert_non_null(src);
	fill_pattern(src, total, 21);
	size_t soff = 0, doff = 0;
	static uint8_t rbuf[1];
	int nimm = 0;
	for (int i = 0; i < NMSG; i++) {
		uint32_t len = sizes[i % NS];
		m[i] = (lbl_msg){ src + soff, n.mr[1].base + doff, len, 0 };
		/* every target byte differs from the byte that will land there */
		for (uint32_t k = 0; k < len; k++)
			m[i].dst[k] = (uint8_t)~m[i].src[k];
		uint16_t sid = (uint16_t)(i % 3);
		int imm = sid == 2;
		if (imm) {
			assert_int_equal(mrp_conn_post_recv(n.c[1], 2, 500 + i, rbuf, 0, 0), 0);
			nimm++;
		}
		mrp_wr wr = { .wr_id = (uint64_t)i, .opcode = imm ? MRP_WR_WRITE_IMM : MRP_WR_WRITE,
			      .stream = sid, .local = m[i].src, .len = len,
			      .remote_addr = b_addr(&n, doff), .rkey = n.mr[1].rkey,
			      .imm = (uint32_t)i };
		assert_int_equal(mrp_conn_post_send(n.c[0], &wr, 0), 0);
		soff += len;
		doff += len + 64;
	}
	assert_true(doff <= n.mr[1].len);
	cqlog *log = calloc(2, sizeof(cqlog));
	assert_non_null(log);
	lbl_run r = { m, NMSG, log, NMSG, nimm, 0 };
	assert_true(net_run_until(&n, lbl_check, &r, 20000000000ull));
	for (int i = 0; i < NMSG; i++) {
		assert_int_equal(log[0].e[i].status, MRP_WC_SUCCESS);
		assert_true(m[i].verified);
		assert_memory_equal(m[i].dst, m[i].src, m[i].len);
	}
	for (int i = 0; i < nimm; i++) {
		assert_int_equal(log[1].e[i].status, MRP_WC_SUCCESS);
		assert_int_equal(log[1].e[i].opcode, MRP_WC_RECV_WRITE_IMM);
	}
	mrp_conn_stats sa, sb;
	mrp_conn_get_stats(n.c[0], &sa);
	mrp_conn_get_stats(n.c[1], &sb);
	print_message("%d WRITEs, 5 %% loss, jitter: %llu last packets held, %llu retransmitted\n",
		      NMSG, (unsigned long long)sb.rx_held_pkts, (unsigned long long)sa.retx_pkts);
	assert_true(sb.rx_held_pkts > 0); /* the reordering put last packets first */
	assert_true(sa.retx_pkts > 0);
	assert_int_equal(n.check_failures, 0);
	free(log);
	free(src);
	net_free(&n);
}

/* The packets A has to send now, in *p (up to max); returns how many. */
static int grab_all(net *n, rpkt *p, int max)
{
	int k = 0;
	while (k < max && grab(n, 0, &p[k]))
		k++;
	return k;
}

static int pkt_is_last(const rpkt *p)
{
	mrp_pkt pkt;
	assert_int_equal(mrp_pkt_decode(&pkt, p->data, p->len), (ssize_t)p->len);
	return pkt.hdr.opcode == MRP_OP_WRITE && (pkt.hdr.flags & MRP_F_LAST);
}

/* Post a WRITE of src[0..len) to the start of B's region and take its
 * packets off the network (npkts of them, into p) undelivered: returns
 * the index of the one that carries the message's last byte. */
static int write_grab(net *n, const uint8_t *src, uint32_t len, uint64_t wr_id, rpkt *p,
		      int npkts)
{
	mrp_wr wr = { .wr_id = wr_id, .opcode = MRP_WR_WRITE, .local = src, .len = len,
		      .remote_addr = b_addr(n, 0), .rkey = n->mr[1].rkey };
	assert_int_equal(mrp_conn_post_send(n->c[0], &wr, 0), 0);
	assert_int_equal(grab_all(n, p, 8), npkts);
	int last = -1;
	for (int i = 0; i < npkts; i++)
		if (pkt_is_last(&p[i]))
			last = i;
	assert_true(last >= 0);
	return last;
}

/* The last packet first, the others one by one: the last packet's bytes
 * stay out of the target until the others are all there; a copy of it
 * meanwhile is a duplicate; then the message completes. */
static void test_write_last_packet_held(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	enum { LEN = 3 * 4096 + 700 };
	static uint8_t src[LEN];
	fill_pattern(src, LEN, 31);
	uint8_t *dst = n.mr[1].base;
	memset(dst, 0x5a, LEN);
	src[LEN - 1] = 0xa5;
	static rpkt p[8];
	int last = write_grab(&n, src, LEN, 3, p, 4);
	give(&n, 0, &p[last]);
	give(&n, 0, &p[last]); /* a copy: a duplicate, still held once */
	mrp_conn_stats sb;
	mrp_conn_get_stats(n.c[1], &sb);
	assert_int_equal(sb.rx_held_pkts, 1);
	assert_int_equal(sb.rx_dup_pkts, 1);
	for (uint32_t k = 3 * 4096; k < LEN; k++)
		assert_int_equal(dst[k], 0x5a); /* none of the last packet's bytes */
	int given = 0;
	for (int i = 0; i < 4; i++) {
		if (i == last)
			continue;
		give(&n, 0, &p[i]);
		if (++given < 3)
			assert_int_equal(dst[LEN - 1], 0x5a);
	}
	assert_memory_equal(dst, src, LEN);
	assert_int_equal(dst[LEN], 0); /* nothing past the target */
	give_all(&n, 1); /* the ACKs */
	cqlog log[2] = { 0 };
	poll_all(&n, log);
	assert_int_equal(log[0].n, 1);
	assert_int_equal(log[0].e[0].wr_id, 3);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

/* A held last packet whose message never completes is freed with the
 * connection (cmocka checks for leaks), and its bytes were never placed. */
static void test_write_held_freed(void **state)
{
	(void)state;
	net n;
	net_init(&n, NULL, NULL);
	enum { LEN = 2 * 4096 + 1 };
	static uint8_t src[LEN];
	memset(src, 0x77, LEN);
	static rpkt p[8];
	give(&n, 0, &p[write_grab(&n, src, LEN, 4, p, 3)]);
	mrp_conn_stats sb;
	mrp_conn_get_stats(n.c[1], &sb);
	assert_int_equal(sb.rx_held_pkts, 1);
	assert_int_equal(n.mr[1].base[LEN - 1], 0);
	mrp_conn_close(n.c[1], 1, n.now);
	assert_int_equal(n.mr[1].base[LEN - 1], 0);
	net_free(&n);
}

/* An allocator that refuses the first allocation of one size. */
typedef struct size_failer {
	size_t size;
	unsigned refused;
} size_failer;

static void *sf_alloc(void *ud, size_t len)
{
	size_failer *f = ud;
	if (len == f->size && !f->refused) {
		f->refused++;
		return NULL;
	}
	return test_malloc(len);
}

/* No memory to hold the last packet: NAK RNR, nothing placed; the sender
 * sends it again after the others and the WRITE succeeds. */
static void test_write_hold_refused(void **state)
{
	(void)state;
	enum { LEN = 3 * 4096 + 777 };
	size_failer f = { 777, 0 };
	const mrp_mem fmem = { sf_alloc, t_free, &f };
	net n;
	assert_int_equal(net_init_mem(&n, NULL, NULL, &fmem, MAXQ, 1 << 20), 0);
	static uint8_t src[LEN];
	fill_pattern(src, LEN, 41);
	uint8_t *dst = n.mr[1].base;
	memset(dst, 0x5a, LEN);
	src[LEN - 1] = 0xa5;
	static rpkt p[8];
	int last = write_grab(&n, src, LEN, 6, p, 4);
	give(&n, 0, &p[last]);
	assert_int_equal(f.refused, 1);
	mrp_conn_stats sb;
	mrp_conn_get_stats(n.c[1], &sb);
	assert_int_equal(sb.rx_held_pkts, 0);
	assert_int_equal(sb.naks_sent, 1); /* RNR */
	for (int i = 0; i < 4; i++)
		if (i != last)
			give(&n, 0, &p[i]);
	assert_int_equal(dst[LEN - 1], 0x5a);
	cqlog log[2] = { 0 };
	want w = { log, 0, 1 };
	assert_true(net_run_until(&n, have_cqes, &w, 1000000000ull));
	assert_int_equal(log[0].e[0].wr_id, 6);
	assert_int_equal(log[0].e[0].status, MRP_WC_SUCCESS);
	assert_memory_equal(dst, src, LEN);
	mrp_conn_get_stats(n.c[1], &sb);
	assert_int_equal(sb.naks_sent, 1); /* that one only */
	mrp_conn_stats sa;
	mrp_conn_get_stats(n.c[0], &sa);
	assert_int_equal(sa.naks_rcvd, 1);
	assert_int_equal(n.check_failures, 0);
	net_free(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_placed),
		cmocka_unit_test(test_alloc_failures),
		cmocka_unit_test(test_send_recv_ordered),
		cmocka_unit_test(test_write_imm),
		cmocka_unit_test(test_streams_independent),
		cmocka_unit_test(test_random_loss),
		cmocka_unit_test(test_write_pkt_ref_same_packets),
		cmocka_unit_test(test_expedited_class),
		cmocka_unit_test(test_tail_off_far_plane),
		cmocka_unit_test(test_rnr_then_success),
		cmocka_unit_test(test_rnr_late_receiver),
		cmocka_unit_test(test_rnr_exhausted),
		cmocka_unit_test(test_bad_rkey),
		cmocka_unit_test(test_out_of_bounds),
		cmocka_unit_test(test_ce_cuts_one_path),
		cmocka_unit_test(test_ce_route_repaths),
		cmocka_unit_test(test_route_move_resets_min_rtt),
		cmocka_unit_test(test_route_move_into_queue_not_far),
		cmocka_unit_test(test_ce_host_repaths_back_off),
		cmocka_unit_test(test_ce_host_flicker_repaths_back_off),
		cmocka_unit_test(test_new_path_waits_for_plane_rtt),
		cmocka_unit_test(test_blackhole_reported),
		cmocka_unit_test(test_common_failure_keeps_routes),
		cmocka_unit_test(test_lone_path_reports),
		cmocka_unit_test(test_ack_path_reports_held),
		cmocka_unit_test(test_plane_routes_all_in_hole),
		cmocka_unit_test(test_ack_routes_all_in_hole),
		cmocka_unit_test(test_cold_paths_in_hole_time_out),
		cmocka_unit_test(test_held_timeout_late_acks_extend),
		cmocka_unit_test(test_ack_req_acks_every_path),
		cmocka_unit_test(test_held_timeout_answer_without_ack),
		cmocka_unit_test(test_held_timeout_ack_first),
		cmocka_unit_test(test_held_timeout_unanswered),
		cmocka_unit_test(test_spurious_rto_undone),
		cmocka_unit_test(test_rto_loss_counted),
		cmocka_unit_test(test_burst_both_ways),
		cmocka_unit_test(test_burst_on_acks),
		cmocka_unit_test(test_fresh_tail_loss),
		cmocka_unit_test(test_cold_plane_lone_loss),
		cmocka_unit_test(test_cold_plane_probe_lost),
		cmocka_unit_test(test_rtt_hint_lone_loss),
		cmocka_unit_test(test_plane_down),
		cmocka_unit_test(test_planes_full),
		cmocka_unit_test(test_ack_silence_keeps_sending),
		cmocka_unit_test(test_ack_silence_no_false_route_failure),
		cmocka_unit_test(test_plane_down_replaces_paths),
		cmocka_unit_test(test_plane_drain_replaces_paths),
		cmocka_unit_test(test_plane_down_paths_capped),
		cmocka_unit_test(test_spaced_packets_take_planes_in_turn),
		cmocka_unit_test(test_announced_victim),
		cmocka_unit_test(test_announced_proven),
		cmocka_unit_test(test_close_graceful),
		cmocka_unit_test(test_close_abort),
		cmocka_unit_test(test_peer_silent_fails),
		cmocka_unit_test(test_idle_peer_silent_reset),
		cmocka_unit_test(test_peer_pause_survives),
		cmocka_unit_test(test_path_probe),
		cmocka_unit_test(test_many_streams),
		cmocka_unit_test(test_token_checked),
		cmocka_unit_test(test_tokenless_no_liveness),
		cmocka_unit_test(test_params_rejected),
		cmocka_unit_test(test_nak_fails_queued_message),
		cmocka_unit_test(test_rnr_copy_completes),
		cmocka_unit_test(test_tlp_skips_acked_copy),
		cmocka_unit_test(test_tail_probe_after_lost_ack),
		cmocka_unit_test(test_set_rto_init),
		cmocka_unit_test(test_two_messages_one_receive),
		cmocka_unit_test(test_two_messages_one_receive_in_order),
		cmocka_unit_test(test_small_messages),
		cmocka_unit_test(test_small_write_imm_bad_rkey),
		cmocka_unit_test(test_small_send_too_long),
		cmocka_unit_test(test_steer_onto_down_plane),
		cmocka_unit_test(test_held_marks_hint_bound_packets),
		cmocka_unit_test(test_slow_app_not_far_short),
		cmocka_unit_test(test_paced_paths_not_starved),
		cmocka_unit_test(test_drain_keeps_far_short_window),
		cmocka_unit_test(test_admission_request_and_credit),
		cmocka_unit_test(test_admission_request_after_probes),
		cmocka_unit_test(test_admission_grant_expedited),
		cmocka_unit_test(test_admission_credit_whole_packets),
		cmocka_unit_test(test_deadline_paced),
		cmocka_unit_test(test_read_placed),
		cmocka_unit_test(test_read_loss),
		cmocka_unit_test(test_read_loss_by_ref),
		cmocka_unit_test(test_read_duplicates),
		cmocka_unit_test(test_read_after_write),
		cmocka_unit_test(test_read_no_access),
		cmocka_unit_test(test_read_bad_rkey),
		cmocka_unit_test(test_read_out_of_bounds),
		cmocka_unit_test(test_read_responder_limit),
		cmocka_unit_test(test_read_late_first_no_deadlock),
		cmocka_unit_test(test_read_not_negotiated),
		cmocka_unit_test(test_read_alloc_failures),
		cmocka_unit_test(test_read_region_revoked),
		cmocka_unit_test(test_write_last_byte_last),
		cmocka_unit_test(test_write_last_packet_held),
		cmocka_unit_test(test_write_held_freed),
		cmocka_unit_test(test_write_hold_refused),
	};
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests_name("proto/conn", tests, NULL, NULL);
}
