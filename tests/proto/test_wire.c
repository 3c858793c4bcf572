/*
 * Tests of the wire codec (proto/wire.c): round trips of every packet type,
 * byte-exact vectors (inline and the files in $MRP_TEST_DATA/wire), every
 * rejection path of the decoder with its exact code, and the encoder refusing
 * the same inputs.
 *
 * Invalid packets are made by raw_encode(), a second, unchecked writer of the
 * layout kept here on purpose: it writes whatever a mrp_pkt holds, so one
 * mutation of a valid packet gives both the bytes the decoder must reject and
 * the struct the encoder must refuse (see RULE()).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define MAX_PKT (MRP_DATA_HDR_LEN + MRP_MTU_MAX + 64)

static uint8_t payload[MRP_MTU_MAX + 64];

static const uint8_t all_ops[] = {
	MRP_OP_WRITE, MRP_OP_WRITE_IMM, MRP_OP_SEND, MRP_OP_SEND_IMM,
	MRP_OP_READ_REQ, MRP_OP_READ_RESP, MRP_OP_ACK, MRP_OP_NAK, MRP_OP_PROBE, MRP_OP_PROBE_ACK,
	MRP_OP_CONNECT, MRP_OP_ACCEPT, MRP_OP_REJECT, MRP_OP_CLOSE,
	MRP_OP_RESET, MRP_OP_RETRY,
};
#define NUM_OPS (sizeof(all_ops) / sizeof(all_ops[0]))

#define assert_rv(rv, expect)                                                   \
	do {                                                                    \
		ssize_t r_ = (rv), e_ = (expect);                               \
		if (r_ != e_)                                                   \
			fail_msg("%s:%d: got %zd (%s), expected %zd (%s)",      \
				 __FILE__, __LINE__, r_, mrp_err_name((int)r_), \
				 e_, mrp_err_name((int)e_));                    \
	} while (0)

/* ---- valid sample packets ---- */

/* Sets a data packet's position in its message and the FIRST/LAST flags
 * that go with it. */
static void set_data(mrp_pkt *p, uint32_t offset, uint16_t len, uint32_t msg_len)
{
	p->u.data.offset = offset;
	p->u.data.payload_len = len;
	p->u.data.msg_len = msg_len;
	p->hdr.flags &= (uint16_t)~(MRP_F_FIRST | MRP_F_LAST);
	if (offset == 0)
		p->hdr.flags |= MRP_F_FIRST;
	if ((uint64_t)offset + len == msg_len)
		p->hdr.flags |= MRP_F_LAST;
}

static void set_addrs(mrp_pkt *p, unsigned int n)
{
	unsigned int i, j;

	memset(p->u.hs.addrs, 0, sizeof(p->u.hs.addrs));
	p->u.hs.num_addrs = (uint8_t)n;
	for (i = 0; i < n && i < MRP_MAX_ADDRS; i++) {
		mrp_addr *a = &p->u.hs.addrs[i];

		a->plane = (uint8_t)(MRP_MAX_ADDRS - 1 - i);
		if (i % 2 == 0) {
			a->family = 4;
			a->addr[0] = 10;
			a->addr[1] = (uint8_t)(0x40 + i);
			a->addr[2] = 0x81;
			a->addr[3] = (uint8_t)(i + 1);
		} else {
			a->family = 6;
			for (j = 0; j < 16; j++)
				a->addr[j] = (uint8_t)(0xf0 ^ (j * 17 + i));
		}
	}
}

/* A valid packet of opcode op with distinctive values (for an unknown opcode,
 * only the header). */
static void sample(mrp_pkt *p, uint8_t op)
{
	int i;

	memset(p, 0, sizeof(*p));
	p->hdr.version = MRP_VERSION;
	p->hdr.opcode = op;
	if (op < MRP_OP_CONNECT) {
		p->hdr.path_id = 0x1234;
		p->hdr.path_gen = 0x5678;
	}
	p->hdr.dst_conn_id = op == MRP_OP_CONNECT ? 0 : 0x01020304;
	p->hdr.src_conn_id = op == MRP_OP_REJECT || op == MRP_OP_RETRY ? 0 : 0x05060708;
	p->hdr.token = op == MRP_OP_CONNECT ? 0 : 0x1112131415161718ull;

	switch (op) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM: {
		mrp_data *d = &p->u.data;
		int is_write = op == MRP_OP_WRITE || op == MRP_OP_WRITE_IMM;

		p->hdr.flags = MRP_F_RETX;
		p->hdr.psn = 0x21222324;
		set_data(p, 4096, 16, 4096 + 16);
		d->stream_id = 0x0102;
		d->msn = 0x0A0B0C0D;
		d->recv_idx = op == MRP_OP_WRITE ? 0 : 0x00090807;
		d->ts_ns = 0x3132333435363738ull;
		d->remote_addr = is_write ? 0x00007F0000001000ull : 0;
		d->rkey = is_write ? 0xABCDEF01 : 0;
		d->imm = op == MRP_OP_WRITE_IMM || op == MRP_OP_SEND_IMM ?
				 0xFEEDF00D : 0;
		d->payload = payload;
		break;
	}
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP: {
		mrp_data *d = &p->u.data;

		p->hdr.flags = MRP_F_RETX;
		p->hdr.psn = 0x21222324;
		if (op == MRP_OP_READ_REQ) {
			/* no payload: msg_len is the length to read */
			p->hdr.flags |= MRP_F_FIRST | MRP_F_LAST;
			d->msg_len = 4096 + 16;
		} else {
			set_data(p, 4096, 16, 4096 + 16);
		}
		d->stream_id = 0x0102;
		d->msn = 0x0A0B0C0D;
		d->ts_ns = 0x3132333435363738ull;
		d->remote_addr = 0x00007F0000001000ull;
		d->rkey = 0xABCDEF01;
		d->payload = payload;
		break;
	}
	case MRP_OP_ACK:
		p->u.ack.acked_path_id = 0x4142;
		p->u.ack.acked_path_gen = 0x4344;
		p->u.ack.next_psn = 0x45464748;
		for (i = 0; i < MRP_SACK_BYTES; i++)
			p->u.ack.sack[i] = (uint8_t)(0x80 | i);
		p->u.ack.ce_count = 0x494A4B4C;
		p->u.ack.rcv_count = 0x4D4E4F50;
		p->u.ack.ack_delay_ns = 0x51525354;
		p->u.ack.ts_echo_ns = 0x55565758595A5B5Cull;
		p->u.ack.rate_hint_mbps = 0x5D5E5F60;
		break;
	case MRP_OP_NAK:
		p->u.nak.reason = MRP_NAK_RNR;
		p->u.nak.stream_id = 0x6162;
		p->u.nak.msn = 0x63646566;
		p->u.nak.offset = 0x6768696A;
		p->u.nak.nak_path_id = 0x6B6C;
		p->u.nak.nak_path_gen = 0x6D6E;
		p->u.nak.nak_psn = 0x6F707172;
		p->u.nak.retry_after_us = 0x73747576;
		break;
	case MRP_OP_PROBE:
		p->hdr.flags = MRP_F_ACK_REQ;
		p->u.probe.probe_seq = 0x81828384;
		p->u.probe.ts_ns = 0x85868788898A8B8Cull;
		break;
	case MRP_OP_PROBE_ACK:
		p->u.probe_ack.probed_path_id = 0x9192;
		p->u.probe_ack.probed_path_gen = 0x9394;
		p->u.probe_ack.probe_seq = 0x95969798;
		p->u.probe_ack.ack_delay_ns = 0x999A9B9C;
		p->u.probe_ack.ts_echo_ns = 0x9D9E9FA0A1A2A3A4ull;
		break;
	case MRP_OP_CONNECT:
	case MRP_OP_ACCEPT:
		p->u.hs.min_version = 1;
		p->u.hs.max_version = op == MRP_OP_CONNECT ? 2 : 1;
		p->u.hs.mtu = 0x0F00;
		p->u.hs.service_id = 0xB1B2B3B4;
		p->u.hs.hs_token = 0xB5B6B7B8B9BABBBCull;
		p->u.hs.instance_id = 0xBDBEBFC0C1C2C3C4ull;
		p->u.hs.caps = MRP_CAP_KNOWN | 0x0102000000000000ull;
		p->u.hs.max_streams = 0xC5C6;
		p->u.hs.max_paths = 0xC7C8;
		p->u.hs.service_port = 0xC9CA;
		set_addrs(p, 2);
		break;
	case MRP_OP_REJECT:
		p->u.reject.reason = MRP_REJ_PARAM;
		p->u.reject.min_version = 1;
		p->u.reject.max_version = 3;
		p->u.reject.service_id = 0xD1D2D3D4;
		break;
	case MRP_OP_CLOSE:
		p->u.close.reason = MRP_CLOSE_APP_EXIT;
		break;
	case MRP_OP_RESET:
		p->u.close.reason = MRP_CLOSE_PROTOCOL;
		break;
	case MRP_OP_RETRY:
		p->u.retry.cookie = 0xE1E2E3E4E5E6E7E8ull;
		p->u.retry.service_id = 0x00C0FFEE;
		break;
	}
}

/* ---- an unchecked writer of the layout, independent of wire.c ---- */

static void w16(uint8_t *b, size_t off, uint16_t v)
{
	b[off] = (uint8_t)(v >> 8);
	b[off + 1] = (uint8_t)v;
}

static void w32(uint8_t *b, size_t off, uint32_t v)
{
	w16(b, off, (uint16_t)(v >> 16));
	w16(b, off + 2, (uint16_t)v);
}

static void w64(uint8_t *b, size_t off, uint64_t v)
{
	w32(b, off, (uint32_t)(v >> 32));
	w32(b, off + 4, (uint32_t)v);
}

