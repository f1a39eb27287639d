/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faults.c: fault injection, for testing an application's out-of-memory handling.
 *
 * fail_after N makes every allocation attempt of this process after the N-th answer
 * CUDA_ERROR_OUT_OF_MEMORY; fail_rate P with fail_seed S fails a share P of them, chosen by a hash
 * of (seed, attempt index), so the same seed fails the same attempts in every run, whatever the
 * timing. charge.c asks before the budget and the driver: an injected failure never reaches the
 * driver, is logged with its index and counts as a denial in the figures. Part of gpucap_core so
 * that `gpucap check` validates a rate with the same parser; the attempt counter is per process.
 */
#include "common/faults.h"

#include "common/defs.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define RATE_ONE (1ull << 32)

int gpc_fault_parse_rate(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    double x = strtod(text, &end);
    if (errno || end == text)
        return -EINVAL;
    if (*end == '%') {
        x /= 100.0;
        end++;
    }
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end || !(x >= 0.0 && x <= 1.0))
        return -EINVAL;
    *out = (uint64_t)(x * (double)RATE_ONE + 0.5);
    return 0;
}

/* splitmix64's finaliser: consecutive indices give unrelated, well-mixed values. */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool gpc_fault_hit(uint64_t seed, uint64_t index, uint64_t rate)
{
    return (mix(seed ^ mix(index)) >> 32) < rate;
}

static _Atomic uint64_t attempts;
/* The rate, parsed at the first attempt: 0 unknown, 1 valid, 2 malformed (no injection by rate). */
static atomic_int rate_state;
static uint64_t rate_value;

static bool rate_usable(const struct gpc_settings *s)
{
    int st = atomic_load_explicit(&rate_state, memory_order_acquire);
    if (gpc_likely(st != 0))
        return st == 1;
    const struct gpc_value *v = &s->opt[GPC_OPT_FAIL_RATE];
    uint64_t r;
    if (gpc_fault_parse_rate(v->text, &r) != 0) {
        gpc_log_line(GPC_LOG_ERROR, "GPUCAP_FAIL_RATE: fail_rate = '%s' is not valid; accepted: a share from 0 to 1 "
                     "(0.05) or a percentage (5%%); no fault is injected by rate", v->text);
        atomic_store_explicit(&rate_state, 2, memory_order_release);
        return false;
    }
    rate_value = r;
    atomic_store_explicit(&rate_state, 1, memory_order_release);
    return true;
}

bool gpc_fault_inject(const struct gpc_settings *s, const char *call, int device, uint64_t bytes)
{
    uint64_t index = atomic_fetch_add_explicit(&attempts, 1, memory_order_relaxed) + 1;
    long long after = gpc_opt_int(s, GPC_OPT_FAIL_AFTER, -1);
    long long seed = gpc_opt_int(s, GPC_OPT_FAIL_SEED, 0);
    const struct gpc_value *rate = &s->opt[GPC_OPT_FAIL_RATE];
    char why[320];
    if (after >= 0 && index > (uint64_t)after) {
        snprintf(why, sizeof why, "GPUCAP_FAIL_AFTER=%lld", after);
    } else if (rate->set && rate_usable(s) && gpc_fault_hit((uint64_t)seed, index, rate_value)) {
        snprintf(why, sizeof why, "GPUCAP_FAIL_RATE=%s, seed %lld", rate->text, seed);
    } else {
        return false;
    }
    char a[GPC_SIZE_TEXT];
    gpc_log(GPC_LOG_WARN, "fault injected: %s on device %d, allocation #%llu of this process, requested %s (%s) "
            "-> CUDA_ERROR_OUT_OF_MEMORY", call, device, (unsigned long long)index, gpc_format_size(bytes, a, sizeof a),
            why);
    return true;
}
