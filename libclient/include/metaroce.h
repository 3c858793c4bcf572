/*
 * metaroce.h: the MetaRoCE client library (libmetaroce), the one installed
 * header. Applications attach to the local metarocd, register memory, open
 * connections to peer applications through both daemons and post work
 * requests on shared-memory rings.
 *
 * This first part fixes the values that cross the library/daemon boundary
 * (they are part of the shared-memory ABI, libclient/abi.h, and must never
 * be renumbered). The functions follow below it.
 */
#ifndef METAROCE_H
#define METAROCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of library calls and of the daemon's replies: 0 or one of
 * these negative values. X(NAME, value, message). */
#define MRC_ERRNO_MAP(X)                                                          \
	X(INVAL, -1, "invalid argument")                                          \
	X(NOMEM, -2, "out of memory")                                             \
	X(LIMIT, -3, "a per-application limit of the daemon was reached")         \
	X(PERM, -4, "permission denied by the daemon")                            \
	X(NOENT, -5, "no such object (context, region, connection or listener)")  \
	X(BUSY, -6, "in use")                                                     \
	X(VERSION, -7, "library and daemon speak different ABI versions")         \
	X(DAEMON, -8, "the daemon is not running or went away")                   \
	X(TIMEOUT, -9, "timed out")                                               \
	X(UNREACHABLE, -10, "the peer daemon did not answer")                     \
	X(REJECTED, -11, "the peer refused the connection (no such service?)")    \
	X(CLOSED, -12, "the connection is closed")                                \
	X(AGAIN, -13, "the submission ring is full: reap completions and retry")  \
	X(IO, -14, "system call failed")                                          \
	X(PROTO, -15, "the daemon sent something this library does not understand")

enum {
#define MRC_ERR_ENUM(name, val, msg) MRC_ERR_##name = (val),
	MRC_ERRNO_MAP(MRC_ERR_ENUM)
#undef MRC_ERR_ENUM
};

/* Completion statuses. Values 0-8 are the engine's (proto/conn.h
 * MRP_WC_*), the rest are the daemon's checks of a work request. */
#define MRC_WC_STATUS_MAP(X)                                                     \
	X(SUCCESS, 0, "success")                                                 \
	X(REM_ACCESS, 1, "remote access error: invalid rkey or access rights")  \
	X(REM_BOUNDS, 2, "remote bounds error: outside the region or receive buffer") \
	X(RNR_RETRY_EXC, 3, "receiver not ready beyond the retry count")        \
	X(RETRY_EXC, 4, "retry budget exhausted: the peer does not answer")     \
	X(RESET, 5, "connection reset by peer")                                  \
	X(FLUSHED, 6, "flushed: the connection closed")                          \
	X(LOC_LEN, 7, "local length error: message larger than the receive buffer") \
	X(REM_INVALID, 8, "remote invalid request: unknown stream or malformed")  \
	X(LOC_PROT, 9, "local protection error: lkey, bounds or access of the local buffer") \
	X(BAD_WR, 10, "invalid work request: opcode, stream, connection or reserved fields")

enum {
#define MRC_WC_ENUM(name, val, msg) MRC_WC_##name = (val),
	MRC_WC_STATUS_MAP(MRC_WC_ENUM)
#undef MRC_WC_ENUM
};

/* Work request opcodes (submission entries). */
enum {
	MRC_OP_WRITE = 1,
	MRC_OP_WRITE_IMM = 2,
	MRC_OP_SEND = 3,
	MRC_OP_SEND_IMM = 4,
	MRC_OP_RECV = 5,
	MRC_OP_READ = 6, /* RDMA READ: the peer's [remote_addr, +len) into addr */
};

