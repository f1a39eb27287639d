/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.h: admission against the budgets, by leases (budget.c; the words are core/lease.c's).
 *
 * One verb gives bytes back: release. gpc_budget_release gives back what a free of the program's
 * freed, gpc_budget_release_charge what was charged but was no allocation of the program (a
 * context's reserve, memory the driver took unasked, the surplus of an estimate), and
 * gpc_budget_release_refused an admission the driver then did not carry out.
 */
#ifndef GPUCAP_CORE_BUDGET_H
#define GPUCAP_CORE_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/ledger.h"

/* Budget ids are ledger device indices, or one of these. */
#define GPC_BUDGET_NONE (-1) /* no limit for that device: nothing is counted */
#define GPC_BUDGET_DENY (-2) /* a budget of 0 after a bad setting: everything is denied */
/* How gpc_budget_admit admits (flags). */
#define GPC_ADMIT_UNCHECKED 1u   /* audit mode: whatever the limit (see gpc_budget_admit_unchecked) */
#define GPC_ADMIT_CONTEXT 2u     /* a context reserve: counted apart, not a request (allocs, largest) */
#define GPC_ADMIT_DEFER_PEAK 4u  /* the peak and the timeline wait for gpc_budget_admitted (the driver may refuse) */
#define GPC_REFUSED_BY_DRIVER 8u /* gpc_budget_release_refused: the driver refused (counted as such) */
#define GPC_ADMIT_QUIET 16u      /* a denial is not counted: the caller counts it (gpc_budget_count_denial) */
/*
 * Admits `bytes` on budget `id` if what is admitted on the device stays within its limit in force:
 * 0, or -ENOMEM (nothing changed, denial counted). Inside this process's lease: one
 * compare-and-swap. Otherwise the lease grows under the device's robust lock; before denying,
 * every process's spare and dead processes' shares are taken back and admission is tried again.
 * `how`: GPC_ADMIT_* flags.
 */
int gpc_budget_admit(int id, uint64_t bytes, unsigned how);
/* The driver carried out an admission made with GPC_ADMIT_DEFER_PEAK: this process's peak follows. */
void gpc_budget_admitted(int id);
/* Gives back bytes admitted earlier that a free of the program's freed (no lock: into this
 * process's lease; counted as a free). */
void gpc_budget_release(int id, uint64_t bytes);
/* Gives back bytes charged that were no allocation of the program (a context, memory the driver
 * took, an estimate settled): no free is counted. */
void gpc_budget_release_charge(int id, uint64_t bytes);
/*
 * Gives back an admission the driver did not carry out (`how`: the admission's GPC_ADMIT_CONTEXT,
 * and GPC_REFUSED_BY_DRIVER when the driver refused it): the bytes back, the allocation uncounted,
 * no free.
 */
void gpc_budget_release_refused(int id, uint64_t bytes, unsigned how);
/* At normal exit, before the ledger lets go: adds the allocations this process still holds (its
 * context reserves apart) to held_at_exit; or what it held when exit began
 * (gpc_budget_note_exit_begins), when that was more: the CUDA runtime's own exit handlers release
 * its primary contexts, and with them every allocation, before the library's destructor runs. */
void gpc_budget_note_exit(void);
/* At the start of exit (an exit handler that runs before the runtime's): notes what this process
 * holds then, for gpc_budget_note_exit. */
void gpc_budget_note_exit_begins(void);
/* Registers `fn` to be called once per process, at its first counted allocation (not a context's
 * reserve), off the allocation path (a thread's first count is a cold step): init.c's late exit
 * handler. Called at start-up, before anything is counted. */
typedef void gpc_budget_first_fn(void);
void gpc_budget_on_first(gpc_budget_first_fn *fn);
/* The admission rule: `bytes` more on top of `used` stays within `limit` (computed without wrapping). */
bool gpc_budget_fits(uint64_t used, uint64_t bytes, uint64_t limit);
/* What the processes on budget `id` have in use (0 for none); the device's peak follows it. */
uint64_t gpc_budget_in_use(int id);
/* The device's peak of budget `id` (gpc_ledger_peak, and what is in use now). */
uint64_t gpc_budget_peak(int id);
/* Adds every thread's batched allocation and free counts to the ledger (for a report). */
void gpc_budget_flush_counts(void);
/* In a fork child (the lifecycle's sequence, hooks/init.c): the parent's batched counts and what
 * it holds are not the child's. */
void gpc_budget_fork_child(void);
/* A process made by a raw clone (no fork handler ran: it uses its parent's entry and counts) is
 * made another process here, as the fork sequence makes a fork child. One getpid(): for a check
 * that runs at most once a second (charge/live.c). */
void gpc_budget_check_pid(void);
/* Adds `delta` bytes to the part of a budget's use that context reserves make up (figures only). */
void gpc_budget_note_contexts(int id, int64_t delta);
/* The figures of a budget (NULL for GPC_BUDGET_NONE). */
struct gpc_slot *gpc_budget_slot(int id);
/* What this process holds on budget `id` by its own count, kept outside the ledger (for a process
 * moved off a shrunk file: charged exactly that). */
uint64_t gpc_budget_held(int id);
/*
 * Before a figure is read (a memory query, a report, the public API): a ledger file shrunk under
 * this process is noticed and the process moved to a private budget; with `reap`, the shares of
 * dead processes are taken back too (at most every 100 ms per process).
 */
void gpc_budget_refresh(bool reap);
/*
 * Audit mode: admits `bytes` whatever the limit (used may pass it), so that the peak is what the
 * job really needs. 0, or -ENOMEM when the shared ledger cannot be locked (logged).
 */
int gpc_budget_admit_unchecked(int id, uint64_t bytes);
/*
 * Charges `bytes` that the driver already took for this process without being asked (a context
 * grown past its reserve: context.c measures it), whatever the limit: the memory is on the card.
 * If what is leased then passes the limit, every spare on the entry is closed and taken back as
 * for a lowered limit, so nothing more is admitted until what is held fits. Noted as held by this
 * process (give it back with gpc_budget_release_charge). 0, -EAGAIN when the lock was not
 * obtained (logged), -ENOMEM without a ledger entry, -EINVAL for a budget that is not a ledger
 * entry.
 */
int gpc_budget_force(int id, uint64_t bytes);
/*
 * A step that measures what the driver took for this process on budget `id` beyond what was
 * charged, and charges it (gpc_budget_force); budget.c runs it before each locked admission of a
 * request and every POLL_BATCHES batches of a thread. Registered by context.c at start-up (a lower
 * layer calls up only this way); it never waits for another thread measuring.
 */
typedef void gpc_budget_measure_fn(int id, uint64_t in_flight);
void gpc_budget_set_measure(gpc_budget_measure_fn *fn);
/* This thread's admissions on budget `id` as a mark: it moves with every allocation counted (and
 * back with one the driver refused), never with a free; what a repeated denial is told by (charge.c). */
uint32_t gpc_budget_thread_mark(int id);
/* Counts a denial of budget `id` that an admission with GPC_ADMIT_QUIET left to its caller. */
void gpc_budget_count_denial(int id);
/* Counts a denial decided elsewhere (an injected fault) in the budget's figures. */
void gpc_budget_note_denial(int id, uint64_t bytes);

/*
 * The limit in force for budget `id` in this process: the ledger's, bounded under the platform's
 * lock by this process's own (so a limit field raised in the file lifts nothing); 0 for
 * GPC_BUDGET_DENY, GPC_UNLIMITED for GPC_BUDGET_NONE. What admission and the memory queries use.
 */
uint64_t gpc_budget_limit(int id);
/* This process's own limit for budget `id` (its settings, as last applied); GPC_UNLIMITED if none. */
uint64_t gpc_budget_own_limit(int id);
/*
 * After the ledger entry `id` was registered (device.c): `asked` is this process's limit from its
 * settings (the ledger's own record of it wins: a limit set live by `gpucap set-memory`); `binds`:
 * it bounds the ledger's limit field (the platform's lock); `from_file`: it is the settings file's
 * figure (recorded as the file's when none is yet).
 */
void gpc_budget_bind(int id, uint64_t asked, bool binds, bool from_file);
/* The ledger entries this process has a budget on, one bit per entry id (GPC_LEDGER_DEVICES is 32). */
uint32_t gpc_budget_entries(void);
/*
 * Applies a new limit for budget `id` under the entry's lock: this process's own limit becomes
 * `limit`, and so do the asks of the processes that asked for the same figure (all of them when
 * `by` is GPC_LIMIT_BY_CLI; with GPC_LIMIT_FROM_FILE also those that asked the file's figure as last
 * recorded, which becomes `limit`); the ledger's limit is the smallest ask, as at registration. A raise
 * admits at the next grow; a lowering takes every process's spare back and admits nothing more
 * while the leases are above it (nothing held is revoked). The change (from, when, by whom) is
 * recorded in the entry when the limit in force moved. *was / *now (optional): the limit in force
 * before and after. 0, -EINVAL for a budget that is not a ledger entry, -EAGAIN when the lock was
 * not obtained (logged).
 */
int gpc_budget_set_limit(int id, uint64_t limit, unsigned by, uint64_t *was, uint64_t *now);
/* When entry `id`'s change count moved since this process looked: if its leases are above the
 * limit in force, this process gives back whatever it frees until they fit. No lock, no call. */
void gpc_budget_sync(int id);
/*
 * The live signal: words that whoever changes a limit while processes run moves once the change is
 * complete, each process mapping them: GPC_SIGNAL_FILE in the settings file, which each process maps
 * read-only (the generation line gpucap-agent bumps after its rewrite, else the text of the limit's
 * value, which a rewrite of it moves); GPC_SIGNAL_LEDGER the ledger's live_gen, which `gpucap
 * set-memory` bumps. The allocation path compares both with the values this process last saw;
 * when one moved, the admission takes the slow path, whose check (gpc_budget_set_poll) looks at once.
 * A word moved by anyone else (a forged one) only costs extra looks: it carries no limit. Set by
 * charge/live.c.
 */
#define GPC_SIGNAL_FILE 0
#define GPC_SIGNAL_LEDGER 1
struct gpc_budget_signal {
    const _Atomic uint64_t *_Atomic word[2];
    _Atomic uint64_t seen[2];
};
extern struct gpc_budget_signal gpc_budget_signal;
static inline bool gpc_budget_signal_quiet(void)
{
    struct gpc_budget_signal *g = &gpc_budget_signal;
    uint64_t a = atomic_load_explicit(atomic_load_explicit(&g->word[0], memory_order_relaxed), memory_order_relaxed);
    uint64_t b = atomic_load_explicit(atomic_load_explicit(&g->word[1], memory_order_relaxed), memory_order_relaxed);
    return !((a ^ atomic_load_explicit(&g->seen[0], memory_order_relaxed)) |
             (b ^ atomic_load_explicit(&g->seen[1], memory_order_relaxed)));
}
/* Watches `word` (NULL: none) as signal `which` from now on; the next admission looks once. */
void gpc_budget_signal_watch(int which, const _Atomic uint64_t *word);
/* True when signal `which` moved since gpc_budget_signal_seen; *now: its value now (read first, so
 * that a bump during the look that follows is seen at the next admission). */
bool gpc_budget_signal_moved(int which, uint64_t *now);
/* The look for the value `value` of signal `which` is done: admissions take the fast path again. */
void gpc_budget_signal_seen(int which, uint64_t value);

/*
 * The check for changed limits that budget.c runs at its locked steps (before a lease grows, and
 * once more before a denial with `now` true) and every POLL_BATCHES batches of COUNT_BATCH
 * counted events per thread (256 events). Returns true when a limit was changed. Registered by
 * live.c at start-up (a lower layer calls up only this way).
 */
typedef bool gpc_budget_poll_fn(bool now);
void gpc_budget_set_poll(gpc_budget_poll_fn *fn);

#endif
