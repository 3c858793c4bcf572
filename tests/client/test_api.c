/*
 * libmetaroce without metarocd: error strings, argument checks, memory
 * allocation, and the library's side of the ABI against a scripted fake
 * daemon (a thread on a SOCK_SEQPACKET socket in a temporary directory)
 * that can lie: a wrong ABI version, a corrupt mapping header, a hostile
 * completion tail, or a sudden death. What a submission entry looks like in
 * shared memory, that completions come back in order, that the NEED_WAKEUP
 * handshake wakes mrc_wait_cq(), and that SQ full is MRC_ERR_AGAIN are all
 * checked on the fake daemon's side of the mapping.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

/* ---- the fake daemon ---- */

enum fault {
	F_NONE,
	F_HELLO_VERSION,  /* hello reply with another ABI version */
	F_HELLO_CLOSE,    /* close instead of answering hello */
	F_HELLO_GARBAGE,  /* a reply of the wrong type */
	F_SHM_MAGIC,      /* mapping header: bad magic */
	F_SHM_VERSION,    /* mapping header: other version */
	F_SHM_OFFSET,     /* mapping header: CQ entries beyond the mapping */
	F_SHM_ENTRIES,    /* ring's entries field differs from the header's */
};

typedef struct fake {
	char dir[32], path[64];
	int lfd;
	_Atomic int fd; /* set by the fake's thread, read by the test's */
	enum fault fault;
	pthread_t thr;
	int joined;
	/* the context it made */
	uint8_t *shm;
	size_t shm_size;
	int doorbell, wakeup;
	/* what it saw */
	int mr_fd_sealed;
	mrc_mr_reg_req mr_req;
	_Atomic int closes;
	_Atomic uint32_t features; /* its hello's (0: as a daemon older than them) */
} fake;

#define SQ_ENTRIES 8u
#define CQ_ENTRIES 16u
#define NSTREAMS 4

static void send_reply(fake *f, const mrc_msg_hdr *req, int32_t status, const void *p, size_t len,
		       const int *fds, int nfds)
{
	uint8_t buf[MRC_MSG_MAX];
	mrc_msg_hdr h = {.type = req->type | MRC_MSG_REPLY,
			 .len = (uint32_t)(sizeof(h) + len),
			 .seq = req->seq,
			 .status = status};
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), p, len);
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cb;
	struct iovec iov = {.iov_base = buf, .iov_len = h.len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		memset(&cb, 0, sizeof(cb));
		m.msg_control = cb.b;
		m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	if (sendmsg(f->fd, &m, MSG_NOSIGNAL) < 0)
		fprintf(stderr, "fake: sendmsg: %s\n", strerror(errno));
}

static void send_event(fake *f, uint32_t event, uint32_t conn, int32_t status)
{
	uint8_t buf[sizeof(mrc_msg_hdr) + sizeof(mrc_msg_event)];
	mrc_msg_hdr h = {.type = MRC_MSG_EVENT, .len = sizeof(buf)};
	mrc_msg_event ev = {.event = event, .conn = conn, .status = status, .nstreams = NSTREAMS,
			    .listener_id = event == MRC_EV_INCOMING ? 3 : 0, .ctx_id = 42};
	snprintf(ev.peer, sizeof(ev.peer), "127.0.0.2 19791");
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &ev, sizeof(ev));
	(void)send(f->fd, buf, sizeof(buf), MSG_NOSIGNAL);
}

static void make_ctx(fake *f, const mrc_msg_hdr *h)
{
	size_t size = 4096 + SQ_ENTRIES * sizeof(mrc_sqe) + CQ_ENTRIES * sizeof(mrc_cqe);
	int fd = memfd_create("fake-ctx", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	f->shm = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(f->shm != MAP_FAILED);
	f->shm_size = size;
	mrc_shm_hdr *sh = (mrc_shm_hdr *)f->shm;
	*sh = (mrc_shm_hdr){.magic = MRC_ABI_MAGIC, .version = MRC_ABI_VERSION, .ctx_id = 42,
			    .size = size, .sq_entries = SQ_ENTRIES, .cq_entries = CQ_ENTRIES,
			    .sqe_size = sizeof(mrc_sqe), .cqe_size = sizeof(mrc_cqe),
			    .sq_off = 128, .cq_off = 128 + sizeof(mrc_ring),
			    .sqes_off = 4096,
			    .cqes_off = 4096 + SQ_ENTRIES * sizeof(mrc_sqe)};
	mrc_ring *sq = (mrc_ring *)(f->shm + sh->sq_off), *cq = (mrc_ring *)(f->shm + sh->cq_off);
	sq->entries = SQ_ENTRIES;
	sq->mask = SQ_ENTRIES - 1;
	cq->entries = CQ_ENTRIES;
	cq->mask = CQ_ENTRIES - 1;
	if (f->fault == F_SHM_MAGIC)
		sh->magic ^= 1;
	if (f->fault == F_SHM_VERSION)
		sh->version = MRC_ABI_VERSION + 1;
	if (f->fault == F_SHM_OFFSET)
		sh->cqes_off = size - 8;
	if (f->fault == F_SHM_ENTRIES)
		cq->entries = 2 * CQ_ENTRIES;
	/* ABI 2: a socket pair per direction, the app gets one end. */
	int db[2], wk[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, db), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, wk), 0);
	f->doorbell = db[0];
	f->wakeup = wk[0];
	mrc_ctx_create_rep rep = {.ctx_id = 42, .shm_size = size};
	int fds[3] = {fd, db[1], wk[1]};
	send_reply(f, h, 0, &rep, sizeof(rep), fds, 3);
	close(fd);
	close(db[1]);
	close(wk[1]);
}