/* Completion opcodes: the send-side ones are the work request's opcode. */
enum {
	MRC_WC_OP_WRITE = MRC_OP_WRITE,
	MRC_WC_OP_WRITE_IMM = MRC_OP_WRITE_IMM,
	MRC_WC_OP_SEND = MRC_OP_SEND,
	MRC_WC_OP_SEND_IMM = MRC_OP_SEND_IMM,
	MRC_WC_OP_READ = MRC_OP_READ,
	MRC_WC_OP_RECV = 0x40,           /* a SEND or SEND_IMM arrived */
	MRC_WC_OP_RECV_WRITE_IMM = 0x41, /* a WRITE_IMM arrived (consumed a receive) */
};

/* Completion flags. */
#define MRC_WC_WITH_IMM 0x1

/* Access flags of a memory region. */
#define MRC_ACCESS_LOCAL_WRITE 0x1
#define MRC_ACCESS_REMOTE_WRITE 0x2
#define MRC_ACCESS_REMOTE_READ 0x4

/* Connection events. */
enum {
	MRC_EV_ESTABLISHED = 1, /* a connection this app opened is up */
	MRC_EV_INCOMING = 2,    /* a peer connected to a service this app listens on */
	MRC_EV_FAILED = 3,      /* a connection attempt failed (status says why) */
	MRC_EV_CLOSED = 4,      /* closed gracefully by either side */
	MRC_EV_RESET = 5,       /* reset (peer reset, peer restart, error) */
};

/* The daemon's default socket for applications (METAROCE_APP_SOCKET in the
 * environment overrides it). */
#define MRC_DEFAULT_SOCKET "/run/metaroce/app.sock"

/* ---- functions ------------------------------------------------------------
 *
 * Return values: 0 (or a count) on success, a negative MRC_ERR_* on failure;
 * mrc_strerror() names it. No function reads or sets errno for the caller.
 *
 * Objects (all opaque):
 *   mrc_session   one attachment to the local metarocd (a control socket)
 *   mrc_ctx       a pair of rings (submission, completion) in shared memory
 *                 plus a wakeup descriptor; completions of its connections
 *   mrc_mr        a registered memory region (lkey for local use, rkey for
 *                 peers)
 *   mrc_listener  a service this application accepts connections on
 *   mrc_conn      a connection to a peer application (many ordered streams)
 *
 * Threading: a session may be shared by threads; its control calls (every
 * function that talks to the daemon: open/close of contexts, regions,
 * listeners, connections, events) are serialised by a mutex inside the
 * session, and a thread blocked waiting for an event does not hold it. A
 * context is NOT thread-safe: post to and poll a context from one thread at
 * a time (typically one context per thread). mrc_poll_cq() and the post
 * functions never take the session's mutex and make no system call except
 * the doorbell (a one-byte send, only when the daemon sleeps).
 *
 * Daemon failure: when the daemon closes the session (it exited or was
 * killed) every call on the session and its objects returns MRC_ERR_DAEMON
 * once the library has seen it (mrc_wait_cq() and mrc_get_event() watch
 * the socket while they sleep). Recover by closing the session (and its
 * objects, which only frees local state) and opening a new one; memory
 * from mrc_alloc() is not tied to a session and can be registered again.
 */

typedef struct mrc_session mrc_session;
typedef struct mrc_ctx mrc_ctx;
typedef struct mrc_mr mrc_mr;
typedef struct mrc_listener mrc_listener;
typedef struct mrc_conn mrc_conn;

/* Error and completion-status strings: never NULL ("unknown ..." for a
 * value outside the tables). */
const char *mrc_strerror(int err);
const char *mrc_wc_status_str(int status);

/* ---- sessions ---- */

/* Attach to the daemon at socket_path (NULL: $METAROCE_APP_SOCKET, else
 * MRC_DEFAULT_SOCKET) under app_name (shown to operators; at most 31 bytes
 * are kept; NULL: "app"). Errors: MRC_ERR_DAEMON (no daemon listening),
 * MRC_ERR_VERSION (the daemon speaks another ABI version), MRC_ERR_PERM,
 * MRC_ERR_LIMIT, MRC_ERR_NOMEM, MRC_ERR_PROTO. */
