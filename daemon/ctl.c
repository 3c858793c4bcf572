#define _GNU_SOURCE /* sendmmsg, recvmmsg, struct ucred */
#include "ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "localsock.h"
#include "log.h"
#include "mrd.h"
#include "utf8.h"


struct mrd_ctl_client {
	uv_pipe_t pipe; /* data = this client */
	mrd *d;
	mrd_ctl_client *next, **pprev;
	uid_t uid;
	pid_t pid;
	int may_read, may_act;
	int discarding; /* skipping the rest of an oversized line */
	int closing;
	int unpriv;     /* neither root nor the daemon's uid */
	char *line;     /* grows to MRD_CTL_LINE_MAX bytes */
	size_t len, cap;
	uint64_t line_ms; /* when the unfinished line's first byte came */
	char rdbuf[16384];
	/* The one long-running operation (ping, perf, a drill), cancelled
	 * at close (mrd_ctl_set_op). */
	void (*op_cancel)(void *ud);
	void *op_ud;
	unsigned refs;     /* work on a thread that will come back to us */
	int handle_closed; /* the pipe is closed; free at the last release */
	int monitor;       /* subscribed to events */
	uint64_t monitor_dropped; /* events not sent: the client reads too slowly */
	/* Back-pressure (CTL_WQ_PAUSE): not reading while the replies wait;
	 * the rest of the last read chunk is kept here until then. Also
	 * paused, with yielded set, after CTL_TURN_REQS requests in one turn
	 * of the loop: the rest waits for the next turn (on_turn). */
	int paused;
	int yielded;
	char *held;
	size_t held_len, held_off;
	struct out_chunk *out; /* where its next reply line goes (wreq_alloc) */
};

/* Requests of one client handled in one turn of the event loop. A client
 * that pipelines many (a scraper, a flood) is handled a few at a time,
 * between the datapath's turns: one read of 16 KiB holds hundreds of
 * `show conns`, and handling them all at once held every connection of the
 * host for seconds on a busy machine (the peers took the silence for a
 * dead daemon). */
#define CTL_TURN_REQS 4

/* A client whose replies wait unread beyond CTL_WQ_PAUSE bytes is not read
 * from (its requests wait in the socket and then in its own send buffer)
 * until the queue drains below half of it; no reply is dropped. Replies to
 * requests already read can still pass the mark; a client whose queue
 * passes CTL_WQ_DROP is closed. */
#define CTL_WQ_PAUSE (4u << 20)
#define CTL_WQ_DROP (32u << 20)
/* And all clients together: while more than CTL_WQ_ALL bytes of replies
 * wait, a client that has replies of its own waiting is not read either
 * (one with none is: an operator's `status` always gets through). It reads
 * again once its queue is empty, or below half of CTL_WQ_PAUSE while the
 * total is below half of CTL_WQ_ALL. */
#define CTL_WQ_ALL (64u << 20)

/* A subscriber with more than this many bytes queued loses events (counted
 * and reported to it as monitor.dropped once it catches up) instead of
 * making the daemon buffer without bound. */
#define MONITOR_QUEUE_MAX (4u << 20)

/* Replies waiting to be written live in pages of their own, not in the
 * heap: a client's lines are packed one after another, each after its
 * write request, in chunks of OUT_CHUNK bytes (a line longer than a
 * quarter of that gets pages of its own), and a chunk is unmapped once its
 * last line is written. Kept in the heap, a flood of queued replies lay among the
 * temporaries of the requests that made them (their JSON trees, the
 * metrics text) and fragmented it to 1.8-1.9 times the bytes queued
 * (ctl_flood_many: A's RSS grew 117-130 MiB for 68 MiB of replies, in
 * the runs where the metrics text came out under the 16 KiB from which
 * lines used to be mapped). A client's chunks cost at most the bytes it
 * has queued, a quarter more, and one chunk. */
