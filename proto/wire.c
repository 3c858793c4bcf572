/*
 * MetaRoCE wire format, version 1: decode, validate, encode.
 *
 * The byte layout is in wire.h (offsets in the comments are the ones used
 * below), the rules in proto/SPEC.md. Every rule lives in one place, the
 * check_*() functions, which work on a parsed mrp_pkt: decoding parses the
 * fields and then checks them; encoding checks them and then writes. The
 * order of the checks is part of the contract (the first failing rule gives
 * the code), so the functions follow the order of the rules.
 *
 * Reserved bytes have no field in mrp_pkt. The decoder checks them in the
 * buffer (the "raw" argument of the checks); the encoder writes them as zero
 * and passes raw == NULL.
 */
#include <string.h>

#include "wire.h"

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static int all_zero(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Whether the packet being decoded has a nonzero byte in [off, off + len). */
static int rsv_set(const uint8_t *raw, size_t off, size_t len)
{
	return raw && !all_zero(raw + off, len);
}

const char *mrp_op_name(uint8_t op)
{
	switch (op) {
	case MRP_OP_WRITE:
		return "WRITE";
	case MRP_OP_WRITE_IMM:
		return "WRITE_IMM";
	case MRP_OP_SEND:
		return "SEND";
	case MRP_OP_SEND_IMM:
		return "SEND_IMM";
	case MRP_OP_READ_REQ:
		return "READ_REQ";
	case MRP_OP_READ_RESP:
		return "READ_RESP";
	case MRP_OP_ACK:
		return "ACK";
	case MRP_OP_NAK:
		return "NAK";
	case MRP_OP_PROBE:
		return "PROBE";
	case MRP_OP_PROBE_ACK:
		return "PROBE_ACK";
	case MRP_OP_CONNECT:
		return "CONNECT";
	case MRP_OP_ACCEPT:
		return "ACCEPT";
	case MRP_OP_REJECT:
		return "REJECT";
	case MRP_OP_CLOSE:
		return "CLOSE";
	case MRP_OP_RESET:
		return "RESET";
	case MRP_OP_RETRY:
		return "RETRY";
	}
	return "UNKNOWN";
}

/* Fixed length of the opcode's packet (the whole packet but for the payload
 * or the address list), or MRP_ERR_OPCODE for unknown and reserved ones. */
static ssize_t fixed_len(uint8_t op)
{
	switch (op) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM:
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP:
		return MRP_DATA_HDR_LEN;
	case MRP_OP_ACK:
		return MRP_ACK_LEN;
	case MRP_OP_NAK:
		return MRP_NAK_LEN;
	case MRP_OP_PROBE:
		return MRP_PROBE_LEN;
	case MRP_OP_PROBE_ACK:
		return MRP_PROBE_ACK_LEN;
	case MRP_OP_CONNECT:
	case MRP_OP_ACCEPT:
		return MRP_HS_FIXED_LEN;
	case MRP_OP_REJECT:
		return MRP_REJECT_LEN;
	case MRP_OP_CLOSE:
	case MRP_OP_RESET:
		return MRP_CLOSE_LEN;
	case MRP_OP_RETRY:
		return MRP_RETRY_LEN;
	}
	return MRP_ERR_OPCODE;
}

/* 2^(r/8) for r = 0..7, times 2^20, rounded down */
static const uint32_t admit_frac[8] = { 1048576, 1143480, 1246974, 1359834,
					 1482910, 1617125, 1763487, 1923096 };

uint64_t mrp_admit_bytes(uint8_t admit)
{
	unsigned q, r;

	if (admit == 0)
		return 0;
	q = (unsigned)(admit - 1) / 8;
	r = (unsigned)(admit - 1) % 8;
	/* 4096 * 2^q * frac / 2^20: at most 2^12 * 2^31 * 2^21 / 2^20, no overflow */
	return ((uint64_t)4096 << q) * admit_frac[r] >> 20;
}

