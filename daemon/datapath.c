#define _GNU_SOURCE /* sendmmsg, recvmmsg, struct ucred */
#include "datapath.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sock_diag.h>
#include <unistd.h>

#include "log.h"
#include "mrd.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define ECT0 0x02
#define CE 0x03
#define GSO_MAX_SEGS 64
#define GSO_MAX_BYTES 65000 /* below 65507, the largest IPv4 UDP payload */
#define RX_BATCH_GRO 16
#define RX_BATCH 64
#define RX_ROUNDS 8         /* recvmmsg calls per readable event, for fairness */
#define CMSG_ROOM 64
/* Host-side ECN: a receive queue holding more than this (kernel buffer
 * accounting, about twice the payload) marks what is read from it CE. */
#define RX_CE_BYTES (1u << 20)

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif

static void set_port(mrd_sockaddr *a, uint16_t port)
{
	if (a->sa.sa_family == AF_INET6)
		a->in6.sin6_port = htons(port);
	else
		a->in.sin_port = htons(port);
}

/* ---- sockets ------------------------------------------------------------- */

static void setbuf_opt(int fd, int force, int plain, int bytes)
{
	/* As root the FORCE variant passes rmem_max/wmem_max; otherwise the
	 * kernel caps the plain one. */
	if (setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, plain, &bytes, sizeof(bytes));
}

/* A nonblocking UDP socket bound to plane address:port with ECT(0) and TOS
 * reporting. Returns the fd or -errno. */
