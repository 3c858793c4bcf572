/*
 * The telemetry sampler. Every telemetry.interval, on the loop, it reads
 * what the engines and the datapath already count (mrp_conn_path_info,
 * the planes' byte counters: memory reads, no system call per path) and
 * derives per path: smoothed RTT, the ECN-marked share of the packets
 * acknowledged in the interval, packets lost and retransmitted in the
 * interval, the sending rate and the utilization (that rate over the
 * plane's link rate); per plane: transmit and receive rates, state and
 * utilization. The samples are only queued in the store (a copy under a
 * mutex); the store's own worker writes them in one transaction a second.
 *
 * Bounds: at most telemetry.max_paths paths are sampled per interval, the
 * first ones in the order of the connections (the rest are counted); only
 * connections with a sampled path keep sampler state (about 440 bytes per
 * path slot, for the previous counters and the recent samples); about once a minute a worker folds raw samples older
 * than telemetry.retention into 1-minute aggregates, kept for
 * telemetry.history (mrd_store_prune; the row caps of store.h bound the
 * file, docs/store.md gives the numbers).
 *
 * The last MRD_TEL_RECENT samples of each path and plane are also kept in
 * memory for `show ... --watch` sparklines. With telemetry.textfile set,
 * the metrics (the renderer main.c hands in: metrics.h) are written to
 * that file each interval, on a worker, through a temporary file and
 * rename().
 */
#ifndef MRD_TELEMETRY_H
#define MRD_TELEMETRY_H

#include <jansson.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "sample.h"

typedef struct mrd mrd;
typedef struct mrd_conn mrd_conn;

#define MRD_TEL_RECENT 32

typedef struct mrd_tel_stats {
	uint64_t ticks;          /* sampling rounds */
	uint64_t path_samples;   /* queued */
	uint64_t plane_samples;
	uint64_t paths_skipped;  /* over telemetry.max_paths */
	uint64_t prunes, prune_errors, rows_folded;
	uint64_t textfile_writes, textfile_errors;
} mrd_tel_stats;

/* The last MRD_TEL_RECENT samples of a path or plane. */
typedef struct mrd_tel_ring {
	uint8_t n, head; /* head: the next slot written */
	float srtt_us[MRD_TEL_RECENT];
	float util[MRD_TEL_RECENT];
	float tx_bps[MRD_TEL_RECENT]; /* bytes/s */
} mrd_tel_ring;

typedef struct mrd_telemetry mrd_telemetry;

/* The text of the textfile (malloc'd, *plen its length), NULL on failure. */
typedef char *(*mrd_tel_render_fn)(mrd *d, size_t *plen);

/* A job on a libuv worker: folding old samples, or the textfile. */
typedef struct mrd_tel_work {
	uv_work_t w;
	mrd_telemetry *tl;
	int busy;
	/* prune */
	int64_t now, retention_s;
	int rc;
	/* textfile */
	char *text;
	size_t len;
	char path[MRD_PATH_MAX + 1];
	int err;
} mrd_tel_work;

/* The sampler's state: owned by main.c, reached as d->telemetry. */
struct mrd_telemetry {
	mrd *d;
	mrd_tel_render_fn render;
	int on;
	uv_timer_t timer;
	uint64_t last_ns;      /* uv_hrtime() of the last sample */
	uint64_t next_prune_ns;
	uint64_t tx[MRD_MAX_PLANES], rx[MRD_MAX_PLANES];
	mrd_tel_ring planes[MRD_MAX_PLANES];
	mrd_tel_work prune, textfile;
	mrd_tel_stats st;
};

int mrd_telemetry_init(mrd *d, mrd_tel_render_fn render);
void mrd_telemetry_close(mrd *d);

/* The connection goes away: drop its sampler state. */
void mrd_telemetry_conn_free(mrd_conn *c);

/* The recent in-memory samples (for `telemetry`, the --watch views):
 * {"interval_s", "paths": [{conn, path, plane, srtt_us: [...],
 * utilization: [...], tx_bytes_per_s: [...]}], "planes": [...]}, oldest
 * first. */
json_t *mrd_telemetry_recent(mrd *d);

const mrd_tel_stats *mrd_telemetry_stats(const mrd *d);

#endif
