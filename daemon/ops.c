/* Operations: events, drained planes, path commands, history (ops.h). */
#include "ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "drill.h"
#include "log.h"
#include "mrd.h"
#include "peer.h"
#include "planes.h"

static json_t *conn_hex(uint32_t id)
{
	char b[16];
	snprintf(b, sizeof(b), "%08" PRIx32, id);
	return json_string(b);
}

/* ---- drained planes ------------------------------------------------------- */

bool mrd_ops_plane_drained(const mrd *d, unsigned plane)
{
	return plane < MRD_MAX_PLANES && (d->ops->drained[plane] || d->ops->drill[plane]);
}

bool mrd_ops_plane_operator_drained(const mrd *d, unsigned plane)
{
	return plane < MRD_MAX_PLANES && d->ops->drained[plane];
}

const char *mrd_ops_plane_admin(const mrd *d, unsigned plane)
{
	if (plane >= MRD_MAX_PLANES)
		return "in-service";
	return d->ops->drained[plane] ? "drained" : d->ops->drill[plane] ? "drill" : "in-service";
}

const char *mrd_ops_drained_by(const mrd *d, unsigned plane, int64_t *pts)
{
	if (plane >= MRD_MAX_PLANES || !d->ops->drained[plane]) {
		*pts = 0;
		return "";
	}
	*pts = d->ops->ts[plane];
	return d->ops->by[plane];
}

unsigned mrd_ops_usable_planes(const mrd *d)
{
	unsigned n = 0;
	for (unsigned i = 0; i < d->cfg.nplanes; i++)
		n += mrd_planes_up(d, i) && !mrd_ops_plane_drained(d, i);
	return n;
}

/* Tell the engines when the effective state changed. */
static void apply(mrd *d, unsigned plane)
{
	uint8_t want = d->ops->drained[plane] || d->ops->drill[plane];
	if (want == d->ops->applied[plane])
		return;
	d->ops->applied[plane] = want;
	mrd_peers_plane_event(d, plane, want ? MRP_PLANE_DRAIN : MRP_PLANE_UNDRAIN);
}

void mrd_ops_drill_hold(mrd *d, unsigned plane, int on)
{
	if (plane >= d->cfg.nplanes)
		return;
	d->ops->drill[plane] = (uint8_t)!!on;
	apply(d, plane);
}

void mrd_ops_conn_established(mrd *d, mrd_conn *c, uint64_t now_ns)
{
	for (unsigned i = 0; i < c->npairs; i++)
		if (mrd_ops_plane_drained(d, c->pairs[i].lplane))
			mrd_conn_plane_event(c, i, MRP_PLANE_DRAIN, now_ns);
}

int mrd_ops_plane_find(const mrd *d, const char *s)
{
	for (unsigned i = 0; i < d->cfg.nplanes; i++)
		if (strcmp(d->cfg.planes[i].name, s) == 0)
			return (int)i;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (*s && !*end && !errno && v >= 0 && v < (long)d->cfg.nplanes)
		return (int)v;
	return -1;
}

static int restore_row(const mrd_store_plane_row *r, void *ud)
{
	mrd *d = ud;
	int i = mrd_ops_plane_find(d, r->name);
	if (i < 0 || !r->drained || strcmp(d->cfg.planes[i].name, r->name) != 0)
		return 0;
	d->ops->drained[i] = 1;
	d->ops->applied[i] = 1; /* no connection exists yet: new ones get it */
	snprintf(d->ops->by[i], sizeof(d->ops->by[i]), "%s", r->drained_by ? r->drained_by : "");
	d->ops->ts[i] = r->drained_ts_ns;
	mrd_info("plane %s: drained (by %s; kept from the state database): "
		 "it carries no data until 'metaroce-ctl plane undrain %s'",
		 r->name, d->ops->by[i][0] ? d->ops->by[i] : "?", r->name);
	return 0;
}

void mrd_ops_init(mrd *d)
{
	if (d->store && mrd_store_query_planes(d->store, restore_row, d) < 0)
		mrd_warn("state store: cannot read the drained planes: %s",
			 mrd_store_errmsg(d->store));
}

/* ---- requests ------------------------------------------------------------- */

