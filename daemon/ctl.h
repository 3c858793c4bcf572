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
} mrd_ctl;

/* Create the socket and listen. Returns 0 or -errno (logged). */
int mrd_ctl_init(mrd *d);

/* Close the socket and every client (pending ping/perf are cancelled) and
 * remove the socket file. */
void mrd_ctl_close(mrd *d);

/* JSON views shared with perf.c: one connection, its paths. */
json_t *mrd_json_conn(const mrd_conn *c);
json_t *mrd_json_paths(const mrd_conn *c);

#endif