static void *fake_main(void *arg)
{
	fake *f = arg;
	f->fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (f->fd < 0)
		return NULL;
	for (;;) {
		uint8_t buf[MRC_MSG_MAX];
		union {
			struct cmsghdr c;
			char b[CMSG_SPACE(4 * sizeof(int))];
		} cb;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b,
				   .msg_controllen = sizeof(cb.b)};
		ssize_t r = recvmsg(f->fd, &m, MSG_CMSG_CLOEXEC);
		if (r <= 0)
			break;
		int rfd = -1;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		if (c && c->cmsg_type == SCM_RIGHTS)
			memcpy(&rfd, CMSG_DATA(c), sizeof(int));
		mrc_msg_hdr h;
		memcpy(&h, buf, sizeof(h));
		switch (h.type) {
		case MRC_MSG_HELLO: {
			if (f->fault == F_HELLO_CLOSE) {
				close(f->fd);
				f->fd = -1;
				return NULL;
			}
			if (f->fault == F_HELLO_GARBAGE)
				h.type = MRC_MSG_LISTEN;
			mrc_hello_rep rep = {.abi_version = f->fault == F_HELLO_VERSION
								? MRC_ABI_VERSION + 1
								: MRC_ABI_VERSION,
					     .session_id = 1, .max_msg = 1u << 20,
					     .features = atomic_load(&f->features)};
			send_reply(f, &h, 0, &rep, sizeof(rep), NULL, 0);
			break;
		}
		case MRC_MSG_CTX_CREATE:
			make_ctx(f, &h);
			break;
		case MRC_MSG_MR_REG: {
			memcpy(&f->mr_req, buf + sizeof(h), sizeof(f->mr_req));
			int seals = rfd >= 0 ? fcntl(rfd, F_GET_SEALS) : 0;
			f->mr_fd_sealed = seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW);
			mrc_mr_reg_rep rep = {.lkey = 5, .rkey = 0xabcdef};
			send_reply(f, &h, rfd >= 0 ? 0 : MRC_ERR_INVAL, &rep, sizeof(rep), NULL, 0);
			break;
		}
		case MRC_MSG_CONNECT: {
			/* The event before the reply: the library must cope. */
			send_event(f, MRC_EV_ESTABLISHED, 7, 0);
			mrc_connect_rep rep = {.conn = 7};
			send_reply(f, &h, 0, &rep, sizeof(rep), NULL, 0);
			break;
		}
		case MRC_MSG_LISTEN: {
			mrc_listen_rep rep = {.listener_id = 3};
			send_reply(f, &h, 0, &rep, sizeof(rep), NULL, 0);
			send_event(f, MRC_EV_INCOMING, 9, 0);
			break;
		}
		case MRC_MSG_CLOSE:
			f->closes++;
			send_reply(f, &h, 0, NULL, 0, NULL, 0);
			break;
		default:
			send_reply(f, &h, 0, NULL, 0, NULL, 0);
			break;
		}
		if (rfd >= 0)
			close(rfd);
	}
	return NULL;
}

static fake *fake_start(enum fault fault)
{
	fake *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->fault = fault;
	f->fd = f->doorbell = f->wakeup = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/mrc-test-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/app.sock", f->dir);
	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 4), 0);
	assert_int_equal(pthread_create(&f->thr, NULL, fake_main, f), 0);
	return f;
}

/* Kill the fake daemon's end of the session (as kill -9 would). */
static void fake_die(fake *f)
{
	shutdown(f->fd, SHUT_RDWR);
	pthread_join(f->thr, NULL);
	f->joined = 1;
	close(f->fd);
	f->fd = -1;
}

static void fake_stop(fake *f)
{
	if (f->joined)
		;
	else if (f->fd >= 0)
		fake_die(f);
	else
		pthread_join(f->thr, NULL); /* it closed by itself (F_HELLO_CLOSE) */
	close(f->lfd);
	if (f->shm)
		munmap(f->shm, f->shm_size);
	if (f->doorbell >= 0)
		close(f->doorbell);
	if (f->wakeup >= 0)
		close(f->wakeup);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
}

static mrc_ring *fake_sq(fake *f)
{
	return (mrc_ring *)(f->shm + ((mrc_shm_hdr *)f->shm)->sq_off);
}

static mrc_ring *fake_cq(fake *f)
{
	return (mrc_ring *)(f->shm + ((mrc_shm_hdr *)f->shm)->cq_off);
}

