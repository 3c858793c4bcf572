/*
 * Scenario files: a full file loads with the values it says, layered
 * defaults merge in the documented order, and every kind of mistake is
 * rejected with the file, the line, the key and the bad value.
 */
#include <dirent.h>

#include "roce.h"
#include "sim_test.h"

static const char *const full =
	"description: every key once\n"                                        /* 1 */
	"seed: 7\n"                                                            /* 2 */
	"duration: 20ms\n"                                                     /* 3 */
	"mtu: 2048\n"                                                          /* 4 */
	"hosts: 8\n"                                                           /* 5 */
	"planes:\n"                                                            /* 6 */
	"  - {fabric: {type: leafspine, leaves: 2, spines: 2}, link: {loss: 0.01}}\n"
	"  - {link: {rate: 50Gbps}}\n"                                         /* 8 */
	"link: {rate: 100Gbps, delay: 2us, queue: 512KiB, ecn_threshold: 64KB}\n"
	"fabric_link: {rate: 400Gbps}\n"                                       /* 10 */
	"links:\n"                                                             /* 11 */
	"  - {plane: 1, host: 3, rate: 25Gbps}\n"                              /* 12 */
	"  - {plane: 0, switch: leaf1, port: spine0, loss: 5%}\n"              /* 13 */
	"flows:\n"                                                             /* 14 */
	"  - {src: 0, dst: 5, bytes: 1MiB, start: 10us, op: send, stream: 3, plane: 1}\n"
	"  - {pattern: incast, receiver: 2, senders: 3, bytes: 64KB}\n"        /* 16 */
	"  - {pattern: permutation, bytes: 10KB, start: 1ms}\n"                /* 17 */
	"  - {pattern: all_to_all, bytes: 1KB}\n"                              /* 18 */
	"events:\n"                                                            /* 19 */
	"  - {at: 1ms, type: link_down, plane: 0, host: 4}\n"                  /* 20 */
	"  - {at: 2ms, type: link_up, plane: 0, switch: leaf0, port: host1}\n" /* 21 */
	"  - {at: 3ms, type: plane_down, plane: 1}\n"                          /* 22 */
	"  - {at: 4ms, type: plane_up, plane: 1}\n"                            /* 23 */
	"  - {at: 5ms, type: blackhole, plane: 0, switch: spine1, port: 0}\n"  /* 24 */
	"  - {at: 6ms, type: steer, host: 0, flow: 0, action: drain, plane: 1}\n"
	"transport:\n"                                                         /* 26 */
	"  roce: {ack_every: 8, rto: 200us}\n"                                 /* 27 */
	"  metaroce: {paths_per_plane: 8, cc: baseline}\n";                    /* 28 */