static int open_udp(mrd_dp *dp, const mrd_dp_plane *pl, uint16_t port, int rcvbuf)
{
	int fam = pl->local.sa.sa_family;
	int fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1, tos = ECT0, e;
	if (fam == AF_INET6) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one));
		int pmtu = IPV6_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	} else {
		setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
		setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
		int pmtu = IP_PMTUDISC_DO; /* DF: SPEC 2.1 */
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	}
	if (dp->gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) < 0)
		dp->gro = 0;
	setbuf_opt(fd, SO_SNDBUFFORCE, SO_SNDBUF, 4 << 20);
	if (rcvbuf)
		setbuf_opt(fd, SO_RCVBUFFORCE, SO_RCVBUF, rcvbuf);
	mrd_sockaddr a = pl->local;
	set_port(&a, port);
	if (bind(fd, &a.sa, pl->locallen) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

static void on_readable(uv_poll_t *h, int status, int events);
static void on_after_io(uv_check_t *h);

static int sock_start(mrd_dp *dp, mrd_sock *s, mrd_dp_plane *pl, int fd, uint16_t port)
{
	s->fd = fd;
	s->port = port;
	s->plane = pl;
	int rv = uv_poll_init(dp->d->loop, &s->poll, fd);
	if (rv < 0)
		return rv;
	s->poll.data = s;
	s->polling = 1;
	return uv_poll_start(&s->poll, UV_READABLE, on_readable);
}

static void pool_sock_closed(uv_handle_t *h)
{
	free(h->data);
}

static void sock_close(mrd_sock *s, int free_it)
{
	if (!s->polling) {
		if (s->fd >= 0)
			close(s->fd);
		if (free_it)
			free(s);
		return;
	}
	s->polling = 0;
	uv_close((uv_handle_t *)&s->poll, free_it ? pool_sock_closed : NULL);
	close(s->fd); /* libuv does not own a poll handle's fd */
	s->fd = -1;
}

int mrd_dp_init(mrd_dp *dp, mrd *d, const mrd_dp_ops *ops)
{
	memset(dp, 0, sizeof(*dp));
	dp->d = d;
	dp->ops = *ops;
	const char *e = getenv("MRD_NO_GSO");
	dp->gso = !(e && *e == '1');
	e = getenv("MRD_NO_GRO");
	dp->gro = !(e && *e == '1');
	e = getenv("MRD_NO_HOST_ECN");
	dp->host_ecn = !(e && *e == '1');
	e = getenv("MRD_BUSY_POLL_US");
	uint64_t busy_us = e && *e ? strtoull(e, NULL, 10) : 0;
	dp->busy_ns = (busy_us < 1000000 ? busy_us : 1000000) * 1000u;
	if (uv_idle_init(d->loop, &dp->spin) < 0)
		return -ENOMEM;
	dp->spin.data = dp;
	dp->spin_init = 1;
	if (uv_check_init(d->loop, &dp->after_io) < 0)
		return -ENOMEM;
	dp->after_io.data = dp;
	dp->after_io_init = 1;
	uv_check_start(&dp->after_io, on_after_io);
	dp->txbuf = malloc((size_t)MRD_DP_TXQ * MRD_DP_PKT_MAX);
	dp->rxslot = 65536;
	dp->rxbuf = malloc((size_t)RX_BATCH * dp->rxslot);
	if (!dp->txbuf || !dp->rxbuf)
		return -ENOMEM;
	const mrd_config *c = &d->cfg;
	for (unsigned i = 0; i < c->nplanes; i++) {
		const mrd_plane *cp = &c->planes[i];
		mrd_dp_plane *pl = &dp->planes[i];
		pl->d = d;
		pl->idx = i;
		pl->service.fd = -1;
		if (cp->address.family == AF_INET) {
			pl->local.in.sin_family = AF_INET;
			memcpy(&pl->local.in.sin_addr, cp->address.bytes, 4);
			pl->locallen = sizeof(pl->local.in);
		} else if (cp->address.family == AF_INET6) {
			pl->local.in6.sin6_family = AF_INET6;
			memcpy(&pl->local.in6.sin6_addr, cp->address.bytes, 16);
			pl->locallen = sizeof(pl->local.in6);
		} else {
			mrd_err("planes[%u] (%s): no address: planes given only by "
				"interface are not supported yet", i, cp->name);
			return -EINVAL;
		}
		pl->pool = calloc(MRD_DP_POOL_MAX, sizeof(*pl->pool));
		pl->by_port = calloc(65536, sizeof(*pl->by_port));
		pl->users = calloc(65536, sizeof(*pl->users));
		if (!pl->pool || !pl->by_port || !pl->users)
			return -ENOMEM;
		dp->nplanes = i + 1;
		int fd = open_udp(dp, pl, c->port, 16 << 20);
		char buf[64];
		mrd_sockaddr a = pl->local;
		set_port(&a, c->port);
		if (fd < 0) {
			mrd_err("planes[%u] (%s): cannot bind %s: %s", i, cp->name,
				mrd_sockaddr_str(&a, buf, sizeof(buf)), strerror(-fd));
			return fd;
		}
		pl->service.is_service = 1;
		int rv = sock_start(dp, &pl->service, pl, fd, c->port);
		if (rv < 0)
			return rv;
		mrd_info("plane %s: service socket %s", cp->name,
			 mrd_sockaddr_str(&a, buf, sizeof(buf)));
	}
	mrd_info("datapath: UDP GSO %s, GRO %s", dp->gso ? "on" : "off",
		 dp->gro ? "on" : "off");
	return 0;
}

void mrd_dp_close(mrd_dp *dp)
{
	for (unsigned i = 0; i < dp->nplanes; i++) {
		mrd_dp_plane *pl = &dp->planes[i];
		for (uint32_t k = 0; k < pl->npool; k++)
			sock_close(pl->pool[k], 1);
		pl->npool = 0;
		free(pl->pool);
		free(pl->by_port);
		free(pl->users);
		pl->pool = NULL;
		pl->by_port = NULL;
		pl->users = NULL;
		if (pl->service.fd >= 0)
			sock_close(&pl->service, 0);
	}
	dp->nplanes = 0;
	if (dp->spin_init) {
		dp->spin_init = dp->spinning = 0;
		uv_close((uv_handle_t *)&dp->spin, NULL);
	}
	if (dp->after_io_init) {
		dp->after_io_init = 0;
		uv_close((uv_handle_t *)&dp->after_io, NULL);
	}
	free(dp->txbuf);
	free(dp->rxbuf);
	dp->txbuf = dp->rxbuf = NULL;
}

/* Close pool socket k of pl; the last one takes its place. */
static void pool_close(mrd_dp_plane *pl, uint32_t k)
{
	mrd_sock *s = pl->pool[k];
	pl->by_port[s->port] = 0;
	sock_close(s, 1);
	pl->npool--;
	if (k != pl->npool) {
		pl->pool[k] = pl->pool[pl->npool];
		pl->by_port[pl->pool[k]->port] = (uint16_t)(k + 1);
	}
}

/* Drop the least recently used pool socket of pl that no path holds, or
 * if every one is held, the least recently used of all. */
static void pool_evict(mrd_dp_plane *pl)
{
	uint32_t lru = 0, orphan = UINT32_MAX;
	for (uint32_t k = 0; k < pl->npool; k++) {
		const mrd_sock *s = pl->pool[k];
		if (s->last_used_ns < pl->pool[lru]->last_used_ns)
			lru = k;
		if (!pl->users[s->port] &&
		    (orphan == UINT32_MAX || s->last_used_ns < pl->pool[orphan]->last_used_ns))
			orphan = k;
	}
	pool_close(pl, orphan != UINT32_MAX ? orphan : lru);
}

void mrd_dp_set_pool_cap(mrd_dp *dp, uint32_t cap)
{
	dp->pool_cap = cap < 8 ? 8 : cap > MRD_DP_POOL_MAX ? MRD_DP_POOL_MAX : cap;
}

void mrd_dp_port_use(mrd_dp *dp, unsigned plane, uint16_t sport, int delta)
{
	if (plane >= dp->nplanes) /* (the datapath closed before the connections) */
		return;
	uint32_t *u = &dp->planes[plane].users[sport];
	if (delta > 0) {
		(*u)++;
	} else {
		assert(*u > 0);
		if (*u)
			(*u)--;
	}
}

uint32_t mrd_dp_port_users(const mrd_dp *dp, unsigned plane, uint16_t sport)
{
	return plane < dp->nplanes ? dp->planes[plane].users[sport] : 0;
}

unsigned mrd_dp_pool_sweep(mrd_dp *dp, uint64_t now, uint64_t idle_ns, uint64_t orphan_ns,
			   unsigned *porphans)
{
	unsigned n = 0, orphans = 0;
	mrd_dp_flush(dp); /* no queued packet may name a closed socket */
	for (unsigned i = 0; i < dp->nplanes; i++) {
		mrd_dp_plane *pl = &dp->planes[i];
		for (uint32_t k = 0; k < pl->npool;) {
			mrd_sock *s = pl->pool[k];
			/* An orphan (no path holds its port) sends nothing more;
			 * what it could still receive is an answer to an unknown
			 * packet it sent (SPEC 2.3: peers send to the service
			 * port), which may as well be lost. */
			int orphan = pl->users[s->port] == 0;
			uint64_t limit = orphan && orphan_ns < idle_ns ? orphan_ns : idle_ns;
			if (now < s->last_used_ns || now - s->last_used_ns < limit) {
				k++;
				continue;
			}
			orphans += orphan;
			pool_close(pl, k); /* (the last socket moved to k: look at k again) */
			n++;
		}
	}
	if (porphans)
		*porphans = orphans;
	return n;
}

mrd_sock *mrd_dp_sport(mrd_dp *dp, unsigned plane, uint16_t sport, int *perr)
{
	mrd_dp_plane *pl = &dp->planes[plane];
	uint16_t k = pl->by_port[sport];
	if (k) {
		mrd_sock *s = pl->pool[k - 1];
		/* The loop's time (read once per turn), not a clock reading per
		 * packet sent: it only orders the sockets for eviction and
		 * times their idleness in seconds. */
		s->last_used_ns = uv_now(dp->d->loop) * 1000000u;
		return s;
	}
	uint32_t cap = dp->pool_cap ? dp->pool_cap : MRD_DP_POOL_MAX;
	if (pl->npool >= cap)
		mrd_dp_flush(dp); /* no queued packet may name an evicted socket */
	while (pl->npool && pl->npool >= cap)
		pool_evict(pl);
	int fd = open_udp(dp, pl, sport, 0);
	if (fd < 0) {
		pl->bind_fails++;
		*perr = fd;
		return NULL;
	}
	mrd_sock *s = calloc(1, sizeof(*s));
	if (!s || sock_start(dp, s, pl, fd, sport) < 0) {
		if (s && s->polling)
			sock_close(s, 1);
		else {
			close(fd);
			free(s);
		}
		*perr = -ENOMEM;
		return NULL;
	}
	s->last_used_ns = uv_hrtime();
	pl->pool[pl->npool++] = s;
	pl->by_port[sport] = (uint16_t)pl->npool;
	return s;
}

/* ---- send ---------------------------------------------------------------- */

uint8_t *mrd_dp_tx_slot(mrd_dp *dp)
{
	if (dp->txn == MRD_DP_TXQ)
		mrd_dp_flush(dp);
	return dp->txbuf + (size_t)dp->txn * MRD_DP_PKT_MAX;
}

void mrd_dp_tx_commit(mrd_dp *dp, mrd_sock *s, const mrd_sockaddr *dst,
		      socklen_t dstlen, uint32_t len)
{
	mrd_dp_txent *e = &dp->tx[dp->txn++];
	e->sock = s;
	e->dst = *dst;
	e->dstlen = dstlen;
	e->len = len;
	e->plen = 0;
	e->payload = NULL;
	e->tos = 0;
	e->stamp = MRD_DP_STAMP_NONE;
}

void mrd_dp_tx_commit_ref(mrd_dp *dp, mrd_sock *s, const mrd_sockaddr *dst,
			  socklen_t dstlen, uint32_t len, const uint8_t *payload,
			  uint32_t plen)
{
	mrd_dp_tx_commit(dp, s, dst, dstlen, len);
	if (plen) {
		mrd_dp_txent *e = &dp->tx[dp->txn - 1];
		e->payload = payload;
		e->plen = plen;
		dp->tx_refs++;
	}
}

void mrd_dp_flush_refs(mrd_dp *dp)
{
	if (dp->tx_refs)
		mrd_dp_flush(dp);
}

void mrd_dp_tx_dscp(mrd_dp *dp, uint8_t dscp)
{
	if (dp->txn && dscp && dscp < 64)
		dp->tx[dp->txn - 1].tos = (uint8_t)(dscp << 2 | ECT0);
}

void mrd_dp_tx_stamp(mrd_dp *dp, int kind, uint16_t off, uint64_t base_ns)
{
	if (!dp->txn || kind == MRD_DP_STAMP_NONE)
		return;
	mrd_dp_txent *e = &dp->tx[dp->txn - 1];
	uint32_t need = kind == MRD_DP_STAMP_SET64 ? 8 : 4;
	if ((uint32_t)off + need > e->len)
		return;
	e->stamp = (uint8_t)kind;
	e->stamp_off = off;
	e->stamp_base_ns = base_ns;
	dp->tx_stamps++;
}

/* Write the send timestamps of msgs[0..n) (mrd_dp_tx_stamp). An iovec is
 * either a queue slot (a packet's first bytes) or a payload by reference,
 * which is never in the queue's buffer. */
static void stamp_batch(mrd_dp *dp, struct mmsghdr *msgs, unsigned n)
{
	uint64_t t = uv_hrtime();
	uintptr_t lo = (uintptr_t)dp->txbuf, hi = lo + (size_t)MRD_DP_TXQ * MRD_DP_PKT_MAX;
	for (unsigned i = 0; i < n; i++) {
		const struct msghdr *m = &msgs[i].msg_hdr;
		for (size_t k = 0; k < m->msg_iovlen; k++) {
			uint8_t *p = m->msg_iov[k].iov_base;
			if ((uintptr_t)p < lo || (uintptr_t)p >= hi)
				continue;
			const mrd_dp_txent *e = &dp->tx[((uintptr_t)p - lo) / MRD_DP_PKT_MAX];
			uint8_t *f = p + e->stamp_off;
			if (e->stamp == MRD_DP_STAMP_SET64) {
				for (int b = 7; b >= 0; b--)
					f[7 - b] = (uint8_t)(t >> (8 * b));
			} else if (e->stamp == MRD_DP_STAMP_ADD32) {
				uint64_t v = (uint64_t)f[0] << 24 | (uint64_t)f[1] << 16 |
					     (uint64_t)f[2] << 8 | f[3];
				v += t > e->stamp_base_ns ? t - e->stamp_base_ns : 0;
				if (v > UINT32_MAX)
					v = UINT32_MAX;
				for (int b = 3; b >= 0; b--)
					f[3 - b] = (uint8_t)(v >> (8 * b));
			}
		}
	}
}

void mrd_dp_send_now(mrd_dp *dp, mrd_sock *s, const mrd_sockaddr *dst,
		     socklen_t dstlen, const uint8_t *pkt, uint32_t len)
{
	memcpy(mrd_dp_tx_slot(dp), pkt, len);
	mrd_dp_tx_commit(dp, s, dst, dstlen, len);
	mrd_dp_flush(dp);
}

static int same_flow(const mrd_dp_txent *a, const mrd_dp_txent *b)
{
	return a->sock == b->sock && a->dstlen == b->dstlen &&
	       memcmp(&a->dst, &b->dst, a->dstlen) == 0;
}

/* Send msgs[0..n) on one socket; on a hard error skip the failing message.
 * segs[i] is the number of packets in message i (for the counters). */
static void send_batch(mrd_dp *dp, mrd_sock *s, struct mmsghdr *msgs,
		       const uint32_t *segs, unsigned n)
{
	unsigned done = 0;
	int stamp = dp->tx_stamps != 0;
	while (done < n) {
		if (stamp) {
			/* once: a retried message keeps its first stamp (an
			 * ADD32 field must not grow twice) */
			stamp_batch(dp, msgs + done, n - done);
			stamp = 0;
		}
		int r = sendmmsg(s->fd, msgs + done, n - done, 0);
		dp->tx_calls++;
		if (r > 0) {
			for (int i = 0; i < r; i++) {
				s->plane->tx_pkts += segs[done + i];
				s->plane->tx_bytes += msgs[done + i].msg_len;
			}
			done += (unsigned)r;
			continue;
		}
		int e = errno;
		if (e == EINTR)
			continue;
		if ((e == EIO || e == EINVAL) && dp->gso && segs[done] > 1) {
			/* The kernel or device refuses GSO: stop using it. The
			 * packets of this flush are dropped: the engine sees
			 * them as lost and resends them. */
			mrd_warn("UDP GSO send failed (%s): turning GSO off", strerror(e));
			dp->gso = 0;
		}
		if (e == EAGAIN || e == ENOBUFS || e == ENOMEM)
			dp->tx_dropped += segs[done];
		else
			dp->tx_errors += segs[done];
		done++;
	}
}

/* The iovecs of queued packet k: its slot, and its payload by reference. */
static void add_iovs(mrd_dp *dp, uint32_t k, struct iovec *iov, unsigned *niov)
{
	const mrd_dp_txent *e = &dp->tx[k];
	iov[*niov].iov_base = dp->txbuf + (size_t)k * MRD_DP_PKT_MAX;
	iov[*niov].iov_len = e->len;
	(*niov)++;
	if (e->plen) {
		iov[*niov].iov_base = (void *)(uintptr_t)e->payload;
		iov[*niov].iov_len = e->plen;
		(*niov)++;
	}
}

void mrd_dp_flush(mrd_dp *dp)
{
	uint32_t n = dp->txn;
	if (!n)
		return;
	dp->txn = 0;
	/* Stable grouping by flow (socket + destination): packets of one
	 * path stay in order, and each path's packets of this flush become
	 * one GSO super-datagram. */
	uint8_t group[MRD_DP_TXQ], order[MRD_DP_TXQ];
	uint32_t ngroups = 0, lead[MRD_DP_TXQ];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = 0;
		while (g < ngroups && !same_flow(&dp->tx[lead[g]], &dp->tx[i]))
			g++;
		if (g == ngroups)
			lead[ngroups++] = i;
		group[i] = (uint8_t)g;
	}
	/* The flows take turns at going first: the sockets are sent to one
	 * after another, and the flow sent last waits for the others' send
	 * calls (a few us each, more with a preemption between them), which
	 * would otherwise always fall on the same paths, the higher path ids,
	 * and make the same plane's round trips look longer. */
	uint32_t k = 0, first = ngroups > 1 ? dp->tx_rot++ % ngroups : 0;
	for (uint32_t r = 0; r < ngroups; r++) {
		uint32_t g = (first + r) % ngroups;
		for (uint32_t i = lead[g]; i < n; i++)
			if (group[i] == g)
				order[k++] = (uint8_t)i;
	}

	struct mmsghdr msgs[MRD_DP_TXQ];
	struct iovec iov[2 * MRD_DP_TXQ]; /* a slot and a payload by reference */
	uint32_t segs[MRD_DP_TXQ];
	struct {
		/* (cmsghdr's alignment) UDP_SEGMENT, and IP_TOS / IPV6_TCLASS */
		_Alignas(size_t) char buf[CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(int))];
	} ctl[MRD_DP_TXQ];
	unsigned nmsg = 0, niov = 0;
	mrd_sock *cur = NULL;
	for (uint32_t i = 0; i < n;) {
		const mrd_dp_txent *e = &dp->tx[order[i]];
		if (cur && e->sock != cur) {
			send_batch(dp, cur, msgs, segs, nmsg);
			nmsg = 0;
		}
		cur = e->sock;
		uint32_t seg = e->len + e->plen, total = seg, j = i + 1;
		unsigned first_iov = niov;
		add_iovs(dp, order[i], iov, &niov);
		/* Extend the run: every packet but the last exactly seg bytes. */
		while (dp->gso && j < n && j - i < GSO_MAX_SEGS) {
			const mrd_dp_txent *p = &dp->tx[order[j - 1]], *q = &dp->tx[order[j]];
			uint32_t qlen = q->len + q->plen;
			if (p->len + p->plen != seg || !same_flow(e, q) || qlen > seg ||
			    q->tos != e->tos || total + qlen > GSO_MAX_BYTES)
				break;
			add_iovs(dp, order[j], iov, &niov);
			total += qlen;
			j++;
		}
		struct msghdr *m = &msgs[nmsg].msg_hdr;
		memset(m, 0, sizeof(*m));
		m->msg_name = (void *)&e->dst;
		m->msg_namelen = e->dstlen;
		m->msg_iov = &iov[first_iov];
		m->msg_iovlen = niov - first_iov;
		if (j - i > 1 || e->tos) {
			m->msg_control = ctl[nmsg].buf;
			m->msg_controllen = sizeof(ctl[nmsg].buf);
			struct cmsghdr *cm = CMSG_FIRSTHDR(m);
			size_t used = 0;
			if (j - i > 1) {
				cm->cmsg_level = SOL_UDP;
				cm->cmsg_type = UDP_SEGMENT;
				cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
				uint16_t gs = (uint16_t)seg;
				memcpy(CMSG_DATA(cm), &gs, sizeof(gs));
				used += CMSG_SPACE(sizeof(uint16_t));
				dp->tx_gso_msgs++;
				/* (not CMSG_NXTHDR: it reads the next header's
				 * length, which is not written yet) */
				cm = (struct cmsghdr *)(void *)(ctl[nmsg].buf + used);
			}
			if (e->tos) {
				int v6 = e->dst.sa.sa_family == AF_INET6;
				cm->cmsg_level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
				cm->cmsg_type = v6 ? IPV6_TCLASS : IP_TOS;
				cm->cmsg_len = CMSG_LEN(sizeof(int));
				int tos = e->tos;
				memcpy(CMSG_DATA(cm), &tos, sizeof(tos));
				used += CMSG_SPACE(sizeof(int));
			}
			m->msg_controllen = used;
		}
		segs[nmsg++] = j - i;
		i = j;
	}
	if (nmsg)
		send_batch(dp, cur, msgs, segs, nmsg);
	dp->tx_stamps = 0;
	dp->tx_refs = 0;
}

