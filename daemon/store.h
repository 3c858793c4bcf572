/*
 * The daemon's state store: one sqlite database (WAL mode) that holds what
 * must survive a restart (an operator's drained planes), what the operator
 * asks about later (the event log, drills, telemetry history), and the
 * daemon's view of planes, peers and connections. docs/store.md describes the
 * schema, migrations, corruption handling, batching, retention and the size
 * bound.
 *
 * Time. Every timestamp is wall-clock unix time in nanoseconds (int64_t,
 * CLOCK_REALTIME), passed in by the caller: the store never reads a clock, so
 * tests are deterministic. uv_hrtime() is NOT suitable (its origin is
 * arbitrary and changes with every boot). 0 means "not yet" for the
 * end-of-something fields (closed_ts_ns, ended_ts_ns) and is stored as NULL.
 * Retention windows are in seconds and say so in their names.
 *
 * Identifiers. Connection, peer and path ids are uint64_t; sqlite stores them
 * as their int64_t bit pattern and gives them back unchanged. MRD_STORE_NO_ID
 * means "none" and is stored as NULL.
 *
 * Writes. Telemetry samples, events and the plane/peer/connection/drill
 * upserts are only queued in memory (cheap, never touches sqlite) and are
 * written by mrd_store_flush(), one transaction per call, which the daemon
 * calls from a timer or a worker thread, never per packet. The queue is
 * bounded: samples are measured state, so when the database falls behind the
 * oldest queued samples are overwritten and counted; records (events and
 * upserts) are never overwritten: a record that does not fit is refused
 * (MRD_STORE_ERR_FULL), counted, and the next flush writes a "store.dropped"
 * event saying how many were lost. The operator's drained flag is different:
 * mrd_store_set_drained() writes through at once and durably (synchronous =
 * FULL for that transaction), because it must survive a crash.
 *
 * Threads. A store may be used from several threads. The queue has its own
 * mutex that is held only to copy a record in or to swap batches, so the
 * enqueue functions never wait for sqlite. Everything that touches the
 * database (flush, prune, set/get_drained, the queries, close) is serialized
 * by a second mutex; those calls block, so they belong on a worker or a
 * timer, never on the datapath. Callbacks of the query functions run with the
 * database mutex held: they must not call back into the store's database
 * functions (the enqueue functions are fine).
 *
 * Errors. Functions return 0 (or a count) on success and a negative
 * MRD_STORE_ERR_* code on failure. mrd_store_open() also writes a sentence
 * for the operator into err; mrd_store_errmsg() gives the last sqlite message
 * of a failed database call.
 */
#ifndef MRD_STORE_H
#define MRD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The schema version this code writes; older databases are migrated to it at
 * open, newer ones are refused. Stored in PRAGMA user_version. */
#define MRD_STORE_SCHEMA_VERSION 3

/* PRAGMA application_id of a metarocd state database ("MRcS"). */
#define MRD_STORE_APPLICATION_ID 0x4d526353

/* Longest plane name and path/connection state word the store accepts. */
#define MRD_STORE_NAME_MAX 31
#define MRD_STORE_STATE_MAX 15
/* Free-text fields (event detail, reasons, addresses, configuration summary,
 * drill result JSON) longer than this are cut at a UTF-8 boundary. */
#define MRD_STORE_TEXT_MAX 4096

#define MRD_STORE_NO_ID UINT64_MAX

/* X(NAME, value, message) */
#define MRD_STORE_ERRNO_MAP(X)                                                  \
	X(IO, -1, "state database I/O or sqlite error")                         \
	X(CORRUPT, -2, "state database is corrupt or not a database")           \
	X(NEWER, -3, "state database schema is newer than this daemon")         \
	X(NOTSTATE, -4, "file is a sqlite database but not a metarocd one")     \
	X(NOMEM, -5, "out of memory")                                           \
	X(INVAL, -6, "invalid argument")                                        \
	X(NOENT, -7, "no such entry")                                           \
	X(FULL, -8, "store queue is full; record dropped and counted")          \
	X(BUSY, -9, "state database is locked by another connection")