#define OUT_CHUNK (64u << 10)

typedef struct out_chunk {
	size_t size;    /* bytes mapped */
	size_t used;    /* bytes handed out, this header included */
	unsigned lines; /* lines in it not yet written: unmapped at 0 */
} out_chunk;

typedef struct wreq {
	uv_write_t req;
	out_chunk *chunk;
	size_t len;         /* the line's bytes, counted in ctl.queued until written */
	mrd_ctl_client *cl; /* alive: uv_close() runs write callbacks first */
	char buf[];         /* the line */
} wreq;

#define OUT_ALIGN(n) (((n) + 15) & ~(size_t)15)

/* Room for a line of n bytes (its newline and a NUL included), after the
 * client's earlier lines if they have room left; NULL if no memory. */
static wreq *wreq_alloc(mrd_ctl_client *cl, size_t n)
{
	size_t need = OUT_ALIGN(sizeof(wreq) + n);
	size_t hdr = OUT_ALIGN(sizeof(out_chunk));
	int own = need > OUT_CHUNK / 4; /* a long line: pages of its own */
	out_chunk *ch = own ? NULL : cl->out;
	if (!ch || ch->size - ch->used < need) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t size = own ? (hdr + need + page - 1) / page * page : OUT_CHUNK;
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		ch = p;
		ch->size = size;
		ch->used = hdr;
		ch->lines = 0;
		if (!own)
			cl->out = ch; /* the one before goes when its last line is written */
	}
	wreq *w = (wreq *)((char *)ch + ch->used);
	ch->used += need;
	ch->lines++;
	w->chunk = ch;
	w->cl = cl;
	w->len = 0;
	return w;
}

static void wreq_free(wreq *w)
{
	out_chunk *ch = w->chunk;
	if (--ch->lines)
		return;
	if (w->cl->out == ch)
		w->cl->out = NULL;
	munmap(ch, ch->size);
}

static size_t wq_size(const mrd_ctl_client *cl)
{
	return uv_stream_get_write_queue_size((const uv_stream_t *)&cl->pipe);
}

/* Stop reading this client after the line just handled? */
static int wq_over(const mrd_ctl_client *cl)
{
	size_t q = wq_size(cl);
	return q > CTL_WQ_PAUSE || (q && cl->d->ctl.queued > CTL_WQ_ALL);
}

/* May a paused client be read again? */
static int wq_under(const mrd_ctl_client *cl)
{
	size_t q = wq_size(cl);
	return !q || (q < CTL_WQ_PAUSE / 2 && cl->d->ctl.queued < CTL_WQ_ALL / 2);
}

static void client_resume(mrd_ctl_client *cl);

/* ---- replies ------------------------------------------------------------- */

static void on_written(uv_write_t *req, int status)
{
	(void)status;
	wreq *w = (wreq *)req;
	mrd_ctl_client *cl = w->cl;
	cl->d->ctl.queued -= w->len;
	wreq_free(w);
	if (cl->paused && !cl->closing && wq_under(cl))
		client_resume(cl);
}

/* What is sent when a reply cannot be encoded (out of memory): still a
 * reply, with its "error". */
#define REPLY_FALLBACK \
	"{\"v\":1,\"ok\":false,\"error\":{\"code\":\"internal\"," \
	"\"message\":\"the reply could not be encoded\"}}"

/* The reply as one line in the client's reply pages. Sized first and
 * written once, in place (json_dumpb), not grown and copied (json_dumps). */
static wreq *encode_line(mrd_ctl_client *cl, json_t *reply)
{
	size_t n = reply ? json_dumpb(reply, NULL, 0, JSON_COMPACT) : 0;
	wreq *w = n ? wreq_alloc(cl, n + 2) : NULL;
	if (w && json_dumpb(reply, w->buf, n, JSON_COMPACT) != n) {
		wreq_free(w);
		w = NULL;
	}
	if (!w)
		return NULL;
	w->buf[n] = '\n';
	w->buf[n + 1] = '\0';
	w->len = n + 1;
	return w;
}

