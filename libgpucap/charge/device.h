/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.h: device ordinals, their budgets, the device of the current context (device.c).
 */
#ifndef GPUCAP_CHARGE_DEVICE_H
#define GPUCAP_CHARGE_DEVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/defs.h"
#include "core/locks.h"
#include "driver/resolve.h"

/* The budget id of device `ordinal` (set up on first use). */
int gpc_device_budget(int ordinal);
/* gpc_device_budget for a caller whose current context is on `ordinal` (the device was read from
 * it): set-up may then ask the driver for its figure there (the driver's own limit, device.c). */
int gpc_device_budget_current(int ordinal);
/* The memory size of device `ordinal` as the driver said when its budget was set up (which this
 * does first, like gpc_device_budget); 0 when the driver did not say or `ordinal` is out of range. */
uint64_t gpc_device_physical(int ordinal);
/* The UUID text ("GPU-...") of device `ordinal` once it was set up with one, else NULL. */
const char *gpc_device_uuid(int ordinal);
/* The budget id of `ordinal` if it was set up, else GPC_BUDGET_NONE; never sets anything up. */
int gpc_device_budget_if_ready(int ordinal);
/*
 * The device of the calling thread's current context: CUDA_SUCCESS, or the driver's error
 * (CUDA_ERROR_INVALID_CONTEXT when none is current). A single-device process answers 0 without a
 * driver call; otherwise one cuCtxGetCurrent, and cuCtxGetDevice once per context (cached).
 */
CUresult gpc_current_device(CUdevice *dev);
/* 1 when the process sees exactly one device, 0 several, -1 not asked yet (for gpc_ctx_device). */
extern atomic_int gpc_single_device;
/* gpc_ctx_device past its test for a single device (the per-context cache). */
CUresult gpc_ctx_device_lookup(CUcontext ctx, CUdevice *dev);
/*
 * The device of `ctx`, which must be the calling thread's current context (not NULL): CUDA_SUCCESS,
 * or the driver's error. No driver call once the context was seen (device.c caches it per context).
 */
static inline CUresult gpc_ctx_device(CUcontext ctx, CUdevice *dev)
{
    if (gpc_likely(atomic_load_explicit(&gpc_single_device, memory_order_relaxed) == 1)) {
        *dev = 0;
        return CUDA_SUCCESS;
    }
    return gpc_ctx_device_lookup(ctx, dev);
}
/*
 * Forgets the device of every context: call it after a context was made or torn down (its handle
 * may be one an earlier context had, on another device), before the caller gets the new handle.
 */
void gpc_ctx_devices_forget(void);
/* Its part of the fork sequence (hooks/init.c), for its locks (core/locks.h: SETUP, CTX_CACHE). */
void gpc_device_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);

/* Takes (true) or leaves (false) the set-up lock: no device is set up, and no setting read for
 * one, while it is held. */
void gpc_device_hold(bool hold);
/*
 * The budget that settings `s` give device `ordinal` (set up already), resolved as at start-up: a
 * percentage of the driver's figure where the driver's own limit is in force (else of the card),
 * never above that limit nor above one declared for the toolkit. GPC_UNLIMITED for none, or for a
 * device not set up; *from: the value it came from (gpc_settings_limit). Call it holding the set-up
 * lock (gpc_device_hold).
 */
struct gpc_settings;
struct gpc_value;
struct gpc_size;
/* A device's figures by the burstable model (issue 35): `burstable` when a memory_request applies; then the
 * budget in force is min(limit, max(request, grant)). `from_file`: the figure in force is the settings
 * file's own (no environment value lowered it). */
struct gpc_qos {
    bool burstable, from_file;
    uint64_t request, limit, grant;
};
/* ... and with *q (optional) the figures of the budget in force it returns. */
uint64_t gpc_device_limit_of(int ordinal, const struct gpc_settings *s, const struct gpc_value **from,
                             struct gpc_qos *q);
/* Writes the figures *q of ledger entry `id` (qos_request, qos_limit, qos_grant, qos_flags) for the
 * tools (`gpucap status`, the exporter, the arbiter). */
void gpc_device_note_qos(int id, const struct gpc_qos *q);
/* The figures last applied on device `ordinal` into *q (optional); with `set`, they become *set.
 * True when the device is burstable. Under the set-up lock (gpc_device_hold). */
bool gpc_device_qos(int ordinal, struct gpc_qos *q, struct gpc_qos *set);
/* A size asked for device `ordinal` (`gpucap set-memory`), resolved the same way: 0 when it cannot be
 * (a percentage of a card of unknown size, a device not set up). Under the set-up lock. */
uint64_t gpc_device_limit_size(int ordinal, const struct gpc_size *size);
/*
 * For each device ordinal whose budget is a ledger entry: fn(ordinal, budget id, UUID text or
 * NULL, physical bytes or 0, arg). Call it holding the set-up lock (gpc_device_hold). What live.c walks.
 */
void gpc_device_each_budget(void (*fn)(int ordinal, int id, const char *uuid, uint64_t physical, void *arg),
                            void *arg);

#endif
