/*
 * libFuzzer harness for the wire decoder. For every input the decoder
 * accepts, encoding the decoded packet must give the input back byte for
 * byte: the layout has no slack (every byte is a field or a reserved byte
 * that must be zero), so decode then encode is the identity on valid packets.
 * Any difference, or a decoder that returns anything but the length or an
 * MRP_ERR_* code, aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[MRP_DATA_HDR_LEN + MRP_MTU_MAX];

static int hdr_equal(const mrp_hdr *a, const mrp_hdr *b)
{
	return a->version == b->version && a->opcode == b->opcode &&
	       a->flags == b->flags && a->path_id == b->path_id &&
	       a->path_gen == b->path_gen && a->dst_conn_id == b->dst_conn_id &&
	       a->src_conn_id == b->src_conn_id && a->token == b->token &&
	       a->psn == b->psn;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	mrp_pkt pkt;
	mrp_hdr hdr;
	ssize_t rv, len;

	rv = mrp_hdr_decode(&hdr, data, size);
	if (rv != (size < MRP_HDR_LEN ? MRP_ERR_TRUNCATED : MRP_HDR_LEN))
		abort();

	rv = mrp_pkt_decode(&pkt, data, size);
	if (rv < 0) {
		/* only the decoder's codes, TRUNCATED to RESERVED */
		if (rv < MRP_ERR_RESERVED || rv > MRP_ERR_TRUNCATED)
			abort();
		return 0;
	}
	if ((size_t)rv != size || size > sizeof(out))
		abort();
	if (!hdr_equal(&hdr, &pkt.hdr))
		abort();

	len = mrp_pkt_len(&pkt);
	if (len != rv)
		abort();
	memset(out, 0xa5, sizeof(out));
	if (mrp_pkt_encode(out, sizeof(out), &pkt) != len)
		abort();
	if (memcmp(out, data, size) != 0)
		abort();
	if (mrp_pkt_encode(out, size - 1, &pkt) != MRP_ERR_NOBUF)
		abort();

	if (mrp_op_is_data(pkt.hdr.opcode)) {
		if (pkt.u.data.payload != data + MRP_DATA_HDR_LEN)
			abort();
		memset(out, 0xa5, MRP_DATA_HDR_LEN);
		if (mrp_data_hdr_encode(out, sizeof(out), &pkt.hdr, &pkt.u.data) !=
		    MRP_DATA_HDR_LEN)
			abort();
		if (memcmp(out, data, MRP_DATA_HDR_LEN) != 0)
			abort();
	}
	return 0;
}
