/*
 * What the daemon's two Unix sockets (control, ctl.c; applications, app.c)
 * share: taking over a socket path left by a daemon that died, and the
 * group checks of their callers.
 */
#ifndef MRD_LOCALSOCK_H
#define MRD_LOCALSOCK_H

#include <sys/types.h>

/* Remove a socket file at path left by a daemon that died; leave one that a
 * live daemon answers on. type is the socket's (SOCK_STREAM, SOCK_SEQPACKET).
 * Returns 0 (nothing there, or removed), -EADDRINUSE (a live daemon),
 * -EEXIST (not a socket) or -errno. */
int mrd_clear_stale_socket(const char *path, int type);

/* A phrase for a mrd_clear_stale_socket() failure. */
const char *mrd_clear_stale_str(int err);

/* Look up group name: 1 and *gid, or 0 when it does not exist. Blocking
 * NSS lookup: at start-up only. */
int mrd_group_gid(const char *name, gid_t *gid);

/* Whether uid belongs to gid, primary or supplementary, from the user
 * database. Blocking NSS lookups: once per connection, never on the
 * datapath. */
int mrd_uid_in_group(uid_t uid, gid_t gid);

#endif
