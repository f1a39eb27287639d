/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.c: the lease and spare words, the one module that writes them (lease.h).
 *
 * A budget is a ledger device entry (common/ledger.h), in the shared ledger or in a private one.
 * No process admits against the device total one allocation at a time: each holds a lease per
 * device, granted from the total under the entry's robust lock, and admits inside it with one
 * compare-and-swap on a word of its own (its spare: the part of the lease not admitted); a free is
 * one compare-and-swap on the same word. So the allocation path takes no lock, makes no system
 * call and writes no cache line that another process writes.
 *
 * A lease grows by what is asked plus as much again as the process already holds, up to a chunk
 * (1/64 of the limit, at least 2 MiB; a private budget alike, so that it too leaves its lease every
 * chunk and looks for a changed limit there), and gives back what it holds spare beyond two chunks. Before any denial the spare of every process on
 * the ledger is taken back (core/budget.c), so a denial means the budget is full of admitted
 * bytes, not of spare.
 *
 * The limit can drop under the leases (a process with a lower limit arrives, a live change). A
 * spare word carries an open bit (common/ledger.h) that lock holders alone change: the fast path
 * admits only from an open spare. A lowered limit closes every spare first, then takes them all
 * back; if what the processes hold still passes the limit, the spares stay closed (what is freed
 * meanwhile lands in a closed spare) and every admission takes the lock, where the spare is taken
 * back and the request checked against the limit, until the leases fit again and a lock holder
 * opens them. A new share starts closed and is opened by the lock holder that grows it, if the
 * device is open then.
 *
 * Why nothing is admitted past the limit in force, under any interleaving of threads and processes
 * (the argument to check when changing anything here):
 *  1. For each process P and device d, at every instant: admitted(P) + spare(P) <= lease(P), where
 *     admitted(P) counts every reservation from the moment its compare-and-swap succeeds to the
 *     moment its release's compare-and-swap succeeds. An admission moves bytes from spare to
 *     admitted in one compare-and-swap that fails rather than take spare below zero; a release
 *     moves them back (never above the lease: it is clamped); growing a lease adds to the lease
 *     before the spare; taking spare back lowers the spare (compare-and-swap) before the lease.
 *  2. A lease changes only under d's lock, and d's `leased` is the sum of the leases, kept under
 *     the same lock: a grow is checked there against the limit (audit mode excepted).
 *  3. Taking spare back (from this or another process) never takes more than the spare: the
 *     compare-and-swap works on the word it read, and any concurrent admission or release makes it
 *     fail and read again; the lease then drops by exactly what the spare lost.
 *  4. A spare is open only while leased <= limit: it is opened under d's lock when that holds, and
 *     a lock holder that lowers the limit under `leased` closes every spare (compare-and-swap on
 *     each word, so an admission racing with it either lands before it, under the old limit, or
 *     fails and takes the lock) before it stores the limit. So an admission without the lock takes
 *     spare that fits under the limit in force (sum admitted <= leased <= limit), and one under the
 *     lock is checked against it, after every spare was taken back when it did not fit at once.
 * So what is admitted never passes the limit in force, except by what processes already held
 * when it was lowered, which only their frees reduce, and by memory the driver took without being
 * asked (core/budget.c's gpc_budget_force: a context that grew past its reserve, measured on the
 * card), which is charged whatever the limit and, past it, closes and takes back every spare as a
 * lowering does. Debug builds check points 2 and 4 where they must hold (GPC_ASSERT).
 *
 * Crash safety: a process's share in the total is its lease, which only lock holders write. A dead
 * process's share is its lease, taken back whole (gpc_lease_clear, at the ledger's reap), once it
 * is really dead (its memory is freed when its device files close: after its destructors, at a
 * zombie, at an exec). A lock holder that dies leaves the lock to the next locker with EOWNERDEAD:
 * gpc_lease_settle then completes a take-back of another process's spare that was half done from
 * the journal in the device entry, and rebuilds the total from the leases; an open bit half set or
 * cleared is set again by the next lock holder's own pass. What is in use (the figures) is the sum
 * of lease - spare over the processes (common/ledger.h, gpc_ledger_in_use): exact, whatever is
 * spare.
 */
