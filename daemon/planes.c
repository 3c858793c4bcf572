#include "planes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include "log.h"
#include "mrd.h"

#define NL_BUF 32768          /* a dump message fits (MNL_SOCKET_DUMP_SIZE) */
#define NL_RCVBUF (1 << 20)   /* notifications queued before an overrun */
#define NL_READS_PER_POLL 64
#define DUMP_TIMEOUT_S 2
#define LINKS_MAX 4096        /* links remembered (flags, name) */

/* Links seen in dumps and notifications: what an address-mapped plane
 * needs when its address shows up on an interface. */
typedef struct mrd_plane_link {
	int ifindex;
	uint8_t up;
	uint32_t mtu;
	char name[IFNAMSIZ];
} link_ent;

static link_ent *link_find(mrd_planes *P, int ifindex, int create)
{
	for (unsigned i = 0; i < P->nlinks; i++)
		if (P->links[i].ifindex == ifindex)
			return &P->links[i];
	if (!create || P->nlinks >= LINKS_MAX)
		return NULL;
	if (!P->links && !(P->links = calloc(LINKS_MAX, sizeof(*P->links))))
		return NULL;
	link_ent *l = &P->links[P->nlinks++];
	memset(l, 0, sizeof(*l));
	l->ifindex = ifindex;
	return l;
}

static void link_forget(mrd_planes *P, int ifindex)
{
	for (unsigned i = 0; i < P->nlinks; i++)
		if (P->links[i].ifindex == ifindex) {
			P->links[i] = P->links[--P->nlinks];
			return;
		}
}

/* ---- link speed ---------------------------------------------------------- */

static int genl_family_cb(const struct nlmsghdr *nlh, void *data)
{
	uint16_t *id = data;
	struct nlattr *a;
	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		if (mnl_attr_get_type(a) == CTRL_ATTR_FAMILY_ID &&
		    mnl_attr_validate(a, MNL_TYPE_U16) >= 0)
			*id = mnl_attr_get_u16(a);
	}
	return MNL_CB_OK;
}

static int linkmodes_cb(const struct nlmsghdr *nlh, void *data)
{
	uint32_t *mbps = data;
	struct nlattr *a;
	mnl_attr_for_each(a, nlh, sizeof(struct genlmsghdr)) {
		if (mnl_attr_get_type(a) == ETHTOOL_A_LINKMODES_SPEED &&
		    mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
			*mbps = mnl_attr_get_u32(a);
	}
	return MNL_CB_OK;
}

/* One request, one answer, on a blocking socket with a receive timeout. */
static int genl_call(struct mnl_socket *nl, char *buf, struct nlmsghdr *nlh,
		     mnl_cb_t cb, void *data)
{
	unsigned portid = mnl_socket_get_portid(nl);
	uint32_t seq = nlh->nlmsg_seq;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	ssize_t n = mnl_socket_recvfrom(nl, buf, NL_BUF);
	if (n < 0)
		return -errno;
	if (mnl_cb_run(buf, (size_t)n, seq, portid, cb, data) < 0)
		return -errno;
	return 0;
}

/* The link speed in Mbit/s from ethtool netlink; 0 when unknown. */
static uint32_t speed_ethtool(int ifindex)
{
	static int family = 0; /* 0: not asked yet; -1: the kernel has none */
	if (family < 0 || ifindex <= 0)
		return 0;
	struct mnl_socket *nl = mnl_socket_open(NETLINK_GENERIC);
	if (!nl)
		return 0;
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint32_t mbps = 0;
	char *buf = malloc(NL_BUF);
	if (!buf || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
		goto out;
	if (family == 0) {
		uint16_t id = 0;
		struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
		nlh->nlmsg_type = GENL_ID_CTRL;
		nlh->nlmsg_flags = NLM_F_REQUEST;
		nlh->nlmsg_seq = 1;
		struct genlmsghdr *gh = mnl_nlmsg_put_extra_header(nlh, sizeof(*gh));
		gh->cmd = CTRL_CMD_GETFAMILY;
		gh->version = 1;
		mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, ETHTOOL_GENL_NAME);
		if (genl_call(nl, buf, nlh, genl_family_cb, &id) < 0 || !id) {
			family = -1;
			mrd_debug("planes: no ethtool netlink in this kernel: link speed from sysfs");
			goto out;
		}
		family = id;
	}
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (uint16_t)family;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = 2;
	struct genlmsghdr *gh = mnl_nlmsg_put_extra_header(nlh, sizeof(*gh));
	gh->cmd = ETHTOOL_MSG_LINKMODES_GET;
	gh->version = ETHTOOL_GENL_VERSION;
	struct nlattr *nest = mnl_attr_nest_start(nlh, ETHTOOL_A_LINKMODES_HEADER);
	mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_DEV_INDEX, (uint32_t)ifindex);
	mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_COMPACT_BITSETS);
	mnl_attr_nest_end(nlh, nest);
	uint32_t v = 0;
	if (genl_call(nl, buf, nlh, linkmodes_cb, &v) == 0 && v != (uint32_t)SPEED_UNKNOWN)
		mbps = v;
