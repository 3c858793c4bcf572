/*
 * The handshake's keyed hash and what is built on it (daemon/siphash.c,
 * cookie.c, budget.c): SipHash-2-4 against the reference test vectors
 * (key 00..0f, messages 00..(n-1)); cookies valid for their source and
 * instance only, across one key rotation but not two; budgets that grant a
 * source its rate, keep each source apart (also a source whose first
 * bucket a flooding source holds) and hold the global bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "budget.h"
#include "cookie.h"
#include "siphash.h"

static void test_siphash_vectors(void **state)
{
	(void)state;
	/* From the SipHash paper (Appendix A) and its reference vectors. */
	static const struct {
		size_t len;
		uint64_t out;
	} v[] = {
		{0, 0x726fdb47dd0e0e31ull}, {1, 0x74f839c593dc67fdull},
		{2, 0x0d6c8009d9a94f5aull}, {3, 0x85676696d7fb7e2dull},
		{4, 0xcf2794e0277187b7ull}, {5, 0x18765564cd99a68dull},
		{6, 0xcbc9466e58fee3ceull}, {7, 0xab0200f58b01d137ull},
		{8, 0x93f5f5799a932462ull}, {15, 0xa129ca6149be45e5ull},
	};
	uint8_t key[16], msg[64];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_true(mrd_siphash24(key, msg, v[i].len) == v[i].out);
}

static mrd_sockaddr v4(const char *a, uint16_t port)
{
	mrd_sockaddr s;
	memset(&s, 0, sizeof(s));
	s.in.sin_family = AF_INET;
	s.in.sin_port = htons(port);
	inet_pton(AF_INET, a, &s.in.sin_addr);
	return s;
}

#define SEC 1000000000ull

static void test_cookie(void **state)
{
	(void)state;
	uint8_t seed[32];
	for (int i = 0; i < 32; i++)
		seed[i] = (uint8_t)(7 * i + 1);
	mrd_cookie_keys k;
	uint64_t t = 100 * SEC;
	mrd_cookie_init(&k, t, seed);
	mrd_sockaddr a = v4("127.0.0.1", 19791), b = v4("127.0.0.2", 19791),
		     a2 = v4("127.0.0.1", 19792);
	uint64_t c = mrd_cookie_make(&k, &a, 42, t);
	assert_true(c != 0);
	assert_true(mrd_cookie_check(&k, &a, 42, c, t + 1));
	assert_false(mrd_cookie_check(&k, &b, 42, c, t + 1));  /* other address */
	assert_false(mrd_cookie_check(&k, &a2, 42, c, t + 1)); /* other port */
	assert_false(mrd_cookie_check(&k, &a, 43, c, t + 1));  /* other instance */
	assert_false(mrd_cookie_check(&k, &a, 42, 0, t + 1));
	assert_false(mrd_cookie_check(&k, &a, 42, c ^ 1, t + 1));
	/* one rotation later: still good (the previous key) */
	assert_true(mrd_cookie_check(&k, &a, 42, c, t + MRD_COOKIE_ROTATE_NS + 1));
	/* and the new cookie differs */
	uint64_t c2 = mrd_cookie_make(&k, &a, 42, t + MRD_COOKIE_ROTATE_NS + 2);
	assert_true(c2 != c);
	/* a second rotation: the first cookie is gone, the second lives */
	assert_false(mrd_cookie_check(&k, &a, 42, c, t + 2 * MRD_COOKIE_ROTATE_NS + 3));
	assert_true(mrd_cookie_check(&k, &a, 42, c2, t + 2 * MRD_COOKIE_ROTATE_NS + 3));
	/* long idle: both keys replaced at once */
	assert_false(mrd_cookie_check(&k, &a, 42, c2, t + 10 * MRD_COOKIE_ROTATE_NS));
}

