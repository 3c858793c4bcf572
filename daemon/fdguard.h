/*
 * File descriptors: the daemon's budget of them and what keeps it.
 *
 * At start the soft RLIMIT_NOFILE is raised to the hard limit (the unit
 * sets LimitNOFILE=). Every second the guard reads the limit again (an
 * operator may change it with prlimit), counts the descriptors open, sizes
 * the datapath's source-port socket pool to fit under the limit with a
 * reserve for the control socket, applications and the store, and closes
 * source-port sockets idle for MRD_FD_SPORT_IDLE_S seconds (1 s when near
 * the limit), and those no path holds any more (their connections ended,
 * their paths moved to other ports) once unused for MRD_FD_SPORT_ORPHAN_S:
 * sockets that an attack made the daemon open go away once the attack
 * stops, and connections that come and go leave none behind for long. At
 * 90 % of the limit it logs (once per 10 s) and counts.
 */
#ifndef MRD_FDGUARD_H
#define MRD_FDGUARD_H

#include <stdint.h>
#include <uv.h>

typedef struct mrd mrd;

#define MRD_FD_SPORT_IDLE_S 30  /* MRD_SPORT_IDLE_S in the environment overrides */
#define MRD_FD_SPORT_ORPHAN_S 1 /* MRD_SPORT_ORPHAN_S in the environment overrides */

typedef struct mrd_fdguard {
	uv_timer_t timer; /* data = the daemon */
	int started;
	uint64_t limit, open;  /* soft limit and descriptors open, last tick */
	uint64_t near_limit;   /* ticks at >= 90 % of the limit */
	uint64_t idle_closed;  /* idle source-port sockets closed (a path held them) */
	uint64_t orphans_closed; /* source-port sockets closed that no path held */
	uint64_t idle_ns, orphan_ns, last_log_ns;
} mrd_fdguard;

/* Soft RLIMIT_NOFILE := hard; logs the outcome. Call once at start. */
void mrd_fd_raise_limit(void);

void mrd_fdguard_start(mrd *d);
void mrd_fdguard_close(mrd *d);

#endif
