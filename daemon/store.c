/*
 * The daemon's state store over sqlite. See store.h for the contract and
 * docs/store.md for the schema, migrations and retention.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#define NS_PER_S INT64_C(1000000000)
#define MINUTE_NS (60 * NS_PER_S)
/* Counters are clamped so that sqlite's sum() over a minute cannot overflow. */
#define COUNTER_MAX (UINT64_C(1) << 40)
/* The -wal file is truncated back to this after a checkpoint. */
#define WAL_SIZE_LIMIT_BYTES (32 * 1024 * 1024)

/* ------------------------------------------------------------------------ */
/* Error table                                                              */

const char *mrd_store_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define MRD_STORE_ERR_MSG(name, val, msg)                                       \
	case MRD_STORE_ERR_##name:                                              \
		return msg;
		MRD_STORE_ERRNO_MAP(MRD_STORE_ERR_MSG)
#undef MRD_STORE_ERR_MSG
	}
	return "unknown error";
}

const char *mrd_store_err_name(int err)
{
	switch (err) {
	case 0:
		return "OK";
#define MRD_STORE_ERR_NAME(name, val, msg)                                      \
	case MRD_STORE_ERR_##name:                                              \
		return #name;
		MRD_STORE_ERRNO_MAP(MRD_STORE_ERR_NAME)
#undef MRD_STORE_ERR_NAME
	}
	return "UNKNOWN";
}

static const char *const event_names[MRD_STORE_EV_COUNT] = {
#define MRD_STORE_EV_TEXT(name, text) [MRD_STORE_EV_##name] = text,
	MRD_STORE_EVENT_MAP(MRD_STORE_EV_TEXT)
#undef MRD_STORE_EV_TEXT
};

const char *mrd_store_event_name(mrd_store_event_kind kind)
{
	if ((unsigned)kind >= MRD_STORE_EV_COUNT)
		return NULL;
	return event_names[kind];
}

/* ------------------------------------------------------------------------ */
/* Schema                                                                   */

/*
 * migrations[v] takes a database from user_version v to v + 1. A released
 * step is never edited: a change is a new step at the end. Each step runs in
 * its own transaction together with the user_version bump.
 */
static const char *const migrations[] = {
	/* 0 -> 1: the base schema. */
	"CREATE TABLE planes ("
	"  name TEXT PRIMARY KEY NOT NULL,"
	"  config TEXT NOT NULL DEFAULT '',"
	"  state TEXT NOT NULL DEFAULT 'unknown',"
	"  drained INTEGER NOT NULL DEFAULT 0 CHECK (drained IN (0, 1)),"
	"  updated_ts INTEGER NOT NULL DEFAULT 0"
	");"
	"CREATE TABLE peers ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL,"
	"  addresses TEXT NOT NULL DEFAULT '',"
	"  first_seen INTEGER NOT NULL,"
	"  last_seen INTEGER NOT NULL"
	");"
	"CREATE TABLE connections ("
	"  id INTEGER NOT NULL,"
	"  peer_id INTEGER,"
	"  service TEXT NOT NULL DEFAULT '',"
	"  state TEXT NOT NULL,"
	"  created_ts INTEGER NOT NULL,"
	"  closed_ts INTEGER,"
	"  reason TEXT,"
	"  UNIQUE (id, created_ts)"
	");"
	"CREATE INDEX connections_closed_ts ON connections (closed_ts);"
	"CREATE TABLE path_samples ("
	"  ts INTEGER NOT NULL,"
	"  conn_id INTEGER NOT NULL,"
	"  path_id INTEGER NOT NULL,"
	"  plane TEXT NOT NULL,"
	"  sport INTEGER NOT NULL,"
	"  state TEXT NOT NULL,"
	"  srtt_ns INTEGER NOT NULL,"
	"  ecn_fraction REAL NOT NULL,"
	"  lost_pkts INTEGER NOT NULL,"
	"  retx_pkts INTEGER NOT NULL,"
	"  utilization REAL NOT NULL"
	");"
	"CREATE INDEX path_samples_ts ON path_samples (ts);"
	"CREATE TABLE plane_samples ("
	"  ts INTEGER NOT NULL,"
	"  plane TEXT NOT NULL,"
	"  tx_bytes_per_s INTEGER NOT NULL,"
	"  rx_bytes_per_s INTEGER NOT NULL"
	");"
	"CREATE INDEX plane_samples_ts ON plane_samples (ts);"
	"CREATE TABLE events ("
	"  ts INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  plane TEXT,"
	"  conn_id INTEGER,"
	"  path_id INTEGER,"
	"  detail TEXT NOT NULL DEFAULT ''"
	");"
	"CREATE INDEX events_ts ON events (ts);",

	/* 1 -> 2: who drained a plane and when; drill reports; 1-minute
	 * telemetry aggregates. */
	"ALTER TABLE planes ADD COLUMN drained_by TEXT;"
	"ALTER TABLE planes ADD COLUMN drained_ts INTEGER;"
	"CREATE TABLE drills ("
	"  id INTEGER PRIMARY KEY,"
	"  plane TEXT NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  started_ts INTEGER NOT NULL,"
	"  ended_ts INTEGER,"
	"  result TEXT NOT NULL DEFAULT '{}'"
	");"
	"CREATE INDEX drills_started_ts ON drills (started_ts);"
	"CREATE TABLE path_samples_1m ("
	"  ts INTEGER NOT NULL,"
	"  conn_id INTEGER NOT NULL,"
	"  path_id INTEGER NOT NULL,"
	"  plane TEXT NOT NULL,"
	"  sports INTEGER NOT NULL,"
	"  samples INTEGER NOT NULL,"
	"  srtt_avg_ns REAL NOT NULL,"
	"  srtt_max_ns INTEGER NOT NULL,"
	"  ecn_avg REAL NOT NULL,"
	"  ecn_max REAL NOT NULL,"
	"  lost_pkts INTEGER NOT NULL,"
	"  retx_pkts INTEGER NOT NULL,"
	"  util_avg REAL NOT NULL,"
	"  util_max REAL NOT NULL,"
	"  UNIQUE (ts, conn_id, path_id)"
	");"
	"CREATE TABLE plane_samples_1m ("
	"  ts INTEGER NOT NULL,"
	"  plane TEXT NOT NULL,"
	"  samples INTEGER NOT NULL,"
	"  tx_avg_bytes_per_s REAL NOT NULL,"
	"  tx_max_bytes_per_s INTEGER NOT NULL,"
	"  rx_avg_bytes_per_s REAL NOT NULL,"
	"  rx_max_bytes_per_s INTEGER NOT NULL,"
	"  UNIQUE (ts, plane)"
	");",

	/* 2 -> 3: what the telemetry sampler measures beyond v2: a path's
	 * sending rate, a plane's state and utilization of its link (and how
	 * many of a minute's samples found it down). Existing rows get 0 and
	 * 'unknown': they were never measured. */
	"ALTER TABLE path_samples ADD COLUMN"
	"  tx_bytes_per_s INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE plane_samples ADD COLUMN"
	"  state TEXT NOT NULL DEFAULT 'unknown';"
	"ALTER TABLE plane_samples ADD COLUMN"
	"  utilization REAL NOT NULL DEFAULT 0;"
	"ALTER TABLE path_samples_1m ADD COLUMN"
	"  tx_avg_bytes_per_s REAL NOT NULL DEFAULT 0;"
	"ALTER TABLE plane_samples_1m ADD COLUMN"
	"  util_avg REAL NOT NULL DEFAULT 0;"
	"ALTER TABLE plane_samples_1m ADD COLUMN"
	"  util_max REAL NOT NULL DEFAULT 0;"
	"ALTER TABLE plane_samples_1m ADD COLUMN"
	"  down_samples INTEGER NOT NULL DEFAULT 0;",
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) ==
		       MRD_STORE_SCHEMA_VERSION,
	       "one migration step per schema version");

/* ------------------------------------------------------------------------ */
/* The queue                                                                */

typedef struct psample {
	int64_t ts;
	uint64_t conn_id, path_id, srtt_ns, lost, retx, tx;
	double ecn, util;
	uint16_t sport;
	char plane[MRD_STORE_NAME_MAX + 1];
	char state[MRD_STORE_STATE_MAX + 1];
} psample;

typedef struct plsample {
	int64_t ts;
	uint64_t tx, rx;
	double util;
	char plane[MRD_STORE_NAME_MAX + 1];
	char state[MRD_STORE_STATE_MAX + 1];
} plsample;

enum rec_kind { REC_EVENT, REC_PLANE, REC_PEER, REC_CONN, REC_DRILL };

/*
 * One queued record. Field use by kind:
 *   EVENT  ts, ev, name = plane ("" = none), id = conn, id2 = path,
 *          text1 = detail
 *   PLANE  ts, name, state, text1 = config
 *   PEER   ts, id = peer, id2 = instance, text1 = addresses
 *   CONN   ts = created, ts2 = closed, id, id2 = peer, state,
 *          text1 = service, text2 = reason
 *   DRILL  ts = started, ts2 = ended, id, name = plane, text1 = kind,
 *          text2 = result
 */
