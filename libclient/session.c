/*
 * Sessions: the control socket to metarocd (SOCK_SEQPACKET, one message per
 * datagram, abi.h), its request/reply exchange, the queue of connection
 * events, listeners and connections.
 *
 * Locking: s->lock covers the socket, the event queue and the object lists.
 * Nobody sleeps holding it: a waiter unlocks, poll()s the socket, locks and
 * reads what arrived without blocking. A request holds it from send to
 * reply, so the only reply on the socket is always the holder's.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

uint64_t mrc_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Milliseconds left until deadline (UINT64_MAX: forever) as poll() wants. */
static int ms_left(uint64_t deadline)
{
	if (deadline == UINT64_MAX)
		return -1;
	uint64_t now = mrc_now_ms();
	if (now >= deadline)
		return 0;
	uint64_t d = deadline - now;
	return d > INT32_MAX ? INT32_MAX : (int)d;
}

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : mrc_now_ms() + (uint64_t)timeout_ms;
}

int mrc_is_dead(const mrc_session *s)
{
	return atomic_load_explicit(&s->dead, memory_order_relaxed);
}

static void set_dead(mrc_session *s)
{
	atomic_store_explicit(&s->dead, 1, memory_order_relaxed);
}

/* ---- events ---------------------------------------------------------------- */

static mrc_conn *conn_find(mrc_session *s, uint32_t handle)
{
	for (mrc_conn *c = s->conns; c; c = c->next)
		if (c->handle == handle)
			return c;
	return NULL;
}

static mrc_listener *listener_find(mrc_session *s, uint32_t id)
{
	for (mrc_listener *l = s->listeners; l; l = l->next)
		if (l->id == id)
			return l;
	return NULL;
}

static mrc_ctx *ctx_find(mrc_session *s, uint32_t id)
{
	for (mrc_ctx *c = s->ctxs; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* A daemon status must be one of ours; anything else is a protocol error
 * (so applications only ever see documented codes). */
static int known_err(int32_t st)
{
	return st <= MRC_ERR_INVAL && st >= MRC_ERR_PROTO ? st : MRC_ERR_PROTO;
}

/* Update the connection an event is about. */
static void apply_event(mrc_session *s, mrc_evnode *n)
{
	mrc_conn *c = conn_find(s, n->ev.conn);
	if (!c)
		return; /* closed by the app, or a CONNECT reply still to come */
	switch (n->ev.event) {
	case MRC_EV_ESTABLISHED:
		if (n->ev.nstreams)
			atomic_store(&c->nstreams, n->ev.nstreams);
		atomic_store(&c->state, MRC_CONN_ESTABLISHED);
		break;
	case MRC_EV_FAILED:
		atomic_store(&c->error, known_err(n->ev.status));
		atomic_store(&c->state, MRC_CONN_FAILED);
		break;
	case MRC_EV_CLOSED:
		atomic_store(&c->state, MRC_CONN_CLOSED);
		break;
	case MRC_EV_RESET:
		atomic_store(&c->error, n->ev.status ? known_err(n->ev.status) : MRC_ERR_CLOSED);
		atomic_store(&c->state, MRC_CONN_RESET);
		break;
	default:
		break;
	}
}

static int queue_event(mrc_session *s, const mrc_msg_event *ev)
{
	if (ev->event < MRC_EV_ESTABLISHED || ev->event > MRC_EV_RESET)
		return MRC_ERR_PROTO;
	mrc_evnode *n = calloc(1, sizeof(*n));
	if (!n)
		return MRC_ERR_NOMEM;
	n->ev = *ev;
	n->ev.peer[sizeof(n->ev.peer) - 1] = '\0';
	n->ev.reason[sizeof(n->ev.reason) - 1] = '\0';
	if (ev->event == MRC_EV_INCOMING) {
		mrc_listener *l = listener_find(s, ev->listener_id);
		mrc_conn *c = calloc(1, sizeof(*c));
		if (!c) {
			free(n);
			return MRC_ERR_NOMEM;
		}
		c->s = s;
		c->handle = ev->conn;
		c->ctx = l ? l->ctx : ctx_find(s, ev->ctx_id);
		atomic_init(&c->nstreams, ev->nstreams);
		atomic_init(&c->state, MRC_CONN_ESTABLISHED);
		atomic_init(&c->error, 0);
		c->next = s->conns;
		s->conns = c;
		n->incoming = c;
	} else {
		apply_event(s, n);
	}
	if (s->evtail)
		s->evtail->next = n;
	else
		s->evhead = n;
	s->evtail = n;
	return 0;
}

static void unlink_event(mrc_session *s, mrc_evnode *prev, mrc_evnode *n)
{
	if (prev)
		prev->next = n->next;
	else
		s->evhead = n->next;
	if (s->evtail == n)
		s->evtail = prev;
	free(n);
}

/* ---- the socket ------------------------------------------------------------- */

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Read one datagram; fds received go to fds (up to maxfds, the rest are
 * closed). Returns its length, 0 when nothing is waiting (MSG_DONTWAIT),
 * MRC_ERR_DAEMON at EOF, MRC_ERR_PROTO for a truncated one. */
static ssize_t recv_one(mrc_session *s, void *buf, size_t cap, int *fds, int maxfds, int *nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(8 * sizeof(int))];
	} cbuf;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = cbuf.b, .msg_controllen = sizeof(cbuf.b)};
	*nfds = 0;
	ssize_t r;
	do
		r = recvmsg(s->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		set_dead(s); /* ECONNRESET and friends: the daemon is gone */
		return MRC_ERR_DAEMON;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < maxfds)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	if (r == 0) {
		close_fds(fds, *nfds);
		*nfds = 0;
		set_dead(s);
		return MRC_ERR_DAEMON;
	}
	if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)r < sizeof(mrc_msg_hdr)) {
		close_fds(fds, *nfds);
		*nfds = 0;
		return MRC_ERR_PROTO;
	}
	return r;
}

