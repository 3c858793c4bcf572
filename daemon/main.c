/*
 * metarocd: options, startup, signals, reload and the graceful stop.
 *
 *   metarocd [-c FILE] [--check-config] [-f|--foreground] [-v]
 *
 * The daemon never forks: systemd (Type=notify) or the shell supervises it,
 * so -f is accepted for habit's sake and changes nothing. Logs go to stderr.
 *
 * SIGTERM/SIGINT: STOPPING=1, new connections refused, every connection
 * closed with CLOSE, and the process exits 0 once the peers answered or
 * after MRD_STOP_GRACE_MS at the latest. SIGHUP: the file is read again;
 * live keys are applied, the others are logged as needing a restart.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "datapath.h"
#include "drill.h"
#include "fdguard.h"
#include "log.h"
#include "metrics.h"
#include "mrd.h"
#include "ops.h"
#include "peer.h"
#include "perf.h"
#include "planes.h"
#include "show.h"
#include "telemetry.h"

#define MRD_STOP_GRACE_MS 3000
#define MRD_STOP_POLL_MS 10

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metarocd [-c FILE] [--check-config] [-f|--foreground] [-v]\n"
		"  -c, --config FILE   configuration file (default %s)\n"
		"      --check-config  check the file and exit (with -v: print it)\n"
		"  -f, --foreground    run in the foreground (always the case)\n"
		"  -v, --verbose       log at debug level\n"
		"  -h, --help          this text\n"
		"  -V, --version       print the version\n",
		MRD_CONFIG_PATH);
}

/* ---- state store --------------------------------------------------------- */

/* Subscriber of the event bus: the store's event log (a path's change of
 * state only when it is a kind the log keeps). */
static void store_on_event(void *ud, const mrd_ev *ev)
{
	mrd *d = ud;
	if (!d->store || ev->kind < 0 || ev->stored)
		return;
	mrd_store_event(d->store, ev->ts_ns, (mrd_store_event_kind)ev->kind, ev->plane_name,
			ev->conn ? ev->conn : MRD_STORE_NO_ID,
			ev->path >= 0 ? (uint64_t)ev->path : MRD_STORE_NO_ID, ev->detail);
}

/* Subscriber of the event bus: the daemon's log at debug level (a path's
 * change of state; the modules log the rest where it happens). */
static void log_on_event(void *ud, const mrd_ev *ev)
{
	(void)ud;
	if (ev->from)
		mrd_debug("conn %08x path %d: %s", ev->conn, ev->path, ev->detail);
}

static void store_flush_work(uv_work_t *w)
{
	mrd *d = w->data;
	mrd_store_flush(d->store); /* blocking sqlite: on a worker thread */
}

static void store_flush_done(uv_work_t *w, int status)
{
	(void)status;
	mrd *d = w->data;
	d->store_busy = 0;
}

static void on_store_tick(uv_timer_t *t)
{
	mrd *d = t->data;
	if (!d->store || d->store_busy)
		return;
	d->store_busy = 1;
	d->store_work.data = d;
	if (uv_queue_work(d->loop, &d->store_work, store_flush_work, store_flush_done) < 0)
		d->store_busy = 0;
}

static void store_open(mrd *d)
{
	char err[512];
	if (mrd_store_open(&d->store, d->cfg.state_db, err, sizeof(err)) < 0) {
		mrd_warn("state store: %s; running without it", err);
		d->store = NULL;
	}
	uv_timer_init(d->loop, &d->store_timer);
	d->store_timer.data = d;
	uv_timer_start(&d->store_timer, on_store_tick, 1000, 1000);
	mrd_emit(&d->bus, MRD_STORE_EV_DAEMON_STARTED, -1, NULL, 0, -1, NULL);
}

/* ---- stop ---------------------------------------------------------------- */

static void close_all(mrd *d)
{
	uv_timer_stop(&d->stop_timer);
	uv_close((uv_handle_t *)&d->stop_timer, NULL);
	uv_close((uv_handle_t *)&d->store_timer, NULL);
	mrd_telemetry_close(d);
	mrd_fdguard_close(d);
	uv_close((uv_handle_t *)&d->sig_term, NULL);
	uv_close((uv_handle_t *)&d->sig_int, NULL);
	uv_close((uv_handle_t *)&d->sig_hup, NULL);
	mrd_dp_flush(d->dp);
	mrd_dp_close(d->dp);
	mrd_timer_close(&d->timer, NULL);
	mrd_notify_close(&d->notify);
	mrd_planes_close(d);
	mrd_apps_close(d);
}

