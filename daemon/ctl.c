#define _GNU_SOURCE /* sendmmsg, recvmmsg, struct ucred */
#include "ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "drill.h"
#include "localsock.h"
#include "log.h"
#include "metrics.h"
#include "mrd.h"
#include "ops.h"
#include "perf.h"
#include "planes.h"
#include "telemetry.h"
#include "utf8.h"

#ifndef MRD_VERSION_STRING
#define MRD_VERSION_STRING "0.1.0"
#endif

struct mrd_ctl_client {
	uv_pipe_t pipe; /* data = this client */
	mrd *d;
	mrd_ctl_client *next, **pprev;
	uid_t uid;
	pid_t pid;
	int may_read, may_act;
	int discarding; /* skipping the rest of an oversized line */
	int closing;
	char *line;     /* MRD_CTL_LINE_MAX bytes */
	size_t len;
	char rdbuf[16384];
	mrd_perf_op *op; /* pending ping/perf */
	json_t *op_id;
	/* An operation of another module (a drill), cancelled at close. */
	void (*ext_cancel)(void *ud);
	void *ext_ud;
	unsigned refs;     /* work on a thread that will come back to us */
	int handle_closed; /* the pipe is closed; free at the last release */
	int monitor;       /* subscribed to events */
	uint64_t monitor_dropped; /* events not sent: the client reads too slowly */
	/* Back-pressure (CTL_WQ_PAUSE): not reading while the replies wait;
	 * the rest of the last read chunk is kept here until then. */
	int paused;
	char *held;
	size_t held_len, held_off;
};

/* A client whose replies wait unread beyond CTL_WQ_PAUSE bytes is not read
 * from (its requests wait in the socket and then in its own send buffer)
 * until the queue drains below half of it; no reply is dropped. Replies to
 * requests already read can still pass the mark; a client whose queue
 * passes CTL_WQ_DROP is closed. */
#define CTL_WQ_PAUSE (4u << 20)
#define CTL_WQ_DROP (32u << 20)

/* A subscriber with more than this many bytes queued loses events (counted
 * and reported to it as monitor.dropped once it catches up) instead of
 * making the daemon buffer without bound. */
#define MONITOR_QUEUE_MAX (4u << 20)

typedef struct wreq {
	uv_write_t req;
	char *buf;
	mrd_ctl_client *cl; /* alive: uv_close() runs write callbacks first */
} wreq;

static size_t wq_size(const mrd_ctl_client *cl)
{
	return uv_stream_get_write_queue_size((const uv_stream_t *)&cl->pipe);
}

static void client_resume(mrd_ctl_client *cl);

/* ---- replies ------------------------------------------------------------- */

static void on_written(uv_write_t *req, int status)
{
	(void)status;
	wreq *w = (wreq *)req;
	mrd_ctl_client *cl = w->cl;
	free(w->buf);
	free(w);
	if (cl->paused && !cl->closing && wq_size(cl) < CTL_WQ_PAUSE / 2)
		client_resume(cl);
}

/* What is sent when a reply cannot be encoded (out of memory): still a
 * reply, with its "error". */
#define REPLY_FALLBACK \
	"{\"v\":1,\"ok\":false,\"error\":{\"code\":\"internal\"," \
	"\"message\":\"the reply could not be encoded\"}}"

static void send_json(mrd_ctl_client *cl, json_t *reply)
{
	char *s = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
	json_decref(reply);
	if (cl->closing) {
		free(s);
		return;
	}
	if (!s) {
		cl->d->ctl.errors++;
		s = strdup(REPLY_FALLBACK);
		if (!s)
			return;
	}
	size_t n = strlen(s);
	char *buf = realloc(s, n + 2);
	wreq *w = malloc(sizeof(*w));
	if (!buf || !w) {
		free(buf ? buf : s);
		free(w);
		return;
	}
	buf[n] = '\n';
	buf[n + 1] = '\0';
	w->buf = buf;
	w->cl = cl;
	uv_buf_t b = uv_buf_init(buf, (unsigned)(n + 1));
	if (uv_write(&w->req, (uv_stream_t *)&cl->pipe, &b, 1, on_written) < 0) {
		free(buf);
		free(w);
	}
}