/* Writes p as it is, valid or not; returns its length. b holds MAX_PKT. */
static size_t raw_encode(uint8_t *b, const mrp_pkt *p)
{
	const mrp_hdr *h = &p->hdr;
	size_t len = MRP_HDR_LEN, i, n;

	memset(b, 0, MAX_PKT);
	b[0] = h->version;
	b[1] = h->opcode;
	w16(b, 2, h->flags);
	w16(b, 4, h->path_id);
	w16(b, 6, h->path_gen);
	w32(b, 8, h->dst_conn_id);
	w32(b, 12, h->src_conn_id);
	w64(b, 16, h->token);
	w32(b, 24, h->psn);

	switch (h->opcode) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM:
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP: {
		const mrp_data *d = &p->u.data;

		w16(b, 28, d->stream_id);
		w16(b, 30, d->payload_len);
		w32(b, 32, d->msn);
		w32(b, 36, d->offset);
		w32(b, 40, d->msg_len);
		w32(b, 44, d->recv_idx);
		w64(b, 48, d->ts_ns);
		w64(b, 56, d->remote_addr);
		w32(b, 64, d->rkey);
		w32(b, 68, d->imm);
		if (d->payload_len)
			memcpy(b + 72, d->payload, d->payload_len);
		len = 72 + (size_t)d->payload_len;
		break;
	}
	case MRP_OP_ACK:
		w16(b, 28, p->u.ack.acked_path_id);
		w16(b, 30, p->u.ack.acked_path_gen);
		w32(b, 32, p->u.ack.next_psn);
		memcpy(b + 36, p->u.ack.sack, 32);
		w32(b, 68, p->u.ack.ce_count);
		w32(b, 72, p->u.ack.rcv_count);
		w32(b, 76, p->u.ack.ack_delay_ns);
		w64(b, 80, p->u.ack.ts_echo_ns);
		w32(b, 88, p->u.ack.rate_hint_mbps);
		len = 92;
		break;
	case MRP_OP_NAK:
		b[28] = p->u.nak.reason;
		w16(b, 30, p->u.nak.stream_id);
		w32(b, 32, p->u.nak.msn);
		w32(b, 36, p->u.nak.offset);
		w16(b, 40, p->u.nak.nak_path_id);
		w16(b, 42, p->u.nak.nak_path_gen);
		w32(b, 44, p->u.nak.nak_psn);
		w32(b, 48, p->u.nak.retry_after_us);
		w64(b, 52, p->u.nak.token_echo);
		len = 60;
		break;
	case MRP_OP_PROBE:
		w32(b, 28, p->u.probe.probe_seq);
		w64(b, 36, p->u.probe.ts_ns);
		len = 44;
		break;
	case MRP_OP_PROBE_ACK:
		w16(b, 28, p->u.probe_ack.probed_path_id);
		w16(b, 30, p->u.probe_ack.probed_path_gen);
		w32(b, 32, p->u.probe_ack.probe_seq);
		w32(b, 36, p->u.probe_ack.ack_delay_ns);
		w64(b, 40, p->u.probe_ack.ts_echo_ns);
		len = 48;
		if (h->flags & MRP_F_GRANT) { /* SPEC 6.6: grant_mbps follows */
			w32(b, 48, p->u.probe_ack.grant_mbps);
			len = 52;
		}
		break;
	case MRP_OP_CONNECT:
	case MRP_OP_ACCEPT:
		b[28] = p->u.hs.min_version;
		b[29] = p->u.hs.max_version;
		w16(b, 30, p->u.hs.mtu);
		w32(b, 32, p->u.hs.service_id);
		w64(b, 36, p->u.hs.hs_token);
		w64(b, 44, p->u.hs.instance_id);
		w64(b, 52, p->u.hs.caps);
		w16(b, 60, p->u.hs.max_streams);
		w16(b, 62, p->u.hs.max_paths);
		w16(b, 64, p->u.hs.service_port);
		b[66] = p->u.hs.num_addrs;
		b[67] = p->u.hs.admit;
		n = p->u.hs.num_addrs < MRP_MAX_ADDRS ? p->u.hs.num_addrs : MRP_MAX_ADDRS;
		for (i = 0; i < n; i++) {
			b[68 + 20 * i] = p->u.hs.addrs[i].family;
			b[69 + 20 * i] = p->u.hs.addrs[i].plane;
			memcpy(b + 72 + 20 * i, p->u.hs.addrs[i].addr, 16);
		}
		len = 68 + 20 * n;
		break;
	case MRP_OP_REJECT:
		b[28] = p->u.reject.reason;
		b[29] = p->u.reject.min_version;
		b[30] = p->u.reject.max_version;
		w32(b, 32, p->u.reject.service_id);
		len = 36;
		break;
	case MRP_OP_RETRY:
		w64(b, 28, p->u.retry.cookie);
		w32(b, 36, p->u.retry.service_id);
		len = 44;
		break;
	case MRP_OP_CLOSE:
	case MRP_OP_RESET:
		w16(b, 28, p->u.close.reason);
		len = 32;
		break;
	}
	return len;
}

/* ---- comparing packets field by field ---- */

#define EQ(f) assert_int_equal(a->f, b->f)

static void assert_pkt_equal(const mrp_pkt *a, const mrp_pkt *b)
{
	int i;

	EQ(hdr.version);
	EQ(hdr.opcode);
	EQ(hdr.flags);
	EQ(hdr.path_id);
	EQ(hdr.path_gen);
	EQ(hdr.dst_conn_id);
	EQ(hdr.src_conn_id);
	EQ(hdr.token);
	EQ(hdr.psn);
	switch (a->hdr.opcode) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM:
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP:
		EQ(u.data.stream_id);
		EQ(u.data.payload_len);
		EQ(u.data.msn);
		EQ(u.data.offset);
		EQ(u.data.msg_len);
		EQ(u.data.recv_idx);
		EQ(u.data.ts_ns);
		EQ(u.data.remote_addr);
		EQ(u.data.rkey);
		EQ(u.data.imm);
		if (a->u.data.payload_len)
			assert_memory_equal(a->u.data.payload, b->u.data.payload,
					    a->u.data.payload_len);
		break;
	case MRP_OP_ACK:
		EQ(u.ack.acked_path_id);
		EQ(u.ack.acked_path_gen);
		EQ(u.ack.next_psn);
		assert_memory_equal(a->u.ack.sack, b->u.ack.sack, MRP_SACK_BYTES);
		EQ(u.ack.ce_count);
		EQ(u.ack.rcv_count);
		EQ(u.ack.ack_delay_ns);
		EQ(u.ack.ts_echo_ns);
		EQ(u.ack.rate_hint_mbps);
		break;
	case MRP_OP_NAK:
		EQ(u.nak.reason);
		EQ(u.nak.stream_id);
		EQ(u.nak.msn);
		EQ(u.nak.offset);
		EQ(u.nak.nak_path_id);
		EQ(u.nak.nak_path_gen);
		EQ(u.nak.nak_psn);
		EQ(u.nak.retry_after_us);
		EQ(u.nak.token_echo);
		break;
	case MRP_OP_PROBE:
		EQ(u.probe.probe_seq);
		EQ(u.probe.ts_ns);
		break;
	case MRP_OP_PROBE_ACK:
		EQ(u.probe_ack.probed_path_id);
		EQ(u.probe_ack.probed_path_gen);
		EQ(u.probe_ack.probe_seq);
		EQ(u.probe_ack.ack_delay_ns);
		EQ(u.probe_ack.ts_echo_ns);
		if (a->hdr.flags & MRP_F_GRANT) /* (the field exists only then) */
			EQ(u.probe_ack.grant_mbps);
		break;
	case MRP_OP_CONNECT:
	case MRP_OP_ACCEPT:
		EQ(u.hs.min_version);
		EQ(u.hs.max_version);
		EQ(u.hs.mtu);
		EQ(u.hs.service_id);
		EQ(u.hs.hs_token);
		EQ(u.hs.instance_id);
		EQ(u.hs.caps);
		EQ(u.hs.max_streams);
		EQ(u.hs.max_paths);
		EQ(u.hs.service_port);
		EQ(u.hs.num_addrs);
		EQ(u.hs.admit);
		for (i = 0; i < a->u.hs.num_addrs; i++) {
			EQ(u.hs.addrs[i].family);
			EQ(u.hs.addrs[i].plane);
			assert_memory_equal(a->u.hs.addrs[i].addr,
					    b->u.hs.addrs[i].addr, 16);
		}
		break;
	case MRP_OP_REJECT:
		EQ(u.reject.reason);
		EQ(u.reject.min_version);
		EQ(u.reject.max_version);
		EQ(u.reject.service_id);
		break;
	case MRP_OP_RETRY:
		EQ(u.retry.cookie);
		EQ(u.retry.service_id);
		break;
	case MRP_OP_CLOSE:
	case MRP_OP_RESET:
		EQ(u.close.reason);
		break;
	default:
		fail_msg("unexpected opcode 0x%02x", a->hdr.opcode);
	}
}

#undef EQ

/* ---- checking one packet both ways ---- */

/* Decodes data as a heap block of exactly len bytes, so that the sanitizer
 * catches any read past it. */
static ssize_t decode_exact(mrp_pkt *out, const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	ssize_t rv;

	assert_non_null(copy);
	memcpy(copy, data, len);
	rv = mrp_pkt_decode(out, copy, len);
	if (rv >= 0 && mrp_op_is_data(out->hdr.opcode))
		out->u.data.payload = data + (out->u.data.payload - copy);
	free(copy);
	return rv;
}

/*
 * expect == 0: p is valid; encoding gives the independent writer's bytes,
 * decoding them gives p back, the length is mrp_pkt_len().
 * expect < 0: the decoder rejects p's bytes with expect, the encoders refuse p
 * with MRP_ERR_INVAL.
 */
static void check_pkt(const mrp_pkt *p, int expect, int line)
{
	static uint8_t raw[MAX_PKT], enc[MAX_PKT];
	size_t len = raw_encode(raw, p);
	mrp_pkt out;
	ssize_t rv;

	rv = decode_exact(&out, raw, len);
	if (rv != (expect ? expect : (ssize_t)len))
		fail_msg("line %d: %s: decode returned %zd (%s), expected %s", line,
			 mrp_op_name(p->hdr.opcode), rv, mrp_err_name((int)rv),
			 mrp_err_name(expect));
	rv = mrp_pkt_encode(enc, sizeof(enc), p);
	if (rv != (expect ? MRP_ERR_INVAL : (ssize_t)len))
		fail_msg("line %d: %s: encode returned %zd (%s)", line,
			 mrp_op_name(p->hdr.opcode), rv, mrp_err_name((int)rv));
	if (mrp_op_is_data(p->hdr.opcode)) {
		rv = mrp_data_hdr_encode(enc, sizeof(enc), &p->hdr, &p->u.data);
		if (rv != (expect ? MRP_ERR_INVAL : MRP_DATA_HDR_LEN))
			fail_msg("line %d: data_hdr_encode returned %zd (%s)",
				 line, rv, mrp_err_name((int)rv));
	}
	if (expect)
		return;
	assert_rv(mrp_pkt_len(p), (ssize_t)len);
	assert_rv(mrp_pkt_encode(enc, sizeof(enc), p), (ssize_t)len);
	assert_memory_equal(enc, raw, len);
	assert_pkt_equal(p, &out);
}

/* Checks p's bytes, with one byte changed, decode to expect. */
static void check_byte(const mrp_pkt *p, size_t off, uint8_t val, int expect,
		       int line)
{
	static uint8_t raw[MAX_PKT];
	size_t len = raw_encode(raw, p);
	mrp_pkt out;
	ssize_t rv;

	assert_true(off < len);
	raw[off] = val;
	rv = decode_exact(&out, raw, len);
	if (rv != (expect ? expect : (ssize_t)len))
		fail_msg("line %d: %s byte %zu = 0x%02x: decode returned %zd (%s), expected %s",
			 line, mrp_op_name(p->hdr.opcode), off, val, rv,
			 mrp_err_name((int)rv), mrp_err_name(expect));
}

/* A sample packet of opcode op, changed by the statements that follow (they
 * see it as p), must be rejected with err (VALID: must be accepted). */
#define RULE(op, err, ...)                                                      \
	do {                                                                    \
		mrp_pkt pkt_, *p = &pkt_;                                       \
		sample(p, (op));                                                \
		__VA_ARGS__;                                                    \
		check_pkt(p, (err), __LINE__);                                  \
	} while (0)
#define VALID(op, ...) RULE(op, 0, __VA_ARGS__)

/* The sample's bytes with the byte at off set to val (typically a reserved
 * byte, which has no field in mrp_pkt) must decode to err; BYTE_WITH changes
 * the sample first, as RULE does. */