out:
	free(buf);
	mnl_socket_close(nl);
	return mbps;
}

/* The fallback: /sys/class/net/IF/speed (Mbit/s; -1 or unreadable when the
 * driver does not know). Only right when sysfs belongs to our namespace. */
static uint32_t speed_sysfs(const char *ifname)
{
	char path[64 + IFNAMSIZ];
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	long v = -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v > 0 && v < 100000000 ? (uint32_t)v : 0;
}

static void read_speed(mrd_plane_state *s)
{
	mrd_planes *P = s->owner;
	const mrd_plane *cp = &P->d->cfg.planes[s->idx];
	if (cp->link_speed_bps) {
		s->speed_bps = cp->link_speed_bps;
		s->speed_source = "config";
		return;
	}
	uint32_t mbps = 0;
	if (s->ifindex > 0 && (mbps = speed_ethtool(s->ifindex)) != 0) {
		s->speed_source = "ethtool";
	} else if (s->ifname[0] && (mbps = speed_sysfs(s->ifname)) != 0) {
		s->speed_source = "sysfs";
	} else {
		s->speed_source = "unknown";
	}
	s->speed_bps = (uint64_t)mbps * 1000000;
}

/* ---- state --------------------------------------------------------------- */

/* The plane's state from what netlink says; *why says why it is down. */
static int raw_up(const mrd_plane_state *s, const char **why)
{
	mrd_planes *P = s->owner;
	const mrd_plane *cp = &P->d->cfg.planes[s->idx];
	if (cp->interface[0] && s->ifindex <= 0) {
		*why = "interface not found";
		return 0;
	}
	if (P->addr_seen[s->idx] && !s->addr_present) {
		*why = "address removed";
		return 0;
	}
	if (s->ifindex <= 0)
		return 1; /* unwatched */
	if (!s->link_up) {
		*why = "link down";
		return 0;
	}
	return 1;
}

static void record(const mrd_plane_state *s, mrd_store_event_kind kind, const char *detail)
{
	mrd_planes *P = s->owner;
	/* The store's log, the monitors, a drill (the event bus). */
	mrd_emit(&P->d->bus, kind, (int)s->idx, P->d->cfg.planes[s->idx].name, 0, -1, detail);
}

static void set_down(mrd_plane_state *s, const char *why)
{
	mrd_planes *P = s->owner;
	mrd *d = P->d;
	s->up = 0;
	s->downs++;
	s->changed_ns = uv_hrtime();
	snprintf(s->reason, sizeof(s->reason), "%s", why);
	/* The engine first: the log and the store follow. */
	P->ops.changed(P->ops.ud, s->idx, 0);
	char detail[96];
	snprintf(detail, sizeof(detail), "%s (%s)", why, s->ifname[0] ? s->ifname : "-");
	mrd_warn("plane %s: down: %s", d->cfg.planes[s->idx].name, detail);
	record(s, MRD_STORE_EV_PLANE_DOWN, detail);
}

