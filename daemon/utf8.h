/*
 * Text that goes into JSON must be valid UTF-8 (jansson refuses anything
 * else, and a refused string used to drop a reply's "error" object).
 */
#ifndef MRD_UTF8_H
#define MRD_UTF8_H

#include <stddef.h>

/* Make the NUL-terminated s valid UTF-8 in place: an incomplete sequence at
 * the end (a cut by a fixed-size buffer) is removed, any other invalid byte
 * (a stray continuation, an overlong form, a surrogate, above U+10FFFF)
 * becomes '?'. Returns the new length. */
size_t mrd_utf8_clean(char *s);

#endif
