/*
 * metaroce-perf: application-to-application benchmark through libmetaroce
 * and two metarocd (like perftest's ib_write_bw / ib_send_lat).
 *
 *   metaroce-perf server [--socket P] [--service ID] [--once] [--json]
 *   metaroce-perf client PEER [--port N] [--socket P] [--service ID]
 *                 --op write|write_imm|send|send_imm|read --size N --streams S
 *                 --depth D (--seconds T | --count N) [--verify] [--json]
 *                 [--pingpong [--unsignaled]] [--busy-poll USEC]
 *
 * The connection has S data streams plus one control stream (index S) on
 * which the client sends its parameters (setup), the server answers with
 * its buffer (ready), and at the end the client sends how many messages it
 * sent per stream (done) and the server answers with what it received and
 * verified (result).
 *
 * Data: each stream keeps D requests in flight, posted round robin over the
 * streams (interleaved) with one doorbell per pass. Message seq of stream s
 * uses the source slot s*D + seq%D. WRITE* target the server's slot
 * s*D + seq%D (write) or s*R + seq%R (write_imm, R = 2D); SEND* land in the
 * server's R posted receives per stream.
 *
 * --verify: every message is filled with a pattern of (seed, stream, seq).
 * The server checks each SEND/SEND_IMM/WRITE_IMM when its completion
 * arrives (byte count, immediate = seq, every byte, stream order), then
 * reposts the receive: with R receives per stream a WRITE_IMM cannot land
 * in a slot the server has not checked yet (it would find no receive and
 * be retried, RNR), so the check never races the next write. Plain WRITE
 * has no receive-side completion: the server checks, after the done
 * message, that every slot holds the pattern of the last message written
 * to it. The client checks its own completions: exactly once and in order
 * per stream. Any error, lost or duplicated completion exits 1.
 *
 * read: the client RDMA READs the server's slot s*D + seq%D into its own
 * slot; with --verify the server fills each of its slots (s, k) with the
 * pattern of (seed, s, k) before it answers ready, and the client checks
 * every byte of each READ when it completes.
 *
 * --pingpong: 8-byte (or --size) SENDs echoed by the server, one at a time:
 * latency percentiles (half the round trip, like sockperf) and round trips
 * per second. --unsignaled: the pings and the echoes are posted
 * MRC_POST_UNSIGNALED (verbs programs post most sends so), and the client
 * waits for the pong alone.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metaroce.h"

#define PERF_MAGIC 0x4d525046u /* "MRPF" */
#define DEFAULT_SERVICE 4791u
#define CTL_BUF 65536u
#define MAX_STREAMS 8192u
#define DEFAULT_TIMEOUT_MS 30000

enum { OP_SETUP = 1, OP_READY, OP_DONE, OP_RESULT };

typedef struct setup_msg {
	uint32_t magic, kind;
	uint32_t op, streams, depth, verify, pingpong, unsignaled; /* unsignaled: 0 or 1, with pingpong */
	uint64_t size, seed;
} setup_msg;

typedef struct ready_msg {
	uint32_t magic, kind;
	int32_t status;
	uint32_t rkey;
	uint64_t addr, len;
} ready_msg;

typedef struct done_msg {
	uint32_t magic, kind;
	uint32_t streams, reserved;
	uint64_t sent[]; /* per stream */
} done_msg;

typedef struct result_msg {
	uint32_t magic, kind;
	uint64_t received, verified, verify_errors, lost, duplicated, bad_status;
} result_msg;

/* wr_id: control requests have the top bit; data: stream << 40 | seq. */
#define WR_CTL (1ull << 63)
#define WR_STREAM(id) ((uint32_t)(((id) >> 40) & 0x7fffff))
#define WR_SEQ(id) ((id) & ((1ull << 40) - 1))
#define WR_ID(s, q) (((uint64_t)(s) << 40) | ((q) & ((1ull << 40) - 1)))

typedef struct opts {
	const char *socket, *peer;
	uint16_t port;
	uint32_t service;
	int op;
	uint64_t size;
	uint32_t streams, depth;
	double seconds;
	uint64_t count;
	int verify, json, pingpong, unsignaled, once;
	uint32_t busy_usec;
} opts;

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "metaroce-perf: %s: %s\n", what, mrc_strerror(rc));
	exit(2);
}

/* ---- the pattern ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Word i of message (stream, seq): distinct for every message and every
 * position, so a misplaced, stale or foreign byte is caught. */
static uint64_t pat_base(uint64_t seed, uint32_t stream, uint64_t seq)
{
	return mix64(seed ^ ((uint64_t)stream << 44) ^ (seq * 0x9e3779b97f4a7c15ull));
}

static void pat_fill(uint8_t *p, uint64_t len, uint64_t seed, uint32_t stream, uint64_t seq)
{
	uint64_t b = pat_base(seed, stream, seq), i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = b ^ (i * 0x9e3779b97f4a7c15ull);
		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		uint64_t w = b ^ (i * 0x9e3779b97f4a7c15ull);
		memcpy(p + i, &w, len - i);
	}
}

static int pat_check(const uint8_t *p, uint64_t len, uint64_t seed, uint32_t stream, uint64_t seq)
{
	uint64_t b = pat_base(seed, stream, seq), i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = b ^ (i * 0x9e3779b97f4a7c15ull), v;
		memcpy(&v, p + i, 8);
		if (v != w)
			return -1;
	}
	if (i < len) {
		uint64_t w = b ^ (i * 0x9e3779b97f4a7c15ull);
		if (memcmp(p + i, &w, len - i))
			return -1;
	}
	return 0;
}

/* ---- common ---- */

typedef struct perf {
	opts o;
	mrc_session *s;
	mrc_ctx *ctx;
	mrc_conn *conn;
	uint8_t *ctl;   /* control buffers: [0, CTL_BUF) receive, [CTL_BUF, 2*CTL_BUF) send */
	mrc_mr *ctl_mr;
	uint8_t *data;
	uint64_t data_len;
	mrc_mr *data_mr;
	uint16_t ctl_stream;
} perf;

