/*
 * The state store: creation and file mode, reopening, the operator's drained
 * flag, migrations, refusal of corrupt/newer/foreign files (which stay
 * byte-identical), batched flushes, queue bounds, retention and history
 * queries. Every database lives in a mkdtemp directory removed afterwards;
 * time is passed in, nothing sleeps.
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"

#define S_NS INT64_C(1000000000)
#define MIN_NS (60 * S_NS)
#define DAY_NS (86400 * S_NS)
/* A whole minute in 2023, so minute boundaries are easy to reason about. */
#define T0 (INT64_C(1699999980) * S_NS)

typedef struct ctx {
	char dir[64];
	char path[128];
} ctx;

static int setup(void **state)
{
	ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	snprintf(c->dir, sizeof(c->dir), "/tmp/mrd-store-XXXXXX");
	if (!mkdtemp(c->dir)) {
		free(c);
		return -1;
	}
	snprintf(c->path, sizeof(c->path), "%s/state.db", c->dir);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	ctx *c = *state;
	DIR *d = opendir(c->dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[512];
			snprintf(p, sizeof(p), "%s/%s", c->dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(c->dir);
	free(c);
	return 0;
}

/* --- helpers ------------------------------------------------------------ */

static mrd_store *open_ok(const char *path)
{
	mrd_store *s = NULL;
	char err[1024];
	int rc = mrd_store_open(&s, path, err, sizeof(err));
	if (rc != 0)
		print_error("open %s: %s\n", path, err);
	assert_int_equal(rc, 0);
	assert_non_null(s);
	return s;
}

static unsigned char *read_all(const char *path, size_t *plen)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	assert_true(n >= 0);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*plen = (size_t)n;
	return b;
}

static void write_all(const char *path, const void *data, size_t datalen)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, datalen, f), datalen);
	fclose(f);
}

/* Deterministic bytes (xorshift64). */
static void fill_random(unsigned char *b, size_t n, uint64_t seed)
{
	uint64_t x = seed ? seed : 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)(x >> 24);
	}
}

/* The test's own connection to the file, as an operator's sqlite3 would be. */
static sqlite3 *raw_open(const char *path)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	return db;
}

static void raw_exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		print_error("sql: %s: %s\n", sql, msg ? msg : "?");
	sqlite3_free(msg);
	assert_int_equal(rc, SQLITE_OK);
}

static int64_t raw_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int64_t count_rows(const char *path, const char *table)
{
	sqlite3 *db = raw_open(path);
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	int64_t n = raw_int(db, sql);
	sqlite3_close(db);
	return n;
}

static void expect_refused(const char *path, int code, const char *needle)
{
	size_t before_len, after_len;
	unsigned char *before = read_all(path, &before_len);
	mrd_store *s = (mrd_store *)&s; /* must be reset to NULL */
	char err[1024];
	int rc = mrd_store_open(&s, path, err, sizeof(err));
	assert_int_equal(rc, code);
	assert_null(s);
	if (!strstr(err, needle))
		print_error("message: %s\nwanted: %s\n", err, needle);
	assert_non_null(strstr(err, needle));
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "will not start"));
	/* Still there, byte for byte. */
	unsigned char *after = read_all(path, &after_len);
	assert_int_equal(after_len, before_len);
	assert_memory_equal(after, before, before_len);
	free(before);
	free(after);
}

static mrd_store_path_sample_row psample(int64_t ts, uint64_t conn,
					 uint64_t path, uint64_t srtt_ns,
					 double ecn, uint64_t lost,
					 uint64_t retx, double util)
{
	mrd_store_path_sample_row p = {
		.ts_ns = ts, .conn_id = conn, .path_id = path, .plane = "p0",
		.sport = 4000, .state = "active", .srtt_ns = srtt_ns,
		.ecn_fraction = ecn, .lost_pkts = lost, .retx_pkts = retx,
		.utilization = util,
	};
	return p;
}

static void add_psample(mrd_store *s, int64_t ts, uint64_t srtt_ns, double ecn,
			uint64_t lost, uint64_t retx, double util)
{
	mrd_store_path_sample_row p =
		psample(ts, 7, 1, srtt_ns, ecn, lost, retx, util);
	assert_int_equal(mrd_store_path_sample(s, &p), 0);
}

static void add_plsample(mrd_store *s, int64_t ts, uint64_t tx, uint64_t rx)
{
	mrd_store_plane_sample_row p = {.ts_ns = ts, .plane = "p0",
					.tx_bytes_per_s = tx,
					.rx_bytes_per_s = rx};
	assert_int_equal(mrd_store_plane_sample(s, &p), 0);
}

static void add_event(mrd_store *s, int64_t ts, const char *detail)
{
	assert_int_equal(mrd_store_event(s, ts, MRD_STORE_EV_PATH_FAILED, "p0",
					 7, 1, detail),
			 0);
}

/* Collectors for the history queries. */
#define MAX_ROWS 64
typedef struct seen {
	int n;
	int stop_after; /* 0: never */
	int64_t ts[MAX_ROWS];
	char text[MAX_ROWS][64];
	uint64_t id[MAX_ROWS];
	mrd_store_path_minute pm[MAX_ROWS];
	mrd_store_plane_minute lm[MAX_ROWS];
} seen;

static int keep(seen *v, int64_t ts, const char *text, uint64_t id)
{
	assert_true(v->n < MAX_ROWS);
	v->ts[v->n] = ts;
	snprintf(v->text[v->n], sizeof(v->text[0]), "%s", text ? text : "(null)");
	v->id[v->n] = id;
	v->n++;
	return v->stop_after && v->n >= v->stop_after ? 7 : 0;
}

static int on_event(const mrd_store_event_row *r, void *ud)
{
	char t[64];
	snprintf(t, sizeof(t), "%s|%s", r->kind, r->detail ? r->detail : "");
	return keep(ud, r->ts_ns, t, r->conn_id);
}

static int on_drill(const mrd_store_drill_row *r, void *ud)
{
	return keep(ud, r->started_ts_ns, r->result_json, r->id);
}

static int on_path_sample(const mrd_store_path_sample_row *r, void *ud)
{
	return keep(ud, r->ts_ns, r->plane, r->srtt_ns);
}

static int on_plane_sample(const mrd_store_plane_sample_row *r, void *ud)
{
	return keep(ud, r->ts_ns, r->plane, r->tx_bytes_per_s);
}

static int on_path_minute(const mrd_store_path_minute *r, void *ud)
{
	seen *v = ud;
	v->pm[v->n] = *r;
	v->pm[v->n].plane = NULL; /* only valid during the callback */
	return keep(v, r->ts_ns, r->plane, r->samples);
}

static int on_plane_minute(const mrd_store_plane_minute *r, void *ud)
{
	seen *v = ud;
	v->lm[v->n] = *r;
	v->lm[v->n].plane = NULL;
	return keep(v, r->ts_ns, r->plane, r->samples);
}