static void on_stop_tick(uv_timer_t *t)
{
	mrd *d = t->data;
	uint32_t live = mrd_peers_live(d);
	if (live == 0 || uv_now(d->loop) >= d->stop_deadline_ms) {
		if (live)
			mrd_warn("stopping with %u connection(s) still open", live);
		mrd_info("stopped");
		close_all(d);
	}
}

/* Begin the graceful stop (SIGTERM). */
static void mrd_stop(mrd *d)
{
	if (d->stopping)
		return;
	d->stopping = 1;
	mrd_info("stopping: closing %u connection(s)", mrd_peers_live(d));
	mrd_notify_send(&d->notify, "STOPPING=1");
	mrd_emit(&d->bus, MRD_STORE_EV_DAEMON_STOPPED, -1, NULL, 0, -1, "SIGTERM");
	mrd_ctl_close(d);
	mrd_apps_close(d); /* applications see EOF: their connections are reset */
	mrd_peers_close_all(d);
	/* Poll until every connection has ended, MRD_STOP_GRACE_MS at most. */
	d->stop_deadline_ms = uv_now(d->loop) + MRD_STOP_GRACE_MS;
	uv_timer_start(&d->stop_timer, on_stop_tick, MRD_STOP_POLL_MS, MRD_STOP_POLL_MS);
}

static void on_signal(uv_signal_t *s, int signum)
{
	mrd *d = s->data;
	mrd_info("%s received", signum == SIGINT ? "SIGINT" : "SIGTERM");
	mrd_stop(d);
}

/* ---- reload -------------------------------------------------------------- */

static void on_sighup(uv_signal_t *s, int signum)
{
	(void)signum;
	mrd *d = s->data;
	if (d->stopping)
		return;
	mrd_notify_reloading(&d->notify);
	mrd_config next;
	char err[512];
	if (mrd_config_load(&next, d->config_path, err, sizeof(err)) < 0) {
		mrd_err("reload: %s: keeping the running configuration", err);
		mrd_notify_send(&d->notify, "READY=1\nSTATUS=reload failed: see the log");
		return;
	}
	char live[512], restart[512];
	int diff = mrd_config_diff(&d->cfg, &next, live, sizeof(live), restart, sizeof(restart));
	if (!diff)
		mrd_info("reload: no change");
	if (diff & MRD_CONFIG_LIVE) {
		/* Take every live key; keep what only a restart can change. */
		mrd_config_keep_restart(&next, &d->cfg);
		d->cfg = next;
		mrd_log_level = d->cfg.log_level;
		mrd_info("reload: applied %s (connection settings apply to new connections)", live);
	}
	if (diff & MRD_CONFIG_RESTART)
		mrd_warn("reload: %s changed: takes effect after a restart", restart);
	mrd_notify_send(&d->notify, "READY=1\nSTATUS=running");
}

/* ---- receiver rate hints ------------------------------------------------- */

/* Senders the allocator tracks at once (active within its idle time, 200
 * us); one beyond them gets no hint until a slot frees. */
#define MRD_RH_SLOTS 256
/* The capacity counted for an up plane of unknown link speed (loopback, an
 * interface that reports none): above any link's, so hints never bind. */
#define MRD_RH_UNKNOWN_BPS 400000000000ull

/* A sender silent this long is no longer counted among the active ones.
 * The engine's default (200 us) suits a NIC; a daemon's datagrams come in
 * bursts between the host's scheduling gaps (milliseconds, tens of them on
 * a loaded host: with 200 us, senders of a 4:1 incast were expired between
 * bursts and the one left was told the whole capacity). */
#define MRD_RH_IDLE_NS 50000000ull

static mrp_rh rh;
static mrp_rh_slot rh_slots[MRD_RH_SLOTS];

