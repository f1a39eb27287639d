/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.c: admission, by budget leases.
 *
 * A budget is a ledger device entry (ledger.h), in the shared ledger or in a private one. No
 * process admits against the device total one allocation at a time: each holds a lease per device,
 * granted from the total under the entry's robust lock, and admits inside it with one
 * compare-and-swap on a word of its own (its spare: the part of the lease not admitted); a free is
 * one compare-and-swap on the same word. So the allocation path takes no lock, makes no system call
 * and writes no cache line that another process writes.
 *
 * A lease grows by what is asked plus as much again as the process already holds, up to a chunk
 * (1/64 of the limit, at least 2 MiB; a private budget takes the whole limit at once), and gives
 * back what it holds spare beyond two chunks. Before any denial the spare of every process on
 * the ledger is taken back, so a denial means the budget is full of admitted bytes, not of spare.
 *
 * The limit can drop under the leases (a process with a lower limit arrives, a live change:
 * gpc_budget_set_limit). A spare word carries an open bit (ledger.h) that lock holders alone
 * change: the fast path admits only from an open spare. A lowered limit closes every spare first,
 * then takes them all back; if what the processes hold still passes the limit, the spares stay
 * closed (what is freed meanwhile lands in a closed spare) and every admission takes the lock,
 * where the spare is taken back and the request checked against the limit, until the leases fit
 * again and a lock holder opens them. A new share starts closed and is opened by the lock holder
 * that grows it, if the device is open then.
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
 * when it was lowered, which only their frees reduce.
 *
 * Crash safety: a process's share in the total is its lease, which only lock holders write. A dead
 * process's share is its lease, taken back whole (ledger.c), once it is really dead (its memory is
 * freed when its device files close: after its destructors, at a zombie, at an exec). A lock
 * holder that dies leaves the lock to the next locker with EOWNERDEAD: the total is recomputed
 * from the leases, and a take-back of another process's spare that was half done is completed
 * from the journal in the device entry (ledger.c, recover_device); an open bit half set or cleared
 * is set again by the next lock holder's own pass. What is in use (the figures) is the sum of
 * lease - spare over the processes: exact, whatever is spare.
 *
 * The allocation and free counts are batched per thread (64 events) off the shared line, after a
 * thread's first 64, which go in one by one (a process killed loses no count of a short job).
 *
 * The figures count what the driver carried out: the charge steps admit with GPC_ADMIT_DEFER_PEAK
 * and note this process's peak and the timeline after the driver call (gpc_budget_admitted); a
 * request the driver refuses is taken back by gpc_budget_undo, uncounted (a signed batch) and
 * counted as a refusal by the driver. Context reserves are counted apart from the requests. None
 * of this touches the admission argument above: the bytes are admitted and released as before.
 *
 * Live limits (gpc_budget_set_limit, charge/live.c): a limit may change while processes run. A
 * raise admits at once (closed spares open again at that locked step). A lowering, under the lock,
 * goes through gpc_budget_limit_locked: every spare closed, then taken back (point 4), and nothing
 * more admitted while the leases are above it: memory already held stays, and a process that sees
 * the ledger's change count move gives every freed byte back to the total instead of keeping it
 * as spare, until the leases fit again. Under
 * the platform's lock the ledger's limit field is bounded by this process's own limit (its
 * settings, which live.c keeps current): what a tenant writes there can lower, never raise.
 */
#include "core/budget.h"

#include "common/defs.h"
#include "common/ledger.h"
#include "core/ledger_map.h"
#include "core/timeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static struct gpc_slot deny_slot; /* limit 0 */

struct gpc_slot *gpc_budget_slot(int id)
{
    if (id == GPC_BUDGET_DENY)
        return &deny_slot;
    if (id < 0 || !gpc_ledger)
        return NULL;
    return &gpc_ledger->dev[id].slot;
}

/* The timeline records a budget's figure after each change and denial; it never calls back here
 * (one predictable branch when no report is asked for). */
