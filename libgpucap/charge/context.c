/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context.c: the accounting of the memory contexts take (hooks/ctx.c's head says what is
 * charged when): the reserve per context, by the setting or by the device's class; the count of
 * primary-context retains per device and what the first one charged; and what a teardown releases.
 * A context is charged through charge.c like an allocation (gpc_charge_begin_context, then
 * gpc_charge_end or gpc_charge_commit; gpc_free_end or gpc_charge_release), and every charge recorded
 * with a context (pointers, arrays, pool allocations, graph memory) is released with it.
 *
 * The reserve is an estimate, made before the context exists; a context then grows with the
 * modules it loads at launches, which no call we see reports (on an H200, driver 580, CUDA 13.0: a
 * bare context holds 518 MiB by NVML's per-process figure; PyTorch's 676 MiB after its first
 * matmul, 758 MiB after a training step). So the card's own figure is measured where NVML lists
 * this process (driver/nvml.c): after a context is made, before each locked admission of a
 * request, and every few batches of counted events (budget.c calls gpc_context_measure). What the card holds for the process beyond what it has charged is charged too
 * (gpc_budget_force: it is on the card already; past the limit nothing more is admitted until it
 * fits), as "measured" memory of its contexts on that device: it only grows while they live,
 * since the driver frees module memory only with its context, and it goes back at the next
 * teardown on the device, after which it is measured again. At most MEASURED_MAX_RESERVES times
 * the reserve is charged this way, a bound on what any other figure NVML might attribute to the
 * process could cost it (an import from another process is not one: on the H200, a process that
 * imported 1 GiB by cudaIpcOpenMemHandle held its context alone, 518 MiB, by NVML). Where NVML does not list the
 * process (a PID namespace: the driver reports host PIDs) the reserve alone is charged, said once.
 */
#include "charge/context.h"

#include "common/defs.h"
#include "common/options.h"
#include "common/log.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/locks.h"
#include "core/state.h"
#include "core/track.h"
#include "driver/nvml.h"
#include "driver/resolve.h"
#include "charge/charge.h"
#include "charge/device.h"
#include "charge/graph.h"
#include "charge/pool.h"

#include <errno.h>
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
    /* Measured on an H200 (141 GiB; README, "On a real GPU"): a bare CUDA 13 context 518-527 MiB,
     * CuPy 586, JAX 618, PyTorch 676-758 MiB once its kernels are loaded. */
    if (physical >= 64 * GiB - 4 * GiB) /* "80 GB" cards report a little less than 80 GiB */
        return 768 * MiB;
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
    gpc_track_drain_ctx(GPC_MAP_HEAP, (uint64_t)(uintptr_t)ctx, add_freed, freed);
    for (int d = 0; d < GPC_MAX_DEVICES; d++)
        if (freed[d])
            gpc_budget_release(gpc_device_budget_if_ready(d), freed[d]);
    gpc_pools_forget_ctx((uint64_t)(uintptr_t)ctx);
    gpc_graphs_forget_ctx(ctx);
}

/*
 * Says once per process, at its first context on a device with a budget, when the context reserve
 * (charged for every context, before any allocation) takes half the budget or more: on small
 * budgets the default reserve for the card class leaves little or nothing to allocate (a reserve
 * above the budget denies the first context, which frameworks report as a generic CUDA error, not
 * an out-of-memory one). Audit mode denies nothing: not said there.
 */
static void notice_reserve(int ordinal, uint64_t reserve)
{
    static atomic_bool said;
    int id = gpc_device_budget(ordinal);
    uint64_t limit = id == GPC_BUDGET_NONE ? GPC_UNLIMITED : gpc_budget_limit(id);
    if (limit == GPC_UNLIMITED || limit == 0 || gpc_opt_enum(&gpc_config, GPC_OPT_MODE) == GPC_MODE_AUDIT)
        return;
    if (reserve < limit - limit / 2 || atomic_exchange(&said, true))
        return;
    char r[GPC_SIZE_TEXT], l[GPC_SIZE_TEXT];
    unsigned long long pct = reserve >= limit ? 100 : (unsigned long long)(reserve / (limit / 100 ? limit / 100 : 1));
    gpc_log(GPC_LOG_WARN, "device %d: the context reserve, %s charged for each context before any allocation, "
            "takes %llu%% of the budget %s%s; set context_reserve (GPUCAP_CONTEXT_RESERVE) to what a context really "
            "takes on this card (README, Settings), or raise the budget", ordinal, gpc_format_size(reserve, r, sizeof r),
            pct, gpc_format_size(limit, l, sizeof l), reserve > limit ? ": the first context on it is denied" : "");
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
    if (dev < GPC_MAX_DEVICES)
        notice_reserve(dev, bytes);
    return gpc_charge_begin_context(c, dev, bytes, call);
}

/* ---- measured context memory (see the top) ---- */