static void test_full_file(void **state)
{
	sim_config cfg;

	(void)state;
	cfg_from(&cfg, full);
	assert_true(cfg.seed == 7);
	assert_true(cfg.duration_ns == 20000000);
	assert_int_equal(cfg.mtu, 2048);
	assert_int_equal(cfg.hosts, 8);
	assert_int_equal(cfg.planes, 2);

	const sim_plane_config *p0 = &cfg.plane[0], *p1 = &cfg.plane[1];

	assert_int_equal(p0->fabric, SIM_FABRIC_LEAFSPINE);
	assert_int_equal(p0->leaves, 2);
	assert_int_equal(p0->spines, 2);
	assert_int_equal(p1->fabric, SIM_FABRIC_SINGLE);
	/* link < fabric_link < planes[i].link */
	assert_true(p0->host_link.rate_bps == 100000000000ull);
	assert_true(p0->host_link.delay_ns == 2000);
	assert_true(p0->host_link.queue_bytes == 524288);
	assert_true(p0->host_link.ecn_bytes == 64000);
	assert_true(p0->host_link.loss == 0.01);
	assert_true(p0->fabric_link.rate_bps == 400000000000ull);
	assert_true(p0->fabric_link.loss == 0.01);
	assert_true(p1->host_link.rate_bps == 50000000000ull);
	assert_true(p1->fabric_link.rate_bps == 50000000000ull);
	assert_true(p1->host_link.loss == 0);
	assert_true(p1->host_link.delay_ns == 2000);

	assert_int_equal(cfg.ncables, 2);
	assert_int_equal(cfg.cables[0].plane, 1);
	assert_int_equal(cfg.cables[0].at.node.kind, SIM_NODE_HOST);
	assert_int_equal(cfg.cables[0].at.node.index, 3);
	assert_int_equal(cfg.cables[0].mask, SIM_LP_RATE);
	assert_int_equal(cfg.cables[0].line, 12);
	assert_int_equal(cfg.cables[1].at.node.kind, SIM_NODE_LEAF);
	assert_int_equal(cfg.cables[1].at.peer.kind, SIM_NODE_SPINE);
	assert_true(cfg.cables[1].at.port < 0);
	assert_true(cfg.cables[1].v.loss == 0.05);

	assert_int_equal(cfg.nflows, 4);
	assert_int_equal(cfg.flows[0].pattern, SIM_PAT_NONE);
	assert_int_equal(cfg.flows[0].dst, 5);
	assert_true(cfg.flows[0].bytes == 1048576);
	assert_true(cfg.flows[0].start_ns == 10000);
	assert_int_equal(cfg.flows[0].op, SIM_OP_SEND);
	assert_int_equal(cfg.flows[0].stream, 3);
	assert_int_equal(cfg.flows[0].plane, 1);
	assert_int_equal(cfg.flows[1].pattern, SIM_PAT_INCAST);
	assert_int_equal(cfg.flows[1].dst, 2);
	assert_int_equal(cfg.flows[1].senders, 3);
	assert_int_equal(cfg.flows[1].plane, -1);
	assert_int_equal(cfg.flows[1].op, SIM_OP_WRITE);
	assert_int_equal(sim_config_flow_count(&cfg), 1 + 3 + 8 + 56);

	assert_int_equal(cfg.nevents, 6);
	assert_int_equal(cfg.events[0].type, SIM_EVT_LINK_DOWN);
	assert_true(cfg.events[0].at_ns == 1000000);
	assert_int_equal(cfg.events[1].where.peer.kind, SIM_NODE_HOST);
	assert_int_equal(cfg.events[4].where.port, 0);
	assert_int_equal(cfg.events[5].type, SIM_EVT_STEER);
	assert_int_equal(cfg.events[5].action, SIM_STEER_DRAIN);
	assert_int_equal(cfg.events[5].host, 0);
	assert_int_equal(cfg.events[5].flow, 0);
	assert_int_equal(cfg.events[5].line, 25);
	assert_int_equal(cfg.nopts, 4);

	/* built: overrides land on both directions of the right cables, and
	 * the transport sees its own options only */
	sim *s = sim_from(&cfg, &sim_roce_ops);

	assert_true(link_named(s, "p1:host3->switch")->rate_bps == 25000000000ull);
	assert_true(link_named(s, "p1:switch->host3")->rate_bps == 25000000000ull);
	assert_true(link_named(s, "p1:host2->switch")->rate_bps == 50000000000ull);
	assert_true(link_named(s, "p0:leaf1->spine0")->loss == 0.05);
	assert_true(link_named(s, "p0:spine0->leaf1")->loss == 0.05);
	assert_true(link_named(s, "p0:leaf1->spine1")->loss == 0.01);
	assert_true(link_named(s, "p0:leaf0->spine0")->rate_bps == 400000000000ull);
	assert_string_equal(sim_opt_get(s, "rto"), "200us");
	assert_string_equal(sim_opt_get(s, "ack_every"), "8");
	assert_null(sim_opt_get(s, "paths_per_plane"));
	assert_int_equal(sim_flow_count(s), 68);
	assert_int_equal(sim_flow_get(s, 0)->stream, 3);
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_defaults(void **state)
{
	sim_config cfg;

	(void)state;
	cfg_from(&cfg, "hosts: 3\n");
	assert_true(cfg.seed == 1);
	assert_true(cfg.duration_ns == 1000000000ull);
	assert_int_equal(cfg.mtu, 4096);
	assert_int_equal(cfg.planes, 1);
	assert_int_equal(cfg.plane[0].fabric, SIM_FABRIC_SINGLE);
	assert_true(cfg.plane[0].host_link.rate_bps == 100000000000ull);
	assert_true(cfg.plane[0].host_link.delay_ns == 1000);
	assert_true(cfg.plane[0].host_link.queue_bytes == 1000000);
	assert_true(cfg.plane[0].host_link.ecn_bytes == 100000);
	assert_true(cfg.plane[0].host_link.loss == 0);
	assert_int_equal(cfg.nflows, 0);
	sim_config_free(&cfg);

	cfg_from(&cfg, "hosts: 3\nlink: {ecn_threshold: off}\nplanes: 3\n");
	assert_int_equal(cfg.planes, 3);
	assert_true(cfg.plane[2].host_link.ecn_bytes == SIM_NEVER);
	sim_config_free(&cfg);
}

static void expect_error(const char *yaml, const char *want)
{
	const char *err = cfg_error(yaml);

	if (!strstr(err, want))
		fail_msg("error message\n  %s\ndoes not contain\n  %s", err, want);
}

static void test_unknown_keys(void **state)
{
	(void)state;
	expect_error("hosts: 2\nfoo: 1\n", "test.yaml:2: unknown key 'foo'");
	expect_error("hosts: 2\nlink:\n  rate: 10Gbps\n  rat: 5\n", "test.yaml:4: link: unknown key 'rat'");
	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 1, size: 5}\n",
		     "test.yaml:3: flows[0]: unknown key 'size'");
	expect_error("hosts: 2\nevents:\n  - {at: 1us, type: plane_down, plane: 0, when: 2}\n",
		     "test.yaml:3: events[0]: unknown key 'when'");
	expect_error("hosts: 2\nplanes:\n  - {}\n  - {fabrik: {}}\n",
		     "test.yaml:4: planes[1]: unknown key 'fabrik'");
	expect_error("hosts: 2\nhosts: 3\n", "test.yaml:2: duplicate key 'hosts'");
}