#define BYTE_WITH(op, off, val, err, ...)                                       \
	do {                                                                    \
		mrp_pkt pkt_, *p = &pkt_;                                       \
		sample(p, (op));                                                \
		__VA_ARGS__;                                                    \
		check_byte(p, (off), (val), (err), __LINE__);                   \
	} while (0)
#define BYTE(op, off, val, err) BYTE_WITH(op, off, val, err, (void)p)

/* Every packet shape that the round-trip, truncation and buffer tests use. */
static size_t all_samples(mrp_pkt *out)
{
	size_t n = 0, i;
	static const uint16_t lens[] = { 1, 16, MRP_MTU_MAX };

	for (i = 0; i < NUM_OPS; i++)
		sample(&out[n++], all_ops[i]);
	for (i = 0; i < 4; i++) {
		size_t j;

		sample(&out[n], (uint8_t)(MRP_OP_WRITE + i));
		set_data(&out[n++], 0, 0, 0);
		for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			sample(&out[n], (uint8_t)(MRP_OP_WRITE + i));
			set_data(&out[n++], 0, lens[j], 1u << 20);
		}
	}
	for (i = 0; i < 2; i++) {
		sample(&out[n], i ? MRP_OP_ACCEPT : MRP_OP_CONNECT);
		set_addrs(&out[n++], 1);
		sample(&out[n], i ? MRP_OP_ACCEPT : MRP_OP_CONNECT);
		set_addrs(&out[n++], MRP_MAX_ADDRS);
	}
	return n;
}

#define MAX_SAMPLES 64

/* ---- tests ---- */

static void test_op_name(void **state)
{
	(void)state;
	assert_string_equal(mrp_op_name(MRP_OP_WRITE), "WRITE");
	assert_string_equal(mrp_op_name(MRP_OP_WRITE_IMM), "WRITE_IMM");
	assert_string_equal(mrp_op_name(MRP_OP_SEND), "SEND");
	assert_string_equal(mrp_op_name(MRP_OP_SEND_IMM), "SEND_IMM");
	assert_string_equal(mrp_op_name(MRP_OP_READ_REQ), "READ_REQ");
	assert_string_equal(mrp_op_name(MRP_OP_READ_RESP), "READ_RESP");
	assert_string_equal(mrp_op_name(MRP_OP_ACK), "ACK");
	assert_string_equal(mrp_op_name(MRP_OP_NAK), "NAK");
	assert_string_equal(mrp_op_name(MRP_OP_PROBE), "PROBE");
	assert_string_equal(mrp_op_name(MRP_OP_PROBE_ACK), "PROBE_ACK");
	assert_string_equal(mrp_op_name(MRP_OP_CONNECT), "CONNECT");
	assert_string_equal(mrp_op_name(MRP_OP_ACCEPT), "ACCEPT");
	assert_string_equal(mrp_op_name(MRP_OP_REJECT), "REJECT");
	assert_string_equal(mrp_op_name(MRP_OP_CLOSE), "CLOSE");
	assert_string_equal(mrp_op_name(MRP_OP_RESET), "RESET");
	assert_string_equal(mrp_op_name(0x00), "UNKNOWN");
	assert_string_equal(mrp_op_name(0x07), "UNKNOWN");
	assert_string_equal(mrp_op_name(0xff), "UNKNOWN");
}

static void test_roundtrip(void **state)
{
	static mrp_pkt s[MAX_SAMPLES];
	size_t n = all_samples(s), i;

	(void)state;
	for (i = 0; i < n; i++)
		check_pkt(&s[i], 0, __LINE__);
}

/* Encode, decode, compare: the decoder's view, with the payload pointer
 * into the buffer and a zero-length message. */
static void test_roundtrip_data(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt p, out;
	size_t i;

	(void)state;
	for (i = 0; i < 4; i++) {
		sample(&p, (uint8_t)(MRP_OP_WRITE + i));
		assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), 72 + 16);
		assert_rv(mrp_pkt_decode(&out, buf, 72 + 16), 72 + 16);
		assert_ptr_equal(out.u.data.payload, buf + 72);
		assert_pkt_equal(&p, &out);

		/* zero-length message; the payload pointer may be NULL */
		set_data(&p, 0, 0, 0);
		p.u.data.payload = NULL;
		assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), 72);
		assert_rv(mrp_pkt_decode(&out, buf, 72), 72);
		assert_int_equal(out.hdr.flags & (MRP_F_FIRST | MRP_F_LAST),
				 MRP_F_FIRST | MRP_F_LAST);
		assert_int_equal(out.u.data.payload_len, 0);
		assert_int_equal(out.u.data.msg_len, 0);
		assert_pkt_equal(&p, &out);
	}
}

static void test_roundtrip_hs(void **state)
{
	static const unsigned int counts[] = { 1, 2, 15, MRP_MAX_ADDRS };
	uint8_t buf[MAX_PKT];
	mrp_pkt p, out;
	size_t i, j;

	(void)state;
	for (i = 0; i < 2; i++) {
		for (j = 0; j < sizeof(counts) / sizeof(counts[0]); j++) {
			size_t len = MRP_HS_FIXED_LEN + MRP_HS_ADDR_LEN * counts[j];

			sample(&p, i ? MRP_OP_ACCEPT : MRP_OP_CONNECT);
			set_addrs(&p, counts[j]);
			assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), (ssize_t)len);
			assert_rv(mrp_pkt_decode(&out, buf, len), (ssize_t)len);
			assert_pkt_equal(&p, &out);
		}
		/* one IPv6 address alone, every byte set */
		sample(&p, i ? MRP_OP_ACCEPT : MRP_OP_CONNECT);
		set_addrs(&p, 1);
		p.u.hs.addrs[0].family = 6;
		memset(p.u.hs.addrs[0].addr, 0xff, 16);
		check_pkt(&p, 0, __LINE__);
	}
}

/*
 * A WRITE_IMM written out by hand, field by field, from wire.h.
 */
static const uint8_t write_imm_vec[] = {
	0x01,                                           /* 0 version */
	0x02,                                           /* 1 opcode WRITE_IMM */
	0x00, 0x0b,                                     /* 2 flags FIRST|LAST|ACK_REQ */
	0xa1, 0xa2,                                     /* 4 path_id */
	0xa3, 0xa4,                                     /* 6 path_gen */
	0xb1, 0xb2, 0xb3, 0xb4,                         /* 8 dst_conn_id */
	0xc1, 0xc2, 0xc3, 0xc4,                         /* 12 src_conn_id */
	0xd1, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, /* 16 token */
	0xe1, 0xe2, 0xe3, 0xe4,                         /* 24 psn */
	0x01, 0x02,                                     /* 28 stream_id */
	0x00, 0x04,                                     /* 30 payload_len 4 */
	0x03, 0x04, 0x05, 0x06,                         /* 32 msn */
	0x00, 0x00, 0x00, 0x00,                         /* 36 offset 0 */
	0x00, 0x00, 0x00, 0x04,                         /* 40 msg_len 4 */
	0x07, 0x08, 0x09, 0x0a,                         /* 44 recv_idx */
	0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, /* 48 ts_ns */
	0x00, 0x00, 0x7f, 0x21, 0x22, 0x23, 0x24, 0x25, /* 56 remote_addr */
	0x31, 0x32, 0x33, 0x34,                         /* 64 rkey */
	0x41, 0x42, 0x43, 0x44,                         /* 68 imm */
	0xde, 0xad, 0xbe, 0xef,                         /* 72 payload */
};

/* A CLOSE answering a CLOSE. */
static const uint8_t close_vec[] = {
	0x01, 0x23, 0x00, 0x10,                         /* version, CLOSE, REPLY */
	0x00, 0x00, 0x00, 0x00,                         /* path_id, path_gen */
	0x0a, 0x0b, 0x0c, 0x0d,                         /* dst_conn_id */
	0x1a, 0x1b, 0x1c, 0x1d,                         /* src_conn_id */
	0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, /* token */
	0x00, 0x00, 0x00, 0x00,                         /* psn */
	0x00, 0x05,                                     /* reason PROTOCOL */
	0x00, 0x00,                                     /* reserved */
};

static void test_vector_inline(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt p;

	(void)state;
	assert_rv(mrp_pkt_decode(&p, write_imm_vec, sizeof(write_imm_vec)),
		  sizeof(write_imm_vec));
	assert_int_equal(p.hdr.version, 1);
	assert_int_equal(p.hdr.opcode, MRP_OP_WRITE_IMM);
	assert_int_equal(p.hdr.flags, MRP_F_FIRST | MRP_F_LAST | MRP_F_ACK_REQ);
	assert_int_equal(p.hdr.path_id, 0xa1a2);
	assert_int_equal(p.hdr.path_gen, 0xa3a4);
	assert_int_equal(p.hdr.dst_conn_id, 0xb1b2b3b4);
	assert_int_equal(p.hdr.src_conn_id, 0xc1c2c3c4);
	assert_int_equal(p.hdr.token, 0xd1d2d3d4d5d6d7d8ull);
	assert_int_equal(p.hdr.psn, 0xe1e2e3e4);
	assert_int_equal(p.u.data.stream_id, 0x0102);
	assert_int_equal(p.u.data.payload_len, 4);
	assert_int_equal(p.u.data.msn, 0x03040506);
	assert_int_equal(p.u.data.offset, 0);
	assert_int_equal(p.u.data.msg_len, 4);
	assert_int_equal(p.u.data.recv_idx, 0x0708090a);
	assert_int_equal(p.u.data.ts_ns, 0x1112131415161718ull);
	assert_int_equal(p.u.data.remote_addr, 0x00007f2122232425ull);
	assert_int_equal(p.u.data.rkey, 0x31323334);
	assert_int_equal(p.u.data.imm, 0x41424344);
	assert_ptr_equal(p.u.data.payload, write_imm_vec + 72);
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), sizeof(write_imm_vec));
	assert_memory_equal(buf, write_imm_vec, sizeof(write_imm_vec));

	assert_rv(mrp_pkt_decode(&p, close_vec, sizeof(close_vec)), MRP_CLOSE_LEN);
	assert_int_equal(p.hdr.opcode, MRP_OP_CLOSE);
	assert_int_equal(p.hdr.flags, MRP_F_REPLY);
	assert_int_equal(p.hdr.dst_conn_id, 0x0a0b0c0d);
	assert_int_equal(p.hdr.src_conn_id, 0x1a1b1c1d);
	assert_int_equal(p.hdr.token, 0xf1f2f3f4f5f6f7f8ull);
	assert_int_equal(p.u.close.reason, MRP_CLOSE_PROTOCOL);
	memset(buf, 0xee, sizeof(buf));
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), MRP_CLOSE_LEN);
	assert_memory_equal(buf, close_vec, sizeof(close_vec));
}

/*
 * The files in $MRP_TEST_DATA/wire, as documented in its README.md (the
 * table is generated from the same data as the files and the README).
 */
struct vector {
	const char *file;
	int err; /* 0: valid, equal to pkt; else the decoder's error */
	mrp_pkt pkt;
};

