/* Scenario files (YAML via libyaml's document API); see scenario.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "scenario.h"
#include "transport.h"
#include "units.h"

#define MAX_FILE (16u << 20)

/* Link parameters a mapping sets (mask of SIM_LP_*). */
typedef struct lpart {
	unsigned mask;
	sim_link_params v;
	int queue_line; /* where queue was given, checked against mtu at the end */
	char queue_path[64];
} lpart;

enum { FP_TYPE = 1, FP_LEAVES = 2, FP_SPINES = 4, FP_HPL = 8 };

typedef struct fpart {
	unsigned mask;
	unsigned type;
	uint32_t leaves, spines, hpl;
	int line;
} fpart;

typedef struct pctx {
	yaml_document_t *doc;
	sim_config *cfg;
	char *err;
	size_t errlen;
	lpart link, host_link, fabric_link;
	lpart plink[SIM_MAX_PLANES], phost[SIM_MAX_PLANES], pfabric[SIM_MAX_PLANES];
	fpart fabric, pfab[SIM_MAX_PLANES];
} pctx;

typedef int (*handler)(pctx *c, yaml_node_t *v, const char *path, void *obj);

typedef struct keydef {
	const char *key;
	handler fn;
} keydef;

/* ------------------------------------------------------------ helpers */

static int line_of(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

__attribute__((format(printf, 3, 4))) static int perr(pctx *c, const yaml_node_t *n, const char *fmt,
						       ...)
{
	int k = snprintf(c->err, c->errlen, "%s:%d: ", c->cfg->name, n ? line_of(n) : 0);
	va_list ap;

	va_start(ap, fmt);
	if (k >= 0 && (size_t)k < c->errlen)
		vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
	va_end(ap);
	return MRP_ERR_INVAL;
}

static yaml_node_t *node(pctx *c, int id)
{
	return yaml_document_get_node(c->doc, id);
}

static const char *kind_name(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "a value";
	}
}

/* The text of a scalar node, or NULL after an error. */
static const char *scalar(pctx *c, yaml_node_t *v, const char *path)
{
	if (v->type != YAML_SCALAR_NODE) {
		perr(c, v, "%s: expected a value, not %s", path, kind_name(v));
		return NULL;
	}
	return (const char *)v->data.scalar.value;
}

static int want(pctx *c, yaml_node_t *v, const char *path, yaml_node_type_t type)
{
	if (v->type == type)
		return 0;
	return perr(c, v, "%s: expected %s, not %s", path,
		    type == YAML_MAPPING_NODE ? "a mapping (key: value, ...)" : "a list", kind_name(v));
}

static int get_u64(pctx *c, yaml_node_t *v, const char *path, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	if (sim_parse_u64(s, out) != 0)
		return perr(c, v, "%s: '%s' is not a whole number", path, s);
	if (*out < lo || *out > hi)
		return perr(c, v, "%s: %s is out of range (%" PRIu64 "-%" PRIu64 ")", path, s, lo, hi);
	return 0;
}

static int get_u32(pctx *c, yaml_node_t *v, const char *path, uint64_t lo, uint64_t hi, uint32_t *out)
{
	uint64_t x;
	int rc = get_u64(c, v, path, lo, hi, &x);

	if (rc == 0)
		*out = (uint32_t)x;
	return rc;
}

static int get_int(pctx *c, yaml_node_t *v, const char *path, uint64_t hi, int *out)
{
	uint64_t x;
	int rc = get_u64(c, v, path, 0, hi, &x);

	if (rc == 0)
		*out = (int)x;
	return rc;
}

static int get_time(pctx *c, yaml_node_t *v, const char *path, uint64_t *out)
{
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	if (sim_parse_time(s, out) != 0)
		return perr(c, v, "%s: '%s' is not a time (e.g. 10us, 1.5ms)", path, s);
	return 0;
}

static int get_bytes(pctx *c, yaml_node_t *v, const char *path, uint64_t *out)
{
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	if (sim_parse_bytes(s, out) != 0)
		return perr(c, v, "%s: '%s' is not a size (e.g. 4096, 64KB, 1MiB)", path, s);
	return 0;
}

static int get_node(pctx *c, yaml_node_t *v, const char *path, sim_node *out)
{
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	if (sim_node_parse(s, out) != 0)
		return perr(c, v, "%s: '%s' is not a node (hostN, switch, leafN, spineN)", path, s);
	return 0;
}

/* One of names[] (index in *out). */
static int get_enum(pctx *c, yaml_node_t *v, const char *path, const char *const *names, unsigned n,
		    unsigned *out)
{
	const char *s = scalar(c, v, path);
	char list[160] = "";

	if (!s)
		return MRP_ERR_INVAL;
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return 0;
		}
		size_t len = strlen(list);

		snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i]);
	}
	return perr(c, v, "%s: '%s' is not one of %s", path, s, list);
}

/* Walks a mapping: every key must be in defs, and only once. */
static int walk(pctx *c, yaml_node_t *map, const char *path, const keydef *defs, size_t ndefs, void *obj)
{
	uint64_t seen = 0;
	char sub[128];

	if (want(c, map, path[0] ? path : "scenario", YAML_MAPPING_NODE) != 0)
		return MRP_ERR_INVAL;
	for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top; pr++) {
		yaml_node_t *k = node(c, pr->key), *v = node(c, pr->value);
		size_t i;

		if (k->type != YAML_SCALAR_NODE)
			return perr(c, k, "%s%skeys must be plain words", path, path[0] ? ": " : "");

		const char *key = (const char *)k->data.scalar.value;

		for (i = 0; i < ndefs; i++)
			if (strcmp(defs[i].key, key) == 0)
				break;
		if (i == ndefs)
			return perr(c, k, "%s%sunknown key '%s'", path, path[0] ? ": " : "", key);
		if (seen & (1ull << i))
			return perr(c, k, "%s%sduplicate key '%s'", path, path[0] ? ": " : "", key);
		seen |= 1ull << i;
		snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", key);

		int rc = defs[i].fn(c, v, sub, obj);

		if (rc != 0)
			return rc;
	}
	return 0;
}

#define WALK(c, map, path, defs, obj) walk((c), (map), (path), (defs), sizeof(defs) / sizeof((defs)[0]), (obj))

/* ------------------------------------------------------- link params */