static uint64_t rh_capacity(const mrd *d, uint32_t *nup)
{
	uint64_t sum = 0;
	*nup = 0;
	for (unsigned i = 0; i < d->cfg.nplanes; i++) {
		if (!mrd_planes_up(d, i))
			continue;
		uint64_t bps = mrd_planes_speed(d, i);
		sum += bps ? bps : MRD_RH_UNKNOWN_BPS;
		(*nup)++;
	}
	return sum;
}

/* Set the rate-hint allocator's capacity from the planes (at start, and
 * on every plane up or down): the sum of the link speeds of the planes
 * that are up, MRD_RH_UNKNOWN_BPS for one whose speed is unknown. Each
 * plane that is up is a queue of its own for first-round-trip credits
 * (adm_queues, SPEC 6.6: over several, credits take at most half the
 * budget). */
static void mrd_rh_update(mrd *d)
{
	uint32_t nup;
	uint64_t cap = rh_capacity(d, &nup);
	int fresh = !d->rh;
	if (fresh) {
		/* mrp_rh_init() wants a capacity; 0 (every plane down) is set
		 * after it. */
		if (mrp_rh_init(&rh, rh_slots, MRD_RH_SLOTS, cap ? cap : 1, uv_hrtime()) < 0)
			return;
		rh.idle_ns = MRD_RH_IDLE_NS;
		d->rh = &rh;
	}
	d->rh->adm_queues = nup;
	if (!fresh && cap == d->rh->capacity_bps)
		return;
	mrp_rh_set_capacity(d->rh, cap);
	mrd_info("rate hints: inbound capacity %llu Mbit/s", (unsigned long long)(cap / 1000000));
}

/* ---- main ---------------------------------------------------------------- */

/* ---- wiring: what the lower layers hand up ------------------------------- */

static void dp_input(void *ud, mrd_sock *s, const mrd_sockaddr *src, socklen_t srclen,
		     const uint8_t *data, size_t len, int ce, uint64_t now)
{
	mrd_peer_input(ud, s, src, srclen, data, len, ce, now);
}

static void run_conns(void *ud)
{
	mrd_peer_run(ud);
}

static void plane_changed(void *ud, unsigned plane, int up)
{
	mrd *d = ud;
	mrd_rh_update(d);
	mrd_peers_plane_event(d, plane, up ? MRP_PLANE_UP : MRP_PLANE_DOWN);
}

static void conn_established(void *ud, mrd_conn *c, uint64_t now_ns)
{
	mrd_ops_conn_established(ud, c, now_ns); /* a drained plane takes no data */
}

static void conn_freed(void *ud, mrd_conn *c)
{
	(void)ud;
	mrd_telemetry_conn_free(c);
}

static const mrd_conn_ops *apps_service(void *ud, uint32_t service_id)
{
	return mrd_apps_service(ud, service_id); /* a service an application listens on */
}

