/*
 * metarocd: the daemon object and what every module of it shares.
 *
 * One struct mrd per process owns the libuv loop's handles (through the
 * module structs embedded in it), the configuration and the daemon-wide
 * counters. Modules:
 *   datapath.c  UDP sockets of the planes, batched I/O (GSO/GRO), ECN
 *   peer.c      handshake, peers, connections, dispatch of datagrams
 *   timer.c     engine deadlines (timerfd, ns)
 *   perf.c      built-in services: perf (bulk transfer, verified) and echo
 *   ctl.c       control socket (newline-delimited JSON, docs/control-protocol.md)
 *   app.c       application sessions of libmetaroce (libclient/abi.h)
 *   notify.c    sd_notify and the watchdog
 *   main.c      options, signals, reload, startup and shutdown
 */
#ifndef MRD_H
#define MRD_H

#include <stdint.h>
#include <uv.h>

#include "app.h"
#include "config.h"
#include "ctl.h"
#include "datapath.h"
#include "event.h"
#include "fdguard.h"
#include "notify.h"
#include "peer.h"
#include "ratehint.h"
#include "store.h"
#include "timer.h"

/* Reserved service ids of the daemon's own services (peer.c dispatches
 * CONNECTs for them to perf.c). Application services use other ids. */
#define MRD_SVC_PERF 0x50455246u /* "PERF" */
#define MRD_SVC_ECHO 0x4543484fu /* "ECHO" */

typedef struct mrd_counters {
	uint64_t drops[MRD_NERR]; /* datagrams dropped, by mrp_err_name(-i) */
	uint64_t rx_pkts, rx_bytes;
	uint64_t connects_rx, accepts_tx, rejects_tx, naks_unknown_tx;
	uint64_t answers_limited; /* answers dropped by the rate limit (SPEC 14.3) */
	uint64_t conns_opened, conns_failed, conns_closed, peer_restarts;
	uint64_t challenges, challenges_answered; /* restart challenges (SPEC 9.6) */
	uint64_t half_open_discarded; /* by NAK UNKNOWN_CONN (SPEC 9.4) */
	/* address validation (SPEC 9.7) */
	uint64_t retries_tx, retries_rx, connects_validated, cookies_bad;
	uint64_t retries_limited, accepts_limited, half_open_full;
	uint64_t sport_bind_fails;
} mrd_counters;

struct mrd {
	uv_loop_t *loop;
	const char *config_path;
	mrd_config cfg;
	uint64_t instance_id; /* SPEC 3.1: new at every start */
	uint64_t start_ns;
	int stopping;
	mrd_counters cnt;
	mrd_bus bus; /* events: subscribers added by main.c (event.h) */

	mrd_dp dp;
	mrd_peers peers;
	mrd_timer timer;
	mrd_notify notify;
	mrd_ctl ctl;
	mrd_apps apps;
	mrd_fdguard fdg;

	/* State store (store.h): NULL when the database cannot be opened (the
	 * daemon runs on without history). Records are queued on the loop and
	 * written by mrd_store_flush() on a libuv worker, once a second. */
	mrd_store *store;
	uv_timer_t store_timer;
	uv_work_t store_work;
	int store_busy;

	uv_signal_t sig_term, sig_int, sig_hup;
	uv_timer_t stop_timer;
	uint64_t stop_deadline_ms; /* uv_now() when the graceful stop gives up */

	/* Receiver rate hints (proto/ratehint.h): one allocator for every
	 * inbound connection, its capacity the link speeds of the planes
	 * that are up (mrd_rh_update()); every connection's engine gets it.
	 * NULL before the planes are known. */
	mrp_rh *rh;
};

/* Set the rate-hint allocator's capacity from the planes (at start, and
 * on every plane up or down): the sum of the link speeds of the planes
 * that are up, MRD_RH_UNKNOWN_BPS for one whose speed is unknown. */
void mrd_rh_update(mrd *d);

/* Count a dropped datagram under an engine error name. */
static inline void mrd_count_drop(mrd *d, int err)
{
	if (err < 0 && -err < MRD_NERR)
		d->cnt.drops[-err]++;
}

/* Begin the graceful stop (SIGTERM, or the control socket). */
void mrd_stop(mrd *d);

#endif
