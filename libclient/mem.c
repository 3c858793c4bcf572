/*
 * Memory the daemon can reach: blocks from mrc_alloc() are sealed memfds
 * mapped MAP_SHARED here; registering a range hands the memfd (and the
 * range's offset in it) to the daemon, which maps the same pages. Blocks
 * are process-wide so that they outlive a session: after a daemon restart
 * the application registers the same memory with its new session.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

#define HUGE_2M ((size_t)2 << 20)

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static mrc_block *blocks;

/* A sealed memfd of len bytes mapped here; 0 or -errno. */
static int map_block(size_t len, unsigned mfd_flags, int *pfd, void **paddr)
{
	int fd = memfd_create("metaroce", MFD_CLOEXEC | MFD_ALLOW_SEALING | mfd_flags);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) < 0)
		goto fail;
	/* The daemon maps these pages: a shrink under its feet would be
	 * SIGBUS in the daemon, so the size is frozen before anyone sees the
	 * fd (the daemon refuses memfds without F_SEAL_SHRINK). */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	void *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a == MAP_FAILED)
		goto fail;
	*pfd = fd;
	*paddr = a;
	return 0;
fail: {
	int e = -errno;
	close(fd);
	return e;
}
}

MRC_API int mrc_alloc(mrc_session *s, size_t len, void **pmem)
{
	(void)s; /* blocks are process-wide (see above) */
	if (!pmem)
		return MRC_ERR_INVAL;
	*pmem = NULL;
	long pg = sysconf(_SC_PAGESIZE);
	size_t page = pg > 0 ? (size_t)pg : 4096;
	if (len == 0 || len > SIZE_MAX - page)
		return MRC_ERR_INVAL;
	mrc_block *b = calloc(1, sizeof(*b));
	if (!b)
		return MRC_ERR_NOMEM;
	int fd = -1, rc = -1;
	void *addr = NULL;
	/* Huge pages when asked for whole ones: fewer TLB misses in the
	 * daemon's copies. Without reserved huge pages mmap fails (hugetlb
	 * reserves at mmap time), and we fall back to normal pages. */
	if (len % HUGE_2M == 0) {
		rc = map_block(len, MFD_HUGETLB, &fd, &addr);
		if (rc == 0)
			b->pagesz = HUGE_2M;
	}
	if (rc != 0) {
		size_t l = (len + page - 1) / page * page;
		rc = map_block(l, 0, &fd, &addr);
		if (rc == 0) {
			b->pagesz = page;
			len = l;
		}
	}
	if (rc != 0) {
		free(b);
		return rc == -ENOMEM || rc == -ENOSPC || rc == -EMFILE ? MRC_ERR_NOMEM : MRC_ERR_IO;
	}
	b->base = addr;
	b->len = len;
	b->fd = fd;
	pthread_mutex_lock(&blocks_lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&blocks_lock);
	*pmem = addr;
	return 0;
}

MRC_API int mrc_free(mrc_session *s, void *mem)
{
	(void)s;
	if (!mem)
		return MRC_ERR_INVAL;
	pthread_mutex_lock(&blocks_lock);
	for (mrc_block **pp = &blocks; *pp; pp = &(*pp)->next) {
		mrc_block *b = *pp;
		if (b->base != mem)
			continue;
		if (b->nregs) {
			pthread_mutex_unlock(&blocks_lock);
			return MRC_ERR_BUSY;
		}
		*pp = b->next;
		pthread_mutex_unlock(&blocks_lock);
		munmap(b->base, b->len);
		close(b->fd);
		free(b);
		return 0;
	}
	pthread_mutex_unlock(&blocks_lock);
	return MRC_ERR_INVAL;
}

void mrc_block_unref(mrc_block *b)
{
	pthread_mutex_lock(&blocks_lock);
	b->nregs--;
	pthread_mutex_unlock(&blocks_lock);
}

/* The block holding [addr, addr+len), referenced; NULL if none. */
static mrc_block *block_ref(const uint8_t *addr, size_t len)
{
	pthread_mutex_lock(&blocks_lock);
	for (mrc_block *b = blocks; b; b = b->next) {
		uintptr_t a = (uintptr_t)addr, lo = (uintptr_t)b->base;
		if (a >= lo && a - lo < b->len && len <= b->len - (a - lo)) {
			b->nregs++;
			pthread_mutex_unlock(&blocks_lock);
			return b;
		}
	}
	pthread_mutex_unlock(&blocks_lock);
	return NULL;
}

