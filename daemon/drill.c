/* Failover drills (drill.h). */
#include "drill.h"

#include <errno.h>
#include <inttypes.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "datapath.h"
#include "log.h"
#include "mrd.h"
#include "ops.h"
#include "peer.h"
#include "perf.h"
#include "planes.h"

#define NS 1000000000ull
#define MS 1000000ull
#define PRE_NS (1 * NS)        /* baseline before the plane goes out */
#define BASE_WINDOW_NS (NS / 2) /* the baseline rate: the last half second of it */
#define POST_NS (1 * NS)       /* measured after the plane is back */
#define REDIST_WINDOW_NS (50 * MS)
#define RING 128               /* ticks of 1 ms kept for the redistribution window */
#define FLOWING_BYTES (1u << 20) /* perf traffic has started */
#define FLOWING_WAIT_NS (5 * NS)
#define DURATION_MAX_S 600.0

enum { PH_PERSIST, PH_PRE, PH_OUT, PH_POST, PH_WAIT, PH_DONE };

typedef struct drill {
	mrd *d;
	mrd_ctl_client *cl; /* NULL once the requester has gone */
	json_t *id;
	uint64_t drill_id;
	unsigned plane;
	int link, ifindex;
	char ifname[IFNAMSIZ];
	char peer[128];
	double duration_s, auto_revert_s;
	int phase, taken_out, cancelled, link_error, flowing;
	uint64_t tx_start;
	char reason[96];
	int64_t started_wall;
	uint64_t t0, t_mark, t_action, t_restore, t_end, t_detect, t_redist;
	uint64_t tx_mark, tx_action, tx_restore, tx_end;
	uint64_t oth_action, oth_restore;
	uint64_t retx0, lost0, retx1, lost1;
	double pre_rate, target_rate;
	uint64_t rt[RING], roth[RING];
	unsigned rhead, rn;
	uv_timer_t timer;
	uv_work_t w;
	mrd_perf_op *perf;
	json_t *perf_result;
	char perf_err[160];
} drill;


uint64_t mrd_drill_count(const mrd *d)
{
	return d->drills->count;
}

/* ---- the link, through rtnetlink ------------------------------------------ */

/* Set IFF_UP of ifindex; 0 or -errno. A short blocking exchange with the
 * kernel (one message and its ACK), as `ip link set` does. */
static int set_link(int ifindex, int up)
{
	char buf[8192];
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	if (!nl)
		return -errno;
	int rv = 0;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rv = -errno;
		goto out;
	}
	struct timeval tv = {.tv_sec = 2, .tv_usec = 0};
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	uint32_t seq = (uint32_t)time(NULL);
	nlh->nlmsg_seq = seq;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	ifm->ifi_change = IFF_UP;
	ifm->ifi_flags = up ? IFF_UP : 0;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		rv = -errno;
		goto out;
	}
	ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (n < 0) {
		rv = -errno;
		goto out;
	}
	if (mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl), NULL, NULL) < 0)
		rv = -errno;
out:
	mnl_socket_close(nl);
	return rv;
}

/* ---- measurements ---------------------------------------------------------- */

static void tx_counts(const drill *r, uint64_t *tot, uint64_t *oth)
{
	*tot = *oth = 0;
	for (unsigned i = 0; i < r->d->dp->nplanes; i++) {
		*tot += r->d->dp->planes[i].tx_bytes;
		if (i != r->plane)
			*oth += r->d->dp->planes[i].tx_bytes;
	}
}

static void conn_losses(const mrd *d, uint64_t *retx, uint64_t *lost)
{
	*retx = *lost = 0;
	for (const mrd_conn *c = d->peers->all; c; c = c->next) {
		if (!mrd_conn_has_engine(c))
			continue;
		mrp_conn_stats st;
		mrd_conn_get_stats(c, &st);
		*retx += st.retx_pkts;
		*lost += st.lost_pkts;
	}
}

static double gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes * 8 / (double)ns : 0; /* bits per ns = Gbit/s */
}

/* A drill's detection: a path of the plane out stops carrying data (from
 * whatever state it was in: under loss it may be suspect already), or the
 * plane goes down. */
