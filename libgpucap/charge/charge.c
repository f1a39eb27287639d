/* SPDX-License-Identifier: Apache-2.0 */
/*
 * charge.c: the steps every allocating hook shares.
 *
 * Reserve before the driver is called (so a denial never reaches it), then either give the
 * reservation back (the driver failed) or record what the new pointer or handle was charged.
 * Frees take the record out first, call the driver, then release or put the record back.
 * Contexts are charged the same way as any allocation, and their reserve is also noted apart in
 * the figures (gpc_charge_commit, gpc_charge_release). The hooks start the library (hooks/init.h) before
 * they call in here; a pointer that a pool keeps after its free goes to the step the pools
 * registered (gpc_charge_keeper), so this file calls no module above it.
 */
#include "charge/charge.h"

#include "common/defs.h"
#include "common/faults.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/state.h"
#include "core/track.h"
#include "driver/resolve.h"
#include "charge/backtrace.h"
#include "charge/device.h"
#include "charge/loan.h"
#include "charge/reclaim.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The one line a denial is worth (audit mode: a would-be denial), then its call stack if asked.
 * A context's reserve that does not fit says so: the call denied then is the context's creation,
 * which frameworks report as a generic CUDA error rather than an out-of-memory one. */
static void log_denial(const char *call, int device, uint64_t bytes, int budget, bool audit, bool context)
{
    char a[32], b[32], c[32];
    if (context && !audit) {
        gpc_log(GPC_LOG_WARN, "%s denied on device %d: the context reserve %s does not fit in the budget %s "
                "(in use %s); raise the budget or set context_reserve (GPUCAP_CONTEXT_RESERVE) lower "
                "-> CUDA_ERROR_OUT_OF_MEMORY", call, device, gpc_format_size(bytes, a, sizeof a),
                gpc_format_size(gpc_budget_limit(budget), c, sizeof c),
                gpc_format_size(gpc_budget_in_use(budget), b, sizeof b));
        gpc_backtrace_log();
        return;
    }
    gpc_log(GPC_LOG_WARN, "%s%s %s on device %d: requested %s, in use %s, limit %s%s", audit ? "audit: " : "", call,
            audit ? "would be denied" : "denied", device, gpc_format_size(bytes, a, sizeof a),
            gpc_format_size(gpc_budget_in_use(budget), b, sizeof b), gpc_format_size(gpc_budget_limit(budget), c, sizeof c),
            audit ? "; admitted (later ones of this process are counted, and summed up at its exit)"
                  : " -> CUDA_ERROR_OUT_OF_MEMORY");
    gpc_backtrace_log();
}

/*
 * Audit mode logs a process's first would-be denial only (a job that needs twice its budget would
 * otherwise print a line per allocation) and counts the rest per budget; the process's exit says
 * how many there were and what budget would have sufficed: the peak, which audit mode lets grow
 * past the limit to exactly what the job asked for.
 */
static _Atomic uint64_t audit_denials[GPC_LEDGER_DEVICES];
static _Atomic int audit_device[GPC_LEDGER_DEVICES];
static atomic_bool audit_logged;

static void note_audit_denial(const char *call, int device, uint64_t bytes, int budget)
{
    if (budget >= GPC_LEDGER_DEVICES)
        return;
    atomic_store_explicit(&audit_device[budget], device, memory_order_relaxed);
    atomic_fetch_add_explicit(&audit_denials[budget], 1, memory_order_relaxed);
    if (!atomic_exchange(&audit_logged, true))
        log_denial(call, device, bytes, budget, true, false);
}

void gpc_charge_audit_summary(void)
{
    for (int id = 0; id < GPC_LEDGER_DEVICES; id++) {
        uint64_t n = atomic_load(&audit_denials[id]);
        const struct gpc_slot *s = n ? gpc_budget_slot(id) : NULL;
        if (!s)
            continue;
        char a[32], b[32];
        gpc_log(GPC_LOG_WARN, "audit: %llu allocation%s on device %d would have been denied under the limit %s; "
                "a budget of %s (the peak) would have sufficed", (unsigned long long)n, n == 1 ? "" : "s",
                atomic_load(&audit_device[id]), gpc_format_size(atomic_load(&s->limit), a, sizeof a),
                gpc_format_size_up(gpc_budget_peak(id), b, sizeof b));
    }
}

