/*
 * Contexts: the shared-memory rings of abi.h seen from the application.
 * We produce submission entries (SQ) and consume completions (CQ).
 *
 * The fast path (post, poll) takes no lock and makes no system call except
 * the doorbell write, and that only when the daemon sleeps
 * (mrc_ring_publish() reports its NEED_WAKEUP flag).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Largest mapping we accept from the daemon: the rings of MRC_SQ_MAX
 * entries with the largest CQ we would ask for fit many times over. */
#define SHM_MAX ((uint64_t)1 << 30)

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* [off, off+len) inside size, without overflow. */
static int within(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

int mrc_shm_check(const void *shm, uint64_t size, uint32_t sq_entries, uint32_t cq_entries)
{
	if (size < sizeof(mrc_shm_hdr))
		return MRC_ERR_PROTO;
	const mrc_shm_hdr *h = shm;
	if (h->magic != MRC_ABI_MAGIC)
		return MRC_ERR_PROTO;
	if (h->version != MRC_ABI_VERSION)
		return MRC_ERR_VERSION;
	if (h->size != size || h->sqe_size != sizeof(mrc_sqe) || h->cqe_size != sizeof(mrc_cqe))
		return MRC_ERR_PROTO;
	if (h->sq_entries != sq_entries || !is_pow2(h->sq_entries) || !is_pow2(h->cq_entries))
		return MRC_ERR_PROTO;
	if (cq_entries ? h->cq_entries != cq_entries : h->cq_entries != 2 * sq_entries)
		return MRC_ERR_PROTO;
	/* Rings on cache lines (their atomics must be naturally aligned),
	 * entries on 8 bytes; everything inside the mapping. */
	if (h->sq_off % MRC_CACHELINE || h->cq_off % MRC_CACHELINE || h->sqes_off % 8 ||
	    h->cqes_off % 8)
		return MRC_ERR_PROTO;
	if (!within(h->sq_off, sizeof(mrc_ring), size) || !within(h->cq_off, sizeof(mrc_ring), size) ||
	    !within(h->sqes_off, (uint64_t)h->sq_entries * sizeof(mrc_sqe), size) ||
	    !within(h->cqes_off, (uint64_t)h->cq_entries * sizeof(mrc_cqe), size))
		return MRC_ERR_PROTO;
	const mrc_ring *sq = (const mrc_ring *)((const uint8_t *)shm + h->sq_off);
	const mrc_ring *cq = (const mrc_ring *)((const uint8_t *)shm + h->cq_off);
	if (sq->entries != h->sq_entries || sq->mask != h->sq_entries - 1 ||
	    cq->entries != h->cq_entries || cq->mask != h->cq_entries - 1)
		return MRC_ERR_PROTO;
	return 0;
}

void mrc_ctx_free_local(mrc_ctx *ctx)
{
	if (ctx->shm)
		munmap(ctx->shm, ctx->shm_size);
	if (ctx->doorbell >= 0)
		close(ctx->doorbell);
	if (ctx->wakeup >= 0)
		close(ctx->wakeup);
	free(ctx);
}

MRC_API int mrc_ctx_new(mrc_session *s, uint32_t sq_entries, uint32_t cq_entries, mrc_ctx **pout)
{
	if (!s || !pout)
		return MRC_ERR_INVAL;
	*pout = NULL;
	if (sq_entries == 0)
		sq_entries = 1024;
	if (!is_pow2(sq_entries) || sq_entries < MRC_SQ_MIN || sq_entries > MRC_SQ_MAX)
		return MRC_ERR_INVAL;
	if (cq_entries && (!is_pow2(cq_entries) || cq_entries < 2 * sq_entries))
		return MRC_ERR_INVAL;
	mrc_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return MRC_ERR_NOMEM;
	ctx->doorbell = ctx->wakeup = -1;
	ctx->s = s;

	mrc_ctx_create_req req = {.sq_entries = sq_entries, .cq_entries = cq_entries};
	mrc_ctx_create_rep rep;
	int fds[3], nfds = 0;
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_CTX_CREATE, &req, sizeof(req), -1, &rep, sizeof(rep), fds,
			     3, &nfds);
	if (rc)
		goto fail_locked;
	ctx->id = rep.ctx_id;
	int shm_fd = nfds > 0 ? fds[0] : -1;
	ctx->doorbell = nfds > 1 ? fds[1] : -1;
	ctx->wakeup = nfds > 2 ? fds[2] : -1;
	if (nfds != 3 || rep.shm_size < sizeof(mrc_shm_hdr) || rep.shm_size > SHM_MAX) {
		if (shm_fd >= 0)
			close(shm_fd);
		rc = MRC_ERR_PROTO;
		goto fail_destroy;
	}
	ctx->shm_size = (size_t)rep.shm_size;
	ctx->shm = mmap(NULL, ctx->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
	close(shm_fd);
	if (ctx->shm == MAP_FAILED) {
		ctx->shm = NULL;
		rc = MRC_ERR_IO;
		goto fail_destroy;
	}
	rc = mrc_shm_check(ctx->shm, rep.shm_size, sq_entries, cq_entries);
	if (rc)
		goto fail_destroy;
	const mrc_shm_hdr *h = ctx->shm;
	uint8_t *base = ctx->shm;
	ctx->sq = (mrc_ring *)(base + h->sq_off);
	ctx->cq = (mrc_ring *)(base + h->cq_off);
	ctx->sqes = (mrc_sqe *)(base + h->sqes_off);
	ctx->cqes = (const mrc_cqe *)(base + h->cqes_off);
	ctx->sq_entries = h->sq_entries;
	ctx->sq_mask = h->sq_entries - 1;
	ctx->cq_entries = h->cq_entries;
	ctx->cq_mask = h->cq_entries - 1;
	/* Our indices start where the daemon's are (normally 0). */
	ctx->sq_tail = ctx->sq_pub = ctx->sq_kick =
		atomic_load_explicit(&ctx->sq->tail, memory_order_relaxed);
	ctx->cq_head = atomic_load_explicit(&ctx->cq->head, memory_order_relaxed);
	/* The wakeup fd is drained by mrc_poll_cq() after a wakeup: it
	 * must never block there. */
	int fl = fcntl(ctx->wakeup, F_GETFL);
	if (fl < 0 || fcntl(ctx->wakeup, F_SETFL, fl | O_NONBLOCK) < 0) {
		rc = MRC_ERR_IO;
		goto fail_destroy;
	}
	ctx->next = s->ctxs;
	s->ctxs = ctx;
	pthread_mutex_unlock(&s->lock);
	*pout = ctx;
	return 0;

fail_destroy: {
	mrc_ctx_req dreq = {.ctx_id = ctx->id};
	(void)mrc_request(s, MRC_MSG_CTX_DESTROY, &dreq, sizeof(dreq), -1, NULL, 0, NULL, 0, NULL);
}
fail_locked:
	pthread_mutex_unlock(&s->lock);
	mrc_ctx_free_local(ctx);
	return rc;
}

MRC_API int mrc_ctx_del(mrc_ctx *ctx)
{
	if (!ctx)
		return 0;
	mrc_session *s = ctx->s;
	mrc_ctx_req req = {.ctx_id = ctx->id};
	pthread_mutex_lock(&s->lock);
	for (mrc_conn *c = s->conns; c; c = c->next) {
		if (c->ctx == ctx) { /* not closed by the application */
			pthread_mutex_unlock(&s->lock);
			return MRC_ERR_BUSY;
		}
	}
	/* Connections closed gracefully drain in the daemon for a round trip
	 * or a few (SPEC: CLOSE is retried with backoff): wait for them. */
	uint64_t until = mrc_now_ms() + MRC_CLOSE_DRAIN_MS;
	int rc;
	for (;;) {
		rc = mrc_request(s, MRC_MSG_CTX_DESTROY, &req, sizeof(req), -1, NULL, 0, NULL, 0,
				 NULL);
		if (rc != MRC_ERR_BUSY || mrc_now_ms() >= until)
			break;
		pthread_mutex_unlock(&s->lock);
		poll(NULL, 0, 5);
		pthread_mutex_lock(&s->lock);
	}
	if (rc == MRC_ERR_BUSY) {
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	for (mrc_ctx **pp = &s->ctxs; *pp; pp = &(*pp)->next) {
		if (*pp == ctx) {
			*pp = ctx->next;
			break;
		}
	}
	/* Leftover handles must not reach the freed context. */
	for (mrc_conn *c = s->conns; c; c = c->next)
		if (c->ctx == ctx)
			c->ctx = NULL;
	for (mrc_listener *l = s->listeners; l; l = l->next)
		if (l->ctx == ctx)
			l->ctx = NULL;
	pthread_mutex_unlock(&s->lock);
	mrc_ctx_free_local(ctx);
	return rc;
}

MRC_API int mrc_ctx_fd(const mrc_ctx *ctx)
{
	return ctx ? ctx->wakeup : MRC_ERR_INVAL;
}

MRC_API void mrc_ctx_set_busy_poll(mrc_ctx *ctx, uint32_t usec)
{
	if (ctx)
		ctx->busy_usec = usec;
}

/* ---- posting ------------------------------------------------------------------- */

static int check_wr(const mrc_ctx *ctx, const mrc_conn *c, int op, uint16_t stream,
		    const void *addr, uint32_t len, const mrc_mr *mr)
{
	if (!c || c->s != ctx->s || c->ctx != ctx)
		return MRC_ERR_INVAL;
	if (op < MRC_OP_WRITE || op > MRC_OP_READ)
		return MRC_ERR_INVAL;
	if (len) { /* an empty message names no buffer (the ABI wants addr, lkey 0) */
		if (!mr || mr->s != ctx->s)
			return MRC_ERR_INVAL;
		if ((op == MRC_OP_RECV || op == MRC_OP_READ) &&
		    !(mr->access & MRC_ACCESS_LOCAL_WRITE))
			return MRC_ERR_INVAL;
		uintptr_t a = (uintptr_t)addr, b = (uintptr_t)mr->addr;
		if (a < b || a - b > mr->len || len > mr->len - (a - b))
			return MRC_ERR_INVAL;
	}
	if (ctx->s->hello.max_msg && len > ctx->s->hello.max_msg)
		return MRC_ERR_INVAL;
	if (atomic_load_explicit(&((mrc_conn *)c)->state, memory_order_relaxed) !=
	    MRC_CONN_ESTABLISHED)
		return MRC_ERR_CLOSED;
	if (stream >= atomic_load_explicit(&((mrc_conn *)c)->nstreams, memory_order_relaxed))
		return MRC_ERR_INVAL;
	return 0;
}

static void fill_sqe(mrc_ctx *ctx, int op, const mrc_conn *c, uint16_t stream, const void *addr,
		     uint32_t len, const mrc_mr *mr, uint64_t raddr, uint32_t rkey, uint32_t imm,
		     uint64_t wr_id, unsigned flags)
{
	mrc_sqe *e = &ctx->sqes[ctx->sq_tail & ctx->sq_mask];
	/* Whole-entry store: reserved bytes must be 0 and the daemon may be
	 * reading the other slots concurrently, never this one (it is
	 * beyond the published tail). */
	*e = (mrc_sqe){
		.wr_id = wr_id,
		.opcode = (uint8_t)op,
		.flags = (flags & MRC_POST_UNSIGNALED) ? MRC_SQE_UNSIGNALED : 0,
		.stream = stream,
		.conn = c->handle,
		.addr = len ? (uint64_t)(uintptr_t)addr : 0,
		.lkey = len ? mr->lkey : 0,
		.len = len,
		.remote_addr = raddr,
		.rkey = rkey,
		.imm = imm,
	};
	ctx->sq_tail++;
}

MRC_API int mrc_submit(mrc_ctx *ctx)
{
	if (!ctx)
		return MRC_ERR_INVAL;
	if (mrc_is_dead(ctx->s))
		return MRC_ERR_DAEMON;
	uint32_t n = ctx->sq_tail - ctx->sq_pub;
	if (n == 0)
		return 0;
	ctx->sq_pub = ctx->sq_tail;
	/* Release store of the tail: the entries written above are visible
	 * to the daemon's acquire load of it (mrc_ring_ready()). */
	if (mrc_ring_publish(ctx->sq, ctx->sq_pub)) {
		/* The daemon sleeps, or so its flag says: but while it has not
		 * consumed the entries of our last doorbell, that doorbell is
		 * still to be answered (it clears the flag only when it runs),
		 * and it reads the tail again before it sleeps, so it takes
		 * these entries too: no second doorbell (a program that posts
		 * one request per call rang once per request). The load of the
		 * head follows the seq_cst fence of mrc_ring_publish(), which
		 * pairs with the one in the daemon's mrc_ring_prepare_sleep():
		 * either the daemon, before it sleeps, sees our tail, or we see
		 * the head it stored before setting its flag. */
		uint32_t head = atomic_load_explicit(&ctx->sq->head, memory_order_relaxed);
		if ((int32_t)(ctx->sq_kick - head) > 0)
			return (int)n;
		ctx->sq_kick = ctx->sq_pub;
		uint8_t one = 1;
		ssize_t w;
		do
			w = send(ctx->doorbell, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		while (w < 0 && errno == EINTR);
		/* EAGAIN: bytes the daemon has not read yet, so it has a
		 * wakeup pending anyway; EPIPE: the daemon is gone, which the
		 * session socket reports. */
	}
	return (int)n;
}

/* The flags of a post: MRC_ERR_INVAL for an unsignaled receive,
 * MRC_ERR_VERSION for unsignaled requests to a daemon that would refuse
 * them (abi.h, MRC_FEAT_UNSIGNALED). (Other bits are ignored, as they
 * always were.) */
static int check_flags(const mrc_ctx *ctx, int op, unsigned flags)
{
	if (!(flags & MRC_POST_UNSIGNALED))
		return 0;
	if (op == MRC_OP_RECV)
		return MRC_ERR_INVAL;
	if (!(ctx->s->hello.features & MRC_FEAT_UNSIGNALED))
		return MRC_ERR_VERSION;
	return 0;
}

static int post_one(mrc_ctx *ctx, mrc_conn *c, int op, uint16_t stream, const void *addr,
		    uint32_t len, const mrc_mr *mr, uint64_t raddr, uint32_t rkey, uint32_t imm,
		    uint64_t wr_id, unsigned flags)
{
	if (!ctx)
		return MRC_ERR_INVAL;
	if (mrc_is_dead(ctx->s))
		return MRC_ERR_DAEMON;
	int rc = check_flags(ctx, op, flags);
	if (!rc)
		rc = check_wr(ctx, c, op, stream, addr, len, mr);
	if (rc)
		return rc;
	if (mrc_ring_room(ctx->sq, ctx->sq_tail, ctx->sq_entries) == 0)
		return MRC_ERR_AGAIN;
	fill_sqe(ctx, op, c, stream, addr, len, mr, raddr, rkey, imm, wr_id, flags);
	if (!(flags & MRC_POST_MORE))
		(void)mrc_submit(ctx);
	return 0;
}

MRC_API int mrc_post_write(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
			   uint32_t len, const mrc_mr *mr, uint64_t remote_addr, uint32_t rkey,
			   uint64_t wr_id, unsigned flags)
{
	return post_one(ctx, conn, MRC_OP_WRITE, stream, addr, len, mr, remote_addr, rkey, 0,
			wr_id, flags);
}

MRC_API int mrc_post_write_imm(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
			       uint32_t len, const mrc_mr *mr, uint64_t remote_addr, uint32_t rkey,
			       uint32_t imm, uint64_t wr_id, unsigned flags)
{
	return post_one(ctx, conn, MRC_OP_WRITE_IMM, stream, addr, len, mr, remote_addr, rkey,
			imm, wr_id, flags);
}

MRC_API int mrc_post_send(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
			  uint32_t len, const mrc_mr *mr, uint64_t wr_id, unsigned flags)
{
	return post_one(ctx, conn, MRC_OP_SEND, stream, addr, len, mr, 0, 0, 0, wr_id, flags);
}

MRC_API int mrc_post_send_imm(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
			      uint32_t len, const mrc_mr *mr, uint32_t imm, uint64_t wr_id,
			      unsigned flags)
{
	return post_one(ctx, conn, MRC_OP_SEND_IMM, stream, addr, len, mr, 0, 0, imm, wr_id,
			flags);
}

MRC_API int mrc_post_recv(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, void *addr,
			  uint32_t len, const mrc_mr *mr, uint64_t wr_id, unsigned flags)
{
	return post_one(ctx, conn, MRC_OP_RECV, stream, addr, len, mr, 0, 0, 0, wr_id, flags);
}

MRC_API int mrc_post_read(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, void *addr,
			  uint32_t len, const mrc_mr *mr, uint64_t remote_addr, uint32_t rkey,
			  uint64_t wr_id, unsigned flags)
{
	return post_one(ctx, conn, MRC_OP_READ, stream, addr, len, mr, remote_addr, rkey, 0,
			wr_id, flags);
}

MRC_API int mrc_post(mrc_ctx *ctx, const mrc_wr *wrs, int n, unsigned flags)
{
	if (!ctx || n < 0 || (n > 0 && !wrs))
		return MRC_ERR_INVAL;
	if (mrc_is_dead(ctx->s))
		return MRC_ERR_DAEMON;
	if ((uint32_t)n > ctx->sq_entries)
		return MRC_ERR_INVAL;
	for (int i = 0; i < n; i++) {
		int rc = check_flags(ctx, wrs[i].opcode, flags);
		if (rc)
			return rc;
		rc = check_wr(ctx, wrs[i].conn, wrs[i].opcode, wrs[i].stream, wrs[i].addr,
				  wrs[i].len, wrs[i].mr);
		if (rc)
			return rc;
	}
	if (mrc_ring_room(ctx->sq, ctx->sq_tail, ctx->sq_entries) < (uint32_t)n)
		return MRC_ERR_AGAIN;
	for (int i = 0; i < n; i++) {
		const mrc_wr *w = &wrs[i];
		fill_sqe(ctx, w->opcode, w->conn, w->stream, w->addr, w->len, w->mr,
			 w->remote_addr, w->rkey, w->imm, w->wr_id, flags);
	}
	if (!(flags & MRC_POST_MORE))
		(void)mrc_submit(ctx);
	return n;
}

/* ---- completions ------------------------------------------------------------------ */

static void disarm(mrc_ctx *ctx)
{
	mrc_ring_awake(ctx->cq);
	ctx->armed = 0;
	uint8_t buf[64];
	ssize_t n;
	/* Non-blocking: empty is fine, the bytes only say "look". */
	do
		n = recv(ctx->wakeup, buf, sizeof(buf), MSG_DONTWAIT);
	while (n == (ssize_t)sizeof(buf) || (n < 0 && errno == EINTR));
}

MRC_API int mrc_poll_cq(mrc_ctx *ctx, mrc_wc *wc, int max)
{
	if (!ctx || max < 0 || (max > 0 && !wc))
		return MRC_ERR_INVAL;
	if (ctx->armed)
		disarm(ctx);
	/* Acquire load of the tail (mrc_ring_ready()): the entries the daemon
	 * wrote before its release store are visible. */
	uint32_t ready = mrc_ring_ready(ctx->cq, ctx->cq_head);
	if (ready > ctx->cq_entries)
		return MRC_ERR_PROTO; /* the daemon's tail ran past our head */
	if (ready == 0)
		return mrc_is_dead(ctx->s) ? MRC_ERR_DAEMON : 0;
	uint32_t n = ready < (uint32_t)max ? ready : (uint32_t)max;
	for (uint32_t i = 0; i < n; i++) {
		const mrc_cqe *e = &ctx->cqes[(ctx->cq_head + i) & ctx->cq_mask];
		wc[i] = (mrc_wc){
			.wr_id = e->wr_id,
			.conn = e->conn,
			.byte_len = e->byte_len,
			.imm = e->imm,
			.stream = e->stream,
			.status = e->status,
			.opcode = e->opcode,
			.flags = e->flags,
		};
	}
	ctx->cq_head += n;
	/* Release store of the head (mrc_ring_consume()): our reads of the
	 * entries happen before the daemon may reuse their slots. */
	mrc_ring_consume(ctx->cq, ctx->cq_head);
	return (int)n;
}

MRC_API int mrc_ctx_arm(mrc_ctx *ctx)
{
	if (!ctx)
		return MRC_ERR_INVAL;
	if (mrc_is_dead(ctx->s))
		return MRC_ERR_DAEMON;
	ctx->armed = 1;
	/* Sets NEED_WAKEUP and fences (pairs with the fence in the daemon's
	 * mrc_ring_publish()): either it sees the flag or we see its tail. */
	uint32_t ready = mrc_ring_prepare_sleep(ctx->cq, ctx->cq_head);
	if (ready > ctx->cq_entries)
		return MRC_ERR_PROTO;
	return (int)ready;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

MRC_API int mrc_wait_cq(mrc_ctx *ctx, mrc_wc *wc, int max, int timeout_ms)
{
	int n = mrc_poll_cq(ctx, wc, max);
	if (n != 0 || max == 0)
		return n;
	mrc_session *s = ctx->s;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : mrc_now_ms() + (uint64_t)timeout_ms;
	if (ctx->busy_usec) {
		uint64_t until = now_ns() + (uint64_t)ctx->busy_usec * 1000u;
		do {
			if (mrc_ring_ready(ctx->cq, ctx->cq_head))
				return mrc_poll_cq(ctx, wc, max);
			if (mrc_is_dead(s))
				return MRC_ERR_DAEMON;
		} while (now_ns() < until);
	}
	for (;;) {
		int ready = mrc_ctx_arm(ctx);
		if (ready != 0) {
			if (ready < 0)
				return ready;
			return mrc_poll_cq(ctx, wc, max);
		}
		int wait = -1;
		if (deadline != UINT64_MAX) {
			uint64_t now = mrc_now_ms();
			wait = now >= deadline ? 0 : (int)(deadline - now < INT32_MAX ? deadline - now
										 : INT32_MAX);
		}
		struct pollfd p[2] = {{.fd = ctx->wakeup, .events = POLLIN},
				      {.fd = s->fd, .events = POLLIN}};
		int r = poll(p, 2, wait);
		if (r < 0 && errno != EINTR)
			return MRC_ERR_IO;
		if (r > 0 && p[1].revents) {
			/* An event or the daemon's departure: read it so the
			 * socket stops polling readable. */
			pthread_mutex_lock(&s->lock);
			(void)mrc_session_drain(s);
			pthread_mutex_unlock(&s->lock);
		}
		n = mrc_poll_cq(ctx, wc, max);
		if (n != 0)
			return n;
		if (r == 0)
			return MRC_ERR_TIMEOUT;
	}
}
