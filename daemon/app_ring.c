/* Application sessions: contexts and their rings (app_int.h). */
#define _GNU_SOURCE /* memfd_create, struct ucred, MSG_CMSG_CLOEXEC */
#include "app_int.h"

/* ---- contexts: completions ------------------------------------------------------ */

static void ctx_dirty(app_ctx *x)
{
	if (x->in_dirty)
		return;
	x->in_dirty = 1;
	x->dnext = x->s->a->dirty;
	x->s->a->dirty = x;
}

/* Room is reserved by the credit rule: see app_ctx_consume(). */
void app_cq_put(app_ctx *x, uint64_t wr_id, uint32_t conn, uint8_t status, uint8_t opcode,
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

void app_publish_all(mrd_apps *a)
{
	while (a->dirty) {
		app_ctx *x = a->dirty;
		a->dirty = x->dnext;
		x->in_dirty = 0;
		ctx_publish(x);
	}
}

void app_wr_release(app_ctx *x, uint32_t slot)
{
	app_wr *w = &x->wrs[slot];
	app_region_unref(w->r);
	w->r = NULL;
	w->ac = NULL;
	w->used = 0;
	w->unsignaled = 0;
	x->free[x->nfree++] = slot;
	x->nout--;
	if (w->opcode != MRC_OP_RECV) {
		x->nsend--;
		x->active_ms = uv_now(x->s->a->d->loop);
	}
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
	uv_idle_start(&a->idle, app_on_idle); /* the loop polls without blocking */
}

void app_wr_bad(app_ctx *x, const mrc_sqe *q, int why, uint8_t status)
{
	mrd_apps *a = x->s->a;
	a->cnt.wrs_bad++;
	a->cnt.wr_bad[why]++;
	x->s->wrs_bad++;
	uint8_t op = q->opcode == MRC_OP_RECV ? MRC_WC_OP_RECV : q->opcode;
	app_cq_put(x, q->wr_id, q->conn, status, op, q->stream, 0, 0, 0);
}

/* Validate and post one request (a private copy) at now (uv_hrtime()).
 * Returns 0, or 1 when the engine is full and the request must wait in the
 * ring. */
static int sqe_post(app_ctx *x, const mrc_sqe *q, uint64_t now)
{
	app_session *s = x->s;
	int op = q->opcode;
	/* tagged: remote_addr and rkey name the peer's memory */
	int write = op == MRC_OP_WRITE || op == MRC_OP_WRITE_IMM || op == MRC_OP_READ;
	int imm = op == MRC_OP_WRITE_IMM || op == MRC_OP_SEND_IMM;
	if (op < MRC_OP_WRITE || op > MRC_OP_READ) {
		app_wr_bad(x, q, MRD_APP_WR_BAD_OPCODE, MRC_WC_BAD_WR);
		return 0;
	}
	if ((q->flags & ~MRC_SQE_FLAGS_KNOWN) ||
	    (op == MRC_OP_RECV && (q->flags & MRC_SQE_UNSIGNALED)) ||
	    !app_zero(q->reserved, sizeof(q->reserved)) ||
	    (!write && (q->remote_addr || q->rkey)) || (!imm && q->imm) ||
	    (!q->len && (q->addr || q->lkey))) {
		app_wr_bad(x, q, MRD_APP_WR_BAD_FIELDS, MRC_WC_BAD_WR);
		return 0;
	}
	app_conn *ac = app_conn_of(s, q->conn);
	if (!ac && app_ended_handle(s, q->conn)) {
		app_wr_bad(x, q, MRD_APP_WR_BAD_CONN, MRC_WC_FLUSHED);
		return 0;
	}
	if (!ac || ac->ctx != x || ac->state != AC_ESTABLISHED) {
		app_wr_bad(x, q, MRD_APP_WR_BAD_CONN, MRC_WC_BAD_WR);
		return 0;
	}
	if (ac->closing || ac->c->state != MRD_CONN_ESTABLISHED) {
		app_wr_bad(x, q, MRD_APP_WR_BAD_CONN, MRC_WC_FLUSHED);
		return 0;
	}
	if (q->stream >= ac->nstreams) {
		app_wr_bad(x, q, MRD_APP_WR_BAD_STREAM, MRC_WC_BAD_WR);
		return 0;
	}
	if (q->len > MRP_MSG_MAX) {
		app_wr_bad(x, q, MRD_APP_WR_BAD_LEN, MRC_WC_BAD_WR);
		return 0;
	}
	app_region *r = NULL;
	uint8_t *daddr = NULL;
	if (q->len) {
		r = app_lkey_find(s, q->lkey);
		if (!r) {
			app_wr_bad(x, q, MRD_APP_WR_BAD_LKEY, MRC_WC_LOC_PROT);
			return 0;
		}
		if (!app_in_region(r, q->addr, q->len)) {
			app_wr_bad(x, q, MRD_APP_WR_BAD_BOUNDS, MRC_WC_LOC_PROT);
			return 0;
		}
		if ((op == MRC_OP_RECV || op == MRC_OP_READ) &&
		    !(r->access & MRC_ACCESS_LOCAL_WRITE)) {
			app_wr_bad(x, q, MRD_APP_WR_BAD_ACCESS, MRC_WC_LOC_PROT);
			return 0;
		}
		daddr = r->map + (q->addr - r->app_addr);
	}
	/* A free slot exists: the credit rule bounds nout below cq_entries. */
	uint32_t slot = x->free[--x->nfree];
	app_wr *w = &x->wrs[slot];
	w->gen = ++x->gen;
	uint64_t eid = ((uint64_t)w->gen << 32) | slot;
	int rv;
	if (op == MRC_OP_RECV) {
		rv = mrd_conn_post_recv(ac->c, q->stream, eid, daddr, q->len, now);
	} else {
		mrp_wr wr = {
			.wr_id = eid,
			/* MRC_OP_* are MRP_WR_*, but for READ */
			.opcode = op == MRC_OP_READ ? MRP_WR_READ : (uint8_t)op,
			.stream = q->stream,
			.local = daddr,
			.len = q->len,
			.remote_addr = q->remote_addr,
			.rkey = q->rkey,
			.imm = q->imm,
			.sink = op == MRC_OP_READ ? daddr : NULL,
		};
		rv = mrd_conn_post_send(ac->c, &wr, now);
	}
	if (rv < 0) {
		x->free[x->nfree++] = slot;
		if (rv == MRP_ERR_FULL)
			return 1;
		app_wr_bad(x, q, MRD_APP_WR_BAD_ENGINE,
		       rv == MRP_ERR_STATE ? MRC_WC_FLUSHED : MRC_WC_BAD_WR);
		return 0;
	}
	w->wr_id = q->wr_id;
	w->r = r;
	w->ac = ac;
	w->stream = q->stream;
	w->opcode = (uint8_t)op;
	w->unsignaled = (q->flags & MRC_SQE_UNSIGNALED) != 0;
	w->used = 1;
	if (r)
		r->refs++;
	x->nout++;
	if (op != MRC_OP_RECV) {
		x->nsend++;
		x->active_ms = uv_now(s->a->d->loop);
	}
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
		uv_timer_start(&a->credit_timer, app_on_credit, CREDIT_RETRY_MS, CREDIT_RETRY_MS);
}

/*
 * Whether the SQ stays awake (its NEED_WAKEUP flag clear, so the
 * application rings no doorbell) instead of sleeping on the doorbell. While
 * the context has sends outstanding, this loop turns again soon anyway (for
 * their ACKs), and every turn looks at the SQs that stay awake
 * (app_poll_awake()); so does the awake timer, every SQ_AWAKE_POLL_MS, in
 * case nothing comes back (a request posted then waits that long at most).
 * A program that posts one request per call as its completions come
 * (verbs programs do) rang the doorbell every third request or so, and each
 * ring cost it a system call and this loop an extra turn. A context that
 * neither posts nor completes anything for SQ_AWAKE_MS (a peer gone silent,
 * a send waiting for the peer's receive) sleeps on the doorbell again.
 */
static int sq_stay_awake(app_ctx *x)
{
	uv_loop_t *loop = x->s->a->d->loop;
	return x->nsend && uv_now(loop) - x->active_ms < SQ_AWAKE_MS;
}

static void list_add_awake(app_ctx *x)
{
	mrd_apps *a = x->s->a;
	if (x->in_awake)
		return;
	x->in_awake = 1;
	x->anext = a->awake;
	a->awake = x;
	if (!uv_is_active((uv_handle_t *)&a->awake_timer))
		uv_timer_start(&a->awake_timer, app_on_awake_timer, SQ_AWAKE_POLL_MS,
			       SQ_AWAKE_POLL_MS);
}

/* Take what the SQ holds, within the budget and the CQ credit. */
void app_ctx_consume(app_ctx *x)
{
	app_session *s = x->s;
	if (x->dead || s->state != S_OPEN)
		return;
	mrc_ring_awake(x->sq);
	uint32_t budget = SQ_BUDGET;
	for (;;) {
		uint32_t ready = mrc_ring_ready(x->sq, x->sq_head);
		if (ready > x->sq_entries) {
			app_session_close(s, "SQ tail beyond its ring");
			return;
		}
		if (!ready) {
			if (sq_stay_awake(x)) {
				list_add_awake(x);
				break;
			}
			/* Sleep on the doorbell; a tail published meanwhile is seen. */
			ready = mrc_ring_prepare_sleep(x->sq, x->sq_head);
			if (!ready)
				break;
			if (ready > x->sq_entries) {
				app_session_close(s, "SQ tail beyond its ring");
				return;
			}
			mrc_ring_awake(x->sq);
		}
		int stop = 0;
		/* One clock reading per batch of requests, not one per request
		 * (bench/README.md: a tenth of the daemon's CPU went to reading
		 * the clock at 64-byte messages). */
		uint64_t now = uv_hrtime();
		while (ready && budget) {
			if (cq_used(x) + x->nout + 1 > x->cq_entries) {
				stop = 2;
				break;
			}
			/* Copy before looking: the application may change it. */
			mrc_sqe q;
			memcpy(&q, &x->sqes[x->sq_head & (x->sq_entries - 1)], sizeof(q));
			if (sqe_post(x, &q, now)) {
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
		app_session_close(x->s, "doorbell error");
		return;
	}
	x->s->a->cnt.doorbells++;
	/* Our own end, non-blocking twice over (SOCK_NONBLOCK, MSG_DONTWAIT):
	 * the application's end is another open file description, so its
	 * flags cannot make this block. A bounded drain: the bytes only say
	 * "look". */
	for (int i = 0; i < 64 && (n = recv(x->doorbell, buf, sizeof(buf), MSG_DONTWAIT)) > 0;
	     i++)
		;
	if (n == 0) {
		app_session_close(x->s, "doorbell closed by the application");
		return;
	}
	app_ctx_consume(x);
	mrd_peer_run(x->s->a->d);
	app_publish_all(x->s->a);
}

void app_on_idle(uv_idle_t *h)
{
	mrd_apps *a = h->data;
	app_ctx *list = a->pending;
	a->pending = NULL;
	uv_idle_stop(h);
	while (list) {
		app_ctx *x = list;
		list = x->pnext;
		x->in_pending = 0;
		app_ctx_consume(x);
	}
	mrd_peer_run(a->d);
	app_publish_all(a);
}

void app_on_credit(uv_timer_t *t)
{
	mrd_apps *a = t->data;
	app_ctx *list = a->blocked;
	a->blocked = NULL;
	while (list) {
		app_ctx *x = list;
		list = x->bnext;
		x->in_blocked = 0;
		app_ctx_consume(x);
	}
	if (!a->blocked)
		uv_timer_stop(t);
	mrd_peer_run(a->d);
	app_publish_all(a);
}

/* The SQs that stay awake: what was posted since the last turn is taken,
 * and each stays awake or goes to sleep on its doorbell (sq_stay_awake()). */
static void app_poll_awake(mrd_apps *a)
{
	app_ctx *list = a->awake;
	int took = 0;
	a->awake = NULL;
	while (list) {
		app_ctx *x = list;
		list = x->anext;
		x->in_awake = 0;
		if (!x->dead && mrc_ring_ready(x->sq, x->sq_head) == 0 && sq_stay_awake(x)) {
			list_add_awake(x); /* nothing new: as it was */
			continue;
		}
		uint32_t head = x->sq_head;
		app_ctx_consume(x);
		took |= x->sq_head != head;
	}
	if (took)
		mrd_peer_run(a->d);
}

void app_on_awake_timer(uv_timer_t *t)
{
	mrd_apps *a = t->data;
	app_poll_awake(a);
	if (!a->awake)
		uv_timer_stop(t);
	app_publish_all(a);
}

/* Completions delivered anywhere in this loop pass are published once. */
void app_on_check(uv_check_t *h)
{
	app_poll_awake(h->data);
	app_publish_all(h->data);
}

/* (before the loop blocks: an SQ that may not stay awake goes to sleep on
 * its doorbell here) */
void app_on_prepare(uv_prepare_t *h)
{
	app_poll_awake(h->data);
	app_publish_all(h->data);
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
void app_ctx_free(app_ctx *x)
{
	mrd_apps *a = x->s->a;
	x->dead = 1;
	list_remove(&a->dirty, x, offsetof(app_ctx, dnext), &x->in_dirty);
	list_remove(&a->pending, x, offsetof(app_ctx, pnext), &x->in_pending);
	list_remove(&a->blocked, x, offsetof(app_ctx, bnext), &x->in_blocked);
	list_remove(&a->awake, x, offsetof(app_ctx, anext), &x->in_awake);
	for (app_ctx **pp = &x->s->ctxs; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	x->s->nctxs--;
	for (uint32_t i = 0; i < x->cq_entries; i++)
		if (x->wrs && x->wrs[i].used)
			app_region_unref(x->wrs[i].r);
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

void app_req_ctx_create(app_session *s, const mrc_msg_hdr *h, const mrc_ctx_create_req *q)
{
	mrd_apps *a = s->a;
	uint32_t sq = q->sq_entries, cq = q->cq_entries ? q->cq_entries : 2 * q->sq_entries;
	if (!is_pow2(sq) || sq < MRC_SQ_MIN || sq > MRC_SQ_MAX || !is_pow2(cq) || cq < 2 * sq ||
	    cq > CQ_MAX) {
		app_bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (s->nctxs >= s->max_contexts) {
		app_refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
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
	app_reply(s, h, 0, &rep, sizeof(rep), fds, 3);
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
	app_reply(s, h, MRC_ERR_IO, NULL, 0, NULL, 0);
	return;
nomem:
	if (x) {
		free(x->wrs);
		free(x->free);
	}
	free(x);
	app_reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
}