#include "core/lease.h"

#include "common/defs.h"
#include "common/ledger.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct gpc_lease_own gpc_lease_own;

void gpc_lease_bind(int id, uint64_t own, bool binds)
{
    atomic_store(&gpc_lease_own.limit[id], own);
    atomic_store(&gpc_lease_own.binds[id], binds);
}

void gpc_lease_set_own(int id, uint64_t own)
{
    atomic_store(&gpc_lease_own.limit[id], own);
}

uint64_t gpc_lease_own_limit(int id)
{
    return id >= 0 && id < GPC_LEDGER_DEVICES ? atomic_load(&gpc_lease_own.limit[id]) : GPC_UNLIMITED;
}

void gpc_lease_keep_set(int id, uint64_t limit, bool none)
{
    uint64_t keep = none ? 0 : 2 * gpc_lease_chunk(limit);
    atomic_store_explicit(&gpc_lease_own.keep[id], keep, memory_order_relaxed);
}

/* Grows share s by `grow` bytes, of which `bytes` are admitted at once and the rest is spare. The
 * generation is odd while lease and spare change together. */
static void lease_grow(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, uint64_t grow, uint64_t bytes, bool peak)
{
    atomic_fetch_add_explicit(&s->spare, GPC_SPARE_GEN, memory_order_acq_rel);
    GPC_CRASH_POINT(1);
    uint64_t lease = atomic_load_explicit(&s->lease, memory_order_relaxed) + grow;
    atomic_store_explicit(&s->lease, lease, memory_order_release);
    GPC_CRASH_POINT(2);
    atomic_store_explicit(&d->slot.leased, atomic_load_explicit(&d->slot.leased, memory_order_relaxed) + grow,
                          memory_order_relaxed);
    GPC_CRASH_POINT(3);
    uint64_t w = atomic_fetch_add_explicit(&s->spare, GPC_SPARE_GEN + (grow - bytes), memory_order_acq_rel);
    w += GPC_SPARE_GEN + (grow - bytes);
    GPC_CRASH_POINT(4);
    if (peak)
        gpc_lease_note_peak(s, w);
}

bool gpc_lease_grow(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, int id, uint64_t bytes, bool unchecked,
                    bool peak)
{
    uint64_t limit = gpc_lease_limit(d, id);
    uint64_t leased = atomic_load_explicit(&d->slot.leased, memory_order_relaxed);
    uint64_t by = bytes;
    if (!unchecked && !gpc_lease_fits(leased, bytes, limit))
        return false;
    if (!unchecked) {
        /* Spare in proportion to what the process already holds, up to a chunk: a process that
         * allocates once (a crowd starting) leases what it asks for, one that allocates often
         * soon leases a chunk ahead. */
        uint64_t chunk = gpc_lease_chunk(limit), lease = atomic_load_explicit(&s->lease, memory_order_relaxed);
        uint64_t ahead = lease < chunk ? lease : chunk;
        if (ahead && gpc_lease_fits(leased, bytes + ahead, limit) && bytes + ahead > bytes)
            by = bytes + ahead;
        gpc_lease_keep_set(id, limit, false);
    }
    if (by > GPC_SPARE_MASK)
        by = bytes; /* the spare field's 47 bits (128 TiB) */
    lease_grow(d, s, by, bytes, peak);
    /* Point 2: a checked grow stays within the limit in force. */
    GPC_ASSERT(unchecked || atomic_load_explicit(&d->slot.leased, memory_order_relaxed) <= limit);
    /* A share starts closed (gpc_lease_share_start): it opens here, under the lock, while the
     * device is open (point 4). */
    if (gpc_unlikely(!(atomic_load_explicit(&s->spare, memory_order_relaxed) & GPC_SPARE_OPEN)) &&
        !atomic_load_explicit(&d->closed, memory_order_relaxed))
        atomic_fetch_or_explicit(&s->spare, GPC_SPARE_OPEN, memory_order_acq_rel);
    return true;
}

