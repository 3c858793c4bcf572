#include "svcpolicy.h"

#include "mrd.h"
#include "prefix.h"

static int in_list(const char *text, const mrd_sockaddr *src)
{
	mrd_prefix px[MRD_PREFIX_MAX];
	char err[160];
	if (!text[0])
		return 1; /* no list: any peer */
	int n = mrd_prefix_parse(text, px, MRD_PREFIX_MAX, err, sizeof(err));
	return n > 0 && mrd_prefix_match(px, (unsigned)n, src);
}

int mrd_svc_allowed(const mrd *d, uint32_t service_id, const mrd_sockaddr *src)
{
	if (service_id == MRD_SVC_PERF) {
		if (!d->cfg.services_perf)
			return MRD_SVC_OFF;
		return in_list(d->cfg.perf_peers, src) ? MRD_SVC_OK : MRD_SVC_REFUSED;
	}
	if (service_id == MRD_SVC_ECHO)
		return in_list(d->cfg.echo_peers, src) ? MRD_SVC_OK : MRD_SVC_REFUSED;
	return MRD_SVC_OK;
}