void mrd_drill_on_event(void *ud, const mrd_ev *ev)
{
	mrd *d = ud;
	drill *cur = d->drills->cur;
	if (!cur || cur->phase != PH_OUT || cur->t_detect || ev->plane < 0 ||
	    (unsigned)ev->plane != cur->plane)
		return;
	int hit = ev->kind == MRD_STORE_EV_PLANE_DOWN;
	if (ev->from)
		hit = ev->new_state == MRP_PATH_SUSPECT || ev->new_state == MRP_PATH_FAILED ||
		      ev->new_state == MRP_PATH_DISABLED;
	if (hit)
		cur->t_detect = uv_hrtime();
}

/* ---- the report ------------------------------------------------------------ */

static json_t *ms_or_null(uint64_t t, uint64_t from)
{
	return t && from && t >= from ? json_real((double)(t - from) / 1e6) : json_null();
}

static json_t *report(drill *r)
{
	mrd *d = r->d;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_integer((json_int_t)r->drill_id));
	json_object_set_new(o, "plane", json_string(d->cfg.planes[r->plane].name));
	json_object_set_new(o, "action", json_string(r->link ? "link" : "admin"));
	json_object_set_new(o, "interface", r->ifname[0] ? json_string(r->ifname) : json_null());
	json_object_set_new(o, "peer", r->peer[0] ? json_string(r->peer) : json_null());
	json_object_set_new(o, "started_ts", json_real((double)r->started_wall / 1e9));
	json_object_set_new(o, "duration_s", json_real(r->duration_s));
	json_object_set_new(o, "auto_revert_s", json_real(r->auto_revert_s));
	json_object_set_new(o, "taken_out", json_boolean(r->taken_out));
	json_object_set_new(o, "out_s", r->t_restore && r->t_action
					  ? json_real((double)(r->t_restore - r->t_action) / 1e9)
					  : json_null());
	json_object_set_new(o, "cancelled", json_boolean(r->cancelled));
	json_object_set_new(o, "reason", json_string(r->reason));
	json_object_set_new(o, "restored", json_boolean(!r->taken_out || r->t_restore));
	json_object_set_new(o, "detection_ms", ms_or_null(r->t_detect, r->t_action));
	json_object_set_new(o, "redistribution_ms", ms_or_null(r->t_redist, r->t_action));
	json_object_set_new(o, "redistribution_target_gbps", json_real(r->target_rate * 8 / 1e9));
	json_t *tp = json_object();
	json_object_set_new(tp, "before", json_real(r->t_action > r->t_mark && r->t_mark
		? gbps(r->tx_action - r->tx_mark, r->t_action - r->t_mark) : 0));
	json_object_set_new(tp, "during", json_real(r->t_restore > r->t_action && r->t_action
		? gbps(r->tx_restore - r->tx_action, r->t_restore - r->t_action) : 0));
	json_object_set_new(tp, "during_surviving_planes", json_real(
		r->t_restore > r->t_action && r->t_action
			? gbps(r->oth_restore - r->oth_action, r->t_restore - r->t_action) : 0));
	json_object_set_new(tp, "after", json_real(r->t_end > r->t_restore && r->t_restore
		? gbps(r->tx_end - r->tx_restore, r->t_end - r->t_restore) : 0));
	json_object_set_new(o, "tx_gbps", tp);
	uint64_t retx = r->retx1 >= r->retx0 ? r->retx1 - r->retx0 : 0;
	uint64_t lost = r->lost1 >= r->lost0 ? r->lost1 - r->lost0 : 0;
	json_t *pr = r->perf_result;
	if (pr) {
		/* The perf connection lived through the whole drill: its own
		 * counters are exact. */
		json_t *st = json_object_get(json_object_get(pr, "conn"), "stats");
		retx = (uint64_t)json_integer_value(json_object_get(st, "retx_pkts"));
		lost = (uint64_t)json_integer_value(json_object_get(st, "lost_pkts"));
	}
	json_object_set_new(o, "retx_pkts", json_integer((json_int_t)retx));
	json_object_set_new(o, "lost_pkts", json_integer((json_int_t)lost));
	int pass = !r->cancelled && !r->link_error && (!r->taken_out || r->t_restore);
	if (r->peer[0]) {
		json_t *p = json_object();
		if (pr) {
			json_int_t sent = json_integer_value(json_object_get(pr, "messages"));
			json_int_t ver = json_integer_value(json_object_get(pr, "verified_messages"));
			json_int_t errs = json_integer_value(json_object_get(pr, "verify_errors"));
			json_object_set_new(p, "completions", json_integer(sent));
			json_object_set_new(p, "verified_messages", json_integer(ver));
			json_object_set_new(p, "verify_errors", json_integer(errs));
			json_object_set_new(p, "lost_completions", json_integer(sent > ver ? sent - ver : 0));
			json_object_set_new(p, "duplicated_completions",
					    json_integer(ver > sent ? ver - sent : 0));
			json_object_set_new(p, "verified", json_incref(json_object_get(pr, "verified")));
			json_object_set_new(p, "goodput_gbps",
					    json_incref(json_object_get(pr, "goodput_gbps")));
			pass = pass && json_is_true(json_object_get(pr, "verified")) && errs == 0 &&
			       sent == ver;
		} else {
			json_object_set_new(p, "error", json_string(r->perf_err[0] ? r->perf_err
										   : "no result"));
			pass = 0;
		}
		json_object_set_new(o, "perf", p);
	} else {
		json_object_set_new(o, "perf", json_null());
	}
	json_object_set_new(o, "pass", json_boolean(pass));
	return o;
}

