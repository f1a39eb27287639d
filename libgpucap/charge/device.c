/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.c: device ordinals and their budgets.
 *
 * A device's budget is set up on first use: its limit comes from the settings (options.c) and, for
 * a percentage, from the physical size the driver reports; its ledger entry is found by the
 * device's UUID, so processes that number devices differently (CUDA_VISIBLE_DEVICES subsets,
 * reorderings, UUID lists) share one budget per card. Devices without a limit are passed through.
 * The device of an allocation is the current context's; a process that sees a single device skips
 * asking the driver for it, and a process with several asks once per context (see ctx_slots).
 */
#include "charge/device.h"

#include "common/defs.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "core/state.h"
#include "driver/resolve.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct device {
    atomic_int ready;
    int budget; /* ledger index or GPC_BUDGET_NONE / GPC_BUDGET_DENY */
};

static struct device devices[GPC_MAX_DEVICES];
/* Bytes, as the driver said at set-up (0: it did not say), and the UUID text ("" when the driver gave
 * none), for live.c to resolve a limit again. Apart from `devices`, whose 8-byte entries the
 * allocation path indexes. */
static _Atomic uint64_t physical_of[GPC_MAX_DEVICES];
static char uuid_of[GPC_MAX_DEVICES][GPC_UUID_TEXT];
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_int gpc_single_device = -1; /* -1 unknown, 0 several, 1 exactly one */

/*
 * The device of each context, so that an allocation asks the driver only for its current context
 * (cuCtxGetCurrent) and not also for that context's device. One word per slot, read without a
 * lock: the handle in the low 48 bits (user-space addresses; a handle above them is not cached),
 * the device ordinal above; 0 is empty. A slot is written under ctx_lock only, by a fill or by
 * gpc_ctx_devices_forget, which empties every slot and bumps ctx_epoch. A fill asks the driver
 * first, outside the lock, and stores its answer only when no forget ran meanwhile (the same
 * epoch, read before asking): an answer about a context torn down since is never stored. A handle
 * is reused by the driver only after a teardown, and every teardown and creation hook forgets
 * (hooks_ctx.c), before the new context's handle reaches the caller, so a slot never names the
 * device of an earlier context at that address. What it cannot see: a context torn down and
 * another made at its address both by routes no hook sees (the driver's private entry points);
 * the hooks cover every exported and cuGetProcAddress route.
 */
#define CTX_SLOTS 64
#define CTX_PROBE 4
#define CTX_HANDLE_BITS 48
#define CTX_HANDLE_MASK ((UINT64_C(1) << CTX_HANDLE_BITS) - 1)
static _Atomic uint64_t ctx_slots[CTX_SLOTS];
static _Atomic uint64_t ctx_epoch;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static void setup_prepare(void)
{
    pthread_mutex_lock(&setup_lock);
    pthread_mutex_lock(&ctx_lock);
}
static void setup_parent(void)
{
    pthread_mutex_unlock(&ctx_lock);
    pthread_mutex_unlock(&setup_lock);
}
/* Another thread may have held a lock at fork(): the child starts with them free, and with no
 * context known (the parent's are not the child's). */
static void setup_child(void)
{
    pthread_mutex_init(&setup_lock, NULL);
    pthread_mutex_init(&ctx_lock, NULL);
    atomic_fetch_add(&ctx_epoch, 1);
    for (int i = 0; i < CTX_SLOTS; i++)
        atomic_store_explicit(&ctx_slots[i], 0, memory_order_relaxed);
}

void gpc_device_atfork(void)
{
    pthread_atfork(setup_prepare, setup_parent, setup_child);
}

