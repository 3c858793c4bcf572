/*
 * A QP reset while a completion of a send from before the reset is still
 * in the context's ring (a verbs program of our own, linked against the
 * system's libibverbs, run under metaroce-run).
 *
 * The requester posts a signaled WRITE, lets it complete in the daemon
 * without polling, resets its QP and connects it again, then posts an
 * unsignaled WRITE one byte past the peer's region and a signaled good
 * WRITE behind it. The first poll then finds, in this order, the old
 * WRITE's success, the new bad WRITE's REM_ACCESS_ERR and the flush of
 * the good one. The old success must not retire the new unsignaled WRITE
 * as if it had succeeded (its error would be lost: the program would see
 * only a flush, with no error before it). That can happen where the
 * library posts unsignaled sends without a completion of their own
 * (METAROCE_VERBS_UNSIGNALED=1: a later success implies theirs); with the
 * library's default each has its own completion, and the test checks the
 * same outcome there.
 *
 * The requester runs without a completion channel and is the side that
 * connects (the smaller GID and QP number, as the library orders them), so
 * no thread of the library drains the ring behind its back: the old
 * completion stays there until its first poll. Whether it had arrived
 * before the reset is seen from its status (a success; a flush means the
 * reset came first, and the round is tried again).
 *
 * Usage: qpreset SOCKET_A SOCKET_B. Exit 0 when every check passed, 77
 * when the verbs device is missing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN 8192
#define ROUNDS 3  /* rounds that found the old completion in the ring */
#define TRIES 10  /* rounds at most */

static const char *who = "?";

#define CHECK(c, ...)                                                  \
	do {                                                           \
		if (!(c)) {                                            \
			fprintf(stderr, "FAIL %s: ", who);             \
			fprintf(stderr, __VA_ARGS__);                  \
			fprintf(stderr, "\n");                         \
			exit(1);                                       \
		}                                                      \
	} while (0)

struct info {
	uint32_t qpn;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey, len;
};

static void xwrite(int fd, const void *p, size_t n)
{
	CHECK(write(fd, p, n) == (ssize_t)n, "pipe write");
}

static void xread(int fd, void *p, size_t n)
{
	CHECK(read(fd, p, n) == (ssize_t)n, "pipe read");
}

static void wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long spins = 0;; spins++) {
		int n = ibv_poll_cq(cq, 1, wc);
		CHECK(n >= 0, "ibv_poll_cq %d", n);
		if (n == 1)
			return;
		if (spins > 2000000)
			usleep(100);
		CHECK(spins < 2000000 + 200000, "no completion within ~20 s");
	}
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS),
	      "to INIT");
}

static void to_rts(struct ibv_qp *qp, const struct info *peer)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
				 .dest_qp_num = peer->qpn, .min_rnr_timer = 12,
				 .ah_attr = {.is_global = 1, .port_num = 1,
					     .grh = {.dgid = peer->gid, .sgid_index = 0,
						     .hop_limit = 1}}};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
	      "to RTR");
	at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
				  .rnr_retry = 7};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					      IBV_QP_MAX_QP_RD_ATOMIC),
	      "to RTS");
}

static void to_reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_RESET};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE), "to RESET");
}

/* The order the library uses to pick the side that connects. */
static int connects(const struct info *me, const struct info *peer)
{
	int c = memcmp(me->gid.raw, peer->gid.raw, 16);
	return c ? c < 0 : me->qpn < peer->qpn;
}

