/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_map.h: the ledger module's contract (core/ledger_*.c, whose shared internals are
 * core/ledger_int.h): this process's mapping of the ledger, the record of usage shared by the
 * processes of a container, its entry there, the device entries and their locks. The file's layout
 * and its read side are common/ledger.h; the lease and spare words are core/lease.c's.
 */
#ifndef GPUCAP_CORE_LEDGER_MAP_H
#define GPUCAP_CORE_LEDGER_MAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"
#include "common/ledger.h"
#include "core/locks.h"

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
/*
 * This process's entry in the ledger in use (claimed on first use, again after fork, with this
 * process's own limits; an exec'd image takes over the entry of its pid and start time from zero),
 * or NULL when the table is full (logged). One pointer: a move to another file (a rebuild, a file
 * replaced at the path) publishes the entry there in one store, so no caller pairs one file with
 * an index into another.
 */
extern struct gpc_ledger_proc *_Atomic gpc_ledger_entry;
struct gpc_ledger_proc *gpc_ledger_claim(void);
static inline struct gpc_ledger_proc *gpc_ledger_me(void)
{
    struct gpc_ledger_proc *p = atomic_load_explicit(&gpc_ledger_entry, memory_order_relaxed);
    return gpc_likely(p != NULL) ? p : gpc_ledger_claim();
}
/*
 * The ledger's part of the fork sequence (hooks/init.c) for its locks (core/locks.h:
 * LEDGER_CLAIM, LEDGER_REPAIR, LEDGER_RECOVER). In the child, at LEDGER_CLAIM, this process's
 * entry is forgotten: a fork child is another process, which claims its own entry when it first
 * needs one, carrying the limit in force for its parent then; a private budget's copy is emptied.
 */
void gpc_ledger_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);
/*
 * True when this process's entry names another pid than its own: it was made by a raw clone (no
 * fork handler ran) and still uses its parent's entry. gpc_ledger_forget then lets it claim one of
 * its own at its next need, as a fork child does (its parent's share stays its parent's).
 */
bool gpc_ledger_pid_changed(void);
void gpc_ledger_forget(void);
/* A descriptor of the shared ledger's file that holds no lock, for the read side's
 * gpc_ledger_entry_live (-1: a private budget, or none). */
int gpc_ledger_reader_fd(void);
/* Gives back the budget of dead processes (gone, zombies, images that exec'd) and recomputes the
 * limits they set; returns how many were reclaimed. */
int gpc_ledger_reap(void);
/*
 * Set by the SIGBUS guard when the ledger file was shrunk under this process (the mapping now holds
 * zero pages). gpc_ledger_recover(held) then moves the process to a private budget with the same
 * entry indices and its limits, charged exactly what it holds (held(id): its own count, kept
 * outside the mapping by the caller, core/budget.c), and says so once. Budget calls check the flag
 * on the shared path only.
 */
extern atomic_bool gpc_ledger_broken;
void gpc_ledger_recover(uint64_t (*held)(int id));
/*
 * Guards one more read-only file mapping as the ledger's is (charge/live.c's view of the settings
 * file, which whoever can write that file could shrink under it): a fault inside [base, base + len)
 * maps zero pages there and sets *hit, so the access reads zeros instead of killing the process.
 * One such mapping; NULL: none.
 */
void gpc_ledger_guard_also(const void *base, size_t len, atomic_bool *hit);
/* Touches the whole mapping, so that a file shrunk since is noticed (gpc_ledger_broken) before a
 * figure is read from it: for callers about to report one (core/budget.c's gpc_budget_refresh). */
void gpc_ledger_probe(void);
/* gpc_ledger_reap at most every 100 ms per process (a shared ledger only): before a figure. */
void gpc_ledger_reap_lazy(void);
/*
 * Around an exec (hooks/exec.c): marks this process's entry "exec under way" (true if it marked
 * it: a process that never touched CUDA has none, and a vfork child must not mark its parent's),
 * then clears the mark when the exec returned, that is failed. See gpc_ledger_proc_alive.
 */
bool gpc_ledger_exec_begin(void);
void gpc_ledger_exec_end(bool marked);
/* A live change moved device entry d's limit: what this process keeps for a private budget after a
 * shrink, for a fork child's entry and for a move is the limit in force now (budget.c). */
void gpc_ledger_note_limit(int d);
/*
 * Under entry `id`'s lock, a live change of the asks (the limit each process asked for, whose
 * smallest is the entry's limit): the processes that asked for `old` or `old_file` (0: none), entry
 * `me` (this process's, -1: none) and, with `all`, every process ask for `limit` now. Returns the
 * smallest ask of the processes holding an entry, `limit` at most.
 */
uint64_t gpc_ledger_asks_set(struct gpc_ledger *l, int id, int me, uint64_t old, uint64_t old_file, uint64_t limit,
                             bool all);
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