/* NULL if any part of it cannot be built. */
static json_t *reply_new(json_t *id, int ok)
{
	json_t *r = json_object();
	if (!r || json_object_set_new(r, "v", json_integer(MRD_CTL_VERSION)) < 0 ||
	    (id && json_object_set(r, "id", id) < 0) ||
	    json_object_set_new(r, "ok", json_boolean(ok)) < 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

static void reply_err(mrd_ctl_client *cl, json_t *id, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void reply_ok(mrd_ctl_client *cl, json_t *id, json_t *result)
{
	json_t *r = reply_new(id, 1);
	if (!r || !result) {
		json_decref(result);
		json_decref(r);
		reply_err(cl, id, "internal", "out of memory building the reply");
		return;
	}
	if (json_object_set_new(r, "result", result) < 0) {
		json_decref(r);
		reply_err(cl, id, "internal", "out of memory building the reply");
		return;
	}
	send_json(cl, r);
}

static void reply_err(mrd_ctl_client *cl, json_t *id, const char *code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* A cut in the middle of a character, or bytes of a request quoted
	 * back, must not cost the reply its "error" (jansson takes only
	 * UTF-8). */
	mrd_utf8_clean(msg);
	cl->d->ctl.errors++;
	json_t *r = reply_new(id, 0);
	json_t *e = json_pack("{s:s, s:s}", "code", code, "message", msg);
	if (!r || !e) {
		json_decref(e);
		json_decref(r);
		r = NULL; /* send_json() sends REPLY_FALLBACK */
	} else if (json_object_set_new(r, "error", e) < 0) {
		json_decref(r);
		r = NULL;
	}
	send_json(cl, r);
}

void mrd_ctl_reply(mrd_ctl_client *cl, json_t *id, json_t *result)
{
	reply_ok(cl, id, result);
}

void mrd_ctl_error(mrd_ctl_client *cl, json_t *id, const char *code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_err(cl, id, code, "%s", msg);
}


int mrd_ctl_may_act(const mrd_ctl_client *cl)
{
	return cl->may_act;
}

uid_t mrd_ctl_uid(const mrd_ctl_client *cl)
{
	return cl->uid;
}

mrd *mrd_ctl_daemon(const mrd_ctl_client *cl)
{
	return cl->d;
}

void mrd_ctl_hold(mrd_ctl_client *cl)
{
	cl->refs++;
}

void mrd_ctl_release(mrd_ctl_client *cl)
{
	if (--cl->refs == 0 && cl->handle_closed) {
		free(cl->held);
		free(cl->line);
		free(cl);
	}
}

int mrd_ctl_gone(const mrd_ctl_client *cl)
{
	return cl->closing;
}

void mrd_ctl_subscribe(mrd_ctl_client *cl)
{
	if (!cl->monitor) {
		cl->monitor = 1;
		cl->d->ctl.monitors++;
	}
}

static void publish(mrd *d, json_t *event)
{
	json_t *msg = NULL;
	for (mrd_ctl_client *cl = d->ctl.clients; cl; cl = cl->next) {
		if (!cl->monitor || cl->closing)
			continue;
		if (uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe) > MONITOR_QUEUE_MAX) {
			cl->monitor_dropped++;
			d->ctl.events_dropped++;
			continue;
		}
		if (cl->monitor_dropped) {
			json_t *e = json_pack("{s:i, s:{s:f, s:s, s:I}}", "v", MRD_CTL_VERSION,
					      "event", "ts", (double)mrd_wall_ns() / 1e9, "kind",
					      "monitor.dropped", "count",
					      (json_int_t)cl->monitor_dropped);
			cl->monitor_dropped = 0;
			send_json(cl, e);
		}
		if (!msg) {
			msg = json_object();
			json_object_set_new(msg, "v", json_integer(MRD_CTL_VERSION));
			json_object_set(msg, "event", event);
		}
		d->ctl.events_pushed++;
		send_json(cl, json_incref(msg));
	}
	json_decref(msg);
}

void mrd_ctl_on_event(void *ud, const mrd_ev *ev)
{
	mrd *d = ud;
	if (!d->ctl.monitors)
		return;
	char conn[16];
	snprintf(conn, sizeof(conn), "%08" PRIx32, ev->conn);
	json_t *e = json_object();
	json_object_set_new(e, "ts", json_real((double)ev->ts_ns / 1e9));
	json_object_set_new(e, "kind", json_string(ev->name));
	json_object_set_new(e, "plane", ev->plane_name ? json_string(ev->plane_name) : json_null());
	json_object_set_new(e, "conn", ev->conn ? json_string(conn) : json_null());
	json_object_set_new(e, "path", ev->path >= 0 ? json_integer(ev->path) : json_null());
	json_object_set_new(e, "detail", json_string(ev->detail ? ev->detail : ""));
	if (ev->from) {
		json_object_set_new(e, "from", json_string(ev->from));
		json_object_set_new(e, "to", json_string(ev->to));
		json_object_set_new(e, "gen", json_integer((json_int_t)ev->gen));
		json_object_set_new(e, "sport", json_integer((json_int_t)ev->sport));
	}
	publish(d, e);
	json_decref(e);
}

int mrd_ctl_set_op(mrd_ctl_client *cl, void (*cancel)(void *ud), void *ud)
{
	if (cl->ext_cancel || cl->op)
		return -1;
	cl->ext_cancel = cancel;
	cl->ext_ud = ud;
	return 0;
}

void mrd_ctl_clear_op(mrd_ctl_client *cl)
{
	cl->ext_cancel = NULL;
	cl->ext_ud = NULL;
}

/* ---- views ----------------------------------------------------------------- */

static json_t *hex32(uint32_t v)
{
	char b[16];
	snprintf(b, sizeof(b), "%08" PRIx32, v);
	return json_string(b);
}

static json_t *hex64(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "%016" PRIx64, v);
	return json_string(b);
}

static json_t *addr_json(const mrd_sockaddr *a)
{
	char b[64];
	return json_string(mrd_sockaddr_str(a, b, sizeof(b)));
}

static json_t *ju(uint64_t v)
{
	return json_integer((json_int_t)v);
}

static double age_s(uint64_t then, uint64_t now)
{
	return then && now > then ? (double)(now - then) / 1e9 : 0;
}

json_t *mrd_json_conn(const mrd_conn *c)
{
	uint64_t now = uv_hrtime();
	json_t *o = json_object();
	json_object_set_new(o, "id", hex32(c->local_id));
	json_object_set_new(o, "peer_id", hex32(c->peer_id));
	json_object_set_new(o, "peer", addr_json(&c->peer->addr));
	json_object_set_new(o, "role", json_string(c->initiator ? "initiator" : "acceptor"));
	json_object_set_new(o, "state", json_string(mrd_conn_state_name(c)));
	json_object_set_new(o, "service", hex32(c->service_id));
	json_object_set_new(o, "mtu", ju(c->mtu));
	json_object_set_new(o, "max_streams", ju(c->max_streams));
	json_object_set_new(o, "max_paths", ju(c->max_paths));
	json_object_set_new(o, "plane_pairs", ju(c->npairs));
	json_object_set_new(o, "age_s", json_real(age_s(c->created_ns, now)));
	if (c->end_reason[0])
		json_object_set_new(o, "end_reason", json_string(c->end_reason));
	json_t *drops = json_object();
	for (int i = 1; i < MRD_NERR; i++)
		if (c->drops[i])
			json_object_set_new(drops, mrp_err_name(-i), ju(c->drops[i]));
	json_object_set_new(o, "drops", drops);
	if (c->eng) {
		json_t *m = json_object();
		json_object_set_new(m, "bytes", ju(c->mem.used));
		json_object_set_new(m, "peak", ju(c->mem.peak));
		json_object_set_new(m, "limit", ju(c->mem.limit));
		json_object_set_new(m, "refused", ju(c->mem.refused));
		json_object_set_new(o, "memory", m);
	}
	if (c->eng) {
		mrp_conn_stats st;
		mrp_conn_get_stats(c->eng, &st);
		json_t *s = json_object();
#define S(f) json_object_set_new(s, #f, ju(st.f))
		S(tx_pkts); S(tx_bytes); S(rx_pkts); S(rx_bytes); S(retx_pkts); S(lost_pkts);
		S(rto_count); S(tlp_count); S(rx_dup_pkts); S(naks_sent); S(naks_rcvd);
		S(acks_sent); S(acks_rcvd); S(drops_token); S(drops_noconn); S(drops_range);
		S(drops_stale);
		S(paths_opened); S(reports); S(events_dropped); S(qwnd); S(pacing_bps);
		S(rate_hint_bps); S(npaths_active);
#undef S
		json_object_set_new(o, "stats", s);
	}
	return o;
}

json_t *mrd_json_paths(const mrd_conn *c)
{
	json_t *a = json_array();
	if (!c->eng)
		return a;
	const mrd *d = c->d;
	for (unsigned i = 0; i < c->max_paths; i++) {
		mrp_path_info pi;
		if (mrp_conn_path_info(c->eng, i, &pi) < 0)
			continue;
		json_t *o = json_object();
		json_object_set_new(o, "conn", hex32(c->local_id));
		json_object_set_new(o, "id", ju(pi.id));
		json_object_set_new(o, "gen", ju(pi.gen));
		json_object_set_new(o, "plane", ju(pi.plane));
		json_object_set_new(o, "state", json_string(mrp_path_state_name(pi.state)));
		json_object_set_new(o, "sport", ju(pi.sport));
		if (pi.plane < c->npairs) {
			const mrd_pair *pr = &c->pairs[pi.plane];
			mrd_sockaddr l = d->dp.planes[pr->lplane].local;
			if (l.sa.sa_family == AF_INET6)
				l.in6.sin6_port = htons(pi.sport);
			else
				l.in.sin_port = htons(pi.sport);
			json_object_set_new(o, "plane_name",
					    json_string(d->cfg.planes[pr->lplane].name));
			json_object_set_new(o, "local", addr_json(&l));
			json_object_set_new(o, "remote", addr_json(&pr->raddr));
		}
		json_object_set_new(o, "cwnd", ju(pi.cwnd));
		json_object_set_new(o, "inflight", ju(pi.inflight));
		json_object_set_new(o, "srtt_us", json_real((double)pi.srtt_ns / 1e3));
		json_object_set_new(o, "min_rtt_us",
				    json_real(pi.min_rtt_ns == UINT64_MAX ? 0 : (double)pi.min_rtt_ns / 1e3));
#define P(f) json_object_set_new(o, #f, ju(pi.f))
		P(tx_pkts); P(tx_bytes); P(retx_pkts); P(lost_pkts); P(acked_pkts); P(ce_pkts);
		P(rx_pkts); P(rx_ce_pkts);
#undef P
		if (pi.rx_plane < c->npairs)
			json_object_set_new(o, "rx_plane_name",
					    json_string(d->cfg.planes[c->pairs[pi.rx_plane].lplane].name));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *cmd_status(mrd *d)
{
	uint64_t now = uv_hrtime();
	json_t *o = json_object();
	json_object_set_new(o, "version", json_string(MRD_VERSION_STRING));
	json_object_set_new(o, "pid", ju((uint64_t)getpid()));
	json_object_set_new(o, "instance_id", hex64(d->instance_id));
	json_object_set_new(o, "uptime_s", json_real(age_s(d->start_ns, now)));
	json_object_set_new(o, "config", json_string(d->config_path));
	json_object_set_new(o, "service_port", ju(d->cfg.port));
	json_object_set_new(o, "planes", ju(d->dp.nplanes));
	json_object_set_new(o, "state", json_string(d->stopping ? "stopping" : "running"));
	json_object_set_new(o, "log_level", json_string(mrd_log_level_name(mrd_log_level)));
	uint64_t n[4] = {0};
	for (const mrd_conn *c = d->peers.all; c; c = c->next)
		n[c->state]++;
	json_object_set_new(o, "conns", json_pack("{s:I, s:I, s:I, s:I}",
		"connecting", (json_int_t)n[MRD_CONN_CONNECTING],
		"half_open", (json_int_t)n[MRD_CONN_HALF_OPEN],
		"established", (json_int_t)n[MRD_CONN_ESTABLISHED],
		"ended", (json_int_t)n[MRD_CONN_ENDED]));
	json_object_set_new(o, "peers", ju(d->peers.npeers));
	const mrd_counters *k = &d->cnt;
	json_t *cn = json_object();
	json_t *drops = json_object();
	uint64_t total = 0;
	for (int i = 1; i < MRD_NERR; i++) {
		json_object_set_new(drops, mrp_err_name(-i), ju(k->drops[i]));
		total += k->drops[i];
	}
	uint64_t txp = 0, txb = 0;
	for (unsigned i = 0; i < d->dp.nplanes; i++) {
		txp += d->dp.planes[i].tx_pkts;
		txb += d->dp.planes[i].tx_bytes;
	}
	json_object_set_new(cn, "rx_pkts", ju(k->rx_pkts));
	json_object_set_new(cn, "rx_bytes", ju(k->rx_bytes));
	json_object_set_new(cn, "tx_pkts", ju(txp));
	json_object_set_new(cn, "tx_bytes", ju(txb));
	json_object_set_new(cn, "drops", drops);
	json_object_set_new(cn, "drops_total", ju(total));
#define C(f) json_object_set_new(cn, #f, ju(k->f))
	C(connects_rx); C(accepts_tx); C(rejects_tx); C(naks_unknown_tx); C(answers_limited);
	C(conns_opened); C(conns_failed); C(conns_closed); C(peer_restarts); C(sport_bind_fails);
	C(challenges); C(challenges_answered); C(half_open_discarded);
	C(retries_tx); C(retries_rx); C(connects_validated); C(cookies_bad);
	C(retries_limited); C(accepts_limited); C(half_open_full);
#undef C
	json_object_set_new(cn, "ctl_requests", ju(d->ctl.requests));
	json_object_set_new(cn, "ctl_errors", ju(d->ctl.errors));
	json_object_set_new(cn, "ctl_clients_paused", ju(d->ctl.clients_paused));
	json_object_set_new(cn, "engine_memory", ju(d->peers.memacct.used));
	json_object_set_new(cn, "engine_memory_refused", ju(d->peers.memacct.refused));
	json_object_set_new(cn, "fds_open", ju(d->fdg.open));
	json_object_set_new(cn, "fds_limit", ju(d->fdg.limit));
	json_object_set_new(cn, "fds_near_limit", ju(d->fdg.near_limit));
	json_object_set_new(cn, "sport_idle_closed", ju(d->fdg.idle_closed));
	json_object_set_new(cn, "ctl_clients_dropped", ju(d->ctl.clients_dropped));
	json_object_set_new(o, "counters", cn);
	json_object_set_new(o, "apps", mrd_apps_json(d));
	const mrd_dp *dp = &d->dp;
	json_object_set_new(o, "datapath", json_pack("{s:b, s:b, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"gso", dp->gso, "gro", dp->gro, "host_ecn", dp->host_ecn,
		"rx_host_ce", (json_int_t)dp->rx_host_ce,
		"tx_calls", (json_int_t)dp->tx_calls, "tx_gso_msgs", (json_int_t)dp->tx_gso_msgs,
		"tx_dropped", (json_int_t)dp->tx_dropped, "tx_errors", (json_int_t)dp->tx_errors,
		"rx_calls", (json_int_t)dp->rx_calls, "rx_gro_segs", (json_int_t)dp->rx_gro_segs));
	return o;
}

static json_t *cmd_planes(mrd *d)
{
	json_t *a = json_array();
	for (unsigned i = 0; i < d->dp.nplanes; i++) {
		const mrd_dp_plane *pl = &d->dp.planes[i];
		const mrd_plane *cp = &d->cfg.planes[i];
		mrd_sockaddr s = pl->local;
		if (s.sa.sa_family == AF_INET6)
			s.in6.sin6_port = htons(d->cfg.port);
		else
			s.in.sin_port = htons(d->cfg.port);
		char ports[16];
		snprintf(ports, sizeof(ports), "%u-%u", cp->source_ports.min, cp->source_ports.max);
		json_t *o = json_object();
		json_object_set_new(o, "index", ju(i));
		json_object_set_new(o, "name", json_string(cp->name));
		json_object_set_new(o, "address", addr_json(&s));
		json_object_set_new(o, "interface", json_string(cp->interface));
		json_object_set_new(o, "mtu", ju(cp->mtu));
		json_object_set_new(o, "source_ports", json_string(ports));
		json_object_set_new(o, "sockets", ju(1 + pl->npool));
		json_object_set_new(o, "rx_pkts", ju(pl->rx_pkts));
		json_object_set_new(o, "rx_bytes", ju(pl->rx_bytes));
		json_object_set_new(o, "tx_pkts", ju(pl->tx_pkts));
		json_object_set_new(o, "tx_bytes", ju(pl->tx_bytes));
		json_object_set_new(o, "bind_fails", ju(pl->bind_fails));
		/* Link state from netlink (planes.c): the operational state;
		 * the operator's (drained, or out for a drill) beside it. */
		json_object_set_new(o, "state", json_string(mrd_planes_state_name(d, i)));
		json_object_set_new(o, "oper_state",
				    json_string(mrd_planes_up(d, i) ? "up" : "down"));
		json_object_set_new(o, "admin_state", json_string(mrd_ops_plane_admin(d, i)));
		json_object_set_new(o, "drained", json_boolean(mrd_ops_plane_operator_drained(d, i)));
		int64_t dts = 0;
		const char *dby = mrd_ops_drained_by(d, i, &dts);
		json_object_set_new(o, "drained_by", json_string(dby));
		json_object_set_new(o, "drained_ts", json_real((double)dts / 1e9));
		const mrd_plane_state *ps = mrd_planes_get(d, i);
		if (ps) {
			json_object_set_new(o, "ifname", json_string(ps->ifname));
			json_object_set_new(o, "ifindex", ju((uint64_t)(ps->ifindex > 0 ? ps->ifindex : 0)));
			json_object_set_new(o, "link_speed_bps", ju(ps->speed_bps));
			json_object_set_new(o, "link_speed_source", json_string(ps->speed_source));
			json_object_set_new(o, "down_reason", json_string(ps->up ? "" : ps->reason));
			json_object_set_new(o, "since_s", json_real(age_s(ps->changed_ns, uv_hrtime())));
			json_object_set_new(o, "downs", ju(ps->downs));
			json_object_set_new(o, "ups", ju(ps->ups));
			json_object_set_new(o, "flaps", ju(ps->flaps));
		}
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *cmd_peers(mrd *d)
{
	uint64_t now = uv_hrtime();
	json_t *a = json_array();
	for (const mrd_peer *p = d->peers.list; p; p = p->next) {
		json_t *o = json_object();
		json_object_set_new(o, "address", addr_json(&p->addr));
		json_object_set_new(o, "instance_id",
				    p->have_instance ? hex64(p->instance_id) : json_null());
		json_object_set_new(o, "conns", ju(p->nconns));
		json_object_set_new(o, "conns_total", ju(p->conns_total));
		json_object_set_new(o, "restarts", ju(p->restarts));
		json_object_set_new(o, "last_seen_s", json_real(age_s(p->last_ns, now)));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *cmd_conns(mrd *d)
{
	json_t *a = json_array();
	for (const mrd_conn *c = d->peers.all; c; c = c->next)
		json_array_append_new(a, mrd_json_conn(c));
	return a;
}

static int parse_conn_id(const char *s, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 16);
	if (!*s || *end || errno || v == 0 || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* ---- asynchronous commands ---------------------------------------------- */

static void op_done(void *ud, json_t *result, const char *err)
{
	mrd_ctl_client *cl = ud;
	json_t *id = cl->op_id;
	cl->op = NULL;
	cl->op_id = NULL;
	if (err)
		reply_err(cl, id, "failed", "%s", err);
	else
		reply_ok(cl, id, result);
	json_decref(id);
}

static void cmd_async(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	mrd *d = cl->d;
	if (cl->op || cl->ext_cancel) {
		reply_err(cl, id, "busy", "a ping, perf or drill is already running on this connection");
		return;
	}
	const char *peer = NULL;
	json_t *jp = json_object_get(args, "peer");
	if (!json_is_string(jp) || !*(peer = json_string_value(jp))) {
		reply_err(cl, id, "bad_request", "%s: args.peer (\"ADDRESS[:PORT]\") is required", cmd);
		return;
	}
	char err[160];
	int rv;
	cl->op_id = id ? json_incref(id) : NULL;
	if (strcmp(cmd, "perf") == 0) {
		json_t *js = json_object_get(args, "seconds"), *jm = json_object_get(args, "msg_size");
		json_t *jb = json_object_get(args, "bytes");
		double secs = js ? json_number_value(js) : 3.0;
		json_int_t msz = jm ? (json_is_integer(jm) ? json_integer_value(jm) : -1)
				    : MRD_PERF_MSG_DEFAULT;
		json_int_t bytes = jb ? (json_is_integer(jb) ? json_integer_value(jb) : -1) : 0;
		if ((js && !json_is_number(js)) || msz < 0 || msz > UINT32_MAX || bytes < 0) {
			json_decref(cl->op_id);
			cl->op_id = NULL;
			reply_err(cl, id, "bad_request", "perf: args.seconds must be a number, "
				  "args.msg_size and args.bytes non-negative integers");
			return;
		}
		rv = mrd_perf_start(d, peer, secs, (uint64_t)bytes, (uint32_t)msz, op_done, cl,
				    &cl->op, err, sizeof(err));
	} else {
		json_t *jc = json_object_get(args, "count");
		json_int_t count = jc ? (json_is_integer(jc) ? json_integer_value(jc) : -1) : 5;
		if (count < 1 || count > 10000) {
			json_decref(cl->op_id);
			cl->op_id = NULL;
			reply_err(cl, id, "bad_request", "ping: args.count must be an integer 1-10000");
			return;
		}
		rv = mrd_ping_start(d, peer, (unsigned)count, op_done, cl, &cl->op, err,
				    sizeof(err));
	}
	if (rv < 0) {
		json_decref(cl->op_id);
		cl->op_id = NULL;
		cl->op = NULL;
		reply_err(cl, id, "failed", "%s: %s", cmd, err);
	} else {
		mrd_peer_run(d);
	}
}

/* ---- requests ------------------------------------------------------------ */

static void handle_line(mrd_ctl_client *cl, const char *line, size_t len)
{
	mrd *d = cl->d;
	d->ctl.requests++;
	json_error_t jerr;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!req) {
		reply_err(cl, NULL, "parse", "request is not JSON: %s (column %d)", jerr.text,
			  jerr.column);
		return;
	}
	json_t *id = json_object_get(req, "id");
	json_t *v = json_object_get(req, "v");
	json_t *jcmd = json_object_get(req, "cmd");
	json_t *args = json_object_get(req, "args");
	if (!json_is_object(req)) {
		reply_err(cl, NULL, "bad_request", "a request is a JSON object");
	} else if (!json_is_integer(v) || json_integer_value(v) != MRD_CTL_VERSION) {
		reply_err(cl, id, "version", "\"v\" must be %d (this daemon speaks version %d)",
			  MRD_CTL_VERSION, MRD_CTL_VERSION);
	} else if (!json_is_string(jcmd)) {
		reply_err(cl, id, "bad_request", "\"cmd\" (a string) is required");
	} else if (args && !json_is_object(args)) {
		reply_err(cl, id, "bad_request", "\"args\" must be an object");
	} else if (!cl->may_read) {
		reply_err(cl, id, "permission",
			  "uid %u may not use this daemon (root, uid %u or group members only)",
			  (unsigned)cl->uid, (unsigned)geteuid());
	} else {
		const char *cmd = json_string_value(jcmd);
		if (strcmp(cmd, "status") == 0) {
			reply_ok(cl, id, cmd_status(d));
		} else if (strcmp(cmd, "show planes") == 0) {
			reply_ok(cl, id, cmd_planes(d));
		} else if (strcmp(cmd, "show peers") == 0) {
			reply_ok(cl, id, cmd_peers(d));
		} else if (strcmp(cmd, "show conns") == 0) {
			reply_ok(cl, id, cmd_conns(d));
		} else if (strcmp(cmd, "show paths") == 0) {
			json_t *jc = json_object_get(args, "conn");
			uint32_t want = 0;
			if (jc && (!json_is_string(jc) ||
				   parse_conn_id(json_string_value(jc), &want) < 0)) {
				reply_err(cl, id, "bad_request",
					  "show paths: args.conn must be a connection id in hex");
			} else if (want && !mrd_conn_find(d, want)) {
				reply_err(cl, id, "not_found", "no connection %08x", want);
			} else {
				json_t *a = json_array();
				for (const mrd_conn *c = d->peers.all; c; c = c->next) {
					if (want && c->local_id != want)
						continue;
					json_t *p = mrd_json_paths(c);
					json_array_extend(a, p);
					json_decref(p);
				}
				reply_ok(cl, id, a);
			}
		} else if (strcmp(cmd, "ping") == 0 || strcmp(cmd, "perf") == 0) {
			if (!cl->may_act)
				reply_err(cl, id, "permission",
					  "%s changes state: root or uid %u only", cmd,
					  (unsigned)geteuid());
			else
				cmd_async(cl, id, cmd, args);
		} else if (strcmp(cmd, "metrics") == 0) {
			char *text = mrd_metrics_render(d, NULL);
			if (!text)
				reply_err(cl, id, "failed", "out of memory");
			else
				reply_ok(cl, id, json_pack("{s:s, s:s}", "format",
							   "prometheus-text-0.0.4", "text", text));
			free(text);
		} else if (strcmp(cmd, "telemetry") == 0) {
			reply_ok(cl, id, mrd_telemetry_recent(d));
		} else if (mrd_ops_handle(cl, id, cmd, args) || mrd_drill_handle(cl, id, cmd, args)) {
			/* answered, or will be */
		} else {
			reply_err(cl, id, "unknown_command", "unknown command '%.64s'", cmd);
		}
	}
	json_decref(req);
}

/* ---- client connections -------------------------------------------------- */

static void client_closed(uv_handle_t *h)
{
	mrd_ctl_client *cl = h->data;
	cl->handle_closed = 1;
	if (cl->refs)
		return; /* freed by the last mrd_ctl_release() */
	free(cl->held);
	free(cl->line);
	free(cl);
}

static void client_close(mrd_ctl_client *cl)
{
	if (cl->closing)
		return;
	cl->closing = 1;
	if (cl->op) {
		mrd_perf_cancel(cl->op);
		cl->op = NULL;
	}
	json_decref(cl->op_id);
	cl->op_id = NULL;
	if (cl->ext_cancel) {
		void (*cancel)(void *) = cl->ext_cancel;
		cl->ext_cancel = NULL;
		cancel(cl->ext_ud);
	}
	if (cl->monitor) {
		cl->monitor = 0;
		cl->d->ctl.monitors--;
	}
	*cl->pprev = cl->next;
	if (cl->next)
		cl->next->pprev = cl->pprev;
	uv_close((uv_handle_t *)&cl->pipe, client_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)hint;
	mrd_ctl_client *cl = h->data;
	*buf = uv_buf_init(cl->rdbuf, sizeof(cl->rdbuf));
}

/* Requests of data[0..n): returns how much was consumed, less than n when
 * the client's replies wait beyond CTL_WQ_PAUSE (then it is paused). */
static size_t feed(mrd_ctl_client *cl, const char *data, size_t n)
{
	for (size_t i = 0; i < n && !cl->closing; i++) {
		char ch = data[i];
		if (ch == '\n') {
			if (cl->discarding)
				cl->discarding = 0;
			else if (cl->len)
				handle_line(cl, cl->line, cl->len);
			cl->len = 0;
			if (cl->closing)
				break;
			size_t q = wq_size(cl);
			if (q > CTL_WQ_DROP) {
				mrd_warn("control client pid %d: %zu bytes of replies unread: "
					 "closing it", (int)cl->pid, q);
				cl->d->ctl.clients_dropped++;
				client_close(cl);
				return n;
			}
			if (q > CTL_WQ_PAUSE)
				return i + 1;
			continue;
		}
		if (cl->discarding)
			continue;
		if (cl->len == MRD_CTL_LINE_MAX) {
			/* Too long: answer now, skip to the end of the line. */
			cl->d->ctl.requests++;
			reply_err(cl, NULL, "too_large", "request longer than %d bytes",
				  MRD_CTL_LINE_MAX);
			cl->discarding = 1;
			cl->len = 0;
			continue;
		}
		cl->line[cl->len++] = ch;
	}
	return n;
}

/* Stop reading; keep what was read and not yet handled. */
static void client_pause(mrd_ctl_client *cl, const char *rest, size_t n)
{
	if (!cl->paused) {
		cl->paused = 1;
		cl->d->ctl.clients_paused++;
		uv_read_stop((uv_stream_t *)&cl->pipe);
	}
	if (!n)
		return;
	char *h = malloc(n);
	if (!h) {
		client_close(cl);
		return;
	}
	memcpy(h, rest, n); /* rest may point into cl->held itself */
	free(cl->held);
	cl->held = h;
	cl->held_len = n;
	cl->held_off = 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* The replies drained (on_written): handle the held requests, then read
 * again unless they filled the queue once more. */
static void client_resume(mrd_ctl_client *cl)
{
	if (cl->held) {
		size_t left = cl->held_len - cl->held_off;
		size_t used = feed(cl, cl->held + cl->held_off, left);
		if (cl->closing)
			return;
		if (used < left) {
			cl->held_off += used;
			return; /* still paused */
		}
		free(cl->held);
		cl->held = NULL;
		cl->held_len = cl->held_off = 0;
	}
	cl->paused = 0;
	uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read);
	mrd_peer_run(cl->d);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	mrd_ctl_client *cl = s->data;
	if (n < 0) {
		client_close(cl);
		return;
	}
	size_t used = feed(cl, buf->base, (size_t)n);
	if (!cl->closing && used < (size_t)n)
		client_pause(cl, buf->base + used, (size_t)n - used);
	else if (!cl->closing && wq_size(cl) > CTL_WQ_PAUSE)
		client_pause(cl, NULL, 0);
	mrd_peer_run(cl->d);
}

static void on_connection(uv_stream_t *server, int status)
{
	mrd *d = server->data;
	if (status < 0)
		return;
	mrd_ctl_client *cl = calloc(1, sizeof(*cl));
	if (!cl)
		return;
	cl->d = d;
	cl->line = malloc(MRD_CTL_LINE_MAX);
	uv_pipe_init(d->loop, &cl->pipe, 0);
	cl->pipe.data = cl;
	cl->pprev = &d->ctl.clients;
	cl->next = d->ctl.clients;
	if (cl->next)
		cl->next->pprev = &cl->next;
	d->ctl.clients = cl;
	if (!cl->line || uv_accept(server, (uv_stream_t *)&cl->pipe) < 0) {
		client_close(cl);
		return;
	}
	uv_os_fd_t fd;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		client_close(cl);
		return;
	}
	cl->uid = cr.uid;
	cl->pid = cr.pid;
	cl->may_act = cr.uid == 0 || cr.uid == geteuid();
	cl->may_read = cl->may_act ||
		       (d->ctl.have_group && (cr.gid == d->ctl.gid || mrd_uid_in_group(cr.uid, d->ctl.gid)));
	uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read);
}

/* ---- the listening socket ------------------------------------------------ */

int mrd_ctl_init(mrd *d)
{
	mrd_ctl *t = &d->ctl;
	const char *path = d->cfg.control_socket;
	t->d = d;
	if (d->cfg.control_group[0]) {
		t->have_group = mrd_group_gid(d->cfg.control_group, &t->gid);
		if (!t->have_group)
			mrd_info("control group '%s' does not exist: read-only access for root "
				 "and uid %u only", d->cfg.control_group, (unsigned)geteuid());
	}
	int rv = mrd_clear_stale_socket(path, SOCK_STREAM);
	if (rv < 0) {
		mrd_err("control socket %s: %s", path, mrd_clear_stale_str(rv));
		return rv;
	}
	uv_pipe_init(d->loop, &t->server, 0);
	t->server.data = d;
	t->open = 1;
	/* Created 0660 from the start: no window in which others may connect. */
	mode_t old = umask(0117);
	rv = uv_pipe_bind(&t->server, path);
	umask(old);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)&t->server, 64, on_connection);
	if (rv < 0) {
		mrd_err("control socket %s: %s", path, uv_strerror(rv));
		return rv;
	}
	t->bound = 1;
	if (t->have_group && chown(path, (uid_t)-1, t->gid) < 0)
		mrd_warn("control socket %s: cannot give it to group %s: %s", path,
			 d->cfg.control_group, strerror(errno));
	mrd_info("control socket %s", path);
	return 0;
}

void mrd_ctl_close(mrd *d)
{
	mrd_ctl *t = &d->ctl;
	while (t->clients)
		client_close(t->clients);
	if (t->open) {
		t->open = 0;
		uv_close((uv_handle_t *)&t->server, NULL);
	}
	if (t->bound) {
		t->bound = 0;
		unlink(d->cfg.control_socket);
	}
}