static void test_bad_values(void **state)
{
	(void)state;
	expect_error("hosts: 2\nlink: {rate: abc}\n",
		     "test.yaml:2: link.rate: 'abc' is not a rate (e.g. 100Gbps)");
	expect_error("hosts: 2\n\nhost_link:\n  delay: 5\n", "test.yaml:4: host_link.delay: '5' is not a time");
	expect_error("hosts: 2\nlink: {loss: 2}\n", "test.yaml:2: link.loss: '2' is not a probability");
	expect_error("hosts: 2\nlink: {queue: 1000}\n",
		     "test.yaml:2: link.queue: 1000 bytes cannot hold one packet");
	expect_error("hosts: 1\n", "test.yaml:1: hosts: 1 is out of range (2-65535)");
	expect_error("hosts: two\n", "test.yaml:1: hosts: 'two' is not a whole number");
	expect_error("hosts: 2\nmtu: 100000\n", "test.yaml:2: mtu: 100000 is out of range (256-9000)");
	expect_error("hosts: 2\nplanes: {a: 1}\n", "test.yaml:2: planes: expected a list");
	expect_error("hosts: 2\nflows: {src: 0}\n", "test.yaml:2: flows: expected a list");
	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 1, op: read}\n",
		     "test.yaml:3: flows[0].op: 'read' is not one of write, write_imm, send");
	expect_error("hosts: [2\n", "YAML error");
	expect_error("", "test.yaml: the scenario is empty");
}

/* repeat / every: the entry n times, each start every later than the one
 * before, in place (the flows after it keep their order); a pattern
 * repeats whole. */
static void test_repeat(void **state)
{
	sim_config cfg;

	(void)state;
	cfg_from(&cfg, "hosts: 4\nflows:\n"
		       "  - {src: 1, dst: 0, bytes: 1MB}\n"
		       "  - {src: 2, dst: 0, bytes: 4KB, start: 5us, repeat: 3, every: 50us}\n"
		       "  - {pattern: incast, receiver: 3, senders: 2, repeat: 2, every: 1ms}\n"
		       "  - {src: 0, dst: 1, repeat: 1}\n");
	assert_int_equal(cfg.nflows, 7);
	assert_int_equal(cfg.flows[0].src, 1);
	for (unsigned k = 0; k < 3; k++) {
		assert_int_equal(cfg.flows[1 + k].src, 2);
		assert_true(cfg.flows[1 + k].bytes == 4000);
		assert_true(cfg.flows[1 + k].start_ns == 5000 + 50000 * k);
	}
	assert_int_equal(cfg.flows[4].pattern, SIM_PAT_INCAST);
	assert_true(cfg.flows[4].start_ns == 0);
	assert_true(cfg.flows[5].start_ns == 1000000);
	assert_int_equal(cfg.flows[5].dst, 3);
	assert_int_equal(cfg.flows[6].src, 0);
	assert_true(sim_config_flow_count(&cfg) == 1 + 3 + 2 * 2 + 1);
	sim_config_free(&cfg);

	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 1, repeat: 3}\n",
		     "test.yaml:3: flows[0]: repeat needs every (the time between starts)");
	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 1, every: 1us}\n",
		     "test.yaml:3: flows[0]: every needs repeat (2 or more)");
	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 1, repeat: 2, every: 0}\n",
		     "flows[0].every: must be longer than 0");
	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 1, repeat: 0, every: 1us}\n",
		     "flows[0].repeat: 0 is out of range (1-100000)");
	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 1, repeat: 100001, every: 1us}\n",
		     "flows[0].repeat: 100001 is out of range (1-100000)");
}

