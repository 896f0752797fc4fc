/* Numeric settings read from the environment, parsed one way everywhere.
 *
 * A setting that is unset or empty takes its default silently. One that is set but is not
 * a whole number within [min, max] also takes the default, and says so once per process
 * and name on stderr ("conflux: CONFLUX_X='abc' is not a number in 1..10; using 5"), so a
 * typo in a pod spec is visible in the pod's log instead of silently ignored. Callers that
 * must refuse a bad value outright (the DPDK plan) parse with cx_env_parse_u64 instead. */
#ifndef CX_ENV_H
#define CX_ENV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The value of `name` in [min, max], or `dflt` (see above). Accepts decimal, or 0x hex. */
uint64_t cx_env_u64(const char *name, uint64_t dflt, uint64_t min, uint64_t max);

/* Parses `s` as a whole number in [min, max] into *out: 0, or -EINVAL with a message
 * naming `name` and the range. */
int cx_env_parse_u64(const char *name, const char *s, uint64_t min, uint64_t max, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
