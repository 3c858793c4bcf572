/* The commands that show the daemon: status, show planes / peers / conns /
 * paths, metrics, telemetry (show.h). */
#include "show.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "ctl.h"
#include "datapath.h"
#include "fdguard.h"
#include "log.h"
#include "metrics.h"
#include "mrd.h"
#include "ops.h"
#include "peer.h"
#include "planes.h"
#include "telemetry.h"
#include "view.h"

static json_t *cmd_status(mrd *d)
{
	uint64_t now = uv_hrtime();
	json_t *o = json_object();
	json_object_set_new(o, "version", json_string(MRD_VERSION));
	json_object_set_new(o, "pid", mrd_json_u64((uint64_t)getpid()));
	json_object_set_new(o, "instance_id", mrd_json_hex64(d->instance_id));
	json_object_set_new(o, "uptime_s", json_real(mrd_age_s(d->start_ns, now)));
	json_object_set_new(o, "config", json_string(d->config_path));
	json_object_set_new(o, "service_port", mrd_json_u64(d->cfg.port));
	json_object_set_new(o, "planes", mrd_json_u64(d->dp->nplanes));
	json_object_set_new(o, "state", json_string(d->stopping ? "stopping" : "running"));
	json_object_set_new(o, "log_level", json_string(mrd_log_level_name(mrd_log_level)));
	uint64_t n[4] = {0};
	for (const mrd_conn *c = d->peers->all; c; c = c->next)
		n[c->state]++;
	json_object_set_new(o, "conns", json_pack("{s:I, s:I, s:I, s:I}",
		"connecting", (json_int_t)n[MRD_CONN_CONNECTING],
		"half_open", (json_int_t)n[MRD_CONN_HALF_OPEN],
		"established", (json_int_t)n[MRD_CONN_ESTABLISHED],
		"ended", (json_int_t)n[MRD_CONN_ENDED]));
	json_object_set_new(o, "peers", mrd_json_u64(d->peers->npeers));
	const mrd_counters *k = &d->cnt;
	json_t *cn = json_object();
	json_t *drops = json_object();
	uint64_t total = 0;
	for (int i = 1; i < MRD_NERR; i++) {
		json_object_set_new(drops, mrp_err_name(-i), mrd_json_u64(k->drops[i]));
		total += k->drops[i];
	}
	uint64_t txp = 0, txb = 0;
	for (unsigned i = 0; i < d->dp->nplanes; i++) {
		txp += d->dp->planes[i].tx_pkts;
		txb += d->dp->planes[i].tx_bytes;
	}
	json_object_set_new(cn, "rx_pkts", mrd_json_u64(k->rx_pkts));
	json_object_set_new(cn, "rx_bytes", mrd_json_u64(k->rx_bytes));
	json_object_set_new(cn, "tx_pkts", mrd_json_u64(txp));
	json_object_set_new(cn, "tx_bytes", mrd_json_u64(txb));
	json_object_set_new(cn, "drops", drops);
	json_object_set_new(cn, "drops_total", mrd_json_u64(total));
#define C(f) json_object_set_new(cn, #f, mrd_json_u64(k->f))
	C(connects_rx); C(accepts_tx); C(admit_credits); C(rejects_tx); C(naks_unknown_tx);
	C(answers_limited);
	C(conns_opened); C(conns_failed); C(conns_closed); C(peer_restarts); C(conns_silent); C(conns_per_addr_full); C(sport_bind_fails);
	C(challenges); C(challenges_answered); C(half_open_discarded);
	C(retries_tx); C(retries_rx); C(connects_validated); C(cookies_bad);
	C(retries_limited); C(accepts_limited); C(half_open_full);
#undef C
	json_object_set_new(cn, "ctl_requests", mrd_json_u64(d->ctl.requests));
	json_object_set_new(cn, "ctl_errors", mrd_json_u64(d->ctl.errors));
	json_object_set_new(cn, "ctl_clients_paused", mrd_json_u64(d->ctl.clients_paused));
	json_object_set_new(cn, "ctl_yields", mrd_json_u64(d->ctl.yields));
	json_object_set_new(cn, "engine_memory", mrd_json_u64(d->peers->memacct.used));
	json_object_set_new(cn, "engine_memory_refused", mrd_json_u64(d->peers->memacct.refused));
	json_object_set_new(cn, "engine_memory_refused_address",
			    mrd_json_u64(d->peers->memacct.refused_addr));
	json_object_set_new(cn, "fds_open", mrd_json_u64(d->fdg->open));
	json_object_set_new(cn, "fds_limit", mrd_json_u64(d->fdg->limit));
	json_object_set_new(cn, "fds_near_limit", mrd_json_u64(d->fdg->near_limit));
	json_object_set_new(cn, "sport_idle_closed", mrd_json_u64(d->fdg->idle_closed));
	json_object_set_new(cn, "sport_orphans_closed", mrd_json_u64(d->fdg->orphans_closed));
	json_object_set_new(cn, "ctl_clients_dropped", mrd_json_u64(d->ctl.clients_dropped));
	json_object_set_new(cn, "ctl_clients_refused", mrd_json_u64(d->ctl.clients_refused));
	json_object_set_new(cn, "ctl_clients_slow", mrd_json_u64(d->ctl.clients_slow));
	json_object_set_new(cn, "ctl_replies_queued", mrd_json_u64(d->ctl.queued));
	json_object_set_new(cn, "ctl_replies_queued_peak", mrd_json_u64(d->ctl.queued_peak));
	json_object_set_new(o, "counters", cn);
	json_object_set_new(o, "apps", mrd_apps_json(d));
	const mrd_dp *dp = d->dp;
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
	for (unsigned i = 0; i < d->dp->nplanes; i++) {
		const mrd_dp_plane *pl = &d->dp->planes[i];
		const mrd_plane *cp = &d->cfg.planes[i];
		mrd_sockaddr s = pl->local;
		if (s.sa.sa_family == AF_INET6)
			s.in6.sin6_port = htons(d->cfg.port);
		else
			s.in.sin_port = htons(d->cfg.port);
		char ports[16];
		snprintf(ports, sizeof(ports), "%u-%u", cp->source_ports.min, cp->source_ports.max);
		json_t *o = json_object();
		json_object_set_new(o, "index", mrd_json_u64(i));
		json_object_set_new(o, "name", json_string(cp->name));
		json_object_set_new(o, "address", mrd_json_addr(&s));
		json_object_set_new(o, "interface", json_string(cp->interface));
		json_object_set_new(o, "mtu", mrd_json_u64(cp->mtu));
		json_object_set_new(o, "source_ports", json_string(ports));
		json_object_set_new(o, "sockets", mrd_json_u64(1 + pl->npool));
		json_object_set_new(o, "rx_pkts", mrd_json_u64(pl->rx_pkts));
		json_object_set_new(o, "rx_bytes", mrd_json_u64(pl->rx_bytes));
		json_object_set_new(o, "tx_pkts", mrd_json_u64(pl->tx_pkts));
		json_object_set_new(o, "tx_bytes", mrd_json_u64(pl->tx_bytes));
		json_object_set_new(o, "bind_fails", mrd_json_u64(pl->bind_fails));
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
			json_object_set_new(o, "ifindex", mrd_json_u64((uint64_t)(ps->ifindex > 0 ? ps->ifindex : 0)));
			json_object_set_new(o, "link_speed_bps", mrd_json_u64(ps->speed_bps));
			json_object_set_new(o, "link_speed_source", json_string(ps->speed_source));
			json_object_set_new(o, "down_reason", json_string(ps->up ? "" : ps->reason));
			json_object_set_new(o, "since_s", json_real(mrd_age_s(ps->changed_ns, uv_hrtime())));
			json_object_set_new(o, "downs", mrd_json_u64(ps->downs));
			json_object_set_new(o, "ups", mrd_json_u64(ps->ups));
			json_object_set_new(o, "flaps", mrd_json_u64(ps->flaps));
		}
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *cmd_peers(mrd *d)
{
	uint64_t now = uv_hrtime();
	json_t *a = json_array();
	for (const mrd_peer *p = d->peers->list; p; p = p->next) {
		json_t *o = json_object();
		json_object_set_new(o, "address", mrd_json_addr(&p->addr));
		json_object_set_new(o, "instance_id",
				    p->have_instance ? mrd_json_hex64(p->instance_id) : json_null());
		json_object_set_new(o, "conns", mrd_json_u64(p->nconns));
		json_object_set_new(o, "conns_total", mrd_json_u64(p->conns_total));
		json_object_set_new(o, "restarts", mrd_json_u64(p->restarts));
		json_object_set_new(o, "last_seen_s", json_real(mrd_age_s(p->last_ns, now)));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *cmd_conns(mrd *d)
{
	json_t *a = json_array();
	for (const mrd_conn *c = d->peers->all; c; c = c->next)
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

/* ---- the commands ---------------------------------------------------------- */

static void do_status(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd, (void)args;
	mrd_ctl_reply(cl, id, cmd_status(mrd_ctl_daemon(cl)));
}

static void do_planes(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd, (void)args;
	mrd_ctl_reply(cl, id, cmd_planes(mrd_ctl_daemon(cl)));
}

static void do_peers(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd, (void)args;
	mrd_ctl_reply(cl, id, cmd_peers(mrd_ctl_daemon(cl)));
}

static void do_conns(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd, (void)args;
	mrd_ctl_reply(cl, id, cmd_conns(mrd_ctl_daemon(cl)));
}

static void do_paths(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd;
	mrd *d = mrd_ctl_daemon(cl);
	json_t *jc = json_object_get(args, "conn");
	uint32_t want = 0;
	if (jc && (!json_is_string(jc) || parse_conn_id(json_string_value(jc), &want) < 0)) {
		mrd_ctl_error(cl, id, "bad_request",
			      "show paths: args.conn must be a connection id in hex");
	} else if (want && !mrd_conn_find(d, want)) {
		mrd_ctl_error(cl, id, "not_found", "no connection %08x", want);
	} else {
		json_t *a = json_array();
		for (const mrd_conn *c = d->peers->all; c; c = c->next) {
			if (want && c->local_id != want)
				continue;
			json_t *p = mrd_json_paths(c);
			json_array_extend(a, p);
			json_decref(p);
		}
		mrd_ctl_reply(cl, id, a);
	}
}

static void do_metrics(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd, (void)args;
	char *text = mrd_metrics_render(mrd_ctl_daemon(cl), NULL);
	if (!text)
		mrd_ctl_error(cl, id, "failed", "out of memory");
	else
		mrd_ctl_reply(cl, id, json_pack("{s:s, s:s}", "format", "prometheus-text-0.0.4",
						"text", text));
	free(text);
}

static void do_telemetry(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args)
{
	(void)cmd, (void)args;
	mrd_ctl_reply(cl, id, mrd_telemetry_recent(mrd_ctl_daemon(cl)));
}

static const mrd_ctl_cmd cmds[] = {
	{"status", do_status, MRD_CTL_READ, 0},
	{"show planes", do_planes, MRD_CTL_READ, 0},
	{"show peers", do_peers, MRD_CTL_READ, 0},
	{"show conns", do_conns, MRD_CTL_READ, 0},
	{"show paths", do_paths, MRD_CTL_READ, 0},
	{"metrics", do_metrics, MRD_CTL_READ, 0},
	{"telemetry", do_telemetry, MRD_CTL_READ, 0},
};

int mrd_show_register(mrd *d)
{
	return mrd_ctl_register(d, cmds, sizeof(cmds) / sizeof(cmds[0]));
}
