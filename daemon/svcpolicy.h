/*
 * Who the daemon's own services answer (configuration section services):
 * PERF hands any peer an rkey to a region of the daemon, so it is off
 * unless services.perf turns it on; PERF and ECHO answer only the peers in
 * services.perf_peers / echo_peers when those are set. Application
 * services are the applications' business.
 */
#ifndef MRD_SVCPOLICY_H
#define MRD_SVCPOLICY_H

#include <stdint.h>

#include "addr.h"

typedef struct mrd mrd;

enum {
	MRD_SVC_OK,
	MRD_SVC_OFF,     /* the service is off: REJECT NO_SERVICE */
	MRD_SVC_REFUSED, /* not for this peer: REJECT REFUSED */
};

int mrd_svc_allowed(const mrd *d, uint32_t service_id, const mrd_sockaddr *src);

#endif
