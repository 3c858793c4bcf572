/* Application sessions: memory regions and their rkeys (app_int.h). */
#define _GNU_SOURCE /* memfd_create, struct ucred, MSG_CMSG_CLOEXEC */
#include "app_int.h"

/* ---- regions ------------------------------------------------------------------ */

uint32_t app_rkey_hash(const mrd_apps *a, uint32_t rkey)
{
	return (rkey * 0x9e3779b1u) & (a->nrkeys_buckets - 1);
}

app_region *app_rkey_find(mrd_apps *a, uint32_t rkey)
{
	if (!a->rkeys)
		return NULL;
	for (app_region *r = a->rkeys[app_rkey_hash(a, rkey)]; r; r = r->rnext)
		if (r->rkey == rkey)
			return r;
	return NULL;
}

static int rkey_retired(const mrd_apps *a, uint32_t rkey)
{
	for (size_t i = 0; i < sizeof(a->retired) / sizeof(a->retired[0]); i++)
		if (a->retired[i] == rkey)
			return 1;
	return 0;
}

/* A fresh rkey: random (the only thing between a peer and our memory
 * besides its connection), never 0, unique, not one freed lately. */
uint32_t app_rkey_new(mrd_apps *a)
{
	uint32_t k;
	do {
		while (getrandom(&k, sizeof(k), 0) != sizeof(k))
			;
	} while (!k || app_rkey_find(a, k) || rkey_retired(a, k));
	return k;
}

static void rkey_unlink(mrd_apps *a, app_region *r)
{
	for (app_region **pp = &a->rkeys[app_rkey_hash(a, r->rkey)]; *pp; pp = &(*pp)->rnext)
		if (*pp == r) {
			*pp = r->rnext;
			a->nregions--;
			break;
		}
	a->retired[a->retired_next++ % (sizeof(a->retired) / sizeof(a->retired[0]))] = r->rkey;
}

void app_region_free(app_region *r)
{
	munmap(r->map, r->len);
	free(r);
}

/* Out of the lookups at once; the memory goes when nothing references it. */
void app_region_remove(app_session *s, app_region *r)
{
	uint32_t slot = (r->lkey & ((1u << LKEY_SLOT_BITS) - 1)) - 1;
	s->regions[slot] = NULL;
	s->nregions--;
	s->region_bytes -= r->len;
	rkey_unlink(s->a, r);
	r->dead = 1;
	if (!r->refs) {
		app_region_free(r);
		return;
	}
	r->znext = s->zombies;
	s->zombies = r;
}

void app_region_unref(app_region *r)
{
	if (!r || --r->refs || !r->dead)
		return;
	app_session *s = r->s;
	for (app_region **pp = &s->zombies; *pp; pp = &(*pp)->znext)
		if (*pp == r) {
			*pp = r->znext;
			break;
		}
	app_region_free(r);
}

app_region *app_lkey_find(app_session *s, uint32_t lkey)
{
	uint32_t slot = (lkey & ((1u << LKEY_SLOT_BITS) - 1)) - 1;
	if (slot >= s->max_regions || !s->regions)
		return NULL;
	app_region *r = s->regions[slot];
	return r && r->lkey == lkey ? r : NULL;
}

/* [addr, addr + len) inside r's accessible bytes, overflow-safe, in the
 * application's space. */
int app_in_region(const app_region *r, uint64_t addr, uint64_t len)
{
	return addr >= r->lo && len <= r->lolen && addr - r->lo <= r->lolen - len;
}

/* ---- exact bounds of a region (MRC_MSG_MR_BOUNDS) ----------------------------- */

void app_req_mr_bounds(app_session *s, const mrc_msg_hdr *h, const mrc_mr_bounds_req *q)
{
	if (q->reserved) {
		app_bad_req(s, h, MRD_APP_BAD_RESERVED, MRC_ERR_INVAL);
		return;
	}
	app_region *r = app_lkey_find(s, q->lkey);
	if (!r) {
		app_bad_req(s, h, MRD_APP_BAD_NOENT, MRC_ERR_NOENT);
		return;
	}
	if (!q->len || q->addr < r->app_addr || q->len > r->len ||
	    q->addr - r->app_addr > r->len - q->len) {
		app_bad_req(s, h, MRD_APP_BAD_ARG, MRC_ERR_INVAL);
		return;
	}
	r->lo = q->addr;
	r->lolen = q->len;
	app_reply(s, h, 0, NULL, 0, NULL, 0);
}