static int on_plane(const mrd_store_plane_row *r, void *ud)
{
	char t[64];
	snprintf(t, sizeof(t), "%s|%s|%s|%d", r->name, r->config, r->state,
		 r->drained);
	return keep(ud, r->updated_ts_ns, t, 0);
}

/* --- creation and reopening --------------------------------------------- */

/* A missing database is created with mode 0640 whatever the umask, in WAL
 * mode, at the current schema, each migration step its own transaction. */
static void test_create_fresh(void **state)
{
	ctx *c = *state;
	mode_t old = umask(077);
	mrd_store *s = open_ok(c->path);
	umask(old);
	struct stat sb;
	assert_int_equal(stat(c->path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0640);
	mrd_store_stats st;
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.commits, MRD_STORE_SCHEMA_VERSION);
	assert_int_equal(st.queued_samples + st.queued_records, 0);
	mrd_store_close(s);

	sqlite3 *db = raw_open(c->path);
	assert_int_equal(raw_int(db, "PRAGMA user_version"),
			 MRD_STORE_SCHEMA_VERSION);
	assert_int_equal(raw_int(db, "PRAGMA application_id"),
			 MRD_STORE_APPLICATION_ID);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q,
					    NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
	sqlite3_finalize(q);
	sqlite3_close(db);

	/* An existing file keeps the mode its owner gave it. */
	assert_int_equal(chmod(c->path, 0600), 0);
	s = open_ok(c->path);
	mrd_store_close(s);
	assert_int_equal(stat(c->path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
}

/* A directory that does not exist: a clear error naming the file. */
static void test_create_missing_dir(void **state)
{
	ctx *c = *state;
	char p[256];
	snprintf(p, sizeof(p), "%s/nope/state.db", c->dir);
	mrd_store *s = NULL;
	char err[512];
	assert_int_equal(mrd_store_open(&s, p, err, sizeof(err)),
			 MRD_STORE_ERR_IO);
	assert_null(s);
	assert_non_null(strstr(err, p));
	assert_non_null(strstr(err, "No such file or directory"));
}

/* Everything written survives close and reopen; ids come back unchanged. */
static void test_reopen_keeps_data(void **state)
{
	ctx *c = *state;
	const uint64_t big = UINT64_C(0xfedcba9876543210);
	mrd_store *s = open_ok(c->path);
	assert_int_equal(mrd_store_event(s, T0, MRD_STORE_EV_CONN_UP, NULL, big,
					 MRD_STORE_NO_ID, "to peer 2"),
			 0);
	mrd_store_plane pl = {.name = "p0", .config = "eth1 10.0.1.2 mtu 4200",
			      .state = "up", .ts_ns = T0};
	assert_int_equal(mrd_store_plane_update(s, &pl), 0);
	assert_int_equal(mrd_store_peer_seen(s, 2, big, "10.0.1.3", T0), 0);
	mrd_store_conn cn = {.id = big, .peer_id = 2, .service = "allreduce",
			     .state = "up", .created_ts_ns = T0};
	assert_int_equal(mrd_store_conn_update(s, &cn), 0);
	uint64_t did = mrd_store_drill_id_new(s);
	mrd_store_drill dr = {.id = did, .plane = "p0", .kind = "plane-failover",
			      .started_ts_ns = T0, .ended_ts_ns = T0 + S_NS,
			      .result_json = "{\"lost\":0}"};
	assert_int_equal(mrd_store_drill_update(s, &dr), 0);
	mrd_store_path_sample_row p =
		psample(T0, big, 3, 12000, 0.125, 1, 2, 0.75);
	assert_int_equal(mrd_store_path_sample(s, &p), 0);
	add_plsample(s, T0, 1000, 2000);
	assert_int_equal(mrd_store_flush(s), 7);
	mrd_store_close(s);

	s = open_ok(c->path);
	seen v = {0};
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 1);
	assert_string_equal(v.text[0], "conn.up|to peer 2");
	assert_true(v.id[0] == big);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_planes(s, on_plane, &v), 0);
	assert_int_equal(v.n, 1);
	assert_string_equal(v.text[0], "p0|eth1 10.0.1.2 mtu 4200|up|0");
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_drills(s, 0, on_drill, &v), 0);
	assert_int_equal(v.n, 1);
	assert_string_equal(v.text[0], "{\"lost\":0}");
	assert_true(v.id[0] == did);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_path_samples(s, 0, on_path_sample, &v),
			 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.id[0], 12000);
	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_plane_samples(s, 0, on_plane_sample, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.id[0], 1000);
	/* Drill ids keep increasing across restarts. */
	assert_true(mrd_store_drill_id_new(s) > did);
	mrd_store_close(s);

	sqlite3 *db = raw_open(c->path);
	assert_true((uint64_t)raw_int(db, "SELECT id FROM connections") == big);
	assert_true((uint64_t)raw_int(db, "SELECT instance_id FROM peers") ==
		    big);
	sqlite3_close(db);
}

/* --- operator state ----------------------------------------------------- */

/* The drained flag is committed before set_drained returns (no flush) and
 * survives close/reopen; later plane updates never clear it. */
static void test_drained_survives_reopen(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	bool drained = true;
	assert_int_equal(mrd_store_get_drained(s, "p1", &drained, NULL, 0, NULL),
			 MRD_STORE_ERR_NOENT);
	assert_int_equal(mrd_store_set_drained(s, "p1", true, "alice", T0 + 5),
			 0);
	/* Visible to another connection at once: it is on disk. */
	sqlite3 *db = raw_open(c->path);
	assert_int_equal(raw_int(db, "SELECT drained FROM planes"
				     " WHERE name = 'p1'"),
			 1);
	sqlite3_close(db);
	mrd_store_plane pl = {.name = "p1", .config = "eth2", .state = "up",
			      .ts_ns = T0 + 6};
	assert_int_equal(mrd_store_plane_update(s, &pl), 0);
	assert_int_equal(mrd_store_flush(s), 1);
	mrd_store_close(s);

	s = open_ok(c->path);
	char who[32];
	int64_t ts = 0;
	drained = false;
	assert_int_equal(mrd_store_get_drained(s, "p1", &drained, who,
					       sizeof(who), &ts),
			 0);
	assert_true(drained);
	assert_string_equal(who, "alice");
	assert_int_equal(ts, T0 + 5);
	seen v = {0};
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 1);
	assert_string_equal(v.text[0], "plane.drained|by alice");

	assert_int_equal(mrd_store_set_drained(s, "p1", false, "bob", T0 + 9),
			 0);
	mrd_store_close(s);
	s = open_ok(c->path);
	assert_int_equal(mrd_store_get_drained(s, "p1", &drained, who,
					       sizeof(who), &ts),
			 0);
	assert_false(drained);
	assert_string_equal(who, "bob");
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 2);
	assert_string_equal(v.text[1], "plane.restored|by bob");
	mrd_store_close(s);
}