uint8_t mrp_admit_code(uint64_t bytes)
{
	unsigned k = 0;

	while (k < 255 && mrp_admit_bytes((uint8_t)(k + 1)) <= bytes)
		k++;
	return (uint8_t)k;
}

ssize_t mrp_pkt_len(const mrp_pkt *pkt)
{
	ssize_t len;

	if (!pkt)
		return MRP_ERR_INVAL;
	len = fixed_len(pkt->hdr.opcode);
	if (len < 0)
		return len;
	if (mrp_op_is_data(pkt->hdr.opcode))
		return len + pkt->u.data.payload_len;
	if (pkt->hdr.opcode == MRP_OP_CONNECT || pkt->hdr.opcode == MRP_OP_ACCEPT)
		return len + MRP_HS_ADDR_LEN * pkt->u.hs.num_addrs;
	if (pkt->hdr.opcode == MRP_OP_PROBE_ACK && (pkt->hdr.flags & MRP_F_GRANT))
		return MRP_PROBE_ACK_GRANT_LEN;
	return len;
}

/* ---- validation: one function per group of rules, in SPEC.md's order ---- */

enum { TOKEN_ZERO, TOKEN_NONZERO, TOKEN_ANY };

/* Version, then opcode. */
static int check_version_op(const mrp_hdr *hdr)
{
	if (hdr->version != MRP_VERSION)
		return MRP_ERR_VERSION;
	if (fixed_len(hdr->opcode) < 0)
		return MRP_ERR_OPCODE;
	return 0;
}

static uint16_t allowed_flags(uint8_t op)
{
	if (mrp_op_is_data(op))
		return MRP_F_FIRST | MRP_F_LAST | MRP_F_RETX | MRP_F_ACK_REQ | MRP_F_HELD |
		       MRP_F_GRANT;
	if (op == MRP_OP_PROBE)
		return MRP_F_ACK_REQ | MRP_F_GRANT;
	if (op == MRP_OP_PROBE_ACK)
		return MRP_F_GRANT;
	if (op == MRP_OP_CLOSE)
		return MRP_F_REPLY;
	return 0;
}

/* Flags, then the common header's fields. token says what the token must be,
 * which depends on the opcode and, for NAK and REJECT, on the reason. */
static int check_hdr(const mrp_hdr *hdr, int token)
{
	uint8_t op = hdr->opcode;
	/* CONNECT and after are per connection, not per path. */
	int per_path = op < MRP_OP_CONNECT;

	if (hdr->flags & ~allowed_flags(op))
		return MRP_ERR_FLAGS;
	if ((hdr->dst_conn_id == 0) != (op == MRP_OP_CONNECT))
		return MRP_ERR_RANGE;
	if ((hdr->src_conn_id == 0) != (op == MRP_OP_REJECT || op == MRP_OP_RETRY))
		return MRP_ERR_RANGE;
	if ((token == TOKEN_ZERO && hdr->token != 0) ||
	    (token == TOKEN_NONZERO && hdr->token == 0))
		return MRP_ERR_RANGE;
	if (!mrp_op_is_data(op) && hdr->psn != 0)
		return MRP_ERR_RESERVED;
	if (!per_path && (hdr->path_id != 0 || hdr->path_gen != 0))
		return MRP_ERR_RESERVED;
	return 0;
}

/* Flags, common header, then the data packet's rules. pktlen is the
 * datagram's length. */
