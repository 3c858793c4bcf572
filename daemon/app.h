/*
 * Application sessions: the daemon side of libmetaroce (the ABI is
 * libclient/abi.h, which this module implements for the daemon).
 *
 * service.app_socket is a SOCK_SEQPACKET Unix socket (mode 0660, group
 * service.app_group when it exists). Each accepted connection is one
 * session: root, the daemon's uid and members of app_group may attach (the
 * peer's primary and supplementary groups count); anyone else gets
 * MRC_ERR_PERM in the reply to its first message and is closed. The first
 * message must be HELLO with our ABI version.
 *
 * A session owns contexts (a sealed memfd with the SQ and CQ, a doorbell and
 * a wakeup socket pair whose daemon ends are its own: never blocking),
 * memory regions (the application's sealed memfds, mapped here too),
 * listeners (service ids routed to it by the connections' service
 * registry through mrd_apps_service()) and connections (daemon
 * connections, peer.h, whose ops route to it).
 * Everything an application sends or writes into shared memory is
 * validated and counted; an application that is impossible to serve (a bad
 * header, an SQ tail beyond its ring, garbage again and again) loses its
 * session, never the daemon.
 *
 * Connections of a session: the handle is the connection's local id. Work
 * requests are posted to the engine with our own wr_id (a slot of the
 * context's table of outstanding requests, which holds a reference to the
 * region it uses); the completion gives the application's wr_id back. A
 * context takes a request from its SQ only when (completions in the CQ not
 * yet reaped + requests outstanding in engines + 1) <= cq_entries, so the
 * CQ never overflows.
 *
 * Choices the ABI leaves to the daemon:
 *  - lkeys are per session: slot + 1 in the low 21 bits, a generation above
 *    (a stale lkey never names the region that reuses its slot); rkeys are
 *    random 32-bit, nonzero, unique daemon-wide, and none of the last 1024
 *    freed is handed out again.
 *  - A connection handle is valid from CONNECT's reply (or INCOMING) until
 *    its FAILED/CLOSED/RESET event; afterwards requests on it complete with
 *    BAD_WR and CLOSE answers MRC_ERR_NOENT. Requests on a connection the
 *    application is closing complete FLUSHED; outstanding ones complete
 *    FLUSHED when it ends, before its event.
 *  - A request the engine cannot take yet (the stream's message window is
 *    full) stays in the SQ and is retried every millisecond, like one
 *    waiting for CQ credit; the SQ's NEED_WAKEUP is set meanwhile.
 *  - A connection's end is CLOSED when it was closed gracefully and no
 *    request of it failed remotely, else RESET (status MRC_ERR_CLOSED).
 *  - A first message other than HELLO gets MRC_ERR_VERSION; a process that
 *    may not attach gets MRC_ERR_PERM in the reply to its first message;
 *    both are then closed. 64 wrong requests in a row close a session
 *    (refusals for a limit, a busy object or a connection that already
 *    ended do not count; a request that succeeds starts the count again),
 *    as does a header whose length is not the datagram's, a datagram above
 *    MRC_MSG_MAX, or 4096 replies and events queued because the application
 *    does not read its socket.
 *  - A connection that sends nothing is closed after 5 s; at most 64 allowed
 *    and 16 refused ones wait for their first message (more are closed at
 *    once, counted as refused).
 */
#ifndef MRD_APP_H
#define MRD_APP_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

typedef struct mrd mrd;
typedef struct mrd_conn_ops mrd_conn_ops;
typedef struct app_session app_session;
typedef struct app_ctx app_ctx;
typedef struct app_region app_region;
typedef struct app_listener app_listener;

/* Why a request was refused: X(NAME, phrase). */
#define MRD_APP_BAD_MAP(X)                                             \
	X(HEADER, "bad header (length, type or reserved fields)")      \
	X(LENGTH, "payload length does not match the message type")    \
	X(RESERVED, "reserved field or flag not zero")                 \
	X(FDS, "file descriptors missing or where none belong")        \
	X(ARG, "invalid argument")                                     \
	X(NOENT, "no such context, region, connection or listener")    \
	X(LIMIT, "a per-application limit was reached")                \
	X(STATE, "not allowed in this state (before HELLO, busy)")

