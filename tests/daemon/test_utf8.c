/*
 * mrd_utf8_clean (daemon/utf8.c): what a fixed-size buffer cut in the middle
 * of a character, or bytes of a request quoted back, leave valid UTF-8.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

static void clean(const char *in, const char *want)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", in);
	size_t n = mrd_utf8_clean(buf);
	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
}

static void test_clean(void **state)
{
	(void)state;
	clean("plain ascii", "plain ascii");
	clean("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	/* cut at the end: the partial character goes */
	clean("ab\xc3", "ab");
	clean("ab\xe2\x82", "ab");
	clean("ab\xf0\x9f\x98", "ab");
	/* invalid bytes inside: '?' each */
	clean("a\x80" "b", "a?b");              /* stray continuation */
	clean("a\xc0\xaf" "b", "a??b");         /* overlong '/' */
	clean("a\xed\xa0\x80" "b", "a???b");    /* a surrogate */
	clean("a\xf4\x90\x80\x80" "b", "a????b"); /* above U+10FFFF */
	clean("a\xff" "b", "a?b");
	clean("a\xc3" "b", "a?b");              /* start without its continuation */
}

/* The cut the control socket makes: vsnprintf into 256 bytes. */
static void test_snprintf_cut(void **state)
{
	(void)state;
	char msg[256], arg[600];
	size_t n = 0;
	while (n + 2 < sizeof(arg)) {
		arg[n++] = '\xc3';
		arg[n++] = '\xa9';
	}
	arg[n] = 0;
	/* what snprintf(msg, 256, "%s", arg) leaves */
	memcpy(msg, arg, sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = 0;
	assert_int_equal((unsigned char)msg[254], 0xc3); /* cut in a character */
	assert_int_equal(mrd_utf8_clean(msg), 254);
	assert_int_equal((unsigned char)msg[253], 0xa9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_snprintf_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
