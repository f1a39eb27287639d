/*
 * device.c: device ordinals and their budgets.
 *
 * A device's budget slot is set up on first use: its limit comes from the settings (options.c) and,
 * for a percentage, from the physical size the driver reports. Devices without a limit have no
 * slot and are passed through. The device of an allocation is the current context's; a process
 * that sees a single device skips asking the driver for it.
 */
#include "internal.h"

#include <pthread.h>

struct device {
    atomic_int ready;
    struct gpc_slot *slot; /* NULL: no budget */
};

static struct device devices[GPC_MAX_DEVICES];
static struct gpc_slot private_slots[GPC_MAX_DEVICES];
/* Answer for ordinals we cannot hold a budget for: never "uncapped". */
static struct gpc_slot deny_slot;
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int single_device = -1; /* -1 unknown, 0 several, 1 exactly one */

static struct gpc_slot *setup(int ordinal)
{
    struct device *d = &devices[ordinal];
    pthread_mutex_lock(&setup_lock);
    if (atomic_load(&d->ready)) {
        pthread_mutex_unlock(&setup_lock);
        return d->slot;
    }
    size_t physical = 0;
    bool have_physical = gpc_real.cuDeviceTotalMem_v2 &&
                         gpc_real.cuDeviceTotalMem_v2(&physical, ordinal) == CUDA_SUCCESS;
    const struct gpc_value *from;
    uint64_t limit = gpc_settings_limit(&gpc_settings, ordinal, physical, &from);
    if (from && !from->bad && from->u.size.is_percent && !have_physical) {
        pthread_mutex_unlock(&setup_lock);
        gpc_log(GPC_LOG_ERROR, "device %d: its memory size is unknown, so '%s' cannot be resolved yet; "
                "allocations are denied until it can", ordinal, from->text);
        return &deny_slot;
    }
    if (limit != GPC_UNLIMITED) {
        d->slot = &private_slots[ordinal];
        atomic_store(&d->slot->limit, limit);
        char a[32], b[32], where[600];
        gpc_log(GPC_LOG_INFO, "device %d: budget %s of %s (%s)", ordinal, gpc_format_size(limit, a, sizeof a),
                gpc_format_size(physical, b, sizeof b),
                gpc_value_origin(&gpc_settings, from, GPC_OPT_MEMORY_LIMIT, ordinal, where, sizeof where));
    }
    atomic_store_explicit(&d->ready, 1, memory_order_release);
    pthread_mutex_unlock(&setup_lock);
    return d->slot;
}

struct gpc_slot *gpc_device_slot(int ordinal)
{
    if (gpc_unlikely(ordinal < 0 || ordinal >= GPC_MAX_DEVICES)) {
        gpc_log(GPC_LOG_ERROR, "device %d: beyond the %d devices gpucap can budget; denied", ordinal,
                GPC_MAX_DEVICES);
        return &deny_slot;
    }
    struct device *d = &devices[ordinal];
    if (gpc_likely(atomic_load_explicit(&d->ready, memory_order_acquire)))
        return d->slot;
    return setup(ordinal);
}

struct gpc_slot *gpc_device_slot_if_ready(int ordinal)
{
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES)
        return NULL;
    struct device *d = &devices[ordinal];
    return atomic_load_explicit(&d->ready, memory_order_acquire) ? d->slot : NULL;
}

CUresult gpc_current_device(CUdevice *dev)
{
    int single = atomic_load_explicit(&single_device, memory_order_relaxed);
    if (gpc_likely(single == 1)) {
        *dev = 0;
        return CUDA_SUCCESS;
    }
    if (single < 0) {
        int n = 0;
        if (GPC_CALL_REAL(cuDeviceGetCount, (&n)) == CUDA_SUCCESS) {
            atomic_store(&single_device, n == 1);
            if (n == 1) {
                *dev = 0;
                return CUDA_SUCCESS;
            }
        }
    }
    return GPC_CALL_REAL(cuCtxGetDevice, (dev));
}
