/* Integer arithmetic shared by the engine's modules (no floating point, no
 * libgcc 128-bit division). */
#ifndef MRP_ARITH_H
#define MRP_ARITH_H

#include <stdint.h>

/* a * b / c rounded down, without overflowing the product; UINT64_MAX when
 * the quotient does not fit in 64 bits or c is 0. */
uint64_t mrp_mul_div(uint64_t a, uint64_t b, uint64_t c);

#endif
