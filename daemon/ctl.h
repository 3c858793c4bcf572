/*
 * The control socket: a Unix stream socket (service.control_socket, mode
 * 0660, group service.control_group when that group exists) speaking
 * newline-delimited JSON, one request per line and one reply per request,
 * version 1. docs/control-protocol.md is the reference.
 *
 * The socket is a trust boundary: requests are parsed by jansson, a line is
 * at most MRD_CTL_LINE_MAX bytes (a longer one gets an error reply and is
 * skipped up to its newline), and every malformed request gets an error
 * reply while the connection stays open. Who may do what comes from the
 * peer's credentials (SO_PEERCRED): read-only commands for root, the
 * daemon's own uid and members of the control group; commands that act
 * (ping, perf, drain, drills...) for root and the daemon's own uid.
 *
 * The socket knows no command itself: each module that owns commands
 * registers a table of them (mrd_ctl_cmd: name, handler, permission,
 * whether it is long-running), and main.c calls those registrations at
 * start. The table is the one place that checks permission and the one
 * place that refuses a second long-running operation on a connection; a
 * long-running handler takes the client's operation slot with
 * mrd_ctl_set_op(), whose cancel function is called if the client goes.
 */
#ifndef MRD_CTL_H
#define MRD_CTL_H

#include <jansson.h>
#include <sys/types.h>
#include <uv.h>

#include "event.h"

typedef struct mrd mrd;
typedef struct mrd_conn mrd_conn;
typedef struct mrd_ctl_client mrd_ctl_client;

#define MRD_CTL_LINE_MAX (64 * 1024)
/* Clients at once: those of root and of the daemon's own uid, and the
 * others (members of the control group) in total and per uid, so that a
 * read-only user cannot take the socket from the operator; under a low
 * open-file limit, at most 1/4, 1/8 and 1/16 of it. A client over a bound
 * gets one error line ("too_many_clients") and is closed. */
#define MRD_CTL_CLIENTS_PRIV 512
#define MRD_CTL_CLIENTS_UNPRIV 256
#define MRD_CTL_CLIENTS_PER_UID 32
/* A line whose first byte came this long ago and that is still unfinished
 * closes its client (an error line "timeout" first): a client that sends
 * half a request and stalls holds neither a slot nor its buffer. The
 * buffer of a line grows with it, up to MRD_CTL_LINE_MAX. */
#define MRD_CTL_LINE_TIMEOUT_MS 10000
#define MRD_CTL_VERSION 1
#define MRD_CTL_TABLES 8 /* modules that register commands */

typedef enum mrd_ctl_perm {
	MRD_CTL_READ, /* root, the daemon's uid, the control group */
	MRD_CTL_ACT,  /* changes state: root or the daemon's uid only */
} mrd_ctl_perm;

/* One command. fn replies (now or later) with mrd_ctl_reply() or
 * mrd_ctl_error(); id may be NULL, args NULL or an object. */
typedef struct mrd_ctl_cmd {
	const char *name; /* "show planes": the request's cmd */
	void (*fn)(mrd_ctl_client *cl, json_t *id, const char *cmd, json_t *args);
	mrd_ctl_perm perm;
	/* Lasts beyond the request (ping, perf, a drill): refused with busy
	 * while the client runs one already; fn takes the slot with
	 * mrd_ctl_set_op() when it starts. */
	int long_running;
} mrd_ctl_cmd;

typedef struct mrd_ctl {
	mrd *d;
	uv_pipe_t server;
	int open;  /* the handle needs closing */
	int bound; /* the socket file is ours to remove */
	gid_t gid; /* the control group's; valid when have_group */
	int have_group;
	mrd_ctl_client *clients;
	unsigned nclients, nclients_unpriv; /* open; those not root nor our uid */
	uv_timer_t sweep; /* closes clients that leave a line unfinished */
	int sweep_open;
	uv_idle_t turn;   /* hands yielded clients their next turn (ctl.c) */
	int turn_open;
	uint64_t yields;  /* clients that had their turn's requests and waited */
	uint64_t requests, errors;
	uint64_t clients_paused, clients_dropped; /* write-queue bound (ctl.c) */
	uint64_t queued, queued_peak; /* reply bytes waiting, all clients */
	uint64_t clients_refused; /* over MRD_CTL_CLIENTS_* at connect */
	uint64_t clients_slow;    /* a line unfinished for MRD_CTL_LINE_TIMEOUT_MS */
	unsigned monitors;          /* clients subscribed with `monitor` */
	uint64_t events_pushed, events_dropped;
	/* Called after each read from a client, its requests handled (main.c:
	 * run the connections, so that what they posted leaves now). */
	void (*after_input)(void *ud);
	void *after_input_ud;
	const mrd_ctl_cmd *tables[MRD_CTL_TABLES]; /* mrd_ctl_register() */
	size_t ntables_len[MRD_CTL_TABLES];
	unsigned ntables;
} mrd_ctl;

/* Add a module's commands (cmds stays the caller's: a static table). A
 * name already registered is refused. Returns 0 or -1 (logged). */
int mrd_ctl_register(mrd *d, const mrd_ctl_cmd *cmds, size_t n);

/* Create the socket and listen. Returns 0 or -errno (logged). */
int mrd_ctl_init(mrd *d);

/* Close the socket and every client (pending ping/perf are cancelled) and
 * remove the socket file. */
void mrd_ctl_close(mrd *d);

/* For the handlers of commands. */

/* Send the reply (result is stolen) or an error; a client that has gone is
 * skipped. */
void mrd_ctl_reply(mrd_ctl_client *cl, json_t *id, json_t *result);
void mrd_ctl_error(mrd_ctl_client *cl, json_t *id, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Whether the caller may run commands that change state (root or the
 * daemon's own uid). */
int mrd_ctl_may_act(const mrd_ctl_client *cl);
uid_t mrd_ctl_uid(const mrd_ctl_client *cl);
mrd *mrd_ctl_daemon(const mrd_ctl_client *cl);
/* Keep the client's memory while work on a thread refers to it; a client
 * closed meanwhile is freed by the last release. mrd_ctl_gone() says
 * whether it was closed. */
void mrd_ctl_hold(mrd_ctl_client *cl);
void mrd_ctl_release(mrd_ctl_client *cl);
int mrd_ctl_gone(const mrd_ctl_client *cl);
/* Make the client a subscriber of events (monitor). */
void mrd_ctl_subscribe(mrd_ctl_client *cl);
/* Subscriber of the event bus (ud: the daemon): each event goes to every
 * `monitor` client as {"v": 1, "event": {...}} on its own line. */
void mrd_ctl_on_event(void *ud, const mrd_ev *ev);
/* The client's one long-running operation (ping, perf, a drill), cancelled
 * when the client goes: cancel(ud) is called from client_close. Returns -1
 * when the slot is taken. mrd_ctl_clear_op() when it ends. */
int mrd_ctl_set_op(mrd_ctl_client *cl, void (*cancel)(void *ud), void *ud);
void mrd_ctl_clear_op(mrd_ctl_client *cl);

#endif
