/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c: stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync),
 * the pool calls, and the synchronisations where pools give memory back. Each hook starts the
 * library and hands the call to the pools' accounting (charge/pool.c, whose head says how a pool
 * is counted).
 */
#include "hooks/init.h"

#include "charge/pool.h"
#include "driver/resolve.h"

#include <stdbool.h>
#include <stddef.h>

GPC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    gpc_init();
    return gpc_pools_alloc(GPC_POOL_ASYNC, dptr, bytesize, NULL, hStream);
}

GPC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    gpc_init();
    return gpc_pools_alloc(GPC_POOL_ASYNC_PTSZ, dptr, bytesize, NULL, hStream);
}

GPC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    gpc_init();
    return gpc_pools_alloc(GPC_POOL_FROM, dptr, bytesize, pool, hStream);
}

GPC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream hStream)
{
    gpc_init();
    return gpc_pools_alloc(GPC_POOL_FROM_PTSZ, dptr, bytesize, pool, hStream);
}

GPC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    gpc_init();
    return gpc_pools_free_async(dptr, hStream, gpc_real.cuMemFreeAsync);
}

GPC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    gpc_init();
    return gpc_pools_free_async(dptr, hStream, gpc_real.cuMemFreeAsync_ptsz);
}

GPC_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuDeviceGetDefaultMemPool, (pool_out, dev));
    gpc_pools_learn(rc, pool_out, dev, true);
    return rc;
}

GPC_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuDeviceGetMemPool, (pool, dev));
    gpc_pools_learn(rc, pool, dev, true);
    return rc;
}

GPC_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuMemGetDefaultMemPool, (pool_out, location, type));
    if (location)
        gpc_pools_learn(rc, pool_out, location->id, location->type == CU_MEM_LOCATION_TYPE_DEVICE);
    return rc;
}

GPC_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuMemPoolCreate, (pool, poolProps));
    if (poolProps)
        gpc_pools_learn(rc, pool, poolProps->location.id, poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE);
    return rc;
}

GPC_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    gpc_init();
    return gpc_pools_destroy(pool);
}

GPC_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuMemPoolTrimTo, (pool, minBytesToKeep));
    if (rc == CUDA_SUCCESS)
        gpc_pools_trimmed(pool);
    return rc;
}

/* ---- synchronisations: where pools release above their threshold ---- */

/* The driver's call, then a look at what pools gave back (a loop over nothing without pools). */
#define SYNC_HOOK(name, params, args)                \
    GPC_EXPORT CUresult name params                  \
    {                                                \
        gpc_init();                                  \
        CUresult rc = GPC_CALL_REAL(name, args);     \
        gpc_pools_reconcile();                       \
        return rc;                                   \
    }
SYNC_HOOK(cuStreamSynchronize, (CUstream hStream), (hStream))
SYNC_HOOK(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream))
SYNC_HOOK(cuCtxSynchronize, (void), ())
SYNC_HOOK(cuCtxSynchronize_v2, (CUcontext ctx), (ctx))
SYNC_HOOK(cuEventSynchronize, (CUevent hEvent), (hEvent))
