/*
 * The cases of metaroce-conform. Each checks one rule of proto/SPEC.md
 * over the wire, as a peer of the target would see it, and on failure
 * says what it sent, what came back and what the SPEC requires.
 */
#include "cases.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SVC_PERF 0x50455246u /* the reference daemon's PERF service */
#define SVC_NONE 0x7e57c0deu /* nobody listens here */
#define CE 0x03
#define ECT0 0x02

__attribute__((format(printf, 2, 3)))
static int fail(cf_ctx *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	va_end(ap);
	return CF_FAIL;
}

__attribute__((format(printf, 2, 3)))
static int skip(cf_ctx *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	va_end(ap);
	return CF_SKIP;
}

#define OPEN(c, svc, o)                                                            \
	do {                                                                       \
		char e_[256];                                                      \
		(c) = cf_open(x->n, (svc), (o), e_, sizeof(e_));                   \
		if (!(c))                                                          \
			return skip(x, "cannot open a connection: %s", e_);        \
	} while (0)

/* ---- target counters (ours: metaroce-ctl -j status) ------------------------ */

static json_t *find_key(json_t *j, const char *key)
{
	if (!json_is_object(j))
		return NULL;
	json_t *v = json_object_get(j, key);
	if (v)
		return v;
	const char *k;
	json_t *c;
	json_object_foreach(j, k, c) {
		json_t *r = find_key(c, key);
		if (r)
			return r;
	}
	return NULL;
}

/* The target's endpoint-wide drop counter `name` (13.3), or -1 when no
 * --status-cmd was given or it did not answer. */
static long long drop_count(cf_ctx *x, const char *name)
{
	if (!x->status_cmd)
		return -1;
	FILE *f = popen(x->status_cmd, "r");
	if (!f)
		return -1;
	json_error_t je;
	json_t *j = json_loadf(f, 0, &je);
	pclose(f);
	json_t *drops = find_key(j, "drops");
	json_t *v = drops ? json_object_get(drops, name) : NULL;
	long long r = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
	json_decref(j);
	return r;
}

/* ---- matchers --------------------------------------------------------------- */

typedef struct m_conn {
	uint32_t ci;
	int any;           /* any opcode except the background ones */
	uint8_t opcode;
	uint16_t path, gen; /* ACK: acked path (0xffff: any) */
	uint32_t next_psn;  /* ACK: wanted next_psn, 0 any */
} m_conn;

static int match_conn(const cf_rx *rx, void *ud)
{
	const m_conn *m = ud;
	const mrp_pkt *p = &rx->pkt;
	if (rx->len < MRP_HDR_LEN || p->hdr.dst_conn_id != m->ci)
		return 0;
	if (m->any)
		return !(rx->rv >= 0 && (mrp_op_is_data(p->hdr.opcode) ||
					 p->hdr.opcode == MRP_OP_PROBE ||
					 p->hdr.opcode == MRP_OP_PROBE_ACK ||
					 p->hdr.opcode == MRP_OP_ACK));
	if (rx->rv < 0 || p->hdr.opcode != m->opcode)
		return 0;
	if (m->opcode == MRP_OP_ACK) {
		if (m->path != 0xffff && (p->u.ack.acked_path_id != m->path ||
					  p->u.ack.acked_path_gen != m->gen))
			return 0;
		if (m->next_psn && p->u.ack.next_psn != m->next_psn)
			return 0;
	}
	return 1;
}

static int match_any_answer(const cf_rx *rx, void *ud)
{
	(void)ud;
	return rx->len > 0;
}

static int match_dst(const cf_rx *rx, void *ud)
{
	const uint32_t *ci = ud;
	return rx->len >= MRP_HDR_LEN && rx->pkt.hdr.dst_conn_id == *ci;
}

/* Wait for the ACK of path/gen with next_psn, then keep the newest ACK of
 * that path generation that arrives in a short while after it. */
static int wait_ack(cf_ctx *x, cf_conn *c, uint16_t path, uint16_t gen, uint32_t next_psn,
		    mrp_ack *out)
{
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_ACK, .path = path, .gen = gen,
		    .next_psn = next_psn};
	static cf_rx rx;
	if (!cf_wait(x->n, match_conn, &m, x->n->timeout_ms * 2, &rx))
		return 0;
	*out = rx.pkt.u.ack;
	m.next_psn = 0;
	while (cf_wait(x->n, match_conn, &m, 60, &rx))
		if (rx.pkt.u.ack.next_psn == next_psn)
			*out = rx.pkt.u.ack;
	return 1;
}

static void sack_str(const mrp_ack *a, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (unsigned i = 0; i < 8 && o + 4 < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%02x", a->sack[i]);
}

static int sack_bit(const mrp_ack *a, unsigned i)
{
	return a->sack[i / 8] >> (i % 8) & 1;
}

/* A source of data packets the target accepts and records in its SACK
 * state: 8-byte WRITEs into the region of the reference daemon's PERF
 * service when it offers one, else zero-length WRITEs, which access no
 * memory (5.3) and so are accepted by any target. */
typedef struct dsrc {
	cf_conn *c;
	uint64_t rkey, base;
	int region;
} dsrc;

static int perf_region(cf_ctx *x, cf_conn **pc, uint64_t *rkey, uint64_t *base);

static int ds_open(cf_ctx *x, dsrc *ds)
{
	memset(ds, 0, sizeof(*ds));
	if (perf_region(x, &ds->c, &ds->rkey, &ds->base) == CF_PASS) {
		ds->region = 1;
		return CF_PASS;
	}
	char e[256];
	ds->c = cf_open(x->n, x->svc, NULL, e, sizeof(e));
	if (!ds->c)
		return skip(x, "cannot open a connection: %s", e);
	return CF_PASS;
}

static void ds_build(dsrc *ds, mrp_pkt *p, uint16_t path, uint32_t psn, uint32_t msn,
		     uint16_t flags_extra)
{
	static const uint8_t pl[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	if (ds->region) {
		cf_data(ds->c, p, MRP_OP_WRITE, path, 1, msn, 0, sizeof(pl), pl, sizeof(pl));
		p->u.data.rkey = (uint32_t)ds->rkey;
		p->u.data.remote_addr = ds->base + 8ull * (msn % 1024);
	} else {
		cf_data(ds->c, p, MRP_OP_WRITE, path, 1, msn, 0, 0, NULL, 0);
	}
	p->hdr.psn = psn;
	p->hdr.flags |= flags_extra;
}

static void ds_write(cf_ctx *x, dsrc *ds, uint16_t path, uint32_t psn, uint32_t msn,
		     uint16_t flags_extra, int tos)
{
	mrp_pkt p;
	ds_build(ds, &p, path, psn, msn, flags_extra);
	cf_send(x->n, &p, tos);
}

static int wait_nak(cf_ctx *x, cf_conn *c, mrp_nak *out, unsigned ms)
{
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_NAK};
	static cf_rx rx;
	if (!cf_wait(x->n, match_conn, &m, ms, &rx))
		return 0;
	*out = rx.pkt.u.nak;
	return 1;
}

static const char *nak_name(unsigned r)
{
	static const char *names[] = {"?", "INVALID_RKEY", "OUT_OF_BOUNDS", "ACCESS", "RNR",
				      "UNKNOWN_CONN", "UNKNOWN_STREAM", "MALFORMED"};
	return r <= MRP_NAK_MAX ? names[r] : "?";
}

/* Send one data packet, expect a NAK with reason `want` naming it. */
static int expect_nak(cf_ctx *x, cf_conn *c, const mrp_pkt *p, unsigned want,
		      const char *sent)
{
	if (cf_send(x->n, p, -1) < 0)
		return fail(x, "could not encode %s", sent);
	mrp_nak k;
	if (!wait_nak(x, c, &k, x->n->timeout_ms * 2))
		return fail(x, "sent %s; got no NAK; SPEC requires NAK %s", sent, nak_name(want));
	if (k.reason != want)
		return fail(x, "sent %s; got NAK %s (%u); SPEC requires NAK %s", sent,
			    nak_name(k.reason), k.reason, nak_name(want));
	if (k.nak_path_id != p->hdr.path_id || k.nak_path_gen != p->hdr.path_gen ||
	    k.nak_psn != p->hdr.psn || k.stream_id != p->u.data.stream_id ||
	    k.msn != p->u.data.msn || k.offset != p->u.data.offset)
		return fail(x, "sent %s (path %u gen %u psn %u stream %u msn %u offset %u); got "
			    "NAK %s naming path %u gen %u psn %u stream %u msn %u offset %u; SPEC 7.1 "
			    "requires the NAK to name the rejected packet", sent, p->hdr.path_id,
			    p->hdr.path_gen, p->hdr.psn, p->u.data.stream_id, p->u.data.msn,
			    p->u.data.offset, nak_name(k.reason), k.nak_path_id, k.nak_path_gen,
			    k.nak_psn, k.stream_id, k.msn, k.offset);
	return CF_PASS;
}

/* ---- handshake and versions --------------------------------------------------- */

static int c_hs_accept(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	static cf_rx a;
	cf_conn *c;
	int op = cf_handshake(x->n, &o, &a, &c);
	if (op == 0)
		return fail(x, "sent CONNECT to service %08x; got no answer; SPEC 9.4 requires "
			    "ACCEPT or REJECT", x->svc);
	if (op != MRP_OP_ACCEPT)
		return skip(x, "service %08x not offered (%s)", x->svc, mrp_op_name((uint8_t)op));
	const mrp_hs *h = &a.pkt.u.hs;
	if (!c)
		return fail(x, "ACCEPT token %016llx is not the CONNECT's hs_token",
			    (unsigned long long)a.pkt.hdr.token);
	if (a.pkt.hdr.version != 1 || h->min_version != 1 || h->max_version != 1)
		return fail(x, "ACCEPT version %u min %u max %u; SPEC 9.4 rule 7 requires the "
			    "chosen version (1) in all three", a.pkt.hdr.version, h->min_version,
			    h->max_version);
	if (h->mtu > o.mtu || h->max_streams > o.max_streams || h->max_paths > o.max_paths)
		return fail(x, "sent mtu %u streams %u paths %u; ACCEPT mtu %u streams %u paths "
			    "%u; SPEC 9.4 requires the minimum of both sides", o.mtu,
			    o.max_streams, o.max_paths, h->mtu, h->max_streams, h->max_paths);
	if (h->caps & ~o.caps)
		return fail(x, "sent caps %llx; ACCEPT caps %llx; SPEC 9.4 requires a subset",
			    (unsigned long long)o.caps, (unsigned long long)h->caps);
	if (h->service_id != o.service_id)
		return fail(x, "ACCEPT service_id %08x, CONNECT's %08x; SPEC 9.2 requires a copy",
			    h->service_id, o.service_id);
	if (!cf_confirm(x->n, c))
		return fail(x, "sent PROBE (ACK_REQ) with the ACCEPT's token; got no PROBE_ACK; "
			    "SPEC 8.2 and 9.4 require the PROBE to confirm and be answered");
	return CF_PASS;
}

static int c_hs_retry(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	o.no_cookie = 1;
	o.follow_retry = 0;
	static cf_rx a;
	int op = cf_handshake(x->n, &o, &a, NULL);
	if (op == MRP_OP_ACCEPT)
		return skip(x, "the target does not validate addresses (ACCEPT without cookie)");
	if (op != MRP_OP_RETRY)
		return fail(x, "sent CONNECT with caps RETRY and no cookie; got %s; SPEC 9.7 "
			    "requires RETRY (or ACCEPT from a non-validating acceptor)",
			    op ? mrp_op_name((uint8_t)op) : "nothing");
	if (a.pkt.hdr.src_conn_id != 0 || a.pkt.u.retry.service_id != o.service_id ||
	    a.pkt.u.retry.cookie == 0 || a.len != MRP_RETRY_LEN)
		return fail(x, "RETRY src_conn_id %08x service_id %08x cookie %llx length %zu; "
			    "SPEC 9.7 requires 0, the CONNECT's service id, nonzero, 44",
			    a.pkt.hdr.src_conn_id, a.pkt.u.retry.service_id,
			    (unsigned long long)a.pkt.u.retry.cookie, a.len);
	/* The cookie proves the address: the same CONNECT with it is accepted. */
	x->n->cookie = a.pkt.u.retry.cookie;
	cf_hs_defaults(&o, x->svc);
	cf_conn *c;
	op = cf_handshake(x->n, &o, &a, &c);
	if (op != MRP_OP_ACCEPT)
		return fail(x, "sent CONNECT with the RETRY's cookie in token; got %s; SPEC 9.7 "
			    "requires it to pass address validation",
			    op ? mrp_op_name((uint8_t)op) : "nothing");
	return CF_PASS;
}

static int c_hs_retry_required(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	o.no_cookie = 1;
	o.caps &= ~MRP_CAP_RETRY;
	static cf_rx a;
	int op = cf_handshake(x->n, &o, &a, NULL);
	if (op == MRP_OP_ACCEPT)
		return skip(x, "the target does not validate addresses");
	if (op != MRP_OP_REJECT || a.pkt.u.reject.reason != MRP_REJ_PARAM)
		return fail(x, "sent CONNECT without cookie and without caps RETRY; got %s "
			    "reason %u; SPEC 9.7 requires REJECT PARAM",
			    op ? mrp_op_name((uint8_t)op) : "nothing",
			    op == MRP_OP_REJECT ? a.pkt.u.reject.reason : 0);
	return CF_PASS;
}

static int match_reject_ci(const cf_rx *rx, void *ud)
{
	const uint32_t *ci = ud;
	return rx->len >= MRP_HDR_LEN && rx->pkt.hdr.opcode == MRP_OP_REJECT &&
	       rx->pkt.hdr.dst_conn_id == *ci;
}

static int c_version_reject(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	mrp_pkt p;
	uint32_t ci = cf_rand32();
	cf_build_connect(x->n, &p, ci, cf_rand64(), 0, &o);
	uint8_t buf[512];
	ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &p);
	if (len < 0)
		return fail(x, "encode");
	buf[0] = 9;  /* a version nobody speaks yet */
	buf[28] = 9; /* min_version */
	buf[29] = 9; /* max_version */
	static cf_rx rx;
	int got = 0;
	for (int i = 0; i < 3 && !got; i++) {
		cf_send_raw(x->n, -1, NULL, buf, (size_t)len, -1);
		got = cf_wait(x->n, match_reject_ci, &ci, x->n->timeout_ms, &rx);
	}
	if (!got)
		return fail(x, "sent CONNECT in version 9 (versions 9-9); got nothing; SPEC 12.3 "
			    "requires REJECT VERSION with the target's range");
	const uint8_t *r = rx.raw;
	if (rx.len != MRP_REJECT_LEN || r[28] != MRP_REJ_VERSION || r[29] == 0 || r[29] > r[30] ||
	    (r[29] <= 9 && 9 <= r[30]) || rx.pkt.hdr.src_conn_id != 0 || rx.pkt.hdr.token != 0)
		return fail(x, "sent CONNECT in version 9; got REJECT length %zu reason %u range "
			    "%u-%u src_conn_id %08x token %llx; SPEC 12.3 requires 36 bytes, reason "
			    "VERSION, the target's own range, src_conn_id 0, token 0", rx.len, r[28],
			    r[29], r[30], rx.pkt.hdr.src_conn_id,
			    (unsigned long long)rx.pkt.hdr.token);
	return CF_PASS;
}

static int c_version_choose(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	o.max_version = 200;
	static cf_rx a;
	cf_conn *c;
	int op = cf_handshake(x->n, &o, &a, &c);
	if (op != MRP_OP_ACCEPT)
		return fail(x, "sent CONNECT in version 1 offering versions 1-200; got %s; SPEC "
			    "12.2 requires ACCEPT in the highest common version",
			    op ? mrp_op_name((uint8_t)op) : "nothing");
	if (a.pkt.hdr.version != 1 || a.pkt.u.hs.min_version != 1 || a.pkt.u.hs.max_version != 1)
		return fail(x, "offered 1-200; ACCEPT version %u min %u max %u; SPEC 12.2 requires "
			    "the highest version the target speaks (1 for a v1 target)",
			    a.pkt.hdr.version, a.pkt.u.hs.min_version, a.pkt.u.hs.max_version);
	return CF_PASS;
}

static int c_version_range(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	o.min_version = 2;
	o.max_version = 3;
	static cf_rx a;
	int op = cf_handshake(x->n, &o, &a, NULL);
	if (op != MRP_OP_REJECT || a.pkt.u.reject.reason != MRP_REJ_PARAM)
		return fail(x, "sent CONNECT in version 1 announcing versions 2-3; got %s reason "
			    "%u; SPEC 9.4 rule 2 requires REJECT PARAM",
			    op ? mrp_op_name((uint8_t)op) : "nothing",
			    op == MRP_OP_REJECT ? a.pkt.u.reject.reason : 0);
	return CF_PASS;
}

static int c_caps_unknown(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	o.caps |= 0xfff0000000000000ull | 0x100;
	static cf_rx a;
	cf_conn *c;
	int op = cf_handshake(x->n, &o, &a, &c);
	if (op != MRP_OP_ACCEPT)
		return fail(x, "sent CONNECT with unknown caps bits %llx; got %s; SPEC 12.4 "
			    "requires them ignored (ACCEPT)", (unsigned long long)o.caps,
			    op ? mrp_op_name((uint8_t)op) : "nothing");
	if (a.pkt.u.hs.caps & ~MRP_CAP_KNOWN)
		return fail(x, "sent caps %llx; ACCEPT caps %llx; SPEC 9.4/12.4: an ACCEPT never "
			    "carries a bit its sender does not know", (unsigned long long)o.caps,
			    (unsigned long long)a.pkt.u.hs.caps);
	return CF_PASS;
}