static int check_data(const mrp_hdr *hdr, const mrp_data *d, size_t pktlen)
{
	uint8_t op = hdr->opcode;
	int is_read = op == MRP_OP_READ_REQ || op == MRP_OP_READ_RESP;
	/* tagged: remote_addr and rkey name memory of the receiver (WRITE*)
	 * or of the responder (READ_*) */
	int is_tagged = op == MRP_OP_WRITE || op == MRP_OP_WRITE_IMM || is_read;
	int is_imm = op == MRP_OP_WRITE_IMM || op == MRP_OP_SEND_IMM;
	uint64_t end = (uint64_t)d->offset + d->payload_len;
	int rv;

	rv = check_hdr(hdr, TOKEN_NONZERO);
	if (rv != 0)
		return rv;
	if (pktlen != MRP_DATA_HDR_LEN + (size_t)d->payload_len)
		return MRP_ERR_LENGTH;
	if (d->payload_len > MRP_MTU_MAX || d->msg_len > MRP_MSG_MAX)
		return MRP_ERR_RANGE;
	if (op == MRP_OP_READ_REQ) {
		/* one packet without payload; msg_len is the length to read
		 * (SPEC 5.8.1) */
		if (d->payload_len != 0 || d->offset != 0)
			return MRP_ERR_LENGTH;
		if ((hdr->flags & (MRP_F_FIRST | MRP_F_LAST)) != (MRP_F_FIRST | MRP_F_LAST))
			return MRP_ERR_FLAGS;
	} else {
		if (end > d->msg_len || (d->payload_len == 0 && d->msg_len != 0))
			return MRP_ERR_LENGTH;
		if (!(hdr->flags & MRP_F_FIRST) != (d->offset != 0) ||
		    !(hdr->flags & MRP_F_LAST) != (end != d->msg_len))
			return MRP_ERR_FLAGS;
	}
	/* remote_addr + msg_len <= 2^64, written so that nothing wraps */
	if (is_tagged && d->msg_len != 0 &&
	    d->remote_addr > UINT64_MAX - (d->msg_len - 1))
		return MRP_ERR_RANGE;
	if (!is_tagged && (d->remote_addr != 0 || d->rkey != 0))
		return MRP_ERR_RESERVED;
	if (!is_imm && d->imm != 0)
		return MRP_ERR_RESERVED;
	if ((op == MRP_OP_WRITE || is_read) && d->recv_idx != 0)
		return MRP_ERR_RESERVED;
	return 0;
}

/* CONNECT and ACCEPT, after the common header. */
static int check_hs(uint8_t op, const mrp_hs *hs, const uint8_t *raw,
		    size_t pktlen)
{
	size_t len, i;

	if (hs->min_version == 0 || hs->min_version > hs->max_version ||
	    (op == MRP_OP_ACCEPT && hs->min_version != hs->max_version))
		return MRP_ERR_RANGE;
	if (hs->mtu < MRP_MTU_MIN || hs->mtu > MRP_MTU_MAX || hs->hs_token == 0 ||
	    hs->max_streams == 0 || hs->max_paths == 0 || hs->service_port == 0 ||
	    hs->num_addrs == 0 || hs->num_addrs > MRP_MAX_ADDRS)
		return MRP_ERR_RANGE;
	if (op == MRP_OP_CONNECT && hs->admit != 0)
		return MRP_ERR_RESERVED; /* (in ACCEPT: admit, SPEC 6.6) */
	len = MRP_HS_FIXED_LEN + MRP_HS_ADDR_LEN * (size_t)hs->num_addrs;
	if (pktlen < len)
		return MRP_ERR_TRUNCATED;
	if (pktlen > len)
		return MRP_ERR_LENGTH;
	for (i = 0; i < hs->num_addrs; i++) {
		const mrp_addr *a = &hs->addrs[i];

		if ((a->family != 4 && a->family != 6) || a->plane >= MRP_MAX_ADDRS)
			return MRP_ERR_RANGE;
		if (rsv_set(raw, MRP_HS_FIXED_LEN + MRP_HS_ADDR_LEN * i + 2, 2))
			return MRP_ERR_RESERVED;
		if (a->family == 4 && !all_zero(a->addr + 4, 12))
			return MRP_ERR_RESERVED;
	}
	return 0;
}

/*
 * Everything after the version, the opcode and the fixed length, which come
 * first: the opcode is known and raw, if given, holds at least the opcode's
 * fixed length. pktlen is the datagram's length, raw the datagram when
 * decoding, NULL when encoding.
 */
