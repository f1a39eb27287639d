/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.c: device ordinals and their budgets.
 *
 * A device's budget is set up on first use: its limit comes from the settings (options.c) and, for
 * a percentage, from the physical size the driver reports; its ledger entry is found by the
 * device's UUID, so processes that number devices differently (CUDA_VISIBLE_DEVICES subsets,
 * reorderings, UUID lists) share one budget per card. Devices without a limit are passed through.
 * The device of an allocation is the current context's; a process that sees a single device skips
 * asking the driver for it.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

struct device {
    atomic_int ready;
    int budget; /* ledger index or GPC_BUDGET_NONE / GPC_BUDGET_DENY */
};

static struct device devices[GPC_MAX_DEVICES];
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int single_device = -1; /* -1 unknown, 0 several, 1 exactly one */

static void setup_prepare(void) { pthread_mutex_lock(&setup_lock); }
static void setup_parent(void) { pthread_mutex_unlock(&setup_lock); }
/* Another thread may have held the lock at fork(): the child starts with it free. */
static void setup_child(void) { pthread_mutex_init(&setup_lock, NULL); }

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
    CUuuid uuid;
    memset(&uuid, 0, sizeof uuid);
    bool have_uuid = GPC_CALL_REAL(cuDeviceGetUuid_v2, (&uuid, ordinal)) == CUDA_SUCCESS;
    char uuid_text[GPC_UUID_TEXT];
    gpc_uuid_format((const uint8_t *)uuid.bytes, uuid_text);
    const struct gpc_value *from;
    uint64_t limit = gpc_settings_limit(&gpc_settings, ordinal, have_uuid ? uuid_text : NULL, physical, &from);
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
                gpc_value_origin(&gpc_settings, from, GPC_OPT_MEMORY_LIMIT, ordinal, where, sizeof where));
    }
    d->budget = budget;
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

int gpc_device_budget_if_ready(int ordinal)
{
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES)
        return GPC_BUDGET_NONE;
    struct device *d = &devices[ordinal];
    return atomic_load_explicit(&d->ready, memory_order_acquire) ? d->budget : GPC_BUDGET_NONE;
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
