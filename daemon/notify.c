#include "notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static void on_watchdog(uv_timer_t *t)
{
	mrd_notify_send(t->data, "WATCHDOG=1");
}

int mrd_notify_init(mrd_notify *n, uv_loop_t *loop)
{
	memset(n, 0, sizeof(*n));
	n->fd = -1;
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !*path)
		return 0;
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(n->addr.sun_path)) {
		mrd_warn("NOTIFY_SOCKET=%s: not an absolute or abstract socket path", path);
		return -EINVAL;
	}
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, path, len);
	if (path[0] == '@')
		n->addr.sun_path[0] = '\0'; /* abstract namespace */
	n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n->fd < 0) {
		int e = -errno;
		mrd_warn("NOTIFY_SOCKET: socket: %s", strerror(errno));
		return e;
	}
	const char *us = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	if (us && (!pid || strtol(pid, NULL, 10) == (long)getpid())) {
		char *end;
		unsigned long long v = strtoull(us, &end, 10);
		if (*end == '\0' && v > 0) {
			n->watchdog_usec = v;
			uint64_t ms = v / 2000; /* half the interval */
			if (ms == 0)
				ms = 1;
			uv_timer_init(loop, &n->watchdog);
			n->watchdog.data = n;
			n->has_timer = 1;
			uv_timer_start(&n->watchdog, on_watchdog, ms, ms);
			mrd_info("systemd watchdog: ping every %llu ms",
				 (unsigned long long)ms);
		}
	}
	return 0;
}

int mrd_notify_send(mrd_notify *n, const char *state)
{
	if (n->fd < 0)
		return 0;
	if (sendto(n->fd, state, strlen(state), MSG_NOSIGNAL,
		   (struct sockaddr *)&n->addr, n->addrlen) < 0) {
		int e = -errno;
		mrd_debug("sd_notify %s: %s", state, strerror(errno));
		return e;
	}
	return 0;
}

int mrd_notify_reloading(mrd_notify *n)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char msg[96];
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ull +
			 (unsigned long long)ts.tv_nsec / 1000);
	return mrd_notify_send(n, msg);
}

void mrd_notify_close(mrd_notify *n)
{
	if (n->fd >= 0) {
		close(n->fd);
		n->fd = -1;
	}
	if (n->has_timer) {
		n->has_timer = 0;
		uv_timer_stop(&n->watchdog);
		uv_close((uv_handle_t *)&n->watchdog, NULL);
	}
}
