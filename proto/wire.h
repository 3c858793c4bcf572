/*
 * MetaRoCE wire format, version 1: the codec.
 *
 * This header and wire.c are the only places in the project that know the byte
 * layout of a packet; proto/SPEC.md is the normative description and the two
 * must agree field for field. All multi-byte fields are big-endian (network
 * byte order). Offsets below are from the first byte of the UDP payload.
 *
 * Decoders never read past the buffer they are given, check every length
 * field against it, reject every invalid field with a negative MRP_ERR_* code
 * and return the number of bytes consumed otherwise. Encoders refuse invalid
 * input with MRP_ERR_INVAL (or MRP_ERR_NOBUF for a short buffer) and never
 * write past buflen. Nothing here allocates.
 */
#ifndef MRP_WIRE_H
#define MRP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Protocol version carried in every packet by this implementation. */
#define MRP_VERSION 1
/* Versions this implementation can speak (CONNECT negotiation). */
#define MRP_VERSION_MIN 1
#define MRP_VERSION_MAX 1

/*
 * Default UDP destination (service) port. Not 4791: switches, NICs and packet
 * analyzers classify UDP/4791 as RoCEv2 and would parse our header as a BTH.
 * 19791 is outside Linux's default ephemeral range (32768-60999), so it never
 * collides with the source-port sockets paths draw from. Configurable.
 */
#define MRP_DEFAULT_PORT 19791

/* Opcodes (byte 1). Values not listed are unknown: MRP_ERR_OPCODE. */
#define MRP_OP_WRITE 0x01
#define MRP_OP_WRITE_IMM 0x02
#define MRP_OP_SEND 0x03
#define MRP_OP_SEND_IMM 0x04
#define MRP_OP_READ_REQ 0x05  /* capability READ: asks for bytes (SPEC 5.8) */
#define MRP_OP_READ_RESP 0x06 /* capability READ: carries them back */
#define MRP_OP_ACK 0x10
#define MRP_OP_NAK 0x11
#define MRP_OP_PROBE 0x12
#define MRP_OP_PROBE_ACK 0x13
#define MRP_OP_CONNECT 0x20
#define MRP_OP_ACCEPT 0x21
#define MRP_OP_REJECT 0x22
#define MRP_OP_CLOSE 0x23
#define MRP_OP_RESET 0x24
#define MRP_OP_RETRY 0x25 /* address validation: a cookie for the CONNECT (SPEC 9.7) */

/* Header flags (bytes 2-3). Each is valid only on the opcodes named. */
#define MRP_F_FIRST 0x0001   /* data: first packet of the message (offset 0) */
#define MRP_F_LAST 0x0002    /* data: last packet of the message */
#define MRP_F_RETX 0x0004    /* data: this is a retransmission */
#define MRP_F_ACK_REQ 0x0008 /* data, PROBE: acknowledge without delay */
#define MRP_F_REPLY 0x0010   /* CLOSE: this is the answer to a CLOSE */
#define MRP_F_HELD 0x0020    /* data: the receiver's rate hint holds back more ready data (SPEC 6.5) */
#define MRP_F_GRANT 0x0040   /* PROBE: asks the receiver for an admission grant;
			      * PROBE_ACK: carries one, grant_mbps; data: sent on
			      * the first round trip's admission (SPEC 6.6) */

/* Fixed sizes (bytes). */
#define MRP_HDR_LEN 28        /* common header, every packet */
#define MRP_DATA_HDR_LEN 72   /* common + data extension; payload follows */
#define MRP_ACK_LEN 92
#define MRP_NAK_LEN 60
#define MRP_PROBE_LEN 44
#define MRP_PROBE_ACK_LEN 48
#define MRP_PROBE_ACK_GRANT_LEN 52 /* a PROBE_ACK with GRANT: grant_mbps follows */
#define MRP_HS_FIXED_LEN 68   /* CONNECT/ACCEPT without the address list */
#define MRP_HS_ADDR_LEN 20    /* one plane address in CONNECT/ACCEPT */
#define MRP_REJECT_LEN 36
#define MRP_CLOSE_LEN 32      /* CLOSE and RESET */
#define MRP_RETRY_LEN 44

#define MRP_SACK_BITS 256
#define MRP_SACK_BYTES (MRP_SACK_BITS / 8)

#define MRP_MTU_MIN 256       /* payload bytes per packet, bounds of the MTU */
#define MRP_MTU_MAX 9000
#define MRP_MTU_DEFAULT 4096
#define MRP_MSG_MAX 0x80000000u /* largest message, 2 GiB, as in RDMA verbs */
#define MRP_MAX_ADDRS 16      /* plane addresses in a handshake */

