/*
 * Scenario files: YAML (libyaml) in, sim_config out. The format is
 * documented key by key in sim/README.md.
 *
 * Every key is checked: an unknown or repeated key, a value of the wrong
 * kind or out of range, or a reference to something the topology does not
 * have is an error whose message names the file, the line, the key path and
 * the bad value, e.g.
 *   "scenario.yaml:14: link.rate: 'abc' is not a rate (e.g. 100Gbps)".
 */
#ifndef SIM_SCENARIO_H
#define SIM_SCENARIO_H

#include <stddef.h>

#include "sim.h"

/* Parses a scenario held in memory; name is used in messages. On success
 * returns 0 with cfg filled (free it with sim_config_free()); on error
 * returns a negative code, the message in err, and cfg left empty. */
int sim_scenario_parse(const char *text, size_t len, const char *name, sim_config *cfg, char *err,
		       size_t errlen);

/* Reads and parses the file at path (at most 16 MB). */
int sim_scenario_load(const char *path, sim_config *cfg, char *err, size_t errlen);

#endif