static void send_json(mrd_ctl_client *cl, json_t *reply)
{
	wreq *w = cl->closing ? NULL : encode_line(cl, reply);
	json_decref(reply);
	if (cl->closing)
		return;
	if (!w) {
		cl->d->ctl.errors++;
		size_t n = sizeof(REPLY_FALLBACK) - 1;
		w = wreq_alloc(cl, n + 2);
		if (!w)
			return;
		memcpy(w->buf, REPLY_FALLBACK, n);
		w->buf[n] = '\n';
		w->buf[n + 1] = '\0';
		w->len = n + 1;
	}
	uv_buf_t b = uv_buf_init(w->buf, (unsigned)w->len);
	if (uv_write(&w->req, (uv_stream_t *)&cl->pipe, &b, 1, on_written) < 0) {
		wreq_free(w);
		return;
	}
	cl->d->ctl.queued += w->len;
	if (cl->d->ctl.queued > cl->d->ctl.queued_peak)
		cl->d->ctl.queued_peak = cl->d->ctl.queued;
}

/* NULL if any part of it cannot be built. */
static json_t *reply_new(json_t *id, int ok)
{
	json_t *r = json_object();
	if (!r || json_object_set_new(r, "v", json_integer(MRD_CTL_VERSION)) < 0 ||
	    (id && json_object_set(r, "id", id) < 0) ||
	    json_object_set_new(r, "ok", json_boolean(ok)) < 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

static void reply_err(mrd_ctl_client *cl, json_t *id, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void reply_ok(mrd_ctl_client *cl, json_t *id, json_t *result)
{
	json_t *r = reply_new(id, 1);
	if (!r || !result) {
		json_decref(result);
		json_decref(r);
		reply_err(cl, id, "internal", "out of memory building the reply");
		return;
	}
	if (json_object_set_new(r, "result", result) < 0) {
		json_decref(r);
		reply_err(cl, id, "internal", "out of memory building the reply");
		return;
	}
	send_json(cl, r);
}

static void reply_err(mrd_ctl_client *cl, json_t *id, const char *code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* A cut in the middle of a character, or bytes of a request quoted
	 * back, must not cost the reply its "error" (jansson takes only
	 * UTF-8). */
	mrd_utf8_clean(msg);
	cl->d->ctl.errors++;
	json_t *r = reply_new(id, 0);
	json_t *e = json_pack("{s:s, s:s}", "code", code, "message", msg);
	if (!r || !e) {
		json_decref(e);
		json_decref(r);
		r = NULL; /* send_json() sends REPLY_FALLBACK */
	} else if (json_object_set_new(r, "error", e) < 0) {
		json_decref(r);
		r = NULL;
	}
	send_json(cl, r);
}

void mrd_ctl_reply(mrd_ctl_client *cl, json_t *id, json_t *result)
{
	reply_ok(cl, id, result);
}

void mrd_ctl_error(mrd_ctl_client *cl, json_t *id, const char *code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_err(cl, id, code, "%s", msg);
}


int mrd_ctl_may_act(const mrd_ctl_client *cl)
{
	return cl->may_act;
}

uid_t mrd_ctl_uid(const mrd_ctl_client *cl)
{
	return cl->uid;
}

mrd *mrd_ctl_daemon(const mrd_ctl_client *cl)
{
	return cl->d;
}

void mrd_ctl_hold(mrd_ctl_client *cl)
{
	cl->refs++;
}

void mrd_ctl_release(mrd_ctl_client *cl)
{
	if (--cl->refs == 0 && cl->handle_closed) {
		free(cl->held);
		free(cl->line);
		free(cl);
	}
}

int mrd_ctl_gone(const mrd_ctl_client *cl)
{
	return cl->closing;
}

void mrd_ctl_subscribe(mrd_ctl_client *cl)
{
	if (!cl->monitor) {
		cl->monitor = 1;
		cl->d->ctl.monitors++;
	}
}

static void publish(mrd *d, json_t *event)
{
	json_t *msg = NULL;
	for (mrd_ctl_client *cl = d->ctl.clients; cl; cl = cl->next) {
		if (!cl->monitor || cl->closing)
			continue;
		if (uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe) > MONITOR_QUEUE_MAX) {
			cl->monitor_dropped++;
			d->ctl.events_dropped++;
			continue;
		}
		if (cl->monitor_dropped) {
			json_t *e = json_pack("{s:i, s:{s:f, s:s, s:I}}", "v", MRD_CTL_VERSION,
					      "event", "ts", (double)mrd_wall_ns() / 1e9, "kind",
					      "monitor.dropped", "count",
					      (json_int_t)cl->monitor_dropped);
			cl->monitor_dropped = 0;
			send_json(cl, e);
		}
		if (!msg) {
			msg = json_object();
			json_object_set_new(msg, "v", json_integer(MRD_CTL_VERSION));
			json_object_set(msg, "event", event);
		}
		d->ctl.events_pushed++;
		send_json(cl, json_incref(msg));
	}
	json_decref(msg);
}

void mrd_ctl_on_event(void *ud, const mrd_ev *ev)
{
	mrd *d = ud;
	if (!d->ctl.monitors)
		return;
	char conn[16];
	snprintf(conn, sizeof(conn), "%08" PRIx32, ev->conn);
	json_t *e = json_object();
	json_object_set_new(e, "ts", json_real((double)ev->ts_ns / 1e9));
	json_object_set_new(e, "kind", json_string(ev->name));
	json_object_set_new(e, "plane", ev->plane_name ? json_string(ev->plane_name) : json_null());
	json_object_set_new(e, "conn", ev->conn ? json_string(conn) : json_null());
	json_object_set_new(e, "path", ev->path >= 0 ? json_integer(ev->path) : json_null());
	json_object_set_new(e, "detail", json_string(ev->detail ? ev->detail : ""));
	if (ev->from) {
		json_object_set_new(e, "from", json_string(ev->from));
		json_object_set_new(e, "to", json_string(ev->to));
		json_object_set_new(e, "gen", json_integer((json_int_t)ev->gen));
		json_object_set_new(e, "sport", json_integer((json_int_t)ev->sport));
	}
	publish(d, e);
	json_decref(e);
}

int mrd_ctl_set_op(mrd_ctl_client *cl, void (*cancel)(void *ud), void *ud)
{
	if (cl->op_cancel)
		return -1;
	cl->op_cancel = cancel;
	cl->op_ud = ud;
	return 0;
}

void mrd_ctl_clear_op(mrd_ctl_client *cl)
{
	cl->op_cancel = NULL;
	cl->op_ud = NULL;
}

/* ---- requests ------------------------------------------------------------ */

static const mrd_ctl_cmd *find_cmd(const mrd_ctl *t, const char *name)
{
	for (unsigned k = 0; k < t->ntables; k++)
		for (size_t i = 0; i < t->ntables_len[k]; i++)
			if (strcmp(t->tables[k][i].name, name) == 0)
				return &t->tables[k][i];
	return NULL;
}

int mrd_ctl_register(mrd *d, const mrd_ctl_cmd *cmds, size_t n)
{
	mrd_ctl *t = &d->ctl;
	if (t->ntables >= MRD_CTL_TABLES) {
		mrd_err("control socket: more than %d command tables", MRD_CTL_TABLES);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (find_cmd(t, cmds[i].name)) {
			mrd_err("control socket: command '%s' registered twice", cmds[i].name);
			return -1;
		}
	}
	t->tables[t->ntables] = cmds;
	t->ntables_len[t->ntables] = n;
	t->ntables++;
	return 0;
}


static void handle_line(mrd_ctl_client *cl, const char *line, size_t len)
{
	mrd *d = cl->d;
	d->ctl.requests++;
	json_error_t jerr;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!req) {
		reply_err(cl, NULL, "parse", "request is not JSON: %s (column %d)", jerr.text,
			  jerr.column);
		return;
	}
	json_t *id = json_object_get(req, "id");
	json_t *v = json_object_get(req, "v");
	json_t *jcmd = json_object_get(req, "cmd");
	json_t *args = json_object_get(req, "args");
	if (!json_is_object(req)) {
		reply_err(cl, NULL, "bad_request", "a request is a JSON object");
	} else if (!json_is_integer(v) || json_integer_value(v) != MRD_CTL_VERSION) {
		reply_err(cl, id, "version", "\"v\" must be %d (this daemon speaks version %d)",
			  MRD_CTL_VERSION, MRD_CTL_VERSION);
	} else if (!json_is_string(jcmd)) {
		reply_err(cl, id, "bad_request", "\"cmd\" (a string) is required");
	} else if (args && !json_is_object(args)) {
		reply_err(cl, id, "bad_request", "\"args\" must be an object");
	} else if (!cl->may_read) {
		reply_err(cl, id, "permission",
			  "uid %u may not use this daemon (root, uid %u or group members only)",
			  (unsigned)cl->uid, (unsigned)geteuid());
	} else {
		const char *cmd = json_string_value(jcmd);
		const mrd_ctl_cmd *c = find_cmd(&d->ctl, cmd);
		if (!c)
			reply_err(cl, id, "unknown_command", "unknown command '%.64s'", cmd);
		else if (c->perm == MRD_CTL_ACT && !cl->may_act)
			reply_err(cl, id, "permission", "%s changes state: root or uid %u only", cmd,
				  (unsigned)geteuid());
		else if (c->long_running && cl->op_cancel)
			reply_err(cl, id, "busy",
				  "a ping, perf or drill is already running on this connection");
		else
			c->fn(cl, id, cmd, args);
	}
	json_decref(req);
}

/* ---- client connections -------------------------------------------------- */

static void client_closed(uv_handle_t *h)
{
	mrd_ctl_client *cl = h->data;
	cl->handle_closed = 1;
	if (cl->refs)
		return; /* freed by the last mrd_ctl_release() */
	free(cl->held);
	free(cl->line);
	free(cl);
}

static void client_close(mrd_ctl_client *cl)
{
	if (cl->closing)
		return;
	cl->closing = 1;
	if (cl->op_cancel) {
		void (*cancel)(void *) = cl->op_cancel;
		cl->op_cancel = NULL;
		cancel(cl->op_ud);
	}
	if (cl->monitor) {
		cl->monitor = 0;
		cl->d->ctl.monitors--;
	}
	*cl->pprev = cl->next;
	if (cl->next)
		cl->next->pprev = cl->pprev;
	cl->d->ctl.nclients--;
	cl->d->ctl.nclients_unpriv -= cl->unpriv;
	uv_close((uv_handle_t *)&cl->pipe, client_closed);
}

/* cap, or a 1/div share of the open-file limit if that is less: control
 * clients may not take the descriptors the datapath and the applications
 * need (an operator may run the daemon under a low limit). */
static unsigned fd_share(unsigned cap, unsigned div)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / div >= cap)
		return cap;
	return rl.rlim_cur / div > 4 ? (unsigned)(rl.rlim_cur / div) : 4;
}