typedef struct rec {
	enum rec_kind kind;
	int ev;
	int64_t ts, ts2;
	uint64_t id, id2;
	char name[MRD_STORE_NAME_MAX + 1];
	char state[MRD_STORE_STATE_MAX + 1];
	char *text1, *text2;
} rec;

/* A ring that grows up to its cap and then overwrites its oldest entry. */
typedef struct ring {
	unsigned char *v;
	size_t head, len, alloc;
} ring;

typedef struct batch {
	rec *recs;
	size_t nrecs, recs_alloc;
	ring ps, pl;
	uint64_t lost_records; /* to report with a store.dropped event */
	int64_t lost_ts;
	unsigned failures;
} batch;

enum {
	ST_EVENT,
	ST_PLANE,
	ST_PEER,
	ST_CONN,
	ST_DRILL,
	ST_PSAMPLE,
	ST_PLSAMPLE,
	ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
	[ST_EVENT] = "INSERT INTO events (ts, kind, plane, conn_id, path_id, detail)"
		     " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_PLANE] = "INSERT INTO planes (name, config, state, updated_ts)"
		     " VALUES (?1, ?2, ?3, ?4)"
		     " ON CONFLICT (name) DO UPDATE SET config = excluded.config,"
		     " state = excluded.state, updated_ts = excluded.updated_ts",
	[ST_PEER] = "INSERT INTO peers (id, instance_id, addresses, first_seen,"
		    " last_seen) VALUES (?1, ?2, ?3, ?4, ?4)"
		    " ON CONFLICT (id) DO UPDATE SET"
		    " instance_id = excluded.instance_id,"
		    " addresses = excluded.addresses,"
		    " last_seen = max(last_seen, excluded.last_seen)",
	[ST_CONN] = "INSERT INTO connections (id, peer_id, service, state,"
		    " created_ts, closed_ts, reason)"
		    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
		    " ON CONFLICT (id, created_ts) DO UPDATE SET"
		    " peer_id = excluded.peer_id, service = excluded.service,"
		    " state = excluded.state, closed_ts = excluded.closed_ts,"
		    " reason = excluded.reason",
	[ST_DRILL] = "INSERT INTO drills (id, plane, kind, started_ts, ended_ts,"
		     " result) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
		     " ON CONFLICT (id) DO UPDATE SET plane = excluded.plane,"
		     " kind = excluded.kind, started_ts = excluded.started_ts,"
		     " ended_ts = excluded.ended_ts, result = excluded.result",
	[ST_PSAMPLE] = "INSERT INTO path_samples (ts, conn_id, path_id, plane,"
		       " sport, state, srtt_ns, ecn_fraction, lost_pkts,"
		       " retx_pkts, utilization, tx_bytes_per_s)"
		       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
		       " ?12)",
	[ST_PLSAMPLE] = "INSERT INTO plane_samples (ts, plane, tx_bytes_per_s,"
			" rx_bytes_per_s, state, utilization)"
			" VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
};

struct mrd_store {
	sqlite3 *db;
	sqlite3_stmt *stmt[ST_COUNT];
	char *path;

	/* Lock order: dblock before qlock; never take dblock holding qlock. */
	pthread_mutex_t dblock; /* the sqlite connection, spare batch, errmsg */
	pthread_mutex_t qlock;  /* active batch, counters, limits */

	batch b[2];
	batch *active; /* producers append here (qlock) */
	batch *spare;  /* flush writes or retries this one (dblock) */
	size_t inflight_samples, inflight_records;
	uint64_t unreported_lost;
	int64_t unreported_ts;
	uint64_t next_drill_id;
	mrd_store_limits lim;
	mrd_store_stats st;

	char errmsg[256];
};

void mrd_store_limits_default(mrd_store_limits *l)
{
	l->sample_queue_max = 65536;
	l->record_queue_max = 16384;
	l->raw_path_rows_max = 2000000;
	l->raw_plane_rows_max = 1000000;
	l->agg_retention_s = 7 * 24 * 3600;
	l->agg_rows_max = 1000000;
	l->event_retention_s = 30 * 24 * 3600;
	l->events_max = 250000;
	l->drills_max = 1000;
	l->conns_max = 250000;
	l->busy_timeout_ms = 5000;
	l->flush_retries = 3;
}

static bool limits_valid(const mrd_store_limits *l)
{
	return l->sample_queue_max > 0 && l->record_queue_max > 0 &&
	       l->raw_path_rows_max > 0 && l->raw_plane_rows_max > 0 &&
	       l->agg_retention_s > 0 &&
	       l->agg_retention_s <= INT64_MAX / NS_PER_S &&
	       l->agg_rows_max > 0 && l->event_retention_s > 0 &&
	       l->event_retention_s <= INT64_MAX / NS_PER_S &&
	       l->events_max > 0 && l->drills_max > 0 && l->conns_max > 0 &&
	       l->busy_timeout_ms >= 0 && l->flush_retries > 0;
}

static void ring_clear(ring *r, size_t esz, size_t max)
{
	r->head = r->len = 0;
	if (r->alloc > max) {
		free(r->v);
		r->v = NULL;
		r->alloc = 0;
	}
	(void)esz;
}

static void *ring_at(const ring *r, size_t esz, size_t i)
{
	return r->v + ((r->head + i) % r->alloc) * esz;
}

/* Appends e; when the ring holds max entries the oldest is overwritten and
 * *overwrote set. MRD_STORE_ERR_NOMEM if it had to grow and could not. */
static int ring_push(ring *r, size_t esz, size_t max, const void *e,
		     bool *overwrote)
{
	void *slot;
	*overwrote = false;
	if (r->len < r->alloc) {
		slot = ring_at(r, esz, r->len);
		r->len++;
	} else if (r->alloc < max) {
		size_t n = r->alloc ? r->alloc * 2 : 64;
		if (n > max)
			n = max;
		unsigned char *v = malloc(n * esz);
		if (!v)
			return MRD_STORE_ERR_NOMEM;
		for (size_t i = 0; i < r->len; i++)
			memcpy(v + i * esz, ring_at(r, esz, i), esz);
		free(r->v);
		r->v = v;
		r->alloc = n;
		r->head = 0;
		slot = r->v + r->len * esz;
		r->len++;
	} else {
		slot = r->v + r->head * esz;
		r->head = (r->head + 1) % r->alloc;
		*overwrote = true;
	}
	memcpy(slot, e, esz);
	return 0;
}

static void rec_free(rec *r)
{
	free(r->text1);
	free(r->text2);
	r->text1 = r->text2 = NULL;
}

static bool batch_empty(const batch *b)
{
	return b->nrecs == 0 && b->ps.len == 0 && b->pl.len == 0 &&
	       b->lost_records == 0;
}

static void batch_clear(batch *b, const mrd_store_limits *lim)
{
	for (size_t i = 0; i < b->nrecs; i++)
		rec_free(&b->recs[i]);
	b->nrecs = 0;
	if (b->recs_alloc > lim->record_queue_max) {
		free(b->recs);
		b->recs = NULL;
		b->recs_alloc = 0;
	}
	ring_clear(&b->ps, sizeof(psample), lim->sample_queue_max);
	ring_clear(&b->pl, sizeof(plsample), lim->sample_queue_max);
	b->lost_records = 0;
	b->lost_ts = 0;
	b->failures = 0;
}

static void batch_free(batch *b)
{
	for (size_t i = 0; i < b->nrecs; i++)
		rec_free(&b->recs[i]);
	free(b->recs);
	free(b->ps.v);
	free(b->pl.v);
	memset(b, 0, sizeof(*b));
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void save_errmsg(mrd_store *s)
{
	snprintf(s->errmsg, sizeof(s->errmsg), "%s", sqlite3_errmsg(s->db));
}

static int map_rc(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return MRD_STORE_ERR_BUSY;
	case SQLITE_NOMEM:
		return MRD_STORE_ERR_NOMEM;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return MRD_STORE_ERR_CORRUPT;
	default:
		return MRD_STORE_ERR_IO;
	}
}

/* Copies a name into a fixed field; "" or NULL is allowed only when
 * optional. */
static int copy_name(char *dst, size_t dstsz, const char *src, bool optional)
{
	if (!src || !*src) {
		dst[0] = '\0';
		return optional ? 0 : MRD_STORE_ERR_INVAL;
	}
	size_t n = strlen(src);
	if (n >= dstsz)
		return MRD_STORE_ERR_INVAL;
	memcpy(dst, src, n + 1);
	return 0;
}

/* A heap copy of free text, cut at MRD_STORE_TEXT_MAX bytes on a UTF-8
 * character boundary. NULL in, NULL out; *pok false if out of memory. */
static char *dup_text(const char *t, bool *pok)
{
	if (!t)
		return NULL;
	size_t n = strlen(t);
	if (n > MRD_STORE_TEXT_MAX) {
		n = MRD_STORE_TEXT_MAX;
		while (n > 0 && ((unsigned char)t[n] & 0xc0) == 0x80)
			n--;
	}
	char *d = malloc(n + 1);
	if (!d) {
		*pok = false;
		return NULL;
	}
	memcpy(d, t, n);
	d[n] = '\0';
	return d;
}

static double finite_or_zero(double x)
{
	if (!isfinite(x) || x < 0)
		return 0;
	return x;
}

static uint64_t clamp_counter(uint64_t x)
{
	return x > COUNTER_MAX ? COUNTER_MAX : x;
}

