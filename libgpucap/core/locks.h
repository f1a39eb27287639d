/* SPDX-License-Identifier: Apache-2.0 */
/*
 * locks.h: every lock of the library, by rank, and the calls that take them (locks.c).
 *
 * A thread takes locks in increasing rank only: a lock of a lower rank than one it holds is never
 * waited for (a trylock may be, it cannot deadlock). The table below is the whole list, lowest
 * first; the fork sequence (hooks/init.c) takes every lock held across a fork in this order before
 * fork() and releases them in the reverse order after it (jemalloc's jemalloc_prefork is the
 * model), so no lock is left held in the child by a thread that is not there. Debug builds
 * (GPC_DEBUG, on in the sanitizer builds) check every lock taken through these calls against the
 * ranks the thread holds, and abort naming both on a wrong order (GPC_ASSERT); other builds
 * compile the check out: the calls are the pthread calls.
 *
 * X(rank, fork, where and what), `fork` the rank's part in the fork sequence:
 *  HELD    taken before fork() (so no other thread is inside it then), released in the parent,
 *          made fresh in the child;
 *  FRESH   only made fresh in the child, whose state under it the child resets: the arrays of
 *          locks, one per pool or device (taking hundreds at once is no use to the child, and
 *          ThreadSanitizer's deadlock detector holds 64 at most);
 *  SHARED  the ledger's robust, process-shared locks, which other processes hold too: untouched
 *          (a child inherits a share of the same file, and a dead holder is the next locker's to
 *          recover).
 */
#ifndef GPUCAP_CORE_LOCKS_H
#define GPUCAP_CORE_LOCKS_H

#include <pthread.h>
#include <stdbool.h>

#include "common/defs.h"

#define GPC_LOCK_RANKS(X)                                                                                            \
    X(CTX_LIFE, HELD, "charge/context.c: creations and teardowns of contexts (hooks/ctx.c), across the driver call") \
    X(PRIMARY, HELD, "charge/context.c: the count of primary-context retains, across the driver call")               \
    X(POOL, FRESH, "charge/pool.c: each pool's allocation and settlement (other pools: trylock only)")               \
    X(POOL_TABLE, HELD, "charge/pool.c: the table of pools (a slot taken or freed)")                                 \
    X(GRAPH_TRIM, HELD, "charge/graph.c: launches with allocation nodes (read) against trims (write)")               \
    X(GRAPH_DEV, FRESH, "charge/graph.c: each device's launches under way (arithmetic only)")                        \
    X(GRAPH_TABLE, HELD, "charge/graph.c: the table of executable graphs (inserts, removals)")                       \
    X(POOL_KEPT, HELD, "charge/pool.c: what pools without a slot keep")                                              \
    X(MEASURE, HELD, "charge/context.c: a measurement of what the card holds (NVML, then a forced charge)")          \
    X(LIVE, HELD, "charge/live.c: a look at a rewritten settings file")                                              \
    X(SETUP, HELD, "charge/device.c: setting a device up, and reading its limits (live changes too)")                \
    X(LEDGER_CLAIM, HELD, "core/ledger_procs.c: this process's claim of its ledger entry")                           \
    X(LEDGER_REPAIR, HELD, "core/ledger_lock.c: a move to a rebuilt file or to the file now at the path")            \
    X(LEDGER_TABLE, SHARED, "the ledger's table lock (robust, shared): claiming device entries, the identity")       \
    X(LEDGER_DEV, SHARED, "a device entry's lock (robust, shared): leases; two only in a move, old then new")        \
    X(LEDGER_RECOVER, HELD, "core/ledger_file.c: a move to a private budget after the file was shrunk")              \
    X(CTX_CACHE, HELD, "charge/device.c: the cache of each context's device (a slot written)")                       \
    X(TIMELINE, HELD, "core/timeline.c: the usage timeline's buckets")                                               \
    X(TRACK_SHARD, HELD, "core/track.c: a shard of the pointer table (a spinlock)")                                  \
    X(TRACK_WIDE, HELD, "core/track.c: the pointer table's side store, after a shard (a spinlock)")

