#include "membudget.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Each block carries its size in front, so a free knows what to give back;
 * 16 bytes keep the block aligned for anything. */
#define HDR 16

static void *b_alloc(void *ud, size_t size)
{
	mrd_membudget *b = ud;
	uint64_t n = (uint64_t)size + HDR;
	/* the reserve covers what it can; the rest is new to the daemon */
	uint64_t fresh = n > b->reserve ? n - b->reserve : 0;
	if (size > UINT32_MAX || b->used + n > b->limit ||
	    (b->all && fresh && b->all->used + fresh > b->all->limit)) {
		b->refused++;
		if (b->all)
			b->all->refused++;
		return NULL;
	}
	if (b->addr && fresh && b->addr->used + fresh > b->addr->limit) {
		b->refused++;
		b->addr->refused++;
		if (b->all) {
			b->all->refused++;
			b->all->refused_addr++;
		}
		return NULL;
	}
	uint8_t *p = malloc(n);
	if (!p)
		return NULL;
	*(uint64_t *)p = n;
	b->reserve -= n - fresh;
	b->used += n;
	if (b->used > b->peak)
		b->peak = b->used;
	if (b->all)
		b->all->used += fresh;
	if (b->addr)
		b->addr->used += fresh;
	return p + HDR;
}

static void b_free(void *ud, void *ptr)
{
	mrd_membudget *b = ud;
	if (!ptr)
		return;
	uint8_t *p = (uint8_t *)ptr - HDR;
	uint64_t n = *(uint64_t *)p;
	b->used -= n;
	b->reserve += n;
	if (b->reserve > MRD_MEM_RESERVE_MAX) {
		if (b->all)
			b->all->used -= b->reserve - MRD_MEM_RESERVE_MAX;
		if (b->addr)
			b->addr->used -= b->reserve - MRD_MEM_RESERVE_MAX;
		b->reserve = MRD_MEM_RESERVE_MAX;
	}
	free(p);
}

void mrd_membudget_fini(mrd_membudget *b)
{
	if (b->all)
		b->all->used -= b->reserve;
	if (b->addr)
		b->addr->used -= b->reserve;
	b->reserve = 0;
}

void mrd_membudget_init(mrd_membudget *b, mrd_memacct *all, mrd_memacct *addr,
			uint64_t limit)
{
	b->all = all;
	b->addr = addr;
	b->used = b->peak = b->refused = b->reserve = 0;
	b->limit = limit;
}

mrp_mem mrd_membudget_mem(mrd_membudget *b)
{
	return (mrp_mem){.alloc = b_alloc, .free = b_free, .ud = b};
}

mrd_addrmem *mrd_addrmem_find(mrd_addrmem *list, int family, const void *ip)
{
	size_t len = family == AF_INET6 ? 16 : 4;
	for (mrd_addrmem *a = list; a; a = a->next)
		if (a->family == family && memcmp(a->ip, ip, len) == 0)
			return a;
	return NULL;
}

mrd_addrmem *mrd_addrmem_get(mrd_addrmem **list, int family, const void *ip,
			     uint64_t limit)
{
	size_t len = family == AF_INET6 ? 16 : 4;
	mrd_addrmem *a = mrd_addrmem_find(*list, family, ip);
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return NULL;
		a->family = family;
		memcpy(a->ip, ip, len);
		a->next = *list;
		*list = a;
	}
	a->refs++;
	a->acct.limit = limit;
	return a;
}

void mrd_addrmem_put(mrd_addrmem **list, mrd_addrmem *a)
{
	if (!a || --a->refs)
		return;
	for (mrd_addrmem **pp = list; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	free(a);
}
