#include "timer.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void on_readable(uv_poll_t *h, int status, int events)
{
	(void)events;
	mrd_timer *t = h->data;
	uint64_t n;
	/* Clear the expiration count; EAGAIN when re-armed meanwhile. */
	if (read(t->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		status = -errno;
	(void)status;
	t->armed = MRD_NEVER;
	t->cb(t);
}

/* The earliest deadline was due at the last re-arm: run the owner once the
 * loop has polled (libuv runs idle handles before a poll with timeout 0). */
static void on_soon(uv_idle_t *h)
{
	mrd_timer *t = h->data;
	uv_idle_stop(h);
	t->soon_on = 0;
	t->cb(t);
}

int mrd_timer_init(mrd_timer *t, uv_loop_t *loop, mrd_timer_cb cb, void *data)
{
	t->heap = NULL;
	t->len = t->cap = 0;
	t->armed = MRD_NEVER;
	t->cb = cb;
	t->data = data;
	t->soon_init = t->soon_on = 0;
	t->fd = -1;
	int rv = uv_idle_init(loop, &t->soon);
	if (rv < 0)
		return rv;
	t->soon.data = t;
	t->soon_init = 1;
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	rv = t->fd < 0 ? -errno : uv_poll_init(loop, &t->poll, t->fd);
	if (rv < 0) {
		if (t->fd >= 0)
			close(t->fd);
		t->fd = -1;
		t->soon_init = 0;
		uv_close((uv_handle_t *)&t->soon, NULL);
		return rv;
	}
	t->poll.data = t;
	return uv_poll_start(&t->poll, UV_READABLE, on_readable);
}

static void swap(mrd_timer *t, uint32_t a, uint32_t b)
{
	mrd_timer_ent *x = t->heap[a];
	t->heap[a] = t->heap[b];
	t->heap[b] = x;
	t->heap[a]->idx = a;
	t->heap[b]->idx = b;
}

static void sift_up(mrd_timer *t, uint32_t i)
{
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (t->heap[p]->deadline <= t->heap[i]->deadline)
			break;
		swap(t, i, p);
		i = p;
	}
}

static void sift_down(mrd_timer *t, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < t->len && t->heap[l]->deadline < t->heap[m]->deadline)
			m = l;
		if (r < t->len && t->heap[r]->deadline < t->heap[m]->deadline)
			m = r;
		if (m == i)
			return;
		swap(t, i, m);
		i = m;
	}
}

static void heap_remove(mrd_timer *t, mrd_timer_ent *e)
{
	uint32_t i = e->idx;
	t->len--;
	if (i != t->len) {
		t->heap[i] = t->heap[t->len];
		t->heap[i]->idx = i;
		sift_down(t, i);
		sift_up(t, i);
	}
	e->idx = UINT32_MAX;
	e->deadline = MRD_NEVER;
}

int mrd_timer_set(mrd_timer *t, mrd_timer_ent *e, uint64_t deadline)
{
	if (deadline == MRD_NEVER) {
		if (e->idx != UINT32_MAX)
			heap_remove(t, e);
		return 0;
	}
	if (e->idx != UINT32_MAX) {
		uint64_t old = e->deadline;
		e->deadline = deadline;
		if (deadline < old)
			sift_up(t, e->idx);
		else
			sift_down(t, e->idx);
		return 0;
	}
	if (t->len == t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 64;
		mrd_timer_ent **n = realloc(t->heap, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->heap = n;
		t->cap = ncap;
	}
	e->deadline = deadline;
	e->idx = t->len;
	t->heap[t->len++] = e;
	sift_up(t, e->idx);
	return 0;
}

mrd_timer_ent *mrd_timer_pop_due(mrd_timer *t, uint64_t now)
{
	if (!t->len || t->heap[0]->deadline > now)
		return NULL;
	mrd_timer_ent *e = t->heap[0];
	heap_remove(t, e);
	return e;
}

void mrd_timer_rearm(mrd_timer *t)
{
	uint64_t next = mrd_timer_next(t);
	if (t->fd < 0)
		return;
	uint64_t now = uv_hrtime();
	if (next != MRD_NEVER && t->soon_init && next <= now) {
		/* Due already: no timerfd (whatever it is armed to fires in
		 * its time and finds what is due then). */
		if (!t->soon_on) {
			t->soon_on = 1;
			uv_idle_start(&t->soon, on_soon);
		}
		return;
	}
	if (t->soon_on) {
		t->soon_on = 0;
		uv_idle_stop(&t->soon);
	}
	/* Armed at or before the earliest deadline and not yet expired: keep
	 * it. An early expiry finds nothing due and re-arms; re-arming every
	 * time the earliest deadline moved later (an RTO restarted by each
	 * ACK) was a system call per turn of a busy loop, 5 % of the daemon's
	 * CPU in the 64-byte message-rate benchmark. */
	if (t->armed != MRD_NEVER && t->armed > now && t->armed <= next)
		return;
	if (next == t->armed)
		return;
	struct itimerspec its = {0};
	if (next != MRD_NEVER) {
		if (next == 0)
			next = 1; /* it_value 0 would disarm: 1 ns is long past */
		its.it_value.tv_sec = (time_t)(next / 1000000000u);
		its.it_value.tv_nsec = (long)(next % 1000000000u);
	}
	if (timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		t->armed = next;
}

void mrd_timer_close(mrd_timer *t, uv_close_cb close_cb)
{
	for (uint32_t i = 0; i < t->len; i++)
		mrd_timer_ent_init(t->heap[i]); /* their owners may outlive the heap */
	free(t->heap);
	t->heap = NULL;
	t->len = t->cap = 0;
	if (t->soon_init) {
		t->soon_init = t->soon_on = 0;
		uv_close((uv_handle_t *)&t->soon, NULL);
	}
	if (t->fd >= 0) {
		uv_close((uv_handle_t *)&t->poll, close_cb);
		/* libuv does not own the fd of a poll handle: close it after
		 * uv_close() stopped watching it. */
		close(t->fd);
		t->fd = -1;
	}
}
