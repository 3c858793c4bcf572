/*
 * The host NIC as both transports use it: a queue with backpressure. A host
 * never drops its own packets at its own NIC, however many connections it
 * has; the queue does fill (so the backpressure is what holds it, not an
 * idle link); connections sharing a NIC are served in turn; and the core's
 * drain notification (sim_port_notify / on_nic) fires exactly when asked.
 */
#include "mrp_host.h"
#include "roce.h"
#include "sim_test.h"

typedef struct nic_outcome {
	uint64_t nic_drops, violations, flows, done, verified;
	uint64_t host_max_queue; /* largest queue seen at any host's own NIC */
	uint64_t host_queue_cap; /* the host links' capacity */
	uint64_t fct_min, fct_max;
} nic_outcome;

static void run_nic(const char *yaml, const sim_transport_ops *ops, nic_outcome *o)
{
	sim_config cfg;

	memset(o, 0, sizeof(*o));
	cfg_from(&cfg, yaml);

	sim *s = sim_from(&cfg, ops);
	int rc = sim_run(s, SIM_NEVER);
	const sim_stats *st = sim_get_stats(s);

	for (unsigned i = 0; i < st->nmsgs; i++)
		print_message("violation: %s\n", st->msgs[i]);
	assert_int_equal(rc, SIM_RUN_DONE);
	assert_int_equal(sim_verify(s), 0);
	o->nic_drops = st->nic_drops;
	o->violations = st->violations;
	o->flows = sim_flow_count(s);
	o->fct_min = SIM_NEVER;
	for (size_t i = 0; i < o->flows; i++) {
		sim_flow *f = sim_flow_get(s, i);
		uint64_t fct = f->finish_ns - f->start_ns;

		o->done += f->done && f->status == 0;
		o->verified += f->verified;
		if (fct < o->fct_min)
			o->fct_min = fct;
		if (fct > o->fct_max)
			o->fct_max = fct;
	}
	for (uint32_t h = 0; h < sim_hosts(s); h++) {
		for (unsigned p = 0; p < sim_planes(s); p++) {
			sim_link *l = sim_host_get(s, h)->nic[p];

			if (l->max_qbytes > o->host_max_queue)
				o->host_max_queue = l->max_qbytes;
			o->host_queue_cap = l->queue_bytes;
			/* the NIC's drops are the core's nic_drops: none */
			assert_int_equal(l->drops[SIM_DROP_OVERFLOW], 0);
		}
	}
	print_message("%-9s %3llu flows: nic drops %llu, largest host queue %llu of %llu, "
		      "fct %.1f-%.1f us\n",
		      ops->name, (unsigned long long)o->flows, (unsigned long long)o->nic_drops,
		      (unsigned long long)o->host_max_queue, (unsigned long long)o->host_queue_cap,
		      o->fct_min / 1e3, o->fct_max / 1e3);
	sim_del(s);
	sim_config_free(&cfg);
}

/*
 * 24 hosts all-to-all on two planes (23 sending and 23 receiving
 * connections per host), host queues of 48 KB: far less than 23 windows.
 * MetaRoCE's nic_queue is left at its default (64 KiB, above the link's 48
 * KB: the link's capacity is the limit). No packet is dropped at a sender's
 * NIC, by either transport.
 */
static const char *const many_conns =
	"hosts: 24\n"
	"planes: 2\n"
	"fabric: {type: leafspine, leaves: 4, spines: 2}\n"
	"host_link: {queue: 48KB}\n"
	"flows:\n"
	"  - {pattern: all_to_all, bytes: 64KB}\n";

static void test_no_nic_drops_all_to_all(void **state)
{
	const sim_transport_ops *ops[2] = {&sim_roce_ops, &sim_mrp_ops};

	(void)state;
	for (int t = 0; t < 2; t++) {
		nic_outcome o;

		run_nic(many_conns, ops[t], &o);
		assert_int_equal(o.flows, 24 * 23);
		assert_int_equal(o.done, o.flows);
		assert_int_equal(o.verified, o.flows);
		assert_int_equal(o.violations, 0);
		assert_int_equal(o.nic_drops, 0);
	}
}

