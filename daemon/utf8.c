#include "utf8.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid sequence at p (n bytes left), 0 if invalid, -1 if it
 * is a valid start cut short by the end. */
static int seq_len(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	int len;
	uint32_t min, cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	for (int i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return -1;
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t mrd_utf8_clean(char *s)
{
	uint8_t *p = (uint8_t *)s;
	size_t n = strlen(s), i = 0;
	while (i < n) {
		int l = seq_len(p + i, n - i);
		if (l > 0) {
			i += (size_t)l;
		} else if (l < 0) {
			p[i] = 0; /* cut at the end */
			return i;
		} else {
			p[i++] = '?';
		}
	}
	return n;
}
