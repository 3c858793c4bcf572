#include "perf.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "ctl.h"
#include "log.h"
#include "mrd.h"
#include "peer.h"
#include "view.h"

#define CTL_LEN 48
#define CTL_MAGIC 0x4d525046u /* "MRPF" */
#define NCTL 8                /* control receives / sends in flight */
#define WINDOW 16             /* outstanding perf messages */
#define NRECV (2 * WINDOW)    /* posted WRITE_IMM receives at the acceptor */
#define REGION_BASE 0x100000000ull /* remote address of the scratch region */
#define MAX_REGIONS 4         /* perf receivers at once (memory bound) */
#define STREAM_CTL 0
#define STREAM_DATA 1

enum { T_HELLO = 1, T_READY, T_DONE, T_RESULT, T_ECHO_REQ, T_ECHO_REP };

/* wr_id tags: the top byte says what a completion is about. */
#define TAG_CTL_RX (1ull << 56)
#define TAG_CTL_TX (2ull << 56)
#define TAG_DATA (3ull << 56)
#define TAG_MASK (0xffull << 56)

typedef struct ctlmsg {
	uint32_t type;
	uint64_t a, b, c, d, e;
} ctlmsg;

/* State shared by both ends of a PERF or ECHO connection. */
typedef struct endpoint {
	mrd_conn *c;
	uint8_t rx[NCTL][CTL_LEN];
	uint8_t tx[NCTL][CTL_LEN];
	uint32_t tx_next, tx_busy;
	/* Messages waiting for a send slot: a slot frees when the peer has
	 * acknowledged the message in it, and a peer whose ACKs are late (a
	 * host under a flood) can owe us all NCTL while it keeps asking. */
	uint8_t q[NCTL][CTL_LEN];
	uint32_t q_head, q_len;
} endpoint;

/* Initiator. */
struct mrd_perf_op {
	endpoint ep;
	mrd *d;
	int echo;
	mrd_perf_done_cb cb;
	void *ud;
	char peer[64];
	int phase; /* 0 hello sent, 1 running, 2 done sent, 3 finished */
	uv_timer_t *wd; /* the run's overall deadline (op_watch) */
	uint64_t wd_ms; /* its length */
	/* perf */
	uint64_t seed;
	uint32_t msg_size, slots, rkey;
	uint64_t rbase, rlen;
	uint64_t duration_ns, start_ns, stop_ns, end_ns, max_bytes;
	uint8_t *bufs; /* WINDOW * msg_size */
	uint32_t free_bufs[WINDOW], nfree;
	uint64_t next_k, completed, bytes;
	uint64_t send_errors;
	/* echo (ping): SEND round trips, and PROBE round trips on every path */
	uint64_t probe_seen[MRP_MAX_PATHS]; /* probes_answered when last collected */
	uint32_t probe_sent[MRP_MAX_PATHS];
	json_t *probe_rtts[MRP_MAX_PATHS];  /* us; NULL until the path's first */
	unsigned count, done_count;
	unsigned drain; /* echoes after the last counted one, waiting for PROBE answers */
	unsigned warm;  /* uncounted echoes before the first, while paths come up */
	uint8_t warming;
	uint64_t rtt_min, rtt_max, rtt_sum;
	json_t *rtts;
	json_t *result; /* built at the end */
	char error[128];
};

/* Acceptor. */
typedef struct server {
	endpoint ep;
	mrd *d;
	uint8_t *region;
	uint32_t rkey, msg_size, slots;
	uint64_t seed, expect_k;
	uint64_t verified_msgs, verified_bytes, errors;
	int resetting; /* reset by us: the flushed requests' completions say nothing new */
} server;

static unsigned nregions;

/* ---- data pattern -------------------------------------------------------- */

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Word i of message k: cheap (vectorizes), yet a word of another message,
 * another offset or another seed never matches. */
#define PAT_STEP 0xd1342543de82ef95ull

static void pattern_fill(uint8_t *buf, uint32_t len, uint64_t seed, uint64_t k)
{
	uint64_t base = splitmix(seed ^ splitmix(k));
	for (uint32_t i = 0; i < len / 8; i++) {
		uint64_t w = base + i * PAT_STEP;
		memcpy(buf + 8 * (size_t)i, &w, 8);
	}
}

static int pattern_check(const uint8_t *buf, uint32_t len, uint64_t seed, uint64_t k)
{
	uint64_t base = splitmix(seed ^ splitmix(k));
	uint64_t bad = 0;
	for (uint32_t i = 0; i < len / 8; i++) {
		uint64_t w;
		memcpy(&w, buf + 8 * (size_t)i, 8);
		bad |= w ^ (base + i * PAT_STEP);
	}
	return bad == 0;
}

/* ---- control messages ---------------------------------------------------- */

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static int ctl_decode(const uint8_t *p, uint32_t len, ctlmsg *m)
{
	if (len != CTL_LEN || (uint32_t)(get64(p) >> 32) != CTL_MAGIC)
		return -1;
	m->type = (uint32_t)get64(p);
	if (m->type < T_HELLO || m->type > T_ECHO_REP)
		return -1;
	m->a = get64(p + 8);
	m->b = get64(p + 16);
	m->c = get64(p + 24);
	m->d = get64(p + 32);
	m->e = get64(p + 40);
	return 0;
}

