/*
 * The telemetry sampler's arithmetic (telemetry.c), apart so that it is
 * tested without a daemon.
 */
#ifndef MRD_SAMPLE_H
#define MRD_SAMPLE_H

#include <stdint.h>

/* What one path's counters say over one interval (a pure
 * function, unit-tested in tests/daemon/test_sample.c). */
typedef struct mrd_tel_counters {
	uint64_t tx_bytes, acked_pkts, ce_pkts, lost_pkts, retx_pkts;
} mrd_tel_counters;

typedef struct mrd_tel_derived {
	double tx_bytes_per_s;
	double utilization;  /* tx rate over link_bps; 0 when link_bps is 0 */
	double ecn_fraction; /* CE-marked share of the packets acked, 0..1 */
	uint64_t lost_pkts, retx_pkts;
} mrd_tel_derived;

/* Deltas from prev to cur over dt_s seconds. A counter that went back (a
 * path slot reused) counts from 0. dt_s <= 0 gives rates of 0. */
void mrd_tel_derive(const mrd_tel_counters *prev, const mrd_tel_counters *cur, double dt_s,
		    uint64_t link_bps, mrd_tel_derived *out);

#endif
