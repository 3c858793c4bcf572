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
 * the metrics (metrics.h) are written to that file each interval, on a
 * worker, through a temporary file and rename().
 */
#ifndef MRD_TELEMETRY_H
#define MRD_TELEMETRY_H

#include <jansson.h>
#include <stdint.h>

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

int mrd_telemetry_init(mrd *d);
void mrd_telemetry_close(mrd *d);

/* The connection goes away: drop its sampler state. */
void mrd_telemetry_conn_free(mrd_conn *c);

/* The recent in-memory samples (for `telemetry`, the --watch views):
 * {"interval_s", "paths": [{conn, path, plane, srtt_us: [...],
 * utilization: [...], tx_bytes_per_s: [...]}], "planes": [...]}, oldest
 * first. */
json_t *mrd_telemetry_recent(mrd *d);

const mrd_tel_stats *mrd_telemetry_stats(void);

#endif