static int check_pkt(const mrp_pkt *pkt, const uint8_t *raw, size_t pktlen)
{
	uint8_t op = pkt->hdr.opcode;
	int token = TOKEN_NONZERO;
	int rv;

	if (mrp_op_is_data(op))
		return check_data(&pkt->hdr, &pkt->u.data, pktlen);

	if (op == MRP_OP_NAK && pkt->u.nak.reason == MRP_NAK_UNKNOWN_CONN)
		token = TOKEN_ZERO;
	else if (op == MRP_OP_REJECT && pkt->u.reject.reason == MRP_REJ_VERSION)
		token = TOKEN_ANY;
	else if (op == MRP_OP_CONNECT)
		token = TOKEN_ANY; /* 0, or the cookie of a RETRY (SPEC 9.7) */
	rv = check_hdr(&pkt->hdr, token);
	if (rv != 0)
		return rv;

	if (op == MRP_OP_CONNECT || op == MRP_OP_ACCEPT)
		return check_hs(op, &pkt->u.hs, raw, pktlen);
	if (op == MRP_OP_PROBE_ACK && (pkt->hdr.flags & MRP_F_GRANT)) {
		if (pktlen != MRP_PROBE_ACK_GRANT_LEN)
			return MRP_ERR_LENGTH;
	} else if (pktlen != (size_t)fixed_len(op)) {
		return MRP_ERR_LENGTH;
	}

	switch (op) {
	case MRP_OP_NAK: {
		const mrp_nak *n = &pkt->u.nak;

		if (n->reason < 1 || n->reason > MRP_NAK_MAX)
			return MRP_ERR_RANGE;
		if (rsv_set(raw, 29, 1))
			return MRP_ERR_RESERVED;
		if ((n->token_echo != 0) != (n->reason == MRP_NAK_UNKNOWN_CONN))
			return MRP_ERR_RANGE;
		if (n->retry_after_us != 0 && n->reason != MRP_NAK_RNR)
			return MRP_ERR_RESERVED;
		break;
	}
	case MRP_OP_PROBE:
		if (rsv_set(raw, 32, 4))
			return MRP_ERR_RESERVED;
		break;
	case MRP_OP_REJECT: {
		const mrp_reject *r = &pkt->u.reject;

		if (r->reason < 1 || r->reason > MRP_REJ_MAX ||
		    r->min_version == 0 || r->min_version > r->max_version)
			return MRP_ERR_RANGE;
		if (rsv_set(raw, 31, 1))
			return MRP_ERR_RESERVED;
		break;
	}
	case MRP_OP_CLOSE:
	case MRP_OP_RESET:
		if (pkt->u.close.reason > MRP_CLOSE_MAX)
			return MRP_ERR_RANGE;
		if (rsv_set(raw, 30, 2))
			return MRP_ERR_RESERVED;
		break;
	case MRP_OP_RETRY:
		if (pkt->u.retry.cookie == 0)
			return MRP_ERR_RANGE;
		if (rsv_set(raw, 40, 4))
			return MRP_ERR_RESERVED;
		break;
	default: /* ACK, PROBE_ACK: every value is legal */
		break;
	}
	return 0;
}

/* ---- decode ---- */

ssize_t mrp_hdr_decode(mrp_hdr *hdr, const uint8_t *data, size_t datalen)
{
	if (!hdr || !data)
		return MRP_ERR_INVAL;
	if (datalen < MRP_HDR_LEN)
		return MRP_ERR_TRUNCATED;
	hdr->version = data[0];
	hdr->opcode = data[1];
	hdr->flags = get16(data + 2);
	hdr->path_id = get16(data + 4);
	hdr->path_gen = get16(data + 6);
	hdr->dst_conn_id = get32(data + 8);
	hdr->src_conn_id = get32(data + 12);
	hdr->token = get64(data + 16);
	hdr->psn = get32(data + 24);
	return MRP_HDR_LEN;
}

