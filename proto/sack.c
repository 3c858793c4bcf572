#include <string.h>

#include "sack.h"

#define NWORDS (MRP_SACK_BITS / 64)

void mrp_rxwin_init(mrp_rxwin *w, uint16_t gen)
{
	memset(w, 0, sizeof(*w));
	w->gen = gen;
}

/* Move every bit n places toward older PSNs (higher index); bits pushed past
 * the window are forgotten. */
static void shift_older(uint64_t *bits, uint32_t n)
{
	if (n >= MRP_SACK_BITS) {
		memset(bits, 0, NWORDS * sizeof(bits[0]));
		return;
	}
	unsigned words = n / 64, sh = n % 64;
	for (int i = NWORDS - 1; i >= 0; i--) {
		int src = i - (int)words;
		uint64_t v = 0;
		if (src >= 0) {
			v = bits[src] << sh;
			if (sh && src >= 1)
				v |= bits[src - 1] >> (64 - sh);
		}
		bits[i] = v;
	}
}

static inline int get_bit(const uint64_t *bits, uint32_t i)
{
	return (bits[i / 64] >> (i % 64)) & 1;
}

static inline void set_bit(uint64_t *bits, uint32_t i)
{
	bits[i / 64] |= 1ull << (i % 64);
}

int mrp_rxwin_record(mrp_rxwin *w, uint32_t psn, int *pgap)
{
	*pgap = 0;
	if (!w->any) {
		/* PSNs start at 0 in every generation: anything else skipped some. */
		w->any = 1;
		w->next_psn = psn + 1;
		memset(w->bits, 0, sizeof(w->bits));
		set_bit(w->bits, 0);
		*pgap = psn != 0;
		return MRP_RXWIN_NEW;
	}
	/* Serial-number distance from the highest PSN received (RFC 1982). */
	int32_t d = (int32_t)(psn - (w->next_psn - 1));
	if (d == 1) {
		/* the next PSN, as nearly every arrival on a path: a one-place
		 * shift, written out (the general shift is a loop) */
		for (int i = NWORDS - 1; i > 0; i--)
			w->bits[i] = w->bits[i] << 1 | w->bits[i - 1] >> 63;
		w->bits[0] = w->bits[0] << 1 | 1;
		w->next_psn = psn + 1;
		return MRP_RXWIN_NEW;
	}
	if (d > 0) {
		shift_older(w->bits, (uint32_t)d);
		set_bit(w->bits, 0);
		w->next_psn = psn + 1;
		*pgap = d > 1;
		return MRP_RXWIN_NEW;
	}
	uint32_t age = (uint32_t)(-(int64_t)d);
	if (age >= MRP_SACK_BITS)
		return MRP_RXWIN_OLD;
	if (get_bit(w->bits, age))
		return MRP_RXWIN_DUP;
	/* A late arrival filling a hole: reordering inside one path. */
	set_bit(w->bits, age);
	*pgap = 1;
	return MRP_RXWIN_NEW;
}

int mrp_rxwin_has(const mrp_rxwin *w, uint32_t psn)
{
	if (!w->any)
		return 0;
	int32_t d = (int32_t)(psn - (w->next_psn - 1));
	if (d > 0)
		return 0;
	uint32_t age = (uint32_t)(-(int64_t)d);
	return age < MRP_SACK_BITS && get_bit(w->bits, age);
}

void mrp_rxwin_to_ack(const mrp_rxwin *w, mrp_ack *ack)
{
	ack->acked_path_gen = w->gen;
	ack->next_psn = w->next_psn;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* the map's bytes are the words' bytes in little-endian order */
	_Static_assert(sizeof(ack->sack) == sizeof(w->bits), "SACK map size");
	memcpy(ack->sack, w->bits, sizeof(ack->sack));
#else
	for (unsigned j = 0; j < MRP_SACK_BYTES; j++)
		ack->sack[j] = (uint8_t)(w->bits[j / 8] >> ((j % 8) * 8));
#endif
	ack->ce_count = w->ce_count;
	ack->rcv_count = w->rcv_count;
}
