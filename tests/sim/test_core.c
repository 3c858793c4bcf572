/*
 * The framework around a transport: one deadline per host with exactly one
 * on_timer per expiry, the check hook's failures counted as violations, a
 * flow completed twice counted, flows started at their time on both ends,
 * memory verification catching a wrong byte, and the packet pool.
 */
#include "sim_test.h"

/* A fake transport: "delivers" a flow by copying its memory (optionally a
 * wrong byte) after flow id + 1 microseconds, and records timer calls. */
enum { MODE_OK, MODE_CORRUPT, MODE_TWICE, MODE_BADCHECK };

typedef struct oracle_host {
	sim *s;
	sim_host *h;
	int mode;
	sim_flow *pending[16];
	uint64_t due[16];
	unsigned npending;
	uint64_t fired[16];
	unsigned nfired;
	unsigned accepted;
	uint64_t accept_ns;
} oracle_host;

static void *oracle_host_new(sim *s, sim_host *h)
{
	oracle_host *o = calloc(1, sizeof(*o));
	const char *mode = sim_opt_get(s, "mode");

	o->s = s;
	o->h = h;
	if (mode && strcmp(mode, "corrupt") == 0)
		o->mode = MODE_CORRUPT;
	else if (mode && strcmp(mode, "twice") == 0)
		o->mode = MODE_TWICE;
	else if (mode && strcmp(mode, "badcheck") == 0)
		o->mode = MODE_BADCHECK;
	else if (mode && strcmp(mode, "refuse") == 0) {
		sim_set_error(s, "oracle: refusing host %u", h->id);
		free(o);
		return NULL;
	}
	return o;
}

static void oracle_host_del(void *hs)
{
	free(hs);
}

static void oracle_arm(oracle_host *o)
{
	uint64_t d = SIM_NEVER;

	for (unsigned i = 0; i < o->npending; i++)
		if (o->due[i] < d)
			d = o->due[i];
	sim_set_deadline(o->s, o->h, d);
}

static int oracle_flow_accept(void *hs, sim_flow *f, uint64_t now)
{
	oracle_host *o = hs;

	assert_int_equal(f->dst, o->h->id);
	o->accepted++;
	o->accept_ns = now;
	return 0;
}

static int oracle_flow_start(void *hs, sim_flow *f, uint64_t now)
{
	oracle_host *o = hs;

	assert_int_equal(f->src, o->h->id);
	assert_true(now == f->start_ns);
	assert_true(o->npending < 16);
	o->pending[o->npending] = f;
	o->due[o->npending++] = now + 1000 * (f->id + 1);
	oracle_arm(o);
	return 0;
}

static void oracle_on_timer(void *hs, uint64_t now)
{
	oracle_host *o = hs;

	if (o->nfired < 16)
		o->fired[o->nfired++] = now;
	for (unsigned i = 0; i < o->npending;) {
		if (o->due[i] > now) {
			i++;
			continue;
		}

		sim_flow *f = o->pending[i];

		memcpy(f->dst_buf, f->src_buf, f->bytes);
		if (o->mode == MODE_CORRUPT && f->id == 0)
			f->dst_buf[f->bytes / 2] ^= 1;
		sim_flow_done(o->s, f, now, 0);
		if (o->mode == MODE_TWICE)
			sim_flow_done(o->s, f, now, 0);
		o->pending[i] = o->pending[--o->npending];
		o->due[i] = o->due[o->npending];
	}
	oracle_arm(o);
}

static void oracle_on_packet(void *hs, unsigned plane, sim_pkt *p, uint64_t now)
{
	oracle_host *o = hs;

	(void)plane;
	(void)now;
	sim_pkt_free(o->s, p);
}

static int oracle_check(void *hs, char *err, size_t errlen)
{
	oracle_host *o = hs;

	if (o->mode == MODE_BADCHECK && o->nfired > 0) {
		snprintf(err, errlen, "made-up violation");
		return 1;
	}
	return 0;
}

