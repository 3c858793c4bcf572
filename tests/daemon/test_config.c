/*
 * Tests of metarocd's configuration (daemon/config.c): the shipped
 * etc/metarocd.yaml (argv[1]) loads and is the defaults plus one loopback
 * plane; every error the parser can give, with its exact message; the
 * reload diff; the dump reading back to the same configuration; the engine
 * parameters a configuration gives; and that every key of the schema is in
 * the shipped file and in the man page (argv[2]).
 *
 * The error cases are tables of (YAML, message): a failing case prints its
 * index and input. Inputs are parsed with the name "metarocd.yaml", so the
 * messages start "metarocd.yaml:LINE:". The files in $MRP_TEST_DATA/config
 * exercise mrd_config_load() (and seed the fuzzer).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"

static const char *etc_yaml;  /* argv[1]: etc/metarocd.yaml */
static const char *man_page;  /* argv[2]: docs/metarocd.yaml.5 */

#define NAME "metarocd.yaml"
#define ERRLEN 512

/* The smallest valid file: one plane, lines 1-3. */
#define P0 "planes:\n  - name: p0\n    address: 127.0.0.1\n"

typedef struct bad {
	const char *yaml;
	const char *msg;
} bad;

static int parse(mrd_config *c, const char *yaml, char *err)
{
	return mrd_config_parse(c, NAME, yaml, strlen(yaml), err, ERRLEN);
}

static void parse_ok(mrd_config *c, const char *yaml)
{
	char err[ERRLEN];

	if (parse(c, yaml, err) != 0)
		fail_msg("unexpected error: %s\ninput:\n%s", err, yaml);
	assert_string_equal(err, "");
}

/* Every case fails with exactly its message and leaves the config alone. */
static void check_bad(const bad *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		mrd_config c, before;
		char err[ERRLEN];

		memset(&c, 0x5a, sizeof(c));
		before = c;
		int rv = mrd_config_parse(&c, NAME, cases[i].yaml,
					  strlen(cases[i].yaml), err, sizeof(err));
		if (rv != -1 || strcmp(err, cases[i].msg) != 0)
			fail_msg("case %zu: returned %d\ninput:\n%s\nexpected: %s\n"
				 "     got: %s", i, rv, cases[i].yaml, cases[i].msg,
				 rv ? err : "(success)");
		assert_memory_equal(&c, &before, sizeof(c));
	}
}

#define CHECK_BAD(t) check_bad((t), sizeof(t) / sizeof((t)[0]))

/* ---- defaults and the shipped file --------------------------------------- */

static void test_defaults(void **state)
{
	mrd_config c;
	mrp_conn_params p;

	(void)state;
	mrd_config_defaults(&c);
	mrp_conn_params_default(&p);
	assert_int_equal(c.port, 19791);
	assert_string_equal(c.control_socket, "/run/metaroce/metarocd.sock");
	assert_string_equal(c.control_group, "metaroce");
	assert_string_equal(c.app_socket, "/run/metaroce/app.sock");
	assert_string_equal(c.app_group, "metaroce");
	assert_string_equal(c.state_db, "/var/lib/metaroce/state.db");
	assert_int_equal(c.log_level, MRD_LOG_INFO);
	assert_int_equal(c.nplanes, 0);
	assert_int_equal(c.planes[0].mtu, 4096);
	assert_int_equal(c.planes[0].source_ports.min, 49152);
	assert_int_equal(c.planes[0].source_ports.max, 65535);
	assert_int_equal(c.initial_paths_per_plane, 4);
	assert_int_equal(c.max_paths_per_plane, 16);
	assert_string_equal(c.cc_name, "baseline");
	assert_int_equal(c.cc.init_cwnd_pkts, p.cc.init_cwnd_pkts);
	assert_int_equal(c.cc.loss_cut_pct, p.cc.loss_cut_pct);
	assert_int_equal(c.cc.max_cwnd_pkts, 256);
	/* the engine's defaults, so a file that says nothing changes nothing,
	 * except the timeouts: a daemon peer is a process (config.c) */
	assert_int_equal(c.rto_min_ns, 5000000);
	assert_int_equal(c.rto_max_ns, p.rto_max_ns);
	assert_int_equal(c.rto_initial_ns, 5000000);
	assert_int_equal(c.probe_interval_ns, p.probe_idle_ns);
	assert_int_equal(c.ack_delay_ns, p.ack_delay_ns);
	assert_int_equal(c.rnr_delay_ns, p.rnr_delay_ns);
	assert_int_equal(c.wake_slack_ns, 50000); /* the daemon's own */
	assert_int_equal(c.max_streams, p.max_streams);
	assert_int_equal(c.msg_window, p.msg_window);
	assert_int_equal(c.burst_pkts, 32);  /* the daemon's own, not the engine's */
	assert_int_equal(c.ack_every_pkts, 32);
	assert_int_equal(c.retry_max, p.retry_max);
	assert_int_equal(c.rnr_retry_max, p.rnr_retry_max);
	assert_int_equal(c.suspect_rtos, p.suspect_rtos);
	assert_int_equal(c.expedite_dscp, 0); /* one class unless the network has two */
	assert_int_equal(c.expedite_max, 256 << 10);
	assert_int_equal(c.expedite_budget, 1 << 20);
	assert_int_equal(c.expedite_budget, p.expedite_budget); /* the engine's default */
	assert_int_equal(c.telemetry_interval_ns, 1000000000ull);
	assert_int_equal(c.telemetry_retention_ns, 24 * 3600 * 1000000000ull);
	assert_int_equal(c.app_max_sessions, 256);
	assert_int_equal(c.app_max_sessions_per_user, 64);
	assert_int_equal(c.app_max_contexts, 16);
	assert_int_equal(c.app_max_regions, 1024);
	assert_int_equal(c.app_max_region_bytes, 64ull << 30);
	assert_int_equal(c.app_max_conns, 1024);
	assert_int_equal(c.app_max_listeners, 64);
	assert_string_equal(mrd_log_level_name(MRD_LOG_DEBUG), "debug");
	assert_string_equal(mrd_log_level_name(7), "?");
}

static void test_minimal_is_defaults(void **state)
{
	mrd_config c, d;

	(void)state;
	parse_ok(&c, P0);
	mrd_config_defaults(&d);
	d.nplanes = 1;
	snprintf(d.planes[0].name, sizeof(d.planes[0].name), "p0");
	d.planes[0].address.family = AF_INET;
	inet_pton(AF_INET, "127.0.0.1", d.planes[0].address.bytes);
	assert_int_equal(mrd_config_diff(&d, &c, NULL, 0, NULL, 0), 0);
	assert_memory_equal(&c, &d, sizeof(c));
}

/* The shipped file: the defaults (written out in full) plus plane0 on
 * 127.0.0.1, so it runs on loopback without root. */
