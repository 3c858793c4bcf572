#include "budget.h"

#include <string.h>
#include <sys/random.h>

#include "siphash.h"

void mrd_budget_init(mrd_budget *b, uint32_t rate_src, uint32_t rate_all,
		     const uint8_t *hkey)
{
	memset(b, 0, sizeof(*b));
	b->rate_src = rate_src ? rate_src : 1;
	b->rate_all = rate_all ? rate_all : 1;
	if (hkey)
		memcpy(b->hkey, hkey, sizeof(b->hkey));
	else
		while (getrandom(b->hkey, sizeof(b->hkey), 0) != (ssize_t)sizeof(b->hkey))
			;
}

/* Does the bucket have one answer's credit at now? At most one second of
 * credit accumulates (a burst of `rate`). */
static int have(const mrd_bucket *k, uint32_t rate, uint64_t now, uint64_t *pcredit)
{
	uint64_t cap = 1000000000ull, cost = cap / rate;
	uint64_t t = k->ts_ns == 0 || now - k->ts_ns >= cap ? cap : k->credit_ns + (now - k->ts_ns);
	if (t > cap)
		t = cap;
	*pcredit = t;
	return t >= cost;
}

static void take(mrd_bucket *k, uint32_t rate, uint64_t now, uint64_t credit, int ok)
{
	k->ts_ns = now;
	k->credit_ns = ok ? credit - 1000000000ull / rate : credit;
}

/* The bucket src uses: one of two candidates (two-choice hashing). Its own
 * if it holds one; else a free candidate, or one idle for a second (its
 * credit is full again by then), which it takes over; else, with both
 * candidates held by busy sources, it shares the one with more credit,
 * which is only stricter. A flooding source thus shares a bucket with
 * another only when it and its fellows hold both of that source's
 * candidates: about (k / MRD_BUDGET_BUCKETS)^2 for k flooding addresses. */
static mrd_bucket *bucket(mrd_budget *b, uint64_t h, uint64_t now)
{
	mrd_bucket *c[2] = {&b->src[h % MRD_BUDGET_BUCKETS],
			    &b->src[(h >> 32) % MRD_BUDGET_BUCKETS]};
	for (int i = 0; i < 2; i++)
		if (c[i]->key == h)
			return c[i];
	for (int i = 0; i < 2; i++)
		if (c[i]->ts_ns == 0 || now - c[i]->ts_ns >= 1000000000ull) {
			c[i]->key = h;
			c[i]->ts_ns = 0;
			return c[i];
		}
	uint64_t c0, c1;
	have(c[0], b->rate_src, now, &c0);
	have(c[1], b->rate_src, now, &c1);
	return c1 > c0 ? c[1] : c[0];
}

int mrd_budget_take(mrd_budget *b, const mrd_sockaddr *src, uint64_t now)
{
	uint8_t in[18] = {0};
	size_t n;
	if (src->sa.sa_family == AF_INET6) {
		in[0] = 6;
		memcpy(in + 1, &src->in6.sin6_addr, 16);
		n = 17;
	} else {
		in[0] = 4;
		memcpy(in + 1, &src->in.sin_addr, 4);
		n = 5;
	}
	uint64_t h = mrd_siphash24(b->hkey, in, n) | 1; /* 0 marks a free bucket */
	mrd_bucket *k = bucket(b, h, now);
	uint64_t cs, ca;
	int ok = have(k, b->rate_src, now, &cs) && have(&b->all, b->rate_all, now, &ca);
	if (ok) {
		take(k, b->rate_src, now, cs, 1);
		take(&b->all, b->rate_all, now, ca, 1);
		b->granted++;
	} else {
		b->limited++;
	}
	return ok;
}
