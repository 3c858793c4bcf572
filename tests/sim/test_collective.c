/*
 * Collectives: the expansion into steps (who sends to whom, what each step
 * waits for), runs under every transport in which no step starts before its
 * inputs are complete and every byte arrives, the core's check of that
 * rule, scenario errors, shared buffers, and same seed -> same result.
 */
#include <dirent.h>
#include <inttypes.h>

#include "mrp_host.h"
#include "report.h"
#include "roce.h"
#include "sim_test.h"

static const sim_transport_ops *const transports[] = {&sim_roce_ops, &sim_roce_pfc_ops, &sim_mrp_ops};

/* The dependencies are those of the algorithm: a ring step waits for what
 * the sender received in the previous step; recursive doubling for what it
 * got from its last partner; pairwise all-to-all for its previous send and
 * receive. Every flow of a step has one peer, every rank sends once. */
static void test_expansion(void **state)
{
	(void)state;
	for (unsigned type = 0; type < SIM_COLL_N; type++) {
		for (uint32_t C = 1; C <= 2; C++) {
			uint32_t n = 8, steps = sim_coll_steps(type, n);
			uint32_t nf = steps * n * C;

			assert_int_equal(steps, type == SIM_COLL_ALLREDUCE_RING ? 14
						: type == SIM_COLL_ALLREDUCE_RD   ? 3
										  : 7);
			for (uint32_t k = 0; k < nf; k++) {
				uint32_t st, ch, sr, dr, deps[2];
				unsigned nd = sim_coll_flow(type, n, C, k, &st, &ch, &sr, &dr, deps);

				assert_int_equal(st, k / C / n);
				assert_int_equal(ch, k % C);
				assert_int_equal(sr, k / C % n);
				assert_true(dr < n && dr != sr);
				assert_int_equal(nd, st == 0 ? 0 : (type == SIM_COLL_ALLTOALL ? 2 : 1));
				for (unsigned d = 0; d < nd; d++) {
					uint32_t dst_, dch, dsr, ddr, dd[2];

					assert_true(deps[d] < k);
					sim_coll_flow(type, n, C, deps[d], &dst_, &dch, &dsr, &ddr, dd);
					assert_int_equal(dst_, st - 1); /* the previous step */
					assert_int_equal(dch, ch);      /* of the same channel */
					if (type == SIM_COLL_ALLTOALL && d == 0) {
						assert_int_equal(dsr, sr); /* its own send */
						assert_int_equal(sim_coll_dep_kind(type, d), SIM_DEP_SENT);
					} else {
						assert_int_equal(ddr, sr); /* what it received */
						assert_int_equal(sim_coll_dep_kind(type, d),
								 SIM_DEP_RECEIVED);
					}
				}
			}
		}
	}
	/* sizes: per flow */
	assert_int_equal(sim_coll_chunk(SIM_COLL_ALLREDUCE_RING, 64, 1, 1ull << 30), 1ull << 24);
	assert_int_equal(sim_coll_chunk(SIM_COLL_ALLREDUCE_RING, 64, 2, 1ull << 30), 1ull << 23);
	assert_int_equal(sim_coll_chunk(SIM_COLL_ALLREDUCE_RD, 64, 1, 1000), 1000);
	assert_int_equal(sim_coll_chunk(SIM_COLL_ALLTOALL, 64, 1, 8), 1);
	assert_int_equal(sim_coll_chunk(SIM_COLL_ALLGATHER, 3, 1, 10), 4);
}

/* Runs cfg and checks: every flow done and verified (unless shared), no
 * violation, and every step started exactly when the last of its inputs
 * arrived (and the send it waits for completed). Counts in *early the
 * steps that started before an input they forward was acknowledged to its
 * sender (NULL: not counted). */