static int64_t clamp_i64(uint64_t x)
{
	return x > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)x;
}

/* An id as sqlite stores it: its int64 bit pattern, or NULL for none. */
static int bind_id(sqlite3_stmt *st, int i, uint64_t id)
{
	if (id == MRD_STORE_NO_ID)
		return sqlite3_bind_null(st, i);
	int64_t v;
	memcpy(&v, &id, sizeof(v));
	return sqlite3_bind_int64(st, i, v);
}

/* A value stored as its int64 bit pattern, never NULL. */
static int bind_u64(sqlite3_stmt *st, int i, uint64_t x)
{
	int64_t v;
	memcpy(&v, &x, sizeof(v));
	return sqlite3_bind_int64(st, i, v);
}

static uint64_t column_id(sqlite3_stmt *st, int i)
{
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return MRD_STORE_NO_ID;
	int64_t v = sqlite3_column_int64(st, i);
	uint64_t id;
	memcpy(&id, &v, sizeof(id));
	return id;
}

static int bind_ts_or_null(sqlite3_stmt *st, int i, int64_t ts)
{
	if (ts == 0)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_int64(st, i, ts);
}

static int bind_text(sqlite3_stmt *st, int i, const char *t)
{
	if (!t)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, t, -1, SQLITE_STATIC);
}

static const char *column_text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* Runs a prepared statement to completion and resets it. */
static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int exec_sql(mrd_store *s, const char *sql)
{
	return sqlite3_exec(s->db, sql, NULL, NULL, NULL);
}

static int commit_hook(void *ud)
{
	mrd_store *s = ud;
	pthread_mutex_lock(&s->qlock);
	s->st.commits++;
	pthread_mutex_unlock(&s->qlock);
	return 0;
}

/* Reads one integer from a query such as "PRAGMA user_version". */
static int query_int(sqlite3 *db, const char *sql, int64_t *pv)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*pv = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		*pv = 0;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* The path as an argument for the shell, quoted when it needs to be. */
static void shell_arg(char *buf, size_t bufsz, const char *path)
{
	bool plain = *path != '\0';
	for (const char *p = path; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789/._-+,:@%=",
			    *p))
			plain = false;
	/* A path too long for the message is cut; the message says so by
	 * ending without its closing quote. */
	int n = plain || strchr(path, '\'') ? snprintf(buf, bufsz, "%s", path)
					     : snprintf(buf, bufsz, "'%s'", path);
	if (n < 0 && bufsz)
		buf[0] = '\0';
}

static void corrupt_msg(char *err, size_t errlen, const char *path,
			const char *why)
{
	char q[512], q2[520];
	shell_arg(q, sizeof(q), path);
	char moved[600];
	snprintf(moved, sizeof(moved), "%s.corrupt", path);
	shell_arg(q2, sizeof(q2), moved);
	seterr(err, errlen,
	       "state database %s is corrupt (%s); the daemon will not start "
	       "with it. Move it aside (mv %s %s) and start again to create a "
	       "new one; drained planes must then be drained again.",
	       path, why, q, q2);
}

static void notstate_msg(char *err, size_t errlen, const char *path,
			 const char *why)
{
	char q[512], q2[520];
	shell_arg(q, sizeof(q), path);
	char moved[600];
	snprintf(moved, sizeof(moved), "%s.other", path);
	shell_arg(q2, sizeof(q2), moved);
	seterr(err, errlen,
	       "state database %s is a sqlite database of something else (%s); "
	       "the daemon will not start with it. Check state_db in the "
	       "configuration, or move the file aside (mv %s %s) and start "
	       "again to create a new one.",
	       path, why, q, q2);
}

/* ------------------------------------------------------------------------ */
/* Open                                                                     */

static const char sqlite_magic[16] = "SQLite format 3";

/*
 * Creates the file with mode 0640 if it is missing; otherwise checks that it
 * is a regular file that is empty or starts with the sqlite header. Only
 * reads an existing file.
 */
static int prepare_file(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (fd >= 0) {
		/* The umask may have removed bits; set the mode exactly. */
		int rc = 0;
		if (fchmod(fd, 0640) != 0) {
			seterr(err, errlen,
			       "cannot set mode 0640 on new state database %s: %s",
			       path, strerror(errno));
			rc = MRD_STORE_ERR_IO;
		}
		close(fd);
		return rc;
	}
	if (errno != EEXIST) {
		seterr(err, errlen,
		       "cannot create state database %s: %s (its directory must "
		       "exist and be writable by the daemon)",
		       path, strerror(errno));
		return MRD_STORE_ERR_IO;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		seterr(err, errlen, "cannot open state database %s: %s", path,
		       strerror(errno));
		return MRD_STORE_ERR_IO;
	}
	struct stat sb;
	if (fstat(fd, &sb) != 0) {
		seterr(err, errlen, "cannot stat state database %s: %s", path,
		       strerror(errno));
		close(fd);
		return MRD_STORE_ERR_IO;
	}
	if (!S_ISREG(sb.st_mode)) {
		seterr(err, errlen,
		       "state database %s is not a regular file; the daemon will "
		       "not start with it. Check state_db in the configuration.",
		       path);
		close(fd);
		return MRD_STORE_ERR_INVAL;
	}
	if (sb.st_size == 0) { /* created, but never written: start fresh */
		close(fd);
		return 0;
	}
	unsigned char hdr[100];
	ssize_t n;
	do
		n = pread(fd, hdr, sizeof(hdr), 0);
	while (n < 0 && errno == EINTR);
	int saved = errno;
	close(fd);
	if (n < 0) {
		seterr(err, errlen, "cannot read state database %s: %s", path,
		       strerror(saved));
		return MRD_STORE_ERR_IO;
	}
	if ((size_t)n < sizeof(hdr) ||
	    memcmp(hdr, sqlite_magic, sizeof(sqlite_magic)) != 0) {
		char why[128];
		snprintf(why, sizeof(why), "sqlite: %s",
			 sqlite3_errstr(SQLITE_NOTADB));
		corrupt_msg(err, errlen, path, why);
		return MRD_STORE_ERR_CORRUPT;
	}
	return 0;
}

/* PRAGMA quick_check: 0 if "ok", else the corruption message. */
static int check_integrity(mrd_store *s, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char why[300];
	int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st,
				    NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			const char *r = column_text(st, 0);
			if (r && strcmp(r, "ok") == 0) {
				sqlite3_finalize(st);
				return 0;
			}
			snprintf(why, sizeof(why), "sqlite quick_check: %s",
				 r ? r : "no result");
			sqlite3_finalize(st);
			corrupt_msg(err, errlen, s->path, why);
			return MRD_STORE_ERR_CORRUPT;
		}
		sqlite3_finalize(st);
	}
	int code = map_rc(rc);
	if (code == MRD_STORE_ERR_CORRUPT) {
		snprintf(why, sizeof(why), "sqlite: %s", sqlite3_errmsg(s->db));
		corrupt_msg(err, errlen, s->path, why);
	} else {
		seterr(err, errlen, "cannot check state database %s (sqlite: %s)",
		       s->path, sqlite3_errmsg(s->db));
	}
	return code;
}

static int migrate(mrd_store *s, int from, char *err, size_t errlen)
{
	for (int v = from; v < MRD_STORE_SCHEMA_VERSION; v++) {
		char sql[128];
		int rc = exec_sql(s, "BEGIN IMMEDIATE");
		if (rc == SQLITE_OK)
			rc = exec_sql(s, migrations[v]);
		if (rc == SQLITE_OK && v == 0) {
			snprintf(sql, sizeof(sql), "PRAGMA application_id = %d",
				 MRD_STORE_APPLICATION_ID);
			rc = exec_sql(s, sql);
		}
		if (rc == SQLITE_OK) {
			snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
				 v + 1);
			rc = exec_sql(s, sql);
		}
		if (rc == SQLITE_OK)
			rc = exec_sql(s, "COMMIT");
		if (rc != SQLITE_OK) {
			seterr(err, errlen,
			       "migrating state database %s from schema version "
			       "%d to %d failed (sqlite: %s); the step was rolled "
			       "back and the file is left at version %d.",
			       s->path, v, v + 1, sqlite3_errmsg(s->db), v);
			exec_sql(s, "ROLLBACK");
			return map_rc(rc);
		}
	}
	return 0;
}

static void store_free(mrd_store *s)
{
	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->stmt[i]);
	if (s->db)
		sqlite3_close_v2(s->db);
	batch_free(&s->b[0]);
	batch_free(&s->b[1]);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->dblock);
	free(s->path);
	free(s);
}

