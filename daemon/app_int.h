/*
 * The application sessions' internals (app.h is the daemon's view of them),
 * shared by the files that own their parts:
 *   app.c       the session socket, requests, listeners, status
 *   app_mr.c    memory regions and their rkeys
 *   app_ring.c  contexts: the submission and completion rings
 *   app_conn.c  connections and what the engine hands them
 */
#ifndef MRD_APP_INT_H
#define MRD_APP_INT_H

#include "app.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi.h"
#include "datapath.h"
#include "localsock.h"
#include "log.h"
#include "mrd.h"
#include "peer.h"
#include "planes.h"

#define SQ_BUDGET 256        /* SQEs of one context per pass (fairness) */
#define ENDED_KEEP 256       /* ended connection handles remembered per session */
#define RECV_BUDGET 64       /* control messages of one session per pass */
#define BAD_MAX 64           /* wrong requests in a row before the session is closed */
#define OUTQ_MAX 4096        /* queued replies and events before it is closed */
#define REFUSED_MAX 16       /* refused sessions waiting for their first message */
#define HELLO_MAX 64         /* allowed sessions waiting for their HELLO */
#define HELLO_TIMEOUT_MS 5000 /* the first message comes within this, or the end */
#define MAX_FDS 8            /* fds one message may carry (the rest are cut) */
#define CQ_MAX (4 * MRC_SQ_MAX)
#define CREDIT_RETRY_MS 1    /* contexts waiting for CQ credit are re-checked */
/* A context with sends outstanding has its SQ looked at on every turn of
 * the loop, and at least every SQ_AWAKE_POLL_MS, instead of sleeping on the
 * doorbell, until SQ_AWAKE_MS pass without a request posted or completed
 * (app_ring.c, sq_stay_awake()). */
#define SQ_AWAKE_POLL_MS 1
#define SQ_AWAKE_MS 10
#define LKEY_SLOT_BITS 21

enum { S_HELLO, S_REFUSED, S_OPEN, S_CLOSED };
enum { AC_CONNECTING, AC_ESTABLISHED };

/* ---- objects -------------------------------------------------------------- */

typedef struct app_conn app_conn;

struct app_region {
	app_region *rnext;   /* rkey hash chain */
	app_region *znext;   /* the session's deregistered-but-referenced list */
	app_session *s;
	uint32_t lkey, rkey, access;
	uint64_t app_addr, len;
	uint64_t lo, lolen;  /* the bytes accessible: [lo, lo + lolen) (MR_BOUNDS) */
	uint8_t *map;        /* the application's bytes [fd_offset, +len) */
	uint32_t refs;       /* outstanding work requests using it */
	int dead;            /* deregistered: unmapped when refs reaches 0 */
};

/* One outstanding work request: the engine's wr_id names the slot. */
typedef struct app_wr {
	uint64_t wr_id;      /* the application's */
	app_region *r;       /* NULL for a zero-length request */
	app_conn *ac;
	uint32_t gen;
	uint16_t stream;
	uint8_t opcode, used;
	uint8_t unsignaled; /* MRC_SQE_UNSIGNALED: no CQE on success */
} app_wr;

struct app_ctx {
	app_ctx *next;       /* the session's */
	app_ctx *dnext, *pnext, *bnext, *anext;
	uint8_t in_dirty, in_pending, in_blocked, in_awake, dead;
	app_session *s;
	uint32_t id;
	uint8_t *map;
	size_t size;
	mrc_ring *sq, *cq;
	mrc_sqe *sqes;
	mrc_cqe *cqes;
	uint32_t sq_entries, cq_entries;
	uint32_t sq_head, cq_tail; /* ours: never read back from the mapping */
	uint32_t cq_pub;           /* the tail last published */
	int doorbell, wakeup;
	uv_poll_t poll;
	uint32_t nout;       /* requests outstanding in engines */
	uint32_t nsend;      /* of them WRITE*, SEND*, READ (not RECV) */
	uint64_t active_ms;  /* uv_now() of the last request posted or completed */
	uint32_t users;      /* connections and listeners completing here */
	app_wr *wrs;         /* cq_entries slots */
	uint32_t *free;      /* free slot stack */
	uint32_t nfree, gen;
};

struct app_conn {
	app_conn *next, **pprev;
	app_session *s;
	app_ctx *ctx;
	mrd_conn *c;
	uint32_t handle, listener_id;
	uint16_t nstreams;
	int state, closing;
	int failed; /* a request failed remotely: the engine ends the connection */
};

struct app_listener {
	app_listener *next;
	app_session *s;
	app_ctx *ctx;
	uint32_t id, service_id;
	uint16_t nstreams;
};

typedef struct app_out {
	struct app_out *next;
	uint32_t len;
	int nfds;
	int fds[3];
	uint8_t buf[MRC_MSG_MAX];
} app_out;