static inline void timeline_note(int id, bool denied)
{
    if (gpc_unlikely(gpc_timeline_on) && id >= 0 && gpc_ledger)
        gpc_timeline_record(id, gpc_budget_in_use(id), denied);
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

/* ---- allocation and free counts, per thread ---- */

#define COUNT_BATCH 64
#define COUNT_THREADS 1024

/*
 * A thread's counts not yet added to the ledger. Only its thread adds to them (plain loads and
 * stores of relaxed atomics); a flush from another thread (at exit) exchanges them. Initial-exec
 * thread-local storage: one instruction to reach, no __tls_get_addr (the library is preloaded, and
 * 392 bytes fit the static TLS glibc keeps for a library opened later).
 */
struct counts {
    _Atomic uint32_t pending;
    bool registered;
    uint8_t batches;    /* batches flushed, for the check of changed limits every POLL_BATCHES */
    uint8_t warmup;     /* events counted one by one so far (up to COUNT_BATCH), see count() */
    uint8_t flush_above; /* a batch goes in when pending passes this: 0 in the warm-up, then COUNT_BATCH - 1 */
    /* At most COUNT_BATCH events between flushes (an uncounted one takes allocs below 0): 16 bits. */
    _Atomic int16_t allocs[GPC_LEDGER_DEVICES], frees[GPC_LEDGER_DEVICES];
    /* Bytes this thread had admitted less those it gave back, since its last flush (gpc_budget_held). */
    _Atomic int64_t held[GPC_LEDGER_DEVICES];
};

static __thread struct counts my_counts __attribute__((tls_model("initial-exec")));
static pthread_key_t counts_key;
static pthread_once_t counts_once = PTHREAD_ONCE_INIT;
static atomic_bool counts_key_ok;
static struct counts *_Atomic count_blocks[COUNT_THREADS];
/* The bytes held that threads flushed (this process's own count, kept outside the ledger). */
static _Atomic int64_t held_flushed[GPC_LEDGER_DEVICES];

/* Adds the counts of block c to the ledger; `own` (c is the calling thread's, or its thread is
 * leaving): its bytes held too, which only their thread may move. */
static void flush(struct counts *c, bool own)
{
    atomic_store_explicit(&c->pending, 0, memory_order_relaxed);
    struct gpc_ledger *l = gpc_ledger;
    for (int id = 0; l && id < GPC_LEDGER_DEVICES; id++) {
        if (own)
            atomic_fetch_add_explicit(&held_flushed[id], atomic_exchange_explicit(&c->held[id], 0, memory_order_relaxed),
                                      memory_order_relaxed);
        if (!atomic_load_explicit(&c->allocs[id], memory_order_relaxed) &&
            !atomic_load_explicit(&c->frees[id], memory_order_relaxed))
            continue;
        /* Signed: an allocation the driver refused is taken out of the batch again (uncount). */
        int32_t a = atomic_exchange_explicit(&c->allocs[id], 0, memory_order_relaxed);
        uint32_t f = (uint32_t)atomic_exchange_explicit(&c->frees[id], 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&l->dev[id].slot.allocs, (uint64_t)(int64_t)a, memory_order_relaxed);
        atomic_fetch_add_explicit(&l->dev[id].slot.frees, f, memory_order_relaxed);
    }
}

/* At thread exit (the key's destructor): its counts go in, its block leaves the list. */
static void thread_gone(void *arg)
{
    struct counts *c = arg;
    flush(c, true);
    for (int i = 0; i < COUNT_THREADS; i++) {
        struct counts *want = c;
        if (atomic_compare_exchange_strong(&count_blocks[i], &want, NULL))
            break;
    }
}

static void counts_key_make(void)
{
    atomic_store_explicit(&counts_key_ok, pthread_key_create(&counts_key, thread_gone) == 0, memory_order_release);
}

static gpc_budget_first_fn *first_cb;
static atomic_bool first_seen;

void gpc_budget_on_first(gpc_budget_first_fn *fn)
{
    first_cb = fn;
}

/* A thread's first count: its block joins the list that the flush at exit walks. */
static void counts_register(struct counts *c)
{
    c->registered = true;
    if (!atomic_exchange(&first_seen, true) && first_cb)
        first_cb();
    pthread_once(&counts_once, counts_key_make);
    if (!atomic_load_explicit(&counts_key_ok, memory_order_acquire))
        return; /* then its counts go in at every batch only */
    for (int i = 0; i < COUNT_THREADS; i++) {
        struct counts *none = NULL;
        if (atomic_compare_exchange_strong(&count_blocks[i], &none, c)) {
            pthread_setspecific(counts_key, c);
            return;
        }
    }
}

static inline void bump(_Atomic int16_t *x)
{
    atomic_store_explicit(x, (int16_t)(atomic_load_explicit(x, memory_order_relaxed) + 1), memory_order_relaxed);
}

/* This thread's count of bytes held on budget id moves by `delta` (admitted: +, given back: -). */
static inline void hold(int id, int64_t delta)
{
    _Atomic int64_t *h = &my_counts.held[id];
    atomic_store_explicit(h, atomic_load_explicit(h, memory_order_relaxed) + delta, memory_order_relaxed);
}



static bool poll(bool now);

/* A thread's batch is full: its counts go in, and every POLL_BATCHES batches (256 counted events
 * of the thread) the cheap check for a changed limit runs, at an allocation (applying a change
 * takes a lock, and a free never waits for one). A thread's first COUNT_BATCH events go in one by
 * one (a batch of one): a process that ends without its exit handlers (SIGKILL, _exit) loses no
 * count of a short job (PyTorch's caching allocator makes few driver allocations), and a long one
 * loses at most a batch per thread. */
#define POLL_BATCHES 4
__attribute__((noinline, cold)) static void batch_done(struct counts *c, bool freed)
{
    if (c->warmup < COUNT_BATCH) {
        if (++c->warmup == COUNT_BATCH)
            c->flush_above = COUNT_BATCH - 1;
        flush(c, true);
        return;
    }
    flush(c, true);
    if (++c->batches >= POLL_BATCHES && !freed) {
        c->batches = 0;
        poll(false);
    }
}

/* Counts an allocation or a free of `bytes` on budget id, and moves this thread's bytes held. */
static inline void count(int id, bool freed, uint64_t bytes)
{
    struct counts *c = &my_counts;
    if (gpc_unlikely(!c->registered))
        counts_register(c);
    bump(freed ? &c->frees[id] : &c->allocs[id]);
    int64_t h = atomic_load_explicit(&c->held[id], memory_order_relaxed);
    atomic_store_explicit(&c->held[id], freed ? h - (int64_t)bytes : h + (int64_t)bytes, memory_order_relaxed);
    atomic_store_explicit(&c->pending, atomic_load_explicit(&c->pending, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (gpc_unlikely(atomic_load_explicit(&c->pending, memory_order_relaxed) > c->flush_above))
        batch_done(c, freed);
}

/* An allocation counted at admission that the driver then refused (the batch may go below 0). */
static void uncount(int id)
{
    struct counts *c = &my_counts;
    atomic_store_explicit(&c->allocs[id], (int16_t)(atomic_load_explicit(&c->allocs[id], memory_order_relaxed) - 1),
                          memory_order_relaxed);
    if (c->warmup < COUNT_BATCH) /* the count went in at once: so does its undoing */
        flush(c, true);
}

void gpc_budget_flush_counts(void)
{
    flush(&my_counts, true);
    for (int i = 0; i < COUNT_THREADS; i++) {
        struct counts *c = atomic_load(&count_blocks[i]);
        if (c && c != &my_counts)
            flush(c, false);
    }
}

/* What this process held on each device when exit began (gpc_budget_note_exit_begins). */
static uint64_t held_when_exiting[GPC_LEDGER_DEVICES];

/* This process's context reserves per device entry (gpc_budget_note_contexts): what it holds at exit
 * apart from its allocations. */
static _Atomic uint64_t own_contexts[GPC_LEDGER_DEVICES];

static void counts_after_fork(void)
{
    /* The parent's counts are the parent's: the child's one thread starts from zero, and the
     * blocks of the parent's other threads are gone. */
    for (int i = 0; i < COUNT_THREADS; i++)
        atomic_store(&count_blocks[i], NULL);
    atomic_store(&my_counts.pending, 0);
    for (int id = 0; id < GPC_LEDGER_DEVICES; id++) {
        atomic_store(&my_counts.allocs[id], 0), atomic_store(&my_counts.frees[id], 0);
        /* The child holds none of its parent's memory. */
        atomic_store(&my_counts.held[id], 0), atomic_store(&held_flushed[id], 0);
        atomic_store(&own_contexts[id], 0);
        held_when_exiting[id] = 0;
    }
    my_counts.registered = false;
    my_counts.warmup = 0;
    my_counts.flush_above = 0;
}

uint64_t gpc_budget_held(int id)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES)
        return 0;
    /* Another thread's figure is read as it stands (its own stores only): an allocation racing
     * with this read is as early or late as the read. */
    int64_t sum = atomic_load(&held_flushed[id]);
    bool mine_seen = false;
    for (int i = 0; i < COUNT_THREADS; i++) {
        struct counts *c = atomic_load(&count_blocks[i]);
        if (c) {
            sum += atomic_load_explicit(&c->held[id], memory_order_relaxed);
            mine_seen |= c == &my_counts;
        }
    }
    if (!mine_seen)
        sum += atomic_load_explicit(&my_counts.held[id], memory_order_relaxed);
    return sum > 0 ? (uint64_t)sum : 0;
}

void gpc_budget_atfork(void)
{
    pthread_atfork(NULL, NULL, counts_after_fork);
}

/* ---- the limit in force ---- */

/* This process's own limit per entry (its settings; live.c keeps it current), and whether it bounds
 * the ledger's (under the platform's lock). */
static _Atomic uint64_t own_limit[GPC_LEDGER_DEVICES];
static atomic_bool own_binds[GPC_LEDGER_DEVICES];
/* The entry's change count when this process last looked (gpc_budget_sync). */
static _Atomic uint16_t seen_changes[GPC_LEDGER_DEVICES];
static gpc_budget_poll_fn *_Atomic poll_fn;
/* The entries this process has a budget on (bit per entry): what the check looks at. */
static _Atomic uint32_t bound_mask;

static inline uint64_t limit_of(const struct gpc_ledger_dev *d, int id)
{
    uint64_t limit = atomic_load_explicit(&d->slot.limit, memory_order_relaxed);
    if (atomic_load_explicit(&own_binds[id], memory_order_relaxed)) {
        uint64_t own = atomic_load_explicit(&own_limit[id], memory_order_relaxed);
        if (own < limit)
            limit = own;
    }
    return limit;
}

uint64_t gpc_budget_limit(int id)
{
    if (id == GPC_BUDGET_DENY)
        return 0;
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger)
        return GPC_UNLIMITED;
    return limit_of(&gpc_ledger->dev[id], id);
}