static const struct vector vectors[] = {
	{ "write.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_WRITE, MRP_F_FIRST | MRP_F_RETX,
			 0x0102, 0x0304, 0x0A0B0C0D, 0x1A1B1C1D, 0x1122334455667788ull,
			 0x00ABCDEF },
		.u.data = { .stream_id = 0x0203, .payload_len = 8, .msn = 0x01020304,
			.offset = 0, .msg_len = 0x00010000, .recv_idx = 0,
			.ts_ns = 0x0102030405060708ull, .remote_addr = 0x00007F0011223300ull,
			.rkey = 0xCAFEBABE, .imm = 0,
			.payload = (const uint8_t *)"MetaRoCE" } } },
	{ "write_imm.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_WRITE_IMM, MRP_F_LAST | MRP_F_ACK_REQ,
			 0x2122, 0x2324, 0x25262728, 0x292A2B2C, 0x8877665544332211ull,
			 0xFFFFFFFE },
		.u.data = { .stream_id = 0x0405, .payload_len = 5, .msn = 0x0A0B0C0D,
			.offset = 0x00001000, .msg_len = 0x00001005, .recv_idx = 0x00000102,
			.ts_ns = 0x1112131415161718ull, .remote_addr = 0xFFFFFFFFFFFFEFFBull,
			.rkey = 0x0BADF00D, .imm = 0xFEEDF00D,
			.payload = (const uint8_t *)"\x00\x01\x7f\x80\xff" } } },
	{ "send.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_SEND, MRP_F_FIRST | MRP_F_LAST,
			 1, 0x0100, 0x31323334, 0x35363738, 0x0102030405060708ull, 1 },
		.u.data = { .stream_id = 0x0607, .payload_len = 3, .msn = 0x00000100,
			.offset = 0, .msg_len = 3, .recv_idx = 0x0A0B0C0D,
			.ts_ns = 0x2122232425262728ull, .remote_addr = 0, .rkey = 0, .imm = 0,
			.payload = (const uint8_t *)"abc" } } },
	{ "send_imm.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_SEND_IMM,
			 MRP_F_FIRST | MRP_F_LAST | MRP_F_ACK_REQ,
			 0x4142, 0x4344, 0x45464748, 0x494A4B4C, 0xF0E0D0C0B0A09080ull,
			 0x80000000 },
		.u.data = { .stream_id = 0x0809, .payload_len = 0, .msn = 0xFFFFFFFF,
			.offset = 0, .msg_len = 0, .recv_idx = 7, .ts_ns = 0x3132333435363738ull,
			.remote_addr = 0, .rkey = 0, .imm = 0x12345678, .payload = NULL } } },
	{ "read_req.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_READ_REQ,
			 MRP_F_FIRST | MRP_F_LAST | MRP_F_ACK_REQ,
			 0x0003, 0x0001, 0x51525354, 0x61626364, 0x0807060504030201ull,
			 0x00000007 },
		.u.data = { .stream_id = 0x0A0B, .payload_len = 0, .msn = 0x00000010,
			.offset = 0, .msg_len = 0x00100005, .recv_idx = 0, .ts_ns = 0x1000,
			.remote_addr = 0x00007F00AABB0000ull, .rkey = 0x600DCAFE, .imm = 0,
			.payload = NULL } } },
	{ "read_resp.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_READ_RESP, MRP_F_LAST | MRP_F_RETX,
			 0x0010, 0x0002, 0x61626364, 0x51525354, 0x1817161514131211ull,
			 0x00000100 },
		.u.data = { .stream_id = 0x0A0B, .payload_len = 5, .msn = 0x00000010,
			.offset = 0x00100000, .msg_len = 0x00100005, .recv_idx = 0,
			.ts_ns = 0x2000, .remote_addr = 0x00007F00AABB0000ull,
			.rkey = 0x600DCAFE, .imm = 0, .payload = (const uint8_t *)"READ!" } } },
	{ "ack.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_ACK, 0,
			 0x0506, 0x0708, 0x1A1B1C1D, 0x0A0B0C0D, 0x99AABBCCDDEEFF01ull, 0 },
		.u.ack = { .acked_path_id = 0x0102, .acked_path_gen = 0x0304,
			.next_psn = 0x89ABCDEF,
			.sack = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
				  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,
				  0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
				  0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20 },
			.ce_count = 0x00000102, .rcv_count = 0x00030405, .ack_delay_ns = 0x0000C350,
			.ts_echo_ns = 0x0102030405060708ull, .rate_hint_mbps = 0x00009C40 } } },
	{ "nak.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_NAK, 0,
			 0x0506, 0x0708, 0x1A1B1C1D, 0x0A0B0C0D, 0x99AABBCCDDEEFF01ull, 0 },
		.u.nak = { .reason = MRP_NAK_RNR, .stream_id = 0x0708, .msn = 0x090A0B0C,
			.offset = 0x00002000, .nak_path_id = 0x0D0E, .nak_path_gen = 0x0F10,
			.nak_psn = 0x11121314, .retry_after_us = 0x00001388,
			.token_echo = 0 } } },
	{ "nak_unknown_conn.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_NAK, 0,
			 0x5152, 0x5354, 0x55565758, 0x595A5B5C, 0, 0 },
		.u.nak = { .reason = MRP_NAK_UNKNOWN_CONN, .stream_id = 0x0A0B,
			.msn = 0x0C0D0E0F, .offset = 0x00400000, .nak_path_id = 0x5152,
			.nak_path_gen = 0x5354, .nak_psn = 0x61626364, .retry_after_us = 0,
			.token_echo = 0xDEADBEEFCAFEF00Dull } } },
	{ "probe.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_PROBE, MRP_F_ACK_REQ,
			 0x0A0B, 0x0C0D, 0x0A0B0C0D, 0x1A1B1C1D, 0x1122334455667788ull, 0 },
		.u.probe = { .probe_seq = 0x01020304, .ts_ns = 0x1112131415161718ull } } },
	{ "probe_ack.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_PROBE_ACK, 0,
			 0x0A0B, 0x0C0D, 0x1A1B1C1D, 0x0A0B0C0D, 0x99AABBCCDDEEFF01ull, 0 },
		.u.probe_ack = { .probed_path_id = 0x2122, .probed_path_gen = 0x2324,
			.probe_seq = 0x25262728, .ack_delay_ns = 0x292A2B2C,
			.ts_echo_ns = 0x3132333435363738ull } } },
	{ "probe_ack_grant.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_PROBE_ACK, MRP_F_GRANT,
			 0x0A0B, 0x0C0D, 0x1A1B1C1D, 0x0A0B0C0D, 0x99AABBCCDDEEFF01ull, 0 },
		.u.probe_ack = { .probed_path_id = 0x2122, .probed_path_gen = 0x2324,
			.probe_seq = 0x25262728, .ack_delay_ns = 0x292A2B2C,
			.ts_echo_ns = 0x3132333435363738ull, .grant_mbps = 25000 } } },
	{ "connect.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_CONNECT, 0,
			 0, 0, 0, 0x0A0B0C0D, 0, 0 },
		.u.hs = { .min_version = 1, .max_version = 3, .mtu = 4096,
			.service_id = 0x00C0FFEE, .hs_token = 0xA1A2A3A4A5A6A7A8ull,
			.instance_id = 0xB1B2B3B4B5B6B7B8ull, .caps = 0x8000000000000007ull,
			.max_streams = 0x0100, .max_paths = 8, .service_port = 19791,
			.num_addrs = 2,
			.addrs = {
				{ 4, 0, { 192, 0, 2, 1 } },
				{ 6, 1, { 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
					  0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11 } } } } } },
	{ "accept.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_ACCEPT, 0,
			 0, 0, 0x0A0B0C0D, 0x1A1B1C1D, 0xA1A2A3A4A5A6A7A8ull, 0 },
		.u.hs = { .min_version = 1, .max_version = 1, .mtu = 9000,
			.service_id = 0x00C0FFEE, .hs_token = 0xC1C2C3C4C5C6C7C8ull,
			.instance_id = 0xD1D2D3D4D5D6D7D8ull, .caps = 3,
			.max_streams = 64, .max_paths = 4, .service_port = 19792,
			.num_addrs = 3,
			.addrs = {
				{ 6, 2, { 0xfd, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00, 0x03,
					  0x00, 0x04, 0x00, 0x05, 0x00, 0x06, 0x00, 0x07 } },
				{ 4, 3, { 198, 51, 100, 23 } },
				{ 6, 15, { 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					   0x01, 0xff, 0xfe, 0x23, 0x45, 0x67, 0x89, 0x0a } } } } } },
	{ "reject.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_REJECT, 0,
			 0, 0, 0x0A0B0C0D, 0, 0xA1A2A3A4A5A6A7A8ull, 0 },
		.u.reject = { .reason = MRP_REJ_RESOURCES, .min_version = 1,
			.max_version = 2, .service_id = 0x00C0FFEE } } },
	{ "reject_version.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_REJECT, 0,
			 0, 0, 0x0A0B0C0D, 0, 0, 0 },
		.u.reject = { .reason = MRP_REJ_VERSION, .min_version = 1,
			.max_version = 1, .service_id = 0x00C0FFEE } } },
	{ "close.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_CLOSE, MRP_F_REPLY,
			 0, 0, 0x1A1B1C1D, 0x0A0B0C0D, 0x99AABBCCDDEEFF01ull, 0 },
		.u.close = { .reason = MRP_CLOSE_SHUTDOWN } } },
	{ "reset.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_RESET, 0,
			 0, 0, 0x0A0B0C0D, 0x1A1B1C1D, 0x1122334455667788ull, 0 },
		.u.close = { .reason = MRP_CLOSE_PEER_RESTART } } },
	{ "retry.bin", 0, {
		.hdr = { MRP_VERSION, MRP_OP_RETRY, 0,
			 0, 0, 0x0A0B0C0D, 0, 0xA1A2A3A4A5A6A7A8ull, 0 },
		.u.retry = { .cookie = 0xC1C2C3C4C5C6C7C8ull, .service_id = 0x00C0FFEE } } },
	{ "bad_version.bin", MRP_ERR_VERSION, { .hdr = { 0 } } },
	{ "connect_v2.bin", MRP_ERR_VERSION, { .hdr = { 0 } } },
	{ "opcode_07.bin", MRP_ERR_OPCODE, { .hdr = { 0 } } },
	{ "read_req_payload.bin", MRP_ERR_LENGTH, { .hdr = { 0 } } },
	{ "read_req_flags.bin", MRP_ERR_FLAGS, { .hdr = { 0 } } },
	{ "unknown_opcode.bin", MRP_ERR_OPCODE, { .hdr = { 0 } } },
	{ "truncated_ack.bin", MRP_ERR_TRUNCATED, { .hdr = { 0 } } },
	{ "truncated_header.bin", MRP_ERR_TRUNCATED, { .hdr = { 0 } } },
	{ "truncated_connect.bin", MRP_ERR_TRUNCATED, { .hdr = { 0 } } },
	{ "short_payload.bin", MRP_ERR_LENGTH, { .hdr = { 0 } } },
	{ "trailing_byte.bin", MRP_ERR_LENGTH, { .hdr = { 0 } } },
	{ "bad_flags.bin", MRP_ERR_FLAGS, { .hdr = { 0 } } },
	{ "bad_mtu.bin", MRP_ERR_RANGE, { .hdr = { 0 } } },
	{ "reserved_nak.bin", MRP_ERR_RESERVED, { .hdr = { 0 } } },
};
#define NUM_VECTORS (sizeof(vectors) / sizeof(vectors[0]))