#define MEASURED_MAX_RESERVES 4
/* Below this, a difference is the driver's rounding of what was charged: not worth a lock. */
#define MEASURE_SLACK (4 * MiB)

static _Atomic uint64_t measured[GPC_MAX_DEVICES]; /* charged beyond the reserves, per ordinal */
static pthread_mutex_t measure_lock = PTHREAD_MUTEX_INITIALIZER;
/* 1: NVML lists this process; -1: it will not (no NVML, or not listed after MEASURE_TRIES). */
static atomic_int measurable;
static int misses;
#define MEASURE_TRIES 8

/* Under measure_lock: reads the card's figure for device `ordinal` (budget `id`) and charges what
 * it shows beyond this process's charges. */
static void measure_locked(int ordinal, int id, uint64_t in_flight)
{
    const char *uuid = gpc_device_uuid(ordinal);
    uint64_t card = 0;
    int rc = uuid ? gpc_nvml_own_bytes(uuid, &card) : -ENODEV;
    if (rc != 0) {
        /* Not listed yet is normal just after a context is made; for good after a few tries. */
        if (atomic_load(&measurable) == 0 && (rc == -ENOSYS || ++misses >= MEASURE_TRIES)) {
            atomic_store(&measurable, -1);
            gpc_log(GPC_LOG_INFO, "NVML %s: contexts are charged their reserve only (%s), not what the card "
                    "holds for them", rc == -ENOSYS ? "is not usable" : "lists no figure for this process",
                    rc == -ENOSYS ? "libnvidia-ml.so.1" : "a PID namespace: the driver reports host PIDs");
        }
        return;
    }
    atomic_store(&measurable, 1);
    /* What is admitted and not yet on the card (the request being counted) is no context's. */
    uint64_t charged = gpc_budget_held(id);
    charged = charged > in_flight ? charged - in_flight : 0;
    if (card <= charged + MEASURE_SLACK)
        return;
    uint64_t extra = card - charged, had = atomic_load(&measured[ordinal]);
    uint64_t cap = MEASURED_MAX_RESERVES * gpc_context_reserve(ordinal);
    if (had >= cap)
        return;
    if (extra > cap - had)
        extra = cap - had;
    if (gpc_budget_force(id, extra) != 0)
        return;
    gpc_budget_note_contexts(id, (int64_t)extra);
    atomic_store(&measured[ordinal], had + extra);
    char a[32], b[32];
    gpc_log(GPC_LOG_DEBUG, "device %d: the card holds %s more for this process's contexts than charged; "
            "charged now (%s measured in all)", ordinal, gpc_format_size(extra, a, sizeof a),
            gpc_format_size(had + extra, b, sizeof b));
}

/* Measures every device of budget `id` (its ordinals); `now`: waits for a measurement in progress
 * (after a context was made), else leaves it to the thread doing it (the allocation path never
 * waits). One NVML query per locked admission, which already takes a file lock. */
static void measure(int id, bool now, uint64_t in_flight)
{
    if (id < 0 || atomic_load_explicit(&measurable, memory_order_relaxed) < 0 || !gpc_counting())
        return;
    if (now)
        gpc_lock(&measure_lock, GPC_LOCK_MEASURE);
    else if (gpc_trylock(&measure_lock, GPC_LOCK_MEASURE) != 0)
        return;
    for (int o = 0; o < GPC_MAX_DEVICES; o++)
        if (gpc_device_budget_if_ready(o) == id)
            measure_locked(o, id, in_flight);
    gpc_unlock(&measure_lock, GPC_LOCK_MEASURE);
}

void gpc_context_measure(int id, uint64_t in_flight)
{
    measure(id, false, in_flight);
}

void gpc_context_measure_device(int ordinal)
{
    if (ordinal >= 0 && ordinal < GPC_MAX_DEVICES)
        measure(gpc_device_budget_if_ready(ordinal), true, 0);
}

/* A teardown on device `ordinal` freed its modules: what was measured goes back, and the
 * contexts still alive there are measured again at once. */
static void measured_release(int ordinal)
{
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES)
        return;
    gpc_lock(&measure_lock, GPC_LOCK_MEASURE);
    uint64_t had = atomic_exchange(&measured[ordinal], 0);
    if (had)
        gpc_charge_release(ordinal, had, true);
    gpc_unlock(&measure_lock, GPC_LOCK_MEASURE);
    if (had)
        gpc_context_measure_device(ordinal);
}

void gpc_context_torn_down(int ordinal)
{
    measured_release(ordinal);
}

/* Primary contexts: our count of retains per ordinal, and what the first one charged. */
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static int primary_refs[GPC_MAX_DEVICES];
static uint64_t primary_charged[GPC_MAX_DEVICES];
static CUcontext primary_handle[GPC_MAX_DEVICES]; /* the same handle across retain/release cycles */

/* The child holds none of its parent's context memory (its own contexts are measured anew). */
static void measured_after_fork(void)
{
    for (int o = 0; o < GPC_MAX_DEVICES; o++)
        atomic_store(&measured[o], 0);
}

