/* daemon/datapath.c: the source-port socket pool, the count of the paths
 * that hold each port (mrd_dp_port_use) and the sweep that closes a socket
 * no path holds (an orphan) sooner than one a path may still send from.
 * Real sockets on loopback, a real loop; the sweep is handed made-up
 * times after each socket's last use. */
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
#include <cmocka.h>

#include "datapath.h"
#include "mrd.h"

#define S 1000000000ull
#define IDLE (30 * S)
#define ORPHAN (1 * S)

typedef struct fix {
	uv_loop_t loop;
	mrd d;
	mrd_dp dp;
	unsigned rx; /* datagrams handed up */
} fix;

static void on_input(void *ud, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
		     const uint8_t *data, size_t len, int ce, uint64_t now)
{
	(void)s, (void)src, (void)srclen, (void)data, (void)len, (void)ce, (void)now;
	((fix *)ud)->rx++;
}

static void on_run(void *ud)
{
	(void)ud;
}

static void plane_at(mrd_plane *p, const char *name, const char *ip)
{
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->address.family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, ip, p->address.bytes), 1);
}

static int setup(void **state)
{
	static fix f;
	memset(&f, 0, sizeof(f));
	assert_int_equal(uv_loop_init(&f.loop), 0);
	f.d.loop = &f.loop;
	f.d.dp = &f.dp;
	f.d.cfg.port = 0; /* the service sockets on ports of the kernel's choice */
	f.d.cfg.nplanes = 2;
	plane_at(&f.d.cfg.planes[0], "p0", "127.0.0.1");
	plane_at(&f.d.cfg.planes[1], "p1", "127.0.0.2");
	mrd_dp_ops ops = {.input = on_input, .run = on_run, .ud = &f};
	assert_int_equal(mrd_dp_init(&f.dp, &f.d, &ops), 0);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	fix *f = *state;
	mrd_dp_close(&f->dp);
	uv_run(&f->loop, UV_RUN_DEFAULT); /* the close callbacks */
	assert_int_equal(uv_loop_close(&f->loop), 0);
	return 0;
}

/* A UDP port of 127.0.0.1 and 127.0.0.2 that nothing holds now. */
static uint16_t free_port(void)
{
	for (;;) {
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		assert_true(fd >= 0);
		struct sockaddr_in a = {.sin_family = AF_INET};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		socklen_t al = sizeof(a);
		assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
		close(fd);
		uint16_t port = ntohs(a.sin_port);
		int fd2 = socket(AF_INET, SOCK_DGRAM, 0);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
		int ok = bind(fd2, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd2);
		if (ok)
			return port;
	}
}

/* Whether some socket still holds ip:port (a plain bind fails EADDRINUSE:
 * the pool's sockets do not share their ports). */
static int port_taken(const char *ip, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	int r = bind(fd, (struct sockaddr *)&a, sizeof(a));
	int e = errno;
	close(fd);
	if (r == 0)
		return 0;
	assert_int_equal(e, EADDRINUSE);
	return 1;
}

static mrd_sock *sport(fix *f, unsigned plane, uint16_t port)
{
	int err = 0;
	mrd_sock *s = mrd_dp_sport(&f->dp, plane, port, &err);
	assert_non_null(s);
	assert_int_equal(err, 0);
	assert_int_equal(s->port, port);
	return s;
}

/* One port held by a path, one not: a sweep after the orphan time closes
 * only the orphan, and counts it as one; the packet queued on the orphan
 * left before its socket closed. */