static void set_up(mrd_plane_state *s)
{
	mrd_planes *P = s->owner;
	mrd *d = P->d;
	s->up = 1;
	s->ups++;
	s->changed_ns = uv_hrtime();
	s->reason[0] = 0;
	read_speed(s);
	P->ops.changed(P->ops.ud, s->idx, 1);
	char detail[96];
	snprintf(detail, sizeof(detail), "link up (%s), %llu Mbit/s (%s)",
		 s->ifname[0] ? s->ifname : "-", (unsigned long long)(s->speed_bps / 1000000),
		 s->speed_source);
	mrd_info("plane %s: up after %d ms stable: %s; paths probe before data",
		 d->cfg.planes[s->idx].name, MRD_PLANE_DEBOUNCE_MS, detail);
	record(s, MRD_STORE_EV_PLANE_UP, detail);
}

static void on_debounce(uv_timer_t *t)
{
	mrd_plane_state *s = t->data;
	s->pending = 0;
	const char *why = NULL;
	if (!s->up && raw_up(s, &why))
		set_up(s);
}

/* Apply what netlink now says: down at once, up after the debounce. */
static void evaluate(mrd_plane_state *s)
{
	mrd_planes *P = s->owner;
	const char *why = NULL;
	if (!raw_up(s, &why)) {
		if (s->pending) {
			uv_timer_stop(&s->debounce);
			s->pending = 0;
			s->flaps++;
			mrd_info("plane %s: %s again while coming up (flap)",
				 P->d->cfg.planes[s->idx].name, why);
		}
		if (s->up)
			set_down(s, why);
		return;
	}
	if (!s->up && !s->pending) {
		s->pending = 1;
		uv_timer_start(&s->debounce, on_debounce, MRD_PLANE_DEBOUNCE_MS, 0);
	}
}

static void evaluate_all(mrd_planes *P)
{
	for (unsigned i = 0; i < P->nplanes; i++)
		evaluate(&P->st[i]);
}

/* ---- rtnetlink messages -------------------------------------------------- */

static void on_link(mrd_planes *P, const struct nlmsghdr *nlh)
{
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifi)))
		return;
	const char *name = NULL;
	uint32_t mtu = 0;
	struct nlattr *a;
	mnl_attr_for_each(a, nlh, sizeof(*ifi)) {
		if (mnl_attr_get_type(a) == IFLA_IFNAME && mnl_attr_validate(a, MNL_TYPE_STRING) >= 0)
			name = mnl_attr_get_str(a);
		else if (mnl_attr_get_type(a) == IFLA_MTU && mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
			mtu = mnl_attr_get_u32(a);
	}
	int gone = nlh->nlmsg_type == RTM_DELLINK;
	uint8_t up = !gone && (ifi->ifi_flags & IFF_UP) && (ifi->ifi_flags & IFF_RUNNING);
	if (gone) {
		link_forget(P, ifi->ifi_index);
	} else {
		link_ent *l = link_find(P, ifi->ifi_index, 1);
		if (l) {
			l->up = up;
			if (mtu)
				l->mtu = mtu;
			if (name)
				snprintf(l->name, sizeof(l->name), "%s", name);
		}
	}
	for (unsigned i = 0; i < P->nplanes; i++) {
		mrd_plane_state *s = &P->st[i];
		const mrd_plane *cp = &P->d->cfg.planes[i];
		if (cp->interface[0] && name && strcmp(cp->interface, name) == 0) {
			s->ifindex = gone ? 0 : ifi->ifi_index; /* also a re-created one */
			s->seen = 1;
		} else if (s->ifindex != ifi->ifi_index) {
			continue;
		}
		if (gone) {
			s->ifindex = 0;
			s->addr_present = 0;
		}
		if (name && !gone)
			snprintf(s->ifname, sizeof(s->ifname), "%s", name);
		if (mtu)
			s->link_mtu = mtu;
		s->link_up = up;
	}
}