int mrc_session_open(const char *socket_path, const char *app_name, mrc_session **pout);

/* Detach: the daemon resets the session's connections and forgets its
 * contexts, regions and listeners. Frees every object of the session that
 * the application did not free (contexts, regions, listeners and
 * connections become invalid). Call it when no other thread uses the
 * session or its objects any more. NULL is a no-op. */
void mrc_session_close(mrc_session *s);

/* The control socket: readable when an event (mrc_get_event()) or the
 * daemon's departure is waiting. For epoll/libuv loops; never read it.
 * Calls that wait (mrc_wait_cq(), mrc_accept(), ...) may move events from
 * the socket into the session's queue, after which the socket no longer
 * polls readable: before sleeping on it, take events with
 * mrc_get_event(s, &ev, 0) until it returns MRC_ERR_TIMEOUT. */
int mrc_session_fd(const mrc_session *s);

/* What the daemon allows this session (from its hello); 0 when unknown. */
uint32_t mrc_session_max_msg(const mrc_session *s);

/* What the daemon supports beyond the ABI version both speak:
 * MRC_FEATURE_* bits (0 for NULL or an older daemon). Since METAROCE_1.2. */
#define MRC_FEATURE_UNSIGNALED 0x1u /* MRC_POST_UNSIGNALED */
uint32_t mrc_session_features(const mrc_session *s);

/* ---- contexts (rings) ---- */

/* A context with sq_entries submission slots (a power of two, 8..32768;
 * 0: 1024) and cq_entries completion slots (0: 2 * sq_entries; else a power
 * of two >= 2 * sq_entries, so the completion ring never overflows).
 * Errors: MRC_ERR_INVAL (sizes), MRC_ERR_LIMIT, MRC_ERR_PROTO or
 * MRC_ERR_VERSION (the daemon's mapping does not check out), MRC_ERR_IO,
 * MRC_ERR_DAEMON. */
int mrc_ctx_new(mrc_session *s, uint32_t sq_entries, uint32_t cq_entries, mrc_ctx **pout);

/* Destroy a context. Its connections must be closed first (mrc_close()):
 * MRC_ERR_BUSY otherwise, and the context is kept. Connections closed
 * gracefully may still be draining in the daemon: this waits up to 5 s for
 * them (then MRC_ERR_BUSY). NULL: 0. Returns MRC_ERR_DAEMON (having freed
 * local state) when the daemon is gone. */
int mrc_ctx_del(mrc_ctx *ctx);

/* The wakeup descriptor (one end of a socket pair the daemon writes to):
 * becomes readable when completions arrive after
 * mrc_ctx_arm(). For epoll/libuv loops; never read it (mrc_poll_cq()
 * drains it). */
int mrc_ctx_fd(const mrc_ctx *ctx);

/* Ask for a wakeup on mrc_ctx_fd() at the next completion. Returns the
 * number of completions already waiting (>0: do not sleep, poll them) or 0
 * (sleep on the fd, then mrc_poll_cq(), which disarms), or MRC_ERR_DAEMON.
 * Sleep on mrc_session_fd() too: a daemon that dies never writes the
 * wakeup fd, but its socket turns readable (then mrc_get_event() says
 * MRC_ERR_DAEMON). */
int mrc_ctx_arm(mrc_ctx *ctx);

/* Busy polling: mrc_wait_cq() spins up to usec microseconds before it
 * sleeps (0, the default: sleep at once). */
void mrc_ctx_set_busy_poll(mrc_ctx *ctx, uint32_t usec);

/* ---- memory ---- */

/* Memory the daemon can map: a memfd of len bytes (rounded up to the page),
 * on 2 MiB huge pages when len is a multiple of 2 MiB and the system has
 * them, else normal pages; sealed against growing and shrinking; mapped
 * read-write and zeroed. The session may be NULL: memory is not tied to a
 * session (it survives a daemon restart and can be registered again).
 * Errors: MRC_ERR_INVAL (len 0), MRC_ERR_NOMEM, MRC_ERR_IO. */