/* --- migrations --------------------------------------------------------- */

/* The v1 schema exactly as it was released, frozen here on purpose: the
 * migration must keep working for files written by that version. */
static const char v1_ddl[] =
	"CREATE TABLE planes (name TEXT PRIMARY KEY NOT NULL,"
	" config TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT"
	" 'unknown', drained INTEGER NOT NULL DEFAULT 0 CHECK (drained IN"
	" (0, 1)), updated_ts INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE peers (id INTEGER PRIMARY KEY, instance_id INTEGER NOT"
	" NULL, addresses TEXT NOT NULL DEFAULT '', first_seen INTEGER NOT"
	" NULL, last_seen INTEGER NOT NULL);"
	"CREATE TABLE connections (id INTEGER NOT NULL, peer_id INTEGER,"
	" service TEXT NOT NULL DEFAULT '', state TEXT NOT NULL, created_ts"
	" INTEGER NOT NULL, closed_ts INTEGER, reason TEXT, UNIQUE (id,"
	" created_ts));"
	"CREATE INDEX connections_closed_ts ON connections (closed_ts);"
	"CREATE TABLE path_samples (ts INTEGER NOT NULL, conn_id INTEGER NOT"
	" NULL, path_id INTEGER NOT NULL, plane TEXT NOT NULL, sport INTEGER"
	" NOT NULL, state TEXT NOT NULL, srtt_ns INTEGER NOT NULL,"
	" ecn_fraction REAL NOT NULL, lost_pkts INTEGER NOT NULL, retx_pkts"
	" INTEGER NOT NULL, utilization REAL NOT NULL);"
	"CREATE INDEX path_samples_ts ON path_samples (ts);"
	"CREATE TABLE plane_samples (ts INTEGER NOT NULL, plane TEXT NOT NULL,"
	" tx_bytes_per_s INTEGER NOT NULL, rx_bytes_per_s INTEGER NOT NULL);"
	"CREATE INDEX plane_samples_ts ON plane_samples (ts);"
	"CREATE TABLE events (ts INTEGER NOT NULL, kind TEXT NOT NULL, plane"
	" TEXT, conn_id INTEGER, path_id INTEGER, detail TEXT NOT NULL DEFAULT"
	" '');"
	"CREATE INDEX events_ts ON events (ts);"
	"PRAGMA application_id = 1297245011;" /* 0x4d526353 */
	"PRAGMA user_version = 1;";

static void make_v1(const char *path)
{
	sqlite3 *db = raw_open(path);
	raw_exec(db, "PRAGMA journal_mode = WAL");
	raw_exec(db, v1_ddl);
	raw_exec(db,
		 "INSERT INTO planes VALUES ('p0', 'eth1', 'up', 1, 5);"
		 "INSERT INTO planes VALUES ('p1', 'eth2', 'down', 0, 6);"
		 "INSERT INTO events VALUES (1000, 'plane.down', 'p1', NULL,"
		 " NULL, 'carrier lost');"
		 "INSERT INTO events VALUES (2000, 'conn.up', NULL, 9, NULL, '');"
		 "INSERT INTO path_samples VALUES (1000, 9, 1, 'p0', 4000,"
		 " 'active', 11000, 0.0, 0, 0, 0.5);"
		 "INSERT INTO path_samples VALUES (2000, 9, 1, 'p0', 4000,"
		 " 'active', 13000, 0.5, 2, 1, 0.5);"
		 "INSERT INTO connections VALUES (9, 2, 'svc', 'up', 900, NULL,"
		 " NULL);");
	assert_int_equal(raw_int(db, "PRAGMA user_version"), 1);
	sqlite3_close(db);
}

/* A v1 database is migrated to the current schema in one transaction (one
 * step) and keeps every row, including an operator's drained plane. */
static void test_migrate_v1(void **state)
{
	ctx *c = *state;
	make_v1(c->path);
	mrd_store *s = open_ok(c->path);
	mrd_store_stats st;
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.commits, MRD_STORE_SCHEMA_VERSION - 1);

	bool drained = false;
	char who[16] = "x";
	int64_t ts = -1;
	assert_int_equal(mrd_store_get_drained(s, "p0", &drained, who,
					       sizeof(who), &ts),
			 0);
	assert_true(drained);
	assert_string_equal(who, ""); /* v1 did not record who */
	assert_int_equal(ts, 0);
	seen v = {0};
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 2);
	assert_string_equal(v.text[0], "plane.down|carrier lost");
	assert_int_equal(v.id[1], 9);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_path_samples(s, 0, on_path_sample, &v),
			 0);
	assert_int_equal(v.n, 2);
	assert_int_equal(v.id[1], 13000);

	/* What v2 added works on the migrated file. */
	mrd_store_drill dr = {.id = mrd_store_drill_id_new(s), .plane = "p1",
			      .kind = "plane-failover", .started_ts_ns = 3000};
	assert_int_equal(mrd_store_drill_update(s, &dr), 0);
	assert_int_equal(mrd_store_flush(s), 1);
	assert_int_equal(mrd_store_prune(s, 10 * MIN_NS, 60), 2);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_path_minutes(s, 0, on_path_minute, &v),
			 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.pm[0].samples, 2);
	assert_true(v.pm[0].srtt_avg_ns == 12000.0);
	assert_int_equal(mrd_store_set_drained(s, "p1", true, "carol", 4000), 0);
	mrd_store_close(s);

	sqlite3 *db = raw_open(c->path);
	assert_int_equal(raw_int(db, "PRAGMA user_version"),
			 MRD_STORE_SCHEMA_VERSION);
	assert_int_equal(raw_int(db, "SELECT count(*) FROM connections"), 1);
	assert_int_equal(raw_int(db, "SELECT count(*) FROM drills"), 1);
	sqlite3_close(db);

	/* Reopening a current file migrates nothing. */
	s = open_ok(c->path);
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.commits, 0);
	mrd_store_close(s);
}

/* The 1 -> 2 step exactly as it was released (frozen, as v1_ddl): with it
 * the test builds a real v2 file to migrate to v3. */