static void run_and_check_early(const sim_config *cfg, const sim_transport_ops *ops,
				uint64_t *time_ns, size_t *early)
{
	sim *s = sim_from(cfg, ops);
	sim_result r;

	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_DONE);
	assert_int_equal(sim_verify(s), 0);
	if (sim_get_stats(s)->violations)
		fail_msg("%s: %s", ops->name, sim_get_stats(s)->msgs[0]);
	for (size_t i = 0; i < sim_flow_count(s); i++) {
		const sim_flow *f = sim_flow_get(s, i);
		uint64_t ready = f->coll >= 0 ? cfg->colls[f->coll].start_ns : f->start_ns;

		assert_true(f->done);
		assert_int_equal(f->status, 0);
		assert_true(f->verified || f->unchecked);
		int before_ack = 0;

		for (uint32_t d = 0; d < f->ndeps; d++) {
			const sim_flow *g = sim_flow_get(s, f->deps[d]);
			uint64_t at = f->dep_kind[d] == SIM_DEP_RECEIVED ? g->arrived_ns : g->finish_ns;

			assert_true(g->done);
			assert_true(g->arrived_ns <= g->finish_ns); /* it arrives, then is acknowledged */
			if (at > ready)
				ready = at;
			if (f->dep_kind[d] == SIM_DEP_RECEIVED && g->finish_ns > f->start_ns)
				before_ack = 1;
		}
		if (early)
			*early += (size_t)before_ack;
		if (f->conn_prev >= 0) { /* the same pair, channel, one step earlier */
			const sim_flow *p = sim_flow_get(s, (size_t)f->conn_prev);

			assert_int_equal(p->src, f->src);
			assert_int_equal(p->dst, f->dst);
			assert_int_equal(p->channel, f->channel);
			assert_int_equal(p->step + 1, f->step);
		}
		if (f->coll >= 0 && f->start_ns != ready)
			fail_msg("%s: flow %zu (step %" PRIu32 ") started at %" PRIu64
				 " ns, its inputs were complete at %" PRIu64 " ns",
				 ops->name, i, f->step, f->start_ns, ready);
	}
	assert_int_equal(sim_result_collect(s, SIM_RUN_DONE, &r), 0);
	assert_int_equal(r.ncolls, 1);
	assert_int_equal(r.colls[0].finished, r.colls[0].flows);
	assert_true(r.colls[0].time_ns != SIM_NEVER && r.colls[0].time_ns > 0);
	*time_ns = r.colls[0].time_ns;
	sim_result_free(&r);
	sim_del(s);
}

static void run_and_check(const sim_config *cfg, const sim_transport_ops *ops, uint64_t *time_ns)
{
	run_and_check_early(cfg, ops, time_ns, NULL);
}

/*
 * A step forwards what arrived: it starts when the data is at its rank,
 * not when the rank that sent it has it acknowledged. With write_imm (the
 * default) every ring step but the first starts before its input's ACK is
 * back, and an 8-byte ring all-reduce is faster than with op write, which
 * its receiver cannot see arrive (its steps wait for the sender's
 * completion), by about that ACK's trip per step.
 */
static void test_steps_start_on_arrival(void **state)
{
	const char *ops[2] = {"write_imm", "write"};
	char yaml[256];

	(void)state;
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
		uint64_t t[2];
		size_t early[2] = {0, 0};

		for (int o = 0; o < 2; o++) {
			sim_config cfg;

			snprintf(yaml, sizeof(yaml),
				 "hosts: 8\n"
				 "collectives:\n"
				 "  - {type: allreduce_ring, size: 8B, op: %s}\n",
				 ops[o]);
			cfg_from(&cfg, yaml);
			run_and_check_early(&cfg, transports[i], &t[o], &early[o]);
			sim_config_free(&cfg);
		}
		printf("# %-9s ring all-reduce 8 ranks, 8 B: write_imm %" PRIu64 " ns (%zu of 112 steps "
		       "before the input's ACK), write %" PRIu64 " ns (%zu)\n",
		       transports[i]->name, t[0], early[0], t[1], early[1]);
		assert_int_equal(early[0], 13 * 8); /* every step after the first */
		assert_int_equal(early[1], 0);
		assert_true(t[0] * 10 < t[1] * 8);
	}
}

