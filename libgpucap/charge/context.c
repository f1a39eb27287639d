/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context.c: the accounting of the memory contexts take (hooks/hooks_ctx.c's head says what is
 * charged when): the reserve per context, by the setting or by the device's class; the count of
 * primary-context retains per device and what the first one charged; and what a teardown releases.
 * A context is charged through charge.c like an allocation (gpc_charge_begin_context, then
 * gpc_charge_end or gpc_charge_commit; gpc_free_end or gpc_uncharge), and every charge recorded
 * with a context (pointers, arrays, pool allocations, graph memory) is released with it.
 */
#include "charge/context.h"

#include "common/defs.h"
#include "common/options.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/state.h"
#include "core/track.h"
#include "charge/charge.h"
#include "charge/device.h"
#include "charge/graph.h"
#include "charge/pool.h"
#include "driver/resolve.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

uint64_t gpc_context_reserve(int ordinal)
{
    const struct gpc_value *v = &gpc_config.opt[GPC_OPT_CONTEXT_RESERVE];
    /* A size in bytes needs no device size: the device is not even set up for it. */
    if (v->set && !v->bad && !v->u.size.is_percent)
        return v->u.size.bytes;
    uint64_t physical = gpc_device_physical(ordinal);
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

void gpc_context_forget(CUcontext ctx)
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

CUresult gpc_context_begin(struct gpc_charge *c, CUdevice dev, const char *call)
{
    c->budget = GPC_BUDGET_NONE;
    if (!gpc_counting())
        return CUDA_SUCCESS;
    /* Not a device (a caller's uninitialised ordinal): the driver gives its own error. */
    int n = 0;
    if (dev < 0 || (GPC_CALL_REAL(cuDeviceGetCount, (&n)) == CUDA_SUCCESS && dev >= n))
        return CUDA_SUCCESS;
    uint64_t bytes = gpc_context_reserve(dev);
    if (bytes == 0)
        return CUDA_SUCCESS;
    return gpc_charge_begin_context(c, dev, bytes, call);
}

/* Primary contexts: our count of retains per ordinal, and what the first one charged. */
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static int primary_refs[GPC_MAX_DEVICES];
static uint64_t primary_charged[GPC_MAX_DEVICES];
static CUcontext primary_handle[GPC_MAX_DEVICES]; /* the same handle across retain/release cycles */

static void primary_prepare(void) { pthread_mutex_lock(&primary_lock); }
static void primary_parent(void) { pthread_mutex_unlock(&primary_lock); }
/* Another thread may have held the lock at fork(): the child starts with it free. */
static void primary_child(void) { pthread_mutex_init(&primary_lock, NULL); }

void gpc_context_atfork(void)
{
    pthread_atfork(primary_prepare, primary_parent, primary_child);
}

CUresult gpc_context_primary_begin(struct gpc_charge *c, CUdevice dev)
{
    pthread_mutex_lock(&primary_lock);
    c->budget = GPC_BUDGET_NONE;
    CUresult rc = CUDA_SUCCESS;
    if (primary_refs[dev] == 0)
        rc = gpc_context_begin(c, dev, "cuDevicePrimaryCtxRetain");
    if (rc != CUDA_SUCCESS)
        pthread_mutex_unlock(&primary_lock);
    return rc;
}

bool gpc_context_primary_end(struct gpc_charge *c, CUdevice dev, CUresult rc, CUcontext ctx)
{
    bool first = false;
    bool charged = gpc_charge_commit(c, rc);
    if (rc == CUDA_SUCCESS) {
        primary_handle[dev] = ctx;
        if (primary_refs[dev]++ == 0) {
            primary_charged[dev] = charged ? c->bytes : 0;
            first = true;
        }
    }
    pthread_mutex_unlock(&primary_lock);
    return first;
}

void gpc_context_primary_drop(CUdevice dev, bool all)
{
    if (dev < 0 || dev >= GPC_MAX_DEVICES || atomic_load(&gpc_passthrough))
        return;
    pthread_mutex_lock(&primary_lock);
    bool reset = all;
    if (primary_refs[dev] > 0) {
        primary_refs[dev] = all ? 0 : primary_refs[dev] - 1;
        if (primary_refs[dev] == 0) {
            gpc_uncharge(dev, primary_charged[dev], true);
            primary_charged[dev] = 0;
            reset = true;
        }
    }
    if (reset)
        gpc_context_forget(primary_handle[dev]);
    pthread_mutex_unlock(&primary_lock);
}
