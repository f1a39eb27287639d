/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reclaim.c: memory kept for reuse, given back before a denial.
 *
 * Stream-ordered pools and graph memory keep what their allocations freed, and it stays charged to
 * the budget. Before an allocation is denied, charge.c asks every module that keeps such memory to
 * give back what it holds unused on the device (gpc_reclaim). The modules (charge/pool.c,
 * charge/graph.c) register their step at start-up (hooks/init.c): they call charge.c to charge
 * their allocations, and charge.c reaches them only through what they registered, so there is no
 * circle between them (tools/check_layers.sh checks the objects for one).
 */
#include "charge/reclaim.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#define MAX_RECLAIMERS 4

static gpc_reclaim_fn *reclaimers[MAX_RECLAIMERS];
static atomic_int nreclaimers;

int gpc_reclaim_register(gpc_reclaim_fn *fn)
{
    int n = atomic_load_explicit(&nreclaimers, memory_order_relaxed);
    if (n == MAX_RECLAIMERS)
        return -ENOSPC;
    reclaimers[n] = fn;
    atomic_store_explicit(&nreclaimers, n + 1, memory_order_release);
    return 0;
}

bool gpc_reclaim(int device)
{
    bool freed = false;
    int n = atomic_load_explicit(&nreclaimers, memory_order_acquire);
    for (int i = 0; i < n; i++)
        freed |= reclaimers[i](device);
    return freed;
}
