/*
 * systemd readiness and watchdog notifications (sd_notify(3) protocol)
 * without libsystemd: one datagram per state change to the AF_UNIX socket
 * named by $NOTIFY_SOCKET ('@' at the start names an abstract socket). With
 * $WATCHDOG_USEC set (and $WATCHDOG_PID unset or ours) a libuv timer sends
 * WATCHDOG=1 at half that interval. Everything is a no-op when systemd did
 * not ask for it.
 */
#ifndef MRD_NOTIFY_H
#define MRD_NOTIFY_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <uv.h>

typedef struct mrd_notify {
	int fd; /* -1 = no $NOTIFY_SOCKET */
	struct sockaddr_un addr;
	socklen_t addrlen;
	uint64_t watchdog_usec; /* 0 = no watchdog */
	uv_timer_t watchdog;    /* initialised only with a watchdog */
	int has_timer;
} mrd_notify;

/* Read the environment and open the socket. Returns 0 or -errno (the
 * daemon runs on without notifications then). */
int mrd_notify_init(mrd_notify *n, uv_loop_t *loop);

/* Send one state string ("READY=1", "STATUS=...") ; 0 or -errno. */
int mrd_notify_send(mrd_notify *n, const char *state);

/* RELOADING=1 with MONOTONIC_USEC as Type=notify-reload wants it. */
int mrd_notify_reloading(mrd_notify *n);

/* Close the socket and the watchdog timer (n must stay valid until the
 * loop has run the close: it lives in struct mrd, freed after uv_run()). */
void mrd_notify_close(mrd_notify *n);

#endif