int mrd_store_open(mrd_store **ps, const char *path, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!ps)
		return MRD_STORE_ERR_INVAL;
	*ps = NULL;
	if (!path || !*path) {
		seterr(err, errlen, "no state database path given");
		return MRD_STORE_ERR_INVAL;
	}
	if (!sqlite3_threadsafe()) {
		seterr(err, errlen,
		       "the sqlite library was built without thread support");
		return MRD_STORE_ERR_INVAL;
	}
	int rc = prepare_file(path, err, errlen);
	if (rc < 0)
		return rc;

	mrd_store *s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(path))) {
		free(s);
		seterr(err, errlen, "out of memory opening %s", path);
		return MRD_STORE_ERR_NOMEM;
	}
	pthread_mutex_init(&s->qlock, NULL);
	pthread_mutex_init(&s->dblock, NULL);
	s->active = &s->b[0];
	s->spare = &s->b[1];
	mrd_store_limits_default(&s->lim);

	/* Without SQLITE_OPEN_CREATE: the file exists, made by us or not. */
	int src = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE, NULL);
	if (src != SQLITE_OK) {
		if (!s->db) {
			seterr(err, errlen, "out of memory opening %s", path);
			rc = MRD_STORE_ERR_NOMEM;
		} else if (map_rc(src) == MRD_STORE_ERR_CORRUPT) {
			char why[300];
			snprintf(why, sizeof(why), "sqlite: %s",
				 sqlite3_errmsg(s->db));
			corrupt_msg(err, errlen, path, why);
			rc = MRD_STORE_ERR_CORRUPT;
		} else {
			seterr(err, errlen,
			       "cannot open state database %s (sqlite: %s)", path,
			       sqlite3_errmsg(s->db));
			rc = map_rc(src);
		}
		goto fail;
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, s->lim.busy_timeout_ms);

	/* Read-only checks first: nothing is written to a file we refuse. */
	int64_t app_id = 0, version = 0, nobjects = 0;
	src = query_int(s->db, "PRAGMA application_id", &app_id);
	if (src == SQLITE_OK)
		src = query_int(s->db, "PRAGMA user_version", &version);
	if (src == SQLITE_OK)
		src = query_int(s->db, "SELECT count(*) FROM sqlite_master",
				&nobjects);
	if (src != SQLITE_OK) {
		rc = map_rc(src);
		if (rc == MRD_STORE_ERR_CORRUPT) {
			char why[300];
			snprintf(why, sizeof(why), "sqlite: %s",
				 sqlite3_errmsg(s->db));
			corrupt_msg(err, errlen, path, why);
		} else {
			seterr(err, errlen,
			       "cannot read state database %s (sqlite: %s)", path,
			       sqlite3_errmsg(s->db));
		}
		goto fail;
	}
	rc = check_integrity(s, err, errlen);
	if (rc < 0)
		goto fail;
	if (app_id != 0 && app_id != MRD_STORE_APPLICATION_ID) {
		char why[64];
		snprintf(why, sizeof(why), "application_id 0x%08" PRIx64,
			 (uint64_t)app_id & 0xffffffffu);
		notstate_msg(err, errlen, path, why);
		rc = MRD_STORE_ERR_NOTSTATE;
		goto fail;
	}
	if (app_id == 0 && (version != 0 || nobjects != 0)) {
		notstate_msg(err, errlen, path,
			     "it has tables but no metarocd application_id");
		rc = MRD_STORE_ERR_NOTSTATE;
		goto fail;
	}
	if (version > MRD_STORE_SCHEMA_VERSION || version < 0) {
		char q[512], q2[520], moved[600];
		shell_arg(q, sizeof(q), path);
		snprintf(moved, sizeof(moved), "%s.newer", path);
		shell_arg(q2, sizeof(q2), moved);
		seterr(err, errlen,
		       "state database %s has schema version %" PRId64
		       ", newer than this metarocd knows (%d): it was written "
		       "by a newer metarocd. The daemon will not start with "
		       "it. Run the newer metarocd, or move the file aside "
		       "(mv %s %s) and start again to create a new one; "
		       "drained planes must then be drained again.",
		       path, version, MRD_STORE_SCHEMA_VERSION, q, q2);
		rc = MRD_STORE_ERR_NEWER;
		goto fail;
	}

	/* The file is ours (or empty): set it up. */
	sqlite3_stmt *st;
	src = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st,
				 NULL);
	if (src == SQLITE_OK) {
		src = sqlite3_step(st);
		const char *mode = src == SQLITE_ROW ? column_text(st, 0) : NULL;
		if (src == SQLITE_ROW && (!mode || strcmp(mode, "wal") != 0))
			src = SQLITE_CANTOPEN;
		else if (src == SQLITE_ROW)
			src = SQLITE_OK;
		sqlite3_finalize(st);
	}
	if (src != SQLITE_OK) {
		seterr(err, errlen,
		       "cannot put state database %s in WAL mode (sqlite: %s); "
		       "its file system must support shared memory maps (not "
		       "NFS)",
		       path,
		       src == SQLITE_CANTOPEN ? "journal mode unchanged"
					      : sqlite3_errmsg(s->db));
		rc = map_rc(src);
		goto fail;
	}
	char sql[128];
	snprintf(sql, sizeof(sql),
		 "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;"
		 " PRAGMA journal_size_limit = %d",
		 WAL_SIZE_LIMIT_BYTES);
	src = exec_sql(s, sql);
	if (src != SQLITE_OK) {
		seterr(err, errlen, "cannot configure state database %s (sqlite: %s)",
		       path, sqlite3_errmsg(s->db));
		rc = map_rc(src);
		goto fail;
	}
	sqlite3_commit_hook(s->db, commit_hook, s);

	rc = migrate(s, (int)version, err, errlen);
	if (rc < 0)
		goto fail;

	for (int i = 0; i < ST_COUNT; i++) {
		src = sqlite3_prepare_v3(s->db, stmt_sql[i], -1,
					 SQLITE_PREPARE_PERSISTENT, &s->stmt[i],
					 NULL);
		if (src != SQLITE_OK) {
			seterr(err, errlen,
			       "cannot prepare statements on state database %s "
			       "(sqlite: %s)",
			       path, sqlite3_errmsg(s->db));
			rc = map_rc(src);
			goto fail;
		}
	}
	int64_t max_drill = 0;
	src = query_int(s->db, "SELECT coalesce(max(id), 0) FROM drills",
			&max_drill);
	if (src != SQLITE_OK) {
		seterr(err, errlen, "cannot read state database %s (sqlite: %s)",
		       path, sqlite3_errmsg(s->db));
		rc = map_rc(src);
		goto fail;
	}
	s->next_drill_id = max_drill > 0 ? (uint64_t)max_drill + 1 : 1;
	*ps = s;
	return 0;

fail:
	store_free(s);
	return rc;
}

int mrd_store_set_limits(mrd_store *s, const mrd_store_limits *l)
{
	if (!s || !l || !limits_valid(l))
		return MRD_STORE_ERR_INVAL;
	pthread_mutex_lock(&s->dblock);
	pthread_mutex_lock(&s->qlock);
	s->lim = *l;
	pthread_mutex_unlock(&s->qlock);
	sqlite3_busy_timeout(s->db, l->busy_timeout_ms);
	pthread_mutex_unlock(&s->dblock);
	return 0;
}

void mrd_store_close(mrd_store *s)
{
	if (!s)
		return;
	mrd_store_flush(s);
	/* A spare batch that failed is retried once more before giving up. */
	mrd_store_flush(s);
	store_free(s);
}

const char *mrd_store_errmsg(mrd_store *s)
{
	return s ? s->errmsg : "no store";
}

/* ------------------------------------------------------------------------ */
/* Queued writes                                                            */

static void note_lost(mrd_store *s, uint64_t n, int64_t ts)
{
	s->st.records_dropped += n;
	s->unreported_lost += n;
	if (ts > s->unreported_ts)
		s->unreported_ts = ts;
}

/* Takes ownership of r's texts. */
static int push_rec(mrd_store *s, rec *r, bool text_ok)
{
	pthread_mutex_lock(&s->qlock);
	batch *b = s->active;
	int rc = 0;
	if (!text_ok) {
		rc = MRD_STORE_ERR_NOMEM;
	} else if (b->nrecs >= s->lim.record_queue_max) {
		rc = MRD_STORE_ERR_FULL;
	} else if (b->nrecs == b->recs_alloc) {
		size_t n = b->recs_alloc ? b->recs_alloc * 2 : 16;
		if (n > s->lim.record_queue_max)
			n = s->lim.record_queue_max;
		rec *v = realloc(b->recs, n * sizeof(*v));
		if (!v) {
			rc = MRD_STORE_ERR_NOMEM;
		} else {
			b->recs = v;
			b->recs_alloc = n;
		}
	}
	if (rc == 0) {
		b->recs[b->nrecs++] = *r;
	} else {
		note_lost(s, 1, r->ts);
		rec_free(r);
	}
	pthread_mutex_unlock(&s->qlock);
	return rc;
}

static int reject(mrd_store *s)
{
	pthread_mutex_lock(&s->qlock);
	s->st.rejected++;
	pthread_mutex_unlock(&s->qlock);
	return MRD_STORE_ERR_INVAL;
}

int mrd_store_event(mrd_store *s, int64_t ts_ns, mrd_store_event_kind kind,
		    const char *plane, uint64_t conn_id, uint64_t path_id,
		    const char *detail)
{
	if (!s)
		return MRD_STORE_ERR_INVAL;
	rec r = {.kind = REC_EVENT, .ev = (int)kind, .ts = ts_ns, .id = conn_id,
		 .id2 = path_id};
	if ((unsigned)kind >= MRD_STORE_EV_COUNT ||
	    copy_name(r.name, sizeof(r.name), plane, true) < 0)
		return reject(s);
	bool ok = true;
	r.text1 = dup_text(detail, &ok);
	return push_rec(s, &r, ok);
}