/* One error line written at once (a client that gets no other), then
 * closed. */
static void client_refuse(mrd_ctl_client *cl, const char *code, const char *msg)
{
	char line[256];
	int n = snprintf(line, sizeof(line),
			 "{\"v\":%d,\"ok\":false,\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
			 MRD_CTL_VERSION, code, msg);
	if (n > 0 && (size_t)n < sizeof(line)) {
		uv_buf_t b = uv_buf_init(line, (unsigned)n);
		(void)uv_try_write((uv_stream_t *)&cl->pipe, &b, 1);
	}
	client_close(cl);
}

/* Once a second while clients are open: close those whose unfinished line
 * began MRD_CTL_LINE_TIMEOUT_MS ago (not those we stopped reading). */
static void on_sweep(uv_timer_t *t)
{
	mrd *d = t->data;
	uint64_t now = uv_now(d->loop);
	mrd_ctl_client *next;
	for (mrd_ctl_client *cl = d->ctl.clients; cl; cl = next) {
		next = cl->next;
		if (cl->closing || cl->paused || (!cl->len && !cl->discarding) ||
		    now - cl->line_ms < MRD_CTL_LINE_TIMEOUT_MS)
			continue;
		d->ctl.clients_slow++;
		mrd_info("control client pid %d uid %u: a request unfinished for %d s: closing it",
			 (int)cl->pid, (unsigned)cl->uid, MRD_CTL_LINE_TIMEOUT_MS / 1000);
		client_refuse(cl, "timeout", "request line not finished in time");
	}
	if (!d->ctl.clients)
		uv_timer_stop(t);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)hint;
	mrd_ctl_client *cl = h->data;
	*buf = uv_buf_init(cl->rdbuf, sizeof(cl->rdbuf));
}

