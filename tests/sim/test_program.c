/*
 * The metaroce-sim program: runs the shipped scenarios, prints one JSON
 * document with the documented fields, identical across runs of the same
 * seed except events_per_second, and exits 0 / 1 / 2 as documented.
 *
 * usage: test_program METAROCE_SIM SCENARIO_DIR TEST_DATA_DIR
 */
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "sim_test.h"
#include "transport.h"

static const char *prog, *scenarios, *data;

/* Runs prog with args; its stdout (and stderr if merge) in *out (free it).
 * Returns the exit status, or -1 if it did not exit normally. */
static int run(const char *const *args, int merge, char **out)
{
	int fd[2];
	pid_t pid;
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int status;

	assert_non_null(buf);
	assert_int_equal(pipe(fd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		const char *argv[16];
		size_t n = 0;

		argv[n++] = prog;
		for (; args[n - 1] && n < 15; n++)
			argv[n] = args[n - 1];
		argv[n] = NULL;
		dup2(fd[1], 1);
		if (merge)
			dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		execv(prog, (char *const *)argv);
		_exit(127);
	}
	close(fd[1]);
	for (;;) {
		if (len + 4096 > cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}

		ssize_t k = read(fd[0], buf + len, cap - len - 1);

		if (k <= 0)
			break;
		len += (size_t)k;
	}
	buf[len] = '\0';
	close(fd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	*out = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *doc = json_loads(text, 0, &e);

	if (!doc)
		fail_msg("output is not JSON (line %d: %s):\n%s", e.line, e.text, text);
	return doc;
}

static json_t *run_json(const char *scenario, const char *extra1, const char *extra2, int want_exit)
{
	const char *args[] = {"--json", scenario, extra1, extra2, NULL};
	char *out;
	int rc = run(args, 0, &out);

	if (rc != want_exit)
		fail_msg("metaroce-sim %s: exit %d, expected %d", scenario, rc, want_exit);

	json_t *doc = parse(out);

	free(out);
	return doc;
}

static void path_of(char *buf, size_t len, const char *dir, const char *file)
{
	snprintf(buf, len, "%s/%s", dir, file);
}

static void test_basic_json(void **state)
{
	static const char *const top[] = {"scenario", "seed", "hosts", "planes", "runs"};
	char path[1024];
	json_t *doc, *run0, *sum;

	(void)state;
	path_of(path, sizeof(path), scenarios, "basic.yaml");
	doc = run_json(path, "--transport", "roce", 0);
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		assert_non_null(json_object_get(doc, top[i]));
	assert_string_equal(json_string_value(json_object_get(doc, "scenario")), path);
	assert_int_equal(json_array_size(json_object_get(doc, "runs")), 1);
	run0 = json_array_get(json_object_get(doc, "runs"), 0);
	assert_string_equal(json_string_value(json_object_get(run0, "transport")), "roce");
	assert_string_equal(json_string_value(json_object_get(run0, "status")), "done");
	sum = json_object_get(run0, "summary");
	assert_int_equal(json_integer_value(json_object_get(sum, "invariant_violations")), 0);
	assert_int_equal(json_integer_value(json_object_get(sum, "verification_failures")), 0);
	assert_int_equal(json_integer_value(json_object_get(sum, "unfinished_flows")), 0);
	assert_true(json_real_value(json_object_get(sum, "aggregate_goodput_bps")) > 80e9);
	assert_true(json_real_value(json_object_get(sum, "events_per_second")) > 0);
	json_t *flow = json_array_get(json_object_get(run0, "flows"), 0);

	assert_string_equal(json_string_value(json_object_get(flow, "status")), "ok");
	json_decref(doc);
}

/* Same scenario, same seed: the same document but for events_per_second. */
static void test_deterministic_output(void **state)
{
	char path[1024];
	json_t *a, *b;

	(void)state;
	path_of(path, sizeof(path), scenarios, "loss.yaml");
	a = run_json(path, "--seed", "5", 0);
	b = run_json(path, "--seed", "5", 0);
	assert_int_equal(json_integer_value(json_object_get(a, "seed")), 5);
	for (size_t i = 0; i < json_array_size(json_object_get(a, "runs")); i++) {
		json_object_del(json_object_get(json_array_get(json_object_get(a, "runs"), i), "summary"),
				"events_per_second");
		json_object_del(json_object_get(json_array_get(json_object_get(b, "runs"), i), "summary"),
				"events_per_second");
	}
	assert_true(json_equal(a, b));

	/* another seed: another loss pattern */
	json_decref(b);
	b = run_json(path, "--seed", "6", 0);
	json_object_del(json_object_get(json_array_get(json_object_get(b, "runs"), 0), "summary"),
			"events_per_second");
	assert_false(json_equal(a, b));
	json_decref(a);
	json_decref(b);
}

/* Every shipped scenario runs clean under the baseline. */
static void test_shipped_scenarios(void **state)
{
	DIR *d = opendir(scenarios);
	struct dirent *e;
	int n = 0;

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		char path[1024];

		if (len < 5 || strcmp(e->d_name + len - 5, ".yaml") != 0)
			continue;
		path_of(path, sizeof(path), scenarios, e->d_name);

		json_t *doc = run_json(path, "--transport", "roce", 0);
		json_t *sum = json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "summary");

		assert_int_equal(json_integer_value(json_object_get(sum, "invariant_violations")), 0);
		assert_int_equal(json_integer_value(json_object_get(sum, "verification_failures")), 0);
		json_decref(doc);
		n++;
	}
	closedir(d);
	assert_true(n >= 5);
}

