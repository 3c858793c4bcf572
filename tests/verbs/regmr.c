/*
 * A verbs program (linked against the system's libibverbs, run under
 * metaroce-run) that checks what perftest does not: ibv_reg_mr on ordinary
 * memory (malloc at an odd address, memalign, an anonymous mapping, a huge
 * page mapping when the system has huge pages) keeps its contents and its
 * neighbours usable; RDMA WRITE into each kind of memory places every byte;
 * RDMA READ from each kind of memory returns every byte, and a READ after
 * a WRITE to the same bytes returns the written ones;
 * separate send and receive CQs, unsignaled sends, a completion channel;
 * the last byte of a WRITE lands last; RC error semantics and byte-exact
 * bounds (a WRITE one byte past a region fails REM_ACCESS, everything after
 * it flushes, posts after it flush at once). On a second QP: many more
 * unsignaled WRITEs than max_send_wr, one in 16 signaled (as perftest
 * posts them), give only the signaled completions and every byte; an
 * unsignaled WRITE that fails still completes with its error and flushes
 * what follows.
 *
 * Usage: regmr SOCKET_A SOCKET_B. The process forks: the child attaches to
 * daemon B (responder), the parent to daemon A (requester); they exchange
 * QP numbers, GIDs, addresses and rkeys through pipes. Exit 0 when every
 * check passed, 77 when the verbs device is missing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NKIND 4
#define SZ_MALLOC 100003
#define SZ_ALIGN (1 << 20)
#define SZ_ANON (1 << 20)
#define SZ_HUGE (2 << 20)
#define LBL_ROUNDS 20 /* last-byte-last rounds of a 1 MiB WRITE */

static const char *const kind_name[NKIND] = {"malloc+7", "memalign", "anonymous mmap",
					     "huge-page mmap"};

#define CHECK(c, ...)                                                  \
	do {                                                           \
		if (!(c)) {                                            \
			fprintf(stderr, "FAIL %s: ", who);             \
			fprintf(stderr, __VA_ARGS__);                  \
			fprintf(stderr, "\n");                         \
			exit(1);                                       \
		}                                                      \
	} while (0)

static const char *who = "?";

struct info {
	uint32_t qpn, qpn2;
	union ibv_gid gid;
	uint64_t addr[NKIND];
	uint32_t rkey[NKIND];
	uint32_t len[NKIND];
};

static uint8_t pat(int kind, size_t i, int side)
{
	return (uint8_t)(i * 31 + (size_t)kind * 7 + (size_t)side * 101 + (i >> 11));
}

static void *alloc_kind(int k, size_t *len, int *have)
{
	*have = 1;
	switch (k) {
	case 0: {
		*len = SZ_MALLOC;
		uint8_t *p = malloc(SZ_MALLOC + 16);
		return p ? p + 7 : NULL;
	}
	case 1: *len = SZ_ALIGN; return memalign(4096, SZ_ALIGN);
	case 2: {
		*len = SZ_ANON;
		void *p = mmap(NULL, SZ_ANON, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	default: {
		*len = SZ_HUGE;
		void *p = mmap(NULL, SZ_HUGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p == MAP_FAILED) {
			*have = 0; /* no huge pages reserved: fall back to 4 KiB pages */
			p = mmap(NULL, SZ_HUGE, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		}
		return p == MAP_FAILED ? NULL : p;
	}
	}
}

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

/* From INIT: RTR to the peer's QP, then RTS. */
static void to_rts(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *dgid)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
				  .dest_qp_num = dest_qpn, .max_dest_rd_atomic = 4,
				  .min_rnr_timer = 12,
				  .ah_attr = {.is_global = 1, .port_num = 1,
					      .grh = {.dgid = *dgid, .sgid_index = 0, .hop_limit = 1}}};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
	      "to RTR");
	at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
				  .rnr_retry = 7, .max_rd_atomic = 4};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					      IBV_QP_MAX_QP_RD_ATOMIC),
	      "to RTS");
}

/* INIT, then RTR to the peer's QP, then RTS. */
static void bring_up(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *dgid)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS),
	      "to INIT");
	to_rts(qp, dest_qpn, dgid);
}

#define UNSIG_ROUNDS 8 /* of 16 WRITEs of 4 KiB, the last signaled */
#define UNSIG_SEND_WR 32 /* qp2's max_send_wr: fewer than the WRITEs posted */

/* On qp2: unsignaled WRITEs, one in 16 signaled; then an unsignaled WRITE
 * that fails. */
