/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c: the small public API (include/gpucap.h).
 */
#include "common/defs.h"
#include "common/ledger.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "charge/device.h"
#include "hooks/init.h"

#include "gpucap.h"

#include <errno.h>
#include <stdatomic.h>

GPC_EXPORT const char *gpucap_version(void)
{
    return GPUCAP_VERSION_STRING;
}

GPC_EXPORT int gpucap_device_usage(int ordinal, struct gpucap_usage *out)
{
    if (!out || ordinal < 0 || ordinal >= GPC_MAX_DEVICES)
        return -EINVAL;
    gpc_init();
    /* Figures after a shrunk file is noticed and without processes that died (rate-limited). */
    gpc_budget_refresh(true);
    int id = gpc_device_budget_if_ready(ordinal);
    struct gpc_slot *s = gpc_budget_slot(id);
    if (!s)
        return -ENOENT;
    gpc_budget_flush_counts();
    out->limit = gpc_budget_limit(id);
    out->used = gpc_budget_in_use(id);
    out->peak = gpc_budget_peak(id);
    out->allocations = atomic_load(&s->allocs);
    out->frees = atomic_load(&s->frees);
    out->denials = atomic_load(&s->denials);
    return 0;
}