static void decode_data(mrp_data *d, const uint8_t *p)
{
	d->stream_id = get16(p + 28);
	d->payload_len = get16(p + 30);
	d->msn = get32(p + 32);
	d->offset = get32(p + 36);
	d->msg_len = get32(p + 40);
	d->recv_idx = get32(p + 44);
	d->ts_ns = get64(p + 48);
	d->remote_addr = get64(p + 56);
	d->rkey = get32(p + 64);
	d->imm = get32(p + 68);
	d->payload = p + MRP_DATA_HDR_LEN;
}

/* Parses the addresses that are both announced and present; whether the
 * announced number is valid and present is for check_hs() to say. */
static void decode_hs(mrp_hs *hs, const uint8_t *p, size_t datalen)
{
	size_t n, i;

	memset(hs, 0, sizeof(*hs));
	hs->min_version = p[28];
	hs->max_version = p[29];
	hs->mtu = get16(p + 30);
	hs->service_id = get32(p + 32);
	hs->hs_token = get64(p + 36);
	hs->instance_id = get64(p + 44);
	hs->caps = get64(p + 52);
	hs->max_streams = get16(p + 60);
	hs->max_paths = get16(p + 62);
	hs->service_port = get16(p + 64);
	hs->num_addrs = p[66];
	hs->admit = p[67];

	n = (datalen - MRP_HS_FIXED_LEN) / MRP_HS_ADDR_LEN;
	if (n > hs->num_addrs)
		n = hs->num_addrs;
	if (n > MRP_MAX_ADDRS)
		n = MRP_MAX_ADDRS;
	for (i = 0; i < n; i++) {
		const uint8_t *a = p + MRP_HS_FIXED_LEN + MRP_HS_ADDR_LEN * i;

		hs->addrs[i].family = a[0];
		hs->addrs[i].plane = a[1];
		memcpy(hs->addrs[i].addr, a + 4, sizeof(hs->addrs[i].addr));
	}
}

/* Parses the body; datalen is at least the opcode's fixed length. */
static void decode_body(mrp_pkt *pkt, const uint8_t *p, size_t datalen)
{
	switch (pkt->hdr.opcode) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM:
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP:
		decode_data(&pkt->u.data, p);
		break;
	case MRP_OP_ACK: {
		mrp_ack *a = &pkt->u.ack;

		a->acked_path_id = get16(p + 28);
		a->acked_path_gen = get16(p + 30);
		a->next_psn = get32(p + 32);
		memcpy(a->sack, p + 36, MRP_SACK_BYTES);
		a->ce_count = get32(p + 68);
		a->rcv_count = get32(p + 72);
		a->ack_delay_ns = get32(p + 76);
		a->ts_echo_ns = get64(p + 80);
		a->rate_hint_mbps = get32(p + 88);
		break;
	}
	case MRP_OP_NAK: {
		mrp_nak *n = &pkt->u.nak;

		n->reason = p[28];
		n->stream_id = get16(p + 30);
		n->msn = get32(p + 32);
		n->offset = get32(p + 36);
		n->nak_path_id = get16(p + 40);
		n->nak_path_gen = get16(p + 42);
		n->nak_psn = get32(p + 44);
		n->retry_after_us = get32(p + 48);
		n->token_echo = get64(p + 52);
		break;
	}
	case MRP_OP_PROBE:
		pkt->u.probe.probe_seq = get32(p + 28);
		pkt->u.probe.ts_ns = get64(p + 36);
		break;
	case MRP_OP_PROBE_ACK: {
		mrp_probe_ack *a = &pkt->u.probe_ack;

		a->probed_path_id = get16(p + 28);
		a->probed_path_gen = get16(p + 30);
		a->probe_seq = get32(p + 32);
		a->ack_delay_ns = get32(p + 36);
		a->ts_echo_ns = get64(p + 40);
		a->grant_mbps = 0;
		if ((pkt->hdr.flags & MRP_F_GRANT) && datalen >= MRP_PROBE_ACK_GRANT_LEN)
			a->grant_mbps = get32(p + 48);
		break;
	}
	case MRP_OP_CONNECT:
	case MRP_OP_ACCEPT:
		decode_hs(&pkt->u.hs, p, datalen);
		break;
	case MRP_OP_REJECT:
		pkt->u.reject.reason = p[28];
		pkt->u.reject.min_version = p[29];
		pkt->u.reject.max_version = p[30];
		pkt->u.reject.service_id = get32(p + 32);
		break;
	case MRP_OP_CLOSE:
	case MRP_OP_RESET:
		pkt->u.close.reason = get16(p + 28);
		break;
	case MRP_OP_RETRY:
		pkt->u.retry.cookie = get64(p + 28);
		pkt->u.retry.service_id = get32(p + 36);
		break;
	}
}

