/*
 * The daemon's own services, reached under reserved service ids (mrd.h):
 *
 *   PERF  a bulk transfer between two daemons with verified data. The
 *         acceptor registers a scratch region (64 MiB) under a random rkey
 *         when the initiator says HELLO and answers READY with the rkey;
 *         the initiator then WRITE_IMMs messages of a data pattern (a
 *         function of a seed, the message number and the offset) into
 *         successive slots of the region, keeping a window of them
 *         outstanding, for the requested time. Each message's completion
 *         at the acceptor (the immediate carries its number) triggers the
 *         check of the whole slot against the pattern. At the end the
 *         initiator sends DONE and the acceptor answers RESULT with what it
 *         verified; the initiator reports goodput, verification results
 *         and per-path statistics as JSON and closes the connection.
 *   ECHO  round trips: the initiator SENDs small ECHO requests one at a
 *         time and the acceptor SENDs each one back; the initiator reports
 *         the RTT of each (post to receive completion, both in the daemons)
 *         and the engine's per-path smoothed RTTs.
 *
 * Both use stream 0 for 48-byte control messages (big-endian, validated:
 * the peer is input like any other) and PERF stream 1 for the data.
 */
#ifndef MRD_PERF_H
#define MRD_PERF_H

#include <jansson.h>
#include <stdint.h>

typedef struct mrd mrd;
typedef struct mrd_perf_op mrd_perf_op;
typedef struct mrd_conn_ops mrd_conn_ops;

/* The outcome: result (a new reference, the callee owns it) or err. */
typedef void (*mrd_perf_done_cb)(void *ud, json_t *result, const char *err);

#define MRD_PERF_REGION_BYTES (64u << 20)
#define MRD_PERF_MSG_MIN 4096u
#define MRD_PERF_MSG_MAX (4u << 20)
#define MRD_PERF_MSG_DEFAULT (1u << 20)
#define MRD_PERF_SECONDS_MAX 3600.0
/* A run that has not ended this long after it should have (a perf run's
 * seconds; a ping's count times MRD_PING_RTT_MS) ends with an error: the
 * peer stopped answering on a connection that stayed up. metaroce-ctl
 * waits 30 s for a ping (a ping of 1,000 round trips ends by then) and a
 * perf run's seconds plus 30. */
#define MRD_PERF_GRACE_MS 20000u
#define MRD_PING_RTT_MS 10u

/* Start a perf run to peer ("ADDR[:PORT]", the daemon's service port by
 * default) for seconds or until max_bytes have been sent (0: no limit),
 * whichever comes first, in messages of msg_size bytes (a multiple of 8 in
 * [MRD_PERF_MSG_MIN, MRD_PERF_MSG_MAX]). Returns 0 and *pop (cb is called
 * once, later), or -1 with err. */
int mrd_perf_start(mrd *d, const char *peer, double seconds, uint64_t max_bytes,
		   uint32_t msg_size, mrd_perf_done_cb cb, void *ud, mrd_perf_op **pop,
		   char *err, size_t errlen);

/* Start `count` echo round trips to peer. Same contract. */
int mrd_ping_start(mrd *d, const char *peer, unsigned count, mrd_perf_done_cb cb,
		   void *ud, mrd_perf_op **pop, char *err, size_t errlen);

/* The service lookup of PERF and ECHO for the connections' registry
 * (mrd_peers_add_service): their ops, NULL for another service id. */
const mrd_conn_ops *mrd_perf_service(void *ud, uint32_t service_id);

/* The requester went away: no callback; the run is closed and freed. */
void mrd_perf_cancel(mrd_perf_op *op);

/* Add the control commands ping and perf (long-running: each holds its
 * client's operation slot) to the control socket's table. */
int mrd_perf_register(mrd *d);

#endif
