/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctx.c: the memory contexts take, which no allocation call reports: the calls that make and
 * tear down contexts. The accounting (the reserve, the count of primary retains, what a teardown
 * releases) is charge/context.c.
 *
 * A context holds device memory for its own structures, the local-memory and printf heaps and the
 * modules it loads (hundreds of MiB on large cards; NVML's per-process figure includes it). Each
 * context is charged a fixed reserve, `context_reserve` (GPUCAP_CONTEXT_RESERVE), when it is made
 * and released when it goes:
 *  - cuCtxCreate (all versions) and cuGreenCtxCreate: per context, recorded by handle
 *    (GPC_MAP_CTX), released by cuCtxDestroy / cuGreenCtxDestroy;
 *  - the primary context: by the first cuDevicePrimaryCtxRetain of a device, released by the
 *    release that drops our count to 0 or by cuDevicePrimaryCtxReset.
 * The reserve is charged before the driver call: a context that does not fit is denied with
 * CUDA_ERROR_OUT_OF_MEMORY, as the driver answers when the card is full.
 * Teardown frees what lived in the context: cuCtxDestroy "destroys and cleans up all resources
 * associated with the context", cuDevicePrimaryCtxReset destroys all allocations of the primary
 * context, and the last cuDevicePrimaryCtxRelease resets it. So every charge recorded with that
 * context (pointers, arrays, pool allocations, graph memory) is released with it, on every path.
 * A driver may give a destroyed context's handle to the next context made, maybe on another
 * device. So creations and teardowns run one at a time (charge/context.c's life lock, held across
 * the driver call): a teardown has released what was recorded with the handle before the handle can come back, and
 * each of them forgets the cached device of every context (device.c).
 * Default by device class, when the setting is unset: what a CUDA 12/13 context with lazy module
 * loading takes on such cards once a framework's kernels are loaded, rounded up: 768 MiB on cards
 * of 64 GiB or more (H100/H200/B200 class; measured on an H200: 518 MiB bare, 758 MiB for PyTorch
 * after a training step), 384 MiB from 24 GiB (A100-40GB, L40, RTX 4090/5090), 256 MiB below (not
 * measured yet). Only an estimate: where NVML lists the process, what the card really holds beyond
 * it is charged as well (charge/context.c); `context_reserve` overrides it (0 disables both).
 *
 * cuCtxSetLimit sizes two heaps of the current context that the driver takes on the card at the
 * call; what a setting asks beyond the defaults the reserve covers is charged like an allocation
 * (charge/context.c says how), one setting at a time and none across a teardown (the life lock).
 */
#include "hooks/init.h"

#include "charge/charge.h"
#include "charge/context.h"
#include "charge/device.h"
#include "driver/resolve.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTX_CREATE(name, params, args, dev)                                       \
    GPC_EXPORT CUresult name params                                               \
    {                                                                             \
        struct gpc_charge c;                                                      \
        gpc_init();                                                               \
        CUresult rc = gpc_context_begin(&c, dev, #name);                          \
        if (rc != CUDA_SUCCESS)                                                   \
            return rc;                                                            \
        gpc_context_life(true);                                                   \
        rc = GPC_CALL_REAL(name, args);                                           \
        if (rc == CUDA_SUCCESS)                                                   \
            gpc_ctx_devices_forget();                                             \
        gpc_charge_end(&c, rc, GPC_MAP_CTX, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0); \
        gpc_context_life(false);                                                  \
        if (rc == CUDA_SUCCESS)                                                   \
            gpc_context_measure_device(dev);                                      \
        return rc;                                                                \
    }

CTX_CREATE(cuCtxCreate, (CUcontext *pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev), dev)
CTX_CREATE(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev), dev)
CTX_CREATE(cuCtxCreate_v3, (CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                            CUdevice dev), (pctx, paramsArray, numParams, flags, dev), dev)
CTX_CREATE(cuCtxCreate_v4, (CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev),
           (pctx, ctxCreateParams, flags, dev), dev)

#define CTX_DESTROY(name, type)                                                   \
    GPC_EXPORT CUresult name(type ctx)                                            \
    {                                                                             \
        struct gpc_track t;                                                       \
        gpc_init();                                                               \
        gpc_context_life(true);                                                   \
        bool known = gpc_free_begin(GPC_MAP_CTX, (uint64_t)(uintptr_t)ctx, &t);   \
        CUresult rc = GPC_CALL_REAL(name, (ctx));                                 \
        gpc_free_end(known, GPC_MAP_CTX, (uint64_t)(uintptr_t)ctx, &t, rc);       \
        if (rc == CUDA_SUCCESS) {                                                 \
            gpc_ctx_devices_forget();                                             \
            gpc_context_forget((CUcontext)ctx);                                   \
        }                                                                         \
        gpc_context_life(false);                                                  \
        if (rc == CUDA_SUCCESS && known)                                          \
            gpc_context_torn_down(t.device);                                      \
        return rc;                                                                \
    }

CTX_DESTROY(cuCtxDestroy, CUcontext)
CTX_DESTROY(cuCtxDestroy_v2, CUcontext)
CTX_DESTROY(cuGreenCtxDestroy, CUgreenCtx)

GPC_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
    struct gpc_charge c;
    gpc_init();
    CUresult rc = gpc_context_begin(&c, dev, "cuGreenCtxCreate");
    if (rc != CUDA_SUCCESS)
        return rc;
    gpc_context_life(true);
    rc = GPC_CALL_REAL(cuGreenCtxCreate, (phCtx, desc, dev, flags));
    if (rc == CUDA_SUCCESS)
        gpc_ctx_devices_forget();
    gpc_charge_end(&c, rc, GPC_MAP_CTX, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*phCtx : 0);
    gpc_context_life(false);
    if (rc == CUDA_SUCCESS)
        gpc_context_measure_device(dev);
    return rc;
}