static void test_orphan_closed_held_kept(void **state)
{
	fix *f = *state;
	uint16_t p = free_port(), q;
	do
		q = free_port();
	while (q == p);
	mrd_dp_port_use(&f->dp, 0, p, +1);
	mrd_sock *sp = sport(f, 0, p), *sq = sport(f, 0, q);
	assert_true(port_taken("127.0.0.1", p) && port_taken("127.0.0.1", q));

	/* a receiver for the packet queued on q */
	int rfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	mrd_sockaddr to;
	memset(&to, 0, sizeof(to));
	to.in.sin_family = AF_INET;
	to.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(rfd, &to.sa, sizeof(to.in)), 0);
	socklen_t tl = sizeof(to.in);
	assert_int_equal(getsockname(rfd, &to.sa, &tl), 0);

	uint64_t last = sp->last_used_ns > sq->last_used_ns ? sp->last_used_ns : sq->last_used_ns;
	unsigned orphans = 99;
	/* not yet: both were used less than the orphan time ago */
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, last + ORPHAN / 2, IDLE, ORPHAN, &orphans), 0);
	assert_int_equal(orphans, 0);
	assert_int_equal(f->dp.planes[0].npool, 2);

	/* a packet still queued on q when the sweep that closes q comes */
	uint8_t *slot = mrd_dp_tx_slot(&f->dp);
	memcpy(slot, "orphan", 6);
	mrd_dp_tx_commit(&f->dp, sq, &to, sizeof(to.in), 6);
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, last + ORPHAN + S / 2, IDLE, ORPHAN, &orphans),
			 1);
	assert_int_equal(orphans, 1);
	char buf[16];
	assert_int_equal(recv(rfd, buf, sizeof(buf), 0), 6); /* it left first */
	assert_memory_equal(buf, "orphan", 6);
	assert_int_equal(f->dp.tx_errors, 0);
	assert_int_equal(f->dp.planes[0].npool, 1);
	assert_ptr_equal(f->dp.planes[0].pool[0], sp);
	assert_true(port_taken("127.0.0.1", p));
	assert_false(port_taken("127.0.0.1", q));
	close(rfd);
	mrd_dp_port_use(&f->dp, 0, p, -1);
}

/* A port its last path leaves is an orphan from then on, closed once its
 * socket has been unused for the orphan time, not before. */
static void test_left_port_closes_after_orphan_time(void **state)
{
	fix *f = *state;
	uint16_t p = free_port();
	mrd_dp_port_use(&f->dp, 0, p, +1);
	mrd_dp_port_use(&f->dp, 0, p, +1); /* two paths (two connections) */
	mrd_sock *s = sport(f, 0, p);
	uint64_t t = s->last_used_ns;
	unsigned orphans;
	mrd_dp_port_use(&f->dp, 0, p, -1);
	assert_int_equal(mrd_dp_port_users(&f->dp, 0, p), 1);
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + 5 * S, IDLE, ORPHAN, &orphans), 0);
	mrd_dp_port_use(&f->dp, 0, p, -1);
	assert_int_equal(mrd_dp_port_users(&f->dp, 0, p), 0);
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + ORPHAN - 1, IDLE, ORPHAN, &orphans), 0);
	assert_true(port_taken("127.0.0.1", p));
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + ORPHAN, IDLE, ORPHAN, &orphans), 1);
	assert_int_equal(orphans, 1);
	assert_false(port_taken("127.0.0.1", p));
	/* a path that takes it again opens it again */
	mrd_dp_port_use(&f->dp, 0, p, +1);
	s = sport(f, 0, p);
	assert_true(port_taken("127.0.0.1", p));
	mrd_dp_port_use(&f->dp, 0, p, -1);
}

/* A held port keeps the idle rule: closed after idle_ns unused (counted as
 * idle, not orphan), and its count outlives its socket. */
static void test_held_port_idle_rule(void **state)
{
	fix *f = *state;
	uint16_t p = free_port();
	mrd_dp_port_use(&f->dp, 0, p, +1);
	mrd_sock *s = sport(f, 0, p);
	uint64_t t = s->last_used_ns;
	unsigned orphans;
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + IDLE - S, IDLE, ORPHAN, &orphans), 0);
	assert_true(port_taken("127.0.0.1", p));
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + IDLE, IDLE, ORPHAN, &orphans), 1);
	assert_int_equal(orphans, 0);
	assert_false(port_taken("127.0.0.1", p));
	assert_int_equal(mrd_dp_port_users(&f->dp, 0, p), 1);
	/* near the descriptor limit the guard passes a short idle time: then
	 * held ports go after it too */
	s = sport(f, 0, p);
	t = s->last_used_ns;
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + S, S, ORPHAN, &orphans), 1);
	assert_int_equal(orphans, 0);
	mrd_dp_port_use(&f->dp, 0, p, -1);
}

