/*
 * metaroce-sim: runs a scenario on the simulated network under one
 * transport, or under the RoCEv2 baseline and MetaRoCE side by side, and
 * prints per-flow and overall results (text, or one JSON document).
 *
 * Exit status: 0 ok; 1 the run finished with invariant violations,
 * verification failures, failed or unfinished flows; 2 usage or scenario
 * error (or a transport that is not built).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"
#include "scenario.h"
#include "transport.h"
#include "units.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: metaroce-sim SCENARIO.yaml [--seed N] [--json] [--transport NAME]\n"
		"\n"
		"  -s, --seed N         override the scenario's seed\n"
		"  -j, --json           print one JSON document instead of tables\n"
		"  -t, --transport NAME roce, metaroce, or both (default: both, side by side)\n"
		"  -h, --help           this text\n"
		"\n"
		"transports:\n");
	for (size_t i = 0; i < sim_transport_count(); i++) {
		const sim_transport_entry *e = sim_transport_at(i);

		fprintf(out, "  %-10s %s%s\n", e->name, e->about, e->ops ? "" : " (not built)");
	}
	fprintf(out, "\nThe scenario format and every output field: sim/README.md\n");
}

static double wall_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs cfg under ops into *res. 0, 2 for a setup error (message printed). */
static int run_one(const sim_config *cfg, const sim_transport_ops *ops, sim_result *res)
{
	char err[512];
	sim *s;
	int rc = sim_new(cfg, ops, &s, err, sizeof(err));

	if (rc != 0) {
		fprintf(stderr, "metaroce-sim: %s\n", err);
		return 2;
	}

	double t0 = wall_seconds();
	int st = sim_run(s, SIM_NEVER);
	double t1 = wall_seconds();

	if (st < 0) {
		fprintf(stderr, "metaroce-sim: %s: simulation failed: %s\n", ops->name, mrp_strerror(st));
		sim_del(s);
		return 2;
	}
	if (sim_result_collect(s, st, res) != 0) {
		fprintf(stderr, "metaroce-sim: out of memory\n");
		sim_del(s);
		return 2;
	}
	res->events_per_sec = t1 > t0 ? (double)res->events / (t1 - t0) : 0;
	if (st == SIM_RUN_LIMIT && res->unfinished) {
		char d[32];

		sim_fmt_time(d, sizeof(d), (double)cfg->duration_ns);
		fprintf(stderr, "metaroce-sim: %s: stopped at the duration limit (%s) with %" PRIu64
				" flow%s unfinished\n",
			ops->name, d, res->unfinished, res->unfinished == 1 ? "" : "s");
	} else if (st == SIM_RUN_IDLE && res->unfinished) {
		fprintf(stderr, "metaroce-sim: %s: nothing left to happen with %" PRIu64
				" flow%s unfinished\n",
			ops->name, res->unfinished, res->unfinished == 1 ? "" : "s");
	}
	sim_del(s);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"seed", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"transport", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *transport = "both";
	const char *seed_arg = NULL;
	int json = 0, c;

	while ((c = getopt_long(argc, argv, "s:jt:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			seed_arg = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 't':
			transport = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}

	uint64_t seed = 0;

	if (seed_arg && sim_parse_u64(seed_arg, &seed) != 0) {
		fprintf(stderr, "metaroce-sim: --seed: '%s' is not a whole number\n", seed_arg);
		return 2;
	}

	/* which transports, in report order (the baseline first) */
	const sim_transport_ops *ops[2];
	size_t nops = 0;

	if (strcmp(transport, "both") == 0) {
		ops[nops++] = sim_transport_find("roce");
		if (sim_transport_find("metaroce"))
			ops[nops++] = sim_transport_find("metaroce");
		else
			fprintf(stderr, "metaroce-sim: note: transport 'metaroce' is not built yet; "
					"running roce only\n");
	} else if (sim_transport_find(transport)) {
		ops[nops++] = sim_transport_find(transport);
	} else if (sim_transport_known(transport)) {
		fprintf(stderr, "metaroce-sim: transport '%s' is not available in this build\n", transport);
		return 2;
	} else {
		fprintf(stderr, "metaroce-sim: --transport: '%s' is not roce, metaroce or both\n", transport);
		return 2;
	}

	sim_config cfg;
	char err[512];

	if (sim_scenario_load(argv[optind], &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "metaroce-sim: %s\n", err);
		sim_config_free(&cfg);
		return 2;
	}
	if (seed_arg)
		cfg.seed = seed;

	sim_result res[2];
	size_t nres = 0;
	int rc = 0;

	for (size_t i = 0; i < nops && rc == 0; i++) {
		rc = run_one(&cfg, ops[i], &res[i]);
		if (rc == 0)
			nres++;
	}
	if (rc == 0) {
		if (json) {
			json_t *doc = sim_report_json(&cfg, res, nres);

			if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2)) != 0) {
				fprintf(stderr, "metaroce-sim: cannot write JSON\n");
				rc = 2;
			}
			fputc('\n', stdout);
			json_decref(doc);
		} else {
			sim_report_text(stdout, &cfg, res, nres);
		}
		for (size_t i = 0; i < nres && rc == 0; i++)
			if (!sim_result_ok(&res[i]))
				rc = 1;
	}
	for (size_t i = 0; i < nres; i++)
		sim_result_free(&res[i]);
	sim_config_free(&cfg);
	if (fflush(stdout) != 0 && rc == 0)
		rc = 2;
	return rc;
}
