/*
 * A drop-in libibverbs.so.1 over metarocd: unmodified verbs programs
 * (perftest, ibv_rc_pingpong, ...) run on libmetaroce through the loader
 * path (metaroce-run(1)); the system's library is never replaced.
 *
 * Built against the installed <infiniband/verbs.h>, so every structure the
 * header's inline functions reach (struct verbs_context and its ops) has
 * the layout those programs were compiled with. Exported functions carry
 * MRV_API; gen_symbols.py stubs every other function the installed library
 * exports (they fail with EOPNOTSUPP and say so on stderr).
 *
 * Model: one device "metaroce0" per daemon, one port, Ethernet link layer,
 * GID i = plane i's address (RoCE v2, IPv4-mapped for IPv4). An open device
 * is one libmetaroce context (one pair of rings) shared by all its queue
 * pairs; a queue pair is one daemon connection with one stream. Its
 * number (QPN) is the service it listens on (MRV_SVC_BASE | QPN, unique in
 * the daemon: a taken one is refused and the next is tried). The move to
 * RTR picks the side that connects: the one whose (GID, QPN) is smaller
 * connects to the peer's service at the destination GID's address (the
 * daemon's own service port: every daemon of a fabric uses one port); the
 * other side takes the connection its listener receives. Work posted before
 * the connection exists waits in the library and is posted when it is up.
 *
 * Completions: the context's one completion ring is drained into a
 * software queue per CQ (send or receive CQ of the request's QP). Completion
 * channels get an eventfd; a thread per open device (started with the
 * first channel) sleeps on the rings' wakeup fd while a CQ is armed and
 * signals the channel.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "internal.h"
#include "metaroce.h"
#include "spin.h"

/* The header turns these into inline wrappers; we define the symbols. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define MRV_API __attribute__((visibility("default")))

#define MRV_SVC_BASE 0x51000000u /* 'Q' << 24: service of QPN n is MRV_SVC_BASE | n */
#define MRV_QPN_MASK 0xffffffu
#define MRV_SQ_ENTRIES 8192u
#define MRV_CQ_ENTRIES 16384u
#define MRV_CONNECT_MS 10000
#define MRV_MAX_WR 4096u
#define MRV_MAX_RD_ATOM 16 /* READs per QP either way: the engine's rd_max */

/* ---- messages ------------------------------------------------------------------ */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "metaroce: %s\n", buf);
}

/* ---- objects ------------------------------------------------------------------- */

typedef struct mrv_qp mrv_qp;
typedef struct mrv_cq mrv_cq;
typedef struct mrv_ctx mrv_ctx;

/* A work request in the daemon. Its wr_id there is the slot's index and,
 * above it, the slot's generation: a completion for a slot freed and
 * reused since (an unsignaled send retired by a later completion, whose
 * own flush still came) is told apart and dropped. */
typedef struct mrv_slot {
	uint64_t wr_id;
	mrv_qp *qp;
	uint32_t len; /* a send's bytes (0 for a receive) */
	uint32_t next_free;
	uint32_t gen;
	uint32_t qnext; /* a send: the next send of its QP (posting order) */
	uint8_t signaled;
	uint8_t unsig;  /* posted MRC_POST_UNSIGNALED: no completion on success */
	uint8_t opcode; /* enum ibv_wc_opcode */
	uint8_t used;
} mrv_slot;

struct mrv_cq {
	struct ibv_cq cq;
	mrv_cq *next;
	struct ibv_wc *q; /* a power of two, grows: nothing is ever dropped */
	uint32_t qcap, head, tail;
	int armed;
	uint32_t events; /* delivered, for ibv_ack_cq_events() */
	/* the wait of an empty poll_cq() (spin.h) */
	uint32_t empty_run;   /* empty polls in a row */
	uint64_t wait0_ns;    /* the wait's start (0: the last poll found some) */
	uint64_t cpu0_ns;     /* the thread's CPU time then */
	uint64_t spin_wall_ns, spin_cpu_ns; /* the spin's length and CPU, once it ended */
	uint32_t budget_ns;   /* this wait's spin */
	uint8_t slept;        /* the wait slept */
	uint8_t gated;        /* it slept before its budget ran out (sends outstanding) */
	mrv_spin spin;
	uint64_t n_caught, n_slept, n_gated; /* waits, for METAROCE_VERBS_SPIN_DEBUG */
};

typedef struct mrv_chan {
	struct ibv_comp_channel ch;
	mrv_cq **q;
	uint32_t qcap, head, tail;
} mrv_chan;

typedef struct mrv_pending {
	struct mrv_pending *next;
	int is_recv;
	struct ibv_send_wr swr;
	struct ibv_recv_wr rwr;
	struct ibv_sge sge;
} mrv_pending;

struct mrv_qp {
	struct ibv_qp qp;
	mrv_qp *next;
	mrc_listener *l;
	mrc_conn *conn;
	int connector;       /* this side connects at RTR */
	int awaiting;        /* RTR reached, the peer's connection not yet in */
	int err;             /* in the error state: everything flushes */
	int peer_closed;     /* the peer closed gracefully (destroyed its QP) */
	int sq_sig_all;
	struct ibv_qp_cap cap;
	uint32_t outstanding_send, outstanding_recv;
	uint32_t sq_head, sq_tail; /* its sends in the daemon, in posting order (slots) */
	mrv_pending *pend_head, *pend_tail;
	union ibv_gid dgid;
	uint32_t dest_qpn;
	uint8_t port_num;
	enum ibv_mtu path_mtu;
	uint32_t sq_psn, rq_psn;
	uint8_t max_rd_atomic, max_dest_rd_atomic, timeout, retry_cnt, rnr_retry, min_rnr_timer;
	unsigned access;
};

typedef struct mrv_mr {
	struct ibv_mr mr;
	struct mrv_mr *next;
	mrc_mr *m;
	void *block; /* the block this registration moved into a memfd, or NULL */
} mrv_mr;

struct mrv_ctx {
	struct verbs_context vctx;
	pthread_mutex_t lock;
	mrc_session *sess; /* this device's own: its events are this context's */
	int dead;          /* the daemon went away: every call fails */
	uint32_t idle_polls;
	uint32_t nsend;     /* sends (WRITE, SEND, READ) in the daemon */
	uint64_t send_bytes; /* and their bytes */
	uint64_t n_sleeps, n_sleeps_out; /* idle_sleep()s; of them, ended by the bound */
	mrc_ctx *ctx;
	mrc_devinfo_rep info;
	mrv_cq *cqs;
	mrv_qp *qps;
	mrv_mr *mrs;
	mrv_slot *slots;
	uint32_t nslots, free_slot;
	int unsig_ok; /* the daemon takes MRC_POST_UNSIGNALED (and it is not turned off) */
	unsigned nawaiting;
	int evfd; /* async_fd: a real fd that never fires (no async events) */
	/* the notifier thread */
	pthread_t thr;
	int thr_started, thr_stop, wake;
};

static struct ibv_device mrv_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "metaroce0",
	.dev_name = "metaroce0",
	.dev_path = "",
	.ibdev_path = "",
};

/* A session with the daemon: one per open device (its events are its
 * own), and a short one to find out whether the device exists. */
/* An empty ibv_poll_cq() spins, yielding the CPU every MRV_IDLE_SPIN
 * empty polls, for a while from the first of them (a reply that comes
 * soon is seen without a wakeup: ping-pong latency), then sleeps until the
 * next completion every MRV_IDLE_SPIN empty polls (the daemons get the
 * CPU: bandwidth). How long it spins follows the CQ's past waits (spin.h:
 * up to twice the usual wait, at most 400 us; 30 us until it knows; not at
 * all when long spins stopped catching their completion or when the host
 * has no idle core). It spins only while at most MRV_SPIN_MAX_BYTES of sends
 * are outstanding: with more, the next completion is far (a 64 KiB WRITE
 * takes the daemons 30 us and more on a host like ours) and a spinning
 * program only takes a CPU from the daemons that must produce it. A sleep
 * lasts at most MRV_IDLE_SLEEP_NS (a program that polls a CQ while it waits
 * for something else, such as memory a peer writes, sees an empty poll that
 * was a little slow, never a hang), or MRV_BUSY_SLEEP_NS while sends are
 * outstanding (their completions wake it; a 1 ms bound cost a fifth of
 * ib_write_bw's bandwidth on a quiet 2-core host although almost no sleep
 * reached it, for a reason not found: bench/README.md).
 * METAROCE_VERBS_SPIN_US fixes the spin, METAROCE_VERBS_SPIN_MAX_US bounds
 * the adaptive one;
 * METAROCE_VERBS_POLL=spin never sleeps. */
#define MRV_IDLE_SPIN 64
#define MRV_IDLE_SLEEP_NS 100000
#define MRV_BUSY_SLEEP_NS 10000000
#define MRV_SPIN_MAX_BYTES 65536u
static int g_poll_spin;
static int g_spin_fixed;     /* METAROCE_VERBS_SPIN_US: this spin, always */
static uint32_t g_spin_ns;   /* (its length) */
static mrv_spin_cfg g_spin_cfg = MRV_SPIN_CFG_DEFAULT;
static int g_spin_debug;     /* METAROCE_VERBS_SPIN_DEBUG: each CQ's waits when destroyed */

/* A microsecond count from the environment, at most 1 s; -1 when unset or
 * not a number. */
