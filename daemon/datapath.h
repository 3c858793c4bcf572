/*
 * The UDP datapath: sockets of each plane, batched receive and send.
 *
 * Each plane has a service socket bound to (plane address, service port) and
 * a pool of source-port sockets bound to (plane address, sport) for the
 * sports the engine picks for its paths (the UDP source port is a path's
 * ECMP entropy, so it must be exactly the one the engine chose). Pool
 * sockets are created on first use and cached, bounded per plane with LRU
 * eviction; a sport that cannot be bound (EADDRINUSE: another process has
 * it) is reported to the caller, which re-ports the path elsewhere. Peers
 * send everything to our service port (SPEC 2.3), but answers to unknown
 * packets come back to the sport they were sent from, so every socket is
 * read. The caller counts the paths that hold each (plane, sport)
 * (mrd_dp_port_use): a pool socket that no path holds any more (its
 * connection ended, its path moved to another port) is an orphan, closed
 * by mrd_dp_pool_sweep() sooner than one a path may still send from.
 *
 * Every socket sends ECT(0) (IP_TOS / IPV6_TCLASS): SPEC 2.4 requires it for
 * data and allows it for the rest, so no per-packet cmsg is needed, but for a
 * packet of the expedited class (SPEC 6.7, transport.expedite_dscp): it
 * carries its DSCP and ECT(0) in an IP_TOS / IPV6_TCLASS cmsg. Received
 * datagrams carry their TOS in a cmsg (IP_RECVTOS / IPV6_RECVTCLASS) and CE
 * is handed to the engine. A deep receive queue marks CE too (host-side
 * ECN: see sock_read() in datapath.c).
 *
 * Batching. Receive: recvmmsg() with UDP GRO (the kernel coalesces a burst
 * of equal-size datagrams of one flow into one buffer, split here by the
 * UDP_GRO cmsg's segment size). Send: the caller writes packets into slots
 * of a send queue (mrd_dp_tx_slot / mrd_dp_tx_commit, or with the payload
 * left where it is, mrd_dp_tx_commit_ref); mrd_dp_flush() turns
 * each run of consecutive packets to the same socket and destination with
 * one length (the last may be shorter) into one UDP GSO super-datagram
 * (UDP_SEGMENT cmsg, an iovec per packet, two for a packet whose payload is
 * by reference) and sends them with one
 * sendmmsg() per socket, the flows taking turns at going first from one
 * flush to the next. MRD_NO_GSO=1 / MRD_NO_GRO=1 in the environment turn either
 * off (for measurements); GSO is also turned off by itself if the kernel
 * refuses it. MRD_BUSY_POLL_US: see mrd_dp_busy().
 */
#ifndef MRD_DATAPATH_H
#define MRD_DATAPATH_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "addr.h"
#include "config.h"

typedef struct mrd mrd;
typedef struct mrd_dp_plane mrd_dp_plane;

#define MRD_DP_TXQ 64          /* packets queued before a flush */
#define MRD_DP_PKT_MAX (MRP_DATA_HDR_LEN + MRP_MTU_MAX)
#define MRD_DP_POOL_MAX 1024   /* source-port sockets per plane */

typedef struct mrd_sock {
	uv_poll_t poll;    /* data = this */
	int fd;
	uint16_t port;
	uint8_t is_service;
	uint8_t polling;
	mrd_dp_plane *plane;
	uint64_t last_used_ns;
} mrd_sock;

struct mrd_dp_plane {
	mrd *d;
	unsigned idx;
	mrd_sockaddr local; /* address, port 0 */
	socklen_t locallen;
	mrd_sock service;
	mrd_sock **pool;    /* MRD_DP_POOL_MAX slots */
	uint32_t npool;
	uint16_t *by_port;  /* 65536: pool index + 1, 0 = none */
	uint32_t *users;    /* 65536: paths holding the port (mrd_dp_port_use) */
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes, bind_fails;
};

/* What the datapath hands up, set at init by main.c: each datagram read
 * (input; now = uv_hrtime() when the batch holding it was read) and, once
 * a batch of them has been handed over, the call that runs the
 * connections (run). */
