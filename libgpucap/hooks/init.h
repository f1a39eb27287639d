/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init.h: the lazy start-up (init.c) that every exported entry point runs first.
 *
 * The layers below the hooks never start the library: they read core/state.h, which says
 * "pass through" until the start-up is done. So a hook calls gpc_init() (or gpc_enforcing())
 * before anything that counts.
 */
#ifndef GPUCAP_HOOKS_INIT_H
#define GPUCAP_HOOKS_INIT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/defs.h"
#include "core/state.h"

#define GPC_EXPORT __attribute__((visibility("default")))

/* Loads the settings and resolves the driver, once, whichever thread calls first. */
void gpc_init_slow(void);
static inline void gpc_init(void)
{
    if (gpc_unlikely(!atomic_load_explicit(&gpc_initialized, memory_order_acquire)))
        gpc_init_slow();
}
/* gpc_init() then true when this call should be counted against a budget. */
static inline bool gpc_enforcing(void)
{
    gpc_init();
    return gpc_counting();
}

/* report_exit.c: the report at exit (GPUCAP_REPORT) and the timeline file (GPUCAP_TIMELINE), for
 * the exit sequence (init.c). */
void gpc_report_at_exit(void);

#endif
