/*
 * metarocd's configuration file (see config.h; the schema is documented in
 * docs/metarocd.yaml.5 and etc/metarocd.yaml).
 *
 * One table per YAML map (below) describes every key: its type, where it is
 * stored, its bounds and whether a reload applies it live. The same tables
 * drive parsing, the unknown-key suggestions, the dump, the reload diff and
 * the key listing, so a new key is one line in one table (plus its default
 * in mrd_config_defaults() and its documentation).
 *
 * The parser uses libyaml's document API and walks only the shapes the schema
 * names: it never recurses into arbitrary structure, so anchors and aliases
 * (which may form cycles in a libyaml document) cannot make it loop.
 */
#include "config.h"
#include "prefix.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml.h>

/* ---- the schema ---------------------------------------------------------- */

enum vtype {
	V_END,
	V_SECTION,   /* a map of the keys in sub, stored from off */
	V_PLANES,    /* the list of planes (plane_keys) */
	V_UINT,      /* unsigned integer of size 1, 2, 4 or 8 */
	V_DURATION,  /* uint64_t ns: "200us", "1s", or 0 */
	V_RATE,      /* uint64_t bit/s: "100Gbps" */
	V_PORTS,     /* mrd_port_range: "49152-65535" or "50000" */
	V_ADDR,      /* mrd_addr */
	V_IFNAME,    /* char[IFNAMSIZ] */
	V_NAME,      /* a plane name */
	V_GROUP,     /* a group name, "" for none */
	V_PATH,      /* a file system path, char[size] */
	V_LOG_LEVEL, /* int, MRD_LOG_* */
	V_CC_NAME,   /* a congestion control algorithm, char[size] */
	V_SIZE,      /* uint64_t bytes: "64GiB", "4096B", or a bare number */
	V_BOOL,      /* int 0/1: true/false, on/off, yes/no */
	V_PREFIXES,  /* char[size]: "10.0.0.0/8, ::1" (prefix.h); "" = any */
};

#define F_LIVE 0x1     /* a reload applies it without a restart */
#define F_ZERO 0x2     /* 0 is allowed besides [min, max] and means "never" or "off" */
#define F_AUTO 0x4     /* "auto" is allowed and stored as 0 */
#define F_REQUIRED 0x8 /* the map is incomplete without it */

typedef struct key {
	const char *name;
	enum vtype type;
	size_t off, size;
	uint64_t min, max;
	unsigned flags;
	const struct key *sub;
} key;

#define T_US 1000ull
#define T_MS (1000 * T_US)
#define T_S (1000 * T_MS)
#define T_M (60 * T_S)
#define T_H (60 * T_M)
#define T_D (24 * T_H)

#define S_KI 1024ull
#define S_MI (1024 * S_KI)
#define S_GI (1024 * S_MI)
#define S_TI (1024 * S_GI)
#define S_PI (1024 * S_TI)

#define R_K 1000ull
#define R_M (1000 * R_K)
#define R_G (1000 * R_M)
#define R_T (1000 * R_G)

#define KEY(S, n, t, f, lo, hi, fl)                                             \
	{ .name = (n), .type = (t), .off = offsetof(S, f),                      \
	  .size = sizeof(((S *)0)->f), .min = (lo), .max = (hi), .flags = (fl), \
	  .sub = NULL }
#define SECTION(n, o, s, fl)                                                    \
	{ .name = (n), .type = V_SECTION, .off = (o), .size = 0, .min = 0,      \
	  .max = 0, .flags = (fl), .sub = (s) }
#define END { .name = NULL, .type = V_END, .off = 0, .size = 0, .min = 0,       \
	      .max = 0, .flags = 0, .sub = NULL }

#define C_KEY(n, t, f, lo, hi, fl) KEY(mrd_config, n, t, f, lo, hi, fl)
#define P_KEY(n, t, f, lo, hi, fl) KEY(mrd_plane, n, t, f, lo, hi, fl)
#define CC_KEY(n, f, lo, hi) KEY(mrp_cc_params, n, V_UINT, f, lo, hi, F_LIVE)

static const key service_keys[] = {
	C_KEY("port", V_UINT, port, 1, 65535, 0),
	C_KEY("control_socket", V_PATH, control_socket, 0, 0, 0),
	C_KEY("control_group", V_GROUP, control_group, 0, 0, 0),
	C_KEY("app_socket", V_PATH, app_socket, 0, 0, 0),
	C_KEY("app_group", V_GROUP, app_group, 0, 0, 0),
	C_KEY("state_db", V_PATH, state_db, 0, 0, 0),
	C_KEY("log_level", V_LOG_LEVEL, log_level, 0, 0, F_LIVE),
	END,
};

static const key plane_keys[] = {
	P_KEY("name", V_NAME, name, 0, 0, F_REQUIRED),
	P_KEY("interface", V_IFNAME, interface, 0, 0, 0),
	P_KEY("address", V_ADDR, address, 0, 0, 0),
	P_KEY("mtu", V_UINT, mtu, MRP_MTU_MIN, MRP_MTU_MAX, 0),
	P_KEY("link_speed", V_RATE, link_speed_bps, R_M, 10 * R_T, F_AUTO),
	P_KEY("source_ports", V_PORTS, source_ports, 1, 65535, 0),
	END,
};

static const key paths_keys[] = {
	C_KEY("initial_per_plane", V_UINT, initial_paths_per_plane, 1,
	      MRP_MAX_PATHS, F_LIVE),
	C_KEY("max_per_plane", V_UINT, max_paths_per_plane, 1, MRP_MAX_PATHS,
	      F_LIVE),
	END,
};

static const key cc_param_keys[] = {
	CC_KEY("init_cwnd_pkts", init_cwnd_pkts, 1, MRP_CC_MAX_CWND_PKTS),
	CC_KEY("min_cwnd_pkts", min_cwnd_pkts, 1, MRP_CC_MAX_CWND_PKTS),
	CC_KEY("max_cwnd_pkts", max_cwnd_pkts, 1, MRP_CC_MAX_CWND_PKTS),
	CC_KEY("loss_cut_count", loss_cut_count, 1, 1024),
	CC_KEY("loss_cut_pct", loss_cut_pct, 1, 100),
	CC_KEY("ai_pkts_per_rtt", ai_pkts_per_rtt, 1, MRP_CC_MAX_CWND_PKTS),
	CC_KEY("alpha_gain_shift", alpha_gain_shift, 0, MRP_CC_MAX_GAIN_SHIFT),
	END,
};

static const key congestion_keys[] = {
	C_KEY("algorithm", V_CC_NAME, cc_name, 0, 0, F_LIVE),
	SECTION("params", offsetof(mrd_config, cc), cc_param_keys, F_LIVE),
	END,
};

static const key timers_keys[] = {
	C_KEY("rto_min", V_DURATION, rto_min_ns, T_US, T_S, F_LIVE),
	C_KEY("rto_max", V_DURATION, rto_max_ns, T_US, 60 * T_S, F_LIVE),
	C_KEY("rto_initial", V_DURATION, rto_initial_ns, T_US, 60 * T_S, F_LIVE),
	C_KEY("probe_interval", V_DURATION, probe_interval_ns, T_MS, T_H,
	      F_LIVE | F_ZERO),
	C_KEY("ack_delay", V_DURATION, ack_delay_ns, T_US, 10 * T_MS,
	      F_LIVE | F_ZERO),
	C_KEY("rnr_delay", V_DURATION, rnr_delay_ns, T_US, T_S, F_LIVE),
	C_KEY("wake_slack", V_DURATION, wake_slack_ns, T_US, 10 * T_MS,
	      F_LIVE | F_ZERO),
	END,
};

static const key transport_keys[] = {
	C_KEY("max_streams", V_UINT, max_streams, 1, 65535, F_LIVE),
	C_KEY("msg_window", V_UINT, msg_window, 1, 65536, F_LIVE),
	C_KEY("burst_pkts", V_UINT, burst_pkts, 1, 64, F_LIVE),
	C_KEY("ack_every_pkts", V_UINT, ack_every_pkts, 1, 256, F_LIVE),
	C_KEY("retry_max", V_UINT, retry_max, 1, 255, F_LIVE),
	C_KEY("rnr_retry_max", V_UINT, rnr_retry_max, 0, 255, F_LIVE),
	C_KEY("suspect_rtos", V_UINT, suspect_rtos, 1, 255, F_LIVE),
	C_KEY("conn_memory", V_SIZE, conn_memory, S_MI, S_TI, F_LIVE),
	C_KEY("memory", V_SIZE, memory, S_MI, S_PI, F_LIVE),
	C_KEY("address_memory_share", V_UINT, address_memory_share, 1, 100, F_LIVE),
	C_KEY("max_conns_per_address", V_UINT, max_conns_per_addr, 1, 65536, F_LIVE),
	C_KEY("admit_budget", V_SIZE, admit_budget, S_KI * 16, S_GI, F_LIVE | F_ZERO),
	C_KEY("expedite_dscp", V_UINT, expedite_dscp, 1, 63, F_LIVE | F_ZERO),
	C_KEY("expedite_max", V_SIZE, expedite_max, S_KI, 16 * S_MI, F_LIVE),
	C_KEY("expedite_budget", V_SIZE, expedite_budget, S_KI, S_GI, F_LIVE),
	END,
};