enum {
#define MRD_APP_BAD_ENUM(name, msg) MRD_APP_BAD_##name,
	MRD_APP_BAD_MAP(MRD_APP_BAD_ENUM)
#undef MRD_APP_BAD_ENUM
	MRD_APP_NBAD
};

/* Why a work request failed the daemon's checks. */
#define MRD_APP_WR_BAD_MAP(X)                                            \
	X(OPCODE, "unknown opcode")                                      \
	X(FIELDS, "flags, reserved or unused fields not zero")           \
	X(CONN, "connection not of this context or not established")     \
	X(STREAM, "stream beyond the connection's streams")              \
	X(LEN, "length above the largest message")                       \
	X(LKEY, "no region with this lkey")                              \
	X(BOUNDS, "buffer outside its region")                           \
	X(ACCESS, "region lacks local write access for a receive")       \
	X(ENGINE, "the engine refused the request")

enum {
#define MRD_APP_WR_BAD_ENUM(name, msg) MRD_APP_WR_BAD_##name,
	MRD_APP_WR_BAD_MAP(MRD_APP_WR_BAD_ENUM)
#undef MRD_APP_WR_BAD_ENUM
	MRD_APP_WR_NBAD
};

typedef struct mrd_apps_counters {
	uint64_t sessions_opened, sessions_closed, sessions_refused, sessions_killed;
	uint64_t sessions_quota; /* HELLOs past apps.max_sessions_per_user */
	uint64_t requests, requests_bad, bad[MRD_APP_NBAD];
	uint64_t wrs, wrs_bad, wr_bad[MRD_APP_WR_NBAD];
	uint64_t cqes, wakeups;
	uint64_t cqes_unsignaled; /* successes of MRC_SQE_UNSIGNALED requests: no CQE */
	uint64_t doorbells;       /* doorbell wakeups of the loop (on_doorbell) */
} mrd_apps_counters;

typedef struct mrd_apps {
	mrd *d;
	int fd;            /* the listening socket, -1 when closed */
	uv_poll_t poll;
	int poll_open;
	int bound;         /* the socket file is ours to remove */
	gid_t gid;         /* app_group's, when have_group */
	int have_group;
	app_session *sessions;
	uint32_t nsessions, nrefused, next_session_id;
	uint32_t nhello;   /* allowed sessions before their HELLO */
	/* Regions by rkey, daemon-wide (rkeys are unique across sessions). */
	app_region **rkeys;
	uint32_t nrkeys_buckets, nregions;
	uint32_t retired[1024]; /* rkeys freed lately: not handed out again soon */
	uint32_t retired_next;
	/* Contexts with completions to publish, with SQ work left after their
	 * budget, waiting for CQ credit, and whose SQ is looked at on every
	 * turn of the loop (sends outstanding: no doorbell needed). */
	app_ctx *dirty, *pending, *blocked, *awake;
	uv_prepare_t prepare;
	uv_check_t check;
	uv_idle_t idle;
	uv_timer_t credit_timer;
	uv_timer_t awake_timer; /* while SQs stay awake: each looked at every ms */
	uv_timer_t hello_timer; /* closes sessions that never send HELLO */
	int handles_open;
	mrd_apps_counters cnt;
} mrd_apps;

/* Create the socket and listen. Returns 0 or -errno (logged). */
int mrd_apps_init(mrd *d);

/* Close every session (their connections are reset) and the socket, and
 * remove the socket file. For the stop (SIGTERM) and exit; idempotent. */
void mrd_apps_close(mrd *d);

/* The ops of a service an application listens on, or NULL. */
const mrd_conn_ops *mrd_apps_service(mrd *d, uint32_t service_id);

/* The sessions and counters, for `metaroce-ctl status`. */
json_t *mrd_apps_json(mrd *d);

#endif
