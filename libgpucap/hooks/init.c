/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init.c: start-up and shutdown.
 *
 * Nothing happens when the library is loaded: a process that never touches CUDA (a shell, `ls`,
 * with gpucap in /etc/ld.so.preload) gets no file read, no thread, no output. The first hooked CUDA
 * call, on any thread, loads the settings and resolves the driver, once. Hooks can run before our
 * constructor (from another library's constructor) and after our destructor (from atexit handlers):
 * the first case is the lazy start-up, the second passes everything through. The state it sets
 * lives in core/state.c, which the layers below read; only the hooks start the library.
 */
#include "hooks/init.h"

#include "common/log.h"
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
    /* What pools and graph memory keep for reuse is given back before a denial (charge.c). */
    gpc_reclaim_register(gpc_pools_trim);
    gpc_reclaim_register(gpc_graphs_trim);
    /* A freed pointer of a pool without a slot stays charged as memory its pool keeps. */
    gpc_charge_keeper(gpc_pools_keep);
    bool any = gpc_settings_any_limit(&gpc_config);
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

/* At normal exit the driver frees everything this process holds: so does the ledger, at once,
 * for every reader (a process that dies without exiting is reaped by the others instead). */
__attribute__((destructor)) static void stop(void)
{
    atomic_store(&gpc_passthrough, true);
    if (atomic_load(&gpc_initialized) && gpc_ledger) {
        gpc_budget_flush_counts();
        gpc_ledger_leave();
    }
}
