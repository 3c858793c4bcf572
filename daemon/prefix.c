#include "prefix.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mrd_prefix_parse(const char *s, mrd_prefix *out, unsigned max, char *err, size_t errlen)
{
	unsigned n = 0;
	const char *p = s;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		const char *e = p;
		while (*e && *e != ',' && *e != ' ' && *e != '\t')
			e++;
		char item[64];
		size_t len = (size_t)(e - p);
		if (len >= sizeof(item)) {
			snprintf(err, errlen, "'%.*s...' is not an address or prefix", 20, p);
			return -1;
		}
		memcpy(item, p, len);
		item[len] = 0;
		if (n == max) {
			snprintf(err, errlen, "more than %u prefixes", max);
			return -1;
		}
		mrd_prefix *x = &out[n];
		memset(x, 0, sizeof(*x));
		char *slash = strchr(item, '/');
		long bits = -1;
		if (slash) {
			char *end;
			*slash = 0;
			bits = strtol(slash + 1, &end, 10);
			if (!slash[1] || *end || bits < 0) {
				snprintf(err, errlen, "'%s/%s': bad prefix length", item, slash + 1);
				return -1;
			}
		}
		if (inet_pton(AF_INET, item, x->bytes) == 1) {
			x->family = AF_INET;
			if (bits > 32)
				goto badlen;
			x->len = (uint8_t)(bits < 0 ? 32 : bits);
		} else if (inet_pton(AF_INET6, item, x->bytes) == 1) {
			x->family = AF_INET6;
			if (bits > 128)
				goto badlen;
			x->len = (uint8_t)(bits < 0 ? 128 : bits);
		} else {
			snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address", item);
			return -1;
		}
		n++;
		p = e;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == ',')
			p++;
		continue;
badlen:
		snprintf(err, errlen, "'%s/%ld': prefix length out of range", item, bits);
		return -1;
	}
	return (int)n;
}

static int in_prefix(const mrd_prefix *p, const uint8_t *a)
{
	unsigned full = p->len / 8, rest = p->len % 8;
	if (memcmp(p->bytes, a, full))
		return 0;
	if (!rest)
		return 1;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (p->bytes[full] & mask) == (a[full] & mask);
}

int mrd_prefix_match(const mrd_prefix *p, unsigned n, const mrd_sockaddr *addr)
{
	uint8_t v4[4];
	const uint8_t *a6 = NULL, *a4 = NULL;
	if (addr->sa.sa_family == AF_INET) {
		memcpy(v4, &addr->in.sin_addr, 4);
		a4 = v4;
	} else if (addr->sa.sa_family == AF_INET6) {
		a6 = addr->in6.sin6_addr.s6_addr;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (memcmp(a6, mapped, 12) == 0)
			a4 = a6 + 12;
	}
	for (unsigned i = 0; i < n; i++)
		if ((p[i].family == AF_INET && a4 && in_prefix(&p[i], a4)) ||
		    (p[i].family == AF_INET6 && a6 && in_prefix(&p[i], a6)))
			return 1;
	return 0;
}
