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
 *
 * The NVIDIA driver's own per-container limit (drvlimit.h) is in force on a card when the total
 * the driver reports in a context on it (cuMemGetInfo_v2) is below the card's size
 * (cuDeviceTotalMem_v2), or is exactly the limit the platform declared for the toolkit
 * (NVIDIA_GPU_MEMORY_LIMIT with _REQUEST). Then a percentage resolves against the driver's figure,
 * and the budget is min(gpucap's own, the driver's): gpucap denies first, with its figures and its
 * one line, and nothing is charged twice (gpucap's accounting is unchanged; the driver counts the
 * same bytes in its own cgroup). A declared limit not seen in force still caps the budget (the safe
 * direction) but is not reported as the driver's. Set-up without a context on the card (the
 * runtime reads cuDeviceTotalMem first) looks again at the first call with one (state 2 below).
 */
#include "charge/device.h"

#include "common/defs.h"
#include "common/drvlimit.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/locks.h"
#include "core/ledger_map.h"
#include "core/state.h"
#include "driver/nvml.h"
#include "driver/resolve.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct device {
    atomic_int ready; /* 0 not set up; 1 set up; 2 set up, the driver's own limit still to be looked
                       * for (no context was current on the device at set-up) */
    atomic_int budget; /* ledger index or GPC_BUDGET_NONE / GPC_BUDGET_DENY */
};

static struct device devices[GPC_MAX_DEVICES];
/* Bytes, as the driver said at set-up (0: it did not say). Apart from `devices`, whose 8-byte
 * entries the allocation path indexes. */
static _Atomic uint64_t physical_of[GPC_MAX_DEVICES];
/* What set-up learnt for the late look at the driver's limit (under setup_lock); apart too. */
struct device_setup {
    uint64_t physical, declared;
    uint64_t reported; /* the total the driver reported in a context on the device (0: not asked yet) */
    uint8_t uuid[16];
    char uuid_text[GPC_UUID_TEXT];
    bool have_uuid;
};
static struct device_setup setups[GPC_MAX_DEVICES];
/* The burstable figures last applied per device (under setup_lock). */
static struct gpc_qos qos_of[GPC_MAX_DEVICES];
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
 * (hooks/ctx.c), before the new context's handle reaches the caller, so a slot never names the
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

void gpc_device_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    if (rank == GPC_LOCK_SETUP)
        gpc_fork_mutex(&setup_lock, step);
    if (rank != GPC_LOCK_CTX_CACHE)
        return;
    gpc_fork_mutex(&ctx_lock, step);
    /* The child knows no context: the parent's are not the child's. */
    if (step == GPC_FORK_CHILD) {
        atomic_fetch_add(&ctx_epoch, 1);
        for (int i = 0; i < CTX_SLOTS; i++)
            atomic_store_explicit(&ctx_slots[i], 0, memory_order_relaxed);
    }
}

/* The total the driver reports in the current context, when the caller knows that context is on
 * the device (`current`; the query needs a context, and asking which one is current would cost the
 * allocation path a driver call); 0 when not, or when the driver says nothing. */
static uint64_t driver_reported(bool current)
{
    size_t free_b = 0, total = 0;
    if (!current || !gpc_real.cuMemGetInfo_v2 || gpc_real.cuMemGetInfo_v2(&free_b, &total) != CUDA_SUCCESS)
        return 0;
    return total;
}

/* What a percentage of device d is a share of, and what no budget on it may pass (0: nothing), by
 * the driver's own limit: its figure when in force (*in_force), else the card and a declared limit. */
static uint64_t base_of(const struct device_setup *d, uint64_t reported, bool *in_force, uint64_t *cap)
{
    *in_force = gpc_drv_in_force(d->physical, reported, d->declared);
    *cap = *in_force ? reported : d->declared;
    return *in_force ? reported : d->physical;
}

/* A budget resolved against device d, never above its cap (see base_of). */
static uint64_t capped(uint64_t limit, uint64_t cap)
{
    return cap && (limit == GPC_UNLIMITED || limit > cap) ? cap : limit;
}