static const struct vector *find_vector(const char *file)
{
	size_t i;

	for (i = 0; i < NUM_VECTORS; i++)
		if (strcmp(vectors[i].file, file) == 0)
			return &vectors[i];
	return NULL;
}

static void check_vector_file(const char *dir, const struct vector *v)
{
	static uint8_t data[MAX_PKT + 1], buf[MAX_PKT];
	char path[4096];
	size_t len;
	mrp_pkt p;
	mrp_hdr h;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", dir, v->file) >= (int)sizeof(path))
		fail_msg("%s: path too long", dir);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("%s: cannot open", path);
	len = fread(data, 1, sizeof(data), f);
	fclose(f);
	assert_true(len <= MAX_PKT);

	if (v->err) {
		if (decode_exact(&p, data, len) != v->err)
			fail_msg("%s: expected %s", v->file, mrp_err_name(v->err));
		/* the invariant header still reads, whatever the version */
		if (v->err == MRP_ERR_VERSION) {
			assert_rv(mrp_hdr_decode(&h, data, len), MRP_HDR_LEN);
			assert_int_not_equal(h.version, MRP_VERSION);
		}
		return;
	}
	if (decode_exact(&p, data, len) != (ssize_t)len)
		fail_msg("%s: does not decode", v->file);
	assert_pkt_equal(&v->pkt, &p);
	assert_rv(mrp_pkt_len(&v->pkt), (ssize_t)len);
	memset(buf, 0xee, sizeof(buf));
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), &v->pkt), (ssize_t)len);
	assert_memory_equal(buf, data, len);
	/* and the test's own writer agrees with the file */
	assert_int_equal(raw_encode(buf, &v->pkt), len);
	assert_memory_equal(buf, data, len);
}

static void test_vector_files(void **state)
{
	const char *base = getenv("MRP_TEST_DATA");
	unsigned char seen[NUM_VECTORS] = { 0 };
	char dir[4096];
	struct dirent *e;
	size_t i, nbin = 0;
	DIR *d;

	(void)state;
	if (!base) {
		print_message("MRP_TEST_DATA is not set: run through meson test\n");
		skip();
	}
	if (snprintf(dir, sizeof(dir), "%s/wire", base) >= (int)sizeof(dir))
		fail_msg("MRP_TEST_DATA is too long");
	d = opendir(dir);
	if (!d)
		fail_msg("%s: cannot open the test vector directory", dir);
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		const struct vector *v;

		if (n < 4 || strcmp(e->d_name + n - 4, ".bin") != 0)
			continue;
		v = find_vector(e->d_name);
		if (!v)
			fail_msg("%s/%s: not in the table of test_wire.c", dir, e->d_name);
		check_vector_file(dir, v);
		seen[v - vectors] = 1;
		nbin++;
	}
	closedir(d);
	for (i = 0; i < NUM_VECTORS; i++)
		if (!seen[i])
			fail_msg("%s/%s: missing", dir, vectors[i].file);
	assert_int_equal(nbin, NUM_VECTORS);
}

/* Every prefix of every packet is rejected: TRUNCATED below the opcode's
 * fixed length and inside a CONNECT/ACCEPT address list, LENGTH inside a
 * data packet's payload. */
static void test_truncated(void **state)
{
	static mrp_pkt s[MAX_SAMPLES];
	static uint8_t buf[MAX_PKT];
	size_t n = all_samples(s), i, cut;
	mrp_pkt out;

	(void)state;
	for (i = 0; i < n; i++) {
		ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &s[i]);
		uint8_t op = s[i].hdr.opcode;
		size_t fixed;

		assert_true(len > 0);
		fixed = mrp_op_is_data(op) ? MRP_DATA_HDR_LEN :
			op == MRP_OP_CONNECT || op == MRP_OP_ACCEPT ?
			MRP_HS_FIXED_LEN : (size_t)len;
		for (cut = 0; cut < (size_t)len; cut++) {
			int expect = cut >= fixed && mrp_op_is_data(op) ?
					     MRP_ERR_LENGTH : MRP_ERR_TRUNCATED;
			ssize_t rv = decode_exact(&out, buf, cut);

			if (rv != expect)
				fail_msg("%s of %zd bytes cut to %zu: got %s, expected %s",
					 mrp_op_name(op), len, cut,
					 mrp_err_name((int)rv), mrp_err_name(expect));
		}
	}
	/* below 28 bytes nothing else is looked at */
	buf[0] = 0x7f;
	buf[1] = 0x7f;
	assert_rv(decode_exact(&out, buf, MRP_HDR_LEN - 1), MRP_ERR_TRUNCATED);
}

/* One byte or more after a whole packet: LENGTH, whatever the bytes. */
static void test_trailing(void **state)
{
	static mrp_pkt s[MAX_SAMPLES];
	static uint8_t buf[MAX_PKT + 16];
	size_t n = all_samples(s), i;
	mrp_pkt out;

	(void)state;
	for (i = 0; i < n; i++) {
		ssize_t len = mrp_pkt_encode(buf, sizeof(buf), &s[i]);

		assert_true(len > 0);
		buf[len] = 0;
		assert_rv(decode_exact(&out, buf, (size_t)len + 1), MRP_ERR_LENGTH);
		memset(buf + len, 0xff, 16);
		assert_rv(decode_exact(&out, buf, (size_t)len + 16), MRP_ERR_LENGTH);
	}
}

static void test_version(void **state)
{
	static const uint8_t bad[] = { 0, 2, 0x81, 0xff };
	size_t i, j;

	(void)state;
	for (i = 0; i < NUM_OPS; i++)
		for (j = 0; j < sizeof(bad); j++)
			RULE(all_ops[i], MRP_ERR_VERSION, p->hdr.version = bad[j]);
	/* the version is checked before the opcode, the length after both */
	RULE(0x7f, MRP_ERR_VERSION, p->hdr.version = 2);
	RULE(MRP_OP_ACK, MRP_ERR_VERSION, p->hdr.version = 2,
	     p->hdr.flags = 0xffff);
}

static void test_opcode(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt s, out;
	unsigned int op;
	size_t i;

	(void)state;
	for (op = 0; op < 256; op++) {
		int known = 0;

		for (i = 0; i < NUM_OPS; i++)
			known |= all_ops[i] == op;
		if (known)
			continue;
		sample(&s, (uint8_t)op);
		assert_int_equal(raw_encode(buf, &s), MRP_HDR_LEN);
		/* OPCODE, not TRUNCATED, at 28 bytes; and at any length */
		assert_rv(decode_exact(&out, buf, MRP_HDR_LEN), MRP_ERR_OPCODE);
		assert_rv(decode_exact(&out, buf, 200), MRP_ERR_OPCODE);
		assert_rv(mrp_pkt_encode(buf, sizeof(buf), &s), MRP_ERR_INVAL);
		assert_rv(mrp_pkt_len(&s), MRP_ERR_OPCODE);
	}
	/* the first unassigned one, in place of a valid data packet's opcode */
	BYTE(MRP_OP_WRITE, 1, 0x07, MRP_ERR_OPCODE);
	BYTE(MRP_OP_SEND, 1, 0x07, MRP_ERR_OPCODE);
	/* READ_REQ in place of a WRITE with payload: LENGTH (it has none) */
	BYTE(MRP_OP_WRITE, 1, MRP_OP_READ_REQ, MRP_ERR_LENGTH);
	/* the opcode is checked before the fixed length, which is checked
	 * before the flags */
	sample(&s, MRP_OP_ACK);
	s.hdr.flags = 0xffff;
	raw_encode(buf, &s);
	assert_rv(decode_exact(&out, buf, MRP_HDR_LEN), MRP_ERR_TRUNCATED);
	assert_rv(decode_exact(&out, buf, MRP_ACK_LEN - 1), MRP_ERR_TRUNCATED);
	assert_rv(decode_exact(&out, buf, MRP_ACK_LEN), MRP_ERR_FLAGS);
}

/* Each of the 16 flag bits on each opcode: FLAGS unless the opcode allows
 * it (FIRST and LAST are allowed on data but must match the position). */
static void test_flags(void **state)
{
	size_t i;
	int bit;

	(void)state;
	for (i = 0; i < NUM_OPS; i++) {
		uint8_t op = all_ops[i];
		uint16_t allowed = mrp_op_is_data(op) ?
			MRP_F_RETX | MRP_F_ACK_REQ | MRP_F_HELD | MRP_F_GRANT : op == MRP_OP_PROBE ?
			MRP_F_ACK_REQ | MRP_F_GRANT : op == MRP_OP_CLOSE ? MRP_F_REPLY :
			op == MRP_OP_PROBE_ACK ? MRP_F_GRANT : 0;

		for (bit = 0; bit < 16; bit++) {
			uint16_t f = (uint16_t)(1u << bit);

			RULE(op, allowed & f ? 0 : MRP_ERR_FLAGS, p->hdr.flags ^= f);
		}
	}
	/* FIRST iff offset == 0, LAST iff offset + payload_len == msg_len */
	for (i = 0; i < 5; i++) {
		uint8_t op = i < 4 ? (uint8_t)(MRP_OP_WRITE + i) : MRP_OP_READ_RESP;

		RULE(op, MRP_ERR_FLAGS, set_data(p, 0, 16, 32),
		     p->hdr.flags &= (uint16_t)~MRP_F_FIRST);
		RULE(op, MRP_ERR_FLAGS, set_data(p, 16, 16, 48),
		     p->hdr.flags |= MRP_F_FIRST);
		RULE(op, MRP_ERR_FLAGS, set_data(p, 16, 16, 32),
		     p->hdr.flags &= (uint16_t)~MRP_F_LAST);
		RULE(op, MRP_ERR_FLAGS, set_data(p, 16, 16, 48),
		     p->hdr.flags |= MRP_F_LAST);
		RULE(op, MRP_ERR_FLAGS, set_data(p, 0, 0, 0),
		     p->hdr.flags &= (uint16_t)~MRP_F_LAST);
		VALID(op, set_data(p, 0, 16, 16));
		VALID(op, set_data(p, 16, 16, 48));
	}
	/* flags are checked before the common header fields */
	RULE(MRP_OP_ACK, MRP_ERR_FLAGS, p->hdr.flags = MRP_F_REPLY,
	     p->hdr.dst_conn_id = 0, p->hdr.psn = 1);
}