static void on_turn(uv_idle_t *h);

/* The client had its turn: the loop goes round (the datapath runs) before
 * its next requests are handled. */
static void client_yield(mrd_ctl_client *cl)
{
	mrd_ctl *t = &cl->d->ctl;
	cl->yielded = 1;
	t->yields++;
	if (t->turn_open && !uv_is_active((uv_handle_t *)&t->turn))
		uv_idle_start(&t->turn, on_turn);
}

/* Requests of data[0..n): returns how much was consumed, less than n when
 * the client's replies wait beyond CTL_WQ_PAUSE or it had its turn's
 * CTL_TURN_REQS requests (then it is paused). */
static size_t feed(mrd_ctl_client *cl, const char *data, size_t n)
{
	unsigned handled = 0;
	for (size_t i = 0; i < n && !cl->closing; i++) {
		char ch = data[i];
		if (ch == '\n') {
			if (cl->discarding)
				cl->discarding = 0;
			else if (cl->len) {
				handle_line(cl, cl->line, cl->len);
				handled++;
			}
			cl->len = 0;
			if (cl->closing)
				break;
			size_t q = wq_size(cl);
			if (q > CTL_WQ_DROP) {
				mrd_warn("control client pid %d: %zu bytes of replies unread: "
					 "closing it", (int)cl->pid, q);
				cl->d->ctl.clients_dropped++;
				client_close(cl);
				return n;
			}
			if (wq_over(cl))
				return i + 1;
			if (handled >= CTL_TURN_REQS && i + 1 < n) {
				client_yield(cl);
				return i + 1;
			}
			continue;
		}
		if (cl->discarding)
			continue;
		if (!cl->len)
			cl->line_ms = uv_now(cl->d->loop);
		if (cl->len == MRD_CTL_LINE_MAX) {
			/* Too long: answer now, skip to the end of the line. */
			cl->d->ctl.requests++;
			reply_err(cl, NULL, "too_large", "request longer than %d bytes",
				  MRD_CTL_LINE_MAX);
			cl->discarding = 1;
			cl->len = 0;
			continue;
		}
		if (cl->len == cl->cap) {
			size_t cap = cl->cap ? 2 * cl->cap : 1024;
			if (cap > MRD_CTL_LINE_MAX)
				cap = MRD_CTL_LINE_MAX;
			char *l = realloc(cl->line, cap);
			if (!l) {
				client_close(cl);
				return n;
			}
			cl->line = l;
			cl->cap = cap;
		}
		cl->line[cl->len++] = ch;
	}
	return n;
}