/* Capability bits (CONNECT/ACCEPT). Unknown bits are ignored by receivers. */
#define MRP_CAP_IMM 0x0001ull       /* WRITE_IMM and SEND_IMM */
#define MRP_CAP_RATE_HINT 0x0002ull /* ACK rate hints are honoured */
#define MRP_CAP_MULTIPLANE 0x0004ull /* paths across several planes */
#define MRP_CAP_RETRY 0x0008ull     /* CONNECT: the initiator answers RETRY (SPEC 9.7) */
#define MRP_CAP_READ 0x0010ull      /* READ_REQ and READ_RESP (SPEC 5.8) */
#define MRP_CAP_HELD 0x0020ull      /* data packets carry HELD (SPEC 6.5) */
#define MRP_CAP_ADMIT 0x0040ull     /* first-round-trip admission: ACCEPT admit,
				     * PROBE/PROBE_ACK GRANT (SPEC 6.6) */
#define MRP_CAP_KNOWN (MRP_CAP_IMM | MRP_CAP_RATE_HINT | MRP_CAP_MULTIPLANE | MRP_CAP_RETRY | \
		       MRP_CAP_READ | MRP_CAP_HELD | MRP_CAP_ADMIT)

/* ACCEPT admit (SPEC 6.6): 0 = no credit (the initiator asks for a grant
 * before it sends data); k = 1..255: a credit of 4096 * 2^((k - 1) / 8)
 * bytes, rounded down. mrp_admit_bytes() decodes k; mrp_admit_code() gives
 * the largest k whose credit is at most bytes (0 below 4096). */
uint64_t mrp_admit_bytes(uint8_t admit);
uint8_t mrp_admit_code(uint64_t bytes);

/* NAK reasons. */
#define MRP_NAK_INVALID_RKEY 1
#define MRP_NAK_OUT_OF_BOUNDS 2
#define MRP_NAK_ACCESS 3
#define MRP_NAK_RNR 4 /* receiver not ready: no posted receive */
#define MRP_NAK_UNKNOWN_CONN 5
#define MRP_NAK_UNKNOWN_STREAM 6
#define MRP_NAK_MALFORMED 7
#define MRP_NAK_MAX 7

/* REJECT reasons. */
#define MRP_REJ_VERSION 1   /* no common version; min/max say what we speak */
#define MRP_REJ_NO_SERVICE 2 /* nobody listens on that service id */
#define MRP_REJ_RESOURCES 3 /* out of connections, memory, ... */
#define MRP_REJ_REFUSED 4   /* the listener refused it */
#define MRP_REJ_PARAM 5     /* a handshake parameter is unacceptable */
#define MRP_REJ_MAX 5

/* CLOSE / RESET reasons. */
#define MRP_CLOSE_NORMAL 0
#define MRP_CLOSE_APP_EXIT 1    /* the application went away */
#define MRP_CLOSE_SHUTDOWN 2    /* the daemon is stopping */
#define MRP_CLOSE_PEER_RESTART 3 /* the peer's instance id changed */
#define MRP_CLOSE_RETRY_EXCEEDED 4
#define MRP_CLOSE_PROTOCOL 5    /* protocol violation */
#define MRP_CLOSE_MAX 5

/* Common header: bytes 0-27 of every packet. Bytes 0-15 are invariant across
 * protocol versions so that any version can answer a CONNECT it cannot speak. */
typedef struct mrp_hdr {
	uint8_t version;      /* 0: MRP_VERSION */
	uint8_t opcode;       /* 1: MRP_OP_* */
	uint16_t flags;       /* 2: MRP_F_* */
	uint16_t path_id;     /* 4: path the packet travels on */
	uint16_t path_gen;    /* 6: that path's generation */
	uint32_t dst_conn_id; /* 8: receiver's connection id (0 only in CONNECT) */
	uint32_t src_conn_id; /* 12: sender's connection id (0 only in REJECT) */
	uint64_t token;       /* 16: receiver's token; 0 only where SPEC.md allows */
	uint32_t psn;         /* 24: per-path sequence number (data), else 0 */
} mrp_hdr;

/* Data packets: WRITE, WRITE_IMM, SEND, SEND_IMM, READ_REQ, READ_RESP. A
 * READ_REQ has no payload: msg_len is the length to read (SPEC 5.8). */
