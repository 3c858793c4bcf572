/*
 * PFC in the switch model and the lossless roce-pfc baseline: pauses and
 * resumes exactly at the thresholds, never drops, stays within xoff +
 * headroom, and head-of-line blocks a victim that shares an ingress with a
 * congested flow (and only such a victim).
 */
#include <inttypes.h>

#include "report.h"
#include "roce.h"
#include "sim_test.h"

/* 15:1 incast into host 0 on one switch: the receiver's port is
 * overloaded. DCQCN off, so nothing but PFC holds the senders back. */
static const char *incast_yaml = "hosts: 16\n"
				 "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n"
				 "pfc: {xoff: 120KB, xon: 100KB}\n"
				 "transport:\n"
				 "  roce-pfc: {dcqcn: 0}\n"
				 "flows:\n"
				 "  - {pattern: incast, receiver: 0, bytes: 512KB}\n";

static void run_done(sim *s)
{
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_DONE);
	assert_int_equal(sim_verify(s), 0);
	assert_int_equal(sim_get_stats(s)->violations, 0);
}

/*
 * Event by event: a pause frame is sent for an ingress only when it holds
 * more than xoff, a resume only when it has drained to xon or less; no
 * ingress ever holds more than xoff + headroom; nothing is dropped.
 */
static void test_thresholds_lossless(void **state)
{
	sim_config cfg;
	sim *s;
	uint64_t pauses = 0, resumes = 0, max_ingress = 0;

	(void)state;
	cfg_from(&cfg, incast_yaml);
	s = sim_from(&cfg, &sim_roce_pfc_ops);

	size_t nl = sim_link_count(s);
	uint64_t *last_p = calloc(nl, sizeof(*last_p)), *last_r = calloc(nl, sizeof(*last_r));
	uint64_t *tx_at_pause = calloc(nl, sizeof(*tx_at_pause));
	uint8_t *was_paused = calloc(nl, 1);
	uint64_t paused_intervals = 0;

	assert_non_null(last_p);
	assert_non_null(last_r);
	assert_non_null(tx_at_pause);
	assert_non_null(was_paused);
	while (sim_get_stats(s)->flows_done < sim_flow_count(s)) {
		assert_int_equal(sim_step(s), 1);
		for (size_t i = 0; i < nl; i++) {
			const sim_link *l = sim_link_get(s, i);

			if (l->pfc_pauses != last_p[i]) {
				assert_int_equal(l->pfc_pauses, last_p[i] + 1);
				if (l->pfc_ingress_bytes <= cfg.pfc_xoff)
					fail_msg("link %zu paused at %" PRIu64 " bytes (xoff %" PRIu64 ")", i,
						 l->pfc_ingress_bytes, cfg.pfc_xoff);
				last_p[i] = l->pfc_pauses;
			}
			if (l->pfc_resumes != last_r[i]) {
				assert_int_equal(l->pfc_resumes, last_r[i] + 1);
				if (l->pfc_ingress_bytes > cfg.pfc_xon)
					fail_msg("link %zu resumed at %" PRIu64 " bytes (xon %" PRIu64 ")", i,
						 l->pfc_ingress_bytes, cfg.pfc_xon);
				last_r[i] = l->pfc_resumes;
			}
			/* a paused sender starts no frame: at most the one on the
			 * wire when the pause took effect leaves */
			if (l->pfc_paused && !was_paused[i]) {
				tx_at_pause[i] = l->tx_pkts;
				paused_intervals++;
			}
			was_paused[i] = (uint8_t)l->pfc_paused;
			if (l->pfc_paused && l->tx_pkts > tx_at_pause[i] + 1)
				fail_msg("link %zu sent %" PRIu64 " frames while paused", i,
					 l->tx_pkts - tx_at_pause[i]);
			assert_true(l->pfc_ingress_bytes <= cfg.pfc_xoff + l->pfc_headroom);
			/* and at them: above xoff the ingress is paused, at or
			 * below xon it is not (between the two it keeps its state) */
			if (l->pfc_ingress_bytes > cfg.pfc_xoff && !l->pfc_xoff_sent)
				fail_msg("link %zu holds %" PRIu64 " bytes above xoff %" PRIu64 " unpaused", i,
					 l->pfc_ingress_bytes, cfg.pfc_xoff);
			if (l->pfc_ingress_bytes <= cfg.pfc_xon && l->pfc_xoff_sent)
				fail_msg("link %zu still paused at %" PRIu64 " bytes (xon %" PRIu64 ")", i,
					 l->pfc_ingress_bytes, cfg.pfc_xon);
		}
	}
	assert_int_equal(sim_verify(s), 0);
	assert_int_equal(sim_get_stats(s)->violations, 0);
	for (size_t i = 0; i < nl; i++) {
		const sim_link *l = sim_link_get(s, i);

		for (unsigned c = 0; c < SIM_DROP_N; c++)
			assert_int_equal(l->drops[c], 0);
		pauses += l->pfc_pauses;
		resumes += l->pfc_resumes;
		if (l->pfc_max_ingress > max_ingress)
			max_ingress = l->pfc_max_ingress;
		assert_int_equal(l->pfc_ingress_bytes, 0); /* all forwarded */
	}
	assert_int_equal(sim_get_stats(s)->noroute, 0);
	assert_true(pauses > 0);
	assert_true(resumes > 0);
	assert_true(max_ingress > cfg.pfc_xoff); /* it did cross: the pause was needed */
	assert_true(paused_intervals > 0);        /* senders were held, not only told */
	printf("# roce-pfc incast 15:1: %" PRIu64 " pause, %" PRIu64 " resume frames, max ingress %" PRIu64
	       " B (xoff %" PRIu64 ")\n",
	       pauses, resumes, max_ingress, cfg.pfc_xoff);
	free(last_p);
	free(last_r);
	free(tx_at_pause);
	free(was_paused);
	sim_del(s);

	/* the same overload without PFC drops: the scenario does overload */
	s = sim_from(&cfg, &sim_roce_ops);
	run_done(s);

	uint64_t overflow = 0, p2 = 0;

	for (size_t i = 0; i < sim_link_count(s); i++) {
		overflow += sim_link_get(s, i)->drops[SIM_DROP_OVERFLOW];
		p2 += sim_link_get(s, i)->pfc_pauses;
	}
	assert_true(overflow > 0);
	assert_int_equal(p2, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

/* A pause reaches back to the hosts across a leaf-spine fabric: the
 * senders' own NIC ports get paused (hop by hop), still without a drop. */
static void test_propagation_to_hosts(void **state)
{
	sim_config cfg;
	sim *s;
	uint64_t host_paused = 0, fabric_paused = 0, drops = 0;

	(void)state;
	cfg_from(&cfg, "hosts: 8\n"
		       "fabric: {type: leafspine, leaves: 2, spines: 2}\n"
		       "pfc: {xoff: 60KB, xon: 50KB}\n"
		       "transport:\n"
		       "  roce-pfc: {dcqcn: 0}\n"
		       "flows:\n"
		       "  - {src: 4, dst: 0, bytes: 2MB}\n"
		       "  - {src: 5, dst: 0, bytes: 2MB}\n"
		       "  - {src: 6, dst: 0, bytes: 2MB}\n"
		       "  - {src: 7, dst: 0, bytes: 2MB}\n");
	s = sim_from(&cfg, &sim_roce_pfc_ops);
	run_done(s);
	for (size_t i = 0; i < sim_link_count(s); i++) {
		const sim_link *l = sim_link_get(s, i);

		for (unsigned c = 0; c < SIM_DROP_N; c++)
			drops += l->drops[c];
		if (l->from.kind == SIM_NODE_HOST)
			host_paused += l->pfc_pauses;
		else if (l->from.kind == SIM_NODE_SPINE)
			fabric_paused += l->pfc_pauses;
	}
	assert_int_equal(drops, 0);
	assert_true(fabric_paused > 0); /* the leaf paused the spines ... */
	assert_true(host_paused > 0);   /* ... and the pause reached the senders */
	sim_del(s);
	sim_config_free(&cfg);
}

/*
 * Head-of-line blocking. Host 0 sends to host 2 (which hosts 1 and 3 also
 * flood) and to host 4 (idle): the second flow shares host 0's ingress with
 * a congested flow. Host 5 sends to host 6, sharing nothing. Under PFC the
 * victim is slowed; without PFC it is not; the unrelated flow is not either.
 */
static void hol_fcts(const sim_transport_ops *ops, uint64_t *victim, uint64_t *other)
{
	sim_config cfg;
	sim *s;

	cfg_from(&cfg, "hosts: 7\n"
		       "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 100KB}\n"
		       "pfc: {xoff: 100KB, xon: 80KB}\n"
		       "transport:\n"
		       "  roce-pfc: {dcqcn: 0}\n"
		       "flows:\n"
		       "  - {src: 0, dst: 2, bytes: 4MB}\n"
		       "  - {src: 1, dst: 2, bytes: 4MB}\n"
		       "  - {src: 3, dst: 2, bytes: 4MB}\n"
		       "  - {src: 0, dst: 4, bytes: 2MB}\n"
		       "  - {src: 5, dst: 6, bytes: 2MB}\n");
	s = sim_from(&cfg, ops);
	run_done(s);
	*victim = sim_flow_get(s, 3)->finish_ns - sim_flow_get(s, 3)->start_ns;
	*other = sim_flow_get(s, 4)->finish_ns - sim_flow_get(s, 4)->start_ns;
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_head_of_line(void **state)
{
	uint64_t v_lossy, o_lossy, v_pfc, o_pfc;

	(void)state;
	hol_fcts(&sim_roce_ops, &v_lossy, &o_lossy);
	hol_fcts(&sim_roce_pfc_ops, &v_pfc, &o_pfc);
	printf("# victim fct: lossy %" PRIu64 " ns, pfc %" PRIu64 " ns; unrelated: %" PRIu64 " / %" PRIu64
	       " ns\n",
	       v_lossy, v_pfc, o_lossy, o_pfc);
	/* 2 MB alone at 100 Gbit/s take ~170 us; sharing host 0's NIC with
	 * the congested flow ~340 us; paused with it, much longer */
	assert_true(v_pfc > v_lossy * 3 / 2);
	assert_int_equal(o_pfc, o_lossy); /* the unrelated flow never notices */
}

/*
 * roce-pfc with DCQCN on (the default) and off, on a longer 15:1 incast:
 * both lossless; with DCQCN the receiver's CNPs cut the senders' rates, so
 * the switch holds the senders back with pauses for less of the time.
 */
static void pfc_paused(const char *dcqcn, uint64_t *paused_ns, uint64_t *pauses, uint64_t *ce)
{
	char yaml[512];
	sim_config cfg;
	sim *s;
	uint64_t drops = 0;

	snprintf(yaml, sizeof(yaml),
		 "hosts: 16\n"
		 "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 40KB}\n"
		 "pfc: {xoff: 120KB, xon: 100KB}\n"
		 "transport:\n"
		 "  roce-pfc: {dcqcn: %s}\n"
		 "flows:\n"
		 "  - {pattern: incast, receiver: 0, bytes: 4MB}\n",
		 dcqcn);
	cfg_from(&cfg, yaml);
	s = sim_from(&cfg, &sim_roce_pfc_ops);
	run_done(s);
	*paused_ns = *pauses = *ce = 0;
	for (size_t i = 0; i < sim_link_count(s); i++) {
		const sim_link *l = sim_link_get(s, i);

		for (unsigned c = 0; c < SIM_DROP_N; c++)
			drops += l->drops[c];
		*paused_ns += l->pfc_paused_ns;
		*pauses += l->pfc_pauses;
		*ce += l->ce_marks;
	}
	assert_int_equal(drops, 0);
	sim_del(s);
	sim_config_free(&cfg);
}

static void test_dcqcn_on_off(void **state)
{
	uint64_t on_ns, on_p, on_ce, off_ns, off_p, off_ce;

	(void)state;
	pfc_paused("1", &on_ns, &on_p, &on_ce);
	pfc_paused("0", &off_ns, &off_p, &off_ce);
	printf("# roce-pfc 15:1 incast of 4 MB: dcqcn on: paused %" PRIu64 " ns in %" PRIu64
	       " pauses, %" PRIu64 " CE; off: %" PRIu64 " ns in %" PRIu64 " pauses, %" PRIu64 " CE\n",
	       on_ns, on_p, on_ce, off_ns, off_p, off_ce);
	assert_true(off_p > 0);
	assert_true(on_ce > 0 && off_ce > 0);
	assert_true(on_ns < off_ns);
}

/*
 * Per-priority pause: a pause stops only the lossless class. Hosts 1-4 flood
 * host 0, so the switch pauses their NIC links; hosts 5 and 6 send to host
 * 1, whose CNPs (DCQCN on) leave by host 1's paused link. They are in the
 * CNP class, which pauses do not stop: frames of it start while the link is
 * paused, and still nothing is dropped. With DCQCN off there are no CNPs
 * and a paused link starts nothing.
 */
static uint64_t paused_tx(const char *dcqcn, uint64_t *pauses)
{
	char yaml[512];
	sim_config cfg;
	sim *s;
	uint64_t drops = 0, n;

	snprintf(yaml, sizeof(yaml),
		 "hosts: 7\n"
		 "link: {rate: 100Gbps, delay: 1us, queue: 1MB, ecn_threshold: 40KB}\n"
		 "pfc: {xoff: 60KB, xon: 50KB}\n"
		 "transport:\n"
		 "  roce-pfc: {dcqcn: %s}\n"
		 "flows:\n"
		 "  - {src: 1, dst: 0, bytes: 4MB}\n"
		 "  - {src: 2, dst: 0, bytes: 4MB}\n"
		 "  - {src: 3, dst: 0, bytes: 4MB}\n"
		 "  - {src: 4, dst: 0, bytes: 4MB}\n"
		 "  - {src: 5, dst: 1, bytes: 4MB}\n"
		 "  - {src: 6, dst: 1, bytes: 4MB}\n",
		 dcqcn);
	cfg_from(&cfg, yaml);
	s = sim_from(&cfg, &sim_roce_pfc_ops);
	run_done(s);
	for (size_t i = 0; i < sim_link_count(s); i++)
		for (unsigned c = 0; c < SIM_DROP_N; c++)
			drops += sim_link_get(s, i)->drops[c];
	assert_int_equal(drops, 0);
	*pauses = link_named(s, "p0:host1->switch")->pfc_pauses;
	n = link_named(s, "p0:host1->switch")->pfc_paused_tx;
	sim_del(s);
	sim_config_free(&cfg);
	return n;
}

static void test_cnp_class_passes_pause(void **state)
{
	uint64_t on_p, off_p, on = paused_tx("1", &on_p), off = paused_tx("0", &off_p);

	(void)state;
	printf("# host1's paused link: dcqcn on: %" PRIu64 " CNP frames started while paused (%" PRIu64
	       " pauses); off: %" PRIu64 " (%" PRIu64 " pauses)\n",
	       on, on_p, off, off_p);
	assert_true(on_p > 0 && off_p > 0);
	assert_true(on > 0);
	assert_int_equal(off, 0);
}

static void test_config_errors(void **state)
{
	(void)state;
	assert_non_null(strstr(cfg_error("hosts: 2\npfc: {xoff: 100KB, xon: 200KB}\n"),
			       "xon (200000) must not exceed xoff"));
	assert_non_null(strstr(cfg_error("hosts: 2\npfc: {headroom: 0}\n"), "pfc.headroom: '0'"));
	assert_non_null(strstr(cfg_error("hosts: 2\npfc: {xof: 1}\n"), "unknown key 'xof'"));
	assert_non_null(strstr(cfg_error("hosts: 2\ntransport:\n  roce: {dcqcn: 0}\n"),
			       "unknown key 'dcqcn'"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thresholds_lossless),
		cmocka_unit_test(test_propagation_to_hosts),
		cmocka_unit_test(test_head_of_line),
		cmocka_unit_test(test_dcqcn_on_off),
		cmocka_unit_test(test_cnp_class_passes_pause),
		cmocka_unit_test(test_config_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