/*
 * Before a denial: memory that pools and graphs keep for reuse counts against the budget, so give
 * back what they hold unused on this device and try once more. True when the retry admitted.
 */
static bool retry_after_trim(int budget, int device, uint64_t bytes, unsigned how)
{
    if (budget < 0)
        return false;
    return gpc_reclaim(device) && gpc_budget_admit(budget, bytes, how) == 0;
}

/*
 * A request denied again at once is one denial. PyTorch's caching allocator (and others built the
 * same way) answers an out-of-memory by freeing its cache and asking for the same size again; a
 * report that counted both, and two warning lines, would read as two failures. So a denial of the
 * same size on the same device by the same thread, with nothing admitted to that thread in between
 * (its admission mark, budget.c, did not move) and within a second of the first such denial, is
 * counted and said once. All of it runs at a denial: the allocation path pays nothing for it.
 */
#define RETRY_WINDOW_NS 1000000000ull
static __thread struct {
    bool armed; /* a denial happened */
    int device, budget;
    uint32_t mark; /* the thread's admission mark then */
    uint64_t bytes, at_ns;
} last_denial __attribute__((tls_model("initial-exec")));

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether a denied request repeats the thread's last denial (see above). */
static bool repeats_denial(int device, int budget, uint64_t bytes)
{
    return last_denial.armed && last_denial.device == device && last_denial.budget == budget &&
           last_denial.bytes == bytes && last_denial.mark == gpc_budget_thread_mark(budget) &&
           now_ns() - last_denial.at_ns < RETRY_WINDOW_NS;
}

/* A charge's admission: the peak waits for the driver (a request it refuses is no part of it). */
static unsigned admit_how(const struct gpc_charge *c)
{
    return GPC_ADMIT_DEFER_PEAK | (c->context ? GPC_ADMIT_CONTEXT : 0);
}

/* After a denial (counted, unless it repeats the last one: `again`): audit mode admits it past the
 * limit, enforcement logs it (once for repeats) and answers CUDA_ERROR_OUT_OF_MEMORY. */