/*
 * One host sends to 40 others at once over a small NIC queue: MetaRoCE's
 * connections each pace to the line rate, so together they offer 40 times
 * what the port carries. The queue fills to its limit (the backpressure is
 * exercised) and still nothing is dropped; with the connections served
 * round-robin, equal flows finish close together.
 */
static const char *const fan_out =
	"hosts: 41\n"
	"host_link: {queue: 32KB}\n"
	"flows:\n"
	"  - {src: 0, dst: 1, bytes: 256KB}\n"
	"  - {src: 0, dst: 2, bytes: 256KB}\n"
	"  - {src: 0, dst: 3, bytes: 256KB}\n"
	"  - {src: 0, dst: 4, bytes: 256KB}\n"
	"  - {src: 0, dst: 5, bytes: 256KB}\n"
	"  - {src: 0, dst: 6, bytes: 256KB}\n"
	"  - {src: 0, dst: 7, bytes: 256KB}\n"
	"  - {src: 0, dst: 8, bytes: 256KB}\n"
	"  - {src: 0, dst: 9, bytes: 256KB}\n"
	"  - {src: 0, dst: 10, bytes: 256KB}\n"
	"  - {src: 0, dst: 11, bytes: 256KB}\n"
	"  - {src: 0, dst: 12, bytes: 256KB}\n"
	"  - {src: 0, dst: 13, bytes: 256KB}\n"
	"  - {src: 0, dst: 14, bytes: 256KB}\n"
	"  - {src: 0, dst: 15, bytes: 256KB}\n"
	"  - {src: 0, dst: 16, bytes: 256KB}\n"
	"  - {src: 0, dst: 17, bytes: 256KB}\n"
	"  - {src: 0, dst: 18, bytes: 256KB}\n"
	"  - {src: 0, dst: 19, bytes: 256KB}\n"
	"  - {src: 0, dst: 20, bytes: 256KB}\n"
	"  - {src: 0, dst: 21, bytes: 256KB}\n"
	"  - {src: 0, dst: 22, bytes: 256KB}\n"
	"  - {src: 0, dst: 23, bytes: 256KB}\n"
	"  - {src: 0, dst: 24, bytes: 256KB}\n"
	"  - {src: 0, dst: 25, bytes: 256KB}\n"
	"  - {src: 0, dst: 26, bytes: 256KB}\n"
	"  - {src: 0, dst: 27, bytes: 256KB}\n"
	"  - {src: 0, dst: 28, bytes: 256KB}\n"
	"  - {src: 0, dst: 29, bytes: 256KB}\n"
	"  - {src: 0, dst: 30, bytes: 256KB}\n"
	"  - {src: 0, dst: 31, bytes: 256KB}\n"
	"  - {src: 0, dst: 32, bytes: 256KB}\n"
	"  - {src: 0, dst: 33, bytes: 256KB}\n"
	"  - {src: 0, dst: 34, bytes: 256KB}\n"
	"  - {src: 0, dst: 35, bytes: 256KB}\n"
	"  - {src: 0, dst: 36, bytes: 256KB}\n"
	"  - {src: 0, dst: 37, bytes: 256KB}\n"
	"  - {src: 0, dst: 38, bytes: 256KB}\n"
	"  - {src: 0, dst: 39, bytes: 256KB}\n"
	"  - {src: 0, dst: 40, bytes: 256KB}\n";