static mrc_sqe *fake_sqes(fake *f)
{
	return (mrc_sqe *)(f->shm + ((mrc_shm_hdr *)f->shm)->sqes_off);
}

static mrc_cqe *fake_cqes(fake *f)
{
	return (mrc_cqe *)(f->shm + ((mrc_shm_hdr *)f->shm)->cqes_off);
}

/* ---- tests ---- */

static void test_strings(void **state)
{
	(void)state;
	const char *seen[32];
	int n = 0;
#define CHECK_ERR(name, val, msg)                                  \
	assert_string_equal(mrc_strerror(MRC_ERR_##name), msg);    \
	for (int i = 0; i < n; i++)                                \
		assert_string_not_equal(seen[i], msg);             \
	seen[n++] = msg;
	MRC_ERRNO_MAP(CHECK_ERR)
#undef CHECK_ERR
	assert_int_equal(n, 15);
	assert_string_equal(mrc_strerror(0), "success");
	assert_string_equal(mrc_strerror(-100), "unknown error");
	assert_string_equal(mrc_strerror(3), "unknown error");
#define CHECK_WC(name, val, msg) assert_string_equal(mrc_wc_status_str(MRC_WC_##name), msg);
	MRC_WC_STATUS_MAP(CHECK_WC)
#undef CHECK_WC
	assert_string_equal(mrc_wc_status_str(11), "unknown completion status");
	assert_string_equal(mrc_wc_status_str(-1), "unknown completion status");
}

static void test_open_errors(void **state)
{
	(void)state;
	mrc_session *s = (mrc_session *)1;
	assert_int_equal(mrc_session_open("/nonexistent/metaroce/app.sock", "t", &s),
			 MRC_ERR_DAEMON);
	assert_null(s);
	char longpath[200];
	memset(longpath, 'x', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(mrc_session_open(longpath, "t", &s), MRC_ERR_INVAL);
	assert_int_equal(mrc_session_open("/x", "t", NULL), MRC_ERR_INVAL);
	/* The environment names the socket when the argument does not. */
	setenv("METAROCE_APP_SOCKET", "/nonexistent/env.sock", 1);
	assert_int_equal(mrc_session_open(NULL, "t", &s), MRC_ERR_DAEMON);
	unsetenv("METAROCE_APP_SOCKET");
	mrc_session_close(NULL);
}

static void test_hello_faults(void **state)
{
	(void)state;
	struct {
		enum fault f;
		int rc;
	} cases[] = {
		{F_HELLO_VERSION, MRC_ERR_VERSION},
		{F_HELLO_CLOSE, MRC_ERR_DAEMON},
		{F_HELLO_GARBAGE, MRC_ERR_PROTO},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fake *f = fake_start(cases[i].f);
		mrc_session *s = NULL;
		assert_int_equal(mrc_session_open(f->path, "t", &s), cases[i].rc);
		assert_null(s);
		fake_stop(f);
	}
}

static void test_shm_faults(void **state)
{
	(void)state;
	struct {
		enum fault f;
		int rc;
	} cases[] = {
		{F_SHM_MAGIC, MRC_ERR_PROTO},
		{F_SHM_VERSION, MRC_ERR_VERSION},
		{F_SHM_OFFSET, MRC_ERR_PROTO},
		{F_SHM_ENTRIES, MRC_ERR_PROTO},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fake *f = fake_start(cases[i].f);
		mrc_session *s = NULL;
		assert_int_equal(mrc_session_open(f->path, "t", &s), 0);
		mrc_ctx *ctx = (mrc_ctx *)1;
		assert_int_equal(mrc_ctx_new(s, SQ_ENTRIES, 0, &ctx), cases[i].rc);
		assert_null(ctx);
		mrc_session_close(s);
		fake_stop(f);
	}
}

static void test_shm_check_direct(void **state)
{
	(void)state;
	uint8_t *m = aligned_alloc(4096, 8192);
	assert_non_null(m);
	memset(m, 0, 8192);
	mrc_shm_hdr *h = (mrc_shm_hdr *)m;
	*h = (mrc_shm_hdr){.magic = MRC_ABI_MAGIC, .version = MRC_ABI_VERSION, .size = 8192,
			   .sq_entries = 8, .cq_entries = 16, .sqe_size = 64, .cqe_size = 32,
			   .sq_off = 128, .cq_off = 320, .sqes_off = 1024, .cqes_off = 2048};
	mrc_ring *sq = (mrc_ring *)(m + 128), *cq = (mrc_ring *)(m + 320);
	sq->entries = 8;
	sq->mask = 7;
	cq->entries = 16;
	cq->mask = 15;
	assert_int_equal(mrc_shm_check(m, 8192, 8, 0), 0);
	assert_int_equal(mrc_shm_check(m, 8192, 8, 16), 0);
	assert_int_equal(mrc_shm_check(m, 8192, 16, 0), MRC_ERR_PROTO); /* not what we asked */
	assert_int_equal(mrc_shm_check(m, 4096, 8, 0), MRC_ERR_PROTO);  /* size differs */
	assert_int_equal(mrc_shm_check(m, 64, 8, 0), MRC_ERR_PROTO);    /* smaller than a header */
	h->sq_off = 130; /* misaligned ring */
	assert_int_equal(mrc_shm_check(m, 8192, 8, 0), MRC_ERR_PROTO);
	h->sq_off = 128;
	h->sqes_off = UINT64_MAX - 8; /* overflow */
	assert_int_equal(mrc_shm_check(m, 8192, 8, 0), MRC_ERR_PROTO);
	h->sqes_off = 1024;
	h->sqe_size = 32;
	assert_int_equal(mrc_shm_check(m, 8192, 8, 0), MRC_ERR_PROTO);
	h->sqe_size = 64;
	sq->mask = 3;
	assert_int_equal(mrc_shm_check(m, 8192, 8, 0), MRC_ERR_PROTO);
	free(m);
}

/* A field of /proc/meminfo, or -1. */
static long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key), NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* KernelPageSize (kB) of the mapping that holds addr, from smaps; -1. */
static long kernel_page_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	long v = -1;
	int in = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && !strncmp(line, "KernelPageSize:", 15))
			v = strtol(line + 15, NULL, 10);
	}
	if (f)
		fclose(f);
	return v;
}

