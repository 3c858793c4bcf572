/*
 * The link model's additions: Gilbert-Elliott (bursty) loss matches its
 * configured average and burst length; jitter delays packets without
 * reordering them; a fault in one direction of a cable drops that
 * direction only (and a host is told only of its own port); set_link
 * changes take effect at their time; the time series add up; the same seed
 * gives the same JSON document, byte for byte.
 */
#include <jansson.h>

#include "mrp_host.h"
#include "report.h"
#include "roce.h"
#include "sim_test.h"

/* ------------------------------------------------ a recording receiver */

#define REC_MAX 400000

typedef struct rec {
	uint32_t n;                 /* packets received */
	uint8_t got[REC_MAX];       /* by sequence number (host 0's train) */
	uint64_t at[REC_MAX];       /* arrival time */
	uint32_t order_breaks;      /* arrivals with a lower seq than the last */
	uint64_t last_seq;
	uint64_t from1;             /* packets from host 1 */
} rec;

static rec *R;

static void rec_on_packet(void *hs, unsigned plane, sim_pkt *p, uint64_t now)
{
	probe_host *ph = hs;
	uint64_t seq = 0;
	uint32_t from = 0;

	(void)plane;
	memcpy(&seq, p->data, 8);
	memcpy(&from, p->data + 8, 4);
	if (from == 0 && seq < REC_MAX) {
		if (R->n && seq < R->last_seq)
			R->order_breaks++;
		R->last_seq = seq;
		R->got[seq] = 1;
		R->at[seq] = now;
		R->n++;
	} else if (from == 1) {
		R->from1++;
	}
	probe_on_packet(hs, plane, p, now); /* counts link events etc. too */
	(void)ph;
}

static const sim_transport_ops rec_ops = {
	.name = "probe",
	.host_new = probe_host_new,
	.host_del = probe_host_del,
	.flow_start = probe_flow_start,
	.on_packet = rec_on_packet,
	.on_timer = probe_on_timer,
	.on_link = probe_on_link,
};

static sim *rec_sim(sim_config *cfg, const char *yaml)
{
	R = calloc(1, sizeof(*R));
	assert_non_null(R);
	cfg_from(cfg, yaml);
	return sim_from(cfg, &rec_ops);
}

static void rec_done(sim *s, sim_config *cfg)
{
	sim_del(s);
	sim_config_free(cfg);
	free(R);
	R = NULL;
}

/* 1,000-byte packets at 100 Gbit/s: one every 80 ns keeps the queue empty. */
static probe_plan train(uint32_t dst, uint32_t count)
{
	probe_plan p = {.dst = dst, .count = count, .len = 1000, .gap_ns = 80, .sport = 1000};

	return p;
}

/* Fraction lost and mean length of the runs of consecutive losses. */
static void loss_runs(uint32_t n, double *frac, double *mean_burst)
{
	uint32_t lost = 0, runs = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (!R->got[i]) {
			lost++;
			if (i == 0 || R->got[i - 1])
				runs++;
		}
	}
	*frac = (double)lost / n;
	*mean_burst = runs ? (double)lost / runs : 0;
}

/*
 * 200,000 full-size packets back to back over a link with 2 % average loss
 * in bursts of 8 on average: the chain steps once per full-size packet time,
 * so once per packet here. Expected: 4,000 lost in about 500 bursts. The
 * lost count is a sum of ~500 geometric burst lengths (sd about 7.5 each)
 * over a random number of bursts (sd about 22): its sd is about 250 (6 %),
 * so +-20 % is more than 3 sd. The mean burst length's sd is about
 * 7.5 / sqrt(500) = 0.34: 8 +- 1.5 is more than 4 sd. The same link with
 * independent losses (no loss_burst) has bursts of 1 / (1 - 0.02) = 1.02 on
 * average.
 */