static int start(mrd *d)
{
	int rv;
	/* Who hears of events: the log, the store, the monitors, a drill. */
	mrd_bus_subscribe(&d->bus, log_on_event, d);
	mrd_bus_subscribe(&d->bus, store_on_event, d);
	mrd_bus_subscribe(&d->bus, mrd_ctl_on_event, d);
	mrd_bus_subscribe(&d->bus, mrd_drill_on_event, d);
	if ((rv = mrd_peers_init(d)) < 0)
		return rv;
	mrd_peers_set_hooks(d, &(mrd_peer_hooks){conn_established, conn_freed, d});
	mrd_peers_add_service(d, mrd_perf_service, d); /* PERF and ECHO */
	mrd_peers_add_service(d, apps_service, d);
	if ((rv = mrd_dp_init(d->dp, d, &(mrd_dp_ops){dp_input, run_conns, d})) < 0)
		return rv;
	if ((rv = mrd_timer_init(&d->timer, d->loop, mrd_peer_on_timer, d)) < 0) {
		mrd_err("timerfd: %s", strerror(-rv));
		return rv;
	}
	/* The control socket's commands, each table from the module that
	 * owns them; then the socket. */
	if (mrd_show_register(d) < 0 || mrd_perf_register(d) < 0 || mrd_ops_register(d) < 0 ||
	    mrd_drill_register(d) < 0)
		return -EINVAL;
	d->ctl.after_input = run_conns;
	d->ctl.after_input_ud = d;
	if ((rv = mrd_ctl_init(d)) < 0)
		return rv;
	if ((rv = mrd_apps_init(d)) < 0)
		return rv;
	mrd_notify_init(&d->notify, d->loop);
	store_open(d);
	/* without netlink the planes are just not watched */
	mrd_planes_init(d, &(mrd_planes_ops){plane_changed, d});
	mrd_rh_update(d);   /* the planes' speeds are known from here */
	/* Operations: drained planes and interrupted drills from the store,
	 * then the telemetry sampler. */
	mrd_ops_init(d);
	mrd_drill_init(d);
	mrd_telemetry_init(d, mrd_metrics_render); /* the textfile is the metrics */
	mrd_fdguard_start(d);
	uv_timer_init(d->loop, &d->stop_timer);
	d->stop_timer.data = d;
	uv_signal_init(d->loop, &d->sig_term);
	uv_signal_init(d->loop, &d->sig_int);
	uv_signal_init(d->loop, &d->sig_hup);
	d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
	uv_signal_start(&d->sig_term, on_signal, SIGTERM);
	uv_signal_start(&d->sig_int, on_signal, SIGINT);
	uv_signal_start(&d->sig_hup, on_sighup, SIGHUP);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"check-config", no_argument, NULL, 'C'},
		{"foreground", no_argument, NULL, 'f'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *path = MRD_CONFIG_PATH;
	int check = 0, verbose = 0, o;
	while ((o = getopt_long(argc, argv, "c:fvhV", opts, NULL)) != -1) {
		switch (o) {
		case 'c': path = optarg; break;
		case 'C': check = 1; break;
		case 'f': break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("metarocd %s\n", MRD_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	static mrd daemon; /* large (send/receive queues are heap, the rest is not) */
	/* The state of the modules above the daemon's context (mrd.h). */
	static mrd_dp dp;
	static mrd_peers peers;
	static mrd_apps apps;
	static mrd_fdguard fdg;
	static mrd_ops ops;
	static mrd_planes planes;
	static mrd_drills drills;
	static mrd_telemetry telemetry;
	mrd *d = &daemon;
	d->dp = &dp;
	d->peers = &peers;
	d->apps = &apps;
	d->fdg = &fdg;
	d->ops = &ops;
	d->planes = &planes;
	d->drills = &drills;
	d->telemetry = &telemetry;
	char err[512];
	if (mrd_config_load(&d->cfg, path, err, sizeof(err)) < 0) {
		fprintf(stderr, "metarocd: %s\n", err);
		return 1;
	}
	if (check) {
		printf("%s: ok\n", path);
		if (verbose)
			mrd_config_dump(&d->cfg, stdout);
		return 0;
	}
	mrd_log_init(verbose ? MRD_LOG_DEBUG : d->cfg.log_level);
	signal(SIGPIPE, SIG_IGN);
	mrd_fd_raise_limit();
	d->config_path = path;
	d->loop = uv_default_loop();
	d->start_ns = uv_hrtime();
	while (getrandom(&d->instance_id, sizeof(d->instance_id), 0) != sizeof(d->instance_id))
		;
	int rv = start(d);
	if (rv < 0) {
		mrd_err("cannot start: %s", strerror(-rv < 4096 && rv > -4096 ? -rv : EINVAL));
		/* Close what was opened so the loop can finish. */
		mrd_ctl_close(d);
		mrd_apps_close(d);
		mrd_dp_close(d->dp);
		if (d->timer.heap || d->timer.fd > 0)
			mrd_timer_close(&d->timer, NULL);
		uv_run(d->loop, UV_RUN_DEFAULT);
		mrd_peers_free(d);
		return 1;
	}
	mrd_info("metarocd " MRD_VERSION " running: instance %016llx, %u plane(s), port %u",
		 (unsigned long long)d->instance_id, d->dp->nplanes, d->cfg.port);
	mrd_notify_send(&d->notify, "READY=1\nSTATUS=running");
	uv_run(d->loop, UV_RUN_DEFAULT);
	mrd_peers_free(d);
	mrd_store_close(d->store); /* writes what is still queued */
	uv_loop_close(d->loop);
	return 0;
}
