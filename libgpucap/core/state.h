/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.h: this process's state (state.c): the settings it loaded and whether it counts.
 *
 * The hooks layer (hooks/init.c) sets them once, at the lazy start-up; every layer below only
 * reads them.
 */
#ifndef GPUCAP_CORE_STATE_H
#define GPUCAP_CORE_STATE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/defs.h"
#include "common/options.h"

/* The settings this process loaded at start-up (hooks/init.c). */
extern struct gpc_settings gpc_config;
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
 * True after the destructor ran at exit: frees pass through uncounted, and every allocation is
 * denied. Other threads run on while exit() runs the destructors after ours (a library initialised
 * before gpucap, such as one preloaded after it, can hold exit there): they must not allocate past a budget nobody counts any more.
 */
extern atomic_bool gpc_closed;
static inline bool gpc_closed_now(void)
{
    return atomic_load_explicit(&gpc_closed, memory_order_relaxed);
}

#endif