static void test_gilbert_elliott(void **state)
{
	const uint32_t N = 200000;
	sim_config cfg;
	double frac, burst;

	(void)state;
	sim *s = rec_sim(&cfg, "hosts: 2\n"
			       "links: [{host: 0, loss: 2%, loss_burst: 8}]\n");
	/* a full-size packet (the MTU's payload and the wire overhead), sent
	 * the moment the last one has left: one chain step each */
	uint32_t full = cfg.mtu + SIM_WIRE_OVERHEAD;
	probe_plan pl = {.dst = 1, .count = N, .len = full,
			 .gap_ns = (full * 8ull * 1000000000ull + cfg.plane[0].host_link.rate_bps - 1) /
				   cfg.plane[0].host_link.rate_bps,
			 .sport = 1000};

	probe_add(s, 0, pl);
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_IDLE);
	loss_runs(N, &frac, &burst);
	print_message("Gilbert-Elliott: lost %.4f (want 0.02), mean burst %.2f (want 8)\n", frac,
		      burst);
	assert_true(frac > 0.016 && frac < 0.024);
	assert_true(burst > 6.5 && burst < 9.5);
	assert_int_equal(link_named(s, "p0:host0->switch")->drops[SIM_DROP_LOSS], N - R->n);
	rec_done(s, &cfg);

	s = rec_sim(&cfg, "hosts: 2\nlinks: [{host: 0, loss: 2%}]\n");
	probe_add(s, 0, train(1, N));
	sim_run(s, SIM_NEVER);
	loss_runs(N, &frac, &burst);
	print_message("independent: lost %.4f, mean burst %.2f\n", frac, burst);
	assert_true(frac > 0.016 && frac < 0.024);
	assert_true(burst < 1.2);
	rec_done(s, &cfg);
}

/*
 * A burst is a time on the wire, not a number of packets. The link of the
 * test above (2 %, bursts of 8 full-size packet times, 8 x 336.3 ns at
 * 100 Gbit/s with the default 4,096-byte MTU) carries:
 * - 1,000-byte packets every 80 ns (4.2 per full-size time): still 2 % lost
 *   (the average is a share of time), in runs of about 8 x 4.2 = 34 packets
 *   (asserted 25-45; the sd of the mean of ~120 geometric runs is under 3);
 * - 1,000-byte packets 10 us apart (about 30 full-size times; the chain
 *   forgets its state in that time: lambda^30 = (1 - p - 1/8)^30 = 0.02):
 *   2 % lost, nearly independently (mean run below 1.2). A sender that slows
 *   down or waits (a timeout) does not stretch a burst.
 */
static void test_gilbert_elliott_in_time(void **state)
{
	const uint32_t N = 200000;
	sim_config cfg;
	double frac, burst;

	(void)state;
	sim *s = rec_sim(&cfg, "hosts: 2\nlinks: [{host: 0, loss: 2%, loss_burst: 8}]\n");
	double per_slot = (double)(cfg.mtu + SIM_WIRE_OVERHEAD) * 8e9 / (double)cfg.plane[0].host_link.rate_bps / 80;

	probe_add(s, 0, train(1, N));
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_IDLE);
	loss_runs(N, &frac, &burst);
	print_message("dense: lost %.4f (want 0.02), mean run %.2f packets (want about %.1f)\n",
		      frac, burst, 8 * per_slot);
	assert_true(frac > 0.014 && frac < 0.026);
	assert_true(burst > 25 && burst < 45);
	rec_done(s, &cfg);

	const uint32_t M = 40000;
	s = rec_sim(&cfg, "hosts: 2\nlinks: [{host: 0, loss: 2%, loss_burst: 8}]\n");
	probe_plan sparse = train(1, M);
	sparse.gap_ns = 10000;
	probe_add(s, 0, sparse);
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_IDLE);
	loss_runs(M, &frac, &burst);
	print_message("sparse: lost %.4f (want 0.02), mean run %.2f packets\n", frac, burst);
	assert_true(frac > 0.015 && frac < 0.025);
	assert_true(burst < 1.2);
	rec_done(s, &cfg);
}

