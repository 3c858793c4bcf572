/*
 * JSON views of what the daemon holds, shared by the commands that show it
 * (show.c) and the perf and ping reports (perf.c): one connection, its
 * paths, and the small conversions every view uses.
 */
#ifndef MRD_VIEW_H
#define MRD_VIEW_H

#include <jansson.h>
#include <stdint.h>

#include "addr.h"

typedef struct mrd_conn mrd_conn;

json_t *mrd_json_conn(const mrd_conn *c);
json_t *mrd_json_paths(const mrd_conn *c);

json_t *mrd_json_hex32(uint32_t v);        /* "0000002a" */
json_t *mrd_json_hex64(uint64_t v);        /* "000000000000002a" */
json_t *mrd_json_addr(const mrd_sockaddr *a); /* "10.0.0.1:19791" */
json_t *mrd_json_u64(uint64_t v);
/* Seconds from then to now (ns), 0 when then is 0 or later. */
double mrd_age_s(uint64_t then, uint64_t now);

#endif