int mrd_store_plane_update(mrd_store *s, const mrd_store_plane *p)
{
	if (!s || !p)
		return MRD_STORE_ERR_INVAL;
	rec r = {.kind = REC_PLANE, .ts = p->ts_ns};
	if (copy_name(r.name, sizeof(r.name), p->name, false) < 0 ||
	    copy_name(r.state, sizeof(r.state), p->state, true) < 0)
		return reject(s);
	if (!r.state[0])
		strcpy(r.state, "unknown");
	bool ok = true;
	r.text1 = dup_text(p->config ? p->config : "", &ok);
	return push_rec(s, &r, ok);
}

int mrd_store_peer_seen(mrd_store *s, uint64_t peer_id, uint64_t instance_id,
			const char *addresses, int64_t ts_ns)
{
	if (!s)
		return MRD_STORE_ERR_INVAL;
	if (peer_id == MRD_STORE_NO_ID)
		return reject(s);
	rec r = {.kind = REC_PEER, .ts = ts_ns, .id = peer_id,
		 .id2 = instance_id};
	bool ok = true;
	r.text1 = dup_text(addresses ? addresses : "", &ok);
	return push_rec(s, &r, ok);
}

int mrd_store_conn_update(mrd_store *s, const mrd_store_conn *c)
{
	if (!s || !c)
		return MRD_STORE_ERR_INVAL;
	rec r = {.kind = REC_CONN, .ts = c->created_ts_ns,
		 .ts2 = c->closed_ts_ns, .id = c->id, .id2 = c->peer_id};
	if (c->id == MRD_STORE_NO_ID ||
	    copy_name(r.state, sizeof(r.state), c->state, false) < 0)
		return reject(s);
	bool ok = true;
	r.text1 = dup_text(c->service ? c->service : "", &ok);
	r.text2 = dup_text(c->reason, &ok);
	return push_rec(s, &r, ok);
}

int mrd_store_drill_update(mrd_store *s, const mrd_store_drill *d)
{
	if (!s || !d)
		return MRD_STORE_ERR_INVAL;
	rec r = {.kind = REC_DRILL, .ts = d->started_ts_ns,
		 .ts2 = d->ended_ts_ns, .id = d->id};
	if (d->id == MRD_STORE_NO_ID || d->id > (uint64_t)INT64_MAX ||
	    !d->kind || copy_name(r.name, sizeof(r.name), d->plane, false) < 0)
		return reject(s);
	bool ok = true;
	r.text1 = dup_text(d->kind, &ok);
	r.text2 = dup_text(d->result_json ? d->result_json : "{}", &ok);
	return push_rec(s, &r, ok);
}

uint64_t mrd_store_drill_id_new(mrd_store *s)
{
	if (!s)
		return MRD_STORE_NO_ID;
	pthread_mutex_lock(&s->qlock);
	uint64_t id = s->next_drill_id++;
	pthread_mutex_unlock(&s->qlock);
	return id;
}

int mrd_store_path_sample(mrd_store *s, const mrd_store_path_sample_row *p)
{
	if (!s || !p)
		return MRD_STORE_ERR_INVAL;
	psample e;
	memset(&e, 0, sizeof(e));
	if (copy_name(e.plane, sizeof(e.plane), p->plane, false) < 0 ||
	    copy_name(e.state, sizeof(e.state), p->state, true) < 0)
		return reject(s);
	e.ts = p->ts_ns;
	e.conn_id = p->conn_id;
	e.path_id = p->path_id;
	e.sport = p->sport;
	e.srtt_ns = p->srtt_ns > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX
						      : p->srtt_ns;
	e.ecn = finite_or_zero(p->ecn_fraction);
	e.lost = clamp_counter(p->lost_pkts);
	e.retx = clamp_counter(p->retx_pkts);
	e.util = finite_or_zero(p->utilization);
	e.tx = clamp_counter(p->tx_bytes_per_s);
	pthread_mutex_lock(&s->qlock);
	bool overwrote;
	int rc = ring_push(&s->active->ps, sizeof(e), s->lim.sample_queue_max,
			   &e, &overwrote);
	if (rc < 0 || overwrote)
		s->st.samples_dropped++;
	pthread_mutex_unlock(&s->qlock);
	return rc;
}

