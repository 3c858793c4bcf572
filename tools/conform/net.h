/*
 * metaroce-conform: the peer side of the wire, written on proto/wire.h only.
 *
 * A cf_net is one UDP socket the tool receives on (its service port) plus
 * what it knows of the connections it opened or accepted; cf_conn is one of
 * them. While a case waits for an answer, the tool behaves as a minimal
 * peer: it acknowledges the target's data, answers its PROBEs and keeps the
 * messages the target SENDs, so that the target has no reason to retransmit
 * or to end the connection behind the case's back.
 */
#ifndef CF_NET_H
#define CF_NET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define CF_MAX_CONNS 64
#define CF_MAX_MSGS 16
#define CF_MSG_MAX 256
#define CF_MAX_PATHS 16

/* An IPv4 or IPv6 socket address. */
typedef union cf_sa {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
} cf_sa;

/* IPV4[:PORT], [IPV6][:PORT] or a bare IPV6 address; 0 or -1. */
int cf_parse_addr(const char *s, uint16_t defport, cf_sa *sa);
socklen_t cf_sa_len(const cf_sa *a);
uint16_t cf_sa_port(const cf_sa *a);
void cf_sa_set_port(cf_sa *a, uint16_t port);
/* "ADDR:PORT", "[ADDR]:PORT" for IPv6. */
const char *cf_sa_str(const cf_sa *a, char *buf, size_t len);

typedef struct cf_msg {
	uint16_t stream_id;
	uint8_t opcode;
	uint32_t msn, len;
	uint8_t data[CF_MSG_MAX];
} cf_msg;

/* Receive state the tool keeps for one path of the target (newest gen). */
typedef struct cf_rpath {
	int seen;
	uint16_t gen;
	uint32_t next_psn;
	uint64_t bits; /* bit i: PSN next_psn - 1 - i */
} cf_rpath;

typedef struct cf_conn {
	int used, established, ended;
	uint32_t ci, ca;  /* ours, the target's */
	uint64_t ti, ta;  /* token the target writes to us, token we write to it */
	uint64_t inst;
	uint16_t mtu, max_streams, max_paths;
	uint64_t caps;
	uint32_t service_id;
	uint16_t peer_port; /* the target's service port (ACCEPT/CONNECT) */
	uint32_t next_psn[CF_MAX_PATHS];
	uint16_t gen[CF_MAX_PATHS];
	uint32_t next_msn[8], next_ridx[8];
	uint32_t probe_seq;
	cf_rpath rp[CF_MAX_PATHS];
	cf_msg msgs[CF_MAX_MSGS];
	unsigned nmsgs;
	uint32_t closes_rx, close_replies_rx, resets_rx;
	uint16_t last_close_reason; /* of the target's last CLOSE without REPLY */
	uint16_t last_reply_reason; /* ... with REPLY */
	uint16_t last_reset_reason;
	uint32_t probes_rx; /* PROBEs of the target with ACK_REQ */
	int no_ack;       /* the background peer records the target's data but
			   * does not acknowledge it (a case holds its ACKs) */
	int silent;       /* ... and answers nothing at all: no ACK, PROBE_ACK
			   * or CLOSE reply (a peer that went away) */
	int rnr_nak;      /* NAKs every data packet of the target RNR instead of
			   * acknowledging it (a receiver never ready) */
	uint32_t data_rx; /* data packets of the target received */
	uint32_t data_not_ect; /* ... of them neither ECT(0) nor CE (SPEC 2.4) */
} cf_conn;

typedef struct cf_rx {
	mrp_pkt pkt;
	ssize_t rv;          /* mrp_pkt_decode() result */
	uint8_t raw[10000];
	size_t len;
	cf_sa from;
	int tos;
} cf_rx;

typedef struct cf_net {
	int fd;
	cf_sa local, target;
	uint64_t inst;
	uint32_t cookie_conn_nonce;
	uint64_t cookie; /* last RETRY cookie the target gave us (9.7) */
	cf_conn conns[CF_MAX_CONNS];
	int verbose;
	unsigned timeout_ms;
	/* counts of what the background peer did, for the report */
	uint64_t rx_total, rx_undecodable;
	char first_bad[200]; /* the first datagram the codec refused, described */
} cf_net;

uint64_t cf_now_ns(void);
uint64_t cf_rand64(void);
uint32_t cf_rand32(void);