static long env_us(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	char *end;
	unsigned long long u = strtoull(v, &end, 10);
	if (*end || v[0] == '-') {
		say("%s=%s is not a count of microseconds: ignored", name, v);
		return -1;
	}
	return u > 1000000 ? 1000000 : (long)u;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static mrc_session *session_open(void)
{
	const char *pm = getenv("METAROCE_VERBS_POLL");
	g_poll_spin = pm && !strcmp(pm, "spin");
	long us = env_us("METAROCE_VERBS_SPIN_US");
	g_spin_fixed = us >= 0;
	g_spin_ns = us >= 0 ? (uint32_t)us * 1000u : 0;
	const char *sd = getenv("METAROCE_VERBS_SPIN_DEBUG");
	g_spin_debug = sd && *sd && strcmp(sd, "0");
	us = env_us("METAROCE_VERBS_SPIN_MAX_US");
	if (us >= 0)
		g_spin_cfg.max_ns = (uint32_t)us * 1000u;
	const char *p = getenv("METAROCE_APP_SOCKET");
	mrc_session *s = NULL;
	int rc = mrc_session_open(NULL, program_invocation_short_name, &s);
	if (rc) {
		say("no metarocd at %s: %s", p && *p ? p : MRC_DEFAULT_SOCKET, mrc_strerror(rc));
		return NULL;
	}
	return s;
}

static mrv_ctx *C(struct ibv_context *c)
{
	return (mrv_ctx *)((uint8_t *)c - offsetof(struct verbs_context, context));
}

static mrv_qp *Q(struct ibv_qp *q)
{
	return (mrv_qp *)q;
}

static mrv_cq *CQ(struct ibv_cq *c)
{
	return (mrv_cq *)c;
}

/* ---- strings -------------------------------------------------------------------- */

MRV_API const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)status < sizeof(s) / sizeof(s[0]) && s[status])
		return s[status];
	return "unknown";
}

MRV_API const char *ibv_node_type_str(enum ibv_node_type t)
{
	switch (t) {
	case IBV_NODE_CA: return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH: return "InfiniBand switch";
	case IBV_NODE_ROUTER: return "InfiniBand router";
	case IBV_NODE_RNIC: return "iWARP NIC";
	case IBV_NODE_USNIC: return "usNIC";
	case IBV_NODE_USNIC_UDP: return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED: return "unspecified";
	default: return "unknown";
	}
}

MRV_API const char *ibv_port_state_str(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_NOP: return "PORT_NOP";
	case IBV_PORT_DOWN: return "PORT_DOWN";
	case IBV_PORT_INIT: return "PORT_INIT";
	case IBV_PORT_ARMED: return "PORT_ARMED";
	case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
	default: return "invalid state";
	}
}

MRV_API const char *ibv_event_type_str(enum ibv_event_type e)
{
	switch (e) {
	case IBV_EVENT_CQ_ERR: return "CQ error";
	case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
	case IBV_EVENT_COMM_EST: return "communication established";
	case IBV_EVENT_PORT_ACTIVE: return "port active";
	case IBV_EVENT_PORT_ERR: return "port error";
	case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
	default: return "unknown";
	}
}

MRV_API int ibv_rate_to_mult(enum ibv_rate rate)
{
	switch (rate) {
	case IBV_RATE_2_5_GBPS: return 1;
	case IBV_RATE_5_GBPS: return 2;
	case IBV_RATE_10_GBPS: return 4;
	case IBV_RATE_20_GBPS: return 8;
	case IBV_RATE_30_GBPS: return 12;
	case IBV_RATE_40_GBPS: return 16;
	case IBV_RATE_60_GBPS: return 24;
	case IBV_RATE_80_GBPS: return 32;
	case IBV_RATE_120_GBPS: return 48;
	default: return -1;
	}
}

MRV_API int ibv_rate_to_mbps(enum ibv_rate rate)
{
	switch (rate) {
	case IBV_RATE_2_5_GBPS: return 2500;
	case IBV_RATE_5_GBPS: return 5000;
	case IBV_RATE_10_GBPS: return 10000;
	case IBV_RATE_20_GBPS: return 20000;
	case IBV_RATE_25_GBPS: return 25000;
	case IBV_RATE_40_GBPS: return 40000;
	case IBV_RATE_50_GBPS: return 50000;
	case IBV_RATE_100_GBPS: return 100000;
	case IBV_RATE_200_GBPS: return 200000;
	case IBV_RATE_400_GBPS: return 400000;
	default: return -1;
	}
}

/* ---- devices --------------------------------------------------------------------- */

MRV_API struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l = calloc(2, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	mrc_session *s = session_open();
	int n = s ? 1 : 0;
	mrc_session_close(s);
	if (n)
		l[0] = &mrv_device;
	if (num)
		*num = n;
	return l;
}

MRV_API void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

MRV_API const char *ibv_get_device_name(struct ibv_device *d)
{
	return d ? d->name : NULL;
}

MRV_API int ibv_get_device_index(struct ibv_device *d)
{
	return d == &mrv_device ? 0 : -1;
}

static uint64_t guid_of(const mrc_devinfo_rep *info)
{
	/* EUI-64 style from the first plane's address: stable per daemon. */
	uint8_t g[8] = {0x02, 0x4d, 0x52, 0, 0, 0, 0, 0};
	if (info->nplanes) {
		const uint8_t *a = info->planes[0].addr;
		const uint8_t *t = info->planes[0].family == 4 ? a : a + 12;
		memcpy(g + 4, t, 4);
	}
	uint64_t v;
	memcpy(&v, g, 8);
	return v; /* network order in memory, as GUIDs are */
}

MRV_API __be64 ibv_get_device_guid(struct ibv_device *d)
{
	if (d != &mrv_device)
		return 0;
	mrc_session *s = session_open();
	mrc_devinfo_rep info;
	int rc = s ? mrc_session_devinfo(s, &info) : MRC_ERR_DAEMON;
	mrc_session_close(s);
	return rc ? 0 : guid_of(&info);
}

static enum ibv_mtu mtu_enum(uint32_t mtu)
{
	if (mtu >= 4096) return IBV_MTU_4096;
	if (mtu >= 2048) return IBV_MTU_2048;
	if (mtu >= 1024) return IBV_MTU_1024;
	if (mtu >= 512) return IBV_MTU_512;
	return IBV_MTU_256;
}

static void gid_of(const mrc_devinfo_plane *p, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (p->family == 4) {
		g->raw[10] = 0xff;
		g->raw[11] = 0xff;
		memcpy(g->raw + 12, p->addr, 4);
	} else {
		memcpy(g->raw, p->addr, 16);
	}
}

static int query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a,
		      size_t len)
{
	mrv_ctx *x = C(c);
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr pa;
	memset(&pa, 0, sizeof(pa));
	uint64_t bps = 0;
	int up = 0;
	for (unsigned i = 0; i < x->info.nplanes; i++) {
		bps += x->info.planes[i].speed_bps;
		up |= x->info.planes[i].up;
	}
	pa.state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	pa.max_mtu = pa.active_mtu = mtu_enum(x->info.mtu);
	pa.gid_tbl_len = x->info.nplanes;
	pa.port_cap_flags = 0;
	pa.max_msg_sz = x->info.max_msg;
	pa.pkey_tbl_len = 1;
	pa.max_vl_num = 1;
	pa.phys_state = up ? 5 : 3; /* LinkUp / Disabled */
	pa.link_layer = IBV_LINK_LAYER_ETHERNET;
	/* Width and speed from the planes' total (unknown: the smallest). */
	uint64_t g = bps / 1000000000ull;
	if (g >= 200) { pa.active_width = 2; pa.active_speed = 64; }      /* 4X HDR */
	else if (g >= 100) { pa.active_width = 2; pa.active_speed = 32; } /* 4X EDR */
	else if (g >= 50) { pa.active_width = 2; pa.active_speed = 16; }  /* 4X FDR */
	else if (g >= 40) { pa.active_width = 2; pa.active_speed = 4; }   /* 4X QDR */
	else if (g >= 25) { pa.active_width = 1; pa.active_speed = 32; }  /* 1X EDR */
	else if (g >= 10) { pa.active_width = 1; pa.active_speed = 4; }   /* 1X QDR */
	else if (g >= 5) { pa.active_width = 1; pa.active_speed = 2; }    /* 1X DDR */
	else { pa.active_width = 1; pa.active_speed = 1; }                 /* 1X SDR */
	memcpy(a, &pa, len < sizeof(pa) ? len : sizeof(pa));
	return 0;
}

MRV_API int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a)
{
	/* the old structure: everything before port_cap_flags2 */
	return query_port(c, port, (struct ibv_port_attr *)a,
			  offsetof(struct ibv_port_attr, port_cap_flags2));
}

static void device_attr(mrv_ctx *x, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "metaroce-%u.%u", MRC_ABI_VERSION, 0u);
	a->node_guid = a->sys_image_guid = guid_of(&x->info);
	a->max_mr_size = x->info.max_msg ? x->info.max_msg : UINT32_MAX;
	a->page_size_cap = (uint64_t)sysconf(_SC_PAGESIZE);
	a->vendor_id = 0; /* not a known vendor: perftest uses the plain verbs */
	a->vendor_part_id = 0;
	a->hw_ver = 0;
	a->max_qp = 1024;
	a->max_qp_wr = MRV_MAX_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
	a->max_sge = 1;
	a->max_sge_rd = 0;
	a->max_cq = 1024;
	a->max_cqe = 1 << 20;
	a->max_mr = 1024;
	a->max_pd = 1024;
	/* RDMA READ: the daemon's engine has at most 16 READs of a connection
	 * out (more wait in order) and serves up to 64 of its peer's (SPEC
	 * 5.8): 16 either way is what an application may count on. */
	a->max_qp_rd_atom = MRV_MAX_RD_ATOM;
	a->max_qp_init_rd_atom = MRV_MAX_RD_ATOM;
	a->max_res_rd_atom = MRV_MAX_RD_ATOM * a->max_qp;
	a->atomic_cap = IBV_ATOMIC_NONE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 0;
	a->phys_port_cnt = 1;
}

MRV_API int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	device_attr(C(c), a);
	return 0;
}

static int query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *a, size_t len)
{
	(void)in;
	struct ibv_device_attr_ex ax;
	memset(&ax, 0, sizeof(ax));
	device_attr(C(c), &ax.orig_attr);
	ax.phys_port_cnt_ex = 1;
	memcpy(a, &ax, len < sizeof(ax) ? len : sizeof(ax));
	return 0;
}

MRV_API int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	mrv_ctx *x = C(c);
	if (port != 1 || index < 0 || (unsigned)index >= x->info.nplanes) {
		errno = EINVAL;
		return -1;
	}
	gid_of(&x->info.planes[index], gid);
	return 0;
}