static void test_runs_respect_dependencies(void **state)
{
	static const char *const types[] = {"allreduce_ring", "allreduce_rd", "alltoall", "allgather"};
	char yaml[512];

	(void)state;
	for (size_t t = 0; t < 4; t++) {
		sim_config cfg;

		snprintf(yaml, sizeof(yaml),
			 "hosts: 9\n"
			 "planes: 2\n"
			 "fabric: {type: leafspine, leaves: 3, spines: 2}\n"
			 "collectives:\n"
			 "  - {type: %s, ranks: [8, 1, 2, 3, 4, 5, 6, 7], channels: 2,\n"
			 "     sizes: [8, 256KiB], start: 3us}\n",
			 types[t]);
		cfg_from(&cfg, yaml);
		for (size_t k = 0; k < 2; k++) {
			cfg.coll_entry = 0;
			cfg.coll_size = k;
			for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
				uint64_t ns;

				run_and_check(&cfg, transports[i], &ns);
				printf("# %-15s %6s %-9s %10" PRIu64 " ns\n", types[t], k ? "256KiB" : "8B",
				       transports[i]->name, ns);
			}
		}
		sim_config_free(&cfg);
	}
}

/* The core's check can fail: a flow told (after the build) to wait for a
 * flow that has not completed is reported when it starts. */
static void test_core_check_fires(void **state)
{
	sim_config cfg;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 3\n"
		       "flows:\n"
		       "  - {src: 0, dst: 1, bytes: 1MB, start: 0}\n"
		       "  - {src: 1, dst: 2, bytes: 1MB, start: 1us}\n");
	s = sim_from(&cfg, &sim_roce_ops);
	sim_flow_get(s, 1)->ndeps = 1;
	sim_flow_get(s, 1)->deps[0] = 0;
	sim_flow_get(s, 1)->step = 1;
	sim_run(s, SIM_NEVER);
	assert_true(sim_get_stats(s)->violations >= 1);
	assert_non_null(strstr(sim_get_stats(s)->msgs[0], "started before its input flow 0 completed"));
	sim_del(s);
	/* the same for an input that must have arrived */
	s = sim_from(&cfg, &sim_roce_ops);
	sim_flow_get(s, 1)->ndeps = 1;
	sim_flow_get(s, 1)->deps[0] = 0;
	sim_flow_get(s, 1)->dep_kind[0] = SIM_DEP_RECEIVED;
	sim_flow_get(s, 1)->step = 1;
	sim_run(s, SIM_NEVER);
	assert_true(sim_get_stats(s)->violations >= 1);
	assert_non_null(strstr(sim_get_stats(s)->msgs[0], "started before its input flow 0 arrived"));
	sim_del(s);
	sim_config_free(&cfg);
}

/* Above verify_max the flows share one source and one sink: memory is
 * bounded, the run completes, and nothing claims to be verified. */
static void test_shared_buffers(void **state)
{
	sim_config cfg;
	uint64_t ns;
	sim *s;

	(void)state;
	cfg_from(&cfg, "hosts: 4\n"
		       "collectives:\n"
		       "  - {type: allreduce_ring, size: 4MiB, verify_max: 1MiB}\n");
	run_and_check(&cfg, &sim_roce_ops, &ns);
	s = sim_from(&cfg, &sim_roce_ops);
	for (size_t i = 0; i < sim_flow_count(s); i++) {
		assert_true(sim_flow_get(s, i)->unchecked);
		assert_ptr_equal(sim_flow_get(s, i)->dst_buf, sim_flow_get(s, 0)->dst_buf);
	}
	sim_del(s);
	sim_config_free(&cfg);
}

/* Same seed, same times (with random loss, under every transport). */
static void test_deterministic(void **state)
{
	sim_config cfg;
	uint64_t a, b;

	(void)state;
	cfg_from(&cfg, "hosts: 8\n"
		       "planes: 2\n"
		       "fabric: {type: leafspine, leaves: 2, spines: 2}\n"
		       "link: {loss: 0.5%}\n"
		       "collectives:\n"
		       "  - {type: alltoall, size: 2MiB}\n");
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
		run_and_check(&cfg, transports[i], &a);
		run_and_check(&cfg, transports[i], &b);
		assert_int_equal(a, b);
	}
	sim_config_free(&cfg);
}

/* Steps accepted mid-run on hosts whose NICs are busy (16 hosts, 2:1,
 * 4 MiB): every transport's host invariants hold; MetaRoCE's host once
 * failed its "nothing ready waits while the NIC has room" check here. */