ssize_t mrp_pkt_decode(mrp_pkt *pkt, const uint8_t *data, size_t datalen)
{
	ssize_t rv;

	if (!pkt || !data)
		return MRP_ERR_INVAL;
	rv = mrp_hdr_decode(&pkt->hdr, data, datalen);
	if (rv < 0)
		return rv;
	rv = check_version_op(&pkt->hdr);
	if (rv != 0)
		return rv;
	if (datalen < (size_t)fixed_len(pkt->hdr.opcode))
		return MRP_ERR_TRUNCATED;
	decode_body(pkt, data, datalen);
	rv = check_pkt(pkt, data, datalen);
	if (rv != 0)
		return rv;
	/* valid packets are at most MRP_DATA_HDR_LEN + MRP_MTU_MAX bytes */
	return (ssize_t)datalen;
}

/* ---- encode ---- */

static void encode_hdr(uint8_t *p, const mrp_hdr *hdr)
{
	p[0] = hdr->version;
	p[1] = hdr->opcode;
	put16(p + 2, hdr->flags);
	put16(p + 4, hdr->path_id);
	put16(p + 6, hdr->path_gen);
	put32(p + 8, hdr->dst_conn_id);
	put32(p + 12, hdr->src_conn_id);
	put64(p + 16, hdr->token);
	put32(p + 24, hdr->psn);
}

static void encode_data(uint8_t *p, const mrp_data *d)
{
	put16(p + 28, d->stream_id);
	put16(p + 30, d->payload_len);
	put32(p + 32, d->msn);
	put32(p + 36, d->offset);
	put32(p + 40, d->msg_len);
	put32(p + 44, d->recv_idx);
	put64(p + 48, d->ts_ns);
	put64(p + 56, d->remote_addr);
	put32(p + 64, d->rkey);
	put32(p + 68, d->imm);
}

static void encode_hs(uint8_t *p, const mrp_hs *hs)
{
	size_t i;

	p[28] = hs->min_version;
	p[29] = hs->max_version;
	put16(p + 30, hs->mtu);
	put32(p + 32, hs->service_id);
	put64(p + 36, hs->hs_token);
	put64(p + 44, hs->instance_id);
	put64(p + 52, hs->caps);
	put16(p + 60, hs->max_streams);
	put16(p + 62, hs->max_paths);
	put16(p + 64, hs->service_port);
	p[66] = hs->num_addrs;
	p[67] = hs->admit; /* 0 in a CONNECT (check_hs()) */
	for (i = 0; i < hs->num_addrs; i++) {
		uint8_t *a = p + MRP_HS_FIXED_LEN + MRP_HS_ADDR_LEN * i;

		a[0] = hs->addrs[i].family;
		a[1] = hs->addrs[i].plane;
		put16(a + 2, 0);
		memcpy(a + 4, hs->addrs[i].addr, sizeof(hs->addrs[i].addr));
	}
}