static const char *op_name(int op)
{
	switch (op) {
	case MRC_OP_WRITE:
		return "write";
	case MRC_OP_WRITE_IMM:
		return "write_imm";
	case MRC_OP_SEND:
		return "send";
	case MRC_OP_SEND_IMM:
		return "send_imm";
	case MRC_OP_READ:
		return "read";
	}
	return "?";
}

/* The connection's state follows its events, which mrc_wait_cq() reads
 * while it sleeps (so the next client's INCOMING stays queued for
 * mrc_accept()). */
static int conn_alive(perf *p)
{
	return mrc_conn_status(p->conn) == MRC_CONN_ESTABLISHED;
}

/* A completion of an earlier connection on the shared context (a flush
 * after its close): not ours. */
static int foreign(perf *p, const mrc_wc *wc)
{
	return wc->conn != mrc_conn_handle(p->conn);
}

static int post_ctl_recv(perf *p)
{
	return mrc_post_recv(p->ctx, p->conn, p->ctl_stream, p->ctl, CTL_BUF, p->ctl_mr, WR_CTL | 1, 0);
}

static int post_ctl_send(perf *p, const void *msg, uint32_t len)
{
	memcpy(p->ctl + CTL_BUF, msg, len);
	return mrc_post_send(p->ctx, p->conn, p->ctl_stream, p->ctl + CTL_BUF, len, p->ctl_mr,
			     WR_CTL | 2, 0);
}

/* Wait for the control receive (and any control send) to complete; data
 * completions met on the way go to on_data. Returns the received length or
 * a negative error. */
typedef int (*data_fn)(perf *p, const mrc_wc *wc, void *arg);

static long wait_ctl_recv(perf *p, int timeout_ms, data_fn on_data, void *arg)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	mrc_wc wc[64];
	for (;;) {
		int n = mrc_wait_cq(p->ctx, wc, 64, 200);
		if (n == MRC_ERR_TIMEOUT) {
			if (!conn_alive(p))
				return MRC_ERR_CLOSED;
			if (now_ns() > deadline || stop_flag)
				return MRC_ERR_TIMEOUT;
			continue;
		}
		if (n < 0)
			return n;
		long got = -1;
		for (int i = 0; i < n; i++) {
			if (foreign(p, &wc[i]))
				continue;
			if (wc[i].wr_id & WR_CTL) {
				if (wc[i].status != MRC_WC_SUCCESS) {
					fprintf(stderr, "metaroce-perf: control message: %s\n",
						mrc_wc_status_str(wc[i].status));
					return MRC_ERR_CLOSED;
				}
				if (wc[i].wr_id == (WR_CTL | 1))
					got = wc[i].byte_len;
			} else if (on_data) {
				on_data(p, &wc[i], arg);
			}
		}
		if (on_data)
			mrc_submit(p->ctx); /* the receives on_data reposted */
		if (got >= 0)
			return got;
	}
}

static int alloc_reg(perf *p, uint64_t len, uint32_t access, uint8_t **mem, mrc_mr **mr)
{
	void *m;
	int rc = mrc_alloc(p->s, len, &m);
	if (rc)
		return rc;
	rc = mrc_reg_mr(p->s, m, len, access, mr);
	if (rc) {
		mrc_free(p->s, m);
		return rc;
	}
	*mem = m;
	return 0;
}

static void free_reg(perf *p, uint8_t **mem, mrc_mr **mr)
{
	if (*mr)
		mrc_dereg_mr(*mr);
	if (*mem)
		mrc_free(p->s, *mem);
	*mr = NULL;
	*mem = NULL;
}

static uint32_t pow2_at_least(uint64_t v)
{
	uint32_t r = 8;
	while (r < v && r < 32768)
		r <<= 1;
	return r;
}

/* ---- server ---- */

typedef struct srv_state {
	setup_msg su;
	uint32_t R;           /* receives (and slots) per stream */
	uint64_t slot_len;
	uint64_t *expect;     /* next seq per stream */
	uint64_t received, verified, verify_errors, bad_status;
	int ended;            /* the connection failed under us */
} srv_state;

static uint8_t *srv_slot(perf *p, srv_state *st, uint32_t s, uint64_t k)
{
	return p->data + ((uint64_t)s * st->R + k) * st->slot_len;
}

static int srv_post_recv(perf *p, srv_state *st, uint32_t s, uint32_t k, unsigned flags)
{
	int rc;
	do {
		uint32_t len = st->su.op == MRC_OP_WRITE_IMM ? 0 : (uint32_t)st->slot_len;
		rc = mrc_post_recv(p->ctx, p->conn, (uint16_t)s, srv_slot(p, st, s, k), len,
				   p->data_mr, WR_ID(s, k), flags);
		if (rc == MRC_ERR_AGAIN)
			mrc_submit(p->ctx);
	} while (rc == MRC_ERR_AGAIN); /* the daemon takes entries on its own */
	return rc;
}

