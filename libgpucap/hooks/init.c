/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init.c: start-up and shutdown.
 *
 * Nothing happens when the library is loaded: a process that never touches CUDA (a shell, `ls`,
 * with gpucap in /etc/ld.so.preload) gets no file read, no thread, no output. The first hooked CUDA
 * call, on any thread, loads the settings and resolves the driver, once. Hooks can run before our
 * constructor (from another library's constructor) and after our destructor (from atexit handlers,
 * other libraries' destructors, other threads still running): the first case is the lazy start-up;
 * in the second allocations are denied and frees pass through (core/state.h): this process's
 * share stays in the ledger until the process is dead (ledger.c), and an allocation passed through
 * uncapped there would put the card over the budget. The state it sets lives in core/state.c,
 * which the layers below read; only the hooks start the library.
 *
 * "After our destructor" means at exit only. A destructor can also be called by hand (its address
 * is in the library's DT_FINI_ARRAY, for anyone to read): that must not end enforcement nor give
 * back this process's share while its memory is still live. So start-up registers an exit
 * handler, which exit() runs before any destructor (glibc runs the objects' destructors from its
 * own exit handler, registered first and so run last), and the destructor does nothing unless
 * that handler ran. It is registered for no object (__cxa_atexit with a NULL handle), because
 * the DT_FINI_ARRAY of every object also holds __do_global_dtors_aux, which runs the handlers
 * registered by that object (__cxa_finalize): a plain atexit() would be run by the same hand. The
 * library is linked -z nodelete, so the handler is still mapped at exit after any dlclose.
 */
#include "hooks/init.h"

#include "common/log.h"
#include "common/drvlimit.h"
#include "common/options.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "core/state.h"
#include "core/timeline.h"
#include "core/track.h"
#include "driver/resolve.h"
#include "charge/charge.h"
#include "charge/device.h"
#include "charge/live.h"
#include "charge/graph.h"
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

static void start(void)
{
    extern char **environ;
    starting = true;
    gpc_settings_load(&gpc_config, environ);
    gpc_resolve_cuda(NULL);
    /* Fork handlers run their prepare steps in reverse order of registration: the context locks
     * (hooks_ctx.c, context.c) are taken before the set-up lock, in the order the hooks take them. */
    gpc_track_atfork();
    gpc_device_atfork();
    gpc_ctx_atfork();
    gpc_budget_atfork();
    __cxa_atexit(note_exit, NULL, NULL);
    /* What pools and graph memory keep for reuse is given back before a denial (charge.c). */
    gpc_reclaim_register(gpc_pools_trim);
    gpc_reclaim_register(gpc_graphs_trim);
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

/*
 * At normal exit only the counts and what it holds then (a figure) go in. The share stays: the driver frees this process's memory
 * when its device files close, after every destructor and atexit handler (ours may run before
 * others that still hold memory), so it is taken back by the next process that reaps, once this
 * one is dead (ledger.c). Giving it back here would let another process be admitted into memory
 * still on the card; passing later allocations through uncapped would let this one allocate past
 * the budget (another thread runs until exit_group, other destructors may allocate): they are
 * denied. A free passes through: its bytes stay charged until the process is dead (over, never
 * under).
 */
__attribute__((destructor)) static void stop(void)
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