static void test_fan_out_fills_but_never_drops(void **state)
{
	const sim_transport_ops *ops[2] = {&sim_roce_ops, &sim_mrp_ops};

	(void)state;
	for (int t = 0; t < 2; t++) {
		nic_outcome o;

		run_nic(fan_out, ops[t], &o);
		assert_int_equal(o.done, 40);
		assert_int_equal(o.violations, 0);
		assert_int_equal(o.nic_drops, 0);
		/* Round-robin: the 40 equal flows share the sender's NIC, the
		 * first done at least 80 % into the last one's time. */
		assert_true(o.fct_min * 10 >= o.fct_max * 8);
	}
	/* MetaRoCE offers far more than the port carries: its queue reaches
	 * the limit, less than one packet below the capacity. */
	nic_outcome o;

	run_nic(fan_out, &sim_mrp_ops, &o);
	assert_true(o.host_max_queue + 4096 + 72 + SIM_WIRE_OVERHEAD > o.host_queue_cap);
	assert_true(o.host_max_queue <= o.host_queue_cap);
}

/*
 * The host loop takes up only connections with work or a due timer. Hosts 0
 * and 1 exchange 2 x 300 one-packet flows that are done within a few
 * microseconds, beside one 8 MB flow from 0 to 1 that runs for about 700 us
 * more. Once the small flows are done, each event of the long flow makes
 * the hosts take up a few connections, not the 601 each host has had:
 * visits per event, measured from then to the end, stay below 8. A loop that
 * scanned every connection (or checked every one after each event) would
 * make at least 600.
 */
static uint64_t visits_of(const sim_transport_ops *ops, sim *s)
{
	uint64_t v = 0;

	for (uint32_t h = 0; h < sim_hosts(s); h++)
		v += ops == &sim_mrp_ops ? sim_mrp_host_visits(sim_host_get(s, h)->ts)
					 : sim_roce_host_visits(sim_host_get(s, h)->ts);
	return v;
}

static void test_idle_connections_untouched(void **state)
{
	const sim_transport_ops *ops[3] = {&sim_roce_ops, &sim_roce_pfc_ops, &sim_mrp_ops};
	size_t cap = 64 * 1024, len = 0;
	char *yaml = malloc(cap);
	sim_config cfg;

	(void)state;
	assert_non_null(yaml);
	len += (size_t)snprintf(yaml + len, cap - len,
				"hosts: 2\nflows:\n  - {src: 0, dst: 1, bytes: 8MB}\n");
	for (int i = 0; i < 600; i++)
		len += (size_t)snprintf(yaml + len, cap - len, "  - {src: %d, dst: %d, bytes: 1KB}\n",
					i % 2, 1 - i % 2);
	assert_true(len < cap);
	cfg_from(&cfg, yaml);
	for (int t = 0; t < 3; t++) {
		sim *s = sim_from(&cfg, ops[t]);
		uint64_t ev0, v0, small_done_ns;

		while (sim_get_stats(s)->flows_done < 600 ||
		       (sim_get_stats(s)->flows_done == 600 && sim_flow_get(s, 0)->done))
			assert_int_equal(sim_step(s), 1);
		assert_false(sim_flow_get(s, 0)->done); /* the long flow runs on */
		small_done_ns = sim_now(s);
		ev0 = sim_get_stats(s)->events;
		v0 = visits_of(ops[t], s);
		assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_DONE);
		assert_int_equal(sim_verify(s), 0);
		assert_int_equal(sim_get_stats(s)->violations, 0);
		assert_int_equal(sim_get_stats(s)->nic_drops, 0);

		uint64_t ev = sim_get_stats(s)->events - ev0, v = visits_of(ops[t], s) - v0;

		print_message("%-9s small flows done at %.1f us, long flow at %.1f us: %llu events, "
			      "%llu visits after (%.2f per event)\n",
			      ops[t]->name, small_done_ns / 1e3, sim_flow_get(s, 0)->finish_ns / 1e3,
			      (unsigned long long)ev, (unsigned long long)v, (double)v / (double)ev);
		assert_true(ev > 1000); /* the long flow did run on after */
		assert_true(v < 8 * ev);
		sim_del(s);
	}
	sim_config_free(&cfg);
	free(yaml);
}

