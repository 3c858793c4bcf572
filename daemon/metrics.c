/* Prometheus text exposition of the daemon's state (metrics.h). */
#define _GNU_SOURCE /* open_memstream */
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datapath.h"
#include "drill.h"
#include "mrd.h"
#include "ops.h"
#include "peer.h"
#include "planes.h"
#include "telemetry.h"

/* A label value: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *name, const char *v, int first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f), fputc(*v, f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void u64(FILE *f, const char *name, uint64_t v)
{
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

static void one(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	family(f, name, type, help);
	u64(f, name, v);
}

static void plane_u64(FILE *f, mrd *d, const char *name, unsigned i, uint64_t v)
{
	fprintf(f, "%s{", name);
	label(f, "plane", d->cfg.planes[i].name, 1);
	fprintf(f, "} %" PRIu64 "\n", v);
}

/* Per-path families: each walks every open path of every connection. */
enum { P_SRTT, P_CWND, P_INFL, P_TXP, P_TXB, P_RETX, P_LOST, P_ACK, P_CE, P_RXP, P_UP };

static const struct {
	const char *name, *type, *help;
} pfam[] = {
	[P_SRTT] = {"metaroce_path_srtt_seconds", "gauge", "Smoothed round-trip time of the path."},
	[P_CWND] = {"metaroce_path_cwnd_bytes", "gauge", "Congestion window of the path."},
	[P_INFL] = {"metaroce_path_inflight_bytes", "gauge", "Bytes in flight on the path."},
	[P_TXP] = {"metaroce_path_tx_packets_total", "counter", "Data packets sent on the path."},
	[P_TXB] = {"metaroce_path_tx_bytes_total", "counter", "Data bytes sent on the path."},
	[P_RETX] = {"metaroce_path_retx_packets_total", "counter",
		    "Retransmissions sent on the path."},
	[P_LOST] = {"metaroce_path_lost_packets_total", "counter",
		    "Packets of the path declared lost."},
	[P_ACK] = {"metaroce_path_acked_packets_total", "counter",
		   "Packets of the path acknowledged."},
	[P_CE] = {"metaroce_path_ce_packets_total", "counter",
		  "Acknowledged packets of the path that were CE-marked."},
	[P_RXP] = {"metaroce_path_rx_packets_total", "counter", "Data packets received on the path."},
	[P_UP] = {"metaroce_path_active", "gauge",
		  "1 if the path carries data (state active), 0 otherwise."},
};

static void paths(FILE *f, mrd *d, int which)
{
	family(f, pfam[which].name, pfam[which].type, pfam[which].help);
	for (const mrd_conn *c = d->peers->all; c; c = c->next) {
		if (!mrd_conn_has_engine(c) || c->state != MRD_CONN_ESTABLISHED)
			continue;
		char conn[16], path[8];
		snprintf(conn, sizeof(conn), "%08" PRIx32, c->local_id);
		for (unsigned i = 0; i < c->max_paths; i++) {
			mrp_path_info pi;
			if (mrd_conn_path_info(c, i, &pi) < 0)
				continue;
			unsigned lp = pi.plane < c->npairs ? c->pairs[pi.plane].lplane : 0;
			snprintf(path, sizeof(path), "%u", pi.id);
			fprintf(f, "%s{", pfam[which].name);
			label(f, "conn", conn, 1);
			label(f, "path", path, 0);
			label(f, "plane", d->cfg.planes[lp].name, 0);
			fputs("} ", f);
			switch (which) {
			case P_SRTT: fprintf(f, "%.9f\n", (double)pi.srtt_ns / 1e9); break;
			case P_CWND: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.cwnd)); break;
			case P_INFL: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.inflight)); break;
			case P_TXP: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.tx_pkts)); break;
			case P_TXB: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.tx_bytes)); break;
			case P_RETX: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.retx_pkts)); break;
			case P_LOST: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.lost_pkts)); break;
			case P_ACK: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.acked_pkts)); break;
			case P_CE: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.ce_pkts)); break;
			case P_RXP: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.rx_pkts)); break;
			case P_UP: fprintf(f, "%" PRIu64 "\n", (uint64_t)(pi.state == MRP_PATH_ACTIVE)); break;
			}
		}
	}
}

