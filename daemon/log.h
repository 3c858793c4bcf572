/*
 * metarocd's log: one line per message on stderr, with a level.
 *
 * Under systemd (JOURNAL_STREAM set) each line starts with the sd-daemon
 * priority prefix ("<3>" error ... "<7>" debug) so the journal records the
 * level; otherwise with a monotonic timestamp and the level's name. Nothing
 * here is called per packet: datapath problems are counted, not logged.
 */
#ifndef MRD_LOG_H
#define MRD_LOG_H

#include "config.h" /* MRD_LOG_* */

/* Messages above this level are dropped. */
extern int mrd_log_level;

void mrd_log_init(int level);
void mrd_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define mrd_err(...) mrd_log(MRD_LOG_ERROR, __VA_ARGS__)
#define mrd_warn(...) mrd_log(MRD_LOG_WARN, __VA_ARGS__)
#define mrd_info(...) mrd_log(MRD_LOG_INFO, __VA_ARGS__)
#define mrd_debug(...)                                                          \
	do {                                                                    \
		if (mrd_log_level >= MRD_LOG_DEBUG)                             \
			mrd_log(MRD_LOG_DEBUG, __VA_ARGS__);                    \
	} while (0)

#endif
