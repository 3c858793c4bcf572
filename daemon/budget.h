/*
 * Budgets of answers to packets that are not authenticated (SPEC 14.3): a
 * token bucket per source address (hashed into MRD_BUDGET_BUCKETS buckets
 * with a secret key, so an attacker cannot aim its addresses at another
 * source's bucket, and given the less busy of two candidates, so that a few
 * flooding addresses almost never share one with a bystander) and one for
 * the endpoint.
 *
 * Each kind of answer has its own budget (peer.c: REJECT and NAK
 * UNKNOWN_CONN; RETRY; ACCEPT), so that a flood that draws one down, even
 * one spoofed from a victim's own address, does not starve the others:
 * ACCEPT in particular is drawn only by CONNECTs whose source proved it
 * owns its address (cookie.h).
 */
#ifndef MRD_BUDGET_H
#define MRD_BUDGET_H

#include <stdint.h>

#include "addr.h"

#define MRD_BUDGET_BUCKETS 4096

typedef struct mrd_bucket {
	uint64_t ts_ns;
	uint64_t credit_ns; /* one answer costs 1e9 / rate */
	uint64_t key;       /* the source that holds this bucket */
} mrd_bucket;

typedef struct mrd_budget {
	mrd_bucket src[MRD_BUDGET_BUCKETS];
	mrd_bucket all;
	uint32_t rate_src, rate_all; /* answers per second; burst: one second's */
	uint8_t hkey[16];            /* SipHash key of the source hash */
	uint64_t granted, limited;
} mrd_budget;

/* hkey NULL: drawn from getrandom(). Rates must be nonzero. */
void mrd_budget_init(mrd_budget *b, uint32_t rate_src, uint32_t rate_all,
		     const uint8_t *hkey);

/* May one more answer go to src at now_ns? Takes the credit if so. */
int mrd_budget_take(mrd_budget *b, const mrd_sockaddr *src, uint64_t now_ns);

#endif
