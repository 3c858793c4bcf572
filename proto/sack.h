/*
 * Receiver-side per-path window: which PSNs of one peer path (one generation)
 * arrived, as reported in ACKs.
 *
 * A path is one ECMP route, so its packets arrive in PSN order unless lost:
 * a PSN missing below the highest one received is loss, not reordering. The
 * window is anchored at the highest PSN received: next_psn is that PSN + 1 and
 * bit i of the 256-bit map says whether PSN next_psn - 1 - i arrived. Holes
 * never block the window (a lost PSN is never sent again: retransmissions get
 * fresh PSNs), so the window slides forward with every new PSN.
 */
#ifndef MRP_SACK_H
#define MRP_SACK_H

#include <stdint.h>

#include "wire.h"

typedef struct mrp_rxwin {
	uint64_t bits[MRP_SACK_BITS / 64]; /* bit i: PSN next_psn - 1 - i arrived */
	uint32_t next_psn;  /* highest PSN received + 1 */
	uint32_t ce_count;  /* CE-marked packets received in this generation */
	uint32_t rcv_count; /* packets received in this generation */
	uint16_t gen;
	uint8_t any;        /* at least one PSN received */
} mrp_rxwin;

enum {
	MRP_RXWIN_NEW = 0, /* first arrival of this PSN */
	MRP_RXWIN_DUP = 1, /* already recorded */
	MRP_RXWIN_OLD = 2, /* below the window: cannot be recorded */
};

void mrp_rxwin_init(mrp_rxwin *w, uint16_t gen);

/*
 * Record the arrival of psn. Returns MRP_RXWIN_NEW, _DUP or _OLD. *pgap is set
 * when this arrival reveals a hole (it skipped PSNs) or fills one.
 */
int mrp_rxwin_record(mrp_rxwin *w, uint32_t psn, int *pgap);

/* Whether psn is recorded as received. */
int mrp_rxwin_has(const mrp_rxwin *w, uint32_t psn);

/* Fill the window fields of an ACK: next_psn, sack, ce_count, rcv_count. */
void mrp_rxwin_to_ack(const mrp_rxwin *w, mrp_ack *ack);

/* Read bit i of an ACK's map (PSN next_psn - 1 - i). */
static inline int mrp_ack_bit(const mrp_ack *ack, unsigned i)
{
	return (ack->sack[i / 8] >> (i % 8)) & 1;
}

#endif