int mrc_alloc(mrc_session *s, size_t len, void **pmem);

/* Unmap memory from mrc_alloc() (mem must be the address it returned).
 * Regions registered on it must be deregistered first: MRC_ERR_BUSY
 * otherwise. Errors: MRC_ERR_INVAL (not from mrc_alloc()). */
int mrc_free(mrc_session *s, void *mem);

/* Register [addr, addr+len) with MRC_ACCESS_* rights. The range must lie
 * inside ONE block from mrc_alloc() (the library looks up its memfd and
 * offset and hands the memfd to the daemon): any other memory, or a range
 * that crosses a block's end, is MRC_ERR_INVAL. The daemon maps whole
 * pages, so the region it knows starts and ends on page boundaries around
 * the range (mrc_mr_addr()/mrc_mr_len() report what was registered; a peer
 * with the rkey may access all of it). Errors also: MRC_ERR_LIMIT,
 * MRC_ERR_PERM, MRC_ERR_DAEMON. */
int mrc_reg_mr(mrc_session *s, void *addr, size_t len, uint32_t access, mrc_mr **pout);
int mrc_dereg_mr(mrc_mr *mr); /* NULL: 0 */
uint32_t mrc_mr_lkey(const mrc_mr *mr);
uint32_t mrc_mr_rkey(const mrc_mr *mr);
void *mrc_mr_addr(const mrc_mr *mr);
size_t mrc_mr_len(const mrc_mr *mr);

/* ---- connections ---- */

/* Connection states (mrc_conn_status()). */
enum {
	MRC_CONN_CONNECTING = 0,
	MRC_CONN_ESTABLISHED = 1,
	MRC_CONN_FAILED = 2, /* the attempt failed */
	MRC_CONN_CLOSED = 3, /* closed gracefully */
	MRC_CONN_RESET = 4,  /* reset (by either side or an error) */
};

typedef struct mrc_conn_attr {
	uint16_t nstreams;      /* 0: the daemon's default */
	uint16_t initial_paths; /* per plane; 0: the daemon's default */
	uint32_t planes_mask;   /* bit i: plane i may be used; 0: all */
} mrc_conn_attr;

/* An event of the session (mrc_get_event()). */
typedef struct mrc_event {
	int type;               /* MRC_EV_* */
	int status;             /* MRC_EV_FAILED, MRC_EV_RESET: MRC_ERR_* why */
	mrc_conn *conn;         /* the connection (INCOMING: a new one, owned by the app) */
	mrc_listener *listener; /* MRC_EV_INCOMING: which listener */
	uint16_t nstreams;
	char peer[64];          /* "address port" of the peer daemon */
	char reason[64];        /* a short phrase for logs */
} mrc_event;

/* Accept connections to service_id (a 32-bit number agreed with the peers;
 * not one of the daemon's own services) with nstreams streams each (0: the
 * daemon's default); their completions go to ctx. */
int mrc_listen(mrc_session *s, uint32_t service_id, mrc_ctx *ctx, uint16_t nstreams,
	       mrc_listener **pout);
int mrc_unlisten(mrc_listener *l); /* NULL: 0 */

/* Open a connection to service_id of the application behind the daemon at
 * host (a numeric IPv4 or IPv6 address) and port (0: this daemon's service
 * port); attr may be NULL (defaults). Asynchronous: returns the handle at
 * once; MRC_EV_ESTABLISHED or MRC_EV_FAILED follows (mrc_get_event()), or
 * block with mrc_conn_wait_established(). Completions go to ctx. */
int mrc_connect(mrc_session *s, mrc_ctx *ctx, const char *host, uint16_t port,
		uint32_t service_id, const mrc_conn_attr *attr, mrc_conn **pout);