typedef struct drain_req {
	uv_work_t w;
	mrd_ctl_client *cl;
	mrd *d;
	json_t *id;
	unsigned plane;
	int drain;
	char who[48];
	int64_t ts;
	int rc;
	char err[160];
} drain_req;

static unsigned count_conns(mrd *d, unsigned plane)
{
	unsigned n = 0;
	for (const mrd_conn *c = d->peers->all; c; c = c->next) {
		if (!mrd_conn_has_engine(c) || c->state == MRD_CONN_ENDED)
			continue;
		for (unsigned i = 0; i < c->npairs; i++)
			if (c->pairs[i].lplane == plane) {
				n++;
				break;
			}
	}
	return n;
}

static json_t *drain_result(mrd *d, unsigned plane, int changed, int persisted)
{
	return json_pack("{s:s, s:i, s:b, s:b, s:b, s:s, s:i, s:i}", "plane",
			 d->cfg.planes[plane].name, "index", (int)plane, "drained",
			 d->ops->drained[plane], "changed", changed, "persisted", persisted,
			 "admin_state", mrd_ops_plane_admin(d, plane), "conns",
			 (int)count_conns(d, plane), "usable_planes",
			 (int)mrd_ops_usable_planes(d));
}

static void drain_apply(mrd *d, drain_req *r)
{
	unsigned p = r->plane;
	d->ops->drained[p] = (uint8_t)r->drain;
	snprintf(d->ops->by[p], sizeof(d->ops->by[p]), "%s", r->drain ? r->who : "");
	d->ops->ts[p] = r->drain ? r->ts : 0;
	apply(d, p);
	const char *name = d->cfg.planes[p].name;
	char detail[96];
	snprintf(detail, sizeof(detail), "by %s", r->who);
	mrd_info("plane %s: %s %s", name, r->drain ? "drained" : "undrained", detail);
	/* mrd_store_set_drained() logged the event with the flag; the
	 * monitors hear of it here. */
	mrd_ev ev = {
		.kind = r->drain ? MRD_STORE_EV_PLANE_DRAINED : MRD_STORE_EV_PLANE_RESTORED,
		.plane = (int)r->plane,
		.plane_name = name,
		.path = -1,
		.detail = detail,
		.stored = d->store != NULL,
	};
	mrd_bus_emit(&d->bus, &ev);
}

static void drain_work(uv_work_t *w)
{
	drain_req *r = w->data;
	/* A durable write (fsync): on this worker, never on the loop. */
	r->rc = mrd_store_set_drained(r->d->store, r->d->cfg.planes[r->plane].name, r->drain,
				      r->who, r->ts);
	if (r->rc < 0)
		snprintf(r->err, sizeof(r->err), "%s", mrd_store_errmsg(r->d->store));
}

static void drain_done(uv_work_t *w, int status)
{
	drain_req *r = w->data;
	mrd *d = r->d;
	d->ops->pending[r->plane] = 0;
	if (status < 0 || r->rc < 0) {
		/* Not durable, so not done: the operator retries. */
		if (!mrd_ctl_gone(r->cl))
			mrd_ctl_error(r->cl, r->id, "failed",
				      "plane %s: cannot record the change in the state "
				      "database (%s); nothing was changed",
				      d->cfg.planes[r->plane].name,
				      status < 0 ? uv_strerror(status) : r->err);
	} else {
		drain_apply(d, r);
		if (!mrd_ctl_gone(r->cl))
			mrd_ctl_reply(r->cl, r->id, drain_result(d, r->plane, 1, 1));
	}
	mrd_ctl_release(r->cl);
	json_decref(r->id);
	free(r);
}

static int arg_plane(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	mrd *d = mrd_ctl_daemon(cl);
	json_t *jp = json_object_get(args, "plane");
	int p = -1;
	if (json_is_string(jp))
		p = mrd_ops_plane_find(d, json_string_value(jp));
	else if (json_is_integer(jp) && json_integer_value(jp) >= 0 &&
		 json_integer_value(jp) < d->cfg.nplanes)
		p = (int)json_integer_value(jp);
	else {
		mrd_ctl_error(cl, id, "bad_request", "%s: args.plane (a name or index) is required",
			      cmd);
		return -1;
	}
	if (p < 0)
		mrd_ctl_error(cl, id, "not_found", "%s: no plane '%.40s'", cmd,
			      json_string_value(jp));
	return p;
}

