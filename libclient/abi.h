/*
 * The application ABI between libmetaroce and metarocd. Internal: both
 * sides include it, applications never do (they see include/metaroce.h).
 *
 * Two channels per application session:
 *
 *  1. A Unix SOCK_SEQPACKET socket (service.app_socket, default
 *     MRC_DEFAULT_SOCKET) carrying control messages: one mrc_msg_hdr plus a
 *     fixed payload per datagram; file descriptors travel with SCM_RIGHTS.
 *     The daemon identifies the caller with SO_PEERCRED. Requests are
 *     answered in order, one reply each (type | MRC_MSG_REPLY, same seq,
 *     status 0 or MRC_ERR_*); the daemon also sends unsolicited
 *     MRC_MSG_EVENT messages (seq 0) for connection events, so a reader
 *     waiting for a reply queues the events it meets on the way. Closing
 *     the socket ends the session: the daemon resets its connections,
 *     unmaps its memory and frees everything it held.
 *
 *  2. Per context, one shared-memory mapping (a sealed memfd the daemon
 *     creates; the app cannot grow or shrink it) with a submission ring
 *     (SQ: app produces work requests, daemon consumes) and a completion
 *     ring (CQ: daemon produces, app consumes), and two one-way
 *     channels, each a Unix stream socket pair of which the app gets one
 *     end and the daemon keeps the other: the doorbell (app -> daemon,
 *     for the SQ) and the wakeup (daemon -> app, for the CQ). Any byte
 *     means "look at the ring"; a reader drains what is there. (ABI 1
 *     used eventfds shared with the daemon: an application could clear
 *     O_NONBLOCK on the shared open file description and make the daemon
 *     block. The two ends of a socket pair are two descriptions, and the
 *     daemon also passes MSG_DONTWAIT on its own.)
 *
 * Rings follow io_uring: power-of-two entries, free-running uint32_t head
 * and tail, entries indexed with & mask; the producer owns the tail, the
 * consumer the head; indices are published with release stores and the
 * other side's index is read with acquire loads.
 *
 * Wakeups (both rings alike): a consumer about to sleep sets
 * MRC_RING_NEED_WAKEUP in the ring's flags, issues a full fence, re-reads
 * the tail, and only then blocks on the ring's channel (clearing the flag
 * when it finds work). A producer publishes its tail, issues a full fence,
 * and writes a byte to the channel when it sees the flag. One of the two fences
 * always sees the other side's store (Dekker), so no wakeup is lost.
 * The application may skip that byte on the SQ while the daemon's head
 * is still short of the tail its last byte published: that byte is yet
 * to be answered, and the daemon stores its head before it sets the flag
 * and re-reads the tail, so the same fences make it take the new entries
 * (libmetaroce does: a program posting one request per call rang once
 * per request while the daemon was waking up). The daemon leaves the SQ's
 * flag clear while the context has sends outstanding (it looks at the SQ
 * on every turn of its loop and at least every millisecond then), so the
 * application rings only when it starts work on an idle context.
 *
 * Trust: the daemon never trusts the mapping. It keeps its own copy of the
 * indices it owns (SQ head, CQ tail) and only ever writes them; it bounds
 * every index it reads (an SQ tail more than sq_entries ahead of its head
 * ends the session) and validates every field of every SQE before use.
 * A context's CQ has at least twice the SQ's entries, and the daemon takes
 * a work request from the SQ only when the completion that request will
 * produce has room reserved: the CQ never overflows and no completion is
 * ever dropped.
 */
#ifndef MRC_ABI_H
#define MRC_ABI_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "metaroce.h"

#define MRC_ABI_MAGIC 0x4d52434d41424931ull /* "MRCMABI1" */
#define MRC_ABI_VERSION 2u /* 2: doorbell and wakeup are socket pairs */

#define MRC_CACHELINE 64

/* ---- shared memory of a context ------------------------------------------ */