/* ------------------------------------------------ the core's notification */

typedef struct notif_host {
	sim *s;
	sim_host *h;
	uint64_t calls, at_ns, qbytes_at;
	int armed_rc;
} notif_host;

static void *notif_new(sim *s, sim_host *h)
{
	notif_host *n = calloc(1, sizeof(*n));

	n->s = s;
	n->h = h;
	return n;
}

static void notif_on_nic(void *hs, unsigned plane, uint64_t now)
{
	notif_host *n = hs;

	n->calls++;
	n->at_ns = now;
	n->qbytes_at = sim_port_queue_bytes(n->s, n->h, plane);
}

static void notif_nop_packet(void *hs, unsigned plane, sim_pkt *p, uint64_t now)
{
	notif_host *n = hs;

	(void)plane;
	(void)now;
	sim_pkt_free(n->s, p);
}

static void notif_nop_timer(void *hs, uint64_t now)
{
	(void)hs;
	(void)now;
}

static const sim_transport_ops notif_ops = {
	.name = "notif",
	.host_new = notif_new,
	.host_del = free,
	.flow_start = probe_flow_start,
	.on_packet = notif_nop_packet,
	.on_timer = notif_nop_timer,
	.on_nic = notif_on_nic,
};

/*
 * Ten 1,000-byte packets (1,066 on the wire) into an idle 8 Gbit/s port: one
 * leaves every 1,066 ns. A request for "at most 3,198 bytes queued" (three
 * packets) fires once, when the seventh packet leaves; a request for a level
 * the queue is already at arms nothing; the sender's own NIC dropped nothing
 * until the queue is overfilled, and then nic_drops counts it.
 */
static void test_port_notify(void **state)
{
	sim_config cfg;

	(void)state;
	cfg_from(&cfg, "hosts: 2\nlink: {rate: 8Gbps, delay: 0, queue: 12KB}\n");

	sim *s = sim_from(&cfg, &notif_ops);
	sim_host *h = sim_host_get(s, 0);
	notif_host *n = h->ts;

	for (int i = 0; i < 10; i++) {
		sim_pkt *p = sim_pkt_new(s, 1000);

		p->datalen = 1000;
		p->dst_addr = sim_host_addr(s, sim_host_get(s, 1), 0);
		assert_int_equal(sim_send(s, h, 0, p), 0);
	}
	assert_int_equal(sim_port_queue_bytes(s, h, 0), 10660);
	assert_int_equal(sim_port_room(s, h, 0), 12000 - 10660);
	assert_int_equal(sim_port_notify(s, h, 0, 20000), 1); /* already there */
	assert_int_equal(sim_port_notify(s, h, 0, 3 * 1066), 0);
	assert_int_equal(sim_port_notify(s, h, 7, 0), MRP_ERR_INVAL);
	assert_int_equal(sim_run(s, SIM_NEVER), SIM_RUN_IDLE);
	assert_int_equal(n->calls, 1);
	assert_true(n->at_ns == 7 * 1066);
	assert_int_equal(n->qbytes_at, 3 * 1066);

	/* overfill: 12 packets do not fit in 12 KB; the 12th is the NIC's drop */
	for (int i = 0; i < 12; i++) {
		sim_pkt *p = sim_pkt_new(s, 1000);

		p->datalen = 1000;
		p->dst_addr = sim_host_addr(s, sim_host_get(s, 1), 0);
		assert_int_equal(sim_send(s, h, 0, p), i < 11 ? 0 : MRP_ERR_FULL);
	}
	assert_int_equal(sim_get_stats(s)->nic_drops, 1);
	sim_del(s);
	sim_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_port_notify),
		cmocka_unit_test(test_no_nic_drops_all_to_all),
		cmocka_unit_test(test_fan_out_fills_but_never_drops),
		cmocka_unit_test(test_idle_connections_untouched),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