static int lk_rate(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	lpart *lp = obj;
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	if (sim_parse_rate(s, &lp->v.rate_bps) != 0)
		return perr(c, v, "%s: '%s' is not a rate (e.g. 100Gbps)", path, s);
	if (lp->v.rate_bps < 1000)
		return perr(c, v, "%s: '%s' is below 1kbps", path, s);
	lp->mask |= SIM_LP_RATE;
	return 0;
}

static int lk_delay(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	lpart *lp = obj;

	lp->mask |= SIM_LP_DELAY;
	return get_time(c, v, path, &lp->v.delay_ns);
}

static int lk_queue(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	lpart *lp = obj;

	lp->mask |= SIM_LP_QUEUE;
	lp->queue_line = line_of(v);
	snprintf(lp->queue_path, sizeof(lp->queue_path), "%s", path);
	return get_bytes(c, v, path, &lp->v.queue_bytes);
}

static int lk_ecn(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	lpart *lp = obj;
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	lp->mask |= SIM_LP_ECN;
	if (strcmp(s, "off") == 0) {
		lp->v.ecn_bytes = SIM_NEVER;
		return 0;
	}
	if (sim_parse_bytes(s, &lp->v.ecn_bytes) != 0)
		return perr(c, v, "%s: '%s' is not a size (e.g. 100KB) or 'off'", path, s);
	return 0;
}

static int lk_loss(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	lpart *lp = obj;
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	if (sim_parse_prob(s, &lp->v.loss) != 0)
		return perr(c, v, "%s: '%s' is not a probability (0-1, e.g. 0.01 or 1%%)", path, s);
	lp->mask |= SIM_LP_LOSS;
	return 0;
}

/* Mean length of a loss burst, in packets (Gilbert-Elliott when > 1). */
static int lk_burst(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	lpart *lp = obj;
	const char *s = scalar(c, v, path);

	if (!s)
		return MRP_ERR_INVAL;
	if (sim_parse_double(s, &lp->v.loss_burst) != 0 || !(lp->v.loss_burst >= 1) ||
	    lp->v.loss_burst > 1e9)
		return perr(c, v, "%s: '%s' is not a mean burst length in packets (1 or more)", path,
			    s);
	lp->mask |= SIM_LP_BURST;
	return 0;
}

static int lk_jitter(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	lpart *lp = obj;

	lp->mask |= SIM_LP_JITTER;
	if (get_time(c, v, path, &lp->v.jitter_ns) != 0)
		return MRP_ERR_INVAL;
	if (lp->v.jitter_ns > 1000000000000ull)
		return perr(c, v, "%s: more than 1000s", path);
	return 0;
}

static const keydef link_keys[] = {
	{"rate", lk_rate}, {"delay", lk_delay}, {"queue", lk_queue},
	{"ecn_threshold", lk_ecn}, {"loss", lk_loss}, {"loss_burst", lk_burst},
	{"jitter", lk_jitter},
};

static int h_lpart(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return WALK(c, v, path, link_keys, obj);
}

/* ------------------------------------------------------------- fabric */

static int fb_type(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[] = {"single", "leafspine"};
	fpart *fp = obj;

	fp->mask |= FP_TYPE;
	return get_enum(c, v, path, names, 2, &fp->type);
}

static int fb_leaves(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	fpart *fp = obj;

	fp->mask |= FP_LEAVES;
	return get_u32(c, v, path, 1, SIM_MAX_HOSTS, &fp->leaves);
}

static int fb_spines(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	fpart *fp = obj;

	fp->mask |= FP_SPINES;
	return get_u32(c, v, path, 1, SIM_MAX_SPINES, &fp->spines);
}

static int fb_hpl(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	fpart *fp = obj;

	fp->mask |= FP_HPL;
	return get_u32(c, v, path, 1, SIM_MAX_HOSTS, &fp->hpl);
}

static const keydef fabric_keys[] = {
	{"type", fb_type}, {"leaves", fb_leaves}, {"spines", fb_spines}, {"hosts_per_leaf", fb_hpl},
};

static int h_fabric(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	fpart *fp = obj;

	fp->line = line_of(v);
	return WALK(c, v, path, fabric_keys, obj);
}

/* ------------------------------------------------------------- planes */

static int pl_fabric(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return h_fabric(c, v, path, &c->pfab[*(unsigned *)obj]);
}

static int pl_link(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return h_lpart(c, v, path, &c->plink[*(unsigned *)obj]);
}

static int pl_host_link(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return h_lpart(c, v, path, &c->phost[*(unsigned *)obj]);
}

static int pl_fabric_link(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return h_lpart(c, v, path, &c->pfabric[*(unsigned *)obj]);
}

static const keydef plane_keys[] = {
	{"fabric", pl_fabric}, {"link", pl_link}, {"host_link", pl_host_link},
	{"fabric_link", pl_fabric_link},
};

static int h_planes(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	char sub[64];

	(void)obj;
	c->cfg->planes_line = line_of(v);
	if (v->type == YAML_SCALAR_NODE) {
		uint64_t n;

		if (get_u64(c, v, path, 1, SIM_MAX_PLANES, &n) != 0)
			return MRP_ERR_INVAL;
		c->cfg->planes = (unsigned)n;
		return 0;
	}
	if (want(c, v, path, YAML_SEQUENCE_NODE) != 0)
		return MRP_ERR_INVAL;

	size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);

	if (n < 1 || n > SIM_MAX_PLANES)
		return perr(c, v, "%s: %zu planes is out of range (1-%u)", path, n, SIM_MAX_PLANES);
	c->cfg->planes = (unsigned)n;
	for (unsigned i = 0; i < n; i++) {
		yaml_node_t *item = node(c, v->data.sequence.items.start[i]);

		snprintf(sub, sizeof(sub), "%s[%u]", path, i);
		if (item->type == YAML_SCALAR_NODE && item->data.scalar.length == 0)
			continue; /* "- " : a plane with the defaults */
		if (WALK(c, item, sub, plane_keys, &i) != 0)
			return MRP_ERR_INVAL;
	}
	return 0;
}

/* ------------------------------------------------ ports (links, events) */

typedef struct where {
	sim_port_ref ref;
	int has_host, has_switch, has_port;
	yaml_node_t *first;
} where;