static void cmd_drain(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args, int drain)
{
	mrd *d = mrd_ctl_daemon(cl);
	int p = arg_plane(cl, id, cmd, args);
	if (p < 0)
		return;
	json_t *jf = json_object_get(args, "force");
	if (jf && !json_is_boolean(jf)) {
		mrd_ctl_error(cl, id, "bad_request", "%s: args.force must be true or false", cmd);
		return;
	}
	if (d->ops->pending[p]) {
		mrd_ctl_error(cl, id, "busy", "%s: a change of plane %s is being recorded", cmd,
			      d->cfg.planes[p].name);
		return;
	}
	if (d->ops->drained[p] == drain) {
		mrd_ctl_reply(cl, id, drain_result(d, (unsigned)p, 0, d->store != NULL));
		return;
	}
	if (drain && !json_is_true(jf) && mrd_planes_up(d, (unsigned)p) &&
	    !d->ops->drill[p] && mrd_ops_usable_planes(d) <= 1) {
		mrd_ctl_error(cl, id, "refused",
			      "%s is the last usable plane: draining it stops "
			      "all traffic (use force to do it anyway)", d->cfg.planes[p].name);
		return;
	}
	drain_req *r = calloc(1, sizeof(*r));
	if (!r) {
		mrd_ctl_error(cl, id, "failed", "out of memory");
		return;
	}
	r->cl = cl;
	r->d = d;
	r->id = id ? json_incref(id) : NULL;
	r->plane = (unsigned)p;
	r->drain = drain;
	r->ts = mrd_wall_ns();
	snprintf(r->who, sizeof(r->who), "uid %u", (unsigned)mrd_ctl_uid(cl));
	if (!d->store) {
		mrd_warn("plane %s: %s without a state database: not kept across a restart",
			 d->cfg.planes[p].name, drain ? "drained" : "undrained");
		drain_apply(d, r);
		mrd_ctl_reply(cl, id, drain_result(d, (unsigned)p, 1, 0));
		json_decref(r->id);
		free(r);
		return;
	}
	r->w.data = r;
	d->ops->pending[p] = 1;
	mrd_ctl_hold(cl);
	int rv = uv_queue_work(d->loop, &r->w, drain_work, drain_done);
	if (rv < 0) {
		d->ops->pending[p] = 0;
		mrd_ctl_release(cl);
		mrd_ctl_error(cl, id, "failed", "%s: %s", cmd, uv_strerror(rv));
		json_decref(r->id);
		free(r);
	}
}

/* ---- path commands ------------------------------------------------------- */

