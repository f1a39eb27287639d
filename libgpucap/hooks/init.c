/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init.c: the lifecycle of the library in a process, in one place: the start-up, the fork
 * sequence and the exit sequence.
 *
 * Nothing happens when the library is loaded: a process that never touches CUDA (a shell, `ls`,
 * with gpucap in /etc/ld.so.preload) gets no file read, no thread, no output. The first hooked CUDA
 * call, on any thread, loads the settings and resolves the driver, once. Hooks can run before our
 * constructor (from another library's constructor) and after our destructor (from atexit handlers,
 * other libraries' destructors, other threads still running): the first case is the lazy start-up;
 * in the second allocations are denied and frees pass through (core/state.h): this process's
 * share stays in the ledger until the process is dead (core/ledger_procs.c), and an allocation
 * passed through uncapped there would put the card over the budget. The state it sets lives in
 * core/state.c, which the layers below read; only the hooks start the library.
 *
 * The fork sequence: every lock of the library has a rank (core/locks.h, the whole list, and each
 * rank's part). Before fork() the sequence takes every lock held across a fork, rank by rank from
 * the lowest, through the module that owns it (fork_owner below); after it the parent releases
 * them from the highest down, and the child makes every lock but the ledger's shared ones fresh
 * and resets what it does not inherit (its parent's threads, contexts, entry, counts), rank by
 * rank again. Registered once, at the start-up, so its order is
 * the table's whatever the process did before (jemalloc's jemalloc_prefork is the model).
 *
 * The exit sequence, one destructor with its steps written in order: the report (GPUCAP_REPORT)
 * with the figures as they stand, then the budget closes (below), then audit mode's summary. "After
 * our destructor" means at exit only. A destructor can also be called by hand (its address is in
 * the library's DT_FINI_ARRAY, for anyone to read): that must not end enforcement nor give back
 * this process's share while its memory is still live. So start-up registers an exit handler,
 * which exit() runs before any destructor (glibc runs the objects' destructors from its own exit
 * handler, registered first and so run last), and the closing step does nothing unless that
 * handler ran. It is registered for no object (__cxa_atexit with a NULL handle), because the
 * DT_FINI_ARRAY of every object also holds __do_global_dtors_aux, which runs the handlers
 * registered by that object (__cxa_finalize): a plain atexit() would be run by the same hand. The
 * library is linked -z nodelete, so the handler is still mapped at exit after any dlclose.
 */
#include "hooks/init.h"

#include "common/log.h"
#include "common/drvlimit.h"
#include "common/options.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "core/locks.h"
#include "core/state.h"
#include "core/timeline.h"
#include "core/track.h"
#include "driver/resolve.h"
#include "charge/charge.h"
#include "charge/device.h"
#include "charge/live.h"
#include "charge/graph.h"
#include "charge/context.h"
#include "charge/pool.h"
#include "charge/reclaim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread bool starting;
/* Set by exit() (through note_exit): the process is really ending. */
static atomic_bool exiting;

/* glibc's (and the C++ ABI's) registration of exit handlers; ours belongs to no object. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static void note_exit(void *unused)
{
    (void)unused;
    atomic_store(&exiting, true);
}

/*
 * The CUDA runtime registers its own exit handler when it starts, after ours, so exit() runs it
 * first: it releases the runtime's primary contexts, and with them (rightly: the driver frees
 * them then) every allocation made in them. What the process held when it began to exit, the
 * report's "held at exit", would read 0 for every job that uses the runtime. So a second handler is
 * registered at the first allocation (the runtime has started by then): it runs before the
 * runtime's and notes what is held; the destructor reports that figure when it is the larger.
 */
static void note_exit_begins(void *unused)
{
    (void)unused;
    if (atomic_load(&gpc_initialized) && !atomic_load(&gpc_passthrough) && gpc_ledger)
        gpc_budget_note_exit_begins();
}

static void late_exit_handler(void)
{
    __cxa_atexit(note_exit_begins, NULL, NULL);
}

/* ---- the fork sequence ---- */

/* The owner of each rank's locks (core/locks.h): its part of the sequence. NULL for the ledger's
 * robust, process-shared locks, which are never held across a fork. */
static gpc_fork_fn *const fork_owner[GPC_LOCK__COUNT] = {
    [GPC_LOCK_CTX_LIFE] = gpc_context_fork,      [GPC_LOCK_PRIMARY] = gpc_context_fork,
    [GPC_LOCK_POOL] = gpc_pools_fork,            [GPC_LOCK_POOL_TABLE] = gpc_pools_fork,
    [GPC_LOCK_GRAPH_TRIM] = gpc_graphs_fork,     [GPC_LOCK_GRAPH_DEV] = gpc_graphs_fork,
    [GPC_LOCK_GRAPH_TABLE] = gpc_graphs_fork,    [GPC_LOCK_POOL_KEPT] = gpc_pools_fork,
    [GPC_LOCK_MEASURE] = gpc_context_fork,       [GPC_LOCK_LIVE] = gpc_live_fork,
    [GPC_LOCK_SETUP] = gpc_device_fork,          [GPC_LOCK_LEDGER_CLAIM] = gpc_ledger_fork,
    [GPC_LOCK_LEDGER_REPAIR] = gpc_ledger_fork,  [GPC_LOCK_LEDGER_TABLE] = NULL,
    [GPC_LOCK_LEDGER_DEV] = NULL,                [GPC_LOCK_LEDGER_RECOVER] = gpc_ledger_fork,
    [GPC_LOCK_CTX_CACHE] = gpc_device_fork,      [GPC_LOCK_TIMELINE] = gpc_timeline_fork,
    [GPC_LOCK_TRACK_SHARD] = gpc_track_fork,     [GPC_LOCK_TRACK_WIDE] = gpc_track_fork,
};
/* Each rank's part (the table's second column). */
static const enum gpc_fork_policy fork_policy[GPC_LOCK__COUNT] = {
#define GPC_LOCK_RANK_POLICY(rank, fork, doc) [GPC_LOCK_##rank] = GPC_FORK_##fork,
    GPC_LOCK_RANKS(GPC_LOCK_RANK_POLICY)
#undef GPC_LOCK_RANK_POLICY
};

static void prefork(void)
{
    for (int r = 0; r < GPC_LOCK__COUNT; r++)
        if (fork_policy[r] == GPC_FORK_HELD)
            fork_owner[r](GPC_FORK_PREPARE, (enum gpc_lock_rank)r);
}

static void postfork_parent(void)
{
    for (int r = GPC_LOCK__COUNT - 1; r >= 0; r--)
        if (fork_policy[r] == GPC_FORK_HELD)
            fork_owner[r](GPC_FORK_PARENT, (enum gpc_lock_rank)r);
}

static void postfork_child(void)
{
    for (int r = 0; r < GPC_LOCK__COUNT; r++)
        if (fork_owner[r])
            fork_owner[r](GPC_FORK_CHILD, (enum gpc_lock_rank)r);
    /* State that no lock guards: the parent's batched counts and what it holds. */
    gpc_budget_fork_child();
    gpc_witness_fork_child();
}

/* ---- the start-up ---- */

static void start(void)
{
    extern char **environ;
    starting = true;
    gpc_config_load(environ);
    gpc_resolve_cuda(NULL);
    /* Every rank that takes part in the fork has its owner, the shared ones none (debug builds check). */
    for (int r = 0; r < GPC_LOCK__COUNT; r++)
        GPC_ASSERT((fork_policy[r] == GPC_FORK_SHARED) == (fork_owner[r] == NULL));
    pthread_atfork(prefork, postfork_parent, postfork_child);
    __cxa_atexit(note_exit, NULL, NULL);
    /* What pools and graph memory keep for reuse is given back before a denial (charge.c). */
    gpc_reclaim_register(gpc_pools_trim);
    gpc_reclaim_register(gpc_graphs_trim);
    /* What the card holds for contexts beyond their reserves is measured at locked steps. */
    gpc_budget_set_measure(gpc_context_measure);
    /* A freed pointer of a pool without a slot stays charged as memory its pool keeps. */
    gpc_charge_keeper(gpc_pools_keep);
    gpc_budget_on_first(late_exit_handler);
    /* A limit the platform declared for the driver (NVIDIA_GPU_MEMORY_LIMIT) is a budget too:
     * gpucap then enforces min(its own, the driver's), and without its own, the driver's (device.c). */
    bool any = gpc_settings_any_limit(&gpc_config) || gpc_drv_declared(environ, NULL) != 0;
    if (!any)
        gpc_log(GPC_LOG_WARN, "loaded with no memory limit: CUDA allocations pass through uncapped (set "
                "GPUCAP_MEMORY_LIMIT, or memory_limit in %s)", gpc_config.config_path);
    if (any) {
        gpc_ledger_attach();
        gpc_ledger_identify();
        gpc_timeline_start();
        gpc_live_start();
    }
    atomic_store(&gpc_passthrough, !any);
    atomic_store_explicit(&gpc_initialized, 1, memory_order_release);
    starting = false;
}

void gpc_init_slow(void)
{
    if (starting)
        return;
    pthread_once(&once, start);
}

/* ---- the exit sequence ---- */

/*
 * The budget closes. At normal exit only the counts and what it holds then (a figure) go in. The
 * share stays: the driver frees this process's memory when its device files close, after every
 * destructor and atexit handler (ours may run before others that still hold memory), so it is
 * taken back by the next process that reaps, once this one is dead (core/ledger_procs.c). Giving it
 * back here would let another process be admitted into memory still on the card; passing later
 * allocations through uncapped would let this one allocate past the budget (another thread runs
 * until exit_group, other destructors may allocate): they are denied. A free passes through: its
 * bytes stay charged until the process is dead (over, never under).
 */
static void close_budget(void)
{
    if (!atomic_load(&exiting)) {
        /* Not at exit (called by hand, or an unload): the memory is live, enforcement stays. */
        if (atomic_load(&gpc_initialized))
            gpc_log(GPC_LOG_WARN, "destructor called while the process is not exiting: ignored, the budget "
                    "stays enforced");
        return;
    }
    /* From here allocations are denied, frees pass through (core/state.h). */
    if (atomic_load(&gpc_initialized) && !atomic_load(&gpc_passthrough))
        atomic_store(&gpc_closed, true);
    atomic_store(&gpc_passthrough, true);
    if (atomic_load(&gpc_initialized) && gpc_ledger) {
        gpc_budget_flush_counts();
        gpc_budget_note_exit();
    }
}

/* The one destructor: the exit sequence, its steps in this order (see the top). */
__attribute__((destructor)) static void exit_sequence(void)
{
    gpc_report_at_exit();
    close_budget();
    gpc_charge_audit_summary();
}