/* Wait up to timeout_ms (-1: forever) until conn leaves CONNECTING: 0 when
 * established, else the failure (MRC_ERR_UNREACHABLE, MRC_ERR_REJECTED,
 * MRC_ERR_CLOSED, ...), MRC_ERR_TIMEOUT or MRC_ERR_DAEMON. It consumes the
 * connection's ESTABLISHED or FAILED event: mrc_get_event() will not
 * return it. */
int mrc_conn_wait_established(mrc_conn *conn, int timeout_ms);

/* The next event of the session, waiting up to timeout_ms (0: do not wait,
 * -1: forever): 0 with *ev filled, MRC_ERR_TIMEOUT, or MRC_ERR_DAEMON.
 * Events of connections the application already closed are dropped. */
int mrc_get_event(mrc_session *s, mrc_event *ev, int timeout_ms);

/* The next connection on listener l (its MRC_EV_INCOMING event, which
 * mrc_get_event() will then not return), waiting up to timeout_ms. */
int mrc_accept(mrc_listener *l, int timeout_ms, mrc_conn **pout);

/* Close conn: gracefully (abort 0: posted work drains first, then
 * MRC_EV_CLOSED at the peer) or with a reset (abort 1: outstanding work
 * completes with MRC_WC_FLUSHED or MRC_WC_RESET). Frees the handle in both
 * cases: completions that still arrive carry its number
 * (mrc_conn_handle()). Closing a connection that already failed, closed or
 * reset only frees it. NULL: 0. */
int mrc_close(mrc_conn *conn, int abort);

uint32_t mrc_conn_handle(const mrc_conn *conn); /* mrc_wc.conn of its completions */
uint16_t mrc_conn_nstreams(const mrc_conn *conn);
int mrc_conn_status(const mrc_conn *conn);     /* MRC_CONN_* */
int mrc_conn_error(const mrc_conn *conn);      /* FAILED/RESET: MRC_ERR_* why; else 0 */

/* ---- work requests ----
 *
 * Each post writes one submission entry. Doorbell policy: unless flags has
 * MRC_POST_MORE, the entry (and every entry posted before it) is made
 * visible to the daemon at once and the doorbell rung if the daemon sleeps.
 * With MRC_POST_MORE the entry waits for the next post without the flag or
 * for mrc_submit() — batch many posts under one doorbell. mrc_post() posts
 * an array with one doorbell. flags apply to every request of the call.
 *
 * Arguments: stream < mrc_conn_nstreams(); [addr, addr+len) inside mr (its
 * lkey names the local buffer; with len 0, addr and mr are ignored and may
 * be NULL); for WRITE*, remote_addr and rkey name the peer's memory. Buffers must stay untouched until the completion.
 * Returns 0, MRC_ERR_AGAIN (submission ring full: reap completions and
 * retry), MRC_ERR_INVAL (checked here: a bad argument never reaches the
 * daemon), MRC_ERR_CLOSED (the connection is not established) or
 * MRC_ERR_DAEMON. */

#define MRC_POST_MORE 0x1u
/* MRC_POST_UNSIGNALED (sends: WRITE, WRITE_IMM, SEND, SEND_IMM, READ): no
 * completion when the request succeeds; one when it fails or is flushed,
 * as always. Completions of a stream come in posting order, so a
 * successful completion of a later request on the same connection and
 * stream means every unsignaled one posted before it succeeded (the verbs
 * rule for unsignaled sends: signal one in every few so that the
 * application knows when their buffers and ring slots are free). Saves the
 * daemon a completion and often the application a wakeup per request.
 * MRC_ERR_INVAL with a receive; MRC_ERR_VERSION when the daemon predates
 * it (mrc_session_features()). Since METAROCE_1.2. */
#define MRC_POST_UNSIGNALED 0x2u

int mrc_post_write(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
		   uint32_t len, const mrc_mr *mr, uint64_t remote_addr, uint32_t rkey,
		   uint64_t wr_id, unsigned flags);
int mrc_post_write_imm(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
		       uint32_t len, const mrc_mr *mr, uint64_t remote_addr, uint32_t rkey,
		       uint32_t imm, uint64_t wr_id, unsigned flags);
