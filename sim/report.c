/* Results of a run, as text and as JSON; see report.h. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "units.h"

double sim_jain(const double *x, size_t n)
{
	double sum = 0, sq = 0;

	for (size_t i = 0; i < n; i++) {
		sum += x[i];
		sq += x[i] * x[i];
	}
	if (n == 0 || sq == 0)
		return 1;
	return sum * sum / ((double)n * sq);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t sim_percentile(uint64_t *v, size_t n, double q)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);

	size_t rank = (size_t)ceil(q * (double)n);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

const char *sim_run_status_name(int run_status)
{
	switch (run_status) {
	case SIM_RUN_DONE:
		return "done";
	case SIM_RUN_IDLE:
		return "idle";
	case SIM_RUN_LIMIT:
		return "limit";
	default:
		return "error";
	}
}

int sim_result_ok(const sim_result *r)
{
	return r->violations == 0 && r->verify_failures == 0 && r->unfinished == 0 && r->failed == 0;
}

static const char *flow_status(const sim_flow_result *f)
{
	if (!f->done)
		return "unfinished";
	if (f->status != 0)
		return "failed";
	return f->verified ? "ok" : "corrupt";
}

/* ------------------------------------------------------------ time series */

static json_t *u64_array(const uint64_t *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_integer((json_int_t)v[i]));
	return a;
}

/* Rates in bit/s of n byte counts over interval_ns each. */
static json_t *rate_array(const uint64_t *v, size_t n, uint64_t interval_ns)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_real((double)v[i] * 8e9 / (double)interval_ns));
	return a;
}