int mrd_store_plane_sample(mrd_store *s, const mrd_store_plane_sample_row *p)
{
	if (!s || !p)
		return MRD_STORE_ERR_INVAL;
	plsample e;
	memset(&e, 0, sizeof(e));
	if (copy_name(e.plane, sizeof(e.plane), p->plane, false) < 0 ||
	    copy_name(e.state, sizeof(e.state), p->state ? p->state : "unknown",
		      true) < 0)
		return reject(s);
	e.ts = p->ts_ns;
	e.tx = clamp_counter(p->tx_bytes_per_s);
	e.rx = clamp_counter(p->rx_bytes_per_s);
	e.util = finite_or_zero(p->utilization);
	pthread_mutex_lock(&s->qlock);
	bool overwrote;
	int rc = ring_push(&s->active->pl, sizeof(e), s->lim.sample_queue_max,
			   &e, &overwrote);
	if (rc < 0 || overwrote)
		s->st.samples_dropped++;
	pthread_mutex_unlock(&s->qlock);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Flush                                                                    */

static int write_rec(mrd_store *s, const rec *r)
{
	sqlite3_stmt *st;
	switch (r->kind) {
	case REC_EVENT:
		st = s->stmt[ST_EVENT];
		sqlite3_bind_int64(st, 1, r->ts);
		sqlite3_bind_text(st, 2, event_names[r->ev], -1, SQLITE_STATIC);
		bind_text(st, 3, r->name[0] ? r->name : NULL);
		bind_id(st, 4, r->id);
		bind_id(st, 5, r->id2);
		bind_text(st, 6, r->text1 ? r->text1 : "");
		break;
	case REC_PLANE:
		st = s->stmt[ST_PLANE];
		bind_text(st, 1, r->name);
		bind_text(st, 2, r->text1);
		bind_text(st, 3, r->state);
		sqlite3_bind_int64(st, 4, r->ts);
		break;
	case REC_PEER:
		st = s->stmt[ST_PEER];
		bind_id(st, 1, r->id);
		bind_u64(st, 2, r->id2);
		bind_text(st, 3, r->text1);
		sqlite3_bind_int64(st, 4, r->ts);
		break;
	case REC_CONN:
		st = s->stmt[ST_CONN];
		bind_id(st, 1, r->id);
		bind_id(st, 2, r->id2);
		bind_text(st, 3, r->text1);
		bind_text(st, 4, r->state);
		sqlite3_bind_int64(st, 5, r->ts);
		bind_ts_or_null(st, 6, r->ts2);
		bind_text(st, 7, r->text2);
		break;
	case REC_DRILL:
		st = s->stmt[ST_DRILL];
		bind_id(st, 1, r->id);
		bind_text(st, 2, r->name);
		bind_text(st, 3, r->text1);
		sqlite3_bind_int64(st, 4, r->ts);
		bind_ts_or_null(st, 5, r->ts2);
		bind_text(st, 6, r->text2);
		break;
	default:
		return SQLITE_MISUSE;
	}
	return step_done(st);
}

static int write_batch(mrd_store *s, batch *b, int *prows)
{
	int rows = 0;
	int rc = exec_sql(s, "BEGIN IMMEDIATE");
	if (rc != SQLITE_OK) {
		save_errmsg(s);
		return rc;
	}
	for (size_t i = 0; i < b->nrecs && rc == SQLITE_OK; i++, rows++)
		rc = write_rec(s, &b->recs[i]);
	if (rc == SQLITE_OK && b->lost_records) {
		char detail[160];
		snprintf(detail, sizeof(detail),
			 "%" PRIu64 " events or updates were dropped: the state "
			 "database fell behind or failed",
			 b->lost_records);
		rec r = {.kind = REC_EVENT, .ev = MRD_STORE_EV_STORE_DROPPED,
			 .ts = b->lost_ts, .id = MRD_STORE_NO_ID,
			 .id2 = MRD_STORE_NO_ID, .text1 = detail};
		rc = write_rec(s, &r);
		rows++;
	}
	sqlite3_stmt *st = s->stmt[ST_PSAMPLE];
	for (size_t i = 0; i < b->ps.len && rc == SQLITE_OK; i++, rows++) {
		const psample *e = ring_at(&b->ps, sizeof(*e), i);
		sqlite3_bind_int64(st, 1, e->ts);
		bind_u64(st, 2, e->conn_id);
		bind_u64(st, 3, e->path_id);
		bind_text(st, 4, e->plane);
		sqlite3_bind_int(st, 5, e->sport);
		bind_text(st, 6, e->state);
		sqlite3_bind_int64(st, 7, clamp_i64(e->srtt_ns));
		sqlite3_bind_double(st, 8, e->ecn);
		sqlite3_bind_int64(st, 9, clamp_i64(e->lost));
		sqlite3_bind_int64(st, 10, clamp_i64(e->retx));
		sqlite3_bind_double(st, 11, e->util);
		sqlite3_bind_int64(st, 12, clamp_i64(e->tx));
		rc = step_done(st);
	}
	st = s->stmt[ST_PLSAMPLE];
	for (size_t i = 0; i < b->pl.len && rc == SQLITE_OK; i++, rows++) {
		const plsample *e = ring_at(&b->pl, sizeof(*e), i);
		sqlite3_bind_int64(st, 1, e->ts);
		bind_text(st, 2, e->plane);
		sqlite3_bind_int64(st, 3, clamp_i64(e->tx));
		sqlite3_bind_int64(st, 4, clamp_i64(e->rx));
		bind_text(st, 5, e->state);
		sqlite3_bind_double(st, 6, e->util);
		rc = step_done(st);
	}
	if (rc == SQLITE_OK)
		rc = exec_sql(s, "COMMIT");
	if (rc != SQLITE_OK) {
		save_errmsg(s);
		exec_sql(s, "ROLLBACK");
		return rc;
	}
	*prows = rows;
	return SQLITE_OK;
}

int mrd_store_flush(mrd_store *s)
{
	if (!s)
		return MRD_STORE_ERR_INVAL;
	pthread_mutex_lock(&s->dblock);
	pthread_mutex_lock(&s->qlock);
	if (batch_empty(s->spare)) {
		batch *t = s->spare;
		s->spare = s->active;
		s->active = t;
		s->spare->lost_records = s->unreported_lost;
		s->spare->lost_ts = s->unreported_ts;
		s->unreported_lost = 0;
		s->unreported_ts = 0;
		s->inflight_samples = s->spare->ps.len + s->spare->pl.len;
		s->inflight_records = s->spare->nrecs;
	}
	pthread_mutex_unlock(&s->qlock);

	/* The spare batch is ours alone while dblock is held. */
	batch *b = s->spare;
	if (batch_empty(b)) {
		pthread_mutex_unlock(&s->dblock);
		return 0;
	}
	int rows = 0;
	int src = write_batch(s, b, &rows);
	int rc = rows;
	pthread_mutex_lock(&s->qlock);
	if (src == SQLITE_OK) {
		s->st.flushes++;
		s->st.rows_written += (uint64_t)rows;
	} else {
		rc = map_rc(src);
		s->st.flush_failures++;
		if (++b->failures >= s->lim.flush_retries) {
			s->st.samples_dropped += b->ps.len + b->pl.len;
			s->st.records_dropped += b->nrecs;
			s->unreported_lost += b->nrecs + b->lost_records;
			if (b->lost_ts > s->unreported_ts)
				s->unreported_ts = b->lost_ts;
			for (size_t i = 0; i < b->nrecs; i++)
				if (b->recs[i].ts > s->unreported_ts)
					s->unreported_ts = b->recs[i].ts;
			src = SQLITE_OK; /* given up: clear it below */
		}
	}
	if (src == SQLITE_OK) {
		s->inflight_samples = 0;
		s->inflight_records = 0;
	}
	pthread_mutex_unlock(&s->qlock);
	if (src == SQLITE_OK)
		batch_clear(b, &s->lim);
	pthread_mutex_unlock(&s->dblock);
	return rc;
}

void mrd_store_get_stats(mrd_store *s, mrd_store_stats *out)
{
	if (!s) {
		memset(out, 0, sizeof(*out));
		return;
	}
	pthread_mutex_lock(&s->qlock);
	*out = s->st;
	out->queued_samples = s->active->ps.len + s->active->pl.len +
			      s->inflight_samples;
	out->queued_records = s->active->nrecs + s->inflight_records;
	pthread_mutex_unlock(&s->qlock);
}

/* ------------------------------------------------------------------------ */
/* Operator state                                                           */

int mrd_store_set_drained(mrd_store *s, const char *plane, bool drained,
			  const char *who, int64_t ts_ns)
{
	if (!s)
		return MRD_STORE_ERR_INVAL;
	char name[MRD_STORE_NAME_MAX + 1];
	if (copy_name(name, sizeof(name), plane, false) < 0)
		return reject(s);
	bool ok = true;
	char *by = dup_text(who ? who : "", &ok);
	if (!ok)
		return MRD_STORE_ERR_NOMEM;
	char detail[MRD_STORE_TEXT_MAX + 8];
	snprintf(detail, sizeof(detail), "by %s", by);

	pthread_mutex_lock(&s->dblock);
	sqlite3_stmt *up = NULL, *ev = NULL;
	/* FULL for this one transaction: the WAL is synced at COMMIT, so the
	 * operator's decision survives a power loss, not only a crash. */
	int rc = exec_sql(s, "PRAGMA synchronous = FULL");
	if (rc == SQLITE_OK)
		rc = exec_sql(s, "BEGIN IMMEDIATE");
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(
			s->db,
			"INSERT INTO planes (name, drained, drained_by, drained_ts,"
			" updated_ts) VALUES (?1, ?2, ?3, ?4, ?4)"
			" ON CONFLICT (name) DO UPDATE SET"
			" drained = excluded.drained,"
			" drained_by = excluded.drained_by,"
			" drained_ts = excluded.drained_ts",
			-1, &up, NULL);
	if (rc == SQLITE_OK) {
		bind_text(up, 1, name);
		sqlite3_bind_int(up, 2, drained ? 1 : 0);
		bind_text(up, 3, by);
		sqlite3_bind_int64(up, 4, ts_ns);
		rc = step_done(up);
	}
	if (rc == SQLITE_OK) {
		ev = s->stmt[ST_EVENT];
		sqlite3_bind_int64(ev, 1, ts_ns);
		sqlite3_bind_text(ev, 2,
				  event_names[drained ? MRD_STORE_EV_PLANE_DRAINED
						      : MRD_STORE_EV_PLANE_RESTORED],
				  -1, SQLITE_STATIC);
		bind_text(ev, 3, name);
		bind_id(ev, 4, MRD_STORE_NO_ID);
		bind_id(ev, 5, MRD_STORE_NO_ID);
		bind_text(ev, 6, detail);
		rc = step_done(ev);
	}
	if (rc == SQLITE_OK)
		rc = exec_sql(s, "COMMIT");
	if (rc != SQLITE_OK) {
		save_errmsg(s);
		exec_sql(s, "ROLLBACK");
	}
	sqlite3_finalize(up);
	exec_sql(s, "PRAGMA synchronous = NORMAL");
	pthread_mutex_unlock(&s->dblock);
	free(by);
	return rc == SQLITE_OK ? 0 : map_rc(rc);
}

int mrd_store_get_drained(mrd_store *s, const char *plane, bool *pdrained,
			  char *who, size_t whosz, int64_t *pts_ns)
{
	if (!s || !plane)
		return MRD_STORE_ERR_INVAL;
	pthread_mutex_lock(&s->dblock);
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db,
				    "SELECT drained, drained_by, drained_ts"
				    " FROM planes WHERE name = ?1",
				    -1, &st, NULL);
	int ret = 0;
	if (rc == SQLITE_OK) {
		bind_text(st, 1, plane);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			if (pdrained)
				*pdrained = sqlite3_column_int(st, 0) != 0;
			if (who && whosz) {
				const char *w = column_text(st, 1);
				snprintf(who, whosz, "%s", w ? w : "");
			}
			if (pts_ns)
				*pts_ns = sqlite3_column_int64(st, 2);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			ret = MRD_STORE_ERR_NOENT;
			rc = SQLITE_OK;
		}
		sqlite3_finalize(st);
	}
	if (rc != SQLITE_OK) {
		save_errmsg(s);
		ret = map_rc(rc);
	}
	pthread_mutex_unlock(&s->dblock);
	return ret;
}

int mrd_store_conns_close_all(mrd_store *s, int64_t ts_ns, const char *reason)
{
	if (!s)
		return MRD_STORE_ERR_INVAL;
	pthread_mutex_lock(&s->dblock);
	sqlite3_stmt *st;
	int n = 0;
	int rc = sqlite3_prepare_v2(s->db,
				    "UPDATE connections SET state = 'closed',"
				    " closed_ts = ?1, reason = ?2"
				    " WHERE closed_ts IS NULL",
				    -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, ts_ns);
		bind_text(st, 2, reason);
		rc = step_done(st);
		n = sqlite3_changes(s->db);
		sqlite3_finalize(st);
	}
	if (rc != SQLITE_OK)
		save_errmsg(s);
	pthread_mutex_unlock(&s->dblock);
	return rc == SQLITE_OK ? n : map_rc(rc);
}

/* ------------------------------------------------------------------------ */
/* Retention                                                                */

static int64_t floor_minute(int64_t ts)
{
	int64_t r = ts % MINUTE_NS;
	if (r < 0)
		r += MINUTE_NS;
	return ts - r;
}

/* Runs sql with ?1 = a (and ?2 = b if the statement has it); adds the
 * number of changed rows to *pchanges if not NULL. */
static int run2(mrd_store *s, const char *sql, int64_t a, int64_t b,
		int64_t *pchanges)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	if (sqlite3_bind_parameter_count(st) >= 1)
		sqlite3_bind_int64(st, 1, a);
	if (sqlite3_bind_parameter_count(st) >= 2)
		sqlite3_bind_int64(st, 2, b);
	rc = step_done(st);
	if (rc == SQLITE_OK && pchanges)
		*pchanges += sqlite3_changes(s->db);
	sqlite3_finalize(st);
	return rc;
}

