/*
 * threads: the library's threading model against real daemons
 * (tests/client/test_threads.py).
 *
 *   threads server             one session, one context: accept connections and
 *                              echo every SEND back on its connection
 *   threads client PEER PORT   one session shared by NTHREADS threads, each with
 *                              its own context and connection, doing verified
 *                              ping-pongs while it registers and deregisters
 *                              memory (control calls through the shared session);
 *                              thread 0 sleeps in epoll on mrc_ctx_fd() after
 *                              mrc_ctx_arm() instead of in mrc_wait_cq(); one
 *                              more thread sits in mrc_get_event() meanwhile
 *
 * The daemon's socket comes from $METAROCE_APP_SOCKET. Exit 0 when every
 * round trip of every thread verified.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <metaroce.h>

#define SERVICE 7004
#define NTHREADS 4
#define ROUNDS 3000
#define MSG 512
#define MAXCONN 64
#define RECVS 8

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void check(int rc, const char *what)
{
	if (rc < 0) {
		say("FATAL %s: %s", what, mrc_strerror(rc));
		exit(1);
	}
}

/* ---- server ---- */

static int server(void)
{
	mrc_session *s;
	mrc_ctx *ctx;
	mrc_listener *l;
	void *mem;
	mrc_mr *mr;
	check(mrc_session_open(NULL, "threads-server", &s), "attach");
	check(mrc_ctx_new(s, 1024, 0, &ctx), "context");
	/* Per connection slot: RECVS receive buffers, RECVS echo buffers. */
	size_t len = (size_t)MAXCONN * 2 * RECVS * MSG;
	check(mrc_alloc(s, len, &mem), "alloc");
	check(mrc_reg_mr(s, mem, len, MRC_ACCESS_LOCAL_WRITE, &mr), "register");
	check(mrc_listen(s, SERVICE, ctx, 1, &l), "listen");
	say("listening");
	mrc_conn *conns[MAXCONN] = {0};
	uint8_t *base = mem;
	for (;;) {
		mrc_conn *c;
		int rc = mrc_accept(l, 0, &c);
		if (rc == 0) {
			int k = 0;
			while (k < MAXCONN && conns[k])
				k++;
			if (k == MAXCONN) {
				mrc_close(c, 1);
				continue;
			}
			conns[k] = c;
			for (int i = 0; i < RECVS; i++)
				check(mrc_post_recv(ctx, c, 0, base + ((size_t)k * 2 * RECVS + (size_t)i) * MSG,
						    MSG, mr, (uint64_t)k << 8 | (uint64_t)i, MRC_POST_MORE),
				      "post receive");
			/* Receives posted: the client may send now (before, its
			 * SEND would meet no receive and be retried, RNR). */
			check(mrc_post_send(ctx, c, 0, base + ((size_t)k * 2 + 1) * RECVS * MSG, 1, mr,
					    (uint64_t)k << 8 | 0xff, 0),
			      "post ready");
		} else if (rc != MRC_ERR_TIMEOUT) {
			check(rc, "accept");
		}
		mrc_wc wc[64];
		int n = mrc_wait_cq(ctx, wc, 64, 20);
		if (n == MRC_ERR_TIMEOUT)
			n = 0;
		check(n, "completions");
		for (int i = 0; i < n; i++) {
			int k = (int)(wc[i].wr_id >> 8 & 0xff), b = (int)(wc[i].wr_id & 0xff);
			if (k >= MAXCONN || !conns[k] || mrc_conn_handle(conns[k]) != wc[i].conn)
				continue;
			if (wc[i].status != MRC_WC_SUCCESS) {
				say("connection %d: request %llu: %s: closing it", k,
				    (unsigned long long)wc[i].wr_id, mrc_wc_status_str(wc[i].status));
				mrc_close(conns[k], 1);
				conns[k] = NULL;
				continue;
			}
			if (wc[i].opcode != MRC_WC_OP_RECV)
				continue;
			uint8_t *rx = base + ((size_t)k * 2 * RECVS + (size_t)b) * MSG;
			uint8_t *tx = rx + (size_t)RECVS * MSG;
			memcpy(tx, rx, wc[i].byte_len);
			mrc_post_send(ctx, conns[k], 0, tx, wc[i].byte_len, mr,
				      (uint64_t)k << 8 | 0xfe, MRC_POST_MORE);
			mrc_post_recv(ctx, conns[k], 0, rx, MSG, mr, wc[i].wr_id, MRC_POST_MORE);
		}
		mrc_submit(ctx);
		for (int k = 0; k < MAXCONN; k++) {
			if (conns[k] && mrc_conn_status(conns[k]) != MRC_CONN_ESTABLISHED) {
				say("connection %d: %s", k,
				    mrc_conn_status(conns[k]) == MRC_CONN_CLOSED ? "closed by the client"
										 : mrc_strerror(mrc_conn_error(conns[k])));
				mrc_close(conns[k], 1);
				conns[k] = NULL;
			}
		}
	}
	return 0;
}

/* ---- client ---- */

static mrc_session *S;
static const char *PEER;
static uint16_t PORT;
static atomic_int failures, stop_events;

static void fill(uint8_t *b, unsigned t, unsigned q)
{
	for (int i = 0; i < MSG; i++)
		b[i] = (uint8_t)(t * 59 + q * 131 + (unsigned)i * 7 + 1);
}

