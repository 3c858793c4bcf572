/* The telemetry sampler (telemetry.h). */
#include "telemetry.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datapath.h"
#include "log.h"
#include "mrd.h"
#include "ops.h"
#include "peer.h"
#include "planes.h"

/* Folding raw samples into minutes: about once a minute. */
#define PRUNE_EVERY_NS (60ull * 1000000000ull)

/* What one path looked like at the previous sample. */
typedef struct tel_path {
	uint8_t valid;
	uint64_t last_ns; /* when last sampled: a path skipped for the
			   * max_paths budget spans more than one interval */
	mrd_tel_counters last;
	mrd_tel_ring r;
} tel_path;

/* Hung on mrd_conn.tel: one entry per path slot. */
typedef struct tel_conn {
	unsigned n;
	tel_path p[];
} tel_conn;

const mrd_tel_stats *mrd_telemetry_stats(const mrd *d)
{
	const mrd_telemetry *tl = d->telemetry;
	return &tl->st;
}

static void ring_push(mrd_tel_ring *r, double srtt_us, double util, double tx)
{
	r->srtt_us[r->head] = (float)srtt_us;
	r->util[r->head] = (float)util;
	r->tx_bps[r->head] = (float)tx;
	r->head = (uint8_t)((r->head + 1) % MRD_TEL_RECENT);
	if (r->n < MRD_TEL_RECENT)
		r->n++;
}

static uint64_t delta(uint64_t now, uint64_t then)
{
	/* A counter that went back (a slot reused) starts over. */
	return now >= then ? now - then : now;
}

void mrd_telemetry_conn_free(mrd_conn *c)
{
	free(c->tel);
	c->tel = NULL;
}

static tel_conn *conn_state(mrd_conn *c)
{
	if (!c->tel) {
		tel_conn *t = calloc(1, sizeof(*t) + c->max_paths * sizeof(tel_path));
		if (!t)
			return NULL;
		t->n = c->max_paths;
		c->tel = t;
	}
	return c->tel;
}

/* ---- workers --------------------------------------------------------------- */

static void prune_work(uv_work_t *w)
{
	mrd_tel_work *k = w->data;
	mrd_telemetry *tl = k->tl;
	mrd_store_flush(tl->d->store);
	k->rc = mrd_store_prune(tl->d->store, k->now, k->retention_s);
}

static void prune_done(uv_work_t *w, int status)
{
	mrd_tel_work *k = w->data;
	mrd_telemetry *tl = k->tl;
	k->busy = 0;
	if (status < 0 || k->rc < 0) {
		tl->st.prune_errors++;
		mrd_warn("state store: folding old samples failed: %s",
			 status < 0 ? uv_strerror(status) : mrd_store_errmsg(tl->d->store));
		return;
	}
	tl->st.prunes++;
	tl->st.rows_folded += (uint64_t)k->rc;
}

/* Write the whole file beside the target and rename it over: a reader
 * (node_exporter) sees the old file or the new one, never half of one. */
static void textfile_work(uv_work_t *w)
{
	mrd_tel_work *k = w->data;
	char tmp[MRD_PATH_MAX + 16];
	k->err = 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", k->path) >= (int)sizeof(tmp)) {
		k->err = ENAMETOOLONG;
		return;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		k->err = errno;
		return;
	}
	size_t off = 0;
	while (off < k->len) {
		ssize_t n = write(fd, k->text + off, k->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			k->err = n < 0 ? errno : EIO;
			break;
		}
		off += (size_t)n;
	}
	if (close(fd) < 0 && !k->err)
		k->err = errno;
	if (!k->err && rename(tmp, k->path) < 0)
		k->err = errno;
	if (k->err)
		unlink(tmp);
}

static void textfile_done(uv_work_t *w, int status)
{
	mrd_tel_work *k = w->data;
	mrd_telemetry *tl = k->tl;
	k->busy = 0;
	free(k->text);
	k->text = NULL;
	if (status < 0 || k->err) {
		/* Logged once per change of error, not every interval. */
		if (!tl->st.textfile_errors++ || k->err != k->rc)
			mrd_warn("telemetry.textfile %s: %s", k->path,
				 status < 0 ? uv_strerror(status) : strerror(k->err));
		k->rc = k->err;
		return;
	}
	k->rc = 0;
	tl->st.textfile_writes++;
}

/* ---- the sampler ----------------------------------------------------------- */

static const char *plane_state(mrd *d, unsigned i)
{
	if (!mrd_planes_up(d, i))
		return "down";
	return mrd_ops_plane_operator_drained(d, i) ? "drained"
	       : mrd_ops_plane_drained(d, i)	  ? "drill"
						  : "up";
}

