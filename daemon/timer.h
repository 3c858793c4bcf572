/*
 * Engine deadlines at engine precision.
 *
 * libuv timers count milliseconds; the engine's timers (delayed ACK 8 us,
 * RTO 100 us, pacing) need nanoseconds. One timerfd (CLOCK_MONOTONIC, the
 * clock uv_hrtime() reads, so engine time and the timerfd agree) is armed
 * with an absolute time: the earliest deadline of all entries, kept in a
 * binary min-heap (O(log n) per change, O(1) to find the earliest). The
 * timerfd is watched with a uv_poll handle; when it fires, the owner pops
 * the due entries with mrd_timer_pop_due() and re-arms with
 * mrd_timer_rearm() once it has updated their deadlines.
 *
 * A deadline that has already passed when the timer is re-armed (a
 * connection with more to send than one turn's budget, a pacing time
 * reached while it ran, a control packet waiting) does not go to the
 * timerfd: an idle handle runs the callback after the loop has polled its
 * sockets once, without blocking. Arming a timerfd in the past costs a
 * system call, a timer interrupt (on a VM, exits to the hypervisor for the
 * timer device) and an epoll wake-up; profiles of a bulk transfer put a
 * fifth of the sender's CPU there (bench/README.md).
 *
 * Entries (mrd_timer_ent) are embedded in the objects they time (a
 * connection): no allocation per deadline.
 */
#ifndef MRD_TIMER_H
#define MRD_TIMER_H

#include <stdint.h>
#include <uv.h>

#define MRD_NEVER UINT64_MAX

typedef struct mrd_timer_ent {
	uint64_t deadline; /* ns, uv_hrtime() clock; MRD_NEVER = not queued */
	uint32_t idx;      /* position in the heap; UINT32_MAX = not queued */
} mrd_timer_ent;

typedef struct mrd_timer mrd_timer;
typedef void (*mrd_timer_cb)(mrd_timer *t);

struct mrd_timer {
	uv_poll_t poll; /* watches fd; data = the owner's pointer */
	uv_idle_t soon; /* active while the earliest deadline is due; data = this */
	uint8_t soon_init, soon_on;
	int fd;
	mrd_timer_ent **heap;
	uint32_t len, cap;
	uint64_t armed; /* absolute time the timerfd is set to; MRD_NEVER = disarmed */
	mrd_timer_cb cb;
	void *data;     /* the owner's */
};

static inline void mrd_timer_ent_init(mrd_timer_ent *e)
{
	e->deadline = MRD_NEVER;
	e->idx = UINT32_MAX;
}

/* Returns 0 or -errno. cb runs when the earliest deadline has passed. */
int mrd_timer_init(mrd_timer *t, uv_loop_t *loop, mrd_timer_cb cb, void *data);

/* (Re)schedule e at deadline; MRD_NEVER removes it. Does not re-arm the
 * timerfd: call mrd_timer_rearm() after a batch of changes. Returns 0 or
 * -ENOMEM. */
int mrd_timer_set(mrd_timer *t, mrd_timer_ent *e, uint64_t deadline);

/* Remove and return an entry whose deadline is <= now, or NULL. */
mrd_timer_ent *mrd_timer_pop_due(mrd_timer *t, uint64_t now);

/* Earliest deadline queued, MRD_NEVER if none. */
static inline uint64_t mrd_timer_next(const mrd_timer *t)
{
	return t->len ? t->heap[0]->deadline : MRD_NEVER;
}

/* Arm the timerfd to the earliest deadline, or, when that deadline has
 * passed, have cb run on the next turn of the loop (after one poll that
 * does not block). No system call when the timerfd is already armed at or
 * before that deadline and has not expired: cb may then run early, find
 * nothing due, and re-arm. cb never runs late. */
void mrd_timer_rearm(mrd_timer *t);

/* Close the poll handle; close_cb gets it. The heap is freed here: entries
 * must not be used with t afterwards. */
void mrd_timer_close(mrd_timer *t, uv_close_cb close_cb);

#endif