/* ---- phases ---------------------------------------------------------------- */

static void drill_closed(uv_handle_t *h)
{
	drill *r = h->data;
	json_decref(r->id);
	json_decref(r->perf_result);
	free(r);
}

static void restore(drill *r)
{
	if (!r->taken_out || r->t_restore)
		return;
	mrd *d = r->d;
	if (r->link) {
		int rv = set_link(r->ifindex, 1);
		if (rv < 0) {
			r->link_error = 1;
			mrd_err("drill %" PRIu64 ": cannot set %s up again: %s: do it by hand "
				"(ip link set %s up)", r->drill_id, r->ifname, strerror(-rv),
				r->ifname);
		}
	} else {
		mrd_ops_drill_hold(d, r->plane, 0);
	}
	r->t_restore = uv_hrtime();
	tx_counts(r, &r->tx_restore, &r->oth_restore);
	mrd_info("drill %" PRIu64 ": plane %s given back", r->drill_id,
		 d->cfg.planes[r->plane].name);
}

static void finish(drill *r)
{
	mrd *d = r->d;
	restore(r);
	if (r->perf) {
		mrd_perf_cancel(r->perf);
		r->perf = NULL;
	}
	if (!r->t_end) {
		r->t_end = uv_hrtime();
		tx_counts(r, &r->tx_end, &(uint64_t){0});
	}
	conn_losses(d, &r->retx1, &r->lost1);
	r->phase = PH_DONE;
	uv_timer_stop(&r->timer);
	json_t *rep = report(r);
	char *text = json_dumps(rep, JSON_COMPACT);
	const char *plane = d->cfg.planes[r->plane].name;
	mrd_store_drill row = {.id = r->drill_id, .plane = plane, .kind = "plane-failover",
			       .started_ts_ns = r->started_wall, .ended_ts_ns = mrd_wall_ns(),
			       .result_json = text};
	if (d->store)
		mrd_store_drill_update(d->store, &row);
	char detail[256], det[32] = "n/a", red[32] = "n/a";
	json_t *jd = json_object_get(rep, "detection_ms"), *jr = json_object_get(rep, "redistribution_ms");
	if (json_is_number(jd))
		snprintf(det, sizeof(det), "%.3f ms", json_number_value(jd));
	if (json_is_number(jr))
		snprintf(red, sizeof(red), "%.3f ms", json_number_value(jr));
	snprintf(detail, sizeof(detail), "drill %" PRIu64 " %s%s: detection %s, redistribution %s%s%s",
		 r->drill_id, json_is_true(json_object_get(rep, "pass")) ? "passed" : "failed",
		 r->cancelled ? " (cancelled)" : "", det, red, r->reason[0] ? "; " : "", r->reason);
	mrd_emit(&d->bus, MRD_STORE_EV_DRILL_ENDED, (int)r->plane, plane, 0, -1, detail);
	free(text);
	if (r->cl) {
		mrd_ctl_clear_op(r->cl);
		mrd_ctl_reply(r->cl, r->id, rep);
		r->cl = NULL;
	} else {
		json_decref(rep);
	}
	r->d->drills->cur = NULL;
	uv_close((uv_handle_t *)&r->timer, drill_closed);
}

