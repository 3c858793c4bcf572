#include "net.h"

#include "error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t cf_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t cf_rand64(void)
{
	uint64_t v = 0;
	while (v == 0)
		if (getrandom(&v, sizeof(v), 0) != sizeof(v))
			v = cf_now_ns() * 0x9e3779b97f4a7c15ull;
	return v;
}

uint32_t cf_rand32(void)
{
	uint32_t v = 0;
	while (v == 0)
		v = (uint32_t)cf_rand64();
	return v;
}

socklen_t cf_sa_len(const cf_sa *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
}

uint16_t cf_sa_port(const cf_sa *a)
{
	return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in.sin_port);
}

void cf_sa_set_port(cf_sa *a, uint16_t port)
{
	if (a->sa.sa_family == AF_INET6)
		a->in6.sin6_port = htons(port);
	else
		a->in.sin_port = htons(port);
}

const char *cf_sa_str(const cf_sa *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, cf_sa_port(a));
	} else {
		inet_ntop(AF_INET, &a->in.sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, cf_sa_port(a));
	}
	return buf;
}

/* IPV4[:PORT], [IPV6][:PORT] or a bare IPV6 (more than one colon). */
int cf_parse_addr(const char *s, uint16_t defport, cf_sa *sa)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port = NULL;
	size_t hl;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || (rb[1] && rb[1] != ':'))
			return -1;
		hl = (size_t)(rb - s - 1);
		s++;
		port = rb[1] == ':' ? rb + 2 : NULL;
	} else {
		const char *colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* a bare IPv6 address */
		hl = colon ? (size_t)(colon - s) : strlen(s);
		port = colon ? colon + 1 : NULL;
	}
	if (hl == 0 || hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = 0;
	memset(sa, 0, sizeof(*sa));
	if (inet_pton(AF_INET, host, &sa->in.sin_addr) == 1) {
		sa->in.sin_family = AF_INET;
	} else if (inet_pton(AF_INET6, host, &sa->in6.sin6_addr) == 1) {
		sa->in6.sin6_family = AF_INET6;
	} else {
		return -1;
	}
	cf_sa_set_port(sa, defport);
	if (port) {
		char *end;
		long p = strtol(port, &end, 10);
		if (*end || end == port || p < 0 || p > 65535)
			return -1;
		cf_sa_set_port(sa, (uint16_t)p);
	}
	return 0;
}

static int tos_opts(int fd, int family, int recv)
{
	int one = 1;
	if (family == AF_INET6)
		return setsockopt(fd, IPPROTO_IPV6, recv ? IPV6_RECVTCLASS : IPV6_TCLASS, &one,
				  sizeof(one));
	return setsockopt(fd, IPPROTO_IP, recv ? IP_RECVTOS : IP_TOS, &one, sizeof(one));
}