/* The last request refused as above the limit, per device (said once until it changes). */
static uint64_t refused_said[GPC_MAX_DEVICES][2];

/* A request above the limit: one error line (once per figures), the safe state best effort. */
static void say_refused(int ordinal, const struct gpc_value *rf, uint64_t request, uint64_t limit)
{
    if (refused_said[ordinal][0] == request + 1 && refused_said[ordinal][1] == limit)
        return;
    refused_said[ordinal][0] = request + 1;
    refused_said[ordinal][1] = limit;
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
    gpc_log(GPC_LOG_ERROR, "device %d: memory_request = %s (%s) is above the limit %s (the limit, the platform's "
            "maximum or the driver's): refused; the request is 0 (best effort) until it is fixed", ordinal,
            rf ? rf->text : "?", gpc_format_size(request, a, sizeof a), gpc_format_size(limit, b, sizeof b));
}

/* gpucap's budget for the device by settings `s`: its own limit (a percentage of the driver's figure
 * when the driver's limit is in force, else of the card), never above the driver's limit, nor above
 * a declared one; for a burstable container (a memory_request applies) the budget in force,
 * min(limit, max(request, grant)), each figure resolved the same way (without a limit, the limit is
 * the card, or the driver's figure). *in_force tells whether the driver's is; *q (optional) gets the
 * figures. The one resolution of a budget, at start-up and for a live change alike. */
static uint64_t resolve_limit(const struct device_setup *d, const struct gpc_settings *s, int ordinal,
                              uint64_t reported, const struct gpc_value **from, bool *in_force, struct gpc_qos *q)
{
    uint64_t cap, base = base_of(d, reported, in_force, &cap);
    const char *uuid = d->have_uuid ? d->uuid_text : NULL;
    uint64_t limit = gpc_settings_limit(s, ordinal, uuid, base, from);
    struct gpc_qos none = {0};
    q = q ? q : &none;
    *q = (struct gpc_qos){.limit = limit, .from_file = *from && (*from)->src == GPC_SRC_FILE};
    if (*from && (*from)->bad)
        return limit;
    limit = capped(limit, cap);
    q->limit = limit;
    uint64_t request;
    const struct gpc_value *rf = NULL;
    if (!gpc_settings_request(s, ordinal, uuid, base, &request, &rf))
        return limit;
    if (limit == GPC_UNLIMITED && !base)
        return limit; /* no limit, and a card of unknown size: nothing to be burstable within */
    if (limit == GPC_UNLIMITED)
        limit = capped(base, cap);
    bool refused;
    uint64_t grant = gpc_settings_grant(s, ordinal, uuid, base);
    uint64_t budget = gpc_qos_in_force(limit, capped(request, cap), grant, &refused);
    if (refused)
        say_refused(ordinal, rf, request, limit);
    *q = (struct gpc_qos){
        .burstable = true,
        .request = refused ? 0 : capped(request, cap),
        .limit = limit,
        .grant = grant < limit ? grant : limit,
        /* The figure is the file's own unless the environment lowered the limit or the request. */
        .from_file = (!*from || (*from)->src == GPC_SRC_FILE) && (!rf || rf->src != GPC_SRC_ENV),
    };
    return budget;
}

void gpc_device_note_qos(int id, const struct gpc_qos *q)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger)
        return;
    struct gpc_ledger_dev *e = &gpc_ledger->dev[id];
    atomic_store(&e->qos_request, q->burstable ? q->request : 0);
    atomic_store(&e->qos_limit, q->limit == GPC_UNLIMITED ? 0 : q->limit);
    atomic_store(&e->qos_grant, q->burstable ? q->grant : 0);
    atomic_store(&e->qos_flags, q->burstable ? GPC_QOS_BURSTABLE : 0u);
}

