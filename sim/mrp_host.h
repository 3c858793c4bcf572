/*
 * The MetaRoCE transport of metaroce-sim: the engine of proto/ on every
 * simulated host. See mrp_host.c.
 */
#ifndef SIM_MRP_HOST_H
#define SIM_MRP_HOST_H

#include "sim.h"

extern const sim_transport_ops sim_mrp_ops;

/* Connections the host loop of host state hs (sim_host.ts) has taken up so
 * far: served from the ready FIFO, due in the timer heap, checked after an
 * event, or told of a plane or steering event. For tests: it grows with the
 * connections that have work, not with all the host has. */
uint64_t sim_mrp_host_visits(const void *hs);

/* The first-round-trip credit (bytes, SPEC 6.6) flow f's sender started
 * on; 0 if none, or if its connection was not made (yet). For tests. */
uint64_t sim_mrp_flow_credit(const sim_flow *f);

#endif