uint64_t gpc_budget_own_limit(int id)
{
    return id >= 0 && id < GPC_LEDGER_DEVICES ? atomic_load(&own_limit[id]) : GPC_UNLIMITED;
}

void gpc_budget_set_poll(gpc_budget_poll_fn *fn)
{
    atomic_store(&poll_fn, fn);
}

static bool poll(bool now)
{
    gpc_budget_poll_fn *fn = atomic_load_explicit(&poll_fn, memory_order_relaxed);
    return fn ? fn(now) : false;
}

/* ---- leases ---- */

/* Spare that this process keeps before giving some back, per device entry (set when its lease
 * grows): two chunks in a shared ledger, never in a private budget. */
static _Atomic uint64_t keep_at_most[GPC_LEDGER_DEVICES];
#define CHUNK_MIN (UINT64_C(2) << 20)

static uint64_t chunk_of(uint64_t limit)
{
    uint64_t c = limit / 64;
    return c > CHUNK_MIN ? c : CHUNK_MIN;
}

/*
 * The fast path: takes `bytes` from the spare of share s, if the spare is open. True when
 * admitted. One comparison tests both: with the open bit set the low 48 bits are at least
 * GPC_SPARE_OPEN + bytes exactly when the spare (47 bits) is at least `bytes`; closed, never.
 */