static void take_out(drill *r)
{
	mrd *d = r->d;
	uint64_t now = uv_hrtime();
	tx_counts(r, &r->tx_action, &r->oth_action);
	r->t_action = now;
	conn_losses(d, &r->retx0, &r->lost0);
	if (r->t_mark && now > r->t_mark)
		r->pre_rate = (double)(r->tx_action - r->tx_mark) * 1e9 / (double)(now - r->t_mark);
	/* Redistributed: the surviving planes carry 90% of what all planes
	 * carried before, or of their own capacity if that is less. */
	double cap = 0;
	int known = 1;
	for (unsigned i = 0; i < d->cfg.nplanes; i++) {
		if (i == r->plane || !mrd_planes_up(d, i) || mrd_ops_plane_drained(d, i))
			continue;
		uint64_t s = mrd_planes_speed(d, i);
		known &= s != 0;
		cap += (double)s / 8;
	}
	double base = known && cap < r->pre_rate ? cap : r->pre_rate;
	r->target_rate = 0.9 * base;
	r->phase = PH_OUT;
	r->taken_out = 1;
	mrd_info("drill %" PRIu64 ": taking plane %s out (%s) for %.3f s", r->drill_id,
		 d->cfg.planes[r->plane].name, r->link ? "link down" : "administratively",
		 r->duration_s < r->auto_revert_s ? r->duration_s : r->auto_revert_s);
	if (r->link) {
		int rv = set_link(r->ifindex, 0);
		if (rv < 0) {
			r->taken_out = 0;
			r->link_error = 1;
			snprintf(r->reason, sizeof(r->reason), "cannot set %s down: %s", r->ifname,
				 strerror(-rv));
			finish(r);
			return;
		}
	} else {
		mrd_ops_drill_hold(d, r->plane, 1);
	}
}

static void on_tick(uv_timer_t *t)
{
	drill *r = t->data;
	uint64_t now = uv_hrtime(), tot, oth;
	tx_counts(r, &tot, &oth);
	r->rt[r->rhead] = now;
	r->roth[r->rhead] = oth;
	r->rhead = (r->rhead + 1) % RING;
	if (r->rn < RING)
		r->rn++;
	switch (r->phase) {
	case PH_PRE:
		if (r->peer[0] && !r->flowing) {
			/* The timeline starts when the perf data flows (its
			 * handshake and the peer's region set-up come first). */
			if (tot - r->tx_start >= FLOWING_BYTES) {
				r->flowing = 1;
				r->t0 = now;
			} else if (now - r->t0 >= FLOWING_WAIT_NS) {
				snprintf(r->reason, sizeof(r->reason),
					 "no perf traffic to %.40s within %.0f s", r->peer,
					 (double)FLOWING_WAIT_NS / 1e9);
				finish(r);
			}
			break;
		}
		if (!r->t_mark && now >= r->t0 + PRE_NS - BASE_WINDOW_NS) {
			r->t_mark = now;
			r->tx_mark = tot;
		}
		if (now >= r->t0 + PRE_NS)
			take_out(r);
		break;
	case PH_OUT: {
		if (!r->t_redist && r->target_rate > 0) {
			/* The oldest kept tick at least REDIST_WINDOW_NS ago. */
			for (unsigned k = 1; k < r->rn; k++) {
				unsigned i = (r->rhead + RING - 1 - k) % RING;
				if (now - r->rt[i] >= REDIST_WINDOW_NS) {
					double rate = (double)(oth - r->roth[i]) * 1e9 /
						      (double)(now - r->rt[i]);
					/* The time from which the other planes
					 * carried the target for a whole window:
					 * its start (so it may be under 50 ms). */
					if (r->rt[i] >= r->t_action && rate >= r->target_rate)
						r->t_redist = r->rt[i];
					break;
				}
			}
		}
		double out = r->duration_s < r->auto_revert_s ? r->duration_s : r->auto_revert_s;
		if (now >= r->t_action + (uint64_t)(out * 1e9)) {
			if (r->auto_revert_s < r->duration_s)
				snprintf(r->reason, sizeof(r->reason), "auto-revert after %.3f s",
					 r->auto_revert_s);
			restore(r);
			r->phase = PH_POST;
		}
		break;
	}
	case PH_POST:
		if (now >= r->t_restore + POST_NS) {
			r->t_end = now;
			r->tx_end = tot;
			if (r->perf) {
				r->phase = PH_WAIT; /* the perf result comes soon */
				uv_timer_set_repeat(&r->timer, 50);
			} else {
				finish(r);
			}
		}
		break;
	default:
		break;
	}
}