/*
 * Jitter of 5 us over a 1 us wire. Packets 10 us apart (more than the
 * jitter) take 2.16 us plus a uniform draw in [0, 5 us]: the mean of 2,000
 * draws is 2.5 us +- 32 ns (sd), so +-300 ns is about 9 sd. Packets 80 ns
 * apart still arrive in the order they were sent, never before the previous
 * one: a FIFO link turns jitter much larger than the packet spacing into a
 * delay near the largest draws (README "Links").
 */
static void test_jitter_keeps_order(void **state)
{
	sim_config cfg;
	uint32_t N = 2000;

	(void)state;
	sim *s = rec_sim(&cfg, "hosts: 2\nlink: {delay: 1us}\nlinks: [{host: 0, jitter: 5us}]\n");
	probe_plan p = train(1, N);

	p.gap_ns = 10000;
	probe_add(s, 0, p);
	sim_run(s, SIM_NEVER);
	assert_int_equal(R->n, N);

	uint64_t dmin = SIM_NEVER, dmax = 0;
	double sum = 0;

	for (uint32_t i = 0; i < N; i++) {
		uint64_t d = R->at[i] - (uint64_t)i * 10000; /* arrival - send time */

		sum += (double)d;
		if (d < dmin)
			dmin = d;
		if (d > dmax)
			dmax = d;
	}
	print_message("sparse: delay %.2f-%.2f us, mean %.3f us\n", dmin / 1e3, dmax / 1e3,
		      sum / N / 1e3);
	/* 2 serializations of 80 ns and 2 wires of 1 us, plus 0-5 us once */
	assert_true(dmin >= 2160 && dmin < 2160 + 100);
	assert_true(dmax <= 7160 && dmax > 7160 - 100);
	assert_true(sum / N > 2160 + 2500 - 300 && sum / N < 2160 + 2500 + 300);
	rec_done(s, &cfg);

	N = 20000;
	s = rec_sim(&cfg, "hosts: 2\nlink: {delay: 1us}\nlinks: [{host: 0, jitter: 5us}]\n");
	probe_add(s, 0, train(1, N));
	sim_run(s, SIM_NEVER);
	assert_int_equal(R->n, N);
	assert_int_equal(R->order_breaks, 0);
	for (uint32_t i = 1; i < N; i++) {
		if (R->at[i] < R->at[i - 1])
			fail_msg("packet %u arrived before packet %u", i, i - 1);
		assert_true(R->at[i] - (uint64_t)i * 80 <= 7160);
	}
	rec_done(s, &cfg);

	/* without jitter every packet takes exactly the same time */
	s = rec_sim(&cfg, "hosts: 2\nlink: {delay: 1us}\n");
	probe_add(s, 0, train(1, 100));
	sim_run(s, SIM_NEVER);
	for (uint32_t i = 0; i < 100; i++)
		assert_true(R->at[i] - (uint64_t)i * 80 == 2160);
	rec_done(s, &cfg);
}

/*
 * A black hole in one direction of host 0's cable (out: host 0 -> switch):
 * host 0's packets vanish, host 1's packets to host 0 arrive. Then a
 * link_down of host 1's receive direction only: host 0's packets are
 * dropped at the switch port, host 1 keeps sending, and is not told (its
 * port, its NIC's output, is up); a link_down of host 1's own output is
 * reported to it.
 */