static inline bool take_spare(struct gpc_ledger_share *s, uint64_t bytes, uint64_t *after)
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

/* This process's peak, after an admission left the spare word at `after`. */
static inline void note_peak(struct gpc_ledger_share *s, uint64_t after)
{
    uint64_t lease = atomic_load_explicit(&s->lease, memory_order_acquire);
    uint64_t now = atomic_load_explicit(&s->spare, memory_order_relaxed);
    /* A lock holder changed the lease meanwhile: it notes the peak itself. */
    if (((now ^ after) >> GPC_SPARE_BITS) | ((now >> GPC_SPARE_BITS) & 1))
        return;
    uint64_t spare = now & GPC_SPARE_MASK, in_use = lease > spare ? lease - spare : 0;
    if (in_use > atomic_load_explicit(&s->peak, memory_order_relaxed))
        max_into(&s->peak, in_use);
}

/*
 * Under device id's lock: grows share s by `grow` bytes, of which `bytes` are admitted at once and
 * the rest is spare. The generation is odd while lease and spare change together.
 */
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
        note_peak(s, w);
}

/*
 * Under the lock of d: takes the spare of share s (of process entry `victim`) down to `keep`, and
 * its lease and d's total down by as much. Returns what it took.
 */
static uint64_t take_back(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, int victim, uint64_t keep)
{
    uint64_t w = atomic_load_explicit(&s->spare, memory_order_relaxed), after;
    do {
        if ((w & GPC_SPARE_MASK) <= keep)
            return 0;
        after = (w & ~GPC_SPARE_MASK) + GPC_SPARE_GEN + keep; /* odd: lease and spare change */
        /* The journal first: if this process dies past the compare-and-swap, the next locker
         * finishes the take from it (ledger.c). */
        atomic_store_explicit(&d->victim_spare, w, memory_order_relaxed);
        atomic_store_explicit(&d->victim_spare_after, after, memory_order_relaxed);
        atomic_store_explicit(&d->victim_lease, atomic_load_explicit(&s->lease, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&d->victim, victim + 1, memory_order_release);
        GPC_CRASH_POINT(5);
    } while (!atomic_compare_exchange_weak_explicit(&s->spare, &w, after, memory_order_acq_rel, memory_order_relaxed));
    GPC_CRASH_POINT(6);
    /* Never below zero: spare above the lease is no lease to give back (ledger.c never leaves one,
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

static inline int entry_index(const struct gpc_ledger *l, const struct gpc_ledger_proc *p)
{
    return (int)(p - l->proc);
}

/* Under the lock: takes back the spare of every process on device entry d of l. */
static void take_all_spare(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    int id = (int)(d - l->dev);
    uint32_t n = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < n && i < GPC_LEDGER_PROCS; i++)
        if (atomic_load_explicit(&l->proc[i].pid, memory_order_relaxed) != 0)
            take_back(d, &l->proc[i].share[id], (int)i, 0);
}

/* Under the lock: sets (open) or clears the open bit of every share on device entry d of l. Only
 * lock holders change the bit; each change is a compare-and-swap that keeps the rest of the word. */
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

/*
 * Under the lock, after anything that may have lowered the leases: spares closed under a lowered
 * limit open again once the leases fit under it.
 */
static inline void reopen_if_fits(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    if (gpc_unlikely(atomic_load_explicit(&d->closed, memory_order_relaxed)) &&
        atomic_load_explicit(&d->slot.leased, memory_order_relaxed) <=
            atomic_load_explicit(&d->slot.limit, memory_order_relaxed))
        set_open(l, d, true);
}

void gpc_budget_limit_locked(struct gpc_ledger *l, struct gpc_ledger_dev *d, uint64_t limit)
{
    uint64_t leased = atomic_load_explicit(&d->slot.leased, memory_order_relaxed);
    if (leased > limit) {
        /* Closed first, so that no spare is admitted from while it is taken back (a release
         * landing meanwhile stays spare, closed), then the limit, then the spares. */
        set_open(l, d, false);
        atomic_store_explicit(&d->slot.limit, limit, memory_order_relaxed);
        take_all_spare(l, d);
    } else {
        atomic_store_explicit(&d->slot.limit, limit, memory_order_relaxed);
    }
    /* What the processes hold may still pass the limit: closed until what they free brings the
     * leases under it (reserve_slow takes the freed spare back before it admits anything). */
    reopen_if_fits(l, d);
}


/* Under the lock: grows this process's lease enough to admit `bytes` at once. True if it did. */
static bool grow(struct gpc_ledger_dev *d, struct gpc_ledger_share *s, int id, uint64_t bytes, unsigned how)
{
    bool unchecked = how & GPC_ADMIT_UNCHECKED;
    uint64_t limit = limit_of(d, id);
    uint64_t leased = atomic_load_explicit(&d->slot.leased, memory_order_relaxed);
    uint64_t by = bytes;
    if (!unchecked && !gpc_budget_fits(leased, bytes, limit))
        return false;
    if (!gpc_ledger_shared) {
        /* A private budget has nobody to share with: all of it at once. */
        by = limit > leased && limit - leased > bytes ? limit - leased : bytes;
        atomic_store_explicit(&keep_at_most[id], UINT64_MAX, memory_order_relaxed);
    } else if (!unchecked) {
        /* Spare in proportion to what the process already holds, up to a chunk: a process that
         * allocates once (a crowd starting) leases what it asks for, one that allocates often
         * soon leases a chunk ahead. */
        uint64_t chunk = chunk_of(limit), lease = atomic_load_explicit(&s->lease, memory_order_relaxed);
        uint64_t ahead = lease < chunk ? lease : chunk;
        if (ahead && gpc_budget_fits(leased, bytes + ahead, limit) && bytes + ahead > bytes)
            by = bytes + ahead;
        atomic_store_explicit(&keep_at_most[id], 2 * chunk, memory_order_relaxed);
    }
    if (by > GPC_SPARE_MASK)
        by = bytes; /* the spare field's 47 bits (128 TiB) */
    lease_grow(d, s, by, bytes, !(how & GPC_ADMIT_DEFER_PEAK));
    /* A share starts closed (ledger.c): it opens here, under the lock, while the device is open. */
    if (gpc_unlikely(!(atomic_load_explicit(&s->spare, memory_order_relaxed) & GPC_SPARE_OPEN)) &&
        !atomic_load_explicit(&d->closed, memory_order_relaxed))
        atomic_fetch_or_explicit(&s->spare, GPC_SPARE_OPEN, memory_order_acq_rel);
    return true;
}

#define LOCK_TRIES 5

/* Admission that the spare could not make: under the lock, grow the lease; if the budget is
 * leased out, take back everyone's spare and try again; then reap dead processes once. */
static int reserve_locked(int id, uint64_t bytes, unsigned how)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!gpc_ledger_me())
            return -ENOMEM; /* claimed before the lock: a claim may lock devices itself */
        /* A crowd starting at once on few cores can keep a holder off the CPU past one bound: the
         * wait is repeated a few times (quietly but for the last) before the allocation is denied. */
        struct gpc_ledger_dev *d = NULL;
        for (int wait = 0; wait < LOCK_TRIES && !d; wait++)
            d = gpc_ledger_lock_dev(id, wait < LOCK_TRIES - 1 ? NULL : "the allocation is denied");
        if (!d)
            return -ENOMEM;
        /* After the lock: a ledger rebuilt or moved is the one to use, with this process's entry there. */
        struct gpc_ledger *l = gpc_ledger;
        struct gpc_ledger_proc *me = gpc_ledger_me();
        bool ok = false;
        if (me && entry_index(l, me) >= 0 && entry_index(l, me) < GPC_LEDGER_PROCS) {
            struct gpc_ledger_share *s = &me->share[id];
            uint64_t after;
            ok = take_spare(s, bytes, &after); /* another thread of ours grew it meanwhile */
            if (ok && !(how & GPC_ADMIT_DEFER_PEAK))
                note_peak(s, after);
            if (!ok)
                ok = grow(d, s, id, bytes, how);
            if (!ok) {
                take_all_spare(l, d);
                ok = grow(d, s, id, bytes, how & ~GPC_ADMIT_UNCHECKED);
            }
            reopen_if_fits(l, d);
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

/* Admission past the spare: a locked step, so a changed limit is looked for first (rate-limited),
 * and before a denial at once (a raise not seen yet admits now). */
static int reserve_slow(int id, uint64_t bytes, unsigned how)
{
    poll(false);
    uint64_t limit = gpc_budget_limit(id);
    int rc = reserve_locked(id, bytes, how);
    /* Tried again when the limit in force moved meanwhile, whichever thread applied it. */
    if (rc != 0 && (poll(true) || gpc_budget_limit(id) != limit))
        rc = reserve_locked(id, bytes, how);
    return rc;
}

int gpc_budget_admit(int id, uint64_t bytes, unsigned how)
{
    if (id == GPC_BUDGET_NONE)
        return 0;
    int rc = -ENOMEM;
    if (id >= 0) {
        gpc_ledger_check_broken();
        struct gpc_ledger_proc *me = gpc_ledger_me();
        uint64_t after;
        if (gpc_likely(me != NULL)) {
            struct gpc_ledger_share *s = &me->share[id];
            if (gpc_likely(take_spare(s, bytes, &after))) {
                if (!(how & GPC_ADMIT_DEFER_PEAK))
                    note_peak(s, after);
                rc = 0;
            } else {
                rc = reserve_slow(id, bytes, how);
            }
        }
        if (gpc_unlikely(rc != 0 && atomic_load_explicit(&gpc_ledger_broken, memory_order_relaxed))) {
            /* The file was shrunk during this call (its figures read as zeros): admit on the
             * private budget that this process moves to now. */
            gpc_ledger_check_broken();
            rc = reserve_slow(id, bytes, how);
        }
    }
    struct gpc_slot *slot = gpc_budget_slot(id);
    if (gpc_unlikely(!slot)) /* not reached: id is a ledger entry or DENY (the compiler cannot tell) */
        return rc;
    /* A context reserve is no request of the program: not in the allocations, nor the largest. */
    bool request = !(how & GPC_ADMIT_CONTEXT);
    if (gpc_unlikely(request && bytes > atomic_load_explicit(&slot->largest, memory_order_relaxed)))
        max_into(&slot->largest, bytes);
    if (gpc_unlikely(rc != 0)) {
        if (!(how & GPC_ADMIT_RETRY))
            count_denial(slot);
        timeline_note(id, true);
        return rc;
    }
    if (gpc_likely(request)) {
        count(id, false, bytes);
    } else if (id >= 0) {
        hold(id, (int64_t)bytes);
        atomic_fetch_add_explicit(&gpc_ledger->dev[id].context_count, 1, memory_order_relaxed);
    }
    /* A deferred admission is in the timeline once the driver carried it out (gpc_budget_admitted). */
    if (!(how & GPC_ADMIT_DEFER_PEAK))
        timeline_note(id, false);
    return 0;
}

int gpc_budget_reserve(int id, uint64_t bytes)
{
    return gpc_budget_admit(id, bytes, 0);
}

void gpc_budget_admitted(int id)
{
    struct gpc_ledger_proc *me = id >= 0 ? gpc_ledger_me() : NULL;
    if (gpc_unlikely(!me))
        return;
    /* As at admission: the pair read now, unless a lock holder is changing it (it notes the peak). */
    struct gpc_ledger_share *s = &me->share[id];
    note_peak(s, atomic_load_explicit(&s->spare, memory_order_relaxed));
    timeline_note(id, false);
}

/* When the spare has grown past what a process keeps: gives some back, if the lock is free now (a
 * free never waits; the spare stays this process's, and is taken back before any denial). */
static void give_back_spare(int id)
{
    struct gpc_ledger_dev *d = gpc_ledger_trylock_dev(id);
    if (!d)
        return;
    struct gpc_ledger *l = gpc_ledger;
    struct gpc_ledger_proc *me = atomic_load_explicit(&gpc_ledger_entry, memory_order_relaxed);
    if (me && entry_index(l, me) >= 0 && entry_index(l, me) < GPC_LEDGER_PROCS) {
        uint64_t limit = limit_of(d, id);
        struct gpc_ledger_share *s = &me->share[id];
        /* Above a lowered limit nothing is kept: what is freed goes back to the total. */
        bool over = atomic_load_explicit(&keep_at_most[id], memory_order_relaxed) == 0;
        take_back(d, s, entry_index(l, me), over ? 0 : chunk_of(limit));
        if (over && atomic_load_explicit(&d->slot.leased, memory_order_relaxed) <= limit)
            atomic_store_explicit(&keep_at_most[id], gpc_ledger_shared ? 2 * chunk_of(limit) : UINT64_MAX,
                                  memory_order_relaxed);
        reopen_if_fits(l, d);
    }
    gpc_ledger_unlock(d);
}

static inline __attribute__((always_inline)) void give_back(int id, uint64_t bytes, bool freed)
{
    gpc_ledger_check_broken();
    struct gpc_ledger_proc *me = gpc_ledger_me();
    if (!me)
        return; /* logged; this process holds no lease */
    struct gpc_ledger_share *s = &me->share[id];
    uint64_t w = atomic_load_explicit(&s->spare, memory_order_relaxed), spare;
    do {
        /* Never above the lease, whatever a caller does: spare past it would admit past it. */
        uint64_t lease = atomic_load_explicit(&s->lease, memory_order_acquire);
        spare = (w & GPC_SPARE_MASK) + bytes;
        if (spare > lease)
            spare = lease;
    } while (!atomic_compare_exchange_weak_explicit(&s->spare, &w, (w & ~GPC_SPARE_MASK) | spare,
                                                    memory_order_release, memory_order_relaxed));
    if (freed)
        count(id, true, bytes);
    else
        hold(id, -(int64_t)bytes);
    timeline_note(id, false);
    if (gpc_unlikely(spare > atomic_load_explicit(&keep_at_most[id], memory_order_relaxed)))
        give_back_spare(id);
}

void gpc_budget_release(int id, uint64_t bytes)
{
    if (id >= 0)
        give_back(id, bytes, true);
}

void gpc_budget_give_back(int id, uint64_t bytes)
{
    if (id >= 0)
        give_back(id, bytes, false);
}

void gpc_budget_undo(int id, uint64_t bytes, unsigned how)
{
    if (id < 0)
        return;
    give_back(id, bytes, false);
    if (!(how & GPC_ADMIT_CONTEXT))
        uncount(id);
    else
        atomic_fetch_sub_explicit(&gpc_ledger->dev[id].context_count, 1, memory_order_relaxed);
    if (how & GPC_UNDO_DRIVER)
        atomic_fetch_add_explicit(&gpc_ledger->dev[id].refused_driver, 1, memory_order_relaxed);
}

/* Allocations this process holds on device entry id: a context's reserve is no allocation the
 * program failed to free. */
static uint64_t allocations_held(const struct gpc_ledger_proc *me, int id)
{
    uint64_t held = gpc_ledger_share_in_use(&me->share[id]), ctx = atomic_load(&own_contexts[id]);
    return held > ctx ? held - ctx : 0;
}

void gpc_budget_note_exit_begins(void)
{
    struct gpc_ledger_proc *me = atomic_load(&gpc_ledger_entry);
    for (int id = 0; me && gpc_ledger && id < GPC_LEDGER_DEVICES; id++)
        held_when_exiting[id] = allocations_held(me, id);
}

void gpc_budget_note_exit(void)
{
    struct gpc_ledger_proc *me = atomic_load(&gpc_ledger_entry);
    for (int id = 0; me && gpc_ledger && id < GPC_LEDGER_DEVICES; id++) {
        uint64_t held = allocations_held(me, id);
        if (held_when_exiting[id] > held)
            held = held_when_exiting[id];
        if (held)
            atomic_fetch_add_explicit(&gpc_ledger->dev[id].held_at_exit, held, memory_order_relaxed);
    }
}

/* ---- live limits ---- */

void gpc_budget_bind(int id, uint64_t asked, bool binds)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger)
        return;
    struct gpc_ledger_proc *me = atomic_load(&gpc_ledger_entry);
    uint64_t mine = gpc_ledger_shared && me ? atomic_load(&me->share[id].limit) : 0;
    atomic_store(&own_limit[id], mine ? mine : asked);
    atomic_store(&seen_changes[id], atomic_load(&gpc_ledger->dev[id].limit_changes));
    atomic_store(&own_binds[id], binds);
    atomic_fetch_or(&bound_mask, UINT32_C(1) << id);
}