static const char v2_step[] =
	"ALTER TABLE planes ADD COLUMN drained_by TEXT;"
	"ALTER TABLE planes ADD COLUMN drained_ts INTEGER;"
	"CREATE TABLE drills (id INTEGER PRIMARY KEY, plane TEXT NOT NULL,"
	" kind TEXT NOT NULL, started_ts INTEGER NOT NULL, ended_ts INTEGER,"
	" result TEXT NOT NULL DEFAULT '{}');"
	"CREATE INDEX drills_started_ts ON drills (started_ts);"
	"CREATE TABLE path_samples_1m (ts INTEGER NOT NULL, conn_id INTEGER NOT"
	" NULL, path_id INTEGER NOT NULL, plane TEXT NOT NULL, sports INTEGER"
	" NOT NULL, samples INTEGER NOT NULL, srtt_avg_ns REAL NOT NULL,"
	" srtt_max_ns INTEGER NOT NULL, ecn_avg REAL NOT NULL, ecn_max REAL NOT"
	" NULL, lost_pkts INTEGER NOT NULL, retx_pkts INTEGER NOT NULL,"
	" util_avg REAL NOT NULL, util_max REAL NOT NULL,"
	" UNIQUE (ts, conn_id, path_id));"
	"CREATE TABLE plane_samples_1m (ts INTEGER NOT NULL, plane TEXT NOT"
	" NULL, samples INTEGER NOT NULL, tx_avg_bytes_per_s REAL NOT NULL,"
	" tx_max_bytes_per_s INTEGER NOT NULL, rx_avg_bytes_per_s REAL NOT"
	" NULL, rx_max_bytes_per_s INTEGER NOT NULL, UNIQUE (ts, plane));"
	"PRAGMA user_version = 2;";

/* A v2 database (drained plane, a drill, raw and folded samples) becomes v3
 * in one step; old rows read back with the new columns at their "never
 * measured" values, and the new columns are stored and folded. */
static void test_migrate_v2(void **state)
{
	ctx *c = *state;
	make_v1(c->path);
	sqlite3 *db = raw_open(c->path);
	raw_exec(db, v2_step);
	raw_exec(db,
		 "UPDATE planes SET drained_by = 'alice', drained_ts = 77"
		 " WHERE name = 'p0';"
		 "INSERT INTO drills VALUES (5, 'p1', 'plane-failover', 3000,"
		 " 4000, '{\"ok\":true}');"
		 "INSERT INTO plane_samples VALUES (1000, 'p1', 100, 200);"
		 "INSERT INTO plane_samples_1m VALUES (0, 'p1', 3, 10.0, 20,"
		 " 30.0, 40);");
	assert_int_equal(raw_int(db, "PRAGMA user_version"), 2);
	sqlite3_close(db);

	mrd_store *s = open_ok(c->path);
	mrd_store_stats st;
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.commits, 1); /* the one 2 -> 3 step */
	bool drained = false;
	char who[16] = "";
	int64_t ts = 0;
	assert_int_equal(mrd_store_get_drained(s, "p0", &drained, who,
					       sizeof(who), &ts),
			 0);
	assert_true(drained);
	assert_string_equal(who, "alice");
	assert_int_equal(ts, 77);
	seen v = {0};
	assert_int_equal(mrd_store_query_drills(s, 0, on_drill, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.id[0], 5);
	assert_string_equal(v.text[0], "{\"ok\":true}");
	assert_int_equal(mrd_store_drill_id_new(s), 6);

	/* The old plane sample: state unknown, utilization 0. */
	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_plane_samples(s, 0, on_plane_sample, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.id[0], 100);
	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_plane_minutes(s, 0, on_plane_minute, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.lm[0].samples, 3);
	assert_true(v.lm[0].util_avg == 0.0);
	assert_int_equal(v.lm[0].down_samples, 0);

	/* v3 columns: plane state and utilization, path tx rate; folded. */
	const int64_t m5 = 5 * MIN_NS;
	mrd_store_plane_sample_row pl[3] = {
		{.ts_ns = m5 + 1, .plane = "p1", .tx_bytes_per_s = 1000,
		 .state = "up", .utilization = 0.25},
		{.ts_ns = m5 + 2, .plane = "p1", .tx_bytes_per_s = 3000,
		 .state = "down", .utilization = 0.75},
		{.ts_ns = m5 + 3, .plane = "p1", .state = "drained"},
	};
	for (int i = 0; i < 3; i++)
		assert_int_equal(mrd_store_plane_sample(s, &pl[i]), 0);
	mrd_store_path_sample_row ps = psample(m5 + 1, 9, 2, 5000, 0, 0, 0, 0.5);
	ps.tx_bytes_per_s = 4000;
	assert_int_equal(mrd_store_path_sample(s, &ps), 0);
	ps.ts_ns = m5 + 2;
	ps.tx_bytes_per_s = 2000;
	assert_int_equal(mrd_store_path_sample(s, &ps), 0);
	assert_int_equal(mrd_store_flush(s), 5);
	sqlite3 *ro = raw_open(c->path);
	assert_int_equal(raw_int(ro, "SELECT count(*) FROM plane_samples"
				     " WHERE state = 'drained'"),
			 1);
	assert_int_equal(raw_int(ro, "SELECT sum(tx_bytes_per_s) FROM"
				     " path_samples"),
			 6000);
	sqlite3_close(ro);
	/* Fold everything before minute 9: the two v1 path samples, the old
	 * plane sample, and the 3 + 2 new ones. */
	assert_int_equal(mrd_store_prune(s, 10 * MIN_NS, 60), 2 + 1 + 3 + 2);
	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_plane_minutes(s, m5, on_plane_minute, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.lm[0].samples, 3);
	assert_true(fabs(v.lm[0].util_avg - 1.0 / 3) < 1e-12);
	assert_true(v.lm[0].util_max == 0.75);
	assert_int_equal(v.lm[0].down_samples, 1);
	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_path_minutes(s, m5, on_path_minute, &v), 0);
	assert_int_equal(v.n, 1);
	assert_true(v.pm[0].tx_avg_bytes_per_s == 3000.0);
	mrd_store_close(s);

	db = raw_open(c->path);
	assert_int_equal(raw_int(db, "PRAGMA user_version"), 3);
	sqlite3_close(db);
}

/* --- refusals: the file is never touched -------------------------------- */

static void test_newer_refused(void **state)
{
	ctx *c = *state;
	mrd_store_close(open_ok(c->path));
	sqlite3 *db = raw_open(c->path);
	raw_exec(db, "PRAGMA user_version = 99");
	sqlite3_close(db);
	char want[256];
	snprintf(want, sizeof(want),
		 "has schema version 99, newer than this metarocd knows (%d)",
		 MRD_STORE_SCHEMA_VERSION);
	expect_refused(c->path, MRD_STORE_ERR_NEWER, want);
	expect_refused(c->path, MRD_STORE_ERR_NEWER, "Run the newer metarocd");
}

static void corrupt_message(const ctx *c, const char *why, char *buf,
			    size_t bufsz)
{
	snprintf(buf, bufsz,
		 "state database %s is corrupt (%s); the daemon will not start "
		 "with it. Move it aside (mv %s %s.corrupt) and start again to "
		 "create a new one; drained planes must then be drained again.",
		 c->path, why, c->path, c->path);
}

/* Random bytes: refused before sqlite even opens it; nothing else appears
 * in the directory. */