/* ---- receive ------------------------------------------------------------- */

/* Read up to `rounds` batches from s and hand every datagram to the peer
 * layer (without running the connections). Returns 1 when the last batch
 * was full (more may be waiting), else 0. With pass non-NULL, a reading of
 * the clock is kept there and given to every later batch (on_after_io). */
static int sock_read(mrd_sock *s, int rounds, uint64_t *pass)
{
	mrd_dp_plane *pl = s->plane;
	mrd_dp *dp = pl->d->dp;
	unsigned batch = dp->gro ? RX_BATCH_GRO : RX_BATCH;
	size_t slot = dp->gro ? dp->rxslot : MRD_DP_PKT_MAX;
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	mrd_sockaddr src[RX_BATCH];
	struct {
		_Alignas(size_t) char buf[CMSG_ROOM];
	} ctl[RX_BATCH];
	for (int round = 0; round < rounds && s->polling; round++) {
		for (unsigned i = 0; i < batch; i++) {
			iov[i].iov_base = dp->rxbuf + i * slot;
			iov[i].iov_len = slot;
			struct msghdr *m = &msgs[i].msg_hdr;
			memset(m, 0, sizeof(*m));
			m->msg_name = &src[i];
			m->msg_namelen = sizeof(src[i]);
			m->msg_iov = &iov[i];
			m->msg_iovlen = 1;
			m->msg_control = ctl[i].buf;
			m->msg_controllen = sizeof(ctl[i].buf);
		}
		int r = recvmmsg(s->fd, msgs, batch, MSG_DONTWAIT, NULL);
		dp->rx_calls++;
		if (r <= 0)
			return 0;
		/* One clock reading per batch, not per datagram: all of them
		 * had arrived when recvmmsg() returned, and a reading per
		 * datagram was a tenth of the daemon's CPU in the 64-byte
		 * message-rate benchmark (bench/README.md). */
		uint64_t now = pass && *pass ? *pass : uv_hrtime();
		if (pass)
			*pass = now;
		if (dp->busy_ns)
			mrd_dp_busy(dp, now);
		/* On loopback (or whenever this host, not the network, is the
		 * bottleneck) no switch marks ECN: the queue builds in our own
		 * socket buffer, RTTs grow by milliseconds and the sender's
		 * timers fire spuriously. Mark CE when that queue is deep, as a
		 * switch would at its ECN threshold, so the per-path congestion
		 * control backs off (MRD_NO_HOST_ECN=1 turns this off). */
		int host_ce = 0;
		/* A batch that was not full emptied the queue: nothing is
		 * left to measure, and the system call is saved (one per
		 * batch, 7-9 k/s per daemon in the 64-byte message rate). */
		if (dp->host_ecn && (unsigned)r == batch) {
			uint32_t mi[SK_MEMINFO_VARS] = {0};
			socklen_t mil = sizeof(mi);
			if (getsockopt(s->fd, SOL_SOCKET, SO_MEMINFO, mi, &mil) == 0 &&
			    mi[SK_MEMINFO_RMEM_ALLOC] > RX_CE_BYTES) {
				host_ce = 1;
				dp->rx_host_ce++;
			}
		}
		for (int i = 0; i < r; i++) {
			struct msghdr *m = &msgs[i].msg_hdr;
			int ce = host_ce;
			size_t gso = 0;
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
				if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) {
					uint8_t tos;
					memcpy(&tos, CMSG_DATA(cm), 1);
					ce |= (tos & 3) == CE;
				} else if (cm->cmsg_level == IPPROTO_IPV6 &&
					   cm->cmsg_type == IPV6_TCLASS) {
					int tc;
					memcpy(&tc, CMSG_DATA(cm), sizeof(tc));
					ce |= (tc & 3) == CE;
				} else if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
					int g;
					memcpy(&g, CMSG_DATA(cm), sizeof(g));
					gso = g > 0 ? (size_t)g : 0;
				}
			}
			const uint8_t *p = iov[i].iov_base;
			size_t len = msgs[i].msg_len;
			if (m->msg_flags & MSG_TRUNC) {
				mrd_count_drop(pl->d, MRP_ERR_LENGTH);
				continue;
			}
			if (!gso || gso >= len)
				gso = len;
			else
				dp->rx_gro_segs += (len + gso - 1) / gso;
			/* A GRO buffer holds equal-size datagrams, the last one
			 * possibly shorter. */
			for (size_t off = 0; off < len; off += gso) {
				size_t l = len - off < gso ? len - off : gso;
				pl->rx_pkts++;
				pl->rx_bytes += l;
				dp->ops.input(dp->ops.ud, s, &src[i], m->msg_namelen, p + off,
					      l, ce, now);
			}
		}
		if ((unsigned)r < batch)
			return 0;
	}
	return 1;
}