static int srv_on_data(perf *p, const mrc_wc *wc, void *arg)
{
	srv_state *st = arg;
	uint32_t s = WR_STREAM(wc->wr_id);
	uint32_t k = (uint32_t)WR_SEQ(wc->wr_id);
	if (wc->status != MRC_WC_SUCCESS) {
		if (wc->status != MRC_WC_FLUSHED)
			fprintf(stderr, "metaroce-perf: stream %u: %s\n", s,
				mrc_wc_status_str(wc->status));
		st->bad_status++;
		st->ended = 1;
		return -1;
	}
	if (wc->opcode == MRC_WC_OP_SEND && st->su.pingpong)
		return 0; /* an echo went out */
	if (s >= st->su.streams || k >= st->R)
		return -1;
	st->received++;
	uint64_t seq = st->expect[s]++;
	if (st->su.pingpong) {
		/* Echo what came, from the slot it came into: the next ping
		 * waits for this pong, so the slot is not reused meanwhile. */
		uint8_t *b = srv_slot(p, st, s, k);
		int rc;
		do
			rc = mrc_post_send(p->ctx, p->conn, (uint16_t)s, b, wc->byte_len, p->data_mr,
					   WR_ID(s, k) | (1ull << 62),
					   MRC_POST_MORE | (st->su.unsignaled ? MRC_POST_UNSIGNALED : 0));
		while (rc == MRC_ERR_AGAIN && mrc_submit(p->ctx) >= 0);
		/* One ping at a time: the next lands in the other slot, and
		 * the one after it only once this echo has arrived (the
		 * client waits for it), so the slot is free again by then. */
		return srv_post_recv(p, st, s, (k + 1) % st->R, 0);
	}
	int want_imm = st->su.op == MRC_OP_SEND_IMM || st->su.op == MRC_OP_WRITE_IMM;
	if (want_imm && (!(wc->flags & MRC_WC_WITH_IMM) || wc->imm != (uint32_t)seq)) {
		st->verify_errors++; /* not the next message of the stream */
	} else if (st->su.op != MRC_OP_WRITE_IMM && wc->byte_len != st->su.size) {
		st->verify_errors++;
	} else if (st->su.verify) {
		uint8_t *b = st->su.op == MRC_OP_WRITE_IMM ? srv_slot(p, st, s, seq % st->R)
							   : srv_slot(p, st, s, k);
		if (pat_check(b, st->su.size, st->su.seed, s, seq))
			st->verify_errors++;
		else
			st->verified++;
	}
	return srv_post_recv(p, st, s, k, MRC_POST_MORE);
}