static const key telemetry_keys[] = {
	C_KEY("interval", V_DURATION, telemetry_interval_ns, 10 * T_MS, T_H, F_LIVE),
	C_KEY("retention", V_DURATION, telemetry_retention_ns, T_M, 365 * T_D,
	      F_LIVE),
	C_KEY("history", V_DURATION, telemetry_history_ns, T_H, 365 * T_D, F_LIVE),
	C_KEY("max_paths", V_UINT, telemetry_max_paths, 1, 65536, F_LIVE),
	/* F_ZERO on a path: "" is allowed and means "off". */
	C_KEY("textfile", V_PATH, telemetry_textfile, 0, 0, F_LIVE | F_ZERO),
	END,
};

static const key apps_keys[] = {
	C_KEY("max_sessions", V_UINT, app_max_sessions, 1, 65536, F_LIVE),
	C_KEY("max_sessions_per_user", V_UINT, app_max_sessions_per_user, 1, 65536, F_LIVE),
	C_KEY("max_contexts", V_UINT, app_max_contexts, 1, 4096, F_LIVE),
	C_KEY("max_regions", V_UINT, app_max_regions, 1, 1u << 20, F_LIVE),
	C_KEY("max_region_bytes", V_SIZE, app_max_region_bytes, S_KI * 4,
	      S_PI, F_LIVE),
	C_KEY("max_conns", V_UINT, app_max_conns, 1, 65536, F_LIVE),
	C_KEY("max_listeners", V_UINT, app_max_listeners, 1, 4096, F_LIVE),
	END,
};

static const key services_keys[] = {
	C_KEY("perf", V_BOOL, services_perf, 0, 0, F_LIVE),
	C_KEY("perf_peers", V_PREFIXES, perf_peers, 0, 0, F_LIVE),
	C_KEY("echo_peers", V_PREFIXES, echo_peers, 0, 0, F_LIVE),
	END,
};

static const key top_keys[] = {
	SECTION("service", 0, service_keys, 0),
	{ .name = "planes", .type = V_PLANES, .off = 0, .size = 0, .min = 0,
	  .max = MRD_MAX_PLANES, .flags = 0, .sub = plane_keys },
	SECTION("paths", 0, paths_keys, F_LIVE),
	SECTION("congestion", 0, congestion_keys, F_LIVE),
	SECTION("timers", 0, timers_keys, F_LIVE),
	SECTION("transport", 0, transport_keys, F_LIVE),
	SECTION("telemetry", 0, telemetry_keys, F_LIVE),
	SECTION("apps", 0, apps_keys, F_LIVE),
	SECTION("services", 0, services_keys, F_LIVE),
	END,
};

static const char *const log_level_names[] = { "error", "warn", "info", "debug" };
#define NLOG_LEVELS (sizeof(log_level_names) / sizeof(log_level_names[0]))

const char *mrd_log_level_name(int level)
{
	if (level < 0 || (unsigned)level >= NLOG_LEVELS)
		return "?";
	return log_level_names[level];
}

static void plane_defaults(mrd_plane *p)
{
	memset(p, 0, sizeof(*p));
	p->mtu = MRP_MTU_DEFAULT;
	p->link_speed_bps = 0;
	p->source_ports.min = 49152;
	p->source_ports.max = 65535;
}

void mrd_config_defaults(mrd_config *c)
{
	mrp_conn_params cp;

	mrp_conn_params_default(&cp);
	memset(c, 0, sizeof(*c));
	c->port = MRP_DEFAULT_PORT;
	snprintf(c->control_socket, sizeof(c->control_socket), "%s",
		 "/run/metaroce/metarocd.sock");
	snprintf(c->control_group, sizeof(c->control_group), "%s", "metaroce");
	snprintf(c->app_socket, sizeof(c->app_socket), "%s", "/run/metaroce/app.sock");
	snprintf(c->app_group, sizeof(c->app_group), "%s", "metaroce");
	snprintf(c->state_db, sizeof(c->state_db), "%s",
		 "/var/lib/metaroce/state.db");
	c->log_level = MRD_LOG_INFO;
	c->nplanes = 0;
	for (unsigned i = 0; i < MRD_MAX_PLANES; i++)
		plane_defaults(&c->planes[i]);
	c->initial_paths_per_plane = 4;
	c->max_paths_per_plane = 16;
	snprintf(c->cc_name, sizeof(c->cc_name), "%s", cp.cc_name);
	c->cc = cp.cc;
	c->cc.mtu = 0;
	c->cc.line_rate_bps = 0;
	/* The engine's 100 us floor suits a hardware-speed peer; a daemon
	 * peer is a process that the scheduler deschedules for milliseconds,
	 * and every such pause fired timeouts for packets that were not lost
	 * (on loopback, 2 s of perf: 6,000-12,000 packets counted lost with a
	 * 100 us floor, 50-450 with 5 ms, the same goodput). Tail losses are
	 * still repaired at about two round trips by the loss probe. */
	c->rto_min_ns = 5 * T_MS;
	c->rto_max_ns = cp.rto_max_ns;
	c->rto_initial_ns = 5 * T_MS;
	c->probe_interval_ns = cp.probe_idle_ns;
	c->ack_delay_ns = cp.ack_delay_ns;
	c->rnr_delay_ns = cp.rnr_delay_ns;
	/* The daemon's, not the engine's (peer.c, conn_service()): a wake-up
	 * costs more than the few us a pacing wait lasts. Loopback perf,
	 * paired runs on a loaded 2-core host (bench/README.md): 0 us 1.4
	 * Gbit/s median, 15 us 1.4, 30-120 us 1.9-3.1. */
	c->wake_slack_ns = 50 * T_US;
	c->max_streams = cp.max_streams;
	c->msg_window = cp.msg_window;
	/* A daemon pays for every wake-up (a context switch and a system call
	 * batch): larger same-path bursts and fewer ACKs than the engine's
	 * defaults (tuned for a NIC) cut the CPU per byte. Loopback perf,
	 * medians of 3 (bench/bench_daemon.py, quiet host): 4/4 about 4 Gbit/s,
	 * 16/16 9.1, 32/32 10.8-12.6 (0.54 of kernel TCP), 64/64 14.2; 32
	 * keeps a path's burst at 128 KiB. */
	c->burst_pkts = 32;
	c->ack_every_pkts = 32;
	c->retry_max = cp.retry_max;
	c->rnr_retry_max = cp.rnr_retry_max;
	c->suspect_rtos = cp.suspect_rtos;
	c->telemetry_interval_ns = T_S;
	c->telemetry_retention_ns = 24 * T_H;
	c->app_max_sessions = 256;
	c->app_max_sessions_per_user = 64;
	c->conn_memory = 64 * S_MI;
	c->memory = 1 * S_GI;
	c->address_memory_share = 25;
	c->max_conns_per_addr = 4096;
	c->admit_budget = 256 * S_KI;
	c->expedite_max = 256 * S_KI;
	c->expedite_budget = S_MI;
	c->app_max_contexts = 16;
	c->app_max_regions = 1024;
	c->app_max_region_bytes = 64 * S_GI;
	c->app_max_conns = 1024;
	c->app_max_listeners = 64;
	c->telemetry_history_ns = 7 * T_D;
	c->telemetry_max_paths = 4096;
	c->telemetry_textfile[0] = '\0';
}

void mrd_config_free(mrd_config *c)
{
	if (c)
		memset(c, 0, sizeof(*c));
}

/* ---- quantities ------------------------------------------------------------ */

typedef struct unit {
	const char *name;
	uint64_t mult;
} unit;

static const unit duration_units[] = {
	{ "ns", 1 }, { "us", T_US }, { "ms", T_MS }, { "s", T_S },
	{ "m", T_M }, { "h", T_H }, { "d", T_D }, { NULL, 0 },
};
/* what the dump writes: the largest that divides the value */
static const unit duration_out[] = {
	{ "d", T_D }, { "h", T_H }, { "m", T_M }, { "s", T_S }, { "ms", T_MS },
	{ "us", T_US }, { "ns", 1 }, { NULL, 0 },
};
static const unit rate_units[] = {
	{ "bps", 1 }, { "kbps", R_K }, { "Kbps", R_K }, { "Mbps", R_M },
	{ "Gbps", R_G }, { "Tbps", R_T }, { NULL, 0 },
};
static const unit rate_out[] = {
	{ "Tbps", R_T }, { "Gbps", R_G }, { "Mbps", R_M }, { "Kbps", R_K },
	{ "bps", 1 }, { NULL, 0 },
};