/* An event datagram: queue it. Anything else unsolicited is ignored (a
 * late reply to a request that timed out cannot happen: that kills the
 * session). */
static int handle_unsolicited(mrc_session *s, const uint8_t *buf, size_t len)
{
	mrc_msg_hdr h;
	memcpy(&h, buf, sizeof(h));
	if (h.type != MRC_MSG_EVENT)
		return MRC_ERR_PROTO;
	if (len != sizeof(h) + sizeof(mrc_msg_event) || h.len != len)
		return MRC_ERR_PROTO;
	mrc_msg_event ev;
	memcpy(&ev, buf + sizeof(h), sizeof(ev));
	return queue_event(s, &ev);
}

/* Read everything waiting without blocking. Returns how many datagrams were
 * read or MRC_ERR_DAEMON. A malformed event is dropped (PROTO is not fatal
 * for the session: the rest of the stream is still in sync). */
int mrc_session_drain(mrc_session *s)
{
	uint8_t buf[MRC_MSG_MAX];
	int got = 0;
	for (;;) {
		if (mrc_is_dead(s))
			return MRC_ERR_DAEMON;
		int fds[4], nfds;
		ssize_t r = recv_one(s, buf, sizeof(buf), fds, 4, &nfds);
		close_fds(fds, nfds); /* events carry none */
		if (r == 0)
			return got;
		if (r == MRC_ERR_DAEMON)
			return r;
		got++;
		if (r > 0)
			(void)handle_unsolicited(s, buf, (size_t)r);
	}
}

/* Wait (unlocked) for the socket to turn readable, then read what came.
 * Returns 0 when the caller should look again at what it waits for (it
 * loops), MRC_ERR_TIMEOUT once the deadline has passed.
 *
 * The wait is cut into slices of WAIT_SLICE_MS: another thread of the
 * session may drain the socket between our unlock and our poll() (a
 * thread in mrc_get_event(), another mrc_conn_wait_established()), taking
 * the very message we wait for into the session's state; our poll() would
 * then sleep on an empty socket until the deadline (CI, tests/client
 * threads: four threads connecting at once, one timed out after 20 s with
 * its connection established). A slice bounds such a lost wakeup. */