static const sim_transport_ops oracle_ops = {
	.name = "oracle",
	.host_new = oracle_host_new,
	.host_del = oracle_host_del,
	.flow_accept = oracle_flow_accept,
	.flow_start = oracle_flow_start,
	.on_packet = oracle_on_packet,
	.on_timer = oracle_on_timer,
	.check = oracle_check,
};

static const char *const three_flows = "hosts: 3\n"
				       "flows:\n"
				       "  - {src: 0, dst: 1, bytes: 10000, start: 5us}\n"
				       "  - {src: 1, dst: 2, bytes: 1, start: 0}\n"
				       "  - {src: 2, dst: 0, bytes: 12345, start: 7us}\n";

static sim *oracle_sim(sim_config *cfg, const char *mode)
{
	cfg_from(cfg, three_flows);
	if (mode)
		assert_int_equal(sim_config_add_opt(cfg, "oracle", "mode", mode, 0), 0);
	return sim_from(cfg, &oracle_ops);
}

static void test_flows_run_and_verify(void **state)
{
	sim_config cfg;
	sim *s = oracle_sim(&cfg, NULL);

	(void)state;
	/* buffers: src holds a pattern that depends on the flow, dst is zero */
	sim_flow *f0 = sim_flow_get(s, 0), *f2 = sim_flow_get(s, 2);

	assert_int_equal(f0->dst_buf[0] | f0->dst_buf[9999], 0);
	assert_memory_not_equal(f0->src_buf, f2->src_buf, 64);
	assert_true(f0->finish_ns == SIM_NEVER);

	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_DONE);
	assert_true(f0->finish_ns == 5000 + 1000);
	assert_true(sim_flow_get(s, 1)->finish_ns == 2000);
	assert_true(f2->finish_ns == 7000 + 3000);
	assert_true(sim_now(s) == 10000);
	assert_int_equal(((oracle_host *)sim_host_get(s, 1)->ts)->accepted, 1);
	assert_true(((oracle_host *)sim_host_get(s, 1)->ts)->accept_ns == 5000);
	assert_int_equal(sim_verify(s), 0);
	for (size_t i = 0; i < 3; i++)
		assert_true(sim_flow_get(s, i)->verified);
	assert_int_equal(sim_get_stats(s)->violations, 0);
	assert_true(sim_get_stats(s)->checks >= 6);
	assert_int_equal(sim_get_stats(s)->flows_done, 3);
	sim_del(s);
	sim_config_free(&cfg);
}

/* sim_new() keeps its own copy of the configuration: the caller's may be
 * freed (and its memory reused) at once, and the run is unchanged. */
static void test_config_is_copied(void **state)
{
	sim_config cfg, *heap = malloc(sizeof(*heap));
	sim *ref = oracle_sim(&cfg, NULL);

	(void)state;
	assert_non_null(heap);
	cfg_from(heap, three_flows);
	assert_int_equal(sim_config_add_opt(heap, "oracle", "mode", "normal", 7), 0);

	sim *s = sim_from(heap, &oracle_ops);
	const sim_config *own = sim_get_config(s);

	assert_ptr_not_equal(own, heap);
	sim_config_free(heap);
	memset(heap, 0xa5, sizeof(*heap)); /* a dangling pointer now reads garbage */
	free(heap);
	assert_int_equal(own->nflows, 3);
	assert_int_equal(own->hosts, 3);
	assert_string_equal(sim_opt_get(s, "mode"), "normal");
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_DONE);
	assert_int_equal(sim_run(ref, SIM_NEVER), SIM_RUN_DONE);
	assert_int_equal(sim_verify(s), 0);
	for (size_t i = 0; i < 3; i++)
		assert_true(sim_flow_get(s, i)->finish_ns == sim_flow_get(ref, i)->finish_ns);

	/* a copy is independent of its source, and sim_config_add_*() still
	 * work on it (the arrays have room to grow) */
	sim_config c2;
	assert_int_equal(sim_config_copy(&c2, own), 0);
	sim_flow_config fc;
	sim_flow_config_init(&fc);
	fc.src = 0;
	fc.dst = 2;
	for (int i = 0; i < 20; i++)
		assert_int_equal(sim_config_add_flow(&c2, &fc), 0);
	assert_int_equal(c2.nflows, 23);
	assert_int_equal(own->nflows, 3);
	assert_string_equal(c2.opts[0].value, "normal");
	assert_ptr_not_equal(c2.opts[0].value, own->opts[0].value);
	sim_config_free(&c2);
	sim_del(s);
	sim_del(ref);
	sim_config_free(&cfg);
}