static void test_corrupt_random_bytes(void **state)
{
	ctx *c = *state;
	unsigned char junk[16384];
	fill_random(junk, sizeof(junk), 42);
	write_all(c->path, junk, sizeof(junk));
	char want[1024];
	corrupt_message(c, "sqlite: file is not a database", want, sizeof(want));
	expect_refused(c->path, MRD_STORE_ERR_CORRUPT, want);

	mrd_store *s = NULL;
	char err[1024];
	assert_int_equal(mrd_store_open(&s, c->path, err, sizeof(err)),
			 MRD_STORE_ERR_CORRUPT);
	assert_string_equal(err, want);
	struct stat sb;
	char p[256];
	snprintf(p, sizeof(p), "%s-wal", c->path);
	assert_int_equal(stat(p, &sb), -1);

	/* Too short to hold a header is also not a database. */
	write_all(c->path, "SQLite", 6);
	expect_refused(c->path, MRD_STORE_ERR_CORRUPT, want);
}

/* Fills a database with enough rows for many pages. */
static void make_big(const char *path)
{
	mrd_store *s = open_ok(path);
	for (int i = 0; i < 3000; i++)
		add_psample(s, T0 + i * S_NS, 10000 + (uint64_t)i, 0.1, 1, 1,
			    0.5);
	for (int i = 0; i < 200; i++)
		add_event(s, T0 + i, "a detail that takes some room on a page");
	assert_int_equal(mrd_store_flush(s), 3200);
	mrd_store_close(s);
}

/* A real database cut in half. */
static void test_corrupt_truncated(void **state)
{
	ctx *c = *state;
	make_big(c->path);
	struct stat sb;
	assert_int_equal(stat(c->path, &sb), 0);
	assert_true(sb.st_size > 64 * 1024);
	assert_int_equal(truncate(c->path, sb.st_size / 2), 0);
	char want[1024];
	corrupt_message(c, "sqlite", want, sizeof(want));
	/* The reason varies with the damage; the rest is fixed. */
	char *cut = strstr(want, "sqlite");
	assert_non_null(cut);
	expect_refused(c->path, MRD_STORE_ERR_CORRUPT, cut + strlen("sqlite"));
	size_t n = (size_t)(cut - want);
	mrd_store *s = NULL;
	char err[1024];
	assert_int_equal(mrd_store_open(&s, c->path, err, sizeof(err)),
			 MRD_STORE_ERR_CORRUPT);
	assert_memory_equal(err, want, n);
}

/* A valid header over garbage pages. */
static void test_corrupt_pages(void **state)
{
	ctx *c = *state;
	make_big(c->path);
	size_t len;
	unsigned char *b = read_all(c->path, &len);
	fill_random(b + 100, len - 100, 7);
	write_all(c->path, b, len);
	free(b);
	expect_refused(c->path, MRD_STORE_ERR_CORRUPT,
		       "; the daemon will not start with it. Move it aside (mv ");
}

/* Someone else's sqlite database. */
static void test_not_state_refused(void **state)
{
	ctx *c = *state;
	sqlite3 *db = raw_open(c->path);
	raw_exec(db, "CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1)");
	sqlite3_close(db);
	expect_refused(c->path, MRD_STORE_ERR_NOTSTATE,
		       "is a sqlite database of something else");
	db = raw_open(c->path);
	raw_exec(db, "PRAGMA application_id = 1234");
	sqlite3_close(db);
	expect_refused(c->path, MRD_STORE_ERR_NOTSTATE, "application_id");
}

/* --- batching ----------------------------------------------------------- */

/* Nothing reaches the file until flush; one flush is one transaction that
 * writes every queued row. */
static void test_flush_one_transaction(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	for (int i = 0; i < 5; i++)
		add_event(s, T0 + i, "e");
	for (int i = 0; i < 100; i++)
		add_psample(s, T0 + i, 1000, 0, 0, 0, 0);
	for (int i = 0; i < 10; i++)
		add_plsample(s, T0 + i, 1, 2);
	mrd_store_plane pl = {.name = "p0", .state = "up", .ts_ns = T0};
	assert_int_equal(mrd_store_plane_update(s, &pl), 0);
	assert_int_equal(mrd_store_peer_seen(s, 2, 3, "a", T0), 0);
	mrd_store_conn cn = {.id = 1, .peer_id = 2, .state = "up",
			     .created_ts_ns = T0};
	assert_int_equal(mrd_store_conn_update(s, &cn), 0);
	mrd_store_drill dr = {.id = 1, .plane = "p0", .kind = "k",
			      .started_ts_ns = T0};
	assert_int_equal(mrd_store_drill_update(s, &dr), 0);

	mrd_store_stats st0, st1;
	mrd_store_get_stats(s, &st0);
	assert_int_equal(st0.queued_samples, 110);
	assert_int_equal(st0.queued_records, 9);
	assert_int_equal(count_rows(c->path, "events"), 0);
	assert_int_equal(count_rows(c->path, "path_samples"), 0);

	assert_int_equal(mrd_store_flush(s), 119);
	mrd_store_get_stats(s, &st1);
	assert_int_equal(st1.commits - st0.commits, 1);
	assert_int_equal(st1.flushes - st0.flushes, 1);
	assert_int_equal(st1.rows_written, 119);
	assert_int_equal(st1.queued_samples + st1.queued_records, 0);
	assert_int_equal(count_rows(c->path, "events"), 5);
	assert_int_equal(count_rows(c->path, "path_samples"), 100);
	assert_int_equal(count_rows(c->path, "plane_samples"), 10);
	assert_int_equal(count_rows(c->path, "planes"), 1);
	assert_int_equal(count_rows(c->path, "peers"), 1);
	assert_int_equal(count_rows(c->path, "connections"), 1);
	assert_int_equal(count_rows(c->path, "drills"), 1);

	/* An empty flush writes nothing and opens no transaction. */
	assert_int_equal(mrd_store_flush(s), 0);
	mrd_store_get_stats(s, &st0);
	assert_int_equal(st0.commits, st1.commits);

	/* A later upsert of the same peer and connection updates in place. */
	assert_int_equal(mrd_store_peer_seen(s, 2, 4, "b", T0 + S_NS), 0);
	cn.state = "closed";
	cn.closed_ts_ns = T0 + S_NS;
	cn.reason = "peer reset";
	assert_int_equal(mrd_store_conn_update(s, &cn), 0);
	assert_int_equal(mrd_store_flush(s), 2);
	mrd_store_close(s);
	sqlite3 *db = raw_open(c->path);
	assert_int_equal(raw_int(db, "SELECT count(*) FROM peers WHERE"
				     " instance_id = 4 AND first_seen = "
				     "1699999980000000000 AND last_seen = "
				     "1699999981000000000"),
			 1);
	assert_int_equal(raw_int(db, "SELECT count(*) FROM connections WHERE"
				     " state = 'closed' AND reason ="
				     " 'peer reset'"),
			 1);
	sqlite3_close(db);
}

/* Samples over the bound overwrite the oldest and are counted; records over
 * the bound are refused, counted, and reported by a store.dropped event. */
