/*
 * Memory budgets of the engine (proto/conn.c allocates through the
 * allocator the daemon hands it, proto/mem.h): every connection's engine
 * gets an allocator of its own that counts what it holds and refuses,
 * before allocating, what would take the connection past
 * transport.conn_memory or the daemon past transport.memory. The engine
 * answers a refused allocation for a received message with NAK RNR (the
 * sender retries later, SPEC 5.5 check 8): the packet is refused, never
 * absorbed. A peer that sends the first packets of ever more messages thus
 * holds at most its connection's budget, and all peers together at most
 * the daemon's.
 */
#ifndef MRD_MEMBUDGET_H
#define MRD_MEMBUDGET_H

#include <stdint.h>

#include "mem.h"

typedef struct mrd_memacct { /* the daemon's */
	uint64_t used, limit, refused;
} mrd_memacct;

/* What a connection freed stays its own, up to this much, counted in the
 * daemon's total: reused before anything new is taken from the daemon's
 * budget. The daemon-wide budget is first come, first served; without
 * this, memory a working connection freed as its messages completed was
 * taken by a peer that held everything else (a flood of message starts),
 * and the working connection's next message was refused (NAK RNR) until
 * its sender gave up. */
#define MRD_MEM_RESERVE_MAX (1ull << 20)

typedef struct mrd_membudget { /* one connection's */
	mrd_memacct *all;
	uint64_t used, peak, limit, refused;
	uint64_t reserve; /* freed, kept for reuse: in all->used, not in used */
} mrd_membudget;

void mrd_membudget_init(mrd_membudget *b, mrd_memacct *all, uint64_t limit);

/* The allocator to hand the engine (ud = b; b must outlive the engine). */
mrp_mem mrd_membudget_mem(mrd_membudget *b);

/* After the engine is deleted: its reserve goes back to the daemon. */
void mrd_membudget_fini(mrd_membudget *b);

#endif
