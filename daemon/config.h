/*
 * metarocd's configuration: the YAML file (etc/metarocd.yaml, documented key
 * by key in docs/metarocd.yaml.5), parsed with libyaml into an mrd_config.
 *
 * Every key is validated when the file is read. A file with any error is
 * refused as a whole, with one message that names the file, the line, the key
 * and the bad value:
 *
 *   metarocd.yaml:14: planes[2].mtu: 70000 is out of range (256-9000)
 *   metarocd.yaml:7: planes[0].adress: unknown key; did you mean 'address'?
 *
 * Keys left out take the defaults of mrd_config_defaults(); only `planes` is
 * required, so an empty file is refused ("planes: ... at least one plane is
 * required").
 *
 * Reload (SIGHUP): load the file into a second mrd_config and ask
 * mrd_config_diff() which changes can be applied to the running daemon and
 * which need a restart.
 *
 * An mrd_config owns no heap memory (strings are fixed arrays), so it can be
 * copied by assignment; mrd_config_free() exists for symmetry and future use.
 */
#ifndef MRD_CONFIG_H
#define MRD_CONFIG_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cc.h"
#include "conn.h"

/* The file metarocd reads without -c (the build sets it from sysconfdir). */
#ifndef MRD_CONFIG_PATH
#define MRD_CONFIG_PATH "/etc/metaroce/metarocd.yaml"
#endif

#define MRD_MAX_PLANES MRP_MAX_PLANES   /* 16 */
#define MRD_PLANE_NAME_MAX 31           /* characters of a plane name */
#define MRD_GROUP_NAME_MAX 32           /* characters of a group name */
#define MRD_SOCKET_PATH_MAX 107         /* sun_path holds 108 bytes with the NUL */
#define MRD_PATH_MAX 4095               /* PATH_MAX without the NUL */
#define MRD_CC_NAME_MAX 31

/* Files larger than this are refused before parsing. */
#define MRD_CONFIG_MAX_BYTES (1024 * 1024)

/* service.log_level */
enum {
	MRD_LOG_ERROR = 0,
	MRD_LOG_WARN = 1,
	MRD_LOG_INFO = 2,
	MRD_LOG_DEBUG = 3,
};

/* "error", "warn", "info", "debug"; "?" for anything else. */
const char *mrd_log_level_name(int level);

/* An IPv4 or IPv6 address in network byte order; family 0 = none given. */
typedef struct mrd_addr {
	int family;        /* AF_INET, AF_INET6 or 0 */
	uint8_t bytes[16]; /* the first 4 for AF_INET, the rest zero */
} mrd_addr;

/* An inclusive range of UDP ports, 1 <= min <= max <= 65535. */
typedef struct mrd_port_range {
	uint16_t min, max;
} mrd_port_range;

/* One network plane: planes[i] of this host talks to planes[i] of the peer,
 * so the order of the list matters and must match across hosts. */
typedef struct mrd_plane {
	char name[MRD_PLANE_NAME_MAX + 1]; /* unique; [A-Za-z0-9_.-], 1-31 chars */
	char interface[IFNAMSIZ];          /* "" = none given (bind by address) */
	mrd_addr address;                  /* family 0 = none given (use the interface's) */
	uint32_t mtu;                      /* payload bytes per packet, MRP_MTU_MIN..MAX */
	uint64_t link_speed_bps;           /* override of the link speed; 0 = ask the kernel */
	mrd_port_range source_ports;       /* UDP source ports of paths on this plane */
} mrd_plane;

typedef struct mrd_config {
	/* service: */
	uint16_t port;                                /* UDP service port */
	char control_socket[MRD_SOCKET_PATH_MAX + 1]; /* Unix socket of apps and metaroce-ctl */
	char control_group[MRD_GROUP_NAME_MAX + 1];   /* group allowed read-only commands; "" = none */
	char app_socket[MRD_SOCKET_PATH_MAX + 1];     /* SOCK_SEQPACKET socket of libmetaroce */
	char app_group[MRD_GROUP_NAME_MAX + 1];       /* group whose members may attach; "" = none */
	char state_db[MRD_PATH_MAX + 1];              /* sqlite database */
	int log_level;                                /* MRD_LOG_* */

	/* planes: */
	unsigned nplanes; /* 1..MRD_MAX_PLANES after a successful load */
	mrd_plane planes[MRD_MAX_PLANES];

	/* paths (per connection): */
	uint16_t initial_paths_per_plane; /* paths opened at connect, per plane */
	uint16_t max_paths_per_plane;     /* max_paths_per_plane * nplanes <= MRP_MAX_PATHS */

	/* congestion: */
	char cc_name[MRD_CC_NAME_MAX + 1]; /* an algorithm mrp_cc_find() knows */
	mrp_cc_params cc;                  /* mtu and line_rate_bps unused (0): they come
					    * from the planes, see mrd_config_conn_params() */

	/* timers: */
	uint64_t rto_min_ns, rto_max_ns, rto_initial_ns;
	uint64_t probe_interval_ns; /* probe a path idle this long; 0 = never */
	uint64_t ack_delay_ns;      /* longest wait before acknowledging */
	uint64_t rnr_delay_ns;      /* wait after a receiver-not-ready NAK */
	uint64_t wake_slack_ns;     /* a pacing wait lasts at least this (peer.c) */

	/* transport (per connection): */
	uint16_t max_streams;
	uint32_t msg_window;     /* outstanding messages per stream */
	uint32_t burst_pkts;     /* same-path packets sent back to back */
	uint32_t ack_every_pkts; /* acknowledge after this many packets */
	uint32_t retry_max;      /* RTOs of one packet before the work request fails */
	uint32_t rnr_retry_max;  /* RNR NAKs of one message before it fails */
	uint32_t suspect_rtos;   /* consecutive RTOs that fail a path */
	uint64_t conn_memory;    /* engine memory per connection (membudget.h) */
	uint64_t memory;         /* engine memory of all connections together */
	uint32_t address_memory_share; /* % of memory one peer IP address may hold */
	uint32_t max_conns_per_addr; /* connections accepted from one address */
	uint64_t admit_budget;   /* first-round-trip admission (SPEC 6.6): bytes
				  * new connections may send before they hear
				  * from us, all together; 0 = ADMIT not offered */
	uint32_t expedite_dscp;  /* the expedited class's DSCP (SPEC 6.7): its
				  * packets are sent with it; 0 = one class */
	uint64_t expedite_max;   /* ... messages of at most this many bytes */
	uint64_t expedite_budget; /* ... and at most this many bytes of them
				   * outstanding per connection */

	/* services (the daemon's own, svcpolicy.h): */
	int services_perf;       /* PERF answers CONNECTs (it hands out an rkey) */
	char perf_peers[512];    /* prefixes PERF answers; "" = any (prefix.h) */
	char echo_peers[512];    /* prefixes ECHO answers; "" = any */

	/* telemetry: */
	uint64_t telemetry_interval_ns;  /* sampling period */
	uint64_t telemetry_retention_ns; /* how long samples are kept in state_db */

	/* apps (daemon/app.c): the daemon-wide session count and what one
	 * application session may hold; a session keeps the limits it got at
	 * HELLO across reloads. */
	uint32_t app_max_sessions;
	uint32_t app_max_sessions_per_user;
	uint32_t app_max_contexts;
	uint32_t app_max_regions;
	uint64_t app_max_region_bytes; /* all regions of a session together */
	uint32_t app_max_conns;
	uint32_t app_max_listeners;
	uint64_t telemetry_history_ns;   /* how long 1-minute aggregates are kept */
	uint32_t telemetry_max_paths;    /* paths sampled per interval at most */
	char telemetry_textfile[MRD_PATH_MAX + 1]; /* Prometheus textfile; "" = off */
} mrd_config;