static void srv_one(perf *p)
{
	srv_state st;
	memset(&st, 0, sizeof(st));
	p->ctl_stream = (uint16_t)(mrc_conn_nstreams(p->conn) - 1);
	int rc = post_ctl_recv(p);
	if (rc) {
		fprintf(stderr, "metaroce-perf: post: %s\n", mrc_strerror(rc));
		return;
	}
	long got = wait_ctl_recv(p, DEFAULT_TIMEOUT_MS, NULL, NULL);
	if (got < (long)sizeof(setup_msg)) {
		fprintf(stderr, "metaroce-perf: no setup from the client (%s)\n",
			got < 0 ? mrc_strerror((int)got) : "short");
		return;
	}
	memcpy(&st.su, p->ctl, sizeof(st.su));
	setup_msg *su = &st.su;
	ready_msg rd = {.magic = PERF_MAGIC, .kind = OP_READY};
	if (su->magic != PERF_MAGIC || su->kind != OP_SETUP || su->streams == 0 ||
	    su->streams > MAX_STREAMS || su->streams + 1u > mrc_conn_nstreams(p->conn) ||
	    su->depth == 0 || su->depth > 4096 || su->op < MRC_OP_WRITE ||
	    (su->op > MRC_OP_SEND_IMM && su->op != MRC_OP_READ) || su->size > (1ull << 31) ||
	    (su->op == MRC_OP_READ && su->pingpong) || su->unsignaled > 1 ||
	    (su->unsignaled && !su->pingpong)) {
		rd.status = MRC_ERR_INVAL;
		post_ctl_send(p, &rd, sizeof(rd));
		(void)wait_ctl_recv(p, 1000, NULL, NULL);
		return;
	}
	/* (no receives: WRITE and READ) */
	int norecv = su->op == MRC_OP_WRITE || su->op == MRC_OP_READ;
	st.R = norecv ? su->depth : 2 * su->depth;
	if (su->pingpong)
		st.R = 2;
	if ((uint64_t)su->streams * st.R > 16384 && !norecv) {
		/* Receives in flight must fit our context's rings. */
		rd.status = MRC_ERR_LIMIT;
		post_ctl_send(p, &rd, sizeof(rd));
		(void)wait_ctl_recv(p, 1000, NULL, NULL);
		return;
	}
	st.slot_len = su->size ? su->size : 1;
	uint64_t total = st.slot_len * su->streams * st.R;
	st.expect = calloc(su->streams, sizeof(uint64_t));
	rc = alloc_reg(p, total,
		       MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE |
			       (su->op == MRC_OP_READ ? MRC_ACCESS_REMOTE_READ : 0),
		       &p->data, &p->data_mr);
	if (rc || !st.expect) {
		rd.status = rc ? rc : MRC_ERR_NOMEM;
		post_ctl_send(p, &rd, sizeof(rd));
		(void)wait_ctl_recv(p, 1000, NULL, NULL);
		free(st.expect);
		return;
	}
	p->data_len = total;
	if (su->op == MRC_OP_READ && su->verify)
		for (uint32_t s = 0; s < su->streams; s++)
			for (uint32_t k = 0; k < st.R; k++)
				pat_fill(srv_slot(p, &st, s, k), su->size, su->seed, s, k);
	if (!norecv || su->pingpong) {
		uint32_t nr = su->pingpong ? 1 : st.R;
		for (uint32_t s = 0; s < su->streams; s++)
			for (uint32_t k = 0; k < nr; k++)
				if ((rc = srv_post_recv(p, &st, s, k, MRC_POST_MORE)))
					die("post receive", rc);
		mrc_submit(p->ctx);
	}
	if ((rc = post_ctl_recv(p)))
		die("post", rc);
	rd.addr = (uint64_t)(uintptr_t)p->data;
	rd.len = total;
	rd.rkey = mrc_mr_rkey(p->data_mr);
	if ((rc = post_ctl_send(p, &rd, sizeof(rd))))
		die("post", rc);

	/* Until the done message; the client's runs are bounded by its own
	 * timeouts, ours by the connection's life. */
	got = wait_ctl_recv(p, INT32_MAX, srv_on_data, &st);
	result_msg res = {.magic = PERF_MAGIC, .kind = OP_RESULT};
	const char *end = NULL;
	if (got < 0) {
		end = got == MRC_ERR_CLOSED ? "connection closed or reset" : mrc_strerror((int)got);
	} else {
		done_msg *dn = (done_msg *)p->ctl;
		if ((size_t)got < sizeof(*dn) + su->streams * sizeof(uint64_t) ||
		    dn->magic != PERF_MAGIC || dn->kind != OP_DONE || dn->streams != su->streams) {
			end = "bad done message";
		} else {
			uint64_t *sent = malloc(su->streams * sizeof(uint64_t));
			memcpy(sent, dn->sent, su->streams * sizeof(uint64_t));
			uint64_t want = 0;
			for (uint32_t s = 0; s < su->streams; s++)
				want += sent[s];
			/* The last completions may trail the done message on
			 * other streams: give them a moment. */
			int consumes = !norecv;
			uint64_t until = now_ns() + 10000000000ull;
			while (consumes && !su->pingpong && st.received < want && now_ns() < until &&
			       !st.ended) {
				mrc_wc wc[64];
				int n = mrc_wait_cq(p->ctx, wc, 64, 100);
				for (int i = 0; i < n; i++)
					if (!(wc[i].wr_id & WR_CTL) && !foreign(p, &wc[i]))
						srv_on_data(p, &wc[i], &st);
				mrc_submit(p->ctx);
			}
			for (uint32_t s = 0; s < su->streams && consumes && !su->pingpong; s++) {
				if (st.expect[s] < sent[s])
					res.lost += sent[s] - st.expect[s];
				else if (st.expect[s] > sent[s])
					res.duplicated += st.expect[s] - sent[s];
			}
			if (su->op == MRC_OP_WRITE && su->verify && !su->pingpong) {
				/* Each slot holds the last message written to it. */
				for (uint32_t s = 0; s < su->streams; s++) {
					for (uint64_t k = 0; k < su->depth && k < sent[s]; k++) {
						uint64_t last = sent[s] - 1 - ((sent[s] - 1 - k) % su->depth);
						if (pat_check(srv_slot(p, &st, s, last % su->depth), su->size,
							      su->seed, s, last))
							st.verify_errors++;
						else
							st.verified++;
					}
				}
			}
			free(sent);
		}
	}
	res.received = st.received;
	res.verified = st.verified;
	res.verify_errors = st.verify_errors;
	res.bad_status = st.bad_status;
	if (!end && conn_alive(p)) {
		post_ctl_send(p, &res, sizeof(res));
		/* The client closes once it has the result. */
		uint64_t until = now_ns() + 5000000000ull;
		while (conn_alive(p) && now_ns() < until) {
			mrc_wc wc[64];
			(void)mrc_wait_cq(p->ctx, wc, 64, 100);
		}
	}
	int ok = !end && !res.verify_errors && !res.lost && !res.duplicated && !res.bad_status;
	if (p->o.json)
		printf("{\"role\":\"server\",\"op\":\"%s\",\"size\":%" PRIu64 ",\"streams\":%u,"
		       "\"received\":%" PRIu64 ",\"verified\":%" PRIu64 ",\"verify_errors\":%" PRIu64
		       ",\"lost\":%" PRIu64
		       ",\"duplicated\":%" PRIu64 ",\"bad_status\":%" PRIu64 ",\"ok\":%s%s%s%s}\n",
		       op_name((int)su->op), su->size, su->streams, res.received, res.verified,
		       res.verify_errors, res.lost, res.duplicated, res.bad_status, ok ? "true" : "false",
		       end ? ",\"end\":\"" : "", end ? end : "", end ? "\"" : "");
	else
		printf("server: %s size %" PRIu64 " streams %u: received %" PRIu64
		       ", verified %" PRIu64 ", verify errors %" PRIu64 ", lost %" PRIu64 ", duplicated %" PRIu64
		       ", bad completions %" PRIu64 "%s%s\n",
		       op_name((int)su->op), su->size, su->streams, res.received, res.verified,
		       res.verify_errors, res.lost, res.duplicated, res.bad_status, end ? ": " : "",
		       end ? end : "");
	fflush(stdout);
	free(st.expect);
}

static int run_server(opts *o)
{
	perf p = {.o = *o};
	int rc = mrc_session_open(o->socket, "metaroce-perf", &p.s);
	if (rc)
		die("attach to metarocd", rc);
	if ((rc = alloc_reg(&p, 2 * CTL_BUF, MRC_ACCESS_LOCAL_WRITE, &p.ctl, &p.ctl_mr)))
		die("control buffer", rc);
	/* One context for all clients, served one at a time: sized for
	 * 16384 receives in flight plus control. Clients that connect while
	 * another is served wait in the accept queue. */
	mrc_listener *l;
	if ((rc = mrc_ctx_new(p.s, 32768, 0, &p.ctx)))
		die("context", rc);
	mrc_ctx_set_busy_poll(p.ctx, o->busy_usec);
	if ((rc = mrc_listen(p.s, o->service, p.ctx, 0, &l)))
		die("listen", rc);
	printf("listening on service %u\n", o->service);
	fflush(stdout);
	while (!stop_flag) {
		rc = mrc_accept(l, 500, &p.conn);
		if (rc == MRC_ERR_TIMEOUT) {
			mrc_wc wc[64];
			(void)mrc_poll_cq(p.ctx, wc, 64); /* flushes of closed connections */
			continue;
		}
		if (rc)
			die("accept", rc);
		srv_one(&p);
		/* Reset: receives still posted are flushed at once. */
		mrc_close(p.conn, 1);
		p.conn = NULL;
		/* The daemon refuses (BUSY) while flushed receives still name
		 * the region: reap them and retry. */
		for (int i = 0; p.data_mr && i < 200; i++) {
			mrc_wc wc[64];
			while (mrc_poll_cq(p.ctx, wc, 64) > 0)
				;
			if (mrc_dereg_mr(p.data_mr) != MRC_ERR_BUSY)
				p.data_mr = NULL;
			else
				(void)mrc_wait_cq(p.ctx, wc, 64, 10);
		}
		if (p.data_mr)
			fprintf(stderr, "metaroce-perf: buffer still in use, left behind\n");
		else
			mrc_free(p.s, p.data);
		p.data = NULL;
		p.data_mr = NULL;
		if (o->once)
			break;
	}
	mrc_unlisten(l);
	mrc_ctx_del(p.ctx);
	free_reg(&p, &p.ctl, &p.ctl_mr);
	mrc_session_close(p.s);
	return 0;
}

