/* daemon/membudget.c: each connection's allocator checks its own budget,
 * its peer address's share and the daemon's before allocating; what a
 * connection frees stays its own up to MRD_MEM_RESERVE_MAX; the address
 * entries are shared by IP and go with their last connection. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "membudget.h"

#define HDR 16 /* what each block carries in front (membudget.c) */

static void test_address_share_bounds_its_connections(void **state)
{
	(void)state;
	mrd_memacct all = {.limit = 1000000};
	mrd_addrmem *list = NULL;
	uint8_t ip1[4] = {10, 0, 0, 1}, ip2[4] = {10, 0, 0, 2};
	mrd_addrmem *a1 = mrd_addrmem_get(&list, AF_INET, ip1, 10000);
	mrd_addrmem *a1b = mrd_addrmem_get(&list, AF_INET, ip1, 10000);
	mrd_addrmem *a2 = mrd_addrmem_get(&list, AF_INET, ip2, 10000);
	assert_non_null(a1);
	assert_ptr_equal(a1, a1b); /* one entry per IP address */
	assert_ptr_not_equal(a1, a2);
	assert_int_equal(a1->refs, 2);

	mrd_membudget c1, c2, c3;
	mrd_membudget_init(&c1, &all, &a1->acct, 8000);
	mrd_membudget_init(&c2, &all, &a1->acct, 8000);
	mrd_membudget_init(&c3, &all, &a2->acct, 8000);
	mrp_mem m1 = mrd_membudget_mem(&c1), m2 = mrd_membudget_mem(&c2),
		m3 = mrd_membudget_mem(&c3);

	/* c1 takes 7000 of its 8000; c2, same address, gets only what is left
	 * of the address's 10000 although its own budget is untouched */
	void *p1 = m1.alloc(m1.ud, 7000 - HDR);
	assert_non_null(p1);
	assert_int_equal(a1->acct.used, 7000);
	assert_null(m2.alloc(m2.ud, 4000 - HDR));
	assert_int_equal(c2.refused, 1);
	assert_int_equal(a1->acct.refused, 1);
	assert_int_equal(all.refused, 1);
	assert_int_equal(all.refused_addr, 1);
	void *p2 = m2.alloc(m2.ud, 3000 - HDR);
	assert_non_null(p2);
	assert_int_equal(a1->acct.used, 10000);
	/* another address is not affected */
	void *p3 = m3.alloc(m3.ud, 8000 - HDR);
	assert_non_null(p3);
	assert_int_equal(all.used, 18000);
	assert_int_equal(all.refused_addr, 1);

	/* what c1 frees stays its own (reserve), still counted for the
	 * address: c2 cannot take it, c1 can */
	m1.free(m1.ud, p1);
	assert_int_equal(c1.used, 0);
	assert_int_equal(c1.reserve, 7000);
	assert_int_equal(a1->acct.used, 10000);
	assert_null(m2.alloc(m2.ud, 100));
	void *p1b = m1.alloc(m1.ud, 5000 - HDR);
	assert_non_null(p1b);
	assert_int_equal(c1.reserve, 2000);
	assert_int_equal(a1->acct.used, 10000);

	/* the connections end: everything goes back to the address and the
	 * daemon, and the entry goes with its last reference */
	m1.free(m1.ud, p1b);
	mrd_membudget_fini(&c1);
	mrd_addrmem_put(&list, a1);
	assert_int_equal(a1->acct.used, 3000);
	m2.free(m2.ud, p2);
	mrd_membudget_fini(&c2);
	assert_int_equal(a1b->acct.used, 0);
	mrd_addrmem_put(&list, a1b);
	assert_ptr_equal(list, a2);
	assert_null(a2->next);
	m3.free(m3.ud, p3);
	mrd_membudget_fini(&c3);
	mrd_addrmem_put(&list, a2);
	assert_null(list);
	assert_int_equal(all.used, 0);
}

static void test_address_entry_keyed_by_family_and_ip(void **state)
{
	(void)state;
	mrd_addrmem *list = NULL;
	uint8_t v4[4] = {127, 0, 0, 1}, v6[16] = {0};
	v6[15] = 1;
	memcpy(v6, v4, 4); /* the same first four bytes */
	mrd_addrmem *a = mrd_addrmem_get(&list, AF_INET, v4, 100);
	mrd_addrmem *b = mrd_addrmem_get(&list, AF_INET6, v6, 200);
	assert_ptr_not_equal(a, b);
	/* a reload's new share reaches the entry with the next connection */
	mrd_addrmem *a2 = mrd_addrmem_get(&list, AF_INET, v4, 300);
	assert_ptr_equal(a, a2);
	assert_int_equal(a->acct.limit, 300);
	mrd_addrmem_put(&list, a);
	mrd_addrmem_put(&list, a2);
	mrd_addrmem_put(&list, b);
	assert_null(list);
}

static void test_daemon_budget_still_binds(void **state)
{
	(void)state;
	mrd_memacct all = {.limit = 5000};
	mrd_addrmem *list = NULL;
	uint8_t ip[4] = {10, 0, 0, 3};
	mrd_addrmem *a = mrd_addrmem_get(&list, AF_INET, ip, 1000000);
	mrd_membudget c;
	mrd_membudget_init(&c, &all, &a->acct, 1000000);
	mrp_mem m = mrd_membudget_mem(&c);
	assert_null(m.alloc(m.ud, 6000));
	assert_int_equal(all.refused, 1);
	assert_int_equal(all.refused_addr, 0); /* the daemon's, not the address's */
	assert_int_equal(a->acct.used, 0);
	mrd_membudget_fini(&c);
	mrd_addrmem_put(&list, a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_address_share_bounds_its_connections),
		cmocka_unit_test(test_address_entry_keyed_by_family_and_ip),
		cmocka_unit_test(test_daemon_budget_still_binds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