/*
 * The cut that keeps at most rows_max rows of a raw table whose rowids grow
 * with time: the start of the minute after the newest row that must go, or
 * INT64_MIN when the table is within its cap. Rowids are contiguous because
 * rows are only ever deleted from the old end.
 */
static int cap_cut(mrd_store *s, const char *table, int64_t rows_max,
		   int64_t *pcut)
{
	char sql[160];
	int64_t maxrow = 0, t = 0;
	*pcut = INT64_MIN;
	snprintf(sql, sizeof(sql), "SELECT coalesce(max(rowid), 0) FROM %s",
		 table);
	int rc = query_int(s->db, sql, &maxrow);
	if (rc != SQLITE_OK || maxrow <= rows_max)
		return rc;
	sqlite3_stmt *st;
	snprintf(sql, sizeof(sql),
		 "SELECT ts FROM %s WHERE rowid <= ?1 ORDER BY rowid DESC"
		 " LIMIT 1",
		 table);
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(st, 1, maxrow - rows_max);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		t = sqlite3_column_int64(st, 0);
		*pcut = t > INT64_MAX - MINUTE_NS ? INT64_MAX
						  : floor_minute(t) + MINUTE_NS;
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

static const char fold_paths_sql[] =
	"INSERT INTO path_samples_1m (ts, conn_id, path_id, plane, sports,"
	" samples, srtt_avg_ns, srtt_max_ns, ecn_avg, ecn_max, lost_pkts,"
	" retx_pkts, util_avg, util_max, tx_avg_bytes_per_s)"
	" SELECT ts - ts % 60000000000 AS m, conn_id, path_id, plane,"
	" count(DISTINCT sport),"
	" count(*), avg(srtt_ns), max(srtt_ns), avg(ecn_fraction),"
	" max(ecn_fraction), sum(lost_pkts), sum(retx_pkts), avg(utilization),"
	" max(utilization), avg(tx_bytes_per_s)"
	" FROM path_samples WHERE ts < ?1"
	" GROUP BY m, conn_id, path_id"
	" ON CONFLICT (ts, conn_id, path_id) DO UPDATE SET"
	" sports = max(sports, excluded.sports),"
	" samples = samples + excluded.samples,"
	" srtt_avg_ns = (srtt_avg_ns * samples"
	"   + excluded.srtt_avg_ns * excluded.samples)"
	"   / (samples + excluded.samples),"
	" srtt_max_ns = max(srtt_max_ns, excluded.srtt_max_ns),"
	" ecn_avg = (ecn_avg * samples + excluded.ecn_avg * excluded.samples)"
	"   / (samples + excluded.samples),"
	" ecn_max = max(ecn_max, excluded.ecn_max),"
	" lost_pkts = lost_pkts + excluded.lost_pkts,"
	" retx_pkts = retx_pkts + excluded.retx_pkts,"
	" util_avg = (util_avg * samples + excluded.util_avg * excluded.samples)"
	"   / (samples + excluded.samples),"
	" util_max = max(util_max, excluded.util_max),"
	" tx_avg_bytes_per_s = (tx_avg_bytes_per_s * samples"
	"   + excluded.tx_avg_bytes_per_s * excluded.samples)"
	"   / (samples + excluded.samples)";

static const char fold_planes_sql[] =
	"INSERT INTO plane_samples_1m (ts, plane, samples, tx_avg_bytes_per_s,"
	" tx_max_bytes_per_s, rx_avg_bytes_per_s, rx_max_bytes_per_s,"
	" util_avg, util_max, down_samples)"
	" SELECT ts - ts % 60000000000 AS m, plane, count(*),"
	" avg(tx_bytes_per_s), max(tx_bytes_per_s), avg(rx_bytes_per_s),"
	" max(rx_bytes_per_s), avg(utilization), max(utilization),"
	" sum(state = 'down')"
	" FROM plane_samples WHERE ts < ?1"
	" GROUP BY m, plane"
	" ON CONFLICT (ts, plane) DO UPDATE SET"
	" samples = samples + excluded.samples,"
	" tx_avg_bytes_per_s = (tx_avg_bytes_per_s * samples"
	"   + excluded.tx_avg_bytes_per_s * excluded.samples)"
	"   / (samples + excluded.samples),"
	" tx_max_bytes_per_s = max(tx_max_bytes_per_s,"
	"   excluded.tx_max_bytes_per_s),"
	" rx_avg_bytes_per_s = (rx_avg_bytes_per_s * samples"
	"   + excluded.rx_avg_bytes_per_s * excluded.samples)"
	"   / (samples + excluded.samples),"
	" rx_max_bytes_per_s = max(rx_max_bytes_per_s,"
	"   excluded.rx_max_bytes_per_s),"
	" util_avg = (util_avg * samples + excluded.util_avg * excluded.samples)"
	"   / (samples + excluded.samples),"
	" util_max = max(util_max, excluded.util_max),"
	" down_samples = down_samples + excluded.down_samples";

int mrd_store_prune(mrd_store *s, int64_t now_ns, int64_t raw_retention_s)
{
	if (!s || raw_retention_s < 0 ||
	    raw_retention_s > INT64_MAX / NS_PER_S || now_ns < 0)
		return MRD_STORE_ERR_INVAL;
	pthread_mutex_lock(&s->qlock);
	mrd_store_limits lim = s->lim;
	pthread_mutex_unlock(&s->qlock);

	int64_t cut = floor_minute(now_ns - raw_retention_s * NS_PER_S);
	int64_t agg_cut = now_ns - lim.agg_retention_s * NS_PER_S;
	int64_t ev_cut = now_ns - lim.event_retention_s * NS_PER_S;
	int64_t folded = 0, pcut = INT64_MIN, lcut = INT64_MIN;

	pthread_mutex_lock(&s->dblock);
	int rc = exec_sql(s, "BEGIN IMMEDIATE");
	if (rc == SQLITE_OK)
		rc = cap_cut(s, "path_samples", lim.raw_path_rows_max, &pcut);
	if (rc == SQLITE_OK)
		rc = cap_cut(s, "plane_samples", lim.raw_plane_rows_max, &lcut);
	if (rc == SQLITE_OK) {
		/* Fold what is past the retention or over the cap. */
		if (pcut < cut)
			pcut = cut;
		if (lcut < cut)
			lcut = cut;
		rc = run2(s, fold_paths_sql, pcut, 0, NULL);
	}
	if (rc == SQLITE_OK)
		rc = run2(s, "DELETE FROM path_samples WHERE ts < ?1", pcut, 0,
			  &folded);
	if (rc == SQLITE_OK)
		rc = run2(s, fold_planes_sql, lcut, 0, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s, "DELETE FROM plane_samples WHERE ts < ?1", lcut, 0,
			  &folded);
	/* Aggregates: by age, then by count (oldest rowids first). */
	if (rc == SQLITE_OK)
		rc = run2(s, "DELETE FROM path_samples_1m WHERE ts < ?1", agg_cut,
			  0, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s,
			  "DELETE FROM path_samples_1m WHERE rowid <="
			  " (SELECT max(rowid) FROM path_samples_1m) - ?1",
			  lim.agg_rows_max, 0, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s, "DELETE FROM plane_samples_1m WHERE ts < ?1",
			  agg_cut, 0, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s,
			  "DELETE FROM plane_samples_1m WHERE rowid <="
			  " (SELECT max(rowid) FROM plane_samples_1m) - ?1",
			  lim.agg_rows_max, 0, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s, "DELETE FROM events WHERE ts < ?1", ev_cut, 0, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s,
			  "DELETE FROM events WHERE rowid <="
			  " (SELECT max(rowid) FROM events) - ?1",
			  lim.events_max, 0, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s,
			  "DELETE FROM connections WHERE closed_ts IS NOT NULL"
			  " AND (closed_ts < ?1 OR rowid <="
			  " (SELECT max(rowid) FROM connections) - ?2)",
			  agg_cut, lim.conns_max, NULL);
	if (rc == SQLITE_OK)
		rc = run2(s, "DELETE FROM peers WHERE last_seen < ?1", agg_cut, 0,
			  NULL);
	if (rc == SQLITE_OK)
		rc = run2(s,
			  "DELETE FROM drills WHERE id NOT IN"
			  " (SELECT id FROM drills ORDER BY id DESC LIMIT ?1)",
			  lim.drills_max, 0, NULL);
	if (rc == SQLITE_OK)
		rc = exec_sql(s, "COMMIT");
	if (rc != SQLITE_OK) {
		save_errmsg(s);
		exec_sql(s, "ROLLBACK");
	}
	pthread_mutex_unlock(&s->dblock);
	if (rc != SQLITE_OK)
		return map_rc(rc);
	return folded > INT32_MAX ? INT32_MAX : (int)folded;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */

/* Callbacks travel as the generic function pointer type and are cast back
 * to their own type by the row function that knows it. */
typedef void (*any_cb)(void);
typedef int (*row_fn)(sqlite3_stmt *st, any_cb cb, void *ud);

/* Runs sql with ?1 = since_ns (if it has a parameter) and hands each row to
 * fn; stops at fn's first non-zero return. */
static int run_query(mrd_store *s, const char *sql, int64_t since_ns,
		     row_fn fn, any_cb cb, void *ud)
{
	if (!s || !cb)
		return MRD_STORE_ERR_INVAL;
	pthread_mutex_lock(&s->dblock);
	sqlite3_stmt *st;
	int ret = 0;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK) {
		if (sqlite3_bind_parameter_count(st) >= 1)
			sqlite3_bind_int64(st, 1, since_ns);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			ret = fn(st, cb, ud);
			if (ret != 0)
				break;
		}
		if (rc == SQLITE_DONE || rc == SQLITE_ROW)
			rc = SQLITE_OK;
		sqlite3_finalize(st);
	}
	if (rc != SQLITE_OK) {
		save_errmsg(s);
		ret = map_rc(rc);
	}
	pthread_mutex_unlock(&s->dblock);
	return ret;
}