static int c_reject_no_service(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, SVC_NONE);
	static cf_rx a;
	int op = cf_handshake(x->n, &o, &a, NULL);
	if (op != MRP_OP_REJECT || a.pkt.u.reject.reason != MRP_REJ_NO_SERVICE ||
	    a.pkt.u.reject.service_id != SVC_NONE || a.pkt.hdr.src_conn_id != 0)
		return fail(x, "sent CONNECT to service %08x (no listener); got %s reason %u "
			    "service %08x src %08x; SPEC 9.4 rule 3 and 10.1 require REJECT "
			    "NO_SERVICE with the service id copied and src_conn_id 0", SVC_NONE,
			    op ? mrp_op_name((uint8_t)op) : "nothing",
			    op == MRP_OP_REJECT ? a.pkt.u.reject.reason : 0,
			    op == MRP_OP_REJECT ? a.pkt.u.reject.service_id : 0,
			    a.pkt.hdr.src_conn_id);
	return CF_PASS;
}

/* ---- REJECT reasons the target's state or policy decides (10.2) ----------------------- */

static int c_reject_refused(cf_ctx *x)
{
	if (!x->has_refused_svc)
		return skip(x, "no --refused-service names a service the target refuses us");
	cf_hs_opts o;
	cf_hs_defaults(&o, x->refused_svc);
	static cf_rx a;
	int op = cf_handshake(x->n, &o, &a, NULL);
	if (op != MRP_OP_REJECT || a.pkt.u.reject.reason != MRP_REJ_REFUSED ||
	    a.pkt.u.reject.service_id != x->refused_svc || a.pkt.hdr.src_conn_id != 0 ||
	    a.len != MRP_REJECT_LEN)
		return fail(x, "sent CONNECT to service %08x (refused to us by the target's "
			    "policy); got %s reason %u service %08x src %08x; SPEC 9.4 rule 6 and "
			    "10.2 require REJECT REFUSED with the service id copied and src_conn_id 0",
			    x->refused_svc, op ? mrp_op_name((uint8_t)op) : "nothing",
			    op == MRP_OP_REJECT ? a.pkt.u.reject.reason : 0,
			    op == MRP_OP_REJECT ? a.pkt.u.reject.service_id : 0,
			    a.pkt.hdr.src_conn_id);
	return CF_PASS;
}

typedef struct hs_ci {
	uint32_t ci;
} hs_ci;

static int match_hs_ci(const cf_rx *rx, void *ud)
{
	const hs_ci *m = ud;
	uint8_t op = rx->pkt.hdr.opcode;
	return rx->rv >= 0 && rx->pkt.hdr.dst_conn_id == m->ci &&
	       (op == MRP_OP_ACCEPT || op == MRP_OP_REJECT || op == MRP_OP_RETRY);
}

#define RES_MAX 1100 /* above the RECOMMENDED half-open bounds (128 per peer, 1,024) */

static int c_reject_resources(cf_ctx *x)
{
	/* Half-open connections that are never confirmed, each with a valid
	 * cookie, until the target is out of them (its half-open table, or
	 * the rate of new connections: SPEC 9.4 rule 5). They announce a
	 * service port of their own, so that the target counts them for a
	 * peer other than the one the other cases are. */
	cf_sa la;
	int fd = cf_socket_local(x->n, &la);
	if (fd < 0)
		return skip(x, "no second local port");
	static struct {
		uint32_t ci, ca;
		uint64_t ti, ta;
	} open_[RES_MAX];
	unsigned nopen = 0, silent = 0, sent = 0;
	int r = CF_SKIP;
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	static cf_rx a;
	for (unsigned i = 0; i < RES_MAX && r == CF_SKIP; i++) {
		uint32_t ci = cf_rand32();
		uint64_t ti = cf_rand64();
		int answered = 0;
		for (unsigned t = 0; t < 4 && !answered; t++) {
			mrp_pkt p;
			cf_build_connect(x->n, &p, ci, ti, x->n->cookie, &o);
			p.u.hs.service_port = cf_sa_port(&la);
			cf_send(x->n, &p, -1);
			sent++;
			hs_ci m = {ci};
			if (!cf_wait(x->n, match_hs_ci, &m, x->n->timeout_ms, &a))
				break;
			if (a.pkt.hdr.opcode == MRP_OP_RETRY) {
				x->n->cookie = a.pkt.u.retry.cookie;
				continue;
			}
			answered = 1;
		}
		if (!answered) {
			silent++;
			if (silent > 8)
				break;
			continue;
		}
		if (a.pkt.hdr.opcode == MRP_OP_ACCEPT) {
			open_[nopen].ci = ci;
			open_[nopen].ti = ti;
			open_[nopen].ca = a.pkt.hdr.src_conn_id;
			open_[nopen].ta = a.pkt.u.hs.hs_token;
			nopen++;
			continue;
		}
		/* REJECT */
		const mrp_reject *j = &a.pkt.u.reject;
		if (j->reason != MRP_REJ_RESOURCES || a.pkt.hdr.token != ti ||
		    a.pkt.hdr.src_conn_id != 0 || j->service_id != x->svc || a.len != MRP_REJECT_LEN)
			r = fail(x, "held %u half-open connections (never confirmed) and sent another "
				 "CONNECT; got REJECT reason %u token %016llx src %08x service %08x length "
				 "%zu; SPEC 9.4 rule 5 and 10.1 require REJECT RESOURCES with token Ti "
				 "(%016llx), src_conn_id 0, the service id copied, 36 bytes", nopen,
				 j->reason, (unsigned long long)a.pkt.hdr.token, a.pkt.hdr.src_conn_id,
				 j->service_id, a.len, (unsigned long long)ti);
		else
			r = CF_PASS;
	}
	close(fd);
	/* End the half-open connections (a RESET with the target's token). */
	for (unsigned i = 0; i < nopen; i++) {
		cf_conn h = {0};
		h.ci = open_[i].ci;
		h.ca = open_[i].ca;
		h.ta = open_[i].ta;
		mrp_pkt p;
		cf_hdr(&h, &p, MRP_OP_RESET);
		p.u.close.reason = MRP_CLOSE_APP_EXIT;
		cf_send(x->n, &p, -1);
		if (i % 32 == 31)
			cf_drain(x->n, 5, NULL, NULL);
	}
	if (r == CF_SKIP && silent > 8)
		snprintf(x->msg, sizeof(x->msg), "the target accepted %u half-open connections, then "
			 "answered none of %u CONNECTs (SPEC 14.3 lets it rate-limit answers)", nopen,
			 silent);
	else if (r == CF_SKIP)
		snprintf(x->msg, sizeof(x->msg), "the target accepted %u half-open connections from "
			 "one peer without a REJECT RESOURCES; its bounds are above the RECOMMENDED "
			 "ones of SPEC 9.4 rule 5", nopen);
	else if (r == CF_PASS)
		snprintf(x->msg, sizeof(x->msg), "REJECT RESOURCES after %u half-open connections",
			 nopen);
	/* Let the target recover before the next case: it must accept again. */
	char keep[sizeof(x->msg)];
	memcpy(keep, x->msg, sizeof(keep));
	uint64_t end = cf_now_ns() + 5000000000ull;
	int back = 0;
	while (!back && cf_now_ns() < end) {
		cf_conn *c;
		int op = cf_handshake(x->n, &o, &a, &c);
		if (op == MRP_OP_ACCEPT && c) {
			c->established = 1; /* so that it is RESET */
			back = 1;
		} else {
			cf_drain(x->n, 100, NULL, NULL);
		}
	}
	memcpy(x->msg, keep, sizeof(keep));
	cf_drain(x->n, 300, NULL, NULL);
	if (!back && r != CF_FAIL)
		return fail(x, "after %u half-open connections, ended by RESET, the target accepted "
			    "no new connection for 5 s; SPEC 10.2: RESOURCES is transient (the "
			    "initiator MAY retry later)", nopen);
	return r;
}

/* ---- ACK timing (6.3) ------------------------------------------------------------------- */

static int c_ack_delayed(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	uint16_t path = c->max_paths > 2 ? 2 : 0;
	/* PSN 0 with ACK_REQ (and the first of its generation): ACKed at once. */
	ds_write(x, &ds, path, 0, 0, 0, -1);
	mrp_ack a;
	if (!wait_ack(x, c, path, 0, 1, &a))
		return fail(x, "sent PSN 0 with ACK_REQ on path %u; got no ACK", path);
	/* PSN 1 in order, without ACK_REQ: only the ACK timer (or the count of
	 * packets) acknowledges it; the SPEC bounds the delay (10 us
	 * RECOMMENDED, an implementation parameter). */
	mrp_pkt p;
	ds_build(&ds, &p, path, 1, 1, 0);
	p.hdr.flags &= (uint16_t)~MRP_F_ACK_REQ;
	uint64_t t0 = cf_now_ns();
	cf_send(x->n, &p, -1);
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_ACK, .path = path, .gen = 0, .next_psn = 2};
	static cf_rx rx;
	if (!cf_wait(x->n, match_conn, &m, x->n->timeout_ms * 2, &rx))
		return fail(x, "sent PSN 1 in order without ACK_REQ on path %u; got no ACK with "
			    "next_psn 2 within %u ms; SPEC 6.3 requires an ACK no later than the "
			    "ACK delay after the first unacknowledged data packet", path,
			    x->n->timeout_ms * 2);
	snprintf(x->msg, sizeof(x->msg), "ACK after %.3f ms (round trip included), ack_delay_ns %llu",
		 (double)(cf_now_ns() - t0) / 1e6, (unsigned long long)rx.pkt.u.ack.ack_delay_ns);
	return CF_PASS;
}

/* ---- authentication ------------------------------------------------------------ */

static int c_token_forged(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	long long t0 = drop_count(x, "TOKEN");
	mrp_pkt p;
	cf_probe(c, &p, 0, 0);
	p.hdr.token ^= 0x5a5a5a5a5a5a5a5aull;
	cf_send(x->n, &p, -1);
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_PROBE_ACK};
	static cf_rx rx;
	int answered = 0;
	while (cf_wait(x->n, match_conn, &m, 300, &rx))
		if (rx.pkt.u.probe_ack.probe_seq == p.u.probe.probe_seq)
			answered = 1;
	if (answered)
		return fail(x, "sent PROBE with a forged token; got PROBE_ACK; SPEC 13.2 step 3 "
			    "requires it dropped (TOKEN)");
	/* A CLOSE and a RESET with a forged token must not end the connection. */
	cf_hdr(c, &p, MRP_OP_RESET);
	p.hdr.token ^= 1;
	cf_send(x->n, &p, -1);
	cf_hdr(c, &p, MRP_OP_CLOSE);
	p.hdr.token ^= 2;
	cf_send(x->n, &p, -1);
	m_conn any = {.ci = c->ci, .any = 1};
	if (cf_wait(x->n, match_conn, &any, 200, &rx))
		return fail(x, "sent RESET and CLOSE with forged tokens; got %s; SPEC 13.2 "
			    "requires them dropped without an answer", mrp_op_name(rx.pkt.hdr.opcode));
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "sent RESET and CLOSE with forged tokens; the connection no longer "
			    "answers PROBEs; SPEC 13.2/14.2 require no state change");
	long long t1 = drop_count(x, "TOKEN");
	if (t0 >= 0 && t1 >= 0 && t1 - t0 < 3)
		return fail(x, "sent 3 packets with forged tokens; target's TOKEN counter grew "
			    "%lld; SPEC 13.3 requires each counted TOKEN", t1 - t0);
	return CF_PASS;
}

static int c_token_src_conn(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p;
	cf_hdr(c, &p, MRP_OP_RESET);
	p.hdr.src_conn_id ^= 0x00010000;
	if (!p.hdr.src_conn_id)
		p.hdr.src_conn_id = 1;
	cf_send(x->n, &p, -1);
	static cf_rx rx;
	m_conn any = {.ci = c->ci, .any = 1};
	if (cf_wait(x->n, match_conn, &any, 150, &rx))
		return fail(x, "sent RESET with the right token but a wrong src_conn_id; got %s; "
			    "SPEC 13.2 requires it dropped (NOCONN)", mrp_op_name(rx.pkt.hdr.opcode));
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "sent RESET with a wrong src_conn_id; the connection ended; SPEC "
			    "13.2 step 3 requires it dropped with no state change");
	return CF_PASS;
}

static int match_nak_unknown(const cf_rx *rx, void *ud)
{
	const uint32_t *ci = ud;
	return rx->rv >= 0 && rx->pkt.hdr.opcode == MRP_OP_NAK && rx->pkt.hdr.dst_conn_id == *ci;
}

static int c_noconn_nak(cf_ctx *x)
{
	/* A data packet for a connection id the target never gave out. */
	cf_conn fake = {0};
	fake.ci = cf_rand32();
	fake.ca = cf_rand32();
	fake.ta = cf_rand64();
	mrp_pkt p;
	cf_data(&fake, &p, MRP_OP_WRITE, 2, 1, 7, 0, 0, NULL, 0);
	p.hdr.psn = 33;
	cf_send(x->n, &p, -1);
	static cf_rx rx;
	if (!cf_wait(x->n, match_nak_unknown, &fake.ci, x->n->timeout_ms, &rx))
		return skip(x, "no NAK UNKNOWN_CONN for a WRITE of an unknown connection (it MAY "
			    "stay silent, SPEC 7.4)");
	const mrp_nak *k = &rx.pkt.u.nak;
	if (k->reason != MRP_NAK_UNKNOWN_CONN || rx.pkt.hdr.src_conn_id != fake.ca ||
	    rx.pkt.hdr.token != 0 || k->token_echo != fake.ta || k->nak_psn != 33 ||
	    k->nak_path_id != 2 || k->msn != 7 || rx.pkt.hdr.path_id != 0)
		return fail(x, "sent WRITE dst %08x src %08x token %016llx path 2 psn 33 msn 7; got "
			    "NAK reason %u src %08x token %llx token_echo %016llx path %u psn %u msn %u; "
			    "SPEC 7.4 requires UNKNOWN_CONN, src = our dst, token 0, the token echoed "
			    "and the packet named", fake.ca, fake.ci, (unsigned long long)fake.ta,
			    k->reason, rx.pkt.hdr.src_conn_id, (unsigned long long)rx.pkt.hdr.token,
			    (unsigned long long)k->token_echo, k->nak_path_id, k->nak_psn, k->msn);
	return CF_PASS;
}

static int c_noconn_silent(cf_ctx *x)
{
	cf_conn fake = {0};
	fake.ci = cf_rand32();
	fake.ca = cf_rand32();
	fake.ta = cf_rand64();
	mrp_pkt p;
	cf_probe(&fake, &p, 0, 0);
	cf_send(x->n, &p, -1);
	cf_hdr(&fake, &p, MRP_OP_CLOSE);
	cf_send(x->n, &p, -1);
	cf_hdr(&fake, &p, MRP_OP_RESET);
	cf_send(x->n, &p, -1);
	static cf_rx rx;
	if (cf_wait(x->n, match_dst, &fake.ci, 300, &rx))
		return fail(x, "sent PROBE, CLOSE and RESET for an unknown connection; got %s; "
			    "SPEC 7.4 answers only data, ACK and ACCEPT (11.3: a RESET is never "
			    "answered)", mrp_op_name(rx.pkt.hdr.opcode));
	return CF_PASS;
}

/* ---- PROBE ------------------------------------------------------------------------ */

static int probe_check(cf_ctx *x, cf_conn *c, uint16_t path, uint16_t gen, int check_ts)
{
	mrp_pkt p;
	cf_probe(c, &p, path, gen);
	p.u.probe.ts_ns = 0x0123456789abcdefull ^ cf_now_ns();
	cf_send(x->n, &p, -1);
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_PROBE_ACK};
	static cf_rx rx;
	while (cf_wait(x->n, match_conn, &m, x->n->timeout_ms * 2, &rx)) {
		const mrp_probe_ack *a = &rx.pkt.u.probe_ack;
		if (a->probe_seq != p.u.probe.probe_seq && a->probed_path_id == path)
			continue; /* an older probe's answer */
		if (a->probe_seq != p.u.probe.probe_seq || a->probed_path_id != path ||
		    a->probed_path_gen != gen || (check_ts && a->ts_echo_ns != p.u.probe.ts_ns) ||
		    rx.pkt.hdr.token != c->ti || rx.pkt.hdr.src_conn_id != c->ca)
			return fail(x, "sent PROBE path %u gen %u seq %u ts %016llx; got PROBE_ACK "
				    "path %u gen %u seq %u ts_echo %016llx; SPEC 8.3 requires them "
				    "echoed unchanged", path, gen, p.u.probe.probe_seq,
				    (unsigned long long)p.u.probe.ts_ns, a->probed_path_id,
				    a->probed_path_gen, a->probe_seq,
				    (unsigned long long)a->ts_echo_ns);
		return CF_PASS;
	}
	return fail(x, "sent PROBE (ACK_REQ) path %u gen %u; got no PROBE_ACK; SPEC 8.2 requires "
		    "an immediate answer", path, gen);
}

static int c_probe_answer(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	return probe_check(x, c, 0, 0, 1);
}

static int c_probe_generation(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	if (c->max_paths < 2)
		return skip(x, "max_paths %u < 2", c->max_paths);
	return probe_check(x, c, (uint16_t)(c->max_paths - 1), 7, 0);
}