GPC_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (!gpc_enforcing() || dev < 0 || dev >= GPC_MAX_DEVICES)
        return gpc_closed_now() ? CUDA_ERROR_OUT_OF_MEMORY : GPC_CALL_REAL(cuDevicePrimaryCtxRetain, (pctx, dev));
    /* Serialised per process: the first retain, and only it, charges; retains are rare. */
    gpc_context_life(true);
    struct gpc_charge c;
    bool first = false;
    CUresult rc = gpc_context_primary_begin(&c, dev);
    if (rc == CUDA_SUCCESS) {
        rc = GPC_CALL_REAL(cuDevicePrimaryCtxRetain, (pctx, dev));
        first = gpc_context_primary_end(&c, dev, rc, rc == CUDA_SUCCESS ? *pctx : NULL);
        if (first)
            gpc_ctx_devices_forget();
    }
    gpc_context_life(false);
    if (first)
        gpc_context_measure_device(dev);
    return rc;
}

#define PRIMARY_DROP(name, all)                                  \
    GPC_EXPORT CUresult name(CUdevice dev)                       \
    {                                                            \
        gpc_init();                                              \
        gpc_context_life(true);                                  \
        CUresult rc = GPC_CALL_REAL(name, (dev));                \
        bool gone = false;                                       \
        if (rc == CUDA_SUCCESS) {                                \
            gpc_ctx_devices_forget();                            \
            gone = gpc_context_primary_drop(dev, all);           \
        }                                                        \
        gpc_context_life(false);                                 \
        if (gone)                                                \
            gpc_context_torn_down(dev);                          \
        return rc;                                               \
    }

PRIMARY_DROP(cuDevicePrimaryCtxRelease, false)
PRIMARY_DROP(cuDevicePrimaryCtxRelease_v2, false)
PRIMARY_DROP(cuDevicePrimaryCtxReset, true)
PRIMARY_DROP(cuDevicePrimaryCtxReset_v2, true)

/* The heaps a setting sizes are charged like allocations (charge/context.c); one setting at a time,
 * and none across a teardown of the context. */
GPC_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    gpc_init();
    struct gpc_context_heap h;
    CUresult rc = gpc_context_heap_begin(&h, limit, value);
    if (rc != CUDA_SUCCESS || !h.counted)
        return rc == CUDA_SUCCESS ? GPC_CALL_REAL(cuCtxSetLimit, (limit, value)) : rc;
    gpc_context_life(true);
    rc = gpc_context_heap_charge(&h);
    if (rc == CUDA_SUCCESS)
        rc = GPC_CALL_REAL(cuCtxSetLimit, (limit, value));
    gpc_context_heap_end(&h, rc);
    gpc_context_life(false);
    return rc;
}