/* ---- client ---- */

typedef struct cli_state {
	uint64_t *posted, *completed; /* per stream: next seq to post / to complete */
	uint64_t done_msgs, done_bytes, lost, duplicated, bad_status, inflight;
	uint64_t seed, slot, verified, verify_errors; /* read --verify: the client checks */
} cli_state;

static void cli_on_wc(perf *p, cli_state *st, const mrc_wc *wc)
{
	uint32_t s = WR_STREAM(wc->wr_id);
	uint64_t q = WR_SEQ(wc->wr_id);
	if (s >= p->o.streams) {
		st->bad_status++;
		return;
	}
	st->inflight--;
	if (wc->status != MRC_WC_SUCCESS) {
		if (!st->bad_status)
			fprintf(stderr, "metaroce-perf: stream %u seq %" PRIu64 ": %s\n", s, q,
				mrc_wc_status_str(wc->status));
		st->bad_status++;
		return;
	}
	/* Exactly once and in order per stream. */
	if (q < st->completed[s]) {
		st->duplicated++;
		st->inflight++;
		return;
	}
	if (q > st->completed[s]) {
		st->lost += q - st->completed[s];
		st->inflight += q - st->completed[s];
	}
	st->completed[s] = q + 1;
	st->done_msgs++;
	st->done_bytes += p->o.size;
	if (p->o.op == MRC_OP_READ && p->o.verify) {
		/* the server's slot s*D + q%D, read into our slot of the same
		 * index, still untouched: its next READ waits for this one */
		uint64_t k = q % p->o.depth;
		if (wc->byte_len != p->o.size ||
		    pat_check(p->data + (s * p->o.depth + k) * st->slot, p->o.size, st->seed, s, k))
			st->verify_errors++;
		else
			st->verified++;
	}
}