static int wh_host(pctx *c, yaml_node_t *v, const char *path, where *w)
{
	uint32_t h;

	if (get_u32(c, v, path, 0, SIM_MAX_HOSTS, &h) != 0)
		return MRP_ERR_INVAL;
	w->ref.node.kind = SIM_NODE_HOST;
	w->ref.node.index = h;
	w->ref.port = -1;
	w->has_host = 1;
	w->first = w->first ? w->first : v;
	return 0;
}

static int wh_switch(pctx *c, yaml_node_t *v, const char *path, where *w)
{
	sim_node n;

	if (get_node(c, v, path, &n) != 0)
		return MRP_ERR_INVAL;
	if (n.kind == SIM_NODE_HOST)
		return perr(c, v, "%s: '%s' is a host, not a switch (use host: N)", path,
			    (const char *)v->data.scalar.value);
	w->ref.node = n;
	w->has_switch = 1;
	w->first = w->first ? w->first : v;
	return 0;
}

static int wh_port(pctx *c, yaml_node_t *v, const char *path, where *w)
{
	const char *s = scalar(c, v, path);
	uint64_t x;

	if (!s)
		return MRP_ERR_INVAL;
	w->has_port = 1;
	if (sim_parse_u64(s, &x) == 0) {
		if (x > UINT32_MAX)
			return perr(c, v, "%s: %s is out of range", path, s);
		w->ref.port = (int64_t)x;
		return 0;
	}
	w->ref.port = -1;
	if (sim_node_parse(s, &w->ref.peer) != 0 || w->ref.peer.kind == SIM_NODE_SWITCH)
		return perr(c, v, "%s: '%s' is not a port number or the node it faces "
				  "(hostN, leafN, spineN)", path, s);
	return 0;
}

/* After a mapping with host/switch/port keys: exactly one place. */
static int wh_done(pctx *c, yaml_node_t *map, const char *path, where *w, int required)
{
	if (w->has_host && (w->has_switch || w->has_port))
		return perr(c, map, "%s: give host, or switch and port, not both", path);
	if (w->has_switch != w->has_port)
		return perr(c, map, "%s: switch and port go together", path);
	if (required && !w->has_host && !w->has_switch)
		return perr(c, map, "%s: needs host, or switch and port", path);
	return 0;
}

/* -------------------------------------------------------------- links */

typedef struct cable_tmp {
	sim_cable_config c;
	lpart lp;
	where w;
} cable_tmp;

static int cb_plane(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_int(c, v, path, SIM_MAX_PLANES - 1, &((cable_tmp *)obj)->c.plane);
}

static int cb_host(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return wh_host(c, v, path, &((cable_tmp *)obj)->w);
}

static int cb_switch(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return wh_switch(c, v, path, &((cable_tmp *)obj)->w);
}

static int cb_port(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return wh_port(c, v, path, &((cable_tmp *)obj)->w);
}

#define CB_LINK(name, fn)                                                           \
	static int name(pctx *c, yaml_node_t *v, const char *path, void *obj)      \
	{                                                                           \
		return fn(c, v, path, &((cable_tmp *)obj)->lp);                     \
	}
CB_LINK(cb_rate, lk_rate)
CB_LINK(cb_delay, lk_delay)
CB_LINK(cb_queue, lk_queue)
CB_LINK(cb_ecn, lk_ecn)
CB_LINK(cb_loss, lk_loss)
CB_LINK(cb_burst, lk_burst)
CB_LINK(cb_jitter, lk_jitter)

static const keydef cable_keys[] = {
	{"plane", cb_plane}, {"host", cb_host}, {"switch", cb_switch}, {"port", cb_port},
	{"rate", cb_rate},   {"delay", cb_delay}, {"queue", cb_queue}, {"ecn_threshold", cb_ecn},
	{"loss", cb_loss},   {"loss_burst", cb_burst}, {"jitter", cb_jitter},
};

static int h_links(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	char sub[64];

	(void)obj;
	if (want(c, v, path, YAML_SEQUENCE_NODE) != 0)
		return MRP_ERR_INVAL;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *item = node(c, *it);
		cable_tmp t;

		memset(&t, 0, sizeof(t));
		t.c.plane = -1;
		t.c.line = line_of(item);
		snprintf(sub, sizeof(sub), "%s[%td]", path, it - v->data.sequence.items.start);
		if (WALK(c, item, sub, cable_keys, &t) != 0 || wh_done(c, item, sub, &t.w, 1) != 0)
			return MRP_ERR_INVAL;
		if (t.lp.mask == 0)
			return perr(c, item,
				    "%s: sets nothing (rate, delay, queue, ecn_threshold, loss, "
				    "loss_burst, jitter)",
				    sub);
		t.c.at = t.w.ref;
		t.c.mask = t.lp.mask;
		t.c.v = t.lp.v;
		if (sim_config_add_cable(c->cfg, &t.c) != 0)
			return perr(c, item, "out of memory");
	}
	return 0;
}

/* -------------------------------------------------------------- flows */

enum { FK_SRC = 1, FK_DST = 2, FK_RECEIVER = 4, FK_SENDERS = 8, FK_PATTERN = 16, FK_EVERY = 32 };

/* The most times one entry may be repeated (repeat:). */
#define FLOW_REPEAT_MAX 100000u

typedef struct flow_tmp {
	sim_flow_config f;
	unsigned keys;   /* FK_* seen */
	uint32_t repeat; /* the entry this many times ... */
	uint64_t every_ns; /* ... each this long after the one before */
} flow_tmp;

static int fl_pattern(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[] = {"incast", "permutation", "all_to_all"};
	flow_tmp *t = obj;
	unsigned k;

	if (get_enum(c, v, path, names, 3, &k) != 0)
		return MRP_ERR_INVAL;
	t->f.pattern = SIM_PAT_INCAST + k;
	t->keys |= FK_PATTERN;
	return 0;
}

static int fl_src(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	flow_tmp *t = obj;

	t->keys |= FK_SRC;
	return get_u32(c, v, path, 0, SIM_MAX_HOSTS, &t->f.src);
}

static int fl_dst(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	flow_tmp *t = obj;

	t->keys |= FK_DST;
	return get_u32(c, v, path, 0, SIM_MAX_HOSTS, &t->f.dst);
}

