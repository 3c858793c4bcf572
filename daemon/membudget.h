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

typedef struct mrd_memacct { /* the daemon's, or one peer address's */
	uint64_t used, limit, refused;
	uint64_t refused_addr; /* the daemon's: of refused, by an address's share */
} mrd_memacct;

/* What the connections with one peer IP address hold together, within
 * transport.address_memory (SPEC 14.4): the daemon's budget is first come,
 * first served, so without a share per address the peers at one address
 * could hold all of it and every other peer's new messages would wait
 * (NAK RNR) until they let go. One entry per IP address that has a
 * connection, shared by its connections (refs); the daemon keeps the
 * entries in a keyed hash table, list is the chain of one bucket. */
typedef struct mrd_addrmem {
	mrd_memacct acct;
	struct mrd_addrmem *next;
	unsigned refs;
	uint32_t accepted; /* connections its CONNECTs made (max_conns_per_address) */
	int family;
	uint8_t ip[16];
} mrd_addrmem;

/* The entry of the address (family AF_INET: 4 bytes of ip, AF_INET6: 16)
 * in *list, created if there is none (NULL when out of memory), with one
 * more reference and its limit set to limit. */
mrd_addrmem *mrd_addrmem_get(mrd_addrmem **list, int family, const void *ip,
			     uint64_t limit);
/* The entry of the address in list, or NULL. */
mrd_addrmem *mrd_addrmem_find(mrd_addrmem *list, int family, const void *ip);
/* One reference less; the entry goes when the last one does. */
void mrd_addrmem_put(mrd_addrmem **list, mrd_addrmem *a);

/* What a connection freed stays its own, up to this much, counted in the
 * daemon's total: reused before anything new is taken from the daemon's
 * budget. The daemon-wide budget is first come, first served; without
 * this, memory a working connection freed as its messages completed was
 * taken by a peer that held everything else (a flood of message starts),
 * and the working connection's next message was refused (NAK RNR) until
 * its sender gave up. */
#define MRD_MEM_RESERVE_MAX (1ull << 20)

typedef struct mrd_membudget { /* one connection's */
	mrd_memacct *all;  /* the daemon's (or NULL) */
	mrd_memacct *addr; /* its peer address's (or NULL) */
	uint64_t used, peak, limit, refused;
	uint64_t reserve; /* freed, kept for reuse: in all->used, not in used */
} mrd_membudget;

void mrd_membudget_init(mrd_membudget *b, mrd_memacct *all, mrd_memacct *addr,
			uint64_t limit);

/* The allocator to hand the engine (ud = b; b must outlive the engine). */
mrp_mem mrd_membudget_mem(mrd_membudget *b);

/* After the engine is deleted: its reserve goes back to the daemon (and
 * the address). */
void mrd_membudget_fini(mrd_membudget *b);

#endif