uint64_t gpc_lease_take_back(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, int victim, uint64_t keep)
{
    uint64_t w = atomic_load_explicit(&s->spare, memory_order_relaxed), after;
    do {
        if ((w & GPC_SPARE_MASK) <= keep)
            return 0;
        after = (w & ~GPC_SPARE_MASK) + GPC_SPARE_GEN + keep; /* odd: lease and spare change */
        /* The journal first: if this process dies past the compare-and-swap, the next locker
         * finishes the take from it (gpc_lease_settle). */
        atomic_store_explicit(&d->victim_spare, w, memory_order_relaxed);
        atomic_store_explicit(&d->victim_spare_after, after, memory_order_relaxed);
        atomic_store_explicit(&d->victim_lease, atomic_load_explicit(&s->lease, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&d->victim, victim + 1, memory_order_release);
        GPC_CRASH_POINT(5);
    } while (!atomic_compare_exchange_weak_explicit(&s->spare, &w, after, memory_order_acq_rel, memory_order_relaxed));
    GPC_CRASH_POINT(6);
    /* Never below zero: spare above the lease is no lease to give back (settle never leaves one,
     * but the file is writable by every process on it). */
    uint64_t lease = atomic_load_explicit(&s->lease, memory_order_relaxed);
    uint64_t took = (w & GPC_SPARE_MASK) - keep;
    if (took > lease)
        took = lease;
    atomic_store_explicit(&s->lease, lease - took, memory_order_release);
    GPC_CRASH_POINT(7);
    uint64_t leased = atomic_load_explicit(&d->slot.leased, memory_order_relaxed);
    atomic_store_explicit(&d->slot.leased, leased > took ? leased - took : 0, memory_order_relaxed);
    GPC_CRASH_POINT(8);
    atomic_fetch_add_explicit(&s->spare, GPC_SPARE_GEN, memory_order_acq_rel); /* even again */
    GPC_CRASH_POINT(9);
    atomic_store_explicit(&d->victim, 0, memory_order_release);
    return took;
}

void gpc_lease_take_all(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    int id = (int)(d - l->dev);
    uint32_t n = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < n && i < GPC_LEDGER_PROCS; i++)
        if (atomic_load_explicit(&l->proc[i].pid, memory_order_relaxed) != 0)
            gpc_lease_take_back(d, &l->proc[i].share[id], (int)i, 0);
}

/* Sets (open) or clears the open bit of every share on d. Only lock holders change the bit; each
 * change is a compare-and-swap that keeps the rest of the word. */
static void set_open(struct gpc_ledger *l, struct gpc_ledger_dev *d, bool open)
{
    int id = (int)(d - l->dev);
    uint32_t n = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < n && i < GPC_LEDGER_PROCS; i++) {
        _Atomic uint64_t *x = &l->proc[i].share[id].spare;
        uint64_t w = atomic_load_explicit(x, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(x, &w, open ? w | GPC_SPARE_OPEN : w & ~GPC_SPARE_OPEN,
                                                      memory_order_acq_rel, memory_order_relaxed))
            ;
    }
    atomic_store_explicit(&d->closed, !open, memory_order_relaxed);
}

void gpc_lease_close(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    set_open(l, d, false);
}

void gpc_lease_reopen(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    if (gpc_unlikely(atomic_load_explicit(&d->closed, memory_order_relaxed)) &&
        atomic_load_explicit(&d->slot.leased, memory_order_relaxed) <=
            atomic_load_explicit(&d->slot.limit, memory_order_relaxed))
        set_open(l, d, true);
}