static void sample(mrd *d, uint64_t now, int64_t wall)
{
	mrd_telemetry *tl = d->telemetry;
	double dt = (double)(now - tl->last_ns) / 1e9;
	int first = tl->last_ns == 0;
	tl->last_ns = now;
	if (first || dt <= 0)
		dt = 0;
	tl->st.ticks++;
	unsigned budget = d->cfg.telemetry_max_paths;
	uint64_t rtt[MRD_MAX_PLANES] = {0}; /* per local plane: d->peers->plane_rtt_ns */
	for (mrd_conn *c = d->peers->all; c; c = c->next) {
		if (!mrd_conn_has_engine(c) || c->state != MRD_CONN_ESTABLISHED)
			continue;
		/* Past the budget, a connection keeps no sampler state at all:
		 * the memory follows telemetry.max_paths, not the number of
		 * connections. */
		if (!budget) {
			for (unsigned i = 0; i < c->max_paths; i++) {
				mrp_path_info pi;
				tl->st.paths_skipped += mrd_conn_path_info(c, i, &pi) == 0;
			}
			mrd_telemetry_conn_free(c);
			continue;
		}
		tel_conn *t = conn_state(c);
		if (!t)
			continue;
		for (unsigned i = 0; i < c->max_paths && i < t->n; i++) {
			mrp_path_info pi;
			if (mrd_conn_path_info(c, i, &pi) < 0) {
				t->p[i].valid = 0;
				continue;
			}
			if (!budget) {
				tl->st.paths_skipped++;
				continue;
			}
			budget--;
			if (pi.plane < c->npairs && c->pairs[pi.plane].lplane < MRD_MAX_PLANES &&
			    pi.srtt_ns > rtt[c->pairs[pi.plane].lplane])
				rtt[c->pairs[pi.plane].lplane] = pi.srtt_ns;
			tel_path *tp = &t->p[i];
			mrd_tel_counters now_c = {.tx_bytes = pi.tx_bytes,
						  .acked_pkts = pi.acked_pkts,
						  .ce_pkts = pi.ce_pkts,
						  .lost_pkts = pi.lost_pkts,
						  .retx_pkts = pi.retx_pkts};
			int was_valid = tp->valid;
			mrd_tel_counters prev = tp->last;
			double pdt = was_valid ? (double)(now - tp->last_ns) / 1e9 : 0;
			tp->valid = 1;
			tp->last = now_c;
			tp->last_ns = now;
			if (pdt <= 0)
				continue; /* the first sample only sets the base */
			unsigned lp = pi.plane < c->npairs ? c->pairs[pi.plane].lplane : 0;
			mrd_tel_derived x;
			mrd_tel_derive(&prev, &now_c, pdt, mrd_planes_speed(d, lp), &x);
			ring_push(&tp->r, (double)pi.srtt_ns / 1e3, x.utilization, x.tx_bytes_per_s);
			if (d->store) {
				mrd_store_path_sample_row row = {
					.ts_ns = wall,
					.conn_id = c->local_id,
					.path_id = pi.id,
					.plane = d->cfg.planes[lp].name,
					.sport = pi.sport,
					.state = mrp_path_state_name(pi.state),
					.srtt_ns = pi.srtt_ns,
					.ecn_fraction = x.ecn_fraction,
					.lost_pkts = x.lost_pkts,
					.retx_pkts = x.retx_pkts,
					.utilization = x.utilization,
					.tx_bytes_per_s = (uint64_t)x.tx_bytes_per_s,
				};
				if (mrd_store_path_sample(d->store, &row) == 0)
					tl->st.path_samples++;
			}
		}
	}
	for (unsigned i = 0; i < MRD_MAX_PLANES; i++)
		if (rtt[i])
			d->peers->plane_rtt_ns[i] = rtt[i];
	for (unsigned i = 0; i < d->dp->nplanes; i++) {
		const mrd_dp_plane *pl = &d->dp->planes[i];
		uint64_t dtx = delta(pl->tx_bytes, tl->tx[i]), drx = delta(pl->rx_bytes, tl->rx[i]);
		tl->tx[i] = pl->tx_bytes;
		tl->rx[i] = pl->rx_bytes;
		if (dt <= 0)
			continue;
		double tx = (double)dtx / dt, rx = (double)drx / dt;
		uint64_t speed = mrd_planes_speed(d, i);
		double util = speed ? tx * 8 / (double)speed : 0;
		ring_push(&tl->planes[i], 0, util, tx);
		if (d->store) {
			mrd_store_plane_sample_row row = {
				.ts_ns = wall,
				.plane = d->cfg.planes[i].name,
				.tx_bytes_per_s = (uint64_t)tx,
				.rx_bytes_per_s = (uint64_t)rx,
				.state = plane_state(d, i),
				.utilization = util,
			};
			if (mrd_store_plane_sample(d->store, &row) == 0)
				tl->st.plane_samples++;
		}
	}
}