static void note_driver(int budget, int ordinal, uint64_t reported, uint64_t limit)
{
    if (budget < 0 || !gpc_ledger)
        return;
    atomic_store(&gpc_ledger->dev[budget].driver_limit, reported);
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
    gpc_log(GPC_LOG_INFO, "device %d: the driver enforces %s for this container; gpucap's budget is %s "
            "(enforced by: %s)", ordinal, gpc_format_size(reported, a, sizeof a),
            gpc_format_size(limit, b, sizeof b), gpc_enforced_by(reported));
}

static int setup(int ordinal, bool current)
{
    struct device *dev = &devices[ordinal];
    struct device_setup *d = &setups[ordinal];
    gpc_lock(&setup_lock, GPC_LOCK_SETUP);
    if (atomic_load(&dev->ready)) {
        gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
        return atomic_load(&dev->budget);
    }
    size_t physical = 0;
    bool have_physical = gpc_real.cuDeviceTotalMem_v2 &&
                         gpc_real.cuDeviceTotalMem_v2(&physical, ordinal) == CUDA_SUCCESS;
    atomic_store_explicit(&physical_of[ordinal], have_physical ? physical : 0, memory_order_relaxed);
    CUuuid uuid;
    memset(&uuid, 0, sizeof uuid);
    bool have_uuid = GPC_CALL_REAL(cuDeviceGetUuid_v2, (&uuid, ordinal)) == CUDA_SUCCESS;
    char *uuid_text = d->uuid_text;
    gpc_uuid_format((const uint8_t *)uuid.bytes, uuid_text);
    d->physical = have_physical ? physical : 0;
    d->have_uuid = have_uuid;
    extern char **environ;
    const char *why = NULL;
    d->declared = gpc_drv_declared(environ, &why);
    if (why)
        gpc_log(GPC_LOG_WARN, "device %d: the driver's limit: %s", ordinal, why);
    uint64_t reported = driver_reported(current);
    /* No context on the card yet (the runtime reads cuDeviceTotalMem before it makes one): NVML's
     * total, which needs none, shows a driver limit in force all the same, so that the figure the
     * runtime keeps as totalGlobalMem is the budget in force from the start. */
    uint64_t nvml_total = 0;
    if (!reported && have_uuid && have_physical && gpc_nvml_total_bytes(uuid_text, &nvml_total) == 0 &&
        nvml_total < physical)
        reported = nvml_total;
    d->reported = reported;
    const struct gpc_value *from;
    bool in_force;
    struct gpc_qos q;
    uint64_t limit = resolve_limit(d, &gpc_config, ordinal, reported, &from, &in_force, &q);
    int budget = GPC_BUDGET_NONE;
    if (limit == GPC_UNLIMITED) {
        budget = GPC_BUDGET_NONE;
    } else if (from && from->bad) {
        /* A broken setting caps this process at 0; it does not drag the shared budget down. */
        budget = GPC_BUDGET_DENY;
    } else if (from && from->u.size.is_percent && !have_physical && !in_force) {
        gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
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
        if (budget >= 0) {
            gpc_budget_bind(budget, limit, gpc_config.locked, q.from_file);
            gpc_device_note_qos(budget, &q);
            qos_of[ordinal] = q;
        }
        if (budget == -EAGAIN) {
            /* Contended (a crowd starting) or the process table full: logged; this call is
             * denied and the next one tries again. Never cached as a denial for life. */
            gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
            return GPC_BUDGET_DENY;
        }
        if (budget == -EACCES) {
            /* Under the lock, a ledger that was refused (core/ledger_file.c said why): denied. */
            budget = GPC_BUDGET_DENY;
        } else if (budget < 0) {
            gpc_log(GPC_LOG_ERROR, "device %d: the ledger's device table is full (%d cards); allocations on it are "
                    "denied", ordinal, GPC_LEDGER_DEVICES);
            budget = GPC_BUDGET_DENY;
        }
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], where[600];
        gpc_log(GPC_LOG_INFO, "device %d (%s): budget %s of %s (%s)", ordinal, uuid_text, gpc_format_size(limit, a, sizeof a),
                gpc_format_size(physical, b, sizeof b),
                gpc_value_origin(&gpc_config, from, GPC_OPT_MEMORY_LIMIT, ordinal, where, sizeof where));
        if (q.burstable) {
            char r[GPC_SIZE_TEXT], l[GPC_SIZE_TEXT], g[GPC_SIZE_TEXT];
            gpc_log(GPC_LOG_INFO, "device %d: burstable: request %s, limit %s, grant %s", ordinal,
                    gpc_format_size(q.request, r, sizeof r), gpc_format_size(q.limit, l, sizeof l),
                    gpc_format_size(q.grant, g, sizeof g));
        }
        if (in_force)
            note_driver(budget, ordinal, reported, limit);
        /* The platform's maximum lowered what this process asked for: one line, once per device,
         * so that a job sees why it got less than its setting says. */
        bool asked = gpc_config.opt[GPC_OPT_MEMORY_LIMIT].set || gpc_config.dev_limit[ordinal].set ||
                     gpc_config.n_uuid > 0;
        if (from == &gpc_config.opt[GPC_OPT_MEMORY_LIMIT_MAX] && asked)
            gpc_log(GPC_LOG_WARN, "device %d: the budget asked for is above the platform's maximum "
                    "(memory_limit_max = %s): the budget is %s", ordinal, gpc_config.opt[GPC_OPT_MEMORY_LIMIT_MAX].text,
                    gpc_format_size(limit, a, sizeof a));
    }
    memcpy(d->uuid, uuid.bytes, sizeof d->uuid);
    atomic_store(&dev->budget, budget);
    /* No context on the card now: the driver's figure is asked again at the first call with one,
     * unless a broken setting already denies everything. */
    bool look_later = !current && budget != GPC_BUDGET_DENY;
    atomic_store_explicit(&dev->ready, look_later ? 2 : 1, memory_order_release);
    gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
    return budget;
}