uint32_t gpc_budget_entries(void)
{
    return atomic_load_explicit(&bound_mask, memory_order_relaxed);
}

int gpc_budget_set_limit(int id, uint64_t limit, unsigned by, uint64_t *was, uint64_t *now)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger)
        return -EINVAL;
    gpc_ledger_me(); /* before the lock: a claim may take device locks */
    struct gpc_ledger_dev *d = gpc_ledger_lock_dev(id, "the budget changes at the next check");
    if (!d)
        return -EAGAIN;
    struct gpc_ledger *l = gpc_ledger;
    struct gpc_ledger_proc *mp = atomic_load(&gpc_ledger_entry);
    int me = mp && entry_index(l, mp) >= 0 && entry_index(l, mp) < GPC_LEDGER_PROCS ? entry_index(l, mp) : -1;
    uint64_t before = limit_of(d, id), ledger_before = atomic_load(&d->slot.limit);
    uint64_t old_own = atomic_load(&own_limit[id]);
    /* The processes that asked for what this one asked for read the same settings: they ask for
     * the new figure now (each checks it against its own settings at its next check). A request
     * of `gpucap set-memory` is for every process. The smallest ask of those holding an entry
     * stays the ledger's limit, as at registration. */
    uint64_t lowest = limit;
    uint32_t n = atomic_load(&l->procs_used);
    for (uint32_t i = 0; gpc_ledger_shared && i < n && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_share *s = &l->proc[i].share[id];
        if (atomic_load(&l->proc[i].pid) == 0)
            continue;
        uint64_t theirs = atomic_load(&s->limit);
        if (theirs == 0)
            continue;
        if ((int)i == me || by == GPC_LIMIT_BY_CLI || theirs == old_own)
            atomic_store(&s->limit, theirs = limit);
        if (theirs < lowest)
            lowest = theirs;
    }
    atomic_store(&own_limit[id], limit);
    /* Applied at once: lowered, every spare is closed and taken back before anything more is
     * admitted (the argument's point 4); raised, closed spares open if the leases fit. */
    gpc_budget_limit_locked(l, d, lowest);
    uint64_t after = limit_of(d, id);
    if (lowest != ledger_before || after != before) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        atomic_store(&d->limit_was, before);
        atomic_store(&d->limit_changed_s, (uint32_t)ts.tv_sec);
        atomic_store(&d->limit_by, by);
        atomic_fetch_add(&d->limit_changes, 1);
    }
    if (by == GPC_LIMIT_BY_CLI)
        atomic_store(&d->limit_by, GPC_LIMIT_BY_CLI | GPC_LIMIT_HELD);
    if (after < before) {
        /* No lock-free admission is left above the new limit; what is held stays. */
        take_all_spare(l, d);
        bool over = atomic_load(&d->slot.leased) > after;
        atomic_store(&keep_at_most[id], over ? 0 : gpc_ledger_shared ? 2 * chunk_of(after) : UINT64_MAX);
    }
    atomic_store(&seen_changes[id], atomic_load(&d->limit_changes));
    gpc_ledger_note_limit(id);
    gpc_ledger_unlock(d);
    if (was)
        *was = before;
    if (now)
        *now = after;
    return 0;
}