enum {
#define MRD_STORE_ERR_ENUM(name, val, msg) MRD_STORE_ERR_##name = (val),
	MRD_STORE_ERRNO_MAP(MRD_STORE_ERR_ENUM)
#undef MRD_STORE_ERR_ENUM
};

/* A sentence for the code; "unknown error" for codes not in the table. */
const char *mrd_store_strerror(int err);
/* The code's name without prefix ("CORRUPT"); "OK" for 0. */
const char *mrd_store_err_name(int err);

/* X(NAME, stored text) — the event log's kinds. The text is what the database
 * and the history queries carry; add new kinds at the end. */
#define MRD_STORE_EVENT_MAP(X)                                                  \
	X(PLANE_DOWN, "plane.down")                                             \
	X(PLANE_UP, "plane.up")                                                 \
	X(PLANE_DRAINED, "plane.drained")                                       \
	X(PLANE_RESTORED, "plane.restored")                                     \
	X(PATH_FAILED, "path.failed")                                           \
	X(PATH_REPORTED, "path.re-ported")                                      \
	X(PATH_RECOVERED, "path.recovered")                                     \
	X(CONN_UP, "conn.up")                                                   \
	X(CONN_DOWN, "conn.down")                                               \
	X(CONN_RESET, "conn.reset")                                             \
	X(DRILL_STARTED, "drill.started")                                       \
	X(DRILL_ENDED, "drill.ended")                                           \
	X(DAEMON_STARTED, "daemon.started")                                     \
	X(DAEMON_STOPPED, "daemon.stopped")                                     \
	X(STORE_DROPPED, "store.dropped")                                       \
	X(PATH_STEERED, "path.steered")                                         \
	X(PATH_DISABLED, "path.disabled")                                       \
	X(PATH_ENABLED, "path.enabled")                                         \
	X(PATH_STATE, "path.state")                                             \
	X(DRILL_RESTORED, "drill.restored")                                     \
	X(PATH_MOVED, "path.moved")

typedef enum mrd_store_event_kind {
#define MRD_STORE_EV_ENUM(name, text) MRD_STORE_EV_##name,
	MRD_STORE_EVENT_MAP(MRD_STORE_EV_ENUM)
#undef MRD_STORE_EV_ENUM
	MRD_STORE_EV_COUNT
} mrd_store_event_kind;

/* "plane.down" for MRD_STORE_EV_PLANE_DOWN; NULL for a kind not in the map. */
const char *mrd_store_event_name(mrd_store_event_kind kind);

typedef struct mrd_store mrd_store;

/* Limits; mrd_store_limits_default() fills the defaults named here. */
typedef struct mrd_store_limits {
	size_t sample_queue_max;      /* per sample kind, 65536 */
	size_t record_queue_max;      /* events + upserts, 16384 */
	int64_t raw_path_rows_max;    /* raw path samples kept, 2,000,000 */
	int64_t raw_plane_rows_max;   /* raw plane samples kept, 1,000,000 */
	int64_t agg_retention_s;      /* 1-minute aggregates, 7 days */
	int64_t agg_rows_max;         /* per aggregate table, 1,000,000 */
	int64_t event_retention_s;    /* events, 30 days */
	int64_t events_max;           /* events kept, 250,000 */
	int64_t drills_max;           /* drill reports kept, 1,000 */
	int64_t conns_max;            /* closed connections kept, 250,000 */
	int busy_timeout_ms;          /* sqlite busy timeout, 5000 */
	unsigned flush_retries;       /* a failed batch is tried 3 times */
} mrd_store_limits;

void mrd_store_limits_default(mrd_store_limits *l);

/* Replaces the limits (MRD_STORE_ERR_INVAL if one is zero or negative,
 * except busy_timeout_ms which may be 0). Lower queue caps take full effect
 * after the next flush. */
int mrd_store_set_limits(mrd_store *s, const mrd_store_limits *l);