typedef struct mrd_dp_ops {
	void (*input)(void *ud, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
		      const uint8_t *data, size_t len, int ce, uint64_t now);
	void (*run)(void *ud);
	void *ud;
} mrd_dp_ops;

/* One-step send timestamps (mrd_dp_tx_stamp): a field of a queued packet
 * written with the clock when the packet is handed to the kernel. */
enum {
	MRD_DP_STAMP_NONE,
	MRD_DP_STAMP_SET64, /* big-endian u64 at off = the send time */
	MRD_DP_STAMP_ADD32, /* big-endian u32 at off += send time - base_ns, saturating */
};

typedef struct mrd_dp_txent {
	mrd_sock *sock;
	mrd_sockaddr dst;
	socklen_t dstlen;
	uint32_t len;       /* bytes in the slot */
	uint32_t plen;      /* and after them, the payload by reference */
	const uint8_t *payload;
	uint8_t tos;        /* IP TOS / traffic class; 0: the socket's (ECT(0)) */
	uint8_t stamp;      /* MRD_DP_STAMP_* */
	uint16_t stamp_off;
	uint64_t stamp_base_ns;
} mrd_dp_txent;

typedef struct mrd_dp {
	mrd *d;
	mrd_dp_ops ops;
	unsigned nplanes;
	mrd_dp_plane planes[MRD_MAX_PLANES];
	int gso, gro, host_ecn;
	/* send queue */
	uint32_t txn;
	uint32_t tx_stamps;  /* queued packets with a send timestamp to write */
	uint32_t tx_refs;    /* queued packets with a payload by reference */
	uint32_t tx_rot;     /* flushes with more than one flow: who goes first */
	mrd_dp_txent tx[MRD_DP_TXQ];
	uint8_t *txbuf; /* MRD_DP_TXQ * MRD_DP_PKT_MAX */
	/* receive batch */
	uint8_t *rxbuf;
	size_t rxslot; /* bytes per receive slot: 64 KiB with GRO */
	/* counters */
	uint64_t tx_calls, tx_gso_msgs, tx_dropped, tx_errors, rx_calls, rx_gro_segs;
	uint64_t rx_host_ce; /* receive batches marked CE for a deep socket queue */
	uint32_t pool_cap;   /* source-port sockets per plane now (fdguard.h) */
	/* The plane service sockets found readable in this loop pass are all
	 * read, in turns, before the connections run (on_after_io): */
	uv_check_t after_io;  /* data = this */
	uint8_t after_io_init;
	uint32_t rx_ready;    /* planes whose service socket is readable */
	uint32_t rx_rot;      /* read passes: which plane is read first */
	/* busy polling (mrd_dp_busy) */
	uv_idle_t spin;      /* active while spinning; data = this */
	uint8_t spin_init, spinning;
	uint64_t busy_ns;    /* keep polling this long after a datagram; 0 = off */
	uint64_t spin_until;
} mrd_dp;

/* Open every plane's service socket; what is read goes to ops. Returns 0
 * or -errno after logging the plane, address and error. */
int mrd_dp_init(mrd_dp *dp, mrd *d, const mrd_dp_ops *ops);

/* Close every socket (handles are freed in their close callbacks). */
void mrd_dp_close(mrd_dp *dp);

/* At most cap source-port sockets per plane (8..MRD_DP_POOL_MAX); a plane
 * above it evicts its least recently used ones at the next use, those that
 * no path holds first. */
void mrd_dp_set_pool_cap(mrd_dp *dp, uint32_t cap);

/* Close the source-port sockets unused for idle_ns, and those that no path
 * holds (mrd_dp_port_use) unused for orphan_ns; returns how many, *porphans
 * how many of them were orphans. Flushes the send queue first, so that no
 * queued packet names a closed socket. A path that sends again opens its
 * socket again. */
unsigned mrd_dp_pool_sweep(mrd_dp *dp, uint64_t now_ns, uint64_t idle_ns,
			   uint64_t orphan_ns, unsigned *porphans);

/* A path of a connection takes (delta +1) or leaves (-1) source port sport
 * on plane: the count of its holders, kept whether or not its socket is
 * open now. Every +1 must be matched by one -1. */
void mrd_dp_port_use(mrd_dp *dp, unsigned plane, uint16_t sport, int delta);