MRV_API int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
			      struct ibv_gid_entry *e, uint32_t flags, size_t len)
{
	mrv_ctx *x = C(c);
	if (flags || port != 1 || index >= x->info.nplanes || len < sizeof(*e))
		return EINVAL;
	memset(e, 0, sizeof(*e));
	gid_of(&x->info.planes[index], &e->gid);
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = 0;
	return 0;
}

MRV_API ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e,
				     size_t max, uint32_t flags, size_t len)
{
	mrv_ctx *x = C(c);
	if (flags || len < sizeof(*e))
		return -EINVAL;
	size_t n = 0;
	for (uint32_t i = 0; i < x->info.nplanes && n < max; i++, n++)
		_ibv_query_gid_ex(c, 1, i, &e[n], 0, sizeof(*e));
	return (ssize_t)n;
}

/* Private to rdma-core (driver.h): enum ibv_gid_type_sysfs, where RoCE v2
 * is 1. ibv_devinfo asks it for each GID. */
int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index, int *type);
MRV_API int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index, int *type)
{
	if (port != 1 || index >= C(c)->info.nplanes)
		return -1;
	*type = 1;
	return 0;
}

/* There is no sysfs device: every read fails (ibv_devinfo falls back). */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
MRV_API int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	(void)dir;
	(void)file;
	(void)buf;
	(void)size;
	errno = ENOENT;
	return -1;
}

/* librdmacm asks this first: say what is really missing. */
const char *ibv_get_sysfs_path(void);
MRV_API const char *ibv_get_sysfs_path(void)
{
	say("rdma_cm (librdmacm) is not supported: exchange QP numbers and GIDs out of band "
	    "(perftest without -R)");
	errno = EOPNOTSUPP;
	return NULL;
}

MRV_API int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	(void)c;
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htons(0xffff);
	return 0;
}

MRV_API int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey)
{
	(void)c;
	return port == 1 && pkey == htons(0xffff) ? 0 : -1;
}

MRV_API int ibv_fork_init(void)
{
	return 0; /* see metaroce-run(1): registered memory is shared after fork */
}

MRV_API enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_DISABLED;
}

/* ---- completions: the context's ring into the CQs' queues -------------------------- */

static int cq_push(mrv_cq *cq, const struct ibv_wc *wc)
{
	if (cq->tail - cq->head == cq->qcap) {
		uint32_t ncap = cq->qcap * 2;
		struct ibv_wc *nq = malloc(sizeof(*nq) * ncap);
		if (!nq) {
			say("out of memory growing a completion queue: a completion is lost");
			return -1;
		}
		for (uint32_t i = 0; i < cq->qcap; i++)
			nq[i] = cq->q[(cq->head + i) & (cq->qcap - 1)];
		free(cq->q);
		cq->q = nq;
		cq->tail = cq->qcap;
		cq->head = 0;
		cq->qcap = ncap;
	}
	cq->q[cq->tail++ & (cq->qcap - 1)] = *wc;
	return 0;
}

static int chan_push(mrv_chan *ch, mrv_cq *cq)
{
	if (ch->tail - ch->head == ch->qcap) {
		uint32_t ncap = ch->qcap ? ch->qcap * 2 : 16;
		mrv_cq **nq = malloc(sizeof(*nq) * ncap);
		if (!nq)
			return -1;
		for (uint32_t i = 0; i < ch->tail - ch->head; i++)
			nq[i] = ch->q[(ch->head + i) & (ch->qcap - 1)];
		free(ch->q);
		ch->tail -= ch->head;
		ch->head = 0;
		ch->q = nq;
		ch->qcap = ncap;
	}
	ch->q[ch->tail++ & (ch->qcap - 1)] = cq;
	uint64_t one = 1;
	if (write(ch->ch.fd, &one, sizeof(one)) != sizeof(one))
		return -1;
	return 0;
}

/* An armed CQ with something in it signals its channel (once per arming). */
static void cq_fire(mrv_cq *cq)
{
	if (!cq->armed || cq->head == cq->tail || !cq->cq.channel)
		return;
	cq->armed = 0;
	chan_push((mrv_chan *)cq->cq.channel, cq);
}

static enum ibv_wc_status wc_status(int st)
{
	switch (st) {
	case MRC_WC_SUCCESS: return IBV_WC_SUCCESS;
	case MRC_WC_REM_ACCESS: return IBV_WC_REM_ACCESS_ERR;
	case MRC_WC_REM_BOUNDS: return IBV_WC_REM_ACCESS_ERR;
	case MRC_WC_RNR_RETRY_EXC: return IBV_WC_RNR_RETRY_EXC_ERR;
	case MRC_WC_RETRY_EXC: return IBV_WC_RETRY_EXC_ERR;
	case MRC_WC_RESET: return IBV_WC_REM_ABORT_ERR;
	case MRC_WC_FLUSHED: return IBV_WC_WR_FLUSH_ERR;
	case MRC_WC_LOC_LEN: return IBV_WC_LOC_LEN_ERR;
	case MRC_WC_REM_INVALID: return IBV_WC_REM_INV_REQ_ERR;
	case MRC_WC_LOC_PROT: return IBV_WC_LOC_PROT_ERR;
	case MRC_WC_BAD_WR: return IBV_WC_LOC_QP_OP_ERR;
	default: return IBV_WC_GENERAL_ERR;
	}
}

static uint32_t slot_get(mrv_ctx *x)
{
	uint32_t i = x->free_slot;
	if (i == UINT32_MAX)
		return i;
	x->free_slot = x->slots[i].next_free;
	x->slots[i].used = 1;
	x->slots[i].gen++;
	x->slots[i].unsig = 0;
	x->slots[i].qnext = UINT32_MAX;
	return i;
}

static void slot_put(mrv_ctx *x, uint32_t i)
{
	x->slots[i].used = 0;
	x->slots[i].qp = NULL;
	x->slots[i].next_free = x->free_slot;
	x->free_slot = i;
}

static void qp_set_error(mrv_qp *q);
static void pump(mrv_ctx *x);

/* A completion for the app: to the QP's send or receive CQ. Unsignaled
 * successes are dropped; after an error every completion is a flush. */
static void deliver(mrv_qp *q, int is_recv, int signaled, uint64_t wr_id,
		    enum ibv_wc_opcode op, enum ibv_wc_status st, uint32_t byte_len,
		    uint32_t imm, int with_imm)
{
	if (q->err && st == IBV_WC_SUCCESS)
		st = IBV_WC_WR_FLUSH_ERR;
	if (st == IBV_WC_SUCCESS && !is_recv && !signaled)
		return;
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = byte_len;
	wc.qp_num = q->qp.qp_num;
	if (with_imm) {
		wc.wc_flags = IBV_WC_WITH_IMM;
		wc.imm_data = imm;
	}
	mrv_cq *cq = CQ(is_recv ? q->qp.recv_cq : q->qp.send_cq);
	cq_push(cq, &wc);
	cq_fire(cq);
	if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR && !q->err) {
		say("QP %u: %s completion: %s; the QP is in the error state now",
		    q->qp.qp_num, is_recv ? "receive" : "send", ibv_wc_status_str(st));
		qp_set_error(q);
	}
}

/* The daemon went away (lock held): say so once, wake every channel so
 * no program sleeps forever in ibv_get_cq_event(); from now on polls
 * return -1 and posts EIO. */
static void check_dead(mrv_ctx *x)
{
	if (x->dead || !mrc_is_dead(x->sess))
		return;
	x->dead = 1;
	say("the daemon went away: device metaroce0 is gone, work in flight is lost");
	for (mrv_cq *c = x->cqs; c; c = c->next)
		if (c->cq.channel)
			chan_push((mrv_chan *)c->cq.channel, c);
}

/* A send of q leaves the daemon: take slot k off q's list of sends in
 * posting order. When its completion is a success, every unsignaled send
 * posted before it on q completed successfully too (abi.h,
 * MRC_SQE_UNSIGNALED: one stream, completions in posting order) and
 * retires here: as a success, dropped by deliver(), or as a flush when
 * the QP is in the error state, as its own completion would have been.
 * A failed or flushed completion retires only its own request: unsignaled
 * ones before it either come back flushed or completed unseen (they stay
 * listed until the QP is reset or destroyed: sq_drop()). */
static void sq_retire(mrv_ctx *x, mrv_qp *q, uint32_t k, int success)
{
	/* Not listed (a send from before the QP was reset, whose completion
	 * was still in the ring): it implies nothing about the sends now
	 * listed. */
	uint32_t j = q->sq_head;
	while (j != UINT32_MAX && j != k)
		j = x->slots[j].qnext;
	if (j != k)
		return;
	uint32_t *pp = &q->sq_head, prev = UINT32_MAX;
	while (*pp != UINT32_MAX && *pp != k) {
		uint32_t i = *pp;
		mrv_slot *s = &x->slots[i];
		if (!success || !s->unsig) {
			prev = i;
			pp = &s->qnext;
			continue;
		}
		*pp = s->qnext;
		mrv_slot sl = *s;
		slot_put(x, i);
		x->nsend--;
		x->send_bytes -= sl.len;
		q->outstanding_send--;
		deliver(q, 0, 0, sl.wr_id, (enum ibv_wc_opcode)sl.opcode, IBV_WC_SUCCESS, sl.len, 0,
			0);
	}
	if (*pp == k) {
		*pp = x->slots[k].qnext;
		if (q->sq_tail == k)
			q->sq_tail = prev;
	}
}

/* q is reset or destroyed: its unsignaled sends still listed are
 * forgotten (a completion that still comes for one has a stale generation
 * and is dropped: a reset completes nothing). Signaled ones keep their
 * slots until their completion comes, as before. */
static void sq_drop(mrv_ctx *x, mrv_qp *q)
{
	uint32_t i = q->sq_head;
	while (i != UINT32_MAX) {
		mrv_slot *s = &x->slots[i];
		uint32_t next = s->qnext;
		s->qnext = UINT32_MAX;
		if (s->unsig) {
			x->nsend--;
			x->send_bytes -= s->len;
			q->outstanding_send--;
			slot_put(x, i);
		}
		i = next;
	}
	q->sq_head = q->sq_tail = UINT32_MAX;
}