#define WAIT_SLICE_MS 50
static int wait_socket(mrc_session *s, uint64_t deadline)
{
	struct pollfd p = {.fd = s->fd, .events = POLLIN};
	pthread_mutex_unlock(&s->lock);
	int r, left = ms_left(deadline);
	int slice = left < 0 || left > WAIT_SLICE_MS ? WAIT_SLICE_MS : left;
	do
		r = poll(&p, 1, slice);
	while (r < 0 && errno == EINTR);
	pthread_mutex_lock(&s->lock);
	if (r < 0)
		return MRC_ERR_IO;
	if (r == 0)
		return ms_left(deadline) == 0 ? MRC_ERR_TIMEOUT : 0; /* (-1: no deadline) */
	int d = mrc_session_drain(s);
	return d < 0 ? d : 0;
}

static int send_msg(mrc_session *s, const void *buf, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cbuf;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&cbuf, 0, sizeof(cbuf));
		m.msg_control = cbuf.b;
		m.msg_controllen = sizeof(cbuf.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t r;
	do /* MSG_NOSIGNAL: a dead daemon is an error code, not SIGPIPE */
		r = sendmsg(s->fd, &m, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno == ENOMEM || errno == ENOBUFS)
			return MRC_ERR_NOMEM;
		set_dead(s);
		return MRC_ERR_DAEMON;
	}
	return (size_t)r == len ? 0 : MRC_ERR_IO;
}

/* Send a request and wait for its reply (s->lock held). The reply's payload
 * must be exactly replen bytes on success; received fds go to fds. Returns
 * 0 or the daemon's status or a local error. */
int mrc_request(mrc_session *s, uint32_t type, const void *req, size_t reqlen, int send_fd,
		void *rep, size_t replen, int *fds, int maxfds, int *nfds)
{
	uint8_t buf[MRC_MSG_MAX];
	if (nfds)
		*nfds = 0;
	if (mrc_is_dead(s))
		return MRC_ERR_DAEMON;
	if (sizeof(mrc_msg_hdr) + reqlen > sizeof(buf))
		return MRC_ERR_INVAL;
	mrc_msg_hdr h = {.type = type, .len = (uint32_t)(sizeof(h) + reqlen), .seq = ++s->seq};
	memcpy(buf, &h, sizeof(h));
	if (reqlen)
		memcpy(buf + sizeof(h), req, reqlen);
	int rc = send_msg(s, buf, h.len, send_fd);
	if (rc)
		return rc;
	uint64_t deadline = mrc_now_ms() + MRC_REPLY_TIMEOUT_MS;
	for (;;) {
		int got[8], ngot;
		ssize_t r = recv_one(s, buf, sizeof(buf), got, 8, &ngot);
		if (r == 0) {
			struct pollfd p = {.fd = s->fd, .events = POLLIN};
			int pr = poll(&p, 1, ms_left(deadline));
			if (pr == 0) {
				/* A daemon that stops answering is as good as gone;
				 * a late reply would desynchronise the session. */
				set_dead(s);
				return MRC_ERR_DAEMON;
			}
			continue;
		}
		if (r < 0)
			return (int)r;
		mrc_msg_hdr rh;
		memcpy(&rh, buf, sizeof(rh));
		if (rh.type == MRC_MSG_EVENT) {
			close_fds(got, ngot);
			(void)handle_unsolicited(s, buf, (size_t)r);
			continue;
		}
		if (rh.type != (type | MRC_MSG_REPLY) || rh.seq != h.seq || rh.len != (size_t)r) {
			close_fds(got, ngot);
			set_dead(s); /* out of sync with the daemon: nothing later can be trusted */
			return MRC_ERR_PROTO;
		}
		if (rh.status != 0) {
			close_fds(got, ngot);
			return known_err(rh.status);
		}
		if ((size_t)r != sizeof(rh) + replen) {
			close_fds(got, ngot);
			return MRC_ERR_PROTO;
		}
		if (replen)
			memcpy(rep, buf + sizeof(rh), replen);
		for (int i = 0; i < ngot; i++) {
			if (fds && nfds && i < maxfds)
				fds[(*nfds)++] = got[i];
			else
				close(got[i]);
		}
		return 0;
	}
}

/* ---- sessions ---------------------------------------------------------------- */

