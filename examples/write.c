/*
 * write: one-sided RDMA WRITE with immediate. The server registers a buffer
 * peers may write, sends its address and rkey to the client, and waits for
 * the WRITE_IMM's notification (which consumes a posted receive and
 * carries the immediate value: here the byte count). The client writes a
 * string straight into the server's memory.
 *
 *   METAROCE_APP_SOCKET=... write server
 *   METAROCE_APP_SOCKET=... write client PEER [PORT]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metaroce.h>

#define SERVICE 7002
#define BUF 8192

typedef struct key_msg {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
} key_msg;

static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "write: %s: %s\n", what, mrc_strerror(rc));
		exit(1);
	}
}

static mrc_wc wait_one(mrc_ctx *ctx)
{
	mrc_wc wc;
	check(mrc_wait_cq(ctx, &wc, 1, 10000), "waiting for a completion");
	if (wc.status != MRC_WC_SUCCESS) {
		fprintf(stderr, "write: work request %llu: %s\n", (unsigned long long)wc.wr_id,
			mrc_wc_status_str(wc.status));
		exit(1);
	}
	return wc;
}

int main(int argc, char **argv)
{
	int server = argc >= 2 && !strcmp(argv[1], "server");
	if (!server && (argc < 3 || strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: write server | write client PEER [PORT]\n");
		return 2;
	}
	mrc_session *s;
	mrc_ctx *ctx;
	void *mem;
	mrc_mr *mr;
	mrc_conn *conn;
	check(mrc_session_open(NULL, "write-example", &s), "attach to metarocd");
	check(mrc_ctx_new(s, 64, 0, &ctx), "context");
	check(mrc_alloc(s, BUF, &mem), "alloc");
	char *target = mem;                       /* what the peer writes (server) */
	key_msg *key = (key_msg *)((char *)mem + BUF / 2); /* the key message */

	if (server) {
		check(mrc_reg_mr(s, mem, BUF, MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE, &mr),
		      "register");
		mrc_listener *l;
		check(mrc_listen(s, SERVICE, ctx, 1, &l), "listen");
		printf("listening\n");
		fflush(stdout);
		check(mrc_accept(l, -1, &conn), "accept");
		/* A WRITE_IMM consumes a receive (it places nothing in it). */
		check(mrc_post_recv(ctx, conn, 0, NULL, 0, NULL, 1, 0), "post receive");
		*key = (key_msg){.addr = (uint64_t)(uintptr_t)target, .rkey = mrc_mr_rkey(mr),
				 .len = BUF / 2};
		check(mrc_post_send(ctx, conn, 0, key, sizeof(*key), mr, 2, 0), "post send");
		for (;;) {
			mrc_wc wc = wait_one(ctx);
			if (wc.opcode == MRC_WC_OP_RECV_WRITE_IMM) {
				printf("written: %.*s (imm %u)\n", (int)wc.imm, target, wc.imm);
				break;
			}
		}
		mrc_event ev;
		while (mrc_get_event(s, &ev, 10000) == 0 && ev.conn != conn)
			;
		mrc_close(conn, 0);
		mrc_unlisten(l);
	} else {
		check(mrc_reg_mr(s, mem, BUF, MRC_ACCESS_LOCAL_WRITE, &mr), "register");
		mrc_conn_attr attr = {.nstreams = 1};
		uint16_t port = argc > 3 ? (uint16_t)atoi(argv[3]) : 0;
		check(mrc_connect(s, ctx, argv[2], port, SERVICE, &attr, &conn), "connect");
		check(mrc_conn_wait_established(conn, 10000), "connect");
		check(mrc_post_recv(ctx, conn, 0, key, sizeof(*key), mr, 1, 0), "post receive");
		mrc_wc wc = wait_one(ctx);
		if (wc.byte_len != sizeof(*key)) {
			fprintf(stderr, "write: the key message has %u bytes\n", wc.byte_len);
			return 1;
		}
		char *src = (char *)mem + 64;
		int n = snprintf(src, 256, "hello, written into your memory");
		check(mrc_post_write_imm(ctx, conn, 0, src, (uint32_t)n, mr, key->addr, key->rkey,
					 (uint32_t)n, 3, 0),
		      "post write");
		wait_one(ctx);
		printf("wrote %d bytes at 0x%" PRIx64 "\n", n, key->addr);
		check(mrc_close(conn, 0), "close");
	}
	mrc_dereg_mr(mr);
	mrc_free(s, mem);
	mrc_ctx_del(ctx);
	mrc_session_close(s);
	return 0;
}
