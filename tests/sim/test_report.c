/*
 * Results: Jain's index and percentiles, the summary derived from the
 * flows, and both renderings carrying the documented fields.
 */
#include <math.h>

#include "report.h"
#include "roce.h"
#include "sim_test.h"

static void test_jain(void **state)
{
	static const double equal[] = {5, 5, 5, 5}, one[] = {1, 0, 0, 0}, ramp[] = {1, 2, 3};

	(void)state;
	assert_true(fabs(sim_jain(equal, 4) - 1) < 1e-12);
	assert_true(fabs(sim_jain(one, 4) - 0.25) < 1e-12);
	assert_true(fabs(sim_jain(ramp, 3) - 36.0 / 42.0) < 1e-12);
	assert_true(sim_jain(NULL, 0) == 1);
}

static void test_percentile(void **state)
{
	uint64_t v[100], one = 42;

	(void)state;
	for (int i = 0; i < 100; i++)
		v[i] = (uint64_t)((i * 37) % 100) + 1; /* 1..100, shuffled */
	assert_int_equal(sim_percentile(v, 100, 0.99), 99);
	assert_int_equal(sim_percentile(v, 100, 0.5), 50);
	assert_int_equal(sim_percentile(v, 100, 1.0), 100);
	assert_int_equal(sim_percentile(v, 3, 0.99), v[2]);
	assert_int_equal(sim_percentile(&one, 1, 0.99), 42);
	assert_int_equal(sim_percentile(NULL, 0, 0.99), 0);
}

static const char *const three = "hosts: 4\n"
				 "flows:\n"
				 "  - {src: 0, dst: 1, bytes: 1MB}\n"
				 "  - {src: 2, dst: 1, bytes: 500KB, start: 10us}\n"
				 "  - {src: 3, dst: 0, bytes: 2MB, start: 5us}\n";

static void collect(sim_config *cfg, sim_result *r)
{
	sim *s;

	cfg_from(cfg, three);
	s = sim_from(cfg, &sim_roce_ops);
	assert_int_equal(sim_result_collect(s, sim_run(s, SIM_NEVER), r), 0);
	sim_del(s);
}

static void test_summary(void **state)
{
	sim_config cfg;
	sim_result r;
	uint64_t last = 0, bytes = 0;
	double mean = 0;

	(void)state;
	collect(&cfg, &r);
	assert_string_equal(r.transport, "roce");
	assert_int_equal(r.run_status, SIM_RUN_DONE);
	assert_int_equal(r.nflows, 3);
	assert_int_equal(r.finished, 3);
	assert_int_equal(r.unfinished + r.failed + r.violations + r.verify_failures, 0);
	assert_true(sim_result_ok(&r));
	for (size_t i = 0; i < 3; i++) {
		const sim_flow_result *f = &r.flows[i];

		assert_true(f->verified);
		assert_true(f->fct_ns == f->finish_ns - f->start_ns);
		assert_true(fabs(f->goodput_bps - (double)f->bytes * 8e9 / (double)f->fct_ns) < 1);
		if (f->finish_ns > last)
			last = f->finish_ns;
		bytes += f->bytes;
		mean += (double)f->fct_ns / 3;
	}
	assert_true(fabs(r.agg_goodput_bps - (double)bytes * 8e9 / (double)last) < 1);
	assert_true(fabs(r.mean_fct_ns - mean) < 1e-6 * mean);
	assert_int_equal(r.p99_fct_ns, r.max_fct_ns); /* nearest rank of 3 */
	assert_true(r.jain > 0.3 && r.jain <= 1);
	assert_true(r.max_queue_bytes > 0);
	assert_true(r.max_queue_link[0] != '\0');
	assert_true(r.events > 0);
	assert_true(r.sim_time_ns == last);
	assert_true(r.nlinks >= 6);
	sim_result_free(&r);
	sim_config_free(&cfg);
}