/* Wait for n completions on ctx; thread 0 does it through epoll. */
static int reap(mrc_ctx *ctx, int use_epoll, int epfd, mrc_wc *wc, int max)
{
	if (!use_epoll)
		return mrc_wait_cq(ctx, wc, max, 20000);
	for (;;) {
		int n = mrc_poll_cq(ctx, wc, max);
		if (n != 0)
			return n;
		int ready = mrc_ctx_arm(ctx);
		if (ready < 0)
			return ready;
		if (ready > 0)
			continue; /* arrived meanwhile: do not sleep */
		struct epoll_event ev;
		int r = epoll_wait(epfd, &ev, 1, 20000);
		if (r == 0)
			return MRC_ERR_TIMEOUT;
	}
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	mrc_ctx *ctx;
	mrc_conn *c;
	void *mem;
	mrc_mr *mr;
	int epfd = -1;
	check(mrc_ctx_new(S, 64, 0, &ctx), "context");
	if (t == 0) {
		epfd = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN};
		if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, mrc_ctx_fd(ctx), &ev) < 0) {
			say("FATAL epoll");
			exit(1);
		}
	}
	check(mrc_alloc(S, 2 * MSG, &mem), "alloc");
	check(mrc_reg_mr(S, mem, 2 * MSG, MRC_ACCESS_LOCAL_WRITE, &mr), "register");
	mrc_conn_attr attr = {.nstreams = 1};
	check(mrc_connect(S, ctx, PEER, PORT, SERVICE, &attr, &c), "connect");
	check(mrc_conn_wait_established(c, 20000), "connect");
	uint8_t *ping = mem, *pong = (uint8_t *)mem + MSG;
	/* The server's "receives posted" message first. */
	check(mrc_post_recv(ctx, c, 0, pong, MSG, mr, 3, 0), "post receive");
	for (int ready = 0; !ready;) {
		mrc_wc wc[4];
		int n = reap(ctx, t == 0, epfd, wc, 4);
		check(n, "waiting for the server");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != MRC_WC_SUCCESS) {
				say("FATAL thread %u: ready: %s", t, mrc_wc_status_str(wc[i].status));
				exit(1);
			}
			ready |= wc[i].wr_id == 3;
		}
	}
	void *scratch;
	check(mrc_alloc(S, 4096, &scratch), "alloc");
	for (unsigned q = 0; q < ROUNDS; q++) {
		fill(ping, t, q);
		check(mrc_post_recv(ctx, c, 0, pong, MSG, mr, 1, MRC_POST_MORE), "post receive");
		check(mrc_post_send(ctx, c, 0, ping, MSG, mr, 2, 0), "post send");
		int got = 0, sent = 0;
		while (!got || !sent) {
			mrc_wc wc[4];
			int n = reap(ctx, t == 0, epfd, wc, 4);
			check(n, "completions");
			for (int i = 0; i < n; i++) {
				if (wc[i].status != MRC_WC_SUCCESS) {
					say("FATAL thread %u round %u: request %llu: %s", t, q,
					    (unsigned long long)wc[i].wr_id, mrc_wc_status_str(wc[i].status));
					exit(1);
				}
				if (wc[i].wr_id == 1) {
					got = 1;
					if (wc[i].byte_len != MSG || memcmp(ping, pong, MSG))
						atomic_fetch_add(&failures, 1);
				} else {
					sent = 1;
				}
			}
		}
		/* Control calls through the shared session, meanwhile. */
		if (q % 100 == 0) {
			mrc_mr *m2;
			check(mrc_reg_mr(S, scratch, 4096, 0, &m2), "register scratch");
			check(mrc_dereg_mr(m2), "deregister scratch");
		}
	}
	check(mrc_close(c, 0), "close");
	check(mrc_dereg_mr(mr), "deregister");
	check(mrc_free(S, mem), "free");
	check(mrc_free(S, scratch), "free");
	check(mrc_ctx_del(ctx), "context delete");
	if (epfd >= 0)
		close(epfd);
	say("thread %u: %d round trips", t, ROUNDS);
	return NULL;
}

/* Blocks in mrc_get_event() while the workers run: it must not hold the
 * session's mutex while it sleeps (the workers' control calls would hang). */
static void *eventer(void *arg)
{
	(void)arg;
	long n = 0;
	while (!atomic_load(&stop_events)) {
		mrc_event ev;
		int rc = mrc_get_event(S, &ev, 100);
		if (rc == 0)
			n++;
		else if (rc != MRC_ERR_TIMEOUT)
			check(rc, "events");
	}
	say("event thread: %ld events", n);
	return NULL;
}

static int client(void)
{
	check(mrc_session_open(NULL, "threads-client", &S), "attach");
	pthread_t w[NTHREADS], e;
	pthread_create(&e, NULL, eventer, NULL);
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_create(&w[t], NULL, worker, (void *)(uintptr_t)t);
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_join(w[t], NULL);
	atomic_store(&stop_events, 1);
	pthread_join(e, NULL);
	mrc_session_close(S);
	int f = atomic_load(&failures);
	say("%s: %d threads x %d verified round trips, %d mismatches", f ? "FAILED" : "ok",
	    NTHREADS, ROUNDS, f);
	return f ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "server"))
		return server();
	if (argc == 4 && !strcmp(argv[1], "client")) {
		PEER = argv[2];
		PORT = (uint16_t)atoi(argv[3]);
		return client();
	}
	fprintf(stderr, "usage: threads server | threads client PEER PORT\n");
	return 2;
}