void gpc_lease_set_limit(struct gpc_ledger *l, struct gpc_ledger_dev *d, uint64_t limit)
{
    uint64_t leased = atomic_load_explicit(&d->slot.leased, memory_order_relaxed);
    if (leased > limit) {
        /* Closed first, so that no spare is admitted from while it is taken back (a release
         * landing meanwhile stays spare, closed), then the limit, then the spares. */
        set_open(l, d, false);
        atomic_store_explicit(&d->slot.limit, limit, memory_order_relaxed);
        gpc_lease_take_all(l, d);
    } else {
        atomic_store_explicit(&d->slot.limit, limit, memory_order_relaxed);
    }
    /* What the processes hold may still pass the limit: closed until what they free brings the
     * leases under it (an admission under the lock takes the freed spare back first). */
    gpc_lease_reopen(l, d);
    /* Point 4: open only while the leases fit. */
    GPC_ASSERT(atomic_load_explicit(&d->closed, memory_order_relaxed) ||
               atomic_load_explicit(&d->slot.leased, memory_order_relaxed) <= limit);
}

void gpc_lease_note_change(struct gpc_ledger_dev *d, uint64_t before, uint64_t after, unsigned by, uint64_t in_use)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint16_t n = atomic_load(&d->limit_changes);
    struct gpc_limit_change *c = &d->changes[n % GPC_LEDGER_CHANGES];
    /* The period that ends: its peak, never below what is held as it ends. */
    uint64_t peak = atomic_exchange(&d->period_peak, in_use);
    /* Burstable (issue 35): the period's peak above the request was on loan. */
    if (atomic_load(&d->qos_flags) & GPC_QOS_BURSTABLE) {
        uint64_t top = peak > in_use ? peak : in_use, r = atomic_load(&d->qos_request);
        if (top > r)
            gpc_atomic_max(&d->loaned_peak, top - r);
    }
    atomic_store(&c->t_ns, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    atomic_store(&c->from, before);
    atomic_store(&c->to, after);
    atomic_store(&c->peak, peak > in_use ? peak : in_use);
    atomic_store(&c->by, by & GPC_LIMIT_BY_MASK);
    atomic_store(&d->limit_was, before);
    atomic_store(&d->limit_changed_s, (uint32_t)ts.tv_sec);
    atomic_store(&d->limit_by, (uint16_t)by);
    atomic_store(&d->limit_changes, (uint16_t)(n + 1));
}

uint64_t gpc_lease_note_file_limit(struct gpc_ledger_dev *d, uint64_t limit, bool if_unknown)
{
    if (if_unknown) {
        uint64_t none = 0;
        atomic_compare_exchange_strong(&d->limit_file, &none, limit);
        return none;
    }
    return atomic_exchange(&d->limit_file, limit);
}

uint64_t gpc_lease_clear(struct gpc_ledger_dev *d, struct gpc_ledger_share *s)
{
    /* Lease and spare to zero together (the generation odd meanwhile, for readers), the spare
     * first: killed half-way, the entry never has spare above its lease (a take-back of that
     * spare would take the lease below zero and the total with it). */
    atomic_fetch_add(&s->spare, GPC_SPARE_GEN);
    GPC_CRASH_POINT(10);
    uint64_t w = atomic_load(&s->spare);
    while (!atomic_compare_exchange_weak(&s->spare, &w, w & ~GPC_SPARE_MASK))
        ;
    GPC_CRASH_POINT(11);
    uint64_t share = atomic_exchange(&s->lease, 0);
    atomic_fetch_add(&s->spare, GPC_SPARE_GEN);
    GPC_CRASH_POINT(12);
    uint64_t leased = atomic_load(&d->slot.leased);
    atomic_store(&d->slot.leased, leased >= share ? leased - share : 0);
    GPC_CRASH_POINT(13);
    return share;
}

void gpc_lease_carry(struct gpc_ledger_dev *d, struct gpc_ledger_share *to, struct gpc_ledger_share *from)
{
    uint64_t w = atomic_load(&from->spare);
    while (!atomic_compare_exchange_weak(&from->spare, &w, (w & ~GPC_SPARE_MASK) + 2 * GPC_SPARE_GEN))
        ;
    uint64_t lease = atomic_load(&from->lease), had = atomic_load(&to->lease);
    uint64_t leased = atomic_load(&d->slot.leased);
    leased = leased >= had ? leased - had : 0;
    atomic_fetch_add(&to->spare, GPC_SPARE_GEN);
    atomic_store(&to->lease, lease);
    atomic_store(&d->slot.leased, leased + lease);
    uint64_t nw = atomic_load(&to->spare);
    atomic_store(&to->spare, (nw & ~GPC_SPARE_MASK) + GPC_SPARE_GEN + (w & GPC_SPARE_MASK));
}

