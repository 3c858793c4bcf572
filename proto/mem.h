/*
 * Memory and randomness injected into the engine.
 *
 * The engine never calls the global allocator or a global RNG: whoever
 * creates an engine object hands in an mrp_mem (tests route it to cmocka's
 * leak-checking allocator, the daemon to malloc) and an mrp_rng.
 */
#ifndef MRP_MEM_H
#define MRP_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct mrp_mem {
	void *(*alloc)(void *ud, size_t size); /* NULL on failure */
	void (*free)(void *ud, void *ptr);     /* ptr may be NULL */
	void *ud;
} mrp_mem;

typedef struct mrp_rng {
	uint64_t (*next)(void *ud); /* 64 uniformly random bits */
	void *ud;
} mrp_rng;

/* n * size zeroed bytes, or NULL on overflow or failure. */
static inline void *mrp_calloc(const mrp_mem *m, size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size)
		return NULL;
	void *p = m->alloc(m->ud, n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

static inline void mrp_free(const mrp_mem *m, void *p)
{
	if (p)
		m->free(m->ud, p);
}

/* Uniform in [0, bound), bound > 0 (bias below 2^-32 for bound < 2^32). */
static inline uint64_t mrp_rand_below(const mrp_rng *r, uint64_t bound)
{
	return r->next(r->ud) % bound;
}

#endif