/* Sizes: binary units (what memory is counted in) and the decimal ones
 * people also write. */
static const unit size_units[] = {
	{ "B", 1 }, { "KiB", S_KI }, { "MiB", S_MI }, { "GiB", S_GI },
	{ "TiB", S_TI }, { "PiB", S_PI }, { "KB", 1000ull }, { "MB", 1000000ull },
	{ "GB", 1000000000ull }, { "TB", 1000000000000ull }, { NULL, 0 },
};
static const unit size_out[] = {
	{ "PiB", S_PI }, { "TiB", S_TI }, { "GiB", S_GI }, { "MiB", S_MI },
	{ "KiB", S_KI }, { "B", 1 }, { NULL, 0 },
};

#define SIZE_UNITS "B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB"
#define DURATION_UNITS "ns, us, ms, s, m, h, d"
#define RATE_UNITS "bps, Kbps, Mbps, Gbps, Tbps"

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* A decimal integer, digits only: 0, -1 (not one), -2 (too large). */
static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	int big = 0;

	if (!is_digit(*s))
		return -1;
	for (; is_digit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			big = 1;
		else
			v = v * 10 + d;
	}
	if (*s)
		return -1;
	if (big)
		return -2;
	*out = v;
	return 0;
}

enum { Q_OK, Q_SYNTAX, Q_NOUNIT, Q_FRACTION, Q_BIG };

/* "12", "12.5" followed by one of units (no space); a bare "0" is 0. */
static int parse_quantity(const char *s, const unit *units, uint64_t *out)
{
	uint64_t ip = 0, fp = 0, fscale = 1;
	int nd = 0, nf = 0, big = 0;

	for (; is_digit(*s); s++, nd++) {
		unsigned d = (unsigned)(*s - '0');
		if (ip > (UINT64_MAX - d) / 10)
			big = 1;
		else
			ip = ip * 10 + d;
	}
	if (nd == 0)
		return Q_SYNTAX;
	if (*s == '.') {
		for (s++; is_digit(*s); s++, nf++) {
			if (nf == 9)
				return Q_SYNTAX;
			fp = fp * 10 + (uint64_t)(*s - '0');
			fscale *= 10;
		}
		if (nf == 0)
			return Q_SYNTAX;
	}
	if (*s == '\0') {
		if (ip == 0 && fp == 0 && !big) {
			*out = 0;
			return Q_OK;
		}
		return Q_NOUNIT;
	}
	const unit *u;
	for (u = units; u->name; u++)
		if (strcmp(s, u->name) == 0)
			break;
	if (!u->name)
		return Q_SYNTAX;
	if (big)
		return Q_BIG;

	/* fp / fscale * mult must be whole: cancel factors of ten first */
	uint64_t m = u->mult, frac, v;
	while (fscale > 1 && m % 10 == 0) {
		fscale /= 10;
		m /= 10;
	}
	if (__builtin_mul_overflow(fp, m, &frac))
		return Q_BIG;
	if (frac % fscale)
		return Q_FRACTION;
	frac /= fscale;
	if (__builtin_mul_overflow(ip, u->mult, &v) ||
	    __builtin_add_overflow(v, frac, &v))
		return Q_BIG;
	*out = v;
	return Q_OK;
}

static void fmt_quantity(char *buf, size_t len, uint64_t v, const unit *out)
{
	if (v == 0) {
		snprintf(buf, len, "0");
		return;
	}
	for (const unit *u = out; u->name; u++) {
		if (v % u->mult == 0) {
			snprintf(buf, len, "%llu%s",
				 (unsigned long long)(v / u->mult), u->name);
			return;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)v); /* not reached */
}

static void fmt_duration(char *buf, size_t len, uint64_t ns)
{
	fmt_quantity(buf, len, ns, duration_out);
}

static void fmt_rate(char *buf, size_t len, uint64_t bps)
{
	fmt_quantity(buf, len, bps, rate_out);
}

static void fmt_size(char *buf, size_t len, uint64_t bytes)
{
	fmt_quantity(buf, len, bytes, size_out);
}

/* ---- names, suggestions ---------------------------------------------------- */

/* Edit distance with adjacent transpositions (optimal string alignment). */
static unsigned edit_distance(const char *a, const char *b)
{
	enum { MAXLEN = 64 };
	unsigned d[MAXLEN + 1][MAXLEN + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (la > MAXLEN || lb > MAXLEN)
		return UINT32_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			unsigned cost = a[i - 1] != b[j - 1];
			unsigned v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

/*
 * The candidate the user probably meant by word: the closest by edit
 * distance if it is within a third of its length (at least 1), else the one
 * candidate word is a prefix of (3 characters or more); NULL if none.
 */
static const char *suggest(const char *word, const char *const *cands, size_t n)
{
	const char *best = NULL, *prefix = NULL;
	unsigned bestd = UINT32_MAX;
	size_t wl = strlen(word), nprefix = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned d = edit_distance(word, cands[i]);
		size_t cl = strlen(cands[i]);
		unsigned limit = cl / 3 ? (unsigned)(cl / 3) : 1;
		if (d <= limit && d < bestd) {
			best = cands[i];
			bestd = d;
		}
		if (wl >= 3 && wl < cl && strncmp(word, cands[i], wl) == 0) {
			prefix = cands[i];
			nprefix++;
		}
	}
	if (best)
		return best;
	return nprefix == 1 ? prefix : NULL;
}

static void join_names(char *buf, size_t len, const char *const *names, size_t n)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
				 names[i]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/*
 * A value as it may be shown in a message: at most 48 bytes (then "..."),
 * control characters and quotes escaped, a UTF-8 sequence never cut.
 */
static const char *show(char *buf, size_t buflen, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

	for (i = 0; i < len && o + 8 < buflen; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (i >= 48 && (ch & 0xc0) != 0x80) {
			break;
		}
		if (ch < 0x20 || ch == 0x7f) {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[ch >> 4];
			buf[o++] = hex[ch & 15];
		} else if (ch == '\'' || ch == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)ch;
		} else {
			buf[o++] = (char)ch;
		}
	}
	if (i < len && o + 4 <= buflen) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

/* ---- the parser --------------------------------------------------------------- */

#define SEEN_MAX 192
#define SHOW_LEN 256

typedef struct seen {
	const key *k;
	unsigned plane;
	unsigned line;
} seen;

typedef struct ctx {
	const char *name;    /* the file, for messages */
	const char *basedir; /* relative paths are resolved against this */
	yaml_document_t *doc;
	mrd_config *c;
	char *err;
	size_t errlen;
	unsigned planes_line;
	unsigned plane_line[MRD_MAX_PLANES];
	seen seen[SEEN_MAX];
	unsigned nseen;
} ctx;

__attribute__((format(printf, 4, 5)))
static int fail(ctx *x, unsigned line, const char *what, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!x->err || !x->errlen)
		return -1;
	char where[32] = "";
	if (line)
		snprintf(where, sizeof(where), ":%u", line);
	if (what && *what)
		snprintf(x->err, x->errlen, "%s%s: %s: %s", x->name, where, what, msg);
	else
		snprintf(x->err, x->errlen, "%s%s: %s", x->name, where, msg);
	return -1;
}

static unsigned node_line(const yaml_node_t *n)
{
	return (unsigned)n->start_mark.line + 1;
}

static bool is_null(const yaml_node_t *n)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (strlen(nulls[i]) == n->data.scalar.length &&
		    memcmp(nulls[i], n->data.scalar.value, n->data.scalar.length) == 0)
			return true;
	return false;
}

/* "a map", "a list", "'text'" or "nothing": what a node is, for messages. */
static const char *kind(const yaml_node_t *n, char *buf, size_t len)
{
	size_t l;

	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a map";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_SCALAR_NODE:
		if (n->data.scalar.length == 0)
			return "nothing";
		buf[0] = '\'';
		show(buf + 1, len - 2, (const char *)n->data.scalar.value,
		     n->data.scalar.length);
		l = strlen(buf);
		buf[l] = '\'';
		buf[l + 1] = '\0';
		return buf;
	default:
		return "nothing";
	}
}

static void note_line(ctx *x, const key *k, unsigned plane, unsigned line)
{
	if (x->nseen < SEEN_MAX)
		x->seen[x->nseen++] = (seen){ .k = k, .plane = plane, .line = line };
}

static const key *find_key(const key *table, const char *name)
{
	for (const key *k = table; k->name; k++)
		if (strcmp(k->name, name) == 0)
			return k;
	return NULL;
}

/* The line a key was set on, 0 if the file left it at its default. */
static unsigned line_of(const ctx *x, const key *table, const char *name,
			unsigned plane)
{
	const key *k = find_key(table, name);

	for (unsigned i = 0; i < x->nseen; i++)
		if (x->seen[i].k == k && x->seen[i].plane == plane)
			return x->seen[i].line;
	return 0;
}