int cf_net_open(cf_net *n, const char *target, const char *bind_addr, char *err,
		size_t errlen)
{
	memset(n, 0, sizeof(*n));
	n->fd = -1;
	n->timeout_ms = 500;
	n->inst = cf_rand64();
	if (cf_parse_addr(target, MRP_DEFAULT_PORT, &n->target) < 0 || cf_sa_port(&n->target) == 0) {
		snprintf(err, errlen, "target %s: expected IPV4[:PORT] or [IPV6][:PORT]", target);
		return -1;
	}
	int fam = n->target.sa.sa_family;
	if (bind_addr) {
		if (cf_parse_addr(bind_addr, 0, &n->local) < 0) {
			snprintf(err, errlen, "--bind %s: expected IPV4[:PORT] or [IPV6][:PORT]",
				 bind_addr);
			return -1;
		}
		if (n->local.sa.sa_family != fam) {
			snprintf(err, errlen, "--bind %s: not of the target's address family",
				 bind_addr);
			return -1;
		}
	} else {
		/* The local address the kernel would use towards the target. */
		int s = socket(fam, SOCK_DGRAM, 0);
		socklen_t sl = sizeof(n->local);
		if (s < 0 || connect(s, &n->target.sa, cf_sa_len(&n->target)) < 0 ||
		    getsockname(s, &n->local.sa, &sl) < 0) {
			snprintf(err, errlen, "no route to %s: %s", target, strerror(errno));
			if (s >= 0)
				close(s);
			return -1;
		}
		close(s);
		cf_sa_set_port(&n->local, 0);
	}
	n->fd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t sl = sizeof(n->local);
	if (n->fd < 0 || tos_opts(n->fd, fam, 1) < 0 ||
	    bind(n->fd, &n->local.sa, cf_sa_len(&n->local)) < 0 ||
	    getsockname(n->fd, &n->local.sa, &sl) < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int cf_socket_local(cf_net *n, cf_sa *la)
{
	*la = n->local;
	cf_sa_set_port(la, 0);
	socklen_t sl = sizeof(*la);
	int fd = socket(la->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, &la->sa, cf_sa_len(la)) < 0 || getsockname(fd, &la->sa, &sl) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void cf_net_close(cf_net *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}

int cf_send_raw(cf_net *n, int fd, const cf_sa *dst, const void *buf,
		size_t len, int tos)
{
	if (fd < 0)
		fd = n->fd;
	if (!dst)
		dst = &n->target;
	int v = tos < 0 ? 0 : tos;
	int v6 = dst->sa.sa_family == AF_INET6;
	int lvl = v6 ? IPPROTO_IPV6 : IPPROTO_IP, opt = v6 ? IPV6_TCLASS : IP_TOS;
	setsockopt(fd, lvl, opt, &v, sizeof(v));
	ssize_t rv = sendto(fd, buf, len, 0, &dst->sa, cf_sa_len(dst));
	if (tos >= 0) {
		v = 0;
		setsockopt(fd, lvl, opt, &v, sizeof(v));
	}
	return rv == (ssize_t)len ? 0 : -errno;
}

int cf_send(cf_net *n, const mrp_pkt *pkt, int tos)
{
	uint8_t buf[10000];
	ssize_t len = mrp_pkt_encode(buf, sizeof(buf), pkt);
	if (len < 0)
		return (int)len;
	return cf_send_raw(n, -1, NULL, buf, (size_t)len, tos);
}

cf_conn *cf_conn_find(cf_net *n, uint32_t ci)
{
	for (unsigned i = 0; i < CF_MAX_CONNS; i++)
		if (n->conns[i].used && n->conns[i].ci == ci)
			return &n->conns[i];
	return NULL;
}

void cf_conn_forget(cf_net *n, cf_conn *c)
{
	(void)n;
	memset(c, 0, sizeof(*c));
}

static cf_conn *conn_new(cf_net *n)
{
	for (unsigned i = 0; i < CF_MAX_CONNS; i++)
		if (!n->conns[i].used) {
			memset(&n->conns[i], 0, sizeof(n->conns[i]));
			n->conns[i].used = 1;
			return &n->conns[i];
		}
	/* Recycle the oldest slot: cases are short-lived. */
	memmove(&n->conns[0], &n->conns[1], sizeof(n->conns[0]) * (CF_MAX_CONNS - 1));
	cf_conn *c = &n->conns[CF_MAX_CONNS - 1];
	memset(c, 0, sizeof(*c));
	c->used = 1;
	return c;
}

void cf_hdr(const cf_conn *c, mrp_pkt *p, uint8_t op)
{
	memset(p, 0, sizeof(*p));
	p->hdr.version = MRP_VERSION;
	p->hdr.opcode = op;
	p->hdr.dst_conn_id = c->ca;
	p->hdr.src_conn_id = c->ci;
	p->hdr.token = c->ta;
}

void cf_data(cf_conn *c, mrp_pkt *p, uint8_t op, uint16_t path_id, uint16_t stream,
	     uint32_t msn, uint32_t offset, uint32_t msg_len, const uint8_t *payload,
	     uint16_t payload_len)
{
	cf_hdr(c, p, op);
	unsigned pi = path_id % CF_MAX_PATHS;
	p->hdr.path_id = path_id;
	p->hdr.path_gen = c->gen[pi];
	p->hdr.psn = c->next_psn[pi]++;
	p->hdr.flags = (offset == 0 ? MRP_F_FIRST : 0) |
		       ((uint64_t)offset + payload_len == msg_len ? MRP_F_LAST : 0) | MRP_F_ACK_REQ;
	mrp_data *d = &p->u.data;
	d->stream_id = stream;
	d->payload_len = payload_len;
	d->msn = msn;
	d->offset = offset;
	d->msg_len = msg_len;
	d->ts_ns = cf_now_ns();
	d->payload = payload;
}

void cf_probe(cf_conn *c, mrp_pkt *p, uint16_t path_id, uint16_t gen)
{
	cf_hdr(c, p, MRP_OP_PROBE);
	p->hdr.flags = MRP_F_ACK_REQ;
	p->hdr.path_id = path_id;
	p->hdr.path_gen = gen;
	p->u.probe.probe_seq = ++c->probe_seq;
	p->u.probe.ts_ns = cf_now_ns();
}

/* ---- the background peer ------------------------------------------------ */

static void rpath_record(cf_rpath *r, uint16_t gen, uint32_t psn)
{
	if (!r->seen || gen != r->gen) {
		r->seen = 1;
		r->gen = gen;
		r->next_psn = psn + 1;
		r->bits = 1;
		return;
	}
	int32_t d = (int32_t)(psn - (r->next_psn - 1));
	if (d > 0) {
		r->bits = d >= 64 ? 0 : r->bits << d;
		r->bits |= 1;
		r->next_psn = psn + 1;
	} else if (-d < 64) {
		r->bits |= 1ull << -d;
	}
}

static void send_ack(cf_net *n, cf_conn *c, const mrp_pkt *in)
{
	cf_rpath *r = &c->rp[in->hdr.path_id % CF_MAX_PATHS];
	mrp_pkt a;
	cf_hdr(c, &a, MRP_OP_ACK);
	a.u.ack.acked_path_id = in->hdr.path_id;
	a.u.ack.acked_path_gen = in->hdr.path_gen;
	a.u.ack.next_psn = r->next_psn;
	for (unsigned i = 0; i < 64; i++)
		if (r->bits >> i & 1)
			a.u.ack.sack[i / 8] |= (uint8_t)(1u << (i % 8));
	a.u.ack.rcv_count = 1;
	a.u.ack.ts_echo_ns = in->u.data.ts_ns;
	cf_send(n, &a, -1);
}

/* NAK RNR naming data packet `in` (SPEC 7.1), retry at the sender's timer. */
static void send_rnr(cf_net *n, cf_conn *c, const mrp_pkt *in)
{
	mrp_pkt k;
	cf_hdr(c, &k, MRP_OP_NAK);
	k.u.nak.reason = MRP_NAK_RNR;
	k.u.nak.stream_id = in->u.data.stream_id;
	k.u.nak.msn = in->u.data.msn;
	k.u.nak.offset = in->u.data.offset;
	k.u.nak.nak_path_id = in->hdr.path_id;
	k.u.nak.nak_path_gen = in->hdr.path_gen;
	k.u.nak.nak_psn = in->hdr.psn;
	cf_send(n, &k, -1);
}

static void background(cf_net *n, const cf_rx *rx)
{
	const mrp_pkt *p = &rx->pkt;
	cf_conn *c = cf_conn_find(n, p->hdr.dst_conn_id);
	if (!c || p->hdr.token != c->ti || (c->ca && p->hdr.src_conn_id != c->ca))
		return;
	if (mrp_op_is_data(p->hdr.opcode)) {
		const mrp_data *d = &p->u.data;
		cf_rpath *r = &c->rp[p->hdr.path_id % CF_MAX_PATHS];
		int dup = r->seen && r->gen == p->hdr.path_gen &&
			  (int32_t)(p->hdr.psn - r->next_psn) < 0 &&
			  (r->next_psn - 1 - p->hdr.psn) < 64 &&
			  (r->bits >> (r->next_psn - 1 - p->hdr.psn) & 1);
		rpath_record(r, p->hdr.path_gen, p->hdr.psn);
		if (!dup && d->offset == 0 && d->payload_len == d->msg_len &&
		    d->msg_len <= CF_MSG_MAX && c->nmsgs < CF_MAX_MSGS) {
			cf_msg *m = &c->msgs[c->nmsgs++];
			m->stream_id = d->stream_id;
			m->opcode = p->hdr.opcode;
			m->msn = d->msn;
			m->len = d->msg_len;
			memcpy(m->data, d->payload, d->payload_len);
		}
		c->data_rx++;
		if (rx->tos < 0 || ((rx->tos & 3) != 2 && (rx->tos & 3) != 3))
			c->data_not_ect++;
		if (c->rnr_nak && !c->silent)
			send_rnr(n, c, p);
		else if (!c->no_ack && !c->silent)
			send_ack(n, c, p);
	} else if (p->hdr.opcode == MRP_OP_PROBE) {
		if (p->hdr.flags & MRP_F_ACK_REQ)
			c->probes_rx++;
		if (c->silent)
			return;
		mrp_pkt a;
		cf_hdr(c, &a, MRP_OP_PROBE_ACK);
		a.u.probe_ack.probed_path_id = p->hdr.path_id;
		a.u.probe_ack.probed_path_gen = p->hdr.path_gen;
		a.u.probe_ack.probe_seq = p->u.probe.probe_seq;
		a.u.probe_ack.ts_echo_ns = p->u.probe.ts_ns;
		cf_send(n, &a, -1);
	} else if (p->hdr.opcode == MRP_OP_CLOSE) {
		if (p->hdr.flags & MRP_F_REPLY) {
			c->close_replies_rx++;
			c->last_reply_reason = p->u.close.reason;
		} else {
			c->closes_rx++;
			c->last_close_reason = p->u.close.reason;
			c->ended = 1;
			if (c->silent)
				return;
			mrp_pkt a;
			cf_hdr(c, &a, MRP_OP_CLOSE);
			a.hdr.flags = MRP_F_REPLY;
			a.u.close.reason = p->u.close.reason;
			cf_send(n, &a, -1);
		}
		c->ended = 1;
	} else if (p->hdr.opcode == MRP_OP_RESET) {
		c->resets_rx++;
		c->last_reset_reason = p->u.close.reason;
		c->ended = 1;
	}
}

static int recv_one(cf_net *n, cf_rx *rx, int timeout_ms)
{
	struct pollfd pfd = {.fd = n->fd, .events = POLLIN};
	int pr = poll(&pfd, 1, timeout_ms);
	if (pr <= 0)
		return 0;
	struct iovec iov = {.iov_base = rx->raw, .iov_len = sizeof(rx->raw)};
	union {
		char buf[CMSG_SPACE(sizeof(int)) * 2];
		struct cmsghdr align;
	} cm;
	struct msghdr mh = {.msg_name = &rx->from, .msg_namelen = sizeof(rx->from),
			    .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
	ssize_t len = recvmsg(n->fd, &mh, MSG_DONTWAIT);
	if (len < 0)
		return 0;
	rx->len = (size_t)len;
	rx->tos = -1;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == IPPROTO_IP && h->cmsg_type == IP_TOS)
			rx->tos = *(unsigned char *)CMSG_DATA(h);
		else if (h->cmsg_level == IPPROTO_IPV6 && h->cmsg_type == IPV6_TCLASS)
			rx->tos = *(int *)CMSG_DATA(h) & 0xff;
	rx->rv = mrp_pkt_decode(&rx->pkt, rx->raw, rx->len);
	n->rx_total++;
	if (rx->rv < 0) {
		n->rx_undecodable++;
		memset(&rx->pkt, 0, sizeof(rx->pkt));
		mrp_hdr_decode(&rx->pkt.hdr, rx->raw, rx->len);
		if (!n->first_bad[0]) {
			char from[80];
			snprintf(n->first_bad, sizeof(n->first_bad),
				 "%zu bytes from %s, opcode 0x%02x: %s", rx->len,
				 cf_sa_str(&rx->from, from, sizeof(from)),
				 rx->len > 1 ? rx->raw[1] : 0, mrp_strerror((int)rx->rv));
		}
	} else {
		background(n, rx);
	}
	if (n->verbose)
		fprintf(stderr, "  <- %s %zu bytes dst %08x src %08x%s\n",
			mrp_op_name(rx->pkt.hdr.opcode), rx->len, rx->pkt.hdr.dst_conn_id,
			rx->pkt.hdr.src_conn_id, rx->rv < 0 ? " (undecodable)" : "");
	return 1;
}

int cf_wait(cf_net *n, cf_match_fn match, void *ud, unsigned timeout_ms, cf_rx *rx)
{
	uint64_t end = cf_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		uint64_t now = cf_now_ns();
		if (now >= end)
			return 0;
		int left = (int)((end - now + 999999) / 1000000);
		if (recv_one(n, rx, left) && (!match || match(rx, ud)))
			return 1;
	}
}

unsigned cf_drain(cf_net *n, unsigned ms, cf_match_fn match, void *ud)
{
	static cf_rx rx;
	unsigned hits = 0;
	uint64_t end = cf_now_ns() + (uint64_t)ms * 1000000ull;
	for (;;) {
		uint64_t now = cf_now_ns();
		if (now >= end)
			return hits;
		if (recv_one(n, &rx, (int)((end - now + 999999) / 1000000)) &&
		    (!match || match(&rx, ud)))
			hits++;
	}
}

/* ---- handshake ------------------------------------------------------------ */

void cf_hs_defaults(cf_hs_opts *o, uint32_t service_id)
{
	memset(o, 0, sizeof(*o));
	o->version = o->min_version = o->max_version = MRP_VERSION;
	o->mtu = 1024;
	o->max_streams = 4;
	o->max_paths = 4;
	o->caps = MRP_CAP_IMM | MRP_CAP_RETRY;
	o->service_id = service_id;
	o->follow_retry = 1;
}

void cf_build_connect(cf_net *n, mrp_pkt *p, uint32_t ci, uint64_t ti, uint64_t token,
		      const cf_hs_opts *o)
{
	memset(p, 0, sizeof(*p));
	p->hdr.version = o->version;
	p->hdr.opcode = MRP_OP_CONNECT;
	p->hdr.src_conn_id = ci;
	p->hdr.token = token;
	mrp_hs *h = &p->u.hs;
	h->min_version = o->min_version;
	h->max_version = o->max_version;
	h->mtu = o->mtu;
	h->service_id = o->service_id;
	h->hs_token = ti;
	h->instance_id = n->inst;
	h->caps = o->caps;
	h->max_streams = o->max_streams;
	h->max_paths = o->max_paths;
	h->service_port = cf_sa_port(&n->local);
	if (o->naddrs) {
		h->num_addrs = o->naddrs;
		memcpy(h->addrs, o->addrs, sizeof(h->addrs[0]) * o->naddrs);
	} else {
		h->num_addrs = 1;
		cf_sa_addr(&n->local, 0, &h->addrs[0]);
	}
}

void cf_sa_addr(const cf_sa *a, uint8_t plane, mrp_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->plane = plane;
	if (a->sa.sa_family == AF_INET6) {
		out->family = 6;
		memcpy(out->addr, &a->in6.sin6_addr, 16);
	} else {
		out->family = 4;
		memcpy(out->addr, &a->in.sin_addr, 4);
	}
}

typedef struct hs_match {
	uint32_t ci;
} hs_match;

static int match_hs(const cf_rx *rx, void *ud)
{
	const hs_match *m = ud;
	if (rx->rv < 0 || rx->pkt.hdr.dst_conn_id != m->ci)
		return 0;
	uint8_t op = rx->pkt.hdr.opcode;
	return op == MRP_OP_ACCEPT || op == MRP_OP_REJECT || op == MRP_OP_RETRY;
}

int cf_handshake(cf_net *n, const cf_hs_opts *o, cf_rx *ans, cf_conn **pc)
{
	uint32_t ci = cf_rand32();
	uint64_t ti = cf_rand64();
	uint64_t token = o->no_cookie ? 0 : n->cookie;
	unsigned retries = 0;
	if (pc)
		*pc = NULL;
	for (unsigned attempt = 0; attempt < 8; attempt++) {
		mrp_pkt p;
		cf_build_connect(n, &p, ci, ti, token, o);
		if (cf_send(n, &p, -1) < 0)
			return 0;
		hs_match m = {ci};
		if (!cf_wait(n, match_hs, &m, n->timeout_ms, ans))
			continue;
		if (ans->pkt.hdr.opcode == MRP_OP_RETRY) {
			if (!o->follow_retry || ++retries > 3)
				return MRP_OP_RETRY;
			token = ans->pkt.u.retry.cookie;
			if (!o->no_cookie)
				n->cookie = token;
			continue;
		}
		if (ans->pkt.hdr.opcode == MRP_OP_ACCEPT && ans->pkt.hdr.token == ti) {
			cf_conn *c = conn_new(n);
			const mrp_hs *h = &ans->pkt.u.hs;
			c->ci = ci;
			c->ti = ti;
			c->ca = ans->pkt.hdr.src_conn_id;
			c->ta = h->hs_token;
			c->inst = h->instance_id;
			c->mtu = h->mtu;
			c->max_streams = h->max_streams;
			c->max_paths = h->max_paths;
			c->caps = h->caps;
			c->service_id = h->service_id;
			c->peer_port = h->service_port;
			if (pc)
				*pc = c;
		}
		return ans->pkt.hdr.opcode;
	}
	return 0;
}

typedef struct pa_match {
	uint32_t ci, seq;
	uint16_t pid, gen;
} pa_match;

static int match_probe_ack(const cf_rx *rx, void *ud)
{
	const pa_match *m = ud;
	return rx->rv >= 0 && rx->pkt.hdr.opcode == MRP_OP_PROBE_ACK &&
	       rx->pkt.hdr.dst_conn_id == m->ci && rx->pkt.u.probe_ack.probe_seq == m->seq &&
	       rx->pkt.u.probe_ack.probed_path_id == m->pid &&
	       rx->pkt.u.probe_ack.probed_path_gen == m->gen;
}

int cf_alive(cf_net *n, cf_conn *c, unsigned timeout_ms)
{
	for (unsigned i = 0; i < 3; i++) {
		mrp_pkt p;
		cf_probe(c, &p, 0, c->gen[0]);
		cf_send(n, &p, -1);
		pa_match m = {c->ci, p.u.probe.probe_seq, 0, c->gen[0]};
		cf_rx rx;
		if (cf_wait(n, match_probe_ack, &m, timeout_ms / 3 + 1, &rx))
			return 1;
	}
	return 0;
}

int cf_confirm(cf_net *n, cf_conn *c)
{
	if (!cf_alive(n, c, n->timeout_ms * 3))
		return 0;
	c->established = 1;
	return 1;
}

cf_conn *cf_open(cf_net *n, uint32_t service_id, const cf_hs_opts *o, char *err,
		 size_t errlen)
{
	cf_hs_opts d;
	if (!o) {
		cf_hs_defaults(&d, service_id);
		o = &d;
	}
	static cf_rx ans;
	cf_conn *c;
	int op = cf_handshake(n, o, &ans, &c);
	if (op != MRP_OP_ACCEPT || !c) {
		snprintf(err, errlen, "handshake to service %08x: %s", o->service_id,
			 op == 0 ? "no answer" :
			 op == MRP_OP_REJECT ? "REJECT" : "unexpected answer");
		if (op == MRP_OP_REJECT)
			snprintf(err + strlen(err), errlen - strlen(err), " reason %u",
				 ans.pkt.u.reject.reason);
		return NULL;
	}
	if (!cf_confirm(n, c)) {
		snprintf(err, errlen, "service %08x: no PROBE_ACK after ACCEPT", o->service_id);
		return NULL;
	}
	return c;
}

void cf_reset_all(cf_net *n)
{
	for (unsigned i = 0; i < CF_MAX_CONNS; i++) {
		cf_conn *c = &n->conns[i];
		if (!c->used)
			continue;
		if (c->established && !c->ended) {
			mrp_pkt p;
			cf_hdr(c, &p, MRP_OP_RESET);
			p.u.close.reason = MRP_CLOSE_APP_EXIT;
			cf_send(n, &p, -1);
		}
		cf_conn_forget(n, c);
	}
}