/* Drain the context's ring (lock held). Returns MRC_ERR_* or 0. */
static int drain(mrv_ctx *x)
{
	mrc_wc w[64];
	for (;;) {
		int n = mrc_poll_cq(x->ctx, w, 64);
		if (n < 0) {
			check_dead(x);
			return n;
		}
		for (int i = 0; i < n; i++) {
			uint32_t si = (uint32_t)w[i].wr_id, gen = (uint32_t)(w[i].wr_id >> 32);
			if (si >= x->nslots || !x->slots[si].used || x->slots[si].gen != gen)
				continue;
			mrv_slot sl = x->slots[si];
			if (sl.opcode != IBV_WC_RECV && sl.qp)
				sq_retire(x, sl.qp, si, w[i].status == MRC_WC_SUCCESS);
			slot_put(x, si);
			if (sl.opcode != IBV_WC_RECV) {
				x->nsend--;
				x->send_bytes -= sl.len;
			}
			mrv_qp *q = sl.qp;
			if (!q)
				continue; /* its QP is gone */
			int is_recv = sl.opcode == IBV_WC_RECV; /* flushes carry no opcode we trust */
			if (is_recv)
				q->outstanding_recv--;
			else
				q->outstanding_send--;
			if (is_recv && !q->err && w[i].status == MRC_WC_FLUSHED) {
				if (!q->peer_closed)
					pump(x); /* is it the peer's close? */
				if (q->peer_closed)
					continue;
			}
			enum ibv_wc_opcode op = (enum ibv_wc_opcode)sl.opcode;
			if (w[i].opcode == MRC_WC_OP_RECV_WRITE_IMM)
				op = IBV_WC_RECV_RDMA_WITH_IMM;
			deliver(q, is_recv, sl.signaled, sl.wr_id, op, wc_status(w[i].status),
				w[i].byte_len, w[i].imm, (w[i].flags & MRC_WC_WITH_IMM) != 0);
		}
		if (n < 64)
			return 0;
	}
}

/* ---- posting --------------------------------------------------------------------- */

static mrv_mr *mr_by_lkey(mrv_ctx *x, uint32_t lkey)
{
	for (mrv_mr *m = x->mrs; m; m = m->next)
		if (m->mr.lkey == lkey)
			return m;
	return NULL;
}

static int post_one_send(mrv_ctx *x, mrv_qp *q, const struct ibv_send_wr *wr, unsigned flags)
{
	int op;
	enum ibv_wc_opcode wop;
	switch (wr->opcode) {
	case IBV_WR_SEND: op = MRC_OP_SEND; wop = IBV_WC_SEND; break;
	case IBV_WR_SEND_WITH_IMM: op = MRC_OP_SEND_IMM; wop = IBV_WC_SEND; break;
	case IBV_WR_RDMA_WRITE: op = MRC_OP_WRITE; wop = IBV_WC_RDMA_WRITE; break;
	case IBV_WR_RDMA_WRITE_WITH_IMM: op = MRC_OP_WRITE_IMM; wop = IBV_WC_RDMA_WRITE; break;
	case IBV_WR_RDMA_READ: op = MRC_OP_READ; wop = IBV_WC_RDMA_READ; break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		say("QP %u: atomic operations are not supported by MetaRoCE", q->qp.qp_num);
		return EOPNOTSUPP;
	default:
		say("QP %u: work request opcode %d is not supported", q->qp.qp_num,
		    (int)wr->opcode);
		return EOPNOTSUPP;
	}
	if (wr->num_sge > 1) {
		say("QP %u: %d scatter/gather entries: MetaRoCE takes one per work request",
		    q->qp.qp_num, wr->num_sge);
		return EINVAL;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		say("QP %u: inline data is not supported (max_inline_data is 0)", q->qp.qp_num);
		return EINVAL;
	}
	const struct ibv_sge *sg = wr->num_sge ? wr->sg_list : NULL;
	mrv_mr *m = NULL;
	if (sg && sg->length) {
		m = mr_by_lkey(x, sg->lkey);
		if (!m) {
			say("QP %u: lkey %#x is not a registered region", q->qp.qp_num, sg->lkey);
			return EINVAL;
		}
	}
	uint32_t i = slot_get(x);
	if (i == UINT32_MAX)
		return ENOMEM;
	mrv_slot *s = &x->slots[i];
	s->wr_id = wr->wr_id;
	s->qp = q;
	s->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	s->unsig = !s->signaled && x->unsig_ok;
	s->opcode = (uint8_t)wop;
	s->len = sg ? sg->length : 0;
	if (s->unsig)
		flags |= MRC_POST_UNSIGNALED;
	mrc_wr w = {
		.wr_id = ((uint64_t)s->gen << 32) | i,
		.opcode = op,
		.conn = q->conn,
		.addr = sg ? (const void *)(uintptr_t)sg->addr : NULL,
		.len = sg ? sg->length : 0,
		.mr = m ? m->m : NULL,
		.remote_addr = wr->wr.rdma.remote_addr,
		.rkey = wr->wr.rdma.rkey,
		.imm = wr->imm_data,
	};
	int rc = mrc_post(x->ctx, &w, 1, flags);
	if (rc == MRC_ERR_AGAIN) {
		drain(x);
		rc = mrc_post(x->ctx, &w, 1, flags);
	}
	if (rc < 0) {
		slot_put(x, i);
		if (rc == MRC_ERR_AGAIN)
			return ENOMEM;
		say("QP %u: post: %s", q->qp.qp_num, mrc_strerror(rc));
		return rc == MRC_ERR_INVAL ? EINVAL : EIO;
	}
	x->nsend++;
	x->send_bytes += x->slots[i].len;
	q->outstanding_send++;
	if (q->sq_tail == UINT32_MAX)
		q->sq_head = i;
	else
		x->slots[q->sq_tail].qnext = i;
	q->sq_tail = i;
	return 0;
}

static int post_one_recv(mrv_ctx *x, mrv_qp *q, const struct ibv_recv_wr *wr, unsigned flags)
{
	if (wr->num_sge > 1) {
		say("QP %u: %d scatter/gather entries: MetaRoCE takes one per work request",
		    q->qp.qp_num, wr->num_sge);
		return EINVAL;
	}
	const struct ibv_sge *sg = wr->num_sge ? wr->sg_list : NULL;
	mrv_mr *m = NULL;
	if (sg && sg->length) {
		m = mr_by_lkey(x, sg->lkey);
		if (!m) {
			say("QP %u: lkey %#x is not a registered region", q->qp.qp_num, sg->lkey);
			return EINVAL;
		}
	}
	uint32_t i = slot_get(x);
	if (i == UINT32_MAX)
		return ENOMEM;
	mrv_slot *s = &x->slots[i];
	s->wr_id = wr->wr_id;
	s->qp = q;
	s->signaled = 1;
	s->opcode = IBV_WC_RECV;
	s->len = 0;
	int rc = mrc_post_recv(x->ctx, q->conn, 0, sg ? (void *)(uintptr_t)sg->addr : NULL,
			       sg ? sg->length : 0, m ? m->m : NULL,
			       ((uint64_t)s->gen << 32) | i, flags);
	if (rc == MRC_ERR_AGAIN) {
		drain(x);
		rc = mrc_post_recv(x->ctx, q->conn, 0, sg ? (void *)(uintptr_t)sg->addr : NULL,
				   sg ? sg->length : 0, m ? m->m : NULL,
				   ((uint64_t)s->gen << 32) | i, flags);
	}
	if (rc < 0) {
		slot_put(x, i);
		if (rc == MRC_ERR_AGAIN)
			return ENOMEM;
		say("QP %u: post receive: %s", q->qp.qp_num, mrc_strerror(rc));
		return rc == MRC_ERR_INVAL ? EINVAL : EIO;
	}
	q->outstanding_recv++;
	return 0;
}

/* Must a request wait? Only behind work that already waits (for the
 * connection): requests go to the daemon in posting order. */
static int must_wait(const mrv_qp *q)
{
	return q->pend_head != NULL;
}

static int pend(mrv_qp *q, const struct ibv_send_wr *swr, const struct ibv_recv_wr *rwr)
{
	mrv_pending *p = calloc(1, sizeof(*p));
	if (!p)
		return ENOMEM;
	if (swr) {
		p->swr = *swr;
		p->swr.next = NULL;
		if (swr->num_sge) {
			p->sge = swr->sg_list[0];
			p->swr.sg_list = &p->sge;
		}
	} else {
		p->is_recv = 1;
		p->rwr = *rwr;
		p->rwr.next = NULL;
		if (rwr->num_sge) {
			p->sge = rwr->sg_list[0];
			p->rwr.sg_list = &p->sge;
		}
	}
	if (q->pend_tail)
		q->pend_tail->next = p;
	else
		q->pend_head = p;
	q->pend_tail = p;
	return 0;
}

/* Complete every pending request of q with a flush (lock held). */
static void flush_pending(mrv_qp *q)
{
	mrv_pending *p = q->pend_head;
	q->pend_head = q->pend_tail = NULL;
	while (p) {
		mrv_pending *n = p->next;
		if (p->is_recv)
			deliver(q, 1, 1, p->rwr.wr_id, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR, 0, 0, 0);
		else
			deliver(q, 0, 1, p->swr.wr_id,
				p->swr.opcode == IBV_WR_SEND || p->swr.opcode == IBV_WR_SEND_WITH_IMM
					? IBV_WC_SEND
				: p->swr.opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
								    : IBV_WC_RDMA_WRITE,
				IBV_WC_WR_FLUSH_ERR, 0, 0, 0);
		free(p);
		p = n;
	}
}

static void qp_set_error(mrv_qp *q)
{
	q->err = 1;
	q->qp.state = IBV_QPS_ERR;
	if (q->conn && mrc_conn_status(q->conn) == MRC_CONN_ESTABLISHED) {
		/* outstanding work completes FLUSHED or RESET (both: flush) */
		mrc_close(q->conn, 1);
		q->conn = NULL;
	}
	flush_pending(q);
}