/* The default (all) runs both baselines and MetaRoCE and compares MetaRoCE
 * with each; "both" runs roce and metaroce, as it always did. */
static void test_both(void **state)
{
	char path[1024];
	json_t *doc;
	int have = sim_transport_find("metaroce") != NULL;

	(void)state;
	path_of(path, sizeof(path), scenarios, "basic.yaml");
	doc = run_json(path, NULL, NULL, 0);
	assert_int_equal(json_array_size(json_object_get(doc, "runs")), have ? 3 : 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(doc, "runs"), 1),
							     "transport")),
			    "roce-pfc");
	assert_non_null(json_object_get(json_object_get(json_array_get(json_object_get(doc, "runs"), 1),
							"summary"),
					"pfc"));
	assert_true(json_is_null(json_object_get(json_object_get(json_array_get(json_object_get(doc, "runs"), 0),
							       "summary"),
						 "pfc")));
	assert_int_equal(json_array_size(json_object_get(doc, "comparisons")), have ? 2 : 1);
	assert_non_null(json_object_get(doc, "comparison"));
	json_decref(doc);

	doc = run_json(path, "--transport", "both", 0);
	assert_int_equal(json_array_size(json_object_get(doc, "runs")), have ? 2 : 1);
	assert_true((json_object_get(doc, "comparison") != NULL) == have);
	json_decref(doc);

	const char *args[] = {"--transport", "metaroce", path, NULL};
	char *out;

	assert_int_equal(run(args, 1, &out), have ? 0 : 2);
	if (!have)
		assert_non_null(strstr(out, "not available"));
	free(out);
}

/* A collectives scenario prints the table: one line per size, every
 * transport's time, the ratios against each baseline. */
static void test_collectives(void **state)
{
	char path[1024], *out;
	const char *args[] = {"--max-size", "64KiB", NULL, NULL};
	json_t *doc, *rows, *row;

	(void)state;
	path_of(path, sizeof(path), data, "collectives.yaml");
	args[2] = path;
	assert_int_equal(run(args, 0, &out), 0);
	assert_non_null(strstr(out, "allreduce_ring over 8 ranks"));
	assert_non_null(strstr(out, "roce-pfc time"));
	free(out);

	doc = run_json(path, "--max-size", "64KiB", 0);
	rows = json_object_get(doc, "collectives");
	assert_int_equal(json_array_size(rows), 4); /* 2 collectives x 2 sizes up to 64 KiB */
	row = json_array_get(rows, 0);
	assert_string_equal(json_string_value(json_object_get(row, "type")), "allreduce_ring");
	assert_int_equal(json_integer_value(json_object_get(row, "size_bytes")), 8);
	assert_int_equal(json_integer_value(json_object_get(row, "ranks")), 8);
	assert_int_equal(json_integer_value(json_object_get(row, "chunk_bytes")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 1), "size_bytes")), 65536);
	assert_int_equal(json_array_size(json_object_get(row, "runs")), 3);
	assert_int_equal(json_array_size(json_object_get(row, "ratios")), 2);
	for (size_t i = 0; i < 3; i++) {
		json_t *r = json_array_get(json_object_get(row, "runs"), i);

		assert_true(json_integer_value(json_object_get(r, "time_ns")) > 0);
		assert_true(json_is_true(json_object_get(r, "verified")));
	}
	json_decref(doc);
}

/* With the scenario key timeseries, each collective run carries the run's
 * samples: the named links into rank 0, which both the background flow and
 * the steps fill, and the first flows; without it, none. */