static void unsignaled_checks(struct ibv_pd *pd, struct ibv_qp *qp2, struct ibv_cq *cq2,
			      uint8_t *src, uint32_t src_lkey, const struct info *peer)
{
	struct ibv_wc wc;
	struct ibv_send_wr *bad;
	const uint32_t chunk = 4096, total = UNSIG_ROUNDS * 16 * chunk;
	for (uint32_t i = 0; i < total; i++)
		src[i] = (uint8_t)(i * 7 + 3 + (i >> 9));
	for (int r = 0; r < UNSIG_ROUNDS; r++) {
		for (int j = 0; j < 16; j++) {
			uint32_t n = (uint32_t)(r * 16 + j);
			struct ibv_sge sg = {.addr = (uintptr_t)src + (uint64_t)n * chunk,
					     .length = chunk, .lkey = src_lkey};
			struct ibv_send_wr w = {.wr_id = 1000 + n, .sg_list = &sg, .num_sge = 1,
						.opcode = IBV_WR_RDMA_WRITE,
						.send_flags = j == 15 ? IBV_SEND_SIGNALED : 0,
						.wr.rdma = {.remote_addr = peer->addr[1] +
									   (uint64_t)n * chunk,
							    .rkey = peer->rkey[1]}};
			int rc = ibv_post_send(qp2, &w, &bad);
			CHECK(!rc, "round %d: post WRITE %d of 16: %s (the unsignaled WRITEs before "
				   "the last signaled completion must have left the send queue)",
			      r, j, strerror(rc));
		}
		wait_wc(cq2, &wc);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1000 + (uint64_t)r * 16 + 15,
		      "round %d: the signaled WRITE is the only completion: wr_id %llu %s", r,
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	}
	CHECK(ibv_poll_cq(cq2, 1, &wc) == 0, "no completion of an unsignaled WRITE");
	/* Every byte arrived: READ them back. */
	uint8_t *rb = calloc(1, total);
	CHECK(rb, "calloc");
	struct ibv_mr *rmr = ibv_reg_mr(pd, rb, total, IBV_ACCESS_LOCAL_WRITE);
	CHECK(rmr, "ibv_reg_mr of the READ sink: %s", strerror(errno));
	struct ibv_sge rs = {.addr = (uintptr_t)rb, .length = total, .lkey = rmr->lkey};
	struct ibv_send_wr rw = {.wr_id = 1999, .sg_list = &rs, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = peer->addr[1], .rkey = peer->rkey[1]}};
	CHECK(!ibv_post_send(qp2, &rw, &bad), "post READ");
	wait_wc(cq2, &wc);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1999, "READ back: wr_id %llu %s",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	CHECK(!memcmp(rb, src, total), "the bytes of the unsignaled WRITEs are in the peer's memory");
	ibv_dereg_mr(rmr);
	free(rb);
	printf("%s: %d WRITEs of 4 KiB, one in 16 signaled, through a send queue of %d: "
	       "%d completions, every byte in place\n",
	       who, UNSIG_ROUNDS * 16, UNSIG_SEND_WR, UNSIG_ROUNDS);

	/* An unsignaled WRITE one byte past the peer's malloc+7 region, an
	 * unsignaled good one and a signaled good one behind it. */
	struct ibv_sge sg = {.addr = (uintptr_t)src, .length = 1, .lkey = src_lkey};
	struct ibv_send_wr w[3];
	for (int i = 0; i < 3; i++)
		w[i] = (struct ibv_send_wr){.wr_id = 700 + (uint64_t)i, .sg_list = &sg, .num_sge = 1,
					    .opcode = IBV_WR_RDMA_WRITE,
					    .next = i < 2 ? &w[i + 1] : NULL,
					    .wr.rdma = {.remote_addr = peer->addr[1],
							.rkey = peer->rkey[1]}};
	w[0].wr.rdma.remote_addr = peer->addr[0] + peer->len[0];
	w[0].wr.rdma.rkey = peer->rkey[0];
	w[2].send_flags = IBV_SEND_SIGNALED;
	CHECK(!ibv_post_send(qp2, &w[0], &bad), "post bad unsignaled WRITE + 2 good");
	static const enum ibv_wc_status want[3] = {IBV_WC_REM_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR,
						   IBV_WC_WR_FLUSH_ERR};
	for (int i = 0; i < 3; i++) {
		wait_wc(cq2, &wc);
		CHECK(wc.wr_id == 700 + (uint64_t)i && wc.status == want[i],
		      "completion %d after an unsignaled WRITE past the region: wr_id %llu %s, "
		      "want %d %s",
		      i, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), 700 + i,
		      ibv_wc_status_str(want[i]));
	}
	CHECK(ibv_poll_cq(cq2, 1, &wc) == 0, "nothing more");
	printf("%s: an unsignaled WRITE past the region -> REM_ACCESS_ERR, then WR_FLUSH_ERR for "
	       "the unsignaled and the signaled one after it\n",
	       who);
}

