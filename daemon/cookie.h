/*
 * The handshake cookie (SPEC 9.7): address validation without state, in
 * the way of QUIC's Retry token and TCP's SYN cookies.
 *
 * An acceptor that gets a CONNECT without a valid cookie keeps nothing and
 * answers RETRY with cookie = SipHash-2-4(key, source address and port,
 * the initiator's instance id). Only the owner of the source address
 * receives it; its CONNECT carrying the cookie is the first that creates
 * state. The key is drawn from getrandom() and replaced every
 * MRD_COOKIE_ROTATE_NS; a cookie is accepted under the current and the
 * previous key, so it lives between one and two rotation periods. It does
 * not bind the connection id: an initiator reuses it for every connection
 * to that acceptor while it is young (MRD_COOKIE_REUSE_NS), so a flood
 * spoofed from its own address does not hold up its next connections.
 */
#ifndef MRD_COOKIE_H
#define MRD_COOKIE_H

#include <stdint.h>

#include "addr.h"

#define MRD_COOKIE_ROTATE_NS 30000000000ull /* 30 s */
#define MRD_COOKIE_REUSE_NS 20000000000ull  /* initiator: reuse for 20 s */

typedef struct mrd_cookie_keys {
	uint8_t key[2][16]; /* [cur], [cur ^ 1] the previous one */
	unsigned cur;
	uint64_t rotated_ns;
} mrd_cookie_keys;

/* seed NULL: keys from getrandom() (the tests give one: 32 bytes). */
void mrd_cookie_init(mrd_cookie_keys *k, uint64_t now_ns, const uint8_t *seed);

/* The cookie for a CONNECT from src naming instance; never 0. */
uint64_t mrd_cookie_make(mrd_cookie_keys *k, const mrd_sockaddr *src, uint64_t instance,
			 uint64_t now_ns);

/* 1 if cookie is one this endpoint made for (src, instance) under the
 * current or the previous key. */
int mrd_cookie_check(mrd_cookie_keys *k, const mrd_sockaddr *src, uint64_t instance,
		     uint64_t cookie, uint64_t now_ns);

#endif
