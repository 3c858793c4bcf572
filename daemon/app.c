/* Application sessions (app.h): the session socket, requests, listeners,
 * status; the other parts are app_mr.c, app_ring.c and app_conn.c. */
#define _GNU_SOURCE /* memfd_create, struct ucred, MSG_CMSG_CLOEXEC */
#include "app_int.h"

const char *const app_bad_names[] = {
#define BAD_NAME(name, msg) #name,
	MRD_APP_BAD_MAP(BAD_NAME)
#undef BAD_NAME
};

const char *const app_wr_bad_names[] = {
#define WR_BAD_NAME(name, msg) #name,
	MRD_APP_WR_BAD_MAP(WR_BAD_NAME)
#undef WR_BAD_NAME
};

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
		app_close_fds(fds, nfds);
		return;
	}
	if (!s->outq) {
		int r = send_now(s, buf, len, fds, nfds);
		if (r != 0) {
			app_close_fds(fds, nfds);
			if (r < 0)
				app_session_close(s, send_failure(r));
			return;
		}
	}
	if (s->noutq >= OUTQ_MAX) {
		app_close_fds(fds, nfds);
		app_session_close(s, "does not read its socket");
		return;
	}
	app_out *o = malloc(sizeof(*o));
	if (!o) {
		app_close_fds(fds, nfds);
		app_session_close(s, "out of memory");
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
		app_close_fds(o->fds, o->nfds);
		free(o);
		if (r < 0) {
			app_session_close(s, send_failure(r));
			return;
		}
	}
	session_poll(s);
}

void app_reply(app_session *s, const mrc_msg_hdr *req, int status, const void *payload,
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
		app_close_fds(fds, nfds);
}

void app_send_event(app_session *s, const mrc_msg_event *ev)
{
	uint8_t buf[sizeof(mrc_msg_hdr) + sizeof(*ev)];
	mrc_msg_hdr h = {.type = MRC_MSG_EVENT, .len = sizeof(buf)};
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), ev, sizeof(*ev));
	session_send(s, buf, sizeof(buf), NULL, 0);
}

/* ---- requests ---------------------------------------------------------------------- */

/* A request refused for a reason an honest application can meet (a limit,
 * a busy object): counted, but not against the session. */
void app_refuse(app_session *s, const mrc_msg_hdr *h, int why, int status)
{
	s->a->cnt.requests_bad++;
	s->a->cnt.bad[why]++;
	app_reply(s, h, status, NULL, 0, NULL, 0);
}

/* A request that is wrong: counted, and BAD_MAX of them end the session. */
void app_bad_req(app_session *s, const mrc_msg_hdr *h, int why, int status)
{
	s->bad++;
	app_refuse(s, h, why, status);
}