static int ctl_post_tx(endpoint *ep, const uint8_t *msg)
{
	uint32_t i = ep->tx_next % NCTL;
	uint8_t *p = ep->tx[i];
	memcpy(p, msg, CTL_LEN);
	mrp_wr wr = {.wr_id = TAG_CTL_TX | i, .opcode = MRP_WR_SEND, .stream = STREAM_CTL,
		     .local = p, .len = CTL_LEN};
	int rv = mrd_conn_post_send(ep->c, &wr, uv_hrtime());
	if (rv < 0)
		return rv;
	ep->tx_next++;
	ep->tx_busy++;
	mrd_conn_touch(ep->c);
	return 0;
}

/* Send a control message now, or once a send slot frees (queued: at most
 * NCTL more). -1: neither (the caller ends the run: a message lost here
 * would leave the other side waiting for it). */
static int ctl_send(endpoint *ep, uint32_t type, uint64_t a, uint64_t b, uint64_t c)
{
	uint8_t msg[CTL_LEN];
	put64(msg, (uint64_t)CTL_MAGIC << 32 | type);
	put64(msg + 8, a);
	put64(msg + 16, b);
	put64(msg + 24, c);
	put64(msg + 32, 0);
	put64(msg + 40, 0);
	if (ep->tx_busy < NCTL && !ep->q_len)
		return ctl_post_tx(ep, msg) < 0 ? -1 : 0;
	if (ep->q_len == NCTL)
		return -1;
	memcpy(ep->q[(ep->q_head + ep->q_len++) % NCTL], msg, CTL_LEN);
	return 0;
}

static int ctl_post_rx(endpoint *ep, uint32_t i)
{
	return mrd_conn_post_recv(ep->c, STREAM_CTL, TAG_CTL_RX | i, ep->rx[i], CTL_LEN,
				  uv_hrtime());
}

static int ep_start(endpoint *ep, mrd_conn *c)
{
	ep->c = c;
	if (c->max_streams < 2)
		return -1;
	for (uint32_t i = 0; i < NCTL; i++)
		if (ctl_post_rx(ep, i) < 0)
			return -1;
	return 0;
}

/* A control-stream completion: *m filled for a received message (1), 0 for
 * anything else handled here, -1 for a bad message or failed request. */
static int ep_completion(endpoint *ep, const mrp_cqe *e, ctlmsg *m)
{
	uint64_t tag = e->wr_id & TAG_MASK;
	uint32_t i = (uint32_t)(e->wr_id & 0xff) % NCTL;
	if (tag == TAG_CTL_TX) {
		ep->tx_busy--;
		/* FLUSHED: the connection is closing, not an error of ours. */
		if (e->status == MRP_WC_FLUSHED)
			return 0;
		if (e->status != MRP_WC_SUCCESS)
			return -1;
		if (ep->q_len) {
			if (ctl_post_tx(ep, ep->q[ep->q_head]) < 0)
				return -1;
			ep->q_head = (ep->q_head + 1) % NCTL;
			ep->q_len--;
		}
		return 0;
	}
	if (e->status != MRP_WC_SUCCESS)
		return e->status == MRP_WC_FLUSHED ? 0 : -1;
	int rv = ctl_decode(ep->rx[i], e->byte_len, m);
	ctl_post_rx(ep, i);
	return rv < 0 ? -1 : 1;
}

/* ---- acceptor ------------------------------------------------------------ */

static uint8_t *srv_resolve(mrd_conn *c, uint32_t rkey, uint64_t addr, uint64_t len,
			    unsigned access, int *pnak)
{
	server *s = c->ud;
	if (!s || !s->region || rkey != s->rkey) {
		*pnak = MRP_NAK_INVALID_RKEY;
		return NULL;
	}
	if (!(access & MRP_ACCESS_REMOTE_WRITE) || (access & MRP_ACCESS_REMOTE_READ)) {
		*pnak = MRP_NAK_ACCESS;
		return NULL;
	}
	if (addr < REGION_BASE || len > MRD_PERF_REGION_BYTES ||
	    addr - REGION_BASE > MRD_PERF_REGION_BYTES - len) {
		*pnak = MRP_NAK_OUT_OF_BOUNDS;
		return NULL;
	}
	return s->region + (addr - REGION_BASE);
}

static int srv_established(mrd_conn *c)
{
	server *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	s->d = c->d;
	c->ud = s;
	return ep_start(&s->ep, c);
}

/* A reply the server cannot send: the initiator would wait for it, so the
 * connection is reset and its run ends with that. */
