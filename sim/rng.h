/*
 * Seeded pseudo-random numbers for the simulator: splitmix64 to expand seeds,
 * xoshiro256** for the streams (Blackman and Vigna, public domain reference
 * algorithms). Every random draw in the simulator comes from one of these
 * streams, each derived from the scenario seed and a fixed label, so a run is
 * a pure function of (scenario, seed). Nothing here reads global state.
 */
#ifndef SIM_RNG_H
#define SIM_RNG_H

#include <stdint.h>

typedef struct sim_rng {
	uint64_t s[4];
} sim_rng;

/* One step of splitmix64: advances *x and returns the next output. */
static inline uint64_t sim_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A stateless 64-bit mix (the splitmix64 finalizer): a bijection. */
static inline uint64_t sim_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Seed a stream from (seed, label): distinct labels give independent streams
 * of the same seed (label = host id, link id, flow id, ... plus a tag). */
static inline void sim_rng_seed(sim_rng *r, uint64_t seed, uint64_t label)
{
	uint64_t x = seed ^ sim_mix64(label + 0x6a09e667f3bcc909ull);

	for (int i = 0; i < 4; i++)
		r->s[i] = sim_splitmix64(&x);
}

static inline uint64_t sim_rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256**: the next 64 random bits. */
static inline uint64_t sim_rng_next(sim_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = sim_rng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = sim_rng_rotl(s[3], 45);
	return result;
}

/* Uniform double in [0, 1). */
static inline double sim_rng_double(sim_rng *r)
{
	return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n) for n >= 1 (Lemire's multiply-shift; the bias is
 * below 2^-32 for the n used here, and the result is deterministic). */
__extension__ typedef unsigned __int128 sim_u128;

static inline uint64_t sim_rng_below(sim_rng *r, uint64_t n)
{
	return (uint64_t)(((sim_u128)sim_rng_next(r) * n) >> 64);
}

#endif
