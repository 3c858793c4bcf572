/*
 * SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012), written from the paper's description of the algorithm: a keyed
 * 64-bit MAC for short inputs. The handshake cookie (cookie.h) uses it.
 */
#ifndef MRD_SIPHASH_H
#define MRD_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* key: 16 bytes (k0 = bytes 0-7, k1 = bytes 8-15, little-endian). */
uint64_t mrd_siphash24(const uint8_t key[16], const void *data, size_t datalen);

#endif