/* The defaults: everything the file may leave out, and no planes. */
void mrd_config_defaults(mrd_config *c);

/*
 * Read and validate the file at path. Returns 0 and fills *c (defaults for
 * every key the file leaves out), or -1 with one line of explanation in err,
 * "PATH:LINE: KEY: problem" (no LINE when the problem is not on a line: the
 * file cannot be read, a required key is missing). *c is left untouched on
 * failure, so a reload can load into the running configuration's storage
 * only when it is good. Relative paths in the file are resolved against the
 * directory of path (made absolute with the working directory if it is
 * relative) and a leading "~/" against $HOME.
 */
int mrd_config_load(mrd_config *c, const char *path, char *err, size_t errlen);

/*
 * The same for text already in memory (text need not be NUL-terminated).
 * name stands for the file in messages, and relative paths are resolved
 * against its directory as given ("." when it has none: they stay relative).
 */
int mrd_config_parse(mrd_config *c, const char *name, const char *text,
		     size_t len, char *err, size_t errlen);

/* Release what c holds (nothing today) and reset it to zero. */
void mrd_config_free(mrd_config *c);

/* mrd_config_diff() result bits. */
#define MRD_CONFIG_LIVE 0x1    /* some change can be applied without a restart */
#define MRD_CONFIG_RESTART 0x2 /* some change needs a restart */

/*
 * Compare the running configuration with a newly loaded one. Writes the keys
 * that changed as comma-separated lists ("timers.rto_min, service.log_level")
 * into live (those a running daemon can apply: service.log_level, paths,
 * congestion, timers, transport, telemetry, apps; connection parameters apply
 * to connections opened after the reload, app limits to sessions attached
 * after it) and restart (service.port, service.control_socket,
 * service.control_group, service.app_socket, service.app_group,
 * service.state_db, planes).
 * A changed plane is named "planes[i].key"; a change in the number of
 * planes is "planes". Either buffer may be NULL; a list that does not fit
 * ends with "...". Returns a mask of MRD_CONFIG_LIVE and MRD_CONFIG_RESTART,
 * 0 when nothing changed.
 */
int mrd_config_diff(const mrd_config *cur, const mrd_config *next, char *live,
		    size_t livelen, char *restart, size_t restartlen);

/* For a reload: give next the running values (cur) of every key the table
 * does not mark live (those mrd_config_diff() lists under restart: the
 * service's port, sockets, groups and state database, and the planes). */
void mrd_config_keep_restart(mrd_config *next, const mrd_config *cur);

/* Print the configuration as YAML that mrd_config_parse() reads back into
 * the same configuration (for `metarocd --check-config -v`). */
void mrd_config_dump(const mrd_config *c, FILE *f);

/*
 * Engine parameters of a new connection (ids, tokens and rh left as
 * mrp_conn_params_default() sets them): mtu is the smallest plane MTU,
 * plane_rate_bps[i] plane i's link_speed override (0 = the daemon fills it
 * in from the kernel),
 * max_paths and initial_paths the per-plane counts times nplanes, the source
 * ports the range common to every plane (the engine has one range per
 * connection; loading checks that the planes' ranges overlap), and
 * cc.line_rate_bps the sum of the planes' link speeds when every plane has
 * an override, else 0 (the daemon fills it in from the kernel).
 */
void mrd_config_conn_params(const mrd_config *c, mrp_conn_params *p);

/* Write the i-th key of the schema into buf, dotted ("service.port",
 * "planes[].mtu", "congestion.params.init_cwnd_pkts"). Returns 0, or -1 past
 * the last key. For tests and documentation checks. */
int mrd_config_key(unsigned i, char *buf, size_t len);

#endif