static void test_one_direction(void **state)
{
	sim_config cfg;

	(void)state;
	sim *s = rec_sim(&cfg, "hosts: 2\n"
			       "events:\n"
			       "  - {at: 0, type: blackhole, host: 0, direction: out}\n");

	probe_add(s, 0, train(1, 500));
	probe_add(s, 1, train(0, 500));
	sim_run(s, SIM_NEVER);
	assert_int_equal(R->n, 0);
	assert_int_equal(probe_of(s, 0)->rx, 500); /* host 1 -> host 0 all arrived */
	assert_int_equal(link_named(s, "p0:host0->switch")->drops[SIM_DROP_BLACKHOLE], 500);
	assert_int_equal(link_named(s, "p0:switch->host0")->drops[SIM_DROP_BLACKHOLE], 0);
	assert_int_equal(probe_of(s, 0)->link_events, 0);
	rec_done(s, &cfg);

	s = rec_sim(&cfg, "hosts: 2\n"
			  "events:\n"
			  "  - {at: 0, type: link_down, switch: switch, port: host1, direction: out}\n"
			  "  - {at: 100us, type: link_down, host: 1, direction: out}\n");
	probe_add(s, 0, train(1, 500));
	probe_add(s, 1, train(0, 500));
	sim_run(s, SIM_NEVER);
	assert_int_equal(R->n, 0);
	assert_int_equal(link_named(s, "p0:switch->host1")->drops[SIM_DROP_DOWN], 500);
	assert_int_equal(probe_of(s, 0)->rx, 500);
	assert_int_equal(link_named(s, "p0:host1->switch")->state, SIM_LINK_DOWN);
	assert_int_equal(link_named(s, "p0:host0->switch")->state, SIM_LINK_UP);
	/* told once: at 100 us, when its own output went down */
	assert_int_equal(probe_of(s, 1)->link_events, 1);
	assert_int_equal(probe_of(s, 1)->link_down_events, 1);
	assert_int_equal(probe_of(s, 0)->link_events, 0);
	rec_done(s, &cfg);
}

/* A leaf-spine cable down in one direction only: the fabric withdraws that
 * direction from ECMP, the other direction still carries traffic. */
static void test_one_direction_fabric(void **state)
{
	sim_config cfg;

	(void)state;
	sim *s = rec_sim(&cfg, "hosts: 4\n"
			       "fabric: {type: leafspine, leaves: 2, spines: 1}\n"
			       "events:\n"
			       "  - {at: 0, type: link_down, switch: spine0, port: leaf1, direction: out}\n");
	probe_plan a = train(3, 200), b = train(0, 200);

	probe_add(s, 0, a); /* leaf0 -> spine0 -> leaf1: withdrawn, no route */
	probe_add(s, 3, b); /* leaf1 -> spine0 -> leaf0: fine */
	sim_run(s, SIM_NEVER);
	assert_int_equal(probe_of(s, 3)->rx, 0);
	assert_int_equal(probe_of(s, 0)->rx, 200);
	assert_int_equal(sim_get_stats(s)->noroute, 200);
	rec_done(s, &cfg);
}

/*
 * set_link at 50 us slows host 0's output from 100 to 10 Gbit/s: packets
 * serialized before arrive 80 ns apart, those after 800 ns apart. At 200
 * us the loss of that direction becomes 100 %: nothing sent after arrives.
 * A delay change at 150 us adds 20 us to the wire.
 */
static void test_set_link_at_its_time(void **state)
{
	sim_config cfg;

	(void)state;
	sim *s = rec_sim(&cfg, "hosts: 2\n"
			       "link: {delay: 1us, queue: 4MB}\n"
			       "events:\n"
			       "  - {at: 50us, type: set_link, host: 0, direction: out, rate: 10Gbps}\n"
			       "  - {at: 150us, type: set_link, host: 0, direction: out, delay: 21us}\n"
			       "  - {at: 200us, type: set_link, host: 0, direction: out, loss: 1}\n");
	probe_plan p = train(1, 2000);

	p.gap_ns = 800; /* at the slow rate: the queue stays empty after 50 us */
	probe_add(s, 0, p);
	sim_run(s, SIM_NEVER);

	uint32_t last = 0;

	for (uint32_t i = 0; i < 2000; i++)
		if (R->got[i])
			last = i;
	/* before 50 us: 80 ns of serialization, then 1 us + 80 ns + 1 us */
	assert_true(R->at[10] == 10 * 800 + 2160);
	/* after: 800 ns of serialization */
	assert_true(R->at[100] == 100 * 800 + 800 + 1000 + 80 + 1000);
	/* after 150 us: 20 us more on host 0's wire */
	assert_true(R->at[200] == 200 * 800 + 800 + 21000 + 80 + 1000);
	/* packets whose serialization ended after 200 us are lost: the last
	 * one to arrive left host 0 at 200 us at the latest */
	assert_true(R->at[last] - 80 - 1000 - 21000 <= 200000);
	assert_int_equal(R->n, last + 1);
	assert_true(last >= 248 && last <= 250);
	assert_int_equal(link_named(s, "p0:switch->host0")->rate_bps, 100000000000ull);
	rec_done(s, &cfg);
}