/* The paths holding (plane, sport) now. */
uint32_t mrd_dp_port_users(const mrd_dp *dp, unsigned plane, uint16_t sport);

/* The pool socket of (plane, sport), created and bound on first use; NULL
 * with *perr = -errno when it cannot be bound. */
mrd_sock *mrd_dp_sport(mrd_dp *dp, unsigned plane, uint16_t sport, int *perr);

/* A buffer of MRD_DP_PKT_MAX bytes for the next packet (flushes first when
 * the queue is full). */
uint8_t *mrd_dp_tx_slot(mrd_dp *dp);

/* Queue the packet written into the last slot. */
void mrd_dp_tx_commit(mrd_dp *dp, mrd_sock *s, const mrd_sockaddr *dst,
		      socklen_t dstlen, uint32_t len);

/* Queue the packet written into the last slot (len bytes: its headers),
 * followed on the wire by plen bytes at payload, which are not copied: the
 * memory must stay as it is until the packet is sent, that is until the next
 * mrd_dp_flush() (mrp_conn_write_pkt_ref()). Whoever is about to hand such
 * memory back to its owner or free it calls mrd_dp_flush_refs() first. */
void mrd_dp_tx_commit_ref(mrd_dp *dp, mrd_sock *s, const mrd_sockaddr *dst,
			  socklen_t dstlen, uint32_t len, const uint8_t *payload,
			  uint32_t plen);

/* mrd_dp_flush() if a queued packet's payload is by reference. */
void mrd_dp_flush_refs(mrd_dp *dp);

/* Send the packet queued last with this DSCP (1-63; ECN ECT(0) as every
 * packet) instead of the socket's 0: the expedited class (SPEC 6.7). A GSO
 * run holds packets of one DSCP only. */
void mrd_dp_tx_dscp(mrd_dp *dp, uint8_t dscp);

/* Mark the packet queued last for a one-step send timestamp: when
 * mrd_dp_flush() hands it to the kernel, the field at off (which must lie
 * inside the packet) is written with the clock read just before that
 * socket's sendmmsg(). SET64 writes the time, ADD32 adds the time since
 * base_ns (a time at or before the queueing) to a held-for field. So a
 * timestamp names the moment the packet left, not the moment it was written:
 * a flush sends one socket after another, and the packets of the later
 * sockets (other paths, other planes) would otherwise carry the earlier
 * sockets' send calls, and any preemption between them, as if it were time
 * on the wire. */
void mrd_dp_tx_stamp(mrd_dp *dp, int kind, uint16_t off, uint64_t base_ns);

/* Send one packet at once (handshake answers): queue and flush. */
void mrd_dp_send_now(mrd_dp *dp, mrd_sock *s, const mrd_sockaddr *dst,
		     socklen_t dstlen, const uint8_t *pkt, uint32_t len);

/* Read what is already waiting on the service sockets (one batch each).
 * Called before running expired engine timers, so that an ACK that has
 * arrived is seen before its packet's retransmission timer declares a loss
 * (the timerfd and the sockets become readable in the same epoll round, in
 * no particular order). */
void mrd_dp_drain(mrd_dp *dp);

/* Busy polling, off by default: MRD_BUSY_POLL_US=N in the environment keeps
 * the loop from sleeping for N microseconds after each datagram received:
 * an idle handle polls the service sockets and runs the engine deadlines
 * that are due, instead of waiting for a wake-up (a context switch costs
 * tens of microseconds on a busy host, more than a loopback RTT). Measured
 * on loopback (bench/README.md): with transport.burst_pkts 16 and
 * ack_every_pkts 16, 30 us raised goodput and halved the RTOs; with the
 * default bursts of 4 packets it lowered goodput (the pacing deadlines, met
 * exactly, send 4 packets per system call). Called by the receive path. */
void mrd_dp_busy(mrd_dp *dp, uint64_t now);

/* Send everything queued: one sendmmsg() per socket, the packets of each
 * flow (socket and destination) in the order queued, the flow that goes
 * first rotating from one flush to the next; send timestamps
 * (mrd_dp_tx_stamp) are written just before their socket's call. */
void mrd_dp_flush(mrd_dp *dp);

#endif