#define MRC_RING_NEED_WAKEUP 0x1u

/* One ring's indices and flags; each on its own cache line. */
typedef struct mrc_ring {
	_Alignas(MRC_CACHELINE) _Atomic uint32_t head; /* consumer's */
	_Alignas(MRC_CACHELINE) _Atomic uint32_t tail; /* producer's */
	_Alignas(MRC_CACHELINE) _Atomic uint32_t flags; /* MRC_RING_NEED_WAKEUP: set by the consumer */
	uint32_t entries; /* power of two; written once by the daemon (app reads) */
	uint32_t mask;    /* entries - 1 */
} mrc_ring;

_Static_assert(sizeof(mrc_ring) == 3 * MRC_CACHELINE, "mrc_ring layout");

/* Submission entry: 64 bytes. Unused fields and reserved bytes must be 0. */
typedef struct mrc_sqe {
	uint64_t wr_id;       /* returned in the completion */
	uint8_t opcode;       /* MRC_OP_* */
	uint8_t flags;        /* MRC_SQE_* (others must be 0) */
	uint16_t stream;      /* < the connection's stream count */
	uint32_t conn;        /* connection handle (mrc_msg_event.conn) */
	uint64_t addr;        /* local buffer: app virtual address ... */
	uint32_t lkey;        /* ... in the region with this lkey */
	uint32_t len;         /* bytes; RECV: buffer size */
	uint64_t remote_addr; /* WRITE*: peer app's virtual address */
	uint32_t rkey;        /* WRITE*: peer region's rkey */
	uint32_t imm;         /* *_IMM: immediate value */
	uint8_t reserved[16];
} mrc_sqe;

_Static_assert(sizeof(mrc_sqe) == 64, "mrc_sqe layout");

/* mrc_sqe.flags. MRC_SQE_UNSIGNALED: no completion when the request
 * succeeds (a WRITE, WRITE_IMM, SEND, SEND_IMM or READ; a RECV with it is
 * MRC_WC_BAD_WR). It still gets one when it fails or is flushed, with its
 * wr_id. Completions of a stream come in posting order (SPEC 5.6: the
 * engine reports a send only after every earlier send of its stream, and
 * after a failure every other outstanding send is flushed), so a
 * successful completion of a later request on the same connection and
 * stream means every unsignaled request posted before it on that stream
 * completed successfully. The daemon takes the flag only when its HELLO
 * reply has MRC_FEAT_UNSIGNALED; an older daemon completes such an entry
 * with MRC_WC_BAD_WR (it wants flags 0), so libraries check the bit first.
 * Entries without the flag are completed as they always were. */
#define MRC_SQE_UNSIGNALED 0x1u
#define MRC_SQE_FLAGS_KNOWN MRC_SQE_UNSIGNALED

/* Completion entry: 32 bytes. */
typedef struct mrc_cqe {
	uint64_t wr_id;
	uint32_t conn;
	uint32_t byte_len;
	uint32_t imm;     /* valid with MRC_WC_WITH_IMM */
	uint16_t stream;
	uint8_t status;   /* MRC_WC_* */
	uint8_t opcode;   /* MRC_WC_OP_* */
	uint8_t flags;    /* MRC_WC_WITH_IMM */
	uint8_t reserved[7];
} mrc_cqe;

_Static_assert(sizeof(mrc_cqe) == 32, "mrc_cqe layout");

/* The start of the mapping. Everything is at the offsets it names. */
typedef struct mrc_shm_hdr {
	uint64_t magic;       /* MRC_ABI_MAGIC */
	uint32_t version;     /* MRC_ABI_VERSION */
	uint32_t ctx_id;
	uint64_t size;        /* bytes of the whole mapping */
	uint32_t sq_entries, cq_entries;
	uint32_t sqe_size, cqe_size; /* sizeof(mrc_sqe), sizeof(mrc_cqe) */
	uint64_t sq_off;      /* mrc_ring of the SQ */
	uint64_t cq_off;      /* mrc_ring of the CQ */
	uint64_t sqes_off;    /* sq_entries * mrc_sqe */
	uint64_t cqes_off;    /* cq_entries * mrc_cqe */
	uint64_t reserved[5];
} mrc_shm_hdr;