/* Writes everything after the common header of a valid packet. */
static void encode_body(uint8_t *p, const mrp_pkt *pkt)
{
	switch (pkt->hdr.opcode) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM:
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP:
		encode_data(p, &pkt->u.data);
		if (pkt->u.data.payload_len != 0)
			memcpy(p + MRP_DATA_HDR_LEN, pkt->u.data.payload,
			       pkt->u.data.payload_len);
		break;
	case MRP_OP_ACK: {
		const mrp_ack *a = &pkt->u.ack;

		put16(p + 28, a->acked_path_id);
		put16(p + 30, a->acked_path_gen);
		put32(p + 32, a->next_psn);
		memcpy(p + 36, a->sack, MRP_SACK_BYTES);
		put32(p + 68, a->ce_count);
		put32(p + 72, a->rcv_count);
		put32(p + 76, a->ack_delay_ns);
		put64(p + 80, a->ts_echo_ns);
		put32(p + 88, a->rate_hint_mbps);
		break;
	}
	case MRP_OP_NAK: {
		const mrp_nak *n = &pkt->u.nak;

		p[28] = n->reason;
		p[29] = 0;
		put16(p + 30, n->stream_id);
		put32(p + 32, n->msn);
		put32(p + 36, n->offset);
		put16(p + 40, n->nak_path_id);
		put16(p + 42, n->nak_path_gen);
		put32(p + 44, n->nak_psn);
		put32(p + 48, n->retry_after_us);
		put64(p + 52, n->token_echo);
		break;
	}
	case MRP_OP_PROBE:
		put32(p + 28, pkt->u.probe.probe_seq);
		put32(p + 32, 0);
		put64(p + 36, pkt->u.probe.ts_ns);
		break;
	case MRP_OP_PROBE_ACK: {
		const mrp_probe_ack *a = &pkt->u.probe_ack;

		put16(p + 28, a->probed_path_id);
		put16(p + 30, a->probed_path_gen);
		put32(p + 32, a->probe_seq);
		put32(p + 36, a->ack_delay_ns);
		put64(p + 40, a->ts_echo_ns);
		if (pkt->hdr.flags & MRP_F_GRANT)
			put32(p + 48, a->grant_mbps);
		break;
	}
	case MRP_OP_CONNECT:
	case MRP_OP_ACCEPT:
		encode_hs(p, &pkt->u.hs);
		break;
	case MRP_OP_REJECT:
		p[28] = pkt->u.reject.reason;
		p[29] = pkt->u.reject.min_version;
		p[30] = pkt->u.reject.max_version;
		p[31] = 0;
		put32(p + 32, pkt->u.reject.service_id);
		break;
	case MRP_OP_CLOSE:
	case MRP_OP_RESET:
		put16(p + 28, pkt->u.close.reason);
		put16(p + 30, 0);
		break;
	case MRP_OP_RETRY:
		put64(p + 28, pkt->u.retry.cookie);
		put32(p + 36, pkt->u.retry.service_id);
		put32(p + 40, 0);
		break;
	}
}

ssize_t mrp_pkt_encode(uint8_t *buf, size_t buflen, const mrp_pkt *pkt)
{
	ssize_t len;

	if (!buf || !pkt || check_version_op(&pkt->hdr) != 0)
		return MRP_ERR_INVAL;
	len = mrp_pkt_len(pkt);
	if (check_pkt(pkt, NULL, (size_t)len) != 0)
		return MRP_ERR_INVAL;
	if (mrp_op_is_data(pkt->hdr.opcode) && pkt->u.data.payload_len != 0 &&
	    !pkt->u.data.payload)
		return MRP_ERR_INVAL;
	if (buflen < (size_t)len)
		return MRP_ERR_NOBUF;
	encode_hdr(buf, &pkt->hdr);
	encode_body(buf, pkt);
	return len;
}

ssize_t mrp_data_hdr_encode(uint8_t *buf, size_t buflen, const mrp_hdr *hdr,
			    const mrp_data *data)
{
	if (!buf || !hdr || !data || check_version_op(hdr) != 0 ||
	    !mrp_op_is_data(hdr->opcode) ||
	    check_data(hdr, data, MRP_DATA_HDR_LEN + (size_t)data->payload_len) != 0)
		return MRP_ERR_INVAL;
	if (buflen < MRP_DATA_HDR_LEN)
		return MRP_ERR_NOBUF;
	encode_hdr(buf, hdr);
	encode_data(buf, data);
	return MRP_DATA_HDR_LEN;
}
