/*
 * libFuzzer harness for the engine's receive path (proto/conn.c).
 *
 * Per input: two connections A and B (2 planes, 8 paths, 16 streams, MTU 256
 * so messages span several packets; the expedited class on: messages up to
 * 1 KiB, 1.5 KiB of them outstanding), each with a registered memory region
 * and a pool of receive buffers inside one arena with guard zones around
 * every buffer; B posts a few receives and A a few sends. The rest of the
 * input is a program of operations:
 *   - deliver a forged packet (fields taken from the input, usually close to
 *     what the connection expects: real path generations and PSNs, small
 *     MSNs, addresses near the region) to A or B, after encoding it with
 *     mrp_pkt_encode and decoding it with mrp_pkt_decode as the daemon would;
 *   - advance time and run the timers;
 *   - pump the real packets of one side, each delivered, dropped, CE-marked
 *     or held back for later (reordering, duplication, mutation);
 *   - run both sides over a lossless (or patterned-loss) network for a while;
 *   - post sends and receives, close, plane events, path steering, region
 *     access changes, an allocation failure.
 * After every operation: mrp_conn_check() on both, the guard zones, and the
 * completions (each work request completes once, per stream in posting
 * order; send completions carry the posted opcode and length; a successful
 * receive never claims more bytes than its buffer). After running the
 * timers and draining the output, the deadline must lie in the future (else
 * the caller would spin). At the end both are aborted (mrp_conn_close with
 * abort set), which must complete every posted request (unless an
 * allocation failed), then freed: every allocation must have been returned.
 * Any violation aborts.
 *
 * Nothing is carried from one input to the next: all state lives in one
 * struct allocated per input (the static buffers are scratch space written
 * before every use).
 *
 * Input format (for writing seeds by hand; bytes past the end read as 0):
 * a sequence of operations, each an opcode byte (taken mod 16) and its
 * arguments: 0-4 forge a packet (op_forge), 5-6 pump one side (op_pump:
 * side | (count - 1) << 1, then one fate byte per 4 packets, 2 bits each:
 * deliver, drop, deliver CE-marked, hold), 7 release a held packet, 8-9 run
 * both sides (steps, loss mask), 10 advance time, 11 advance to the next
 * deadline, 12 post a send, 13 post a receive, 14-15 misc (close, plane
 * events, path disable/enable/steer, region access, an allocation failure).
 * The seeds in corpus_conn/ are such programs. Build with
 * -DFUZZ_CONN_VERBOSE to print what an input did.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ratehint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MTU 256
#define NSTREAMS 16
#define NPATHS 8
#define NPLANES 2
#define PKTBUF (MRP_DATA_HDR_LEN + MTU)
#define FORGEBUF (MRP_DATA_HDR_LEN + MRP_MTU_MAX)
#define NHELD 32
#define GUARD 64
#define REGION_LEN 4096
#define NRBUF 6
#define RBUF_LEN 1024
#define SRC_LEN 4096
#define QLEN 256          /* expected completions per stream and kind */
#define PUMP_CAP 512      /* packets per side per drain in a run step */
#define MEM_LIMIT (256u << 20)
#define GUARD_BYTE 0xa5
#define NEVER UINT64_MAX

/* Arena layout: G region G rbuf0 G rbuf1 G ... rbuf5 G */
#define ARENA_LEN (GUARD + REGION_LEN + NRBUF * (GUARD + RBUF_LEN) + GUARD)

static void die(const char *what, int side)
{
	fprintf(stderr, "fuzz_conn: side %c: %s\n", side ? 'B' : 'A', what);
	abort();
}

/* ---- input reader: zeros once exhausted ------------------------------- */

typedef struct rd {
	const uint8_t *p;
	size_t n;
} rd;

