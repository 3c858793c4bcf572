/*
 * Collectives: completion time of every collective of a scenario at every
 * size of its list under MetaRoCE, against both RoCEv2 baselines measured in
 * the same run: lossy RoCEv2 (roce) and RoCEv2 on a lossless PFC network as
 * operators run it (roce-pfc). The seeds' figure: 64-GPU all-reduce and
 * all-to-all time against RoCEv2 across message sizes.
 *
 * usage: bench_coll [--json] [--quick] [--max-size SIZE] SCENARIO.yaml
 *   --quick       sizes up to 2 KiB only (the bench suite's variant)
 *   --max-size S  sizes up to S only
 * Simulated times are deterministic (same scenario and seed, same figures);
 * the wall time and events/s of each run are printed too: they are what a
 * size costs to simulate. Exit 1 if a run leaves a flow unfinished, fails
 * to verify or violates an invariant; the ratios are printed, never
 * enforced.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mrp_host.h"
#include "report.h"
#include "roce.h"
#include "scenario.h"
#include "units.h"

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct cell {
	uint64_t time_ns; /* SIM_NEVER: did not finish */
	double wall_s, eps;
	int ok;
} cell;

/* One run: the collective's time, wall time and whether it was clean. */
static int run(const sim_config *cfg, const sim_transport_ops *ops, cell *c)
{
	char err[512];
	sim *s = NULL;
	sim_result r;

	if (sim_new(cfg, ops, &s, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_coll: %s\n", err);
		return -1;
	}
	double t0 = wall();
	int st = sim_run(s, SIM_NEVER);
	c->wall_s = wall() - t0;
	if (st < 0 || sim_result_collect(s, st, &r) != 0) {
		sim_del(s);
		return -1;
	}
	c->time_ns = r.ncolls ? r.colls[0].time_ns : SIM_NEVER;
	c->eps = c->wall_s > 0 ? (double)r.events / c->wall_s : 0;
	c->ok = sim_result_ok(&r) && c->time_ns != SIM_NEVER;
	if (!c->ok)
		fprintf(stderr, "bench_coll: %s: %" PRIu64 " unfinished, %" PRIu64 " failed, %" PRIu64
				" violations, %" PRIu64 " verification failures\n",
			ops->name, r.unfinished, r.failed, r.violations, r.verify_failures);
	sim_result_free(&r);
	sim_del(s);
	return 0;
}

static void ratio(char *b, size_t n, const cell *x, const cell *base)
{
	if (x->time_ns == SIM_NEVER || base->time_ns == SIM_NEVER || base->time_ns == 0)
		snprintf(b, n, "-");
	else
		snprintf(b, n, "%.3f", (double)x->time_ns / (double)base->time_ns);
}

int main(int argc, char **argv)
{
	const sim_transport_ops *ops[3] = {&sim_roce_ops, &sim_roce_pfc_ops, &sim_mrp_ops};
	const char *file = NULL;
	uint64_t max_size = UINT64_MAX;
	int json = 0, ok = 1, first = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--quick")) {
			max_size = 2048;
		} else if (!strcmp(argv[i], "--max-size") && i + 1 < argc) {
			if (sim_parse_bytes(argv[++i], &max_size) != 0) {
				fprintf(stderr, "bench_coll: --max-size: '%s' is not a size\n", argv[i]);
				return 2;
			}
		} else if (argv[i][0] != '-' && !file) {
			file = argv[i];
		} else {
			file = NULL;
			break;
		}
	}
	if (!file) {
		fprintf(stderr, "usage: bench_coll [--json] [--quick] [--max-size SIZE] SCENARIO.yaml\n");
		return 2;
	}

	sim_config cfg;
	char err[512];

	if (sim_scenario_load(file, &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_coll: %s\n", err);
		return 2;
	}
	if (cfg.ncolls == 0) {
		fprintf(stderr, "bench_coll: %s has no collectives\n", file);
		sim_config_free(&cfg);
		return 2;
	}
	if (json)
		printf("{\"scenario\":\"%s\",\"seed\":%" PRIu64 ",\"hosts\":%" PRIu32 ",\"planes\":%u,\"rows\":[",
		       file, cfg.seed, cfg.hosts, cfg.planes);
	else
		printf("collectives of %s: %" PRIu32 " hosts, %u planes; time ratios < 1: metaroce sooner\n",
		       file, cfg.hosts, cfg.planes);
	for (size_t e = 0; e < cfg.ncolls; e++) {
		const sim_coll_config *cc = &cfg.colls[e];
		uint32_t n = sim_coll_nranks(&cfg, cc);

		if (!json)
			printf("\n%s over %" PRIu32 " ranks, %" PRIu32 " channel%s\n"
			       "%10s %12s %12s %12s %9s %9s %10s %10s %10s\n",
			       sim_coll_name(cc->type), n, cc->channels, cc->channels == 1 ? "" : "s", "size",
			       "roce", "roce-pfc", "metaroce", "mr/roce", "mr/pfc", "wall roce", "wall pfc",
			       "wall mr");
		for (size_t k = 0; k < cc->nsizes; k++) {
			cell c[3];
			char t[3][32], r0[16], r1[16], sz[32];

			if (cc->sizes[k] > max_size)
				continue;
			cfg.coll_entry = (int)e;
			cfg.coll_size = k;
			for (int i = 0; i < 3; i++) {
				if (run(&cfg, ops[i], &c[i]) != 0) {
					sim_config_free(&cfg);
					return 2;
				}
				ok &= c[i].ok;
				if (c[i].time_ns == SIM_NEVER)
					snprintf(t[i], sizeof(t[i]), "-");
				else
					sim_fmt_time(t[i], sizeof(t[i]), (double)c[i].time_ns);
			}
			ratio(r0, sizeof(r0), &c[2], &c[0]);
			ratio(r1, sizeof(r1), &c[2], &c[1]);
			if (json) {
				printf("%s{\"type\":\"%s\",\"ranks\":%" PRIu32 ",\"channels\":%" PRIu32
				       ",\"size_bytes\":%" PRIu64 ",\"runs\":[",
				       first ? "" : ",", sim_coll_name(cc->type), n, cc->channels, cc->sizes[k]);
				for (int i = 0; i < 3; i++) {
					printf("%s{\"transport\":\"%s\",\"ok\":%s,\"wall_s\":%.3f,\"events_per_s\":%.0f,"
					       "\"time_ns\":",
					       i ? "," : "", ops[i]->name, c[i].ok ? "true" : "false", c[i].wall_s,
					       c[i].eps);
					if (c[i].time_ns == SIM_NEVER)
						printf("null}");
					else
						printf("%" PRIu64 "}", c[i].time_ns);
				}
				printf("],\"ratio_vs_roce\":%s,\"ratio_vs_roce_pfc\":%s}",
				       strcmp(r0, "-") ? r0 : "null", strcmp(r1, "-") ? r1 : "null");
				first = 0;
			} else {
				sim_fmt_bytes(sz, sizeof(sz), (double)cc->sizes[k]);
				printf("%10s %12s %12s %12s %9s %9s %9.2fs %9.2fs %9.2fs\n", sz, t[0], t[1], t[2], r0,
				       r1, c[0].wall_s, c[1].wall_s, c[2].wall_s);
			}
			fflush(stdout);
		}
	}
	if (json)
		printf("],\"ok\":%s}\n", ok ? "true" : "false");
	sim_config_free(&cfg);
	return ok ? 0 : 1;
}
