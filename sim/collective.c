/*
 * Collectives: how an all-reduce, all-to-all or all-gather over n ranks
 * becomes flows with dependencies (sim.h, "collectives"). Pure functions of
 * the configuration: sim_new() expands the selected collective into flows
 * and the core starts each flow when the flows it depends on are complete.
 *
 * Flow k of a collective is step k / n sent by rank k % n. What a step
 * waits for is what a collective library waits for before sending:
 *   - ring all-reduce (reduce-scatter then all-gather) and ring all-gather:
 *     rank r sends to r+1; its step s send carries what it received at step
 *     s-1 from r-1 (reduced into its own chunk, or forwarded), so it waits
 *     for that receive;
 *   - recursive-doubling all-reduce: at step s rank r exchanges its whole
 *     (partly reduced) buffer with r xor 2^s; it waits for what it received
 *     from its partner of step s-1;
 *   - pairwise all-to-all: at step s rank r sends its chunk for r+s+1 and
 *     receives from r-s-1 (an MPI sendrecv); step s starts when both the
 *     send (complete at its sender) and the receive (arrived) of step s-1
 *     are done.
 * A receive is done when its data has arrived at the receiver
 * (sim_flow_arrived(): the receive completion of a SEND or WRITE_IMM), not
 * when the sender has it acknowledged; a plain WRITE, which its receiver
 * cannot see arrive, counts as arrived when it is complete.
 * With channels C > 1 every step is cut into C flows, one per channel, and
 * channel c waits only for channel c (a collective library's channels, each
 * on its own queue pair and NIC).
 */
#include <stddef.h>

#include "sim.h"

const char *sim_coll_name(unsigned type)
{
	static const char *const names[SIM_COLL_N] = {"allreduce_ring", "allreduce_rd", "alltoall",
						      "allgather"};

	return type < SIM_COLL_N ? names[type] : "unknown";
}

uint32_t sim_coll_nranks(const sim_config *cfg, const sim_coll_config *cc)
{
	return cc->nranks ? cc->nranks : cfg->hosts;
}

uint32_t sim_coll_host(const sim_coll_config *cc, uint32_t r)
{
	return cc->ranks ? cc->ranks[r] : r;
}

int sim_coll_selected(const sim_config *cfg, size_t i)
{
	return i < cfg->ncolls && (cfg->coll_entry < 0 || (size_t)cfg->coll_entry == i);
}

uint64_t sim_coll_size(const sim_config *cfg, size_t i)
{
	const sim_coll_config *cc = &cfg->colls[i];
	size_t k = cfg->coll_size < cc->nsizes ? cfg->coll_size : cc->nsizes - 1;

	return cc->sizes[k];
}

static uint32_t log2u(uint32_t n)
{
	uint32_t k = 0;

	while ((1u << (k + 1)) <= n && k < 31)
		k++;
	return k;
}

uint32_t sim_coll_steps(unsigned type, uint32_t n)
{
	switch (type) {
	case SIM_COLL_ALLREDUCE_RING:
		return 2 * (n - 1);
	case SIM_COLL_ALLREDUCE_RD:
		return log2u(n);
	default:
		return n - 1;
	}
}

uint64_t sim_coll_chunk(unsigned type, uint32_t n, uint32_t channels, uint64_t size)
{
	uint64_t d = (type == SIM_COLL_ALLREDUCE_RD ? 1 : (uint64_t)n) * (channels ? channels : 1);
	uint64_t c = size / d + (size % d != 0);

	return c ? c : 1;
}

unsigned sim_coll_flow(unsigned type, uint32_t n, uint32_t channels, uint32_t k, uint32_t *pstep,
		       uint32_t *channel, uint32_t *src_rank, uint32_t *dst_rank, uint32_t deps[2])
{
	uint32_t C = channels ? channels : 1;
	uint32_t ch = k % C, step = k / C / n, r = k / C % n;
	unsigned nd = 0;

	*pstep = step;
	*channel = ch;

	switch (type) {
	case SIM_COLL_ALLREDUCE_RD:
		*src_rank = r;
		*dst_rank = r ^ (1u << step);
		if (step > 0)
			deps[nd++] = (step - 1) * n + (r ^ (1u << (step - 1)));
		break;
	case SIM_COLL_ALLTOALL:
		*src_rank = r;
		*dst_rank = (r + step + 1) % n;
		if (step > 0) {
			deps[nd++] = (step - 1) * n + r;                   /* own send */
			deps[nd++] = (step - 1) * n + (r + n - step) % n; /* the receive */
		}
		break;
	default: /* the rings */
		*src_rank = r;
		*dst_rank = (r + 1) % n;
		if (step > 0)
			deps[nd++] = (step - 1) * n + (r + n - 1) % n;
		break;
	}
	for (unsigned i = 0; i < nd; i++) /* a channel waits only for itself */
		deps[i] = deps[i] * C + ch;
	return nd;
}

unsigned sim_coll_dep_kind(unsigned type, unsigned i)
{
	return type == SIM_COLL_ALLTOALL && i == 0 ? SIM_DEP_SENT : SIM_DEP_RECEIVED;
}

double sim_coll_busbw_factor(unsigned type, uint32_t n)
{
	switch (type) {
	case SIM_COLL_ALLREDUCE_RING:
	case SIM_COLL_ALLREDUCE_RD:
		return 2.0 * (n - 1) / n;
	default:
		return (double)(n - 1) / n;
	}
}
