/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.c: reservation arithmetic.
 *
 * A budget is a ledger device entry (ledger.h). Two ways to admit, one rule: an allocation is
 * admitted only if used + bytes stays within the limit at the instant it is counted, so the sum of
 * admitted bytes never exceeds the limit under any interleaving.
 *  - private budget (one process): a single compare-and-swap on `used`, no lock, no system call;
 *  - shared ledger (several processes): under the entry's robust process-shared mutex, where this
 *    process's own share is recorded with the total, so a process that dies at any instant leaves
 *    figures from which its share can be taken back (ledger.c). Nothing inside the lock can block.
 */
#include "internal.h"

#include <errno.h>
#include <time.h>

static struct gpc_slot deny_slot; /* limit 0 */

struct gpc_slot *gpc_budget_slot(int id)
{
    if (id == GPC_BUDGET_DENY)
        return &deny_slot;
    if (id < 0)
        return NULL;
    return &gpc_ledger->dev[id].slot;
}

static void max_into(_Atomic uint64_t *x, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(x, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(x, &cur, v, memory_order_relaxed, memory_order_relaxed))
        ;
}

static void count_denial(struct gpc_slot *s)
{
    if (atomic_fetch_add_explicit(&s->denials, 1, memory_order_relaxed) == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&s->first_denial_ns, &zero, (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec);
    }
}

bool gpc_budget_fits(uint64_t used, uint64_t bytes, uint64_t limit)
{
    /* Written so that it cannot wrap. */
    return bytes <= limit && used <= limit - bytes;
}

static int reserve_private(struct gpc_slot *s, uint64_t bytes)
{
    uint64_t limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
    uint64_t used = atomic_load_explicit(&s->used, memory_order_relaxed);
    do {
        if (!gpc_budget_fits(used, bytes, limit))
            return -ENOMEM;
    } while (!atomic_compare_exchange_weak_explicit(&s->used, &used, used + bytes, memory_order_acq_rel,
                                                    memory_order_relaxed));
    max_into(&s->peak, used + bytes);
    return 0;
}

static uint64_t minus(uint64_t a, uint64_t b);

/*
 * Writers of a shared entry's figures, this process's share and its shadow hold the entry's lock:
 * under it a plain (relaxed) load and store does what a locked read-modify-write would, without
 * one more locked operation on the entry's cache line, which every process on the ledger writes.
 */
static inline void add_locked(_Atomic uint64_t *x, uint64_t v)
{
    atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + v, memory_order_relaxed);
}

/* Under device id's lock: applies the releases that earlier calls could not (lock timed out). */
static inline void apply_pending(int id, struct gpc_ledger_proc *p, struct gpc_ledger_dev *d)
{
    if (gpc_likely(atomic_load_explicit(&gpc_ledger_pending[id], memory_order_relaxed) == 0))
        return;
    uint64_t bytes = atomic_exchange_explicit(&gpc_ledger_pending[id], 0, memory_order_relaxed);
    atomic_store_explicit(&gpc_ledger_mine[id],
                          minus(atomic_load_explicit(&gpc_ledger_mine[id], memory_order_relaxed), bytes),
                          memory_order_relaxed);
    atomic_store_explicit(&p->used[id], minus(atomic_load_explicit(&p->used[id], memory_order_relaxed), bytes),
                          memory_order_relaxed);
    atomic_store_explicit(&d->slot.used, minus(atomic_load_explicit(&d->slot.used, memory_order_relaxed), bytes),
                          memory_order_relaxed);
}

static int reserve_shared(int id, uint64_t bytes)
{
    int me = gpc_ledger_me();
    if (me < 0)
        return -ENOMEM;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct gpc_ledger_dev *d = gpc_ledger_lock_dev(id, "the allocation is denied");
        if (!d)
            return -ENOMEM;
        struct gpc_ledger_proc *p = &gpc_ledger->proc[me];
        apply_pending(id, p, d);
        uint64_t used = atomic_load_explicit(&d->slot.used, memory_order_relaxed);
        bool ok = gpc_budget_fits(used, bytes, atomic_load_explicit(&d->slot.limit, memory_order_relaxed));
        if (ok) {
            /* Own share first: after a crash here, recovery recomputes the total from the shares. */
            uint64_t mine = atomic_load_explicit(&p->used[id], memory_order_relaxed) + bytes;
            atomic_store_explicit(&p->used[id], mine, memory_order_relaxed);
            add_locked(&gpc_ledger_mine[id], bytes);
            atomic_store_explicit(&d->slot.used, used + bytes, memory_order_relaxed);
            max_into(&d->slot.peak, used + bytes);
            max_into(&p->peak[id], mine);
            add_locked(&d->slot.allocs, 1);
        }
        gpc_ledger_unlock(d);
        if (ok)
            return 0;
        /* Before denying: are dead processes holding part of the budget? */
        if (attempt == 0 && gpc_ledger_reap() == 0)
            break;
    }
    return -ENOMEM;
}