static void store_uint(void *field, size_t size, uint64_t v)
{
	switch (size) {
	case 1: { uint8_t t = (uint8_t)v; memcpy(field, &t, 1); break; }
	case 2: { uint16_t t = (uint16_t)v; memcpy(field, &t, 2); break; }
	case 4: { uint32_t t = (uint32_t)v; memcpy(field, &t, 4); break; }
	default: memcpy(field, &v, 8); break;
	}
}

static uint64_t load_uint(const void *field, size_t size)
{
	switch (size) {
	case 1: { uint8_t t; memcpy(&t, field, 1); return t; }
	case 2: { uint16_t t; memcpy(&t, field, 2); return t; }
	case 4: { uint32_t t; memcpy(&t, field, 4); return t; }
	default: { uint64_t t; memcpy(&t, field, 8); return t; }
	}
}

static int fail_range(ctx *x, unsigned line, const char *what, const key *k,
		      const char *shown)
{
	char lo[32], hi[32];

	if (k->type == V_DURATION) {
		fmt_duration(lo, sizeof(lo), k->min);
		fmt_duration(hi, sizeof(hi), k->max);
	} else if (k->type == V_RATE) {
		fmt_rate(lo, sizeof(lo), k->min);
		fmt_rate(hi, sizeof(hi), k->max);
	} else if (k->type == V_SIZE) {
		fmt_size(lo, sizeof(lo), k->min);
		fmt_size(hi, sizeof(hi), k->max);
	} else {
		snprintf(lo, sizeof(lo), "%llu", (unsigned long long)k->min);
		snprintf(hi, sizeof(hi), "%llu", (unsigned long long)k->max);
	}
	return fail(x, line, what, "%s is out of range (%s%s-%s)", shown,
		    (k->flags & F_ZERO) ? "0 or " : "", lo, hi);
}

static int parse_uint_value(ctx *x, const key *k, const char *s, void *field,
			    const char *what, unsigned line, const char *shown)
{
	uint64_t v;
	int r = parse_u64(s, &v);

	if (r == -1) {
		if (s[0] == '-' && parse_u64(s + 1, &v) != -1)
			return fail_range(x, line, what, k, shown);
		return fail(x, line, what, "'%s' is not a whole number", shown);
	}
	if (r == -2 || (!(v == 0 && (k->flags & F_ZERO)) && (v < k->min || v > k->max)))
		return fail_range(x, line, what, k, shown);
	store_uint(field, k->size, v);
	return 0;
}

static int parse_quantity_value(ctx *x, const key *k, const char *s, void *field,
				const char *what, unsigned line, const char *shown)
{
	bool dur = k->type == V_DURATION;
	uint64_t v = 0;

	if ((k->flags & F_AUTO) && strcmp(s, "auto") == 0) {
		memcpy(field, &v, sizeof(v));
		return 0;
	}
	switch (parse_quantity(s, dur ? duration_units : rate_units, &v)) {
	case Q_OK:
		break;
	case Q_SYNTAX:
		if (dur)
			return fail(x, line, what, "'%s' is not a duration (a number "
				    "and a unit: " DURATION_UNITS ")", shown);
		return fail(x, line, what, "'%s' is not a rate (a number and a unit: "
			    RATE_UNITS "%s)", shown,
			    (k->flags & F_AUTO) ? "; or auto" : "");
	case Q_NOUNIT:
		return fail(x, line, what, "'%s' has no unit (%s)", shown,
			    dur ? DURATION_UNITS : RATE_UNITS);
	case Q_FRACTION:
		return fail(x, line, what, "'%s' is not a whole number of %s", shown,
			    dur ? "nanoseconds" : "bits per second");
	default:
		return fail_range(x, line, what, k, shown);
	}
	if (!(v == 0 && (k->flags & F_ZERO)) && (v < k->min || v > k->max))
		return fail_range(x, line, what, k, shown);
	memcpy(field, &v, sizeof(v));
	return 0;
}

/* A byte count: a number and a unit, or a bare number of bytes. */
static int parse_size_value(ctx *x, const key *k, const char *s, void *field,
			    const char *what, unsigned line, const char *shown)
{
	uint64_t v = 0;
	int r = parse_u64(s, &v);

	if (r == -2)
		return fail_range(x, line, what, k, shown);
	if (r == -1) {
		switch (parse_quantity(s, size_units, &v)) {
		case Q_OK:
			break;
		case Q_SYNTAX:
		case Q_NOUNIT:
			return fail(x, line, what, "'%s' is not a size (a number of "
				    "bytes, or a number and a unit: " SIZE_UNITS ")",
				    shown);
		case Q_FRACTION:
			return fail(x, line, what, "'%s' is not a whole number of "
				    "bytes", shown);
		default:
			return fail_range(x, line, what, k, shown);
		}
	}
	if (!(v == 0 && (k->flags & F_ZERO)) && (v < k->min || v > k->max))
		return fail_range(x, line, what, k, shown);
	memcpy(field, &v, sizeof(v));
	return 0;
}

static int parse_ports(ctx *x, const key *k, const char *s, void *field,
		       const char *what, unsigned line, const char *shown)
{
	char lo_s[24], hi_s[24];
	const char *dash = strchr(s, '-');
	uint64_t lo = 0, hi = 0;
	int rl, rh;

	if (dash) {
		size_t n = (size_t)(dash - s);
		if (n >= sizeof(lo_s) || strlen(dash + 1) >= sizeof(hi_s))
			goto syntax;
		memcpy(lo_s, s, n);
		lo_s[n] = '\0';
		snprintf(hi_s, sizeof(hi_s), "%s", dash + 1);
	} else {
		if (strlen(s) >= sizeof(lo_s))
			goto syntax;
		snprintf(lo_s, sizeof(lo_s), "%s", s);
		snprintf(hi_s, sizeof(hi_s), "%s", s);
	}
	rl = parse_u64(lo_s, &lo);
	rh = parse_u64(hi_s, &hi);
	if (rl == -1 || rh == -1)
		goto syntax;
	if (rl == -2 || rh == -2 || lo < k->min || hi < k->min || lo > k->max ||
	    hi > k->max)
		return fail(x, line, what, "%s is out of range (%llu-%llu)", shown,
			    (unsigned long long)k->min, (unsigned long long)k->max);
	if (lo > hi)
		return fail(x, line, what, "%s: the low end is above the high end",
			    shown);
	mrd_port_range r = { .min = (uint16_t)lo, .max = (uint16_t)hi };
	memcpy(field, &r, sizeof(r));
	return 0;
syntax:
	return fail(x, line, what, "'%s' is not a port range (LOW-HIGH, e.g. "
		    "49152-65535, or one port)", shown);
}

static int parse_addr(ctx *x, const char *s, void *field, const char *what,
		      unsigned line, const char *shown)
{
	mrd_addr a;

	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET, s, a.bytes) == 1) {
		a.family = AF_INET;
	} else if (inet_pton(AF_INET6, s, a.bytes) == 1) {
		a.family = AF_INET6;
	} else if (strchr(s, '%')) {
		return fail(x, line, what, "'%s' is not an IPv4 or IPv6 address "
			    "(give the interface under 'interface', not after '%%')",
			    shown);
	} else {
		return fail(x, line, what, "'%s' is not an IPv4 or IPv6 address",
			    shown);
	}
	static const uint8_t zero[16], bcast[4] = { 255, 255, 255, 255 };
	bool v4 = a.family == AF_INET;
	if (memcmp(a.bytes, zero, v4 ? 4 : 16) == 0 ||
	    (v4 && (memcmp(a.bytes, bcast, 4) == 0 || (a.bytes[0] & 0xf0) == 0xe0)) ||
	    (!v4 && a.bytes[0] == 0xff))
		return fail(x, line, what, "'%s' is not a unicast address (a plane "
			    "needs an address of this host)", shown);
	memcpy(field, &a, sizeof(a));
	return 0;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' ||
	       ch == '\v' || ch == '\f';
}

/* What Linux's dev_valid_name() accepts. */
static int parse_ifname(ctx *x, const char *s, void *field, const char *what, unsigned line, const char *shown)
{
	size_t n = strlen(s);

	if (n >= IFNAMSIZ)
		return fail(x, line, what, "'%s' is longer than %d characters "
			    "(IFNAMSIZ)", shown, IFNAMSIZ - 1);
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		goto bad;
	for (const char *p = s; *p; p++)
		if (*p == '/' || *p == ':' || is_space(*p))
			goto bad;
	memcpy(field, s, n + 1);
	return 0;
bad:
	return fail(x, line, what, "'%s' is not an interface name (no '/', ':' "
		    "or whitespace; not '.' or '..')", shown);
}

static bool is_name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       is_digit(ch) || ch == '_' || ch == '.' || ch == '-';
}