MRC_API int mrc_reg_mr(mrc_session *s, void *addr, size_t len, uint32_t access, mrc_mr **pout)
{
	if (!s || !addr || !pout || len == 0)
		return MRC_ERR_INVAL;
	*pout = NULL;
	if (access & ~(uint32_t)(MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE |
				 MRC_ACCESS_REMOTE_READ))
		return MRC_ERR_INVAL;
	mrc_block *b = block_ref(addr, len);
	if (!b)
		return MRC_ERR_INVAL; /* not memory from mrc_alloc() */
	/* The daemon maps whole pages from a page-aligned offset. */
	size_t off = (size_t)((uint8_t *)addr - b->base);
	size_t start = off / b->pagesz * b->pagesz;
	size_t end = (off + len + b->pagesz - 1) / b->pagesz * b->pagesz;
	if (end > b->len)
		end = b->len;
	mrc_mr *mr = calloc(1, sizeof(*mr));
	if (!mr) {
		mrc_block_unref(b);
		return MRC_ERR_NOMEM;
	}
	mrc_mr_reg_req req = {.app_addr = (uint64_t)(uintptr_t)(b->base + start),
			      .fd_offset = start,
			      .len = end - start,
			      .access = access};
	mrc_mr_reg_rep rep;
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_MR_REG, &req, sizeof(req), b->fd, &rep, sizeof(rep), NULL,
			     0, NULL);
	if (rc == 0) {
		mr->s = s;
		mr->blk = b;
		mr->addr = b->base + start;
		mr->len = end - start;
		mr->lkey = rep.lkey;
		mr->rkey = rep.rkey;
		mr->access = access;
		mr->next = s->mrs;
		s->mrs = mr;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		mrc_block_unref(b);
		free(mr);
		return rc;
	}
	*pout = mr;
	return 0;
}

MRC_API int mrc_dereg_mr(mrc_mr *mr)
{
	if (!mr)
		return 0;
	mrc_session *s = mr->s;
	mrc_mr_dereg_req req = {.lkey = mr->lkey};
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_MR_DEREG, &req, sizeof(req), -1, NULL, 0, NULL, 0, NULL);
	if (rc == MRC_ERR_BUSY) {
		pthread_mutex_unlock(&s->lock);
		return rc; /* in use by posted work: kept */
	}
	for (mrc_mr **pp = &s->mrs; *pp; pp = &(*pp)->next) {
		if (*pp == mr) {
			*pp = mr->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	mrc_block_unref(mr->blk);
	free(mr);
	return rc;
}

MRC_API uint32_t mrc_mr_lkey(const mrc_mr *mr)
{
	return mr ? mr->lkey : 0;
}

MRC_API uint32_t mrc_mr_rkey(const mrc_mr *mr)
{
	return mr ? mr->rkey : 0;
}

MRC_API void *mrc_mr_addr(const mrc_mr *mr)
{
	return mr ? mr->addr : NULL;
}

MRC_API size_t mrc_mr_len(const mrc_mr *mr)
{
	return mr ? mr->len : 0;
}

/* ---- blocks made elsewhere (the verbs layer's ibv_reg_mr) ---- */

int mrc_block_adopt(void *base, size_t len, size_t pagesz, int fd)
{
	mrc_block *b = calloc(1, sizeof(*b));
	if (!b)
		return MRC_ERR_NOMEM;
	b->base = base;
	b->len = len;
	b->pagesz = pagesz;
	b->fd = fd;
	pthread_mutex_lock(&blocks_lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&blocks_lock);
	return 0;
}

int mrc_block_find(const void *addr, size_t len, void **pbase, size_t *plen)
{
	int rc = MRC_ERR_NOENT;
	pthread_mutex_lock(&blocks_lock);
	for (mrc_block *b = blocks; b; b = b->next) {
		uintptr_t a = (uintptr_t)addr, lo = (uintptr_t)b->base;
		uintptr_t e = a + len, hi = lo + b->len;
		if (a >= lo && e <= hi) {
			*pbase = b->base;
			*plen = b->len;
			rc = 0;
			break;
		}
		if (a < hi && e > lo) {
			rc = MRC_ERR_BUSY; /* overlaps a block partly */
			break;
		}
	}
	pthread_mutex_unlock(&blocks_lock);
	return rc;
}

int mrc_block_release(void *base)
{
	pthread_mutex_lock(&blocks_lock);
	for (mrc_block **pp = &blocks; *pp; pp = &(*pp)->next) {
		mrc_block *b = *pp;
		if (b->base != base)
			continue;
		if (b->nregs) {
			pthread_mutex_unlock(&blocks_lock);
			return MRC_ERR_BUSY;
		}
		*pp = b->next;
		pthread_mutex_unlock(&blocks_lock);
		close(b->fd); /* the mapping stays: the pages live on in it */
		free(b);
		return 0;
	}
	pthread_mutex_unlock(&blocks_lock);
	return MRC_ERR_NOENT;
}

int mrc_mr_set_bounds(mrc_mr *mr, const void *addr, size_t len)
{
	if (!mr || !addr || !len)
		return MRC_ERR_INVAL;
	mrc_session *s = mr->s;
	mrc_mr_bounds_req req = {.lkey = mr->lkey, .addr = (uint64_t)(uintptr_t)addr, .len = len};
	pthread_mutex_lock(&s->lock);
	int rc = mrc_request(s, MRC_MSG_MR_BOUNDS, &req, sizeof(req), -1, NULL, 0, NULL, 0, NULL);
	pthread_mutex_unlock(&s->lock);
	return rc;
}