/* Stop reading; keep what was read and not yet handled. */
static void client_pause(mrd_ctl_client *cl, const char *rest, size_t n)
{
	if (!cl->paused) {
		cl->paused = 1;
		if (!cl->yielded)
			cl->d->ctl.clients_paused++;
		uv_read_stop((uv_stream_t *)&cl->pipe);
	}
	if (!n)
		return;
	char *h = malloc(n);
	if (!h) {
		client_close(cl);
		return;
	}
	memcpy(h, rest, n); /* rest may point into cl->held itself */
	free(cl->held);
	cl->held = h;
	cl->held_len = n;
	cl->held_off = 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void after_input(mrd *d)
{
	if (d->ctl.after_input)
		d->ctl.after_input(d->ctl.after_input_ud);
}

/* The replies drained (on_written): handle the held requests, then read
 * again unless they filled the queue once more. */
static void client_resume(mrd_ctl_client *cl)
{
	cl->yielded = 0;
	if (cl->held) {
		size_t left = cl->held_len - cl->held_off;
		size_t used = feed(cl, cl->held + cl->held_off, left);
		if (cl->closing)
			return;
		if (used < left) {
			cl->held_off += used;
			if (!cl->yielded) /* its replies wait again */
				cl->d->ctl.clients_paused++;
			return; /* still paused */
		}
		free(cl->held);
		cl->held = NULL;
		cl->held_len = cl->held_off = 0;
	}
	cl->paused = 0;
	uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read);
	after_input(cl->d);
}

