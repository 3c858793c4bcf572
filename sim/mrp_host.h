/*
 * The MetaRoCE transport of metaroce-sim: the engine of proto/ on every
 * simulated host. See mrp_host.c.
 */
#ifndef SIM_MRP_HOST_H
#define SIM_MRP_HOST_H

#include "sim.h"

extern const sim_transport_ops sim_mrp_ops;

#endif
