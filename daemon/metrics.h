/*
 * The daemon's counters and gauges in the Prometheus text exposition format
 * (version 0.0.4): one "# HELP" and one "# TYPE" line per metric family,
 * then its samples. Counters end in _total. Names and labels are
 * documented in docs/metrics.md; `metaroce-ctl metrics` prints this text
 * and telemetry.textfile gets it each interval (telemetry.c).
 */
#ifndef MRD_METRICS_H
#define MRD_METRICS_H

#include <stddef.h>

typedef struct mrd mrd;

/* The text (malloc'd, NUL-terminated; *plen its length if plen), or NULL
 * when out of memory. Reads the loop's state: call it on the loop. */
char *mrd_metrics_render(mrd *d, size_t *plen);

#endif
