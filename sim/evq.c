/* Binary min-heap keyed by (t, seq); see evq.h. */
#include <stdlib.h>

#include "error.h"
#include "evq.h"

static inline int before(const sim_ev *a, const sim_ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int sim_evq_init(sim_evq *q, size_t cap)
{
	if (cap < 64)
		cap = 64;
	q->v = malloc(cap * sizeof(*q->v));
	if (!q->v)
		return MRP_ERR_NOMEM;
	q->n = 0;
	q->cap = cap;
	q->seq = 0;
	return 0;
}

void sim_evq_free(sim_evq *q)
{
	free(q->v);
	q->v = NULL;
	q->n = q->cap = 0;
}

int sim_evq_push(sim_evq *q, uint64_t t, uint32_t kind, uint32_t arg, void *obj)
{
	if (q->n == q->cap) {
		size_t cap = q->cap * 2;
		sim_ev *v = realloc(q->v, cap * sizeof(*v));

		if (!v)
			return MRP_ERR_NOMEM;
		q->v = v;
		q->cap = cap;
	}

	sim_ev ev = {.t = t, .seq = q->seq++, .obj = obj, .kind = kind, .arg = arg};
	size_t i = q->n++;

	/* Sift up: move parents down into the hole until ev fits. */
	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!before(&ev, &q->v[parent]))
			break;
		q->v[i] = q->v[parent];
		i = parent;
	}
	q->v[i] = ev;
	return 0;
}

int sim_evq_pop(sim_evq *q, sim_ev *out)
{
	if (q->n == 0)
		return 0;
	*out = q->v[0];

	sim_ev last = q->v[--q->n];
	size_t n = q->n, i = 0;

	/* Sift down the hole at the root, then drop the last element into it. */
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && before(&q->v[c + 1], &q->v[c]))
			c++;
		if (!before(&q->v[c], &last))
			break;
		q->v[i] = q->v[c];
		i = c;
	}
	if (n > 0)
		q->v[i] = last;
	return 1;
}