static int fl_receiver(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	flow_tmp *t = obj;

	t->keys |= FK_RECEIVER;
	return get_u32(c, v, path, 0, SIM_MAX_HOSTS, &t->f.dst);
}

static int fl_senders(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	flow_tmp *t = obj;

	t->keys |= FK_SENDERS;
	return get_u32(c, v, path, 1, SIM_MAX_HOSTS, &t->f.senders);
}

static int fl_bytes(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	flow_tmp *t = obj;

	if (get_bytes(c, v, path, &t->f.bytes) != 0)
		return MRP_ERR_INVAL;
	if (t->f.bytes == 0)
		return perr(c, v, "%s: must be at least 1 byte", path);
	return 0;
}

static int fl_start(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_time(c, v, path, &((flow_tmp *)obj)->f.start_ns);
}

static int fl_op(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[] = {"write", "write_imm", "send"};

	return get_enum(c, v, path, names, SIM_OP_N, &((flow_tmp *)obj)->f.op);
}

static int fl_stream(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_u32(c, v, path, 0, UINT32_MAX, &((flow_tmp *)obj)->f.stream);
}

static int fl_plane(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_int(c, v, path, SIM_MAX_PLANES - 1, &((flow_tmp *)obj)->f.plane);
}

static int fl_repeat(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_u32(c, v, path, 1, FLOW_REPEAT_MAX, &((flow_tmp *)obj)->repeat);
}

static int fl_every(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	flow_tmp *t = obj;

	t->keys |= FK_EVERY;
	if (get_time(c, v, path, &t->every_ns) != 0)
		return MRP_ERR_INVAL;
	if (t->every_ns == 0)
		return perr(c, v, "%s: must be longer than 0", path);
	return 0;
}

static const keydef flow_keys[] = {
	{"pattern", fl_pattern}, {"src", fl_src},     {"dst", fl_dst},   {"receiver", fl_receiver},
	{"senders", fl_senders}, {"bytes", fl_bytes}, {"start", fl_start}, {"op", fl_op},
	{"stream", fl_stream},   {"plane", fl_plane}, {"repeat", fl_repeat}, {"every", fl_every},
};

static int h_flows(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	char sub[64];

	(void)obj;
	if (want(c, v, path, YAML_SEQUENCE_NODE) != 0)
		return MRP_ERR_INVAL;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *item = node(c, *it);
		flow_tmp t;

		memset(&t, 0, sizeof(t));
		sim_flow_config_init(&t.f);
		t.f.line = line_of(item);
		snprintf(sub, sizeof(sub), "%s[%td]", path, it - v->data.sequence.items.start);
		if (WALK(c, item, sub, flow_keys, &t) != 0)
			return MRP_ERR_INVAL;
		switch (t.f.pattern) {
		case SIM_PAT_NONE:
			if ((t.keys & (FK_SRC | FK_DST)) != (FK_SRC | FK_DST))
				return perr(c, item, "%s: a flow needs src and dst (or a pattern)", sub);
			if (t.keys & (FK_RECEIVER | FK_SENDERS))
				return perr(c, item, "%s: receiver and senders belong to pattern: incast",
					    sub);
			break;
		case SIM_PAT_INCAST:
			if (t.keys & (FK_SRC | FK_DST))
				return perr(c, item, "%s: an incast has receiver and senders, not src/dst",
					    sub);
			break;
		default:
			if (t.keys & (FK_SRC | FK_DST | FK_RECEIVER | FK_SENDERS))
				return perr(c, item,
					    "%s: %s takes no src, dst, receiver or senders", sub,
					    t.f.pattern == SIM_PAT_PERMUTATION ? "a permutation"
									    : "all_to_all");
		}
		if (t.repeat > 1 && !(t.keys & FK_EVERY))
			return perr(c, item, "%s: repeat needs every (the time between starts)", sub);
		if ((t.keys & FK_EVERY) && t.repeat < 2)
			return perr(c, item, "%s: every needs repeat (2 or more)", sub);
		uint32_t n = t.repeat ? t.repeat : 1;
		if (n > 1 && t.every_ns > (UINT64_MAX - t.f.start_ns) / (n - 1))
			return perr(c, item, "%s: the last repeat would start past the end of time",
				    sub);
		for (uint32_t k = 0; k < n; k++) {
			sim_flow_config f = t.f;

			f.start_ns += k * t.every_ns;
			if (sim_config_add_flow(c->cfg, &f) != 0)
				return perr(c, item, "out of memory");
		}
	}
	return 0;
}

/* ------------------------------------------------------------- events */

typedef struct event_tmp {
	sim_event_config e;
	where w;
	lpart lp; /* set_link */
	int has_type, has_flow, has_action, has_dir;
} event_tmp;

static int ev_at(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_time(c, v, path, &((event_tmp *)obj)->e.at_ns);
}

static int ev_type(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[SIM_EVT_N] = {"link_down", "link_up",   "plane_down",
						     "plane_up",  "blackhole", "steer",
						     "set_link"};
	event_tmp *t = obj;

	t->has_type = 1;
	return get_enum(c, v, path, names, SIM_EVT_N, &t->e.type);
}

static int ev_plane(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_int(c, v, path, SIM_MAX_PLANES - 1, &((event_tmp *)obj)->e.plane);
}

static int ev_host(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	event_tmp *t = obj;
	uint32_t h;

	if (get_u32(c, v, path, 0, SIM_MAX_HOSTS, &h) != 0)
		return MRP_ERR_INVAL;
	t->e.host = h;
	return wh_host(c, v, path, &t->w);
}

static int ev_switch(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return wh_switch(c, v, path, &((event_tmp *)obj)->w);
}

static int ev_port(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return wh_port(c, v, path, &((event_tmp *)obj)->w);
}

static int ev_flow(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	event_tmp *t = obj;
	uint64_t f;

	t->has_flow = 1;
	if (get_u64(c, v, path, 0, UINT32_MAX, &f) != 0)
		return MRP_ERR_INVAL;
	t->e.flow = (int64_t)f;
	return 0;
}

static int ev_action(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[SIM_STEER_N] = {"reroute", "drain", "restore"};
	event_tmp *t = obj;

	t->has_action = 1;
	return get_enum(c, v, path, names, SIM_STEER_N, &t->e.action);
}

