/* daemon/datapath.c: packets whose payload is sent from where it is
 * (mrd_dp_tx_commit_ref, mrp_conn_write_pkt_ref). Real sockets on loopback:
 * the datagrams a plain socket receives are each packet's slot bytes followed
 * by its payload, in GSO runs that mix copied and referenced payloads; the
 * payload is read when the queue is flushed (mrd_dp_flush_refs flushes a
 * queue holding one, and only such a queue); a send timestamp is written into
 * the slot, never into the caller's payload; a packet of the expedited class
 * carries its DSCP, in runs of its own. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <cmocka.h>

#include "datapath.h"
#include "mrd.h"

#define HDR 72
#define MTU 4096

typedef struct fix {
	uv_loop_t loop;
	mrd d;
	mrd_dp dp;
	int rx;                 /* a plain socket: datagrams as the wire has them */
	mrd_sockaddr to;
	socklen_t tolen;
	mrd_sock *s;            /* the sending socket, a source port of plane 0 */
} fix;

static void on_input(void *ud, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
		     const uint8_t *data, size_t len, int ce, uint64_t now)
{
	(void)ud, (void)s, (void)src, (void)srclen, (void)data, (void)len, (void)ce, (void)now;
}

static void on_run(void *ud)
{
	(void)ud;
}

