/* SPDX-License-Identifier: Apache-2.0 */
/*
 * info.c: the calls that report memory, answered with the budget.
 *
 * total = the budget (never above the physical size), free = min(budget - in use, physical free),
 * computed so that it can never go negative or wrap. Without a budget for the device, and whenever
 * the driver itself fails, the driver's answer is returned unchanged. In audit mode too: a program
 * that sizes itself from what it is told (JAX's preallocation, vLLM's gpu_memory_utilization, a
 * TensorFlow session) would otherwise take the budget, and the report's peak would be the budget
 * and not what the job needs; told the card, it takes what it takes on the card.
 */
#include "common/ledger.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "driver/resolve.h"
#include "charge/device.h"
#include "charge/live.h"
#include "charge/pool.h"
#include "hooks/init.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static void apply_budget(int id, uint64_t *free_b, uint64_t *total_b)
{
    uint64_t limit = gpc_budget_limit(id);
    uint64_t used = gpc_budget_in_use(id);
    uint64_t total = limit < *total_b ? limit : *total_b;
    uint64_t left = used >= limit ? 0 : limit - used;
    uint64_t free = left < *free_b ? left : *free_b;
    *free_b = free < total ? free : total;
    *total_b = total;
}

/* The budget of the current context's device, or GPC_BUDGET_NONE. */
static int current_budget(void)
{
    CUdevice dev;
    if (!gpc_enforcing() || gpc_opt_enum(&gpc_config, GPC_OPT_MODE) == GPC_MODE_AUDIT ||
        gpc_current_device(&dev) != CUDA_SUCCESS)
        return GPC_BUDGET_NONE;
    return gpc_device_budget_current(dev);
}

/* The budget of device `dev`, or GPC_BUDGET_NONE (audit mode: the card as it is, see the head). */
static int device_budget(CUdevice dev)
{
    if (!gpc_enforcing() || gpc_opt_enum(&gpc_config, GPC_OPT_MODE) == GPC_MODE_AUDIT)
        return GPC_BUDGET_NONE;
    return gpc_device_budget(dev);
}

/* Pools may have given memory back at a synchronisation, and processes sharing the ledger may have
 * died: count both before answering (the reap is rate-limited). A budget changed live is the one
 * answered at once. */
static void info_begin(void)
{
    gpc_init();
    gpc_pools_reconcile();
    gpc_budget_refresh(true);
    gpc_live_check(true);
}

/* The driver's figures, widened, in *free and *total: true when the budget's replace them there. */
static bool info_budget(uint64_t *free, uint64_t *total)
{
    int id = current_budget();
    if (id == GPC_BUDGET_NONE)
        return false;
    apply_budget(id, free, total);
    return true;
}

/* The size of `dev` as the driver said it, widened, in *bytes: true when the budget lowers it there. */
static bool total_budget(CUdevice dev, uint64_t *bytes)
{
    int id = device_budget(dev);
    if (id == GPC_BUDGET_NONE)
        return false;
    uint64_t limit = gpc_budget_limit(id);
    if (limit >= *bytes)
        return false;
    *bytes = limit;
    return true;
}

/* The exports per ABI (size_t, and the legacy unsigned int): the driver's call, then the helper. */
#define GET_INFO(name, type)                                      \
    GPC_EXPORT CUresult name(type *free, type *total)             \
    {                                                             \
        info_begin();                                             \
        CUresult rc = GPC_CALL_REAL(name, (free, total));         \
        if (rc != CUDA_SUCCESS || !free || !total)                \
            return rc;                                            \
        uint64_t f = *free, t = *total;                           \
        if (info_budget(&f, &t))                                  \
            *free = (type)f, *total = (type)t;                    \
        return rc;                                                \
    }
GET_INFO(cuMemGetInfo_v2, size_t)
GET_INFO(cuMemGetInfo, unsigned int)

#define TOTAL_MEM(name, type)                                     \
    GPC_EXPORT CUresult name(type *bytes, CUdevice dev)           \
    {                                                             \
        gpc_init();                                               \
        gpc_budget_refresh(false);                                \
        gpc_live_check(true);                                     \
        CUresult rc = GPC_CALL_REAL(name, (bytes, dev));          \
        if (rc != CUDA_SUCCESS || !bytes)                         \
            return rc;                                            \
        uint64_t b = *bytes;                                      \
        if (total_budget(dev, &b))                                \
            *bytes = (type)b;                                     \
        return rc;                                                \
    }
TOTAL_MEM(cuDeviceTotalMem_v2, size_t)
TOTAL_MEM(cuDeviceTotalMem, unsigned int)