struct app_session {
	mrd_apps *a;
	app_session *next, **pprev;
	int fd;
	uv_poll_t poll;
	int events;
	int state, refuse_status;
	uint32_t id;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint64_t accepted_ms; /* uv_now() */
	char name[33];
	/* limits, fixed at HELLO */
	uint32_t max_contexts, max_regions, max_conns, max_listeners;
	uint64_t max_region_bytes;
	app_ctx *ctxs;
	uint32_t nctxs, next_ctx_id;
	app_region **regions; /* by lkey slot */
	uint32_t nregions;
	uint64_t region_bytes;
	uint32_t lkey_gen;
	app_region *zombies;
	app_conn *conns;
	uint32_t nconns;
	app_listener *listeners;
	uint32_t nlisteners, next_listener_id;
	app_out *outq, **outq_tail;
	uint32_t noutq;
	uint32_t bad;
	uint64_t requests, wrs, wrs_bad;
	/* Handles of this session's connections that ended, most recent
	 * last: a request that raced the end completes FLUSHED, not BAD_WR
	 * (the application could not have known). */
	uint32_t ended[ENDED_KEEP];
	uint32_t nended;
};

extern const mrd_conn_ops app_ops;

/* Completions go from the engine to the ring unchanged: its statuses and
 * opcodes are the ABI's (metaroce.h), and must stay so. */
#define SAME_STATUS(name, val, msg) \
	_Static_assert((int)MRC_WC_##name == (int)MRP_WC_##name, "MRC_WC_" #name " is the engine's");
MRP_WC_STATUS_MAP(SAME_STATUS)
#undef SAME_STATUS
_Static_assert((int)MRC_OP_WRITE == (int)MRP_WR_WRITE &&
		       (int)MRC_OP_WRITE_IMM == (int)MRP_WR_WRITE_IMM &&
		       (int)MRC_OP_SEND == (int)MRP_WR_SEND &&
		       (int)MRC_OP_SEND_IMM == (int)MRP_WR_SEND_IMM &&
		       (int)MRC_WC_OP_RECV == (int)MRP_WC_RECV &&
		       (int)MRC_WC_OP_RECV_WRITE_IMM == (int)MRP_WC_RECV_WRITE_IMM,
	       "the ABI's opcodes are the engine's");
/* ... but for READ, whose engine value (the wire's READ_REQ) is the ABI's
 * RECV: sqe_post() and op_completion() translate it. */
_Static_assert((int)MRC_OP_READ != (int)MRP_WR_READ, "READ is translated");


extern const char *const app_bad_names[];
extern const char *const app_wr_bad_names[];

static inline int app_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static inline void app_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Shared between the files above. */
void app_bad_req(app_session *s, const mrc_msg_hdr *h, int why, int status);
void app_conn_link(app_session *s, app_conn *ac);
app_conn *app_conn_of(app_session *s, uint32_t handle);
void app_conn_unlink(app_conn *ac);
void app_cq_put(app_ctx *x, uint64_t wr_id, uint32_t conn, uint8_t status, uint8_t opcode,
		uint16_t stream, uint32_t byte_len, uint32_t imm, int has_imm);
void app_ctx_consume(app_ctx *x);
app_ctx *app_ctx_find(app_session *s, uint32_t id);
void app_ctx_free(app_ctx *x);
int app_ended_handle(const app_session *s, uint32_t handle);
int app_in_region(const app_region *r, uint64_t addr, uint64_t len);
app_listener *app_listener_by_service(mrd_apps *a, uint32_t service_id);
app_region *app_lkey_find(app_session *s, uint32_t lkey);
void app_on_check(uv_check_t *h);
void app_on_credit(uv_timer_t *t);
void app_on_awake_timer(uv_timer_t *t);
void app_on_idle(uv_idle_t *h);
void app_on_prepare(uv_prepare_t *h);
void app_publish_all(mrd_apps *a);
void app_refuse(app_session *s, const mrc_msg_hdr *h, int why, int status);
void app_region_free(app_region *r);
void app_region_remove(app_session *s, app_region *r);
void app_region_unref(app_region *r);
void app_reply(app_session *s, const mrc_msg_hdr *req, int status, const void *payload,
	       uint32_t plen, int *fds, int nfds);
void app_req_ctx_create(app_session *s, const mrc_msg_hdr *h, const mrc_ctx_create_req *q);
void app_req_mr_bounds(app_session *s, const mrc_msg_hdr *h, const mrc_mr_bounds_req *q);
app_region *app_rkey_find(mrd_apps *a, uint32_t rkey);
uint32_t app_rkey_hash(const mrd_apps *a, uint32_t rkey);
uint32_t app_rkey_new(mrd_apps *a);
void app_send_event(app_session *s, const mrc_msg_event *ev);
void app_session_close(app_session *s, const char *why);
void app_wr_bad(app_ctx *x, const mrc_sqe *q, int why, uint8_t status);
void app_wr_release(app_ctx *x, uint32_t slot);

#endif