/* A device set up without a context on it: now, if a context on it is current, asks the driver
 * for its figure once, and when the driver's limit is in force lowers the budget to it (through
 * the ledger, which keeps the smallest limit of its live processes) or makes one. */
__attribute__((noinline, cold)) static int look_again(int ordinal, bool current)
{
    struct device *dev = &devices[ordinal];
    struct device_setup *d = &setups[ordinal];
    if (!current)
        return atomic_load(&dev->budget);
    gpc_lock(&setup_lock, GPC_LOCK_SETUP);
    int budget = atomic_load(&dev->budget);
    if (atomic_load(&dev->ready) != 2) {
        gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
        return budget;
    }
    /* Callers pass `current` only with a context they saw: a driver that answers nothing there
     * will not answer later either, so this is asked once (the allocation path pays it once). */
    uint64_t reported = driver_reported(current);
    if (!reported) {
        atomic_store_explicit(&dev->ready, 1, memory_order_release);
        gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
        return budget;
    }
    d->reported = reported;
    const struct gpc_value *from;
    bool in_force;
    struct gpc_qos q;
    uint64_t limit = resolve_limit(d, &gpc_config, ordinal, reported, &from, &in_force, &q);
    if (in_force && limit != GPC_UNLIMITED) {
        uint64_t now = budget >= 0 && gpc_ledger ? atomic_load(&gpc_ledger->dev[budget].slot.limit) : GPC_UNLIMITED;
        int got = budget;
        if (budget == GPC_BUDGET_NONE || limit < now)
            got = gpc_ledger_device(d->uuid, d->physical, limit, ordinal);
        if (got == -EAGAIN) {
            gpc_unlock(&setup_lock, GPC_LOCK_SETUP); /* contended: asked again at the next call */
            return budget;
        }
        if (got >= 0) {
            budget = got;
            gpc_budget_bind(budget, limit, gpc_config.locked, q.from_file);
            gpc_device_note_qos(budget, &q);
            qos_of[ordinal] = q;
            note_driver(budget, ordinal, reported, limit);
        }
        atomic_store(&dev->budget, budget);
    }
    atomic_store_explicit(&dev->ready, 1, memory_order_release);
    gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
    return budget;
}

