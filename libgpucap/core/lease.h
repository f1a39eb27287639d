/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.h: the lease and spare words of the ledger, and this process's side of them (lease.c, whose
 * head argues why admission never passes the limit in force). The one module that writes a
 * process's lease and spare, a device's total leased, its open state, its journal and its limit:
 * budget.c (admission) and the ledger files (registration, reaping, recovery, a move) call down
 * into it. The allocation path's steps are inline here; the locked steps are lease.c's, and each
 * must be called holding the device entry's lock (core/ledger_map.h), which is what makes it safe.
 */
#ifndef GPUCAP_CORE_LEASE_H
#define GPUCAP_CORE_LEASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/defs.h"
#include "common/ledger.h"

/* In the crash-test copy of the library only: the process dies (SIGKILL) at step n of a locked
 * lease operation when GPC_TEST_CRASH_AT=n. Nothing in the real library. */
#ifdef GPC_CRASH_POINTS
void gpc_crash_point(int n);
#define GPC_CRASH_POINT(n) gpc_crash_point(n)
#else
#define GPC_CRASH_POINT(n) ((void)0)
#endif

/* The admission rule: `bytes` more on top of `used` stays within `limit` (cannot wrap). */
static inline bool gpc_lease_fits(uint64_t used, uint64_t bytes, uint64_t limit)
{
    return bytes <= limit && used <= limit - bytes;
}

/*
 * This process's side, per device entry (budget id), kept outside the file: its own limit (its
 * settings, as last applied: gpc_lease_bind, gpc_lease_set_own), whether that bounds the entry's
 * limit field (under the platform's lock, so that what a tenant writes there can lower, never
 * raise), and how much spare it keeps before it gives some back to the total (gpc_lease_release's
 * caller compares: two chunks, in a shared ledger and a private budget alike, nothing while the
 * leases are above a lowered limit). Written only by lease.c.
 */
struct gpc_lease_own {
    _Atomic uint64_t keep[GPC_LEDGER_DEVICES];
    _Atomic uint64_t limit[GPC_LEDGER_DEVICES];
    atomic_bool binds[GPC_LEDGER_DEVICES];
};
extern struct gpc_lease_own gpc_lease_own;

/* The limit in force on entry `d` (budget id `id`) for this process: the entry's, bounded by its
 * own where that binds. What a grow is checked against and what the figures report. */
static inline uint64_t gpc_lease_limit(const struct gpc_ledger_dev *d, int id)
{
    uint64_t limit = atomic_load_explicit(&d->slot.limit, memory_order_relaxed);
    if (atomic_load_explicit(&gpc_lease_own.binds[id], memory_order_relaxed)) {
        uint64_t own = atomic_load_explicit(&gpc_lease_own.limit[id], memory_order_relaxed);
        if (own < limit)
            limit = own;
    }
    return limit;
}

/* The spare this process keeps on entry `id` before it gives some back (see struct gpc_lease_own). */
static inline uint64_t gpc_lease_keep(int id)
{
    return atomic_load_explicit(&gpc_lease_own.keep[id], memory_order_relaxed);
}

/* A lease chunk: 1/64 of the limit, at least 2 MiB. */
#define GPC_LEASE_CHUNK_MIN (UINT64_C(2) << 20)
static inline uint64_t gpc_lease_chunk(uint64_t limit)
{
    uint64_t c = limit / 64;
    return c > GPC_LEASE_CHUNK_MIN ? c : GPC_LEASE_CHUNK_MIN;
}

/*
 * The fast path, no lock: takes `bytes` from the spare of share s if the spare is open. True when
 * admitted (*after: the spare word then). One comparison tests both: with the open bit set the
 * low 48 bits are at least GPC_SPARE_OPEN + bytes exactly when the spare (47 bits) is at least
 * `bytes`; closed, never.
 */
static inline bool gpc_lease_take(struct gpc_ledger_share *s, uint64_t bytes, uint64_t *after)
{
    uint64_t w = atomic_load_explicit(&s->spare, memory_order_relaxed), need;
    if (gpc_unlikely(__builtin_add_overflow(bytes, GPC_SPARE_OPEN, &need)))
        return false; /* (a request past 48 bits fails the comparison below anyway) */
    while ((w & (GPC_SPARE_MASK | GPC_SPARE_OPEN)) >= need) {
        if (atomic_compare_exchange_weak_explicit(&s->spare, &w, w - bytes, memory_order_acquire,
                                                  memory_order_relaxed)) {
            *after = w - bytes;
            return true;
        }
    }
    return false;
}

/*
 * The fast path of a release, no lock: gives `bytes` back into the spare of share s (open or
 * closed), never above the lease, whatever a caller does (spare past the lease would admit past
 * it). Returns the spare's bytes after.
 */
static inline uint64_t gpc_lease_release(struct gpc_ledger_share *s, uint64_t bytes)
{
    uint64_t w = atomic_load_explicit(&s->spare, memory_order_relaxed), spare;
    do {
        uint64_t lease = atomic_load_explicit(&s->lease, memory_order_acquire);
        spare = (w & GPC_SPARE_MASK) + bytes;
        if (spare > lease)
            spare = lease;
    } while (!atomic_compare_exchange_weak_explicit(&s->spare, &w, (w & ~GPC_SPARE_MASK) | spare,
                                                    memory_order_release, memory_order_relaxed));
    return spare;
}

/* This process's peak on share s, after an admission left the spare word at `after`. A lock
 * holder that changed the pair meanwhile notes the peak itself. */