int cf_net_open(cf_net *n, const char *target, const char *bind_addr, char *err,
		size_t errlen);
void cf_net_close(cf_net *n);

/* Send raw bytes to the target (or to dst when not NULL) with IP TOS tos
 * (-1: leave the socket default), from fd (-1: the service socket). */
int cf_send_raw(cf_net *n, int fd, const cf_sa *dst, const void *buf,
		size_t len, int tos);
/* A second UDP socket on the tool's address, any port (its address in
 * *la); -1 on failure. */
int cf_socket_local(cf_net *n, cf_sa *la);
/* Encode pkt and send it to the target. Returns 0 or a negative code. */
int cf_send(cf_net *n, const mrp_pkt *pkt, int tos);

/* Wait up to timeout_ms for a datagram that match() accepts (match NULL:
 * any). Data and PROBEs for our connections are answered on the way and
 * also offered to match(). Returns 1 with *rx filled, 0 on timeout. */
typedef int (*cf_match_fn)(const cf_rx *rx, void *ud);
int cf_wait(cf_net *n, cf_match_fn match, void *ud, unsigned timeout_ms, cf_rx *rx);
/* Service everything that arrives for ms milliseconds; returns how many
 * datagrams did match (match may be NULL: count all). */
unsigned cf_drain(cf_net *n, unsigned ms, cf_match_fn match, void *ud);

cf_conn *cf_conn_find(cf_net *n, uint32_t ci);
void cf_conn_forget(cf_net *n, cf_conn *c);
/* End (RESET) every connection still open and forget them all. */
void cf_reset_all(cf_net *n);

/* CONNECT parameters a case may change. */
typedef struct cf_hs_opts {
	uint8_t version, min_version, max_version;
	uint16_t mtu, max_streams, max_paths;
	uint64_t caps;
	uint32_t service_id;
	int no_cookie;    /* do not put the saved cookie in the token */
	int follow_retry; /* answer RETRYs (default 1 via cf_hs_defaults) */
	uint8_t naddrs;   /* plane addresses to announce; 0: the tool's, plane 0 */
	mrp_addr addrs[MRP_MAX_ADDRS];
} cf_hs_opts;

/* The plane address entry of a, on plane. */
void cf_sa_addr(const cf_sa *a, uint8_t plane, mrp_addr *out);

void cf_hs_defaults(cf_hs_opts *o, uint32_t service_id);
void cf_build_connect(cf_net *n, mrp_pkt *p, uint32_t ci, uint64_t ti, uint64_t token,
		      const cf_hs_opts *o);

/* Run a handshake: CONNECT (following up to 3 RETRYs), wait for ACCEPT or
 * REJECT. Returns the answer's opcode (MRP_OP_ACCEPT, MRP_OP_REJECT,
 * MRP_OP_RETRY when retries were not followed) with *ans filled, or 0 on
 * timeout. On ACCEPT the connection is recorded (*pc) but not confirmed. */
int cf_handshake(cf_net *n, const cf_hs_opts *o, cf_rx *ans, cf_conn **pc);
/* Confirm: PROBE with ACK_REQ until PROBE_ACK. 1 on success. */
int cf_confirm(cf_net *n, cf_conn *c);
/* Open an ESTABLISHED connection to service_id. NULL on failure (why in err). */
cf_conn *cf_open(cf_net *n, uint32_t service_id, const cf_hs_opts *o, char *err,
		 size_t errlen);

/* Headers for packets of an established connection. */
void cf_hdr(const cf_conn *c, mrp_pkt *p, uint8_t op);
/* One data packet (whole message when payload fits). Takes the next PSN of
 * path_id unless psn_override is >= 0. */
void cf_data(cf_conn *c, mrp_pkt *p, uint8_t op, uint16_t path_id, uint16_t stream,
	     uint32_t msn, uint32_t offset, uint32_t msg_len, const uint8_t *payload,
	     uint16_t payload_len);
/* A PROBE on path_id/gen with a fresh probe_seq and a timestamp. */
void cf_probe(cf_conn *c, mrp_pkt *p, uint16_t path_id, uint16_t gen);
/* PROBE with ACK_REQ and wait for its PROBE_ACK: 1 answered, 0 not. */
int cf_alive(cf_net *n, cf_conn *c, unsigned timeout_ms);

#endif