static void cmd_path(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	mrd *d = mrd_ctl_daemon(cl);
	const char *verb = cmd + 5; /* "path steer" -> "steer" */
	json_t *jc = json_object_get(args, "conn"), *jp = json_object_get(args, "path");
	uint32_t cid = 0;
	if (json_is_string(jc)) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(json_string_value(jc), &end, 16);
		if (*json_string_value(jc) && !*end && !errno && v && v <= UINT32_MAX)
			cid = (uint32_t)v;
	}
	if (!cid || !json_is_integer(jp) || json_integer_value(jp) < 0 ||
	    json_integer_value(jp) > 65535) {
		mrd_ctl_error(cl, id, "bad_request",
			      "%s: args.conn (a connection id in hex) and args.path (an integer) "
			      "are required", cmd);
		return;
	}
	uint16_t pid = (uint16_t)json_integer_value(jp);
	mrd_conn *c = mrd_conn_find(d, cid);
	mrp_path_info before;
	if (!c || !mrd_conn_has_engine(c) || c->state != MRD_CONN_ESTABLISHED) {
		mrd_ctl_error(cl, id, "not_found", "%s: no established connection %08x", cmd, cid);
		return;
	}
	if (pid >= c->max_paths || mrd_conn_path_info(c, pid, &before) < 0) {
		mrd_ctl_error(cl, id, "not_found", "%s: connection %08x has no path %u", cmd, cid,
			      pid);
		return;
	}
	uint64_t now = uv_hrtime();
	int rv;
	char detail[128];
	mrd_store_event_kind kind;
	if (strcmp(verb, "disable") == 0) {
		rv = mrd_conn_path_disable(c, pid, now);
		kind = MRD_STORE_EV_PATH_DISABLED;
		snprintf(detail, sizeof(detail), "disabled by uid %u", (unsigned)mrd_ctl_uid(cl));
	} else if (strcmp(verb, "enable") == 0) {
		rv = mrd_conn_path_enable(c, pid, now);
		kind = MRD_STORE_EV_PATH_ENABLED;
		snprintf(detail, sizeof(detail), "enabled by uid %u", (unsigned)mrd_ctl_uid(cl));
	} else {
		json_t *jport = json_object_get(args, "port"), *jpl = json_object_get(args, "plane");
		int sport = 0, pair = -1;
		if (strcmp(verb, "steer") == 0) {
			if (!jport == !jpl ||
			    (jport && (!json_is_integer(jport) || json_integer_value(jport) < 1 ||
				       json_integer_value(jport) > 65535))) {
				mrd_ctl_error(cl, id, "bad_request",
					      "path steer: exactly one of args.port (1-65535) "
					      "and args.plane is required");
				return;
			}
			if (jport)
				sport = (int)json_integer_value(jport);
			if (jpl) {
				int lp = arg_plane(cl, id, cmd, args);
				if (lp < 0)
					return;
				for (unsigned i = 0; i < c->npairs && pair < 0; i++)
					if (c->pairs[i].lplane == lp)
						pair = (int)i;
				if (pair < 0) {
					mrd_ctl_error(cl, id, "not_found",
						      "path steer: connection %08x does not use "
						      "plane %s", cid, d->cfg.planes[lp].name);
					return;
				}
			}
		}
		/* reset: a new random source port on the same plane. */
		rv = mrd_conn_path_steer(c, pid, (uint16_t)sport, pair, now);
		kind = MRD_STORE_EV_PATH_STEERED;
		mrp_path_info after;
		mrd_conn_path_info(c, pid, &after);
		const char *pn0 = before.plane < c->npairs
					  ? d->cfg.planes[c->pairs[before.plane].lplane].name
					  : "?";
		const char *pn1 = after.plane < c->npairs
					  ? d->cfg.planes[c->pairs[after.plane].lplane].name
					  : "?";
		snprintf(detail, sizeof(detail), "%s by uid %u: sport %u -> %u, plane %s -> %s",
			 verb, (unsigned)mrd_ctl_uid(cl), before.sport, after.sport, pn0, pn1);
	}
	if (rv == MRP_ERR_INVAL) {
		mrd_ctl_error(cl, id, "bad_request",
			      "path steer: port %d is outside the connection's source ports",
			      (int)json_integer_value(json_object_get(args, "port")));
		return;
	}
	if (rv < 0) {
		mrd_ctl_error(cl, id, "failed", "%s: %s", cmd, mrp_strerror(rv));
		return;
	}
	mrd_conn_touch(c);
	mrd_peer_run(d);
	mrp_path_info pi;
	mrd_conn_path_info(c, pid, &pi);
	int lplane = pi.plane < c->npairs ? (int)c->pairs[pi.plane].lplane : -1;
	const char *plane = lplane >= 0 ? d->cfg.planes[lplane].name : NULL;
	mrd_info("conn %08x path %u: %s", cid, pid, detail);
	mrd_emit(&d->bus, kind, lplane, plane, cid, pid, detail);
	json_t *res = json_pack("{s:o, s:i, s:s, s:s, s:i, s:i, s:s, s:s}", "conn", conn_hex(cid),
				"path", (int)pid, "action", verb, "plane", plane ? plane : "",
				"sport", (int)pi.sport, "gen", (int)pi.gen, "state",
				mrp_path_state_name(pi.state), "detail", detail);
	mrd_ctl_reply(cl, id, res);
}

/* ---- history ------------------------------------------------------------- */

enum { H_EVENTS, H_DRILLS, H_PATHS, H_PLANES };

#define HISTORY_LIMIT_DEFAULT 10000
#define HISTORY_LIMIT_MAX 100000

typedef struct hist_req {
	uv_work_t w;
	mrd_ctl_client *cl;
	mrd_store *store;
	json_t *id;
	int kind;
	int64_t since;
	size_t limit;
	json_t *rows;
	json_t *older; /* 1-minute aggregates before the first raw sample */
	int64_t first_raw;
	int truncated;
	int rc;
	char err[160];
} hist_req;