static void perf_done(void *ud, json_t *result, const char *err)
{
	drill *r = ud;
	r->perf = NULL;
	if (err)
		snprintf(r->perf_err, sizeof(r->perf_err), "%s", err);
	r->perf_result = result;
	if (r->phase == PH_WAIT)
		finish(r);
	else if (r->phase == PH_PRE || r->phase == PH_OUT) {
		/* The traffic is gone: nothing more to measure. */
		snprintf(r->reason, sizeof(r->reason), "perf ended early: %s",
			 err ? err : "before the drill");
		finish(r);
	}
}

/* The requester went away (Ctrl-C) or the daemon stops. */
static void cancel(void *ud)
{
	drill *r = ud;
	r->cl = NULL;
	if (r->phase == PH_DONE)
		return;
	r->cancelled = 1;
	if (!r->reason[0])
		snprintf(r->reason, sizeof(r->reason), "cancelled: the requester went away");
	if (r->phase == PH_PERSIST)
		return; /* persist_done finishes it */
	finish(r);
}

static void persist_work(uv_work_t *w)
{
	drill *r = w->data;
	mrd_store_flush(r->d->store);
}

static void start_phases(drill *r)
{
	mrd *d = r->d;
	if (r->cancelled) {
		finish(r);
		return;
	}
	r->phase = PH_PRE;
	r->t0 = uv_hrtime();
	uint64_t oth;
	tx_counts(r, &r->tx_start, &oth);
	if (r->peer[0]) {
		char err[160];
		double secs = (double)(PRE_NS + POST_NS) / 1e9 + r->duration_s + 0.5;
		if (r->auto_revert_s < r->duration_s)
			secs = (double)(PRE_NS + POST_NS) / 1e9 + r->auto_revert_s + 0.5;
		if (mrd_perf_start(d, r->peer, secs, 0, MRD_PERF_MSG_DEFAULT, perf_done, r, &r->perf,
				   err, sizeof(err)) < 0) {
			snprintf(r->reason, sizeof(r->reason), "perf to %.40s: %.40s", r->peer, err);
			snprintf(r->perf_err, sizeof(r->perf_err), "%s", err);
			finish(r);
			return;
		}
		mrd_peer_run(d);
	}
	uv_timer_start(&r->timer, on_tick, 1, 1);
}

static void persist_done(uv_work_t *w, int status)
{
	(void)status;
	start_phases(w->data);
}

/* ---- the command ------------------------------------------------------------ */

static double num_arg(json_t *args, const char *k, double dflt, int *bad)
{
	json_t *v = json_object_get(args, k);
	if (!v)
		return dflt;
	if (!json_is_number(v))
		*bad = 1;
	return json_number_value(v);
}

