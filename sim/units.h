/*
 * Parsers for the quantities a scenario is written in. Each takes the whole
 * string (no leading or trailing garbage, no sign), returns 0 and stores the
 * value, or MRP_ERR_INVAL for a string that is not such a quantity and
 * MRP_ERR_RANGE for one that does not fit. Suffixes are case-sensitive only
 * where SI would be ambiguous (m vs M is never used here).
 */
#ifndef SIM_UNITS_H
#define SIM_UNITS_H

#include <stdint.h>

/* A rate in bit/s: "100Gbps", "25Gbit/s", "1.5Tbps", "800Mbps", "10kbps",
 * "1000bps"; a bare number is bit/s. Decimal multipliers (k = 10^3). */
int sim_parse_rate(const char *s, uint64_t *bps);

/* A duration in ns: "1us", "2.5ms", "1s", "300ns". A bare number must be 0:
 * "5" is rejected because it has no unit. */
int sim_parse_time(const char *s, uint64_t *ns);

/* A size in bytes: "4096", "64KB" (10^3), "1MB" (10^6), "1GB", "64KiB"
 * (2^10), "1MiB", "1GiB"; "B" alone is bytes. */
int sim_parse_bytes(const char *s, uint64_t *bytes);

/* A decimal integer. */
int sim_parse_u64(const char *s, uint64_t *v);

/* A probability: "0.01" or "1%", within [0, 1]. */
int sim_parse_prob(const char *s, double *p);

/* A finite, non-negative decimal number. */
int sim_parse_double(const char *s, double *v);

/* Formatting for reports: "93.91 Gbps", "85.23 us", "1.05 MB". */
void sim_fmt_rate(char *buf, unsigned long buflen, double bps);
void sim_fmt_time(char *buf, unsigned long buflen, double ns);
void sim_fmt_bytes(char *buf, unsigned long buflen, double bytes);

#endif