static int cmp_link_maxq(const void *a, const void *b)
{
	const sim_link *x = *(const sim_link *const *)a, *y = *(const sim_link *const *)b;

	if (x->max_qbytes != y->max_qbytes)
		return x->max_qbytes < y->max_qbytes ? 1 : -1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The links kept: those named in the scenario, then the top_links with the
 * largest queue over the run (ties: lower link id first) that sent
 * anything. */
static json_t *timeseries_json(sim *s)
{
	const sim_ts *ts = sim_get_ts(s);

	if (!ts)
		return NULL;

	const sim_ts_config *tc = &sim_get_config(s)->ts;
	size_t n = sim_link_count(s), keep = 0;
	sim_link **order = calloc(n ? n : 1, sizeof(*order));
	unsigned char *taken = calloc(n ? n : 1, 1);
	json_t *doc = json_object(), *links = json_array(), *flows = json_array();
	char name[64];

	if (!order || !taken) {
		free(order);
		free(taken);
		json_decref(doc);
		json_decref(links);
		json_decref(flows);
		return NULL;
	}
	for (size_t i = 0; i < tc->nlinks; i++) {
		sim_link *l = sim_link_find(s, tc->links[i]);

		if (l && !taken[l->id]) {
			taken[l->id] = 1;
			order[keep++] = l;
		}
	}
	size_t named = keep, m = 0;
	sim_link **rest = order + keep;

	for (size_t i = 0; i < n; i++) {
		sim_link *l = sim_link_get(s, i);

		if (!taken[i] && l->tx_pkts + l->drops[SIM_DROP_OVERFLOW] > 0)
			rest[m++] = l;
	}
	qsort(rest, m, sizeof(*rest), cmp_link_maxq);
	keep = named + (m < tc->top_links ? m : tc->top_links);
	for (size_t i = 0; i < keep; i++) {
		sim_link *l = order[i];
		json_t *o = json_object();

		json_object_set_new(o, "name", json_string(sim_link_name(l, name, sizeof(name))));
		json_object_set_new(o, "named", json_boolean(i < named));
		json_object_set_new(o, "max_queue_bytes",
				    u64_array(&ts->link_maxq[l->id * ts->cap], ts->nsamples));
		json_object_set_new(o, "rate_bps",
				    rate_array(&ts->link_tx[l->id * ts->cap], ts->nsamples,
					       ts->interval_ns));
		json_array_append_new(links, o);
	}
	for (size_t f = 0; f < ts->nflows; f++) {
		json_t *o = json_object();

		json_object_set_new(o, "id", json_integer((json_int_t)f));
		json_object_set_new(o, "rate_bps", rate_array(&ts->flow_bytes[f * ts->cap],
							      ts->nsamples, ts->interval_ns));
		json_array_append_new(flows, o);
	}
	json_object_set_new(doc, "interval_ns", json_integer((json_int_t)ts->interval_ns));
	json_object_set_new(doc, "samples", json_integer((json_int_t)ts->nsamples));
	json_object_set_new(doc, "links", links);
	json_object_set_new(doc, "flows", flows);
	free(order);
	free(taken);
	return doc;
}

/* The collectives of the run: their time from start to the last flow. */
static int coll_collect(sim *s, sim_result *r)
{
	const sim_config *cfg = sim_get_config(s);
	size_t n = 0;

	for (size_t i = 0; i < cfg->ncolls; i++)
		n += sim_coll_selected(cfg, i);
	if (n == 0)
		return 0;
	r->colls = calloc(n, sizeof(*r->colls));
	if (!r->colls)
		return MRP_ERR_NOMEM;
	for (size_t i = 0; i < cfg->ncolls; i++) {
		if (!sim_coll_selected(cfg, i))
			continue;

		sim_coll_result *c = &r->colls[r->ncolls++];
		const sim_coll_config *cc = &cfg->colls[i];

		c->entry = i;
		c->type = cc->type;
		c->nranks = sim_coll_nranks(cfg, cc);
		c->steps = sim_coll_steps(cc->type, c->nranks);
		c->size = sim_coll_size(cfg, i);
		c->chunk = sim_coll_chunk(cc->type, c->nranks, cc->channels, c->size);
		c->start_ns = cc->start_ns;
		c->finish_ns = 0;
		for (size_t k = 0; k < sim_flow_count(s); k++) {
			const sim_flow *f = sim_flow_get(s, k);

			if (f->coll != (int32_t)i)
				continue;
			c->flows++;
			c->unchecked |= f->unchecked;
			if (f->done && f->status == 0) {
				c->finished++;
				if (f->finish_ns > c->finish_ns)
					c->finish_ns = f->finish_ns;
			} else if (f->done) {
				c->failed++;
			}
		}
		if (c->finished == c->flows) {
			c->time_ns = c->finish_ns - c->start_ns;
		} else {
			c->finish_ns = SIM_NEVER;
			c->time_ns = SIM_NEVER;
		}
	}
	return 0;
}

int sim_result_collect(sim *s, int run_status, sim_result *r)
{
	const sim_stats *st;
	size_t n = sim_flow_count(s);
	uint64_t *fcts;
	double *gps;
	uint64_t first = SIM_NEVER, last = 0, bytes = 0;
	double fct_sum = 0;

	memset(r, 0, sizeof(*r));
	snprintf(r->transport, sizeof(r->transport), "%s", sim_transport(s)->name);
	r->run_status = run_status;
	sim_verify(s);
	st = sim_get_stats(s);

	r->flows = calloc(n ? n : 1, sizeof(*r->flows));
	fcts = calloc(n ? n : 1, sizeof(*fcts));
	gps = calloc(n ? n : 1, sizeof(*gps));
	if (!r->flows || !fcts || !gps) {
		free(fcts);
		free(gps);
		sim_result_free(r);
		return MRP_ERR_NOMEM;
	}
	r->nflows = n;
	for (size_t i = 0; i < n; i++) {
		const sim_flow *f = sim_flow_get(s, i);
		sim_flow_result *fr = &r->flows[i];

		fr->id = f->id;
		fr->src = f->src;
		fr->dst = f->dst;
		fr->bytes = f->bytes;
		fr->op = f->op;
		fr->stream = f->stream;
		fr->plane = f->plane;
		fr->start_ns = f->start_ns;
		fr->finish_ns = f->finish_ns;
		fr->retx = f->retx_pkts;
		fr->spurious = f->spurious_pkts;
		fr->done = f->done;
		fr->status = f->status;
		fr->verified = f->verified;
		fr->fct_ns = SIM_NEVER;
		r->retx += f->retx_pkts;
		r->spurious += f->spurious_pkts;
		if (!f->done) {
			r->unfinished++;
			continue;
		}
		if (f->status != 0) {
			r->failed++;
			continue;
		}
		fr->fct_ns = f->finish_ns - f->start_ns;
		fr->goodput_bps = fr->fct_ns ? (double)f->bytes * 8e9 / (double)fr->fct_ns : 0;
		fcts[r->finished] = fr->fct_ns;
		gps[r->finished] = fr->goodput_bps;
		r->finished++;
		fct_sum += (double)fr->fct_ns;
		bytes += f->bytes;
		if (f->start_ns < first)
			first = f->start_ns;
		if (f->finish_ns > last)
			last = f->finish_ns;
		if (fr->fct_ns > r->max_fct_ns)
			r->max_fct_ns = fr->fct_ns;
	}
	if (r->finished) {
		r->mean_fct_ns = fct_sum / (double)r->finished;
		r->p99_fct_ns = sim_percentile(fcts, r->finished, 0.99);
		r->agg_goodput_bps = last > first ? (double)bytes * 8e9 / (double)(last - first) : 0;
		r->jain = sim_jain(gps, r->finished);
	}
	free(fcts);
	free(gps);

	size_t nl = sim_link_count(s), k = 0;

	r->links = calloc(nl ? nl : 1, sizeof(*r->links));
	if (!r->links) {
		sim_result_free(r);
		return MRP_ERR_NOMEM;
	}
	for (size_t i = 0; i < nl; i++) {
		const sim_link *l = sim_link_get(s, i);
		uint64_t d = 0;

		for (unsigned c = 0; c < SIM_DROP_N; c++) {
			d += l->drops[c];
			r->drops[c] += l->drops[c];
		}
		r->ce_marks += l->ce_marks;
		if (l->max_qbytes > r->max_queue_bytes) {
			r->max_queue_bytes = l->max_qbytes;
			sim_link_name(l, r->max_queue_link, sizeof(r->max_queue_link));
		}
		uint64_t paused = l->pfc_paused_ns + (l->pfc_paused ? sim_now(s) - l->pfc_paused_since : 0);

		r->pfc_pauses += l->pfc_pauses;
		r->pfc_resumes += l->pfc_resumes;
		r->pfc_paused_ns += paused;
		if (l->pfc_max_ingress > r->pfc_max_ingress)
			r->pfc_max_ingress = l->pfc_max_ingress;
		if (l->tx_pkts == 0 && d == 0)
			continue;

		sim_link_result *lr = &r->links[k++];

		lr->pfc_pauses = l->pfc_pauses;
		lr->pfc_resumes = l->pfc_resumes;
		lr->pfc_paused_ns = paused;
		lr->pfc_max_ingress = l->pfc_max_ingress;

		sim_link_name(l, lr->name, sizeof(lr->name));
		lr->plane = l->plane;
		lr->max_queue_bytes = l->max_qbytes;
		lr->tx_bytes = l->tx_bytes;
		lr->tx_pkts = l->tx_pkts;
		lr->ce_marks = l->ce_marks;
		memcpy(lr->drops, l->drops, sizeof(lr->drops));
	}
	r->nlinks = k;
	r->pfc = sim_transport(s)->lossless;
	r->pfc_xoff = sim_get_config(s)->pfc_xoff;
	r->pfc_xon = sim_get_config(s)->pfc_xon;
	r->drops[SIM_DROP_NOROUTE] += st->noroute;
	for (unsigned c = 0; c < SIM_DROP_N; c++)
		r->drops_total += r->drops[c];

	if (coll_collect(s, r) != 0) {
		sim_result_free(r);
		return MRP_ERR_NOMEM;
	}
	r->events = st->events;
	r->sim_time_ns = sim_now(s);
	r->violations = st->violations;
	r->verify_failures = st->verify_failures;
	r->nic_drops = st->nic_drops;
	r->timeseries = timeseries_json(s);
	r->nmsgs = st->nmsgs;
	memcpy(r->msgs, st->msgs, sizeof(r->msgs));
	return 0;
}

void sim_result_free(sim_result *r)
{
	json_decref(r->timeseries);
	free(r->flows);
	free(r->links);
	free(r->colls);
	r->flows = NULL;
	r->links = NULL;
	r->colls = NULL;
	r->nflows = r->nlinks = r->ncolls = 0;
}

/* ---------------------------------------------------------------- text */

/* One line of the summary: how to print a run's value, and the value the
 * ratio column divides (runs[1] / runs[0]). */
typedef struct row {
	const char *label;
	void (*fmt)(char *buf, size_t n, const sim_result *r);
	double (*val)(const sim_result *r);
} row;

#define COUNT_ROW(name, field)                                                  \
	static void f_##name(char *b, size_t n, const sim_result *r)           \
	{                                                                       \
		snprintf(b, n, "%" PRIu64, (uint64_t)r->field);                 \
	}                                                                       \
	static double v_##name(const sim_result *r)                             \
	{                                                                       \
		return (double)r->field;                                        \
	}
COUNT_ROW(drops, drops_total)
COUNT_ROW(overflow, drops[SIM_DROP_OVERFLOW])
COUNT_ROW(loss, drops[SIM_DROP_LOSS])
COUNT_ROW(down, drops[SIM_DROP_DOWN])
COUNT_ROW(blackhole, drops[SIM_DROP_BLACKHOLE])
COUNT_ROW(noroute, drops[SIM_DROP_NOROUTE])
COUNT_ROW(ce, ce_marks)
COUNT_ROW(retx, retx)
COUNT_ROW(spurious, spurious)
COUNT_ROW(finished, finished)
COUNT_ROW(unfinished, unfinished)
COUNT_ROW(failed, failed)
COUNT_ROW(violations, violations)
COUNT_ROW(verify, verify_failures)
COUNT_ROW(events, events)
COUNT_ROW(pauses, pfc_pauses)

static void f_paused(char *b, size_t n, const sim_result *r)
{
	sim_fmt_time(b, n, (double)r->pfc_paused_ns);
}

static double v_paused(const sim_result *r)
{
	return (double)r->pfc_paused_ns;
}

static void f_goodput(char *b, size_t n, const sim_result *r)
{
	sim_fmt_rate(b, n, r->agg_goodput_bps);
}

static double v_goodput(const sim_result *r)
{
	return r->agg_goodput_bps;
}

static void f_mean_fct(char *b, size_t n, const sim_result *r)
{
	sim_fmt_time(b, n, r->mean_fct_ns);
}

static double v_mean_fct(const sim_result *r)
{
	return r->mean_fct_ns;
}

static void f_p99_fct(char *b, size_t n, const sim_result *r)
{
	sim_fmt_time(b, n, (double)r->p99_fct_ns);
}

static double v_p99_fct(const sim_result *r)
{
	return (double)r->p99_fct_ns;
}

static void f_jain(char *b, size_t n, const sim_result *r)
{
	snprintf(b, n, "%.4f", r->jain);
}

static double v_jain(const sim_result *r)
{
	return r->jain;
}

static void f_max_queue(char *b, size_t n, const sim_result *r)
{
	sim_fmt_bytes(b, n, (double)r->max_queue_bytes);
}

static double v_max_queue(const sim_result *r)
{
	return (double)r->max_queue_bytes;
}

static void f_sim_time(char *b, size_t n, const sim_result *r)
{
	sim_fmt_time(b, n, (double)r->sim_time_ns);
}

static double v_sim_time(const sim_result *r)
{
	return (double)r->sim_time_ns;
}

static void f_eps(char *b, size_t n, const sim_result *r)
{
	snprintf(b, n, "%.3g", r->events_per_sec);
}

static const row rows[] = {
	{"aggregate goodput", f_goodput, v_goodput},
	{"mean fct", f_mean_fct, v_mean_fct},
	{"p99 fct", f_p99_fct, v_p99_fct},
	{"jain fairness", f_jain, v_jain},
	{"max queue", f_max_queue, v_max_queue},
	{"drops", f_drops, v_drops},
	{"  overflow", f_overflow, v_overflow},
	{"  loss", f_loss, v_loss},
	{"  down", f_down, v_down},
	{"  blackhole", f_blackhole, v_blackhole},
	{"  noroute", f_noroute, v_noroute},
	{"ce marks", f_ce, v_ce},
	{"pfc pause frames", f_pauses, v_pauses},
	{"pfc paused (link time)", f_paused, v_paused},
	{"retransmissions", f_retx, v_retx},
	{"spurious retransmissions", f_spurious, v_spurious},
	{"finished flows", f_finished, v_finished},
	{"unfinished flows", f_unfinished, v_unfinished},
	{"failed flows", f_failed, v_failed},
	{"invariant violations", f_violations, v_violations},
	{"verification failures", f_verify, v_verify},
	{"simulated time", f_sim_time, v_sim_time},
	{"events", f_events, v_events},
	{"events/s (wall clock)", f_eps, NULL},
};

static void print_row(FILE *out, const char *label, char cell[][48], size_t n)
{
	fprintf(out, "  %-26s", label);
	for (size_t i = 0; i < n; i++)
		fprintf(out, " %18.18s", cell[i]);
	fputc('\n', out);
}

/* Busiest first; equal ones in link order (pointers into one array). */
static int cmp_link(const void *a, const void *b)
{
	const sim_link_result *x = *(const sim_link_result *const *)a;
	const sim_link_result *y = *(const sim_link_result *const *)b;

	if (x->max_queue_bytes != y->max_queue_bytes)
		return x->max_queue_bytes > y->max_queue_bytes ? -1 : 1;
	return x < y ? -1 : x > y;
}

static void print_links(FILE *out, const sim_result *R)
{
	const sim_link_result **v = malloc((R->nlinks ? R->nlinks : 1) * sizeof(*v));
	char a[48], b[48];

	fprintf(out, "\n%s: links by max queue (top 5 of %zu used)\n", R->transport, R->nlinks);
	fprintf(out, "  %-28s %12s %12s %10s %10s %10s\n", "link", "max queue", "sent", "ce marks",
		"drops", "lost");
	if (!v)
		return;
	for (size_t i = 0; i < R->nlinks; i++)
		v[i] = &R->links[i];
	qsort(v, R->nlinks, sizeof(*v), cmp_link);
	for (size_t i = 0; i < R->nlinks && i < 5; i++) {
		const sim_link_result *l = v[i];
		uint64_t drops = 0;

		for (unsigned k = 0; k < SIM_DROP_N; k++)
			drops += l->drops[k];
		sim_fmt_bytes(a, sizeof(a), (double)l->max_queue_bytes);
		sim_fmt_bytes(b, sizeof(b), (double)l->tx_bytes);
		fprintf(out, "  %-28s %12s %12s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n", l->name, a,
			b, l->ce_marks, drops, l->drops[SIM_DROP_LOSS]);
	}
	free(v);
}

void sim_report_text(FILE *out, const sim_config *cfg, const sim_result *runs, size_t nr)
{
	char a[48], b[48], c[48], d[48];
	char cell[2 * SIM_MAX_RUNS][48];
	size_t ncol = nr > 1 ? 2 * nr - 1 : nr; /* runs, then last / each other */

	fprintf(out, "scenario %s, seed %" PRIu64 ": %" PRIu32 " hosts, %u plane%s, %zu flow%s\n\n",
		cfg->name, cfg->seed, cfg->hosts, cfg->planes, cfg->planes == 1 ? "" : "s",
		runs[0].nflows, runs[0].nflows == 1 ? "" : "s");

	/* per flow, runs side by side */
	fprintf(out, "%6s %5s %5s %10s %10s", "flow", "src", "dst", "bytes", "start");
	for (size_t r = 0; r < nr; r++)
		fprintf(out, " | %-8s %11s %12s %6s %6s %-10s", runs[r].transport, "fct", "goodput", "retx",
			"spur", "status");
	fputc('\n', out);
	for (size_t i = 0; i < runs[0].nflows; i++) {
		const sim_flow_result *f = &runs[0].flows[i];

		sim_fmt_bytes(a, sizeof(a), (double)f->bytes);
		sim_fmt_time(b, sizeof(b), (double)f->start_ns);
		fprintf(out, "%6" PRIu32 " %5" PRIu32 " %5" PRIu32 " %10s %10s", f->id, f->src, f->dst, a, b);
		for (size_t r = 0; r < nr; r++) {
			const sim_flow_result *g = &runs[r].flows[i];

			if (g->fct_ns != SIM_NEVER) {
				sim_fmt_time(c, sizeof(c), (double)g->fct_ns);
				sim_fmt_rate(d, sizeof(d), g->goodput_bps);
			} else {
				snprintf(c, sizeof(c), "-");
				snprintf(d, sizeof(d), "-");
			}
			fprintf(out, " | %-8s %11s %12s %6" PRIu64 " %6" PRIu64 " %-10s", "", c, d, g->retx,
				g->spurious, flow_status(g));
		}
		fputc('\n', out);
	}

	/* summary, runs side by side, then their ratio */
	fputc('\n', out);
	for (size_t r = 0; r < nr; r++)
		snprintf(cell[r], sizeof(cell[r]), "%s", runs[r].transport);
	for (size_t r = 0; r + 1 < nr; r++)
		snprintf(cell[nr + r], sizeof(cell[0]), "%.20s/%.20s", runs[nr - 1].transport,
			 runs[r].transport);
	print_row(out, "summary", cell, ncol);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		for (size_t r = 0; r < nr; r++)
			rows[i].fmt(cell[r], sizeof(cell[r]), &runs[r]);
		for (size_t r = 0; r + 1 < nr; r++) {
			double x0 = rows[i].val ? rows[i].val(&runs[r]) : 0;
			double x1 = rows[i].val ? rows[i].val(&runs[nr - 1]) : 0;

			if (x0 > 0)
				snprintf(cell[nr + r], sizeof(cell[0]), "%.3f", x1 / x0);
			else
				snprintf(cell[nr + r], sizeof(cell[0]), "-");
		}
		print_row(out, rows[i].label, cell, ncol);
	}
	for (size_t r = 0; r < nr; r++) {
		if (runs[r].max_queue_link[0])
			fprintf(out, "  %s: max queue on %s\n", runs[r].transport, runs[r].max_queue_link);
	}

	for (size_t r = 0; r < nr; r++) {
		const sim_result *R = &runs[r];

		print_links(out, R);
		for (unsigned m = 0; m < R->nmsgs; m++)
			fprintf(out, "%s: violation: %s\n", R->transport, R->msgs[m]);
		if (R->violations > R->nmsgs)
			fprintf(out, "%s: ... %" PRIu64 " violations in all\n", R->transport, R->violations);
	}
}

