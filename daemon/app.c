#define _GNU_SOURCE /* memfd_create, struct ucred, MSG_CMSG_CLOEXEC */
#include "app.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi.h"
#include "datapath.h"
#include "localsock.h"
#include "log.h"
#include "mrd.h"
#include "peer.h"
#include "planes.h"

#define SQ_BUDGET 256        /* SQEs of one context per pass (fairness) */
#define ENDED_KEEP 256       /* ended connection handles remembered per session */
#define RECV_BUDGET 64       /* control messages of one session per pass */
#define BAD_MAX 64           /* wrong requests in a row before the session is closed */
#define OUTQ_MAX 4096        /* queued replies and events before it is closed */
#define REFUSED_MAX 16       /* refused sessions waiting for their first message */
#define HELLO_MAX 64         /* allowed sessions waiting for their HELLO */
#define HELLO_TIMEOUT_MS 5000 /* the first message comes within this, or the end */
#define MAX_FDS 8            /* fds one message may carry (the rest are cut) */
#define CQ_MAX (4 * MRC_SQ_MAX)
#define CREDIT_RETRY_MS 1    /* contexts waiting for CQ credit are re-checked */
#define LKEY_SLOT_BITS 21

enum { S_HELLO, S_REFUSED, S_OPEN, S_CLOSED };
enum { AC_CONNECTING, AC_ESTABLISHED };

/* ---- objects -------------------------------------------------------------- */

typedef struct app_conn app_conn;

struct app_region {
	app_region *rnext;   /* rkey hash chain */
	app_region *znext;   /* the session's deregistered-but-referenced list */
	app_session *s;
	uint32_t lkey, rkey, access;
	uint64_t app_addr, len;
	uint64_t lo, lolen;  /* the bytes accessible: [lo, lo + lolen) (MR_BOUNDS) */
	uint8_t *map;        /* the application's bytes [fd_offset, +len) */
	uint32_t refs;       /* outstanding work requests using it */
	int dead;            /* deregistered: unmapped when refs reaches 0 */
};

/* One outstanding work request: the engine's wr_id names the slot. */
typedef struct app_wr {
	uint64_t wr_id;      /* the application's */
	app_region *r;       /* NULL for a zero-length request */
	app_conn *ac;
	uint32_t gen;
	uint16_t stream;
	uint8_t opcode, used;
} app_wr;

struct app_ctx {
	app_ctx *next;       /* the session's */
	app_ctx *dnext, *pnext, *bnext;
	uint8_t in_dirty, in_pending, in_blocked, dead;
	app_session *s;
	uint32_t id;
	uint8_t *map;
	size_t size;
	mrc_ring *sq, *cq;
	mrc_sqe *sqes;
	mrc_cqe *cqes;
	uint32_t sq_entries, cq_entries;
	uint32_t sq_head, cq_tail; /* ours: never read back from the mapping */
	uint32_t cq_pub;           /* the tail last published */
	int doorbell, wakeup;
	uv_poll_t poll;
	uint32_t nout;       /* requests outstanding in engines */
	uint32_t users;      /* connections and listeners completing here */
	app_wr *wrs;         /* cq_entries slots */
	uint32_t *free;      /* free slot stack */
	uint32_t nfree, gen;
};

struct app_conn {
	app_conn *next, **pprev;
	app_session *s;
	app_ctx *ctx;
	mrd_conn *c;
	uint32_t handle, listener_id;
	uint16_t nstreams;
	int state, closing;
	int failed; /* a request failed remotely: the engine ends the connection */
};

struct app_listener {
	app_listener *next;
	app_session *s;
	app_ctx *ctx;
	uint32_t id, service_id;
	uint16_t nstreams;
};

typedef struct app_out {
	struct app_out *next;
	uint32_t len;
	int nfds;
	int fds[3];
	uint8_t buf[MRC_MSG_MAX];
} app_out;

struct app_session {
	mrd_apps *a;
	app_session *next, **pprev;
	int fd;
	uv_poll_t poll;
	int events;
	int state, refuse_status;
	uint32_t id;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint64_t accepted_ms; /* uv_now() */
	char name[33];
	/* limits, fixed at HELLO */
	uint32_t max_contexts, max_regions, max_conns, max_listeners;
	uint64_t max_region_bytes;
	app_ctx *ctxs;
	uint32_t nctxs, next_ctx_id;
	app_region **regions; /* by lkey slot */
	uint32_t nregions;
	uint64_t region_bytes;
	uint32_t lkey_gen;
	app_region *zombies;
	app_conn *conns;
	uint32_t nconns;
	app_listener *listeners;
	uint32_t nlisteners, next_listener_id;
	app_out *outq, **outq_tail;
	uint32_t noutq;
	uint32_t bad;
	uint64_t requests, wrs, wrs_bad;
	/* Handles of this session's connections that ended, most recent
	 * last: a request that raced the end completes FLUSHED, not BAD_WR
	 * (the application could not have known). */
	uint32_t ended[ENDED_KEEP];
	uint32_t nended;
};

static const mrd_conn_ops app_ops;

/* Completions go from the engine to the ring unchanged: its statuses and
 * opcodes are the ABI's (metaroce.h), and must stay so. */
#define SAME_STATUS(name, val, msg) \
	_Static_assert((int)MRC_WC_##name == (int)MRP_WC_##name, "MRC_WC_" #name " is the engine's");
MRP_WC_STATUS_MAP(SAME_STATUS)
#undef SAME_STATUS
_Static_assert((int)MRC_OP_WRITE == (int)MRP_WR_WRITE &&
		       (int)MRC_OP_WRITE_IMM == (int)MRP_WR_WRITE_IMM &&
		       (int)MRC_OP_SEND == (int)MRP_WR_SEND &&
		       (int)MRC_OP_SEND_IMM == (int)MRP_WR_SEND_IMM &&
		       (int)MRC_WC_OP_RECV == (int)MRP_WC_RECV &&
		       (int)MRC_WC_OP_RECV_WRITE_IMM == (int)MRP_WC_RECV_WRITE_IMM,
	       "the ABI's opcodes are the engine's");

static void session_close(app_session *s, const char *why);
static void ctx_consume(app_ctx *x);
static void on_idle(uv_idle_t *h);
static void on_credit(uv_timer_t *t);
static void refuse(app_session *s, const mrc_msg_hdr *h, int why, int status);
static void bad_req(app_session *s, const mrc_msg_hdr *h, int why, int status);

static const char *const bad_names[] = {
#define BAD_NAME(name, msg) #name,
	MRD_APP_BAD_MAP(BAD_NAME)
#undef BAD_NAME
};

static const char *const wr_bad_names[] = {
#define WR_BAD_NAME(name, msg) #name,
	MRD_APP_WR_BAD_MAP(WR_BAD_NAME)
#undef WR_BAD_NAME
};

static int zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* ---- sending ---------------------------------------------------------------- */

static void session_poll(app_session *s);

/* Send one datagram; 1 sent, 0 would block, -errno the session is broken. */
static int send_now(app_session *s, const void *buf, uint32_t len, const int *fds, int nfds)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(s->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n >= 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -errno;
	}
}

/* The application closed its end: a detach, not a failure. */
static const char *send_failure(int r)
{
	return r == -EPIPE || r == -ECONNRESET ? NULL : "send failed";
}

/* Queue or send a message; the fds are the message's (closed once sent). */
static void session_send(app_session *s, const void *buf, uint32_t len, int *fds, int nfds)
{
	if (s->state == S_CLOSED) {
		close_fds(fds, nfds);
		return;
	}
	if (!s->outq) {
		int r = send_now(s, buf, len, fds, nfds);
		if (r != 0) {
			close_fds(fds, nfds);
			if (r < 0)
				session_close(s, send_failure(r));
			return;
		}
	}
	if (s->noutq >= OUTQ_MAX) {
		close_fds(fds, nfds);
		session_close(s, "does not read its socket");
		return;
	}
	app_out *o = malloc(sizeof(*o));
	if (!o) {
		close_fds(fds, nfds);
		session_close(s, "out of memory");
		return;
	}
	o->next = NULL;
	o->len = len;
	o->nfds = nfds;
	if (nfds)
		memcpy(o->fds, fds, (size_t)nfds * sizeof(int));
	memcpy(o->buf, buf, len);
	*s->outq_tail = o;
	s->outq_tail = &o->next;
	s->noutq++;
	session_poll(s);
}

static void session_flush(app_session *s)
{
	while (s->outq) {
		app_out *o = s->outq;
		int r = send_now(s, o->buf, o->len, o->fds, o->nfds);
		if (r == 0)
			return;
		s->outq = o->next;
		if (!s->outq)
			s->outq_tail = &s->outq;
		s->noutq--;
		close_fds(o->fds, o->nfds);
		free(o);
		if (r < 0) {
			session_close(s, send_failure(r));
			return;
		}
	}
	session_poll(s);
}

