/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.h: budgets that change while the processes run (live.c).
 */
#ifndef GPUCAP_CHARGE_LIVE_H
#define GPUCAP_CHARGE_LIVE_H

#include <stdbool.h>

#include "core/locks.h"

/*
 * At start-up, after the ledger: notes the settings file read (its identity, to see it rewritten)
 * and registers the check with budget.c.
 */
void gpc_live_start(void);
/*
 * Looks for changed limits and applies them: a request of `gpucap set-memory` posted in the ledger
 * (unlocked settings only), a change another process applied (gpc_budget_sync), and a rewritten
 * settings file (at most once a second unless `now`; re-read whole, and only its limits applied).
 * True when a limit of this process changed. Never on the allocation fast path.
 */
bool gpc_live_check(bool now);
/* Its part of the fork sequence (hooks/init.c), for its lock (core/locks.h: LIVE). */
void gpc_live_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);

#endif
