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
		"  -t, --transport NAME roce, roce-pfc, metaroce; both (roce and metaroce) or\n"
		"                       all (default: roce, roce-pfc and metaroce, side by side)\n"
		"  -m, --max-size SIZE  collectives: run only the sizes up to SIZE\n"
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

/*
 * A scenario with collectives: every collective at every size of its list,
 * one run per transport each (the scenario's flows run alongside every
 * time), then the table. Exit status as for one run, over all of them.
 */
static int run_collectives(sim_config *cfg, const sim_transport_ops *const *ops, size_t nops, int json)
{
	size_t nrows = 0, cap = 0;
	sim_coll_row *rows = NULL;
	int rc = 0;

	for (size_t e = 0; e < cfg->ncolls && rc == 0; e++) {
		for (size_t k = 0; k < cfg->colls[e].nsizes && rc == 0; k++) {
			if (nrows == cap) {
				size_t nc = cap ? cap * 2 : 16;
				sim_coll_row *nv = realloc(rows, nc * sizeof(*nv));

				if (!nv) {
					fprintf(stderr, "metaroce-sim: out of memory\n");
					rc = 2;
					break;
				}
				rows = nv;
				cap = nc;
			}

			sim_coll_row *row = &rows[nrows++];

			memset(row, 0, sizeof(*row));
			row->entry = e;
			row->size_index = k;
			cfg->coll_entry = (int)e;
			cfg->coll_size = k;
			for (size_t t = 0; t < nops && rc == 0; t++) {
				rc = run_one(cfg, ops[t], &row->runs[t]);
				if (rc != 0)
					break;
				/* keep the summary; the per-flow and per-link tables of a
				 * sweep would be large */
				free(row->runs[t].flows);
				free(row->runs[t].links);
				row->runs[t].flows = NULL;
				row->runs[t].links = NULL;
				row->runs[t].nflows = row->runs[t].nlinks = 0;
				row->nr++;
			}
		}
	}
	if (rc == 0) {
		if (json) {
			json_t *doc = sim_report_coll_json(cfg, rows, nrows);

			if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2)) != 0) {
				fprintf(stderr, "metaroce-sim: cannot write JSON\n");
				rc = 2;
			}
			fputc('\n', stdout);
			json_decref(doc);
		} else {
			sim_report_coll_text(stdout, cfg, rows, nrows);
		}
		for (size_t i = 0; i < nrows && rc == 0; i++)
			for (size_t t = 0; t < rows[i].nr; t++)
				if (!sim_result_ok(&rows[i].runs[t]))
					rc = 1;
	}
	for (size_t i = 0; i < nrows; i++)
		for (size_t t = 0; t < rows[i].nr; t++)
			sim_result_free(&rows[i].runs[t]);
	free(rows);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"seed", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"transport", required_argument, NULL, 't'},
		{"max-size", required_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *transport = "all";
	const char *seed_arg = NULL, *max_arg = NULL;
	int json = 0, c;

	while ((c = getopt_long(argc, argv, "s:jt:m:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			max_arg = optarg;
			break;
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

	uint64_t seed = 0, max_size = UINT64_MAX;

	if (max_arg && sim_parse_bytes(max_arg, &max_size) != 0) {
		fprintf(stderr, "metaroce-sim: --max-size: '%s' is not a size (e.g. 64KiB)\n", max_arg);
		return 2;
	}

	if (seed_arg && sim_parse_u64(seed_arg, &seed) != 0) {
		fprintf(stderr, "metaroce-sim: --seed: '%s' is not a whole number\n", seed_arg);
		return 2;
	}

	/* which transports, in report order (the baselines first) */
	const sim_transport_ops *ops[SIM_MAX_RUNS];
	size_t nops = 0;

	if (strcmp(transport, "both") == 0 || strcmp(transport, "all") == 0) {
		ops[nops++] = sim_transport_find("roce");
		if (strcmp(transport, "all") == 0 && sim_transport_find("roce-pfc"))
			ops[nops++] = sim_transport_find("roce-pfc");
		if (sim_transport_find("metaroce"))
			ops[nops++] = sim_transport_find("metaroce");
		else
			fprintf(stderr, "metaroce-sim: note: transport 'metaroce' is not built yet; "
					"running the baselines only\n");
	} else if (sim_transport_find(transport)) {
		ops[nops++] = sim_transport_find(transport);
	} else if (sim_transport_known(transport)) {
		fprintf(stderr, "metaroce-sim: transport '%s' is not available in this build\n", transport);
		return 2;
	} else {
		fprintf(stderr, "metaroce-sim: --transport: '%s' is not roce, roce-pfc, metaroce, both or all\n",
			transport);
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
	for (size_t i = 0; i < cfg.ncolls; i++) {
		sim_coll_config *cc = &cfg.colls[i];
		size_t k = 0;

		for (size_t j = 0; j < cc->nsizes; j++)
			if (cc->sizes[j] <= max_size)
				cc->sizes[k++] = cc->sizes[j];
		cc->nsizes = k;
	}
	if (cfg.ncolls > 0) {
		int crc = run_collectives(&cfg, ops, nops, json);

		sim_config_free(&cfg);
		if (fflush(stdout) != 0 && crc == 0)
			crc = 2;
		return crc;
	}

	sim_result res[SIM_MAX_RUNS];
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