static void test_queue_bound_and_counters(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	mrd_store_limits l;
	mrd_store_limits_default(&l);
	l.sample_queue_max = 8;
	l.record_queue_max = 4;
	assert_int_equal(mrd_store_set_limits(s, &l), 0);

	for (int i = 0; i < 20; i++)
		add_psample(s, T0 + i * S_NS, (uint64_t)i, 0, 0, 0, 0);
	for (int i = 0; i < 6; i++) {
		int rc = mrd_store_event(s, T0 + i, MRD_STORE_EV_CONN_RESET,
					 NULL, (uint64_t)i, MRD_STORE_NO_ID,
					 NULL);
		assert_int_equal(rc, i < 4 ? 0 : MRD_STORE_ERR_FULL);
	}
	mrd_store_stats st;
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.samples_dropped, 12);
	assert_int_equal(st.queued_samples, 8);
	assert_int_equal(st.records_dropped, 2);
	assert_int_equal(st.queued_records, 4);

	assert_int_equal(mrd_store_flush(s), 8 + 4 + 1);
	seen v = {0};
	assert_int_equal(mrd_store_query_path_samples(s, 0, on_path_sample, &v),
			 0);
	assert_int_equal(v.n, 8);
	for (int i = 0; i < 8; i++) /* the newest eight, in order */
		assert_int_equal(v.id[i], 12 + i);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 5);
	for (int i = 0; i < 4; i++)
		assert_int_equal(v.id[i], i);
	assert_non_null(strstr(v.text[4], "store.dropped|2 events"));
	assert_int_equal(v.ts[4], T0 + 5);

	/* Once reported, not reported again. */
	add_event(s, T0 + 10, "x");
	assert_int_equal(mrd_store_flush(s), 1);

	l.sample_queue_max = 0;
	assert_int_equal(mrd_store_set_limits(s, &l), MRD_STORE_ERR_INVAL);
	mrd_store_close(s);
}

/* A failed flush keeps its batch and retries it; after flush_retries
 * failures the batch is dropped, counted and reported. */
static void test_flush_retry_then_drop(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	mrd_store_limits l;
	mrd_store_limits_default(&l);
	l.busy_timeout_ms = 0; /* fail at once instead of waiting */
	l.flush_retries = 2;
	assert_int_equal(mrd_store_set_limits(s, &l), 0);

	sqlite3 *db = raw_open(c->path);
	raw_exec(db, "BEGIN IMMEDIATE"); /* another writer holds the lock */
	for (int i = 0; i < 3; i++)
		add_event(s, T0 + i, "kept");
	assert_int_equal(mrd_store_flush(s), MRD_STORE_ERR_BUSY);
	add_event(s, T0 + 3, "next batch");
	mrd_store_stats st;
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.flush_failures, 1);
	assert_int_equal(st.queued_records, 4);
	raw_exec(db, "COMMIT");
	assert_int_equal(mrd_store_flush(s), 3); /* the retried batch */
	assert_int_equal(mrd_store_flush(s), 1);

	raw_exec(db, "BEGIN IMMEDIATE");
	add_event(s, T0 + 4, "lost");
	add_event(s, T0 + 5, "lost");
	assert_int_equal(mrd_store_flush(s), MRD_STORE_ERR_BUSY);
	assert_int_equal(mrd_store_flush(s), MRD_STORE_ERR_BUSY); /* gives up */
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.records_dropped, 2);
	assert_int_equal(st.queued_records, 0);
	raw_exec(db, "COMMIT");
	sqlite3_close(db);
	assert_int_equal(mrd_store_flush(s), 1); /* the store.dropped event */
	seen v = {0};
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 5);
	assert_string_equal(v.text[3], "path.failed|next batch");
	assert_non_null(strstr(v.text[4], "store.dropped|2 events"));
	assert_int_equal(v.ts[4], T0 + 5);
	mrd_store_close(s);
}

/* One thread queues while another flushes: every row is written or
 * counted as dropped, none is lost or written twice. */
typedef struct producer {
	mrd_store *s;
	atomic_int done;
	int samples, events, refused;
} producer;

static void *produce(void *arg)
{
	producer *p = arg;
	for (int i = 0; i < p->samples; i++) {
		mrd_store_path_sample_row r =
			psample(T0 + i, 1, (uint64_t)i % 16, (uint64_t)i, 0, 0,
				0, 0);
		if (mrd_store_path_sample(p->s, &r) != 0)
			p->refused++;
		if (i % 10 == 0 &&
		    mrd_store_event(p->s, T0 + i, MRD_STORE_EV_PATH_FAILED, "p0",
				    1, 1, NULL) != 0)
			p->refused++;
	}
	atomic_store(&p->done, 1);
	return NULL;
}

static void test_threads_queue_while_flushing(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	producer p = {.s = s, .samples = 20000, .events = 2000};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, produce, &p), 0);
	int64_t written = 0;
	while (!atomic_load(&p.done)) {
		int n = mrd_store_flush(s);
		assert_true(n >= 0);
		written += n;
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	int n = mrd_store_flush(s);
	assert_true(n >= 0);
	written += n;
	mrd_store_stats st;
	mrd_store_get_stats(s, &st);
	mrd_store_close(s);
	assert_int_equal(p.refused, 0);
	int64_t markers = count_rows(c->path, "events") - p.events;
	assert_int_equal(markers, 0); /* no record was dropped */
	assert_int_equal(st.records_dropped, 0);
	assert_int_equal(count_rows(c->path, "path_samples") +
				 (int64_t)st.samples_dropped,
			 p.samples);
	assert_int_equal(written, count_rows(c->path, "path_samples") +
					  count_rows(c->path, "events"));
}

/* --- retention ---------------------------------------------------------- */

/* Raw samples past the retention become exact 1-minute aggregates (a late
 * sample merges into its minute); old aggregates and events go. */