static int c_probe_path_range(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	long long r0 = drop_count(x, "RANGE");
	mrp_pkt p;
	cf_probe(c, &p, c->max_paths, 0);
	cf_send(x->n, &p, -1);
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_PROBE_ACK};
	static cf_rx rx;
	while (cf_wait(x->n, match_conn, &m, 300, &rx))
		if (rx.pkt.u.probe_ack.probe_seq == p.u.probe.probe_seq)
			return fail(x, "sent PROBE on path %u (max_paths %u); got PROBE_ACK; SPEC "
				    "8.2/13.2 require it dropped (RANGE)", c->max_paths, c->max_paths);
	long long r1 = drop_count(x, "RANGE");
	if (r0 >= 0 && r1 - r0 < 1)
		return fail(x, "PROBE on path %u >= max_paths: RANGE counter grew %lld; SPEC 13.3 "
			    "requires it counted", c->max_paths, r1 - r0);
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "after a PROBE on path %u the connection no longer answers",
			    c->max_paths);
	return CF_PASS;
}

/* ---- ACK, SACK, generations, ECN ---------------------------------------------------- */

static int c_sack_gap(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	/* PSNs 0, 1, 2, 5 of path 0: the example of SPEC 6.2. */
	uint32_t psns[] = {0, 1, 2, 5};
	for (unsigned i = 0; i < 4; i++)
		ds_write(x, &ds, 1, psns[i], i, 0, -1);
	mrp_ack a;
	if (!wait_ack(x, c, 1, 0, 6, &a))
		return fail(x, "sent WRITEs with PSNs 0,1,2,5 on path 1; got no ACK "
			    "with next_psn 6; SPEC 6.2/6.3 require an immediate ACK reporting it");
	char s[40];
	sack_str(&a, s, sizeof(s));
	int rest = 0;
	for (unsigned i = 1; i < MRP_SACK_BYTES; i++)
		rest |= a.sack[i];
	if (a.sack[0] != 0x39 || rest)
		return fail(x, "sent PSNs 0,1,2,5; got ACK next_psn %u sack %s...; SPEC 6.2 "
			    "requires byte 36 = 0x39 and bytes 37-67 zero", a.next_psn, s);
	return CF_PASS;
}

static int c_sack_duplicate(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	ds_write(x, &ds, 1, 0, 0, 0, -1);
	ds_write(x, &ds, 1, 1, 1, 0, -1);
	mrp_ack a;
	if (!wait_ack(x, c, 1, 0, 2, &a))
		return fail(x, "sent PSNs 0,1; got no ACK with next_psn 2");
	/* The same packet again (a duplicate on the wire), without ACK_REQ. */
	mrp_pkt p;
	ds_build(&ds, &p, 1, 1, 1, 0);
	p.hdr.flags &= (uint16_t)~MRP_F_ACK_REQ;
	cf_send(x->n, &p, -1);
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_ACK, .path = 1, .gen = 0, .next_psn = 2};
	static cf_rx rx;
	if (!cf_wait(x->n, match_conn, &m, x->n->timeout_ms * 2, &rx))
		return fail(x, "resent PSN 1 (a duplicate, no ACK_REQ); got no ACK; SPEC 6.3 "
			    "requires an immediate ACK for a duplicate");
	a = rx.pkt.u.ack;
	if (!sack_bit(&a, 0) || !sack_bit(&a, 1) || sack_bit(&a, 2))
		return fail(x, "after PSNs 0,1 and a duplicate 1: ACK next_psn %u sack byte %02x; "
			    "SPEC 6.2 requires next_psn 2, bits 0 and 1 only", a.next_psn, a.sack[0]);
	return CF_PASS;
}

static int c_sack_retransmit(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	/* msn 0 psn 0, msn 1 "lost" (psn 1 never sent), msn 2 psn 2, then
	 * msn 1 retransmitted with RETX under the fresh PSN 3 (SPEC 3.3). */
	ds_write(x, &ds, 1, 0, 0, 0, -1);
	ds_write(x, &ds, 1, 2, 2, 0, -1);
	mrp_ack a;
	if (!wait_ack(x, c, 1, 0, 3, &a))
		return fail(x, "sent PSNs 0 and 2; got no ACK with next_psn 3");
	if (a.sack[0] != 0x05)
		return fail(x, "sent PSNs 0 and 2; ACK next_psn %u sack byte %02x; SPEC 6.2 "
			    "requires 0x05 (PSN 1 missing)", a.next_psn, a.sack[0]);
	ds_write(x, &ds, 1, 3, 1, MRP_F_RETX, -1);
	if (!wait_ack(x, c, 1, 0, 4, &a))
		return fail(x, "retransmitted msn 1 under PSN 3 (RETX); got no ACK with next_psn 4");
	if (a.sack[0] != 0x0b)
		return fail(x, "PSNs 0, 2 and 3 (a retransmission): ACK next_psn %u sack byte "
			    "%02x; SPEC 6.2 requires 0x0b (the hole at PSN 1 stays)", a.next_psn,
			    a.sack[0]);
	return CF_PASS;
}

static int c_path_generation(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	uint16_t path = c->max_paths > 2 ? 2 : 0;
	for (uint32_t i = 0; i < 3; i++)
		ds_write(x, &ds, path, i, i, 0, -1);
	mrp_ack a;
	if (!wait_ack(x, c, path, 0, 3, &a))
		return fail(x, "sent PSNs 0-2 on path %u gen 0; got no ACK with next_psn 3", path);
	c->gen[path] = 1;
	ds_write(x, &ds, path, 0, 3, 0, -1);
	if (!wait_ack(x, c, path, 1, 1, &a))
		return fail(x, "sent PSN 0 on path %u generation 1 after PSNs 0-2 of generation 0; "
			    "got no ACK for generation 1 with next_psn 1; SPEC 6.2 requires fresh "
			    "state for the new generation", path);
	if (a.rcv_count != 1)
		return fail(x, "generation 1's first ACK has rcv_count %u; SPEC 6.2 requires "
			    "counters that start at 0 for each generation (1)", a.rcv_count);
	return CF_PASS;
}

static int c_path_report(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	cf_sa la;
	int fd = cf_socket_local(x->n, &la);
	if (fd < 0)
		return skip(x, "no second local port");
	ds_write(x, &ds, 1, 0, 0, 0, -1);
	mrp_ack a;
	int ok1 = wait_ack(x, c, 1, 0, 1, &a);
	/* Re-port path 1: new source port, new generation. */
	c->gen[1] = 1;
	mrp_pkt p;
	ds_build(&ds, &p, 1, 0, 1, 0);
	uint8_t buf[128];
	ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &p);
	cf_send_raw(x->n, fd, NULL, buf, (size_t)len, -1);
	int ok2 = wait_ack(x, c, 1, 1, 1, &a);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int stray = poll(&pfd, 1, 50) > 0;
	close(fd);
	if (!ok1)
		return fail(x, "sent PSN 0 on path 1; got no ACK");
	if (!ok2)
		return fail(x, "re-ported path 1 (new source port, generation 1, PSN 0); got no "
			    "ACK at our service port; SPEC 2.2/2.3 require it processed and answered "
			    "to the service port");
	if (stray)
		return fail(x, "re-ported path 1; the target answered to the packet's source port; "
			    "SPEC 2.3 requires answers to go to the peer's service port");
	return CF_PASS;
}

static int c_ecn_echo(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	uint16_t path = c->max_paths > 3 ? 3 : 0;
	ds_write(x, &ds, path, 0, 0, 0, ECT0);
	ds_write(x, &ds, path, 1, 1, 0, CE);
	ds_write(x, &ds, path, 2, 2, 0, CE);
	ds_write(x, &ds, path, 3, 3, 0, ECT0);
	mrp_ack a;
	if (!wait_ack(x, c, path, 0, 4, &a))
		return fail(x, "sent 4 data packets (2 with CE) on path %u; got no ACK with "
			    "next_psn 4", path);
	if (a.ce_count != 2 || a.rcv_count != 4)
		return fail(x, "sent 4 data packets on path %u, 2 marked CE (IP TOS 0x03); ACK "
			    "ce_count %u rcv_count %u; SPEC 2.4/6.1 require 2 and 4", path,
			    a.ce_count, a.rcv_count);
	return CF_PASS;
}

/* HELD on data from a peer that did not negotiate it: the flag is valid on
 * data (SPEC 4.2) and a receiver without the capability ignores it (6.5):
 * placed and acknowledged like any data packet, never dropped as FLAGS. */
static int c_flags_held(cf_ctx *x)
{
	dsrc ds;
	int r_ = ds_open(x, &ds);
	if (r_ != CF_PASS)
		return r_;
	cf_conn *c = ds.c;
	uint16_t path = c->max_paths > 2 ? 2 : 0;
	for (uint32_t i = 0; i < 4; i++)
		ds_write(x, &ds, path, i, i, MRP_F_HELD, -1);
	mrp_ack a;
	if (!wait_ack(x, c, path, 0, 4, &a))
		return fail(x, "sent 4 WRITEs with flag HELD (0x0020) on path %u; got no ACK with "
			    "next_psn 4; SPEC 4.2/6.5 allow HELD on data, and a receiver that did not "
			    "negotiate it ignores it", path);
	if (a.rcv_count != 4)
		return fail(x, "sent 4 WRITEs with HELD on path %u; ACK rcv_count %u; SPEC 6.5: "
			    "HELD is never a reason to drop a packet", path, a.rcv_count);
	return CF_PASS;
}

/* ---- NAKs and the receiver's order ----------------------------------------------------- */

static int c_nak_invalid_rkey(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[64];
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_WRITE, 0, 1, 0, 0, sizeof(pl), pl, sizeof(pl));
	p.u.data.rkey = 0x0badc0de;
	p.u.data.remote_addr = 0x1000;
	return expect_nak(x, c, &p, MRP_NAK_INVALID_RKEY, "WRITE 64 bytes rkey 0badc0de");
}

static int c_nak_rnr(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[32];
	mrp_pkt p;
	/* Stream 1 of the service has no posted receive (ECHO: none). */
	cf_data(c, &p, MRP_OP_SEND, 0, 1, 0, 0, sizeof(pl), pl, sizeof(pl));
	int r = expect_nak(x, c, &p, MRP_NAK_RNR, "SEND on stream 1 (no receive posted)");
	if (r != CF_PASS)
		return r;
	/* RNR is not fatal: the connection lives on. */
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "after NAK RNR the connection stopped answering PROBEs; SPEC 7.3: "
			    "RNR is not fatal");
	return CF_PASS;
}

static int c_nak_unknown_stream(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[16];
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_SEND, 0, c->max_streams, 0, 0, sizeof(pl), pl, sizeof(pl));
	char s[80];
	snprintf(s, sizeof(s), "SEND on stream %u (max_streams %u)", c->max_streams,
		 c->max_streams);
	return expect_nak(x, c, &p, MRP_NAK_UNKNOWN_STREAM, s);
}

static int c_nak_malformed(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[MRP_MTU_MAX];
	mrp_pkt p;
	uint16_t len = (uint16_t)(c->mtu + 8);
	cf_data(c, &p, MRP_OP_WRITE, 0, 1, 0, 0, len, pl, len);
	char s[80];
	snprintf(s, sizeof(s), "WRITE with payload_len %u > MTU %u", len, c->mtu);
	return expect_nak(x, c, &p, MRP_NAK_MALFORMED, s);
}

static int c_nak_malformed_path(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_WRITE, c->max_paths % CF_MAX_PATHS, 1, 0, 0, 0, NULL, 0);
	p.hdr.path_id = c->max_paths;
	char s[80];
	snprintf(s, sizeof(s), "WRITE on path %u (max_paths %u)", c->max_paths, c->max_paths);
	return expect_nak(x, c, &p, MRP_NAK_MALFORMED, s);
}

static int c_order_malformed_first(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[MRP_MTU_MAX];
	mrp_pkt p;
	uint16_t len = (uint16_t)(c->mtu + 8);
	cf_data(c, &p, MRP_OP_WRITE, 0, c->max_streams, 0, 0, len, pl, len);
	p.u.data.rkey = 0x0badc0de;
	return expect_nak(x, c, &p, MRP_NAK_MALFORMED,
			  "WRITE with payload > MTU, stream >= max_streams and a bad rkey "
			  "(SPEC 5.5: check 1 first)");
}

static int c_order_stream_before_rkey(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[64];
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_WRITE, 0, c->max_streams, 0, 0, sizeof(pl), pl, sizeof(pl));
	p.u.data.rkey = 0x0badc0de;
	return expect_nak(x, c, &p, MRP_NAK_UNKNOWN_STREAM,
			  "WRITE on stream >= max_streams with a bad rkey (SPEC 5.5: check 2 "
			  "before 6)");
}

static int c_order_token_first(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[64];
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_WRITE, 0, c->max_streams, 0, 0, sizeof(pl), pl, sizeof(pl));
	p.hdr.path_id = c->max_paths;
	p.hdr.token ^= 0xffull << 40;
	cf_send(x->n, &p, -1);
	static cf_rx rx;
	m_conn any = {.ci = c->ci, .any = 1};
	if (cf_wait(x->n, match_conn, &any, 300, &rx))
		return fail(x, "sent WRITE with a forged token, path >= max_paths and stream >= "
			    "max_streams; got %s; SPEC 13.2 requires authentication before the path "
			    "and data checks: drop, count TOKEN, no NAK", mrp_op_name(rx.pkt.hdr.opcode));
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "after a WRITE with a forged token the connection no longer answers");
	return CF_PASS;
}

/* ---- the reference daemon's PERF service: WRITE placement ------------------------------ */

#define CTL_MAGIC 0x4d525046u
enum { T_HELLO = 1, T_READY, T_DONE, T_RESULT };

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t splitmix(uint64_t v)
{
	v += 0x9e3779b97f4a7c15ull;
	v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
	v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
	return v ^ (v >> 31);
}

/* The PERF service's data pattern (daemon/perf.c), host byte order. */
static void pattern_fill(uint8_t *buf, uint32_t len, uint64_t seed, uint64_t k)
{
	uint64_t base = splitmix(seed ^ splitmix(k));
	for (uint32_t i = 0; i < len / 8; i++) {
		uint64_t w = base + i * 0xd1342543de82ef95ull;
		memcpy(buf + 8 * (size_t)i, &w, 8);
	}
}

typedef struct perf {
	cf_conn *c;
	uint64_t seed, rkey, base, len;
	uint32_t ctl_msn, ctl_ridx;
} perf;

static int ctl_send(cf_ctx *x, perf *pf, uint32_t type, uint64_t a, uint64_t b)
{
	uint8_t m[48] = {0};
	put64(m, (uint64_t)CTL_MAGIC << 32 | type);
	put64(m + 8, a);
	put64(m + 16, b);
	mrp_pkt p;
	cf_data(pf->c, &p, MRP_OP_SEND, 0, 0, pf->ctl_msn++, 0, sizeof(m), m, sizeof(m));
	p.u.data.recv_idx = pf->ctl_ridx++;
	return cf_send(x->n, &p, -1);
}

/* Wait for a control message of `type` from the target. */
static int ctl_wait(cf_ctx *x, perf *pf, uint32_t type, uint64_t v[3])
{
	uint64_t end = cf_now_ns() + 3000000000ull;
	for (;;) {
		cf_conn *c = pf->c;
		for (unsigned i = 0; i < c->nmsgs; i++) {
			cf_msg *m = &c->msgs[i];
			if (m->stream_id == 0 && m->len == 48 &&
			    get64(m->data) == ((uint64_t)CTL_MAGIC << 32 | type)) {
				v[0] = get64(m->data + 8);
				v[1] = get64(m->data + 16);
				v[2] = get64(m->data + 24);
				memmove(m, m + 1, (c->nmsgs - i - 1) * sizeof(*m));
				c->nmsgs--;
				return 1;
			}
		}
		if (cf_now_ns() > end)
			return 0;
		cf_drain(x->n, 20, NULL, NULL);
	}
}

static int perf_open_opts(cf_ctx *x, perf *pf, const cf_hs_opts *o)
{
	memset(pf, 0, sizeof(*pf));
	char e[256];
	pf->c = cf_open(x->n, SVC_PERF, o, e, sizeof(e));
	if (!pf->c)
		return skip(x, "the target offers no PERF service (%s)", e);
	pf->seed = cf_rand64();
	ctl_send(x, pf, T_HELLO, pf->seed, 4096);
	uint64_t v[3];
	if (!ctl_wait(x, pf, T_READY, v))
		return fail(x, "sent HELLO to the PERF service; got no READY");
	if (v[0] == 0)
		return skip(x, "the PERF service refused a receiver (busy)");
	pf->rkey = v[0];
	pf->base = v[1];
	pf->len = v[2];
	return CF_PASS;
}

static int perf_open(cf_ctx *x, perf *pf)
{
	return perf_open_opts(x, pf, NULL);
}

static int perf_region(cf_ctx *x, cf_conn **pc, uint64_t *rkey, uint64_t *base)
{
	perf pf;
	char keep[sizeof(x->msg)];
	memcpy(keep, x->msg, sizeof(keep));
	int r = perf_open(x, &pf);
	memcpy(x->msg, keep, sizeof(keep));
	if (r != CF_PASS)
		return r;
	*pc = pf.c;
	*rkey = pf.rkey;
	*base = pf.base;
	return CF_PASS;
}