/* Counts are per plane: the same port held on plane 0 leaves plane 1's
 * socket of that port an orphan. */
static void test_counts_per_plane(void **state)
{
	fix *f = *state;
	uint16_t p = free_port();
	mrd_dp_port_use(&f->dp, 0, p, +1);
	mrd_sock *s0 = sport(f, 0, p), *s1 = sport(f, 1, p);
	assert_int_equal(mrd_dp_port_users(&f->dp, 1, p), 0);
	uint64_t t = s0->last_used_ns > s1->last_used_ns ? s0->last_used_ns : s1->last_used_ns;
	unsigned orphans;
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + 2 * S, IDLE, ORPHAN, &orphans), 1);
	assert_int_equal(orphans, 1);
	assert_true(port_taken("127.0.0.1", p));
	assert_false(port_taken("127.0.0.2", p));
	assert_int_equal(f->dp.planes[0].npool, 1);
	assert_int_equal(f->dp.planes[1].npool, 0);
	mrd_dp_port_use(&f->dp, 0, p, -1);
	/* a plane the datapath does not have counts nothing */
	mrd_dp_port_use(&f->dp, 7, p, +1);
	assert_int_equal(mrd_dp_port_users(&f->dp, 7, p), 0);
}

/* The orphan time longer than the idle time (MRD_SPORT_ORPHAN_S above
 * MRD_SPORT_IDLE_S): an orphan goes after the idle time, as any socket. */
static void test_orphan_time_above_idle(void **state)
{
	fix *f = *state;
	uint16_t p = free_port();
	mrd_sock *s = sport(f, 0, p);
	uint64_t t = s->last_used_ns;
	unsigned orphans;
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + 2 * S, 3 * S, 10 * S, &orphans), 0);
	assert_int_equal(mrd_dp_pool_sweep(&f->dp, t + 3 * S, 3 * S, 10 * S, &orphans), 1);
	assert_int_equal(orphans, 1);
}

/* A full pool makes room with a socket no path holds before it takes one
 * a path may still send from, however recently that one was used. */
static void test_evicts_orphans_first(void **state)
{
	fix *f = *state;
	mrd_dp_set_pool_cap(&f->dp, 8); /* (the least there is) */
	uint16_t ports[10];
	for (unsigned i = 0; i < 10; i++) {
		int again;
		do {
			ports[i] = free_port();
			again = 0;
			for (unsigned k = 0; k < i; k++)
				again |= ports[k] == ports[i];
		} while (again);
	}
	for (unsigned i = 0; i < 8; i++) {
		if (i != 7)
			mrd_dp_port_use(&f->dp, 0, ports[i], +1);
		sport(f, 0, ports[i]); /* 0 is the least recently used, 7 (no path) the most */
	}
	assert_int_equal(f->dp.planes[0].npool, 8);
	mrd_dp_port_use(&f->dp, 0, ports[8], +1);
	sport(f, 0, ports[8]);
	assert_int_equal(f->dp.planes[0].npool, 8);
	assert_false(port_taken("127.0.0.1", ports[7])); /* the orphan went */
	assert_true(port_taken("127.0.0.1", ports[0]));
	/* every socket held: the least recently used goes */
	mrd_dp_port_use(&f->dp, 0, ports[9], +1);
	sport(f, 0, ports[9]);
	assert_int_equal(f->dp.planes[0].npool, 8);
	assert_false(port_taken("127.0.0.1", ports[0]));
	for (unsigned i = 1; i < 10; i++)
		if (i != 7)
			assert_true(port_taken("127.0.0.1", ports[i]));
	for (unsigned i = 0; i < 10; i++)
		if (i != 7)
			mrd_dp_port_use(&f->dp, 0, ports[i], -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_orphan_closed_held_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_left_port_closes_after_orphan_time, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_held_port_idle_rule, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts_per_plane, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_time_above_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evicts_orphans_first, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