/*
 * Receiving, fairly over the planes. libuv reports every socket that is
 * readable in one loop pass, one callback after the other. A plane service
 * socket's callback only notes that it is readable; after all of them
 * (on_after_io, a check handle) the readable planes are read a batch each
 * and the connections run once, and the planes whose batch was full are
 * read again, a batch each, running the connections after every round (up
 * to RX_ROUNDS). So what arrived on every plane is timestamped and answered
 * in the same pass and its ACKs, PROBE_ACKs and data leave in one flush: no
 * plane waits behind another's backlog and the output that backlog produced
 * (which made one plane's round trips look several times longer and its
 * PROBEs miss their ping round).
 *
 * The batches of one round are parsed one after the other, each before
 * the next plane is read. With a clock reading per batch, the plane read
 * second counted the first one's parsing in its round trips: plane0 came
 * first (libuv's order), and plane1's idle PROBE medians were up to 28 %
 * above plane0's on a sanitizer build, its 10th percentile 3-7 us above in
 * most runs. So a round's batches all take the clock read when its first
 * recvmmsg() returned (a datagram that arrived while an earlier batch was
 * parsed is dated a little early), and the planes take turns at going
 * first. Nothing else runs between the reads of a round, so the engine's
 * clock never goes backwards: whatever ran before them read the clock
 * earlier, and the connections run after them.
 */