/* Post what waited for the connection (lock held). */
static void pend_release(mrv_ctx *x, mrv_qp *q)
{
	mrv_pending *p = q->pend_head;
	q->pend_head = q->pend_tail = NULL;
	int err = 0;
	while (p) {
		mrv_pending *n = p->next;
		if (p->is_recv) /* counted when queued; posting counts it again */
			q->outstanding_recv--;
		else
			q->outstanding_send--;
		if (!err) {
			err = p->is_recv ? post_one_recv(x, q, &p->rwr, MRC_POST_MORE)
					 : post_one_send(x, q, &p->swr, MRC_POST_MORE);
			if (err)
				say("QP %u: posting the work that waited for the connection failed",
				    q->qp.qp_num);
		}
		if (err) {
			if (p->is_recv)
				deliver(q, 1, 1, p->rwr.wr_id, IBV_WC_RECV, IBV_WC_LOC_QP_OP_ERR, 0, 0,
					0);
			else
				deliver(q, 0, 1, p->swr.wr_id, IBV_WC_SEND, IBV_WC_LOC_QP_OP_ERR, 0,
					0, 0);
		}
		free(p);
		p = n;
	}
	mrc_submit(x->ctx);
}

/* The connection is up: post what waited for it (lock held). */
static void qp_connected(mrv_ctx *x, mrv_qp *q)
{
	pend_release(x, q);
}

/* Take the session's events (lock held): connections arriving at QPs'
 * listeners, connections that end. */
static void pump(mrv_ctx *x)
{
	mrc_session *s = x->sess;
	mrc_event ev;
	while (mrc_get_event(s, &ev, 0) == 0) {
		mrv_qp *q = NULL;
		if (ev.type == MRC_EV_INCOMING) {
			for (q = x->qps; q && q->l != ev.listener; q = q->next)
				;
			if (!q || q->conn || q->connector || q->err) {
				mrc_close(ev.conn, 1); /* not ours, or a second one */
				continue;
			}
			q->conn = ev.conn;
			if (q->awaiting) {
				q->awaiting = 0;
				x->nawaiting--;
				qp_connected(x, q);
			}
			continue;
		}
		for (q = x->qps; q && q->conn != ev.conn; q = q->next)
			;
		if (!q)
			continue;
		if (ev.type == MRC_EV_CLOSED) {
			/* The peer destroyed its QP. An RC QP does not notice
			 * that: receives still posted never complete (the
			 * daemon flushes them; drain() drops those) and a send
			 * posted now fails. */
			q->peer_closed = 1;
		} else if (ev.type == MRC_EV_RESET || ev.type == MRC_EV_FAILED) {
			/* the peer destroyed its QP or the connection broke: work
			 * still outstanding completes with a flush */
			q->err = 1;
			q->qp.state = IBV_QPS_ERR;
			flush_pending(q);
		}
	}
}

/* ---- the notifier thread: completion channels ----------------------------------- */

static int any_armed(mrv_ctx *x)
{
	for (mrv_cq *c = x->cqs; c; c = c->next)
		if (c->armed && c->cq.channel)
			return 1;
	return 0;
}

static void *notifier(void *arg)
{
	mrv_ctx *x = arg;
	for (;;) {
		pthread_mutex_lock(&x->lock);
		if (x->thr_stop) {
			pthread_mutex_unlock(&x->lock);
			return NULL;
		}
		int dead = x->dead;
		int armed = 0;
		if (!dead) {
			pump(x); /* connection events: incoming, closed, reset */
			drain(x);
			check_dead(x);
			dead = x->dead;
			armed = !dead && any_armed(x);
			if (armed && mrc_ctx_arm(x->ctx) > 0) {
				pthread_mutex_unlock(&x->lock);
				continue;
			}
		}
		int waiting = x->nawaiting != 0;
		pthread_mutex_unlock(&x->lock);
		struct pollfd p[3] = {{.fd = x->wake, .events = POLLIN},
				      {.fd = armed ? mrc_ctx_fd(x->ctx) : -1, .events = POLLIN},
				      {.fd = dead ? -1 : mrc_session_fd(x->sess), .events = POLLIN}};
		/* (events a control call moved into the session's queue do not
		 * make the socket readable: look again soon while a QP waits) */
		int n = poll(p, 3, waiting ? 10 : -1);
		if (n > 0 && (p[0].revents & POLLIN)) {
			uint64_t v;
			if (read(x->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
				say("notifier: read: %s", strerror(errno));
		}
	}
}

static void kick(mrv_ctx *x)
{
	if (!x->thr_started)
		return;
	uint64_t one = 1;
	if (write(x->wake, &one, sizeof(one)) < 0)
		say("notifier: write: %s", strerror(errno));
}

/* The thread starts with the first completion channel or the first QP
 * that waits for its peer's connection (lock held). */
static int ensure_thread(mrv_ctx *x)
{
	if (!x->thr_started && pthread_create(&x->thr, NULL, notifier, x) == 0)
		x->thr_started = 1;
	return x->thr_started;
}

/* ---- the ops the header's inline functions call ------------------------------------ */

/*
 * Sleep on the context's wakeup descriptor until the daemon writes a
 * completion, at most MRV_IDLE_SLEEP_NS, or MRV_BUSY_SLEEP_NS while sends
 * are outstanding (a program that polls a CQ while it
 * waits for something else, such as memory a peer writes, sees an empty
 * poll that was a little slow, never a hang), then drain (lock held on
 * entry and on return; released while asleep). The notifier thread may
 * sleep on the same descriptor for an armed CQ: if our drain took its
 * wakeup, it is told to arm again.
 */
static void idle_sleep(mrv_ctx *x)
{
	int ready = mrc_ctx_arm(x->ctx);
	if (ready == 0) {
		struct timespec ts = {0, x->nsend ? MRV_BUSY_SLEEP_NS : MRV_IDLE_SLEEP_NS};
		pthread_mutex_unlock(&x->lock);
		struct pollfd p = {.fd = mrc_ctx_fd(x->ctx), .events = POLLIN};
		int n = ppoll(&p, 1, &ts, NULL); /* EINTR: a signal (perftest -D) */
		pthread_mutex_lock(&x->lock);
		x->n_sleeps++;
		x->n_sleeps_out += n == 0;
	}
	drain(x);
	if (any_armed(x))
		kick(x);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An empty poll of cq starts a wait (lock held): its spin is fixed now.
 * With more than MRV_SPIN_MAX_BYTES of sends outstanding it will not spin
 * (and teaches the policy nothing); nor with a budget of 0: no CPU clock
 * (a system call) is read for either. */
static void wait_start(mrv_ctx *x, mrv_cq *cq, uint64_t now)
{
	cq->wait0_ns = now;
	cq->slept = 0;
	cq->spin_wall_ns = cq->spin_cpu_ns = 0; /* (not measured: no spin) */
	cq->gated = x->send_bytes > MRV_SPIN_MAX_BYTES;
	cq->budget_ns = g_spin_fixed ? g_spin_ns : mrv_spin_budget(&cq->spin, &g_spin_cfg);
	cq->cpu0_ns = g_spin_fixed || cq->gated || !cq->budget_ns ? 0 : thread_cpu_ns();
}

/* A poll of cq found completions after a wait (lock held): the policy
 * learns how long it took, whether the spin caught it and how much of the
 * CPU the spin got. Waits cut short by outstanding sends teach nothing. */
static void wait_end(mrv_cq *cq)
{
	if (cq->gated)
		cq->n_gated++;
	else if (cq->slept)
		cq->n_slept++;
	else
		cq->n_caught++;
	if (!g_spin_fixed && !cq->gated) {
		uint64_t now = mono_ns();
		if (!cq->slept) {
			cq->spin_wall_ns = now - cq->wait0_ns;
			cq->spin_cpu_ns = thread_cpu_ns() - cq->cpu0_ns;
		}
		mrv_spin_done(&cq->spin, &g_spin_cfg, now - cq->wait0_ns, cq->budget_ns, cq->slept,
			      cq->spin_wall_ns, cq->spin_cpu_ns);
	}
	cq->wait0_ns = 0;
}

static int poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	mrv_cq *cq = CQ(ibcq);
	mrv_ctx *x = C(ibcq->context);
	pthread_mutex_lock(&x->lock);
	if (cq->head == cq->tail) {
		if (x->nawaiting)
			pump(x);
		int was_armed = x->ctx->armed;
		drain(x);
		if (was_armed && !x->ctx->armed)
			kick(x); /* we took its wakeup: let the notifier arm again */
	}
	int k = 0;
	while (k < n && cq->head != cq->tail)
		wc[k++] = cq->q[cq->head++ & (cq->qcap - 1)];
	if (!k) {
		/* A program that only polls would never see the daemon go:
		 * look at the session now and then. */
		if ((++x->idle_polls & 4095) == 0 && !x->dead) {
			pump(x);
			check_dead(x);
		}
		if (x->dead) {
			pthread_mutex_unlock(&x->lock);
			errno = EIO;
			return -1;
		}
		/* Programs spin on empty polls (perftest always does), and
		 * the daemons that will produce the completion need a CPU:
		 * after a spin (spin.h), sleep until the next completion. */
		if (++cq->empty_run >= MRV_IDLE_SPIN) {
			cq->empty_run = 0;
			uint64_t now = mono_ns();
			if (!cq->wait0_ns)
				wait_start(x, cq, now);
			int within = now - cq->wait0_ns < cq->budget_ns;
			if (g_poll_spin || (within && x->send_bytes <= MRV_SPIN_MAX_BYTES)) {
				pthread_mutex_unlock(&x->lock);
				sched_yield();
				return 0;
			}
			if (!cq->slept) {
				cq->slept = 1;
				cq->gated |= within;
				if (!cq->gated && !g_spin_fixed && cq->budget_ns) {
					cq->spin_wall_ns = now - cq->wait0_ns;
					cq->spin_cpu_ns = thread_cpu_ns() - cq->cpu0_ns;
				}
			}
			idle_sleep(x);
			if (cq->head == cq->tail) {
				pthread_mutex_unlock(&x->lock);
				return 0;
			}
			while (k < n && cq->head != cq->tail)
				wc[k++] = cq->q[cq->head++ & (cq->qcap - 1)];
		}
	}
	if (k) {
		cq->empty_run = 0;
		if (cq->wait0_ns)
			wait_end(cq);
	}
	pthread_mutex_unlock(&x->lock);
	return k;
}

static int req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	(void)solicited_only; /* every completion counts */
	mrv_cq *cq = CQ(ibcq);
	mrv_ctx *x = C(ibcq->context);
	if (!ibcq->channel)
		return EINVAL;
	pthread_mutex_lock(&x->lock);
	/* Only a completion added from now on raises the event, as the verbs
	 * API defines it: entries already in the queue do not. A program
	 * that arms, then polls, takes those itself; an event for them
	 * would be stale by the time it is read, and perftest's latency
	 * tests with -e take every event to mean a completion is there to
	 * poll (a stale one made ib_send_lat -e read an unwritten ibv_wc).
	 * kick(): the notifier brings what the daemon has written since. */
	cq->armed = 1;
	pthread_mutex_unlock(&x->lock);
	kick(x);
	return 0;
}

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	mrv_qp *q = Q(ibqp);
	mrv_ctx *x = C(ibqp->context);
	int rc = 0;
	pthread_mutex_lock(&x->lock);
	if (q->awaiting)
		pump(x);
	if (x->dead) {
		pthread_mutex_unlock(&x->lock);
		if (bad)
			*bad = wr;
		return EIO;
	}
	for (; wr; wr = wr->next) {
		if (q->err) {
			deliver(q, 0, 1, wr->wr_id, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR, 0, 0, 0);
			continue;
		}
		if (q->qp.state != IBV_QPS_RTS) {
			say("QP %u: post_send in state %d (not RTS)", q->qp.qp_num, q->qp.state);
			rc = EINVAL;
			break;
		}
		if (q->outstanding_send >= q->cap.max_send_wr) {
			rc = ENOMEM;
			break;
		}
		if (!q->conn || mrc_conn_status(q->conn) != MRC_CONN_ESTABLISHED ||
		    must_wait(q)) {
			rc = pend(q, wr, NULL);
			if (rc)
				break;
			q->outstanding_send++; /* counted until posted */
			continue;
		}
		rc = post_one_send(x, q, wr, wr->next ? MRC_POST_MORE : 0);
		if (rc)
			break;
	}
	if (rc && bad)
		*bad = wr;
	/* entries posted with MRC_POST_MORE before one that failed or that
	 * waits in the library: published now (nothing to do otherwise) */
	mrc_submit(x->ctx);
	pthread_mutex_unlock(&x->lock);
	return rc;
}

