/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hooks_ctx.c: the memory contexts take, which no allocation call reports.
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
 * device. So creations and teardowns run one at a time (life_lock, held across the driver call):
 * a teardown has released what was recorded with the handle before the handle can come back, and
 * each of them forgets the cached device of every context (device.c).
 * Default by device class, when the setting is unset: what a CUDA 12/13 context with lazy module
 * loading takes on such cards, rounded up: 512 MiB on cards of 64 GiB or more (H100/H200/B200
 * class), 384 MiB from 24 GiB (A100-40GB, L40, RTX 4090/5090), 256 MiB below. Only an estimate:
 * a program loading large modules uses more; `context_reserve` overrides it (0 disables).
 */
#include "internal.h"

#include <pthread.h>

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

uint64_t gpc_context_reserve(int ordinal, uint64_t physical)
{
    (void)ordinal;
    const struct gpc_value *v = &gpc_settings.opt[GPC_OPT_CONTEXT_RESERVE];
    if (v->set && !v->bad)
        return gpc_size_resolve(&v->u.size, physical);
    if (physical >= 64 * GiB - 4 * GiB) /* "80 GB" cards report a little less than 80 GiB */
        return 512 * MiB;
    if (physical >= 24 * GiB - 2 * GiB)
        return 384 * MiB;
    return 256 * MiB;
}

static void add_freed(const struct gpc_track *t, void *arg)
{
    uint64_t *freed = arg;
    if (t->device >= 0 && t->device < GPC_MAX_DEVICES)
        freed[t->device] += t->bytes;
}

/* The driver tore `ctx` down: release every charge that lived in it. */
static void forget_ctx(CUcontext ctx)
{
    if (!ctx || atomic_load_explicit(&gpc_passthrough, memory_order_relaxed))
        return;
    uint64_t freed[GPC_MAX_DEVICES] = {0};
    gpc_track_drain_ctx(GPC_MAP_PTR, (uint64_t)(uintptr_t)ctx, add_freed, freed);
    gpc_track_drain_ctx(GPC_MAP_ARRAY, (uint64_t)(uintptr_t)ctx, add_freed, freed);
    for (int d = 0; d < GPC_MAX_DEVICES; d++)
        if (freed[d])
            gpc_budget_release(gpc_device_budget_if_ready(d), freed[d]);
    gpc_pools_forget_ctx((uint64_t)(uintptr_t)ctx);
    gpc_graphs_forget_ctx(ctx);
}

static uint64_t reserve_for(CUdevice dev)
{
    size_t physical = 0;
    if (!gpc_real.cuDeviceTotalMem_v2 || gpc_real.cuDeviceTotalMem_v2(&physical, dev) != CUDA_SUCCESS)
        physical = 0;
    return gpc_context_reserve(dev, physical);
}

/* Context creations and teardowns, one at a time (see the top). Taken before primary_lock. */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
/* Primary contexts: our count of retains per ordinal, and what the first one charged. */
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static int primary_refs[GPC_MAX_DEVICES];
static uint64_t primary_charged[GPC_MAX_DEVICES];
static CUcontext primary_handle[GPC_MAX_DEVICES]; /* the same handle across retain/release cycles */

static void primary_prepare(void)
{
    pthread_mutex_lock(&life_lock);
    pthread_mutex_lock(&primary_lock);
}
static void primary_parent(void)
{
    pthread_mutex_unlock(&primary_lock);
    pthread_mutex_unlock(&life_lock);
}
/* Another thread may have held a lock at fork(): the child starts with them free. */
static void primary_child(void)
{
    pthread_mutex_init(&primary_lock, NULL);
    pthread_mutex_init(&life_lock, NULL);
}

void gpc_ctx_atfork(void)
{
    pthread_atfork(primary_prepare, primary_parent, primary_child);
}

/* Begins charging a context on `dev`: CUDA_SUCCESS (c->budget NONE when nothing is counted) or OOM. */
static CUresult ctx_begin(struct gpc_charge *c, CUdevice dev, const char *call)
{
    c->budget = GPC_BUDGET_NONE;
    if (!gpc_enforcing())
        return CUDA_SUCCESS;
    /* Not a device (a caller's uninitialised ordinal): the driver gives its own error. */
    int n = 0;
    if (dev < 0 || (GPC_CALL_REAL(cuDeviceGetCount, (&n)) == CUDA_SUCCESS && dev >= n))
        return CUDA_SUCCESS;
    uint64_t bytes = reserve_for(dev);
    if (bytes == 0)
        return CUDA_SUCCESS;
    return gpc_charge_begin_context(c, dev, bytes, call);
}