static void test_shipped_file(void **state)
{
	mrd_config c, d;
	char err[ERRLEN], live[256], restart[256];

	(void)state;
	if (mrd_config_load(&c, etc_yaml, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	mrd_config_defaults(&d);
	d.nplanes = 1;
	snprintf(d.planes[0].name, sizeof(d.planes[0].name), "plane0");
	d.planes[0].address.family = AF_INET;
	inet_pton(AF_INET, "127.0.0.1", d.planes[0].address.bytes);
	assert_int_equal(mrd_config_diff(&d, &c, live, sizeof(live), restart,
					 sizeof(restart)), 0);
	assert_memory_equal(&c, &d, sizeof(c));
	assert_string_equal(c.planes[0].interface, "");
	assert_int_equal(c.planes[0].link_speed_bps, 0);
}

/* A file with every key set to something other than its default. */
static const char full_yaml[] =
	"service:\n"
	"  port: 20000\n"
	"  control_socket: /tmp/mr/ctl.sock\n"
	"  control_group: \"\"\n"
	"  app_socket: /tmp/mr/app.sock\n"
	"  app_group: apps\n"
	"  state_db: /tmp/mr/state.db\n"
	"  log_level: debug\n"
	"planes:\n"
	"  - name: a.1\n"
	"    interface: veth-a\n"
	"    mtu: 1500\n"
	"    link_speed: 2.5Gbps\n"
	"    source_ports: 40000-50000\n"
	"  - name: b_2\n"
	"    address: 'fd00:0::0:1'\n"
	"    interface: veth-b\n"
	"    mtu: 9000\n"
	"    link_speed: 100Gbps\n"
	"    source_ports: 45000-60000\n"
	"paths:\n"
	"  initial_per_plane: 2\n"
	"  max_per_plane: 8\n"
	"congestion:\n"
	"  algorithm: fixed\n"
	"  params: { init_cwnd_pkts: 32, min_cwnd_pkts: 2, max_cwnd_pkts: 128,\n"
	"            loss_cut_count: 5, loss_cut_pct: 10, ai_pkts_per_rtt: 2,\n"
	"            alpha_gain_shift: 0 }\n"
	"timers:\n"
	"  rto_min: 1.5ms\n"
	"  rto_max: 2s\n"
	"  rto_initial: 10ms\n"
	"  probe_interval: 0\n"
	"  ack_delay: 0\n"
	"  rnr_delay: 1ms\n"
	"  wake_slack: 0\n"
	"transport:\n"
	"  max_streams: 16\n"
	"  msg_window: 65536\n"
	"  burst_pkts: 1\n"
	"  ack_every_pkts: 2\n"
	"  retry_max: 3\n"
	"  rnr_retry_max: 0\n"
	"  suspect_rtos: 2\n"
	"  conn_memory: 8MiB\n"
	"  memory: 2GiB\n"
	"  address_memory_share: 40\n"
	"  admit_budget: 0\n"
	"  expedite_dscp: 46\n"
	"  expedite_max: 64KiB\n"
	"  expedite_budget: 128KiB\n"
	"telemetry:\n"
	"  interval: 100ms\n"
	"  retention: 7d\n"
	"apps:\n"
	"  max_sessions: 8\n"
	"  max_sessions_per_user: 5\n"
	"  max_contexts: 2\n"
	"  max_regions: 100\n"
	"  max_region_bytes: 1.5GiB\n"
	"  max_conns: 10\n"
	"  max_listeners: 3\n"
	"services:\n"
	"  perf: true\n"
	"  perf_peers: 10.0.0.0/8, fd00::/64\n"
	"  echo_peers: 127.0.0.1\n";

static void test_every_key(void **state)
{
	mrd_config c;
	uint8_t v6[16];

	(void)state;
	parse_ok(&c, full_yaml);
	assert_int_equal(c.port, 20000);
	assert_string_equal(c.control_socket, "/tmp/mr/ctl.sock");
	assert_string_equal(c.control_group, "");
	assert_string_equal(c.state_db, "/tmp/mr/state.db");
	assert_int_equal(c.log_level, MRD_LOG_DEBUG);
	assert_int_equal(c.nplanes, 2);
	assert_string_equal(c.planes[0].name, "a.1");
	assert_string_equal(c.planes[0].interface, "veth-a");
	assert_int_equal(c.planes[0].address.family, 0);
	assert_int_equal(c.planes[0].mtu, 1500);
	assert_int_equal(c.planes[0].link_speed_bps, 2500000000ull);
	assert_int_equal(c.planes[0].source_ports.min, 40000);
	assert_int_equal(c.planes[0].source_ports.max, 50000);
	assert_string_equal(c.planes[1].name, "b_2");
	assert_int_equal(c.planes[1].address.family, AF_INET6);
	inet_pton(AF_INET6, "fd00::1", v6);
	assert_memory_equal(c.planes[1].address.bytes, v6, 16);
	assert_int_equal(c.planes[1].link_speed_bps, 100000000000ull);
	assert_int_equal(c.initial_paths_per_plane, 2);
	assert_int_equal(c.max_paths_per_plane, 8);
	assert_string_equal(c.cc_name, "fixed");
	assert_int_equal(c.cc.init_cwnd_pkts, 32);
	assert_int_equal(c.cc.min_cwnd_pkts, 2);
	assert_int_equal(c.cc.max_cwnd_pkts, 128);
	assert_int_equal(c.cc.loss_cut_count, 5);
	assert_int_equal(c.cc.loss_cut_pct, 10);
	assert_int_equal(c.cc.ai_pkts_per_rtt, 2);
	assert_int_equal(c.cc.alpha_gain_shift, 0);
	assert_int_equal(c.cc.mtu, 0);
	assert_int_equal(c.rto_min_ns, 1500000);
	assert_int_equal(c.rto_max_ns, 2000000000);
	assert_int_equal(c.rto_initial_ns, 10000000);
	assert_int_equal(c.probe_interval_ns, 0);
	assert_int_equal(c.ack_delay_ns, 0);
	assert_int_equal(c.rnr_delay_ns, 1000000);
	assert_int_equal(c.wake_slack_ns, 0);
	assert_int_equal(c.max_streams, 16);
	assert_int_equal(c.msg_window, 65536);
	assert_int_equal(c.burst_pkts, 1);
	assert_int_equal(c.ack_every_pkts, 2);
	assert_int_equal(c.retry_max, 3);
	assert_int_equal(c.rnr_retry_max, 0);
	assert_int_equal(c.suspect_rtos, 2);
	assert_true(c.conn_memory == 8ull << 20 && c.memory == 2ull << 30);
	assert_true(c.address_memory_share == 40);
	assert_true(c.admit_budget == 0); /* off, not the 256 KiB default */
	assert_true(c.expedite_dscp == 46 && c.expedite_max == 64 << 10);
	assert_true(c.expedite_budget == 128 << 10);
	assert_int_equal(c.services_perf, 1);
	assert_string_equal(c.perf_peers, "10.0.0.0/8, fd00::/64");
	assert_string_equal(c.echo_peers, "127.0.0.1");
	assert_int_equal(c.telemetry_interval_ns, 100000000);
	assert_int_equal(c.telemetry_retention_ns, 7 * 86400 * 1000000000ull);
	assert_string_equal(c.app_socket, "/tmp/mr/app.sock");
	assert_string_equal(c.app_group, "apps");
	assert_int_equal(c.app_max_sessions, 8);
	assert_int_equal(c.app_max_sessions_per_user, 5);
	assert_int_equal(c.app_max_contexts, 2);
	assert_int_equal(c.app_max_regions, 100);
	assert_int_equal(c.app_max_region_bytes, 3ull << 29);
	assert_int_equal(c.app_max_conns, 10);
	assert_int_equal(c.app_max_listeners, 3);
}

/* Other accepted spellings. */
static void test_accepted_forms(void **state)
{
	mrd_config c;

	(void)state;
	/* an empty section is the defaults; flow style; a single port */
	parse_ok(&c, "service:\ntimers: ~\n" P0 "    source_ports: 50000\n");
	assert_int_equal(c.planes[0].source_ports.min, 50000);
	assert_int_equal(c.planes[0].source_ports.max, 50000);
	parse_ok(&c, "{planes: [{name: x, interface: eth0}], service: {port: 1}}");
	assert_int_equal(c.port, 1);
	assert_string_equal(c.planes[0].interface, "eth0");
	/* an explicit document, a quoted number, units */
	parse_ok(&c, "---\n" P0 "service:\n  port: \"19792\"\ntimers:\n"
		 "  rto_min: 1000ns\n  rto_max: 1m\n  rto_initial: 0.5s\n"
		 "telemetry:\n  interval: 10ms\n  retention: 365d\n...\n");
	assert_int_equal(c.port, 19792);
	assert_int_equal(c.rto_min_ns, 1000);
	assert_int_equal(c.rto_max_ns, 60000000000ull);
	assert_int_equal(c.rto_initial_ns, 500000000);
	assert_int_equal(c.telemetry_retention_ns, 365 * 86400 * 1000000000ull);
	/* rates: every unit, fractions that come out whole, auto */
	parse_ok(&c, P0 "    link_speed: 1000000bps\n");
	assert_int_equal(c.planes[0].link_speed_bps, 1000000);
	parse_ok(&c, P0 "    link_speed: 1500kbps\n");
	assert_int_equal(c.planes[0].link_speed_bps, 1500000);
	parse_ok(&c, P0 "    link_speed: 1.5Gbps\n    mtu: 256\n");
	assert_int_equal(c.planes[0].link_speed_bps, 1500000000);
	assert_int_equal(c.planes[0].mtu, 256);
}

/* ---- the structure of the file ------------------------------------------ */

static void test_syntax_errors(void **state)
{
	static const bad cases[] = {
		{ "service:\n  port: 1\n   bad: 2\n",
		  NAME ":3: invalid YAML: mapping values are not allowed in this "
		  "context" },
		{ "service:\n  state_db: \"abc\n",
		  NAME ":3: invalid YAML: found unexpected end of stream (while "
		  "scanning a quoted scalar at line 2)" },
		{ "service:\n  log_level: \xff\n",
		  NAME ":2: invalid YAML: invalid leading UTF-8 octet" },
		{ "service:\n\tport: 1\n",
		  NAME ":2: invalid YAML: found character that cannot start any "
		  "token (while scanning for the next token at line 2)" },
		{ P0 "service: [1, 2\n",
		  NAME ":5: invalid YAML: did not find expected ',' or ']' (while "
		  "parsing a flow sequence at line 4)" },
		{ P0 "---\nservice: {}\n",
		  NAME ":5: a second YAML document; the file must hold exactly one" },
		{ P0 "---\nservice: [\n",
		  NAME ":6: invalid YAML: did not find expected node content "
		  "(while parsing a flow node at line 6)" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_shape_errors(void **state)
{
	static const bad cases[] = {
		/* an empty file is refused: planes has no default */
		{ "", NAME ": planes: at least one plane is required" },
		{ "# nothing\n\n", NAME ": planes: at least one plane is required" },
		{ "service:\n  port: 1\n",
		  NAME ": planes: at least one plane is required" },
		{ "planes: []\n", NAME ":1: planes: at least one plane is required" },
		{ "planes:\n", NAME ":1: planes: at least one plane is required" },
		{ "- a\n", NAME ":1: expected a map of sections at the top level, "
		  "found a list" },
		{ "hello\n", NAME ":1: expected a map of sections at the top level, "
		  "found 'hello'" },
		{ "service: [1, 2]\n" P0,
		  NAME ":1: service: expected a map, found a list" },
		{ "service: 5\n" P0, NAME ":1: service: expected a map, found '5'" },
		{ "planes:\n  name: p0\n",
		  NAME ":1: planes: expected a list, found a map" },
		{ "planes: p0\n", NAME ":1: planes: expected a list, found 'p0'" },
		{ "planes:\n  - p0\n",
		  NAME ":2: planes[0]: expected a map, found 'p0'" },
		{ "planes:\n  -\n", NAME ":2: planes[0]: missing required key 'name'" },
		{ P0 "    mtu: [1500]\n",
		  NAME ":4: planes[0].mtu: expected a value, found a list" },
		{ P0 "    mtu: {a: 1}\n",
		  NAME ":4: planes[0].mtu: expected a value, found a map" },
		{ P0 "congestion:\n  params: [1]\n",
		  NAME ":5: congestion.params: expected a map, found a list" },
		{ "? {a: 1}\n: 2\n",
		  NAME ":1: a key must be a name, found a map" },
		{ "service:\n  [port]: 1\n",
		  NAME ":2: service: a key must be a name, found a list" },
		{ P0 "service:\n  control_group: \"a\\0b\"\n",
		  NAME ":5: service.control_group: the value contains a NUL byte" },
		{ P0 "service:\n  port:\n", NAME ":5: service.port: no value" },
		{ P0 "timers:\n  rto_min: ''\n", NAME ":5: timers.rto_min: no value" },
		/* aliases may form cycles in a libyaml document: never followed */
		{ "planes: &a [*a]\n",
		  NAME ":1: planes[0]: expected a map, found a list" },
		{ P0 "service: &s {port: *s}\n",
		  NAME ":4: service.port: expected a value, found a map" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_unknown_keys(void **state)
{
	static const bad cases[] = {
		{ "planes:\n  - name: p0\n    adress: 127.0.0.1\n",
		  NAME ":3: planes[0].adress: unknown key; did you mean 'address'?" },
		{ P0 "servce:\n  port: 1\n",
		  NAME ":4: servce: unknown key; did you mean 'service'?" },
		{ P0 "Service:\n", NAME ":4: Service: unknown key; did you mean "
		  "'service'?" },
		{ P0 "timers:\n  rto_init: 1ms\n",
		  NAME ":5: timers.rto_init: unknown key; did you mean 'rto_initial'?" },
		{ P0 "service:\n  prot: 1\n",
		  NAME ":5: service.prot: unknown key; did you mean 'port'?" },
		{ P0 "congestion:\n  params:\n    max_cwnd: 8\n",
		  NAME ":6: congestion.params.max_cwnd: unknown key; did you mean "
		  "'max_cwnd_pkts'?" },
		{ P0 "telemetry:\n  foo: 1\n",
		  NAME ":5: telemetry.foo: unknown key (valid here: interval, "
		  "retention, history, max_paths, textfile)" },
		{ "plane:\n  - name: p0\n",
		  NAME ":1: plane: unknown key; did you mean 'planes'?" },
		{ P0 "logging: debug\n",
		  NAME ":4: logging: unknown key (valid here: service, planes, paths, "
		  "congestion, timers, transport, telemetry, apps, services)" },
		{ P0 "    speed: 1Gbps\n",
		  NAME ":4: planes[0].speed: unknown key (valid here: name, "
		  "interface, address, mtu, link_speed, source_ports)" },
		{ P0 "\"a\\x01\": 1\n",
		  NAME ":4: a\\x01: unknown key (valid here: service, planes, paths, "
		  "congestion, timers, transport, telemetry, apps, services)" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_duplicate_keys(void **state)
{
	static const bad cases[] = {
		{ P0 "service:\n  port: 1\n  port: 2\n",
		  NAME ":6: service.port: duplicate key (first at line 5)" },
		{ P0 "planes: []\n",
		  NAME ":4: planes: duplicate key (first at line 1)" },
		{ P0 "    address: 10.0.0.1\n",
		  NAME ":4: planes[0].address: duplicate key (first at line 3)" },
		{ P0 "congestion: {params: {ai_pkts_per_rtt: 1, ai_pkts_per_rtt: 2}}\n",
		  NAME ":4: congestion.params.ai_pkts_per_rtt: duplicate key (first "
		  "at line 4)" },
	};

	(void)state;
	CHECK_BAD(cases);
}

/* ---- the keys, section by section ------------------------------------------ */

static void test_service_errors(void **state)
{
	static const bad cases[] = {
		{ P0 "service:\n  port: 0\n",
		  NAME ":5: service.port: 0 is out of range (1-65535)" },
		{ P0 "service:\n  port: 70000\n",
		  NAME ":5: service.port: 70000 is out of range (1-65535)" },
		{ P0 "service:\n  port: -1\n",
		  NAME ":5: service.port: -1 is out of range (1-65535)" },
		{ P0 "service:\n  port: 99999999999999999999999\n",
		  NAME ":5: service.port: 99999999999999999999999 is out of range "
		  "(1-65535)" },
		{ P0 "service:\n  port: abc\n",
		  NAME ":5: service.port: 'abc' is not a whole number" },
		{ P0 "service:\n  port: 1.5\n",
		  NAME ":5: service.port: '1.5' is not a whole number" },
		{ P0 "service:\n  port: 0x10\n",
		  NAME ":5: service.port: '0x10' is not a whole number" },
		{ P0 "service:\n  log_level: verbose\n",
		  NAME ":5: service.log_level: 'verbose' is not a log level (error, "
		  "warn, info, debug)" },
		{ P0 "service:\n  log_level: wran\n",
		  NAME ":5: service.log_level: 'wran' is not a log level; did you "
		  "mean 'warn'?" },
		{ P0 "service:\n  log_level: INFO\n",
		  NAME ":5: service.log_level: 'INFO' is not a log level (error, "
		  "warn, info, debug)" },
		{ P0 "service:\n  control_group: -wheel\n",
		  NAME ":5: service.control_group: '-wheel' is not a group name (up "
		  "to 32 letters, digits, '_', '.' or '-', not first; \"\" for none)" },
		{ P0 "service:\n  control_group: a b\n",
		  NAME ":5: service.control_group: 'a b' is not a group name (up "
		  "to 32 letters, digits, '_', '.' or '-', not first; \"\" for none)" },
		{ P0 "service:\n  control_group: abcdefghijabcdefghijabcdefghijabc\n",
		  NAME ":5: service.control_group: 'abcdefghijabcdefghijabcdefghijabc' "
		  "is not a group name (up to 32 letters, digits, '_', '.' or '-', "
		  "not first; \"\" for none)" },
		{ P0 "service:\n  control_socket: /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaa.sock\n",
		  NAME ":5: service.control_socket: '/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaa...' is longer than the 107 bytes a Unix socket path "
		  "can hold" },
		{ P0 "service:\n  control_socket: ~bob/metarocd.sock\n",
		  NAME ":5: service.control_socket: '~bob/metarocd.sock': only '~/' "
		  "(your home directory) is supported" },
		{ P0 "service:\n  state_db: \"a\\tb.db\"\n",
		  NAME ":5: service.state_db: 'a\\x09b.db' contains a control "
		  "character" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_paths_resolved(void **state)
{
	mrd_config c;
	char err[ERRLEN], *text, *big;
	static const char base[] = P0 "service:\n  state_db: ";
	static const char rel1[] = P0 "service:\n  state_db: state.db\n"
				   "  control_socket: ./run/m.sock\n";
	static const char rel2[] = P0 "service:\n  state_db: s.db\n";

	(void)state;
	/* a relative path is relative to the file's directory */
	assert_int_equal(mrd_config_parse(&c, "/etc/metaroce/metarocd.yaml", rel1,
					  strlen(rel1), err, sizeof(err)), 0);
	assert_string_equal(c.state_db, "/etc/metaroce/state.db");
	assert_string_equal(c.control_socket, "/etc/metaroce/run/m.sock");
	assert_int_equal(mrd_config_parse(&c, "/m.yaml", rel2, strlen(rel2), err,
					  sizeof(err)), 0);
	assert_string_equal(c.state_db, "/s.db");
	assert_int_equal(mrd_config_parse(&c, "conf/m.yaml", rel2, strlen(rel2),
					  err, sizeof(err)), 0);
	assert_string_equal(c.state_db, "conf/s.db");
	assert_int_equal(mrd_config_parse(&c, "./conf/./x//m.yaml", rel2,
					  strlen(rel2), err, sizeof(err)), 0);
	assert_string_equal(c.state_db, "conf/x/s.db");
	assert_int_equal(mrd_config_parse(&c, "./m.yaml", rel2, strlen(rel2),
					  err, sizeof(err)), 0);
	assert_string_equal(c.state_db, "s.db");
	assert_int_equal(mrd_config_parse(&c, "/./m.yaml", rel2, strlen(rel2),
					  err, sizeof(err)), 0);
	assert_string_equal(c.state_db, "/s.db");
	assert_int_equal(mrd_config_parse(&c, "../m.yaml", rel2, strlen(rel2),
					  err, sizeof(err)), 0);
	assert_string_equal(c.state_db, "../s.db");
	/* with no directory in the name they stay relative */
	parse_ok(&c, P0 "service:\n  state_db: .//s.db\n  control_socket: x/../y\n");
	assert_string_equal(c.state_db, "s.db");
	assert_string_equal(c.control_socket, "x/../y");
	/* the quotes and characters a path may have */
	parse_ok(&c, P0 "service:\n  state_db: \"/tmp/it's a \\\"db\\\" \\u00e9\"\n");
	assert_string_equal(c.state_db, "/tmp/it's a \"db\" \xc3\xa9");

	/* ~/ is $HOME, which must be absolute */
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	setenv("HOME", "/home/tester/", 1);
	parse_ok(&c, P0 "service:\n  control_socket: ~/mr.sock\n");
	assert_string_equal(c.control_socket, "/home/tester/mr.sock");
	setenv("HOME", "relative", 1);
	assert_int_equal(parse(&c, P0 "service:\n  state_db: ~/s.db\n", err), -1);
	assert_string_equal(err, NAME ":5: service.state_db: '~/s.db' needs $HOME "
			    "set to an absolute path");
	unsetenv("HOME");
	assert_int_equal(parse(&c, P0 "service:\n  state_db: ~/s.db\n", err), -1);
	assert_string_equal(err, NAME ":5: service.state_db: '~/s.db' needs $HOME "
			    "set to an absolute path");
	if (home)
		setenv("HOME", home, 1);
	free(home);

	/* the longest state_db fits, one more byte does not */
	text = malloc(sizeof(base) + MRD_PATH_MAX + 8);
	big = malloc(MRD_PATH_MAX + 2);
	assert_non_null(text);
	assert_non_null(big);
	memset(big, 'd', MRD_PATH_MAX + 1);
	big[0] = '/';
	big[MRD_PATH_MAX] = '\0';
	snprintf(text, sizeof(base) + MRD_PATH_MAX + 8, "%s%s\n", base, big);
	parse_ok(&c, text);
	assert_int_equal(strlen(c.state_db), MRD_PATH_MAX);
	big[MRD_PATH_MAX] = 'd';
	big[MRD_PATH_MAX + 1] = '\0';
	snprintf(text, sizeof(base) + MRD_PATH_MAX + 8, "%s%s\n", base, big);
	assert_int_equal(parse(&c, text, err), -1);
	/* (shown cut to its first 48 bytes) */
	assert_string_equal(err, NAME ":5: service.state_db: '/ddddddddddddddddddd"
			    "dddddddddddddddddddddddddddd...' is longer than 4095 "
			    "bytes");
	free(text);
	free(big);
}

static void test_plane_errors(void **state)
{
	static const bad cases[] = {
		{ P0 "    mtu: 70000\n",
		  NAME ":4: planes[0].mtu: 70000 is out of range (256-9000)" },
		{ P0 "    mtu: 255\n",
		  NAME ":4: planes[0].mtu: 255 is out of range (256-9000)" },
		{ P0 "    mtu: jumbo\n",
		  NAME ":4: planes[0].mtu: 'jumbo' is not a whole number" },
		{ P0 "    link_speed: 100\n",
		  NAME ":4: planes[0].link_speed: '100' has no unit (bps, Kbps, "
		  "Mbps, Gbps, Tbps)" },
		{ P0 "    link_speed: 100Gb\n",
		  NAME ":4: planes[0].link_speed: '100Gb' is not a rate (a number "
		  "and a unit: bps, Kbps, Mbps, Gbps, Tbps; or auto)" },
		{ P0 "    link_speed: 100 Gbps\n",
		  NAME ":4: planes[0].link_speed: '100 Gbps' is not a rate (a number "
		  "and a unit: bps, Kbps, Mbps, Gbps, Tbps; or auto)" },
		{ P0 "    link_speed: 100Kbps\n",
		  NAME ":4: planes[0].link_speed: 100Kbps is out of range "
		  "(1Mbps-10Tbps)" },
		{ P0 "    link_speed: 20Tbps\n",
		  NAME ":4: planes[0].link_speed: 20Tbps is out of range "
		  "(1Mbps-10Tbps)" },
		{ P0 "    link_speed: 0\n",
		  NAME ":4: planes[0].link_speed: 0 is out of range (1Mbps-10Tbps)" },
		{ P0 "    link_speed: 1.0000005bps\n",
		  NAME ":4: planes[0].link_speed: '1.0000005bps' is not a whole "
		  "number of bits per second" },
		{ P0 "    link_speed: 99999999999Tbps\n",
		  NAME ":4: planes[0].link_speed: 99999999999Tbps is out of range "
		  "(1Mbps-10Tbps)" },
		{ P0 "    source_ports: 49152:65535\n",
		  NAME ":4: planes[0].source_ports: '49152:65535' is not a port range "
		  "(LOW-HIGH, e.g. 49152-65535, or one port)" },
		{ P0 "    source_ports: 49152-\n",
		  NAME ":4: planes[0].source_ports: '49152-' is not a port range "
		  "(LOW-HIGH, e.g. 49152-65535, or one port)" },
		{ P0 "    source_ports: 0-100\n",
		  NAME ":4: planes[0].source_ports: 0-100 is out of range (1-65535)" },
		{ P0 "    source_ports: 1-70000\n",
		  NAME ":4: planes[0].source_ports: 1-70000 is out of range (1-65535)" },
		{ P0 "    source_ports: 60000-50000\n",
		  NAME ":4: planes[0].source_ports: 60000-50000: the low end is above "
		  "the high end" },
		{ "planes:\n  - name: p0\n    address: 10.0.0.256\n",
		  NAME ":3: planes[0].address: '10.0.0.256' is not an IPv4 or IPv6 "
		  "address" },
		{ "planes:\n  - name: p0\n    address: fe80::1%eth0\n",
		  NAME ":3: planes[0].address: 'fe80::1%eth0' is not an IPv4 or IPv6 "
		  "address (give the interface under 'interface', not after '%')" },
		{ "planes:\n  - name: p0\n    address: localhost\n",
		  NAME ":3: planes[0].address: 'localhost' is not an IPv4 or IPv6 "
		  "address" },
		{ "planes:\n  - name: p0\n    address: 0.0.0.0\n",
		  NAME ":3: planes[0].address: '0.0.0.0' is not a unicast address (a "
		  "plane needs an address of this host)" },
		{ "planes:\n  - name: p0\n    address: 239.1.2.3\n",
		  NAME ":3: planes[0].address: '239.1.2.3' is not a unicast address (a "
		  "plane needs an address of this host)" },
		{ "planes:\n  - name: p0\n    address: 255.255.255.255\n",
		  NAME ":3: planes[0].address: '255.255.255.255' is not a unicast "
		  "address (a plane needs an address of this host)" },
		{ "planes:\n  - name: p0\n    address: '::'\n",
		  NAME ":3: planes[0].address: '::' is not a unicast address (a "
		  "plane needs an address of this host)" },
		{ "planes:\n  - name: p0\n    address: ff02::1\n",
		  NAME ":3: planes[0].address: 'ff02::1' is not a unicast address (a "
		  "plane needs an address of this host)" },
		{ "planes:\n  - name: p0\n    interface: eth/0\n",
		  NAME ":3: planes[0].interface: 'eth/0' is not an interface name (no "
		  "'/', ':' or whitespace; not '.' or '..')" },
		{ "planes:\n  - name: p0\n    interface: eth0:1\n",
		  NAME ":3: planes[0].interface: 'eth0:1' is not an interface name (no "
		  "'/', ':' or whitespace; not '.' or '..')" },
		{ "planes:\n  - name: p0\n    interface: \"eth 0\"\n",
		  NAME ":3: planes[0].interface: 'eth 0' is not an interface name (no "
		  "'/', ':' or whitespace; not '.' or '..')" },
		{ "planes:\n  - name: p0\n    interface: ..\n",
		  NAME ":3: planes[0].interface: '..' is not an interface name (no "
		  "'/', ':' or whitespace; not '.' or '..')" },
		{ "planes:\n  - name: p0\n    interface: enp1s0f0np0v1234\n",
		  NAME ":3: planes[0].interface: 'enp1s0f0np0v1234' is longer than 15 "
		  "characters (IFNAMSIZ)" },
		{ "planes:\n  - name: p0\n    mtu: 1500\n",
		  NAME ":2: planes[0]: needs an address, an interface or both" },
		{ "planes:\n  - address: 127.0.0.1\n",
		  NAME ":2: planes[0]: missing required key 'name'" },
		{ "planes:\n  - name: my plane\n    address: 127.0.0.1\n",
		  NAME ":2: planes[0].name: 'my plane' is not a plane name (1-31 "
		  "letters, digits, '_', '.' or '-')" },
		{ "planes:\n  - name: abcdefghijabcdefghijabcdefghijab\n",
		  NAME ":2: planes[0].name: 'abcdefghijabcdefghijabcdefghijab' is not "
		  "a plane name (1-31 letters, digits, '_', '.' or '-')" },
		{ "planes:\n  - name: \"\"\n",
		  NAME ":2: planes[0].name: no value" },
		{ P0 "  - name: p0\n    address: 127.0.0.2\n",
		  NAME ":4: planes[1].name: 'p0' is already the name of planes[0]" },
		{ P0 "  - name: p1\n    address: 127.0.0.1\n",
		  NAME ":5: planes[1].address: 127.0.0.1 is already the address of "
		  "planes[0]" },
		{ "planes:\n  - {name: a, address: '::1'}\n"
		  "  - {name: b, address: '0:0::0:1', interface: lo}\n",
		  NAME ":3: planes[1].address: ::1 is already the address of planes[0]" },
		{ "planes:\n  - {name: a, interface: eth0}\n"
		  "  - {name: b, interface: eth0}\n",
		  NAME ":3: planes[1].interface: 'eth0' is already the interface of "
		  "planes[0]; two planes on one interface need an address each" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_plane_limits(void **state)
{
	char text[4096];
	size_t o;
	mrd_config c;
	char err[ERRLEN];

	(void)state;
	/* 16 planes (one path each) are fine, the 17th is refused */
	o = (size_t)snprintf(text, sizeof(text), "planes:\n");
	for (int i = 0; i < 17; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o,
				      "  - {name: p%d, address: 10.0.0.%d}\n", i, i + 1);
	assert_int_equal(parse(&c, text, err), -1);
	assert_string_equal(err, NAME ":18: planes[16]: too many planes (at most 16)");
	text[strlen(text) - strlen("  - {name: p16, address: 10.0.0.17}\n")] = '\0';
	parse_ok(&c, text);
	assert_int_equal(c.nplanes, 16);
	assert_string_equal(c.planes[15].name, "p15");
}

static void test_cross_errors(void **state)
{
	static const bad cases[] = {
		/* the source ports never include the service port */
		{ P0 "    source_ports: 19000-20000\n",
		  NAME ":4: planes[0].source_ports: 19000-20000 includes service.port "
		  "19791" },
		{ "service:\n  port: 50000\n" P0,
		  NAME ":4: planes[0].source_ports: 49152-65535 (the default) "
		  "includes service.port 50000" },
		{ P0 "    source_ports: 19791\n",
		  NAME ":4: planes[0].source_ports: 19791-19791 includes service.port "
		  "19791" },
		/* and all planes share some */
		{ P0 "    source_ports: 40000-41000\n"
		  "  - {name: p1, address: 127.0.0.2, source_ports: 42000-43000}\n",
		  NAME ":5: planes[1].source_ports: 42000-43000 has no port in common "
		  "with 40000-41000, the range of the planes before it (a connection "
		  "uses the source ports all planes share)" },
		{ P0 "    source_ports: 1000-2000\n"
		  "  - {name: p1, address: 127.0.0.2}\n",
		  NAME ":5: planes[1].source_ports: 49152-65535 (the default) has no "
		  "port in common with 1000-2000, the range of the planes before it "
		  "(a connection uses the source ports all planes share)" },
		/* paths */
		{ P0 "paths:\n  initial_per_plane: 0\n",
		  NAME ":5: paths.initial_per_plane: 0 is out of range (1-256)" },
		{ P0 "paths:\n  max_per_plane: 257\n",
		  NAME ":5: paths.max_per_plane: 257 is out of range (1-256)" },
		{ P0 "paths:\n  initial_per_plane: 32\n",
		  NAME ":5: paths.initial_per_plane: 32 is more than max_per_plane "
		  "(16)" },
		{ P0 "paths:\n  max_per_plane: 2\n",
		  NAME ":5: paths.max_per_plane: 2 is less than initial_per_plane (4)" },
		{ P0 "paths:\n  initial_per_plane: 8\n  max_per_plane: 4\n",
		  NAME ":6: paths.max_per_plane: 4 is less than initial_per_plane (8)" },
		{ P0 "paths:\n  max_per_plane: 4\n  initial_per_plane: 8\n",
		  NAME ":6: paths.initial_per_plane: 8 is more than max_per_plane (4)" },
		{ "paths:\n  max_per_plane: 129\n" P0
		  "  - {name: p1, address: 127.0.0.2}\n",
		  NAME ":2: paths.max_per_plane: 129 on each of 2 planes is 258 paths, "
		  "more than the 256 a connection can have" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_congestion_errors(void **state)
{
	static const bad cases[] = {
		{ P0 "congestion:\n  algorithm: cubic\n",
		  NAME ":5: congestion.algorithm: 'cubic' is not a congestion control "
		  "algorithm (baseline, fixed)" },
		{ P0 "congestion:\n  algorithm: basline\n",
		  NAME ":5: congestion.algorithm: 'basline' is not a congestion "
		  "control algorithm; did you mean 'baseline'?" },
		{ P0 "congestion:\n  params:\n    init_cwnd_pkts: 300\n",
		  NAME ":6: congestion.params.init_cwnd_pkts: 300 is out of range "
		  "(1-256)" },
		{ P0 "congestion:\n  params:\n    min_cwnd_pkts: 0\n",
		  NAME ":6: congestion.params.min_cwnd_pkts: 0 is out of range "
		  "(1-256)" },
		{ P0 "congestion:\n  params:\n    max_cwnd_pkts: 257\n",
		  NAME ":6: congestion.params.max_cwnd_pkts: 257 is out of range "
		  "(1-256)" },
		{ P0 "congestion:\n  params:\n    loss_cut_count: 0\n",
		  NAME ":6: congestion.params.loss_cut_count: 0 is out of range "
		  "(1-1024)" },
		{ P0 "congestion:\n  params:\n    loss_cut_pct: 0\n",
		  NAME ":6: congestion.params.loss_cut_pct: 0 is out of range "
		  "(1-100)" },
		{ P0 "congestion:\n  params:\n    loss_cut_pct: 101\n",
		  NAME ":6: congestion.params.loss_cut_pct: 101 is out of range "
		  "(1-100)" },
		{ P0 "congestion:\n  params:\n    ai_pkts_per_rtt: 0\n",
		  NAME ":6: congestion.params.ai_pkts_per_rtt: 0 is out of range "
		  "(1-256)" },
		{ P0 "congestion:\n  params:\n    alpha_gain_shift: 17\n",
		  NAME ":6: congestion.params.alpha_gain_shift: 17 is out of range "
		  "(0-16)" },
		{ P0 "congestion:\n  params:\n    min_cwnd_pkts: 32\n",
		  NAME ":6: congestion.params.min_cwnd_pkts: 32 is more than "
		  "init_cwnd_pkts (4)" },
		{ P0 "congestion:\n  params:\n    max_cwnd_pkts: 2\n",
		  NAME ":6: congestion.params.max_cwnd_pkts: 2 is less than "
		  "init_cwnd_pkts (4)" },
		{ P0 "congestion:\n  params:\n    ai_pkts_per_rtt: 100\n"
		  "    max_cwnd_pkts: 64\n",
		  NAME ":7: congestion.params.max_cwnd_pkts: 64 is less than "
		  "ai_pkts_per_rtt (100)" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_timer_errors(void **state)
{
	static const bad cases[] = {
		{ P0 "timers:\n  rto_min: 5s\n",
		  NAME ":5: timers.rto_min: 5s is out of range (1us-1s)" },
		{ P0 "timers:\n  rto_min: 500ns\n",
		  NAME ":5: timers.rto_min: 500ns is out of range (1us-1s)" },
		{ P0 "timers:\n  rto_min: 0\n",
		  NAME ":5: timers.rto_min: 0 is out of range (1us-1s)" },
		{ P0 "timers:\n  rto_min: 5\n",
		  NAME ":5: timers.rto_min: '5' has no unit (ns, us, ms, s, m, h, d)" },
		{ P0 "timers:\n  rto_min: 5x\n",
		  NAME ":5: timers.rto_min: '5x' is not a duration (a number and a "
		  "unit: ns, us, ms, s, m, h, d)" },
		{ P0 "timers:\n  rto_min: 5 ms\n",
		  NAME ":5: timers.rto_min: '5 ms' is not a duration (a number and a "
		  "unit: ns, us, ms, s, m, h, d)" },
		{ P0 "timers:\n  rto_min: -5ms\n",
		  NAME ":5: timers.rto_min: '-5ms' is not a duration (a number and a "
		  "unit: ns, us, ms, s, m, h, d)" },
		{ P0 "timers:\n  rto_min: .5ms\n",
		  NAME ":5: timers.rto_min: '.5ms' is not a duration (a number and a "
		  "unit: ns, us, ms, s, m, h, d)" },
		{ P0 "timers:\n  rto_min: 1.0000000001s\n",
		  NAME ":5: timers.rto_min: '1.0000000001s' is not a duration (a "
		  "number and a unit: ns, us, ms, s, m, h, d)" },
		{ P0 "timers:\n  rto_min: 1.5ns\n",
		  NAME ":5: timers.rto_min: '1.5ns' is not a whole number of "
		  "nanoseconds" },
		{ P0 "timers:\n  rto_max: 99999999999999999999s\n",
		  NAME ":5: timers.rto_max: 99999999999999999999s is out of range "
		  "(1us-1m)" },
		{ P0 "timers:\n  rto_max: 999999999d\n",
		  NAME ":5: timers.rto_max: 999999999d is out of range (1us-1m)" },
		{ P0 "timers:\n  rto_initial: 2m\n",
		  NAME ":5: timers.rto_initial: 2m is out of range (1us-1m)" },
		{ P0 "timers:\n  probe_interval: 500us\n",
		  NAME ":5: timers.probe_interval: 500us is out of range (0 or "
		  "1ms-1h)" },
		{ P0 "timers:\n  probe_interval: 2h\n",
		  NAME ":5: timers.probe_interval: 2h is out of range (0 or 1ms-1h)" },
		{ P0 "timers:\n  ack_delay: 20ms\n",
		  NAME ":5: timers.ack_delay: 20ms is out of range (0 or 1us-10ms)" },
		{ P0 "timers:\n  rnr_delay: 0\n",
		  NAME ":5: timers.rnr_delay: 0 is out of range (1us-1s)" },
		{ P0 "timers:\n  rto_max: 50us\n",
		  NAME ":5: timers.rto_max: 50us is less than rto_min (5ms)" },
		{ P0 "timers:\n  rto_initial: 200ms\n",
		  NAME ":5: timers.rto_initial: 200ms is more than rto_max (100ms)" },
		{ P0 "timers:\n  rto_min: 20ms\n",
		  NAME ":5: timers.rto_min: 20ms is more than rto_initial (5ms)" },
		{ P0 "timers:\n  rto_initial: 50us\n",
		  NAME ":5: timers.rto_initial: 50us is less than rto_min (5ms)" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void test_transport_telemetry_errors(void **state)
{
	static const bad cases[] = {
		{ P0 "transport:\n  max_streams: 0\n",
		  NAME ":5: transport.max_streams: 0 is out of range (1-65535)" },
		{ P0 "transport:\n  max_streams: 65536\n",
		  NAME ":5: transport.max_streams: 65536 is out of range (1-65535)" },
		{ P0 "transport:\n  msg_window: 65537\n",
		  NAME ":5: transport.msg_window: 65537 is out of range (1-65536)" },
		{ P0 "transport:\n  burst_pkts: 65\n",
		  NAME ":5: transport.burst_pkts: 65 is out of range (1-64)" },
		{ P0 "transport:\n  ack_every_pkts: 0\n",
		  NAME ":5: transport.ack_every_pkts: 0 is out of range (1-256)" },
		{ P0 "transport:\n  retry_max: 256\n",
		  NAME ":5: transport.retry_max: 256 is out of range (1-255)" },
		{ P0 "transport:\n  rnr_retry_max: 256\n",
		  NAME ":5: transport.rnr_retry_max: 256 is out of range (0-255)" },
		{ P0 "transport:\n  suspect_rtos: 0\n",
		  NAME ":5: transport.suspect_rtos: 0 is out of range (1-255)" },
		{ P0 "transport:\n  expedite_dscp: 64\n",
		  NAME ":5: transport.expedite_dscp: 64 is out of range (0 or 1-63)" },
		{ P0 "transport:\n  expedite_max: 512\n",
		  NAME ":5: transport.expedite_max: 512 is out of range (1KiB-16MiB)" },
		{ P0 "transport:\n  expedite_max: 0\n",
		  NAME ":5: transport.expedite_max: 0 is out of range (1KiB-16MiB)" },
		{ P0 "transport:\n  expedite_budget: 1000\n",
		  NAME ":5: transport.expedite_budget: 1000 is out of range (1KiB-1GiB)" },
		{ P0 "transport:\n  expedite_budget: 2GiB\n",
		  NAME ":5: transport.expedite_budget: 2GiB is out of range (1KiB-1GiB)" },
		{ P0 "services:\n  perf: maybe\n",
		  NAME ":5: services.perf: 'maybe' is not true or false" },
		{ P0 "services:\n  perf_peers: 10.0.0.0/33\n",
		  NAME ":5: services.perf_peers: '10.0.0.0/33': prefix length out of range" },
		{ P0 "services:\n  echo_peers: 10.0.0.0/8, nowhere\n",
		  NAME ":5: services.echo_peers: 'nowhere' is not an IPv4 or IPv6 address" },
		{ P0 "telemetry:\n  interval: 1ms\n",
		  NAME ":5: telemetry.interval: 1ms is out of range (10ms-1h)" },
		{ P0 "telemetry:\n  interval: 0\n",
		  NAME ":5: telemetry.interval: 0 is out of range (10ms-1h)" },
		{ P0 "telemetry:\n  retention: 30s\n",
		  NAME ":5: telemetry.retention: 30s is out of range (1m-365d)" },
		{ P0 "telemetry:\n  retention: 400d\n",
		  NAME ":5: telemetry.retention: 400d is out of range (1m-365d)" },
		{ P0 "telemetry:\n  interval: 1h\n  retention: 30m\n",
		  NAME ":6: telemetry.retention: 30m is less than interval (1h)" },
	};

	(void)state;
	CHECK_BAD(cases);
}

static void roundtrip(const char *yaml);

static void test_apps(void **state)
{
	static const bad cases[] = {
		{ P0 "apps:\n  max_contexts: 0\n",
		  NAME ":5: apps.max_contexts: 0 is out of range (1-4096)" },
		{ P0 "apps:\n  max_sessions: 65537\n",
		  NAME ":5: apps.max_sessions: 65537 is out of range (1-65536)" },
		{ P0 "apps:\n  max_regions: 2000000\n",
		  NAME ":5: apps.max_regions: 2000000 is out of range (1-1048576)" },
		{ P0 "apps:\n  max_conns: many\n",
		  NAME ":5: apps.max_conns: 'many' is not a whole number" },
		{ P0 "apps:\n  max_listeners: 4097\n",
		  NAME ":5: apps.max_listeners: 4097 is out of range (1-4096)" },
		{ P0 "apps:\n  max_region_bytes: 1KiB\n",
		  NAME ":5: apps.max_region_bytes: 1KiB is out of range (4KiB-1PiB)" },
		{ P0 "apps:\n  max_region_bytes: 2PiB\n",
		  NAME ":5: apps.max_region_bytes: 2PiB is out of range (4KiB-1PiB)" },
		{ P0 "apps:\n  max_region_bytes: 0\n",
		  NAME ":5: apps.max_region_bytes: 0 is out of range (4KiB-1PiB)" },
		{ P0 "apps:\n  max_region_bytes: 99999999999999999999999\n",
		  NAME ":5: apps.max_region_bytes: 99999999999999999999999 is out of "
		  "range (4KiB-1PiB)" },
		{ P0 "apps:\n  max_region_bytes: 99999999999999999999GiB\n",
		  NAME ":5: apps.max_region_bytes: 99999999999999999999GiB is out of "
		  "range (4KiB-1PiB)" },
		{ P0 "apps:\n  max_region_bytes: 64Gib\n",
		  NAME ":5: apps.max_region_bytes: '64Gib' is not a size (a number of "
		  "bytes, or a number and a unit: B, KiB, MiB, GiB, TiB, PiB, KB, MB, "
		  "GB, TB)" },
		{ P0 "apps:\n  max_region_bytes: 64 GiB\n",
		  NAME ":5: apps.max_region_bytes: '64 GiB' is not a size (a number of "
		  "bytes, or a number and a unit: B, KiB, MiB, GiB, TiB, PiB, KB, MB, "
		  "GB, TB)" },
		{ P0 "apps:\n  max_region_bytes: 4096.5B\n",
		  NAME ":5: apps.max_region_bytes: '4096.5B' is not a whole number of "
		  "bytes" },
		{ P0 "apps:\n  max_region_bytes: -5GiB\n",
		  NAME ":5: apps.max_region_bytes: '-5GiB' is not a size (a number of "
		  "bytes, or a number and a unit: B, KiB, MiB, GiB, TiB, PiB, KB, MB, "
		  "GB, TB)" },
		{ P0 "apps:\n  max_conn: 5\n",
		  NAME ":5: apps.max_conn: unknown key; did you mean 'max_conns'?" },
		{ P0 "apps:\n  foo: 5\n",
		  NAME ":5: apps.foo: unknown key (valid here: max_sessions, max_sessions_per_user, "
		  "max_contexts, max_regions, max_region_bytes, max_conns, "
		  "max_listeners)" },
		{ P0 "service:\n  app_group: -apps\n",
		  NAME ":5: service.app_group: '-apps' is not a group name (up "
		  "to 32 letters, digits, '_', '.' or '-', not first; \"\" for none)" },
		{ P0 "service:\n  app_sock: /x\n",
		  NAME ":5: service.app_sock: unknown key; did you mean 'app_socket'?" },
		{ P0 "service:\n  app_socket: ~bob/app.sock\n",
		  NAME ":5: service.app_socket: '~bob/app.sock': only '~/' "
		  "(your home directory) is supported" },
		{ P0 "service:\n  app_socket: /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaa.sock\n",
		  NAME ":5: service.app_socket: '/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaa...' is longer than the 107 bytes a Unix socket path "
		  "can hold" },
	};
	mrd_config c;
	char live[256], restart[256];

	(void)state;
	CHECK_BAD(cases);
	/* every size unit; a bare number is bytes; "" means no group */
	static const struct { const char *v; uint64_t bytes; } sizes[] = {
		{ "4096", 4096 }, { "4096B", 4096 }, { "8KiB", 8192 },
		{ "3MiB", 3ull << 20 }, { "0.5GiB", 1ull << 29 }, { "2TiB", 2ull << 40 },
		{ "1PiB", 1ull << 50 }, { "5KB", 5000 }, { "7MB", 7000000 },
		{ "1.5GB", 1500000000 }, { "1TB", 1000000000000ull },
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char y[128];
		snprintf(y, sizeof(y), P0 "apps:\n  max_region_bytes: %s\n", sizes[i].v);
		parse_ok(&c, y);
		assert_int_equal(c.app_max_region_bytes, sizes[i].bytes);
	}
	parse_ok(&c, P0 "service:\n  app_group: \"\"\n  app_socket: run/app.sock\n");
	assert_string_equal(c.app_group, "");
	assert_string_equal(c.app_socket, "run/app.sock");
	/* limits apply live (to sessions attached later); the socket does not */
	mrd_config d = c;
	d.app_max_conns = 5;
	d.app_max_region_bytes = 4096;
	snprintf(d.app_socket, sizeof(d.app_socket), "/x");
	snprintf(d.app_group, sizeof(d.app_group), "g");
	assert_int_equal(mrd_config_diff(&c, &d, live, sizeof(live), restart,
					 sizeof(restart)), MRD_CONFIG_LIVE | MRD_CONFIG_RESTART);
	assert_string_equal(live, "apps.max_region_bytes, apps.max_conns");
	assert_string_equal(restart, "service.app_socket, service.app_group");
	/* the dump writes sizes in the largest binary unit that divides them */
	roundtrip(P0 "apps:\n  max_region_bytes: 1000000\n");
	roundtrip(P0 "apps:\n  max_region_bytes: 3GB\n");
}

/* Messages are cut to the caller's buffer; values are cut and escaped. */
static void test_message_limits(void **state)
{
	mrd_config c;
	char small[24];

	(void)state;
	assert_int_equal(mrd_config_parse(&c, NAME, "planes: 5\n", 10, small,
					  sizeof(small)), -1);
	assert_string_equal(small, NAME ":1: planes");
	assert_int_equal(mrd_config_parse(&c, NAME, "planes: 5\n", 10, NULL, 0), -1);
	/* not NUL-terminated: only len bytes are read */
	assert_int_equal(mrd_config_parse(&c, NAME, P0 "garbage", strlen(P0), small,
					  sizeof(small)), 0);
	assert_string_equal(small, "");

	static const bad cases[] = {
		{ P0 "    mtu: \"\\e[31mred\"\n",
		  NAME ":4: planes[0].mtu: '\\x1b[31mred' is not a whole number" },
		{ P0 "    mtu: 1234567890123456789012345678901234567890123456789012345\n",
		  NAME ":4: planes[0].mtu: 1234567890123456789012345678901234567890"
		  "12345678... is out of range (256-9000)" },
		{ P0 "    mtu: \"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
		  "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
		  "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"\n",
		  NAME ":4: planes[0].mtu: '\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9...' is not a whole number" },
	};
	CHECK_BAD(cases);
}

/* ---- load -------------------------------------------------------------------- */

static char *data_path(const char *file)
{
	const char *dir = getenv("MRP_TEST_DATA");
	static char buf[4096];

	if (!dir)
		dir = "tests/data";
	snprintf(buf, sizeof(buf), "%s/config/%s", dir, file);
	return buf;
}

static void test_load(void **state)
{
	mrd_config c, before;
	char err[ERRLEN], expect[ERRLEN + 4200], *path;

	(void)state;
	/* the file's errors carry its name and line; c is left alone */
	memset(&c, 0x33, sizeof(c));
	before = c;
	path = data_path("bad_mtu.yaml");
	assert_int_equal(mrd_config_load(&c, path, err, sizeof(err)), -1);
	snprintf(expect, sizeof(expect), "%s:9: planes[1].mtu: 70000 is out of "
		 "range (256-9000)", path);
	assert_string_equal(err, expect);
	assert_memory_equal(&c, &before, sizeof(c));

	path = data_path("no-such-file.yaml");
	assert_int_equal(mrd_config_load(&c, path, err, sizeof(err)), -1);
	snprintf(expect, sizeof(expect), "%s: cannot open: No such file or "
		 "directory", path);
	assert_string_equal(err, expect);

	path = data_path("");
	assert_int_equal(mrd_config_load(&c, path, err, sizeof(err)), -1);
	snprintf(expect, sizeof(expect), "%s: cannot read: Is a directory", path);
	assert_string_equal(err, expect);

	/* relative paths are relative to the file, made absolute */
	setenv("HOME", "/home/tester", 1);
	path = data_path("two_planes.yaml");
	if (mrd_config_load(&c, path, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(c.nplanes, 2);
	assert_string_equal(c.control_socket, "/home/tester/.metaroce/metarocd-2.sock");
	assert_true(c.state_db[0] == '/');
	snprintf(expect, sizeof(expect), "/config/state/two_planes.db");
	assert_non_null(strstr(c.state_db, expect));
	assert_string_equal(c.state_db + strlen(c.state_db) - strlen(expect), expect);

	/* the same, given relative to the working directory */
	char cwd[4096], rel[4200];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	const char *dir = strrchr(path, '/');
	snprintf(rel, sizeof(rel), "%.*s", (int)(dir - path), path);
	assert_int_equal(chdir(rel), 0);
	mrd_config c2;
	assert_int_equal(mrd_config_load(&c2, "two_planes.yaml", err, sizeof(err)), 0);
	assert_true(c2.state_db[0] == '/');
	assert_string_equal(c2.state_db + strlen(c2.state_db) - strlen(expect), expect);
	assert_int_equal(mrd_config_load(&c2, "./two_planes.yaml", err, sizeof(err)), 0);
	assert_string_equal(c2.state_db + strlen(c2.state_db) - strlen(expect), expect);
	assert_int_equal(chdir(cwd), 0);

	/* the other valid input */
	path = data_path("full.yaml");
	if (mrd_config_load(&c, path, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(c.nplanes, 3);
	assert_string_equal(c.control_socket, "/tmp/mr/ctl sock");
	assert_string_equal(c.state_db + strlen(c.state_db) -
			    strlen("/config/state/full.db"), "/config/state/full.db");
	assert_int_equal(c.planes[2].source_ports.min, 45000);

	/* too large */
	char tmpl[] = "/tmp/mrd-config-XXXXXX";
	int fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(P0, f);
	for (int i = 0; i < MRD_CONFIG_MAX_BYTES / 10; i++)
		fputs("#########\n", f);
	fclose(f);
	assert_int_equal(mrd_config_load(&c, tmpl, err, sizeof(err)), -1);
	snprintf(expect, sizeof(expect), "%s: larger than 1048576 bytes: not a "
		 "configuration file?", tmpl);
	assert_string_equal(err, expect);
	unlink(tmpl);
}

/* ---- reload ------------------------------------------------------------------ */

/* A reload keeps the running value of every key the table marks
 * restart-only and takes the rest: afterwards only live keys differ. */
static void test_keep_restart(void **state)
{
	mrd_config a, b;
	char live[512], restart[512];

	(void)state;
	parse_ok(&a, full_yaml);
	b = a;
	b.log_level = MRD_LOG_WARN;
	b.rto_min_ns++;
	b.max_paths_per_plane = 9;
	b.port = 1;
	snprintf(b.control_socket, sizeof(b.control_socket), "/x");
	snprintf(b.control_group, sizeof(b.control_group), "adm");
	snprintf(b.app_socket, sizeof(b.app_socket), "/z");
	snprintf(b.app_group, sizeof(b.app_group), "app");
	snprintf(b.state_db, sizeof(b.state_db), "/y");
	b.planes[1].mtu = 4000;
	b.nplanes = 1;
	assert_int_equal(mrd_config_diff(&a, &b, live, sizeof(live), restart, sizeof(restart)),
			 MRD_CONFIG_LIVE | MRD_CONFIG_RESTART);
	mrd_config_keep_restart(&b, &a);
	assert_int_equal(mrd_config_diff(&a, &b, live, sizeof(live), restart, sizeof(restart)),
			 MRD_CONFIG_LIVE);
	assert_string_equal(live, "service.log_level, paths.max_per_plane, timers.rto_min");
	assert_string_equal(restart, "");
	assert_int_equal(b.port, a.port);
	assert_string_equal(b.control_socket, a.control_socket);
	assert_string_equal(b.app_group, a.app_group);
	assert_int_equal(b.nplanes, a.nplanes);
	assert_int_equal(b.planes[1].mtu, a.planes[1].mtu);
	assert_int_equal(b.log_level, MRD_LOG_WARN);
	assert_int_equal(b.max_paths_per_plane, 9);
}

static void test_diff(void **state)
{
	mrd_config a, b;
	char live[512], restart[512];

	(void)state;
	parse_ok(&a, full_yaml);
	b = a;
	assert_int_equal(mrd_config_diff(&a, &b, live, sizeof(live), restart,
					 sizeof(restart)), 0);
	assert_string_equal(live, "");
	assert_string_equal(restart, "");

	/* live only */
	b.log_level = MRD_LOG_WARN;
	b.rto_min_ns++;
	b.cc.init_cwnd_pkts = 4;
	snprintf(b.cc_name, sizeof(b.cc_name), "baseline");
	b.telemetry_retention_ns = 3600000000000ull;
	b.telemetry_interval_ns = 2000000000ull;
	b.max_paths_per_plane = 9;
	b.burst_pkts = 2;
	b.probe_interval_ns = 5;
	assert_int_equal(mrd_config_diff(&a, &b, live, sizeof(live), restart,
					 sizeof(restart)), MRD_CONFIG_LIVE);
	assert_string_equal(live, "service.log_level, paths.max_per_plane, "
			    "congestion.algorithm, congestion.params.init_cwnd_pkts, "
			    "timers.rto_min, timers.probe_interval, transport.burst_pkts, "
			    "telemetry.interval, telemetry.retention");
	assert_string_equal(restart, "");

	/* restart only */
	b = a;
	b.port = 1;
	snprintf(b.control_socket, sizeof(b.control_socket), "/x");
	snprintf(b.control_group, sizeof(b.control_group), "adm");
	snprintf(b.state_db, sizeof(b.state_db), "/y");
	b.planes[1].mtu = 4000;
	b.planes[0].address.family = AF_INET;
	b.planes[1].source_ports.max = 50000;
	snprintf(b.planes[0].interface, sizeof(b.planes[0].interface), "eth9");
	snprintf(b.planes[1].name, sizeof(b.planes[1].name), "c");
	b.planes[0].link_speed_bps = 0;
	assert_int_equal(mrd_config_diff(&a, &b, live, sizeof(live), restart,
					 sizeof(restart)), MRD_CONFIG_RESTART);
	assert_string_equal(live, "");
	assert_string_equal(restart, "service.port, service.control_socket, "
			    "service.control_group, service.state_db, "
			    "planes[0].interface, planes[0].address, "
			    "planes[0].link_speed, planes[1].name, planes[1].mtu, "
			    "planes[1].source_ports");

	/* both; a plane added or removed is "planes" */
	b = a;
	b.nplanes = 1;
	b.suspect_rtos = 9;
	assert_int_equal(mrd_config_diff(&a, &b, live, sizeof(live), restart,
					 sizeof(restart)),
			 MRD_CONFIG_LIVE | MRD_CONFIG_RESTART);
	assert_string_equal(live, "transport.suspect_rtos");
	assert_string_equal(restart, "planes");

	/* what lies past the end of a string does not count */
	b = a;
	memset(b.state_db + strlen(b.state_db) + 1, 'x', 8);
	assert_int_equal(mrd_config_diff(&a, &b, NULL, 0, NULL, 0), 0);

	/* lists that do not fit end with "..." */
	b = a;
	b.port = 2;
	b.planes[0].mtu = 9000;
	b.planes[1].mtu = 256;
	char tiny[20];
	assert_int_equal(mrd_config_diff(&a, &b, NULL, 0, tiny, sizeof(tiny)),
			 MRD_CONFIG_RESTART);
	assert_string_equal(tiny, "service.port, pl...");
	assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
}

/* A reload of an edited file: what the daemon will log. */
static void test_diff_from_files(void **state)
{
	mrd_config a, b;
	char live[512], restart[512];

	(void)state;
	parse_ok(&a, P0 "service:\n  log_level: info\ntimers:\n  rto_min: 200us\n");
	parse_ok(&b, P0 "    mtu: 1500\nservice:\n  log_level: debug\n"
		 "timers:\n  rto_min: 200000ns\n  probe_interval: 2s\n");
	assert_int_equal(mrd_config_diff(&a, &b, live, sizeof(live), restart,
					 sizeof(restart)),
			 MRD_CONFIG_LIVE | MRD_CONFIG_RESTART);
	assert_string_equal(live, "service.log_level, timers.probe_interval");
	assert_string_equal(restart, "planes[0].mtu");
}

/* ---- dump ---------------------------------------------------------------------- */

static void roundtrip(const char *yaml)
{
	mrd_config a, b;
	char *buf = NULL, err[ERRLEN];
	size_t len = 0;
	FILE *f;

	parse_ok(&a, yaml);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	mrd_config_dump(&a, f);
	fclose(f);
	if (mrd_config_parse(&b, NAME, buf, len, err, sizeof(err)) != 0)
		fail_msg("dump does not parse: %s\n%s", err, buf);
	assert_int_equal(mrd_config_diff(&a, &b, NULL, 0, NULL, 0), 0);
	free(buf);
}

static void test_dump(void **state)
{
	mrd_config c;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	parse_ok(&c, full_yaml);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	mrd_config_dump(&c, f);
	fclose(f);
	assert_string_equal(buf,
		"# metarocd: effective configuration\n"
		"service:\n"
		"  port: 20000\n"
		"  control_socket: /tmp/mr/ctl.sock\n"
		"  control_group: \"\"\n"
		"  app_socket: /tmp/mr/app.sock\n"
		"  app_group: apps\n"
		"  state_db: /tmp/mr/state.db\n"
		"  log_level: debug\n"
		"planes:\n"
		"  - name: a.1\n"
		"    interface: veth-a\n"
		"    mtu: 1500\n"
		"    link_speed: 2500Mbps\n"
		"    source_ports: 40000-50000\n"
		"  - name: b_2\n"
		"    interface: veth-b\n"
		"    address: \"fd00::1\"\n"
		"    mtu: 9000\n"
		"    link_speed: 100Gbps\n"
		"    source_ports: 45000-60000\n"
		"paths:\n"
		"  initial_per_plane: 2\n"
		"  max_per_plane: 8\n"
		"congestion:\n"
		"  algorithm: fixed\n"
		"  params:\n"
		"    init_cwnd_pkts: 32\n"
		"    min_cwnd_pkts: 2\n"
		"    max_cwnd_pkts: 128\n"
		"    loss_cut_count: 5\n"
		"    loss_cut_pct: 10\n"
		"    ai_pkts_per_rtt: 2\n"
		"    alpha_gain_shift: 0\n"
		"timers:\n"
		"  rto_min: 1500us\n"
		"  rto_max: 2s\n"
		"  rto_initial: 10ms\n"
		"  probe_interval: 0\n"
		"  ack_delay: 0\n"
		"  rnr_delay: 1ms\n"
		"  wake_slack: 0\n"
		"transport:\n"
		"  max_streams: 16\n"
		"  msg_window: 65536\n"
		"  burst_pkts: 1\n"
		"  ack_every_pkts: 2\n"
		"  retry_max: 3\n"
		"  rnr_retry_max: 0\n"
		"  suspect_rtos: 2\n"
		"  conn_memory: 8MiB\n"
		"  memory: 2GiB\n"
		"  address_memory_share: 40\n"
		"  max_conns_per_address: 4096\n"
		"  admit_budget: 0\n"
		"  expedite_dscp: 46\n"
		"  expedite_max: 64KiB\n"
		"  expedite_budget: 128KiB\n"
		"telemetry:\n"
		"  interval: 100ms\n"
		"  retention: 7d\n"
		"  history: 7d\n"
		"  max_paths: 4096\n"
		"  textfile: \"\"\n"
		"apps:\n"
		"  max_sessions: 8\n"
		"  max_sessions_per_user: 5\n"
		"  max_contexts: 2\n"
		"  max_regions: 100\n"
		"  max_region_bytes: 1536MiB\n"
		"  max_conns: 10\n"
		"  max_listeners: 3\n"
		"services:\n"
		"  perf: true\n"
		"  perf_peers: \"10.0.0.0/8, fd00::/64\"\n"
		"  echo_peers: 127.0.0.1\n");
	free(buf);

	roundtrip(full_yaml);
	roundtrip(P0);
	roundtrip(P0 "service:\n  state_db: \"/tmp/it's a \\\"db\\\" #1: \\u00e9\\x85"
		  "\\U0001f600\"\n  control_socket: \"-x\"\n  control_group: a-b\n");
	roundtrip(P0 "service:\n  state_db: \"x~y\"\n  control_socket: null\n");
	/* found by fuzz-config: "./~x" is a relative path; it must not come
	 * back as "~x", which means nothing (only "~/" is supported) */
	roundtrip(P0 "service:\n  control_socket: ./~metaroce/x.sock\n");
	roundtrip("planes:\n  - {name: a, address: '::1'}\n"
		  "  - {name: b, address: '::ffff:10.0.0.1'}\n"
		  "  - {name: c, address: 'fe80::1', interface: eth0}\n");
}

/* ---- engine parameters --------------------------------------------------------- */

static void test_conn_params(void **state)
{
	mrd_config c;
	mrp_conn_params p;
	mrp_cc_conn cc;

	(void)state;
	parse_ok(&c, full_yaml);
	mrd_config_conn_params(&c, &p);
	assert_int_equal(p.mtu, 1500);
	assert_int_equal(p.nplanes, 2);
	assert_int_equal(p.max_paths, 16);
	assert_int_equal(p.initial_paths, 4);
	assert_int_equal(p.sport_min, 45000);
	assert_int_equal(p.sport_max, 50000);
	assert_string_equal(p.cc_name, "fixed");
	assert_int_equal(p.cc.mtu, 1500);
	assert_int_equal(p.cc.init_cwnd_pkts, 32);
	assert_int_equal(p.cc.line_rate_bps, 102500000000ull);
	assert_int_equal(p.plane_rate_bps[0], 2500000000ull);
	assert_int_equal(p.plane_rate_bps[1], 100000000000ull);
	assert_int_equal(p.plane_rate_bps[2], 0);
	assert_int_equal(p.rto_min_ns, 1500000);
	assert_int_equal(p.rto_max_ns, 2000000000);
	assert_int_equal(p.rto_init_ns, 10000000);
	assert_int_equal(p.probe_idle_ns, 0);
	assert_int_equal(p.ack_delay_ns, 0);
	assert_int_equal(p.rnr_delay_ns, 1000000);
	assert_int_equal(p.max_streams, 16);
	assert_int_equal(p.msg_window, 65536);
	assert_int_equal(p.burst_pkts, 1);
	assert_int_equal(p.ack_every, 2);
	assert_int_equal(p.retry_max, 3);
	assert_int_equal(p.rnr_retry_max, 0);
	assert_int_equal(p.suspect_rtos, 2);
	assert_int_equal(p.expedite_max, 64 << 10);
	assert_int_equal(p.expedite_budget, 128 << 10);
	assert_int_equal(mrp_cc_conn_init(&cc, p.cc_name, &p.cc), 0);

	/* a plane without a link speed override: the daemon measures it */
	parse_ok(&c, P0 "  - {name: p1, address: 127.0.0.2, link_speed: 10Gbps}\n");
	mrd_config_conn_params(&c, &p);
	assert_int_equal(p.expedite_max, 0); /* no expedite_dscp: one class */
	assert_int_equal(p.cc.line_rate_bps, 0);
	assert_int_equal(p.plane_rate_bps[0], 0);
	assert_int_equal(p.plane_rate_bps[1], 10000000000ull);
	assert_int_equal(p.max_paths, 32);
	assert_int_equal(p.initial_paths, 8);
	assert_int_equal(mrp_cc_conn_init(&cc, p.cc_name, &p.cc), 0);

	/* the engine accepts the extremes the file allows */
	parse_ok(&c, P0 "congestion:\n  params: {min_cwnd_pkts: 256, "
		 "init_cwnd_pkts: 256, ai_pkts_per_rtt: 256, alpha_gain_shift: 16, "
		 "loss_cut_count: 1024, loss_cut_pct: 100}\n");
	mrd_config_conn_params(&c, &p);
	assert_int_equal(mrp_cc_conn_init(&cc, p.cc_name, &p.cc), 0);
}

/* ---- documentation --------------------------------------------------------------- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		fail_msg("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* Every key is in the shipped file (as "leaf:") and the man page (in a .TP
 * heading, ".B leaf"). */
static void test_keys_documented(void **state)
{
	char *etc = slurp(etc_yaml), *man = slurp(man_page);
	char k[128], want[160];
	unsigned i;

	(void)state;
	for (i = 0; mrd_config_key(i, k, sizeof(k)) == 0; i++) {
		const char *leaf = strrchr(k, '.') ? strrchr(k, '.') + 1 : k;
		snprintf(want, sizeof(want), "%s:", leaf);
		if (!strstr(etc, want))
			fail_msg("%s is not in %s", k, etc_yaml);
		snprintf(want, sizeof(want), ".B %s\n", leaf);
		if (!strstr(man, want))
			fail_msg("%s is not in %s", k, man_page);
	}
	assert_int_equal(i, 7 + 6 + 2 + 1 + 7 + 7 + 15 + 5 + 7 + 3);
	assert_int_equal(mrd_config_key(0, k, sizeof(k)), 0);
	assert_string_equal(k, "service.port");
	assert_int_equal(mrd_config_key(7, k, sizeof(k)), 0);
	assert_string_equal(k, "planes[].name");
	assert_int_equal(mrd_config_key(16, k, sizeof(k)), 0);
	assert_string_equal(k, "congestion.params.init_cwnd_pkts");
	free(etc);
	free(man);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_minimal_is_defaults),
		cmocka_unit_test(test_shipped_file),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_accepted_forms),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_shape_errors),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_service_errors),
		cmocka_unit_test(test_paths_resolved),
		cmocka_unit_test(test_plane_errors),
		cmocka_unit_test(test_plane_limits),
		cmocka_unit_test(test_cross_errors),
		cmocka_unit_test(test_congestion_errors),
		cmocka_unit_test(test_timer_errors),
		cmocka_unit_test(test_transport_telemetry_errors),
		cmocka_unit_test(test_message_limits),
		cmocka_unit_test(test_apps),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_keep_restart),
		cmocka_unit_test(test_diff_from_files),
		cmocka_unit_test(test_dump),
		cmocka_unit_test(test_conn_params),
		cmocka_unit_test(test_keys_documented),
	};

	if (argc != 3) {
		fprintf(stderr, "usage: %s ETC_METAROCD_YAML MAN_PAGE\n", argv[0]);
		return 1;
	}
	etc_yaml = argv[1];
	man_page = argv[2];
	return cmocka_run_group_tests_name("daemon/config", tests, NULL, NULL);
}