static int parse_plane_name(ctx *x, const char *s, void *field, const char *what,
			    unsigned line, const char *shown)
{
	size_t n = strlen(s);
	bool ok = n >= 1 && n <= MRD_PLANE_NAME_MAX;

	for (const char *p = s; ok && *p; p++)
		ok = is_name_char(*p);
	if (!ok)
		return fail(x, line, what, "'%s' is not a plane name (1-%d letters, "
			    "digits, '_', '.' or '-')", shown, MRD_PLANE_NAME_MAX);
	memcpy(field, s, n + 1);
	return 0;
}

static int parse_group(ctx *x, const char *s, void *field, const char *what,
		       unsigned line, const char *shown)
{
	size_t n = strlen(s);
	bool ok = n <= MRD_GROUP_NAME_MAX && s[0] != '-';

	for (const char *p = s; ok && *p; p++)
		ok = is_name_char(*p);
	if (!ok)
		return fail(x, line, what, "'%s' is not a group name (up to %d "
			    "letters, digits, '_', '.' or '-', not first; \"\" for "
			    "none)", shown, MRD_GROUP_NAME_MAX);
	memcpy(field, s, n + 1);
	return 0;
}

/* base + "/" + rel into out; false if it does not fit. */
static bool join_path(char *out, size_t outsz, const char *base, const char *rel)
{
	size_t bl = strlen(base);
	const char *sep = bl && base[bl - 1] == '/' ? "" : "/";
	int w = snprintf(out, outsz, "%s%s%s", base, sep, rel);

	return w >= 0 && (size_t)w < outsz;
}

static int parse_path(ctx *x, const key *k, const char *s, void *field,
		      const char *what, unsigned line, const char *shown)
{
	char buf[MRD_PATH_MAX + 64], out[SHOW_LEN];
	bool fits;

	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return fail(x, line, what, "'%s' contains a control character",
				    shown);
	if (!s[0] && (k->flags & F_ZERO)) {
		((char *)field)[0] = '\0'; /* an optional file: "" is off */
		return 0;
	}
	if (s[0] == '~') {
		const char *home = getenv("HOME");
		if (s[1] != '/')
			return fail(x, line, what, "'%s': only '~/' (your home "
				    "directory) is supported", shown);
		if (!home || home[0] != '/')
			return fail(x, line, what, "'%s' needs $HOME set to an "
				    "absolute path", shown);
		fits = join_path(buf, sizeof(buf), home, s + 2);
	} else if (s[0] == '/') {
		fits = snprintf(buf, sizeof(buf), "%s", s) < (int)sizeof(buf);
	} else {
		while (s[0] == '.' && s[1] == '/') {
			const char *t = s + 2;
			while (*t == '/')
				t++;
			if (*t == '~')
				break; /* keep "./": a leading '~' would mean $HOME */
			s = t;
		}
		if (!*s)
			s = ".";
		if (strcmp(x->basedir, ".") == 0)
			fits = snprintf(buf, sizeof(buf), "%s", s) < (int)sizeof(buf);
		else
			fits = join_path(buf, sizeof(buf), x->basedir, s);
	}
	size_t n = strlen(buf);
	if (!fits || n >= k->size) {
		show(out, sizeof(out), buf, n);
		if (k->size == MRD_SOCKET_PATH_MAX + 1)
			return fail(x, line, what, "'%s' is longer than the %d bytes "
				    "a Unix socket path can hold", out,
				    MRD_SOCKET_PATH_MAX);
		return fail(x, line, what, "'%s' is longer than %zu bytes", out,
			    k->size - 1);
	}
	memcpy(field, buf, n + 1);
	return 0;
}

static int parse_log_level(ctx *x, const char *s, void *field, const char *what,
			   unsigned line, const char *shown)
{
	char list[128];

	for (size_t i = 0; i < NLOG_LEVELS; i++) {
		if (strcmp(s, log_level_names[i]) == 0) {
			int v = (int)i;
			memcpy(field, &v, sizeof(v));
			return 0;
		}
	}
	const char *hint = suggest(s, log_level_names, NLOG_LEVELS);
	if (hint)
		return fail(x, line, what, "'%s' is not a log level; did you mean "
			    "'%s'?", shown, hint);
	join_names(list, sizeof(list), log_level_names, NLOG_LEVELS);
	return fail(x, line, what, "'%s' is not a log level (%s)", shown, list);
}

static int parse_cc_name(ctx *x, const key *k, const char *s, void *field,
			 const char *what, unsigned line, const char *shown)
{
	const char *names[32];
	char list[256];
	size_t n = 0;

	if (strlen(s) < k->size && mrp_cc_find(s)) {
		memcpy(field, s, strlen(s) + 1);
		return 0;
	}
	for (const mrp_cc_ops *ops; n < 32 && (ops = mrp_cc_get((unsigned)n)); n++)
		names[n] = ops->name;
	const char *hint = suggest(s, names, n);
	if (hint)
		return fail(x, line, what, "'%s' is not a congestion control "
			    "algorithm; did you mean '%s'?", shown, hint);
	join_names(list, sizeof(list), names, n);
	return fail(x, line, what, "'%s' is not a congestion control algorithm "
		    "(%s)", shown, list);
}

static int parse_leaf(ctx *x, const key *k, const yaml_node_t *v, void *base,
		      const char *what, unsigned line)
{
	char kb[SHOW_LEN], shown[SHOW_LEN];
	void *field = (char *)base + k->off;

	if (v->type != YAML_SCALAR_NODE)
		return fail(x, line, what, "expected a value, found %s",
			    kind(v, kb, sizeof(kb)));
	const char *s = (const char *)v->data.scalar.value;
	size_t len = v->data.scalar.length;
	if (memchr(s, '\0', len))
		return fail(x, line, what, "the value contains a NUL byte");
	if (len == 0 && k->type != V_GROUP && k->type != V_PREFIXES &&
	    !(k->type == V_PATH && (k->flags & F_ZERO)))
		return fail(x, line, what, "no value");
	show(shown, sizeof(shown), s, len);

	switch (k->type) {
	case V_UINT:
		return parse_uint_value(x, k, s, field, what, line, shown);
	case V_DURATION:
	case V_RATE:
		return parse_quantity_value(x, k, s, field, what, line, shown);
	case V_SIZE:
		return parse_size_value(x, k, s, field, what, line, shown);
	case V_PORTS:
		return parse_ports(x, k, s, field, what, line, shown);
	case V_ADDR:
		return parse_addr(x, s, field, what, line, shown);
	case V_IFNAME:
		return parse_ifname(x, s, field, what, line, shown);
	case V_NAME:
		return parse_plane_name(x, s, field, what, line, shown);
	case V_GROUP:
		return parse_group(x, s, field, what, line, shown);
	case V_PATH:
		return parse_path(x, k, s, field, what, line, shown);
	case V_LOG_LEVEL:
		return parse_log_level(x, s, field, what, line, shown);
	case V_BOOL: {
		static const char *const yes[] = {"true", "on", "yes"}, *const no[] = {"false", "off", "no"};
		for (int i = 0; i < 3; i++)
			if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
				int b = strcmp(s, yes[i]) == 0;
				memcpy(field, &b, sizeof(b));
				return 0;
			}
		return fail(x, line, what, "'%s' is not true or false", shown);
	}
	case V_PREFIXES: {
		mrd_prefix px[MRD_PREFIX_MAX];
		char err[160];
		if (strlen(s) >= k->size)
			return fail(x, line, what, "longer than %zu bytes", k->size - 1);
		if (mrd_prefix_parse(s, px, MRD_PREFIX_MAX, err, sizeof(err)) < 0)
			return fail(x, line, what, "%s", err);
		memcpy(field, s, strlen(s) + 1);
		return 0;
	}
	case V_CC_NAME:
		return parse_cc_name(x, k, s, field, what, line, shown);
	default:
		return fail(x, line, what, "internal error: bad key type");
	}
}

static int parse_planes(ctx *x, const key *k, const yaml_node_t *v, unsigned line);

/*
 * A map of the keys in table, stored from base. what names the map in
 * messages ("" for the top level), line is the line of its key.
 */