static void on_after_io(uv_check_t *h)
{
	mrd_dp *dp = h->data;
	uint32_t want = dp->rx_ready;
	dp->rx_ready = 0;
	unsigned n = dp->nplanes, first = n ? dp->rx_rot++ % n : 0;
	for (int round = 0; round < RX_ROUNDS && want; round++) {
		uint32_t more = 0;
		uint64_t before = 0, after = 0, pass = 0;
		for (unsigned k = 0; k < n; k++) {
			unsigned i = (first + k) % n;
			mrd_dp_plane *pl = &dp->planes[i];
			if (!(want >> i & 1) || !pl->service.polling)
				continue;
			before += pl->rx_pkts;
			if (sock_read(&pl->service, 1, &pass))
				more |= 1u << i;
			after += pl->rx_pkts;
		}
		if (after != before)
			dp->ops.run(dp->ops.ud);
		want = more; /* the rest: when the loop polls again */
	}
}

static void on_readable(uv_poll_t *h, int status, int events)
{
	(void)events;
	mrd_sock *s = h->data;
	if (status < 0)
		return;
	mrd_dp *dp = s->plane->d->dp;
	if (s->is_service && dp->after_io_init) {
		dp->rx_ready |= 1u << s->plane->idx;
		return;
	}
	/* A source-port socket (peers answer to our service ports, so rarely
	 * anything): run the connections after every batch, not after all of
	 * them, so the ACKs for what was just read leave at once instead of
	 * waiting for the whole backlog to be copied (which can outlast the
	 * sender's RTO). */
	for (int round = 0; round < RX_ROUNDS && s->polling; round++) {
		uint64_t before = s->plane->rx_pkts;
		sock_read(s, 1, NULL);
		dp->ops.run(dp->ops.ud);
		if (s->plane->rx_pkts == before)
			break;
	}
}