static void on_addr(mrd_planes *P, const struct nlmsghdr *nlh)
{
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifa)))
		return;
	const void *local = NULL, *address = NULL;
	struct nlattr *a;
	mnl_attr_for_each(a, nlh, sizeof(*ifa)) {
		uint16_t t = mnl_attr_get_type(a);
		if (t == IFA_LOCAL)
			local = a;
		else if (t == IFA_ADDRESS)
			address = a;
	}
	const struct nlattr *at = local ? local : address;
	if (!at)
		return;
	size_t alen = ifa->ifa_family == AF_INET ? 4 : ifa->ifa_family == AF_INET6 ? 16 : 0;
	if (!alen || mnl_attr_get_payload_len(at) != alen)
		return;
	const uint8_t *bytes = mnl_attr_get_payload(at);
	int gone = nlh->nlmsg_type == RTM_DELADDR;
	for (unsigned i = 0; i < P->nplanes; i++) {
		mrd_plane_state *s = &P->st[i];
		const mrd_plane *cp = &P->d->cfg.planes[i];
		if (cp->address.family != ifa->ifa_family || memcmp(cp->address.bytes, bytes, alen))
			continue;
		int idx = (int)ifa->ifa_index;
		if (cp->interface[0] && idx != s->ifindex)
			continue; /* on another interface than the configured one */
		if (gone) {
			if (idx == s->ifindex)
				s->addr_present = 0;
			continue;
		}
		s->addr_present = 1;
		P->addr_seen[i] = 1;
		if (!cp->interface[0] && s->ifindex != idx) {
			s->ifindex = idx;
			const link_ent *l = link_find(P, idx, 0);
			s->link_up = l ? l->up : 1;
			s->link_mtu = l ? l->mtu : 0;
			if (l)
				snprintf(s->ifname, sizeof(s->ifname), "%s", l->name);
			else
				s->ifname[0] = 0;
		}
	}
}

static int nl_msg_cb(const struct nlmsghdr *nlh, void *data)
{
	mrd_planes *P = data;
	P->msgs++;
	switch (nlh->nlmsg_type) {
	case RTM_NEWLINK:
	case RTM_DELLINK:
		on_link(P, nlh);
		break;
	case RTM_NEWADDR:
	case RTM_DELADDR:
		on_addr(P, nlh);
		break;
	}
	return MNL_CB_OK;
}

/* ---- dumps --------------------------------------------------------------- */

static int dump_one(mrd_planes *P, struct mnl_socket *nl, char *buf, int type, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (uint16_t)type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	if (type == RTM_GETLINK) {
		struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
		ifi->ifi_family = AF_UNSPEC;
	} else {
		struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
		ifa->ifa_family = AF_UNSPEC;
	}
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	unsigned portid = mnl_socket_get_portid(nl);
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, NL_BUF);
		if (n < 0)
			return -errno;
		int rv = mnl_cb_run(buf, (size_t)n, seq, portid, nl_msg_cb, P);
		if (rv < 0)
			return -errno;
		if (rv == MNL_CB_STOP)
			return 0;
	}
}

/* Read the whole state again (start, overrun). The notifications still
 * queued on the watching socket are older than the dump: discard them. */
static int resync(mrd_planes *P)
{
	char *buf = malloc(NL_BUF);
	if (!buf)
		return -ENOMEM;
	/* Bounded: under a storm of notifications the dump is read anyway. */
	for (int i = 0; P->nl && i < 4096; i++)
		if (mnl_socket_recvfrom(P->nl, buf, NL_BUF) < 0 && errno != ENOBUFS)
			break;
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	int rv = nl ? 0 : -errno;
	if (nl) {
		struct timeval tv = {.tv_sec = DUMP_TIMEOUT_S, .tv_usec = 0};
		setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
			rv = -errno;
	}
	if (rv == 0) {
		P->nlinks = 0;
		for (unsigned i = 0; i < P->nplanes; i++) {
			P->st[i].seen = 0;
			P->st[i].addr_present = 0;
			if (P->d->cfg.planes[i].interface[0])
				P->st[i].ifindex = 0;
		}
		uint32_t seq = (uint32_t)time(NULL);
		if ((rv = dump_one(P, nl, buf, RTM_GETLINK, seq)) == 0)
			rv = dump_one(P, nl, buf, RTM_GETADDR, seq + 1);
		/* An address-mapped plane whose address is gone is unmapped
		 * (addr_seen keeps it down until the address is back). */
		for (unsigned i = 0; i < P->nplanes; i++) {
			mrd_plane_state *s = &P->st[i];
			if (!P->d->cfg.planes[i].interface[0] && !s->addr_present)
				s->ifindex = 0;
		}
	}
	if (nl)
		mnl_socket_close(nl);
	free(buf);
	P->resyncs++;
	return rv;
}