static void cmd_drill(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	mrd *d = mrd_ctl_daemon(cl);
	if (strcmp(cmd, "drill cancel") == 0) {
		if (!d->drills->cur || d->drills->cur->phase == PH_DONE) {
			mrd_ctl_error(cl, id, "not_found", "drill cancel: no drill is running");
			return;
		}
		drill *r = d->drills->cur;
		json_t *res = json_pack("{s:I, s:s}", "id", (json_int_t)r->drill_id, "plane",
					d->cfg.planes[r->plane].name);
		r->cancelled = 1;
		snprintf(r->reason, sizeof(r->reason), "cancelled by uid %u",
			 (unsigned)mrd_ctl_uid(cl));
		/* The drill's own requester gets the report (marked cancelled);
		 * this request gets its id. While the drill is still being
		 * written to the store, it ends as soon as that is done. */
		if (r->phase != PH_PERSIST)
			finish(r);
		mrd_ctl_reply(cl, id, res);
		return;
	}
	json_t *jp = json_object_get(args, "plane"), *jpeer = json_object_get(args, "peer");
	json_t *jl = json_object_get(args, "link");
	int bad = 0;
	double dur = num_arg(args, "duration_s", 5, &bad);
	double rev = num_arg(args, "auto_revert_s", DURATION_MAX_S, &bad);
	if (!json_is_string(jp) || (jpeer && !json_is_string(jpeer)) ||
	    (jl && !json_is_boolean(jl)) || bad || !(dur > 0 && dur <= DURATION_MAX_S) ||
	    !(rev > 0 && rev <= DURATION_MAX_S) ||
	    (jpeer && strlen(json_string_value(jpeer)) >= 128)) {
		mrd_ctl_error(cl, id, "bad_request",
			      "drill plane: args.plane (a name) is required; peer a string, link "
			      "a boolean, duration_s and auto_revert_s seconds in (0, %.0f]",
			      DURATION_MAX_S);
		return;
	}
	int p = mrd_ops_plane_find(d, json_string_value(jp));
	if (p < 0) {
		mrd_ctl_error(cl, id, "not_found", "drill plane: no plane '%.40s'",
			      json_string_value(jp));
		return;
	}
	const char *name = d->cfg.planes[p].name;
	if (d->drills->cur) {
		mrd_ctl_error(cl, id, "busy", "drill plane: drill %" PRIu64 " of plane %s is running",
			      d->drills->cur->drill_id, d->cfg.planes[d->drills->cur->plane].name);
		return;
	}
	if (!mrd_planes_up(d, (unsigned)p) || mrd_ops_plane_drained(d, (unsigned)p)) {
		mrd_ctl_error(cl, id, "refused", "drill plane: %s is already out of service (%s)",
			      name, mrd_planes_up(d, (unsigned)p) ? "drained" : "down");
		return;
	}
	if (mrd_ops_usable_planes(d) <= 1) {
		mrd_ctl_error(cl, id, "refused",
			      "drill plane: %s is the last usable plane: a drill would stop all "
			      "traffic", name);
		return;
	}
	int link = json_is_true(jl);
	const mrd_plane_state *ps = mrd_planes_get(d, (unsigned)p);
	if (link && mrd_ctl_uid(cl) != 0) {
		mrd_ctl_error(cl, id, "permission", "drill plane --link: root only");
		return;
	}
	if (link && (!ps || ps->ifindex <= 0)) {
		mrd_ctl_error(cl, id, "refused",
			      "drill plane --link: plane %s has no network interface of its own "
			      "(it is not watched through netlink)", name);
		return;
	}
	drill *r = calloc(1, sizeof(*r));
	if (!r) {
		mrd_ctl_error(cl, id, "failed", "out of memory");
		return;
	}
	if (mrd_ctl_set_op(cl, cancel, r) < 0) {
		free(r);
		mrd_ctl_error(cl, id, "busy", "a ping, perf or drill is already running on this "
					      "connection");
		return;
	}
	r->d = d;
	r->cl = cl;
	r->id = id ? json_incref(id) : NULL;
	r->plane = (unsigned)p;
	r->link = link;
	r->ifindex = ps ? ps->ifindex : 0;
	if (ps)
		snprintf(r->ifname, sizeof(r->ifname), "%s", ps->ifname);
	if (jpeer)
		snprintf(r->peer, sizeof(r->peer), "%s", json_string_value(jpeer));
	r->duration_s = dur;
	r->auto_revert_s = rev;
	r->started_wall = mrd_wall_ns();
	r->drill_id = d->store ? mrd_store_drill_id_new(d->store) : d->drills->count + 1;
	uv_timer_init(d->loop, &r->timer);
	r->timer.data = r;
	d->drills->cur = r;
	d->drills->count++;
	/* Persisted first: a daemon that dies while the plane is out finds
	 * this row at its next start and gives the plane back. */
	json_t *state = json_pack("{s:s, s:s, s:s, s:i}", "state", "running", "action",
				  link ? "link" : "admin", "interface", r->ifname, "ifindex",
				  r->ifindex);
	char *text = json_dumps(state, JSON_COMPACT);
	json_decref(state);
	char detail[256];
	snprintf(detail, sizeof(detail), "drill %" PRIu64 ": %s, %.3f s%s%s", r->drill_id,
		 link ? "link down" : "administrative", dur, r->peer[0] ? ", perf to " : "",
		 r->peer);
	mrd_emit(&d->bus, MRD_STORE_EV_DRILL_STARTED, (int)r->plane, name, 0, -1, detail);
	if (d->store) {
		mrd_store_drill row = {.id = r->drill_id, .plane = name, .kind = "plane-failover",
				       .started_ts_ns = r->started_wall, .result_json = text};
		mrd_store_drill_update(d->store, &row);
		free(text);
		r->w.data = r;
		if (uv_queue_work(d->loop, &r->w, persist_work, persist_done) == 0)
			return;
	} else {
		free(text);
		mrd_warn("drill %" PRIu64 ": no state database: a crash during the drill would "
			 "leave the plane out", r->drill_id);
	}
	start_phases(r);
}