static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	mrv_qp *q = Q(ibqp);
	mrv_ctx *x = C(ibqp->context);
	int rc = 0;
	pthread_mutex_lock(&x->lock);
	if (q->awaiting)
		pump(x);
	if (x->dead) {
		pthread_mutex_unlock(&x->lock);
		if (bad)
			*bad = wr;
		return EIO;
	}
	for (; wr; wr = wr->next) {
		if (q->err) {
			deliver(q, 1, 1, wr->wr_id, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR, 0, 0, 0);
			continue;
		}
		if (q->qp.state == IBV_QPS_RESET) {
			say("QP %u: post_recv in the RESET state", q->qp.qp_num);
			rc = EINVAL;
			break;
		}
		if (q->outstanding_recv >= q->cap.max_recv_wr) {
			rc = ENOMEM;
			break;
		}
		if (!q->conn || mrc_conn_status(q->conn) != MRC_CONN_ESTABLISHED) {
			/* posted in INIT, before any connection: kept */
			rc = pend(q, NULL, wr);
			if (rc)
				break;
			q->outstanding_recv++;
			continue;
		}
		rc = post_one_recv(x, q, wr, wr->next ? MRC_POST_MORE : 0);
		if (rc)
			break;
	}
	if (rc && bad)
		*bad = wr;
	/* entries posted with MRC_POST_MORE before one that failed or that
	 * waits in the library: published now (nothing to do otherwise) */
	mrc_submit(x->ctx);
	pthread_mutex_unlock(&x->lock);
	return rc;
}

/* The pending counts were raised when queued: qp_connected() posts them
 * again through post_one_*, which count them once more. */
static void pending_uncount(mrv_qp *q)
{
	for (mrv_pending *p = q->pend_head; p; p = p->next) {
		if (p->is_recv)
			q->outstanding_recv--;
		else
			q->outstanding_send--;
	}
}

/* ---- contexts --------------------------------------------------------------------- */

static struct ibv_xrcd *open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *a);
static struct ibv_srq *create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *a);

MRV_API struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	if (dev != &mrv_device) {
		errno = ENODEV;
		return NULL;
	}
	mrc_session *s = session_open();
	if (!s) {
		errno = ENODEV;
		return NULL;
	}
	mrv_ctx *x = calloc(1, sizeof(*x));
	if (!x) {
		mrc_session_close(s);
		errno = ENOMEM;
		return NULL;
	}
	x->sess = s;
	int rc = mrc_session_devinfo(s, &x->info);
	if (rc) {
		say("the daemon's device information: %s%s", mrc_strerror(rc),
		    rc == MRC_ERR_INVAL ? " (a daemon older than this library?)" : "");
		mrc_session_close(s);
		free(x);
		errno = EIO;
		return NULL;
	}
	rc = mrc_ctx_new(s, MRV_SQ_ENTRIES, MRV_CQ_ENTRIES, &x->ctx);
	if (rc) {
		say("a context with the daemon: %s", mrc_strerror(rc));
		mrc_session_close(s);
		free(x);
		errno = rc == MRC_ERR_LIMIT ? ENOSPC : EIO;
		return NULL;
	}
	x->nslots = MRV_CQ_ENTRIES;
	x->slots = calloc(x->nslots, sizeof(*x->slots));
	x->evfd = eventfd(0, EFD_CLOEXEC);
	x->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!x->slots || x->evfd < 0 || x->wake < 0) {
		mrc_ctx_del(x->ctx);
		mrc_session_close(s);
		free(x->slots);
		if (x->evfd >= 0)
			close(x->evfd);
		if (x->wake >= 0)
			close(x->wake);
		free(x);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < x->nslots; i++)
		x->slots[i].next_free = i + 1 < x->nslots ? i + 1 : UINT32_MAX;
	x->free_slot = 0;
	/* METAROCE_VERBS_UNSIGNALED=1: unsignaled sends go to the daemon as
	 * such when it takes them, and it writes no completion for them. Off
	 * by default: every send gets a completion, which the library drops
	 * for an unsignaled one. The completions are what tells the library
	 * that the end of a batch is near (it spins for the last one, see
	 * poll_cq()); without them it sleeps through the batch and the wakeup
	 * for the signaled completion lands on the program's critical path:
	 * ib_write_bw -Q 16 measured 0.83x with the flag (bench/README.md,
	 * "No completion on success"). */
	const char *un = getenv("METAROCE_VERBS_UNSIGNALED");
	x->unsig_ok = (mrc_session_features(s) & MRC_FEATURE_UNSIGNALED) && un && !strcmp(un, "1");
	pthread_mutex_init(&x->lock, NULL);

	struct verbs_context *v = &x->vctx;
	v->sz = sizeof(*v);
	v->query_port = query_port;
	v->query_device_ex = query_device_ex;
	v->open_xrcd = open_xrcd;
	v->create_srq_ex = create_srq_ex;
	struct ibv_context *c = &v->context;
	c->device = dev;
	c->cmd_fd = x->evfd;
	c->async_fd = x->evfd;
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->ops.poll_cq = poll_cq;
	c->ops.req_notify_cq = req_notify_cq;
	c->ops.post_send = post_send;
	c->ops.post_recv = post_recv;
	return c;
}

MRV_API int ibv_close_device(struct ibv_context *c)
{
	mrv_ctx *x = C(c);
	if (g_spin_debug)
		say("device: slept %llu times, %llu of them to the bound (no completion came)",
		    (unsigned long long)x->n_sleeps, (unsigned long long)x->n_sleeps_out);
	if (x->thr_started) {
		pthread_mutex_lock(&x->lock);
		x->thr_stop = 1;
		pthread_mutex_unlock(&x->lock);
		kick(x);
		pthread_join(x->thr, NULL);
	}
	int rc = mrc_ctx_del(x->ctx);
	if (rc && rc != MRC_ERR_DAEMON)
		say("closing the device: %s", mrc_strerror(rc));
	mrc_session_close(x->sess); /* frees what the program left */
	close(x->evfd);
	close(x->wake);
	free(x->slots);
	pthread_mutex_destroy(&x->lock);
	free(x);
	return 0;
}

MRV_API int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	(void)ev;
	uint64_t v;
	/* No asynchronous events: this blocks like a device that has none. */
	if (read(C(c)->evfd, &v, sizeof(v)) < 0)
		return -1;
	errno = EIO;
	return -1;
}

MRV_API void ibv_ack_async_event(struct ibv_async_event *ev)
{
	(void)ev;
}

/* ---- protection domains and memory ---------------------------------------------- */

MRV_API struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	static _Atomic uint32_t next = 1;
	pd->context = c;
	pd->handle = atomic_fetch_add(&next, 1);
	return pd;
}

MRV_API int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

/* Copy whole pages, neighbours of the registered bytes included: not
 * through memcpy, which AddressSanitizer checks against the heap objects
 * on those pages (their redzones are part of the pages we move). */
__attribute__((no_sanitize("address"))) static void copy_pages(void *dst, const void *src,
								size_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
	volatile uint64_t *d = dst;
	const volatile uint64_t *s = src;
	for (size_t i = 0; i < n / 8; i++)
		d[i] = s[i];
#endif
}

/* Move [start, start+len) (page-aligned) into a sealed memfd mapped at
 * the same address: the daemon can then map the same pages. The contents
 * are copied; the old pages are replaced atomically by mmap(MAP_FIXED). */
