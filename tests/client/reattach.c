/*
 * reattach: an application that outlives its daemon (tests/client/test_faults.py).
 *
 *   reattach server            echo every SEND back, connection after connection
 *   reattach client PEER PORT  verified ping-pong until the local daemon dies
 *                              (mrc_wait_cq() must say MRC_ERR_DAEMON, not hang),
 *                              then attach again once a daemon is back, register
 *                              the same memory, reconnect and ping-pong again
 *
 * The daemon's socket comes from $METAROCE_APP_SOCKET. Output lines (one per
 * step) are what the test waits for.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <metaroce.h>

#define SERVICE 7003
#define MSG 256
#define SLOTS 16

static void fatal(const char *what, int rc)
{
	printf("FATAL %s: %s\n", what, mrc_strerror(rc));
	fflush(stdout);
	exit(1);
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void fill(uint8_t *b, uint64_t seq)
{
	for (int i = 0; i < MSG; i++)
		b[i] = (uint8_t)(seq * 131 + (uint64_t)i * 7 + 1);
}

static int server(void)
{
	mrc_session *s;
	mrc_ctx *ctx;
	void *mem;
	mrc_mr *mr;
	mrc_listener *l;
	int rc;
	if ((rc = mrc_session_open(NULL, "reattach-server", &s)))
		fatal("attach", rc);
	if ((rc = mrc_ctx_new(s, 256, 0, &ctx)))
		fatal("context", rc);
	if ((rc = mrc_alloc(s, SLOTS * MSG, &mem)) ||
	    (rc = mrc_reg_mr(s, mem, SLOTS * MSG, MRC_ACCESS_LOCAL_WRITE, &mr)))
		fatal("memory", rc);
	if ((rc = mrc_listen(s, SERVICE, ctx, 1, &l)))
		fatal("listen", rc);
	say("listening");
	uint8_t *buf = mem;
	for (long nconn = 1; nconn < 1000000; nconn++) {
		mrc_conn *c;
		if ((rc = mrc_accept(l, -1, &c)))
			fatal("accept", rc);
		say("connection %ld", nconn);
		for (int k = 0; k < SLOTS / 2; k++)
			if ((rc = mrc_post_recv(ctx, c, 0, buf + k * MSG, MSG, mr, (uint64_t)k,
						MRC_POST_MORE)))
				fatal("post receive", rc);
		/* Receives are posted: tell the client it may send (a SEND
		 * before that would meet no receive and be retried, RNR). */
		if ((rc = mrc_post_send(ctx, c, 0, buf + (SLOTS - 1) * MSG, 1, mr, 99, 0)))
			fatal("post ready", rc);
		uint32_t h = mrc_conn_handle(c);
		while (mrc_conn_status(c) == MRC_CONN_ESTABLISHED) {
			mrc_wc wc[16];
			int n = mrc_wait_cq(ctx, wc, 16, 200);
			if (n == MRC_ERR_TIMEOUT)
				continue;
			if (n < 0)
				fatal("completions", n);
			for (int i = 0; i < n; i++) {
				if (wc[i].conn != h)
					continue; /* an earlier connection's flushes */
				if (wc[i].status != MRC_WC_SUCCESS) {
					say("completion %llu: %s", (unsigned long long)wc[i].wr_id,
					    mrc_wc_status_str(wc[i].status));
					continue;
				}
				if (wc[i].opcode != MRC_WC_OP_RECV)
					continue;
				/* Echo from the other half, then give the slot back. */
				uint64_t k = wc[i].wr_id;
				uint8_t *echo = buf + (SLOTS / 2 + k) * MSG;
				memcpy(echo, buf + k * MSG, wc[i].byte_len);
				mrc_post_send(ctx, c, 0, echo, wc[i].byte_len, mr, 100 + k, MRC_POST_MORE);
				mrc_post_recv(ctx, c, 0, buf + k * MSG, MSG, mr, k, 0);
			}
		}
		say("connection ended %ld", nconn);
		mrc_close(c, 1);
	}
	return 0;
}