int mrc_post_send(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
		  uint32_t len, const mrc_mr *mr, uint64_t wr_id, unsigned flags);
int mrc_post_send_imm(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, const void *addr,
		      uint32_t len, const mrc_mr *mr, uint32_t imm, uint64_t wr_id,
		      unsigned flags);
/* A receive buffer for the next SEND/SEND_IMM (or WRITE_IMM, which consumes
 * one receive and places nothing in it) arriving on stream. */
int mrc_post_recv(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, void *addr, uint32_t len,
		  const mrc_mr *mr, uint64_t wr_id, unsigned flags);
/* RDMA READ: len bytes of the peer's region rkey at remote_addr (which
 * must grant MRC_ACCESS_REMOTE_READ) into [addr, addr+len) of mr (which
 * must grant MRC_ACCESS_LOCAL_WRITE). It is ordered with the stream's other
 * requests: it returns the bytes of every WRITE posted before it on the
 * stream. Only on connections whose peer negotiated READ (SPEC 5.8); on
 * others it completes with MRC_WC_BAD_WR. Since METAROCE_1.1. */
int mrc_post_read(mrc_ctx *ctx, mrc_conn *conn, uint16_t stream, void *addr, uint32_t len,
		  const mrc_mr *mr, uint64_t remote_addr, uint32_t rkey, uint64_t wr_id,
		  unsigned flags);

/* A work request for mrc_post(). */
typedef struct mrc_wr {
	uint64_t wr_id;
	int opcode;            /* MRC_OP_* */
	mrc_conn *conn;
	uint16_t stream;
	const void *addr;
	uint32_t len;
	const mrc_mr *mr;
	uint64_t remote_addr;  /* WRITE*, READ */
	uint32_t rkey;         /* WRITE*, READ */
	uint32_t imm;          /* *_IMM */
} mrc_wr;

/* Post n work requests, all or none: MRC_ERR_AGAIN when fewer than n slots
 * are free, MRC_ERR_INVAL when any is invalid (nothing posted; n larger
 * than the ring is MRC_ERR_INVAL). Returns n. flags: MRC_POST_MORE. */
int mrc_post(mrc_ctx *ctx, const mrc_wr *wrs, int n, unsigned flags);

/* Publish the entries posted with MRC_POST_MORE and ring the doorbell if
 * the daemon sleeps. Returns the number published or MRC_ERR_DAEMON. */
int mrc_submit(mrc_ctx *ctx);

/* A completion. */
typedef struct mrc_wc {
	uint64_t wr_id;
	uint32_t conn;     /* mrc_conn_handle() of its connection */
	uint32_t byte_len; /* receives: bytes that arrived */
	uint32_t imm;      /* with MRC_WC_WITH_IMM */
	uint16_t stream;
	uint8_t status;    /* MRC_WC_* */
	uint8_t opcode;    /* MRC_WC_OP_* */
	uint8_t flags;     /* MRC_WC_WITH_IMM */
} mrc_wc;

/* Up to max completions without waiting: the count (0: none), or
 * MRC_ERR_DAEMON / MRC_ERR_PROTO (the daemon broke the ring). Completions
 * of one stream come in the order their requests were posted. */
int mrc_poll_cq(mrc_ctx *ctx, mrc_wc *wc, int max);

/* Like mrc_poll_cq() but waits up to timeout_ms (-1: forever) for at least
 * one completion: spins for the busy-poll time, then sleeps on the wakeup
 * descriptor and the session socket together, so a daemon that dies gives
 * MRC_ERR_DAEMON rather than a hang. Returns the count or MRC_ERR_TIMEOUT,
 * MRC_ERR_DAEMON, MRC_ERR_PROTO. */
int mrc_wait_cq(mrc_ctx *ctx, mrc_wc *wc, int max, int timeout_ms);


#ifdef __cplusplus
}
#endif

#endif
