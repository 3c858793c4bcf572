/*
 * Simulator speed: events per second on one core, for each transport, on
 * scenarios shipped in sim/scenarios/, against a reference measured in the
 * same run: the event queue alone (push and pop of the same number of events
 * with the same queue depth), the floor of any discrete-event simulator
 * built this way. The ratio sim / reference says how much of the per-event
 * budget the network model and the transport take.
 *
 * usage: bench_sim [--reps N] [--json] [--quick] SCENARIO.yaml...
 * Every run must finish with every flow done and verified and no invariant
 * violated (exit 1 otherwise); the speed goal (2 M events/s) is printed,
 * never enforced.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evq.h"
#include "mrp_host.h"
#include "roce.h"
#include "scenario.h"
#include "sim.h"

#define GOAL_EPS 2e6
#define MAXREPS 100

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One run of a scenario under ops: events per second, or -1 on failure. */
static double run_sim(const sim_config *cfg, const sim_transport_ops *ops, uint64_t *pevents,
		      size_t *pdepth)
{
	char err[512];
	sim *s = NULL;
	if (sim_new(cfg, ops, &s, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_sim: %s\n", err);
		return -1;
	}
	double t0 = wall();
	int rc = sim_run(s, SIM_NEVER);
	double el = wall() - t0;
	const sim_stats *st = sim_get_stats(s);
	int ok = rc == SIM_RUN_DONE && sim_verify(s) == 0 && st->violations == 0;
	if (!ok)
		fprintf(stderr, "bench_sim: %s: run %d, %llu violations, flows done %llu\n", ops->name,
			rc, (unsigned long long)st->violations, (unsigned long long)st->flows_done);
	*pevents = st->events;
	/* a typical queue depth for the reference: one event per flow and link */
	*pdepth = sim_link_count(s) + sim_flow_count(s) + sim_hosts(s);
	sim_del(s);
	return ok && el > 0 ? (double)*pevents / el : -1;
}

/* The reference: n pushes and pops through a queue held at depth events. */
static double run_evq(uint64_t n, size_t depth)
{
	sim_evq q;
	sim_ev ev;
	uint64_t x = 0x9e3779b97f4a7c15ull, now = 0, sink = 0;
	if (sim_evq_init(&q, depth + 1) != 0)
		return -1;
	for (size_t i = 0; i < depth; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		sim_evq_push(&q, x % 100000, 0, 0, NULL);
	}
	double t0 = wall();
	for (uint64_t i = 0; i < n; i++) {
		sim_evq_pop(&q, &ev);
		now = ev.t;
		sink += ev.seq;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		sim_evq_push(&q, now + 1 + x % 100000, 0, 0, NULL);
	}
	double el = wall() - t0;
	sim_evq_free(&q);
	if (sink == 42)
		fprintf(stderr, " "); /* keep the loop */
	return el > 0 ? (double)n / el : -1;
}

int main(int argc, char **argv)
{
	int reps = 3, json = 0, quick = 0, nfiles = 0, ok = 1;
	const char *files[16];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
			if (reps < 1 || reps > MAXREPS) {
				fprintf(stderr, "bench_sim: --reps: %s is out of range (1-%d)\n", argv[i],
					MAXREPS);
				return 2;
			}
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--quick")) {
			quick = 1;
		} else if (argv[i][0] != '-' && nfiles < 16) {
			files[nfiles++] = argv[i];
		} else {
			fprintf(stderr, "usage: bench_sim [--reps N] [--json] [--quick] SCENARIO.yaml...\n");
			return 2;
		}
	}
	if (!nfiles) {
		fprintf(stderr, "usage: bench_sim [--reps N] [--json] [--quick] SCENARIO.yaml...\n");
		return 2;
	}
	if (quick)
		reps = 1;
	const sim_transport_ops *ops[2] = { &sim_roce_ops, &sim_mrp_ops };
	if (json)
		printf("{\"reps\":%d,\"goal_events_per_s\":%.0f,\"runs\":[", reps, GOAL_EPS);
	else
		printf("metaroce-sim speed, median of %d run%s (goal >= %.0f M events/s on one core)\n"
		       "%-28s %-9s %12s %14s %14s %8s\n",
		       reps, reps > 1 ? "s" : "", GOAL_EPS / 1e6, "scenario", "transport", "events",
		       "sim ev/s", "evq ev/s", "ratio");
	for (int f = 0; f < nfiles; f++) {
		sim_config cfg;
		char err[512];
		if (sim_scenario_load(files[f], &cfg, err, sizeof(err)) != 0) {
			fprintf(stderr, "bench_sim: %s\n", err);
			return 2;
		}
		if (quick) {
			for (size_t i = 0; i < cfg.nflows; i++)
				if (cfg.flows[i].bytes > 65536)
					cfg.flows[i].bytes = 65536;
		}
		const char *base = strrchr(files[f], '/') ? strrchr(files[f], '/') + 1 : files[f];
		for (int t = 0; t < 2; t++) {
			double s[MAXREPS], r[MAXREPS];
			uint64_t events = 0;
			size_t depth = 0;
			for (int k = 0; k < reps; k++) {
				s[k] = run_sim(&cfg, ops[t], &events, &depth);
				if (s[k] < 0) {
					ok = 0;
					break;
				}
				r[k] = run_evq(events, depth);
			}
			if (!ok)
				break;
			double ms = median(s, reps), mr = median(r, reps);
			if (json)
				printf("%s{\"scenario\":\"%s\",\"transport\":\"%s\",\"events\":%llu,"
				       "\"sim_events_per_s\":%.0f,\"evq_events_per_s\":%.0f,\"ratio\":%.4f,"
				       "\"goal_met\":%s}",
				       f || t ? "," : "", base, ops[t]->name, (unsigned long long)events, ms,
				       mr, ms / mr, ms >= GOAL_EPS ? "true" : "false");
			else
				printf("%-28s %-9s %12llu %11.2f M %11.2f M %8.3f  goal %s\n", base,
				       ops[t]->name, (unsigned long long)events, ms / 1e6, mr / 1e6,
				       ms / mr, ms >= GOAL_EPS ? "met" : "not met");
		}
		sim_config_free(&cfg);
		if (!ok)
			break;
	}
	if (json)
		printf("],\"verified\":%s}\n", ok ? "true" : "false");
	else
		printf("%s\n", ok ? "every run finished, verified, no violation" : "FAILED");
	return ok ? 0 : 1;
}
