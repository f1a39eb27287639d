/*
 * hooks_info.c: the calls that report memory, answered with the budget.
 *
 * total = the budget (never above the physical size), free = min(budget - in use, physical free),
 * computed so that it can never go negative or wrap. Without a budget for the device, and whenever
 * the driver itself fails, the driver's answer is returned unchanged.
 */
#include "internal.h"

#include <limits.h>

static void apply_budget(struct gpc_slot *s, uint64_t *free_b, uint64_t *total_b)
{
    uint64_t limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
    uint64_t used = atomic_load_explicit(&s->used, memory_order_relaxed);
    uint64_t total = limit < *total_b ? limit : *total_b;
    uint64_t left = used >= limit ? 0 : limit - used;
    uint64_t free = left < *free_b ? left : *free_b;
    *free_b = free < total ? free : total;
    *total_b = total;
}

/* The figures of the current context's device, or NULL when it has no budget. */
static struct gpc_slot *current_slot(void)
{
    CUdevice dev;
    if (!gpc_enforcing() || gpc_current_device(&dev) != CUDA_SUCCESS)
        return NULL;
    return gpc_budget_slot(gpc_device_budget(dev));
}

static struct gpc_slot *device_slot(CUdevice dev)
{
    return gpc_enforcing() ? gpc_budget_slot(gpc_device_budget(dev)) : NULL;
}

GPC_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    gpc_init();
    /* Pools may have given memory back at a synchronisation, and processes sharing the ledger may
     * have died: count both before answering (the reap is rate-limited). */
    gpc_pools_reconcile();
    gpc_ledger_reap_lazy();
    CUresult rc = GPC_CALL_REAL(cuMemGetInfo_v2, (free, total));
    struct gpc_slot *s;
    if (rc != CUDA_SUCCESS || !free || !total || !(s = current_slot()))
        return rc;
    uint64_t f = *free, t = *total;
    apply_budget(s, &f, &t);
    *free = f;
    *total = t;
    return rc;
}

GPC_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    gpc_init();
    gpc_pools_reconcile();
    gpc_ledger_reap_lazy();
    CUresult rc = GPC_CALL_REAL(cuMemGetInfo, (free, total));
    struct gpc_slot *s;
    if (rc != CUDA_SUCCESS || !free || !total || !(s = current_slot()))
        return rc;
    uint64_t f = *free, t = *total;
    apply_budget(s, &f, &t);
    *free = (unsigned int)f;
    *total = (unsigned int)t;
    return rc;
}

GPC_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuDeviceTotalMem_v2, (bytes, dev));
    struct gpc_slot *s;
    if (rc != CUDA_SUCCESS || !bytes || !(s = device_slot(dev)))
        return rc;
    uint64_t limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
    if (limit < *bytes)
        *bytes = limit;
    return rc;
}

GPC_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuDeviceTotalMem, (bytes, dev));
    struct gpc_slot *s;
    if (rc != CUDA_SUCCESS || !bytes || !(s = device_slot(dev)))
        return rc;
    uint64_t limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
    if (limit < *bytes)
        *bytes = (unsigned int)limit;
    return rc;
}
