/*
 * Results of a run and their two renderings: an aligned text table and one
 * JSON document (jansson), built from the same sim_result. The fields are
 * documented in sim/README.md ("Output").
 */
#ifndef SIM_REPORT_H
#define SIM_REPORT_H

#include <stdio.h>

#include <jansson.h>

#include "sim.h"

typedef struct sim_flow_result {
	uint32_t id, src, dst;
	uint64_t bytes;
	unsigned op;
	uint32_t stream;
	int plane;
	uint64_t start_ns;
	uint64_t finish_ns; /* SIM_NEVER if unfinished */
	uint64_t fct_ns;    /* finish - start; SIM_NEVER if unfinished */
	double goodput_bps; /* bytes * 8 / fct; 0 if unfinished */
	uint64_t retx, spurious;
	int done, status, verified;
} sim_flow_result;

typedef struct sim_link_result {
	char name[48];
	unsigned plane;
	uint64_t max_queue_bytes, tx_bytes, tx_pkts, ce_marks;
	uint64_t drops[SIM_DROP_N];
} sim_link_result;

typedef struct sim_result {
	char transport[16];
	int run_status; /* SIM_RUN_* */
	sim_flow_result *flows;
	size_t nflows;
	sim_link_result *links; /* links that carried or dropped anything */
	size_t nlinks;

	double agg_goodput_bps; /* finished bytes * 8 / (last finish - first start) */
	double mean_fct_ns;
	uint64_t p99_fct_ns, max_fct_ns;
	double jain;            /* over finished flows' goodputs */
	uint64_t max_queue_bytes;
	char max_queue_link[48];
	uint64_t drops[SIM_DROP_N], drops_total, ce_marks;
	uint64_t retx, spurious;
	uint64_t finished, unfinished, failed;
	uint64_t events, sim_time_ns;
	uint64_t violations, verify_failures;
	uint64_t nic_drops; /* packets a host's own NIC dropped (sim_stats.nic_drops) */
	json_t *timeseries; /* the run's time series (README "Time series"), or NULL */
	unsigned nmsgs;
	char msgs[8][160];

	/* Wall clock, set by the program (never by the core): the only field
	 * that differs between two runs of the same scenario and seed. */
	double events_per_sec;
} sim_result;

/* Verifies the flows' memory (sim_verify) and gathers the results of s after
 * a sim_run() that returned run_status. 0 or MRP_ERR_NOMEM. */
int sim_result_collect(sim *s, int run_status, sim_result *r);
void sim_result_free(sim_result *r);

/* Jain's fairness index (sum x)^2 / (n sum x^2); 1 for n == 0 or all zero. */
double sim_jain(const double *x, size_t n);

/* Nearest-rank percentile q (0 < q <= 1) of v; sorts v. 0 for n == 0. */
uint64_t sim_percentile(uint64_t *v, size_t n, double q);

/* "done", "idle", "limit" */
const char *sim_run_status_name(int run_status);

/* Problems that make the program exit 1: violations, verification
 * failures, unfinished or failed flows. */
int sim_result_ok(const sim_result *r);

/* nr runs of the same scenario side by side (nr is 1 or 2; with 2 the
 * ratio column is runs[1] / runs[0]). */
void sim_report_text(FILE *out, const sim_config *cfg, const sim_result *runs, size_t nr);
json_t *sim_report_json(const sim_config *cfg, const sim_result *runs, size_t nr);

#endif