/* The common header's fields. */
static void test_hdr_fields(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NUM_OPS; i++) {
		uint8_t op = all_ops[i];
		int per_path = op < MRP_OP_CONNECT;

		/* dst_conn_id is 0 in CONNECT only, src_conn_id in REJECT only */
		RULE(op, MRP_ERR_RANGE, p->hdr.dst_conn_id ^= 0x01020304);
		RULE(op, MRP_ERR_RANGE, p->hdr.src_conn_id ^= 0x05060708);
		/* token 0 in NAK UNKNOWN_CONN, nonzero elsewhere; CONNECT:
		 * 0, or the cookie of a RETRY (SPEC 9.7) */
		if (op == MRP_OP_CONNECT)
			VALID(op, p->hdr.token = 0x1112131415161718ull);
		else if (op != MRP_OP_REJECT)
			RULE(op, MRP_ERR_RANGE, p->hdr.token ^= 0x1112131415161718ull);
		/* psn only in data packets */
		if (mrp_op_is_data(op))
			VALID(op, p->hdr.psn = 0xffffffff);
		else
			RULE(op, MRP_ERR_RESERVED, p->hdr.psn = 1);
		/* path_id and path_gen only on per-path packets */
		if (per_path) {
			VALID(op, p->hdr.path_id = 0xffff, p->hdr.path_gen = 0);
			VALID(op, p->hdr.path_id = 0, p->hdr.path_gen = 0xffff);
		} else {
			RULE(op, MRP_ERR_RESERVED, p->hdr.path_id = 0x8000);
			RULE(op, MRP_ERR_RESERVED, p->hdr.path_gen = 1);
		}
	}
	/* NAK UNKNOWN_CONN: token 0, and only then */
	VALID(MRP_OP_NAK, p->u.nak.reason = MRP_NAK_UNKNOWN_CONN,
	      p->u.nak.retry_after_us = 0, p->u.nak.token_echo = 0x1112131415161718ull,
	      p->hdr.token = 0);
	RULE(MRP_OP_NAK, MRP_ERR_RANGE, p->u.nak.reason = MRP_NAK_UNKNOWN_CONN,
	     p->u.nak.retry_after_us = 0, p->u.nak.token_echo = 1);
	/* REJECT: token 0 only with reason VERSION, where any token goes */
	RULE(MRP_OP_REJECT, MRP_ERR_RANGE, p->hdr.token = 0);
	VALID(MRP_OP_REJECT, p->u.reject.reason = MRP_REJ_VERSION, p->hdr.token = 0);
	VALID(MRP_OP_REJECT, p->u.reject.reason = MRP_REJ_VERSION);
	/* RETRY: 44 bytes, a nonzero cookie, 4 reserved bytes */
	RULE(MRP_OP_RETRY, MRP_ERR_RANGE, p->u.retry.cookie = 0);
	VALID(MRP_OP_RETRY, p->u.retry.service_id = 0);
	BYTE(MRP_OP_RETRY, 40, 0x01, MRP_ERR_RESERVED);
	BYTE(MRP_OP_RETRY, 43, 0x80, MRP_ERR_RESERVED);
	/* the header is checked before the body */
	RULE(MRP_OP_NAK, MRP_ERR_RANGE, p->hdr.src_conn_id = 0, p->u.nak.reason = 0);
	RULE(MRP_OP_CLOSE, MRP_ERR_RESERVED, p->hdr.psn = 1, p->u.close.reason = 99);
}

/* Data packets. */
static void test_data_fields(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt out;
	size_t i;

	(void)state;
	for (i = 0; i < 4; i++) {
		uint8_t op = (uint8_t)(MRP_OP_WRITE + i);
		int is_write = op == MRP_OP_WRITE || op == MRP_OP_WRITE_IMM;
		int is_imm = op == MRP_OP_WRITE_IMM || op == MRP_OP_SEND_IMM;
		mrp_pkt s;
		ssize_t len;

		/* datagram length != 72 + payload_len */
		sample(&s, op);
		len = mrp_pkt_encode(buf, sizeof(buf), &s);
		assert_rv(len, 72 + 16);
		assert_rv(decode_exact(&out, buf, (size_t)len - 1), MRP_ERR_LENGTH);
		assert_rv(decode_exact(&out, buf, (size_t)len + 1), MRP_ERR_LENGTH);
		/* payload_len and msg_len bounds */
		RULE(op, MRP_ERR_RANGE, set_data(p, 0, MRP_MTU_MAX + 1, 1u << 20));
		VALID(op, set_data(p, 0, MRP_MTU_MAX, 1u << 20));
		RULE(op, MRP_ERR_RANGE, set_data(p, 0x80000000u - 15, 16, 0x80000001u));
		VALID(op, set_data(p, 0x80000000u - 16, 16, MRP_MSG_MAX),
		      p->u.data.remote_addr = 0);
		/* the payload does not fit in the message */
		RULE(op, MRP_ERR_LENGTH, set_data(p, 100, 16, 110));
		RULE(op, MRP_ERR_LENGTH, set_data(p, 0, 16, 15));
		RULE(op, MRP_ERR_LENGTH, set_data(p, 0xfffffff8u, 16, MRP_MSG_MAX));
		RULE(op, MRP_ERR_LENGTH, set_data(p, 0, 0, 100));
		RULE(op, MRP_ERR_LENGTH, set_data(p, 100, 0, 100));
		/* remote_addr, rkey */
		if (is_write) {
			/* the region may end at 2^64 but not past it */
			VALID(op, set_data(p, 0, 16, 4096),
			      p->u.data.remote_addr = 0 - 4096ull);
			RULE(op, MRP_ERR_RANGE, set_data(p, 0, 16, 4096),
			     p->u.data.remote_addr = 0 - 4095ull);
			RULE(op, MRP_ERR_RANGE, p->u.data.remote_addr = UINT64_MAX);
			VALID(op, set_data(p, 0, 0, 0), p->u.data.remote_addr = UINT64_MAX);
			VALID(op, p->u.data.rkey = 0);
		} else {
			RULE(op, MRP_ERR_RESERVED, p->u.data.remote_addr = 1ull << 63);
			RULE(op, MRP_ERR_RESERVED, p->u.data.rkey = 1);
		}
		/* imm only on *_IMM */
		if (is_imm)
			VALID(op, p->u.data.imm = 0);
		else
			RULE(op, MRP_ERR_RESERVED, p->u.data.imm = 0x80000000u);
		/* recv_idx only where a receive is consumed; 0 is an index */
		if (op == MRP_OP_WRITE)
			RULE(op, MRP_ERR_RESERVED, p->u.data.recv_idx = 1);
		else
			VALID(op, p->u.data.recv_idx = 0);
		/* everything else takes any value */
		VALID(op, p->u.data.stream_id = 0xffff, p->u.data.msn = 0xffffffff,
		      p->u.data.ts_ns = UINT64_MAX, p->hdr.psn = 0);
	}
	/* the order: LENGTH before RANGE, RANGE before LENGTH of the message */
	RULE(MRP_OP_SEND, MRP_ERR_RANGE, set_data(p, 0, 16, 0xffffffffu));
	RULE(MRP_OP_SEND, MRP_ERR_LENGTH, set_data(p, 0, 16, 8), p->u.data.rkey = 1);
	RULE(MRP_OP_WRITE, MRP_ERR_FLAGS, p->hdr.flags ^= MRP_F_LAST,
	     p->u.data.imm = 1);
}

/* READ_REQ and READ_RESP (SPEC 5.8, 13.1 step 6). */
static void test_read_fields(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt s, out;

	(void)state;
	/* READ_REQ: 72 bytes, no payload whatever msg_len says */
	sample(&s, MRP_OP_READ_REQ);
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), &s), MRP_DATA_HDR_LEN);
	assert_rv(decode_exact(&out, buf, MRP_DATA_HDR_LEN), MRP_DATA_HDR_LEN);
	assert_int_equal(out.u.data.msg_len, 4096 + 16);
	assert_int_equal(out.u.data.payload_len, 0);
	assert_rv(decode_exact(&out, buf, MRP_DATA_HDR_LEN + 1), MRP_ERR_LENGTH);
	VALID(MRP_OP_READ_REQ, p->u.data.msg_len = 0);
	VALID(MRP_OP_READ_REQ, p->u.data.msg_len = MRP_MSG_MAX);
	VALID(MRP_OP_READ_REQ, p->u.data.msg_len = 2, p->hdr.flags |= MRP_F_ACK_REQ);
	RULE(MRP_OP_READ_REQ, MRP_ERR_RANGE, p->u.data.msg_len = MRP_MSG_MAX + 1);
	RULE(MRP_OP_READ_REQ, MRP_ERR_LENGTH, p->u.data.payload_len = 16);
	RULE(MRP_OP_READ_REQ, MRP_ERR_LENGTH, p->u.data.offset = 4096);
	RULE(MRP_OP_READ_REQ, MRP_ERR_FLAGS, p->hdr.flags &= (uint16_t)~MRP_F_FIRST);
	RULE(MRP_OP_READ_REQ, MRP_ERR_FLAGS, p->hdr.flags &= (uint16_t)~MRP_F_LAST);
	/* payload before flags: a packet with both wrong is LENGTH */
	RULE(MRP_OP_READ_REQ, MRP_ERR_LENGTH, p->u.data.offset = 1, p->hdr.flags = 0);
	/* the source may end at 2^64 but not past it */
	VALID(MRP_OP_READ_REQ, p->u.data.msg_len = 4096, p->u.data.remote_addr = 0 - 4096ull);
	RULE(MRP_OP_READ_REQ, MRP_ERR_RANGE, p->u.data.msg_len = 4096,
	     p->u.data.remote_addr = 0 - 4095ull);
	VALID(MRP_OP_READ_REQ, p->u.data.msg_len = 0, p->u.data.remote_addr = UINT64_MAX);
	RULE(MRP_OP_READ_REQ, MRP_ERR_RESERVED, p->u.data.imm = 1);
	RULE(MRP_OP_READ_REQ, MRP_ERR_RESERVED, p->u.data.recv_idx = 1);
	VALID(MRP_OP_READ_REQ, p->u.data.rkey = 0, p->u.data.stream_id = 0xffff,
	      p->u.data.msn = 0xffffffff, p->u.data.ts_ns = UINT64_MAX);

	/* READ_RESP: the rules of a WRITE, without imm and recv_idx */
	RULE(MRP_OP_READ_RESP, MRP_ERR_LENGTH, set_data(p, 0, 0, 100));
	RULE(MRP_OP_READ_RESP, MRP_ERR_LENGTH, set_data(p, 100, 16, 110));
	VALID(MRP_OP_READ_RESP, set_data(p, 0, 0, 0));
	VALID(MRP_OP_READ_RESP, set_data(p, 0, MRP_MTU_MAX, 1u << 20));
	RULE(MRP_OP_READ_RESP, MRP_ERR_RANGE, set_data(p, 0, 16, 4096),
	     p->u.data.remote_addr = 0 - 4095ull);
	RULE(MRP_OP_READ_RESP, MRP_ERR_RESERVED, p->u.data.imm = 0x80000000u);
	RULE(MRP_OP_READ_RESP, MRP_ERR_RESERVED, p->u.data.recv_idx = 1);
	VALID(MRP_OP_READ_RESP, p->u.data.rkey = 0);
}