static int setup(int ordinal)
{
    struct device *d = &devices[ordinal];
    pthread_mutex_lock(&setup_lock);
    if (atomic_load(&d->ready)) {
        pthread_mutex_unlock(&setup_lock);
        return d->budget;
    }
    size_t physical = 0;
    bool have_physical = gpc_real.cuDeviceTotalMem_v2 &&
                         gpc_real.cuDeviceTotalMem_v2(&physical, ordinal) == CUDA_SUCCESS;
    atomic_store_explicit(&physical_of[ordinal], have_physical ? physical : 0, memory_order_relaxed);
    CUuuid uuid;
    memset(&uuid, 0, sizeof uuid);
    bool have_uuid = GPC_CALL_REAL(cuDeviceGetUuid_v2, (&uuid, ordinal)) == CUDA_SUCCESS;
    char uuid_text[GPC_UUID_TEXT];
    gpc_uuid_format((const uint8_t *)uuid.bytes, uuid_text);
    const struct gpc_value *from;
    uint64_t limit = gpc_settings_limit(&gpc_config, ordinal, have_uuid ? uuid_text : NULL, physical, &from);
    int budget = GPC_BUDGET_NONE;
    if (limit == GPC_UNLIMITED) {
        budget = GPC_BUDGET_NONE;
    } else if (from && from->bad) {
        /* A broken setting caps this process at 0; it does not drag the shared budget down. */
        budget = GPC_BUDGET_DENY;
    } else if (from && from->u.size.is_percent && !have_physical) {
        pthread_mutex_unlock(&setup_lock);
        gpc_log(GPC_LOG_ERROR, "device %d: its memory size is unknown, so '%s' cannot be resolved yet; "
                "allocations are denied until it can", ordinal, from->text);
        return GPC_BUDGET_DENY;
    } else {
        if (!have_uuid) {
            /* Without an identity the budget cannot be shared correctly: keep it to this ordinal. */
            gpc_log(GPC_LOG_WARN, "device %d: no UUID from the driver; its budget is keyed by ordinal", ordinal);
            memcpy(uuid.bytes, "gpucap-ordinal", 14);
            uuid.bytes[15] = (char)ordinal;
        }
        budget = gpc_ledger_device((const uint8_t *)uuid.bytes, physical, limit, ordinal);
        if (budget >= 0)
            gpc_budget_bind(budget, limit, gpc_config.locked);
        if (budget == -EAGAIN) {
            /* Contended (a crowd starting) or the process table full: logged; this call is
             * denied and the next one tries again. Never cached as a denial for life. */
            pthread_mutex_unlock(&setup_lock);
            return GPC_BUDGET_DENY;
        }
        if (budget < 0) {
            gpc_log(GPC_LOG_ERROR, "device %d: the ledger's device table is full (%d cards); allocations on it are "
                    "denied", ordinal, GPC_LEDGER_DEVICES);
            budget = GPC_BUDGET_DENY;
        }
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], where[600];
        gpc_log(GPC_LOG_INFO, "device %d (%s): budget %s of %s (%s)", ordinal, uuid_text, gpc_format_size(limit, a, sizeof a),
                gpc_format_size(physical, b, sizeof b),
                gpc_value_origin(&gpc_config, from, GPC_OPT_MEMORY_LIMIT, ordinal, where, sizeof where));
    }
    d->budget = budget;
    if (have_uuid)
        memcpy(uuid_of[ordinal], uuid_text, sizeof uuid_of[ordinal]);
    atomic_store_explicit(&d->ready, 1, memory_order_release);
    pthread_mutex_unlock(&setup_lock);
    return budget;
}

int gpc_device_budget(int ordinal)
{
    if (gpc_unlikely(ordinal < 0 || ordinal >= GPC_MAX_DEVICES)) {
        gpc_log(GPC_LOG_ERROR, "device %d: beyond the %d devices gpucap can budget; denied", ordinal,
                GPC_MAX_DEVICES);
        return GPC_BUDGET_DENY;
    }
    struct device *d = &devices[ordinal];
    if (gpc_likely(atomic_load_explicit(&d->ready, memory_order_acquire)))
        return d->budget;
    return setup(ordinal);
}

uint64_t gpc_device_physical(int ordinal)
{
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES)
        return 0;
    gpc_device_budget(ordinal);
    return atomic_load_explicit(&physical_of[ordinal], memory_order_relaxed);
}

int gpc_device_budget_if_ready(int ordinal)
{
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES)
        return GPC_BUDGET_NONE;
    struct device *d = &devices[ordinal];
    return atomic_load_explicit(&d->ready, memory_order_acquire) ? d->budget : GPC_BUDGET_NONE;
}

void gpc_device_hold(bool hold)
{
    if (hold)
        pthread_mutex_lock(&setup_lock);
    else
        pthread_mutex_unlock(&setup_lock);
}

