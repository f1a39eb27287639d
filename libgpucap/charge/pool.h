/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.h: stream-ordered pools, counted by what they reserve on the card (pool.c).
 */
#ifndef GPUCAP_CHARGE_POOL_H
#define GPUCAP_CHARGE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/locks.h"
#include "core/track.h"
#include "driver/resolve.h"

/*
 * Asks the pools of device `device` to give back what they hold unused (cuMemPoolTrimTo(pool, 0))
 * and releases from the budget what they gave back. For a caller about to deny an allocation:
 * true when something was released, so that admission is worth trying once more.
 */
bool gpc_pools_trim(int device);
/* Releases what pools gave back on their own (at synchronisations); cheap when no pool is known. */
void gpc_pools_reconcile(void);
/* Its part of the fork sequence (hooks/init.c), for its locks (core/locks.h: POOL, POOL_TABLE, POOL_KEPT). */
void gpc_pools_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);
/* Context `ctx` was torn down: its pool allocations went back to their pools, which the driver
 * trimmed; drops their records and brings each pool's charge to what it still reserves. */
void gpc_pools_forget_ctx(uint64_t ctx);
/*
 * cuMemFree on a stream-ordered allocation (legal): gpc_pools_free_begin takes its record (true
 * when it was one of ours), gpc_pools_free_end settles its pool after the driver call.
 */
bool gpc_pools_free_begin(CUdeviceptr dptr, struct gpc_track *t);
void gpc_pools_free_end(CUdeviceptr dptr, const struct gpc_track *t, CUresult rc);
/*
 * A pointer counted per pointer because its pool has no slot (GPC_MAP_PTR with aux = the pool) was
 * freed: its bytes stay charged as memory the pool keeps, until the pool is trimmed or destroyed
 * (never under-charged). Registered with gpc_charge_keeper at start-up (hooks/init.c).
 */
void gpc_pools_keep(const struct gpc_track *t);

/* The stream-ordered allocation calls: from the device's current pool or from a given one, each
 * also in its per-thread default stream form (_ptsz). */
enum gpc_pool_call { GPC_POOL_ASYNC, GPC_POOL_ASYNC_PTSZ, GPC_POOL_FROM, GPC_POOL_FROM_PTSZ };
/*
 * One stream-ordered allocation `call` (pool: the given pool for GPC_POOL_FROM*, else NULL),
 * charged to its pool's growth: the driver's result, or CUDA_ERROR_OUT_OF_MEMORY when denied (the
 * driver was then not called, or what it allocated was freed again). The hook starts the library.
 */
CUresult gpc_pools_alloc(enum gpc_pool_call call, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                         CUstream stream);
/* cuMemFreeAsync and its _ptsz form (`real`, NULL when the driver has none: CUDA_ERROR_NOT_FOUND). */
typedef CUresult (*gpc_free_async_fn)(CUdeviceptr, CUstream);
CUresult gpc_pools_free_async(CUdeviceptr dptr, CUstream stream, gpc_free_async_fn real);
/* After a query or creation that returned `*pool` (rc): learns the pool and its device. */
void gpc_pools_learn(CUresult rc, CUmemoryPool *pool, int device, bool counted);
/* cuMemPoolDestroy: calls the driver and releases what the pool gave back to the card. */
CUresult gpc_pools_destroy(CUmemoryPool pool);
/* After a successful cuMemPoolTrimTo(pool): brings the charges down to what pools still reserve. */
void gpc_pools_trimmed(CUmemoryPool pool);

#endif
