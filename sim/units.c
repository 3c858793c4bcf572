/* Quantities of a scenario: rates, times, sizes, probabilities; see units.h. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "units.h"

typedef struct unit {
	const char *suffix;
	double mult;
} unit;

/* Reads a non-negative decimal number at the start of s (digits with an
 * optional fraction, optional exponent); *end gets the first byte after it. */
static int number_prefix(const char *s, double *v, const char **end)
{
	if (!isdigit((unsigned char)s[0]) && !(s[0] == '.' && isdigit((unsigned char)s[1])))
		return MRP_ERR_INVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return MRP_ERR_INVAL; /* strtod would take hex */

	char *e;
	double x = strtod(s, &e);

	if (e == s || !isfinite(x) || x < 0)
		return MRP_ERR_INVAL;
	*v = x;
	*end = e;
	return 0;
}

/* number followed by one of the units (or by nothing if bare_mult > 0). */
static int parse_scaled(const char *s, const unit *units, double bare_mult, double *out)
{
	double x;
	const char *end;

	if (!s || number_prefix(s, &x, &end) != 0)
		return MRP_ERR_INVAL;
	while (*end == ' ')
		end++;
	if (*end == '\0') {
		if (bare_mult > 0) {
			*out = x * bare_mult;
			return 0;
		}
		if (x == 0) {
			*out = 0;
			return 0;
		}
		return MRP_ERR_INVAL;
	}
	for (const unit *u = units; u->suffix; u++) {
		if (strcmp(end, u->suffix) == 0) {
			*out = x * u->mult;
			return 0;
		}
	}
	return MRP_ERR_INVAL;
}

static int to_u64(double x, uint64_t *v)
{
	x = nearbyint(x);
	if (!(x >= 0) || x >= 18446744073709551616.0)
		return MRP_ERR_RANGE;
	*v = (uint64_t)x;
	return 0;
}

int sim_parse_rate(const char *s, uint64_t *bps)
{
	static const unit units[] = {
		{"bps", 1}, {"bit/s", 1},
		{"kbps", 1e3}, {"Kbps", 1e3}, {"kbit/s", 1e3},
		{"Mbps", 1e6}, {"Mbit/s", 1e6},
		{"Gbps", 1e9}, {"Gbit/s", 1e9},
		{"Tbps", 1e12}, {"Tbit/s", 1e12},
		{NULL, 0},
	};
	double x;
	int rc = parse_scaled(s, units, 1, &x);

	return rc ? rc : to_u64(x, bps);
}

int sim_parse_time(const char *s, uint64_t *ns)
{
	static const unit units[] = {
		{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {NULL, 0},
	};
	double x;
	int rc = parse_scaled(s, units, 0, &x);

	return rc ? rc : to_u64(x, ns);
}

int sim_parse_bytes(const char *s, uint64_t *bytes)
{
	static const unit units[] = {
		{"B", 1},
		{"KB", 1e3}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
		{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
		{NULL, 0},
	};
	double x;
	int rc = parse_scaled(s, units, 1, &x);

	return rc ? rc : to_u64(x, bytes);
}

int sim_parse_u64(const char *s, uint64_t *v)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return MRP_ERR_INVAL;

	uint64_t x = 0;

	for (const char *p = s; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return MRP_ERR_INVAL;
		unsigned d = (unsigned)(*p - '0');
		if (x > (UINT64_MAX - d) / 10)
			return MRP_ERR_RANGE;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

int sim_parse_prob(const char *s, double *p)
{
	static const unit units[] = {{"%", 0.01}, {NULL, 0}};
	double x;

	if (parse_scaled(s, units, 1, &x) != 0)
		return MRP_ERR_INVAL;
	if (x > 1)
		return MRP_ERR_RANGE;
	*p = x;
	return 0;
}

int sim_parse_double(const char *s, double *v)
{
	double x;
	const char *end;

	if (!s || number_prefix(s, &x, &end) != 0 || *end != '\0')
		return MRP_ERR_INVAL;
	*v = x;
	return 0;
}

static void fmt_scaled(char *buf, unsigned long buflen, double x, const char *const *names,
		       double step)
{
	int i = 0;

	while (names[i + 1] && x >= step * 0.9995) {
		x /= step;
		i++;
	}
	snprintf(buf, buflen, "%.2f %s", x, names[i]);
}

void sim_fmt_rate(char *buf, unsigned long buflen, double bps)
{
	static const char *const names[] = {"bps", "kbps", "Mbps", "Gbps", "Tbps", NULL};

	fmt_scaled(buf, buflen, bps, names, 1000);
}

void sim_fmt_time(char *buf, unsigned long buflen, double ns)
{
	static const char *const names[] = {"ns", "us", "ms", "s", NULL};

	fmt_scaled(buf, buflen, ns, names, 1000);
}

void sim_fmt_bytes(char *buf, unsigned long buflen, double bytes)
{
	static const char *const names[] = {"B", "KB", "MB", "GB", "TB", NULL};

	fmt_scaled(buf, buflen, bytes, names, 1000);
}
