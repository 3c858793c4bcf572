/* Application sessions: connections (app_int.h). */
#define _GNU_SOURCE /* memfd_create, struct ucred, MSG_CMSG_CLOEXEC */
#include "app_int.h"

/* ---- connections ------------------------------------------------------------------ */

app_ctx *app_ctx_find(app_session *s, uint32_t id)
{
	for (app_ctx *x = s->ctxs; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

int app_ended_handle(const app_session *s, uint32_t handle)
{
	uint32_t n = s->nended < ENDED_KEEP ? s->nended : ENDED_KEEP;
	for (uint32_t i = 0; i < n; i++)
		if (s->ended[i] == handle)
			return 1;
	return 0;
}

app_conn *app_conn_of(app_session *s, uint32_t handle)
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
		app_cq_put(x, w->wr_id, ac->handle, MRC_WC_FLUSHED,
		       w->opcode == MRC_OP_RECV ? MRC_WC_OP_RECV : w->opcode, w->stream, 0, 0, 0);
		app_wr_release(x, i);
	}
}

void app_conn_unlink(app_conn *ac)
{
	*ac->pprev = ac->next;
	if (ac->next)
		ac->next->pprev = ac->pprev;
	ac->s->nconns--;
	ac->ctx->users--;
}

void app_conn_link(app_session *s, app_conn *ac)
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

app_listener *app_listener_by_service(mrd_apps *a, uint32_t service_id)
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
		app_listener *l = app_listener_by_service(a, c->service_id);
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
		app_conn_link(l->s, ac);
		c->ud = ac;
		ev.event = MRC_EV_INCOMING;
		ev.listener_id = l->id;
	}
	ev.conn = ac->handle;
	ev.ctx_id = ac->ctx->id;
	ev.nstreams = ac->nstreams;
	fill_peer(c, &ev);
	snprintf(ev.reason, sizeof(ev.reason), "established");
	app_send_event(ac->s, &ev);
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
	/* An unsignaled request that succeeded gets no completion: the next
	 * completion of its stream implies it (abi.h, MRC_SQE_UNSIGNALED).
	 * Failed and flushed ones are reported like any other. Its credit
	 * (app_ctx_consume()) is given back with the slot. */
	if (w->unsignaled && e->status == MRP_WC_SUCCESS) {
		x->s->a->cnt.cqes_unsignaled++;
		app_wr_release(x, slot);
		return;
	}
	/* The engine's opcodes and statuses are the ABI's (app_int.h), READ's
	 * translated. */
	app_cq_put(x, w->wr_id, ac->handle, e->status,
		   e->opcode == MRP_WR_READ ? MRC_WC_OP_READ : e->opcode, e->stream, e->byte_len,
		   e->imm, e->has_imm);
	app_wr_release(x, slot);
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
	app_conn_unlink(ac);
	free(ac);
	app_send_event(s, &ev);
}

/* A peer WRITEs into a region of the session that owns the connection. */
static uint8_t *op_resolve(mrd_conn *c, uint32_t rkey, uint64_t addr, uint64_t len,
			   unsigned access, int *pnak)
{
	app_conn *ac = c->ud;
	app_region *r = ac ? app_rkey_find(c->d->apps, rkey) : NULL;
	if (!r || r->s != ac->s) {
		*pnak = MRP_NAK_INVALID_RKEY;
		return NULL;
	}
	if ((r->access & access) != access) {
		*pnak = MRP_NAK_ACCESS;
		return NULL;
	}
	if (!app_in_region(r, addr, len)) {
		*pnak = MRP_NAK_OUT_OF_BOUNDS;
		return NULL;
	}
	return r->map + (addr - r->app_addr);
}

static uint16_t op_max_streams(mrd *d, uint32_t service_id)
{
	app_listener *l = app_listener_by_service(d->apps, service_id);
	return l ? l->nstreams : 0;
}

const mrd_conn_ops app_ops = {
	.established = op_established,
	.completion = op_completion,
	.ended = op_ended,
	.resolve = op_resolve,
	.max_streams = op_max_streams,
};

const mrd_conn_ops *mrd_apps_service(mrd *d, uint32_t service_id)
{
	return app_listener_by_service(d->apps, service_id) ? &app_ops : NULL;
}