/*
 * Opens (creating if missing) the state database at path, checks it, and
 * migrates an older schema step by step, one transaction per step.
 *
 * A missing file is created by the store itself with open(O_CREAT|O_EXCL)
 * and fchmod(0640) — not by changing the umask, which is process-wide — so
 * the mode is 0640 whatever the umask; sqlite gives its -wal and -shm files
 * the same mode. An existing file's mode is left as the operator set it.
 *
 * The file is never deleted, truncated or rewritten when it is refused:
 *   MRD_STORE_ERR_CORRUPT   not a sqlite file, or PRAGMA quick_check fails;
 *   MRD_STORE_ERR_NOTSTATE  a sqlite database of something else;
 *   MRD_STORE_ERR_NEWER     user_version above MRD_STORE_SCHEMA_VERSION;
 *   MRD_STORE_ERR_IO        cannot create/open it, WAL unavailable, or a
 *                           migration step failed (that step is rolled back);
 *   MRD_STORE_ERR_NOMEM, MRD_STORE_ERR_INVAL.
 * On failure err (if errlen > 0) holds a full sentence for the operator that
 * names the file and says what to do, and *ps is NULL. The store starts
 * with the default limits.
 *
 * It reads the whole file once (quick_check): about a second per GiB.
 */
int mrd_store_open(mrd_store **ps, const char *path, char *err, size_t errlen);

/* Flushes what is queued (a batch that fails gets one more try, then is
 * dropped) and closes the database. NULL is a no-op. */
void mrd_store_close(mrd_store *s);

/* The last sqlite error message of a failed database call. */
const char *mrd_store_errmsg(mrd_store *s);

/* --- queued writes (cheap; written by the next mrd_store_flush) ---------- */

/* An event; plane may be NULL, conn_id/path_id MRD_STORE_NO_ID, detail NULL.
 * MRD_STORE_ERR_FULL when the record queue is full (counted). */
int mrd_store_event(mrd_store *s, int64_t ts_ns, mrd_store_event_kind kind,
		    const char *plane, uint64_t conn_id, uint64_t path_id,
		    const char *detail);

typedef struct mrd_store_path_sample_row {
	int64_t ts_ns;
	uint64_t conn_id;
	uint64_t path_id;
	const char *plane;
	uint16_t sport;        /* the UDP source port (ECMP entropy) */
	const char *state;     /* the engine's path state word, e.g. "active" */
	uint64_t srtt_ns;
	double ecn_fraction;   /* CE-marked share of packets acked, 0..1 */
	uint64_t lost_pkts;    /* in the interval */
	uint64_t retx_pkts;    /* in the interval */
	double utilization;    /* share of the plane's link rate this path sent
				* in the interval, 0..1 (0 if the rate is
				* unknown) */
	uint64_t tx_bytes_per_s; /* sent in the interval (v3) */
} mrd_store_path_sample_row;

/* Queues a sample; when the queue is full the oldest queued path sample is
 * overwritten and counted (stats.samples_dropped). */
int mrd_store_path_sample(mrd_store *s, const mrd_store_path_sample_row *p);

typedef struct mrd_store_plane_sample_row {
	int64_t ts_ns;
	const char *plane;
	uint64_t tx_bytes_per_s;
	uint64_t rx_bytes_per_s;
	const char *state;     /* "up", "down", "drained", ...; NULL: "unknown" (v3) */
	double utilization;    /* tx rate / link rate, 0..1; 0 if unknown (v3) */
} mrd_store_plane_sample_row;

int mrd_store_plane_sample(mrd_store *s, const mrd_store_plane_sample_row *p);

/* Upsert of a plane's configuration summary and state (never its drained
 * flag, which only mrd_store_set_drained() changes). */
typedef struct mrd_store_plane {
	const char *name;
	const char *config;    /* a one-line summary, e.g. "eth1 10.0.1.2 mtu 4200" */
	const char *state;     /* "up", "down", ... */
	int64_t ts_ns;
} mrd_store_plane;

int mrd_store_plane_update(mrd_store *s, const mrd_store_plane *p);

/* A peer was seen: inserts it (first_seen = ts_ns) or updates it. */
int mrd_store_peer_seen(mrd_store *s, uint64_t peer_id, uint64_t instance_id,
			const char *addresses, int64_t ts_ns);

/* Upsert of a connection, keyed by (id, created_ts_ns): ids may be reused by
 * a restarted daemon without overwriting the old row. */