typedef struct mrp_data {
	uint16_t stream_id;   /* 28 */
	uint16_t payload_len; /* 30: bytes of payload after the 72-byte header */
	uint32_t msn;         /* 32: message sequence number in the stream */
	uint32_t offset;      /* 36: byte offset of the payload in the message */
	uint32_t msg_len;     /* 40: total message length */
	uint32_t recv_idx;    /* 44: SEND*, WRITE_IMM: posted receive index */
	uint64_t ts_ns;       /* 48: sender timestamp, echoed in ACKs */
	uint64_t remote_addr; /* 56: WRITE*: target address of the message */
	uint32_t rkey;        /* 64: WRITE*: key of the target region */
	uint32_t imm;         /* 68: *_IMM: immediate data */
	const uint8_t *payload; /* decode: points into the buffer; encode: source */
} mrp_data;

typedef struct mrp_ack {
	uint16_t acked_path_id;  /* 28 */
	uint16_t acked_path_gen; /* 30 */
	uint32_t next_psn;       /* 32: highest PSN received + 1 */
	uint8_t sack[MRP_SACK_BYTES]; /* 36: bit i set: PSN next_psn - 1 - i received */
	uint32_t ce_count;       /* 68: CE-marked packets received on the path */
	uint32_t rcv_count;      /* 72: packets received on the path */
	uint32_t ack_delay_ns;   /* 76: time the receiver held the ACK */
	uint64_t ts_echo_ns;     /* 80: ts_ns of the packet that triggered it */
	uint32_t rate_hint_mbps; /* 88: share allotted to this sender; 0 = none */
} mrp_ack;

typedef struct mrp_nak {
	uint8_t reason;          /* 28: MRP_NAK_* */
	/* 29: reserved, zero */
	uint16_t stream_id;      /* 30 */
	uint32_t msn;            /* 32 */
	uint32_t offset;         /* 36 */
	uint16_t nak_path_id;    /* 40: path of the rejected packet */
	uint16_t nak_path_gen;   /* 42 */
	uint32_t nak_psn;        /* 44 */
	uint32_t retry_after_us; /* 48: RNR only: when to retry; 0 = sender's default */
	uint64_t token_echo;     /* 52: UNKNOWN_CONN only: token the packet carried */
} mrp_nak;

typedef struct mrp_probe {
	uint32_t probe_seq; /* 28 */
	/* 32: reserved, 4 bytes, zero */
	uint64_t ts_ns;     /* 36 */
} mrp_probe;

typedef struct mrp_probe_ack {
	uint16_t probed_path_id;  /* 28 */
	uint16_t probed_path_gen; /* 30 */
	uint32_t probe_seq;       /* 32 */
	uint32_t ack_delay_ns;    /* 36 */
	uint64_t ts_echo_ns;      /* 40 */
	uint32_t grant_mbps;      /* 48: only with MRP_F_GRANT (the packet is then
				   * 52 bytes): rate the receiver grants, Mbit/s */
} mrp_probe_ack;

/* One plane address of the sender of a CONNECT or ACCEPT. */
typedef struct mrp_addr {
	uint8_t family;   /* 4 or 6 */
	uint8_t plane;    /* sender's plane index, < MRP_MAX_ADDRS */
	/* 2 bytes reserved, zero */
	uint8_t addr[16]; /* IPv4 in the first 4 bytes, the rest zero */
} mrp_addr;

/* CONNECT and ACCEPT share this body. */
typedef struct mrp_hs {
	uint8_t min_version;   /* 28 */
	uint8_t max_version;   /* 29: in ACCEPT, min == max == the chosen one */
	uint16_t mtu;          /* 30: payload bytes per packet */
	uint32_t service_id;   /* 32 */
	uint64_t hs_token;     /* 36: token the peer must put in packets to us */
	uint64_t instance_id;  /* 44: sender's daemon instance (changes on restart) */
	uint64_t caps;         /* 52: MRP_CAP_* */
	uint16_t max_streams;  /* 60: >= 1 */
	uint16_t max_paths;    /* 62: >= 1 */
	uint16_t service_port; /* 64: UDP port the sender receives on */
	uint8_t num_addrs;     /* 66: 1..MRP_MAX_ADDRS */
	uint8_t admit;         /* 67: ACCEPT: the initiator's first-round-trip
				* admission (MRP_ADMIT_*, SPEC 6.6); CONNECT: 0 */
	mrp_addr addrs[MRP_MAX_ADDRS]; /* 68: num_addrs * 20 bytes */
} mrp_hs;