static uint8_t u8(rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static uint16_t u16(rd *r)
{
	uint16_t v = u8(r);
	return (uint16_t)(v << 8 | u8(r));
}

static uint32_t u32(rd *r)
{
	uint32_t v = u16(r);
	return v << 16 | u16(r);
}

static uint64_t u64(rd *r)
{
	uint64_t v = u32(r);
	return v << 32 | u32(r);
}

/* ---- per-input state -------------------------------------------------- */

typedef struct wexp {
	uint64_t wr_id;
	uint32_t len;
	uint8_t opcode;
} wexp;

typedef struct fifo {
	wexp e[QLEN];
	uint32_t head, len;
} fifo;

typedef struct held {
	uint8_t data[PKTBUF];
	size_t len;
	uint8_t from, plane, ect;
} held;

typedef struct track {
	uint16_t gen[NPATHS];
	uint32_t nxt[NPATHS];      /* next PSN this side will use on the path */
	uint32_t probe_seq[NPATHS];
	uint8_t seen[NPATHS];
} track;

typedef struct side {
	mrp_conn *c;
	uint32_t local_id;
	uint64_t local_token;
	uint8_t *arena;
	uint8_t *region;
	uint64_t region_addr;
	uint32_t rkey;
	unsigned access;
	uint64_t seed;
	mrp_rh rh;
	mrp_rh_slot rh_slots[4];
	fifo sq[NSTREAMS], rq[NSTREAMS];
	track tk;
	uint64_t wrseq;
} side;

typedef struct fz {
	side s[2];
	uint64_t now;
	held h[NHELD];
	uint32_t nheld;
	/* allocator */
	size_t live_allocs, live_bytes;
	uint64_t nalloc, fail_at;
	int nomem; /* an allocation failed: completions may be late or missing */
	uint64_t ncqe[2], nforged, nforge_rejected;
	uint8_t src[SRC_LEN];
} fz;

/* ---- allocator: counts what is live, can fail on request -------------- */

typedef struct ahdr {
	size_t size;
	size_t magic;
} ahdr;

#define AMAGIC ((size_t)0x6d72706d656d2121ull)

static void *f_alloc(void *ud, size_t size)
{
	fz *f = ud;
	f->nalloc++;
	if ((f->fail_at && f->nalloc == f->fail_at) || size > MEM_LIMIT ||
	    f->live_bytes + size > MEM_LIMIT) {
		f->nomem = 1;
		return NULL;
	}
	ahdr *h = malloc(sizeof(ahdr) + size);
	if (!h)
		abort();
	h->size = size;
	h->magic = AMAGIC;
	f->live_allocs++;
	f->live_bytes += size;
	return h + 1;
}

static void f_free(void *ud, void *p)
{
	fz *f = ud;
	if (!p)
		return;
	ahdr *h = (ahdr *)p - 1;
	if (h->magic != AMAGIC || !f->live_allocs)
		die("free of a pointer the allocator did not hand out", 0);
	h->magic = 0;
	f->live_allocs--;
	f->live_bytes -= h->size;
	free(h);
}

static uint64_t f_rng(void *ud)
{
	uint64_t *s = ud;
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* ---- memory regions --------------------------------------------------- */

static uint8_t *rbuf(side *s, unsigned i)
{
	return s->arena + GUARD + REGION_LEN + GUARD + i * (RBUF_LEN + GUARD);
}

static uint8_t *mr_resolve(void *ud, uint32_t rkey, uint64_t addr, uint64_t len,
			   unsigned access, int *pnak)
{
	side *s = ud;
	if (rkey != s->rkey) {
		*pnak = MRP_NAK_INVALID_RKEY;
		return NULL;
	}
	if ((s->access & access) != access) {
		*pnak = MRP_NAK_ACCESS;
		return NULL;
	}
	if (addr < s->region_addr || len > REGION_LEN || addr - s->region_addr > REGION_LEN - len) {
		*pnak = MRP_NAK_OUT_OF_BOUNDS;
		return NULL;
	}
	return s->region + (addr - s->region_addr);
}

static void guards_init(side *s)
{
	memset(s->arena, GUARD_BYTE, ARENA_LEN);
	memset(s->region, 0, REGION_LEN);
	for (unsigned i = 0; i < NRBUF; i++)
		memset(rbuf(s, i), 0, RBUF_LEN);
}

static int all_guard(const uint8_t *p, size_t n)
{
	/* every byte equals the next, and the first is the guard byte */
	return p[0] == GUARD_BYTE && memcmp(p, p + 1, n - 1) == 0;
}

static void guards_check(side *s, int i)
{
	if (!all_guard(s->arena, GUARD) || !all_guard(s->region + REGION_LEN, GUARD))
		die("write outside the memory region (guard zone changed)", i);
	for (unsigned k = 0; k < NRBUF; k++)
		if (!all_guard(rbuf(s, k) + RBUF_LEN, GUARD))
			die("write outside a receive buffer (guard zone changed)", i);
}

/* ---- completions ------------------------------------------------------ */

static void fifo_push(fifo *q, uint64_t wr_id, uint32_t len, uint8_t opcode)
{
	q->e[(q->head + q->len++) % QLEN] = (wexp){ wr_id, len, opcode };
}

static void check_cqes(fz *f, int i)
{
	side *s = &f->s[i];
	mrp_cqe e[16];
	int n;
	while ((n = mrp_conn_poll_cq(s->c, e, 16)) > 0) {
		for (int k = 0; k < n; k++) {
			const mrp_cqe *q = &e[k];
			if (q->stream >= NSTREAMS)
				die("completion on a stream nothing was posted on", i);
			if (q->status > MRP_WC_REM_INVALID)
				die("completion with an unknown status", i);
			int recv = q->opcode == MRP_WC_RECV || q->opcode == MRP_WC_RECV_WRITE_IMM;
			fifo *ff = recv ? &s->rq[q->stream] : &s->sq[q->stream];
			if (!ff->len)
				die("completion of nothing outstanding (twice, or invented)", i);
			wexp *w = &ff->e[ff->head];
			if (w->wr_id != q->wr_id)
				die("completion out of posting order on its stream", i);
			if (!recv && q->opcode != w->opcode)
				die("send completion with another opcode than posted", i);
			if (!recv && q->status == MRP_WC_SUCCESS && q->byte_len != w->len)
				die("send completion with another length than posted", i);
			if (q->opcode == MRP_WC_RECV && q->status == MRP_WC_SUCCESS &&
			    q->byte_len > w->len)
				die("receive completion longer than its buffer", i);
			ff->head = (ff->head + 1) % QLEN;
			ff->len--;
			f->ncqe[i]++;
		}
	}
}

static void check_all(fz *f)
{
	for (int i = 0; i < 2; i++) {
		char err[160];
		if (mrp_conn_check(f->s[i].c, err, sizeof(err)) != 0)
			die(err, i);
		check_cqes(f, i);
		guards_check(&f->s[i], i);
		mrp_event ev;
		while (mrp_conn_poll_event(f->s[i].c, &ev))
			if (ev.path_id >= NPATHS || ev.plane >= NPLANES ||
			    ev.old_state > MRP_PATH_CLOSED || ev.new_state > MRP_PATH_CLOSED)
				die("event names a path, plane or state that does not exist", i);
	}
}

/* ---- tracking what each side sends ------------------------------------ */

static void note_tx(side *s, const mrp_pkt *p)
{
	uint16_t id = p->hdr.path_id;
	if (id >= NPATHS)
		return;
	track *t = &s->tk;
	if (mrp_op_is_data(p->hdr.opcode)) {
		if (!t->seen[id] || t->gen[id] != p->hdr.path_gen) {
			t->gen[id] = p->hdr.path_gen;
			t->nxt[id] = 0;
		}
		t->seen[id] = 1;
		if ((int32_t)(p->hdr.psn + 1 - t->nxt[id]) > 0)
			t->nxt[id] = p->hdr.psn + 1;
	} else if (p->hdr.opcode == MRP_OP_PROBE) {
		if (t->gen[id] != p->hdr.path_gen)
			t->nxt[id] = 0;
		t->seen[id] = 1;
		t->gen[id] = p->hdr.path_gen;
		t->probe_seq[id] = p->u.probe.probe_seq;
	}
}

/* The generation side s uses on its path id (for ACKs and NAKs to it). */
static uint16_t cur_gen(side *s, uint16_t id)
{
	mrp_path_info pi;
	if (id < NPATHS && mrp_conn_path_info(s->c, id, &pi) == 0)
		return pi.gen;
	return id < NPATHS ? s->tk.gen[id] : 0;
}

/* ---- delivery --------------------------------------------------------- */

static void deliver(fz *f, int to, const uint8_t *buf, size_t len, unsigned plane,
		    int ce, int must_decode)
{
	mrp_pkt p;
	ssize_t n = mrp_pkt_decode(&p, buf, len);
	if (n < 0) {
		if (must_decode)
			die("the engine wrote a packet the decoder rejects", !to);
		return;
	}
	if ((size_t)n != len)
		die("decode returned another length", to);
	int rv = mrp_conn_read_pkt(f->s[to].c, &p, plane, ce, f->now);
	if (rv != 0 && rv != MRP_ERR_TOKEN && rv != MRP_ERR_RANGE && rv != MRP_ERR_STATE &&
	    rv != MRP_ERR_NOCONN && rv != MRP_ERR_NOMEM)
		die("read_pkt returned an undocumented code", to);
}

/* Write one packet of side i; checks it. Returns its length or 0. */
static size_t write_one(fz *f, int i, uint8_t *buf, mrp_tx_info *ti)
{
	side *s = &f->s[i];
	ssize_t n = mrp_conn_write_pkt(s->c, ti, buf, PKTBUF, f->now);
	if (n < 0)
		die("write_pkt failed", i);
	if (n == 0)
		return 0;
	if ((size_t)n > PKTBUF)
		die("write_pkt claims more than the buffer", i);
	mrp_pkt p;
	if (mrp_pkt_decode(&p, buf, (size_t)n) != n)
		die("the engine wrote a packet the decoder rejects", i);
	if (p.hdr.dst_conn_id != f->s[!i].local_id || p.hdr.src_conn_id != s->local_id)
		die("packet with the wrong connection ids", i);
	if (p.hdr.token != f->s[!i].local_token &&
	    !(p.hdr.opcode == MRP_OP_NAK && p.u.nak.reason == MRP_NAK_UNKNOWN_CONN))
		die("packet with the wrong token", i);
	if (ti->plane >= NPLANES || ti->path_id >= NPATHS)
		die("tx info names a plane or path that does not exist", i);
	if (mrp_op_is_data(p.hdr.opcode) && p.hdr.path_id != ti->path_id)
		die("data packet on another path than its header says", i);
	note_tx(s, &p);
	return (size_t)n;
}

static void hold(fz *f, int from, const uint8_t *buf, size_t len, const mrp_tx_info *ti)
{
	held *h = &f->h[f->nheld++];
	memcpy(h->data, buf, len);
	h->len = len;
	h->from = (uint8_t)from;
	h->plane = ti->plane;
	h->ect = ti->ect;
}

/* ---- timers ----------------------------------------------------------- */

static uint64_t min_deadline(fz *f)
{
	uint64_t a = mrp_conn_deadline(f->s[0].c), b = mrp_conn_deadline(f->s[1].c);
	return a < b ? a : b;
}

static void run_due(fz *f, int always)
{
	for (int i = 0; i < 2; i++)
		if (always || mrp_conn_deadline(f->s[i].c) <= f->now)
			mrp_conn_handle_timeout(f->s[i].c, f->now);
}

static void advance(fz *f, uint64_t delta)
{
	if (delta > (1ull << 50) - f->now)
		delta = 0; /* keep far from wrapping: ~13 simulated days at most */
	f->now += delta;
}

/* ---- operations ------------------------------------------------------- */

static uint16_t pick_path(rd *r)
{
	uint8_t b = u8(r);
	if (b < 248)
		return b % NPATHS;
	return b == 255 ? 0xffff : (uint16_t)(NPATHS + (b - 248) * 37);
}

static uint16_t pick_stream(rd *r)
{
	uint8_t b = u8(r);
	return b < 248 ? b % NSTREAMS : (uint16_t)(NSTREAMS + (b - 248) * 1000);
}

static int16_t small_delta(rd *r)
{
	uint8_t b = u8(r);
	return b < 208 ? 0 : (int16_t)(b - 232); /* mostly 0, else -24..23 */
}

static uint32_t pick_msn(rd *r)
{
	uint8_t b = u8(r);
	if (b >= 250)
		return u32(r);
	return b % 24;
}

static uint8_t fpay[MRP_MTU_MAX];
static uint8_t fbuf[FORGEBUF];

/* Build a packet from the input, encode it, decode it, deliver it. */
static void op_forge(fz *f, rd *r)
{
	static const uint8_t ops[] = {
		MRP_OP_WRITE, MRP_OP_WRITE_IMM, MRP_OP_SEND, MRP_OP_SEND_IMM,
		MRP_OP_ACK, MRP_OP_NAK, MRP_OP_PROBE, MRP_OP_PROBE_ACK,
		MRP_OP_READ_REQ, MRP_OP_READ_RESP, MRP_OP_SEND, MRP_OP_NAK,
		MRP_OP_CLOSE, MRP_OP_RESET, MRP_OP_CONNECT, MRP_OP_REJECT,
	};
	uint8_t sel = u8(r);
	int to = sel & 1;
	side *T = &f->s[to], *F = &f->s[!to];
	uint8_t op = ops[(sel >> 1) % 16];
	mrp_pkt p;
	memset(&p, 0, sizeof(p));
	p.hdr.version = MRP_VERSION;
	p.hdr.opcode = op;
	uint8_t idb = u8(r);
	p.hdr.dst_conn_id = (idb & 0x1f) == 1 ? T->local_id + 1 : T->local_id;
	p.hdr.src_conn_id = (idb & 0x1f) == 2 ? F->local_id + 7 : F->local_id;
	p.hdr.token = (idb & 0x1f) == 3 ? T->local_token ^ 0x100 : T->local_token;
	unsigned plane = (idb >> 5) == 7 ? 2 : (idb >> 5) & 1;
	int ce = (idb >> 6) & 1;
	if (op < MRP_OP_CONNECT) {
		p.hdr.path_id = pick_path(r);
		uint16_t base = p.hdr.path_id < NPATHS ? cur_gen(F, p.hdr.path_id) : 0;
		p.hdr.path_gen = (uint16_t)(base + small_delta(r));
	}
	uint8_t b;
	switch (op) {
	case MRP_OP_WRITE:
	case MRP_OP_WRITE_IMM:
	case MRP_OP_SEND:
	case MRP_OP_SEND_IMM:
	case MRP_OP_READ_REQ:
	case MRP_OP_READ_RESP: {
		mrp_data *d = &p.u.data;
		uint16_t id = p.hdr.path_id;
		uint32_t nxt = id < NPATHS ? F->tk.nxt[id] : 0;
		p.hdr.psn = nxt + (uint32_t)(int32_t)small_delta(r);
		if (u8(r) >= 250)
			p.hdr.psn = u32(r);
		d->stream_id = pick_stream(r);
		d->msn = pick_msn(r);
		uint8_t lb = u8(r);
		switch (lb & 7) {
		case 0: d->msg_len = 0; break;
		case 7: d->msg_len = u32(r) % (MRP_MSG_MAX + 1); break;
		default: d->msg_len = u16(r) % (SRC_LEN + 1); break;
		}
		uint32_t npk = d->msg_len ? (d->msg_len + MTU - 1) / MTU : 1;
		uint32_t seg = u8(r);
		seg = (lb & 0x80) && npk > 1 ? npk - 1 : seg % npk;
		d->offset = seg * MTU;
		if (lb & 0x08)
			d->offset += u8(r) % 64; /* misaligned */
		if (d->offset > d->msg_len)
			d->offset = d->msg_len;
		uint32_t plen = d->msg_len - d->offset < MTU ? d->msg_len - d->offset : MTU;
		if (lb & 0x10) {
			int32_t v = (int32_t)plen + (int8_t)u8(r);
			plen = v < 0 ? 0 : v > MRP_MTU_MAX ? MRP_MTU_MAX : (uint32_t)v;
		}
		d->payload_len = (uint16_t)plen;
		if (d->offset == 0)
			p.hdr.flags |= MRP_F_FIRST;
		if ((uint64_t)d->offset + plen == d->msg_len)
			p.hdr.flags |= MRP_F_LAST;
		p.hdr.flags |= (uint16_t)(lb & 0x60 ? 0 : u8(r) & (MRP_F_RETX | MRP_F_ACK_REQ));
		if (op != MRP_OP_WRITE && !mrp_op_is_read(op))
			d->recv_idx = (b = u8(r)) >= 250 ? u32(r) : b % 8;
		if (op == MRP_OP_WRITE_IMM || op == MRP_OP_SEND_IMM)
			d->imm = u32(r);
		if (op == MRP_OP_WRITE || op == MRP_OP_WRITE_IMM) {
			b = u8(r);
			d->rkey = (b & 7) == 0 ? T->rkey + 1 : T->rkey;
			switch ((b >> 3) & 3) {
			case 0:
			case 1: d->remote_addr = T->region_addr + u16(r) % REGION_LEN; break;
			case 2: d->remote_addr = T->region_addr + REGION_LEN - u16(r) % 1024; break;
			default:
				d->remote_addr = (b & 0x20) ? u64(r) : T->region_addr - u8(r);
				break;
			}
		}
		if (mrp_op_is_read(op)) {
			/* a READ_REQ names the target's region, a READ_RESP echoes
			 * the region of the sender the target's READ asked for */
			side *src = op == MRP_OP_READ_REQ ? T : F;
			b = u8(r);
			d->rkey = (b & 7) == 0 ? src->rkey + 1 : src->rkey;
			d->remote_addr = src->region_addr + u16(r) % REGION_LEN;
			if (b & 0x08)
				d->remote_addr = u64(r);
		}
		if (op == MRP_OP_READ_REQ && !(lb & 0x08)) {
			/* mostly well formed: no payload, FIRST and LAST */
			d->offset = 0;
			d->payload_len = 0;
			p.hdr.flags |= MRP_F_FIRST | MRP_F_LAST;
		}
		d->ts_ns = (b = u8(r)) == 0 ? 0 : f->now - (f->now < b * 1000u ? f->now : b * 1000u);
		memset(fpay, u8(r), sizeof(fpay));
		d->payload = fpay;
		break;
	}
	case MRP_OP_ACK: {
		mrp_ack *a = &p.u.ack;
		a->acked_path_id = pick_path(r);
		uint16_t id = a->acked_path_id;
		a->acked_path_gen = (uint16_t)((id < NPATHS ? cur_gen(T, id) : 0) + small_delta(r));
		uint32_t nxt = id < NPATHS ? T->tk.nxt[id] : 0;
		b = u8(r);
		if (b >= 250)
			a->next_psn = u32(r);
		else
			a->next_psn = nxt - b % 20 + (b >= 240 ? 30 : 0);
		switch ((b = u8(r)) & 3) {
		case 0: memset(a->sack, 0xff, sizeof(a->sack)); break;
		case 1: break;
		case 2:
			for (unsigned k = 0; k < MRP_SACK_BYTES; k++)
				a->sack[k] = u8(r);
			break;
		default:
			memset(a->sack, 0xff, sizeof(a->sack));
			for (unsigned k = 0; k < 4; k++)
				a->sack[k] = u8(r);
			break;
		}
		a->ce_count = (b & 0x4) ? u32(r) : u8(r) % 8;
		a->rcv_count = (b & 0x8) ? u32(r) : u8(r);
		a->ack_delay_ns = (b & 0x10) ? u32(r) : u8(r) * 100u;
		b = u8(r);
		if (b == 255)
			a->ts_echo_ns = u64(r);
		else if (b)
			a->ts_echo_ns = f->now - (f->now < b * 1000u ? f->now : b * 1000u);
		b = u8(r);
		a->rate_hint_mbps = b == 0 ? 0 : b < 128 ? b * 100u : u32(r);
		break;
	}
	case MRP_OP_NAK: {
		mrp_nak *k = &p.u.nak;
		k->reason = (uint8_t)(1 + u8(r) % MRP_NAK_MAX);
		k->stream_id = pick_stream(r);
		k->msn = pick_msn(r);
		k->offset = (u8(r) % 20) * MTU;
		k->nak_path_id = pick_path(r);
		uint16_t id = k->nak_path_id;
		k->nak_path_gen = (uint16_t)((id < NPATHS ? cur_gen(T, id) : 0) + small_delta(r));
		uint32_t nxt = id < NPATHS ? T->tk.nxt[id] : 0;
		b = u8(r);
		k->nak_psn = b == 255 ? u32(r) : nxt - 1 - b % 24;
		if (k->reason == MRP_NAK_RNR)
			k->retry_after_us = u8(r);
		if (k->reason == MRP_NAK_UNKNOWN_CONN) {
			p.hdr.token = 0;
			k->token_echo = u8(r) & 1 ? F->local_token : F->local_token + 3;
		}
		break;
	}
	case MRP_OP_PROBE:
		p.u.probe.probe_seq = u16(r);
		p.u.probe.ts_ns = f->now;
		p.hdr.flags = MRP_F_ACK_REQ;
		break;
	case MRP_OP_PROBE_ACK: {
		mrp_probe_ack *k = &p.u.probe_ack;
		k->probed_path_id = pick_path(r);
		uint16_t id = k->probed_path_id;
		k->probed_path_gen = (uint16_t)((id < NPATHS ? cur_gen(T, id) : 0) + small_delta(r));
		k->probe_seq = (id < NPATHS ? T->tk.probe_seq[id] : 0) + (uint32_t)(int32_t)small_delta(r);
		k->ack_delay_ns = u16(r);
		b = u8(r);
		k->ts_echo_ns = f->now - (f->now < b * 1000u ? f->now : b * 1000u);
		break;
	}
	case MRP_OP_CLOSE:
		b = u8(r);
		p.hdr.flags = b & 1 ? MRP_F_REPLY : 0;
		p.u.close.reason = (uint16_t)((b >> 1) % (MRP_CLOSE_MAX + 1));
		break;
	case MRP_OP_RESET:
		p.u.close.reason = (uint16_t)(u8(r) % (MRP_CLOSE_MAX + 1));
		break;
	case MRP_OP_REJECT:
		p.u.reject.reason = MRP_REJ_REFUSED;
		p.u.reject.min_version = p.u.reject.max_version = 1;
		p.hdr.src_conn_id = 0;
		break;
	default: /* CONNECT: the caller's business; must be refused */
		p.hdr.dst_conn_id = 0;
		p.hdr.token = 0;
		break;
	}
	ssize_t n = mrp_pkt_encode(fbuf, sizeof(fbuf), &p);
	f->nforged++;
	if (n < 0) {
		f->nforge_rejected++;
		return; /* a packet no daemon would hand over */
	}
	deliver(f, to, fbuf, (size_t)n, plane, ce, 1);
}

/* Write up to k packets of one side; each is delivered, dropped, marked or
 * held back as the input says. */
static void op_pump(fz *f, rd *r)
{
	uint8_t b = u8(r);
	int i = b & 1;
	unsigned k = 1 + (b >> 1) % 32;
	uint8_t buf[PKTBUF];
	uint8_t fate = 0;
	for (unsigned j = 0; j < k; j++) {
		mrp_tx_info ti;
		size_t n = write_one(f, i, buf, &ti);
		if (!n)
			break;
		if (j % 4 == 0)
			fate = u8(r);
		switch ((fate >> (2 * (j % 4))) & 3) {
		case 0:
			deliver(f, !i, buf, n, ti.plane, 0, 1);
			break;
		case 1:
			break; /* lost */
		case 2:
			deliver(f, !i, buf, n, ti.plane, ti.ect, 1);
			break;
		default:
			if (f->nheld < NHELD)
				hold(f, i, buf, n, &ti);
			else
				deliver(f, !i, buf, n, ti.plane, 0, 1);
			break;
		}
	}
}

/* Deliver a held packet late, maybe changed, maybe twice. */
static void op_release(fz *f, rd *r)
{
	if (!f->nheld)
		return;
	uint8_t b = u8(r);
	uint32_t idx = b % f->nheld;
	held h = f->h[idx];
	if (!(b & 0x80))
		f->h[idx] = f->h[--f->nheld]; /* else it stays: a duplicate later */
	uint8_t m = u8(r);
	int to = !h.from;
	if (m % 12 == 0 || m % 12 > 10) {
		deliver(f, to, h.data, h.len, h.plane, (m >> 4) & h.ect, 1);
		return;
	}
	mrp_pkt p;
	if (mrp_pkt_decode(&p, h.data, h.len) < 0)
		die("held packet does not decode", h.from);
	int data = mrp_op_is_data(p.hdr.opcode);
	int8_t d = (int8_t)u8(r);
	switch (m % 12) {
	case 1: p.hdr.psn += (uint32_t)(int32_t)d; break;
	case 2: p.hdr.path_gen = (uint16_t)(p.hdr.path_gen + d); break;
	case 3: p.hdr.path_id = pick_path(r); break;
	case 4:
		if (data)
			p.u.data.msn += (uint32_t)(int32_t)d;
		else if (p.hdr.opcode == MRP_OP_ACK)
			p.u.ack.next_psn += (uint32_t)(int32_t)d;
		break;
	case 5:
		if (data)
			p.u.data.recv_idx += (uint32_t)(int32_t)d;
		else if (p.hdr.opcode == MRP_OP_ACK)
			p.u.ack.sack[(uint8_t)d % MRP_SACK_BYTES] ^= u8(r);
		break;
	case 6:
		if (data)
			p.u.data.stream_id = pick_stream(r);
		else if (p.hdr.opcode == MRP_OP_NAK)
			p.u.nak.reason = (uint8_t)(1 + (uint8_t)d % MRP_NAK_MAX);
		break;
	case 7: p.hdr.token ^= (uint64_t)(uint8_t)d; break;
	case 8:
		if (data && (p.hdr.opcode == MRP_OP_WRITE || p.hdr.opcode == MRP_OP_WRITE_IMM ||
			     mrp_op_is_read(p.hdr.opcode))) {
			p.u.data.remote_addr += (uint64_t)(int64_t)d * 16;
			if (d & 1)
				p.u.data.rkey ^= 1;
		} else if (p.hdr.opcode == MRP_OP_ACK) {
			p.u.ack.acked_path_gen = (uint16_t)(p.u.ack.acked_path_gen + d);
		}
		break;
	case 9:
		if (data) {
			p.u.data.msg_len += (uint32_t)(int32_t)d;
		} else if (p.hdr.opcode == MRP_OP_ACK) {
			p.u.ack.ce_count += (uint32_t)(int32_t)d;
			p.u.ack.rcv_count += u8(r);
		}
		break;
	default:
		if (data)
			p.u.data.ts_ns += (uint64_t)(int64_t)d * 1000;
		else if (p.hdr.opcode == MRP_OP_ACK)
			p.u.ack.ts_echo_ns += (uint64_t)(int64_t)d * 1000;
		break;
	}
	ssize_t n = mrp_pkt_encode(fbuf, sizeof(fbuf), &p);
	if (n < 0)
		return;
	deliver(f, to, fbuf, (size_t)n, h.plane, 0, 1);
}

static void op_post_send(fz *f, rd *r)
{
	uint8_t b = u8(r);
	int i = b & 1;
	side *s = &f->s[i];
	mrp_wr wr;
	memset(&wr, 0, sizeof(wr));
	unsigned kind = (b >> 1) % 5;
	wr.opcode = kind == 4 ? MRP_WR_READ : (uint8_t)(MRP_WR_WRITE + kind);
	wr.stream = pick_stream(r);
	wr.len = u16(r) % (SRC_LEN + 1);
	wr.local = f->src;
	if (wr.opcode == MRP_WR_READ) {
		/* into the last receive buffer, whose guards catch an overrun */
		wr.len %= RBUF_LEN + 1;
		wr.local = NULL;
		wr.sink = rbuf(s, NRBUF - 1);
	}
	wr.imm = (wr.opcode == MRP_WR_WRITE_IMM || wr.opcode == MRP_WR_SEND_IMM) ? u32(r) : 0;
	if (wr.opcode == MRP_WR_WRITE || wr.opcode == MRP_WR_WRITE_IMM ||
	    wr.opcode == MRP_WR_READ) {
		side *peer = &f->s[!i];
		uint32_t off = u16(r) % REGION_LEN;
		if (!(b & 0x20) && off + wr.len > REGION_LEN)
			off = REGION_LEN - wr.len;
		wr.remote_addr = peer->region_addr + off;
		wr.rkey = (b & 0x40) && (b & 0x80) ? peer->rkey ^ 2 : peer->rkey;
	}
	wr.wr_id = (uint64_t)i << 48 | ++s->wrseq;
	if (wr.stream < NSTREAMS && s->sq[wr.stream].len == QLEN)
		return;
	int rv = mrp_conn_post_send(s->c, &wr, f->now);
	if (rv == 0) {
		if (wr.stream >= NSTREAMS)
			die("post_send accepted a stream beyond max_streams", i);
		fifo_push(&s->sq[wr.stream], wr.wr_id, wr.len, wr.opcode);
	}
}

static void op_post_recv(fz *f, rd *r)
{
	uint8_t b = u8(r);
	int i = b & 1;
	side *s = &f->s[i];
	uint16_t sid = pick_stream(r);
	unsigned k = (b >> 1) % NRBUF;
	uint32_t len = u16(r) % (RBUF_LEN + 1);
	uint64_t wr_id = (uint64_t)i << 48 | 1ull << 40 | ++s->wrseq;
	if (sid < NSTREAMS && s->rq[sid].len == QLEN)
		return;
	int rv = mrp_conn_post_recv(s->c, sid, wr_id, rbuf(s, k), len, f->now);
	if (rv == 0) {
		if (sid >= NSTREAMS)
			die("post_recv accepted a stream beyond max_streams", i);
		fifo_push(&s->rq[sid], wr_id, len, 0);
	}
}

/* Drain side i into scratch[i] from slot n on; returns the new count and
 * whether the output ran dry. */
static uint8_t scratch[2][PUMP_CAP][PKTBUF];
static size_t scratch_len[2][PUMP_CAP];
static uint8_t scratch_plane[2][PUMP_CAP];

static unsigned drain(fz *f, int i, unsigned n, int *dry)
{
	*dry = 0;
	while (n < PUMP_CAP) {
		mrp_tx_info ti;
		size_t len = write_one(f, i, scratch[i][n], &ti);
		if (!len) {
			*dry = 1;
			break;
		}
		scratch_len[i][n] = len;
		scratch_plane[i][n] = ti.plane;
		n++;
	}
	return n;
}

/* Run both sides over an instant network for a number of steps, with a
 * loss pattern from the input (0: lossless). */
static void op_run(fz *f, rd *r)
{
	unsigned steps = 1 + u8(r) % 64;
	uint8_t loss = u8(r);
	loss = loss >= 128 ? loss : 0;
	for (unsigned st = 0; st < steps; st++) {
		run_due(f, 0);
		unsigned n[2];
		for (int i = 0; i < 2; i++) {
			mrp_conn *c = f->s[i].c;
			int dry;
			n[i] = drain(f, i, 0, &dry);
			/* Timers run and output drained: nothing may stay due. A
			 * spurious wakeup or two is tolerated, a busy loop is not. */
			for (int k = 0; k < 2 && dry && mrp_conn_deadline(c) <= f->now; k++) {
				mrp_conn_handle_timeout(c, f->now);
				n[i] = drain(f, i, n[i], &dry);
			}
			if (dry && mrp_conn_deadline(c) <= f->now)
				die("deadline stays in the past after timers and output: busy loop", i);
		}
		for (int i = 0; i < 2; i++)
			for (unsigned k = 0; k < n[i]; k++)
				if (!((loss >> (k % 8)) & 1))
					deliver(f, !i, scratch[i][k], scratch_len[i][k],
						scratch_plane[i][k], 0, 1);
		check_all(f);
		if (!n[0] && !n[1]) {
			uint64_t dl = min_deadline(f);
			if (dl == NEVER)
				break;
			advance(f, dl > f->now ? dl - f->now : 0);
		} else {
			advance(f, 1000);
		}
	}
}

static void op_time(fz *f, rd *r)
{
	uint8_t b = u8(r);
	uint64_t delta = (uint64_t)(u16(r) + 1) << (b % 24);
	advance(f, delta);
	run_due(f, b & 0x80);
}

static void op_to_deadline(fz *f)
{
	uint64_t dl = min_deadline(f);
	if (dl != NEVER && dl > f->now)
		advance(f, dl - f->now);
	run_due(f, 0);
}

static void op_misc(fz *f, rd *r)
{
	uint8_t b = u8(r);
	int i = b & 1;
	side *s = &f->s[i];
	switch ((b >> 1) % 8) {
	case 0:
		mrp_conn_close(s->c, (b >> 4) & 1, f->now);
		break;
	case 1:
	case 2:
		mrp_conn_plane_event(s->c, u8(r) % 3, u8(r) % 5, f->now);
		break;
	case 3:
		mrp_conn_path_disable(s->c, pick_path(r), f->now);
		break;
	case 4:
		mrp_conn_path_enable(s->c, pick_path(r), f->now);
		break;
	case 5: {
		uint16_t id = pick_path(r);
		uint8_t sb = u8(r);
		uint16_t sport = sb == 0 ? 0 : sb == 1 ? 100 : (uint16_t)(49152 + u16(r) % 16384);
		mrp_conn_path_steer(s->c, id, sport, (int)(u8(r) % 4) - 1, f->now);
		break;
	}
	case 6:
		s->access = u8(r) & (MRP_ACCESS_LOCAL_WRITE | MRP_ACCESS_REMOTE_WRITE |
				     MRP_ACCESS_REMOTE_READ);
		break;
	default:
		f->fail_at = f->nalloc + 1 + u8(r) % 32;
		break;
	}
}

/* ---- setup and teardown ----------------------------------------------- */

static int setup(fz *f)
{
	for (size_t k = 0; k < SRC_LEN; k++)
		f->src[k] = (uint8_t)(k * 31 + 7);
	for (int i = 0; i < 2; i++) {
		side *s = &f->s[i];
		s->local_id = 100 + (uint32_t)i;
		s->local_token = 0x1111000011110000ull + (uint64_t)i;
		s->arena = malloc(ARENA_LEN);
		if (!s->arena)
			abort();
		s->region = s->arena + GUARD;
		s->region_addr = 0x10000000ull * (uint64_t)(i + 1);
		s->rkey = 0xabc0u + (uint32_t)i;
		s->access = MRP_ACCESS_REMOTE_WRITE | MRP_ACCESS_LOCAL_WRITE | MRP_ACCESS_REMOTE_READ;
		s->seed = 0x9e3779b97f4a7c15ull + (uint64_t)i;
		guards_init(s);
		if (mrp_rh_init(&s->rh, s->rh_slots, 4, 10000000000ull, 0) != 0)
			abort();
	}
	for (int i = 0; i < 2; i++) {
		side *s = &f->s[i];
		mrp_conn_params p;
		mrp_conn_params_default(&p);
		p.local_conn_id = s->local_id;
		p.peer_conn_id = f->s[!i].local_id;
		p.local_token = s->local_token;
		p.peer_token = f->s[!i].local_token;
		p.mtu = MTU;
		p.max_streams = NSTREAMS;
		p.max_paths = NPATHS;
		p.initial_paths = 4;
		p.nplanes = NPLANES;
		p.probe_idle_ns = 1000000;
		p.msg_window = 16;
		p.rh = &s->rh;
		p.read = 1;
		p.rd_max = 4;
		p.rd_dest_max = 2 + 6 * i; /* A serves few READs at once, B more */
		p.expedite_max = 1024;     /* the expedited class (SPEC 6.7): some */
		p.expedite_budget = 1536;  /* messages, not all queued ones */
		mrp_mem mem = { f_alloc, f_free, f };
		mrp_rng rng = { f_rng, &s->seed };
		mrp_mr_ops mr = { mr_resolve, s };
		if (mrp_conn_new(&s->c, &p, &mem, &rng, &mr, 0) != 0)
			die("mrp_conn_new failed", i);
	}
	/* B posts receives on streams 0-2, A a few sends of each kind. */
	side *a = &f->s[0], *b = &f->s[1];
	static const struct { uint16_t sid; unsigned buf; uint32_t len; } rv[] = {
		{ 0, 0, 1024 }, { 1, 1, 1024 }, { 1, 2, 700 }, { 2, 3, 0 }, { 0, 4, 512 },
	};
	for (unsigned k = 0; k < sizeof(rv) / sizeof(rv[0]); k++) {
		uint64_t id = 1ull << 48 | 1ull << 40 | ++b->wrseq;
		if (mrp_conn_post_recv(b->c, rv[k].sid, id, rbuf(b, rv[k].buf), rv[k].len, 0) != 0)
			die("initial post_recv failed", 1);
		fifo_push(&b->rq[rv[k].sid], id, rv[k].len, 0);
	}
	static const mrp_wr wrs[] = {
		{ .opcode = MRP_WR_WRITE, .stream = 0, .len = 700, .remote_addr = 100 },
		{ .opcode = MRP_WR_SEND, .stream = 1, .len = 300 },
		{ .opcode = MRP_WR_SEND_IMM, .stream = 1, .len = 600, .imm = 0x55 },
		{ .opcode = MRP_WR_WRITE_IMM, .stream = 2, .len = 513, .remote_addr = 2048, .imm = 7 },
		{ .opcode = MRP_WR_SEND, .stream = 0, .len = 512 },
		{ .opcode = MRP_WR_READ, .stream = 2, .len = 700, .remote_addr = 1024 },
	};
	for (unsigned k = 0; k < sizeof(wrs) / sizeof(wrs[0]); k++) {
		mrp_wr w = wrs[k];
		w.wr_id = ++a->wrseq;
		w.local = f->src;
		if (w.opcode == MRP_WR_READ) { /* every run starts with a READ in flight */
			w.local = NULL;
			w.sink = rbuf(a, NRBUF - 1);
		}
		if (w.opcode == MRP_WR_WRITE || w.opcode == MRP_WR_WRITE_IMM ||
		    w.opcode == MRP_WR_READ) {
			w.remote_addr += b->region_addr;
			w.rkey = b->rkey;
		}
		if (mrp_conn_post_send(a->c, &w, 0) != 0)
			die("initial post_send failed", 0);
		fifo_push(&a->sq[w.stream], w.wr_id, w.len, w.opcode);
	}
	return 0;
}

static void teardown(fz *f)
{
#ifdef FUZZ_CONN_VERBOSE
	for (int i = 0; i < 2; i++) {
		mrp_conn_stats st;
		mrp_conn_get_stats(f->s[i].c, &st);
		fprintf(stderr, "%c: now %llu tx %llu rx %llu retx %llu naks %llu/%llu cqes %llu closed %d\n",
			i ? 'B' : 'A', (unsigned long long)f->now, (unsigned long long)st.tx_pkts,
			(unsigned long long)st.rx_pkts, (unsigned long long)st.retx_pkts,
			(unsigned long long)st.naks_sent, (unsigned long long)st.naks_rcvd,
			(unsigned long long)f->ncqe[i], mrp_conn_is_closed(f->s[i].c));
	}
	fprintf(stderr, "forged %llu (%llu not encodable)\n", (unsigned long long)f->nforged,
		(unsigned long long)f->nforge_rejected);
#endif
	/* An abortive close flushes: every request posted must now have
	 * completed (a graceful one would first finish the work). */
	for (int i = 0; i < 2; i++)
		mrp_conn_close(f->s[i].c, 1, f->now);
	check_all(f);
	if (!f->nomem)
		for (int i = 0; i < 2; i++)
			for (unsigned k = 0; k < NSTREAMS; k++)
				if (f->s[i].sq[k].len || f->s[i].rq[k].len)
					die("a posted request never completed, even after close", i);
	for (int i = 0; i < 2; i++) {
		mrp_conn_del(f->s[i].c);
		guards_check(&f->s[i], i);
		free(f->s[i].arena);
	}
	if (f->live_allocs || f->live_bytes)
		die("memory leaked: allocations still live after mrp_conn_del", 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz *f = calloc(1, sizeof(*f));
	if (!f)
		abort();
	rd r = { data, size };
	setup(f);
	check_all(f);
	unsigned ops = 0;
	while (r.n && ops++ < 4096) {
		uint8_t op = u8(&r);
		switch (op % 16) {
		case 0: case 1: case 2: case 3: case 4:
			op_forge(f, &r);
			break;
		case 5: case 6:
			op_pump(f, &r);
			break;
		case 7:
			op_release(f, &r);
			break;
		case 8: case 9:
			op_run(f, &r);
			break;
		case 10:
			op_time(f, &r);
			break;
		case 11:
			op_to_deadline(f);
			break;
		case 12:
			op_post_send(f, &r);
			break;
		case 13:
			op_post_recv(f, &r);
			break;
		default:
			op_misc(f, &r);
			break;
		}
		check_all(f);
	}
	teardown(f);
	free(f);
	return 0;
}