#define CTX_CREATE(name, params, args, dev)                                       \
    GPC_EXPORT CUresult name params                                               \
    {                                                                             \
        struct gpc_charge c;                                                      \
        CUresult rc = ctx_begin(&c, dev, #name);                                  \
        if (rc != CUDA_SUCCESS)                                                   \
            return rc;                                                            \
        pthread_mutex_lock(&life_lock);                                           \
        rc = GPC_CALL_REAL(name, args);                                           \
        if (rc == CUDA_SUCCESS)                                                   \
            gpc_ctx_devices_forget();                                             \
        gpc_charge_end(&c, rc, GPC_MAP_CTX, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0); \
        pthread_mutex_unlock(&life_lock);                                         \
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
        pthread_mutex_lock(&life_lock);                                           \
        bool known = gpc_free_begin(GPC_MAP_CTX, (uint64_t)(uintptr_t)ctx, &t);   \
        CUresult rc = GPC_CALL_REAL(name, (ctx));                                 \
        gpc_free_end(known, GPC_MAP_CTX, (uint64_t)(uintptr_t)ctx, &t, rc);       \
        if (rc == CUDA_SUCCESS) {                                                 \
            gpc_ctx_devices_forget();                                             \
            forget_ctx((CUcontext)ctx);                                           \
        }                                                                         \
        pthread_mutex_unlock(&life_lock);                                         \
        return rc;                                                                \
    }

CTX_DESTROY(cuCtxDestroy, CUcontext)
CTX_DESTROY(cuCtxDestroy_v2, CUcontext)
CTX_DESTROY(cuGreenCtxDestroy, CUgreenCtx)

GPC_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
    struct gpc_charge c;
    CUresult rc = ctx_begin(&c, dev, "cuGreenCtxCreate");
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&life_lock);
    rc = GPC_CALL_REAL(cuGreenCtxCreate, (phCtx, desc, dev, flags));
    if (rc == CUDA_SUCCESS)
        gpc_ctx_devices_forget();
    gpc_charge_end(&c, rc, GPC_MAP_CTX, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*phCtx : 0);
    pthread_mutex_unlock(&life_lock);
    return rc;
}

GPC_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    gpc_init();
    if (!gpc_enforcing() || dev < 0 || dev >= GPC_MAX_DEVICES)
        return GPC_CALL_REAL(cuDevicePrimaryCtxRetain, (pctx, dev));
    /* Serialised per process: the first retain, and only it, charges; retains are rare. */
    pthread_mutex_lock(&life_lock);
    pthread_mutex_lock(&primary_lock);
    struct gpc_charge c = {.budget = GPC_BUDGET_NONE};
    CUresult rc = CUDA_SUCCESS;
    if (primary_refs[dev] == 0)
        rc = ctx_begin(&c, dev, "cuDevicePrimaryCtxRetain");
    if (rc == CUDA_SUCCESS) {
        rc = GPC_CALL_REAL(cuDevicePrimaryCtxRetain, (pctx, dev));
        if (rc == CUDA_SUCCESS) {
            primary_handle[dev] = *pctx;
            if (primary_refs[dev]++ == 0) {
                primary_charged[dev] = c.budget == GPC_BUDGET_NONE ? 0 : c.bytes;
                gpc_charge_admitted(&c);
                gpc_budget_note_contexts(c.budget, (int64_t)primary_charged[dev]);
                gpc_ctx_devices_forget();
            }
        } else {
            gpc_charge_refused(&c);
        }
    }
    pthread_mutex_unlock(&primary_lock);
    pthread_mutex_unlock(&life_lock);
    return rc;
}

/*
 * After a successful release (drop = 1) or reset (drop = all): at 0 the driver reset the primary
 * context, freeing everything in it, and its reserve goes back. A reset frees the allocations even
 * when we count no retain (it was retained before the library started counting).
 */
static void primary_drop(CUdevice dev, bool all)
{
    if (dev < 0 || dev >= GPC_MAX_DEVICES || atomic_load(&gpc_passthrough))
        return;
    pthread_mutex_lock(&primary_lock);
    bool reset = all;
    if (primary_refs[dev] > 0) {
        primary_refs[dev] = all ? 0 : primary_refs[dev] - 1;
        if (primary_refs[dev] == 0) {
            int budget = gpc_device_budget_if_ready(dev);
            gpc_budget_note_contexts(budget, -(int64_t)primary_charged[dev]);
            gpc_budget_give_back(budget, primary_charged[dev]); /* a context's end is no free */
            primary_charged[dev] = 0;
            reset = true;
        }
    }
    if (reset)
        forget_ctx(primary_handle[dev]);
    pthread_mutex_unlock(&primary_lock);
}

#define PRIMARY_DROP(name, all)                                  \
    GPC_EXPORT CUresult name(CUdevice dev)                       \
    {                                                            \
        gpc_init();                                              \
        pthread_mutex_lock(&life_lock);                          \
        CUresult rc = GPC_CALL_REAL(name, (dev));                \
        if (rc == CUDA_SUCCESS) {                                \
            gpc_ctx_devices_forget();                            \
            primary_drop(dev, all);                              \
        }                                                        \
        pthread_mutex_unlock(&life_lock);                        \
        return rc;                                               \
    }

PRIMARY_DROP(cuDevicePrimaryCtxRelease, false)
PRIMARY_DROP(cuDevicePrimaryCtxRelease_v2, false)
PRIMARY_DROP(cuDevicePrimaryCtxReset, true)
PRIMARY_DROP(cuDevicePrimaryCtxReset_v2, true)
