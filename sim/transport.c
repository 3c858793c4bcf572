/* The transports of metaroce-sim; see transport.h. */
#include <string.h>

#include "mrp_host.h"
#include "roce.h"
#include "transport.h"

static const sim_transport_entry transports[] = {
	{"roce", &sim_roce_ops, "RoCEv2 baseline: one path, go-back-N, DCQCN-like rate control"},
	{"roce-pfc", &sim_roce_pfc_ops, "RoCEv2 as operators run it: the same on a lossless (PFC) network"},
	/* MetaRoCE: the real engine (proto/) on every host, sim/mrp_host.c. */
	{"metaroce", &sim_mrp_ops, "MetaRoCE engine: multipath, SACK, selective repeat"},
};

const sim_transport_ops *sim_transport_find(const char *name)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (strcmp(transports[i].name, name) == 0)
			return transports[i].ops;
	return NULL;
}

int sim_transport_known(const char *name)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (strcmp(transports[i].name, name) == 0)
			return 1;
	return 0;
}

size_t sim_transport_count(void)
{
	return sizeof(transports) / sizeof(transports[0]);
}

const sim_transport_entry *sim_transport_at(size_t i)
{
	return i < sim_transport_count() ? &transports[i] : NULL;
}
