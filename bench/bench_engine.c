/*
 * Engine-only throughput: a sender and a receiver mrp_conn exchanging packets
 * through memory, with no I/O. The network is two FIFOs with a constant
 * one-way delay in simulated time and no loss; the clock the engines see is
 * that simulated time. The wall clock (CLOCK_MONOTONIC) only times the runs.
 *
 * Two workloads, each run --reps times (median reported):
 *   write   1 MiB WRITEs at MTU 4096 into the receiver's region;
 *   send64  64-byte SENDs spread over 16 streams into posted receives.
 * A run is several passes; every pass writes every destination byte from one
 * of two source buffers (alternately), and after each pass the receiver's
 * memory must equal that pass's source (checked outside the timed part), and
 * every request must have completed once, successfully.
 *
 * The figure is data packets per second on one core, end to end: written by
 * the sender, decoded, read and placed by the receiver, with the ACK traffic
 * back and all completions, all on this one thread. Next to it, measured in
 * the same run over the same packet sizes and buffers, the reference: the
 * irreducible work per packet (mrp_data_hdr_encode, copy the payload in,
 * mrp_pkt_decode, copy the payload out to its destination) in a tight loop.
 *
 * It also reports the engine's memory per connection, per path and per
 * stream, measured through a counting allocator.
 *
 * Usage: bench_engine [--reps N] [--quick] [--json] [--workload write|send64]
 *                     [--stall LEN_US/EVERY_US] [--rto-min US]
 * (--stall: the receiver stops for LEN_US of every EVERY_US of simulated time,
 * as a descheduled process; with --rto-min, for the timeouts this causes)
 * Exits 0 when every run completed with all data verified, 1 otherwise (the
 * throughput goal is printed, never enforced).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"

#define GOAL_PPS 5e6
#define DELAY_NS 5000 /* one-way, simulated */
#define NEVER UINT64_MAX
#define NSTREAMS 16

/* ---- counting allocator ------------------------------------------------- */

typedef struct counter {
	size_t live_bytes;
	size_t live_allocs;
} counter;

typedef struct ahdr {
	size_t size;
	size_t pad; /* keeps the payload 16-byte aligned */
} ahdr;

static void *c_alloc(void *ud, size_t size)
{
	counter *k = ud;
	ahdr *h = malloc(sizeof(*h) + size);
	if (!h)
		return NULL;
	h->size = size;
	k->live_bytes += size;
	k->live_allocs++;
	return h + 1;
}

static void c_free(void *ud, void *p)
{
	counter *k = ud;
	if (!p)
		return;
	ahdr *h = (ahdr *)p - 1;
	k->live_bytes -= h->size;
	k->live_allocs--;
	free(h);
}

