/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init.c: start-up and shutdown.
 *
 * Nothing happens when the library is loaded: a process that never touches CUDA (a shell, `ls`,
 * with gpucap in /etc/ld.so.preload) gets no file read, no thread, no output. The first hooked CUDA
 * call, on any thread, loads the settings and resolves the driver, once. Hooks can run before our
 * constructor (from another library's constructor) and after our destructor (from atexit handlers):
 * the first case is the lazy start-up, the second passes everything through.
 */
#include "internal.h"

#include <pthread.h>

struct gpc_settings gpc_settings;
atomic_int gpc_initialized;
/* True until start-up is done, so that a hook re-entered during start-up passes through. */
atomic_bool gpc_passthrough = true;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread bool starting;

static void start(void)
{
    extern char **environ;
    starting = true;
    gpc_settings_load(&gpc_settings, environ);
    gpc_resolve_cuda(NULL);
    /* Fork handlers run their prepare steps in reverse order of registration: the primary-context
     * lock is taken before the set-up lock, in the order the hooks take them. */
    gpc_track_atfork();
    gpc_device_atfork();
    gpc_ctx_atfork();
    gpc_budget_atfork();
    /* What pools and graph memory keep for reuse is given back before a denial (charge.c). */
    gpc_reclaim_register(gpc_pools_trim);
    gpc_reclaim_register(gpc_graphs_trim);
    bool any = gpc_settings_any_limit(&gpc_settings);
    if (!any)
        gpc_log(GPC_LOG_WARN, "loaded with no memory limit: CUDA allocations pass through uncapped (set "
                "GPUCAP_MEMORY_LIMIT, or memory_limit in %s)", gpc_settings.config_path);
    if (any) {
        gpc_ledger_attach();
        gpc_ledger_identify();
        gpc_timeline_start();
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
 * At normal exit only the counts go in. The share stays: the driver frees this process's memory
 * when its device files close, after every destructor and atexit handler (ours may run before
 * others that still hold memory), so it is taken back by the next process that reaps, once this
 * one is dead (ledger.c). Giving it back here would let another process be admitted into memory
 * still on the card.
 */
__attribute__((destructor)) static void stop(void)
{
    atomic_store(&gpc_passthrough, true);
    if (atomic_load(&gpc_initialized) && gpc_ledger)
        gpc_budget_flush_counts();
}