/* Context creations and teardowns, one at a time (hooks/ctx.c's head says why); taken before the
 * primary-context lock. */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;

void gpc_context_life(bool hold)
{
    if (hold)
        gpc_lock(&life_lock, GPC_LOCK_CTX_LIFE);
    else
        gpc_unlock(&life_lock, GPC_LOCK_CTX_LIFE);
}

void gpc_context_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    if (rank == GPC_LOCK_CTX_LIFE)
        gpc_fork_mutex(&life_lock, step);
    if (rank == GPC_LOCK_PRIMARY)
        gpc_fork_mutex(&primary_lock, step);
    if (rank != GPC_LOCK_MEASURE)
        return;
    gpc_fork_mutex(&measure_lock, step);
    if (step == GPC_FORK_CHILD)
        measured_after_fork();
}

CUresult gpc_context_primary_begin(struct gpc_charge *c, CUdevice dev)
{
    gpc_lock(&primary_lock, GPC_LOCK_PRIMARY);
    c->budget = GPC_BUDGET_NONE;
    CUresult rc = CUDA_SUCCESS;
    if (primary_refs[dev] == 0)
        rc = gpc_context_begin(c, dev, "cuDevicePrimaryCtxRetain");
    if (rc != CUDA_SUCCESS)
        gpc_unlock(&primary_lock, GPC_LOCK_PRIMARY);
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
    gpc_unlock(&primary_lock, GPC_LOCK_PRIMARY);
    return first;
}

bool gpc_context_primary_drop(CUdevice dev, bool all)
{
    if (dev < 0 || dev >= GPC_MAX_DEVICES || atomic_load(&gpc_passthrough))
        return false;
    gpc_lock(&primary_lock, GPC_LOCK_PRIMARY);
    bool reset = all;
    if (primary_refs[dev] > 0) {
        primary_refs[dev] = all ? 0 : primary_refs[dev] - 1;
        if (primary_refs[dev] == 0) {
            gpc_charge_release(dev, primary_charged[dev], true);
            primary_charged[dev] = 0;
            reset = true;
        }
    }
    if (reset)
        gpc_context_forget(primary_handle[dev]);
    gpc_unlock(&primary_lock, GPC_LOCK_PRIMARY);
    return reset;
}

/* ---- heaps a context sizes (cuCtxSetLimit) ---- */

/* The driver's default of a heap cuCtxSetLimit sizes, or 0 for a limit that takes no charged memory. */
static uint64_t heap_default(CUlimit limit)
{
    return limit == CU_LIMIT_MALLOC_HEAP_SIZE ? 8u << 20 : limit == CU_LIMIT_PRINTF_FIFO_SIZE ? 1u << 20 : 0;
}

CUresult gpc_context_heap_begin(struct gpc_context_heap *h, CUlimit limit, size_t value)
{
    uint64_t given = heap_default(limit);
    CUcontext ctx = NULL;
    h->counted = false;
    if (given && value > given && gpc_closed_now())
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!given || !gpc_counting() || !gpc_real.cuCtxGetCurrent || gpc_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS ||
        !ctx)
        return CUDA_SUCCESS;
    h->counted = true;
    h->ctx = (uint64_t)(uintptr_t)ctx;
    h->key = h->ctx + (uint64_t)limit; /* the two limits are 1 and 2: a key per heap of the context */
    h->want = value > given ? value - given : 0;
    return CUDA_SUCCESS;
}

CUresult gpc_context_heap_charge(struct gpc_context_heap *h)
{
    h->known = gpc_free_begin(GPC_MAP_HEAP, h->key, &h->old);
    uint64_t had = h->known ? h->old.bytes : 0;
    h->c = (struct gpc_charge){.budget = GPC_BUDGET_NONE, .device = h->known ? h->old.device : -1};
    return h->want > had ? gpc_charge_begin(&h->c, -1, h->want - had, "cuCtxSetLimit") : CUDA_SUCCESS;
}

void gpc_context_heap_end(struct gpc_context_heap *h, CUresult rc)
{
    bool charged = gpc_charge_commit(&h->c, rc);
    uint64_t had = h->known ? h->old.bytes : 0;
    if (rc != CUDA_SUCCESS) {
        if (h->known)
            gpc_track_add(GPC_MAP_HEAP, h->key, &h->old);
        return;
    }
    if (h->want < had)
        gpc_charge_release(h->old.device, had - h->want, false);
    struct gpc_track t = {.bytes = h->want, .device = h->known ? h->old.device : h->c.device, .refs = 1, .ctx = h->ctx};
    if (h->want && (h->known || charged) && gpc_track_add(GPC_MAP_HEAP, h->key, &t) != 0)
        gpc_log(GPC_LOG_ERROR, "out of memory for bookkeeping: the heap of %llu bytes stays charged for good",
                (unsigned long long)h->want);
}