/* Once per turn of the loop while clients yielded: each gets its next
 * CTL_TURN_REQS requests (unless its replies wait: on_written resumes it). */
static void on_turn(uv_idle_t *h)
{
	mrd *d = h->data;
	int more = 0;
	mrd_ctl_client *next;
	for (mrd_ctl_client *cl = d->ctl.clients; cl; cl = next) {
		next = cl->next;
		if (!cl->yielded || cl->closing)
			continue;
		if (cl->paused && wq_over(cl)) {
			/* its replies wait: on_written resumes it */
			cl->yielded = 0;
			d->ctl.clients_paused++;
			continue;
		}
		if (cl->paused)
			client_resume(cl);
		else
			cl->yielded = 0;
		more |= cl->yielded;
	}
	if (!more)
		uv_idle_stop(h);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	mrd_ctl_client *cl = s->data;
	if (n < 0) {
		client_close(cl);
		return;
	}
	size_t used = feed(cl, buf->base, (size_t)n);
	if (!cl->closing && used < (size_t)n)
		client_pause(cl, buf->base + used, (size_t)n - used);
	else if (!cl->closing && wq_over(cl))
		client_pause(cl, NULL, 0);
	after_input(cl->d);
}

static void on_connection(uv_stream_t *server, int status)
{
	mrd *d = server->data;
	if (status < 0)
		return;
	mrd_ctl_client *cl = calloc(1, sizeof(*cl));
	if (!cl)
		return;
	cl->d = d;
	uv_pipe_init(d->loop, &cl->pipe, 0);
	cl->pipe.data = cl;
	cl->pprev = &d->ctl.clients;
	cl->next = d->ctl.clients;
	if (cl->next)
		cl->next->pprev = &cl->next;
	d->ctl.clients = cl;
	d->ctl.nclients++;
	if (uv_accept(server, (uv_stream_t *)&cl->pipe) < 0) {
		client_close(cl);
		return;
	}
	uv_os_fd_t fd;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		client_close(cl);
		return;
	}
	cl->uid = cr.uid;
	cl->pid = cr.pid;
	cl->may_act = cr.uid == 0 || cr.uid == geteuid();
	cl->may_read = cl->may_act ||
		       (d->ctl.have_group && (cr.gid == d->ctl.gid || mrd_uid_in_group(cr.uid, d->ctl.gid)));
	/* The bounds (ctl.h); this client is already in the list. */
	unsigned same = 0;
	if (!cl->may_act) {
		cl->unpriv = 1;
		d->ctl.nclients_unpriv++;
		for (mrd_ctl_client *o = d->ctl.clients; o; o = o->next)
			same += !o->closing && o->uid == cl->uid;
	}
	if (cl->unpriv ? d->ctl.nclients_unpriv > fd_share(MRD_CTL_CLIENTS_UNPRIV, 8) ||
				 same > fd_share(MRD_CTL_CLIENTS_PER_UID, 16)
		       : d->ctl.nclients - d->ctl.nclients_unpriv >
				 fd_share(MRD_CTL_CLIENTS_PRIV, 4)) {
		d->ctl.clients_refused++;
		if (d->ctl.clients_refused == 1 || d->ctl.clients_refused % 1000 == 0)
			mrd_warn("control client pid %d uid %u refused: %u clients of this uid, "
				 "%u in all (refused so far: %llu)", (int)cl->pid, (unsigned)cl->uid,
				 same, d->ctl.nclients, (unsigned long long)d->ctl.clients_refused);
		client_refuse(cl, "too_many_clients", "too many control clients");
		return;
	}
	uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read);
	if (!uv_is_active((uv_handle_t *)&d->ctl.sweep))
		uv_timer_start(&d->ctl.sweep, on_sweep, 1000, 1000);
}