static int ev_dir(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[SIM_DIR_N] = {"both", "out", "in"};
	event_tmp *t = obj;

	t->has_dir = 1;
	return get_enum(c, v, path, names, SIM_DIR_N, &t->e.dir);
}

#define EV_LINK(name, fn)                                                           \
	static int name(pctx *c, yaml_node_t *v, const char *path, void *obj)      \
	{                                                                           \
		return fn(c, v, path, &((event_tmp *)obj)->lp);                     \
	}
EV_LINK(ev_rate, lk_rate)
EV_LINK(ev_delay, lk_delay)
EV_LINK(ev_queue, lk_queue)
EV_LINK(ev_ecn, lk_ecn)
EV_LINK(ev_loss, lk_loss)
EV_LINK(ev_burst, lk_burst)
EV_LINK(ev_jitter, lk_jitter)

static const keydef event_keys[] = {
	{"at", ev_at},     {"type", ev_type}, {"plane", ev_plane}, {"host", ev_host},
	{"switch", ev_switch}, {"port", ev_port}, {"flow", ev_flow}, {"action", ev_action},
	{"direction", ev_dir}, {"rate", ev_rate}, {"delay", ev_delay}, {"queue", ev_queue},
	{"ecn_threshold", ev_ecn}, {"loss", ev_loss}, {"loss_burst", ev_burst},
	{"jitter", ev_jitter},
};

static int h_events(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	char sub[64];

	(void)obj;
	if (want(c, v, path, YAML_SEQUENCE_NODE) != 0)
		return MRP_ERR_INVAL;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *item = node(c, *it);
		event_tmp t;

		memset(&t, 0, sizeof(t));
		t.e.plane = -1;
		t.e.host = -1;
		t.e.flow = -1;
		t.e.action = SIM_STEER_REROUTE;
		t.e.line = line_of(item);
		snprintf(sub, sizeof(sub), "%s[%td]", path, it - v->data.sequence.items.start);
		if (WALK(c, item, sub, event_keys, &t) != 0)
			return MRP_ERR_INVAL;
		if (!t.has_type)
			return perr(c, item, "%s: needs a type (link_down, link_up, plane_down, "
					     "plane_up, blackhole, steer, set_link)", sub);
		if (t.lp.mask && t.e.type != SIM_EVT_SET_LINK)
			return perr(c, item, "%s: link parameters belong to set_link", sub);
		if (t.has_dir && (t.e.type == SIM_EVT_STEER || t.e.type == SIM_EVT_PLANE_DOWN ||
				  t.e.type == SIM_EVT_PLANE_UP))
			return perr(c, item, "%s: direction belongs to link_down, link_up, blackhole "
					     "and set_link", sub);
		if (t.e.type == SIM_EVT_SET_LINK && !t.lp.mask)
			return perr(c, item, "%s: set_link sets nothing (rate, delay, queue, "
					     "ecn_threshold, loss, loss_burst, jitter)", sub);
		t.e.mask = t.lp.mask;
		t.e.v = t.lp.v;
		switch (t.e.type) {
		case SIM_EVT_STEER:
			if (t.w.has_switch || t.w.has_port)
				return perr(c, item, "%s: steer takes host, plane, flow, action", sub);
			if (!t.w.has_host)
				return perr(c, item, "%s: steer needs the host to steer", sub);
			break;
		case SIM_EVT_PLANE_DOWN:
		case SIM_EVT_PLANE_UP:
			if (t.w.has_host || t.w.has_switch || t.w.has_port)
				return perr(c, item, "%s: %s takes only a plane", sub,
					    sim_event_name(t.e.type));
			if (t.has_flow || t.has_action)
				return perr(c, item, "%s: flow and action belong to steer", sub);
			break;
		default:
			if (wh_done(c, item, sub, &t.w, 1) != 0)
				return MRP_ERR_INVAL;
			if (t.has_flow || t.has_action)
				return perr(c, item, "%s: flow and action belong to steer", sub);
			t.e.has_where = 1;
			t.e.where = t.w.ref;
			t.e.host = -1;
		}
		if (sim_config_add_event(c->cfg, &t.e) != 0)
			return perr(c, item, "out of memory");
	}
	return 0;
}

/* --------------------------------------------------------- timeseries */

static int ts_interval(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	sim_ts_config *ts = obj;

	if (get_time(c, v, path, &ts->interval_ns) != 0)
		return MRP_ERR_INVAL;
	if (ts->interval_ns == 0)
		return perr(c, v, "%s: must be greater than 0", path);
	return 0;
}

static int ts_max_samples(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_u32(c, v, path, 2, 1000000, &((sim_ts_config *)obj)->max_samples);
}

static int ts_flows(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_u32(c, v, path, 0, 100000, &((sim_ts_config *)obj)->max_flows);
}

/* links: a number (the N links with the largest queue) or a list of names. */
static int ts_links(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	sim_ts_config *ts = obj;
	char sub[96];

	if (v->type != YAML_SEQUENCE_NODE)
		return get_u32(c, v, path, 0, 100000, &ts->top_links);
	ts->top_links = 0;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		snprintf(sub, sizeof(sub), "%s[%td]", path, it - v->data.sequence.items.start);

		const char *name = scalar(c, node(c, *it), sub);

		if (!name)
			return MRP_ERR_INVAL;
		if (sim_config_add_ts_link(c->cfg, name) != 0)
			return perr(c, v, "out of memory");
	}
	return 0;
}

static const keydef ts_keys[] = {
	{"interval", ts_interval}, {"max_samples", ts_max_samples},
	{"flows", ts_flows},       {"links", ts_links},
};

static int h_timeseries(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	sim_ts_config *ts = &c->cfg->ts;

	(void)obj;
	ts->line = line_of(v);
	if (WALK(c, v, path, ts_keys, ts) != 0)
		return MRP_ERR_INVAL;
	if (ts->interval_ns == 0)
		return perr(c, v, "%s: needs an interval (e.g. 10us)", path);
	if (ts->max_samples % 2)
		return perr(c, v, "%s.max_samples: %u is not even", path, ts->max_samples);
	return 0;
}

/* -------------------------------------------------------- collectives */

enum { CK_SIZE = 1, CK_SIZES = 2, CK_TYPE = 4 };

typedef struct coll_tmp {
	sim_coll_config cc;
	unsigned keys; /* CK_* seen */
} coll_tmp;