typedef struct mrd_store_conn {
	uint64_t id;
	uint64_t peer_id;      /* MRD_STORE_NO_ID if unknown */
	const char *service;
	const char *state;
	int64_t created_ts_ns;
	int64_t closed_ts_ns;  /* 0 while open */
	const char *reason;    /* why it closed, or NULL */
} mrd_store_conn;

int mrd_store_conn_update(mrd_store *s, const mrd_store_conn *c);

/* Upsert of a drill report, keyed by id (from mrd_store_drill_id_new). */
typedef struct mrd_store_drill {
	uint64_t id;
	const char *plane;
	const char *kind;          /* e.g. "plane-failover" */
	int64_t started_ts_ns;
	int64_t ended_ts_ns;       /* 0 while running */
	const char *result_json;   /* the report, JSON text; NULL for "{}" */
} mrd_store_drill;

int mrd_store_drill_update(mrd_store *s, const mrd_store_drill *d);

/* A drill id unused in the database and in this process (ids increase). */
uint64_t mrd_store_drill_id_new(mrd_store *s);

/*
 * Writes the queued batch in one transaction. Returns the number of rows
 * written (0 when nothing was queued) or a negative code; a batch that fails
 * is kept and retried by the next flush, and after limits.flush_retries
 * failures it is dropped and counted (records then get a "store.dropped"
 * event). While one batch is being written or retried the next one fills.
 */
int mrd_store_flush(mrd_store *s);

/* --- operator state (written through at once) ---------------------------- */

/*
 * Sets or clears a plane's drained flag, with who and when, and logs a
 * plane.drained / plane.restored event, in one durable transaction before
 * returning (creates the plane row if needed). Blocks for an fsync.
 */
int mrd_store_set_drained(mrd_store *s, const char *plane, bool drained,
			  const char *who, int64_t ts_ns);

/*
 * Reads a plane's drained flag. who (if whosz > 0) receives who set it (""
 * if unknown), *pts_ns when (0 if unknown); either may be NULL.
 * MRD_STORE_ERR_NOENT if the plane was never recorded.
 */
int mrd_store_get_drained(mrd_store *s, const char *plane, bool *pdrained,
			  char *who, size_t whosz, int64_t *pts_ns);

/* Marks every connection still open in the database as closed at ts_ns with
 * the reason (for the start of a daemon after a crash). Returns how many. */
int mrd_store_conns_close_all(mrd_store *s, int64_t ts_ns, const char *reason);

/* --- retention ----------------------------------------------------------- */

/*
 * One transaction: raw samples older than raw_retention_s (cut down to a
 * whole minute), or beyond the raw row caps, are folded into 1-minute
 * aggregates (merged with any aggregate already there) and deleted;
 * aggregates older than limits.agg_retention_s, events older than
 * limits.event_retention_s, closed connections and unseen peers older than
 * limits.agg_retention_s are deleted, and the row caps are applied. Returns
 * the number of raw sample rows folded, or a negative code.
 */
int mrd_store_prune(mrd_store *s, int64_t now_ns, int64_t raw_retention_s);

/* --- history queries ----------------------------------------------------- */
/*
 * Each calls cb once per row with ts >= since_ns, oldest first (ties in
 * insertion order). Strings in a row are valid only during the callback;
 * NULL columns come as NULL strings or MRD_STORE_NO_ID. A non-zero return
 * from cb stops the query and is returned; otherwise 0, or a negative code.
 * Only flushed rows are seen: flush first for the freshest view.
 */

typedef struct mrd_store_event_row {
	int64_t ts_ns;
	const char *kind;      /* "plane.down", ... (text, may be a newer kind) */
	const char *plane;
	uint64_t conn_id;
	uint64_t path_id;
	const char *detail;
} mrd_store_event_row;

typedef int (*mrd_store_event_cb)(const mrd_store_event_row *row, void *ud);
int mrd_store_query_events(mrd_store *s, int64_t since_ns,
			   mrd_store_event_cb cb, void *ud);