static void req_hello(app_session *s, const mrc_msg_hdr *h, const mrc_hello_req *q)
{
	mrd_apps *a = s->a;
	mrd *d = a->d;
	if (q->abi_version != MRC_ABI_VERSION) {
		mrd_info("app session from pid %d uid %u: ABI version %u, ours is %u: refused",
			 (int)s->pid, (unsigned)s->uid, q->abi_version, MRC_ABI_VERSION);
		app_bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_VERSION);
		app_session_close(s, NULL);
		return;
	}
	if (q->flags) {
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		app_session_close(s, NULL);
		return;
	}
	if (a->nsessions >= d->cfg.app_max_sessions) {
		mrd_warn("app session from pid %d uid %u: service.apps.max_sessions (%u) "
			 "reached: refused", (int)s->pid, (unsigned)s->uid,
			 d->cfg.app_max_sessions);
		app_bad_req(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		app_session_close(s, NULL);
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
		app_bad_req(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		app_session_close(s, NULL);
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
		app_reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
		app_session_close(s, NULL);
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
		.features = MRC_FEAT_UNSIGNALED,
	};
	mrd_info("app session %u: pid %d uid %u '%s' attached", s->id, (int)s->pid,
		 (unsigned)s->uid, s->name);
	app_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

static void req_ctx_destroy(app_session *s, const mrc_msg_hdr *h, const mrc_ctx_req *q)
{
	if (q->reserved) {
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_ctx *x = app_ctx_find(s, q->ctx_id);
	if (!x) {
		app_bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	if (x->users || x->nout) {
		app_refuse(s, h, MRD_APP_BAD_STATE, MRC_ERR_BUSY);
		return;
	}
	app_publish_all(s->a);
	app_ctx_free(x);
	app_reply(s, h, 0, NULL, 0, NULL, 0);
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
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
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
		app_bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (s->nregions >= s->max_regions || q->len > s->max_region_bytes - s->region_bytes) {
		app_refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		return;
	}
	uint32_t slot = 0;
	while (slot < s->max_regions && s->regions[slot])
		slot++;
	app_region *r = calloc(1, sizeof(*r));
	if (!r) {
		app_reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
		return;
	}
	void *m = mmap(NULL, (size_t)q->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       (off_t)q->fd_offset);
	if (m == MAP_FAILED) {
		mrd_info("app session %u: MR_REG refused: mmap: %s", s->id, strerror(errno));
		free(r);
		app_bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (!a->rkeys) {
		a->nrkeys_buckets = 4096;
		a->rkeys = calloc(a->nrkeys_buckets, sizeof(*a->rkeys));
		if (!a->rkeys) {
			munmap(m, (size_t)q->len);
			free(r);
			app_reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
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
	r->rkey = app_rkey_new(a);
	uint32_t b = app_rkey_hash(a, r->rkey);
	r->rnext = a->rkeys[b];
	a->rkeys[b] = r;
	a->nregions++;
	s->regions[slot] = r;
	s->nregions++;
	s->region_bytes += r->len;
	mrc_mr_reg_rep rep = {.lkey = r->lkey, .rkey = r->rkey};
	app_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

static void req_mr_dereg(app_session *s, const mrc_msg_hdr *h, const mrc_mr_dereg_req *q)
{
	if (q->reserved) {
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_region *r = app_lkey_find(s, q->lkey);
	if (!r) {
		app_bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	app_region_remove(s, r);
	app_reply(s, h, 0, NULL, 0, NULL, 0);
}

static void req_listen(app_session *s, const mrc_msg_hdr *h, const mrc_listen_req *q)
{
	mrd_apps *a = s->a;
	if (!app_zero(q->reserved, sizeof(q->reserved))) {
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_ctx *x = app_ctx_find(s, q->ctx_id);
	if (!x) {
		app_bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	if (q->service_id == MRD_SVC_PERF || q->service_id == MRD_SVC_ECHO ||
	    app_listener_by_service(a, q->service_id)) {
		app_refuse(s, h, MRD_APP_BAD_STATE, MRC_ERR_BUSY);
		return;
	}
	if (s->nlisteners >= s->max_listeners) {
		app_refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		return;
	}
	app_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		app_reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
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
	app_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
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
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	for (app_listener **pp = &s->listeners; *pp; pp = &(*pp)->next)
		if ((*pp)->id == q->listener_id) {
			listener_free(s, pp);
			app_reply(s, h, 0, NULL, 0, NULL, 0);
			return;
		}
	app_bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
}

static void req_connect(app_session *s, const mrc_msg_hdr *h, const mrc_connect_req *q)
{
	mrd_apps *a = s->a;
	mrd *d = a->d;
	if (q->reserved || q->reserved2) {
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_ctx *x = app_ctx_find(s, q->ctx_id);
	if (!x) {
		app_bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
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
		app_bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	if (s->nconns >= s->max_conns) {
		app_refuse(s, h, MRD_APP_BAD_LIMIT, MRC_ERR_LIMIT);
		return;
	}
	app_conn *ac = calloc(1, sizeof(*ac));
	if (!ac) {
		app_reply(s, h, MRC_ERR_NOMEM, NULL, 0, NULL, 0);
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
		app_reply(s, h, MRC_ERR_UNREACHABLE, NULL, 0, NULL, 0);
		return;
	}
	ac->c = c;
	ac->handle = c->local_id;
	app_conn_link(s, ac);
	mrc_connect_rep rep = {.conn = ac->handle};
	app_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
}

static void req_close(app_session *s, const mrc_msg_hdr *h, const mrc_close_req *q)
{
	if (q->abort > 1) {
		app_bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	app_conn *ac = app_conn_of(s, q->conn);
	if (!ac) {
		/* Not held against the session: the connection may have ended
		 * while the application decided to close it. */
		app_refuse(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	ac->closing = 1;
	/* The reply first: an attempt still connecting ends at once, and its
	 * event follows the reply. */
	app_reply(s, h, 0, NULL, 0, NULL, 0);
	mrd_conn_close(ac->c, (int)q->abort);
}

/* ---- device information (MRC_MSG_DEVINFO) ------------------------------------ */

/* The planes (address, MTU, link speed, up) and the service port, for a
 * verbs-style device model in the library. */
static void req_devinfo(app_session *s, const mrc_msg_hdr *h, const mrc_devinfo_req *q)
{
	if (q->flags || q->reserved) {
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
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
	app_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
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
		app_close_fds(fds, nfds);
		app_session_close(s, "message shorter than a header");
		return;
	}
	memcpy(&h, buf, sizeof(h));
	if (s->state == S_REFUSED) {
		app_close_fds(fds, nfds);
		app_reply(s, &h, s->refuse_status, NULL, 0, NULL, 0);
		app_session_close(s, NULL);
		return;
	}
	if (h.len != n || (h.type & MRC_MSG_REPLY) || h.status || h.reserved) {
		app_close_fds(fds, nfds);
		app_bad_req(s, &h, MRD_APP_BAD_HEADER, MRC_ERR_INVAL);
		app_session_close(s, "bad message header");
		return;
	}
	size_t want = payload_size(h.type);
	if (s->state == S_HELLO && h.type != MRC_MSG_HELLO) {
		app_close_fds(fds, nfds);
		app_bad_req(s, &h, MRD_APP_BAD_STATE, MRC_ERR_VERSION);
		app_session_close(s, NULL);
		return;
	}
	if (want == SIZE_MAX) {
		app_close_fds(fds, nfds);
		app_bad_req(s, &h, MRD_APP_BAD_HEADER, MRC_ERR_INVAL);
		return;
	}
	if (n - sizeof(h) != want) {
		app_close_fds(fds, nfds);
		app_bad_req(s, &h, MRD_APP_BAD_LENGTH, MRC_ERR_INVAL);
		if (h.type == MRC_MSG_HELLO && s->state == S_HELLO)
			app_session_close(s, NULL);
		return;
	}
	int want_fds = h.type == MRC_MSG_MR_REG;
	if (nfds != want_fds) {
		app_close_fds(fds, nfds);
		app_bad_req(s, &h, MRD_APP_BAD_FDS, MRC_ERR_INVAL);
		if (h.type == MRC_MSG_HELLO && s->state == S_HELLO)
			app_session_close(s, NULL);
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
		app_bad_req(s, &h, MRD_APP_BAD_STATE, MRC_ERR_INVAL);
		return;
	}
	switch (h.type) {
	case MRC_MSG_HELLO: req_hello(s, &h, &p.hello); break;
	case MRC_MSG_CTX_CREATE: app_req_ctx_create(s, &h, &p.cc); break;
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
	case MRC_MSG_MR_BOUNDS: app_req_mr_bounds(s, &h, &p.bounds); break;
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
				app_session_close(s, strerror(errno));
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
			app_close_fds(fds, nfds);
			app_session_close(s, NULL);
			return;
		}
		if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n > MRC_MSG_MAX) {
			app_close_fds(fds, nfds);
			s->a->cnt.requests_bad++;
			s->a->cnt.bad[MRD_APP_BAD_HEADER]++;
			app_session_close(s, "message too large or too many fds");
			return;
		}
		handle_msg(s, buf, (size_t)n, fds, nfds);
		if (s->state != S_CLOSED && s->bad >= BAD_MAX) {
			app_session_close(s, "too many bad requests");
			return;
		}
	}
}

static void on_session(uv_poll_t *p, int status, int events)
{
	app_session *s = p->data;
	mrd_apps *a = s->a;
	if (status < 0) {
		app_session_close(s, uv_strerror(status));
		return;
	}
	if (events & UV_WRITABLE)
		session_flush(s);
	if ((events & (UV_READABLE | UV_DISCONNECT)) && s->state != S_CLOSED)
		session_read(s);
	mrd_peer_run(a->d);
	app_publish_all(a);
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
void app_session_close(app_session *s, const char *why)
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
		app_conn_unlink(ac);
		free(ac);
		mrd_conn_detach(c);
		mrd_conn_close_reason(c, 1, c->d->stopping ? MRP_CLOSE_SHUTDOWN : MRP_CLOSE_APP_EXIT);
	}
	while (s->listeners)
		listener_free(s, &s->listeners);
	while (s->ctxs) {
		/* Outstanding requests were the connections': nothing completes. */
		app_ctx *x = s->ctxs;
		for (uint32_t i = 0; i < x->cq_entries; i++)
			if (x->wrs[i].used) {
				app_region_unref(x->wrs[i].r);
				x->wrs[i].used = 0;
			}
		x->nout = x->nsend = 0;
		app_ctx_free(x);
	}
	for (uint32_t i = 0; s->regions && i < s->max_regions; i++)
		if (s->regions[i])
			app_region_remove(s, s->regions[i]);
	while (s->zombies) { /* references were the contexts' requests: none left */
		app_region *r = s->zombies;
		s->zombies = r->znext;
		app_region_free(r);
	}
	free(s->regions);
	s->regions = NULL;
	while (s->outq) {
		app_out *o = s->outq;
		s->outq = o->next;
		app_close_fds(o->fds, o->nfds);
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
			app_session_close(s, "no HELLO within 5 s");
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
	uv_timer_init(d->loop, &a->awake_timer);
	uv_timer_init(d->loop, &a->hello_timer);
	a->prepare.data = a->check.data = a->idle.data = a->credit_timer.data = a;
	a->awake_timer.data = a;
	a->hello_timer.data = a;
	a->handles_open = 1;
	uv_prepare_start(&a->prepare, app_on_prepare);
	uv_check_start(&a->check, app_on_check);
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
		app_session_close(a->sessions, "daemon stopping");
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
		uv_close((uv_handle_t *)&a->awake_timer, NULL);
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
	json_object_set_new(o, "cqes_unsignaled", json_integer((json_int_t)k->cqes_unsignaled));
	json_object_set_new(o, "doorbells", json_integer((json_int_t)k->doorbells));
	json_t *bad = json_object();
	for (int i = 0; i < MRD_APP_NBAD; i++)
		if (k->bad[i])
			json_object_set_new(bad, app_bad_names[i], json_integer((json_int_t)k->bad[i]));
	json_object_set_new(o, "bad", bad);
	json_t *wb = json_object();
	for (int i = 0; i < MRD_APP_WR_NBAD; i++)
		if (k->wr_bad[i])
			json_object_set_new(wb, app_wr_bad_names[i],
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
