/*
 * send_recv: the smallest libmetaroce program. The server accepts one
 * connection, receives one message, prints it and answers; the client
 * sends "hello" and prints the answer.
 *
 *   METAROCE_APP_SOCKET=/run/metaroce/app.sock send_recv server
 *   METAROCE_APP_SOCKET=...                    send_recv client PEER [PORT]
 *
 * PEER is the numeric address of the server's metarocd, PORT its service
 * port (default: the same as the local daemon's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metaroce.h>

#define SERVICE 7001
#define BUF 4096

static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "send_recv: %s: %s\n", what, mrc_strerror(rc));
		exit(1);
	}
}

/* Wait for one completion and insist that it succeeded. */
static mrc_wc wait_one(mrc_ctx *ctx)
{
	mrc_wc wc;
	check(mrc_wait_cq(ctx, &wc, 1, 10000), "waiting for a completion");
	if (wc.status != MRC_WC_SUCCESS) {
		fprintf(stderr, "send_recv: work request %llu: %s\n", (unsigned long long)wc.wr_id,
			mrc_wc_status_str(wc.status));
		exit(1);
	}
	return wc;
}

int main(int argc, char **argv)
{
	int server = argc >= 2 && !strcmp(argv[1], "server");
	if (!server && (argc < 3 || strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: send_recv server | send_recv client PEER [PORT]\n");
		return 2;
	}
	mrc_session *s;
	mrc_ctx *ctx;
	void *mem;
	mrc_mr *mr;
	mrc_conn *conn;
	check(mrc_session_open(NULL, "send_recv", &s), "attach to metarocd");
	check(mrc_ctx_new(s, 64, 0, &ctx), "context");
	/* Memory the daemon can reach: from mrc_alloc(), then registered. */
	check(mrc_alloc(s, BUF, &mem), "alloc");
	check(mrc_reg_mr(s, mem, BUF, MRC_ACCESS_LOCAL_WRITE, &mr), "register");
	char *rx = mem, *tx = (char *)mem + BUF / 2;

	if (server) {
		mrc_listener *l;
		check(mrc_listen(s, SERVICE, ctx, 1, &l), "listen");
		printf("listening\n");
		fflush(stdout);
		check(mrc_accept(l, -1, &conn), "accept");
		check(mrc_post_recv(ctx, conn, 0, rx, BUF / 2, mr, 1, 0), "post receive");
		mrc_wc wc = wait_one(ctx);
		printf("received %u bytes: %.*s\n", wc.byte_len, (int)wc.byte_len, rx);
		int n = snprintf(tx, BUF / 2, "got your %u bytes", wc.byte_len);
		check(mrc_post_send(ctx, conn, 0, tx, (uint32_t)n, mr, 2, 0), "post send");
		wait_one(ctx);
		/* The client closes once it has the answer. */
		mrc_event ev;
		while (mrc_get_event(s, &ev, 10000) == 0 && ev.conn != conn)
			;
		mrc_close(conn, 0);
		mrc_unlisten(l);
	} else {
		mrc_conn_attr attr = {.nstreams = 1};
		uint16_t port = argc > 3 ? (uint16_t)atoi(argv[3]) : 0;
		check(mrc_connect(s, ctx, argv[2], port, SERVICE, &attr, &conn), "connect");
		check(mrc_conn_wait_established(conn, 10000), "connect");
		/* The answer's buffer first, then the message. */
		check(mrc_post_recv(ctx, conn, 0, rx, BUF / 2, mr, 1, 0), "post receive");
		int n = snprintf(tx, BUF / 2, "hello from libmetaroce");
		check(mrc_post_send(ctx, conn, 0, tx, (uint32_t)n, mr, 2, 0), "post send");
		int got_answer = 0;
		while (!got_answer) {
			mrc_wc wc = wait_one(ctx);
			if (wc.wr_id == 1) {
				printf("answer: %.*s\n", (int)wc.byte_len, rx);
				got_answer = 1;
			}
		}
		check(mrc_close(conn, 0), "close");
	}
	mrc_dereg_mr(mr);
	mrc_free(s, mem);
	mrc_ctx_del(ctx);
	mrc_session_close(s);
	return 0;
}