_Static_assert(sizeof(mrc_shm_hdr) == 112, "mrc_shm_hdr layout");

#define MRC_SQ_MIN 8u
#define MRC_SQ_MAX 32768u

/* ---- ring primitives (both sides) ---------------------------------------- */

/* Producer: entries free given our private tail. The acquire load pairs
 * with the consumer's release store of head in mrc_ring_consume(). */
static inline uint32_t mrc_ring_room(mrc_ring *r, uint32_t tail, uint32_t entries)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	uint32_t used = tail - head;
	return used > entries ? 0 : entries - used;
}

/* Producer: make entries before new_tail visible. The release store pairs
 * with the consumer's acquire load of tail in mrc_ring_ready(). Returns
 * nonzero when the consumer sleeps and its channel must be written: the
 * seq_cst fence pairs with the one in mrc_ring_prepare_sleep(). */
static inline int mrc_ring_publish(mrc_ring *r, uint32_t new_tail)
{
	atomic_store_explicit(&r->tail, new_tail, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&r->flags, memory_order_relaxed) & MRC_RING_NEED_WAKEUP;
}

/* Consumer: entries ready given our private head (untrusted when the
 * producer is the app: the caller bounds it). The acquire load pairs with
 * the release store in mrc_ring_publish(). */
static inline uint32_t mrc_ring_ready(mrc_ring *r, uint32_t head)
{
	return atomic_load_explicit(&r->tail, memory_order_acquire) - head;
}

/* Consumer: give entries before new_head back. The release store pairs
 * with the acquire load in mrc_ring_room(): our reads of the entries
 * happen before the producer may overwrite them. */
static inline void mrc_ring_consume(mrc_ring *r, uint32_t new_head)
{
	atomic_store_explicit(&r->head, new_head, memory_order_release);
}

/* Consumer about to sleep: set NEED_WAKEUP, fence (pairs with the fence
 * in mrc_ring_publish()), and return the entries ready now. If nonzero,
 * do not sleep: call mrc_ring_awake() and consume. */
static inline uint32_t mrc_ring_prepare_sleep(mrc_ring *r, uint32_t head)
{
	atomic_fetch_or_explicit(&r->flags, MRC_RING_NEED_WAKEUP, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&r->tail, memory_order_acquire) - head;
}

/* Consumer awake again (busy-polling needs no kicks). */
static inline void mrc_ring_awake(mrc_ring *r)
{
	atomic_fetch_and_explicit(&r->flags, ~MRC_RING_NEED_WAKEUP, memory_order_relaxed);
}

/* ---- control messages (SOCK_SEQPACKET) ------------------------------------ */

#define MRC_MSG_REPLY 0x80000000u
#define MRC_MSG_MAX 1024 /* no control datagram is larger */

enum {
	MRC_MSG_HELLO = 1,       /* first message of a session */
	MRC_MSG_CTX_CREATE = 2,  /* reply carries fds: shm, doorbell, wakeup */
	MRC_MSG_CTX_DESTROY = 3,
	MRC_MSG_MR_REG = 4,      /* request carries one fd: the memfd */
	MRC_MSG_MR_DEREG = 5,
	MRC_MSG_LISTEN = 6,
	MRC_MSG_UNLISTEN = 7,
	MRC_MSG_CONNECT = 8,
	MRC_MSG_CLOSE = 9,
	MRC_MSG_EVENT = 10,      /* daemon -> app, unsolicited, seq 0 */
};

