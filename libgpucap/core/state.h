/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.h: this process's state (state.c): the settings it loaded and whether it counts.
 *
 * The settings are written here alone: once by gpc_config_load, at the lazy start-up (hooks/init.c
 * asks), and then only their limits, by gpc_config_adopt_limits when the settings file was
 * rewritten (charge/live.c asks, holding the device set-up lock, which every reader of the limits
 * holds: charge/device.c). The flags are written by the start-up and the exit sequence of the
 * hooks layer (hooks/init.c). Every other layer only reads them.
 */
#ifndef GPUCAP_CORE_STATE_H
#define GPUCAP_CORE_STATE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/defs.h"
#include "common/options.h"

/* The settings this process loaded at start-up; gpc_config.platform, under the platform's lock,
 * points at the platform file's own settings, which state.c keeps too. */
extern struct gpc_settings gpc_config;
/* Loads gpc_config (and the platform's copy) from the settings file and `envp`: the start-up's. */
void gpc_config_load(char *const *envp);
/*
 * A settings file rewritten while the process runs, re-read whole into `fresh` (a good read: no
 * error, the same lock): its limits become gpc_config's (memory_limit and its per-device forms,
 * memory_limit_max), and under the lock the platform file's settings become the platform's copy.
 * Nothing else of gpc_config changes live. Call it holding the device set-up lock.
 */
void gpc_config_adopt_limits(const struct gpc_settings *fresh);
/* 1 once settings are loaded and the real driver resolved; hooks may run before the constructor. */
extern atomic_int gpc_initialized;
/* True when hooks must only pass calls through: no budget configured, or after the destructor. */
extern atomic_bool gpc_passthrough;
/*
 * True when this call should be counted against a budget: the library started (a hook called
 * gpc_init() first) and counts. Before start-up and after shutdown everything passes through.
 */
static inline bool gpc_counting(void)
{
    return !atomic_load_explicit(&gpc_passthrough, memory_order_relaxed);
}
/*
 * True after the exit sequence closed the budget: frees pass through uncounted, and every
 * allocation is denied. Other threads run on while exit() runs the destructors after ours (a
 * library initialised before gpucap, such as one preloaded after it, can hold exit there): they
 * must not allocate past a budget nobody counts any more.
 */
extern atomic_bool gpc_closed;
static inline bool gpc_closed_now(void)
{
    return atomic_load_explicit(&gpc_closed, memory_order_relaxed);
}

#endif