int gpc_budget_reserve(int id, uint64_t bytes)
{
    if (id == GPC_BUDGET_NONE)
        return 0;
    gpc_ledger_check_broken();
    struct gpc_slot *s = gpc_budget_slot(id);
    bool shared = gpc_ledger_shared; /* reserve_shared counts the allocation under the lock */
    int rc = id == GPC_BUDGET_DENY ? -ENOMEM : shared ? reserve_shared(id, bytes) : reserve_private(s, bytes);
    if (gpc_unlikely(rc != 0 && shared && atomic_load_explicit(&gpc_ledger_broken, memory_order_relaxed))) {
        /* The file was shrunk during this call (its figures read as zeros): admit on the private budget. */
        gpc_ledger_check_broken();
        s = gpc_budget_slot(id);
        rc = reserve_private(s, bytes);
        shared = false;
    }
    max_into(&s->largest, bytes);
    if (rc != 0) {
        count_denial(s);
        gpc_timeline_note(id, true);
        return rc;
    }
    if (!shared)
        atomic_fetch_add_explicit(&s->allocs, 1, memory_order_relaxed);
    gpc_timeline_note(id, false);
    return 0;
}

static uint64_t minus(uint64_t a, uint64_t b)
{
    /* Never below zero, whatever a caller does: a wrapped figure would read as "all used". */
    return a >= b ? a - b : 0;
}

void gpc_budget_release(int id, uint64_t bytes)
{
    if (id < 0)
        return;
    gpc_ledger_check_broken();
    struct gpc_ledger_dev *d = &gpc_ledger->dev[id];
    if (!gpc_ledger_shared) {
        atomic_fetch_add_explicit(&d->slot.frees, 1, memory_order_relaxed);
        uint64_t used = atomic_load_explicit(&d->slot.used, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&d->slot.used, &used, minus(used, bytes), memory_order_acq_rel,
                                                      memory_order_relaxed))
            ;
        gpc_timeline_note(id, false);
        return;
    }
    int me = gpc_ledger_me();
    if (me < 0)
        return; /* logged; this process holds no share */
    d = gpc_ledger_lock_dev(id, "the release is kept and applied at the next lock");
    if (!d) {
        /* Never lost: the driver call does not wait longer, the ledger learns it later. (The count
         * of frees is added at once: the lock's holder is stuck, so nothing races with it.) */
        atomic_fetch_add_explicit(&gpc_ledger->dev[id].slot.frees, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&gpc_ledger_pending[id], bytes, memory_order_relaxed);
        return;
    }
    struct gpc_ledger_proc *p = &gpc_ledger->proc[me];
    apply_pending(id, p, d);
    add_locked(&d->slot.frees, 1);
    atomic_store_explicit(&p->used[id], minus(atomic_load_explicit(&p->used[id], memory_order_relaxed), bytes),
                          memory_order_relaxed);
    atomic_store_explicit(&gpc_ledger_mine[id],
                          minus(atomic_load_explicit(&gpc_ledger_mine[id], memory_order_relaxed), bytes),
                          memory_order_relaxed);
    atomic_store_explicit(&d->slot.used, minus(atomic_load_explicit(&d->slot.used, memory_order_relaxed), bytes),
                          memory_order_relaxed);
    gpc_ledger_unlock(d);
    gpc_timeline_note(id, false);
}

/* ---- audit mode and fault injection (asked for by `gpucap`; see charge.c) ---- */

int gpc_budget_reserve_unchecked(int id, uint64_t bytes)
{
    if (id < 0)
        return 0;
    gpc_ledger_check_broken();
    struct gpc_ledger_dev *d = &gpc_ledger->dev[id];
    if (!gpc_ledger_shared) {
        atomic_fetch_add_explicit(&d->slot.allocs, 1, memory_order_relaxed);
        uint64_t used = atomic_fetch_add_explicit(&d->slot.used, bytes, memory_order_acq_rel) + bytes;
        max_into(&d->slot.peak, used);
        gpc_timeline_note(id, false);
        return 0;
    }
    int me = gpc_ledger_me();
    if (me < 0 || !(d = gpc_ledger_lock_dev(id, "the allocation is denied")))
        return -ENOMEM;
    struct gpc_ledger_proc *p = &gpc_ledger->proc[me];
    apply_pending(id, p, d);
    uint64_t mine = atomic_load_explicit(&p->used[id], memory_order_relaxed) + bytes;
    uint64_t used = atomic_load_explicit(&d->slot.used, memory_order_relaxed) + bytes;
    atomic_store_explicit(&p->used[id], mine, memory_order_relaxed);
    add_locked(&gpc_ledger_mine[id], bytes);
    add_locked(&d->slot.allocs, 1);
    atomic_store_explicit(&d->slot.used, used, memory_order_relaxed);
    max_into(&d->slot.peak, used);
    max_into(&p->peak[id], mine);
    gpc_ledger_unlock(d);
    gpc_timeline_note(id, false);
    return 0;
}

void gpc_budget_note_denial(int id, uint64_t bytes)
{
    struct gpc_slot *s = gpc_budget_slot(id);
    if (!s)
        return;
    max_into(&s->largest, bytes);
    count_denial(s);
    gpc_timeline_note(id, true);
}

void gpc_budget_note_contexts(int id, int64_t delta)
{
    struct gpc_slot *s = gpc_budget_slot(id);
    if (s && id >= 0)
        atomic_fetch_add_explicit(&s->contexts, (uint64_t)delta, memory_order_relaxed);
}