typedef struct mrc_msg_hdr {
	uint32_t type;   /* MRC_MSG_*, | MRC_MSG_REPLY in replies */
	uint32_t len;    /* bytes of the datagram, header included */
	uint64_t seq;    /* chosen by the app, echoed in the reply; 0 in events */
	int32_t status;  /* replies: 0 or MRC_ERR_*; requests: 0 */
	uint32_t reserved;
} mrc_msg_hdr;

_Static_assert(sizeof(mrc_msg_hdr) == 24, "mrc_msg_hdr layout");

typedef struct mrc_hello_req {
	uint32_t abi_version; /* MRC_ABI_VERSION */
	uint32_t flags;       /* 0 */
	char name[32];        /* application name for operators; NUL-padded */
} mrc_hello_req;

typedef struct mrc_hello_rep {
	uint32_t abi_version; /* the daemon's */
	uint32_t session_id;
	uint32_t max_contexts, max_regions, max_conns, max_listeners;
	uint64_t max_region_bytes; /* all regions of the session together */
	uint32_t nplanes;
	uint32_t mtu;         /* smallest plane MTU: payload bytes per packet */
	uint32_t max_msg;     /* largest message in bytes */
	uint32_t features;    /* MRC_FEAT_*; 0 from daemons older than the first */
} mrc_hello_rep;

/* mrc_hello_rep.features: additions within one ABI version, so that an
 * older library still works with a newer daemon (it never asks for them)
 * and a newer library with an older daemon (it sees the bit clear). */
#define MRC_FEAT_UNSIGNALED 0x1u /* mrc_sqe.flags MRC_SQE_UNSIGNALED */

typedef struct mrc_ctx_create_req {
	uint32_t sq_entries; /* power of two, MRC_SQ_MIN..MRC_SQ_MAX */
	uint32_t cq_entries; /* 0 = 2 * sq_entries; else a power of two >= 2 * sq */
} mrc_ctx_create_req;

typedef struct mrc_ctx_create_rep {
	uint32_t ctx_id;
	uint32_t reserved;
	uint64_t shm_size; /* map this many bytes of fd 0, MAP_SHARED */
} mrc_ctx_create_rep;

typedef struct mrc_ctx_req { /* CTX_DESTROY */
	uint32_t ctx_id;
	uint32_t reserved;
} mrc_ctx_req;

/* MR_REG: the fd is a memfd sealed with at least F_SEAL_SHRINK (the daemon
 * refuses others), mapped by the app at app_addr from fd_offset. */
typedef struct mrc_mr_reg_req {
	uint64_t app_addr;
	uint64_t fd_offset; /* page-aligned */
	uint64_t len;
	uint32_t access;    /* MRC_ACCESS_* */
	uint32_t reserved;
} mrc_mr_reg_req;

typedef struct mrc_mr_reg_rep {
	uint32_t lkey; /* names the region in SQEs of this session */
	uint32_t rkey; /* for peers; random, unguessable */
} mrc_mr_reg_rep;

typedef struct mrc_mr_dereg_req {
	uint32_t lkey;
	uint32_t reserved;
} mrc_mr_dereg_req;

typedef struct mrc_listen_req {
	uint32_t service_id; /* not one of the daemon's own services */
	uint32_t ctx_id;     /* completions of accepted connections go here */
	uint16_t nstreams;   /* streams accepted per connection (0 = daemon default) */
	uint16_t reserved[3];
} mrc_listen_req;

typedef struct mrc_listen_rep {
	uint32_t listener_id;
	uint32_t reserved;
} mrc_listen_rep;

typedef struct mrc_unlisten_req {
	uint32_t listener_id;
	uint32_t reserved;
} mrc_unlisten_req;

#define MRC_HOST_MAX 255

