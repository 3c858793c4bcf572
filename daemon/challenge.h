/*
 * The restart challenge (SPEC 9.6, 14.2): before a connection is ended
 * because its peer seems to have restarted, the peer is asked, with a
 * packet that carries the connection's token, whether it still knows it.
 *
 * A CONNECT or ACCEPT with a new instance id from a known peer is a claim
 * that the peer restarted. A CONNECT is not authenticated (anybody can send
 * one in the peer's name), so the claim alone ends nothing: each connection
 * of the old instance is challenged (PROBEs with ACK_REQ, through the
 * engine, which carry the peer's token), and only a connection whose peer
 * answers none of them within MRD_CHAL_TIMEOUT_NS is ended. Any packet that
 * carries our token and the peer's connection id answers the challenge:
 * only the live old instance knows them. In the spirit of RFC 5961's
 * challenge ACK.
 *
 * This is pure policy over times in ns; peer.c owns the connections, sends
 * the probes and ends what expires.
 */
#ifndef MRD_CHALLENGE_H
#define MRD_CHALLENGE_H

#include <stdint.h>

/* The peer has this long to answer (probes at 0, 50, 150, 350, 750 ms and
 * 1.55 s): a live peer on a loaded host answers within it by far; a
 * restarted one never does. */
#define MRD_CHAL_TIMEOUT_NS 2500000000ull
#define MRD_CHAL_FIRST_NS 50000000ull
/* Between two challenges of one peer's connections, at least this long: a
 * stream of spoofed CONNECTs makes at most one round per interval. */
#define MRD_CHAL_GAP_NS 1000000000ull

typedef struct mrd_challenge {
	uint64_t start_ns; /* 0: no challenge running */
	uint64_t next_ns;  /* next probe */
	uint32_t probes;   /* probes sent in this round */
} mrd_challenge;

enum {
	MRD_CHAL_IDLE,    /* nothing to do now */
	MRD_CHAL_PROBE,   /* send a probe now */
	MRD_CHAL_EXPIRED, /* unanswered: the peer lost the connection */
};

/* Start a round (no-op while one runs). Returns 1 if it started. */
int mrd_chal_start(mrd_challenge *ch, uint64_t now_ns);

/* An authenticated packet of the peer arrived. Returns 1 if a round was
 * running (it ends, answered). */
int mrd_chal_answered(mrd_challenge *ch);

/* What is due at now_ns; MRD_CHAL_PROBE schedules the next probe. */
int mrd_chal_step(mrd_challenge *ch, uint64_t now_ns);

/* When mrd_chal_step() has something to do next; UINT64_MAX if never. */
uint64_t mrd_chal_deadline(const mrd_challenge *ch);

static inline int mrd_chal_running(const mrd_challenge *ch)
{
	return ch->start_ns != 0;
}

#endif