/* ---- the watching socket ------------------------------------------------- */

/* Notifications were lost: read the whole state again. */
static void overrun(mrd_planes *P)
{
	static uint64_t last_ns, quiet;
	uint64_t now = uv_hrtime();
	P->overruns++;
	if (now - last_ns >= 1000000000ull || !last_ns) {
		mrd_warn("planes: netlink overrun: notifications lost; reading the state "
			 "again (%llu overrun(s) not logged before)", (unsigned long long)quiet);
		last_ns = now;
		quiet = 0;
	} else {
		quiet++;
	}
	int rv = resync(P);
	if (rv < 0)
		mrd_warn("planes: resync: %s", strerror(-rv));
	evaluate_all(P);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	mrd_planes *P = h->data;
	(void)events;
	if (status < 0) {
		/* libuv stops the handle on POLLERR: a pending socket error,
		 * for netlink an overrun (ENOBUFS). Take the error (SO_ERROR
		 * clears it), read the state again and watch again. */
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(mnl_socket_get_fd(P->nl), SOL_SOCKET, SO_ERROR, &err, &len);
		if (err != ENOBUFS) {
			P->errors++;
			mrd_warn("planes: netlink socket: %s; reading the state again",
				 strerror(err ? err : EIO));
		}
		overrun(P);
		uv_poll_start(h, UV_READABLE, on_poll);
		return;
	}
	char *buf = malloc(NL_BUF);
	if (!buf)
		return;
	for (int i = 0; i < NL_READS_PER_POLL; i++) {
		ssize_t n = mnl_socket_recvfrom(P->nl, buf, NL_BUF);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			if (errno == ENOBUFS) {
				overrun(P);
				break;
			}
			P->errors++;
			break;
		}
		if (mnl_cb_run(buf, (size_t)n, 0, 0, nl_msg_cb, P) < 0)
			P->errors++;
		evaluate_all(P);
	}
	free(buf);
}

static void log_plane(const mrd_plane_state *s)
{
	mrd_planes *P = s->owner;
	const mrd_plane *cp = &P->d->cfg.planes[s->idx];
	const char *why = NULL;
	int up = raw_up(s, &why);
	if (s->ifindex <= 0 && up) {
		mrd_info("plane %s: no interface holds its address: not watched by netlink",
			 cp->name);
		return;
	}
	mrd_info("plane %s: interface %s (ifindex %d, mtu %u): %s%s%s, %llu Mbit/s (%s)",
		 cp->name, s->ifname[0] ? s->ifname : cp->interface, s->ifindex, s->link_mtu,
		 up ? "up" : "down", up ? "" : ": ", up ? "" : why,
		 (unsigned long long)(s->speed_bps / 1000000), s->speed_source);
	/* Packets go out with DF (SPEC 2.1): a payload that does not fit the
	 * link is never delivered. */
	uint32_t ip = cp->address.family == AF_INET6 ? 40 : 20;
	uint32_t need = cp->mtu + MRP_DATA_HDR_LEN + ip + 8;
	if (s->link_mtu && need > s->link_mtu)
		mrd_warn("plane %s: planes[%u].mtu %u needs a link MTU of %u, but %s has %u: "
			 "full-size packets will not be sent", cp->name, s->idx, cp->mtu, need,
			 s->ifname, s->link_mtu);
}