static int parse_map(ctx *x, const yaml_node_t *n, const key *table, void *base,
		     const char *what, unsigned plane, unsigned line)
{
	char kb[SHOW_LEN], name[SHOW_LEN], full[2 * SHOW_LEN];
	unsigned first[16] = { 0 };
	const char *names[16];
	size_t ntable = 0;

	for (const key *k = table; k->name; k++)
		names[ntable++] = k->name;
	if (is_null(n))
		goto required;
	if (n->type != YAML_MAPPING_NODE) {
		if (!*what)
			return fail(x, node_line(n), NULL, "expected a map of sections "
				    "at the top level, found %s", kind(n, kb, sizeof(kb)));
		return fail(x, line, what, "expected a map, found %s",
			    kind(n, kb, sizeof(kb)));
	}
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(x->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(x->doc, p->value);
		if (!kn || !vn)
			return fail(x, line, what, "internal error: dangling node");
		unsigned kline = node_line(kn);
		if (kn->type != YAML_SCALAR_NODE)
			return fail(x, kline, what, "a key must be a name, found %s",
				    kind(kn, kb, sizeof(kb)));
		const char *ks = (const char *)kn->data.scalar.value;
		size_t kl = kn->data.scalar.length;
		show(name, sizeof(name), ks, kl);
		snprintf(full, sizeof(full), "%s%s%s", what, *what ? "." : "", name);

		const key *k = memchr(ks, '\0', kl) ? NULL : find_key(table, ks);
		if (!k) {
			const char *hint = memchr(ks, '\0', kl) ? NULL :
					   suggest(ks, names, ntable);
			char list[256];
			if (hint)
				return fail(x, kline, full, "unknown key; did you mean "
					    "'%s'?", hint);
			join_names(list, sizeof(list), names, ntable);
			return fail(x, kline, full, "unknown key (valid here: %s)", list);
		}
		size_t idx = (size_t)(k - table);
		if (first[idx])
			return fail(x, kline, full, "duplicate key (first at line %u)",
				    first[idx]);
		first[idx] = kline;
		note_line(x, k, plane, kline);

		int rv;
		if (k->type == V_SECTION)
			rv = parse_map(x, vn, k->sub, (char *)base + k->off, full,
				       plane, kline);
		else if (k->type == V_PLANES)
			rv = parse_planes(x, k, vn, kline);
		else
			rv = parse_leaf(x, k, vn, base, full, kline);
		if (rv)
			return rv;
	}
required:
	for (size_t i = 0; i < ntable; i++)
		if ((table[i].flags & F_REQUIRED) && !first[i])
			return fail(x, line, what, "missing required key '%s'",
				    table[i].name);
	return 0;
}

static void fmt_addr(char *buf, size_t len, const mrd_addr *a)
{
	if (!a->family || !inet_ntop(a->family, a->bytes, buf, (socklen_t)len))
		snprintf(buf, len, "none");
}

/* Checks of plane i against itself and the planes before it. */
static int check_plane(ctx *x, unsigned i, const char *what)
{
	const mrd_plane *p = &x->c->planes[i];
	char full[64], a[INET6_ADDRSTRLEN + 8];

	if (!p->interface[0] && !p->address.family)
		return fail(x, x->plane_line[i], what,
			    "needs an address, an interface or both");
	for (unsigned j = 0; j < i; j++) {
		const mrd_plane *q = &x->c->planes[j];
		if (strcmp(p->name, q->name) == 0) {
			snprintf(full, sizeof(full), "%s.name", what);
			return fail(x, line_of(x, plane_keys, "name", i), full,
				    "'%s' is already the name of planes[%u]",
				    p->name, j);
		}
		if (p->address.family &&
		    memcmp(&p->address, &q->address, sizeof(p->address)) == 0) {
			snprintf(full, sizeof(full), "%s.address", what);
			fmt_addr(a, sizeof(a), &p->address);
			return fail(x, line_of(x, plane_keys, "address", i), full,
				    "%s is already the address of planes[%u]", a, j);
		}
		if (!p->address.family && !q->address.family && p->interface[0] &&
		    strcmp(p->interface, q->interface) == 0) {
			snprintf(full, sizeof(full), "%s.interface", what);
			return fail(x, line_of(x, plane_keys, "interface", i), full,
				    "'%s' is already the interface of planes[%u]; two "
				    "planes on one interface need an address each",
				    p->interface, j);
		}
	}
	return 0;
}

static int parse_planes(ctx *x, const key *k, const yaml_node_t *v, unsigned line)
{
	mrd_config *c = x->c;
	char kb[SHOW_LEN], what[32];
	unsigned i = 0;

	x->planes_line = line;
	c->nplanes = 0;
	if (is_null(v))
		return 0;
	if (v->type != YAML_SEQUENCE_NODE)
		return fail(x, line, k->name, "expected a list, found %s",
			    kind(v, kb, sizeof(kb)));
	for (yaml_node_item_t *it = v->data.sequence.items.start;
	     it < v->data.sequence.items.top; it++, i++) {
		yaml_node_t *pn = yaml_document_get_node(x->doc, *it);
		if (!pn)
			return fail(x, line, k->name, "internal error: dangling node");
		snprintf(what, sizeof(what), "planes[%u]", i);
		if (i >= MRD_MAX_PLANES)
			return fail(x, node_line(pn), what, "too many planes (at most "
				    "%d)", MRD_MAX_PLANES);
		plane_defaults(&c->planes[i]);
		x->plane_line[i] = node_line(pn);
		if (parse_map(x, pn, plane_keys, &c->planes[i], what, i,
			      node_line(pn)) ||
		    check_plane(x, i, what))
			return -1;
		c->nplanes = i + 1;
	}
	return 0;
}

enum { FMT_UINT, FMT_DURATION };

/*
 * a <= b for two keys of one section, else an error blaming the one the
 * file set last (a key left at its default is never blamed if the other
 * was set).
 */
static int check_le(ctx *x, const key *table, const char *section,
		    const char *an, uint64_t a, const char *bn, uint64_t b, int fmt)
{
	char as[32], bs[32], what[96];
	unsigned al, bl;

	if (a <= b)
		return 0;
	if (fmt == FMT_DURATION) {
		fmt_duration(as, sizeof(as), a);
		fmt_duration(bs, sizeof(bs), b);
	} else {
		snprintf(as, sizeof(as), "%llu", (unsigned long long)a);
		snprintf(bs, sizeof(bs), "%llu", (unsigned long long)b);
	}
	al = line_of(x, table, an, 0);
	bl = line_of(x, table, bn, 0);
	if (bl > al) {
		snprintf(what, sizeof(what), "%s.%s", section, bn);
		return fail(x, bl, what, "%s is less than %s (%s)", bs, an, as);
	}
	snprintf(what, sizeof(what), "%s.%s", section, an);
	return fail(x, al, what, "%s is more than %s (%s)", as, bn, bs);
}

/* The checks that involve more than one key, after the whole file. */
static int check_all(ctx *x)
{
	const mrd_config *c = x->c;
	char what[64];

	if (c->nplanes == 0)
		return fail(x, x->planes_line, "planes",
			    "at least one plane is required");

	if (check_le(x, paths_keys, "paths", "initial_per_plane",
		     c->initial_paths_per_plane, "max_per_plane",
		     c->max_paths_per_plane, FMT_UINT))
		return -1;
	unsigned total = (unsigned)c->max_paths_per_plane * c->nplanes;
	if (total > MRP_MAX_PATHS) {
		unsigned l = line_of(x, paths_keys, "max_per_plane", 0);
		return fail(x, l ? l : x->planes_line, "paths.max_per_plane",
			    "%u on each of %u planes is %u paths, more than the %d "
			    "a connection can have", c->max_paths_per_plane,
			    c->nplanes, total, MRP_MAX_PATHS);
	}

	const mrp_cc_params *p = &c->cc;
	if (check_le(x, cc_param_keys, "congestion.params", "min_cwnd_pkts",
		     p->min_cwnd_pkts, "init_cwnd_pkts", p->init_cwnd_pkts, FMT_UINT) ||
	    check_le(x, cc_param_keys, "congestion.params", "init_cwnd_pkts",
		     p->init_cwnd_pkts, "max_cwnd_pkts", p->max_cwnd_pkts, FMT_UINT) ||
	    check_le(x, cc_param_keys, "congestion.params", "ai_pkts_per_rtt",
		     p->ai_pkts_per_rtt, "max_cwnd_pkts", p->max_cwnd_pkts, FMT_UINT))
		return -1;

	if (check_le(x, timers_keys, "timers", "rto_min", c->rto_min_ns,
		     "rto_max", c->rto_max_ns, FMT_DURATION) ||
	    check_le(x, timers_keys, "timers", "rto_min", c->rto_min_ns,
		     "rto_initial", c->rto_initial_ns, FMT_DURATION) ||
	    check_le(x, timers_keys, "timers", "rto_initial", c->rto_initial_ns,
		     "rto_max", c->rto_max_ns, FMT_DURATION))
		return -1;

	if (check_le(x, telemetry_keys, "telemetry", "interval",
		     c->telemetry_interval_ns, "retention",
		     c->telemetry_retention_ns, FMT_DURATION))
		return -1;

	/* Source ports: clear of the service port, and one range in common. */
	unsigned lo = 1, hi = 65535;
	for (unsigned i = 0; i < c->nplanes; i++) {
		const mrd_port_range *r = &c->planes[i].source_ports;
		unsigned l = line_of(x, plane_keys, "source_ports", i);
		snprintf(what, sizeof(what), "planes[%u].source_ports", i);
		if (c->port >= r->min && c->port <= r->max)
			return fail(x, l ? l : x->plane_line[i], what,
				    "%u-%u%s includes service.port %u", r->min,
				    r->max, l ? "" : " (the default)", c->port);
		if (r->max < lo || r->min > hi)
			return fail(x, l ? l : x->plane_line[i], what,
				    "%u-%u%s has no port in common with %u-%u, the "
				    "range of the planes before it (a connection uses "
				    "the source ports all planes share)", r->min,
				    r->max, l ? "" : " (the default)", lo, hi);
		if (r->min > lo)
			lo = r->min;
		if (r->max < hi)
			hi = r->max;
	}
	return 0;
}