static inline void gpc_lease_note_peak(struct gpc_ledger_share *s, uint64_t after)
{
    uint64_t lease = atomic_load_explicit(&s->lease, memory_order_acquire);
    uint64_t now = atomic_load_explicit(&s->spare, memory_order_relaxed);
    if (((now ^ after) >> GPC_SPARE_BITS) | ((now >> GPC_SPARE_BITS) & 1))
        return;
    uint64_t spare = now & GPC_SPARE_MASK, in_use = lease > spare ? lease - spare : 0;
    if (in_use > atomic_load_explicit(&s->peak, memory_order_relaxed))
        gpc_atomic_max(&s->peak, in_use);
}

/* ---- this process's own limit and spare (no lock needed: its own words) ---- */

/* Entry `id` is this process's with its own limit `own`; `binds`: that bounds the entry's. */
void gpc_lease_bind(int id, uint64_t own, bool binds);
/* This process's own limit on entry `id` becomes `own` (a live change it applied). */
void gpc_lease_set_own(int id, uint64_t own);
/* This process's own limit on entry `id`, GPC_UNLIMITED for none or an id out of range. */
uint64_t gpc_lease_own_limit(int id);
/* What this process keeps spare on entry `id` of limit `limit`: the normal amount (two chunks), or
 * nothing (`none`: above a lowered limit). */
void gpc_lease_keep_set(int id, uint64_t limit, bool none);

/* ---- the locked steps: each under entry d's lock (d an entry of ledger l) ---- */

/*
 * Grows share s (of this process, entry id `id` of d) enough to admit `bytes` at once, unless that
 * passes the limit in force (`unchecked`: whatever the limit: audit mode, memory the driver took).
 * The lease grows by as much again as the process holds, up to a chunk, where that fits (a private
 * budget too: so it leaves its lease, and looks for a changed limit, every chunk); the share opens
 * if the device is open. `peak`: the process's peak follows now. True if it grew.
 */
bool gpc_lease_grow(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, int id, uint64_t bytes, bool unchecked,
                    bool peak);
/* Takes the spare of share s (of process entry `victim`) down to `keep`, and its lease and d's
 * total down by as much, journalled in d (a crash half-way is finished by the next locker).
 * Returns what it took. */
uint64_t gpc_lease_take_back(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, int victim, uint64_t keep);
/* Takes back the spare of every process on d. */
void gpc_lease_take_all(struct gpc_ledger *l, struct gpc_ledger_dev *d);
/* Closes every share on d to admission without the lock (and marks d closed). */
void gpc_lease_close(struct gpc_ledger *l, struct gpc_ledger_dev *d);
/* After anything that may have lowered the leases: a closed d opens again once they fit its limit. */
void gpc_lease_reopen(struct gpc_ledger *l, struct gpc_ledger_dev *d);
/*
 * d's limit becomes `limit` at once, the one way it changes after registration. Lowered under what
 * is leased: every share is closed, then the limit stored, then every spare taken back; the spares
 * open again once the leases fit. Raised: admission up to the new limit at once.
 */
void gpc_lease_set_limit(struct gpc_ledger *l, struct gpc_ledger_dev *d, uint64_t limit);
/*
 * Records a live change of d's limit from `before` to `after` by `by` (GPC_LIMIT_BY_*): when, from
 * what, the change count, which every process on d compares with the one it saw, and in the
 * entry's record of changes (common/ledger.h) the peak of the budget period it ends; the next
 * period starts from `in_use`, what the processes hold now.
 */
void gpc_lease_note_change(struct gpc_ledger_dev *d, uint64_t before, uint64_t after, unsigned by, uint64_t in_use);
/* d's record of the settings file's figure (limit_file) becomes `limit` (`if_unknown`: only when none
 * is recorded). The previous figure, 0 when none. */
uint64_t gpc_lease_note_file_limit(struct gpc_ledger_dev *d, uint64_t limit, bool if_unknown);
/*
 * Gives the whole share s back to d's total, lease and spare to zero together (the generation odd
 * meanwhile, for readers; the spare first, so that a crash half-way never leaves spare above the
 * lease). Returns the lease it held.
 */
uint64_t gpc_lease_clear(struct gpc_ledger_dev *d, struct gpc_ledger_share *s);
/*
 * Moves this process's share `from` (entry of the file it leaves; that file's lock held too where
 * it still works) into `to` of entry d of the file it moves to: the old spare emptied as it is
 * read (an admission still reading the old file finds none; a release landing there is lost to
 * the new file, which then over-charges, never under-charges), the lease and the spare carried.
 */
void gpc_lease_carry(struct gpc_ledger_dev *d, struct gpc_ledger_share *to, struct gpc_ledger_share *from);
/*
 * After d's lock's owner died inside it, or in a copy of a broken ledger: a journalled take-back is
 * finished, every generation left odd made even, every spare above its lease lowered to it, and
 * the total rebuilt from the leases of the entries held.
 */
void gpc_lease_settle(struct gpc_ledger *l, struct gpc_ledger_dev *d);

/* ---- entries and devices being set up (no other process can see them yet, or none shares them) ---- */

/* A share claimed afresh: nothing leased, the spare closed (only a lock holder opens it). */
void gpc_lease_share_start(struct gpc_ledger_share *s);
/* A private budget rebuilt after the file was shrunk: this process's share s on d (NULL: it has no
 * entry) is what it holds (`held`: by its own count), all of it admitted, open; d's total and peak
 * the same. */
void gpc_lease_share_private(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, uint64_t held);
/* A device entry being registered (not yet visible, or visible under the table lock only): its
 * limit `limit`. */
void gpc_lease_device_start(struct gpc_ledger_dev *d, uint64_t limit);
/* A private budget in a fork child: nothing leased, open, no journal (the parent's are not ours). */
void gpc_lease_device_reset(struct gpc_ledger_dev *d);

#endif
