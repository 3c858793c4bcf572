/*
 * udp_blast: the socket limit for bench_daemon. A sender blasts UDP GSO
 * super-datagrams (UDP_SEGMENT, 4 KiB segments) at a receiver that reads
 * with UDP_GRO + recvmmsg and counts bytes; both run for N seconds.
 *
 *   udp_blast recv PORT SECONDS        prints {"bytes":B,"seconds":S,"gbps":G}
 *   udp_blast send PORT SECONDS [SEG]  sends to 127.0.0.1:PORT
 *
 * The receiver's clock starts at its first datagram and stops at its last
 * (so start-up skew between the two processes does not count); it exits
 * SECONDS + 1 s after start, or 0.5 s after traffic stops. No payload is
 * checked: this measures the kernel's UDP path, the ceiling of any UDP
 * transport on this host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define BATCH 16
#define SLOT 65536

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int usage(void)
{
	fprintf(stderr, "usage: udp_blast recv PORT SECONDS | send PORT SECONDS [SEG]\n");
	return 2;
}

static void bigbuf(int fd, int opt_force, int opt, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static int do_recv(uint16_t port, double seconds)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) < 0) {
		perror("udp_blast: socket/UDP_GRO");
		return 1;
	}
	bigbuf(fd, SO_RCVBUFFORCE, SO_RCVBUF, 16 << 20);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("udp_blast: bind");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	uint8_t *buf = malloc((size_t)BATCH * SLOT);
	if (!buf)
		return 1;
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	uint64_t bytes = 0, dgrams = 0, first = 0, last = 0;
	uint64_t start = now_ns(), end = start + (uint64_t)((seconds + 1.0) * 1e9);
	for (;;) {
		uint64_t t = now_ns();
		if (t >= end || (first && t - last > 500000000u))
			break;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		for (;;) {
			for (int i = 0; i < BATCH; i++) {
				iov[i].iov_base = buf + (size_t)i * SLOT;
				iov[i].iov_len = SLOT;
				memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
				msgs[i].msg_hdr.msg_iov = &iov[i];
				msgs[i].msg_hdr.msg_iovlen = 1;
			}
			int r = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
			if (r <= 0)
				break;
			last = now_ns();
			if (!first)
				first = last;
			for (int i = 0; i < r; i++)
				bytes += msgs[i].msg_len;
			dgrams += (uint64_t)r;
			if (r < BATCH)
				break;
		}
	}
	double secs = first && last > first ? (double)(last - first) / 1e9 : 0;
	printf("{\"bytes\":%llu,\"buffers\":%llu,\"seconds\":%.6f,\"gbps\":%.3f}\n",
	       (unsigned long long)bytes, (unsigned long long)dgrams, secs,
	       secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0.0);
	free(buf);
	close(fd);
	return 0;
}

static int do_send(uint16_t port, double seconds, unsigned seg)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("udp_blast: socket");
		return 1;
	}
	bigbuf(fd, SO_SNDBUFFORCE, SO_SNDBUF, 4 << 20);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("udp_blast: connect");
		return 1;
	}
	unsigned nseg = 65000 / seg;
	if (nseg > 64)
		nseg = 64;
	size_t len = (size_t)nseg * seg;
	uint8_t *buf = calloc(1, len);
	if (!buf)
		return 1;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct {
		_Alignas(struct cmsghdr) char b[CMSG_SPACE(sizeof(uint16_t))];
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
			   .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_UDP;
	cm->cmsg_type = UDP_SEGMENT;
	cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
	uint16_t gs = (uint16_t)seg;
	memcpy(CMSG_DATA(cm), &gs, sizeof(gs));
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), sent = 0, errs = 0;
	while (now_ns() < end) {
		for (int i = 0; i < 16; i++) {
			ssize_t r = sendmsg(fd, &m, 0);
			if (r > 0)
				sent += (uint64_t)r;
			else if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED &&
				 ++errs > 1000) {
				perror("udp_blast: sendmsg");
				return 1;
			}
		}
	}
	printf("{\"sent_bytes\":%llu}\n", (unsigned long long)sent);
	free(buf);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return usage();
	long port = strtol(argv[2], NULL, 10);
	double secs = strtod(argv[3], NULL);
	if (port <= 0 || port > 65535 || !(secs > 0))
		return usage();
	if (!strcmp(argv[1], "recv"))
		return do_recv((uint16_t)port, secs);
	if (!strcmp(argv[1], "send")) {
		long seg = argc > 4 ? strtol(argv[4], NULL, 10) : 4096 + 28;
		if (seg < 64 || seg > 8192)
			return usage();
		return do_send((uint16_t)port, secs, (unsigned)seg);
	}
	return usage();
}