static int c_place_write_ooo(cf_ctx *x)
{
	perf pf;
	int r = perf_open(x, &pf);
	if (r != CF_PASS)
		return r;
	cf_conn *c = pf.c;
	static uint8_t msg[4096];
	pattern_fill(msg, sizeof(msg), pf.seed, 0);
	uint32_t seg = c->mtu;
	uint32_t nseg = (uint32_t)((sizeof(msg) + seg - 1) / seg);
	/* Last segment first, then the others backwards: nothing in order. */
	for (uint32_t j = 0; j < nseg; j++) {
		uint32_t s = nseg - 1 - j;
		uint32_t off = s * seg;
		uint32_t l = (uint32_t)sizeof(msg) - off < seg ? (uint32_t)sizeof(msg) - off : seg;
		mrp_pkt p;
		cf_data(c, &p, MRP_OP_WRITE_IMM, (uint16_t)(j % 2), 1, 0, off, sizeof(msg),
			msg + off, (uint16_t)l);
		p.u.data.remote_addr = pf.base; /* slot 0 */
		p.u.data.rkey = (uint32_t)pf.rkey;
		p.u.data.imm = 0;
		p.u.data.recv_idx = 0;
		cf_send(x->n, &p, -1);
	}
	cf_drain(x->n, 50, NULL, NULL);
	ctl_send(x, &pf, T_DONE, 1, 0);
	uint64_t v[3];
	if (!ctl_wait(x, &pf, T_RESULT, v))
		return fail(x, "sent a 4096-byte WRITE_IMM in %u segments in reverse order, then "
			    "DONE; got no RESULT from the PERF service", nseg);
	if (v[0] != 1 || v[2] != 0)
		return fail(x, "sent a 4096-byte WRITE_IMM in %u segments in reverse order; the "
			    "target's PERF service verified %llu messages with %llu errors; SPEC "
			    "5.3 requires each segment placed at remote_addr + offset", nseg,
			    (unsigned long long)v[0], (unsigned long long)v[2]);
	return CF_PASS;
}

static int c_nak_out_of_bounds(cf_ctx *x)
{
	perf pf;
	int r = perf_open(x, &pf);
	if (r != CF_PASS)
		return r;
	static uint8_t pl[64];
	mrp_pkt p;
	cf_data(pf.c, &p, MRP_OP_WRITE, 0, 1, 0, 0, sizeof(pl), pl, sizeof(pl));
	p.u.data.rkey = (uint32_t)pf.rkey;
	p.u.data.remote_addr = pf.base + pf.len - 32;
	return expect_nak(x, pf.c, &p, MRP_NAK_OUT_OF_BOUNDS,
			  "WRITE of 64 bytes at the region's end - 32");
}

/* SPEC 5.4 step 2: a SEND longer than the receive it matches. The service
 * posts receives on stream 0 for its control messages (the reference
 * daemon's: 48 bytes); a 1 GiB SEND exceeds any such buffer. Only the
 * message's first packet is sent. */
static int c_nak_send_bounds(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	static uint8_t pl[MRP_MTU_MAX];
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_SEND, 0, 0, 0, 0, 1u << 30, pl, c->mtu);
	p.u.data.recv_idx = 0;
	return expect_nak(x, c, &p, MRP_NAK_OUT_OF_BOUNDS,
			  "the first packet of a 1 GiB SEND to receive 0 of stream 0");
}

static int c_write_zero_length(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_WRITE, 1, 1, 0, 0, 0, NULL, 0);
	p.u.data.rkey = 0x0badc0de;
	cf_send(x->n, &p, -1);
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_ACK, .path = 1, .gen = 0, .next_psn = 1};
	m_conn k = {.ci = c->ci, .opcode = MRP_OP_NAK};
	static cf_rx rx;
	uint64_t end = cf_now_ns() + 2000000000ull;
	while (cf_now_ns() < end && cf_wait(x->n, match_any_answer, NULL, 2000, &rx)) {
		if (match_conn(&rx, &m))
			return CF_PASS;
		if (match_conn(&rx, &k))
			return fail(x, "sent a zero-length WRITE (msg_len 0, rkey 0badc0de); got NAK "
				    "%s; SPEC 5.3: a WRITE with msg_len 0 accesses no memory, the "
				    "receiver performs none of the rkey, bounds and access checks "
				    "(expected an ACK)", nak_name(rx.pkt.u.nak.reason));
	}
	return fail(x, "sent a zero-length WRITE with ACK_REQ; got neither ACK nor NAK; SPEC "
		    "5.3/6.3 require it accepted and acknowledged at once");
}

static int c_order_rkey_before_rnr(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	if (!(c->caps & MRP_CAP_IMM))
		return skip(x, "IMM capability not negotiated");
	static uint8_t pl[64];
	mrp_pkt p;
	/* Stream 1 of the service has no posted receive and no region: checks 6
	 * (rkey) and 7 (receive) both fail; 6 decides. */
	cf_data(c, &p, MRP_OP_WRITE_IMM, 0, 1, 0, 0, sizeof(pl), pl, sizeof(pl));
	p.u.data.rkey = 0x0badc0de;
	p.u.data.remote_addr = 0x1000;
	return expect_nak(x, c, &p, MRP_NAK_INVALID_RKEY,
			  "WRITE_IMM with a bad rkey on a stream without posted receives (SPEC "
			  "5.5: check 6 before 7)");
}

/* A READ_REQ of 64 bytes at msn 0 of stream 1: one packet, no payload. */
static void read_req(cf_conn *c, mrp_pkt *p, uint64_t addr, uint32_t rkey)
{
	cf_data(c, p, MRP_OP_READ_REQ, 0, 1, 0, 0, 64, NULL, 0);
	p->hdr.flags |= MRP_F_FIRST | MRP_F_LAST;
	p->u.data.remote_addr = addr;
	p->u.data.rkey = rkey;
}

static int c_read_not_negotiated(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL); /* our CONNECT offers no READ */
	if (c->caps & MRP_CAP_READ)
		return fail(x, "sent CONNECT without caps READ; ACCEPT caps %llx carry it; SPEC 9.4 "
			    "requires a subset", (unsigned long long)c->caps);
	mrp_pkt p;
	read_req(c, &p, 0x1000, 0x0badc0de);
	return expect_nak(x, c, &p, MRP_NAK_MALFORMED,
			  "READ_REQ on a connection without the capability READ (SPEC 5.8)");
}

static int c_read_access(cf_ctx *x)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, SVC_PERF);
	o.caps |= MRP_CAP_READ;
	perf pf;
	int r = perf_open_opts(x, &pf, &o);
	if (r != CF_PASS)
		return r;
	if (!(pf.c->caps & MRP_CAP_READ))
		return skip(x, "READ capability not negotiated");
	/* The PERF service's region takes WRITEs only. */
	mrp_pkt p;
	read_req(pf.c, &p, pf.base, (uint32_t)pf.rkey);
	return expect_nak(x, pf.c, &p, MRP_NAK_ACCESS,
			  "READ_REQ of 64 bytes of the PERF region, which allows remote write only "
			  "(SPEC 5.8.2)");
}

static int c_nak_access(cf_ctx *x)
{
	if (!x->has_ro)
		return skip(x, "no --ro-region names a region of the target without remote write");
	if (x->ro_len < 64)
		return skip(x, "the --ro-region is shorter than 64 bytes");
	cf_conn *c;
	OPEN(c, x->ro_svc, NULL);
	static uint8_t pl[64];
	memset(pl, 0xa5, sizeof(pl));
	mrp_pkt p;
	cf_data(c, &p, MRP_OP_WRITE, 0, 1, 0, 0, sizeof(pl), pl, sizeof(pl));
	p.u.data.rkey = x->ro_rkey;
	p.u.data.remote_addr = x->ro_addr;
	char s[160];
	snprintf(s, sizeof(s), "WRITE 64 bytes into the region of rkey %08x (no remote write) "
		 "at %llx", x->ro_rkey, (unsigned long long)x->ro_addr);
	return expect_nak(x, c, &p, MRP_NAK_ACCESS, s);
}

/* A WRITE whose remote_addr + msg_len passes 2^64, with a valid rkey: the
 * codec drops it (RANGE) before any placement check could be fooled by the
 * wrap-around (SPEC 5.1, 14.2). */
static int c_mal_wrap(cf_ctx *x)
{
	perf pf;
	int r = perf_open(x, &pf);
	if (r != CF_PASS)
		return r;
	cf_conn *c = pf.c;
	long long k0 = drop_count(x, "RANGE");
	static uint8_t pl[64];
	mrp_pkt p;
	uint16_t path = c->max_paths > 3 ? 3 : 0;
	cf_data(c, &p, MRP_OP_WRITE, path, 1, 0, 0, sizeof(pl), pl, sizeof(pl));
	p.u.data.rkey = (uint32_t)pf.rkey;
	p.u.data.remote_addr = pf.base;
	uint8_t buf[256];
	ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &p);
	if (len < 0)
		return fail(x, "could not encode the WRITE");
	uint64_t wrap = ~0ull - 15; /* + 64 bytes passes 2^64 */
	for (int i = 0; i < 8; i++)
		buf[56 + i] = (uint8_t)(wrap >> (56 - 8 * i));
	cf_send_raw(x->n, -1, NULL, buf, (size_t)len, -1);
	static cf_rx rx;
	m_conn ack = {.ci = c->ci, .opcode = MRP_OP_ACK, .path = path, .gen = 0};
	m_conn nak = {.ci = c->ci, .opcode = MRP_OP_NAK};
	uint64_t end = cf_now_ns() + 300000000ull;
	while (cf_now_ns() < end && cf_wait(x->n, match_any_answer, NULL, 300, &rx))
		if (match_conn(&rx, &ack) || match_conn(&rx, &nak))
			return fail(x, "sent WRITE (ACK_REQ) of 64 bytes at remote_addr %016llx (past "
				    "2^64 at its end) with the region's rkey; got %s; SPEC 5.1 and 14.2 "
				    "require it dropped by the codec (RANGE), never placed, NAKed or "
				    "acknowledged", (unsigned long long)wrap,
				    mrp_op_name(rx.pkt.hdr.opcode));
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "after a WRITE whose range wraps past 2^64 the connection no longer "
			    "answers PROBEs");
	long long k1 = drop_count(x, "RANGE");
	if (k0 >= 0 && k1 >= 0 && k1 - k0 < 1)
		return fail(x, "a WRITE whose range wraps past 2^64: the target's RANGE counter grew "
			    "%lld; SPEC 13.1/13.3 require it counted", k1 - k0);
	return CF_PASS;
}

/* Data packets the codec refuses (SPEC 5.1, 14.2): offset + payload_len
 * past msg_len only with 32-bit wrap-around (LENGTH), and a WRITE with a
 * recv_idx (RESERVED). Accepted, either would be NAKed INVALID_RKEY (its
 * rkey is unknown) or acknowledged: any answer shows it was not dropped. */
static int c_mal_data(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	long long l0 = drop_count(x, "LENGTH"), r0 = drop_count(x, "RESERVED");
	static uint8_t pl[64];
	uint8_t buf[2][256];
	ssize_t len[2];
	for (int k = 0; k < 2; k++) {
		mrp_pkt p;
		cf_data(c, &p, MRP_OP_WRITE, 1, 1, (uint32_t)k, 0, sizeof(pl), pl, sizeof(pl));
		p.u.data.rkey = 0x0badc0de;
		p.u.data.remote_addr = 0x1000;
		len[k] = mrp_pkt_encode(buf[k], sizeof(buf[k]), &p);
		if (len[k] < 0)
			return fail(x, "could not encode the WRITE");
	}
	/* offset 0xfffffff0: offset + 64 wraps to 48 <= msg_len 64 in 32 bits;
	 * flags then say neither FIRST nor LAST, as for a middle packet */
	buf[0][36] = buf[0][37] = buf[0][38] = 0xff;
	buf[0][39] = 0xf0;
	buf[0][3] = (uint8_t)(buf[0][3] & ~(MRP_F_FIRST | MRP_F_LAST));
	buf[1][47] = 5; /* recv_idx 5 in a WRITE */
	for (int k = 0; k < 2; k++)
		cf_send_raw(x->n, -1, NULL, buf[k], (size_t)len[k], -1);
	static cf_rx rx;
	m_conn ack = {.ci = c->ci, .opcode = MRP_OP_ACK, .path = 1, .gen = 0};
	m_conn nak = {.ci = c->ci, .opcode = MRP_OP_NAK};
	uint64_t end = cf_now_ns() + 300000000ull;
	while (cf_now_ns() < end && cf_wait(x->n, match_any_answer, NULL, 300, &rx))
		if (match_conn(&rx, &ack) || match_conn(&rx, &nak))
			return fail(x, "sent a WRITE with offset 0xfffffff0 and payload 64 of msg_len 64 "
				    "(the sum wraps in 32 bits) and a WRITE with recv_idx 5; got %s; "
				    "SPEC 5.1 and 14.2 require both dropped by the codec (LENGTH, "
				    "RESERVED) before any use", mrp_op_name(rx.pkt.hdr.opcode));
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "after two malformed WRITEs the connection no longer answers PROBEs");
	long long l1 = drop_count(x, "LENGTH"), r1 = drop_count(x, "RESERVED");
	if (l0 >= 0 && l1 >= 0 && (l1 - l0 < 1 || r1 - r0 < 1))
		return fail(x, "a WRITE whose offset wraps and a WRITE with a recv_idx: the target's "
			    "LENGTH counter grew %lld, RESERVED %lld; SPEC 13.1/13.3 require each "
			    "counted", l1 - l0, r1 - r0);
	return CF_PASS;
}

/* ---- CLOSE and RESET ------------------------------------------------------------------- */

static int wait_close_reply(cf_ctx *x, cf_conn *c, mrp_pkt *out, unsigned ms)
{
	m_conn m = {.ci = c->ci, .opcode = MRP_OP_CLOSE};
	static cf_rx rx;
	while (cf_wait(x->n, match_conn, &m, ms, &rx))
		if (rx.pkt.hdr.flags & MRP_F_REPLY) {
			*out = rx.pkt;
			return 1;
		}
	return 0;
}

static int c_close_graceful(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p, r;
	cf_hdr(c, &p, MRP_OP_CLOSE);
	p.u.close.reason = MRP_CLOSE_APP_EXIT;
	int got = 0;
	for (int i = 0; i < 3 && !got; i++) {
		cf_send(x->n, &p, -1);
		got = wait_close_reply(x, c, &r, x->n->timeout_ms);
	}
	if (!got)
		return fail(x, "sent CLOSE reason APP_EXIT; got no CLOSE with REPLY; SPEC 11.2 "
			    "step 3 requires one once the target's work is done");
	if (r.hdr.path_id || r.hdr.path_gen)
		return fail(x, "got CLOSE REPLY on path %u gen %u; SPEC 11.1 requires path 0 gen 0",
			    r.hdr.path_id, r.hdr.path_gen);
	/* The connection has ended: a PROBE gets no answer. */
	if (cf_alive(x->n, c, 300))
		return fail(x, "after CLOSE/REPLY the target still answers PROBEs on the "
			    "connection; SPEC 11.2/11.5 require it ended (tombstone: drop)");
	return CF_PASS;
}

static int c_close_reason(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p, r;
	cf_hdr(c, &p, MRP_OP_CLOSE);
	p.u.close.reason = MRP_CLOSE_SHUTDOWN;
	int got = 0;
	for (int i = 0; i < 3 && !got; i++) {
		cf_send(x->n, &p, -1);
		got = wait_close_reply(x, c, &r, x->n->timeout_ms);
	}
	if (!got)
		return skip(x, "the target does not close gracefully (see close.graceful)");
	if (r.u.close.reason != MRP_CLOSE_SHUTDOWN)
		return fail(x, "sent CLOSE reason SHUTDOWN (2); got CLOSE REPLY reason %u; SPEC 11.2 "
			    "step 3 requires the reply to carry the same reason", r.u.close.reason);
	return CF_PASS;
}

static int c_close_tombstone(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p, r;
	cf_hdr(c, &p, MRP_OP_CLOSE);
	int got = 0;
	for (int i = 0; i < 3 && !got; i++) {
		cf_send(x->n, &p, -1);
		got = wait_close_reply(x, c, &r, x->n->timeout_ms);
	}
	if (!got)
		return skip(x, "the target does not close gracefully (see close.graceful)");
	cf_drain(x->n, 50, NULL, NULL);
	/* The reply was "lost": CLOSE again. */
	cf_send(x->n, &p, -1);
	if (!wait_close_reply(x, c, &r, x->n->timeout_ms))
		return fail(x, "sent CLOSE again after the connection ended by CLOSE; got no "
			    "CLOSE REPLY; SPEC 11.5 requires the tombstone to answer it");
	return CF_PASS;
}

static int c_close_unsolicited_reply(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p;
	cf_hdr(c, &p, MRP_OP_CLOSE);
	p.hdr.flags = MRP_F_REPLY;
	cf_send(x->n, &p, -1);
	static cf_rx rx;
	m_conn any = {.ci = c->ci, .any = 1};
	if (cf_wait(x->n, match_conn, &any, 200, &rx))
		return fail(x, "sent CLOSE with REPLY answering nothing; got %s; SPEC 11.2 requires "
			    "it dropped (STATE)", mrp_op_name(rx.pkt.hdr.opcode));
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "sent CLOSE with REPLY answering nothing; the connection ended; "
			    "SPEC 11.2 requires it dropped (STATE)");
	return CF_PASS;
}

static int c_reset_abort(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	mrp_pkt p;
	cf_hdr(c, &p, MRP_OP_RESET);
	p.u.close.reason = MRP_CLOSE_PROTOCOL;
	cf_send(x->n, &p, -1);
	static cf_rx rx;
	m_conn any = {.ci = c->ci, .any = 1};
	if (cf_wait(x->n, match_conn, &any, 200, &rx))
		return fail(x, "sent RESET; got %s; SPEC 11.3 requires a RESET never answered",
			    mrp_op_name(rx.pkt.hdr.opcode));
	if (cf_alive(x->n, c, 300))
		return fail(x, "sent RESET; the target still answers PROBEs on the connection; "
			    "SPEC 11.3 requires it ended at once");
	/* A late data packet hits the tombstone: no NAK UNKNOWN_CONN (11.5). */
	cf_data(c, &p, MRP_OP_WRITE, 0, 1, 0, 0, 0, NULL, 0);
	cf_send(x->n, &p, -1);
	if (cf_wait(x->n, match_nak_unknown, &c->ci, 200, &rx))
		return fail(x, "sent a WRITE after RESET; got NAK reason %u; SPEC 11.5 requires "
			    "the tombstone to drop it silently", rx.pkt.u.nak.reason);
	return CF_PASS;
}

