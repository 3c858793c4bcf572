/*
 * Simulator scale: an all-to-all among N hosts (N * (N - 1) flows, each one
 * connection) for each transport, by N. Per run: wall-clock and CPU time,
 * events and events per CPU second, and memory per connection, measured in
 * a child process of its own so that one run's peak does not hide the
 * next's. The RoCE baseline runs first at every scale; MetaRoCE's figures
 * are printed as ratios against it (same scenario, same seed, same
 * invocation).
 *
 * Memory per connection = (peak RSS of the run - RSS once the world is
 * built, before the first event) / flows. The world (links, switches, the
 * flows' source and destination buffers, touched when built) is in the
 * second figure; what is left is what the transport's connections, the
 * packets in flight and the event queue take while the run goes on. A
 * "connection" is one flow: the sender's end and the receiver's end.
 *
 * usage: bench_scale [--hosts 64,128,256] [--bytes 4KB] [--planes 2]
 *                    [--transport roce|metaroce|both] [--json]
 * Every run must finish with every flow done and verified, no invariant
 * violated and no packet dropped at a sender's own NIC (exit 1 otherwise).
 * The goal (1,024 hosts in under 10 minutes on a 2-core, 24 GB machine) is
 * printed, never enforced.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mrp_host.h"
#include "roce.h"
#include "sim.h"
#include "units.h"

#define MAX_SCALES 16
#define HOSTS_PER_LEAF 16

typedef struct sample {
	int ok;
	double wall_s, cpu_s;
	uint64_t events, flows, sim_ns, nic_drops, drops;
	uint64_t rss_start, rss_built, rss_peak; /* bytes */
	char err[400];
} sample;

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Resident bytes now (/proc/self/statm), 0 if unknown. */
static uint64_t rss_now(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t rss_peak(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_maxrss * 1024;
}

/* The world: N hosts, every plane a non-blocking leaf-spine (16 hosts and
 * 16 spines per leaf; one switch below 32 hosts), all-to-all of bytes. */
static void scale_config(sim_config *cfg, uint32_t hosts, unsigned planes, uint64_t bytes)
{
	sim_config_init(cfg);
	cfg->hosts = hosts;
	cfg->planes = planes;
	cfg->duration_ns = 10ull * 1000000000ull;
	cfg->max_buffer_bytes = 64ull << 30;
	for (unsigned p = 0; p < planes; p++) {
		if (hosts >= 2 * HOSTS_PER_LEAF) {
			cfg->plane[p].fabric = SIM_FABRIC_LEAFSPINE;
			cfg->plane[p].hosts_per_leaf = HOSTS_PER_LEAF;
			cfg->plane[p].leaves = (hosts + HOSTS_PER_LEAF - 1) / HOSTS_PER_LEAF;
			cfg->plane[p].spines = HOSTS_PER_LEAF;
		}
	}
	sim_flow_config fc;
	sim_flow_config_init(&fc);
	fc.pattern = SIM_PAT_ALL_TO_ALL;
	fc.bytes = bytes;
	sim_config_add_flow(cfg, &fc);
}

/* One run, in this (child) process. */
static void run_one(uint32_t hosts, unsigned planes, uint64_t bytes, const sim_transport_ops *ops,
		    sample *o)
{
	sim_config cfg;
	sim *s = NULL;
	char err[512];

	memset(o, 0, sizeof(*o));
	o->rss_start = rss_now();
	scale_config(&cfg, hosts, planes, bytes);
	if (sim_new(&cfg, ops, &s, err, sizeof(err)) != 0) {
		snprintf(o->err, sizeof(o->err), "%.300s", err);
		sim_config_free(&cfg);
		return;
	}
	sim_config_free(&cfg); /* the simulator has its own copy */
	o->rss_built = rss_now();

	double w0 = wall(), c0 = cpu();
	int rc = sim_run(s, SIM_NEVER);
	o->wall_s = wall() - w0;
	o->cpu_s = cpu() - c0;
	o->rss_peak = rss_peak();

	const sim_stats *st = sim_get_stats(s);
	size_t bad = sim_verify(s);
	o->events = st->events;
	o->flows = sim_flow_count(s);
	o->sim_ns = sim_now(s);
	o->nic_drops = st->nic_drops;
	for (size_t i = 0; i < sim_link_count(s); i++)
		for (unsigned c = 0; c < SIM_DROP_N; c++)
			o->drops += sim_link_get(s, i)->drops[c];
	o->ok = rc == SIM_RUN_DONE && bad == 0 && st->violations == 0 && st->nic_drops == 0 &&
		st->flows_done == o->flows;
	if (!o->ok)
		snprintf(o->err, sizeof(o->err),
			 "run %d, %zu verification failures, %llu violations (%.160s), %llu of %llu "
			 "flows done, %llu NIC drops",
			 rc, bad, (unsigned long long)st->violations, st->nmsgs ? st->msgs[0] : "-",
			 (unsigned long long)st->flows_done, (unsigned long long)o->flows,
			 (unsigned long long)st->nic_drops);
	sim_del(s);
}

/* The run in a child of its own (a fresh peak RSS). */
static int run_child(uint32_t hosts, unsigned planes, uint64_t bytes, const sim_transport_ops *ops,
		     sample *o)
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		sample r;
		close(fd[0]);
		run_one(hosts, planes, bytes, ops, &r);
		ssize_t n = write(fd[1], &r, sizeof(r));
		_exit(n == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(fd[1]);
	size_t got = 0;
	while (got < sizeof(*o)) {
		ssize_t n = read(fd[0], (char *)o + got, sizeof(*o) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got != sizeof(*o)) {
		memset(o, 0, sizeof(*o));
		snprintf(o->err, sizeof(o->err), "the run died (status %d%s)", status,
			 WIFSIGNALED(status) ? ", killed: out of memory?" : "");
	}
	return 0;
}

static double per_flow(const sample *o)
{
	return o->flows && o->rss_peak > o->rss_built
		       ? (double)(o->rss_peak - o->rss_built) / (double)o->flows
		       : 0;
}

static double eps(const sample *o)
{
	return o->cpu_s > 0 ? (double)o->events / o->cpu_s : 0;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static int parse_hosts(const char *s, uint32_t *v, int *n)
{
	*n = 0;
	while (*s) {
		char *end;
		unsigned long x = strtoul(s, &end, 10);
		if (end == s || x < 2 || x > SIM_MAX_HOSTS || *n == MAX_SCALES)
			return -1;
		v[(*n)++] = (uint32_t)x;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return *n ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_scale [--hosts 64,128,256] [--bytes 4KB] [--planes 2] "
			"[--transport roce|metaroce|both] [--json]\n");
}

int main(int argc, char **argv)
{
	uint32_t scales[MAX_SCALES] = { 64, 128, 256 };
	int nscales = 3, json = 0, ok = 1;
	uint64_t bytes = 4096;
	unsigned planes = 2;
	const sim_transport_ops *ops[2] = { &sim_roce_ops, &sim_mrp_ops };
	int t0 = 0, t1 = 2;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--hosts") && v) {
			if (parse_hosts(v, scales, &nscales) != 0) {
				fprintf(stderr, "bench_scale: --hosts: '%s' is not a list of 2-%u\n", v,
					SIM_MAX_HOSTS);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--bytes") && v) {
			if (sim_parse_bytes(v, &bytes) != 0 || bytes == 0 || bytes > (1u << 30)) {
				fprintf(stderr, "bench_scale: --bytes: '%s' is not a size of 1B-1GiB\n", v);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--planes") && v) {
			planes = (unsigned)atoi(v);
			if (planes < 1 || planes > SIM_MAX_PLANES) {
				fprintf(stderr, "bench_scale: --planes: '%s' is out of range (1-%d)\n", v,
					SIM_MAX_PLANES);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--transport") && v) {
			if (!strcmp(v, "roce"))
				t1 = 1;
			else if (!strcmp(v, "metaroce"))
				t0 = 1;
			else if (strcmp(v, "both")) {
				fprintf(stderr, "bench_scale: --transport: '%s' is not roce, metaroce or both\n",
					v);
				return 2;
			}
			i++;
		} else {
			usage();
			return 2;
		}
	}

	if (json)
		printf("{\"benchmark\":\"sim_scale\",\"pattern\":\"all_to_all\",\"bytes\":%llu,"
		       "\"planes\":%u,\"hosts_per_leaf\":%d,\"goal\":\"1024 hosts in under 600 s\","
		       "\"scales\":[",
		       (unsigned long long)bytes, planes, HOSTS_PER_LEAF);
	else
		printf("metaroce-sim scale: all-to-all of %llu B per flow, %u plane%s, leaf-spine of "
		       "%d hosts per leaf (goal: 1,024 hosts in under 10 minutes)\n"
		       "%6s %-9s %9s %9s %9s %12s %11s %10s %10s %9s\n",
		       (unsigned long long)bytes, planes, planes > 1 ? "s" : "", HOSTS_PER_LEAF, "hosts",
		       "transport", "flows", "wall s", "cpu s", "events", "ev/cpu-s", "world MB",
		       "B/flow", "sim ms");
	for (int k = 0; k < nscales && ok; k++) {
		sample r[2];
		memset(r, 0, sizeof(r));
		for (int t = t0; t < t1; t++) {
			if (run_child(scales[k], planes, bytes, ops[t], &r[t]) != 0) {
				perror("bench_scale: fork");
				return 2;
			}
			if (!r[t].ok) {
				fprintf(stderr, "bench_scale: %u hosts, %s: %s\n", scales[k], ops[t]->name,
					r[t].err);
				ok = 0;
			}
			if (!json)
				printf("%6u %-9s %9llu %9.2f %9.2f %12llu %9.2f M %10.1f %10.0f %9.3f\n",
				       scales[k], ops[t]->name, (unsigned long long)r[t].flows, r[t].wall_s,
				       r[t].cpu_s, (unsigned long long)r[t].events, eps(&r[t]) / 1e6,
				       (double)(r[t].rss_built - r[t].rss_start) / 1e6, per_flow(&r[t]),
				       (double)r[t].sim_ns / 1e6);
		}
		int both = t0 == 0 && t1 == 2;
		if (json) {
			printf("%s{\"hosts\":%u,\"flows\":%llu,\"runs\":[", k ? "," : "", scales[k],
			       (unsigned long long)r[t0].flows);
			for (int t = t0; t < t1; t++)
				printf("%s{\"transport\":\"%s\",\"ok\":%s,\"wall_s\":%.3f,\"cpu_s\":%.3f,"
				       "\"events\":%llu,\"events_per_cpu_s\":%.0f,\"world_bytes\":%llu,"
				       "\"peak_rss_bytes\":%llu,\"bytes_per_flow\":%.0f,\"sim_time_ns\":%llu,"
				       "\"drops\":%llu,\"nic_drops\":%llu}",
				       t > t0 ? "," : "", ops[t]->name, r[t].ok ? "true" : "false", r[t].wall_s,
				       r[t].cpu_s, (unsigned long long)r[t].events, eps(&r[t]),
				       (unsigned long long)(r[t].rss_built - r[t].rss_start),
				       (unsigned long long)r[t].rss_peak, per_flow(&r[t]),
				       (unsigned long long)r[t].sim_ns, (unsigned long long)r[t].drops,
				       (unsigned long long)r[t].nic_drops);
			printf("]");
			if (both)
				printf(",\"metaroce_vs_roce\":{\"cpu_time\":%.3f,\"events_per_cpu_s\":%.3f,"
				       "\"bytes_per_flow\":%.3f,\"sim_time\":%.3f}",
				       ratio(r[1].cpu_s, r[0].cpu_s), ratio(eps(&r[1]), eps(&r[0])),
				       ratio(per_flow(&r[1]), per_flow(&r[0])),
				       ratio((double)r[1].sim_ns, (double)r[0].sim_ns));
			printf("}");
		} else if (both) {
			printf("%6s %-9s cpu time %.2fx, events/s %.2fx, memory per flow %.2fx, "
			       "completion %.2fx of roce\n",
			       "", "ratio", ratio(r[1].cpu_s, r[0].cpu_s), ratio(eps(&r[1]), eps(&r[0])),
			       ratio(per_flow(&r[1]), per_flow(&r[0])),
			       ratio((double)r[1].sim_ns, (double)r[0].sim_ns));
		}
		fflush(stdout);
	}
	if (json)
		printf("],\"verified\":%s}\n", ok ? "true" : "false");
	else
		printf("%s\n", ok ? "every run finished, verified, no violation, no NIC drop" : "FAILED");
	return ok ? 0 : 1;
}