static int co_type(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[SIM_COLL_N] = {"allreduce_ring", "allreduce_rd", "alltoall",
						      "allgather"};
	coll_tmp *t = obj;

	t->keys |= CK_TYPE;
	return get_enum(c, v, path, names, SIM_COLL_N, &t->cc.type);
}

/* ranks: N (hosts 0 .. N-1) or a list of host ids, in rank order. */
static int co_ranks(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	coll_tmp *t = obj;
	char sub[96];

	if (v->type == YAML_SCALAR_NODE)
		return get_u32(c, v, path, 2, SIM_MAX_HOSTS, &t->cc.nranks);
	if (want(c, v, path, YAML_SEQUENCE_NODE) != 0)
		return MRP_ERR_INVAL;

	size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);

	if (n < 2 || n > SIM_MAX_HOSTS)
		return perr(c, v, "%s: %zu ranks is out of range (2-%u)", path, n, SIM_MAX_HOSTS);
	t->cc.ranks = calloc(n, sizeof(*t->cc.ranks));
	if (!t->cc.ranks)
		return perr(c, v, "out of memory");
	t->cc.nranks = (uint32_t)n;
	for (size_t i = 0; i < n; i++) {
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		if (get_u32(c, node(c, v->data.sequence.items.start[i]), sub, 0, SIM_MAX_HOSTS - 1,
			    &t->cc.ranks[i]) != 0)
			return MRP_ERR_INVAL;
	}
	return 0;
}

static int add_size(pctx *c, yaml_node_t *v, coll_tmp *t, uint64_t x)
{
	uint64_t *nv;

	if (t->cc.nsizes >= 64)
		return perr(c, v, "collectives: at most 64 sizes per collective");
	nv = realloc(t->cc.sizes, (t->cc.nsizes + 1) * sizeof(*nv));
	if (!nv)
		return perr(c, v, "out of memory");
	t->cc.sizes = nv;
	t->cc.sizes[t->cc.nsizes++] = x;
	return 0;
}

static int get_size(pctx *c, yaml_node_t *v, const char *path, uint64_t *x)
{
	if (get_bytes(c, v, path, x) != 0)
		return MRP_ERR_INVAL;
	if (*x == 0 || *x > (1ull << 40))
		return perr(c, v, "%s: %" PRIu64 " is out of range (1 B - 1 TiB)", path, *x);
	return 0;
}

static int co_size(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	coll_tmp *t = obj;
	uint64_t x;

	t->keys |= CK_SIZE;
	if (get_size(c, v, path, &x) != 0)
		return MRP_ERR_INVAL;
	return add_size(c, v, t, x);
}

typedef struct range_tmp {
	uint64_t from, to, factor;
	unsigned keys;
} range_tmp;

static int rg_from(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	((range_tmp *)obj)->keys |= 1;
	return get_size(c, v, path, &((range_tmp *)obj)->from);
}

static int rg_to(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	((range_tmp *)obj)->keys |= 2;
	return get_size(c, v, path, &((range_tmp *)obj)->to);
}

static int rg_factor(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_u64(c, v, path, 2, 1024, &((range_tmp *)obj)->factor);
}

static const keydef range_keys[] = {{"from", rg_from}, {"to", rg_to}, {"factor", rg_factor}};

/* sizes: a list of sizes, or {from: 8B, to: 1GiB, factor: 2}: from,
 * from x factor, ... up to to. */
static int co_sizes(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	coll_tmp *t = obj;
	char sub[96];
	uint64_t x;

	t->keys |= CK_SIZES;
	if (v->type == YAML_MAPPING_NODE) {
		range_tmp r = {.factor = 2};

		if (WALK(c, v, path, range_keys, &r) != 0)
			return MRP_ERR_INVAL;
		if (r.keys != 3)
			return perr(c, v, "%s: a range needs from and to", path);
		if (r.from > r.to)
			return perr(c, v, "%s: from is above to", path);
		for (x = r.from; x <= r.to; x *= r.factor) {
			if (add_size(c, v, t, x) != 0)
				return MRP_ERR_INVAL;
			if (x > UINT64_MAX / r.factor)
				break;
		}
		return 0;
	}
	if (want(c, v, path, YAML_SEQUENCE_NODE) != 0)
		return MRP_ERR_INVAL;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *item = node(c, *it);

		snprintf(sub, sizeof(sub), "%s[%td]", path, it - v->data.sequence.items.start);
		if (get_size(c, item, sub, &x) != 0 || add_size(c, item, t, x) != 0)
			return MRP_ERR_INVAL;
	}
	if (t->cc.nsizes == 0)
		return perr(c, v, "%s: the list is empty", path);
	return 0;
}

static int co_start(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_time(c, v, path, &((coll_tmp *)obj)->cc.start_ns);
}

static int co_op(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	static const char *const names[] = {"write", "write_imm", "send"};

	return get_enum(c, v, path, names, SIM_OP_N, &((coll_tmp *)obj)->cc.op);
}

static int co_stream(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_u32(c, v, path, 0, UINT32_MAX, &((coll_tmp *)obj)->cc.stream);
}

static int co_plane(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_int(c, v, path, SIM_MAX_PLANES - 1, &((coll_tmp *)obj)->cc.plane);
}

static int co_channels(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_u32(c, v, path, 1, 64, &((coll_tmp *)obj)->cc.channels);
}

static int co_verify_max(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	return get_bytes(c, v, path, &((coll_tmp *)obj)->cc.verify_max);
}

static const keydef coll_keys[] = {
	{"type", co_type},     {"ranks", co_ranks},   {"size", co_size},
	{"sizes", co_sizes},   {"start", co_start},   {"op", co_op},
	{"stream", co_stream}, {"plane", co_plane},   {"verify_max", co_verify_max},
	{"channels", co_channels},
};

