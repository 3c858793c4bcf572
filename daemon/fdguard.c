#include "fdguard.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "datapath.h"
#include "log.h"
#include "mrd.h"

void mrd_fd_raise_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		mrd_warn("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return;
	}
	rlim_t was = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			mrd_warn("cannot raise the open-file limit from %llu to %llu: %s",
				 (unsigned long long)was, (unsigned long long)rl.rlim_max,
				 strerror(errno));
			return;
		}
	}
	mrd_info("open-file limit %llu (was %llu)", (unsigned long long)rl.rlim_cur,
		 (unsigned long long)was);
}

/* UINT64_MAX when the directory cannot be opened for want of a descriptor:
 * the limit is reached. */
static uint64_t count_open(void)
{
	DIR *dir = opendir("/proc/self/fd");
	if (!dir)
		return errno == EMFILE || errno == ENFILE ? UINT64_MAX : 0;
	uint64_t n = 0;
	struct dirent *e;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n ? n - 1 : 0; /* the directory's own descriptor */
}

static void on_tick(uv_timer_t *t)
{
	mrd *d = t->data;
	mrd_fdguard *g = d->fdg;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		g->limit = rl.rlim_cur == RLIM_INFINITY ? UINT32_MAX : (uint64_t)rl.rlim_cur;
	uint64_t now = uv_hrtime();
	g->open = count_open();
	if (g->open == UINT64_MAX)
		g->open = g->limit; /* at the limit: "near" below, idle sockets go */
	/* Keep a quarter of the limit (at least 128) for everything but the
	 * source-port sockets; the pool of each plane gets a share of the rest. */
	uint64_t reserve = g->limit / 4 > 128 ? g->limit / 4 : 128;
	uint64_t room = g->limit > reserve ? g->limit - reserve : 0;
	uint64_t cap = d->dp->nplanes ? room / d->dp->nplanes : room;
	mrd_dp_set_pool_cap(d->dp, (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap));
	int near = g->limit && g->open * 10 >= g->limit * 9;
	if (near) {
		g->near_limit++;
		if (!g->last_log_ns || now - g->last_log_ns >= 10000000000ull) {
			g->last_log_ns = now;
			mrd_warn("%llu of %llu file descriptors open: closing idle source-port "
				 "sockets", (unsigned long long)g->open, (unsigned long long)g->limit);
		}
	}
	uint64_t idle = near ? 1000000000ull : g->idle_ns;
	unsigned orphans = 0;
	unsigned n = mrd_dp_pool_sweep(d->dp, now, idle, g->orphan_ns, &orphans);
	g->idle_closed += n - orphans;
	g->orphans_closed += orphans;
}

/* Seconds from the environment variable name, lo..hi, else def. */
static long env_seconds(const char *name, long def, long lo, long hi)
{
	const char *e = getenv(name);
	char *end;
	long s = e ? strtol(e, &end, 10) : def;
	if (!e || end == e || *end || s < lo || s > hi)
		s = def;
	return s;
}

void mrd_fdguard_start(mrd *d)
{
	mrd_fdguard *g = d->fdg;
	memset(g, 0, sizeof(*g));
	g->idle_ns = (uint64_t)env_seconds("MRD_SPORT_IDLE_S", MRD_FD_SPORT_IDLE_S, 1, 86400) *
		     1000000000ull;
	g->orphan_ns = (uint64_t)env_seconds("MRD_SPORT_ORPHAN_S", MRD_FD_SPORT_ORPHAN_S, 1,
					     86400) * 1000000000ull;
	uv_timer_init(d->loop, &g->timer);
	g->timer.data = d;
	uv_timer_start(&g->timer, on_tick, 0, 1000);
	g->started = 1;
}

void mrd_fdguard_close(mrd *d)
{
	if (!d->fdg->started)
		return;
	d->fdg->started = 0;
	uv_timer_stop(&d->fdg->timer);
	uv_close((uv_handle_t *)&d->fdg->timer, NULL);
}
