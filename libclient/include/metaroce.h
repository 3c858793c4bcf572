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
};

/* Completion opcodes: the send-side ones are the work request's opcode. */
enum {
	MRC_WC_OP_WRITE = MRC_OP_WRITE,
	MRC_WC_OP_WRITE_IMM = MRC_OP_WRITE_IMM,
	MRC_WC_OP_SEND = MRC_OP_SEND,
	MRC_WC_OP_SEND_IMM = MRC_OP_SEND_IMM,
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
 * (libclient owns what follows.)
 */

#ifdef __cplusplus
}
#endif

#endif
