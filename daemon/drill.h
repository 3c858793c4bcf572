/*
 * Failover drills: `drill plane PLANE` takes one plane out on purpose and
 * measures how the transport copes (docs/control-protocol.md, "drill
 * plane", defines every number of the report).
 *
 *   1. The drill is written to the store (a row with no end, and how the
 *      plane is taken out) and flushed before anything happens, so a
 *      daemon that dies during the drill restores the plane at its next
 *      start (mrd_drill_init).
 *   2. Optionally a perf run to --peer drives verified traffic; without a
 *      peer the drill measures whatever traffic there is.
 *   3. After a baseline second the plane is taken out: administratively
 *      (the engines' DRAIN, reported as a drill, not as an operator's
 *      drain) or, with link, by setting the interface down through
 *      rtnetlink (IFF_UP cleared; root and CAP_NET_ADMIN).
 *   4. It is given back after the duration, or the auto-revert time, or at
 *      once when the requesting control client goes away (Ctrl-C of the
 *      CLI) or the daemon stops.
 *   5. The report (detection time, redistribution time, throughput
 *      before / during / after, retransmissions, lost or duplicated
 *      completions from the perf verifier) is returned and stored.
 *
 * One drill at a time. A drill of the last usable plane is refused.
 */
#ifndef MRD_DRILL_H
#define MRD_DRILL_H

#include <jansson.h>
#include <stdint.h>

#include "event.h"

typedef struct mrd mrd;
typedef struct mrd_ctl_client mrd_ctl_client;

/* Restore what a drill interrupted by a crash left out (blocking: at
 * start, after mrd_ops_init). */
void mrd_drill_init(mrd *d);

/* Add "drill plane" (long-running: it holds its client's operation slot)
 * and "drill cancel" to the control socket's table. */
int mrd_drill_register(mrd *d);

/* Subscriber of the event bus (main.c): a path on the plane of the drill
 * became suspect, failed or disabled, or the plane went down. */
void mrd_drill_on_event(void *ud, const mrd_ev *ev);

/* The drills' state: owned by main.c, reached as d->drills. */
typedef struct mrd_drills {
	struct drill *cur; /* the one running (one at a time), NULL */
	uint64_t count;    /* drills run since the daemon started */
} mrd_drills;

/* Drills run since the daemon started. */
uint64_t mrd_drill_count(const mrd *d);

#endif