static void test_alloc(void **state)
{
	(void)state;
	void *p = NULL;
	assert_int_equal(mrc_alloc(NULL, 0, &p), MRC_ERR_INVAL);
	assert_int_equal(mrc_alloc(NULL, 100, NULL), MRC_ERR_INVAL);
	assert_int_equal(mrc_alloc(NULL, 100, &p), 0);
	uint8_t *b = p;
	for (int i = 0; i < 100; i++)
		assert_int_equal(b[i], 0);
	memset(b, 0x5a, 4096); /* rounded up to the page: all writable */
	assert_int_equal(mrc_free(NULL, b + 1), MRC_ERR_INVAL);
	assert_int_equal(mrc_free(NULL, b), 0);
	assert_int_equal(mrc_free(NULL, b), MRC_ERR_INVAL);
	int x;
	assert_int_equal(mrc_free(NULL, &x), MRC_ERR_INVAL);
	/* 2 MiB: huge pages when the system has one free, else the fallback;
	 * usable either way. */
	long huge_free = meminfo("HugePages_Free:");
	assert_int_equal(mrc_alloc(NULL, 2u << 20, &p), 0);
	memset(p, 1, 2u << 20);
	long kps = kernel_page_kb(p);
	if (huge_free > 0) {
		assert_int_equal(kps, 2048);
	} else {
		print_message("no huge page reserved: the normal-page fallback is tested\n");
		assert_int_equal(kps, sysconf(_SC_PAGESIZE) / 1024);
	}
	assert_int_equal(mrc_free(NULL, p), 0);
}

/* A session with a context and an established connection on the fake. */
typedef struct env {
	fake *f;
	mrc_session *s;
	mrc_ctx *ctx;
	mrc_conn *conn;
	uint8_t *mem;
	mrc_mr *mr;
} env;

static void env_up_features(env *e, uint32_t features)
{
	e->f = fake_start(F_NONE);
	atomic_store(&e->f->features, features); /* before our HELLO */
	assert_int_equal(mrc_session_open(e->f->path, "test", &e->s), 0);
	assert_int_equal(mrc_session_max_msg(e->s), 1u << 20);
	assert_int_equal(mrc_ctx_new(e->s, SQ_ENTRIES, 0, &e->ctx), 0);
	assert_true(mrc_ctx_fd(e->ctx) >= 0);
	assert_int_equal(mrc_connect(e->s, e->ctx, "127.0.0.2", 0, 77, NULL, &e->conn), 0);
	assert_int_equal(mrc_conn_wait_established(e->conn, 5000), 0);
	assert_int_equal(mrc_conn_status(e->conn), MRC_CONN_ESTABLISHED);
	assert_int_equal(mrc_conn_nstreams(e->conn), NSTREAMS);
	assert_int_equal(mrc_conn_handle(e->conn), 7);
	void *p;
	assert_int_equal(mrc_alloc(e->s, 3 * 4096, &p), 0);
	e->mem = p;
	assert_int_equal(mrc_reg_mr(e->s, e->mem + 4096 + 100, 200,
				    MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE, &e->mr),
			 0);
}

static void env_up(env *e)
{
	env_up_features(e, 0);
}

static void env_down(env *e)
{
	assert_int_equal(mrc_dereg_mr(e->mr), 0);
	assert_int_equal(mrc_free(e->s, e->mem), 0);
	mrc_session_close(e->s);
	fake_stop(e->f);
}