MRC_API int mrc_session_open(const char *socket_path, const char *app_name, mrc_session **pout)
{
	if (!pout)
		return MRC_ERR_INVAL;
	*pout = NULL;
	const char *path = socket_path;
	if (!path)
		path = getenv("METAROCE_APP_SOCKET");
	if (!path || !*path)
		path = MRC_DEFAULT_SOCKET;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return MRC_ERR_INVAL;
	memcpy(sa.sun_path, path, strlen(path) + 1);

	mrc_session *s = calloc(1, sizeof(*s));
	if (!s)
		return MRC_ERR_NOMEM;
	atomic_init(&s->dead, 0);
	pthread_mutex_init(&s->lock, NULL);
	s->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		free(s);
		return MRC_ERR_IO;
	}
	if (connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		mrc_session_close(s);
		return e == EACCES || e == EPERM ? MRC_ERR_PERM : MRC_ERR_DAEMON;
	}
	mrc_hello_req req = {.abi_version = MRC_ABI_VERSION};
	snprintf(req.name, sizeof(req.name), "%s", app_name ? app_name : "app");
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_HELLO, &req, sizeof(req), -1, &s->hello,
			     sizeof(s->hello), NULL, 0, NULL);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0 && s->hello.abi_version != MRC_ABI_VERSION)
		rc = MRC_ERR_VERSION;
	if (rc) {
		mrc_session_close(s);
		return rc;
	}
	*pout = s;
	return 0;
}

