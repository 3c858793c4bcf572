/*
 * Operations: what an operator does to a running daemon and sees of it.
 *
 *   drain       an operator's drained planes: applied to every connection
 *               (MRP_PLANE_DRAIN), to each new connection as it is
 *               established, persisted in the store before the reply and
 *               restored at start; draining the last usable plane is
 *               refused unless forced;
 *   path        steer, disable, enable and reset one path of a connection;
 *   history     the store's event log, drill reports and telemetry, read on
 *               a libuv worker (sqlite blocks) and sent back as JSON.
 *
 * Events (a drain, a steered path) go out on the event bus (event.h). The
 * control commands are documented in docs/control-protocol.md. The state
 * is struct mrd_ops, owned by main.c and reached as d->ops.
 */
#ifndef MRD_OPS_H
#define MRD_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "conn.h"
#include "event.h"
#include "store.h"

typedef struct mrd mrd;
typedef struct mrd_conn mrd_conn;
typedef struct mrd_ctl_client mrd_ctl_client;

/* The drained planes, per plane index (MRD_MAX_PLANES of config.h). */
typedef struct mrd_ops {
	uint8_t drained[MRD_MAX_PLANES]; /* the operator's, persisted */
	uint8_t drill[MRD_MAX_PLANES];   /* out for a drill (drill.c) */
	uint8_t applied[MRD_MAX_PLANES]; /* what the engines were told */
	uint8_t pending[MRD_MAX_PLANES]; /* a change being written to the store */
	char by[MRD_MAX_PLANES][48];
	int64_t ts[MRD_MAX_PLANES];
} mrd_ops;

/* Reads the drained planes from the store (blocking: at start only). */
void mrd_ops_init(mrd *d);

/* Whether our plane is drained, by an operator (drain) or a drill. */
bool mrd_ops_plane_drained(const mrd *d, unsigned plane);
bool mrd_ops_plane_operator_drained(const mrd *d, unsigned plane);
const char *mrd_ops_plane_admin(const mrd *d, unsigned plane); /* "in-service", "drained", "drill" */
/* Who drained it and when (unix ns), "" / 0 when unknown. */
const char *mrd_ops_drained_by(const mrd *d, unsigned plane, int64_t *pts);

/* Planes that are up and not drained (by an operator or a drill). */
unsigned mrd_ops_usable_planes(const mrd *d);

/* The drill takes a plane out (on = 1) or gives it back (drill.c). Applies
 * the engine's DRAIN/UNDRAIN unless an operator's drain keeps it out. */
void mrd_ops_drill_hold(mrd *d, unsigned plane, int on);

/* A new connection's engine exists: give it the drained planes. */
void mrd_ops_conn_established(mrd *d, mrd_conn *c, uint64_t now_ns);

/* Look a plane up by name or index ("p1", "1"); -1 if none. */
int mrd_ops_plane_find(const mrd *d, const char *s);

/* Add the control commands of this module ("plane drain", "path steer",
 * "history events", "monitor", ...) to the control socket's table. */
int mrd_ops_register(mrd *d);

#endif