static int pct_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int run_client(opts *o)
{
	perf p = {.o = *o};
	int rc = mrc_session_open(o->socket, "metaroce-perf", &p.s);
	if (rc)
		die("attach to metarocd", rc);
	uint64_t per_pass = (uint64_t)o->streams * o->depth;
	if ((rc = mrc_ctx_new(p.s, pow2_at_least(per_pass + 16), 0, &p.ctx)))
		die("context", rc);
	mrc_ctx_set_busy_poll(p.ctx, o->busy_usec);
	if ((rc = alloc_reg(&p, 2 * CTL_BUF, MRC_ACCESS_LOCAL_WRITE, &p.ctl, &p.ctl_mr)))
		die("control buffer", rc);
	mrc_conn_attr attr = {.nstreams = (uint16_t)(o->streams + 1)};
	uint64_t seed = now_ns();
	setup_msg su = {.magic = PERF_MAGIC, .kind = OP_SETUP, .op = (uint32_t)o->op,
			.streams = o->streams, .depth = o->depth, .verify = (uint32_t)o->verify,
			.pingpong = (uint32_t)o->pingpong,
			.unsignaled = (uint32_t)o->unsignaled, .size = o->size, .seed = seed};
	p.ctl_stream = (uint16_t)o->streams;
	long got;
	/* A server still busy with the previous client has not posted its
	 * control receive yet: our setup then fails the connection with
	 * RNR_RETRY_EXC (the daemon's RNR budget is short by default), so
	 * connect again, for up to 10 s. */
	for (int attempt = 0;; attempt++) {
		if ((rc = mrc_connect(p.s, p.ctx, o->peer, o->port, o->service, &attr, &p.conn)))
			die("connect", rc);
		if ((rc = mrc_conn_wait_established(p.conn, 10000)))
			die("connect", rc);
		if (mrc_conn_nstreams(p.conn) < o->streams + 1) {
			fprintf(stderr, "metaroce-perf: the daemons granted %u streams, %u needed\n",
				mrc_conn_nstreams(p.conn), o->streams + 1);
			return 2;
		}
		if ((rc = post_ctl_recv(&p)) || (rc = post_ctl_send(&p, &su, sizeof(su))))
			die("post", rc);
		got = wait_ctl_recv(&p, DEFAULT_TIMEOUT_MS, NULL, NULL);
		if (got != MRC_ERR_CLOSED || attempt >= 100)
			break;
		mrc_close(p.conn, 1);
		mrc_wc wc[8];
		(void)mrc_wait_cq(p.ctx, wc, 8, 100); /* its flushes; also a pause */
		while (mrc_poll_cq(p.ctx, wc, 8) > 0)
			;
	}
	if (got < (long)sizeof(ready_msg))
		die("no answer from the server", got < 0 ? (int)got : MRC_ERR_PROTO);
	ready_msg rd;
	memcpy(&rd, p.ctl, sizeof(rd));
	if (rd.magic != PERF_MAGIC || rd.kind != OP_READY || rd.status)
		die("the server refused", rd.status ? rd.status : MRC_ERR_PROTO);

	/* Source slots: one per request in flight when verifying (each
	 * carries its own pattern until it completes), else one shared. */
	uint64_t slot = o->size ? o->size : 1;
	uint64_t nslots = o->verify || o->pingpong ? per_pass : 1;
	if ((rc = alloc_reg(&p, slot * nslots + (o->pingpong ? slot * 2 : 0),
			    MRC_ACCESS_LOCAL_WRITE, &p.data, &p.data_mr)))
		die("buffer", rc);
	cli_state st = {.posted = calloc(o->streams, 8), .completed = calloc(o->streams, 8),
			.seed = seed, .slot = slot};
	uint32_t R = o->op == MRC_OP_WRITE || o->op == MRC_OP_READ ? o->depth : 2 * o->depth;
	mrc_wc wc[256];
	uint64_t t0 = now_ns(), t_end = t0 + (uint64_t)(o->seconds * 1e9), t_last = t0;
	uint64_t *lat = NULL, nlat = 0, cap_lat = 0;
	int failed = 0;

	if (o->pingpong) {
		uint8_t *ping = p.data, *pong = p.data + slot;
		cap_lat = 1u << 20;
		lat = malloc(cap_lat * sizeof(uint64_t));
		for (uint64_t q = 0; !stop_flag; q++) {
			if ((o->count && q >= o->count) || (!o->count && now_ns() >= t_end))
				break;
			if (o->verify)
				pat_fill(ping, o->size, seed, 0, q);
			uint64_t a = now_ns();
			if ((rc = mrc_post_recv(p.ctx, p.conn, 0, pong, (uint32_t)o->size, p.data_mr,
						WR_ID(0, q) | (1ull << 62), MRC_POST_MORE)) ||
			    (rc = mrc_post_send(p.ctx, p.conn, 0, ping, (uint32_t)o->size, p.data_mr,
						WR_ID(0, q), o->unsignaled ? MRC_POST_UNSIGNALED : 0)))
				die("post", rc);
			int have_pong = 0, have_send = o->unsignaled;
			while (!have_pong || !have_send) {
				int n = mrc_wait_cq(p.ctx, wc, 4, DEFAULT_TIMEOUT_MS);
				if (n < 0)
					die("ping-pong", n);
				for (int i = 0; i < n; i++) {
					if (wc[i].status != MRC_WC_SUCCESS) {
						fprintf(stderr, "metaroce-perf: ping %" PRIu64 ": %s\n", q,
							mrc_wc_status_str(wc[i].status));
						st.bad_status++;
						have_pong = have_send = 1;
						stop_flag = 1;
					} else if (wc[i].opcode == MRC_WC_OP_RECV) {
						if (!have_pong && nlat < cap_lat)
							lat[nlat++] = now_ns() - a;
						have_pong = 1;
						if (wc[i].byte_len != o->size ||
						    (o->verify && pat_check(pong, o->size, seed, 0, q)))
							st.lost++; /* counted as a verify error below */
					} else {
						have_send = 1;
					}
				}
			}
			st.done_msgs++;
			st.done_bytes += o->size; /* the pings; as many came back */
		}
		t_last = now_ns();
	} else {
		/* Round robin over streams, up to depth each, one doorbell
		 * per pass. */
		uint64_t total = 0;
		int posting = 1;
		/* Waiting for the last completions: 30 s, plus what the bytes
		 * in flight take at a crawling 10 MB/s (a 1 GiB message on a
		 * loaded host under a sanitizer). */
		uint64_t inflight_max = per_pass * o->size;
		int drain_ms = DEFAULT_TIMEOUT_MS +
			       (int)(inflight_max / 10000 > INT32_MAX / 2 ? INT32_MAX / 2 : inflight_max / 10000);
		while (posting || st.inflight) {
			if (posting && (stop_flag || (o->count ? total >= o->count : now_ns() >= t_end)))
				posting = 0;
			/* One request per stream per sweep, sweeps until every
			 * stream has depth in flight: streams interleave in the
			 * ring. */
			int any = 0, swept;
			do {
				swept = 0;
				for (uint32_t s = 0; posting && s < o->streams; s++) {
					if (st.posted[s] - st.completed[s] < o->depth &&
					    (!o->count || total < o->count)) {
						uint64_t q = st.posted[s];
						uint8_t *src = p.data + (nslots > 1 ? (s * o->depth + q % o->depth) * slot : 0);
						if (o->verify && o->op != MRC_OP_READ)
							pat_fill(src, o->size, seed, s, q);
						uint64_t raddr = rd.addr + ((uint64_t)s * R + q % R) * slot;
						uint32_t len = (uint32_t)o->size;
						switch (o->op) {
						case MRC_OP_WRITE:
							rc = mrc_post_write(p.ctx, p.conn, (uint16_t)s, src, len, p.data_mr,
									    raddr, rd.rkey, WR_ID(s, q), MRC_POST_MORE);
							break;
						case MRC_OP_WRITE_IMM:
							rc = mrc_post_write_imm(p.ctx, p.conn, (uint16_t)s, src, len,
										p.data_mr, raddr, rd.rkey, (uint32_t)q,
										WR_ID(s, q), MRC_POST_MORE);
							break;
						case MRC_OP_SEND:
							rc = mrc_post_send(p.ctx, p.conn, (uint16_t)s, src, len, p.data_mr,
									   WR_ID(s, q), MRC_POST_MORE);
							break;
						case MRC_OP_READ:
							/* (src is this request's own slot: the sink) */
							rc = mrc_post_read(p.ctx, p.conn, (uint16_t)s, src, len, p.data_mr,
									   raddr, rd.rkey, WR_ID(s, q), MRC_POST_MORE);
							break;
						default:
							rc = mrc_post_send_imm(p.ctx, p.conn, (uint16_t)s, src, len,
									       p.data_mr, (uint32_t)q, WR_ID(s, q),
									       MRC_POST_MORE);
							break;
						}
						if (rc == MRC_ERR_AGAIN)
							break;
						if (rc) {
							fprintf(stderr, "metaroce-perf: post: %s\n", mrc_strerror(rc));
							posting = 0;
							failed = 1;
							break;
						}
						st.posted[s]++;
						st.inflight++;
						total++;
						any = swept = 1;
					}
				}
			} while (swept && rc != MRC_ERR_AGAIN);
			if (any)
				mrc_submit(p.ctx);
			if (!st.inflight)
				continue;
			int n = mrc_wait_cq(p.ctx, wc, 256, posting ? 1000 : drain_ms);
			if (n == MRC_ERR_TIMEOUT) {
				if (!posting) {
					fprintf(stderr, "metaroce-perf: %" PRIu64 " requests never completed\n",
						st.inflight);
					st.lost += st.inflight;
					break;
				}
				if (mrc_conn_status(p.conn) != MRC_CONN_ESTABLISHED) {
					failed = 1;
					break;
				}
				continue;
			}
			if (n < 0) {
				fprintf(stderr, "metaroce-perf: completions: %s\n", mrc_strerror(n));
				return 2;
			}
			for (int i = 0; i < n; i++)
				if (!(wc[i].wr_id & WR_CTL)) /* the setup's send may complete late */
					cli_on_wc(&p, &st, &wc[i]);
			if (st.bad_status) {
				posting = 0; /* the connection is broken: drain what is left */
				if (mrc_conn_status(p.conn) != MRC_CONN_ESTABLISHED)
					break;
			}
			t_last = now_ns();
		}
	}
	double secs = (double)(t_last - t0) / 1e9;

	/* done -> result */
	result_msg res = {0};
	int have_res = 0;
	if (!failed && !st.bad_status) {
		size_t dlen = sizeof(done_msg) + o->streams * sizeof(uint64_t);
		done_msg *dn = calloc(1, dlen);
		dn->magic = PERF_MAGIC;
		dn->kind = OP_DONE;
		dn->streams = o->streams;
		for (uint32_t s = 0; s < o->streams; s++)
			dn->sent[s] = o->pingpong ? (s == 0 ? st.done_msgs : 0) : st.posted[s];
		if ((rc = post_ctl_recv(&p)) || (rc = post_ctl_send(&p, dn, (uint32_t)dlen)))
			die("post", rc);
		free(dn);
		got = wait_ctl_recv(&p, DEFAULT_TIMEOUT_MS, NULL, NULL);
		if (got >= (long)sizeof(res)) {
			memcpy(&res, p.ctl, sizeof(res));
			have_res = res.magic == PERF_MAGIC && res.kind == OP_RESULT;
		}
	}
	uint64_t verr = res.verify_errors + (o->pingpong ? st.lost : 0) + st.verify_errors;
	uint64_t lost = (o->pingpong ? 0 : st.lost) + res.lost;
	uint64_t dup = st.duplicated + res.duplicated;
	int ok = have_res && !failed && !st.bad_status && !verr && !lost && !dup && !res.bad_status;
	double gbps = secs > 0 ? (double)st.done_bytes * 8 / secs / 1e9 : 0;
	double rate = secs > 0 ? (double)st.done_msgs / secs : 0;
	double p50 = 0, p99 = 0, p999 = 0;
	if (nlat) {
		qsort(lat, nlat, sizeof(uint64_t), pct_cmp);
		/* Half the round trip, like sockperf's latency. */
		p50 = (double)lat[nlat / 2] / 2000.0;
		p99 = (double)lat[(uint64_t)((double)nlat * 0.99)] / 2000.0;
		p999 = (double)lat[(uint64_t)((double)nlat * 0.999)] / 2000.0;
	}
	if (o->json) {
		printf("{\"role\":\"client\",\"op\":\"%s\",\"size\":%" PRIu64 ",\"streams\":%u,"
		       "\"depth\":%u,\"pingpong\":%s,\"seconds\":%.3f,\"messages\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"gbps\":%.3f,\"msg_rate\":%.0f,"
		       "\"verify\":%s,\"verify_errors\":%" PRIu64 ",\"lost\":%" PRIu64
		       ",\"duplicated\":%" PRIu64 ",\"bad_status\":%" PRIu64
		       ",\"server_received\":%" PRIu64
		       ",\"server_verified\":%" PRIu64 ",\"client_verified\":%" PRIu64,
		       o->pingpong ? "send" : op_name(o->op), o->size, o->streams, o->depth,
		       o->pingpong ? "true" : "false", secs, st.done_msgs, st.done_bytes, gbps, rate,
		       o->verify ? "true" : "false", verr, lost, dup, st.bad_status + res.bad_status,
		       res.received, res.verified, st.verified);
		if (nlat)
			printf(",\"unsignaled\":%s,\"lat_us_p50\":%.2f,\"lat_us_p99\":%.2f,"
			       "\"lat_us_p999\":%.2f", o->unsignaled ? "true" : "false", p50, p99, p999);
		printf(",\"ok\":%s}\n", ok ? "true" : "false");
	} else {
		printf("%s size %" PRIu64 " streams %u depth %u: %" PRIu64 " messages in %.2f s\n",
		       o->pingpong ? (o->unsignaled ? "pingpong send unsignaled" : "pingpong send")
				   : op_name(o->op), o->size, o->streams, o->depth,
		       st.done_msgs, secs);
		if (nlat)
			printf("latency (half round trip): p50 %.2f us  p99 %.2f us  p99.9 %.2f us  "
			       "(%.0f round trips/s)\n", p50, p99, p999, rate);
		else
			printf("bandwidth %.3f Gbit/s  rate %.3f M msg/s\n", gbps, rate / 1e6);
		printf("%s: verify errors %" PRIu64 ", lost %" PRIu64 ", duplicated %" PRIu64
		       ", bad completions %" PRIu64 ", server received %" PRIu64 ", verified %" PRIu64
		       "%s\n",
		       ok ? "ok" : "FAILED", verr, lost, dup, st.bad_status + res.bad_status,
		       res.received, res.verified, have_res ? "" : " (no result from the server)");
	}
	fflush(stdout);
	mrc_close(p.conn, 0);
	free(lat);
	free(st.posted);
	free(st.completed);
	free_reg(&p, &p.data, &p.data_mr);
	free_reg(&p, &p.ctl, &p.ctl_mr);
	mrc_session_close(p.s);
	return ok ? 0 : 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metaroce-perf server [--socket P] [--service ID] [--once] [--json]\n"
		"                     [--busy-poll USEC]\n"
		"       metaroce-perf client PEER [--port N] [--socket P] [--service ID]\n"
		"                     [--op write|write_imm|send|send_imm|read] [--size N]\n"
		"                     [--streams S] [--depth D] [--seconds T | --count N]\n"
		"                     [--verify] [--json] [--pingpong [--unsignaled]]\n"
		"                     [--busy-poll USEC]\n"
		"PEER is the numeric address of the peer's metarocd; --port its service port\n"
		"(0, the default: the same as the local daemon's). --socket: the local\n"
		"daemon's application socket ($METAROCE_APP_SOCKET, else %s).\n",
		MRC_DEFAULT_SOCKET);
}

