/* Socket addresses: printing and parsing (addr.h). */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

socklen_t mrd_sockaddr_len(const mrd_sockaddr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
}

const char *mrd_sockaddr_str(const mrd_sockaddr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (a->sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &a->in.sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->in.sin_port));
	} else if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->in6.sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
	return buf;
}

int mrd_sockaddr_parse(mrd_sockaddr *a, socklen_t *plen, const char *s,
		       uint16_t default_port)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *port = NULL;
	memset(a, 0, sizeof(*a));
	if (s[0] == '[') {
		const char *e = strchr(s, ']');
		if (!e || (size_t)(e - s - 1) >= sizeof(host))
			return -1;
		memcpy(host, s + 1, (size_t)(e - s - 1));
		host[e - s - 1] = '\0';
		if (e[1] == ':')
			port = e + 2;
		else if (e[1])
			return -1;
	} else {
		const char *c = strchr(s, ':');
		if (c && strchr(c + 1, ':'))
			c = NULL; /* a bare IPv6 address */
		size_t n = c ? (size_t)(c - s) : strlen(s);
		if (n >= sizeof(host))
			return -1;
		memcpy(host, s, n);
		host[n] = '\0';
		if (c)
			port = c + 1;
	}
	unsigned long p = default_port;
	if (port) {
		char *end;
		errno = 0;
		p = strtoul(port, &end, 10);
		if (!*port || *end || errno || p == 0 || p > 65535)
			return -1;
	}
	return mrd_sockaddr_host(a, plen, host, (uint16_t)p);
}

int mrd_sockaddr_host(mrd_sockaddr *a, socklen_t *plen, const char *host, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, host, &a->in.sin_addr) == 1) {
		a->in.sin_family = AF_INET;
		a->in.sin_port = htons(port);
		*plen = sizeof(a->in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) == 1) {
		a->in6.sin6_family = AF_INET6;
		a->in6.sin6_port = htons(port);
		*plen = sizeof(a->in6);
		return 0;
	}
	return -1;
}

int mrd_sockaddr_same_ip(const mrd_sockaddr *a, const mrd_sockaddr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return 0;
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
	if (a->sa.sa_family == AF_INET6)
		return memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) == 0;
	return 0;
}