typedef struct mrc_connect_req {
	uint32_t ctx_id;        /* completions go here */
	uint32_t service_id;
	uint16_t port;          /* peer daemon's service port; 0 = this daemon's */
	uint16_t nstreams;      /* 0 = daemon default */
	uint16_t initial_paths; /* per plane; 0 = daemon default */
	uint16_t reserved;
	uint32_t planes_mask;   /* bit i: plane i allowed; 0 = all */
	uint32_t reserved2;
	char host[MRC_HOST_MAX + 1]; /* numeric IPv4/IPv6 address, NUL-terminated */
} mrc_connect_req;

typedef struct mrc_connect_rep {
	uint32_t conn; /* handle; the outcome comes as an event */
	uint32_t reserved;
} mrc_connect_rep;

typedef struct mrc_close_req {
	uint32_t conn;
	uint32_t abort; /* 0: graceful CLOSE; 1: RESET */
} mrc_close_req;

typedef struct mrc_msg_event {
	uint32_t event;       /* MRC_EV_* */
	uint32_t conn;
	uint32_t listener_id; /* MRC_EV_INCOMING: which listener */
	int32_t status;       /* MRC_EV_FAILED/RESET: MRC_ERR_* */
	uint32_t ctx_id;
	uint16_t nstreams;
	uint16_t reserved;
	char peer[64];        /* "address port" of the peer daemon */
	char reason[64];      /* short phrase for logs */
} mrc_msg_event;

/* ---- device information (MRC_MSG_DEVINFO) ----------------------------------
 *
 * An additive request, kept apart from the list above so that it merges
 * alone: what a verbs-style device model needs about the daemon (its planes,
 * their addresses, MTU and link speed, and the UDP service port). The
 * request payload is all zero; the reply carries nplanes valid entries. */
#define MRC_MSG_DEVINFO 11
#define MRC_DEVINFO_PLANES 16

typedef struct mrc_devinfo_req {
	uint32_t flags;    /* 0 */
	uint32_t reserved; /* 0 */
} mrc_devinfo_req;

typedef struct mrc_devinfo_plane {
	uint8_t family;     /* 4 or 6 */
	uint8_t up;         /* the plane may carry data now */
	uint16_t reserved;
	uint32_t mtu;       /* payload bytes per packet */
	uint64_t speed_bps; /* link speed; 0: unknown */
	uint8_t addr[16];   /* network byte order; IPv4 in the first 4 bytes */
} mrc_devinfo_plane;

_Static_assert(sizeof(mrc_devinfo_plane) == 32, "mrc_devinfo_plane layout");

typedef struct mrc_devinfo_rep {
	uint16_t port;    /* the daemon's UDP service port */
	uint16_t nplanes; /* entries of planes[] that are valid */
	uint32_t mtu;     /* smallest plane MTU: payload bytes per packet */
	uint32_t max_msg; /* largest message in bytes */
	uint32_t reserved;
	mrc_devinfo_plane planes[MRC_DEVINFO_PLANES];
} mrc_devinfo_rep;

_Static_assert(sizeof(mrc_devinfo_rep) == 16 + 32 * MRC_DEVINFO_PLANES, "mrc_devinfo_rep layout");
_Static_assert(sizeof(mrc_msg_hdr) + sizeof(mrc_devinfo_rep) <= MRC_MSG_MAX, "devinfo fits");

/* ---- exact bounds of a region (MRC_MSG_MR_BOUNDS) ----------------------------
 *
 * An additive request: a region is registered in whole pages (MR_REG); this
 * narrows it to the bytes [addr, addr+len) (inside the region), so that
 * peers' accesses and local work requests outside them fail with the bounds
 * errors. May be repeated; each must lie inside the pages registered. */
#define MRC_MSG_MR_BOUNDS 12

typedef struct mrc_mr_bounds_req {
	uint32_t lkey;
	uint32_t reserved; /* 0 */
	uint64_t addr;     /* application virtual address */
	uint64_t len;      /* bytes, >= 1 */
} mrc_mr_bounds_req;

_Static_assert(sizeof(mrc_mr_bounds_req) == 24, "mrc_mr_bounds_req layout");

#endif