/* The time series adds up: per-flow bytes sum to what arrived (up to the
 * last sample), per-link bytes to what the link sent, and with few samples
 * allowed the interval doubles instead of the memory growing. */
static void test_timeseries(void **state)
{
	static const char *const yaml = "hosts: 4\n"
					"timeseries: {interval: 5us, max_samples: 8, links: 2, flows: 8}\n"
					"flows:\n"
					"  - {pattern: incast, receiver: 0, bytes: 256KB}\n";
	sim_config cfg;
	sim_result r;

	(void)state;
	cfg_from(&cfg, yaml);

	sim *s = sim_from(&cfg, &sim_roce_ops);

	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_DONE);

	const sim_ts *ts = sim_get_ts(s);

	assert_non_null(ts);
	assert_true(ts->nsamples >= 4 && ts->nsamples < 8);
	assert_true(ts->interval_ns > 5000); /* doubled at least once */
	assert_true(ts->nsamples * ts->interval_ns <= sim_now(s));
	assert_true((ts->nsamples + 1) * ts->interval_ns > sim_now(s));
	assert_int_equal(ts->nflows, 3);
	for (size_t f = 0; f < ts->nflows; f++) {
		uint64_t sum = 0;

		for (size_t i = 0; i < ts->nsamples; i++)
			sum += ts->flow_bytes[f * ts->cap + i];
		assert_true(sum <= sim_flow_get(s, f)->rx_bytes);
		assert_true(sum > 0);
	}
	sim_link *l = link_named(s, "p0:switch->host0");
	uint64_t sum = 0, qmax = 0;

	for (size_t i = 0; i < ts->nsamples; i++) {
		sum += ts->link_tx[l->id * ts->cap + i];
		if (ts->link_maxq[l->id * ts->cap + i] > qmax)
			qmax = ts->link_maxq[l->id * ts->cap + i];
	}
	assert_true(sum <= l->tx_bytes && sum > l->tx_bytes / 2);
	assert_true(qmax <= l->max_qbytes && qmax > 0);

	/* the JSON keeps 2 links, the receiver's downlink (the largest queue) first */
	assert_int_equal(sim_result_collect(s, SIM_RUN_DONE, &r), 0);
	json_t *doc = sim_report_json(&cfg, &r, 1);
	json_t *t = json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "timeseries");

	assert_non_null(t);
	assert_int_equal(json_array_size(json_object_get(t, "links")), 2);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(t, "links"), 0), "name")),
			    "p0:switch->host0");
	assert_int_equal(json_array_size(json_object_get(t, "flows")), 3);
	assert_int_equal(json_integer_value(json_object_get(t, "samples")), ts->nsamples);
	json_decref(doc);
	sim_result_free(&r);
	sim_del(s);
	sim_config_free(&cfg);

	/* a named link that does not exist is an error naming it */
	char err[256];

	cfg_from(&cfg, "hosts: 2\ntimeseries: {interval: 1us, links: [p0:host9->switch]}\n");
	assert_int_equal(sim_new(&cfg, &sim_roce_ops, &s, err, sizeof(err)), MRP_ERR_INVAL);
	assert_non_null(strstr(err, "p0:host9->switch"));
	sim_config_free(&cfg);
}

