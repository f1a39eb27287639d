/*
 * budget.c: reservation arithmetic.
 *
 * A budget is a struct gpc_slot: fixed size, no pointers, only atomics, so the same code works on a
 * private slot and on one in a shared mapping. Admission is a single compare-and-swap on `used`:
 * it succeeds only if used + bytes stays within the limit at the instant of the swap, so the sum of
 * admitted bytes never exceeds the limit under any interleaving of threads. No lock, no system call.
 */
#include "internal.h"

#include <errno.h>

int gpc_budget_reserve(struct gpc_slot *s, uint64_t bytes)
{
    uint64_t limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
    uint64_t used = atomic_load_explicit(&s->used, memory_order_relaxed);
    uint64_t next;
    do {
        /* Written so that it cannot wrap: used <= limit holds for any slot we admitted into. */
        if (bytes > limit || used > limit - bytes) {
            atomic_fetch_add_explicit(&s->denials, 1, memory_order_relaxed);
            return -ENOMEM;
        }
        next = used + bytes;
    } while (!atomic_compare_exchange_weak_explicit(&s->used, &used, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    uint64_t peak = atomic_load_explicit(&s->peak, memory_order_relaxed);
    while (next > peak &&
           !atomic_compare_exchange_weak_explicit(&s->peak, &peak, next, memory_order_relaxed, memory_order_relaxed))
        ;
    atomic_fetch_add_explicit(&s->allocs, 1, memory_order_relaxed);
    return 0;
}

void gpc_budget_release(struct gpc_slot *s, uint64_t bytes)
{
    uint64_t used = atomic_load_explicit(&s->used, memory_order_relaxed);
    /* Never below zero, whatever a caller does: a wrapped figure would read as "everything used". */
    while (!atomic_compare_exchange_weak_explicit(&s->used, &used, used >= bytes ? used - bytes : 0,
                                                  memory_order_acq_rel, memory_order_relaxed))
        ;
    atomic_fetch_add_explicit(&s->frees, 1, memory_order_relaxed);
}
