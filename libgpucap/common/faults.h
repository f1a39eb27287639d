/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faults.h: fault injection (faults.c, in gpucap_core; the counter lives in the process that calls it).
 */
#ifndef GPUCAP_COMMON_FAULTS_H
#define GPUCAP_COMMON_FAULTS_H

#include "common/options.h"

/* Parses a share "0.05" (0 to 1) into parts per 2^32: 0, or -EINVAL. */
int gpc_fault_parse_rate(const char *text, uint64_t *out);
/* True if attempt `index` (1-based) fails under fail_rate `rate` (parts per 2^32) and `seed`. */
bool gpc_fault_hit(uint64_t seed, uint64_t index, uint64_t rate);
/* True when fault injection is configured in *s. */
static inline bool gpc_fault_armed(const struct gpc_settings *s)
{
    return s->opt[GPC_OPT_FAIL_AFTER].set || s->opt[GPC_OPT_FAIL_RATE].set;
}
/* Counts one allocation attempt; true (after logging it) when this attempt must fail. */
bool gpc_fault_inject(const struct gpc_settings *s, const char *call, int device, uint64_t bytes);

#endif