void gpc_device_each_budget(void (*fn)(int ordinal, int id, const char *uuid, uint64_t physical, void *arg),
                            void *arg)
{
    for (int i = 0; i < GPC_MAX_DEVICES; i++) {
        struct device *d = &devices[i];
        if (atomic_load_explicit(&d->ready, memory_order_acquire) && d->budget >= 0)
            fn(i, d->budget, uuid_of[i][0] ? uuid_of[i] : NULL, atomic_load(&physical_of[i]), arg);
    }
}

/* True when the process sees exactly one device (asked of the driver once). */
static bool one_device(void)
{
    int single = atomic_load_explicit(&gpc_single_device, memory_order_relaxed);
    if (gpc_likely(single >= 0))
        return single == 1;
    int n = 0;
    if (GPC_CALL_REAL(cuDeviceGetCount, (&n)) != CUDA_SUCCESS)
        return false;
    atomic_store(&gpc_single_device, n == 1);
    return n == 1;
}

static unsigned ctx_hash(uint64_t handle)
{
    return (unsigned)(((handle >> 4) * UINT64_C(0x9e3779b97f4a7c15)) >> 58) % CTX_SLOTS;
}

/* Asks the driver for the device of the current context `handle`, and remembers it. Out of line:
 * the lookup that precedes it saves no registers. */
__attribute__((noinline, cold)) static CUresult ctx_device_slow(uint64_t handle, CUdevice *dev)
{
    uint64_t epoch = atomic_load(&ctx_epoch);
    CUresult rc = GPC_CALL_REAL(cuCtxGetDevice, (dev));
    if (rc != CUDA_SUCCESS || (handle & ~CTX_HANDLE_MASK) || *dev < 0 || *dev >= GPC_MAX_DEVICES)
        return rc;
    uint64_t word = handle | (uint64_t)*dev << CTX_HANDLE_BITS;
    unsigned h = ctx_hash(handle);
    pthread_mutex_lock(&ctx_lock);
    if (atomic_load(&ctx_epoch) == epoch) {
        /* Its own slot (another thread filled it) or the first empty one, else the home slot. */
        unsigned at = h;
        for (unsigned p = 0; p < CTX_PROBE; p++) {
            uint64_t old = atomic_load_explicit(&ctx_slots[(h + p) % CTX_SLOTS], memory_order_relaxed);
            if (old == 0 || (old & CTX_HANDLE_MASK) == handle) {
                at = (h + p) % CTX_SLOTS;
                break;
            }
        }
        atomic_store_explicit(&ctx_slots[at], word, memory_order_relaxed);
    }
    pthread_mutex_unlock(&ctx_lock);
    return rc;
}

CUresult gpc_ctx_device_lookup(CUcontext ctx, CUdevice *dev)
{
    if (one_device()) {
        *dev = 0;
        return CUDA_SUCCESS;
    }
    uint64_t handle = (uint64_t)(uintptr_t)ctx;
    unsigned h = ctx_hash(handle);
    for (unsigned p = 0; p < CTX_PROBE; p++) {
        uint64_t word = atomic_load_explicit(&ctx_slots[(h + p) % CTX_SLOTS], memory_order_relaxed);
        if ((word & CTX_HANDLE_MASK) == handle) {
            *dev = (CUdevice)(word >> CTX_HANDLE_BITS);
            return CUDA_SUCCESS;
        }
        if (word == 0)
            break;
    }
    return ctx_device_slow(handle, dev);
}

CUresult gpc_current_device(CUdevice *dev)
{
    if (gpc_likely(one_device())) {
        *dev = 0;
        return CUDA_SUCCESS;
    }
    CUcontext ctx = NULL;
    /* Without cuCtxGetCurrent there is no handle to look up: the driver's answer, uncached. */
    if (gpc_unlikely(!gpc_real.cuCtxGetCurrent))
        return GPC_CALL_REAL(cuCtxGetDevice, (dev));
    CUresult rc = gpc_real.cuCtxGetCurrent(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    return ctx ? gpc_ctx_device_lookup(ctx, dev) : CUDA_ERROR_INVALID_CONTEXT;
}

void gpc_ctx_devices_forget(void)
{
    pthread_mutex_lock(&ctx_lock);
    atomic_fetch_add(&ctx_epoch, 1);
    for (int i = 0; i < CTX_SLOTS; i++)
        atomic_store_explicit(&ctx_slots[i], 0, memory_order_relaxed);
    pthread_mutex_unlock(&ctx_lock);
}
