#include "challenge.h"

int mrd_chal_start(mrd_challenge *ch, uint64_t now)
{
	if (ch->start_ns)
		return 0;
	ch->start_ns = now ? now : 1;
	ch->next_ns = now;
	ch->probes = 0;
	return 1;
}

int mrd_chal_answered(mrd_challenge *ch)
{
	int was = ch->start_ns != 0;
	ch->start_ns = 0;
	ch->next_ns = 0;
	ch->probes = 0;
	return was;
}

int mrd_chal_step(mrd_challenge *ch, uint64_t now)
{
	if (!ch->start_ns)
		return MRD_CHAL_IDLE;
	if (now - ch->start_ns >= MRD_CHAL_TIMEOUT_NS) {
		ch->start_ns = 0;
		return MRD_CHAL_EXPIRED;
	}
	if (now < ch->next_ns)
		return MRD_CHAL_IDLE;
	/* 0, 50, 150, 350, 750 ms, 1.55 s after the start: doubling gaps. */
	ch->next_ns = ch->start_ns + (MRD_CHAL_FIRST_NS << (ch->probes + 1)) - MRD_CHAL_FIRST_NS;
	ch->probes++;
	return MRD_CHAL_PROBE;
}

uint64_t mrd_chal_deadline(const mrd_challenge *ch)
{
	if (!ch->start_ns)
		return UINT64_MAX;
	uint64_t end = ch->start_ns + MRD_CHAL_TIMEOUT_NS;
	return ch->next_ns < end ? ch->next_ns : end;
}
