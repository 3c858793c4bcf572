/*
 * Planes as the host sees them: links, addresses and link speed, watched
 * through rtnetlink (libmnl) inside the libuv loop.
 *
 * Each configured plane is mapped to a kernel interface: the one named by
 * planes[].interface, or else the one that holds planes[].address. The
 * plane is up when that link is administratively up and running (IFF_UP and
 * IFF_RUNNING: carrier, oper state up) and, when an address is configured,
 * the interface still holds it.
 *
 *   down   applied at once: every connection gets MRP_PLANE_DOWN for the
 *          plane (its paths there are disabled, their packets in flight are
 *          sent again elsewhere), the change is logged and recorded in the
 *          store ("plane.down");
 *   up     applied only after the link has stayed up for
 *          MRD_PLANE_DEBOUNCE_MS (a flapping link does not carry data); then
 *          MRP_PLANE_UP, and the engine probes each path (a new generation)
 *          before it carries data again ("plane.up").
 *
 * A plane whose interface cannot be found (a loopback address such as
 * 127.1.2.3 that no interface holds by itself) is "unwatched": it is taken
 * as up and never failed by netlink; its paths' own timers still catch it.
 *
 * The socket listens to RTMGRP_LINK and the IPv4/IPv6 address groups. The
 * state is read with a dump (RTM_GETLINK, RTM_GETADDR) at start and again
 * after an overrun (ENOBUFS: the kernel dropped notifications), on a second,
 * short-lived socket, after the pending notifications have been discarded.
 *
 * Link speed: planes[].link_speed when configured; otherwise the kernel's,
 * asked with ethtool netlink (ETHTOOL_MSG_LINKMODES_GET) and, where that is
 * not available, read from /sys/class/net/IF/speed. It is read at start and
 * each time a plane comes up; new connections pace each plane to it.
 */
#ifndef MRD_PLANES_H
#define MRD_PLANES_H

#include <net/if.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"

typedef struct mrd mrd;

/* How long a link must stay up before the plane carries data again. */
#define MRD_PLANE_DEBOUNCE_MS 100

typedef struct mrd_plane_state {
	struct mrd_planes *owner;
	unsigned idx;
	int ifindex;               /* 0: no interface found (unwatched) */
	char ifname[IFNAMSIZ];
	uint8_t link_up;           /* IFF_UP && IFF_RUNNING, as last reported */
	uint8_t addr_present;      /* the configured address is on ifindex */
	uint8_t up;                /* the state the engine was given */
	uint8_t pending;           /* debounce timer running */
	uint8_t seen;              /* found in the last dump */
	uint32_t link_mtu;         /* the interface's MTU (IFLA_MTU); 0: unknown */
	uint64_t speed_bps;        /* 0: unknown */
	const char *speed_source;  /* "config", "ethtool", "sysfs", "unknown" */
	uint64_t changed_ns;       /* uv_hrtime() of the last up/down */
	uint64_t downs, ups, flaps; /* flaps: went down again while debouncing */
	char reason[48];           /* why it is down */
	uv_timer_t debounce;       /* data = this */
} mrd_plane_state;

/* What the planes hand up, set at init by main.c: a plane went down or
 * came up (the engine is told before the log and the event). */
typedef struct mrd_planes_ops {
	void (*changed)(void *ud, unsigned plane, int up);
	void *ud;
} mrd_planes_ops;

typedef struct mrd_planes {
	mrd *d;
	mrd_planes_ops ops;
	struct mnl_socket *nl; /* NULL when netlink is unavailable */
	uv_poll_t poll;
	uint8_t polling, timers;
	unsigned nplanes;
	mrd_plane_state st[MRD_MAX_PLANES];
	uint64_t msgs, overruns, resyncs, errors;
	int inited; /* between mrd_planes_init() and mrd_planes_close() */
	/* Links seen in dumps and notifications (planes.c). */
	struct mrd_plane_link *links;
	unsigned nlinks;
	uint8_t addr_seen[MRD_MAX_PLANES]; /* the address was on the interface once */
} mrd_planes;

/* The watcher's state: owned by main.c, reached as d->planes. Before
 * mrd_planes_init() (and after mrd_planes_close()) every plane is up. */

/* Open the netlink socket, read the current state and start watching.
 * Without netlink (a failure is logged) every plane stays up. Returns 0. */
int mrd_planes_init(mrd *d, const mrd_planes_ops *ops);

/* Stop watching (handles are freed in their close callbacks). */
void mrd_planes_close(mrd *d);

/* Whether the plane may carry data (1 when unwatched). */
int mrd_planes_up(const mrd *d, unsigned plane);

/* The plane's link speed in bit/s, 0 when unknown. */
uint64_t mrd_planes_speed(const mrd *d, unsigned plane);

/* "up", "down", "unwatched" */
const char *mrd_planes_state_name(const mrd *d, unsigned plane);

/* The plane's state for `show planes`; NULL before mrd_planes_init(). */
const mrd_plane_state *mrd_planes_get(const mrd *d, unsigned plane);

/* The watcher itself (counters for `show planes`); NULL before init. */
const mrd_planes *mrd_planes_watch(const mrd *d);

#endif