static int adopt(uint8_t *start, size_t len, size_t pagesz)
{
	int fd = memfd_create("metaroce-verbs", MFD_CLOEXEC | MFD_ALLOW_SEALING |
						 (pagesz > 4096 ? MFD_HUGETLB : 0));
	if (fd < 0)
		return -errno;
	int e = 0;
	void *tmp = MAP_FAILED;
	if (ftruncate(fd, (off_t)len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tmp == MAP_FAILED)
		goto fail;
	copy_pages(tmp, start, len);
	if (mmap(start, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
		goto fail;
	munmap(tmp, len);
	e = mrc_block_adopt(start, len, pagesz, fd);
	if (e) {
		close(fd);
		return -ENOMEM;
	}
	return 0;
fail:
	e = -errno;
	if (tmp != MAP_FAILED)
		munmap(tmp, len);
	close(fd);
	return e;
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t len, unsigned access)
{
	mrv_ctx *x = C(pd->context);
	if (!addr || !len) {
		errno = EINVAL;
		return NULL;
	}
	if (access & (IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND)) {
		say("ibv_reg_mr: access %#x: atomics, memory windows and on-demand paging are "
		    "not supported", access);
		errno = EOPNOTSUPP;
		return NULL;
	}
	uint32_t macc = 0;
	if (access & IBV_ACCESS_LOCAL_WRITE)
		macc |= MRC_ACCESS_LOCAL_WRITE;
	if (access & IBV_ACCESS_REMOTE_WRITE)
		macc |= MRC_ACCESS_REMOTE_WRITE;
	if (access & IBV_ACCESS_REMOTE_READ)
		macc |= MRC_ACCESS_REMOTE_READ;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr;
	void *block = NULL;
	void *base;
	size_t blen;
	int rc = mrc_block_find(addr, len, &base, &blen);
	if (rc == MRC_ERR_BUSY) {
		say("ibv_reg_mr(%p, %zu): the range overlaps memory registered before only in "
		    "part; register it as one region or as disjoint pages", addr, len);
		errno = EINVAL;
		return NULL;
	}
	if (rc == MRC_ERR_NOENT) {
		uintptr_t s = a / page * page, e = (a + len + page - 1) / page * page;
		int r = adopt((uint8_t *)s, e - s, page);
		if (r == -EINVAL) {
			/* a huge-page mapping: move whole 2 MiB pages */
			size_t h = (size_t)2 << 20;
			s = a / h * h;
			e = (a + len + h - 1) / h * h;
			r = adopt((uint8_t *)s, e - s, h);
		}
		if (r) {
			say("ibv_reg_mr(%p, %zu): moving the pages into shared memory: %s", addr,
			    len, strerror(-r));
			errno = -r;
			return NULL;
		}
		block = (void *)s;
	}
	mrv_mr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	rc = mrc_reg_mr(x->sess, addr, len, macc, &m->m);
	if (rc) {
		say("ibv_reg_mr(%p, %zu): %s", addr, len, mrc_strerror(rc));
		if (block)
			mrc_block_release(block);
		free(m);
		errno = rc == MRC_ERR_LIMIT ? ENOSPC : rc == MRC_ERR_PERM ? EPERM : EINVAL;
		return NULL;
	}
	if (!block && mrc_block_find(addr, len, &base, &blen) == 0)
		block = base; /* shared with earlier registrations: released with the last */
	/* The daemon maps whole pages; a verbs region is exactly its bytes. */
	if (mrc_mr_addr(m->m) != addr || mrc_mr_len(m->m) != len) {
		rc = mrc_mr_set_bounds(m->m, addr, len);
		if (rc) {
			say("ibv_reg_mr(%p, %zu): exact bounds: %s", addr, len, mrc_strerror(rc));
			mrc_dereg_mr(m->m);
			if (block)
				mrc_block_release(block);
			free(m);
			errno = EINVAL;
			return NULL;
		}
	}
	m->block = block;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = mrc_mr_lkey(m->m);
	m->mr.rkey = mrc_mr_rkey(m->m);
	m->mr.handle = m->mr.lkey;
	pthread_mutex_lock(&x->lock);
	m->next = x->mrs;
	x->mrs = m;
	pthread_mutex_unlock(&x->lock);
	return &m->mr;
}

MRV_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return reg_mr(pd, addr, len, (unsigned)access);
}

MRV_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len,
					uint64_t iova, unsigned int access)
{
	if (iova != (uintptr_t)addr) {
		say("ibv_reg_mr_iova: an iova other than the address is not supported");
		errno = EOPNOTSUPP;
		return NULL;
	}
	return reg_mr(pd, addr, len, access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE);
}

MRV_API struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				       int access)
{
	return ibv_reg_mr_iova2(pd, addr, len, iova, (unsigned)access);
}

MRV_API int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	mrv_mr *m = (mrv_mr *)ibmr;
	mrv_ctx *x = C(ibmr->context);
	pthread_mutex_lock(&x->lock);
	int rc = mrc_dereg_mr(m->m);
	if (rc == MRC_ERR_BUSY) {
		pthread_mutex_unlock(&x->lock);
		return EBUSY;
	}
	for (mrv_mr **pp = &x->mrs; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	pthread_mutex_unlock(&x->lock);
	if (m->block)
		mrc_block_release(m->block); /* MRC_ERR_BUSY while other regions use it */
	free(m);
	return 0;
}

/* ---- completion queues and channels --------------------------------------------------- */

MRV_API struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	mrv_ctx *x = C(c);
	mrv_chan *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.context = c;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	pthread_mutex_lock(&x->lock);
	int ok = ensure_thread(x);
	pthread_mutex_unlock(&x->lock);
	if (!ok) {
		close(ch->ch.fd);
		free(ch);
		errno = EAGAIN;
		return NULL;
	}
	return &ch->ch;
}

MRV_API int ibv_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
	mrv_chan *ch = (mrv_chan *)ibch;
	if (ch->ch.refcnt)
		return EBUSY;
	close(ch->ch.fd);
	free(ch->q);
	free(ch);
	return 0;
}

MRV_API int ibv_get_cq_event(struct ibv_comp_channel *ibch, struct ibv_cq **pcq, void **pctx)
{
	mrv_chan *ch = (mrv_chan *)ibch;
	mrv_ctx *x = C(ibch->context);
	uint64_t v;
	if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	pthread_mutex_lock(&x->lock);
	if (ch->head == ch->tail) {
		pthread_mutex_unlock(&x->lock);
		errno = EIO;
		return -1;
	}
	mrv_cq *cq = ch->q[ch->head++ & (ch->qcap - 1)];
	cq->events++;
	pthread_mutex_unlock(&x->lock);
	*pcq = &cq->cq;
	*pctx = cq->cq.cq_context;
	return 0;
}

MRV_API void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	(void)cq;
	(void)n; /* events need no acknowledging here: destroy never waits */
}

MRV_API struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
				     struct ibv_comp_channel *channel, int comp_vector)
{
	mrv_ctx *x = C(c);
	if (cqe < 1 || comp_vector < 0 || comp_vector >= c->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	mrv_cq *cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	mrv_spin_init(&cq->spin);
	uint32_t cap = 16;
	while (cap < (uint32_t)cqe && cap < (1u << 20))
		cap *= 2;
	cq->q = malloc(sizeof(*cq->q) * cap);
	if (!cq->q) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->qcap = cap;
	cq->cq.context = c;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_lock(&x->lock);
	if (channel)
		channel->refcnt++;
	cq->next = x->cqs;
	x->cqs = cq;
	pthread_mutex_unlock(&x->lock);
	return &cq->cq;
}

MRV_API int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	mrv_cq *cq = CQ(ibcq);
	mrv_ctx *x = C(ibcq->context);
	pthread_mutex_lock(&x->lock);
	for (mrv_qp *q = x->qps; q; q = q->next)
		if (q->qp.send_cq == ibcq || q->qp.recv_cq == ibcq) {
			pthread_mutex_unlock(&x->lock);
			return EBUSY;
		}
	if (g_spin_debug)
		say("CQ %p: waits caught spinning %llu, slept %llu, slept with sends outstanding "
		    "%llu; estimate %u us, spin now %u us (%s), pay %u/1024, CPU share %u/1024",
		    (void *)cq, (unsigned long long)cq->n_caught, (unsigned long long)cq->n_slept,
		    (unsigned long long)cq->n_gated, cq->spin.est_ns / 1000,
		    (g_spin_fixed ? g_spin_ns : mrv_spin_budget(&cq->spin, &g_spin_cfg)) / 1000,
		    g_spin_fixed ? "fixed" : "adaptive", cq->spin.pay, cq->spin.share);
	for (mrv_cq **pp = &x->cqs; *pp; pp = &(*pp)->next)
		if (*pp == cq) {
			*pp = cq->next;
			break;
		}
	if (ibcq->channel) {
		mrv_chan *ch = (mrv_chan *)ibcq->channel;
		ibcq->channel->refcnt--;
		for (uint32_t i = ch->head; i != ch->tail; i++)
			if (ch->q[i & (ch->qcap - 1)] == cq)
				ch->q[i & (ch->qcap - 1)] = NULL;
	}
	pthread_mutex_unlock(&x->lock);
	free(cq->q);
	free(cq);
	return 0;
}

MRV_API int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (cqe < 1)
		return EINVAL;
	cq->cqe = cqe; /* the queue grows by itself */
	return 0;
}

/* ---- queue pairs --------------------------------------------------------------------- */