static void test_reg_mr(void **state)
{
	(void)state;
	env e;
	env_up(&e);
	/* The sub-page range went out as its whole page, with a sealed fd. */
	assert_true(e.f->mr_fd_sealed);
	assert_int_equal(e.f->mr_req.fd_offset, 4096);
	assert_int_equal(e.f->mr_req.len, 4096);
	assert_int_equal(e.f->mr_req.app_addr, (uint64_t)(uintptr_t)(e.mem + 4096));
	assert_ptr_equal(mrc_mr_addr(e.mr), e.mem + 4096);
	assert_int_equal(mrc_mr_len(e.mr), 4096);
	assert_int_equal(mrc_mr_lkey(e.mr), 5);
	assert_int_equal(mrc_mr_rkey(e.mr), 0xabcdef);
	/* Memory not from mrc_alloc(), or crossing the block's end. */
	mrc_mr *mr = (mrc_mr *)1;
	static uint8_t other[4096];
	assert_int_equal(mrc_reg_mr(e.s, other, sizeof(other), 0, &mr), MRC_ERR_INVAL);
	assert_null(mr);
	assert_int_equal(mrc_reg_mr(e.s, e.mem + 4096, 3 * 4096, 0, &mr), MRC_ERR_INVAL);
	assert_int_equal(mrc_reg_mr(e.s, e.mem, 0, 0, &mr), MRC_ERR_INVAL);
	assert_int_equal(mrc_reg_mr(e.s, e.mem, 10, 0x80, &mr), MRC_ERR_INVAL);
	/* A registered block cannot be freed. */
	assert_int_equal(mrc_free(e.s, e.mem), MRC_ERR_BUSY);
	env_down(&e);
}

static void test_post_checks(void **state)
{
	(void)state;
	env e;
	env_up(&e);
	uint8_t *buf = mrc_mr_addr(e.mr);
	/* stream beyond the connection's, buffer outside the region, bad
	 * opcode, RECV into a region without LOCAL_WRITE. */
	assert_int_equal(mrc_post_send(e.ctx, e.conn, NSTREAMS, buf, 8, e.mr, 1, 0), MRC_ERR_INVAL);
	assert_int_equal(mrc_post_send(e.ctx, e.conn, 0, buf - 1, 8, e.mr, 1, 0), MRC_ERR_INVAL);
	assert_int_equal(mrc_post_send(e.ctx, e.conn, 0, buf + 4090, 8, e.mr, 1, 0), MRC_ERR_INVAL);
	assert_int_equal(mrc_post_send(e.ctx, e.conn, 0, buf, 8, NULL, 1, 0), MRC_ERR_INVAL);
	assert_int_equal(mrc_post_send(e.ctx, NULL, 0, buf, 8, e.mr, 1, 0), MRC_ERR_INVAL);
	assert_int_equal(mrc_post_send(NULL, e.conn, 0, buf, 8, e.mr, 1, 0), MRC_ERR_INVAL);
	mrc_wr bad = {.opcode = 9, .conn = e.conn, .addr = buf, .len = 8, .mr = e.mr};
	assert_int_equal(mrc_post(e.ctx, &bad, 1, 0), MRC_ERR_INVAL);
	/* Nothing reached the ring. */
	assert_int_equal(atomic_load(&fake_sq(e.f)->tail), 0);

	/* One of each opcode: the entries as the daemon reads them. */
	assert_int_equal(mrc_post_write(e.ctx, e.conn, 1, buf, 16, e.mr, 0x1000, 0x77, 11, 0), 0);
	assert_int_equal(mrc_post_write_imm(e.ctx, e.conn, 2, buf + 16, 16, e.mr, 0x2000, 0x78,
					    0xfeed, 12, 0),
			 0);
	assert_int_equal(mrc_post_send(e.ctx, e.conn, 3, buf + 32, 1, e.mr, 13, 0), 0);
	assert_int_equal(mrc_post_send_imm(e.ctx, e.conn, 0, buf, 0, e.mr, 0xbeef, 14, 0), 0);
	assert_int_equal(mrc_post_recv(e.ctx, e.conn, 1, buf + 100, 4096 - 100, e.mr, 15, 0), 0);
	mrc_ring *sq = fake_sq(e.f);
	assert_int_equal(atomic_load(&sq->tail), 5);
	/* a READ lands in the buffer: its region must grant LOCAL_WRITE */
	mrc_mr ro = *e.mr;
	ro.access &= ~(uint32_t)MRC_ACCESS_LOCAL_WRITE;
	assert_int_equal(mrc_post_read(e.ctx, e.conn, 0, buf, 8, &ro, 0x3000, 0x79, 16, 0),
			 MRC_ERR_INVAL);
	assert_int_equal(atomic_load(&sq->tail), 5);
	mrc_sqe *q = fake_sqes(e.f);
	assert_int_equal(q[0].opcode, MRC_OP_WRITE);
	assert_int_equal(q[0].wr_id, 11);
	assert_int_equal(q[0].stream, 1);
	assert_int_equal(q[0].conn, 7);
	assert_int_equal(q[0].addr, (uint64_t)(uintptr_t)buf);
	assert_int_equal(q[0].lkey, 5);
	assert_int_equal(q[0].len, 16);
	assert_int_equal(q[0].remote_addr, 0x1000);
	assert_int_equal(q[0].rkey, 0x77);
	assert_int_equal(q[1].opcode, MRC_OP_WRITE_IMM);
	assert_int_equal(q[1].imm, 0xfeed);
	assert_int_equal(q[2].opcode, MRC_OP_SEND);
	assert_int_equal(q[2].len, 1);
	assert_int_equal(q[3].opcode, MRC_OP_SEND_IMM);
	assert_int_equal(q[3].imm, 0xbeef);
	assert_int_equal(q[3].len, 0); /* empty: no buffer named */
	assert_int_equal(q[3].addr, 0);
	assert_int_equal(q[3].lkey, 0);
	assert_int_equal(q[4].opcode, MRC_OP_RECV);
	assert_int_equal(q[4].len, 4096 - 100);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(q[i].flags, 0);
		for (size_t k = 0; k < sizeof(q[i].reserved); k++)
			assert_int_equal(q[i].reserved[k], 0);
	}
	/* Three more fill the 8-entry ring; the ninth is AGAIN. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(mrc_post_send(e.ctx, e.conn, 0, buf, 8, e.mr, 20 + (uint64_t)i, 0),
				 0);
	assert_int_equal(mrc_post_send(e.ctx, e.conn, 0, buf, 8, e.mr, 30, 0), MRC_ERR_AGAIN);
	/* The daemon consumes 4: room for 4, and mrc_post is all or none. */
	mrc_ring_consume(sq, 4);
	mrc_wr w[5];
	for (int i = 0; i < 5; i++)
		w[i] = (mrc_wr){.wr_id = 40 + (uint64_t)i, .opcode = MRC_OP_SEND, .conn = e.conn,
				.stream = (uint16_t)i % NSTREAMS, .addr = buf, .len = 8, .mr = e.mr};
	assert_int_equal(mrc_post(e.ctx, w, 5, 0), MRC_ERR_AGAIN);
	assert_int_equal(mrc_post(e.ctx, w, 9, 0), MRC_ERR_INVAL); /* more than the ring */
	/* MRC_POST_MORE: written but not published until mrc_submit. */
	assert_int_equal(mrc_post(e.ctx, w, 2, MRC_POST_MORE), 2);
	assert_int_equal(atomic_load(&sq->tail), 8);
	/* The daemon sleeps: the doorbell must ring at submit. */
	atomic_fetch_or(&sq->flags, MRC_RING_NEED_WAKEUP);
	assert_int_equal(mrc_submit(e.ctx), 2);
	assert_int_equal(atomic_load(&sq->tail), 10);
	uint8_t v[8];
	assert_true(read(e.f->doorbell, v, sizeof(v)) >= 1);
	assert_int_equal(q[8 & 7].wr_id, 40);
	assert_int_equal(q[9 & 7].wr_id, 41);
	assert_int_equal(q[9 & 7].stream, 1);
	/* An awake daemon is not kicked. */
	atomic_fetch_and(&sq->flags, ~MRC_RING_NEED_WAKEUP);
	assert_int_equal(mrc_post(e.ctx, &w[2], 1, 0), 1);
	assert_int_equal(read(e.f->doorbell, v, sizeof(v)), -1);
	env_down(&e);
}

