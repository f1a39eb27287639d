/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context.h: the memory of contexts, which no allocation call reports (context.c).
 */
#ifndef GPUCAP_CHARGE_CONTEXT_H
#define GPUCAP_CHARGE_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "charge/charge.h"
#include "core/locks.h"
#include "driver/resolve.h"

/* The reserve charged per context on device `ordinal`: the setting, or the default by the device's
 * memory size (device.c's, which sets the device up first when the setting does not fix a size). */
uint64_t gpc_context_reserve(int ordinal);
/*
 * Begins charging a context on `dev` (gpc_charge_begin_context): CUDA_SUCCESS (c->budget
 * GPC_BUDGET_NONE when nothing is counted: no budget, pass-through, not a device, a reserve of 0)
 * or CUDA_ERROR_OUT_OF_MEMORY after logging the denial. The hook starts the library first.
 */
CUresult gpc_context_begin(struct gpc_charge *c, CUdevice dev, const char *call);
/*
 * The driver tore `ctx` down (call it after the real teardown succeeded): releases every charge
 * that lived in it (pointers, arrays, pool allocations, graph memory).
 */
void gpc_context_forget(CUcontext ctx);
/*
 * cuDevicePrimaryCtxRetain on `dev` (0 <= dev < GPC_MAX_DEVICES): gpc_context_primary_begin
 * charges the reserve when this is our first retain of the device and holds the primary-context
 * lock: CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY (denied; nothing held). After the driver call,
 * gpc_context_primary_end commits or gives back, counts the retain and drops the lock: true when
 * the retain was the device's first (the caller forgets cached context devices then).
 */
CUresult gpc_context_primary_begin(struct gpc_charge *c, CUdevice dev);
bool gpc_context_primary_end(struct gpc_charge *c, CUdevice dev, CUresult rc, CUcontext ctx);
/*
 * After a successful release (all false: drops one retain) or reset (all true: drops them all):
 * at 0 the driver reset the primary context, freeing everything in it, and its reserve goes back.
 * A reset frees the allocations even when we count no retain (it was retained before the library
 * started counting). True when the primary context went (its memory was freed).
 */
bool gpc_context_primary_drop(CUdevice dev, bool all);
/*
 * What the card holds for this process's contexts beyond their reserves (see context.c's head):
 * gpc_context_measure is budget.c's measuring step for budget `id` (registered at start-up;
 * rate-limited, never waits); gpc_context_measure_device measures device `ordinal` at once (after
 * a context was made there); gpc_context_torn_down gives back what was measured on `ordinal`
 * after a teardown there and measures again. None of them may be called holding the
 * primary-context lock or a ledger lock.
 */
void gpc_context_measure(int id, uint64_t in_flight);
void gpc_context_measure_device(int ordinal);
void gpc_context_torn_down(int ordinal);
/*
 * cuCtxSetLimit(limit, value): gpc_context_heap_begin decides (CUDA_ERROR_OUT_OF_MEMORY after the
 * exit sequence closed the budget for a heap that would grow; h->counted false: nothing to count,
 * the driver's call alone); then, holding the hook's context lock, gpc_context_heap_charge charges
 * what the heap grows by (CUDA_ERROR_OUT_OF_MEMORY after logging the denial: no driver call), the
 * driver is called, and gpc_context_heap_end records the heap's charge or puts the old one back.
 */
struct gpc_context_heap {
    bool counted;          /* a heap of the current context, under a budget */
    uint64_t key, want;    /* the heap's record (GPC_MAP_HEAP), and what it is charged after the call */
    uint64_t ctx;
    bool known;            /* it was charged before: `old` */
    struct gpc_track old;
    struct gpc_charge c;
};
CUresult gpc_context_heap_begin(struct gpc_context_heap *h, CUlimit limit, size_t value);
CUresult gpc_context_heap_charge(struct gpc_context_heap *h);
void gpc_context_heap_end(struct gpc_context_heap *h, CUresult rc);
/* Takes (true) or leaves (false) the life lock: context creations and teardowns, one at a time,
 * held across the driver call by the hooks that make and tear down contexts (hooks/ctx.c). */
void gpc_context_life(bool hold);
/* Its part of the fork sequence (hooks/init.c), for its locks (core/locks.h: CTX_LIFE, PRIMARY,
 * MEASURE). */
void gpc_context_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);

#endif