static int side(int rfd, int wfd)
{
	int num;
	struct ibv_device **devs = ibv_get_device_list(&num);
	if (!devs || num < 1) {
		fprintf(stderr, "SKIP: no verbs device (run under metaroce-run)\n");
		exit(77);
	}
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	uint8_t *buf = calloc(1, LEN);
	CHECK(buf, "calloc");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, LEN,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq, "ibv_create_cq");
	struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 16, .max_recv_wr = 4,
					      .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(qp, "ibv_create_qp: %s", strerror(errno));
	to_init(qp);

	struct info me = {.qpn = qp->qp_num, .addr = (uintptr_t)buf, .rkey = mr->rkey, .len = LEN},
		    peer;
	CHECK(!ibv_query_gid(ctx, 1, 0, &me.gid), "ibv_query_gid");
	xwrite(wfd, &me, sizeof(me));
	xread(rfd, &peer, sizeof(peer));
	int req = connects(&me, &peer);
	who = req ? "requester" : "responder";
	if (req) { /* the responder listens first */
		char c;
		xread(rfd, &c, 1);
	}
	to_rts(qp, &peer);
	if (!req)
		xwrite(wfd, "l", 1);

	int exercised = 0;
	for (int round = 0; round < TRIES && exercised < ROUNDS; round++) {
		uint8_t mark = (uint8_t)(0x40 + round);
		char c;
		if (!req) {
			/* The old WRITE lands: say so. */
			volatile uint8_t *m = buf;
			for (long spins = 0; m[0] != mark; spins++) {
				if (spins > 100000)
					usleep(50);
				CHECK(spins < 100000 + 400000, "round %d: the WRITE never landed", round);
			}
			xwrite(wfd, "w", 1);
			/* The requester reset its QP: reset ours, listen again. */
			xread(rfd, &c, 1);
			to_reset(qp);
			to_init(qp);
			to_rts(qp, &peer);
			xwrite(wfd, "l", 1);
			xread(rfd, &c, 1); /* the round is over */
			if (c == 'x')
				break;
			/* Both QPs are in the error state: again from RESET. */
			to_reset(qp);
			to_init(qp);
			to_rts(qp, &peer);
			xwrite(wfd, "l", 1);
			continue;
		}
		struct ibv_wc wc;
		struct ibv_send_wr *bad;
		memset(buf, mark, LEN);
		struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 4096, .lkey = mr->lkey};
		struct ibv_send_wr old = {.wr_id = 800, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = {.remote_addr = peer.addr, .rkey = peer.rkey}};
		CHECK(!ibv_post_send(qp, &old, &bad), "post the WRITE before the reset");
		xread(rfd, &c, 1); /* it landed; its completion follows the ACK */
		usleep(200000 * (useconds_t)(round + 1));
		to_reset(qp);
		to_init(qp);
		xwrite(wfd, "r", 1);
		xread(rfd, &c, 1); /* the responder listens again */
		to_rts(qp, &peer);
		/* An unsignaled WRITE one byte past the peer's region, then a
		 * signaled good one. */
		struct ibv_sge s1 = {.addr = (uintptr_t)buf, .length = 1, .lkey = mr->lkey};
		struct ibv_send_wr w[2] = {
			{.wr_id = 810, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			 .next = &w[1],
			 .wr.rdma = {.remote_addr = peer.addr + peer.len, .rkey = peer.rkey}},
			{.wr_id = 811, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			 .send_flags = IBV_SEND_SIGNALED,
			 .wr.rdma = {.remote_addr = peer.addr, .rkey = peer.rkey}}};
		CHECK(!ibv_post_send(qp, w, &bad), "post after the reset");
		wait_wc(cq, &wc);
		CHECK(wc.wr_id == 800, "the first completion is the WRITE from before the reset: "
				       "wr_id %llu %s",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		if (wc.status == IBV_WC_SUCCESS)
			exercised++;
		else
			CHECK(wc.status == IBV_WC_WR_FLUSH_ERR,
			      "the WRITE from before the reset: success or flush, not %s",
			      ibv_wc_status_str(wc.status));
		static const enum ibv_wc_status want[2] = {IBV_WC_REM_ACCESS_ERR,
							   IBV_WC_WR_FLUSH_ERR};
		for (int i = 0; i < 2; i++) {
			wait_wc(cq, &wc);
			CHECK(wc.wr_id == 810 + (uint64_t)i && wc.status == want[i],
			      "round %d (old WRITE %s): completion %d after the reset: wr_id %llu "
			      "%s, want %d %s (a completion from before the reset must not retire "
			      "the unsignaled WRITE posted after it)",
			      round, exercised ? "completed in the ring" : "flushed", i,
			      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), 810 + i,
			      ibv_wc_status_str(want[i]));
		}
		CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "nothing more");
		int last = exercised >= ROUNDS || round + 1 >= TRIES;
		if (!last) { /* the bad WRITE put the QP in the error state */
			to_reset(qp);
			to_init(qp);
		}
		xwrite(wfd, last ? "x" : "n", 1);
		if (!last) {
			xread(rfd, &c, 1);
			to_rts(qp, &peer);
		}
	}
	if (req) {
		CHECK(exercised >= ROUNDS,
		      "the WRITE before the reset completed in the ring in only %d of %d rounds",
		      exercised, TRIES);
		printf("%s: %d rounds with a success from before the reset in the ring: the "
		       "unsignaled WRITE after it still completed REM_ACCESS_ERR\n",
		       who, exercised);
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	printf("%s: PASS\n", who);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: qpreset SOCKET_A SOCKET_B\n");
		return 2;
	}
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		return 1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	/* Each side closes the ends it does not use: if the other dies, a
	 * read sees the end of the pipe and fails rather than waiting. */
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		setenv("METAROCE_APP_SOCKET", argv[2], 1);
		return side(p2c[0], c2p[1]);
	}
	close(p2c[0]);
	close(c2p[1]);
	setenv("METAROCE_APP_SOCKET", argv[1], 1);
	int rc = side(c2p[0], p2c[1]);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st))
		return 1;
	return rc ? rc : WEXITSTATUS(st);
}