static void on_tick(uv_timer_t *t)
{
	mrd *d = t->data;
	mrd_telemetry *tl = d->telemetry;
	uint64_t now = uv_hrtime();
	int64_t wall = mrd_wall_ns();
	sample(d, now, wall);
	/* Live reload: follow the interval. */
	uint64_t ms = d->cfg.telemetry_interval_ns / 1000000;
	if (ms != uv_timer_get_repeat(&tl->timer))
		uv_timer_set_repeat(&tl->timer, ms ? ms : 1);
	if (d->store && now >= tl->next_prune_ns && !tl->prune.busy) {
		tl->next_prune_ns = now + PRUNE_EVERY_NS;
		mrd_store_limits lim;
		mrd_store_limits_default(&lim);
		uint64_t hist = d->cfg.telemetry_history_ns;
		if (hist < d->cfg.telemetry_retention_ns)
			hist = d->cfg.telemetry_retention_ns;
		lim.agg_retention_s = (int64_t)(hist / 1000000000ull);
		mrd_store_set_limits(d->store, &lim);
		tl->prune.now = wall;
		tl->prune.retention_s = (int64_t)(d->cfg.telemetry_retention_ns / 1000000000ull);
		tl->prune.w.data = &tl->prune;
		tl->prune.busy = 1;
		if (uv_queue_work(d->loop, &tl->prune.w, prune_work, prune_done) < 0)
			tl->prune.busy = 0;
	}
	if (d->cfg.telemetry_textfile[0] && !tl->textfile.busy) {
		/* Rendered here (it reads the loop's state), written there. */
		tl->textfile.text = tl->render(d, &tl->textfile.len);
		if (tl->textfile.text) {
			snprintf(tl->textfile.path, sizeof(tl->textfile.path), "%s",
				 d->cfg.telemetry_textfile);
			tl->textfile.w.data = &tl->textfile;
			tl->textfile.busy = 1;
			if (uv_queue_work(d->loop, &tl->textfile.w, textfile_work, textfile_done) < 0) {
				tl->textfile.busy = 0;
				free(tl->textfile.text);
				tl->textfile.text = NULL;
			}
		}
	}
}

int mrd_telemetry_init(mrd *d, mrd_tel_render_fn render)
{
	mrd_telemetry *tl = d->telemetry;
	tl->d = d;
	tl->render = render;
	tl->prune.tl = tl;
	tl->textfile.tl = tl;
	for (unsigned i = 0; i < d->dp->nplanes; i++) {
		tl->tx[i] = d->dp->planes[i].tx_bytes;
		tl->rx[i] = d->dp->planes[i].rx_bytes;
	}
	tl->last_ns = uv_hrtime();
	/* The first fold a minute after start, not at once: starting must not
	 * wait for a large database to be folded. */
	tl->next_prune_ns = tl->last_ns + PRUNE_EVERY_NS;
	uv_timer_init(d->loop, &tl->timer);
	tl->timer.data = d;
	uint64_t ms = d->cfg.telemetry_interval_ns / 1000000;
	uv_timer_start(&tl->timer, on_tick, ms ? ms : 1, ms ? ms : 1);
	tl->on = 1;
	return 0;
}

void mrd_telemetry_close(mrd *d)
{
	mrd_telemetry *tl = d->telemetry;
	if (!tl->on)
		return;
	tl->on = 0;
	uv_timer_stop(&tl->timer);
	uv_close((uv_handle_t *)&tl->timer, NULL);
}

static json_t *ring_json(const mrd_tel_ring *r, const float *v)
{
	json_t *a = json_array();
	for (unsigned k = 0; k < r->n; k++) {
		unsigned i = (r->head + MRD_TEL_RECENT - r->n + k) % MRD_TEL_RECENT;
		json_array_append_new(a, json_real(v[i]));
	}
	return a;
}

json_t *mrd_telemetry_recent(mrd *d)
{
	mrd_telemetry *tl = d->telemetry;
	json_t *paths = json_array(), *planes = json_array();
	for (mrd_conn *c = d->peers->all; c; c = c->next) {
		tel_conn *t = c->tel;
		if (!t || !mrd_conn_has_engine(c) || c->state != MRD_CONN_ESTABLISHED)
			continue;
		for (unsigned i = 0; i < t->n; i++) {
			mrp_path_info pi;
			if (!t->p[i].valid || mrd_conn_path_info(c, i, &pi) < 0)
				continue;
			char id[16];
			snprintf(id, sizeof(id), "%08" PRIx32, c->local_id);
			unsigned lp = pi.plane < c->npairs ? c->pairs[pi.plane].lplane : 0;
			const mrd_tel_ring *r = &t->p[i].r;
			json_array_append_new(
				paths, json_pack("{s:s, s:i, s:s, s:o, s:o, s:o}", "conn", id, "path",
						 (int)pi.id, "plane", d->cfg.planes[lp].name,
						 "srtt_us", ring_json(r, r->srtt_us), "utilization",
						 ring_json(r, r->util), "tx_bytes_per_s",
						 ring_json(r, r->tx_bps)));
		}
	}
	for (unsigned i = 0; i < d->dp->nplanes; i++) {
		const mrd_tel_ring *r = &tl->planes[i];
		json_array_append_new(planes,
				      json_pack("{s:s, s:o, s:o}", "plane", d->cfg.planes[i].name,
						"utilization", ring_json(r, r->util),
						"tx_bytes_per_s", ring_json(r, r->tx_bps)));
	}
	return json_pack("{s:f, s:i, s:o, s:o}", "interval_s",
			 (double)d->cfg.telemetry_interval_ns / 1e9, "samples", MRD_TEL_RECENT,
			 "paths", paths, "planes", planes);
}
