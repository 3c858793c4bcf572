/*
 * metarocd: the daemon's context, what every module of it shares.
 *
 * One struct mrd per process holds the libuv loop, the configuration, the
 * daemon-wide counters, the event bus and the modules of the layers up to
 * the control socket (docs/ARCHITECTURE.md, "Layers of the daemon"): this
 * header belongs to that layer (plumbing) and includes nothing above it.
 * The modules of the higher layers (datapath, connections, applications,
 * the file-descriptor guard) are reached through pointers to types this
 * header leaves incomplete: main.c owns their state, and a module that uses
 * one includes its header, which the layer check sees.
 */
#ifndef MRD_H
#define MRD_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "ctl.h"
#include "error.h"
#include "event.h"
#include "notify.h"
#include "ratehint.h"
#include "store.h"
#include "timer.h"

typedef struct mrd_dp mrd_dp;             /* datapath.h */
typedef struct mrd_peers mrd_peers;       /* peer.h */
typedef struct mrd_apps mrd_apps;         /* app.h */
typedef struct mrd_fdguard mrd_fdguard;   /* fdguard.h */
typedef struct mrd_ops mrd_ops;           /* ops.h */
typedef struct mrd_planes mrd_planes;     /* planes.h */
typedef struct mrd_drills mrd_drills;     /* drill.h */
typedef struct mrd_telemetry mrd_telemetry; /* telemetry.h */

/* Drop counters are indexed by -MRP_ERR_*: one slot per code of the
 * engine's error table (proto/error.h) and slot 0, unused. */
enum {
#define MRD_ERR_ONE(name, val, msg) +1
	MRD_NERR = 1 MRP_ERRNO_MAP(MRD_ERR_ONE)
#undef MRD_ERR_ONE
};

/* Reserved service ids of the daemon's own services (peer.c dispatches
 * CONNECTs for them to perf.c). Application services use other ids. */
#define MRD_SVC_PERF 0x50455246u /* "PERF" */
#define MRD_SVC_ECHO 0x4543484fu /* "ECHO" */

typedef struct mrd_counters {
	uint64_t drops[MRD_NERR]; /* datagrams dropped, by mrp_err_name(-i) */
	uint64_t rx_pkts, rx_bytes;
	uint64_t connects_rx, accepts_tx, rejects_tx, naks_unknown_tx;
	uint64_t admit_credits; /* ACCEPTs that carried an admission credit (SPEC 6.6) */
	uint64_t answers_limited; /* answers dropped by the rate limit (SPEC 14.3) */
	uint64_t conns_opened, conns_failed, conns_closed, peer_restarts;
	uint64_t conns_silent; /* ended: nothing with our token heard (peer.c) */
	uint64_t conns_per_addr_full; /* CONNECTs over max_conns_per_address */
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

	/* Owned by main.c (the layers above this header). */
	mrd_dp *dp;
	mrd_peers *peers;
	mrd_apps *apps;
	mrd_fdguard *fdg;
	mrd_ops *ops;
	mrd_planes *planes;
	mrd_drills *drills;
	mrd_telemetry *telemetry;

	mrd_timer timer;
	mrd_notify notify;
	mrd_ctl ctl;

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


/* Count a dropped datagram under an engine error name. */
static inline void mrd_count_drop(mrd *d, int err)
{
	if (err < 0 && -err < MRD_NERR)
		d->cnt.drops[-err]++;
}


#endif
