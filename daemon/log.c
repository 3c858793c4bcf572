#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int mrd_log_level = MRD_LOG_INFO;
static int journal; /* stderr goes to the journal: use priority prefixes */

void mrd_log_init(int level)
{
	mrd_log_level = level;
	journal = getenv("JOURNAL_STREAM") != NULL;
}

void mrd_log(int level, const char *fmt, ...)
{
	static const int prio[] = {3, 4, 6, 7}; /* LOG_ERR, WARNING, INFO, DEBUG */
	if (level > mrd_log_level || level < MRD_LOG_ERROR)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (journal) {
		fprintf(stderr, "<%d>%s\n", prio[level], msg);
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		fprintf(stderr, "[%6lld.%06ld] metarocd %-5s %s\n", (long long)ts.tv_sec,
			ts.tv_nsec / 1000, mrd_log_level_name(level), msg);
	}
}
