/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c: the accounting of stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync,
 * cuMemFreeAsync) and the pools behind it; the hooks are in hooks/pool.c.
 *
 * What a pool takes from the card is its *reserved* memory (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
 * not the sum of live pointers: cuMemFreeAsync hands memory back to the pool, which keeps it until
 * a synchronisation releases what is above its release threshold (often set to "keep all"), or
 * until cuMemPoolTrimTo. So each pool we know is charged what it has reserved:
 *  - an allocation reserves its size rounded up to the 2 MiB pool granule before the call (so a
 *    denial never reaches the driver), nothing when the pool holds that much unused already, then
 *    settles to the pool's actual growth: the surplus goes
 *    back; a growth beyond the reservation is reserved too, and if that does not fit the pointer is
 *    freed again, the pool trimmed, and the call answers CUDA_ERROR_OUT_OF_MEMORY;
 *  - before an allocation that would not fit, every pool of that device is trimmed
 *    (cuMemPoolTrimTo(pool, 0): memory held for reuse, not memory in use) and what they gave back
 *    is released, so the allocation is tried once more against the budget, like the driver would
 *    after reclaiming;
 *  - a pool shrinking on its own (release threshold at synchronisation) is noticed lazily: after
 *    cuMemFreeAsync, cuMemPoolTrimTo, cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize,
 *    the charge of each pool is brought down to what it still reserves;
 *  - a destroyed pool keeps what its live allocations hold until they are freed.
 * Pools are learnt from cuMemPoolCreate (their location), the default-pool and current-pool
 * queries, or their first allocation (current device). Host-located pools are not counted. An
 * allocation and the settlement of its pool run under that pool's lock (held across the driver
 * call: the growth we observe must be this call's). Pool allocations are recorded by address
 * (GPC_MAP_POOLPTR, size only) to find their pool at free time. Limits: a pool shared with another
 * process by IPC is counted in the exporting process only; more than MAX_POOLS live pools fall
 * back to per-pointer counting that keeps freed memory charged until its pool is trimmed or
 * destroyed.
 */
#include "charge/pool.h"

#include "common/ledger.h"
#include "common/log.h"
#include "core/budget.h"
#include "core/locks.h"
#include "core/state.h"
#include "core/track.h"
#include "driver/resolve.h"
#include "charge/charge.h"
#include "charge/device.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_POOLS 256
#define POOL_GRANULE ((uint64_t)2 << 20)

struct pool {
    uintptr_t handle;     /* 0: free slot */
    int device;
    bool counted;         /* device memory */
    bool dead;            /* destroyed: `charged` is what its live allocations still hold */
    uint64_t charged;     /* bytes of the budget held for this pool */
    uint64_t nallocs;     /* live allocations we recorded */
    pthread_mutex_t lock; /* allocation + settlement; charged, nallocs, dead */
};

static struct pool pools[MAX_POOLS] = {[0 ... MAX_POOLS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
static atomic_int npools; /* slots ever used (a high-water mark: scans stop there) */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t round_granule(uint64_t n)
{
    return n > UINT64_MAX - POOL_GRANULE ? UINT64_MAX : (n + POOL_GRANULE - 1) / POOL_GRANULE * POOL_GRANULE;
}

/* The live slot of `handle`, registering it with `device` when new; NULL when the table is full. */
static struct pool *pool_slot(CUmemoryPool handle, int device, bool counted)
{
    uintptr_t h = (uintptr_t)handle;
    int n = atomic_load_explicit(&npools, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&pools[i].handle, __ATOMIC_ACQUIRE) == h && !pools[i].dead)
            return &pools[i];
    gpc_lock(&table_lock, GPC_LOCK_POOL_TABLE);
    struct pool *found = NULL, *free_slot = NULL;
    n = atomic_load(&npools);
    for (int i = 0; i < n && !found; i++) {
        if (pools[i].handle == h && !pools[i].dead)
            found = &pools[i];
        else if (!pools[i].handle && !free_slot)
            free_slot = &pools[i];
    }
    if (!found && !free_slot && n < MAX_POOLS) {
        free_slot = &pools[n];
        atomic_store_explicit(&npools, n + 1, memory_order_release);
    }
    if (!found && free_slot) {
        free_slot->device = device;
        free_slot->counted = counted;
        free_slot->dead = false;
        free_slot->charged = 0;
        free_slot->nallocs = 0;
        __atomic_store_n(&free_slot->handle, h, __ATOMIC_RELEASE);
        found = free_slot;
    }
    gpc_unlock(&table_lock, GPC_LOCK_POOL_TABLE);
    return found;
}

static bool reserved_of(struct pool *p, uint64_t *out)
{
    cuuint64_t v = 0;
    if (!gpc_real.cuMemPoolGetAttribute ||
        gpc_real.cuMemPoolGetAttribute((CUmemoryPool)p->handle, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
        return false;
    *out = v;
    return true;
}

/* Brings a live pool's charge down to what it reserves now. Under p->lock. True if it released. */
static bool reconcile_locked(struct pool *p)
{
    uint64_t r;
    if (p->dead || !p->counted || !reserved_of(p, &r) || r >= p->charged)
        return false;
    gpc_budget_release(gpc_device_budget_if_ready(p->device), p->charged - r);
    p->charged = r;
    return true;
}

void gpc_pools_reconcile(void)
{
    int n = atomic_load_explicit(&npools, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        struct pool *p = &pools[i];
        if (!__atomic_load_n(&p->handle, __ATOMIC_ACQUIRE) || p->dead || !p->charged)
            continue;
        /* A pool busy allocating settles itself. */
        if (gpc_trylock(&p->lock, GPC_LOCK_POOL) != 0)
            continue;
        reconcile_locked(p);
        gpc_unlock(&p->lock, GPC_LOCK_POOL);
    }
}

bool gpc_pools_trim(int device)
{
    bool released = false;
    int n = atomic_load_explicit(&npools, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        struct pool *p = &pools[i];
        if (!__atomic_load_n(&p->handle, __ATOMIC_ACQUIRE) || p->dead || p->device != device || !p->charged)
            continue;
        /* trylock: the caller may hold this very pool's lock (a denial inside an allocation). */
        if (gpc_trylock(&p->lock, GPC_LOCK_POOL) != 0)
            continue;
        if (gpc_real.cuMemPoolTrimTo && gpc_real.cuMemPoolTrimTo((CUmemoryPool)p->handle, 0) == CUDA_SUCCESS)
            released |= reconcile_locked(p);
        gpc_unlock(&p->lock, GPC_LOCK_POOL);
    }
    return released;
}

/* True when `bytes` more would not fit the device's budget now (a hint: admission decides). */
static bool would_deny(int device, uint64_t bytes)
{
    int id = gpc_device_budget(device);
    struct gpc_slot *s = gpc_budget_slot(id);
    return s && bytes && !gpc_budget_fits(gpc_budget_in_use(id), bytes, gpc_budget_limit(id));
}

/*
 * What an allocation of `bytes` may add to the pool's footprint: its size rounded up to the granule,
 * less what the pool holds unused (reserved - used), which it serves first. Under p->lock.
 */
static uint64_t need_of(struct pool *p, uint64_t bytes)
{
    uint64_t ask = round_granule(bytes), r;
    cuuint64_t used = 0;
    if (reserved_of(p, &r) && gpc_real.cuMemPoolGetAttribute((CUmemoryPool)p->handle, CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                                                             &used) == CUDA_SUCCESS && r > used) {
        /* Free space may be fragmented: only a full fit is taken as free. */
        if (r - used >= bytes)
            ask = 0;
    }
    return ask;
}

/* The stream-ordered allocation calls: from the device's current pool or from a given one, each
 * also in its per-thread default stream form (_ptsz). */
static const char *const async_names[] = {
    [GPC_POOL_ASYNC] = "cuMemAllocAsync",
    [GPC_POOL_ASYNC_PTSZ] = "cuMemAllocAsync_ptsz",
    [GPC_POOL_FROM] = "cuMemAllocFromPoolAsync",
    [GPC_POOL_FROM_PTSZ] = "cuMemAllocFromPoolAsync_ptsz",
};
struct async_req {
    enum gpc_pool_call call;
    CUdeviceptr *dptr;
    size_t bytes;
    CUmemoryPool pool; /* the given pool (GPC_POOL_FROM*), else the current one once known */
    CUstream stream;
};

static bool from_pool(const struct async_req *r) { return r->call == GPC_POOL_FROM || r->call == GPC_POOL_FROM_PTSZ; }

/* The driver's entry point of the call, or NULL when this driver has none. */
static void *async_real(enum gpc_pool_call call)
{
    void *const reals[] = {
        [GPC_POOL_ASYNC] = (void *)gpc_real.cuMemAllocAsync,
        [GPC_POOL_ASYNC_PTSZ] = (void *)gpc_real.cuMemAllocAsync_ptsz,
        [GPC_POOL_FROM] = (void *)gpc_real.cuMemAllocFromPoolAsync,
        [GPC_POOL_FROM_PTSZ] = (void *)gpc_real.cuMemAllocFromPoolAsync_ptsz,
    };
    return reals[call];
}

static CUresult call_alloc(const struct async_req *r)
{
    switch (r->call) {
    case GPC_POOL_ASYNC: return GPC_CALL_REAL(cuMemAllocAsync, (r->dptr, r->bytes, r->stream));
    case GPC_POOL_ASYNC_PTSZ: return GPC_CALL_REAL(cuMemAllocAsync_ptsz, (r->dptr, r->bytes, r->stream));
    case GPC_POOL_FROM: return GPC_CALL_REAL(cuMemAllocFromPoolAsync, (r->dptr, r->bytes, r->pool, r->stream));
    case GPC_POOL_FROM_PTSZ: return GPC_CALL_REAL(cuMemAllocFromPoolAsync_ptsz, (r->dptr, r->bytes, r->pool, r->stream));
    }
    return CUDA_ERROR_NOT_FOUND;
}

/* Frees what the call allocated, on its stream, with the free of the same stream form. */
static void call_free(const struct async_req *r)
{
    if (r->call == GPC_POOL_ASYNC_PTSZ || r->call == GPC_POOL_FROM_PTSZ)
        GPC_CALL_REAL(cuMemFreeAsync_ptsz, (*r->dptr, r->stream));
    else
        GPC_CALL_REAL(cuMemFreeAsync, (*r->dptr, r->stream));
}

/* ---- pools without a slot (more than MAX_POOLS live at once) ---- */

/*
 * Their allocations are counted per pointer, rounded up to the granule; a freed one stays charged
 * as memory its pool keeps (GPC_MAP_POOLKEPT, by pool handle), which the pool's next allocations
 * use first, and which goes back when the pool is trimmed (down to what it still reserves) or
 * destroyed. Always on the side of over-charging. Rare: one lock for all of them.
 */
static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;

void gpc_pools_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    /* Every pool's lock: made fresh in the child only (FRESH). */
    for (int i = 0; rank == GPC_LOCK_POOL && step == GPC_FORK_CHILD && i < MAX_POOLS; i++)
        gpc_fork_mutex(&pools[i].lock, step);
    if (rank == GPC_LOCK_POOL_TABLE)
        gpc_fork_mutex(&table_lock, step);
    if (rank == GPC_LOCK_POOL_KEPT)
        gpc_fork_mutex(&overflow_lock, step);
}

static struct gpc_track overflow_take(uint64_t pool)
{
    struct gpc_track k;
    if (!gpc_track_take(GPC_MAP_POOLKEPT, pool, &k))
        k = (struct gpc_track){.device = -1};
    return k;
}

static void overflow_put(uint64_t pool, const struct gpc_track *k)
{
    if (k->bytes || k->aux)
        gpc_track_add(GPC_MAP_POOLKEPT, pool, k);
}

void gpc_pools_keep(const struct gpc_track *t)
{
    gpc_lock(&overflow_lock, GPC_LOCK_POOL_KEPT);
    struct gpc_track k = overflow_take(t->aux);
    k.device = t->device;
    k.aux = k.aux > t->bytes ? k.aux - t->bytes : 0;
    if (k.refs < 0)
        gpc_budget_release(gpc_device_budget_if_ready(t->device), t->bytes); /* its pool is gone */
    else
        k.bytes += t->bytes;
    overflow_put(t->aux, &k);
    gpc_unlock(&overflow_lock, GPC_LOCK_POOL_KEPT);
}

/* After cuMemPoolTrimTo (destroyed false) or cuMemPoolDestroy of a pool without a slot. */
static void overflow_settle(CUmemoryPool pool, bool destroyed)
{
    gpc_lock(&overflow_lock, GPC_LOCK_POOL_KEPT);
    struct gpc_track k = overflow_take((uint64_t)(uintptr_t)pool);
    cuuint64_t reserved = 0;
    uint64_t target = k.bytes;
    if (destroyed)
        target = 0;
    else if (gpc_real.cuMemPoolGetAttribute &&
             gpc_real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS)
        target = reserved > k.aux ? reserved - k.aux : 0;
    if (k.bytes > target) {
        gpc_budget_release(gpc_device_budget_if_ready(k.device), k.bytes - target);
        k.bytes = target;
    }
    if (destroyed)
        k.refs = -1;
    overflow_put((uint64_t)(uintptr_t)pool, &k);
    gpc_unlock(&overflow_lock, GPC_LOCK_POOL_KEPT);
}

/* Per-pointer counting, for a pool we cannot keep a slot for. */
static CUresult alloc_per_pointer(const struct async_req *r)
{
    const char *call = async_names[r->call];
    CUdeviceptr *dptr = r->dptr;
    size_t bytes = r->bytes;
    CUmemoryPool pool = r->pool;
    uint64_t charge = round_granule(bytes), kept = 0;
    if (pool) {
        gpc_lock(&overflow_lock, GPC_LOCK_POOL_KEPT);
        struct gpc_track k = overflow_take((uint64_t)(uintptr_t)pool);
        kept = k.bytes < charge ? k.bytes : charge;
        k.bytes -= kept;
        overflow_put((uint64_t)(uintptr_t)pool, &k);
        gpc_unlock(&overflow_lock, GPC_LOCK_POOL_KEPT);
    }
    struct gpc_charge c;
    CUresult rc = gpc_charge_begin(&c, -1, charge - kept, call);
    if (rc == CUDA_SUCCESS)
        rc = call_alloc(r);
    if (pool && (kept || rc == CUDA_SUCCESS)) {
        gpc_lock(&overflow_lock, GPC_LOCK_POOL_KEPT);
        struct gpc_track k = overflow_take((uint64_t)(uintptr_t)pool);
        k.device = c.device;
        if (rc != CUDA_SUCCESS)
            k.bytes += kept; /* still kept by the pool */
        else if (c.budget != GPC_BUDGET_NONE)
            k.aux += charge;
        overflow_put((uint64_t)(uintptr_t)pool, &k);
        gpc_unlock(&overflow_lock, GPC_LOCK_POOL_KEPT);
    }
    if (rc != CUDA_SUCCESS) {
        gpc_charge_refused(&c);
        return rc;
    }
    if (c.budget == GPC_BUDGET_NONE)
        return rc;
    gpc_charge_admitted(&c);
    CUcontext ctx = NULL;
    if (gpc_real.cuCtxGetCurrent)
        gpc_real.cuCtxGetCurrent(&ctx);
    struct gpc_track t = {.bytes = charge, .device = c.device, .refs = 1, .aux = (uint64_t)(uintptr_t)pool,
                          .ctx = (uint64_t)(uintptr_t)ctx};
    if (gpc_track_add(GPC_MAP_PTR, *dptr, &t) != 0)
        gpc_log(GPC_LOG_ERROR, "out of memory for bookkeeping: %llu bytes on device %d stay charged for good",
                (unsigned long long)charge, c.device);
    return rc;
}

/*
 * A counted pool's allocation, under p->lock: charge what the pool may grow by (`ask`), call the
 * driver, then settle the charge to what the pool really grew by. A growth beyond what fits undoes
 * the allocation and hands the growth back to the driver.
 */
static CUresult alloc_locked(struct pool *p, int dev, uint64_t ask, const struct async_req *r)
{
    const char *call = async_names[r->call];
    struct gpc_charge c;
    CUresult rc = gpc_charge_begin(&c, dev, ask, call);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = call_alloc(r);
    if (c.budget == GPC_BUDGET_NONE)
        return rc;
    if (rc != CUDA_SUCCESS) {
        gpc_charge_refused(&c);
        reconcile_locked(p);
        return rc;
    }
    uint64_t reserved;
    if (!reserved_of(p, &reserved))
        reserved = p->charged + r->bytes; /* cannot tell: count the allocation itself */
    uint64_t growth = reserved > p->charged ? reserved - p->charged : 0;
    if (growth <= ask) {
        gpc_budget_release_charge(c.budget, ask - growth);
    } else {
        struct gpc_charge extra;
        if (gpc_charge_begin(&extra, dev, growth - ask, call) != CUDA_SUCCESS) {
            p->charged += ask;
            call_free(r);
            if (gpc_real.cuMemPoolTrimTo)
                gpc_real.cuMemPoolTrimTo(r->pool, 0);
            reconcile_locked(p);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        gpc_budget_release_refused(extra.budget, 0, 0); /* one request: the pool's growth is not another */
    }
    if (reserved < p->charged)
        gpc_budget_release_charge(c.budget, p->charged - reserved);
    gpc_charge_admitted(&c);
    p->charged = reserved;
    p->nallocs++;
    struct gpc_track t = {.bytes = r->bytes, .device = dev, .refs = 1, .aux = (uint64_t)(p - pools)};
    CUcontext ctx = NULL;
    if (gpc_real.cuCtxGetCurrent && gpc_real.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS)
        t.ctx = (uint64_t)(uintptr_t)ctx;
    if (gpc_track_add(GPC_MAP_POOLPTR, *r->dptr, &t) != 0)
        p->nallocs--; /* the pool's charge still covers it; only its free goes unnoticed */
    return CUDA_SUCCESS;
}

static CUresult alloc_async(struct async_req *r)
{
    if (!async_real(r->call))
        return CUDA_ERROR_NOT_FOUND;
    if (!gpc_counting() || !r->dptr || r->bytes == 0)
        return gpc_closed_now() && r->bytes ? CUDA_ERROR_OUT_OF_MEMORY : call_alloc(r);
    CUdevice dev = -1;
    struct pool *p = NULL;
    if (from_pool(r)) {
        if (!r->pool)
            return call_alloc(r);
        if (gpc_current_device(&dev) != CUDA_SUCCESS)
            dev = -1;
        p = pool_slot(r->pool, dev, true);
        if (p)
            dev = p->device;
    } else {
        if (gpc_current_device(&dev) != CUDA_SUCCESS)
            return call_alloc(r); /* no context: the driver's own error */
        CUmemoryPool cur = NULL;
        if (GPC_CALL_REAL(cuDeviceGetMemPool, (&cur, dev)) == CUDA_SUCCESS && cur)
            p = pool_slot(r->pool = cur, dev, true);
    }
    if (!p || dev < 0)
        return alloc_per_pointer(r);
    if (!p->counted)
        return call_alloc(r);

    gpc_lock(&p->lock, GPC_LOCK_POOL);
    uint64_t ask = need_of(p, r->bytes);
    if (would_deny(dev, ask)) {
        /* Trimming takes every pool's lock, ours included. */
        gpc_unlock(&p->lock, GPC_LOCK_POOL);
        gpc_pools_trim(dev);
        gpc_lock(&p->lock, GPC_LOCK_POOL);
        ask = need_of(p, r->bytes);
    }
    CUresult rc = alloc_locked(p, dev, ask, r);
    gpc_unlock(&p->lock, GPC_LOCK_POOL);
    return rc;
}

/* After the driver freed pool allocation `t` (from any free call): settles its pool. */
static void pool_freed(const struct gpc_track *t)
{
    struct pool *p = &pools[t->aux];
    gpc_lock(&p->lock, GPC_LOCK_POOL);
    if (p->nallocs)
        p->nallocs--;
    if (p->dead) {
        /* A destroyed pool gives its memory back as its allocations go. */
        uint64_t back = p->nallocs == 0 ? p->charged : t->bytes < p->charged ? t->bytes : p->charged;
        gpc_budget_release(gpc_device_budget_if_ready(p->device), back);
        p->charged -= back;
        if (p->nallocs == 0)
            __atomic_store_n(&p->handle, 0, __ATOMIC_RELEASE);
    } else {
        reconcile_locked(p);
    }
    gpc_unlock(&p->lock, GPC_LOCK_POOL);
}

bool gpc_pools_free_begin(CUdeviceptr dptr, struct gpc_track *t)
{
    return gpc_track_take(GPC_MAP_POOLPTR, dptr, t);
}

void gpc_pools_free_end(CUdeviceptr dptr, const struct gpc_track *t, CUresult rc)
{
    if (rc != CUDA_SUCCESS)
        gpc_track_add(GPC_MAP_POOLPTR, dptr, t);
    else
        pool_freed(t);
}

CUresult gpc_pools_free_async(CUdeviceptr dptr, CUstream stream, gpc_free_async_fn real)
{
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    if (atomic_load_explicit(&gpc_passthrough, memory_order_relaxed))
        return real(dptr, stream);
    /* The record leaves the map before the driver can hand the address out again. */
    struct gpc_track t;
    bool pooled = gpc_pools_free_begin(dptr, &t);
    bool counted = !pooled && gpc_free_begin(GPC_MAP_PTR, dptr, &t);
    CUresult rc = real(dptr, stream);
    if (counted)
        gpc_free_end(true, GPC_MAP_PTR, dptr, &t, rc);
    else if (pooled)
        gpc_pools_free_end(dptr, &t, rc);
    return rc;
}

/* Counts, per pool slot, the allocations of a torn-down context (under a map lock: arithmetic only). */
static void count_pool_alloc(const struct gpc_track *t, void *arg)
{
    uint32_t *gone = arg;
    if (t->aux < MAX_POOLS)
        gone[t->aux]++;
}

void gpc_pools_forget_ctx(uint64_t ctx)
{
    uint32_t gone[MAX_POOLS] = {0};
    gpc_track_drain_ctx(GPC_MAP_POOLPTR, ctx, count_pool_alloc, gone);
    int n = atomic_load_explicit(&npools, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        struct pool *p = &pools[i];
        if (!__atomic_load_n(&p->handle, __ATOMIC_ACQUIRE))
            continue;
        gpc_lock(&p->lock, GPC_LOCK_POOL);
        p->nallocs = p->nallocs > gone[i] ? p->nallocs - gone[i] : 0;
        if (p->dead && p->nallocs == 0) {
            gpc_budget_release(gpc_device_budget_if_ready(p->device), p->charged);
            p->charged = 0;
            __atomic_store_n(&p->handle, 0, __ATOMIC_RELEASE);
        } else {
            /* The teardown synchronised and trimmed the pools: charge what they still reserve. */
            reconcile_locked(p);
        }
        gpc_unlock(&p->lock, GPC_LOCK_POOL);
    }
}

CUresult gpc_pools_alloc(enum gpc_pool_call call, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                         CUstream stream)
{
    return alloc_async(&(struct async_req){call, dptr, bytes, pool, stream});
}

/* ---- learning pools and their devices ---- */

void gpc_pools_learn(CUresult rc, CUmemoryPool *pool, int device, bool counted)
{
    if (rc != CUDA_SUCCESS || !pool || !*pool || atomic_load_explicit(&gpc_passthrough, memory_order_relaxed))
        return;
    if (pool_slot(*pool, device, counted))
        return;
    /* No slot: a destroyed pool's record under this handle now stands for a live pool again. */
    gpc_lock(&overflow_lock, GPC_LOCK_POOL_KEPT);
    struct gpc_track k = overflow_take((uint64_t)(uintptr_t)*pool);
    if (k.refs < 0)
        k.refs = 0;
    overflow_put((uint64_t)(uintptr_t)*pool, &k);
    gpc_unlock(&overflow_lock, GPC_LOCK_POOL_KEPT);
}

CUresult gpc_pools_destroy(CUmemoryPool pool)
{
    struct pool *p = NULL;
    if (!atomic_load_explicit(&gpc_passthrough, memory_order_relaxed) && pool) {
        int n = atomic_load_explicit(&npools, memory_order_acquire);
        for (int i = 0; i < n && !p; i++)
            if (__atomic_load_n(&pools[i].handle, __ATOMIC_ACQUIRE) == (uintptr_t)pool && !pools[i].dead)
                p = &pools[i];
    }
    if (!p) {
        CUresult rc = GPC_CALL_REAL(cuMemPoolDestroy, (pool));
        if (rc == CUDA_SUCCESS && pool && !atomic_load_explicit(&gpc_passthrough, memory_order_relaxed))
            overflow_settle(pool, true);
        return rc;
    }
    gpc_lock(&p->lock, GPC_LOCK_POOL);
    cuuint64_t used = 0;
    bool have_used = gpc_real.cuMemPoolGetAttribute &&
                     gpc_real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS;
    CUresult rc = GPC_CALL_REAL(cuMemPoolDestroy, (pool));
    if (rc == CUDA_SUCCESS) {
        /* The driver keeps exactly what is still in use; the rest went back to the card. */
        uint64_t keep = p->nallocs == 0 ? 0 : have_used && used < p->charged ? used : p->charged;
        gpc_budget_release(gpc_device_budget_if_ready(p->device), p->charged - keep);
        p->charged = keep;
        p->dead = true;
        if (p->nallocs == 0)
            __atomic_store_n(&p->handle, 0, __ATOMIC_RELEASE);
    }
    gpc_unlock(&p->lock, GPC_LOCK_POOL);
    return rc;
}

void gpc_pools_trimmed(CUmemoryPool pool)
{
    if (!pool || atomic_load_explicit(&gpc_passthrough, memory_order_relaxed))
        return;
    gpc_pools_reconcile();
    overflow_settle(pool, false);
}