/* ---- malformed datagrams (13.1) ---------------------------------------------------------- */

typedef struct bad {
	const char *what;
	uint8_t buf[128];
	size_t len;
} bad;

static size_t probe_bytes(cf_conn *c, uint8_t *buf)
{
	mrp_pkt p;
	cf_probe(c, &p, 0, 0);
	return (size_t)mrp_pkt_encode(buf, 128, &p);
}

static int malformed(cf_ctx *x, const char *counter, int kind)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	bad b[4];
	unsigned nb = 0;
	memset(b, 0, sizeof(b));
	switch (kind) {
	case 0: /* TRUNCATED */
		b[nb].what = "20 bytes";
		b[nb].len = probe_bytes(c, b[nb].buf) - 24;
		nb++;
		b[nb].what = "PROBE cut to 40 bytes";
		b[nb].len = probe_bytes(c, b[nb].buf) - 4;
		nb++;
		b[nb].what = "1 byte";
		b[nb].len = 1;
		b[nb].buf[0] = 1;
		nb++;
		break;
	case 1: /* VERSION */
		b[nb].what = "PROBE in version 2";
		b[nb].len = probe_bytes(c, b[nb].buf);
		b[nb].buf[0] = 2;
		nb++;
		b[nb].what = "PROBE in version 0";
		b[nb].len = probe_bytes(c, b[nb].buf);
		b[nb].buf[0] = 0;
		nb++;
		break;
	case 2: /* OPCODE */
		b[nb].what = "opcode 0x07 (the first unassigned)";
		b[nb].len = probe_bytes(c, b[nb].buf);
		b[nb].buf[1] = 0x07;
		nb++;
		b[nb].what = "opcode 0x7f";
		b[nb].len = probe_bytes(c, b[nb].buf);
		b[nb].buf[1] = 0x7f;
		nb++;
		break;
	case 3: /* FLAGS */
		b[nb].what = "PROBE with flag 0x0020";
		b[nb].len = probe_bytes(c, b[nb].buf);
		b[nb].buf[3] |= 0x20;
		nb++;
		b[nb].what = "PROBE with REPLY";
		b[nb].len = probe_bytes(c, b[nb].buf);
		b[nb].buf[3] |= 0x10;
		nb++;
		break;
	case 4: /* LENGTH */
		b[nb].what = "PROBE of 45 bytes";
		b[nb].len = probe_bytes(c, b[nb].buf) + 1;
		nb++;
		b[nb].what = "CLOSE of 36 bytes";
		{
			mrp_pkt p;
			cf_hdr(c, &p, MRP_OP_CLOSE);
			b[nb].len = (size_t)mrp_pkt_encode(b[nb].buf, 128, &p) + 4;
		}
		nb++;
		break;
	case 5: /* RANGE */
		b[nb].what = "CLOSE with reason 9";
		{
			mrp_pkt p;
			cf_hdr(c, &p, MRP_OP_CLOSE);
			b[nb].len = (size_t)mrp_pkt_encode(b[nb].buf, 128, &p);
			b[nb].buf[29] = 9;
		}
		nb++;
		b[nb].what = "PROBE with src_conn_id 0";
		b[nb].len = probe_bytes(c, b[nb].buf);
		memset(b[nb].buf + 12, 0, 4);
		nb++;
		break;
	case 6: /* RESERVED */
		b[nb].what = "PROBE with reserved bytes 32-35 nonzero";
		b[nb].len = probe_bytes(c, b[nb].buf);
		b[nb].buf[35] = 1;
		nb++;
		b[nb].what = "RESET with reserved bytes 30-31 nonzero";
		{
			mrp_pkt p;
			cf_hdr(c, &p, MRP_OP_RESET);
			b[nb].len = (size_t)mrp_pkt_encode(b[nb].buf, 128, &p);
			b[nb].buf[31] = 1;
		}
		nb++;
		break;
	}
	long long k0 = drop_count(x, counter);
	for (unsigned i = 0; i < nb; i++)
		cf_send_raw(x->n, -1, NULL, b[i].buf, b[i].len, -1);
	static cf_rx rx;
	m_conn any = {.ci = c->ci, .any = 1};
	if (cf_wait(x->n, match_conn, &any, 200, &rx))
		return fail(x, "sent malformed datagrams (%s...); got %s; SPEC 13.1 requires them "
			    "dropped without an answer", b[0].what, mrp_op_name(rx.pkt.hdr.opcode));
	if (!cf_alive(x->n, c, x->n->timeout_ms * 2))
		return fail(x, "sent malformed datagrams (%s...); the target no longer answers "
			    "PROBEs on the connection; SPEC 13.1 requires them dropped with no "
			    "state change", b[0].what);
	long long k1 = drop_count(x, counter);
	if (k0 >= 0 && k1 >= 0 && k1 - k0 < (long long)nb) {
		char list[512] = "";
		for (unsigned i = 0; i < nb; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 i ? "; " : "", b[i].what);
		return fail(x, "sent %u datagrams (%s); the target's %s counter grew %lld; SPEC "
			    "13.1/13.3 require each counted %s", nb, list, counter, k1 - k0,
			    counter);
	}
	if (k0 < 0)
		snprintf(x->msg, sizeof(x->msg), "liveness only (no --status-cmd)");
	return CF_PASS;
}

static int c_mal_truncated(cf_ctx *x) { return malformed(x, "TRUNCATED", 0); }
static int c_mal_version(cf_ctx *x) { return malformed(x, "VERSION", 1); }
static int c_mal_opcode(cf_ctx *x) { return malformed(x, "OPCODE", 2); }
static int c_mal_flags(cf_ctx *x) { return malformed(x, "FLAGS", 3); }
static int c_mal_length(cf_ctx *x) { return malformed(x, "LENGTH", 4); }
static int c_mal_range(cf_ctx *x) { return malformed(x, "RANGE", 5); }
static int c_mal_reserved(cf_ctx *x) { return malformed(x, "RESERVED", 6); }

/* ---- the target as initiator ------------------------------------------------------------- */

typedef struct accside {
	int state; /* 0 not run, 1 ran */
	int got_connect, retry_ok, confirmed;
	char connect_msg[512], retry_msg[512], confirm_msg[512];
} accside;
static accside acc;
static uint32_t seen_ci[32]; /* CONNECTs of the target's earlier attempts */
static unsigned nseen_ci;

static int match_connect(const cf_rx *rx, void *ud)
{
	(void)ud;
	return rx->len >= MRP_HDR_LEN && rx->pkt.hdr.opcode == MRP_OP_CONNECT;
}

static pid_t spawn(const char *cmd);

static void trigger(cf_ctx *x)
{
	char cmd[1024], addr[80];
	cf_sa_str(&x->n->local, addr, sizeof(addr));
	size_t o = 0;
	for (const char *s = x->trigger_cmd; *s && o + 64 < sizeof(cmd); s++) {
		if (s[0] == '%' && s[1] == 'a') {
			o += (size_t)snprintf(cmd + o, sizeof(cmd) - o, "%s", addr);
			s++;
		} else {
			cmd[o++] = *s;
		}
	}
	cmd[o] = 0;
	x->trigger_pid = spawn(cmd);
}

static void acceptor_run(cf_ctx *x)
{
	if (acc.state)
		return;
	acc.state = 1;
	trigger(x);
	static cf_rx rx;
	if (!cf_wait(x->n, match_connect, NULL, 5000, &rx)) {
		snprintf(acc.connect_msg, sizeof(acc.connect_msg),
			 "ran the trigger command; got no CONNECT within 5 s");
		return;
	}
	cf_sa from = rx.from;
	mrp_pkt cp = rx.pkt;
	const mrp_hs *h = &cp.u.hs;
	if (rx.rv < 0 || cp.hdr.dst_conn_id != 0 || cp.hdr.src_conn_id == 0 ||
	    cp.hdr.version < h->min_version || cp.hdr.version > h->max_version ||
	    h->hs_token == 0) {
		snprintf(acc.connect_msg, sizeof(acc.connect_msg),
			 "got CONNECT (decode %zd) dst %08x src %08x version %u range %u-%u "
			 "hs_token %llx; SPEC 9.2 requires a valid CONNECT: dst 0, src and hs_token "
			 "nonzero, version in range", rx.rv, cp.hdr.dst_conn_id,
			 cp.hdr.src_conn_id, cp.hdr.version, h->min_version, h->max_version,
			 (unsigned long long)h->hs_token);
		return;
	}
	acc.got_connect = 1;
	if (nseen_ci < 32)
		seen_ci[nseen_ci++] = cp.hdr.src_conn_id;
	/* 9.7: answer RETRY if it follows RETRYs; the next CONNECT carries the
	 * cookie and is otherwise the same. */
	if (h->caps & MRP_CAP_RETRY) {
		uint64_t cookie = cf_rand64();
		mrp_pkt r;
		memset(&r, 0, sizeof(r));
		r.hdr.version = 1;
		r.hdr.opcode = MRP_OP_RETRY;
		r.hdr.dst_conn_id = cp.hdr.src_conn_id;
		r.hdr.token = h->hs_token;
		r.u.retry.cookie = cookie;
		r.u.retry.service_id = h->service_id;
		uint8_t buf[64];
		ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &r);
		cf_send_raw(x->n, -1, &from, buf, (size_t)len, -1);
		int ok = 0;
		uint64_t end = cf_now_ns() + 2000000000ull;
		while (!ok && cf_now_ns() < end && cf_wait(x->n, match_connect, NULL, 2000, &rx)) {
			if (rx.rv < 0 || rx.pkt.hdr.src_conn_id != cp.hdr.src_conn_id)
				continue;
			if (rx.pkt.hdr.token != cookie) /* a retransmission sent before it */
				continue;
			ok = 1;
			if (rx.pkt.u.hs.hs_token != h->hs_token ||
			    rx.pkt.u.hs.instance_id != h->instance_id ||
			    rx.pkt.u.hs.service_id != h->service_id) {
				snprintf(acc.retry_msg, sizeof(acc.retry_msg),
					 "after RETRY the CONNECT with the cookie changed hs_token, "
					 "instance_id or service_id; SPEC 9.7 requires it otherwise "
					 "unchanged");
				ok = 0;
				break;
			}
		}
		if (ok)
			acc.retry_ok = 1;
		else if (!acc.retry_msg[0])
			snprintf(acc.retry_msg, sizeof(acc.retry_msg),
				 "sent RETRY cookie %016llx; got no CONNECT with the cookie in token; "
				 "SPEC 9.7 requires the initiator to resend at once with it",
				 (unsigned long long)cookie);
		if (!ok) {
			snprintf(acc.confirm_msg, sizeof(acc.confirm_msg),
				 "-the handshake did not get past RETRY (see acceptor.retry)");
			return;
		}
		cp = rx.pkt;
		from = rx.from;
	} else {
		snprintf(acc.retry_msg, sizeof(acc.retry_msg), "-the CONNECT has no RETRY cap");
	}
	/* ACCEPT and expect the confirming packet (9.3). */
	cf_conn cc = {0};
	cc.ci = cf_rand32();
	cc.ca = cp.hdr.src_conn_id;
	cc.ti = cf_rand64();
	cc.ta = cp.u.hs.hs_token;
	mrp_pkt a;
	cf_hs_opts o;
	cf_hs_defaults(&o, cp.u.hs.service_id);
	cf_build_connect(x->n, &a, 0, cc.ti, 0, &o);
	a.hdr.opcode = MRP_OP_ACCEPT;
	a.hdr.dst_conn_id = cc.ca;
	a.hdr.src_conn_id = cc.ci;
	a.hdr.token = cc.ta;
	a.u.hs.mtu = cp.u.hs.mtu < o.mtu ? cp.u.hs.mtu : o.mtu;
	a.u.hs.max_streams = cp.u.hs.max_streams < o.max_streams ? cp.u.hs.max_streams : o.max_streams;
	a.u.hs.max_paths = cp.u.hs.max_paths < o.max_paths ? cp.u.hs.max_paths : o.max_paths;
	a.u.hs.caps = cp.u.hs.caps & MRP_CAP_IMM; /* RETRY is for CONNECTs */
	uint8_t buf[512];
	ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &a);
	if (len < 0) {
		snprintf(acc.confirm_msg, sizeof(acc.confirm_msg), "could not encode ACCEPT");
		return;
	}
	cf_send_raw(x->n, -1, &from, buf, (size_t)len, -1);
	uint64_t end = cf_now_ns() + 2000000000ull;
	while (cf_now_ns() < end && cf_wait(x->n, match_any_answer, NULL, 2000, &rx)) {
		if (rx.rv < 0 || rx.pkt.hdr.dst_conn_id != cc.ci)
			continue;
		uint8_t op = rx.pkt.hdr.opcode;
		if ((op == MRP_OP_PROBE || mrp_op_is_data(op)) && rx.pkt.hdr.token == cc.ti &&
		    rx.pkt.hdr.src_conn_id == cc.ca) {
			acc.confirmed = 1;
			break;
		}
	}
	if (!acc.confirmed)
		snprintf(acc.confirm_msg, sizeof(acc.confirm_msg),
			 "sent ACCEPT (token Ti, hs_token Ta); got no PROBE or data with token Ta "
			 "within 2 s; SPEC 9.3 requires the initiator to confirm promptly");
	/* Done with it: end the connection so the target's command ends. */
	mrp_pkt rs;
	cf_hdr(&cc, &rs, MRP_OP_RESET);
	rs.u.close.reason = MRP_CLOSE_APP_EXIT;
	len = mrp_pkt_encode(buf, sizeof(buf), &rs);
	cf_sa to = from;
	cf_sa_set_port(&to, cp.u.hs.service_port);
	cf_send_raw(x->n, -1, &to, buf, (size_t)len, -1);
}

static int c_acc_connect(cf_ctx *x)
{
	if (!x->trigger_cmd)
		return skip(x, "no --trigger command makes the target connect to us");
	acceptor_run(x);
	if (!acc.got_connect)
		return fail(x, "%s", acc.connect_msg);
	return CF_PASS;
}

static int c_acc_retry(cf_ctx *x)
{
	if (!x->trigger_cmd)
		return skip(x, "no --trigger command makes the target connect to us");
	acceptor_run(x);
	if (!acc.got_connect)
		return skip(x, "no valid CONNECT (see acceptor.connect)");
	if (acc.retry_msg[0] == '-')
		return skip(x, "%s", acc.retry_msg + 1);
	if (!acc.retry_ok)
		return fail(x, "%s", acc.retry_msg);
	return CF_PASS;
}

static int c_acc_confirm(cf_ctx *x)
{
	if (!x->trigger_cmd)
		return skip(x, "no --trigger command makes the target connect to us");
	acceptor_run(x);
	if (!acc.got_connect)
		return skip(x, "no valid CONNECT (see acceptor.connect)");
	if (acc.confirm_msg[0] == '-')
		return skip(x, "%s", acc.confirm_msg + 1);
	if (!acc.confirmed)
		return fail(x, "%s", acc.confirm_msg);
	return CF_PASS;
}

/* CLOSE while the target still has a message in flight to us: it replies
 * only once that message has completed (SPEC 11.2 step 3). The ECHO
 * service answers an ECHO request on stream 0 with a SEND; the tool holds
 * its ACKs, so that SEND stays in flight until the tool lets it complete. */
#define T_ECHO_REQ 5
#define T_ECHO_REP 6

static int c_close_drain(cf_ctx *x)
{
	perf pf;
	memset(&pf, 0, sizeof(pf));
	OPEN(pf.c, x->svc, NULL);
	cf_conn *c = pf.c;
	c->no_ack = 1;
	uint32_t rx0 = c->data_rx;
	ctl_send(x, &pf, T_ECHO_REQ, 7, 0x1234);
	uint64_t v[3];
	if (!ctl_wait(x, &pf, T_ECHO_REP, v)) {
		c->no_ack = 0;
		return skip(x, "service %08x sent no ECHO reply (a SEND on stream 0) to an ECHO "
			    "request: it is not the reference daemon's ECHO", x->svc);
	}
	/* The reply is not acknowledged: CLOSE now. */
	mrp_pkt p, r;
	cf_hdr(c, &p, MRP_OP_CLOSE);
	p.u.close.reason = MRP_CLOSE_NORMAL;
	cf_send(x->n, &p, -1);
	int early = wait_close_reply(x, c, &r, 150);
	uint32_t retx = c->data_rx - rx0;
	if (early) {
		c->no_ack = 0;
		return fail(x, "received the target's SEND (ECHO reply) without acknowledging it, "
			    "then sent CLOSE; got CLOSE REPLY while that SEND was still unacknowledged "
			    "(%u copies of it received); SPEC 11.2 step 3 requires the reply only "
			    "when every message the target posted has completed", retx);
	}
	/* Let the SEND complete: acknowledge its next copy (the background
	 * peer ACKs it with all it received), and CLOSE again (a duplicate
	 * CLOSE while the target finishes is ignored; it replies when done). */
	c->no_ack = 0;
	int got = 0;
	for (int i = 0; i < 4 && !got; i++) {
		got = wait_close_reply(x, c, &r, x->n->timeout_ms);
		if (!got)
			cf_send(x->n, &p, -1);
	}
	if (c->resets_rx)
		return fail(x, "held the ACKs of the target's SEND for 150 ms after a CLOSE, then "
			    "acknowledged it; the target RESET the connection; SPEC 11.2 requires it "
			    "to finish the SEND and reply to the CLOSE");
	if (!got)
		return fail(x, "after the target's SEND completed (acknowledged), got no CLOSE "
			    "REPLY to our CLOSE; SPEC 11.2 step 3 requires one");
	snprintf(x->msg, sizeof(x->msg), "no reply while the SEND was in flight (%u copies); "
		 "reply after its ACK", retx);
	return CF_PASS;
}