static void test_prune_downsample(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	/* Minute 0: four samples. */
	add_psample(s, T0 + 0 * S_NS, 10000, 0.0, 1, 0, 0.5);
	add_psample(s, T0 + 15 * S_NS, 20000, 0.5, 2, 1, 0.5);
	add_psample(s, T0 + 30 * S_NS, 30000, 0.25, 3, 0, 1.0);
	add_psample(s, T0 + 45 * S_NS, 40000, 0.25, 4, 1, 0.0);
	add_plsample(s, T0 + 10 * S_NS, 100, 1000);
	add_plsample(s, T0 + 40 * S_NS, 300, 3000);
	/* Minutes 1 and 2. */
	add_psample(s, T0 + MIN_NS + 5 * S_NS, 50000, 0, 0, 0, 0);
	add_psample(s, T0 + MIN_NS + 50 * S_NS, 70000, 0, 0, 0, 0);
	add_psample(s, T0 + 2 * MIN_NS + 1 * S_NS, 80000, 0, 0, 0, 0);
	/* The path is re-ported during minute 2. */
	mrd_store_path_sample_row rp =
		psample(T0 + 2 * MIN_NS + 20 * S_NS, 7, 1, 90000, 0, 0, 0, 0);
	rp.sport = 4001;
	assert_int_equal(mrd_store_path_sample(s, &rp), 0);
	add_event(s, T0, "old");
	add_event(s, T0 + 2 * MIN_NS, "newer");
	assert_int_equal(mrd_store_flush(s), 12);

	/* now = minute 2 + 30 s, retention 60 s: the cut is the start of
	 * minute 1, so only minute 0 is folded. */
	int64_t now = T0 + 2 * MIN_NS + 30 * S_NS;
	assert_int_equal(mrd_store_prune(s, now, 60), 4 + 2);
	seen v = {0};
	assert_int_equal(mrd_store_query_path_minutes(s, 0, on_path_minute, &v),
			 0);
	assert_int_equal(v.n, 1);
	mrd_store_path_minute m = v.pm[0];
	assert_int_equal(m.ts_ns, T0);
	assert_string_equal(v.text[0], "p0");
	assert_int_equal(m.conn_id, 7);
	assert_int_equal(m.path_id, 1);
	assert_int_equal(m.sports, 1);
	assert_int_equal(m.samples, 4);
	assert_true(m.srtt_avg_ns == 25000.0);
	assert_int_equal(m.srtt_max_ns, 40000);
	assert_true(m.ecn_avg == 0.25);
	assert_true(m.ecn_max == 0.5);
	assert_int_equal(m.lost_pkts, 10);
	assert_int_equal(m.retx_pkts, 2);
	assert_true(m.util_avg == 0.5);
	assert_true(m.util_max == 1.0);
	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_plane_minutes(s, 0, on_plane_minute, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.lm[0].samples, 2);
	assert_true(v.lm[0].tx_avg_bytes_per_s == 200.0);
	assert_int_equal(v.lm[0].tx_max_bytes_per_s, 300);
	assert_true(v.lm[0].rx_avg_bytes_per_s == 2000.0);
	assert_int_equal(v.lm[0].rx_max_bytes_per_s, 3000);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_path_samples(s, 0, on_path_sample, &v),
			 0);
	assert_int_equal(v.n, 4);
	assert_int_equal(v.ts[0], T0 + MIN_NS + 5 * S_NS);

	/* A late sample for minute 0 merges into its aggregate. */
	add_psample(s, T0 + 50 * S_NS, 100000, 1.0, 5, 0, 0.0);
	assert_int_equal(mrd_store_flush(s), 1);
	assert_int_equal(mrd_store_prune(s, now, 60), 1);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_path_minutes(s, 0, on_path_minute, &v),
			 0);
	assert_int_equal(v.n, 1);
	m = v.pm[0];
	assert_int_equal(m.samples, 5);
	assert_true(m.srtt_avg_ns == 40000.0); /* (4 * 25000 + 100000) / 5 */
	assert_int_equal(m.srtt_max_ns, 100000);
	assert_true(fabs(m.ecn_avg - 0.4) < 1e-12); /* (4 * 0.25 + 1) / 5 */
	assert_true(m.ecn_max == 1.0);
	assert_int_equal(m.lost_pkts, 15);
	assert_true(fabs(m.util_avg - 0.4) < 1e-12);

	/* A week and 90 s later: all raw samples are folded; aggregates older
	 * than 7 days (minutes 0 and 1) are gone, minute 2 stays. */
	now = T0 + 7 * DAY_NS + 90 * S_NS;
	assert_int_equal(mrd_store_prune(s, now, 60), 4);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_path_minutes(s, 0, on_path_minute, &v),
			 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.pm[0].ts_ns, T0 + 2 * MIN_NS);
	assert_int_equal(v.pm[0].samples, 2);
	assert_int_equal(v.pm[0].sports, 2);
	assert_true(v.pm[0].srtt_avg_ns == 85000.0);
	assert_int_equal(count_rows(c->path, "path_samples"), 0);
	assert_int_equal(count_rows(c->path, "events"), 2);

	/* Events go after 30 days. */
	assert_int_equal(mrd_store_prune(s, T0 + 30 * DAY_NS + MIN_NS, 60), 0);
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 1);
	assert_string_equal(v.text[0], "path.failed|newer");
	mrd_store_close(s);
}

/* The raw row cap folds the oldest whole minutes even inside the retention. */
static void test_prune_row_cap(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	mrd_store_limits l;
	mrd_store_limits_default(&l);
	l.raw_path_rows_max = 10;
	l.events_max = 3;
	assert_int_equal(mrd_store_set_limits(s, &l), 0);
	for (int i = 0; i < 30; i++) /* one every 10 s: minutes 0..4 */
		add_psample(s, T0 + i * 10 * S_NS, 1000 * (uint64_t)i, 0, 0, 0,
			    0);
	for (int i = 0; i < 5; i++)
		add_event(s, T0 + i, "e");
	assert_int_equal(mrd_store_flush(s), 35);
	/* Row 20 (at 190 s, minute 3) must go, so minutes 0..3 are folded. */
	assert_int_equal(mrd_store_prune(s, T0 + 300 * S_NS, 86400), 24);
	assert_int_equal(count_rows(c->path, "path_samples"), 6);
	seen v = {0};
	assert_int_equal(mrd_store_query_path_minutes(s, 0, on_path_minute, &v),
			 0);
	assert_int_equal(v.n, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(v.pm[i].ts_ns, T0 + i * MIN_NS);
		assert_int_equal(v.pm[i].samples, 6);
	}
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 0);
	assert_int_equal(v.n, 3);
	assert_int_equal(v.ts[0], T0 + 2);
	mrd_store_close(s);
}

/* --- history ------------------------------------------------------------ */

/* Rows since a time, oldest first, ties in insertion order; a callback can
 * stop the walk and its value comes back. */