static int budget_of(int ordinal, bool current)
{
    if (gpc_unlikely(ordinal < 0 || ordinal >= GPC_MAX_DEVICES)) {
        gpc_log(GPC_LOG_ERROR, "device %d: beyond the %d devices gpucap can budget; denied", ordinal,
                GPC_MAX_DEVICES);
        return GPC_BUDGET_DENY;
    }
    struct device *d = &devices[ordinal];
    int ready = atomic_load_explicit(&d->ready, memory_order_acquire);
    if (gpc_likely(ready == 1))
        return atomic_load_explicit(&d->budget, memory_order_relaxed);
    return ready == 2 ? look_again(ordinal, current) : setup(ordinal, current);
}

int gpc_device_budget(int ordinal)
{
    return budget_of(ordinal, false);
}

int gpc_device_budget_current(int ordinal)
{
    return budget_of(ordinal, true);
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
    return atomic_load_explicit(&d->ready, memory_order_acquire) ? atomic_load_explicit(&d->budget, memory_order_relaxed)
                                                                 : GPC_BUDGET_NONE;
}

void gpc_device_hold(bool hold)
{
    if (hold)
        gpc_lock(&setup_lock, GPC_LOCK_SETUP);
    else
        gpc_unlock(&setup_lock, GPC_LOCK_SETUP);
}

uint64_t gpc_device_limit_of(int ordinal, const struct gpc_settings *s, const struct gpc_value **from,
                             struct gpc_qos *q)
{
    bool in_force;
    *from = NULL;
    if (q)
        *q = (struct gpc_qos){.limit = GPC_UNLIMITED};
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES || !atomic_load_explicit(&devices[ordinal].ready, memory_order_acquire))
        return GPC_UNLIMITED;
    const struct device_setup *d = &setups[ordinal];
    return resolve_limit(d, s, ordinal, d->reported, from, &in_force, q);
}

bool gpc_device_qos(int ordinal, struct gpc_qos *q, struct gpc_qos *set)
{
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES)
        return false;
    if (q)
        *q = qos_of[ordinal];
    if (set)
        qos_of[ordinal] = *set;
    return qos_of[ordinal].burstable;
}

uint64_t gpc_device_limit_size(int ordinal, const struct gpc_size *size)
{
    bool in_force;
    uint64_t cap;
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES || !atomic_load_explicit(&devices[ordinal].ready, memory_order_acquire))
        return 0;
    const struct device_setup *d = &setups[ordinal];
    uint64_t base = base_of(d, d->reported, &in_force, &cap);
    if (size->is_percent && !base)
        return 0; /* a share of a card whose size is unknown: no figure */
    return capped(gpc_size_resolve(size, base), cap);
}

void gpc_device_each_budget(void (*fn)(int ordinal, int id, const char *uuid, uint64_t physical, void *arg),
                            void *arg)
{
    for (int i = 0; i < GPC_MAX_DEVICES; i++) {
        struct device *d = &devices[i];
        int budget = atomic_load_explicit(&d->budget, memory_order_relaxed);
        if (atomic_load_explicit(&d->ready, memory_order_acquire) && budget >= 0)
            fn(i, budget, setups[i].have_uuid ? setups[i].uuid_text : NULL, setups[i].physical, arg);
    }
}

const char *gpc_device_uuid(int ordinal)
{
    if (ordinal < 0 || ordinal >= GPC_MAX_DEVICES || !atomic_load_explicit(&devices[ordinal].ready, memory_order_acquire))
        return NULL;
    return setups[ordinal].have_uuid ? setups[ordinal].uuid_text : NULL;
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
    gpc_lock(&ctx_lock, GPC_LOCK_CTX_CACHE);
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
    gpc_unlock(&ctx_lock, GPC_LOCK_CTX_CACHE);
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
    gpc_lock(&ctx_lock, GPC_LOCK_CTX_CACHE);
    atomic_fetch_add(&ctx_epoch, 1);
    for (int i = 0; i < CTX_SLOTS; i++)
        atomic_store_explicit(&ctx_slots[i], 0, memory_order_relaxed);
    gpc_unlock(&ctx_lock, GPC_LOCK_CTX_CACHE);
}
