/* The event bus (event.h). */
#include "event.h"

#include <stdio.h>
#include <time.h>

int64_t mrd_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int mrd_bus_subscribe(mrd_bus *b, mrd_ev_fn fn, void *ud)
{
	if (b->n >= MRD_BUS_MAX)
		return -1;
	b->sub[b->n].fn = fn;
	b->sub[b->n].ud = ud;
	b->n++;
	return 0;
}

void mrd_bus_emit(mrd_bus *b, mrd_ev *ev)
{
	if (!ev->ts_ns)
		ev->ts_ns = mrd_wall_ns();
	if (!ev->name)
		ev->name = ev->kind >= 0 ? mrd_store_event_name((mrd_store_event_kind)ev->kind)
					 : "path.state";
	b->emitted++;
	for (unsigned i = 0; i < b->n; i++)
		b->sub[i].fn(b->sub[i].ud, ev);
}

void mrd_emit(mrd_bus *b, mrd_store_event_kind kind, int plane, const char *plane_name,
	      uint32_t conn, int path, const char *detail)
{
	mrd_ev ev = {
		.kind = (int)kind,
		.plane = plane,
		.plane_name = plane_name,
		.conn = conn,
		.path = path,
		.detail = detail,
	};
	mrd_bus_emit(b, &ev);
}

void mrd_emit_path(mrd_bus *b, int plane, const char *plane_name, uint32_t conn,
		   const mrp_event *e)
{
	char detail[96];
	const char *from = mrp_path_state_name(e->old_state);
	const char *to = mrp_path_state_name(e->new_state);
	if (e->old_state == e->new_state)
		snprintf(detail, sizeof(detail),
			 "moved off a marked route: %s, gen %u, new sport %u", to, e->gen,
			 e->sport);
	else
		snprintf(detail, sizeof(detail), "%s -> %s, gen %u, sport %u", from, to,
			 e->gen, e->sport);
	/* Kept in the log: a failure, a re-port, a move to another route, and
	 * a path that carries data again after one (or after a move or its
	 * plane coming back). The rest
	 * (suspicion that clears, a new path's first probe, drains) only goes
	 * to the monitors: the log is not flooded by every lost packet or
	 * every connection's start. */
	int kind = -1;
	if (e->old_state == e->new_state)
		kind = MRD_STORE_EV_PATH_MOVED; /* a re-path (SPEC 6.4) */
	else if (e->new_state == MRP_PATH_FAILED)
		kind = MRD_STORE_EV_PATH_FAILED;
	else if (e->old_state == MRP_PATH_FAILED && e->new_state == MRP_PATH_PROBING)
		kind = MRD_STORE_EV_PATH_REPORTED;
	else if (e->old_state == MRP_PATH_PROBING && e->new_state == MRP_PATH_ACTIVE &&
		 e->gen > 1)
		kind = MRD_STORE_EV_PATH_RECOVERED; /* after a re-port, a move or a plane up */
	mrd_ev ev = {
		.kind = kind,
		.plane = plane,
		.plane_name = plane_name,
		.conn = conn,
		.path = (int)e->path_id,
		.detail = detail,
		.from = from,
		.to = to,
		.new_state = (int)e->new_state,
		.gen = e->gen,
		.sport = e->sport,
	};
	mrd_bus_emit(b, &ev);
}