static int setup(void **state)
{
	static fix f;
	memset(&f, 0, sizeof(f));
	assert_int_equal(uv_loop_init(&f.loop), 0);
	f.d.loop = &f.loop;
	f.d.dp = &f.dp;
	f.d.cfg.port = 0;
	f.d.cfg.nplanes = 1;
	mrd_plane *p = &f.d.cfg.planes[0];
	snprintf(p->name, sizeof(p->name), "p0");
	p->address.family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, "127.0.0.1", p->address.bytes), 1);
	mrd_dp_ops ops = {.input = on_input, .run = on_run, .ud = &f};
	assert_int_equal(mrd_dp_init(&f.dp, &f.d, &ops), 0);

	f.rx = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(f.rx >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(f.rx, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t al = sizeof(a);
	assert_int_equal(getsockname(f.rx, (struct sockaddr *)&a, &al), 0);
	struct timeval tv = {.tv_sec = 5};
	assert_int_equal(setsockopt(f.rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	int big = 4 << 20;
	(void)setsockopt(f.rx, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	memset(&f.to, 0, sizeof(f.to));
	f.to.in = a;
	f.tolen = sizeof(a);

	/* a source port of the kernel's choice that the pool takes */
	for (uint16_t port = 40000 + (uint16_t)(getpid() % 20000);; port++) {
		int err = 0;
		if ((f.s = mrd_dp_sport(&f.dp, 0, port, &err)))
			break;
		assert_true(port < 65000);
	}
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	fix *f = *state;
	close(f->rx);
	mrd_dp_close(&f->dp);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	return 0;
}

/* Packet i's slot bytes: a pattern of i; its payload: bytes of the shared
 * source from OFF(i), apart from every other packet's. */
#define OFF(i) ((size_t)(i) * (MTU + 7))
static void fill_hdr(uint8_t *p, unsigned i)
{
	for (unsigned k = 0; k < HDR; k++)
		p[k] = (uint8_t)(i * 31 + k);
}

static uint8_t src[16 * (MTU + 7)];

static void fill_src(void)
{
	for (size_t k = 0; k < sizeof(src); k++)
		src[k] = (uint8_t)(k * 13 + (k >> 8));
}

/* Queue packet i: by reference when ref, else copied into the slot. */
static void queue(fix *f, unsigned i, uint32_t plen, int ref)
{
	uint8_t *slot = mrd_dp_tx_slot(&f->dp);
	fill_hdr(slot, i);
	if (ref) {
		mrd_dp_tx_commit_ref(&f->dp, f->s, &f->to, f->tolen, HDR, src + OFF(i), plen);
	} else {
		memcpy(slot + HDR, src + OFF(i), plen);
		mrd_dp_tx_commit(&f->dp, f->s, &f->to, f->tolen, HDR + plen);
	}
}

/* The next datagram is packet i with plen payload bytes. */
static void expect(fix *f, unsigned i, uint32_t plen)
{
	static uint8_t got[HDR + MTU + 1], want[HDR + MTU];
	ssize_t n = recv(f->rx, got, sizeof(got), 0);
	assert_int_equal(n, (ssize_t)(HDR + plen));
	fill_hdr(want, i);
	memcpy(want + HDR, src + OFF(i), plen);
	assert_memory_equal(got, want, HDR + plen);
}

/* Twelve packets to one destination, equal lengths but the last, every
 * third copied and the others by reference: each datagram is its slot and
 * its payload, in order; with GSO the run left as one message. */
static void test_mixed_run(void **state)
{
	fix *f = *state;
	fill_src();
	uint64_t gso0 = f->dp.tx_gso_msgs, calls0 = f->dp.tx_calls;
	for (unsigned i = 0; i < 12; i++)
		queue(f, i, i == 11 ? 1000 : MTU, i % 3 != 0);
	assert_int_equal(f->dp.tx_refs, 8);
	mrd_dp_flush(&f->dp);
	assert_int_equal(f->dp.txn, 0);
	assert_int_equal(f->dp.tx_refs, 0);
	for (unsigned i = 0; i < 12; i++)
		expect(f, i, i == 11 ? 1000 : MTU);
	assert_int_equal(f->dp.tx_calls - calls0, 1);
	if (f->dp.gso)
		assert_int_equal(f->dp.tx_gso_msgs - gso0, 1);
	assert_int_equal(f->dp.tx_errors + f->dp.tx_dropped, 0);
}

/* A longer packet after a shorter one starts a new GSO message (every
 * segment but the last is the run's length), payloads by reference or not. */
static void test_lengths_split_runs(void **state)
{
	fix *f = *state;
	fill_src();
	static const uint32_t lens[] = {100, 100, 4096, 4096, 4096, 600, 4096, 1};
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	for (unsigned i = 0; i < N; i++)
		queue(f, i, lens[i], lens[i] > 512);
	mrd_dp_flush(&f->dp);
	for (unsigned i = 0; i < N; i++)
		expect(f, i, lens[i]);
}

/* The payload is read at the flush: mrd_dp_flush_refs() sends a queue that
 * holds a packet by reference (and what the caller writes into that memory
 * afterwards is not sent), and leaves one that holds none. */
static void test_flush_refs(void **state)
{
	fix *f = *state;
	fill_src();
	queue(f, 3, 500, 0);
	mrd_dp_flush_refs(&f->dp);
	assert_int_equal(f->dp.txn, 1); /* nothing by reference: still queued */
	queue(f, 4, MTU, 1);
	assert_int_equal(f->dp.tx_refs, 1);
	mrd_dp_flush_refs(&f->dp);
	assert_int_equal(f->dp.txn, 0);
	assert_int_equal(f->dp.tx_refs, 0);
	uint8_t keep[MTU];
	memcpy(keep, src + OFF(4), MTU);
	memset(src + OFF(4), 0xee, MTU); /* the owner reuses its memory */
	expect(f, 3, 500);
	static uint8_t got[HDR + MTU + 1];
	assert_int_equal(recv(f->rx, got, sizeof(got), 0), HDR + MTU);
	assert_memory_equal(got + HDR, keep, MTU);
}

/* A send timestamp goes into the slot's bytes; the payload by reference,
 * which is the caller's (const) memory, is sent as it is. */
static void test_stamp_in_slot(void **state)
{
	fix *f = *state;
	fill_src();
	uint8_t before[MTU];
	memcpy(before, src + OFF(5), MTU);
	queue(f, 5, MTU, 1);
	mrd_dp_tx_stamp(&f->dp, MRD_DP_STAMP_SET64, 8, 0);
	queue(f, 6, MTU, 1);
	mrd_dp_flush(&f->dp);
	static uint8_t got[HDR + MTU + 1], want[HDR];
	assert_int_equal(recv(f->rx, got, sizeof(got), 0), HDR + MTU);
	fill_hdr(want, 5);
	assert_memory_equal(got, want, 8);                       /* before the stamp */
	assert_memory_not_equal(got + 8, want + 8, 8);           /* the stamp */
	assert_memory_equal(got + 16, want + 16, HDR - 16);      /* after it */
	assert_memory_equal(got + HDR, before, MTU);
	assert_memory_equal(src + OFF(5), before, MTU);           /* untouched */
	expect(f, 6, MTU);
}

/* The next datagram is packet i with plen payload bytes, sent with this IP
 * TOS byte (the receiving socket has IP_RECVTOS). */
static void expect_tos(fix *f, unsigned i, uint32_t plen, uint8_t tos)
{
	static uint8_t got[HDR + MTU + 1], want[HDR + MTU];
	struct iovec iov = {got, sizeof(got)};
	_Alignas(size_t) char ctl[CMSG_SPACE(sizeof(int))];
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	ssize_t n = recvmsg(f->rx, &m, 0);
	assert_int_equal(n, (ssize_t)(HDR + plen));
	fill_hdr(want, i);
	memcpy(want + HDR, src + OFF(i), plen);
	assert_memory_equal(got, want, HDR + plen);
	int seen = -1;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS)
			seen = *(uint8_t *)CMSG_DATA(cm);
	assert_int_equal(seen, tos);
}

/* The expedited class (SPEC 6.7): a packet given a DSCP carries it beside
 * ECT(0), the others the socket's ECT(0) alone; a GSO run holds one class,
 * so a queue of three classes in turn leaves as three runs. */
static void test_dscp_runs(void **state)
{
	fix *f = *state;
	fill_src();
	int one = 1;
	assert_int_equal(setsockopt(f->rx, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)), 0);
	uint64_t gso0 = f->dp.tx_gso_msgs;
	for (unsigned i = 0; i < 9; i++) {
		queue(f, i, MTU, i % 2);
		if (i >= 3 && i < 6)
			mrd_dp_tx_dscp(&f->dp, 46);
	}
	mrd_dp_tx_dscp(&f->dp, 0);  /* 0 and */
	mrd_dp_tx_dscp(&f->dp, 64); /* out of range: ignored */
	mrd_dp_flush(&f->dp);
	for (unsigned i = 0; i < 9; i++)
		expect_tos(f, i, MTU, i >= 3 && i < 6 ? (46 << 2) | 2 : 2);
	if (f->dp.gso)
		assert_int_equal(f->dp.tx_gso_msgs - gso0, 3);
	/* a lone expedited packet: its TOS without a GSO run */
	queue(f, 9, 700, 0);
	mrd_dp_tx_dscp(&f->dp, 10);
	mrd_dp_flush(&f->dp);
	expect_tos(f, 9, 700, (10 << 2) | 2);
	assert_int_equal(f->dp.tx_errors + f->dp.tx_dropped, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_mixed_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lengths_split_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_refs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stamp_in_slot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dscp_runs, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