/* ---- planes (9.5) ----------------------------------------------------------------------- */

/* The planes the target announces (its ACCEPT's addresses), from a
 * handshake without MULTIPLANE that is then RESET. */
static int target_planes(cf_ctx *x, uint32_t *mask)
{
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	static cf_rx a;
	cf_conn *c;
	int op = cf_handshake(x->n, &o, &a, &c);
	if (op != MRP_OP_ACCEPT || !c)
		return 0;
	c->established = 1; /* so that it is RESET */
	*mask = 0;
	for (unsigned i = 0; i < a.pkt.u.hs.num_addrs; i++)
		*mask |= 1u << (a.pkt.u.hs.addrs[i].plane % MRP_MAX_ADDRS);
	return 1;
}

static unsigned lowest(uint32_t mask, int set)
{
	unsigned i = 0;
	while (i < MRP_MAX_ADDRS && (int)(mask >> i & 1) != set)
		i++;
	return i;
}

static int c_plane_no_pair(cf_ctx *x)
{
	uint32_t mask;
	if (!target_planes(x, &mask))
		return skip(x, "cannot open a connection to service %08x", x->svc);
	unsigned q = lowest(mask, 0);
	if (q >= MRP_MAX_ADDRS)
		return skip(x, "the target announces all 16 planes");
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	o.caps |= MRP_CAP_MULTIPLANE;
	o.naddrs = 1;
	cf_sa_addr(&x->n->local, (uint8_t)q, &o.addrs[0]);
	static cf_rx a;
	cf_conn *c;
	int op = cf_handshake(x->n, &o, &a, &c);
	if (op == MRP_OP_ACCEPT && c)
		c->established = 1;
	if (op == MRP_OP_ACCEPT && !(a.pkt.u.hs.caps & MRP_CAP_MULTIPLANE))
		return skip(x, "the target does not negotiate MULTIPLANE");
	if (op != MRP_OP_REJECT || a.pkt.u.reject.reason != MRP_REJ_PARAM)
		return fail(x, "sent CONNECT with caps MULTIPLANE whose only address is on plane %u "
			    "(the target announces planes mask %04x); got %s reason %u; SPEC 9.5 and "
			    "9.4 rule 4 require REJECT PARAM: no usable address pair", q, mask,
			    op ? mrp_op_name((uint8_t)op) : "nothing",
			    op == MRP_OP_REJECT ? a.pkt.u.reject.reason : 0);
	return CF_PASS;
}

static int c_plane_paths(cf_ctx *x)
{
	if (!x->has_plane2)
		return skip(x, "no --plane-addr gives the tool a second address");
	uint32_t mask;
	if (!target_planes(x, &mask))
		return skip(x, "cannot open a connection to service %08x", x->svc);
	unsigned p0 = lowest(mask, 1), q = lowest(mask, 0);
	if (p0 >= MRP_MAX_ADDRS || q >= MRP_MAX_ADDRS)
		return skip(x, "the target announces no plane, or all 16");
	/* Our second address, on our service port, announced on plane q,
	 * which the target does not have: nothing may reach it. */
	cf_sa b = x->plane2;
	cf_sa_set_port(&b, cf_sa_port(&x->n->local));
	char bs[80];
	cf_sa_str(&b, bs, sizeof(bs));
	int fd = socket(b.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, &b.sa, cf_sa_len(&b)) < 0) {
		if (fd >= 0)
			close(fd);
		return skip(x, "cannot bind %s", bs);
	}
	cf_hs_opts o;
	cf_hs_defaults(&o, x->svc);
	o.caps |= MRP_CAP_MULTIPLANE;
	o.naddrs = 2;
	cf_sa_addr(&x->n->local, (uint8_t)p0, &o.addrs[0]);
	cf_sa_addr(&b, (uint8_t)q, &o.addrs[1]);
	static cf_rx a;
	cf_conn *c;
	int op = cf_handshake(x->n, &o, &a, &c);
	int r = CF_PASS;
	if (op != MRP_OP_ACCEPT || !c) {
		r = fail(x, "sent CONNECT with caps MULTIPLANE, our address on plane %u (a plane of "
			 "the target's) and %s on plane %u; got %s reason %u; SPEC 9.5: a usable "
			 "pair exists (plane %u)", p0, bs, q, op ? mrp_op_name((uint8_t)op) : "nothing",
			 op == MRP_OP_REJECT ? a.pkt.u.reject.reason : 0, p0);
		goto out;
	}
	if (!(a.pkt.u.hs.caps & MRP_CAP_MULTIPLANE)) {
		c->established = 1;
		r = skip(x, "the target does not negotiate MULTIPLANE");
		goto out;
	}
	if (!cf_confirm(x->n, c)) {
		c->established = 1;
		r = fail(x, "multiplane connection: no PROBE_ACK to our confirming PROBE on path 0; "
			 "SPEC 9.5 pairs our plane-%u address with the target's plane %u", p0, p0);
		goto out;
	}
	/* Make the target send: an ECHO round trip (if the service is ECHO)
	 * and a PROBE with ACK_REQ on every path. */
	perf pf;
	memset(&pf, 0, sizeof(pf));
	pf.c = c;
	ctl_send(x, &pf, T_ECHO_REQ, 9, 0);
	for (uint16_t i = 0; i < c->max_paths; i++) {
		mrp_pkt p;
		cf_probe(c, &p, i, 0);
		cf_send(x->n, &p, -1);
	}
	cf_drain(x->n, 300, NULL, NULL);
	unsigned stray = 0;
	uint8_t buf[2048];
	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		stray++;
	if (stray)
		r = fail(x, "announced our address on plane %u and %s on plane %u (the target has no "
			 "plane %u); got %u datagrams at %s; SPEC 9.5: addresses of different planes "
			 "are never paired", p0, bs, q, q, stray, bs);
out:
	close(fd);
	return r;
}

static int c_ecn_ect0(cf_ctx *x)
{
	perf pf;
	memset(&pf, 0, sizeof(pf));
	OPEN(pf.c, x->svc, NULL);
	ctl_send(x, &pf, T_ECHO_REQ, 3, 0);
	uint64_t v[3];
	if (!ctl_wait(x, &pf, T_ECHO_REP, v))
		return skip(x, "service %08x sent no ECHO reply: no data of the target to look at",
			    x->svc);
	if (pf.c->data_not_ect)
		return fail(x, "the target's ECHO reply: %u of %u data packets arrived neither "
			    "ECT(0) nor CE (IP TOS / traffic class); SPEC 2.4 requires data packets "
			    "sent with ECT(0)", pf.c->data_not_ect, pf.c->data_rx);
	return CF_PASS;
}

#define FLOOD 2000

static int c_noconn_rate_limit(cf_ctx *x)
{
	cf_conn fake = {0};
	fake.ci = cf_rand32();
	fake.ca = cf_rand32();
	fake.ta = cf_rand64();
	unsigned naks = 0;
	for (unsigned i = 0; i < FLOOD; i++) {
		mrp_pkt p;
		cf_data(&fake, &p, MRP_OP_WRITE, 0, 1, i, 0, 0, NULL, 0);
		cf_send(x->n, &p, -1);
		/* About 4 per ms: a burst well above the RECOMMENDED limit that
		 * neither socket buffers nor a slow target drop. */
		if (i % 8 == 7)
			naks += cf_drain(x->n, 2, match_nak_unknown, &fake.ci);
	}
	naks += cf_drain(x->n, 500, match_nak_unknown, &fake.ci);
	/* Let the target's answer budget for our address fill again. */
	cf_drain(x->n, 1100, NULL, NULL);
	/* 90 %: answers lost on the way back still show no limit. */
	if ((uint64_t)naks * 10 >= (uint64_t)FLOOD * 9)
		return fail(x, "sent %u data packets for an unknown connection in a burst; got %u NAK "
			    "UNKNOWN_CONN; SPEC 7.4 and 14.3 require these answers rate-limited "
			    "(RECOMMENDED: 100 per second per source)", FLOOD, naks);
	snprintf(x->msg, sizeof(x->msg), "%u NAKs for %u packets", naks, FLOOD);
	return CF_PASS;
}

static int c_wire_well_formed(cf_ctx *x)
{
	if (x->n->rx_total == 0)
		return skip(x, "nothing received from the target");
	if (x->n->rx_undecodable)
		return fail(x, "of %llu datagrams the target sent during the run, %llu did not pass "
			    "the codec (the first: %s); SPEC 12.5 requires senders to zero every "
			    "reserved field, unassigned flag and unused field, and every packet to "
			    "have its opcode's length and ranges",
			    (unsigned long long)x->n->rx_total,
			    (unsigned long long)x->n->rx_undecodable, x->n->first_bad);
	snprintf(x->msg, sizeof(x->msg), "%llu datagrams, all well-formed",
		 (unsigned long long)x->n->rx_total);
	return CF_PASS;
}

/* ---- the target as initiator: REJECT and RETRY limits --------------------------------------- */

static int match_new_connect(const cf_rx *rx, void *ud)
{
	(void)ud;
	if (rx->rv < 0 || rx->pkt.hdr.opcode != MRP_OP_CONNECT)
		return 0;
	for (unsigned i = 0; i < nseen_ci; i++)
		if (seen_ci[i] == rx->pkt.hdr.src_conn_id)
			return 0;
	return 1;
}

typedef struct same_connect {
	uint32_t ci;
	uint64_t token;
	int any_token;
} same_connect;

static int match_same_connect(const cf_rx *rx, void *ud)
{
	const same_connect *m = ud;
	return rx->rv >= 0 && rx->pkt.hdr.opcode == MRP_OP_CONNECT &&
	       rx->pkt.hdr.src_conn_id == m->ci && (m->any_token || rx->pkt.hdr.token == m->token);
}

/* Make the target connect to us once more; its first CONNECT in *rx. */
static int acc_session(cf_ctx *x, cf_rx *rx)
{
	cf_cases_cleanup(x);
	trigger(x);
	if (!cf_wait(x->n, match_new_connect, NULL, 5000, rx))
		return 0;
	if (nseen_ci < 32)
		seen_ci[nseen_ci++] = rx->pkt.hdr.src_conn_id;
	return 1;
}

static void acc_send(cf_ctx *x, const cf_sa *to, mrp_pkt *p)
{
	uint8_t buf[128];
	ssize_t len = mrp_pkt_encode(buf, sizeof(buf), p);
	if (len > 0)
		cf_send_raw(x->n, -1, to, buf, (size_t)len, -1);
}

static void acc_reject(cf_ctx *x, const cf_rx *cr, uint64_t token, uint8_t reason)
{
	mrp_pkt j;
	memset(&j, 0, sizeof(j));
	j.hdr.version = 1;
	j.hdr.opcode = MRP_OP_REJECT;
	j.hdr.dst_conn_id = cr->pkt.hdr.src_conn_id;
	j.hdr.token = token;
	j.u.reject.reason = reason;
	j.u.reject.min_version = j.u.reject.max_version = 1;
	j.u.reject.service_id = cr->pkt.u.hs.service_id;
	acc_send(x, &cr->from, &j);
}