static void test_budget(void **state)
{
	(void)state;
	uint8_t hk[16] = {1, 2, 3};
	mrd_budget b;
	mrd_budget_init(&b, 100, 1000, hk);
	mrd_sockaddr x = v4("10.0.0.1", 1), y = v4("10.0.0.2", 1);
	uint64_t t = 5 * SEC;
	/* a burst of one second's worth, then nothing */
	int n = 0;
	for (int i = 0; i < 1000; i++)
		n += mrd_budget_take(&b, &x, t);
	assert_int_equal(n, 100);
	/* another source is not held up by x (unless they share a bucket,
	 * which this key and these two addresses do not) */
	n = 0;
	for (int i = 0; i < 50; i++)
		n += mrd_budget_take(&b, &y, t);
	assert_int_equal(n, 50);
	/* 10 ms later x has one more */
	assert_int_equal(mrd_budget_take(&b, &x, t + 10000000), 1);
	assert_int_equal(mrd_budget_take(&b, &x, t + 10000000), 0);
	/* the global bound: 1000 a second, whatever the sources */
	mrd_budget_init(&b, 100, 1000, hk);
	n = 0;
	for (int i = 0; i < 5000; i++) {
		char a[32];
		snprintf(a, sizeof(a), "10.%d.%d.1", i / 256, i % 256);
		mrd_sockaddr s = v4(a, 9);
		n += mrd_budget_take(&b, &s, t);
	}
	assert_int_equal(n, 1000);
	assert_true(b.limited == 4000 && b.granted == 1000);
}

/* The two bucket candidates of a v4 address (as budget.c derives them). */
static void cands(const uint8_t hk[16], const mrd_sockaddr *s, unsigned c[2])
{
	uint8_t in[18] = {4};
	memcpy(in + 1, &s->in.sin_addr, 4);
	uint64_t h = mrd_siphash24(hk, in, 5) | 1;
	c[0] = (unsigned)(h % MRD_BUDGET_BUCKETS);
	c[1] = (unsigned)((h >> 32) % MRD_BUDGET_BUCKETS);
}

/* An address in 10/8 whose first candidate is bucket `want`. */
static mrd_sockaddr aimed(const uint8_t hk[16], unsigned want)
{
	for (unsigned i = 1; i < (1u << 24); i++) {
		char a[32];
		snprintf(a, sizeof(a), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
		mrd_sockaddr s = v4(a, 1);
		unsigned c[2];
		cands(hk, &s, c);
		if (c[0] == want && c[1] != want)
			return s;
	}
	fail_msg("no address aims at bucket %u", want);
	return v4("0.0.0.0", 0);
}

/* A flooding source that holds a bystander's first bucket does not starve
 * it: the bystander takes its second. Only when flooders hold both does it
 * share, with the one that has more credit left. */
static void test_budget_two_choices(void **state)
{
	(void)state;
	uint8_t hk[16] = {9, 8, 7};
	mrd_budget b;
	mrd_budget_init(&b, 100, 100000, hk);
	mrd_sockaddr v = v4("192.168.7.7", 1);
	unsigned cv[2];
	cands(hk, &v, cv);
	assert_true(cv[0] != cv[1]);
	mrd_sockaddr x = aimed(hk, cv[0]), y = aimed(hk, cv[1]);
	uint64_t t = 5 * SEC;
	int n = 0;
	for (int i = 0; i < 1000; i++)
		n += mrd_budget_take(&b, &x, t);
	assert_int_equal(n, 100);
	/* x keeps flooding; v gets its whole second's worth */
	n = 0;
	for (int i = 0; i < 200; i++) {
		n += mrd_budget_take(&b, &v, t + 1000000);
		mrd_budget_take(&b, &x, t + 1000000);
	}
	assert_int_equal(n, 100);
	/* with y on v's second bucket as well, v shares: never more than
	 * what is left to the pair (x and y spend first) */
	mrd_budget_init(&b, 100, 100000, hk);
	for (int i = 0; i < 1000; i++) {
		mrd_budget_take(&b, &x, t);
		mrd_budget_take(&b, &y, t);
	}
	n = 0;
	for (int i = 0; i < 200; i++)
		n += mrd_budget_take(&b, &v, t + 1000000);
	assert_true(n <= 1);
	/* a second of silence from both, and v has its own bucket again */
	n = 0;
	for (int i = 0; i < 200; i++)
		n += mrd_budget_take(&b, &v, t + 3 * SEC);
	assert_int_equal(n, 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_siphash_vectors),
		cmocka_unit_test(test_cookie),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_budget_two_choices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