/*
 * A take-back of spare (gpc_lease_take_back) journalled in entry d and not finished, whoever was
 * doing it: finishes it. The generation of the victim's spare tells whether the compare-and-swap
 * was done (only lock holders move it), its lease whether the lease was lowered after it.
 */
static void finish_take_back(struct gpc_ledger *l, struct gpc_ledger_dev *d, int id)
{
    int32_t victim = atomic_load(&d->victim);
    if (victim <= 0 || victim > GPC_LEDGER_PROCS) {
        atomic_store(&d->victim, 0);
        return;
    }
    struct gpc_ledger_share *s = &l->proc[victim - 1].share[id];
    uint64_t before = atomic_load(&d->victim_spare), after = atomic_load(&d->victim_spare_after);
    uint64_t lease = atomic_load(&d->victim_lease), took = (before & GPC_SPARE_MASK) - (after & GPC_SPARE_MASK);
    if ((atomic_load(&s->spare) >> GPC_SPARE_BITS) == (after >> GPC_SPARE_BITS) && atomic_load(&s->lease) == lease)
        atomic_store(&s->lease, lease >= took ? lease - took : 0);
    atomic_store(&d->victim, 0);
}

void gpc_lease_settle(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    int id = (int)(d - l->dev);
    finish_take_back(l, d, id);
    uint64_t sum = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_share *s = &l->proc[i].share[id];
        if ((atomic_load(&s->spare) >> GPC_SPARE_BITS) & 1)
            atomic_fetch_add(&s->spare, GPC_SPARE_GEN);
        /* Never spare above the lease (a writer of the file, or a layout of an older version, may
         * have left one): it would admit past the lease, and a take-back would take the lease
         * below zero. A compare-and-swap: the owner may be freeing into it now. */
        uint64_t lease = atomic_load(&s->lease), w = atomic_load(&s->spare);
        while ((w & GPC_SPARE_MASK) > lease &&
               !atomic_compare_exchange_weak(&s->spare, &w, (w & ~GPC_SPARE_MASK) | lease))
            ;
        if (atomic_load(&l->proc[i].pid) != 0)
            sum += lease;
    }
    atomic_store(&d->slot.leased, sum);
}

void gpc_lease_share_start(struct gpc_ledger_share *s)
{
    atomic_store(&s->lease, 0);
    /* Closed: only a lock holder opens a share, while the device's leases fit its limit. */
    uint64_t w = atomic_load(&s->spare);
    atomic_store(&s->spare, w & ~GPC_SPARE_MASK & ~GPC_SPARE_GEN & ~GPC_SPARE_OPEN);
}

void gpc_lease_share_private(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, uint64_t held)
{
    atomic_store(&d->slot.leased, held);
    atomic_store(&d->slot.peak, held);
    if (s) {
        atomic_store(&s->lease, held);
        atomic_store(&s->spare, GPC_SPARE_OPEN);
    }
}

void gpc_lease_device_start(struct gpc_ledger_dev *d, uint64_t limit)
{
    atomic_store(&d->slot.limit, limit);
}

void gpc_lease_device_reset(struct gpc_ledger_dev *d)
{
    atomic_store(&d->closed, 0);
    atomic_store(&d->victim, 0);
    atomic_store(&d->slot.leased, 0);
}

#ifdef GPC_CRASH_POINTS
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

void gpc_crash_point(int n)
{
    /* Read once per process: a fork child (the unit test's) reads its own environment. */
    static int at = -1;
    static pid_t read_by;
    if (at < 0 || read_by != getpid()) {
        const char *e = getenv("GPC_TEST_CRASH_AT");
        at = e ? atoi(e) : 0;
        read_by = getpid();
    }
    if (n == at)
        raise(SIGKILL);
}
#endif