/* Line (1-based) of byte offset off in text. */
static unsigned line_at(const char *text, size_t len, size_t off)
{
	unsigned line = 1;

	for (size_t i = 0; i < off && i < len; i++)
		line += text[i] == '\n';
	return line;
}

static int yaml_fail(ctx *x, const yaml_parser_t *p, const char *text, size_t len)
{
	unsigned line;

	if (p->error == YAML_MEMORY_ERROR)
		return fail(x, 0, NULL, "out of memory");
	if (p->error == YAML_READER_ERROR)
		line = line_at(text, len, p->problem_offset);
	else
		line = (unsigned)p->problem_mark.line + 1;
	if (p->context)
		return fail(x, line, NULL, "invalid YAML: %s (%s at line %u)",
			    p->problem ? p->problem : "error", p->context,
			    (unsigned)p->context_mark.line + 1);
	return fail(x, line, NULL, "invalid YAML: %s",
		    p->problem ? p->problem : "error");
}

static int parse_text(mrd_config *out, const char *name, const char *basedir,
		      const char *text, size_t len, char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	mrd_config *c;
	ctx *x;
	int rv = -1;

	if (err && errlen)
		err[0] = '\0';
	c = malloc(sizeof(*c));
	x = calloc(1, sizeof(*x));
	if (!c || !x) {
		free(c);
		free(x);
		if (err && errlen)
			snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	mrd_config_defaults(c);
	x->name = name;
	x->basedir = basedir;
	x->c = c;
	x->err = err;
	x->errlen = errlen;
	x->doc = &doc;

	if (len > MRD_CONFIG_MAX_BYTES) {
		fail(x, 0, NULL, "larger than %d bytes: not a configuration file?",
		     MRD_CONFIG_MAX_BYTES);
		goto out;
	}
	if (!yaml_parser_initialize(&parser)) {
		fail(x, 0, NULL, "out of memory");
		goto out;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_fail(x, &parser, text, len);
		yaml_parser_delete(&parser);
		goto out;
	}
	if (!yaml_parser_load(&parser, &extra)) {
		yaml_fail(x, &parser, text, len);
	} else {
		yaml_node_t *root2 = yaml_document_get_root_node(&extra);
		if (root2)
			fail(x, node_line(root2), NULL, "a second YAML document; the "
			     "file must hold exactly one");
		else
			rv = 0;
		yaml_document_delete(&extra);
	}
	yaml_parser_delete(&parser);
	if (rv == 0) {
		yaml_node_t *root = yaml_document_get_root_node(&doc);
		if (root)
			rv = parse_map(x, root, top_keys, c, "", 0, node_line(root));
		if (rv == 0)
			rv = check_all(x);
	}
	yaml_document_delete(&doc);
	if (rv == 0)
		*out = *c;
out:
	free(c);
	free(x);
	return rv ? -1 : 0;
}

/* Tidy a directory in place: no "." components (but "." alone), no
 * repeated or trailing slashes. ".." is left alone (symbolic links). */
static void tidy_dir(char *d)
{
	char *r = d, *w = d;
	bool abs = *d == '/';

	while (*r) {
		while (*r == '/')
			r++;
		char *end = strchr(r, '/');
		if (!end)
			end = r + strlen(r);
		size_t n = (size_t)(end - r);
		if (n == 1 && r[0] == '.') {
			r = end;
			continue;
		}
		if (n) {
			if (w != d || abs)
				*w++ = '/';
			memmove(w, r, n);
			w += n;
		}
		r = end;
	}
	if (w == d)
		*w++ = abs ? '/' : '.';
	*w = '\0';
}

int mrd_config_parse(mrd_config *c, const char *name, const char *text,
		     size_t len, char *err, size_t errlen)
{
	char dir[MRD_PATH_MAX + 1];
	const char *slash = strrchr(name, '/');

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == name)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - name), name);
	tidy_dir(dir);
	return parse_text(c, name, dir, text, len, err, errlen);
}

int mrd_config_load(mrd_config *c, const char *path, char *err, size_t errlen)
{
	char dir[MRD_PATH_MAX + 1], cwd[MRD_PATH_MAX + 1];
	const char *slash = strrchr(path, '/');
	size_t len = 0;
	char *text;
	FILE *f;
	int rv;

	if (err && errlen)
		err[0] = '\0';
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
		if (err && errlen)
			snprintf(err, errlen, "%s: cannot find the working directory: %s",
				 path, strerror(errno));
		return -1;
	}
	int w;
	if (path[0] == '/')
		w = snprintf(dir, sizeof(dir), "%.*s",
			     slash == path ? 1 : (int)(slash - path), path);
	else if (slash)
		w = snprintf(dir, sizeof(dir), "%s/%.*s", strcmp(cwd, "/") ? cwd : "",
			     (int)(slash - path), path);
	else
		w = snprintf(dir, sizeof(dir), "%s", cwd);
	if (w < 0 || (size_t)w >= sizeof(dir)) {
		if (err && errlen)
			snprintf(err, errlen, "%s: the path is too long", path);
		return -1;
	}

	tidy_dir(dir);

	f = fopen(path, "r");
	if (!f) {
		if (err && errlen)
			snprintf(err, errlen, "%s: cannot open: %s", path,
				 strerror(errno));
		return -1;
	}
	text = malloc(MRD_CONFIG_MAX_BYTES + 1);
	if (!text) {
		fclose(f);
		if (err && errlen)
			snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	len = fread(text, 1, MRD_CONFIG_MAX_BYTES + 1, f);
	if (ferror(f)) {
		int e = errno;
		free(text);
		fclose(f);
		if (err && errlen)
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
		return -1;
	}
	fclose(f);
	rv = parse_text(c, path, dir, text, len, err, errlen);
	free(text);
	return rv;
}

/* ---- engine parameters --------------------------------------------------------- */

void mrd_config_conn_params(const mrd_config *c, mrp_conn_params *p)
{
	mrp_conn_params_default(p);
	if (c->nplanes) {
		uint32_t mtu = MRP_MTU_MAX;
		uint16_t lo = 1, hi = 65535;
		uint64_t rate = 0;
		bool all_rates = true;
		for (unsigned i = 0; i < c->nplanes; i++) {
			const mrd_plane *pl = &c->planes[i];
			if (pl->mtu < mtu)
				mtu = pl->mtu;
			if (pl->source_ports.min > lo)
				lo = pl->source_ports.min;
			if (pl->source_ports.max < hi)
				hi = pl->source_ports.max;
			if (!pl->link_speed_bps)
				all_rates = false;
			rate += pl->link_speed_bps;
		}
		p->mtu = mtu;
		p->nplanes = (uint8_t)c->nplanes;
		p->sport_min = lo;
		p->sport_max = hi;
		p->max_paths = (uint16_t)(c->max_paths_per_plane * c->nplanes);
		p->initial_paths = (uint16_t)(c->initial_paths_per_plane * c->nplanes);
		p->cc.line_rate_bps = all_rates ? rate : 0;
		for (unsigned i = 0; i < c->nplanes; i++)
			p->plane_rate_bps[i] = c->planes[i].link_speed_bps;
	}
	p->cc_name = c->cc_name;
	uint64_t line_rate = p->cc.line_rate_bps;
	p->cc = c->cc;
	p->cc.mtu = p->mtu;
	p->cc.line_rate_bps = line_rate;
	p->rto_min_ns = c->rto_min_ns;
	p->rto_max_ns = c->rto_max_ns;
	p->rto_init_ns = c->rto_initial_ns;
	p->probe_idle_ns = c->probe_interval_ns;
	p->ack_delay_ns = c->ack_delay_ns;
	p->rnr_delay_ns = c->rnr_delay_ns;
	p->max_streams = c->max_streams;
	p->msg_window = c->msg_window;
	p->burst_pkts = c->burst_pkts;
	p->ack_every = c->ack_every_pkts;
	p->retry_max = c->retry_max;
	p->rnr_retry_max = c->rnr_retry_max;
	p->suspect_rtos = c->suspect_rtos;
	/* the expedited class (SPEC 6.7) only where the network has one */
	p->expedite_max = c->expedite_dscp ? (uint32_t)c->expedite_max : 0;
	p->expedite_budget = (uint32_t)c->expedite_budget;
}

/* ---- dump --------------------------------------------------------------------------- */

static bool plain_safe(const char *s)
{
	if (!*s || *s == '-')
		return false;
	for (const char *p = s; *p; p++)
		if (!is_name_char(*p) && *p != '/' && *p != '+')
			return false;
	return true;
}

