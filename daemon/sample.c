/* The telemetry sampler's arithmetic (sample.h). */
#include "sample.h"

static uint64_t delta(uint64_t now, uint64_t then)
{
	/* A counter that went back (a slot reused) starts over. */
	return now >= then ? now - then : now;
}

void mrd_tel_derive(const mrd_tel_counters *prev, const mrd_tel_counters *cur, double dt_s,
		    uint64_t link_bps, mrd_tel_derived *out)
{
	uint64_t tx = delta(cur->tx_bytes, prev->tx_bytes);
	uint64_t ack = delta(cur->acked_pkts, prev->acked_pkts);
	uint64_t ce = delta(cur->ce_pkts, prev->ce_pkts);
	out->lost_pkts = delta(cur->lost_pkts, prev->lost_pkts);
	out->retx_pkts = delta(cur->retx_pkts, prev->retx_pkts);
	out->tx_bytes_per_s = dt_s > 0 ? (double)tx / dt_s : 0;
	out->utilization = link_bps ? out->tx_bytes_per_s * 8 / (double)link_bps : 0;
	/* A CE mark is counted when its ACK comes; a mark of a packet acked
	 * in an earlier interval cannot make the share exceed 1. */
	out->ecn_fraction = ack ? (double)ce / (double)ack : 0;
	if (out->ecn_fraction > 1)
		out->ecn_fraction = 1;
}