static void test_json_fields(void **state)
{
	static const char *const top[] = {"scenario", "seed", "hosts", "planes", "runs", "comparison"};
	static const char *const run_keys[] = {"transport", "status", "summary", "flows", "links",
					       "violations"};
	static const char *const sum_keys[] = {
		"aggregate_goodput_bps", "mean_fct_ns", "p99_fct_ns", "max_fct_ns", "jain_index",
		"max_queue_bytes", "max_queue_link", "drops", "ce_marks", "retransmissions",
		"spurious_retransmissions", "finished_flows", "unfinished_flows", "failed_flows",
		"invariant_violations", "verification_failures", "events", "sim_time_ns",
		"events_per_second", "nic_drops"};
	static const char *const flow_keys[] = {
		"id", "src", "dst", "bytes", "op", "stream", "plane", "start_ns", "finish_ns", "fct_ns",
		"goodput_bps", "retransmissions", "spurious_retransmissions", "status", "verified"};
	static const char *const link_keys[] = {"name", "plane", "max_queue_bytes", "tx_bytes",
						"tx_packets", "ce_marks", "drops"};
	static const char *const drop_keys[] = {"overflow", "loss", "down", "blackhole", "noroute",
						"total"};
	sim_config cfg;
	sim_result r[2];
	json_t *doc;

	(void)state;
	collect(&cfg, &r[0]);
	r[1] = r[0];
	snprintf(r[1].transport, sizeof(r[1].transport), "other");
	doc = sim_report_json(&cfg, r, 2);
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		assert_non_null(json_object_get(doc, top[i]));

	json_t *run = json_array_get(json_object_get(doc, "runs"), 0);
	json_t *sum = json_object_get(run, "summary");
	json_t *flow = json_array_get(json_object_get(run, "flows"), 0);
	json_t *link = json_array_get(json_object_get(run, "links"), 0);

	for (size_t i = 0; i < sizeof(run_keys) / sizeof(run_keys[0]); i++)
		assert_non_null(json_object_get(run, run_keys[i]));
	for (size_t i = 0; i < sizeof(sum_keys) / sizeof(sum_keys[0]); i++)
		assert_non_null(json_object_get(sum, sum_keys[i]));
	for (size_t i = 0; i < sizeof(flow_keys) / sizeof(flow_keys[0]); i++)
		assert_non_null(json_object_get(flow, flow_keys[i]));
	for (size_t i = 0; i < sizeof(link_keys) / sizeof(link_keys[0]); i++)
		assert_non_null(json_object_get(link, link_keys[i]));
	for (size_t i = 0; i < sizeof(drop_keys) / sizeof(drop_keys[0]); i++)
		assert_non_null(json_object_get(json_object_get(sum, "drops"), drop_keys[i]));
	assert_int_equal(json_array_size(json_object_get(run, "flows")), 3);
	assert_string_equal(json_string_value(json_object_get(flow, "status")), "ok");
	assert_true(json_is_true(json_object_get(flow, "verified")));
	assert_true(json_real_value(json_object_get(json_object_get(doc, "comparison"), "goodput_ratio")) ==
		    1.0);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(doc, "runs"), 1), "transport")),
			    "other");
	json_decref(doc);

	/* one run: no comparison */
	doc = sim_report_json(&cfg, r, 1);
	assert_null(json_object_get(doc, "comparison"));
	json_decref(doc);
	sim_result_free(&r[0]);
	sim_config_free(&cfg);
}

static void test_text(void **state)
{
	sim_config cfg;
	sim_result r;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	collect(&cfg, &r);
	sim_report_text(f, &cfg, &r, 1);
	fclose(f);
	assert_non_null(strstr(buf, "aggregate goodput"));
	assert_non_null(strstr(buf, "jain fairness"));
	assert_non_null(strstr(buf, "invariant violations"));
	assert_non_null(strstr(buf, "links by max queue"));
	assert_non_null(strstr(buf, " ok "));
	free(buf);

	/* two runs side by side, with their ratio */
	sim_result two[2] = {r, r};

	snprintf(two[1].transport, sizeof(two[1].transport), "other");
	two[1].agg_goodput_bps = r.agg_goodput_bps * 2;
	f = open_memstream(&buf, &len);
	sim_report_text(f, &cfg, two, 2);
	fclose(f);
	assert_non_null(strstr(buf, "other/roce"));
	assert_non_null(strstr(buf, "2.000"));
	assert_non_null(strstr(buf, "other: links by max queue"));
	free(buf);
	sim_result_free(&r);
	sim_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jain),
		cmocka_unit_test(test_percentile),
		cmocka_unit_test(test_summary),
		cmocka_unit_test(test_json_fields),
		cmocka_unit_test(test_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