MRC_API void mrc_session_close(mrc_session *s)
{
	if (!s)
		return;
	/* Closing the socket is the daemon's signal to reset and free
	 * everything of the session; here only local state remains. */
	if (s->fd >= 0)
		close(s->fd);
	while (s->evhead)
		unlink_event(s, NULL, s->evhead);
	while (s->conns) {
		mrc_conn *c = s->conns;
		s->conns = c->next;
		free(c);
	}
	while (s->listeners) {
		mrc_listener *l = s->listeners;
		s->listeners = l->next;
		free(l);
	}
	while (s->mrs) {
		mrc_mr *m = s->mrs;
		s->mrs = m->next;
		mrc_block_unref(m->blk);
		free(m);
	}
	while (s->ctxs) {
		mrc_ctx *c = s->ctxs;
		s->ctxs = c->next;
		mrc_ctx_free_local(c);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

MRC_API int mrc_session_fd(const mrc_session *s)
{
	return s ? s->fd : MRC_ERR_INVAL;
}

MRC_API uint32_t mrc_session_max_msg(const mrc_session *s)
{
	return s ? s->hello.max_msg : 0;
}

MRC_API uint32_t mrc_session_features(const mrc_session *s)
{
	/* the hello's bits are the ABI's (abi.h, MRC_FEAT_*) */
	return s ? s->hello.features & MRC_FEATURE_UNSIGNALED : 0;
}

/* ---- events ------------------------------------------------------------------- */

MRC_API int mrc_get_event(mrc_session *s, mrc_event *ev, int timeout_ms)
{
	if (!s || !ev)
		return MRC_ERR_INVAL;
	uint64_t deadline = deadline_of(timeout_ms);
	pthread_mutex_lock(&s->lock);
	int rc;
	for (;;) {
		if (!s->evhead)
			(void)mrc_session_drain(s);
		while (s->evhead) {
			mrc_evnode *n = s->evhead;
			mrc_conn *c = n->incoming ? n->incoming : conn_find(s, n->ev.conn);
			if (!c) {
				unlink_event(s, NULL, n); /* its connection was closed */
				continue;
			}
			memset(ev, 0, sizeof(*ev));
			ev->type = (int)n->ev.event;
			ev->status = n->ev.status ? known_err(n->ev.status) : 0;
			ev->conn = c;
			ev->listener = n->ev.event == MRC_EV_INCOMING ? listener_find(s, n->ev.listener_id)
								      : NULL;
			ev->nstreams = n->ev.nstreams;
			memcpy(ev->peer, n->ev.peer, sizeof(ev->peer));
			memcpy(ev->reason, n->ev.reason, sizeof(ev->reason));
			unlink_event(s, NULL, n);
			rc = 0;
			goto out;
		}
		if (mrc_is_dead(s)) {
			rc = MRC_ERR_DAEMON;
			goto out;
		}
		rc = wait_socket(s, deadline);
		if (rc == MRC_ERR_TIMEOUT || rc == MRC_ERR_DAEMON || rc == MRC_ERR_IO)
			goto out;
	}
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- listeners ------------------------------------------------------------------ */

MRC_API int mrc_listen(mrc_session *s, uint32_t service_id, mrc_ctx *ctx, uint16_t nstreams,
		       mrc_listener **pout)
{
	if (!s || !ctx || ctx->s != s || !pout)
		return MRC_ERR_INVAL;
	*pout = NULL;
	mrc_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return MRC_ERR_NOMEM;
	mrc_listen_req req = {.service_id = service_id, .ctx_id = ctx->id, .nstreams = nstreams};
	mrc_listen_rep rep;
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_LISTEN, &req, sizeof(req), -1, &rep, sizeof(rep), NULL, 0,
			     NULL);
	if (rc == 0) {
		l->s = s;
		l->id = rep.listener_id;
		l->service = service_id;
		l->ctx = ctx;
		l->next = s->listeners;
		s->listeners = l;
		*pout = l;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc)
		free(l);
	return rc;
}

MRC_API int mrc_unlisten(mrc_listener *l)
{
	if (!l)
		return 0;
	mrc_session *s = l->s;
	mrc_unlisten_req req = {.listener_id = l->id};
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_UNLISTEN, &req, sizeof(req), -1, NULL, 0, NULL, 0, NULL);
	for (mrc_listener **pp = &s->listeners; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	free(l);
	return rc;
}

MRC_API int mrc_accept(mrc_listener *l, int timeout_ms, mrc_conn **pout)
{
	if (!l || !pout)
		return MRC_ERR_INVAL;
	*pout = NULL;
	mrc_session *s = l->s;
	uint64_t deadline = deadline_of(timeout_ms);
	pthread_mutex_lock(&s->lock);
	int rc;
	for (;;) {
		(void)mrc_session_drain(s);
		mrc_evnode *prev = NULL;
		for (mrc_evnode *n = s->evhead; n; prev = n, n = n->next) {
			if (n->ev.event == MRC_EV_INCOMING && n->ev.listener_id == l->id) {
				*pout = n->incoming;
				unlink_event(s, prev, n);
				rc = 0;
				goto out;
			}
		}
		if (mrc_is_dead(s)) {
			rc = MRC_ERR_DAEMON;
			goto out;
		}
		rc = wait_socket(s, deadline);
		if (rc == MRC_ERR_TIMEOUT || rc == MRC_ERR_DAEMON || rc == MRC_ERR_IO)
			goto out;
	}
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- connections ------------------------------------------------------------------ */

MRC_API int mrc_connect(mrc_session *s, mrc_ctx *ctx, const char *host, uint16_t port,
			uint32_t service_id, const mrc_conn_attr *attr, mrc_conn **pout)
{
	if (!s || !ctx || ctx->s != s || !host || !pout)
		return MRC_ERR_INVAL;
	*pout = NULL;
	size_t hl = strlen(host);
	if (hl == 0 || hl > MRC_HOST_MAX)
		return MRC_ERR_INVAL;
	mrc_connect_req req = {.ctx_id = ctx->id, .service_id = service_id, .port = port};
	if (attr) {
		req.nstreams = attr->nstreams;
		req.initial_paths = attr->initial_paths;
		req.planes_mask = attr->planes_mask;
	}
	memcpy(req.host, host, hl + 1);
	mrc_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return MRC_ERR_NOMEM;
	mrc_connect_rep rep;
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_CONNECT, &req, sizeof(req), -1, &rep, sizeof(rep), NULL, 0,
			     NULL);
	if (rc == 0) {
		c->s = s;
		c->ctx = ctx;
		c->handle = rep.conn;
		atomic_init(&c->nstreams, attr ? attr->nstreams : 0);
		atomic_init(&c->state, MRC_CONN_CONNECTING);
		atomic_init(&c->error, 0);
		c->next = s->conns;
		s->conns = c;
		/* Its ESTABLISHED/FAILED may have overtaken the reply. */
		for (mrc_evnode *n = s->evhead; n; n = n->next)
			if (n->ev.conn == c->handle && n->ev.event != MRC_EV_INCOMING)
				apply_event(s, n);
		*pout = c;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc)
		free(c);
	return rc;
}

static int conn_result(const mrc_conn *c)
{
	switch (atomic_load(&c->state)) {
	case MRC_CONN_ESTABLISHED:
		return 0;
	case MRC_CONN_FAILED:
	case MRC_CONN_RESET: {
		int e = atomic_load(&c->error);
		return e ? e : MRC_ERR_CLOSED;
	}
	default:
		return MRC_ERR_CLOSED;
	}
}

MRC_API int mrc_conn_wait_established(mrc_conn *c, int timeout_ms)
{
	if (!c)
		return MRC_ERR_INVAL;
	mrc_session *s = c->s;
	uint64_t deadline = deadline_of(timeout_ms);
	pthread_mutex_lock(&s->lock);
	int rc;
	for (;;) {
		(void)mrc_session_drain(s);
		if (atomic_load(&c->state) != MRC_CONN_CONNECTING) {
			mrc_evnode *prev = NULL;
			for (mrc_evnode *n = s->evhead; n; prev = n, n = n->next) {
				if (n->ev.conn == c->handle && (n->ev.event == MRC_EV_ESTABLISHED ||
								n->ev.event == MRC_EV_FAILED)) {
					unlink_event(s, prev, n);
					break;
				}
			}
			rc = conn_result(c);
			goto out;
		}
		if (mrc_is_dead(s)) {
			rc = MRC_ERR_DAEMON;
			goto out;
		}
		rc = wait_socket(s, deadline);
		if (rc == MRC_ERR_TIMEOUT || rc == MRC_ERR_DAEMON || rc == MRC_ERR_IO)
			goto out;
	}
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

MRC_API int mrc_close(mrc_conn *c, int abort)
{
	if (!c)
		return 0;
	mrc_session *s = c->s;
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	int st = atomic_load(&c->state);
	if (st == MRC_CONN_CONNECTING || st == MRC_CONN_ESTABLISHED) {
		mrc_close_req req = {.conn = c->handle, .abort = abort ? 1u : 0u};
		rc = mrc_request(s, MRC_MSG_CLOSE, &req, sizeof(req), -1, NULL, 0, NULL, 0, NULL);
		if (rc == MRC_ERR_NOENT || rc == MRC_ERR_CLOSED)
			rc = 0; /* it went away on its own meanwhile */
	}
	for (mrc_conn **pp = &s->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	/* Its queued events would name a freed handle. */
	mrc_evnode *prev = NULL;
	for (mrc_evnode *n = s->evhead; n;) {
		mrc_evnode *next = n->next;
		if (n->incoming == c || (!n->incoming && n->ev.conn == c->handle))
			unlink_event(s, prev, n);
		else
			prev = n;
		n = next;
	}
	pthread_mutex_unlock(&s->lock);
	free(c);
	return rc;
}

MRC_API uint32_t mrc_conn_handle(const mrc_conn *c)
{
	return c ? c->handle : 0;
}

MRC_API uint16_t mrc_conn_nstreams(const mrc_conn *c)
{
	return c ? atomic_load(&((mrc_conn *)c)->nstreams) : 0;
}

MRC_API int mrc_conn_status(const mrc_conn *c)
{
	return c ? atomic_load(&((mrc_conn *)c)->state) : MRC_ERR_INVAL;
}

MRC_API int mrc_conn_error(const mrc_conn *c)
{
	return c ? atomic_load(&((mrc_conn *)c)->error) : MRC_ERR_INVAL;
}

/* ---- device information (MRC_MSG_DEVINFO) ---- */

int mrc_session_devinfo(mrc_session *s, mrc_devinfo_rep *out)
{
	if (!s || !out)
		return MRC_ERR_INVAL;
	mrc_devinfo_req req = {0};
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_DEVINFO, &req, sizeof(req), -1, out, sizeof(*out), NULL,
			     0, NULL);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0 && out->nplanes > MRC_DEVINFO_PLANES)
		return MRC_ERR_PROTO;
	return rc;
}