typedef struct mrp_reject {
	uint8_t reason;      /* 28: MRP_REJ_* */
	uint8_t min_version; /* 29: versions the rejecting side speaks */
	uint8_t max_version; /* 30 */
	/* 31: reserved, zero */
	uint32_t service_id; /* 32: as in the CONNECT */
} mrp_reject;

/* CLOSE and RESET. */
typedef struct mrp_close {
	uint16_t reason; /* 28: MRP_CLOSE_* */
	/* 30: reserved, 2 bytes, zero */
} mrp_close;

/* RETRY (SPEC 9.7): header dst_conn_id = the CONNECT's src_conn_id,
 * src_conn_id 0, token = the CONNECT's hs_token. */
typedef struct mrp_retry {
	uint64_t cookie;     /* 28: nonzero; the next CONNECT carries it as token */
	uint32_t service_id; /* 36: as in the CONNECT */
	/* 40: reserved, 4 bytes, zero */
} mrp_retry;

/* A decoded packet. */
typedef struct mrp_pkt {
	mrp_hdr hdr;
	union {
		mrp_data data;
		mrp_ack ack;
		mrp_nak nak;
		mrp_probe probe;
		mrp_probe_ack probe_ack;
		mrp_hs hs;
		mrp_reject reject;
		mrp_close close;
		mrp_retry retry;
	} u;
} mrp_pkt;

/* True for the packets with the data header and a PSN: WRITE, WRITE_IMM,
 * SEND, SEND_IMM, READ_REQ, READ_RESP. */
static inline int mrp_op_is_data(uint8_t op)
{
	return op >= MRP_OP_WRITE && op <= MRP_OP_READ_RESP;
}

/* True for READ_REQ and READ_RESP (capability READ). */
static inline int mrp_op_is_read(uint8_t op)
{
	return op == MRP_OP_READ_REQ || op == MRP_OP_READ_RESP;
}

/* Printable opcode name ("WRITE"), "UNKNOWN" for others. */
const char *mrp_op_name(uint8_t op);

/*
 * Decode one packet: a whole UDP payload of datalen bytes.
 * Returns datalen on success. For data packets pkt->u.data.payload points
 * into data. Errors (nothing in *pkt is meaningful after one):
 *   MRP_ERR_INVAL      pkt or data is NULL
 *   MRP_ERR_TRUNCATED  shorter than the header its opcode needs, or than
 *                      the address list num_addrs announces
 *   MRP_ERR_VERSION    version byte is not MRP_VERSION
 *   MRP_ERR_OPCODE     unknown opcode
 *   MRP_ERR_FLAGS      a flag not valid for the opcode, or FIRST/LAST
 *                      disagreeing with offset/length
 *   MRP_ERR_LENGTH     datagram length differs from the packet's length
 *                      (payload_len; longer than num_addrs announces) or
 *                      the payload does not fit in the message
 *   MRP_ERR_RANGE      a field outside its valid range (see SPEC.md)
 *   MRP_ERR_RESERVED   a reserved field or a field unused by the opcode is
 *                      not zero
 */
ssize_t mrp_pkt_decode(mrp_pkt *pkt, const uint8_t *data, size_t datalen);

/*
 * Decode only the 28-byte common header (the invariant part is bytes 0-15):
 * used to answer a CONNECT of an unknown version. Returns MRP_HDR_LEN or
 * MRP_ERR_INVAL / MRP_ERR_TRUNCATED. Checks no field.
 */
ssize_t mrp_hdr_decode(mrp_hdr *hdr, const uint8_t *data, size_t datalen);

/*
 * Encode a packet into buf. Data packets copy payload_len bytes from
 * pkt->u.data.payload after the header (payload may be NULL only when
 * payload_len is 0). Returns the packet's length, or
 *   MRP_ERR_INVAL  a field the decoder would reject (same rules)
 *   MRP_ERR_NOBUF  buflen is smaller than the packet
 */
ssize_t mrp_pkt_encode(uint8_t *buf, size_t buflen, const mrp_pkt *pkt);

/*
 * Hot path: write only the 72-byte header of a data packet; the caller places
 * payload_len bytes of payload right after it. Same checks and returns as
 * mrp_pkt_encode (returns MRP_DATA_HDR_LEN on success).
 */
ssize_t mrp_data_hdr_encode(uint8_t *buf, size_t buflen, const mrp_hdr *hdr,
			    const mrp_data *data);

/* Length the encoded packet will have, or MRP_ERR_OPCODE (MRP_ERR_INVAL if
 * pkt is NULL). */
ssize_t mrp_pkt_len(const mrp_pkt *pkt);

#endif
