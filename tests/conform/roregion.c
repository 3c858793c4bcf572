/*
 * roregion: an application of the reference daemon that exposes a memory
 * region WITHOUT remote write access, for metaroce-conform's nak.access
 * case (SPEC 5.3: a WRITE into a region whose rights do not allow it is
 * NAKed ACCESS).
 *
 *   METAROCE_APP_SOCKET=... roregion SERVICE_HEX
 *
 * It registers 8 KiB with local write and remote read rights only,
 * listens on SERVICE, prints "ready SERVICE:RKEY:ADDR:LEN" (the argument
 * of metaroce-conform --ro-region) and keeps every connection it is given
 * until the peer ends it, until killed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metaroce.h>

#define LEN 8192

static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "roregion: %s: %s\n", what, mrc_strerror(rc));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	char *end = NULL;
	unsigned long svc = argc == 2 ? strtoul(argv[1], &end, 16) : 0;
	if (argc != 2 || !*argv[1] || *end || svc == 0 || svc > 0xffffffffu) {
		fprintf(stderr, "usage: roregion SERVICE_HEX\n");
		return 2;
	}
	mrc_session *s;
	mrc_ctx *ctx;
	void *mem;
	mrc_mr *mr;
	mrc_listener *l;
	check(mrc_session_open(NULL, "conform-roregion", &s), "attach to metarocd");
	check(mrc_ctx_new(s, 16, 0, &ctx), "context");
	check(mrc_alloc(s, LEN, &mem), "alloc");
	memset(mem, 0x5a, LEN);
	check(mrc_reg_mr(s, mem, LEN, MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_READ, &mr),
	      "register");
	check(mrc_listen(s, (uint32_t)svc, ctx, 4, &l), "listen");
	printf("ready %08lx:%08x:%" PRIx64 ":%u\n", svc, mrc_mr_rkey(mr),
	       (uint64_t)(uintptr_t)mem, LEN);
	fflush(stdout);
	for (;;) {
		mrc_event ev;
		int rc = mrc_get_event(s, &ev, -1);
		if (rc == MRC_ERR_TIMEOUT)
			continue;
		check(rc, "event");
		if (ev.type == MRC_EV_CLOSED || ev.type == MRC_EV_RESET || ev.type == MRC_EV_FAILED)
			mrc_close(ev.conn, 1);
		/* The region must never change: a WRITE that got through is a bug. */
		for (unsigned i = 0; i < LEN; i++)
			if (((unsigned char *)mem)[i] != 0x5a) {
				fprintf(stderr, "roregion: byte %u of the region was written\n", i);
				return 3;
			}
	}
}
