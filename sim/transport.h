/*
 * The table of transports metaroce-sim can run on its hosts, by name.
 */
#ifndef SIM_TRANSPORT_H
#define SIM_TRANSPORT_H

#include <stddef.h>

#include "sim.h"

typedef struct sim_transport_entry {
	const char *name;
	const sim_transport_ops *ops; /* NULL: known, but not built yet */
	const char *about;            /* one line for --help */
} sim_transport_entry;

/* The ops of a built transport, or NULL (unknown, or known but not built). */
const sim_transport_ops *sim_transport_find(const char *name);

/* 1 if the name is in the table, built or not (a scenario may carry a
 * transport.<name> section for it). */
int sim_transport_known(const char *name);

size_t sim_transport_count(void);
const sim_transport_entry *sim_transport_at(size_t i);

#endif