static void test_verify_catches_corruption(void **state)
{
	sim_config cfg;
	sim *s = oracle_sim(&cfg, "corrupt");

	(void)state;
	sim_run(s, SIM_NEVER);
	assert_int_equal(sim_verify(s), 1);
	assert_false(sim_flow_get(s, 0)->verified);
	assert_true(sim_flow_get(s, 1)->verified);
	assert_int_equal(sim_get_stats(s)->verify_failures, 1);
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_done_twice_is_a_violation(void **state)
{
	sim_config cfg;
	sim *s = oracle_sim(&cfg, "twice");

	(void)state;
	sim_run(s, SIM_NEVER);
	assert_int_equal(sim_get_stats(s)->violations, 3);
	assert_int_equal(sim_get_stats(s)->flows_done, 3);
	assert_non_null(strstr(sim_get_stats(s)->msgs[0], "completed twice"));
	sim_del(s);
	sim_config_free(&cfg);
}

/* The check hook runs after every event that touched a host. */
static void test_check_hook_counts(void **state)
{
	sim_config cfg;
	sim *s = oracle_sim(&cfg, "badcheck");

	(void)state;
	sim_run(s, SIM_NEVER);
	/* a host fails its check once its timer has fired: after the three
	 * timer events, and after host 1 accepts flow 0 at 5 us (its timer
	 * fired at 2 us) and host 0 accepts flow 2 at 7 us (fired at 6 us) */
	assert_int_equal(sim_get_stats(s)->violations, 5);
	assert_non_null(strstr(sim_get_stats(s)->msgs[0], "made-up violation"));
	assert_non_null(strstr(sim_get_stats(s)->msgs[0], "host1"));
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_host_new_failure(void **state)
{
	sim_config cfg;
	sim *s = NULL;
	char err[128];

	(void)state;
	cfg_from(&cfg, three_flows);
	assert_int_equal(sim_config_add_opt(&cfg, "oracle", "mode", "refuse", 0), 0);
	assert_int_not_equal(sim_new(&cfg, &oracle_ops, &s, err, sizeof(err)), 0);
	assert_null(s);
	assert_string_equal(err, "oracle: refusing host 0");
	sim_config_free(&cfg);
}

/* One deadline per host: a later call replaces it, on_timer runs once per
 * expiry, SIM_NEVER cancels, and a past deadline fires now. */
static void test_deadline(void **state)
{
	sim_config cfg;
	sim *s;
	oracle_host *o;
	sim_host *h;

	(void)state;
	cfg_from(&cfg, "hosts: 2\n");
	s = sim_from(&cfg, &oracle_ops);
	h = sim_host_get(s, 0);
	o = h->ts;

	sim_set_deadline(s, h, 100);
	sim_set_deadline(s, h, 50); /* earlier: replaces */
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_IDLE);
	assert_int_equal(o->nfired, 1);
	assert_true(o->fired[0] == 50);

	sim_set_deadline(s, h, 200);
	sim_set_deadline(s, h, 300); /* later: replaces too */
	sim_run(s, SIM_NEVER);
	assert_int_equal(o->nfired, 2);
	assert_true(o->fired[1] == 300);

	sim_set_deadline(s, h, 400);
	sim_set_deadline(s, h, SIM_NEVER); /* cancelled */
	sim_run(s, SIM_NEVER);
	assert_int_equal(o->nfired, 2);

	sim_set_deadline(s, h, 10); /* in the past: now */
	sim_run(s, SIM_NEVER);
	assert_int_equal(o->nfired, 3);
	assert_true(o->fired[2] == 400); /* the clock stood at the last event */

	/* sim_run(until) stops before later events and resumes */
	sim_set_deadline(s, h, 1000);
	assert_int_equal(sim_run(s, 999), SIM_RUN_LIMIT);
	assert_true(sim_now(s) == 999);
	assert_int_equal(o->nfired, 3);
	assert_int_equal(sim_run(s, 1000), SIM_RUN_IDLE);
	assert_int_equal(o->nfired, 4);
	sim_del(s);
	sim_config_free(&cfg);
}

/* The scenario's duration bounds a run. */
static void test_duration_limit(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 3\nduration: 6500ns\n"
		       "flows:\n  - {src: 0, dst: 1, bytes: 10, start: 5us}\n"
		       "  - {src: 1, dst: 0, bytes: 10, start: 6us}\n");
	s = sim_from(&cfg, &oracle_ops);
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_LIMIT);
	assert_true(sim_flow_get(s, 0)->done);
	assert_false(sim_flow_get(s, 1)->done);
	sim_del(s);
	sim_config_free(&cfg);
}