static void test_bad_references(void **state)
{
	(void)state;
	expect_error("hosts: 2\nflows:\n  - {src: 0, dst: 5, bytes: 1KB}\n",
		     "test.yaml:3: flows[0]: host 5 does not exist (hosts: 2)");
	expect_error("hosts: 2\nflows:\n  - {src: 1, dst: 1}\n",
		     "test.yaml:3: flows[0]: src and dst are both host 1");
	expect_error("hosts: 2\nflows:\n  - {dst: 1}\n", "test.yaml:3: flows[0]: a flow needs src and dst");
	expect_error("hosts: 4\nflows:\n  - {pattern: incast, receiver: 0, senders: 4}\n",
		     "test.yaml:3: flows[0].senders: 4 is more than the other hosts (3)");
	expect_error("hosts: 4\nflows:\n  - {pattern: permutation, src: 1}\n",
		     "test.yaml:3: flows[0]: a permutation takes no src");
	expect_error("hosts: 4\nfabric: {type: leafspine, leaves: 2}\n",
		     "test.yaml:2: fabric: a leaf-spine fabric needs leaves and spines");
	expect_error("hosts: 9\nfabric: {type: leafspine, leaves: 2, spines: 1, hosts_per_leaf: 4}\n",
		     "test.yaml:2: plane 0: 2 leaves x 4 hosts_per_leaf cannot hold 9 hosts");
	expect_error("hosts: 4\nfabric: {leaves: 2, spines: 2}\n",
		     "test.yaml:2: fabric: leaves, spines and hosts_per_leaf need type: leafspine");
	expect_error("hosts: 4\nfabric: {type: leafspine, leaves: 2, spines: 2}\n"
		     "events:\n  - {at: 1ms, type: blackhole, switch: spine1, port: 2}\n",
		     "test.yaml:4: events[0]: port 2 of spine1 is out of range (0-1)");
	expect_error("hosts: 4\nevents:\n  - {at: 1ms, type: link_down, switch: leaf0, port: 1}\n",
		     "test.yaml:3: events[0]: plane 0 has a single switch: it has no 'leaf0'");
	expect_error("hosts: 4\nfabric: {type: leafspine, leaves: 2, spines: 2}\n"
		     "events:\n  - {at: 1ms, type: link_down, switch: leaf0, port: host3}\n",
		     "test.yaml:4: events[0]: leaf0 has no port facing host3 in plane 0");
	expect_error("hosts: 4\nplanes: 2\nevents:\n  - {at: 1ms, type: link_down, host: 1}\n",
		     "test.yaml:4: events[0]: link_down needs a plane (there are 2)");
	expect_error("hosts: 4\nevents:\n  - {at: 1ms, type: link_down}\n",
		     "test.yaml:3: events[0]: needs host, or switch and port");
	expect_error("hosts: 4\nevents:\n  - {at: 1ms, type: steer, host: 9}\n",
		     "test.yaml:3: events[0].host: steer needs an existing host (0-3)");
	expect_error("hosts: 4\nlinks:\n  - {host: 1}\n", "test.yaml:3: links[0]: sets nothing");
	expect_error("hosts: 4\nlinks:\n  - {plane: 3, host: 1, rate: 1Gbps}\n",
		     "test.yaml:3: links[0].plane: 3 is out of range (0-0)");
	expect_error("hosts: 8\nflows:\n  - {pattern: all_to_all, bytes: 1GB}\n",
		     "flows: need 112.00 GB of buffers");
	expect_error("hosts: 2\nplanes: 1\ntransport:\n  tcp: {cwnd: 10}\n",
		     "test.yaml:4: transport: unknown transport 'tcp' (known: roce, roce-pfc, metaroce)");
	expect_error("hosts: 2\ntransport:\n  roce: {pathz: 3}\n",
		     "test.yaml:3: transport.roce: unknown key 'pathz'");
}

/* A transport option's value is checked by the transport, with its line. */
static void test_bad_transport_option(void **state)
{
	sim_config cfg;
	sim *s = NULL;
	char err[256] = "";

	(void)state;
	cfg_from(&cfg, "hosts: 2\ntransport:\n  roce:\n    rto: soon\n");
	assert_int_not_equal(sim_new(&cfg, &sim_roce_ops, &s, err, sizeof(err)), 0);
	assert_null(s);
	assert_non_null(strstr(err, "test.yaml:4: transport.roce.rto: 'soon' is not a time"));
	sim_config_free(&cfg);
}

/* Every scenario shipped in sim/scenarios/ loads and builds. */
static void test_shipped_scenarios(void **state)
{
	const char *dir = getenv("SIM_SCENARIOS");
	DIR *d;
	struct dirent *e;
	int n = 0;

	(void)state;
	if (!dir)
		skip();
	d = opendir(dir);
	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		char path[1024], err[512];
		sim_config cfg;
		sim *s;

		if (len < 5 || strcmp(e->d_name + len - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (sim_scenario_load(path, &cfg, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		if (sim_new(&cfg, &sim_roce_ops, &s, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		assert_true(sim_flow_count(s) > 0);
		sim_del(s);
		sim_config_free(&cfg);
		n++;
	}
	closedir(d);
	assert_true(n >= 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_repeat),
		cmocka_unit_test(test_bad_references),
		cmocka_unit_test(test_bad_transport_option),
		cmocka_unit_test(test_shipped_scenarios),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