/* ---- the listening socket ------------------------------------------------ */

int mrd_ctl_init(mrd *d)
{
	mrd_ctl *t = &d->ctl;
	const char *path = d->cfg.control_socket;
	t->d = d;
	if (d->cfg.control_group[0]) {
		t->have_group = mrd_group_gid(d->cfg.control_group, &t->gid);
		if (!t->have_group)
			mrd_info("control group '%s' does not exist: read-only access for root "
				 "and uid %u only", d->cfg.control_group, (unsigned)geteuid());
	}
	int rv = mrd_clear_stale_socket(path, SOCK_STREAM);
	if (rv < 0) {
		mrd_err("control socket %s: %s", path, mrd_clear_stale_str(rv));
		return rv;
	}
	uv_timer_init(d->loop, &t->sweep);
	t->sweep.data = d;
	t->sweep_open = 1;
	uv_idle_init(d->loop, &t->turn);
	t->turn.data = d;
	t->turn_open = 1;
	uv_pipe_init(d->loop, &t->server, 0);
	t->server.data = d;
	t->open = 1;
	/* Created 0660 from the start: no window in which others may connect. */
	mode_t old = umask(0117);
	rv = uv_pipe_bind(&t->server, path);
	umask(old);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)&t->server, 64, on_connection);
	if (rv < 0) {
		mrd_err("control socket %s: %s", path, uv_strerror(rv));
		return rv;
	}
	t->bound = 1;
	if (t->have_group && chown(path, (uid_t)-1, t->gid) < 0)
		mrd_warn("control socket %s: cannot give it to group %s: %s", path,
			 d->cfg.control_group, strerror(errno));
	mrd_info("control socket %s", path);
	return 0;
}

void mrd_ctl_close(mrd *d)
{
	mrd_ctl *t = &d->ctl;
	while (t->clients)
		client_close(t->clients);
	if (t->sweep_open) {
		t->sweep_open = 0;
		uv_timer_stop(&t->sweep);
		uv_close((uv_handle_t *)&t->sweep, NULL);
	}
	if (t->turn_open) {
		t->turn_open = 0;
		uv_idle_stop(&t->turn);
		uv_close((uv_handle_t *)&t->turn, NULL);
	}
	if (t->open) {
		t->open = 0;
		uv_close((uv_handle_t *)&t->server, NULL);
	}
	if (t->bound) {
		t->bound = 0;
		unlink(d->cfg.control_socket);
	}
}