/* MRC_POST_UNSIGNALED: the entry's flag when the daemon has the feature;
 * refused (nothing written) when it does not, and for receives. */
static void test_post_unsignaled(void **state)
{
	(void)state;
	env e;
	env_up(&e); /* an older daemon: no features */
	uint8_t *buf = mrc_mr_addr(e.mr);
	assert_int_equal(mrc_session_features(e.s), 0);
	assert_int_equal(mrc_post_write(e.ctx, e.conn, 0, buf, 8, e.mr, 0x1000, 0x77, 1,
					MRC_POST_UNSIGNALED),
			 MRC_ERR_VERSION);
	mrc_wr w = {.wr_id = 2, .opcode = MRC_OP_SEND, .conn = e.conn, .addr = buf, .len = 8,
		    .mr = e.mr};
	assert_int_equal(mrc_post(e.ctx, &w, 1, MRC_POST_UNSIGNALED), MRC_ERR_VERSION);
	assert_int_equal(atomic_load(&fake_sq(e.f)->tail), 0);
	env_down(&e);

	env_up_features(&e, MRC_FEAT_UNSIGNALED | 0x80000000u); /* and one we do not know */
	buf = mrc_mr_addr(e.mr);
	assert_int_equal(mrc_session_features(e.s), MRC_FEATURE_UNSIGNALED);
	assert_int_equal(mrc_post_recv(e.ctx, e.conn, 0, buf, 8, e.mr, 3, MRC_POST_UNSIGNALED),
			 MRC_ERR_INVAL);
	w.opcode = MRC_OP_RECV;
	assert_int_equal(mrc_post(e.ctx, &w, 1, MRC_POST_UNSIGNALED), MRC_ERR_INVAL);
	assert_int_equal(atomic_load(&fake_sq(e.f)->tail), 0);
	assert_int_equal(mrc_post_write(e.ctx, e.conn, 0, buf, 8, e.mr, 0x1000, 0x77, 4,
					MRC_POST_UNSIGNALED),
			 0);
	assert_int_equal(mrc_post_read(e.ctx, e.conn, 0, buf, 8, e.mr, 0x1000, 0x77, 5,
				       MRC_POST_UNSIGNALED | MRC_POST_MORE),
			 0);
	assert_int_equal(mrc_post_send(e.ctx, e.conn, 0, buf, 8, e.mr, 6, 0), 0);
	mrc_wr two[2] = {{.wr_id = 7, .opcode = MRC_OP_WRITE_IMM, .conn = e.conn, .addr = buf,
			  .len = 8, .mr = e.mr, .remote_addr = 0x1000, .rkey = 0x77, .imm = 1},
			 {.wr_id = 8, .opcode = MRC_OP_SEND_IMM, .conn = e.conn, .imm = 2}};
	assert_int_equal(mrc_post(e.ctx, two, 2, MRC_POST_UNSIGNALED), 2);
	mrc_sqe *q = fake_sqes(e.f);
	assert_int_equal(atomic_load(&fake_sq(e.f)->tail), 5);
	static const uint8_t want[5] = {MRC_SQE_UNSIGNALED, MRC_SQE_UNSIGNALED, 0,
					MRC_SQE_UNSIGNALED, MRC_SQE_UNSIGNALED};
	for (int i = 0; i < 5; i++) {
		assert_int_equal(q[i].wr_id, 4 + (uint64_t)i);
		assert_int_equal(q[i].flags, want[i]);
	}
	env_down(&e);
}

