/*
 * The simulator's event queue: a binary min-heap of events stored by value.
 *
 * Order is total and deterministic: by time, then by insertion sequence, so
 * two events scheduled for the same nanosecond run in the order they were
 * scheduled. Entries live in one growing array (no allocation per event);
 * the array only grows (doubling), never shrinks while the queue lives.
 */
#ifndef SIM_EVQ_H
#define SIM_EVQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_ev {
	uint64_t t;   /* when, ns */
	uint64_t seq; /* insertion sequence: the tie-break */
	void *obj;    /* what the event is about (link, packet, host, ...) */
	uint32_t kind;
	uint32_t arg;
} sim_ev;

typedef struct sim_evq {
	sim_ev *v;
	size_t n, cap;
	uint64_t seq; /* next insertion sequence */
} sim_evq;

/* Empty queue with room for cap events (0 for a small default).
 * Returns 0 or MRP_ERR_NOMEM. */
int sim_evq_init(sim_evq *q, size_t cap);

/* Releases the array; the queue must be initialised again before reuse. */
void sim_evq_free(sim_evq *q);

/* Adds an event. Returns 0 or MRP_ERR_NOMEM (the queue is unchanged). */
int sim_evq_push(sim_evq *q, uint64_t t, uint32_t kind, uint32_t arg, void *obj);

/* Removes the earliest event into *out. Returns 1, or 0 when empty. */
int sim_evq_pop(sim_evq *q, sim_ev *out);

static inline size_t sim_evq_len(const sim_evq *q)
{
	return q->n;
}

/* Time of the earliest event; UINT64_MAX when empty. */
static inline uint64_t sim_evq_peek_time(const sim_evq *q)
{
	return q->n ? q->v[0].t : UINT64_MAX;
}

#endif