static void reply(app_session *s, const mrc_msg_hdr *req, int status, const void *payload,
		  uint32_t plen, int *fds, int nfds)
{
	uint8_t buf[MRC_MSG_MAX];
	if (!status)
		s->bad = 0; /* only garbage in a row ends a session */
	mrc_msg_hdr h = {
		.type = req->type | MRC_MSG_REPLY,
		.len = (uint32_t)sizeof(h) + (status ? 0 : plen),
		.seq = req->seq,
		.status = status,
	};
	memcpy(buf, &h, sizeof(h));
	if (!status && plen)
		memcpy(buf + sizeof(h), payload, plen);
	session_send(s, buf, h.len, fds, status ? 0 : nfds);
	if (status)
		close_fds(fds, nfds);
}

static void send_event(app_session *s, const mrc_msg_event *ev)
{
	uint8_t buf[sizeof(mrc_msg_hdr) + sizeof(*ev)];
	mrc_msg_hdr h = {.type = MRC_MSG_EVENT, .len = sizeof(buf)};
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), ev, sizeof(*ev));
	session_send(s, buf, sizeof(buf), NULL, 0);
}

/* ---- regions ------------------------------------------------------------------ */

static uint32_t rkey_hash(const mrd_apps *a, uint32_t rkey)
{
	return (rkey * 0x9e3779b1u) & (a->nrkeys_buckets - 1);
}

static app_region *rkey_find(mrd_apps *a, uint32_t rkey)
{
	if (!a->rkeys)
		return NULL;
	for (app_region *r = a->rkeys[rkey_hash(a, rkey)]; r; r = r->rnext)
		if (r->rkey == rkey)
			return r;
	return NULL;
}

static int rkey_retired(const mrd_apps *a, uint32_t rkey)
{
	for (size_t i = 0; i < sizeof(a->retired) / sizeof(a->retired[0]); i++)
		if (a->retired[i] == rkey)
			return 1;
	return 0;
}

/* A fresh rkey: random (the only thing between a peer and our memory
 * besides its connection), never 0, unique, not one freed lately. */
static uint32_t rkey_new(mrd_apps *a)
{
	uint32_t k;
	do {
		while (getrandom(&k, sizeof(k), 0) != sizeof(k))
			;
	} while (!k || rkey_find(a, k) || rkey_retired(a, k));
	return k;
}

static void rkey_unlink(mrd_apps *a, app_region *r)
{
	for (app_region **pp = &a->rkeys[rkey_hash(a, r->rkey)]; *pp; pp = &(*pp)->rnext)
		if (*pp == r) {
			*pp = r->rnext;
			a->nregions--;
			break;
		}
	a->retired[a->retired_next++ % (sizeof(a->retired) / sizeof(a->retired[0]))] = r->rkey;
}

static void region_free(app_region *r)
{
	munmap(r->map, r->len);
	free(r);
}

/* Out of the lookups at once; the memory goes when nothing references it. */
static void region_remove(app_session *s, app_region *r)
{
	uint32_t slot = (r->lkey & ((1u << LKEY_SLOT_BITS) - 1)) - 1;
	s->regions[slot] = NULL;
	s->nregions--;
	s->region_bytes -= r->len;
	rkey_unlink(s->a, r);
	r->dead = 1;
	if (!r->refs) {
		region_free(r);
		return;
	}
	r->znext = s->zombies;
	s->zombies = r;
}

static void region_unref(app_region *r)
{
	if (!r || --r->refs || !r->dead)
		return;
	app_session *s = r->s;
	for (app_region **pp = &s->zombies; *pp; pp = &(*pp)->znext)
		if (*pp == r) {
			*pp = r->znext;
			break;
		}
	region_free(r);
}

static app_region *lkey_find(app_session *s, uint32_t lkey)
{
	uint32_t slot = (lkey & ((1u << LKEY_SLOT_BITS) - 1)) - 1;
	if (slot >= s->max_regions || !s->regions)
		return NULL;
	app_region *r = s->regions[slot];
	return r && r->lkey == lkey ? r : NULL;
}

/* [addr, addr + len) inside r's accessible bytes, overflow-safe, in the
 * application's space. */
static int in_region(const app_region *r, uint64_t addr, uint64_t len)
{
	return addr >= r->lo && len <= r->lolen && addr - r->lo <= r->lolen - len;
}

/* ---- contexts: completions ------------------------------------------------------ */

static void ctx_dirty(app_ctx *x)
{
	if (x->in_dirty)
		return;
	x->in_dirty = 1;
	x->dnext = x->s->a->dirty;
	x->s->a->dirty = x;
}

/* Room is reserved by the credit rule: see ctx_consume(). */
static void cq_put(app_ctx *x, uint64_t wr_id, uint32_t conn, uint8_t status, uint8_t opcode,
		   uint16_t stream, uint32_t byte_len, uint32_t imm, int has_imm)
{
	mrc_cqe e = {
		.wr_id = wr_id,
		.conn = conn,
		.byte_len = byte_len,
		.imm = has_imm ? imm : 0,
		.stream = stream,
		.status = status,
		.opcode = opcode,
		.flags = has_imm ? MRC_WC_WITH_IMM : 0,
	};
	memcpy(&x->cqes[x->cq_tail & (x->cq_entries - 1)], &e, sizeof(e));
	x->cq_tail++;
	x->s->a->cnt.cqes++;
	ctx_dirty(x);
}