/* count verified round trips; 0, or the error that stopped it. */
static int pingpong(mrc_ctx *ctx, mrc_conn *c, mrc_mr *mr, uint8_t *mem, long count,
		    long *done)
{
	uint8_t *ping = mem, *pong = mem + MSG;
	for (long q = 0; q < count; q++) {
		fill(ping, (uint64_t)q);
		memset(pong, 0, MSG);
		int rc;
		if ((rc = mrc_post_recv(ctx, c, 0, pong, MSG, mr, 1, MRC_POST_MORE)) ||
		    (rc = mrc_post_send(ctx, c, 0, ping, MSG, mr, 2, 0)))
			return rc;
		int got = 0, sent = 0;
		while (!got || !sent) {
			mrc_wc wc[4];
			int n = mrc_wait_cq(ctx, wc, 4, 20000);
			if (n < 0)
				return n;
			for (int i = 0; i < n; i++) {
				if (wc[i].status != MRC_WC_SUCCESS) {
					say("round trip %ld: %s", q, mrc_wc_status_str(wc[i].status));
					return MRC_ERR_CLOSED;
				}
				if (wc[i].wr_id == 1) {
					if (wc[i].byte_len != MSG || memcmp(ping, pong, MSG)) {
						printf("VERIFY echo %ld differs\n", q);
						exit(1);
					}
					got = 1;
				} else {
					sent = 1;
				}
			}
		}
		(*done)++;
		if (*done % 500 == 0)
			say("round trips %ld", *done);
	}
	return 0;
}

/* The server's one-byte "receives posted" message. */
static int wait_ready(mrc_ctx *ctx, mrc_conn *c, mrc_mr *mr, uint8_t *mem)
{
	int rc = mrc_post_recv(ctx, c, 0, mem + MSG, MSG, mr, 7, 0);
	if (rc)
		return rc;
	for (;;) {
		mrc_wc wc[4];
		int n = mrc_wait_cq(ctx, wc, 4, 20000);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			if (wc[i].conn != mrc_conn_handle(c))
				continue; /* an earlier attempt's flushes */
			if (wc[i].status != MRC_WC_SUCCESS)
				return MRC_ERR_CLOSED;
			if (wc[i].wr_id == 7)
				return 0;
		}
	}
}

static int client(const char *peer, uint16_t port)
{
	void *mem;
	int rc;
	/* Memory is not tied to a session: it outlives the daemon. */
	if ((rc = mrc_alloc(NULL, 2 * MSG, &mem)))
		fatal("alloc", rc);
	for (int round = 1; round <= 2; round++) {
		mrc_session *s = NULL;
		/* Attach, waiting for a daemon to be there. */
		for (int i = 0; (rc = mrc_session_open(NULL, "reattach-client", &s)); i++) {
			if (rc != MRC_ERR_DAEMON || i > 600)
				fatal("attach", rc);
			usleep(100000);
		}
		say("attached round %d", round);
		mrc_ctx *ctx;
		mrc_mr *mr;
		mrc_conn *c;
		if ((rc = mrc_ctx_new(s, 64, 0, &ctx)))
			fatal("context", rc);
		if ((rc = mrc_reg_mr(s, mem, 2 * MSG, MRC_ACCESS_LOCAL_WRITE, &mr)))
			fatal("register", rc);
		mrc_conn_attr attr = {.nstreams = 1};
		/* The peer may still hold our previous connection (it learns of
		 * our daemon's death only by timeout) and be refusing. */
		for (int i = 0;; i++) {
			if ((rc = mrc_connect(s, ctx, peer, port, SERVICE, &attr, &c)))
				fatal("connect", rc);
			rc = mrc_conn_wait_established(c, 10000);
			if (rc == 0)
				rc = wait_ready(ctx, c, mr, mem);
			if (rc == 0)
				break;
			mrc_close(c, 1);
			if (i > 60)
				fatal("connect", rc);
			sleep(1);
		}
		long done = 0;
		/* Round 1 runs until the daemon is killed; round 2 a fixed count. */
		rc = pingpong(ctx, c, mr, mem, round == 1 ? 100000000 : 2000, &done);
		if (round == 1) {
			if (rc != MRC_ERR_DAEMON)
				fatal("round 1 ended, but not with MRC_ERR_DAEMON", rc ? rc : MRC_ERR_INVAL);
			say("daemon gone: %s after %ld round trips", mrc_strerror(rc), done);
			/* Everything else says so too, and frees. */
			mrc_wc wc;
			if ((rc = mrc_poll_cq(ctx, &wc, 1)) != MRC_ERR_DAEMON &&
			    (rc = mrc_poll_cq(ctx, &wc, 1)) != MRC_ERR_DAEMON)
				fatal("poll after death", rc);
			mrc_close(c, 1);
			mrc_dereg_mr(mr);
			mrc_ctx_del(ctx);
			mrc_session_close(s);
			continue;
		}
		if (rc)
			fatal("round 2", rc);
		say("reattached ok: %ld verified round trips", done);
		mrc_close(c, 0);
		mrc_dereg_mr(mr);
		mrc_ctx_del(ctx);
		mrc_session_close(s);
	}
	mrc_free(NULL, mem);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "server"))
		return server();
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], (uint16_t)atoi(argv[3]));
	fprintf(stderr, "usage: reattach server | reattach client PEER PORT\n");
	return 2;
}