typedef struct cq_writer {
	fake *f;
	int n;
	int delay_ms;
	int jitter;
} cq_writer;

/* The daemon's side of the CQ: write n completions, publish, kick if
 * asked (the producer half of the handshake). */
static void *cq_produce(void *arg)
{
	cq_writer *w = arg;
	if (w->delay_ms)
		usleep((useconds_t)w->delay_ms * 1000);
	mrc_ring *cq = fake_cq(w->f);
	mrc_cqe *e = fake_cqes(w->f);
	uint32_t tail = atomic_load(&cq->tail);
	for (int i = 0; i < w->n; i++) {
		while (mrc_ring_room(cq, tail, CQ_ENTRIES) == 0)
			sched_yield();
		if (w->jitter && (tail % 97) == 0)
			usleep(tail % 3 ? 0 : 50); /* let the consumer fall asleep */
		e[tail & (CQ_ENTRIES - 1)] = (mrc_cqe){.wr_id = tail, .conn = 7, .byte_len = 8,
							.stream = (uint16_t)(tail % NSTREAMS),
							.opcode = MRC_WC_OP_RECV, .imm = tail,
							.flags = MRC_WC_WITH_IMM};
		tail++;
		if (mrc_ring_publish(cq, tail)) {
			uint8_t one = 1;
			(void)!write(w->f->wakeup, &one, 1);
		}
	}
	return NULL;
}

static void test_completions(void **state)
{
	(void)state;
	env e;
	env_up(&e);
	mrc_wc wc[8];
	assert_int_equal(mrc_poll_cq(e.ctx, wc, 8), 0);
	assert_int_equal(mrc_wait_cq(e.ctx, wc, 8, 50), MRC_ERR_TIMEOUT);
	/* Completions written while we sleep wake us, all in order. */
	cq_writer w = {.f = e.f, .n = 1000, .delay_ms = 100};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, cq_produce, &w), 0);
	uint64_t expect = 0;
	while (expect < 1000) {
		int n = mrc_wait_cq(e.ctx, wc, 8, 10000);
		assert_true(n > 0);
		for (int i = 0; i < n; i++) {
			assert_int_equal(wc[i].wr_id, expect);
			assert_int_equal(wc[i].imm, (uint32_t)expect);
			assert_int_equal(wc[i].stream, expect % NSTREAMS);
			assert_int_equal(wc[i].opcode, MRC_WC_OP_RECV);
			assert_int_equal(wc[i].flags, MRC_WC_WITH_IMM);
			expect++;
		}
	}
	pthread_join(t, NULL);
	/* The library's sleep/wake path under stress: 200,000 completions
	 * through a 16-entry CQ with the producer pausing now and then; a
	 * lost wakeup would be a 10 s timeout. */
	cq_writer w2 = {.f = e.f, .n = 200000, .jitter = 1};
	assert_int_equal(pthread_create(&t, NULL, cq_produce, &w2), 0);
	uint64_t base = expect;
	while (expect < base + 200000) {
		int n = mrc_wait_cq(e.ctx, wc, 8, 10000);
		assert_true(n > 0);
		for (int i = 0; i < n; i++)
			assert_int_equal(wc[i].wr_id, expect++);
	}
	pthread_join(t, NULL);
	/* Busy polling returns the same way. */
	mrc_ctx_set_busy_poll(e.ctx, 1000);
	w.n = 3;
	w.delay_ms = 0;
	cq_produce(&w);
	assert_int_equal(mrc_wait_cq(e.ctx, wc, 8, 1000), 3);
	/* arm: nothing waiting -> 0, flag set; a completion -> counted. */
	assert_int_equal(mrc_ctx_arm(e.ctx), 0);
	assert_true(atomic_load(&fake_cq(e.f)->flags) & MRC_RING_NEED_WAKEUP);
	w.n = 1;
	cq_produce(&w);
	struct pollfd p = {.fd = mrc_ctx_fd(e.ctx), .events = POLLIN};
	assert_int_equal(poll(&p, 1, 1000), 1);
	assert_int_equal(mrc_poll_cq(e.ctx, wc, 8), 1);
	/* poll_cq disarmed and drained the wakeup socket. */
	assert_false(atomic_load(&fake_cq(e.f)->flags) & MRC_RING_NEED_WAKEUP);
	assert_int_equal(poll(&p, 1, 0), 0);
	/* A hostile tail far past our head: PROTO, not a read out of bounds. */
	atomic_store(&fake_cq(e.f)->tail, atomic_load(&fake_cq(e.f)->head) + 1000);
	assert_int_equal(mrc_poll_cq(e.ctx, wc, 8), MRC_ERR_PROTO);
	env_down(&e);
}