static int take(hist_req *r, json_t *rows, json_t *o)
{
	if (json_array_size(r->rows) + json_array_size(r->older) >= r->limit) {
		json_decref(o);
		r->truncated = 1;
		return 1; /* stop the walk */
	}
	json_array_append_new(rows, o);
	return 0;
}

static json_t *id_json(uint64_t v)
{
	if (v == MRD_STORE_NO_ID)
		return json_null();
	if (v <= UINT32_MAX)
		return conn_hex((uint32_t)v);
	return json_integer((json_int_t)v);
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static int h_event(const mrd_store_event_row *e, void *ud)
{
	hist_req *r = ud;
	json_t *o = json_object();
	json_object_set_new(o, "ts", json_real((double)e->ts_ns / 1e9));
	json_object_set_new(o, "kind", str_or_null(e->kind));
	json_object_set_new(o, "plane", str_or_null(e->plane));
	json_object_set_new(o, "conn", id_json(e->conn_id));
	json_object_set_new(o, "path", e->path_id == MRD_STORE_NO_ID
					       ? json_null()
					       : json_integer((json_int_t)e->path_id));
	json_object_set_new(o, "detail", str_or_null(e->detail));
	return take(r, r->rows, o);
}

static int h_drill(const mrd_store_drill_row *e, void *ud)
{
	hist_req *r = ud;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_integer((json_int_t)e->id));
	json_object_set_new(o, "plane", str_or_null(e->plane));
	json_object_set_new(o, "kind", str_or_null(e->kind));
	json_object_set_new(o, "started_ts", json_real((double)e->started_ts_ns / 1e9));
	json_object_set_new(o, "ended_ts", e->ended_ts_ns ? json_real((double)e->ended_ts_ns / 1e9)
							  : json_null());
	json_t *rep = e->result_json ? json_loads(e->result_json, 0, NULL) : NULL;
	json_object_set_new(o, "report", rep ? rep : str_or_null(e->result_json));
	return take(r, r->rows, o);
}

static int h_path(const mrd_store_path_sample_row *e, void *ud)
{
	hist_req *r = ud;
	if (!r->first_raw)
		r->first_raw = e->ts_ns;
	json_t *o = json_object();
	json_object_set_new(o, "ts", json_real((double)e->ts_ns / 1e9));
	json_object_set_new(o, "resolution", json_string("raw"));
	json_object_set_new(o, "conn", id_json(e->conn_id));
	json_object_set_new(o, "path", json_integer((json_int_t)e->path_id));
	json_object_set_new(o, "plane", str_or_null(e->plane));
	json_object_set_new(o, "sport", json_integer(e->sport));
	json_object_set_new(o, "state", str_or_null(e->state));
	json_object_set_new(o, "srtt_us", json_real((double)e->srtt_ns / 1e3));
	json_object_set_new(o, "ecn_fraction", json_real(e->ecn_fraction));
	json_object_set_new(o, "lost_pkts", json_integer((json_int_t)e->lost_pkts));
	json_object_set_new(o, "retx_pkts", json_integer((json_int_t)e->retx_pkts));
	json_object_set_new(o, "utilization", json_real(e->utilization));
	json_object_set_new(o, "tx_bytes_per_s", json_integer((json_int_t)e->tx_bytes_per_s));
	return take(r, r->rows, o);
}