static void test_busy_hosts(void **state)
{
	sim_config cfg;
	uint64_t ns;

	(void)state;
	cfg_from(&cfg, "hosts: 16\n"
		       "planes: 2\n"
		       "fabric: {type: leafspine, leaves: 4, spines: 2}\n"
		       "collectives:\n"
		       "  - {type: alltoall, channels: 2, size: 4MiB}\n"
		       "  - {type: allreduce_ring, channels: 2, size: 4MiB}\n");
	for (int e = 0; e < 2; e++) {
		cfg.coll_entry = e;
		for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
			run_and_check(&cfg, transports[i], &ns);
	}
	sim_config_free(&cfg);
}

static void test_scenario_errors(void **state)
{
	(void)state;
	assert_non_null(strstr(cfg_error("hosts: 6\ncollectives:\n  - {type: allreduce_rd, size: 1MB}\n"),
			       "power-of-two"));
	assert_non_null(strstr(cfg_error("hosts: 4\ncollectives:\n  - {type: alltoall, ranks: [0, 1, 1], "
					 "size: 1MB}\n"),
			       "host 1 is rank 1 and rank 2"));
	assert_non_null(strstr(cfg_error("hosts: 4\ncollectives:\n  - {type: alltoall, ranks: [0, 9], "
					 "size: 1MB}\n"),
			       "host 9 does not exist"));
	assert_non_null(strstr(cfg_error("hosts: 4\ncollectives:\n  - {type: alltoall, size: 1MB, "
					 "sizes: [8]}\n"),
			       "not both"));
	assert_non_null(strstr(cfg_error("hosts: 4\ncollectives:\n  - {type: alltoall}\n"), "needs size"));
	assert_non_null(strstr(cfg_error("hosts: 4\ncollectives:\n  - {type: allreduce, size: 1}\n"),
			       "'allreduce' is not one of"));
	assert_non_null(strstr(cfg_error("hosts: 4\ncollectives:\n  - {type: alltoall, size: 0}\n"),
			       "out of range"));
	assert_non_null(strstr(cfg_error("hosts: 4\ncollectives:\n  - {type: alltoall, ranks: 5, size: 8}\n"),
			       "5 ranks is out of range"));

	sim_config cfg;

	cfg_from(&cfg, "hosts: 4\ncollectives:\n  - {type: alltoall, sizes: {from: 8B, to: 1KiB, factor: 4}}\n");
	assert_int_equal(cfg.colls[0].nsizes, 4); /* 8, 32, 128, 512 */
	assert_int_equal(cfg.colls[0].sizes[3], 512);
	sim_config_free(&cfg);
}

/* The shipped collectives scenarios load, and every collective builds at
 * its largest size (1 GiB: shared buffers, so memory stays small). */
static void test_shipped(void **state)
{
	const char *dir = getenv("SIM_SCENARIOS");
	char path[1024], err[512];
	struct dirent *e;
	DIR *d;
	int n = 0;

	(void)state;
	if (!dir)
		skip();
	snprintf(path, sizeof(path), "%s/collectives", dir);
	d = opendir(path);
	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		sim_config cfg;

		if (len < 5 || strcmp(e->d_name + len - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/collectives/%s", dir, e->d_name);
		if (sim_scenario_load(path, &cfg, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		assert_int_equal(cfg.hosts, 64);
		for (size_t i = 0; i < cfg.ncolls; i++) {
			const sim_coll_config *cc = &cfg.colls[i];
			sim *s;

			cfg.coll_entry = (int)i;
			cfg.coll_size = cc->nsizes - 1;
			if (sim_new(&cfg, &sim_roce_ops, &s, err, sizeof(err)) != 0)
				fail_msg("%s: %s", path, err);
			assert_int_equal(sim_flow_count(s),
					 (size_t)sim_coll_steps(cc->type, 64) * 64 * cc->channels);
			if (cc->sizes[cc->nsizes - 1] >= (1ull << 30))
				assert_true(sim_flow_get(s, 0)->unchecked);
			sim_del(s);
		}
		sim_config_free(&cfg);
		n++;
	}
	closedir(d);
	assert_true(n >= 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expansion),
		cmocka_unit_test(test_runs_respect_dependencies),
		cmocka_unit_test(test_steps_start_on_arrival),
		cmocka_unit_test(test_core_check_fires),
		cmocka_unit_test(test_shared_buffers),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_busy_hosts),
		cmocka_unit_test(test_scenario_errors),
		cmocka_unit_test(test_shipped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