/* ACK, NAK, PROBE, PROBE_ACK. */
static void test_ack_nak_probe(void **state)
{
	int r, i;

	(void)state;
	/* ACK and PROBE_ACK: every value is legal */
	VALID(MRP_OP_ACK, memset(&p->u.ack, 0xff, sizeof(p->u.ack)));
	VALID(MRP_OP_ACK, memset(&p->u.ack, 0, sizeof(p->u.ack)));
	VALID(MRP_OP_PROBE_ACK, memset(&p->u.probe_ack, 0xff, sizeof(p->u.probe_ack)));
	VALID(MRP_OP_PROBE_ACK, memset(&p->u.probe_ack, 0, sizeof(p->u.probe_ack)));
	VALID(MRP_OP_PROBE, p->u.probe.probe_seq = 0, p->u.probe.ts_ns = 0);
	/* GRANT (SPEC 6.6): a request on a PROBE, a 52-byte PROBE_ACK that
	 * carries grant_mbps (any value), sent-on-admission on data */
	VALID(MRP_OP_PROBE, p->hdr.flags = MRP_F_ACK_REQ | MRP_F_GRANT);
	VALID(MRP_OP_PROBE_ACK, p->hdr.flags = MRP_F_GRANT, p->u.probe_ack.grant_mbps = 0);
	VALID(MRP_OP_PROBE_ACK, p->hdr.flags = MRP_F_GRANT, p->u.probe_ack.grant_mbps = UINT32_MAX);
	VALID(MRP_OP_WRITE, p->hdr.flags |= MRP_F_GRANT);
	{
		mrp_pkt g, out;
		uint8_t buf[MAX_PKT];

		sample(&g, MRP_OP_PROBE_ACK);
		g.hdr.flags = MRP_F_GRANT;
		g.u.probe_ack.grant_mbps = 0x01020304;
		assert_rv(mrp_pkt_len(&g), MRP_PROBE_ACK_GRANT_LEN);
		assert_rv(mrp_pkt_encode(buf, sizeof(buf), &g), MRP_PROBE_ACK_GRANT_LEN);
		assert_int_equal(buf[48], 0x01);
		assert_int_equal(buf[51], 0x04);
		assert_rv(decode_exact(&out, buf, MRP_PROBE_ACK_GRANT_LEN), MRP_PROBE_ACK_GRANT_LEN);
		assert_int_equal(out.u.probe_ack.grant_mbps, 0x01020304);
		/* with GRANT 48 bytes are short; without it 52 are long */
		assert_rv(decode_exact(&out, buf, MRP_PROBE_ACK_LEN), MRP_ERR_LENGTH);
		buf[3] = 0;
		assert_rv(decode_exact(&out, buf, MRP_PROBE_ACK_GRANT_LEN), MRP_ERR_LENGTH);
		assert_rv(decode_exact(&out, buf, MRP_PROBE_ACK_LEN), MRP_PROBE_ACK_LEN);
	}

	/* NAK reason 1..7 */
	RULE(MRP_OP_NAK, MRP_ERR_RANGE, p->u.nak.reason = 0);
	RULE(MRP_OP_NAK, MRP_ERR_RANGE, p->u.nak.reason = MRP_NAK_MAX + 1);
	RULE(MRP_OP_NAK, MRP_ERR_RANGE, p->u.nak.reason = 0xff);
	for (r = 1; r <= MRP_NAK_MAX; r++) {
		int uc = r == MRP_NAK_UNKNOWN_CONN;

		VALID(MRP_OP_NAK, p->u.nak.reason = (uint8_t)r,
		      p->u.nak.retry_after_us = r == MRP_NAK_RNR ? 1 : 0,
		      p->u.nak.token_echo = uc ? 0xffffffffffffffffull : 0,
		      p->hdr.token = uc ? 0 : p->hdr.token);
		/* token_echo nonzero iff UNKNOWN_CONN */
		RULE(MRP_OP_NAK, MRP_ERR_RANGE, p->u.nak.reason = (uint8_t)r,
		     p->u.nak.retry_after_us = 0,
		     p->u.nak.token_echo = uc ? 0 : 1,
		     p->hdr.token = uc ? 0 : p->hdr.token);
		/* retry_after_us only with RNR */
		if (r != MRP_NAK_RNR)
			RULE(MRP_OP_NAK, MRP_ERR_RESERVED, p->u.nak.reason = (uint8_t)r,
			     p->u.nak.retry_after_us = 0x80000000u,
			     p->u.nak.token_echo = uc ? 7 : 0,
			     p->hdr.token = uc ? 0 : p->hdr.token);
	}
	VALID(MRP_OP_NAK, p->u.nak.retry_after_us = 0);
	/* NAK reserved byte 29, checked after the reason and before the rest */
	BYTE(MRP_OP_NAK, 29, 0x01, MRP_ERR_RESERVED);
	BYTE_WITH(MRP_OP_NAK, 29, 0x80, MRP_ERR_RESERVED, p->u.nak.token_echo = 1);
	BYTE_WITH(MRP_OP_NAK, 29, 0x80, MRP_ERR_RANGE, p->u.nak.reason = 0);

	/* PROBE reserved bytes 32-35 */
	for (i = 32; i < 36; i++)
		BYTE(MRP_OP_PROBE, (size_t)i, 0x01, MRP_ERR_RESERVED);
}

/* CONNECT and ACCEPT. */
static void test_hs_fields(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt out;
	size_t k;
	int i;

	(void)state;
	for (k = 0; k < 2; k++) {
		uint8_t op = k ? MRP_OP_ACCEPT : MRP_OP_CONNECT;
		mrp_pkt s;
		ssize_t len;

		/* versions */
		RULE(op, MRP_ERR_RANGE, p->u.hs.min_version = 0);
		RULE(op, MRP_ERR_RANGE, p->u.hs.min_version = 0, p->u.hs.max_version = 0);
		RULE(op, MRP_ERR_RANGE, p->u.hs.min_version = 3, p->u.hs.max_version = 2);
		VALID(op, p->u.hs.min_version = 7, p->u.hs.max_version = 7);
		/* mtu, tokens, counts, port */
		RULE(op, MRP_ERR_RANGE, p->u.hs.mtu = MRP_MTU_MIN - 1);
		RULE(op, MRP_ERR_RANGE, p->u.hs.mtu = MRP_MTU_MAX + 1);
		RULE(op, MRP_ERR_RANGE, p->u.hs.mtu = 0);
		VALID(op, p->u.hs.mtu = MRP_MTU_MIN);
		VALID(op, p->u.hs.mtu = MRP_MTU_MAX);
		RULE(op, MRP_ERR_RANGE, p->u.hs.hs_token = 0);
		RULE(op, MRP_ERR_RANGE, p->u.hs.max_streams = 0);
		RULE(op, MRP_ERR_RANGE, p->u.hs.max_paths = 0);
		RULE(op, MRP_ERR_RANGE, p->u.hs.service_port = 0);
		VALID(op, p->u.hs.max_streams = 1, p->u.hs.max_paths = 1,
		      p->u.hs.service_port = 1, p->u.hs.service_id = 0,
		      p->u.hs.instance_id = 0, p->u.hs.caps = 0);
		/* unknown capability bits are kept */
		VALID(op, p->u.hs.caps = UINT64_MAX);
		/* num_addrs 1..16 */
		RULE(op, MRP_ERR_RANGE, set_addrs(p, 0));
		RULE(op, MRP_ERR_RANGE, set_addrs(p, MRP_MAX_ADDRS + 1));
		RULE(op, MRP_ERR_RANGE, set_addrs(p, 255));
		VALID(op, set_addrs(p, MRP_MAX_ADDRS));
		/* byte 67: reserved in a CONNECT, checked after the fields
		 * before it; in an ACCEPT the admit field, any value (6.6) */
		if (op == MRP_OP_CONNECT) {
			BYTE(op, 67, 0x01, MRP_ERR_RESERVED);
			BYTE_WITH(op, 67, 0x01, MRP_ERR_RANGE, p->u.hs.mtu = 0);
			RULE(op, MRP_ERR_RESERVED, p->u.hs.admit = 1);
		} else {
			VALID(op, p->u.hs.admit = 1);
			VALID(op, p->u.hs.admit = 255);
			/* the credit's scale (SPEC 9.2): 4 KiB x 2^((k - 1) / 8) */
			assert_int_equal(mrp_admit_bytes(0), 0);
			assert_int_equal(mrp_admit_bytes(1), 4096);
			assert_int_equal(mrp_admit_bytes(9), 8192);
			assert_int_equal(mrp_admit_bytes(5), 5792); /* 4096 x 2^0.5 */
			assert_int_equal(mrp_admit_bytes(81), 4096ull << 10);
			assert_true(mrp_admit_bytes(255) > 14000000000000ull);
			assert_int_equal(mrp_admit_code(0), 0);
			assert_int_equal(mrp_admit_code(4095), 0);
			assert_int_equal(mrp_admit_code(4096), 1);
			assert_int_equal(mrp_admit_code(8191), 8);
			assert_int_equal(mrp_admit_code(UINT64_MAX), 255);
			for (unsigned a = 1; a < 255; a++) {
				assert_true(mrp_admit_bytes((uint8_t)a) < mrp_admit_bytes((uint8_t)(a + 1)));
				assert_int_equal(mrp_admit_code(mrp_admit_bytes((uint8_t)a)), a);
			}
			BYTE_WITH(op, 67, 0x01, MRP_ERR_RANGE, p->u.hs.mtu = 0);
		}
		/* the address list against the datagram: too short TRUNCATED
		 * (the prefix test does every length), too long LENGTH */
		sample(&s, op);
		len = mrp_pkt_encode(buf, sizeof(buf), &s);
		assert_rv(len, 68 + 2 * 20);
		assert_rv(decode_exact(&out, buf, (size_t)len - 20), MRP_ERR_TRUNCATED);
		assert_rv(decode_exact(&out, buf, (size_t)len - 1), MRP_ERR_TRUNCATED);
		assert_rv(decode_exact(&out, buf, (size_t)len + 20), MRP_ERR_LENGTH);
		/* each address: family, plane, reserved, IPv4 tail; checked in
		 * the order of the list */
		RULE(op, MRP_ERR_RANGE, p->u.hs.addrs[0].family = 0);
		RULE(op, MRP_ERR_RANGE, p->u.hs.addrs[1].family = 5);
		RULE(op, MRP_ERR_RANGE, p->u.hs.addrs[1].family = 10);
		RULE(op, MRP_ERR_RANGE, p->u.hs.addrs[1].plane = MRP_MAX_ADDRS);
		RULE(op, MRP_ERR_RANGE, p->u.hs.addrs[0].plane = 0xff);
		VALID(op, p->u.hs.addrs[0].plane = MRP_MAX_ADDRS - 1,
		      p->u.hs.addrs[1].plane = 0);
		BYTE(op, 68 + 2, 0x01, MRP_ERR_RESERVED);
		BYTE(op, 68 + 3, 0x80, MRP_ERR_RESERVED);
		BYTE(op, 88 + 2, 0x01, MRP_ERR_RESERVED);
		BYTE(op, 88 + 3, 0x80, MRP_ERR_RESERVED);
		BYTE_WITH(op, 68 + 15 * 20 + 3, 0x80, MRP_ERR_RESERVED, set_addrs(p, 16));
		BYTE_WITH(op, 88 + 2, 0x01, MRP_ERR_RANGE, p->u.hs.addrs[0].family = 0);
		BYTE_WITH(op, 68 + 2, 0x01, MRP_ERR_RESERVED, p->u.hs.addrs[1].family = 0);
		for (i = 4; i < 16; i++)
			RULE(op, MRP_ERR_RESERVED, p->u.hs.addrs[0].addr[i] = 1);
		VALID(op, memset(p->u.hs.addrs[1].addr, 0xff, 16));
		VALID(op, memset(p->u.hs.addrs[1].addr, 0, 16),
		      memset(p->u.hs.addrs[0].addr, 0, 16));
	}
	/* ACCEPT carries the chosen version: min == max; CONNECT a range */
	RULE(MRP_OP_ACCEPT, MRP_ERR_RANGE, p->u.hs.min_version = 1,
	     p->u.hs.max_version = 2);
	VALID(MRP_OP_CONNECT, p->u.hs.min_version = 1, p->u.hs.max_version = 255);
}