/* One round of busy polling: read what has arrived, run what is due. */
static void on_spin(uv_idle_t *h)
{
	mrd_dp *dp = h->data;
	mrd *d = dp->d;
	unsigned n = dp->nplanes, first = n ? dp->rx_rot++ % n : 0;
	for (unsigned k = 0; k < n; k++) {
		unsigned i = (first + k) % n; /* in turns: see on_after_io */
		if (dp->planes[i].service.polling) {
			uint64_t b = dp->planes[i].rx_pkts;
			sock_read(&dp->planes[i].service, 1, NULL);
			if (dp->planes[i].rx_pkts != b)
				dp->ops.run(dp->ops.ud);
		}
	}
	/* The timerfd stays armed: its late expiry finds nothing due. */
	if (mrd_timer_next(&d->timer) <= uv_hrtime())
		d->timer.cb(&d->timer);
	if (uv_hrtime() >= dp->spin_until) {
		uv_idle_stop(&dp->spin);
		dp->spinning = 0;
	}
}

void mrd_dp_busy(mrd_dp *dp, uint64_t now)
{
	dp->spin_until = now + dp->busy_ns;
	if (!dp->spinning && dp->spin_init) {
		dp->spinning = 1;
		uv_idle_start(&dp->spin, on_spin);
	}
}

void mrd_dp_drain(mrd_dp *dp)
{
	for (unsigned i = 0; i < dp->nplanes; i++)
		if (dp->planes[i].service.polling)
			sock_read(&dp->planes[i].service, 1, NULL);
}