static int h_collectives(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	char sub[64];

	(void)obj;
	if (want(c, v, path, YAML_SEQUENCE_NODE) != 0)
		return MRP_ERR_INVAL;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *item = node(c, *it);
		coll_tmp t;
		int rc;

		memset(&t, 0, sizeof(t));
		t.cc.plane = -1;
		t.cc.op = SIM_OP_WRITE_IMM; /* the receiver sees each step arrive */
		t.cc.verify_max = 2ull << 30;
		t.cc.channels = 1;
		t.cc.line = line_of(item);
		snprintf(sub, sizeof(sub), "%s[%td]", path, it - v->data.sequence.items.start);
		rc = WALK(c, item, sub, coll_keys, &t);
		if (rc == 0 && !(t.keys & CK_TYPE))
			rc = perr(c, item, "%s: needs a type (allreduce_ring, allreduce_rd, alltoall, "
					   "allgather)", sub);
		if (rc == 0 && (t.keys & CK_SIZE) && (t.keys & CK_SIZES))
			rc = perr(c, item, "%s: give size or sizes, not both", sub);
		if (rc == 0 && !(t.keys & (CK_SIZE | CK_SIZES)))
			rc = perr(c, item, "%s: needs size or sizes", sub);
		if (rc != 0) {
			free(t.cc.ranks);
			free(t.cc.sizes);
			return MRP_ERR_INVAL;
		}
		if (sim_config_add_coll(c->cfg, &t.cc) != 0)
			return perr(c, item, "out of memory");
	}
	return 0;
}

/* ---------------------------------------------------------------- pfc */

static int pf_xoff(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return get_bytes(c, v, path, &c->cfg->pfc_xoff);
}

static int pf_xon(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return get_bytes(c, v, path, &c->cfg->pfc_xon);
}

static int pf_headroom(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	const char *s = scalar(c, v, path);

	(void)obj;
	if (!s)
		return MRP_ERR_INVAL;
	if (strcmp(s, "auto") == 0) {
		c->cfg->pfc_headroom = 0;
		return 0;
	}
	if (sim_parse_bytes(s, &c->cfg->pfc_headroom) != 0 || c->cfg->pfc_headroom == 0)
		return perr(c, v, "%s: '%s' is not a size above 0 (e.g. 64KB) or 'auto'", path, s);
	return 0;
}

static const keydef pfc_keys[] = {{"xoff", pf_xoff}, {"xon", pf_xon}, {"headroom", pf_headroom}};

static int h_pfc(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	c->cfg->pfc_line = line_of(v);
	return WALK(c, v, path, pfc_keys, obj);
}

/* ---------------------------------------------------------- transport */

static int h_transport(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	char sub[128];

	(void)obj;
	if (want(c, v, path, YAML_MAPPING_NODE) != 0)
		return MRP_ERR_INVAL;
	for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
		yaml_node_t *k = node(c, pr->key), *m = node(c, pr->value);
		const char *name = scalar(c, k, path);

		if (!name)
			return MRP_ERR_INVAL;
		if (!sim_transport_known(name)) {
			char list[128] = "";

			for (size_t i = 0; i < sim_transport_count(); i++) {
				size_t len = strlen(list);

				snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
					 sim_transport_at(i)->name);
			}
			return perr(c, k, "%s: unknown transport '%s' (known: %s)", path, name, list);
		}
		snprintf(sub, sizeof(sub), "%s.%s", path, name);
		if (want(c, m, sub, YAML_MAPPING_NODE) != 0)
			return MRP_ERR_INVAL;

		const sim_transport_ops *ops = sim_transport_find(name);

		for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < m->data.mapping.pairs.top; q++) {
			yaml_node_t *ok = node(c, q->key), *ov = node(c, q->value);
			const char *key = scalar(c, ok, sub);
			char osub[192];

			if (!key)
				return MRP_ERR_INVAL;
			snprintf(osub, sizeof(osub), "%s.%s", sub, key);

			const char *val = scalar(c, ov, osub);

			if (!val)
				return MRP_ERR_INVAL;
			if (ops && ops->options) {
				const char *const *o = ops->options;

				while (*o && strcmp(*o, key) != 0)
					o++;
				if (!*o)
					return perr(c, ok, "%s: unknown key '%s'", sub, key);
			}
			if (sim_config_add_opt(c->cfg, name, key, val, line_of(ov)) != 0)
				return perr(c, ov, "out of memory");
		}
	}
	return 0;
}

/* ---------------------------------------------------------- top level */

static int h_description(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return scalar(c, v, path) ? 0 : MRP_ERR_INVAL;
}

static int h_seed(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return get_u64(c, v, path, 0, UINT64_MAX, &c->cfg->seed);
}

static int h_duration(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	if (get_time(c, v, path, &c->cfg->duration_ns) != 0)
		return MRP_ERR_INVAL;
	if (c->cfg->duration_ns == 0)
		return perr(c, v, "%s: must be greater than 0", path);
	return 0;
}

static int h_mtu(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return get_u32(c, v, path, 256, 9000, &c->cfg->mtu);
}

static int h_hosts(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	c->cfg->hosts_line = line_of(v);
	return get_u32(c, v, path, 2, SIM_MAX_HOSTS, &c->cfg->hosts);
}

static int h_top_fabric(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	c->cfg->fabric_line = line_of(v);
	return h_fabric(c, v, path, &c->fabric);
}

static int h_link(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return h_lpart(c, v, path, &c->link);
}

static int h_host_link(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return h_lpart(c, v, path, &c->host_link);
}

static int h_fabric_link(pctx *c, yaml_node_t *v, const char *path, void *obj)
{
	(void)obj;
	return h_lpart(c, v, path, &c->fabric_link);
}

static const keydef top_keys[] = {
	{"description", h_description}, {"seed", h_seed},   {"duration", h_duration},
	{"mtu", h_mtu},                 {"hosts", h_hosts}, {"planes", h_planes},
	{"fabric", h_top_fabric},       {"link", h_link},   {"host_link", h_host_link},
	{"fabric_link", h_fabric_link}, {"links", h_links}, {"flows", h_flows},
	{"events", h_events},           {"transport", h_transport},
	{"timeseries", h_timeseries},
	{"collectives", h_collectives}, {"pfc", h_pfc},
};

static void apply_lpart(sim_link_params *lp, const lpart *p)
{
	if (p->mask & SIM_LP_RATE)
		lp->rate_bps = p->v.rate_bps;
	if (p->mask & SIM_LP_DELAY)
		lp->delay_ns = p->v.delay_ns;
	if (p->mask & SIM_LP_QUEUE)
		lp->queue_bytes = p->v.queue_bytes;
	if (p->mask & SIM_LP_ECN)
		lp->ecn_bytes = p->v.ecn_bytes;
	if (p->mask & SIM_LP_LOSS)
		lp->loss = p->v.loss;
	if (p->mask & SIM_LP_BURST)
		lp->loss_burst = p->v.loss_burst;
	if (p->mask & SIM_LP_JITTER)
		lp->jitter_ns = p->v.jitter_ns;
}