typedef struct mrd_store_drill_row {
	uint64_t id;
	const char *plane;
	const char *kind;
	int64_t started_ts_ns;
	int64_t ended_ts_ns;   /* 0 while running */
	const char *result_json;
} mrd_store_drill_row;

/* Drills that started at or after since_ns. */
typedef int (*mrd_store_drill_cb)(const mrd_store_drill_row *row, void *ud);
int mrd_store_query_drills(mrd_store *s, int64_t since_ns,
			   mrd_store_drill_cb cb, void *ud);

/* Raw path samples come through the mrd_store_path_sample_row struct. */
typedef int (*mrd_store_path_sample_cb)(const mrd_store_path_sample_row *row,
					void *ud);
int mrd_store_query_path_samples(mrd_store *s, int64_t since_ns,
				 mrd_store_path_sample_cb cb, void *ud);

typedef int (*mrd_store_plane_sample_cb)(const mrd_store_plane_sample_row *row,
					 void *ud);
int mrd_store_query_plane_samples(mrd_store *s, int64_t since_ns,
				  mrd_store_plane_sample_cb cb, void *ud);

/* A 1-minute aggregate of one path: one row per path and minute whatever
 * its re-ports, so the aggregates stay bounded. */
typedef struct mrd_store_path_minute {
	int64_t ts_ns;             /* start of the minute */
	uint64_t conn_id;
	uint64_t path_id;
	const char *plane;
	uint32_t sports;           /* distinct source ports seen; >1: re-ported
				    * (a minute folded in two parts: at least) */
	uint64_t samples;          /* raw samples folded in */
	double srtt_avg_ns;
	uint64_t srtt_max_ns;
	double ecn_avg;
	double ecn_max;
	uint64_t lost_pkts;        /* sum over the minute */
	uint64_t retx_pkts;        /* sum over the minute */
	double util_avg;
	double util_max;
	double tx_avg_bytes_per_s; /* (v3) */
} mrd_store_path_minute;

typedef int (*mrd_store_path_minute_cb)(const mrd_store_path_minute *row,
					void *ud);
int mrd_store_query_path_minutes(mrd_store *s, int64_t since_ns,
				 mrd_store_path_minute_cb cb, void *ud);

typedef struct mrd_store_plane_minute {
	int64_t ts_ns;
	const char *plane;
	uint64_t samples;
	double tx_avg_bytes_per_s;
	uint64_t tx_max_bytes_per_s;
	double rx_avg_bytes_per_s;
	uint64_t rx_max_bytes_per_s;
	double util_avg;           /* (v3) */
	double util_max;
	uint64_t down_samples;     /* samples with state "down" (v3) */
} mrd_store_plane_minute;

typedef int (*mrd_store_plane_minute_cb)(const mrd_store_plane_minute *row,
					 void *ud);
int mrd_store_query_plane_minutes(mrd_store *s, int64_t since_ns,
				  mrd_store_plane_minute_cb cb, void *ud);

/* The planes table, by name (for restoring drained planes at start). */
typedef struct mrd_store_plane_row {
	const char *name;
	const char *config;
	const char *state;
	int64_t updated_ts_ns;
	bool drained;
	const char *drained_by;    /* NULL if unknown */
	int64_t drained_ts_ns;     /* 0 if unknown */
} mrd_store_plane_row;

typedef int (*mrd_store_plane_cb)(const mrd_store_plane_row *row, void *ud);
int mrd_store_query_planes(mrd_store *s, mrd_store_plane_cb cb, void *ud);

/* --- counters ------------------------------------------------------------ */

typedef struct mrd_store_stats {
	uint64_t queued_samples;   /* now, path + plane, both batches */
	uint64_t queued_records;   /* now, both batches */
	uint64_t samples_dropped;  /* since open */
	uint64_t records_dropped;  /* since open */
	uint64_t rejected;         /* invalid input refused (name too long) */
	uint64_t flushes;          /* successful flushes that wrote rows */
	uint64_t flush_failures;
	uint64_t rows_written;
	uint64_t commits;          /* sqlite transactions committed, all kinds */
} mrd_store_stats;

void mrd_store_get_stats(mrd_store *s, mrd_store_stats *out);

#endif