static void test_collectives_timeseries(void **state)
{
	char path[1024];
	json_t *doc, *runs;

	(void)state;
	path_of(path, sizeof(path), data, "collectives_ts.yaml");
	doc = run_json(path, NULL, NULL, 0);
	runs = json_object_get(json_array_get(json_object_get(doc, "collectives"), 0), "runs");
	assert_int_equal(json_array_size(runs), 3);
	for (size_t i = 0; i < 3; i++) {
		json_t *r = json_array_get(runs, i);
		json_t *ts = json_object_get(r, "timeseries");
		uint64_t sim_ns = (uint64_t)json_integer_value(json_object_get(r, "sim_time_ns"));
		uint64_t iv, n, bytes = 0;

		assert_non_null(ts);
		iv = (uint64_t)json_integer_value(json_object_get(ts, "interval_ns"));
		n = (uint64_t)json_integer_value(json_object_get(ts, "samples"));
		assert_true(iv >= 5000);
		/* the samples span the run (to its last interval): its steps
		 * and the 1 MB beside them */
		assert_true((n + 1) * iv >= sim_ns && (n - 1) * iv <= sim_ns);
		json_t *links = json_object_get(ts, "links");
		assert_int_equal(json_array_size(links), 2);
		for (size_t k = 0; k < 2; k++) {
			json_t *l = json_array_get(links, k);
			json_t *rate = json_object_get(l, "rate_bps");

			assert_true(json_is_true(json_object_get(l, "named")));
			assert_int_equal(json_array_size(rate), n);
			for (size_t j = 0; j < n; j++)
				bytes += (uint64_t)(json_real_value(json_array_get(rate, j)) * iv / 8e9 + 0.5);
		}
		/* into rank 0: the 1 MB flow and 7 of the all-to-all's 64 KiB / 8 */
		assert_true(bytes >= 1000000 + 7 * 8192);
		assert_int_equal(json_array_size(json_object_get(ts, "flows")), 2);
	}
	json_decref(doc);

	/* without the key: no samples */
	path_of(path, sizeof(path), data, "collectives.yaml");
	doc = run_json(path, "--max-size", "8", 0);
	runs = json_object_get(json_array_get(json_object_get(doc, "collectives"), 0), "runs");
	assert_null(json_object_get(json_array_get(runs, 0), "timeseries"));
	json_decref(doc);
}

static void test_text_output(void **state)
{
	char path[1024], *out;
	const char *args[] = {"-t", "roce", NULL, NULL};

	(void)state;
	path_of(path, sizeof(path), scenarios, "basic.yaml");
	args[2] = path;
	assert_int_equal(run(args, 0, &out), 0);
	assert_non_null(strstr(out, "aggregate goodput"));
	assert_non_null(strstr(out, "p99 fct"));
	free(out);
}

static void expect_exit(const char *const *args, int want, const char *msg)
{
	char *out;
	int rc = run(args, 1, &out);

	if (rc != want)
		fail_msg("exit %d, expected %d; output:\n%s", rc, want, out);
	if (msg && !strstr(out, msg))
		fail_msg("output does not contain '%s':\n%s", msg, out);
	free(out);
}

static void test_usage_errors(void **state)
{
	char basic[1024], bad[1024], missing[1024];

	(void)state;
	path_of(basic, sizeof(basic), scenarios, "basic.yaml");
	path_of(bad, sizeof(bad), data, "bad_key.yaml");
	path_of(missing, sizeof(missing), data, "no-such-file.yaml");
	expect_exit((const char *const[]){NULL}, 2, "usage");
	expect_exit((const char *const[]){"--transport", "tcp", basic, NULL}, 2, "'tcp'");
	expect_exit((const char *const[]){"--seed", "abc", basic, NULL}, 2, "'abc'");
	expect_exit((const char *const[]){"--bogus", basic, NULL}, 2, "usage");
	expect_exit((const char *const[]){basic, basic, NULL}, 2, "usage");
	expect_exit((const char *const[]){missing, NULL}, 2, "no-such-file.yaml");
	expect_exit((const char *const[]){bad, NULL}, 2, "bad_key.yaml:5: link: unknown key 'delai'");
	expect_exit((const char *const[]){"--help", NULL}, 0, "roce");
}

/* A run that does not finish its flows exits 1, still with its report. */
static void test_unfinished_exits_1(void **state)
{
	char path[1024];
	json_t *doc;

	(void)state;
	path_of(path, sizeof(path), data, "unfinished.yaml");
	doc = run_json(path, "--transport", "roce", 1);

	json_t *sum = json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "summary");

	assert_int_equal(json_integer_value(json_object_get(sum, "unfinished_flows")), 1);
	json_decref(doc);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic_json),
		cmocka_unit_test(test_deterministic_output),
		cmocka_unit_test(test_shipped_scenarios),
		cmocka_unit_test(test_both),
		cmocka_unit_test(test_collectives),
		cmocka_unit_test(test_collectives_timeseries),
		cmocka_unit_test(test_text_output),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_unfinished_exits_1),
	};

	if (argc != 4) {
		fprintf(stderr, "usage: %s METAROCE_SIM SCENARIO_DIR TEST_DATA_DIR\n", argv[0]);
		return 2;
	}
	prog = argv[1];
	scenarios = argv[2];
	data = argv[3];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