static int h_path_min(const mrd_store_path_minute *e, void *ud)
{
	hist_req *r = ud;
	if (r->first_raw && e->ts_ns >= r->first_raw)
		return 1; /* the raw samples cover the rest */
	json_t *o = json_object();
	json_object_set_new(o, "ts", json_real((double)e->ts_ns / 1e9));
	json_object_set_new(o, "resolution", json_string("1m"));
	json_object_set_new(o, "conn", id_json(e->conn_id));
	json_object_set_new(o, "path", json_integer((json_int_t)e->path_id));
	json_object_set_new(o, "plane", str_or_null(e->plane));
	json_object_set_new(o, "sports", json_integer(e->sports));
	json_object_set_new(o, "samples", json_integer((json_int_t)e->samples));
	json_object_set_new(o, "srtt_us", json_real(e->srtt_avg_ns / 1e3));
	json_object_set_new(o, "srtt_max_us", json_real((double)e->srtt_max_ns / 1e3));
	json_object_set_new(o, "ecn_fraction", json_real(e->ecn_avg));
	json_object_set_new(o, "ecn_max", json_real(e->ecn_max));
	json_object_set_new(o, "lost_pkts", json_integer((json_int_t)e->lost_pkts));
	json_object_set_new(o, "retx_pkts", json_integer((json_int_t)e->retx_pkts));
	json_object_set_new(o, "utilization", json_real(e->util_avg));
	json_object_set_new(o, "util_max", json_real(e->util_max));
	json_object_set_new(o, "tx_bytes_per_s", json_real(e->tx_avg_bytes_per_s));
	return take(r, r->older, o);
}

static int h_plane(const mrd_store_plane_sample_row *e, void *ud)
{
	hist_req *r = ud;
	if (!r->first_raw)
		r->first_raw = e->ts_ns;
	json_t *o = json_object();
	json_object_set_new(o, "ts", json_real((double)e->ts_ns / 1e9));
	json_object_set_new(o, "resolution", json_string("raw"));
	json_object_set_new(o, "plane", str_or_null(e->plane));
	json_object_set_new(o, "state", str_or_null(e->state));
	json_object_set_new(o, "tx_bytes_per_s", json_integer((json_int_t)e->tx_bytes_per_s));
	json_object_set_new(o, "rx_bytes_per_s", json_integer((json_int_t)e->rx_bytes_per_s));
	json_object_set_new(o, "utilization", json_real(e->utilization));
	return take(r, r->rows, o);
}

static int h_plane_min(const mrd_store_plane_minute *e, void *ud)
{
	hist_req *r = ud;
	if (r->first_raw && e->ts_ns >= r->first_raw)
		return 1;
	json_t *o = json_object();
	json_object_set_new(o, "ts", json_real((double)e->ts_ns / 1e9));
	json_object_set_new(o, "resolution", json_string("1m"));
	json_object_set_new(o, "plane", str_or_null(e->plane));
	json_object_set_new(o, "samples", json_integer((json_int_t)e->samples));
	json_object_set_new(o, "down_samples", json_integer((json_int_t)e->down_samples));
	json_object_set_new(o, "tx_bytes_per_s", json_real(e->tx_avg_bytes_per_s));
	json_object_set_new(o, "tx_max_bytes_per_s", json_integer((json_int_t)e->tx_max_bytes_per_s));
	json_object_set_new(o, "rx_bytes_per_s", json_real(e->rx_avg_bytes_per_s));
	json_object_set_new(o, "rx_max_bytes_per_s", json_integer((json_int_t)e->rx_max_bytes_per_s));
	json_object_set_new(o, "utilization", json_real(e->util_avg));
	json_object_set_new(o, "util_max", json_real(e->util_max));
	return take(r, r->older, o);
}

static void hist_work(uv_work_t *w)
{
	hist_req *r = w->data;
	/* Whatever is queued goes in first, so the answer includes what just
	 * happened. sqlite blocks: this runs on a worker. */
	mrd_store_flush(r->store);
	switch (r->kind) {
	case H_EVENTS:
		r->rc = mrd_store_query_events(r->store, r->since, h_event, r);
		break;
	case H_DRILLS:
		r->rc = mrd_store_query_drills(r->store, r->since, h_drill, r);
		break;
	case H_PATHS:
		r->rc = mrd_store_query_path_samples(r->store, r->since, h_path, r);
		if (r->rc >= 0)
			r->rc = mrd_store_query_path_minutes(r->store, r->since, h_path_min, r);
		break;
	case H_PLANES:
		r->rc = mrd_store_query_plane_samples(r->store, r->since, h_plane, r);
		if (r->rc >= 0)
			r->rc = mrd_store_query_plane_minutes(r->store, r->since, h_plane_min, r);
		break;
	}
	if (r->rc < 0)
		snprintf(r->err, sizeof(r->err), "%s", mrd_store_errmsg(r->store));
}

static const char *const hist_names[] = {"events", "drills", "paths", "planes"};

