#include "cookie.h"

#include <string.h>
#include <sys/random.h>

#include "siphash.h"

static void fresh(uint8_t key[16])
{
	while (getrandom(key, 16, 0) != 16)
		;
}

void mrd_cookie_init(mrd_cookie_keys *k, uint64_t now, const uint8_t *seed)
{
	memset(k, 0, sizeof(*k));
	if (seed) {
		memcpy(k->key[0], seed, 16);
		memcpy(k->key[1], seed + 16, 16);
	} else {
		fresh(k->key[0]);
		fresh(k->key[1]);
	}
	k->rotated_ns = now;
}

/* Replace the keys whose time is over: after one period the current key
 * becomes the previous one; after two, neither is kept. */
static void rotate(mrd_cookie_keys *k, uint64_t now)
{
	if (now - k->rotated_ns < MRD_COOKIE_ROTATE_NS)
		return;
	int both = now - k->rotated_ns >= 2 * MRD_COOKIE_ROTATE_NS;
	k->cur ^= 1;
	fresh(k->key[k->cur]);
	if (both)
		fresh(k->key[k->cur ^ 1]);
	k->rotated_ns = now;
}

static uint64_t mac(const uint8_t key[16], const mrd_sockaddr *src, uint64_t instance)
{
	uint8_t in[1 + 2 + 16 + 8] = {0};
	in[0] = src->sa.sa_family == AF_INET6 ? 6 : 4;
	if (in[0] == 6) {
		memcpy(in + 1, &src->in6.sin6_port, 2);
		memcpy(in + 3, &src->in6.sin6_addr, 16);
	} else {
		memcpy(in + 1, &src->in.sin_port, 2);
		memcpy(in + 3, &src->in.sin_addr, 4);
	}
	for (int i = 0; i < 8; i++)
		in[19 + i] = (uint8_t)(instance >> (8 * i));
	uint64_t v = mrd_siphash24(key, in, sizeof(in));
	return v ? v : 1;
}

uint64_t mrd_cookie_make(mrd_cookie_keys *k, const mrd_sockaddr *src, uint64_t instance,
			 uint64_t now)
{
	rotate(k, now);
	return mac(k->key[k->cur], src, instance);
}

int mrd_cookie_check(mrd_cookie_keys *k, const mrd_sockaddr *src, uint64_t instance,
		     uint64_t cookie, uint64_t now)
{
	rotate(k, now);
	if (!cookie)
		return 0;
	/* (not secret-dependent timing that matters: a guess is one of 2^64) */
	return cookie == mac(k->key[k->cur], src, instance) ||
	       cookie == mac(k->key[k->cur ^ 1], src, instance);
}