static void ctx_publish(app_ctx *x)
{
	if (x->cq_pub == x->cq_tail || x->dead)
		return;
	x->cq_pub = x->cq_tail;
	if (mrc_ring_publish(x->cq, x->cq_tail)) {
		/* Our own end of the wakeup socket pair, and MSG_DONTWAIT on
		 * top: whatever the application does to its end, this never
		 * blocks (EAGAIN: a wakeup is pending anyway; EPIPE: it closed
		 * its end, its problem). */
		uint8_t one = 1;
		x->s->a->cnt.wakeups++;
		if (send(x->wakeup, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
			mrd_debug("app session %u ctx %u: wakeup: %s", x->s->id, x->id,
				  strerror(errno));
	}
}

static void publish_all(mrd_apps *a)
{
	while (a->dirty) {
		app_ctx *x = a->dirty;
		a->dirty = x->dnext;
		x->in_dirty = 0;
		ctx_publish(x);
	}
}

static void wr_release(app_ctx *x, uint32_t slot)
{
	app_wr *w = &x->wrs[slot];
	region_unref(w->r);
	w->r = NULL;
	w->ac = NULL;
	w->used = 0;
	x->free[x->nfree++] = slot;
	x->nout--;
}

/* ---- connections ------------------------------------------------------------------ */

static app_ctx *ctx_find(app_session *s, uint32_t id)
{
	for (app_ctx *x = s->ctxs; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

static int ended_handle(const app_session *s, uint32_t handle)
{
	uint32_t n = s->nended < ENDED_KEEP ? s->nended : ENDED_KEEP;
	for (uint32_t i = 0; i < n; i++)
		if (s->ended[i] == handle)
			return 1;
	return 0;
}

static app_conn *conn_of(app_session *s, uint32_t handle)
{
	mrd_conn *c = mrd_conn_find(s->a->d, handle);
	if (!c || c->ops != &app_ops || !c->ud)
		return NULL;
	app_conn *ac = c->ud;
	return ac->s == s ? ac : NULL;
}

/* Outstanding requests of a connection that is gone complete as flushed,
 * so every request the application posted gets its completion. */
static void conn_flush_wrs(app_conn *ac)
{
	app_ctx *x = ac->ctx;
	for (uint32_t i = 0; i < x->cq_entries && x->nout; i++) {
		app_wr *w = &x->wrs[i];
		if (!w->used || w->ac != ac)
			continue;
		cq_put(x, w->wr_id, ac->handle, MRC_WC_FLUSHED,
		       w->opcode == MRC_OP_RECV ? MRC_WC_OP_RECV : w->opcode, w->stream, 0, 0, 0);
		wr_release(x, i);
	}
}

static void conn_unlink(app_conn *ac)
{
	*ac->pprev = ac->next;
	if (ac->next)
		ac->next->pprev = ac->pprev;
	ac->s->nconns--;
	ac->ctx->users--;
}

static void conn_link(app_session *s, app_conn *ac)
{
	ac->s = s;
	ac->next = s->conns;
	ac->pprev = &s->conns;
	if (s->conns)
		s->conns->pprev = &ac->next;
	s->conns = ac;
	s->nconns++;
	ac->ctx->users++;
}

static void fill_peer(const mrd_conn *c, mrc_msg_event *ev)
{
	char b[64];
	snprintf(ev->peer, sizeof(ev->peer), "%s", mrd_sockaddr_str(&c->peer->addr, b, sizeof(b)));
}

static app_listener *listener_by_service(mrd_apps *a, uint32_t service_id)
{
	for (app_session *s = a->sessions; s; s = s->next)
		for (app_listener *l = s->listeners; l; l = l->next)
			if (l->service_id == service_id)
				return l;
	return NULL;
}

static int op_established(mrd_conn *c)
{
	mrd_apps *a = c->d->apps;
	app_conn *ac = c->ud;
	mrc_msg_event ev;
	memset(&ev, 0, sizeof(ev));
	if (ac) { /* ours: CONNECT */
		ac->state = AC_ESTABLISHED;
		if (ac->nstreams > c->max_streams)
			ac->nstreams = c->max_streams;
		ev.event = MRC_EV_ESTABLISHED;
		/* (the daemon confirms the connection with a PROBE, SPEC 9.3:
		 * peer.c, on_accept) */
	} else { /* a peer connected to a listener */
		app_listener *l = listener_by_service(a, c->service_id);
		if (!l || l->s->nconns >= l->s->max_conns)
			return -1; /* gone meanwhile, or full: reset */
		ac = calloc(1, sizeof(*ac));
		if (!ac)
			return -1;
		ac->ctx = l->ctx;
		ac->c = c;
		ac->handle = c->local_id;
		ac->listener_id = l->id;
		ac->state = AC_ESTABLISHED;
		ac->nstreams = c->max_streams;
		conn_link(l->s, ac);
		c->ud = ac;
		ev.event = MRC_EV_INCOMING;
		ev.listener_id = l->id;
	}
	ev.conn = ac->handle;
	ev.ctx_id = ac->ctx->id;
	ev.nstreams = ac->nstreams;
	fill_peer(c, &ev);
	snprintf(ev.reason, sizeof(ev.reason), "established");
	send_event(ac->s, &ev);
	return 0;
}

static void op_completion(mrd_conn *c, const mrp_cqe *e)
{
	app_conn *ac = c->ud;
	if (!ac)
		return;
	app_ctx *x = ac->ctx;
	uint32_t slot = (uint32_t)e->wr_id, gen = (uint32_t)(e->wr_id >> 32);
	if (slot >= x->cq_entries || !x->wrs[slot].used || x->wrs[slot].gen != gen ||
	    x->wrs[slot].ac != ac) {
		mrd_warn("app session %u conn %08x: completion of no request we posted",
			 ac->s->id, ac->handle);
		return;
	}
	app_wr *w = &x->wrs[slot];
	if (e->status != MRP_WC_SUCCESS && e->status != MRP_WC_FLUSHED)
		ac->failed = 1;
	/* The engine's opcodes and statuses are the ABI's (asserted above). */
	cq_put(x, w->wr_id, ac->handle, e->status, e->opcode, e->stream, e->byte_len, e->imm,
	       e->has_imm);
	wr_release(x, slot);
}

static void op_ended(mrd_conn *c, const char *why)
{
	app_conn *ac = c->ud;
	if (!ac)
		return;
	c->ud = NULL;
	conn_flush_wrs(ac);
	mrc_msg_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.conn = ac->handle;
	ev.ctx_id = ac->ctx->id;
	ev.nstreams = ac->nstreams;
	ev.listener_id = ac->listener_id;
	if (ac->state == AC_CONNECTING) {
		ev.event = MRC_EV_FAILED;
		ev.status = strstr(why, "rejected") ? MRC_ERR_REJECTED
			    : strstr(why, "cancelled") ? MRC_ERR_CLOSED
						       : MRC_ERR_UNREACHABLE;
	} else if (strncmp(why, "closed", 6) == 0 && !ac->failed) {
		ev.event = MRC_EV_CLOSED;
	} else {
		ev.event = MRC_EV_RESET;
		ev.status = MRC_ERR_CLOSED;
	}
	fill_peer(c, &ev);
	snprintf(ev.reason, sizeof(ev.reason), "%s",
		 ac->failed && ev.event == MRC_EV_RESET ? "a work request failed" : why);
	app_session *s = ac->s;
	s->ended[s->nended++ % ENDED_KEEP] = ac->handle;
	conn_unlink(ac);
	free(ac);
	send_event(s, &ev);
}

/* A peer WRITEs into a region of the session that owns the connection. */
static uint8_t *op_resolve(mrd_conn *c, uint32_t rkey, uint64_t addr, uint64_t len,
			   unsigned access, int *pnak)
{
	app_conn *ac = c->ud;
	app_region *r = ac ? rkey_find(c->d->apps, rkey) : NULL;
	if (!r || r->s != ac->s) {
		*pnak = MRP_NAK_INVALID_RKEY;
		return NULL;
	}
	if ((r->access & access) != access) {
		*pnak = MRP_NAK_ACCESS;
		return NULL;
	}
	if (!in_region(r, addr, len)) {
		*pnak = MRP_NAK_OUT_OF_BOUNDS;
		return NULL;
	}
	return r->map + (addr - r->app_addr);
}

static uint16_t op_max_streams(mrd *d, uint32_t service_id)
{
	app_listener *l = listener_by_service(d->apps, service_id);
	return l ? l->nstreams : 0;
}

static const mrd_conn_ops app_ops = {
	.established = op_established,
	.completion = op_completion,
	.ended = op_ended,
	.resolve = op_resolve,
	.max_streams = op_max_streams,
};

const mrd_conn_ops *mrd_apps_service(mrd *d, uint32_t service_id)
{
	return listener_by_service(d->apps, service_id) ? &app_ops : NULL;
}

/* ---- contexts: the submission ring -------------------------------------------- */

static void list_add_pending(app_ctx *x)
{
	mrd_apps *a = x->s->a;
	if (x->in_pending)
		return;
	x->in_pending = 1;
	x->pnext = a->pending;
	a->pending = x;
	uv_idle_start(&a->idle, on_idle); /* the loop polls without blocking */
}

static void wr_bad(app_ctx *x, const mrc_sqe *q, int why, uint8_t status)
{
	mrd_apps *a = x->s->a;
	a->cnt.wrs_bad++;
	a->cnt.wr_bad[why]++;
	x->s->wrs_bad++;
	uint8_t op = q->opcode == MRC_OP_RECV ? MRC_WC_OP_RECV : q->opcode;
	cq_put(x, q->wr_id, q->conn, status, op, q->stream, 0, 0, 0);
}

/* Validate and post one request (a private copy). Returns 0, or 1 when the
 * engine is full and the request must wait in the ring. */
static int sqe_post(app_ctx *x, const mrc_sqe *q)
{
	app_session *s = x->s;
	int op = q->opcode;
	int write = op == MRC_OP_WRITE || op == MRC_OP_WRITE_IMM;
	int imm = op == MRC_OP_WRITE_IMM || op == MRC_OP_SEND_IMM;
	if (op < MRC_OP_WRITE || op > MRC_OP_RECV) {
		wr_bad(x, q, MRD_APP_WR_BAD_OPCODE, MRC_WC_BAD_WR);
		return 0;
	}
	if (q->flags || !zero(q->reserved, sizeof(q->reserved)) ||
	    (!write && (q->remote_addr || q->rkey)) || (!imm && q->imm) ||
	    (!q->len && (q->addr || q->lkey))) {
		wr_bad(x, q, MRD_APP_WR_BAD_FIELDS, MRC_WC_BAD_WR);
		return 0;
	}
	app_conn *ac = conn_of(s, q->conn);
	if (!ac && ended_handle(s, q->conn)) {
		wr_bad(x, q, MRD_APP_WR_BAD_CONN, MRC_WC_FLUSHED);
		return 0;
	}
	if (!ac || ac->ctx != x || ac->state != AC_ESTABLISHED) {
		wr_bad(x, q, MRD_APP_WR_BAD_CONN, MRC_WC_BAD_WR);
		return 0;
	}
	if (ac->closing || ac->c->state != MRD_CONN_ESTABLISHED) {
		wr_bad(x, q, MRD_APP_WR_BAD_CONN, MRC_WC_FLUSHED);
		return 0;
	}
	if (q->stream >= ac->nstreams) {
		wr_bad(x, q, MRD_APP_WR_BAD_STREAM, MRC_WC_BAD_WR);
		return 0;
	}
	if (q->len > MRP_MSG_MAX) {
		wr_bad(x, q, MRD_APP_WR_BAD_LEN, MRC_WC_BAD_WR);
		return 0;
	}
	app_region *r = NULL;
	uint8_t *daddr = NULL;
	if (q->len) {
		r = lkey_find(s, q->lkey);
		if (!r) {
			wr_bad(x, q, MRD_APP_WR_BAD_LKEY, MRC_WC_LOC_PROT);
			return 0;
		}
		if (!in_region(r, q->addr, q->len)) {
			wr_bad(x, q, MRD_APP_WR_BAD_BOUNDS, MRC_WC_LOC_PROT);
			return 0;
		}
		if (op == MRC_OP_RECV && !(r->access & MRC_ACCESS_LOCAL_WRITE)) {
			wr_bad(x, q, MRD_APP_WR_BAD_ACCESS, MRC_WC_LOC_PROT);
			return 0;
		}
		daddr = r->map + (q->addr - r->app_addr);
	}
	/* A free slot exists: the credit rule bounds nout below cq_entries. */
	uint32_t slot = x->free[--x->nfree];
	app_wr *w = &x->wrs[slot];
	w->gen = ++x->gen;
	uint64_t eid = ((uint64_t)w->gen << 32) | slot;
	uint64_t now = uv_hrtime();
	int rv;
	if (op == MRC_OP_RECV) {
		rv = mrd_conn_post_recv(ac->c, q->stream, eid, daddr, q->len, now);
	} else {
		mrp_wr wr = {
			.wr_id = eid,
			.opcode = (uint8_t)op, /* MRC_OP_* are MRP_WR_* */
			.stream = q->stream,
			.local = daddr,
			.len = q->len,
			.remote_addr = q->remote_addr,
			.rkey = q->rkey,
			.imm = q->imm,
		};
		rv = mrd_conn_post_send(ac->c, &wr, now);
	}
	if (rv < 0) {
		x->free[x->nfree++] = slot;
		if (rv == MRP_ERR_FULL)
			return 1;
		wr_bad(x, q, MRD_APP_WR_BAD_ENGINE,
		       rv == MRP_ERR_STATE ? MRC_WC_FLUSHED : MRC_WC_BAD_WR);
		return 0;
	}
	w->wr_id = q->wr_id;
	w->r = r;
	w->ac = ac;
	w->stream = q->stream;
	w->opcode = (uint8_t)op;
	w->used = 1;
	if (r)
		r->refs++;
	x->nout++;
	s->wrs++;
	s->a->cnt.wrs++;
	mrd_conn_touch(ac->c);
	return 0;
}

/* Completions the CQ still holds (the application's head is untrusted: a
 * head that makes no sense counts as a full ring). */
static uint32_t cq_used(app_ctx *x)
{
	uint32_t head = atomic_load_explicit(&x->cq->head, memory_order_acquire);
	uint32_t used = x->cq_tail - head;
	return used > x->cq_entries ? x->cq_entries : used;
}

static void ctx_block(app_ctx *x)
{
	mrd_apps *a = x->s->a;
	if (x->in_blocked)
		return;
	x->in_blocked = 1;
	x->bnext = a->blocked;
	a->blocked = x;
	if (!uv_is_active((uv_handle_t *)&a->credit_timer))
		uv_timer_start(&a->credit_timer, on_credit, CREDIT_RETRY_MS, CREDIT_RETRY_MS);
}

/* Take what the SQ holds, within the budget and the CQ credit. */
static void ctx_consume(app_ctx *x)
{
	app_session *s = x->s;
	if (x->dead || s->state != S_OPEN)
		return;
	mrc_ring_awake(x->sq);
	uint32_t budget = SQ_BUDGET;
	for (;;) {
		uint32_t ready = mrc_ring_ready(x->sq, x->sq_head);
		if (ready > x->sq_entries) {
			session_close(s, "SQ tail beyond its ring");
			return;
		}
		if (!ready) {
			/* Sleep on the doorbell; a tail published meanwhile is seen. */
			ready = mrc_ring_prepare_sleep(x->sq, x->sq_head);
			if (!ready)
				break;
			if (ready > x->sq_entries) {
				session_close(s, "SQ tail beyond its ring");
				return;
			}
			mrc_ring_awake(x->sq);
		}
		int stop = 0;
		while (ready && budget) {
			if (cq_used(x) + x->nout + 1 > x->cq_entries) {
				stop = 2;
				break;
			}
			/* Copy before looking: the application may change it. */
			mrc_sqe q;
			memcpy(&q, &x->sqes[x->sq_head & (x->sq_entries - 1)], sizeof(q));
			if (sqe_post(x, &q)) {
				stop = 2; /* engine full: retry with the credit timer */
				break;
			}
			x->sq_head++;
			ready--;
			budget--;
			if (s->state != S_OPEN)
				return;
		}
		mrc_ring_consume(x->sq, x->sq_head);
		if (stop == 2) {
			atomic_fetch_or_explicit(&x->sq->flags, MRC_RING_NEED_WAKEUP,
						 memory_order_relaxed);
			ctx_block(x);
			return;
		}
		if (!budget) {
			list_add_pending(x);
			return;
		}
	}
}

static void on_doorbell(uv_poll_t *p, int status, int events)
{
	(void)events;
	app_ctx *x = p->data;
	uint8_t buf[256];
	ssize_t n;
	if (status < 0) {
		session_close(x->s, "doorbell error");
		return;
	}
	/* Our own end, non-blocking twice over (SOCK_NONBLOCK, MSG_DONTWAIT):
	 * the application's end is another open file description, so its
	 * flags cannot make this block. A bounded drain: the bytes only say
	 * "look". */
	for (int i = 0; i < 64 && (n = recv(x->doorbell, buf, sizeof(buf), MSG_DONTWAIT)) > 0;
	     i++)
		;
	if (n == 0) {
		session_close(x->s, "doorbell closed by the application");
		return;
	}
	ctx_consume(x);
	mrd_peer_run(x->s->a->d);
	publish_all(x->s->a);
}

static void on_idle(uv_idle_t *h)
{
	mrd_apps *a = h->data;
	app_ctx *list = a->pending;
	a->pending = NULL;
	uv_idle_stop(h);
	while (list) {
		app_ctx *x = list;
		list = x->pnext;
		x->in_pending = 0;
		ctx_consume(x);
	}
	mrd_peer_run(a->d);
	publish_all(a);
}

static void on_credit(uv_timer_t *t)
{
	mrd_apps *a = t->data;
	app_ctx *list = a->blocked;
	a->blocked = NULL;
	while (list) {
		app_ctx *x = list;
		list = x->bnext;
		x->in_blocked = 0;
		ctx_consume(x);
	}
	if (!a->blocked)
		uv_timer_stop(t);
	mrd_peer_run(a->d);
	publish_all(a);
}

/* Completions delivered anywhere in this loop pass are published once. */
static void on_check(uv_check_t *h)
{
	publish_all(h->data);
}

static void on_prepare(uv_prepare_t *h)
{
	publish_all(h->data);
}

/* ---- contexts: creation and teardown ------------------------------------------ */

static void ctx_handle_closed(uv_handle_t *h)
{
	app_ctx *x = h->data;
	free(x);
}

static void list_remove(app_ctx **head, app_ctx *x, size_t off, uint8_t *flag)
{
	if (!*flag)
		return;
	for (app_ctx **pp = head; *pp; pp = (app_ctx **)((char *)*pp + off))
		if (*pp == x) {
			*pp = *(app_ctx **)((char *)x + off);
			break;
		}
	*flag = 0;
}

/* Free a context nothing uses (no connection, listener or request). */
static void ctx_free(app_ctx *x)
{
	mrd_apps *a = x->s->a;
	x->dead = 1;
	list_remove(&a->dirty, x, offsetof(app_ctx, dnext), &x->in_dirty);
	list_remove(&a->pending, x, offsetof(app_ctx, pnext), &x->in_pending);
	list_remove(&a->blocked, x, offsetof(app_ctx, bnext), &x->in_blocked);
	for (app_ctx **pp = &x->s->ctxs; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	x->s->nctxs--;
	for (uint32_t i = 0; i < x->cq_entries; i++)
		if (x->wrs && x->wrs[i].used)
			region_unref(x->wrs[i].r);
	free(x->wrs);
	free(x->free);
	if (x->map)
		munmap(x->map, x->size);
	close(x->wakeup);
	uv_close((uv_handle_t *)&x->poll, ctx_handle_closed);
	close(x->doorbell); /* after uv_close stopped watching it */
}

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static size_t round64(size_t v)
{
	return (v + 63) & ~(size_t)63;
}

static void req_ctx_create(app_session *s, const mrc_msg_hdr *h, const mrc_ctx_create_req *q)
{
	mrd_apps *a = s->a;
	uint32_t sq = q->sq_entries, cq = q->cq_entries ? q->cq_entries : 2 * q->sq_entries;
	if (!is_pow2(sq) || sq < MRC_SQ_MIN || sq > MRC_SQ_MAX || !is_pow2(cq) || cq < 2 * sq ||
	    cq > CQ_MAX) {
		bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (s->nctxs >= s->max_contexts) {
		refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		return;
	}
	long pg = sysconf(_SC_PAGESIZE);
	size_t sq_off = round64(sizeof(mrc_shm_hdr));
	size_t cq_off = sq_off + sizeof(mrc_ring);
	size_t sqes_off = cq_off + sizeof(mrc_ring);
	size_t cqes_off = round64(sqes_off + (size_t)sq * sizeof(mrc_sqe));
	size_t size = cqes_off + (size_t)cq * sizeof(mrc_cqe);
	size = (size + (size_t)pg - 1) & ~((size_t)pg - 1);
	app_ctx *x = calloc(1, sizeof(*x));
	int fd = -1, fds[3] = {-1, -1, -1};
	if (!x)
		goto nomem;
	x->doorbell = x->wakeup = -1;
	x->wrs = calloc(cq, sizeof(*x->wrs));
	x->free = calloc(cq, sizeof(*x->free));
	if (!x->wrs || !x->free)
		goto nomem;
	fd = memfd_create("metaroce-ctx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		goto ioerr;
	x->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (x->map == MAP_FAILED) {
		x->map = NULL;
		goto ioerr;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto ioerr;
	/* Doorbell and wakeup: a stream socket pair each (ABI 2). The
	 * application gets one end, we keep the other: two open file
	 * descriptions, so nothing it does to its end (clearing O_NONBLOCK,
	 * filling or closing it) changes ours. Each pair is one-way: our
	 * doorbell end does not send, our wakeup end does not receive. */
	int db[2] = {-1, -1}, wk[2] = {-1, -1};
	fds[0] = fd;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, db) < 0)
		goto ioerr;
	x->doorbell = db[0];
	fds[1] = db[1];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, wk) < 0)
		goto ioerr;
	x->wakeup = wk[0];
	fds[2] = wk[1];
	if (shutdown(x->doorbell, SHUT_WR) < 0 || shutdown(x->wakeup, SHUT_RD) < 0)
		goto ioerr;
	x->size = size;
	x->s = s;
	x->id = ++s->next_ctx_id;
	x->sq_entries = sq;
	x->cq_entries = cq;
	mrc_shm_hdr hdr = {
		.magic = MRC_ABI_MAGIC,
		.version = MRC_ABI_VERSION,
		.ctx_id = x->id,
		.size = size,
		.sq_entries = sq,
		.cq_entries = cq,
		.sqe_size = sizeof(mrc_sqe),
		.cqe_size = sizeof(mrc_cqe),
		.sq_off = sq_off,
		.cq_off = cq_off,
		.sqes_off = sqes_off,
		.cqes_off = cqes_off,
	};
	memcpy(x->map, &hdr, sizeof(hdr));
	x->sq = (mrc_ring *)(x->map + sq_off);
	x->cq = (mrc_ring *)(x->map + cq_off);
	x->sqes = (mrc_sqe *)(x->map + sqes_off);
	x->cqes = (mrc_cqe *)(x->map + cqes_off);
	x->sq->entries = sq;
	x->sq->mask = sq - 1;
	x->cq->entries = cq;
	x->cq->mask = cq - 1;
	/* We sleep on the doorbell until the first request. */
	atomic_store_explicit(&x->sq->flags, MRC_RING_NEED_WAKEUP, memory_order_relaxed);
	for (uint32_t i = 0; i < cq; i++)
		x->free[i] = cq - 1 - i;
	x->nfree = cq;
	uv_poll_init(a->d->loop, &x->poll, x->doorbell);
	x->poll.data = x;
	uv_poll_start(&x->poll, UV_READABLE, on_doorbell);
	x->next = s->ctxs;
	s->ctxs = x;
	s->nctxs++;
	mrc_ctx_create_rep rep = {.ctx_id = x->id, .shm_size = size};
	reply(s, h, 0, &rep, sizeof(rep), fds, 3);
	return;
ioerr:
	mrd_warn("app session %u: context: %s", s->id, strerror(errno));
	if (x && x->map)
		munmap(x->map, size);
	if (fd >= 0)
		close(fd);
	if (fds[1] >= 0)
		close(fds[1]);
	if (fds[2] >= 0)
		close(fds[2]);
	if (x && x->doorbell >= 0)
		close(x->doorbell);
	if (x && x->wakeup >= 0)
		close(x->wakeup);
	if (x) {
		free(x->wrs);
		free(x->free);
	}
	free(x);
	reply(s, h, MRC_ERR_IO, NULL, 0, NULL, 0);
	return;
nomem:
	if (x) {
		free(x->wrs);
		free(x->free);
	}
	free(x);
	reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
}

/* ---- requests ---------------------------------------------------------------------- */

/* A request refused for a reason an honest application can meet (a limit,
 * a busy object): counted, but not against the session. */
static void refuse(app_session *s, const mrc_msg_hdr *h, int why, int status)
{
	s->a->cnt.requests_bad++;
	s->a->cnt.bad[why]++;
	reply(s, h, status, NULL, 0, NULL, 0);
}

/* A request that is wrong: counted, and BAD_MAX of them end the session. */
static void bad_req(app_session *s, const mrc_msg_hdr *h, int why, int status)
{
	s->bad++;
	refuse(s, h, why, status);
}

static void req_hello(app_session *s, const mrc_msg_hdr *h, const mrc_hello_req *q)
{
	mrd_apps *a = s->a;
	mrd *d = a->d;
	if (q->abi_version != MRC_ABI_VERSION) {
		mrd_info("app session from pid %d uid %u: ABI version %u, ours is %u: refused",
			 (int)s->pid, (unsigned)s->uid, q->abi_version, MRC_ABI_VERSION);
		bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_VERSION);
		session_close(s, NULL);
		return;
	}
	if (q->flags) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		session_close(s, NULL);
		return;
	}
	if (a->nsessions >= d->cfg.app_max_sessions) {
		mrd_warn("app session from pid %d uid %u: service.apps.max_sessions (%u) "
			 "reached: refused", (int)s->pid, (unsigned)s->uid,
			 d->cfg.app_max_sessions);
		bad_req(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		session_close(s, NULL);
		return;
	}
	/* One user may not hold them all (apps.max_sessions_per_user). */
	uint32_t mine = 0;
	for (app_session *o = a->sessions; o; o = o->next)
		mine += o != s && o->state == S_OPEN && o->uid == s->uid;
	if (mine >= d->cfg.app_max_sessions_per_user) {
		mrd_warn("app session from pid %d uid %u: apps.max_sessions_per_user (%u) "
			 "reached for that user: refused", (int)s->pid, (unsigned)s->uid,
			 d->cfg.app_max_sessions_per_user);
		a->cnt.sessions_quota++;
		bad_req(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		session_close(s, NULL);
		return;
	}
	/* The name is for logs: printable ASCII only. */
	size_t n = 0;
	for (; n < sizeof(q->name) && q->name[n]; n++)
		s->name[n] = q->name[n] >= 0x20 && q->name[n] < 0x7f ? q->name[n] : '?';
	s->name[n] = '\0';
	s->max_contexts = d->cfg.app_max_contexts;
	s->max_regions = d->cfg.app_max_regions;
	s->max_region_bytes = d->cfg.app_max_region_bytes;
	s->max_conns = d->cfg.app_max_conns;
	s->max_listeners = d->cfg.app_max_listeners;
	s->regions = calloc(s->max_regions, sizeof(*s->regions));
	if (!s->regions) {
		reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
		session_close(s, NULL);
		return;
	}
	s->state = S_OPEN;
	a->nhello--;
	s->id = ++a->next_session_id;
	a->nsessions++;
	a->cnt.sessions_opened++;
	mrp_conn_params cp;
	mrd_config_conn_params(&d->cfg, &cp);
	mrc_hello_rep rep = {
		.abi_version = MRC_ABI_VERSION,
		.session_id = s->id,
		.max_contexts = s->max_contexts,
		.max_regions = s->max_regions,
		.max_conns = s->max_conns,
		.max_listeners = s->max_listeners,
		.max_region_bytes = s->max_region_bytes,
		.nplanes = d->dp->nplanes,
		.mtu = cp.mtu,
		.max_msg = MRP_MSG_MAX,
	};
	mrd_info("app session %u: pid %d uid %u '%s' attached", s->id, (int)s->pid,
		 (unsigned)s->uid, s->name);
	reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

static void req_ctx_destroy(app_session *s, const mrc_msg_hdr *h, const mrc_ctx_req *q)
{
	if (q->reserved) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_ctx *x = ctx_find(s, q->ctx_id);
	if (!x) {
		bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	if (x->users || x->nout) {
		refuse(s, h, MRD_APP_BAD_STATE, MRC_ERR_BUSY);
		return;
	}
	publish_all(s->a);
	ctx_free(x);
	reply(s, h, 0, NULL, 0, NULL, 0);
}

static void req_mr_reg(app_session *s, const mrc_msg_hdr *h, const mrc_mr_reg_req *q, int fd)
{
	mrd_apps *a = s->a;
	struct stat st;
	int seals;
	const char *why = NULL;
	if (q->reserved || (q->access & ~(uint32_t)(MRC_ACCESS_LOCAL_WRITE |
						     MRC_ACCESS_REMOTE_WRITE |
						     MRC_ACCESS_REMOTE_READ))) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	long pg = sysconf(_SC_PAGESIZE);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		why = "not a memfd";
	else if ((seals = fcntl(fd, F_GET_SEALS)) < 0)
		why = "a file that cannot be sealed (not a memfd)";
	else if (!(seals & F_SEAL_SHRINK))
		why = "memfd not sealed with F_SEAL_SHRINK";
	else if (q->fd_offset % (uint64_t)pg)
		why = "offset not page-aligned";
	else if (!q->len || q->len > (uint64_t)st.st_size ||
		 q->fd_offset > (uint64_t)st.st_size - q->len)
		why = "offset and length beyond the file";
	else if (q->app_addr + q->len < q->app_addr)
		why = "address range wraps";
	if (why) {
		mrd_info("app session %u: MR_REG refused: %s", s->id, why);
		bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (s->nregions >= s->max_regions || q->len > s->max_region_bytes - s->region_bytes) {
		refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		return;
	}
	uint32_t slot = 0;
	while (slot < s->max_regions && s->regions[slot])
		slot++;
	app_region *r = calloc(1, sizeof(*r));
	if (!r) {
		reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
		return;
	}
	void *m = mmap(NULL, (size_t)q->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       (off_t)q->fd_offset);
	if (m == MAP_FAILED) {
		mrd_info("app session %u: MR_REG refused: mmap: %s", s->id, strerror(errno));
		free(r);
		bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (!a->rkeys) {
		a->nrkeys_buckets = 4096;
		a->rkeys = calloc(a->nrkeys_buckets, sizeof(*a->rkeys));
		if (!a->rkeys) {
			munmap(m, (size_t)q->len);
			free(r);
			reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
			return;
		}
	}
	r->s = s;
	r->map = m;
	r->len = q->len;
	r->app_addr = q->app_addr;
	r->lo = q->app_addr;
	r->lolen = q->len;
	r->access = q->access;
	s->lkey_gen = (s->lkey_gen + 1) & ((1u << (32 - LKEY_SLOT_BITS)) - 1);
	if (!s->lkey_gen)
		s->lkey_gen = 1;
	r->lkey = (s->lkey_gen << LKEY_SLOT_BITS) | (slot + 1);
	r->rkey = rkey_new(a);
	uint32_t b = rkey_hash(a, r->rkey);
	r->rnext = a->rkeys[b];
	a->rkeys[b] = r;
	a->nregions++;
	s->regions[slot] = r;
	s->nregions++;
	s->region_bytes += r->len;
	mrc_mr_reg_rep rep = {.lkey = r->lkey, .rkey = r->rkey};
	reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

static void req_mr_dereg(app_session *s, const mrc_msg_hdr *h, const mrc_mr_dereg_req *q)
{
	if (q->reserved) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_region *r = lkey_find(s, q->lkey);
	if (!r) {
		bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	region_remove(s, r);
	reply(s, h, 0, NULL, 0, NULL, 0);
}

static void req_listen(app_session *s, const mrc_msg_hdr *h, const mrc_listen_req *q)
{
	mrd_apps *a = s->a;
	if (!zero(q->reserved, sizeof(q->reserved))) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_ctx *x = ctx_find(s, q->ctx_id);
	if (!x) {
		bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	if (q->service_id == MRD_SVC_PERF || q->service_id == MRD_SVC_ECHO ||
	    listener_by_service(a, q->service_id)) {
		refuse(s, h, MRD_APP_BAD_STATE, MRC_ERR_BUSY);
		return;
	}
	if (s->nlisteners >= s->max_listeners) {
		refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		return;
	}
	app_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
		return;
	}
	l->s = s;
	l->ctx = x;
	l->id = ++s->next_listener_id;
	l->service_id = q->service_id;
	l->nstreams = q->nstreams ? q->nstreams : a->d->cfg.max_streams;
	if (l->nstreams > a->d->cfg.max_streams)
		l->nstreams = a->d->cfg.max_streams;
	l->next = s->listeners;
	s->listeners = l;
	s->nlisteners++;
	x->users++;
	mrc_listen_rep rep = {.listener_id = l->id};
	reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

static void listener_free(app_session *s, app_listener **pp)
{
	app_listener *l = *pp;
	*pp = l->next;
	l->ctx->users--;
	s->nlisteners--;
	free(l);
}

static void req_unlisten(app_session *s, const mrc_msg_hdr *h, const mrc_unlisten_req *q)
{
	if (q->reserved) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	for (app_listener **pp = &s->listeners; *pp; pp = &(*pp)->next)
		if ((*pp)->id == q->listener_id) {
			listener_free(s, pp);
			reply(s, h, 0, NULL, 0, NULL, 0);
			return;
		}
	bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
}

static void req_connect(app_session *s, const mrc_msg_hdr *h, const mrc_connect_req *q)
{
	mrd_apps *a = s->a;
	mrd *d = a->d;
	if (q->reserved || q->reserved2) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_ctx *x = ctx_find(s, q->ctx_id);
	if (!x) {
		bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	uint32_t all = d->dp->nplanes >= 32 ? UINT32_MAX : (1u << d->dp->nplanes) - 1;
	mrd_sockaddr to;
	memset(&to, 0, sizeof(to));
	socklen_t tolen = 0;
	const char *bad = NULL;
	if (!memchr(q->host, '\0', sizeof(q->host)))
		bad = "host not NUL-terminated";
	else if (mrd_sockaddr_host(&to, &tolen, q->host, q->port ? q->port : d->cfg.port) < 0)
		bad = "host is not a numeric IPv4 or IPv6 address";
	if (!bad && q->initial_paths > d->cfg.max_paths_per_plane)
		bad = "initial_paths above paths.max_per_plane";
	else if (!bad && q->planes_mask && !(q->planes_mask & all))
		bad = "planes_mask names none of our planes";
	if (bad) {
		mrd_info("app session %u: CONNECT refused: %s", s->id, bad);
		bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (s->nconns >= s->max_conns) {
		refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		return;
	}
	app_conn *ac = calloc(1, sizeof(*ac));
	if (!ac) {
		reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
		return;
	}
	ac->ctx = x;
	ac->state = AC_CONNECTING;
	ac->nstreams = q->nstreams ? q->nstreams : d->cfg.max_streams;
	if (ac->nstreams > d->cfg.max_streams)
		ac->nstreams = d->cfg.max_streams;
	mrd_conn_opts o = {
		.max_streams = ac->nstreams,
		.initial_paths = q->initial_paths,
		.planes_mask = q->planes_mask & all,
	};
	char err[128];
	mrd_conn *c;
	if (mrd_conn_connect_opts(d, &to, tolen, q->service_id, &app_ops, ac, &o, &c, err,
				  sizeof(err)) < 0) {
		mrd_info("app session %u: CONNECT %s: %s", s->id, q->host, err);
		free(ac);
		reply(s, h, MRC_ERR_UNREACHABLE, NULL, 0, NULL, 0);
		return;
	}
	ac->c = c;
	ac->handle = c->local_id;
	conn_link(s, ac);
	mrc_connect_rep rep = {.conn = ac->handle};
	reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

static void req_close(app_session *s, const mrc_msg_hdr *h, const mrc_close_req *q)
{
	if (q->abort > 1) {
		bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	app_conn *ac = conn_of(s, q->conn);
	if (!ac) {
		/* Not held against the session: the connection may have ended
		 * while the application decided to close it. */
		refuse(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	ac->closing = 1;
	/* The reply first: an attempt still connecting ends at once, and its
	 * event follows the reply. */
	reply(s, h, 0, NULL, 0, NULL, 0);
	mrd_conn_close(ac->c, (int)q->abort);
}

/* ---- exact bounds of a region (MRC_MSG_MR_BOUNDS) ----------------------------- */

static void req_mr_bounds(app_session *s, const mrc_msg_hdr *h, const mrc_mr_bounds_req *q)
{
	if (q->reserved) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_region *r = lkey_find(s, q->lkey);
	if (!r) {
		bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	if (!q->len || q->addr < r->app_addr || q->len > r->len ||
	    q->addr - r->app_addr > r->len - q->len) {
		bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	r->lo = q->addr;
	r->lolen = q->len;
	reply(s, h, 0, NULL, 0, NULL, 0);
}

/* ---- device information (MRC_MSG_DEVINFO) ------------------------------------ */

/* The planes (address, MTU, link speed, up) and the service port, for a
 * verbs-style device model in the library. */
static void req_devinfo(app_session *s, const mrc_msg_hdr *h, const mrc_devinfo_req *q)
{
	if (q->flags || q->reserved) {
		bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	mrd *d = s->a->d;
	mrp_conn_params cp;
	mrd_config_conn_params(&d->cfg, &cp);
	mrc_devinfo_rep rep = {.port = d->cfg.port, .mtu = cp.mtu, .max_msg = MRP_MSG_MAX};
	unsigned n = d->dp->nplanes < MRC_DEVINFO_PLANES ? d->dp->nplanes : MRC_DEVINFO_PLANES;
	for (unsigned i = 0; i < n; i++) {
		const mrd_sockaddr *sa = &d->dp->planes[i].local;
		mrc_devinfo_plane *p = &rep.planes[i];
		if (sa->sa.sa_family == AF_INET) {
			p->family = 4;
			memcpy(p->addr, &sa->in.sin_addr, 4);
		} else {
			p->family = 6;
			memcpy(p->addr, &sa->in6.sin6_addr, 16);
		}
		p->up = (uint8_t)(mrd_planes_up(d, i) != 0);
		p->mtu = d->cfg.planes[i].mtu;
		p->speed_bps = mrd_planes_speed(d, i);
	}
	rep.nplanes = (uint16_t)n;
	reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

/* ---- the session socket -------------------------------------------------------- */

static size_t payload_size(uint32_t type)
{
	switch (type) {
	case MRC_MSG_HELLO: return sizeof(mrc_hello_req);
	case MRC_MSG_CTX_CREATE: return sizeof(mrc_ctx_create_req);
	case MRC_MSG_CTX_DESTROY: return sizeof(mrc_ctx_req);
	case MRC_MSG_MR_REG: return sizeof(mrc_mr_reg_req);
	case MRC_MSG_MR_DEREG: return sizeof(mrc_mr_dereg_req);
	case MRC_MSG_LISTEN: return sizeof(mrc_listen_req);
	case MRC_MSG_UNLISTEN: return sizeof(mrc_unlisten_req);
	case MRC_MSG_CONNECT: return sizeof(mrc_connect_req);
	case MRC_MSG_CLOSE: return sizeof(mrc_close_req);
	case MRC_MSG_DEVINFO: return sizeof(mrc_devinfo_req);
	case MRC_MSG_MR_BOUNDS: return sizeof(mrc_mr_bounds_req);
	}
	return SIZE_MAX;
}

/* One datagram. fds are closed here unless a request keeps one. */
static void handle_msg(app_session *s, const uint8_t *buf, size_t n, int *fds, int nfds)
{
	mrd_apps *a = s->a;
	mrc_msg_hdr h;
	a->cnt.requests++;
	s->requests++;
	if (n < sizeof(h)) {
		a->cnt.requests_bad++;
		a->cnt.bad[MRD_APP_BAD_HEADER]++;
		close_fds(fds, nfds);
		session_close(s, "message shorter than a header");
		return;
	}
	memcpy(&h, buf, sizeof(h));
	if (s->state == S_REFUSED) {
		close_fds(fds, nfds);
		reply(s, &h, s->refuse_status, NULL, 0, NULL, 0);
		session_close(s, NULL);
		return;
	}
	if (h.len != n || (h.type & MRC_MSG_REPLY) || h.status || h.reserved) {
		close_fds(fds, nfds);
		bad_req(s, &h, MRD_APP_BAD_HEADER, MRC_ERR_INVAL);
		session_close(s, "bad message header");
		return;
	}
	size_t want = payload_size(h.type);
	if (s->state == S_HELLO && h.type != MRC_MSG_HELLO) {
		close_fds(fds, nfds);
		bad_req(s, &h, MRD_APP_BAD_STATE, MRC_ERR_VERSION);
		session_close(s, NULL);
		return;
	}
	if (want == SIZE_MAX) {
		close_fds(fds, nfds);
		bad_req(s, &h, MRD_APP_BAD_HEADER, MRC_ERR_INVAL);
		return;
	}
	if (n - sizeof(h) != want) {
		close_fds(fds, nfds);
		bad_req(s, &h, MRD_APP_BAD_LENGTH, MRC_ERR_INVAL);
		if (h.type == MRC_MSG_HELLO && s->state == S_HELLO)
			session_close(s, NULL);
		return;
	}
	int want_fds = h.type == MRC_MSG_MR_REG;
	if (nfds != want_fds) {
		close_fds(fds, nfds);
		bad_req(s, &h, MRD_APP_BAD_FDS, MRC_ERR_INVAL);
		if (h.type == MRC_MSG_HELLO && s->state == S_HELLO)
			session_close(s, NULL);
		return;
	}
	/* Payloads are copied to aligned storage before use. */
	union {
		mrc_hello_req hello;
		mrc_ctx_create_req cc;
		mrc_ctx_req cd;
		mrc_mr_reg_req reg;
		mrc_mr_dereg_req dereg;
		mrc_listen_req listen;
		mrc_unlisten_req unlisten;
		mrc_connect_req connect;
		mrc_close_req close;
		mrc_devinfo_req devinfo;
		mrc_mr_bounds_req bounds;
	} p;
	memcpy(&p, buf + sizeof(h), want);
	if (s->state == S_OPEN && h.type == MRC_MSG_HELLO) {
		bad_req(s, &h, MRD_APP_BAD_STATE, MRC_ERR_INVAL);
		return;
	}
	switch (h.type) {
	case MRC_MSG_HELLO: req_hello(s, &h, &p.hello); break;
	case MRC_MSG_CTX_CREATE: req_ctx_create(s, &h, &p.cc); break;
	case MRC_MSG_CTX_DESTROY: req_ctx_destroy(s, &h, &p.cd); break;
	case MRC_MSG_MR_REG:
		req_mr_reg(s, &h, &p.reg, fds[0]);
		close(fds[0]); /* mapped or refused: we keep no fd */
		break;
	case MRC_MSG_MR_DEREG: req_mr_dereg(s, &h, &p.dereg); break;
	case MRC_MSG_LISTEN: req_listen(s, &h, &p.listen); break;
	case MRC_MSG_UNLISTEN: req_unlisten(s, &h, &p.unlisten); break;
	case MRC_MSG_CONNECT: req_connect(s, &h, &p.connect); break;
	case MRC_MSG_CLOSE: req_close(s, &h, &p.close); break;
	case MRC_MSG_DEVINFO: req_devinfo(s, &h, &p.devinfo); break;
	case MRC_MSG_MR_BOUNDS: req_mr_bounds(s, &h, &p.bounds); break;
	}
}

static void session_read(app_session *s)
{
	for (int i = 0; i < RECV_BUDGET && s->state != S_CLOSED; i++) {
		uint8_t buf[MRC_MSG_MAX + 1];
		union {
			char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
				   .msg_controllen = sizeof(u.buf)};
		ssize_t n = recvmsg(s->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				session_close(s, strerror(errno));
			return;
		}
		int fds[MAX_FDS], nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t j = 0; j < k; j++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
				if (nfds < MAX_FDS)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
		if (n == 0) {
			close_fds(fds, nfds);
			session_close(s, NULL);
			return;
		}
		if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n > MRC_MSG_MAX) {
			close_fds(fds, nfds);
			s->a->cnt.requests_bad++;
			s->a->cnt.bad[MRD_APP_BAD_HEADER]++;
			session_close(s, "message too large or too many fds");
			return;
		}
		handle_msg(s, buf, (size_t)n, fds, nfds);
		if (s->state != S_CLOSED && s->bad >= BAD_MAX) {
			session_close(s, "too many bad requests");
			return;
		}
	}
}

static void on_session(uv_poll_t *p, int status, int events)
{
	app_session *s = p->data;
	mrd_apps *a = s->a;
	if (status < 0) {
		session_close(s, uv_strerror(status));
		return;
	}
	if (events & UV_WRITABLE)
		session_flush(s);
	if ((events & (UV_READABLE | UV_DISCONNECT)) && s->state != S_CLOSED)
		session_read(s);
	mrd_peer_run(a->d);
	publish_all(a);
}

static void session_poll(app_session *s)
{
	if (s->state == S_CLOSED)
		return;
	int ev = UV_READABLE | UV_DISCONNECT | (s->outq ? UV_WRITABLE : 0);
	if (ev != s->events) {
		s->events = ev;
		uv_poll_start(&s->poll, ev, on_session);
	}
}

static void session_handle_closed(uv_handle_t *h)
{
	free(h->data);
}

/* End a session: its connections are reset, everything it holds freed. The
 * struct itself goes when libuv is done with its handle. */
static void session_close(app_session *s, const char *why)
{
	mrd_apps *a = s->a;
	if (s->state == S_CLOSED)
		return;
	int was = s->state;
	s->state = S_CLOSED;
	if (was == S_OPEN) {
		a->nsessions--;
		a->cnt.sessions_closed++;
		if (why)
			a->cnt.sessions_killed++;
		mrd_info("app session %u: pid %d uid %u '%s' %s%s: %u conn(s), %u region(s), "
			 "%llu WRs (%llu bad)", s->id, (int)s->pid, (unsigned)s->uid, s->name,
			 why ? "closed: " : "detached", why ? why : "", s->nconns, s->nregions,
			 (unsigned long long)s->wrs, (unsigned long long)s->wrs_bad);
	} else if (was == S_REFUSED) {
		a->nrefused--;
	} else {
		a->nhello--;
		if (why)
			mrd_info("app socket: pid %d uid %u closed before HELLO: %s",
				 (int)s->pid, (unsigned)s->uid, why);
	}
	/* Connections: detached first (no callback comes back to us), then
	 * reset. A reset flushes the engine at once (mrp_conn_close with
	 * abort): it drops every posted receive and send, and a connection
	 * without ops resolves no rkey, so from here on no engine reads or
	 * writes the session's memory and the regions can be unmapped. */
	while (s->conns) {
		app_conn *ac = s->conns;
		mrd_conn *c = ac->c;
		conn_unlink(ac);
		free(ac);
		mrd_conn_detach(c);
		mrd_conn_close(c, 1);
	}
	while (s->listeners)
		listener_free(s, &s->listeners);
	while (s->ctxs) {
		/* Outstanding requests were the connections': nothing completes. */
		app_ctx *x = s->ctxs;
		for (uint32_t i = 0; i < x->cq_entries; i++)
			if (x->wrs[i].used) {
				region_unref(x->wrs[i].r);
				x->wrs[i].used = 0;
			}
		x->nout = 0;
		ctx_free(x);
	}
	for (uint32_t i = 0; s->regions && i < s->max_regions; i++)
		if (s->regions[i])
			region_remove(s, s->regions[i]);
	while (s->zombies) { /* references were the contexts' requests: none left */
		app_region *r = s->zombies;
		s->zombies = r->znext;
		region_free(r);
	}
	free(s->regions);
	s->regions = NULL;
	while (s->outq) {
		app_out *o = s->outq;
		s->outq = o->next;
		close_fds(o->fds, o->nfds);
		free(o);
	}
	s->outq_tail = &s->outq;
	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	uv_close((uv_handle_t *)&s->poll, session_handle_closed);
	close(s->fd);
	/* The RESETs go out at the caller's mrd_peer_run(): this may run
	 * inside a connection callback, where the loop must not re-enter. */
}

/* Whether uid (or the process pid, by its supplementary groups) is in gid.
 * Blocking NSS lookups once per session, never on the datapath. */
static int peer_in_group(uid_t uid, pid_t pid, gid_t gid)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (f) {
		int found = 0;
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "Groups:", 7) == 0) {
				char *p = line + 7, *end;
				for (;;) {
					unsigned long g = strtoul(p, &end, 10);
					if (end == p)
						break;
					if ((gid_t)g == gid)
						found = 1;
					p = end;
				}
			}
		fclose(f);
		if (found)
			return 1;
	}
	return mrd_uid_in_group(uid, gid);
}

/* Sessions that did not send their first message in time are closed. */
static void on_hello_timer(uv_timer_t *t)
{
	mrd_apps *a = t->data;
	uint64_t now = uv_now(a->d->loop);
	for (app_session *s = a->sessions, *next; s; s = next) {
		next = s->next;
		if ((s->state == S_HELLO || s->state == S_REFUSED) &&
		    now - s->accepted_ms >= HELLO_TIMEOUT_MS)
			session_close(s, "no HELLO within 5 s");
	}
	if (!a->nhello && !a->nrefused)
		uv_timer_stop(t);
}

static void on_accept(uv_poll_t *p, int status, int events)
{
	(void)events;
	mrd_apps *a = p->data;
	if (status < 0)
		return;
	for (int i = 0; i < 16; i++) {
		int fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
			close(fd);
			continue;
		}
		int allowed = cr.uid == 0 || cr.uid == geteuid() ||
			      (a->have_group && (cr.gid == a->gid ||
						 peer_in_group(cr.uid, cr.pid, a->gid)));
		/* Sessions not yet attached are bounded (they hold an fd
		 * each, and max_sessions counts attached ones only). */
		if (allowed ? a->nhello >= HELLO_MAX : a->nrefused >= REFUSED_MAX) {
			a->cnt.sessions_refused++;
			close(fd);
			continue;
		}
		app_session *s = calloc(1, sizeof(*s));
		if (!s) {
			close(fd);
			continue;
		}
		s->a = a;
		s->fd = fd;
		s->pid = cr.pid;
		s->uid = cr.uid;
		s->gid = cr.gid;
		s->outq_tail = &s->outq;
		s->accepted_ms = uv_now(a->d->loop);
		s->state = S_HELLO;
		if (allowed)
			a->nhello++;
		if (!allowed) {
			/* Answered at its first message, so the library reads the
			 * refusal as the reply to its HELLO. */
			s->state = S_REFUSED;
			s->refuse_status = MRC_ERR_PERM;
			a->nrefused++;
			a->cnt.sessions_refused++;
			mrd_info("app socket: pid %d uid %u is not in group '%s': refused",
				 (int)cr.pid, (unsigned)cr.uid, a->d->cfg.app_group);
		}
		s->next = a->sessions;
		s->pprev = &a->sessions;
		if (a->sessions)
			a->sessions->pprev = &s->next;
		a->sessions = s;
		uv_poll_init(a->d->loop, &s->poll, fd);
		s->poll.data = s;
		session_poll(s);
		if (!uv_is_active((uv_handle_t *)&a->hello_timer))
			uv_timer_start(&a->hello_timer, on_hello_timer, 1000, 1000);
	}
}

/* ---- the listening socket -------------------------------------------------------- */

int mrd_apps_init(mrd *d)
{
	mrd_apps *a = d->apps;
	const char *path = d->cfg.app_socket;
	memset(a, 0, sizeof(*a));
	a->d = d;
	a->fd = -1;
	uv_prepare_init(d->loop, &a->prepare);
	uv_check_init(d->loop, &a->check);
	uv_idle_init(d->loop, &a->idle);
	uv_timer_init(d->loop, &a->credit_timer);
	uv_timer_init(d->loop, &a->hello_timer);
	a->prepare.data = a->check.data = a->idle.data = a->credit_timer.data = a;
	a->hello_timer.data = a;
	a->handles_open = 1;
	uv_prepare_start(&a->prepare, on_prepare);
	uv_check_start(&a->check, on_check);
	if (d->cfg.app_group[0]) {
		a->have_group = mrd_group_gid(d->cfg.app_group, &a->gid);
		if (!a->have_group)
			mrd_info("app group '%s' does not exist: applications of root and "
				 "uid %u only", d->cfg.app_group, (unsigned)geteuid());
	}
	int rv = mrd_clear_stale_socket(path, SOCK_SEQPACKET);
	if (rv < 0) {
		mrd_err("app socket %s: %s", path, mrd_clear_stale_str(rv));
		return rv;
	}
	a->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		rv = -errno;
		mrd_err("app socket: %s", strerror(errno));
		return rv;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	/* Created 0660 from the start: no window in which others may connect. */
	mode_t old = umask(0117);
	rv = bind(a->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rv < 0 || listen(a->fd, 64) < 0) {
		rv = -errno;
		mrd_err("app socket %s: %s", path, strerror(errno));
		close(a->fd);
		a->fd = -1;
		return rv;
	}
	a->bound = 1;
	if (a->have_group && chown(path, (uid_t)-1, a->gid) < 0)
		mrd_warn("app socket %s: cannot give it to group %s: %s", path,
			 d->cfg.app_group, strerror(errno));
	uv_poll_init(d->loop, &a->poll, a->fd);
	a->poll.data = a;
	a->poll_open = 1;
	uv_poll_start(&a->poll, UV_READABLE, on_accept);
	mrd_info("app socket %s", path);
	return 0;
}

void mrd_apps_close(mrd *d)
{
	mrd_apps *a = d->apps;
	if (!a->d)
		return; /* never initialised */
	while (a->sessions)
		session_close(a->sessions, "daemon stopping");
	if (a->poll_open) {
		a->poll_open = 0;
		uv_close((uv_handle_t *)&a->poll, NULL);
	}
	if (a->fd >= 0) {
		close(a->fd);
		a->fd = -1;
	}
	if (a->bound) {
		a->bound = 0;
		unlink(d->cfg.app_socket);
	}
	if (a->handles_open) {
		a->handles_open = 0;
		uv_close((uv_handle_t *)&a->prepare, NULL);
		uv_close((uv_handle_t *)&a->check, NULL);
		uv_close((uv_handle_t *)&a->idle, NULL);
		uv_close((uv_handle_t *)&a->credit_timer, NULL);
		uv_close((uv_handle_t *)&a->hello_timer, NULL);
	}
	free(a->rkeys);
	a->rkeys = NULL;
}

/* ---- status -------------------------------------------------------------------------- */

json_t *mrd_apps_json(mrd *d)
{
	mrd_apps *a = d->apps;
	const mrd_apps_counters *k = &a->cnt;
	json_t *o = json_object();
	json_object_set_new(o, "sessions", json_integer(a->nsessions));
	json_object_set_new(o, "regions", json_integer(a->nregions));
	json_object_set_new(o, "sessions_opened", json_integer((json_int_t)k->sessions_opened));
	json_object_set_new(o, "sessions_closed", json_integer((json_int_t)k->sessions_closed));
	json_object_set_new(o, "sessions_refused", json_integer((json_int_t)k->sessions_refused));
	json_object_set_new(o, "sessions_quota", json_integer((json_int_t)k->sessions_quota));
	json_object_set_new(o, "sessions_killed", json_integer((json_int_t)k->sessions_killed));
	json_object_set_new(o, "requests", json_integer((json_int_t)k->requests));
	json_object_set_new(o, "requests_bad", json_integer((json_int_t)k->requests_bad));
	json_object_set_new(o, "wrs", json_integer((json_int_t)k->wrs));
	json_object_set_new(o, "wrs_bad", json_integer((json_int_t)k->wrs_bad));
	json_object_set_new(o, "cqes", json_integer((json_int_t)k->cqes));
	json_object_set_new(o, "wakeups", json_integer((json_int_t)k->wakeups));
	json_t *bad = json_object();
	for (int i = 0; i < MRD_APP_NBAD; i++)
		if (k->bad[i])
			json_object_set_new(bad, bad_names[i], json_integer((json_int_t)k->bad[i]));
	json_object_set_new(o, "bad", bad);
	json_t *wb = json_object();
	for (int i = 0; i < MRD_APP_WR_NBAD; i++)
		if (k->wr_bad[i])
			json_object_set_new(wb, wr_bad_names[i],
					    json_integer((json_int_t)k->wr_bad[i]));
	json_object_set_new(o, "wr_bad", wb);
	json_t *list = json_array();
	for (app_session *s = a->sessions; s; s = s->next) {
		if (s->state != S_OPEN)
			continue;
		json_array_append_new(list, json_pack("{s:i, s:i, s:i, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I}",
			"id", (int)s->id, "pid", (int)s->pid, "uid", (int)s->uid, "name", s->name,
			"contexts", (int)s->nctxs, "regions", (int)s->nregions,
			"conns", (int)s->nconns, "listeners", (int)s->nlisteners,
			"region_bytes", (json_int_t)s->region_bytes,
			"wrs", (json_int_t)s->wrs, "wrs_bad", (json_int_t)s->wrs_bad));
	}
	json_object_set_new(o, "list", list);
	return o;
}