static int side(int is_req, int rfd, int wfd)
{
	who = is_req ? "requester" : "responder";
	int num;
	struct ibv_device **devs = ibv_get_device_list(&num);
	if (!devs || num < 1) {
		fprintf(stderr, "SKIP: no verbs device (run under metaroce-run)\n");
		exit(77);
	}
	CHECK(!strcmp(ibv_get_device_name(devs[0]), "metaroce0"), "device %s is not metaroce0",
	      ibv_get_device_name(devs[0]));
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");

	/* Memory of every kind, filled before it is registered. */
	uint8_t *buf[NKIND];
	size_t len[NKIND];
	int have[NKIND];
	struct ibv_mr *mr[NKIND];
	char *neighbour = malloc(64); /* likely on the malloc buffer's pages */
	strcpy(neighbour, "neighbour");
	for (int k = 0; k < NKIND; k++) {
		buf[k] = alloc_kind(k, &len[k], &have[k]);
		CHECK(buf[k], "allocating %s", kind_name[k]);
		for (size_t i = 0; i < len[k]; i++)
			buf[k][i] = pat(k, i, is_req);
		mr[k] = ibv_reg_mr(pd, buf[k], len[k],
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ);
		CHECK(mr[k], "ibv_reg_mr on %s memory: %s", kind_name[k], strerror(errno));
		for (size_t i = 0; i < len[k]; i++)
			CHECK(buf[k][i] == pat(k, i, is_req), "%s: byte %zu changed by ibv_reg_mr",
			      kind_name[k], i);
		printf("%s: registered %s memory (%zu bytes at %p)%s\n", who, kind_name[k], len[k],
		       (void *)buf[k], have[k] ? "" : " [no huge pages here: normal pages]");
	}
	CHECK(!strcmp(neighbour, "neighbour"), "a neighbouring heap object changed");
	strcpy(neighbour, "still usable");
	free(malloc(1000)); /* the heap around the moved pages still works */

	/* Separate send and receive CQs; the receive CQ on a channel. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch && ch->fd >= 0, "ibv_create_comp_channel");
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	CHECK(scq && rcq, "ibv_create_cq");
	struct ibv_qp_init_attr qa = {.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 64, .max_recv_wr = 64,
					      .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(qp, "ibv_create_qp: %s", strerror(errno));
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq2, "ibv_create_cq");
	struct ibv_qp_init_attr qa2 = {.send_cq = cq2, .recv_cq = cq2, .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = UNSIG_SEND_WR, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp2 = ibv_create_qp(pd, &qa2);
	CHECK(qp2, "ibv_create_qp: %s", strerror(errno));

	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS),
	      "to INIT");

	/* A receive posted in INIT, before any connection exists. */
	static char msg[64]; /* in the data segment: registered like any memory */
	struct ibv_mr *mmr = ibv_reg_mr(pd, msg, sizeof(msg), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mmr, "ibv_reg_mr of a stack buffer: %s", strerror(errno));
	if (!is_req) {
		struct ibv_sge sg = {.addr = (uintptr_t)msg, .length = sizeof(msg), .lkey = mmr->lkey};
		struct ibv_recv_wr rw = {.wr_id = 77, .sg_list = &sg, .num_sge = 1}, *bad;
		CHECK(!ibv_post_recv(qp, &rw, &bad), "ibv_post_recv in INIT");
	}

	struct info me = {.qpn = qp->qp_num, .qpn2 = qp2->qp_num}, peer;
	CHECK(!ibv_query_gid(ctx, 1, 0, &me.gid), "ibv_query_gid");
	for (int k = 0; k < NKIND; k++) {
		me.addr[k] = (uintptr_t)buf[k];
		me.rkey[k] = mr[k]->rkey;
		me.len[k] = (uint32_t)len[k];
	}
	xwrite(wfd, &me, sizeof(me));
	xread(rfd, &peer, sizeof(peer));

	/* More READs than the device offers (max_qp_rd_atom) is refused. */
	struct ibv_device_attr da;
	CHECK(!ibv_query_device(ctx, &da) && da.max_qp_rd_atom == 16 &&
		      da.max_qp_init_rd_atom == 16,
	      "the device offers 16 READs per QP each way");
	struct ibv_qp_attr big = {.max_dest_rd_atomic = 17};
	CHECK(ibv_modify_qp(qp, &big, IBV_QP_MAX_DEST_RD_ATOMIC) == EINVAL,
	      "max_dest_rd_atomic 17 > max_qp_rd_atom is refused with EINVAL");
	to_rts(qp, peer.qpn, &peer.gid);
	bring_up(qp2, peer.qpn2, &peer.gid);

	struct ibv_wc wc;
	if (is_req) {
		/* Every kind of our memory into the peer's memory of the next
		 * kind; unsignaled, then one signaled SEND that completes after
		 * them (RC order). */
		for (int k = 0; k < NKIND; k++) {
			int t = (k + 1) % NKIND;
			uint32_t n = len[k] < peer.len[t] ? (uint32_t)len[k] : peer.len[t];
			struct ibv_sge sg = {.addr = (uintptr_t)buf[k], .length = n, .lkey = mr[k]->lkey};
			struct ibv_send_wr w = {.wr_id = 100 + (uint64_t)k, .sg_list = &sg, .num_sge = 1,
						.opcode = IBV_WR_RDMA_WRITE,
						.wr.rdma = {.remote_addr = peer.addr[t],
							    .rkey = peer.rkey[t]}},
					   *bad;
			CHECK(!ibv_post_send(qp, &w, &bad), "post WRITE %d", k);
		}
		strcpy(msg, "done");
		struct ibv_sge sg = {.addr = (uintptr_t)msg, .length = 5, .lkey = mmr->lkey};
		struct ibv_send_wr w = {.wr_id = 200, .sg_list = &sg, .num_sge = 1,
					.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		CHECK(!ibv_post_send(qp, &w, &bad), "post SEND");
		wait_wc(scq, &wc);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 200 && wc.opcode == IBV_WC_SEND,
		      "the signaled SEND is the only completion (unsignaled WRITEs give none): "
		      "wr_id %llu status %s", (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status));
		CHECK(ibv_poll_cq(scq, 1, &wc) == 0, "no further send completion");
		printf("%s: 4 unsignaled WRITEs and 1 signaled SEND: 1 completion\n", who);

		/* Wait for the responder's check. */
		char ok;
		xread(rfd, &ok, 1);
		CHECK(ok == 'y', "the responder saw wrong data");

		/* RDMA READ the peer's memory of every kind back (it holds
		 * what we wrote) into a buffer of our own, then a WRITE and a
		 * READ of the same bytes: the READ returns the written ones. */
		size_t rlen = SZ_HUGE;
		uint8_t *rb = malloc(rlen);
		CHECK(rb, "malloc");
		struct ibv_mr *rmr = ibv_reg_mr(pd, rb, rlen, IBV_ACCESS_LOCAL_WRITE);
		CHECK(rmr, "ibv_reg_mr of the READ sink: %s", strerror(errno));
		for (int k = 0; k < NKIND; k++) {
			int t = (k + 1) % NKIND;
			uint32_t n = len[k] < peer.len[t] ? (uint32_t)len[k] : peer.len[t];
			memset(rb, 0, rlen);
			struct ibv_sge rs = {.addr = (uintptr_t)rb, .length = n, .lkey = rmr->lkey};
			struct ibv_send_wr rw = {.wr_id = 500 + (uint64_t)k, .sg_list = &rs,
						 .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
						 .send_flags = IBV_SEND_SIGNALED,
						 .wr.rdma = {.remote_addr = peer.addr[t],
							     .rkey = peer.rkey[t]}},
					   *rbad;
			CHECK(!ibv_post_send(qp, &rw, &rbad), "post READ %d", k);
			wait_wc(scq, &wc);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 500 + (uint64_t)k &&
				      wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == n,
			      "READ of %s memory completes: wr_id %llu %s opcode %d len %u",
			      kind_name[t], (unsigned long long)wc.wr_id,
			      ibv_wc_status_str(wc.status), (int)wc.opcode, wc.byte_len);
			for (size_t i = 0; i < n; i++)
				CHECK(rb[i] == pat(k, i, 1), "READ of %s memory: byte %zu is %u, want %u",
				      kind_name[t], i, rb[i], pat(k, i, 1));
			CHECK(rb[n] == 0, "READ of %s memory: a byte past its length", kind_name[t]);
			printf("%s: READ %u bytes of the peer's %s memory, all correct\n", who, n,
			       kind_name[t]);
		}
		for (size_t i = 0; i < 65536; i++)
			buf[3][i] = (uint8_t)(i * 31 + 5);
		memset(rb, 0, 65536);
		struct ibv_sge ws = {.addr = (uintptr_t)buf[3], .length = 65536, .lkey = mr[3]->lkey};
		struct ibv_sge rs = {.addr = (uintptr_t)rb, .length = 65536, .lkey = rmr->lkey};
		struct ibv_send_wr rw = {.wr_id = 601, .sg_list = &rs, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {.remote_addr = peer.addr[1], .rkey = peer.rkey[1]}};
		struct ibv_send_wr ww = {.wr_id = 600, .sg_list = &ws, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE, .next = &rw,
					 .wr.rdma = {.remote_addr = peer.addr[1], .rkey = peer.rkey[1]}},
				   *rwbad;
		CHECK(!ibv_post_send(qp, &ww, &rwbad), "post WRITE + READ");
		wait_wc(scq, &wc);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 601,
		      "the READ after the unsignaled WRITE completes: wr_id %llu %s",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		CHECK(!memcmp(rb, buf[3], 65536), "the READ after a WRITE returns the written bytes");
		printf("%s: a READ after a WRITE of the same 64 KiB returns the written bytes\n", who);
		ibv_dereg_mr(rmr);
		free(rb);

		/* Last byte last: 1 MiB WRITEs whose last byte the responder
		 * polls; it then checks every other byte at once. */
		for (int r = 0; r < LBL_ROUNDS; r++) {
			for (size_t i = 0; i < SZ_ALIGN; i++)
				buf[1][i] = (uint8_t)(i * 13 + (size_t)r * 7 + (i >> 12));
			buf[1][SZ_ALIGN - 1] = (uint8_t)(0x80 | r);
			struct ibv_sge lsg = {.addr = (uintptr_t)buf[1], .length = SZ_ALIGN,
					      .lkey = mr[1]->lkey};
			struct ibv_send_wr lw = {.wr_id = 400 + (uint64_t)r, .sg_list = &lsg,
						 .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
						 .send_flags = IBV_SEND_SIGNALED,
						 .wr.rdma = {.remote_addr = peer.addr[2], .rkey = peer.rkey[2]}},
					   *lbad;
			CHECK(!ibv_post_send(qp, &lw, &lbad), "post 1 MiB WRITE");
			wait_wc(scq, &wc);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 400 + (uint64_t)r,
			      "1 MiB WRITE %d completes: %s", r, ibv_wc_status_str(wc.status));
			xread(rfd, &ok, 1);
			CHECK(ok == 'y', "round %d: the last byte landed before the others", r);
		}
		printf("%s: %d WRITEs of 1 MiB: the last byte landed last each time\n", who,
		       LBL_ROUNDS);

		unsignaled_checks(pd, qp2, cq2, buf[1], mr[1]->lkey, &peer);

		/* Then an error. */
		/* One byte past the end of the peer's malloc+7 region: on the
		 * same page, so only byte-exact bounds refuse it. */
		struct ibv_sge sg2 = {.addr = (uintptr_t)buf[1], .length = 1, .lkey = mr[1]->lkey};
		struct ibv_send_wr bw = {.wr_id = 300, .sg_list = &sg2, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {.remote_addr = peer.addr[0] + peer.len[0],
						     .rkey = peer.rkey[0]}};
		struct ibv_sge sg3 = {.addr = (uintptr_t)buf[1], .length = 4096, .lkey = mr[1]->lkey};
		struct ibv_send_wr gw = bw;
		gw.wr_id = 301;
		gw.sg_list = &sg3;
		gw.wr.rdma.remote_addr = peer.addr[1];
		gw.wr.rdma.rkey = peer.rkey[1];
		bw.next = &gw;
		CHECK(!ibv_post_send(qp, &bw, &bad), "post bad WRITE + good WRITE");
		wait_wc(scq, &wc);
		CHECK(wc.wr_id == 300 && wc.status == IBV_WC_REM_ACCESS_ERR,
		      "a WRITE one byte past the region's end completes REM_ACCESS_ERR: "
		      "wr_id %llu %s",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		wait_wc(scq, &wc);
		CHECK(wc.wr_id == 301 && wc.status == IBV_WC_WR_FLUSH_ERR,
		      "the next request flushes: wr_id %llu %s", (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status));
		gw.wr_id = 302;
		gw.next = NULL;
		CHECK(!ibv_post_send(qp, &gw, &bad), "post after the error");
		wait_wc(scq, &wc);
		CHECK(wc.wr_id == 302 && wc.status == IBV_WC_WR_FLUSH_ERR,
		      "a post after the error flushes: wr_id %llu %s",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		struct ibv_qp_attr qs;
		struct ibv_qp_init_attr qi;
		CHECK(!ibv_query_qp(qp, &qs, IBV_QP_STATE, &qi) && qs.qp_state == IBV_QPS_ERR,
		      "the QP is in the error state");
		printf("%s: one byte past the region -> REM_ACCESS_ERR, then WR_FLUSH_ERR, QP in "
		       "ERR\n", who);
		xwrite(wfd, "y", 1);
	} else {
		/* The receive posted in INIT completes through the channel. */
		CHECK(!ibv_req_notify_cq(rcq, 0), "ibv_req_notify_cq");
		struct ibv_cq *ecq;
		void *ectx;
		CHECK(!ibv_get_cq_event(ch, &ecq, &ectx) && ecq == rcq, "ibv_get_cq_event");
		ibv_ack_cq_events(ecq, 1);
		wait_wc(rcq, &wc);
		CHECK(wc.wr_id == 77 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
			      wc.byte_len == 5 && !strcmp(msg, "done"),
		      "the receive posted in INIT got the SEND: wr_id %llu %s len %u '%s'",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.byte_len, msg);
		printf("%s: the receive posted in INIT completed via the channel\n", who);
		/* Every byte the requester wrote, nothing else touched. */
		for (int t = 0; t < NKIND; t++) {
			int k = (t + NKIND - 1) % NKIND;
			size_t n = peer.len[k] < len[t] ? peer.len[k] : len[t];
			for (size_t i = 0; i < len[t]; i++) {
				uint8_t want = i < n ? pat(k, i, 1) : pat(t, i, 0);
				if (buf[t][i] != want) {
					xwrite(wfd, "n", 1);
					CHECK(0, "%s memory: byte %zu is %u, want %u", kind_name[t], i,
					      buf[t][i], want);
				}
			}
			printf("%s: %s memory: %zu bytes written, %zu untouched, all correct\n", who,
			       kind_name[t], n, len[t] - n);
		}
		xwrite(wfd, "y", 1);
		/* Last byte last: poll the last byte, then every byte at once. */
		volatile uint8_t *t = buf[2];
		for (int r = 0; r < LBL_ROUNDS; r++) {
			long spins = 0;
			while (t[SZ_ANON - 1] != (uint8_t)(0x80 | r)) {
				if (++spins > 100000)
					usleep(10);
				CHECK(spins < 100000 + 2000000, "round %d: the last byte never came", r);
			}
			size_t bad = SIZE_MAX;
			for (size_t i = 0; i < SZ_ANON - 1 && bad == SIZE_MAX; i++)
				if (t[i] != (uint8_t)(i * 13 + (size_t)r * 7 + (i >> 12)))
					bad = i;
			if (bad != SIZE_MAX)
				fprintf(stderr, "responder: round %d: byte %zu not yet placed when the "
						"last byte was\n", r, bad);
			xwrite(wfd, bad == SIZE_MAX ? "y" : "n", 1);
			CHECK(bad == SIZE_MAX, "round %d: last byte before byte %zu", r, bad);
		}
		printf("%s: %d WRITEs of 1 MiB: every byte in place when the last one was\n", who,
		       LBL_ROUNDS);
		char ok;
		xread(rfd, &ok, 1);
	}
	ibv_destroy_qp(qp2);
	ibv_destroy_cq(cq2);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	ibv_destroy_comp_channel(ch);
	for (int k = 0; k < NKIND; k++)
		CHECK(!ibv_dereg_mr(mr[k]), "ibv_dereg_mr");
	ibv_dereg_mr(mmr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	printf("%s: PASS\n", who);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: regmr SOCKET_A SOCKET_B\n");
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
		return side(0, p2c[0], c2p[1]);
	}
	close(p2c[0]);
	close(c2p[1]);
	setenv("METAROCE_APP_SOCKET", argv[1], 1);
	int rc = side(1, c2p[0], p2c[1]);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st))
		return 1;
	return rc ? rc : WEXITSTATUS(st);
}
