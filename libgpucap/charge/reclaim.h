/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reclaim.h: memory kept for reuse, given back before a denial (reclaim.c).
 */
#ifndef GPUCAP_CHARGE_RECLAIM_H
#define GPUCAP_CHARGE_RECLAIM_H

#include <stdbool.h>

/* A module's step: gives back what it keeps unused on `device`; true when anything was released. */
typedef bool gpc_reclaim_fn(int device);
/* Adds a step (at start-up, before any allocation is charged: hooks/init.c). 0, or -ENOSPC when full. */
int gpc_reclaim_register(gpc_reclaim_fn *fn);
/* Runs every registered step for `device`: true when any released memory (admission may retry). */
bool gpc_reclaim(int device);

#endif
