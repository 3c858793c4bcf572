/*
 * The C decoder's verdict on packets given as hex, one per line on stdin:
 * prints one line per packet, "OK" or the error's name (mrp_err_name(), the
 * name the daemon counts drops under). tests/wireshark/test_verdicts.py
 * compares these with the Wireshark dissector's verdicts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int main(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned long lineno = 0;

	while ((n = getline(&line, &cap, stdin)) >= 0) {
		size_t len = (size_t)n, i;
		uint8_t *buf;
		mrp_pkt pkt;
		ssize_t rv;

		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		if (len % 2 != 0) {
			fprintf(stderr, "line %lu: odd number of hex digits\n", lineno);
			return 2;
		}
		buf = malloc(len / 2 + 1); /* + 1: a zero-length packet is legal input */
		if (!buf) {
			fprintf(stderr, "out of memory\n");
			return 2;
		}
		for (i = 0; i < len / 2; i++) {
			int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);

			if (hi < 0 || lo < 0) {
				fprintf(stderr, "line %lu: not hex\n", lineno);
				free(buf);
				return 2;
			}
			buf[i] = (uint8_t)(hi << 4 | lo);
		}
		rv = mrp_pkt_decode(&pkt, buf, len / 2);
		printf("%s\n", rv >= 0 ? "OK" : mrp_err_name((int)rv));
		free(buf);
	}
	free(line);
	return 0;
}
