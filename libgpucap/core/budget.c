/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.c: admission, by budget leases (core/lease.c: the words, and the argument why nothing is
 * admitted past the limit in force).
 *
 * The allocation path is gpc_budget_admit and gpc_budget_release: inside this process's lease one
 * compare-and-swap on its spare word (lease.h's inline steps), then the counts. Past the spare, a
 * locked step (reserve_locked): under the device entry's lock (core/ledger_map.h) the lease grows
 * (gpc_lease_grow); when the budget is leased out, every process's spare is taken back and the
 * grow tried again; then dead processes are reaped once before the denial. Before a locked step a
 * changed limit is looked for and what the driver took unasked is measured, each through a step
 * that a higher layer registered (gpc_budget_set_poll: charge/live.c; gpc_budget_set_measure:
 * charge/context.c). A release that leaves more spare than this process keeps gives some back at
 * once, if the lock is free (a free never waits).
 *
 * The allocation and free counts are batched per thread (COUNT_BATCH events) off the shared line,
 * after a thread's first COUNT_BATCH, which go in one by one (a process killed loses no count of a
 * short job), and every POLL_BATCHES batches (256 counted events of a thread) the cheap check for a changed
 * limit runs. The figures count what the driver carried out: the charge steps admit with
 * GPC_ADMIT_DEFER_PEAK and note this process's peak and the timeline after the driver call
 * (gpc_budget_admitted); a request the driver refuses is taken back by gpc_budget_release_refused,
 * uncounted (a signed batch) and counted as a refusal by the driver. Context reserves are counted
 * apart from the requests. None of this touches the admission argument: the bytes are admitted and
 * released as lease.c says.
 *
 * Live limits (gpc_budget_set_limit, charge/live.c): a limit may change while processes run. A
 * raise admits at once (closed spares open again at that locked step). A lowering goes through
 * gpc_lease_set_limit under the lock: every spare closed, then taken back, and nothing more
 * admitted while the leases are above it: memory already held stays, and a process that sees the
 * entry's change count move gives every freed byte back to the total instead of keeping it as
 * spare, until the leases fit again. Under the platform's lock the entry's limit field is bounded
 * by this process's own limit (its settings, which live.c keeps current): what a tenant writes
 * there can lower, never raise.
 *
 * The live signal (gpc_budget_signal): before the spare is taken, the allocation path compares two
 * words that a writer of a live change moves once it is complete (the settings file's, the
 * ledger's) with what this process last saw, one load each; when one moved, the admission takes the
 * slow path, which applies the change first (poll), and admits nothing while a signalled change
 * could not be applied. So a completed change binds the next admission of every process, its
 * lock-free ones too, whichever process applies it under the lock (core/lease.c, point 4).
 *
 * This process's own count of what it holds on each budget (gpc_budget_held) is kept outside the
 * ledger, in the per-thread counts, so that a process moved off a shrunk file is charged exactly
 * that (the ledger takes it as gpc_ledger_recover's argument).
 */
#include "core/budget.h"

#include "common/defs.h"
#include "common/ledger.h"
#include "core/lease.h"
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

/* A file shrunk under this process (core/ledger_map.h): it moves to a private budget charged what it
 * holds by its own count (gpc_budget_held). Checked on the shared path only, and never on the fast
 * path: the zero pages that replace a shrunk file hold a closed spare, so an admission there takes
 * the slow path, which checks; a release that lands there is lost to a mapping nobody counts, and
 * the private budget is charged by the count, which the free already lowered. */
static inline void check_broken(void)
{
    if (gpc_unlikely(gpc_ledger_shared && atomic_load_explicit(&gpc_ledger_broken, memory_order_relaxed)))
        gpc_ledger_recover(gpc_budget_held);
}

void gpc_budget_refresh(bool reap)
{
    gpc_ledger_probe();
    check_broken();
    if (reap)
        gpc_ledger_reap_lazy();
}

/* The timeline records a budget's figure after each change and denial; it never calls back here
 * (one predictable branch when no report is asked for). */
static inline void timeline_note(int id, bool denied)
{
    if (gpc_unlikely(gpc_timeline_on) && id >= 0 && gpc_ledger)
        gpc_timeline_record(id, gpc_budget_in_use(id), denied);
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
    return gpc_lease_fits(used, bytes, limit);
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
    uint16_t flushes;   /* this thread's own flushes (gpc_budget_thread_mark) */
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
    if (own)
        c->flushes++;
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
static void measure(int id, uint64_t in_flight);
static void measure_all(int id, uint64_t in_flight);
static _Atomic uint32_t bound_mask; /* (below, with the live limits) */

/* A thread's batch is full: its counts go in, and every POLL_BATCHES batches (256 counted events
 * of the thread) the cheap check for a changed limit runs, at an allocation (applying a change
 * takes a lock, and a free never waits for one). A thread's first COUNT_BATCH events go in one by
 * one (a batch of one): a process that ends without its exit handlers (SIGKILL, _exit) loses no
 * count of a short job (PyTorch's caching allocator makes few driver allocations), and a long one
 * loses at most a batch per thread. */
#define POLL_BATCHES 4
__attribute__((noinline, cold)) static void batch_done(struct counts *c, bool freed, int id, uint64_t bytes)
{
    flush(c, true);
    /* The warm-up's COUNT_BATCH events are one batch for the checks below, as before it. */
    if (c->warmup < COUNT_BATCH) {
        if (++c->warmup < COUNT_BATCH)
            return;
        c->flush_above = COUNT_BATCH - 1;
    }
    if (++c->batches >= POLL_BATCHES && !freed) {
        c->batches = 0;
        poll(false);
        /* A private budget leases its whole limit at once and so has no locked step to measure
         * at: it measures here, the allocation being counted (not on the card yet) left out. */
        measure_all(id, bytes);
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
        batch_done(c, freed, id, bytes);
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

void gpc_budget_fork_child(void)
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

void gpc_budget_check_pid(void)
{
    if (gpc_unlikely(gpc_ledger_pid_changed())) {
        /* A raw clone child: another process, as a fork child is (its counts start from zero). */
        gpc_ledger_forget();
        gpc_budget_fork_child();
    }
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

/* ---- the limit in force ---- */

/* The entry's change count when this process last looked (gpc_budget_sync). */
static _Atomic uint16_t seen_changes[GPC_LEDGER_DEVICES];
static gpc_budget_poll_fn *_Atomic poll_fn;

uint64_t gpc_budget_limit(int id)
{
    if (id == GPC_BUDGET_DENY)
        return 0;
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger)
        return GPC_UNLIMITED;
    return gpc_lease_limit(&gpc_ledger->dev[id], id);
}

uint64_t gpc_budget_own_limit(int id)
{
    return gpc_lease_own_limit(id);
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

static gpc_budget_measure_fn *_Atomic measure_fn;

void gpc_budget_set_measure(gpc_budget_measure_fn *fn)
{
    atomic_store(&measure_fn, fn);
}

/* The registered measure of what the driver took unasked (context.c), before a locked step:
 * `in_flight` bytes of this process on budget `id` are admitted and not yet on the card. */
static void measure(int id, uint64_t in_flight)
{
    gpc_budget_measure_fn *fn = atomic_load_explicit(&measure_fn, memory_order_relaxed);
    if (fn && id >= 0)
        fn(id, in_flight);
}

/* The measuring step of every budget of this process (a batch made it due; `in_flight` bytes on
 * budget `id` are the allocation being counted). */
static void measure_all(int id, uint64_t in_flight)
{
    for (uint32_t m = atomic_load_explicit(&bound_mask, memory_order_relaxed); m; m &= m - 1) {
        int b = __builtin_ctz(m);
        measure(b, b == id ? in_flight : 0);
    }
}

/* ---- the live signal ---- */

/* No writer: a word that never moves. */
static const _Atomic uint64_t no_signal;
struct gpc_budget_signal gpc_budget_signal = {.word = {&no_signal, &no_signal}};

void gpc_budget_signal_watch(int which, const _Atomic uint64_t *word)
{
    word = word ? word : &no_signal;
    /* Moved for the next admission: it looks once, whatever the word says now. */
    atomic_store(&gpc_budget_signal.seen[which], ~atomic_load(word));
    atomic_store(&gpc_budget_signal.word[which], word);
}

bool gpc_budget_signal_moved(int which, uint64_t *now)
{
    *now = atomic_load_explicit(atomic_load_explicit(&gpc_budget_signal.word[which], memory_order_relaxed),
                                memory_order_acquire);
    return *now != atomic_load_explicit(&gpc_budget_signal.seen[which], memory_order_relaxed);
}

void gpc_budget_signal_seen(int which, uint64_t value)
{
    atomic_store_explicit(&gpc_budget_signal.seen[which], value, memory_order_relaxed);
}

/* ---- admission ---- */

static inline int entry_index(const struct gpc_ledger *l, const struct gpc_ledger_proc *p)
{
    return (int)(p - l->proc);
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
            bool peak = !(how & GPC_ADMIT_DEFER_PEAK), unchecked = how & GPC_ADMIT_UNCHECKED;
            ok = gpc_lease_take(s, bytes, &after); /* another thread of ours grew it meanwhile */
            if (ok && peak)
                gpc_lease_note_peak(s, after);
            if (!ok)
                ok = gpc_lease_grow(d, s, id, bytes, unchecked, peak);
            if (!ok) {
                gpc_lease_take_all(l, d);
                ok = gpc_lease_grow(d, s, id, bytes, false, peak);
            }
            gpc_lease_reopen(l, d);
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
#define LOOK_TRIES 3

static int reserve_slow(int id, uint64_t bytes, unsigned how)
{
    check_broken();
    poll(false);
    /* A change signalled and not applied yet (its look was torn, or a lock was not obtained):
     * nothing is admitted past it under the limit it replaces; looked at again, then denied. */
    for (int i = 0; gpc_unlikely(!gpc_budget_signal_quiet()); i++) {
        if (i == LOOK_TRIES)
            return -ENOMEM;
        poll(true);
    }
    /* Nothing new (a pool serving from what it keeps): admitted whatever the limit, above a
     * lowered one too. */
    if (gpc_unlikely(bytes == 0))
        return 0;
    if (!(how & GPC_ADMIT_CONTEXT))
        measure(id, 0);
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
        struct gpc_ledger_proc *me = gpc_ledger_me();
        uint64_t after;
        if (gpc_likely(me != NULL)) {
            struct gpc_ledger_share *s = &me->share[id];
            /* One load for the live signal: a limit that may have changed is looked at (the slow
             * path) before anything more is admitted, from the spare too. */
            if (gpc_likely(gpc_budget_signal_quiet() && gpc_lease_take(s, bytes, &after))) {
                if (!(how & GPC_ADMIT_DEFER_PEAK))
                    gpc_lease_note_peak(s, after);
                rc = 0;
            } else {
                rc = reserve_slow(id, bytes, how);
            }
        }
        if (gpc_unlikely(rc != 0 && atomic_load_explicit(&gpc_ledger_broken, memory_order_relaxed))) {
            /* The file was shrunk during this call (its figures read as zeros): admit on the
             * private budget that this process moves to now. */
            check_broken();
            rc = reserve_slow(id, bytes, how);
        }
    }
    struct gpc_slot *slot = gpc_budget_slot(id);
    if (gpc_unlikely(!slot)) /* not reached: id is a ledger entry or DENY (the compiler cannot tell) */
        return rc;
    /* A context reserve is no request of the program: not in the allocations, nor the largest. */
    bool request = !(how & GPC_ADMIT_CONTEXT);
    if (gpc_unlikely(request && bytes > atomic_load_explicit(&slot->largest, memory_order_relaxed)))
        gpc_atomic_max(&slot->largest, bytes);
    if (gpc_unlikely(rc != 0)) {
        if (!(how & GPC_ADMIT_QUIET))
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

void gpc_budget_admitted(int id)
{
    struct gpc_ledger_proc *me = id >= 0 ? gpc_ledger_me() : NULL;
    if (gpc_unlikely(!me))
        return;
    /* As at admission: the pair read now, unless a lock holder is changing it (it notes the peak). */
    struct gpc_ledger_share *s = &me->share[id];
    gpc_lease_note_peak(s, atomic_load_explicit(&s->spare, memory_order_relaxed));
    timeline_note(id, false);
}

/* When the spare has grown past what a process keeps: gives some back to the total, if the lock is
 * free now (a free never waits; the spare stays this process's, and is taken back before any
 * denial). */
static void release_spare(int id)
{
    struct gpc_ledger_dev *d = gpc_ledger_trylock_dev(id);
    if (!d)
        return;
    struct gpc_ledger *l = gpc_ledger;
    struct gpc_ledger_proc *me = atomic_load_explicit(&gpc_ledger_entry, memory_order_relaxed);
    if (me && entry_index(l, me) >= 0 && entry_index(l, me) < GPC_LEDGER_PROCS) {
        uint64_t limit = gpc_lease_limit(d, id);
        struct gpc_ledger_share *s = &me->share[id];
        /* Above a lowered limit nothing is kept: what is freed goes back to the total. */
        bool over = gpc_lease_keep(id) == 0;
        gpc_lease_take_back(d, s, entry_index(l, me), over ? 0 : gpc_lease_chunk(limit));
        if (over && atomic_load_explicit(&d->slot.leased, memory_order_relaxed) <= limit)
            gpc_lease_keep_set(id, limit, false);
        gpc_lease_reopen(l, d);
    }
    gpc_ledger_unlock(d);
}

/* Bytes back into this process's lease (no lock), `freed`: a free of the program's (counted). */
static inline __attribute__((always_inline)) void release(int id, uint64_t bytes, bool freed)
{
    struct gpc_ledger_proc *me = gpc_ledger_me();
    if (!me)
        return; /* logged; this process holds no lease */
    uint64_t spare = gpc_lease_release(&me->share[id], bytes);
    if (freed)
        count(id, true, bytes);
    else
        hold(id, -(int64_t)bytes);
    timeline_note(id, false);
    if (gpc_unlikely(spare > gpc_lease_keep(id)))
        release_spare(id);
}

void gpc_budget_release(int id, uint64_t bytes)
{
    if (id >= 0)
        release(id, bytes, true);
}

void gpc_budget_release_charge(int id, uint64_t bytes)
{
    if (id >= 0)
        release(id, bytes, false);
}

void gpc_budget_release_refused(int id, uint64_t bytes, unsigned how)
{
    if (id < 0)
        return;
    release(id, bytes, false);
    if (!(how & GPC_ADMIT_CONTEXT))
        uncount(id);
    else
        atomic_fetch_sub_explicit(&gpc_ledger->dev[id].context_count, 1, memory_order_relaxed);
    if (how & GPC_REFUSED_BY_DRIVER)
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

void gpc_budget_bind(int id, uint64_t asked, bool binds, bool from_file)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger)
        return;
    /* The file's figure, where none is recorded yet (the first process that follows the file). */
    if (from_file && gpc_ledger_shared)
        gpc_lease_note_file_limit(&gpc_ledger->dev[id], asked, true);
    struct gpc_ledger_proc *me = atomic_load(&gpc_ledger_entry);
    uint64_t mine = gpc_ledger_shared && me ? atomic_load(&me->share[id].limit) : 0;
    gpc_lease_bind(id, mine ? mine : asked, binds);
    atomic_store(&seen_changes[id], atomic_load(&gpc_ledger->dev[id].limit_changes));
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
    /* Dead processes' shares out first: what the change is compared with (above a lowered budget
     * or not) is what the live processes hold, as `gpucap status` and the exporter then show. */
    gpc_ledger_reap();
    gpc_ledger_me(); /* before the lock: a claim may take device locks */
    struct gpc_ledger_dev *d = gpc_ledger_lock_dev(id, "the budget changes at the next check");
    if (!d)
        return -EAGAIN;
    struct gpc_ledger *l = gpc_ledger;
    struct gpc_ledger_proc *mp = atomic_load(&gpc_ledger_entry);
    int me = mp && entry_index(l, mp) >= 0 && entry_index(l, mp) < GPC_LEDGER_PROCS ? entry_index(l, mp) : -1;
    uint64_t before = gpc_lease_limit(d, id), ledger_before = atomic_load(&d->slot.limit);
    /* The processes that asked for what this one asked for read the same settings: they ask for
     * the new figure now (each checks it against its own settings at its next check). A request
     * of `gpucap set-memory` is for every process. The smallest ask of those holding an entry
     * stays the ledger's limit, as at registration. */
    bool cli = (by & GPC_LIMIT_BY_MASK) == GPC_LIMIT_BY_CLI, from_file = by & GPC_LIMIT_FROM_FILE;
    /* The file's figure as the processes that follow it asked it: theirs move too, whoever applies
     * (this process may have read the new file at its start, and asked its figure already). */
    uint64_t file_before = from_file ? gpc_lease_note_file_limit(d, limit, false) : 0;
    uint64_t lowest = gpc_ledger_shared
                          ? gpc_ledger_asks_set(l, id, me, gpc_lease_own_limit(id), file_before, limit, cli)
                          : limit;
    by &= ~GPC_LIMIT_FROM_FILE;
    gpc_lease_set_own(id, limit);
    /* Applied at once: lowered, every spare is closed and taken back before anything more is
     * admitted (lease.c, point 4); raised, closed spares open if the leases fit. */
    gpc_lease_set_limit(l, d, lowest);
    uint64_t after = gpc_lease_limit(d, id), ledger_after = atomic_load(&d->slot.limit);
    /* One record per change of the limit in force, whichever process applied it first. */
    if (ledger_after != ledger_before)
        gpc_lease_note_change(d, ledger_before, ledger_after, by, gpc_ledger_in_use(l, id));
    if (cli)
        atomic_store(&d->limit_by, (uint16_t)(GPC_LIMIT_BY_CLI | GPC_LIMIT_HELD));
    if (after < before) {
        /* No lock-free admission is left above the new limit; what is held stays. */
        gpc_lease_take_all(l, d);
    }
    gpc_lease_keep_set(id, after, atomic_load(&d->slot.leased) > after);
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
    uint64_t limit = gpc_lease_limit(d, id);
    if (atomic_load(&d->slot.leased) > limit)
        gpc_lease_keep_set(id, limit, true);
}

/* ---- audit mode and memory the driver took (asked for by `gpucap`; see charge.c, context.c) ---- */

int gpc_budget_admit_unchecked(int id, uint64_t bytes)
{
    if (id < 0)
        return 0;
    return gpc_budget_admit(id, bytes, GPC_ADMIT_UNCHECKED);
}

int gpc_budget_force(int id, uint64_t bytes)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES || !gpc_ledger || bytes == 0)
        return id == GPC_BUDGET_DENY || id == GPC_BUDGET_NONE ? 0 : -EINVAL;
    if (!gpc_ledger_me())
        return -ENOMEM;
    struct gpc_ledger_dev *d = gpc_ledger_lock_dev(id, "memory the driver took is charged at the next look");
    if (!d)
        return -EAGAIN;
    struct gpc_ledger *l = gpc_ledger;
    struct gpc_ledger_proc *me = gpc_ledger_me();
    int rc = -ENOMEM;
    if (me && entry_index(l, me) >= 0 && entry_index(l, me) < GPC_LEDGER_PROCS) {
        struct gpc_ledger_share *s = &me->share[id];
        uint64_t after;
        if (gpc_lease_take(s, bytes, &after) || gpc_lease_grow(d, s, id, bytes, true, true))
            rc = 0;
        uint64_t limit = gpc_lease_limit(d, id);
        if (rc == 0 && atomic_load_explicit(&d->slot.leased, memory_order_relaxed) > limit) {
            /* Past the limit now: as for a lowered limit (lease.c, point 4), every spare is closed
             * and taken back, and nothing more is admitted until what is held fits again. */
            gpc_lease_close(l, d);
            gpc_lease_take_all(l, d);
            gpc_lease_keep_set(id, limit, true);
        }
        gpc_lease_reopen(l, d);
    }
    gpc_ledger_unlock(d);
    if (rc == 0) {
        hold(id, (int64_t)bytes);
        timeline_note(id, false);
    }
    return rc;
}

uint32_t gpc_budget_thread_mark(int id)
{
    if (id < 0 || id >= GPC_LEDGER_DEVICES)
        return 0;
    const struct counts *c = &my_counts;
    return (uint32_t)c->flushes << 16 | (uint16_t)atomic_load_explicit(&c->allocs[id], memory_order_relaxed);
}

void gpc_budget_count_denial(int id)
{
    struct gpc_slot *s = gpc_budget_slot(id);
    if (s)
        count_denial(s);
}

void gpc_budget_note_denial(int id, uint64_t bytes)
{
    struct gpc_slot *s = gpc_budget_slot(id);
    if (!s)
        return;
    gpc_atomic_max(&s->largest, bytes);
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


/* ---- figures ---- */

uint64_t gpc_budget_in_use(int id)
{
    if (id < 0 || !gpc_ledger)
        return 0;
    uint64_t in_use = gpc_ledger_in_use(gpc_ledger, id);
    gpc_atomic_max(&gpc_ledger->dev[id].slot.peak, in_use); /* the device's peak: the sums seen */
    gpc_atomic_max(&gpc_ledger->dev[id].period_peak, in_use); /* and its budget period's */
    /* Burstable: what is in use above the request is on loan (only a grant admits past it). */
    struct gpc_ledger_dev *d = &gpc_ledger->dev[id];
    if (gpc_unlikely(atomic_load_explicit(&d->qos_flags, memory_order_relaxed) & GPC_QOS_BURSTABLE)) {
        uint64_t r = atomic_load_explicit(&d->qos_request, memory_order_relaxed);
        if (in_use > r)
            gpc_atomic_max(&d->loaned_peak, in_use - r);
    }
    return in_use;
}

uint64_t gpc_budget_peak(int id)
{
    if (id < 0 || !gpc_ledger)
        return 0;
    uint64_t in_use = gpc_budget_in_use(id), peak = gpc_ledger_peak(gpc_ledger, id);
    return peak > in_use ? peak : in_use;
}
