/*
 * libmetaroce internals: the objects behind the opaque handles of
 * metaroce.h and the helpers the library's modules share. Not installed.
 */
#ifndef MRC_INTERNAL_H
#define MRC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "abi.h"
#include "metaroce.h"

/* Every public function carries this; everything else stays hidden
 * (-fvisibility=hidden) and libmetaroce.map exports only mrc_*. */
#define MRC_API __attribute__((visibility("default")))

/* How long a control request may wait for the daemon's reply before the
 * session is declared dead: the daemon answers from its event loop, so
 * anything near this is a hung daemon, not a slow one. */
#define MRC_REPLY_TIMEOUT_MS 30000

/* How long mrc_ctx_del() waits for connections the application closed
 * gracefully to finish closing in the daemon. */
#define MRC_CLOSE_DRAIN_MS 5000

typedef struct mrc_evnode {
	struct mrc_evnode *next;
	mrc_msg_event ev;
	mrc_conn *incoming; /* MRC_EV_INCOMING: the connection made for it */
} mrc_evnode;

/* One block from mrc_alloc(); process-wide, not per session. */
typedef struct mrc_block {
	struct mrc_block *next;
	uint8_t *base;
	size_t len;      /* mapped bytes (a multiple of pagesz) */
	size_t pagesz;   /* 4 KiB or 2 MiB: fd offsets the daemon maps are multiples */
	int fd;
	unsigned nregs;  /* regions registered on it (mrc_free refuses while > 0) */
} mrc_block;

struct mrc_session {
	int fd;
	_Atomic int dead;          /* the daemon closed the socket (or stopped answering) */
	pthread_mutex_t lock;      /* control calls, the event queue, the object lists */
	uint64_t seq;
	mrc_hello_rep hello;
	mrc_evnode *evhead, *evtail;
	mrc_ctx *ctxs;
	mrc_mr *mrs;
	mrc_listener *listeners;
	mrc_conn *conns;
};

struct mrc_ctx {
	mrc_session *s;
	mrc_ctx *next;
	uint32_t id;
	void *shm;
	size_t shm_size;
	mrc_ring *sq, *cq;
	mrc_sqe *sqes;
	const mrc_cqe *cqes;
	uint32_t sq_entries, sq_mask, cq_entries, cq_mask;
	uint32_t sq_tail; /* next submission slot to fill (private) */
	uint32_t sq_pub;  /* tail published to the daemon */
	uint32_t sq_kick; /* tail published with our last doorbell (mrc_submit()) */
	uint32_t cq_head; /* next completion to read (private copy of cq->head) */
	int doorbell, wakeup;
	uint32_t busy_usec;
	int armed;        /* NEED_WAKEUP set on the CQ by us */
};

struct mrc_mr {
	mrc_session *s;
	mrc_mr *next;
	mrc_block *blk;
	uint8_t *addr;
	size_t len;
	uint32_t lkey, rkey, access;
};

struct mrc_listener {
	mrc_session *s;
	mrc_listener *next;
	uint32_t id, service;
	mrc_ctx *ctx;
};

struct mrc_conn {
	mrc_session *s;
	mrc_conn *next;
	mrc_ctx *ctx;
	uint32_t handle;
	_Atomic uint16_t nstreams;
	_Atomic int state;  /* MRC_CONN_* */
	_Atomic int error;  /* MRC_ERR_* of a failure or reset */
};

/* session.c */
uint64_t mrc_now_ms(void);
int mrc_request(mrc_session *s, uint32_t type, const void *req, size_t reqlen, int send_fd,
		void *rep, size_t replen, int *fds, int maxfds, int *nfds);
int mrc_session_drain(mrc_session *s);
int mrc_is_dead(const mrc_session *s);

/* ctx.c */
/* Check the header of a context's mapping against what was asked and what
 * was mapped; 0 or MRC_ERR_VERSION/MRC_ERR_PROTO. Exposed for the tests. */
int mrc_shm_check(const void *shm, uint64_t size, uint32_t sq_entries, uint32_t cq_entries);
/* Unmap and close a context without telling the daemon (session close). */
void mrc_ctx_free_local(mrc_ctx *ctx);

/* mem.c */
void mrc_block_unref(mrc_block *b);

/* For the verbs layer (verbs/), which moves ordinary memory into memfds of
 * its own: adopt [base, base+len) mapped MAP_SHARED from the sealed memfd
 * fd (offset 0, pages of pagesz) as a block, so mrc_reg_mr() accepts it;
 * the block owns fd from then on. mrc_block_find(): the block holding
 * [addr, addr+len) (0), MRC_ERR_BUSY when a block overlaps it only partly,
 * MRC_ERR_NOENT. mrc_block_release(): forget the block and close its fd,
 * leaving the mapping in place (MRC_ERR_BUSY while regions use it). */
int mrc_block_adopt(void *base, size_t len, size_t pagesz, int fd);
int mrc_block_find(const void *addr, size_t len, void **pbase, size_t *plen);
int mrc_block_release(void *base);

/* Narrow a region to exactly [addr, addr+len) (MRC_MSG_MR_BOUNDS): peers'
 * accesses and local work requests outside it fail with bounds errors. */
int mrc_mr_set_bounds(mrc_mr *mr, const void *addr, size_t len);

/* session.c: the daemon's planes and service port (MRC_MSG_DEVINFO). */
int mrc_session_devinfo(mrc_session *s, mrc_devinfo_rep *out);

#endif
