/*
 * Address prefixes ("10.0.0.0/8, fd00::/64, 127.0.0.1"): the lists of peers
 * the daemon's own services answer (config services.*_peers).
 */
#ifndef MRD_PREFIX_H
#define MRD_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"

#define MRD_PREFIX_MAX 16
#define MRD_PREFIX_TEXT 512 /* the text of a list, NUL included */

typedef struct mrd_prefix {
	uint8_t family; /* AF_INET or AF_INET6 */
	uint8_t len;    /* prefix length in bits */
	uint8_t bytes[16];
} mrd_prefix;

/* Parse a comma-separated list (spaces allowed) of at most MRD_PREFIX_MAX
 * addresses with an optional /len. "" is an empty list. Returns the number
 * of prefixes, or -1 with err filled. */
int mrd_prefix_parse(const char *s, mrd_prefix *out, unsigned max, char *err,
		     size_t errlen);

/* 1 if addr lies in one of the n prefixes. An IPv4-mapped IPv6 address
 * matches as IPv4. */
int mrd_prefix_match(const mrd_prefix *p, unsigned n, const mrd_sockaddr *addr);

#endif