void gpc_budget_sync(int id)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger)
        return;
    struct gpc_ledger_dev *d = &gpc_ledger->dev[id];
    uint16_t changes = atomic_load_explicit(&d->limit_changes, memory_order_relaxed);
    if (changes == atomic_load_explicit(&seen_changes[id], memory_order_relaxed))
        return;
    atomic_store(&seen_changes[id], changes);
    gpc_ledger_note_limit(id);
    /* Lowered below what is leased: what this process frees goes back to the total. */
    if (atomic_load(&d->slot.leased) > limit_of(d, id))
        atomic_store(&keep_at_most[id], 0);
}

/* ---- audit mode and fault injection (asked for by `gpucap`; see charge.c) ---- */

int gpc_budget_reserve_unchecked(int id, uint64_t bytes)
{
    if (id < 0)
        return 0;
    return gpc_budget_admit(id, bytes, GPC_ADMIT_UNCHECKED);
}

void gpc_budget_note_denial(int id, uint64_t bytes)
{
    struct gpc_slot *s = gpc_budget_slot(id);
    if (!s)
        return;
    max_into(&s->largest, bytes);
    count_denial(s);
    timeline_note(id, true);
}

void gpc_budget_note_contexts(int id, int64_t delta)
{
    struct gpc_slot *s = gpc_budget_slot(id);
    if (s && id >= 0) {
        atomic_fetch_add_explicit(&s->contexts, (uint64_t)delta, memory_order_relaxed);
        if (id < GPC_LEDGER_DEVICES)
            atomic_fetch_add_explicit(&own_contexts[id], (uint64_t)delta, memory_order_relaxed);
    }
}

#ifdef GPC_CRASH_POINTS
#include <signal.h>
#include <stdlib.h>

void gpc_crash_point(int n)
{
    static int at = -1;
    if (at < 0) {
        const char *e = getenv("GPC_TEST_CRASH_AT");
        at = e ? atoi(e) : 0;
    }
    if (n == at)
        raise(SIGKILL);
}
#endif

/* ---- figures ---- */

uint64_t gpc_budget_in_use(int id)
{
    if (id < 0 || !gpc_ledger)
        return 0;
    uint64_t in_use = gpc_ledger_in_use(gpc_ledger, id);
    max_into(&gpc_ledger->dev[id].slot.peak, in_use); /* the device's peak: the sums seen */
    return in_use;
}

uint64_t gpc_budget_peak(int id)
{
    if (id < 0 || !gpc_ledger)
        return 0;
    uint64_t in_use = gpc_budget_in_use(id), peak = gpc_ledger_peak(gpc_ledger, id);
    return peak > in_use ? peak : in_use;
}
