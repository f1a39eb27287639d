/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_map.h: this process's mapping of the ledger (ledger.c), the record of usage shared by the
 * processes of a container. The file's layout and its read side are common/ledger.h.
 */
#ifndef GPUCAP_CORE_LEDGER_MAP_H
#define GPUCAP_CORE_LEDGER_MAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/defs.h"
#include "common/ledger.h"

extern struct gpc_ledger *gpc_ledger;
/* True: a ledger file shared with other processes (locked admission, per-process accounting).
 * False: a budget private to this process (GPUCAP_LEDGER=off, or after a ledger error). */
extern bool gpc_ledger_shared;
/* Maps the ledger named by the settings, or a private one after one clear error; under the lock,
 * after that error, none (every budget denies). Never fails. */
void gpc_ledger_attach(void);
/*
 * Writes the identity settings that are set and valid (GPUCAP_POD_NAMESPACE, _POD_NAME, _POD_UID,
 * GPUCAP_CONTAINER_NAME) and this library's version into the shared ledger's identity block,
 * under its table lock. Nothing for a private ledger; a lock not obtained leaves the block as is.
 */
void gpc_ledger_identify(void);
/*
 * The ledger entry of the device with this UUID, registering it with `limit` if new (under the
 * rule "the smallest limit among live processes wins", with a warning on disagreement). Returns
 * the entry index; -ENOSPC when the device table is really full; -EAGAIN when a lock was not
 * obtained in time or the process table is full (logged): the caller tries again at its next call;
 * -EACCES when the platform's ledger was refused under the lock (logged at attach): denied.
 */
int gpc_ledger_device(const uint8_t uuid[16], uint64_t physical, uint64_t limit, int ordinal);
/* This process's entry (claimed on first use, again after fork; an exec'd image takes over the
 * entry of its pid and start time from zero), or -ENOSPC when the table is full (logged). */
extern _Atomic int gpc_ledger_index;
int gpc_ledger_claim(void);
static inline int gpc_ledger_me(void)
{
    int me = atomic_load_explicit(&gpc_ledger_index, memory_order_relaxed);
    return gpc_likely(me >= 0) ? me : gpc_ledger_claim();
}
/* Gives back the budget of dead processes and recomputes the limits they set; returns how many
 * were reclaimed. */
int gpc_ledger_reap(void);
/*
 * Set by the SIGBUS guard when the ledger file was shrunk under this process (the mapping now holds
 * zero pages). gpc_ledger_recover() then moves the process to a private budget with the same entry
 * indices, its limits and its leases (gpc_ledger_mine, kept by budget.c outside the mapping: the
 * spare part of a lease is charged as in use from then on), and says so once. Budget calls check
 * it on the shared path only.
 */
extern atomic_bool gpc_ledger_broken;
extern _Atomic uint64_t gpc_ledger_mine[GPC_LEDGER_DEVICES];
void gpc_ledger_recover(void);
static inline void gpc_ledger_check_broken(void)
{
    if (gpc_unlikely(gpc_ledger_shared && atomic_load_explicit(&gpc_ledger_broken, memory_order_relaxed)))
        gpc_ledger_recover();
}
/* gpc_ledger_reap at most every 100 ms per process: for callers about to report a figure. */
void gpc_ledger_reap_lazy(void);
/* At normal exit: takes this process's share and limits out of the ledger and frees its entry. */
void gpc_ledger_leave(void);
/*
 * Locks device entry `id` of the ledger (robust, bounded wait) and returns it, or NULL after
 * logging "...; <consequence>" (with the holder's pid when the wait timed out). A ledger whose lock
 * was left not recoverable is rebuilt under a fresh file first: use the entry returned (and
 * gpc_ledger after the call), never one taken before.
 */
struct gpc_ledger_dev *gpc_ledger_lock_dev(int id, const char *consequence);
/* Locks device entry `id` if it is free now (a dead owner's entry is recovered), else NULL, quietly. */
struct gpc_ledger_dev *gpc_ledger_trylock_dev(int id);
void gpc_ledger_unlock(struct gpc_ledger_dev *d);

#endif