/* A UTF-8 sequence at s (n bytes left): its code point and length, or
 * length 0 if it is not valid. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t v;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	} else if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		v = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		v = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		v = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	*cp = v;
	return len;
}

/* A string as a YAML scalar: plain when that reads back the same, else
 * double-quoted with everything outside printable ASCII escaped. */
static void put_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	if (plain_safe(s)) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	while (n) {
		uint32_t cp;
		size_t l = utf8_decode(p, n, &cp);
		if (l == 0) {
			fputc('?', f); /* not UTF-8: cannot come from a parse */
			l = 1;
		} else if (cp == '"' || cp == '\\') {
			fprintf(f, "\\%c", (char)cp);
		} else if (cp >= 0x20 && cp < 0x7f) {
			fputc((int)cp, f);
		} else if (cp <= 0xffff) {
			fprintf(f, "\\u%04x", (unsigned)cp);
		} else {
			fprintf(f, "\\U%08x", (unsigned)cp);
		}
		p += l;
		n -= l;
	}
	fputc('"', f);
}

static void dump_value(FILE *f, const key *k, const void *field)
{
	char buf[64];
	uint64_t v;

	switch (k->type) {
	case V_UINT:
		fprintf(f, "%llu", (unsigned long long)load_uint(field, k->size));
		break;
	case V_DURATION:
		memcpy(&v, field, sizeof(v));
		fmt_duration(buf, sizeof(buf), v);
		fputs(buf, f);
		break;
	case V_RATE:
		memcpy(&v, field, sizeof(v));
		if (v == 0 && (k->flags & F_AUTO))
			snprintf(buf, sizeof(buf), "auto");
		else
			fmt_rate(buf, sizeof(buf), v);
		fputs(buf, f);
		break;
	case V_SIZE:
		memcpy(&v, field, sizeof(v));
		fmt_size(buf, sizeof(buf), v);
		fputs(buf, f);
		break;
	case V_PORTS: {
		mrd_port_range r;
		memcpy(&r, field, sizeof(r));
		fprintf(f, "%u-%u", r.min, r.max);
		break;
	}
	case V_ADDR: {
		mrd_addr a;
		memcpy(&a, field, sizeof(a));
		fmt_addr(buf, sizeof(buf), &a);
		put_string(f, buf); /* quoted if IPv6: "::1" is not plain YAML */
		break;
	}
	case V_LOG_LEVEL: {
		int l;
		memcpy(&l, field, sizeof(l));
		fputs(mrd_log_level_name(l), f);
		break;
	}
	case V_BOOL: {
		int b;
		memcpy(&b, field, sizeof(b));
		fputs(b ? "true" : "false", f);
		break;
	}
	default: /* strings */
		put_string(f, (const char *)field);
		break;
	}
}

/* A section and what is in it, indented by indent. */
static void dump_map(FILE *f, const key *table, const void *base, int indent)
{
	for (const key *k = table; k->name; k++) {
		const void *field = (const char *)base + k->off;
		fprintf(f, "%*s%s:", indent, "", k->name);
		if (k->type == V_SECTION) {
			fputc('\n', f);
			dump_map(f, k->sub, field, indent + 2);
			continue;
		}
		fputc(' ', f);
		dump_value(f, k, field);
		fputc('\n', f);
	}
}

void mrd_config_dump(const mrd_config *c, FILE *f)
{
	fputs("# metarocd: effective configuration\n", f);
	for (const key *k = top_keys; k->name; k++) {
		if (k->type == V_SECTION) {
			fprintf(f, "%s:\n", k->name);
			dump_map(f, k->sub, (const char *)c + k->off, 2);
			continue;
		}
		/* the planes: interface and address only when given */
		fprintf(f, "%s:\n", k->name);
		for (unsigned i = 0; i < c->nplanes; i++) {
			const mrd_plane *p = &c->planes[i];
			const char *lead = "  - ";
			for (const key *pk = k->sub; pk->name; pk++) {
				if ((pk->type == V_IFNAME && !p->interface[0]) ||
				    (pk->type == V_ADDR && !p->address.family))
					continue;
				fprintf(f, "%s%s: ", lead, pk->name);
				dump_value(f, pk, (const char *)p + pk->off);
				fputc('\n', f);
				lead = "    ";
			}
		}
	}
}

/* ---- diff ----------------------------------------------------------------------------- */

typedef struct list {
	char buf[8192];
	size_t used;
} list;

static void list_add(list *l, const char *item)
{
	int w = snprintf(l->buf + l->used, sizeof(l->buf) - l->used, "%s%s",
			 l->used ? ", " : "", item);
	if (w > 0)
		l->used += (size_t)w;
	if (l->used >= sizeof(l->buf))
		l->used = sizeof(l->buf) - 1;
}

static void list_copy(char *dst, size_t len, const list *l)
{
	if (!dst || !len)
		return;
	if (l->used < len) {
		memcpy(dst, l->buf, l->used + 1);
		return;
	}
	if (len < 4) {
		dst[0] = '\0';
		return;
	}
	memcpy(dst, l->buf, len - 4);
	memcpy(dst + len - 4, "...", 4);
}

static bool is_string(enum vtype t)
{
	return t == V_IFNAME || t == V_NAME || t == V_GROUP || t == V_PATH ||
	       t == V_CC_NAME;
}

static void diff_map(const key *table, const void *a, const void *b,
		     const mrd_config *ca, const mrd_config *cb, const char *prefix,
		     list *live, list *restart)
{
	char name[128];

	for (const key *k = table; k->name; k++) {
		const char *fa = (const char *)a + k->off;
		const char *fb = (const char *)b + k->off;
		snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "",
			 k->name);
		if (k->type == V_SECTION) {
			diff_map(k->sub, fa, fb, ca, cb, name, live, restart);
			continue;
		}
		if (k->type == V_PLANES) {
			if (ca->nplanes != cb->nplanes) {
				list_add(restart, "planes");
				continue;
			}
			for (unsigned i = 0; i < ca->nplanes; i++) {
				snprintf(name, sizeof(name), "planes[%u]", i);
				diff_map(k->sub, &ca->planes[i], &cb->planes[i], ca,
					 cb, name, live, restart);
			}
			continue;
		}
		bool same = is_string(k->type) ? strncmp(fa, fb, k->size) == 0
					       : memcmp(fa, fb, k->size) == 0;
		if (!same)
			list_add((k->flags & F_LIVE) ? live : restart, name);
	}
}

static void keep_map(const key *table, void *next, const void *cur, mrd_config *cn,
		     const mrd_config *cc)
{
	for (const key *k = table; k->name; k++) {
		if (k->type == V_SECTION) {
			keep_map(k->sub, (char *)next + k->off, (const char *)cur + k->off, cn, cc);
		} else if (k->type == V_PLANES) {
			/* The planes' sockets are bound at start: the whole
			 * list (its length too) stays. */
			cn->nplanes = cc->nplanes;
			memcpy(cn->planes, cc->planes, sizeof(cn->planes));
		} else if (!(k->flags & F_LIVE)) {
			memcpy((char *)next + k->off, (const char *)cur + k->off, k->size);
		}
	}
}

void mrd_config_keep_restart(mrd_config *next, const mrd_config *cur)
{
	keep_map(top_keys, next, cur, next, cur);
}

int mrd_config_diff(const mrd_config *cur, const mrd_config *next, char *live,
		    size_t livelen, char *restart, size_t restartlen)
{
	list *l = calloc(2, sizeof(list));
	int rv = 0;

	if (!l) {
		/* cannot say what changed: the safe answer */
		if (live && livelen)
			live[0] = '\0';
		if (restart && restartlen)
			snprintf(restart, restartlen, "...");
		return MRD_CONFIG_RESTART;
	}
	diff_map(top_keys, cur, next, cur, next, "", &l[0], &l[1]);
	list_copy(live, livelen, &l[0]);
	list_copy(restart, restartlen, &l[1]);
	if (l[0].used)
		rv |= MRD_CONFIG_LIVE;
	if (l[1].used)
		rv |= MRD_CONFIG_RESTART;
	free(l);
	return rv;
}

/* ---- key listing ------------------------------------------------------------------ */

static int key_walk(const key *table, const char *prefix, unsigned *i,
		    unsigned want, char *buf, size_t len)
{
	char name[128];

	for (const key *k = table; k->name; k++) {
		snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "",
			 k->name);
		if (k->type == V_SECTION || k->type == V_PLANES) {
			if (k->type == V_PLANES)
				snprintf(name, sizeof(name), "%s%s%s[]", prefix,
					 *prefix ? "." : "", k->name);
			if (key_walk(k->sub, name, i, want, buf, len) == 0)
				return 0;
			continue;
		}
		if ((*i)++ == want) {
			snprintf(buf, len, "%s", name);
			return 0;
		}
	}
	return -1;
}

int mrd_config_key(unsigned i, char *buf, size_t len)
{
	unsigned n = 0;

	return key_walk(top_keys, "", &n, i, buf, len);
}