static void test_events(void **state)
{
	(void)state;
	env e;
	env_up(&e);
	/* The ESTABLISHED event was consumed by wait_established. */
	mrc_event ev;
	assert_int_equal(mrc_get_event(e.s, &ev, 0), MRC_ERR_TIMEOUT);
	mrc_listener *l;
	assert_int_equal(mrc_listen(e.s, 99, e.ctx, 0, &l), 0);
	mrc_conn *in = NULL;
	assert_int_equal(mrc_accept(l, 5000, &in), 0);
	assert_non_null(in);
	assert_int_equal(mrc_conn_handle(in), 9);
	assert_int_equal(mrc_conn_status(in), MRC_CONN_ESTABLISHED);
	assert_int_equal(mrc_get_event(e.s, &ev, 0), MRC_ERR_TIMEOUT);
	/* A reset reaches the connection and the event queue. */
	send_event(e.f, MRC_EV_RESET, 9, MRC_ERR_CLOSED);
	assert_int_equal(mrc_get_event(e.s, &ev, 5000), 0);
	assert_int_equal(ev.type, MRC_EV_RESET);
	assert_ptr_equal(ev.conn, in);
	assert_int_equal(ev.status, MRC_ERR_CLOSED);
	assert_int_equal(mrc_conn_status(in), MRC_CONN_RESET);
	uint8_t *buf = mrc_mr_addr(e.mr);
	assert_int_equal(mrc_post_send(e.ctx, in, 0, buf, 8, e.mr, 1, 0), MRC_ERR_CLOSED);
	/* Closing a reset connection does not ask the daemon. */
	int closes = e.f->closes;
	assert_int_equal(mrc_close(in, 0), 0);
	assert_int_equal(e.f->closes, closes);
	/* A context with an open connection is not destroyed. */
	assert_int_equal(mrc_ctx_del(e.ctx), MRC_ERR_BUSY);
	/* A closed connection's late events are dropped. */
	assert_int_equal(mrc_close(e.conn, 1), 0);
	assert_int_equal(e.f->closes, closes + 1);
	send_event(e.f, MRC_EV_CLOSED, 7, 0);
	assert_int_equal(mrc_get_event(e.s, &ev, 200), MRC_ERR_TIMEOUT);
	assert_int_equal(mrc_unlisten(l), 0);
	env_down(&e);
}

static void test_daemon_death(void **state)
{
	(void)state;
	env e;
	env_up(&e);
	uint8_t *buf = mrc_mr_addr(e.mr);
	/* The daemon dies while we sleep in mrc_wait_cq(): DAEMON, no hang. */
	fake_die(e.f);
	mrc_wc wc[4];
	assert_int_equal(mrc_wait_cq(e.ctx, wc, 4, 10000), MRC_ERR_DAEMON);
	/* And from then on, everything. */
	assert_int_equal(mrc_poll_cq(e.ctx, wc, 4), MRC_ERR_DAEMON);
	assert_int_equal(mrc_post_send(e.ctx, e.conn, 0, buf, 8, e.mr, 1, 0), MRC_ERR_DAEMON);
	assert_int_equal(mrc_ctx_arm(e.ctx), MRC_ERR_DAEMON);
	mrc_event ev;
	assert_int_equal(mrc_get_event(e.s, &ev, 1000), MRC_ERR_DAEMON);
	mrc_ctx *c2;
	assert_int_equal(mrc_ctx_new(e.s, 8, 0, &c2), MRC_ERR_DAEMON);
	/* Freeing local state still works; the memory outlives the session. */
	assert_int_equal(mrc_dereg_mr(e.mr), MRC_ERR_DAEMON);
	mrc_session_close(e.s);
	memset(e.mem, 7, 3 * 4096);
	assert_int_equal(mrc_free(NULL, e.mem), 0);
	fake_stop(e.f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_hello_faults),
		cmocka_unit_test(test_shm_faults),
		cmocka_unit_test(test_shm_check_direct),
		cmocka_unit_test(test_alloc),
		cmocka_unit_test(test_reg_mr),
		cmocka_unit_test(test_post_checks),
		cmocka_unit_test(test_post_unsignaled),
		cmocka_unit_test(test_completions),
		cmocka_unit_test(test_events),
		cmocka_unit_test(test_daemon_death),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