static int c_acc_reject(cf_ctx *x)
{
	if (!x->trigger_cmd)
		return skip(x, "no --trigger command makes the target connect to us");
	static cf_rx cr, rx;
	if (!acc_session(x, &cr))
		return skip(x, "ran the trigger command; got no CONNECT within 5 s");
	acc_reject(x, &cr, cr.pkt.u.hs.hs_token, MRP_REJ_REFUSED);
	/* Copies sent before it arrived may still come (the first 100 ms),
	 * and one more from a target that was stalled and ran its
	 * retransmission timer before it read the REJECT; a target that
	 * ignores the REJECT goes on with its schedule (SPEC 9.3: 10
	 * transmissions over about 1 s, the interval doubling). */
	same_connect m = {cr.pkt.hdr.src_conn_id, 0, 1};
	cf_drain(x->n, 100, NULL, NULL);
	unsigned late = cf_drain(x->n, 1100, match_same_connect, &m);
	(void)rx;
	if (late >= 2)
		return fail(x, "answered the target's CONNECT (src %08x) with REJECT REFUSED (token "
			    "Ti, service id copied); got %u more copies of that CONNECT 0.1-1.2 s later; "
			    "SPEC 10.3 requires the REJECT accepted: the attempt fails, no more "
			    "CONNECTs", cr.pkt.hdr.src_conn_id, late);
	/* How the target's command took it (for the report: a trigger may
	 * return before the attempt ends, so this is no verdict). */
	int st = 0;
	pid_t w = 0;
	for (int i = 0; i < 40 && w == 0 && x->trigger_pid > 0; i++) {
		w = waitpid(x->trigger_pid, &st, WNOHANG);
		if (w == 0)
			cf_drain(x->n, 50, NULL, NULL);
	}
	if (w == x->trigger_pid) {
		x->trigger_pid = 0;
		snprintf(x->msg, sizeof(x->msg), "the trigger command exited with status %d",
			 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	return CF_PASS;
}

static int c_acc_reject_forged(cf_ctx *x)
{
	if (!x->trigger_cmd)
		return skip(x, "no --trigger command makes the target connect to us");
	static cf_rx cr, rx;
	if (!acc_session(x, &cr))
		return skip(x, "ran the trigger command; got no CONNECT within 5 s");
	/* A REJECT with a wrong token, and one with token 0 and reason VERSION
	 * whose range contains the CONNECT's version: both dropped (10.3). */
	acc_reject(x, &cr, cr.pkt.u.hs.hs_token ^ 0x100, MRP_REJ_REFUSED);
	acc_reject(x, &cr, 0, MRP_REJ_VERSION);
	/* Copies that crossed the REJECTs prove nothing: only one sent well
	 * after them does (the schedule of SPEC 9.3 has one at about 0.5 s). */
	cf_drain(x->n, 150, NULL, NULL);
	same_connect m = {cr.pkt.hdr.src_conn_id, 0, 1};
	int more = cf_wait(x->n, match_same_connect, &m, 1500, &rx);
	/* End the attempt. */
	acc_reject(x, &cr, cr.pkt.u.hs.hs_token, MRP_REJ_REFUSED);
	if (!more)
		return fail(x, "answered the target's CONNECT (src %08x) with a REJECT whose token "
			    "is not Ti and a REJECT VERSION with token 0 whose range holds the "
			    "CONNECT's version; the target stopped sending the CONNECT; SPEC 10.3 "
			    "requires both dropped (TOKEN) and the attempt to go on",
			    cr.pkt.hdr.src_conn_id);
	return CF_PASS;
}

static int c_acc_retry_limit(cf_ctx *x)
{
	if (!x->trigger_cmd)
		return skip(x, "no --trigger command makes the target connect to us");
	static cf_rx cr, rx;
	if (!acc_session(x, &cr))
		return skip(x, "ran the trigger command; got no CONNECT within 5 s");
	if (!(cr.pkt.u.hs.caps & MRP_CAP_RETRY)) {
		acc_reject(x, &cr, cr.pkt.u.hs.hs_token, MRP_REJ_REFUSED);
		return skip(x, "the target's CONNECT has no RETRY capability");
	}
	/* RETRY every CONNECT that carries our last cookie, up to 8 times. */
	unsigned followed = 0;
	uint64_t cookie = 0;
	for (unsigned i = 0; i < 8; i++) {
		mrp_pkt r;
		memset(&r, 0, sizeof(r));
		r.hdr.version = 1;
		r.hdr.opcode = MRP_OP_RETRY;
		r.hdr.dst_conn_id = cr.pkt.hdr.src_conn_id;
		r.hdr.token = cr.pkt.u.hs.hs_token;
		r.u.retry.cookie = cookie = cf_rand64();
		r.u.retry.service_id = cr.pkt.u.hs.service_id;
		acc_send(x, &cr.from, &r);
		same_connect m = {cr.pkt.hdr.src_conn_id, cookie, 0};
		if (!cf_wait(x->n, match_same_connect, &m, 700, &rx))
			break;
		followed++;
	}
	acc_reject(x, &cr, cr.pkt.u.hs.hs_token, MRP_REJ_REFUSED);
	if (followed == 0)
		return skip(x, "the target did not follow our first RETRY (see acceptor.retry)");
	if (followed >= 8)
		return fail(x, "sent 8 RETRYs, each with a new cookie, to one connection attempt; "
			    "the target followed all 8; SPEC 9.7 bounds the RETRYs an attempt "
			    "follows (RECOMMENDED 3), then drops them (STATE)");
	snprintf(x->msg, sizeof(x->msg), "followed %u RETRYs, then dropped them%s", followed,
		 followed > 3 ? " (more than the RECOMMENDED 3)" : "");
	return CF_PASS;
}

typedef struct m_reset {
	uint32_t ci;
} m_reset;

static int match_reset_or_confirm(const cf_rx *rx, void *ud)
{
	const m_reset *m = ud;
	return rx->rv >= 0 && rx->pkt.hdr.dst_conn_id == m->ci &&
	       (rx->pkt.hdr.opcode == MRP_OP_RESET || rx->pkt.hdr.opcode == MRP_OP_PROBE ||
		mrp_op_is_data(rx->pkt.hdr.opcode));
}

/* SPEC 9.3: an ACCEPT that fails the initiator's checks (here: a
 * service_id other than the CONNECT's) is answered by RESET PROTOCOL and
 * the attempt fails; the connection is never confirmed. */
static int c_acc_bad_accept(cf_ctx *x)
{
	if (!x->trigger_cmd)
		return skip(x, "no --trigger command makes the target connect to us");
	static cf_rx cr, rx;
	if (!acc_session(x, &cr))
		return skip(x, "ran the trigger command; got no CONNECT within 5 s");
	const mrp_hs *h = &cr.pkt.u.hs;
	uint32_t ci = cf_rand32();
	uint64_t ti = cf_rand64();
	cf_hs_opts o;
	cf_hs_defaults(&o, h->service_id ^ 1);
	mrp_pkt a;
	cf_build_connect(x->n, &a, 0, ti, 0, &o);
	a.hdr.version = 1;
	a.hdr.opcode = MRP_OP_ACCEPT;
	a.hdr.dst_conn_id = cr.pkt.hdr.src_conn_id;
	a.hdr.src_conn_id = ci;
	a.hdr.token = h->hs_token;
	a.u.hs.min_version = a.u.hs.max_version = 1;
	a.u.hs.mtu = h->mtu < o.mtu ? h->mtu : o.mtu;
	a.u.hs.max_streams = h->max_streams < o.max_streams ? h->max_streams : o.max_streams;
	a.u.hs.max_paths = h->max_paths < o.max_paths ? h->max_paths : o.max_paths;
	a.u.hs.caps = h->caps & MRP_CAP_IMM;
	acc_send(x, &cr.from, &a);
	m_reset m = {ci};
	int got = cf_wait(x->n, match_reset_or_confirm, &m, 2000, &rx);
	/* end the attempt either way */
	acc_reject(x, &cr, h->hs_token, MRP_REJ_REFUSED);
	if (!got)
		return fail(x, "answered the target's CONNECT (service %08x) with an ACCEPT naming "
			    "service %08x; got nothing within 2 s; SPEC 9.3 requires RESET PROTOCOL "
			    "(the ACCEPT fails the initiator's checks)", h->service_id,
			    h->service_id ^ 1);
	if (rx.pkt.hdr.opcode != MRP_OP_RESET || rx.pkt.u.close.reason != MRP_CLOSE_PROTOCOL ||
	    rx.pkt.hdr.token != ti || rx.pkt.hdr.src_conn_id != cr.pkt.hdr.src_conn_id)
		return fail(x, "answered the target's CONNECT (service %08x) with an ACCEPT naming "
			    "service %08x; got %s reason %u token %016llx; SPEC 9.3 requires RESET "
			    "PROTOCOL with our token (%016llx), and no confirmation", h->service_id,
			    h->service_id ^ 1, mrp_op_name(rx.pkt.hdr.opcode),
			    rx.pkt.hdr.opcode == MRP_OP_RESET ? rx.pkt.u.close.reason : 0,
			    (unsigned long long)rx.pkt.hdr.token, (unsigned long long)ti);
	return CF_PASS;
}

/* ---- the target ends connections on its own (SPEC 8.1, 9.6, 11.2-11.4) --------------- */

static const char *close_reason_name(unsigned r)
{
	static const char *names[] = {"NORMAL", "APP_EXIT", "SHUTDOWN", "PEER_RESTART",
				      "RETRY_EXCEEDED", "PROTOCOL"};
	return r <= MRP_CLOSE_MAX ? names[r] : "?";
}

/* Run cmd through /bin/sh in the background, its output to /dev/null. */
static pid_t spawn(const char *cmd)
{
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0) {
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static unsigned ms_since(uint64_t t0)
{
	return (unsigned)((cf_now_ns() - t0) / 1000000ull);
}

/* SPEC 8.1 and 11.3: a peer that stops answering (no ACK, no PROBE_ACK,
 * nothing) exhausts the target's retry budget for the data it sent, and
 * the target resets the connection with reason RETRY_EXCEEDED. The data is
 * the ECHO service's reply to an ECHO request (a SEND on stream 0). */
static int c_reset_retry_exceeded(cf_ctx *x)
{
	perf pf;
	memset(&pf, 0, sizeof(pf));
	OPEN(pf.c, x->svc, NULL);
	cf_conn *c = pf.c;
	c->silent = 1;
	uint32_t rx0 = c->data_rx, pr0 = c->probes_rx;
	ctl_send(x, &pf, T_ECHO_REQ, 9, 0x5678);
	uint64_t v[3];
	if (!ctl_wait(x, &pf, T_ECHO_REP, v))
		return skip(x, "service %08x sent no ECHO reply (a SEND on stream 0) to an ECHO "
			    "request: it is not the reference daemon's ECHO", x->svc);
	/* From now on the tool answers nothing on the connection. */
	uint64_t t0 = cf_now_ns();
	while (!c->resets_rx && !c->closes_rx && ms_since(t0) < x->end_wait_ms)
		cf_drain(x->n, 10, NULL, NULL);
	unsigned ms = ms_since(t0);
	unsigned copies = c->data_rx - rx0, probes = c->probes_rx - pr0;
	if (!c->resets_rx && !c->closes_rx)
		return fail(x, "received the target's SEND (ECHO reply), then answered nothing (no "
			    "ACK, PROBE_ACK or CLOSE reply) for %u ms (--end-wait): got %u copies of "
			    "the SEND and %u PROBEs, no RESET; SPEC 8.1 and 11.3 require a RESET with "
			    "reason RETRY_EXCEEDED once the retry budget (RECOMMENDED 8 "
			    "retransmissions) is exhausted", ms, copies, probes);
	if (!c->resets_rx)
		return fail(x, "answered nothing for %u ms after the target's SEND; got CLOSE reason "
			    "%s (%u), not RESET; SPEC 11.3 requires RESET RETRY_EXCEEDED (nothing "
			    "the peer does not acknowledge can end gracefully)", ms,
			    close_reason_name(c->last_close_reason), c->last_close_reason);
	if (copies < 2 && probes == 0)
		return fail(x, "got RESET %u ms after the target's SEND, which it never "
			    "retransmitted or probed for; SPEC 8.1 requires the retry budget spent "
			    "first", ms);
	if (c->last_reset_reason != MRP_CLOSE_RETRY_EXCEEDED)
		return fail(x, "answered nothing after the target's SEND; got RESET reason %s (%u) "
			    "%u ms later, after %u copies of the SEND and %u PROBEs; SPEC 11.3 and 11.4 "
			    "require reason RETRY_EXCEEDED (4)",
			    close_reason_name(c->last_reset_reason), c->last_reset_reason, ms,
			    copies, probes);
	snprintf(x->msg, sizeof(x->msg), "RESET RETRY_EXCEEDED %u ms after the SEND (%u copies, "
		 "%u PROBEs)", ms, copies, probes);
	return CF_PASS;
}

/* SPEC 5.4 and 7.3: a receiver that NAKs every copy of a message RNR
 * (while it answers PROBEs: its paths work) exhausts the sender's RNR retry
 * count (RECOMMENDED 7), and the sender resets the connection with
 * RETRY_EXCEEDED. The message is the ECHO service's reply. */
static int c_reset_rnr_exceeded(cf_ctx *x)
{
	perf pf;
	memset(&pf, 0, sizeof(pf));
	OPEN(pf.c, x->svc, NULL);
	cf_conn *c = pf.c;
	c->rnr_nak = 1;
	uint32_t rx0 = c->data_rx;
	ctl_send(x, &pf, T_ECHO_REQ, 11, 0x9abc);
	uint64_t v[3];
	if (!ctl_wait(x, &pf, T_ECHO_REP, v))
		return skip(x, "service %08x sent no ECHO reply (a SEND on stream 0) to an ECHO "
			    "request: it is not the reference daemon's ECHO", x->svc);
	uint64_t t0 = cf_now_ns();
	while (!c->resets_rx && !c->closes_rx && ms_since(t0) < x->end_wait_ms)
		cf_drain(x->n, 10, NULL, NULL);
	unsigned ms = ms_since(t0), copies = c->data_rx - rx0;
	if (!c->resets_rx && !c->closes_rx)
		return fail(x, "NAKed every copy of the target's SEND (ECHO reply) RNR, answering its "
			    "PROBEs: got %u copies in %u ms (--end-wait), no RESET; SPEC 5.4 requires "
			    "a RESET with reason RETRY_EXCEEDED once the RNR retries (RECOMMENDED 7) "
			    "are spent", copies, ms);
	if (!c->resets_rx)
		return fail(x, "NAKed every copy of the target's SEND RNR; got CLOSE reason %s (%u) "
			    "%u ms later, not RESET; SPEC 5.4 requires RESET RETRY_EXCEEDED",
			    close_reason_name(c->last_close_reason), c->last_close_reason, ms);
	if (copies < 2)
		return fail(x, "NAKed the target's SEND RNR once; got RESET %u ms later without a "
			    "retry; SPEC 5.4 and 7.3 make RNR not fatal: the sender retries", ms);
	if (c->last_reset_reason != MRP_CLOSE_RETRY_EXCEEDED)
		return fail(x, "NAKed every copy of the target's SEND RNR; got RESET reason %s (%u) "
			    "%u ms later, after %u copies; SPEC 5.4 and 11.4 require reason "
			    "RETRY_EXCEEDED (4)", close_reason_name(c->last_reset_reason),
			    c->last_reset_reason, ms, copies);
	snprintf(x->msg, sizeof(x->msg), "RESET RETRY_EXCEEDED %u ms after the SEND (%u copies "
		 "NAKed RNR)", ms, copies);
	return CF_PASS;
}

/* SPEC 8.1: "or no path of the connection has worked for a configured
 * time": an idle connection whose peer goes silent (answers none of the
 * target's keep-alive PROBEs) is reset with RETRY_EXCEEDED too, within
 * that time (--end-wait), so that a peer that vanished costs nothing for
 * ever. */
static int c_reset_dead_peer(cf_ctx *x)
{
	cf_conn *c;
	OPEN(c, x->svc, NULL);
	c->silent = 1;
	uint32_t pr0 = c->probes_rx;
	uint64_t t0 = cf_now_ns();
	while (!c->resets_rx && !c->closes_rx && ms_since(t0) < x->end_wait_ms)
		cf_drain(x->n, 10, NULL, NULL);
	unsigned ms = ms_since(t0), probes = c->probes_rx - pr0;
	if (!c->resets_rx && !c->closes_rx)
		return fail(x, "opened an idle connection, then answered nothing on it: got %u "
			    "PROBEs in %u ms (--end-wait), no RESET; SPEC 8.1 requires a RESET with "
			    "reason RETRY_EXCEEDED once no path of the connection has worked for a "
			    "configured time", probes, ms);
	if (!c->resets_rx)
		return fail(x, "answered nothing on an idle connection; got CLOSE reason %s (%u) "
			    "%u ms later, not RESET; SPEC 8.1 and 11.3 require RESET RETRY_EXCEEDED",
			    close_reason_name(c->last_close_reason), c->last_close_reason, ms);
	if (probes == 0)
		return fail(x, "answered nothing on an idle connection; got RESET %u ms later "
			    "without a PROBE before it; SPEC 8.1 requires the paths probed (and "
			    "found failed) first", ms);
	if (c->last_reset_reason != MRP_CLOSE_RETRY_EXCEEDED)
		return fail(x, "answered nothing on an idle connection; got RESET reason %s (%u) "
			    "%u ms later, after %u PROBEs; SPEC 8.1 and 11.4 require reason "
			    "RETRY_EXCEEDED (4)", close_reason_name(c->last_reset_reason),
			    c->last_reset_reason, ms, probes);
	snprintf(x->msg, sizeof(x->msg), "RESET RETRY_EXCEEDED %u ms after the peer went silent "
		 "(%u PROBEs)", ms, probes);
	return CF_PASS;
}

/* SPEC 9.6: an authenticated handshake of ours with a new instance id
 * claims that we restarted. The target challenges the old instance's
 * connections with PROBEs (ACK_REQ) carrying our token; one we answer
 * lives on, one we do not answer ends within the challenge timeout, with
 * no RESET. */
static void new_instance(cf_net *n)
{
	uint64_t old = n->inst;
	do
		n->inst = cf_rand64();
	while (n->inst == old);
}

static int c_restart_challenge(cf_ctx *x)
{
	cf_conn *a, *b;
	OPEN(a, x->svc, NULL);
	uint32_t ca = a->ci, pr0 = a->probes_rx;
	new_instance(x->n);
	uint64_t t0 = cf_now_ns();
	OPEN(b, x->svc, NULL);
	a = cf_conn_find(x->n, ca);
	if (!a)
		return fail(x, "lost the first connection's state (internal)");
	while (a->probes_rx == pr0 && ms_since(t0) < 2 * x->n->timeout_ms)
		cf_drain(x->n, 10, NULL, NULL);
	if (a->probes_rx == pr0)
		return fail(x, "opened a connection, then another one with a new instance id; got no "
			    "PROBE (ACK_REQ) on the first within %u ms; SPEC 9.6 requires the target "
			    "to challenge the old instance's connections", 2 * x->n->timeout_ms);
	unsigned first = ms_since(t0);
	/* The background peer answered it; past the challenge timeout the
	 * connection must still be there. */
	cf_drain(x->n, x->challenge_wait_ms, NULL, NULL);
	if (a->resets_rx || a->closes_rx)
		return fail(x, "answered the challenge (PROBE %u ms after the new instance's CONNECT"
			    "); got %s; SPEC 9.6 requires the connection to go on",
			    first, a->resets_rx ? "RESET" : "CLOSE");
	if (!cf_alive(x->n, a, x->n->timeout_ms * 2))
		return fail(x, "answered the challenge (PROBE %u ms after the new instance's CONNECT"
			    "); %u ms later the connection answers no PROBE; SPEC 9.6 "
			    "requires an answered connection to go on", first, x->challenge_wait_ms);
	if (!cf_alive(x->n, b, x->n->timeout_ms * 2))
		return fail(x, "the new instance's connection answers no PROBE");
	snprintf(x->msg, sizeof(x->msg), "challenged %u ms after the new instance's CONNECT; "
		 "answered, alive %u ms later", first, x->challenge_wait_ms);
	return CF_PASS;
}

static int c_restart_unanswered(cf_ctx *x)
{
	cf_conn *a, *b;
	OPEN(a, x->svc, NULL);
	uint32_t ca = a->ci, pr0 = a->probes_rx;
	a->silent = 1;
	new_instance(x->n);
	uint64_t t0 = cf_now_ns();
	OPEN(b, x->svc, NULL);
	(void)b;
	a = cf_conn_find(x->n, ca);
	if (!a)
		return fail(x, "lost the first connection's state (internal)");
	/* Answer nothing on it: every packet with the target's token would
	 * answer the challenge. */
	uint64_t wait = x->challenge_wait_ms;
	while (ms_since(t0) < wait)
		cf_drain(x->n, 10, NULL, NULL);
	unsigned probes = a->probes_rx - pr0;
	if (probes == 0)
		return fail(x, "opened a connection, then another one with a new instance id; got no "
			    "PROBE (ACK_REQ) on the first in %u ms; SPEC 9.6 requires the target to "
			    "challenge the old instance's connections", x->challenge_wait_ms);
	if (a->resets_rx)
		return fail(x, "left the challenge of the old instance's connection unanswered (%u "
			    "PROBEs); got RESET reason %u; SPEC 9.6 requires it ended without RESET "
			    "(the new instance knows none of them)", probes, a->last_reset_reason);
	a->silent = 0;
	if (cf_alive(x->n, a, x->n->timeout_ms * 2))
		return fail(x, "left the challenge of the old instance's connection unanswered (%u "
			    "PROBEs); %u ms after the new instance's handshake it still answers a "
			    "PROBE; SPEC 9.6 requires it ended when the challenge times out "
			    "(RECOMMENDED 2.5 s; --challenge-wait)", probes, x->challenge_wait_ms);
	snprintf(x->msg, sizeof(x->msg), "%u PROBEs (the challenge's and path probes) "
		 "unanswered; ended within %u ms, no RESET", probes, x->challenge_wait_ms);
	return CF_PASS;
}

/* SPEC 11.3/11.4: an application of the target that goes away without
 * closing (--app-exit: its service, and a command that makes it exit) has
 * its connections closed or reset on its behalf with reason APP_EXIT. */
static int c_close_app_exit(cf_ctx *x)
{
	if (!x->app_exit_cmd)
		return skip(x, "no --app-exit names an application of the target and a command "
			    "that makes it exit");
	cf_conn *c;
	OPEN(c, x->app_svc, NULL);
	uint32_t ci = c->ci;
	x->app_pid = spawn(x->app_exit_cmd);
	uint64_t t0 = cf_now_ns();
	while (ms_since(t0) < x->end_wait_ms) {
		cf_drain(x->n, 10, NULL, NULL);
		c = cf_conn_find(x->n, ci);
		if (!c || c->closes_rx || c->resets_rx)
			break;
	}
	unsigned ms = ms_since(t0);
	if (x->app_pid > 0 && waitpid(x->app_pid, NULL, WNOHANG) == x->app_pid)
		x->app_pid = 0;
	if (!c || (!c->closes_rx && !c->resets_rx))
		return fail(x, "connected to service %08x, then ran the --app-exit command; got "
			    "neither CLOSE nor RESET within %u ms (--end-wait); SPEC 11.3 and 11.4 "
			    "require the endpoint to close or reset the application's connections, "
			    "reason APP_EXIT", x->app_svc, x->end_wait_ms);
	unsigned r = c->closes_rx ? c->last_close_reason : c->last_reset_reason;
	if (r != MRP_CLOSE_APP_EXIT)
		return fail(x, "connected to service %08x, then ran the --app-exit command; got %s "
			    "reason %s (%u) %u ms later; SPEC 11.3 and 11.4 require reason APP_EXIT "
			    "(1)", x->app_svc, c->closes_rx ? "CLOSE" : "RESET",
			    close_reason_name(r), r, ms);
	snprintf(x->msg, sizeof(x->msg), "%s APP_EXIT %u ms after the command",
		 c->closes_rx ? "CLOSE" : "RESET", ms);
	return CF_PASS;
}

/* SPEC 11.3/11.4: the target stopping (--stop-cmd) ends its connections
 * with CLOSE or RESET, reason SHUTDOWN; and 11.2: a CLOSE of ours that
 * crosses the target's own CLOSE is answered with CLOSE REPLY (same
 * reason). One stop serves both cases: connection s1 answers the target's
 * CLOSE as a peer does, s2 crosses it with a CLOSE of its own. */
typedef struct stopside {
	int state; /* 0 not run, 1 ran */
	int skip;
	char msg[512];
	cf_conn s1, s2; /* copies, as they ended */
	int s2_closed;  /* we sent our CLOSE on s2 */
	unsigned ms1, ms2, ms_reply; /* when each end came, ms after the stop */
	int stop_rc;    /* the stop command's exit status, -1 still running */
} stopside;
static stopside stp;

#define SIMUL_REASON MRP_CLOSE_APP_EXIT

static void stop_run(cf_ctx *x)
{
	if (stp.state)
		return;
	stp.state = 1;
	stp.stop_rc = -1;
	if (!x->stop_cmd) {
		stp.skip = 1;
		snprintf(stp.msg, sizeof(stp.msg), "no --stop-cmd stops the target");
		return;
	}
	char e[256];
	cf_conn *s1 = cf_open(x->n, x->svc, NULL, e, sizeof(e));
	cf_conn *s2 = s1 ? cf_open(x->n, x->svc, NULL, e, sizeof(e)) : NULL;
	if (!s1 || !s2) {
		stp.skip = 1;
		snprintf(stp.msg, sizeof(stp.msg), "cannot open a connection: %s", e);
		return;
	}
	uint32_t c1 = s1->ci, c2 = s2->ci;
	s2->silent = 1;
	x->stop_pid = spawn(x->stop_cmd);
	uint64_t t0 = cf_now_ns();
	for (;;) {
		cf_drain(x->n, 10, NULL, NULL);
		s1 = cf_conn_find(x->n, c1);
		s2 = cf_conn_find(x->n, c2);
		if (!s1 || !s2)
			break;
		unsigned ms = ms_since(t0);
		if (!stp.ms1 && (s1->closes_rx || s1->resets_rx))
			stp.ms1 = ms ? ms : 1;
		if (!stp.ms2 && (s2->closes_rx || s2->resets_rx))
			stp.ms2 = ms ? ms : 1;
		if (s2->closes_rx && !s2->resets_rx && !stp.s2_closed) {
			/* Cross it: our CLOSE, as if we closed at the same time. */
			mrp_pkt p;
			cf_hdr(s2, &p, MRP_OP_CLOSE);
			p.u.close.reason = SIMUL_REASON;
			cf_send(x->n, &p, -1);
			stp.s2_closed = 1;
		}
		if (s2->close_replies_rx && !stp.ms_reply) {
			stp.ms_reply = ms ? ms : 1;
			/* and reply to its CLOSE, as the SPEC has us do */
			mrp_pkt p;
			cf_hdr(s2, &p, MRP_OP_CLOSE);
			p.hdr.flags = MRP_F_REPLY;
			p.u.close.reason = s2->last_close_reason;
			cf_send(x->n, &p, -1);
		}
		int done1 = stp.ms1, done2 = s2->resets_rx || stp.ms_reply;
		if ((done1 && done2) || ms >= x->end_wait_ms)
			break;
	}
	if (s1)
		stp.s1 = *s1;
	if (s2)
		stp.s2 = *s2;
	int st;
	if (waitpid(x->stop_pid, &st, WNOHANG) == x->stop_pid) {
		stp.stop_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		x->stop_pid = 0;
	}
}

static int c_close_shutdown(cf_ctx *x)
{
	stop_run(x);
	if (stp.skip)
		return skip(x, "%s", stp.msg);
	const cf_conn *c[2] = {&stp.s1, &stp.s2};
	const unsigned ms[2] = {stp.ms1, stp.ms2};
	for (int i = 0; i < 2; i++) {
		if (!ms[i])
			return fail(x, "ran the stop command (it %s) with two connections open; got "
				    "neither CLOSE nor RESET on connection %d within %u ms "
				    "(--end-wait); SPEC 11.3 and 11.4 require a stopping endpoint to end "
				    "them, gracefully (CLOSE) or not (RESET), with reason SHUTDOWN",
				    stp.stop_rc < 0 ? "is still running" : "has exited", i + 1,
				    x->end_wait_ms);
		unsigned r = c[i]->closes_rx ? c[i]->last_close_reason : c[i]->last_reset_reason;
		if (r != MRP_CLOSE_SHUTDOWN)
			return fail(x, "ran the stop command; got %s reason %s (%u) on connection %d "
				    "%u ms later; SPEC 11.3 and 11.4 require reason SHUTDOWN (2)",
				    c[i]->closes_rx ? "CLOSE" : "RESET", close_reason_name(r), r, i + 1,
				    ms[i]);
	}
	snprintf(x->msg, sizeof(x->msg), "%s SHUTDOWN %u ms after the stop command",
		 stp.s1.closes_rx ? "CLOSE" : "RESET", stp.ms1);
	return CF_PASS;
}

static int c_close_simultaneous(cf_ctx *x)
{
	stop_run(x);
	if (stp.skip)
		return skip(x, "%s", stp.msg);
	if (!stp.s2.closes_rx)
		return skip(x, "the stopping target sent no CLOSE to cross (%s; see close.shutdown)",
			    stp.s2.resets_rx ? "it sent RESET" : "nothing came");
	if (!stp.ms_reply)
		return fail(x, "the stopping target sent CLOSE; we crossed it with a CLOSE (reason "
			    "%s, no REPLY) of our own; got no CLOSE REPLY within %u ms (--end-wait)%s; "
			    "SPEC 11.2 requires each end to answer the other's CLOSE with REPLY when "
			    "both close at once", close_reason_name(SIMUL_REASON), x->end_wait_ms,
			    stp.s2.resets_rx ? " but a RESET" : "");
	if (stp.s2.last_reply_reason != SIMUL_REASON)
		return fail(x, "crossed the target's CLOSE with a CLOSE reason %s; got CLOSE REPLY "
			    "reason %s (%u); SPEC 11.2 step 3 requires the reply to carry the reason "
			    "of the CLOSE it answers", close_reason_name(SIMUL_REASON),
			    close_reason_name(stp.s2.last_reply_reason), stp.s2.last_reply_reason);
	snprintf(x->msg, sizeof(x->msg), "CLOSE crossed: REPLY %u ms after the stop command",
		 stp.ms_reply);
	return CF_PASS;
}

void cf_cases_cleanup(cf_ctx *x)
{
	if (x->app_pid > 0) {
		kill(x->app_pid, SIGTERM);
		waitpid(x->app_pid, NULL, 0);
		x->app_pid = 0;
	}
	if (x->stop_pid > 0) {
		kill(x->stop_pid, SIGTERM);
		waitpid(x->stop_pid, NULL, 0);
		x->stop_pid = 0;
	}
	if (x->trigger_pid <= 0)
		return;
	for (int i = 0; i < 100; i++) {
		if (waitpid(x->trigger_pid, NULL, WNOHANG) == x->trigger_pid) {
			x->trigger_pid = 0;
			return;
		}
		cf_drain(x->n, 50, NULL, NULL);
	}
	kill(x->trigger_pid, SIGTERM);
	waitpid(x->trigger_pid, NULL, 0);
	x->trigger_pid = 0;
}

const cf_case cf_cases[] = {
	{"handshake.accept", "9.4", "CONNECT to a service: ACCEPT with min of parameters, caps subset, service id copied; PROBE confirms", c_hs_accept},
	{"handshake.retry", "9.7", "CONNECT without cookie: RETRY (src 0, cookie, service id); the cookie then passes", c_hs_retry},
	{"handshake.retry-required", "9.7", "CONNECT without cookie and without caps RETRY: REJECT PARAM", c_hs_retry_required},
	{"version.reject", "12.3", "CONNECT in an unknown version: REJECT VERSION, 36 bytes, token 0, own range", c_version_reject},
	{"version.choose", "12.2", "CONNECT offering 1-200: ACCEPT in the highest common version", c_version_choose},
	{"version.range", "9.4", "CONNECT whose header version is outside its own range: REJECT PARAM", c_version_range},
	{"caps.unknown", "12.4", "unknown capability bits are ignored and never echoed", c_caps_unknown},
	{"reject.no-service", "10.2", "CONNECT to a service nobody listens on: REJECT NO_SERVICE", c_reject_no_service},
	{"reject.refused", "10.2", "CONNECT to a service the target refuses us by policy: REJECT REFUSED", c_reject_refused},
	{"reject.resources", "9.4", "half-open connections until the target is out of them: REJECT RESOURCES, then it accepts again", c_reject_resources},
	{"token.forged", "13.2", "PROBE, CLOSE, RESET with a forged token: dropped, counted TOKEN, no state change", c_token_forged},
	{"token.src-conn", "13.2", "RESET with a wrong src_conn_id: dropped, no state change", c_token_src_conn},
	{"noconn.nak", "7.4", "data for an unknown connection: NAK UNKNOWN_CONN (if sent) with the token echoed", c_noconn_nak},
	{"noconn.silent", "7.4", "PROBE, CLOSE, RESET for an unknown connection: no answer", c_noconn_silent},
	{"probe.answer", "8.3", "PROBE with ACK_REQ: PROBE_ACK echoing path, generation, seq and timestamp", c_probe_answer},
	{"probe.generation", "8.2", "PROBE of an unseen path generation is answered for it", c_probe_generation},
	{"probe.path-range", "8.2", "PROBE on path_id >= max_paths: dropped, counted RANGE", c_probe_path_range},
	{"sack.gap", "6.2", "PSNs 0,1,2,5: ACK next_psn 6, bitmap 0x39", c_sack_gap},
	{"sack.duplicate", "6.3", "a duplicate PSN is acknowledged at once, bitmap unchanged", c_sack_duplicate},
	{"sack.retransmit", "6.2", "a retransmission under a fresh PSN: the hole stays, the new PSN is set", c_sack_retransmit},
	{"sack.timer", "6.3", "in-order data without ACK_REQ is acknowledged by the ACK timer", c_ack_delayed},
	{"path.generation", "6.2", "data of a new path generation starts fresh receive state", c_path_generation},
	{"path.report", "2.3", "a re-ported path (new source port) is processed; ACKs go to the service port", c_path_report},
	{"plane.no-pair", "9.5", "CONNECT with MULTIPLANE whose addresses lie on no plane of the target: REJECT PARAM", c_plane_no_pair},
	{"plane.paths", "9.5", "MULTIPLANE: nothing reaches our address on a plane the target does not have", c_plane_paths},
	{"ecn.echo", "2.4", "CE-marked data counted in the ACK's ce_count", c_ecn_echo},
	{"ecn.ect0", "2.4", "the target's data packets are sent ECT(0)", c_ecn_ect0},
	{"flags.held", "6.5", "data with HELD from a peer that did not negotiate it is placed and acknowledged", c_flags_held},
	{"nak.invalid-rkey", "5.3", "WRITE with an unknown rkey: NAK INVALID_RKEY naming the packet", c_nak_invalid_rkey},
	{"nak.out-of-bounds", "5.3", "WRITE past the end of a region: NAK OUT_OF_BOUNDS (PERF service)", c_nak_out_of_bounds},
	{"nak.send-bounds", "5.4", "SEND longer than the receive it matches (1 GiB to the service's stream 0): NAK OUT_OF_BOUNDS naming it", c_nak_send_bounds},
	{"write.zero-length", "5.3", "a zero-length WRITE accesses no memory: no rkey check, acknowledged", c_write_zero_length},
	{"nak.access", "5.3", "WRITE into a region without remote write: NAK ACCESS", c_nak_access},
	{"read.not-negotiated", "5.8", "READ_REQ without the capability READ: NAK MALFORMED naming it", c_read_not_negotiated},
	{"read.access", "5.8.2", "READ_REQ of a region without remote read: NAK ACCESS naming it", c_read_access},
	{"nak.rnr", "5.4", "SEND with no posted receive: NAK RNR, connection lives on", c_nak_rnr},
	{"nak.unknown-stream", "5.5", "data on stream >= max_streams: NAK UNKNOWN_STREAM", c_nak_unknown_stream},
	{"nak.malformed", "5.5", "payload_len > MTU: NAK MALFORMED", c_nak_malformed},
	{"nak.malformed-path", "13.2", "data on path_id >= max_paths: NAK MALFORMED", c_nak_malformed_path},
	{"order.malformed-first", "5.5", "check 1 (MALFORMED) before 2 (stream) and 6 (rkey)", c_order_malformed_first},
	{"order.stream-before-rkey", "5.5", "check 2 (UNKNOWN_STREAM) before 6 (INVALID_RKEY)", c_order_stream_before_rkey},
	{"order.rkey-before-rnr", "5.5", "check 6 (INVALID_RKEY) before 7 (RNR) for WRITE_IMM", c_order_rkey_before_rnr},
	{"order.token-first", "13.2", "authentication before path and data checks: forged token silences every NAK", c_order_token_first},
	{"place.write-ooo", "5.3", "WRITE_IMM segments in reverse order placed at remote_addr + offset (PERF verifies)", c_place_write_ooo},
	{"close.graceful", "11.2", "CLOSE: CLOSE with REPLY on path 0, then the connection is gone", c_close_graceful},
	{"close.reason", "11.2", "the CLOSE reply carries the reason of the CLOSE", c_close_reason},
	{"close.tombstone", "11.5", "CLOSE again after the end: the tombstone replies again", c_close_tombstone},
	{"close.unsolicited-reply", "11.2", "CLOSE with REPLY answering nothing: dropped, connection lives", c_close_unsolicited_reply},
	{"close.drain", "11.2", "CLOSE while the target's SEND is unacknowledged: no reply until it completes", c_close_drain},
	{"reset.abort", "11.3", "RESET: not answered, connection ended, late data dropped silently", c_reset_abort},
	{"reset.retry-exceeded", "11.3", "a peer that answers nothing after the target's SEND: RESET RETRY_EXCEEDED once the retry budget is spent (--end-wait)", c_reset_retry_exceeded},
	{"reset.rnr-exceeded", "5.4", "every copy of the target's SEND NAKed RNR (PROBEs answered): RESET RETRY_EXCEEDED once its RNR retries are spent", c_reset_rnr_exceeded},
	{"reset.dead-peer", "8.1", "an idle connection whose peer answers nothing (no PROBE_ACK): RESET RETRY_EXCEEDED within --end-wait", c_reset_dead_peer},
	{"restart.challenge", "9.6", "a handshake with a new instance id: the old instance's connection is challenged (PROBE), answered, and lives on", c_restart_challenge},
	{"restart.unanswered", "9.6", "a new instance id and the old connection's challenge unanswered: it ends within --challenge-wait, without RESET", c_restart_unanswered},
	{"malformed.truncated", "13.1", "short datagrams: dropped, counted TRUNCATED, target alive", c_mal_truncated},
	{"malformed.version", "13.1", "non-CONNECT of another version: dropped, counted VERSION", c_mal_version},
	{"malformed.opcode", "13.1", "unknown opcodes (0x07, 0x7f): dropped, counted OPCODE", c_mal_opcode},
	{"malformed.flags", "13.1", "flags not allowed on the opcode: dropped, counted FLAGS", c_mal_flags},
	{"malformed.length", "13.1", "wrong datagram length: dropped, counted LENGTH", c_mal_length},
	{"malformed.range", "13.1", "a field out of range: dropped, counted RANGE", c_mal_range},
	{"malformed.reserved", "13.1", "reserved bits set: dropped, counted RESERVED", c_mal_reserved},
	{"malformed.wrap", "5.1", "WRITE whose remote_addr + msg_len passes 2^64 (valid rkey): dropped, counted RANGE, no ACK or NAK", c_mal_wrap},
	{"malformed.data", "5.1", "WRITE whose offset + payload_len wraps 32 bits, WRITE with a recv_idx: dropped, counted LENGTH and RESERVED", c_mal_data},
	{"noconn.rate-limit", "14.3", "a burst of data for an unknown connection: NAK UNKNOWN_CONN answers are rate-limited", c_noconn_rate_limit},
	{"wire.well-formed", "12.5", "every datagram the target sent during the run (the cases before this one) passes the codec", c_wire_well_formed},
	{"acceptor.connect", "9.2", "the target's CONNECT is valid", c_acc_connect},
	{"acceptor.retry", "9.7", "the target resends its CONNECT with our RETRY cookie, otherwise unchanged", c_acc_retry},
	{"acceptor.confirm", "9.3", "after our ACCEPT the target confirms with PROBE or data carrying our token", c_acc_confirm},
	{"acceptor.reject", "10.3", "a REJECT (token Ti) ends the target's attempt: no more CONNECTs", c_acc_reject},
	{"acceptor.reject-forged", "10.3", "a REJECT with a wrong token, or token 0 and a range holding its version, is dropped", c_acc_reject_forged},
	{"acceptor.retry-limit", "9.7", "the target follows a bounded number of RETRYs per attempt", c_acc_retry_limit},
	{"acceptor.bad-accept", "9.3", "an ACCEPT whose service_id is not the CONNECT's: the target sends RESET PROTOCOL, never confirms", c_acc_bad_accept},
	/* These end the application of --app-exit, then the target: last. */
	{"close.app-exit", "11.4", "an application of the target exits (--app-exit): its connection ends by CLOSE or RESET, reason APP_EXIT", c_close_app_exit},
	{"close.shutdown", "11.4", "the target stopping (--stop-cmd) ends open connections by CLOSE or RESET, reason SHUTDOWN", c_close_shutdown},
	{"close.simultaneous", "11.2", "our CLOSE crossing the stopping target's CLOSE: answered with CLOSE REPLY, our reason", c_close_simultaneous},
};
const size_t cf_ncases = sizeof(cf_cases) / sizeof(cf_cases[0]);