static uint64_t parse_num(const char *opt, const char *v, uint64_t lo, uint64_t hi)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	uint64_t mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1024 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		mul = 1024 * 1024 * 1024, end++;
	if (errno || *end || v[0] == '-' || x > hi / mul || x * mul < lo) {
		fprintf(stderr, "metaroce-perf: --%s: '%s' is not a number in %" PRIu64 "-%" PRIu64
				"\n", opt, v, lo, hi);
		exit(2);
	}
	return x * mul;
}

int main(int argc, char **argv)
{
	opts o = {.service = DEFAULT_SERVICE, .op = MRC_OP_WRITE, .size = 65536, .streams = 1,
		  .depth = 16, .seconds = 5};
	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		usage(argc < 2 ? stderr : strcmp(argv[1], "--help") ? stderr : stdout);
		return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	int server = !strcmp(argv[1], "server");
	static const struct option lo[] = {
		{"socket", required_argument, 0, 'S'}, {"service", required_argument, 0, 'v'},
		{"port", required_argument, 0, 'p'},   {"op", required_argument, 0, 'o'},
		{"size", required_argument, 0, 's'},   {"streams", required_argument, 0, 'n'},
		{"depth", required_argument, 0, 'd'},  {"seconds", required_argument, 0, 't'},
		{"count", required_argument, 0, 'c'},  {"verify", no_argument, 0, 'V'},
		{"json", no_argument, 0, 'j'},         {"pingpong", no_argument, 0, 'P'},
		{"once", no_argument, 0, '1'},         {"busy-poll", required_argument, 0, 'b'},
		{"unsignaled", no_argument, 0, 'U'},   {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	int sized = 0, c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'S': o.socket = optarg; break;
		case 'v': o.service = (uint32_t)parse_num("service", optarg, 0, UINT32_MAX); break;
		case 'p': o.port = (uint16_t)parse_num("port", optarg, 0, 65535); break;
		case 'o':
			if (!strcmp(optarg, "write")) o.op = MRC_OP_WRITE;
			else if (!strcmp(optarg, "write_imm")) o.op = MRC_OP_WRITE_IMM;
			else if (!strcmp(optarg, "send")) o.op = MRC_OP_SEND;
			else if (!strcmp(optarg, "send_imm")) o.op = MRC_OP_SEND_IMM;
			else if (!strcmp(optarg, "read")) o.op = MRC_OP_READ;
			else {
				fprintf(stderr, "metaroce-perf: --op: '%s' is not write, write_imm, send, send_imm or read\n", optarg);
				return 2;
			}
			break;
		case 's': o.size = parse_num("size", optarg, 0, 1ull << 31); sized = 1; break;
		case 'n': o.streams = (uint32_t)parse_num("streams", optarg, 1, MAX_STREAMS); break;
		case 'd': o.depth = (uint32_t)parse_num("depth", optarg, 1, 4096); break;
		case 't': {
			char *end;
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0) || o.seconds > 86400) {
				fprintf(stderr, "metaroce-perf: --seconds: '%s' is not in (0, 86400]\n", optarg);
				return 2;
			}
			break;
		}
		case 'c': o.count = parse_num("count", optarg, 1, UINT64_MAX); break;
		case 'V': o.verify = 1; break;
		case 'j': o.json = 1; break;
		case 'P': o.pingpong = 1; break;
		case 'U': o.unsignaled = 1; break;
		case '1': o.once = 1; break;
		case 'b': o.busy_usec = (uint32_t)parse_num("busy-poll", optarg, 0, 1000000); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (server) {
		if (optind != argc) {
			usage(stderr);
			return 2;
		}
		return run_server(&o);
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	o.peer = argv[optind];
	if (o.pingpong) {
		o.op = MRC_OP_SEND;
		o.streams = 1;
		o.depth = 1;
		if (!sized)
			o.size = 8;
	}
	if (o.unsignaled && !o.pingpong) {
		fprintf(stderr, "metaroce-perf: --unsignaled goes with --pingpong\n");
		return 2;
	}
	if (o.size == 0 && o.pingpong) {
		fprintf(stderr, "metaroce-perf: --pingpong needs --size >= 1\n");
		return 2;
	}
	if ((uint64_t)o.streams * o.depth > 16384) {
		fprintf(stderr, "metaroce-perf: streams * depth is at most 16384\n");
		return 2;
	}
	uint64_t need = o.size * (uint64_t)o.streams * o.depth * (o.op == MRC_OP_WRITE ? 1 : 2);
	if (need > (8ull << 30)) {
		fprintf(stderr, "metaroce-perf: size * streams * depth needs %" PRIu64
				" MiB at the server; at most 8 GiB\n", need >> 20);
		return 2;
	}
	return run_client(&o);
}