/* REJECT, CLOSE, RESET. */
static void test_reject_close(void **state)
{
	int r;

	(void)state;
	RULE(MRP_OP_REJECT, MRP_ERR_RANGE, p->u.reject.reason = 0);
	RULE(MRP_OP_REJECT, MRP_ERR_RANGE, p->u.reject.reason = MRP_REJ_MAX + 1);
	for (r = 1; r <= MRP_REJ_MAX; r++)
		VALID(MRP_OP_REJECT, p->u.reject.reason = (uint8_t)r);
	RULE(MRP_OP_REJECT, MRP_ERR_RANGE, p->u.reject.min_version = 0);
	RULE(MRP_OP_REJECT, MRP_ERR_RANGE, p->u.reject.min_version = 4,
	     p->u.reject.max_version = 3);
	VALID(MRP_OP_REJECT, p->u.reject.min_version = 3,
	      p->u.reject.max_version = 3, p->u.reject.service_id = 0);
	BYTE(MRP_OP_REJECT, 31, 0x01, MRP_ERR_RESERVED);
	BYTE_WITH(MRP_OP_REJECT, 31, 0x01, MRP_ERR_RANGE, p->u.reject.min_version = 0);

	for (r = 0; r < 2; r++) {
		uint8_t op = r ? MRP_OP_RESET : MRP_OP_CLOSE;
		int reason;

		for (reason = 0; reason <= MRP_CLOSE_MAX; reason++)
			VALID(op, p->u.close.reason = (uint16_t)reason);
		RULE(op, MRP_ERR_RANGE, p->u.close.reason = MRP_CLOSE_MAX + 1);
		RULE(op, MRP_ERR_RANGE, p->u.close.reason = 0x0100);
		RULE(op, MRP_ERR_RANGE, p->u.close.reason = 0xffff);
		BYTE(op, 30, 0x01, MRP_ERR_RESERVED);
		BYTE(op, 31, 0x80, MRP_ERR_RESERVED);
		BYTE_WITH(op, 31, 0x80, MRP_ERR_RANGE, p->u.close.reason = 6);
	}
}

/* Arguments the encoders and decoders refuse. */
static void test_inval(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt p, out;
	mrp_hdr h;

	(void)state;
	sample(&p, MRP_OP_ACK);
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), MRP_ACK_LEN);
	assert_rv(mrp_pkt_decode(NULL, buf, MRP_ACK_LEN), MRP_ERR_INVAL);
	assert_rv(mrp_pkt_decode(&out, NULL, MRP_ACK_LEN), MRP_ERR_INVAL);
	assert_rv(mrp_hdr_decode(NULL, buf, MRP_ACK_LEN), MRP_ERR_INVAL);
	assert_rv(mrp_hdr_decode(&h, NULL, MRP_ACK_LEN), MRP_ERR_INVAL);
	assert_rv(mrp_pkt_encode(NULL, sizeof(buf), &p), MRP_ERR_INVAL);
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), NULL), MRP_ERR_INVAL);
	assert_rv(mrp_pkt_len(NULL), MRP_ERR_INVAL);

	/* a payload is needed when there is one, not otherwise */
	sample(&p, MRP_OP_SEND);
	p.u.data.payload = NULL;
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), MRP_ERR_INVAL);
	assert_rv(mrp_data_hdr_encode(buf, sizeof(buf), &p.hdr, &p.u.data),
		  MRP_DATA_HDR_LEN);
	set_data(&p, 0, 0, 0);
	assert_rv(mrp_pkt_encode(buf, sizeof(buf), &p), MRP_DATA_HDR_LEN);

	/* the header-only encoder is for data packets only */
	sample(&p, MRP_OP_SEND);
	assert_rv(mrp_data_hdr_encode(NULL, sizeof(buf), &p.hdr, &p.u.data),
		  MRP_ERR_INVAL);
	assert_rv(mrp_data_hdr_encode(buf, sizeof(buf), NULL, &p.u.data),
		  MRP_ERR_INVAL);
	assert_rv(mrp_data_hdr_encode(buf, sizeof(buf), &p.hdr, NULL),
		  MRP_ERR_INVAL);
	p.hdr.opcode = MRP_OP_PROBE;
	assert_rv(mrp_data_hdr_encode(buf, sizeof(buf), &p.hdr, &p.u.data),
		  MRP_ERR_INVAL);
	p.hdr.opcode = 0x07;
	assert_rv(mrp_data_hdr_encode(buf, sizeof(buf), &p.hdr, &p.u.data),
		  MRP_ERR_INVAL);
	/* a SEND's header with payload is no READ_REQ */
	sample(&p, MRP_OP_SEND);
	p.hdr.opcode = MRP_OP_READ_REQ;
	assert_rv(mrp_data_hdr_encode(buf, sizeof(buf), &p.hdr, &p.u.data),
		  MRP_ERR_INVAL);

	/* invalid input wins over a short buffer */
	sample(&p, MRP_OP_CLOSE);
	p.u.close.reason = 99;
	assert_rv(mrp_pkt_encode(buf, 1, &p), MRP_ERR_INVAL);
}

/* A short buffer: NOBUF, and nothing written at or past buflen. */
static void test_nobuf(void **state)
{
	static mrp_pkt s[MAX_SAMPLES];
	static uint8_t buf[MAX_PKT + 8];
	size_t n = all_samples(s), i, blen, g;

	(void)state;
	for (i = 0; i < n; i++) {
		ssize_t len = mrp_pkt_len(&s[i]);

		assert_true(len > 0);
		for (blen = 0; blen <= (size_t)len; blen++) {
			ssize_t want = blen < (size_t)len ? MRP_ERR_NOBUF : len;

			/* only every 97th size of the big ones: the guard is
			 * what matters, and 9072 sizes times 9 KiB is slow */
			if (len > 512 && blen % 97 != 0 && blen + 2 < (size_t)len)
				continue;
			memset(buf, 0xa5, blen + 8);
			assert_rv(mrp_pkt_encode(buf, blen, &s[i]), want);
			for (g = blen; g < blen + 8; g++)
				if (buf[g] != 0xa5)
					fail_msg("%s: buflen %zu: byte %zu written",
						 mrp_op_name(s[i].hdr.opcode), blen, g);
		}
		if (!mrp_op_is_data(s[i].hdr.opcode))
			continue;
		for (blen = 0; blen <= MRP_DATA_HDR_LEN; blen++) {
			ssize_t want = blen < MRP_DATA_HDR_LEN ? MRP_ERR_NOBUF :
								 MRP_DATA_HDR_LEN;

			memset(buf, 0xa5, blen + 8);
			assert_rv(mrp_data_hdr_encode(buf, blen, &s[i].hdr,
						      &s[i].u.data), want);
			for (g = blen; g < blen + 8; g++)
				assert_int_equal(buf[g], 0xa5);
		}
	}
}

/* The hot-path header encoder writes what mrp_pkt_encode writes. */
static void test_data_hdr_encode(void **state)
{
	static mrp_pkt s[MAX_SAMPLES];
	static uint8_t full[MAX_PKT], hdr[MAX_PKT];
	size_t n = all_samples(s), i, checked = 0;
	mrp_pkt out;

	(void)state;
	for (i = 0; i < n; i++) {
		const mrp_pkt *p = &s[i];
		ssize_t len;

		if (!mrp_op_is_data(p->hdr.opcode))
			continue;
		len = mrp_pkt_encode(full, sizeof(full), p);
		assert_true(len >= MRP_DATA_HDR_LEN);
		memset(hdr, 0, sizeof(hdr));
		assert_rv(mrp_data_hdr_encode(hdr, sizeof(hdr), &p->hdr, &p->u.data),
			  MRP_DATA_HDR_LEN);
		assert_memory_equal(hdr, full, MRP_DATA_HDR_LEN);
		/* exactly 72 bytes of room is enough */
		assert_rv(mrp_data_hdr_encode(hdr, MRP_DATA_HDR_LEN, &p->hdr, &p->u.data),
			  MRP_DATA_HDR_LEN);
		/* the caller puts the payload after it: a valid packet */
		if (p->u.data.payload_len)
			memcpy(hdr + MRP_DATA_HDR_LEN, p->u.data.payload,
			       p->u.data.payload_len);
		assert_rv(mrp_pkt_decode(&out, hdr, (size_t)len), len);
		checked++;
	}
	assert_true(checked >= 4 * 4 + 2);
}

/* A CONNECT of version 2: the invariant header (bytes 0-15) still reads, so
 * that the REJECT can be addressed; the full decoder says VERSION. */
static void test_hdr_decode_v2(void **state)
{
	uint8_t buf[MAX_PKT];
	mrp_pkt p, out;
	mrp_hdr h;
	size_t len;

	(void)state;
	sample(&p, MRP_OP_CONNECT);
	len = raw_encode(buf, &p);
	buf[0] = 2;
	/* a future version may use flags and path bits freely */
	w16(buf, 2, 0xabcd);
	w16(buf, 4, 0x1234);
	w16(buf, 6, 0x5678);
	w32(buf, 8, 0x9abcdef0);
	w32(buf, 12, 0x0fedcba9);
	assert_rv(mrp_pkt_decode(&out, buf, len), MRP_ERR_VERSION);
	assert_rv(mrp_hdr_decode(&h, buf, len), MRP_HDR_LEN);
	assert_int_equal(h.version, 2);
	assert_int_equal(h.opcode, MRP_OP_CONNECT);
	assert_int_equal(h.flags, 0xabcd);
	assert_int_equal(h.path_id, 0x1234);
	assert_int_equal(h.path_gen, 0x5678);
	assert_int_equal(h.dst_conn_id, 0x9abcdef0);
	assert_int_equal(h.src_conn_id, 0x0fedcba9);
	/* exactly the 28 bytes of the common header; no more needed */
	assert_rv(mrp_hdr_decode(&h, buf, MRP_HDR_LEN), MRP_HDR_LEN);
	assert_rv(mrp_hdr_decode(&h, buf, MRP_HDR_LEN - 1), MRP_ERR_TRUNCATED);
	assert_rv(mrp_hdr_decode(&h, buf, 0), MRP_ERR_TRUNCATED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_op_name),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_roundtrip_data),
		cmocka_unit_test(test_roundtrip_hs),
		cmocka_unit_test(test_vector_inline),
		cmocka_unit_test(test_vector_files),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_trailing),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_opcode),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_hdr_fields),
		cmocka_unit_test(test_data_fields),
		cmocka_unit_test(test_read_fields),
		cmocka_unit_test(test_ack_nak_probe),
		cmocka_unit_test(test_hs_fields),
		cmocka_unit_test(test_reject_close),
		cmocka_unit_test(test_inval),
		cmocka_unit_test(test_nobuf),
		cmocka_unit_test(test_data_hdr_encode),
		cmocka_unit_test(test_hdr_decode_v2),
	};
	size_t i;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 31 + 7);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