char *mrd_metrics_render(mrd *d, size_t *plen)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	uint64_t now = uv_hrtime();

	family(f, "metaroce_info", "gauge", "Version and instance of the daemon (always 1).");
	fputs("metaroce_info{", f);
	label(f, "version", MRD_VERSION, 1);
	char inst[24];
	snprintf(inst, sizeof(inst), "%016" PRIx64, d->instance_id);
	label(f, "instance", inst, 0);
	fputs("} 1\n", f);
	family(f, "metaroce_uptime_seconds", "gauge", "Seconds since the daemon started.");
	fprintf(f, "metaroce_uptime_seconds %.3f\n", (double)(now - d->start_ns) / 1e9);

	/* Planes. */
	static const struct {
		const char *name, *type, *help;
	} plf[] = {
		{"metaroce_plane_up", "gauge", "1 if the plane's link is up (netlink), 0 if down."},
		{"metaroce_plane_drained", "gauge",
		 "1 if the plane is drained by an operator or taken out by a drill."},
		{"metaroce_plane_link_speed_bps", "gauge",
		 "Link speed of the plane in bit/s (0: unknown)."},
		{"metaroce_plane_tx_packets_total", "counter", "Datagrams sent on the plane."},
		{"metaroce_plane_tx_bytes_total", "counter", "Bytes sent on the plane."},
		{"metaroce_plane_rx_packets_total", "counter", "Datagrams received on the plane."},
		{"metaroce_plane_rx_bytes_total", "counter", "Bytes received on the plane."},
		{"metaroce_plane_downs_total", "counter", "Times the plane went down."},
		{"metaroce_plane_bind_fails_total", "counter",
		 "Source ports of the plane that could not be bound."},
	};
	for (unsigned k = 0; k < sizeof(plf) / sizeof(plf[0]); k++) {
		family(f, plf[k].name, plf[k].type, plf[k].help);
		for (unsigned i = 0; i < d->dp->nplanes; i++) {
			const mrd_dp_plane *pl = &d->dp->planes[i];
			const mrd_plane_state *ps = mrd_planes_get(d, i);
			uint64_t v = 0;
			switch (k) {
			case 0: v = (uint64_t)mrd_planes_up(d, i); break;
			case 1: v = mrd_ops_plane_drained(d, i); break;
			case 2: v = mrd_planes_speed(d, i); break;
			case 3: v = pl->tx_pkts; break;
			case 4: v = pl->tx_bytes; break;
			case 5: v = pl->rx_pkts; break;
			case 6: v = pl->rx_bytes; break;
			case 7: v = ps ? ps->downs : 0; break;
			case 8: v = pl->bind_fails; break;
			}
			plane_u64(f, d, plf[k].name, i, v);
		}
	}

	/* Datagrams and drops. */
	one(f, "metaroce_rx_packets_total", "counter", "Datagrams received on every plane.",
	    d->cnt.rx_pkts);
	one(f, "metaroce_rx_bytes_total", "counter", "Bytes received on every plane.",
	    d->cnt.rx_bytes);
	family(f, "metaroce_drops_total", "counter",
	       "Received datagrams dropped, by reason (the engine's error name).");
	for (int i = 1; i < MRD_NERR; i++) {
		fputs("metaroce_drops_total{", f);
		label(f, "reason", mrp_err_name(-i), 1);
		fprintf(f, "} %" PRIu64 "\n", d->cnt.drops[i]);
	}

	/* Connections and peers. */
	uint64_t n[4] = {0};
	for (const mrd_conn *c = d->peers->all; c; c = c->next)
		n[c->state]++;
	static const char *const states[] = {"connecting", "half_open", "established", "ended"};
	family(f, "metaroce_connections", "gauge", "Connections now, by state.");
	for (int i = 0; i < 4; i++) {
		fputs("metaroce_connections{", f);
		label(f, "state", states[i], 1);
		fprintf(f, "} %" PRIu64 "\n", n[i]);
	}
	one(f, "metaroce_peers", "gauge", "Peer daemons known.", d->peers->npeers);
	one(f, "metaroce_connections_opened_total", "counter", "Connections established.",
	    d->cnt.conns_opened);
	one(f, "metaroce_connections_failed_total", "counter",
	    "Connection attempts that failed before being established.", d->cnt.conns_failed);
	one(f, "metaroce_connections_closed_total", "counter",
	    "Established connections that ended.", d->cnt.conns_closed);
	one(f, "metaroce_peer_restarts_total", "counter", "Peer daemon restarts recognised.",
	    d->cnt.peer_restarts);

	for (int k = 0; k <= P_UP; k++)
		paths(f, d, k);

	/* The control socket, the telemetry and the store. */
	one(f, "metaroce_ctl_requests_total", "counter", "Control requests received.",
	    d->ctl.requests);
	one(f, "metaroce_ctl_errors_total", "counter", "Control requests answered with an error.",
	    d->ctl.errors);
	one(f, "metaroce_ctl_monitors", "gauge", "Control clients subscribed to events.",
	    d->ctl.monitors);
	one(f, "metaroce_monitor_events_dropped_total", "counter",
	    "Events not sent to a monitor that read too slowly.", d->ctl.events_dropped);
	const mrd_tel_stats *t = mrd_telemetry_stats(d);
	one(f, "metaroce_telemetry_path_samples_total", "counter", "Path samples taken.",
	    t->path_samples);
	one(f, "metaroce_telemetry_paths_skipped_total", "counter",
	    "Paths not sampled because of telemetry.max_paths.", t->paths_skipped);
	one(f, "metaroce_telemetry_rows_folded_total", "counter",
	    "Raw samples folded into 1-minute aggregates.", t->rows_folded);
	one(f, "metaroce_drills_total", "counter", "Failover drills run since start.",
	    mrd_drill_count(d));
	mrd_store_stats ss = {0};
	if (d->store)
		mrd_store_get_stats(d->store, &ss);
	one(f, "metaroce_store_up", "gauge", "1 if the state database is open.", d->store != NULL);
	one(f, "metaroce_store_queued", "gauge", "Samples and records waiting to be written.",
	    ss.queued_samples + ss.queued_records);
	one(f, "metaroce_store_samples_dropped_total", "counter",
	    "Samples overwritten because the database fell behind.", ss.samples_dropped);
	one(f, "metaroce_store_records_dropped_total", "counter",
	    "Events and updates dropped because the database fell behind.",
	    ss.records_dropped);
	one(f, "metaroce_store_flush_failures_total", "counter",
	    "Failed writes of a batch to the database.", ss.flush_failures);

	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	if (plen)
		*plen = len;
	return buf;
}