static void test_history_since_in_order(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	add_event(s, T0 + 30, "c");
	add_event(s, T0 + 10, "a");
	add_event(s, T0 + 20, "b");
	add_event(s, T0 + 40, "d1");
	add_event(s, T0 + 40, "d2");
	add_psample(s, T0 + 3, 3, 0, 0, 0, 0);
	add_psample(s, T0 + 1, 1, 0, 0, 0, 0);
	add_psample(s, T0 + 2, 2, 0, 0, 0, 0);
	add_plsample(s, T0 + 9, 9, 0);
	add_plsample(s, T0 + 8, 8, 0);
	for (int i = 3; i >= 1; i--) {
		mrd_store_drill dr = {.id = (uint64_t)i, .plane = "p0",
				      .kind = "k", .started_ts_ns = T0 + i,
				      .result_json = i == 2 ? "{\"n\":2}" : NULL};
		assert_int_equal(mrd_store_drill_update(s, &dr), 0);
	}
	assert_int_equal(mrd_store_flush(s), 13);

	seen v = {0};
	assert_int_equal(mrd_store_query_events(s, T0 + 15, on_event, &v), 0);
	assert_int_equal(v.n, 4);
	assert_string_equal(v.text[0], "path.failed|b");
	assert_string_equal(v.text[1], "path.failed|c");
	assert_string_equal(v.text[2], "path.failed|d1");
	assert_string_equal(v.text[3], "path.failed|d2");

	memset(&v, 0, sizeof(v));
	v.stop_after = 2;
	assert_int_equal(mrd_store_query_events(s, 0, on_event, &v), 7);
	assert_int_equal(v.n, 2);

	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_path_samples(s, T0 + 2, on_path_sample, &v), 0);
	assert_int_equal(v.n, 2);
	assert_int_equal(v.id[0], 2);
	assert_int_equal(v.id[1], 3);

	memset(&v, 0, sizeof(v));
	assert_int_equal(
		mrd_store_query_plane_samples(s, 0, on_plane_sample, &v), 0);
	assert_int_equal(v.n, 2);
	assert_int_equal(v.id[0], 8);

	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_drills(s, T0 + 2, on_drill, &v), 0);
	assert_int_equal(v.n, 2);
	assert_int_equal(v.id[0], 2);
	assert_string_equal(v.text[0], "{\"n\":2}");
	assert_string_equal(v.text[1], "{}");

	/* Nothing in the future. */
	memset(&v, 0, sizeof(v));
	assert_int_equal(mrd_store_query_events(s, T0 + 41, on_event, &v), 0);
	assert_int_equal(v.n, 0);
	mrd_store_close(s);
}

/* --- input checks and small things -------------------------------------- */

static void test_invalid_input_counted(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	char longname[MRD_STORE_NAME_MAX + 2];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(mrd_store_event(s, T0, MRD_STORE_EV_PLANE_UP, longname,
					 MRD_STORE_NO_ID, MRD_STORE_NO_ID, NULL),
			 MRD_STORE_ERR_INVAL);
	assert_int_equal(mrd_store_event(s, T0, MRD_STORE_EV_COUNT, NULL,
					 MRD_STORE_NO_ID, MRD_STORE_NO_ID, NULL),
			 MRD_STORE_ERR_INVAL);
	mrd_store_path_sample_row p = psample(T0, 1, 1, 1, 0, 0, 0, 0);
	p.plane = NULL;
	assert_int_equal(mrd_store_path_sample(s, &p), MRD_STORE_ERR_INVAL);
	assert_int_equal(mrd_store_set_drained(s, longname, true, "a", T0),
			 MRD_STORE_ERR_INVAL);
	mrd_store_stats st;
	mrd_store_get_stats(s, &st);
	assert_int_equal(st.rejected, 4);
	assert_int_equal(st.queued_records + st.queued_samples, 0);

	/* Non-finite measurements are stored as 0, never fail a batch. */
	p = psample(T0, 1, 1, 1, NAN, 0, 0, INFINITY);
	assert_int_equal(mrd_store_path_sample(s, &p), 0);
	/* Long text is cut on a UTF-8 boundary: U+20AC is 3 bytes. */
	size_t n = 3 * 2000;
	char *big = malloc(n + 1);
	assert_non_null(big);
	for (size_t i = 0; i < n; i += 3)
		memcpy(big + i, "\xe2\x82\xac", 3);
	big[n] = '\0';
	add_event(s, T0, big);
	free(big);
	assert_int_equal(mrd_store_flush(s), 2);
	mrd_store_close(s);
	sqlite3 *db = raw_open(c->path);
	assert_int_equal(raw_int(db, "SELECT length(CAST(detail AS BLOB))"
				     " FROM events"),
			 4095);
	assert_int_equal(raw_int(db, "SELECT utilization = 0 AND"
				     " ecn_fraction = 0 FROM path_samples"),
			 1);
	sqlite3_close(db);

	assert_int_equal(mrd_store_open(NULL, c->path, NULL, 0),
			 MRD_STORE_ERR_INVAL);
	mrd_store_close(NULL);
}

static void test_conns_close_all(void **state)
{
	ctx *c = *state;
	mrd_store *s = open_ok(c->path);
	for (uint64_t i = 1; i <= 3; i++) {
		mrd_store_conn cn = {.id = i, .peer_id = MRD_STORE_NO_ID,
				     .state = i == 3 ? "closed" : "up",
				     .created_ts_ns = T0,
				     .closed_ts_ns = i == 3 ? T0 + 1 : 0};
		assert_int_equal(mrd_store_conn_update(s, &cn), 0);
	}
	assert_int_equal(mrd_store_flush(s), 3);
	assert_int_equal(mrd_store_conns_close_all(s, T0 + 5, "daemon restarted"),
			 2);
	assert_int_equal(mrd_store_conns_close_all(s, T0 + 6, "again"), 0);
	mrd_store_close(s);
	sqlite3 *db = raw_open(c->path);
	assert_int_equal(raw_int(db, "SELECT count(*) FROM connections WHERE"
				     " closed_ts = 1699999980000000005 AND"
				     " reason = 'daemon restarted'"),
			 2);
	assert_int_equal(raw_int(db, "SELECT count(*) FROM connections WHERE"
				     " peer_id IS NULL"),
			 3);
	sqlite3_close(db);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(mrd_store_err_name(MRD_STORE_ERR_CORRUPT), "CORRUPT");
	assert_string_equal(mrd_store_err_name(0), "OK");
	assert_string_equal(mrd_store_err_name(-1000), "UNKNOWN");
	assert_string_equal(mrd_store_strerror(MRD_STORE_ERR_NEWER),
			    "state database schema is newer than this daemon");
	assert_string_equal(mrd_store_strerror(-1000), "unknown error");
	assert_string_equal(mrd_store_event_name(MRD_STORE_EV_PATH_REPORTED),
			    "path.re-ported");
	assert_null(mrd_store_event_name(MRD_STORE_EV_COUNT));
	for (int k = 0; k < MRD_STORE_EV_COUNT; k++)
		assert_non_null(mrd_store_event_name((mrd_store_event_kind)k));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_create_fresh),
		T(test_create_missing_dir),
		T(test_reopen_keeps_data),
		T(test_drained_survives_reopen),
		T(test_migrate_v1),
		T(test_migrate_v2),
		T(test_newer_refused),
		T(test_corrupt_random_bytes),
		T(test_corrupt_truncated),
		T(test_corrupt_pages),
		T(test_not_state_refused),
		T(test_flush_one_transaction),
		T(test_queue_bound_and_counters),
		T(test_flush_retry_then_drop),
		T(test_threads_queue_while_flushing),
		T(test_prune_downsample),
		T(test_prune_row_cap),
		T(test_history_since_in_order),
		T(test_invalid_input_counted),
		T(test_conns_close_all),
		T(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
