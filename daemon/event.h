/*
 * The event bus: one entry point for everything that happens in the daemon
 * (a plane down or up, drained, a path changing state, a connection up or
 * down, a drill, the daemon starting and stopping), and the subscribers that
 * main.c registers at start: the store's event log, the control socket's
 * `monitor` stream, the log and the drills. A module that has something to
 * say emits it here and knows nothing of who listens.
 *
 * Subscribers run in the order they were added, synchronously, on the loop;
 * the event and its strings are valid only during the call.
 */
#ifndef MRD_EVENT_H
#define MRD_EVENT_H

#include <stdint.h>

#include "conn.h"
#include "store.h"

#define MRD_BUS_MAX 8 /* subscribers */

typedef struct mrd_ev {
	int64_t ts_ns;          /* wall clock (mrd_wall_ns) */
	int kind;               /* mrd_store_event_kind, or -1: not for the log */
	const char *name;       /* the kind's name, "path.state" when kind < 0 */
	int plane;              /* our plane's index, -1 when none or unknown */
	const char *plane_name; /* NULL when none */
	uint32_t conn;          /* our connection id, 0 when none */
	int path;               /* the engine's path id, -1 when none */
	const char *detail;     /* NULL when none */
	int stored;             /* already in the store's log (drain, written with
				 * the flag): the log subscriber leaves it */
	/* A path's change of state (path != -1 and from != NULL): */
	const char *from, *to;
	int new_state;          /* mrp_path_state */
	unsigned gen, sport;
} mrd_ev;

typedef void (*mrd_ev_fn)(void *ud, const mrd_ev *ev);

typedef struct mrd_bus {
	struct {
		mrd_ev_fn fn;
		void *ud;
	} sub[MRD_BUS_MAX];
	unsigned n;
	uint64_t emitted;
} mrd_bus;

/* Add a subscriber. Returns 0, or -1 when the bus is full. */
int mrd_bus_subscribe(mrd_bus *b, mrd_ev_fn fn, void *ud);

/* Hand ev to every subscriber (ts_ns and name are filled in when 0/NULL). */
void mrd_bus_emit(mrd_bus *b, mrd_ev *ev);

/* The common case: kind (an mrd_store_event_kind), the plane by index and
 * name (-1 / NULL for none), conn 0 and path -1 for none. */
void mrd_emit(mrd_bus *b, mrd_store_event_kind kind, int plane, const char *plane_name,
	      uint32_t conn, int path, const char *detail);

/* A path of connection conn changed state (mrp_conn_poll_event); plane and
 * plane_name are ours, -1 / NULL when the engine's plane is unknown. A
 * failure, a re-port and a path that carries data again after one are for
 * the log; the rest only for the monitors. */
void mrd_emit_path(mrd_bus *b, int plane, const char *plane_name, uint32_t conn,
		   const mrp_event *ev);

/* Wall-clock unix time in ns (for the store and event timestamps). */
int64_t mrd_wall_ns(void);

#endif
