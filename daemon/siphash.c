#include "siphash.h"

static uint64_t rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#define SIPROUND                                                                \
	do {                                                                    \
		v0 += v1;                                                       \
		v1 = rotl(v1, 13);                                              \
		v1 ^= v0;                                                       \
		v0 = rotl(v0, 32);                                              \
		v2 += v3;                                                       \
		v3 = rotl(v3, 16);                                              \
		v3 ^= v2;                                                       \
		v0 += v3;                                                       \
		v3 = rotl(v3, 21);                                              \
		v3 ^= v0;                                                       \
		v2 += v1;                                                       \
		v1 = rotl(v1, 17);                                              \
		v1 ^= v2;                                                       \
		v2 = rotl(v2, 32);                                              \
	} while (0)

uint64_t mrd_siphash24(const uint8_t key[16], const void *data, size_t len)
{
	const uint8_t *in = data;
	uint64_t k0 = le64(key), k1 = le64(key + 8);
	uint64_t v0 = k0 ^ 0x736f6d6570736575ull;
	uint64_t v1 = k1 ^ 0x646f72616e646f6dull;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ull;
	uint64_t v3 = k1 ^ 0x7465646279746573ull;
	size_t i;
	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t m = le64(in + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	/* the last 0-7 bytes, with the length's low byte on top */
	uint64_t b = (uint64_t)len << 56;
	for (size_t j = 0; i + j < len; j++)
		b |= (uint64_t)in[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