/* A queue must hold one packet of the largest kind (mtu + headers). */
static int check_queue(pctx *c, const lpart *p)
{
	if (!(p->mask & SIM_LP_QUEUE) || p->v.queue_bytes >= (uint64_t)c->cfg->mtu + 256)
		return 0;
	snprintf(c->err, c->errlen,
		 "%s:%d: %s: %" PRIu64 " bytes cannot hold one packet (mtu + 256 = %" PRIu32 ")",
		 c->cfg->name, p->queue_line, p->queue_path, p->v.queue_bytes, c->cfg->mtu + 256);
	return MRP_ERR_INVAL;
}

static void apply_fpart(sim_plane_config *pc, const fpart *f)
{
	if (f->mask & FP_TYPE)
		pc->fabric = f->type;
	if (f->mask & FP_LEAVES)
		pc->leaves = f->leaves;
	if (f->mask & FP_SPINES)
		pc->spines = f->spines;
	if (f->mask & FP_HPL)
		pc->hosts_per_leaf = f->hpl;
}

/* Merges the layers of defaults into every plane's configuration:
 * built-in < link < host_link/fabric_link < planes[i].link <
 * planes[i].host_link/fabric_link; then fabric < planes[i].fabric. */
static int finish(pctx *c)
{
	sim_config *cfg = c->cfg;

	if (check_queue(c, &c->link) || check_queue(c, &c->host_link) || check_queue(c, &c->fabric_link))
		return MRP_ERR_INVAL;
	for (unsigned p = 0; p < SIM_MAX_PLANES; p++)
		if (check_queue(c, &c->plink[p]) || check_queue(c, &c->phost[p]) ||
		    check_queue(c, &c->pfabric[p]))
			return MRP_ERR_INVAL;
	for (unsigned p = 0; p < cfg->planes; p++) {
		sim_plane_config *pc = &cfg->plane[p];
		const fpart *fp = c->pfab[p].mask ? &c->pfab[p] : &c->fabric;

		apply_lpart(&pc->host_link, &c->link);
		apply_lpart(&pc->host_link, &c->host_link);
		apply_lpart(&pc->host_link, &c->plink[p]);
		apply_lpart(&pc->host_link, &c->phost[p]);
		apply_lpart(&pc->fabric_link, &c->link);
		apply_lpart(&pc->fabric_link, &c->fabric_link);
		apply_lpart(&pc->fabric_link, &c->plink[p]);
		apply_lpart(&pc->fabric_link, &c->pfabric[p]);
		apply_fpart(pc, &c->fabric);
		apply_fpart(pc, &c->pfab[p]);
		if (pc->fabric == SIM_FABRIC_LEAFSPINE && (!pc->leaves || !pc->spines)) {
			snprintf(c->err, c->errlen, "%s:%d: %sfabric: a leaf-spine fabric needs leaves and spines",
				 cfg->name, fp->line, c->pfab[p].mask ? "planes[].": "");
			return MRP_ERR_INVAL;
		}
		if (pc->fabric == SIM_FABRIC_SINGLE && (pc->leaves || pc->spines || pc->hosts_per_leaf)) {
			snprintf(c->err, c->errlen,
				 "%s:%d: fabric: leaves, spines and hosts_per_leaf need type: leafspine",
				 cfg->name, fp->line);
			return MRP_ERR_INVAL;
		}
	}
	for (unsigned p = cfg->planes; p < SIM_MAX_PLANES; p++) {
		if (c->pfab[p].mask || c->plink[p].mask || c->phost[p].mask || c->pfabric[p].mask) {
			snprintf(c->err, c->errlen, "%s: plane %u is configured but planes is %u", cfg->name,
				 p, cfg->planes);
			return MRP_ERR_INVAL;
		}
	}
	return sim_config_check(cfg, c->err, c->errlen);
}

int sim_scenario_parse(const char *text, size_t len, const char *name, sim_config *cfg, char *err,
		       size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	pctx *c;
	int rc;

	sim_config_init(cfg);
	cfg->name = strdup(name ? name : "scenario");
	c = calloc(1, sizeof(*c));
	if (!cfg->name || !c) {
		free(c);
		sim_config_free(cfg);
		snprintf(err, errlen, "out of memory");
		return MRP_ERR_NOMEM;
	}
	c->cfg = cfg;
	c->err = err;
	c->errlen = errlen;
	c->doc = &doc;

	if (!yaml_parser_initialize(&parser)) {
		free(c);
		sim_config_free(cfg);
		snprintf(err, errlen, "out of memory");
		return MRP_ERR_NOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(err, errlen, "%s:%zu: YAML error: %s%s%s", cfg->name,
			 (size_t)parser.problem_mark.line + 1, parser.problem ? parser.problem : "syntax",
			 parser.context ? " " : "", parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		free(c);
		sim_config_free(cfg);
		return MRP_ERR_INVAL;
	}

	yaml_node_t *root = yaml_document_get_root_node(&doc);

	if (!root) {
		snprintf(err, errlen, "%s: the scenario is empty", cfg->name);
		rc = MRP_ERR_INVAL;
	} else {
		rc = WALK(c, root, "", top_keys, NULL);
		if (rc == 0)
			rc = finish(c);
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	free(c);
	if (rc != 0)
		sim_config_free(cfg);
	return rc;
}

int sim_scenario_load(const char *path, sim_config *cfg, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;
	int rc;

	sim_config_init(cfg);
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return MRP_ERR_NOENT;
	}
	buf = malloc(MAX_FILE + 1);
	if (!buf) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return MRP_ERR_NOMEM;
	}
	n = fread(buf, 1, MAX_FILE + 1, f);
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		rc = MRP_ERR_INVAL;
	} else if (n > MAX_FILE) {
		snprintf(err, errlen, "%s: larger than %u bytes", path, MAX_FILE);
		rc = MRP_ERR_RANGE;
	} else {
		rc = sim_scenario_parse(buf, n, path, cfg, err, errlen);
	}
	free(buf);
	fclose(f);
	return rc;
}
