/*
 * Socket addresses of the daemon: one union for IPv4 and IPv6, and the one
 * parser and printer every module uses (the planes' sockets, peers, the
 * control socket's ping and perf, the applications' CONNECT).
 */
#ifndef MRD_ADDR_H
#define MRD_ADDR_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef union mrd_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_storage ss;
} mrd_sockaddr;

/* "127.0.0.1:19791", "[::1]:19791" */
const char *mrd_sockaddr_str(const mrd_sockaddr *a, char *buf, size_t len);

/* Parse "ADDR", "ADDR:PORT" or "[ADDR6]:PORT" (default_port if none).
 * Returns 0 or -1. */
int mrd_sockaddr_parse(mrd_sockaddr *a, socklen_t *plen, const char *s,
		       uint16_t default_port);

/* A numeric IPv4 or IPv6 address alone ("10.0.0.1", "::1": no brackets, no
 * port) with the given port. Returns 0 or -1. */
int mrd_sockaddr_host(mrd_sockaddr *a, socklen_t *plen, const char *host, uint16_t port);

socklen_t mrd_sockaddr_len(const mrd_sockaddr *a);

/* Whether a and b are the same IP address (same family; ports ignored). */
int mrd_sockaddr_same_ip(const mrd_sockaddr *a, const mrd_sockaddr *b);

#endif