static void srv_reply(mrd_conn *c, server *s, uint32_t type, uint64_t a, uint64_t b,
		      uint64_t cc)
{
	if (ctl_send(&s->ep, type, a, b, cc) < 0) {
		if (!s->resetting)
			mrd_warn("conn %08x: perf/echo server: cannot send a control message: "
				 "resetting", c->local_id);
		s->resetting = 1;
		mrd_conn_close(c, 1);
	}
}

static void srv_hello(mrd_conn *c, server *s, const ctlmsg *m)
{
	uint64_t size = m->b;
	if (s->region || size < MRD_PERF_MSG_MIN || size > MRD_PERF_MSG_MAX || size % 8 ||
	    nregions >= MAX_REGIONS || c->service_id != MRD_SVC_PERF) {
		srv_reply(c, s, T_READY, 0, 0, 0); /* rkey 0: busy or refused */
		return;
	}
	/* Fresh anonymous pages: zero without touching them here. Zeroing
	 * 64 MiB in the loop stalled the receiver for 40-150 ms, long enough
	 * for the sender's HELLO to exhaust its retries (tests/netns/FINDINGS.md). */
	void *region = mmap(NULL, MRD_PERF_REGION_BYTES, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (region == MAP_FAILED) {
		srv_reply(c, s, T_READY, 0, 0, 0);
		return;
	}
	s->region = region;
	nregions++;
	s->seed = m->a;
	s->msg_size = (uint32_t)size;
	s->slots = MRD_PERF_REGION_BYTES / s->msg_size;
	while (!s->rkey)
		if (getrandom(&s->rkey, sizeof(s->rkey), 0) != sizeof(s->rkey))
			s->rkey = 0;
	for (uint32_t i = 0; i < NRECV; i++)
		mrd_conn_post_recv(c, STREAM_DATA, TAG_DATA, NULL, 0, uv_hrtime());
	srv_reply(c, s, T_READY, s->rkey, REGION_BASE, MRD_PERF_REGION_BYTES);
	mrd_info("conn %08x: perf receiver ready: %u MiB region, %u-byte messages",
		 c->local_id, MRD_PERF_REGION_BYTES >> 20, s->msg_size);
}

static void srv_completion(mrd_conn *c, const mrp_cqe *e)
{
	server *s = c->ud;
	if (!s)
		return;
	if ((e->wr_id & TAG_MASK) == TAG_DATA) {
		if (e->status != MRP_WC_SUCCESS) {
			if (e->status != MRP_WC_FLUSHED)
				s->errors++;
			return;
		}
		/* Message number: the low 32 bits are in the immediate, the
		 * rest follows from completions coming in order. */
		uint64_t k = s->expect_k;
		if (!e->has_imm || e->imm != (uint32_t)k || !s->region) {
			s->errors++;
		} else {
			uint64_t off = (k % s->slots) * (uint64_t)s->msg_size;
			if (e->byte_len == s->msg_size &&
			    pattern_check(s->region + off, s->msg_size, s->seed, k)) {
				s->verified_msgs++;
				s->verified_bytes += s->msg_size;
			} else {
				s->errors++;
			}
		}
		s->expect_k++;
		mrd_conn_post_recv(c, STREAM_DATA, TAG_DATA, NULL, 0, uv_hrtime());
		return;
	}
	ctlmsg m;
	int rv = ep_completion(&s->ep, e, &m);
	if (rv < 0) {
		if (!s->resetting)
			mrd_warn("conn %08x: bad control message or failed send (status %s, "
				 "opcode %#x, %u bytes): resetting", c->local_id,
				 mrp_wc_status_name(e->status), e->opcode, e->byte_len);
		s->resetting = 1;
		mrd_conn_close(c, 1);
		return;
	}
	if (rv == 0)
		return;
	switch (m.type) {
	case T_HELLO:
		srv_hello(c, s, &m);
		break;
	case T_DONE:
		srv_reply(c, s, T_RESULT, s->verified_msgs, s->verified_bytes, s->errors);
		mrd_info("conn %08x: perf done: %llu messages, %llu bytes verified, %llu "
			 "errors (sender: %llu messages)", c->local_id,
			 (unsigned long long)s->verified_msgs,
			 (unsigned long long)s->verified_bytes, (unsigned long long)s->errors,
			 (unsigned long long)m.a);
		break;
	case T_ECHO_REQ:
		srv_reply(c, s, T_ECHO_REP, m.a, m.b, 0);
		break;
	default:
		mrd_conn_close(c, 1);
		break;
	}
}

static void srv_ended(mrd_conn *c, const char *why)
{
	(void)why;
	server *s = c->ud;
	if (!s)
		return;
	if (s->region) {
		munmap(s->region, MRD_PERF_REGION_BYTES);
		nregions--;
	}
	free(s);
	c->ud = NULL;
}

static const mrd_conn_ops srv_ops = {
	.established = srv_established,
	.completion = srv_completion,
	.ended = srv_ended,
	.resolve = srv_resolve,
};

const mrd_conn_ops *mrd_perf_service(void *ud, uint32_t service_id)
{
	(void)ud;
	if (service_id == MRD_SVC_PERF || service_id == MRD_SVC_ECHO)
		return &srv_ops;
	return NULL;
}

/* ---- initiator ----------------------------------------------------------- */

static void wd_closed(uv_handle_t *h)
{
	free(h);
}

static void op_unwatch(mrd_perf_op *op)
{
	if (op->wd) {
		uv_close((uv_handle_t *)op->wd, wd_closed);
		op->wd = NULL;
	}
}

static void op_finish(mrd_perf_op *op, const char *err);

static void on_wd(uv_timer_t *t)
{
	mrd_perf_op *op = t->data;
	char err[96];
	snprintf(err, sizeof(err), "the run did not end within %llu s (no answer from the peer)",
		 (unsigned long long)op->wd_ms / 1000);
	op_finish(op, err);
}

/* End the run with an error if it has not ended in op->wd_ms: every wait
 * of a run is for the peer, and a peer that stops answering on a
 * connection that stays up (its ACKs still come) must not hold the run,
 * and the control client waiting for it, forever. */
static int op_watch(mrd *d, mrd_perf_op *op)
{
	op->wd = malloc(sizeof(*op->wd));
	if (!op->wd || uv_timer_init(d->loop, op->wd) < 0) {
		free(op->wd);
		op->wd = NULL;
		return -1;
	}
	op->wd->data = op;
	uv_timer_start(op->wd, on_wd, op->wd_ms, 0);
	return 0;
}

static void op_finish(mrd_perf_op *op, const char *err)
{
	if (op->phase == 3)
		return;
	op->phase = 3;
	op_unwatch(op);
	if (err && !op->error[0])
		snprintf(op->error, sizeof(op->error), "%s", err);
	if (op->ep.c && !op->error[0]) {
		/* Telemetry while the connection still exists. */
		json_object_set_new(op->result, "conn", mrd_json_conn(op->ep.c));
		json_object_set_new(op->result, "paths", mrd_json_paths(op->ep.c));
	}
	if (op->cb) {
		if (op->error[0])
			op->cb(op->ud, NULL, op->error);
		else
			op->cb(op->ud, json_incref(op->result), NULL);
		op->cb = NULL;
	}
	if (op->ep.c)
		mrd_conn_close(op->ep.c, 0);
}

static void op_free(mrd_perf_op *op)
{
	op_unwatch(op);
	for (unsigned i = 0; i < MRP_MAX_PATHS; i++)
		json_decref(op->probe_rtts[i]);
	free(op->bufs);
	json_decref(op->result);
	json_decref(op->rtts);
	free(op);
}

static void op_post_data(mrd_perf_op *op, uint64_t now)
{
	mrd_conn *c = op->ep.c;
	while (op->nfree && now < op->stop_ns &&
	       (!op->max_bytes || op->next_k * op->msg_size < op->max_bytes)) {
		uint32_t b = op->free_bufs[--op->nfree];
		uint8_t *buf = op->bufs + (size_t)b * op->msg_size;
		uint64_t k = op->next_k;
		pattern_fill(buf, op->msg_size, op->seed, k);
		mrp_wr wr = {
			.wr_id = TAG_DATA | b,
			.opcode = MRP_WR_WRITE_IMM,
			.stream = STREAM_DATA,
			.local = buf,
			.len = op->msg_size,
			.remote_addr = op->rbase + (k % op->slots) * (uint64_t)op->msg_size,
			.rkey = op->rkey,
			.imm = (uint32_t)k,
		};
		int rv = mrd_conn_post_send(c, &wr, now);
		if (rv < 0) {
			op->free_bufs[op->nfree++] = b;
			snprintf(op->error, sizeof(op->error), "post: %s", mrp_strerror(rv));
			op_finish(op, NULL);
			return;
		}
		op->next_k++;
	}
	mrd_conn_touch(c);
}

/* ping: PROBEs of this ping answered on path i. */
static size_t ping_answered(const mrd_perf_op *op, unsigned i)
{
	return op->probe_rtts[i] ? json_array_size(op->probe_rtts[i]) : 0;
}

/* ping: take the PROBE answers that came since the last round and, unless
 * this is the last round, probe every active path again. Each answer is one
 * RTT sample of one path (the engine's PROBE/PROBE_ACK, SPEC 8). */

static void ping_probe_round(mrd_perf_op *op, int again, uint64_t now)
{
	mrd_conn *c = op->ep.c;
	if (!c || !mrd_conn_has_engine(c))
		return;
	for (unsigned i = 0; i < c->max_paths && i < MRP_MAX_PATHS; i++) {
		mrp_path_info pi;
		if (mrd_conn_path_info(c, i, &pi) < 0)
			continue;
		/* One PROBE at most is out on a path: an answer while one of
		 * ours is out is ours; one without is the engine's own (the
		 * initiator's confirmation PROBE) and not this ping's. */
		if (op->probe_sent[i] > ping_answered(op, i) &&
		    pi.probes_answered != op->probe_seen[i]) {
			if (!op->probe_rtts[i])
				op->probe_rtts[i] = json_array();
			json_array_append_new(op->probe_rtts[i],
					      json_real((double)pi.probe_rtt_ns / 1e3));
		}
		op->probe_seen[i] = pi.probes_answered;
		/* A path in service that this ping has not probed yet (the
		 * engine's own PROBE was out, or due, at every round so far:
		 * one PROBE at a time) is tried at every round, the last ones
		 * too, and keeps the ping draining (ping_probes_out()). */
		if ((again || (!op->probe_sent[i] && pi.state == MRP_PATH_ACTIVE)) &&
		    mrd_conn_path_probe(c, (uint16_t)i, now) == 0)
			op->probe_sent[i]++;
	}
	mrd_conn_touch(c);
}

/* Uncounted echoes a ping sends at most after its last counted one while
 * PROBE answers are still out. */
#define PING_DRAIN 64

/* ping: a PROBE of this ping still unanswered on some path. */
static int ping_probes_out(const mrd_perf_op *op)
{
	mrd_conn *c = op->ep.c;
	for (unsigned i = 0; i < MRP_MAX_PATHS; i++) {
		if (op->probe_sent[i] > ping_answered(op, i))
			return 1;
		/* or a path in service not probed yet (ping_probe_round()) */
		mrp_path_info pi;
		if (!op->probe_sent[i] && c && mrd_conn_has_engine(c) && i < c->max_paths &&
		    mrd_conn_path_info(c, i, &pi) == 0 && pi.state == MRP_PATH_ACTIVE)
			return 1;
	}
	return 0;
}

/* The per-path PROBE results of a ping. */
static json_t *ping_probe_json(const mrd_perf_op *op)
{
	json_t *a = json_array();
	mrd_conn *c = op->ep.c;
	for (unsigned i = 0; i < MRP_MAX_PATHS; i++) {
		if (!op->probe_sent[i])
			continue;
		json_t *o = json_object();
		json_object_set_new(o, "path", json_integer(i));
		mrp_path_info pi;
		if (c && mrd_conn_has_engine(c) && mrd_conn_path_info(c, i, &pi) == 0) {
			json_object_set_new(o, "plane", json_integer(pi.plane));
			json_object_set_new(o, "sport", json_integer(pi.sport));
			json_object_set_new(o, "state", json_string(mrp_path_state_name(pi.state)));
		}
		json_object_set_new(o, "sent", json_integer(op->probe_sent[i]));
		json_t *r = op->probe_rtts[i] ? op->probe_rtts[i] : json_array();
		if (op->probe_rtts[i])
			json_incref(r);
		size_t n = json_array_size(r), k;
		json_t *v;
		double mn = 0, mx = 0, sum = 0;
		json_array_foreach(r, k, v) {
			double x = json_real_value(v);
			if (!k || x < mn)
				mn = x;
			if (x > mx)
				mx = x;
			sum += x;
		}
		json_object_set_new(o, "answered", json_integer((json_int_t)n));
		json_object_set_new(o, "rtt_us", r);
		if (n) {
			json_object_set_new(o, "min_us", json_real(mn));
			json_object_set_new(o, "avg_us", json_real(sum / (double)n));
			json_object_set_new(o, "max_us", json_real(mx));
		}
		json_array_append_new(a, o);
	}
	return a;
}

/* Uncounted echoes a ping sends at most before its first counted one while
 * paths of a new connection come up; their echo index starts here. */
#define PING_WARM 16
#define PING_WARM_BASE (1ull << 62)

/* ping: a path of the connection is PROBING: waiting for the answer that
 * puts it in service (SPEC 8.1, and on a new connection the peer's
 * announced addresses other than the handshake's, 9.5: one round trip). */
static int ping_paths_settling(const mrd_perf_op *op)
{
	mrd_conn *c = op->ep.c;
	for (unsigned i = 0; c && mrd_conn_has_engine(c) && i < c->max_paths; i++) {
		mrp_path_info pi;
		if (mrd_conn_path_info(c, i, &pi) == 0 && pi.state == MRP_PATH_PROBING)
			return 1;
	}
	return 0;
}

/* ping: the counted part starts (every path in service is probed). */
static int ping_start(mrd_perf_op *op)
{
	op->warming = 0;
	op->start_ns = uv_hrtime();
	ping_probe_round(op, 1, op->start_ns);
	return ctl_send(&op->ep, T_ECHO_REQ, 0, op->start_ns, 0);
}

static int op_established(mrd_conn *c)
{
	mrd_perf_op *op = c->ud;
	if (ep_start(&op->ep, c) < 0)
		return -1;
	if (op->echo) {
		/* A new connection's paths to the peer's other planes come up
		 * with their first PROBE's answer: echo (uncounted) until
		 * they have, so that every path is measured. */
		if (ping_paths_settling(op)) {
			op->warming = 1;
			return ctl_send(&op->ep, T_ECHO_REQ, PING_WARM_BASE, uv_hrtime(), 0) < 0 ? -1
												 : 0;
		}
		return ping_start(op) < 0 ? -1 : 0;
	}
	return ctl_send(&op->ep, T_HELLO, op->seed, op->msg_size, 0) < 0 ? -1 : 0;
}

static void op_ready(mrd_perf_op *op, const ctlmsg *m)
{
	if (op->phase != 0 || op->echo)
		return;
	if (m->a == 0 || m->a > UINT32_MAX || m->c < (uint64_t)op->msg_size * 2 * WINDOW ||
	    m->b > UINT64_MAX - m->c) {
		op_finish(op, "the peer refused the perf run (busy or bad parameters)");
		return;
	}
	op->rkey = (uint32_t)m->a;
	op->rbase = m->b;
	op->rlen = m->c;
	op->slots = (uint32_t)(op->rlen / op->msg_size);
	op->phase = 1;
	op->start_ns = uv_hrtime();
	op->stop_ns = op->start_ns + op->duration_ns;
	op_post_data(op, op->start_ns);
}

static void ping_finish(mrd_perf_op *op, mrd_conn *c);

/* A control message of the run, or the run ends: the peer would otherwise
 * wait for it, and we for its answer. */
static void op_send(mrd_perf_op *op, uint32_t type, uint64_t a, uint64_t b)
{
	if (ctl_send(&op->ep, type, a, b, 0) < 0)
		op_finish(op, "cannot send a control message to the peer");
}

static void op_completion(mrd_conn *c, const mrp_cqe *e)
{
	mrd_perf_op *op = c->ud;
	uint64_t now = uv_hrtime();
	if ((e->wr_id & TAG_MASK) == TAG_DATA) {
		op->free_bufs[op->nfree++] = (uint32_t)(e->wr_id & 0xff) % WINDOW;
		if (e->status != MRP_WC_SUCCESS) {
			op->send_errors++;
			if (op->phase < 3) {
				snprintf(op->error, sizeof(op->error), "WRITE_IMM failed: %s",
					 mrp_wc_status_str(e->status));
				op_finish(op, NULL);
			}
			return;
		}
		op->completed++;
		op->bytes += e->byte_len ? e->byte_len : op->msg_size;
		op->end_ns = now;
		if (op->phase == 1) {
			op_post_data(op, now);
			if (op->nfree == WINDOW) { /* all in, time's up */
				op->phase = 2;
				op_send(op, T_DONE, op->completed, op->bytes);
			}
		}
		return;
	}
	ctlmsg m;
	int rv = ep_completion(&op->ep, e, &m);
	if (rv < 0) {
		if (e->status != MRP_WC_SUCCESS) {
			snprintf(op->error, sizeof(op->error), "control %s failed: %s",
				 (e->wr_id & TAG_MASK) == TAG_CTL_TX ? "send" : "receive",
				 mrp_wc_status_str(e->status));
			op_finish(op, NULL);
		} else if ((e->wr_id & TAG_MASK) == TAG_CTL_TX) {
			op_finish(op, "cannot send a control message to the peer");
		} else {
			op_finish(op, "bad control message from the peer");
		}
		return;
	}
	if (rv == 0 || op->phase == 3)
		return;
	switch (m.type) {
	case T_READY:
		op_ready(op, &m);
		break;
	case T_RESULT: {
		if (op->phase != 2)
			break;
		double secs = (double)(op->end_ns - op->start_ns) / 1e9;
		json_t *r = op->result;
		json_object_set_new(r, "seconds", json_real(secs));
		json_object_set_new(r, "msg_size", json_integer(op->msg_size));
		json_object_set_new(r, "messages", json_integer((json_int_t)op->completed));
		json_object_set_new(r, "bytes", json_integer((json_int_t)op->bytes));
		json_object_set_new(r, "goodput_gbps",
				    json_real(secs > 0 ? (double)op->bytes * 8 / secs / 1e9 : 0));
		json_object_set_new(r, "verified_messages", json_integer((json_int_t)m.a));
		json_object_set_new(r, "verified_bytes", json_integer((json_int_t)m.b));
		json_object_set_new(r, "verify_errors", json_integer((json_int_t)m.c));
		json_object_set_new(r, "verified",
				    json_boolean(m.c == 0 && m.a == op->completed &&
						 m.b == op->bytes));
		op_finish(op, NULL);
		break;
	}
	case T_ECHO_REP: {
		if (op->echo && op->warming && m.a == PING_WARM_BASE + op->warm) {
			if (ping_paths_settling(op) && ++op->warm < PING_WARM)
				op_send(op, T_ECHO_REQ, PING_WARM_BASE + op->warm, uv_hrtime());
			else if (ping_start(op) < 0)
				op_finish(op, "cannot send a control message to the peer");
			break;
		}
		if (op->echo && op->done_count == op->count && m.a == op->count + op->drain &&
		    m.b <= now) {
			/* Draining: the counted round trips are done, the last
			 * PROBEs may still be on their way back (a peer or a
			 * host slow to schedule answers them after the SEND):
			 * echo again, uncounted, up to PING_DRAIN times. */
			ping_probe_round(op, 0, now);
			if (ping_probes_out(op) && ++op->drain < PING_DRAIN) {
				op_send(op, T_ECHO_REQ, op->count + op->drain, uv_hrtime());
				break;
			}
			ping_finish(op, c);
			break;
		}
		if (!op->echo || m.a != op->done_count || m.b > now)
			break;
		uint64_t rtt = now - m.b;
		json_array_append_new(op->rtts, json_real((double)rtt / 1e3));
		op->rtt_sum += rtt;
		if (!op->done_count || rtt < op->rtt_min)
			op->rtt_min = rtt;
		if (rtt > op->rtt_max)
			op->rtt_max = rtt;
		if (++op->done_count < op->count) {
			ping_probe_round(op, 1, now);
			op_send(op, T_ECHO_REQ, op->done_count, uv_hrtime());
			break;
		}
		ping_probe_round(op, 0, now);
		if (ping_probes_out(op)) {
			op_send(op, T_ECHO_REQ, op->count, uv_hrtime());
			break;
		}
		ping_finish(op, c);
		break;
	}
	default:
		op_finish(op, "unexpected control message from the peer");
		break;
	}
}

/* ping: the result, once the counted round trips are done and every PROBE
 * answered (or PING_DRAIN more echoes did not bring the answer). */
static void ping_finish(mrd_perf_op *op, mrd_conn *c)
{
	json_t *r = op->result;
	json_object_set_new(r, "probes", ping_probe_json(op));
	json_object_set_new(r, "count", json_integer(op->count));
	json_object_set_new(r, "rtt_us", json_incref(op->rtts));
	json_object_set_new(r, "min_us", json_real((double)op->rtt_min / 1e3));
	json_object_set_new(r, "avg_us", json_real((double)op->rtt_sum / op->count / 1e3));
	json_object_set_new(r, "max_us", json_real((double)op->rtt_max / 1e3));
	json_object_set_new(r, "handshake_us",
			    json_real((double)(c->established_ns - c->created_ns) / 1e3));
	op_finish(op, NULL);
}

static void op_ended(mrd_conn *c, const char *why)
{
	mrd_perf_op *op = c->ud;
	if (!op)
		return;
	op->ep.c = NULL;
	if (op->phase != 3) {
		char err[128];
		snprintf(err, sizeof(err), "connection ended: %s", why);
		op_finish(op, err);
	}
	op_free(op);
	c->ud = NULL;
}

static const mrd_conn_ops op_ops = {
	.established = op_established,
	.completion = op_completion,
	.ended = op_ended,
	.resolve = NULL, /* the initiator exposes no memory */
};

static int op_start(mrd *d, const char *peer, mrd_perf_op *op, uint32_t service,
		    mrd_perf_op **pop, char *err, size_t errlen)
{
	mrd_sockaddr to;
	socklen_t tolen;
	if (mrd_sockaddr_parse(&to, &tolen, peer, d->cfg.port) < 0) {
		snprintf(err, errlen, "'%s' is not ADDRESS[:PORT]", peer);
		op_free(op);
		return -1;
	}
	op->d = d;
	if (op_watch(d, op) < 0) {
		snprintf(err, errlen, "out of memory");
		op_free(op);
		return -1;
	}
	mrd_sockaddr_str(&to, op->peer, sizeof(op->peer));
	op->result = json_object();
	json_object_set_new(op->result, "peer", json_string(op->peer));
	mrd_conn *c;
	if (mrd_conn_connect(d, &to, tolen, service, &op_ops, op, &c, err, errlen) < 0) {
		op_free(op);
		return -1;
	}
	op->ep.c = c;
	*pop = op;
	return 0;
}

int mrd_perf_start(mrd *d, const char *peer, double seconds, uint64_t max_bytes,
		   uint32_t msg_size, mrd_perf_done_cb cb, void *ud, mrd_perf_op **pop,
		   char *err, size_t errlen)
{
	if (!(seconds > 0 && seconds <= MRD_PERF_SECONDS_MAX)) {
		snprintf(err, errlen, "seconds: %g is out of range (0-%g]", seconds,
			 MRD_PERF_SECONDS_MAX);
		return -1;
	}
	if (msg_size < MRD_PERF_MSG_MIN || msg_size > MRD_PERF_MSG_MAX || msg_size % 8) {
		snprintf(err, errlen, "msg_size: %u must be a multiple of 8 in %u-%u", msg_size,
			 MRD_PERF_MSG_MIN, MRD_PERF_MSG_MAX);
		return -1;
	}
	mrd_perf_op *op = calloc(1, sizeof(*op));
	if (op)
		op->bufs = malloc((size_t)WINDOW * msg_size);
	if (!op || !op->bufs) {
		free(op);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	op->cb = cb;
	op->ud = ud;
	op->msg_size = msg_size;
	op->duration_ns = (uint64_t)(seconds * 1e9);
	op->wd_ms = (uint64_t)(seconds * 1e3) + MRD_PERF_GRACE_MS;
	op->max_bytes = max_bytes;
	while (getrandom(&op->seed, sizeof(op->seed), 0) != sizeof(op->seed))
		;
	for (uint32_t i = 0; i < WINDOW; i++)
		op->free_bufs[op->nfree++] = i;
	return op_start(d, peer, op, MRD_SVC_PERF, pop, err, errlen);
}

int mrd_ping_start(mrd *d, const char *peer, unsigned count, mrd_perf_done_cb cb,
		   void *ud, mrd_perf_op **pop, char *err, size_t errlen)
{
	if (count < 1 || count > 10000) {
		snprintf(err, errlen, "count: %u is out of range (1-10000)", count);
		return -1;
	}
	mrd_perf_op *op = calloc(1, sizeof(*op));
	if (!op) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	op->echo = 1;
	op->wd_ms = MRD_PERF_GRACE_MS + (uint64_t)count * MRD_PING_RTT_MS;
	op->cb = cb;
	op->ud = ud;
	op->count = count;
	op->rtts = json_array();
	return op_start(d, peer, op, MRD_SVC_ECHO, pop, err, errlen);
}

void mrd_perf_cancel(mrd_perf_op *op)
{
	op->cb = NULL;
	op_unwatch(op);
	if (op->phase != 3) {
		op->phase = 3;
		if (op->ep.c)
			mrd_conn_close(op->ep.c, 0);
	}
}

/* ---- control commands: ping and perf --------------------------------------- */

/* One request of a control client, holding the client's operation slot
 * until the run reports (req_done) or the client goes (req_cancel). */
typedef struct perf_req {
	mrd_ctl_client *cl;
	json_t *id;
	mrd_perf_op *op;
} perf_req;

static void req_done(void *ud, json_t *result, const char *err)
{
	perf_req *q = ud;
	mrd_ctl_clear_op(q->cl);
	if (err)
		mrd_ctl_error(q->cl, q->id, "failed", "%s", err);
	else
		mrd_ctl_reply(q->cl, q->id, result);
	json_decref(q->id);
	free(q);
}

static void req_cancel(void *ud)
{
	perf_req *q = ud;
	mrd_perf_cancel(q->op);
	json_decref(q->id);
	free(q);
}

static void cmd_run(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	mrd *d = mrd_ctl_daemon(cl);
	const char *peer = NULL;
	json_t *jp = json_object_get(args, "peer");
	if (!json_is_string(jp) || !*(peer = json_string_value(jp))) {
		mrd_ctl_error(cl, id, "bad_request", "%s: args.peer (\"ADDRESS[:PORT]\") is required",
			      cmd);
		return;
	}
	perf_req *q = calloc(1, sizeof(*q));
	if (!q) {
		mrd_ctl_error(cl, id, "failed", "out of memory");
		return;
	}
	q->cl = cl;
	q->id = id ? json_incref(id) : NULL;
	char err[160];
	int rv;
	if (strcmp(cmd, "perf") == 0) {
		json_t *js = json_object_get(args, "seconds"), *jm = json_object_get(args, "msg_size");
		json_t *jb = json_object_get(args, "bytes");
		double secs = js ? json_number_value(js) : 3.0;
		json_int_t msz = jm ? (json_is_integer(jm) ? json_integer_value(jm) : -1)
				    : MRD_PERF_MSG_DEFAULT;
		json_int_t bytes = jb ? (json_is_integer(jb) ? json_integer_value(jb) : -1) : 0;
		if ((js && !json_is_number(js)) || msz < 0 || msz > UINT32_MAX || bytes < 0) {
			json_decref(q->id);
			free(q);
			mrd_ctl_error(cl, id, "bad_request", "perf: args.seconds must be a number, "
				      "args.msg_size and args.bytes non-negative integers");
			return;
		}
		rv = mrd_perf_start(d, peer, secs, (uint64_t)bytes, (uint32_t)msz, req_done, q,
				    &q->op, err, sizeof(err));
	} else {
		json_t *jc = json_object_get(args, "count");
		json_int_t count = jc ? (json_is_integer(jc) ? json_integer_value(jc) : -1) : 5;
		if (count < 1 || count > 10000) {
			json_decref(q->id);
			free(q);
			mrd_ctl_error(cl, id, "bad_request", "ping: args.count must be an integer 1-10000");
			return;
		}
		rv = mrd_ping_start(d, peer, (unsigned)count, req_done, q, &q->op, err, sizeof(err));
	}
	if (rv < 0) {
		json_decref(q->id);
		free(q);
		mrd_ctl_error(cl, id, "failed", "%s: %s", cmd, err);
		return;
	}
	mrd_ctl_set_op(cl, req_cancel, q); /* cannot fail: the table refused a busy client */
	mrd_peer_run(d);
}

static const mrd_ctl_cmd cmds[] = {
	{"ping", cmd_run, MRD_CTL_ACT, 1},
	{"perf", cmd_run, MRD_CTL_ACT, 1},
};

int mrd_perf_register(mrd *d)
{
	return mrd_ctl_register(d, cmds, sizeof(cmds) / sizeof(cmds[0]));
}