static uint64_t rng_next(void *ud)
{
	uint64_t *s = ud;
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the receiver's memory region --------------------------------------- */

typedef struct region {
	uint8_t *base;
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
} region;

static uint8_t *mr_resolve(void *ud, uint32_t rkey, uint64_t addr, uint64_t len,
			   unsigned access, int *pnak)
{
	region *r = ud;
	(void)access;
	if (rkey != r->rkey) {
		*pnak = MRP_NAK_INVALID_RKEY;
		return NULL;
	}
	if (addr < r->addr || len > r->len || addr - r->addr > r->len - len) {
		*pnak = MRP_NAK_OUT_OF_BOUNDS;
		return NULL;
	}
	return r->base + (addr - r->addr);
}

/* ---- the network: one FIFO per direction, packets written in place ------ */

typedef struct slot {
	uint64_t at;
	uint32_t len;
	uint8_t plane, is_data;
} slot;

typedef struct fifo {
	uint8_t *mem;  /* cap slots of `stride` bytes: a slot header, then the packet */
	size_t stride;
	uint32_t cap, head, len; /* cap: 0 or a power of two (indexes by mask: a
				  * division per packet would be charged to the engine) */
} fifo;

static slot *fifo_at(fifo *q, uint32_t i)
{
	return (slot *)(q->mem + (size_t)((q->head + i) & (q->cap - 1)) * q->stride);
}

static int fifo_grow(fifo *q)
{
	uint32_t ncap = q->cap ? q->cap * 2 : 256;
	uint8_t *n = malloc((size_t)ncap * q->stride);
	if (!n)
		return -1;
	for (uint32_t i = 0; i < q->len; i++)
		memcpy(n + (size_t)i * q->stride, fifo_at(q, i), q->stride);
	free(q->mem);
	q->mem = n;
	q->cap = ncap;
	q->head = 0;
	return 0;
}

typedef struct sim {
	mrp_conn *c[2]; /* 0 sends, 1 receives */
	counter mem[2];
	uint64_t seed[2];
	region mr;
	fifo q[2];      /* q[i]: packets from i to 1 - i */
	uint32_t mtu;
	uint64_t now;
	uint64_t data_pkts, ack_pkts, other_pkts;
	int error;
	const char *why;
} sim;

/* --stall LEN/EVERY: the receiver does nothing (reads no packet, writes
 * none, runs no timer) for LEN ns out of every EVERY ns of simulated time,
 * as a receiving process that is descheduled now and then; --rto-min sets
 * both ends' rto_min_ns (0: the engine's default). */
static uint64_t stall_len_ns, stall_every_ns, rto_min_ns;

static int stalled(uint64_t t)
{
	return stall_every_ns && t % stall_every_ns < stall_len_ns;
}

static int sim_init(sim *s, uint32_t mtu, uint8_t *dst, uint64_t dstlen)
{
	memset(s, 0, sizeof(*s));
	s->mtu = mtu;
	s->mr = (region){ dst, 0x100000000ull, dstlen, 0x5eed };
	for (int i = 0; i < 2; i++) {
		s->seed[i] = 0x9e3779b97f4a7c15ull + (uint64_t)i;
		s->q[i].stride = (sizeof(slot) + MRP_DATA_HDR_LEN + mtu + 63) & ~(size_t)63;
		mrp_conn_params p;
		mrp_conn_params_default(&p);
		p.local_conn_id = 100 + (uint32_t)i;
		p.peer_conn_id = 101 - (uint32_t)i;
		p.local_token = 0x1111 + (uint64_t)i;
		p.peer_token = 0x1112 - (uint64_t)i;
		p.mtu = mtu;
		p.max_streams = NSTREAMS;
		p.max_paths = 4; /* the initial 4: a fixed set of routes */
		p.probe_idle_ns = 0;
		if (rto_min_ns) {
			p.rto_min_ns = rto_min_ns;
			if (p.rto_init_ns < rto_min_ns)
				p.rto_init_ns = rto_min_ns;
			if (p.rto_max_ns < rto_min_ns)
				p.rto_max_ns = rto_min_ns;
		}
		mrp_mem m = { c_alloc, c_free, &s->mem[i] };
		mrp_rng r = { rng_next, &s->seed[i] };
		mrp_mr_ops mr = { mr_resolve, &s->mr };
		if (mrp_conn_new(&s->c[i], &p, &m, &r, &mr, 0) != 0)
			return -1;
	}
	return 0;
}

static void sim_free(sim *s)
{
	for (int i = 0; i < 2; i++) {
		mrp_conn_del(s->c[i]);
		free(s->q[i].mem);
	}
}

static void sim_fail(sim *s, const char *why)
{
	if (!s->error) {
		s->error = 1;
		s->why = why;
	}
}

/* Everything side i wants to send now goes into its FIFO. (sim_tx and
 * sim_rx are always inlined: called from the stall step as well, they were
 * not, which added 50 instructions a packet to the timed loop.) */
static inline __attribute__((always_inline)) void sim_tx(sim *s, int i)
{
	fifo *q = &s->q[i];
	for (;;) {
		if (q->len == q->cap && fifo_grow(q) < 0) {
			sim_fail(s, "out of memory");
			return;
		}
		slot *sl = fifo_at(q, q->len);
		mrp_tx_info ti;
		ssize_t n = mrp_conn_write_pkt(s->c[i], &ti, (uint8_t *)(sl + 1),
					       MRP_DATA_HDR_LEN + s->mtu, s->now);
		if (n <= 0) {
			if (n < 0)
				sim_fail(s, "mrp_conn_write_pkt failed");
			return;
		}
		sl->at = s->now + DELAY_NS;
		sl->len = (uint32_t)n;
		sl->plane = ti.plane;
		sl->is_data = ti.is_data;
		q->len++;
	}
}

/* Deliver what has arrived by now. */
static inline __attribute__((always_inline)) void sim_rx(sim *s, int i)
{
	fifo *q = &s->q[i];
	while (q->len) {
		slot *sl = fifo_at(q, 0);
		if (sl->at > s->now)
			break;
		mrp_pkt pkt;
		if (mrp_pkt_decode(&pkt, (uint8_t *)(sl + 1), sl->len) != (ssize_t)sl->len) {
			sim_fail(s, "a packet did not decode");
		} else {
			if (mrp_conn_read_pkt(s->c[1 - i], &pkt, sl->plane, 0, s->now) != 0)
				sim_fail(s, "mrp_conn_read_pkt refused a packet");
			if (sl->is_data)
				s->data_pkts++;
			else if (pkt.hdr.opcode == MRP_OP_ACK)
				s->ack_pkts++;
			else
				s->other_pkts++;
		}
		q->head = (q->head + 1) & (q->cap - 1);
		q->len--;
	}
}

/* sim_step() with the receiver stalled now and then (--stall): while it
 * stalls, its events (its deadline, deliveries to it on q[0]) wait for the
 * end of the stall. Kept apart so that the plain step stays as it was. */
__attribute__((noinline)) static int sim_step_stall(sim *s)
{
	int st = stalled(s->now);
	sim_tx(s, 0);
	if (!st)
		sim_tx(s, 1);
	uint64_t t = NEVER;
	for (int i = 0; i < 2; i++) {
		if (s->q[i].len && fifo_at(&s->q[i], 0)->at < t && !(st && i == 0))
			t = fifo_at(&s->q[i], 0)->at;
		uint64_t d = mrp_conn_deadline(s->c[i]);
		if (d < t && !(st && i == 1))
			t = d;
	}
	if (st && s->now - s->now % stall_every_ns + stall_len_ns < t)
		t = s->now - s->now % stall_every_ns + stall_len_ns; /* the stall ends */
	if (t == NEVER)
		return -1;
	if (t > s->now)
		s->now = t;
	st = stalled(s->now);
	if (!st)
		sim_rx(s, 0);
	sim_rx(s, 1);
	for (int i = 0; i < 2; i++)
		if (!(st && i == 1) && mrp_conn_deadline(s->c[i]) <= s->now)
			mrp_conn_handle_timeout(s->c[i], s->now);
	return 0;
}

/* One step: transmit, advance simulated time to the next event, deliver,
 * run timers. Returns 0, or -1 when nothing can ever happen again. */
static int sim_step(sim *s)
{
	if (stall_every_ns)
		return sim_step_stall(s);
	sim_tx(s, 0);
	sim_tx(s, 1);
	uint64_t t = NEVER;
	for (int i = 0; i < 2; i++) {
		if (s->q[i].len && fifo_at(&s->q[i], 0)->at < t)
			t = fifo_at(&s->q[i], 0)->at;
		uint64_t d = mrp_conn_deadline(s->c[i]);
		if (d < t)
			t = d;
	}
	if (t == NEVER)
		return -1;
	if (t > s->now)
		s->now = t;
	sim_rx(s, 0);
	sim_rx(s, 1);
	for (int i = 0; i < 2; i++)
		if (mrp_conn_deadline(s->c[i]) <= s->now)
			mrp_conn_handle_timeout(s->c[i], s->now);
	return 0;
}

/* Take side i's completions: each must be a success of the expected kind. */
static uint64_t sim_poll(sim *s, int i, uint32_t want_len)
{
	mrp_cqe e[64];
	uint64_t done = 0;
	int n;
	while ((n = mrp_conn_poll_cq(s->c[i], e, 64)) > 0)
		for (int k = 0; k < n; k++) {
			if (e[k].status != MRP_WC_SUCCESS || e[k].byte_len != want_len)
				sim_fail(s, "a request completed with an error or a wrong length");
			done++;
		}
	return done;
}

/* ---- workloads ----------------------------------------------------------- */

typedef struct result {
	double engine_pps, reference_pps;
	uint64_t data_pkts, ack_pkts, other_pkts, retx_pkts;
	uint64_t rto_count, tlp_count, reports; /* the sender's, last run */
	double sim_ms;                          /* simulated time, last run */
	uint64_t payload_bytes;
	double engine_s;
	int ok;
} result;

typedef struct workload {
	const char *name;
	uint32_t mtu;
	uint32_t msg_len;   /* bytes per message */
	uint32_t nmsgs;     /* messages per pass */
	uint32_t passes;    /* passes per run */
	int send;           /* SENDs on NSTREAMS streams, else WRITEs on stream 0 */
} workload;

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t s = seed | 1;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = rng_next(&s);
		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* One pass of the engine: post everything, run until all completed. Returns
 * wall seconds spent. */
/* (not inlined: profilers can then count the engine alone, e.g.
 * valgrind --tool=callgrind --toggle-collect=engine_pass) */
__attribute__((noinline)) static double engine_pass(sim *s, const workload *w, const uint8_t *src, uint8_t *dst)
{
	double t0 = now_s();
	uint64_t want = w->nmsgs, sent_done = 0, recv_done = 0;
	uint32_t posted = 0;
	if (w->send)
		for (uint32_t i = 0; i < w->nmsgs; i++)
			if (mrp_conn_post_recv(s->c[1], (uint16_t)(i % NSTREAMS), i,
					       dst + (size_t)i * w->msg_len, w->msg_len, s->now) != 0) {
				sim_fail(s, "post_recv failed");
				return 0;
			}
	uint64_t idle = 0;
	while (!s->error && (sent_done < want || (w->send && recv_done < want))) {
		while (posted < w->nmsgs) {
			mrp_wr wr = {
				.wr_id = posted,
				.opcode = w->send ? MRP_WR_SEND : MRP_WR_WRITE,
				.stream = (uint16_t)(w->send ? posted % NSTREAMS : 0),
				.local = src + (size_t)posted * w->msg_len,
				.len = w->msg_len,
				.remote_addr = s->mr.addr + (uint64_t)posted * w->msg_len,
				.rkey = s->mr.rkey,
			};
			int rv = mrp_conn_post_send(s->c[0], &wr, s->now);
			if (rv == MRP_ERR_FULL)
				break;
			if (rv != 0) {
				sim_fail(s, "post_send failed");
				break;
			}
			posted++;
		}
		uint64_t before = sent_done + recv_done;
		if (sim_step(s) < 0) {
			sim_fail(s, "stalled: nothing left to happen with work outstanding");
			break;
		}
		sent_done += sim_poll(s, 0, w->msg_len);
		recv_done += sim_poll(s, 1, w->msg_len);
		idle = sent_done + recv_done == before ? idle + 1 : 0;
		if (idle > 1000000) {
			sim_fail(s, "no progress in a million steps");
			break;
		}
	}
	return now_s() - t0;
}

/* The reference: per packet, what no implementation can skip. */
static double reference_pass(const workload *w, const uint8_t *src, uint8_t *dst,
			     uint8_t *pkt, int *ok)
{
	double t0 = now_s();
	uint32_t npk = (w->msg_len + w->mtu - 1) / w->mtu;
	for (uint32_t i = 0; i < w->nmsgs; i++) {
		for (uint32_t k = 0; k < npk; k++) {
			uint32_t off = k * w->mtu;
			uint32_t plen = w->msg_len - off < w->mtu ? w->msg_len - off : w->mtu;
			size_t at = (size_t)i * w->msg_len + off;
			mrp_hdr h = {
				.version = MRP_VERSION,
				.opcode = w->send ? MRP_OP_SEND : MRP_OP_WRITE,
				.flags = (uint16_t)((off == 0 ? MRP_F_FIRST : 0) |
						    (off + plen == w->msg_len ? MRP_F_LAST : 0)),
				.dst_conn_id = 101, .src_conn_id = 100, .token = 0x1112, .psn = k,
			};
			mrp_data d = {
				.stream_id = (uint16_t)(i % NSTREAMS), .payload_len = (uint16_t)plen,
				.msn = i, .offset = off, .msg_len = w->msg_len, .ts_ns = i,
				.remote_addr = w->send ? 0 : 0x100000000ull + (uint64_t)i * w->msg_len,
				.rkey = w->send ? 0 : 0x5eed, .recv_idx = w->send ? i / NSTREAMS : 0,
			};
			if (mrp_data_hdr_encode(pkt, MRP_DATA_HDR_LEN, &h, &d) != MRP_DATA_HDR_LEN) {
				*ok = 0;
				return 0;
			}
			memcpy(pkt + MRP_DATA_HDR_LEN, src + at, plen);
			mrp_pkt p;
			if (mrp_pkt_decode(&p, pkt, MRP_DATA_HDR_LEN + plen) < 0) {
				*ok = 0;
				return 0;
			}
			memcpy(dst + (size_t)i * w->msg_len + p.u.data.offset, p.u.data.payload,
			       p.u.data.payload_len);
		}
	}
	return now_s() - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run_workload(const workload *w, int reps, result *out)
{
	size_t len = (size_t)w->nmsgs * w->msg_len;
	uint8_t *src[2] = { malloc(len), malloc(len) };
	uint8_t *dst = malloc(len);
	uint8_t *pkt = malloc(MRP_DATA_HDR_LEN + w->mtu);
	double *eng = calloc((size_t)reps, sizeof(double));
	double *ref = calloc((size_t)reps, sizeof(double));
	if (!src[0] || !src[1] || !dst || !pkt || !eng || !ref) {
		fprintf(stderr, "bench_engine: out of memory\n");
		exit(1);
	}
	/* Two sources that differ in every byte: each pass must overwrite all. */
	fill(src[0], len, 1);
	for (size_t i = 0; i < len; i++)
		src[1][i] = (uint8_t)~src[0][i];
	memset(out, 0, sizeof(*out));
	out->ok = 1;
	uint32_t npk = (w->msg_len + w->mtu - 1) / w->mtu;
	uint64_t pkts_per_run = (uint64_t)w->passes * w->nmsgs * npk;
	for (int r = 0; r < reps && out->ok; r++) {
		sim s;
		if (sim_init(&s, w->mtu, dst, len) != 0) {
			fprintf(stderr, "bench_engine: %s: mrp_conn_new failed\n", w->name);
			out->ok = 0;
			break;
		}
		memset(dst, 0, len);
		double t = 0;
		for (uint32_t p = 0; p < w->passes && !s.error; p++) {
			const uint8_t *from = src[p % 2];
			t += engine_pass(&s, w, from, dst);
			if (!s.error && memcmp(dst, from, len) != 0)
				sim_fail(&s, "the receiver's memory differs from the sender's");
		}
		mrp_conn_stats st;
		mrp_conn_get_stats(s.c[0], &st);
		if (!s.error && s.data_pkts != pkts_per_run + st.retx_pkts)
			sim_fail(&s, "data packet count disagrees with the work done");
		if (s.error) {
			fprintf(stderr, "bench_engine: %s: %s\n", w->name, s.why);
			out->ok = 0;
		}
		eng[r] = (double)s.data_pkts / t;
		out->data_pkts = s.data_pkts;
		out->ack_pkts = s.ack_pkts;
		out->other_pkts = s.other_pkts;
		out->retx_pkts = st.retx_pkts;
		out->rto_count = st.rto_count;
		out->tlp_count = st.tlp_count;
		out->reports = st.reports;
		out->sim_ms = (double)s.now / 1e6;
		out->engine_s = t;
		sim_free(&s);

		/* the reference over the same packets and buffers */
		int ok = 1;
		memset(dst, 0, len);
		t = 0;
		for (uint32_t p = 0; p < w->passes && ok; p++) {
			t += reference_pass(w, src[p % 2], dst, pkt, &ok);
			if (ok && memcmp(dst, src[p % 2], len) != 0)
				ok = 0;
		}
		if (!ok) {
			fprintf(stderr, "bench_engine: %s: the reference loop failed\n", w->name);
			out->ok = 0;
		}
		ref[r] = (double)pkts_per_run / t;
	}
	out->payload_bytes = (uint64_t)w->passes * len;
	if (out->ok) {
		out->engine_pps = median(eng, reps);
		out->reference_pps = median(ref, reps);
	}
	free(src[0]);
	free(src[1]);
	free(dst);
	free(pkt);
	free(eng);
	free(ref);
	return out->ok ? 0 : -1;
}

/* ---- state sizes ------------------------------------------------------------ */

typedef struct sizes {
	size_t conn, path, stream, recv, send64;
} sizes;

/* Bytes a connection holds with npaths paths, a receive posted on stream
 * (none for UINT16_MAX) and extra_recv more on it, and (send64) a 64-byte
 * SEND on it. */
static size_t conn_bytes(uint16_t npaths, uint16_t stream, int extra_recv, int send64)
{
	counter k = { 0, 0 };
	uint64_t seed = 1;
	region r = { NULL, 0, 0, 1 };
	mrp_conn_params p;
	mrp_conn_params_default(&p);
	p.local_conn_id = p.peer_conn_id = 1;
	p.local_token = p.peer_token = 1;
	p.max_paths = 64;
	p.initial_paths = npaths;
	p.max_streams = 1024;
	mrp_mem m = { c_alloc, c_free, &k };
	mrp_rng rng = { rng_next, &seed };
	mrp_mr_ops mr = { mr_resolve, &r };
	mrp_conn *c;
	static uint8_t buf[64];
	if (mrp_conn_new(&c, &p, &m, &rng, &mr, 0) != 0)
		return 0;
	if (stream != UINT16_MAX)
		mrp_conn_post_recv(c, stream, 0, buf, sizeof(buf), 0);
	for (int i = 0; i < extra_recv; i++)
		mrp_conn_post_recv(c, stream, 1 + (uint64_t)i, buf, sizeof(buf), 0);
	if (send64) {
		mrp_wr wr = { .opcode = MRP_WR_SEND, .stream = stream, .local = buf, .len = 64 };
		mrp_conn_post_send(c, &wr, 0);
	}
	size_t n = k.live_bytes;
	mrp_conn_del(c);
	if (k.live_allocs || k.live_bytes)
		return 0; /* a leak: report nonsense rather than a number */
	return n;
}

static int measure_sizes(sizes *z)
{
	size_t one = conn_bytes(1, UINT16_MAX, 0, 0);
	size_t all = conn_bytes(64, UINT16_MAX, 0, 0);
	size_t s1 = conn_bytes(1, 0, 0, 0);
	size_t s1024 = conn_bytes(1, 1023, 0, 0);
	/* receives are entries of a per-stream ring that doubles as it
	 * fills: measured over 1,024 of them, not 2 */
	size_t r1024 = conn_bytes(1, 0, 1023, 0);
	size_t snd = conn_bytes(1, 0, 0, 1);
	if (!one || !all || !s1 || !s1024 || !r1024 || !snd || all < one || s1024 < s1 ||
	    r1024 < s1)
		return -1;
	z->path = (all - one) / 63;
	z->conn = one - z->path;
	z->stream = (s1024 - s1) / 1023;
	z->recv = (r1024 - s1) / 1023;
	z->send64 = snd - s1;
	return 0;
}

/* ---- main --------------------------------------------------------------------- */

static double ratio(const result *r)
{
	return r->reference_pps > 0 ? r->engine_pps / r->reference_pps : 0;
}

static void print_result_json(const char *name, const workload *w, const result *r)
{
	printf("\"%s\":{\"mtu\":%u,\"msg_bytes\":%u,\"streams\":%u,\"data_pkts\":%llu,"
	       "\"ack_pkts\":%llu,\"other_pkts\":%llu,\"retx_pkts\":%llu,\"engine_pps\":%.0f,"
	       "\"reference_pps\":%.0f,\"ratio\":%.4f,\"payload_gbps\":%.3f,\"goal_met\":%s,"
	       "\"rto_count\":%llu,\"tlp_count\":%llu,\"reports\":%llu,\"sim_ms\":%.3f}",
	       name, w->mtu, w->msg_len, w->send ? NSTREAMS : 1,
	       (unsigned long long)r->data_pkts, (unsigned long long)r->ack_pkts,
	       (unsigned long long)r->other_pkts, (unsigned long long)r->retx_pkts,
	       r->engine_pps, r->reference_pps, ratio(r),
	       r->engine_pps * w->msg_len / ((w->msg_len + w->mtu - 1) / w->mtu) * 8 / 1e9,
	       r->engine_pps >= GOAL_PPS ? "true" : "false",
	       (unsigned long long)r->rto_count, (unsigned long long)r->tlp_count,
	       (unsigned long long)r->reports, r->sim_ms);
}

static void print_result_text(const char *label, const workload *w, const result *r)
{
	double gbps = r->engine_pps * w->msg_len / ((w->msg_len + w->mtu - 1) / w->mtu) * 8 / 1e9;
	printf("%-24s %8.3f Mpps %10.3f Mpps %8.3f   %7.2f Gbit/s   %s\n", label,
	       r->engine_pps / 1e6, r->reference_pps / 1e6, ratio(r),
	       gbps, r->engine_pps >= GOAL_PPS ? "met" : "not met");
}

int main(int argc, char **argv)
{
	int reps = 5, quick = 0, json = 0;
	const char *only = NULL; /* one workload (for profilers), or both */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
			if (reps < 1 || reps > 1000) {
				fprintf(stderr, "bench_engine: --reps: %s is out of range (1-1000)\n",
					argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--quick")) {
			quick = 1;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--stall") && i + 1 < argc) {
			unsigned long long len, every;
			char tail;
			if (sscanf(argv[++i], "%llu/%llu%c", &len, &every, &tail) != 2 ||
			    !len || len >= every || every > 1000000000ull) {
				fprintf(stderr, "bench_engine: --stall: %s is not LEN_US/EVERY_US "
					"with 0 < LEN_US < EVERY_US <= 1e9\n", argv[i]);
				return 2;
			}
			stall_len_ns = len * 1000;
			stall_every_ns = every * 1000;
		} else if (!strcmp(argv[i], "--rto-min") && i + 1 < argc) {
			unsigned long long us;
			char tail;
			if (sscanf(argv[++i], "%llu%c", &us, &tail) != 1 || !us || us > 1000000) {
				fprintf(stderr, "bench_engine: --rto-min: %s is out of range "
					"(1-1000000 us)\n", argv[i]);
				return 2;
			}
			rto_min_ns = us * 1000;
		} else if (!strcmp(argv[i], "--workload") && i + 1 < argc) {
			only = argv[++i];
			if (strcmp(only, "write") && strcmp(only, "send64")) {
				fprintf(stderr, "bench_engine: --workload: %s is not write or send64\n",
					only);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: bench_engine [--reps N] [--quick] [--json] "
				"[--workload write|send64] [--stall LEN_US/EVERY_US] "
				"[--rto-min US]\n");
			return 2;
		}
	}
	if (quick)
		reps = 1;
	/* write: 32 x 1 MiB per pass (a 32 MiB region), 64 passes = 2 GiB.
	 * send64: 65,536 messages per pass on 16 streams, 8 passes. */
	workload ww = { "write", 4096, 1u << 20, 32, 64, 0 };
	workload ws = { "send64", 4096, 64, 65536, 8, 1 };
	if (quick) {
		ww.nmsgs = 2;
		ww.passes = 2;
		ws.nmsgs = 2048;
		ws.passes = 2;
	}
	result rw, rs;
	sizes z = { 0, 0, 0, 0, 0 };
	int do_w = !only || !strcmp(only, "write");
	int do_s = !only || !strcmp(only, "send64");
	memset(&rw, 0, sizeof(rw));
	memset(&rs, 0, sizeof(rs));
	int ok = 1;
	if (do_w)
		ok &= run_workload(&ww, reps, &rw) == 0;
	if (do_s)
		ok &= run_workload(&ws, reps, &rs) == 0;
	int zok = measure_sizes(&z) == 0;
	ok &= zok;
	if (!zok)
		fprintf(stderr, "bench_engine: state sizes: a measurement failed or leaked\n");
	if (json) {
		printf("{\"reps\":%d,\"quick\":%s,\"delay_ns\":%d,\"goal_pps\":%.0f,", reps,
		       quick ? "true" : "false", DELAY_NS, GOAL_PPS);
		if (do_w) {
			print_result_json("write", &ww, &rw);
			printf(",");
		}
		if (do_s) {
			print_result_json("send64", &ws, &rs);
			printf(",");
		}
		printf("\"state\":{\"conn_bytes\":%zu,\"path_bytes\":%zu,\"stream_bytes\":%zu,"
		       "\"recv_bytes\":%zu,\"send64_bytes\":%zu},\"verified\":%s}\n",
		       z.conn, z.path, z.stream, z.recv, z.send64, ok ? "true" : "false");
		return ok ? 0 : 1;
	}
	printf("MetaRoCE engine benchmark: %s, median of %d run%s, one-way delay %d ns "
	       "(simulated), no loss\n", quick ? "quick" : "full", reps, reps > 1 ? "s" : "",
	       DELAY_NS);
	printf("%-24s %13s %15s %8s   %14s   goal >= %.0f Mpps/core\n", "", "engine",
	       "reference", "ratio", "payload", GOAL_PPS / 1e6);
	if (rw.ok)
		print_result_text("WRITE 1 MiB, MTU 4096", &ww, &rw);
	if (rs.ok)
		print_result_text("SEND 64 B, 16 streams", &ws, &rs);
	if (rw.ok && rs.ok)
		printf("packets per run: write %llu data + %llu ACK, send64 %llu data + %llu ACK; "
		       "retransmissions %llu\n",
		       (unsigned long long)rw.data_pkts, (unsigned long long)rw.ack_pkts,
		       (unsigned long long)rs.data_pkts, (unsigned long long)rs.ack_pkts,
		       (unsigned long long)(rw.retx_pkts + rs.retx_pkts));
	else if (rw.ok || rs.ok)
		printf("packets per run: %llu data + %llu ACK; retransmissions %llu\n",
		       (unsigned long long)(rw.data_pkts + rs.data_pkts),
		       (unsigned long long)(rw.ack_pkts + rs.ack_pkts),
		       (unsigned long long)(rw.retx_pkts + rs.retx_pkts));
	mrp_conn_params dp;
	mrp_conn_params_default(&dp);
	if (stall_every_ns || rto_min_ns)
		printf("receiver stalls %llu us of every %llu, rto_min %llu us; the sender's last "
		       "run: write %llu RTOs, %llu TLPs, %llu re-ports in %.1f ms simulated; "
		       "send64 %llu RTOs, %llu TLPs, %llu re-ports in %.1f ms\n",
		       (unsigned long long)stall_len_ns / 1000,
		       (unsigned long long)stall_every_ns / 1000,
		       (unsigned long long)(rto_min_ns ? rto_min_ns : dp.rto_min_ns) / 1000,
		       (unsigned long long)rw.rto_count, (unsigned long long)rw.tlp_count,
		       (unsigned long long)rw.reports, rw.sim_ms,
		       (unsigned long long)rs.rto_count, (unsigned long long)rs.tlp_count,
		       (unsigned long long)rs.reports, rs.sim_ms);
	if (zok)
		printf("engine state: %zu B per connection, %zu B per path, %zu B per stream, "
		       "%zu B per posted receive, %zu B per posted 64-B send\n",
		       z.conn, z.path, z.stream, z.recv, z.send64);
	printf("%s\n", ok ? "all data verified" : "FAILED: see the messages above");
	return ok ? 0 : 1;
}