enum gpc_lock_rank {
#define GPC_LOCK_RANK_ENUM(rank, fork, doc) GPC_LOCK_##rank,
    GPC_LOCK_RANKS(GPC_LOCK_RANK_ENUM)
#undef GPC_LOCK_RANK_ENUM
    GPC_LOCK__COUNT
};

/* A rank's part in the fork sequence (the table's second column). */
enum gpc_fork_policy { GPC_FORK_HELD, GPC_FORK_FRESH, GPC_FORK_SHARED };

/* The steps of the fork sequence (hooks/init.c), each given to the owner of every rank. */
enum gpc_fork_step {
    GPC_FORK_PREPARE, /* before fork(): take the locks of this rank */
    GPC_FORK_PARENT,  /* after it, in the parent: release them */
    GPC_FORK_CHILD,   /* after it, in the child: make them fresh, and reset what the child does not inherit */
};
/* A module's part of the fork sequence for its locks of rank `rank`. */
typedef void gpc_fork_fn(enum gpc_fork_step step, enum gpc_lock_rank rank);
/* That part for one mutex: locked, unlocked, or initialised afresh. */
static inline void gpc_fork_mutex(pthread_mutex_t *m, enum gpc_fork_step step)
{
    if (step == GPC_FORK_PREPARE)
        pthread_mutex_lock(m);
    else if (step == GPC_FORK_PARENT)
        pthread_mutex_unlock(m);
    else
        pthread_mutex_init(m, NULL);
}

#ifdef GPC_DEBUG
/* The checks (locks.c): before waiting for a lock of `rank` (`trying`: a trylock that succeeded,
 * not checked), after releasing one, and in a fork child (it holds nothing). */
void gpc_witness_take(enum gpc_lock_rank rank, bool trying);
void gpc_witness_drop(enum gpc_lock_rank rank);
void gpc_witness_fork_child(void);
#else
static inline void gpc_witness_take(enum gpc_lock_rank rank, bool trying)
{
    (void)rank, (void)trying;
}
static inline void gpc_witness_drop(enum gpc_lock_rank rank)
{
    (void)rank;
}
static inline void gpc_witness_fork_child(void) {}
#endif

/* A trylock's result `rc`, the lock (of `rank`) counted as held when it was taken. */
static inline int gpc_witness_tried(int rc, enum gpc_lock_rank rank)
{
    if (rc == 0)
        gpc_witness_take(rank, true);
    return rc;
}

/* pthread_mutex_lock, _trylock and _unlock of a lock of rank `rank`; the same for a rwlock
 * (charge/graph.c's): read or write, a write trylock, the unlock. */
static inline void gpc_lock(pthread_mutex_t *m, enum gpc_lock_rank rank)
{
    gpc_witness_take(rank, false);
    pthread_mutex_lock(m);
}
static inline int gpc_trylock(pthread_mutex_t *m, enum gpc_lock_rank rank)
{
    return gpc_witness_tried(pthread_mutex_trylock(m), rank);
}
static inline void gpc_unlock(pthread_mutex_t *m, enum gpc_lock_rank rank)
{
    gpc_witness_drop(rank);
    pthread_mutex_unlock(m);
}
static inline void gpc_rwlock(pthread_rwlock_t *l, enum gpc_lock_rank rank, bool write)
{
    gpc_witness_take(rank, false);
    (write ? pthread_rwlock_wrlock : pthread_rwlock_rdlock)(l);
}
static inline int gpc_trywrlock(pthread_rwlock_t *l, enum gpc_lock_rank rank)
{
    return gpc_witness_tried(pthread_rwlock_trywrlock(l), rank);
}
static inline void gpc_rwunlock(pthread_rwlock_t *l, enum gpc_lock_rank rank)
{
    gpc_witness_drop(rank);
    pthread_rwlock_unlock(l);
}

#endif