static CUresult deny(struct gpc_charge *c, const char *call, int device, int budget, uint64_t bytes, unsigned how,
                 bool again)
{
    /* Audit mode: the denial is counted and logged, and the bytes are admitted past the limit
     * so that the peak is what the job really needs. A broken setting (DENY) still denies. */
    if (gpc_opt_enum(&gpc_config, GPC_OPT_MODE) == GPC_MODE_AUDIT && budget >= 0) {
        note_audit_denial(call, device, bytes, budget);
        if (gpc_budget_admit(budget, bytes, how | GPC_ADMIT_UNCHECKED) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        c->budget = budget;
        return CUDA_SUCCESS;
    }
    if (!again) {
        log_denial(call, device, bytes, budget, false, c->context);
        last_denial.device = device;
        last_denial.budget = budget;
        last_denial.bytes = bytes;
        last_denial.at_ns = now_ns(); /* the first denial's time: repeats do not extend it */
    }
    last_denial.mark = gpc_budget_thread_mark(budget);
    last_denial.armed = true;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult charge_begin(struct gpc_charge *c, int device, uint64_t bytes, const char *call, bool context)
{
    c->budget = GPC_BUDGET_NONE;
    c->bytes = bytes;
    c->device = device;
    c->context = context;
    c->have_ctx = false;
    if (!gpc_counting()) {
        if (gpc_unlikely(gpc_closed_now()))
            return CUDA_ERROR_OUT_OF_MEMORY;
        /* Fault injection works without a budget too (after gpc_init: the settings are loaded). */
        if (gpc_unlikely(gpc_fault_armed(&gpc_config)) && !context && atomic_load(&gpc_initialized) &&
            gpc_fault_inject(&gpc_config, call, device, bytes)) {
            gpc_backtrace_log();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return CUDA_SUCCESS;
    }
    bool from_ctx = false; /* the device is the current context's */
    if (device < 0) {
        CUcontext ctx = NULL;
        CUdevice d;
        /* No current context: let the driver give its own error. */
        if (gpc_unlikely(!gpc_real.cuCtxGetCurrent)) {
            if (gpc_current_device(&d) != CUDA_SUCCESS)
                return CUDA_SUCCESS;
        } else if (gpc_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx || gpc_ctx_device(ctx, &d) != CUDA_SUCCESS) {
            return CUDA_SUCCESS;
        }
        c->ctx = (uint64_t)(uintptr_t)ctx;
        c->have_ctx = ctx != NULL;
        c->device = device = d;
        from_ctx = true;
    }
    int budget = from_ctx ? gpc_device_budget_current(device) : gpc_device_budget(device);
    /* An injected failure is a denial in the figures, and never reaches the budget or the driver. */
    if (gpc_unlikely(gpc_fault_armed(&gpc_config)) && !context &&
        gpc_fault_inject(&gpc_config, call, device, bytes)) {
        gpc_budget_note_denial(budget, bytes);
        gpc_backtrace_log();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (budget == GPC_BUDGET_NONE)
        return CUDA_SUCCESS;
    unsigned how = admit_how(c);
    if (gpc_unlikely(gpc_budget_admit(budget, bytes, how | GPC_ADMIT_QUIET) != 0)) {
        bool again = repeats_denial(device, budget, bytes);
        if (retry_after_trim(budget, device, bytes, how | GPC_ADMIT_QUIET)) {
            if (!again)
                gpc_budget_count_denial(budget);
            c->budget = budget;
            return CUDA_SUCCESS;
        }
        /* Burstable below its limit: the node arbiter may lend (charge/loan.c); a loan that admits is
         * no denial. */
        if (budget >= 0 && gpc_opt_enum(&gpc_config, GPC_OPT_MODE) != GPC_MODE_AUDIT &&
            gpc_loan_ask(device, budget, bytes) && gpc_budget_admit(budget, bytes, how | GPC_ADMIT_QUIET) == 0) {
            c->budget = budget;
            return CUDA_SUCCESS;
        }
        if (!again)
            gpc_budget_count_denial(budget);
        return deny(c, call, device, budget, bytes, how, again);
    }
    c->budget = budget;
    return CUDA_SUCCESS;
}

bool gpc_charge_need(const struct gpc_charge *c, struct gpc_loan_need *n)
{
    if (c->budget < 0 || c->context)
        return false;
    return gpc_loan_need(c->device, c->budget, c->bytes, n);
}

CUresult gpc_charge_begin(struct gpc_charge *c, int device, uint64_t bytes, const char *call)
{
    return charge_begin(c, device, bytes, call, false);
}

CUresult gpc_charge_begin_context(struct gpc_charge *c, int device, uint64_t bytes, const char *call)
{
    return charge_begin(c, device, bytes, call, true);
}

/* The context an allocation belongs to (the calling thread's current one): its teardown frees it.
 * Read at begin when the device was the current context's; a call for a named device reads it here. */
static uint64_t current_ctx(void)
{
    CUcontext ctx = NULL;
    if (!gpc_real.cuCtxGetCurrent || gpc_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
        return 0;
    return (uint64_t)(uintptr_t)ctx;
}

/* gpc_charge_commit, inlined into gpc_charge_end: the allocation path pays no call for it. */
static inline bool commit(struct gpc_charge *c, CUresult rc)
{
    if (c->budget == GPC_BUDGET_NONE)
        return false;
    if (rc != CUDA_SUCCESS) {
        gpc_charge_refused(c);
        return false;
    }
    gpc_budget_admitted(c->budget);
    if (c->context) /* a context's reserve */
        gpc_budget_note_contexts(c->budget, (int64_t)c->bytes);
    return true;
}

bool gpc_charge_commit(struct gpc_charge *c, CUresult rc)
{
    return commit(c, rc);
}

void gpc_charge_end(struct gpc_charge *c, CUresult rc, enum gpc_map_kind kind, uint64_t key)
{
    if (!commit(c, rc))
        return;
    struct gpc_track t = {.bytes = c->bytes, .device = c->device, .refs = 1};
    if (kind == GPC_MAP_PTR || kind == GPC_MAP_ARRAY)
        t.ctx = c->have_ctx ? c->ctx : current_ctx();
    if (gpc_track_add(kind, key, &t) != 0)
        gpc_log(GPC_LOG_ERROR, "out of memory for bookkeeping: %llu bytes on device %d stay charged for good",
                (unsigned long long)c->bytes, c->device);
}

void gpc_charge_admitted(const struct gpc_charge *c)
{
    if (c->budget != GPC_BUDGET_NONE)
        gpc_budget_admitted(c->budget);
}

void gpc_charge_refused(const struct gpc_charge *c)
{
    if (c->budget != GPC_BUDGET_NONE)
        gpc_budget_release_refused(c->budget, c->bytes, admit_how(c) | GPC_REFUSED_BY_DRIVER);
}

CUresult gpc_charge_settle(struct gpc_charge *c, uint64_t actual, enum gpc_map_kind kind, uint64_t key,
                           const char *call)
{
    if (c->budget != GPC_BUDGET_NONE && actual < c->bytes) {
        gpc_budget_release_charge(c->budget, c->bytes - actual);
    } else if (c->budget != GPC_BUDGET_NONE && actual > c->bytes) {
        struct gpc_charge extra;
        if (charge_begin(&extra, c->device, actual - c->bytes, call, c->context) != CUDA_SUCCESS) {
            gpc_budget_release_refused(c->budget, c->bytes, admit_how(c)); /* the denial of the rest is counted */
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        /* One request: the rest is no allocation of its own. */
        gpc_budget_release_refused(extra.budget, 0, admit_how(&extra));
    }
    c->bytes = actual;
    gpc_charge_end(c, CUDA_SUCCESS, kind, key);
    return CUDA_SUCCESS;
}

bool gpc_free_begin(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t)
{
    if (!gpc_counting())
        return false;
    return gpc_track_take(kind, key, t);
}

static inline void uncharge(int device, uint64_t bytes, bool context)
{
    int budget = gpc_device_budget_if_ready(device);
    if (context) {
        gpc_budget_note_contexts(budget, -(int64_t)bytes);
        gpc_budget_release_charge(budget, bytes); /* a context's end is no free of the program's */
        return;
    }
    gpc_budget_release(budget, bytes);
}

void gpc_charge_release(int device, uint64_t bytes, bool context)
{
    uncharge(device, bytes, context);
}

/* Until the pools register theirs (at start-up, before anything is charged): release. */
static void release_kept(const struct gpc_track *t)
{
    uncharge(t->device, t->bytes, false);
}

static gpc_keep_fn *keeper = release_kept;

void gpc_charge_keeper(gpc_keep_fn *fn)
{
    keeper = fn;
}

void gpc_free_end(bool known, enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t, CUresult rc)
{
    if (!known)
        return;
    if (rc != CUDA_SUCCESS) {
        gpc_track_add(kind, key, t);
        return;
    }
    if (kind == GPC_MAP_PTR && t->aux) {
        keeper(t);
        return;
    }
    /* gpc_charge_release's steps, written out: the record's bytes are read after the lookup (one register
     * fewer on the free path). */
    int budget = gpc_device_budget_if_ready(t->device);
    if (kind == GPC_MAP_CTX) {
        gpc_budget_note_contexts(budget, -(int64_t)t->bytes);
        gpc_budget_release_charge(budget, t->bytes); /* a context's end is no free of the program's */
        return;
    }
    gpc_budget_release(budget, t->bytes);
}