MRV_API struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	mrv_ctx *x = C(pd->context);
	if (a->qp_type != IBV_QPT_RC) {
		say("ibv_create_qp: QP type %s is not supported: MetaRoCE offers reliable "
		    "connected (RC) queue pairs only",
		    a->qp_type == IBV_QPT_UD ? "UD" : a->qp_type == IBV_QPT_UC ? "UC" : "other");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->srq) {
		say("ibv_create_qp: shared receive queues (SRQ) are not supported");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!a->send_cq || !a->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	if (a->cap.max_send_sge > 1 || a->cap.max_recv_sge > 1 || a->cap.max_inline_data > 0 ||
	    a->cap.max_send_wr > MRV_MAX_WR || a->cap.max_recv_wr > MRV_MAX_WR) {
		say("ibv_create_qp: capabilities beyond the device's (sge %u/%u, inline %u, "
		    "wr %u/%u; the device has sge 1, inline 0, wr %u)",
		    a->cap.max_send_sge, a->cap.max_recv_sge, a->cap.max_inline_data,
		    a->cap.max_send_wr, a->cap.max_recv_wr, MRV_MAX_WR);
		errno = EINVAL;
		return NULL;
	}
	mrv_qp *q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	/* A QPN is a listener of the daemon: unique there. */
	uint32_t seed;
	if (getentropy(&seed, sizeof(seed)))
		seed = (uint32_t)getpid() * 2654435761u;
	int rc = MRC_ERR_BUSY;
	uint32_t qpn = 0;
	for (int tries = 0; tries < 64 && rc == MRC_ERR_BUSY; tries++) {
		qpn = (seed + (uint32_t)tries * 7919u) & MRV_QPN_MASK;
		if (qpn < 2)
			qpn += 2;
		rc = mrc_listen(x->sess, MRV_SVC_BASE | qpn, x->ctx, 1, &q->l);
	}
	if (rc) {
		say("ibv_create_qp: a queue pair number from the daemon: %s", mrc_strerror(rc));
		free(q);
		errno = rc == MRC_ERR_LIMIT ? ENOSPC : EIO;
		return NULL;
	}
	q->qp.context = pd->context;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.qp_num = qpn;
	q->qp.handle = qpn;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	q->sq_sig_all = a->sq_sig_all;
	q->sq_head = q->sq_tail = UINT32_MAX;
	q->cap = a->cap;
	q->cap.max_send_sge = q->cap.max_recv_sge = 1;
	q->cap.max_inline_data = 0;
	a->cap = q->cap;
	pthread_mutex_lock(&x->lock);
	q->next = x->qps;
	x->qps = q;
	pthread_mutex_unlock(&x->lock);
	return &q->qp;
}

static int gid_cmp(const union ibv_gid *a, uint32_t aq, const union ibv_gid *b, uint32_t bq)
{
	int c = memcmp(a->raw, b->raw, 16);
	if (c)
		return c;
	return aq < bq ? -1 : aq > bq;
}

static void gid_host(const union ibv_gid *g, char *buf, size_t len)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (!memcmp(g->raw, mapped, 12))
		inet_ntop(AF_INET, g->raw + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len);
}

/* INIT -> RTR: the connection (lock held). */
static int to_rtr(mrv_ctx *x, mrv_qp *q, struct ibv_qp_attr *a)
{
	if (!a->ah_attr.is_global) {
		say("QP %u: RTR without a global route header (is_global 0): a MetaRoCE device "
		    "is RoCE and needs the peer's GID (e.g. ibv_rc_pingpong -g 0)", q->qp.qp_num);
		return EINVAL;
	}
	unsigned sidx = a->ah_attr.grh.sgid_index;
	if (sidx >= x->info.nplanes) {
		say("QP %u: source GID index %u: the device has %u", q->qp.qp_num, sidx,
		    x->info.nplanes);
		return EINVAL;
	}
	union ibv_gid lg;
	gid_of(&x->info.planes[sidx], &lg);
	q->dgid = a->ah_attr.grh.dgid;
	q->dest_qpn = a->dest_qp_num & MRV_QPN_MASK;
	int cmp = gid_cmp(&lg, q->qp.qp_num, &q->dgid, q->dest_qpn);
	if (cmp == 0) {
		say("QP %u: connected to itself is not supported", q->qp.qp_num);
		return EINVAL;
	}
	if (cmp > 0) {
		/* The peer connects to our listener; maybe it already has. */
		pump(x);
		if (q->conn) {
			qp_connected(x, q);
		} else {
			/* Until it comes, the thread takes it (and posts what
			 * waits) even while the program does not call us. */
			q->awaiting = 1;
			x->nawaiting++;
			ensure_thread(x);
			kick(x);
		}
		return 0;
	}
	char host[INET6_ADDRSTRLEN];
	gid_host(&q->dgid, host, sizeof(host));
	q->connector = 1;
	mrc_conn_attr ca = {.nstreams = 1};
	int rc = mrc_connect(x->sess, x->ctx, host, 0, MRV_SVC_BASE | q->dest_qpn, &ca, &q->conn);
	if (rc == 0)
		rc = mrc_conn_wait_established(q->conn, MRV_CONNECT_MS);
	if (rc) {
		/* The GID names the peer's host, not its daemon's port: the
		 * daemons of a fabric share one service port (this one's). */
		say("QP %u: connecting to QP %u at %s port %u: %s%s", q->qp.qp_num, q->dest_qpn,
		    host, (unsigned)x->info.port, mrc_strerror(rc),
		    rc == MRC_ERR_UNREACHABLE ? " (is metarocd running there, on the same service "
					    "port as this host's?)" : "");
		if (q->conn)
			mrc_close(q->conn, 1);
		q->conn = NULL;
		q->connector = 0;
		return rc == MRC_ERR_TIMEOUT ? ETIMEDOUT : ECONNREFUSED;
	}
	qp_connected(x, q);
	return 0;
}

MRV_API int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	mrv_qp *q = Q(ibqp);
	mrv_ctx *x = C(ibqp->context);
	int rc = 0;
	pthread_mutex_lock(&x->lock);
	if (((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > MRV_MAX_RD_ATOM) ||
	    ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > MRV_MAX_RD_ATOM)) {
		say("QP %u: max_rd_atomic %u / max_dest_rd_atomic %u: the device allows %d",
		    q->qp.qp_num, a->max_rd_atomic, a->max_dest_rd_atomic, MRV_MAX_RD_ATOM);
		rc = EINVAL;
		goto out;
	}
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->access = a->qp_access_flags;
	if (mask & IBV_QP_PORT)
		q->port_num = a->port_num;
	if (mask & IBV_QP_PATH_MTU)
		q->path_mtu = a->path_mtu;
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_TIMEOUT)
		q->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->min_rnr_timer = a->min_rnr_timer;
	if (!(mask & IBV_QP_STATE))
		goto out;
	enum ibv_qp_state cur = q->qp.state, nxt = a->qp_state;
	if (nxt == IBV_QPS_ERR) {
		qp_set_error(q);
		goto out;
	}
	if (nxt == cur)
		goto out;
	if (nxt == IBV_QPS_INIT && cur == IBV_QPS_RESET) {
		if ((mask & IBV_QP_PORT) && a->port_num != 1) {
			say("QP %u: port %u: the device has port 1", q->qp.qp_num, a->port_num);
			rc = EINVAL;
			goto out;
		}
	} else if (nxt == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		if (!(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN)) {
			rc = EINVAL;
			goto out;
		}
		rc = to_rtr(x, q, a);
		if (rc)
			goto out;
	} else if (nxt == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
		/* nothing: the connection carries both directions */
	} else if (nxt == IBV_QPS_RESET) {
		if (q->conn)
			mrc_close(q->conn, 1);
		q->conn = NULL;
		if (q->awaiting) {
			q->awaiting = 0;
			x->nawaiting--;
		}
		flush_pending(q);
		sq_drop(x, q);
		q->err = 0;
	} else {
		say("QP %u: state change %d -> %d is not supported", q->qp.qp_num, cur, nxt);
		rc = EINVAL;
		goto out;
	}
	q->qp.state = nxt;
out:
	pthread_mutex_unlock(&x->lock);
	return rc;
}

MRV_API int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
			 struct ibv_qp_init_attr *init)
{
	(void)mask;
	mrv_qp *q = Q(ibqp);
	memset(a, 0, sizeof(*a));
	a->qp_state = a->cur_qp_state = q->qp.state;
	a->path_mtu = q->path_mtu;
	a->rq_psn = q->rq_psn;
	a->sq_psn = q->sq_psn;
	a->dest_qp_num = q->dest_qpn;
	a->qp_access_flags = (int)q->access;
	a->cap = q->cap;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = q->dgid;
	a->ah_attr.port_num = 1;
	a->port_num = 1;
	a->max_rd_atomic = q->max_rd_atomic;
	a->max_dest_rd_atomic = q->max_dest_rd_atomic;
	a->timeout = q->timeout;
	a->retry_cnt = q->retry_cnt;
	a->rnr_retry = q->rnr_retry;
	a->min_rnr_timer = q->min_rnr_timer;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = q->qp.qp_context;
		init->send_cq = q->qp.send_cq;
		init->recv_cq = q->qp.recv_cq;
		init->cap = q->cap;
		init->qp_type = IBV_QPT_RC;
		init->sq_sig_all = q->sq_sig_all;
	}
	return 0;
}

MRV_API int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	mrv_qp *q = Q(ibqp);
	mrv_ctx *x = C(ibqp->context);
	pthread_mutex_lock(&x->lock);
	for (mrv_qp **pp = &x->qps; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	if (q->awaiting)
		x->nawaiting--;
	pending_uncount(q);
	mrv_pending *p = q->pend_head;
	while (p) {
		mrv_pending *n = p->next;
		free(p);
		p = n;
	}
	sq_drop(x, q);
	for (uint32_t i = 0; i < x->nslots; i++)
		if (x->slots[i].used && x->slots[i].qp == q)
			x->slots[i].qp = NULL; /* its completions are dropped */
	if (q->conn)
		mrc_close(q->conn, q->err ? 1 : 0);
	mrc_unlisten(q->l);
	pthread_mutex_unlock(&x->lock);
	free(q);
	return 0;
}

/* ---- things that fail at once ------------------------------------------------------- */

/* An unsupported call: its message, EOPNOTSUPP, NULL. */
static void *refuse(const char *what)
{
	say("%s", what);
	errno = EOPNOTSUPP;
	return NULL;
}

MRV_API struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	(void)pd;
	(void)a;
	return refuse("ibv_create_srq: shared receive queues (SRQ) are not supported");
}

/* ibv_open_xrcd() and ibv_create_srq_ex() are inline in verbs.h and reach
 * these through the verbs_context: without them the program gets
 * EOPNOTSUPP and no word of why. */
static struct ibv_xrcd *open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *a)
{
	(void)c;
	(void)a;
	return refuse("ibv_open_xrcd: XRC domains are not supported: RC queue pairs only");
}

static struct ibv_srq *create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *a)
{
	(void)c;
	(void)a;
	return refuse("ibv_create_srq_ex: shared receive queues (SRQ) are not supported");
}

MRV_API struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	(void)pd;
	(void)a;
	return refuse("ibv_create_ah: address handles (UD) are not supported: RC queue pairs only");
}