static const mrd_ctl_cmd cmds[] = {
	{"drill plane", cmd_drill, MRD_CTL_ACT, 1},
	{"drill cancel", cmd_drill, MRD_CTL_ACT, 0},
};

int mrd_drill_register(mrd *d)
{
	return mrd_ctl_register(d, cmds, sizeof(cmds) / sizeof(cmds[0]));
}

/* ---- restart --------------------------------------------------------------- */

typedef struct open_drill {
	uint64_t id;
	int64_t started;
	char plane[32];
	char *result;
} open_drill;

typedef struct open_list {
	open_drill v[16];
	unsigned n;
} open_list;

static int collect(const mrd_store_drill_row *row, void *ud)
{
	open_list *l = ud;
	if (row->ended_ts_ns || l->n == 16)
		return 0;
	open_drill *o = &l->v[l->n++];
	o->id = row->id;
	o->started = row->started_ts_ns;
	snprintf(o->plane, sizeof(o->plane), "%s", row->plane ? row->plane : "");
	o->result = strdup(row->result_json ? row->result_json : "{}");
	return 0;
}

void mrd_drill_init(mrd *d)
{
	if (!d->store)
		return;
	open_list l = {.n = 0};
	if (mrd_store_query_drills(d->store, 0, collect, &l) < 0)
		return;
	for (unsigned i = 0; i < l.n; i++) {
		open_drill *o = &l.v[i];
		json_t *st = json_loads(o->result ? o->result : "{}", 0, NULL);
		if (!json_is_object(st)) {
			json_decref(st);
			st = json_object();
		}
		const char *action = json_string_value(json_object_get(st, "action"));
		const char *ifname = json_string_value(json_object_get(st, "interface"));
		char how[160] = "the administrative hold ended with the old process";
		if (action && strcmp(action, "link") == 0 && ifname && *ifname) {
			unsigned idx = if_nametoindex(ifname);
			int rv = idx ? set_link((int)idx, 1) : -ENODEV;
			snprintf(how, sizeof(how), "set %s up again: %s", ifname,
				 rv < 0 ? strerror(-rv) : "ok");
		}
		mrd_warn("drill %" PRIu64 " of plane %s was interrupted by a restart: %s", o->id,
			 o->plane, how);
		json_object_set_new(st, "state", json_string("interrupted"));
		json_object_set_new(st, "restored_at_start", json_string(how));
		json_object_set_new(st, "pass", json_false());
		char *text = json_dumps(st, JSON_COMPACT);
		json_decref(st);
		mrd_store_drill row = {.id = o->id, .plane = o->plane, .kind = "plane-failover",
				       .started_ts_ns = o->started, .ended_ts_ns = mrd_wall_ns(),
				       .result_json = text};
		mrd_store_drill_update(d->store, &row);
		char detail[200];
		snprintf(detail, sizeof(detail), "drill %" PRIu64 " interrupted: %s", o->id, how);
		mrd_emit(&d->bus, MRD_STORE_EV_DRILL_RESTORED, mrd_ops_plane_find(d, o->plane), o->plane,
			 0, -1, detail);
		free(text);
		free(o->result);
	}
}