/* Scenario errors name the key. */
static void test_errors(void **state)
{
	(void)state;
	assert_non_null(strstr(cfg_error("hosts: 2\nlink: {loss_burst: 0.5}\n"), "link.loss_burst"));
	assert_non_null(strstr(cfg_error("hosts: 2\nevents: [{type: set_link, host: 0}]\n"),
			       "sets nothing"));
	assert_non_null(strstr(cfg_error("hosts: 2\nevents: [{type: link_down, host: 0, "
					 "direction: up}]\n"),
			       "direction"));
	assert_non_null(strstr(cfg_error("hosts: 2\nevents: [{type: link_down, host: 0, rate: "
					 "1Gbps}]\n"),
			       "belong to set_link"));
	assert_non_null(strstr(cfg_error("hosts: 2\nevents: [{type: plane_down, plane: 0, "
					 "direction: in}]\n"),
			       "direction"));
	assert_non_null(strstr(cfg_error("hosts: 2\ntimeseries: {links: 3}\n"), "interval"));
	assert_non_null(strstr(cfg_error("hosts: 2\ntimeseries: {interval: 1us, max_samples: 7}\n"),
			       "max_samples"));
}

/* ------------------------------------------------------------ determinism */

static const char *const lively =
	"hosts: 8\n"
	"seed: 7\n"
	"planes: 2\n"
	"fabric: {type: leafspine, leaves: 2, spines: 2}\n"
	"link: {loss: 0.5%, loss_burst: 4, jitter: 300ns}\n"
	"timeseries: {interval: 10us, links: 4, flows: 4}\n"
	"flows:\n"
	"  - {pattern: permutation, bytes: 256KB}\n"
	"events:\n"
	"  - {at: 20us, type: blackhole, plane: 1, switch: spine0, port: leaf1, direction: out}\n"
	"  - {at: 30us, type: set_link, plane: 0, switch: leaf0, port: spine1, rate: 40Gbps}\n"
	"  - {at: 60us, type: link_up, plane: 1, switch: spine0, port: leaf1, direction: out}\n";

static char *run_json(const sim_transport_ops *ops)
{
	sim_config cfg;
	sim_result r;

	cfg_from(&cfg, lively);

	sim *s = sim_from(&cfg, ops);
	int rc = sim_run(s, SIM_NEVER);

	assert_int_equal(sim_result_collect(s, rc, &r), 0);
	assert_int_equal(r.violations, 0);
	assert_int_equal(r.verify_failures, 0);
	assert_int_equal(r.nic_drops, 0);

	json_t *doc = sim_report_json(&cfg, &r, 1);

	/* the one wall-clock field */
	json_object_del(json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "summary"),
			"events_per_second");

	char *out = json_dumps(doc, JSON_SORT_KEYS);

	json_decref(doc);
	sim_result_free(&r);
	sim_del(s);
	sim_config_free(&cfg);
	return out;
}

static void test_same_seed_same_json(void **state)
{
	const sim_transport_ops *ops[2] = {&sim_roce_ops, &sim_mrp_ops};

	(void)state;
	for (int t = 0; t < 2; t++) {
		char *a = run_json(ops[t]), *b = run_json(ops[t]);

		assert_non_null(strstr(a, "\"timeseries\""));
		assert_string_equal(a, b);
		free(a);
		free(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gilbert_elliott),
		cmocka_unit_test(test_gilbert_elliott_in_time),
		cmocka_unit_test(test_jitter_keeps_order),
		cmocka_unit_test(test_one_direction),
		cmocka_unit_test(test_one_direction_fabric),
		cmocka_unit_test(test_set_link_at_its_time),
		cmocka_unit_test(test_timeseries),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_same_seed_same_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
