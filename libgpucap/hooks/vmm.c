/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm.c: virtual memory management (cuMemCreate and friends).
 *
 * Physical memory is taken by cuMemCreate on a device location (host and host-NUMA locations are
 * host memory) and given back when the last reference goes: the creation, each
 * cuMemRetainAllocationHandle, and each mapping (the usual pattern is create, map, release, and the
 * memory lives until the unmap). So each handle we charged carries a reference count, and each
 * mapping of it is recorded by address. Handles we did not create (imported ones) pass through.
 */
#include "common/log.h"
#include "core/budget.h"
#include "core/state.h"
#include "core/track.h"
#include "driver/resolve.h"
#include "charge/charge.h"
#include "charge/device.h"
#include "charge/loan.h"
#include "hooks/init.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The driver refused a creation within the request: the node arbiter is asked to take loans back and
 * the call is made again until it succeeds or the grace passed (charge/loan.c). */
__attribute__((noinline, cold)) static CUresult retry_create(struct gpc_charge *c, CUresult rc,
                                                             CUmemGenericAllocationHandle *handle, size_t size,
                                                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct gpc_loan_need n = {0};
    while (rc == CUDA_ERROR_OUT_OF_MEMORY && gpc_charge_need(c, &n))
        rc = GPC_CALL_REAL(cuMemCreate, (handle, size, prop, flags));
    return rc;
}

GPC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                unsigned long long flags)
{
    gpc_init();
    if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return GPC_CALL_REAL(cuMemCreate, (handle, size, prop, flags));
    struct gpc_charge c;
    CUresult rc = gpc_charge_begin(&c, prop->location.id, size, "cuMemCreate");
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = GPC_CALL_REAL(cuMemCreate, (handle, size, prop, flags));
    if (gpc_unlikely(rc == CUDA_ERROR_OUT_OF_MEMORY))
        rc = retry_create(&c, rc, handle, size, prop, flags);
    gpc_charge_end(&c, rc, GPC_MAP_HANDLE, rc == CUDA_SUCCESS ? *handle : 0);
    return rc;
}

/* Drops one reference of a charged handle; the budget is released with the last one. */
static void unref_handle(CUmemGenericAllocationHandle h)
{
    struct gpc_track t;
    if (gpc_track_ref(GPC_MAP_HANDLE, h, -1, &t) == 0)
        gpc_budget_release(gpc_device_budget_if_ready(t.device), t.bytes);
}

GPC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    gpc_init();
    /*
     * The reference is dropped before the driver call: once the driver frees the handle it may hand
     * the same value to another thread's cuMemCreate, which must not find our old record.
     */
    struct gpc_track t;
    int refs = atomic_load(&gpc_passthrough) ? -1 : gpc_track_ref(GPC_MAP_HANDLE, handle, -1, &t);
    CUresult rc = GPC_CALL_REAL(cuMemRelease, (handle));
    if (refs < 0)
        return rc;
    if (rc != CUDA_SUCCESS) {
        if (refs == 0)
            gpc_track_add(GPC_MAP_HANDLE, handle, &(struct gpc_track){.bytes = t.bytes, .device = t.device, .refs = 1});
        else
            gpc_track_ref(GPC_MAP_HANDLE, handle, +1, &t);
        return rc;
    }
    if (refs == 0)
        gpc_budget_release(gpc_device_budget_if_ready(t.device), t.bytes);
    return rc;
}

GPC_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuMemRetainAllocationHandle, (handle, addr));
    if (rc == CUDA_SUCCESS && !atomic_load(&gpc_passthrough)) {
        struct gpc_track t;
        gpc_track_ref(GPC_MAP_HANDLE, *handle, +1, &t);
    }
    return rc;
}

GPC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuMemMap, (ptr, size, offset, handle, flags));
    if (rc != CUDA_SUCCESS || atomic_load(&gpc_passthrough))
        return rc;
    struct gpc_track t;
    if (gpc_track_ref(GPC_MAP_HANDLE, handle, +1, &t) > 0) {
        struct gpc_track m = {.bytes = size, .device = -1, .refs = 1, .aux = handle};
        if (gpc_track_add(GPC_MAP_MAPPING, ptr, &m) != 0)
            gpc_log(GPC_LOG_ERROR, "out of memory for bookkeeping: a mapping stays charged for good");
    }
    return rc;
}

GPC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuMemUnmap, (ptr, size));
    if (rc != CUDA_SUCCESS || atomic_load(&gpc_passthrough))
        return rc;
    /* The range may cover several mappings laid end to end. */
    uint64_t at = ptr, end = ptr + size;
    struct gpc_track m;
    while (at < end && gpc_track_take(GPC_MAP_MAPPING, at, &m)) {
        unref_handle(m.aux);
        at += m.bytes ? m.bytes : 1;
    }
    return rc;
}