static void hist_done(uv_work_t *w, int status)
{
	hist_req *r = w->data;
	if (!mrd_ctl_gone(r->cl)) {
		if (status < 0 || r->rc < 0) {
			mrd_ctl_error(r->cl, r->id, "failed", "history %s: %s", hist_names[r->kind],
				      status < 0 ? uv_strerror(status) : r->err);
		} else {
			/* Older 1-minute aggregates first, then the raw samples. */
			json_array_extend(r->older, r->rows);
			mrd_ctl_reply(r->cl, r->id,
				      json_pack("{s:s, s:f, s:O, s:b}", "kind", hist_names[r->kind],
						"since", (double)r->since / 1e9, "rows", r->older,
						"truncated", r->truncated));
		}
	}
	mrd_ctl_release(r->cl);
	json_decref(r->rows);
	json_decref(r->older);
	json_decref(r->id);
	free(r);
}

static void cmd_history(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	mrd *d = mrd_ctl_daemon(cl);
	int kind = -1;
	for (int i = 0; i < 4; i++)
		if (strcmp(cmd + 8, hist_names[i]) == 0)
			kind = i;
	json_t *js = json_object_get(args, "since_s"), *jl = json_object_get(args, "limit");
	double since_s = js ? json_number_value(js) : 3600;
	json_int_t limit = jl ? (json_is_integer(jl) ? json_integer_value(jl) : -1)
			      : HISTORY_LIMIT_DEFAULT;
	if ((js && !json_is_number(js)) || !(since_s > 0 && since_s <= 400.0 * 86400) ||
	    limit < 1 || limit > HISTORY_LIMIT_MAX) {
		mrd_ctl_error(cl, id, "bad_request",
			      "%s: args.since_s must be seconds in (0, 34560000], args.limit "
			      "an integer 1-%d", cmd, HISTORY_LIMIT_MAX);
		return;
	}
	if (!d->store) {
		mrd_ctl_error(cl, id, "failed", "%s: the daemon runs without a state database", cmd);
		return;
	}
	hist_req *r = calloc(1, sizeof(*r));
	if (!r) {
		mrd_ctl_error(cl, id, "failed", "out of memory");
		return;
	}
	r->cl = cl;
	r->store = d->store;
	r->id = id ? json_incref(id) : NULL;
	r->kind = kind;
	r->since = mrd_wall_ns() - (int64_t)(since_s * 1e9);
	r->limit = (size_t)limit;
	r->rows = json_array();
	r->older = json_array();
	r->w.data = r;
	mrd_ctl_hold(cl);
	int rv = uv_queue_work(d->loop, &r->w, hist_work, hist_done);
	if (rv < 0) {
		mrd_ctl_release(cl);
		mrd_ctl_error(cl, id, "failed", "%s: %s", cmd, uv_strerror(rv));
		json_decref(r->rows);
		json_decref(r->older);
		json_decref(r->id);
		free(r);
	}
}

/* ---- commands ------------------------------------------------------------ */

static void do_drain(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	cmd_drain(cl, id, cmd, args, 1);
}

static void do_undrain(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	cmd_drain(cl, id, cmd, args, 0);
}

static void do_monitor(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd, (void)args;
	mrd_ctl_subscribe(cl);
	mrd_ctl_reply(cl, id, json_pack("{s:b}", "subscribed", 1));
}

static const mrd_ctl_cmd cmds[] = {
	{"plane drain", do_drain, MRD_CTL_ACT, 0},
	{"plane undrain", do_undrain, MRD_CTL_ACT, 0},
	{"path steer", cmd_path, MRD_CTL_ACT, 0},
	{"path disable", cmd_path, MRD_CTL_ACT, 0},
	{"path enable", cmd_path, MRD_CTL_ACT, 0},
	{"path reset", cmd_path, MRD_CTL_ACT, 0},
	{"history events", cmd_history, MRD_CTL_READ, 0},
	{"history drills", cmd_history, MRD_CTL_READ, 0},
	{"history paths", cmd_history, MRD_CTL_READ, 0},
	{"history planes", cmd_history, MRD_CTL_READ, 0},
	{"monitor", do_monitor, MRD_CTL_READ, 0},
};

int mrd_ops_register(mrd *d)
{
	return mrd_ctl_register(d, cmds, sizeof(cmds) / sizeof(cmds[0]));
}
