#include "arith.h"

/* The full 128-bit product a * b as hi:lo, from 32-bit halves. */
static void mul_64x64(uint64_t a, uint64_t b, uint64_t *phi, uint64_t *plo)
{
	uint64_t al = a & 0xffffffffu, ah = a >> 32;
	uint64_t bl = b & 0xffffffffu, bh = b >> 32;
	uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);

	*plo = (ll & 0xffffffffu) | (mid << 32);
	*phi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

/*
 * a * b / c rounded down, without overflowing the product; UINT64_MAX when
 * the quotient does not fit in 64 bits or c is 0. Bit-by-bit long division
 * in the slow path keeps libgcc's 128-bit division out of the library.
 */
uint64_t mrp_mul_div(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t hi, lo, q = 0, r;

	if (c == 0)
		return UINT64_MAX;
	if (b == 0 || a <= UINT64_MAX / b)
		return a * b / c;
	mul_64x64(a, b, &hi, &lo);
	if (hi >= c)
		return UINT64_MAX;
	r = hi;
	for (int i = 63; i >= 0; i--) {
		uint64_t carry = r >> 63;

		r = (r << 1) | ((lo >> i) & 1);
		q <<= 1;
		/* With carry set the true remainder is 2^64 + r >= c; the
		 * subtraction wraps to the right value, which is < c. */
		if (carry || r >= c) {
			r -= c;
			q |= 1;
		}
	}
	return q;
}