int mrd_planes_init(mrd *d, const mrd_planes_ops *ops)
{
	mrd_planes *P = d->planes;
	memset(P, 0, sizeof(*P));
	P->ops = *ops;
	memset(P->addr_seen, 0, sizeof(P->addr_seen));
	P->nlinks = 0;
	P->d = d;
	P->nplanes = d->cfg.nplanes;
	for (unsigned i = 0; i < P->nplanes; i++) {
		mrd_plane_state *s = &P->st[i];
		s->owner = P;
		s->idx = i;
		s->up = 1;
		s->speed_source = "unknown";
		uv_timer_init(d->loop, &s->debounce);
		s->debounce.data = s;
	}
	P->timers = 1;
	P->inited = 1;
	P->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_NONBLOCK | SOCK_CLOEXEC);
	int rv = P->nl ? 0 : -errno;
	if (rv == 0) {
		/* MRD_NETLINK_RCVBUF (bytes) is for tests that provoke an
		 * overrun; root may go beyond net.core.rmem_max. */
		int sz = NL_RCVBUF;
		const char *e = getenv("MRD_NETLINK_RCVBUF");
		if (e && atoi(e) > 0)
			sz = atoi(e);
		int fd = mnl_socket_get_fd(P->nl);
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
		if (mnl_socket_bind(P->nl, RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR,
				    MNL_SOCKET_AUTOPID) < 0)
			rv = -errno;
	}
	if (rv == 0 && (rv = resync(P)) == 0) {
		rv = uv_poll_init(d->loop, &P->poll, mnl_socket_get_fd(P->nl));
		if (rv == 0) {
			P->poll.data = P;
			uv_poll_start(&P->poll, UV_READABLE, on_poll);
			P->polling = 1;
		}
	}
	if (rv < 0) {
		mrd_warn("planes: netlink: %s: plane links are not watched", strerror(-rv));
		if (P->nl)
			mnl_socket_close(P->nl);
		P->nl = NULL;
	}
	/* The state at start is taken as it is: no debounce, no events. */
	for (unsigned i = 0; i < P->nplanes; i++) {
		mrd_plane_state *s = &P->st[i];
		const char *why = NULL;
		s->up = (uint8_t)(P->nl ? raw_up(s, &why) : 1);
		if (!s->up)
			snprintf(s->reason, sizeof(s->reason), "%s", why);
		s->changed_ns = uv_hrtime();
		read_speed(s);
		log_plane(s);
	}
	return 0;
}

static void on_poll_closed(uv_handle_t *h)
{
	mrd_planes *P = h->data;
	if (P->nl)
		mnl_socket_close(P->nl); /* after libuv let go of the fd */
	P->nl = NULL;
}

void mrd_planes_close(mrd *d)
{
	mrd_planes *P = d->planes;
	if (!P->inited)
		return;
	if (P->timers) {
		for (unsigned i = 0; i < P->nplanes; i++)
			uv_close((uv_handle_t *)&P->st[i].debounce, NULL);
		P->timers = 0;
	}
	if (P->polling) {
		P->polling = 0;
		uv_close((uv_handle_t *)&P->poll, on_poll_closed);
	} else if (P->nl) {
		mnl_socket_close(P->nl);
		P->nl = NULL;
	}
	free(P->links);
	P->links = NULL;
	P->nlinks = 0;
	P->inited = 0;
}

int mrd_planes_up(const mrd *d, unsigned plane)
{
	mrd_planes *P = d->planes;
	return !P->inited || plane >= P->nplanes || P->st[plane].up;
}

uint64_t mrd_planes_speed(const mrd *d, unsigned plane)
{
	mrd_planes *P = d->planes;
	return P->inited && plane < P->nplanes ? P->st[plane].speed_bps : 0;
}

const char *mrd_planes_state_name(const mrd *d, unsigned plane)
{
	mrd_planes *P = d->planes;
	if (!P->inited || plane >= P->nplanes)
		return "unwatched";
	const mrd_plane_state *s = &P->st[plane];
	if (!s->up)
		return "down";
	return s->ifindex > 0 && P->nl ? "up" : "unwatched";
}

const mrd_plane_state *mrd_planes_get(const mrd *d, unsigned plane)
{
	mrd_planes *P = d->planes;
	return P->inited && plane < P->nplanes ? &P->st[plane] : NULL;
}

const mrd_planes *mrd_planes_watch(const mrd *d)
{
	mrd_planes *P = d->planes;
	return P->inited ? P : NULL;
}
