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
 * (ping, perf) for root and the daemon's own uid.
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
#define MRD_CTL_VERSION 1

typedef struct mrd_ctl {
	mrd *d;
	uv_pipe_t server;
	int open;  /* the handle needs closing */
	int bound; /* the socket file is ours to remove */
	gid_t gid; /* the control group's; valid when have_group */
	int have_group;
	mrd_ctl_client *clients;
	uint64_t requests, errors;
	uint64_t clients_paused, clients_dropped; /* write-queue bound (ctl.c) */
	unsigned monitors;          /* clients subscribed with `monitor` */
	uint64_t events_pushed, events_dropped;
} mrd_ctl;

/* Create the socket and listen. Returns 0 or -errno (logged). */
int mrd_ctl_init(mrd *d);

/* Close the socket and every client (pending ping/perf are cancelled) and
 * remove the socket file. */
void mrd_ctl_close(mrd *d);

/* For the modules that add commands (ops.c, drill.c). */

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
/* An operation that lasts (a drill) and must be cancelled when the client
 * goes: cancel(ud) is called from client_close. One per client. */
int mrd_ctl_set_op(mrd_ctl_client *cl, void (*cancel)(void *ud), void *ud);
void mrd_ctl_clear_op(mrd_ctl_client *cl);

/* JSON views shared with perf.c: one connection, its paths. */
json_t *mrd_json_conn(const mrd_conn *c);
json_t *mrd_json_paths(const mrd_conn *c);

#endif