/* Packets come from pools, with the data size asked for, and are reused. */
static void test_packet_pool(void **state)
{
	sim_config cfg;
	sim *s;
	sim_pkt *p[200];

	(void)state;
	cfg_from(&cfg, "hosts: 2\n");
	s = sim_from(&cfg, &oracle_ops);
	assert_null(sim_pkt_new(s, SIM_PKT_MAX + 1));
	for (int i = 0; i < 200; i++) {
		p[i] = sim_pkt_new(s, i % 2 ? 100 : 9000);
		assert_non_null(p[i]);
		assert_true(p[i]->cap >= (i % 2 ? 100u : 9000u));
		assert_int_equal(p[i]->len | p[i]->datalen | p[i]->ecn, 0);
		memset(p[i]->data, 0xab, p[i]->cap);
	}
	assert_int_equal(sim_get_stats(s)->pkts_live, 200);
	sim_pkt *last = p[199];

	for (int i = 0; i < 200; i++)
		sim_pkt_free(s, p[i]);
	assert_int_equal(sim_get_stats(s)->pkts_live, 0);
	assert_ptr_equal(sim_pkt_new(s, 10), last); /* LIFO reuse, no malloc */

	/* a 4 KB-MTU data packet takes a mid-size buffer, not the largest */
	sim_pkt *mid = sim_pkt_new(s, 4096 + 72);

	assert_int_equal(mid->cap, SIM_PKT_MID);
	assert_int_equal(sim_pkt_new(s, SIM_PKT_MID + 1)->cap, SIM_PKT_MAX);
	assert_int_equal(sim_pkt_new(s, SIM_PKT_SMALL)->cap, SIM_PKT_SMALL);
	sim_pkt_free(s, mid);
	assert_int_equal(sim_get_stats(s)->pkts_live, 3);

	/* sim_send fills the source address and the wire length */
	sim_pkt *q = sim_pkt_new(s, 10);

	q->datalen = 10;
	q->dst_addr = sim_host_addr(s, sim_host_get(s, 1), 0);
	assert_int_equal(sim_send(s, sim_host_get(s, 0), 0, q), 0);
	assert_int_equal(link_named(s, "p0:host0->switch")->qbytes, 10 + SIM_WIRE_OVERHEAD);
	assert_int_equal(sim_send(s, sim_host_get(s, 0), 5, sim_pkt_new(s, 10)), MRP_ERR_INVAL);
	sim_run(s, SIM_NEVER);
	assert_int_equal(sim_get_stats(s)->pkts_live, 3); /* the LIFO check's and two sizes' */
	sim_del(s);
	sim_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flows_run_and_verify),
		cmocka_unit_test(test_config_is_copied),
		cmocka_unit_test(test_verify_catches_corruption),
		cmocka_unit_test(test_done_twice_is_a_violation),
		cmocka_unit_test(test_check_hook_counts),
		cmocka_unit_test(test_host_new_failure),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_duration_limit),
		cmocka_unit_test(test_packet_pool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