static int event_row(sqlite3_stmt *st, any_cb cb, void *ud)
{
	mrd_store_event_row r = {
		.ts_ns = sqlite3_column_int64(st, 0),
		.kind = column_text(st, 1),
		.plane = column_text(st, 2),
		.conn_id = column_id(st, 3),
		.path_id = column_id(st, 4),
		.detail = column_text(st, 5),
	};
	return ((mrd_store_event_cb)cb)(&r, ud);
}

int mrd_store_query_events(mrd_store *s, int64_t since_ns,
			   mrd_store_event_cb cb, void *ud)
{
	return run_query(s,
			 "SELECT ts, kind, plane, conn_id, path_id, detail"
			 " FROM events WHERE ts >= ?1 ORDER BY ts, rowid",
			 since_ns, event_row, (any_cb)cb, ud);
}

static int drill_row(sqlite3_stmt *st, any_cb cb, void *ud)
{
	mrd_store_drill_row r = {
		.id = column_id(st, 0),
		.plane = column_text(st, 1),
		.kind = column_text(st, 2),
		.started_ts_ns = sqlite3_column_int64(st, 3),
		.ended_ts_ns = sqlite3_column_int64(st, 4),
		.result_json = column_text(st, 5),
	};
	return ((mrd_store_drill_cb)cb)(&r, ud);
}

int mrd_store_query_drills(mrd_store *s, int64_t since_ns,
			   mrd_store_drill_cb cb, void *ud)
{
	return run_query(s,
			 "SELECT id, plane, kind, started_ts, ended_ts, result"
			 " FROM drills WHERE started_ts >= ?1"
			 " ORDER BY started_ts, id",
			 since_ns, drill_row, (any_cb)cb, ud);
}

static int path_sample_row(sqlite3_stmt *st, any_cb cb, void *ud)
{
	mrd_store_path_sample_row r = {
		.ts_ns = sqlite3_column_int64(st, 0),
		.conn_id = column_id(st, 1),
		.path_id = column_id(st, 2),
		.plane = column_text(st, 3),
		.sport = (uint16_t)sqlite3_column_int(st, 4),
		.state = column_text(st, 5),
		.srtt_ns = (uint64_t)sqlite3_column_int64(st, 6),
		.ecn_fraction = sqlite3_column_double(st, 7),
		.lost_pkts = (uint64_t)sqlite3_column_int64(st, 8),
		.retx_pkts = (uint64_t)sqlite3_column_int64(st, 9),
		.utilization = sqlite3_column_double(st, 10),
		.tx_bytes_per_s = (uint64_t)sqlite3_column_int64(st, 11),
	};
	return ((mrd_store_path_sample_cb)cb)(&r, ud);
}

int mrd_store_query_path_samples(mrd_store *s, int64_t since_ns,
				 mrd_store_path_sample_cb cb, void *ud)
{
	return run_query(s,
			 "SELECT ts, conn_id, path_id, plane, sport, state,"
			 " srtt_ns, ecn_fraction, lost_pkts, retx_pkts,"
			 " utilization, tx_bytes_per_s FROM path_samples"
			 " WHERE ts >= ?1"
			 " ORDER BY ts, rowid",
			 since_ns, path_sample_row, (any_cb)cb, ud);
}

static int plane_sample_row(sqlite3_stmt *st, any_cb cb, void *ud)
{
	mrd_store_plane_sample_row r = {
		.ts_ns = sqlite3_column_int64(st, 0),
		.plane = column_text(st, 1),
		.tx_bytes_per_s = (uint64_t)sqlite3_column_int64(st, 2),
		.rx_bytes_per_s = (uint64_t)sqlite3_column_int64(st, 3),
		.state = column_text(st, 4),
		.utilization = sqlite3_column_double(st, 5),
	};
	return ((mrd_store_plane_sample_cb)cb)(&r, ud);
}

int mrd_store_query_plane_samples(mrd_store *s, int64_t since_ns,
				  mrd_store_plane_sample_cb cb, void *ud)
{
	return run_query(s,
			 "SELECT ts, plane, tx_bytes_per_s, rx_bytes_per_s,"
			 " state, utilization FROM plane_samples"
			 " WHERE ts >= ?1 ORDER BY ts, rowid",
			 since_ns, plane_sample_row, (any_cb)cb, ud);
}

static int path_minute_row(sqlite3_stmt *st, any_cb cb, void *ud)
{
	mrd_store_path_minute r = {
		.ts_ns = sqlite3_column_int64(st, 0),
		.conn_id = column_id(st, 1),
		.path_id = column_id(st, 2),
		.plane = column_text(st, 3),
		.sports = (uint32_t)sqlite3_column_int64(st, 4),
		.samples = (uint64_t)sqlite3_column_int64(st, 5),
		.srtt_avg_ns = sqlite3_column_double(st, 6),
		.srtt_max_ns = (uint64_t)sqlite3_column_int64(st, 7),
		.ecn_avg = sqlite3_column_double(st, 8),
		.ecn_max = sqlite3_column_double(st, 9),
		.lost_pkts = (uint64_t)sqlite3_column_int64(st, 10),
		.retx_pkts = (uint64_t)sqlite3_column_int64(st, 11),
		.util_avg = sqlite3_column_double(st, 12),
		.util_max = sqlite3_column_double(st, 13),
		.tx_avg_bytes_per_s = sqlite3_column_double(st, 14),
	};
	return ((mrd_store_path_minute_cb)cb)(&r, ud);
}

int mrd_store_query_path_minutes(mrd_store *s, int64_t since_ns,
				 mrd_store_path_minute_cb cb, void *ud)
{
	return run_query(s,
			 "SELECT ts, conn_id, path_id, plane, sports, samples,"
			 " srtt_avg_ns, srtt_max_ns, ecn_avg, ecn_max,"
			 " lost_pkts, retx_pkts, util_avg, util_max,"
			 " tx_avg_bytes_per_s"
			 " FROM path_samples_1m WHERE ts >= ?1"
			 " ORDER BY ts, conn_id, path_id",
			 since_ns, path_minute_row, (any_cb)cb, ud);
}

static int plane_minute_row(sqlite3_stmt *st, any_cb cb, void *ud)
{
	mrd_store_plane_minute r = {
		.ts_ns = sqlite3_column_int64(st, 0),
		.plane = column_text(st, 1),
		.samples = (uint64_t)sqlite3_column_int64(st, 2),
		.tx_avg_bytes_per_s = sqlite3_column_double(st, 3),
		.tx_max_bytes_per_s = (uint64_t)sqlite3_column_int64(st, 4),
		.rx_avg_bytes_per_s = sqlite3_column_double(st, 5),
		.rx_max_bytes_per_s = (uint64_t)sqlite3_column_int64(st, 6),
		.util_avg = sqlite3_column_double(st, 7),
		.util_max = sqlite3_column_double(st, 8),
		.down_samples = (uint64_t)sqlite3_column_int64(st, 9),
	};
	return ((mrd_store_plane_minute_cb)cb)(&r, ud);
}

int mrd_store_query_plane_minutes(mrd_store *s, int64_t since_ns,
				  mrd_store_plane_minute_cb cb, void *ud)
{
	return run_query(s,
			 "SELECT ts, plane, samples, tx_avg_bytes_per_s,"
			 " tx_max_bytes_per_s, rx_avg_bytes_per_s,"
			 " rx_max_bytes_per_s, util_avg, util_max, down_samples"
			 " FROM plane_samples_1m"
			 " WHERE ts >= ?1 ORDER BY ts, plane",
			 since_ns, plane_minute_row, (any_cb)cb, ud);
}

static int plane_row(sqlite3_stmt *st, any_cb cb, void *ud)
{
	mrd_store_plane_row r = {
		.name = column_text(st, 0),
		.config = column_text(st, 1),
		.state = column_text(st, 2),
		.updated_ts_ns = sqlite3_column_int64(st, 3),
		.drained = sqlite3_column_int(st, 4) != 0,
		.drained_by = column_text(st, 5),
		.drained_ts_ns = sqlite3_column_int64(st, 6),
	};
	return ((mrd_store_plane_cb)cb)(&r, ud);
}

int mrd_store_query_planes(mrd_store *s, mrd_store_plane_cb cb, void *ud)
{
	return run_query(s,
			 "SELECT name, config, state, updated_ts, drained,"
			 " drained_by, drained_ts FROM planes ORDER BY name",
			 0, plane_row, (any_cb)cb, ud);
}