/* ---------------------------------------------------------------- JSON */

static json_t *jreal(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static json_t *jtime(uint64_t ns)
{
	return ns == SIM_NEVER ? json_null() : json_integer((json_int_t)ns);
}

static json_t *drops_json(const uint64_t *drops)
{
	json_t *o = json_object();
	uint64_t total = 0;

	for (unsigned k = 0; k < SIM_DROP_N; k++) {
		json_object_set_new(o, sim_drop_name(k), json_integer((json_int_t)drops[k]));
		total += drops[k];
	}
	json_object_set_new(o, "total", json_integer((json_int_t)total));
	return o;
}

/* null for a lossy run */
static json_t *pfc_json(const sim_result *R)
{
	json_t *o;

	if (!R->pfc)
		return json_null();
	o = json_object();
	json_object_set_new(o, "xoff_bytes", json_integer((json_int_t)R->pfc_xoff));
	json_object_set_new(o, "xon_bytes", json_integer((json_int_t)R->pfc_xon));
	json_object_set_new(o, "pause_frames", json_integer((json_int_t)R->pfc_pauses));
	json_object_set_new(o, "resume_frames", json_integer((json_int_t)R->pfc_resumes));
	json_object_set_new(o, "paused_ns", json_integer((json_int_t)R->pfc_paused_ns));
	json_object_set_new(o, "max_ingress_bytes", json_integer((json_int_t)R->pfc_max_ingress));
	return o;
}

static json_t *run_json(const sim_result *R)
{
	json_t *run = json_object(), *flows = json_array(), *links = json_array(), *sum = json_object();
	json_t *msgs = json_array();

	json_object_set_new(run, "transport", json_string(R->transport));
	json_object_set_new(run, "status", json_string(sim_run_status_name(R->run_status)));
	for (size_t i = 0; i < R->nflows; i++) {
		const sim_flow_result *f = &R->flows[i];
		json_t *o = json_object();

		json_object_set_new(o, "id", json_integer(f->id));
		json_object_set_new(o, "src", json_integer(f->src));
		json_object_set_new(o, "dst", json_integer(f->dst));
		json_object_set_new(o, "bytes", json_integer((json_int_t)f->bytes));
		json_object_set_new(o, "op", json_string(sim_op_name(f->op)));
		json_object_set_new(o, "stream", json_integer(f->stream));
		json_object_set_new(o, "plane", f->plane >= 0 ? json_integer(f->plane) : json_null());
		json_object_set_new(o, "start_ns", json_integer((json_int_t)f->start_ns));
		json_object_set_new(o, "finish_ns", jtime(f->finish_ns));
		json_object_set_new(o, "fct_ns", jtime(f->fct_ns));
		json_object_set_new(o, "goodput_bps",
				    f->fct_ns == SIM_NEVER ? json_null() : jreal(f->goodput_bps));
		json_object_set_new(o, "retransmissions", json_integer((json_int_t)f->retx));
		json_object_set_new(o, "spurious_retransmissions", json_integer((json_int_t)f->spurious));
		json_object_set_new(o, "status", json_string(flow_status(f)));
		json_object_set_new(o, "verified", json_boolean(f->verified));
		json_array_append_new(flows, o);
	}
	for (size_t i = 0; i < R->nlinks; i++) {
		const sim_link_result *l = &R->links[i];
		json_t *o = json_object();

		json_object_set_new(o, "name", json_string(l->name));
		json_object_set_new(o, "plane", json_integer(l->plane));
		json_object_set_new(o, "max_queue_bytes", json_integer((json_int_t)l->max_queue_bytes));
		json_object_set_new(o, "tx_bytes", json_integer((json_int_t)l->tx_bytes));
		json_object_set_new(o, "tx_packets", json_integer((json_int_t)l->tx_pkts));
		json_object_set_new(o, "ce_marks", json_integer((json_int_t)l->ce_marks));
		json_object_set_new(o, "drops", drops_json(l->drops));
		if (R->pfc) {
			json_object_set_new(o, "pfc_pause_frames", json_integer((json_int_t)l->pfc_pauses));
			json_object_set_new(o, "pfc_resume_frames", json_integer((json_int_t)l->pfc_resumes));
			json_object_set_new(o, "pfc_paused_ns", json_integer((json_int_t)l->pfc_paused_ns));
			json_object_set_new(o, "pfc_max_ingress_bytes",
					    json_integer((json_int_t)l->pfc_max_ingress));
		}
		json_array_append_new(links, o);
	}

	json_object_set_new(sum, "aggregate_goodput_bps", jreal(R->agg_goodput_bps));
	json_object_set_new(sum, "mean_fct_ns", R->finished ? jreal(R->mean_fct_ns) : json_null());
	json_object_set_new(sum, "p99_fct_ns", R->finished ? json_integer((json_int_t)R->p99_fct_ns)
							  : json_null());
	json_object_set_new(sum, "max_fct_ns", R->finished ? json_integer((json_int_t)R->max_fct_ns)
							  : json_null());
	json_object_set_new(sum, "jain_index", jreal(R->jain));
	json_object_set_new(sum, "max_queue_bytes", json_integer((json_int_t)R->max_queue_bytes));
	json_object_set_new(sum, "max_queue_link",
			    R->max_queue_link[0] ? json_string(R->max_queue_link) : json_null());
	json_object_set_new(sum, "drops", drops_json(R->drops));
	json_object_set_new(sum, "nic_drops", json_integer((json_int_t)R->nic_drops));
	json_object_set_new(sum, "ce_marks", json_integer((json_int_t)R->ce_marks));
	json_object_set_new(sum, "retransmissions", json_integer((json_int_t)R->retx));
	json_object_set_new(sum, "spurious_retransmissions", json_integer((json_int_t)R->spurious));
	json_object_set_new(sum, "finished_flows", json_integer((json_int_t)R->finished));
	json_object_set_new(sum, "unfinished_flows", json_integer((json_int_t)R->unfinished));
	json_object_set_new(sum, "failed_flows", json_integer((json_int_t)R->failed));
	json_object_set_new(sum, "invariant_violations", json_integer((json_int_t)R->violations));
	json_object_set_new(sum, "verification_failures", json_integer((json_int_t)R->verify_failures));
	json_object_set_new(sum, "events", json_integer((json_int_t)R->events));
	json_object_set_new(sum, "sim_time_ns", json_integer((json_int_t)R->sim_time_ns));
	json_object_set_new(sum, "events_per_second", jreal(R->events_per_sec));
	json_object_set_new(sum, "pfc", pfc_json(R));

	for (unsigned m = 0; m < R->nmsgs; m++)
		json_array_append_new(msgs, json_string(R->msgs[m]));

	json_object_set_new(run, "summary", sum);
	if (R->timeseries)
		json_object_set(run, "timeseries", R->timeseries);
	json_object_set_new(run, "flows", flows);
	json_object_set_new(run, "links", links);
	json_object_set_new(run, "violations", msgs);
	return run;
}

json_t *sim_report_json(const sim_config *cfg, const sim_result *runs, size_t nr)
{
	json_t *doc = json_object(), *arr = json_array();

	json_object_set_new(doc, "scenario", json_string(cfg->name ? cfg->name : ""));
	json_object_set_new(doc, "seed", json_integer((json_int_t)cfg->seed));
	json_object_set_new(doc, "hosts", json_integer(cfg->hosts));
	json_object_set_new(doc, "planes", json_integer(cfg->planes));
	for (size_t r = 0; r < nr; r++)
		json_array_append_new(arr, run_json(&runs[r]));
	json_object_set_new(doc, "runs", arr);
	/* the last run against each baseline; "comparison" is the first */
	if (nr >= 2) {
		json_t *all = json_array();

		for (size_t r = 0; r + 1 < nr; r++) {
			json_t *cmp = json_object();
			double g0 = runs[r].agg_goodput_bps, g1 = runs[nr - 1].agg_goodput_bps;
			double t0 = runs[r].max_fct_ns, t1 = runs[nr - 1].max_fct_ns;

			json_object_set_new(cmp, "baseline", json_string(runs[r].transport));
			json_object_set_new(cmp, "transport", json_string(runs[nr - 1].transport));
			json_object_set_new(cmp, "goodput_ratio", g0 > 0 ? jreal(g1 / g0) : json_null());
			json_object_set_new(cmp, "max_fct_ratio",
					    runs[r].finished && runs[nr - 1].finished && t0 > 0 ? jreal(t1 / t0)
											   : json_null());
			if (r == 0)
				json_object_set_new(doc, "comparison", json_deep_copy(cmp));
			json_array_append_new(all, cmp);
		}
		json_object_set_new(doc, "comparisons", all);
	}
	return doc;
}

/* --------------------------------------------------------- collectives */

double sim_coll_algbw(const sim_coll_result *c)
{
	if (c->time_ns == SIM_NEVER || c->time_ns == 0)
		return 0;
	return (double)c->size * 8e9 / (double)c->time_ns;
}

double sim_coll_busbw(const sim_coll_result *c)
{
	return sim_coll_algbw(c) * sim_coll_busbw_factor(c->type, c->nranks);
}

/* The collective result of entry e in run R, or NULL. */
static const sim_coll_result *coll_of(const sim_result *R, size_t e)
{
	for (size_t i = 0; i < R->ncolls; i++)
		if (R->colls[i].entry == e)
			return &R->colls[i];
	return NULL;
}

static void coll_time_cell(char *b, size_t n, const sim_coll_result *c)
{
	if (!c || c->time_ns == SIM_NEVER)
		snprintf(b, n, "unfinished");
	else
		sim_fmt_time(b, n, (double)c->time_ns);
}

void sim_report_coll_text(FILE *out, const sim_config *cfg, const sim_coll_row *tab, size_t n)
{
	char a[48], b[64];

	for (size_t i = 0; i < n; i++) {
		const sim_coll_row *ln = &tab[i];
		const sim_coll_config *cc = &cfg->colls[ln->entry];
		size_t nr = ln->nr;

		if (i == 0 || tab[i - 1].entry != ln->entry) {
			uint32_t nranks = sim_coll_nranks(cfg, cc);

			fprintf(out, "%scollective %zu: %s over %" PRIu32 " ranks, %u plane%s (scenario %s, seed %" PRIu64 ")\n",
				i ? "\n" : "", ln->entry, sim_coll_name(cc->type), nranks, cfg->planes,
				cfg->planes == 1 ? "" : "s", cfg->name, cfg->seed);
			fprintf(out, "%10s", "size");
			for (size_t r = 0; r < nr; r++) {
				snprintf(b, sizeof(b), "%s time", ln->runs[r].transport);
				fprintf(out, " %16s", b);
			}
			for (size_t r = 0; r + 1 < nr; r++) {
				snprintf(b, sizeof(b), "%s/%s", ln->runs[nr - 1].transport,
					 ln->runs[r].transport);
				fprintf(out, " %18s", b);
			}
			if (nr > 0)
				fprintf(out, " %14s", "busbw (last)");
			fputc('\n', out);
		}
		const sim_coll_result *first = nr ? coll_of(&ln->runs[0], ln->entry) : NULL;

		sim_fmt_bytes(a, sizeof(a), first ? (double)first->size : 0);
		fprintf(out, "%10s", a);
		for (size_t r = 0; r < nr; r++) {
			coll_time_cell(b, sizeof(b), coll_of(&ln->runs[r], ln->entry));
			fprintf(out, " %16s", b);
		}

		const sim_coll_result *last = nr ? coll_of(&ln->runs[nr - 1], ln->entry) : NULL;

		for (size_t r = 0; r + 1 < nr; r++) {
			const sim_coll_result *c = coll_of(&ln->runs[r], ln->entry);

			if (last && c && last->time_ns != SIM_NEVER && c->time_ns != SIM_NEVER &&
			    c->time_ns > 0)
				snprintf(b, sizeof(b), "%.3f", (double)last->time_ns / (double)c->time_ns);
			else
				snprintf(b, sizeof(b), "-");
			fprintf(out, " %18s", b);
		}
		if (last) {
			sim_fmt_rate(b, sizeof(b), sim_coll_busbw(last));
			fprintf(out, " %14s", last->time_ns == SIM_NEVER ? "-" : b);
		}
		fputc('\n', out);
	}
	if (n && tab[0].nr > 1)
		fprintf(out, "\n(time ratios below 1: %s finished sooner)\n", tab[0].runs[tab[0].nr - 1].transport);
	for (size_t i = 0; i < n; i++)
		for (size_t r = 0; r < tab[i].nr; r++) {
			const sim_result *R = &tab[i].runs[r];

			for (unsigned m = 0; m < R->nmsgs; m++)
				fprintf(out, "%s: violation: %s\n", R->transport, R->msgs[m]);
		}
}

static json_t *coll_run_json(const sim_result *R, size_t entry)
{
	json_t *o = json_object();
	const sim_coll_result *c = coll_of(R, entry);

	json_object_set_new(o, "transport", json_string(R->transport));
	json_object_set_new(o, "status", json_string(sim_run_status_name(R->run_status)));
	json_object_set_new(o, "time_ns", c ? jtime(c->time_ns) : json_null());
	json_object_set_new(o, "algbw_bps",
			    c && c->time_ns != SIM_NEVER ? jreal(sim_coll_algbw(c)) : json_null());
	json_object_set_new(o, "busbw_bps",
			    c && c->time_ns != SIM_NEVER ? jreal(sim_coll_busbw(c)) : json_null());
	json_object_set_new(o, "flows", json_integer(c ? (json_int_t)c->flows : 0));
	json_object_set_new(o, "finished_flows", json_integer(c ? (json_int_t)c->finished : 0));
	json_object_set_new(o, "failed_flows", json_integer(c ? (json_int_t)c->failed : 0));
	json_object_set_new(o, "verified", json_boolean(c && !c->unchecked && R->verify_failures == 0));
	json_object_set_new(o, "drops", drops_json(R->drops));
	json_object_set_new(o, "ce_marks", json_integer((json_int_t)R->ce_marks));
	json_object_set_new(o, "retransmissions", json_integer((json_int_t)R->retx));
	json_object_set_new(o, "max_queue_bytes", json_integer((json_int_t)R->max_queue_bytes));
	json_object_set_new(o, "pfc", pfc_json(R));
	json_object_set_new(o, "invariant_violations", json_integer((json_int_t)R->violations));
	json_object_set_new(o, "verification_failures", json_integer((json_int_t)R->verify_failures));
	json_object_set_new(o, "events", json_integer((json_int_t)R->events));
	json_object_set_new(o, "sim_time_ns", json_integer((json_int_t)R->sim_time_ns));
	json_object_set_new(o, "events_per_second", jreal(R->events_per_sec));
	/* (the whole run's: the steps and any background flows beside them) */
	if (R->timeseries)
		json_object_set(o, "timeseries", R->timeseries);
	return o;
}

json_t *sim_report_coll_json(const sim_config *cfg, const sim_coll_row *tab, size_t n)
{
	json_t *doc = json_object(), *arr = json_array();

	json_object_set_new(doc, "scenario", json_string(cfg->name ? cfg->name : ""));
	json_object_set_new(doc, "seed", json_integer((json_int_t)cfg->seed));
	json_object_set_new(doc, "hosts", json_integer(cfg->hosts));
	json_object_set_new(doc, "planes", json_integer(cfg->planes));
	for (size_t i = 0; i < n; i++) {
		const sim_coll_row *ln = &tab[i];
		const sim_coll_config *cc = &cfg->colls[ln->entry];
		json_t *o = json_object(), *runs = json_array(), *ratios = json_array();
		const sim_coll_result *last = ln->nr ? coll_of(&ln->runs[ln->nr - 1], ln->entry) : NULL;
		uint32_t nranks = sim_coll_nranks(cfg, cc);
		uint64_t size = 0;

		for (size_t r = 0; r < ln->nr && !size; r++) {
			const sim_coll_result *c = coll_of(&ln->runs[r], ln->entry);

			size = c ? c->size : 0;
		}
		json_object_set_new(o, "collective", json_integer((json_int_t)ln->entry));
		json_object_set_new(o, "type", json_string(sim_coll_name(cc->type)));
		json_object_set_new(o, "ranks", json_integer(nranks));
		json_object_set_new(o, "steps", json_integer(sim_coll_steps(cc->type, nranks)));
		json_object_set_new(o, "size_bytes", json_integer((json_int_t)size));
		json_object_set_new(o, "chunk_bytes",
				    json_integer((json_int_t)sim_coll_chunk(cc->type, nranks, cc->channels, size)));
		json_object_set_new(o, "channels", json_integer(cc->channels));
		for (size_t r = 0; r < ln->nr; r++)
			json_array_append_new(runs, coll_run_json(&ln->runs[r], ln->entry));
		for (size_t r = 0; r + 1 < ln->nr; r++) {
			const sim_coll_result *c = coll_of(&ln->runs[r], ln->entry);
			json_t *q = json_object();

			json_object_set_new(q, "baseline", json_string(ln->runs[r].transport));
			json_object_set_new(q, "transport", json_string(ln->runs[ln->nr - 1].transport));
			json_object_set_new(q, "time_ratio",
					    last && c && last->time_ns != SIM_NEVER &&
							    c->time_ns != SIM_NEVER && c->time_ns > 0
						    ? jreal((double)last->time_ns / (double)c->time_ns)
						    : json_null());
			json_array_append_new(ratios, q);
		}
		json_object_set_new(o, "runs", runs);
		json_object_set_new(o, "ratios", ratios);
		json_array_append_new(arr, o);
	}
	json_object_set_new(doc, "collectives", arr);
	return doc;
}
